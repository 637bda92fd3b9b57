# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
# ---

# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# By the end you can show, step by step, whether an accelerator waits for its input, and
# write a feed that keeps it busy.
#
# A stand-in for a TPU chip is fed from memory, by a naive feed, by yours and by the
# course pipeline, in turns; each run records how long every step waited for its batch.
# This lesson writes its own shards if lab 2 did not.
#
# **You will:**
#
# 1. Make the input that costs nothing: one batch held in memory (TODO 1).
# 2. Make the naive feed keep the accelerator busy (TODO 2).

# %% tags=["parameters"]
# The set-up reads BACKEND, so the parameters come first. "auto": JAX on Colab's TPU
# runtime (Colab ships JAX there, without TensorFlow), TensorFlow elsewhere.
BACKEND = "auto"  # Keras's backend: "auto", "tensorflow" or "jax".
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
DEVICE = "auto"  # "auto", or force "tpu", "gpu" or "cpu".
IMAGE_SIZE = 96  # The model's input size.
BATCH_PER_REPLICA = 16  # Images per replica per step: lab 4's.
STEPS_PER_EXECUTION = 16  # Training steps per call into the compiled function: lab 4's.
NUM_TIMED_STEPS = 32  # Steps timed in each run.
NUM_ROUNDS = 5  # Rounds of every comparison, its candidates taken in turns.
STAND_IN_IMAGES_PER_SECOND = 2120  # A v5e chip on ResNet-50, 192 px: estimated (printed below).
STAND_IN_SPEEDS = [0.5, 1, 2]  # The stand-in's rate times these, against the course pipeline.
LATENCY_MS = 50  # The simulated storage: lab 3's first-byte latency, median,
LATENCY_P99_MS = 500  # its 99th percentile,
STREAM_MEGABYTES_PER_SECOND = 85  # and the bandwidth of one object stream.
SEED = 42

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, installs TensorFlow where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import keras
import tensorflow as tf

from utils import batch_sizes, checks, comparison, models, pipeline, records, strategy
from utils.lab import shard_cache, sources, storage
from utils.lessons.accelerator_waiting import accelerator_wait, step_costs

# %% [markdown]
# ## The device, the shards and the storage
#
# As in lab 4: the TPU, GPUs or CPU; lab 2's shards (written here if missing), read
# through lab 3's simulated storage.

# %%
keras.utils.set_random_seed(SEED)
choice = strategy.find_strategy(DEVICE)
keras.mixed_precision.set_global_policy(strategy.PRECISION_POLICY[choice.kind])
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names
global_batch_size = batch_sizes.cap_batch_size(
    BATCH_PER_REPLICA * choice.num_replicas,
    num_images=sum(shard_set.record_counts.values()),
    num_replicas=choice.num_replicas,
    purpose="training",
)
print(f"{len(shard_set.paths)} shards; global batch {global_batch_size}")
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
)
print(simulated_storage.describe())

# %% [markdown]
# ## The naive feed
#
# Every feed here reads the shards as lab 3 does, all at once and in any order
# (`serialized`), and decodes a record with `decode_one()`. The naive feed decodes one
# image at a time and makes a batch only when the step asks for it. By default tf.data
# would quietly help it: it fuses `map()` and `batch()` into one step whose thread makes
# the next batch ahead, and may parallelize the map and add a prefetch. The options below
# turn that off: the naive feed is as naive as it looks.

# %%
shard_names = tf.data.Dataset.from_tensor_slices(shard_set.paths).repeat()
any_order = tf.data.Options()
any_order.deterministic = False  # A shard slow to answer holds up no other (lab 3).
serialized = simulated_storage.tfrecord_dataset(shard_names, num_parallel_reads=NUM_SHARDS)
serialized = serialized.with_options(any_order)


def decode_one(record):
    """One record: its image, decoded and resized to IMAGE_SIZE, and its one-hot label."""
    example = records.parse_record(record)
    image = tf.io.decode_jpeg(example["image"], channels=3)
    image = tf.image.resize(image, [IMAGE_SIZE, IMAGE_SIZE], antialias=True)
    label = tf.reshape(example["one_hot_class"], [len(class_names)])
    return tf.saturate_cast(tf.round(image), tf.uint8), label


# %%
# The naive feed: one image decoded at a time, each batch made when the step asks for it.
naive_feed = serialized.map(decode_one).batch(global_batch_size, drop_remainder=True)
naive = tf.data.Options()
naive.experimental_optimization.map_and_batch_fusion = False  # No MapAndBatch running ahead.
naive.experimental_optimization.map_parallelization = False  # The map stays sequential.
naive.experimental_optimization.inject_prefetch = False  # No prefetch added at the end.
naive_feed = naive_feed.with_options(naive)

# %% [markdown]
# ## 1. The input that costs nothing (TODO 1)
#
# A step fed by a pipeline takes the time of the step plus any wait for its batch. To see
# the step alone, feed it an input that costs nothing.
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
# **TODO 2.** Make `feed`: the naive feed's batches, from `serialized` and `decode_one()`,
# made so that the accelerator does not wait for them. The check times your feed and the
# naive one feeding a stand-in accelerator, in turns.

