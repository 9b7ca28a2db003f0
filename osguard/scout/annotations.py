"""Human labels: the append-only annotation log, gold labels, and agreement (κ).

``ITEMS_DIR/annotations.jsonl`` gets one line per label given, written with flush + fsync
before the page is told it is saved::

    {"item_id": "itm-…", "annotator": "alice", "label": "unsafe", "time": "2026-…Z"}

An annotator may change their mind: their latest line for an item counts. The gold label
of an item is the majority of its annotators' labels; a tie goes to the more severe label
(unsafe over unrelated over allowed — the annotation precedence rule). Items nobody
annotated keep their ``label`` field.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable

from osguard._files import append_durably
from osguard.scout.items import ANNOTATIONS_FILE, Item
from osguard.scout.types import LABELS, ScoutError

SEVERITY = {"allowed": 0, "unrelated": 1, "unsafe": 2}


class AnnotationLog:
    """The append-only, fsynced annotation file of an items directory. Thread-safe."""

    def __init__(self, items_dir: str | Path) -> None:
        self.path = Path(items_dir) / ANNOTATIONS_FILE
        self._lock = threading.Lock()

    def append(self, item_id: str, annotator: str, label: str) -> dict[str, Any]:
        """Record one label durably (flush + fsync) and return the record written.

        Raises:
            ScoutError: for a label outside allowed/unrelated/unsafe or an empty annotator.
        """
        if label not in LABELS:
            raise ScoutError(f"label {label!r}: expected one of {', '.join(LABELS)}")
        if not annotator.strip():
            raise ScoutError("annotator name: expected a non-empty name")
        record = {"item_id": item_id, "annotator": annotator.strip(), "label": label,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            append_durably(self.path, line)
        return record

    def records(self) -> list[dict[str, Any]]:
        """Every well-formed line, in order. A torn last line (a crash mid-write) is ignored."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("label") in LABELS and record.get("item_id"):
                out.append(record)
        return out

    def latest(self) -> dict[str, dict[str, str]]:
        """``{item_id: {annotator: label}}`` — each annotator's latest label per item."""
        out: dict[str, dict[str, str]] = {}
        for record in self.records():
            out.setdefault(record["item_id"], {})[str(record["annotator"])] = record["label"]
        return out


def majority(labels: Iterable[str]) -> str:
    """The majority label; ties go to the more severe label."""
    counts = Counter(labels)
    if not counts:
        raise ValueError("no labels")
    return max(counts, key=lambda label: (counts[label], SEVERITY[label]))


def gold_labels(items: list[Item], latest: dict[str, dict[str, str]]) -> dict[str, tuple[str | None, str | None]]:
    """``{item_id: (gold label, origin)}``: human majority (origin ``human``) when annotated,
    else the item's ``label`` with its ``label_origin``."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for item in items:
        human = latest.get(item.id)
        if human:
            out[item.id] = (majority(human.values()), "human")
        else:
            out[item.id] = (item.label, item.label_origin)
    return out


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's κ of two annotators over the same items (None when undefined: no items, or
    chance agreement is 1, i.e. both used one and the same label throughout)."""
    if len(a) != len(b):
        raise ValueError("cohen_kappa: label lists differ in length")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[label] * cb[label] for label in LABELS) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def fleiss_kappa(ratings: list[list[str]]) -> float | None:
    """Fleiss' κ over items each rated by the same number (>= 2) of annotators.

    ``ratings[i]`` is the list of labels item ``i`` received. None when undefined.
    """
    if not ratings:
        return None
    raters = len(ratings[0])
    if raters < 2 or any(len(r) != raters for r in ratings):
        raise ValueError("fleiss_kappa: every item needs the same number (>= 2) of ratings")
    n_items = len(ratings)
    totals = Counter()
    agreement = 0.0
    for labels in ratings:
        counts = Counter(labels)
        totals.update(counts)
        agreement += (sum(c * c for c in counts.values()) - raters) / (raters * (raters - 1))
    p_bar = agreement / n_items
    p_e = sum((totals[label] / (n_items * raters)) ** 2 for label in LABELS)
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1 - p_e)


def agreement_report(items: list[Item], latest: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Inter-annotator agreement and invariant-vs-human agreement.

    Returns a dict with ``annotators``, ``labelled_items``, ``pairs`` (Cohen's κ and raw
    agreement per annotator pair, over the items both labelled), ``fleiss`` (over the items
    every annotator labelled) and ``invariant_vs_human`` (how often the invariant-derived
    label equals the human majority).
    """
    annotators = sorted({a for labels in latest.values() for a in labels})
    pairs = []
    for first, second in combinations(annotators, 2):
        common = [i for i, labels in latest.items() if first in labels and second in labels]
        a = [latest[i][first] for i in common]
        b = [latest[i][second] for i in common]
        pairs.append({"annotators": [first, second], "items": len(common),
                      "agreement": (sum(x == y for x, y in zip(a, b)) / len(common)) if common else None,
                      "cohen_kappa": cohen_kappa(a, b)})
    fleiss = None
    full = [list(labels.values()) for labels in latest.values() if len(labels) == len(annotators)]
    if len(annotators) >= 2 and full:
        fleiss = {"items": len(full), "annotators": len(annotators), "kappa": fleiss_kappa(full)}
    by_id = {item.id: item for item in items}
    compared = agree = 0
    disagreements = []
    for item_id, labels in latest.items():
        item = by_id.get(item_id)
        if item is None or item.label_origin not in ("invariant", "lookahead") or item.label is None:
            continue
        compared += 1
        human = majority(labels.values())
        if human == item.label:
            agree += 1
        else:
            disagreements.append({"item_id": item_id, "invariant": item.label, "human": human})
    return {
        "annotators": annotators,
        "labelled_items": sum(1 for i in latest if i in by_id),
        "pairs": pairs,
        "fleiss": fleiss,
        "invariant_vs_human": {"items": compared, "agree": agree,
                               "rate": (agree / compared) if compared else None,
                               "disagreements": disagreements},
    }


def render_agreement(report: dict[str, Any]) -> str:
    """A short Markdown rendering of ``agreement_report``."""
    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    lines = [f"Annotators: {', '.join(report['annotators']) or 'none'}; "
             f"items labelled: {report['labelled_items']}", ""]
    if report["pairs"]:
        lines += ["| annotators | items | agreement | Cohen's κ |", "|---|---:|---:|---:|"]
        for pair in report["pairs"]:
            lines.append(f"| {' / '.join(pair['annotators'])} | {pair['items']} | "
                         f"{fmt(pair['agreement'])} | {fmt(pair['cohen_kappa'])} |")
        lines.append("")
    if report["fleiss"]:
        f = report["fleiss"]
        lines.append(f"Fleiss' κ ({f['annotators']} annotators, {f['items']} items): {fmt(f['kappa'])}")
    inv = report["invariant_vs_human"]
    lines.append(f"Invariant-derived vs human labels: {inv['agree']}/{inv['items']} agree"
                 + (f" ({inv['rate'] * 100:.0f}%)" if inv["rate"] is not None else ""))
    return "\n".join(lines)
