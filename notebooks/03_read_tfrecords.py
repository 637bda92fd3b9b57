# %% [markdown]
# # Lab 3 · Read TFRecords in parallel: the fast speed test
#
# Lab 1 read one image per request and measured how slow that is; lab 2 packed the
# images into a few TFRecord shards. Here you read those shards back, from the same
# (simulated) storage, and measure what it buys and what each setting of the pipeline
# contributes.
#
# **You will:**
#
# 1. Declare the record's features and parse one record into an image and a label (TODO 1).
# 2. Read many shards at once, in whatever order they come (TODO 2).
# 3. Parse a whole batch of records at once, and measure whether it pays (TODO 3).
# 4. Batch, parse by batch and prefetch: the pipeline that feeds training (TODO 4).
#
# Then you compare it with lab 1's individual files and with the machine's limit, and
# measure each knob on its own.

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import collections
import hashlib
import os

import tensorflow as tf

from utils import (
    charts,
    checks,
    comparison,
    conversion,
    display,
    knobs,
    machine_load,
    pipeline,
    pipeline_trace,
    shard_cache,
    sources,
    storage,
    timing,
)

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards to read (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
LATENCY_MS = 50  # Simulated first-byte latency per object: the median (as in lab 1).
LATENCY_P99_MS = 500  # Its 99th percentile (as in lab 1); None: every request takes LATENCY_MS.
STREAM_MEGABYTES_PER_SECOND = 85  # Bandwidth of one object stream; None: no cap.
TOTAL_MEGABYTES_PER_SECOND = None  # Bandwidth of all streams together; None: no cap.
NUM_PARALLEL_READS = 16  # Shards read at once.
BATCH_SIZE = 64
NUM_TIMED_IMAGES = 8000  # Images timed in each TFRecord measurement (about 1 s each).
NUM_TIMED_FILES = 400  # Images timed for individual files read in parallel (lab 1).
NUM_TIMED_SEQUENTIAL = 40  # Images timed for individual files one at a time (~12/s).
SPEED_TEST_REPEATS = 5  # Rounds of the speed test, taken in turns (a median and a range).
ABLATION_PARALLEL_READS = [1, 4, 16]  # Settings of num_parallel_reads to measure.
ABLATION_SHARD_COUNTS = [1, 4, 16, 64]  # Shard counts to measure (written if missing).
ABLATION_REPEATS = 5  # Rounds of each knob's settings, taken in turns.
STEP_MS = 20  # Time of the stand-in accelerator's step per batch, in the timeline.
TIMELINE_BATCHES = 40  # Batches traced in the timeline (both pipelines start slowly).
SEED = 42

# %% [markdown]
# ## The shards
#
# `shard_cache.ensure_shards()` finds the shards lab 2 wrote for this source and these
# settings, or writes them now (the same conversion, with the course's own functions).
# The sidecar JSON lab 2 wrote says what they hold.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
shard_paths = shard_set.paths  # Checked against the sidecar: none missing or extra.
class_names = shard_set.class_names
num_records = shard_set.num_records
shard_megabytes = sum(tf.io.gfile.stat(p).length for p in shard_paths) / 1e6 / len(shard_paths)
print(f"{len(shard_paths)} shards, {num_records} records, {shard_megabytes:.1f} MB per shard")
print("Classes:", class_names)

# %% [markdown]
# The simulated storage behaves like object storage, with lab 1's model and defaults (so
# the two labs' numbers compare):
#
# - First-byte latency: most requests are quick, a few very slow; lognormal, median
#   `LATENCY_MS`, 99th percentile `LATENCY_P99_MS`. AWS's "Best practices design patterns:
#   optimizing Amazon S3 performance" gives tens of milliseconds for small requests and
#   100-200 ms for larger objects, and advises retrying the slowest 1-5%; "The Tail at
#   Scale" (Dean and Barroso, CACM 2013, Table 1) measured a 99th percentile 10 times the
#   median for one request to a large service.
# - Per-stream bandwidth `STREAM_MEGABYTES_PER_SECOND` (the same guide: one concurrent
#   request per 85-90 MB/s wanted). A shard streams: its first records arrive first.
# - Total bandwidth `TOTAL_MEGABYTES_PER_SECOND` (your network), off by default.
#
# `None` for `LATENCY_P99_MS` and `STREAM_MEGABYTES_PER_SECOND` (here and in lab 1) gives
# the simpler model: every request exactly `LATENCY_MS`, no bandwidth limit. A simulated
# wait holds a thread, as a blocking read does, so the reads get a pool of their own, one
# thread per read in flight; parsing and decoding run on `tf.data`'s usual pool.

# %%
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
    total_megabytes_per_second=TOTAL_MEGABYTES_PER_SECOND,
    seed=SEED,
)
print(simulated_storage.describe())

