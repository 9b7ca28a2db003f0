# OSGUARD_PROBE: the self-contained state probe run inside an environment.
#
# This file is sent verbatim (plus one line that calls ``main`` with the request) through
# the environment's ``/run_python``, so it must stay plain Python: standard library only
# (``xxhash`` is used when importable), compatible with Python 3.8 (the OSWorld VM's
# ``/usr/bin/python3`` may be old), no imports from osguard. ``osguard.builder.probe``
# reads this file as text; it is never imported by osguard itself.
#
# Output: one line ``@@OSGUARD_PROBE@@<json>`` on stdout (see osguard/invariants/types.py
# for the State shape).

import configparser
import fnmatch
import json
import os
import re
import stat
import subprocess
import sys
import time

MARKER = "@@OSGUARD_PROBE@@"
CHUNK = 1 << 20
TOKEN_SEARCH_LIMIT = 8 << 20  # files larger than this are hashed but not searched for tokens
TEXT_LIMIT = 1 << 20  # configs/text reads larger than this are refused
MAX_ENTRIES = 200000  # a runaway root (a whole filesystem) must not hang the episode


def _hasher_factory(forced):
    """Return (algorithm name, constructor). xxh3-128 when available, else sha256."""
    if forced in (None, "", "xxh3_128"):
        try:
            import xxhash  # noqa: F401

            return "xxh3_128", xxhash.xxh3_128
        except ImportError:
            if forced == "xxh3_128":
                raise
    import hashlib

    name = forced if forced not in (None, "", "xxh3_128") else "sha256"
    return name, (lambda: hashlib.new(name))


class Prober(object):
    def __init__(self, request):
        self.request = request
        extra = request.get("extra") or {}
        self.hash_algo, self.new_hasher = _hasher_factory(extra.get("hash_algo"))
        self.tokens = [t for t in request.get("tokens") or [] if t]
        self.token_bytes = [t.encode("utf-8") for t in self.tokens]
        self.overlap = max([len(t) for t in self.token_bytes] or [1]) - 1
        self.files = {}
        self.token_hits = dict((t, []) for t in self.tokens)
        self.errors = []
        self.entries = 0
        self.truncated = False
        self.exclude = [os.path.expanduser(p) for p in extra.get("exclude") or []]

    # -- files ---------------------------------------------------------------------------
    def hash_file(self, path, size):
        """Hash a regular file in chunks and, in the same pass, look for the tokens."""
        hasher = self.new_hasher()
        search = bool(self.token_bytes)
        if search and size > TOKEN_SEARCH_LIMIT:
            search = False
            self.errors.append("token search skipped (larger than 8 MiB): %s" % path)
        found = set()
        tail = b""
        # os.open/os.read skip the buffered-file object (about 40% faster on many small
        # files); the first read asks for size+1 bytes so a small file takes one read.
        want = min(CHUNK, size + 1)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
            return None
        try:
            while True:
                chunk = os.read(fd, want)
                if not chunk:
                    break
                hasher.update(chunk)
                if search:
                    window = tail + chunk
                    for index, token in enumerate(self.token_bytes):
                        if index not in found and token in window:
                            found.add(index)
                    tail = window[-self.overlap:] if self.overlap else b""
                if len(chunk) < want:
                    break  # a short read of a regular file is its end
                want = CHUNK
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
            return None
        finally:
            os.close(fd)
        for index in found:
            self.token_hits[self.tokens[index]].append(path)
        return hasher.hexdigest()

    def record(self, path, st):
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            kind = "symlink"
        elif stat.S_ISDIR(mode):
            kind = "dir"
        elif stat.S_ISREG(mode):
            kind = "file"
        else:
            kind = "other"  # fifos, sockets, devices: never opened (a fifo would block)
        entry = {
            "type": kind,
            "mode": stat.S_IMODE(mode),
            "uid": st.st_uid,
            "gid": st.st_gid,
            "size": st.st_size if kind == "file" else 0,
            "hash": None,
            "target": None,
        }
        if kind == "file":
            entry["hash"] = self.hash_file(path, st.st_size)
        elif kind == "symlink":
            try:
                entry["target"] = os.readlink(path)
            except OSError as exc:
                self.errors.append("unreadable link: %s: %s" % (path, exc.strerror or exc))
        self.files[path] = entry
        self.entries += 1
        return kind

    def walk(self, root):
        """Manifest ``root`` (a file or a directory tree) without following symlinks."""
        try:
            st = os.lstat(root)
        except FileNotFoundError:
            return False
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (root, exc.strerror or exc))
            return False
        if root in self.files:
            return True
        if self.record(root, st) != "dir":
            return True
        stack = [root]
        while stack:
            directory = stack.pop()
            try:
                iterator = os.scandir(directory)
            except OSError as exc:
                self.errors.append("unreadable dir: %s: %s" % (directory, exc.strerror or exc))
                continue
            with iterator:
                for entry in iterator:
                    if self.entries >= MAX_ENTRIES:
                        if not self.truncated:
                            self.errors.append("truncated: more than %d entries under the roots" % MAX_ENTRIES)
                            self.truncated = True
                        return True
                    path = entry.path
                    if path in self.files:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
                        continue
                    # An excluded directory is recorded (it exists) but not descended into.
                    if self.record(path, st) == "dir" and path not in self.exclude:
                        stack.append(path)
        return True


