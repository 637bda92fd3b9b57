"""Checks for lab 1: listing, reading and decoding image files, in parallel."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from utils import readable_images
from utils.checks import _samples
from utils.checks._base import (
    CHECK_ERRORS,
    call_eagerly,
    dataset_steps,
    fail,
    first_line,
    passed,
    require_dataset,
)
from utils.lab import data

if TYPE_CHECKING:
    from utils.lab.sources import ImageSource
    from utils.storage import SimulatedStorage


def _folder_of(path: bytes | str) -> str:
    text = path.decode() if isinstance(path, bytes) else path
    return text.replace("\\", "/").rsplit("/", 2)[-2]


# A fixed shuffle buffer shuffles all of the lab's own images only from this size on (its
# NUM_IMAGES): a fixed buffer below it fails wherever the check runs, on fewer images too
# (the grader's), so that the grader and the learner's run give one verdict.
FULL_SHUFFLE_FLOOR = data.DEFAULT_NUM_IMAGES


def _short(path: bytes | str) -> str:
    """`<class>/<file>` of a path: a message never shows the check's or the grader's folders."""
    text = path.decode() if isinstance(path, bytes) else path
    return "/".join(text.replace("\\", "/").rsplit("/", 2)[-2:])


def check_filenames(
    filenames: Any, *, todo: int, expected_count: int, class_names: Sequence[str]
) -> None:
    """Checks a dataset of image paths: `expected_count` .jpg paths under the class folders.

    Args:
        filenames: what the TODO built; expected a `tf.data.Dataset` of string paths.
        todo: the TODO's number, named in every message.
        expected_count: how many paths the dataset must hold.
        class_names: the class folders the paths must be in.

    Raises:
        CheckFailed: naming the TODO, when it is not done, not a dataset of string
            scalars, has another count, paths outside the class folders, or is sorted.

    Example:
        checks.check_filenames(filenames, todo=1, expected_count=500, class_names=CLASSES)
    """
    __tracebackhide__ = True
    expected = f"a tf.data.Dataset of {expected_count} file paths"
    require_dataset(filenames, todo, "filenames", expected)
    spec = filenames.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string or spec.shape.rank != 0:
        fail(todo, "filenames", f"expected elements that are string scalars; found {spec}.")
    paths = list(filenames.as_numpy_iterator())
    if len(paths) != expected_count:
        fail(
            todo,
            "filenames",
            f"expected {expected_count} paths; found {len(paths)}. "
            "Use every path of `source.paths`, once.",
        )
    folders = {_folder_of(path) for path in paths}
    if not folders <= set(class_names):
        fail(todo, "filenames", f"expected paths in {list(class_names)}; found {sorted(folders)}.")
    if paths[: min(len(paths), 50)] == sorted(paths)[:50] and len(paths) > 1:
        fail(
            todo,
            "filenames",
            "expected the files in shuffled order; found them sorted. "
            "Shuffle them: .shuffle(len(source.paths), seed=SEED).",
        )
    buffer = _shuffle_buffer(filenames)
    if buffer is not None and 0 < buffer < expected_count:
        fail(
            todo,
            "filenames",
            f"expected a shuffle over all {expected_count} paths; found "
            f"a buffer of {buffer}. shuffle(n) draws each element from the next n only, so "
            f"the first path out is always one of the first {buffer}: pass a buffer of "
            "len(source.paths).",
        )
    if buffer is not None and expected_count < buffer < FULL_SHUFFLE_FLOOR:
        fail(
            todo,
            "filenames",
            f"expected a buffer that follows the data, len(source.paths); found a fixed "
            f"{buffer}, too small for the lab's {FULL_SHUFFLE_FLOOR} images. Pass "
            "len(source.paths) as the buffer.",
        )
    if paths == list(filenames.as_numpy_iterator()) and len(paths) > 2:
        fail(
            todo,
            "filenames",
            "expected a new order on each pass (each epoch); found the same "
            "order twice: shuffle(..., reshuffle_each_iteration=False) keeps the first pass's "
            "order. Leave reshuffle_each_iteration at its default.",
        )
    if _shuffled_without_seed(filenames):
        fail(
            todo,
            "filenames",
            "expected the order drawn from a seed; found shuffle() "
            "without one. Each run of the notebook then reads the files in another order, so "
            "a number or a mistake you saw once cannot be seen again. Pass the seed: "
            ".shuffle(len(source.paths), seed=SEED).",
        )
    passed(todo, f"{len(paths)} files in {len(folders)} class folders.")


def _shuffle_buffer(dataset: tf.data.Dataset) -> int | None:
    """The buffer size of the last shuffle in `dataset`'s graph; None if none is read."""
    sizes = [
        step.constants[1]
        for step in dataset_steps(dataset) or []
        if step.op.startswith("ShuffleDataset") and len(step.constants) >= 2
    ]
    return sizes[-1] if sizes else None


