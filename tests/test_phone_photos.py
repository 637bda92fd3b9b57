"""Issue 52, items 1-2: iPhone HEIC photos and transparent images, stored as a viewer shows them.

Files are made here: HEIC through pillow-heif (tests that need it are skipped, with the
reason, where it is not installed), RGBA PNG, WebP and GIF with Pillow. The learner's
folder is checked by hash after every conversion.
"""

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.photo_folders import file_hashes, make_folder
from utils import readable_images, records
from utils.lab import conversion, conversion_report, sources

MAGENTA, RED = (255, 0, 255), (255, 0, 0)


def _heic(pixels: np.ndarray, orientation: int | None = None) -> bytes:
    """Encodes `pixels` as HEIC with pillow-heif, with an EXIF Orientation if given."""
    pytest.importorskip("pillow_heif", reason="pillow-heif is not installed: no HEIC encoder")
    assert records.heif_support()
    exif = Image.Exif()
    if orientation is not None:
        exif[records.ORIENTATION_TAG] = orientation
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "HEIF", quality=95, exif=exif.tobytes())
    return buffer.getvalue()


def _jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def _sticker(image_format: str = "PNG") -> bytes:
    """A 64 x 64 RGBA image: a transparent background whose hidden RGB is magenta, and a
    red 32 x 32 block at alpha 128 in its top-left corner."""
    pixels = np.zeros((64, 64, 4), np.uint8)
    pixels[..., :3] = MAGENTA
    pixels[:32, :32] = (*RED, 128)
    buffer = io.BytesIO()
    options = {"lossless": True} if image_format == "WEBP" else {}
    Image.fromarray(pixels).save(buffer, image_format, **options)
    return buffer.getvalue()


def _portrait() -> np.ndarray:
    """An upright 60 x 40 photo: top half red, bottom half blue."""
    upright = np.zeros((60, 40, 3), np.uint8)
    upright[:30] = RED
    upright[30:] = (0, 0, 255)
    return upright


def _stored(output_dir) -> dict[str, dict]:
    """The records of a finished set, by the name of the class."""
    paths = sorted(str(p) for p in Path(output_dir).glob("*.tfrec"))
    parsed = [records.parse_record(r) for r in tf.data.TFRecordDataset(paths)]
    return {r["label"].numpy().decode(): r for r in parsed}


def test_is_heic_knows_a_heic_photo_by_its_ftyp_box_not_its_name():
    heif_box = b"\0\0\0\x18ftypmif1\0\0\0\0mif1heic"  # Major brand mif1, compatible heic.
    avif_box = b"\0\0\0\x18ftypavif\0\0\0\0mif1avif"  # The same container, AV1 inside.
    png = tf.io.encode_png(tf.zeros([4, 4, 3], tf.uint8)).numpy()
    cases = [heif_box, avif_box, png, _jpeg(_portrait()), b"", b"\0\0\0\x08ftyp"]
    assert [records.is_heic(data) for data in cases] == [True, False, False, False, False, False]
    assert records.is_heic(_heic(_portrait()))


