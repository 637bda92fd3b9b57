"""The course benchmark's pipelines, timed in turns at each latency, and their JSON form."""

from __future__ import annotations

from tools.course_benchmark.measure import figures_of, in_turns_by_row, quietly, rate
from tools.course_benchmark.settings import (
    BATCH_SIZE,
    CEILING,
    COURSE,
    FILES_IN_FLIGHT,
    FILES_ONE_AT_A_TIME,
    FROM_DIRECTORY,
    GRAIN,
    GRAIN_BEST,
    GRAIN_PER_RECORD,
    HEADLINE,
    LATENCIES_MS,
    NUM_PARALLEL_READS,
    NUM_SHARDS,
    ORIGINAL,
    TARGET_SIZE,
    Row,
)


def course_dataset(shard_paths, num_classes: int, storage):
    """The course pipeline (`pipeline.tfrecord_images`) as the benchmark reads it: endless."""
    from utils import pipeline

    return pipeline.tfrecord_images(
        shard_paths,
        target_size=TARGET_SIZE,
        num_classes=num_classes,
        batch_size=BATCH_SIZE,
        storage=storage,
        num_parallel_reads=NUM_PARALLEL_READS,
        epochs=None,  # Endless, the epochs joined before the reads.
    )


def pipelines(
    source, shard_paths, class_names, storage, settings, array_records=None, grain_setting=None
) -> dict:
    """Returns the pipelines to compare, by name: (make_dataset, images to time).

    Grain + ArrayRecord is among them when `array_records` (its files) is given; Grain at
    its best too when `grain_setting` (`num_workers` and `decoder`) is given.
    """
    import keras
    import tensorflow as tf

    from tools.course_benchmark import read_routing
    from utils.lab import conversion

    slow = storage.latency_ms > 0
    image_root = source.pattern.rsplit("/", 2)[0]

    def files(parallel: bool):
        # The source's own list: a local folder's path is never used as a glob.
        image_paths = conversion.source_paths(source)
        paths = tf.data.Dataset.from_tensor_slices(image_paths).shuffle(len(image_paths), seed=0)

        def decode(path):
            return tf.io.decode_jpeg(storage.read_file(path), channels=3)

        if not parallel:
            return paths.map(decode)
        options = tf.data.Options()
        options.threading.private_threadpool_size = NUM_PARALLEL_READS
        return paths.map(decode, num_parallel_calls=NUM_PARALLEL_READS).with_options(options)

    def from_directory():
        # Keras reads each file with tf.io.read_file while it builds the dataset's map:
        # route those reads through the (simulated) storage.
        with read_routing.routing_tf_read_file(storage):
            dataset = quietly(
                keras.utils.image_dataset_from_directory,
                image_root,
                image_size=(TARGET_SIZE, TARGET_SIZE),
                batch_size=32,
            )
        return dataset.repeat()

    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "one_hot_class": tf.io.VarLenFeature(tf.float32),
    }

    def original_course():
        def read_tfrecord(serialized):
            record = tf.io.parse_single_example(serialized, features)
            image = tf.io.decode_jpeg(record["image"], channels=3)
            image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
            return image, tf.sparse.to_dense(record["one_hot_class"])

        # The original course's reader, kept as it was: `num_parallel_reads=AUTOTUNE` (which,
        # unlike an integer, builds an interleave that honours `deterministic = False`).
        records = storage.tfrecord_dataset(shard_paths, num_parallel_reads=tf.data.AUTOTUNE)
        ignore_order = tf.data.Options()
        ignore_order.deterministic = False
        records = records.with_options(ignore_order)
        dataset = records.map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.batch(BATCH_SIZE).prefetch(tf.data.AUTOTUNE).repeat()

    def grain_arrayrecord(request_per_record=False, num_workers=0, decoder="pillow"):
        from tools.course_benchmark import grain_loader

        return grain_loader.grain_images(
            array_records,
            num_classes=len(class_names),
            batch_size=BATCH_SIZE,
            storage=storage,
            request_per_record=request_per_record,
            num_workers=num_workers,
            decoder=decoder,
        )

    named = {
        FILES_ONE_AT_A_TIME: (
            lambda: files(False).repeat(),
            settings["timed_sequential"] if slow else settings["timed_files"],
        ),
        FILES_IN_FLIGHT: (lambda: files(True).repeat(), settings["timed_files"]),
        FROM_DIRECTORY: (
            from_directory,
            settings["timed_files"] // (4 if slow else 1),
        ),
        ORIGINAL: (original_course, settings["timed"]),
        COURSE: (lambda: course_dataset(shard_paths, len(class_names), storage), settings["timed"]),
    }
    if array_records:
        named[GRAIN] = (grain_arrayrecord, settings["timed"])
        named[GRAIN_PER_RECORD] = (
            lambda: grain_arrayrecord(request_per_record=True),
            settings["timed_files"] if slow else settings["timed"],
        )
    if array_records and grain_setting:
        named[GRAIN_BEST] = (
            lambda: grain_arrayrecord(
                num_workers=grain_setting["num_workers"], decoder=grain_setting["decoder"]
            ),
            settings["timed"],
        )
    return named


