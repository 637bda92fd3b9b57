"""Issue 65: a phone's or a computer's folder as it comes, converted whole or refused in one line.

An iPhone export (HEIC only), a copy made on a Mac (AppleDouble `._*` files, `__MACOSX/`),
other systems' leftovers, many HEIC photos, AVIF and animated WebP/GIF named `.jpg`, an
orientation in XMP only, classes too small to learn, an emoji in a class name. Every file is
made here (HEIC through pillow-heif, AVIF through Pillow); nothing is downloaded. Each
conversion checks the stored records against what a viewer shows, and the learner's folder
byte for byte afterwards.
"""

import io
import re
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.photo_folders import file_hashes, make_folder
from utils import display, readable_images, records, sampling
from utils.lab import conversion, sources
from utils.lessons.write_tfrecords import recompression

RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 160, 0)


def _portrait(top=RED, bottom=BLUE) -> np.ndarray:
    """An upright 60 x 40 photo: top half one colour, bottom half another."""
    pixels = np.zeros((60, 40, 3), np.uint8)
    pixels[:30], pixels[30:] = top, bottom
    return pixels


def _encoded(pixels: np.ndarray, image_format: str, **options) -> bytes:
    if image_format == "HEIF":
        pytest.importorskip("pillow_heif", reason="pillow-heif is not installed: no HEIC encoder")
        assert records.heif_support()
    if image_format == "AVIF" and not records.avif_support():
        pytest.skip("this Pillow does not write AVIF")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, image_format, **options)
    return buffer.getvalue()


def _animation(image_format: str) -> bytes:
    """Two frames: the red-over-blue portrait, then a green one (a viewer's still is frame 1)."""
    frames = [Image.fromarray(_portrait()), Image.fromarray(_portrait(GREEN, GREEN))]
    buffer = io.BytesIO()
    frames[0].save(
        buffer, image_format, save_all=True, append_images=frames[1:], duration=100, loop=0
    )
    return buffer.getvalue()


def _stored(output_dir) -> list[dict]:
    paths = sorted(str(p) for p in Path(output_dir).glob("*.tfrec"))
    return [records.parse_record(r) for r in tf.data.TFRecordDataset(paths)]


def _assert_red_over_blue(record: dict) -> None:
    """The stored picture is the upright portrait a viewer shows: red on top, blue below."""
    assert record["size"].numpy().tolist() == [60, 40]
    image = tf.io.decode_jpeg(record["image"]).numpy().astype(int)
    assert image[:4, :, 0].mean() > 200 and image[:4, :, 2].mean() < 60
    assert image[-4:, :, 2].mean() > 200 and image[-4:, :, 0].mean() < 60


# A Mac's copy: AppleDouble files beside the photos, __MACOSX/ beside the classes (a zip made
# on a Mac), Finder's, Windows' and a NAS's leftovers.
MAC_LEFTOVERS = {
    "cats/._IMG_0001.JPG": b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ",
    "dogs/._IMG_0002.JPG": b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ",
    "__MACOSX/cats/._IMG_0001.JPG": b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ",
    ".DS_Store": b"\x00\x00\x00\x01Bud1",
    "cats/.DS_Store": b"\x00\x00\x00\x01Bud1",
    "dogs/Thumbs.db": b"\xd0\xcf\x11\xe0",
    "dogs/desktop.ini": b"[.ShellClassInfo]\r\n",
    ".Trashes/501/old.jpg": b"\xff\xd8\xff",
    "cats/@eaDir/IMG_0001.JPG/SYNOPHOTO_THUMB_M.jpg": b"\xff\xd8\xff",
}


def test_a_mac_copy_counts_only_its_photos_and_ignores_the_leftovers_in_one_line(tmp_path):
    photos = {"cats/IMG_0001.JPG": _encoded(_portrait(), "JPEG", quality=95)}
    photos["dogs/IMG_0002.JPG"] = _encoded(_portrait(), "JPEG", quality=95)
    root = make_folder(tmp_path / "copy", {**photos, **MAC_LEFTOVERS})
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    assert source.class_names == ("cats", "dogs") and source.num_images == 2
    assert not source.not_images and not source.subfolders and not source.empty_class_folders
    assert len(source.os_leftovers) == len(MAC_LEFTOVERS)
    described = source.describe().splitlines()
    assert described[1:] == [
        f"Ignored: {len(MAC_LEFTOVERS)} file(s) an operating system made (._* copies, "
        ".DS_Store, __MACOSX/, Thumbs.db ...), not photos."
    ]
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    assert report.num_input_images == report.num_written == 2 and not report.skipped
    for record in _stored(tmp_path / "out"):
        _assert_red_over_blue(record)
    assert file_hashes(root) == before


