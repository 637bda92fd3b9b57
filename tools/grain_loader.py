"""Grain + ArrayRecord on the course's images: the loader a JAX user picks instead (benchmark).

1. `ensure_array_records` writes one ArrayRecord file per TFRecord shard, holding the
   same records (the same serialized `tf.train.Example`s: the same 192 px JPEG bytes and
   labels), in the same order: a sibling of the course's conversion, not a second one.
2. `grain_images` reads them with Grain: a global shuffle over record keys
   (`MapDataset.range(...).shuffle(...)`), one record per key from
   `grain.sources.ArrayRecordDataSource`, parsed with protobuf and decoded with Pillow
   (libjpeg-turbo, as `tf.io.decode_jpeg` is), in Grain's own reading threads
   (`ReadOptions`), then batched.
3. With a `storage.SimulatedStorage`, each ArrayRecord file pays one first-byte wait the
   first time a record of it is read in an epoch, as a TFRecord shard pays one wait each
   time `tf.data` opens it (once per epoch), and its bytes are charged to its stream
   when there is a bandwidth cap: files on local disk or cached near the machine. With
   `request_per_record`, every record read is a request of its own (random access straight
   to object storage: one ranged read per record). The wait holds the reading thread, as
   a blocking read does.

Grain and array-record are optional (`requirements-grain.txt`): `missing_reason()` says
why these rows cannot run, and nothing here imports them before they are used.
"""

from __future__ import annotations

import bisect
import io
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

# One record per group: each record is read on its own, with nothing else decompressed
# (Grain's advice for random access); the JPEG bytes are left as they are, as in the
# TFRecord shards.
ARRAY_RECORD_OPTIONS = "group_size:1,uncompressed"
# Grain's reading threads. The reads block on the simulated first-byte wait, and Pillow
# releases the GIL while it decodes: as many threads as the course pipeline has reads in
# flight (16, also Grain's default), on 2 cores.
NUM_THREADS = 16
# Elements read ahead, in all threads together (Grain's default is 500): enough to run
# through a shard's first-byte wait at an epoch's start; at least a few batches.
PREFETCH_BUFFER_SIZE = 256
_FRAMING_BYTES = 16  # A TFRecord record's framing, charged as `tfrecord_dataset` does.


def missing_reason() -> str | None:
    """Says why Grain + ArrayRecord cannot be measured here, or None when they can.

    Returns:
        None, or a sentence naming the missing package and how to install it.
    """
    try:
        import grain  # noqa: F401
        from array_record.python import array_record_module  # noqa: F401
    except ImportError as error:
        return (
            f"Grain + ArrayRecord skipped: {error}. Install them with "
            "`pip install -r requirements-grain.txt`."
        )
    return None


def array_record_dir(shards_dir: str) -> str:
    """Returns the folder of the ArrayRecord copies of the shards in `shards_dir`."""
    return f"{str(shards_dir).rstrip('/')}-arrayrecord"


def ensure_array_records(shard_paths: Sequence[str], output_dir: str | None = None) -> list[str]:
    """Returns ArrayRecord copies of TFRecord shards, writing those that are missing.

    Each shard `NAME.tfrec` becomes `NAME.array_record`, with the same records in the
    same order. A copy is trusted when it holds as many records as its shard; otherwise
    it is written again, into a temporary file that is renamed when complete.

    Args:
        shard_paths: TFRecord shards.
        output_dir: where the copies go; by default `array_record_dir` of the shards'
            folder.

    Returns:
        The ArrayRecord paths, one per shard, in the shards' order.

    Raises:
        ValueError: if `shard_paths` is empty.

    Example:
        paths = grain_loader.ensure_array_records(shard_set.paths)
    """
    import tensorflow as tf
    from array_record.python import array_record_module

    if not shard_paths:
        raise ValueError("`shard_paths` must name at least one shard. Received: []")
    output_dir = output_dir or array_record_dir(os.path.dirname(shard_paths[0]))
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for shard in shard_paths:
        path = os.path.join(output_dir, Path(shard).stem + ".array_record")
        records = [record.numpy() for record in tf.data.TFRecordDataset(shard)]
        if not (os.path.exists(path) and _num_records(path) == len(records)):
            handle, temporary = tempfile.mkstemp(dir=output_dir, suffix=".incomplete")
            os.close(handle)
            writer = array_record_module.ArrayRecordWriter(temporary, ARRAY_RECORD_OPTIONS)
            for record in records:
                writer.write(record)
            writer.close()
            shutil.move(temporary, path)
        paths.append(path)
    return paths


def _num_records(path: str) -> int:
    from array_record.python import array_record_module

    try:
        reader = array_record_module.ArrayRecordReader(path)
        try:
            return int(reader.num_records())
        finally:
            reader.close()
    except (RuntimeError, ValueError):  # A damaged file: it is written again.
        return -1


