# %% [markdown]
# # Lab 3 · Read TFRecords in parallel: the fast speed test
#
# **Goal:** read lab 2's 16 shards many at a time, in any order, with `tf.data`'s own
# reader, and show how many times faster that is than lab 1's individual files.
#
# **You will:**
#
# 1. Parse a record back into an image and a label (TODO 1).
# 2. Read many shards at once, each record as soon as it arrives (TODO 2).
# 3. Parse a whole batch of records at once (TODO 3).
# 4. Build the pipeline that feeds training: batched, parsed, prepared ahead (TODO 4).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, installs TensorFlow where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import os

import tensorflow as tf

from utils import batch_sizes, charts, checks, comparison, display, timing
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
# `ensure_shards()` finds the shards lab 2 wrote for these settings, or writes them now.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
shard_paths = shard_set.paths  # Checked against the sidecar: none missing or extra.
class_names = shard_set.class_names
num_records = shard_set.num_records
BATCH_SIZE = batch_sizes.fit_batch_size(BATCH_SIZE, num_records=num_records)  # A small folder.
shard_megabytes = sum(tf.io.gfile.stat(p).length for p in shard_paths) / 1e6 / len(shard_paths)
print(f"{len(shard_paths)} shards, {num_records} records, {shard_megabytes:.1f} MB per shard")
print(f"{len(class_names):,} classes:", display.short_list(class_names))

# %% [markdown]
# The shards sit on the same simulated cloud storage as lab 1's files, with lab 1's model:
# every object opened waits for its first byte (median `LATENCY_MS`, a long tail up to
# `LATENCY_P99_MS`), then streams at `STREAM_MEGABYTES_PER_SECOND`.

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
# A record is a `tf.train.Example` (lab 2): `"image"` (JPEG bytes), `"class"` (an int64),
# `"one_hot_class"` (floats, one per class) and `"size"` (height and width; records
# written before it existed lack it). To read it back you declare each feature's type and
# shape: `tf.io.FixedLenFeature` for a fixed number of values (`default_value=` fills a
# missing one), `tf.io.VarLenFeature` for any number (it parses to a sparse tensor).
#
# **TODO 1.** Declare `features` and complete `read_tfrecord(serialized)` so that it
# returns the decoded image with the static shape Keras and TPUs need
# (`[TARGET_SIZE, TARGET_SIZE, 3]`, uint8: the decoder cannot know it) and the dense
# float32 one-hot label of `len(class_names)` values.

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
# Shards read one after another wait for each first byte in turn. `interleave()` reads
# `cycle_length` files at a time, `num_parallel_calls` of them in flight, so their waits
# overlap. By default it keeps a fixed order, waiting for the file whose turn it is;
# `deterministic=False` lets the fastest file go first (training shuffles anyway).
#
# Offline, `simulated_storage.open_tfrecord(path)` is `tf.data.TFRecordDataset(path)` for
# one shard, with the storage's wait (on a real `gs://` source it is exactly that).
#
# **TODO 2.** Complete `read_shards(filenames, num_parallel_reads)`: every record of the
# files named in `filenames`, `num_parallel_reads` files in flight at once, each record as
# soon as it arrives. Then make `dataset`: those records parsed with `read_tfrecord`, in
# parallel (`num_parallel_calls=tf.data.AUTOTUNE`).


# %%
# TODO 2: read many shards at once, in the order records arrive; parse each record.
def read_shards(filenames, num_parallel_reads=NUM_PARALLEL_READS):
    """Returns the serialized records of the files in `filenames`, a dataset of paths."""
    ### BEGIN SOLUTION
    records = filenames.interleave(
        simulated_storage.open_tfrecord,
        cycle_length=num_parallel_reads,
        num_parallel_calls=num_parallel_reads,
        deterministic=False,
    )
    ### END SOLUTION
    return records


shard_names = tf.data.Dataset.from_tensor_slices(shard_paths)
records = read_shards(shard_names)
### BEGIN SOLUTION
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
# Every element through a `map()` costs a function call and some bookkeeping.
# `tf.io.parse_example` parses a whole batch of records in one call; the JPEGs inside are
# still decoded one by one (`tf.map_fn` over the batch, with the `decode` function below).
#
# **TODO 3.** Complete `parse_batch(serialized_batch)`: the same as `read_tfrecord`, for a
# batch of records at once: `(images, one_hots)`, each with the batch as first dimension.


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
# Does it pay? Measured on records in memory (storage plays no part), parsing and decoding
# one record at a time against a batch at a time, in turns:

# %%
# A sample of NUM_TIMED_IMAGES records at most, so that memory stays bounded on a big folder.
in_memory = tf.data.TFRecordDataset(shard_paths).take(NUM_TIMED_IMAGES).cache()
in_memory_count = sum(1 for _ in in_memory)  # Fills the cache.
AUTOTUNE = tf.data.AUTOTUNE
parse_runs = comparison.measure_in_turns(
    {
        "one by one": in_memory.map(read_tfrecord, AUTOTUNE).batch(BATCH_SIZE).repeat(),
        "batched": in_memory.batch(BATCH_SIZE).map(parse_batch, AUTOTUNE).repeat(),
    },
    num_images=2 * in_memory_count,
    repeats=SPEED_TEST_REPEATS,
)
print(comparison.describe_difference(list(parse_runs.values()), name="Parsing by batch"))

