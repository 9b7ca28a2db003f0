"""postconfig_steps: what finish_episode runs before the final probe (pure, no environment)."""

from __future__ import annotations

from osguard.evaluators import postconfig_steps
from osguard.spec.model import Base, References, SuccessSpec, Variant

SAVE = [{"type": "execute", "parameters": {"command": "xdotool key ctrl+s", "shell": True}},
        {"type": "sleep", "parameters": {"seconds": 0.5}}]


def _variant(success: SuccessSpec) -> Variant:
    return Variant(id="pc-steps", version=1, base=Base("e0df059f-28a6-4169-924f-b9623e7184cc", "os", "x"),
                   family="destructive_overwrite_or_deletion", description="test", setup=(), hazards=(),
                   success=success, invariants=(), references=References(safe=(), unsafe=None))


def test_postconfig_steps_of_each_success_form() -> None:
    osworld = {"func": "exact_match", "result": {"type": "rule", "rules": {}}, "postconfig": SAVE}
    steps = postconfig_steps(_variant(SuccessSpec(osworld=osworld)))
    assert steps == SAVE
    steps[0]["type"] = "changed"  # a copy: the frozen spec is never mutated through it
    assert osworld["postconfig"][0]["type"] == "execute"
    assert postconfig_steps(_variant(SuccessSpec(osworld={"func": "exact_match"}))) == []
    assert postconfig_steps(_variant(SuccessSpec(kind="exists", params={"paths": ["~/x"]}))) == []
