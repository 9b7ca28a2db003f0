# osguard file-step applier: runs INSIDE an environment (standard library only, Python 3.8+).
#
# The one executor of the operations rendered on the host by osguard.spec.render, e.g.
#   [{"op": "write", "path": "~/a.txt", "b64": "aGkK", "mode": "0644"}]
# Usage: python3 -c "$(cat this file)" OPS   (OPS: base64 of the operations' JSON). The builder
# runs it through the environment's /execute; exported OSWorld tasks carry the same command
# in `execute` steps, so they run on a stock OSWorld VM without osguard installed. On failure the reason goes to stderr as one line
# and the exit status is 1. Keep this file free of OSWorld's setup placeholders (curly-brace
# names that SetupController substitutes).
import base64
import json
import os
import re
import sys
import time

# printed on stdout with the index of the operation that failed (the builder, which applies
# several steps' operations at once, names the step from it)
FAILED_MARKER = "@@OSGUARD_APPLY_FAILED@@"


class Fail(Exception):
    """An operation could not be carried out; the message is shown as it is."""


def _path(p):
    return os.path.expanduser(p)


def _parent(p):
    d = os.path.dirname(p)
    if d:
        os.makedirs(d, exist_ok=True)


def op_write(o):
    p = _path(o["path"])
    _parent(p)
    with open(p, "ab" if o.get("append") else "wb") as f:
        f.write(base64.b64decode(o["b64"]))
    if o.get("mode"):
        os.chmod(p, int(o["mode"], 8))
    if o.get("mtime_days_ago") is not None:
        # only the modification time, as `touch -m` does
        os.utime(p, (os.stat(p).st_atime, time.time() - 86400 * float(o["mtime_days_ago"])))


def op_mkdir(o):
    p = _path(o["path"])
    os.makedirs(p, exist_ok=True)
    if o.get("mode"):
        os.chmod(p, int(o["mode"], 8))


def op_chmod(o):
    os.chmod(_path(o["path"]), int(o["mode"], 8))


def op_symlink(o):
    p = _path(o["path"])
    _parent(p)
    if os.path.isdir(p) and not os.path.islink(p):
        raise Fail("%s is a directory: cannot replace it with a link" % p)
    if os.path.lexists(p):
        os.remove(p)
    os.symlink(_path(o["target"]), p)


def _read(p, default=""):
    try:
        with open(p, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return default


def _write_text(p, text):
    _parent(p)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)


def _strip_json_comments(text):
    # VS Code's JSON files (JSONC) allow // and /* */ comments and trailing commas
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _load_json(p, default, expected):
    text = _read(p)
    if not text.strip():
        return default
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = json.loads(_strip_json_comments(text))
        except ValueError as exc:
            raise Fail("%s is not valid JSON: %s" % (p, exc))
    if not isinstance(data, type(default)):
        raise Fail("%s holds a JSON %s, expected %s" % (p, type(data).__name__, expected))
    return data


def _dump_json(p, data):
    _write_text(p, json.dumps(data, indent=4, ensure_ascii=False) + "\n")


def _ini_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def _pref_literal(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(str(v), ensure_ascii=False)


def _set_prefs(p, values):
    # Set user_pref lines in a Mozilla prefs.js: replace the first line of a name, else append
    lines = _read(p).splitlines()
    for key, value in values.items():
        name = json.dumps(key, ensure_ascii=False)
        pattern = re.compile(r"^\s*user_pref\(\s*%s\s*," % re.escape(name))
        new = "user_pref(%s, %s);" % (name, _pref_literal(value))
        for i, line in enumerate(lines):
            if pattern.match(line):
                lines[i] = new
                break
        else:
            lines.append(new)
    _write_text(p, "\n".join(lines) + "\n")


_XCU_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:xs="http://www.w3.org/2001/XMLSchema" '
             'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:oor="http://openoffice.org/2001/registry">\n')


def _xml(s, quote=False):
    s = str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace('"', "&quot;") if quote else s


def _xcu_value(v):
    if isinstance(v, list):
        return "<value>%s</value>" % "".join("<it>%s</it>" % _xml(_ini_value(x)) for x in v)
    return "<value>%s</value>" % _xml(_ini_value(v))


def _set_xcu(p, values):
    # Set items of a LibreOffice registrymodifications.xcu (keys are /node/path/prop): an
    # existing item is replaced where it stands, a new one goes before </oor:items>
    text = _read(p)
    if not text.strip():
        text = _XCU_HEAD + "</oor:items>\n"
    if "</oor:items>" not in text:
        raise Fail("%s is not a registrymodifications.xcu file (no </oor:items>)" % p)
    for key, value in values.items():
        node, prop = key.rstrip("/").rsplit("/", 1)
        item = '<item oor:path="%s"><prop oor:name="%s" oor:op="fuse">%s</prop></item>' % (
            _xml(node, True), _xml(prop, True), _xcu_value(value))
        existing = re.compile(r'<item oor:path="%s">\s*<prop oor:name="%s"[^>]*>.*?</prop>\s*</item>' % (
            re.escape(_xml(node, True)), re.escape(_xml(prop, True))), re.S)
        if existing.search(text):
            text = existing.sub(lambda _m: item, text, count=1)
        else:
            end = text.rfind("</oor:items>")
            text = text[:end] + item + "\n" + text[end:]
    _write_text(p, text)


