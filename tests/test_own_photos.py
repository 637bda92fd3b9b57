"""Issue 27: a learner's own photos as a viewer shows them, and every failure says what to do.

Phone photos with an EXIF Orientation, extreme and tiny images, a full disk and a read-only
output folder, each on small files made here with Pillow. The user's own files in the
output folder are checked by hash after every failure.
"""

import hashlib
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageCms

from tests.conftest import REPO_ROOT
from tests.photo_folders import make_folder
from utils import records, shard_files, sidecar
from utils.lab import conversion, shard_metadata, sources

USER_FILES = {"notes.txt": b"my notes, not the course's", "flowers00-9.tfrec.bak": b"mine"}


def _jpeg(pixels: np.ndarray, orientation: int | None = None) -> bytes:
    """Encodes `pixels` as JPEG with Pillow, with an EXIF Orientation if given."""
    buffer = io.BytesIO()
    exif = Image.Exif()
    if orientation is not None:
        exif[records.ORIENTATION_TAG] = orientation
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95, exif=exif.tobytes())
    return buffer.getvalue()


def _plain_photos(num_per_class: int = 3, size: tuple[int, int] = (48, 64)) -> dict:
    """Ordinary photos of two classes, each a different flat colour."""
    rng = np.random.default_rng(27)
    return {
        f"{name}/{name}_{index}.jpg": _jpeg(rng.integers(0, 255, (*size, 3), dtype=np.uint8))
        for name in ("daisy", "tulips")
        for index in range(num_per_class)
    }


def _with_user_files(folder: Path) -> dict[str, str]:
    """Puts the user's own files in `folder`; returns their hashes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in USER_FILES.items():
        (folder / name).write_bytes(content)
    return _hashes(folder, USER_FILES)


def _hashes(folder: Path, names) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}


def _records(output_dir) -> list[dict]:
    """Every record of a finished set, parsed."""
    paths = shard_files.list_shards(str(output_dir))
    return [records.parse_record(r) for r in tf.data.TFRecordDataset(paths)]


# Item 1: a phone photo (EXIF Orientation 6) is stored upright, with its size as shown.
def test_convert_stores_a_phone_photo_upright_with_the_size_a_viewer_shows(tmp_path):
    upright = np.zeros((60, 40, 3), np.uint8)  # Portrait, as the viewer shows it.
    upright[:30] = (255, 0, 0)  # Top half red, bottom half blue.
    upright[30:] = (0, 0, 255)
    stored = np.rot90(upright, 1)  # The sensor's landscape pixels: 40 x 60.
    files = {"roses/phone.jpg": _jpeg(np.ascontiguousarray(stored), orientation=6)}
    files["tulips/plain.jpg"] = _jpeg(np.full((40, 40, 3), 128, np.uint8))
    source = sources.resolve_source(str(make_folder(tmp_path / "photos", files)))
    conversion.convert(source, tmp_path / "out", target_size=16, num_shards=1)
    (phone,) = [r for r in _records(tmp_path / "out") if r["label"].numpy() == b"roses"]
    assert phone["size"].numpy().tolist() == [60, 40]
    image = tf.io.decode_jpeg(phone["image"]).numpy().astype(int)
    assert image[:6, :, 0].mean() > 200 and image[:6, :, 2].mean() < 50  # Red on top.
    assert image[-6:, :, 2].mean() > 200 and image[-6:, :, 0].mean() < 50  # Blue below.


# Item 2: an extreme panorama and a 1 x 1 image: written, listed as smaller than the target.
def test_convert_lists_images_smaller_than_the_target_and_keeps_them(tmp_path, capsys):
    files = _plain_photos(num_per_class=1)
    files["daisy/panorama.jpg"] = _jpeg(np.full((10, 60000, 3), 90, np.uint8))
    files["tulips/dot.png"] = tf.io.encode_png(tf.fill((1, 1, 3), tf.constant(7, tf.uint8))).numpy()
    root = make_folder(tmp_path / "photos", files)
    source = sources.resolve_source(str(root))
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=2)
    assert report.num_written == 4 and not report.skipped
    assert sorted((Path(i.path).name, i.size) for i in report.small_images) == [
        ("dot.png", (1, 1)),
        ("panorama.jpg", (10, 60000)),
    ]
    printed = capsys.readouterr().out
    [line] = [line for line in printed.splitlines() if line.startswith("Smaller than")]
    assert line.startswith(
        "Smaller than 32 x 32: 2 image(s), kept and enlarged (blurry; remove them from the "
        "folder if they are thumbnails): "
    )
    assert "daisy/panorama.jpg (10 x 60000)" in line and "tulips/dot.png (1 x 1)" in line
    sizes = sorted(r["size"].numpy().tolist() for r in _records(tmp_path / "out"))
    assert sizes == [[1, 1], [10, 60000], [48, 64], [48, 64]]


_PEAK_SCRIPT = """
import json, resource, sys
from utils.lab import conversion, sources
root = sys.argv[1]
conversion.convert(sources.resolve_source(root + "/warm"), root + "/out-warm", num_shards=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
conversion.convert(sources.resolve_source(root + "/extreme"), root + "/out-extreme", num_shards=1)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "after_kb": after}))
"""


# Item 2: the 60000 x 10 image that took 3.3 GB: its peak memory is bounded by the output.
def test_convert_a_60000_x_10_jpeg_adds_under_100_mb_of_peak_memory(tmp_path):
    warm = _plain_photos(num_per_class=2, size=(300, 400))
    make_folder(tmp_path / "warm", warm)
    extreme = dict(warm)
    extreme["daisy/panorama.jpg"] = _jpeg(np.full((10, 60000, 3), 90, np.uint8))
    make_folder(tmp_path / "extreme", extreme)
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    peak = json.loads(result.stdout.strip().splitlines()[-1])
    added_megabytes = (peak["after_kb"] - peak["before_kb"]) / 1024
    assert added_megabytes < 100, f"peak memory grew by {added_megabytes:.0f} MB"


def _disk_full_message(output_dir) -> str:
    return (
        f"Cannot write the shards in {output_dir}: the disk is full (No space left on device); "
        "the files this run wrote there are deleted, so the next run starts clean. Free some "
        "space there, or set OUTPUT_DIR to a folder on a disk with room, then run it again."
    )


def _read_only_message(output_dir) -> str:
    return (
        f"Cannot write the shards in {output_dir}: the folder is read-only (Read-only file "
        "system); nothing of this run is left there. Set OUTPUT_DIR to a folder you can write "
        "to (None: the course cache), then run it again."
    )


@pytest.fixture
def small_filesystem(tmp_path):
    """A 96 KiB tmpfs folder (root only); skipped where this process cannot mount one."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip("cannot mount a tmpfs here; the simulated disk-full test covers it")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


