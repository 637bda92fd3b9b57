# %% [markdown]
# # Lab 3 · Read TFRecords in parallel: the fast speed test
#
# **Goal:** by the end you can read lab 2's 16 shards many at a time, in any order, with
# `tf.data`'s own reader, and show how many times faster that is than lab 1's files.
#
# **You will:**
#
# 1. Parse a record back into an image and a label (TODO 1).
# 2. Read many shards at once, each record as soon as it arrives (TODO 2).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds or installs the course's `utils` and TensorFlow, and says
# which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import tensorflow as tf

from utils import charts, checks, comparison, storage
from utils.lab import conversion, shard_cache, sources
from utils.lessons.read_tfrecords import parsing, speed_test

AUTOTUNE = tf.data.AUTOTUNE

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # As in labs 1 and 2.
NUM_IMAGES = 3670  # Images generated for "embedded".
TARGET_SIZE = 192  # Lab 2's TARGET_SIZE.
NUM_SHARDS = 16  # Lab 2's NUM_SHARDS.
SHARDS_DIR = None  # None: where lab 2 wrote them.
LATENCY_MS = 50  # Median wait for an object's first byte (lab 1's).
LATENCY_P99_MS = 500  # Its 99th percentile (lab 1's).
STREAM_MEGABYTES_PER_SECOND = 85  # Per object (lab 1's).
NUM_PARALLEL_READS = 16  # Shards read at once.
BATCH_SIZE = 64
NUM_TIMED_IMAGES = 8000  # Images per timed run of a shard pipeline.
NUM_TIMED_FILES = 400  # Images per timed run of files in parallel.
NUM_TIMED_SEQUENTIAL = 40  # Images per timed run of files one at a time.
SPEED_TEST_REPEATS = 5  # Rounds of the speed test.
SEED = 42

# %% [markdown]
# ## The shards
#
# `ensure_shards()` finds the shards lab 2 wrote for these settings, or writes them now.
# They sit on the same simulated cloud storage as lab 1's files, with lab 1's model and
# settings: every object opened waits for its first byte (median `LATENCY_MS`, a long
# tail up to `LATENCY_P99_MS`), then streams.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shards = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shards.class_names
print(speed_test.describe_shards(shards))
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
)
print(simulated_storage.describe())

# %% [markdown]
# ## 1. Parse a record (TODO 1)
#
# A record is a `tf.train.Example` (lab 2): `"image"` (JPEG bytes), `"class"` (an int64),
# `"one_hot_class"` (floats, one per class) and `"size"` (height and width; the original
# course's records lack it). To read it back you declare each feature's type and shape:
# `tf.io.FixedLenFeature` for a fixed number of values, with `default_value=` for a record
# that lacks it, `tf.io.VarLenFeature` for any number.
#
# **TODO 1.** Declare `features` and complete `read_tfrecord(serialized)`: with
# `tf.io.parse_single_example` and the features you declared, then
# `tf.io.decode_jpeg(..., channels=3)`, the decoded image with a static shape (`tf.reshape`
# to `[TARGET_SIZE, TARGET_SIZE, 3]`, uint8), and the dense float32 one-hot label of
# `len(class_names)` values (`tf.sparse.to_dense`).

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
checks.check_read_tfrecord(read_tfrecord, features, todo=1, shards=shards)

# %%
# Why the default, `to_dense()` and `reshape()`:
print(parsing.describe_parsing(features, read_tfrecord, shards.paths[0]))

# %% [markdown]
# ## 2. Read many shards at once (TODO 2)
#
# Shards read one after another wait for each first byte in turn. `interleave()` reads
# `cycle_length` files at a time, `num_parallel_calls` of them in flight, so that their
# waits overlap. By default it keeps a fixed order, waiting for the file whose turn it
# is; `deterministic=False` lets the fastest file go first (training shuffles anyway; lab
# 1 measured what any order bought its files).
#
# `open_tfrecord(path)` opens one shard: here `simulated_storage.open_tfrecord`, which is
# `tf.data.TFRecordDataset(path)` with the storage's wait. Labs 4 and 5 reuse your reader
# with `tf.data.TFRecordDataset` itself.
#
# **TODO 2.** Complete `read_shards(filenames, num_parallel_reads)`: with `interleave()`
# over `open_tfrecord`, every record of the files named in `filenames`,
# `num_parallel_reads` files in flight at once, each record as soon as it arrives.

