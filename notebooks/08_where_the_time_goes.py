# %% [markdown]
# # Lesson 8 (optional, after lab 3) · Where the pipeline's time goes
#
# Lab 3 built the fast pipeline and measured it against lab 1's individual files. This
# lesson asks three more questions of the same pipeline, on the same shards and the same
# simulated storage: how close does it come to what the machine can decode at all? When
# is each batch ready, and does the step wait for it? And what does each setting of the
# pipeline buy on its own?
#
# **You will:**
#
# 1. Build the decode ceiling: the stored images decoded from memory, nothing else (TODO 1).
#
# Then you measure the pipeline against it, trace two pipelines feeding a stand-in
# accelerator batch by batch, and measure each knob in turns.

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import os

import tensorflow as tf

from utils import charts, checks, comparison, machine_load, pipeline, records, storage
from utils.lab import shard_cache, sources
from utils.lessons.where_the_time_goes import ablation_chart, knobs, pipeline_trace

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards to read (lab 2's NUM_SHARDS); written here if lab 2 did not.
SHARDS_DIR = None  # None: where lab 2 wrote them; or the folder (or gs://) you wrote them to.
LATENCY_MS = 50  # Simulated first-byte latency per object: the median (as in labs 1 and 3).
LATENCY_P99_MS = 500  # Its 99th percentile (as in labs 1 and 3); None: always LATENCY_MS.
STREAM_MEGABYTES_PER_SECOND = 85  # Bandwidth of one object stream; None: no cap.
TOTAL_MEGABYTES_PER_SECOND = None  # Bandwidth of all streams together; None: no cap.
NUM_PARALLEL_READS = 16  # Shards read at once (lab 3's).
BATCH_SIZE = 64
NUM_TIMED_IMAGES = 4000  # Images timed in each run (about half a second each).
CEILING_REPEATS = 5  # Rounds of the ceiling and the pipeline, taken in turns.
STEP_MS = 20  # Time of the stand-in accelerator's step per batch, in the timeline.
TIMELINE_BATCHES = 40  # Batches traced in the timeline (both pipelines start slowly).
ABLATION_PARALLEL_READS = [1, 4, 16]  # Settings of num_parallel_reads to measure.
ABLATION_SHARD_COUNTS = [1, 4, 16, 64]  # Shard counts to measure (written if missing).
ABLATION_REPEATS = 5  # Rounds of each knob's settings, taken in turns.
SEED = 42

# %% [markdown]
# ## The shards and the storage
#
# The shards lab 2 wrote (or written now, as in lab 3), on lab 3's simulated storage:
# lognormal first bytes (median `LATENCY_MS`, 99th percentile `LATENCY_P99_MS`) and
# `STREAM_MEGABYTES_PER_SECOND` per stream; lab 3 says where those numbers come from.
# Here the reading comes from the course's `utils`: `records_in_any_order` reads the shards
# in parallel, in any order (lab 3's TODO 2), and `parse_batch` parses a whole batch of
# records in one call. The course pipeline, `pipeline.tfrecord_images`, is lab 3's speed
# test pipeline with two changes its knobs below explain: it parses by batch, and the
# passes are repeated before the reads, not after the pipeline.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
shard_paths, class_names = shard_set.paths, shard_set.class_names
num_records = shard_set.num_records
simulated_storage = storage.SimulatedStorage.for_source(
    source,
    latency_ms=LATENCY_MS,
    latency_p99_ms=LATENCY_P99_MS,
    megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
    total_megabytes_per_second=TOTAL_MEGABYTES_PER_SECOND,
    seed=SEED,
)
print(f"{len(shard_paths)} shards, {num_records} records")
print(simulated_storage.describe())

any_order = tf.data.Options()
any_order.deterministic = False
records_in_any_order = simulated_storage.tfrecord_dataset(
    shard_paths, num_parallel_reads=NUM_PARALLEL_READS
).with_options(any_order)


def parse_batch(serialized_batch):
    """Parses a batch of records in one call, then decodes each image."""
    return pipeline.parse_batch(
        serialized_batch, target_size=TARGET_SIZE, num_classes=len(class_names)
    )


# %% [markdown]
# ## 1. The machine's limit (TODO 1)
#
# No pipeline of JPEGs goes faster than the CPU decodes them. The ceiling: the same JPEG
# bytes decoded from memory, a batch at a time on all cores, with no storage and no
# parsing. `stored_jpegs` holds the bytes of up to 1,000 stored images, and
# `decode_batch` decodes a batch of them.
#
# **TODO 1.** Make `ceiling_dataset`: `stored_jpegs` as a dataset
# (`tf.data.Dataset.from_tensor_slices`), repeated without end (the timer takes what it
# needs), batched by `BATCH_SIZE`, and mapped with `decode_batch` and
# `num_parallel_calls=tf.data.AUTOTUNE`: one call per batch, on all cores, as lab 3's
# pipeline parses.

# %%
stored_jpegs = [
    tf.io.parse_single_example(record, records.FEATURES)["image"].numpy()
    for record in tf.data.TFRecordDataset(shard_paths).take(1000)
]


def decode_batch(jpegs):
    """Decodes a batch of JPEG strings to uint8 images, one by one (`tf.map_fn`)."""
    return tf.map_fn(
        lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), jpegs, fn_output_signature=tf.uint8
    )


