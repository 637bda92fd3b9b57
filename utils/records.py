"""One image as a TFRecord: the record's schema, the image transforms, and building and parsing it.

`resize_and_crop` and `recompress` (lab 2's given code) and `to_example` (its TODO 1) are
written here by the build from the lesson's solution (notebooks/02_write_tfrecords.py,
tools/building/saved.py): one copy. `conversion.convert` and `beam_conversion` run them,
and lab 3 parses what they wrote with `parse_record`.
"""

from __future__ import annotations

import functools
import io
import threading
import warnings

import numpy as np
import tensorflow as tf
from PIL import Image

from utils import errors

DEFAULT_TARGET_SIZE = 192
DEFAULT_JPEG_QUALITY = 90
# How each record is parsed: the declared schema. `one_hot_class` has one float per class.
FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "label": tf.io.FixedLenFeature([], tf.string),
    "size": tf.io.FixedLenFeature([2], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
}
SCHEMA = {
    "image": "bytes: the JPEG-encoded image, TARGET_SIZE x TARGET_SIZE x 3",
    "class": "int64: the class index",
    "label": "bytes: the class name",
    "size": "int64 x 2: the ORIGINAL image's height and width, before resizing",
    "one_hot_class": "float x number of classes (variable length): 1.0 at the class index",
}


# Cropping first gives the picture that resizing the shorter side first would, but the resize
# costs what its output costs: a 60000 x 10 panorama is cut to 10 x 10 before any resize.
# Generated from notebooks/02_write_tfrecords.py (given code) by tools/building/saved.py.
def resize_and_crop(image, target_size):
    """Crops the centre square of `image`, then resizes it to `target_size` x `target_size`."""
    side = tf.reduce_min(tf.shape(image)[:2])
    square = tf.image.resize_with_crop_or_pad(image, side, side)  # Crops: side fits.
    resized = tf.image.resize(square, [target_size, target_size], antialias=True)
    return tf.saturate_cast(tf.round(resized), tf.uint8)


