"""Limits per lesson (time, disk): from its solution's own run in the sandbox, or the command line.

Takes a lesson, its lab and the `Options`; gives its `Limits`. Each cell gets
`CELL_MULTIPLE` times its solution time (at least `CELL_FLOOR` s), the submission
`SUBMISSION_MULTIPLE` times the solution's total (at least `SUBMISSION_FLOOR` s); what a
submission may write in `/tmp` and in its work folder, `workfolder.DISK_MULTIPLE` times
what the solution wrote at most (at least `model.TMP_FLOOR` and `WORK_FLOOR`), or
`--disk-gb`. The solution's run (times, bytes) is cached in the data cache (`LIMITS_FILE`),
per lesson source and parameters.
"""

from __future__ import annotations

import hashlib
import json

import nbformat

from tools.building.variants import split_variants, to_text
from tools.grading.kernel.workfolder import disk_limits
from tools.grading.model import REPO_ROOT, Limits, Options
from tools.grading.submission.prepare import grader_parameters, judged_cells, lab_parameters
from tools.grading.submission.restore import restore_protected_cells
from tools.grading.submission.run import keras_environment, run_prepared
from utils.lab import data

CELL_FLOOR, CELL_MULTIPLE = 30, 10
SUBMISSION_FLOOR, SUBMISSION_MULTIPLE = 120, 5
LIMITS_FILE = "grader-limits.json"  # In the data cache: each lesson's solution run.


def fixed_limits(options: Options, disk_gb: float | None = None) -> Limits | None:
    """The limits `--cell-timeout` and `--timeout` set, or None to measure them; the disk's
    from `disk_gb`, else the floors."""
    if options.cell_timeout is None and options.timeout is None:
        return None
    cell = options.cell_timeout or 300
    total = options.timeout or 1200
    disk, disk_why = disk_limits(None, disk_gb)
    why = (
        f"--cell-timeout {cell:g} s per cell, --timeout {total:g} s per submission; disk {disk_why}"
    )
    return Limits(cells={}, added=cell, total=total, why=why, disk=disk)


def _solution_run(lesson, solution, lab, parameters, options: Options) -> dict:
    """The solution's run in the sandbox (cached when clean): {"seconds": per cell id,
    "written": the most bytes seen in /tmp and in the work folder}."""
    environment = keras_environment(lab)  # Lab 4: timed on the backend it is graded on.
    digest = hashlib.sha256(
        (to_text(solution) + json.dumps([parameters, environment], sort_keys=True)).encode()
    ).hexdigest()[:16]
    store = (options.cache or data.default_cache_dir()) / LIMITS_FILE
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    found = known.get(lesson, {}).get(digest)
    if isinstance(found, dict) and "seconds" in found:
        return found
    print(f"Timing {lesson}'s solution in the sandbox, for its time limits ...", flush=True)
    restored, _ = restore_protected_cells(solution, lab)
    generous = Limits(cells={}, added=900, total=3600)
    prepared, plan = judged_cells(restored, lab, parameters, generous.total)
    results, verdicts, written = run_prepared(
        prepared, generous, options, f"time-{lesson}", plan, environment
    )
    bad = [r.error for r in results if r.status != "ok"]
    bad += [f"TODO {n}: {v.message}" for n, v in sorted(verdicts.items()) if not v.passed]
    if bad:
        print(
            f"WARNING: {lesson}'s solution did not run cleanly ({bad[0]}); "
            "limits from what did run",
            flush=True,
        )
    seconds = {
        cell.get("id", ""): r.seconds for (cell, _), r in zip(prepared, results, strict=True)
    }
    run = {"seconds": seconds, "written": written}
    known.setdefault(lesson, {})[digest] = run
    if not bad:
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(known, indent=1))
    return run


def measure_limits(
    lesson: str, lab: nbformat.NotebookNode, options: Options, *, disk_gb: float | None = None
) -> Limits:
    """Returns a lesson's limits from its solution's run in the sandbox (cached); `disk_gb`
    sets the disk's instead."""
    fixed = fixed_limits(options, disk_gb)
    if fixed is not None:
        return fixed
    source = REPO_ROOT / "notebooks" / f"{lesson}.py"
    solution = split_variants(source)[1] if source.exists() else None
    if solution is None:
        disk, disk_why = disk_limits(None, disk_gb)
        return Limits(
            cells={},
            added=300,
            total=1200,
            disk=disk,
            why=f"no lesson source here: 300 s per cell, 1200 s in all; disk {disk_why}",
        )
    parameters = lab_parameters(lab, grader_parameters(lesson))
    run = _solution_run(lesson, solution, lab, parameters, options)
    seconds = run["seconds"]
    disk, disk_why = disk_limits(run["written"], disk_gb)
    cells = {cell_id: max(CELL_FLOOR, CELL_MULTIPLE * t) for cell_id, t in seconds.items()}
    total_solution = sum(seconds.values())
    total = max(SUBMISSION_FLOOR, SUBMISSION_MULTIPLE * total_solution)
    added = max(cells.values(), default=CELL_FLOOR)
    why = (
        f"its solution ran in {total_solution:.0f} s: each cell {CELL_MULTIPLE}x its time "
        f"(at least {CELL_FLOOR} s; up to {added:.0f} s), {total:.0f} s in all "
        f"({SUBMISSION_MULTIPLE}x, at least {SUBMISSION_FLOOR} s); disk {disk_why}"
    )
    return Limits(cells=cells, added=added, total=total, why=why, disk=disk)