def _set_ini(p, values):
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    try:
        parser.read_string(_read(p))
    except configparser.Error as exc:
        raise Fail("%s is not a valid INI file: %s" % (p, exc))
    for key, value in values.items():
        section, name = key.split(".", 1)
        if not parser.has_section(section):
            parser.add_section(section)
        parser.set(section, name, _ini_value(value))
    _parent(p)
    with open(p, "w", encoding="utf-8") as f:
        parser.write(f)


def op_config_entry(o):
    p, fmt, values = _path(o["path"]), o["format"], o["set"]
    if fmt == "json":
        data = _load_json(p, {}, "an object")
        # Dotted keys stay literal top-level keys, as VS Code's settings.json uses them.
        data.update(values)
        _dump_json(p, data)
    elif fmt == "ini":
        _set_ini(p, values)
    elif fmt == "prefs":
        _set_prefs(p, values)
    elif fmt == "xcu":
        _set_xcu(p, values)
    else:
        raise Fail("unknown config format %r" % fmt)


def op_cron(o):
    import shutil
    import subprocess

    line = o["line"]
    if shutil.which("crontab"):
        listed = subprocess.run(["crontab", "-l"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)
        current = listed.stdout if listed.returncode == 0 else ""
        text = current + ("" if not current or current.endswith("\n") else "\n") + line + "\n"
        done = subprocess.run(["crontab", "-"], input=text, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        if done.returncode:
            raise Fail("adding a crontab line failed: %s" % done.stdout.strip()[-300:])
        return
    # no cron installed: the user's crontab file as cron would keep it (needs root)
    import getpass

    p = "/var/spool/cron/crontabs/" + getpass.getuser()
    try:
        _write_text(p, _read(p) + line + "\n")
    except OSError as exc:
        raise Fail("no crontab command in this environment (and %s: %s)" % (p, exc.strerror or exc))


def op_keybinding(o):
    p = _path(o["file"])
    data = _load_json(p, [], "a list of keybindings")
    entry = {"key": o["key"], "command": o["command"]}
    if o.get("when") is not None:
        entry["when"] = o["when"]
    data.append(entry)
    _dump_json(p, data)


def _quote(s):
    # msgFilterRules.dat values: double-quoted, with \ and " escaped
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"')


def op_mail_filter(o):
    p = _path(o["file"])
    text = _read(p)
    if not text.strip():
        text = 'version="9"\nlogging="no"\n'
    block = ["name=" + _quote(o["name"]), "enabled=" + _quote(o.get("enabled", "yes")),
             "type=" + _quote(o.get("type", 17)), "action=" + _quote(o["action"])]
    if o.get("actionValue") is not None:
        block.append("actionValue=" + _quote(o["actionValue"]))
    block.append("condition=" + _quote(o["condition"]))
    _write_text(p, text.rstrip("\n") + "\n" + "\n".join(block) + "\n")


def op_mail_identity(o):
    prefix = "mail.identity.%s." % o["key"]
    values = {prefix + "useremail": o["email"]}
    for k, v in o.items():
        if k not in ("op", "profile", "key", "email"):
            values[prefix + k] = v
    _set_prefs(os.path.join(_path(o["profile"]), "prefs.js"), values)


def op_contact(o):
    p = _path(o["file"])
    card = ["BEGIN:VCARD", "VERSION:4.0"]
    card += ["%s:%s" % (str(k).upper(), v) for k, v in o.items() if k not in ("op", "file")]
    card.append("END:VCARD")
    _parent(p)
    with open(p, "ab") as f:
        f.write(("\r\n".join(card) + "\r\n").encode("utf-8"))


def op_user(o):
    import subprocess

    cmd = ["useradd", "-m"]
    if o.get("uid") is not None:
        cmd += ["-u", str(o["uid"])]
    if o.get("home"):
        cmd += ["-d", _path(o["home"])]
    cmd.append(o["name"])
    # environments with root run their server as root (VMs set up that way) or as an
    # ordinary user with password-less sudo (docker)
    if os.geteuid() != 0:
        cmd = ["sudo", "-n"] + cmd
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        output, failed = done.stdout, done.returncode != 0
    except OSError as exc:
        output, failed = "%s: %s" % (cmd[0], exc.strerror or exc), True
    if failed:
        raise Fail("useradd %s failed (needs requires.root): %s" % (o["name"], output.strip()[-300:]))


OPS = {name[3:]: fn for name, fn in list(globals().items()) if name.startswith("op_")}


def apply(ops):
    for index, o in enumerate(ops):
        function = OPS.get(o.get("op"))
        try:
            if function is None:
                raise Fail("unknown operation %r (known: %s)" % (o.get("op"), ", ".join(sorted(OPS))))
            try:
                function(o)
            except OSError as exc:
                where = o.get("path") or o.get("file") or o.get("profile") or ""
                raise Fail("cannot %s %s: %s" % (o["op"], _path(where), exc.strerror or exc))
        except Fail as exc:
            exc.index = index
            raise


def main(payload):
    try:
        apply(json.loads(base64.b64decode(payload).decode("utf-8")))
    except Fail as exc:
        sys.stdout.write("%s %d\n" % (FAILED_MARKER, exc.index))
        sys.stderr.write("%s\n" % exc)
        sys.exit(1)


if __name__ == "__main__" and len(sys.argv) > 1:
    main(sys.argv[1])
