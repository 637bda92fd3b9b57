"""The course's TFRecord input pipeline (lab 3's result), with each of its knobs exposed.

Labs 3 and 4 and the benchmark build their datasets here, so that the pipeline that is
measured is the pipeline that trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from utils import records, shard_files
from utils.storage import SimulatedStorage, read_tfrecords


def decode_ratio(target_size: int, image_size: int) -> int:
    """Returns the largest JPEG scale-down (1, 2, 4 or 8) that decodes no smaller than asked.

    `tf.io.decode_jpeg(..., ratio=r)` computes the image at 1/r of its size from the
    JPEG's coarse frequencies, without decoding every pixel first: at r = 2 it does about a
    quarter of the work. The ratio must divide `target_size`, so the size is exact.

    Args:
        target_size: side of the stored images.
        image_size: side wanted.

    Returns:
        The ratio: `target_size // ratio` is `image_size`, or the nearest size above it.

    Raises:
        ValueError: if `image_size` is not between 1 and `target_size`.

    Example:
        pipeline.decode_ratio(192, 96)  # 2: decode_jpeg(..., ratio=2) gives 96 px.
    """
    if not 1 <= image_size <= target_size:
        raise ValueError(
            f"`image_size` must be between 1 and target_size={target_size}. Received: "
            f"image_size={image_size}"
        )
    fitting = [r for r in (8, 4, 2) if target_size % r == 0 and target_size // r >= image_size]
    return fitting[0] if fitting else 1


def parse_batch(
    serialized_batch: tf.Tensor,
    *,
    target_size: int,
    num_classes: int,
    image_size: int | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Parses a batch of records at once and decodes each image.

    Lab 3's TODO 3 (notebooks/03_read_tfrecords.py) with the notebook's `features`,
    `decode`, `TARGET_SIZE` and `class_names` as arguments (so it is not saved from the
    lesson: tools/building/saved.py) and a smaller decode added; at `image_size=None`
    tests/test_one_copy.py checks it returns the lesson's values.

    Args:
        serialized_batch: a string tensor of shape (batch,): serialized `tf.train.Example`s
            of `records.FEATURES`.
        target_size: side of the stored images (the sidecar's `target_size`).
        num_classes: number of classes (length of the one-hot label).
        image_size: side of the images returned; None: `target_size`. Smaller sizes are
            decoded smaller (`decode_ratio`), then resized only if that is not the size.

    Returns:
        (uint8 images (batch, size, size, 3), float32 one-hot labels (batch, num_classes)).
    """
    parsed = tf.io.parse_example(serialized_batch, records.FEATURES)
    image_size = image_size or target_size
    ratio = decode_ratio(target_size, image_size)
    decoded_size = target_size // ratio

    def decode(image_jpeg):
        image = tf.io.decode_jpeg(image_jpeg, channels=3, ratio=ratio)
        image = tf.reshape(image, [decoded_size, decoded_size, 3])
        if decoded_size != image_size:
            image = tf.image.resize(image, [image_size, image_size], antialias=True)
            image = tf.saturate_cast(tf.round(image), tf.uint8)
        return image

    images = tf.map_fn(decode, parsed["image"], fn_output_signature=tf.uint8)
    one_hots = tf.reshape(tf.sparse.to_dense(parsed["one_hot_class"]), [-1, num_classes])
    return images, one_hots


