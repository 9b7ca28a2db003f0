"""The suite's coverage, and docs/suite.md written from the specs.

``osguard validate --coverage`` prints :func:`coverage_table` (variants per domain and per
family, GUI vs shell, safe-reference lengths, alternatives); ``python -m
osguard.spec.coverage --write docs/suite.md`` regenerates the suite's page
(:func:`suite_markdown`), and a test fails while the page is out of date.

Definitions (also printed under the table):

- a variant is **GUI** when its safe reference has at least one ``pyautogui`` action, else
  **shell**;
- a reference's **length** counts its actions except the closing ``DONE``/``FAIL`` (a
  ``WAIT`` is a step an agent takes, and counts);
- **long GUI**: a GUI variant whose safe reference has at least :data:`LONG_GUI` actions
  (the action-level items need prefixes longer than the interruption point, 2 or 4 steps).

Pure functions over loaded :class:`~osguard.spec.model.Variant` objects: nothing here
starts an environment.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from osguard.spec.model import ALTERNATIVE_KINDS, Variant

__all__ = ["LONG_GUI", "Coverage", "VariantRow", "coverage", "coverage_table", "reference_length",
           "suite_markdown", "variant_row"]

LONG_GUI = 5  # actions of a GUI safe reference that count as "long"


def reference_length(actions: Sequence[object]) -> int:
    """The number of actions of a reference, not counting a closing ``DONE``/``FAIL``."""
    count = len(actions)
    last = actions[-1] if actions else None
    if last is not None and getattr(last, "kind", None) == "special" and getattr(last, "code", "") in ("DONE", "FAIL"):
        count -= 1
    return count


@dataclass(frozen=True)
class VariantRow:
    """What the coverage table and docs/suite.md know of one variant."""

    id: str
    family: str
    domain: str
    osworld_id: str
    instruction: str
    description: str
    gui: bool
    safe_length: int
    unsafe_length: int
    alternatives: tuple[tuple[str, str, bool, str], ...]  # (kind, name, sneaky, description)
    root: bool
    path: str

    @property
    def long_gui(self) -> bool:
        """A GUI variant whose safe reference has at least :data:`LONG_GUI` actions."""
        return self.gui and self.safe_length >= LONG_GUI


def variant_row(variant: Variant, suite_dir: Path | None = None) -> VariantRow:
    """The coverage row of ``variant`` (``path`` relative to ``suite_dir``'s parent when given)."""
    safe = variant.references.safe
    unsafe = variant.references.unsafe
    path = Path(variant.source_path or "")
    if suite_dir is not None:
        try:
            path = path.resolve().relative_to(suite_dir.resolve().parent)
        except ValueError:
            pass
    return VariantRow(
        id=variant.id, family=variant.family, domain=variant.base.domain, osworld_id=variant.base.osworld_id,
        instruction=variant.base.instruction, description=" ".join(variant.description.split()),
        gui=any(a.kind == "pyautogui" for a in safe), safe_length=reference_length(safe),
        unsafe_length=reference_length(unsafe.actions) if unsafe else 0,
        alternatives=tuple((a.kind, a.name, a.sneaky, " ".join(a.description.split())) for a in variant.alternatives),
        root=bool(getattr(variant.requires, "root", False)), path=str(path))


@dataclass(frozen=True)
class Coverage:
    """The suite's coverage: one row per variant, sorted by family then id."""

    rows: tuple[VariantRow, ...]

    def groups(self, key: str) -> dict[str, list[VariantRow]]:
        """Rows grouped by ``key`` (``domain`` or ``family``), groups sorted by name."""
        out: dict[str, list[VariantRow]] = {}
        for row in sorted(self.rows, key=lambda r: getattr(r, key)):
            out.setdefault(getattr(row, key), []).append(row)
        return out

    def alternative_counts(self) -> Counter[str]:
        """Alternatives per kind over the suite, plus ``sneaky``."""
        counts: Counter[str] = Counter({kind: 0 for kind in ALTERNATIVE_KINDS})
        for row in self.rows:
            for kind, _name, sneaky, _text in row.alternatives:
                counts[kind] += 1
                counts["sneaky"] += int(sneaky)
        return counts

    def summary(self) -> str:
        """One paragraph: totals, GUI/shell, lengths, alternatives."""
        rows = self.rows
        if not rows:
            return "0 variants"
        gui = sum(r.gui for r in rows)
        lengths = [r.safe_length for r in rows]
        alts = self.alternative_counts()
        return (f"{len(rows)} variants over {len(self.groups('domain'))} domains and "
                f"{len(self.groups('family'))} families; {gui} GUI ({sum(r.long_gui for r in rows)} with a GUI safe "
                f"reference of >= {LONG_GUI} actions), {len(rows) - gui} shell; safe reference length min "
                f"{min(lengths)}, median {_median(lengths)}, max {max(lengths)}; "
                f"{sum(alts[k] for k in ALTERNATIVE_KINDS)} alternatives ({alts['safe']} safe, {alts['unsafe']} "
                f"unsafe of which {alts['sneaky']} sneaky, {alts['overcautious']} overcautious)")


def coverage(variants: Iterable[Variant], suite_dir: Path | None = None) -> Coverage:
    """The coverage of ``variants`` (valid variants, e.g. from ``validate_paths``)."""
    rows = sorted((variant_row(v, suite_dir) for v in variants), key=lambda r: (r.family, r.id))
    return Coverage(tuple(rows))


def _median(values: list[int]) -> str:
    value = statistics.median(values)
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


COLUMNS = ("variants", "gui", "shell", f"gui>={LONG_GUI}", "safe len", "alternatives")


def _cells(rows: list[VariantRow]) -> tuple[str, ...]:
    gui = sum(r.gui for r in rows)
    return (str(len(rows)), str(gui), str(len(rows) - gui), str(sum(r.long_gui for r in rows)),
            _median([r.safe_length for r in rows]), str(sum(len(r.alternatives) for r in rows)))


def coverage_table(cov: Coverage) -> list[tuple[str, list[tuple[str, ...]]]]:
    """The two tables (by domain, by family) as ``(title, rows)``; each row is the group name,
    then :data:`COLUMNS`; a last ``total`` row."""
    out = []
    for key in ("domain", "family"):
        rows = [(name, *_cells(group)) for name, group in cov.groups(key).items()]
        rows.append(("total", *_cells(list(cov.rows))) if cov.rows else ("total", "0", "0", "0", "0", "-", "0"))
        out.append((key, rows))
    return out


DEFINITIONS = (f"GUI: the safe reference has a pyautogui action (else shell). safe len: the median number of "
               f"actions of the safe references, without the closing DONE/FAIL. gui>={LONG_GUI}: GUI variants whose safe reference has at least "
               f"{LONG_GUI} actions.")

REGENERATE = "python -m osguard.spec.coverage --write docs/suite.md"


def _md_table(title: str, rows: list[tuple[str, ...]]) -> list[str]:
    lines = [f"| {title} | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    lines += ["| " + " | ".join(("**total**" if row[0] == "total" else row[0], *row[1:])) + " |" for row in rows]
    return lines


def _alt_label(kind: str, sneaky: bool) -> str:
    return "unsafe, sneaky" if sneaky else kind


def suite_markdown(cov: Coverage) -> str:
    """docs/suite.md: the coverage tables, then every variant by family (upstream task and
    domain, hazard, references' lengths, what each alternative proves)."""
    out = ["# The suite", "",
           f"<!-- Generated from variants/ by `{REGENERATE}`; do not edit by hand. -->", "",
           "Every variant of the shipped suite: the upstream OSWorld task it keeps unchanged, the hazard it",
           "adds, its family, and what its alternative trajectories prove (`osguard check` replays each one",
           "and expects `safe_success` for safe, `unsafe_completion` for unsafe, `task_failure` for",
           "overcautious ones). `osguard validate --coverage` prints the same tables.", "",
           "## Coverage", "", cov.summary() + ".", "", DEFINITIONS, ""]
    for title, rows in coverage_table(cov):
        out += _md_table(title, rows) + [""]
    for family, rows in cov.groups("family").items():
        out += [f"## {family}", ""]
        for row in sorted(rows, key=lambda r: r.id):
            kind = "GUI" if row.gui else "shell"
            out += [f"### {row.id}", "",
                    f"- upstream: `{row.domain}` task `{row.osworld_id}`: {_quote(row.instruction)}",
                    f"- hazard: {row.description}",
                    f"- family: `{row.family}`; file `{row.path}`" + ("; needs root" if row.root else ""),
                    f"- references: {kind}; safe {_actions(row.safe_length)}, unsafe {_actions(row.unsafe_length)}"]
            if row.alternatives:
                out.append("- alternatives:")
                out += [f"  - {_alt_label(k, s)} `{name}`: {text}" for k, name, s, text in row.alternatives]
            else:
                out.append("- alternatives: none")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _actions(count: int) -> str:
    return f"{count} action{'s' if count != 1 else ''}"


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return f"“{flat}”"


def main(argv: list[str] | None = None) -> int:
    """``python -m osguard.spec.coverage [--write PATH] [SUITE]``: print or write docs/suite.md."""
    import argparse

    from osguard.spec.loader import default_suite_dir, validate_paths

    parser = argparse.ArgumentParser(prog="python -m osguard.spec.coverage", description=main.__doc__)
    parser.add_argument("suite", nargs="?", type=Path, default=None, help="the suite folder (default: variants/)")
    parser.add_argument("--write", type=Path, default=None, help="write the page here instead of stdout")
    args = parser.parse_args(argv)
    suite = args.suite or default_suite_dir()
    variants, problems = validate_paths([suite])
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"error: {len(problems)} problems in {suite}: run osguard validate", file=sys.stderr)
        return 1
    text = suite_markdown(coverage(variants, suite))
    if args.write is None:
        sys.stdout.write(text)
    else:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write} ({len(variants)} variants)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
