# %% [markdown]
# # Lesson 9 (optional, after lab 4) · Grain + ArrayRecord for JAX
#
# On a TPU runtime JAX comes first, and Google's JAX material feeds it with Grain, a data
# loader in Python, reading ArrayRecord files. Here lab 2's records go into ArrayRecord
# unchanged; Grain reads them, lab 4's model trains on JAX from them, and the loader is
# measured beside lab 3's `tf.data` pipeline, on the same simulated storage and cores.
#
# **You will:**
#
# 1. Shuffle all the records at once, in a new order each epoch (TODO 1).
# 2. Parse and batch them in worker processes (TODO 2).
# 3. Save the iterator's state mid-epoch and resume from it (TODO 3).
#
# Then you train for a few steps on JAX from Grain, and time Grain against `tf.data`.

# %% [markdown]
# ## Parameters
#
# The set-up reads `BACKEND`, so the parameters come first.

# %% tags=["parameters"]
BACKEND = "jax"  # Keras's backend: "jax" (this lesson's), "auto" or "tensorflow".
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
ARRAY_RECORD_DIR = None  # None: a local folder beside the shards (made from gs:// shards too).
NUM_EPOCHS = 2  # Epochs of the shuffled records (TODO 1).
NUM_WORKERS = 2  # Grain's worker processes (TODO 2); the machine's cores is a good start.
BATCH_SIZE = 64
IMAGE_SIZE = 96  # The model's input size (lab 4's IMAGE_SIZE).
TRAINING_STEPS = 40  # Training steps on JAX from Grain, in 2 epochs.
LATENCY_MS = 50  # Simulated first-byte latency per object: the median (as in lab 3).
LATENCY_P99_MS = 500  # Its 99th percentile (as in lab 3); None: always LATENCY_MS.
STREAM_MEGABYTES_PER_SECOND = 85  # Bandwidth of one object stream; None: no cap.
NUM_PARALLEL_READS = 16  # Shards read at once by lab 3's pipeline.
NUM_TIMED_IMAGES = 4000  # Images timed in each run.
NUM_WARMUP_IMAGES = 1024  # Images read untimed before each run (what was read ahead).
SPEED_TEST_REPEATS = 5  # Rounds of the speed test, taken in turns (a median and a range).
SEED = 42

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import json
import os

import grain
import keras
import tensorflow as tf

from utils import charts, checks, comparison, machine_load, models, pipeline, storage, training
from utils.lab import shard_cache, sources
from utils.lessons.grain_arrayrecord import grain_arrayrecord

grain_arrayrecord.use_flag_defaults()  # Grain's workers read absl flags; take the defaults.

# %% [markdown]
# ## The records, in ArrayRecord
#
# An ArrayRecord file stores records with an index: any record can be read by its
# number, without reading those before it. `write_array_records()` copies each TFRecord
# shard to one ArrayRecord file, the same serialized `tf.train.Example`s in the same
# order, one record per chunk and not compressed again (the JPEGs already are).

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
shard_paths, class_names = shard_set.paths, shard_set.class_names
local_dir = shard_set.output_dir.replace("gs://", os.path.expanduser("~/.cache/"))
array_record_dir = ARRAY_RECORD_DIR or f"{local_dir}-arrayrecord"
array_record_paths = grain_arrayrecord.write_array_records(shard_paths, array_record_dir)
records_per_file = [grain_arrayrecord.count_records(path) for path in array_record_paths]
print(f"{len(array_record_paths)} ArrayRecord files, {sum(records_per_file)} records")

# %% [markdown]
# `grain.sources.ArrayRecordDataSource` reads them as one list of records: `len()` and
# `data_source[i]`. Random access is what `tf.data` cannot do: there, record `i` is
# found by reading the `i` before it.

