"""Copies the labs into work/ and opens them in JupyterLab (the README's third command).

Steps:
1. Copy each `labs/NN_*.ipynb` that `work/` does not hold yet into `work/`. A lab you have
   started is never overwritten (delete your copy to start that lab again), and `labs/`,
   which the build regenerates, is never edited.
2. Start JupyterLab on `work/` with this Python, passing on any arguments given. As root (a
   container, a cloud VM's default user) it adds `--allow-root`, saying so: Jupyter refuses
   to start as root without it ("Running as root is not recommended").

Run it from the root of the clone.

Usage:
    .venv/bin/python -m tools.open_labs
    .venv/bin/python -m tools.open_labs --no-browser --port 8889
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

LABS = Path("labs")
WORK = Path("work")


def copy_labs(labs: Path = LABS, work: Path = WORK) -> tuple[list[str], list[str]]:
    """Copies the labs that `work` lacks into it; returns (copied, kept) file names.

    Raises:
        FileNotFoundError: if `labs` holds no lab (not run from the root of a clone).
    """
    found = sorted(labs.glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise FileNotFoundError(
            f"No labs in {labs.resolve()}. Run this from the root of the clone: "
            ".venv/bin/python -m tools.open_labs"
        )
    work.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for lab in found:
        if (work / lab.name).exists():
            kept.append(lab.name)
        else:
            shutil.copyfile(lab, work / lab.name)
            copied.append(lab.name)
    return copied, kept


def jupyter_command(extra: list[str], *, uid: int, work: Path = WORK) -> list[str]:
    """Returns the command that starts JupyterLab on `work` (`--allow-root` for uid 0)."""
    command = [sys.executable, "-m", "jupyterlab", str(work), *extra]
    if uid == 0 and "--allow-root" not in extra:
        command.append("--allow-root")
    return command


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    try:
        copied, kept = copy_labs()
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 1
    print(
        f"{WORK}/: copied {len(copied)} lab(s) from {LABS}/"
        + (f"; kept your {len(kept)} copies ({', '.join(kept)})" if kept else "")
        + "."
    )
    command = jupyter_command(extra, uid=os.getuid() if hasattr(os, "getuid") else -1)
    if "--allow-root" in command and "--allow-root" not in extra:
        print("Running as root (a container?): starting JupyterLab with --allow-root.")
    sys.stdout.flush()
    os.execv(command[0], command)  # JupyterLab takes over this process (and Ctrl-C).
    return 0  # Not reached.


if __name__ == "__main__":
    sys.exit(main())
