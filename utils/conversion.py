"""Converting an image source into a set of TFRecord shards, and finding or building that set.

The course's reference for lab 2: lab 2 plugs the learner's own functions into `convert`;
labs 3 and 4 call `ensure_shards` to find lab 2's shards or write them. While a set is being
written, a manifest (`MANIFEST_FILE`) lists every file the run may create; a
conversion deletes only files that a sidecar or a manifest lists, never a file by its name alone.
"""

from __future__ import annotations

import dataclasses
import errno as _errno
import functools
import hashlib
import itertools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import data, errors, progress, records, shard_files, sources
from utils.shard_files import (
    MANIFEST_FILE,
    METADATA_FILE,
    SHARD_PREFIX,
    SHARD_SUFFIX,
    TEMPORARY_SUFFIX,
)

DEFAULT_NUM_SHARDS = 16
# Names a conversion writes: shards, their temporary names, the sidecar and the manifest.
_COURSE_FILE = re.compile(
    rf"^({SHARD_PREFIX}\d+(-\d+)?{re.escape(SHARD_SUFFIX)}|{re.escape(METADATA_FILE)}|"
    rf"{re.escape(MANIFEST_FILE)})({re.escape(TEMPORARY_SUFFIX)})?$"
)


@dataclasses.dataclass
class ConversionSteps:
    """The four functions `convert` runs; lab 2 passes the learner's own."""

    resize_and_crop: Callable = records.resize_and_crop
    recompress: Callable = records.recompress
    to_example: Callable = records.to_example
    write_shard: Callable = shard_files.write_shard


@dataclasses.dataclass(frozen=True)
class SkippedImage:
    """An input image that was not written, and why."""

    path: str
    error: str


@dataclasses.dataclass(frozen=True)
class SmallImage:
    """An input image smaller than the target on its shorter side: written, enlarged."""

    path: str
    size: tuple[int, int]


# At most this many small images are named in a report; the count is always complete.
_MAX_SMALL_LISTED = 10


