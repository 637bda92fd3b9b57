"""One submission's steps, in `tools/grade.py`'s order: read and identify it, choose its
lab, restore the lab's cells around the learner's, flag, prepare what the kernel and the
judge run, run them, score each TODO."""
