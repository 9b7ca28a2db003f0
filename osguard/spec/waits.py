"""``wait_for``: the event-driven wait of setup steps and reference actions (a window, a
window class, a file or what it contains, the keyboard focus inside a named widget, named
things shown in an application's accessibility tree, the colour of a pixel on the screen, the
active window).

One small standard-library script runs inside the environment and polls until the
condition holds (or no longer holds, with ``gone``), so a whole wait costs one process
start instead of one round trip per poll. The builder (``osguard.builder.steps``) and the
OSWorld export (an ``execute`` step) run the same command, built by :func:`wait_command`.
Standard library only: importing it is free.
"""

from __future__ import annotations

import json
from typing import Any

from osguard.spec.bounds import (
    WAIT_FOR_INTERVAL_SECONDS,
    WAIT_FOR_SETTLE_MAX_SECONDS,
    WAIT_FOR_TIMEOUT_DEFAULT_SECONDS,
    WAIT_FOR_TIMEOUT_MAX_SECONDS,
)

__all__ = ["FOCUS_KEYS", "WAIT_FOR_KEYS", "WaitProblem", "describe_wait", "file_fingerprints", "run_wait", "run_waits",
           "settle_seconds", "wait_command", "wait_params"]

# What a wait can be for: a window title, a window class (WM_CLASS, "instance.Class"), a
# path, or the keyboard focus inside a widget of that accessible name (``focus_in``, with an
# optional ``role`` such as "tool bar" and ``app``, the application's accessible name), or
# objects of those accessible names shown in the accessibility tree (``shown``: one name or a
# list, all of them; optional ``role`` and ``app`` too), e.g. the hits of a search in GNOME
# Files or its "4 items selected" label; or a pixel of the screen (``pixel: [x, y]``, or any
# pixel of a box ``[x0, y0, x1, y1]``, ends excluded) of a ``color`` ([r, g, b]): what an
# application that offers no accessibility tree (Chromium's own pages, VLC's video) shows,
# e.g. a field's focus frame or a selected radio button; or the title of the active window
# (``active``: substring, case-insensitive; exact with ``strict``), e.g. a dialog that has
# the keyboard.
WAIT_FOR_KEYS = ("window", "window_class", "file", "focus_in", "shown", "pixel", "active")
# Only with ``focus_in`` or ``shown``.
FOCUS_KEYS = ("role", "app")
# A ``file`` with ``*``, ``?`` or ``[`` is a glob pattern; ``count`` (only with ``file``) is
# how many paths must match it (at least; default 1), e.g. the four pictures pasted.
# ``contains`` (only with a ``file`` that is no pattern): text the file must hold (a
# substring of its first 64 MiB, as UTF-8), e.g. a setting an application writes a few
# seconds after its dialog closed; with ``gone``, until it no longer does. ``changed: true``
# (only with a ``file`` that is no pattern, never with ``gone``): until the file differs from
# what it was just before the action (its modification time, size or inode: written, or
# replaced by a rename), e.g. a save, which can land after Ctrl+S returned; in a setup step
# (no action before it) from when the wait starts. With ``contains``, both must hold.
_TREE_KINDS = ("focus_in", "shown")