@dataclasses.dataclass(frozen=True)
class ConversionReport:
    """What `convert` did.

    Attributes:
        output_dir: the shards' folder.
        shards: the shard paths written, in order.
        shard_counts: records in each shard.
        num_input_images: images the source holds.
        skipped: images that could not be read or decoded, with the error of each.
        empty_class_folders: class folders with no images, not used as classes.
        input_bytes: bytes of the images written, as stored in the source.
        output_image_bytes: bytes of the same images recompressed.
        seconds: time taken.
        small_images: images written whose shorter side was under `target_size` pixels:
            kept (a small photo still shows its class, and dropping it would change the
            class counts without a word), enlarged, and listed so you can remove them.
        target_size: side of the square images written.
    """

    output_dir: str
    shards: list[str]
    shard_counts: list[int]
    num_input_images: int
    skipped: list[SkippedImage]
    empty_class_folders: list[str]
    input_bytes: int
    output_image_bytes: int
    seconds: float
    small_images: list[SmallImage] = dataclasses.field(default_factory=list)
    target_size: int = records.DEFAULT_TARGET_SIZE

    @property
    def num_written(self) -> int:
        """Records written, in all shards."""
        return sum(self.shard_counts)

    @property
    def records_per_second(self) -> float:
        """Records written per second of the whole conversion."""
        return self.num_written / self.seconds if self.seconds else float("inf")

    def summary(self) -> str:
        """Returns the report `convert` prints.

        Returns:
            Lines of counts, bytes before and after, speed, and the skipped files.
        """
        written = max(self.num_written, 1)
        before, after = self.input_bytes / written, self.output_image_bytes / written
        lines = [
            f"Wrote {self.num_written} records in {len(self.shards)} shards to "
            f"{self.output_dir} in {self.seconds:.1f} s ({self.records_per_second:.0f} records/s).",
            f"Average bytes per image: {before:,.0f} before, {after:,.0f} after "
            f"({1 - after / before:.0%} saved)."
            if before
            else "No image written.",
            f"Input images: {self.num_input_images} = {self.num_written} written "
            f"+ {len(self.skipped)} skipped.",
        ]
        lines += [f"  skipped {image.path}: {image.error}" for image in self.skipped]
        if self.small_images:
            side = self.target_size
            lines.append(
                f"Smaller than {side} x {side}: {len(self.small_images)} image(s), kept and "
                "enlarged (blurry; remove them from the folder if they are thumbnails):"
            )
            lines += [
                f"  {image.path}: {image.size[0]} x {image.size[1]}"
                for image in self.small_images[:_MAX_SMALL_LISTED]
            ]
            if len(self.small_images) > _MAX_SMALL_LISTED:
                lines.append(f"  ... and {len(self.small_images) - _MAX_SMALL_LISTED} more.")
        if self.empty_class_folders:
            empty = ", ".join(self.empty_class_folders)
            lines.append(f"Empty class folder(s), not used as classes: {empty}")
        return "\n".join(lines)


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
    split into `num_shards` nearly equal shards. One pipeline decodes them to 3 channels,
    resizes, crops and recompresses them in parallel on all cores; the records are
    written one shard after another. An image that cannot be read or decoded is skipped,
    counted and listed with its error. The same input and parameters give the same bytes.

    Every parameter is checked before any file is touched. Only files the course wrote
    are ever replaced or deleted: the previous set's, as its sidecar (or an unfinished
    run's manifest) lists them. A file of yours with a name the conversion would write
    is an error, not overwritten. The sidecar JSON is written last.

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
        OutputFolderError: in one line, if `output_dir` is full, read-only or not yours
            to write; what the run wrote there is deleted first (by its manifest).

    Example:
        report = conversion.convert(source, "/tmp/flowers-tfrec", num_shards=16)
    """
    steps = steps or ConversionSteps()
    check_parameters(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    output_dir = check_output_dir(source, output_dir)
    manifest = None
    try:
        manifest = _Manifest(output_dir, start_new_set(output_dir))
        report = _write_set(
            source,
            output_dir,
            manifest,
            steps,
            target_size=target_size,
            num_shards=num_shards,
            jpeg_quality=jpeg_quality,
            seed=seed,
        )
    except (tf.errors.OpError, OSError) as error:
        problem = output_folder_problem(error)
        if problem is None:
            raise
        raise OutputFolderError(_clean_up_after(output_dir, manifest, problem)) from None
    print(report.summary())
    return report


def _clean_up_after(output_dir: str, manifest: _Manifest | None, problem: tuple) -> str:
    """Deletes every file the manifests list after a failed write; returns the one-line message.

    The previous set's files go too (the run had begun replacing them), so that the next
    run finds the folder as the course found it first, with only the user's own files.
    """
    listed = files_of_previous_set(output_dir) | set(manifest.files if manifest else ())
    deleted, left = _delete_quietly(output_dir, listed)
    written = set() if manifest is None else set(manifest.files) - set(manifest.previous)
    written.add(MANIFEST_FILE)  # This run's manifest, when it could be written.
    left_of_this_run = [name for name in left if name in written]
    if left_of_this_run:
        names = ", ".join(left_of_this_run[:3])
        cleaned = f"{len(left_of_this_run)} file(s) it wrote could not be deleted ({names})"
    elif manifest is not None and any(name in written for name in deleted):
        cleaned = "the files this run wrote there are deleted, so the next run starts clean"
    else:
        cleaned = "nothing of this run is left there"
    what_happened, what_to_do = problem
    return f"Cannot write the shards in {output_dir}: {what_happened}; {cleaned}. {what_to_do}"


class OutputFolderError(OSError):
    """The output folder cannot take the shards (disk full, read-only); one line says what to do."""


def output_folder_problem(error: BaseException) -> tuple[str, str] | None:
    """Says what went wrong in an output folder, and what to do, if a write error says so.

    Args:
        error: an error raised while writing (TensorFlow's or Python's).

    Returns:
        (what happened, what to do), or None when the error is not about the folder.
    """
    errno_value = getattr(error, "errno", None)
    text = str(getattr(error, "message", "") or error)
    elsewhere = (
        "Set OUTPUT_DIR to a folder you can write to (None: the course cache), then run it again."
    )
    if (
        isinstance(error, tf.errors.ResourceExhaustedError)
        or errno_value in (_errno.ENOSPC, _errno.EDQUOT)
        or "No space left on device" in text
    ):
        return (
            "the disk is full (No space left on device)",
            "Free some space there, or set OUTPUT_DIR to a folder on a disk with room, "
            "then run it again.",
        )
    if errno_value == _errno.EROFS or "Read-only file system" in text:
        return "the folder is read-only (Read-only file system)", elsewhere
    if (
        isinstance(error, tf.errors.PermissionDeniedError)
        or errno_value in (_errno.EACCES, _errno.EPERM)
        or "Permission denied" in text
    ):
        return "you are not allowed to write there (Permission denied)", elsewhere
    return None


def _delete_quietly(output_dir: str, names: set[str]) -> tuple[list[str], list[str]]:
    """Deletes the listed files that are there, the manifest last; returns (deleted, left)."""
    deleted, left = [], []
    for name in sorted(names - {MANIFEST_FILE}) + [MANIFEST_FILE]:
        path = f"{output_dir}/{name}"
        try:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
                deleted.append(name)
        except (tf.errors.OpError, OSError):
            left.append(name)
    return deleted, left


def _write_set(
    source: sources.ImageSource,
    output_dir: str,
    manifest: _Manifest,
    steps: ConversionSteps,
    *,
    target_size: int,
    num_shards: int,
    jpeg_quality: int,
    seed: int,
) -> ConversionReport:
    """Writes the shards and the sidecar of `convert`, listing each file in `manifest` first."""
    start = time.perf_counter()
    paths = source_paths(source)
    np.random.default_rng(seed).shuffle(paths)
    chunks = np.array_split(paths, min(num_shards, len(paths)))
    manifest.add([Path(shard_files.temporary_path(output_dir, i)).name for i in range(len(chunks))])
    images = _load_images(paths, source.class_names, steps, target_size, jpeg_quality)
    shard_of = {path: index for index, chunk in enumerate(chunks) for path in chunk}
    written = _WrittenShards(target_size=target_size)
    # A bad file's decoder log line is said once, in its skipped line (`_why_unreadable`).
    with errors.decoder_messages():
        _write_shards(images, shard_of, len(chunks), output_dir, steps, source, manifest, written)
    unwritten = sorted(set(paths) - set(written.paths))
    skipped = [SkippedImage(path, _why_unreadable(path)) for path in unwritten]
    if not written.paths:
        manifest.delete_all()
        raise ValueError(
            f"No image of {source.name!r} could be read: all {len(paths)} were skipped, so "
            f"there is nothing to learn from; no shard was kept in {output_dir}. First: "
            f"{skipped[0].path}: {skipped[0].error}"
        )
    manifest.delete_previous(keep=[Path(shard).name for shard in written.shards])
    report = ConversionReport(
        output_dir=output_dir,
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
    )
    fingerprint = input_fingerprint(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    shard_files.write_metadata(
        output_dir, source, report, target_size, jpeg_quality, fingerprint=fingerprint
    )
    manifest.finish()
    return report


def check_integer(name: str, value: object, low: int, high: int | None = None) -> None:
    """Checks that a parameter is an integer in a range.

    Args:
        name: the parameter's name, for the message.
        value: the value received.
        low: the smallest value allowed.
        high: the largest value allowed; None for no limit.

    Raises:
        ValueError: naming `name`, the range wanted and the value received.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        wanted = (
            f"an integer from {low} to {high}"
            if high is not None
            else ("a positive integer" if low == 1 else f"an integer of at least {low}")
        )
        raise ValueError(f"`{name}` must be {wanted}. Received: {name}={value!r}")


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
    check_integer("target_size", target_size, 1)
    check_integer("num_shards", num_shards, 1)
    check_integer("jpeg_quality", jpeg_quality, 0, 100)
    check_integer("seed", seed, 0)
    if len(source.class_names) < 2 or not source.num_images:
        raise ValueError(
            f"Data source {source.name!r} has {source.num_images} images in "
            f"{len(source.class_names)} class(es): a classifier needs at least 2 classes."
        )