def _shuffled_without_seed(dataset: tf.data.Dataset) -> bool:
    """Whether every shuffle in `dataset`'s graph draws its seeds at random.

    `shuffle(seed=None)` with no global seed stores the seeds (0, 0), which TensorFlow
    replaces with random ones; a seed (or `tf.random.set_seed`) stores others.

    Returns:
        True when every shuffle stores the seeds (0, 0); False when one stores others, or
        when no shuffle is read from the graph.
    """
    seeds = [
        step.constants[2:4]
        for step in dataset_steps(dataset) or []
        if step.op.startswith("ShuffleDataset") and len(step.constants) >= 4
    ]
    return bool(seeds) and all(seed == (0, 0) for seed in seeds)


def _map_one(
    function: Callable, path: str, what: str, hint: str, *, todo: int, name: str, expected: str
) -> object:
    """`function` mapped over a dataset of one path; an error names the file, `what`."""
    __tracebackhide__ = True
    try:
        return next(tf.data.Dataset.from_tensors(path).map(function).as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected {expected}, computed with TensorFlow ops; found an error "
            f"for {what}: {first_line(error)}{hint}",
        )


def _one_path_per_class(source: ImageSource, count: int) -> list[str]:
    """The first `count` readable paths of `source`, taken from its classes in turn."""
    by_class = [[p for p in source.paths if _folder_of(p) == name] for name in source.class_names]
    in_turns = [path for paths in itertools.zip_longest(*by_class) for path in paths if path]
    return readable_images.readable_sample(in_turns, count, verbose=False)[0]


def check_read_and_decode(
    read_and_decode: Callable, *, todo: int, storage: SimulatedStorage, source: ImageSource
) -> None:
    """Checks `read_and_decode(path) -> (image, label)`: uint8 RGB images read from `storage`.

    It decodes 5 images of `source` (one per class, as far as the classes go) and files it
    writes: grayscale and CMYK JPEGs and PNGs (one transparent), of 1 or 4 channels
    without `channels=3`, whatever the learner's are.

    Args:
        read_and_decode: the learner's function, run eagerly once, then in `Dataset.map`.
        todo: the TODO's number, named in every message.
        storage: the storage the lab reads through (its requests are counted).
        source: the lab's images; a label is an index into its `class_names`.

    Raises:
        CheckFailed: naming the TODO and the file, when an image is not uint8
            (height, width, 3), a label is wrong, or the files bypass `storage`.

    Example:
        checks.check_read_and_decode(read_and_decode, todo=2, storage=storage, source=source)
    """
    __tracebackhide__ = True
    name = "read_and_decode"
    expected = "(image, label): a uint8 image of shape (height, width, 3) and its label"
    channels_hint = "Images may have 1 or 4 channels: decode with tf.io.decode_jpeg(image_bytes, "
    channels_hint += "channels=3)."
    class_names = list(source.class_names)
    sample_paths = _one_path_per_class(source, 5)
    with tempfile.TemporaryDirectory() as folder:
        traps = _samples.write_channel_traps(folder, class_names)
        described = {path: (_short(path), "") for path in sample_paths}  # (what, hint) of each.
        described |= {
            path: (f"{what} the check wrote ({_short(path)})", " " + channels_hint)
            for path, what in traps
        }
        paths = list(described)
        storage.reset_counters()
        call_eagerly(
            read_and_decode, (tf.constant(paths[0]),), todo=todo, name=name, expected=expected
        )
        found = []
        for path, (what, hint) in described.items():
            pair = _map_one(
                read_and_decode, path, what, hint, todo=todo, name=name, expected=expected
            )
            if not isinstance(pair, tuple) or len(pair) != 2:
                fail(todo, name, f"expected {expected}; found {type(pair).__name__} for {what}.")
            image, label = pair
            if image.dtype != "uint8" or image.ndim != 3 or image.shape[-1] != 3:
                fail(
                    todo,
                    name,
                    f"expected a uint8 image of shape (height, width, 3); found {image.dtype} "
                    f"of shape {tuple(image.shape)} for {what}. {channels_hint}",
                )
            right = class_names.index(_folder_of(path))
            if np.shape(label) != () or not np.issubdtype(np.asarray(label).dtype, np.integer):
                fail(
                    todo,
                    name,
                    f"expected label {right} (an integer) for {_short(path)}; found {label!r}. The "
                    "label is label_from_path(path).",
                )
            if int(label) != right:
                fail(
                    todo,
                    name,
                    f"expected label {right} for {_short(path)}; found {label}. The label is "
                    "label_from_path(path).",
                )
            found.append(image)
        num_requests = storage.num_requests
    if storage.simulated and num_requests < len(paths):
        fail(
            todo,
            name,
            f"expected {len(paths)} reads from the simulated storage; found {num_requests}. "
            "Read with simulated_storage.read_file(path), not tf.io.read_file, so that each "
            "image pays the storage latency.",
        )
    sizes = {tuple(image.shape) for image in found[: len(sample_paths)]}
    passed(
        todo,
        f"{len(sample_paths)} images decoded to uint8 (height, width, 3); {len(sizes)} sizes. "
        "Grayscale, CMYK and PNG files too.",
    )


