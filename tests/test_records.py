"""Tests of utils/records.py: one image as a record (transforms, Example, parsing)."""

import numpy as np
import pytest
import tensorflow as tf

from utils import records
from utils.lab import data


def test_resize_and_crop_keeps_proportions_and_takes_the_centre():
    # A 100x200 image: left quarter red, middle half green, right quarter blue.
    image = np.zeros((100, 200, 3), np.uint8)
    image[:, :50, 0] = image[:, 50:150, 1] = image[:, 150:, 2] = 255
    square = records.resize_and_crop(tf.constant(image), 50)
    assert square.dtype == tf.uint8 and square.shape == (50, 50, 3)
    # The centre crop of a 50x100 resize is the green middle half (edges blur a little).
    inside = square.numpy()[:, 2:-2]
    assert inside[:, :, 1].min() == 255 and inside[:, :, [0, 2]].max() == 0
    assert square.numpy()[:, :, 1].mean() > 240


def test_recompress_gives_jpeg_that_decodes_to_the_image():
    image = np.full((32, 32, 3), 120, np.uint8)
    jpeg = records.recompress(tf.constant(image), 90)
    assert jpeg.numpy()[:2] == b"\xff\xd8"
    assert np.abs(tf.io.decode_jpeg(jpeg).numpy().astype(int) - 120).max() <= 2


def test_to_example_round_trips_through_the_schema():
    example = records.to_example(b"jpeg", 2, [300, 400], data.CLASSES)
    record = records.parse_record(tf.constant(example.SerializeToString()))
    assert record["image"].numpy() == b"jpeg"
    assert record["class"].numpy() == 2 and record["label"].numpy() == b"roses"
    assert record["size"].numpy().tolist() == [300, 400]
    assert record["one_hot_class"].numpy().tolist() == [0, 0, 1, 0, 0]


