# %% [markdown]
# # Lab 3 · Read TFRecords in parallel: the fast speed test
#
# Lab 1 read one image per request and measured how slow that is; lab 2 packed the images
# into a few TFRecord shards. Here you read those shards back, from the same (simulated)
# storage, and measure what it buys and what each setting of the pipeline contributes.
# **You will:**
#
# 1. Declare the record's features and parse one record into an image and a label (TODO 1).
# 2. Read many shards at once, in whatever order they come (TODO 2).
# 3. Parse a whole batch of records at once, and measure whether it pays (TODO 3).
# 4. Batch, parse by batch and prefetch: the pipeline that feeds training (TODO 4).
#
# Then you compare it with lab 1's individual files, on the same storage. (Optional lesson
# 8 takes the same pipeline against the machine's limit and measures each knob.)

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, installs TensorFlow where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import collections
import hashlib

import tensorflow as tf

from utils import charts, checks, comparison, display, pipeline, timing
from utils.lab import conversion, shard_cache, sources, storage

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
SEED = 42

# %% [markdown]
# ## The shards
#
# `shard_cache.ensure_shards()` finds the shards lab 2 wrote for this source and these
# settings (its sidecar JSON says what they hold), or writes them now, the same way.

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
#   100-200 ms for larger objects, and advises retrying the slowest 1-5%; "The Tail at Scale"
#   (Dean and Barroso, CACM 2013, Table 1) measured a p99 10 times the median.
# - Per-stream bandwidth `STREAM_MEGABYTES_PER_SECOND` (the same guide: one concurrent
#   request per 85-90 MB/s wanted). A shard streams: its first records arrive first.
# - Total bandwidth `TOTAL_MEGABYTES_PER_SECOND` (your network), off by default.
#
# `None` for `LATENCY_P99_MS` and `STREAM_MEGABYTES_PER_SECOND` gives the simpler model:
# every request exactly `LATENCY_MS`, no bandwidth limit. A simulated wait holds a thread, as
# a blocking read does, so the reads get a pool of their own, one thread per read in flight;
# parsing and decoding run on `tf.data`'s usual pool.

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
# `tf.io.FixedLenFeature(shape, dtype)` reads a fixed number of values (`[]` for one);
# `tf.io.VarLenFeature(dtype)` any number, as a sparse tensor (`tf.sparse.to_dense()` makes
# it dense). `default_value=` fills a missing `FixedLenFeature`, so older records still parse.
#
# **TODO 1.** Declare `features`: `"image"` (one string), `"class"` (one int64),
# `"one_hot_class"` (a float32 `VarLenFeature`), and `"size"` (two int64, with
# `default_value=[0, 0]`). Then complete `read_tfrecord(serialized)`: parse with
# `tf.io.parse_single_example`, decode the image with `tf.io.decode_jpeg(..., channels=3)`
# and `tf.reshape` it to `[TARGET_SIZE, TARGET_SIZE, 3]` (the decoder cannot know the size,
# Keras and TPUs want it), and make the one-hot label dense with `tf.sparse.to_dense`,
# reshaped to `[len(class_names)]`. Return `(image, one_hot)`.

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
# `files.interleave(tf.data.TFRecordDataset, cycle_length=N, num_parallel_calls=N)` reads N
# files at once and interleaves their records: N first-byte waits overlap. Offline,
# `simulated_storage.tfrecord_dataset(filenames, num_parallel_reads=N)` does the same, and
# charges `LATENCY_MS` for every shard it opens.
#
# By default `tf.data` keeps a fixed order: with N files, it waits for the file whose turn
# it is, even when another already has records ready. Training does not need that order
# (the data is shuffled anyway): `options.deterministic = False` (formerly
# `options.experimental_deterministic`) lets the fastest file go first. Not every reader
# obeys it: `tf.data.TFRecordDataset(filenames, num_parallel_reads=N)` with a number N
# builds its interleave with `deterministic` set to true, keeping the files' order. For
# records in any order, read through an `interleave()` (as `tfrecord_dataset()` does).
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
# `tf.io.parse_example` parses a whole batch of records in one call, with less overhead per
# record than `parse_single_example`; the images are still decoded one by one (`tf.map_fn`).
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
# Does it pay? Measured on records in memory (storage plays no part): parsing alone, then
# parsing and decoding, one record at a time versus a batch at a time.

# %%
# A sample of NUM_TIMED_IMAGES records at most, so that memory stays bounded on a big folder.
in_memory = tf.data.TFRecordDataset(shard_paths).take(NUM_TIMED_IMAGES).cache()
in_memory_count = sum(1 for _ in in_memory)  # Fills the cache.


def parse_only(serialized):
    return tf.io.parse_single_example(serialized, features)["image"]


def parse_only_batch(serialized_batch):
    return tf.io.parse_example(serialized_batch, features)["image"]


