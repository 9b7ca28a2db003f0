"""Markdown (terminal) and self-contained HTML reports of one run, optionally paired
with a reference run (``--vs``)."""

from __future__ import annotations

import base64
import io
from typing import Any

from osguard.report.load import Run
from osguard.report.metrics import OUTCOMES, Rates, overhead, rates, rates_by, transitions

SHORT = {"safe_success": "success", "unsafe_completion": "unsafe compl.", "task_failure": "task fail",
         "unsafe_failure": "unsafe fail", "retry_termination": "retry term.", "env_error": "env error",
         "agent_error": "agent error"}


def _cell(r: Rates, count: int) -> str:
    return f"{r.pct(count):.0f}% ({count})"


def _rates_table(title: str, groups: dict[str, Rates]) -> list[str]:
    lines = [f"| {title} | n | variant success | unsafe completion | retry termination | task failure | errors "
             "| any violation |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in groups.items():
        lines.append(f"| {name} | {r.n} | {_cell(r, r.success)} | {_cell(r, r.unsafe_completion)} | "
                     f"{_cell(r, r.retry_termination)} | {_cell(r, r.task_failure)} | {r.errors} | "
                     f"{_cell(r, r.violation)} |")
    return lines


def _fmt_tokens(tokens: dict[str, int]) -> str:
    if not tokens:
        return "0"
    return ", ".join(f"{k} {v}" for k, v in sorted(tokens.items()))


def _fmt_blocked(blocked: dict[str, int]) -> str:
    """``4 (invalid 1, unrelated 1, unsafe 2)``; ``0`` when nothing was blocked."""
    total = sum(blocked.values())
    if not total:
        return "0"
    return f"{total} ({', '.join(f'{k} {v}' for k, v in sorted(blocked.items()) if v)})"


def _sec(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}s"


def report_data(run: Run, other: Run | None = None) -> dict[str, Any]:
    """Everything a report shows, as data (the Markdown and HTML renderers share it)."""
    shared = _shared_ids(run, other)
    data: dict[str, Any] = {
        "run": run, "other": other, "shared": shared,
        "overall": {run.label: rates(run.results)},
        "by_family": rates_by(run.results, "family"),
        "by_domain": rates_by(run.results, "domain"),
        "overhead": overhead(run, other) if run.manifest.get("guardrail") else None,
        "transitions": transitions(other, run) if other is not None else None,
        "retried": retried_episodes(run),
        "start_retries": start_retries(run),
    }
    if other is not None:
        # Outcome rates of two runs side by side only mean something over the same episodes.
        data["overall"] = {other.label: rates(_only(other.results, shared)),
                           run.label: rates(_only(run.results, shared))}
        data["other_by_family"] = rates_by(other.results, "family")
        data["other_by_domain"] = rates_by(other.results, "domain")
        data["other_overhead"] = overhead(other) if other.manifest.get("guardrail") else None
    return data


def retried_episodes(run: Run) -> list[dict[str, Any]]:
    """Episodes run again after an error (``--resume --retry-errors``): id, the earlier
    outcomes in order, and the outcome that counts."""
    return [{"episode_id": r["episode_id"], "before": [a.get("outcome") for a in r["retried"]],
             "outcome": r["outcome"]} for r in run.results if r.get("retried")]


def start_retries(run: Run) -> dict[str, Any]:
    """Environment starts that failed and were retried before an episode's environment
    came up: how many in all, and per episode."""
    per = {r["episode_id"]: int(r.get("start_retries") or 0) for r in run.results if r.get("start_retries")}
    return {"total": sum(per.values()), "episodes": per}


def retry_lines(d: dict[str, Any]) -> list[str]:
    """The report's lines on retries (none when nothing was retried)."""
    lines = []
    retried = d["retried"]
    if retried:
        lines.append(f"retried after an error: {len(retried)} episode{'s' if len(retried) != 1 else ''} ("
                     + ", ".join(f"{e['episode_id']}: {' → '.join([*e['before'], e['outcome']])}" for e in retried)
                     + ")")
    starts = d["start_retries"]
    if starts["total"]:
        count = len(starts["episodes"])
        lines.append(f"environment starts retried: {starts['total']} in {count} episode{'s' if count != 1 else ''} ("
                     + ", ".join(f"{k} {v}" for k, v in sorted(starts["episodes"].items())) + ")")
    return lines


def _shared_ids(run: Run, other: Run | None) -> dict[str, Any] | None:
    """The episodes both runs finished, and what each has alone (None without ``--vs``)."""
    if other is None:
        return None
    mine, theirs = set(run.by_id), set(other.by_id)
    return {"ids": sorted(mine & theirs), "only_run": sorted(mine - theirs), "only_other": sorted(theirs - mine)}


def _only(results: list[dict[str, Any]], shared: dict[str, Any]) -> list[dict[str, Any]]:
    ids = set(shared["ids"])
    return [r for r in results if r["episode_id"] in ids]


def shared_note(run: Run, other: Run, shared: dict[str, Any]) -> str:
    """One line saying over which episodes the two runs are compared."""
    count = len(shared["ids"])
    note = f"compared on the {count} episode{'s' if count != 1 else ''} both runs finished"
    extra = []
    if shared["only_run"]:
        extra.append(f"{len(shared['only_run'])} only in {run.path}")
    if shared["only_other"]:
        extra.append(f"{len(shared['only_other'])} only in {other.path}")
    return note + (f" ({'; '.join(extra)}: left out of the outcome table)" if extra else "")


def report_json(run: Run, other: Run | None = None) -> dict[str, Any]:
    """The report's numbers as plain JSON (``osguard report --json``)."""
    d = report_data(run, other)
    out: dict[str, Any] = {
        "run": str(run.path), "label": run.label, "skipped": run.manifest.get("skipped") or {},
        "overall": rates(run.results).to_json(),
        "by_family": {k: r.to_json() for k, r in d["by_family"].items()},
        "by_domain": {k: r.to_json() for k, r in d["by_domain"].items()},
        "overhead": d["overhead"].to_json() if d["overhead"] is not None else None,
        "retried": d["retried"], "start_retries": d["start_retries"],
    }
    if other is not None:
        out["vs"] = {"run": str(other.path), "label": other.label, "overall": rates(other.results).to_json(),
                     "shared_episodes": len(d["shared"]["ids"]), "only_in_run": d["shared"]["only_run"],
                     "only_in_vs": d["shared"]["only_other"],
                     "overall_on_shared": {k: r.to_json() for k, r in d["overall"].items()},
                     "by_family": {k: r.to_json() for k, r in d["other_by_family"].items()},
                     "by_domain": {k: r.to_json() for k, r in d["other_by_domain"].items()}}
        out["transitions"] = d["transitions"].to_json()
    return out


def render_markdown(run: Run, other: Run | None = None) -> str:
    """The report as Markdown (printed by ``osguard report`` and at the end of ``osguard run``)."""
    d = report_data(run, other)
    m = run.manifest
    out = [f"# Run {run.path}", "",
           f"agent `{m.get('agent')}`, guardrail `{m.get('guardrail') or 'none'}`, provider `{m.get('provider')}`, "
           f"retry budget {m.get('retry_budget')}, max steps {m.get('max_steps')}, "
           f"{len(run.results)}/{len(m.get('variants', {}))} episodes finished"]
    skipped = m.get("skipped") or {}
    if skipped:
        out += ["", *(f"skipped {vid}: {why}" for vid, why in skipped.items())]
    retries = retry_lines(d)
    if retries:
        out += ["", *retries]
    out.append("")
    out += ["## Outcomes", ""]
    if other is not None:
        out += [shared_note(run, other, d["shared"]), ""]
    out += _rates_table("run", d["overall"]) + [""]
    out += ["## By family", ""] + _rates_table("family", d["by_family"]) + [""]
    if other is not None:
        out += [f"## By family — {other.label} (--vs)", ""] + _rates_table("family", d["other_by_family"]) + [""]
    out += ["## By domain", ""] + _rates_table("domain", d["by_domain"]) + [""]
    if other is not None:
        out += [f"## By domain — {other.label} (--vs)", ""] + _rates_table("domain", d["other_by_domain"]) + [""]
    t = d["transitions"]
    if t is not None:
        out += [f"## Paired transitions ({other.label} → {run.label}, {t.paired} paired episodes)", "",
                f"- unsafe completions that became safe successes: {len(t.unsafe_to_safe)}"
                + (f" ({', '.join(t.unsafe_to_safe)})" if t.unsafe_to_safe else ""),
                f"- unsafe completions halted by retry termination: {len(t.unsafe_to_halted)}"
                + (f" ({', '.join(t.unsafe_to_halted)})" if t.unsafe_to_halted else ""),
                f"- unsafe completions unchanged: {len(t.unsafe_kept)}",
                f"- safe successes halted by retry termination: {len(t.success_halted)}"
                + (f" ({', '.join(t.success_halted)})" if t.success_halted else ""),
                f"- safe successes lost otherwise: {len(t.success_lost)}", ""]
        used = [o for o in OUTCOMES if any(t.matrix.get(o, {}).values()) or any(t.matrix[b].get(o, 0) for b in t.matrix)]
        out += ["| before \\ after | " + " | ".join(SHORT[o] for o in used) + " |",
                "|---|" + "---:|" * len(used)]
        for b in used:
            out.append(f"| {SHORT[b]} | " + " | ".join(str(t.matrix.get(b, {}).get(a, 0)) for a in used) + " |")
        if t.only_before or t.only_after:
            out.append(f"\nunpaired: {len(t.only_before)} only in {other.path}, {len(t.only_after)} only in {run.path}")
        out.append("")
    o = d["overhead"]
    if o is not None:
        j = o.to_json()
        out += ["## Guardrail overhead", "",
                f"- proposals judged: {o.judged}; blocked: {_fmt_blocked(o.blocked)}",
                f"- guardrail latency: median {_sec(j['guardrail_latency_median_s'])} per judgement, "
                f"total {j['guardrail_latency_total_s']:.3f}s",
                f"- guardrail tokens: {_fmt_tokens(o.guardrail_tokens)}; agent tokens: {_fmt_tokens(o.agent_tokens)}",
                f"- blocked steps of the safe reference (over-blocking): {o.blocked_safe_reference}",
                ]
        if other is not None:
            out += [f"- blocked actions the --vs run executed on its way to a safe success: {o.blocked_paired_safe}",
                    f"- added wall time per paired episode: median {_sec(j['paired_added_median_s'])}"]
        out.append("")
    return "\n".join(out)


# -- HTML ------------------------------------------------------------------------------

COLORS = {"safe_success": "#2e7d32", "unsafe_completion": "#c62828", "task_failure": "#9e9e9e",
          "unsafe_failure": "#ef6c00", "retry_termination": "#1565c0", "env_error": "#6d4c41",
          "agent_error": "#8e24aa"}


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]


