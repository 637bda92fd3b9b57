"""`shards`: the same images in 4, 16 and 64 shards, read just written and once settled."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tools.course_benchmark import growth
from tools.course_benchmark.measure import quietly
from tools.pipeline_profile.variants import NUM_IMAGES, TARGET_SIZE

SETTLE_SECONDS = 30  # The kernel writes dirty pages back after 30 s (dirty_expire_centisecs).


def shards(repeats: int, counts=(4, 16, 64), num_images: int = NUM_IMAGES) -> dict:
    """Reads the images in each shard count right after writing them, and again once settled.

    Each round, for each count in turns: convert the images into that many shards (a
    temporary folder), read one epoch in a process of its own at once ("just written"),
    then `sync`, wait `SETTLE_SECONDS`, and read the same shards again ("settled"). The
    benchmark's shard-count row used to read counts it had just written beside one it
    had not; this separates the two effects: the count itself, and reading fresh writes.
    """
    import shutil
    import statistics
    import tempfile

    from utils import comparison, machine_load
    from utils.lab import conversion, sources

    source = sources.resolve_source("embedded", num_images=num_images)

    def read(directory):  # In a process of its own, as the benchmark reads.
        return growth.read_in_own_process(str(directory))["images_per_second"]

    runs = {count: {"just written": [], "settled": []} for count in counts}
    sizes = {}
    with machine_load.LoadWatch() as load, tempfile.TemporaryDirectory() as scratch:
        for round_index in range(repeats):
            for count in counts if round_index % 2 == 0 else counts[::-1]:
                directory = Path(scratch) / f"{count}-shards"
                quietly(
                    conversion.convert, source, directory, target_size=TARGET_SIZE, num_shards=count
                )
                runs[count]["just written"].append(read(directory))
                os.sync()
                time.sleep(SETTLE_SECONDS)
                runs[count]["settled"].append(read(directory))
                files = list(directory.glob("*.tfrec"))
                sizes[count] = sum(path.stat().st_size for path in files) / len(files) / 1e6
                shutil.rmtree(directory)  # Our own temporary folder.
                print(f"  round {round_index + 1}, {count} shards: {runs[count]}", flush=True)
    lines = [
        f"{num_images} images; {repeats} rounds; images/s, median (min-max)",
        f"{'shards':>6} {'MB/shard':>8} {'just written':>22} {'settled':>22} {'settled/just':>12}",
    ]
    for count in counts:
        fresh, settled = runs[count]["just written"], runs[count]["settled"]
        gain = statistics.median(b / a for a, b in zip(fresh, settled, strict=True))
        lines.append(
            f"{count:>6} {sizes[count]:>8.1f} {comparison.spread(fresh):>22} "
            f"{comparison.spread(settled):>22} {gain:>12.2f}"
        )
    return {"load": load.summary(), "lines": lines, "runs": runs}
