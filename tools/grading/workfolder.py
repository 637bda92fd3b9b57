"""A process's own folder in the grader's workspace: its HOME and its data cache.

The kernel of a submission and its judge each get one (`prepare_work`), with the same
environment but for the folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools.grading.model import REPO_ROOT
from utils.lab import data, progress


def prepare_work(work: Path, cache: Path | None) -> dict[str, str]:
    """Makes a submission's work folder (home, data cache) and returns its environment.

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
    }
