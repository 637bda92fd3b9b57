"""What the course run prints around the lessons: an estimate before them, a table after.

The estimate scales the lesson times the build recorded (`execution_seconds` in each
solution's metadata, README.md's times) by how fast this machine decodes JPEGs now against
the rate the build measured just before each lesson (`build_machine`), so that a newcomer
can tell a slow machine from a broken run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from tools import machine
from tools.build_outputs import BUILD_MACHINE, EXECUTION_SECONDS, METADATA_KEY


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


def estimate(
    solutions: list[Path], *, measure: Callable[[], float] = machine.measure_decode_rate
) -> str:
    """Measures this machine's JPEG decode rate and says how long `solutions` should take here.

    Args:
        solutions: the lessons that will run.
        measure: returns this machine's decode rate (images/s); `PROBE_SECONDS` of work.

    Returns:
        Two or three lines; one line, measuring nothing, if the build recorded no rate.
    """
    recorded = [times for times in map(recorded_times, solutions) if times]
    if not recorded:
        return (
            "No estimate: solutions/ does not record the build machine's decode rate "
            "(python -m tools.build_notebooks records it)."
        )
    rate = measure()
    build_seconds = sum(seconds for seconds, _ in recorded)
    here_seconds = sum(
        seconds * built["jpeg_decodes_per_second"] / rate for seconds, built in recorded
    )
    reference = recorded[0][1]
    lines = [
        f"This machine decodes {rate:,.0f} JPEGs/s now ({machine.usable_cores()} cores, a "
        f"{machine.PROBE_SECONDS:.0f}-second test); the build's machine decoded "
        f"{reference['jpeg_decodes_per_second']:,} ({reference['description']}).",
        f"Expect about {here_seconds / 60:.0f} minutes for these {len(recorded)} lesson(s), "
        f"{here_seconds / build_seconds:.1f}x the {build_seconds / 60:.1f} they took in the "
        "build; a line is printed at least every 30 s.",
    ]
    if len(recorded) < len(solutions):
        lines.append(f"({len(solutions) - len(recorded)} lesson(s) record no time: not counted.)")
    return "\n".join(lines)
