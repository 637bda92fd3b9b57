"""The judge: a process that runs no learner code and decides each TODO's verdict.

Its plan is made from the lab (`judge_plan.py`); it asks the learner's kernel for what each
TODO made, as data (`remote*.py`, `graphs.py`), runs the lab's check cells on it
(`judge.py`) and signs its verdicts, which the grader reads as it runs.
"""
