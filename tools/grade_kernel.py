"""Runs a submission's cells one by one in a sandboxed kernel that the grader drives.

The grader (outside any sandbox) starts an IPython kernel inside bubblewrap and talks to it
over ZeroMQ through Unix sockets in the submission's work folder (no network is shared:
the sandbox has none). Each cell's verdict is the kernel's reply as the grader receives it,
kept in the grader's memory: no file, report or stream that a process in the sandbox can
write decides a score. A cell that runs past its limit stops the run: the sandbox, and
every process the submission started, is killed, and the cells after it are not run.

Steps of `run_cells`:
1. Write the connection file (random key, `ipc` transport) into the work folder.
2. Start the kernel in the sandbox (`sandbox.bwrap_command`), or unsandboxed with the same
   environment and memory limit.
3. For each cell: send it, collect its printed text (capped) and error until the kernel is
   idle, or the cell's limit, or the submission's limit, or the kernel's death.
4. Kill the sandbox's whole process group; return one `CellResult` per cell.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tools import sandbox

OUTPUT_LIMIT = 4000  # Characters of printed text kept per cell.
KERNEL_START_SECONDS = 120
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclasses.dataclass
class CellResult:
    """What one cell did: `status` is ok, error, timeout, died or not run."""

    status: str
    seconds: float = 0.0
    error: str = ""
    output: str = ""


def error_line(name: str, value: str) -> str:
    """Returns one line for an error: the check's own message, else `Name: first line`."""
    value = _ANSI.sub("", value or "").strip()
    if name == "CheckFailed":
        return value[:400]
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    return f"{name}: {lines[0] if lines else ''}".strip()[:400]


class SandboxedKernel:
    """An IPython kernel in a work folder, sandboxed when `bwrap` is a path."""

    def __init__(
        self,
        work: Path,
        env: dict[str, str],
        *,
        bwrap: str | None,
        read_only: Sequence[Path],
        memory_bytes: int,
    ):
        self.work, self.env, self.bwrap = work, env, bwrap
        self.read_only, self.memory_bytes = read_only, memory_bytes
        self.process: subprocess.Popen | None = None
        self.client = None

    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        connection = self.work / "kernel.json"
        write_connection_file(
            str(connection), transport="ipc", ip=str(self.work / "k"),
            key=secrets.token_hex(16).encode(),
        )  # fmt: skip
        command = sandbox.with_memory_limit(
            [sys.executable, "-m", "ipykernel_launcher", "-f", str(connection),
             "--IPKernelApp.log_level=CRITICAL"],
            self.memory_bytes,
        )  # fmt: skip
        env = self.env
        if self.bwrap:
            command = sandbox.bwrap_command(
                self.bwrap, command, work=self.work, env=env, read_only=self.read_only
            )
            env = {}
        self.process = subprocess.Popen(
            command, cwd=self.work, env=env or None, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.client = BlockingKernelClient(connection_file=str(connection))
        self.client.load_connection_file()
        self.client.start_channels()
        deadline = time.monotonic() + KERNEL_START_SECONDS
        while True:  # wait_for_ready, but giving up at once if the kernel died.
            try:
                self.client.wait_for_ready(timeout=2)
                return
            except RuntimeError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the kernel did not start") from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def execute(self, code: str, limit: float) -> CellResult:
        """Runs `code`; waits at most `limit` seconds for the kernel to be idle again."""
        started = time.monotonic()
        deadline = started + limit
        msg_id = self.client.execute(code, allow_stdin=False, stop_on_error=False)
        output, error, idle = [], "", False
        size = 0
        while not idle:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return CellResult("timeout", time.monotonic() - started, "", "".join(output))
            try:
                message = self.client.get_iopub_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not self.alive():
                    return CellResult("died", time.monotonic() - started,
                                      "the kernel died (memory, os._exit or a crash)",
                                      "".join(output))  # fmt: skip
                continue
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message.get("msg_type"), message.get("content", {})
            if kind == "stream" and size < OUTPUT_LIMIT:
                text = str(content.get("text", ""))[: OUTPUT_LIMIT - size]
                output.append(text)
                size += len(text)
            elif kind == "error" and not error:
                error = error_line(str(content.get("ename")), str(content.get("evalue")))
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        status = "error" if error else "ok"
        while True:  # The reply says "error" too where an error was printed without a message.
            try:
                reply = self.client.get_shell_msg(timeout=max(deadline - time.monotonic(), 1.0))
            except queue.Empty:
                break
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply.get("content", {}).get("status") != "ok" and not error:
                status, error = "error", "the cell failed"
            break
        return CellResult(status, time.monotonic() - started, error, "".join(output))

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
        if self.process is not None:
            try:  # The sandbox's group: bwrap, whose end ends every process inside it.
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()


def run_cells(
    cells: Sequence[str],
    limits: Sequence[float],
    kernel: SandboxedKernel,
    *,
    total_limit: float,
    before_stop=None,
) -> list[CellResult]:
    """Runs `cells` in order, each within its limit, all within `total_limit` seconds.

    The first cell that times out, or kills the kernel, stops the run; the rest are "not
    run". `before_stop(results)`, if given, is called after the cells, while the kernel
    still runs (the judge may still be asking it). Never raises for what a cell does.
    """
    results: list[CellResult] = []
    started = time.monotonic()
    try:
        kernel.start()
    except Exception as error:  # A kernel that cannot start is the grader's problem to say.
        return [CellResult("not run", error=f"the kernel did not start: {error}") for _ in cells]
    try:
        for code, limit in zip(cells, limits, strict=True):
            left = total_limit - (time.monotonic() - started)
            if left <= 0:
                results.append(CellResult("not run", error="the submission's time was up"))
                continue
            if results and results[-1].status in ("timeout", "died", "not run"):
                results.append(CellResult("not run"))
                continue
            result = kernel.execute(code, min(limit, left))
            if result.status == "timeout":
                result.error = f"timed out after {min(limit, left):.0f} s" + (
                    " (the submission's time limit)" if left < limit else ""
                )
            results.append(result)
        if before_stop is not None:
            before_stop(results)
    finally:
        kernel.stop()
    return results