# %%
# NBVAL_CHECK_OUTPUT
data_source = grain.sources.ArrayRecordDataSource(array_record_paths)
last_tfrecord = list(tf.data.TFRecordDataset(shard_paths[-1]).as_numpy_iterator())[-1]
last_record = data_source[len(data_source) - 1]  # Read by its index, alone.
print(f"{len(data_source)} records; the last is the last TFRecord: {last_record == last_tfrecord}")

# %%
image, one_hot = grain_arrayrecord.parse_record(data_source[0], num_classes=len(class_names))
print(f"Record 0: a {image.dtype} image of {image.shape}, class {class_names[one_hot.argmax()]}")

# %% [markdown]
# ## 1. A global shuffle, a new order each epoch (TODO 1)
#
# A `grain.MapDataset` reads by index, so shuffling it shuffles the indices: all the
# records at once, with no buffer to fill (lab 4's `shuffle(buffer)` mixes only the
# records within its buffer). `MapDataset.source(data_source)` makes one;
# `.shuffle(seed=...)` gives a fixed order for a seed, the same on every run;
# `.repeat(n)` goes through it `n` times. Grain's `repeat()` reseeds the shuffle
# above it at each epoch (the seed plus the epoch's number): shuffle before repeat, and
# each epoch has its own order, still the same on every run. `repeat(n,
# reseed_each_epoch=False)` would give every epoch the first one's order.
#
# **TODO 1.** Make `shuffled`: `grain.MapDataset.source(data_source)`, shuffled with
# `seed=SEED`, then repeated `NUM_EPOCHS` times.

# %%
# TODO 1: all the records, shuffled at once, a new order each epoch.
### BEGIN SOLUTION
shuffled = grain.MapDataset.source(data_source).shuffle(seed=SEED).repeat(NUM_EPOCHS)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_shuffled(
    shuffled,
    todo=1,
    data_source=data_source,
    records_per_file=records_per_file,
    num_epochs=NUM_EPOCHS,
)

# %% [markdown]
# Which file the first records of each epoch come from (file numbers): all files from
# the start, in a new order each epoch.

# %%
file_starts = [sum(records_per_file[:i]) for i in range(1, len(records_per_file))]
index_of = {data_source[i]: i for i in range(len(data_source))}
for epoch in range(NUM_EPOCHS):
    first = [index_of[shuffled[epoch * len(data_source) + i]] for i in range(12)]
    print(f"Epoch {epoch + 1}: files", [sum(i >= s for s in file_starts) for i in first])

# %% [markdown]
# ## 2. Parse and batch in worker processes (TODO 2)
#
# Grain runs your Python functions: here `parse()`, which parses a record with protobuf
# and decodes its JPEG with Pillow. In one process, Python's GIL lets about one core do
# that work at a time. `.mp_prefetch(grain.MultiprocessingOptions(num_workers=N))` runs
# the pipeline above it in `N` worker processes: each takes every `N`-th record and makes
# its own batches, and the workers' batches come back in turn, in the same order at
# every run.
#
# Grain sends the pipeline to each worker with `cloudpickle`: a function defined in the
# notebook travels by value, with the globals it uses, and each module it names is
# imported again in each worker (keep TensorFlow out of `parse`: it would load in each).


# %%
def parse(record):
    """One record to (uint8 image, float32 one-hot label), without TensorFlow."""
    return grain_arrayrecord.parse_record(record, num_classes=len(class_names))


# In each process, 16 threads read and parse records, up to two batches ahead (Grain's
# default reads 500 elements ahead: put before `batch`, 500 batches).
read_options = grain.ReadOptions(num_threads=16, prefetch_buffer_size=2 * BATCH_SIZE)


# %% [markdown]
# **TODO 2.** Make `loader`: `shuffled` mapped with `parse`, turned into an iterable
# with `.to_iter_dataset(read_options)`, batched by `BATCH_SIZE` (`drop_remainder=True`:
# every batch the same shape, as XLA wants), then `.mp_prefetch(...)` with
# `NUM_WORKERS` workers.

