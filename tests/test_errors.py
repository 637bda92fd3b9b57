"""Tests of utils/errors.py: errors shown in one line."""

import tensorflow as tf

from utils import errors


def test_first_line_is_the_message_s_first_line_or_the_type_name():
    assert errors.first_line(ValueError("  bad value\nmore detail")) == "bad value"
    assert errors.first_line(RuntimeError()) == "RuntimeError"


def test_error_message_drops_tensorflow_s_wrapping():
    error = tf.errors.InvalidArgumentError(
        None, None, "{{function_node __wrapped__DecodeJpeg}} Invalid JPEG data [Op:DecodeJpeg]\nx"
    )
    assert errors.error_message(error) == "Invalid JPEG data"
