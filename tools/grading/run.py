"""Step `run`: the prepared cells, one by one, in a fresh sandboxed kernel.

Takes `Submission.prepared`, the lesson's `Limits` and the `Options`; gives
`Submission.results` (one `grade_kernel.CellResult` per prepared cell). The work folder
holds the submission's HOME and its data cache (links to the shared, read-only datasets).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tools import grade_kernel
from tools.grading import sealed
from tools.grading.model import REPO_ROOT, Limits, Options, Submission
from tools.grading.workfolder import prepare_work


def run_prepared(prepared: list, limits: Limits, options: Options, label: str, judge_plan: list):
    """Runs prepared cells in a fresh sandboxed kernel, the judge beside it on `judge_plan`;
    returns (the cells' results, the judge's verdicts)."""
    work = Path(tempfile.mkdtemp(prefix=f"{label[:40]}-", dir=options.work_root))
    env = prepare_work(work, options.cache)
    data_folders = [options.cache] if options.cache is not None else []
    read_only = [REPO_ROOT / "utils", Path(sys.prefix), Path(sys.base_prefix), *data_folders]
    kernel = grade_kernel.SandboxedKernel(
        work, env, bwrap=options.bwrap, read_only=read_only,
        memory_bytes=int(options.memory_gb * 2**30),
    )  # fmt: skip
    # A grader's keep cell waits for the judge's check of its TODO: the check's time.
    cell_limits = [
        limits.total
        if str(cell.get("id", "")).startswith("grader-keep")
        else limits.of(cell.get("id", ""))
        for cell, _ in prepared
    ]
    job = {"socket": sealed.SOCKET_NAME, "seconds": limits.total, "plan": judge_plan,
           "read_only": data_folders}  # fmt: skip
    judge, key = sealed.start_judge(job, work, options)
    judged: dict = {}

    def wait_for_judge(results):
        if results and results[-1].status != "ok":  # The run stopped: nothing more will come.
            return
        try:
            judged["output"] = judge.communicate(timeout=limits.total)
        except subprocess.TimeoutExpired:
            pass

    try:
        results = grade_kernel.run_cells(
            [code for _, code in prepared], cell_limits, kernel, total_limit=limits.total,
            before_stop=wait_for_judge,
        )  # fmt: skip
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(judge.pid, signal.SIGKILL)
        output, errors = judged.get("output") or judge.communicate()
    return results, sealed.read_verdicts(output, key, errors)


def step(submission: Submission) -> bool:
    """Runs the submission's prepared cells within its lesson's limits."""
    limits = submission.limits[submission.grade.lab]
    submission.results, submission.verdicts = run_prepared(
        submission.prepared, limits, submission.options, submission.path.stem,
        submission.judge_plan,
    )  # fmt: skip
    return True
