# %% [markdown]
# # Lab 1 · tf.data basics and the "too slow" speed test
#
# Read flower images one file at a time from (simulated) cloud storage, look at them, and
# measure how many images per second that gives an accelerator.
#
# **You will:**
#
# 1. List the image files with `tf.data` (TODO 1).
# 2. Read each image's label from its folder name (TODO 2).
# 3. Read and decode each image from storage (TODO 3).
# 4. Read many images at once with a parallel `map()`, and measure what it buys (TODO 4).

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import tensorflow as tf

from utils import charts, checks, comparison, display, timing
from utils.lab import readable_images, sources, storage

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
LATENCY_MS = 50  # Simulated first-byte latency per object, the median (not used for gs://).
LATENCY_P99_MS = 500  # Its 99th percentile; None: every request takes exactly LATENCY_MS.
STREAM_MEGABYTES_PER_SECOND = 85  # Bandwidth of one object stream; None: no cap.
NUM_PARALLEL_READS = 16  # Reads in flight at once in the parallel speed test.
NUM_TIMED_IMAGES = 400  # Images timed in each parallel speed test.
NUM_TIMED_SEQUENTIAL = 60  # Images timed in the sequential test (at ~12/s, it is slow).
SPEED_TEST_REPEATS = 5  # Rounds of the closing speed test, taken in turns.
SEED = 42

# %% [markdown]
# ## The data
#
# `DATA_SOURCE` says where the images are. The default, `"embedded"`, is a generated set of
# flower pictures in the layout of the original course's data: one folder per class, JPEGs of
# different sizes. It is made on first use and cached, with no network and no cloud account.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())

# %% [markdown]
# Each image will be read as its own object, as if from a cloud storage bucket. Offline this
# is a simulation: `storage.read_file()` waits before each file's first byte, as a request
# to object storage does, then reads the file. As on real object storage, most requests are
# quick and a few are slow: each wait is drawn with median `LATENCY_MS` and 99th percentile
# `LATENCY_P99_MS`, and a file's bytes then arrive at `STREAM_MEGABYTES_PER_SECOND`. Lab 3
# reads the TFRecords through the same model with the same settings, and says where the
# numbers come from. With a real `gs://` source nothing is simulated.

# %%
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
# `source.paths` lists every image file of the source (`.jpg`, `.jpeg`, `.png` or an
# iPhone's `.heic`, in any letter case). `tf.data.Dataset.from_tensor_slices()` turns a
# list into a dataset, one element per item, and `shuffle()` mixes them. `shuffle()` draws
# a new order on every pass over the dataset (every epoch); a seed makes that sequence of
# orders the same from one run of the notebook to the next, not one pass the same as the
# next.
# (`tf.data.Dataset.list_files()` does both from a glob, but a glob reads `[`, `*` and `?`
# in a real folder's name as patterns: a folder named `photos [2024]` matches nothing.)
#
# **TODO 1.** Make `filenames`: a dataset of the paths in `source.paths`, shuffled with
# `shuffle(len(source.paths), seed=SEED)`.

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
# The first images that decode: a real folder may hold files that do not (they are listed).
shuffled_paths = [path.decode() for path in filenames.as_numpy_iterator()]
sample_paths, _, _ = readable_images.readable_sample(shuffled_paths, 5)
for path in sample_paths:
    print(path)
next_pass = [path.decode() for path in filenames.take(5).as_numpy_iterator()]
print("The next pass starts with the same 5 paths:", next_pass == shuffled_paths[:5])

# %% [markdown]
# ## 2. The label is the folder name (TODO 2)
#
# The class of each image is the name of its folder: `.../roses/roses_0007.jpg` is a rose.
# A model needs a number, so the label is the index of that name in `source.class_names`.
# The function runs inside `Dataset.map()`, on tensors, so it must use TensorFlow ops such
# as `tf.strings.split()`, not Python string methods.

