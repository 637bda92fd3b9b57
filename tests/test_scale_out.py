"""Tests of lesson 6's utils: per-host sharding, the local tf.data service cluster."""

import os
import time

import pytest
import tensorflow as tf

from utils import data_service, processes, sharding

OFF = tf.data.experimental.service.ShardingPolicy.OFF


def _alive(pid):
    return os.path.exists(f"/proc/{pid}") and "zombie" not in _state(pid)


def _state(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return status.read().lower()
    except FileNotFoundError:
        return "zombie"


@pytest.mark.parametrize("num_hosts", [1, 2, 3, 16])
def test_shards_for_host_subsets_are_disjoint_and_complete(num_hosts):
    paths = [f"flowers{index:02d}.tfrec" for index in range(16)]
    parts = [
        sharding.shards_for_host(paths, host_index=host, num_hosts=num_hosts)
        for host in range(num_hosts)
    ]
    assert sorted(path for part in parts for path in part) == paths
    assert sum(len(part) for part in parts) == len(paths)
    assert all(part for part in parts)


def test_shards_for_host_fewer_files_than_hosts_names_the_fix():
    with pytest.raises(ValueError, match=r"^1 shard\(s\) for 2 hosts: each host needs at least"):
        sharding.shards_for_host(["a.tfrec"], host_index=0, num_hosts=2)
    with pytest.raises(
        ValueError, match=r"`host_index` must be in 0\.\.1\. Received: host_index=2"
    ):
        sharding.shards_for_host(["a", "b"], host_index=2, num_hosts=2)


def test_local_cluster_rejects_bad_worker_count():
    with pytest.raises(ValueError, match=r"`num_workers` must be a positive integer"):
        data_service.LocalCluster(num_workers=0)


@pytest.fixture(scope="module")
def service_counts():
    """Counts from one cluster: 1 worker, then 2; and its process ids, after it stopped."""
    numbers = tf.data.Dataset.range(50)
    counts = {}
    with data_service.LocalCluster(num_workers=1) as cluster:
        for num_workers in (1, 2):
            if num_workers == 2:
                cluster.add_worker()
            for mode in ("distributed_epoch", OFF):
                distribute = tf.data.experimental.service.distribute(mode, cluster.address)
                counts[(num_workers, str(mode))] = sorted(
                    numbers.apply(distribute).as_numpy_iterator()
                )
        pids = cluster.pids
    return counts, pids


@pytest.mark.parametrize("num_workers", [1, 2])
def test_distributed_epoch_returns_every_record_once(service_counts, num_workers):
    counts, _ = service_counts
    assert counts[(num_workers, "distributed_epoch")] == list(range(50))


def test_off_mode_returns_each_record_once_per_worker(service_counts):
    counts, _ = service_counts
    assert counts[(1, str(OFF))] == list(range(50))
    assert counts[(2, str(OFF))] == sorted(list(range(50)) * 2)


def test_local_cluster_leaves_no_process(service_counts):
    _, pids = service_counts
    assert len(pids) == 3
    assert [pid for pid in pids if _alive(pid)] == []


def test_shards_with_latency_reads_each_record_once(tmp_path):
    paths = []
    for index in range(3):
        path = str(tmp_path / f"shard{index}.tfrec")
        with tf.io.TFRecordWriter(path) as writer:
            for record in range(4):
                writer.write(f"{index}-{record}".encode())
        paths.append(path)
    records = data_service.shards_with_latency(paths, latency_ms=1, num_parallel_reads=2)
    assert len(sorted(records.as_numpy_iterator())) == 12
    assert len(set(records.as_numpy_iterator())) == 12


def test_run_jax_processes_read_disjoint_parts_that_together_are_complete(write_small_shards):
    pytest.importorskip("jax", reason="the JAX per-process path needs jax (requirements-dev.txt)")
    paths = write_small_shards(4)
    reports = sharding.run_jax_processes(
        paths, num_processes=2, target_size=32, num_classes=5, global_batch_size=8
    )
    assert [(report.host_index, report.num_files) for report in reports] == [(0, 2), (1, 2)]
    first, second = (set(report.record_ids) for report in reports)
    assert first & second == set()
    assert len(first | second) == sum(len(report.record_ids) for report in reports) == 60
    keras_split = "keras distribute_dataset (all files)"
    assert sum(report.policy_counts[keras_split] for report in reports) == 60


def test_cpu_use_counts_this_process_busy_and_names_every_process():
    with processes.CpuUse({"this test": os.getpid(), "parent": os.getppid()}) as cpu:
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
    assert list(cpu.busy_cores) == ["this test", "parent"]
    # CPU seconds, not the share of the wall time: other programs may share the cores.
    assert 0.25 <= cpu.busy_cores["this test"] * cpu.seconds <= 0.3 + cpu.seconds  # Ticks of 10 ms.
    assert cpu.cpu_seconds >= cpu.busy_cores["this test"] * cpu.seconds
    assert cpu.summary().startswith(
        f"CPU cores busy: this test {cpu.busy_cores['this test']:.2f}, parent "
    )
    assert cpu.summary().endswith(f"; together {cpu.total:.2f} of {os.cpu_count()}.")


def test_jax_missing_gives_the_reason_and_the_install_command(monkeypatch):
    monkeypatch.setattr(sharding.importlib.util, "find_spec", lambda name: None)
    assert sharding.jax_missing() == "JAX is not installed (pip install jax)."