# Item 3: a full disk (a real 96 KiB file system): one line, this run's files deleted,
# the user's files untouched, and a smaller set fits on the next run.
def test_convert_on_a_full_small_filesystem_cleans_up_and_the_next_run_fits(
    small_source, small_filesystem
):
    output_dir = small_filesystem / "shards"
    hashes = _with_user_files(output_dir)
    with pytest.raises(conversion.OutputFolderError) as raised:
        conversion.convert(small_source, output_dir, target_size=64, num_shards=8)
    assert str(raised.value) == _disk_full_message(output_dir)
    assert sorted(p.name for p in output_dir.iterdir()) == sorted(USER_FILES)
    report = conversion.convert(small_source, output_dir, target_size=16, num_shards=2)
    assert report.num_written == 60
    assert _hashes(output_dir, USER_FILES) == hashes


# Item 3, simulated (runs everywhere): the disk fills while the third shard is written.
def test_convert_disk_full_while_writing_a_shard_deletes_what_the_run_wrote(small_source, tmp_path):
    output_dir = tmp_path / "shards"
    hashes = _with_user_files(output_dir)
    previous = conversion.convert(small_source, output_dir, target_size=16, num_shards=3)
    previous_set = [Path(p).name for p in previous.shards] + [sidecar.METADATA_FILE]
    previous_hashes = _hashes(output_dir, previous_set)

    def write_shard_until_full(examples, folder, index):
        if index == 2:
            Path(shard_files.temporary_path(folder, index)).write_bytes(b"half a shard")
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{folder}/flowers02.tfrec.tmp; No space left on device"
            )
        return shard_files.write_shard(examples, folder, index)

    steps = conversion.ConversionSteps(write_shard=write_shard_until_full)
    with pytest.raises(conversion.OutputFolderError) as raised:
        conversion.convert(small_source, output_dir, target_size=32, num_shards=4, steps=steps)
    assert str(raised.value) == _disk_full_message(output_dir)
    # The previous set is kept whole: this run wrote its own set beside it, never over it.
    assert sorted(p.name for p in output_dir.iterdir()) == sorted([*USER_FILES, *previous_set])
    assert _hashes(output_dir, previous_set) == previous_hashes
    assert len(shard_files.list_shards(str(output_dir))) == 3
    assert _hashes(output_dir, USER_FILES) == hashes


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder holding the user's files, mounted read-only (a bind mount: root ignores
    permissions); skipped where this process cannot mount."""
    writable, folder = tmp_path / "writable", tmp_path / "read-only"
    hashes = _with_user_files(writable)
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(writable), str(folder)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip("cannot bind-mount here; the simulated read-only test covers it")
    try:
        yield folder, hashes
    finally:
        subprocess.run(["umount", str(folder)], check=True)


# Item 3: a read-only output folder (a real read-only mount): one line, what to do.
def test_convert_into_a_read_only_folder_says_so_in_one_line(small_source, read_only_folder):
    folder, hashes = read_only_folder
    with pytest.raises(conversion.OutputFolderError) as raised:
        conversion.convert(small_source, folder, target_size=16, num_shards=2)
    assert str(raised.value) == _read_only_message(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(USER_FILES)
    assert _hashes(folder, USER_FILES) == hashes


# Item 3, simulated (runs everywhere): the first write is refused as read-only.
def test_convert_read_only_error_on_the_first_write_is_one_line(
    small_source, tmp_path, monkeypatch
):
    output_dir = tmp_path / "shards"
    hashes = _with_user_files(output_dir)

    def refuse(path, content):
        raise tf.errors.FailedPreconditionError(None, None, f"{path}.tmp; Read-only file system")

    monkeypatch.setattr(shard_metadata, "write_json", refuse)
    with pytest.raises(conversion.OutputFolderError) as raised:
        conversion.convert(small_source, output_dir, target_size=16, num_shards=2)
    assert str(raised.value) == _read_only_message(output_dir)
    assert _hashes(output_dir, USER_FILES) == hashes


def test_convert_output_dir_that_is_a_file_says_so(small_source, tmp_path):
    (tmp_path / "shards").write_bytes(b"a file of yours")
    with pytest.raises(ValueError) as raised:
        conversion.convert(small_source, tmp_path / "shards", target_size=16, num_shards=2)
    assert str(raised.value) == (
        f"`output_dir` {tmp_path / 'shards'} is a file, not a folder: give a folder for the "
        "shards (it is created if needed)."
    )
    assert (tmp_path / "shards").read_bytes() == b"a file of yours"


def test_convert_output_dir_with_a_tilde_is_in_the_home_folder(small_source, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    report = conversion.convert(small_source, "~/my-shards", target_size=16, num_shards=2)
    assert report.output_dir == str(tmp_path / "my-shards")
    assert len(shard_files.list_shards(str(tmp_path / "my-shards"))) == 2


# Issue 39, item 6: an Adobe RGB photo is stored in sRGB, its colours as a viewer shows them.
def _s15(value: float) -> bytes:
    return struct.pack(">i", round(value * 65536))


def _xyz(x: float, y: float, z: float) -> bytes:
    return b"XYZ " + b"\0" * 4 + _s15(x) + _s15(y) + _s15(z)


def _adobe_rgb_profile() -> bytes:
    """A minimal ICC v2 display profile (matrix and gamma) with Adobe RGB (1998)'s primaries."""
    text = b"Adobe RGB (1998), made by the test\0"
    desc = b"desc" + b"\0" * 4 + struct.pack(">I", len(text)) + text + b"\0" * 78
    gamma = b"curv" + b"\0" * 4 + struct.pack(">IH", 1, 563) + b"\0\0"  # 563/256 = 2.2
    tags = [
        (b"desc", desc),
        (b"wtpt", _xyz(0.9505, 1.0, 1.0891)),
        (b"rXYZ", _xyz(0.6097, 0.3111, 0.0195)),  # The primaries, adapted to D50.
        (b"gXYZ", _xyz(0.2053, 0.6257, 0.0609)),
        (b"bXYZ", _xyz(0.1492, 0.0632, 0.7446)),
        (b"rTRC", gamma),
        (b"gTRC", gamma),
        (b"bTRC", gamma),
        (b"cprt", b"text" + b"\0" * 4 + b"none\0\0\0\0"),
    ]
    offset, table, data = 128 + 4 + 12 * len(tags), b"", b""
    for signature, body in tags:
        table += signature + struct.pack(">II", offset + len(data), len(body))
        data += body + b"\0" * (-len(body) % 4)
    d50 = _s15(0.9642) + _s15(1.0) + _s15(0.8249)
    header = struct.pack(">I", offset + len(data)) + b"\0" * 4 + bytes([2, 0x10, 0, 0])
    header += b"mntrRGB XYZ " + b"\0" * 12 + b"acsp" + b"\0" * 28 + d50 + b"\0" * 48
    return header + struct.pack(">I", len(tags)) + table + data