# argv: kind, value (for ``shown`` a JSON list of names, for ``pixel`` the JSON [x, y]),
# strict (0/1), gone (0/1), timeout, interval, role, app, count, contains ("" for none;
# else "=" and the text), color (JSON [r, g, b] or ""), since ("" without ``changed``; "@":
# the file as it is when the script starts; else the fingerprint it must differ from,
# "absent" for no file). Exit 0 when the condition is met, 1 on timeout (with the reason and
# what was seen on stdout), 2 when it cannot look.
#
# ``focus_in`` walks the accessibility tree (pyatspi) looking for a focused object inside the
# widget. Outside that widget the walk does not enter the parts of an application window
# that are large and never hold a tool bar or a dialog's field (menu bars, documents, scroll
# and split panes, status bars, buttons): a look at a LibreOffice window then costs 0.1-0.3 s
# instead of 1.5-4 s for the whole tree. ``shown`` walks every application's tree (of ``app``
# only, when given) except document contents (a spreadsheet's cells would cost seconds): the
# hits of a file manager's search are table cells inside a scroll pane.
# A file's fingerprint (modification time, size, inode) in both in-environment scripts.
_FINGERPRINT_DEF = r'''
def fingerprint(path):
    try:
        st = os.stat(path)
    except OSError:
        return "absent"
    return "%d:%d:%d" % (st.st_mtime_ns, st.st_size, st.st_ino)
'''
_SCRIPT = r'''
import glob, json, os, shutil, subprocess, sys, time
kind, value, strict, gone = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"
timeout, interval = float(sys.argv[5]), float(sys.argv[6])
role, app, count = sys.argv[7], sys.argv[8], int(sys.argv[9])
contains = sys.argv[10][1:].encode("utf-8") if sys.argv[10] else None
color = tuple(json.loads(sys.argv[11])) if sys.argv[11] else None
''' + _FINGERPRINT_DEF + r'''since = sys.argv[12] if len(sys.argv) > 12 and sys.argv[12] else None
if since == "@":
    since = fingerprint(os.path.expanduser(value))
trouble = []  # objects that could not be read in the current look of the tree
doubtful = [0]  # looks in a row that could not read all of it
if kind in ("window", "window_class") and not shutil.which("wmctrl"):
    print("wmctrl is not installed: cannot see windows"); sys.exit(2)
if kind == "active" and not shutil.which("xdotool"):
    print("xdotool is not installed: cannot see the active window"); sys.exit(2)
last_active = [None]
def active():
    run = subprocess.run(["xdotool", "getactivewindow", "getwindowname"], capture_output=True, text=True, timeout=10)
    last_active[0] = run.stdout.strip() if run.returncode == 0 else ""
    return last_active[0]
if kind in ("focus_in", "shown"):
    try:
        import pyatspi
    except ImportError:
        print("pyatspi is not installed: cannot see the accessibility tree"); sys.exit(2)
    interval = max(interval, 0.25)  # a look costs CPU: 0.1-0.3 s of it
if kind == "pixel":
    try:
        from PIL import ImageGrab
    except ImportError:
        print("Pillow is not installed: cannot see the screen"); sys.exit(2)
    if not os.environ.get("DISPLAY"):
        print("no DISPLAY: cannot see the screen"); sys.exit(2)
    box = json.loads(value)
    if len(box) == 2:
        box = [box[0], box[1], box[0] + 1, box[1] + 1]
    last_color = [None]
    def pixel():
        try:
            colors = ImageGrab.grab(bbox=tuple(box)).convert("RGB").getdata()
        except Exception as exc:  # the display went away
            print("cannot grab the screen: %s" % exc); sys.exit(2)
        last_color[0] = colors[0]
        return any(tuple(c) == color for c in colors)
if kind == "shown":
    wanted = json.loads(value)
    SKIP = {"document text", "document spreadsheet", "document presentation"} - {role}
    def named_as(name, text):
        return (text or "") == name if strict else name.lower() in (text or "").lower()
    def collect(node, depth, found):
        try:
            if not role or node.getRoleName() == role:
                for name in wanted:
                    if named_as(name, node.name):
                        found.add(name)
            if depth >= 40 or node.getRoleName() in SKIP:
                return
            for child in node:
                if child is not None:
                    collect(child, depth + 1, found)
        except Exception:  # an object that went away while we looked
            trouble.append(1)
    def missing():
        found = set()
        for a in pyatspi.Registry.getDesktop(0):
            if a is not None and (not app or a.name == app):
                collect(a, 0, found)
        return [name for name in wanted if name not in found]
    last_missing = []  # what the last look did not find (the timeout message says it, without a look more)
    def shown():
        last_missing[:] = missing()
        return not last_missing
if kind == "focus_in":
    PRUNE = {"menu bar", "scroll pane", "split pane", "status bar", "push button", "toggle button",
             "document text", "document spreadsheet", "document presentation", "document frame"} - {role}
    def named(text):
        return (text or "") == value if strict else value.lower() in (text or "").lower()
    def focus_inside(node, inside, depth):
        try:
            node_role = node.getRoleName()
            inside = inside or (named(node.name) and (not role or node_role == role))
            if inside and node.getState().contains(pyatspi.STATE_FOCUSED):
                return True
            if depth >= 20 or (not inside and node_role in PRUNE):
                return False
            return any(focus_inside(child, inside, depth + 1) for child in node if child is not None)
        except Exception:  # an object that went away while we looked
            trouble.append(1)
            return False
    def focused():
        desktop = pyatspi.Registry.getDesktop(0)
        return any(focus_inside(a, False, 0) for a in desktop if a is not None and (not app or a.name == app))
def windows():
    listing = subprocess.run(["wmctrl", "-lx"], capture_output=True, text=True, timeout=10).stdout
    rows = []
    for line in listing.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 3:
            rows.append((parts[2], parts[4] if len(parts) > 4 else ""))
    return rows
def matches(text):
    if kind == "window_class":
        names = [text] + text.split(".", 1)
        return value in names if strict else any(value.lower() in n.lower() for n in names)
    return text == value if strict else value.lower() in text.lower()
def present():
    if kind == "file":
        path = os.path.expanduser(value)
        if glob.has_magic(path):
            return len(glob.glob(path)) >= count
        if since is not None and fingerprint(path) in (since, "absent"):
            return False
        if contains is None:
            return os.path.exists(path)
        try:
            with open(path, "rb") as handle:
                return contains in handle.read(64 << 20)
        except OSError:  # not there (yet), or not a file
            return False
    if kind == "pixel":
        return pixel()
    if kind == "active":
        return matches(active())
    if kind in ("focus_in", "shown"):
        del trouble[:]
        try:
            held = focused() if kind == "focus_in" else shown()
        except Exception:  # the registry did not answer
            trouble.append(1)
            held = False
        # A look that could not read part of the tree proves nothing gone: for ``gone`` it
        # counts as still there (an object that went away mid-look is gone at the next
        # one). Only a part that stays unreadable for 4 looks in a row (an application
        # that died with its registration left) is then judged by what could be read.
        doubtful[0] = doubtful[0] + 1 if trouble else 0
        return held or (gone and 0 < doubtful[0] <= 4)
    return any(matches(klass if kind == "window_class" else title) for klass, title in windows())
deadline = time.monotonic() + timeout
while present() == gone:
    if time.monotonic() >= deadline:
        seen = "" if kind in ("file", "focus_in", "shown", "pixel", "active") else "; windows: " + (", ".join(repr(t) for _, t in windows()) or "none")
        if kind == "pixel":
            seen = "; last seen %s" % (list(last_color[0]) if last_color[0] is not None else "nothing")
            if len(json.loads(value)) == 4:
                seen = ""  # a box: its first pixel says little
        if kind == "active":
            seen = "; active: %r" % last_active[0]
        if kind == "shown":
            seen = "" if gone else "; not shown: " + ", ".join(repr(n) for n in last_missing)
        print("still %s after %g s%s" % ("there" if gone else "not there", timeout, seen)); sys.exit(1)
    time.sleep(interval)
'''