# %%
class_names = tf.constant(source.class_names)
print(f"{len(source.class_names):,} classes:", display.short_list(source.class_names))

# %% [markdown]
# **TODO 2.** Complete `label_from_path(path)`: split the path on `"/"`, take the folder
# name (the second-to-last part), and return its index in `class_names` as an integer.
#
# *Hint:* a tensor has no `.index()`. Compare instead: `class_names == folder` gives one
# boolean per class, true at the folder's class; `tf.argmax()` of it, cast to `tf.int32`,
# is the position of that true value.


# %%
def label_from_path(path):
    """Returns the index in `class_names` of the name of the folder holding `path`."""
    # TODO 2: return the index of the parent folder's name.
    ### BEGIN SOLUTION
    folder = tf.strings.split(path, "/")[-2]
    label = tf.argmax(tf.cast(class_names == folder, tf.int32))
    ### END SOLUTION
    return label


# %%
# NBVAL_CHECK_OUTPUT
checks.check_label_from_path(
    label_from_path, todo=2, sample_paths=sample_paths, class_names=source.class_names
)

# %% [markdown]
# ## 3. Read and decode (TODO 3)
#
# **TODO 3.** Complete `read_and_decode(path)`: read the file's bytes with
# `simulated_storage.read_file(path)` (use it where you would use `tf.io.read_file()`),
# decode them with `tf.io.decode_jpeg(..., channels=3)`, and return `(image, label)`.


# %%
def read_and_decode(path):
    """Reads one image from storage; returns (uint8 image of shape (h, w, 3), label)."""
    # TODO 3: read the bytes from the storage, decode them, and label the image.
    ### BEGIN SOLUTION
    image_bytes = simulated_storage.read_file(path)
    image = tf.io.decode_jpeg(image_bytes, channels=3)
    label = label_from_path(path)
    ### END SOLUTION
    return image, label


# %%
# NBVAL_CHECK_OUTPUT
checks.check_read_and_decode(
    read_and_decode,
    todo=3,
    sample_paths=sample_paths,
    storage=simulated_storage,
    class_names=source.class_names,
)

# %% [markdown]
# ## Look at the images
#
# Nine images with their class and their size in pixels, height x width (files that do
# not decode are skipped, and listed). Since each pass over `filenames` has a new order,
# the nine paths are taken once, from the pass above, so that the grid and the sizes below
# show the same images. A phone photo of yours may show on its side: `tf.io.decode_jpeg`
# ignores the EXIF Orientation tag that turns it upright in a viewer; lab 2 stores it upright.
# It drops transparency too (a sticker's hidden background shows); lab 2 puts it on white.

# %%
nine_paths, _, _ = readable_images.readable_sample(shuffled_paths, 9)
images_and_labels = tf.data.Dataset.from_tensor_slices(nine_paths).map(read_and_decode)
figure = display.show_images(images_and_labels, class_names=source.class_names)

# %% [markdown]
# The sizes differ from image to image, so these images cannot be stacked into a batch as
# they are: lab 2 resizes them to one size before writing them out.

# %%
sizes = [image.shape[:2] for image, _ in images_and_labels.take(9).as_numpy_iterator()]
print(f"{len(set(sizes))} different sizes among 9 images")
print("Heights:", sorted(height for height, _ in sizes))
print("Widths: ", sorted(width for _, width in sizes))

# %% [markdown]
# ## The speed test: one object at a time
#
# An accelerator wants thousands of images per second. How many does reading one object at
# a time give? `timing.measure_throughput()` reads a few images first (the warm-up, not
# counted), then times `NUM_TIMED_SEQUENTIAL` images. `ignore_errors()` drops a file that
# does not decode instead of stopping (lab 2 lists every such file).

