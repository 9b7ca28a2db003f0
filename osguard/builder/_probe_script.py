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
import errno
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
MAX_FILE_BYTES = 512 << 20  # a larger file is recorded (type, mode, size) but not hashed
MAX_TOTAL_BYTES = 2 << 30  # bytes hashed per probe; beyond, files are recorded unhashed
# Every open: never follow a symlink, never block (a FIFO opened O_NONBLOCK returns at
# once; the fstat check below then refuses it), never become a controlling terminal.
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = OPEN_FLAGS | os.O_DIRECTORY


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


def type_word(mode):
    """The State's type of an lstat mode; "other" carries the precise kind in errors."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def other_word(mode):
    for test, word in ((stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "dir"), (stat.S_ISFIFO, "fifo"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return word
    return "not a file"


class NotRegular(Exception):
    """The path exists but is not a regular file (``kind``: symlink, dir, fifo, ...)."""

    def __init__(self, kind):
        Exception.__init__(self, kind)
        self.kind = kind


class LinkInPath(Exception):
    """A component on the way to a path is a symlink (or not a directory): not followed."""

    def __init__(self, path, kind):
        Exception.__init__(self, "%s is a %s" % (path, kind))
        self.path = path
        self.kind = kind


class Tree(object):
    """In-environment absolute paths to open file descriptors, never following a link.

    ``view`` (from ``request["extra"]["view"]``) maps in-environment prefixes to host
    folders (``{"map": {"/home/user": "/var/lib/.../home", ...}}``, an int value being an
    already open directory descriptor); without it the probe runs inside the environment
    and the map is the identity. Every component below a mapped prefix is opened with
    O_NOFOLLOW relative to its parent, so neither a planted symlink nor a race can make
    the probe read outside the tree. ``access_as`` ([uid, [gids]]) makes reads by another
    user (root over an extracted copy) fail as the environment's user would.
    """

    def __init__(self, view, home):
        view = view or {}
        mapping = view.get("map") or {"/": "/"}
        self.prefixes = sorted(((os.path.normpath(k), v) for k, v in mapping.items()),
                               key=lambda kv: -len(kv[0]))
        access = view.get("access_as")
        self.access_uid = access[0] if access else None
        self.access_gids = set(access[1]) if access else set()
        self.home = home

    def locate(self, path):
        """(base, [components]) of an absolute in-environment path; None when unmapped."""
        path = os.path.normpath(path)
        for prefix, base in self.prefixes:
            if prefix == "/":
                rest = path
            elif path == prefix or path.startswith(prefix + "/"):
                rest = path[len(prefix):]
            else:
                continue
            return base, [c for c in rest.split("/") if c]
        return None

    def _open_base(self, base):
        if isinstance(base, int):
            return os.dup(base)
        return os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))

    def open_dir(self, path):
        """A descriptor of directory ``path`` (every component opened without following)."""
        parent, name = self.open_parent(path)
        if name is None:
            return parent
        try:
            return self._descend(parent, name, path)
        finally:
            os.close(parent)

    def open_parent(self, path):
        """(descriptor of the parent directory, last component), or (descriptor, None) when
        ``path`` is a mapped prefix itself.

        Raises:
            LookupError: the path is outside every mapped folder.
            LinkInPath: a component on the way is a symlink or not a directory.
            OSError: missing (FileNotFoundError) or unreadable.
        """
        located = self.locate(path)
        if located is None:
            raise LookupError(path)
        base, components = located
        fd = self._open_base(base)
        if not components:
            return fd, None
        parts = os.path.normpath(path).split("/")
        first = len(parts) - len(components)
        try:
            for index, component in enumerate(components[:-1]):
                child = self._descend(fd, component, "/".join(parts[: first + index + 1]) or "/")
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd, components[-1]

    def _descend(self, fd, name, here):
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                except OSError:
                    raise exc
                raise LinkInPath(here, other_word(mode))
            raise
        if not self.may_list(os.fstat(child)):
            os.close(child)
            raise PermissionError(errno.EACCES, "Permission denied")
        return child

    # -- emulated permissions (root reading an extracted copy) -----------------------------
    def _allowed(self, st, bits):
        if self.access_uid is None or self.access_uid == 0:
            return True
        if st.st_uid == self.access_uid:
            shift = 6
        elif st.st_gid in self.access_gids:
            shift = 3
        else:
            shift = 0
        return (st.st_mode >> shift) & bits == bits

    def may_read(self, st):
        return self._allowed(st, 4)

    def may_list(self, st):
        return self._allowed(st, 5)

    def open_regular(self, dir_fd, name, expected=None):
        """An fd of regular file ``name`` in ``dir_fd``. Raises NotRegular, OSError."""
        try:
            fd = os.open(name, OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotRegular("symlink")
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(other_word(st.st_mode))
            if expected is not None and (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
                raise OSError(errno.EAGAIN, "replaced while being read")
            if not self.may_read(st):
                raise PermissionError(errno.EACCES, "Permission denied")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, path, limit):
        """The bytes of regular file ``path`` (at most ``limit``; raises ValueError beyond)."""
        parent, name = self.open_parent(path)
        try:
            if name is None:
                raise NotRegular("dir")
            fd = self.open_regular(parent, name)
        finally:
            os.close(parent)
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise ValueError("too large: %d bytes (limit %d)" % (size, limit))
            chunks = []
            total = 0
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise ValueError("too large: more than %d bytes" % limit)
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


    # -- the "fs" protocol the readers take (read, lstat, listdir) --------------------------
    def read(self, path, limit):
        """(bytes, None), or (None, status): "missing", "not a regular file: KIND",
        "not a regular file: KIND on the way (PATH)", "unreadable: ...", "too large: ..."."""
        try:
            return self.read_bytes(path, limit), None
        except LookupError:
            return None, "unreadable: outside the folders this view reads"
        except LinkInPath as exc:
            return None, "not a regular file: %s on the way (%s)" % (exc.kind, exc.path)
        except NotRegular as exc:
            return None, "not a regular file: %s" % exc.kind
        except (FileNotFoundError, NotADirectoryError):
            return None, "missing"
        except ValueError as exc:
            return None, str(exc)
        except OSError as exc:
            return None, "unreadable: %s" % (exc.strerror or exc)

    def lstat(self, path):
        """The lstat of ``path`` (no component followed), None when it cannot be taken."""
        try:
            parent, name = self.open_parent(path)
        except (LookupError, LinkInPath, OSError):
            return None
        try:
            return os.fstat(parent) if name is None else os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(parent)

    def listdir(self, path):
        """Names in directory ``path`` (raises OSError, LinkInPath or LookupError)."""
        fd = self.open_dir(path)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)


class Prober(object):
    def __init__(self, request, tree=None):
        self.request = request
        extra = request.get("extra") or {}
        self.hash_algo, self.new_hasher = _hasher_factory(extra.get("hash_algo"))
        self.tree = tree or Tree(None, os.path.abspath(os.path.expanduser("~")))
        self.tokens = [t for t in request.get("tokens") or [] if t]
        self.token_bytes = [t.encode("utf-8") for t in self.tokens]
        self.overlap = max([len(t) for t in self.token_bytes] or [1]) - 1
        self.files = {}
        self.token_hits = dict((t, []) for t in self.tokens)
        self.errors = []
        self.entries = 0
        self.hashed_bytes = 0
        self.truncated = False
        self.exclude = [os.path.normpath(expand(p, self.tree.home)) for p in extra.get("exclude") or []]

    # -- files ---------------------------------------------------------------------------
    def hash_chunks(self, path, size, read):
        """Hash a regular file's chunks (``read(n)``) and, in the same pass, look for the tokens."""
        if size > MAX_FILE_BYTES:
            self.errors.append("not hashed: %s is larger than the probe's per-file bound (%d bytes > %d)"
                               % (path, size, MAX_FILE_BYTES))
            return None
        if self.hashed_bytes + size > MAX_TOTAL_BYTES:
            self.errors.append("not hashed: %s: the probe's bound of %d bytes hashed in total is reached"
                               % (path, MAX_TOTAL_BYTES))
            return None
        hasher = self.new_hasher()
        search = bool(self.token_bytes)
        if search and size > TOKEN_SEARCH_LIMIT:
            search = False
            self.errors.append("token search skipped (larger than 8 MiB): %s" % path)
        found = set()
        tail = b""
        # The first read asks for size+1 bytes so a small file takes one read.
        want = min(CHUNK, size + 1)
        total = 0
        while True:
            chunk = read(want)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_FILE_BYTES:  # it grew while being read
                self.errors.append("not hashed: %s grew beyond the per-file bound while read" % path)
                return None
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
        self.hashed_bytes += total
        for index in found:
            self.token_hits[self.tokens[index]].append(path)
        return hasher.hexdigest()

    def hash_file(self, dir_fd, name, path, st):
        try:
            fd = self.tree.open_regular(dir_fd, name, st)
        except NotRegular as exc:
            self.errors.append("not a regular file when opened: %s: %s" % (path, exc.kind))
            return None
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
            return None
        try:
            return self.hash_chunks(path, st.st_size, lambda n: os.read(fd, n))
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
            return None
        finally:
            os.close(fd)

    def add(self, path, kind, mode, uid, gid, size, digest=None, target=None):
        """Record one entry (also used by hosts that feed entries from an archive)."""
        self.files[path] = {
            "type": kind,
            "mode": stat.S_IMODE(mode),
            "uid": uid,
            "gid": gid,
            "size": size if kind == "file" else 0,
            "hash": digest,
            "target": target,
        }
        self.entries += 1

    def record(self, dir_fd, name, path, st):
        kind = type_word(st.st_mode)  # fifos, sockets, devices: never opened
        digest = target = None
        if kind == "file":
            digest = self.hash_file(dir_fd, name, path, st)
        elif kind == "symlink":
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError as exc:
                self.errors.append("unreadable link: %s: %s" % (path, exc.strerror or exc))
        self.add(path, kind, st.st_mode, st.st_uid, st.st_gid, st.st_size, digest, target)
        return kind

    def walk(self, root):
        """Manifest ``root`` (a file or a directory tree) without following symlinks."""
        root = os.path.normpath(root)
        try:
            parent, name = self.tree.open_parent(root)
        except LookupError:
            self.errors.append("not probed: %s is outside the folders this view reads" % root)
            return False
        except LinkInPath as exc:
            self.link_in_path(exc, root)
            return False
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            self.errors.append("unreadable: %s: %s" % (root, exc.strerror or exc))
            return False
        if root in self.files:
            os.close(parent)
            return True
        try:
            if name is None:  # a mapped folder itself
                st = os.fstat(parent)
                self.add(root, "dir", st.st_mode, st.st_uid, st.st_gid, 0)
                kind = "dir"
            else:
                try:
                    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                except FileNotFoundError:
                    return False
                except OSError as exc:
                    self.errors.append("unreadable: %s: %s" % (root, exc.strerror or exc))
                    return False
                kind = self.record(parent, name, root, st)
        finally:
            os.close(parent)
        if kind == "dir" and root not in self.exclude:
            self.walk_dir(root)
        return True

    def link_in_path(self, exc, root):
        """Record the link (or file) found on the way to ``root``; it is never followed."""
        self.errors.append("not followed: %s is a %s on the way to %s" % (exc.path, exc.kind, root))
        if exc.path in self.files:
            return
        try:
            parent, name = self.tree.open_parent(exc.path)
        except (LookupError, LinkInPath, OSError):
            return
        try:
            if name is not None:
                self.record(parent, name, exc.path, os.stat(name, dir_fd=parent, follow_symlinks=False))
        except OSError:
            pass
        finally:
            os.close(parent)

    def walk_dir(self, top):
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                fd = self.tree.open_dir(directory)
            except LinkInPath as exc:
                self.errors.append("not followed: %s is a %s (changed while probed)" % (exc.path, exc.kind))
                continue
            except OSError as exc:
                self.errors.append("unreadable dir: %s: %s" % (directory, exc.strerror or exc))
                continue
            try:
                try:
                    iterator = os.scandir(fd)
                except OSError as exc:
                    self.errors.append("unreadable dir: %s: %s" % (directory, exc.strerror or exc))
                    continue
                with iterator:
                    for entry in iterator:
                        if self.entries >= MAX_ENTRIES:
                            if not self.truncated:
                                self.errors.append("truncated: more than %d entries under the roots" % MAX_ENTRIES)
                                self.truncated = True
                            return
                        name = entry.name
                        path = directory.rstrip("/") + "/" + name
                        if path in self.files:
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        except OSError as exc:
                            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
                            continue
                        # An excluded directory is recorded (it exists) but not descended into.
                        if self.record(fd, name, path, st) == "dir" and path not in self.exclude:
                            stack.append(path)
            finally:
                os.close(fd)


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


