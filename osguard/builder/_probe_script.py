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

import errno
import fnmatch
import json
import os
import re
import stat
import sys
import time

MARKER = "@@OSGUARD_PROBE@@"
CHUNK = 1 << 20
TOKEN_SEARCH_LIMIT = 8 << 20  # files larger than this are hashed but not searched for tokens
TEXT_LIMIT = 1 << 20  # configs/text reads larger than this are refused
MAX_ENTRIES = 200000  # a runaway root (a whole filesystem) must not hang the episode
MAX_FILE_BYTES = 512 << 20  # a larger file is recorded (type, mode, size) but not hashed
MAX_TOTAL_BYTES = 2 << 30  # bytes hashed per probe; beyond, files are recorded unhashed
# A file whose ctime is this close to the probe's start is never reused from the stat cache:
# a write in the same timestamp tick as the cached stat would leave every field unchanged
# (git's "racily clean" entries). Covers coarse kernel ticks and 1-2 s filesystem stamps.
RACY_NS = 2 * 10 ** 9
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


STAT_ROW = "%d,%d,%d,%d,%d,%d,%d,%d,"


def stat_row(st):
    """The stat cache's key of a file: "dev,ino,size,mtime_ns,ctime_ns,st_mode,uid,gid,"."""
    return STAT_ROW % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                       st.st_mode, st.st_uid, st.st_gid)


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
        # The stat cache (incremental probes): ``extra["stat_cache"]`` is None (off), or
        # {path: "dev,ino,size,mtime_ns,ctime_ns,st_mode,uid,gid,digest,token bitmask"} from an
        # earlier probe with the same hash algorithm and tokens, taken by the same trusted
        # host; a file whose lstat still matches its row is not read again. (One string a
        # row: ten thousand rows cross the pipe as JSON twice per probe.)
        cache = extra.get("stat_cache")
        if isinstance(cache, int) and not isinstance(cache, bool):
            cache = read_stat_cache(cache)
        self.cache = cache if isinstance(cache, dict) else {}
        self.stat_table = {} if cache is not None else None
        self.racy_after = time.time_ns() - RACY_NS if cache is not None else 0
        self.reused_paths = set()  # emitted as 0: the host has their entry from the same row
        # The walk may record a reused file as 0 straight away, unless something in this
        # process reads the entries afterwards (the line index).
        self.placeholders = cache is not None and not request.get("lines")

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
        self.last_read = (total, sum(1 << index for index in found))
        for index in found:
            self.token_hits[self.tokens[index]].append(path)
        return hasher.hexdigest()

    def hash_file(self, dir_fd, name, path, st):
        if self.stat_table is None:
            return self.read_and_hash(dir_fd, name, path, st)
        digest = self.cached_digest(path, st)
        if digest is not None:
            return digest
        self.last_read = None
        digest = self.read_and_hash(dir_fd, name, path, st)
        if digest is None or self.last_read is None or self.last_read[0] != st.st_size:
            return digest
        if st.st_ctime_ns < self.racy_after:
            self.stat_table[path] = "%s%s,%d" % (stat_row(st), digest, self.last_read[1])
        return digest

    def cached_digest(self, path, st):
        """The digest of regular file ``path`` from the stat cache when its lstat ``st``
        still matches its row (its token hits recorded as a read would), else None."""
        cached = self.cache.get(path)
        if cached is None:
            return None
        row = stat_row(st)
        if not cached.startswith(row) or not self.reusable(st):
            return None
        digest, mask = cached[len(row):].split(",")
        self.reuse(path, st.st_size, int(mask))
        self.reused_paths.add(path)
        return digest

    def reusable(self, st):
        """Whether a cached digest may stand for this file: the same checks and bounds as
        reading it would apply, so a reused entry gives the State a read would give."""
        return (st.st_ctime_ns < self.racy_after and self.tree.may_read(st) and st.st_size <= MAX_FILE_BYTES
                and self.hashed_bytes + st.st_size <= MAX_TOTAL_BYTES)

    def reuse(self, path, size, mask):
        """What hash_chunks would have recorded for an unchanged file (errors, bounds, hits)."""
        if self.token_bytes and size > TOKEN_SEARCH_LIMIT:
            self.errors.append("token search skipped (larger than 8 MiB): %s" % path)
        self.hashed_bytes += size
        index = 0
        while mask:
            if mask & 1:
                self.token_hits[self.tokens[index]].append(path)
            mask >>= 1
            index += 1

    def read_and_hash(self, dir_fd, name, path, st):
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

    def entry(self, kind, mode, uid, gid, size, digest=None, target=None):
        """The State entry of one path."""
        return {
            "type": kind,
            "mode": stat.S_IMODE(mode),
            "uid": uid,
            "gid": gid,
            "size": size if kind == "file" else 0,
            "hash": digest,
            "target": target,
        }

    def add(self, path, kind, mode, uid, gid, size, digest=None, target=None):
        """Record one entry (also used by hosts that feed entries from an archive)."""
        self.files[path] = self.entry(kind, mode, uid, gid, size, digest, target)
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
        incremental = self.stat_table is not None
        cache_get = self.cache.get
        racy_after = self.racy_after
        reused_add = self.reused_paths.add
        files = self.files
        placeholders = self.placeholders
        # Without an emulated user (the host view drops to the sandbox's uid; the kernel
        # checks) and without tokens, a small file's reuse needs only the row and the
        # bounds: reusable() and reuse() reduced to what they would do.
        fast_reuse = self.tree.access_uid is None and not self.token_bytes
        fast_size = min(MAX_FILE_BYTES, TOKEN_SEARCH_LIMIT)
        S_ISREG = stat.S_ISREG
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
                prefix = directory.rstrip("/") + "/"
                with iterator:
                    for entry in iterator:
                        if self.entries >= MAX_ENTRIES:
                            if not self.truncated:
                                self.errors.append("truncated: more than %d entries under the roots" % MAX_ENTRIES)
                                self.truncated = True
                            return
                        name = entry.name
                        path = prefix + name
                        if path in files:
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        except OSError as exc:
                            self.errors.append("unreadable: %s: %s" % (path, exc.strerror or exc))
                            continue
                        if incremental and S_ISREG(st.st_mode):
                            # The hot path of a step: an unchanged file is not opened, and
                            # its entry is the placeholder 0 (the host holds the entry it
                            # recorded with the same row; see main). Inlined: ten thousand
                            # files a probe.
                            cached = cache_get(path)
                            if (cached is not None and st.st_ctime_ns < racy_after
                                    and cached.startswith(STAT_ROW % (st.st_dev, st.st_ino, st.st_size,
                                                                      st.st_mtime_ns, st.st_ctime_ns, st.st_mode,
                                                                      st.st_uid, st.st_gid))
                                    and ((fast_reuse and st.st_size <= fast_size
                                          and self.hashed_bytes + st.st_size <= MAX_TOTAL_BYTES)
                                         or self.reusable(st))):
                                mask = cached.rsplit(",", 1)[1]
                                if mask != "0" or not fast_reuse:
                                    self.reuse(path, st.st_size, int(mask))
                                else:
                                    self.hashed_bytes += st.st_size
                                reused_add(path)
                                files[path] = 0 if placeholders else self.entry(
                                    "file", st.st_mode, st.st_uid, st.st_gid, st.st_size,
                                    cached.rsplit(",", 2)[1])
                                self.entries += 1
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
    import configparser  # here: its import compiles regular expressions every probe would pay

    parser = configparser.ConfigParser(interpolation=None, strict=False, default_section="\x00none")
    parser.optionxform = str  # keep key case: these files are case-sensitive for their apps
    parser.read_string(text)
    return dict((section, dict(parser.items(section, raw=True))) for section in parser.sections())


