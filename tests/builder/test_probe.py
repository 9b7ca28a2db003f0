"""The state probe: real files, the real script in a real subprocess (and a real local
environment when the local provider can run here)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import xxhash

from osguard.builder import probe as probe_mod
from osguard.builder.probe import ProbeError, parse_probe_output, probe_code, probe_local
from osguard.invariants import ProbeRequest

STATE_KEYS = {"hash_algo", "home", "roots", "files", "configs", "tokens", "commands", "processes",
              "clipboard", "errors", "elapsed_s", "lines", "lines_truncated", "git"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "docs/sub").mkdir(parents=True)
    (root / "docs/a.txt").write_text("alpha\n")
    (root / "docs/sub/b.bin").write_bytes(bytes(range(256)) * 3)
    os.chmod(root / "docs/a.txt", 0o640)
    (root / "link").symlink_to("docs/a.txt")
    return root


def test_manifest_has_type_mode_owner_size_target_and_xxh3(home: Path) -> None:
    state = probe_local(ProbeRequest(roots=("~/docs", "~/link")), home=str(home))
    assert set(state) == STATE_KEYS
    assert state["hash_algo"] == "xxh3_128"
    assert state["home"] == str(home)
    assert state["roots"] == {str(home / "docs"): True, str(home / "link"): True}
    a = state["files"][str(home / "docs/a.txt")]
    assert a == {"type": "file", "mode": 0o640, "uid": os.getuid(), "gid": os.getgid(), "size": 6,
                 "hash": xxhash.xxh3_128(b"alpha\n").hexdigest(), "target": None}
    assert state["files"][str(home / "docs/sub")]["type"] == "dir"
    assert state["files"][str(home / "link")]["type"] == "symlink"
    assert state["files"][str(home / "link")]["target"] == "docs/a.txt"
    assert sorted(state["files"]) == sorted(str(home / p) for p in ("docs", "docs/a.txt", "docs/sub",
                                                                   "docs/sub/b.bin", "link"))
    assert state["errors"] == []


def test_missing_root_is_recorded_as_not_existing(home: Path) -> None:
    state = probe_local(ProbeRequest(roots=("~/nope", "/tmp/../tmp/osguard-no-such")), home=str(home))
    assert state["roots"] == {str(home / "nope"): False, "/tmp/osguard-no-such": False}
    assert state["files"] == {}


def test_hashlib_fallback_is_named_when_xxhash_is_absent(home: Path) -> None:
    """The OSWorld VM's python has no xxhash: the probe must still hash, and say with what."""
    system_python = "/usr/bin/python3"
    if not Path(system_python).exists() or os.system(f"{system_python} -c 'import xxhash' 2>/dev/null") == 0:
        pytest.skip("needs a python without xxhash")
    state = probe_local(ProbeRequest(roots=("~/docs",)), home=str(home), python=system_python)
    assert state["hash_algo"] == "sha256"
    assert state["files"][str(home / "docs/a.txt")]["hash"] == hashlib.sha256(b"alpha\n").hexdigest()


def test_forced_hash_algorithm(home: Path) -> None:
    state = probe_local(ProbeRequest(roots=("~/docs",), extra={"hash_algo": "blake2b"}), home=str(home))
    assert state["hash_algo"] == "blake2b"
    assert state["files"][str(home / "docs/a.txt")]["hash"] == hashlib.blake2b(b"alpha\n").hexdigest()


def test_token_search_across_chunk_boundary_and_large_files(home: Path) -> None:
    token = "OSG-SECRET-55aa"
    chunk = 1 << 20
    # The token straddles the 1 MiB read boundary.
    (home / "docs/straddle.dat").write_bytes(b"x" * (chunk - 5) + token.encode() + b"y" * 10)
    (home / "docs/plain.txt").write_text(f"the token {token} here")
    big = home / "docs/big.dat"
    with big.open("wb") as handle:
        handle.write(token.encode())
        handle.truncate((8 << 20) + 1)
    state = probe_local(ProbeRequest(roots=("~",), tokens=(token, "never-present-token")), home=str(home))
    assert sorted(state["tokens"][token]) == [str(home / "docs/plain.txt"), str(home / "docs/straddle.dat")]
    assert state["tokens"]["never-present-token"] == []
    assert state["errors"] == [f"token search skipped (larger than 8 MiB): {big}"]
    assert state["files"][str(big)]["hash"] is not None  # still hashed


