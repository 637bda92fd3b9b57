"""Tests of lesson 6's utils: per-host sharding, the local tf.data service cluster, the checks."""

import os
import time

import pytest
import tensorflow as tf

from utils import checks, data_service, processes, sharding

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
    assert [len(part) > 0 for part in parts] == [True] * num_hosts


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


# Checks of lesson 6.
def test_check_host_cores_on_stub_says_todo_1_not_done():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(host_cores_needed\): not done yet"):
        checks.check_host_cores(lambda rate, per_core: ..., todo=1)


def test_check_host_cores_rounding_down_fails_with_the_fix(capsys):
    with pytest.raises(checks.CheckFailed, match=r"expected 4 cores for 1000 images/s .*found 3"):
        checks.check_host_cores(lambda rate, per_core: int(rate // per_core), todo=1)
    checks.check_host_cores(lambda rate, per_core: -(-rate // per_core), todo=1)
    assert (
        capsys.readouterr().out
        == "TODO 1 passed: 4 rates give the whole cores they need, rounded up.\n"
    )


def _records_dataset_fn(num_records, *, shard=True, per_replica=True):
    images = tf.reshape(tf.cast(tf.range(num_records * 3), tf.uint8), [num_records, 1, 1, 3])

    def dataset_fn(input_context):
        dataset = tf.data.Dataset.from_tensor_slices((images, tf.zeros([num_records])))
        if shard:
            dataset = dataset.shard(
                input_context.num_input_pipelines, input_context.input_pipeline_id
            )
        batch = input_context.get_per_replica_batch_size(8) if per_replica else 8
        return dataset.batch(batch)

    return dataset_fn


def test_check_dataset_fn_passes_on_disjoint_complete_parts(capsys):
    checks.check_dataset_fn(_records_dataset_fn(40), todo=2, num_records=40, global_batch_size=8)
    assert capsys.readouterr().out.startswith("TODO 2 passed: 1 host reads all 40 records; 2 hosts")


def test_check_dataset_fn_stub_and_wrong_answers():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(dataset_fn\): not done yet"):
        checks.check_dataset_fn(lambda context: ..., todo=2, num_records=40, global_batch_size=8)
    with pytest.raises(
        checks.CheckFailed, match=r"found 40 of 40 read more than once with 2 hosts"
    ):
        checks.check_dataset_fn(
            _records_dataset_fn(40, shard=False), todo=2, num_records=40, global_batch_size=8
        )
    with pytest.raises(checks.CheckFailed, match=r"expected batches of 4 on each of 2 hosts"):
        checks.check_dataset_fn(
            _records_dataset_fn(40, per_replica=False), todo=2, num_records=40, global_batch_size=8
        )


def test_check_through_service_stub_and_wrong_answers(capsys):
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(through_service\): not done yet"):
        checks.check_through_service(lambda dataset, mode, service: ..., todo=3, num_elements=20)
    with pytest.raises(
        checks.CheckFailed, match=r"2 time\(s\) in mode OFF with 2 workers; found 20"
    ):
        checks.check_through_service(
            lambda dataset, mode, service: dataset, todo=3, num_elements=20
        )


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