# %% [markdown]
# ## 1. Parse a record (TODO 1)
#
# Reading a record back needs its schema: for each feature, its type and shape.
# - `tf.io.FixedLenFeature(shape, dtype)`: a fixed number of values (`[]` for one).
# - `tf.io.VarLenFeature(dtype)`: any number of values; it parses to a sparse tensor,
#   which `tf.sparse.to_dense()` turns into an ordinary one.
# - `default_value=`: what a `FixedLenFeature` gives when a record lacks it, so that
#   older records without that field still parse.
#
# **TODO 1.** Declare `features`: `"image"` (one string), `"class"` (one int64),
# `"one_hot_class"` (a float32 `VarLenFeature`), and `"size"` (two int64, with
# `default_value=[0, 0]`). Then complete `read_tfrecord(serialized)`: parse with
# `tf.io.parse_single_example`, decode the image with `tf.io.decode_jpeg(...,
# channels=3)` and `tf.reshape` it to `[TARGET_SIZE, TARGET_SIZE, 3]` (the decoder
# cannot know the size, Keras and TPUs want it), and make the one-hot label dense with
# `tf.sparse.to_dense`, reshaped to `[len(class_names)]`. Return `(image, one_hot)`.

# %%
# TODO 1: declare the features of a record.
### BEGIN SOLUTION
features = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}
### END SOLUTION


def read_tfrecord(serialized):
    """Parses one record; returns (uint8 image of static shape, float32 one-hot label)."""
    # TODO 1: parse, decode and reshape the image, make the one-hot label dense.
    ### BEGIN SOLUTION
    record = tf.io.parse_single_example(serialized, features)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
    one_hot = tf.sparse.to_dense(record["one_hot_class"])
    one_hot = tf.reshape(one_hot, [len(class_names)])
    ### END SOLUTION
    return image, one_hot


# %%
# NBVAL_CHECK_OUTPUT
checks.check_read_tfrecord(
    read_tfrecord,
    features,
    todo=1,
    shard_paths=shard_paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
)

# %% [markdown]
# ## 2. Read many shards at once (TODO 2)
#
# `tf.data.TFRecordDataset(filenames, num_parallel_reads=N)` reads N files at once and
# interleaves their records. Each file is one object on storage: N files at once means N
# first-byte waits overlap. Offline, `simulated_storage.tfrecord_dataset()` takes the same
# arguments and charges `LATENCY_MS` for every shard it opens.
#
# By default `tf.data` keeps a fixed order: with N files, it waits for the file whose turn
# it is, even when another already has records ready. Training does not need that order
# (the data is shuffled anyway), and `options.deterministic = False` lets the fastest
# file go first. (It replaces the older `options.experimental_deterministic`.)
#
# **TODO 2.** Make `dataset`: read `shard_paths` with
# `simulated_storage.tfrecord_dataset(..., num_parallel_reads=NUM_PARALLEL_READS)`, apply
# `tf.data.Options()` with `deterministic = False` using `with_options()`, and map
# `read_tfrecord` with `num_parallel_calls=tf.data.AUTOTUNE`. Options count only on the
# dataset you go on to use: `records.with_options(options)` returns a new dataset.

