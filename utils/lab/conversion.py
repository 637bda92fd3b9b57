"""Converting an image source into a set of TFRecord shards: the folder checked, the images
loaded, the shards written.

The course's reference for lab 2: lab 2 plugs the learner's own functions into `convert`.
In order: the output folder is checked first and a write error there said in one line; the
images are loaded in one parallel pipeline (read, decoded, resized, recompressed; each
format's decode rate timed where a large folder is converted); the shards are written and
moved in whole (`output_folder`) with their sidecar (`shard_metadata`); what happened is a
`conversion_report.ConversionReport`. Finding a set already written is `shard_cache`'s job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import io
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import arguments, comparison, errors, records, shard_files, timing
from utils.lab import data, output_folder, progress, sources
from utils.lab.conversion_report import ConversionReport, SkippedImage, SmallImage
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
        OutputFolderError: in one line, if `output_dir` is full, read-only or
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
    output_dir = check_output_dir(source, output_dir)
    if source.num_images >= LARGE_FOLDER and not source.is_remote:
        print(expected_time(source, steps, target_size=target_size, jpeg_quality=jpeg_quality))
    fingerprint = input_fingerprint(source, **parameters)
    with write_errors_said(output_dir):  # Outermost: said once the folder is gone.
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
        image = decode_as_converted(image_bytes, min_side=target_size)
        return steps.recompress(steps.resize_and_crop(image, target_size), jpeg_quality)

    timed = {}
    with errors.decoder_messages():
        for name, paths in formats.items():
            if name != "other":  # Files of no known format are skipped, fast.
                timed[name] = _first_that_load(paths, prepare, TIMED_PER_FORMAT)
    try:
        rates = rates_by_format(timed, prepare, seconds=0.5, repeats=1)
    except (ValueError, tf.errors.OpError) as error:  # A timed file that does not decode.
        return f"Expected time: not measured ({errors.first_line(error)})."
    seconds = sum(len(formats[name]) / max(rates[name].median, 1e-9) for name in rates)
    counts = {name: len(paths) for name, paths in formats.items()}
    return (
        f"Expected time: about {_duration(seconds)} for {source.num_images:,} images on "
        f"{os.cpu_count() or 1} core(s), at the rates just timed: "
        + describe_rates(rates, counts)
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


# The output folder, checked before anything is written.

_ELSEWHERE = (
    "Set OUTPUT_DIR to a folder you can write to (None: the course cache), then run it again."
)
# A write error in the output folder, by its errno values, TensorFlow error or words: what
# happened, and what to do. Whatever the run wrote there is deleted by then.
_FOLDER_PROBLEMS = [
    (
        (errno.ENOSPC, errno.EDQUOT),
        tf.errors.ResourceExhaustedError,
        "No space left on device",
        "the disk is full (No space left on device); the files this run wrote there are deleted, "
        "so the next run starts clean. Free some space there, or set OUTPUT_DIR to a folder on a "
        "disk with room, then run it again.",
    ),
    (
        (errno.EROFS,),
        (),
        "Read-only file system",
        "the folder is read-only (Read-only file "
        f"system); nothing of this run is left there. {_ELSEWHERE}",
    ),
    (
        (errno.EACCES, errno.EPERM),
        tf.errors.PermissionDeniedError,
        "Permission denied",
        f"you are not allowed to write there (Permission denied); nothing of this run is left "
        f"there. {_ELSEWHERE}",
    ),
]


class OutputFolderError(OSError):
    """The output folder cannot take the shards (disk full, read-only); one line says what to do."""


def check_output_dir(source: sources.ImageSource, output_dir: str | Path) -> str:
    """Checks a conversion's output folder, before any file is touched.

    Args:
        source: the images to convert.
        output_dir: the folder the shards would go to (`~` is the home folder).

    Returns:
        `output_dir` as a shell reads it: a string, `~` expanded, without a final "/".

    Raises:
        ValueError: if `output_dir` is not a folder path, is a file, or is inside the
            source's images.
    """
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise ValueError(f"`output_dir` must be a folder path. Received: {output_dir!r}")
    typed = str(output_dir) if "://" in str(output_dir) else os.path.expanduser(str(output_dir))
    typed = typed.rstrip("/") or typed
    if "://" not in typed and Path(typed).is_file():
        raise ValueError(
            f"`output_dir` {Path(typed).absolute()} is a file, not a folder: give a "
            "folder for the shards (it is created if needed)."
        )
    image_root = source.pattern.rsplit("/", 2)[0]
    if f"{typed}/".startswith(f"{image_root}/"):
        raise ValueError(
            f"`output_dir` {typed} is inside the source's image folder {image_root}: "
            "write the shards somewhere else."
        )
    return typed


@contextlib.contextmanager
def write_errors_said(output_dir: str) -> Iterator[None]:
    """Turns a write error in `output_dir` (disk full, read-only, not allowed) into one line.

    Args:
        output_dir: the folder being written, as checked by `check_output_dir`.

    Yields:
        Nothing: the block that writes there.

    Raises:
        OutputFolderError: saying what happened and what to do, for a problem it knows.
        tensorflow.errors.OpError: a write error it does not know, as it is.
        OSError: likewise.
    """
    try:
        yield
    except (tf.errors.OpError, OSError) as error:
        code, message = getattr(error, "errno", None), str(getattr(error, "message", "") or error)
        for errnos, kind, words, problem in _FOLDER_PROBLEMS:
            if code in errnos or isinstance(error, kind) or words in message:
                raise OutputFolderError(
                    f"Cannot write the shards in {output_dir}: {problem}"
                ) from None
        raise


# The images, loaded in one parallel pipeline.

# Images timed per run of one format: at most this many (a JPEG decodes in a millisecond).
MAX_TIMED_PER_FORMAT = 2000


@dataclasses.dataclass(frozen=True)
class LoadedImage:
    """One image read, decoded, resized and recompressed, ready to become a record."""

    path: str
    num_bytes: int
    jpeg: bytes
    class_index: int
    original_size: list[int]
    composited: bool = False  # Transparent pixels composited on white (`decode_upright`).


def load_images(
    paths: Sequence[str],
    class_names: Sequence[str],
    *,
    resize_and_crop: Callable,
    recompress: Callable,
    target_size: int,
    jpeg_quality: int,
) -> Iterator[LoadedImage]:
    """Yields each image of `paths` that loads, in order; one that fails is left out.

    One pipeline over every image decodes them in parallel on all cores; the caller
    accounts for the images left out (`why_unreadable`).

    Args:
        paths: the images; each one's class is the name of its folder.
        class_names: the classes, in the order of their indices.
        resize_and_crop: the function that makes an image square (lab 2's given code).
        recompress: the function that encodes it as a JPEG (lab 2's given code).
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.

    Yields:
        A `LoadedImage` for each image that loads.
    """
    load = functools.partial(
        _load_image,
        class_table=_class_table(class_names),
        transform=lambda image: recompress(resize_and_crop(image, target_size), jpeg_quality),
        target_size=target_size,
    )
    images = tf.data.Dataset.from_tensor_slices(paths).map(
        load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    for (
        path,
        num_bytes,
        jpeg,
        class_index,
        size,
        composited,
    ) in images.ignore_errors().as_numpy_iterator():
        yield LoadedImage(
            path.decode(), int(num_bytes), jpeg, int(class_index), size.tolist(), bool(composited)
        )


def _load_image(
    path: tf.Tensor,
    *,
    class_table: tf.lookup.StaticHashTable,
    transform: Callable,
    target_size: int,
) -> tuple[tf.Tensor, ...]:
    """Reads and transforms one image in the graph; returns its fields as tensors."""
    image_bytes = tf.io.read_file(path)
    # Upright as a photo viewer shows it (EXIF Orientation), and a large JPEG decoded at
    # 1/2, 1/4 or 1/8 of its size where its shorter side keeps `target_size` pixels.
    image, original_size = records.decode_upright(image_bytes, min_side=target_size)
    image = records.to_srgb(image, image_bytes)  # An Adobe RGB photo's colours as shown.
    class_index = class_table.lookup(tf.strings.split(path, "/")[-2])
    header = tf.strings.substr(image_bytes, 0, 65536)
    composited = tf.numpy_function(_has_transparency, [header], tf.bool, stateful=False)
    jpeg = transform(image)
    return path, tf.strings.length(image_bytes), jpeg, class_index, original_size, composited


def _has_transparency(header: bytes) -> np.bool_:
    """`records.has_transparency` for `tf.numpy_function`."""
    return np.bool_(records.has_transparency(header))


def _class_table(class_names: Sequence[str]) -> tf.lookup.StaticHashTable:
    """A lookup from class name to class index, run in the graph (-1 for an unknown name)."""
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(list(class_names)), tf.range(len(class_names), dtype=tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=-1)


def why_unreadable(path: str) -> str:
    """Says why reading and decoding `path` fails: the first line of its error.

    What TensorFlow's decoder logged meanwhile (`Premature end of JPEG data`) is added in
    parentheses, rather than left on stderr as a raw log line.

    Args:
        path: an image that `load_images` left out.

    Returns:
        The error's first line, and what the decoder logged.
    """
    with errors.decoder_messages() as logged:
        try:
            records.decode_upright(tf.io.read_file(path))
            why = "it decodes on its own, but failed in the pipeline (resize or recompress)"
        except tf.errors.OpError as error:
            why = errors.error_message(error)
    return why + (f" (the decoder logged: {'; '.join(logged)})" if logged else "")


def encoded_by_format(encoded_images: Sequence[bytes]) -> dict[str, list[bytes]]:
    """Groups images' bytes by their format (`records.image_format`), commonest first.

    Args:
        encoded_images: the files' bytes.

    Returns:
        {format: its images' bytes}; bytes of no known format under "other".
    """
    groups: dict[str, list[bytes]] = {}
    for encoded in encoded_images:
        groups.setdefault(records.image_format(encoded) or "other", []).append(encoded)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def decode_as_converted(image_bytes: tf.Tensor, min_side: int | None = None) -> tf.Tensor:
    """Decodes one image as the conversion does: upright, in sRGB, any format it reads.

    Args:
        image_bytes: a scalar string tensor, the file's bytes.
        min_side: as for `records.decode_upright` (a large JPEG decoded at a reduced scale).

    Returns:
        The uint8 image (height, width, 3).
    """
    image, _ = records.decode_upright(image_bytes, min_side=min_side)
    return records.to_srgb(image, image_bytes)


def rates_by_format(
    by_format: dict[str, list[bytes]],
    prepare: Callable[[tf.Tensor], tf.Tensor] = decode_as_converted,
    *,
    seconds: float = 1.0,
    repeats: int = 3,
) -> dict[str, comparison.RepeatedResult]:
    """Times `prepare` on each format's images in memory, on all cores, formats in turns.

    A HEIC photo can cost 30 times a JPEG: each format's run holds as many images as
    `seconds` of its own work, from one image timed first (at least 2, at most
    `MAX_TIMED_PER_FORMAT`), so that no format's run lasts minutes.

    Args:
        by_format: {format: encoded images} (`encoded_by_format`).
        prepare: what is timed on one image's bytes (default: `decode_as_converted`).
        seconds: about how long one run of each format lasts.
        repeats: rounds, formats taken in turns (`comparison.measure_in_turns`).

    Returns:
        {format: images/s, `comparison.RepeatedResult`}, quietly (nothing printed).

    Raises:
        ValueError: if `by_format` holds no image, or an image does not decode.
    """
    if not any(by_format.values()):
        raise ValueError("`by_format` must hold at least one image. Received: no images")
    cores = os.cpu_count() or 1
    timers = {}
    with errors.decoder_messages():
        for name, encoded in by_format.items():
            if not encoded:
                continue
            prepare(tf.constant(encoded[0]))  # Warm-up: the ops' first run.
            start = time.perf_counter()
            prepare(tf.constant(encoded[0]))
            each = max(time.perf_counter() - start, 1e-5)
            count = min(max(math.ceil(seconds * cores / each), 2), MAX_TIMED_PER_FORMAT)
            dataset = tf.data.Dataset.from_tensor_slices(encoded).repeat()
            dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
            timers[name] = timing.throughput_timer(dataset, num_images=count)
        with contextlib.redirect_stdout(io.StringIO()):
            return comparison.measure_in_turns(timers, repeats=repeats)


def describe_rates(rates: dict[str, comparison.RepeatedResult], counts: dict[str, int]) -> str:
    """One line: each format's images/s and how many images of it, and its cost against JPEG.

    Args:
        rates: {format: images/s} (`rates_by_format`).
        counts: {format: images of it in the folder or the sample}.

    Returns:
        As "JPEG 1,020 images/s (180 images), HEIC 160 images/s (20 images): HEIC takes
        6.4x as long as JPEG"; the costs are said only when JPEG is among the formats.
    """
    parts = [
        f"{name} {_rate(rates[name].median)} images/s ({counts.get(name, 0):,} images)"
        for name in rates
    ]
    text = ", ".join(parts)
    if "JPEG" in rates:
        jpeg = rates["JPEG"].median
        costs = [
            f"{name} takes {jpeg / rates[name].median:.1f}x as long as JPEG"
            for name in rates
            if name != "JPEG" and rates[name].median
        ]
        if costs:
            text += ": " + "; ".join(costs)
    return text


def _rate(images_per_second: float) -> str:
    """A rate with the digits that tell formats apart: "1,020", "8.4", "0.31"."""
    if images_per_second >= 100:
        return f"{images_per_second:,.0f}"
    return f"{images_per_second:.1f}" if images_per_second >= 1 else f"{images_per_second:.2f}"