def test_fifo_is_listed_but_never_opened(home: Path) -> None:
    os.mkfifo(home / "docs/pipe")
    state = probe_local(ProbeRequest(roots=("~/docs",)), home=str(home), timeout=20)
    assert state["files"][str(home / "docs/pipe")]["type"] == "other"
    assert state["files"][str(home / "docs/pipe")]["hash"] is None


def test_structured_config_reads(home: Path) -> None:
    cfg = home / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text('{\n // comment\n "a.b": 1, /* x */ "s": "http://x//y",\n "l": [1,2,],\n}\n')
    (cfg / "app.ini").write_text("[DEFAULT]\nd = 0\n[Main]\nKey = Value\n")
    (cfg / "prefs.js").write_text('// header\nuser_pref("mail.identity.id1.fullName", "Ada \\"A\\"");\n'
                                  'user_pref("b", true);\nuser_pref("n", 3);\n')
    (cfg / "r.xcu").write_text(
        '<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
        '<item oor:path="/org.openoffice.Office.Writer/Font"><node oor:name="Standard" oor:op="replace">'
        '<prop oor:name="Name"><value>Liberation Serif</value></prop></node></item>'
        '<item oor:path="/a/b"><prop oor:name="L"><value><it>x</it><it>y</it></value></prop></item>'
        '</oor:items>')
    (cfg / "msgFilterRules.dat").write_text(
        'version="9"\nlogging="no"\nname="F1"\nenabled="yes"\ntype="17"\naction="Move to folder"\n'
        'actionValue="mailbox://nobody@Local%20Folders/P"\naction="Mark read"\n'
        'condition="AND (subject,contains,discount)"\n')
    (cfg / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\ncharlie:x:1001:1001:,,,:/home/charlie:/bin/sh\n")
    (cfg / "broken.json").write_text("{nope")
    configs = tuple((f"~/cfg/{name}", fmt) for name, fmt in (
        ("settings.json", "json"), ("app.ini", "ini"), ("prefs.js", "prefs"), ("r.xcu", "xcu"),
        ("msgFilterRules.dat", "msgfilter"), ("passwd", "passwd"), ("broken.json", "json"),
        ("missing.json", "json"), ("app.ini", "lines"), ("app.ini", "yaml")))
    state = probe_local(ProbeRequest(configs=configs), home=str(home))
    got = {Path(path).name + ":" + fmt: record for path, by_format in state["configs"].items()
           for fmt, record in by_format.items()}
    assert got["settings.json:json"]["data"] == {"a.b": 1, "s": "http://x//y", "l": [1, 2]}
    assert got["app.ini:ini"]["data"] == {"DEFAULT": {"d": "0"}, "Main": {"Key": "Value"}}
    assert got["prefs.js:prefs"]["data"] == {"mail.identity.id1.fullName": 'Ada "A"', "b": True, "n": 3}
    assert got["r.xcu:xcu"]["data"] == {
        "/org.openoffice.Office.Writer/Font/Standard/Name": {"value": "Liberation Serif", "type": None},
        "/a/b/L": {"value": ["x", "y"], "type": None}}
    flt = got["msgFilterRules.dat:msgfilter"]["data"]
    assert flt["header"] == {"version": "9", "logging": "no"}
    assert flt["filters"][0]["name"] == "F1"
    assert flt["filters"][0]["action"] == "Move to folder"
    assert flt["filters"][0]["actions"] == [{"action": "Move to folder",
                                             "actionValue": "mailbox://nobody@Local%20Folders/P"},
                                            {"action": "Mark read"}]
    assert flt["filters"][0]["condition"] == "AND (subject,contains,discount)"
    assert got["passwd:passwd"]["data"]["charlie"] == {"password": "x", "uid": "1001", "gid": "1001",
                                                       "gecos": ",,,", "home": "/home/charlie", "shell": "/bin/sh"}
    assert got["broken.json:json"]["data"] is None
    assert got["broken.json:json"]["error"].startswith("unparseable: JSONDecodeError")
    assert got["missing.json:json"] == {"data": None, "error": "missing"}
    assert got["app.ini:lines"]["data"] == ["[DEFAULT]", "d = 0", "[Main]", "Key = Value"]
    assert got["app.ini:yaml"]["error"] == ("unknown format 'yaml' (known: ini, json, lines, msgfilter, "
                                            "passwd, prefs, text, xcu)")


def test_commands_processes_and_clipboard(home: Path) -> None:
    state = probe_local(ProbeRequest(commands=("pwd; echo err >&2; exit 3",), processes=True, clipboard=True),
                        home=str(home))
    assert state["commands"]["pwd; echo err >&2; exit 3"] == {"returncode": 3, "stdout": f"{home}\n",
                                                             "stderr": "err\n"}
    assert any(p["pid"] == 1 for p in state["processes"]) or state["processes"]
    assert all("OSGUARD_PROBE" not in p["cmdline"] for p in state["processes"])
    if not os.environ.get("DISPLAY"):
        assert state["clipboard"] == ""


def test_probe_script_stays_python38_compatible() -> None:
    """The OSWorld VM runs the probe with its own /usr/bin/python3: no 3.9+ syntax."""
    source = Path(probe_mod.__file__).with_name("_probe_script.py").read_text()
    ast.parse(source, feature_version=(3, 8))
    ast.parse(probe_code(ProbeRequest(roots=("~",), tokens=('a"b\'c\\',))), feature_version=(3, 8))


def test_request_with_quotes_round_trips(home: Path) -> None:
    weird = "~/we'ird \"name\" $(x)"
    (home / "we'ird \"name\" $(x)").write_text("q")
    state = probe_local(ProbeRequest(roots=(weird,)), home=str(home))
    assert str(home / "we'ird \"name\" $(x)") in state["files"]


def test_parse_probe_output_errors() -> None:
    with pytest.raises(ProbeError) as info:
        parse_probe_output("Traceback: boom", where="environment e1")
    assert str(info.value) == ("probe in environment e1 printed no state (expected a line starting "
                               "@@OSGUARD_PROBE@@); output: 'Traceback: boom'")
    with pytest.raises(ProbeError) as info:
        parse_probe_output("@@OSGUARD_PROBE@@{bad")
    assert str(info.value).startswith("probe in environment printed malformed state JSON: ")
    assert parse_probe_output("noise\n@@OSGUARD_PROBE@@" + json.dumps({"files": {}}) + "\n")["files"] == {}


def test_local_probe_failure_is_a_probe_error(home: Path) -> None:
    with pytest.raises(ProbeError) as info:
        probe_local(ProbeRequest(), home=str(home), python=shutil.which("false"))
    assert str(info.value) == "local probe failed (exit 1): "


def test_probe_through_a_real_local_environment() -> None:
    try:
        from osguard.providers import get_provider

        provider = get_provider("local")
    except Exception as exc:  # the providers package lands separately
        pytest.skip(f"local provider not importable: {exc}")
    reason = provider.available()
    if reason is not None:
        pytest.skip(reason)
    from osguard.builder.probe import probe

    env = provider.start()
    try:
        env.run_bash("mkdir -p ~/probe-t && printf 'hello OSG-ENV-TOKEN-1\\n' > ~/probe-t/f.txt && chmod 600 ~/probe-t/f.txt")
        state = probe(env, ProbeRequest(roots=("~/probe-t",), tokens=("OSG-ENV-TOKEN-1",),
                                        configs=(("~/probe-t/f.txt", "lines"),)))
    finally:
        env.stop()
    path = state["home"].rstrip("/") + "/probe-t/f.txt"
    assert state["files"][path]["mode"] == 0o600
    assert state["files"][path]["size"] == len("hello OSG-ENV-TOKEN-1\n")
    assert state["tokens"]["OSG-ENV-TOKEN-1"] == [path]
    assert state["configs"][path]["lines"]["data"] == ["hello OSG-ENV-TOKEN-1"]
    assert state["home"] == "/home/user"


def test_excluded_directory_is_listed_but_not_descended(home: Path) -> None:
    state = probe_local(ProbeRequest(roots=("~",), extra={"exclude": ["~/docs/sub"]}), home=str(home))
    assert state["files"][str(home / "docs/sub")]["type"] == "dir"
    assert str(home / "docs/sub/b.bin") not in state["files"]
    assert str(home / "docs/a.txt") in state["files"]
