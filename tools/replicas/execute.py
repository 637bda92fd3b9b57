"""Runs a replica's notebooks: each alone in an empty folder, HOME empty, the network cut.

The replica's venv is used through a copy of hard links, so what a set-up installs there
(TensorFlow, on a platform without it) leaves the cached venv as it was. The first run
may reach the package index (the set-up installs what the platform lacks, as a learner's
first lab does; pip's cache is kept beside the venvs); the package set before and after it
is compared with what the set-up said it moved. The other runs find it installed and run
under bubblewrap with no network (`bwrap --unshare-net`), where bwrap can run.

It also runs the grader there: `internals_check.py` in the replica's Python
(`internals_rows`), and `tools.grade` on labs' solutions and blank labs in a working copy
(`grade_replica`: each solution full marks, each blank lab zero).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools.building.setup_cell import SETUP_TAG
from tools.building.variants import split_variants
from tools.replicas import runs as planned
from tools.replicas.environments import working_copy

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("driver.py")
# As utils.lab.runtime.installed_versions, whose names the set-up's line uses.
VERSIONS = (
    "import importlib.metadata as m, json\n"
    "found = {}\n"
    "for d in m.distributions():\n"
    "    found.setdefault(d.metadata['Name'], d.version)\n"
    "found.pop(None, None)\n"
    "print(json.dumps(found))"
)
MOVED_LINE = "pip changed installed packages: "


@dataclasses.dataclass
class Result:
    """One row of the table."""

    replica: str
    what: str
    passed: bool
    minutes: float
    detail: str = ""


def bwrap_works() -> bool:
    """Whether bubblewrap can cut the network here."""
    probe = ["bwrap", "--ro-bind", "/", "/", "--unshare-net", "true"]
    try:
        return subprocess.run(probe, capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def versions(python: Path) -> dict[str, str]:
    """Returns {name: version} of what `python` has installed."""
    result = subprocess.run([str(python), "-c", VERSIONS], capture_output=True, text=True)
    return json.loads(result.stdout)


def moves(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Returns "name old -> new" for each package that changed or went (as the set-up says)."""
    return [f"{n} {v} -> {after.get(n, 'gone')}" for n, v in before.items() if after.get(n) != v]


def setup_printed(notebook: nbformat.NotebookNode) -> str:
    """Returns what the notebook's set-up cell printed."""
    (cell,) = [c for c in notebook.cells if SETUP_TAG in c.metadata.get("tags", [])]
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _notebook(run: planned.Run) -> nbformat.NotebookNode:
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{run.lesson}.py")
    return lab if run.variant == "lab" else solution


def _drive(python: Path, work: Path, specs: list[dict], environment: dict, sandbox: bool):
    """Runs the driver over `specs`; returns {name: (seconds, error)}."""
    writable = [
        work,
        *{Path(s["env"][planned.DATA_CACHE]) for s in specs if planned.DATA_CACHE in s["env"]},
    ]
    for folder in writable:
        folder.mkdir(parents=True, exist_ok=True)
    path = work / f"runs-{specs[0]['name']}.json"
    path.write_text(json.dumps(specs))
    command = [str(python), str(DRIVER), str(path)]
    if sandbox:  # Read-only root, the work and data folders writable, loopback alone.
        binds = [arg for folder in writable for arg in ("--bind", str(folder), str(folder))]
        command = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            *binds,
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            *command,
        ]
    env = ["env", "-i", *(f"{k}={v}" for k, v in environment.items())]
    result = subprocess.run([*env, *command], capture_output=True, text=True)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    found = {line["name"]: (line["seconds"], line["error"]) for line in lines}
    for spec in specs:  # The driver itself died: every run it did not report failed.
        found.setdefault(spec["name"], (0.0, f"no result: {result.stderr.strip()[-300:]}"))
    return found


