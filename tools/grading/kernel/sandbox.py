"""Runs one command sealed off with bubblewrap (`bwrap`), the sandbox Flatpak uses.

Inside: an empty root with only the system folders, the folders the command needs
(read-only: the virtual environment, Python, the course package `utils/`, the data cache)
and one writable work folder (HOME is inside it); a private `/tmp` and `/dev/shm` of a
given size; no network (loopback only); its own PID, IPC and UTS namespaces, a new `/proc`
that shows only its own processes, and a memory and a file-size limit per process. The
rest of the machine (the course's solutions and sources, other submissions, the grader's
output and HOME) is not there.
When the command ends, every process it left behind ends with it (bwrap's init, PID 1
of the namespace, exits and the kernel kills the rest); `--die-with-parent` does the
same if the grader is killed.

No capability, whoever runs the grader (`ISOLATION`): its own user namespace, in which its
processes are `SANDBOX_ID` (nobody), not root; every capability dropped; no further user
namespace (so no mount of its own); `/proc` and `/dev` read-only. Started by root, bwrap
would otherwise leave it CAP_SYS_ADMIN: it could remount a read-only bind writable, or its
`/tmp` larger. Its processes are still the grader's user outside (root's, where root runs
it): hence nothing writable but its work folder and its tmpfs, and `/proc` read-only (a
process of root's may write `/proc/sys` without any capability).

The memory limit is RLIMIT_DATA (private writable memory per process): TensorFlow runs
under it, while RLIMIT_AS also counts the large virtual reservations of thread stacks and
XLA. It limits each process, not the sandbox as a whole (a cgroup would; none is writable
here). The file-size limit is RLIMIT_FSIZE: no file a process writes grows past it (the
write fails with EFBIG, "File too large"; Python ignores the SIGXFSZ that comes with it).
It bounds each file, not a folder: the grader sums the work folder while it waits on the
kernel (`tools/grading/kernel/workfolder.py`). `/tmp` and `/dev/shm` are tmpfs (memory), bounded
by bwrap's `--size`.

Without bwrap (macOS, a container without user namespaces) `--sandbox none` runs the same
command with the same environment and limit, but nothing is isolated.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.grading.model import REPO_ROOT

SANDBOX_TMP = Path("/tmp")
# Sets the memory and file-size limits, then runs the command: a small Python wrapper, so
# it works the same inside and outside bwrap, on Linux and macOS (no `prlimit` needed).
_LIMIT = (
    "import os, resource, sys; n, f = int(sys.argv[1]), int(sys.argv[2]); "
    "resource.setrlimit(resource.RLIMIT_DATA, (n, n)); "
    "f < 0 or resource.setrlimit(resource.RLIMIT_FSIZE, (f, f)); "
    "os.execvp(sys.argv[3], sys.argv[3:])"
)


SANDBOX_ID = "65534"  # nobody: the uid and gid of the sandbox's processes, in its namespace.
ISOLATION = (
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--uid",
    SANDBOX_ID,
    "--gid",
    SANDBOX_ID,
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
)
NO_CAPABILITY = "CapEff:\t0000000000000000"


def find_bwrap() -> str | None:
    """Returns the path of a bwrap that seals a command off here as `ISOLATION` says (its
    own user namespace, as nobody, no capability), or None."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = [path, "--ro-bind", "/", "/", "--proc", "/proc", *ISOLATION]
    probe += ["--", "cat", "/proc/self/status"]
    try:
        status = subprocess.run(probe, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    sealed = NO_CAPABILITY in status and f"Uid:\t{SANDBOX_ID}\t" in status
    return path if sealed else None


def with_memory_limit(
    command: Sequence[str], memory_bytes: int, *, file_bytes: int | None = None
) -> list[str]:
    """Returns `command` preceded by the wrapper that sets RLIMIT_DATA to `memory_bytes` and,
    where given, RLIMIT_FSIZE (the largest file a process may write) to `file_bytes`."""
    files = -1 if file_bytes is None else file_bytes
    return [sys.executable, "-c", _LIMIT, str(memory_bytes), str(files), *command]


# The course's folders a sandbox may see (the checks, the judge): bound from a copy.
COURSE_FOLDERS = ("utils", "tools")
# The system folders a Python program needs; everything else on the machine is absent.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")


def bwrap_command(
    bwrap: str,
    command: Sequence[str],
    *,
    work: Path,
    env: dict[str, str],
    read_only: Sequence[Path] = (),
    tmp_bytes: int | None = None,
    course: Path | None = None,
) -> list[str]:
    """Returns the bwrap command line that runs `command` in `work`, sealed off.

    The sandbox's root is empty: only the system folders (`SYSTEM_FOLDERS`), the folders of
    `read_only` (read-only) and `work` (writable, the same path inside) are there, with a
    private `/tmp` and `/dev/shm` (sized), a read-only `/dev` and `/proc`. So a course
    checkout, its solutions, its git history, other submissions and the grader's output
    are not hidden but absent, wherever they are, unless a folder of `read_only` holds them.
    Mount order: `/tmp` first, then parents before children, so a folder under `/tmp` is
    bound on top of the private one.
    `tmp_bytes` sizes `/tmp` and `/dev/shm` (each; bwrap 0.8's `--size`), else unbounded.
    `course`, the grader's copy of the course (`copy_course`): a folder of `read_only` in
    one of the course's `COURSE_FOLDERS` is bound from its place in the copy, at its own
    path (the virtual environment, often in the checkout too, is bound as it is).
    """
    size = [] if tmp_bytes is None else ["--size", str(tmp_bytes)]
    args = [bwrap]
    for folder in SYSTEM_FOLDERS:
        args += ["--ro-bind-try", folder, folder]
    args += ["--dev", "/dev", *size, "--tmpfs", "/dev/shm", "--proc", "/proc"]
    args += [*size, "--tmpfs", "/tmp"]
    paths = sorted({Path(path).resolve() for path in read_only}, key=lambda p: len(p.parts))
    for path in paths:
        source = path
        if course is not None and any(path.is_relative_to(REPO_ROOT / n) for n in COURSE_FOLDERS):
            source = course / path.relative_to(REPO_ROOT)
        if source.exists() and str(path) not in SYSTEM_FOLDERS:
            args += ["--ro-bind", str(source), str(path)]
    args += ["--bind", str(work), str(work), "--chdir", str(work)]
    args += ["--remount-ro", "/proc", "--remount-ro", "/dev", *ISOLATION]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return [*args, "--", *command]


def copy_course(folder: Path) -> Path:
    """Copies the course's `COURSE_FOLDERS` into `folder` (no `__pycache__`) and returns it:
    the sandboxes see this copy (read-only), which no one edits while a class is graded."""
    for name in COURSE_FOLDERS:
        shutil.copytree(
            REPO_ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    return folder


def sandbox_root(pid: int) -> Path | None:
    """The root folder as the command that bwrap process `pid` runs sees it, or None.

    bwrap forks once: its child is PID 1 of the new PID namespace, and the command is that
    child's child; `/proc/<its pid>/root` shows its private `/tmp`, which the grader may
    read (the sandbox's user namespace belongs to the grader's own user).
    """
    for _ in range(2):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if not children:
            return None
        pid = int(children[0])
    return Path(f"/proc/{pid}/root")


USERNS_SETTING = "kernel.apparmor_restrict_unprivileged_userns"


def bwrap_version(path: str) -> tuple[int, ...]:
    """`bwrap --version`'s numbers (`bubblewrap 0.8.0`: (0, 8, 0)); () where it says none."""
    try:
        said = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.search(r"(\d+(?:\.\d+)+)", said.stdout)
    return tuple(int(part) for part in found.group(1).split(".")) if found else ()


def bwrap_fix() -> str:
    """Returns what to do where bwrap is missing or blocked, with the exact commands."""
    path = shutil.which("bwrap")
    if path is None:
        return (
            "bwrap is not installed. Debian/Ubuntu: sudo apt-get install bubblewrap; "
            "Fedora: sudo dnf install bubblewrap"
        )
    version = bwrap_version(path)
    if version and version < (0, 8):
        return (
            f"bwrap {'.'.join(map(str, version))} is older than 0.8, which the sandbox needs "
            "(--disable-userns, --size): install bubblewrap 0.8 or later (Debian 12 and "
            "Ubuntu 24.04 have it; else build it from "
            "https://github.com/containers/bubblewrap/releases)"
        )
    setting = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    try:
        restricted = setting.read_text().strip() == "1"
    except OSError:
        restricted = False
    if restricted:
        return (
            f"bwrap cannot make user namespaces: Ubuntu's AppArmor setting {USERNS_SETTING} "
            "is 1 (the default since Ubuntu 23.10). Allow them until reboot: sudo sysctl -w "
            f"{USERNS_SETTING}=0; for good: echo '{USERNS_SETTING}=0' | sudo tee "
            "/etc/sysctl.d/60-userns.conf && sudo sysctl --system (or load an AppArmor "
            "profile that gives /usr/bin/bwrap `userns`, as Ubuntu 25.04's "
            "bwrap-userns-restrict does)"
        )
    return (
        "bwrap cannot make user namespaces here (in a container: run it with user namespaces "
        f"allowed; on Ubuntu 23.10+: sudo sysctl -w {USERNS_SETTING}=0)"
    )
