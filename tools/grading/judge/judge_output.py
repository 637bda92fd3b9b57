"""The judge's output, read while the judge runs: its signed verdicts and its last error.

Takes the judge's process (`start.start_judge`) and the key its verdicts are signed
with; gives one `Verdict` per TODO. Both pipes are read on threads of their own as the
judge writes: a learner's graph that prints in the judge (`tf.print`) never fills a pipe
that the judge then waits on, and the grader keeps only the verdicts and one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import subprocess
import threading

LINE_LIMIT = 2**16  # Bytes of a line of the judge's output read; the rest is dropped.


@dataclasses.dataclass
class Verdict:
    """A TODO's verdict as the judge gave it."""

    passed: bool
    message: str


def _lines(stream):
    """The lines of a binary `stream` as text, each cut at `LINE_LIMIT` bytes (the rest of a
    longer line is read and dropped), until it ends."""
    cut = False
    for chunk in iter(lambda: stream.readline(LINE_LIMIT), b""):
        if not cut:
            yield chunk.decode(errors="replace")
        cut = not chunk.endswith(b"\n")


class JudgeOutput:
    """Reads the judge's stdout and stderr on two threads while it runs, keeping only the
    verdicts signed with `key` and the last line of its errors: however much a learner's
    graph prints there, the judge never waits on a full pipe, and the grader keeps little."""

    def __init__(self, process: subprocess.Popen, key: bytes):
        self.key, self.found, self.last_error = key, {}, ""
        self.threads = [
            threading.Thread(target=self._read, args=(process.stdout, self._verdict), daemon=True),
            threading.Thread(target=self._read, args=(process.stderr, self._error), daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    @staticmethod
    def _read(stream, take) -> None:
        with stream:
            for line in _lines(stream):
                take(line)

    def _verdict(self, line: str) -> None:
        found = verdict_of(line, self.key)
        if found is not None:
            self.found[found[0]] = found[1]

    def _error(self, line: str) -> None:
        if line.strip():
            self.last_error = line.strip()

    def verdicts(self, timeout: float = 10.0) -> dict[int, Verdict]:
        """The verdicts, once the judge's output has ended (after `timeout` s, as they are);
        where the judge's last error line names an error, it is kept under TODO 0."""
        for thread in self.threads:
            thread.join(timeout)
        verdicts = dict(self.found)
        if "Error" in self.last_error:
            verdicts[0] = Verdict(False, self.last_error[:300])
        return verdicts


def verdict_of(line: str, key: bytes) -> tuple[int, Verdict] | None:
    """(TODO, verdict) of one line of the judge's output, or None if it is not signed with `key`."""
    if not line.startswith("VERDICT "):
        return None
    payload, _, signature = line[len("VERDICT ") :].strip().rpartition(" ")
    expected = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signature, expected):
        return None
    found = json.loads(payload)
    return int(found["todo"]), Verdict(bool(found["passed"]), str(found["message"]))


def read_verdicts(output: str, key: bytes, errors: str = "") -> dict[int, Verdict]:
    """The verdicts of the judge's output; lines not signed with `key` are ignored.

    Where the judge stopped without a verdict, its last error line is kept under TODO 0,
    for the report (a grader's problem, not the learner's).
    """
    verdicts = {}
    last = [line for line in errors.splitlines() if line.strip()][-1:]
    if last and "Error" in last[0]:
        verdicts[0] = Verdict(False, last[0].strip()[:300])
    for line in output.splitlines():
        found = verdict_of(line, key)
        if found is not None:
            verdicts[found[0]] = found[1]
    return verdicts
