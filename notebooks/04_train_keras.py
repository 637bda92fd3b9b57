# %% [markdown]
# # Lab 4 · Train a Keras model on TPU, GPU or CPU from the TFRecord pipeline
#
# The pipeline of lab 3 now feeds a model. The same notebook runs on a TPU, on GPUs or on
# the CPU: one helper finds the best device here and says which it took. At the end you
# measure whether the training is waiting for its input.
#
# **You will:**
#
# 1. Scale the batch size and the learning rate with the number of replicas (TODO 1).
# 2. Augment the images inside the pipeline (TODO 2).
# 3. Build the training pipeline: cache, shuffle, repeat, batch, prefetch (TODO 3).
# 4. Build and compile the model under the strategy, with `steps_per_execution` (TODO 4).
#
# Then you train, look at the predictions, measure whether training is input-bound (and
# what a faster accelerator would need), see why a TPU wants about 128 images per core,
# and save and reload the model.

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
VALIDATION_SHARDS = 3  # Shards held out for validation.
EPOCHS = 5
BATCH_PER_REPLICA = None  # None: the device's rule of thumb (strategy.BATCH_PER_REPLICA).
BASE_LEARNING_RATE = 0.002  # Learning rate for one replica.
MAX_LEARNING_RATE = 0.008  # The scaled learning rate's cap (tried at 8 replicas).
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
import collections
import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from utils import (
    checks,
    conversion,
    decode_less,
    display,
    models,
    records,
    sources,
    step_timing,
    strategy,
    timing,
)

# %% [markdown]
# ## The device
#
# `strategy.find_strategy()` follows the backend the set-up chose.
#
# - On TensorFlow it tries, in order: a TPU VM's TPU (`TPUClusterResolver(tpu="local")`),
#   a TPU by name (the older resolver, for `$TPU_NAME` or `$COLAB_TPU_ADDR`), all GPUs
#   (`MirroredStrategy`), and the CPU.
# - On JAX it takes the devices `jax.devices()` lists (JAX picks TPU, else GPU, else CPU)
#   and sets `keras.distribution.DataParallel` over them.
#
# It prints what it tried and what it took. A model built under `choice.scope()` runs on
# those devices, one copy (replica) per TPU core or GPU, each taking a share of every
# batch. (On JAX the scope does nothing: the distribution is already set.)

# %%
keras.utils.set_random_seed(SEED)
choice = strategy.find_strategy(DEVICE)

# %% [markdown]
# ## The shards, split by file
#
# Validation images must never be seen in training. Splitting by shard keeps that true
# even when the shards are read in any order: the last `VALIDATION_SHARDS` shards are for
# validation. (Lab 2 shuffled the images before sharding, so every shard mixes classes.)

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = conversion.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names = shard_set.class_names
shard_paths = shard_set.paths
train_paths, validation_paths = shard_paths[:-VALIDATION_SHARDS], shard_paths[-VALIDATION_SHARDS:]
num_train = sum(shard_set.record_counts[path] for path in train_paths)
num_validation = sum(shard_set.record_counts[path] for path in validation_paths)
print(
    f"Training: {len(train_paths)} shards, {num_train} images; "
    f"validation: {len(validation_paths)} shards, {num_validation} images"
)


# %% [markdown]
# ## 1. Batch size and learning rate (TODO 1)
#
# Each replica takes its own share of every batch. A TPU core takes about 128 images: its
# matrix unit is a 128 x 128 grid of multipliers, and a batch smaller than that leaves part
# of the grid idle (you measure why below, in "Why about 128 images per TPU core"). GPUs
# and CPUs take fewer (`strategy.BATCH_PER_REPLICA`). With more replicas, the global batch
# grows, each epoch has fewer steps, and the learning rate grows with it (the "linear
# scaling rule"). A much larger learning rate can make the first steps diverge, so it is
# capped at `MAX_LEARNING_RATE` (or warmed up; not here).

# %%
batch_per_replica = BATCH_PER_REPLICA or strategy.BATCH_PER_REPLICA[choice.kind]
print(f"{choice.num_replicas} replica(s), {batch_per_replica} images per replica")

