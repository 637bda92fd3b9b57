"""Per-host input sharding: which shards each host reads, shown with real processes.

`run_hosts()` starts one process per "host" (`python -m utils.multi_host ...`) with a
`TF_CONFIG` on loopback ports, as on a cluster; each builds a `MultiWorkerMirroredStrategy`,
reads its part through `distribute_datasets_from_function`, and reports what it read.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from utils import processes

if TYPE_CHECKING:
    import numpy as np

HOSTS_TIMEOUT_S = 180.0


def shards_for_host(shard_paths: Sequence[str], *, host_index: int, num_hosts: int) -> list[str]:
    """Returns the shards host `host_index` of `num_hosts` reads: every num_hosts-th one.

    Args:
        shard_paths: every shard, in the same order on every host.
        host_index: this host's index, 0 to `num_hosts - 1`.
        num_hosts: how many hosts read the shards.

    Returns:
        This host's shards; the hosts' lists are disjoint and together hold every shard.

    Raises:
        ValueError: fewer shards than hosts (a host would read nothing), or a bad index.

    Example:
        mine = multi_host.shards_for_host(shard_paths, host_index=0, num_hosts=2)
    """
    shard_paths = list(shard_paths)
    if not 0 <= host_index < num_hosts:
        raise ValueError(
            f"`host_index` must be in 0..{num_hosts - 1}. Received: host_index={host_index}"
        )
    if len(shard_paths) < num_hosts:
        raise ValueError(
            f"{len(shard_paths)} shard(s) for {num_hosts} hosts: each host needs at least one "
            "file. Write at least as many shards as hosts (lab 2's NUM_SHARDS)."
        )
    return shard_paths[host_index::num_hosts]


def record_id(image: np.ndarray) -> str:
    """A short fingerprint of one decoded image, to compare what hosts read.

    Args:
        image: a decoded image, as a NumPy array.

    Returns:
        16 hex digits of the SHA-1 of its bytes.
    """
    return hashlib.sha1(image.tobytes()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class HostReport:
    """What one host process read."""

    host_index: int
    num_files: int
    record_ids: list[str]
    policy_counts: dict  # Auto-shard policy -> records read, or the error's first line.


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
        reports = multi_host.run_hosts(shard_paths, target_size=192, num_classes=5,
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
        return processes.start_module("utils.multi_host", settings, env=env)

    return _reports_of(start_host, num_hosts, what="Host", timeout_s=timeout_s)


def _reports_of(start, count: int, *, what: str, timeout_s: float) -> list[HostReport]:
    """Starts `count` processes with `start(index)`, reads each one's report, stops them all."""
    started = []
    try:
        for index in range(count):
            started.append(start(index))
        reports = [
            processes.read_json_line(process, timeout_s=timeout_s, what=f"{what} {index}")
            for index, process in enumerate(started)
        ]
    finally:
        for process in started:
            processes.stop(process)
    return [HostReport(**report) for report in reports]


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
        "JAX is not installed (pip install jax)." without JAX; None when it can run.
    """
    if importlib.util.find_spec("jax") is None:
        return "JAX is not installed (pip install jax)."
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
        reports = multi_host.run_jax_processes(shard_paths, target_size=192, num_classes=5,
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
        return processes.start_module("utils.multi_host", "--jax", arguments, env=env)

    return _reports_of(start_process, num_processes, what="JAX process", timeout_s=timeout_s)


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


def describe_reads(
    reports: list[HostReport], *, name: str, num_records: int, policy_prefix: str = ""
) -> list[str]:
    """Says what each process read, and how the processes' reads overlap.

    Args:
        reports: one `HostReport` per process (from `run_hosts` or `run_jax_processes`).
        name: what a process is called in the lines ("host", "JAX process").
        num_records: the records in all the shards.
        policy_prefix: written before each report's `policy_counts` ("auto-shard ").

    Returns:
        One line per process (shards, records, counts by way of reading), then one line
        with the records read by more than one process and by all of them together. A
        host whose read was aborted because another host's failed (`Collective ops is
        aborted by: Socket closed`) is said to be stopped by that host's error.

    Raises:
        ValueError: if `reports` is empty.
    """
    if not reports:
        raise ValueError(f"`reports` must hold at least one HostReport. Received: {reports!r}")
    lines = [
        f"{name} {report.host_index}: {report.num_files} shards, {len(report.record_ids)} "
        f"records; {policy_prefix}{_name_collateral(report.policy_counts, reports)}"
        for report in reports
    ]
    read = [set(report.record_ids) for report in reports]
    lines.append(
        f"Records read by more than one {name}: {len(set.intersection(*read))}; "
        f"together: {len(set.union(*read))} of {num_records}."
    )
    return lines


COLLATERAL = "Collective ops is aborted"


def _name_collateral(policy_counts: dict, reports: list[HostReport]) -> dict:
    """Replaces a collective's collateral abort by what caused it: another host's error."""
    named = {}
    for label, value in policy_counts.items():
        if isinstance(value, str) and COLLATERAL in value:
            causes = [
                report.host_index
                for report in reports
                if isinstance(report.policy_counts.get(label), str)
                and COLLATERAL not in report.policy_counts[label]
            ]
            cause = f"host {causes[0]}'s error" if causes else "another host's error"
            value = f"stopped by {cause} (UnavailableError: the shared step was aborted)"
        named[label] = value
    return named


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m utils.multi_host")
    parser.add_argument("--jax", action="store_true", help="a JAX process, not a TF worker")
    parser.add_argument("settings", help="JSON: shard_paths, target_size, num_classes, ...")
    processes.exit_with_owner()
    arguments = parser.parse_args()
    read_part = _read_jax_part if arguments.jax else _read_host_part
    processes.print_json(**read_part(json.loads(arguments.settings)))