# %%
# TODO 2: parse, batch, and run it in worker processes.
### BEGIN SOLUTION
loader = shuffled.map(parse).to_iter_dataset(read_options)
loader = loader.batch(BATCH_SIZE, drop_remainder=True).mp_prefetch(
    grain.MultiprocessingOptions(num_workers=NUM_WORKERS)
)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_loader(
    loader,
    todo=2,
    shuffled=shuffled,
    batch_size=BATCH_SIZE,
    num_classes=len(class_names),
    num_workers=NUM_WORKERS,
)

# %% [markdown]
# ## 3. Save the iterator's state, resume from it (TODO 3)
#
# A long training run is stopped and resumed: from a checkpoint of the model and of the
# input. A Grain iterator's `get_state()` returns a small dict (the position in each
# worker's share), which goes into a checkpoint as JSON; `set_state(state)` on a fresh
# iterator puts it back there. `tf.data` can save an iterator too
# (`tf.train.Checkpoint(iterator=...)`), but it stores its buffers' contents (a shuffle
# buffer's records, prefetched batches), and with `deterministic = False` the order
# after a restore need not be the one the run would have had.
#
# **TODO 3.** After two batches of `iterator`, save its state in `state`, then take
# `next_batch = next(iterator)`. Make `resumed`, a fresh iterator of `loader`, restore
# `state` into it, and take its first batch: `resumed_batch`.

# %%
iterator = iter(loader)
first_batch = next(iterator)
second_batch = next(iterator)

# %%
# TODO 3: save the state, take the next batch, restore the state into a fresh iterator.
### BEGIN SOLUTION
state = iterator.get_state()
next_batch = next(iterator)
resumed = iter(loader)
resumed.set_state(state)
resumed_batch = next(resumed)
### END SOLUTION
# The batch after it, which the check compares too (none while TODO 3 is not done).
further_batch = None if resumed is ... else next(resumed)

# %%
# NBVAL_CHECK_OUTPUT
checks.check_resumed(
    resumed_batch,
    todo=3,
    state=state,
    next_batch=next_batch,
    first_batch=first_batch,
    loader=loader,
    further_batch=further_batch,
)

# %%
print("The state, as a checkpoint would store it:", json.dumps(state)[:300])
iterator.close()
resumed.close()

# %% [markdown]
# ## Train lab 4's model on JAX, from Grain
#
# Keras on JAX takes Grain's numpy batches as they come, from a Python generator. The
# model is lab 4's convnet; the images are decoded at `IMAGE_SIZE` by Pillow in the
# workers. A few steps only: lab 4 teaches the training, this shows the feeding.


# %%
def parse_small(record):
    """One record, its image resized to IMAGE_SIZE, for the model."""
    return grain_arrayrecord.parse_record(
        record, num_classes=len(class_names), image_size=IMAGE_SIZE
    )