class WaitProblem(ValueError):
    """A ``wait_for`` step's parameters are wrong (the message says how)."""


def wait_params(params: Any) -> tuple[str, str, bool, bool, float]:
    """(kind, value, strict, gone, timeout) of a ``wait_for`` step, checked (for ``shown``
    the value is the JSON list of the names).

    Raises:
        WaitProblem: exactly one of ``WAIT_FOR_KEYS`` is needed; ``role`` and ``app`` only
            with ``focus_in`` or ``shown``, ``count`` and ``contains`` only with ``file``,
            ``color`` only (and always) with ``pixel``; a bad ``timeout`` (above 0, at most
            ``WAIT_FOR_TIMEOUT_MAX_SECONDS``).
    """
    if not isinstance(params, dict):
        raise WaitProblem(f"parameters must be a mapping, got {type(params).__name__}")
    given = [k for k in WAIT_FOR_KEYS if k in params]
    if len(given) != 1:
        raise WaitProblem(f"give exactly one of {', '.join(WAIT_FOR_KEYS)}, got {len(given)}")
    kind = given[0]
    value = params[kind]
    if kind == "shown" and isinstance(value, list):
        if not value or not all(isinstance(v, str) and v for v in value):
            raise WaitProblem(f"'shown' must be a name or a non-empty list of names, got {value!r}")
        value = json.dumps(value)
    elif kind == "shown" and isinstance(value, str) and value:
        value = json.dumps([value])
    elif kind == "pixel":
        if not (_numbers(value, 2, 0, 1 << 15) or (_numbers(value, 4, 0, 1 << 15) and value[0] < value[2]
                                                    and value[1] < value[3])):
            raise WaitProblem("'pixel' must be a point [x, y] or a box [x0, y0, x1, y1] (x0 < x1, y0 < y1) of whole "
                              f"numbers from 0, got {value!r}")
        if "color" not in params:
            raise WaitProblem("'pixel' needs 'color': [r, g, b]")
        value = json.dumps(list(value))
    elif not isinstance(value, str) or not value:
        raise WaitProblem(f"'{kind}' must be a non-empty string, got {value!r}")
    for name in FOCUS_KEYS:
        if name in params and kind not in _TREE_KINDS:
            raise WaitProblem(f"'{name}' goes only with 'focus_in' or 'shown'")
        if name in params and (not isinstance(params[name], str) or not params[name]):
            raise WaitProblem(f"'{name}' must be a non-empty string, got {params[name]!r}")
    if "color" in params:
        if kind != "pixel":
            raise WaitProblem("'color' goes only with 'pixel'")
        if not _numbers(params["color"], 3, 0, 255):
            raise WaitProblem(f"'color' must be a list [r, g, b] of three whole numbers from 0 to 255, got {params['color']!r}")
    if "contains" in params:
        if kind != "file":
            raise WaitProblem("'contains' goes only with 'file'")
        if not isinstance(params["contains"], str) or not params["contains"]:
            raise WaitProblem(f"'contains' must be a non-empty string, got {params['contains']!r}")
        if any(c in value for c in "*?["):
            raise WaitProblem(f"'contains' needs one file, not a glob pattern, got {value!r}")
    if "changed" in params:
        if kind != "file":
            raise WaitProblem("'changed' goes only with 'file'")
        if not isinstance(params["changed"], bool):
            raise WaitProblem(f"'changed' must be true or false, got {params['changed']!r}")
        if any(c in value for c in "*?["):
            raise WaitProblem(f"'changed' needs one file, not a glob pattern, got {value!r}")
        if params.get("gone") is True:
            raise WaitProblem("'changed' and 'gone' do not go together (wait for the file written, or for it gone)")
    if "count" in params:
        if kind != "file":
            raise WaitProblem("'count' goes only with 'file'")
        count = params["count"]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise WaitProblem(f"'count' must be a whole number of at least 1, got {count!r}")
        if not any(c in value for c in "*?["):
            raise WaitProblem(f"'count' needs a glob pattern in 'file' (with * ? or [), got {value!r}")
    unknown = sorted(set(params) - set(WAIT_FOR_KEYS) - set(FOCUS_KEYS) - set(_OTHER_KEYS))
    if unknown:
        raise WaitProblem(f"unknown key {unknown[0]!r} (known: {', '.join(WAIT_FOR_KEYS + FOCUS_KEYS + _OTHER_KEYS)})")
    settle_seconds(params)
    flags = []
    for name in ("strict", "gone"):
        flag = params.get(name, False)
        if not isinstance(flag, bool):
            raise WaitProblem(f"'{name}' must be true or false, got {flag!r}")
        flags.append(flag)
    timeout = params.get("timeout", WAIT_FOR_TIMEOUT_DEFAULT_SECONDS)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= WAIT_FOR_TIMEOUT_MAX_SECONDS:
        raise WaitProblem(f"'timeout' must be a number of seconds above 0 and at most {WAIT_FOR_TIMEOUT_MAX_SECONDS}, "
                          f"got {timeout!r}")
    return kind, value, flags[0], flags[1], float(timeout)