def _stacked(groups: dict[str, Rates], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(groups)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(names), 1) + 1.2))
    left = [0.0] * len(names)
    for outcome in OUTCOMES:
        vals = [groups[n].pct(groups[n].counts.get(outcome, 0)) for n in names]
        if not any(vals):
            continue
        ax.barh(names, vals, left=left, color=COLORS[outcome], label=SHORT[outcome])
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of episodes")
    ax.set_title(title, pad=28)
    ax.invert_yaxis()
    if any(left):
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=4, fontsize=8, frameon=False)
    return _svg(fig)


def _heatmap(matrix: dict[str, dict[str, int]], before: str, after: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    used = [o for o in OUTCOMES if any(matrix.get(o, {}).values()) or any(matrix[b].get(o, 0) for b in matrix)]
    if not used:
        return ""
    grid = [[matrix.get(b, {}).get(a, 0) for a in used] for b in used]
    fig, ax = plt.subplots(figsize=(1.1 * len(used) + 2, 0.8 * len(used) + 1.5))
    ax.imshow(grid, cmap="Blues")
    ax.set_xticks(range(len(used)), [SHORT[o] for o in used], rotation=30, ha="right")
    ax.set_yticks(range(len(used)), [SHORT[o] for o in used])
    ax.set_xlabel(after)
    ax.set_ylabel(before)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", color="black" if v < max(max(grid)) / 2 + 0.5 else "white")
    ax.set_title("paired outcomes")
    return _svg(fig)


def render_html(run: Run, other: Run | None = None) -> str:
    """A self-contained HTML report (tables plus inline SVG plots; no external files)."""
    import jinja2

    d = report_data(run, other)
    plots = {"overall": _stacked(d["overall"], "outcomes"),
             "family": _stacked(d["by_family"], f"by family — {run.label}"),
             "domain": _stacked(d["by_domain"], f"by domain — {run.label}")}
    if other is not None:
        plots["other_family"] = _stacked(d["other_by_family"], f"by family — {other.label}")
        plots["other_domain"] = _stacked(d["other_by_domain"], f"by domain — {other.label}")
        plots["transitions"] = _heatmap(d["transitions"].matrix, other.label, run.label)
    env = jinja2.Environment(loader=jinja2.PackageLoader("osguard.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]))
    template = env.get_template("report.html.j2")
    markdown = render_markdown(run, other)
    return template.render(d=d, run=run, other=other, plots=plots, short=SHORT, outcomes=OUTCOMES,
                           overhead=d["overhead"].to_json() if d["overhead"] is not None else None,
                           markdown=markdown, b64=lambda b: base64.b64encode(b).decode(),
                           fmt_tokens=_fmt_tokens, fmt_blocked=_fmt_blocked, retry_lines=retry_lines(d),
                           shared_note=shared_note(run, other, d["shared"]) if other is not None else None)
