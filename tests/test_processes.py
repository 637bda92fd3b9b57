"""Tests of utils/processes.py: the CPU time of a group of processes."""

import os
import time

from utils import processes


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
