# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# By the end you can show, step by step, whether an accelerator waits for its input, and
# write a feed that keeps it busy.
#
# A stand-in for a TPU chip is fed by several feeds in turns; every step records how long
# it waited for its batch. This lesson writes its own shards if lab 2 did not.
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
STAND_IN_SPEEDS = [0.5, 1, 2]  # That rate times these.
SEED = 42

# %%
import tensorflow as tf

from utils import checks
from utils.lab import shard_cache, sources
from utils.lessons.accelerator_waiting import accelerator_wait

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names

# %% [markdown]
# ## Lab 3's reader
#
# Your code from lab 3 (TODOs 1 and 2), here reading the shards from this disk:
# `open_tfrecord` is `tf.data.TFRecordDataset`.

# %%
open_tfrecord = tf.data.TFRecordDataset
features = {  # lab 3's TODO 1
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}


def read_tfrecord(serialized):  # lab 3's TODO 1
    """Parses one record; returns (uint8 image of static shape, float32 one-hot label)."""
    record = tf.io.parse_single_example(serialized, features)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
    one_hot = tf.sparse.to_dense(record["one_hot_class"])
    one_hot = tf.reshape(one_hot, [len(class_names)])
    return image, one_hot


def read_shards(filenames, num_parallel_reads=NUM_PARALLEL_READS):  # lab 3's TODO 2
    """Every record of the files in `filenames` (a dataset of paths), many at once, any order."""
    return filenames.interleave(
        open_tfrecord,
        cycle_length=num_parallel_reads,
        num_parallel_calls=num_parallel_reads,
        deterministic=False,
    )


# %% [markdown]
# ## The naive feed
#
# The naive feed decodes one image at a time and makes a batch only when the step asks for
# it. By default tf.data would quietly help it: it fuses `map()` and `batch()` into one
# step whose thread makes the next batch ahead, and may parallelize the map and add a
# prefetch. The options below turn that off.

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
# **TODO 1.** Make `in_memory`: an endless dataset that gives one batch of `naive_feed`,
# already decoded, at every step.

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
# `read_tfrecord`, made so that the accelerator does not wait for them. The check times
# your feed and the naive one feeding a stand-in accelerator, in turns.

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
# The stand-in for one TPU v5e chip sleeps through each step, a SIMULATION: the lines
# below give its rate and what it assumes. During a step only what a feed runs in the
# background goes on; the time the stand-in then waits for its next batch is its idle
# time. The feeds take turns: from memory (TODO 1), the naive feed, yours (TODO 2), and
# the course pipeline (lab 3's reader, a parallel `map()`) without and with `prefetch()`.

# %%
stand_in = accelerator_wait.SimulatedAccelerator(
    images_per_second=STAND_IN_IMAGES_PER_SECOND, batch_size=BATCH_SIZE, num_steps=NUM_TIMED_STEPS
)
print(stand_in.describe())
parallel_map = read_shards(shard_names).map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
no_prefetch = parallel_map.batch(BATCH_SIZE, drop_remainder=True)
course_pipeline = no_prefetch.prefetch(tf.data.AUTOTUNE)
feeds = {"from memory": in_memory, "naive feed": naive_feed, "your feed": feed}
feeds |= {"course pipeline, no prefetch": no_prefetch, "course pipeline": course_pipeline}
lines = stand_in.compare(feeds, repeats=NUM_ROUNDS)  # Each feed against the first.
figure = stand_in.plot_last_runs()

# %% [markdown]
# The timeline draws each feed's last run: red, the accelerator waits for its batch;
# green, a step. The step is the same sleep in every row, so the rows differ only by
# their idle time.
#
# ## Where does the course pipeline stop keeping up?
#
# A faster chip asks for its batches sooner: the course pipeline against memory, with the
# stand-in at each of `STAND_IN_SPEEDS` times its rate.

# %%
for factor in STAND_IN_SPEEDS:
    chip = {"from memory": in_memory, f"course pipeline, stand-in at {factor}x": course_pipeline}
    lines += stand_in.at_speed(factor).compare(chip, repeats=NUM_ROUNDS)

# %% [markdown]
# ## What you measured
#
# One line per feed: its images/s against the stand-in fed from memory in the same
# rounds, and its idle time per step.

# %% tags=["summary"]
print("\n".join(lines))

# %% [markdown]
# Each verdict is the course's one rule: "beyond the noise" when every round of one side
# beat every round of the other and the medians are at least `comparison.MIN_EFFECT`
# apart; "small but consistent" when the rounds are apart but the medians closer; "not
# resolved in N rounds" when the rounds overlap; "not judged" where other processes kept
# a share of the cores busy. Where a verdict says the accelerator waits, that feed did not
# keep up. The two course pipelines' lines show what `prefetch()` changed here; the first
# speed whose verdict says the accelerator waits, if any, is where this machine's cores
# stop keeping up with such a chip.
#
# **Takeaway.** A feed that makes each batch only when the step asks for it adds all of
# that work to every step. Decoding in parallel and prefetching make the next batches
# while the step runs, but only as fast as the cores allow: measure the idle time per
# step against the chip you will feed.
#
# *What changed from the original course:* it never measured whether the input kept up.
