"""Runs a submission's cells one by one in a sandboxed kernel that the grader drives.

The grader (outside any sandbox) starts an IPython kernel inside bubblewrap and talks to it
over ZeroMQ through Unix sockets in the submission's work folder (no network is shared:
the sandbox has none). Each cell's verdict is the kernel's reply as the grader receives it,
kept in the grader's memory: no file, report or stream that a process in the sandbox can
write decides a score. A cell that runs past its limit stops the run: the sandbox, and
every process the submission started, is killed, and the cells after it are not run;
but a cell the caller names `interruptible` (a learner's TODO cell) is interrupted, as
Jupyter's stop button does, and where the kernel is idle again within
`INTERRUPT_SECONDS`, the run goes on. After each cell, `stand_in` may give code to run
next (the solution's TODO cell, in place of a learner's that failed).

Steps of `run_cells`:
1. Write the connection file (random key, `ipc` transport) into the work folder.
2. Start the kernel in the sandbox (`sandbox.bwrap_command`: a sized `/tmp`, a file-size
   limit), or unsandboxed with the same environment and limits.
3. For each cell: send it, read what it prints (the kernel sends the first `OUTPUT_LIMIT`
   characters of each cell and drops the rest as it is written: `KERNEL_MAIN`) and
   its error until the kernel is idle, or the cell's limit, or the submission's limit, or
   the kernel's death, or `watch` (called about once a second and when the cell ends) says
   the submission wrote past its disk bounds: then the sandbox is killed at once.
4. Kill the sandbox's whole process group; return one `CellResult` per cell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from tools.grading.kernel import cells, sandbox

OUTPUT_LIMIT = 4000  # Characters of printed text kept per cell.
CUT_LINE = f"\n[the grader keeps the first {OUTPUT_LIMIT:,} characters a cell prints]\n"
# Starts the kernel as `ipykernel_launcher` does, but with a standard output and error that
# send the first `OUTPUT_LIMIT` characters of each cell (then `CUT_LINE`, once) and drop the
# rest as it is written: a flood of printing (a thread printing 1 MB lines without pause)
# fills no buffer of the kernel's and sends the grader nothing to read. It bounds what is
# kept, not what a cell may print.
KERNEL_MAIN = """
import sys
from pathlib import Path

if sys.path[0] == "" or Path(sys.path[0]) == Path.cwd():
    del sys.path[0]
from ipykernel import iostream, kernelapp


class BoundedOutStream(iostream.OutStream):
    def write(self, string):
        if not isinstance(string, str):
            return super().write(string)
        cell = self.parent_header.get("msg_id")
        sent = self.__dict__.setdefault("_grader_sent", {})
        before = sent.get(cell, 0)
        if before < LIMIT:
            sent[cell] = before + len(string)
            cut = CUT_LINE if before + len(string) > LIMIT else ""
            super().write(string[: LIMIT - before] + cut)
        return len(string)


kernelapp.launch_new_instance()
"""
KERNEL_START_SECONDS = 120
INTERRUPT_SECONDS = 10  # How long an interrupted cell may take to stop.
KERNEL_DIED = "the kernel died (memory, os._exit or a crash)"
SOCKET_PATH_BYTES = 107  # Linux's sun_path holds 108 bytes, the last one a NUL.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# TensorFlow's wrapping of an op's error: `{{function_node __wrapped__...}}`, ` [Op:...]`.
_TF_WRAPPING = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]( name: \S*)?")


@dataclasses.dataclass
class CellResult:
    """What one cell did: `status` is ok, error, timeout, died or not run; `printed` counts
    the characters it printed, of which `output` keeps the first `OUTPUT_LIMIT`."""

    status: str
    seconds: float = 0.0
    error: str = ""
    output: str = ""
    printed: int = 0


def error_line(name: str, value: str) -> str:
    """Returns one line for an error: the check's own message, else `Name: first line`."""
    value = _TF_WRAPPING.sub("", _ANSI.sub("", value or "")).strip()
    if name == "CheckFailed":
        return value[:400]
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    return f"{name}: {lines[0] if lines else ''}".strip()[:400]


