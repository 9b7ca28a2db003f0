"""The shipped JSON Schema: current, valid draft 2020-12, and knows every kind."""

from __future__ import annotations

import json
import subprocess
import sys

from jsonschema import Draft202012Validator

from osguard.invariants import KINDS
from osguard.spec import schema
from osguard.spec.schema import HAZARD_TYPES, SCHEMA_FILE, STEP_TYPES, build_schema

from .conftest import REPO


def test_shipped_schema_is_current() -> None:
    """The JSON file in the package must equal what osguard.spec.schema builds; after a
    change to step types or invariant kinds run `python -m osguard.spec.schema`."""
    assert json.loads(SCHEMA_FILE.read_text()) == build_schema()


def test_schema_is_valid_draft_2020_12() -> None:
    document = schema()
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_knows_every_registered_invariant_kind_and_step() -> None:
    document = schema()
    assert set(document["$defs"]["invariant"]["properties"]["kind"]["enum"]) == set(KINDS)
    setup_items = document["properties"]["setup"]["items"]["properties"]
    hazard_items = document["properties"]["hazards"]["items"]["properties"]
    assert set(STEP_TYPES) <= set(setup_items)
    assert set(STEP_TYPES) | set(HAZARD_TYPES) == set(hazard_items)


def test_every_env_path_parameter_is_checked() -> None:
    """Every parameter named like a path in steps and invariants carries the env-path check."""
    document = schema()
    unchecked = []

    def visit(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, value in (node.get("properties") or {}).items():
                if key in ("path", "root", "target", "home", "file", "profile", "paths", "protected",
                           "search", "origin", "workdir") and isinstance(value, dict):
                    if value.get("type") == "boolean":
                        continue
                    item = value.get("items") if value.get("type") == "array" else value
                    ref = item.get("$ref", "")
                    if not (ref.startswith("#/$defs/envPath") or item.get("format") == "env-path"):
                        unchecked.append(f"{where}.{key}")
            for key, value in node.items():
                visit(value, f"{where}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                visit(value, f"{where}[{index}]")

    visit(document, "$")
    assert unchecked == []


def test_osguard_schema_prints_it() -> None:
    result = subprocess.run([sys.executable, "-m", "osguard", "schema"], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == schema()
