"""Image files: which files the course reads as images, and a sample of those that decode."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from utils import errors

if TYPE_CHECKING:
    import numpy as np

# The image types the course reads, in any letter case: `tf.io.decode_jpeg` decodes PNG
# too, and the conversion (`records.decode_upright`) HEIC photos through pillow-heif and
# AVIF through Pillow (whatever a file's name, its format is read from its bytes).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".heic", ".heif", ".avif")
# What an operating system leaves beside photos, never a photo: macOS's AppleDouble files
# (`._IMG_0001.JPG`, a copy's metadata), the `__MACOSX/` folder a Mac's zip holds, Finder's
# `.DS_Store` and `.Trashes`, Windows' `Thumbs.db` and `desktop.ini`, a Synology NAS's
# `@eaDir` thumbnails. Names compared in lower case.
OS_LEFTOVER_FILES = frozenset({".ds_store", "thumbs.db", "ehthumbs.db", "desktop.ini"})
OS_LEFTOVER_FOLDERS = frozenset(
    {"__macosx", ".trashes", "@eadir", ".spotlight-v100", ".fseventsd", ".temporaryitems"}
)
# Why a sample for TensorFlow's decoder leaves a HEIC photo out (lab 1 decodes with it).
HEIC_IN_SAMPLE = (
    "a HEIC (iPhone) photo, which tf.io.decode_jpeg does not read (lab 2's conversion "
    "does, through pillow-heif)"
)
# The same for the other formats only Pillow reads.
PILLOW_ONLY_IN_SAMPLE = (
    "a {format} image, which tf.io.decode_jpeg does not read (lab 2's conversion does, "
    "through Pillow)"
)
# Files named in a line about skipped files; the count is complete.
NAMES_IN_A_LINE = 3
# Reasons given a line each; files skipped for other reasons are counted in one more line.
REASONS_SAID = 3


def is_os_leftover(path: str | os.PathLike) -> bool:
    """Tells whether a file or folder is one an operating system made, not a photo.

    Args:
        path: a file or folder path, or a name.

    Returns:
        True for an AppleDouble file (`._*`), a name of `OS_LEFTOVER_FILES`, or anything
        inside (or named like) a folder of `OS_LEFTOVER_FOLDERS`, in any letter case.
    """
    parts = Path(path).parts
    if not parts:
        return False
    name = parts[-1]
    return (
        name.startswith("._")
        or name.lower() in OS_LEFTOVER_FILES
        or any(part.lower() in OS_LEFTOVER_FOLDERS for part in parts)
    )


def is_image_file(path: str | os.PathLike) -> bool:
    """Tells whether the course reads a file as an image, from its name alone.

    Args:
        path: a file path or name.

    Returns:
        True when its extension is one of `IMAGE_EXTENSIONS`, in any case (a HEIC photo
        named `.jpg` is known by its bytes when it is decoded), and it is no operating
        system's leftover (`is_os_leftover`: `._IMG_0001.JPG` is a Mac's metadata).
    """
    return Path(path).suffix.lower() in IMAGE_EXTENSIONS and not is_os_leftover(path)


def readable_sample(
    paths: Sequence[str | bytes],
    count: int,
    *,
    verbose: bool = True,
    tensorflow_only: bool = True,
) -> tuple[list[str], list[np.ndarray], list[tuple[str, str]]]:
    """Returns the first `count` of `paths` that decode as images, upright, with the ones skipped.

    A learner's folder may hold files that do not decode (truncated, empty, not an
    image); a cell that shows or checks a sample must not stop at the first of them.

    Args:
        paths: image paths (strings or bytes), in the order to try them.
        count: how many readable images to return.
        verbose: print what was skipped: a line per reason, with a count and a few names.
        tensorflow_only: leave out the formats `tf.io.decode_jpeg` does not read (HEIC,
            AVIF, WebP ...), for a lesson that decodes its sample with it (lab 1); False:
            every image the conversion stores (`records.decode_upright`), as lab 2 does.

    Returns:
        (paths, images, skipped): the readable paths, their uint8 images (height, width, 3),
        and a (path, error) pair for each file skipped on the way.

    Example:
        sample_paths, sample_images, skipped = readable_images.readable_sample(source.paths, 8)
    """
    import tensorflow as tf  # Imported here: the other functions do not need TensorFlow.

    from utils import records

    readable, images, skipped = [], [], []
    with errors.decoder_messages():  # Its log line repeats the error.
        for path in paths:
            if len(readable) == count:
                break
            path = path.decode() if isinstance(path, bytes) else str(path)
            try:
                image_bytes = tf.io.read_file(path)
                found = records.image_format(image_bytes.numpy()[:64])
                if tensorflow_only and found and found not in records.TENSORFLOW_FORMATS:
                    why = HEIC_IN_SAMPLE if found == "HEIC" else PILLOW_ONLY_IN_SAMPLE
                    skipped.append((path, why.format(format=found)))
                    continue
                image = records.decode_upright(image_bytes)[0].numpy()  # As shown.
            except tf.errors.OpError as error:
                skipped.append((path, errors.error_message(error)))
                continue
            readable.append(path)
            images.append(image)
    if verbose and skipped:
        print(describe_skipped(skipped, "Skipped in the sample"))
    return readable, images, skipped


def describe_skipped(skipped: Sequence[tuple[str, str]], title: str) -> str:
    """Says which files were skipped and why: a line per reason, a count and a few names each.

    Args:
        skipped: (path, why) pairs.
        title: what the lines start with, as "Skipped in the sample".

    Returns:
        At most `REASONS_SAID` + 1 lines, however many files: the commonest reasons first,
        each "<title>: <count> file(s), <why>: <a few names> ... (<more> more)".
    """
    from utils import display  # Imported here: the listing needs no matplotlib.

    by_reason: dict[str, list[str]] = {}
    for path, why in skipped:
        by_reason.setdefault(why, []).append("/".join(Path(path).parts[-2:]))  # <class>/<name>
    reasons = sorted(by_reason.items(), key=lambda item: -len(item[1]))
    lines = [
        f"{title}: {len(names):,} file(s), {why}: "
        + display.short_list(names, max_listed=NAMES_IN_A_LINE, shown=NAMES_IN_A_LINE)
        for why, names in reasons[:REASONS_SAID]
    ]
    others = [name for _, names in reasons[REASONS_SAID:] for name in names]
    if others:
        lines.append(
            f"{title}: {len(others):,} more file(s), for {len(reasons) - REASONS_SAID} other "
            "reason(s): "
            + display.short_list(others, max_listed=NAMES_IN_A_LINE, shown=NAMES_IN_A_LINE)
        )
    return "\n".join(lines)
