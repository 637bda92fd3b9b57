"""Helpers for the tpu-speed-pipelines labs: what a lesson calls, and a learner may open.

Display, timing and comparisons, the records and pipeline helpers, the simulated storage
(`storage`), shard files (`shard_files`) and image files (`readable_images`), the model
and its training, errors. The lab's equipment, which a learner never calls, is in `utils.lab`, each
lesson's own in `utils.lessons`, the checks in `utils.checks` (CONTRIBUTING.md's module map)."""

# The set-up cell of every lab looks for this line to tell the course's `utils` package
# from any other module named `utils` (a learner's utils.py, the PyPI package `utils`).
COURSE = "tpu-speed-pipelines"
