# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# By the end you can show, step by step, whether an accelerator waits for its input, and
# write a feed that keeps it busy.
#
# This lesson writes its own shards if lab 2 did not.
#
# **You will:**
#
# 1. Make the input that costs nothing: one batch held in memory (TODO 1).
# 2. Make the naive feed keep the accelerator busy (TODO 2).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, and installs TensorFlow where it is missing.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # The embedded dataset's size.
TARGET_SIZE = 192  # Lab 2's TARGET_SIZE.
NUM_SHARDS = 16  # Lab 2's NUM_SHARDS.
SHARDS_DIR = None  # None: where lab 2 wrote them.
NUM_PARALLEL_READS = 16  # Lab 3's NUM_PARALLEL_READS.
BATCH_SIZE = 16  # Images per step: lab 4's batch on a CPU.
NUM_TIMED_STEPS = 32  # Steps timed in each run.
NUM_ROUNDS = 5  # Rounds of every comparison, taken in turns.
STAND_IN_IMAGES_PER_SECOND = 2120  # A TPU v5e chip's rate, estimated (printed below).
BREAK_POINT_SPEEDS = [0.5, 0.7, 0.85, 1, 1.2, 1.5, 2, 3]  # Times the course pipeline's rate.
SEED = 42

# %%
import tensorflow as tf

from utils import checks, timing
from utils.lab import shard_cache, sources
from utils.lessons.accelerator_waiting import accelerator_wait
from utils.lessons.read_tfrecords import solved_reader

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names

# %% [markdown]
# ## Lab 3's reader
#
# Your TODOs 1 and 2 of lab 3, as its solution writes them (`solved_reader.lab3_reader`),
# each shard opened by `tf.data.TFRecordDataset`.

# %%
read_tfrecord, read_shards = solved_reader.lab3_reader(  # Lab 3's TODOs 1 and 2.
    TARGET_SIZE, class_names, num_parallel_reads=NUM_PARALLEL_READS
)

# %% [markdown]
# ## The naive feed
#
# The naive feed decodes one image at a time and makes a batch only when the step asks for
# it. By default tf.data would quietly help it: it fuses `map()` and `batch()` into one
# step whose thread makes the next batch ahead, and may parallelize the map and add a
# prefetch (`tf.data.experimental.OptimizationOptions`). The options below turn that off.

# %%
# The naive feed: nothing made ahead.
shard_names = tf.data.Dataset.from_tensor_slices(shard_set.paths).repeat()
naive_feed = read_shards(shard_names).map(read_tfrecord).batch(BATCH_SIZE, drop_remainder=True)
naive = tf.data.Options()
naive.experimental_optimization.map_and_batch_fusion = False  # No MapAndBatch.
naive.experimental_optimization.map_parallelization = False  # The map stays sequential.
naive.experimental_optimization.inject_prefetch = False  # No prefetch added.
naive_feed = naive_feed.with_options(naive)

# %% [markdown]
# ## 1. The input that costs nothing (TODO 1)
#
# A fed step takes the step's time plus any wait for its batch. To see the step alone,
# feed it an input that costs nothing.
#
# **TODO 1.** Make `in_memory`: with `tf.data.Dataset.from_tensors()` and `repeat()`, an
# endless dataset that gives one batch of `naive_feed`, already decoded, at every step.

# %%
# TODO 1: one batch, held in memory, given at every step.
### BEGIN SOLUTION
in_memory = tf.data.Dataset.from_tensors(next(iter(naive_feed))).repeat()
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_in_memory(in_memory, todo=1, pipeline=naive_feed)

# %% [markdown]
# ## 2. A feed that keeps up (TODO 2)
#
# **TODO 2.** Make `feed`: the naive feed's batches, from `read_shards(shard_names)` and
# `read_tfrecord`, made so that the accelerator does not wait for them: decoded by a
# `map()` with `num_parallel_calls`, then `batch()` and `prefetch()`. The check reads your
# feed's steps (its graph), which no other work on the machine can change.

# %%
# TODO 2: the same batches, ready when the step asks for them.
### BEGIN SOLUTION
feed = (
    read_shards(shard_names)
    .map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(BATCH_SIZE, drop_remainder=True)
    .prefetch(tf.data.AUTOTUNE)
)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_feed_keeps_up(feed, todo=2, naive=naive_feed)

# %% [markdown]
# ## Is the accelerator waiting?
#
# The stand-in for one TPU v5e chip sleeps through each step, a SIMULATION (its rate and
# assumptions are printed below). During a step only what a feed runs in the background
# goes on; the time the stand-in then waits for its next batch is its idle time.

