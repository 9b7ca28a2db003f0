"""Verifier lookup by spec: names, arguments, suggestions, plug-ins."""

from __future__ import annotations

import sys
import textwrap

import pytest

from osguard.actions import Action
from osguard.errors import UnknownNameError
from osguard.scout import ScoutError, Verifier, VerifierInput, get_verifier, verifier_names


def _input(code: str, kind: str = "shell") -> VerifierInput:
    return VerifierInput(instruction="rename the folder", action=Action(kind, code))  # type: ignore[arg-type]


def test_allow_all_approves_everything():
    verifier = get_verifier("allow-all")
    assert isinstance(verifier, Verifier)
    assert verifier.name == "allow-all"
    verdict = verifier.judge(_input("rm -rf ~"))
    assert verdict.label == "allowed"
    assert not verdict.blocks


def test_unknown_name_suggests_nearest():
    with pytest.raises(UnknownNameError) as info:
        get_verifier("alow-all")
    assert str(info.value) == (
        "unknown verifier 'alow-all'; did you mean 'allow-all'? (known: allow-all, "
        "deaction[:MODEL], python:pkg.module:factory, rules, scout:llm[:MODEL], scout:lookahead, "
            "scout:lookahead+llm[:MODEL], scripted:FILE)")


def test_argument_errors():
    with pytest.raises(ScoutError) as info:
        get_verifier("scripted")
    assert str(info.value) == "verifier 'scripted' needs an argument: scripted:FILE"
    with pytest.raises(ScoutError) as info:
        get_verifier("allow-all:x")
    assert str(info.value) == "verifier 'allow-all' takes no argument (got 'allow-all:x')"


def test_names_listed():
    assert "scripted:FILE" in verifier_names()
    assert "scout:llm[:MODEL]" in verifier_names()


def test_python_plugin(tmp_path, monkeypatch):
    (tmp_path / "my_guard.py").write_text(textwrap.dedent("""
        from osguard.scout import Verdict

        class Guard:
            def __init__(self, strict=False):
                self.name = "my-guard"
                self.strict = strict
            def judge(self, item):
                return Verdict("unsafe" if self.strict else "allowed", "plugin")

        def make(**options):
            return Guard(**options)

        def broken(**options):
            return 42
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        verifier = get_verifier("python:my_guard:make", strict=True)
        assert verifier.name == "my-guard"
        assert verifier.judge(_input("ls")).label == "unsafe"
        with pytest.raises(ScoutError) as info:
            get_verifier("python:my_guard:broken")
        assert str(info.value) == ("verifier 'python:my_guard:broken': the factory returned int, "
                                   "which lacks name/judge (the Verifier protocol)")
        with pytest.raises(ScoutError) as info:
            get_verifier("python:my_guard:nope")
        assert str(info.value) == "verifier 'python:my_guard:nope': module 'my_guard' has no callable 'nope'"
        with pytest.raises(ScoutError) as info:
            get_verifier("python:no_such_mod_xyz:make")
        assert str(info.value) == ("verifier 'python:no_such_mod_xyz:make': cannot import module "
                                   "'no_such_mod_xyz': No module named 'no_such_mod_xyz'")
        with pytest.raises(ScoutError) as info:
            get_verifier("python:justmodule")
        assert str(info.value).startswith("verifier 'python:justmodule': expected python:package.module:factory "
                                          "or python:NAME of an installed 'osguard.verifiers' entry point")
    finally:
        sys.modules.pop("my_guard", None)


def test_import_stays_cheap():
    """`import osguard.scout` (done by the runner) must not pull in openai, numpy, datasets
    or the annotation server."""
    import subprocess

    code = ("import sys, osguard.scout; heavy = [m for m in ('openai', 'numpy', 'datasets', 'http.server', "
            "'osguard.scout.annotate') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
