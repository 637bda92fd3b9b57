"""The machine a measurement runs on: its CPU, and whether it was idle (psutil's counters)."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import time
from pathlib import Path

import psutil

# More than this share of the cores busy with other processes during a measurement makes
# it "not idle": a tenth of the CPU taken from one side of a ratio moves it by up to
# 0.1, twice the +-0.05 spread the benchmark's target allows.
NOT_IDLE_SHARE = 0.1


def describe_load(
    *, load_before: float, load_after: float, other_cores: float | None, num_cores: int
) -> str:
    """Says whether the machine was idle during a measurement, in one line.

    Args:
        load_before: the 1-minute load average before the measurement.
        load_after: the same after it (it counts the measurement itself).
        other_cores: cores that other processes kept busy on average during it; None
            when unknown, then `load_before` is judged instead.
        num_cores: the machine's cores.

    Returns:
        "The machine was idle: ..." or "The machine was NOT idle: ...", with the loads.
    """
    loads = f"load average {load_before:.2f} before, {load_after:.2f} after"
    if other_cores is None and math.isnan(load_before):
        return "The machine's load is unknown here (no /proc/stat, no load average)."
    if other_cores is None:
        busy, what = load_before, f"the load average before was {load_before:.2f}"
    else:
        busy = other_cores
        what = f"other processes kept {other_cores:.2f} of {num_cores} cores busy"
    if busy > NOT_IDLE_SHARE * num_cores:
        return (
            f"The machine was NOT idle: {what} on average ({loads}); these are not "
            "idle-machine figures."
        )
    return f"The machine was idle: {what} on average ({loads}, which counts this run too)."


def describe_cpu() -> str:
    """Names the CPU the measurements run on, and the cores this process may use.

    Returns:
        E.g. "AMD EPYC 7B13, 2 cores".
    """
    model = platform.processor() or platform.machine()
    try:
        names = [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ]
        model = names[0] if names else model
    except OSError:
        pass
    return f"{model}, {usable_cores()} cores"


def usable_cores() -> int:
    """Counts the cores this process may use.

    Returns:
        Its CPU affinity's size where the OS has one (Linux), else `os.cpu_count()`.
    """
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _busy_cpu_seconds() -> float:
    """Returns the CPU seconds all processes have used since boot (`psutil.cpu_times`)."""
    times = psutil.cpu_times()._asdict()
    # Not busy: idle and waiting for I/O. A guest's time is in `user` and `nice` already.
    not_busy = ("idle", "iowait", "guest", "guest_nice")
    return sum(seconds for name, seconds in times.items() if name not in not_busy)


def _own_cpu_seconds() -> float:
    """Returns the CPU seconds of this process and its children: those it waited for, and
    those still running (a pipeline's own worker processes: Grain's, a tf.data service's)."""
    process = psutil.Process()
    times = process.cpu_times()
    seconds = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # It may end while it is read.
            child_times = child.cpu_times()
            seconds += child_times.user + child_times.system
    return seconds


class LoadWatch:
    """Watches the machine's load during a measurement: `with machine_load.LoadWatch() as load:`.

    On exit it holds the load averages before and after, the cores that this process and
    its children kept busy on average (`own_cores`) and those that other processes kept
    busy (`other_cores`); `summary()` says whether the machine was idle.

    Example:
        with machine_load.LoadWatch() as load:
            runs = comparison.measure_in_turns(candidates, num_images=4000)
        print(load.summary())
    """

    def __enter__(self):
        self.load_before = psutil.getloadavg()[0]
        self._busy, self._own = _busy_cpu_seconds(), _own_cpu_seconds()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        seconds = max(time.perf_counter() - self._start, 1e-9)
        busy, own = _busy_cpu_seconds() - self._busy, _own_cpu_seconds() - self._own
        self.load_after = psutil.getloadavg()[0]
        self.num_cores = os.cpu_count() or 1
        self.own_cores = own / seconds
        self.other_cores = max(0.0, busy - own) / seconds
        return False

    def summary(self) -> str:
        """The `describe_load` line for this measurement.

        Returns:
            Whether the machine was idle while the `with` block ran, in one line.
        """
        return describe_load(
            load_before=self.load_before,
            load_after=self.load_after,
            other_cores=self.other_cores,
            num_cores=self.num_cores,
        )
