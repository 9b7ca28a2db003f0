"""Every variant, with all its references and alternatives, on the docker provider (CI runs
these), and --commit of a built variant.

Skipped, with the provider's own reason, where no Docker engine or desktop image is available.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from osguard.builder import build_variant, check_variants
from osguard.spec import load_suite

from _support import available_provider, report_retried

pytestmark = [pytest.mark.docker, pytest.mark.gui, pytest.mark.usefixtures("private_state_dir")]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docker_provider() -> object:
    return available_provider("docker")


VARIANT_FILES = sorted((REPO / "variants").glob("*/*.yaml"))
# Rows at once, across variants. A GUI row mostly waits (its references' own sleeps, WAIT,
# postconfig: ~4 s of a 7.5 s LibreOffice row, ~3.5 CPU s), so rows of different variants
# overlap their waits; 4 here and 6 in the local check, which runs at the same time on the
# other worker; docs/execution.md, "What a check costs".
CHECK_WORKERS = int(os.environ.get("OSGUARD_TEST_DOCKER_CHECK_WORKERS", "4"))
# Which rows run on docker here. CI's 45 minutes on 2 cores hold every row of every
# variant on local (tests/variants/test_check.py) but not also on docker, where a row costs
# ~2 CPU s more (containers, engine archives, the evaluation commit). So CI replays on
# docker: every row of the root-only variants (local cannot run them) and the safe and
# unsafe references of every other variant (the image's start state and application, both
# sides of the hazard, the success check and the invariants through the engine);
# OSGUARD_TEST_DOCKER_ALL=1 (scripts/prove-suite.sh) replays every row of every variant.
# Every row of the 17 office variants too (236 docker rows instead of 117) did not fit:
# measured 2026-12-02, that check ran past its 3000 s timeout on a loaded machine where the
# local check took 2238 s. This check and the local one run at once, one on each xdist
# worker (tests/conftest.py). docs/execution.md, "Where CI proves the suite".
ALL_ROWS = os.environ.get("OSGUARD_TEST_DOCKER_ALL", "") == "1"
SAFE_AND_UNSAFE = ("safe", "unsafe")
EVERY_ROW = ("safe", "unsafe", "noop", "standard", "alternatives")


# At 60 variants (2026-12-02, fresh clone, quiet machine) CI took 2860 s with the safe and
# unsafe references of every variant on docker: the local check 2418 s, the docker check
# 1590 s, over CI's 45 minutes. The unsafe references of the application variants are the
# costly docker rows (an application start and a GUI replay each), so CI keeps them on
# local and replays on docker the safe reference of every variant (the image's start state,
# application and success check) and the unsafe reference of the shell variants.
SAFE_ONLY = ("safe",)
# 2026-12-03, fresh clone, 60 variants: CI took 2650 s with the safe reference of all 47
# application variants on docker (the docker check 1481 s, the local one 2048 s; CI's last
# landings took 2467-2677 s against its 2700 s). So CI replays on docker the safe reference
# of one application variant per OSWorld domain (the first by id: each application of the
# image, started, driven and checked through the engine); every application variant is
# proven row by row on local, and on docker with OSGUARD_TEST_DOCKER_GUI=all or
# OSGUARD_TEST_DOCKER_ALL=1 (scripts/prove-suite.sh).
# 2026-12-04: CI took 1899 s with one per domain, after the evaluation through the engine
# got cheaper (one commit and one evaluation container per probe) and the references wait
# through the harness instead of fixed sleeps; the safe reference of every application
# variant is back on docker by default (OSGUARD_TEST_DOCKER_GUI=one: one per domain).
# Later the same day (CI 1602 s with the safe references; the docker check 668 s beside the
# local one's 1292 s) the unsafe reference of every application variant joined them: both
# sides of every hazard through the engine. OSGUARD_TEST_DOCKER_GUI=safe: the safe ones only.
GUI_ROWS = os.environ.get("OSGUARD_TEST_DOCKER_GUI", "all")
GUI_ALL = GUI_ROWS != "one"


@functools.cache
def _one_per_domain() -> frozenset[str]:
    chosen: dict[str, str] = {}
    for variant in sorted(load_suite(VARIANT_FILES), key=lambda v: v.id):
        if variant.requires.gui and not variant.requires.root:
            chosen.setdefault(variant.base.domain, variant.id)
    return frozenset(chosen.values())


def _rows_for(variant) -> tuple[str, ...]:
    if ALL_ROWS or variant.requires.root:
        return EVERY_ROW
    if not variant.requires.gui:
        return SAFE_AND_UNSAFE
    if GUI_ROWS == "all":
        return SAFE_AND_UNSAFE
    return SAFE_ONLY if GUI_ALL or variant.id in _one_per_domain() else ()


def _expected_rows(variant) -> list[str]:
    rows = [r for r in ("safe", "unsafe", "noop", "standard") if r in _rows_for(variant)]
    if "alternatives" in _rows_for(variant):
        rows += [f"{a.kind}:{a.name}" for a in variant.alternatives]
    return rows


@pytest.fixture(scope="module")
def docker_rows(request, docker_provider) -> dict[str, list]:
    """One check of every selected variant at once (rows of different variants share the
    workers, so no variant waits for the slowest row of another), grouped by variant file."""
    selected = [item.callspec.params["variant_file"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_every_variant_with_all_its_alternatives_passes_on_docker"]
    variants = load_suite(selected)
    ids = {v.id: str(f) for v, f in zip(variants, selected)}
    variants = [v for v in variants if _rows_for(v)]
    rows = check_variants(variants, docker_provider, workers=CHECK_WORKERS, references=_rows_for, retries=1)
    report_retried(rows)
    by_file: dict[str, list] = {str(f): [] for f in selected}
    for row in rows:
        by_file[ids[row.variant_id]].append(row)
    return by_file


# The first test pays for the whole docker check (the module fixture): longer than the
# default per-test timeout.
@pytest.mark.timeout(3000)
@pytest.mark.parametrize("variant_file", VARIANT_FILES, ids=[f.stem for f in VARIANT_FILES])
def test_every_variant_with_all_its_alternatives_passes_on_docker(docker_rows, variant_file):
    """The rows CI replays on docker (``_rows_for``: every row of a root-only variant, safe
    and unsafe of every other variant;
    every row of every variant with OSGUARD_TEST_DOCKER_ALL=1) behave as declared; one test per
    variant, so a failure names its variant. A variant the image cannot run (an application the built flavour lacks) is
    skipped with the provider's reason, never passed."""
    (variant,) = load_suite([variant_file])
    if not _rows_for(variant):
        pytest.skip("OSGUARD_TEST_DOCKER_GUI=one replays one application variant per domain on docker; this one "
                    "is proven row by row on local (test_check.py), and on docker without that setting")
    rows = docker_rows[str(variant_file)]
    assert [r.reference for r in rows] == _expected_rows(variant)
    skipped = {r.detail for r in rows if r.status == "skip"}
    if skipped and len(skipped) == 1 and all(r.status == "skip" for r in rows):
        pytest.skip(skipped.pop())
    problems = [f"{r.reference}: {r.status} {r.detail} {r.evidence}" for r in rows if not r.passed]
    assert problems == []
    for alt in variant.alternatives:
        row = next((r for r in rows if r.reference == f"{alt.kind}:{alt.name}"), None)
        if row is not None and alt.kind == "unsafe":
            assert set(row.violated) == set(alt.violates), alt.name
    unsafe = next((r for r in rows if r.reference == "unsafe"), None)
    if "unsafe" in _rows_for(variant):
        assert unsafe is not None and set(unsafe.violated) == set(variant.references.unsafe.violates)


