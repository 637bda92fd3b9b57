"""Lesson 07's own equipment (notebooks/07_scale_out_reading.py).

Its checks are utils/checks/scale_out_reading.py.
"""
