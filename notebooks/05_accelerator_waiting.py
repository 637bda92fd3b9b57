# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# Does a training step wait for its input, and what else sets its time: prefetching, the
# batch per core, the steps per call, how much of each JPEG is decoded? Every comparison
# is taken in rounds, in turns, and judged from its medians and ranges. This lesson
# writes its own shards if lab 2 did not, and builds its own model: lab 4 need not have
# run.
#
# **You will:**
#
# 1. Make the input that costs nothing: one batch held in memory (TODO 1).
# 2. Write the course's verdict on two ranges: faster, slower or within the noise (TODO 2).
#
# Then you time the training step fed by the pipeline, from memory and without prefetch,
# see what fills a TPU's matrix unit, and time `steps_per_execution` and decoding less.

# %% [markdown]
# ## Parameters
#
# The set-up reads `BACKEND`, so the parameters come first. `"auto"` takes JAX on Colab's
# TPU runtime (it ships JAX, no TensorFlow), TensorFlow elsewhere.

# %% tags=["parameters"]
BACKEND = "auto"  # Keras's backend: "auto", "tensorflow" or "jax" (read by the set-up).
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
DEVICE = "auto"  # "auto", or force "tpu", "gpu" or "cpu".
IMAGE_SIZE = 96  # The model's input size: decoded at that size from TARGET_SIZE.
BATCH_PER_REPLICA = None  # None: the device's rule of thumb (strategy.BATCH_PER_REPLICA).
STEPS_PER_EXECUTION = 16  # Training steps run per call into the compiled function.
NUM_TIMED_STEPS = 32  # Training steps timed in each run.
NUM_ROUNDS = 5  # Rounds of every comparison, its candidates taken in turns.
# A stand-in for a faster accelerator: the images/s it would consume. A setting, not a
# measurement: put in what your accelerator trains at, to see whether the pipeline keeps up.
STAND_IN_IMAGES_PER_SECOND = 5000
TIMED_BATCHES_PER_REPLICA = [8, 32, 128]  # Batch sizes per replica timed against each other.
NUM_DECODE_IMAGES = 2000  # Records read into memory for "Decode less", timed per run.
SEED = 42

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import keras
import tensorflow as tf

from utils import (
    accelerator_wait,
    batch_sizes,
    charts,
    checks,
    comparison,
    decode_less,
    display,
    machine_load,
    models,
    pipeline,
    records,
    shard_cache,
    sources,
    strategy,
)