# TODO 1: the stored JPEGs decoded from memory, endless, a batch per parallel map call.
### BEGIN SOLUTION
ceiling_dataset = tf.data.Dataset.from_tensor_slices(stored_jpegs).repeat().batch(BATCH_SIZE)
ceiling_dataset = ceiling_dataset.map(decode_batch, num_parallel_calls=tf.data.AUTOTUNE)
### END SOLUTION

# %%
# NBVAL_CHECK_OUTPUT
checks.check_ceiling_dataset(
    ceiling_dataset, todo=1, stored_jpegs=stored_jpegs, batch_size=BATCH_SIZE
)

# %% [markdown]
# Against the ceiling, the course pipeline reading the shards from local disk. Timed in
# turns, `CEILING_REPEATS` rounds, the order reversed every other round (one pair of runs
# can land on a busy moment); the share is given with its range. A share above 100% is
# noise: reading, parsing and decoding cannot beat decoding alone.

# %%
local_pipeline = pipeline.tfrecord_images(
    shard_paths,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    num_parallel_reads=NUM_PARALLEL_READS,
    batch_size=BATCH_SIZE,
    epochs=None,  # Endless: the passes joined before the reads (see the knobs below).
)
with machine_load.LoadWatch() as load:
    runs = comparison.measure_in_turns(
        {
            "decode ceiling (in memory)": ceiling_dataset,
            "TFRecords, fast, local disk": local_pipeline,
        },
        num_images=NUM_TIMED_IMAGES,
        repeats=CEILING_REPEATS,
    )
print(load.summary())
ceiling, local_records = runs["decode ceiling (in memory)"], runs["TFRecords, fast, local disk"]
share = comparison.ratio_in_turns(local_records, ceiling)
print(comparison.describe_share_of_ceiling(share, name="The course pipeline on local disk"))
figure = charts.plot_throughput([local_records], title="Local disk", ceiling=ceiling)

# %% [markdown]
# The bar is a median, its line the range of the rounds. The dashed line is the decode
# ceiling: no bar can stay above it for long.
#
# ## A timeline of the pipeline, measured
#
# A speed test gives one number, not *when* each batch is ready. Here two pipelines feed
# a stand-in accelerator taking `STEP_MS` per batch, and each batch is timed: read from
# storage, parsed and decoded, consumed by the step (a grey line: a batch waiting for its
# step). Left, one shard and one stage at a time; right, lab 3's records (several shards,
# any order) with a parallel map and prefetch: the TensorFlow performance guide's
# picture, measured.

