"""Tests of utils/float_formats.py."""

from utils import float_formats


def test_describe_float_formats_shows_that_float16_loses_a_small_gradient():
    lines = float_formats.describe_float_formats()
    assert lines == [
        " float32: largest 3.4e+38, smallest normal 1.2e-38, 24 significant bits; "
        "a gradient of 1e-8 becomes 1.0e-08",
        " float16: largest 6.6e+04, smallest normal 6.1e-05, 11 significant bits; "
        "a gradient of 1e-8 becomes 0.0e+00",
        "bfloat16: largest 3.4e+38, smallest normal 1.2e-38, 8 significant bits; "
        "a gradient of 1e-8 becomes 1.0e-08",
    ]