# %%
# TODO 2: read the shards in parallel, in any order, and parse each record.
### BEGIN SOLUTION
options = tf.data.Options()
options.deterministic = False
records = simulated_storage.tfrecord_dataset(shard_paths, num_parallel_reads=NUM_PARALLEL_READS)
records = records.with_options(options)
dataset = records.map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_parallel_records(
    dataset,
    todo=2,
    storage=simulated_storage,
    num_parallel_reads=NUM_PARALLEL_READS,
    num_shards=len(shard_paths),
    num_records=num_records,
    shard_paths=shard_paths,
)

# %%
labelled = dataset.map(lambda image, one_hot: (image, tf.argmax(one_hot)))
figure = display.show_images(labelled, class_names=class_names, num_images=8, num_columns=4)

# %% [markdown]
# ## 3. Parse a batch at once (TODO 3)
#
# `parse_single_example` runs once per record. `tf.io.parse_example` parses a whole batch
# of serialized records in one call, with less overhead per record. The images still
# have to be decoded one by one (`tf.map_fn` runs a function over the batch).
#
# **TODO 3.** Complete `parse_batch(serialized_batch)`: parse with
# `tf.io.parse_example(serialized_batch, features)`; decode the images with
# `tf.map_fn(decode, parsed["image"], fn_output_signature=tf.uint8)` using the `decode`
# function below; make the one-hot labels dense and reshape them to
# `[-1, len(class_names)]`. Return `(images, one_hots)`.


# %%
def decode(image_jpeg):
    """Decodes one stored JPEG to a uint8 image of static shape."""
    return tf.reshape(tf.io.decode_jpeg(image_jpeg, channels=3), [TARGET_SIZE, TARGET_SIZE, 3])


def parse_batch(serialized_batch):
    """Parses a batch of records; returns (images, one-hot labels), batched."""
    # TODO 3: parse the batch, decode each image, make the labels dense.
    ### BEGIN SOLUTION
    parsed = tf.io.parse_example(serialized_batch, features)
    images = tf.map_fn(decode, parsed["image"], fn_output_signature=tf.uint8)
    one_hots = tf.sparse.to_dense(parsed["one_hot_class"])
    one_hots = tf.reshape(one_hots, [-1, len(class_names)])
    ### END SOLUTION
    return images, one_hots


# %%
# NBVAL_CHECK_OUTPUT
checks.check_parse_batch(parse_batch, todo=3, read_tfrecord=read_tfrecord, shard_paths=shard_paths)

# %% [markdown]
# Does it pay? Measured on records already in memory (so that storage plays no part):
# parsing alone, then parsing and decoding, one record at a time versus a batch at a time.

# %%
# A sample of NUM_TIMED_IMAGES records at most, so that memory stays bounded on a big folder.
in_memory = tf.data.TFRecordDataset(shard_paths).take(NUM_TIMED_IMAGES).cache()
in_memory_count = sum(1 for _ in in_memory)  # Fills the cache.


def parse_only(serialized):
    return tf.io.parse_single_example(serialized, features)["image"]


def parse_only_batch(serialized_batch):
    return tf.io.parse_example(serialized_batch, features)["image"]


AUTOTUNE = tf.data.AUTOTUNE
parse_variants = {
    "parse, one by one": in_memory.map(parse_only, num_parallel_calls=AUTOTUNE).batch(BATCH_SIZE),
    "parse, batched": in_memory.batch(BATCH_SIZE).map(
        parse_only_batch, num_parallel_calls=AUTOTUNE
    ),
    "parse+decode, one by one": in_memory.map(read_tfrecord, num_parallel_calls=AUTOTUNE).batch(
        BATCH_SIZE
    ),
    "parse+decode, batched": in_memory.batch(BATCH_SIZE).map(
        parse_batch, num_parallel_calls=AUTOTUNE
    ),
}
parse_runs = comparison.measure_in_turns(
    {label: variant.repeat() for label, variant in parse_variants.items()},
    num_images=2 * in_memory_count,
    repeats=SPEED_TEST_REPEATS,
)

