# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
# ---

# %% [markdown]
# # Lab 4 · Train a Keras model on TPU, GPU or CPU from the TFRecord pipeline
#
# **Goal:** train a Keras model from lab 3's shards, the same notebook on a TPU, GPUs or
# the CPU, with a pipeline that serves every epoch from memory in a new order.
#
# **You will:**
#
# 1. Scale the batch size and the learning rate with the number of replicas (TODO 1).
# 2. Augment the images inside the pipeline (TODO 2).
# 3. Build the training pipeline (TODO 3).
# 4. Build and compile the model under the strategy (TODO 4).

# %% tags=["parameters"]
# The set-up reads BACKEND ("auto", "tensorflow" or "jax"), so the parameters come first.
BACKEND = "auto"  # "auto": JAX on Colab's TPU runtime (it has no TensorFlow), else TensorFlow.
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
DEVICE = "auto"  # "auto", or force "tpu", "gpu" or "cpu".
IMAGE_SIZE = 96  # The model's input size: decoded at that size from TARGET_SIZE.
VALIDATION_SHARDS = 3  # Shards held out for validation.
BATCH_PER_REPLICA = 16  # Images per replica per step: a multiple of 8 (see TODO 1).
TRAINING_IMAGES = 12_000  # How long to train: images seen in all, on any number of devices.
CRITICAL_BATCH_SIZE = 48  # Steps are counted as if the global batch were at most this.
EPOCHS = 6  # fit()'s epochs: how many times the training stops to evaluate.
BASE_LEARNING_RATE = 0.002  # Peak learning rate for one replica.
MAX_LEARNING_RATE = 0.008  # The scaled peak's cap (reached at 4 replicas).
WARMUP_FRACTION = 0.1  # Share of the steps over which the learning rate rises from 0.
STEPS_PER_EXECUTION = 16  # Training steps per call into the compiled function, at most.
NUM_PARALLEL_READS = 16  # Shards read at once (lab 3's NUM_PARALLEL_READS).
SEED = 42

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, installs TensorFlow where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
import tempfile
import warnings
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from utils import (
    batch_sizes,
    checks,
    display,
    float_formats,
    models,
    pipeline,
    strategy,
    training,
)
from utils.lab import shard_cache, sources

# %% [markdown]
# ## The device and the shards
#
# `strategy.find_strategy()` takes the best device here and prints which. On TensorFlow it
# is, in short (`utils/strategy.py` also tries a TPU by name and says why each failed):
#
# ```python
# try:  # A TPU VM's own TPU (Kaggle, Google Cloud).
#     resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
#     tf.config.experimental_connect_to_cluster(resolver)
#     tf.tpu.experimental.initialize_tpu_system(resolver)
#     tf_strategy = tf.distribute.TPUStrategy(resolver)
# except (ValueError, RuntimeError, tf.errors.OpError):  # No TPU: every GPU, else the CPU.
#     gpus = tf.config.list_logical_devices("GPU")
#     tf_strategy = tf.distribute.MirroredStrategy() if gpus else tf.distribute.get_strategy()
# ```
#
# On JAX (Colab's TPU runtime) it is one line:
# `keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))`.
# Either way each device runs one copy (replica) of the model on a share of every batch.
# Colab's TPU is a v5e-1 (one replica), Kaggle's a v5e-8 (eight).
#
# Shards split by file keep validation images out of training: the last `VALIDATION_SHARDS`
# are for validation (lab 2 shuffled the images: every shard mixes classes).

# %%
keras.utils.set_random_seed(SEED)
choice = strategy.find_strategy(DEVICE)
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
class_names, shard_paths = shard_set.class_names, shard_set.paths
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
# Each replica takes `BATCH_PER_REPLICA` images a step (on a TPU a multiple of 8: arrays
# are laid out in tiles of 8 x 128). With more replicas the global batch grows, and the
# learning rate with it (the "linear scaling rule"), up to `MAX_LEARNING_RATE`, above which
# training can diverge.
#
# **TODO 1.** Complete `scale_for_replicas(num_replicas)`: the global batch and the learning
# rate for `num_replicas` replicas, starting from `BASE_LEARNING_RATE` for one. The check
# tries 1, 2 and 8 replicas.

# %%
batch_per_replica = BATCH_PER_REPLICA


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
# How long to train? Counted in epochs, 8 replicas would take 8 times fewer steps than one:
# too few. So `training.plan_training()` turns `TRAINING_IMAGES` into steps of the global
# batch (docs/lessons.md says why it stops shrinking them at `CRITICAL_BATCH_SIZE`). The
# learning rate warms up from 0, then falls along half a cosine to 0.