_PREF = re.compile(r'^\s*(?:user_pref|pref|sticky_pref)\(\s*"((?:[^"\\]|\\.)*)"\s*,\s*(.*?)\s*\)\s*;\s*$')
_PREF_START = re.compile(r'^\s*(?:user_pref|pref|sticky_pref)\s*\(')
_PREF_INT = re.compile(r'^-?[0-9]+$')


def _pref_value(raw):
    """A prefs.js value, typed as Firefox reads it: true/false -> bool, an integer -> int,
    a quoted string -> str. Anything else (15.0, bare words) is not a valid pref value."""
    if raw in ("true", "false"):
        return raw == "true"
    if _PREF_INT.match(raw):
        return int(raw)
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return json.loads(raw)
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return json.loads('"' + raw[1:-1].replace('"', '\\"') + '"')
    raise ValueError("not a boolean, integer or string: %s" % raw)


def parse_prefs(text):
    """Mozilla prefs.js/user.js: ``user_pref("name", value);`` lines to {name: bool|int|str}.

    A pref line that does not parse (a missing comma, a float, a bare word) makes the whole
    file unparseable, as it is for Firefox/Thunderbird; comments and blank lines are skipped.
    """
    data = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _PREF.match(line)
        if not match:
            if _PREF_START.match(line):
                raise ValueError("line %d is not a valid pref: %s" % (number, line.strip()[:200]))
            continue
        key = match.group(1).replace('\\"', '"').replace("\\\\", "\\")
        try:
            data[key] = _pref_value(match.group(2))
        except ValueError as exc:
            raise ValueError("line %d: %s" % (number, exc))
    return data


