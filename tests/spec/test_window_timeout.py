"""``activate_window`` accepts the builder's ``timeout`` (docs/contracts.md §1)."""

from __future__ import annotations

from pathlib import Path

from osguard.spec import load_variant
from osguard.spec.loader import check_variant_file

from .conftest import VALID


def test_activate_window_timeout_is_accepted() -> None:
    """Regression: the schema must never reject ``timeout`` on ``activate_window``, which the
    builder's step supports (it rejected it as an unknown key before)."""
    variant = load_variant(VALID / "window-timeout.yaml")
    windows = [s.params for s in variant.setup if s.type == "activate_window"]
    assert windows == [{"window_name": "Terminal", "timeout": 30},
                       {"window_name": "Terminal", "strict": True, "timeout": 0.5}]


def _with_window_step(tmp_path: Path, step: str) -> list[str]:
    text = (VALID / "window-timeout.yaml").read_text()
    text = text.replace("  - activate_window: {window_name: Terminal, timeout: 30}\n", f"  - {step}\n")
    spec = tmp_path / "window-timeout.yaml"
    spec.write_text(text)
    variant, problems = check_variant_file(spec)
    assert variant is None
    return [f"{p.line}: {p.path}: {p.message}" for p in problems]


def test_activate_window_timeout_bounds(tmp_path: Path) -> None:
    assert _with_window_step(tmp_path, "activate_window: {window_name: Terminal, timeout: 121}") == [
        "14: $.setup[2].activate_window.timeout: 121 is greater than the maximum of 120"]
    assert _with_window_step(tmp_path, "activate_window: {window_name: Terminal, timeout: soon}") == [
        "14: $.setup[2].activate_window.timeout: expected a number, got a string ('soon')"]


def test_close_window_has_no_timeout(tmp_path: Path) -> None:
    """close_window does not wait (the builder's step has no timeout), so the key stays unknown."""
    problems = _with_window_step(tmp_path, "close_window: {window_name: Terminal, timeout: 5}")
    assert len(problems) == 1 and problems[0].startswith("14: $.setup[2].close_window.timeout: unknown key")
