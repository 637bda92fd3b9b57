"""The learner's kernel and the sandbox: the processes a submission's code runs in.

`inside/` is the grader's code that runs inside the learner's kernel, the one part of the
grader the kernel imports; the rest starts, drives and bounds the kernel from outside.
"""
