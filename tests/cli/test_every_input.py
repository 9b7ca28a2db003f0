"""Every command and subcommand, given no arguments, a bad value for each typed option and
bad input files (missing, empty, a folder instead of a file and back, garbage, non-UTF-8,
unreadable), ends with a one-line ``error: ...`` and exit code 2 (usage) or 1 (user error).

What must never happen again (issue #10, finding 12): a Python traceback for any input. With
typer 0.29, which vendors click, every missing argument printed one because the CLI caught
``click.ClickException`` only. The commands are enumerated from the typer app, so a new
command is covered without editing this file; a new command with no required argument
must be listed in ``BARE`` (safe to run bare) or ``ACTS`` (not run bare, with the reason).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import typer.main

from osguard.cli.app import app, main

ROOT = typer.main.get_command(app)

# Commands with no required argument: run bare in the corpus (a private state folder, an
# empty working directory) ...
BARE = {"env list", "env down", "image list", "schema", "tasks list", "score", "validate"}
# ... or not, because running them bare acts on the machine.
ACTS = {
    "check": "checks the whole suite: starts an environment per variant",
    "env up": "starts an environment",
    "image build": "builds a Docker image",
    "image prune": "removes Docker images",
}

# Commands whose output is a report of every problem found (stdout, exit 1).
REPORTS = {"validate"}

# Parameters naming files or folders the command reads, beyond Path-typed arguments (which
# are found from their annotations).
INPUT_NAMES = {"variants", "variant", "vs", "standard", "from_predictions", "osworld_examples"}
SUFFIX = {"paths": ".yaml", "variants": ".yaml", "variant": ".yaml", "from_predictions": ".jsonl",
          "osworld_examples": ".json"}

# Values for required parameters while another one is under test.
FILL: dict[tuple[str, str], list[str]] = {
    ("run", "agent"): ["--agent", "replay:safe"],
    ("new", "from_task"): ["--from", "0000"],
    ("new", "variant_id"): ["some_variant"],
    ("env exec", "words"): ["--", "true"],
    ("run", "paths"): [str(Path(__file__).resolve().parents[2] / "variants" / "configuration_clobbering"
                           / "vim-line-numbers-keep-vimrc.yaml")],
}
FILL[("build", "variants")] = FILL[("run", "paths")]

# Options whose value must be one of a few words.
BAD_WORDS = [
    ("run", "--observation"), ("run", "--action-space"), ("run", "--provider"), ("export", "--format"),
    ("image build", "--flavor"), ("env up", "--provider"), ("check", "--provider"), ("build", "--provider"),
    ("items build", "--interrupt-from"),
]


def _leaves(cmd: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in sorted(subs.items()):
            yield from _leaves(sub, (*path, name))
    else:
        yield " ".join(path), cmd


COMMANDS = dict(_leaves())


def _annotation(param: Any) -> Any:
    return param.type_descriptor.annotation


def _base(annotation: Any) -> Any:
    """``Optional[list[Path]]`` -> ``Path``."""
    while typing.get_origin(annotation) is not None:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def _is_input(param: Any) -> bool:
    if param.name in INPUT_NAMES:
        return True
    return param.param_type_name == "argument" and _base(_annotation(param)) is Path


def _args_for(command: str, param: Any, value: list[str]) -> list[str]:
    return [*param.opts[:1], *value] if param.param_type_name == "option" else value


def _filled(command: str, tmp: Path, except_for: str | None = None) -> list[str]:
    """Values for every required parameter of ``command`` but ``except_for``."""
    out: list[str] = []
    for param in COMMANDS[command].params:
        if not param.required or param.name == except_for:
            continue
        value = FILL.get((command, param.name))
        if value is None:
            value = [str(tmp / f"fill-{param.name}")]
            if param.param_type_name == "option":
                value = [param.opts[0], *value]
        out += value
    return out


@contextmanager
def _as_nobody(enabled: bool) -> Iterator[None]:
    """Root reads any file: drop the effective uid so mode 000 means unreadable."""
    if not enabled or os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def _call(argv: list[str], capfd: pytest.CaptureFixture[str], as_nobody: bool = False) -> tuple[int, str, str]:
    with _as_nobody(as_nobody):
        try:
            code = main(argv)
        except SystemExit as exc:  # a command may exit itself; still no traceback
            code = exc.code if isinstance(exc.code, int) else 1
    out, err = capfd.readouterr()
    return code, out, err


def _assert_clean(argv: list[str], code: int, out: str, err: str, codes: tuple[int, ...] = (1, 2),
                  sandbox: Path | None = None) -> None:
    """Exit ``codes``, no traceback, and ``error: `` with one line per problem: one line,
    or (a loader listing every problem at once) each line naming the file it is about."""
    shown = f"osguard {' '.join(argv)} -> {code}\nstdout: {out!r}\nstderr: {err!r}"
    assert "Traceback" not in out + err, shown
    assert code in codes, shown
    command = " ".join(argv[:2]) if " ".join(argv[:2]) in COMMANDS else argv[0]
    if command in REPORTS and err == "":  # problems on stdout, one per line, then a summary
        assert err == "" and out.endswith("\n"), shown
        lines = out.splitlines()
        assert lines[-1] and all(line.startswith(str(sandbox)) for line in lines[:-2] if line), shown
        return
    assert err.startswith("error: ") and err.endswith("\n"), shown
    lines = err.splitlines()
    assert len(lines) == 1 or (sandbox is not None and all(
        line.removeprefix("error: ").startswith(str(sandbox)) for line in lines)), shown


@pytest.fixture()
def sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory and a private state folder, in a folder any user may
    enter (pytest's own temp folders are private to root, which would make every path
    unreadable to the unprivileged user of the ``unreadable`` cases)."""
    folder = Path(tempfile.mkdtemp(prefix="osguard-inputs-"))
    folder.chmod(0o777)
    work = folder / "cwd"
    work.mkdir()
    work.chmod(0o777)
    monkeypatch.chdir(work)
    monkeypatch.setenv("OSGUARD_STATE_DIR", str(folder / "state"))
    yield folder
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o700)
    shutil.rmtree(folder)


