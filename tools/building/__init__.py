"""The build (`python -m tools.build_notebooks`): its steps, the set-up cell, lesson parameters.

`variants.py` runs the steps that make a lesson's lab and solution from its source
(`regions.py`, `hand_in.py`, `header.py`, `setup_cell.py`), `outputs.py` executes the
solution, `saved.py` writes the solved functions that are also helpers into `utils`. What the
steps share is in `model.py`. The tests, the grader and the course run take each lesson's
small parameters from `lesson_parameters.py`.
"""
