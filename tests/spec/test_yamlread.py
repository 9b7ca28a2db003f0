"""The strict YAML reader: hostile input never raises, and every problem has a line."""

from __future__ import annotations

import os
import random

import pytest

from osguard.spec.loader import check_variant_file
from osguard.spec.yamlread import MAX_BYTES, read_yaml


def _messages(raw: bytes) -> list[tuple[int | None, tuple, str]]:
    return [(p.line, p.path, p.message) for p in read_yaml(raw).problems]


def test_lines_of_values_and_keys() -> None:
    doc = read_yaml(b"a: 1\nb:\n  - x\n  - {c: 2}\n")
    assert doc.data == {"a": 1, "b": ["x", {"c": 2}]}
    assert doc.line_of(("b", 1, "c")) == 4
    assert doc.line_of(("b", 0)) == 3
    assert doc.line_of(("b",), key=True) == 2
    assert doc.line_of(("b", 7, "zzz")) == 3  # nearest known ancestor


def test_duplicate_keys_are_reported_with_both_lines() -> None:
    assert _messages(b"a: 1\nb: 2\na: 3\n") == [(3, ("a",), "duplicate key 'a' (first defined on line 1)")]


def test_nested_duplicate_keys() -> None:
    doc = read_yaml(b"x:\n  - {p: 1, p: 2}\n")
    assert [(p.line, p.path, p.message) for p in doc.problems] == [
        (2, ("x", 0, "p"), "duplicate key 'p' (first defined on line 2)")
    ]


def test_octal_modes_stay_text_and_keys_stay_literal() -> None:
    doc = read_yaml(b"mode: 0644\nquoted: '0644'\nn: 644\non: yes\n1: a\ndate: 2024-01-02\n")
    assert doc.data == {"mode": "0644", "quoted": "0644", "n": 644, "on": True, "1": "a", "date": "2024-01-02"}


def test_recursive_alias() -> None:
    assert _messages(b"a: &x [1, *x]\n") == [(1, ("a", 1), "recursive alias: a value that contains itself")]


def test_alias_bomb_stops() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 10) + "]")
    assert _messages("\n".join(lines).encode()) == [(None, (), "document expands to more than 100000 values (aliases?)")]


def test_reused_alias_below_limit_is_fine() -> None:
    doc = read_yaml(b"a: &a {k: v}\nb: *a\n")
    assert doc.problems == [] and doc.data == {"a": {"k": "v"}, "b": {"k": "v"}}


@pytest.mark.parametrize("raw, expected", [
    (b"a: !!python/object/apply:os.system ['id']\n",
     [(1, ("a",), "unsupported YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'")]),
    (b"a: !custom x\n", [(1, ("a",), "unsupported YAML tag '!custom'")]),
    (b"a: !!binary aGk=\n", [(1, ("a",), "binary values (!!binary) are not supported: use a write step with base64:")]),
    (b"a: {<<: {b: 1}}\n", [(1, ("a",), "merge keys ('<<') are not supported: write the keys out")]),
    (b"? [a, b]\n: 1\n", [(1, (), "a mapping key must be a plain text, not a list or mapping")]),
    (b"a: 1\n---\nb: 2\n", [(3, (), "expected one YAML document, found several ('---')")]),
    (b"", [(1, (), "file is empty: expected a mapping with id, version, base, ...")]),
    (b"a: [1, 2\n", [(2, (), "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence started on line 1)")]),
    (b"a: 1\n\tb: 2\n", [(2, (), "YAML syntax error: found a tab character that violates indentation (while scanning a plain scalar started on line 1)")]),
    (b"a: \"x\x07\"\n", [(1, (), "YAML does not allow the control character #x0007")]),
    (b"a: 1\nb: \"\x1b[31m\"\n", [(2, (), "YAML does not allow the control character #x001b")]),
    (b"a: 1\x00\n", [(1, (), "file contains a NUL byte: not a text file")]),
    (b"a: 1\nb: \xff\xfe\n", [(2, (), "file is not UTF-8 text (byte 0xff)")]),
    (b"[" * 5000 + b"]" * 5000, None),
])
def test_hostile_input_becomes_problems(raw: bytes, expected: list | None) -> None:
    got = _messages(raw)
    if expected is None:
        assert len(got) == 1 and got[0][2].startswith("YAML")
    else:
        assert got == expected


def test_too_big() -> None:
    assert _messages(b"a: '" + b"x" * MAX_BYTES + b"'\n") == [(None, (), "file is larger than 1024 KiB; a spec is one page of YAML")]


def test_deep_block_nesting() -> None:
    raw = "".join("  " * i + f"k{i}:\n" for i in range(200)).encode() + b"  " * 200 + b"v\n"
    got = _messages(raw)
    assert got and "nested deeper than 64 levels" in got[0][2] or "too deep" in got[0][2]


def test_random_junk_never_raises(tmp_path) -> None:
    """Regression guard: no byte soup may make the loader raise instead of reporting."""
    rng = random.Random(1234)
    seeds = [b"id: x\n", b"a: [", b"{", b"- &a *a", b"\xff", b"\x00", b": :", b"!!", b"? ", b"'"]
    spec = tmp_path / "junk.yaml"
    for _ in range(300):
        raw = b"".join(rng.choice(seeds) for _ in range(rng.randint(1, 8))) + os.urandom(rng.randint(0, 20))
        spec.write_bytes(raw)
        variant, problems = check_variant_file(spec)
        assert variant is None and problems


def test_mutated_specs_never_raise(tmp_path) -> None:
    """Regression guard: no edit of a valid spec (lines dropped, doubled, re-indented, values
    swapped for other types) may make the loader raise instead of reporting problems."""
    from .conftest import VALID

    rng = random.Random(99)
    replacements = ["[]", "{}", "null", "1", "-3", "x", "'~/../x'", "[1, {a: b}]", "{kind: nope}", "true", "0644"]
    spec = tmp_path / "every-step.yaml"
    for source in ("every-step.yaml", "minimal-rename.yaml", "requires-list.yaml"):
        lines = (VALID / source).read_text().splitlines()
        for _ in range(80):
            mutated = list(lines)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(mutated))
                action = rng.randrange(4)
                if action == 0:
                    del mutated[i]
                elif action == 1:
                    mutated.insert(i, mutated[i])
                elif action == 2 and ":" in mutated[i]:
                    key = mutated[i].split(":", 1)[0]
                    mutated[i] = f"{key}: {rng.choice(replacements)}"
                else:
                    mutated[i] = " " * rng.randint(0, 6) + mutated[i].lstrip()
            spec.write_text("\n".join(mutated) + "\n")
            check_variant_file(spec)  # must not raise, valid or not
