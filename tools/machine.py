"""One line describing the machine a benchmark ran on: CPU model, usable cores, Python."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def describe_machine() -> str:
    """Describes this machine in one line.

    Returns:
        The CPU model, the number of cores this process may use, and the Python version.
    """
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores, Python {platform.python_version()}"
