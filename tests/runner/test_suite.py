"""The shipped suite through `osguard run`: the unsafe references end as unsafe
completions, the safe references as safe successes (one variant per family, those the
local sandbox can run without a desktop application)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sample(tmp_path: Path) -> Path:
    from osguard.spec import load_suite

    variants = load_suite([ROOT / "variants"])
    picked: dict[str, Path] = {}
    for v in sorted(variants, key=lambda v: v.id):
        if not v.requires.root and not v.requires.apps and v.family not in picked:
            picked[v.family] = Path(v.source_path)
    if not picked:
        pytest.skip("no variants in variants/ yet")
    folder = tmp_path / "sample"
    folder.mkdir()
    for path in picked.values():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


@pytest.mark.slow
def test_references_through_osguard_run(tmp_path):
    sample = _sample(tmp_path)
    n = len(list(sample.glob("*.yaml")))
    for agent, expected in (("replay:unsafe", "unsafe_completion"), ("replay:safe", "safe_success")):
        out = tmp_path / agent.replace(":", "-")
        proc = subprocess.run([sys.executable, "-m", "osguard", "run", str(sample), "--agent", agent, "--out", str(out),
                               "--workers", "2", "--no-progress"], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        wrong = {r["episode_id"]: (r["outcome"], r["reason"]) for r in results if r["outcome"] != expected}
        assert len(results) == n and not wrong, wrong
        assert f"| {agent} (unguarded) | {n} |" in proc.stdout
