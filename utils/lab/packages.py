"""Installs what a lab is missing with pip: quietly, with a timeout, never waiting on input.

The set-up's only download (`runtime.prepare` calls it). A failure is one line
(`SetupFailed`); what is installed keeps its version if it can (TF 2.21 pins h5py<3.15;
Colab TPU has 3.16); a `.pth` file the install adds is put into effect at once.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shlex
import site
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# pip, quiet and never waiting on input: no colour codes, no progress bars, no version
# check, a network timeout per request and few retries; PIP_TIMEOUT_S bounds the whole run.
PIP_OPTIONS = (
    "--quiet",
    "--no-color",
    "--progress-bar",
    "off",
    "--disable-pip-version-check",
    "--timeout",
    "20",
    "--retries",
    "1",
)
PIP_TIMEOUT_S = 600
# What pip's messages say when it cannot connect to the package index.
OFFLINE_SIGNS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
)


class SetupFailed(RuntimeError):
    """The set-up could not install what it needs; IPython shows the message alone.

    The message is one line: what was tried, the command to run by hand, how to go on.
    """

    def _render_traceback_(self) -> list[str]:  # IPython's hook: no traceback, one line.
        return [f"{type(self).__name__}: {self}"]


def pip_install(
    requirements: list[str],
    *,
    install: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    timeout_s: float = PIP_TIMEOUT_S,
) -> None:
    """Installs `requirements` with pip, quietly, never waiting on input.

    One progress line is printed. pip runs with its stdin closed, `GIT_TERMINAL_PROMPT=0`,
    no colour, no progress bar, a network timeout and `timeout_s` in all, the installed
    versions as constraints (if none fits, without: a line names what moved). A `.pth`
    file the install adds is put into effect at once (Python reads them only at start).

    Args:
        requirements: pip requirement strings, e.g. ["tensorflow-cpu>=2.20.0,<=2.21.0"].
        install: runs the pip command (replaced in tests).
        timeout_s: seconds pip may take in all.

    Raises:
        SetupFailed: if pip fails or runs out of time; its one line says what was tried,
            the command to run by hand and how to go on.

    Example:
        packages.pip_install(["tensorflow-cpu>=2.20.0,<=2.21.0"])
    """
    command = [sys.executable, "-m", "pip", "install", *PIP_OPTIONS, *requirements]
    names = ", ".join(requirements)
    print(f"Installing {names} with pip (at most {timeout_s / 60:.0f} min) ...", flush=True)
    before, pth_before = installed_versions(), _pth_files()
    with tempfile.TemporaryDirectory() as folder:
        pins = Path(folder, "installed.txt")
        pins.write_text("".join(f"{n}=={v}\n" for n, v in before.items()))
        why = _run_pip([*command, "-c", str(pins)], install, timeout_s)
    if why is not None and "ResolutionImpossible" in why:
        why = _run_pip(command, install, timeout_s)
    if why is not None:
        by_hand = "%pip install " + " ".join(shlex.quote(r) for r in requirements)
        raise SetupFailed(
            f"pip could not install {names} ({why}). Run by hand in a cell: {by_hand} "
            "(or pick a runtime that has them), then run this cell again."
        )
    importlib.invalidate_caches()
    after = installed_versions()
    moved = [f"{n} {v} -> {after.get(n, 'gone')}" for n, v in before.items() if after.get(n) != v]
    if moved:
        print(f"pip changed installed packages: {', '.join(moved)}.", flush=True)
    for pth in sorted(_pth_files() - pth_before):
        _add_pth_paths(pth)


def installed_versions() -> dict[str, str]:
    """Returns what is installed: the first of each name on sys.path.

    Returns:
        {distribution name: version}.
    """
    found = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(dist.metadata["Name"], dist.version)
    found.pop(None, None)
    return found


def _run_pip(command: list[str], install: Callable, timeout_s: float) -> str | None:
    """Runs pip; returns None, or why it failed."""
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "PIP_NO_INPUT": "1"}
    try:
        result = install(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=environment,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"no result within {timeout_s:.0f} s"
    return None if result.returncode == 0 else _last_error_line(result.stderr)


def _last_error_line(stderr: str) -> str:
    """Returns pip's last `ERROR:` line (else its last line), without colour codes.

    Where pip could not connect to the package index, the line says so.
    """
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if line.startswith("ERROR:")]
    line = (errors or lines or ["pip gave no message"])[-1]
    if any(sign in stderr for sign in OFFLINE_SIGNS):
        line += "; the package index could not be reached: is this runtime online?"
    return line


def _pth_files() -> set[Path]:
    folders = {*site.getsitepackages(), site.getusersitepackages()}
    return {pth for folder in folders for pth in Path(folder).glob("*.pth")}


def _add_pth_paths(pth: Path) -> None:
    """Adds the folders a new `.pth` file names to `sys.path`, as `site` does at start-up.

    Lines that run code (`import ...`) are left alone: they take effect in the next kernel.
    """
    for line in pth.read_text().splitlines():
        folder = Path(pth.parent, line.strip())
        if line.strip() and not line.startswith(("#", "import")) and folder.is_dir():
            if str(folder) not in sys.path:
                sys.path.append(str(folder))
