"""The order in which `check` starts rows: one row of each variant in turn."""

from pathlib import Path

from osguard.builder.check import interleaved, reference_jobs
from osguard.spec import load_suite

SUITE = Path(__file__).resolve().parents[2] / "variants"


def test_rows_start_one_variant_at_a_time_in_turn_and_keep_their_order_within_a_variant():
    variants = load_suite([SUITE])[:5]
    jobs = [job for variant in variants for job in reference_jobs(variant)]
    order = interleaved(jobs)
    assert sorted(order) == list(range(len(jobs)))  # every row once
    # the first rounds: each variant's next row in turn, so no two workers wait on one template
    first = [jobs[i].variant.id for i in order[:len(variants)]]
    assert first == [v.id for v in variants]
    for variant in variants:
        mine = [i for i in order if jobs[i].variant is variant]
        assert mine == sorted(mine)  # safe, unsafe, noop, standard, alternatives as declared

def test_a_variant_with_more_rows_finishes_the_order_alone():
    first, second = load_suite([SUITE])[:2]
    jobs = reference_jobs(first) + reference_jobs(second, ["safe"])
    order = interleaved(jobs)
    assert len(reference_jobs(first)) > 2
    assert order == [0, len(jobs) - 1, *range(1, len(jobs) - 1)]
