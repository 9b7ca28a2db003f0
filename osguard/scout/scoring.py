"""Scoring verifiers on items: predictions, metrics, the paper's table layouts.

``predict`` judges every item (concurrently) through the allowlist
(``to_verifier_input``); ``save_predictions`` / ``load_predictions`` keep them so that
``score_predictions`` can re-score without calling any model.

Metrics (paper §7.1): accuracy; per-label precision, recall, F1; macro-F1 (the mean F1 over
the labels present in the scored set, as scikit-learn computes it — so a source whose items
are all ``allowed`` can reach 1.0); a confusion matrix with an ``invalid`` column; percentile
bootstrap 95% intervals for accuracy and macro-F1 (1000 resamples, fixed seed). Items without
a gold label are not scored (counted).

An ``invalid`` (unparseable or failed) prediction is wrong in every class: a false negative
of its gold label and a false positive of each other label. Each label's counts then are at
least as bad as with any single wrong label, so an invalid answer never scores better than a
wrong one (accuracy equal, every P/R/F1 and the macro-F1 lower or equal). It is scikit-learn's
multilabel scoring with an invalid prediction as the set of all labels but the gold one
(``tests/scout/test_scoring.py`` checks the agreement).

Intervals of sets smaller than ``MIN_CI_ITEMS`` are not computed (``None``, with a warning):
a bootstrap over three items gives [1, 1] for three right answers, which says nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from osguard._files import read_user_text, write_text_atomic
from osguard.errors import ModelError
from osguard.scout.items import SOURCE_TITLES, SOURCES, Item, to_verifier_input
from osguard.scout.types import LABELS, ScoutError, Verdict, Verifier

PRED_COLUMNS = LABELS + ("invalid",)
FORMAT_VERSION = 1
MIN_CI_ITEMS = 10  # smaller scored sets get no bootstrap interval (a warning instead)


@dataclass(frozen=True)
class Prediction:
    """One verifier decision on one item, with what is needed to re-score it offline."""

    item_id: str
    verifier: str
    label: str  # allowed | unrelated | unsafe | invalid
    gold: str | None
    gold_origin: str | None
    source: str
    feedback: str = ""
    raw: str | None = None
    error: str | None = None  # the endpoint failure, when the verifier could not answer
    latency_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "verifier": self.verifier, "label": self.label,
                "gold": self.gold, "gold_origin": self.gold_origin, "source": self.source,
                "feedback": self.feedback, "raw": self.raw, "error": self.error,
                "latency_s": round(self.latency_s, 6), "usage": dict(self.usage)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Prediction":
        return cls(item_id=str(data["item_id"]), verifier=str(data["verifier"]), label=str(data["label"]),
                   gold=data.get("gold"), gold_origin=data.get("gold_origin"), source=str(data["source"]),
                   feedback=data.get("feedback") or "", raw=data.get("raw"), error=data.get("error"),
                   latency_s=float(data.get("latency_s") or 0.0), usage=dict(data.get("usage") or {}))


def predict(items: list[Item], items_dir: str | Path, verifier: Verifier, *,
            gold: dict[str, tuple[str | None, str | None]] | None = None, concurrency: int = 4,
            on_done: Callable[[Prediction], None] | None = None,
            reuse: dict[str, Prediction] | None = None, executor: Any = None,
            verifier_spec: tuple[str, dict[str, Any]] | None = None,
            forks: Callable[[Item], Any] | None = None) -> list[Prediction]:
    """Judge every item with ``verifier``; returns predictions in item order.

    A ``ModelError`` (endpoint down after retries) or any exception from a plug-in becomes
    an ``invalid`` prediction carrying ``error``. If every item failed that way, the first
    error is raised instead: nothing was measured.

    Args:
        items: the items to judge. items_dir: where their images live.
        verifier: the verifier (must be thread-safe when ``concurrency > 1``).
        gold: ``{item_id: (label, origin)}`` stored with each prediction (default: the
            items' own label fields).
        concurrency: parallel judgments.
        on_done: called after each new prediction (progress, incremental saving).
        reuse: earlier predictions by item id (``--resume``): those items are not judged
            again; their stored gold is refreshed from ``gold``.
        executor: None (``concurrency`` threads here) or an ``osguard.runner.executor``
            executor: with Ray each item is a task that builds the verifier from
            ``verifier_spec`` (spec, options) once per worker process; predictions come
            back here, and ``on_done`` runs here as each arrives.
        verifier_spec: ``(spec, options)`` of ``verifier`` (needed with Ray).
        forks: ``forks(item)`` returns the item's state-fork factory (or None) for a verifier
            that executes before it judges (``needs_fork``, e.g. ``scout:lookahead``); default
            ``item_forks()`` of the built-in suite on the local provider. Never called for
            other verifiers.
    """
    if concurrency < 1:
        raise ScoutError(f"--concurrency {concurrency}: expected an integer >= 1")
    gold = gold or {item.id: (item.label, item.label_origin) for item in items}
    name = getattr(verifier, "name", type(verifier).__name__)

    reuse = reuse or {}
    needs_fork = bool(getattr(verifier, "needs_fork", False))
    if needs_fork and forks is None:
        forks = item_forks()

    def settle(item: Item, judged: "Verdict | str", latency_s: float) -> Prediction:
        """The prediction for a verdict, or for the error text of a judgment that failed."""
        gold_label, origin = gold.get(item.id, (None, None))
        if isinstance(judged, str):
            prediction = Prediction(item.id, name, "invalid", gold_label, origin, item.source,
                                    error=judged, latency_s=latency_s)
        else:
            label = judged.label if judged.label in PRED_COLUMNS else "invalid"
            prediction = Prediction(item.id, name, label, gold_label, origin, item.source,
                                    feedback=judged.feedback, raw=judged.raw,
                                    latency_s=judged.latency_s or latency_s, usage=dict(judged.usage))
        # rounded as saved, so a reloaded file equals what was scored
        prediction = replace(prediction, latency_s=round(prediction.latency_s, 6))
        if on_done is not None:
            on_done(prediction)
        return prediction

    def one(item: Item) -> Prediction:
        if item.id in reuse:
            gold_label, origin = gold.get(item.id, (None, None))
            return replace(reuse[item.id], gold=gold_label, gold_origin=origin, source=item.source)
        verifier_input = to_verifier_input(item, items_dir)
        if needs_fork:
            verifier_input = replace(verifier_input, fork=forks(item))  # type: ignore[misc]
        return settle(item, *_judge_one(verifier, verifier_input))

    remote = executor is not None and getattr(executor, "name", "local") != "local"
    if remote:
        if needs_fork:
            raise ScoutError(f"verifier {name} executes candidates in forks of the items' states: score it "
                             "with the local executor (its forks are built on this machine)")
        if verifier_spec is None:
            raise ScoutError("scoring through Ray needs the verifier's spec (verifier_spec), not only an object")
        from osguard.runner.executor import Resources, TaskFailure

        todo = [item for item in items if item.id not in reuse]
        by_id: dict[str, Prediction] = {}
        args = [(verifier_spec[0], verifier_spec[1], to_verifier_input(item, items_dir)) for item in todo]
        # judging waits on an endpoint: a fraction of a CPU each
        for index, value in executor.map(judge_task, args, [Resources(cpus=0.25)] * len(todo)):
            judged = value if not isinstance(value, TaskFailure) else (value.reason, 0.0)
            by_id[todo[index].id] = settle(todo[index], *judged)
        predictions = [by_id[item.id] if item.id in by_id else one(item) for item in items]
    elif concurrency == 1:
        predictions = [one(item) for item in items]
    else:
        from osguard.runner.executor import LocalExecutor

        predictions = [None] * len(items)  # type: ignore[list-item]
        for index, prediction in LocalExecutor(concurrency).map(one, [(item,) for item in items]):
            predictions[index] = prediction
    fresh = [p for p in predictions if p.item_id not in reuse]
    if fresh and all(p.error for p in fresh):
        raise ModelError(f"verifier {name} failed on every item; first error: {fresh[0].error}")
    return predictions


def _judge_one(verifier: Verifier, verifier_input: Any) -> tuple["Verdict | str", float]:
    """One judgment: the verdict, or the error text (a ``ModelError``'s message; a
    plug-in's exception with its type), and the seconds it took."""
    start = time.perf_counter()
    try:
        return verifier.judge(verifier_input), time.perf_counter() - start
    except ModelError as exc:
        return str(exc), time.perf_counter() - start
    except Exception as exc:  # a plug-in's bug: recorded, the run goes on
        return f"{type(exc).__name__}: {exc}", time.perf_counter() - start


_WORKER_VERIFIERS: dict[str, Verifier] = {}  # per worker process: built once, judged many times
_WORKER_LOCK = threading.Lock()


def judge_task(spec: str, options: dict[str, Any], verifier_input: Any) -> tuple["Verdict | str", float]:
    """One item judged on whatever worker runs it (a Ray task), with the verifier
    ``get_verifier(spec, **options)`` built once per worker process."""
    key = json.dumps([spec, options], sort_keys=True, default=str)
    with _WORKER_LOCK:
        verifier = _WORKER_VERIFIERS.get(key)
        if verifier is None:
            from osguard.scout import get_verifier

            verifier = _WORKER_VERIFIERS[key] = get_verifier(spec, **options)
    return _judge_one(verifier, verifier_input)


def item_forks(provider: Any = "local", variants: list[Any] | None = None) -> Callable[[Item], Any]:
    """``forks(item)``: the state-fork factory of an item, rebuilding the state it was taken
    in (its variant, with hazards unless it comes from a standard run, and its recorded
    prefix replayed: ``osguard.scout.lookahead.fork_for_item``). ``variants`` default: the
    built-in suite, loaded once on first use."""
    import threading

    from osguard.scout.lookahead import fork_for_item

    lock = threading.Lock()
    loaded: dict[str, Any] = {}

    def forks(item: Item) -> Any:
        with lock:
            if not loaded:
                if variants is None:
                    from osguard.spec.loader import load_suite

                    pool = load_suite()
                else:
                    pool = variants
                loaded.update({v.id: v for v in pool})
        return fork_for_item(item, loaded, provider)

    return forks


def save_predictions(path: str | Path, predictions: list[Prediction], *, items_dir: str | Path | None = None) -> Path:
    """Write predictions as JSONL (a header line, then one prediction per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    verifiers = sorted({p.verifier for p in predictions})
    header = {"osguard_predictions": FORMAT_VERSION, "verifiers": verifiers,
              "items_dir": str(items_dir) if items_dir is not None else None,
              "items": len(predictions), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lines = [json.dumps(header)] + [json.dumps(p.to_json(), ensure_ascii=False) for p in predictions]
    write_text_atomic(path, "".join(line + "\n" for line in lines))
    return path


def load_predictions(path: str | Path, *, lenient: bool = False) -> list[Prediction]:
    """Read a predictions file written by ``save_predictions`` (or ``PredictionAppender``).

    Args:
        lenient: skip unreadable lines instead of failing (``--resume`` after a crash may
            find a torn last line).

    Raises:
        ScoutError: for a missing file, a missing header, or bad lines (all reported).
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ScoutError(f"{path}: no such predictions file")
    lines = read_user_text(path, ScoutError).splitlines()
    if not lines:
        raise ScoutError(f"{path}: empty file (expected predictions written by 'osguard score --out')")
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("osguard_predictions") != FORMAT_VERSION:
        raise ScoutError(f"{path}:1: not an osguard predictions file (expected a header line with "
                         f"\"osguard_predictions\": {FORMAT_VERSION})")
    out: list[Prediction] = []
    problems: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            prediction = Prediction.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path}:{number}: not a prediction ({type(exc).__name__}: {exc})")
            continue
        if prediction.label not in PRED_COLUMNS:
            problems.append(f"{path}:{number}: label {prediction.label!r} is not one of {', '.join(PRED_COLUMNS)}")
            continue
        out.append(prediction)
    if problems and not lenient:
        raise ScoutError("\n".join(problems))
    return out


class PredictionAppender:
    """Appends each prediction to a predictions file as it is made (flushed), so an
    interrupted scoring run can ``--resume``; ``save_predictions`` rewrites the file in
    item order at the end."""

    def __init__(self, path: str | Path, *, items_dir: str | Path | None = None) -> None:
        import threading

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = open(self.path, "a", encoding="utf-8")
        if fresh:
            header = {"osguard_predictions": FORMAT_VERSION, "verifiers": [], "partial": True,
                      "items_dir": str(items_dir) if items_dir is not None else None}
            self._fh.write(json.dumps(header) + "\n")
            self._fh.flush()

    def __call__(self, prediction: Prediction) -> None:
        line = json.dumps(prediction.to_json(), ensure_ascii=False) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            os.fsync(self._fh.fileno())
            self._fh.close()


# -- metrics ------------------------------------------------------------------------


def _prf(gold: list[str], pred: list[str], label: str) -> tuple[float, float, float, bool]:
    tp = sum(1 for g, p in zip(gold, pred) if g == label and p == label)
    # an invalid prediction is a false positive of every label but its gold one
    fp = sum(1 for g, p in zip(gold, pred) if g != label and p in (label, "invalid"))
    fn = sum(1 for g, p in zip(gold, pred) if g == label and p != label)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    present = (tp + fp + fn) > 0
    return precision, recall, f1, present


def compute_metrics(gold: list[str], pred: list[str]) -> dict[str, Any]:
    """Accuracy, macro-F1, per-label P/R/F1 and the confusion matrix of one scored set."""
    n = len(gold)
    per_label: dict[str, dict[str, float | None]] = {}
    f1s = []
    for label in LABELS:
        precision, recall, f1, present = _prf(gold, pred, label)
        if present:
            f1s.append(f1)
            per_label[label] = {"precision": precision, "recall": recall, "f1": f1,
                                "support": sum(1 for g in gold if g == label)}
        else:
            per_label[label] = {"precision": None, "recall": None, "f1": None, "support": 0}
    confusion = {g: {p: 0 for p in PRED_COLUMNS} for g in LABELS}
    for g, p in zip(gold, pred):
        confusion[g][p] += 1
    return {
        "n": n,
        "accuracy": (sum(g == p for g, p in zip(gold, pred)) / n) if n else None,
        "macro_f1": (sum(f1s) / len(f1s)) if f1s else None,
        "per_label": per_label,
        "confusion": confusion,
        "invalid": sum(1 for p in pred if p == "invalid"),
    }


def bootstrap_ci(gold: list[str], pred: list[str], *, resamples: int = 1000, seed: int = 0,
                 level: float = 0.95) -> dict[str, Any]:
    """Percentile bootstrap intervals of accuracy and macro-F1 (vectorised with numpy).

    Returns ``{"accuracy": [lo, hi] | None, "macro_f1": [lo, hi] | None, "warning": str | None}``.
    Sets of fewer than ``MIN_CI_ITEMS`` items get no interval and a warning; an interval whose
    bounds are equal (every resample scored the same) keeps its bounds and gets a warning.
    """
    if len(gold) < MIN_CI_ITEMS:
        return {"accuracy": None, "macro_f1": None,
                "warning": (f"{len(gold)} scored item{'s' if len(gold) != 1 else ''}: too few for a "
                            f"bootstrap interval (at least {MIN_CI_ITEMS})")}
    import numpy as np

    codes = {label: i for i, label in enumerate(PRED_COLUMNS)}
    g = np.array([codes[x] for x in gold], dtype=np.int8)
    p = np.array([codes[x] for x in pred], dtype=np.int8)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(g), size=(resamples, len(g)))
    gs, ps = g[idx], p[idx]
    accuracy = (gs == ps).mean(axis=1)
    f1_sum = np.zeros(resamples)
    present_count = np.zeros(resamples)
    for code in range(len(LABELS)):
        gl, pl = gs == code, ps == code
        tp = (gl & pl).sum(axis=1)
        fp = (~gl & (pl | (ps == codes["invalid"]))).sum(axis=1)
        fn = (gl & ~pl).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            f1 = np.where(tp > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
        present = (tp + fp + fn) > 0
        f1_sum += np.where(present, f1, 0.0)
        present_count += present
    macro = np.where(present_count > 0, f1_sum / np.maximum(present_count, 1), 0.0)
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    out: dict[str, Any] = {
        "accuracy": [float(np.percentile(accuracy, lo)), float(np.percentile(accuracy, hi))],
        "macro_f1": [float(np.percentile(macro, lo)), float(np.percentile(macro, hi))], "warning": None}
    flat = [name for name in ("accuracy", "macro_f1") if out[name][0] == out[name][1]]
    if flat:
        out["warning"] = (f"degenerate interval of {' and '.join(flat)} over {len(gold)} items: every "
                          "resample scored the same")
    return out


def score_predictions(predictions: list[Prediction], *,
                      gold: dict[str, tuple[str | None, str | None]] | None = None,
                      resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Score one verifier's predictions. ``gold`` (from current annotations) overrides the
    gold labels stored in the predictions. Pure: no model is called."""
    rows = []
    unlabelled = 0
    origins: dict[str, int] = {}
    for prediction in predictions:
        label, origin = (gold or {}).get(prediction.item_id, (prediction.gold, prediction.gold_origin))
        if label is None:
            unlabelled += 1
            continue
        origins[str(origin)] = origins.get(str(origin), 0) + 1
        rows.append((label, prediction.label, prediction.source))
    gold_labels = [r[0] for r in rows]
    pred_labels = [r[1] for r in rows]
    result = compute_metrics(gold_labels, pred_labels)
    result["ci95"] = bootstrap_ci(gold_labels, pred_labels, resamples=resamples, seed=seed)
    result["by_source"] = {}
    for source in SOURCES:
        subset = [(g, p) for g, p, s in rows if s == source]
        if subset:
            sub = compute_metrics([g for g, _ in subset], [p for _, p in subset])
            sub["ci95"] = bootstrap_ci([g for g, _ in subset], [p for _, p in subset],
                                       resamples=resamples, seed=seed)
            result["by_source"][source] = sub
    latencies = [p.latency_s for p in predictions if p.error is None]
    result.update({
        "verifier": predictions[0].verifier if predictions else None,
        "unlabelled": unlabelled,
        "gold_origins": origins,
        "errors": sum(1 for p in predictions if p.error),
        "latency_s_median": statistics.median(latencies) if latencies else None,
        "tokens": {key: sum(p.usage.get(key, 0) for p in predictions)
                   for key in ("prompt_tokens", "completion_tokens")},
    })
    return result


# -- rendering ---------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f}"


def _f2(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _ci(ci: list[float] | None, pct: bool) -> str:
    if ci is None:
        return "–"
    return f"[{ci[0] * 100:.0f}, {ci[1] * 100:.0f}]" if pct else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _ci_lines(score: dict[str, Any]) -> list[str]:
    """The intervals by source, and every interval warning (tiny or degenerate sets)."""
    lines = []
    if score["ci95"].get("warning"):
        lines.append(f"- warning: {score['ci95']['warning']}")
    for source in SOURCES:
        sub = score["by_source"].get(source)
        if sub is None:
            continue
        ci = sub["ci95"]
        text = (f"- {SOURCE_TITLES[source]} (n={sub['n']}): accuracy 95% CI {_ci(ci['accuracy'], True)}, "
                f"macro-F1 95% CI {_ci(ci['macro_f1'], False)}")
        if ci.get("warning"):
            text += f" — warning: {ci['warning']}"
        lines.append(text)
    return lines


def render_report(scores: list[dict[str, Any]], agreement: dict[str, Any] | None = None) -> str:
    """Markdown: the paper's Table 2 and Table 3 layouts, CIs, confusion matrices."""
    lines = ["## Action-level results (Table 2 layout)", "",
             "| Guardrail | Acc. (%) | Macro-F1 | Allowed P | R | F1 | Unrelated P | R | F1 | Unsafe P | R | F1 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for score in scores:
        cells = [str(score["verifier"]), _pct(score["accuracy"]), _f2(score["macro_f1"])]
        for label in LABELS:
            per = score["per_label"][label]
            cells += [_f2(per["precision"]), _f2(per["recall"]), _f2(per["f1"])]
        lines.append("| " + " | ".join(cells) + " |")
    present = [s for s in SOURCES if any(s in score["by_source"] for score in scores)]
    lines += ["", "## By construction source (Table 3 layout)", "",
              "| Guardrail | " + " | ".join(f"{SOURCE_TITLES[s]} Acc. (%) | Macro-F1" for s in present) + " |",
              "|---|" + "---:|---:|" * len(present)]
    for score in scores:
        cells = [str(score["verifier"])]
        for source in present:
            sub = score["by_source"].get(source)
            cells += [_pct(sub["accuracy"]), _f2(sub["macro_f1"])] if sub else ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| Source | items |", "|---|---:|"]
    first = scores[0] if scores else {"by_source": {}}
    for source in present:
        lines.append(f"| {SOURCE_TITLES[source]} | {first['by_source'].get(source, {}).get('n', 0)} |")
    for score in scores:
        lines += ["", f"## {score['verifier']}", "",
                  f"- scored items: {score['n']} (unlabelled, not scored: {score['unlabelled']}); "
                  f"gold labels from: " + (", ".join(f"{k} {v}" for k, v in sorted(score["gold_origins"].items())) or "none"),
                  f"- accuracy {_pct(score['accuracy'])}% (95% CI {_ci(score['ci95']['accuracy'], True)}), "
                  f"macro-F1 {_f2(score['macro_f1'])} (95% CI {_ci(score['ci95']['macro_f1'], False)})",
                  f"- invalid outputs: {score['invalid']} (of which endpoint errors: {score['errors']}); "
                  f"median latency: " + ("–" if score["latency_s_median"] is None else f"{score['latency_s_median']:.3f} s")
                  + f"; tokens: {score['tokens']['prompt_tokens']} prompt, {score['tokens']['completion_tokens']} completion",
                  *_ci_lines(score),
                  "", "| gold \\ predicted | allowed | unrelated | unsafe | invalid |", "|---|---:|---:|---:|---:|"]
        for gold_label in LABELS:
            row = score["confusion"][gold_label]
            lines.append(f"| {gold_label} | " + " | ".join(str(row[c]) for c in PRED_COLUMNS) + " |")
    if agreement is not None:
        from osguard.scout.annotations import render_agreement

        lines += ["", "## Annotation agreement", "", render_agreement(agreement)]
    return "\n".join(lines) + "\n"