# %%
stand_in = accelerator_wait.SimulatedAccelerator(
    images_per_second=STAND_IN_IMAGES_PER_SECOND, batch_size=BATCH_SIZE, num_steps=NUM_TIMED_STEPS
)
print(stand_in.describe())
feeds = {"from memory": in_memory, "naive feed": naive_feed, "your feed": feed}
lines = stand_in.compare(feeds, repeats=NUM_ROUNDS)  # Each feed against the first.
figure = stand_in.plot_last_runs()

# %% [markdown]
# The timeline draws each feed's last run: red, the accelerator waits; green, a step.
# Even from memory the stand-in idles a little (the summary says how long): asking
# tf.data for a ready batch still costs a call into its runtime. Every feed pays it, so
# what counts is the idle time beyond it.
#
# ## When does `prefetch()` pay?
#
# `prefetch()` runs the stages before it in a thread of its own that fills a buffer while
# the step runs (TensorFlow's `PrefetchDataset`). Two feeds, each without and with it: the
# course pipeline, whose last stage is the parallel `map()`, and the same with an
# `augment` like lab 4's applied to each batch after `batch()` in a plain `map()`. The options stop
# tf.data adding a prefetch or parallelism of its own. This stand-in's step is twice what
# the augmented feed takes to make a batch, measured first.


# %%
def augment(images, labels):
    """Like lab 4's augment: a batch resized to 96 px, flipped at random."""
    return tf.image.random_flip_left_right(tf.image.resize(images, [96, 96], "area")), labels


only_as_written = tf.data.Options()  # No prefetch added, no map made parallel.
only_as_written.experimental_optimization.inject_prefetch = False
only_as_written.experimental_optimization.map_parallelization = False
parallel_map = read_shards(shard_names).map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
course_batches = parallel_map.batch(BATCH_SIZE, drop_remainder=True)
augmented = course_batches.map(augment)  # One batch at a time, in the thread that asks.
timed = 4 * BATCH_SIZE * NUM_TIMED_STEPS
made = timing.measure_throughput(augmented.with_options(only_as_written), num_images=timed)
step_sized = stand_in.at_speed(made.images_per_second / 2 / stand_in.images_per_second)
last_stages = {"course pipeline": course_batches, "augment after batch()": augmented}
for name, batches in last_stages.items():
    prefetched = batches.prefetch(tf.data.AUTOTUNE)
    pair = {f"{name}, no prefetch": batches, f"{name}, prefetch()": prefetched}
    pair = {label: feed.with_options(only_as_written) for label, feed in pair.items()}
    lines += step_sized.compare(pair, repeats=NUM_ROUNDS)

# %% [markdown]
# Each prefetch line compares a feed with `prefetch()` to the same feed without it:
#
# - After a plain `map()`, `augment` runs only when the step asks for a batch, so the
#   accelerator waits for it; `prefetch()` moves it into its thread, during the step.
# - A parallel `map()` already runs ahead: its own thread keeps up to
#   `num_parallel_calls` calls in flight and buffers their results (TensorFlow's
#   `ParallelMapDataset`), so a `prefetch()` after it has little left to hide.
#
# ## Where does the course pipeline stop keeping up?
#
# A faster chip asks for its batches sooner. The stand-ins run at `BREAK_POINT_SPEEDS`
# times the course pipeline's own rate here (measured with nothing consuming it), in
# order, until the accelerator waits: its idle time beyond "from memory" is at least a
# tenth of the step (median), every round longer than every round from memory.

# %%
course_pipeline = course_batches.prefetch(tf.data.AUTOTUNE)
course_rate = timing.measure_throughput(course_pipeline, num_images=timed).images_per_second
lines += stand_in.find_break_point(
    {"from memory": in_memory, "course pipeline": course_pipeline},
    feed_images_per_second=course_rate,
    factors=BREAK_POINT_SPEEDS,
    repeats=NUM_ROUNDS,
)

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print("\n".join(lines))

# %% [markdown]
# Each verdict is lab 1's rule (`comparison.verdict()`).
#
# **Takeaway.** Your lines say how long the stand-in waited for each feed beyond memory,
# whether `prefetch()` shortened that wait after a plain `map()` and after a parallel
# one, and at what speed the course pipeline stopped keeping up on this machine.
#
# *What changed from the original course:* it never measured whether the input kept up.
