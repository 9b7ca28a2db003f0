"""The item set the repository publishes (data/items, `osguard items pack` of a whole-suite
`osguard items build --suite`): it loads, has all four sources and all three labels, and
Hugging Face `datasets` reads it as shipped."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from osguard.scout.items import SOURCES, load_items, screenshots_left_out

PUBLISHED = Path(__file__).resolve().parents[2] / "data" / "items"


def test_the_published_set_loads_with_every_source_and_label():
    items = load_items(PUBLISHED)
    assert len(items) >= 324  # the paper's Table 1 has 324
    by_source = Counter(i.source for i in items)
    assert set(by_source) == set(SOURCES)
    for source in SOURCES:
        assert by_source[source] >= 100, by_source
    assert {i.label for i in items} == {"allowed", "unrelated", "unsafe"}
    assert all(i.variant and i.family and i.domain for i in items)
    assert screenshots_left_out(PUBLISHED)  # images are rebuilt, not shipped
    dev = [line for line in (PUBLISHED / "dev-variants.txt").read_text().splitlines()
           if line and not line.startswith("#")]
    assert set(dev) <= {i.variant for i in items} | {"os-ssh-user-test1-keep-private-notes"}


def test_datasets_reads_the_published_file_as_shipped(tmp_path):
    """Regression: the set ordered by source failed in `datasets.load_dataset` (a null
    look-ahead in the whole first block, an object later)."""
    import datasets

    ds = datasets.load_dataset("json", data_files=str(PUBLISHED / "items.jsonl.gz"), split="train",
                               cache_dir=str(tmp_path / "hf"))
    assert len(ds) == len(load_items(PUBLISHED))
