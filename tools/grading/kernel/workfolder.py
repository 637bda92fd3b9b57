"""A process's own folder in the grader's workspace (its HOME, its data cache), and its bounds.

The kernel of a submission and its judge each get one (`prepare_work`), with the same
environment but for the folder. What a submission may write is bounded (`DiskLimits`):
bwrap sizes its private `/tmp` and `/dev/shm`; RLIMIT_FSIZE bounds each file; `DiskWatch`,
which the grader calls while it waits on the kernel, sums the work folders and reads the
sandbox's `/tmp`, and says when either is past its bound. A lesson's own environment
(lab 4's Keras backend) is passed to `prepare_work` for both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tools.grading.kernel import sandbox
from tools.grading.model import REPO_ROOT, TMP_FLOOR, WORK_FLOOR, DiskLimits
from utils.lab import data, progress

DISK_MULTIPLE = 4
_FULL_MARGIN = 2**20  # A tmpfs with less than this left is full.


def gigabytes(num_bytes: float) -> str:
    """`num_bytes` in decimal gigabytes, as the feedback says them: `0.5 GB`, `2 GB`."""
    return f"{num_bytes / 1e9:.3g} GB"


def disk_limits(written: dict | None, disk_gb: float | None = None) -> tuple[DiskLimits, str]:
    """The bounds for a lesson, and why: `disk_gb` for both where given, else `DISK_MULTIPLE`
    times what its solution's run wrote at most (`written`: {"tmp": bytes, "work": bytes}),
    at least `TMP_FLOOR` and `WORK_FLOOR`; the floors where nothing was measured."""
    if disk_gb is not None:
        size = int(disk_gb * 1e9)
        return DiskLimits(size, size), f"--disk-gb {disk_gb:g}: {gigabytes(size)} each"
    written = written or {}
    limits = DiskLimits(
        max(TMP_FLOOR, DISK_MULTIPLE * written.get("tmp", 0)),
        max(WORK_FLOOR, DISK_MULTIPLE * written.get("work", 0)),
    )
    how = f"{DISK_MULTIPLE}x what its solution wrote, at least" if written else "not measured:"
    why = (
        f"{how} {gigabytes(TMP_FLOOR)} in /tmp and {gigabytes(WORK_FLOOR)} in the work "
        f"folder: {gigabytes(limits.tmp_bytes)} and {gigabytes(limits.work_bytes)}"
    )
    return limits, why


def folder_bytes(folder: Path) -> int:
    """Bytes the files under `folder` take on disk (links are not followed; a file that
    goes while it is read counts as 0)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class DiskWatch:
    """Says (`check()`) when a submission has written past its `DiskLimits`; keeps in
    `most` the most it saw in each place, for a solution's run."""

    def __init__(self, limits: DiskLimits, folders: list[Path], pids: Callable[[], list[int]]):
        """`folders`: the work folders, summed; `pids()`: the bwrap processes now running."""
        self.limits, self.folders, self.pids = limits, folders, pids
        self.most = {"tmp": 0, "work": 0}

    def _tmpfs_used(self) -> tuple[int, str]:
        """(most bytes used in one sandbox's /tmp or /dev/shm, the first full one or "")."""
        used, full = 0, ""
        for pid in self.pids():
            root = sandbox.sandbox_root(pid)
            for folder in ("/tmp", "/dev/shm") if root else ():
                try:
                    found = os.statvfs(f"{root}{folder}")
                except OSError:
                    continue
                size = found.f_blocks * found.f_frsize
                if abs(size - self.limits.tmp_bytes) >= 2**16:
                    continue  # Not the sandbox's own tmpfs (the process has just ended).
                used = max(used, size - found.f_bfree * found.f_frsize)
                if found.f_bavail * found.f_frsize < _FULL_MARGIN and not full:
                    full = folder
        return used, full

    def check(self) -> str:
        """The line the learner reads where a bound is passed, else ""."""
        work = sum(folder_bytes(folder) for folder in self.folders)
        tmp, full = self._tmpfs_used()
        self.most = {"tmp": max(self.most["tmp"], tmp), "work": max(self.most["work"], work)}
        if work >= self.limits.work_bytes:
            return f"wrote more than {gigabytes(self.limits.work_bytes)} in its work folder"
        if full:
            return f"wrote more than {gigabytes(self.limits.tmp_bytes)} in {full}"
        return ""


def prepare_work(
    work: Path, cache: Path | None, lesson: dict[str, str] | None = None
) -> dict[str, str]:
    """Makes a submission's work folder (home, data cache) and returns its environment,
    with the lesson's own (`lesson`: lab 4's `KERAS_BACKEND`, `XLA_FLAGS`) added.

    The private cache links to each finished embedded dataset of the shared cache (read-only
    in the sandbox); anything else a lab writes to its cache (shards) stays in the folder.
    """
    (work / "home").mkdir(parents=True)
    (work / "cache").mkdir()
    if cache is not None and cache.is_dir():
        for dataset in cache.glob("flowers-embedded-*"):
            if (dataset / "dataset.json").exists():
                (work / "cache" / dataset.name).symlink_to(dataset)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(work / "home"),
        "TMPDIR": "/tmp",
        data.CACHE_ENV_VAR: str(work / "cache"),
        progress.DISABLE_ENV_VAR: "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "NO_GCE_CHECK": "true",
        **(lesson or {}),
    }