class SandboxedKernel:
    """An IPython kernel in a work folder, sandboxed when `bwrap` is a path. Besides the
    folders of `read_only` it sees the course's `tools/`, read-only, for the grader's kernel
    side (`cells.KERNEL_SIDE`) that
    the grader's cells import."""

    def __init__(
        self,
        work: Path,
        env: dict[str, str],
        *,
        bwrap: str | None,
        read_only: Sequence[Path],
        memory_bytes: int,
        tmp_bytes: int | None = None,
        file_bytes: int | None = None,
        watch=None,
        course: Path | None = None,
    ):
        """`tmp_bytes` sizes the sandbox's `/tmp`, `file_bytes` is RLIMIT_FSIZE, `course`
        the grader's copy of the course, and `watch()`, if given, returns "" or why the run
        must stop (a disk bound passed)."""
        self.work, self.env, self.bwrap = work, env, bwrap
        # All of tools/, not the kernel side alone: the folders bwrap would make for that
        # one bind (tools/, tools/grading/) would be the sandbox's own, and writable.
        tools = cells.KERNEL_SIDE.parents[2]
        self.read_only, self.memory_bytes = [*read_only, tools], memory_bytes
        self.tmp_bytes, self.file_bytes, self.watch = tmp_bytes, file_bytes, watch
        self.course = course
        self.process: subprocess.Popen | None = None
        self.client = None
        self.running = ""  # The id of the last cell sent.

    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        connection = self.work / "kernel.json"
        longest = f"{self.work / 'k'}-65535"  # ZeroMQ's ipc address: `ip`, then "-port".
        if len(os.fsencode(longest)) > SOCKET_PATH_BYTES:
            raise RuntimeError(
                f"its socket's path ({longest}) is longer than a Unix socket allows "
                f"({SOCKET_PATH_BYTES} bytes): set TMPDIR to a shorter folder"
            )
        write_connection_file(
            str(connection),
            transport="ipc",
            ip=str(self.work / "k"),
            key=secrets.token_hex(16).encode(),
        )
        bounded = f"LIMIT = {OUTPUT_LIMIT}\nCUT_LINE = {CUT_LINE!r}\n"
        command = sandbox.with_memory_limit(
            [
                sys.executable,
                "-c",
                bounded + KERNEL_MAIN,
                "-f",
                str(connection),
                "--IPKernelApp.log_level=CRITICAL",
                "--IPKernelApp.outstream_class=__main__.BoundedOutStream",
            ],
            self.memory_bytes,
            file_bytes=self.file_bytes,
        )
        env = self.env
        if self.bwrap:
            command = sandbox.bwrap_command(
                self.bwrap,
                command,
                work=self.work,
                env=env,
                read_only=self.read_only,
                tmp_bytes=self.tmp_bytes,
                course=self.course,
            )
            env = {}
        self.process = subprocess.Popen(
            command,
            cwd=self.work,
            env=env or None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
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

    def _past_bounds(self) -> str:
        """Why the run stops (`watch`), else ""; the sandbox is killed before this returns."""
        stop = self.watch() if self.watch is not None else ""
        if stop and self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        return stop

    def interrupt(self, seconds: float = INTERRUPT_SECONDS) -> bool:
        """Interrupts the running cell (SIGINT, as Jupyter's stop button); returns whether the
        kernel is idle again within `seconds` (a cell stuck in native code may not be)."""
        self.client.control_channel.send(self.client.session.msg("interrupt_request", {}))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                if not self.alive():
                    return False
                continue
            idle = message.get("content", {}).get("execution_state") == "idle"
            if idle and message.get("parent_header", {}).get("msg_id") == self.running:
                return True
        return False

    def execute(self, code: str, limit: float, *, history: bool = True) -> CellResult:
        """Runs `code`; waits at most `limit` seconds for the kernel to be idle again.
        `history=False`: the cell is not kept in the kernel's history (`In`)."""
        started = time.monotonic()
        deadline, watched = started + limit, started
        msg_id = self.client.execute(
            code, store_history=history, allow_stdin=False, stop_on_error=False
        )
        self.running = msg_id
        output, error, idle = [], "", False
        printed = 0

        def result(status: str, why: str = "") -> CellResult:
            text = "".join(output)
            return CellResult(status, time.monotonic() - started, why, text, printed)

        while not idle:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result("timeout")
            if time.monotonic() - watched >= 1.0:
                watched, stop = time.monotonic(), self._past_bounds()
                if stop:
                    return result("died", stop)
            try:
                message = self.client.get_iopub_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not self.alive():
                    return result("died", KERNEL_DIED)
                continue
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message.get("msg_type"), message.get("content", {})
            if kind == "stream":
                text = str(content.get("text", ""))
                if printed < OUTPUT_LIMIT:
                    output.append(text[: OUTPUT_LIMIT - printed])
                printed += len(text)
            elif kind == "error" and not error:
                error = error_line(str(content.get("ename")), str(content.get("evalue")))
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        stop = self._past_bounds()
        if stop:
            return result("died", stop)
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
        return result(status, error)

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
    interruptible: Collection[int] = (),
    stand_in: Callable[[int, list[CellResult]], str] | None = None,
) -> list[CellResult]:
    """Runs `cells` in order, each within its limit, all within `total_limit` seconds.

    The first cell that times out, or kills the kernel, stops the run; the rest are "not
    run". A cell of `interruptible` (indexes) that times out is interrupted instead, and
    where that stops it the run goes on, the cell said as an error. `stand_in(index,
    results)`, if given, is asked after each cell for code to run next ("" for none; run
    out of the kernel's history, its time counted in the submission's, its result said
    only where it stops the run). `before_stop(results)`, if given, is called after the
    cells, while the kernel still runs (the judge may still be asking it). Never raises
    for what a cell does.
    """
    results: list[CellResult] = []
    started = time.monotonic()
    try:
        kernel.start()
    except Exception as error:  # A kernel that cannot start is the grader's problem to say.
        return [CellResult("not run", error=f"the kernel did not start: {error}") for _ in cells]
    try:
        for index, (code, limit) in enumerate(zip(cells, limits, strict=True)):
            left = total_limit - (time.monotonic() - started)
            if left <= 0:
                results.append(CellResult("not run", error="the submission's time was up"))
                continue
            if results and results[-1].status in ("timeout", "died", "not run"):
                results.append(CellResult("not run"))
                continue
            result = kernel.execute(code, min(limit, left))
            if result.status == "timeout":
                result.error = (
                    f"ran past the submission's time limit ({total_limit:.0f} s in all)"
                    if left < limit
                    else f"ran past the cell's time limit ({limit:.0f} s)"
                )
                if index in interruptible and left >= limit and kernel.interrupt():
                    result.status = "error"
            results.append(result)
            extra = stand_in(index, results) if stand_in is not None else ""
            left = total_limit - (time.monotonic() - started)
            if extra and left > 0:
                ran = kernel.execute(extra, min(limit, left), history=False)
                if ran.status in ("timeout", "died"):
                    results[-1] = ran
        if before_stop is not None:
            before_stop(results)
    finally:
        kernel.stop()
    return results
