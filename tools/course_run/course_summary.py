"""What the course run prints around the lessons: an estimate before them, a table after.

The estimate scales the lesson times the build recorded (`execution_seconds` in each
solution's metadata, README.md's times) by how fast this machine decodes JPEGs now against
the rate the build measured just before each lesson (`build_machine`), and adds the time to
draw the embedded dataset where it is not cached yet (a few of its images drawn here, as the
build draws them), so that a newcomer can tell a slow machine from a broken run. The run
ends with the estimate beside what it took.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from tools.building import machine
from tools.building.outputs import BUILD_MACHINE, EXECUTION_SECONDS, METADATA_KEY
from utils.lab import data

# The decode probe, taken this many times: the fastest is kept, so that a moment when
# another program took the cores does not multiply the whole estimate.
PROBES = 3
DRAWN_IMAGES = 6  # Images of the embedded dataset drawn to time its build.


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What the run expects to take: its seconds (None: no estimate) and the lines saying so."""

    seconds: float | None
    text: str


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the closing table: what ran, and how long it took (None: it did not run)."""

    name: str
    result: str
    seconds: float | None


def table(rows: list[Row]) -> str:
    """Returns the closing table: one row per lesson (and the dataset build), then the total.

    Example:
        print(course_summary.table([Row("01_tf_data_basics", "ran", 216.0)]))
    """
    name_width = max(len("lesson"), *(len(row.name) for row in rows))
    result_width = max(len("result"), *(len(row.result) for row in rows))
    lines = [f"{'lesson':<{name_width}}  {'result':<{result_width}}  minutes"]
    for row in rows:
        minutes = "-" if row.seconds is None else f"{row.seconds / 60:.1f}"
        lines.append(f"{row.name:<{name_width}}  {row.result:<{result_width}}  {minutes:>7}")
    total = sum(row.seconds for row in rows if row.seconds is not None) / 60
    lines.append(f"{'total':<{name_width}}  {'':<{result_width}}  {total:>7.1f}")
    return "\n".join(line.rstrip() for line in lines)


def recorded_times(solution: Path) -> tuple[float, dict] | None:
    """Returns (seconds, build machine) the build recorded for a solution, or None."""
    recorded = json.loads(solution.read_text())["metadata"].get(METADATA_KEY, {})
    seconds, build_machine = recorded.get(EXECUTION_SECONDS), recorded.get(BUILD_MACHINE)
    if seconds is None or not build_machine:
        return None
    return seconds, build_machine


def seconds_per_drawn_image(count: int = DRAWN_IMAGES) -> float:
    """Draws `count` images of the embedded dataset here, as its build does; seconds each."""
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for index in range(count):
        pixels = data.render_flower(data.CLASSES[index % len(data.CLASSES)], rng)
        Image.fromarray(pixels).save(io.BytesIO(), format="JPEG", quality=90)
    return (time.perf_counter() - started) / count


def estimate(
    solutions: list[Path],
    *,
    datasets_to_build: list[int] = (),
    measure: Callable[[], float] = machine.measure_decode_rate,
    draw: Callable[[], float] = seconds_per_drawn_image,
) -> Estimate:
    """Measures this machine and says how long `solutions`, and the datasets, should take.

    Args:
        solutions: the lessons that will run.
        datasets_to_build: the image counts of the embedded datasets not cached yet.
        measure: returns this machine's decode rate (images/s); taken `PROBES` times.
        draw: returns the seconds one image of the embedded dataset takes to draw here.

    Returns:
        An `Estimate`: two to four lines; one line, measuring nothing, if the build
        recorded no rate.
    """
    recorded = [times for times in map(recorded_times, solutions) if times]
    if not recorded:
        return Estimate(
            None,
            "No estimate: solutions/ does not record the build machine's decode rate "
            "(python -m tools.build_notebooks records it).",
        )
    rate = max(measure() for _ in range(PROBES))
    # The build probes once before each lesson; its fastest probe is its machine's rate, as
    # the fastest of PROBES is this one's. Scaling each lesson by its own probe made the
    # estimate 1.41x too short on the build's own idle machine (probes of 5,970-8,318
    # before the lessons, 10,504 at the run's start; the lessons took the build's times).
    reference = max((built for _, built in recorded), key=lambda b: b["jpeg_decodes_per_second"])
    build_rate = reference["jpeg_decodes_per_second"]
    build_seconds = sum(seconds for seconds, _ in recorded)
    here_seconds = build_seconds * build_rate / rate
    cores = machine.usable_cores()
    lines = [
        f"This machine decodes {rate:,.0f} JPEGs/s now ({cores} cores, the best of "
        f"{PROBES} {machine.PROBE_SECONDS:.0f}-second tests); the build's machine decoded "
        f"{build_rate:,} (the best of its {len(recorded)} tests; {reference['description']}).",
        f"The {len(recorded)} lesson(s): about {here_seconds / 60:.0f} minutes, "
        f"{here_seconds / build_seconds:.1f}x the {build_seconds / 60:.1f} they took in the "
        "build.",
    ]
    total = here_seconds
    if datasets_to_build:
        images = sum(datasets_to_build)
        drawing = images * draw() / cores
        total += drawing
        lines.append(
            f"Drawing the embedded dataset ({images:,} images, {cores} processes): about "
            f"{drawing / 60:.0f} minutes (timed on {DRAWN_IMAGES} of its images here)."
        )
    lines.append(
        f"Expect about {total / 60:.0f} minutes in all; a line is printed at least every 30 s."
    )
    if len(recorded) < len(solutions):
        lines.append(f"({len(solutions) - len(recorded)} lesson(s) record no time: not counted.)")
    return Estimate(total, "\n".join(lines))


def against_estimate(expected: Estimate, seconds: float) -> str:
    """The closing line: what the run took beside what it expected, and their ratio."""
    took = f"The run took {seconds / 60:.1f} minutes"
    if expected.seconds is None:
        return f"{took} (no estimate)."
    return (
        f"{took}; the estimate was {expected.seconds / 60:.1f} "
        f"(took {seconds / expected.seconds:.2f}x the estimate)."
    )
