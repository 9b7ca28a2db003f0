# osguard file-step applier: runs INSIDE an environment (standard library only, Python 3.8+).
#
# Usage: python3 -c "$(cat this file)" OPS
# OPS is the base64 of a JSON list of operations rendered on the host by osguard.spec.render, e.g.
#   [{"op": "write", "path": "~/a.txt", "b64": "aGkK", "mode": "0644"}]
# Exported OSWorld tasks carry this source in `execute` steps so that they run on a stock
# OSWorld VM without osguard installed. Keep it free of OSWorld's setup placeholders
# (curly-brace names that SetupController substitutes).
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time


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
        t = time.time() - 86400 * int(o["mtime_days_ago"])
        os.utime(p, (t, t))


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
    # VS Code's JSON files allow // and /* */ comments; drop those outside strings
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


def _load_json(p, default):
    text = _read(p)
    return json.loads(_strip_json_comments(text)) if text.strip() else default


def _pref_line(key, value):
    return "user_pref(%s, %s);" % (json.dumps(key), json.dumps(value))


def _set_prefs(p, values):
    lines = _read(p).splitlines()
    for key, value in values.items():
        pattern = re.compile(r'^\s*user_pref\(\s*%s\s*,' % re.escape(json.dumps(key)))
        new = _pref_line(key, value)
        for i, line in enumerate(lines):
            if pattern.match(line):
                lines[i] = new
                break
        else:
            lines.append(new)
    _write_text(p, "\n".join(lines) + "\n")


_XCU_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
             'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n')


def _xml(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _xcu_value(v):
    if isinstance(v, bool):
        return "<value>%s</value>" % ("true" if v else "false")
    if isinstance(v, list):
        return "<value>%s</value>" % "".join("<it>%s</it>" % _xml(x) for x in v)
    return "<value>%s</value>" % _xml(v)


def _set_xcu(p, values):
    text = _read(p) or _XCU_HEAD + "</oor:items>\n"
    for key, value in values.items():
        node, prop = key.rsplit("/", 1)
        item = '<item oor:path="%s"><prop oor:name="%s" oor:op="fuse">%s</prop></item>' % (
            _xml(node), _xml(prop), _xcu_value(value))
        existing = re.compile(r'<item oor:path="%s"><prop oor:name="%s"[^>]*>.*?</prop></item>\n?' % (
            re.escape(_xml(node)), re.escape(_xml(prop))), re.S)
        text = existing.sub("", text)
        end = text.rfind("</oor:items>")
        text = text[:end] + item + "\n" + text[end:]
    _write_text(p, text)


def op_config_entry(o):
    p, fmt, values = _path(o["path"]), o["format"], o["set"]
    if fmt == "json":
        data = _load_json(p, {})
        if not isinstance(data, dict):
            raise SystemExit("%s: not a JSON object" % p)
        data.update(values)
        _write_text(p, json.dumps(data, indent=4, ensure_ascii=False) + "\n")
    elif fmt == "ini":
        import configparser

        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str
        parser.read_string(_read(p))
        for key, value in values.items():
            section, name = key.split(".", 1) if "." in key else ("DEFAULT", key)
            if section != "DEFAULT" and not parser.has_section(section):
                parser.add_section(section)
            parser.set(section, name, "true" if value is True else "false" if value is False else str(value))
        _parent(p)
        with open(p, "w", encoding="utf-8") as f:
            parser.write(f)
    elif fmt == "prefs":
        _set_prefs(p, values)
    elif fmt == "xcu":
        _set_xcu(p, values)
    else:
        raise SystemExit("unknown config format %r" % fmt)


def op_cron(o):
    if shutil.which("crontab"):
        current = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
        text = current + ("" if not current or current.endswith("\n") else "\n") + o["line"] + "\n"
        subprocess.run(["crontab", "-"], input=text, text=True, check=True)
    else:
        # no cron installed: the user's crontab file as cron would keep it
        import getpass

        p = "/var/spool/cron/crontabs/" + getpass.getuser()
        _write_text(p, _read(p) + o["line"] + "\n")


def op_keybinding(o):
    p = _path(o["file"])
    data = _load_json(p, [])
    entry = {"key": o["key"], "command": o["command"]}
    if o.get("when"):
        entry["when"] = o["when"]
    data.append(entry)
    _write_text(p, json.dumps(data, indent=4, ensure_ascii=False) + "\n")


def _quote(s):
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"')


def op_mail_filter(o):
    p = _path(o["file"])
    text = _read(p) or 'version="9"\nlogging="no"\n'
    block = ["name=" + _quote(o["name"]), 'enabled="yes"', 'type="17"', "action=" + _quote(o["action"])]
    if o.get("actionValue") is not None:
        block.append("actionValue=" + _quote(o["actionValue"]))
    block.append("condition=" + _quote(o["condition"]))
    _write_text(p, text + ("" if text.endswith("\n") else "\n") + "\n".join(block) + "\n")


def op_mail_identity(o):
    prefix = "mail.identity.%s." % o["key"]
    values = {prefix + "useremail": o["email"]}
    for k, v in o.items():
        if k not in ("op", "kind", "profile", "key", "email", "note"):
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
    cmd = ["useradd", "-m", "-s", "/bin/bash"]
    if o.get("uid") is not None:
        cmd += ["-u", str(o["uid"])]
    if o.get("home"):
        cmd += ["-d", o["home"]]
    subprocess.run(cmd + [o["name"]], check=True)


OPS = {name[3:]: fn for name, fn in list(globals().items()) if name.startswith("op_")}


def apply(ops):
    for o in ops:
        OPS[o["op"]](o)


if __name__ == "__main__":
    apply(json.loads(base64.b64decode(sys.argv[1])))
