"""Lesson 05's own equipment (notebooks/05_accelerator_waiting.py).

Its checks are utils/checks/accelerator_waiting.py.
"""
