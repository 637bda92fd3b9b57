"""Checks for lesson 9: a global shuffle reseeded each epoch, worker processes, a resumed iterator.

Grain is imported only by the checks themselves: the other lessons' labs import
`utils.checks` where Grain is not installed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from utils.checks._base import CHECK_ERRORS, describe, fail, first_line, passed, require_done
from utils.lab import framework_internals

if TYPE_CHECKING:
    import grain


def _key(record: bytes) -> str:
    return hashlib.sha256(record).hexdigest()


def _epoch_order(
    dataset: grain.MapDataset, epoch: int, num_records: int, index_of: dict, todo: int
) -> list:
    """The source indices of one epoch's records, in the dataset's order."""
    __tracebackhide__ = True
    name = "shuffled"
    try:
        records = [dataset[epoch * num_records + i] for i in range(num_records)]
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected to read its records by index; found an error: {first_line(error)}",
        )
    if not all(isinstance(record, bytes) for record in records):
        kinds = sorted({type(record).__name__ for record in records})
        fail(
            todo,
            name,
            f"expected the serialized records (bytes), not parsed yet; found "
            f"{', '.join(kinds)}. Parse in TODO 2, after the shuffle.",
        )
    order = [index_of.get(_key(record), -1) for record in records]
    if -1 in order or len(set(order)) != num_records:
        fail(
            todo,
            name,
            f"expected each of the {num_records} records once in epoch {epoch + 1}; found "
            f"{len(set(order) - {-1})} different ones. Shuffle before you repeat: "
            ".shuffle(seed=SEED).repeat(NUM_EPOCHS); a shuffle after repeat() mixes epochs.",
        )
    return order


def check_shuffled(
    shuffled: object,
    *,
    todo: int,
    data_source: Sequence[bytes],
    records_per_file: Sequence[int],
    num_epochs: int,
) -> None:
    """Checks `NUM_EPOCHS` epochs of the records, each globally shuffled, each in a new order.

    Args:
        shuffled: what the TODO built; expected a `grain.MapDataset` of serialized records.
        todo: the TODO's number, named in every message.
        data_source: the ArrayRecord data source the records come from.
        records_per_file: records in each ArrayRecord file, in the source's order.
        num_epochs: the epochs the lesson asks for.

    Raises:
        CheckFailed: naming the TODO, when it is not a MapDataset, has another length,
            repeats or misses records in an epoch, keeps the records' order, shuffles
            only within files or within a window, or gives every epoch the same order.

    Example:
        checks.check_shuffled(shuffled, todo=1, data_source=data_source,
                              records_per_file=[25, 25], num_epochs=2)
    """
    __tracebackhide__ = True
    import grain

    name = "shuffled"
    num_records = len(data_source)
    expected = f"a grain.MapDataset of {num_epochs} epochs of the {num_records} records"
    require_done(shuffled, todo, name, expected)
    if not isinstance(shuffled, grain.MapDataset):
        fail(
            todo,
            name,
            f"expected {expected}; found a {type(shuffled).__name__}. Start "
            "from grain.MapDataset.source(data_source): a MapDataset reads by index.",
        )
    if len(shuffled) != num_epochs * num_records:
        fail(
            todo,
            name,
            f"expected {num_epochs} epochs of {num_records} records "
            f"(.repeat(NUM_EPOCHS)), {num_epochs * num_records} in all; found "
            f"{len(shuffled)}.",
        )
    index_of = {_key(data_source[i]): i for i in range(num_records)}
    orders = [_epoch_order(shuffled, e, num_records, index_of, todo) for e in range(num_epochs)]
    first = orders[0]
    if first == sorted(first):
        fail(
            todo,
            name,
            "expected the records shuffled; found them in the files' order. "
            "Add .shuffle(seed=SEED) before .repeat(NUM_EPOCHS).",
        )
    file_of = np.searchsorted(np.cumsum(records_per_file), first, side="right")
    same_file = float(np.mean(file_of[1:] == file_of[:-1])) if num_records > 1 else 0.0
    last_quarter = {i for i in first[: num_records // 2] if i >= num_records * 3 // 4}
    if (len(records_per_file) > 1 and same_file > 0.75) or (num_records >= 8 and not last_quarter):
        fail(
            todo,
            name,
            "expected a global shuffle (any record can come next); found "
            f"{same_file:.0%} of neighbours from the same file, and "
            f"{len(last_quarter)} of the last quarter's records in epoch 1's first half: a "
            "shuffle within a file or a window. MapDataset.shuffle(seed=SEED) shuffles them all.",
        )
    repeated = [e + 1 for e in range(1, num_epochs) if orders[e] == first]
    if repeated:
        fail(
            todo,
            name,
            f"expected a new order each epoch; found epoch {repeated[0]} in epoch 1's order. "
            "repeat() reseeds the shuffle each epoch unless told reseed_each_epoch=False.",
        )
    passed(
        todo,
        f"{num_epochs} epochs of {num_records} records, each a global shuffle, each in a "
        "new order.",
    )


def _worker_count(dataset: grain.IterDataset) -> int:
    """The worker processes in a Grain dataset's graph (one prefetch per process)."""
    count, stack, seen = 0, [dataset], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        count += type(node).__name__ == "ProcessPrefetchIterDataset"
        stack.extend(framework_internals.grain_inputs(node))  # An interleave's included.
    return count


