"""Whether the machine was idle during a measurement: load averages and /proc/stat."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

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
            when unknown (no /proc/stat), then `load_before` is judged instead.
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


def _busy_cpu_seconds() -> float | None:
    """Returns the CPU seconds all processes have used since boot (/proc/stat), or None."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _load_average() -> float:
    """Returns the 1-minute load average; NaN where the system has none (Windows)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


def _own_cpu_seconds() -> float:
    import resource  # Unix only; /proc/stat, which this goes with, is Linux only.

    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class LoadWatch:
    """Watches the machine's load during a measurement: `with machine_load.LoadWatch() as load:`.

    On exit it holds the load averages before and after, and the cores that other
    processes (not this one or its children) kept busy on average; `summary()` says
    whether the machine was idle.

    Example:
        with machine_load.LoadWatch() as load:
            runs = comparison.measure_in_turns(candidates, num_images=4000)
        print(load.summary())
    """

    def __enter__(self):
        self.load_before = _load_average()
        self._busy = _busy_cpu_seconds()
        self._own = _own_cpu_seconds() if self._busy is not None else 0.0
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        seconds = max(time.perf_counter() - self._start, 1e-9)
        busy = _busy_cpu_seconds()
        self.load_after = _load_average()
        self.num_cores = os.cpu_count() or 1
        self.other_cores = None
        if busy is not None and self._busy is not None:
            own = _own_cpu_seconds() - self._own
            self.other_cores = max(0.0, (busy - self._busy) - own) / seconds
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