@pytest.mark.parametrize(
    "name",
    ["._IMG_0001.JPG", ".DS_Store", "Thumbs.db", "DESKTOP.INI", "__MACOSX/x/a.jpg", "@eaDir/a.jpg"],
)
def test_is_os_leftover_knows_what_a_system_leaves(name):
    assert readable_images.is_os_leftover(f"/photos/cats/{name}")
    assert not readable_images.is_image_file(f"/photos/cats/{name}")
    assert not readable_images.is_os_leftover("/photos/cats/IMG_0001.JPG")


@pytest.mark.parametrize(
    ("files", "found", "todo"),
    [
        (
            {
                "cats/._IMG_0001.JPG": b"\x00\x05\x16\x07",
                "dogs/clip.MOV": b"\x00\x00\x00\x14ftypqt",
            },
            r"2 class folder\(s\) with 1 file\(s\), none of them .* \(found: \.mov\)",
            r"export the photos as JPEG or HEIC",
        ),
        (
            {"IMG_0001.HEIC": b"\x00", "IMG_0002.HEIC": b"\x00"},
            r"no class folders, 2 image\(s\) directly in it",
            r"put each class's photos in a folder of its own",
        ),
        (
            {"cats/2024/IMG_0001.JPG": b"\xff\xd8\xff", "dogs/2024/IMG_0002.JPG": b"\xff\xd8\xff"},
            r"2 class folder\(s\) whose photos are one level deeper",
            r"move the photos up into the class folders",
        ),
    ],
    ids=["leftovers and videos only", "photos without class folders", "photos a level deeper"],
)
def test_a_folder_without_photos_stops_at_once_in_one_line(tmp_path, files, found, todo):
    root = make_folder(tmp_path / "export", files)
    before = file_hashes(root)
    with pytest.raises(ValueError) as raised:
        sources.resolve_source(str(root))
    message = str(raised.value)
    assert "\n" not in message
    assert str(root.resolve()) in message
    assert re.search(found, message), message
    assert re.search(f"What to do: {todo}", message), message
    assert file_hashes(root) == before


# An iPhone export: HEIC only. The sample, the decode timing, the conversion and every summary.
def test_an_heic_only_folder_is_sampled_timed_and_stored_whole(tmp_path, capsys):
    sensor = np.ascontiguousarray(np.rot90(_portrait(), 1))  # As the camera stored it.
    exif = Image.Exif()
    exif[records.ORIENTATION_TAG] = 6
    heic = _encoded(sensor, "HEIF", quality=90, exif=exif.tobytes())
    files = {f"{name}/IMG_{i:04d}.HEIC": heic for name in ("cats", "dogs") for i in range(3)}
    root = make_folder(tmp_path / "iphone", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    matplotlib.use("Agg")
    figure = recompression.show_resized(source, records.resize_and_crop, target_size=32)
    assert len(figure.axes) >= 6
    measured = recompression.measure_recompression(
        source,
        records.resize_and_crop,
        records.recompress,
        target_size=32,
        quality=90,
        num_sample=6,
        num_timed_images=20,
        repeats=1,
    )
    assert measured.num_images == 6 and set(measured.format_rates) == {"HEIC"}
    assert measured.format_counts == {"HEIC": 6}
    assert measured.format_rates["HEIC"].median > 0
    out = capsys.readouterr().out
    assert "Skipped" not in out
    assert "Decoding the originals as the conversion does" in out and "HEIC" in out
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=2)
    assert report.num_written == 6 and not report.skipped
    stored = _stored(tmp_path / "out")
    assert len(stored) == 6
    for record in stored:
        _assert_red_over_blue(record)
    assert file_hashes(root) == before


