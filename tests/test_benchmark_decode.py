"""Tests of tools/course_benchmark/decode.py: its command line, inputs (structure, not timings)."""

import re
from pathlib import Path

import pytest

from tools.course_benchmark import decode as benchmark_decode
from utils.lessons.accelerator_waiting import decode_less


def test_benchmark_decode_runs_on_a_tiny_input(write_small_shards, capsys):
    shards_dir = str(Path(write_small_shards(2, target_size=64)[0]).parent)
    capsys.readouterr()  # Not the fixture's own lines.
    arguments = [
        "--shards-dir",
        shards_dir,
        "--num-images",
        "12",
        "--timed-images",
        "16",
        "--repeats",
        "2",
        "--image-size",
        "24",
        "--batch-size",
        "4",
    ]
    assert benchmark_decode.main(arguments) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "12 JPEGs in memory (longer side 64-64 px, median 64); random crops at 24 px, "
        "batches of 4; "
    )
    numbers = r"[\d,.]+ \([\d,.]+-[\d,.]+, 2 runs\)"
    for line, label in zip(lines[1:4], decode_less.VARIANTS, strict=True):
        assert re.fullmatch(f"{label}: {numbers} images/s, taken in turns", line), line
    assert lines[4].startswith("The machine was ")
    for line, label in zip(lines[5:], list(decode_less.VARIANTS)[1:], strict=True):
        pattern = f"Target: {label} / decode, then crop: {numbers}; (meets|misses) the 1.5x target."
        assert re.fullmatch(pattern, line), line
    assert len(lines) == 7


def test_benchmark_decode_without_shards_says_where():
    with pytest.raises(FileNotFoundError, match=r"No TFRecord shards in /nonexistent"):
        benchmark_decode.read_encoded_images("/nonexistent", 4)


def test_benchmark_decode_reads_the_jpeg_files_of_a_source(small_flowers):
    encoded_images = benchmark_decode.read_jpeg_files(str(small_flowers), 5)
    assert [jpeg[:2] for jpeg in encoded_images] == [b"\xff\xd8"] * 5  # JPEG's start marker.
