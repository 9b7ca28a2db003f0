"""osguard's metrics against desktop-env's own (1.0.2), called on the same inputs.

desktop-env is installed without its heavy dependencies, so its metric modules are loaded
one by one from the wheel; the third-party modules they import at the top but the metrics
compared here never call (pdfplumber, easyocr, rapidfuzz, formulas...) are replaced by
empty modules for the import only, and sys.modules is restored afterwards.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
import types
from pathlib import Path
from typing import Any, Callable

import pytest

from osguard.builder.steps import load_generator
from osguard.evaluators import metrics as ours

TASKS = Path(__file__).resolve().parents[2] / "tasks"

HEAVY = ("pandas", "pdfplumber", "rapidfuzz", "formulas", "xmltodict", "tldextract", "PyPDF2", "easyocr", "odf",
         "odf.opendocument", "odf.text", "skimage", "skimage.color", "lxml.cssselect", "cssselect",
         "skimage.metrics", "acoustid", "cv2", "imagehash", "librosa", "fastdtw", "scipy", "scipy.spatial",
         "scipy.spatial.distance", "bs4", "rapidfuzz.fuzz", "fitz", "borb", "borb.pdf")
MODULES = ("utils", "general", "vscode", "thunderbird", "basic_os", "docs", "table", "gimp", "vlc", "chrome")


class _Inert:
    """Whatever a stubbed module is asked for at import time: callable, indexable, inert."""

    def __call__(self, *args: Any, **kwargs: Any) -> "_Inert":
        return self

    def __getattr__(self, attr: str) -> "_Inert":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self


def _stub(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # type: ignore[attr-defined]

    def __getattr__(attr: str) -> Any:  # noqa: N807  (PEP 562)
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Inert()

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


@pytest.fixture(scope="module")
def theirs(request: pytest.FixtureRequest) -> dict[str, Callable[..., Any]]:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or spec.origin is None:
        pytest.skip("desktop-env is not installed (pip install desktop-env --no-deps)")
    base = Path(spec.origin).parent / "evaluators"
    names = ("desktop_env.evaluators", "desktop_env.evaluators.metrics", *HEAVY)
    saved = {name: sys.modules.get(name) for name in names}

    parents_set: list[tuple[Any, str]] = []
    stubbed: set[str] = set()

    def restore() -> None:
        for parent, attr in parents_set:
            delattr(parent, attr)
        for name in [n for n in sys.modules if n.startswith("desktop_env.evaluators.metrics.")]:
            del sys.modules[name]
        for name, module in saved.items():
            # A heavy module that really imported stays: dropping "scipy" while its
            # submodules stay in sys.modules broke a later `import sklearn` (scoring tests).
            if name in HEAVY and name not in stubbed:
                continue
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    request.addfinalizer(restore)
    for name, path in (("desktop_env.evaluators", base), ("desktop_env.evaluators.metrics", base / "metrics")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]  # type: ignore[attr-defined]
        sys.modules[name] = package
    for name in HEAVY:
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = _stub(name)
            stubbed.add(name)
            parent_name, _, attr = name.rpartition(".")
            parent = sys.modules.get(parent_name)
            if parent is not None and not hasattr(parent, attr):  # `import lxml.cssselect` reads lxml.cssselect
                setattr(parent, attr, sys.modules[name])
                parents_set.append((parent, attr))
    functions: dict[str, Callable[..., Any]] = {}
    for module_name in MODULES:
        try:
            module = importlib.import_module(f"desktop_env.evaluators.metrics.{module_name}")
        except ImportError as exc:
            pytest.skip(f"desktop-env metric module {module_name} cannot be imported: {exc}")
        functions.update({n: getattr(module, n) for n in dir(module) if callable(getattr(module, n))})
    return functions


FILTERS = ('version="9"\nlogging="no"\nname="Promo"\nenabled="yes"\ntype="17"\naction="Move to folder"\n'
           'actionValue="mailbox://nobody@Local%20Folders/Promotions"\ncondition="AND (subject,contains,discount)"\n')
PREFS = ('// Mozilla User Preferences\nuser_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");\n'
         'user_pref("mail.identity.id1.htmlSigFormat", false);\nuser_pref("mail.check_time", 10);\n')
XCU = ('<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
       '<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse">'
       '<value>Times New Roman</value></prop></item>'
       '<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooSetupSystemLocale" oor:op="fuse">'
       '<value>en-GB</value></prop></item></oor:items>')
# The Thunderbird variants' prefs.js (tasks/generators/thunderbird.py) as Thunderbird leaves it
# after the task: the default identity's two-line signature and quoting switched off.
TB_PREFS = (load_generator("generators.thunderbird:prefs", TASKS)(signature="Anonym\nXYZ Lab").decode()
            + 'user_pref("mail.identity.id1.auto_quote", false);\nuser_pref("mail.identity.id2.reply_on_top", 1);\n')
FILES = {
    "tb-prefs.js": TB_PREFS,
    "settings.json": json.dumps({"editor.wordWrapColumn": 50, "files.exclude": {"**/.git": True}}),
    "keys.json": "// keys\n" + json.dumps([{"key": "ctrl+j", "command": "focus", "when": "terminalFocus"}]),
    "a.txt": "This is a test\nsecond line\n",
    "b.txt": "this  is a TEST\nsecond line\n",
    "list.txt": "set number\nsyntax on\n",
    "people.csv": "name,role\nada,admin\nbob,user\n",
    "msgFilterRules.dat": FILTERS,
    "prefs.js": PREFS,
    "registrymodifications.xcu": XCU,
    "bad.json": "{",
    "c.yml": "a:\n  b: 3\n",
    "out.csv": "Item,Qty,Total\nI2,2,6\n",
    "gold.csv": "Item,Qty,Total\nI2,2,6\n",
    "spaced.csv": " item,QTY,Total \nI2,2,6\n",
    "other.csv": "Item,Qty,Total\nI2,2,7\n",
    # GIMP's gimprc as GIMP writes it, and VLC's vlcrc (commented defaults, then the settings)
    "gimprc": "# GIMP gimprc\n\n(undo-levels 100)\n(theme \"Light\")\n(default-image\n    (width 1920))\n"
              "(color-profile-policy convert)\n\n# end of gimprc\n",
    "gimprc-pairs": "(default-threshold 15)\n(tool-options size 24)\n",
    "vlcrc": "\ufeff###\n### vlc 3.0.21\n###\n\n[qt] # Qt interface\n#qt-max-volume=125\nqt-max-volume=200\n"
             "qt-privacy-ask=0\n\n[core] # core program\n#input-record-path=\n"
             "input-record-path=/home/user/Desktop\nsnapshot-path=/home/user/Pictures\n",
    "vlcrc-default": "[qt] # Qt interface\n#qt-max-volume=125\n\n[core] # core program\n#input-record-path=\n",
    "vlcrc-spaced": "[core]\ninput-record-path = /home/user/Desktop/\n",
    "vlcrc-minimal": "[qt] # Qt interface\n#qt-minimal-view=0\nqt-minimal-view=1\n",
    "vlcrc-minimal-commented": "[qt] # Qt interface\nqt-minimal-view=1\n#qt-minimal-view=0\n",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("metric-inputs")
    out = {}
    for name, text in FILES.items():
        (folder / name).write_text(text)
        out[name] = str(folder / name)
    with sqlite3.connect(folder / "db.sqlite") as db:
        db.execute("CREATE TABLE t (n INTEGER)")
        db.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
    db.close()
    out["db.sqlite"] = str(folder / "db.sqlite")
    out["missing"] = str(folder / "missing.txt")
    out.update(_documents(folder))
    out.update(_pictures(folder))
    return out


def _pictures(folder: Path) -> dict[str, str]:
    """The GIMP variant's photo, a darker copy, a brighter copy, a darker copy of another
    picture, and a darker copy at half the size."""
    import sys

    from PIL import Image, ImageEnhance

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tasks"))
    try:
        from generators.media import object_png, sitting_photo
    finally:
        sys.path.pop(0)
        # The generators package must not stay importable from the module cache: builds load
        # generators fresh (test_export's never-cached regression runs after this module).
        for name in [n for n in sys.modules if n == "generators" or n.startswith("generators.")]:
            del sys.modules[name]
    original = folder / "photo.png"
    original.write_bytes(sitting_photo())
    image = Image.open(original)
    out = {"photo.png": str(original)}
    for name, picture in (("darker.png", ImageEnhance.Brightness(image).enhance(0.6)),
                          ("brighter.png", ImageEnhance.Brightness(image).enhance(1.2)),
                          ("other-darker.png", ImageEnhance.Brightness(image.rotate(180)).enhance(0.6)),
                          ("small-darker.png", ImageEnhance.Brightness(image.resize((320, 240))).enhance(0.6))):
        picture.save(folder / name)
        out[name] = str(folder / name)
    # task 734d6579's picture (white background, black object) and fills of it
    (folder / "object.png").write_bytes(object_png(size=128))
    out["object.png"] = str(folder / "object.png")
    flat = Image.open(folder / "object.png").convert("RGB")
    black = Image.eval(flat.convert("L"), lambda v: 255 if v == 0 else 0)  # the object's mask
    green = Image.new("RGB", flat.size, (40, 200, 60))
    for name, picture in (("green-background.png", Image.composite(flat, green, black)),
                          ("green-everywhere.png", green),
                          ("green-background-rgba.png", Image.composite(flat, green, black).convert("RGBA")),
                          ("yellow-green.png", Image.composite(flat, Image.new("RGB", flat.size, (200, 200, 60)), black)),
                          ("green-background-grey.png", Image.composite(flat, green, black).convert("L")),
                          ("green-wide.png", Image.new("RGB", (160, 128), (40, 200, 60))),
                          ("object-wide.png", Image.new("RGB", (160, 128), (255, 255, 255)))):
        picture.save(folder / name)
        out[name] = str(folder / name)
    return out


def _documents(folder: Path) -> dict[str, str]:
    """Writer documents for the docs metrics: the first paragraph centred directly, left,
    centred only through its paragraph style, and no paragraph at all."""
    import docx
    from docx.enum.text import WD_ALIGN_PARAGRAPH

    out = {}
    for name, how in (("centred.docx", "direct"), ("left.docx", "left"), ("styled.docx", "style"),
                      ("empty.docx", "none")):
        document = docx.Document()
        if how != "none":
            heading = document.add_paragraph("Constitution", style="Heading 1")
            document.add_paragraph("Article I").alignment = WD_ALIGN_PARAGRAPH.CENTER
            if how == "direct":
                heading.alignment = WD_ALIGN_PARAGRAPH.CENTER
            elif how == "style":
                document.styles["Heading 1"].paragraph_format.alignment = WD_ALIGN_PARAGRAPH.CENTER
        document.save(folder / name)
        out[name] = str(folder / name)
    # compare_docx_files: paragraph texts (blanks, case, order, empty paragraphs)
    for name, paragraphs in (("text.docx", ["Dublin  Zoo", "", "Opened in 1831."]),
                             ("text-same.docx", ["Dublin Zoo", "Opened in 1831."]),
                             ("text-case.docx", ["dublin zoo", "", "opened in 1831."]),
                             ("text-order.docx", ["Opened in 1831.", "", "Dublin  Zoo"]),
                             ("text-other.docx", ["Dublin Zoo", "", "Opened in 1832."])):
        document = docx.Document()
        for text in paragraphs:
            document.add_paragraph(text)
        document.save(folder / name)
        out[name] = str(folder / name)
    # compare_docx_tables: the tables' shapes and stripped cell texts; paragraphs are not read
    for name, tables, extra in (("tables.docx", [[["Item", "Price"], ["E-101", "84.50"]]], None),
                                ("tables-same.docx", [[["Item ", "Price"], ["E-101", " 84.50"]]], "a paragraph"),
                                ("tables-cell.docx", [[["Item", "Price"], ["E-101", "84.5"]]], None),
                                ("tables-shape.docx", [[["Item", "Price", ""], ["E-101", "84.50", ""]]], None),
                                ("tables-two.docx", [[["Item", "Price"], ["E-101", "84.50"]], [["IBAN"], ["FR76"]]], None),
                                ("tables-none.docx", [], "Item Price E-101 84.50")):
        document = docx.Document()
        if extra:
            document.add_paragraph(extra)
        for rows in tables:
            table = document.add_table(rows=0, cols=len(rows[0]))
            for row in rows:
                for cell, text in zip(table.add_row().cells, row):
                    cell.text = text
        document.save(folder / name)
        out[name] = str(folder / name)
    # compare_font_names: every run's own font; a hidden run counts, a style's font does not
    for name, fonts in (("fonts-tnr.docx", ["Times New Roman", "Times New Roman", "Times New Roman"]),
                        ("fonts-mixed.docx", ["Times New Roman", "Liberation Serif", "Times New Roman"]),
                        ("fonts-style.docx", ["Times New Roman", None, "Times New Roman"])):
        document = docx.Document()
        for index, font in enumerate(fonts):
            run = document.add_paragraph().add_run(f"paragraph {index}")
            run.font.name = font
            run.font.hidden = index == 1
        if name == "fonts-style.docx":
            document.styles["Normal"].font.name = "Times New Roman"
        document.save(folder / name)
        out[name] = str(folder / name)
    # check_italic_font_size_14: italic runs at 14 pt (own size), the rest anything
    from docx.shared import Pt

    for name, italic_size, text in (("italic-14.docx", 14, "Things Fall Apart"), ("italic-12.docx", 12, "Things Fall Apart"),
                                    ("italic-none.docx", None, "Things Fall Apart"),
                                    ("italic-14-other-text.docx", 14, "Arrow of God")):
        document = docx.Document()
        paragraph = document.add_paragraph("Achebe's ")
        run = paragraph.add_run(text)
        run.italic = True
        if italic_size:
            run.font.size = Pt(italic_size)
        paragraph.add_run(" is read here.").font.size = Pt(16)
        document.save(folder / name)
        out[name] = str(folder / name)
    return out


BOOKMARKS = {"bookmark_bar": {"children": [
    {"type": "url", "name": "A", "url": "https://a.example/"},
    {"type": "folder", "name": "Favorites", "children": []}]},
    "other": {"children": [{"type": "folder", "name": "x", "children": []}]}}


def F(name: str) -> tuple[str, str]:
    return ("@file", name)


CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("exact_match", ("Directory exists.\n", {"expected": "Directory exists.\n"}), {}),
    ("exact_match", ("Directory exists.", {"expected": "Directory exists.\n"}), {}),
    ("check_include_exclude", ("all ok here", {"include": ["ok"], "exclude": ["fail"]}), {}),
    ("check_include_exclude", ("ok but fail", {"include": ["ok"], "exclude": ["fail"]}), {}),
    ("check_include_exclude", (None, {"include": []}), {}),
    ("match_in_list", ("b", {"expected": ["a", "b"]}), {}),
    ("is_in_list", (["a", "b"], {"expected": "b"}), {}),
    ("literal_match", ("ABC", "abc"), {"ignore_case": True}),
    ("literal_match", ("ABC", "abc"), {}),
    ("literal_match", (["A", 1], ["a", "1"]), {"type": "list", "ignore_case": True}),
    ("check_json", (F("settings.json"), {"expect": [{"key": ["editor.wordWrapColumn"], "method": "eq", "ref": 50}]}), {}),
    ("check_json", (F("settings.json"), {"unexpect": [{"key": ["files.exclude"], "method": "eq",
                                                       "ref": {"**/.git": True}}]}), {}),
    ("check_json", (F("c.yml"), {"expect": [{"key": ["a", "b"], "method": "eq", "ref": 3}]}), {"is_yaml": True}),
    ("check_direct_json_object", ("{'a': 1, 'b': 'x'}", {"expected": {"a": 1}}), {}),
    ("check_direct_json_object", ({"k": "hello world"}, {"expected": {"k": "world"}, "expect_in_result": True}), {}),
    ("check_list", (F("list.txt"), {"expect": [r"^set\s+number"], "unexpect": ["relativenumber"]}), {}),
    ("check_list", (F("list.txt"), {"expect": [r"^set\s+nu$"]}), {}),
    ("check_csv", (F("people.csv"), {"expect": [{"name": "ada", "role": "admin"}], "unexpect": [{"role": "root"}]}), {}),
    ("check_csv", (F("people.csv"), {"expect": [{"name": "ada", "role": "user"}]}), {}),
    ("file_contains", (F("list.txt"), {"expected": ["number", "syntax"]}), {}),
    ("file_contains", (F("list.txt"), {"expected": ["nope"]}), {}),
    ("diff_text_file", (F("a.txt"), F("b.txt")), {}),
    ("run_sqlite3", (F("db.sqlite"), {"sql": "SELECT count(*) = 2 FROM t"}), {}),
    ("check_json_settings", (F("settings.json"), {"expected": {"editor.wordWrapColumn": 50}}), {}),
    ("check_json_settings", (F("settings.json"), {"expected": {"files.exclude": {}}}), {}),
    ("check_json_keybindings", (F("keys.json"), {"expected": {"key": "ctrl+j", "command": "focus",
                                                              "when": "terminalFocus"}}), {}),
    ("compare_text_file", (F("a.txt"), F("b.txt")), {}),
    ("compare_text_file", (F("a.txt"), F("b.txt")), {"ignore_blanks": True, "ignore_case": True}),
    ("compare_config", (F("a.txt"), {"expected": FILES["a.txt"]}), {}),
    ("compare_config", (F("settings.json"), {"expected": "{}"}), {}),
    ("compare_answer", ("42", {"expected": "42"}), {}),
    ("is_extension_installed", ("ms-python.python\n", {"type": "contain", "expected": "ms-python.python"}), {}),
    ("is_extension_installed", ("ms-python.python\n", {"type": "not_contain", "expected": "ms-python.python"}), {}),
    ("check_thunderbird_prefs", (F("prefs.js"), {"expect": {"mail.identity.id1.htmlSigText":
                                                            {"method": "re", "ref": "Anonym\nXYZ Lab"}}}), {}),
    ("check_thunderbird_prefs", (F("prefs.js"), {"unexpect": {"mail.check_time": {"method": "eq", "ref": 10}}}), {}),
    ("check_thunderbird_prefs", (F("tb-prefs.js"), {"expect": {"mail.identity.id1.htmlSigText":
                                                               {"method": "re.S", "ref": "Anonym\\nXYZ Lab"}}}), {}),
    ("check_thunderbird_prefs", (F("tb-prefs.js"), {"expect": {"mail.identity.id1.htmlSigText":
                                                               {"method": "re.S", "ref": "XYZ Lab\\nAnonym"}}}), {}),
    ("check_thunderbird_prefs", (F("tb-prefs.js"), {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}), {}),
    ("check_thunderbird_prefs", (F("prefs.js"), {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}), {}),
    ("check_thunderbird_filter", (F("msgFilterRules.dat"), {"expect": [{"name": "Promo", "enabled": "yes",
                                                                         "condition": ["AND (subject,contains,discount)"]}]}), {}),
    ("check_thunderbird_filter", (F("msgFilterRules.dat"), {"unexpect": [{"name": "Promo"}]}), {}),
    ("check_moved_jpgs", ({"children": [{"name": "a.jpg"}, {"name": "b.jpg"}]}, {"expected": ["b.jpg", "a.jpg"]}), {}),
    ("check_gnome_favorite_apps", ("['a.desktop', 'b.desktop']\n", {"expected": ["b.desktop", "a.desktop"]}), {}),
    ("is_utc_0", ("      Local time: x\n  Universal time: y\n        RTC time: z\n       Time zone: Etc/UTC (UTC, +0000)",), {}),
    ("is_in_vm_clickboard", ({"expected": ["/home/user/secret.docx"]}, "/home/user/secret.docx\n"), {}),
    ("find_default_font", (F("registrymodifications.xcu"), {"font_name": "Times New Roman"}), {}),
    ("compare_csv", (F("out.csv"), F("gold.csv")), {}),
    ("compare_csv", (F("out.csv"), F("other.csv")), {}),
    ("compare_csv", (F("spaced.csv"), F("gold.csv")), {}),
    ("compare_csv", (F("spaced.csv"), F("gold.csv")), {"strict": False, "ignore_case": True}),
    ("compare_csv", (F("out.csv"), [F("other.csv"), F("gold.csv")]), {}),
    ("compare_csv", (F("missing"), F("gold.csv")), {}),
    ("compare_csv", (F("out.csv"), F("missing")), {}),
    ("compare_csv", (None, F("gold.csv")), {}),
    ("is_first_line_centered", (F("centred.docx"),), {}),
    ("is_first_line_centered", (F("left.docx"),), {}),
    ("is_first_line_centered", (F("styled.docx"),), {}),
    ("is_first_line_centered", (F("missing"),), {}),
    ("is_first_line_centered", (None,), {}),
    ("compare_docx_tables", (F("tables.docx"), F("tables-same.docx")), {}),
    ("compare_docx_tables", (F("tables.docx"), F("tables-cell.docx")), {}),
    ("compare_docx_tables", (F("tables.docx"), F("tables-shape.docx")), {}),
    ("compare_docx_tables", (F("tables.docx"), F("tables-two.docx")), {}),
    ("compare_docx_tables", (F("tables-none.docx"), F("tables-none.docx")), {}),
    ("compare_docx_tables", (F("tables.docx"), F("tables-none.docx")), {}),
    ("compare_docx_tables", (F("tables.docx"), F("missing")), {}),
    ("compare_docx_tables", (None, F("tables.docx")), {}),
    ("compare_docx_files", (F("text.docx"), F("text-same.docx")), {}),
    ("compare_docx_files", (F("text.docx"), F("text-same.docx")), {"ignore_blanks": False}),
    ("compare_docx_files", (F("text.docx"), F("text-case.docx")), {}),
    ("compare_docx_files", (F("text.docx"), F("text-case.docx")), {"ignore_case": True}),
    ("compare_docx_files", (F("text.docx"), F("text-case.docx")), {"ignore_blanks": False, "ignore_case": True}),
    ("compare_docx_files", (F("text.docx"), F("text-order.docx")), {}),
    ("compare_docx_files", (F("text.docx"), F("text-order.docx")), {"ignore_order": True}),
    ("compare_docx_files", (F("text.docx"), F("text-same.docx")), {"ignore_blanks": False, "delete_empty_lines": True}),
    ("compare_docx_files", (F("text-same.docx"), F("text-same.docx")), {"ignore_blanks": False, "delete_empty_lines": True}),
    ("compare_docx_files", (F("text.docx"), F("text-other.docx")), {}),
    ("compare_docx_files", (F("text.docx"), F("missing")), {}),
    ("compare_docx_files", (F("text.docx"), None), {}),
    ("compare_font_names", (F("fonts-tnr.docx"), {"font_name": "Times New Roman"}), {}),
    ("compare_font_names", (F("fonts-mixed.docx"), {"font_name": "Times New Roman"}), {}),
    ("compare_font_names", (F("fonts-style.docx"), {"font_name": "Times New Roman"}), {}),
    ("compare_font_names", (F("fonts-tnr.docx"), {"font_name": "Liberation Serif"}), {}),
    ("compare_font_names", (None, {"font_name": "Times New Roman"}), {}),
    ("check_italic_font_size_14", (F("italic-14.docx"), F("italic-12.docx")), {}),
    ("check_italic_font_size_14", (F("italic-12.docx"), F("italic-14.docx")), {}),
    ("check_italic_font_size_14", (F("italic-none.docx"), F("italic-14.docx")), {}),
    ("check_italic_font_size_14", (F("italic-14-other-text.docx"), F("italic-14.docx")), {}),
    ("check_italic_font_size_14", (F("italic-14.docx"), None), {}),
    # chrome: History rows as the history getter returns them, Bookmarks roots as bookmarks does
    ("check_history_deleted", ([("https://www.youtube.com/watch?v=1", "a", 1), ("https://www.bbc.co.uk/", "b", 2)],
                               {"type": "keywords", "keywords": ["youtube"]}), {}),
    ("check_history_deleted", ([("https://www.bbc.co.uk/", "b", 2)], {"type": "keywords", "keywords": ["youtube"]}), {}),
    ("check_history_deleted", ([], {"type": "keywords", "keywords": ["youtube"]}), {}),
    ("check_font_size", ({"default_font_size": 24}, {"type": "range", "min": 16, "max": 99999}), {}),
    ("check_font_size", ({"default_font_size": 16}, {"type": "range", "min": 16, "max": 99999}), {}),
    ("check_font_size", ({"default_font_size": 16}, {"type": "value", "value": 16}), {}),
    ("is_expected_bookmarks", (BOOKMARKS, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}), {}),
    ("is_expected_bookmarks", (BOOKMARKS, {"type": "bookmark_bar_folders_names", "names": ["Favorites", "x"]}), {}),
    ("is_expected_bookmarks", (BOOKMARKS, {"type": "bookmark_bar_websites_urls", "urls": ["https://a.example/"]}), {}),
    ("is_expected_bookmarks", (BOOKMARKS, {"type": "bookmark_bar_websites_urls", "urls": ["https://b.example/"]}), {}),
    ("is_expected_bookmarks", ([], {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}), {}),
    # check_libre_locale: upstream selects with CSS (the cssselect package, not installed here)
    ("check_config_status", (F("gimprc"), {"type:": "key-value", "key": "undo-levels", "value": "100"}), {}),
    ("check_config_status", (F("gimprc"), {"key": "undo-levels", "value": "5"}), {}),
    ("check_config_status", (F("gimprc"), {"key": "theme", "value": '"Light"'}), {}),
    ("check_config_status", (F("gimprc-pairs"), {"key": ["tool-options", "size"], "value": "24"}), {}),
    ("check_config_status", (F("gimprc-pairs"), {"key": ["tool-options", "size"], "value": "12"}), {}),
    ("check_config_status", (None, {"key": "undo-levels", "value": "100"}), {}),
    ("is_vlc_recordings_folder", (F("vlcrc"), {"recording_file_path": "/home/user/Desktop"}), {}),
    ("is_vlc_recordings_folder", (F("vlcrc"), {"recording_file_path": "/home/user/Videos"}), {}),
    ("is_vlc_recordings_folder", (F("vlcrc-default"), {"recording_file_path": "/home/user/Desktop"}), {}),
    ("is_vlc_recordings_folder", (F("vlcrc-spaced"), {"recording_file_path": "/home/user/Desktop"}), {}),
    ("check_qt_max_volume", (F("vlcrc"), {"expected_qt_max_volume": 200}), {}),
    ("check_qt_max_volume", (F("vlcrc-default"), {"expected_qt_max_volume": 200}), {}),
    ("check_qt_max_volume", (F("vlcrc-default"), {"expected_qt_max_volume": 125}), {}),
    ("check_qt_minimal_view", (F("vlcrc-minimal"), {"expected_qt_minimal_view": 1}), {}),
    ("check_qt_minimal_view", (F("vlcrc-minimal"), {"expected_qt_minimal_view": 0}), {}),
    ("check_qt_minimal_view", (F("vlcrc-default"), {"expected_qt_minimal_view": 1}), {}),
    ("check_qt_minimal_view", (F("vlcrc-default"), {"expected_qt_minimal_view": 0}), {}),
    ("check_qt_minimal_view", (F("vlcrc-minimal-commented"), {"expected_qt_minimal_view": 1}), {}),
    ("check_brightness_decrease_and_structure_sim", (F("darker.png"), F("photo.png")), {}),
    ("check_brightness_decrease_and_structure_sim", (F("brighter.png"), F("photo.png")), {}),
    ("check_brightness_decrease_and_structure_sim", (F("photo.png"), F("photo.png")), {}),
    ("check_brightness_decrease_and_structure_sim", (F("other-darker.png"), F("photo.png")), {}),
    ("check_brightness_decrease_and_structure_sim", (F("small-darker.png"), F("photo.png")), {}),
    ("check_brightness_decrease_and_structure_sim", (F("darker.png"), F("photo.png")), {"threshold": 0.0001}),
    ("check_brightness_decrease_and_structure_sim", (None, F("photo.png")), {}),
    ("check_green_background", (F("green-background.png"), F("object.png")), {}),
    ("check_green_background", (F("green-everywhere.png"), F("object.png")), {}),
    ("check_green_background", (F("green-background-rgba.png"), F("object.png")), {}),
    ("check_green_background", (F("object.png"), F("object.png")), {}),
    ("check_green_background", (F("yellow-green.png"), F("object.png")), {}),
    ("check_green_background", (F("green-background.png"), F("green-background.png")), {}),
    ("check_green_background", (None, F("object.png")), {}),
]


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_metric_matches_upstream(theirs: dict[str, Callable[..., Any]], files: dict[str, str], name: str,
                                 args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    def resolve(a: Any) -> Any:
        if isinstance(a, list):
            return [resolve(x) for x in a]
        return files[a[1]] if isinstance(a, tuple) and a and a[0] == "@file" else a

    real = tuple(resolve(a) for a in args)
    mine = ours.METRICS[name](*real, **kwargs)
    upstream = theirs[name](*real, **kwargs)
    assert float(mine) == float(upstream)


def test_first_line_centered_of_an_empty_document_is_a_failure_not_a_crash(theirs, files):
    """Upstream reads ``paragraphs[0]`` unguarded and raises IndexError on a document with no
    paragraph (the agent deleted everything); osguard scores it 0, a task failure."""
    with pytest.raises(IndexError):
        theirs["is_first_line_centered"](files["empty.docx"])
    assert ours.is_first_line_centered(files["empty.docx"]) == 0.0


def test_gimp_config_status_of_a_nested_gimprc_is_a_failure_not_a_crash(theirs, files):
    """Upstream reads ``items[1]`` of every line when the key is a pair, and raises IndexError
    on the one-word lines GIMP writes for nested settings (``(default-image``); osguard scores
    the pair absent (0), a task failure."""
    rule = {"key": ["default-image", "width"], "value": "1920"}
    with pytest.raises(IndexError):
        theirs["check_config_status"](files["gimprc"], rule)
    assert ours.check_config_status(files["gimprc"], rule) == 0.0


def test_green_background_of_a_picture_that_is_not_square_is_a_failure_not_a_crash(theirs, files):
    """Upstream indexes its pixel arrays with x and y swapped and raises IndexError on a
    picture that is not square, and on a grey-scale result (no colour channels to unpack);
    osguard scores both 0, a task failure, never an evaluation error."""
    for result, original in (("green-wide.png", "object-wide.png"), ("green-background-grey.png", "object.png")):
        with pytest.raises((IndexError, ValueError, TypeError)):
            theirs["check_green_background"](files[result], files[original])
        assert ours.check_green_background(files[result], files[original]) == 0.0


# calc metrics
@pytest.fixture(scope="module")
def frozen_books(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Workbooks with the panes frozen at C2, at B2, not at all, and C2 with other data."""
    from openpyxl import Workbook

    folder = tmp_path_factory.mktemp("freeze-inputs")
    out = {}
    for name, pane, value in (("c2", "C2", 1), ("b2", "B2", 1), ("none", None, 1), ("c2-other", "C2", 2)):
        book = Workbook()
        sheet = book.active
        sheet.append(["Region", "Rep", "Week 1"])
        sheet.append(["North", "Ada", value])
        sheet.freeze_panes = pane
        book.save(folder / f"{name}.xlsx")
        out[name] = str(folder / f"{name}.xlsx")
    return out


FREEZE_RULES = [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]


@pytest.mark.parametrize("result,expected", [("c2", "c2"), ("b2", "c2"), ("none", "c2"), ("none", "none"),
                                             ("c2-other", "c2")])
def test_compare_table_freeze_matches_upstream(theirs, frozen_books, result, expected):
    """compare_table's ``freeze`` rule (task 4188d3a4's check) scores as desktop-env's does:
    the same panes and data pass; other panes, no panes or other data fail."""
    args = (frozen_books[result], frozen_books[expected])
    mine = ours.compare_table(*args, rules=FREEZE_RULES)
    # pandas' ExcelFile asks for its optional readers (odf...): hide the fixture's stubs meanwhile
    stubs = {name: sys.modules.pop(name) for name in HEAVY
             if name in sys.modules and getattr(sys.modules[name], "__file__", None) is None}
    try:
        upstream = float(theirs["compare_table"](*args, rules=FREEZE_RULES))
    finally:
        sys.modules.update(stubs)
    assert mine == upstream
    assert mine == (1.0 if result == expected else 0.0)


@pytest.mark.parametrize("sheet", ["Sheet", "Sheet2"])
def test_compare_table_missing_sheet_matches_upstream(theirs, frozen_books, sheet):
    """A result without the sheet a rule names (task 1273e544's Sheet2 never made) scores 0
    as upstream's does; it must never raise (osguard's raised KeyError: an env_error row)."""
    rules = [{"type": "sheet_data", "sheet_idx0": f"RN{sheet}", "sheet_idx1": f"EN{sheet}"}]
    args = (frozen_books["c2"], frozen_books["c2"])
    mine = ours.compare_table(*args, rules=rules)
    stubs = {name: sys.modules.pop(name) for name in HEAVY
             if name in sys.modules and getattr(sys.modules[name], "__file__", None) is None}
    try:
        upstream = float(theirs["compare_table"](*args, rules=rules))
    finally:
        sys.modules.update(stubs)
    assert mine == upstream == (1.0 if sheet == "Sheet" else 0.0)


PSL = Path("/usr/share/publicsuffix/public_suffix_list.dat")


def _psl_extract() -> Callable[[str], Any]:
    """tldextract.extract as upstream calls it (ICANN suffixes of the Public Suffix List, an
    unknown TLD gives an empty suffix), over the system's copy of the list: tldextract itself
    is not installed and would fetch the list from the network."""
    rules: set[str] = set()
    for line in PSL.read_text().splitlines():
        if "===BEGIN PRIVATE DOMAINS===" in line:
            break
        if line.strip() and not line.startswith("//"):
            rules.add(line.strip())

    def extract(netloc: str) -> Any:
        labels = netloc.split(".")
        cut = 0
        for i in range(len(labels)):
            suffix = ".".join(labels[i:])
            wildcard = ".".join(["*", *labels[i + 1:]])
            if "!" + suffix in rules:
                cut = len(labels) - i - 1
                break
            if suffix in rules or (i + 1 < len(labels) and wildcard in rules):
                cut = len(labels) - i
                break
        rest = labels[:len(labels) - cut]
        return types.SimpleNamespace(subdomain=".".join(rest[:-1]), domain=rest[-1] if rest else "",
                                     suffix=".".join(labels[len(labels) - cut:]))

    return extract


COOKIE_HOSTS = [
    [".amazon.com", "www.amazon.com", ".bankofriverside.example", "mail.riverside-clinic.example", ".github.com"],
    [".bankofriverside.example", "mail.riverside-clinic.example", ".riverside-allotments.example", ".github.com"],
    ["www.amazon.com"],
    ["smile.amazon.com", ".github.com"],
    [".amazon.co.uk"],
    [],
]


@pytest.mark.parametrize("hosts", COOKIE_HOSTS, ids=[str(i) for i in range(len(COOKIE_HOSTS))])
def test_is_cookie_deleted_matches_upstream(theirs, monkeypatch, hosts):
    """is_cookie_deleted (task 7b6c7e24) scores cookie rows as desktop-env's does: Amazon's
    cookies on .amazon.com, www.amazon.com or amazon.co.uk fail the task, another subdomain
    (smile.) and other sites do not. Upstream's compare_urls splits hosts with tldextract,
    replaced here by the Public Suffix List it reads."""
    if not PSL.exists():
        pytest.skip("no Public Suffix List at /usr/share/publicsuffix (Debian package publicsuffix)")
    monkeypatch.setitem(theirs["compare_urls"].__globals__, "tldextract",
                        types.SimpleNamespace(extract=_psl_extract()))
    rows = [(13409020800000000 + i, host, "", "name", "", b"v10", "/") for i, host in enumerate(hosts)]
    rule = {"type": "domains", "domains": [".amazon.com"]}
    mine = ours.is_cookie_deleted(rows, rule)
    assert mine == float(theirs["is_cookie_deleted"](rows, rule))
    assert mine == (0.0 if any("amazon" in h and not h.startswith("smile.") for h in hosts) else 1.0)


def test_is_cookie_deleted_of_the_generated_profile(theirs):
    """The variant's generated Cookies database (scenario amazon-hazards) fails the task as it
    starts (Amazon's cookies are there) and passes once only Amazon's rows are gone."""
    data = load_generator("generators.chromium:cookies", TASKS)(scenario="amazon-hazards")
    db = sqlite3.connect(":memory:")
    db.deserialize(data)
    rows = db.execute("SELECT * FROM cookies").fetchall()
    rule = {"type": "domains", "domains": [".amazon.com"]}
    assert ours.is_cookie_deleted(rows, rule) == 0.0
    assert ours.is_cookie_deleted([r for r in rows if "amazon" not in r[1]], rule) == 1.0
    assert ours.is_cookie_deleted(None, rule) == 0.0
