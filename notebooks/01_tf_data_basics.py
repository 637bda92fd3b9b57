# %% [markdown]
# # Lab 1 · tf.data basics and the "too slow" speed test
#
# **Goal:** by the end you can read images from (simulated) cloud storage with `tf.data`,
# many at once, and show with your own numbers why one file per image cannot feed an
# accelerator.
#
# **You will:**
#
# 1. List the image files with `tf.data` (TODO 1).
# 2. Read and decode each image, with its label (TODO 2).
# 3. Read many images at once with a parallel `map()` (TODO 3).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds or installs the course's `utils` and TensorFlow, and says
# which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import tensorflow as tf

from utils import charts, checks, comparison, display, storage, timing
from utils.lab import sources

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # Or "flower_photos", a local folder, "gs://.../*/*.jpg".
NUM_IMAGES = 3670  # Images generated for "embedded".
LATENCY_MS = 50  # Median wait for an object's first byte.
LATENCY_P99_MS = 500  # Its 99th percentile; None: always LATENCY_MS.
STREAM_MEGABYTES_PER_SECOND = 85  # Per object; None: no cap.
NUM_PARALLEL_READS = 16  # Reads in flight at once.
NUM_TIMED_IMAGES = 400  # Images per timed run of a parallel pipeline.
NUM_TIMED_SEQUENTIAL = 60  # Images per timed run one at a time.
SPEED_TEST_REPEATS = 5  # Rounds of the closing speed test.
SEED = 42

# %% [markdown]
# ## The data
#
# `DATA_SOURCE` says where the images are. The default, `"embedded"`, is generated flower
# pictures in the original course's layout (a folder per class), made offline on first use.
# Each image is read as its own object, as from a cloud storage bucket. Offline this is a
# simulation: `simulated_storage.read_file()` waits for each file's first byte (median
# `LATENCY_MS`, a few requests up to `LATENCY_P99_MS`), then streams it. With a real
# `gs://` source nothing is simulated.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
    seed=SEED,
)
print(simulated_storage.describe())

# %% [markdown]
# ## 1. List the files (TODO 1)
#
# `source.paths` lists every image file of the source. `tf.data.Dataset.from_tensor_slices()`
# turns a list into a dataset, one element per item, and `shuffle()` draws a random order.
#
# **TODO 1.** Make `filenames`: a dataset of every path in `source.paths`, in a new random
# order on each pass, seeded with `SEED`.

# %%
# TODO 1: list the image files.
### BEGIN SOLUTION
filenames = tf.data.Dataset.from_tensor_slices(list(source.paths))
filenames = filenames.shuffle(len(source.paths), seed=SEED)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_filenames(
    filenames, todo=1, expected_count=source.num_images, class_names=source.class_names
)

# %%
print("One element:", filenames.element_spec)
for pass_number in (1, 2):  # A new order on each pass:
    names = [path.decode().rsplit("/", 1)[-1] for path in filenames.take(4).as_numpy_iterator()]
    print(f"Pass {pass_number}:", *names)

# %% [markdown]
# ## 2. Read and decode (TODO 2)
#
# A model needs a number for each image's class: its folder's name (`.../roses/0007.jpg` is
# a rose) as an index into `source.class_names`. `label_from_path` finds it with
# TensorFlow ops, as a function that runs inside `Dataset.map()` must: there `path` is a
# tensor (its spec is printed above), not a Python string.


# %%
def label_from_path(path):
    """The index in `source.class_names` of the name of the folder holding `path`."""
    folder = tf.strings.split(path, "/")[-2]
    return tf.argmax(tf.cast(folder == source.class_names, tf.int32))


# %% [markdown]
# **TODO 2.** Complete `read_and_decode(path)`: with `simulated_storage.read_file(path)`
# (where you would use `tf.io.read_file`) and `tf.io.decode_jpeg`, the image at `path`
# decoded to 3 colour channels, and its label.


# %%
def read_and_decode(path):
    """Reads one image from storage; returns (uint8 image of shape (h, w, 3), label)."""
    # TODO 2: the decoded image and its label.
    ### BEGIN SOLUTION
    image = tf.io.decode_jpeg(simulated_storage.read_file(path), channels=3)
    label = label_from_path(path)
    ### END SOLUTION
    return image, label