def benchmark_data(settings: dict):
    """Returns the benchmark's source, its shards (`ShardSet`) and 1000 of their JPEGs' bytes."""
    import tensorflow as tf

    from utils import records
    from utils.lab import shard_cache, sources

    source = sources.resolve_source("embedded", num_images=settings["num_images"])
    shard_set = quietly(
        shard_cache.ensure_shards, source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
    )
    stored_jpegs = [
        records.parse_record(record)["image"].numpy()
        for record in tf.data.TFRecordDataset(shard_set.paths).take(1000)
    ]
    return source, shard_set, stored_jpegs


def compare_pipelines(settings: dict) -> tuple[dict, dict | None]:
    """Measures every pipeline at each latency, and the decode ceiling; returns the results.

    The headline pipelines (the ceiling, the original course's TFRecords, the course
    pipeline and Grain's rows at each latency) are measured in turns, `headline_repeats`
    rounds, each run after `headline_warmup_batches` untimed (the start of a pipeline, which
    a training job pays once: at 50 ms its first opens and its buffers filling); the slower
    rest in turns among themselves, `repeats` rounds. Each result keeps
    its runs, in round order, so that ratios are taken within a round
    (`comparison.ratio_in_turns`). Grain at its best is chosen first (`grain_best.choose`).

    Returns:
        (`Row` -> figures, `grain_best.choose`'s result or None without Grain).
    """
    from tools.course_benchmark import grain_best, grain_loader
    from utils import pipeline, storage

    source, shard_set, stored_jpegs = benchmark_data(settings)
    shard_paths = shard_set.paths
    skipped = grain_loader.missing_reason()
    array_records = None if skipped else grain_loader.ensure_array_records(shard_paths)
    if skipped:
        print(f"  {skipped}", flush=True)
    num_classes = len(shard_set.class_names)
    choice = grain_best.choose(array_records, num_classes, settings) if array_records else None
    ceiling = lambda: pipeline.decode_ceiling_dataset(stored_jpegs, batch_size=BATCH_SIZE)  # noqa: E731
    cpu = {CEILING: []}
    warmup = settings["headline_warmup_batches"]  # Each start untimed: a job pays it once.
    headline = {CEILING: rate(ceiling, settings["timed"], cpu[CEILING], warmup)}
    others = {}
    for latency in LATENCIES_MS:
        simulated = storage.SimulatedStorage(latency_ms=latency)
        named = pipelines(
            source,
            shard_paths,
            shard_set.class_names,
            simulated,
            settings,
            array_records,
            choice and choice["chosen"],
        )
        for name, (make_dataset, num_images) in named.items():
            row = Row(name, latency)
            if name in HEADLINE:
                cpu[row] = []
                headline[row] = rate(make_dataset, num_images, cpu[row], warmup)
            else:
                others[row] = rate(make_dataset, num_images)
    print(
        f"  headline: {len(headline)} pipelines in turns, {settings['headline_repeats']} "
        "rounds ...",
        flush=True,
    )
    measured = in_turns_by_row(headline, repeats=settings["headline_repeats"])
    print(f"  the others: {len(others)} in turns, {settings['repeats']} rounds ...", flush=True)
    measured.update(in_turns_by_row(others, repeats=settings["repeats"]))
    order = [CEILING] + [Row(name, latency) for latency in LATENCIES_MS for name in named]
    results = {row: figures_of(measured[row]) for row in order}
    for row, per_image in cpu.items():
        results[row]["cpu_us_per_image"] = [seconds * 1e6 for seconds in per_image]
    return results, choice


def results_to_json(results: dict) -> dict:
    """The results as `benchmark.json` holds them: by label, each with its row's fields."""
    return {row.label: {**row._asdict(), **figures} for row, figures in results.items()}


def results_from_json(by_label: dict) -> dict:
    """`benchmark.json`'s pipelines back as `Row` -> figures (from the fields, not the label)."""
    return {
        Row(**{field: figures.get(field) for field in Row._fields}): {
            key: value for key, value in figures.items() if key not in Row._fields
        }
        for figures in by_label.values()
    }
