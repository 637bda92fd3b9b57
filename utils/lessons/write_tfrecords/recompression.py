"""What resizing and recompressing lab 2's images buy: fewer bytes, faster decoding, at what cost.

`show_resized` shows a few images before and after the lab's `resize_and_crop`;
`measure_recompression` runs the lab's own `resize_and_crop` and `recompress` on a sample
drawn from every class (`utils.sampling`), times decoding in turns
(`comparison.measure_in_turns`), and measures the bytes and the PSNR at several JPEG
qualities. The other functions are its steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

from utils import charts, comparison, display, readable_images, records, sampling, timing
from utils.lab import conversion, sources

# The JPEG qualities drawn in the trade-off plot; the lab's own quality is added if missing.
QUALITIES = (50, 70, 80, 90, 95)


@dataclasses.dataclass(frozen=True)
class RecompressionResult:
    """What `measure_recompression` found on its sample.

    Attributes:
        num_images: images in the sample.
        quality: the lab's JPEG quality.
        original_bytes: mean bytes per image as stored in the source.
        same_size_bytes: mean bytes per image recompressed at `quality` without resizing.
        resized_bytes: mean bytes per image resized and recompressed at `quality`.
        psnr_db: the PSNR of the resized images recompressed at `quality`, in dB.
        decode_runs: images/s decoding the originals ("originals") and the resized images
            at each quality ("resized, quality 90"), measured in turns.
        decode_verdict: the line comparing the resized images at `quality` with the
            originals (`comparison.describe_difference`).
        format_rates: images/s decoding the originals of each format (JPEG, HEIC ...) as
            the conversion does (`conversion.rates_by_format`).
        format_counts: the sample's images of each format.
    """

    num_images: int
    quality: int
    original_bytes: float
    same_size_bytes: float
    resized_bytes: float
    psnr_db: float
    decode_runs: dict[str, comparison.RepeatedResult]
    decode_verdict: str
    format_rates: dict[str, comparison.RepeatedResult] = dataclasses.field(default_factory=dict)
    format_counts: dict[str, int] = dataclasses.field(default_factory=dict)


def show_resized(
    source: sources.ImageSource, resize_and_crop: Callable, *, target_size: int, num_images: int = 8
) -> Figure:
    """Prints the sizes of images from across `source`, then shows them resized and cropped.

    A file that does not decode is skipped and listed (`readable_images.readable_sample`).

    Args:
        source: the lab's image source.
        resize_and_crop: `resize_and_crop(image, target_size)`, the lab's function.
        target_size: the side of the square images, in pixels.
        num_images: how many images to show.

    Returns:
        The matplotlib Figure (`display.show_images`).

    Raises:
        ValueError: in one line, if no image of `source` decodes.

    Example:
        recompression.show_resized(source, resize_and_crop, target_size=192)
    """
    paths = conversion.source_paths(source)
    spread = paths[:: max(1, len(paths) // num_images)]
    shown_paths, images, _ = readable_images.readable_sample(
        spread + paths, num_images, tensorflow_only=False
    )
    if not images:
        raise ValueError(_none_decode(source))
    print(f"Sizes of {len(images)} images (height, width):", [i.shape[:2] for i in images])
    labels = [source.class_names.index(Path(path).parent.name) for path in shown_paths]
    squares = np.stack([resize_and_crop(image, target_size).numpy() for image in images])
    resized = tf.data.Dataset.from_tensor_slices((squares, labels))
    return display.show_images(
        resized, class_names=source.class_names, num_images=len(images), num_columns=4
    )


def measure_recompression(
    source: sources.ImageSource,
    resize_and_crop: Callable,
    recompress: Callable,
    *,
    target_size: int,
    quality: int,
    num_sample: int,
    num_timed_images: int,
    repeats: int,
) -> RecompressionResult:
    """Measures, on a sample from every class, what resizing and recompressing buy and cost.

    Prints the sample's classes; each format's decode rate (HEIC against JPEG); the bytes
    per image of the originals, of the originals recompressed at their own size, and of
    the images resized and recompressed; their PSNR; and whether the resized images
    decode faster than the originals (decoding timed in turns, on all cores). Draws
    bytes, decode speed and PSNR against the JPEG quality.

    Args:
        source: the lab's image source.
        resize_and_crop: `resize_and_crop(image, target_size)`, the lab's function.
        recompress: `recompress(image, quality)`, the lab's function.
        target_size: the side of the square images, in pixels.
        quality: the lab's JPEG quality.
        num_sample: images in the sample (unreadable files skipped and listed).
        num_timed_images: images decoded per timed run.
        repeats: rounds of the decode timings.

    Returns:
        A `RecompressionResult`.

    Raises:
        ValueError: in one line, if no image of `source` decodes.

    Example:
        result = recompression.measure_recompression(source, resize_and_crop, recompress,
            target_size=192, quality=90, num_sample=200, num_timed_images=2000, repeats=5)
    """
    every_class = sampling.paths_from_every_class(conversion.source_paths(source))
    paths, originals, _ = readable_images.readable_sample(
        every_class, num_sample, tensorflow_only=False
    )
    if not paths:
        raise ValueError(_none_decode(source))
    per_class = [f"{name} {count}" for name, count in sampling.count_classes(paths).items()]
    print(f"Sample: {len(paths)} images;", display.short_list(per_class))
    original_jpegs = [tf.io.read_file(path).numpy() for path in paths]
    by_format = conversion.encoded_by_format(original_jpegs)
    format_rates = conversion.rates_by_format(by_format, seconds=0.5, repeats=min(repeats, 3))
    format_counts = {name: len(encoded) for name, encoded in by_format.items()}
    print(
        "Decoding the originals as the conversion does (upright, in sRGB, full size), on all "
        "cores: " + conversion.describe_rates(format_rates, format_counts) + "."
    )
    same_size = [recompress(image, quality).numpy() for image in originals]
    resized = [resize_and_crop(image, target_size) for image in originals]
    qualities = sorted({*QUALITIES, quality})
    by_quality = encode_at_qualities(resized, recompress, qualities)
    timers = {"originals": _originals_timer(by_format, format_rates, num_timed_images)}
    timers |= {
        f"resized, quality {q}": decode_timer(jpegs, num_images=num_timed_images)
        for q, jpegs in by_quality.items()
    }
    with contextlib.redirect_stdout(io.StringIO()):  # One line a run; the verdict says it.
        runs = comparison.measure_in_turns(timers, repeats=repeats)
    psnr_by_quality = [mean_psnr(resized, jpegs) for jpegs in by_quality.values()]
    before, after = sampling.mean_bytes(original_jpegs), sampling.mean_bytes(by_quality[quality])
    result = RecompressionResult(
        num_images=len(paths),
        quality=quality,
        original_bytes=before,
        same_size_bytes=sampling.mean_bytes(same_size),
        resized_bytes=after,
        psnr_db=psnr_by_quality[qualities.index(quality)],
        decode_runs=runs,
        decode_verdict=comparison.describe_difference(
            [runs[f"resized, quality {quality}"], runs["originals"]], name="Decoding"
        ),
        format_rates=format_rates,
        format_counts=format_counts,
    )
    print(
        f"Bytes per image: originals {before:,.0f}; recompressed at their size "
        f"{result.same_size_bytes:,.0f} ({display.describe_saving(before, result.same_size_bytes)}"
        f"); resized to {target_size} px and recompressed {after:,.0f} "
        f"({display.describe_saving(before, after)}), PSNR {result.psnr_db:.1f} dB at quality "
        f"{quality}.\n{result.decode_verdict}"
    )
    charts.plot_quality_trade_off(
        qualities,
        [sampling.mean_bytes(jpegs) / 1e3 for jpegs in by_quality.values()],
        [runs[f"resized, quality {q}"] for q in qualities],
        reference=("originals", before / 1e3, runs["originals"].median),
        psnr_db=psnr_by_quality,
    )
    return result


def _none_decode(source: sources.ImageSource) -> str:
    """One line: no image of `source` decodes, what its files are, and what to do."""
    found = conversion.encoded_by_format(
        [tf.io.read_file(path).numpy()[:64] for path in conversion.source_paths(source)[:200]]
    )
    kinds = ", ".join(f"{len(files)} {name}" for name, files in found.items())
    todo = (
        "open one in a viewer: if it shows, export the photos as JPEG; if not, the files are "
        "damaged"
    )
    if "HEIC" in found and not records.heif_support():
        todo = "install pillow-heif (pip install pillow-heif), or export the photos as JPEG"
    elif "AVIF" in found and not records.avif_support():
        todo = "upgrade Pillow (11.3 or later), or export the photos as JPEG"
    return f"No image of {source.name!r} decodes (of the first files: {kinds}); {todo}."


def _originals_timer(
    by_format: dict[str, list[bytes]],
    format_rates: dict[str, comparison.RepeatedResult],
    num_timed_images: int,
) -> Callable[[], float]:
    """Times decoding the originals, each run about a second where some are slow (HEIC).

    Returns:
        A timer for `comparison.measure_in_turns`: `tf.io.decode_jpeg` where every
        original is a JPEG or PNG (as labs 1 and 3 decode files), else as the conversion
        decodes them.
    """
    encoded = [image for images in by_format.values() for image in images]
    if set(by_format) <= records.TENSORFLOW_FORMATS:
        return decode_timer(encoded, num_images=num_timed_images)
    seconds_each = sum(len(by_format[name]) / rates.median for name, rates in format_rates.items())
    per_second = len(encoded) / max(seconds_each, 1e-9)
    count = int(min(num_timed_images, max(4, per_second)))
    decoded = tf.data.Dataset.from_tensor_slices(encoded).repeat()
    decoded = decoded.map(conversion.decode_as_converted, num_parallel_calls=tf.data.AUTOTUNE)
    return timing.throughput_timer(decoded, num_images=count)


def encode_at_qualities(
    images: Sequence[tf.Tensor | np.ndarray], recompress: Callable, qualities: list[int]
) -> dict[int, list[bytes]]:
    """Recompresses `images` at each quality.

    Args:
        images: uint8 images (tensors or arrays), all of one size.
        recompress: `recompress(image, quality)`, returning a scalar string tensor.
        qualities: the JPEG qualities to try.

    Returns:
        {quality: the images' JPEG bytes at that quality}, in the order of `qualities`.
    """
    return {
        quality: [recompress(image, quality).numpy() for image in images] for quality in qualities
    }


def decode_timer(encoded_images: list[bytes], *, num_images: int) -> Callable[[], float]:
    """Returns a function that times decoding in-memory JPEGs on all cores, quietly.

    For `comparison.measure_in_turns`: each call decodes `num_images` of `encoded_images`
    (cycling through them, after one warm-up element) and returns images/s.

    Args:
        encoded_images: the JPEG bytes.
        num_images: images decoded per call (make a run last about a second or more: a
            run of 0.1 s is mostly noise).

    Returns:
        A function of no arguments that returns images/s.

    Raises:
        ValueError: if `encoded_images` is empty.

    Example:
        runs = comparison.measure_in_turns({"originals": recompression.decode_timer(jpegs,
                                                                               num_images=2000)})
    """
    if not encoded_images:
        raise ValueError("`encoded_images` must hold at least one JPEG. Received: []")
    decoded = tf.data.Dataset.from_tensor_slices(encoded_images).repeat()
    decoded = decoded.map(
        lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), num_parallel_calls=tf.data.AUTOTUNE
    )
    return timing.throughput_timer(decoded, num_images=num_images)


def mean_psnr(images: Sequence[tf.Tensor | np.ndarray], encoded_images: list[bytes]) -> float:
    """Returns the PSNR, in dB, of the JPEGs in `encoded_images` against their images.

    The squared error is averaged over every pixel of every image first, then turned into
    one PSNR: a flat image that a JPEG encodes exactly has an infinite PSNR of its own,
    which would make a mean of per-image PSNRs infinite.

    Args:
        images: uint8 images (tensors or arrays).
        encoded_images: the same images as JPEG bytes, in the same order.

    Returns:
        The peak signal-to-noise ratio (higher: more detail kept);
        infinite only when every JPEG decodes to its image exactly.

    Raises:
        ValueError: if the two lists differ in length.
    """
    decoded = [tf.io.decode_jpeg(jpeg, channels=3) for jpeg in encoded_images]
    if len(decoded) != len(images):
        raise ValueError(
            f"`images` and `encoded_images` must be as long. Received: {len(images)} and "
            f"{len(decoded)}"
        )
    squared_errors = [
        np.mean((np.asarray(image, np.float64) - np.asarray(jpeg, np.float64)) ** 2)
        for image, jpeg in zip(images, decoded, strict=True)
    ]
    mean_squared_error = float(np.mean(squared_errors))
    return math.inf if mean_squared_error == 0 else 10 * math.log10(255**2 / mean_squared_error)