# %%
# NBVAL_CHECK_OUTPUT
checks.check_read_and_decode(read_and_decode, todo=2, storage=simulated_storage, source=source)

# %% [markdown]
# Nine of them, with their class and size (height x width):

# %%
images_and_labels = filenames.map(read_and_decode).ignore_errors()
figure = display.show_images(images_and_labels, class_names=source.class_names)

# %% [markdown]
# The sizes differ, so these images cannot be stacked into a batch as they are: lab 2
# resizes them.
#
# ## The speed test: one object at a time
#
# How many images per second does reading one object at a time give? (Lesson 5 sets it
# against what an accelerator takes.)

# %%
sequential = filenames.map(read_and_decode)
simulated_storage.reset_counters()
timing.measure_throughput(sequential.ignore_errors(), num_images=NUM_TIMED_SEQUENTIAL)
if simulated_storage.latencies_ms:  # None are drawn for a real gs:// source.
    waits = simulated_storage.latencies_ms
    print(f"The first-byte waits averaged {sum(waits) / len(waits):.0f} ms.")

# %% [markdown]
# About 1000 divided by the average wait in milliseconds: the CPU sits idle while each
# request waits for its first byte. So have many requests in flight at once.
#
# ## 3. Read in parallel (TODO 3)
#
# This cell gives the pipeline one thread per read in flight (docs/lessons.md says why).

# %%
threads = tf.data.Options()
threads.threading.private_threadpool_size = NUM_PARALLEL_READS
filenames = filenames.with_options(threads)

# %% [markdown]
# **TODO 3.** Make `parallel`: with `map()` and its `num_parallel_calls`, the images and
# labels of `filenames`, read by `read_and_decode` with `NUM_PARALLEL_READS` reads in
# flight at once.

# %%
# TODO 3: many reads in flight at once.
### BEGIN SOLUTION
parallel = filenames.map(read_and_decode, num_parallel_calls=NUM_PARALLEL_READS)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_parallel_reading(
    parallel, todo=3, storage=simulated_storage, num_parallel_reads=NUM_PARALLEL_READS
)

# %% [markdown]
# ## What you measured
#
# `map()` hands out results in its input's order; with `deterministic = False`, whichever
# is ready first (training does not need the order). For scale, the local disk: the same
# map with no storage to wait for. The four, timed in turns, `SPEED_TEST_REPEATS` rounds, a
# median and a range each, and each against the one above it:

# %% tags=["summary"]
any_order = tf.data.Options()
any_order.deterministic = False


def read_and_decode_local(path):
    """Like `read_and_decode`, from local disk: `tf.io.read_file` waits for no storage."""
    return tf.io.decode_jpeg(tf.io.read_file(path), channels=3), label_from_path(path)


local_disk = filenames.map(read_and_decode_local, num_parallel_calls=tf.data.AUTOTUNE)
runs = comparison.compare_in_turns(
    {
        "one at a time": (sequential, NUM_TIMED_SEQUENTIAL),
        "parallel, in order": (parallel, NUM_TIMED_IMAGES),
        "parallel, any order": (parallel.with_options(any_order), NUM_TIMED_IMAGES),
        "local disk, no latency": (local_disk, NUM_TIMED_IMAGES),
    },
    repeats=SPEED_TEST_REPEATS,
)
figure = charts.plot_throughput(list(runs.values()), title=simulated_storage.describe())

# %% [markdown]
# **Takeaway.** One request at a time, images/s is about 1000 divided by the wait in
# milliseconds. Many reads in flight overlap the waits, and more so in any order: in order,
# one read in the slow tail (`LATENCY_P99_MS`) holds up every image behind it (head-of-line
# blocking). Yet every image still costs a request: far below what the CPU decodes from
# local disk. Lab 2 packs the images into a few large files (TFRecords); lab 3 measures
# what that buys.
#
# *What changed from the original course:* its bucket `gs://flowers-public` now answers 403,
# so the storage here is simulated (details: the course's docs/lessons.md).
