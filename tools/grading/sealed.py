"""Sealed verdicts: each TODO decided by the judge, a process that runs no learner code.

Takes the lab (for its plan) and the running kernel of a submission; gives one verdict
per TODO. The kernel keeps what each TODO made (`keep_code`, after the TODO's cell);
after the last cell it serves those values (`export_server.py`) while the judge
(`judge.py`) runs the lab's check cells on them, in a sandbox of its own. The judge's
verdicts are signed with a key only the grader and the judge know; a line without the
signature is ignored. The judge's output is read while it runs (`judge_output.py`).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from tools.grading import sandbox
from tools.grading.judge_output import Verdict, verdict_of
from tools.grading.judge_plan import bound_names, kernel_source
from tools.grading.model import KEY, REPO_ROOT, DiskLimits, marks
from tools.grading.workfolder import prepare_work

SOCKET_NAME = "j.sock"  # In the work folder; short, as a Unix socket's path must be.
_HERE = Path(__file__).parent


def start_code(address: Path, seconds: float) -> str:
    """The kernel's first grader cell: the wire format as a module, the export server, started."""
    return (
        "# Grader: answer the judge about what each TODO makes.\n"
        "import types as _grader_types\n"
        "_grader_wire = _grader_types.ModuleType('grader_wire')\n"
        f"exec({(_HERE / 'wire.py').read_text()!r}, _grader_wire.__dict__)\n"
        f"{(_HERE / 'export_values.py').read_text()}\n"
        f"{(_HERE / 'export_calls.py').read_text()}\n{(_HERE / 'export_grain.py').read_text()}\n"
        f"{(_HERE / 'export_objects.py').read_text()}\n{(_HERE / 'export_beam.py').read_text()}\n"
        f"{(_HERE / 'export_server.py').read_text()}\n"
        f"_grader_start(_grader_wire, _grader_answer, _grader_finished, {str(address)!r}, "
        f"{seconds!r}, globals())\n"
    )


def keep_code(todo: int, names: list[str]) -> str:
    return f"# Grader: keep what TODO {todo} made.\n_grader_keep({todo}, {names!r}, globals())\n"


FINISH_CODE = "# Grader: the last cell has run.\n_grader_finish()\n"


def kernel_cells(restored, lab, literals: str, seconds: float) -> list:
    """(cell, code) the kernel runs: the learner's notebook without its checks (the judge
    runs those; a check cell's other lines run), the export server started before the
    first TODO cell, each TODO's values kept after its cell, and the end said after the last."""
    names = {
        marks(c)["todo"]: bound_names(c.source)
        for c in lab.cells
        if c.cell_type == "code" and "todo" in marks(c)
    }
    prepared, started = [], False
    for cell in restored.cells:
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        source = kernel_source(cell, cell_marks)  # Hand-in cells: their checks again.
        if not source:
            continue
        if "todo" in cell_marks and not started:
            start = start_code(Path(SOCKET_NAME), seconds)
            prepared.append((nbformat.v4.new_code_cell(id="grader-start"), start))
            started = True
        prepared.append((cell, source))
        if "parameters" in cell.metadata.get("tags", []):
            prepared.append((nbformat.v4.new_code_cell(id="injected-parameters"), literals))
        if "todo" in cell_marks:
            todo = cell_marks["todo"]
            keep = keep_code(todo, names.get(todo, []))
            # It waits there for the judge's run of the TODO's check cell: said as that cell.
            kept = nbformat.v4.new_code_cell(id=f"grader-keep-{todo}")
            kept.metadata[KEY] = {"check": todo}
            prepared.append((kept, keep))
    prepared.append((nbformat.v4.new_code_cell(id="grader-finish"), FINISH_CODE))
    return prepared


def start_judge(job: dict, work: Path, options, disk: DiskLimits) -> tuple:
    """Starts the judge on `job`; returns (its process, the key its verdicts are signed with,
    its own folder).

    The judge has a folder of its own (HOME, temporary files, its own data cache), sees the
    kernel's work folder read-only (the socket, the files the learner's graphs read), runs
    with `python -I` (no folder the kernel can write is on its `sys.path`) and under the
    same memory and disk limits as the kernel (a learner's graph runs there).
    """
    key = secrets.token_bytes(32)
    own = Path(tempfile.mkdtemp(prefix=f"{work.name}-judge-", dir=work.parent))
    env = prepare_work(own, options.cache)  # The kernel's environment, but for the folder.
    start = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
        "from tools.grading import judge; sys.exit(judge.main())"
    )
    command = sandbox.with_memory_limit(
        [sys.executable, "-I", "-c", start],
        int(options.memory_gb * 2**30),
        file_bytes=disk.work_bytes,
    )
    if options.bwrap:
        read_only = [
            REPO_ROOT / "utils",
            REPO_ROOT / "tools",
            Path(sys.prefix),
            Path(sys.base_prefix),
            work,
            *job.pop("read_only"),
        ]
        command = sandbox.bwrap_command(
            options.bwrap,
            command,
            work=own,
            env=env,
            read_only=read_only,
            tmp_bytes=disk.tmp_bytes,
            course=options.course,
        )
    else:
        job.pop("read_only")
    process = subprocess.Popen(
        command,
        cwd=own,
        env=None if options.bwrap else env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    job = {**job, "socket": str(work / job["socket"]), "key": key.hex(), "course": str(REPO_ROOT)}
    process.stdin.write((json.dumps(job) + "\n").encode())
    process.stdin.close()
    return process, key, own


def read_verdicts(output: str, key: bytes, errors: str = "") -> dict[int, Verdict]:
    """The verdicts of the judge's output; lines not signed with `key` are ignored.

    Where the judge stopped without a verdict, its last error line is kept under TODO 0,
    for the report (a grader's problem, not the learner's).
    """
    verdicts = {}
    last = [line for line in errors.splitlines() if line.strip()][-1:]
    if last and "Error" in last[0]:
        verdicts[0] = Verdict(False, last[0].strip()[:300])
    for line in output.splitlines():
        found = verdict_of(line, key)
        if found is not None:
            verdicts[found[0]] = found[1]
    return verdicts