# %% [markdown]
# ## 4. The pipeline that feeds training (TODO 4)
#
# Training takes batches, and the accelerator should never wait for the next one.
#
# **TODO 4.** Make `fast`: TODO 2's `records` in batches of `BATCH_SIZE`, each batch parsed
# with `parse_batch` in parallel, and the next batches prepared while the current one is
# used (`prefetch`), the buffer sized by `tf.data`.

# %%
# TODO 4: batch the records, parse each batch, prefetch.
### BEGIN SOLUTION
fast = records.batch(BATCH_SIZE)
fast = fast.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
fast = fast.prefetch(tf.data.AUTOTUNE)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_fast_dataset(fast, todo=4, batch_size=BATCH_SIZE, records=records)

# %% [markdown]
# ## The fast speed test
#
# The same images on the same simulated storage (lab 1's model and settings), timed in
# turns: lab 1's files one at a time and `NUM_PARALLEL_READS` at once; the shards one at a
# time; your pipeline with `NUM_PARALLEL_READS` reads, and with `AUTOTUNE` choosing. (The
# shard names repeat *before* the reads, so the next pass's shards open while these are
# read.)

# %%
image_paths = list(conversion.source_paths(source))
image_files = tf.data.Dataset.from_tensor_slices(image_paths).shuffle(len(image_paths), seed=SEED)


def read_image_file(path):
    """Lab 1's reading: one object per image."""
    return tf.io.decode_jpeg(simulated_storage.read_file(path), channels=3)


endless_names = tf.data.Dataset.from_tensor_slices(shard_paths).repeat()


def fast_pipeline(records):
    """Your TODO 4's steps, over other records."""
    batches = records.batch(BATCH_SIZE).map(parse_batch, num_parallel_calls=AUTOTUNE)
    return batches.prefetch(AUTOTUNE)


threads = tf.data.Options()
threads.threading.private_threadpool_size = NUM_PARALLEL_READS
files_in_parallel = image_files.map(read_image_file, NUM_PARALLEL_READS).with_options(threads)
one_shard_at_a_time = endless_names.flat_map(simulated_storage.open_tfrecord)
timed = {  # Each way, and the images timed in each round.
    "files, one at a time": (image_files.map(read_image_file), NUM_TIMED_SEQUENTIAL),
    "files, parallel": (files_in_parallel, NUM_TIMED_FILES),
    "TFRecords, one at a time": (fast_pipeline(one_shard_at_a_time), NUM_TIMED_IMAGES),
    "TFRecords, AUTOTUNE reads": (
        fast_pipeline(read_shards(endless_names, AUTOTUNE)),
        NUM_TIMED_IMAGES,
    ),
    "TFRecords, fast": (fast_pipeline(read_shards(endless_names)), NUM_TIMED_IMAGES),
}
speed_runs = comparison.measure_in_turns(
    {
        label: timing.throughput_timer(data.ignore_errors(), num_images=n)
        for label, (data, n) in timed.items()
    },
    repeats=SPEED_TEST_REPEATS,
)

# %%
records_parallel = speed_runs["TFRecords, fast"]
files_sequential, files_parallel = speed_runs["files, one at a time"], speed_runs["files, parallel"]
over_one_at_a_time = comparison.ratio_in_turns(
    records_parallel, files_sequential, label="fast / files one at a time"
)
over_best_files = comparison.ratio_in_turns(
    records_parallel, files_parallel, label="fast / files in parallel"
)
print(over_one_at_a_time.summary(",.0f") + " x")
print(over_best_files.summary(",.1f") + " x")
autotune_reads = speed_runs["TFRecords, AUTOTUNE reads"]
print(comparison.describe_difference([records_parallel, autotune_reads], name="Speed"))
# Each bar is a median, its line the range of the rounds.
figure = charts.plot_throughput(list(speed_runs.values()), title=simulated_storage.describe())

# %% [markdown]
# How many shards did `AUTOTUNE` keep in flight? The storage counts the requests open at
# once during one pass over the shards:

# %%
for reads in (NUM_PARALLEL_READS, AUTOTUNE):
    simulated_storage.reset_counters()
    num_read = sum(1 for _ in read_shards(shard_names, reads))
    label = "AUTOTUNE" if reads == AUTOTUNE else reads
    print(
        f"num_parallel_reads={label}: {num_read} records, at most "
        f"{simulated_storage.max_in_flight} shards in flight, on {os.cpu_count()} cores"
    )

# %% [markdown]
# Two rules of `tf.data` follow, both from its source (`readers.py`,
# `parallel_interleave_dataset_op.cc`). `AUTOTUNE` sizes the reads from the machine's
# cores, not from the storage's latency: on a small machine it keeps too few shards in
# flight for remote storage, so give the number. And
# `tf.data.TFRecordDataset(paths, num_parallel_reads=16)`, with a number, keeps the files'
# order whatever `deterministic` says: for records in any order, interleave as you did.

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
# **Takeaway.** Remote storage is slow per object, not per byte: a few large shards read
# many at a time, each record taken as it arrives, hide the waiting that made lab 1's
# files slow. Say how many shards to read at once. (Optional lesson 8 measures each knob.)
#
# *Changed from the original course:* `experimental_deterministic` is now `deterministic`.
