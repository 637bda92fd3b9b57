"""Converting an image source into a set of TFRecord shards.

The course's reference for lab 2: lab 2 plugs the learner's own functions into `convert`.
Its parts: the report (`conversion_report`), the images loaded (`image_loading`), the output
folder checked (`output_checks`) and the set moved in (`output_folder`), its sidecar
(`shard_metadata`); finding a set already written is `shard_cache`'s job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import arguments, errors, records, shard_files
from utils.lab import (
    data,
    image_loading,
    output_checks,
    output_folder,
    progress,
    sources,
)
from utils.lab.conversion_report import ConversionReport, SkippedImage, SmallImage
from utils.lab.image_loading import LoadedImage, load_images, why_unreadable
from utils.lab.shard_metadata import write_metadata

DEFAULT_NUM_SHARDS = 16
# A local folder of at least this many images is timed first, format by format, and the
# conversion's expected time said before it starts (a HEIC takes 30 times a JPEG's time).
LARGE_FOLDER = 500
# Images of each format the expectation is timed on (read into memory first).
TIMED_PER_FORMAT = 8


@dataclasses.dataclass
class ConversionSteps:
    """The four functions `convert` runs; lab 2 passes the learner's own."""

    resize_and_crop: Callable = records.resize_and_crop
    recompress: Callable = records.recompress
    to_example: Callable = records.to_example
    write_shard: Callable = shard_files.write_shard


def convert(
    source: sources.ImageSource,
    output_dir: str,
    *,
    target_size: int = records.DEFAULT_TARGET_SIZE,
    num_shards: int = DEFAULT_NUM_SHARDS,
    jpeg_quality: int = records.DEFAULT_JPEG_QUALITY,
    seed: int = data.DEFAULT_SEED,
    steps: ConversionSteps | None = None,
) -> ConversionReport:
    """Converts every image of `source` into `num_shards` TFRecord shards in `output_dir`.

    Images are shuffled once (with `seed`) so that every shard mixes the classes and
    split into `num_shards` nearly equal shards. One pipeline decodes them to 3 channels
    (upright, and in sRGB where the file embeds another RGB colour profile), resizes,
    crops and recompresses them in parallel on all cores; the records are written one
    shard after another. An image that cannot be read or decoded is skipped,
    counted and listed with its error. The same input and parameters give the same bytes.

    Every parameter is checked before any file is touched. The set is written in a folder
    of its own inside `output_dir`; once complete, the previous set's files (as its sidecar
    lists them) make way and it is moved in, its sidecar JSON last. A run that stops before
    leaves the previous set whole. A file of yours with a name the set could take is an
    error, not overwritten.

    Args:
        source: a `sources.ImageSource`.
        output_dir: a local folder or a `gs://` folder of your own; created if needed.
        target_size: side of the square images, in pixels.
        num_shards: number of shards; fewer if there are fewer images.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        seed: seed of the shuffle.
        steps: the functions to run; the course's reference ones by default.

    Returns:
        A `ConversionReport`; its summary is also printed.

    Raises:
        ValueError: if a parameter is out of range, `output_dir` is inside the source's
            images or holds a file the conversion would overwrite, or no image could be read.
        output_checks.OutputFolderError: in one line, if `output_dir` is full, read-only or
            not yours to write; what the run wrote there is deleted first.

    Example:
        report = conversion.convert(source, "/tmp/flowers-tfrec", num_shards=16)
    """
    steps = steps or ConversionSteps()
    parameters = {
        "target_size": target_size,
        "num_shards": num_shards,
        "jpeg_quality": jpeg_quality,
        "seed": seed,
    }
    check_parameters(source, **parameters)
    output_dir = output_checks.check_output_dir(source, output_dir)
    if source.num_images >= LARGE_FOLDER and not source.is_remote:
        print(expected_time(source, steps, target_size=target_size, jpeg_quality=jpeg_quality))
    fingerprint = input_fingerprint(source, **parameters)
    with output_checks.write_errors_said(output_dir):  # Outermost: said once the folder is gone.
        with output_folder.incomplete_dir(output_dir) as folder:
            report = _write_set(source, folder, steps, fingerprint=fingerprint, **parameters)
    shards = [f"{output_dir}/{Path(shard).name}" for shard in report.shards]
    report = dataclasses.replace(report, output_dir=output_dir, shards=shards)
    print(report.summary() + source.subfolders_not_read())  # Nested photos: named, not read.
    return report