def tfrecord_images(
    filenames: Sequence[str],
    *,
    target_size: int,
    num_classes: int,
    batch_size: int,
    image_size: int | None = None,
    storage: SimulatedStorage | None = None,
    num_parallel_reads: int | None = 16,
    deterministic: bool = False,
    epochs: int | None = 1,
    cache: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Reads batches of (image, one-hot label) from TFRecord shards: the course pipeline.

    Records are read from `num_parallel_reads` files at once, in any order unless
    `deterministic` (`storage.read_tfrecords`: an `interleave`, which honours the option),
    batched, then parsed and decoded a batch at a time in a parallel `map`, optionally
    cached (decoded, in memory) and prefetched.

    For more than one pass, give `epochs` rather than calling `repeat()` on the result:
    the file names are then repeated *before* the reads, so the next epoch's shards open
    while this epoch's last records are read. A `repeat()` after the pipeline starts it
    again at each epoch, and every shard waits for its first byte at once: behind remote
    storage that pause cost the benchmark's pipeline a tenth of its speed
    (`python -m tools.benchmark latency`).

    Args:
        filenames: shard paths.
        target_size: side of the stored images (the sidecar's `target_size`).
        num_classes: number of classes (length of the one-hot label).
        batch_size: images per batch (the last batch may be smaller).
        image_size: side of the images delivered; None: `target_size`. Decoded at that
            size where the stored size is 2, 4 or 8 times it (`decode_ratio`).
        storage: a `storage.SimulatedStorage` to read through; None reads directly. A
            truncated, missing or extra shard is caught by name before reading
            (`shard_files.list_shards` against the sidecar); a shard corrupted in place
            raises TensorFlow's `DataLossError`, which `checked_records` and
            `shard_files.find_damaged_shards` turn into the shard's name.
        num_parallel_reads: files read at once: None (one after another), an integer, or
            `tf.data.AUTOTUNE`.
        deterministic: keep the records' order (slower when files are read in parallel).
        epochs: passes over the files, joined before the reads; None: endless.
        cache: cache the decoded batches in memory after the first pass (only with
            `epochs=1`: repeat the cached dataset instead).
        prefetch: prefetch (AUTOTUNE) at the end.

    Returns:
        The dataset.

    Raises:
        ValueError: if `cache` is asked with `epochs` other than 1.

    Example:
        dataset = pipeline.tfrecord_images(shards, target_size=192, num_classes=5,
                                           batch_size=64, epochs=None)
    """
    if cache and epochs != 1:
        raise ValueError(
            f"`cache` needs `epochs=1`: call `repeat()` on the cached dataset. Received: {epochs=}"
        )
    if epochs != 1:
        filenames = tf.data.Dataset.from_tensor_slices([str(path) for path in filenames])
        filenames = filenames.repeat(epochs)
    if storage is None:
        # Not `checked_records`: its per-record count cost 40% of this pipeline's speed
        # on 2 cores (6,615 against 10,897 images/s, medians of 3 alternating runs). Not
        # `TFRecordDataset(filenames, num_parallel_reads=16)` either: it keeps the files'
        # order whatever `deterministic` says (`read_tfrecords`).
        records = read_tfrecords(filenames, num_parallel_reads=num_parallel_reads)
    else:
        records = storage.tfrecord_dataset(filenames, num_parallel_reads=num_parallel_reads)
    options = tf.data.Options()
    options.deterministic = deterministic
    records = records.with_options(options)
    dataset = records.batch(batch_size).map(
        lambda batch: parse_batch(
            batch, target_size=target_size, num_classes=num_classes, image_size=image_size
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if cache:
        dataset = dataset.cache()
    if prefetch:
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset


def checked_records(
    filenames: Sequence[str], *, num_parallel_reads: int | None = None
) -> tf.data.Dataset:
    """Reads TFRecord shards like `tf.data.TFRecordDataset`; a damaged shard's error names it.

    TensorFlow's own error for a truncated or corrupted shard ("truncated record at
    1910405") does not say which file. Here each shard's records are counted as they are
    read (a cost on every record: use it to check shards, not in a pipeline that must
    keep up with an accelerator); when a shard stops early or holds another count than
    its name (or its sidecar) says, reading fails with `InvalidArgumentError` naming it.

    Args:
        filenames: shard paths (a list).
        num_parallel_reads: files read at once: None (one after another), an integer, or
            `tf.data.AUTOTUNE`.

    Returns:
        A dataset of the serialized records; reading it raises `InvalidArgumentError`
        naming a damaged shard when it meets one.

    Example:
        records = pipeline.checked_records(shard_paths, num_parallel_reads=16)
    """
    paths = [str(path) for path in filenames]
    counts = [-1 if n is None else n for n in shard_files.expected_record_counts(paths)]

    def records_of(path, expected):
        records = tf.data.TFRecordDataset(path).ignore_errors().map(lambda r: (r, False))
        end = tf.data.Dataset.from_tensors((tf.constant(b""), True))

        def count(num_read, element):
            record, is_end = element
            intact = tf.logical_or(
                tf.logical_not(is_end), tf.logical_or(expected < 0, num_read == expected)
            )
            message = [
                "Damaged shard",
                path,
                "records read:",
                num_read,
                "expected:",
                expected,
                "(truncated or corrupted). Write the shards again: lab 2 or conversion.convert().",
            ]
            with tf.control_dependencies([tf.debugging.Assert(intact, message, summarize=8)]):
                return num_read + 1, (tf.identity(record), is_end)

        counted = records.concatenate(end).scan(tf.constant(0, tf.int64), count)
        return counted.filter(lambda record, is_end: tf.logical_not(is_end)).map(
            lambda record, is_end: record
        )

    files = tf.data.Dataset.from_tensor_slices((paths, tf.constant(counts, tf.int64)))
    if num_parallel_reads is None:
        return files.flat_map(records_of)
    return files.interleave(
        records_of, cycle_length=num_parallel_reads, num_parallel_calls=num_parallel_reads
    )


def decode_ceiling_dataset(encoded_images: list[bytes], *, batch_size: int) -> tf.data.Dataset:
    """Decodes in-memory JPEGs with all cores, endlessly: the fastest a JPEG pipeline gets.

    No file is read, nothing is parsed; the images are decoded a batch at a time, as the
    course pipeline does (one `map` call per batch, not per image). The images must share
    one size, as the images in the shards do.

    Args:
        encoded_images: JPEG bytes, all of one size.
        batch_size: images decoded per `map` call.

    Returns:
        An endless dataset of uint8 batches (batch_size, height, width, 3).

    Example:
        timing.measure_throughput(pipeline.decode_ceiling_dataset(jpegs, batch_size=64),
                                  num_images=2000)
    """
    batches = tf.data.Dataset.from_tensor_slices(encoded_images).repeat().batch(batch_size)
    return batches.map(
        lambda batch: tf.map_fn(
            lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), batch, fn_output_signature=tf.uint8
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
