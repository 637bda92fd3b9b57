"""Runs notebooks with papermill two at a time, each in a Python process of its own.

A lesson's run is one kernel that waits much of its time (on its start-up, the simulated
storage, its worker processes), so two at a time keep a 2-core machine busy where one
leaves a core idle. A run whose own checks time something (lesson 5's idle time per step)
is run alone (`Job.alone`), before the others. Each run gets an empty folder of its own as
`TMPDIR`; a run that stops at a cell's error returns that error as papermill raised it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO_ROOT
from tools.building.kernels import KERNEL_OPTIONS
from tools.building.outputs import SOLUTION_ENVIRONMENTS

AT_ONCE = 2  # Runs at a time: the CI machine's cores.
ERROR_LINE = "PAPERMILL_EXECUTION_ERROR "  # What the driver prints before a cell's error.
# Runs one job (argv[1], JSON) with papermill; prints the cell's error where one stops it.
DRIVER = f"""
import json, sys
job = json.loads(sys.argv[1])
sys.path.insert(0, job["repo"])  # For the kernel manager (tools.building.kernels).
import papermill
from papermill.exceptions import PapermillExecutionError
try:
    papermill.execute_notebook(job["input"], job["output"], parameters=job["parameters"],
        cwd=job["cwd"], progress_bar=False, **job["options"])
except PapermillExecutionError as error:
    fields = {{"ename": error.ename, "evalue": error.evalue, "source": error.source}}
    print({ERROR_LINE!r} + json.dumps(fields), flush=True)
"""


@dataclass(frozen=True)
class CellError:
    """The error that stopped a run: its cell's source and what the cell raised."""

    ename: str
    evalue: str
    source: str

    def __str__(self) -> str:
        return f"{self.ename}: {self.evalue}\nin the cell:\n{self.source}"


@dataclass(frozen=True)
class Job:
    """One notebook to run: papermill's input, output, parameters and working folder, the
    run's `TMPDIR`, papermill's other options (`kernel_name`, ...; KERNEL_OPTIONS' unless
    given)."""

    input: Path
    output: Path
    parameters: dict
    cwd: Path
    tmpdir: Path
    options: dict = field(default_factory=dict)
    alone: bool = False


def execute(job: Job) -> CellError | None:
    """Runs `job` in a new Python process; returns the error of the cell it stopped at, or
    None. Raises RuntimeError where papermill itself failed (no output notebook)."""
    spec = {
        "input": str(job.input),
        "output": str(job.output),
        "parameters": job.parameters,
        "cwd": str(job.cwd),
        "options": {**KERNEL_OPTIONS, **job.options},
        "repo": str(REPO_ROOT),
    }
    # A lesson runs in the environment the build gives its solution (lab 4: Keras on JAX
    # over 8 simulated devices), so that a fresh run's checked outputs match the committed.
    lesson = job.input.name.split(".")[0]
    built_in = SOLUTION_ENVIRONMENTS.get(f"notebooks/{lesson}.py", {})
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        env={**os.environ, **built_in, "TMPDIR": str(job.tmpdir)},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"papermill could not run {job.input}:\n{result.stderr[-3000:]}")
    errors = [line for line in result.stdout.splitlines() if line.startswith(ERROR_LINE)]
    return CellError(**json.loads(errors[-1][len(ERROR_LINE) :])) if errors else None


def execute_all(jobs: dict[str, Job]) -> dict[str, CellError | None]:
    """Runs the jobs: those marked `alone` one by one, then the others `AT_ONCE` at a time.

    Returns:
        Each job's name and what `execute` returned for it.
    """
    results = {name: execute(job) for name, job in jobs.items() if job.alone}
    together = {name: job for name, job in jobs.items() if not job.alone}
    with concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        futures = {name: pool.submit(execute, job) for name, job in together.items()}
        results.update({name: future.result() for name, future in futures.items()})
    return results