def _write_set(
    source: sources.ImageSource,
    folder: str,
    steps: ConversionSteps,
    *,
    fingerprint: str,
    target_size: int,
    num_shards: int,
    jpeg_quality: int,
    seed: int,
) -> ConversionReport:
    """Writes the shards of `convert` in `folder`, then their sidecar; returns the report."""
    start = time.perf_counter()
    paths = source_paths(source)
    np.random.default_rng(seed).shuffle(paths)
    chunks = np.array_split(paths, min(num_shards, len(paths)))
    images = load_images(
        paths,
        source.class_names,
        resize_and_crop=steps.resize_and_crop,
        recompress=steps.recompress,
        target_size=target_size,
        jpeg_quality=jpeg_quality,
    )
    shard_of = {path: index for index, chunk in enumerate(chunks) for path in chunk}
    written = _WrittenShards(target_size=target_size)
    # A bad file's decoder log line is said once, in its skipped line (`why_unreadable`).
    with errors.decoder_messages():
        _write_shards(images, shard_of, len(chunks), folder, steps, source, written)
    unwritten = sorted(set(paths) - set(written.paths))
    skipped = [SkippedImage(path, why_unreadable(path)) for path in unwritten]
    if not written.paths:
        reasons: dict[str, int] = {}
        for image in skipped:
            reasons[image.error] = reasons.get(image.error, 0) + 1
        why, count = max(reasons.items(), key=lambda item: item[1])
        where = str(Path(paths[0]).parent.parent) if not source.is_remote else source.pattern
        todo = (
            ""  # The reason says what to do.
            if why in (records.HEIC_MESSAGE, records.AVIF_MESSAGE)
            else " What to do: open one in a photo viewer; if it shows, export the photos as "
            "JPEG; if not, the files are damaged."
        )
        raise ValueError(
            f"No image of {source.name!r} could be read: all {len(paths)} were skipped, so "
            f"there is nothing to learn from; no shard was kept. In {where}: {count} of them "
            f"{why} (first: {skipped[0].path}).{todo}"
        )
    report = ConversionReport(
        output_dir=folder,
        shards=written.shards,
        shard_counts=written.shard_counts,
        num_input_images=len(paths),
        skipped=skipped,
        empty_class_folders=list(source.empty_class_folders),
        input_bytes=written.input_bytes,
        output_image_bytes=written.output_bytes,
        seconds=time.perf_counter() - start,
        small_images=written.small_images,
        target_size=target_size,
        composited=written.composited,
    )
    write_metadata(folder, source, report, target_size, jpeg_quality, fingerprint=fingerprint)
    return report


def expected_time(
    source: sources.ImageSource, steps: ConversionSteps, *, target_size: int, jpeg_quality: int
) -> str:
    """Says how long converting a local folder should take, from its formats timed now.

    Every image's format is read from its first bytes; `TIMED_PER_FORMAT` images of each
    are loaded as the conversion loads them (decoded, resized, recompressed), on all
    cores, and each format's count divided by its rate.

    Args:
        source: a local folder's images.
        steps: the conversion's functions (`resize_and_crop` and `recompress` are timed).
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images.

    Returns:
        One line: the expected time, and each format's count and rate.
    """
    formats: dict[str, list[str]] = {}
    for path in source_paths(source):
        with open(path, "rb") as file:
            formats.setdefault(records.image_format(file.read(64)) or "other", []).append(path)

    def prepare(image_bytes: tf.Tensor) -> tf.Tensor:
        image = image_loading.decode_as_converted(image_bytes, min_side=target_size)
        return steps.recompress(steps.resize_and_crop(image, target_size), jpeg_quality)

    timed = {}
    with errors.decoder_messages():
        for name, paths in formats.items():
            if name != "other":  # Files of no known format are skipped, fast.
                timed[name] = _first_that_load(paths, prepare, TIMED_PER_FORMAT)
    try:
        rates = image_loading.rates_by_format(timed, prepare, seconds=0.5, repeats=1)
    except (ValueError, tf.errors.OpError) as error:  # A timed file that does not decode.
        return f"Expected time: not measured ({errors.first_line(error)})."
    seconds = sum(len(formats[name]) / max(rates[name].median, 1e-9) for name in rates)
    counts = {name: len(paths) for name, paths in formats.items()}
    return (
        f"Expected time: about {_duration(seconds)} for {source.num_images:,} images on "
        f"{os.cpu_count() or 1} core(s), at the rates just timed: "
        + image_loading.describe_rates(rates, counts)
        + "."
    )


def _first_that_load(paths: Sequence[str], prepare: Callable, count: int) -> list[bytes]:
    """The bytes of the first `count` of `paths` that `prepare` loads (a damaged one does not)."""
    loaded = []
    for path in paths:
        image_bytes = Path(path).read_bytes()
        try:
            prepare(tf.constant(image_bytes))
        except tf.errors.OpError:
            continue
        loaded.append(image_bytes)
        if len(loaded) == count:
            break
    return loaded


