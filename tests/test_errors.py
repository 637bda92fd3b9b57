"""Tests of utils/errors.py: errors shown in one line."""

import os

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


def test_decoder_messages_takes_the_decoder_lines_and_passes_the_others_on(capfd):
    with errors.decoder_messages() as messages:
        os.write(2, b"E0000 00:00:17.6 6258 jpeg_mem.cc:329] Premature end of JPEG data.\n")
        os.write(2, b"something else went wrong\n")
        assert messages == []  # Filled when the block ends.
    assert messages == ["Premature end of JPEG data."]
    assert capfd.readouterr().err == "something else went wrong\n"


def test_decoder_messages_catches_tensorflow_s_line_on_a_truncated_jpeg(capfd):
    pixels = tf.random.stateless_uniform([128, 128, 3], seed=(1, 2), maxval=256, dtype=tf.int32)
    image = tf.io.encode_jpeg(tf.cast(pixels, tf.uint8)).numpy()
    with errors.decoder_messages() as messages:
        try:
            tf.io.decode_jpeg(image[: len(image) // 2], channels=3)
        except tf.errors.InvalidArgumentError:
            pass
    assert [m.split(" Stopped")[0] for m in messages] == ["Premature end of JPEG data."]
    assert "jpeg_mem.cc" not in capfd.readouterr().err