# %% [markdown]
# **TODO 1.** Complete `scale_for_replicas(num_replicas)`: `global_batch_size` is
# `batch_per_replica` times `num_replicas`, and `learning_rate` is `BASE_LEARNING_RATE`
# times `num_replicas`, but never more than `MAX_LEARNING_RATE`. The check tries it with
# 1, 2 and 8 replicas, whatever the device here.


# %%
def scale_for_replicas(num_replicas):
    """Returns (global_batch_size, learning_rate) for `num_replicas` replicas."""
    # TODO 1: scale the batch size and the learning rate with the replicas.
    ### BEGIN SOLUTION
    global_batch_size = batch_per_replica * num_replicas
    learning_rate = min(BASE_LEARNING_RATE * num_replicas, MAX_LEARNING_RATE)
    ### END SOLUTION
    return global_batch_size, learning_rate


# %%
# NBVAL_CHECK_OUTPUT
checks.check_scaling(
    scale_for_replicas,
    todo=1,
    batch_per_replica=batch_per_replica,
    base_learning_rate=BASE_LEARNING_RATE,
    max_learning_rate=MAX_LEARNING_RATE,
)
global_batch_size, learning_rate = scale_for_replicas(choice.num_replicas)

# %% [markdown]
# On a small dataset, or with many replicas, the global batch can be larger than the
# training set: there would be no full batch to train on. `strategy.cap_batch_size()`
# then caps it to the data, keeping it a multiple of the replicas, and says so.

# %%
global_batch_size = strategy.cap_batch_size(
    global_batch_size, num_images=num_train, num_replicas=choice.num_replicas, purpose="training"
)
steps_per_epoch = num_train // global_batch_size
print(f"Training: {steps_per_epoch} steps of {global_batch_size} images per epoch")

# %% [markdown]
# Mixed precision: TPUs compute fast in bfloat16, GPUs in float16; the weights stay in
# float32. Both are 16 bits, split differently: float16 keeps more digits but a narrow
# range; bfloat16 keeps float32's 8 exponent bits, so its range, with fewer digits. The
# cell below prints each one's largest and smallest values, and what becomes of a
# gradient of 1e-8 (small gradients are common late in training).

# %%
print("\n".join(step_timing.describe_float_formats()))

# %% [markdown]
# A float16 gradient that becomes 0 stops learning, so float16 training needs *loss
# scaling*: multiply the loss before the gradients are computed, divide the gradients
# after (Keras does it for `mixed_float16`, with a `LossScaleOptimizer`). bfloat16 keeps
# such a gradient (the end of each line above), so TPUs train in it with no loss scaling, and
# the fewer digits matter little for training. On the CPU mixed precision brings nothing,
# so the policy stays float32.

# %%
policy = strategy.PRECISION_POLICY[choice.kind]
keras.mixed_precision.set_global_policy(policy)
print(
    f"Precision policy: {policy}; global batch {global_batch_size}; learning rate {learning_rate:g}"
)


# %%
def read_example(serialized):
    """Parses one record; returns (uint8 image at IMAGE_SIZE, float32 one-hot label)."""
    record = records.parse_record(serialized)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
    image = tf.image.resize(image, [IMAGE_SIZE, IMAGE_SIZE], antialias=True)
    label = tf.reshape(record["one_hot_class"], [len(class_names)])
    return tf.saturate_cast(tf.round(image), tf.uint8), label


def read_images(paths, deterministic=False):
    """Reads the shards in parallel, into (image, one-hot label) pairs.

    In any order by default (the fastest); with `deterministic=True`, in a fixed order:
    one record from each shard in turn.
    """
    options = tf.data.Options()
    options.deterministic = deterministic
    records = tf.data.TFRecordDataset(paths, num_parallel_reads=len(paths))
    return records.with_options(options).map(read_example, num_parallel_calls=tf.data.AUTOTUNE)


# %% [markdown]
# ## 2. Augment (TODO 2)
#
# Flowers photographed from above look like flowers when mirrored, left to right or top
# to bottom. Flipping at random shows the model more variety at no cost in data.
#
# **TODO 2.** Complete `augment(images, labels)`: flip the batch of images at random with
# `tf.image.random_flip_left_right` and `tf.image.random_flip_up_down` (each flips every
# image of the batch on its own), and return `(images, labels)`.


