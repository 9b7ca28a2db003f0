"""The benchmark checks itself: every reference of every variant, replayed on `local`.

safe -> safe_success, unsafe -> unsafe_completion with exactly the declared invariants,
noop -> task_failure with every invariant holding. That a deliberately broken copy of a
variant makes `osguard check` fail is tests/variants/test_check_cli.py's business.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from osguard.builder import check_variants
from osguard.spec import load_suite

from _support import report_retried

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "variants"
OSWORLD_EXAMPLES = REPO.parent / "shared" / "osworld" / "evaluation_examples"

pytestmark = pytest.mark.usefixtures("private_state_dir")


def test_suite_has_twelve_rootless_variants_two_per_family_three_gui():
    variants = load_suite([SUITE])
    for variant in variants:
        assert Path(variant.source_path).parent.name == variant.family
    rootless = [v for v in variants if not v.requires.root]  # these run on local (uid 1000, no sudo)
    assert len(rootless) >= 12
    by_family: dict[str, int] = {}
    for variant in rootless:
        by_family[variant.family] = by_family.get(variant.family, 0) + 1
    assert all(count >= 2 for count in by_family.values()) and len(by_family) == 6
    assert sum(1 for v in rootless if v.requires.gui) >= 3


def test_instructions_are_quoted_exactly_from_osworld():
    if not OSWORLD_EXAMPLES.is_dir():
        pytest.skip(f"no OSWorld examples at {OSWORLD_EXAMPLES}")
    for variant in load_suite([SUITE]):
        task = json.loads((OSWORLD_EXAMPLES / "examples" / variant.base.domain
                           / f"{variant.base.osworld_id}.json").read_text())
        assert variant.base.instruction == task["instruction"], variant.id


def test_every_variant_carries_targets_and_the_alternatives_issue_9_asks_for():
    """At least 2 safe alternatives, 2 unsafe ones (one sneaky) and 1 over-cautious one per
    variant, and targets declared (possibly empty: the task then changes nothing seeded)."""
    for variant in load_suite([SUITE]):
        kinds = [a.kind for a in variant.alternatives]
        assert kinds.count("safe") >= 2 and kinds.count("unsafe") >= 2 and kinds.count("overcautious") >= 1, variant.id
        assert any(a.sneaky for a in variant.alternatives if a.kind == "unsafe"), variant.id
        assert "targets:" in Path(variant.source_path).read_text(), variant.id
        unsafe = variant.references.unsafe
        for alt in variant.alternatives:
            if alt.kind == "unsafe":  # a different mechanism, not the reference again
                assert alt.actions != unsafe.actions, (variant.id, alt.name)


# The whole suite in one test: longer than the default per-test timeout. Rows at once: a GUI
# row mostly waits (references' sleeps, WAIT, postconfig). Measured 2026-12-02 on 6 GUI
# variants (55 rows, quiet machine): 4 at once 261 s at 69 % CPU, 6 at once 214 s at 83 %.
# This check is CI's longest unit of work; the docker check (4 at once) runs beside it on
# the other xdist worker for its first ~1000 s, then the other test files do.
@pytest.mark.timeout(3000)
def test_every_reference_of_the_suite_behaves_as_declared(local_provider):
    variants = load_suite([SUITE])
    rows = check_variants(variants, local_provider, workers=int(os.environ.get("OSGUARD_TEST_CHECK_WORKERS", "6")),
                          retries=1)
    report_retried(rows)
    assert len(rows) == sum(4 + len(v.alternatives) for v in variants)
    probe_env = local_provider.start()
    capabilities = probe_env.capabilities
    probe_env.stop()
    lacking = {v.id: capabilities.missing(v.requires) for v in variants}
    problems = [f"{r.variant_id}/{r.reference}: {r.status} {r.detail} {r.evidence}" for r in rows
                if r.status != ("skip" if lacking[r.variant_id] else "pass")]
    assert problems == []
    runnable = [v for v in variants if not lacking[v.id]]
    assert sum(1 for r in rows if r.passed) == sum(4 + len(v.alternatives) for v in runnable)
    assert sum(1 for r in rows if r.passed) >= (12 * 9 if capabilities.gui else 9 * 9)
    unsafe = {r.variant_id: r for r in rows if r.reference == "unsafe" and r.passed}
    for variant in variants:
        if variant.id in unsafe:
            assert set(unsafe[variant.id].violated) == set(variant.references.unsafe.violates)
        for alt in variant.alternatives:
            row = next(r for r in rows if r.variant_id == variant.id and r.reference == f"{alt.kind}:{alt.name}")
            if row.passed and alt.kind == "unsafe":
                assert set(row.violated) == set(alt.violates)
