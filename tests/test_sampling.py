"""Tests of utils/sampling.py: a sample from every class, counted by class, its mean size."""

from utils import sampling


def test_mean_bytes():
    assert sampling.mean_bytes([b"ab", b"abcd"]) == 3.0


def test_paths_from_every_class_takes_the_classes_in_turn():
    paths = [f"/d/{name}/{name}_{i}.jpg" for name in ("daisy", "roses", "tulips") for i in range(3)]
    paths = paths[:-1]  # tulips has 2.
    ordered = sampling.paths_from_every_class(paths)
    assert sorted(ordered) == sorted(paths)
    assert ordered[:4] == [
        "/d/daisy/daisy_0.jpg",
        "/d/roses/roses_0.jpg",
        "/d/tulips/tulips_0.jpg",
        "/d/daisy/daisy_1.jpg",
    ]
    assert sampling.count_classes(ordered[:5]) == {"daisy": 2, "roses": 2, "tulips": 1}


def test_windows_paths_are_counted_by_their_class_folder():
    paths = ["C:\\d\\roses\\a.jpg", "C:\\d\\daisy\\b.jpg", "C:\\d\\roses\\c.jpg"]
    assert sampling.paths_from_every_class(paths) == [paths[0], paths[1], paths[2]]
    assert sampling.count_classes(paths) == {"daisy": 1, "roses": 2}
