"""Real desktop applications opened on small documents inside an environment, for tests
and benchmarks of the accessibility tree (``tests/server/test_app_trees.py``,
``bench/bench_a11y.py``).

Each :class:`AppCase` knows how to prepare its document or profile in the environment's
home (a spreadsheet with data, a text document, a slide deck, a mailbox, a web page),
how to start the application on it, and what its accessibility tree must name once it
is ready: :func:`open_app` starts it and waits for that, polling the window list and
then the tree itself (no fixed sleeps), and returns the ready tree.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from osguard.errors import EnvironmentDead, EnvironmentError_

STATE_NS = "https://accessibility.ubuntu.example.org/ns/state"

# LibreOffice's first start shows a tip of the day, a "what's new" bar and, for Impress,
# the template chooser: a realistic starting state has them off, as OSWorld's image.
LIBREOFFICE_PROFILE = b"""<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Impress/Misc"><prop oor:name="StartWithTemplate" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="ooSetupInstCompleted" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>99.0</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/RecoveryInfo"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
"""

IMPRESS_DECK = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
 office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">
 <office:body><office:presentation>
  <draw:page draw:name="Overview">
   <draw:frame svg:x="2cm" svg:y="2cm" svg:width="24cm" svg:height="3cm">
    <draw:text-box><text:p>Quarterly review of the osguard deck</text:p></draw:text-box>
   </draw:frame>
   <draw:frame svg:x="2cm" svg:y="7cm" svg:width="24cm" svg:height="8cm">
    <draw:text-box><text:p>Revenue grew in every region</text:p><text:p>Costs stayed flat</text:p></draw:text-box>
   </draw:frame>
  </draw:page>
  <draw:page draw:name="Details">
   <draw:frame svg:x="2cm" svg:y="2cm" svg:width="24cm" svg:height="3cm">
    <draw:text-box><text:p>Details by region</text:p></draw:text-box>
   </draw:frame>
  </draw:page>
 </office:presentation></office:body>
</office:document>
"""

