# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
# ---

# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# A stand-in for a TPU chip is fed by a naive pipeline, then by the course's: does it
# wait for its input? Then what else sets a step's time: the batch (and what fills a TPU's
# matrix unit), the steps per call, how much of each JPEG is decoded. Every comparison is
# taken in rounds, in turns. This lesson writes its own shards if lab 2 did not.
#
# **You will:**
#
# 1. Make the input that costs nothing: one batch held in memory (TODO 1).
# 2. Write the course's verdict on two ranges: faster, slower or within the noise (TODO 2).

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
IMAGE_SIZE = 96  # The model's input size: decoded at that size from TARGET_SIZE.
BATCH_PER_REPLICA = 16  # Images per replica per step: lab 4's, a multiple of 8 (see the MXU).
STEPS_PER_EXECUTION = 16  # Training steps run per call into the compiled function.
NUM_TIMED_STEPS = 32  # Training steps timed in each run.
NUM_ROUNDS = 5  # Rounds of every comparison, its candidates taken in turns.
STAND_IN_IMAGES_PER_SECOND = 2120  # A v5e chip on ResNet-50, 192 px: estimated (printed below).
LATENCY_MS = 50  # The simulated storage: lab 3's first-byte latency, median,
LATENCY_P99_MS = 500  # its 99th percentile,
STREAM_MEGABYTES_PER_SECOND = 85  # and the bandwidth of one object stream.
TIMED_BATCHES_PER_REPLICA = [8, 32, 128]  # Batch sizes per replica timed against each other.
NUM_DECODE_IMAGES = 2000  # Records read into memory for "Decode less", timed per run.
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

from utils import (
    batch_sizes,
    checks,
    comparison,
    display,
    models,
    pipeline,
    random_crops,
    records,
    strategy,
)
from utils.lab import machine_load, shard_cache, sources, storage
from utils.lessons.accelerator_waiting import accelerator_wait, decode_less, step_costs

# %% [markdown]
# ## The device, the shards and a model
#
# As in lab 4: `strategy.find_strategy()` finds the TPU, GPUs or CPU; the shards are lab
# 2's (written here if missing); the model is lab 4's convnet, compiled but not trained.

# %%
keras.utils.set_random_seed(SEED)
choice = strategy.find_strategy(DEVICE)
keras.mixed_precision.set_global_policy(strategy.PRECISION_POLICY[choice.kind])
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names
num_records = sum(shard_set.record_counts.values())
global_batch_size = batch_sizes.cap_batch_size(
    BATCH_PER_REPLICA * choice.num_replicas,
    num_images=num_records,
    num_replicas=choice.num_replicas,
    purpose="training",
)
steps_per_execution = strategy.supported_steps_per_execution(choice, STEPS_PER_EXECUTION)
print(
    f"{len(shard_set.paths)} shards, {num_records} images; global batch {global_batch_size}; "
    f"steps_per_execution {steps_per_execution}"
)


# %%
def compiled_model(steps_per_execution):
    """Lab 4's small convnet, compiled as lab 4 compiles it, for `steps_per_execution`."""
    with choice.scope():
        model = models.small_convnet(IMAGE_SIZE, len(class_names))
        model.compile(
            optimizer=keras.optimizers.Adam(0.001),
            loss="categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
        )
    return model


# Lab 3's pipeline, as lab 4 reads it (decoded at IMAGE_SIZE), endless: every batch is
# full (a TPU needs static shapes), and nothing is cached: each image is decoded again.
uncached = pipeline.tfrecord_images(
    shard_set.paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    batch_size=global_batch_size,
    image_size=IMAGE_SIZE,
    epochs=None,
)

# %% [markdown]
# ## 1. What the device consumes (TODO 1)
#
# A training step fed by the pipeline takes the time of the step plus any wait for its
# batch. To know the step's own time, feed it an input that costs nothing: one batch,
# already decoded, held in memory and given again at every step.
#
# **TODO 1.** Make `in_memory`: take one batch of `uncached` (`next(iter(uncached))`) and
# make it an endless dataset with `tf.data.Dataset.from_tensors(batch).repeat()`.

# %%
# TODO 1: one batch of the pipeline, held in memory, repeated without end.
### BEGIN SOLUTION
in_memory = tf.data.Dataset.from_tensors(next(iter(uncached))).repeat()
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_in_memory(in_memory, todo=1, pipeline=uncached)
one_batch = next(iter(in_memory))