training_loader = (
    grain.MapDataset.source(data_source)
    .shuffle(seed=SEED)
    .repeat()
    .map(parse_small)
    .to_iter_dataset(read_options)
    .batch(BATCH_SIZE, drop_remainder=True)
    .mp_prefetch(grain.MultiprocessingOptions(num_workers=NUM_WORKERS))
)
training_batches = iter(training_loader)
model = models.small_convnet(IMAGE_SIZE, len(class_names))
model.compile(
    optimizer=keras.optimizers.Adam(0.002), loss="categorical_crossentropy", metrics=["accuracy"]
)
history = model.fit(
    (batch for batch in training_batches),
    steps_per_epoch=max(1, TRAINING_STEPS // 2),
    epochs=2,
    shuffle=False,  # Grain shuffled the records (TODO 1): a generator cannot be shuffled.
    verbose=2,
)
training_batches.close()
print(f"Keras on {keras.backend.backend()}: {TRAINING_STEPS // 2 * 2} steps from Grain.")
figure = training.plot_history(history, title="Lab 4's model on JAX, fed by Grain")

# %% [markdown]
# ## Grain beside `tf.data`, on the same storage
#
# Lab 3's pipeline (`pipeline.tfrecord_images`: `NUM_PARALLEL_READS` shards at once, a
# batch parsed at a time, in TensorFlow's threads) and Grain at its best (in each of
# `NUM_WORKERS` worker processes, 16 threads read and decode records, two batches
# ahead, then batch them) read the same records from lab 3's simulated storage. Each
# Grain process opens each file once, at its first read, and keeps it open, as Grain's
# ArrayRecord reader does: that open waits for the first byte, and each record's bytes
# come through its file's stream. Lab 3's pipeline opens each shard again at each pass.
# Both decode at `TARGET_SIZE`, on the same cores, timed in turns over
# `SPEED_TEST_REPEATS` rounds. Each stays open between its turns (Grain's workers start
# once): each run first reads `NUM_WARMUP_IMAGES` untimed, what it read ahead while the
# other was timed.

# %%
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
    seed=SEED,
)
print(simulated_storage.describe())
print("CPU:", machine_load.describe_cpu())
tf_data_pipeline = pipeline.tfrecord_images(
    shard_paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    storage=simulated_storage,
    num_parallel_reads=NUM_PARALLEL_READS,
    batch_size=BATCH_SIZE,
    epochs=None,
)
grain_pipeline = (
    grain.MapDataset.source(grain_arrayrecord.StorageSource(array_record_paths, simulated_storage))
    .shuffle(seed=SEED)
    .repeat()
    .map(parse)
    .to_iter_dataset(read_options)
    .batch(BATCH_SIZE, drop_remainder=True)
    .mp_prefetch(grain.MultiprocessingOptions(num_workers=NUM_WORKERS))
)
grain_batches = iter(grain_pipeline)
timed = {"num_images": NUM_TIMED_IMAGES, "num_warmup_images": NUM_WARMUP_IMAGES}
speed_runs = comparison.measure_in_turns(
    {
        "tf.data + TFRecord (lab 3)": grain_arrayrecord.batch_timer(
            tf_data_pipeline.as_numpy_iterator(), **timed
        ),
        f"Grain + ArrayRecord, {NUM_WORKERS} workers": grain_arrayrecord.batch_timer(
            grain_batches, **timed
        ),
    },
    repeats=SPEED_TEST_REPEATS,
)
grain_batches.close()

# %%
tf_data_runs, grain_runs = speed_runs.values()
print(comparison.describe_difference([tf_data_runs, grain_runs], name="Speed"))
figure = charts.plot_throughput(list(speed_runs.values()), title=simulated_storage.describe())

# %% [markdown]
# Each bar is a median, its line the range of the rounds. The verdict follows the
# course's rule (`comparison.verdict()`): "beyond the noise" when the medians differ by
# at least `comparison.MIN_EFFECT` (10%) and the ranges do not overlap; "small but
# consistent" when the ranges are apart but the medians closer; "not resolved" otherwise.
#
# ## What you measured

# %% tags=["summary"]
print(
    f"On {machine_load.describe_cpu()}, from the same simulated storage, lab 3's tf.data "
    f"pipeline against Grain + ArrayRecord with {NUM_WORKERS} worker processes:"
)
print(comparison.describe_difference([tf_data_runs, grain_runs], name="Speed"))

# %% [markdown]
# Which to pick: the line above says which was faster here, on these cores. Beyond
# speed, Grain gave what `tf.data` does not: a record by its index, a global shuffle
# without a buffer, and an iterator resumed at the batch it stopped before; it runs
# without TensorFlow, on Colab's TPU runtime as it comes. `tf.data` runs its parsing
# and decoding in TensorFlow's threads, outside Python, and reads large shards whole
# from object storage, one request each. Grain reads ArrayRecord records one at a
# time: keep the files on local disk or a cache near the machine, not on object storage.