def check_output_dir(source: sources.ImageSource, output_dir: str | Path) -> str:
    """Checks that a conversion may write in a folder.

    Args:
        source: the images to convert.
        output_dir: the folder the shards would go to.

    Returns:
        `output_dir` as a string, without a final "/".

    Raises:
        ValueError: if `output_dir` is inside the source's images, or holds a file that a
            conversion would overwrite although no sidecar or manifest of the course lists it.
    """
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise ValueError(f"`output_dir` must be a folder path. Received: {output_dir!r}")
    output_dir = as_typed(output_dir)
    if "://" not in output_dir and Path(output_dir).is_file():
        raise ValueError(
            f"`output_dir` {Path(output_dir).absolute()} is a file, not a folder: give a "
            "folder for the shards (it is created if needed)."
        )
    image_root = source.pattern.rsplit("/", 2)[0]
    if f"{output_dir}/".startswith(f"{image_root}/"):
        raise ValueError(
            f"`output_dir` {output_dir} is inside the source's image folder {image_root}: "
            "write the shards somewhere else."
        )
    ours = files_of_previous_set(output_dir)
    theirs = [
        n for n in shard_files.list_folder(output_dir) if _COURSE_FILE.match(n) and n not in ours
    ]
    if theirs:
        raise ValueError(
            f"`output_dir` {output_dir} holds {', '.join(sorted(theirs))}, which no sidecar or "
            "manifest of the course lists, so the course did not write it; a conversion would "
            "overwrite it. Move it, or choose another output_dir."
        )
    return output_dir