# %%
open_tfrecord = simulated_storage.open_tfrecord


# TODO 2: read many shards at once, in the order their records arrive.
def read_shards(filenames, num_parallel_reads=NUM_PARALLEL_READS):
    """Every record of the files in `filenames` (a dataset of paths), many at once, any order."""
    ### BEGIN SOLUTION
    return filenames.interleave(
        open_tfrecord,
        cycle_length=num_parallel_reads,
        num_parallel_calls=num_parallel_reads,
        deterministic=False,
    )
    ### END SOLUTION


shard_names = tf.data.Dataset.from_tensor_slices(shards.paths)

# %%
# NBVAL_CHECK_OUTPUT
checks.check_read_shards(
    read_shards,
    todo=2,
    storage=simulated_storage,
    shards=shards,
    num_parallel_reads=NUM_PARALLEL_READS,
)

# %% [markdown]
# ## The fast speed test
#
# The same images on the same storage, timed in turns, each way against the one before
# it: lab 1's files (`read_image_file`, one object per image) one at a time and
# `NUM_PARALLEL_READS` at once; the shards one at a time; your reader with `AUTOTUNE`
# choosing, and with `NUM_PARALLEL_READS`. Each "x" line is the median of the per-round
# ratios (each round divides its own two runs), not the ratio of the two medians above
# it. `batches()` makes what training takes: the records parsed with your
# `read_tfrecord` in parallel, batched, prepared ahead. The shard names repeat before the
# reads (lesson 8 measures why).


# %%
def read_image_file(path):  # Decoded as lab 2's conversion does: upright, sRGB, any format.
    return conversion.decode_as_converted(simulated_storage.read_file(path))


def batches(records):
    return records.map(read_tfrecord, AUTOTUNE).batch(BATCH_SIZE).prefetch(AUTOTUNE)


files = tf.data.Dataset.from_tensor_slices(list(source.paths)).shuffle(20_000, seed=SEED)
threads = tf.data.Options()
threads.threading.private_threadpool_size = NUM_PARALLEL_READS  # Lab 1's: a thread a read.
parallel_files = files.with_options(threads).map(read_image_file, NUM_PARALLEL_READS)
endless_names = shard_names.repeat()
speed_runs = comparison.compare_in_turns(
    {
        "files, one at a time": (files.map(read_image_file), NUM_TIMED_SEQUENTIAL),
        "files, parallel": (parallel_files, NUM_TIMED_FILES),
        "shards, one at a time": (batches(endless_names.flat_map(open_tfrecord)), NUM_TIMED_IMAGES),
        "shards, AUTOTUNE reads": (batches(read_shards(endless_names, AUTOTUNE)), NUM_TIMED_IMAGES),
        "shards, parallel reads": (batches(read_shards(endless_names)), NUM_TIMED_IMAGES),
    },
    repeats=SPEED_TEST_REPEATS,
)
figure = charts.plot_throughput(list(speed_runs.values()), title=simulated_storage.describe())

# %% [markdown]
# How many shards does each reader keep in flight? The storage counts the requests open
# at once during one pass over the shards. And in which order does `tf.data`'s own
# `TFRecordDataset` read many files, asked for any order? Its graph says.

# %%
for reads in (NUM_PARALLEL_READS, AUTOTUNE):
    print(speed_test.shards_in_flight(read_shards(shard_names, reads), simulated_storage, reads))
tf_reader = tf.data.TFRecordDataset(shards.paths, num_parallel_reads=NUM_PARALLEL_READS)
print(speed_test.reading_order(tf_reader, "tf_reader"))

# %% [markdown]
# Two rules of `tf.data` follow. `AUTOTUNE` sizes the reads from the machine's cores, not
# from the storage's latency: its line above gives the shards it kept in flight and the
# cores. Give the number; the speed test's last line says what yours bought here. And
# `tf.data.TFRecordDataset(paths,
# num_parallel_reads=16)`, with a number, keeps the files' order whatever `deterministic`
# says: for records in any order, interleave as you did.
#
# ## What you measured

# %% tags=["summary"]
print(speed_test.summary(speed_runs))

# %% [markdown]
# **Takeaway.** Remote storage is slow per object, not per byte: a few large shards read
# many at a time, each record taken as it arrives, hide the waiting that made lab 1's
# files slow. Say how many shards to read at once, and interleave them yourself.
#
# *Changed from the original course:* `experimental_deterministic` is now `deterministic`.
