"""Checks for lab 3's TODOs 2 and 4: shards read in parallel, in any order; the fast pipeline.

The lesson's module, `read_tfrecords`, names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    OPTIONS_ONLY_OPS,
    CheckFailed,
    DataProblem,
    dataset_ops,
    dataset_steps,
    fail,
    first_line,
    passed,
    require_dataset,
)
from utils.lab import shard_files

if TYPE_CHECKING:
    from utils.lab.storage import SimulatedStorage


def raise_if_data_problem(error: Exception, todo: int, shard_paths: Sequence[str] = ()) -> None:
    """Raises `DataProblem` naming the damaged shards when `error` comes from the data.

    TensorFlow reports a truncated or corrupted shard as `DataLossError` (or, read through
    `pipeline.checked_records`, as "Damaged shard"): that is not the learner's TODO failing.

    Args:
        error: the error the learner's code raised.
        todo: the TODO's number.
        shard_paths: the shards read, searched for the damaged ones.

    Raises:
        DataProblem: when `error` comes from a damaged shard; otherwise nothing happens.
    """
    __tracebackhide__ = True
    if not (isinstance(error, tf.errors.DataLossError) or "Damaged shard" in str(error)):
        return
    damaged = shard_files.find_damaged_shards(list(shard_paths)) if shard_paths else []
    where = "; ".join(damaged) if damaged else first_line(error)
    raise DataProblem(
        f"Not a problem of TODO {todo}: a shard is damaged (truncated or corrupted): {where}. "
        "Write the shards again (lab 2, or conversion.convert()), then run this cell again."
    ) from None


def _fail_unless_any_order(
    dataset: tf.data.Dataset, todo: int, name: str, fix: str | None = None
) -> None:
    """Fails unless `dataset`'s reads give their records in any order.

    Any order: every interleave in the graph marked `deterministic: "false"` (the
    `deterministic=False` argument), or `options.deterministic = False` on the dataset and
    no interleave marked "true". `tf.data.TFRecordDataset(paths, num_parallel_reads=16)`
    builds an interleave marked "true": it keeps the files' order whatever the options say.
    """
    __tracebackhide__ = True
    steps = dataset_steps(dataset) or []
    marks = [step.deterministic for step in steps if "Interleave" in step.op]
    if "true" in marks:
        ordered = next(s.op for s in steps if "Interleave" in s.op and s.deterministic == "true")
        fail(
            todo,
            name,
            "expected the shards read in any order; found "
            f'{ordered} marked deterministic: "true": it keeps the files\' order whatever '
            "the options say, as tf.data.TFRecordDataset(paths, num_parallel_reads=<an "
            "integer>) always does. Interleave the files instead, with deterministic=False: "
            "filenames.interleave(simulated_storage.open_tfrecord, cycle_length=..., "
            "num_parallel_calls=..., deterministic=False).",
        )
    if marks and all(mark == "false" for mark in marks):
        return
    if dataset.options().deterministic is not False:
        fail(
            todo,
            name,
            "expected the records in the order they arrive; found the files' order kept "
            f"(options.deterministic={dataset.options().deterministic}"
            f"{', an interleave() without deterministic=False' if marks else ''}): a late "
            "shard then holds up every record behind it. "
            + (
                fix
                or "Pass deterministic=False to interleave(); options set with "
                "with_options() count only on the dataset it returns, not on the one you "
                "called it on."
            ),
        )


def check_parallel_records(
    dataset: Any,
    *,
    todo: int,
    storage: SimulatedStorage,
    num_parallel_reads: int,
    num_shards: int,
    num_records: int,
    shard_paths: Sequence[str] = (),
) -> None:
    """Checks the dataset of TODO 2: every record, read from many shards at once, any order.

    A damaged shard (TensorFlow's `DataLossError`) raises `DataProblem` naming it (found
    among `shard_paths`), not a failure of the TODO.

    Args:
        dataset: what the TODO built; expected a `tf.data.Dataset` of (image, label).
        todo: the TODO's number, named in every message.
        storage: the storage the shards are read through.
        num_parallel_reads: the shards the lab asks to read at once.
        num_shards: how many shards there are.
        num_records: how many records they hold together.
        shard_paths: the shards, to name a damaged one.

    Raises:
        CheckFailed: naming the TODO, when the dataset is ordered (by its options, or by
            a reader that ignores them, such as `TFRecordDataset(paths,
            num_parallel_reads=16)`), batched, mapped sequentially, holds another count, or
            bypasses or does not overlap the storage.
        DataProblem: naming the damaged shards, when reading meets one.

    Example:
        checks.check_parallel_records(dataset, todo=2, storage=storage, num_parallel_reads=16,
                                      num_shards=16, num_records=3670)
    """
    __tracebackhide__ = True
    name = "dataset"
    expected = "a tf.data.Dataset of (image, label) read from the shards in parallel"
    require_dataset(dataset, todo, name, expected)
    _fail_unless_any_order(dataset, todo, name)
    image_spec = tf.nest.flatten(dataset.element_spec)[0]
    if image_spec.shape.rank != 3:
        fail(
            todo,
            name,
            f"expected one (image, label) per element, images of rank 3; found {image_spec}. "
            "Map read_tfrecord over the records; batching comes in TODO 4.",
        )
    ops = dataset_ops(dataset)
    if ops is not None and not any("ParallelMap" in op for op in ops):
        fail(todo, name, "expected a parallel map: pass num_parallel_calls=tf.data.AUTOTUNE.")
    storage.reset_counters()
    try:  # One more than expected at most: a dataset that repeats forever ends too.
        count = sum(1 for _ in dataset.take(num_records + 1))
    except CHECK_ERRORS as error:
        raise_if_data_problem(error, todo, shard_paths)
        fail(todo, name, f"reading it fails: {first_line(error)}")
    if count != num_records:
        more = "more than that (does it repeat?)" if count > num_records else count
        fail(todo, name, f"expected all {num_records} records, once each; found {more}.")
    wanted = max(2, min(num_parallel_reads, num_shards) // 2)
    if storage.simulated and storage.latency_ms and storage.num_requests == 0:
        fail(
            todo,
            name,
            "expected the shards read from the simulated storage; it saw no request. Open "
            "each shard with simulated_storage.open_tfrecord (it is tf.data.TFRecordDataset "
            "with the storage's wait), not tf.data.TFRecordDataset itself.",
        )
    if storage.simulated and storage.latency_ms and storage.max_in_flight < wanted:
        fail(
            todo,
            name,
            f"expected about {min(num_parallel_reads, num_shards)} shards read at once; found "
            f"at most {storage.max_in_flight}. Pass num_parallel_reads as interleave()'s "
            "cycle_length and num_parallel_calls: cycle_length alone opens that many files "
            "but reads them one after another.",
        )
    passed(todo, f"all {count} records, read in parallel, in any order.")


def _reads_in_any_order(dataset: tf.data.Dataset) -> bool:
    try:
        _fail_unless_any_order(dataset, 0, "")
    except CheckFailed:
        return False
    return True


def check_fast_dataset(dataset: Any, *, todo: int, batch_size: int, records: Any = None) -> None:
    """Checks the training pipeline: records batched, parsed a batch at a time, prefetched.

    The order of the steps is read from the dataset's graph (`dataset_ops`); where the
    graph cannot be read, only the elements and options are checked.

    Args:
        dataset: what the TODO built; expected a `tf.data.Dataset` of batches.
        todo: the TODO's number, named in every message.
        batch_size: the batch size the lab asks for.
        records: TODO 2's records, which the lab builds on: an order they keep already
            failed TODO 2, so it does not fail this TODO too (one mistake, one TODO).

    Raises:
        CheckFailed: naming the TODO, when the batches are not rank 4 or of `batch_size`,
            prefetch is not last, the parse is not a parallel map after batch, or the
            records are read in order (by the options, or by a reader that ignores them)
            where `records` read them in any order.

    Example:
        checks.check_fast_dataset(fast, todo=4, batch_size=64)
    """
    __tracebackhide__ = True
    name = "fast"
    expected = f"a tf.data.Dataset of batches of {batch_size} (image, label), prefetched"
    require_dataset(dataset, todo, name, expected)
    image_spec = tf.nest.flatten(dataset.element_spec)[0]
    if image_spec.shape.rank != 4 or image_spec.shape[0] not in (None, batch_size):
        fail(todo, name, f"expected batches of images (rank 4); found {image_spec}.")
    steps = dataset_steps(dataset) or []
    # `with_options()` after `prefetch()` adds steps that change no element: skip them.
    while len(steps) > 1 and steps[-1].op in OPTIONS_ONLY_OPS:
        steps.pop()
    ops = [step.op for step in steps]
    if ops and ops[-1] != "PrefetchDataset":
        fail(
            todo,
            name,
            f"expected prefetch(tf.data.AUTOTUNE) as the last step; the last is {ops[-1]}.",
        )
    buffer = steps[-1].constants[1] if ops and len(steps[-1].constants) > 1 else None
    if ops and buffer is not None and 0 <= buffer < 2:
        fail(
            todo,
            name,
            f"expected prefetch(tf.data.AUTOTUNE); found prefetch({buffer}). A buffer of "
            f"{buffer} batch{'es' if buffer != 1 else ''} absorbs no slow batch: when one "
            "shard answers late (this lab's storage has a long tail), the accelerator waits "
            "for it, step after step. AUTOTUNE grows the buffer while the consumer waits.",
        )
    batch = max((i for i, op in enumerate(ops) if op.startswith("BatchDataset")), default=-1)
    maps = [i for i, op in enumerate(ops) if "MapDataset" in op and i > batch >= 0]
    if ops and maps and not any("ParallelMap" in ops[i] for i in maps):
        fail(
            todo,
            name,
            "expected parse_batch in a parallel map; found a map that parses one batch at a "
            "time. Pass num_parallel_calls=tf.data.AUTOTUNE to map().",
        )
    if ops and not maps:
        fail(
            todo,
            name,
            "expected the records batched first, then parsed with parse_batch in a parallel "
            "map: records.batch(BATCH_SIZE).map(parse_batch, num_parallel_calls=AUTOTUNE).",
        )
    if not isinstance(records, tf.data.Dataset) or _reads_in_any_order(records):
        _fail_unless_any_order(
            dataset,
            todo,
            name,
            fix="Build on TODO 2's `records`, which read the shards in any order.",
        )
    images, _ = next(iter(dataset))
    if images.shape[0] != batch_size:
        fail(todo, name, f"expected batches of {batch_size}; found {images.shape[0]}.")
    fixed = ""
    if buffer is not None and buffer > 1:
        fixed = f" (a fixed buffer of {buffer}: AUTOTUNE would size it)"
    passed(todo, f"batches of {batch_size} images of {tuple(images.shape[1:])}, prefetched{fixed}.")