# %% [markdown]
# ## 2. A verdict from two ranges (TODO 2)
#
# Timings differ from run to run, more so on a shared machine. So each comparison takes
# `NUM_ROUNDS` rounds, its candidates in turns: each gets a median and a range. Every
# lesson judges a difference by one rule, `comparison.verdict()`: beyond the noise only
# when the medians differ by at least `comparison.MIN_EFFECT` (10%) and the ranges do not
# overlap (every round of one beat every round of the other); otherwise, within the noise.
#
# **TODO 2.** Complete `verdict(candidate, baseline, *, min_effect, faster, slower)`:
# `candidate` and `baseline` hold one images/s value per round (`.median`, `.minimum`,
# `.maximum`). Make `answer` `faster` when the candidate's median is at least
# `1 + min_effect` times the baseline's and its slowest round beat the baseline's fastest;
# `slower` when the same holds the other way round; otherwise `comparison.WITHIN_NOISE`.


# %% tags=["save"]
def verdict(
    candidate,
    baseline,
    *,
    min_effect=comparison.MIN_EFFECT,
    faster="faster",
    slower="slower",
):
    """`faster`, `slower` or `comparison.WITHIN_NOISE`: the course's one rule."""
    # TODO 2: judge both the medians and the ranges.
    ### BEGIN SOLUTION
    if (
        candidate.median >= (1 + min_effect) * baseline.median
        and candidate.minimum > baseline.maximum
    ):
        answer = faster
    elif (
        baseline.median >= (1 + min_effect) * candidate.median
        and baseline.minimum > candidate.maximum
    ):
        answer = slower
    else:
        answer = comparison.WITHIN_NOISE
    ### END SOLUTION
    return answer


# %%
# NBVAL_CHECK_OUTPUT
checks.check_verdict(verdict, todo=2, min_effect=comparison.MIN_EFFECT)


# %% [markdown]
# ## Is the accelerator waiting?
#
# The consumer is a stand-in for one TPU v5e chip: each step is a sleep of
# `global_batch_size / STAND_IN_IMAGES_PER_SECOND` seconds, a SIMULATION (the line below
# says where its rate comes from). During a step the loop asks for nothing, as a training
# loop; only what the pipeline runs in the background goes on. The time it then spends in
# `next()` for its batch is its idle time, measured step by step. It is fed, in turns, from
# memory (TODO 1: no wait), by a naive pipeline (one shard at a time, each whole JPEG
# decoded on its own, nothing made ahead) and by the course pipeline (16 shards at once,
# decoded by batch in a parallel `map`, `prefetch`), both reading `TARGET_SIZE` images from
# the simulated storage.

# %%
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
)
print(simulated_storage.describe())
print(accelerator_wait.describe_stand_in(STAND_IN_IMAGES_PER_SECOND, batch_size=global_batch_size))
stand_in = accelerator_wait.SimulatedAccelerator(
    images_per_second=STAND_IN_IMAGES_PER_SECOND,
    batch_size=global_batch_size,
    num_steps=NUM_TIMED_STEPS,
)
reading = dict(target_size=TARGET_SIZE, num_classes=len(class_names), storage=simulated_storage)
fed_by = {
    "stand-in fed from memory": in_memory,
    "stand-in fed by a naive pipeline": accelerator_wait.naive_pipeline(
        shard_set.paths, **reading, batch_size=global_batch_size
    ),
    "stand-in fed by the course pipeline": pipeline.tfrecord_images(
        shard_set.paths, **reading, batch_size=global_batch_size, epochs=None
    ),
}
wait_runs = comparison.measure_in_turns(stand_in.candidates(fed_by), repeats=NUM_ROUNDS)
print("\n".join(stand_in.describe_idle()))
figure = accelerator_wait.plot_step_timelines([runs[-1] for runs in stand_in.timelines.values()])
verdict_lines = []  # Every comparison's line, printed again in "What you measured".


def judge(candidate, baseline, faster, slower):
    """Prints both medians and ranges and your verdict, and keeps the line."""
    said = verdict(candidate, baseline, faster=faster, slower=slower)
    verdict_lines.append(step_costs.describe_comparison(candidate, baseline, said))
    print(verdict_lines[-1])


for feed in ["a naive pipeline", "the course pipeline"]:
    judge(
        wait_runs[f"stand-in fed by {feed}"],
        wait_runs["stand-in fed from memory"],
        faster="faster than from memory (noise)",
        slower="the accelerator waits for its input",
    )