def test_convert_stores_an_adobe_rgb_photo_in_srgb(tmp_path, capsys):
    colours = np.array([(60, 160, 90), (200, 80, 60), (90, 90, 200), (40, 120, 170)], np.uint8)
    pixels = np.repeat(np.repeat(colours.reshape(2, 2, 3), 64, axis=0), 64, axis=1)  # 4 patches.
    profile = _adobe_rgb_profile()
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=100, icc_profile=profile)
    files = {"roses/adobe.jpg": buffer.getvalue(), "tulips/plain.jpg": _jpeg(pixels)}
    source = sources.resolve_source(str(make_folder(tmp_path / "photos", files)))
    conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    stored = {
        r["label"].numpy(): tf.io.decode_jpeg(r["image"]).numpy()
        for r in _records(tmp_path / "out")
    }
    srgb = ImageCms.profileToProfile(
        Image.fromarray(colours.reshape(2, 2, 3)),
        ImageCms.ImageCmsProfile(io.BytesIO(profile)),
        ImageCms.createProfile("sRGB"),
    )
    expected = np.asarray(srgb).reshape(4, 3).astype(int)
    centres = [(8, 8), (8, 24), (24, 8), (24, 24)]  # Each patch's centre at 32 px.
    adobe = np.array(
        [stored[b"roses"][y - 3 : y + 3, x - 3 : x + 3].mean((0, 1)) for y, x in centres]
    )
    plain = np.array(
        [stored[b"tulips"][y - 3 : y + 3, x - 3 : x + 3].mean((0, 1)) for y, x in centres]
    )
    assert np.abs(adobe - expected).max() <= 4, (adobe, expected)  # The colours a viewer shows.
    assert np.abs(adobe - colours).max() >= 30, adobe  # Not the file's numbers read as sRGB.
    assert np.abs(plain - colours).max() <= 4, plain  # An untagged photo: left as it is.
    assert records.rgb_profile(files["roses/adobe.jpg"]) == profile
    assert records.rgb_profile(files["tulips/plain.jpg"]) == b""


