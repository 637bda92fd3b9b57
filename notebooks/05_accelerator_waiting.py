# %% [markdown]
# # Lesson 5 · Is the accelerator waiting?
#
# Lab 4 trained a model from the TFRecord pipeline. Here you ask whether that training
# waits for its input, and what else a step's time depends on: the batch per core, the
# number of steps per call into the compiled step, and how much of each JPEG is decoded.
# This lesson writes its own shards if lab 2 did not, and builds its own model: it does
# not need lab 4 to have run.
#
# **You will:**
#
# 1. Measure whether training waits for its input: training steps fed by the pipeline
#    against steps fed from memory (TODO 1).
#
# Then you see what fills a TPU's matrix unit, what `steps_per_execution` saves, and what
# decoding only part of each JPEG buys.

# %% [markdown]
# ## Parameters
#
# The set-up reads `BACKEND`, so the parameters come first. On Colab's TPU runtime,
# `"auto"` takes JAX (Colab ships it there, without TensorFlow); elsewhere TensorFlow.

# %% tags=["parameters"]
BACKEND = "auto"  # Keras's backend: "auto", "tensorflow" or "jax" (read by the set-up).
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
DEVICE = "auto"  # "auto", or force "tpu", "gpu" or "cpu".
IMAGE_SIZE = 96  # The model's input size: images are resized in the pipeline.
BATCH_PER_REPLICA = None  # None: the device's rule of thumb (strategy.BATCH_PER_REPLICA).
STEPS_PER_EXECUTION = 16  # Training steps run per call into the compiled function.
NUM_TIMED_STEPS = 32  # Steps timed in each step-time measurement.
# A stand-in for a faster accelerator: the images/s it would consume. A setting, not a
# measurement: put in what your accelerator trains at, to see whether the pipeline keeps up.
STAND_IN_IMAGES_PER_SECOND = 5000
TIMED_BATCHES_PER_REPLICA = [8, 32, 128]  # Batch sizes per replica timed against each other.
NUM_DECODE_IMAGES = 2000  # Records read into memory for "Decode less", timed per run.
DECODE_REPEATS = 5  # Alternating runs of each way of decoding.
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
    conversion,
    decode_less,
    display,
    models,
    pipeline,
    records,
    sources,
    step_timing,
    strategy,
    timing,
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
shard_set = conversion.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names
num_records = sum(shard_set.record_counts.values())
batch_per_replica = BATCH_PER_REPLICA or strategy.BATCH_PER_REPLICA[choice.kind]
global_batch_size = strategy.cap_batch_size(
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


def resize_batch(images, labels):
    """Resizes a batch of images to IMAGE_SIZE, back to uint8."""
    images = tf.image.resize(images, [IMAGE_SIZE, IMAGE_SIZE], antialias=True)
    return tf.saturate_cast(tf.round(images), tf.uint8), labels


def training_pipeline(*, cache):
    """Lab 3's pipeline, endless, in batches of the global batch at IMAGE_SIZE."""
    dataset = pipeline.tfrecord_images(
        shard_set.paths,
        target_size=TARGET_SIZE,
        num_classes=len(class_names),
        batch_size=global_batch_size,
        cache=cache,
        prefetch=False,
    )
    dataset = dataset.map(resize_batch, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.filter(lambda images, labels: tf.shape(images)[0] == global_batch_size)
    return dataset.repeat().prefetch(tf.data.AUTOTUNE)


# %% [markdown]
# ## Is training waiting for its input?
#
# Training waits for its input when the pipeline delivers fewer images per second than
# the training step consumes. Measure both sides:
#
# - what the device consumes: training steps fed one batch held in memory, an input that
#   costs nothing;
# - what the pipeline delivers on its own, with no model: `uncached`, so that every image
#   is read from the shards and decoded (what the first epoch costs, and every epoch of a
#   dataset too large to cache); and `cached`, from its cache after one pass;
# - and training steps fed by `uncached`: if their time is close to the in-memory one,
#   reading keeps up here.
#
# A faster accelerator consumes more. `STAND_IN_IMAGES_PER_SECOND` stands in for one: a
# setting, not a measurement. Where the pipeline delivers less than an accelerator
# consumes, that accelerator would wait: training there is input-bound.

# %%
uncached = training_pipeline(cache=False)
cached = training_pipeline(cache=True)
one_batch = next(iter(uncached))
in_memory = tf.data.Dataset.from_tensors(one_batch).repeat()
timed_images = NUM_TIMED_STEPS * global_batch_size
from_shards = timing.measure_throughput(
    uncached, num_images=timed_images, label="pipeline, reading and decoding"
)
timing.measure_throughput(cached, num_images=num_records, label="filling the cache")
from_cache = timing.measure_throughput(
    cached, num_images=timed_images, label="pipeline, from its cache"
)
input_bound = step_timing.measure_input_bound(
    compiled_model(steps_per_execution), uncached, in_memory, num_steps=NUM_TIMED_STEPS
)
print(input_bound.summary())

# %%
consumers = {
    f"{choice.kind} consumes": global_batch_size / input_bound.step_in_memory,
    "the stand-in consumes": STAND_IN_IMAGES_PER_SECOND,
}
print("\n".join(step_timing.describe_keeps_up([from_shards, from_cache], consumers)))
trained = timing.ThroughputResult(
    "training, fed without cache",
    num_images=timed_images,
    seconds=input_bound.step_fed * NUM_TIMED_STEPS,
    images_per_second=global_batch_size / input_bound.step_fed,
    megabytes_per_second=None,
    warmup_seconds=0.0,
)
figure = display.plot_throughput(
    [from_shards, from_cache, trained],
    title="What the pipeline delivers, against what the accelerator consumes",
    references=consumers,
)

# %% [markdown]
# Read the lines above: a bar below a dashed line is a pipeline that consumer would wait
# for. The cache serves the later epochs (the second bar); the first epoch, and every
# epoch of a dataset too large to cache, run at the speed of reading and decoding (the
# first bar). On a CPU, the pipeline and the training steps share the same cores, so the
# step fed by the pipeline can be slower than the one fed from memory even where the
# pipeline alone keeps up; an accelerator computes on its own chips while the host's
# cores feed it.
#
# On a real TPU, the profiler shows the same thing from the device's side. Capture a few
# steps (on TensorFlow `keras.callbacks.TensorBoard(log_dir, profile_batch=(10, 15))`; on
# JAX `jax.profiler.trace(log_dir)` around some steps) and open TensorBoard's Profile tab:
# its overview page splits each step's time into compute and waiting for input, and
# names the TPU's idle time. A large input share there is the ratio above, measured on
# the device.

# %% [markdown]
# ## Why about 128 images per TPU core
#
# A TPU core multiplies matrices in its matrix unit (MXU): a 128 x 128 grid of
# multiply-adders, a *systolic array*, through which the numbers flow from one cell to
# the next, one beat at a time. The images of a batch are the rows that flow through it:
# with far fewer than 128 per core, the array is mostly idle on each pass, and each step
# still pays its fixed costs. So a TPU wants about 128 images per core, or a multiple.
# (The original course stated this; here you measure the shape of it on your device.)
#
# The cell times training steps, with data in memory, at several batch sizes per replica
# (fewer steps for the larger batches, so that each size trains on as many images).

# %%
batch_timings = step_timing.time_batch_sizes(
    lambda: compiled_model(1),
    one_batch,
    batches_per_replica=TIMED_BATCHES_PER_REPLICA,
    num_replicas=choice.num_replicas,
    num_timed_steps=NUM_TIMED_STEPS,
)

# %% [markdown]
# Read the images/s column above: where it grows with the batch, the smaller batch left
# the device partly idle, each step paying its fixed costs for fewer images; where it stays
# level or falls, this device was already full at the smaller batch. A TPU core fills at
# about 128 images, its matrix unit's size.

# %% [markdown]
# ## `steps_per_execution`: 1 against more
#
# Each call from Python into the compiled step function has a fixed cost. On a TPU, where
# a step takes little time, that cost can be most of the step; `steps_per_execution=N`
# pays it once per N steps. To see where it matters, time a step so small that the fixed
# cost dominates, a tiny model on 8 numbers per image and a batch of 8, beside the lab's
# model. (On JAX, Keras 3.15 calls one compiled step at a time even with N: expect no
# gain there.)


# %%
step_times = {}
for n in sorted({1, steps_per_execution}):  # Only 1 where 1 is all that works.
    tiny, tiny_batches = step_timing.tiny_model_and_batches(
        batch_size=8 * choice.num_replicas,
        num_outputs=len(class_names),
        steps_per_execution=n,
        scope=choice.scope(),
    )
    step_times[n] = {
        "lab's model": timing.time_training_steps(
            compiled_model(n), in_memory, num_steps=NUM_TIMED_STEPS
        ),
        "tiny model": timing.time_training_steps(tiny, tiny_batches, num_steps=4 * NUM_TIMED_STEPS),
    }
print("\n".join(step_timing.describe_steps_per_execution(step_times, steps_per_execution)))

# %% [markdown]
# Compare the two ratios above: the smaller the step, the more of it is the fixed cost
# of a call, and the more `steps_per_execution` saves.

# %% [markdown]
# ## Decode less: crop while decoding
#
# The shards hold `TARGET_SIZE` images and the model sees `IMAGE_SIZE`: every pixel is
# decoded, and the resize then discards much of that work. TPU reference models (the
# ResNet preprocessing in `tensorflow/tpu`) augment with a random crop, and they pick
# the crop *before* decoding:
#
# - `tf.io.extract_jpeg_shape()` reads the image's size from the JPEG header alone;
# - `tf.image.sample_distorted_bounding_box()` picks a random window in it, its area and
#   shape drawn from the reference's ranges (printed below);
# - `tf.io.decode_and_crop_jpeg()` then decodes only that window's part of the image.
#
# A second way to decode less is DCT scaling: `tf.io.decode_jpeg(..., ratio=2)` decodes
# at half the width and height, computed from the JPEG's coarse frequencies instead of
# decoding every pixel and scaling down afterwards.
#
# Below, the three ways make the same random crops at `IMAGE_SIZE` from the same JPEG
# bytes: decode, then crop (the usual way); decode only the crop; decode at half size,
# then crop. The records are read into memory first, so that only decoding, cropping and
# resizing are timed.

# %%
serialized_records = tf.data.TFRecordDataset(shard_set.paths).take(NUM_DECODE_IMAGES)
encoded_images = [records.parse_record(r)["image"].numpy() for r in serialized_records]
average_kilobytes = sum(map(len, encoded_images)) / len(encoded_images) / 1000
print(f"{len(encoded_images)} JPEGs in memory, {average_kilobytes:.1f} kB each on average")
smallest, largest = decode_less.AREA_RANGE
narrowest, widest = decode_less.ASPECT_RATIO_RANGE
print(
    f"Random windows: {smallest:.0%} to {largest:.0%} of the image's area, "
    f"width/height {narrowest:.2f} to {widest:.2f}"
)

# %% [markdown]
# One random window per image, cut by each of the three ways:

# %%
figure = display.show_image_rows(
    decode_less.sample_crops(encoded_images[:4], image_size=IMAGE_SIZE),
    title=f"The same windows, three ways, at {IMAGE_SIZE} px",
)

# %% [markdown]
# Does decoding only the crop give the same pixels as decoding everything, then
# cropping? Compared on random windows, before any resizing:

# %%
differences = decode_less.crop_differences(encoded_images[:50])

# %% [markdown]
# The pixels that differ, if any, lie on the crop's left and right edges (the line above
# says how many lie elsewhere): these JPEGs store colour at half the resolution, and the
# smooth upsampling of colour reads the column beyond the edge, which was not decoded.
# Decoding at half size gives half the pixels across each window, so a small window is
# enlarged from fewer pixels and looks softer (the last row of the figure).

# %% [markdown]
# Now the speed: each way is timed `DECODE_REPEATS` times, in turns, so that a change in
# the machine's load touches all three alike.

# %%
with timing.LoadWatch() as decode_load:
    speedups = decode_less.time_variants(
        encoded_images, image_size=IMAGE_SIZE, num_images=NUM_DECODE_IMAGES, repeats=DECODE_REPEATS
    )
print(decode_load.summary())
for speedup in speedups.values():
    print(speedup.summary(".2f") + " over decoding, then cropping")

# %% [markdown]
# Read the ratios printed above: they are what decoding less buys on this machine, for
# these images. The resize, the random window and `tf.data`'s cost per image are paid
# the same by all three ways: only the decoding differs, so a ratio near 1 means that
# decoding is a small part of the work at this size, and a ratio below 1 means that this
# way of decoding costs more here than it saves. (The line on the machine's load says
# whether other work ran meanwhile; the min-max ranges show how much the numbers moved.)
#
# **When does it matter?** Lab 4's training pipeline caches the decoded images
# (`cache()` in its TODO 3) and augments after the cache: each image is decoded once, in
# the first epoch. A crop chosen while decoding would be cached too, and come back the
# same in every epoch; with a cache, a random crop belongs after it, on decoded images.
# Decoding less matters when the decoded images do not fit in memory, as with ImageNet
# on a TPU: every epoch decodes every image again, and the input pipeline must keep up
# with the accelerator. That is why the reference models crop while decoding.
#
# One more place to decode less: `resize_batch()` above resizes `TARGET_SIZE` images to
# `IMAGE_SIZE`. Where that is half the size, `decode_jpeg(..., ratio=2)` gives it
# directly, with no resize.

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); "
    f"global batch {global_batch_size}."
)
print(
    f"Step time fed by the pipeline without cache / with one batch in memory: "
    f"{input_bound.ratio:.2f} ({input_bound.verdict})."
)
print(
    f"The pipeline delivers {from_shards.images_per_second:,.0f} images/s reading and "
    f"decoding, {from_cache.images_per_second:,.0f} from its cache; {choice.kind} consumes "
    f"{global_batch_size / input_bound.step_in_memory:,.0f}, "
    f"the stand-in {STAND_IN_IMAGES_PER_SECOND:,}."
)
for name in ["lab's model", "tiny model"]:
    print(
        f"steps_per_execution 1 vs {steps_per_execution}, {name}: "
        f"{step_times[1][name] * 1000:.2f} vs "
        f"{step_times[steps_per_execution][name] * 1000:.2f} ms per step."
    )
print(
    "Images/s against batch per replica: "
    + ", ".join(
        f"{size}: {size * choice.num_replicas / seconds:,.0f}"
        for size, seconds in batch_timings.items()
    )
    + "."
)
for speedup in speedups.values():
    print(speedup.summary(".2f") + " over decoding, then cropping")
