"""Checks for lesson 5: the input that costs nothing, and a verdict read from a range.

The in-memory input is read for a few batches and compared with the pipeline it stands in
for; the verdict is tried on ranges that lie above, below and across the tolerance,
among them one whose median alone would give the wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from utils.accelerator_wait import NOISE_VERDICT
from utils.checks._base import CHECK_ERRORS, fail, first_line, passed, require_dataset
from utils.comparison import RepeatedResult

# Ratios (one per round) and the verdict each must get against a tolerance of 1.10. The
# third's median (1.30) is beyond the tolerance while its range is not: a median-only
# verdict fails it. The last two sit on the tolerance: at most 1.10 is "the same".
VERDICT_CASES = (
    ((1.31, 1.42, 1.25, 1.38, 1.33), "above"),
    ((0.97, 1.04, 1.01, 0.99, 1.06), "below"),
    ((1.00, 1.30, 1.02, 1.30, 1.30), "noise"),
    ((1.02, 1.12, 1.05), "noise"),
    ((1.10, 1.10, 1.08), "below"),
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


def check_verdict(verdict: Callable, *, todo: int, tolerance: float = 1.1) -> None:
    """Checks `verdict(ratio, tolerance=, above=, below=)` on ranges around the tolerance.

    Args:
        verdict: the learner's function.
        todo: the TODO's number, named in every message.
        tolerance: the tolerance the cases are judged against.

    Raises:
        CheckFailed: naming the TODO and the range, when the verdict is not `above` for a
            range wholly beyond the tolerance, `below` for one wholly at or under it, and
            `NOISE_VERDICT` for one across it.

    Example:
        checks.check_verdict(verdict, todo=2)
    """
    __tracebackhide__ = True
    name = "verdict"
    words = {"above": "slower", "below": "the same", "noise": NOISE_VERDICT}
    for values, outcome in VERDICT_CASES:
        ratio = RepeatedResult("step time, fed / in memory", values)
        try:
            found = verdict(ratio, tolerance=tolerance, above="slower", below="the same")
        except CHECK_ERRORS as error:
            fail(todo, name, f"expected a verdict; found an error: {first_line(error)}")
        if found is Ellipsis or found is None:
            fail(
                todo,
                name,
                f"not done yet: it returns {found!r}. Expected `above`, `below` or NOISE_VERDICT.",
            )
        if found != words[outcome]:
            fail(
                todo,
                name,
                f"for ratios {ratio.minimum:.2f}-{ratio.maximum:.2f} (median "
                f"{ratio.median:.2f}) against a tolerance of {tolerance:.2f}, expected "
                f"{words[outcome]!r}; found {found!r}. A verdict needs the whole range on one "
                "side: every ratio above the tolerance, or every one at or under it; "
                "otherwise NOISE_VERDICT.",
            )
    passed(
        todo, f"{len(VERDICT_CASES)} ranges judged: above, at or under, and across the tolerance."
    )
