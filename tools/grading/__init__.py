"""Grading, as a list of small named steps (nbgrader's converters are the model).

`tools/grade.py` runs them in this order for each submission (`STEPS` there):

1. `read`: the submission's notebook and its learner id (`identify.py`).
2. `identify`: which lab it is (`identify.py`).
3. `choose_lab`: the lab of its course version (`versions.py`).
4. `restore`: the lab's protected cells around the learner's own (`restore.py`).
5. `flag`: what the learner's code does that the instructor should read (`flags.py`,
   `syntax_flags.py`).
6. `prepare`: the code the learner's kernel runs (its cells without their checks, what
   each TODO made kept) and the judge's plan (`prepare.py`, `sealed.py`, `judge_plan.py`).
7. `run`: the cells in a sandboxed kernel, the judge beside it in a sandbox of its own
   (`run.py`, `judge.py`, with `tools/grading/grade_kernel.py`).
8. `score`: each TODO's verdict (the judge's) and message (`score.py`).

Around them: time limits per lesson (`limits.py`) and the reports (`reports.py`,
`feedback.py`). What the steps share is in `model.py`.
"""
