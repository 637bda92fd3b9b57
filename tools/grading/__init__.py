"""Grading, as a list of small named steps (nbgrader's converters are the model).

`tools/grade.py` runs them in this order for each submission (`STEPS` there):

1. `read`: the submission's notebook and its learner id (`identify.py`).
2. `identify`: which lab it is (`identify.py`).
3. `choose_lab`: the lab of its course version (`versions.py`).
4. `restore`: the lab's protected cells around the learner's own (`restore.py`).
5. `flag`: what the learner's code does that the instructor should read (`flags.py`,
   `syntax_flags.py`).
6. `prepare`: the code each cell runs, with the grader's snapshot and guard
   (`prepare.py`, `kernel_guard.py`).
7. `run`: the cells in a sandboxed kernel (`run.py`, with `tools/grade_kernel.py`).
8. `score`: each TODO's verdict and message (`score.py`).

Around them: time limits per lesson (`limits.py`) and the reports (`reports.py`,
`feedback.py`). What the steps share is in `model.py`.
"""
