"""The pipelines the profile measures: the course pipeline with one knob changed, the ceiling.

Built on the benchmark's data (3,670 embedded images in 16 shards of 192 px, local disk);
each is timed with the CPU time it takes per image (`time_with_cpu`).
"""

from __future__ import annotations

import time

from tools.course_benchmark.measure import quietly

TARGET_SIZE = 192
BATCH_SIZE = 64
NUM_IMAGES = 3670
STAGES = ["read", "+ parse", "+ decode", "+ prefetch (course pipeline)"]


def load_shards(num_images: int = NUM_IMAGES, num_shards: int = 16):
    """Returns the benchmark's shard paths, the number of classes and 1000 stored JPEGs."""
    import tensorflow as tf

    from utils import records
    from utils.lab import shard_cache, sources

    source = sources.resolve_source("embedded", num_images=num_images)
    shard_set = quietly(
        shard_cache.ensure_shards, source, target_size=TARGET_SIZE, num_shards=num_shards
    )
    paths = shard_set.paths
    jpegs = [
        records.parse_record(record)["image"].numpy()
        for record in tf.data.TFRecordDataset(paths).take(1000)
    ]
    return paths, len(shard_set.class_names), jpegs


def build(
    paths,
    *,
    num_classes: int,
    stage: str = STAGES[-1],
    cycle_length: int = 16,
    block_length: int | None = None,
    decode_calls=None,
    parse_batch: int = BATCH_SIZE,
    buffer_size: int | None = None,
    threads: int | None = None,
    intra_op: int | None = None,
    optimization: dict | None = None,
    dct_method: str = "",
    target_size: int = TARGET_SIZE,
    used_features_only: bool = False,
    records_per_read: int | None = None,
):
    """The course pipeline (`pipeline.tfrecord_images`, local disk) with one knob changed.

    With the defaults it is the course pipeline. `stage` stops it after one of STAGES;
    `cycle_length` and `block_length` set the `interleave` (one `TFRecordDataset` per
    file) that reads the shards; `decode_calls` fixes the parse-and-decode map's
    parallelism (default AUTOTUNE); `parse_batch` is the records per parse (and per output
    batch); `threads` and `intra_op` set `options.threading`; `optimization` sets
    `options.experimental_optimization` attributes; `used_features_only` parses the image
    and the one-hot label only (dense, `FixedLenFeature([num_classes])`), not all of
    `records.FEATURES` (five, the label a `VarLenFeature` made dense after);
    `records_per_read` hands the records from each file's reader to the interleave that many
    at a time (`TFRecordDataset(path).batch(n)`), then `rebatch`es them to `parse_batch`:
    one hand-over between threads per n records instead of one per record.
    """
    import tensorflow as tf

    from utils import records

    autotune = tf.data.AUTOTUNE

    def read(path):
        records = tf.data.TFRecordDataset(path, buffer_size=buffer_size)
        return records.batch(records_per_read) if records_per_read else records

    # An interleave, as `storage.read_tfrecords` reads: `TFRecordDataset(paths,
    # num_parallel_reads=16)` would keep the files' order whatever the options say.
    serialized = tf.data.Dataset.from_tensor_slices(paths).interleave(
        read,
        cycle_length=cycle_length,
        block_length=block_length,  # None: 1, as the course pipeline reads.
        num_parallel_calls=cycle_length,
    )
    options = tf.data.Options()
    options.deterministic = False
    if threads is not None:
        options.threading.private_threadpool_size = threads
    if intra_op is not None:
        options.threading.max_intra_op_parallelism = intra_op
    for name, value in (optimization or {}).items():
        setattr(options.experimental_optimization, name, value)
    serialized = serialized.with_options(options)
    if records_per_read:
        batches = serialized.rebatch(parse_batch)
    else:
        batches = serialized.batch(parse_batch)
    if stage == STAGES[0]:
        return batches.repeat()

    features = records.FEATURES
    if used_features_only:
        features = {
            "image": records.FEATURES["image"],
            "one_hot_class": tf.io.FixedLenFeature([num_classes], tf.float32),
        }

    def parse(batch):
        return tf.io.parse_example(batch, features)

    def parse_and_decode(batch):
        parsed = parse(batch)
        images = tf.map_fn(
            lambda jpeg: tf.reshape(
                tf.io.decode_jpeg(jpeg, channels=3, dct_method=dct_method),
                [target_size, target_size, 3],
            ),
            parsed["image"],
            fn_output_signature=tf.uint8,
        )
        labels = parsed["one_hot_class"]
        if not used_features_only:
            labels = tf.reshape(tf.sparse.to_dense(labels), [-1, num_classes])
        return images, labels

    if stage == STAGES[1]:
        return batches.map(parse, num_parallel_calls=autotune).map(lambda r: r["image"]).repeat()
    dataset = batches.map(parse_and_decode, num_parallel_calls=decode_calls or autotune)
    if stage == STAGES[2]:
        return dataset.repeat()
    return dataset.prefetch(autotune).repeat()


def ceiling(jpegs, *, dct_method: str = ""):
    """The decode ceiling (`pipeline.decode_ceiling_dataset`), with a choice of DCT method."""
    import tensorflow as tf

    from utils import pipeline

    if not dct_method:
        return pipeline.decode_ceiling_dataset(jpegs, batch_size=BATCH_SIZE)
    batches = tf.data.Dataset.from_tensor_slices(jpegs).repeat().batch(BATCH_SIZE)
    return batches.map(
        lambda batch: tf.map_fn(
            lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3, dct_method=dct_method),
            batch,
            fn_output_signature=tf.uint8,
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def time_with_cpu(dataset, num_images: int, cpu_log: list):
    """Times `dataset` after one warm-up element; logs CPU seconds per image; returns images/s."""
    from utils import timing

    iterator = iter(dataset)
    next(iterator)
    counted = 0
    cpu_start, start = time.process_time(), time.perf_counter()
    for element in iterator:
        counted += timing._count_images(element)
        if counted >= num_images:
            break
    seconds = time.perf_counter() - start
    cpu_log.append((time.process_time() - cpu_start) / counted)
    return counted / seconds