class StorageReads:
    """Reads records by key from ArrayRecord files through a (simulated) storage.

    The first read of each file in an epoch waits for the file's first byte
    (`SimulatedStorage.open_object`); reads of that file on other threads meanwhile wait
    for the same first byte, not for one of their own. With a bandwidth cap, each record's
    bytes are charged to its file's stream.

    Args:
        paths: ArrayRecord files.
        storage: the storage; None reads directly.
        request_per_record: every record read is a request of its own (its own first-byte
            wait and bytes), as random reads straight from object storage are.
    """

    def __init__(
        self,
        paths: Sequence[str],
        storage: SimulatedStorage | None = None,
        *,
        request_per_record: bool = False,
    ):
        import grain

        self.source = grain.sources.ArrayRecordDataSource([str(path) for path in paths])
        self._ends = list(np.cumsum([_num_records(str(path)) for path in paths]))
        self._sizes = [os.path.getsize(path) for path in paths]
        self._storage = storage if storage is not None and storage.simulated else None
        self._charge_bytes = bool(
            self._storage
            and (self._storage.megabytes_per_second or self._storage.total_megabytes_per_second)
        )
        self._request_per_record = request_per_record
        self._lock = threading.Lock()
        self._opened: dict[tuple[int, int], tuple[threading.Event, list[int]]] = {}

    def __len__(self) -> int:
        return int(self._ends[-1])

    def read(self, epoch: int, key: int) -> bytes:
        """Returns the record at `key`, after its file's first-byte wait in `epoch`."""
        if self._storage is not None and self._request_per_record:
            record = self.source[key]
            self._storage.wait_for_object(len(record) + _FRAMING_BYTES)
            return record
        if self._storage is not None:
            stream = self._open(epoch, bisect.bisect_right(self._ends, key))
        record = self.source[key]
        if self._charge_bytes:
            self._storage.wait_for_bytes(stream, len(record) + _FRAMING_BYTES)
        return record

    def _open(self, epoch: int, file_index: int) -> int:
        with self._lock:
            opened = self._opened.get((epoch, file_index))
            if opened is None:
                opened = self._opened[epoch, file_index] = (threading.Event(), [])
                owner = True
                # Files of epochs two or more back are not read again.
                for old in [k for k in self._opened if k[0] < epoch - 1]:
                    del self._opened[old]
            else:
                owner = False
        event, stream = opened
        if owner:
            try:
                stream.append(self._storage.open_object(self._sizes[file_index]))
            finally:
                event.set()
        else:
            event.wait()
        return stream[0] if stream else -1


def decode_record(record: bytes, *, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Parses one serialized `tf.train.Example` and decodes its JPEG with Pillow.

    Args:
        record: the record's bytes, as the TFRecord shards hold them.
        num_classes: the one-hot label's length.

    Returns:
        (uint8 image (height, width, 3), float32 one-hot label (num_classes,)).
    """
    from PIL import Image
    from tensorflow.core.example import example_pb2

    feature = example_pb2.Example.FromString(record).features.feature
    with Image.open(io.BytesIO(feature["image"].bytes_list.value[0])) as image:
        pixels = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    one_hot = np.asarray(feature["one_hot_class"].float_list.value, np.float32)
    return pixels, one_hot.reshape(num_classes)


def grain_images(
    paths: Sequence[str],
    *,
    num_classes: int,
    batch_size: int,
    storage: SimulatedStorage | None = None,
    num_threads: int = NUM_THREADS,
    prefetch_buffer_size: int = PREFETCH_BUFFER_SIZE,
    seed: int = 0,
    request_per_record: bool = False,
):
    """Reads endless batches of (image, one-hot label) from ArrayRecord files with Grain.

    Each epoch is a new global shuffle of all records (Grain reseeds each epoch); the
    records are read and decoded in `num_threads` threads, `prefetch_buffer_size`
    elements ahead, and batched in order: the iteration is deterministic and can be
    checkpointed (`get_state`), as Grain's is.

    Args:
        paths: ArrayRecord files (`ensure_array_records`).
        num_classes: the one-hot label's length.
        batch_size: images per batch.
        storage: a `storage.SimulatedStorage` whose first-byte wait each file pays once
            per epoch; None reads directly.
        num_threads: Grain's reading threads.
        prefetch_buffer_size: elements read ahead.
        seed: the shuffle's seed.
        request_per_record: each record read is a storage request of its own
            (`StorageReads`), not one per file and epoch.

    Returns:
        A `grain.IterDataset` of (uint8 images (batch, h, w, 3), float32 labels).

    Example:
        batches = iter(grain_loader.grain_images(paths, num_classes=5, batch_size=64))
    """
    import grain

    reads = StorageReads(paths, storage, request_per_record=request_per_record)
    num_records = len(reads)
    keys = grain.MapDataset.range(num_records).shuffle(seed=seed).repeat()
    # The position in the endless dataset tells the epoch; the element is the record key.
    records = keys.map_with_index(lambda position, key: reads.read(position // num_records, key))
    images = records.map(lambda record: decode_record(record, num_classes=num_classes))
    options = grain.ReadOptions(num_threads=num_threads, prefetch_buffer_size=prefetch_buffer_size)
    return images.to_iter_dataset(options).batch(batch_size)
