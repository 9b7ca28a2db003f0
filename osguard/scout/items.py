"""Action-level items: the unit SCOUT scores, stored as JSONL plus image files.

An items directory::

    ITEMS_DIR/
      items.jsonl        # one item per line (schema below); or items.jsonl.gz (a packed,
                         # published set: ``pack_items``), read the same way
      images/<id>.png    # pre-action screenshots
      build.json         # how the items were built (sources, counts, skipped, proposer)
      annotations.jsonl  # human labels, appended by ``osguard annotate`` (may be absent)

Each line of ``items.jsonl`` (every key always present, so Hugging Face ``datasets``
infers one schema: ``datasets.load_dataset("json", data_files="ITEMS_DIR/items.jsonl")``):

- ``id``: stable item id; ``instruction``: the user's original instruction;
- ``action``: ``{kind, code}`` — the candidate action;
- ``screenshot``: path relative to ITEMS_DIR or null; ``accessibility_tree``: text or null;
  ``shell_output``: the previous action's output (shell action space) or null;
- ``source``: ``standard`` | ``interrupted_state_compatible`` | ``interrupted_unsafe`` |
  ``risk_augmented``;
- ``candidate_index``: 1-based position of the candidate in its trajectory (executed
  actions from the start, the candidate included);
- ``label``: the provisional reference label (human labels, when annotated, take over),
  ``label_origin``: ``invariant`` (risk-augmented: from the runner's step attribution),
  ``lookahead`` (the candidate was executed — in its episode or in a fork — and the state
  probed: see ``provenance.lookahead``), ``reference`` (a step of a safe reference that
  ``osguard check`` proves), ``source`` (the construction source's expected label) or
  ``manual``;
- ``variant``, ``family``, ``domain``: the variant the state comes from, its risk family
  and its OSWorld domain;
- ``provenance``: run dir (relative to the items directory when inside it), episode,
  variant, step, outcome, violated invariants, the reference replayed, the executed prefix,
  the look-ahead's evidence, the interruption point, the references merged into this item,
  and for proposer items ``proposer: {model, mode, task, raw}`` — the invented task is kept
  for audit only.

Item ids hash the instruction, the state (variant, whether hazards were injected, the
executed prefix) and the candidate (kind, code): the same on every machine and in every
folder; items with equal ids are exact duplicates and are merged.

Only ``to_verifier_input`` turns an item into what a verifier sees; it copies the
allowlisted fields and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osguard._files import read_user_text, write_text_atomic
from osguard.actions import Action
from osguard.scout.types import LABELS, ScoutError, VerifierInput

ITEMS_FILE = "items.jsonl"
ITEMS_GZ = "items.jsonl.gz"  # a packed set (``pack_items``): what the repository publishes
IMAGES_DIR = "images"
BUILD_FILE = "build.json"
ANNOTATIONS_FILE = "annotations.jsonl"

SOURCES: tuple[str, ...] = ("standard", "interrupted_state_compatible", "interrupted_unsafe", "risk_augmented")
SOURCE_TITLES: dict[str, str] = {
    "standard": "Standard OSWorld",
    "interrupted_state_compatible": "Interrupted + state-compatible",
    "interrupted_unsafe": "Interrupted + explicitly unsafe",
    "risk_augmented": "Risk-augmented",
}
LABEL_ORIGINS = ("invariant", "lookahead", "reference", "source", "manual")


@dataclass(frozen=True)
class Item:
    """One action-level item (see the module docstring for each field)."""

    id: str
    instruction: str
    action: Action
    source: str
    candidate_index: int
    screenshot: str | None = None
    accessibility_tree: str | None = None
    shell_output: str | None = None
    label: str | None = None
    label_origin: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    variant: str | None = None
    family: str | None = None
    domain: str | None = None

    def to_json(self) -> dict[str, Any]:
        prov = dict(self.provenance)
        return {
            "id": self.id, "instruction": self.instruction, "action": self.action.to_json(),
            "screenshot": self.screenshot, "accessibility_tree": self.accessibility_tree,
            "shell_output": self.shell_output, "source": self.source,
            "candidate_index": self.candidate_index, "label": self.label,
            "label_origin": self.label_origin, "variant": self.variant, "family": self.family,
            "domain": self.domain, "provenance": _full_provenance(prov),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Item":
        return cls(
            id=str(data["id"]), instruction=str(data["instruction"]),
            action=Action.from_json(data["action"]), source=str(data["source"]),
            candidate_index=int(data["candidate_index"]), screenshot=data.get("screenshot"),
            accessibility_tree=data.get("accessibility_tree"), shell_output=data.get("shell_output"),
            label=data.get("label"), label_origin=data.get("label_origin"),
            provenance=dict(data.get("provenance") or {}), variant=data.get("variant"),
            family=data.get("family"), domain=data.get("domain"),
        )


_PROVENANCE_KEYS: dict[str, Any] = {
    "run_dir": None, "episode": None, "variant_id": None, "step": None, "standard": None,
    "agent": None, "outcome": None, "violated": [], "first_violation_steps": None, "proposer": None,
    "reference": None, "prefix": [], "lookahead": None, "interrupt": None, "merged": [],
}
_LOOKAHEAD_KEYS = ("method", "fork_s", "elapsed_s", "violated", "success", "outcome", "evidence")
_INTERRUPT_KEYS = ("k", "rule_k", "state_changing", "clamped")


def _full_provenance(prov: dict[str, Any]) -> dict[str, Any]:
    # Same keys on every line so `datasets` infers one struct type.
    out = {key: prov.get(key, default) for key, default in _PROVENANCE_KEYS.items()}
    if out["first_violation_steps"] is not None:
        # a JSON string: invariant ids differ across items, which a struct cannot hold
        if not isinstance(out["first_violation_steps"], str):
            out["first_violation_steps"] = json.dumps(out["first_violation_steps"], sort_keys=True)
    if out["proposer"] is not None:
        proposer = out["proposer"]
        out["proposer"] = {k: proposer.get(k) for k in ("model", "mode", "task", "raw")}
    if out["lookahead"] is not None:
        out["lookahead"] = {k: out["lookahead"].get(k) for k in _LOOKAHEAD_KEYS}
    if out["interrupt"] is not None:
        out["interrupt"] = {k: out["interrupt"].get(k) for k in _INTERRUPT_KEYS}
    return out


def to_verifier_input(item: Item, items_dir: str | Path) -> VerifierInput:
    """What a verifier may see of ``item``: instruction, pre-action state, candidate action.

    The label, the source, the provenance (and the proposer's invented task in it) are
    deliberately left out: this function is the leakage guard.
    """
    screenshot = None
    if item.screenshot and not screenshots_left_out(items_dir):
        path = Path(items_dir) / item.screenshot
        try:
            screenshot = path.read_bytes()
        except OSError:
            raise ScoutError(f"item {item.id}: screenshot {path} cannot be read") from None
    return VerifierInput(instruction=item.instruction, action=item.action, screenshot=screenshot,
                         accessibility_tree=item.accessibility_tree, shell_output=item.shell_output)


def screenshots_left_out(items_dir: str | Path) -> bool:
    """A packed set published without its screenshots (``items.jsonl.gz``, no ``images/``):
    verifiers see the accessibility tree and shell output only; ``osguard items build``
    rebuilds the screenshots."""
    items_dir = Path(items_dir)
    return (not (items_dir / ITEMS_FILE).exists() and (items_dir / ITEMS_GZ).is_file()
            and not (items_dir / IMAGES_DIR).is_dir())


def _items_text(items_dir: Path) -> tuple[Path, str]:
    """The path and text of a directory's items: ``items.jsonl``, else ``items.jsonl.gz``."""
    path = items_dir / ITEMS_FILE
    packed = items_dir / ITEMS_GZ
    if not items_dir.is_dir():
        raise ScoutError(f"items directory {items_dir} does not exist")
    if path.is_file() or not packed.is_file():
        if not path.is_file():
            raise ScoutError(f"{path}: no such file (expected an items directory built by "
                             "'osguard items build', or a packed one with items.jsonl.gz)")
        return path, read_user_text(path, ScoutError)
    import gzip
    import zlib

    try:
        raw = gzip.decompress(packed.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:
        raise ScoutError(f"{packed}: not a readable gzip file ({exc})") from None
    try:
        return packed, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ScoutError(f"{packed}:{line}: file is not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None


def load_items(items_dir: str | Path) -> list[Item]:
    """Read ``ITEMS_DIR/items.jsonl`` (or, if only that is there, ``items.jsonl.gz``).

    Raises:
        ScoutError: when the directory or file is missing, or a line is not a valid item
            (every bad line is reported, with its number).
    """
    path, text = _items_text(Path(items_dir))
    items: list[Item] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            item = Item.from_json(data)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path}:{number}: not a valid item ({type(exc).__name__}: {exc})")
            continue
        if item.source not in SOURCES:
            problems.append(f"{path}:{number}: source {item.source!r} is not one of {', '.join(SOURCES)}")
        if item.label is not None and item.label not in LABELS:
            problems.append(f"{path}:{number}: label {item.label!r} is not one of {', '.join(LABELS)}")
        if item.id in seen:
            problems.append(f"{path}:{number}: duplicate item id {item.id}")
        seen.add(item.id)
        items.append(item)
    if problems:
        raise ScoutError("\n".join(problems))
    return items


def pack_items(items_dir: str | Path, out_dir: str | Path) -> Path:
    """Pack an items directory for publishing: ``OUT/items.jsonl.gz`` (the items as built,
    led by one example of every key path and type so schema-inferring readers such as
    Hugging Face ``datasets`` read it whole; gzip with a zero timestamp, so equal items give
    equal bytes) and ``OUT/build.json``.
    Screenshots stay out (``screenshot`` keeps its relative path; rebuild them with ``osguard
    items build``); annotations stay out (they are the annotators', not the set's). The
    items are validated first. Returns the packed file's path."""
    import gzip

    items_dir, out_dir = Path(items_dir), Path(out_dir)
    if not load_items(items_dir):
        raise ScoutError(f"{items_dir}: no items to pack")
    _, text = _items_text(items_dir)
    text = "".join(line + "\n" for line in _columnar_order([ln for ln in text.splitlines() if ln.strip()]))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / ITEMS_GZ
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    tmp.replace(target)
    build = items_dir / BUILD_FILE
    if build.is_file():
        write_text_atomic(out_dir / BUILD_FILE, read_user_text(build, ScoutError))
    return target


def _columnar_order(lines: list[str]) -> list[str]:
    """The lines with, first, the fewest lines that together show every key path with every
    type it ever takes (the rest after them, in their order).

    Readers that infer a schema from the first block of a JSON Lines file (Hugging Face
    ``datasets``, Arrow) fail when a key is null throughout that block and a string or an
    object later ("Couldn't cast array of type string to null"): a set ordered by source
    starts with hundreds of standard items whose look-ahead is null. Leading with one
    example of every path and type makes the first block's schema the whole file's."""
    def shapes(value: Any, path: str, out: set[tuple[str, str]]) -> set[tuple[str, str]]:
        if value is not None:
            out.add((path, type(value).__name__))
        if isinstance(value, dict):
            for key, child in value.items():
                shapes(child, f"{path}.{key}", out)
        elif isinstance(value, list):
            for child in value:
                shapes(child, f"{path}[]", out)
        return out

    seen: set[tuple[str, str]] = set()
    first: list[int] = []
    for index, line in enumerate(lines):
        new = shapes(json.loads(line), "$", set()) - seen
        if new:
            seen |= new
            first.append(index)
    chosen = set(first)
    return [lines[i] for i in first] + [line for i, line in enumerate(lines) if i not in chosen]


def write_items(items_dir: str | Path, items: list[Item]) -> Path:
    """Write ``items.jsonl`` atomically (temp file, fsync, rename). Returns its path."""
    items_dir = Path(items_dir)
    items_dir.mkdir(parents=True, exist_ok=True)
    path = items_dir / ITEMS_FILE
    write_text_atomic(path, "".join(json.dumps(item.to_json(), ensure_ascii=False) + "\n" for item in items))
    return path


def render_composition(items: list[Item], gold: dict[str, tuple[str | None, str | None]]) -> str:
    """Markdown: the paper's Table 1 layout (items, labels, mean candidate index) by
    construction source, then the same by risk family and by domain.

    Args:
        items: the items. gold: ``{item_id: (label, origin)}`` (``annotations.gold_labels``).
    """
    header = ["|{title} | # Items | Allowed | Unrelated | Unsafe | Unlabelled | Avg. cand. action index |",
              "|---|---:|---:|---:|---:|---:|---:|"]

    def row(title: str, subset: list[Item]) -> str:
        counts = {label: sum(1 for i in subset if gold[i.id][0] == label) for label in LABELS}
        unlabelled = sum(1 for i in subset if gold[i.id][0] is None)
        mean_index = sum(i.candidate_index for i in subset) / len(subset) if subset else 0
        return (f"| {title} | {len(subset)} | {counts['allowed']} | {counts['unrelated']} | "
                f"{counts['unsafe']} | {unlabelled} | {mean_index:.1f} |")

    lines = [header[0].format(title=" Source"), header[1]]
    for source in SOURCES:
        subset = [i for i in items if i.source == source]
        if subset:
            lines.append(row(SOURCE_TITLES[source], subset))
    lines.append(row("Total", items))
    for key, title in (("family", "Family"), ("domain", "Domain")):
        groups = sorted({getattr(i, key) or "(unknown)" for i in items})
        lines += ["", header[0].format(title=f" {title}"), header[1]]
        for group in groups:
            lines.append(row(group, [i for i in items if (getattr(i, key) or "(unknown)") == group]))
    return "\n".join(lines) + "\n"
