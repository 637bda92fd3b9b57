"""Checks for lab 3: parse a record (TODO 1); read many shards at once, in any order (TODO 2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from utils import records, shard_files
from utils.checks._base import (
    CHECK_ERRORS,
    DataProblem,
    dataset_steps,
    describe,
    fail,
    first_line,
    passed,
    require_dataset,
    require_result,
)

if TYPE_CHECKING:
    from utils.lab.shard_cache import ShardSet
    from utils.storage import SimulatedStorage


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


def _fail_unless_any_order(dataset: tf.data.Dataset, todo: int, name: str) -> None:
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
            f'{ordered} marked deterministic: "true", as TFRecordDataset(paths, '
            "num_parallel_reads=<an integer>) makes: it keeps the files' order whatever the "
            "options say. Interleave the files yourself, with deterministic=False.",
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
            "shard holds up the records behind it. Pass deterministic=False to interleave() "
            "(with_options() counts only on the dataset it returns).",
        )


def _sample_records(shard_paths: Sequence[str], count: int, todo: int) -> list[bytes]:
    """The first `count` records of the first shard; a damaged shard is a `DataProblem`."""
    __tracebackhide__ = True
    try:
        records = tf.data.TFRecordDataset(list(shard_paths)[:1]).take(count)
        return list(records.as_numpy_iterator())
    except tf.errors.OpError as error:
        raise_if_data_problem(error, todo, list(shard_paths)[:1])
        raise


def _expected_pairs(serialized: Sequence[bytes]) -> tuple[list[np.ndarray], list[int]]:
    parsed = [records.parse_record(tf.constant(r)) for r in serialized]
    images = [tf.io.decode_jpeg(p["image"], channels=3).numpy() for p in parsed]
    return images, [int(p["class"]) for p in parsed]


def _parsed_values(value: Any) -> np.ndarray:
    """A parsed feature's values, dense: a sparse tensor's values, a dense tensor's own."""
    if isinstance(value, tf.SparseTensor):
        return value.values.numpy()
    return np.asarray(value.numpy())


def _check_features(
    features: dict, serialized: bytes, todo: int, name: str, num_classes: int
) -> None:
    """Judges `features` by what it parses a real record (and one without "size") into.

    Any spec that parses to the right values passes: `VarLenFeature(tf.float32)` or
    `FixedLenFeature([num_classes], tf.float32)` for the one-hot label alike.
    """
    __tracebackhide__ = True
    specs = (tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.FixedLenSequenceFeature)
    for key in ("image", "one_hot_class"):
        if key not in features:
            fail(todo, name, f"expected features[{key!r}]: the record's {key}; found no such key.")
    wrong = [key for key, spec in features.items() if not isinstance(spec, specs)]
    if wrong:
        found = type(features[wrong[0]]).__name__
        fail(
            todo,
            name,
            f"expected features[{wrong[0]!r}] to be a tf.io feature (FixedLenFeature or "
            f"VarLenFeature); found a {found}.",
        )
    try:
        parsed = tf.io.parse_single_example(serialized, features)
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected a record to parse with `features`; found: {first_line(error)}")
    expected_values = records.parse_record(tf.constant(serialized))
    image = parsed["image"]
    if isinstance(image, tf.SparseTensor) or image.dtype != tf.string or image.shape.rank != 0:
        fail(
            todo,
            name,
            "expected features['image'] to parse to one string (the JPEG bytes); found "
            f"{describe(image)}. Declare it FixedLenFeature([], tf.string).",
        )
    label = _parsed_values(parsed["one_hot_class"])
    right_label = _parsed_values(expected_values["one_hot_class"])
    if (
        label.dtype != np.float32
        or label.size != num_classes
        or not np.allclose(label.ravel(), right_label.ravel())
    ):
        fail(
            todo,
            name,
            f"expected features['one_hot_class'] to parse to {num_classes} float32 values; "
            f"found {label.size} of {label.dtype}. VarLenFeature(tf.float32) or "
            f"FixedLenFeature([{num_classes}], tf.float32) both do.",
        )
    without_size = records.to_example(b"", 0, [1, 1], ["a"] * num_classes)
    del without_size.features.feature["size"]
    try:
        tf.io.parse_single_example(without_size.SerializeToString(), features)
    except CHECK_ERRORS:
        fail(
            todo,
            name,
            "expected records written without 'size' to parse too; found they fail. Give "
            "features['size'] a default_value, such as [0, 0].",
        )


