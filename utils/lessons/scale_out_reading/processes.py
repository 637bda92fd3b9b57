"""Helper processes for lesson 7: on loopback, waited for with a bound, always stopped.

The processes run `python -m utils.<module> ...`; each prints one JSON line when it is
ready (or done), and exits by itself if the process that started it goes away.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import utils

LOOPBACK = "127.0.0.1"
OWNER_ENV_VAR = "TPU_SPEED_PIPELINES_OWNER_PID"


def free_loopback_port() -> int:
    """Finds a TCP port that is free on 127.0.0.1 now (the OS picks it).

    Returns:
        The port number; another process may take it before it is used.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def start_module(module: str, *arguments: str, env: dict | None = None) -> subprocess.Popen:
    """Starts `python -m module arguments...` with TF's logs quiet; its stdout is a pipe.

    Args:
        module: the module to run, such as "utils.lessons.scale_out_reading.host_processes".
        *arguments: its command-line arguments.
        env: environment variables set for it, on top of this process's.

    Returns:
        The process; its stderr goes to a temporary file, `process.error_log`.
    """
    # The course this process imported, first on the child's path: in a lab uploaded alone
    # it is only on the kernel's `sys.path` (unpacked by the set-up), not installed.
    course = str(Path(utils.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [course, os.environ.get("PYTHONPATH")]))
    child_env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        OWNER_ENV_VAR: str(os.getpid()),
        "PYTHONPATH": path,
    }
    child_env.update(env or {})
    command = [sys.executable, "-m", module, *arguments]
    error_log = tempfile.TemporaryFile(mode="w+")  # A file, not a pipe: it never fills up.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=error_log, text=True, env=child_env
    )
    process.error_log = error_log
    return process


def read_json_line(process: subprocess.Popen, *, timeout_s: float, what: str) -> dict:
    """Waits at most `timeout_s` for the next JSON line on `process`'s stdout.

    Args:
        process: a process from `start_module`.
        timeout_s: the longest wait, in seconds.
        what: what the process is, for the error message ("host 1").

    Returns:
        The JSON line, decoded.

    Raises:
        RuntimeError: the process exited first, or said nothing in time (its stderr's end
            is in the message).
    """
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
                line = process.stdout.readline()
                if line.startswith("{"):
                    return json.loads(line)
                if line == "":  # End of output: the process exited.
                    break
    stop(process)
    process.error_log.seek(0)
    error_tail = process.error_log.read().strip().splitlines()[-3:]
    status = f"exited with status {process.returncode}" if process.returncode else "timed out"
    raise RuntimeError(f"{what} {status} after at most {timeout_s:g} s: {' | '.join(error_tail)}")


def stop(process: subprocess.Popen, *, timeout_s: float = 10.0) -> None:
    """Stops a process: SIGTERM, then SIGKILL if it is still there after `timeout_s`.

    Args:
        process: the process to stop; one that has exited already is left as it is.
        timeout_s: how long to wait after each signal, in seconds.
    """
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)
    if process.stdout and not process.stdout.closed:
        process.stdout.close()


def exit_with_owner() -> None:
    """In a helper process: exit as soon as the process that started it has gone."""
    owner = int(os.environ.get(OWNER_ENV_VAR, "0"))
    if not owner:
        return

    def watch():
        while True:
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                os._exit(0)
            if os.getppid() != owner:
                os._exit(0)
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True).start()


def print_json(**values: object) -> None:
    """In a helper process: says something to the process that started it.

    Args:
        **values: what to say, as one JSON object on one line of stdout.
    """
    print(json.dumps(values), flush=True)


class CpuUse:
    """Measures the CPU time that named processes use while a `with` block runs.

    `busy_cores` gives, per name, CPU seconds (user + system, all threads) divided by the
    block's wall time: 1.0 is one core busy all the time. A process that is gone by the
    end counts what it had used when last seen.

    Example:
        with processes.CpuUse({"this notebook": os.getpid()}) as cpu:
            work()
        print(cpu.summary())
    """

    def __init__(self, pids_by_name: dict[str, int]):
        import psutil

        self._processes = {name: psutil.Process(pid) for name, pid in pids_by_name.items()}
        self.busy_cores: dict[str, float] = {}
        self.seconds = 0.0

    def _cpu_seconds(self) -> dict[str, float]:
        import psutil

        seconds = {}
        for name, process in self._processes.items():
            try:
                times = process.cpu_times()
                seconds[name] = times.user + times.system
            except psutil.NoSuchProcess:
                seconds[name] = self._start.get(name, 0.0)
        return seconds

    def __enter__(self) -> CpuUse:
        self._start = {}
        self._start = self._cpu_seconds()
        self._start_time = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        end = self._cpu_seconds()
        self.seconds = time.perf_counter() - self._start_time
        self.busy_cores = {
            name: (end[name] - self._start[name]) / self.seconds for name in self._processes
        }

    @property
    def total(self) -> float:
        """Cores busy, all the processes together."""
        return sum(self.busy_cores.values())

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds used, all the processes together."""
        return self.total * self.seconds

    def summary(self) -> str:
        """Says how busy the processes kept the cores.

        Returns:
            One line: cores busy per process and together, of this machine's cores.
        """
        parts = ", ".join(f"{name} {cores:.2f}" for name, cores in self.busy_cores.items())
        return f"CPU cores busy: {parts}; together {self.total:.2f} of {os.cpu_count()}."