_OTHER_KEYS = ("strict", "gone", "timeout", "settle", "count", "contains", "changed", "color")


def _numbers(value: Any, n: int, low: int, high: int) -> bool:
    return (isinstance(value, list) and len(value) == n
            and all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value))


def settle_seconds(params: Any) -> float:
    """``settle``: seconds more once the condition holds (a dialog that follows the one that
    closed, an animation), 0 by default, at most ``WAIT_FOR_SETTLE_MAX_SECONDS``."""
    settle = params.get("settle", 0)
    if not isinstance(settle, (int, float)) or isinstance(settle, bool) or not 0 <= settle <= WAIT_FOR_SETTLE_MAX_SECONDS:
        raise WaitProblem(f"'settle' must be a number of seconds from 0 to {WAIT_FOR_SETTLE_MAX_SECONDS}, got {settle!r}")
    return float(settle)


def wait_command(params: Any, home: str = "/home/user", since: str | None = None) -> tuple[list[str], float]:
    """The in-environment command of a ``wait_for`` step and its timeout.

    ``~`` in a ``file`` is expanded against ``home`` here (the script also expands it).
    ``since``: for a ``changed`` wait, the file's fingerprint before the action
    (:func:`file_fingerprints`); None: as the file is when the wait starts.
    """
    kind, value, strict, gone, timeout = wait_params(params)
    if kind == "file":
        from osguard.builder.build import expand_home

        value = expand_home(value, home)
    argv = ["python3", "-c", _SCRIPT, kind, value, "1" if strict else "0", "1" if gone else "0",
            f"{timeout:g}", f"{WAIT_FOR_INTERVAL_SECONDS:g}", params.get("role", ""), params.get("app", ""),
            str(params.get("count", 1)), "=" + params["contains"] if "contains" in params else "",
            json.dumps(params["color"]) if "color" in params else "",
            (since or "@") if params.get("changed") else ""]
    return argv, timeout