def test_every_command_without_a_required_argument_is_classified() -> None:
    unclassified = sorted(name for name, cmd in COMMANDS.items()
                          if not any(p.required for p in cmd.params) and name not in BARE | set(ACTS))
    assert unclassified == []
    assert sorted((BARE | set(ACTS)) - set(COMMANDS)) == []


# -- no arguments ----------------------------------------------------------------------------

NAMED = {  # the commands the finding named, with their exact message
    "run": "error: Missing argument 'paths'. (see 'osguard run --help')\n",
    "build": "error: Missing argument 'variants'. (see 'osguard build --help')\n",
    "report": "error: Missing argument 'run_dir'. (see 'osguard report --help')\n",
    "new": "error: Missing argument 'variant_id'. (see 'osguard new --help')\n",
    "export": "error: Missing argument 'variant'. (see 'osguard export --help')\n",
    "view": "error: Missing argument 'run_dir'. (see 'osguard view --help')\n",
    "items build": "error: Missing option '--out'. (see 'osguard items build --help')\n",
    "annotate": "error: Missing argument 'items_dir'. (see 'osguard annotate --help')\n",
    "env exec": "error: Missing argument '[ID] -- CMD...'. (see 'osguard env exec --help')\n",
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_arguments(command: str, sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    if command in ACTS:
        pytest.skip(f"not run bare: {ACTS[command]}")
    argv = command.split()
    code, out, err = _call(argv, capfd)
    if command in BARE:
        assert "Traceback" not in out + err and code in (0, 1, 2), (code, out, err)
        if code:
            _assert_clean(argv, code, out, err, sandbox=sandbox)
        return
    _assert_clean(argv, code, out, err, codes=(2,))
    assert out == ""
    if command in NAMED:
        assert err == NAMED[command]


def test_an_option_missing_its_value(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, err = _call(["score", "--from-predictions"], capfd)
    assert (code, out, err) == (2, "", "error: Option '--from-predictions' requires an argument.\n")


def test_the_installed_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    """Through a real process: what a user sees, exit code included."""
    result = subprocess.run([sys.executable, "-m", "osguard", "run"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", NAMED["run"])


# -- bad values for typed options -------------------------------------------------------------

def _typed_options() -> list[tuple[str, str, str]]:
    out = []
    for name, cmd in sorted(COMMANDS.items()):
        for param in cmd.params:
            if param.param_type_name != "option" or getattr(param, "is_flag", False):
                continue
            base = _base(_annotation(param))
            if base in (int, float):
                out.append((name, param.opts[0], base.__name__))
    return out


@pytest.mark.parametrize(("command", "option", "kind"), _typed_options())
def test_bad_number(command: str, option: str, kind: str, sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    argv = [*command.split(), option, "not-a-number", *_filled(command, sandbox)]
    code, out, err = _call(argv, capfd)
    _assert_clean(argv, code, out, err, codes=(2,))
    assert err.startswith(f"error: Invalid value for '{option}")
    assert err.endswith(f" (see 'osguard {command} --help')\n")


@pytest.mark.parametrize(("command", "option"), BAD_WORDS)
def test_bad_word(command: str, option: str, sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    argv = [*command.split(), option, "no-such-word", *_filled(command, sandbox)]
    code, out, err = _call(argv, capfd)
    _assert_clean(argv, code, out, err, sandbox=sandbox)
    if command != "items build":  # it first needs a run directory to read
        assert "no-such-word" in err


def test_unknown_option(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, out, err = _call(["report", "--bogus"], capfd)
    assert (code, err) == (2, "error: No such option: --bogus (see 'osguard report --help')\n")


# -- bad input files and folders ---------------------------------------------------------------

GARBAGE = "{[ this is: not: valid\n\tjson, yaml ]] or anything\n"
NON_UTF8 = b"\xff\xfe\xfa not utf-8 \x80\x81\n"
KINDS = ["missing", "empty-file", "empty-dir", "garbage", "non-utf8", "unreadable", "garbage-dir", "non-utf8-dir"]
# names the commands look for inside a folder
INSIDE = ["manifest.json", "results.jsonl", "items.jsonl", "variant.yaml", "suite.yaml", "meta.json"]


def _make(kind: str, where: Path, suffix: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"input{suffix}"
    if kind == "missing":
        return path
    if kind == "empty-file":
        path.write_text("")
    elif kind == "empty-dir":
        path.mkdir()
    elif kind == "garbage":
        path.write_text(GARBAGE)
    elif kind == "non-utf8":
        path.write_bytes(NON_UTF8)
    elif kind == "unreadable":
        path.write_text("id: x\n")
        path.chmod(0)
        where.chmod(0o777)
    else:
        path.mkdir()
        (path / "episodes" / "x").mkdir(parents=True)
        for name in INSIDE:
            if kind == "garbage-dir":
                (path / name).write_text(GARBAGE)
            else:
                (path / name).write_bytes(NON_UTF8)
    return path


def _inputs() -> list[tuple[str, str]]:
    return [(name, param.name) for name, cmd in sorted(COMMANDS.items()) for param in cmd.params
            if _is_input(param) and name not in ACTS]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("command", "param_name"), _inputs())
def test_bad_input(command: str, param_name: str, kind: str, sandbox: Path,
                   capfd: pytest.CaptureFixture[str]) -> None:
    param = next(p for p in COMMANDS[command].params if p.name == param_name)
    where = sandbox / "in"
    path = _make(kind, where, SUFFIX.get(param_name, ""))
    argv = [*command.split(), *_filled(command, sandbox, except_for=param_name),
            *_args_for(command, param, [str(path)])]
    code, out, err = _call(argv, capfd, as_nobody=kind == "unreadable")
    _assert_clean(argv, code, out, err, sandbox=sandbox)


# -- the cases the finding named -----------------------------------------------------------------

VARIANT = FILL[("run", "paths")][0]


def test_run_out_names_a_file(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``run --out FILE`` printed a NotADirectoryError traceback."""
    target = sandbox / "a-file"
    target.write_text("x")
    code, out, err = _call(["run", VARIANT, "--agent", "replay:safe", "--out", str(target)], capfd)
    assert (code, out, err) == (2, "", f"error: {target}: exists and is not a directory; choose a new --out\n")


def test_resume_without_a_manifest_is_refused(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``run --resume`` on a folder without manifest.json silently started a fresh run."""
    folder = sandbox / "not-a-run"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    for target in (folder, sandbox / "no-such-run"):
        code, out, err = _call(["run", VARIANT, "--agent", "replay:safe", "--out", str(target), "--resume"], capfd)
        assert (code, out, err) == (2, "", f"error: {target}: nothing to resume (no manifest.json); "
                                           "run without --resume to start a new run\n")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert not (sandbox / "no-such-run").exists()


def test_score_on_a_non_utf8_items_file(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``score`` on a non-UTF-8 items.jsonl printed a UnicodeDecodeError traceback."""
    items = sandbox / "items"
    items.mkdir()
    (items / "items.jsonl").write_bytes(b'{"id": "a"}\n' + NON_UTF8)
    code, out, err = _call(["score", str(items), "--verifier", "allow-all"], capfd)
    assert (code, out, err) == (2, "", f"error: {items / 'items.jsonl'}:2: file is not UTF-8 text (byte 0xff)\n")


def test_an_unreadable_predictions_file(sandbox: Path, capfd: pytest.CaptureFixture[str]) -> None:
    predictions = sandbox / "preds.jsonl"
    predictions.mkdir()
    code, out, err = _call(["score", "--from-predictions", str(predictions)], capfd)
    assert (code, out, err) == (2, "", f"error: {predictions}: is a directory, expected a file\n")