# %%
for what in ("parse", "parse+decode"):
    batched, one_by_one = parse_runs[f"{what}, batched"], parse_runs[f"{what}, one by one"]
    print(comparison.describe_difference([batched, one_by_one], name=f"{what} by batch"))

# %% [markdown]
# Every element through a `map()` costs a function call and some bookkeeping. Parsing
# alone is cheap, so that overhead weighs on it most, and batches remove most of it.
# Decoding costs much more than parsing, so there the same saving is a smaller share: the
# two lines above say whether either is beyond the noise here. The course parses by batch.
#
# ## 4. The pipeline that feeds training (TODO 4)
#
# Training takes batches, and the accelerator should never wait for the next one:
# `prefetch(tf.data.AUTOTUNE)` prepares the next batches on the CPU while the
# accelerator works on the current one.
#
# **TODO 4.** Make `fast`: the `records` of TODO 2 (read in parallel, order not kept)
# batched by `BATCH_SIZE`, mapped with `parse_batch` and
# `num_parallel_calls=tf.data.AUTOTUNE`, then prefetched with `tf.data.AUTOTUNE`.

# %%
# TODO 4: batch the records, parse each batch, prefetch.
### BEGIN SOLUTION
fast = records.batch(BATCH_SIZE)
fast = fast.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
fast = fast.prefetch(tf.data.AUTOTUNE)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_fast_dataset(fast, todo=4, batch_size=BATCH_SIZE)

# %% [markdown]
# ## The fast speed test
#
# The same images on the same simulated storage (lab 1's model and settings), four ways:
# lab 1's files, one request at a time and `NUM_PARALLEL_READS` in flight; the shards one
# after another; and your pipeline. Lab 1's files are the originals (larger, slower to
# decode), the shards lab 2's recompressed images: both effects are in the ratio, as in
# practice. Timed in turns, `SPEED_TEST_REPEATS` rounds: a median and a range each, the
# ratios taken within each round.

# %%
image_paths = list(conversion.source_paths(source))
image_files = tf.data.Dataset.from_tensor_slices(image_paths).shuffle(len(image_paths), seed=SEED)


def read_image_file(path):
    """Lab 1's reading: one object per image."""
    return tf.io.decode_jpeg(simulated_storage.read_file(path), channels=3)


threads = tf.data.Options()
threads.threading.private_threadpool_size = NUM_PARALLEL_READS
files_one_at_a_time = image_files.map(read_image_file).ignore_errors()
files_in_parallel = image_files.map(read_image_file, NUM_PARALLEL_READS).with_options(threads)
records_one_reader = pipeline.tfrecord_images(
    shard_paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    storage=simulated_storage,
    num_parallel_reads=None,
    deterministic=True,
    batch_size=BATCH_SIZE,
)
speed_runs = comparison.measure_in_turns(
    {
        "files, one at a time": timing.throughput_timer(
            files_one_at_a_time, num_images=NUM_TIMED_SEQUENTIAL
        ),
        "files, parallel": timing.throughput_timer(
            files_in_parallel.ignore_errors(), num_images=NUM_TIMED_FILES
        ),
        "TFRecords, one reader": timing.throughput_timer(
            records_one_reader.repeat(), num_images=NUM_TIMED_IMAGES
        ),
        "TFRecords, fast": timing.throughput_timer(fast.repeat(), num_images=NUM_TIMED_IMAGES),
    },
    repeats=SPEED_TEST_REPEATS,
)

# %%
records_parallel = speed_runs["TFRecords, fast"]
over_one_at_a_time = comparison.ratio_in_turns(
    records_parallel, speed_runs["files, one at a time"], label="fast / files one at a time"
)
over_best_files = comparison.ratio_in_turns(
    records_parallel, speed_runs["files, parallel"], label="fast / files in parallel"
)
print(over_one_at_a_time.summary(",.0f") + " x")
print(over_best_files.summary(",.1f") + " x")
print(
    comparison.describe_difference([records_parallel, speed_runs["files, parallel"]], name="Speed")
)

