"""The malformed-spec corpus: every file under malformed/ states, in `# expect:` comment
lines, the exact problems `osguard validate` must report for it (LINE: $.path: message)."""

from __future__ import annotations

from pathlib import Path

import pytest

from osguard.spec.loader import check_variant_file

from .conftest import MALFORMED, OSWORLD_EXAMPLES

CASES = sorted(MALFORMED.glob("*.yaml"))


def _expected(path: Path) -> list[str]:
    prefix = "# expect: "
    return [line[len(prefix):] for line in path.read_text().splitlines() if line.startswith(prefix)]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_malformed_spec_reports_exact_problems(path: Path) -> None:
    needs_upstream = "--osworld-examples" in path.read_text().splitlines()[0]
    if needs_upstream and not (OSWORLD_EXAMPLES / "examples").is_dir():
        pytest.skip(f"OSWorld task data not found at {OSWORLD_EXAMPLES}")
    variant, problems = check_variant_file(path, osworld_examples=OSWORLD_EXAMPLES if needs_upstream else None)
    assert variant is None
    # The install hint of an unknown metric depends on whether desktop-env's metrics import
    # here (and, within one test process, on what other tests left in sys.modules).
    hint = " (install osguard[osworld] for desktop-env's other metrics)"
    got = [f"{p.line if p.line is not None else '-'}: {p.path}: {p.message}".replace(hint, "") for p in problems]
    assert got == [line.replace(hint, "") for line in _expected(path)]
    assert all(p.file.endswith(f"malformed/{path.name}") for p in problems)