# %% [markdown]
# ## The device, the shards and a model
#
# As in lab 4: `strategy.find_strategy()` finds the TPU, the GPUs or the CPU; the shards
# are lab 2's (written here if they are missing); the model is lab 4's small convnet,
# compiled but not trained (a step costs the same with any weights).

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
batch_per_replica = BATCH_PER_REPLICA or strategy.BATCH_PER_REPLICA[choice.kind]
global_batch_size = batch_sizes.cap_batch_size(
    batch_per_replica * choice.num_replicas,
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


def training_pipeline(*, cache=False, prefetch=True):
    """Lab 3's pipeline, as lab 4 reads it (decoded at IMAGE_SIZE), endless, in full batches."""
    dataset = pipeline.tfrecord_images(
        shard_set.paths,
        target_size=TARGET_SIZE,
        num_classes=len(class_names),
        batch_size=global_batch_size,
        image_size=IMAGE_SIZE,
        cache=cache,
        prefetch=False,
    )
    # A step needs full batches (a TPU needs static shapes): drop the last, smaller one.
    dataset = dataset.filter(lambda images, labels: tf.shape(images)[0] == global_batch_size)
    return dataset.repeat().prefetch(tf.data.AUTOTUNE) if prefetch else dataset.repeat()


uncached = training_pipeline()
no_prefetch = training_pipeline(prefetch=False)
cached = training_pipeline(cache=True)
for _ in cached.take(num_records // global_batch_size + 1):  # One whole pass fills the cache.
    pass

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
# Timings differ from run to run, more so on a shared machine. So each comparison below
# takes `NUM_ROUNDS` rounds, its candidates in turns (a busy moment touches all of them):
# each candidate gets a median and a range. Every lesson of the course judges a difference
# by one rule, `comparison.verdict()`: beyond the noise only when both hold, the medians
# differ by at least `comparison.MIN_EFFECT` (10%) and the ranges do not overlap (every
# round of one beat every round of the other). Otherwise, within the noise.
#
# **TODO 2.** Complete `verdict(candidate, baseline, *, min_effect, faster, slower)`:
# `candidate` and `baseline` hold one images/s value per round (`.median`, `.minimum`,
# `.maximum`). Make `answer` `faster` when the candidate's median is at least
# `1 + min_effect` times the baseline's and its slowest round beat the baseline's fastest;
# `slower` when the same holds the other way round; otherwise `comparison.WITHIN_NOISE`.
# Neither test alone is enough: two steady settings 3% apart can have separate ranges,
# and medians 30% apart can come with ranges that overlap.


# %%
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
# ## Is training waiting for its input?
#
# Training waits when the pipeline delivers fewer images per second than the step
# consumes. One round times, in turns:
#
# - the pipeline alone, no model: `uncached` reads and decodes every image (the first
#   epoch, and every epoch of a dataset too large to cache); `cached` serves them from
#   memory after one pass. That is what the pipeline *delivers*;
# - training steps fed from memory (TODO 1): what the device *consumes*;
# - training steps fed by `uncached`, with its `prefetch` and without it.
#
# `STAND_IN_IMAGES_PER_SECOND` stands in for a faster accelerator: a setting, not a
# measurement. `judge()` prints the two medians and ranges, and your `verdict()`.

# %%
timed_model = compiled_model(steps_per_execution)  # Trained by the timing; not kept.
timed_images = NUM_TIMED_STEPS * global_batch_size


verdict_lines = []  # Every comparison's line, printed again in "What you measured".


def judge(candidate, baseline, faster, slower):
    """Prints both medians and ranges and your verdict, and keeps the line."""
    said = verdict(candidate, baseline, faster=faster, slower=slower)
    verdict_lines.append(accelerator_wait.describe_comparison(candidate, baseline, said))
    print(verdict_lines[-1])


def training_fed_by(dataset):
    return accelerator_wait.training_rate(
        timed_model, dataset, num_steps=NUM_TIMED_STEPS, batch_size=global_batch_size
    )


runs = comparison.measure_in_turns(
    {
        "pipeline alone, reading and decoding": uncached,
        "pipeline alone, from its cache": cached,
        "training fed from memory": training_fed_by(in_memory),
        "training fed by the pipeline": training_fed_by(uncached),
        "training fed without prefetch": training_fed_by(no_prefetch),
    },
    num_images=timed_images,
    repeats=NUM_ROUNDS,
)

# %%
judge(
    runs["training fed by the pipeline"],
    runs["training fed from memory"],
    faster="not input-bound",
    slower="input-bound",
)
delivered = {name: runs[name] for name in list(runs)[:2]}
consumed = {
    f"{choice.kind} consumes": runs["training fed from memory"],
    "the stand-in consumes": comparison.RepeatedResult(
        "the stand-in's need", (STAND_IN_IMAGES_PER_SECOND,) * NUM_ROUNDS
    ),
}
for rate in delivered.values():
    for need in consumed.values():
        judge(rate, need, faster="keeps up", slower="input-bound")
figure = charts.plot_throughput(
    accelerator_wait.median_bars(delivered),
    title="Bars: what the pipeline delivers, alone. Lines: what each consumer takes",
    references={name: need.median for name, need in consumed.items()},
)

# %% [markdown]
# Read the verdicts above, and only those not "within the noise". The first compares the
# step with its input against the step alone; the others set each consumer's need
# against what the pipeline alone delivers, as the chart does with the medians. On a
# CPU the pipeline and the step share the cores, so the fed step can be slower even where
# the pipeline alone keeps up; an accelerator computes on its own chips. On a TPU the
# profiler (`keras.callbacks.TensorBoard(log_dir, profile_batch=(10, 15))` on TensorFlow,
# `jax.profiler.trace(log_dir)` on JAX) splits each step into compute and input wait.
#
# ### Prefetch, with the training step as the consumer
#
# Lab 3's consumer only counted images, so `prefetch` had nothing to overlap; here the
# consumer trains. Without `prefetch`, a batch is made only when the step asks for it;
# with it, the next batches are made while the step runs. Where the cores are all busy
# (a CPU that both decodes and trains) there is no idle time to fill. (On JAX a step is
# dispatched asynchronously, so some overlap comes without `prefetch`.)

# %%
judge(
    runs["training fed by the pipeline"],
    runs["training fed without prefetch"],
    faster="prefetch speeds training",
    slower="prefetch slows training",
)

# %% [markdown]
# ## What fills a TPU's matrix unit
#
# A TPU core multiplies matrices in its matrix unit (MXU), a grid of multiply-adders: 128
# x 128 on v5e (Colab's and Kaggle's TPUs), 256 x 256 on v6e. A matrix multiply has rows
# (what flows through), a depth (what is summed over) and a width (the outputs):
#
# - a **dense layer**'s rows are the batch; its depth and width are its input and
#   output features;
# - a **convolution**'s rows are batch x height x width, one per output pixel; its depth
#   is kernel height x width x input channels; its width is its filters.
#
# So for a convnet the batch alone is not what fills the MXU: a few images already make
# thousands of rows (the lines below count them). Cloud TPU's performance guide
# gives the rule that matters: XLA lays arrays out in tiles of 8 x 128, so keep the batch
# per core a multiple of 8 and feature sizes (channels, units) multiples of 128; a size of
# 32 is padded to 128, a quarter of it used. The model's own matrix multiplies, per replica:

# %%
print(
    "\n".join(
        accelerator_wait.describe_matrix_shapes(timed_model, batch_per_replica=batch_per_replica)
    )
)

# %% [markdown]
# What this lesson can measure is the other reason for large batches: a step's fixed
# costs (a call from Python, the optimizer's update of every weight), paid once per batch.
# Below, training images/s at several batches per replica, in turns. It cannot measure
# the MXU (a TPU's profiler can); on a CPU or GPU, the numbers say nothing about a TPU's
# shape.

# %%
batch_runs = comparison.measure_in_turns(
    accelerator_wait.batch_size_rates(
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
    tiny, tiny_batches = accelerator_wait.tiny_model_and_batches(
        batch_size=8 * choice.num_replicas,
        num_outputs=5,
        steps_per_execution=n,
        scope=choice.scope(),
    )
    call_candidates[f"lesson's model, {n} per call"] = accelerator_wait.training_rate(
        compiled_model(n), in_memory, num_steps=NUM_TIMED_STEPS, batch_size=global_batch_size
    )
    call_candidates[f"tiny model, {n} per call"] = accelerator_wait.training_rate(
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
# A random crop (the usual augmentation of large images) decodes every pixel of the
# image, then keeps a window of it and throws the rest away. Two ways decode less:
#
# - crop while decoding: `tf.io.extract_jpeg_shape()` reads the image's size from the
#   JPEG header alone, `tf.image.sample_distorted_bounding_box()` picks a random window
#   in it, and `tf.io.decode_and_crop_jpeg()` decodes only that window;
# - DCT scaling: `tf.io.decode_jpeg(..., ratio=2)` decodes at half the width and height,
#   from the JPEG's coarse frequencies, instead of decoding every pixel and scaling down.
#
# The windows' ranges (printed below) are `tensorflow/tpu`'s ResNet preprocessing's. It
# once cropped its training images while decoding; since its commit 9a3c65a (2023-11-08)
# the training crop decodes the whole image (`decode_image()`, then crop), and only its
# evaluation centre crop still uses `decode_and_crop_jpeg()`. Below, the three ways cut
# the same windows from the same JPEG bytes, held in memory: no reading is timed.

# %%
serialized_records = tf.data.TFRecordDataset(shard_set.paths).take(NUM_DECODE_IMAGES)
encoded_images = [records.parse_record(r)["image"].numpy() for r in serialized_records]
average_kilobytes = sum(map(len, encoded_images)) / len(encoded_images) / 1000
print(f"{len(encoded_images)} JPEGs in memory, {average_kilobytes:.1f} kB each on average")
smallest_area, largest_area = decode_less.AREA_RANGE
narrowest, widest = decode_less.ASPECT_RATIO_RANGE
print(
    f"Random windows: {smallest_area:.0%} to {largest_area:.0%} of the image's area, "
    f"width/height {narrowest:.2f} to {widest:.2f}"
)
figure = display.show_image_rows(
    decode_less.sample_crops(encoded_images[:4], image_size=IMAGE_SIZE),
    title=f"The same windows, three ways, at {IMAGE_SIZE} px",
)
# Does decoding only the crop give the pixels of decoding everything, then cropping?
differences = decode_less.crop_differences(encoded_images[:50])

# %% [markdown]
# The pixels that differ, if any, lie on the crop's left and right edges (the line above
# says how many lie elsewhere): these JPEGs store colour at half the resolution, and the
# smooth upsampling of colour reads the column beyond the edge, which was not decoded.
# Decoding at half size gives half the pixels across each window, so a small window is
# enlarged from fewer pixels and looks softer (the last row of the figure).
#
# Now the speed, in `NUM_ROUNDS` rounds, the three ways in turns:

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
# **When does it matter?** Lab 4 caches its decoded images and augments after the cache:
# each image is decoded once. A crop chosen while decoding would be cached too, and come
# back the same every epoch; with a cache, a random crop belongs after it. Decoding less
# matters when the decoded images do not fit in memory (ImageNet on a TPU): every epoch
# decodes every image again.
# `training_pipeline()` above already decodes less: where `IMAGE_SIZE` is half of
# `TARGET_SIZE`, `decode_jpeg(..., ratio=2)` gives it directly (`pipeline.decode_ratio()`).

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); "
    f"global batch {global_batch_size}, {NUM_ROUNDS} rounds in turns."
)
for result in [*runs.values(), *batch_runs.values(), *call_runs.values()]:
    print(result.summary() + " images/s")
print("\n".join(verdict_lines))

# %% [markdown]
# *What changed from the original course:* it never measured whether the input kept up,
# and its "128 per core" is not true of a convolution (details: docs/lessons.md).
