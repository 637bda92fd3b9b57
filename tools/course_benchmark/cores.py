"""The course pipeline and the decode ceiling on 1, 2, 4, ... cores, each in a pinned process.

TensorFlow sizes its thread pools from the cores its process may use when it starts, so
each measurement runs in a child process (`python -m tools.benchmark --on-cores N`) that
pins itself (`os.sched_setaffinity`) before it imports TensorFlow, and reports how many
cores it was left with. In each of `repeats` rounds one child runs per core count (in
order, then reversed the next round); each times the ceiling and the course pipeline at
0 ms once, in turns, as the headline does. The per-core rate is images/s over cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tools.course_benchmark.settings import (
    BATCH_SIZE,
    CEILING,
    COURSE,
    LATENCIES_MS,
    REPO_ROOT,
    Row,
    counts_up_to,
)
from utils import machine_load


def pin(num_cores: int) -> int:
    """Pins this process to the first `num_cores` of the cores it may use; returns its count."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= num_cores <= len(allowed):
        raise ValueError(
            f"`num_cores` must be between 1 and the {len(allowed)} cores this process may use. "
            f"Received: num_cores={num_cores}"
        )
    os.sched_setaffinity(0, allowed[:num_cores])
    return machine_load.usable_cores()


def measure_on_cores(num_cores: int, settings: dict, *, reverse: bool = False) -> dict:
    """In this process, before TensorFlow is imported: pins it, times the ceiling and the course.

    Args:
        num_cores: cores to pin this process to.
        settings: the benchmark's settings (`timed`, `num_images`).
        reverse: time the course pipeline first.

    Returns:
        `{"cores": the cores this process then had, "runs": {label: images/s},
        "cpu_us_per_image": {label: microseconds}}`.
    """
    if "tensorflow" in sys.modules:
        raise RuntimeError("Pin before TensorFlow starts: run this in a fresh process.")
    cores = pin(num_cores)
    from tools.course_benchmark.measure import quietly, rate
    from tools.course_benchmark.pipelines import benchmark_data, course_dataset
    from utils import comparison, pipeline, storage

    _, shard_set, jpegs = benchmark_data(settings)
    local = storage.SimulatedStorage(latency_ms=LATENCIES_MS[0])
    rows = [CEILING, Row(COURSE, LATENCIES_MS[0])]
    makers = [
        lambda: pipeline.decode_ceiling_dataset(jpegs, batch_size=BATCH_SIZE),
        lambda: course_dataset(shard_set.paths, len(shard_set.class_names), local),
    ]
    cpu = {row.label: [] for row in rows}
    rates = {
        row.label: rate(make, settings["timed"], cpu[row.label])
        for row, make in zip(rows, makers, strict=True)
    }
    if reverse:
        rates = dict(reversed(rates.items()))
    measured = quietly(comparison.measure_in_turns, rates, repeats=1)
    return {
        "cores": cores,
        "runs": {label: result.median for label, result in measured.items()},
        "cpu_us_per_image": {label: seconds[0] * 1e6 for label, seconds in cpu.items()},
    }


def by_cores(settings: dict, *, quick: bool) -> dict:
    """Runs `measure_on_cores` in a child per core count and round; returns `Row` -> figures.

    With `quick`, 1 core only: one child a round (each starts TensorFlow: 18 s in CI), the
    rows' structure and a real pin, not the growth with cores.

    Raises:
        RuntimeError: if a child fails, or reports other cores than it was pinned to.
    """
    from utils import comparison

    counts = counts_up_to(machine_load.usable_cores())
    if quick:
        counts = counts[:1]
    runs: dict[Row, list] = {}
    cpu: dict[Row, list] = {}
    print(
        f"  {len(counts)} core counts ({counts}), a process each, {settings['repeats']} rounds",
        flush=True,
    )
    for round_index in range(settings["repeats"]):
        for count in counts if round_index % 2 == 0 else counts[::-1]:
            command = [sys.executable, "-m", "tools.benchmark", "--on-cores", str(count)]
            command += ["--quick"] * quick + ["--reverse"] * (round_index % 2)
            done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
            child = json.loads(done.stdout.strip().splitlines()[-1])
            if child["cores"] != count:
                raise RuntimeError(f"Pinned to {count} cores, the child had {child['cores']}.")
            for row in (CEILING, Row(COURSE, LATENCIES_MS[0])):
                pinned = row._replace(cores=count)
                runs.setdefault(pinned, []).append(child["runs"][row.label])
                cpu.setdefault(pinned, []).append(child["cpu_us_per_image"][row.label])
    results = {}
    for row, values in sorted(
        runs.items(), key=lambda item: (item[0].cores, item[0].pipeline != CEILING.pipeline)
    ):
        result = comparison.RepeatedResult(row.label, tuple(values))
        results[row] = {
            "median": result.median,
            "min": result.minimum,
            "max": result.maximum,
            "runs": values,
            "cpu_us_per_image": cpu[row],
        }
    return results


def cores_lines(results: dict) -> list[str]:
    """Per core count: course / ceiling and the per-core rates; then how each grew with cores."""
    from tools.course_benchmark.report import in_turns, ratio_text

    counts = sorted({row.cores for row in results if row.cores})
    lines = []
    for count in counts:
        ceiling, course = CEILING._replace(cores=count), Row(COURSE, LATENCIES_MS[0], count)
        lines.append(
            f"On {count} core{'s' if count > 1 else ''}: {COURSE} / decode ceiling "
            f"{ratio_text(in_turns(results, course, ceiling))}; per core: ceiling "
            f"{results[ceiling]['median'] / count:,.0f}, {COURSE} "
            f"{results[course]['median'] / count:,.0f} images/s"
        )
    if len(counts) > 1:
        first, last = counts[0], counts[-1]
        lines.append(
            f"From {first} to {last} cores (x{last / first:g}), within each round: "
            + "; ".join(
                f"{name} x{ratio_text(in_turns(results, row._replace(cores=last), row))}"
                for name, row in (
                    ("ceiling", CEILING._replace(cores=first)),
                    (COURSE, Row(COURSE, LATENCIES_MS[0], first)),
                )
            )
        )
    return lines
