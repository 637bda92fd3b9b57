"""Tests of tools/grading/kernel/sandbox.py: the memory limit, what a command in bwrap can reach."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tools.grading.kernel import sandbox

BWRAP = sandbox.find_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None,
    reason="bwrap is missing or cannot make user namespaces here (apt-get install bubblewrap)",
)
ALLOCATE = """
import numpy as np
try:
    np.zeros(9 * 10**9, dtype=np.uint8)
    print("allocated")
except MemoryError:
    print("MemoryError")
"""


def _run(command, work, **kwargs):
    # The course and this Python, re-bound read-only as the grader does: a checkout or a
    # virtual environment under /tmp is otherwise hidden by the sandbox's private /tmp.
    needed = [REPO_ROOT, Path(sys.prefix), Path(sys.base_prefix)]
    full = sandbox.bwrap_command(
        BWRAP, command, work=work, env={"PATH": "/usr/bin:/bin"}, read_only=needed
    )
    return subprocess.run(full, capture_output=True, text=True, timeout=60, **kwargs)


def test_the_memory_limit_stops_a_9_gb_allocation():
    limited = sandbox.with_memory_limit([sys.executable, "-c", ALLOCATE], 2 * 2**30)
    result = subprocess.run(limited, capture_output=True, text=True, timeout=60)
    assert result.stdout == "MemoryError\n", result.stderr


def test_the_private_tmp_comes_before_the_binds_under_it(tmp_path):
    command = sandbox.bwrap_command(
        "bwrap", ["true"], work=tmp_path, env={"A": "1"}, read_only=[REPO_ROOT, tmp_path.parent]
    )
    tmpfs = command.index("--tmpfs", command.index("--proc"))
    assert command.index("--ro-bind", tmpfs) > tmpfs  # Binds under /tmp come after it.
    assert command[tmpfs + 1] == "/tmp"
    assert command.index("--bind") > tmpfs
    assert command[command.index("--bind") : command.index("--bind") + 3] == [
        "--bind",
        str(tmp_path),
        str(tmp_path),
    ]
    assert ["--setenv", "A", "1"] == command[command.index("--setenv") :][:3]
    assert command[-2:] == ["--", "true"]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in command


@needs_bwrap
def test_only_the_work_folder_is_writable(tmp_path):
    script = (
        f"echo x > {REPO_ROOT}/sandbox-test.txt; echo x > /tmp/t && echo tmp-ok; "
        "echo x > work.txt && echo work-ok; ls /proc | grep -c '^[0-9]'"
    )
    result = _run(["sh", "-c", script], tmp_path)
    lines = result.stdout.split()
    assert lines[:2] == ["tmp-ok", "work-ok"]
    assert int(lines[2]) <= 4  # Its own processes only: init, sh, ls, grep.
    assert "Read-only file system" in result.stderr
    assert not (REPO_ROOT / "sandbox-test.txt").exists()
    assert (tmp_path / "work.txt").read_text() == "x\n"


@needs_bwrap
def test_no_network_but_loopback(tmp_path):
    script = (
        "import socket\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); print('loopback')\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
        "except OSError:\n    print('no network')\n"
    )
    assert _run([sys.executable, "-c", script], tmp_path).stdout == "loopback\nno network\n"


@needs_bwrap
def test_nothing_started_inside_outlives_the_command(tmp_path):
    token = "sandbox-linger-test-token"
    script = f"(sleep 300; : {token}) & setsid sh -c 'sleep 300; : {token}' & echo started"
    assert _run(["sh", "-c", script], tmp_path).stdout == "started\n"
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert token not in ps


@needs_bwrap
def test_only_the_bound_folders_are_there(tmp_path):
    """The course's solutions, sources and git history are absent; utils/ is read-only."""
    work = tmp_path / "work"
    work.mkdir()
    script = (
        f"ls {REPO_ROOT}; ls {REPO_ROOT}/solutions 2>&1 | head -c 0 || true; "
        f"test -e {REPO_ROOT}/solutions && echo solutions-there; "
        f"test -e {REPO_ROOT}/notebooks && echo sources-there; "
        f"test -e {Path.home()} && ls {Path.home()} | grep -c . ; echo done"
    )
    full = sandbox.bwrap_command(
        BWRAP, ["sh", "-c", script], work=work, env={}, read_only=[REPO_ROOT / "utils"]
    )
    result = subprocess.run(full, capture_output=True, text=True, timeout=60)
    assert result.stdout.split()[0] == "utils"
    assert "solutions-there" not in result.stdout and "sources-there" not in result.stdout
    assert result.stdout.rstrip().endswith("done")


def test_the_file_size_limit_stops_a_file_at_its_size(tmp_path):
    script = "open('big', 'wb').write(b'0' * 3_000_000)"
    limited = sandbox.with_memory_limit([sys.executable, "-c", script], 2 * 2**30, file_bytes=10**6)
    result = subprocess.run(limited, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "OSError: [Errno 27] File too large" in result.stderr
    assert (tmp_path / "big").stat().st_size == 10**6


@needs_bwrap
def test_the_private_tmp_has_its_size_and_the_grader_reads_it(tmp_path):
    script = "head -c 3000000 /dev/zero > /tmp/fill || echo full; sleep 60"
    full = sandbox.bwrap_command(
        BWRAP, ["sh", "-c", script], work=tmp_path, env={"PATH": "/usr/bin:/bin"}, tmp_bytes=10**6
    )
    process = subprocess.Popen(full, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "full\n"
        found = os.statvfs(sandbox.sandbox_root(process.pid) / "tmp")
        assert abs(found.f_blocks * found.f_frsize - 10**6) < 4096 and found.f_bavail == 0
    finally:
        process.kill()
        process.wait()
