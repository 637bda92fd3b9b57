"""Tests of utils/comparison.py's verdicts: the course's one rule, in three words."""

import dataclasses

import pytest
import tensorflow as tf

from utils import comparison


def _runs(*values, busy=None, cores=2):
    return comparison.RepeatedResult(
        "runs", tuple(float(v) for v in values), busy, cores if busy is not None else None
    )


@pytest.mark.parametrize(
    "candidate, baseline, said",
    [
        (_runs(125, 130, 135), _runs(95, 100, 105), "beyond the noise: faster"),
        (_runs(65, 70, 75), _runs(95, 100, 105), "beyond the noise: slower"),
        (
            _runs(104, 105, 106),
            _runs(99, 100, 101),
            "small but consistent (under 10%): faster",
        ),
        (_runs(96, 97, 98), _runs(99, 100, 101), "small but consistent (under 10%): slower"),
        (
            _runs(104, 105, 106),
            _runs(100, 104, 98),
            "not resolved in 3 rounds (the ranges overlap)",
        ),
        (
            _runs(120, 130, 140),
            _runs(90, 100, 120),
            "not resolved in 3 rounds (the ranges overlap)",
        ),
        (
            _runs(150, 160, 170, 180, 300),
            _runs(100, 110, 120, 130, 160),
            "not resolved in 5 rounds (the ranges overlap)",
        ),
    ],
    ids=[
        "30% faster, ranges apart",
        "30% slower, ranges apart",
        "5% faster, ranges apart",
        "3% slower, ranges apart",
        "5% apart, ranges overlap",
        "30% apart, ranges touch",
        "1.45x apart, one round overlaps",
    ],
)
def test_verdict_says_one_of_three(candidate, baseline, said):
    assert comparison.verdict(candidate, baseline) == said


def test_verdict_never_calls_a_large_ratio_within_the_noise():
    # Issue 50, item 6: 0.71x and 1.29x with overlapping ranges were "within the noise".
    for candidate, baseline in [
        (_runs(156, 164, 208), _runs(174, 230, 236)),
        (_runs(194, 194, 197), _runs(147, 151, 226)),
    ]:
        said = comparison.verdict(candidate, baseline)
        assert said == "not resolved in 3 rounds (the ranges overlap)"
        assert "within the noise" not in said


def test_verdict_says_the_words_given_and_takes_another_threshold():
    faster, slower = _runs(104, 105, 106), _runs(99, 100, 101)
    words = {"faster": "pays", "slower": "costs"}
    assert comparison.verdict(faster, slower, min_effect=0.03, **words) == "beyond the noise: pays"
    assert comparison.verdict(slower, faster, min_effect=0.03, **words) == (
        "beyond the noise: costs"
    )
    assert comparison.verdict(slower, faster, **words) == "small but consistent (under 10%): costs"


def test_verdict_judges_nothing_where_other_processes_took_the_cores():
    # Issue 50, item 6: a verdict must not turn over with the machine's load.
    busy = _runs(65, 70, 75, busy=0.62)
    said = comparison.verdict(busy, _runs(95, 100, 105))
    assert said == "not judged: other processes kept 0.62 of 2 cores busy during these rounds"
    quiet = _runs(65, 70, 75, busy=0.1)  # Up to a tenth of the cores: judged.
    assert comparison.verdict(quiet, _runs(95, 100, 105)) == "beyond the noise: slower"


def test_measure_in_turns_keeps_the_load_with_every_result():
    runs = comparison.measure_in_turns({"a": lambda: 1.0, "b": lambda: 2.0}, repeats=2)
    for result in runs.values():
        assert result.others_busy_cores >= 0 and result.num_cores >= 1
    # The busier of the two is kept (a run this short measures the load it met, any value).
    share = comparison.ratio_in_turns(
        dataclasses.replace(runs["a"], others_busy_cores=1),
        dataclasses.replace(runs["b"], others_busy_cores=9),
    )
    assert share.others_busy_cores == 9 and share.values == (0.5, 0.5)


def test_describe_difference_in_three_words():
    fast = comparison.RepeatedResult("16 reads", (900.0, 1000.0, 950.0))
    slow = comparison.RepeatedResult("1 read", (400.0, 500.0, 450.0))
    assert comparison.describe_difference({"a": slow, "b": fast}, name="reads") == (
        "reads: 16 reads is 2.11x 1 read (medians 950 and 450 images/s; ranges 900-1,000 and "
        "400-500 over 3 rounds in turns): beyond the noise."
    )
    touching = comparison.RepeatedResult("1 read", (400.0, 900.0, 450.0))
    assert comparison.describe_difference([fast, touching], name="reads").endswith(
        "): not resolved in 3 rounds (the ranges overlap)."
    )
    close = comparison.RepeatedResult("8 reads", (890.0, 895.0, 880.0))  # 7% apart, separate.
    assert comparison.describe_difference([fast, close], name="reads") == (
        "reads: 16 reads is 1.07x 8 reads (medians 950 and 890 images/s; ranges "
        "900-1,000 and 880-895 over 3 rounds in turns): small but consistent (every round of "
        "one beat every round of the other, by less than 10%)."
    )
    loaded = dataclasses.replace(slow, others_busy_cores=1.5, num_cores=2)
    assert comparison.describe_difference([fast, loaded], name="reads").endswith(
        "): not judged: other processes kept 1.50 of 2 cores busy during these rounds."
    )
    with pytest.raises(ValueError, match="at least two settings. Received: 1"):
        comparison.describe_difference([fast], name="reads")


class _IdleWatch:
    """Stands in for `machine_load.LoadWatch`: nothing else ran."""

    other_cores, num_cores = 0.0, 2

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def test_compare_in_turns_judges_each_pipeline_against_the_one_before(monkeypatch, capsys):
    rates = {10: iter([10.0, 12.0, 11.0]), 20: iter([50.0, 60.0, 55.0]), 30: iter([54, 57, 58])}
    timed = []

    def timer(dataset, *, num_images):
        timed.append((list(dataset.as_numpy_iterator()), num_images))
        return lambda: float(next(rates[num_images]))

    monkeypatch.setattr(comparison.timing, "throughput_timer", timer)
    monkeypatch.setattr(comparison.machine_load, "LoadWatch", _IdleWatch)
    # A file that does not decode is skipped, not an error that stops the comparison.
    failing = tf.data.Dataset.from_tensor_slices(["1", "x"]).map(tf.strings.to_number)
    runs = comparison.compare_in_turns(
        {"one": (failing, 10), "many": (failing, 20), "many, any order": (failing, 30)},
        repeats=3,
    )
    assert timed == [([1.0], 10), ([1.0], 20), ([1.0], 30)]
    assert [result.values for result in runs.values()] == [
        (10.0, 12.0, 11.0),
        (50.0, 60.0, 55.0),
        (54.0, 57.0, 58.0),
    ]
    assert capsys.readouterr().out.splitlines() == [
        "one: 11 (10-12, 3 runs) images/s, taken in turns",
        "many: 55 (50-60, 3 runs) images/s, taken in turns",
        "many, any order: 57 (54-58, 3 runs) images/s, taken in turns",
        "many is 5.00x one (5.00-5.00x round by round): beyond the noise: faster.",
        "many, any order is 1.05x many (0.95-1.08x round by round): not resolved in 3 rounds "
        "(the ranges overlap).",
    ]
    with pytest.raises(ValueError, match=r"at least two. Received: \['one'\]"):
        comparison.compare_in_turns({"one": (failing, 10)})
