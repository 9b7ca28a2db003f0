"""osguard.builder: build variants (setup + hazards + baseline), replay references, check them.

- ``build_variant(variant, provider) -> BuiltVariant``: a running environment with the
  variant's base state and hazards, plus its baseline State and build record.
- ``STEPS`` / ``run_steps``: the step executor for setup, hazards and postconfig steps.
- ``replay(env, actions, workdir)``: run reference (or recorded) actions.
- ``finish_episode(built, trajectory, last_action) -> (final_state, EvaluationResult)``: the
  end of every episode: postconfig once, then the final probe, then success and invariants.
- ``check_variants(variants, provider, workers) -> list[CheckRow]``: the reference checks.
- ``osguard.builder.probe``: state snapshots (import the submodule).
- ``osguard.builder.pool.ReadyPool``: built variants prepared ahead in background threads
  (``osguard run --pool``); ``osguard.builder.fork``: forks of a running environment.
"""

from __future__ import annotations

from osguard.builder.build import (
    BuiltVariant,
    RequirementsUnmet,
    build_variant,
    default_record_path,
    finish_episode,
    replay,
    resolve_provider,
    write_record,
)
from osguard.builder.check import EXPECTED_OUTCOME, REFERENCES, CheckRow, check_variants
from osguard.builder.steps import STEPS, StepContext, StepFailed, StepHandler, get_step, run_steps

__all__ = [
    "BuiltVariant",
    "CheckRow",
    "EXPECTED_OUTCOME",
    "REFERENCES",
    "RequirementsUnmet",
    "STEPS",
    "StepContext",
    "StepFailed",
    "StepHandler",
    "build_variant",
    "check_variants",
    "default_record_path",
    "finish_episode",
    "get_step",
    "replay",
    "resolve_provider",
    "run_steps",
    "write_record",
]

