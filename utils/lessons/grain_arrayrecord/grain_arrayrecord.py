"""Lesson 9's helpers: lab 2's records in ArrayRecord, read and parsed without TensorFlow.

Nothing here imports TensorFlow at module level: Grain's worker processes import this
module (to find `parse_record`) and should start without TensorFlow's seconds and memory.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

# One record per chunk, stored as it is: any record is read alone (random access), and
# the JPEG bytes are not compressed a second time.
ARRAY_RECORD_OPTIONS = "group_size:1,uncompressed"
# `tf.train.Example`'s messages (the same field numbers), parsed by protobuf alone.
_EXAMPLE_PROTO = """
name: "course_example.proto" package: "course_example" syntax: "proto3"
message_type { name: "BytesList" field { name: "value" number: 1 type: TYPE_BYTES label: LABEL_REPEATED } }
message_type { name: "FloatList" field { name: "value" number: 1 type: TYPE_FLOAT label: LABEL_REPEATED } }
message_type { name: "Int64List" field { name: "value" number: 1 type: TYPE_INT64 label: LABEL_REPEATED } }
message_type { name: "Feature" oneof_decl { name: "kind" }
  field { name: "bytes_list" number: 1 type: TYPE_MESSAGE type_name: ".course_example.BytesList" oneof_index: 0 }
  field { name: "float_list" number: 2 type: TYPE_MESSAGE type_name: ".course_example.FloatList" oneof_index: 0 }
  field { name: "int64_list" number: 3 type: TYPE_MESSAGE type_name: ".course_example.Int64List" oneof_index: 0 } }
message_type { name: "Features"
  field { name: "feature" number: 1 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".course_example.Features.FeatureEntry" }
  nested_type { name: "FeatureEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_STRING }
    field { name: "value" number: 2 type: TYPE_MESSAGE type_name: ".course_example.Feature" } } }