# -- structured config reads ----------------------------------------------------------------
def _strip_jsonc(text):
    """Remove // and /* */ comments and trailing commas outside strings (VS Code's JSONC)."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(_strip_jsonc(text))


def parse_ini(text):
    # DEFAULT is kept as an ordinary section: inheritance would make every section look
    # changed when only DEFAULT changed.
    parser = configparser.ConfigParser(interpolation=None, strict=False, default_section="\x00none")
    parser.optionxform = str  # keep key case: these files are case-sensitive for their apps
    parser.read_string(text)
    return dict((section, dict(parser.items(section, raw=True))) for section in parser.sections())


_PREF = re.compile(r'^\s*(?:user_pref|pref|sticky_pref)\(\s*"((?:[^"\\]|\\.)*)"\s*,\s*(.*?)\s*\)\s*;\s*$')


def parse_prefs(text):
    """Mozilla prefs.js/user.js: ``user_pref("name", value);`` lines to {name: value}."""
    data = {}
    for line in text.splitlines():
        match = _PREF.match(line)
        if not match:
            continue
        key = match.group(1).replace('\\"', '"').replace("\\\\", "\\")
        raw = match.group(2)
        try:
            data[key] = json.loads(raw)
        except ValueError:
            data[key] = raw
    return data


_OOR = "{http://openoffice.org/2001/registry}"


def parse_xcu(text):
    """LibreOffice registrymodifications.xcu items to {"<oor:path>/<node...>/<prop>": value}."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    data = {}

    def value_of(prop):
        value = prop.find("value")
        if value is None:
            return None
        items = value.findall("it")
        if items:
            return [it.text or "" for it in items]
        return value.text if value.text is not None else ""

    def visit(element, prefix):
        for child in element:
            name = child.get(_OOR + "name")
            if child.tag == "prop" and name is not None:
                data[prefix + "/" + name] = value_of(child)
            elif child.tag == "node" and name is not None:
                visit(child, prefix + "/" + name)

    for item in root.iter("item"):
        visit(item, item.get(_OOR + "path") or "")
    return data


def parse_msgfilter(text):
    """Thunderbird msgFilterRules.dat to {"header": {..}, "filters": [{.., "raw": block}]}."""
    header = {}
    filters = []
    current = None
    for line in text.splitlines():
        match = re.match(r'^(\w+)="(.*)"\s*$', line)
        if not match:
            continue
        key, value = match.group(1), match.group(2).replace('\\"', '"').replace("\\\\", "\\")
        if key == "name":
            current = {"name": value, "actions": [], "raw": [line]}
            filters.append(current)
            continue
        if current is None:
            header[key] = value
            continue
        current["raw"].append(line)
        if key == "action":
            current["actions"].append({"action": value})
            current.setdefault("action", value)
        elif key == "actionValue":
            if current["actions"]:
                current["actions"][-1]["actionValue"] = value
            current.setdefault("actionValue", value)
        else:
            current[key] = value
    for flt in filters:
        flt["raw"] = "\n".join(flt["raw"])
    return {"header": header, "filters": filters}


def parse_passwd(text):
    """passwd(5)-style lines: {name: {password, uid, gid, gecos, home, shell}} or {name: [fields]}."""
    data = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(":")
        if len(fields) == 7:
            data[fields[0]] = {"password": fields[1], "uid": fields[2], "gid": fields[3],
                               "gecos": fields[4], "home": fields[5], "shell": fields[6]}
        else:
            data[fields[0]] = fields[1:]
    return data


