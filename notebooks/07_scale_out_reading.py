# %% [markdown]
# # Lesson 7 (optional) · Beyond one host's CPUs: per-host sharding and the tf.data service
#
# Lesson 6 scaled the conversion out. Reading has the same problem at the other end: a
# TPU pod has one host per few chips, each host must read only its part of the data, and
# when a host's CPUs cannot decode as fast as its chips consume, the preprocessing moves
# to other machines with the tf.data service (`tf.data.experimental.service`; see the
# paper "tf.data service: A Case for Disaggregating ML Input Data Processing"). Here both
# run on one machine, as local processes on loopback ports.
#
# **You will:**
#
# 1. Compute how many host cores an accelerator's consumption rate needs (TODO 1).
# 2. Give each host its own shards, per replica batch included (TODO 2).
# 3. Run lab 3's pipeline through the tf.data service (TODO 3).
#
# Then you watch 2 host processes read disjoint halves, count what the service's modes
# return, and measure images/s with 1 and 2 service workers, and with the service's
# compression on and off.

# %% [markdown]
# ## Set-up
#
# Run this cell first. It finds the course's `utils` package (beside `labs/` in a
# checkout) or installs it, installs TensorFlow for `tf.data` where it is missing, and
# says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import math
import os

import tensorflow as tf