def _duration(seconds: float) -> str:
    """`seconds` as "45 s", "4.2 min" or "1.3 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def check_parameters(
    source: sources.ImageSource,
    *,
    target_size: int,
    num_shards: int,
    jpeg_quality: int,
    seed: int = data.DEFAULT_SEED,
) -> None:
    """Checks a conversion's parameters, before any file is touched.

    Args:
        source: the images to convert: at least 2 classes and one image.
        target_size: side of the square images, in pixels: at least 1.
        num_shards: number of shards: at least 1.
        jpeg_quality: JPEG quality, 0-100.
        seed: seed of the shuffle: at least 0.

    Raises:
        ValueError: naming the parameter that is wrong and the value received.
    """
    arguments.check_integer("target_size", target_size, 1)
    arguments.check_integer("num_shards", num_shards, 1)
    arguments.check_integer("jpeg_quality", jpeg_quality, 0, 100)
    arguments.check_integer("seed", seed, 0)
    if len(source.class_names) < 2 or not source.num_images:
        raise ValueError(
            f"Data source {source.name!r} has {source.num_images} images in "
            f"{len(source.class_names)} class(es): a classifier needs at least 2 classes."
        )


def source_paths(source: sources.ImageSource) -> list[str]:
    """Returns the paths of a source's images.

    Args:
        source: an image source; a local folder's paths are listed already (never globbed).

    Returns:
        The paths, sorted.
    """
    if source.paths:
        return sorted(source.paths)
    return sorted(tf.io.gfile.glob(source.pattern))  # A gs:// glob given by its user.


def input_fingerprint(
    source: sources.ImageSource, *, target_size: int, num_shards: int, jpeg_quality: int, seed: int
) -> str:
    """Returns a hash of the input (paths, sizes, modification times) and the parameters.

    Shards whose sidecar holds another fingerprint are stale. For a `gs://` source only
    the paths count (a stat per object would cost one request each).

    Args:
        source: the images to convert.
        target_size: side of the stored images.
        num_shards: the number of shards.
        jpeg_quality: the JPEG quality the images are recompressed at.
        seed: the seed of the shuffle before writing.

    Returns:
        A SHA-256 hex digest.
    """
    digest = hashlib.sha256()
    parameters = [target_size, num_shards, jpeg_quality, seed, list(source.class_names)]
    digest.update(json.dumps(parameters).encode())
    for path in source_paths(source):
        if source.is_remote:
            digest.update(f"{path}\n".encode())
        else:
            stat = Path(path).stat()
            digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _images_per_shard(
    images: Iterator[LoadedImage], shard_of: dict[str, int], num_shards: int
) -> Iterator[Iterator[LoadedImage]]:
    """The images of each shard in turn, shard 0 first.

    The images come in shard order, so each shard's are a run of consecutive ones; each
    run must be read to its end before the next is asked for.

    Yields:
        For shard 0, 1, ..., `num_shards - 1`: an iterator of its images (empty if none
        was loaded).
    """
    runs = itertools.groupby(images, key=lambda image: shard_of[image.path])
    index, run = next(runs, (None, iter(())))
    for shard in range(num_shards):
        if index == shard:
            yield run
            index, run = next(runs, (None, iter(())))
        else:
            yield iter(())


@dataclasses.dataclass
class _WrittenShards:
    """The shards written so far, and the images in them."""

    target_size: int
    shards: list[str] = dataclasses.field(default_factory=list)
    shard_counts: list[int] = dataclasses.field(default_factory=list)
    paths: list[str] = dataclasses.field(default_factory=list)
    input_bytes: int = 0
    output_bytes: int = 0
    small_images: list[SmallImage] = dataclasses.field(default_factory=list)
    composited: list[str] = dataclasses.field(default_factory=list)


def _write_shards(
    images: Iterator[LoadedImage],
    shard_of: dict[str, int],
    num_shards: int,
    folder: str,
    steps: ConversionSteps,
    source: sources.ImageSource,
    written: _WrittenShards,
) -> None:
    """Writes each shard's images in `folder` with `steps.write_shard`, noting them in `written`."""
    images_per_shard = _images_per_shard(images, shard_of, num_shards)
    for index in progress.track(range(num_shards), desc="Writing shards"):
        records_before = len(written.paths)
        examples = _serialized_examples(
            next(images_per_shard), written, steps.to_example, source.class_names
        )
        written.shards.append(steps.write_shard(examples, folder, index))
        written.shard_counts.append(len(written.paths) - records_before)


def _serialized_examples(
    images: Iterator[LoadedImage],
    written: _WrittenShards,
    to_example: Callable,
    class_names: Sequence[str],
) -> Iterator[bytes]:
    """Yields each loaded image's serialized record, and notes what it wrote."""
    for image in images:
        written.paths.append(image.path)
        written.input_bytes += image.num_bytes
        written.output_bytes += len(image.jpeg)
        if min(image.original_size) < written.target_size:
            written.small_images.append(SmallImage(image.path, tuple(image.original_size)))
        if image.composited:  # Transparent: put on white, as a viewer shows it.
            written.composited.append(image.path)
        example = to_example(image.jpeg, image.class_index, image.original_size, class_names)
        # Deterministic: the features map is serialized in key order, so that the same
        # input gives the same bytes in every run (else the order varies per process).
        yield example.SerializeToString(deterministic=True)