# %%
sequential = filenames.map(read_and_decode).ignore_errors()
sequential_result = timing.measure_throughput(
    sequential, num_images=NUM_TIMED_SEQUENTIAL, storage=simulated_storage, label="sequential"
)
print(f"Each image took {1000 / sequential_result.images_per_second:.0f} ms on average.")
if simulated_storage.latencies_ms:
    waits = simulated_storage.latencies_ms
    print(f"The storage's first-byte waits averaged {sum(waits) / len(waits):.0f} ms.")

# %% [markdown]
# Almost all of that time is the wait for each object's first byte: the CPU is idle while
# the request travels. Nothing stops us from having many requests in flight at once.
#
# ## 4. Read in parallel (TODO 4)
#
# `map(..., num_parallel_calls=N)` runs up to N calls of the function at once. But
# `tf.data` runs those calls on a pool of threads with one thread per CPU core by default,
# and a read that waits on storage holds its thread while it waits. On a machine with few
# cores (Colab's standard runtime has 2; its GPU and TPU runtimes have more), only that
# many reads are in flight. Measure it:

# %%
parallel_default_threads = filenames.map(read_and_decode, num_parallel_calls=NUM_PARALLEL_READS)
default_threads_result = timing.measure_throughput(
    parallel_default_threads.ignore_errors(),
    num_images=NUM_TIMED_IMAGES // 4,
    storage=simulated_storage,
    label="parallel map, default threads",
)
print(f"Most reads in flight at once: {simulated_storage.max_in_flight}")

# %% [markdown]
# **TODO 4.** Make `parallel`: `filenames` mapped with `read_and_decode` and
# `num_parallel_calls=NUM_PARALLEL_READS`, with `tf.data.Options()` whose
# `threading.private_threadpool_size` is `NUM_PARALLEL_READS`, applied with
# `with_options()`.

# %%
# TODO 4: a parallel map with as many threads as reads in flight.
### BEGIN SOLUTION
options = tf.data.Options()
options.threading.private_threadpool_size = NUM_PARALLEL_READS
parallel = filenames.map(read_and_decode, num_parallel_calls=NUM_PARALLEL_READS)
parallel = parallel.with_options(options)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_parallel_reading(
    parallel, todo=4, storage=simulated_storage, num_parallel_reads=NUM_PARALLEL_READS
)

# %%
parallel_result = timing.measure_throughput(
    parallel.ignore_errors(),
    num_images=NUM_TIMED_IMAGES,
    storage=simulated_storage,
    label=f"parallel map, {NUM_PARALLEL_READS} threads",
)
print(f"Most reads in flight at once: {simulated_storage.max_in_flight}")

# %% [markdown]
# For scale: the same pipeline with no storage latency at all, reading from local disk.
# This is what the CPU can decode; no storage trick gets above it.

# %%
local_disk = storage.SimulatedStorage(latency_ms=0)


def read_and_decode_local(path):
    """Like `read_and_decode`, from local disk with no latency."""
    return tf.io.decode_jpeg(local_disk.read_file(path), channels=3), label_from_path(path)


local_result = timing.measure_throughput(
    filenames.map(read_and_decode_local, num_parallel_calls=tf.data.AUTOTUNE).ignore_errors(),
    num_images=NUM_TIMED_IMAGES,
    storage=local_disk,
    label="local disk, no latency",
)

# %% [markdown]
# ## Why not `NUM_PARALLEL_READS` times faster: the order
#
# Decoding is not the limit: the local disk above decodes far faster. The limit is the
# order. `map()` hands out its results in the order of its input, so when one read in
# flight lands in the storage's slow tail (`LATENCY_P99_MS`), the images read after it
# are ready but must wait behind it, and no new read starts in their place until it
# arrives: head-of-line blocking. `options.deterministic = False` lets the map hand out
# whichever image is ready first, so a slow read holds up only its own thread. Training
# does not need the order (the files are shuffled anyway). Both, timed in turns:

