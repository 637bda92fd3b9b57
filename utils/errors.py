"""Errors shown in one line: what the course prints when something it ran raised."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
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


# A line TensorFlow's image decoders log from C++ on a bad file, e.g.
# "E0000 00:00:1795452832.636017  6258 jpeg_mem.cc:329] Premature end of JPEG data. ..."
DECODER_LOG_LINE = re.compile(r"\b(?:jpeg_mem|png_io|gif_io)\.cc:\d+\] (?P<message>.*)")
# In absl's line before a library's first log line (no setting turns it off): dropped.
ABSL_FIRST_LINE = "before absl::InitializeLog() is called"


@contextlib.contextmanager
def decoder_messages() -> Iterator[list[str]]:
    """Takes TensorFlow's decoder log lines off stderr and hands them to the caller.

    TensorFlow's C++ image decoders log a line of their own on a bad file (`Premature end
    of JPEG data`), at error level, so `TF_CPP_MIN_LOG_LEVEL=2` keeps it. Inside this
    block stderr (file descriptor 2) goes to a temporary file; at its end the decoders'
    messages are appended to the list yielded, and any other line (but absl's) to stderr.

    Yields:
        A list that holds the decoders' messages once the block has ended.

    Example:
        with errors.decoder_messages() as messages:
            tf.io.decode_jpeg(truncated_bytes)
    """
    messages: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield messages
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            others = []
            for line in capture.read().decode(errors="replace").splitlines():
                found = DECODER_LOG_LINE.search(line)
                if found:
                    messages.append(found["message"].strip())
                elif ABSL_FIRST_LINE not in line:
                    others.append(line)
            if others:
                os.write(2, ("\n".join(others) + "\n").encode())
