"""A conversion's output folder: its path checked first, a write error there said in one line."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    from utils.lab.sources import ImageSource

_ELSEWHERE = (
    "Set OUTPUT_DIR to a folder you can write to (None: the course cache), then run it again."
)
# A write error in the output folder, by its errno values, TensorFlow error or words: what
# happened, and what to do. Whatever the run wrote there is deleted by then.
_FOLDER_PROBLEMS = [
    (
        (errno.ENOSPC, errno.EDQUOT),
        tf.errors.ResourceExhaustedError,
        "No space left on device",
        "the disk is full (No space left on device); the files this run wrote there are deleted, "
        "so the next run starts clean. Free some space there, or set OUTPUT_DIR to a folder on a "
        "disk with room, then run it again.",
    ),
    (
        (errno.EROFS,),
        (),
        "Read-only file system",
        "the folder is read-only (Read-only file "
        f"system); nothing of this run is left there. {_ELSEWHERE}",
    ),
    (
        (errno.EACCES, errno.EPERM),
        tf.errors.PermissionDeniedError,
        "Permission denied",
        f"you are not allowed to write there (Permission denied); nothing of this run is left "
        f"there. {_ELSEWHERE}",
    ),
]


class OutputFolderError(OSError):
    """The output folder cannot take the shards (disk full, read-only); one line says what to do."""


def check_output_dir(source: ImageSource, output_dir: str | Path) -> str:
    """Checks a conversion's output folder, before any file is touched.

    Args:
        source: the images to convert.
        output_dir: the folder the shards would go to (`~` is the home folder).

    Returns:
        `output_dir` as a shell reads it: a string, `~` expanded, without a final "/".

    Raises:
        ValueError: if `output_dir` is not a folder path, is a file, or is inside the
            source's images.
    """
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise ValueError(f"`output_dir` must be a folder path. Received: {output_dir!r}")
    typed = str(output_dir) if "://" in str(output_dir) else os.path.expanduser(str(output_dir))
    typed = typed.rstrip("/") or typed
    if "://" not in typed and Path(typed).is_file():
        raise ValueError(
            f"`output_dir` {Path(typed).absolute()} is a file, not a folder: give a "
            "folder for the shards (it is created if needed)."
        )
    image_root = source.pattern.rsplit("/", 2)[0]
    if f"{typed}/".startswith(f"{image_root}/"):
        raise ValueError(
            f"`output_dir` {typed} is inside the source's image folder {image_root}: "
            "write the shards somewhere else."
        )
    return typed


@contextlib.contextmanager
def write_errors_said(output_dir: str) -> Iterator[None]:
    """Turns a write error in `output_dir` (disk full, read-only, not allowed) into one line.

    Args:
        output_dir: the folder being written, as checked by `check_output_dir`.

    Yields:
        Nothing: the block that writes there.

    Raises:
        OutputFolderError: saying what happened and what to do, for a problem it knows.
        tensorflow.errors.OpError: a write error it does not know, as it is.
        OSError: likewise.
    """
    try:
        yield
    except (tf.errors.OpError, OSError) as error:
        code, message = getattr(error, "errno", None), str(getattr(error, "message", "") or error)
        for errnos, kind, words, problem in _FOLDER_PROBLEMS:
            if code in errnos or isinstance(error, kind) or words in message:
                raise OutputFolderError(
                    f"Cannot write the shards in {output_dir}: {problem}"
                ) from None
        raise
