"""Checks for lab 2: resize and crop, recompress, build the record, write a shard safely."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import arguments, records, shard_files
from utils.checks._base import (
    CHECK_ERRORS,
    call_eagerly,
    fail,
    first_line,
    passed,
    require_result,
)

# Mean absolute difference (0-255 scale) from the reference resize-and-crop, over the
# sample: other resize methods stay under 5; squashing to a square or cropping without
# resizing gives 14 and 25 on the embedded flowers.
_MAX_RESIZE_DIFFERENCE = 6.0


def check_resize_and_crop(
    resize_and_crop: Callable, *, todo: int, sample_images: Sequence[np.ndarray], target_size: int
) -> None:
    """Checks `resize_and_crop(image, target_size)`: an aspect-preserving resize, centre crop.

    It runs the function inside `Dataset.map` (as the conversion does) and compares its
    images with the reference `records.resize_and_crop`.

    Args:
        resize_and_crop: the learner's function, run eagerly once, then in `Dataset.map`.
        todo: the TODO's number, named in every message.
        sample_images: uint8 images (height, width, 3); a tall and a wide copy of the
            first are added.
        target_size: the side of the square output, in pixels.

    Raises:
        ValueError: when `target_size` is not a positive integer (the lab's parameter).
        CheckFailed: naming the TODO, when an output is not uint8 of the target shape or
            differs from the reference by more than other resize methods do.

    Example:
        checks.check_resize_and_crop(resize_and_crop, todo=1, sample_images=images,
                                     target_size=192)
    """
    __tracebackhide__ = True
    arguments.check_integer("TARGET_SIZE", target_size, 1)  # A parameter, not TODO 1.
    name = "resize_and_crop"
    expected = f"a uint8 image of shape ({target_size}, {target_size}, 3)"
    call_eagerly(
        resize_and_crop,
        (tf.constant(sample_images[0]), target_size),
        todo=todo,
        name=name,
        expected=expected,
    )
    # The sample may be all landscape: a tall and a wide copy show a scale taken from one
    # side (the height, say) instead of the shorter one.
    first, num_sample = np.asarray(sample_images[0]), len(sample_images)
    sample_images = [*sample_images, first.transpose(1, 0, 2), first[: max(1, len(first) // 2)]]
    images = tf.data.Dataset.from_generator(
        lambda: iter(sample_images), output_signature=tf.TensorSpec((None, None, 3), tf.uint8)
    )
    try:
        found = list(images.map(lambda image: resize_and_crop(image, target_size)))
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected {expected}, computed with TensorFlow ops (it runs inside Dataset.map); "
            f"found an error: {first_line(error)}",
        )
    differences = []
    for original, image in zip(sample_images, found, strict=True):
        if image.dtype != tf.uint8 or tuple(image.shape) != (target_size, target_size, 3):
            fail(
                todo,
                name,
                f"expected {expected}; found {image.dtype.name} of shape {tuple(image.shape)} "
                f"for an image of shape {original.shape}. Cast back to uint8 after resizing.",
            )
        reference = records.resize_and_crop(tf.constant(original), target_size)
        differences.append(np.abs(image.numpy().astype(float) - reference.numpy()).mean())
    if np.mean(differences) > _MAX_RESIZE_DIFFERENCE:
        fail(
            todo,
            name,
            f"expected the centre of the image, resized with its proportions kept; the "
            f"images differ from that by {np.mean(differences):.1f} levels on average "
            f"(at most {_MAX_RESIZE_DIFFERENCE:g} expected). Cut the centre square, its side "
            "the SHORTER of height and width, then resize it to target_size.",
        )
    _require_antialiased(resize_and_crop, todo, name, target_size)
    passed(todo, f"{num_sample} images resized and cropped to {expected[2:]}.")


def _require_antialiased(resize_and_crop: Callable, todo: int, name: str, target_size: int):
    """Fails when a square of fine detail, shrunk 4x, matches a resize without antialiasing.

    The square needs no crop, so both references are one `tf.image.resize` whatever order
    the learner crops and resizes in. Noise is the detail a plain resize aliases most: it
    samples 1 pixel in 4 (a noisy result), an antialiased one averages them (a smooth one).
    """
    __tracebackhide__ = True
    side = 4 * target_size
    noise = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    found = tf.cast(resize_and_crop(tf.constant(noise), target_size), tf.float32)

    def distance(antialias: bool) -> float:
        reference = tf.image.resize(noise, (target_size, target_size), antialias=antialias)
        return float(tf.reduce_mean(tf.abs(found - reference)))

    if distance(antialias=False) < distance(antialias=True):
        fail(
            todo,
            name,
            f"expected a resize with antialias=True; found one without. Shrinking a "
            f"{side}-px image to {target_size} px then reads 1 pixel in 4 and turns fine "
            "detail into noise (aliasing): the model trains on artefacts that the photos do "
            "not have. Pass antialias=True to tf.image.resize.",
        )


def check_recompress(
    recompress: Callable, *, todo: int, sample_images: Sequence[np.ndarray], quality: int
) -> None:
    """Checks `recompress(image, quality)`: JPEG bytes that decode back to the same image.

    Args:
        recompress: the learner's function, called eagerly on each sample image.
        todo: the TODO's number, named in every message.
        sample_images: uint8 images (height, width, 3).
        quality: the JPEG quality asked for, 0 to 100.

    Raises:
        ValueError: when `quality` is not an integer from 0 to 100 (the lab's parameter).
        CheckFailed: naming the TODO, when the result is not a string tensor, does not
            decode to the same image, or its size is not that of JPEG at `quality`.

    Example:
        checks.check_recompress(recompress, todo=2, sample_images=resized, quality=90)
    """
    __tracebackhide__ = True
    arguments.check_integer("JPEG_QUALITY", quality, 0, 100)  # A parameter, not TODO 2.
    name = "recompress"
    expected = "a scalar string tensor of JPEG bytes"
    num_bytes, reference_bytes = 0, 0
    for image in sample_images:
        encoded = call_eagerly(
            recompress, (tf.constant(image), quality), todo=todo, name=name, expected=expected
        )
        if not isinstance(encoded, tf.Tensor) or encoded.dtype != tf.string or encoded.shape.rank:
            fail(todo, name, f"expected {expected}; found {encoded!r:.80}.")
        try:
            decoded = tf.io.decode_jpeg(encoded, channels=3).numpy()
        except tf.errors.InvalidArgumentError as error:
            fail(todo, name, f"expected JPEG bytes; they do not decode: {first_line(error)}")
        if decoded.shape != image.shape or np.abs(decoded.astype(float) - image).mean() > 20:
            fail(todo, name, "expected JPEG bytes of the same image; they decode to another.")
        num_bytes += len(encoded.numpy())
        reference_bytes += len(records.recompress(tf.constant(image), quality).numpy())
    _require_optimized(recompress, todo, name, sample_images, quality)
    ratio = num_bytes / reference_bytes
    if not 0.8 <= ratio <= 1.25:
        fail(
            todo,
            name,
            f"expected JPEG at quality {quality}; the bytes are {ratio:.2f}x the size of that. "
            "Pass quality=quality to tf.io.encode_jpeg.",
        )
    average = num_bytes / len(sample_images)
    passed(todo, f"{len(sample_images)} images recompressed to JPEG at quality {quality}.")
    print(f"Average: {average:,.0f} bytes per image.")


def _require_optimized(
    recompress: Callable, todo: int, name: str, sample_images: Sequence[np.ndarray], quality: int
) -> None:
    """Fails when every image's bytes are those of `encode_jpeg` without `optimize_size`."""
    __tracebackhide__ = True
    found, plain, optimized = 0, 0, 0
    for image in sample_images:
        learners = recompress(tf.constant(image), quality).numpy()
        unoptimized = tf.io.encode_jpeg(image, quality=quality).numpy()
        if learners != unoptimized:
            return
        found += len(learners)
        plain += len(unoptimized)
        optimized += len(tf.io.encode_jpeg(image, quality=quality, optimize_size=True).numpy())
    if plain > optimized:
        fail(
            todo,
            name,
            f"expected optimize_size=True; without it the same pixels take "
            f"{plain / optimized - 1:.0%} more bytes ({found / len(sample_images):,.0f} "
            f"instead of {optimized / len(sample_images):,.0f} per image), which storage "
            "sends again on every epoch. Pass optimize_size=True to tf.io.encode_jpeg.",
        )


_FEATURE_KINDS = {
    "image": "bytes_list",
    "class": "int64_list",
    "label": "bytes_list",
    "size": "int64_list",
    "one_hot_class": "float_list",
}


def check_to_example(to_example: Callable, *, todo: int, class_names: Sequence[str]) -> None:
    """Checks `to_example(image_jpeg, class_index, original_size, class_names)` against `SCHEMA`.

    Args:
        to_example: the learner's function, called eagerly on a small JPEG.
        todo: the TODO's number, named in every message.
        class_names: the class names, in label order.

    Raises:
        CheckFailed: naming the TODO and the feature, when the result is not a
            `tf.train.Example`, a feature is missing or of another kind, or a value is wrong.

    Example:
        checks.check_to_example(to_example, todo=3, class_names=source.class_names)
    """
    __tracebackhide__ = True
    name = "to_example"
    expected = "a tf.train.Example with the features " + ", ".join(_FEATURE_KINDS)
    image_jpeg = tf.io.encode_jpeg(tf.zeros((8, 8, 3), tf.uint8)).numpy()
    class_index = len(class_names) // 2
    example = call_eagerly(
        to_example,
        (image_jpeg, class_index, [300, 400], list(class_names)),
        todo=todo,
        name=name,
        expected=expected,
    )
    if not isinstance(example, tf.train.Example):
        fail(todo, name, f"expected {expected}; found a {type(example).__name__}.")
    features = example.features.feature
    for feature, kind in _FEATURE_KINDS.items():
        if feature not in features:
            fail(todo, name, f"expected a feature {feature!r}; found {sorted(features)}.")
        if features[feature].WhichOneof("kind") != kind:
            found = features[feature].WhichOneof("kind")
            fail(todo, name, f"expected {feature!r} to be a {kind}; found a {found}.")
    record = records.parse_record(tf.constant(example.SerializeToString()))
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    wanted = {
        "image": image_jpeg,
        "class": class_index,
        "label": class_names[class_index].encode(),
        "size": [300, 400],
        "one_hot_class": one_hot,
    }
    for feature, value in wanted.items():
        found = record[feature].numpy()
        found = found.tolist() if isinstance(found, np.ndarray) else found
        if found != value:
            fail(todo, name, f"expected {feature}={value!r:.60}; found {found!r:.60}.")
    passed(todo, "the record parses with the schema and holds the right values.")


def _write_and_read(write_shard: Callable, records, folder: str, wanted: str, *, todo, name):
    """Writes `records` with `write_shard` as shard 3 of `folder`; checks the shard and folder.

    An error of `write_shard` on a folder that already holds the shard is raised as it is.
    """
    __tracebackhide__ = True
    already_there = (Path(folder) / wanted).exists()
    if already_there:
        path = write_shard(iter(records), folder, 3)
    else:
        try:
            path = write_shard(iter(records), folder, 3)
        except TypeError as error:
            fail(
                todo,
                name,
                f"expected the path of the shard written; found an error: {first_line(error)}. "
                "`serialized_examples` can be any iterable, read once and without len() (a "
                "generator): count the records as you write them.",
            )
        except CHECK_ERRORS as error:
            fail(
                todo,
                name,
                f"expected the path of the shard written; found an error: {first_line(error)}",
            )
    require_result(path, todo, name, "the path of the shard written")
    if Path(str(path)).name != wanted:
        fail(
            todo,
            name,
            f"expected a shard named {wanted}; found {Path(str(path)).name}. Its "
            "name holds the number of records written.",
        )
    if not Path(path).exists():
        fail(todo, name, f"it returned {path}, but there is no such file.")
    written = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    if written != records:
        if already_there:
            fail(
                todo,
                name,
                f"expected the {len(records)} new records of a second run of the "
                f"lab; found {written}. Replace the old shard: tf.io.gfile.rename("
                "temporary, final_path, overwrite=True).",
            )
        fail(todo, name, f"expected the {len(records)} records in order; found {written}.")
    left = sorted(p.name for p in Path(folder).iterdir() if p.name != wanted)
    if left:
        fail(todo, name, f"expected only {wanted} in the folder; also found {left}.")


def check_write_shard(write_shard: Callable, *, todo: int) -> None:
    """Checks `write_shard(serialized_examples, output_dir, index)`: a shard written safely.

    The shard is named with its count and holds every record; written again into the same
    folder it is replaced; a write interrupted part-way leaves nothing that looks finished.
    It writes into temporary folders of its own.

    Args:
        write_shard: the learner's function.
        todo: the TODO's number, named in every message.

    Raises:
        CheckFailed: naming the TODO, when the shard's name, records or folder are wrong,
            a second write fails, or an interrupted write leaves a finished-looking shard.

    Example:
        checks.check_write_shard(write_shard, todo=4)
    """
    __tracebackhide__ = True
    name = "write_shard"
    records = [f"record {i}".encode() for i in range(5)]
    wanted = shard_files.shard_name(3, len(records))
    with tempfile.TemporaryDirectory() as folder:
        _write_and_read(write_shard, records, folder, wanted, todo=todo, name=name)
        # The lab run a second time: the same shard, new records, into the same folder.
        again = [f"second run, record {i}".encode() for i in range(5)]
        try:
            _write_and_read(write_shard, again, folder, wanted, todo=todo, name=name)
        except (*CHECK_ERRORS, OSError) as error:
            fail(
                todo,
                name,
                f"expected the shard written again when the lab runs a second time; writing "
                f"{wanted} into a folder that already holds it fails: {first_line(error)}. "
                "Replace the old shard: tf.io.gfile.rename(temporary, final_path, "
                "overwrite=True).",
            )

    with tempfile.TemporaryDirectory() as folder:
        files_while_writing = []

        def interrupted():
            yield from records[:3]
            files_while_writing.extend(p.name for p in Path(folder).iterdir())
            raise KeyboardInterrupt("interrupted")

        try:
            write_shard(interrupted(), folder, 0)
        except KeyboardInterrupt:
            pass
        finished = [Path(p).name for p in shard_files.find_shards(folder)]
        if not files_while_writing:
            fail(
                todo,
                name,
                "expected the records to go into a file as they come (a shard can be larger "
                "than memory); no file existed while they came. Open a tf.io.TFRecordWriter "
                "on shard_files.temporary_path(output_dir, index) and write each record.",
            )
        if finished:
            fail(
                todo,
                name,
                f"a write interrupted after 3 records left {finished}, which looks finished. "
                "Write to shard_files.temporary_path(output_dir, index) first, and rename the "
                "file to its final name only when every record is written.",
            )
    passed(
        todo,
        f"{wanted} holds its {len(records)} records, written twice over; an "
        "interrupted write leaves no finished-looking shard.",
    )