# %% [markdown]
# The timeline draws each feed's last round: red, the accelerator waits for its batch;
# green, a step. A step's images/s is `batch / (step + idle)`, and the step is the same
# sleep in every row: the images/s differ only by the idle time. Against the stand-in's own
# speed (from memory), `verdict()` says "slower" (it waits) or "within the noise".
#
# The naive pipeline makes each batch only when the step asks for it, and slowly: the
# accelerator waits for all of it, every step. The course pipeline reads many shards at
# once (their first-byte waits overlap), decodes by batch on every core, and `prefetch`
# makes the next batches while the step runs: the accelerator waits only where the
# pipeline delivers less than it consumes.
#
# ### Your own device
#
# The same question for lab 4's model on your device. On a CPU the model is the slower side,
# and it shares the cores with the pipeline; a TPU computes on its own chips, and its
# profiler (`keras.callbacks.TensorBoard(log_dir, profile_batch=(10, 15))` on TensorFlow,
# `jax.profiler.trace(log_dir)` on JAX) splits each step into compute and input wait.

# %%
timed_model = compiled_model(steps_per_execution)  # Trained by the timing; not kept.
runs = comparison.measure_in_turns(
    {
        f"training fed {feed}": step_costs.training_rate(
            timed_model, dataset, num_steps=NUM_TIMED_STEPS, batch_size=global_batch_size
        )
        for feed, dataset in [("from memory", in_memory), ("by the pipeline", uncached)]
    },
    repeats=NUM_ROUNDS,
)
judge(
    runs["training fed by the pipeline"],
    runs["training fed from memory"],
    faster="faster than from memory (noise)",
    slower="training waits for its input",
)

# %% [markdown]
# ## What fills a TPU's matrix unit
#
# A TPU core multiplies matrices in its matrix unit (MXU), a grid of multiply-adders: 128
# x 128 on v5e (Colab's and Kaggle's TPUs), 256 x 256 on v6e. A matrix multiply has rows
# (what flows through), a depth (what is summed over) and a width (the outputs): a **dense
# layer**'s rows are the batch, its depth and width its input and output features; a
# **convolution**'s rows are batch x height x width (one per output pixel), its depth
# kernel height x width x input channels, its width its filters.
#
# So for a convnet a few images already make thousands of rows. Cloud TPU's performance
# guide gives the rule: XLA lays arrays out in tiles of 8 x 128, so keep the batch per core
# a multiple of 8 and feature sizes (channels, units) multiples of 128. The weights, depth
# x width, sit on the MXU, each side padded to a multiple of 128: the share in use is the
# depth's share times the width's (depth 27, width 32: 5%). So this lesson, like lab 4,
# takes `BATCH_PER_REPLICA` = 16: a multiple of 8, and many steps on this small dataset.
# The model's matrix multiplies, per replica:

# %%
matrix_shapes = step_costs.describe_matrix_shapes(timed_model, batch_per_replica=BATCH_PER_REPLICA)
print("\n".join(matrix_shapes))

# %% [markdown]
# This lesson can measure the other reason for large batches: a step's fixed costs (a
# call from Python, the optimizer's update of every weight), paid once per batch. Below,
# training images/s at several batches per replica, in turns. It cannot measure the MXU
# (a TPU's profiler can); on a CPU or GPU, the numbers say nothing about a TPU's shape.

# %%
batch_runs = comparison.measure_in_turns(
    step_costs.batch_size_rates(
        lambda: compiled_model(1),
        one_batch,
        batches_per_replica=TIMED_BATCHES_PER_REPLICA,
        num_replicas=choice.num_replicas,
        num_timed_steps=NUM_TIMED_STEPS,
    ),
    repeats=NUM_ROUNDS,
)
smallest, largest = list(batch_runs.values())[0], list(batch_runs.values())[-1]
judge(largest, smallest, "the larger batch trains faster", "the larger batch trains slower")

# %% [markdown]
# ## `steps_per_execution`: 1 against more
#
# Each call from Python into the compiled step has a fixed cost; `steps_per_execution=N`
# pays it once per N steps. Timed on a step so small that the fixed cost dominates (a tiny
# model on 8 numbers, 8 per replica) and on the lesson's model. (On JAX, Keras 3.15 calls
# one compiled step at a time even with N: expect no gain there.)

# %%
call_candidates = {}
for n in sorted({1, steps_per_execution}):  # Only 1 where 1 is all that works.
    tiny, tiny_batches = step_costs.tiny_model_and_batches(
        batch_size=8 * choice.num_replicas,
        num_outputs=5,
        steps_per_execution=n,
        scope=choice.scope(),
    )
    call_candidates[f"lesson's model, {n} per call"] = step_costs.training_rate(
        compiled_model(n), in_memory, num_steps=NUM_TIMED_STEPS, batch_size=global_batch_size
    )
    call_candidates[f"tiny model, {n} per call"] = step_costs.training_rate(
        tiny, tiny_batches, num_steps=4 * NUM_TIMED_STEPS, batch_size=8 * choice.num_replicas
    )
