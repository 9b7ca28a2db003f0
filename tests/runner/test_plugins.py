"""One plug-in loader for agents and verifiers (``osguard._plugins``): the same
``python:package.module:factory`` syntax, the same entry-point lookup and the same error
for the same mistake, whichever kind of plug-in it is. The entry points come from a real
installed-distribution folder (``*.dist-info``) on ``sys.path``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from osguard.errors import OsguardError
from osguard.runner import get_agent
from osguard.scout import get_verifier

PLUGIN = '''
from osguard.actions import Action
from osguard.runner.agent_types import Proposal
from osguard.scout.types import Verdict


class Echo:
    name = "echo"

    def reset(self, instruction, variant):
        pass

    def propose(self, observation, feedback=None):
        return Proposal(Action("shell", "echo from an entry point"))


class Guard:
    name = "ep-guard"

    def judge(self, item):
        return Verdict("unsafe", "entry point")


def make_agent(variant, **options):
    return Echo()


def make_guard(**options):
    return Guard()
'''


@pytest.fixture()
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package ``ep_plugins`` and its distribution's entry points, importable."""
    (tmp_path / "ep_plugins.py").write_text(PLUGIN)
    dist = tmp_path / "ep_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [osguard.agents]
        echo = ep_plugins:make_agent
        broken = ep_plugins:no_such_factory

        [osguard.verifiers]
        ep-guard = ep_plugins:make_guard
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("ep_plugins", None)


def test_entry_points_for_both_kinds(installed: Path, variant) -> None:
    agent = get_agent("python:echo", variant)
    assert agent.propose(None).action.code == "echo from an entry point"
    assert get_verifier("python:ep-guard").judge(None).label == "unsafe"


@pytest.mark.parametrize(("ref", "message"), [
    ("no_such_mod_xyz:make", "cannot import module 'no_such_mod_xyz': No module named 'no_such_mod_xyz'"),
    ("ep_plugins:nope", "module 'ep_plugins' has no callable 'nope'"),
    (":make", "expected python:package.module:factory or python:NAME of an installed '{group}' entry point"),
])
def test_same_mistake_same_error(installed: Path, variant, ref: str, message: str) -> None:
    for kind, group, build in (("agent", "osguard.agents", lambda spec: get_agent(spec, variant)),
                               ("verifier", "osguard.verifiers", get_verifier)):
        with pytest.raises(OsguardError) as err:
            build(f"python:{ref}")
        assert str(err.value) == f"{kind} 'python:{ref}': {message.format(group=group)}"


def test_unknown_or_broken_entry_point(installed: Path, variant) -> None:
    with pytest.raises(OsguardError) as err:
        get_agent("python:nothing-here", variant)
    assert str(err.value) == ("agent 'python:nothing-here': expected python:package.module:factory or "
                              "python:NAME of an installed 'osguard.agents' entry point (installed: broken, echo)")
    with pytest.raises(OsguardError) as err:
        get_agent("python:broken", variant)
    assert str(err.value).startswith("agent 'python:broken': cannot load entry point 'broken' "
                                     "(ep_plugins:no_such_factory): ")
