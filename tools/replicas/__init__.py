"""Replicas of the platforms learners use: their Python, their packages, the labs run there.

Each replica is a virtual environment made from a checked-in list (`<name>.txt` in this
folder: the platform's packages that the course touches, pinned, with the list's source and
date in its header), on the platform's Python (from pyenv). `python -m tools.replicas`
builds them (cached, keyed by the list) and runs the labs and solutions in each, each
notebook alone in an empty folder with an empty HOME; docs/replicas.md says what runs where.
"""