# %%
def augment(images, labels):
    """Flips each image of a batch at random, left-right and up-down."""
    # TODO 2: flip at random, both ways.
    ### BEGIN SOLUTION
    images = tf.image.random_flip_left_right(images)
    images = tf.image.random_flip_up_down(images)
    ### END SOLUTION
    return images, labels


# %%
# NBVAL_CHECK_OUTPUT
checks.check_augment(augment, todo=2, image_size=IMAGE_SIZE)


# %% [markdown]
# ## 3. The training pipeline (TODO 3)
#
# - `cache()` keeps the decoded images in memory after the first epoch (here
#   `num_train * IMAGE_SIZE**2 * 3` bytes); it comes *before* the shuffle, or every epoch
#   would replay the first epoch's order.
# - `shuffle(buffer)` draws each image from a buffer of the next `buffer` images.
# - `repeat()` makes the dataset endless; `fit()` is told how many steps make an epoch.
# - `batch(..., drop_remainder=True)` gives every batch the same, static size, which TPUs
#   need (and which splits evenly over the replicas).
# - `map(augment)` alters each batch a little (TODO 2); `prefetch` prepares the next ones.
#
# **TODO 3.** Complete `make_training_dataset(paths)`: start from `read_images(paths)`,
# then `cache()`, `shuffle(2048, seed=SEED)`, `repeat()`, `batch(global_batch_size,
# drop_remainder=True)`, `map(augment, num_parallel_calls=tf.data.AUTOTUNE)` and
# `prefetch(tf.data.AUTOTUNE)`. The check builds your pipeline on a copy of the shards
# and reads it for a few epochs, deleting the copy after the first: later epochs must come
# from the cache, each in a new order, with new flips.


# %%
def make_training_dataset(paths):
    """The endless, shuffled, augmented, batched training dataset."""
    # TODO 3: cache, shuffle, repeat, batch (static size), augment, prefetch.
    ### BEGIN SOLUTION
    dataset = read_images(paths).cache()
    dataset = dataset.shuffle(2048, seed=SEED).repeat()
    dataset = dataset.batch(global_batch_size, drop_remainder=True)
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    ### END SOLUTION
    return dataset


# %%
# NBVAL_CHECK_OUTPUT
checks.check_training_dataset(
    make_training_dataset,
    train_paths,
    todo=3,
    batch_size=global_batch_size,
    image_size=IMAGE_SIZE,
    num_classes=len(class_names),
    num_images=num_train,
)
train_dataset = make_training_dataset(train_paths)

# %% [markdown]
# Validation reads the held-out shards in a fixed order (`deterministic=True`: one record
# from each shard in turn), without shuffling or augmenting, so that every evaluation
# sees the same batches. Its
# batches are also of one static size, split evenly over the replicas. The last,
# incomplete batch is left out, so `strategy.even_batch_size()` picks the size, at most
# the global batch, that leaves the fewest images out (at 8 replicas the global batch can
# be larger than the whole validation set).

# %%
validation_batch_size = strategy.even_batch_size(
    num_validation, max_batch_size=global_batch_size, num_replicas=choice.num_replicas
)
validation_batches = num_validation // validation_batch_size
validation_dataset = (
    read_images(validation_paths, deterministic=True)
    .batch(validation_batch_size, drop_remainder=True)
    .prefetch(tf.data.AUTOTUNE)
)
left_out = num_validation - validation_batches * validation_batch_size
print(
    f"Validation: {validation_batches} batch(es) of {validation_batch_size} images "
    f"({left_out} left out)"
)

# %% [markdown]
# ## 4. The model, under the strategy (TODO 4)
#
# On TensorFlow, the model's variables must be created under the strategy's scope, so that
# each replica gets its copy; `choice.scope()` is that scope (on JAX, where the
# distribution is already set, it does nothing, so the code reads the same).
# `models.small_convnet()` builds a small convnet with `keras.Input` and a float32 softmax
# at the end (mixed precision computes in 16 bits, but the loss wants 32).
#
# `steps_per_execution=N` in `compile()` runs N training steps per call from Python into
# the compiled step function: on a TPU, each call has a fixed cost, and this spreads it.
# (On JAX, Keras 3.15 still calls one compiled step at a time, N times in a loop.)
# `strategy.supported_steps_per_execution()` says where Keras cannot do it.

