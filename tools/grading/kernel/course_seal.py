"""Proof that no submission changed what the judge imports: the course as the sandboxes see it.

Takes the folders a sandbox sees that decide a verdict or run in the grader itself; gives a
`CourseSeal` that fingerprints them before the class's first submission runs and again
after each one. The fingerprint holds every file of the course's `utils/` and `tools/`
(the checks and the judge: path and bytes, `__pycache__` included), every entry of the
virtual environment (path, mode, size and change time: a file changed in place gets a new
change time, which no process can set back) and each dataset of the data cache (the same).
A change raises `CourseChanged`, which names the submissions that ran since the last
unchanged fingerprint: the grader stops the run there and writes no grade.

The sandbox already refuses every write there (read-only binds, no capability:
`sandbox.py`); the seal is the proof, and the guard where `--sandbox none` lets a
submission write anywhere.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path


class CourseChanged(RuntimeError):
    """A file the judge imports changed while submissions ran."""


def fingerprint(with_bytes: Iterable[Path], with_times: Iterable[Path]) -> str:
    """A hash of the files under `with_bytes` (their paths and bytes) and of the entries
    under `with_times` (their paths, modes, sizes and change times); links not followed."""
    digest = hashlib.sha256()
    for folders, read in ((with_bytes, True), (with_times, False)):
        for folder in folders:
            for root, folders_in, files in os.walk(folder):
                folders_in.sort()
                for name in sorted(files) + folders_in:
                    path = os.path.join(root, name)
                    info = os.lstat(path)
                    digest.update(f"{path}\0{info.st_mode}\0{info.st_size}\0".encode())
                    if not read:
                        digest.update(f"{info.st_ctime_ns}\0".encode())
                    elif name in files and os.path.isfile(path) and not os.path.islink(path):
                        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


class CourseSeal:
    """The course's fingerprint, taken at the start; `verify` after each submission."""

    def __init__(self, with_bytes: list[Path], with_times: list[Path]):
        self.with_bytes, self.with_times = with_bytes, with_times
        self.expected = fingerprint(with_bytes, with_times)
        self.running: set[str] = set()
        self.lock = threading.Lock()

    def started(self, submission: str) -> None:
        with self.lock:
            self.running.add(submission)

    def verify(self, submission: str) -> None:
        """Raises `CourseChanged` naming `submission` (and those running beside it) where
        the course's fingerprint is not the one taken at the start."""
        with self.lock:
            suspects = sorted(self.running)
            self.running.discard(submission)
            if fingerprint(self.with_bytes, self.with_times) == self.expected:
                return
        others = [name for name in suspects if name != submission]
        beside = f" (running beside it: {', '.join(others)})" if others else ""
        raise CourseChanged(
            f"the course files the judge imports changed while {submission} ran{beside}: "
            "the run stops here and writes no grade. Restore what changed (git status "
            "shows utils/ and tools/) and grade again without that submission."
        )