# Item 1: an iPhone photo named .jpg (and one named .HEIC), stored upright with the size shown.
def test_convert_stores_heic_photos_upright_whatever_their_name(tmp_path):
    sensor = np.ascontiguousarray(np.rot90(_portrait(), 1))  # 40 x 60, as the camera stored it.
    heic = _heic(sensor, orientation=6)
    files = {"roses/IMG_0001.jpg": heic, "tulips/IMG_0002.HEIC": heic}
    files["daisy/plain.jpg"] = _jpeg(np.full((40, 40, 3), 128, np.uint8))
    root = make_folder(tmp_path / "photos", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    assert source.num_images == 3
    report = conversion.convert(source, tmp_path / "out", target_size=16, num_shards=1)
    assert report.num_written == 3 and not report.skipped
    stored = _stored(tmp_path / "out")
    for name in ("roses", "tulips"):
        assert stored[name]["size"].numpy().tolist() == [60, 40]
        image = tf.io.decode_jpeg(stored[name]["image"]).numpy().astype(int)
        assert image[:5, :, 0].mean() > 200 and image[:5, :, 2].mean() < 50  # Red on top.
        assert image[-5:, :, 2].mean() > 200 and image[-5:, :, 0].mean() < 50  # Blue below.
    assert file_hashes(root) == before


# Item 1, where pillow-heif is missing: the file is named, with what to do.
def test_convert_without_pillow_heif_skips_a_heic_photo_saying_what_to_do(
    tmp_path, monkeypatch, capsys
):
    heic = _heic(_portrait())
    monkeypatch.setattr(records, "heif_support", lambda: False)
    photos = {f"{name}/plain.jpg": _jpeg(_portrait()) for name in ("daisy", "tulips")}
    root = make_folder(tmp_path / "photos", {**photos, "daisy/IMG_0001.jpg": heic})
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    report = conversion.convert(source, tmp_path / "out", target_size=16, num_shards=1)
    path = str(root.resolve() / "daisy" / "IMG_0001.jpg")
    assert report.skipped == [conversion_report.SkippedImage(path, records.HEIC_MESSAGE)]
    assert records.HEIC_MESSAGE == "a HEIC (iPhone) photo: install pillow-heif or export as JPEG"
    out = capsys.readouterr().out.splitlines()
    assert f"Skipped: 1 file(s), {records.HEIC_MESSAGE}: daisy/IMG_0001.jpg" in out
    assert file_hashes(root) == before


# Lab 1 decodes its sample with tf.io.decode_jpeg: a HEIC photo is left out, and said why.
def test_readable_sample_leaves_a_heic_photo_out_and_says_why(tmp_path, capsys):
    root = make_folder(
        tmp_path / "photos",
        {"roses/IMG_0001.jpg": _heic(_portrait()), "roses/plain.jpg": _jpeg(_portrait())},
    )
    paths = [str(root / "roses" / "IMG_0001.jpg"), str(root / "roses" / "plain.jpg")]
    sample, images, skipped = readable_images.readable_sample(paths, 2)
    assert sample == paths[1:] and [image.shape for image in images] == [(60, 40, 3)]
    assert skipped == [(paths[0], readable_images.HEIC_IN_SAMPLE)]
    assert capsys.readouterr().out == (
        "Skipped in the sample: 1 file(s), a HEIC (iPhone) photo, which tf.io.decode_jpeg "
        "does not read (lab 2's conversion does, through pillow-heif): roses/IMG_0001.jpg\n"
    )


@pytest.mark.parametrize("image_format", ["PNG", "WEBP", "GIF"])
def test_decode_upright_composites_transparency_on_white(image_format):
    image, size = records.decode_upright(tf.constant(_sticker(image_format)))
    pixels = image.numpy().astype(int)
    assert size.numpy().tolist() == [64, 64]
    assert pixels[40:, 40:].reshape(-1, 3).tolist() == [[255, 255, 255]] * 24 * 24  # Not magenta.
    # GIF has one transparent colour, no partial alpha: its block is opaque red.
    block = (255, 127, 127) if image_format != "GIF" else RED
    assert np.abs(pixels[4:28, 4:28] - block).max() <= 1
    assert records.has_transparency(_sticker(image_format))
    assert not records.has_transparency(_jpeg(_portrait()))


# Item 2: a transparent PNG named .jpg: the stored pixels are what a viewer shows, on white,
# and the report names the file.
def test_convert_stores_a_transparent_png_named_jpg_as_a_viewer_shows_it(tmp_path):
    plain = np.full((64, 64, 3), 90, np.uint8)
    files = {"stickers/sticker.jpg": _sticker(), "daisy/plain.jpg": _jpeg(plain)}
    root = make_folder(tmp_path / "photos", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    report = conversion.convert(
        source, tmp_path / "out", target_size=64, num_shards=1, jpeg_quality=100
    )
    assert report.num_written == 2 and not report.skipped
    sticker = tf.io.decode_jpeg(_stored(tmp_path / "out")["stickers"]["image"]).numpy()
    assert np.abs(sticker[40:60, 40:60].astype(int) - 255).max() <= 1  # White, not magenta.
    assert np.abs(sticker[4:28, 4:28].astype(int) - (255, 127, 127)).max() <= 1  # Pink.
    assert file_hashes(root) == before


def test_load_images_says_which_images_were_composited(tmp_path):
    files = {"stickers/sticker.jpg": _sticker(), "daisy/plain.jpg": _jpeg(_portrait())}
    root = make_folder(tmp_path / "photos", files)
    paths = [str(root / name) for name in files]
    loaded = conversion.load_images(
        paths,
        ["daisy", "stickers"],
        resize_and_crop=records.resize_and_crop,
        recompress=records.recompress,
        target_size=16,
        jpeg_quality=90,
    )
    assert {Path(image.path).name: image.composited for image in loaded} == {
        "sticker.jpg": True,
        "plain.jpg": False,
    }


def test_conversion_report_says_once_which_images_were_composited_on_white():
    report = conversion_report.ConversionReport(
        output_dir="/out",
        shards=["/out/a.tfrec"],
        shard_counts=[13],
        num_input_images=13,
        skipped=[],
        empty_class_folders=[],
        input_bytes=13_000,
        output_image_bytes=6_500,
        seconds=1.0,
        composited=[f"/photos/stickers/{index:02d}.png" for index in range(12)],
    )
    lines = report.summary().splitlines()
    assert lines[-1] == (
        "Transparent: 12 image(s), composited on white as a viewer shows them: "
        "stickers/00.png, stickers/01.png, stickers/02.png, ... (9 more)"
    )
    assert sum("composited" in line for line in lines) == 1


def test_decode_upright_of_a_truncated_transparent_png_raises_tensorflows_error():
    sticker = _sticker()
    truncated = sticker[: len(sticker) // 2]  # The header says RGBA; the pixels are cut short.
    assert records.has_transparency(truncated)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"^image file is truncated"):
        records.decode_upright(tf.constant(truncated))


# Lesson 6 decodes eagerly in its DoFn: a HEIC photo without pillow-heif is a skipped file too.
def test_beam_convert_image_without_pillow_heif_returns_the_heic_message(tmp_path, monkeypatch):
    pytest.importorskip("apache_beam", reason="Apache Beam is not installed (lesson 6)")
    from utils.lessons.convert_with_beam import beam_conversion

    heic = _heic(_portrait())
    monkeypatch.setattr(records, "heif_support", lambda: False)
    path = make_folder(tmp_path / "photos", {"roses/IMG_0001.jpg": heic}) / "roses/IMG_0001.jpg"
    converted = beam_conversion.convert_image(
        str(path), class_names=["roses"], target_size=16, quality=90
    )
    assert converted == (None, records.HEIC_MESSAGE)
