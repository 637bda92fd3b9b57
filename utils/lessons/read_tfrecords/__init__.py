"""Lesson 03's own equipment (notebooks/03_read_tfrecords.py).

Its checks are utils/checks/read_tfrecords.py.
"""