def check_read_tfrecord(
    read_tfrecord: Callable, features: Any, *, todo: int, shards: ShardSet
) -> None:
    """Checks `features` (the parsing spec) and `read_tfrecord(serialized) -> (image, one_hot)`.

    Args:
        read_tfrecord: the learner's function, run eagerly once, then in `Dataset.map`.
        features: the learner's parsing spec; expected a dict of `tf.io` features.
        todo: the TODO's number, named in every message.
        shards: the shards (`shard_cache.ensure_shards`): the first records of the first
            one are parsed; the images are `shards.target_size` square, the one-hot
            labels as long as `shards.class_names`.

    Raises:
        CheckFailed: naming the TODO, when the spec misses a feature or a default, the
            shapes are not static, or the images or labels differ from the records'.
        DataProblem: when the first shard is damaged (not the TODO's fault).

    Example:
        checks.check_read_tfrecord(read_tfrecord, features, todo=1, shards=shards)
    """
    __tracebackhide__ = True
    name = "read_tfrecord"
    target_size, num_classes = shards.target_size, len(shards.class_names)
    if features is Ellipsis or read_tfrecord is Ellipsis:
        fail(todo, name, "not done yet: features is still ... (Ellipsis). Expected a dict.")
    if not isinstance(features, dict):
        fail(todo, name, f"expected `features` to be a dict; found a {type(features).__name__}.")
    serialized = _sample_records(shards.paths, 8, todo)
    _check_features(features, serialized[0], todo, name, num_classes)
    expected = f"(uint8 image of shape ({target_size}, {target_size}, 3), one-hot label)"
    try:
        result = read_tfrecord(tf.constant(serialized[0]))
        require_result(result, todo, name, expected)
        pairs = tf.data.Dataset.from_tensor_slices(serialized).map(read_tfrecord)
        found = list(pairs.as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}; found an error: {first_line(error)}")
    image_spec, label_spec = tf.nest.flatten(pairs.element_spec)[:2]
    if image_spec.dtype != tf.uint8 or image_spec.shape != (target_size, target_size, 3):
        fail(
            todo,
            name,
            f"expected images of static shape ({target_size}, {target_size}, 3) and dtype "
            f"uint8; found {image_spec}. Decode with channels=3, then tf.reshape to that shape "
            "so that Keras and the TPU know the shape before running.",
        )
    if label_spec.shape != (num_classes,) or label_spec.dtype != tf.float32:
        fail(
            todo,
            name,
            f"expected one-hot labels of static shape ({num_classes},), float32; found "
            f"{label_spec}. Use tf.sparse.to_dense, then tf.reshape to [{num_classes}].",
        )
    images, classes = _expected_pairs(serialized)
    for (image, label), right_image, right_class in zip(found, images, classes, strict=True):
        if not np.array_equal(image, right_image) or int(np.argmax(label)) != right_class:
            fail(todo, name, "the images or labels differ from what the records hold.")
    passed(todo, f"{len(found)} records parsed to {expected}.")


def _records_read(
    read_shards: Callable, shards: ShardSet, num_parallel_reads: int, todo: int, name: str
) -> Any:
    """Calls `read_shards` as the lab does, on a dataset of the shards' paths.

    Returns:
        What it returned; a failure naming the TODO where making that dataset raises.
    """
    __tracebackhide__ = True
    if not callable(read_shards):
        found = type(read_shards).__name__
        fail(todo, name, f"expected a function of a dataset of paths; found {found}.")
    try:
        return read_shards(tf.data.Dataset.from_tensor_slices(list(shards.paths)))
    except CHECK_ERRORS as error:
        if "cycle_length" in str(error):  # interleave(): num_parallel_calls > cycle_length.
            fail(
                todo,
                name,
                f"expected {num_parallel_reads} shards read at once; interleave() refuses a "
                "num_parallel_calls above its cycle_length. Pass num_parallel_reads as both.",
            )
        fail(todo, name, f"read_shards(shard_names) fails: {first_line(error)}")


def _fail_unless_argument_used(
    read_shards: Callable, shards: ShardSet, num_parallel_reads: int, todo: int, name: str
) -> None:
    """Fails unless `read_shards(names, other)` reads `other` shards at once, not a number of
    its own: the check asks for one more (or one fewer) than the lab's."""
    __tracebackhide__ = True
    other = num_parallel_reads - 1 if num_parallel_reads > 2 else num_parallel_reads + 1
    try:
        steps = dataset_steps(read_shards(tf.data.Dataset.from_tensor_slices(shards.paths), other))
    except Exception:  # noqa: BLE001 (Not this test's concern: the records were judged above.)
        return
    interleave = _interleave_step(steps) if steps else None
    if interleave is None or not interleave.op.startswith("ParallelInterleave"):
        return
    cycle, calls = interleave.constants[-5], interleave.constants[-1]
    if other not in (cycle, calls):
        fail(
            todo,
            name,
            f"expected read_shards(filenames, {other}) to read {other} shards at once; found "
            f"cycle_length={cycle}, num_parallel_calls={calls}. Use the num_parallel_reads "
            "argument, not a number of your own.",
        )


def _interleave_step(steps: list) -> Any:
    """The last interleave step of a dataset's graph, or None."""
    interleaves = [step for step in steps if "Interleave" in step.op]
    return interleaves[-1] if interleaves else None


