"""Lesson 08's own equipment (notebooks/08_where_the_time_goes.py).

Its checks are utils/checks/where_the_time_goes.py.
"""
