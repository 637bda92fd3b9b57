"""Lesson 09's own equipment (notebooks/09_grain_arrayrecord.py).

Its checks are utils/checks/grain_arrayrecord.py.
"""