def check_read_shards(
    read_shards: Callable,
    *,
    todo: int,
    storage: SimulatedStorage,
    shards: ShardSet,
    num_parallel_reads: int,
) -> None:
    """Checks TODO 2's `read_shards(names)`: every record, many shards at once, any order.

    The check calls `read_shards` itself, on a dataset of the shards' paths, so that an
    error in making the dataset (`interleave()` refusing its arguments) is a message
    naming the TODO, not TensorFlow's traceback in the learner's cell.

    A damaged shard (TensorFlow's `DataLossError`) raises `DataProblem` naming it, not a
    failure of the TODO.

    Args:
        read_shards: the learner's function of a dataset of paths (and `num_parallel_reads`);
            expected to return a `tf.data.Dataset` of serialized records. It is called
            again with another `num_parallel_reads`, which its reads must follow (a
            function that ignores its argument fails).
        todo: the TODO's number, named in every message.
        storage: the storage the shards are opened through (`open_tfrecord`'s).
        shards: the shards (`shard_cache.ensure_shards`): their paths and record count.
        num_parallel_reads: the shards `read_shards` reads at once by default (the lab's).

    Raises:
        CheckFailed: naming the TODO, when the records come in the files' order (by the
            options, or by a reader that ignores them, such as `TFRecordDataset(paths,
            num_parallel_reads=16)`), are parsed or batched already, are not all there
            once each, bypass the storage, or come from fewer shards at once than asked
            (`cycle_length` without `num_parallel_calls`).
        DataProblem: naming the damaged shards, when reading meets one.

    Example:
        checks.check_read_shards(read_shards, todo=2, storage=simulated_storage, shards=shards,
                                 num_parallel_reads=16)
    """
    __tracebackhide__ = True
    name = "read_shards"
    expected = "a tf.data.Dataset of the shards' serialized records"
    records = _records_read(read_shards, shards, num_parallel_reads, todo, name)
    if records is None:
        fail(todo, name, f"not done yet: it returns None. Expected {expected}.")
    require_dataset(records, todo, name, expected)
    spec = records.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string or spec.shape.rank != 0:
        fail(
            todo,
            name,
            f"expected one serialized record (a scalar tf.string) per element; found {spec}. "
            "Return the records as they come from the files: read_tfrecord parses them "
            "later.",
        )
    steps = dataset_steps(records)
    interleave = _interleave_step(steps) if steps is not None else None
    if steps is not None and interleave is None:
        fail(
            todo,
            name,
            "expected the shards interleaved; found no interleave(): "
            "filenames.interleave(open_tfrecord, cycle_length=..., num_parallel_calls=..., "
            "deterministic=False) reads several at once.",
        )
    wanted = min(num_parallel_reads, len(shards.paths))
    if interleave is not None and interleave.op == "InterleaveDataset":
        fail(
            todo,
            name,
            f"expected {wanted} shards read at once; found an interleave() without "
            "num_parallel_calls: cycle_length alone opens that many files but reads them "
            "one after another. Pass num_parallel_reads as its cycle_length and "
            "num_parallel_calls.",
        )
    if interleave is not None and interleave.op.startswith("ParallelInterleave"):
        # Its constant inputs end: cycle_length, block_length, two buffer sizes, then
        # num_parallel_calls (-1: AUTOTUNE; a cycle_length of AUTOTUNE is resolved from
        # the cores when the dataset is made).
        cycle, calls = interleave.constants[-5], interleave.constants[-1]
        if calls == tf.data.AUTOTUNE and num_parallel_reads != tf.data.AUTOTUNE:
            fail(
                todo,
                name,
                f"expected {num_parallel_reads} shards in flight; found num_parallel_calls="
                "AUTOTUNE, which counts the cores, not the storage's wait. Pass "
                "num_parallel_reads as cycle_length and num_parallel_calls.",
            )
        if num_parallel_reads > 0 and any(
            value is not None and 0 < value < num_parallel_reads for value in (cycle, calls)
        ):
            fail(
                todo,
                name,
                f"expected {num_parallel_reads} shards read at once; found cycle_length={cycle}, "
                f"num_parallel_calls={calls}. Pass num_parallel_reads as both.",
            )
    _fail_unless_any_order(records, todo, name)
    storage.reset_counters()
    try:  # One more than expected at most: a dataset that repeats forever ends too.
        count = sum(1 for _ in records.take(shards.num_records + 1))
    except CHECK_ERRORS as error:
        raise_if_data_problem(error, todo, shards.paths)
        fail(todo, name, f"reading it fails: {first_line(error)}")
    if count != shards.num_records:
        more = "more than that (does it repeat?)" if count > shards.num_records else count
        fail(todo, name, f"expected all {shards.num_records} records, once each; found {more}.")
    if storage.simulated and storage.latency_ms and storage.num_requests == 0:
        fail(
            todo,
            name,
            "expected the shards read from the simulated storage; it saw no request. Open "
            "each shard with open_tfrecord (tf.data.TFRecordDataset with the storage's "
            "wait), not tf.data.TFRecordDataset itself.",
        )
    if storage.simulated and storage.latency_ms and storage.max_in_flight < max(2, wanted // 2):
        fail(
            todo,
            name,
            f"expected about {wanted} shards read at once; found at most "
            f"{storage.max_in_flight}. Pass num_parallel_reads as interleave()'s cycle_length "
            "and num_parallel_calls.",
        )
    _fail_unless_argument_used(read_shards, shards, num_parallel_reads, todo, name)
    passed(todo, f"all {count} records, read in parallel, in any order.")
