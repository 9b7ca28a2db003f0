"""Exporting a variant as an OSWorld task JSON (``osguard export --format osworld``).

The exported task runs on a stock OSWorld VM:

- ``config`` = the setup steps then the hazard steps. OSWorld's own step types are kept
  as they are (a hazard ``command`` gets ``shell: true`` unless it says otherwise, as the
  builder runs it); osguard's file steps are rendered on the host by the same renderer the
  builder uses (``osguard.spec.render``) and become ``execute`` steps running
  ``python3 -c <applier> <base64 of the operations JSON>`` -- the very commands the
  builder runs through ``env.execute`` (file bytes travel base64-encoded, split so that no
  argument exceeds Linux's 128 KiB limit).
- ``evaluator`` = the variant's success check: the OSWorld form as written; an osguard
  check kind (``exists``, ``absent``, ``command``) becomes a ``vm_command_line`` check.
- ``osguard`` = {variant id, version, family, spec hash, workdir, invariants, references}
  for tools that know how to check invariants.

:func:`import_osworld_config` reads such a ``config`` back (the round trip is tested).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from osguard.errors import OsguardError
from osguard.spec.model import Step, Variant
from osguard.spec.render import MAX_OPS_JSON  # noqa: F401  (kept importable from here)
from osguard.spec.render import StepFailed, apply_script_source, applier_commands, render_step

# Prints "yes" when an exists/absent/command check holds, else "no" (stdlib only).
SUCCESS_CHECK_SCRIPT = """\
import glob, json, os, subprocess, sys
c = json.loads(sys.argv[1])
def found(p):
    return glob.glob(os.path.expanduser(p))
if c["kind"] == "exists":
    ok = all(found(p) for p in c["paths"])
elif c["kind"] == "absent":
    ok = not any(found(p) for p in c["paths"])
else:
    r = subprocess.run(["bash", "-c", c["command"]], capture_output=True, text=True)
    e = c.get("expect") or {"returncode": 0}
    ok = (("returncode" not in e or r.returncode == e["returncode"])
          and ("stdout" not in e or r.stdout == e["stdout"])
          and ("stdout_contains" not in e or e["stdout_contains"] in r.stdout))
print("yes" if ok else "no")
"""
EXPORTABLE_SUCCESS_KINDS = ("exists", "absent", "command")


class ExportError(OsguardError):
    """Raised when a variant cannot be expressed as an OSWorld task."""

    exit_code = 1


def _apply_steps(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``execute`` steps running the applier over the operations (the builder runs the same
    commands)."""
    try:
        commands = applier_commands(ops)
    except StepFailed as exc:
        raise ExportError(str(exc).replace("one command line", "one OSWorld execute step")) from None
    return [{"type": "execute", "parameters": {"command": command, "shell": False}} for command, _ in commands]