def as_typed(folder: str | Path) -> str:
    """Returns a folder path as a shell reads it: `~` expanded, without a final "/".

    Args:
        folder: a local folder or a `gs://` folder.

    Returns:
        The path as a string; a `gs://` path is kept as given.
    """
    folder = str(folder)
    if "://" not in folder:
        folder = os.path.expanduser(folder)
    return folder.rstrip("/") or folder


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


@dataclasses.dataclass(frozen=True)
class _LoadedImage:
    """One image read, decoded, resized and recompressed, ready to become a record."""

    path: str
    num_bytes: int
    jpeg: bytes
    class_index: int
    original_size: list[int]


def _load_image(path, *, class_table, steps: ConversionSteps, target_size: int, jpeg_quality: int):
    """Reads and transforms one image in the graph; returns its fields as tensors."""
    image_bytes = tf.io.read_file(path)
    # Upright as a photo viewer shows it (EXIF Orientation), and a large JPEG decoded at
    # 1/2, 1/4 or 1/8 of its size where its shorter side keeps `target_size` pixels.
    image, original_size = records.decode_upright(image_bytes, min_side=target_size)
    jpeg = steps.recompress(steps.resize_and_crop(image, target_size), jpeg_quality)
    class_index = class_table.lookup(tf.strings.split(path, "/")[-2])
    return path, tf.strings.length(image_bytes), jpeg, class_index, original_size


