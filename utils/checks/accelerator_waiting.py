"""Checks for lesson 5: the input that costs nothing, and a feed that keeps a step busy.

The in-memory input is read for a few batches and compared with the feed it stands in
for. The learner's feed is timed feeding the stand-in accelerator, in turns with the naive
feed, on a step twice as long as the naive feed takes to make a batch: whatever the
machine's speed, and with other work on it, a feed that makes its batches while the step
runs keeps the stand-in busy, and the naive feed keeps it waiting half of each step.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import tensorflow as tf

from utils import comparison
from utils.checks._base import CHECK_ERRORS, dataset_ops, fail, first_line, passed, require_dataset
from utils.lessons.accelerator_waiting.accelerator_wait import SimulatedAccelerator

# The stand-in's step in the check of a feed: this many times the naive feed's time to make
# a batch. The feed passes when the stand-in waits at most MAX_IDLE_SHARE of a step for its
# batches and at most MAX_IDLE_OF_NAIVE times as long as for the naive feed's (which makes
# each batch while the stand-in waits: half a step).
STEP_OVER_MAKING = 2
MAX_IDLE_SHARE = 0.25
MAX_IDLE_OF_NAIVE = 0.5


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
    """A hint from the feed's graph: the step a feed that keeps up usually has and it lacks."""
    ops = dataset_ops(feed) or []
    parallel = any(op.startswith(("ParallelMap", "MapAndBatch")) for op in ops)
    if not parallel:
        return "Decode in parallel: `map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)`."
    if not ops or not ops[-1].startswith("Prefetch"):
        return "Make the next batches while the step runs: `prefetch(tf.data.AUTOTUNE)` last."
    return "Decode in parallel before the batch, and prefetch last."


def check_feed_keeps_up(
    feed: tf.data.Dataset,
    *,
    todo: int,
    naive: tf.data.Dataset,
    num_rounds: int = 5,
) -> None:
    """Checks that `feed` keeps the stand-in accelerator busy where the naive feed does not.

    First the naive feed's time to make one batch is measured (a stand-in whose step takes
    no time waits that long). Then a stand-in whose step lasts `STEP_OVER_MAKING` times that
    is fed by the naive feed and by `feed`, in turns: `feed` passes when it kept the
    stand-in waiting at most `MAX_IDLE_SHARE` of a step and at most `MAX_IDLE_OF_NAIVE`
    times as long as the naive feed did (medians over the rounds).

    Args:
        feed: the learner's dataset.
        todo: the TODO's number, named in every message.
        naive: the naive feed, whose batches `feed`'s must match.
        num_rounds: rounds of both feeds, taken in turns.

    Raises:
        CheckFailed: naming the TODO, when `feed` is not a dataset, its batches differ in
            shape or dtype from the naive feed's, it gives one batch over and over, it
            ends or raises, or the stand-in waits longer than that for it.

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
    try:
        steps = dict(batch_size=1, num_steps=16, num_warmup_steps=4)
        at_once = SimulatedAccelerator(images_per_second=1e9, **steps)  # A step of 1 ns.
        making_seconds = at_once.run(naive, label="naive").idle_ms_per_step / 1000
        step_seconds = STEP_OVER_MAKING * max(making_seconds, 1e-4)
        timed = SimulatedAccelerator(images_per_second=1 / step_seconds, **steps)
        with contextlib.redirect_stdout(io.StringIO()):
            comparison.measure_in_turns(
                timed.candidates({"naive": naive, "feed": feed}), repeats=num_rounds
            )
    except (*CHECK_ERRORS, StopIteration) as error:
        fail(todo, name, f"expected {expected}; reading it raised: {first_line(error)}")
    idle = {label: runs.median for label, runs in timed.idle_runs().items()}
    step_ms = 1000 * timed.step_seconds
    if idle["feed"] > min(MAX_IDLE_SHARE * step_ms, MAX_IDLE_OF_NAIVE * idle["naive"]):
        fail(
            todo,
            name,
            f"expected the stand-in, its step {step_ms:.1f} ms (twice as long as the naive "
            f"feed takes to make a batch), to wait at most {MAX_IDLE_SHARE:.0%} of a step "
            "for each of your batches, and at most half as long as for the naive feed's; "
            f"it waited {idle['feed']:.1f} ms for yours, {idle['naive']:.1f} ms for the "
            f"naive feed's (medians of {num_rounds} rounds). {_what_is_missing(feed)}",
        )
    passed(
        todo,
        "the stand-in, its step twice as long as the naive feed takes to make a batch, "
        f"waited under {MAX_IDLE_SHARE:.0%} of a step for your batches, under half as long "
        "as for the naive feed's.",
    )