# %%
steps_per_execution = strategy.supported_steps_per_execution(choice, STEPS_PER_EXECUTION)
print(f"steps_per_execution: {steps_per_execution}")

# %% [markdown]
#
# **TODO 4.** Complete `build_model(choice)`: under `choice.scope()`, make `model` with
# `models.small_convnet(IMAGE_SIZE, len(class_names))` and compile it with
# `optimizer=keras.optimizers.Adam(learning_rate)`, `loss="categorical_crossentropy"`,
# `metrics=["accuracy"]` and `steps_per_execution=steps_per_execution`. The check also
# calls it with another strategy, to see the variables land in that strategy's scope.


# %%
def build_model(choice):
    """The compiled model, its variables made under `choice.scope()`."""
    # TODO 4: build and compile the model under the strategy.
    ### BEGIN SOLUTION
    with choice.scope():
        model = models.small_convnet(IMAGE_SIZE, len(class_names))
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss="categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
        )
    ### END SOLUTION
    return model


# %%
# NBVAL_CHECK_OUTPUT
checks.check_compiled_model(
    build_model,
    todo=4,
    choice=choice,
    learning_rate=learning_rate,
    steps_per_execution=steps_per_execution,
    image_size=IMAGE_SIZE,
    num_classes=len(class_names),
)
model = build_model(choice)

# %% [markdown]
# ## Train

# %%
# On JAX, Keras warns "Your input ran out of data" when the finite validation set ends
# inside a call of `steps_per_execution` steps: expected here, the set is read whole.
warnings.filterwarnings("ignore", message="Your input ran out of data")
history = model.fit(
    train_dataset,
    validation_data=validation_dataset,
    epochs=EPOCHS,
    steps_per_epoch=steps_per_epoch,
    shuffle=False,  # The dataset shuffles itself; fit() cannot shuffle a tf.data.Dataset.
    verbose=2,
)

# %%
figure = display.plot_history(history, title=f"Training on {choice.kind}")

# %% [markdown]
# How good is that? A model that always answers the most common class gets the share of
# that class right: that is chance level here, computed from the validation labels.

# %%
validation_labels = np.concatenate(
    [np.argmax(labels, axis=1) for _, labels in validation_dataset.as_numpy_iterator()]
)
chance = max(collections.Counter(validation_labels).values()) / len(validation_labels)
_, accuracy = model.evaluate(validation_dataset, verbose=0)
print(
    f"Validation accuracy {accuracy:.2f}; chance level {chance:.2f} "
    f"({len(validation_labels)} images, {len(class_names)} classes)"
)

# %% [markdown]
# Sixteen validation images, titled with the model's answer; wrong answers in red.

# %%
images, labels = next(validation_dataset.unbatch().batch(16).as_numpy_iterator())
figure = display.show_predictions(
    images, np.argmax(labels, axis=1), model.predict(images, verbose=0), class_names=class_names
)

# %% [markdown]
# ## Is training waiting for its input?
#
# Training waits for its input when the pipeline delivers fewer images per second than
# the training step consumes. Measure both sides, on a *copy* of the trained model (its
# weights change as it trains; the model above stays as trained, to be saved below):
#
# - what the device consumes: training steps fed one batch held in memory, an input that
#   costs nothing;
# - what the pipeline delivers on its own, with no model: `uncached`, the training
#   pipeline without `cache()`, so that every image is read from the shards and decoded
#   (what the first epoch costs, and every epoch of a dataset too large to cache); and
#   `train_dataset` from its cache, filled during training above;
# - and training steps fed by `uncached`: if their time is close to the in-memory one,
#   reading keeps up here.
#
# A faster accelerator consumes more. `STAND_IN_IMAGES_PER_SECOND` stands in for one: a
# setting, not a measurement. Where the pipeline delivers less than an accelerator
# consumes, that accelerator would wait: training there is input-bound.


