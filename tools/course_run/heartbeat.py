"""A line every 30 s while a notebook runs, naming the section its running cell is in."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

HEARTBEAT_SECONDS = 30


class Heartbeat:
    """Prints a line every `every_seconds` while a lesson runs, naming the section it is in.

    Papermill saves the notebook it executes as cells run; the line reads the cell that
    is running from that copy, when it can.
    """

    def __init__(self, name: str, running: Path, every_seconds: float = HEARTBEAT_SECONDS):
        self.name, self.running, self.every_seconds = name, running, every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._start = time.monotonic()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_seconds):
            elapsed = int(time.monotonic() - self._start)
            print(
                f"  {self.name}: still running, {elapsed // 60} m {elapsed % 60:02d} s"
                f"{self._where()}",
                flush=True,
            )

    def _where(self) -> str:
        """', in "HEADING" (cell N of M)' from papermill's copy, or "" if it cannot be read.

        HEADING is the last markdown heading above the running cell ("the set-up" for
        the set-up cell).
        """
        try:
            cells = json.loads(self.running.read_text())["cells"]
        except (OSError, ValueError, KeyError):
            return ""
        code = [c for c in cells if c.get("cell_type") == "code"]
        heading = None
        for cell in cells:
            source = "".join(cell.get("source", ""))
            if cell.get("cell_type") == "markdown":
                titles = [line for line in source.splitlines() if line.startswith("#")]
                heading = titles[-1].lstrip("#").strip() if titles else heading
            elif cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
                if "setup" in cell.get("metadata", {}).get("tags", []):
                    heading = "the set-up"
                number = code.index(cell) + 1
                named = f' in "{heading}"' if heading else ""
                return f",{named} (cell {number} of {len(code)})"
        return ""
