"""Errors shown in one line: what the course prints when something it ran raised."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf


def first_line(error: Exception) -> str:
    """Returns the first line of an error's message.

    Args:
        error: any exception.

    Returns:
        The message's first line, stripped; the error's type name when the message is empty.
    """
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def error_message(error: tf.errors.OpError) -> str:
    """Returns the part of a TensorFlow error that says what went wrong.

    Args:
        error: an error TensorFlow raised (reading, decoding, parsing).

    Returns:
        Its message's first line, without the `{{function_node ...}}` and `[Op:...]` wrapping.
    """
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:\w+\]", "", message).strip().splitlines()[0]