# %%
def compiled_copy(steps_per_execution):
    """A copy of the trained model, compiled as TODO 4 compiled it but for `steps_per_execution`."""
    return step_timing.compiled_copy(
        model, steps_per_execution=steps_per_execution, scope=choice.scope()
    )


one_batch = next(iter(train_dataset))
in_memory = tf.data.Dataset.from_tensors(one_batch).repeat()
uncached = (
    read_images(train_paths)
    .repeat()
    .batch(global_batch_size, drop_remainder=True)
    .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    .prefetch(tf.data.AUTOTUNE)
)
timed_images = NUM_TIMED_STEPS * global_batch_size
from_shards = timing.measure_throughput(
    uncached, num_images=timed_images, label="pipeline, reading and decoding"
)
from_cache = timing.measure_throughput(
    train_dataset, num_images=timed_images, label="pipeline, from its cache"
)
input_bound = step_timing.measure_input_bound(
    compiled_copy(steps_per_execution), uncached, in_memory, num_steps=NUM_TIMED_STEPS
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
    lambda: compiled_copy(1),
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
            compiled_copy(n), in_memory, num_steps=NUM_TIMED_STEPS
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
serialized_records = tf.data.TFRecordDataset(train_paths).take(NUM_DECODE_IMAGES)
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
# **When does it matter?** This lab's training pipeline caches the decoded images
# (`cache()` in TODO 3) and augments after the cache: each image is decoded once, in the
# first epoch. A crop chosen while decoding would be cached too, and come back the same
# in every epoch; with a cache, a random crop belongs after it, on decoded images.
# Decoding less matters when the decoded images do not fit in memory, as with ImageNet
# on a TPU: every epoch decodes every image again, and the input pipeline must keep up
# with the accelerator. That is why the reference models crop while decoding.
#
# One more place to decode less: `read_example()` above decodes `TARGET_SIZE` images
# only to resize them to `IMAGE_SIZE`. Where that is half the size,
# `decode_jpeg(..., ratio=2)` gives it directly, with no resize.

# %% [markdown]
# ## Save and reload
#
# `model.save()` writes a `.keras` file: the architecture, the weights and the optimizer
# state, in one zip. Reloaded, the model gives the same predictions.
#
# Where does it write? Today's TPUs (Colab, Kaggle, Cloud TPU VMs) are **TPU VMs**: the
# notebook runs on the machine the TPU is attached to, so `model.save()` writes to that
# machine's disk, as on a CPU. On JAX, Keras gathers each weight from the devices; on
# TensorFlow, the strategy reads its replicas. The same line works on both backends.
#
# Colab's TPU used to be a **TPU Node**: a separate machine reached over the network,
# whose workers could not see the notebook's disk. A TensorFlow SavedModel export then
# had to pass `tf.saved_model.SaveOptions(experimental_io_device="/job:localhost")`, and
# data and models had to live in `gs://`. On a TPU VM there is no such split.

# %%
with tempfile.TemporaryDirectory() as scratch:  # Deleted at the end of the block.
    saved_path = Path(scratch) / "flowers.keras"
    model.save(saved_path)
    saved_megabytes = saved_path.stat().st_size / 1e6
    reloaded = keras.models.load_model(saved_path)
before = model.predict(images, verbose=0)
after = reloaded.predict(images, verbose=0)
print(f"Saved {saved_path.name}: {saved_megabytes:.1f} MB")
print(
    f"Reloaded predictions match: {np.allclose(before, after, atol=1e-5)} "
    f"(largest difference {np.abs(before - after).max():.1e})"
)

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); global batch "
    f"{global_batch_size}, learning rate {learning_rate:g}, precision {policy}."
)
print(f"Validation accuracy after {EPOCHS} epochs: {accuracy:.2f} (chance {chance:.2f}).")
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
images_per_second = global_batch_size / input_bound.step_fed
print(f"Training speed fed without cache: {images_per_second:,.0f} images/s on {choice.kind}.")
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

# %% [markdown]
# *What changed from the original course:* it found the TPU with a resolver that no
# longer works on TPU VMs and failed with a `NameError` when there was none; it used
# `input_shape=` on layers, a learning-rate schedule returning a tensor and the history
# key `lr`, all of which Keras 3 changed; and it never measured whether the input kept up.
