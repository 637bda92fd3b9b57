"""Which of the judge's handlers takes a call given objects that do not cross as data.

A check may pass its own objects to the learner's function: a Beam pipeline (lab 6's
`build_conversion`: `remote_beam.py`). It is told apart by its type's name, so that Beam is
imported only where a lab's check passes one.
"""

from __future__ import annotations

from collections.abc import Callable


def caller(args: tuple) -> Callable | None:
    """The handler `handler(function, args)` for a call given `args`; None for plain ones."""
    names = {type(arg).__name__ for arg in args}
    if "Pipeline" in names:
        from tools.grading.judge import remote_beam

        return remote_beam.call
    return None