_OOR = "{http://openoffice.org/2001/registry}"


def parse_xcu(text):
    """LibreOffice registrymodifications.xcu items to
    {"<oor:path>/<node...>/<prop>": {"value": text|[text]|None, "type": oor:type|None}}."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    data = {}

    def value_of(prop):
        # typed: the value text (or list of <it>) plus its oor:type ("xs:int", "xs:boolean"...)
        kind = prop.get(_OOR + "type")
        value = prop.find("value")
        if value is None:
            return {"value": None, "type": kind}
        items = value.findall("it")
        if items:
            return {"value": [it.text or "" for it in items], "type": kind}
        return {"value": value.text if value.text is not None else "", "type": kind}

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


_FILE_KINDS = ((stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "dir"), (stat.S_ISFIFO, "fifo"),
               (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))


def _not_regular(mode):
    """None for a regular file, else what it is ("symlink", "dir", "fifo"...)."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "other"


def _local_tree():
    """A ``Tree`` over this machine's own paths (the probe inside an environment, or a
    local test home): the default reader of the functions that take an ``fs``."""
    return Tree(None, os.path.abspath(os.path.expanduser("~")))


def read_config(path, fmt, fs=None):
    """{"data": parsed, "error": None} or {"data": None, "error": status}: "missing",
    "unreadable: ...", "not a regular file: symlink|dir|fifo|..." (also "... on the way
    (PATH)"), or a parse error. ``fs`` reads the file (default: a ``Tree`` over this
    machine's paths, never following a link in any component)."""
    if fmt not in PARSERS:
        return {"data": None, "error": "unknown format %r (known: %s)" % (fmt, ", ".join(sorted(PARSERS)))}
    fs = fs or _local_tree()
    raw, status = fs.read(path, TEXT_LIMIT)
    if status is not None:
        if status.startswith("too large"):
            status = "unreadable: " + status
        return {"data": None, "error": status}
    st = fs.lstat(path)
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o400
    if not mode & stat.S_IRUSR:
        # a probe running as root reads it anyway; the application, as the owner, cannot
        return {"data": None, "error": "unreadable: mode %04o (its owner cannot read it)" % mode}
    return parse_config(raw, fmt)


def parse_config(raw, fmt):
    """Parse the bytes of a config file: structured formats must be UTF-8; a failure is
    "unparseable: ..." (a fact about the state, not a probe failure)."""
    if fmt in ("lines", "text"):
        text = raw.decode("utf-8", "replace")
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return {"data": None, "error": "unparseable: not UTF-8 text (%s)" % exc.reason}
    try:
        return {"data": PARSERS[fmt](text), "error": None}
    except Exception as exc:  # a malformed file is a fact about the state, not a probe failure
        return {"data": None, "error": "unparseable: %s: %s" % (type(exc).__name__, exc)}


# -- line index (content_retained) ----------------------------------------------------------
LINE_FILE_LIMIT = 1 << 20  # larger files are not indexed (compared whole, by content hash)
LINE_TOTAL_LIMIT = 400000  # indexed lines across all files; beyond it the index is incomplete


def line_hash(line):
    """16 hex digits identifying one line (whitespace at both ends ignored)."""
    import hashlib

    return hashlib.blake2b(line.strip().encode("utf-8", "replace"), digest_size=8).hexdigest()


def line_index(files, roots, errors, fs=None):
    """{path: [[line_number, line_hash], ...]} of the text files under ``roots`` (blank lines
    left out), and whether the bound was hit. Binary files (a NUL byte) are not indexed."""
    if not roots:
        return {}, False
    fs = fs or _local_tree()
    index = {}
    total = 0
    truncated = False
    prefixes = [r.rstrip("/") + "/" for r in roots]
    for path in sorted(files):
        entry = files[path]
        if entry.get("type") != "file" or entry.get("size", 0) > LINE_FILE_LIMIT:
            continue
        if path not in roots and not any(path.startswith(prefix) for prefix in prefixes):
            continue
        raw, status = fs.read(path, LINE_FILE_LIMIT)
        if raw is None:
            errors.append("line index: %s: %s" % (path, status))
            continue
        if b"\0" in raw[:8192]:
            continue
        lines = []
        for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
            if line.strip():
                lines.append([number, line_hash(line)])
        if total + len(lines) > LINE_TOTAL_LIMIT:
            truncated = True
            errors.append("line index truncated: more than %d lines under %s" % (LINE_TOTAL_LIMIT, ", ".join(roots)))
            break
        total += len(lines)
        index[path] = lines
    return index, truncated