PARSERS = {
    "json": parse_json,
    "ini": parse_ini,
    "prefs": parse_prefs,
    "xcu": parse_xcu,
    "msgfilter": parse_msgfilter,
    "passwd": parse_passwd,
    "lines": lambda text: text.splitlines(),
    "text": lambda text: text,
}


def read_config(path, fmt):
    if fmt not in PARSERS:
        return {"data": None, "error": "unknown format %r (known: %s)" % (fmt, ", ".join(sorted(PARSERS)))}
    try:
        size = os.path.getsize(path)
        if size > TEXT_LIMIT:
            return {"data": None, "error": "too large to parse (%d bytes)" % size}
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return {"data": None, "error": "missing"}
    except OSError as exc:
        return {"data": None, "error": "unreadable: %s" % (exc.strerror or exc)}
    try:
        return {"data": PARSERS[fmt](text), "error": None}
    except Exception as exc:  # a malformed file is a fact about the state, not a probe failure
        return {"data": None, "error": "parse error: %s: %s" % (type(exc).__name__, exc)}


# -- processes, clipboard, commands -------------------------------------------------------
def list_processes():
    me = os.getpid()
    processes = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return processes
    for pid in pids:
        if pid == me:
            continue
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        if not cmdline or "OSGUARD_PROBE" in cmdline:  # the probe itself, when run inline
            continue
        processes.append({"pid": pid, "cmdline": cmdline})
    return processes


def read_clipboard(errors):
    """The clipboard text; "" when there is no display (no clipboard can exist), None if unreadable."""
    if not os.environ.get("DISPLAY"):
        return ""
    for command in (["xclip", "-selection", "clipboard", "-o"], ["xsel", "--clipboard", "--output"]):
        try:
            result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if result.returncode == 0:
            return result.stdout.decode("utf-8", "replace")
        if b"target" in result.stderr.lower() or b"no selection" in result.stderr.lower():
            return ""  # xclip says the clipboard is empty
    try:
        # Fallback without xclip/xsel: Tk reads the CLIPBOARD selection (python3-tk).
        import tkinter

        root = tkinter.Tk()
        root.withdraw()
        try:
            return root.clipboard_get()
        except tkinter.TclError:
            return ""  # no owner or no text: the clipboard is empty
        finally:
            root.destroy()
    except Exception as exc:
        errors.append("clipboard unreadable (no xclip/xsel, tkinter failed: %s)" % exc)
    return None


def run_command(command, home):
    try:
        result = subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=30, cwd=home)
        return {"returncode": result.returncode, "stdout": result.stdout.decode("utf-8", "replace"),
                "stderr": result.stderr.decode("utf-8", "replace")}
    except subprocess.TimeoutExpired:
        return {"returncode": -1, "stdout": "", "stderr": "timed out after 30 s"}
    except OSError as exc:
        return {"returncode": -1, "stdout": "", "stderr": "could not run: %s" % exc}


def expand(path, home):
    if path == "~":
        return home
    if path.startswith("~/"):
        return os.path.join(home, path[2:])
    return os.path.abspath(path)


def main(request):
    started = time.perf_counter()
    home = os.path.abspath(os.path.expanduser("~"))
    prober = Prober(request)
    roots = {}
    for root in request.get("roots") or []:
        absolute = expand(root, home).rstrip("/") or "/"
        roots[absolute] = prober.walk(absolute)
    configs = {}
    for path, fmt in request.get("configs") or []:
        absolute = expand(path, home)
        configs.setdefault(absolute, {})[fmt] = read_config(absolute, fmt)
    processes = list_processes() if request.get("processes") else []
    clipboard = read_clipboard(prober.errors) if request.get("clipboard") else None
    commands = {}
    for command in request.get("commands") or []:
        commands[command] = run_command(command, home)
    state = {
        "hash_algo": prober.hash_algo,
        "home": home,
        "roots": roots,
        "files": prober.files,
        "configs": configs,
        "tokens": prober.token_hits,
        "commands": commands,
        "processes": processes,
        "clipboard": clipboard,
        "errors": prober.errors,
        "elapsed_s": round(time.perf_counter() - started, 6),
    }
    sys.stdout.write(MARKER + json.dumps(state, separators=(",", ":")) + "\n")
    sys.stdout.flush()
