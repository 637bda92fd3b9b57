# %% [markdown]
# # Lab 1 · tf.data basics and the "too slow" speed test
#
# **Goal:** read flower images one file at a time from (simulated) cloud storage with
# `tf.data`, and measure why that is far too slow to feed an accelerator.
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
# Run this cell first: it finds or installs the course's `utils` and TensorFlow, and says
# which backend Keras runs on.

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
# `DATA_SOURCE` says where the images are. The default, `"embedded"`, is generated flower
# pictures in the original course's layout (a folder per class), made offline on first use.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())

# %% [markdown]
# Each image is read as its own object, as from a cloud storage bucket. Offline this is a
# simulation: `read_file()` waits for each file's first byte (median `LATENCY_MS`, a few
# requests up to `LATENCY_P99_MS`), then streams it. With a real `gs://` source nothing is
# simulated.

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
# iPhone's `.heic`). `tf.data.Dataset.from_tensor_slices()` turns a list into a dataset, one
# element per item; `shuffle()` draws a new order on every pass, the same sequence of
# orders in every run when it has a seed.
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
# The class of each image is its folder's name: `.../roses/roses_0007.jpg` is a rose. A
# model needs a number: the index of that name in `source.class_names`. The function runs
# inside `Dataset.map()`, on tensors: TensorFlow ops (`tf.strings`), not Python methods.

# %%
class_names = tf.constant(source.class_names)
print(f"{len(source.class_names):,} classes:", display.short_list(source.class_names))

# %% [markdown]
# **TODO 2.** Complete `label_from_path(path)`: the index in `class_names` of the name of
# the folder holding `path`, as an integer.
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
# **TODO 3.** Complete `read_and_decode(path)`: the image, read from the simulated storage
# (`simulated_storage.read_file` stands where `tf.io.read_file` would) and decoded to 3
# channels, and its label.


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
# Nine images with their class and size, height x width. A phone photo of yours may show
# on its side, a sticker its hidden background: `tf.io.decode_jpeg` ignores the EXIF
# Orientation and transparency; lab 2 stores photos as a viewer shows them.

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
# a time give? (`ignore_errors()` skips a file that does not decode; lab 2 lists them.)

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
# Almost all of that time is the wait for each first byte, the CPU idle. So have many
# requests in flight at once.
#
# ## 4. Read in parallel (TODO 4)
#
# `map(..., num_parallel_calls=N)` runs up to N calls at once, on `tf.data`'s pool of one
# thread per core (Colab's standard runtime has 2); a read that waits on storage holds its
# thread. Measure it:

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
# **TODO 4.** Make `parallel`: `filenames` read and decoded by `read_and_decode` with
# `NUM_PARALLEL_READS` reads in flight at once, each waiting on a thread of its own (a
# `tf.data.Options()` setting: `threading` holds it).

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
# For scale: the same pipeline from local disk, no latency: what the CPU can decode.

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
# Decoding is not the limit (the local disk is far faster): the order is. `map()` hands out
# results in its input's order, so one read in the slow tail (`LATENCY_P99_MS`) holds up
# every image behind it: head-of-line blocking. `options.deterministic = False` hands out
# whichever is ready first. Training does not need the order. Both, timed in turns:

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
# Lab 3 reads in any order from the start (its TODO 2).
#
# ## What you measured
#
# One run can land on a busy moment: the five, timed again in turns, `SPEED_TEST_REPEATS`
# rounds, each a median and a range.

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
# **Takeaway.** One request at a time, images/s is about 1000 divided by the average wait
# in milliseconds. Many reads in flight, each on its own thread, in any order, overlap the
# waits, yet every image still costs a request: far below the thousands an accelerator
# takes. Lab 2 packs many images into a few large files (TFRecords), one request for
# hundreds of images; lab 3 measures what that buys.
#
# *What changed from the original course:* its bucket `gs://flowers-public` now answers 403,
# so the storage here is simulated (details: the course's docs/lessons.md).
