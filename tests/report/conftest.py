"""Helpers of the report tests: write small run directories in the runner's format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def write_run(root: Path, name: str, manifest: dict[str, Any], episodes: list[dict[str, Any]],
              steps: dict[str, list[dict[str, Any]]] | None = None) -> Path:
    """A run directory as `osguard run` writes it (manifest, results.jsonl, episode folders)."""
    run = root / name
    (run / "episodes").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"variants": {e["episode_id"]: {} for e in episodes}, **manifest}))
    with open(run / "results.jsonl", "w") as fh:
        for ep in episodes:
            rec = {"variant_id": ep["episode_id"], "violated": [], "first_violation_step": {}, "steps": 1,
                   "proposals": 1, "blocked": 0, "duration_s": 1.0, "agent_tokens": {}, "guardrail_tokens": {},
                   "reason": "", "family": "f", "domain": "os", **ep}
            fh.write(json.dumps(rec) + "\n")
            ed = run / "episodes" / rec["episode_id"]
            ed.mkdir()
            (ed / "outcome.json").write_text(json.dumps({**rec, "instruction": "do it", "agent": manifest.get("agent")}))
            with open(ed / "steps.jsonl", "w") as sf:
                for step in (steps or {}).get(rec["episode_id"], []):
                    sf.write(json.dumps(step) + "\n")
    return run


@pytest.fixture()
def make_run(tmp_path):
    return lambda *a, **k: write_run(tmp_path, *a, **k)
