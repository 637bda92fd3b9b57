"""Grain + ArrayRecord on the course's images: the loader a JAX user picks instead (benchmark).

1. `ensure_array_records` writes one ArrayRecord file per TFRecord shard, holding the
   same records (the same serialized `tf.train.Example`s: the same 192 px JPEG bytes and
   labels), in the same order: a sibling of the course's conversion, not a second one.
2. `grain_images` reads them with Grain: a global shuffle over record keys
   (`MapDataset.range(...).shuffle(...)`), one record per key from
   `grain.sources.ArrayRecordDataSource`, parsed with protobuf and decoded with Pillow
   (libjpeg-turbo, as `tf.io.decode_jpeg` is) or TensorFlow, in Grain's own reading
   threads (`ReadOptions`), then batched; optionally in worker processes (`mp_prefetch`).
3. With a `storage.SimulatedStorage`, the reads go through it (`grain_reads.StorageReads`):
   each ArrayRecord file pays one first-byte wait per epoch, as a TFRecord shard does, or
   every record read is a request of its own (`request_per_record`).

Grain and array-record are optional (`requirements-grain.txt`): `missing_reason()` says
why these rows cannot run, and nothing here imports them before they are used.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tools.course_benchmark.grain_reads import StorageReads

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

# Grain's reading threads. The reads block on the simulated first-byte wait, and Pillow
# releases the GIL while it decodes: as many threads as the course pipeline has reads in
# flight (16, also Grain's default), on 2 cores.
NUM_THREADS = 16
# Elements read ahead, in all threads together (Grain's default is 500): enough to run
# through a shard's first-byte wait at an epoch's start; at least a few batches.
PREFETCH_BUFFER_SIZE = 256
DECODERS = ("pillow", "tensorflow")  # `decode_record`'s JPEG decoders.


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
    from utils.lessons.grain_arrayrecord import (
        grain_arrayrecord,  # Lesson 9's copy: one writer for both.
    )

    if not shard_paths:
        raise ValueError("`shard_paths` must name at least one shard. Received: []")
    output_dir = output_dir or array_record_dir(os.path.dirname(shard_paths[0]))
    return grain_arrayrecord.write_array_records(shard_paths, output_dir)


def decode_record(
    record: bytes, *, num_classes: int, decoder: str = "pillow"
) -> tuple[np.ndarray, np.ndarray]:
    """Parses one serialized `tf.train.Example` with protobuf (no TensorFlow) and decodes it.

    Args:
        record: the record's bytes, as the TFRecord shards hold them.
        num_classes: the one-hot label's length.
        decoder: one of DECODERS: "pillow" (`PIL.Image`, libjpeg-turbo) or "tensorflow"
            (`tf.io.decode_jpeg`, called eagerly: one TensorFlow op call per image).

    Returns:
        (uint8 image (height, width, 3), float32 one-hot label (num_classes,)).

    Raises:
        ValueError: if `decoder` is not one of DECODERS.
    """
    from tools.course_benchmark.example_proto import Example

    if decoder not in DECODERS:
        raise ValueError(f"`decoder` must be one of {DECODERS}. Received: decoder={decoder!r}")
    feature = Example.FromString(record).features.feature
    jpeg = feature["image"].bytes_list.value[0]
    if decoder == "tensorflow":
        import tensorflow as tf

        pixels = tf.io.decode_jpeg(jpeg, channels=3).numpy()
    else:
        from PIL import Image

        with Image.open(io.BytesIO(jpeg)) as image:
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
    num_workers: int = 0,
    decoder: str = "pillow",
):
    """Reads endless batches of (image, one-hot label) from ArrayRecord files with Grain.

    Each epoch is a new global shuffle of all records (Grain reseeds each epoch); the
    records are read and decoded in `num_threads` threads, `prefetch_buffer_size`
    elements ahead, and batched in order: the iteration is deterministic and can be
    checkpointed (`get_state`), as Grain's is. With `num_workers`, that runs in as many
    worker processes (`IterDataset.mp_prefetch`), each on every `num_workers`-th record
    with its own threads, and whole batches come back through shared memory: how Grain
    runs CPU-heavy work past the GIL. Close the iterator when done (it stops them).

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
        num_workers: Grain's worker processes; 0: all in this process.
        decoder: the JPEG decoder (`decode_record`).

    Returns:
        A `grain.IterDataset` of (uint8 images (batch, h, w, 3), float32 labels).

    Example:
        batches = iter(grain_loader.grain_images(paths, num_classes=5, batch_size=64))
    """
    import grain

    if decoder not in DECODERS:
        raise ValueError(f"`decoder` must be one of {DECODERS}. Received: decoder={decoder!r}")
    if num_workers < 0:
        raise ValueError(f"`num_workers` must be >= 0. Received: num_workers={num_workers}")
    reads = StorageReads(paths, storage, request_per_record=request_per_record)
    total = len(reads)
    keys = grain.MapDataset.range(total).shuffle(seed=seed).repeat()
    # The position in the endless dataset tells the epoch; the element is the record key.
    records = keys.map_with_index(lambda position, key: reads.read(position // total, key))
    images = records.map(
        lambda record: decode_record(record, num_classes=num_classes, decoder=decoder)
    )
    options = grain.ReadOptions(num_threads=num_threads, prefetch_buffer_size=prefetch_buffer_size)
    batches = images.to_iter_dataset(options).batch(batch_size)
    if not num_workers:
        return batches
    from absl import flags

    # Grain's worker start reads its absl flags; a program that never parsed them (this
    # one, a notebook) would fail with `UnparsedFlagAccessError`: take the defaults.
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return batches.mp_prefetch(grain.MultiprocessingOptions(num_workers=num_workers))
