"""Lesson 06's own equipment (notebooks/06_convert_with_beam.py).

Its checks are utils/checks/convert_with_beam.py.
"""
