"""The machine a benchmark or build ran on: one line describing it, and its JPEG decode rate."""

from __future__ import annotations

import io
import platform
import threading
import time

from utils.machine_load import describe_cpu, usable_cores

# How long `measure_decode_rate` decodes: the course run's opening estimate waits this long.
PROBE_SECONDS = 2.0


def describe_machine() -> str:
    """Describes this machine in one line.

    Returns:
        The CPU model, the number of cores this process may use (`machine_load.describe_cpu`),
        and the Python version.
    """
    return f"{describe_cpu()}, Python {platform.python_version()}"


def probe_jpeg() -> bytes:
    """Returns the JPEG `measure_decode_rate` decodes: 256 x 256 px, quality 90, always the same."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:256, 0:256]
    pixels = np.stack([(x + y) % 256, (2 * x) % 256, (3 * y + x * y // 64) % 256], axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def measure_decode_rate(seconds: float = PROBE_SECONDS) -> float:
    """Decodes `probe_jpeg()` with Pillow on every usable core for `seconds`; returns images/s.

    Pillow lets go of the GIL while it decodes, so one thread per core keeps every core
    busy; what other programs take of the cores shows in the rate.
    """
    from PIL import Image

    jpeg = probe_jpeg()
    counts = [0] * usable_cores()
    started = time.perf_counter()
    deadline = started + seconds

    def decode(index: int) -> None:
        while time.perf_counter() < deadline:
            Image.open(io.BytesIO(jpeg)).load()
            counts[index] += 1

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(len(counts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def build_machine() -> dict:
    """What the build records in each solution's metadata about the machine it runs on.

    Returns:
        {"description": `describe_machine()`, "jpeg_decodes_per_second": a whole number}.
    """
    return {
        "description": describe_machine(),
        "jpeg_decodes_per_second": round(measure_decode_rate()),
    }
