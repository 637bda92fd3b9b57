"""Small files a check writes itself, so that a mistake the learner's sample hides shows."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

# Image files whose channels differ from a plain RGB JPEG: (file name, PIL mode, format,
# what it is in words). Decoding without `channels=3` gives 1 or 4 channels for some.
CHANNEL_TRAPS = [
    ("grayscale.jpg", "L", "JPEG", "a grayscale JPEG (1 channel)"),
    ("cmyk.jpg", "CMYK", "JPEG", "a CMYK JPEG (4 channels)"),
    ("photo.png", "RGB", "PNG", "a PNG"),
    ("transparent.png", "RGBA", "PNG", "a PNG with transparency (4 channels)"),
]


def sample_picture(height: int = 48, width: int = 64) -> Image.Image:
    """A smooth RGB picture (gradients), the same on every call.

    Args:
        height: its height in pixels.
        width: its width in pixels.

    Returns:
        The picture, in PIL's RGB mode.
    """
    rows, columns = np.mgrid[0:height, 0:width]
    pixels = np.stack([255 * rows / height, 255 * columns / width, 128 + 0 * rows], axis=-1).astype(
        np.uint8
    )
    return Image.fromarray(pixels)


def encode(image: Image.Image, mode: str, file_format: str) -> bytes:
    """`image` converted to `mode` and saved as `file_format`, as bytes.

    Args:
        image: the picture.
        mode: a PIL mode, such as "L", "RGB", "RGBA" or "CMYK".
        file_format: a PIL format, such as "JPEG" or "PNG".

    Returns:
        The encoded file's bytes.
    """
    buffer = io.BytesIO()
    image.convert(mode).save(buffer, format=file_format)
    return buffer.getvalue()


def write_channel_traps(folder: str | Path, class_names: Sequence[str]) -> list[tuple[str, str]]:
    """Writes one file of each kind in `CHANNEL_TRAPS`, in the class folders in turn.

    Args:
        folder: where the class folders are made.
        class_names: the class folders' names, used in turn.

    Returns:
        A list of `(path, description)`, one per file written.
    """
    picture = sample_picture()
    written = []
    for index, (file_name, mode, file_format, description) in enumerate(CHANNEL_TRAPS):
        path = Path(folder) / class_names[index % len(class_names)] / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode(picture, mode, file_format))
        written.append((str(path), description))
    return written