def _check_parallel_settings(
    dataset: tf.data.Dataset, todo: int, name: str, num_parallel_reads: int
) -> None:
    """Fails unless the map asks for the reads itself and has the threads to run them.

    Read from the graph and options, not measured: `AUTOTUNE` and the default pool size
    themselves from the cores, so a measurement would pass them on 16 cores, fail them on 2.
    """
    __tracebackhide__ = True
    wanted = num_parallel_reads  # The same bar at any NUM_PARALLEL_READS: the grader's too.
    steps = dataset_steps(dataset)
    # The last input of a parallel map or interleave is its num_parallel_calls.
    parallel = ("ParallelMapDataset", "ParallelInterleaveDataset")
    calls = [step.constants[-1] for step in steps or [] if step.op.startswith(parallel)]
    if steps is not None and not calls:
        fail(
            todo,
            name,
            f"expected a map with num_parallel_calls={num_parallel_reads}; found none: the "
            "images are read one at a time. Pass num_parallel_calls=NUM_PARALLEL_READS to map().",
        )
    if calls and max(calls) == tf.data.AUTOTUNE:
        fail(
            todo,
            name,
            f"expected num_parallel_calls={num_parallel_reads} (NUM_PARALLEL_READS); found "
            "tf.data.AUTOTUNE, which sizes itself from this machine's cores, so the reads in "
            "flight would change from one machine to the next. Pass "
            "num_parallel_calls=NUM_PARALLEL_READS.",
        )
    if calls and max(calls) < wanted:
        fail(
            todo,
            name,
            f"expected num_parallel_calls={num_parallel_reads} (NUM_PARALLEL_READS); found "
            f"{max(calls)}: at most {max(calls)} reads wait at once. Pass "
            "num_parallel_calls=NUM_PARALLEL_READS.",
        )
    threads = dataset.options().threading.private_threadpool_size
    if calls and (threads or 0) < wanted:
        fail(
            todo,
            name,
            f"expected the map applied to `filenames`, which carries a pool of "
            f"{num_parallel_reads} threads (the cell above the TODO); found "
            f"{threads or 'the default pool'}, one thread per core, and a read that waits "
            "holds its thread. Start from filenames.map(...).",
        )


def check_parallel_reading(
    dataset: Any, *, todo: int, storage: SimulatedStorage, num_parallel_reads: int
) -> None:
    """Checks that reading `dataset` really keeps about `num_parallel_reads` reads in flight.

    It reads `3 * num_parallel_reads` elements and asks the storage for the most
    requests it saw at once; at least half of `num_parallel_reads` passes. Without a
    simulated latency there is nothing to overlap, and only the graph is checked.

    Args:
        dataset: what the TODO built; expected a `tf.data.Dataset` of (image, label).
        todo: the TODO's number, named in every message.
        storage: the storage the dataset reads through.
        num_parallel_reads: the reads the lab asks to keep in flight.

    Raises:
        CheckFailed: naming the TODO, when it is not a dataset, its map reads one image
            at a time, `AUTOTUNE` or fewer at once, or fewer reads overlap.

    Example:
        checks.check_parallel_reading(parallel, todo=3, storage=storage, num_parallel_reads=16)
    """
    __tracebackhide__ = True
    name = "parallel"
    expected = f"a tf.data.Dataset of (image, label) with {num_parallel_reads} reads in flight"
    require_dataset(dataset, todo, name, expected)
    _check_parallel_settings(dataset, todo, name, num_parallel_reads)
    if not storage.simulated or storage.latency_ms == 0:
        passed(
            todo,
            "a parallel map with its own threads (reads in flight are only measured on "
            "simulated storage).",
        )
        return
    storage.reset_counters()
    # A file of the learner's folder that does not decode is not this TODO's concern.
    for _ in dataset.ignore_errors().take(3 * num_parallel_reads):
        pass
    if storage.num_requests == 0:  # TODO 2's read_and_decode bypasses the storage: its fault.
        passed(
            todo,
            f"a parallel map of {num_parallel_reads} reads (in flight not measured: "
            "read_and_decode does not read through simulated_storage, TODO 2's concern).",
        )
        return
    wanted = max(2, num_parallel_reads // 2)
    if storage.max_in_flight < wanted:
        fail(
            todo,
            name,
            f"expected about {num_parallel_reads} reads in flight; found at most "
            f"{storage.max_in_flight}. Read with read_and_decode, which reads through "
            "simulated_storage, in a map with num_parallel_calls=NUM_PARALLEL_READS.",
        )
    passed(todo, f"reads overlap (at least {wanted} in flight).")