# %%
any_order = tf.data.Options()
any_order.deterministic = False
order_runs = comparison.measure_in_turns(
    {
        "parallel map, in order": timing.throughput_timer(
            parallel.ignore_errors(), num_images=NUM_TIMED_IMAGES
        ),
        "parallel map, any order": timing.throughput_timer(
            parallel.with_options(any_order).ignore_errors(), num_images=NUM_TIMED_IMAGES
        ),
    },
    repeats=SPEED_TEST_REPEATS,
)
order_verdict = comparison.describe_difference(order_runs, name="Order")
print(order_verdict)

# %% [markdown]
# Lab 3 reads in any order from the start (its TODO 2), and says which readers obey the
# option and which keep the order whatever it says.
#
# ## What you measured
#
# One run of each, as above, can land on a busy moment of the machine. Here the five are
# timed again in turns, `SPEED_TEST_REPEATS` rounds, each given as its median and range;
# the ratios are taken within each round.

# %% tags=["summary"]
runs = comparison.measure_in_turns(
    {
        "sequential": timing.throughput_timer(sequential, num_images=NUM_TIMED_SEQUENTIAL),
        "parallel map, default threads": timing.throughput_timer(
            parallel_default_threads.ignore_errors(), num_images=NUM_TIMED_IMAGES // 4
        ),
        f"parallel map, {NUM_PARALLEL_READS} threads": timing.throughput_timer(
            parallel.ignore_errors(), num_images=NUM_TIMED_IMAGES
        ),
        "parallel map, any order": timing.throughput_timer(
            parallel.with_options(any_order).ignore_errors(), num_images=NUM_TIMED_IMAGES
        ),
        "local disk, no latency": timing.throughput_timer(
            filenames.map(
                read_and_decode_local, num_parallel_calls=tf.data.AUTOTUNE
            ).ignore_errors(),
            num_images=NUM_TIMED_IMAGES,
        ),
    },
    repeats=SPEED_TEST_REPEATS,
)
sequential_runs, default_runs, parallel_runs, any_order_runs, local_runs = runs.values()
figure = charts.plot_throughput(list(runs.values()), title=simulated_storage.describe())
speedup = comparison.ratio_in_turns(parallel_runs, sequential_runs)
share_of_local = comparison.ratio_in_turns(parallel_runs, local_runs)
print(
    f"\nReading one object at a time gave {sequential_runs.median:.1f} images/s; "
    f"{NUM_PARALLEL_READS} reads in flight gave {speedup.median:.1f}x that "
    f"({speedup.minimum:.1f}-{speedup.maximum:.1f}x over {speedup.num_runs} rounds)."
)
print(comparison.describe_difference([parallel_runs, default_runs], name="Threads for the reads"))
print(
    f"Local disk with no latency reached {local_runs.median:,.0f} images/s: the parallel "
    f"reads got {share_of_local.median:.0%} of it ({share_of_local.minimum:.0%}-"
    f"{share_of_local.maximum:.0%})."
)
print(comparison.describe_difference([any_order_runs, parallel_runs], name="Order"))

# %% [markdown]
# Read the lines above: with one request at a time, the pipeline spends almost all its
# time waiting for first bytes, so images/s is about 1000 divided by the average wait in
# milliseconds (printed after the sequential test; the slow requests of the tail raise it
# above the median `LATENCY_MS`). Asking `map()` for parallel calls helps only as far as
# there are threads to wait in: the threads' verdict says whether the extra threads made
# a difference beyond the noise on this run. With as many threads as reads in flight the
# waits overlap, but an ordered map still waits for the slowest read in flight, far below
# what the CPU decodes (the share of the local disk); the order's verdict says what
# reading in any order bought here.
#
# Even in any order, an accelerator can take thousands of images per second, and every image still
# costs one request. Lab 2 packs many images into a few large files (TFRecords), so that
# one request brings hundreds of images; lab 3 measures what that buys on the same storage.
#
# *What changed from the original course:* its bucket `gs://flowers-public` now answers 403,
# so the storage here is simulated (details: the course's docs/lessons.md).