def check_loader(
    loader: object,
    *,
    todo: int,
    shuffled: object,
    batch_size: int,
    num_classes: int,
    num_workers: int,
) -> None:
    """Checks the loader: `shuffled` parsed and batched in `num_workers` worker processes.

    Args:
        loader: what the TODO built; expected a `grain.IterDataset` of batches.
        todo: the TODO's number, named in every message.
        shuffled: TODO 1's dataset, whose first records the first batch must hold.
        batch_size: the batch size the lesson asks for.
        num_classes: the one-hot label's length.
        num_workers: the worker processes the lesson asks for.

    Raises:
        CheckFailed: naming the TODO, when it is not an IterDataset, runs in no or fewer
            worker processes, gives batches of other shapes or dtypes, or a first batch
            that is not made of `shuffled`'s first records.

    Example:
        checks.check_loader(loader, todo=2, shuffled=shuffled, batch_size=64,
                            num_classes=5, num_workers=2)
    """
    __tracebackhide__ = True
    import grain

    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    name = "loader"
    expected = f"a grain.IterDataset of batches of {batch_size}, in {num_workers} worker processes"
    require_done(loader, todo, name, expected)
    if not isinstance(loader, grain.IterDataset):
        fail(
            todo,
            name,
            f"expected {expected}; found a {type(loader).__name__}. "
            "Call .to_iter_dataset() after .batch(BATCH_SIZE).",
        )
    workers = _worker_count(loader)
    if workers < num_workers:
        fail(
            todo,
            name,
            f"expected {num_workers} worker processes; found {workers}. Parsing and "
            "decoding in Python hold the GIL: end with .mp_prefetch(grain."
            "MultiprocessingOptions(num_workers=NUM_WORKERS)) (num_workers=0 starts none).",
        )
    iterator = iter(loader)
    try:
        images, labels = next(iterator)
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected batches of (images, one-hot labels); found an error: "
            f"{first_line(error)}. Map parse on the records, then batch.",
        )
    finally:
        getattr(iterator, "close", lambda: None)()
    size = images.shape[1] if np.ndim(images) == 4 else None
    wanted = ((batch_size, size, size, 3), np.uint8, (batch_size, num_classes), np.float32)
    if (np.shape(images), images.dtype, np.shape(labels), labels.dtype) != wanted:
        fail(
            todo,
            name,
            f"expected uint8 images (batch_size, h, w, 3) and float32 labels "
            f"{wanted[2]}; found {np.shape(images)} {images.dtype} and {np.shape(labels)} "
            f"{labels.dtype}.",
        )
    # Each worker takes every num_workers-th record (or batch): the first batch is made
    # of shuffled's first num_workers * batch_size records, in an order fixed at each run.
    first = {
        _key(grain_arrayrecord.parse_record(shuffled[i], num_classes=num_classes)[0].tobytes())
        for i in range(min(len(shuffled), max(workers, 1) * batch_size))
    }
    if any(_key(image.tobytes()) not in first for image in images):
        fail(
            todo,
            name,
            "expected the first batch to hold shuffled's first records; found "
            "other images. Start from shuffled (TODO 1) and map parse.",
        )
    passed(
        todo,
        f"batches of {batch_size} images and one-hot labels from shuffled's records, "
        f"in {workers} worker processes.",
    )


def _same(a: object, b: object) -> bool:
    return (
        _is_batch(a)
        and _is_batch(b)
        and len(a) == len(b)
        and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    )


def _is_batch(value: object) -> bool:
    """True for what next() on the loader gives: (images, labels), two arrays."""
    return (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(part, np.ndarray) for part in value)
    )


def _shares_arrays(a: object, b: object) -> bool:
    """True when a batch holds an array of the other batch itself (not an equal copy)."""
    arrays = lambda batch: [x for x in batch if isinstance(x, np.ndarray)]  # noqa: E731
    if not isinstance(a, tuple | list) or not isinstance(b, tuple | list):
        return False
    return any(np.shares_memory(x, y) for x in arrays(a) for y in arrays(b))


