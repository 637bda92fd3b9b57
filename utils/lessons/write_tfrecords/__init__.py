"""Lesson 02's own equipment (notebooks/02_write_tfrecords.py).

Its checks are utils/checks/write_tfrecords.py.
"""
