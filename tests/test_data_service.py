"""Tests of utils/data_service.py: the local tf.data service cluster and its modes."""

import os

import pytest
import tensorflow as tf

from utils import data_service

OFF = tf.data.experimental.service.ShardingPolicy.OFF


def _alive(pid):
    return os.path.exists(f"/proc/{pid}") and "zombie" not in _state(pid)


def _state(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return status.read().lower()
    except FileNotFoundError:
        return "zombie"


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


def test_metered_runs_add_up_cpu_time_and_images_over_calls(capsys):
    dataset = tf.data.Dataset.range(10_000).batch(50)
    runs = data_service.MeteredRuns(
        dataset.repeat(), num_images=200, pids_by_role={"test": os.getpid()}, warmup_images=50
    )
    assert runs() > 0 and runs() > 0
    assert runs.images_seen == 2 * (200 + 50)
    assert runs.cpu_seconds >= 0 and runs.cpu_ms_per_image == 1000 * runs.cpu_seconds / 500
    assert capsys.readouterr().out == ""
