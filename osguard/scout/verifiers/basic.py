"""The simplest verifiers: ``allow-all`` and ``scripted:FILE``."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osguard.scout.types import LABELS, ScoutError, Verdict, VerifierInput


class AllowAllVerifier:
    """Approves every action: the unguarded baseline and the runner's default."""

    name = "allow-all"

    def judge(self, item: VerifierInput) -> Verdict:
        return Verdict("allowed", "allow-all approves every action")


def allow_all_factory(arg: str | None = None, **options: Any) -> AllowAllVerifier:
    """Factory for ``allow-all`` (options are accepted and ignored)."""
    return AllowAllVerifier()


@dataclass(frozen=True)
class ScriptedRule:
    """One rule of a scripted verifier: a regex searched in the action code."""

    pattern: re.Pattern[str]
    label: str
    feedback: str


class ScriptedVerifier:
    """Labels actions by the first rule whose regex matches the action code.

    Deterministic and offline: tests of the guarded loop use it to block a known unsafe
    shortcut. An action no rule matches is ``allowed``.
    """

    def __init__(self, rules: list[ScriptedRule], name: str = "scripted") -> None:
        self.rules = list(rules)
        self.name = name

    def judge(self, item: VerifierInput) -> Verdict:
        start = time.perf_counter()
        for rule in self.rules:
            if rule.pattern.search(item.action.code):
                return Verdict(rule.label, rule.feedback, latency_s=time.perf_counter() - start)  # type: ignore[arg-type]
        return Verdict("allowed", "", latency_s=time.perf_counter() - start)

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedVerifier":
        """Load rules from a YAML file: a list of ``{match, label, feedback}`` mappings.

        Raises:
            ScoutError: listing every problem found (missing file, bad YAML, bad entries).
        """
        import yaml

        path = Path(path)
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScoutError(f"scripted verifier: {where}: no such file") from None
        except OSError as exc:
            raise ScoutError(f"scripted verifier: {where}: cannot read: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ScoutError(f"scripted verifier: {where}{line}: invalid YAML: "
                             f"{getattr(exc, 'problem', None) or exc}") from None
        if not isinstance(data, list):
            raise ScoutError(f"scripted verifier: {where}: expected a list of "
                             "{match, label, feedback} mappings")
        problems: list[str] = []
        rules: list[ScriptedRule] = []
        for index, entry in enumerate(data):
            at = f"{where}: $[{index}]"
            if not isinstance(entry, dict):
                problems.append(f"{at}: expected a mapping with 'match', 'label', 'feedback'")
                continue
            unknown = sorted(set(entry) - {"match", "label", "feedback"})
            if unknown:
                problems.append(f"{at}: unknown key(s) {', '.join(unknown)} "
                                "(expected match, label, feedback)")
            match, label, feedback = entry.get("match"), entry.get("label"), entry.get("feedback", "")
            if not isinstance(match, str):
                problems.append(f"{at}.match: expected a regular expression string")
            if label not in LABELS:
                problems.append(f"{at}.label: expected one of {', '.join(LABELS)}, got {label!r}")
            if not isinstance(feedback, str):
                problems.append(f"{at}.feedback: expected a string")
            if isinstance(match, str):
                try:
                    pattern = re.compile(match)
                except re.error as exc:
                    problems.append(f"{at}.match: invalid regular expression: {exc}")
                    continue
                if label in LABELS and isinstance(feedback, str):
                    rules.append(ScriptedRule(pattern, label, feedback))
        if problems:
            raise ScoutError("scripted verifier: invalid rules file\n" + "\n".join(problems))
        return cls(rules, name=f"scripted:{path.name}")


def scripted_factory(arg: str | None, **options: Any) -> ScriptedVerifier:
    """Factory for ``scripted:FILE``."""
    assert arg is not None
    return ScriptedVerifier.from_file(arg)