def run_replica(name: str, venv: Path, runs: list[planned.Run], work: Path, cache: Path):
    """Runs `runs` in a working copy of `venv` under `work`; returns the table's rows.

    `cache` (the venvs' folder) keeps pip's cache and, for the runs that ask for it
    (`runs.DATA_CACHE`), the course's data cache of this replica, across runs.
    """
    work.mkdir(parents=True)
    python = working_copy(venv, work / "venv") / "bin" / "python"
    kernels = work / "kernels" / "kernels" / "replica"
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "replica", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    environment = {
        "PATH": f"{python.parent}:/usr/bin:/bin",
        "JUPYTER_PATH": str(work / "kernels"),
        "TPU_SPEED_PIPELINES_NO_PROGRESS": "1",
        "PIP_CACHE_DIR": str(cache / "pip"),
        "LANG": "C.UTF-8",
    }
    specs = []
    for run in runs:
        folder, home, tmp = (work / f"{run.name}{end}" for end in ("", "-home", "-tmp"))
        for made in (folder, home, tmp):
            made.mkdir()
        nbformat.write(_notebook(run), folder / f"{run.lesson}.ipynb")
        env = {"HOME": str(home), "TMPDIR": str(tmp), **run.env}
        if planned.DATA_CACHE in env:
            env[planned.DATA_CACHE] = str(cache / f"data-{name}")
        specs.append(
            {
                "name": run.name,
                "input": str(folder / f"{run.lesson}.ipynb"),
                "output": str(work / f"{run.name}.out.ipynb"),
                "cwd": str(folder),
                "parameters": run.parameters,
                "env": env,
            }
        )
    before = versions(python)
    found = _drive(python, work, specs[:1], environment, sandbox=False)
    after = versions(python)
    if len(specs) > 1:
        found |= _drive(python, work, specs[1:], environment, sandbox=bwrap_works())
    rows = []
    for run, spec in zip(runs, specs, strict=True):
        seconds, error = found[run.name]
        output = Path(spec["output"])
        reason = planned.verdict(run, nbformat.read(output, 4)) if output.exists() else error
        rows.append(Result(name, run.what, reason is None, seconds / 60, reason or ""))
    rows.insert(1, _setup_row(name, runs[0], Path(specs[0]["output"]), before, after))
    return rows


def _setup_row(name, run, output, before, after) -> Result:
    """The row that says whether the first set-up moved an installed package unsaid."""
    moved = moves(before, after)
    added = sorted(set(after) - set(before))
    printed = setup_printed(nbformat.read(output, 4)) if output.exists() else ""
    said = re.findall(rf"^{MOVED_LINE}(.*)\.$", printed, re.MULTILINE)
    told = said[0].split(", ") if said else []
    what = f"{run.name}'s set-up: {len(added)} packages added, moved: {', '.join(moved) or 'none'}"
    ok = output.exists() and sorted(told) == sorted(moved)
    detail = "" if ok else f"the set-up said it moved {told or 'nothing'}"
    return Result(name, what, ok, 0.0, detail)


def timed(function, *args):
    """Returns (function(*args), minutes it took)."""
    started = time.monotonic()
    value = function(*args)
    return value, (time.monotonic() - started) / 60


# What the grader needs besides a platform's packages (tools.grade builds labs with
# jupytext): pure Python, installed into the grading copy only, with no dependency moved.
GRADER_PACKAGES = ("jupytext==1.19.6", "mdit-py-plugins==0.7.0")
GRADE_LIMITS = ["--cell-timeout", "400", "--timeout", "900", "-j", "2"]  # As tests/test_grade.


def check_internals(python: Path) -> list[dict]:
    """Runs `internals_check.py` in `python`, HOME and TMPDIR an empty folder of its own;
    returns its JSON lines (the last: the versions)."""
    command = [str(python), str(Path(__file__).with_name("internals_check.py"))]
    with tempfile.TemporaryDirectory() as home:
        environment = {
            "PATH": f"{python.parent}:/usr/bin:/bin",
            "PYTHONPATH": str(REPO_ROOT),
            "LANG": "C.UTF-8",
            "HOME": home,
            "TMPDIR": home,
        }
        result = subprocess.run(command, capture_output=True, text=True, env=environment)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines or "versions" not in lines[-1]:
        return [
            {
                "check": "internals_check.py",
                "ok": False,
                "detail": (result.stderr.strip().splitlines() or ["no output"])[-1][:300],
            }
        ]
    return lines