from utils import (
    charts,
    checks,
    comparison,
    machine_load,
    pipeline,
    random_crops,
    readable_images,
    sampling,
)
from utils.lab import shard_cache, sources
from utils.lessons.scale_out_reading import data_service, host_processes, multi_host

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Image size in the shards (lab 2's TARGET_SIZE).
NUM_SHARDS = 16  # Shards (lab 2's NUM_SHARDS); at least as many as hosts.
SHARDS_DIR = None  # None: where lab 2 wrote them; or your folder.
BATCH_SIZE = 64  # The global batch: all hosts together.
NUM_HOSTS = 2  # Host processes in the sharding demonstration.
NUM_ORIGINALS = 200  # Full-size original images decoded in section 1.
CROP_SIZE = 224  # Side of the random crop a training step takes (ResNet-50's input).
LATENCY_MS = 50  # SIMULATED first-byte latency per shard for the service's workers.
NUM_TIMED_IMAGES = 4000  # Images timed in each measurement.
REPEATS = 3  # Rounds of each measurement, taken in turns (a median and a range).
SEED = 42

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
shard_set = shard_cache.ensure_shards(
    source, SHARDS_DIR, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=SEED
)
shard_paths = shard_set.paths
class_names = shard_set.class_names
num_records = shard_set.num_records
print(f"{len(shard_paths)} shards, {num_records} records; this machine has {os.cpu_count()} cores.")

# %% [markdown]
# ## 1. How much CPU does the accelerator need? (TODO 1)
#
# What a training step asks of the host, per image: decode the full-size original, take a
# random crop and resize it to the model's input, `CROP_SIZE` px (`random_crops.
# decode_then_crop`: tensorflow/tpu's ResNet training preprocessing decodes the whole
# JPEG, then crops). Timed on up to `NUM_ORIGINALS` originals of `DATA_SOURCE`, from
# memory, on all cores; divided by the cores, it is what one core does per second.

# %%
every_class = sampling.paths_from_every_class(source.paths)
sample_paths, _, _ = readable_images.readable_sample(every_class, NUM_ORIGINALS, verbose=False)
originals = [tf.io.read_file(path).numpy() for path in sample_paths]
originals = [jpeg for jpeg in originals if tf.io.is_jpeg(jpeg)]  # The crop reads JPEG headers.
sides = tf.stack([tf.io.extract_jpeg_shape(jpeg)[:2] for jpeg in originals])
mean_height, mean_width = tf.reduce_mean(tf.cast(sides, tf.float32), axis=0).numpy()
crops = random_crops.random_crop_batches(
    originals, random_crops.decode_then_crop, image_size=CROP_SIZE, batch_size=BATCH_SIZE
)
cores = machine_load.usable_cores()
with machine_load.LoadWatch() as load:
    decode = comparison.measure_in_turns(
        {"originals, random crop": crops}, num_images=NUM_TIMED_IMAGES, repeats=REPEATS
    )["originals, random crop"]
print(load.summary())
per_core = decode.median / cores
per_core_range = (decode.minimum / cores, decode.maximum / cores)
work = (
    f"decoding a full-size original ({len(originals)} here, on average "
    f"{sampling.mean_bytes(originals) / 1e3:,.0f} kB and {mean_height:,.0f} x "
    f"{mean_width:,.0f} px), then a random crop resized to {CROP_SIZE} px"
)
print(
    f"One core: {per_core:,.0f} images/s ({per_core_range[0]:,.0f}-{per_core_range[1]:,.0f} "
    f"over the runs) of {work}, on this machine's {cores} cores."
)

# %% [markdown]
# **TODO 1.** Complete `host_cores_needed(images_per_second, images_per_second_per_core)`:
# the number of cores that prepare `images_per_second`. A part of a core is a whole core
# to book: round up with `math.ceil`.


# %%
def host_cores_needed(images_per_second, images_per_second_per_core):
    """Whole CPU cores that prepare `images_per_second` at this per-core rate."""
    # TODO 1: divide, and round up to whole cores.
    ### BEGIN SOLUTION
    cores = math.ceil(images_per_second / images_per_second_per_core)
    ### END SOLUTION
    return cores


# %%
# NBVAL_CHECK_OUTPUT
checks.check_host_cores(host_cores_needed, todo=1)

# %% [markdown]
# Published training rates of ResNet-50 v1.5 (ImageNet, 224 px, mixed precision), from
# NVIDIA's DeepLearningExamples, "Training performance results":
# https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/resnet50v1.5/README.md
# NVIDIA feeds those GPUs with DALI, which decodes on the GPU; the table says how many
# host cores the same work would take on the CPU, at the per-core rate printed above, for
# originals like these (the line under the table): larger JPEGs take more.

# %%
PUBLISHED_RATES = [  # (accelerator, images/s, source)
    ("1x V100 16GB (DGX-1)", 1200, "NVIDIA DeepLearningExamples, ResNet50 v1.5 PyTorch"),
    ("1x A100 80GB (DGX A100)", 2470, "NVIDIA DeepLearningExamples, ResNet50 v1.5 PyTorch"),
    ("8x A100 80GB (one DGX A100)", 16621, "NVIDIA DeepLearningExamples, ResNet50 v1.5 PyTorch"),
]
caveat = (
    f"Host cores for {work}, at {per_core:,.0f} images/s per core measured here; NVIDIA's "
    f"runs decode on the GPU (DALI). {load.summary()}"
)


def cores_with_range(rate):
    """Cores needed at the median per-core rate, and at the fastest and slowest runs'."""
    low, high = (host_cores_needed(rate, per_core_range[index]) for index in (1, 0))
    return f"{host_cores_needed(rate, per_core)} ({low}-{high})"


print(f"{'accelerator':<30} {'images/s':>9} {'host cores':>11}  source")
for accelerator, rate, citation in PUBLISHED_RATES:
    print(f"{accelerator:<30} {rate:>9,} {cores_with_range(rate):>11}  {citation}")
print(caveat)

# %% [markdown]
# ## 2. Each host reads its own shards (TODO 2)
#
# On a pod, every host runs the same program. `strategy.distribute_datasets_from_function(
# dataset_fn)` calls `dataset_fn(input_context)` on each host: `input_context.
# input_pipeline_id` is this host's index, `num_input_pipelines` the number of hosts. Each
# host should open only its shards (files >= hosts), so the hosts together read every
# record once. `input_context.get_per_replica_batch_size(BATCH_SIZE)` turns the global
# batch into this replica's. On JAX, the same idea is `jax.process_index()` and
# `jax.process_count()`: each process reads its part, and `keras.distribution` assembles
# the global batch from the processes' parts.
#
# **TODO 2.** Complete `dataset_fn(input_context)`: take this host's shards with
# `multi_host.shards_for_host(shard_paths, host_index=..., num_hosts=...)` and return
# `pipeline.tfrecord_images(...)` over them, with `target_size=TARGET_SIZE`,
# `num_classes=len(class_names)` and the per-replica batch size.


# %%
def dataset_fn(input_context):
    """This host's batches: its own shards, batched per replica."""
    # TODO 2: this host's shards, read with the course pipeline in per-replica batches.
    ### BEGIN SOLUTION
    host_paths = multi_host.shards_for_host(
        shard_paths,
        host_index=input_context.input_pipeline_id,
        num_hosts=input_context.num_input_pipelines,
    )
    dataset = pipeline.tfrecord_images(
        host_paths,
        target_size=TARGET_SIZE,
        num_classes=len(class_names),
        batch_size=input_context.get_per_replica_batch_size(BATCH_SIZE),
    )
    ### END SOLUTION
    return dataset


# %%
# NBVAL_CHECK_OUTPUT
checks.check_dataset_fn(
    dataset_fn,
    todo=2,
    num_records=num_records,
    global_batch_size=BATCH_SIZE,
    num_shards=len(shard_paths),
)

# %% [markdown]
# ### Two hosts, for real
#
# `host_processes.run_hosts()` starts `NUM_HOSTS` processes, each a worker of one
# `MultiWorkerMirroredStrategy` with a `TF_CONFIG` naming the others on loopback ports,
# as on a cluster. Each reads its part through `distribute_datasets_from_function` (the
# solution of TODO 2), then the same shards through `experimental_distribute_dataset`,
# which shards by itself under an auto-shard policy: `FILE` gives each host whole files,
# `DATA` has every host read every file and keep its share of the elements (all the
# bytes read everywhere), and `FILE` with fewer files than hosts fails. The processes
# are stopped before the cell ends. When one host's read fails, the others' fail with
# it: the hosts take each step together (a collective), and a host that stops closes
# its connections, so the other hosts see `UnavailableError: Collective ops is aborted
# by: Socket closed`. The lines below name that error as a consequence of the first.

# %%
reports = host_processes.run_hosts(
    shard_paths,
    num_hosts=NUM_HOSTS,
    target_size=TARGET_SIZE,
    num_classes=len(class_names),
    global_batch_size=BATCH_SIZE,
)
read_lines = multi_host.describe_reads(
    reports, name="host", num_records=num_records, policy_prefix="auto-shard "
)
print("\n".join(read_lines))
read_by_host = [set(report.record_ids) for report in reports]
overlap = set.intersection(*read_by_host)
together = set.union(*read_by_host)

# %% [markdown]
# ### The same on JAX
#
# On JAX (Colab's TPU runtime), every process calls `jax.distributed.initialize(
# coordinator_address, num_processes, process_id)`, then reads the shards of
# `multi_host.shards_for_host(shard_paths, host_index=jax.process_index(),
# num_hosts=jax.process_count())` in per-process batches, and Keras trains under
# `keras.distribution.DataParallel(auto_shard_dataset=False)`: the data is already
# split. Keras's own split, `DataParallel().distribute_dataset(dataset)`, works like the
# `DATA` policy: every process reads every file and keeps its part of each batch.
# `host_processes.run_jax_processes()` starts `NUM_HOSTS` JAX processes on the CPU, on a
# loopback port, reports what each read both ways, and stops them. Without JAX it skips.

# %%
skip_reason = host_processes.jax_missing()
if skip_reason:
    jax_read = None
    print(f"Skipped: {skip_reason} The TensorFlow processes above show the same split.")
else:
    jax_reports = host_processes.run_jax_processes(
        shard_paths,
        num_processes=NUM_HOSTS,
        target_size=TARGET_SIZE,
        num_classes=len(class_names),
        global_batch_size=BATCH_SIZE,
    )
    jax_read = [set(report.record_ids) for report in jax_reports]
    print(
        "\n".join(
            multi_host.describe_reads(jax_reports, name="JAX process", num_records=num_records)
        )
    )

# %% [markdown]
# ## 3. The tf.data service (TODO 3)
#
# A dispatcher hands out work; workers run the dataset's graph and send the elements to
# the trainer. `dataset.apply(tf.data.experimental.service.distribute(processing_mode,
# service))` sends `dataset` to the service; what comes back is read like any dataset.
#
# - `ShardingPolicy.OFF` (also written `"parallel_epochs"`): every worker runs the whole
#   dataset, so each element comes once per worker. Fine for endless, shuffled training
#   data; wrong for an epoch that must see each record once.
# - `"distributed_epoch"` (`ShardingPolicy.DYNAMIC`): the dispatcher hands out the first
#   dataset's elements (here: shard names) to the workers one by one, so each record comes
#   once.
#
# **TODO 3.** Complete `through_service(dataset, processing_mode, service)`: apply
# `tf.data.experimental.service.distribute` with that mode and service, and return it.


# %%
def through_service(dataset, processing_mode, service):
    """`dataset`, run by the tf.data service's workers instead of this process."""
    # TODO 3: send the dataset to the service.
    ### BEGIN SOLUTION
    distributed = dataset.apply(
        tf.data.experimental.service.distribute(processing_mode=processing_mode, service=service)
    )
    ### END SOLUTION
    return distributed


# %%
# NBVAL_CHECK_OUTPUT
checks.check_through_service(through_service, todo=3)

# %% [markdown]
# ### Counts and images/s with 1 and 2 workers
#
# Lab 3's pipeline, on the service: the workers read the shards through a SIMULATED
# first-byte latency of `LATENCY_MS` per shard, one shard at a time each, then batch,
# parse and decode. `data_service.LocalCluster` starts a dispatcher and workers as local
# processes on loopback ports, and stops them all when its `with` block ends.
#
# A second worker keeps a second request in flight: it doubles what waiting allows
# (records per shard over the latency, times the workers), but not what the CPU allows
# (the cores over the CPU time of one image: this notebook's, the dispatcher's and the
# workers', metered over the timed images only, so no run can pass it). The cell prints
# both. A third setting turns off the compression of what workers send (`compression=
# None`; `"AUTO"` is the default). One cluster runs at a time (`data_service.
# measure_one_cluster_at_a_time`: each round starts one, times its settings, stops it, the
# order reversed every other round), so no idle cluster fills buffers or takes cores in
# another's turn. A verdict follows the course's one rule (`comparison.verdict()`):
# "beyond the noise" when the medians differ by at least `comparison.MIN_EFFECT` (10%) and
# the ranges of the `REPEATS` rounds do not overlap; "small but consistent" when the ranges
# are apart but the medians closer; "not resolved" when the ranges overlap.


# %%
def service_pipeline(num_epochs):
    records = data_service.shards_with_latency(
        shard_paths, latency_ms=LATENCY_MS, num_epochs=num_epochs
    )
    return records.batch(BATCH_SIZE).map(
        lambda batch: pipeline.parse_batch(
            batch, target_size=TARGET_SIZE, num_classes=len(class_names)
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def count_modes(cluster):
    print(cluster.describe())
    for mode, label in [(OFF, "OFF"), ("distributed_epoch", "distributed_epoch")]:
        dataset = through_service(service_pipeline(1), mode, cluster.address)
        counts[(cluster.num_workers, label)] = sum(len(images) for images, _ in dataset)
        print(f"  {label}: {counts[(cluster.num_workers, label)]} images, epoch of {num_records}")


def on_service(address, compression):
    distribute = tf.data.experimental.service.distribute(
        "distributed_epoch", address, compression=compression
    )
    return service_pipeline(None).apply(distribute)


OFF = tf.data.experimental.service.ShardingPolicy.OFF
settings = {"1 worker": (1, "AUTO"), "2 workers": (2, "AUTO")}  # label: (workers, compression)
settings["1 worker, compression off"] = (1, None)
counts = {}
metered = data_service.measure_one_cluster_at_a_time(
    settings, on_service, num_images=NUM_TIMED_IMAGES // 2, repeats=REPEATS, first_use=count_modes
)
speeds = {label: runs.result for label, runs in metered.items()}
records_per_shard = num_records / len(shard_paths)
limits = {}  # label: (what waiting allows, what the CPU allows per run, the lower)
for label in ["1 worker", "2 workers"]:
    waiting_limit = settings[label][0] * records_per_shard * 1000 / max(LATENCY_MS, 1e-9)
    cpu_limit = metered[label].cpu_limits
    limit = "waiting" if waiting_limit < cpu_limit.median else "the CPU"
    limits[label] = (waiting_limit, cpu_limit, limit)
    print(
        f"{label}: waiting allows {waiting_limit:,.0f} images/s ({records_per_shard:.0f} "
        f"records per shard, {LATENCY_MS} ms each); {metered[label].cpu_ms_per_image:.2f} ms "
        f"of CPU per image on {cores} cores allow {comparison.spread(cpu_limit.values)}, with "
        f"{comparison.spread(metered[label].busy_cores, '.2f')} cores busy. "
        f"The lower limit: {limit}."
    )
print(
    comparison.describe_difference(
        [speeds["2 workers"], speeds["1 worker"]], name="A second worker"
    )
)
print(
    comparison.describe_difference(
        [speeds["1 worker"], speeds["1 worker, compression off"]], name="Compression AUTO vs off"
    )
)

# %% [markdown]
# How to read it: the lower of the two limits is the one that holds (the chart at the
# end draws both). A second worker doubles what waiting allows, but on the same cores it
# only shares them, and the service's own work (compressing, sending and decompressing
# each batch) is part of each image's CPU time. The verdict lines say whether the second
# worker, and turning compression off, changed the rate beyond the noise in this run.
# Larger shards buy more images per wait, so they reach the CPU limit first; separate
# worker machines bring their own cores.
#
# **Running it on separate machines** (not run here). On the dispatcher's machine, and on
# each worker machine, with the course installed (`pip install -e .` in a checkout):
#
# ```bash
# python -m utils.lessons.scale_out_reading.data_service dispatcher --port 5050
# python -m utils.lessons.scale_out_reading.data_service worker \
#     --dispatcher DISPATCHER_HOST:5050 --port 5051 --worker-host THIS_WORKER_HOST
# ```
#
# and in the training program, `service="grpc://DISPATCHER_HOST:5050"`. The servers
# listen on every interface of their machine: keep the ports inside your private network.
# The workers read the shards themselves, so they need access to the bucket.
#
# ## What you measured

# %% tags=["summary"]
print(f"Decoding, {decode.summary()} images/s on {cores} cores, {per_core:,.0f} per core.")
print(f"  {PUBLISHED_RATES[-1][0]}: {cores_with_range(PUBLISHED_RATES[-1][1])} cores. {caveat}")
print(
    f"Per-host sharding, {NUM_HOSTS} processes: {[len(r) for r in read_by_host]} records, "
    f"{len(overlap)} read twice, {len(together)} of {num_records} together."
)
if jax_read is None:
    print(f"JAX processes: skipped ({skip_reason})")
else:
    print(
        f"JAX, {NUM_HOSTS} processes: {[len(r) for r in jax_read]} records, "
        f"{len(set.intersection(*jax_read))} read twice, "
        f"{len(set.union(*jax_read))} of {num_records} together."
    )
for (num_workers, label), images in counts.items():
    print(f"Service, {num_workers} worker(s), {label}: {images} images per epoch of {num_records}.")
for label, (waiting_limit, cpu_limit, limit) in limits.items():
    print(
        f"Service, {label}: waiting allows {waiting_limit:,.0f} images/s, the CPU "
        f"{cpu_limit.median:,.0f}: the limit is {limit}."
    )
for result in speeds.values():
    print(f"Service, {result.summary()} images/s")
figure = charts.plot_throughput(
    list(speeds.values()),
    title=f"tf.data service, SIMULATED {LATENCY_MS} ms per shard; dashed: the limits",
    references={
        f"{label}, {kind} allows": value
        for label, (waiting_limit, cpu_limit, _) in limits.items()
        for kind, value in [("waiting", waiting_limit), ("the CPU", cpu_limit.median)]
    },
)
