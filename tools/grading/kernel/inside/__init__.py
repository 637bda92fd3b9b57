"""The grader's code inside the learner's kernel: it answers the judge with data.

The kernel imports this package and nothing else of the grader's (`cells.start_code`): in
the sandbox it is read-only at its own path, in the grader's copy of the course's `tools/`
(`cells.KERNEL_SIDE`), and `PYTHONPATH` names the course. It describes what each TODO
made (`wire.py` data, TensorFlow graphs) and decides no verdict: the judge
(`tools/grading/judge/`) checks what it sends like any data, so learner code that changes
it can only send other data. Standard library, numpy, TensorFlow and the course's `utils`
only; what a lab alone needs (Grain, Beam) is imported where it is used.
"""
