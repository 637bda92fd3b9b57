"""Tests of lesson 7's multi_host.py and host_processes.py: each host reads its own shards."""

import pytest

from tests.conftest import REPO_ROOT
from utils.lessons.scale_out_reading import host_processes, multi_host


@pytest.mark.parametrize("num_hosts", [1, 2, 3, 16])
def test_shards_for_host_subsets_are_disjoint_and_complete(num_hosts):
    paths = [f"flowers{index:02d}.tfrec" for index in range(16)]
    parts = [
        multi_host.shards_for_host(paths, host_index=host, num_hosts=num_hosts)
        for host in range(num_hosts)
    ]
    assert sorted(path for part in parts for path in part) == paths
    assert sum(len(part) for part in parts) == len(paths)
    assert [len(part) > 0 for part in parts] == [True] * num_hosts


def test_shards_for_host_fewer_files_than_hosts_names_the_fix():
    with pytest.raises(ValueError, match=r"^1 shard\(s\) for 2 hosts: each host needs at least"):
        multi_host.shards_for_host(["a.tfrec"], host_index=0, num_hosts=2)
    with pytest.raises(
        ValueError, match=r"`host_index` must be in 0\.\.1\. Received: host_index=2"
    ):
        multi_host.shards_for_host(["a", "b"], host_index=2, num_hosts=2)


def test_run_jax_processes_read_disjoint_parts_that_together_are_complete(write_small_shards):
    pytest.importorskip("jax", reason="the JAX per-process path needs jax (requirements-dev.txt)")
    paths = write_small_shards(4)
    reports = host_processes.run_jax_processes(
        paths, num_processes=2, target_size=32, num_classes=5, global_batch_size=8
    )
    assert [(report.host_index, report.num_files) for report in reports] == [(0, 2), (1, 2)]
    first, second = (set(report.record_ids) for report in reports)
    assert first & second == set()
    assert len(first | second) == sum(len(report.record_ids) for report in reports) == 60
    keras_split = "keras distribute_dataset (all files)"
    assert sum(report.policy_counts[keras_split] for report in reports) == 60


def test_jax_missing_gives_the_reason_and_the_install_command(monkeypatch):
    monkeypatch.setattr(host_processes.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(host_processes.sys, "executable", "/course/.venv/bin/python")
    assert host_processes.jax_missing() == (
        "JAX is not installed here: /course/.venv/bin/python -m pip install 'jax[cpu]==0.10.2'."
    )
    pins = (REPO_ROOT / "requirements-optional.txt").read_text().splitlines()
    assert host_processes.JAX_REQUIREMENT in pins


def test_describe_reads_names_each_process_and_the_overlap():
    reports = [
        multi_host.HostReport(0, 2, ["a", "b", "c"], {"FILE": 3}),
        multi_host.HostReport(1, 2, ["c", "d"], {"FILE": 2}),
    ]
    lines = multi_host.describe_reads(
        reports, name="host", num_records=5, policy_prefix="auto-shard "
    )
    assert lines == [
        "host 0: 2 shards, 3 records; auto-shard {'FILE': 3}",
        "host 1: 2 shards, 2 records; auto-shard {'FILE': 2}",
        "Records read by more than one host: 1; together: 4 of 5.",
    ]
    with pytest.raises(ValueError, match=r"at least one HostReport. Received: \[\]"):
        multi_host.describe_reads([], name="host", num_records=5)


def test_describe_reads_names_the_host_whose_error_aborted_the_others():
    failed = "InvalidArgumentError: Could not apply FILE based sharding"
    reports = [
        multi_host.HostReport(0, 1, ["a"], {"FILE, 1 file": failed}),
        multi_host.HostReport(
            1,
            1,
            ["b"],
            {"FILE, 1 file": "UnavailableError: Collective ops is aborted by: Socket closed"},
        ),
    ]
    lines = multi_host.describe_reads(reports, name="host", num_records=2)
    assert lines[0] == f"host 0: 1 shards, 1 records; {{'FILE, 1 file': '{failed}'}}"
    assert lines[1] == (
        "host 1: 1 shards, 1 records; {'FILE, 1 file': \"stopped by host 0's error "
        '(UnavailableError: the shared step was aborted)"}'
    )
