"""Checks for lab 2: the record's features (TODO 1) and a shard written safely (TODO 2)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import records, shard_files
from utils.checks._base import (
    CHECK_ERRORS,
    fail,
    first_line,
    is_course_copy_error,
    passed,
    refusing_course_copy,
    require_result,
)

_FEATURE_KINDS = {
    "image": "bytes_list",
    "class": "int64_list",
    "label": "bytes_list",
    "size": "int64_list",
    "one_hot_class": "float_list",
}
# The errors the likeliest mistakes raise while building an Example, and what to do instead.
_ERROR_HINTS = {
    "int found": "A feature holds a list: BytesList(value=[image_jpeg]), not "
    "value=image_jpeg (bytes taken one by one are ints).",
    "iterable": "A feature holds a list: Int64List(value=[class_index]), not value=class_index.",
    "str found": "A bytes_list holds bytes, not text: encode the class name "
    "(class_names[class_index].encode()).",
    'has no "': "tf.train.Example takes features=tf.train.Features(feature=<your dict>), "
    "not the dict itself.",
}
# What each feature holds, said when its value is wrong.
_VALUE_HINTS = {
    "image": "image_jpeg itself, the JPEG bytes",
    "class": "class_index itself",
    "label": "the class name, as bytes",
    "size": "original_size: the image's (height, width) BEFORE resizing",
    "one_hot_class": "one float a class: 1.0 at class_index, 0.0 elsewhere",
}


def check_to_example(to_example: Callable, *, todo: int, class_names: Sequence[str]) -> None:
    """Checks `to_example(image_jpeg, class_index, original_size, class_names)` against `SCHEMA`.

    Args:
        to_example: the learner's function, called eagerly on a small JPEG.
        todo: the TODO's number, named in every message.
        class_names: the class names, in label order.

    Raises:
        CheckFailed: naming the TODO and the feature, when the result is not a
            `tf.train.Example`, a feature is missing or of another kind, or a value is wrong.

    Example:
        checks.check_to_example(to_example, todo=1, class_names=source.class_names)
    """
    __tracebackhide__ = True
    name = "to_example"
    expected = "a tf.train.Example with the features " + ", ".join(_FEATURE_KINDS)
    image_jpeg = tf.io.encode_jpeg(tf.zeros((8, 8, 3), tf.uint8)).numpy()
    class_index = len(class_names) // 2
    try:
        with refusing_course_copy(records.to_example):
            example = to_example(image_jpeg, class_index, [300, 400], list(class_names))
    except NotImplementedError as error:
        if not is_course_copy_error(error):
            raise
        fail(
            todo,
            name,
            "expected an Example your code builds; found a call to records.to_example, the "
            "course's solved copy, which earns nothing here. Build it with tf.train.Example.",
        )
    except CHECK_ERRORS as error:
        hints = [hint for text, hint in _ERROR_HINTS.items() if text in str(error)]
        found = f"found an error: {first_line(error).rstrip('.')}."
        fail(todo, name, " ".join([f"expected {expected}; {found}", *hints]))
    require_result(example, todo, name, expected)
    if not isinstance(example, tf.train.Example):
        hint = " Return the Example itself, not its bytes." if isinstance(example, bytes) else ""
        fail(todo, name, f"expected {expected}; found a {type(example).__name__}.{hint}")
    features = example.features.feature
    for feature, kind in _FEATURE_KINDS.items():
        if feature not in features:
            fail(todo, name, f"expected a feature {feature!r}; found {sorted(features)}.")
        if features[feature].WhichOneof("kind") != kind:
            found = features[feature].WhichOneof("kind")
            fail(todo, name, f"expected {feature!r} as {kind}; found {found}.")
    record = records.parse_record(tf.constant(example.SerializeToString()))
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    wanted = {
        "image": image_jpeg,
        "class": class_index,
        "label": class_names[class_index].encode(),
        "size": [300, 400],
        "one_hot_class": one_hot,
    }
    for feature, value in wanted.items():
        found = record[feature].numpy()
        found = found.tolist() if isinstance(found, np.ndarray) else found
        if found != value:
            fail(
                todo,
                name,
                f"expected {feature}={value!r:.60}; found {found!r:.60}. It holds "
                f"{_VALUE_HINTS[feature]}.",
            )
    passed(todo, "the record parses with the schema and holds the right values.")


# The renames seen while a check watches: (the renamed file's name, its size then). A
# function the grader's judge runs in the learner's kernel reports its renames through
# `record_rename`; in the notebook the check sees them itself.
_renames_seen: list[tuple[str, int]] | None = None


def record_rename(source: str, size: int) -> None:
    """Notes that `source`, `size` bytes long then, was renamed, while a check watches.

    Args:
        source: the renamed file's path or name.
        size: its size in bytes at the moment of the rename.
    """
    if _renames_seen is not None:
        _renames_seen.append((Path(str(source)).name, int(size)))


@contextlib.contextmanager
def _watching_renames() -> Iterator[list[tuple[str, int]]]:
    """Notes the size of every file renamed in the block (`tf.io.gfile.rename`, `os.rename`,
    `os.replace`, `shutil.move`, `Path.rename` alike): a file renamed while its writer is
    open has less under the final name than it ends with.

    Yields:
        The list of (name, size at the rename), filled as the block runs.
    """
    global _renames_seen
    seen: list[tuple[str, int]] = []
    originals = (tf.io.gfile.rename, os.rename, os.replace, shutil.move)

    def noting(original: Callable) -> Callable:
        def rename(source: object, *args: object, **keywords: object) -> object:
            with contextlib.suppress(OSError, TypeError):
                record_rename(str(os.fspath(source)), os.path.getsize(source))
            return original(source, *args, **keywords)

        return rename

    _renames_seen = seen
    tf.io.gfile.rename, os.rename, os.replace, shutil.move = map(noting, originals)
    try:
        yield seen
    finally:
        tf.io.gfile.rename, os.rename, os.replace, shutil.move = originals
        _renames_seen = None


def _fail_if_renamed_open(renames: list[tuple[str, int]], path: str, todo: int, name: str) -> None:
    """Fails when a file became the shard with fewer bytes than the shard holds."""
    __tracebackhide__ = True
    size = Path(path).stat().st_size
    short = [seen for seen in renames if seen[1] < size]
    if short:
        fail(
            todo,
            name,
            f"expected a whole shard under its final name at every instant; found the file "
            f"renamed with {short[0][1]} of its {size} bytes written: the writer was still "
            "open. Rename after the with block, once the writer is closed.",
        )


def _write_and_read(
    write_shard: Callable, records: list[bytes], folder: str, wanted: str, *, todo: int, name: str
) -> None:
    """Writes `records` with `write_shard` as shard 3 of `folder`; checks the shard and folder.

    An error of `write_shard` on a folder that already holds the shard is raised as it is.
    """
    __tracebackhide__ = True
    already_there = (Path(folder) / wanted).exists()
    if already_there:
        with _watching_renames() as renames:
            path = write_shard(iter(records), folder, 3)
    else:
        try:
            with _watching_renames() as renames:
                path = write_shard(iter(records), folder, 3)
        except TypeError as error:
            fail(
                todo,
                name,
                f"expected the path of the shard written; found an error: {first_line(error)}. "
                "`serialized_examples` can be any iterable, read once and without len() (a "
                "generator): count the records as you write them.",
            )
        except CHECK_ERRORS as error:
            fail(
                todo,
                name,
                f"expected the path of the shard written; found an error: {first_line(error)}",
            )
    require_result(path, todo, name, "the path of the shard written")
    if Path(str(path)).name != wanted:
        fail(
            todo,
            name,
            f"expected a shard named {wanted}; found {Path(str(path)).name}. Its "
            "name holds the number of records written.",
        )
    if not Path(path).exists():
        fail(todo, name, f"it returned {Path(str(path)).name}, but there is no such file.")
    _fail_if_renamed_open(renames, path, todo, name)
    written = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    if written != records:
        if already_there:
            fail(
                todo,
                name,
                f"expected the {len(records)} new records of a second run of the "
                f"lab; found {written}. Replace the old shard: tf.io.gfile.rename("
                "temporary, final_path, overwrite=True).",
            )
        fail(todo, name, f"expected the {len(records)} records in order; found {written}.")
    left = sorted(p.name for p in Path(folder).iterdir() if p.name != wanted)
    if left:
        fail(todo, name, f"expected only {wanted} in the folder; also found {left}.")


def check_write_shard(write_shard: Callable, *, todo: int) -> None:
    """Checks `write_shard(serialized_examples, output_dir, index)`: a shard written safely.

    The shard is named with its count and holds every record; written again into the same
    folder it is replaced; a write interrupted part-way leaves nothing that looks finished.
    It writes into temporary folders of its own.

    Args:
        write_shard: the learner's function.
        todo: the TODO's number, named in every message.

    Raises:
        CheckFailed: naming the TODO, when the shard's name, records or folder are wrong,
            a second write fails, or an interrupted write leaves a finished-looking shard.

    Example:
        checks.check_write_shard(write_shard, todo=2)
    """
    __tracebackhide__ = True
    name = "write_shard"
    try:
        with refusing_course_copy(shard_files.write_shard):
            _check_write_shard(write_shard, todo, name)
    except NotImplementedError as error:
        if not is_course_copy_error(error):
            raise
        fail(
            todo,
            name,
            "expected a shard your code writes; found a call to shard_files.write_shard, the "
            "course's solved copy, which earns nothing here. Write it with tf.io.TFRecordWriter.",
        )


def _check_write_shard(write_shard: Callable, todo: int, name: str) -> None:
    """The body of `check_write_shard`, run while the course's copy is refused."""
    __tracebackhide__ = True
    records = [f"record {i}".encode() for i in range(5)]
    wanted = shard_files.shard_name(3, len(records))
    with tempfile.TemporaryDirectory() as folder:
        _write_and_read(write_shard, records, folder, wanted, todo=todo, name=name)
        # The lab run a second time: the same shard, new records, into the same folder.
        again = [f"second run, record {i}".encode() for i in range(5)]
        try:
            _write_and_read(write_shard, again, folder, wanted, todo=todo, name=name)
        except (*CHECK_ERRORS, OSError) as error:
            fail(
                todo,
                name,
                f"expected the shard written again when the lab runs a second time; writing "
                f"{wanted} into a folder that already holds it fails: {first_line(error)}. "
                "Replace the old shard: tf.io.gfile.rename(temporary, final_path, "
                "overwrite=True).",
            )

    with tempfile.TemporaryDirectory() as folder:
        files_while_writing = []

        def interrupted():
            yield from records[:3]
            files_while_writing.extend(p.name for p in Path(folder).iterdir())
            raise KeyboardInterrupt("interrupted")

        try:
            write_shard(interrupted(), folder, 0)
        except KeyboardInterrupt:
            pass
        finished = [Path(p).name for p in shard_files.find_shards(folder)]
        if not files_while_writing:
            fail(
                todo,
                name,
                "expected the records to go into a file as they come (a shard can be larger "
                "than memory); no file existed while they came. Open a tf.io.TFRecordWriter "
                "on shard_files.temporary_path(output_dir, index) and write each record.",
            )
        if finished:
            fail(
                todo,
                name,
                f"a write interrupted after 3 records left {finished}, which looks finished. "
                "Write to shard_files.temporary_path(output_dir, index) first, and rename the "
                "file to its final name only when every record is written.",
            )
    passed(
        todo,
        f"{wanted} holds its {len(records)} records, written twice over; an "
        "interrupted write leaves no finished-looking shard.",
    )