# %%
# TODO 2: the same batches, ready when the step asks for them.
### BEGIN SOLUTION
feed = (
    serialized.map(decode_one, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(global_batch_size, drop_remainder=True)
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
# below give its rate, where it comes from and what it assumes. During a step it asks
# for nothing; only what a feed runs in the background goes on. The time it then waits
# for its next batch is its idle time, measured at every step. Five feeds take turns:
# from memory (TODO 1), the naive feed, yours (TODO 2), and the course pipeline (lab 3's:
# decoded by batch in a parallel `map()`) without and with `prefetch()`.

# %%
print(accelerator_wait.describe_stand_in(STAND_IN_IMAGES_PER_SECOND, batch_size=global_batch_size))
stand_in = accelerator_wait.SimulatedAccelerator(
    images_per_second=STAND_IN_IMAGES_PER_SECOND,
    batch_size=global_batch_size,
    num_steps=NUM_TIMED_STEPS,
)
course = dict(target_size=TARGET_SIZE, num_classes=len(class_names), image_size=IMAGE_SIZE)
course |= dict(batch_size=global_batch_size, storage=simulated_storage, epochs=None)
fed_by = {
    "fed from memory": in_memory,
    "fed by the naive feed": naive_feed,
    "fed by your feed": feed,
    "fed by the course pipeline, no prefetch": pipeline.tfrecord_images(
        shard_set.paths, **course, prefetch=False
    ),
    "fed by the course pipeline": pipeline.tfrecord_images(shard_set.paths, **course),
}
wait_runs = comparison.measure_in_turns(stand_in.candidates(fed_by), repeats=NUM_ROUNDS)
print("\n".join(stand_in.describe_idle()))
figure = accelerator_wait.plot_step_timelines([runs[-1] for runs in stand_in.timelines.values()])
verdict_lines = []  # Every comparison's line, printed again in "What you measured".


def judge(candidate, baseline, faster, slower):
    """Prints both medians and ranges and the course's verdict, and keeps the line."""
    said = comparison.verdict(candidate, baseline, faster=faster, slower=slower)
    verdict_lines.append(step_costs.describe_comparison(candidate, baseline, said))
    print(verdict_lines[-1])


WAITS = dict(faster="faster than from memory", slower="the accelerator waits for its input")
for label in list(fed_by)[1:]:
    judge(wait_runs[label], wait_runs["fed from memory"], **WAITS)

# %% [markdown]
# The timeline draws each feed's last round, the naive feed's whole run on its axis: red,
# the accelerator waits for its batch; green, a step. A step's images/s is `batch / (step
# + idle)`, and the step is the same sleep in every row, so the rows differ only by their
# idle time. Each verdict compares a feed with the stand-in fed from memory by the
# course's one rule: "beyond the noise" when every round of one beat every round of the
# other and the medians are at least `comparison.MIN_EFFECT` apart; "small but
# consistent" when the rounds are apart but the medians closer; "not resolved in N
# rounds" when the rounds overlap. Where other processes took a share of the cores, it
# judges nothing and says so.
#
# Without `prefetch()` the course pipeline still runs ahead a little: a parallel `map()`
# makes its next results in the background. Compare its idle time with the prefetched
# row's.
#
# ## Where does the course pipeline stop keeping up?
#
# A faster chip takes its batches sooner. The same pipeline against the stand-in at each
# of `STAND_IN_SPEEDS` times its rate, each against the stand-in fed from memory:

# %%
speeds = {
    f"stand-in at {factor}x": accelerator_wait.SimulatedAccelerator(
        images_per_second=factor * STAND_IN_IMAGES_PER_SECOND,
        batch_size=global_batch_size,
        num_steps=NUM_TIMED_STEPS,
    )
    for factor in STAND_IN_SPEEDS
}
candidates = {}
for speed, chip in speeds.items():
    course_pipeline = fed_by["fed by the course pipeline"]
    feeds = {f"{speed}, from memory": in_memory, f"{speed}, course pipeline": course_pipeline}
    candidates |= chip.candidates(feeds)
speed_runs = comparison.measure_in_turns(candidates, repeats=NUM_ROUNDS)
for speed, chip in speeds.items():
    print("\n".join(chip.describe_idle()))
    judge(speed_runs[f"{speed}, course pipeline"], speed_runs[f"{speed}, from memory"], **WAITS)

# %% [markdown]
# The first speed whose verdict says the accelerator waits is where this machine's cores
# stop keeping up with such a chip.
#
# ## Your own device
#
# The same question for lab 4's model on your device, fed from memory and by your feed.
# On a CPU the model shares the cores with the feed; a TPU computes on its own chip, and
# its profiler
# (`keras.callbacks.TensorBoard(log_dir, profile_batch=(10, 15))` on TensorFlow,
# `jax.profiler.trace(log_dir)` on JAX) splits each step into compute and input wait.

# %%
steps_per_execution = strategy.supported_steps_per_execution(choice, STEPS_PER_EXECUTION)
with choice.scope():
    timed_model = models.small_convnet(IMAGE_SIZE, len(class_names))  # Trained, not kept.
    timed_model.compile(
        optimizer=keras.optimizers.Adam(0.001),
        loss="categorical_crossentropy",
        steps_per_execution=steps_per_execution,
    )
runs = comparison.measure_in_turns(
    {
        f"training fed {name}": step_costs.training_rate(
            timed_model, dataset, num_steps=NUM_TIMED_STEPS, batch_size=global_batch_size
        )
        for name, dataset in [("from memory", in_memory), ("by your feed", feed)]
    },
    repeats=NUM_ROUNDS,
)
judge(
    runs["training fed by your feed"],
    runs["training fed from memory"],
    faster="faster than from memory",
    slower="training waits for its input",
)

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); "
    f"global batch {global_batch_size}, {NUM_ROUNDS} rounds in turns."
)
print("\n".join([*stand_in.describe_idle(), *verdict_lines]))

# %% [markdown]
# **Takeaway.** A feed that makes each batch only when the step asks for it adds all of
# that work to every step, and the accelerator waits. Decoding in parallel and prefetching
# make the next batches while the step runs, but only as fast as the cores allow: measure
# the idle time per step against the chip you will feed, as the speeds above did.
#
# *What changed from the original course:* it never measured whether the input kept up.