def _quadrants(height: int, width: int) -> np.ndarray:
    """An upright image: red, green / blue, white quadrants, so any turn or flip shows."""
    image = np.zeros((height, width, 3), np.uint8)
    image[: height // 2, : width // 2] = (255, 0, 0)
    image[: height // 2, width // 2 :] = (0, 255, 0)
    image[height // 2 :, : width // 2] = (0, 0, 255)
    image[height // 2 :, width // 2 :] = (255, 255, 255)
    return image


def _stored_with_orientation(upright: np.ndarray, orientation: int) -> bytes:
    """A JPEG whose pixels a viewer turns by `orientation` to show `upright` (Pillow)."""
    import io

    from PIL import Image

    transpose = Image.Transpose
    # The turn that undoes each orientation (viewers apply the orientation to the pixels).
    undo = {
        2: transpose.FLIP_LEFT_RIGHT,
        3: transpose.ROTATE_180,
        4: transpose.FLIP_TOP_BOTTOM,
        5: transpose.TRANSPOSE,
        6: transpose.ROTATE_90,
        7: transpose.TRANSVERSE,
        8: transpose.ROTATE_270,
    }
    image = Image.fromarray(upright)
    stored = image.transpose(undo[orientation]) if orientation in undo else image
    exif = Image.Exif()
    exif[records.ORIENTATION_TAG] = orientation
    buffer = io.BytesIO()
    stored.save(buffer, "JPEG", quality=95, exif=exif.tobytes())
    return buffer.getvalue()


ORIENTATIONS = {
    1: "1 upright",
    2: "2 mirrored",
    3: "3 upside down",
    4: "4 mirrored upside down",
    5: "5 transposed",
    6: "6 phone held upright",
    7: "7 transverse",
    8: "8 phone held the other way",
}


@pytest.mark.parametrize("orientation", ORIENTATIONS, ids=ORIENTATIONS.values())
def test_decode_upright_shows_each_exif_orientation_as_a_photo_viewer_does(orientation):
    import io

    from PIL import Image, ImageOps

    upright = _quadrants(40, 24)
    jpeg = _stored_with_orientation(upright, orientation)
    viewer = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(jpeg))))
    assert viewer.shape == (40, 24, 3)  # The file is what the case says.
    assert records.exif_orientation(jpeg) == orientation
    image, size = records.decode_upright(tf.constant(jpeg))
    assert image.shape == (40, 24, 3) and size.numpy().tolist() == [40, 24]
    assert np.abs(image.numpy().astype(int) - upright).mean() < 10  # JPEG noise only.
    # The same inside Dataset.map, where the conversion runs it.
    mapped = tf.data.Dataset.from_tensors(jpeg).map(lambda b: records.decode_upright(b)[0])
    assert np.array_equal(next(iter(mapped)).numpy(), image.numpy())


def test_exif_orientation_of_a_file_without_exif_is_upright():
    png = tf.io.encode_png(tf.constant(_quadrants(8, 8))).numpy()
    plain = tf.io.encode_jpeg(tf.constant(_quadrants(8, 8))).numpy()
    assert [records.exif_orientation(b) for b in (png, plain, b"", b"\xff\xd8")] == [1, 1, 1, 1]


def test_decode_upright_with_min_side_decodes_a_large_jpeg_reduced():
    jpeg = _stored_with_orientation(_quadrants(800, 400), 6)  # Stored 400 x 800.
    image, size = records.decode_upright(tf.constant(jpeg), min_side=96)
    # 1/4 keeps 100 >= 96 pixels on the shorter side; 1/8 would keep 50.
    assert image.shape == (200, 100, 3) and size.numpy().tolist() == [800, 400]
    png = tf.io.encode_png(tf.constant(_quadrants(800, 400)))
    image, size = records.decode_upright(png, min_side=96)
    assert image.shape == (800, 400, 3) and size.numpy().tolist() == [800, 400]


def test_resize_and_crop_of_a_60000_x_10_image_crops_before_it_resizes():
    image = tf.zeros((60000, 10, 3), tf.uint8)
    square = records.resize_and_crop(image, 192)
    assert square.shape == (192, 192, 3) and square.dtype == tf.uint8
    one_pixel = records.resize_and_crop(tf.fill((1, 60000, 3), tf.constant(7, tf.uint8)), 8)
    assert one_pixel.numpy().tolist() == np.full((8, 8, 3), 7).tolist()


def test_decode_upright_in_a_dataset_logs_no_onednn_line():
    # Issue 37, item 8: a uint8 tf.transpose (even in the branch not taken) made TF's oneDNN
    # build log "oneDNN supports DT_UINT8 only on platforms with AVX-512" on CPUs without
    # AVX-512, into labs 2 and 6. C++ logs go to the process's stderr: a child process.
    import subprocess
    import sys

    script = (
        "import tensorflow as tf\n"
        "from utils import records\n"
        "jpeg = tf.io.encode_jpeg(tf.zeros([30, 20, 3], tf.uint8))\n"
        "upright = tf.data.Dataset.from_tensors(jpeg).map(lambda b: records.decode_upright(b)[0])\n"
        "print(next(iter(upright)).shape)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "(30, 20, 3)"
    assert "oneDNN supports" not in done.stderr, done.stderr


def _jpeg_with_exif_block(payload: bytes) -> bytes:
    """A plain JPEG with `payload` as its APP1 (EXIF) segment, right after the SOI marker."""
    jpeg = tf.io.encode_jpeg(tf.constant(_quadrants(16, 8))).numpy()
    segment = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    return jpeg[:2] + segment + jpeg[2:]


def _exif_block(orientation_value: bytes, value_type: int = 3) -> bytes:
    """An EXIF block (big-endian TIFF) with one Orientation entry of the given type and value."""
    entry = (
        records.ORIENTATION_TAG.to_bytes(2, "big")
        + value_type.to_bytes(2, "big")
        + (1).to_bytes(4, "big")
        + orientation_value.ljust(4, b"\0")
    )
    return b"Exif\0\0MM\0*\0\0\0\x08\0\x01" + entry + b"\0\0\0\0"


BROKEN_EXIF = {
    "empty": b"Exif\0\0",
    "truncated": _exif_block(b"\0\x06")[:18],
    "bad pointer": b"Exif\0\0MM\0*\xff\xff\xff\x00",
    "bad entry count": b"Exif\0\0MM\0*\0\0\0\x08\xff\xff",
    "bad byte order": b"Exif\0\0XX\0*\0\0\0\x08" + _exif_block(b"\0\x06")[14:],
    "orientation 9": _exif_block(b"\0\x09"),
    "orientation as text": _exif_block(b"6\0", value_type=2),
}


@pytest.mark.parametrize("payload", BROKEN_EXIF.values(), ids=BROKEN_EXIF.keys())
def test_exif_orientation_of_a_broken_exif_block_is_upright_and_the_photo_decodes(payload):
    jpeg = _jpeg_with_exif_block(payload)
    assert records.exif_orientation(jpeg) == 1
    image, size = records.decode_upright(tf.constant(jpeg))
    assert image.shape == (16, 8, 3) and size.numpy().tolist() == [16, 8]


def test_exif_orientation_reads_a_well_formed_block_of_the_same_shape():
    assert records.exif_orientation(_jpeg_with_exif_block(_exif_block(b"\0\x06"))) == 6


def test_decode_upright_turns_a_png_by_its_exif_orientation_as_pillow_does():
    import io

    from PIL import Image, ImageOps

    exif = Image.Exif()
    exif[records.ORIENTATION_TAG] = 6
    buffer = io.BytesIO()
    Image.fromarray(_quadrants(24, 40)).save(buffer, "PNG", exif=exif.tobytes())
    viewer = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(buffer.getvalue()))))
    image, size = records.decode_upright(tf.constant(buffer.getvalue()))
    assert records.exif_orientation(buffer.getvalue()) == 6
    assert size.numpy().tolist() == [40, 24] and np.array_equal(image.numpy(), viewer)
