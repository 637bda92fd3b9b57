"""Processes that play the hosts of a cluster on this machine: TF workers or JAX processes.

`run_hosts()` starts one process per "host" (`python -m MODULE ...`, this module) with a
`TF_CONFIG` on loopback ports, as on a cluster; each builds a `MultiWorkerMirroredStrategy`,
reads its part through `distribute_datasets_from_function`, and reports what it read.
`run_jax_processes()` does the same with JAX processes joined by `jax.distributed`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import sys
from collections.abc import Sequence

from utils.lessons.scale_out_reading import processes
from utils.lessons.scale_out_reading.multi_host import (
    HostReport,
    collect_reports,
    record_id,
    shards_for_host,
)

MODULE = "utils.lessons.scale_out_reading.host_processes"  # Run by `python -m` as each host.
HOSTS_TIMEOUT_S = 180.0
JAX_REQUIREMENT = "jax[cpu]==0.10.2"  # As pinned in requirements-optional.txt.


def run_hosts(
    shard_paths: Sequence[str],
    *,
    num_hosts: int = 2,
    target_size: int,
    num_classes: int,
    global_batch_size: int,
    timeout_s: float = HOSTS_TIMEOUT_S,
) -> list[HostReport]:
    """Runs `num_hosts` processes, each a worker of one MultiWorkerMirroredStrategy on loopback.

    Each reads its part of `shard_paths` with `distribute_datasets_from_function` (the
    course pipeline on `shards_for_host`), then the same shards through
    `experimental_distribute_dataset` under the FILE and DATA auto-shard policies, and FILE
    with a single file. Every process is stopped before this returns.

    Args:
        shard_paths: the shards to read.
        num_hosts: the processes to start.
        target_size: side of the stored images (the sidecar's `target_size`).
        num_classes: number of classes (length of the one-hot label).
        global_batch_size: the batch of all hosts together.
        timeout_s: the longest wait for each host's report, in seconds.

    Returns:
        One `HostReport` per host, in host order.

    Raises:
        RuntimeError: when a host exits with an error or does not report in time (its
            stderr's end is in the message).

    Example:
        reports = host_processes.run_hosts(shard_paths, target_size=192, num_classes=5,
                                     global_batch_size=64)
    """
    ports = [processes.free_loopback_port() for _ in range(num_hosts)]
    cluster = {"worker": [f"{processes.LOOPBACK}:{port}" for port in ports]}
    settings = json.dumps(
        {
            "shard_paths": list(shard_paths),
            "target_size": target_size,
            "num_classes": num_classes,
            "global_batch_size": global_batch_size,
        }
    )

    def start_host(index):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = {"TF_CONFIG": json.dumps(tf_config)}
        return processes.start_module(MODULE, settings, env=env)

    return collect_reports(start_host, num_hosts, what="Host", timeout_s=timeout_s)


def _read_host_part(settings: dict) -> dict:
    """In a host process: reads this host's part as a MultiWorkerMirroredStrategy worker."""
    import tensorflow as tf

    from utils import pipeline

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    shard_paths = settings["shard_paths"]

    def dataset_fn(input_context):
        return pipeline.tfrecord_images(
            shards_for_host(
                shard_paths,
                host_index=input_context.input_pipeline_id,
                num_hosts=input_context.num_input_pipelines,
            ),
            target_size=settings["target_size"],
            num_classes=settings["num_classes"],
            batch_size=input_context.get_per_replica_batch_size(settings["global_batch_size"]),
        )

    record_ids = []
    for images, _ in strategy.distribute_datasets_from_function(dataset_fn):
        for local_images in strategy.experimental_local_results(images):
            record_ids += [record_id(image) for image in local_images.numpy()]

    policy_counts = {}
    auto_shard = tf.data.experimental.AutoShardPolicy
    for label, policy, files in [
        ("FILE", auto_shard.FILE, shard_paths),
        ("DATA", auto_shard.DATA, shard_paths),
        ("FILE, 1 file", auto_shard.FILE, shard_paths[:1]),
    ]:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = policy
        records = (
            tf.data.TFRecordDataset(files)
            .batch(settings["global_batch_size"])
            .with_options(options)
        )
        try:
            count = 0
            for batch in strategy.experimental_distribute_dataset(records):
                count += sum(len(part) for part in strategy.experimental_local_results(batch))
            policy_counts[label] = count
        except (tf.errors.OpError, ValueError) as error:
            message = re.sub(r"\{\{.*?\}\}\s*", "", str(error)).strip()
            policy_counts[label] = f"{type(error).__name__}: {message.splitlines()[0][:150]}"
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    num_hosts = strategy.cluster_resolver.cluster_spec().num_tasks("worker")
    mine = shards_for_host(shard_paths, host_index=task, num_hosts=num_hosts)
    return {
        "host_index": task,
        "num_files": len(mine),
        "record_ids": record_ids,
        "policy_counts": policy_counts,
    }


def jax_missing() -> str | None:
    """Says why the JAX demonstration cannot run here, if it cannot.

    Returns:
        Without JAX, why, with this Python's pip command; None when it can run.
    """
    if importlib.util.find_spec("jax") is None:
        command = shlex.join([sys.executable, "-m", "pip", "install", JAX_REQUIREMENT])
        return f"JAX is not installed here: {command}."
    return None


def run_jax_processes(
    shard_paths: Sequence[str],
    *,
    num_processes: int = 2,
    target_size: int,
    num_classes: int,
    global_batch_size: int,
    timeout_s: float = HOSTS_TIMEOUT_S,
) -> list[HostReport]:
    """Runs `num_processes` JAX processes on CPU, joined by `jax.distributed` on loopback.

    Each process reads the shards of `shards_for_host(jax.process_index(),
    jax.process_count())` with the course pipeline, in per-process batches; then Keras's
    own split (`keras.distribution.DataParallel().distribute_dataset`) of the whole
    pipeline, whose count goes in `policy_counts`. Every process is stopped before this
    returns.

    Args:
        shard_paths: the shards to read.
        num_processes: the JAX processes to start.
        target_size: side of the stored images (the sidecar's `target_size`).
        num_classes: number of classes (length of the one-hot label).
        global_batch_size: the batch of all processes together.
        timeout_s: the longest wait for each process's report, in seconds.

    Returns:
        One `HostReport` per process, in process order.

    Raises:
        RuntimeError: when a process exits with an error or does not report in time.

    Example:
        reports = host_processes.run_jax_processes(shard_paths, target_size=192, num_classes=5,
                                             global_batch_size=64)
    """
    coordinator = f"{processes.LOOPBACK}:{processes.free_loopback_port()}"
    settings = {
        "shard_paths": list(shard_paths),
        "target_size": target_size,
        "num_classes": num_classes,
        "global_batch_size": global_batch_size,
        "coordinator": coordinator,
        "num_processes": num_processes,
        "timeout_s": int(timeout_s),
    }
    # Keras must know its backend before TensorFlow is imported; JAX stays on the CPU.
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}

    def start_process(index):
        arguments = json.dumps({**settings, "process_id": index})
        return processes.start_module(MODULE, "--jax", arguments, env=env)

    return collect_reports(start_process, num_processes, what="JAX process", timeout_s=timeout_s)


def _read_jax_part(settings: dict) -> dict:
    """In a JAX process: joins the others, then reads this process's part."""
    import jax

    jax.distributed.initialize(
        coordinator_address=settings["coordinator"],
        num_processes=settings["num_processes"],
        process_id=settings["process_id"],
        initialization_timeout=settings["timeout_s"],
    )
    import keras
    import tensorflow as tf

    from utils import pipeline

    shard_paths = settings["shard_paths"]
    per_process_batch = settings["global_batch_size"] // jax.process_count()
    mine = shards_for_host(
        shard_paths, host_index=jax.process_index(), num_hosts=jax.process_count()
    )
    read = dict(target_size=settings["target_size"], num_classes=settings["num_classes"])
    record_ids = [
        record_id(image)
        for images, _ in pipeline.tfrecord_images(mine, batch_size=per_process_batch, **read)
        for image in images.numpy()
    ]
    # Keras's own split: every process reads every shard and keeps its part of each batch.
    # It must find the batch size in the dataset's graph, which it does not through the
    # course pipeline's parsing `map`: split the batched records, before parsing.
    everything = tf.data.TFRecordDataset(shard_paths).batch(settings["global_batch_size"])
    keras_part = keras.distribution.DataParallel().distribute_dataset(everything)
    keras_count = sum(len(records) for records in keras_part)
    report = {
        "host_index": jax.process_index(),
        "num_files": len(mine),
        "record_ids": record_ids,
        "policy_counts": {"keras distribute_dataset (all files)": keras_count},
    }
    jax.distributed.shutdown()
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--jax", action="store_true", help="a JAX process, not a TF worker")
    parser.add_argument("settings", help="JSON: shard_paths, target_size, num_classes, ...")
    processes.exit_with_owner()
    arguments = parser.parse_args()
    read_part = _read_jax_part if arguments.jax else _read_host_part
    processes.print_json(**read_part(json.loads(arguments.settings)))