def _load_images(
    paths: Sequence[str],
    class_names: Sequence[str],
    steps: ConversionSteps,
    target_size: int,
    jpeg_quality: int,
) -> Iterator[_LoadedImage]:
    """Yields each image of `paths` that loads, in order; one that fails is left out.

    One pipeline over every image decodes them in parallel on all cores; the images left
    out are accounted for by `convert`, from the paths written.
    """
    load = functools.partial(
        _load_image,
        class_table=_class_table(class_names),
        steps=steps,
        target_size=target_size,
        jpeg_quality=jpeg_quality,
    )
    images = tf.data.Dataset.from_tensor_slices(paths).map(
        load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    for path, num_bytes, jpeg, class_index, size in images.ignore_errors().as_numpy_iterator():
        yield _LoadedImage(path.decode(), int(num_bytes), jpeg, int(class_index), size.tolist())


def _images_per_shard(
    images: Iterator[_LoadedImage], shard_of: dict[str, int], num_shards: int
) -> Iterator[Iterator[_LoadedImage]]:
    """Yields, for shard 0, 1, ..., the images that belong to it (none if none loaded).

    The images come in shard order, so each shard's are a run of consecutive ones; each
    run must be read to its end before the next is asked for.
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


def _write_shards(
    images: Iterator[_LoadedImage],
    shard_of: dict[str, int],
    num_shards: int,
    output_dir: str,
    steps: ConversionSteps,
    source: sources.ImageSource,
    manifest: _Manifest,
    written: _WrittenShards,
) -> None:
    """Writes each shard's images with `steps.write_shard`, and lists each shard in the manifest.

    What is written is noted in `written` as it goes.
    """
    images_per_shard = _images_per_shard(images, shard_of, num_shards)
    for index in progress.track(range(num_shards), desc="Writing shards"):
        records_before = len(written.paths)
        examples = _serialized_examples(
            next(images_per_shard), written, steps.to_example, source.class_names
        )
        shard = steps.write_shard(examples, output_dir, index)
        manifest.add([Path(shard).name])
        written.shards.append(shard)
        written.shard_counts.append(len(written.paths) - records_before)


def _serialized_examples(
    images: Iterator[_LoadedImage],
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
        example = to_example(image.jpeg, image.class_index, image.original_size, class_names)
        # Deterministic: the features map is serialized in key order, so that the same
        # input gives the same bytes in every run (else the order varies per process).
        yield example.SerializeToString(deterministic=True)


def _class_table(class_names: Sequence[str]) -> tf.lookup.StaticHashTable:
    """A lookup from class name to class index, run in the graph (-1 for an unknown name)."""
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(list(class_names)), tf.range(len(class_names), dtype=tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=-1)


def _why_unreadable(path: str) -> str:
    """Returns the first line of the error that reading and decoding `path` raises.

    What TensorFlow's decoder logged meanwhile (`Premature end of JPEG data`) is added in
    parentheses, rather than left on stderr as a raw log line.
    """
    with errors.decoder_messages() as logged:
        try:
            records.decode_upright(tf.io.read_file(path))
            why = "it decodes on its own, but failed in the pipeline (resize or recompress)"
        except tf.errors.OpError as error:
            why = errors.error_message(error)
    return why + (f" (the decoder logged: {'; '.join(logged)})" if logged else "")


def files_of_previous_set(output_dir: str) -> set[str]:
    """Returns the names of the files the course wrote in `output_dir`, by its own lists.

    They are the shards the sidecar lists and the sidecar itself, and every file an
    unfinished run's manifest lists (its temporary files, its shards, the previous set's).
    Nothing else is ever deleted or overwritten.

    Args:
        output_dir: the shards' folder.

    Returns:
        The file names; a name with a "/" is never one of them.
    """
    names = set()
    metadata = shard_files.read_json(f"{output_dir}/{METADATA_FILE}")
    if metadata is not None and isinstance(metadata.get("shards"), dict):
        names |= set(metadata["shards"]) | {METADATA_FILE}
    manifest = shard_files.read_json(f"{output_dir}/{MANIFEST_FILE}")
    if manifest is not None and isinstance(manifest.get("files"), list):
        names |= set(manifest["files"]) | {MANIFEST_FILE}
    names.add(f"{METADATA_FILE}{TEMPORARY_SUFFIX}")
    names.add(f"{MANIFEST_FILE}{TEMPORARY_SUFFIX}")
    # A name with a "/" is not a file of this folder: never follow it.
    return {name for name in names if "/" not in name and name not in ("", ".", "..")}


def start_new_set(output_dir: str) -> list[str]:
    """Creates `output_dir` and marks the set there unfinished; returns the previous set's files.

    The previous set's files (as its sidecar or an unfinished run's manifest lists them)
    go into a new manifest before the sidecar is removed, so that a run stopped at any
    point leaves a list of every file the course wrote there.

    Args:
        output_dir: the shards' folder, created if needed.

    Returns:
        The names of the previous set's files that are there, sorted.
    """
    tf.io.gfile.makedirs(output_dir)
    previous = sorted(
        name
        for name in files_of_previous_set(output_dir)
        if name not in (METADATA_FILE, MANIFEST_FILE) and tf.io.gfile.exists(f"{output_dir}/{name}")
    )
    shard_files.write_json(f"{output_dir}/{MANIFEST_FILE}", {"files": previous})
    metadata = f"{output_dir}/{METADATA_FILE}"
    if tf.io.gfile.exists(metadata):
        tf.io.gfile.remove(metadata)
    return previous


class _Manifest:
    """The list of files a conversion in progress may have written, kept on disk."""

    def __init__(self, output_dir: str, previous: Sequence[str]):
        self.output_dir = output_dir
        self.previous = list(previous)
        self.files = list(previous)

    def add(self, names: Sequence[str]) -> None:
        """Lists `names` (before they are written, where they can be known)."""
        self.files += [name for name in names if name not in self.files]
        shard_files.write_json(f"{self.output_dir}/{MANIFEST_FILE}", {"files": self.files})

    def _remove(self, names) -> None:
        for name in names:
            path = f"{self.output_dir}/{name}"
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)

    def delete_previous(self, keep: Sequence[str]) -> None:
        """Deletes the previous set's files and this run's temporary files, except `keep`."""
        temporary = [name for name in self.files if name.endswith(TEMPORARY_SUFFIX)]
        self._remove(sorted(set(self.previous + temporary) - set(keep)))

    def delete_all(self) -> None:
        """Deletes every file listed, then the manifest: an empty folder of the course's."""
        self._remove(self.files)
        self.finish()

    def finish(self) -> None:
        self._remove([MANIFEST_FILE])