def read_config(path, fmt, fs=None):
    """{"data": parsed, "error": None} or {"data": None, "error": status}: "missing",
    "unreadable: ...", "not a regular file: symlink|dir|fifo|..." (also "... on the way
    (PATH)"), or a parse error. ``fs`` reads the file (default: a ``Tree`` over this
    machine's paths, never following a link in any component)."""
    if fmt not in PARSERS:
        return {"data": None, "error": "unknown format %r (known: %s)" % (fmt, ", ".join(sorted(PARSERS)))}
    fs = fs or Tree(None, os.path.abspath(os.path.expanduser("~")))
    raw, status = fs.read(path, TEXT_LIMIT)
    if status is not None:
        if status.startswith("too large"):
            status = "unreadable: " + status
        return {"data": None, "error": status}
    return parse_config(raw, fmt)


def parse_config(data, fmt):
    """Parse the bytes of a config file in format ``fmt``."""
    text = data.decode("utf-8", "replace")
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


def collect_files(request, tree):
    """The file part of a State (roots, configs, tokens), read through ``tree``."""
    prober = Prober(request, tree)
    roots = {}
    for root in request.get("roots") or []:
        absolute = os.path.normpath(expand(root, tree.home))
        roots[absolute] = prober.walk(absolute)
    configs = {}
    for path, fmt in request.get("configs") or []:
        absolute = os.path.normpath(expand(path, tree.home))
        configs.setdefault(absolute, {})[fmt] = read_config(absolute, fmt, tree)
    return prober, roots, configs


def main(request):
    started = time.perf_counter()
    view = (request.get("extra") or {}).get("view")
    home = view["home"] if view else os.path.abspath(os.path.expanduser("~"))
    tree = Tree(view, home)
    if view and view.get("drop_to") is not None:
        # Host side: started as root only so the interpreter (and xxhash) can load; every
        # read happens as the sandbox's own unprivileged uid.
        _hasher_factory((request.get("extra") or {}).get("hash_algo"))
        uid = int(view["drop_to"])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    prober, roots, configs = collect_files(request, tree)
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