call_runs = comparison.measure_in_turns(call_candidates, repeats=NUM_ROUNDS)
for name in ["lesson's model", "tiny model"]:
    judge(
        call_runs[f"{name}, {steps_per_execution} per call"],
        call_runs[f"{name}, 1 per call"],
        faster="fewer calls pay",
        slower="fewer calls cost",
    )

# %% [markdown]
# Compare the two verdicts above: the smaller the step, the larger the share of it that
# the fixed cost of a call takes, and the more `steps_per_execution` can save.
#
# ## Decode less: crop while decoding
#
# A random crop (the usual augmentation of large images) decodes every pixel, then keeps
# a window and throws the rest away. Two ways decode less:
#
# - crop while decoding: `tf.io.extract_jpeg_shape()` reads the size from the JPEG header,
#   `tf.image.sample_distorted_bounding_box()` picks a random window in it, and
#   `tf.io.decode_and_crop_jpeg()` decodes only that window;
# - DCT scaling: `tf.io.decode_jpeg(..., ratio=2)` decodes at half the width and height,
#   from the JPEG's coarse frequencies.
#
# The windows' ranges (printed below) are `tensorflow/tpu`'s ResNet preprocessing's. It
# once cropped its training images while decoding; since its commit 9a3c65a (2023-11-08)
# the training crop decodes the whole image (`decode_image()`, then crop), and only its
# evaluation centre crop still uses `decode_and_crop_jpeg()`. The three ways cut the same
# windows from the same JPEG bytes, in memory: no reading is timed.

# %%
serialized_records = tf.data.TFRecordDataset(shard_set.paths).take(NUM_DECODE_IMAGES)
encoded_images = [records.parse_record(r)["image"].numpy() for r in serialized_records]
average_kilobytes = sum(map(len, encoded_images)) / len(encoded_images) / 1000
print(f"{len(encoded_images)} JPEGs in memory, {average_kilobytes:.1f} kB each on average")
area, aspect = random_crops.AREA_RANGE, random_crops.ASPECT_RATIO_RANGE
print(
    f"Random windows: {area[0]:.0%} to {area[1]:.0%} of the image's area, "
    f"width/height {aspect[0]:.2f} to {aspect[1]:.2f}"
)
figure = display.show_image_rows(
    decode_less.sample_crops(encoded_images[:4], image_size=IMAGE_SIZE),
    title=f"The same windows, three ways, at {IMAGE_SIZE} px",
)
# Does decoding only the crop give the pixels of decoding everything, then cropping?
differences = decode_less.crop_differences(encoded_images[:50])

# %% [markdown]
# The pixels that differ, if any, lie on the crop's left and right edges (the line above
# says how many lie elsewhere): these JPEGs store colour at half the resolution, and its
# smooth upsampling reads the column beyond the edge, which was not decoded. Decoding at
# half size enlarges a small window from fewer pixels: softer (the figure's last row). Now
# the speed, in `NUM_ROUNDS` rounds, the three ways in turns:

# %%
with machine_load.LoadWatch() as decode_load:
    decode_runs = decode_less.time_variants(
        encoded_images, image_size=IMAGE_SIZE, num_images=NUM_DECODE_IMAGES, repeats=NUM_ROUNDS
    )
print(decode_load.summary())
for label, decode_run in decode_runs.items():
    if label != decode_less.BASELINE:
        baseline = decode_runs[decode_less.BASELINE]
        judge(decode_run, baseline, "decoding less pays here", "decoding less costs here")

# %% [markdown]
# The resize, the window and `tf.data`'s cost per image are alike in all three: only the
# decoding differs. A ratio near 1 means decoding is a small part of the work at this
# size; below 1, that way costs more than it saves. (The line on the
# machine's load says whether other work ran meanwhile.)
#
# **When does it matter?** Lab 4 caches its decoded images, and augments after the cache (a
# crop chosen while decoding would be cached, the same every epoch). Decoding less matters
# when the decoded images do not fit in memory (ImageNet on a TPU): every epoch decodes
# every image again. `uncached` above already decodes less: where `IMAGE_SIZE` is half of
# `TARGET_SIZE`, `decode_jpeg(..., ratio=2)` gives it directly (`pipeline.decode_ratio()`).

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); "
    f"global batch {global_batch_size}, {NUM_ROUNDS} rounds in turns."
)
print("\n".join([*stand_in.describe_idle(), *verdict_lines]))

# %% [markdown]
# *What changed from the original course:* it never measured whether the input kept up,
# and it asked for 128 images per core, which is not what fills the MXU of a convolution
# (details: docs/lessons.md).
