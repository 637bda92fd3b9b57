"""Checks for lab 1: listing, labelling, reading and decoding image files, in parallel."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from utils.checks._base import CHECK_ERRORS, _fail, _first_line, _passed, _require_dataset


def _folder_of(path: bytes | str) -> str:
    text = path.decode() if isinstance(path, bytes) else path
    return text.replace("\\", "/").rsplit("/", 2)[-2]


def check_filenames(filenames, *, todo: int, expected_count: int, class_names: Sequence[str]):
    """Checks a dataset of image paths: `expected_count` .jpg paths under the class folders.

    Example:
        checks.check_filenames(filenames, todo=1, expected_count=500, class_names=CLASSES)
    """
    __tracebackhide__ = True
    expected = f"a tf.data.Dataset of {expected_count} file paths"
    _require_dataset(filenames, todo, "filenames", expected)
    spec = filenames.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string or spec.shape.rank != 0:
        _fail(todo, "filenames", f"expected elements that are string scalars; found {spec}.")
    paths = list(filenames.as_numpy_iterator())
    if len(paths) != expected_count:
        _fail(
            todo,
            "filenames",
            f"expected {expected_count} paths; found {len(paths)}. "
            "Use every path of `source.paths`, once.",
        )
    folders = {_folder_of(path) for path in paths}
    if not folders <= set(class_names):
        _fail(todo, "filenames", f"expected paths in {list(class_names)}; found {sorted(folders)}.")
    if paths[: min(len(paths), 50)] == sorted(paths)[:50] and len(paths) > 1:
        _fail(
            todo,
            "filenames",
            "expected the files in shuffled order; found them sorted. "
            "Shuffle them: .shuffle(len(source.paths), seed=SEED).",
        )
    _passed(todo, f"{len(paths)} files in {len(folders)} class folders.")


def check_label_from_path(
    label_from_path: Callable, *, todo: int, sample_paths: Sequence[str], class_names: Sequence[str]
):
    """Checks that `label_from_path(path)` gives the index of the parent folder's name.

    Example:
        checks.check_label_from_path(label_from_path, todo=2, sample_paths=paths,
                                     class_names=CLASSES)
    """
    __tracebackhide__ = True
    name = "label_from_path"
    expected = "an integer tensor: the index of the parent folder's name in the class names"
    try:
        labels = tf.data.Dataset.from_tensor_slices(list(sample_paths)).map(label_from_path)
        found = [int(label) for label in labels.as_numpy_iterator()]
    except CHECK_ERRORS as error:
        if "Ellipsis" in str(error) or "NoneType" in str(error):
            _fail(todo, name, f"not done yet: it returns no label. Expected {expected}.")
        _fail(
            todo,
            name,
            f"expected {expected}, computed with TensorFlow ops (it runs inside "
            f"Dataset.map); found an error: {_first_line(error)}",
        )
    wanted = [list(class_names).index(_folder_of(path)) for path in sample_paths]
    for path, label, right in zip(sample_paths, found, wanted, strict=True):
        if label != right:
            _fail(
                todo,
                name,
                f"expected label {right} ({class_names[right]}) for {path}; found {label}. "
                "The label is the index of the parent folder's name in `source.class_names`.",
            )
    _passed(todo, f"{len(found)} labels match their folders.")


def check_read_and_decode(
    read_and_decode: Callable, *, todo: int, sample_paths: Sequence[str], storage, class_names
):
    """Checks `read_and_decode(path) -> (image, label)`: uint8 RGB images read from `storage`.

    Example:
        checks.check_read_and_decode(read_and_decode, todo=3, sample_paths=paths,
                                     storage=storage, class_names=CLASSES)
    """
    __tracebackhide__ = True
    name = "read_and_decode"
    expected = "(image, label): a uint8 image of shape (height, width, 3) and its label"
    storage.reset_counters()
    try:
        pairs = tf.data.Dataset.from_tensor_slices(list(sample_paths)).map(read_and_decode)
        found = list(pairs.as_numpy_iterator())
    except CHECK_ERRORS as error:
        if "Ellipsis" in str(error) or "NoneType" in str(error):
            _fail(todo, name, f"not done yet: it returns no image. Expected {expected}.")
        _fail(todo, name, f"expected {expected}; found an error: {_first_line(error)}")
    for path, pair in zip(sample_paths, found, strict=True):
        if not isinstance(pair, tuple) or len(pair) != 2:
            _fail(todo, name, f"expected {expected}; found {type(pair).__name__} for {path}.")
        image, label = pair
        if image.dtype != "uint8" or image.ndim != 3 or image.shape[-1] != 3:
            _fail(
                todo,
                name,
                f"expected a uint8 image of shape (height, width, 3); found {image.dtype} of "
                f"shape {tuple(image.shape)} for {path}. Use tf.io.decode_jpeg(..., channels=3).",
            )
        right = list(class_names).index(_folder_of(path))
        if int(label) != right:
            _fail(todo, name, f"expected label {right} for {path}; found {label}. Use TODO 2.")
    if storage.simulated and storage.num_requests < len(sample_paths):
        _fail(
            todo,
            name,
            f"expected {len(sample_paths)} reads from the simulated storage; found "
            f"{storage.num_requests}. Read with storage.read_file(path), not tf.io.read_file, "
            "so that each image pays the storage latency.",
        )
    sizes = sorted({tuple(image.shape) for image, _ in found})
    _passed(todo, f"{len(found)} images decoded to uint8 (height, width, 3); {len(sizes)} sizes.")


def check_parallel_reading(dataset, *, todo: int, storage, num_parallel_reads: int):
    """Checks that reading `dataset` really keeps about `num_parallel_reads` reads in flight.

    It reads `3 * num_parallel_reads` elements and asks the storage for the most
    requests it saw at once; at least half of `num_parallel_reads` passes.

    Example:
        checks.check_parallel_reading(parallel, todo=4, storage=storage, num_parallel_reads=16)
    """
    __tracebackhide__ = True
    name = "parallel"
    expected = f"a tf.data.Dataset of (image, label) with {num_parallel_reads} reads in flight"
    _require_dataset(dataset, todo, name, expected)
    if not storage.simulated or storage.latency_ms == 0:
        _passed(todo, "a dataset (parallelism is only measured on simulated storage).")
        return
    storage.reset_counters()
    # A file of the learner's folder that does not decode is not this TODO's concern.
    for _ in dataset.ignore_errors().take(3 * num_parallel_reads):
        pass
    wanted = max(2, num_parallel_reads // 2)
    if storage.max_in_flight < wanted:
        threads = dataset.options().threading.private_threadpool_size
        _fail(
            todo,
            name,
            f"expected about {num_parallel_reads} reads in flight; found at most "
            f"{storage.max_in_flight} (thread pool size: {threads or 'default, one per core'}). "
            "Pass num_parallel_calls=NUM_PARALLEL_READS to map(), and give the pipeline as "
            "many threads with options.threading.private_threadpool_size.",
        )
    _passed(todo, f"reads overlap (at least {wanted} in flight).")