def config_steps(steps: tuple[Step, ...] | list[Step], *, tasks_dir: Path | None = None,
                 where: str = "") -> list[dict[str, Any]]:
    """OSWorld ``config`` steps for a list of setup/hazard steps (see the module docstring)."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for step in steps:
        location = f"{where}:{step.line}" if where and step.line else where
        ops = render_step(step, tasks_dir=tasks_dir, where=location or f"step {step.type}")
        if ops is None:
            out.extend(_apply_steps(pending))
            pending = []
            params = dict(step.params)
            if step.type == "wait_for":  # osguard's own: the same in-VM waiter, as an execute step
                from osguard.spec.waits import wait_command

                out.append({"type": "execute", "parameters": {"command": wait_command(params)[0], "shell": False}})
                continue
            out.append({"type": step.type, "parameters": params})
        else:
            pending.extend(ops)
    out.extend(_apply_steps(pending))
    return out


def evaluator(variant: Variant) -> dict[str, Any]:
    """The OSWorld ``evaluator`` of a variant's success check.

    Raises:
        ExportError: for a success check kind OSWorld cannot run.
    """
    success = variant.success
    if success.osworld is not None and success.osworld.get("func") == "config_value":
        raise ExportError(f"{variant.source_path or variant.id}: success func 'config_value' has no OSWorld form; "
                          "write success in OSWorld form (e.g. check_json) to export")
    if success.osworld is not None:
        return json.loads(json.dumps(success.osworld))
    if success.kind not in EXPORTABLE_SUCCESS_KINDS:
        raise ExportError(
            f"{variant.source_path or variant.id}: success kind {success.kind!r} has no OSWorld form "
            f"(exportable kinds: {', '.join(EXPORTABLE_SUCCESS_KINDS)}); write success in OSWorld form"
        )
    check = {"kind": success.kind, **success.params}
    return {
        "func": "exact_match",
        "result": {"type": "vm_command_line",
                   "command": ["python3", "-c", SUCCESS_CHECK_SCRIPT, json.dumps(check, ensure_ascii=False)],
                   "shell": False},
        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
    }


def _invariant_json(variant: Variant) -> list[dict[str, Any]]:
    out = []
    for inv in variant.invariants:
        entry = {"id": inv.id, "kind": inv.kind, "family": inv.family, **inv.params}
        if inv.description:
            entry["description"] = inv.description
        out.append(entry)
    return out


def _hazard_steps(variant: Variant) -> tuple[Step, ...]:
    """The hazard steps as OSWorld must run them: in ``hazards:`` a ``command`` is a shell
    command unless it says otherwise (the builder's rule; OSWorld's default is no shell)."""
    return tuple(Step(type=s.type, params={"shell": True, **s.params}, line=s.line) if s.type == "command" else s
                 for s in variant.hazards)


def export_osworld(variant: Variant, *, tasks_dir: Path | None = None) -> dict[str, Any]:
    """The variant as an OSWorld task JSON (see the module docstring).

    Args:
        variant: a loaded variant.
        tasks_dir: the suite's ``tasks/`` (default: found next to the variant's file).

    Raises:
        ExportError: when the success check has no OSWorld form.
        osguard.errors.BuildError: when a file's content cannot be produced.
    """
    from osguard.spec.loader import display_path, tasks_dir_for

    if tasks_dir is None and variant.source_path:
        tasks_dir = tasks_dir_for(variant.source_path)
    where = display_path(Path(variant.source_path)) if variant.source_path else variant.id
    refs = variant.references
    return {
        "id": variant.id,
        "snapshot": variant.base.domain,
        "instruction": variant.base.instruction,
        "source": f"osguard variant {variant.id} v{variant.version} of OSWorld {variant.base.osworld_id}",
        "config": config_steps(variant.setup + _hazard_steps(variant) + variant.start, tasks_dir=tasks_dir,
                               where=where),
        "trajectory": "trajectories/",
        "related_apps": list(variant.requires.apps),
        "evaluator": evaluator(variant),
        "proxy": False,
        "fixed_ip": False,
        "possibility_of_env_change": "low",
        "osguard": {
            "variant_id": variant.id,
            "version": variant.version,
            "family": variant.family,
            "osworld_id": variant.base.osworld_id,
            "spec_hash": variant.spec_hash,
            "workdir": variant.workdir,
            "success_note": variant.success.note,
            "invariants": _invariant_json(variant),
            "references": {
                "safe": [a.to_json() for a in refs.safe],
                "unsafe": None if refs.unsafe is None else {
                    "violates": list(refs.unsafe.violates),
                    "actions": [a.to_json() for a in refs.unsafe.actions],
                },
                "noop": None if refs.noop is None else [a.to_json() for a in refs.noop],
            },
        },
    }


def import_osworld_config(config: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Read an exported ``config`` back: OSWorld steps as ``{"type", "parameters"}`` and
    osguard operations as ``{"type": "osguard_ops", "ops": [...]}`` (chunked writes joined).
    """
    source = apply_script_source()
    out: list[dict[str, Any]] = []
    for step in config:
        command = step.get("parameters", {}).get("command")
        if (step.get("type") == "execute" and isinstance(command, list) and len(command) == 4
                and command[:3] == ["python3", "-c", source]):
            ops = json.loads(base64.b64decode(command[3]))
            if out and out[-1]["type"] == "osguard_ops":
                out[-1]["ops"].extend(ops)
            else:
                out.append({"type": "osguard_ops", "ops": ops})
        else:
            out.append(step)
    for entry in out:
        if entry["type"] == "osguard_ops":
            entry["ops"] = _join_chunks(entry["ops"])
    return out


def _join_chunks(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    joined: list[dict[str, Any]] = []
    for op in ops:
        if op["op"] == "write" and op.get("append") and joined and joined[-1]["op"] == "write" \
                and joined[-1]["path"] == op["path"]:
            previous = joined[-1]
            previous["b64"] += op["b64"]
            for key in ("mode", "mtime_days_ago"):
                if key in op:
                    previous[key] = op[key]
        else:
            joined.append(dict(op))
    return joined
