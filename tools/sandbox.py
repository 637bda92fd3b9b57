"""Runs one command sealed off with bubblewrap (`bwrap`), the sandbox Flatpak uses.

Inside: the whole file system read-only (course, virtual environment, tools, data cache),
the folders it has no business reading hidden (the submissions and output folders, the
grader's HOME), one writable work folder (HOME is inside it), a private `/tmp`, no network (loopback
only), its own PID, IPC and UTS namespaces, a new `/proc` that shows only its own
processes, and a memory limit per process. When the command ends, every process it left
behind ends with it (bwrap's init, PID 1 of the namespace, exits and the kernel kills the
rest); `--die-with-parent` does the same if the grader is killed.

The memory limit is RLIMIT_DATA (private writable memory per process): TensorFlow runs
under it, while RLIMIT_AS also counts the large virtual reservations of thread stacks and
XLA. It limits each process, not the sandbox as a whole (a cgroup would; none is writable
here).

Without bwrap (macOS, a container without user namespaces) `--sandbox none` runs the same
command with the same environment and limit, but nothing is isolated.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SANDBOX_TMP = Path("/tmp")
# Sets the memory limit, then runs the command: a small Python wrapper, so it works the
# same inside and outside bwrap, on Linux and macOS (no `prlimit` needed).
_LIMIT = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_DATA, (n, n)); os.execvp(sys.argv[2], sys.argv[2:])"
)


def find_bwrap() -> str | None:
    """Returns the path of a bwrap that works here (user namespaces allowed), or None."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = [path, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--", "true"]
    try:
        works = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    return path if works else None


def with_memory_limit(command: Sequence[str], memory_bytes: int) -> list[str]:
    """Returns `command` preceded by the wrapper that sets RLIMIT_DATA to `memory_bytes`."""
    return [sys.executable, "-c", _LIMIT, str(memory_bytes), *command]


def bwrap_command(
    bwrap: str,
    command: Sequence[str],
    *,
    work: Path,
    env: dict[str, str],
    read_only: Sequence[Path] = (),
    hide: Sequence[Path] = (),
) -> list[str]:
    """Returns the bwrap command line that runs `command` in `work`, sealed off.

    `work` is the only writable folder from the outside (same path inside). Each folder of
    `hide` (besides `/tmp`) is covered by an empty tmpfs; `read_only` names folders the
    command needs that may sit under a hidden one: they are bound again, read-only, after
    it. Mount order matters: a later `--tmpfs /tmp` hides anything under /tmp bound before
    it, so the mounts go parents first.
    """
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm"]
    args += ["--proc", "/proc"]
    hidden = [SANDBOX_TMP, *(Path(path).resolve() for path in hide if Path(path).is_dir())]
    needed = {Path(path).resolve() for path in read_only}
    hidden = [path for path in hidden if path != Path("/") and path not in needed]
    mounts = [(path, "--tmpfs") for path in hidden]
    for path in needed:
        if path.exists() and any(path.is_relative_to(h) and path != h for h in hidden):
            mounts.append((path, "--ro-bind"))
    for path, kind in sorted(set(mounts), key=lambda mount: len(mount[0].parts)):
        args += ["--tmpfs", str(path)] if kind == "--tmpfs" else [kind, str(path), str(path)]
    args += ["--bind", str(work), str(work), "--chdir", str(work)]
    args += ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return [*args, "--", *command]
