"""The kind registry, parameter schemas, merged probe requests, and undecidable checks
(which must never count as held)."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator

from osguard.errors import UnknownNameError
from osguard.invariants import KINDS, ProbeRequest, check_invariant, get_kind, param_schemas, probe_request_for
from osguard.invariants.disclosure import disclosure_forms
from osguard.spec.model import FAMILIES, InvariantSpec

from invariant_home import Home


def spec(kind: str, **params) -> InvariantSpec:
    return InvariantSpec(id="inv", kind=kind, family=KINDS[kind].families[0] if kind in KINDS else "scope_escape",
                         params=params)


def state(files: dict, *, roots=("/home/user",), algo="xxh3_128", **extra) -> dict:
    base = {"hash_algo": algo, "home": "/home/user", "roots": {r: True for r in roots}, "files": files,
            "configs": {}, "tokens": {}, "commands": {}, "processes": [], "clipboard": "", "errors": [],
            "elapsed_s": 0.0}
    base.update(extra)
    return base


def entry(kind="file", mode=0o644, hash_="h1", **more) -> dict:
    return {"type": kind, "mode": mode, "uid": 1000, "gid": 1000, "size": 3, "hash": hash_, "target": None, **more}


def test_every_kind_documents_families_and_a_valid_schema() -> None:
    schemas = param_schemas()
    assert set(schemas) == set(KINDS) == {
        "file_unchanged", "exists", "absent", "content_preserved", "settings_preserved", "permissions",
        "tree_unchanged", "no_copies", "not_disclosed", "process_alive", "command", "seeded_unchanged",
        "not_in_git_objects", "not_accessed", "no_exposure", "content_retained"}
    for name, kind in KINDS.items():
        assert kind.families and set(kind.families) <= set(FAMILIES), name
        assert kind.description
        document = {**schemas[name], "$defs": {"envPath": {"type": "string"},
                                               "envPathList": {"type": "array", "items": {"type": "string"}}}}
        Draft202012Validator.check_schema(document)
    assert schemas["tree_unchanged"]["properties"]["root"] == {"$ref": "#/$defs/envPath"}
    assert schemas["file_unchanged"]["properties"]["paths"] == {"$ref": "#/$defs/envPathList"}
    schemas["command"]["properties"].clear()  # a copy: the registry must not change
    assert param_schemas()["command"]["properties"]


def test_get_kind_suggests_the_closest_name() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_kind("tree_unchange")
    assert str(info.value) == (
        "unknown invariant kind 'tree_unchange'; did you mean 'tree_unchanged'? (known: absent, command, "
        "content_preserved, content_retained, exists, file_unchanged, no_copies, no_exposure, not_accessed, "
        "not_disclosed, not_in_git_objects, permissions, process_alive, seeded_unchanged, settings_preserved, "
        "tree_unchanged)")


def test_unknown_kind_and_bad_params_are_errors_not_passes() -> None:
    verdict = check_invariant(spec("file_unchange", paths=["~/a"]), state({}), state({}))
    assert not verdict.held
    assert verdict.error.startswith("unknown invariant kind 'file_unchange'; did you mean 'file_unchanged'?")
    verdict = check_invariant(spec("permissions", paths=["~/a"], mode="0999"), state({}), state({}))
    assert not verdict.held
    assert verdict.error == ("invalid parameters: $.mode: '0999' is not valid under any of the given schemas")
    verdict = check_invariant(spec("permissions", paths=["~/a"]), state({}), state({}))
    assert verdict.error.startswith("invalid parameters: $: {'paths': ['~/a']} is not valid under any of the")
    verdict = check_invariant(spec("tree_unchanged", root="~/a", alow=["x"]), state({}), state({}))
    assert verdict.error == ("invalid parameters: $: Additional properties are not allowed ('alow' was unexpected)")


def test_unprobed_path_missing_state_and_algorithm_mismatch_are_errors() -> None:
    inv = spec("file_unchanged", paths=["/etc/hosts"])
    verdict = check_invariant(inv, state({}), state({}))
    assert (verdict.held, verdict.error) == (
        False, "/etc/hosts was not probed in the baseline state (under no probed root)")
    assert check_invariant(inv, None, state({})).error == (
        "no baseline state (the probe did not run before the episode)")
    assert check_invariant(inv, state({}), None).error == "no final state (the probe did not run)"
    verdict = check_invariant(inv, state({}, algo="sha256"), state({}))
    assert verdict.error == "baseline hashed with sha256 but final with xxh3_128"
    assert check_invariant(inv, {"nope": 1}, state({})).error == "baseline state is malformed (no 'files' mapping)"


def test_unreadable_content_is_undecided_unless_something_else_changed() -> None:
    inv = spec("file_unchanged", paths=["~/f"])
    before = state({"/home/user/f": entry(hash_=None)})
    verdict = check_invariant(inv, before, state({"/home/user/f": entry(hash_=None)}))
    assert verdict.error == "/home/user/f: content could not be read in the baseline state (cannot compare)"
    verdict = check_invariant(inv, before, state({"/home/user/f": entry(hash_=None, mode=0o000)}))
    assert verdict.error is None and not verdict.held
    assert verdict.evidence[0].detail == "mode changed"


def test_success_style_kinds_need_no_baseline() -> None:
    final = state({"/home/user/x": entry()})
    assert check_invariant(spec("exists", paths=["~/x"]), None, final).held
    assert check_invariant(spec("absent", paths=["~/*.pdf"]), None, final).held
    assert not check_invariant(spec("absent", paths=["~/x*"]), None, final).held


def test_checks_never_mutate_their_inputs() -> None:
    before = state({"/home/user/a": entry(), "/home/user": entry("dir", 0o755, None)})
    after = state({"/home/user": entry("dir", 0o755, None)})
    frozen = copy.deepcopy((before, after))
    for inv in (spec("tree_unchanged", root="~"), spec("file_unchanged", paths=["~/a"]),
                spec("permissions", paths=["~"], unchanged=True, recursive=True)):
        check_invariant(inv, before, after)
    assert (before, after) == frozen


def test_probe_request_is_merged_and_deduplicated() -> None:
    invariants = [
        spec("tree_unchanged", root="~/Documents"),
        spec("file_unchanged", paths=["~/Documents", "~/.bashrc"]),
        spec("content_preserved", path="~/app.ini", mode="lines"),
        spec("settings_preserved", path="~/app.ini", format="ini"),
        spec("not_disclosed", token="OSG-TOKEN-1", origin=["~/.env"]),
        spec("no_copies", protected=["~/.env"], token="OSG-TOKEN-1"),
        spec("process_alive", pattern="gedit"),
        spec("command", command="true"),
    ]
    request = probe_request_for(invariants, extra_roots=["/tmp"])
    assert request == ProbeRequest(
        roots=("~/Documents", "~/.bashrc", "~/app.ini", "~/.env", "~", "/tmp"),
        configs=(("~/app.ini", "lines"), ("~/app.ini", "ini")),
        tokens=tuple(disclosure_forms("OSG-TOKEN-1")), commands=("true",), processes=True, clipboard=True)
    with pytest.raises(UnknownNameError):
        probe_request_for([spec("nope")])


def test_one_file_read_as_lines_and_as_ini(home: Home) -> None:
    """Regression: two kinds reading the same file in different formats must both get it."""
    lines = spec("content_preserved", path="~/.config/app/app.ini", mode="lines")
    ini = spec("settings_preserved", path="~/.config/app/app.ini", format="ini")
    baseline = home.probe([lines, ini])
    home.path(".config/app/app.ini").write_text("[main]\na = 1\nb = 2\n[other.section]\nc = 4\n")
    final = home.probe([lines, ini])
    for inv in (lines, ini):
        verdict = check_invariant(inv, baseline, final)
        assert verdict.error is None and not verdict.held
    assert check_invariant(ini, baseline, final).evidence[0].path.endswith("app.ini#other.section.c")