# The same export where pillow-heif is missing: one line says what to install, nothing written.
def test_an_heic_only_folder_without_pillow_heif_stops_in_one_line_saying_what_to_install(
    tmp_path, monkeypatch
):
    heic = _encoded(_portrait(), "HEIF", quality=90)
    files = {f"{name}/IMG_{i:04d}.HEIC": heic for name in ("cats", "dogs") for i in range(2)}
    root = make_folder(tmp_path / "iphone", files)
    before = file_hashes(root)
    monkeypatch.setattr(records, "heif_support", lambda: False)
    source = sources.resolve_source(str(root))
    with pytest.raises(ValueError, match=r"\(of the first files: 4 HEIC\); install pillow-heif"):
        recompression.show_resized(source, records.resize_and_crop, target_size=32)
    with pytest.raises(ValueError) as raised:
        conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    message = str(raised.value)
    assert "\n" not in message and str(root.resolve()) in message
    assert f"4 of them {records.HEIC_MESSAGE} (first: " in message
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    assert file_hashes(root) == before


# Many HEIC photos beside a few JPEGs: a readable summary, each format's rate, the time ahead.
# (60 photos here; the 2,000 print the same number of lines.)
def test_many_heic_photos_print_a_few_lines_with_each_formats_rate(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(65)
    files = {}
    for index in range(30):
        for name in ("cats", "dogs"):
            pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
            files[f"{name}/IMG_{index:04d}.HEIC"] = _encoded(pixels, "HEIF", quality=80)
    files["cats/old.jpg"] = _encoded(_portrait(), "JPEG", quality=90)
    files["dogs/old.jpg"] = _encoded(_portrait(), "JPEG", quality=90)
    files["dogs/broken.jpg"] = b"\xff\xd8\xff\xe0 cut short"
    root = make_folder(tmp_path / "phone", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    # Lab 1's sample (TensorFlow's decoder) leaves the HEIC photos out: one line says so.
    sample, _, skipped = readable_images.readable_sample(source.paths, 2)
    assert len(sample) == 2 and len(skipped) == 61
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2  # The HEIC photos, and the broken file.
    assert lines[0].startswith("Skipped in the sample: 60 file(s), a HEIC (iPhone) photo")
    assert lines[0].endswith(
        "cats/IMG_0000.HEIC, cats/IMG_0001.HEIC, cats/IMG_0002.HEIC, ... (57 more)"
    )
    monkeypatch.setattr(conversion, "LARGE_FOLDER", 50)
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=4)
    assert report.num_written == 62 and len(report.skipped) == 1
    out = capsys.readouterr().out.splitlines()
    expected = [line for line in out if line.startswith("Expected time: about ")]
    assert len(expected) == 1 and "63 images" in expected[0]
    assert "HEIC" in expected[0] and "JPEG" in expected[0]
    assert "HEIC takes" in expected[0] and "x as long as JPEG" in expected[0]
    summary = report.summary().splitlines()
    assert len(summary) == 4
    assert summary[3].startswith("Skipped: 1 file(s), ") and "dogs/broken.jpg" in summary[3]
    assert file_hashes(root) == before


def test_rates_by_format_times_heic_against_jpeg_in_bounded_runs():
    jpegs = [_encoded(_portrait(), "JPEG", quality=90)] * 4
    heics = [_encoded(_portrait(), "HEIF", quality=90)] * 4
    by_format = conversion.encoded_by_format(heics + jpegs + [b"not an image"])
    assert {name: len(images) for name, images in by_format.items()} == {
        "HEIC": 4,
        "JPEG": 4,
        "other": 1,
    }
    del by_format["other"]
    rates = conversion.rates_by_format(by_format, seconds=0.2, repeats=1)
    assert set(rates) == {"HEIC", "JPEG"}
    line = conversion.describe_rates(rates, {"HEIC": 4, "JPEG": 4})
    assert line.startswith("HEIC ") and "(4 images), JPEG " in line
    assert "HEIC takes " in line and "x as long as JPEG" in line


# AVIF, and the first frame of an animated WebP or GIF, named .jpg: stored as a viewer shows them.
@pytest.mark.parametrize(
    ("kind", "suffix"),
    [
        ("AVIF", ".jpg"),
        ("AVIF", ".avif"),
        ("animated WebP", ".jpg"),
        ("animated GIF", ".jpg"),
        ("static WebP", ".jpg"),
    ],
)
def test_avif_and_animations_named_jpg_are_stored_as_their_first_frame(tmp_path, kind, suffix):
    content = {
        "AVIF": lambda: _encoded(_portrait(), "AVIF", quality=90),
        "animated WebP": lambda: _animation("WEBP"),
        "animated GIF": lambda: _animation("GIF"),
        "static WebP": lambda: _encoded(_portrait(), "WEBP", quality=95),
    }[kind]()
    files = {f"cats/IMG_0001{suffix}": content, f"dogs/IMG_0002{suffix}": content}
    root = make_folder(tmp_path / "mixed", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    assert report.num_written == 2 and not report.skipped
    for record in _stored(tmp_path / "out"):
        _assert_red_over_blue(record)
    assert file_hashes(root) == before


def test_image_format_is_read_from_the_bytes():
    cases = {
        "JPEG": _encoded(_portrait(), "JPEG"),
        "PNG": _encoded(_portrait(), "PNG"),
        "GIF": _animation("GIF"),
        "WebP": _animation("WEBP"),
        "BMP": _encoded(_portrait(), "BMP"),
        "TIFF": _encoded(_portrait(), "TIFF"),
        "": b"This is not an image.\n",
    }
    assert {name: records.image_format(data) for name, data in cases.items()} == {
        name: name for name in cases
    }


# An orientation given only in XMP: browsers apply EXIF's only, so the stored picture is not
# turned (docs/lessons.md); an EXIF orientation still is.
def test_an_orientation_only_in_xmp_is_not_applied_as_browsers_do(tmp_path):
    xmp = (
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-'
        b'rdf-syntax-ns#"><rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" '
        b'tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>'
    )
    xmp_only = _encoded(_portrait(), "JPEG", quality=95, xmp=xmp)
    assert Image.open(io.BytesIO(xmp_only)).getexif().get(records.ORIENTATION_TAG) == 6  # Pillow.
    assert records.exif_orientation(xmp_only) == 1
    files = {"cats/xmp.jpg": xmp_only, "dogs/plain.jpg": _encoded(_portrait(), "JPEG", quality=95)}
    root = make_folder(tmp_path / "xmp", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    for record in _stored(tmp_path / "out"):
        _assert_red_over_blue(record)  # As stored: not turned to 40 x 60.
    assert file_hashes(root) == before


# Lab 4: a class of too few training images is said in one line, with what the accuracy means.
def test_small_classes_in_the_shards_are_warned_about_in_one_line(tmp_path, capsys):
    files = {f"cats/{i}.jpg": _encoded(_portrait(), "JPEG") for i in range(12)}
    files |= {f"dogs \U0001f436/{i}.jpg": _encoded(_portrait(), "JPEG") for i in range(3)}
    root = make_folder(tmp_path / "few", files)
    before = file_hashes(root)
    source = sources.resolve_source(str(root))
    report = conversion.convert(source, tmp_path / "out", target_size=16, num_shards=3)
    capsys.readouterr()
    counts = sampling.count_shard_classes(report.shards, source.class_names)
    assert counts == {"cats": 12, "dogs \U0001f436": 3}
    display.say_if_too_few_per_class(counts, num_validation=4)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("WARNING: 1 of 2 classes have under 10 training images (dogs")
    assert "each one moves it by 0.25, so even 1.00 can be luck" in lines[0]
    assert file_hashes(root) == before


def test_a_class_name_with_an_emoji_is_drawn_without_glyph_warnings():
    matplotlib.use("Agg")
    names = ["cherry \U0001f338", "parrot \U0001f99c"]
    pairs = tf.data.Dataset.from_tensor_slices((np.zeros((2, 8, 8, 3), np.uint8), [0, 1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = display.show_images(pairs, class_names=names, num_images=2, num_columns=2)
        figure.canvas.draw()
    assert not [str(w.message) for w in caught if "Glyph" in str(w.message)]
    titles = [axis.get_title() for axis in figure.axes[:2]]
    assert titles == ["cherry [cherry blossom]\n(8x8)", "parrot [parrot] (8x8)"]
    assert display.drawable("daisy") == "daisy"