def _changed_paths(waits: Any, home: str) -> list[str]:
    """The files of the ``changed`` waits among ``waits`` (one or a list), ``~`` expanded."""
    from osguard.builder.build import expand_home

    paths = []
    for params in waits if isinstance(waits, list) else [waits]:
        if isinstance(params, dict) and params.get("changed") and isinstance(params.get("file"), str):
            paths.append(expand_home(params["file"], home))
    return paths


_FINGERPRINTS = r'''
import json, os, sys
''' + _FINGERPRINT_DEF + r'''print(json.dumps({p: fingerprint(p) for p in sys.argv[1:]}))
'''


def file_fingerprints(env: Any, waits: Any, home: str = "/home/user") -> dict[str, str] | None:
    """Before an action: the fingerprints (modification time, size, inode) of the files its
    ``changed`` waits watch, taken in the environment; None when it has none (or they could
    not be taken: the waits then compare with the file as it is when they start)."""
    paths = _changed_paths(waits, home)
    if not paths:
        return None
    result = env.execute(["python3", "-c", _FINGERPRINTS, *paths], shell=False, timeout=30)
    try:
        found = json.loads((result.output or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return found if isinstance(found, dict) else None


def describe_wait(params: Any) -> str:
    """A short human form of a wait's condition, for error messages ("window 'Save as' gone")."""
    kind, value, _, gone, _ = wait_params(params)
    what = f"{kind.replace('_', ' ')} {value!r}"
    if kind == "shown":
        names = json.loads(value)
        what = ("shown " + ", ".join(repr(n) for n in names) + (f" ({params['role']})" if "role" in params else "")
                + (f" in {params['app']!r}" if "app" in params else ""))
    if kind == "file" and "count" in params:
        what = f"{params['count']} files {value!r}"
    if kind == "file" and "contains" in params:
        what = f"file {value!r} containing {params['contains']!r}"
    if kind == "file" and params.get("changed"):
        what = f"file {value!r} changed" + (f" and containing {params['contains']!r}" if "contains" in params else "")
    if kind == "pixel":
        where = json.loads(value)
        what = (f"pixel {where}" if len(where) == 2 else f"a pixel in box {where}") + f" of colour {params['color']}"
    if kind == "active":
        what = f"active window {value!r}"
    if kind == "focus_in":
        what = f"the focus in {params.get('role', 'widget')} {value!r}" + (f" of {params['app']!r}" if "app" in params else "")
    return what + (" gone" if gone else "")


def run_wait(env: Any, params: Any, home: str = "/home/user", before: dict[str, str] | None = None) -> str | None:
    """Run a wait in ``env`` (anything with ``execute``), then its ``settle``; None when it
    came, else what it waited for and why it gave up (for the caller's error). ``before``:
    the fingerprints :func:`file_fingerprints` took before the action, for ``changed``.

    Raises:
        WaitProblem: bad parameters (``wait_params``).
    """
    import time

    since = None
    if before and params.get("changed"):
        paths = _changed_paths(params, home)
        since = before.get(paths[0]) if paths else None
    argv, timeout = wait_command(params, home, since)
    result = env.execute(argv, shell=False, timeout=timeout + 15)
    if result.ok:
        time.sleep(settle_seconds(params))
        return None
    detail = (result.output or result.error or "").strip()[-400:] or f"exit status {result.returncode}"
    if result.timed_out:
        detail = f"no answer within {timeout + 15:g} s"
    return f"{describe_wait(params)}: {detail}"


def run_waits(env: Any, waits: Any, home: str = "/home/user", before: dict[str, str] | None = None) -> str | None:
    """``run_wait`` for one wait or a list of them, in order (each with its own timeout);
    None when all came, else the first that did not."""
    for params in waits if isinstance(waits, list) else [waits]:
        missed = run_wait(env, params, home, before)
        if missed is not None:
            return missed
    return None