def test_a_row_from_a_template_is_in_the_state_of_a_fresh_build_on_docker(docker_provider):
    """On docker a template's files are put into a new container's home volume before its
    session starts: the row must never differ from a fresh build, nor see another row."""
    from osguard.builder.template import make_template

    (variant,) = load_suite([REPO / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"])
    template = make_template(variant, docker_provider)
    assert template is not None and "/home/user/Documents/archive/todo_list_Jan_1/notes.txt" in template.paths
    listing = "find ~/Desktop ~/Documents -printf '%p %y %m %u %s %T@\\n' | sort"
    with build_variant(variant, docker_provider) as fresh, \
            build_variant(variant, docker_provider, template=template) as one:
        assert one.record["template"]["entries"] == len(template.paths)
        keep = {k: v for k, v in fresh.baseline.items() if k not in ("probe_seconds", "elapsed_s", "stat_cache", "accesses")}
        assert {k: v for k, v in one.baseline.items() if k in keep} == keep
        assert one.env.run_bash("rm -rf ~/Desktop ~/Documents").ok
        with build_variant(variant, docker_provider, template=template) as two:
            assert two.env.run_bash("cat ~/Documents/archive/todo_list_Jan_1/notes.txt").output == (
                "archived 2023, do not touch\n")
            times = two.env.run_bash(listing).output
        assert [line.rsplit(" ", 1)[0] for line in times.splitlines()] == [
            line.rsplit(" ", 1)[0] for line in fresh.env.run_bash(listing).output.splitlines()]


def test_commit_saves_the_built_variant_as_an_image(docker_provider):
    import docker

    (variant,) = load_suite([REPO / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"])
    tag = "osguard-test/os-rename-todo-keep-archive:commit-test"
    client = docker.from_env()
    try:
        with build_variant(variant, docker_provider, commit=tag) as built:
            assert built.record["committed_image"] == tag
            assert built.record["committed_image_id"].startswith("sha256:")
        env = docker_provider.start(image=tag)
        try:
            # The episode starts from the built state: base task and hazard are already there.
            assert env.run_bash("cat ~/Documents/archive/todo_list_Jan_1/notes.txt").output == "archived 2023, do not touch\n"
            assert env.run_bash("ls ~/Desktop/todo_list_Jan_1").output.split() == ["errands.txt", "groceries.txt"]
        finally:
            env.stop()
    finally:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass
