"""TFRecord shards of recompressed images: the record schema, safe writing, and validation.

The course's reference for lab 2. Labs 3 and 4 call `ensure_shards` to find lab 2's
shards or write them; lab 2 plugs the learner's own functions into `convert`.

A shard is named with its index and its record count, `flowers00-230.tfrec`. It is
written under a temporary name and renamed when complete. A sidecar JSON file
(`METADATA_FILE`) is written last, next to the shards: while it is missing, the set is
not finished. While a set is being written, a manifest (`MANIFEST_FILE`) lists every file
the run may create; a conversion deletes only files that a sidecar or a manifest lists,
never a file by its name alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import data, progress

SHARD_PREFIX = "flowers"
SHARD_SUFFIX = ".tfrec"
TEMPORARY_SUFFIX = ".tmp"
METADATA_FILE = "flowers_tfrecords.json"
MANIFEST_FILE = "flowers_tfrecords.writing.json"
DEFAULT_TARGET_SIZE = 192
DEFAULT_NUM_SHARDS = 16
DEFAULT_JPEG_QUALITY = 90
# How each record is parsed: the declared schema. `one_hot_class` has one float per class.
FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "label": tf.io.FixedLenFeature([], tf.string),
    "size": tf.io.FixedLenFeature([2], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
}
SCHEMA = {
    "image": "bytes: the JPEG-encoded image, TARGET_SIZE x TARGET_SIZE x 3",
    "class": "int64: the class index",
    "label": "bytes: the class name",
    "size": "int64 x 2: the ORIGINAL image's height and width, before resizing",
    "one_hot_class": "float x number of classes (variable length): 1.0 at the class index",
}
_COURSE_SHARD = re.compile(rf"^{SHARD_PREFIX}(\d+)-(\d+){re.escape(SHARD_SUFFIX)}$")
_BEAM_SHARD = re.compile(r"^.+-(\d{5})-of-(\d{5})(\.tfrec|\.tfrecord)?$")
# Names a conversion writes: shards, their temporary names, the sidecar and the manifest.
_COURSE_FILE = re.compile(
    rf"^({SHARD_PREFIX}\d+(-\d+)?{re.escape(SHARD_SUFFIX)}|{re.escape(METADATA_FILE)}|"
    rf"{re.escape(MANIFEST_FILE)})({re.escape(TEMPORARY_SUFFIX)})?$"
)


def resize_and_crop(image: tf.Tensor, target_size: int) -> tf.Tensor:
    """Resizes `image` so its shorter side is `target_size`, then crops the centre square.

    Args:
        image: a uint8 image tensor of shape (height, width, 3).
        target_size: side of the square result, in pixels.

    Returns:
        A uint8 tensor of shape (target_size, target_size, 3).
    """
    size = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = target_size / tf.reduce_min(size)
    new_size = tf.maximum(tf.cast(tf.round(size * scale), tf.int32), target_size)
    resized = tf.image.resize(image, new_size, antialias=True)
    cropped = tf.image.resize_with_crop_or_pad(resized, target_size, target_size)
    return tf.saturate_cast(tf.round(cropped), tf.uint8)


def recompress(image: tf.Tensor, quality: int) -> tf.Tensor:
    """Encodes a uint8 image as JPEG at `quality` (0-100); returns a scalar string tensor."""
    return tf.io.encode_jpeg(image, quality=quality, optimize_size=True)


def to_example(
    image_jpeg: bytes, class_index: int, original_size: Sequence[int], class_names: Sequence[str]
) -> tf.train.Example:
    """Builds the record of one image, with the fields of `SCHEMA`.

    Args:
        image_jpeg: the recompressed JPEG bytes.
        class_index: the index of the image's class in `class_names`.
        original_size: the image's (height, width) before resizing.
        class_names: all class names, in label order.

    Returns:
        A `tf.train.Example`; call `.SerializeToString()` to write it.
    """
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_jpeg])),
        "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[class_index])),
        "label": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[class_names[class_index].encode()])
        ),
        "size": tf.train.Feature(int64_list=tf.train.Int64List(value=list(original_size))),
        "one_hot_class": tf.train.Feature(float_list=tf.train.FloatList(value=one_hot)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def shard_name(index: int, num_records: int) -> str:
    """Returns the file name of shard `index` holding `num_records`: `flowers00-230.tfrec`."""
    return f"{SHARD_PREFIX}{index:02d}-{num_records}{SHARD_SUFFIX}"


def temporary_path(output_dir: str, index: int) -> str:
    """Returns where shard `index` is written before it is complete."""
    return f"{output_dir}/{SHARD_PREFIX}{index:02d}{SHARD_SUFFIX}{TEMPORARY_SUFFIX}"


def write_shard(serialized_examples: Iterable[bytes], output_dir: str, index: int) -> str:
    """Writes one shard safely: under a temporary name, renamed when complete.

    Args:
        serialized_examples: the records, each a serialized `tf.train.Example`.
        output_dir: the shards' folder (local or `gs://`).
        index: the shard's index, in its name.

    Returns:
        The shard's final path, named with its record count.
    """
    temporary = temporary_path(output_dir, index)
    num_records = 0
    with tf.io.TFRecordWriter(temporary) as writer:
        for record in serialized_examples:
            writer.write(record)
            num_records += 1
    final = f"{output_dir}/{shard_name(index, num_records)}"
    tf.io.gfile.rename(temporary, final, overwrite=True)
    return final


def shard_record_count(path: str) -> int | None:
    """Returns the record count in a course shard's name, or None for a Beam-named shard."""
    match = _COURSE_SHARD.match(Path(path).name)
    return int(match.group(2)) if match else None