# %%
global_batch_size = batch_sizes.cap_batch_size(
    global_batch_size, num_images=num_train, num_replicas=choice.num_replicas, purpose="training"
)
plan = training.plan_training(
    training_images=TRAINING_IMAGES,
    global_batch_size=global_batch_size,
    epochs=EPOCHS,
    steps_per_execution=strategy.supported_steps_per_execution(choice, STEPS_PER_EXECUTION),
    warmup_fraction=WARMUP_FRACTION,
    critical_batch_size=CRITICAL_BATCH_SIZE,
)
steps_per_epoch, steps_per_execution = plan.steps_per_epoch, plan.steps_per_execution
print(plan.describe())
print(f"That is {plan.images_seen / num_train:.1f} passes over the {num_train} training images.")
learning_rate_schedule = training.warmup_cosine(learning_rate, plan)
for step in sorted({0, plan.warmup_steps // 2, plan.warmup_steps, plan.total_steps - 1}):
    print(f"Step {step}: learning rate {float(learning_rate_schedule(step)):.2e}")

# %% [markdown]
# Mixed precision: TPUs compute in bfloat16, GPUs in float16, the weights stay float32.
# Each format's range, and what becomes of a gradient of 1e-8:

# %%
print("\n".join(float_formats.describe_float_formats()))
policy = strategy.PRECISION_POLICY[choice.kind]
keras.mixed_precision.set_global_policy(policy)
print(f"Precision policy: {policy}")

# %% [markdown]
# A float16 gradient that becomes 0 stops learning (Keras scales the loss for
# `mixed_float16`); bfloat16 keeps it, so TPUs need no loss scaling. The CPU: float32.
#
# ## Reading the shards: lab 3's pipeline
#
# The model reads what lab 3 built, but at `IMAGE_SIZE`, not the shards' `TARGET_SIZE`:
# `tf.io.decode_jpeg(..., ratio=2)` decodes at half the size directly, not every pixel
# then a resize.


# %%
def read_images(paths, deterministic=False):
    """Reads the shards as lab 3 does, at IMAGE_SIZE, into (image, one-hot label) pairs."""
    batches = pipeline.tfrecord_images(
        paths,
        target_size=TARGET_SIZE,
        image_size=IMAGE_SIZE,
        num_classes=len(class_names),
        batch_size=64,  # Records parsed and decoded per map call (lab 3's BATCH_SIZE).
        num_parallel_reads=NUM_PARALLEL_READS,
        deterministic=deterministic,
        prefetch=False,
    )
    return batches.unbatch()  # Single images: the training pipeline shuffles them.


print(f"Decoding with ratio={pipeline.decode_ratio(TARGET_SIZE, IMAGE_SIZE)} for {IMAGE_SIZE} px")

# %% [markdown]
# ## 2. Augment (TODO 2)
#
# Flowers photographed from above look like flowers when mirrored, left to right or top
# to bottom. Flipping at random shows the model more variety at no cost in data.
#
# **TODO 2.** Complete `augment(images, labels)`: each image of the batch flipped at random,
# on its own, left to right and top to bottom (`tf.image` has both).


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
# The steps: `cache()` (memory), `shuffle(buffer, seed=...)`, `repeat()`,
# `batch(..., drop_remainder=True)` (TPUs want one static size), `map()`, `prefetch()`.
# Their order matters.
#
# **TODO 3.** Complete `make_training_dataset(paths)`, from `read_images(paths)`: every
# epoch served from memory, in a new order and in new batches of `global_batch_size`
# images, flipped by `augment`, the next batches prepared ahead, without end. The check
# reads a few epochs of it, deleting its copy of the shards after the first.


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
# Validation reads the held-out shards in a fixed order (`deterministic=True`), unshuffled
# and unaugmented, in batches split evenly over the replicas.

# %%
validation_batch_size = batch_sizes.even_batch_size(
    num_validation, max_batch_size=global_batch_size, num_replicas=choice.num_replicas
)
validation_batches = num_validation // validation_batch_size
validation_dataset = read_images(validation_paths, deterministic=True)
validation_dataset = validation_dataset.batch(validation_batch_size, drop_remainder=True)
validation_dataset = validation_dataset.prefetch(tf.data.AUTOTUNE)
left_out = num_validation - validation_batches * validation_batch_size
batches = f"{validation_batches} batch(es) of {validation_batch_size} images"
print(f"Validation: {batches} ({left_out} left out)")

# %% [markdown]
# ## 4. The model, under the strategy (TODO 4)
#
# On TensorFlow the variables must be made under `choice.scope()`: one copy per replica.
#
# **TODO 4.** Complete `build_model(choice)`: `models.small_convnet(IMAGE_SIZE,
# len(class_names))`, made under the strategy and compiled to train with Adam on
# `learning_rate_schedule`, a categorical cross-entropy loss, an accuracy metric and the
# plan's `steps_per_execution`. The check also calls it with another strategy.


# %%
def build_model(choice):
    """The compiled model, its variables made under `choice.scope()`."""
    # TODO 4: build and compile the model under the strategy.
    ### BEGIN SOLUTION
    with choice.scope():
        model = models.small_convnet(IMAGE_SIZE, len(class_names))
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate_schedule),
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
    learning_rate=learning_rate_schedule,
    steps_per_execution=steps_per_execution,
    image_size=IMAGE_SIZE,
    num_classes=len(class_names),
)
model = build_model(choice)