message_type { name: "Example" field { name: "features" number: 1 type: TYPE_MESSAGE type_name: ".course_example.Features" } }
"""  # noqa: E501
_example_class = None


def use_flag_defaults() -> None:
    """Lets Grain start worker processes from a notebook: absl's flags take their defaults.

    Grain reads absl flags when it starts workers; a notebook never parses a command line,
    so without this `mp_prefetch` fails with `UnparsedFlagAccessError`.

    Example:
        grain_arrayrecord.use_flag_defaults()
    """
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def write_array_records(shard_paths: Sequence[str], output_dir: str) -> list[str]:
    """Copies TFRecord shards to ArrayRecord files: the same records, in the same order.

    `NAME.tfrec` becomes `output_dir/NAME.array_record`. A copy that holds as many records
    as its shard is kept; any other is written again, into a temporary file renamed when
    complete (so a run stopped halfway leaves no half file under the final name).

    Args:
        shard_paths: the TFRecord shards (lab 2's).
        output_dir: a local folder for the copies (ArrayRecord writes local files only).

    Returns:
        The ArrayRecord paths, one per shard, in the shards' order.

    Raises:
        ValueError: if `shard_paths` is empty or `output_dir` is a `gs://` path.

    Example:
        paths = grain_arrayrecord.write_array_records(shard_set.paths, "/tmp/flowers-ar")
    """
    import tensorflow as tf
    from array_record.python import array_record_module

    if not shard_paths:
        raise ValueError("`shard_paths` must name at least one shard. Received: []")
    if str(output_dir).startswith("gs://"):
        raise ValueError(f"`output_dir` must be a local folder. Received: {output_dir}")
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for shard in shard_paths:
        path = os.path.join(output_dir, Path(shard).stem + ".array_record")
        records = [record.numpy() for record in tf.data.TFRecordDataset(shard)]
        if not (os.path.exists(path) and count_records(path) == len(records)):
            handle, temporary = tempfile.mkstemp(dir=output_dir, suffix=".incomplete")
            os.close(handle)
            writer = array_record_module.ArrayRecordWriter(temporary, ARRAY_RECORD_OPTIONS)
            for record in records:
                writer.write(record)
            writer.close()
            shutil.move(temporary, path)
        paths.append(path)
    return paths


def count_records(path: str) -> int:
    """Returns the number of records in an ArrayRecord file; -1 when it cannot be read.

    Args:
        path: an ArrayRecord file.

    Returns:
        Its record count, or -1 for a missing or damaged file.
    """
    from array_record.python import array_record_module

    if not os.path.exists(path):
        return -1
    try:  # A damaged file raises here or when it is read or closed.
        reader = array_record_module.ArrayRecordReader(str(path))
        try:
            return int(reader.num_records())
        finally:
            reader.close()
    except (RuntimeError, ValueError):
        return -1


def parse_record(
    record: bytes, *, num_classes: int, image_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Parses one serialized `tf.train.Example` with protobuf and decodes its JPEG (Pillow).

    No TensorFlow: this runs in Grain's worker processes, which do not import it.

    Args:
        record: the record's bytes, as lab 2 wrote them.
        num_classes: the one-hot label's length.
        image_size: resize the image to this square size; None keeps it as stored.

    Returns:
        (uint8 image (height, width, 3), float32 one-hot label (num_classes,)).

    Raises:
        ValueError: if the record has no image or its label is not `num_classes` long.

    Example:
        image, one_hot = grain_arrayrecord.parse_record(source[0], num_classes=5)
    """
    from PIL import Image

    global _example_class
    if _example_class is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

        file = text_format.Parse(_EXAMPLE_PROTO, descriptor_pb2.FileDescriptorProto())
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        example = pool.FindMessageTypeByName("course_example.Example")
        _example_class = message_factory.GetMessageClass(example)
    feature = _example_class.FromString(record).features.feature
    if not feature["image"].bytes_list.value:
        raise ValueError("The record has no `image` feature: not one of lab 2's records.")
    one_hot = np.asarray(feature["one_hot_class"].float_list.value, np.float32)
    if one_hot.shape != (num_classes,):
        raise ValueError(
            f"The record's label has {one_hot.size} classes. Received: num_classes={num_classes}"
        )
    with Image.open(io.BytesIO(feature["image"].bytes_list.value[0])) as image:
        image = image.convert("RGB")
        if image_size:
            image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
        return np.asarray(image), one_hot


class StorageSource:
    """ArrayRecord files as a Grain data source, read through a simulated storage.

    Each process opens each file once, at its first read, and keeps it open (as Grain's
    `ArrayRecordDataSource` does): that open waits for the storage's first byte; then each
    record's bytes are charged to the file's stream when the storage caps bandwidth.
    Pickled into Grain's worker processes, it takes the storage's settings along, and
    each worker opens the files it reads itself.

    Args:
        paths: ArrayRecord files (`write_array_records`).
        storage: the simulated storage (lab 3's).

    Example:
        source = grain_arrayrecord.StorageSource(paths, simulated_storage)
    """

    _SETTINGS = ("latency_ms", "latency_p99_ms", "megabytes_per_second", "simulated")

    def __init__(self, paths: Sequence[str], storage: SimulatedStorage):
        import grain

        self._array_records = grain.sources.ArrayRecordDataSource([str(path) for path in paths])
        self._ends = np.cumsum([count_records(path) for path in paths])
        self._sizes = [os.path.getsize(path) for path in paths]
        self._settings = {name: getattr(storage, name) for name in self._SETTINGS}
        self._storage, self._streams, self._lock = storage, {}, threading.Lock()

    def __getstate__(self) -> dict:
        return {
            k: v for k, v in self.__dict__.items() if k not in ("_storage", "_lock", "_streams")
        }

    def __setstate__(self, state: dict) -> None:
        from utils.lab import runtime

        with runtime.stderr_dropped():  # In a worker: TensorFlow's import lines (absl, oneDNN).
            from utils.storage import SimulatedStorage

        self.__dict__.update(state, _streams={}, _lock=threading.Lock())
        self._storage = SimulatedStorage(**self._settings, seed=os.getpid())

    def __len__(self) -> int:
        return int(self._ends[-1])

    def __getitem__(self, key: int) -> bytes:
        file_index = int(np.searchsorted(self._ends, key, side="right"))
        with self._lock:  # One open per file and process; other threads wait for it.
            opened = self._streams.get(file_index)
            owner = opened is None
            if owner:
                opened = self._streams[file_index] = (threading.Event(), [])
        event, stream = opened
        if owner:
            try:
                stream.append(self._storage.open_object(self._sizes[file_index]))
            finally:
                event.set()
        event.wait()
        record = self._array_records[key]
        if stream:
            self._storage.wait_for_bytes(stream[0], len(record))
        return record


def batch_timer(
    batches: Iterator, *, num_images: int, num_warmup_images: int = 0
) -> Callable[[], float]:
    """Returns a function that times `num_images` images' batches from `batches`: images/s.

    For `comparison.measure_in_turns`. The iterator is made once and read on from run to
    run, so that Grain's worker processes start once; the first batch (their start) is
    read here, untimed. Each run first reads `num_warmup_images` untimed: what the
    pipeline read ahead while the other candidates were timed.

    Args:
        batches: an iterator of (images, labels) batches, endless (e.g. `iter(loader)`).
        num_images: images timed per run.
        num_warmup_images: images read before each run's timing starts.

    Returns:
        A function of no arguments: each call times one run and returns images/s.

    Example:
        runs = comparison.measure_in_turns({"Grain": grain_arrayrecord.batch_timer(
            iter(loader), num_images=4000, num_warmup_images=512)})
    """
    next(batches)

    def run() -> float:
        count = 0
        while count < num_warmup_images:
            count += len(next(batches)[0])
        start, count = time.perf_counter(), 0
        while count < num_images:
            count += len(next(batches)[0])
        return count / (time.perf_counter() - start)

    return run