def find_shards(output_dir: str) -> list[str]:
    """Returns the shard paths in `output_dir`, sorted: course names or Beam's `-00000-of-N`."""
    if not tf.io.gfile.isdir(output_dir):
        return []
    names = tf.io.gfile.listdir(output_dir)
    return sorted(
        f"{output_dir}/{name}"
        for name in names
        if _COURSE_SHARD.match(name) or _BEAM_SHARD.match(name)
    )


@dataclasses.dataclass
class ConversionSteps:
    """The four functions `convert` runs; lab 2 passes the learner's own."""

    resize_and_crop: Callable = resize_and_crop
    recompress: Callable = recompress
    to_example: Callable = to_example
    write_shard: Callable = write_shard


@dataclasses.dataclass(frozen=True)
class SkippedImage:
    """An input image that was not written, and why."""

    path: str
    error: str


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

    @property
    def num_written(self) -> int:
        return sum(self.shard_counts)

    @property
    def records_per_second(self) -> float:
        return self.num_written / self.seconds if self.seconds else float("inf")

    def summary(self) -> str:
        """Returns the report `convert` prints: counts, bytes and speed."""
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
        if self.empty_class_folders:
            empty = ", ".join(self.empty_class_folders)
            lines.append(f"Empty class folder(s), not used as classes: {empty}")
        return "\n".join(lines)