# %%
traced = [
    pipeline_trace.trace_pipeline(
        simulated_storage.tfrecord_dataset(shard_paths),
        parse_batch,
        batch_size=BATCH_SIZE,
        num_batches=TIMELINE_BATCHES,
        step_ms=STEP_MS,
        parallel=False,
        label="one reader, one stage at a time",
    ),
    pipeline_trace.trace_pipeline(
        records_in_any_order,
        parse_batch,
        batch_size=BATCH_SIZE,
        num_batches=TIMELINE_BATCHES,
        step_ms=STEP_MS,
        parallel=True,
        label="parallel reads, map, prefetch",
    ),
]
for run in traced:
    print(
        f"{run.label}: {TIMELINE_BATCHES} steps in {run.seconds:.2f} s, "
        f"{run.waiting_seconds:.2f} s of it waiting for data."
    )
figure = pipeline_trace.plot_timelines(traced)

# %% [markdown]
# ## Does parsing by batch pay?
#
# Lab 3 parses one record per `map()` call, then batches; the course pipeline batches the
# records first and parses each batch in one call (`tf.io.parse_example`; the JPEGs are
# still decoded one by one). Both on the same records in memory, no storage, in turns:


# %%
def parse_one(serialized):
    """Lab 3's `read_tfrecord`: one record parsed, its image decoded."""
    record = tf.io.parse_single_example(serialized, records.FEATURES)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
    one_hot = tf.reshape(tf.sparse.to_dense(record["one_hot_class"]), [len(class_names)])
    return image, one_hot


in_memory = tf.data.TFRecordDataset(shard_paths).take(NUM_TIMED_IMAGES).cache()
in_memory_count = sum(1 for _ in in_memory)  # Fills the cache.
AUTOTUNE = tf.data.AUTOTUNE
parse_runs = comparison.measure_in_turns(
    {
        "one by one": in_memory.map(parse_one, AUTOTUNE).batch(BATCH_SIZE).repeat(),
        "by batch": in_memory.batch(BATCH_SIZE).map(parse_batch, AUTOTUNE).repeat(),
    },
    num_images=2 * in_memory_count,
    repeats=CEILING_REPEATS,
)
print(comparison.describe_difference(parse_runs, name="Parsing by batch"))

# %% [markdown]
# ## What each knob buys
#
# Each group changes one setting of the course pipeline and keeps the others (simulated
# storage, `NUM_PARALLEL_READS` reads, the passes repeated before the reads, order not
# kept, prefetch on, no cache, `NUM_SHARDS` shards). The `shards` rows are read a pass at
# a time (`knobs.shard_count_dataset`): with the names repeated before the reads, one
# shard would be opened by every read at once, a stream each, and "1 shard" would be
# `NUM_PARALLEL_READS` streams. `cache`'s row times the second pass,
# from memory (where the decoded images would pass 512 MB, both cache rows read only the
# first shards, as labelled). Settings are timed in turns, `ABLATION_REPEATS` rounds, each
# a median and range. The verdict compares the fastest and slowest by the course's one
# rule (`comparison.verdict()`): "beyond the noise" when their medians differ by at least
# `comparison.MIN_EFFECT` (10%) and their ranges do not overlap; "small but consistent"
# when the ranges are apart but the medians closer; "not resolved" when the ranges
# overlap. The ranges guard against chance: with 5 rounds, two equal settings get separate
# ranges by chance in fewer than 1% of cases (2 in 252 orderings); with 3, in 10%.


# %%
# The same records copied into each shard count, once (no image is converted again).
paths_by_count = {count: shard_cache.reshard(shard_set, count) for count in ABLATION_SHARD_COUNTS}
ablation = knobs.measure_knobs(
    shard_paths,
    paths_by_count=paths_by_count,
    parallel_reads=[*ABLATION_PARALLEL_READS, tf.data.AUTOTUNE],
    storage=simulated_storage,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    num_parallel_reads=NUM_PARALLEL_READS,
    batch_size=BATCH_SIZE,
    num_records=num_records,
    num_timed_images=NUM_TIMED_IMAGES,
    repeats=ABLATION_REPEATS,
)

# %%
# tf.data sizes AUTOTUNE from the cores it may use.
print(knobs.describe_open_shards(ablation, num_cores=os.cpu_count()))

# %% [markdown]
# What the storage did during those runs, and what the pipeline asks of it: the first-byte
# waits it drew, and the bandwidth the course pipeline needs (at its median in the
# `repeat` row "before the reads", which is that pipeline) against what one stream gives.

