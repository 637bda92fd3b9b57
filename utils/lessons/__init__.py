"""Each lesson's own equipment, one package per lesson, named like its check module.

`utils/lessons/scale_out_reading/` holds what lesson 7 alone uses (its processes, its
tf.data service cluster), as `utils/checks/scale_out_reading.py` holds its checks. A
lesson's package imports the top of `utils` and `utils.lab`, never another lesson's
(tests/test_course_size.py checks it).
"""
