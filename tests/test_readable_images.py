"""Tests of utils/readable_images.py (decodable samples: tests/test_real_folders.py)."""

import pytest

from utils import readable_images


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("IMG_0001.JPG", True),
        ("rose.jpeg", True),
        ("scan.Png", True),
        ("notes.txt", False),
        ("photo.heic", True),
        ("IMG_0002.HEIF", True),
        ("download.AVIF", True),  # Pillow 11.2 and later reads it.
        ("._IMG_0003.JPG", False),  # A Mac's AppleDouble file beside the photo.
        (".jpg", False),  # A hidden file with no extension, not a JPEG.
        ("archive.jpg.zip", False),
    ],
)
def test_is_image_file_judges_the_extension_in_any_case(name, expected):
    assert readable_images.is_image_file(f"/photos/daisy/{name}") is expected