# %% [markdown]
# ## Against the machine's limit
#
# No pipeline of JPEGs goes faster than the CPU decodes them. The ceiling: the same JPEG
# bytes decoded from memory, a batch at a time on all cores, no storage, no parsing;
# against it, the course pipeline reading the shards from local disk. Timed in turns, the
# share given with its range (one pair of runs can land on a busy moment). A share above
# 100% is noise: reading, parsing and decoding cannot beat decoding alone.

# %%
stored_jpegs = [
    tf.io.parse_single_example(record, features)["image"].numpy()
    for record in tf.data.TFRecordDataset(shard_paths).take(1000)
]
local_pipeline = pipeline.tfrecord_images(
    shard_paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    num_parallel_reads=NUM_PARALLEL_READS,
    batch_size=BATCH_SIZE,
    epochs=None,  # Endless: the passes joined before the reads (see the knobs below).
)
ceiling_dataset = pipeline.decode_ceiling_dataset(stored_jpegs, batch_size=BATCH_SIZE)
# In turns, the order reversed every other round: a busy moment lands on both sides.
with machine_load.LoadWatch() as machine_load:
    runs = comparison.measure_in_turns(
        {
            "decode ceiling (in memory)": ceiling_dataset,
            "TFRecords, fast, local disk": local_pipeline,
        },
        num_images=NUM_TIMED_IMAGES // 2,
        repeats=5,
    )
print(machine_load.summary())
ceiling, local_records = runs["decode ceiling (in memory)"], runs["TFRecords, fast, local disk"]
share = comparison.ratio_in_turns(local_records, ceiling)
print(comparison.describe_share_of_ceiling(share, name="The course pipeline on local disk"))
figure = charts.plot_throughput(
    list(speed_runs.values()), title=simulated_storage.describe(), ceiling=ceiling
)

# %% [markdown]
# Each bar is a median, its line the range of the rounds. The dashed line is the decode
# ceiling: no bar can stay above it for long.
#
# ## A timeline of the pipeline, measured
#
# A speed test gives one number, not *when* each batch is ready. Here two pipelines feed
# a stand-in accelerator taking `STEP_MS` per batch, and each batch is timed: read from
# storage, parsed and decoded, consumed by the step (a grey line: a batch waiting for its
# step). Left, one shard and one stage at a time; right, your `records` (several shards,
# any order) with a parallel map and prefetch: the TensorFlow performance guide's
# picture, measured.

# %%
traced = [
    pipeline_trace.trace_pipeline(
        simulated_storage.tfrecord_dataset(shard_paths),
        parse_batch,
        batch_size=BATCH_SIZE,
        num_batches=TIMELINE_BATCHES,
        step_ms=STEP_MS,
        parallel=False,
        label="one reader, one stage at a time",
    ),
    pipeline_trace.trace_pipeline(
        records,
        parse_batch,
        batch_size=BATCH_SIZE,
        num_batches=TIMELINE_BATCHES,
        step_ms=STEP_MS,
        parallel=True,
        label="parallel reads, map, prefetch",
    ),
]
for run in traced:
    print(
        f"{run.label}: {TIMELINE_BATCHES} steps in {run.seconds:.2f} s, "
        f"{run.waiting_seconds:.2f} s of it waiting for data."
    )
figure = charts.plot_timelines(traced)

# %% [markdown]
# ## What each knob buys
#
# Each group changes one setting of the course pipeline and keeps the others (simulated
# storage, `NUM_PARALLEL_READS` reads, the passes repeated before the reads, order not
# kept, prefetch on, no cache, `NUM_SHARDS` shards). `cache`'s row times the second pass,
# from memory (where the decoded images would pass 512 MB, both cache rows read only the
# first shards, as labelled). Settings are timed in turns, `ABLATION_REPEATS` rounds, each
# a median and range. The verdict compares the fastest and slowest: "beyond the noise"
# only when their ranges do not overlap, however far apart the medians. With 5 rounds, two
# equal settings get separate ranges by chance in fewer than 1% of cases (2 in 252
# orderings); with 3, in 10%.