# -- git objects (pure Python: git itself is never run on a repository the agent controls) ---
GIT_BYTES_LIMIT = 256 << 20  # inflated bytes across all objects of one repository
GIT_OBJECTS_LIMIT = 500000
GIT_DELTA_DEPTH = 1000
_GIT_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


class _GitLimit(Exception):
    pass


def _git_dir(repo, fs):
    """The object-holding git directory of a work tree (repo/.git) or a bare repository."""
    for gitdir, probe in ((os.path.join(repo, ".git"), os.path.join(repo, ".git")),
                          (repo, os.path.join(repo, "objects"))):
        st = fs.lstat(probe)
        if st is not None and stat.S_ISDIR(st.st_mode):
            return gitdir
    return None


def _apply_delta(base, delta, limit):
    def varint(pos):
        value = shift = 0
        while True:
            byte = delta[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, pos

    source_size, pos = varint(0)
    target_size, pos = varint(pos)
    if source_size != len(base):
        raise ValueError("delta base size mismatch")
    if target_size > limit:
        raise _GitLimit()
    out = bytearray()
    while pos < len(delta):
        op = delta[pos]
        pos += 1
        if op & 0x80:
            offset = size = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= delta[pos] << (8 * bit)
                    pos += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    size |= delta[pos] << (8 * bit)
                    pos += 1
            size = size or 0x10000
            out += base[offset:offset + size]
        elif op:
            out += delta[pos:pos + op]
            pos += op
        else:
            raise ValueError("delta opcode 0")
        if len(out) > target_size:
            raise ValueError("delta overflows its size")
    if len(out) != target_size:
        raise ValueError("delta result size mismatch")
    return bytes(out)


class _GitReader(object):
    """Every object of one repository: loose files and packs, deltas resolved, bounded."""

    def __init__(self, gitdir, errors, fs):
        import hashlib
        import zlib

        self.fs = fs
        self.zlib = zlib
        self.sha1 = hashlib.sha1
        self.gitdir = gitdir
        self.errors = errors
        self.budget = GIT_BYTES_LIMIT
        self.count = 0

    def inflate(self, data, start):
        """(inflated bytes, end offset) of the zlib stream at ``data[start:]``, fed in small
        pieces so a pack of many objects is not copied once per object."""
        inflater = self.zlib.decompressobj()
        out = []
        total = 0
        pos = start
        while not inflater.eof:
            if pos >= len(data):
                raise ValueError("truncated zlib stream")
            piece = inflater.decompress(data[pos:pos + 16384])
            pos += 16384
            total += len(piece)
            if total > self.budget:
                raise _GitLimit()
            out.append(piece)
        return b"".join(out), min(pos, len(data)) - len(inflater.unused_data)

    def take(self, size):
        self.count += 1
        self.budget -= size
        if self.budget < 0 or self.count > GIT_OBJECTS_LIMIT:
            raise _GitLimit()

    def object_id(self, kind, data):
        return self.sha1(("%s %d\0" % (kind, len(data))).encode() + data).hexdigest()

    def files(self):
        """Every regular file under objects/ (never following a symlink)."""
        stack = [os.path.join(self.gitdir, "objects")]
        while stack:
            directory = stack.pop()
            try:
                names = sorted(self.fs.listdir(directory))
            except OSError as exc:
                self.errors.append("git: %s: %s" % (directory, exc.strerror or exc))
                continue
            for name in names:
                path = os.path.join(directory, name)
                st = self.fs.lstat(path)
                if st is None:
                    continue
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    stack.append(path)
                elif stat.S_ISREG(mode):
                    yield path

    def objects(self):
        """Yield (object id, type, content) of every object."""
        packs = []
        loose = []
        for path in self.files():
            (packs if path.endswith(".pack") else loose).append(path)
        by_id = {}
        for path in loose:
            raw, status = self.fs.read(path, GIT_BYTES_LIMIT)
            if raw is None:
                self.errors.append("git: %s: %s" % (path, status))
                continue
            try:
                data, _ = self.inflate(raw, 0)
            except (ValueError, self.zlib.error):
                continue  # not a loose object (idx, info/packs, ...)
            header, _, body = data.partition(b"\0")
            kind = header.split(b" ")[0].decode("ascii", "replace")
            if kind not in _GIT_TYPES.values():
                continue
            self.take(len(body))
            oid = self.object_id(kind, body)
            by_id[oid] = (kind, body)
            yield oid, kind, body
        for path in packs:
            for item in self.pack_objects(path, by_id):
                yield item

    def pack_objects(self, path, by_id):
        raw, status = self.fs.read(path, GIT_BYTES_LIMIT)
        if raw is None:
            self.errors.append("git: %s: %s" % (path, status))
            return
        if raw[:4] != b"PACK" or len(raw) < 12:
            self.errors.append("git: %s: not a pack file" % path)
            return
        count = int.from_bytes(raw[8:12], "big")
        entries = {}  # offset -> (type number, payload, base: offset|object id|None)
        pos = 12
        try:
            for _ in range(count):
                offset = pos
                byte = raw[pos]
                pos += 1
                kind = (byte >> 4) & 7
                size = byte & 15
                shift = 4
                while byte & 0x80:
                    byte = raw[pos]
                    pos += 1
                    size |= (byte & 0x7F) << shift
                    shift += 7
                base = None
                if kind == 6:
                    byte = raw[pos]
                    pos += 1
                    back = byte & 0x7F
                    while byte & 0x80:
                        byte = raw[pos]
                        pos += 1
                        back = ((back + 1) << 7) | (byte & 0x7F)
                    base = offset - back
                elif kind == 7:
                    base = raw[pos:pos + 20].hex()
                    pos += 20
                payload, pos = self.inflate(raw, pos)
                entries[offset] = (kind, payload, base)
        except (IndexError, ValueError, self.zlib.error) as exc:
            self.errors.append("git: %s: malformed pack (%s); objects after offset %d not read" % (path, exc, pos))
        resolved = {}  # offset -> (type, content)
        ids = {}  # object id -> offset, for ref-deltas whose base is in this pack

        def resolve(offset):
            chain = []
            current = offset
            while True:
                if current in resolved:
                    kind, data = resolved[current]
                    break
                if current not in entries:
                    raise ValueError("delta base at offset %s missing" % current)
                number, payload, base = entries[current]
                if number in _GIT_TYPES:
                    kind, data = _GIT_TYPES[number], payload
                    break
                chain.append(current)
                if len(chain) > GIT_DELTA_DEPTH:
                    raise ValueError("delta chain deeper than %d" % GIT_DELTA_DEPTH)
                if number == 7:
                    if base in by_id:
                        kind, data = by_id[base]
                        break
                    if base not in ids:
                        raise KeyError(base)  # perhaps later in the pack: retried
                    current = ids[base]
                    continue
                if number != 6:
                    raise ValueError("unknown object type %d" % number)
                current = base
            for link in reversed(chain):
                data = _apply_delta(data, entries[link][1], self.budget)
                resolved[link] = (kind, data)
            resolved[offset] = (kind, data)
            return kind, data

        pending = sorted(entries)
        while pending:
            deferred = []
            for offset in pending:
                try:
                    kind, data = resolve(offset)
                except KeyError:
                    deferred.append(offset)
                    continue
                except (ValueError, IndexError) as exc:
                    self.errors.append("git: %s: object at offset %d: %s" % (path, offset, exc))
                    continue
                self.take(len(data))
                oid = self.object_id(kind, data)
                ids[oid] = offset
                by_id.setdefault(oid, (kind, data))
                yield oid, kind, data
            if len(deferred) == len(pending):
                for offset in deferred:
                    self.errors.append("git: %s: object at offset %d: ref-delta base %s not found"
                                       % (path, offset, entries[offset][2]))
                break
            pending = deferred


def git_search(repo, tokens, errors, fs=None):
    """{"objects": n, "hits": {token: [object ids]}, "error": None|str, "truncated": bool}
    over every object stored in the repository at ``repo`` (work tree or bare)."""
    fs = fs or _local_tree()
    result = {"objects": 0, "hits": dict((t, []) for t in tokens), "error": None, "truncated": False}
    st = fs.lstat(repo)
    if st is None:
        result["error"] = "missing"
        return result
    if not stat.S_ISDIR(st.st_mode):
        result["error"] = "not a regular file: %s" % (_not_regular(st.st_mode) or "file")
        return result
    gitdir = _git_dir(repo, fs)
    if gitdir is None:
        result["error"] = "not a git repository (no .git or objects folder)"
        return result
    needles = [(t, t.encode("utf-8")) for t in tokens]
    reader = _GitReader(gitdir, errors, fs)
    seen = set()
    try:
        for oid, _kind, data in reader.objects():
            if oid in seen:
                continue
            seen.add(oid)
            for token, needle in needles:
                if needle in data:
                    result["hits"][token].append(oid)
    except _GitLimit:
        result["truncated"] = True
        errors.append("git: %s: more than %d inflated bytes or %d objects; search incomplete"
                      % (repo, GIT_BYTES_LIMIT, GIT_OBJECTS_LIMIT))
    result["objects"] = len(seen)
    alternates = os.path.join(gitdir, "objects", "info", "alternates")
    if fs.lstat(alternates) is not None:
        errors.append("git: %s: objects/info/alternates is not followed" % repo)
    return result


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
    import subprocess  # here: the host view's probe never runs commands (5-20 ms of import)

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
    import subprocess

    try:
        result = subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=30, cwd=home)
        return {"returncode": result.returncode, "stdout": result.stdout.decode("utf-8", "replace"),
                "stderr": result.stderr.decode("utf-8", "replace")}
    except subprocess.TimeoutExpired:
        return {"returncode": -1, "stdout": "", "stderr": "timed out after 30 s"}
    except OSError as exc:
        return {"returncode": -1, "stdout": "", "stderr": "could not run: %s" % exc}


