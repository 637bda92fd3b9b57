"""Step `run`: the prepared cells, one by one, in a fresh sandboxed kernel.

Takes `Submission.prepared`, the lesson's `Limits` and the `Options`; gives
`Submission.results` (one `grade_kernel.CellResult` per prepared cell) and the judge's
verdicts. The work folder holds the submission's HOME and its data cache (links to the
shared, read-only datasets); it and the judge's folder are deleted when the run ends.
The kernel sends the first `grade_kernel.OUTPUT_LIMIT` characters each cell prints and
drops the rest as it is printed; the feedback says so (`printed_note`). What they wrote is bounded
(`model.DiskLimits`, from the lesson's limits).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.grading import grade_kernel, sealed
from tools.grading.grade_kernel import KERNEL_DIED
from tools.grading.judge_output import JudgeOutput
from tools.grading.model import KEY, REPO_ROOT, Limits, Options, Submission, marks
from tools.grading.workfolder import DiskWatch, prepare_work


def run_prepared(prepared: list, limits: Limits, options: Options, label: str, judge_plan: list):
    """Runs prepared cells in a fresh sandboxed kernel, the judge beside it on `judge_plan`;
    returns (the cells' results, the judge's verdicts, the most bytes seen written in /tmp
    and in the work folders: {"tmp": ..., "work": ...})."""
    # `limits.disk` where `limits.measure_limits` made them; a plain `Limits`, the floors.
    disk = limits.disk
    # A short name: the kernel's sockets are in it, and a socket's path has 107 bytes at most.
    work = Path(tempfile.mkdtemp(prefix=f"{label[:12]}-", dir=options.work_root))
    env = prepare_work(work, options.cache)
    data_folders = [options.cache] if options.cache is not None else []
    read_only = [REPO_ROOT / "utils", Path(sys.prefix), Path(sys.base_prefix), *data_folders]
    job = {
        "socket": sealed.SOCKET_NAME,
        "seconds": limits.total,
        "plan": judge_plan,
        "read_only": data_folders,
    }
    judge, key, own = sealed.start_judge(job, work, options, disk)
    judge_output = JudgeOutput(judge, key)
    kernel = grade_kernel.SandboxedKernel(
        work,
        env,
        bwrap=options.bwrap,
        read_only=read_only,
        memory_bytes=int(options.memory_gb * 2**30),
        tmp_bytes=disk.tmp_bytes,
        file_bytes=disk.work_bytes,
        course=options.course,
    )
    watch = DiskWatch(disk, [work, own], lambda: [p.pid for p in (kernel.process, judge) if p])
    kernel.watch = watch.check
    # A grader's keep cell waits for the judge's check of its TODO: the check's time.
    cell_limits = [
        limits.total
        if str(cell.get("id", "")).startswith("grader-keep")
        else limits.of(cell.get("id", ""))
        for cell, _ in prepared
    ]

    def wait_for_judge(results):
        if results and results[-1].status != "ok":  # The run stopped: nothing more will come.
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            judge.wait(timeout=limits.total)

    try:
        results = grade_kernel.run_cells(
            [code for _, code in prepared],
            cell_limits,
            kernel,
            total_limit=limits.total,
            before_stop=wait_for_judge,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(judge.pid, signal.SIGKILL)
        judge.wait()
        verdicts = judge_output.verdicts()
        for folder in (work, own):
            shutil.rmtree(folder, ignore_errors=True)
    return results, verdicts, watch.most


def name_the_todo(prepared: list, results: list) -> None:
    """Adds to a lab cell's timeout the TODO whose cell came last before it (a lab cell's id
    means nothing to a learner; its time is mostly that TODO's code), and says a kernel that
    died in a lab cell is the learner's kernel (what their cells left running, a thread
    among them), not the lab's cell."""
    todo = None
    for (cell, _), result in zip(prepared, results, strict=True):
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        if "todo" in cell_marks:
            todo = cell_marks["todo"]
        elif todo is None or "check" in cell_marks:
            continue
        elif result.status == "timeout":
            result.error += f", after the cell of TODO {todo}"
        elif result.error == KERNEL_DIED and "added" not in cell_marks:
            result.error = (
                f"your kernel died (memory, os._exit or a crash) after your TODO {todo} cell, "
                f"while the lab's cell {cell.get('id')} ran"
            )


def todo_prints(prepared: list, results: list) -> dict[int, str]:
    """What each TODO's cell printed (as far as it is kept), for the learner's feedback."""
    found = {}
    for (cell, _), result in zip(prepared, results, strict=True):
        todo = (marks(cell) or cell.metadata.get(KEY, {})).get("todo")
        if todo is not None and result.output.strip():
            found[todo] = without_grader_folders(result.output)
    return found


def without_grader_folders(text: str) -> str:
    """`text` without the grader's folders (its Python environment, the course): a warning
    printed by a package names its file ("<venv>/lib/.../interleave_op.py:44: UserWarning")."""
    for folder, shown in (
        (sys.prefix, "<python>"),
        (sys.base_prefix, "<python>"),
        (REPO_ROOT, "<course>"),
    ):
        text = text.replace(str(folder).rstrip("/") + "/", shown + "/")
    return text


PRINTED_NOTE = (
    "Your cells printed more than the grader keeps: the first "
    f"{grade_kernel.OUTPUT_LIMIT:,} characters of each cell; the rest was dropped as it was "
    "printed (printing costs no points)."
)


def printed_note(results: list) -> str:
    """The feedback's line where a cell printed more than the grader keeps, else ""."""
    cut = any(result.printed > grade_kernel.OUTPUT_LIMIT for result in results)
    return PRINTED_NOTE if cut else ""


def step(submission: Submission) -> bool:
    """Runs the submission's prepared cells within its lesson's limits."""
    limits = submission.limits[submission.grade.lab]
    submission.results, submission.verdicts, _ = run_prepared(
        submission.prepared,
        limits,
        submission.options,
        submission.path.stem,
        submission.judge_plan,
    )
    name_the_todo(submission.prepared, submission.results)
    submission.grade.printed = todo_prints(submission.prepared, submission.results)
    note = printed_note(submission.results)
    if note:
        submission.grade.notes.append(note)
    return True
