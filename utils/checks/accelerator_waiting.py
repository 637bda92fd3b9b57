"""Checks for lesson 5: the input that costs nothing, and a feed that keeps a step busy.

The in-memory input is read for a few batches and compared with the feed it stands in
for. The learner's feed is judged by what the machine's load cannot change: its batches
(new ones, like the naive feed's) and its graph, which says whether images are decoded
several at once before the batch and batches made ahead of the step (a prefetch last).
A timing would turn with the machine's load: a right feed failed under other jobs' load.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    OPTIONS_ONLY_OPS,
    dataset_steps,
    fail,
    first_line,
    passed,
    require_dataset,
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


def _same_batches(wanted: tf.TypeSpec | tuple | dict, found: tf.TypeSpec | tuple | dict) -> bool:
    """Whether two element specs are alike: structure, dtypes and fully equal shapes."""
    try:
        tf.nest.assert_same_structure(wanted, found)
    except (TypeError, ValueError):
        return False
    pairs = zip(tf.nest.flatten(wanted), tf.nest.flatten(found), strict=True)
    return all(w.dtype == f.dtype and w.shape == f.shape for w, f in pairs)


def _what_is_missing(feed: tf.data.Dataset) -> str:
    """The step a feed that keeps up has and this one lacks, read from its graph.

    Returns:
        The fix ("Decode in parallel: ...", or "... prefetch ... last"); "" when the feed
        decodes in parallel before the batch and prefetches last, or its graph is unread.
    """
    steps = dataset_steps(feed)
    if steps is None:
        return ""
    kept = [step for step in steps if step.op not in OPTIONS_ONLY_OPS]
    batches = [i for i, step in enumerate(kept) if "Batch" in step.op]
    first_batch = batches[0] if batches else len(kept)
    # A parallel map's last input is its num_parallel_calls; a fused map-and-batch's, the
    # one before drop_remainder.
    calls = [
        step.constants[-2] if step.op.startswith("MapAndBatch") else step.constants[-1]
        for step in kept[: first_batch + 1]
        if step.op.startswith(("ParallelMap", "MapAndBatch")) and len(step.constants) > 1
    ]
    parallel = any(number not in (0, 1) for number in calls)
    if not parallel:
        return (
            "Decode in parallel: `map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)`, "
            "then batch and prefetch."
        )
    last = kept[-1] if kept else None
    if last is None or not last.op.startswith("Prefetch") or last.constants[-1] == 0:
        return "Make the next batches while the step runs: `prefetch(tf.data.AUTOTUNE)` last."
    return ""


def check_feed_keeps_up(feed: tf.data.Dataset, *, todo: int, naive: tf.data.Dataset) -> None:
    """Checks that `feed` gives the naive feed's batches, decoded in parallel, made ahead.

    Judged by what load cannot change: its batches (shapes, new ones) and its graph (a
    parallel map before the batch, a prefetch last). A prefetch alone makes one batch at a
    time, ahead: it keeps up only with a step longer than a batch's decoding, which an
    accelerator's step is not.

    Args:
        feed: the learner's dataset.
        todo: the TODO's number, named in every message.
        naive: the naive feed, whose batches `feed`'s must match.

    Raises:
        CheckFailed: naming the TODO, when `feed` is not a dataset, its batches differ in
            shape or dtype from the naive feed's, it gives one batch over and over, it
            ends or raises, or it decodes one image at a time or makes nothing ahead.

    Example:
        checks.check_feed_keeps_up(feed, todo=2, naive=naive_feed)
    """
    __tracebackhide__ = True
    name = "feed"
    expected = "a tf.data.Dataset of the naive feed's batches that keeps the accelerator busy"
    require_dataset(feed, todo, name, expected)
    if not _same_batches(naive.element_spec, feed.element_spec):
        shapes = lambda spec: ", ".join(str(tuple(s.shape)) for s in tf.nest.flatten(spec))  # noqa: E731
        fail(
            todo,
            name,
            f"expected batches like the naive feed's, {shapes(naive.element_spec)}; found "
            f"{shapes(feed.element_spec)}. Batch the decoded images as the naive feed does, "
            "every batch full (`drop_remainder=True`).",
        )
    try:
        batches = list(feed.take(2).as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}; reading it raised: {first_line(error)}")
    if len(batches) < 2 or all(
        np.array_equal(a, b) for a, b in zip(batches[0], batches[1], strict=True)
    ):
        fail(
            todo,
            name,
            "expected new batches from the shards; found the same batch again (an input "
            "that costs nothing, as TODO 1's). Build the feed from "
            "`read_shards(shard_names)` and `read_tfrecord`.",
        )
    missing = _what_is_missing(feed)
    if missing:
        fail(
            todo,
            name,
            "expected images decoded several at once and batches made ahead of the step; "
            f"found a feed that lacks one. {missing}",
        )
    passed(todo, "new batches, decoded in parallel and made ahead of the step (prefetch last).")
