"""The grader's cells in the learner's kernel: its side started, each TODO's values kept.

Before the first TODO cell the kernel imports the grader's kernel side (`inside/`, all of
the grader that it imports; its sandbox shows the course's `tools/` read-only) and starts
answering the judge on a socket in the work folder (`start_code`); right after each TODO
cell it keeps what the TODO bound (`keep_code`); a check cell's other lines end by taking
the solution's values the judge sent (`references_code`); after the last cell it says no
more will come (`FINISH_CODE`). In the kernel the grader's names start with `_grader_`.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_SIDE = Path(__file__).parent / "inside"  # The one folder of the grader's it imports.
SOCKET_NAME = "j.sock"  # In the work folder; short, as a Unix socket's path must be.
_ANSWERS = "_grader_answers"  # The kernel's name for `inside/answers.py`.


def start_code(address: Path, seconds: float) -> str:
    """The kernel's first grader cell: the grader's kernel side imported, its answers started."""
    return (
        "# Grader: answer the judge about what each TODO makes.\n"
        f"from tools.grading.kernel.inside import answers as {_ANSWERS}\n"
        "from tools.grading.kernel.inside import server as _grader_server\n"
        f"_grader_server.start({str(address)!r}, {seconds!r}, globals())\n"
    )


def keep_code(todo: int, names: list[str]) -> str:
    return f"# Grader: keep what TODO {todo} made.\n{_ANSWERS}.keep({todo}, {names!r}, globals())\n"


def references_code(todo: int) -> str:
    """The line that binds the solution's values the judge sent for TODO `todo`, if any."""
    return f"globals().update({_ANSWERS}.references.pop({todo}, {{}}))"


FINISH_CODE = f"# Grader: the last cell has run.\n{_ANSWERS}.finish()\n"
