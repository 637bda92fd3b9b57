"""Tests of utils/lessons/write_tfrecords/recompression.py, on tiny images and a small source."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
import tensorflow as tf

from utils import display, records, sampling
from utils.lessons.write_tfrecords import recompression


def _images(count=3, size=32):
    rng = np.random.default_rng(0)
    smooth = np.linspace(0, 255, size, dtype=np.float32)[None, :, None]
    return [
        tf.constant(np.clip(smooth + rng.normal(0, 4, (size, size, 3)), 0, 255).astype(np.uint8))
        for _ in range(count)
    ]


def _recompress(image, quality):
    return tf.io.encode_jpeg(image, quality=quality, optimize_size=True)


def test_encode_at_qualities_gives_fewer_bytes_at_lower_quality():
    encoded = recompression.encode_at_qualities(_images(), _recompress, [50, 95])
    assert list(encoded) == [50, 95] and [len(jpegs) for jpegs in encoded.values()] == [3, 3]
    assert sampling.mean_bytes(encoded[50]) < sampling.mean_bytes(encoded[95])


def test_decode_timer_returns_images_per_second_quietly(capsys):
    timer = recompression.decode_timer([_recompress(_images(1)[0], 90).numpy()], num_images=8)
    assert timer() > 0 and timer() > 0
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match=r"at least one JPEG. Received: \[\]"):
        recompression.decode_timer([], num_images=8)


def test_mean_psnr_is_higher_at_higher_quality_and_checks_lengths():
    images = _images()
    low = recompression.mean_psnr(images, [_recompress(i, 30).numpy() for i in images])
    high = recompression.mean_psnr(images, [_recompress(i, 95).numpy() for i in images])
    assert 20 < low < high
    with pytest.raises(ValueError, match="must be as long. Received: 3 and 1"):
        recompression.mean_psnr(images, [_recompress(images[0], 90).numpy()])


def test_mean_psnr_stays_finite_with_a_flat_image_encoded_exactly():
    flat = np.full((32, 32, 3), 128, np.uint8)
    textured = _images()[0]
    jpegs = [_recompress(image, 90).numpy() for image in (flat, textured)]
    assert np.array_equal(tf.io.decode_jpeg(jpegs[0]), flat)  # Its own PSNR is infinite.
    both = recompression.mean_psnr([flat, textured], jpegs)
    alone = recompression.mean_psnr([textured], jpegs[1:])
    assert np.isfinite(both) and both > alone  # Half the squared error: 3 dB more.
    assert round(both - alone, 2) == 3.01
    assert recompression.mean_psnr([flat], jpegs[:1]) == float("inf")


def test_show_resized_prints_the_sizes_and_shows_squares(small_source, capsys):
    figure = recompression.show_resized(
        small_source, records.resize_and_crop, target_size=32, num_images=4
    )
    printed = capsys.readouterr().out
    assert re.fullmatch(
        r"Sizes of 4 images \(height, width\): \[(\(\d+, \d+\)(, )?){4}\]\n", printed
    )
    assert len(figure.axes) == 4
    assert all(axis.images[0].get_array().shape == (32, 32, 3) for axis in figure.axes)


def test_measure_recompression_measures_a_sample_of_every_class_in_turns(small_source, capsys):
    measured = recompression.measure_recompression(
        small_source,
        records.resize_and_crop,
        records.recompress,
        target_size=32,
        quality=85,
        num_sample=10,
        num_timed_images=8,
        repeats=2,
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Sample: 10 images; daisy 2, dandelion 2, roses 2, sunflowers 2, tulips 2"
    before, after = measured.original_bytes, measured.resized_bytes
    assert measured.format_rates["JPEG"].median > 0
    assert lines[1].startswith(
        "Decoding the originals as the conversion does (upright, in sRGB, full size), on all "
        "cores: JPEG "
    )
    assert lines[1].endswith(" images/s (10 images).")
    assert measured.format_counts == {"JPEG": 10}
    del lines[1]
    assert lines[1].startswith(f"Bytes per image: originals {before:,.0f}; recompressed at their")
    assert lines[1].endswith(
        f"resized to 32 px and recompressed {after:,.0f} "
        f"({display.describe_saving(before, after)}), PSNR {measured.psnr_db:.1f} dB at quality 85."
    )
    assert lines[2:] == [measured.decode_verdict] and lines[2].startswith("Decoding: ")
    assert measured.num_images == 10 and after < measured.same_size_bytes < before
    # The lab's quality joins the plotted ones; every setting is timed in the same 2 rounds.
    assert list(measured.decode_runs) == [
        "originals",
        *(f"resized, quality {q}" for q in (50, 70, 80, 85, 90, 95)),
    ]
    assert {len(runs.values) for runs in measured.decode_runs.values()} == {2}
    assert 25 < measured.psnr_db < 60
    assert len(plt.gcf().axes) == 3  # Bytes, decode speed and PSNR against the quality.
    plt.close("all")
