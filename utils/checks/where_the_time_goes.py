"""Checks for lesson 8: the decode ceiling, the fastest a JPEG pipeline on this machine gets.

The ceiling is only a ceiling when it decodes as the pipeline does (a batch per `map`
call) on every core, from memory, and keeps decoding: each way a learner's dataset can
miss that (one image per call, one core, a cache of decoded images, an end) is named.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import tensorflow as tf

from utils.checks._base import dataset_steps, fail, passed, require_dataset


def _fingerprint(image: np.ndarray) -> str:
    return hashlib.sha256(image.tobytes()).hexdigest()


def check_ceiling_dataset(
    dataset: object, *, todo: int, stored_jpegs: list[bytes], batch_size: int
) -> None:
    """Checks the decode ceiling: endless batches of `stored_jpegs`, decoded on all cores.

    Args:
        dataset: what the TODO built; expected a `tf.data.Dataset` of uint8 batches.
        todo: the TODO's number, named in every message.
        stored_jpegs: the JPEG bytes the ceiling decodes.
        batch_size: the batch size the lesson asks for.

    Raises:
        CheckFailed: naming the TODO, when the dataset ends, gives single images or other
            dtypes, decodes one image per `map` call or on one core, caches the decoded
            images, or gives images that are not the decoded `stored_jpegs`.

    Example:
        checks.check_ceiling_dataset(ceiling_dataset, todo=1, stored_jpegs=jpegs,
                                     batch_size=64)
    """
    __tracebackhide__ = True
    name = "ceiling_dataset"
    expected = f"a tf.data.Dataset of endless batches of {batch_size} decoded uint8 images"
    require_dataset(dataset, todo, name, expected)
    spec = dataset.element_spec
    if not isinstance(spec, tf.TensorSpec):
        fail(todo, name, f"expected batches of images alone (no labels); found {spec}.")
    if spec.dtype != tf.uint8 or spec.shape.rank != 4 or spec.shape[-1] not in (None, 3):
        fail(
            todo,
            name,
            f"expected uint8 batches (batch, height, width, 3), as decode_batch gives after "
            f"batch(BATCH_SIZE); found {spec}.",
        )
    if spec.shape[0] not in (None, batch_size):
        fail(todo, name, f"expected batches of {batch_size}; found batches of {spec.shape[0]}.")
    if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
        fail(
            todo,
            name,
            "expected it to go on without end (repeat()): the timer asks for more images "
            f"than the {len(stored_jpegs)} stored, and a dataset that ends stops it early.",
        )
    steps = dataset_steps(dataset) or []
    ops = [step.op for step in steps]
    if any("Interleave" in op or op.startswith(("FlatMap", "TFRecord")) for op in ops):
        fail(
            todo,
            name,
            "expected stored_jpegs from memory (from_tensor_slices); found a read of files. "
            "The ceiling has no storage and no parsing: decoding alone.",
        )
    batch = max((i for i, op in enumerate(ops) if op.startswith("BatchDataset")), default=-1)
    maps = [i for i, op in enumerate(ops) if "MapDataset" in op]
    if any(i < batch for i in maps):
        fail(
            todo,
            name,
            "expected batch(BATCH_SIZE) first, then map(decode_batch, ...); found a map "
            "that decodes one image per call. Lab 3's pipeline decodes a batch per call: "
            "a ceiling that decodes another way is not its ceiling.",
        )
    parallel = [i for i in maps if "ParallelMap" in ops[i]]
    if maps and not parallel:
        fail(
            todo,
            name,
            "expected map(decode_batch, num_parallel_calls=tf.data.AUTOTUNE); found a map "
            "that decodes one batch at a time, on one core. The ceiling is what all "
            f"{os.cpu_count()} cores decode.",
        )
    calls = [steps[i].constants[-1] for i in parallel if steps[i].constants]
    if any(c is not None and 0 < c < (os.cpu_count() or 1) for c in calls):
        fail(
            todo,
            name,
            f"expected num_parallel_calls=tf.data.AUTOTUNE; found {min(calls)}, fewer than "
            f"this machine's {os.cpu_count()} cores: that is a ceiling of part of the machine.",
        )
    caches = [i for i, op in enumerate(ops) if op.startswith("CacheDataset")]
    if any(i > j for i in caches for j in maps):
        fail(
            todo,
            name,
            "expected no cache() after the decoding: a cache of decoded images is read "
            "from memory after the first pass, and the timer would measure copies, not "
            "decoding.",
        )
    decoded = {_fingerprint(tf.io.decode_jpeg(jpeg, channels=3).numpy()) for jpeg in stored_jpegs}
    first = next(iter(dataset.take(1))).numpy()
    strangers = sum(_fingerprint(image) not in decoded for image in first)
    if strangers:
        fail(
            todo,
            name,
            f"expected the decoded stored_jpegs; {strangers} of the first batch's "
            f"{len(first)} images are not one of them. Start from "
            "tf.data.Dataset.from_tensor_slices(stored_jpegs) and decode with decode_batch.",
        )
    height, width = first.shape[1:3]
    passed(
        todo,
        f"endless batches of {batch_size} decoded images ({height} x {width} x 3, uint8) "
        "from memory, one parallel map call per batch.",
    )