def convert(
    source,
    output_dir: str,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    num_shards: int = DEFAULT_NUM_SHARDS,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
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

    Example:
        report = tfrecords.convert(source, "/tmp/flowers-tfrec", num_shards=16)
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
    start = time.perf_counter()
    previous = start_new_set(output_dir)
    paths = list(source_paths(source))
    np.random.default_rng(seed).shuffle(paths)
    class_table = _class_table(source.class_names)

    def load(path):
        image_bytes = tf.io.read_file(path)
        image = tf.io.decode_jpeg(image_bytes, channels=3)
        original_size = tf.shape(image)[:2]
        resized = steps.resize_and_crop(image, target_size)
        jpeg = steps.recompress(resized, jpeg_quality)
        class_index = class_table.lookup(tf.strings.split(path, "/")[-2])
        return path, tf.strings.length(image_bytes), jpeg, class_index, original_size

    chunks = [list(chunk) for chunk in np.array_split(paths, min(num_shards, len(paths)))]
    shard_of = {path: index for index, chunk in enumerate(chunks) for path in chunk}
    manifest = _Manifest(output_dir, previous)
    manifest.add([Path(temporary_path(output_dir, i)).name for i in range(len(chunks))])
    # One pipeline over every image, in order, decoding in parallel on all cores; an image
    # that fails to load is left out here and accounted for below.
    images = tf.data.Dataset.from_tensor_slices(paths).map(
        load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    loaded = _Lookahead(images.ignore_errors().as_numpy_iterator())
    shards, counts, written_paths, input_bytes, output_bytes = [], [], [], 0, 0
    for index in progress.track(range(len(chunks)), desc="Writing shards"):
        written = _WrittenImages()
        examples = _serialized_examples(
            loaded.take_while(lambda element, i=index: shard_of[element[0].decode()] == i),
            written,
            steps.to_example,
            source.class_names,
        )
        shard = steps.write_shard(examples, output_dir, index)
        manifest.add([Path(shard).name])
        shards.append(shard)
        counts.append(len(written.paths))
        written_paths += written.paths
        input_bytes += written.input_bytes
        output_bytes += written.output_bytes
    unwritten = sorted(set(paths) - set(written_paths))
    skipped = [SkippedImage(path, _why_unreadable(path)) for path in unwritten]
    if not written_paths:
        manifest.delete_all()
        raise ValueError(
            f"No image of {source.name!r} could be read: all {len(paths)} were skipped, so "
            f"there is nothing to learn from; no shard was kept in {output_dir}. First: "
            f"{skipped[0].path}: {skipped[0].error}"
        )
    manifest.delete_previous(keep=[Path(shard).name for shard in shards])
    report = ConversionReport(
        output_dir=output_dir,
        shards=shards,
        shard_counts=counts,
        num_input_images=len(paths),
        skipped=skipped,
        empty_class_folders=list(source.empty_class_folders),
        input_bytes=input_bytes,
        output_image_bytes=output_bytes,
        seconds=time.perf_counter() - start,
    )
    fingerprint = input_fingerprint(
        source, target_size=target_size, num_shards=num_shards, jpeg_quality=jpeg_quality,
        seed=seed,
    )  # fmt: skip
    write_metadata(output_dir, source, report, target_size, jpeg_quality, fingerprint=fingerprint)
    manifest.finish()
    print(report.summary())
    return report


def check_integer(name: str, value, low: int, high: int | None = None) -> None:
    """Raises `ValueError` naming `name` unless `value` is an integer in `low`..`high`."""
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
    source, *, target_size, num_shards, jpeg_quality, seed=data.DEFAULT_SEED
) -> None:
    """Checks a conversion's parameters, before any file is touched.

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


def check_output_dir(source, output_dir) -> str:
    """Checks that a conversion may write in `output_dir`; returns it without a final "/".

    Raises:
        ValueError: if `output_dir` is inside the source's images, or holds a file that a
            conversion would overwrite although no sidecar or manifest of the course lists it.
    """
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise ValueError(f"`output_dir` must be a folder path. Received: {output_dir!r}")
    output_dir = str(output_dir).rstrip("/")
    image_root = source.pattern.rsplit("/", 2)[0]
    if f"{output_dir}/".startswith(f"{image_root}/"):
        raise ValueError(
            f"`output_dir` {output_dir} is inside the source's image folder {image_root}: "
            "write the shards somewhere else."
        )
    ours = files_of_previous_set(output_dir)
    theirs = [n for n in _listdir(output_dir) if _COURSE_FILE.match(n) and n not in ours]
    if theirs:
        raise ValueError(
            f"`output_dir` {output_dir} holds {', '.join(sorted(theirs))}, which no sidecar or "
            "manifest of the course lists, so the course did not write it; a conversion would "
            "overwrite it. Move it, or choose another output_dir."
        )
    return output_dir


def source_paths(source) -> list[str]:
    """Returns the source's image paths, sorted; a local folder's are never globbed."""
    if source.paths:
        return sorted(source.paths)
    return sorted(tf.io.gfile.glob(source.pattern))  # A gs:// glob given by its user.


def input_fingerprint(source, *, target_size, num_shards, jpeg_quality, seed) -> str:
    """Returns a hash of the input (paths, sizes, modification times) and the parameters.

    Shards whose sidecar holds another fingerprint are stale. For a `gs://` source only
    the paths count (a stat per object would cost one request each).
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


@dataclasses.dataclass
class _WrittenImages:
    """The paths, original bytes and recompressed bytes of the images written so far."""

    paths: list[str] = dataclasses.field(default_factory=list)
    input_bytes: int = 0
    output_bytes: int = 0


class _Lookahead:
    """An iterator that can give its elements while a condition holds, and keep the next."""

    def __init__(self, iterator):
        self._iterator = iterator
        self._next = next(iterator, None)

    def take_while(self, condition):
        while self._next is not None and condition(self._next):
            element, self._next = self._next, next(self._iterator, None)
            yield element


def _serialized_examples(images, written: _WrittenImages, to_example, class_names):
    """Yields each loaded image's serialized record, and notes what it wrote."""
    for path, num_bytes, jpeg, class_index, size in images:
        written.paths.append(path.decode())
        written.input_bytes += int(num_bytes)
        written.output_bytes += len(jpeg)
        example = to_example(jpeg, int(class_index), size.tolist(), class_names)
        # Deterministic: the features map is serialized in key order, so that the same
        # input gives the same bytes in every run (else the order varies per process).
        yield example.SerializeToString(deterministic=True)


def _class_table(class_names: Sequence[str]) -> tf.lookup.StaticHashTable:
    """A lookup from class name to class index, run in the graph (-1 for an unknown name)."""
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(list(class_names)), tf.range(len(class_names), dtype=tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=-1)


def error_message(error: tf.errors.OpError) -> str:
    """Returns the first line of a TensorFlow error, without its function-node wrapping."""
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:\w+\]", "", message).strip().splitlines()[0]


