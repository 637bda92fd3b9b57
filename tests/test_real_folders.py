"""Issue 14: a learner's own folder of real photos, with faults; nothing lost, nothing deleted.

Each test names the issue item it covers (1-12). The folder comes from the session
fixture `real_photo_folder` (tests/conftest.py).
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from utils import pipeline, readable_images, shard_files, sidecar
from utils.lab import conversion, shard_cache, sources, validation

LOOK_ALIKES = {
    "name-00000-of-00010": b"a user's file named like a Beam shard",
    "name-00001-of-00010.tfrecord": b"another",
    "x.tfrecord": b"a user's own TFRecord file",
    "notes.tmp": b"a user's temporary notes",
}


@pytest.fixture(scope="module")
def real_source(real_photo_folder):
    return sources.resolve_source(str(real_photo_folder["root"]))


@pytest.fixture(scope="module")
def real_shards(real_source, tmp_path_factory):
    """The real folder converted once: (output_dir, report)."""
    output_dir = tmp_path_factory.mktemp("real-shards")
    report = conversion.convert(real_source, output_dir, target_size=48, num_shards=4)
    return str(output_dir), report


def _digests(folder) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).iterdir())
    }


# Items 4 and 6: a path with [ ], every file accounted for, any extension's case.
def test_resolve_source_lists_every_file_of_a_folder_with_brackets(real_photo_folder, real_source):
    folder = real_photo_folder
    assert "[2024]" in str(folder["root"])
    assert real_source.class_names == folder["classes"]
    assert sorted(real_source.paths) == sorted(folder["readable"] + folder["unreadable"])
    assert list(real_source.not_images) == folder["not_images"]
    assert real_source.empty_class_folders == folder["empty_class_folders"]
    every_file = sorted(str(p) for p in folder["root"].glob("*/*") if p.is_file())
    assert sorted(real_source.paths + real_source.not_images) == every_file
    suffixes = {Path(p).suffix for p in real_source.paths}
    assert suffixes == {".jpg", ".JPG", ".jpeg", ".png"}
    described = real_source.describe()
    assert "WARNING: empty class folder(s), not used as classes: drafts, lilies" in described
    assert (
        "Not read: 4 file(s) in the class folders are not .jpg/.jpeg/.png/.heic/.heif/.avif images:"
        in described
    )


# Items 1, 4, 6: the conversion of the real folder accounts for every input.
def test_convert_real_folder_writes_readable_and_lists_unreadable(real_photo_folder, real_shards):
    output_dir, report = real_shards
    folder = real_photo_folder
    assert report.num_input_images == len(folder["readable"]) + len(folder["unreadable"]) == 39
    assert report.num_written == len(folder["readable"]) == 36
    assert sorted(image.path for image in report.skipped) == folder["unreadable"]
    errors = {Path(image.path).name: image.error for image in report.skipped}
    assert errors["empty.jpg"] == "Input is empty."
    assert "Unknown image file format" in errors["not_an_image.jpg"]
    metadata = sidecar.read_metadata(output_dir)
    assert metadata["not_images"] == folder["not_images"]
    assert metadata["empty_class_folders"] == ["drafts", "lilies"]
    result = validation.validate(output_dir, verbose=False)
    assert result.ok, result.problems
    assert result.num_records == 36 and len(result.skipped) == 3


# Item 3: a conversion deletes nothing it did not write, and validation blames no user file.
def test_convert_keeps_look_alike_user_files_byte_for_byte(real_source, tmp_path):
    for name, content in LOOK_ALIKES.items():
        (tmp_path / name).write_bytes(content)
    before = _digests(tmp_path)
    conversion.convert(real_source, tmp_path, target_size=32, num_shards=4)
    report = conversion.convert(real_source, tmp_path, target_size=32, num_shards=2)  # Fewer.
    after = _digests(tmp_path)
    assert {name: after[name] for name in before} == before
    shards = [Path(p).name for p in report.shards]
    assert sorted(set(after) - set(before)) == sorted([*shards, sidecar.METADATA_FILE])
    result = validation.validate(str(tmp_path), verbose=False)
    assert result.ok, result.problems


def test_convert_refuses_to_overwrite_a_file_it_did_not_write(real_source, tmp_path):
    (tmp_path / "flowers00-20.tfrec").write_bytes(b"mine")
    (tmp_path / "notes.tmp").write_bytes(b"mine too")
    with pytest.raises(ValueError, match=r"holds flowers00-20\.tfrec, which no sidecar or"):
        conversion.convert(real_source, tmp_path, target_size=32, num_shards=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flowers00-20.tfrec", "notes.tmp"]
    assert (tmp_path / "flowers00-20.tfrec").read_bytes() == b"mine"


def test_interrupted_conversion_is_cleaned_up_leaving_the_users_files(real_source, tmp_path):
    (tmp_path / "notes.tmp").write_bytes(b"mine")

    def failing_to_example(*args):
        raise KeyboardInterrupt

    steps = conversion.ConversionSteps(to_example=failing_to_example)
    with pytest.raises(KeyboardInterrupt):
        conversion.convert(real_source, tmp_path, target_size=32, num_shards=2, steps=steps)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.tmp"]
    assert (tmp_path / "notes.tmp").read_bytes() == b"mine"
    report = conversion.convert(real_source, tmp_path, target_size=32, num_shards=2)
    shards = [Path(p).name for p in report.shards]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*shards, sidecar.METADATA_FILE, "notes.tmp"]
    )


# Item 10: parameters checked before any file is touched, named as parameters.
@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"jpeg_quality": 101}, r"`jpeg_quality` must be an integer from 0 to 100\. Received: "),
        ({"jpeg_quality": -1}, r"`jpeg_quality` must be an integer from 0 to 100"),
        ({"target_size": 0}, r"`target_size` must be a positive integer\. Received: target_si"),
        ({"num_shards": 2.0}, r"`num_shards` must be a positive integer"),
    ],
    ids=["quality 101", "quality -1", "target size 0", "float shards"],
)
def test_convert_bad_parameter_touches_no_file(real_source, real_shards, arguments, message):
    output_dir, _ = real_shards
    before = _digests(output_dir)
    parameters = {"target_size": 48, "num_shards": 4, **arguments}
    with pytest.raises(ValueError, match=message):
        conversion.convert(real_source, output_dir, **parameters)
    with pytest.raises(ValueError, match=message):
        shard_cache.ensure_shards(real_source, output_dir, **parameters)
    assert _digests(output_dir) == before


# Item 5: nothing to learn from is refused.
def test_resolve_source_one_class_folder_is_refused(real_photo_folder, tmp_path):
    shutil.copytree(real_photo_folder["root"] / "cats", tmp_path / "cats")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"only one class folder with images \(cats\).*at least 2"):
        sources.resolve_source(str(tmp_path))


def test_convert_folder_of_only_corrupt_images_is_refused(tmp_path):
    for name in ["a/1.jpg", "a/2.jpg", "b/3.jpg"]:
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_bytes(b"not a photo")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.tfrecord").write_bytes(b"mine")
    source = sources.resolve_source(str(tmp_path / "in"))
    with pytest.raises(ValueError, match=r"No image of .* could be read: all 3 were skipped"):
        conversion.convert(source, tmp_path / "out", target_size=32, num_shards=7)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x.tfrecord"]
    assert not validation.validate(str(tmp_path / "out"), verbose=False).ok


# Item 11: the same input and parameters give the same bytes, in another process too.
def test_convert_same_input_gives_byte_identical_files(real_source, real_shards, tmp_path):
    output_dir, _ = real_shards
    script = (
        "import sys; from utils.lab import conversion, sources; "
        "source = sources.resolve_source(sys.argv[1]); "
        "conversion.convert(source, sys.argv[2], target_size=48, num_shards=4)"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "random"}
    command = [sys.executable, "-c", script, real_source.name, str(tmp_path)]
    subprocess.run(command, check=True, cwd=REPO_ROOT, env=environment, capture_output=True)
    assert _digests(tmp_path) == _digests(output_dir)


# Item 7: stale shards are rebuilt.
def test_ensure_shards_rebuilds_when_an_image_changes(real_photo_folder, tmp_path, capsys):
    folder = tmp_path / "photos"
    shutil.copytree(real_photo_folder["root"], folder)
    source = sources.resolve_source(str(folder))
    first = shard_cache.ensure_shards(source, tmp_path / "out", target_size=32, num_shards=2)
    again = shard_cache.ensure_shards(source, tmp_path / "out", target_size=32, num_shards=2)
    assert again == first
    shard_bytes = sidecar.read_metadata(first.output_dir)["shard_bytes"]
    cat = folder / "cats" / "cats_00.jpg"
    cat.write_bytes((folder / "coffee" / "coffee_00.jpg").read_bytes())  # Same count.
    capsys.readouterr()
    changed = shard_cache.ensure_shards(
        sources.resolve_source(str(folder)), tmp_path / "out", target_size=32, num_shards=2
    )
    out = capsys.readouterr().out
    assert "(the images or the parameters changed)" in out
    assert changed.fingerprint != first.fingerprint
    assert sidecar.read_metadata(changed.output_dir)["shard_bytes"] != shard_bytes


# Item 8: missing, extra, truncated and corrupted shards are errors that name the shard.
@pytest.fixture
def copied_shards(real_shards, tmp_path):
    output_dir, report = real_shards
    for path in Path(output_dir).iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path, [tmp_path / Path(p).name for p in report.shards]


def test_list_shards_missing_shard_is_an_error(copied_shards):
    folder, shards = copied_shards
    shards[2].unlink()
    with pytest.raises(ValueError, match=rf"{shards[2].name}: listed in the sidecar, but missing"):
        shard_files.list_shards(str(folder))
    problems = validation.validate(str(folder), verbose=False).problems
    assert f"{shards[2].name}: listed in the sidecar, but missing." in problems


def test_list_shards_extra_shard_is_an_error(copied_shards):
    folder, shards = copied_shards
    shutil.copy(shards[0], folder / "flowers09-10.tfrec")
    with pytest.raises(ValueError, match=r"flowers09-10\.tfrec: a shard not listed in the sidec"):
        shard_files.list_shards(str(folder))


def _truncate(path):
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])


def _corrupt(path):
    content = bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))


@pytest.mark.parametrize("damage", [_truncate, _corrupt], ids=["truncated", "corrupted"])
def test_reading_a_damaged_shard_names_it(copied_shards, damage):
    folder, shards = copied_shards
    damage(shards[1])
    dataset = pipeline.checked_records([str(p) for p in shards], num_parallel_reads=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"Damaged shard.*{shards[1].name}"):
        for _ in dataset:
            pass
    fast = pipeline.tfrecord_images(  # The fast reader raises TensorFlow's own error.
        [str(p) for p in shards], target_size=48, num_classes=4, batch_size=8
    )
    with pytest.raises(tf.errors.DataLossError):
        for _ in fast:
            pass
    damaged = shard_files.find_damaged_shards([str(p) for p in shards])
    assert len(damaged) == 1 and damaged[0].startswith(f"{shards[1]}: ")
    problems = validation.validate(str(folder), verbose=False).problems
    assert any(p.startswith(f"{shards[1].name}: ") for p in problems)


# Item 9: validation without the sidecar says so in a few lines, not one per record.
def test_validate_without_sidecar_prints_the_problem_not_every_record(copied_shards, capsys):
    folder, _ = copied_shards
    (folder / sidecar.METADATA_FILE).unlink()
    result = validation.validate(str(folder))
    assert len(result.problems) == 2
    assert result.problems[1] == (
        f"4 shard-like file(s) in {folder}; their records are not checked without the sidecar."
    )
    assert len(capsys.readouterr().out.splitlines()) < 12


# Item 1: a sample shows readable images and says which it skipped.
def test_readable_sample_skips_and_lists_unreadable_files(real_photo_folder, capsys):
    unreadable = real_photo_folder["unreadable"]
    readable = real_photo_folder["readable"][:2]
    paths, images, skipped = readable_images.readable_sample([*unreadable, *readable], 2)
    assert paths == readable
    assert [image.shape[-1] for image in images] == [3, 3]
    assert [path for path, _ in skipped] == unreadable
    out = capsys.readouterr().out.splitlines()
    prefix = "Skipped in the sample: 1 file(s), "  # Three reasons, a line each.
    assert [line[: len(prefix)] for line in out] == [prefix] * 3
