"""Helpers for the tpu-speed-pipelines labs: data, storage, timing, display, checks."""

# The set-up cell of every lab looks for this line to tell the course's `utils` package
# from any other module named `utils` (a learner's utils.py, the PyPI package `utils`).
COURSE = "tpu-speed-pipelines"
