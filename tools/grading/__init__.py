"""Grading, as a list of small named steps (nbgrader's converters are the model), in rooms.

`tools/grade.py` runs the steps in this order for each submission (`STEPS` there), each a
module of `submission/`:

1. `read`: the submission's notebook and its learner id (`identify.py`).
2. `identify`: which lab it is (`identify.py`).
3. `choose_lab`: the lab of its course version (`versions.py`).
4. `restore`: the lab's protected cells around the learner's own (`restore.py`).
5. `flag`: what the learner's code does that the instructor should read (`flags.py`,
   `syntax_flags.py`).
6. `prepare`: the code the learner's kernel runs (its cells without their checks, the
   grader's cells that keep what each TODO made) and the judge's plan (`prepare.py`).
7. `run`: the cells in a sandboxed kernel, the judge beside it in a sandbox of its own
   (`run.py`).
8. `score`: each TODO's verdict (the judge's) and message (`score.py`).

The rooms, each importing only those below it (pyproject.toml's contracts):
`classroom/` (the command line, the class's files, limits per lesson, the gradebook, the
LMS files, the reports), `submission/` (the steps), `judge/` (the judge, its plan, its
output), `kernel/` (the learner's kernel, its sandbox and work folder, and `inside/`, the
grader's code that runs in the kernel), then what they all share: `model.py`,
`feedback.py` (a message as one plain line; the learner's feedback), and `hand_in_code.py`
(the labs' hand-in cells, which the build pastes into every lab).
"""
