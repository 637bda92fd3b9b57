# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
# ---

# %% [markdown]
# # Lab 4 · Train a Keras model on TPU, GPU or CPU from the TFRecord pipeline
#
# By the end you can train one Keras model on every device of a TPU, GPUs or the CPU, fed
# by a pipeline that serves every epoch from memory in a new order.
#
# **On Colab's TPU:** choose *Runtime > Change runtime type > v5e-1 TPU*. Keras runs on
# JAX there (the runtime ships no TensorFlow: docs/platforms.md); the set-up installs
# `tensorflow-cpu` for `tf.data` only. The committed solution ran on JAX, on one CPU
# device, as a v5e-1 is one.
#
# **You will:**
#
# 1. Put one copy of the model on every device (TODO 1).
# 2. Build the training pipeline on your lab 3 reader (TODO 2).

# %% tags=["parameters"]
BACKEND = "auto"  # "auto": JAX on Colab's TPU runtime, else TensorFlow.
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Images of the embedded dataset.
TARGET_SIZE = 192  # Lab 2's TARGET_SIZE.
NUM_SHARDS = 16  # Lab 2's NUM_SHARDS.
SHARDS_DIR = None  # None: where lab 2 wrote them.
NUM_PARALLEL_READS = 16  # Lab 3's NUM_PARALLEL_READS.
IMAGE_SIZE = 96  # The model's input size.
VALIDATION_SHARDS = 3  # Shards held out for validation.
BATCH_PER_REPLICA = None  # Per device and step; None: 128, or 16 on the CPU.
TRAINING_IMAGES = 4_500  # Images the model learns from.
EPOCHS = 6  # Evaluations on the validation shards.
STEPS_PER_EXECUTION = 16  # Steps per call into the compiled step.
SEED = 42

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` or installs it, installs TensorFlow
# where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import contextlib

import keras
import numpy as np
import tensorflow as tf

from utils import batch_sizes, checks, display, models, sampling, training
from utils.lab import shard_cache, sources
from utils.lessons.read_tfrecords import solved_reader

# %% [markdown]
# ## The shards, and lab 3's reader
#
# The last `VALIDATION_SHARDS` shards are held out for validation (every shard mixes
# classes). They are read with lab 3's reader (your TODOs 1 and 2, as its solution writes
# them: `solved_reader.lab3_reader`), each shard opened by `tf.data.TFRecordDataset`.

# %%
keras.utils.set_random_seed(SEED)
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names, shard_paths = shard_set.class_names, shard_set.paths
train_paths, validation_paths = shard_paths[:-VALIDATION_SHARDS], shard_paths[-VALIDATION_SHARDS:]
num_train = sum(shard_set.record_counts[path] for path in train_paths)
num_validation = sum(shard_set.record_counts[path] for path in validation_paths)
print(f"Training: {num_train}; validation: {VALIDATION_SHARDS} shards, {num_validation} images")
train_counts = sampling.count_shard_classes(train_paths, class_names)
display.say_if_too_few_per_class(train_counts, num_validation=num_validation)
read_tfrecord, read_shards = solved_reader.lab3_reader(  # Lab 3's TODOs 1 and 2.
    TARGET_SIZE, class_names, num_parallel_reads=NUM_PARALLEL_READS
)

# %% [markdown]
# ## 1. One replica per device (TODO 1)
#
# Data parallelism: each device holds a copy of the model (a replica) and takes an equal
# share of every batch; the gradients are summed over the replicas at each step, so the
# copies stay equal. On JAX, `keras.distribution.DataParallel(devices=...)` says so
# (keras.io/guides/distribution); `fit()` uses it once it is set with
# `keras.distribution.set_distribution()`.
#
# **TODO 1.** With `keras.distribution.list_devices()`, bind `devices` to the names of
# all the devices Keras trains on here and, on JAX, with `set_distribution()` and
# `DataParallel`, make `fit()` train with one replica on each.

# %%
# TODO 1: every device, one replica each.
### BEGIN SOLUTION
devices = keras.distribution.list_devices()
if keras.backend.backend() == "jax":
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
num_replicas = len(keras.distribution.list_devices())  # A replica on each device.
checks.check_distribution(devices, todo=1)

# %% [markdown]
# On TensorFlow a `tf.distribute` strategy does the same, and the model is built under its
# `scope()`: a TPU VM's TPU, else a replica on each of `devices`.


# %%
def tensorflow_strategy(devices):
    """TensorFlow's strategy: a TPU VM's TPU, else one replica on each of `devices`."""
    tf.get_logger().setLevel("ERROR")  # Trying a TPU logs INFO lines.
    try:  # Without a TPU, this raises.
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError):
        several = len(devices) > 1
        return tf.distribute.MirroredStrategy(devices) if several else tf.distribute.get_strategy()


print(f"TensorFlow sees {[device.name for device in tf.config.list_logical_devices()]}")
scope = contextlib.nullcontext()  # JAX: the distribution places the weights.
if keras.backend.backend() == "tensorflow":
    tf_strategy = tensorflow_strategy(devices)
    num_replicas, scope = tf_strategy.num_replicas_in_sync, tf_strategy.scope()
else:
    print(f"Distribution: {keras.distribution.distribution()!r}")
print(f"Keras on {keras.backend.backend()}: {num_replicas} replica(s) in sync on {devices}")

# %% [markdown]
# ## The batch, the learning rate and the plan
#
# Each device takes 128 images a step on a TPU or GPU (the original course's batch), 16
# on a CPU, so that this run ends in minutes. The global batch is the per-device batch
# times the replicas (printed below). Steps count as if a batch held at
# most 48 images (the critical batch size, docs/lessons.md), so larger batches process
# more images for the same training. The learning rate grows with the global batch, up
# to 0.008, warms up from 0, then falls along half a cosine.

# %%
kind = keras.distribution.list_devices()[0].split(":")[0]  # "tpu", "gpu" or "cpu".
batch_per_replica = BATCH_PER_REPLICA or (16 if kind == "cpu" else 128)
global_batch_size = batch_sizes.cap_batch_size(  # At most the training images.
    batch_per_replica * num_replicas,
    num_images=num_train,
    num_replicas=num_replicas,
    purpose="training",
)
learning_rate = min(0.002 * global_batch_size / 16, 0.008)
plan = training.plan_training(
    training_images=TRAINING_IMAGES,
    global_batch_size=global_batch_size,
    epochs=EPOCHS,
    # Above 1, Keras fails under MirroredStrategy (keras-team/keras#19246).
    steps_per_execution=STEPS_PER_EXECUTION if num_replicas == 1 else 1,
    critical_batch_size=48,
)
print(plan.describe())


# %% [markdown]
# ## 2. The training pipeline (TODO 2)
#
# `augment` takes whole batches: resized to `IMAGE_SIZE`, each image flipped at random, so
# that each epoch differs.


# %%
def resize(images, labels):
    """A batch at the model's input size, IMAGE_SIZE (the shards hold TARGET_SIZE)."""
    return tf.cast(tf.image.resize(images, [IMAGE_SIZE] * 2, method="area"), tf.uint8), labels


def augment(images, labels):
    """A batch resized, each image flipped at random, left-right and up-down."""
    images, labels = resize(images, labels)
    images = tf.image.random_flip_left_right(images)
    return tf.image.random_flip_up_down(images), labels


# %% [markdown]
# `cache()` keeps every element that passes through it in memory: the first epoch reads
# and decodes the shards, each later one is served from the cache. Put it after the
# decoding and before anything that must change each epoch: a shuffle, a random flip.
#
# **TODO 2.** Complete `make_training_dataset(paths)`: the images of the shards in
# `paths` (`tf.data.Dataset.from_tensor_slices`), read with lab 3's reader and decoded in
# parallel (`map(read_tfrecord, num_parallel_calls=...)`), every epoch from memory
# (`cache()`), in a new order (`shuffle()`) and in new batches of exactly
# `global_batch_size` images (`batch(..., drop_remainder=True)`), each batch augmented
# (`map()`), the next batches prepared while the model trains (`prefetch()`), without end
# (`repeat()`). The check reads a few epochs, deleting its copy of the shards after the
# first.


# %%
def make_training_dataset(paths):
    """The endless, shuffled, augmented, batched training dataset of the shards `paths`."""
    # TODO 2: the training pipeline.
    ### BEGIN SOLUTION
    records = read_shards(tf.data.Dataset.from_tensor_slices(paths))
    dataset = records.map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.shuffle(2048, seed=SEED).repeat()
    dataset = dataset.batch(global_batch_size, drop_remainder=True)
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    ### END SOLUTION
    return dataset


# %%
# NBVAL_CHECK_OUTPUT
checks.check_training_dataset(
    make_training_dataset, train_paths, todo=2, batch_size=global_batch_size, image_size=IMAGE_SIZE
)
train_dataset = make_training_dataset(train_paths)

# %% [markdown]
# ## Train
#
# The model is built under the strategy's scope (TensorFlow) and computes in bfloat16 on a
# TPU, float16 on a GPU (float32 here). On an accelerator the first epoch also waits for
# XLA to compile the training step (16 s of lab 4's first epoch on a GPU:
# docs/platforms.md). Chance level is what always answering the most common
# class scores. On the embedded images each class is one generated flower shape: a high
# score says the pipeline and the training loop work end to end; it says nothing about
# real flowers.

# %%
validation_batch_size = batch_sizes.even_batch_size(
    num_validation, max_batch_size=global_batch_size, num_replicas=num_replicas
)
validation = read_shards(tf.data.Dataset.from_tensor_slices(validation_paths)).map(read_tfrecord)
validation_dataset = validation.batch(validation_batch_size, drop_remainder=True).map(resize)
policy = {"tpu": "mixed_bfloat16", "gpu": "mixed_float16"}.get(kind, "float32")
keras.mixed_precision.set_global_policy(policy)
with scope:
    model = models.small_convnet(IMAGE_SIZE, len(class_names))
    model.compile(
        optimizer=keras.optimizers.Adam(training.warmup_cosine(learning_rate, plan)),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=plan.steps_per_execution,
    )
answers = training.ValidationAnswers(validation_dataset)  # The share right, per epoch.
history = model.fit(
    train_dataset,
    epochs=plan.epochs,
    steps_per_epoch=plan.steps_per_epoch,
    callbacks=[answers],
    shuffle=False,  # The dataset shuffles itself.
    verbose=2,
)
figure = training.plot_history(history, title=f"Training on {num_replicas} {kind} replica(s)")

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
per_epoch = history.history[training.ANSWERS_KEY]
chance = np.bincount(answers.labels).max() / len(answers.labels)
best = int(np.argmax(per_epoch)) + 1
print(
    f"{num_replicas} {kind} replica(s), global batch {global_batch_size}, peak learning rate "
    f"{learning_rate:g}, precision {policy}.\nValidation accuracy {per_epoch[-1]:.2f}; best "
    f"epoch {best} of {len(per_epoch)}: {max(per_epoch):.2f}; chance level {chance:.2f}"
)

# %% [markdown]
# **Takeaway.** The same cells train on every device Keras finds: one replica per device
# (the lines above show how many), a global batch of the per-device batch times them, the
# weights placed by the distribution (JAX) or the strategy's scope (TensorFlow). The
# pipeline caches, shuffles, batches and prefetches, so that every epoch is new and served
# from memory. Does the accelerator still wait for its input? Lesson 5
# (`05_accelerator_waiting`). Background: docs/lessons.md.
