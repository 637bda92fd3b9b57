"""Per-host input sharding: which shards each host reads, and what the hosts read together.

The processes that play the hosts are started by `utils.lessons.scale_out_reading.host_processes`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from utils.lessons.scale_out_reading import processes

if TYPE_CHECKING:
    import numpy as np


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


def collect_reports(
    start: Callable[[int], subprocess.Popen], count: int, *, what: str, timeout_s: float
) -> list[HostReport]:
    """Starts `count` processes with `start(index)`, reads each one's report, stops them all.

    Args:
        start: a function of the process's index that starts it (a `subprocess.Popen`).
        count: the processes to start.
        what: what a process is called in a timeout's or failure's message ("Host").
        timeout_s: the longest wait for each process's report, in seconds.

    Returns:
        One `HostReport` per process, in index order.

    Raises:
        RuntimeError: when a process exits with an error or does not report in time.
    """
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
