"""The judge started: a process that runs no learner code, in a sandbox of its own.

Takes the judge's job (its plan, the socket of the learner's kernel) and the kernel's work
folder; gives the running judge and the key its verdicts are signed with, which only the
grader and the judge know (`judge_output.py` reads them; a line without the signature is
ignored). The judge (`judge.py`) asks the kernel for what each TODO made
(`tools/grading/kernel/inside/`) and runs the lab's check cells on it.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.grading.kernel import sandbox
from tools.grading.kernel.workfolder import prepare_work
from tools.grading.model import REPO_ROOT, DiskLimits


def start_judge(
    job: dict, work: Path, options, disk: DiskLimits, lesson: dict[str, str] | None = None
) -> tuple:
    """Starts the judge on `job`; returns (its process, the key its verdicts are signed with,
    its own folder). `lesson`: the lesson's own environment, as the kernel's (`prepare_work`).

    The judge has a folder of its own (HOME, temporary files, its own data cache), sees the
    kernel's work folder read-only (the socket, the files the learner's graphs read), runs
    with `python -I` (no folder the kernel can write is on its `sys.path`) and under the
    same memory and disk limits as the kernel (a learner's graph runs there).
    """
    key = secrets.token_bytes(32)
    own = Path(tempfile.mkdtemp(prefix=f"{work.name}-judge-", dir=work.parent))
    env = prepare_work(own, options.cache, lesson)  # The kernel's, but for the folder.
    start = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
        "from tools.grading.judge import judge; sys.exit(judge.main())"
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