def _batches_after(loader: grain.IterDataset, state: dict, todo: int) -> tuple[object, object]:
    """The first two batches of a fresh iterator of `loader` after `set_state(state)`."""
    __tracebackhide__ = True
    iterator = iter(loader)
    try:
        iterator.set_state(state)
        return next(iterator), next(iterator)
    except (*CHECK_ERRORS, IndexError) as error:
        fail(
            todo,
            "state",
            "expected the dict iterator.get_state() returns; found one that a "
            f"fresh iterator of loader cannot restore ({type(error).__name__}: "
            f"{first_line(error)}). Take state = iterator.get_state().",
        )
    finally:
        getattr(iterator, "close", lambda: None)()


def check_resumed(
    resumed_batch: object,
    *,
    todo: int,
    state: object,
    next_batch: object,
    first_batch: object,
    loader: object,
    further_batch: object = None,
) -> None:
    """Checks the resume: `state` restored into a fresh iterator of `loader` gives the
    batch that followed it, and `resumed_batch` is that batch.

    Args:
        resumed_batch: the first batch of a fresh iterator after `set_state(state)`.
        todo: the TODO's number, named in every message.
        state: what `get_state()` returned, after two batches.
        next_batch: the batch the first iterator gave right after its state was saved.
        first_batch: the loader's first batch (what a fresh iterator gives unrestored).
        loader: TODO 2's loader; the check restores `state` into a fresh iterator of it.
        further_batch: the batch `resumed` gave after `resumed_batch`; when given, it must
            be the restored order's second batch, which a copy of `next_batch` beside an
            iterator that was never restored cannot give.

    Raises:
        CheckFailed: naming the TODO, when a result is missing or not a batch, the state
            is not `get_state()`'s dict (a fresh iterator of `loader` cannot restore it) or
            a fresh iterator's, the state was saved but not restored, the resumed batch
            is `next_batch` itself, or either batch is not the one that follows the state.

    Example:
        checks.check_resumed(resumed_batch, todo=3, state=state, next_batch=next_batch,
                             first_batch=first_batch, loader=loader)
    """
    __tracebackhide__ = True
    name = "resumed_batch"
    for value, what in ((state, "state"), (next_batch, "next_batch"), (resumed_batch, name)):
        require_done(value, todo, what, "the iterator's state and the batches around it")
    if not isinstance(state, dict):
        fail(
            todo,
            "state",
            f"expected the dict iterator.get_state() returns; found a {type(state).__name__}.",
        )
    if not state:
        fail(
            todo,
            "state",
            "expected the dict iterator.get_state() returns, saved after two "
            "batches; found an empty dict, which restores nothing. Take state = "
            "iterator.get_state().",
        )
    for value, what in ((next_batch, "next_batch"), (resumed_batch, name)):
        if not _is_batch(value):
            fail(
                todo,
                what,
                "expected a batch (images, labels), as next() on an iterator of "
                f"loader gives; found {describe(value)}.",
            )
    if resumed_batch is next_batch or _shares_arrays(resumed_batch, next_batch):
        fail(
            todo,
            name,
            "expected the first batch of `resumed`, a fresh iterator after "
            "resumed.set_state(state); found next_batch itself (the same arrays), which "
            "shows nothing restored. Take resumed_batch = next(resumed).",
        )
    expected, expected_further = _batches_after(loader, state, todo)
    if _same(expected, first_batch):
        fail(
            todo,
            "state",
            "expected the state after two batches of iterator; found a fresh "
            "iterator's (restored, it gives the loader's first batch). Take state = "
            "iterator.get_state() after first_batch and second_batch.",
        )
    if not _same(resumed_batch, expected):
        if _same(resumed_batch, first_batch):
            fail(
                todo,
                name,
                "expected the batch that followed the saved state; found the "
                "loader's first batch: the state was saved but not restored. Call "
                "resumed.set_state(state) before next(resumed).",
            )
        fail(
            todo,
            name,
            "expected the batch a fresh iterator of loader gives after "
            "set_state(state); found another batch. Take resumed_batch = next(resumed) "
            "right after resumed.set_state(state).",
        )
    if not _same(next_batch, expected):
        fail(
            todo,
            "next_batch",
            "expected the batch that follows the saved state; found "
            "another batch. Save the state with get_state() right before "
            "next_batch = next(iterator).",
        )
    if further_batch is not None and not _same(further_batch, expected_further):
        fail(
            todo,
            "resumed",
            "expected next(resumed) after resumed_batch to give the batch after it in the "
            "restored order; found another batch: `resumed` was not restored. Make resumed = "
            "iter(loader), then resumed.set_state(state).",
        )
    passed(todo, "the resumed iterator gave the batch that followed the saved state.")
