# %% [markdown]
# # Lab 4 · Train a Keras model on TPU, GPU or CPU from the TFRecord pipeline
#
# The pipeline of lab 3 now feeds a model. The same notebook runs on a TPU, on GPUs or on
# the CPU: one helper finds the best device here and says which it took.
#
# **You will:**
#
# 1. Scale the batch size and the learning rate with the number of replicas (TODO 1).
# 2. Augment the images inside the pipeline (TODO 2).
# 3. Build the training pipeline: cache, shuffle, repeat, batch, prefetch (TODO 3).
# 4. Build and compile the model under the strategy, with `steps_per_execution` (TODO 4).
#
# Then you train, look at the predictions, and save and reload the model. Whether the
# training waits for its input is lesson 5's question.

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
    display,
    models,
    records,
    sources,
    step_timing,
    strategy,
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
# of the grid idle (lesson 5 says what fills it, and what does not). GPUs
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
# Is this training waiting for its input, and what else sets a step's time? Lesson 5,
# "Is the accelerator waiting?" (`05_accelerator_waiting`), measures it.

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

# %% [markdown]
# *What changed from the original course:* it found the TPU with a resolver that no
# longer works on TPU VMs and failed with a `NameError` when there was none; it used
# `input_shape=` on layers, a learning-rate schedule returning a tensor and the history
# key `lr`, all of which Keras 3 changed.