# %%
course_pipeline = ablation.results["repeat"][0]  # "before the reads": the course pipeline.
storage_demand = knobs.describe_storage_demand(
    ablation.first_bytes_ms,
    images_per_second=course_pipeline.median,
    bytes_per_record=sum(tf.io.gfile.stat(p).length for p in shard_paths) / num_records,
    stream_megabytes_per_second=STREAM_MEGABYTES_PER_SECOND,
)
print("\n".join(storage_demand))

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"On local disk the course pipeline reads {local_records.median:,.0f} images/s and the "
    f"machine decodes {ceiling.median:,.0f} (medians of {share.num_runs} runs in turns)."
)
print(comparison.describe_share_of_ceiling(share, name="The pipeline"))
print("What each knob buys, median (range) of each setting:")
print("\n".join(knobs.describe_ranges(ablation.results)))
print("\n".join(knobs.describe_verdicts(ablation)))
figure = ablation_chart.plot_ablation(
    ablation.results,
    title=simulated_storage.describe(),
    course_settings={"num_parallel_reads": str(NUM_PARALLEL_READS), "shards": str(NUM_SHARDS)},
)

# %% [markdown]
# Reading the table: each knob's verdict is printed above, and only a verdict "beyond
# the noise" says that a setting mattered on this run. What each knob does:
# - **num_parallel_reads**: each shard costs one first-byte wait; reading several at once
#   overlaps them, and several streams add up their bandwidth. `AUTOTUNE` lets `tf.data`
#   choose from the machine's cores, so its row says what this machine's core count
#   gives, not what a larger host's would: the line above says how many shards that is
#   here, and compares the shards it kept open with one reader's count (one reader also
#   opens the next shards ahead). To read a chosen number of shards at once,
#   give it to an `interleave()` (`cycle_length` and `num_parallel_calls`), as the course
#   pipeline does; `tf.data.TFRecordDataset(..., num_parallel_reads=N)` with a number
#   reads N at once too, but keeps the files' order whatever `options.deterministic` says.
# - **shards**: fewer, larger files mean fewer waits, but fewer files to read in parallel
#   (each row reads its shards a pass at a time, one stream per shard);
#   the usual guidance is files of 10-100 MB or more, and at least 10 times as many files
#   as hosts reading them. Whether it shows here depends on the bandwidth printed above:
#   when one stream gives more than the pipeline needs, one shard can keep up, and only
#   the first-byte wait at the start of each pass is left to lose. A faster host needs
#   the number of streams printed above, so several shards read at once.
# - **repeat**: `repeat()` after the pipeline starts it again at each pass, and every
#   shard then waits for its first byte at the same moment, with nothing to decode;
#   repeating the file names *before* the reads (`pipeline.tfrecord_images(...,
#   epochs=None)`, or `.repeat()` on the list of names before `interleave`) joins the
#   passes, so the next pass's shards open while this one's last records are read. (Lab
#   4 caches the decoded images, so there the repeat comes after the cache.)
# - **deterministic**: keeping the order makes the pipeline wait for the file whose turn
#   it is; letting go of it lets the fastest file go first. A slow request costs only
#   when it is waited on: each shard is opened once per pass, so with few opens (see the
#   count above) a slow first byte is rare. Its verdict says whether keeping the order
#   cost anything measurable here.
# - **prefetch**: it lets the pipeline prepare the next batches while the consumer works
#   on the current one. `false` has no prefetch at all (tf.data's own, which it adds to
#   a pipeline without one, is switched off for that row). Here the consumer only counts
#   images and the stage before the prefetch is the parallel `map()`, which already runs
#   ahead into its own buffer: a prefetch adds a second buffer and a thread that hands
#   each batch over, on the cores the map needs, and its verdict says whether that paid
#   here. Either way it says nothing about a training step; lesson 5 measures when
#   prefetch pays.
# - **cache**: after the first pass, no storage and no decoding at all, as long as the
#   decoded images fit in memory (here `num_records * TARGET_SIZE**2 * 3` bytes).