AUTOTUNE = tf.data.AUTOTUNE
in_batches = in_memory.batch(BATCH_SIZE)
decoded_one_by_one = in_memory.map(read_tfrecord, num_parallel_calls=AUTOTUNE)
parse_variants = {
    "parse, one by one": in_memory.map(parse_only, num_parallel_calls=AUTOTUNE).batch(BATCH_SIZE),
    "parse, batched": in_batches.map(parse_only_batch, num_parallel_calls=AUTOTUNE),
    "parse+decode, one by one": decoded_one_by_one.batch(BATCH_SIZE),
    "parse+decode, batched": in_batches.map(parse_batch, num_parallel_calls=AUTOTUNE),
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
# Every element through a `map()` costs a function call and some bookkeeping. Parsing alone
# is cheap, so that overhead weighs on it most, and batches remove most of it. Decoding
# costs much more, so there the same saving is a smaller share: the two lines above say
# whether either is beyond the noise here. The course parses by batch.
#
# ## 4. The pipeline that feeds training (TODO 4)
#
# Training takes batches, and the accelerator should never wait for the next one:
# `prefetch(tf.data.AUTOTUNE)` prepares the next batches on the CPU while it computes.
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
# practice. Timed in turns, `SPEED_TEST_REPEATS` rounds, the ratios taken within each round.
# The timer reads past the end of the shards, so the shard names are repeated *before* the
# reads: `fast.repeat()` would start your pipeline again at each pass, every shard waiting
# for its first byte at once (optional lesson 8 measures that cost).

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
    epochs=None,  # The shard names repeated before the reads, without end.
)
# Your pipeline of TODO 2 and 4, over the shard names repeated before the reads.
endless_names = tf.data.Dataset.from_tensor_slices(shard_paths).repeat()
endless_records = simulated_storage.tfrecord_dataset(
    endless_names, num_parallel_reads=NUM_PARALLEL_READS
).with_options(options)
fast_endless = endless_records.batch(BATCH_SIZE).map(parse_batch, num_parallel_calls=AUTOTUNE)
fast_endless = fast_endless.prefetch(AUTOTUNE)
timed = {  # Each way, and the images timed in each round.
    "files, one at a time": (files_one_at_a_time, NUM_TIMED_SEQUENTIAL),
    "files, parallel": (files_in_parallel.ignore_errors(), NUM_TIMED_FILES),
    "TFRecords, one reader": (records_one_reader, NUM_TIMED_IMAGES),
    "TFRecords, fast": (fast_endless, NUM_TIMED_IMAGES),
}
speed_runs = comparison.measure_in_turns(
    {label: timing.throughput_timer(data, num_images=n) for label, (data, n) in timed.items()},
    repeats=SPEED_TEST_REPEATS,
)

# %%
records_parallel = speed_runs["TFRecords, fast"]
files_sequential, files_parallel = speed_runs["files, one at a time"], speed_runs["files, parallel"]
over_one_at_a_time = comparison.ratio_in_turns(
    records_parallel, speed_runs["files, one at a time"], label="fast / files one at a time"
)
over_best_files = comparison.ratio_in_turns(
    records_parallel, speed_runs["files, parallel"], label="fast / files in parallel"
)
print(over_one_at_a_time.summary(",.0f") + " x")
print(over_best_files.summary(",.1f") + " x")
print(comparison.describe_difference([records_parallel, files_parallel], name="Speed"))
# Each bar is a median, its line the range of the rounds.
figure = charts.plot_throughput(list(speed_runs.values()), title=simulated_storage.describe())

# %% [markdown]
# ## Order, when you need it
#
# With `deterministic = False` the records come in the order the reads finish: two passes
# over `dataset` give the same records in another order. Keep the order to pair predictions
# with their inputs, or to compare two evaluation runs record by record.


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
print(
    f"On the same simulated storage (medians of {records_parallel.num_runs} rounds in turns): "
    f"individual files {files_sequential.median:.1f} images/s one at a time, "
    f"{files_parallel.median:,.0f} in parallel; the TFRecord pipeline "
    f"{records_parallel.median:,.0f} images/s, {over_one_at_a_time.median:,.0f}x the first "
    f"({over_one_at_a_time.minimum:,.0f}-{over_one_at_a_time.maximum:,.0f}x) and "
    f"{over_best_files.median:,.1f}x the best file-reading variant "
    f"({over_best_files.minimum:,.1f}-{over_best_files.maximum:,.1f}x)."
)

# %% [markdown]
# How close does this pipeline come to what the machine can decode at all, when is each
# batch ready, what does each setting buy? Optional lesson 8 measures it.
#
# *What changed from the original course:* `experimental_deterministic` is now
# `deterministic`, and it is set on the dataset you use (details: docs/lessons.md).

# %% [markdown]
# ## tf.data + TFRecord, or Grain + ArrayRecord?
#
# On a TPU runtime JAX comes first, and Kaggle's TPU image ships Grain, Google's data loader
# for JAX. It reads ArrayRecord files, which index their records: any record by its number.
#
# - **tf.data + TFRecord**, this lab's pipeline, when the data streams from object storage
#   in large shards read whole, one request per shard, and TensorFlow is there (Kaggle's TPU
#   image has `tensorflow-cpu`; on Colab's TPU runtime you install it). Parsing and
#   decoding run in TensorFlow's threads, outside Python.
# - **Grain + ArrayRecord** for what an index gives: a global shuffle, reading a record by
#   its number, a deterministic iteration that can be checkpointed (a resumed run sees the
#   batches it would have seen); or a JAX-only runtime. Its per-record steps run in
#   Python, in Grain's threads or worker processes.
#
# `python -m tools.benchmark` measures both on these images, each file charged the same
# first-byte wait per pass as a shard here (docs/benchmark.md holds an idle run; this
# notebook states no ratio). That assumes files on local disk or cached near the machine:
# from object storage, each record read alone is a request of its own (the benchmark's
# row "Grain, a request per record").