# %%
# The same records copied into each shard count, once (no image is converted again).
paths_by_count = {count: shard_cache.reshard(shard_set, count) for count in ABLATION_SHARD_COUNTS}
ablation = knobs.measure_knobs(
    shard_paths,
    paths_by_count=paths_by_count,
    parallel_reads=[*ABLATION_PARALLEL_READS, tf.data.AUTOTUNE],
    storage=simulated_storage,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    num_parallel_reads=NUM_PARALLEL_READS,
    batch_size=BATCH_SIZE,
    num_records=num_records,
    num_timed_images=NUM_TIMED_IMAGES // 2,
    repeats=ABLATION_REPEATS,
)

# %%
print("\n".join(knobs.describe_verdicts(ablation)))
print(knobs.describe_open_shards(ablation, num_cores=os.cpu_count()))

# %% [markdown]
# What the storage did during those runs, and what the pipeline asks of it: the first-byte
# waits it drew, and the bandwidth the fast pipeline needs against what one stream gives.

# %%
storage_demand = knobs.describe_storage_demand(
    ablation.first_bytes_ms,
    images_per_second=records_parallel.median,
    bytes_per_record=sum(tf.io.gfile.stat(p).length for p in shard_paths) / num_records,
    stream_megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
)
print("\n".join(storage_demand))

# %% [markdown]
# ## Order, when you need it
#
# With `deterministic = False` the records come in the order the reads finish: two passes
# over `dataset` give the same records in a different order. Keep the order to pair
# predictions with their inputs, or to compare two evaluation runs record by record.


# %%
def fingerprints(records_dataset):
    """Returns a short hash of each image, in the order the dataset gives them."""
    return [
        hashlib.sha256(image.tobytes()).hexdigest()[:12]
        for image, _ in records_dataset.as_numpy_iterator()
    ]


first_pass, second_pass = fingerprints(dataset), fingerprints(dataset)
same_records = collections.Counter(first_pass) == collections.Counter(second_pass)
print(
    f"Non-deterministic: same records in both passes: {same_records}; "
    f"same order: {first_pass == second_pass}"
)
keep_order = tf.data.Options()
keep_order.deterministic = True
ordered = simulated_storage.tfrecord_dataset(shard_paths, num_parallel_reads=NUM_PARALLEL_READS)
ordered = ordered.with_options(keep_order).map(read_tfrecord, num_parallel_calls=AUTOTUNE)
ordered_first, ordered_second = fingerprints(ordered), fingerprints(ordered)
print(f"Deterministic: same order in both passes: {ordered_first == ordered_second}")
print("First 6 images of each non-deterministic pass:", first_pass[:6], second_pass[:6], sep="\n")

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
files_sequential, files_parallel = speed_runs["files, one at a time"], speed_runs["files, parallel"]
print(
    f"On the same simulated storage (medians of {records_parallel.num_runs} rounds in turns): "
    f"individual files {files_sequential.median:.1f} images/s one at a time, "
    f"{files_parallel.median:,.0f} in parallel; the TFRecord pipeline "
    f"{records_parallel.median:,.0f} images/s, {over_one_at_a_time.median:,.0f}x the first "
    f"({over_one_at_a_time.minimum:,.0f}-{over_one_at_a_time.maximum:,.0f}x) and "
    f"{over_best_files.median:,.1f}x the best file-reading variant "
    f"({over_best_files.minimum:,.1f}-{over_best_files.maximum:,.1f}x)."
)
print(
    f"On local disk the pipeline reads {local_records.median:,.0f} images/s and the machine "
    f"decodes {ceiling.median:,.0f} (medians of {share.num_runs} runs in turns)."
)
print(comparison.describe_share_of_ceiling(share, name="The pipeline"))
print(knobs.describe_open_shards(ablation, num_cores=os.cpu_count()))
print("What each knob buys, median (range) of each setting:")
print("\n".join(knobs.describe_ranges(ablation.results)))
print("\n".join(knobs.describe_verdicts(ablation)))
figure = charts.plot_ablation(ablation.results, title=simulated_storage.describe())