def default_output_dir(source: sources.ImageSource, *, target_size: int, num_shards: int) -> str:
    """Returns the course cache folder for the shards of `source` at these settings.

    Args:
        source: the images the shards hold.
        target_size: side of the square images, in pixels.
        num_shards: number of shards.

    Returns:
        A folder under `data.default_cache_dir()`, named after the source and the settings.
    """
    key = hashlib.sha256(f"{source.pattern}|{source.num_images}".encode()).hexdigest()[:10]
    name = f"{source.name.strip('/').replace('/', '_')[-40:] or 'source'}-{key}"
    folder = data.default_cache_dir() / "tfrecords" / f"{name}-{target_size}px-{num_shards}shards"
    return str(folder)


@dataclasses.dataclass(frozen=True)
class ShardSet:
    """A finished, checked set of shards: what `ensure_shards` returns.

    Attributes:
        output_dir: the shards' folder, without a final "/".
        paths: the shard paths, sorted, each checked against the sidecar.
        class_names: the class names, in label order (the record's `class` indexes them).
        num_records: records in all shards.
        record_counts: records in each shard, by shard path.
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        fingerprint: the hash of the input and parameters the set was written from.
    """

    output_dir: str
    paths: list[str]
    class_names: list[str]
    num_records: int
    record_counts: dict[str, int]
    target_size: int
    jpeg_quality: int
    fingerprint: str | None