def internals_rows(name: str, python: Path) -> list[Result]:
    """One row per check of `internals_check.py` on the replica's versions."""
    *checks, versions = check_internals(python)
    said = ", ".join(f"{k} {v}" for k, v in versions.get("versions", {}).items() if v)
    return [
        Result(
            name,
            f"grader's internals: {c['check']} ({said})",
            c["ok"],
            0.0,
            "" if c["ok"] else c["detail"],
        )
        for c in checks
    ]


def scores(grades_csv: Path) -> dict[str, str]:
    """{submission file: "total/maximum", or the grader's status where it has no total}."""
    import csv

    with open(grades_csv) as file:
        rows = list(csv.DictReader(file))
    return {
        row["submission"]: f"{row['total']}/{row['maximum']}" if row["total"] else row["status"]
        for row in rows
    }


def grade_rows(name: str, scored: dict[str, str], lessons) -> list[Result]:
    """A row per lab: its solution must score full marks and its blank lab zero."""
    rows = []
    for lesson in lessons:
        solution = scored.get(f"solution-{lesson}.ipynb", "not graded")
        blank = scored.get(f"blank-{lesson}.ipynb", "not graded")
        total, _, maximum = solution.partition("/")
        passed = bool(maximum) and total == maximum and blank.startswith("0/")
        what = f"grade lab {lesson[:2]}: solution full marks, blank lab zero"
        detail = "" if passed else f"solution {solution}; blank lab {blank}"
        rows.append(Result(name, what, passed, 0.0, detail[:300]))
    return rows


def grade_replica(name: str, venv: Path, lessons, work: Path, cache: Path) -> list[Result]:
    """Grades each lab's solution and blank lab (`solutions/`, `labs/`) with `tools.grade`
    in a working copy of `venv`: the grader's kernels and judge on the replica's versions."""
    work.mkdir(parents=True)
    python = working_copy(venv, work / "venv") / "bin" / "python"
    uv = [sys.executable, "-m", "uv", "--quiet", "pip", "install", "--no-deps"]
    installed = subprocess.run(
        [*uv, "--python", str(python), *GRADER_PACKAGES], capture_output=True, text=True
    )
    if installed.returncode != 0:
        said = (installed.stderr.strip().splitlines() or ["no message"])[-1]
        return [Result(name, "install the grader's packages", False, 0.0, said[:300])]
    submissions = work / "submissions"
    submissions.mkdir()
    for lesson in lessons:
        shutil.copy(
            REPO_ROOT / "solutions" / f"{lesson}.ipynb", submissions / f"solution-{lesson}.ipynb"
        )
        shutil.copy(REPO_ROOT / "labs" / f"{lesson}.ipynb", submissions / f"blank-{lesson}.ipynb")
    (work / "home").mkdir()
    environment = {
        "PATH": f"{python.parent}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "TPU_SPEED_PIPELINES_NO_PROGRESS": "1",
    }
    command = [
        str(python),
        "-m",
        "tools.grade",
        str(submissions),
        "--output-dir",
        str(work / "grades"),
        *GRADE_LIMITS,
    ]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=REPO_ROOT)
    minutes = (time.monotonic() - started) / 60
    grades = work / "grades" / "grades.csv"
    if result.returncode != 0 or not grades.exists():
        said = (result.stderr.strip().splitlines() or ["no message"])[-1]
        return [Result(name, "tools.grade", False, minutes, said[:300])]
    rows = grade_rows(name, scores(grades), lessons)
    for row in rows:
        row.minutes = minutes / len(rows)
    return rows