def read_stat_cache(fd):
    """The stat cache from descriptor ``fd`` (the host's memfd): "path\0row\0path\0row..."
    in UTF-8 with surrogate escapes (no path holds a NUL)."""
    chunks = []
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    if not chunks:
        return {}
    items = iter(b"".join(chunks).decode("utf-8", "surrogateescape").split("\0"))
    return dict(zip(items, items))


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
        # The readers below import these lazily; after the drop the interpreter's own library
        # may be unreadable (a root-only prefix such as /root/.pyenv), so load them now: only
        # those this request's readers use (together 40-90 ms a probe on a loaded machine).
        if request.get("configs"):
            import configparser  # noqa: F401
            import xml.etree.ElementTree  # noqa: F401
            import xml.parsers.expat  # noqa: F401
        if request.get("git") or request.get("lines"):
            import hashlib  # noqa: F401
            import zlib  # noqa: F401
        uid = int(view["drop_to"])
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    prober, roots, configs = collect_files(request, tree)
    lines, lines_truncated = line_index(prober.files, [os.path.normpath(expand(r, home)).rstrip("/") or "/"
                                                       for r in request.get("lines") or []], prober.errors, fs=tree)
    git = {}
    for repo in request.get("git") or []:
        absolute = os.path.normpath(expand(repo, home)).rstrip("/") or "/"
        git[absolute] = git_search(absolute, prober.tokens, prober.errors, fs=tree)
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
        "lines": lines,
        "lines_truncated": lines_truncated,
        "git": git,
        "commands": commands,
        "processes": processes,
        "clipboard": clipboard,
        "errors": prober.errors,
        "elapsed_s": round(time.perf_counter() - started, 6),
    }
    if prober.stat_table is not None:
        # Incremental: only new rows go back, and a file reused from its row is sent as 0
        # (the host holds the entry it recorded with that row): the unchanged part of a
        # large home does not cross the pipe twice. The host restores both before anyone
        # sees the State.
        for path in prober.reused_paths:
            prober.files[path] = 0  # an existing key: the walk's order is kept
        state["stat_table"] = prober.stat_table
    if (request.get("extra") or {}).get("output") == "marshal":
        # The host view runs this script in its own interpreter, which reads marshal (a
        # tenth of the time of JSON both ways for a large home): the marker, the length,
        # the data. Inside an environment the output stays JSON (another Python version).
        import marshal

        data = marshal.dumps(state)
        out = getattr(sys.stdout, "buffer", sys.stdout)
        out.write(MARKER.encode() + b"M" + ("%016d" % len(data)).encode() + data)
        out.flush()
        return
    sys.stdout.write(MARKER + json.dumps(state, separators=(",", ":")) + "\n")
    sys.stdout.flush()
