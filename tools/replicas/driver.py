"""Runs notebooks with papermill in a replica's own Python: `python driver.py RUNS.json`.

RUNS.json is a list of {"name", "input", "output", "cwd", "parameters", "env"}; each
notebook runs in the kernel "replica" with `env` added to this process's environment.
One JSON line per run is printed: {"name", "seconds", "error"} (the error's name, or null).
Imports nothing of the course: the replica has only its platform's packages and papermill.
"""

import json
import os
import sys
import time

import papermill
from papermill.exceptions import PapermillExecutionError

KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]  # As tools.building.lesson_parameters.


def main(path: str) -> None:
    base = dict(os.environ)
    for run in json.loads(open(path).read()):
        os.environ.clear()
        os.environ.update({**base, **run["env"]})
        started, error = time.monotonic(), None
        try:
            papermill.execute_notebook(
                run["input"],
                run["output"],
                parameters=run["parameters"],
                kernel_name="replica",
                cwd=run["cwd"],
                progress_bar=False,
                extra_arguments=KERNEL_ARGUMENTS,
            )
        except PapermillExecutionError as failed:
            error = failed.ename
        except Exception as failed:  # The kernel died or would not start: say so, go on.
            error = f"{type(failed).__name__}: {failed}"[:300]
        seconds = round(time.monotonic() - started, 1)
        print(json.dumps({"name": run["name"], "seconds": seconds, "error": error}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
