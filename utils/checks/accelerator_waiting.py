"""Checks for lesson 5: the input that costs nothing, and a verdict read from two ranges.

The in-memory input is read for a few batches and compared with the pipeline it stands in
for; the verdict is tried on pairs of ranges, among them one that the ranges alone and one
that the medians alone would judge wrongly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from utils.checks._base import CHECK_ERRORS, fail, first_line, passed, require_dataset
from utils.comparison import WITHIN_NOISE, RepeatedResult, spread

# Runs of a candidate and a baseline (images/s, one per round) and the verdict each pair
# must get with a `min_effect` of 10%. The third pair is 5% apart with separate ranges: a
# verdict from the ranges alone fails it. The fourth is 30% apart with overlapping ranges:
# a verdict from the medians alone fails it. The last one's ranges touch.
VERDICT_CASES = (
    ((125, 130, 135, 128, 132), (95, 100, 105, 98, 102), "faster"),
    ((65, 70, 75, 68, 72), (95, 100, 105, 98, 102), "slower"),
    ((104, 105, 106, 105, 104), (99, 100, 101, 100, 99), WITHIN_NOISE),
    ((95, 130, 140, 131, 129), (90, 100, 105, 99, 101), WITHIN_NOISE),
    ((120, 130, 140), (90, 100, 120), WITHIN_NOISE),
)


def check_in_memory(
    in_memory: tf.data.Dataset, *, todo: int, pipeline: tf.data.Dataset, num_batches: int = 3
) -> None:
    """Checks `in_memory`: endless, batches like `pipeline`'s, one batch over and over.

    Args:
        in_memory: the learner's dataset.
        todo: the TODO's number, named in every message.
        pipeline: the pipeline it stands in for (its element spec is compared).
        num_batches: batches read from `in_memory`, which must all be equal.

    Raises:
        CheckFailed: naming the TODO, when `in_memory` is not a dataset, ends, holds
            batches of another shape or dtype, or gives different batches.

    Example:
        checks.check_in_memory(in_memory, todo=1, pipeline=uncached)
    """
    __tracebackhide__ = True
    name = "in_memory"
    expected = "one batch of the pipeline, held in memory and repeated without end"
    require_dataset(in_memory, todo, name, f"a tf.data.Dataset: {expected}")
    wanted, found = pipeline.element_spec, in_memory.element_spec
    try:
        tf.nest.assert_same_structure(wanted, found)
        same = all(
            w.dtype == f.dtype and w.shape.is_compatible_with(f.shape)
            for w, f in zip(tf.nest.flatten(wanted), tf.nest.flatten(found), strict=True)
        )
    except (TypeError, ValueError):
        same = False
    if not same:
        fail(todo, name, f"expected elements like the pipeline's {wanted}; found {found}.")
    cardinality = int(in_memory.cardinality())
    if cardinality != tf.data.INFINITE_CARDINALITY:
        fail(
            todo,
            name,
            f"expected an endless dataset (training reads it for many steps); found one that "
            f"ends after {cardinality} batch(es). Add `.repeat()`.",
        )
    try:
        batches = list(in_memory.take(num_batches).as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}; reading it raised: {first_line(error)}")
    first = batches[0]
    for batch in batches[1:]:
        if not all(np.array_equal(a, b) for a, b in zip(first, batch, strict=True)):
            fail(
                todo,
                name,
                f"expected the same batch again and again (an input that costs nothing); found "
                f"different batches in the first {num_batches}: it still reads and decodes. "
                "Take one batch with `next(iter(...))` and repeat it with "
                "`tf.data.Dataset.from_tensors(batch).repeat()`.",
            )
    shapes = ", ".join(str(tuple(part.shape)) for part in first)
    passed(todo, f"one batch of {shapes}, repeated without end.")


def check_verdict(verdict: Callable, *, todo: int, min_effect: float = 0.1) -> None:
    """Checks `verdict(candidate, baseline, min_effect=, faster=, slower=)` on pairs of ranges.

    Args:
        verdict: the learner's function.
        todo: the TODO's number, named in every message.
        min_effect: the smallest difference between medians that counts (the cases are
            made for 0.1).

    Raises:
        CheckFailed: naming the TODO and the runs, when the verdict is not `faster` (or
            `slower`) for a pair at least `min_effect` apart with separate ranges, and
            `WITHIN_NOISE` for any other.

    Example:
        checks.check_verdict(verdict, todo=2, min_effect=comparison.MIN_EFFECT)
    """
    __tracebackhide__ = True
    name = "verdict"
    for candidate_runs, baseline_runs, wanted in VERDICT_CASES:
        candidate = RepeatedResult("candidate", tuple(map(float, candidate_runs)))
        baseline = RepeatedResult("baseline", tuple(map(float, baseline_runs)))
        try:
            found = verdict(
                candidate, baseline, min_effect=min_effect, faster="faster", slower="slower"
            )
        except CHECK_ERRORS as error:
            fail(todo, name, f"expected a verdict; found an error: {first_line(error)}")
        if found is Ellipsis or found is None:
            fail(
                todo,
                name,
                f"not done yet: it returns {found!r}. Expected `faster`, `slower` or "
                "comparison.WITHIN_NOISE.",
            )
        if found != wanted:
            fail(
                todo,
                name,
                f"for a candidate's runs {spread(candidate.values)} against a baseline's "
                f"{spread(baseline.values)}, expected {wanted!r}; found {found!r}. Beyond the "
                f"noise takes both: medians at least {min_effect:.0%} apart and ranges that do "
                "not overlap; otherwise comparison.WITHIN_NOISE.",
            )
    passed(
        todo,
        f"{len(VERDICT_CASES)} pairs of ranges judged: faster, slower, and within the noise "
        "(too close, or overlapping).",
    )