# %% [markdown]
# ## Train
#
# Chance level is what always answering the most common class scores. On the embedded
# images each class is one generated flower shape: a high score says the pipeline and the
# training loop work end to end; it says nothing about real flowers (`DATA_SOURCE =
# "flower_photos"`, online).

# %%
# On JAX, Keras warns "Your input ran out of data" when the finite validation set ends
# inside a call of `steps_per_execution` steps: expected here, the set is read whole.
warnings.filterwarnings("ignore", message="Your input ran out of data")
answers = training.ValidationAnswers(validation_dataset)  # The share answered right, per epoch.
history = model.fit(
    train_dataset,
    validation_data=validation_dataset,
    epochs=plan.epochs,
    steps_per_epoch=steps_per_epoch,
    shuffle=False,  # The dataset shuffles itself; fit() cannot shuffle a tf.data.Dataset.
    callbacks=[training.LearningRateLog(), answers],  # "learning_rate", "val_answers_right"
    verbose=2,
)
figure = training.plot_history(history, title=f"Training on {choice.kind}")

# %%
# Counted from the model's own answers, image by image (`training.ValidationAnswers`): on
# 8 TensorFlow replicas, Keras's accuracy metric disagreed with the answers and the loss.
per_epoch = history.history[training.ANSWERS_KEY]
accuracy, best_epoch = per_epoch[-1], int(np.argmax(per_epoch)) + 1  # The last: the final model.
chance = np.bincount(answers.labels).max() / len(answers.labels)
print(
    f"Validation accuracy {accuracy:.2f}; best epoch {best_epoch} of {len(per_epoch)}: "
    f"{max(per_epoch):.2f}; chance level {chance:.2f} "
    f"({len(answers.labels)} images, {len(class_names)} classes)"
)
display.say_if_too_few_per_class(num_train, num_classes=len(class_names))
rates = ", ".join(f"{rate:.1e}" for rate in history.history["learning_rate"])
print(f"Learning rate at each epoch's end: {rates}")
# Sixteen validation images, titled with the model's answer; wrong answers in red.
images, labels = next(validation_dataset.unbatch().batch(16).as_numpy_iterator())
figure = display.show_predictions(
    images, np.argmax(labels, axis=1), model.predict(images, verbose=0), class_names=class_names
)

# %% [markdown]
# ## Save and reload
#
# `model.save()` writes a `.keras` zip: architecture, weights, optimizer state and
# schedule. Reloaded, it predicts the same.

# %%
with tempfile.TemporaryDirectory() as scratch:  # Deleted at the end of the block.
    saved_path = Path(scratch) / "flowers.keras"
    model.save(saved_path)
    saved_megabytes = saved_path.stat().st_size / 1e6
    reloaded = keras.models.load_model(saved_path)
before = model.predict(images, verbose=0)
after = reloaded.predict(images, verbose=0)
match = np.allclose(before, after, atol=1e-5)
print(f"Saved {saved_path.name}: {saved_megabytes:.1f} MB")
print(f"Reloaded predictions match: {match} (largest difference {abs(before - after).max():.1e})")

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Device: {choice.kind} on {choice.backend}, {choice.num_replicas} replica(s); global batch "
    f"{global_batch_size}, peak learning rate {learning_rate:g}, precision {policy}.\n"
    f"{plan.total_steps} steps, {plan.images_seen:,} images seen; warm-up "
    f"{plan.warmup_steps} steps, then cosine decay.\n"
    f"Validation accuracy: final {accuracy:.2f}, best {max(per_epoch):.2f} (epoch "
    f"{best_epoch} of {len(per_epoch)}); chance {chance:.2f}."
)

# %% [markdown]
# **Takeaway.** One notebook trains on a TPU, GPUs or the CPU: find the strategy, scale the
# batch and the learning rate with its replicas, and build the model under its scope. The
# pipeline caches, shuffles and batches so that every epoch is new and served from memory.
# Whether the accelerator still waits for input: lesson 5 (`05_accelerator_waiting`).
#
# *Changed from the original course:* today's TPU VMs need `tpu="local"`, and Keras 3
# changed several APIs it used (details: docs/lessons.md).