def _why_unreadable(path: str) -> str:
    """Returns the first line of the error that reading and decoding `path` raises."""
    try:
        tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    except tf.errors.OpError as error:
        return error_message(error)
    return "it decodes on its own, but failed in the pipeline (resize or recompress)"


def _listdir(folder: str) -> list[str]:
    return tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else []


def _read_json(path: str) -> dict | None:
    """Returns a JSON file's object, or None when it is missing or not a course file."""
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as file:
            content = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return content if isinstance(content, dict) else None


def files_of_previous_set(output_dir: str) -> set[str]:
    """Returns the names of the files the course wrote in `output_dir`, by its own lists.

    They are the shards the sidecar lists and the sidecar itself, and every file an
    unfinished run's manifest lists (its temporary files, its shards, the previous set's).
    Nothing else is ever deleted or overwritten.
    """
    names = set()
    metadata = _read_json(f"{output_dir}/{METADATA_FILE}")
    if metadata is not None and isinstance(metadata.get("shards"), dict):
        names |= set(metadata["shards"]) | {METADATA_FILE}
    manifest = _read_json(f"{output_dir}/{MANIFEST_FILE}")
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
    """
    tf.io.gfile.makedirs(output_dir)
    previous = sorted(
        name
        for name in files_of_previous_set(output_dir)
        if name not in (METADATA_FILE, MANIFEST_FILE) and tf.io.gfile.exists(f"{output_dir}/{name}")
    )
    _write_json(f"{output_dir}/{MANIFEST_FILE}", {"files": previous})
    metadata = f"{output_dir}/{METADATA_FILE}"
    if tf.io.gfile.exists(metadata):
        tf.io.gfile.remove(metadata)
    return previous


def _write_json(path: str, content: dict) -> None:
    """Writes `content` as JSON under a temporary name, then renames it to `path`."""
    temporary = f"{path}{TEMPORARY_SUFFIX}"
    with tf.io.gfile.GFile(temporary, "w") as file:
        json.dump(content, file, indent=2)
    tf.io.gfile.rename(temporary, path, overwrite=True)


class _Manifest:
    """The list of files a conversion in progress may have written, kept on disk."""

    def __init__(self, output_dir: str, previous: Sequence[str]):
        self.output_dir = output_dir
        self.previous = list(previous)
        self.files = list(previous)

    def add(self, names: Sequence[str]) -> None:
        """Lists `names` (before they are written, where they can be known)."""
        self.files += [name for name in names if name not in self.files]
        _write_json(f"{self.output_dir}/{MANIFEST_FILE}", {"files": self.files})

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


def write_metadata(
    output_dir, source, report: ConversionReport, target_size, jpeg_quality, *, fingerprint=None
):
    """Writes the sidecar JSON of a finished set of shards (temporary name, then rename).

    It holds no time stamp: the same input and parameters give the same bytes.
    """
    metadata = {
        "source": source.name,
        "source_pattern": source.pattern,
        "fingerprint": fingerprint,
        "class_names": list(source.class_names),
        "target_size": target_size,
        "jpeg_quality": jpeg_quality,
        "num_input_images": report.num_input_images,
        "num_records": report.num_written,
        "shards": {
            Path(p).name: n for p, n in zip(report.shards, report.shard_counts, strict=True)
        },
        "shard_bytes": {Path(p).name: tf.io.gfile.stat(p).length for p in report.shards},
        "skipped": [dataclasses.asdict(image) for image in report.skipped],
        "empty_class_folders": report.empty_class_folders,
        "not_images": list(getattr(source, "not_images", ())),
        "schema": SCHEMA,
    }
    _write_json(f"{output_dir}/{METADATA_FILE}", metadata)


def read_metadata(output_dir: str) -> dict:
    """Returns the sidecar JSON of a finished set of shards.

    Raises:
        FileNotFoundError: if `output_dir` has no sidecar (the set was never finished).
    """
    path = f"{str(output_dir).rstrip('/')}/{METADATA_FILE}"
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"No {METADATA_FILE} in {output_dir}: the shards there are missing or unfinished. "
            "Run lab 2, or tfrecords.ensure_shards(), to write them."
        )
    with tf.io.gfile.GFile(path) as file:
        return json.load(file)


def default_output_dir(source, *, target_size: int, num_shards: int) -> str:
    """Returns the course cache folder for the shards of `source` at these settings."""
    key = hashlib.sha256(f"{source.pattern}|{source.num_images}".encode()).hexdigest()[:10]
    name = f"{source.name.strip('/').replace('/', '_')[-40:] or 'source'}-{key}"
    folder = data.default_cache_dir() / "tfrecords" / f"{name}-{target_size}px-{num_shards}shards"
    return str(folder)


def list_shards(output_dir: str, metadata: dict | None = None) -> list[str]:
    """Returns the paths of the shards the sidecar lists, after checking they are all there.

    Args:
        output_dir: the shards' folder.
        metadata: its sidecar, if already read.

    Returns:
        The shard paths, sorted.

    Raises:
        FileNotFoundError: if there is no sidecar.
        ValueError: naming each shard that is listed but missing, of another size than
            written, or course-named but not listed (an extra shard).

    Example:
        shard_paths = tfrecords.list_shards("/tmp/flowers-tfrec")
    """
    output_dir = str(output_dir).rstrip("/")
    metadata = metadata or read_metadata(output_dir)
    problems = shard_set_problems(output_dir, metadata)
    if problems:
        raise ValueError(
            f"The shards in {output_dir} do not match their sidecar {METADATA_FILE}: "
            + "; ".join(problems)
            + ". Write them again: run lab 2, or tfrecords.convert()."
        )
    return [f"{output_dir}/{name}" for name in sorted(metadata["shards"])]


def shard_set_problems(output_dir: str, metadata: dict) -> list[str]:
    """Returns what is wrong with the set of files against the sidecar, one line each."""
    names = set(_listdir(output_dir))
    listed = metadata.get("shards", {})
    sizes = metadata.get("shard_bytes", {})
    problems = [
        f"{name}: listed in the sidecar, but missing"
        for name in sorted(listed)
        if name not in names
    ]
    for name in sorted(set(listed) & names & set(sizes)):
        size = tf.io.gfile.stat(f"{output_dir}/{name}").length
        if size != sizes[name]:
            problems.append(
                f"{name}: {size:,} bytes, but {sizes[name]:,} were written: truncated or changed"
            )
    extra = [n for n in sorted(names) if _COURSE_SHARD.match(n) and n not in listed]
    problems += [f"{name}: a shard not listed in the sidecar (an extra shard)" for name in extra]
    return problems


def ensure_shards(
    source,
    output_dir: str | None = None,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    num_shards: int = DEFAULT_NUM_SHARDS,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
    seed: int = data.DEFAULT_SEED,
) -> dict:
    """Returns the sidecar of `source`'s shards, writing the shards first if they are missing.

    Shards count as present when the sidecar's fingerprint matches the input (paths,
    sizes and modification times of the images) and these parameters, and every shard it
    lists is there at the size written. Otherwise they are written again.

    Returns:
        The sidecar, plus `output_dir` and `shard_paths` (the checked shard paths).

    Example:
        shards = tfrecords.ensure_shards(source, target_size=192, num_shards=16)
        filenames = shards["shard_paths"]
    """
    check_parameters(source, target_size=target_size, num_shards=num_shards,
                     jpeg_quality=jpeg_quality, seed=seed)  # fmt: skip
    if output_dir is None:
        output_dir = default_output_dir(source, target_size=target_size, num_shards=num_shards)
    output_dir = str(output_dir).rstrip("/")
    fingerprint = input_fingerprint(
        source, target_size=target_size, num_shards=num_shards, jpeg_quality=jpeg_quality,
        seed=seed,
    )  # fmt: skip
    metadata = _read_json(f"{output_dir}/{METADATA_FILE}") or {}
    if metadata.get("fingerprint") != fingerprint:
        reason = "none there" if not metadata else "the images or the parameters changed"
    else:
        problems = shard_set_problems(output_dir, metadata)
        reason = "; ".join(problems)
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
        metadata = read_metadata(output_dir)
    shard_paths = list_shards(output_dir, metadata)
    return {**metadata, "output_dir": output_dir, "shard_paths": shard_paths}


def expected_record_counts(paths: Sequence[str]) -> list[int | None]:
    """Returns each shard's record count: from its name, else from its sidecar, else None."""
    sidecars = {}
    counts = []
    for path in paths:
        count = shard_record_count(path)
        if count is None:
            folder, name = str(path).rsplit("/", 1) if "/" in str(path) else (".", str(path))
            if folder not in sidecars:
                sidecars[folder] = _read_json(f"{folder}/{METADATA_FILE}") or {}
            count = sidecars[folder].get("shards", {}).get(name)
        counts.append(count)
    return counts


def find_damaged_shards(paths: Sequence[str]) -> list[str]:
    """Reads each shard to its end; returns `"<path>: <error>"` for each that does not read.

    A shard whose record count differs from its name's (or its sidecar's) counts too.

    Example:
        print(tfrecords.find_damaged_shards(shard_paths))  # [] when every shard reads
    """
    damaged = []
    for path, expected in zip(paths, expected_record_counts(paths), strict=True):
        count = 0
        try:
            for _ in tf.data.TFRecordDataset(path):
                count += 1
        except tf.errors.OpError as error:
            damaged.append(f"{path}: record {count}: {error_message(error)}")
            continue
        if expected is not None and count != expected:
            damaged.append(f"{path}: {count} records; {expected} were written")
    return damaged


def parse_record(serialized: tf.Tensor) -> dict:
    """Parses one serialized record with `FEATURES`; `one_hot_class` comes back dense."""
    record = tf.io.parse_single_example(serialized, FEATURES)
    record["one_hot_class"] = tf.sparse.to_dense(record["one_hot_class"])
    return record
