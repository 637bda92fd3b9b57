"""Tests of utils/lab/data.py: the embedded flowers dataset."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from utils.lab import data


def _digest(root):
    files = sorted(root.glob("*/*.jpg"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest(), len(files)


def test_class_counts_default_matches_flower_photos():
    assert data.class_counts(3670) == [633, 898, 641, 699, 799]


@pytest.mark.parametrize("num_images", [5, 6, 17, 100, 501, 3670, 10000])
def test_class_counts_add_up_and_keep_every_class(num_images):
    counts = data.class_counts(num_images)
    assert sum(counts) == num_images
    assert min(counts) >= 1


@pytest.mark.parametrize("bad", [0, 4, -3, 2.5, "100", True, None])
def test_class_counts_bad_input_names_the_argument(bad):
    with pytest.raises(ValueError, match=r"`num_images` must be an integer of at least 5"):
        data.class_counts(bad)


def test_make_flowers_dataset_layout_sizes_and_manifest(tmp_path):
    root = data.make_flowers_dataset(25, cache_dir=tmp_path)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == list(data.CLASSES)
    files = sorted(root.glob("*/*.jpg"))
    assert len(files) == 25
    manifest = json.loads((root / "dataset.json").read_text())
    assert manifest["class_counts"] == data.class_counts(25)
    sizes = set()
    for path in files:
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB"
            assert data.MIN_SIDE <= min(image.size) and max(image.size) <= data.MAX_SIDE
            sizes.add(image.size)
    assert len(sizes) > 20  # Varied sizes and aspect ratios.


def test_make_flowers_dataset_same_seed_same_bytes_other_seed_differs(tmp_path):
    first = _digest(data.make_flowers_dataset(10, seed=1, cache_dir=tmp_path / "a"))
    again = _digest(data.make_flowers_dataset(10, seed=1, cache_dir=tmp_path / "b"))
    other = _digest(data.make_flowers_dataset(10, seed=2, cache_dir=tmp_path / "c"))
    assert first == again
    assert first != other


def test_make_flowers_dataset_reuses_finished_cache(tmp_path):
    root = data.make_flowers_dataset(10, cache_dir=tmp_path)
    marker = root / "daisy" / "daisy_0000.jpg"
    marker.write_bytes(b"changed")
    assert data.make_flowers_dataset(10, cache_dir=tmp_path) == root
    assert marker.read_bytes() == b"changed"  # Not regenerated.


def test_make_flowers_dataset_keeps_the_copy_another_process_finished_first(tmp_path, monkeypatch):
    """Two notebooks draw the same dataset at once: the first to finish keeps its folder,
    which it may be reading; the second drops its own (it used to delete the first's)."""
    rename, first = Path.rename, {}

    def finished_first(staging, target):
        if not first:  # The other process's copy, complete, moved in just before this one.
            shutil.copytree(staging, target)
            first["inode"] = Path(target).stat().st_ino
        return rename(staging, target)

    monkeypatch.setattr(Path, "rename", finished_first)
    root = data.make_flowers_dataset(10, cache_dir=tmp_path)
    assert root.stat().st_ino == first["inode"] and data.is_cached(10, cache_dir=tmp_path)
    assert not list(tmp_path.glob("*.partial-*"))


def test_make_flowers_dataset_ignores_an_unfinished_folder(tmp_path):
    assert not data.is_cached(10, cache_dir=tmp_path)
    root = data.make_flowers_dataset(10, cache_dir=tmp_path)
    assert data.is_cached(10, cache_dir=tmp_path)
    assert not data.is_cached(10, seed=data.DEFAULT_SEED + 1, cache_dir=tmp_path)
    (root / "dataset.json").unlink()  # As if a run had been killed before finishing.
    assert not data.is_cached(10, cache_dir=tmp_path)
    (root / "daisy" / "daisy_0000.jpg").write_bytes(b"half written")
    root = data.make_flowers_dataset(10, cache_dir=tmp_path)
    with Image.open(root / "daisy" / "daisy_0000.jpg") as image:
        image.load()
    assert not list(tmp_path.glob("*.partial-*"))


def test_make_flowers_dataset_bad_seed(tmp_path):
    with pytest.raises(ValueError, match=r"`seed` must be an integer. Received: seed='1'"):
        data.make_flowers_dataset(10, seed="1", cache_dir=tmp_path)


def test_default_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(tmp_path))
    assert data.default_cache_dir() == tmp_path


def test_render_flower_classes_differ_in_shape_not_in_mean_colour():
    """A pixel's colour does not give the class away: mean colours overlap across classes."""
    means = {}
    for name in data.CLASSES:
        images = [data.render_flower(name, np.random.default_rng(i)) for i in range(12)]
        assert [(image.dtype, image.shape[2]) for image in images] == [(np.uint8, 3)] * 12
        means[name] = np.array([image.reshape(-1, 3).mean(axis=0) for image in images])
    spread_within = np.mean([m.std(axis=0).mean() for m in means.values()])
    spread_between = np.stack([m.mean(axis=0) for m in means.values()]).std(axis=0).mean()
    assert spread_between < spread_within