WEB_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>osguard page</title></head>
<body>
<h1>Release checklist</h1>
<p>Every item below must be done before the release.</p>
<ul>{items}</ul>
<form><label>Owner <input name="owner" value="alice"></label> <button type="button">Sign off</button></form>
{rows}
</body></html>
"""

# Local Folders plus one POP3 account on loopback that never connects (its mail goes to
# Local Folders): with no mail account at all, Thunderbird opens its account wizard.
THUNDERBIRD_PREFS = """user_pref("mail.account.account1.server", "server1");
user_pref("mail.account.account2.server", "server2");
user_pref("mail.account.account2.identities", "id1");
user_pref("mail.identity.id1.fullName", "User");
user_pref("mail.identity.id1.useremail", "user@example.org");
user_pref("mail.identity.id1.valid", true);
user_pref("mail.server.server2.type", "pop3");
user_pref("mail.server.server2.hostname", "127.0.0.1");
user_pref("mail.server.server2.port", 1110);
user_pref("mail.server.server2.userName", "user");
user_pref("mail.server.server2.name", "user@example.org");
user_pref("mail.server.server2.login_at_startup", false);
user_pref("mail.server.server2.check_new_mail", false);
user_pref("mail.server.server2.deferred_to_account", "account1");
user_pref("mail.accountmanager.defaultaccount", "account2");
user_pref("mail.accountmanager.accounts", "account2,account1");
user_pref("mailnews.start_page.url", "about:blank");
user_pref("mail.startup.enabledMailCheckOnce", true);
user_pref("mail.accountmanager.localfoldersserver", "server1");
user_pref("mail.server.server1.directory-rel", "[ProfD]Mail/Local Folders");
user_pref("mail.server.server1.hostname", "Local Folders");
user_pref("mail.server.server1.name", "Local Folders");
user_pref("mail.server.server1.type", "none");
user_pref("mail.server.server1.userName", "nobody");
user_pref("mail.provider.suppress_dialog_on_startup", true);
user_pref("mail.shell.checkDefaultClient", false);
user_pref("mail.startup.enabledMailCheckOnce", true);
user_pref("mail.rights.version", 1);
user_pref("mail.spotlight.firstRunDone", true);
user_pref("mail.winsearch.firstRunDone", true);
user_pref("mailnews.start_page.enabled", false);
user_pref("mailnews.start_page_override.mstone", "ignore");
user_pref("mail.ui-rdf.version", 99);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("app.update.enabled", false);
user_pref("app.update.auto", false);
user_pref("extensions.update.enabled", false);
user_pref("toolkit.telemetry.enabled", false);
user_pref("network.proxy.type", 0);
user_pref("offline.autoDetect", false);
user_pref("mail.inbox_for_local_folders", true);
"""

MAILBOX_SUBJECTS = [f"Invoice {n:04d} for the osguard project" for n in range(1, 41)]


def _mbox(subjects: list[str]) -> bytes:
    out = []
    for index, subject in enumerate(subjects):
        out.append(
            f"From alice@example.org Mon Jan  1 10:{index % 60:02d}:00 2024\n"
            f"From: Alice <alice@example.org>\nTo: user@example.org\nSubject: {subject}\n"
            f"Date: Mon, 1 Jan 2024 10:{index % 60:02d}:00 +0000\nMessage-ID: <m{index}@example.org>\n\n"
            f"Hello, this is message {index}.\n\n"
        )
    return "".join(out).encode()


def calc_document() -> bytes:
    """An xlsx with a header and 40 rows of data (openpyxl)."""
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Budget"
    sheet.append(["Region", "Quarter", "Revenue"])
    for row in range(40):
        sheet.append([f"Region {row + 1}", f"Q{row % 4 + 1}", (row + 1) * 1000])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def writer_document() -> bytes:
    """A docx with a heading and a few paragraphs (python-docx)."""
    import docx

    document = docx.Document()
    document.add_heading("Meeting notes", level=1)
    document.add_paragraph("The osguard review starts at nine in the large room.")
    for index in range(30):
        document.add_paragraph(f"Point {index + 1}: everyone reads the proposal before the meeting.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def web_page() -> bytes:
    """A page with a heading, a list, a form and a long table (most of it below the fold)."""
    items = "".join(f"<li>Check item {n}</li>" for n in range(1, 11))
    rows = "<table>" + "".join(f"<tr><td>Row {n}</td><td>{n * 7}</td></tr>" for n in range(1, 501)) + "</table>"
    return WEB_PAGE.format(items=items, rows=rows).encode()


def _profile(env: Any) -> None:
    env.run_bash("mkdir -p ~/.config/libreoffice/4/user")
    env.write_file("~/.config/libreoffice/4/user/registrymodifications.xcu", LIBREOFFICE_PROFILE)


def _thunderbird_profile(env: Any) -> None:
    env.run_bash("rm -rf ~/.thunderbird; mkdir -p ~/.thunderbird/osguard.default/'Mail/Local Folders'")
    env.write_file("~/.thunderbird/profiles.ini",
                   b"[General]\nStartWithLastProfile=1\n\n[Profile0]\nName=default\nIsRelative=1\n"
                   b"Path=osguard.default\nDefault=1\n")
    env.write_file("~/.thunderbird/osguard.default/prefs.js", THUNDERBIRD_PREFS.encode())
    env.write_file("~/.thunderbird/osguard.default/Mail/Local Folders/Inbox", _mbox(MAILBOX_SUBJECTS))


def _names(root: ElementTree.Element, tag: str) -> list[str]:
    return [element.get("name") or "" for element in root.iter(tag)]


def _texts(root: ElementTree.Element) -> str:
    return "\n".join((element.text or "") + " " + (element.get("name") or "") for element in root.iter())


def _app(root: ElementTree.Element, *names: str) -> ElementTree.Element | None:
    for element in root:
        if element.tag == "application" and (element.get("name") or "").lower() in names:
            return element
    return None


def _calc_ready(root: ElementTree.Element) -> str | None:
    app = _app(root, "soffice", "libreoffice")
    if app is None:
        return "no soffice application in the tree"
    if not any(True for _ in app.iter("table")):
        return "no spreadsheet table"
    cells = {e.get("name"): (e.text or "") for e in app.iter("table-cell")}
    if cells.get("C2") != "1000" or cells.get("A1") != "Region":
        return f"cells A1/C2 are {cells.get('A1')!r}/{cells.get('C2')!r}"
    return None


def _writer_ready(root: ElementTree.Element) -> str | None:
    app = _app(root, "soffice", "libreoffice")
    if app is None:
        return "no soffice application in the tree"
    if not any(True for _ in app.iter("document-text")):
        return "no document-text"
    paragraphs = [e.text or "" for e in app.iter() if e.tag in ("paragraph", "heading")]
    if not any("osguard review starts at nine" in text for text in paragraphs):
        return f"no paragraph with the document's text ({len(paragraphs)} paragraphs)"
    return None


def _impress_ready(root: ElementTree.Element) -> str | None:
    app = _app(root, "soffice", "libreoffice")
    if app is None:
        return "no soffice application in the tree"
    if not any(True for _ in app.iter("document-presentation")):
        return "no document-presentation (the slide)"
    if "Quarterly review of the osguard deck" not in _texts(app):
        return "the slide's title text is not in the tree"
    return None


def _center(element: ElementTree.Element) -> tuple[int, int] | None:
    ns = "{https://accessibility.ubuntu.example.org/ns/component}"
    coord, size = element.get(ns + "screencoord"), element.get(ns + "size")
    if not coord or not size:
        return None
    (x, y), (w, h) = (tuple(int(v) for v in text.strip("()").split(",")) for text in (coord, size))
    return x + w // 2, y + h // 2


def _thunderbird_open_inbox(env: Any, root: ElementTree.Element) -> None:
    """Open Local Folders' Inbox as a user would: click it in the folder tree, where the
    tree says it is (first unfolding Local Folders when the Inbox does not show yet)."""
    app = _app(root, "thunderbird")
    items = [e for e in app.iter("tree-item") if _center(e)] if app is not None else []
    for element in items:
        if (element.get("name") or "").startswith("Inbox"):
            x, y = _center(element)
            env.execute(["xdotool", "mousemove", str(x), str(y), "click", "1"])
            return
    for element in items:
        if element.get("name") == "Local Folders":
            x, y = _center(element)
            env.execute(["xdotool", "mousemove", str(x), str(y), "click", "1", "sleep", "0.3", "key", "Right"])
            return


def _thunderbird_ready(root: ElementTree.Element) -> str | None:
    app = _app(root, "thunderbird")
    if app is None:
        return "no thunderbird application in the tree"
    rows = [e.get("name") or "" for e in app.iter("list-item")]
    if not any("Invoice 0040 for the osguard project" in name for name in rows):
        return "no row of the message list names the newest message of the mailbox"
    return None


def _chromium_ready(root: ElementTree.Element) -> str | None:
    app = _app(root, "chromium", "google chrome", "chrome")
    if app is None:
        return "no chromium application in the tree"
    if not any(name == "Release checklist" or (e.text or "").strip() == "Release checklist"
               for e in app.iter("heading") for name in [e.get("name")]):
        return "no heading 'Release checklist'"
    return None


@dataclass(frozen=True)
class AppCase:
    """One application on one document (see the module docstring).

    Attributes:
        name: short name (calc, writer, impress, thunderbird, chromium).
        binary: the program that must exist in the environment.
        files: ``{path in the home: bytes-producing function}`` to upload first.
        prepare: extra setup in the environment (profiles), or None.
        command: the launch command (a shell string, run by ``/setup/launch``).
        title: a part of the main window's title, once the document is open.
        ready: ``ready(tree root) -> None`` when the tree names the main widgets, else
            what is still missing.
        interact: ``interact(env, tree root)``, what a user does once the window is up
            to reach the state ``ready`` wants (open a folder), or None.
    """

    name: str
    binary: str
    files: dict[str, Callable[[], bytes]]
    prepare: Callable[[Any], None] | None
    command: str
    title: str
    ready: Callable[[ElementTree.Element], str | None]
    interact: Callable[[Any, ElementTree.Element], None] | None = None


_SOFFICE = "soffice --norestore --nologo "
# Chromium: no sandbox of its own inside the environment's sandbox, web content exposed
# to AT-SPI, and a throw-away profile so no first-run page covers the document.
CHROMIUM = ("chromium --no-sandbox --disable-dev-shm-usage --force-renderer-accessibility --no-first-run "
            "--no-default-browser-check --disable-gpu --user-data-dir=/tmp/osguard-chromium --start-maximized "
            "file:///home/user/page.html")

APPS: dict[str, AppCase] = {
    "calc": AppCase("calc", "soffice", {"~/budget.xlsx": calc_document}, _profile,
                    _SOFFICE + "--calc ~/budget.xlsx", "budget.xlsx", _calc_ready),
    "writer": AppCase("writer", "soffice", {"~/notes.docx": writer_document}, _profile,
                      _SOFFICE + "--writer ~/notes.docx", "notes.docx", _writer_ready),
    "impress": AppCase("impress", "soffice", {"~/deck.fodp": lambda: IMPRESS_DECK.encode()}, _profile,
                       _SOFFICE + "--impress ~/deck.fodp", "deck.fodp", _impress_ready),
    "thunderbird": AppCase("thunderbird", "thunderbird", {}, _thunderbird_profile,
                           "thunderbird --profile /home/user/.thunderbird/osguard.default", "Thunderbird",
                           _thunderbird_ready, _thunderbird_open_inbox),
    "chromium": AppCase("chromium", "chromium", {"~/page.html": web_page}, None,
                        CHROMIUM, "osguard page", _chromium_ready),
}


class AppNotReady(AssertionError):
    """The application did not show its window or its tree in time."""


def missing_binary(env: Any, case: AppCase) -> str | None:
    """Why ``case`` cannot run in ``env`` (its program is not installed), or None."""
    if env.run_bash(f"command -v {case.binary}").ok:
        return None
    return f"{case.binary} is not installed in this environment"


def open_app(env: Any, case: AppCase, timeout: float = 120.0) -> str:
    """Prepare ``case``'s files, start it, and wait until its window is mapped and its
    tree (the default visible walk) names the main widgets; returns that tree.

    Raises:
        AppNotReady: the window or the tree did not come in ``timeout`` seconds (the
            message says what was still missing).
    """
    for path, make in case.files.items():
        env.write_file(path, make())
    if case.prepare is not None:
        case.prepare(env)
    env.launch(case.command, shell=True)
    deadline = time.monotonic() + timeout
    while case.title not in env.execute(["wmctrl", "-l"]).output:
        if time.monotonic() > deadline:
            raise AppNotReady(f"{case.name}: no window titled *{case.title}* after {timeout:g} s; "
                              f"windows: {env.execute(['wmctrl', '-l']).output!r}")
        time.sleep(0.3)
    while True:  # a window seen by title may still be retitled (Chromium's first paint): look again
        try:
            env.activate_window(case.title)
            break
        except EnvironmentDead:
            raise
        except EnvironmentError_ as exc:
            if time.monotonic() > deadline:
                raise AppNotReady(f"{case.name}: the window titled *{case.title}* could not be activated "
                                  f"in {timeout:g} s: {exc}") from None
            time.sleep(0.3)
    missing = "no tree"
    next_interaction = time.monotonic()
    while True:
        tree = env.accessibility_tree()
        if tree:
            root = ElementTree.fromstring(tree)
            missing = case.ready(root) or ""
            if not missing:
                return tree
            if case.interact is not None and time.monotonic() >= next_interaction:
                case.interact(env, root)
                next_interaction = time.monotonic() + 2
        if time.monotonic() > deadline:
            raise AppNotReady(f"{case.name}: the accessibility tree is not ready after {timeout:g} s: {missing}")
        time.sleep(0.5)


__all__ = ["APPS", "AppCase", "AppNotReady", "missing_binary", "open_app"]