# %% [markdown]
# Reading the table: each knob's verdict is printed above, and only a verdict "beyond
# the noise" says that a setting mattered on this run. What each knob does:
# - **num_parallel_reads**: each shard costs one first-byte wait; reading several at once
#   overlaps them, and several streams add up their bandwidth. `AUTOTUNE` lets `tf.data`
#   choose; the line above compares the shards it kept open with one reader's count (one
#   reader also opens the next shards ahead). Give a number when you mean parallel reads.
# - **shards**: fewer, larger files mean fewer waits, but fewer files to read in parallel;
#   the usual guidance is files of 10-100 MB or more, and at least 10 times as many files
#   as hosts reading them. Whether it shows here depends on the bandwidth printed above:
#   when one stream gives more than the pipeline needs, one shard can keep up, and only
#   the first-byte wait at the start of each pass is left to lose. A faster host needs
#   the number of streams printed above, so several shards read at once.
# - **repeat**: `repeat()` after the pipeline starts it again at each pass, and every
#   shard then waits for its first byte at the same moment, with nothing to decode;
#   repeating the file names *before* the reads (`pipeline.tfrecord_images(...,
#   epochs=None)`, or `.repeat()` on the list of names before `interleave`) joins the
#   passes, so the next pass's shards open while this one's last records are read. (Lab
#   4 caches the decoded images, so there the repeat comes after the cache.)
# - **deterministic**: keeping the order makes the pipeline wait for the file whose turn
#   it is; letting go of it lets the fastest file go first. A slow request costs only
#   when it is waited on: each shard is opened once per pass, so with few opens (see the
#   count above) a slow first byte is rare. Its verdict says whether keeping the order
#   cost anything measurable here.
# - **prefetch**: it lets the pipeline prepare the next batches while the consumer works
#   on the current one. Here the consumer only counts images, so there is little to
#   overlap; lesson 5 measures it with a training step as the consumer.
# - **cache**: after the first pass, no storage and no decoding at all, as long as the
#   decoded images fit in memory (here `num_records * TARGET_SIZE**2 * 3` bytes).
#
# *What changed from the original course:* `experimental_deterministic` is now
# `deterministic`, and it is set on the dataset you use (details: docs/lessons.md).

# %% [markdown]
# ## tf.data + TFRecord, or Grain + ArrayRecord?
#
# On a TPU runtime JAX comes first, and Kaggle's TPU image ships Grain, Google's data
# loader for JAX. It reads ArrayRecord files, which index their records: any record can
# be read by its number.
#
# - **tf.data + TFRecord**, this lab's pipeline, when the data streams from object
#   storage in large shards read whole, one request per shard, and TensorFlow is there
#   (Kaggle's TPU image has `tensorflow-cpu`; on Colab's TPU runtime you install it).
#   Parsing and decoding run in TensorFlow's threads, outside Python.
# - **Grain + ArrayRecord** for what an index gives: a global shuffle, reading a record by
#   its number, a deterministic iteration that can be checkpointed (a resumed run sees
#   the batches it would have seen); or a JAX-only runtime without TensorFlow. Its
#   per-record steps run in Python, in Grain's threads or worker processes.
#
# `python -m tools.benchmark` measures both on these images, each file charged the same
# first-byte wait per pass as a shard here (the course's docs/benchmark.md holds an idle
# run; this notebook states no ratio). That assumes files on local disk or cached near
# the machine: read from object storage one record at a time, each record is a request
# of its own (the benchmark's row "Grain, a request per record").