# Issue 39, item 6: photos in a subfolder of a class folder, or a link looping back, are named.
def test_subfolders_and_a_link_loop_in_class_folders_are_named_not_read(tmp_path, capsys):
    files = _plain_photos(num_per_class=2)
    files.update({f"daisy/2024/nested_{i}.jpg": files["daisy/daisy_0.jpg"] for i in range(3)})
    files["daisy/2024/deeper/old.jpg"] = files["daisy/daisy_0.jpg"]
    root = make_folder(tmp_path / "photos", files).resolve()
    (root / "tulips" / "loop").symlink_to(root, target_is_directory=True)
    source = sources.resolve_source(str(root))
    assert source.num_images == 4
    line = (  # One line, whatever the count: the folders named under the source's folder.
        "Not read: 2 folder(s) inside the class folders (only <class>/<file> is read; move "
        f"their photos up into the class folder): daisy/2024 (4 image(s)), tulips/loop (a link "
        f"to {root}, not followed)"
    )
    assert source.describe().splitlines()[1:] == [line]
    conversion.convert(source, tmp_path / "out", target_size=16, num_shards=1)
    printed = capsys.readouterr().out.splitlines()
    index = printed.index("Input images: 4 = 4 written + 0 skipped.")
    assert printed[index + 1 :] == [line]