def ensure_shards(
    source: sources.ImageSource,
    output_dir: str | Path | None = None,
    *,
    target_size: int = records.DEFAULT_TARGET_SIZE,
    num_shards: int = DEFAULT_NUM_SHARDS,
    jpeg_quality: int = records.DEFAULT_JPEG_QUALITY,
    seed: int = data.DEFAULT_SEED,
) -> ShardSet:
    """Returns `source`'s set of shards, writing the shards first if they are missing or stale.

    Shards count as present when the sidecar's fingerprint matches the input (paths,
    sizes and modification times of the images) and these parameters, and every shard it
    lists is there at the size written. Otherwise they are written again with `convert`.

    Args:
        source: the images to convert.
        output_dir: the shards' folder; by default the course cache's
            (`default_output_dir`).
        target_size: side of the square images, in pixels.
        num_shards: number of shards; fewer if there are fewer images.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        seed: seed of the shuffle.

    Returns:
        A `ShardSet`: the checked shard paths, the class names and the counts.

    Raises:
        ValueError: if a parameter is out of range, or (from `convert`) `output_dir`
            cannot be written or no image could be read.

    Example:
        shard_set = conversion.ensure_shards(source, target_size=192, num_shards=16)
        shard_paths = shard_set.paths
    """
    check_parameters(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    if output_dir is None:
        output_dir = default_output_dir(source, target_size=target_size, num_shards=num_shards)
    output_dir = as_typed(output_dir)
    fingerprint = input_fingerprint(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    metadata = shard_files.read_json(f"{output_dir}/{METADATA_FILE}") or {}
    if metadata.get("fingerprint") != fingerprint:
        reason = "none there" if not metadata else "the images or the parameters changed"
    else:
        reason = "; ".join(shard_files.shard_set_problems(output_dir, metadata))
    if metadata and not reason:
        print(f"Found {len(metadata['shards'])} shards in {output_dir}.")
    else:
        if metadata:
            print(f"Writing the shards again in {output_dir} ({reason}).")
        convert(
            source,
            output_dir,
            target_size=target_size,
            num_shards=num_shards,
            jpeg_quality=jpeg_quality,
            seed=seed,
        )
        metadata = shard_files.read_metadata(output_dir)
    paths = shard_files.list_shards(output_dir, metadata)
    return ShardSet(
        output_dir=output_dir,
        paths=paths,
        class_names=list(metadata["class_names"]),
        num_records=metadata["num_records"],
        record_counts={f"{output_dir}/{name}": n for name, n in metadata["shards"].items()},
        target_size=metadata["target_size"],
        jpeg_quality=metadata["jpeg_quality"],
        fingerprint=metadata.get("fingerprint"),
    )


RESHARDED_FILE = "resharded.json"


def reshard(shard_set: ShardSet, num_shards: int) -> list[str]:
    """Returns `shard_set`'s records split into `num_shards` shards: written once, not decoded.

    The records are copied as they are, in order, into nearly equal shards (the set was
    shuffled when written, so each shard still mixes the classes): no image is decoded,
    resized or recompressed again. They go to the course cache, beside nothing of yours,
    and are found there on the next call while `shard_set` is unchanged.

    Args:
        shard_set: a finished set (`ensure_shards`).
        num_shards: the number of shards wanted; fewer if there are fewer records.

    Returns:
        The shard paths, sorted; `shard_set.paths` itself when it has `num_shards` shards.

    Example:
        paths_by_count = {n: conversion.reshard(shard_set, n) for n in [1, 4, 64]}
    """
    check_integer("num_shards", num_shards, 1)
    num_shards = min(num_shards, shard_set.num_records)
    if num_shards == len(shard_set.paths):
        return shard_set.paths
    # What the set is: its folder, its input and parameters, and its shards' counts.
    identity = [shard_set.output_dir, shard_set.fingerprint, shard_set.record_counts]
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    folder = str(data.default_cache_dir() / "tfrecords" / f"resharded-{key[:10]}-{num_shards}")
    sidecar = f"{folder}/{RESHARDED_FILE}"
    found = shard_files.read_json(sidecar) or {}
    names = found.get("shards", {})
    if (
        found.get("fingerprint") == key
        and names
        and all(tf.io.gfile.exists(f"{folder}/{name}") for name in names)
    ):
        return sorted(f"{folder}/{name}" for name in names)
    tf.io.gfile.makedirs(folder)
    for name in [*names, RESHARDED_FILE]:  # Only what this function wrote there before.
        if "/" not in name and tf.io.gfile.exists(f"{folder}/{name}"):
            tf.io.gfile.remove(f"{folder}/{name}")
    serialized = tf.data.TFRecordDataset(shard_set.paths).as_numpy_iterator()
    counts = [len(part) for part in np.array_split(np.arange(shard_set.num_records), num_shards)]
    paths = [
        shard_files.write_shard(itertools.islice(serialized, count), folder, index)
        for index, count in enumerate(counts)
    ]
    shard_files.write_json(
        sidecar,
        {
            "fingerprint": key,
            "shards": {Path(p).name: n for p, n in zip(paths, counts, strict=True)},
        },
    )
    print(f"Copied the {shard_set.num_records} records into {len(paths)} shards in {folder}.")
    return sorted(paths)