# EXIF Orientation (tag 0x0112): how a viewer turns the stored pixels to show the photo.
ORIENTATION_TAG = 0x0112
# Decoding a JPEG at 1/2, 1/4 or 1/8 of its size costs a fraction of the full decode.
_DECODE_RATIOS = (1, 2, 4, 8)
# The brands of an `ftyp` box that mark a HEIF image coded in HEVC: an iPhone's HEIC photo.
_HEIC_BRANDS = frozenset({b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs"})
HEIC_MESSAGE = "a HEIC (iPhone) photo: install pillow-heif or export as JPEG"
AVIF_MESSAGE = "an AVIF image: this Pillow does not read AVIF; upgrade Pillow (11.3 or later)"
# Pillow warns "Corrupt EXIF data" and returns no tag: the warning is silenced around one
# reading at a time (`warnings.catch_warnings` is not thread-safe; tf.data maps in threads).
_EXIF_LOCK = threading.Lock()


def is_heic(image_bytes: bytes) -> bool:
    """Tells whether a file is a HEIC photo (HEIF with HEVC), from its `ftyp` box, not its name.

    Args:
        image_bytes: the file's bytes (its first 64 bytes are enough).

    Returns:
        True when the box's major or a compatible brand is a HEIC one (`heic`, `heix` ...).
    """
    data = bytes(image_bytes[:64])
    box_size = int.from_bytes(data[:4], "big")
    if data[4:8] != b"ftyp" or box_size < 16:
        return False
    brands = [data[8:12]] + [data[i : i + 4] for i in range(16, min(box_size, len(data)), 4)]
    return any(brand in _HEIC_BRANDS for brand in brands)


# The formats `tf.io.decode_jpeg` decodes to one (height, width, 3) image; any other that
# Pillow reads (HEIC, AVIF, WebP, GIF, BMP, TIFF) goes through Pillow: decode_jpeg gives a
# static WebP a 4-D shape and refuses AVIF, BMP, TIFF and an animated GIF or WebP.
TENSORFLOW_FORMATS = frozenset({"JPEG", "PNG"})
_AVIF_BRANDS = frozenset({b"avif", b"avis"})


def image_format(image_bytes: bytes) -> str:
    """Names an image's format from its first bytes, not its name.

    Args:
        image_bytes: the file's bytes (its first 64 bytes are enough).

    Returns:
        "JPEG", "PNG", "GIF", "WebP", "BMP", "TIFF", "HEIC", "AVIF" or "HEIF" (another
        HEIF image); "" for bytes of none of them (empty, text, damaged).
    """
    data = bytes(image_bytes[:64])
    signatures = {
        b"\xff\xd8\xff": "JPEG",
        b"\x89PNG\r\n\x1a\n": "PNG",
        b"GIF87a": "GIF",
        b"GIF89a": "GIF",
        b"BM": "BMP",
        b"II*\0": "TIFF",
        b"MM\0*": "TIFF",
    }
    for signature, name in signatures.items():
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WebP"
    if is_heic(data):
        return "HEIC"
    box_size = int.from_bytes(data[:4], "big")
    if data[4:8] == b"ftyp" and box_size >= 16:
        brands = [data[8:12]] + [data[i : i + 4] for i in range(16, min(box_size, len(data)), 4)]
        if any(brand in _AVIF_BRANDS for brand in brands):
            return "AVIF"
        if any(brand in (b"mif1", b"msf1") for brand in brands):
            return "HEIF"
    return ""


def avif_support() -> bool:
    """Tells whether this Pillow reads AVIF (Pillow 11.2 and later, built with libavif).

    Returns:
        True if it does.
    """
    from PIL import features

    return bool(features.check("avif"))


@functools.cache
def heif_support() -> bool:
    """Registers pillow-heif's HEIF opener with Pillow, once.

    Returns:
        True if pillow-heif is installed (Pillow then opens HEIC photos), else False.
    """
    try:
        import pillow_heif
    except ImportError:
        return False
    pillow_heif.register_heif_opener()
    return True


def _open_image(image_bytes: bytes) -> Image.Image:
    """Opens an image's bytes with Pillow (HEIC through pillow-heif, if installed)."""
    if is_heic(image_bytes):
        heif_support()
    return Image.open(io.BytesIO(image_bytes))


def exif_orientation(image_bytes: bytes) -> int:
    """Reads an image's EXIF Orientation with Pillow (`Image.getexif()`); 1 (upright) if none.

    Args:
        image_bytes: the file's bytes (the first 64 KiB are enough: EXIF is in them).

    Returns:
        1 to 8, as the EXIF standard numbers them; 1 for a file without EXIF, with a
        broken EXIF block (truncated, bad pointers, empty, bad byte order) or another
        value, with an orientation in XMP only (browsers ignore it), and for a HEIC photo
        (its decoder applies the file's own rotation).

    Example:
        orientation = records.exif_orientation(open("photo.jpg", "rb").read())
    """
    if is_heic(image_bytes):
        return 1
    try:
        with _EXIF_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image = _open_image(image_bytes)
            # EXIF's only, as browsers apply it: Pillow's getexif() would add an orientation
            # found only in XMP (`tiff:Orientation`), which viewers ignore (docs/lessons.md).
            image.info.pop("xmp", None)
            image.info.pop("XML:com.adobe.xmp", None)
            value = image.getexif().get(ORIENTATION_TAG, 1)
    except (OSError, SyntaxError, ValueError):  # Not an image Pillow reads, or broken EXIF.
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def has_transparency(image_bytes: bytes) -> bool:
    """Tells whether an image has transparent pixels to composite (PNG, WebP or GIF with alpha).

    Args:
        image_bytes: the file's bytes (its first 64 KiB are enough).

    Returns:
        True for an alpha channel or a transparent colour; False otherwise or if unreadable.
    """
    try:
        return _open_image(image_bytes).has_transparency_data
    except (OSError, SyntaxError, ValueError):
        return False


def turn_upright(image: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Turns stored pixels the way a photo viewer shows them, by their EXIF Orientation.

    Each of the 8 orientations is a transpose (5 to 8) followed by flips: 6, a phone
    photo taken upright, is a transpose then a left-right flip (90 degrees clockwise).

    Args:
        image: an image tensor (height, width, channels), as decoded.
        orientation: a scalar int tensor, 1 to 8 (any other value: left as it is).

    Returns:
        The image as a viewer shows it; orientations 5 to 8 swap height and width.
    """
    orientation = tf.convert_to_tensor(orientation, tf.int32)
    known = (orientation >= 1) & (orientation <= 8)
    transpose = known & (orientation >= 5)
    flip_left_right = known & tf.reduce_any(tf.equal(orientation, [2, 3, 6, 7]))
    flip_top_bottom = known & tf.reduce_any(tf.equal(orientation, [3, 4, 7, 8]))
    image = tf.cond(transpose, lambda: _swap_height_and_width(image), lambda: image)
    image = tf.cond(flip_left_right, lambda: tf.reverse(image, [1]), lambda: image)
    return tf.cond(flip_top_bottom, lambda: tf.reverse(image, [0]), lambda: image)


def _swap_height_and_width(image: tf.Tensor) -> tf.Tensor:
    """`tf.transpose(image, [1, 0, 2])` as a gather: the pixel at row i, column j moves to j, i.

    Not `tf.transpose`: on a CPU without AVX-512, TensorFlow's oneDNN build logs an error
    line ("oneDNN supports DT_UINT8 only on platforms with AVX-512") for a transpose of
    integer pixels, even in a branch never taken, and it landed in the lessons' outputs.

    Returns:
        The image of shape (width, height, channels).
    """
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    # Row j, column i of the result is pixel (i, j): index i * width + j of the flat image.
    index = tf.range(height)[tf.newaxis, :] * width + tf.range(width)[:, tf.newaxis]
    pixels = tf.gather(tf.reshape(image, [height * width, -1]), tf.reshape(index, [-1]))
    return tf.reshape(pixels, [width, height, shape[2]])


def _read_header(header: bytes | np.ndarray) -> tuple[np.int32, np.bool_]:
    """(EXIF orientation, decoded by Pillow) of a file's first bytes, for `tf.numpy_function`."""
    header = header.item() if isinstance(header, np.ndarray) else header
    known = image_format(header)
    by_pillow = bool(known) and known not in TENSORFLOW_FORMATS or has_transparency(header)
    return np.int32(exif_orientation(header)), np.bool_(by_pillow)


def _decode_with_pillow(image_bytes: bytes | np.ndarray) -> np.ndarray:
    """An image TensorFlow does not decode (HEIC, AVIF, WebP, GIF ...) or a transparent one
    as RGB pixels, as viewers show it: on white, an animation's first frame.

    Returns:
        The pixels, uint8 of shape (height, width, 3).

    Raises:
        tensorflow.errors.InvalidArgumentError: as TensorFlow's decoders do, if it cannot
            decode the image (or it is HEIC and pillow-heif is missing).
    """
    image_bytes = image_bytes.item() if isinstance(image_bytes, np.ndarray) else image_bytes
    if is_heic(image_bytes) and not heif_support():
        raise tf.errors.InvalidArgumentError(None, None, HEIC_MESSAGE)
    if image_format(image_bytes) == "AVIF" and not avif_support():
        raise tf.errors.InvalidArgumentError(None, None, AVIF_MESSAGE)
    try:
        image = _open_image(image_bytes)
        if image.has_transparency_data:
            white = Image.new("RGBA", image.size, "white")
            image = Image.alpha_composite(white, image.convert("RGBA"))
        return np.asarray(image.convert("RGB"))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise tf.errors.InvalidArgumentError(None, None, errors.first_line(error)) from None


def rgb_profile(image_bytes: bytes) -> bytes:
    """Returns the ICC colour profile an RGB JPEG or PNG embeds, unless it is sRGB.

    Args:
        image_bytes: the file's bytes (its first 64 KiB are enough).

    Returns:
        The profile's bytes; b"" if none, unreadable, sRGB, or not RGB (CMYK, grey).
    """
    from PIL import ImageCms  # Imported here: only conversion needs its colour management.

    if not any(marker in image_bytes for marker in (b"ICC_PROFILE", b"iCCP", b"colrprof")):
        return b""  # No profile in JPEG's, PNG's or HEIF's way.
    try:
        icc = _open_image(image_bytes).info.get("icc_profile") or b""
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc)) if icc else None
    except (OSError, ValueError, ImageCms.PyCMSError):
        return b""
    if profile is None or profile.profile.xcolor_space != "RGB ":
        return b""
    return b"" if "sRGB" in ImageCms.getProfileDescription(profile) else icc


def _to_srgb(image: np.ndarray, header: bytes | np.ndarray) -> np.ndarray:
    """`image` converted to sRGB from its file's `rgb_profile`, if any (for tf.numpy_function)."""
    from PIL import ImageCms

    icc = rgb_profile(header.item() if isinstance(header, np.ndarray) else header)
    if not icc:
        return image
    source, srgb = ImageCms.ImageCmsProfile(io.BytesIO(icc)), ImageCms.createProfile("sRGB")
    return np.asarray(ImageCms.profileToProfile(Image.fromarray(image), source, srgb))


def to_srgb(image: tf.Tensor, image_bytes: tf.Tensor) -> tf.Tensor:
    """Converts a decoded image to sRGB from the RGB ICC profile (Adobe RGB, P3) its file embeds.

    `tf.io.decode_jpeg` ignores the profile (its numbers read as sRGB, colours off).

    Args:
        image: the uint8 image (height, width, 3) decoded from `image_bytes`.
        image_bytes: a scalar string tensor, the file's bytes.

    Returns:
        The image in sRGB, as a colour-managed viewer shows it.
    """
    header = tf.strings.substr(image_bytes, 0, 65536)
    srgb = tf.numpy_function(_to_srgb, [image, header], tf.uint8, stateful=False)
    return tf.ensure_shape(srgb, image.shape)


def decode_upright(image_bytes: tf.Tensor, *, min_side: int | None = None) -> tuple:
    """Decodes an image to 3 channels as photo viewers show it: upright, transparency on white.

    `tf.io.decode_jpeg` ignores the EXIF Orientation tag, so a phone photo taken upright
    would come out lying on its side; this reads the tag and turns the pixels. It drops
    alpha too (a transparent background's hidden colours show): a PNG, WebP or GIF with
    transparency is decoded by Pillow and composited on white, a HEIC photo (known by
    its bytes, whatever its name) through pillow-heif, and AVIF, WebP, GIF, BMP and TIFF
    (an animation's first frame) by Pillow. With `min_side`, a large JPEG is
    decoded at 1/2, 1/4 or 1/8 of its size, the smallest whose shorter side still has
    `min_side` pixels: memory and time follow the output.

    Args:
        image_bytes: a scalar string tensor, the file's bytes.
        min_side: the fewest pixels the shorter side may be decoded to; None: full size.

    Returns:
        (image, size): the uint8 image (height, width, 3) upright, and its full size
        (height, width) as a viewer shows it, before any reduction, as an int32 tensor.

    Raises:
        tf.errors.InvalidArgumentError: if the bytes are not an image it reads (the
            message is `HEIC_MESSAGE` for a HEIC photo without pillow-heif).

    Example:
        image, size = records.decode_upright(tf.io.read_file("photo.jpg"))
    """
    header = tf.strings.substr(image_bytes, 0, 65536)
    orientation, by_pillow = tf.numpy_function(
        _read_header, [header], (tf.int32, tf.bool), stateful=False
    )
    orientation.set_shape([])
    by_pillow.set_shape([])
    image, size = tf.cond(
        by_pillow,
        lambda: _decode_rgb_with_pillow(image_bytes),
        lambda: _decode_reduced(image_bytes, min_side),
    )
    swapped = (orientation >= 5) & (orientation <= 8)
    size = tf.where(swapped, tf.reverse(size, [0]), size)
    image = turn_upright(image, orientation)
    image.set_shape([None, None, 3])
    return image, size


def _decode_reduced(image_bytes: tf.Tensor, min_side: int | None) -> tuple:
    """Decodes at the largest ratio that keeps `min_side` pixels; returns (image, full size)."""
    if min_side is None:
        image = tf.io.decode_jpeg(image_bytes, channels=3)
        return image, tf.shape(image)[:2]

    def reduced():
        size = tf.image.extract_jpeg_shape(image_bytes)[:2]
        shorter = tf.reduce_min(size)
        fits = [tf.cast(shorter // ratio >= min_side, tf.int32) for ratio in _DECODE_RATIOS]
        branches = [functools.partial(_decode_jpeg, image_bytes, r) for r in _DECODE_RATIOS]
        index = tf.maximum(tf.add_n(fits) - 1, 0)
        return tf.switch_case(index, branches), size

    def whole():
        image = tf.io.decode_jpeg(image_bytes, channels=3)
        return image, tf.shape(image)[:2]

    return tf.cond(tf.io.is_jpeg(image_bytes), reduced, whole)


def _decode_rgb_with_pillow(image_bytes: tf.Tensor) -> tuple:
    """Decodes with Pillow in the graph (`_decode_with_pillow`); returns (image, size)."""
    image = tf.numpy_function(_decode_with_pillow, [image_bytes], tf.uint8, stateful=False)
    image.set_shape([None, None, 3])
    return image, tf.shape(image)[:2]


def _decode_jpeg(image_bytes: tf.Tensor, ratio: int) -> tf.Tensor:
    """Decodes a JPEG to 3 channels at 1/`ratio` of its size."""
    return tf.io.decode_jpeg(image_bytes, channels=3, ratio=ratio)


# Generated from notebooks/02_write_tfrecords.py (given code) by tools/building/saved.py.
def recompress(image, quality):
    """Encodes a uint8 image as JPEG at `quality`; returns a scalar string tensor."""
    return tf.io.encode_jpeg(image, quality=quality, optimize_size=True)


# Generated from notebooks/02_write_tfrecords.py (TODO 1) by tools/building/saved.py.
def to_example(image_jpeg, class_index, original_size, class_names):
    """Returns the tf.train.Example of one image (fields as in records.SCHEMA)."""
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    label = class_names[class_index].encode()
    features = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_jpeg])),
        "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[class_index])),
        "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[label])),
        "size": tf.train.Feature(int64_list=tf.train.Int64List(value=list(original_size))),
        "one_hot_class": tf.train.Feature(float_list=tf.train.FloatList(value=one_hot)),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example


def parse_record(serialized: tf.Tensor) -> dict:
    """Parses one record with `FEATURES`.

    Args:
        serialized: a scalar string tensor, one serialized `tf.train.Example`.

    Returns:
        A dict of tensors, one per feature of `FEATURES`; `one_hot_class` comes back dense.

    Raises:
        tf.errors.InvalidArgumentError: if the record lacks a feature without a default
            or holds one of another type.
    """
    record = tf.io.parse_single_example(serialized, FEATURES)
    record["one_hot_class"] = tf.sparse.to_dense(record["one_hot_class"])
    return record
