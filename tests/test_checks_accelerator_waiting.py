"""utils/checks/accelerator_waiting.py (lesson 5): right answers pass, mistakes name the TODO."""

import re

import pytest
import tensorflow as tf

from utils import accelerator_wait, checks


def _pipeline():
    """Endless batches that differ from one to the next, like a pipeline's."""
    images = tf.reshape(tf.range(6 * 4 * 4 * 3) % 256, [6, 4, 4, 3])
    labels = tf.one_hot(tf.range(6) % 5, 5)
    records = tf.data.Dataset.from_tensor_slices((tf.cast(images, tf.uint8), labels))
    return records.batch(2, drop_remainder=True).repeat()


def test_check_in_memory_passes_one_batch_repeated(capsys):
    pipeline = _pipeline()
    in_memory = tf.data.Dataset.from_tensors(next(iter(pipeline))).repeat()
    checks.check_in_memory(in_memory, todo=1, pipeline=pipeline)
    assert capsys.readouterr().out == (
        "TODO 1 passed: one batch of (2, 4, 4, 3), (2, 5), repeated without end.\n"
    )


def test_check_in_memory_passes_a_cached_first_batch():
    pipeline = _pipeline()
    checks.check_in_memory(pipeline.take(1).cache().repeat(), todo=1, pipeline=pipeline)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda pipeline: ...,
            "TODO 1 (in_memory): not done yet: in_memory is still ... (Ellipsis). Expected a "
            "tf.data.Dataset: one batch of the pipeline, held in memory and repeated without end.",
        ),
        (
            lambda pipeline: next(iter(pipeline)),
            "TODO 1 (in_memory): expected a tf.data.Dataset: one batch of the pipeline, held in "
            "memory and repeated without end; found a tuple.",
        ),
        (
            lambda pipeline: tf.data.Dataset.from_tensors(next(iter(pipeline))),
            "TODO 1 (in_memory): expected an endless dataset (training reads it for many "
            "steps); found one that ends after 1 batch(es). Add `.repeat()`.",
        ),
        (
            lambda pipeline: pipeline,
            "TODO 1 (in_memory): expected the same batch again and again (an input that costs "
            "nothing); found different batches in the first 3: it still reads and decodes.",
        ),
        (
            lambda pipeline: tf.data.Dataset.from_tensors(next(iter(pipeline))[0]).repeat(),
            "TODO 1 (in_memory): expected elements like the pipeline's",
        ),
    ],
    ids=["stub", "a batch, not a dataset", "no repeat", "the pipeline itself", "images only"],
)
def test_check_in_memory_names_todo_1_and_the_mistake(make, message):
    pipeline = _pipeline()
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        checks.check_in_memory(make(pipeline), todo=1, pipeline=pipeline)


def _right(ratio, *, tolerance, above, below):
    if ratio.minimum > tolerance:
        return above
    return below if ratio.maximum <= tolerance else accelerator_wait.NOISE_VERDICT


def test_check_verdict_passes_the_range_rule(capsys):
    checks.check_verdict(_right, todo=2)
    assert capsys.readouterr().out == (
        "TODO 2 passed: 5 ranges judged: above, at or under, and across the tolerance.\n"
    )


@pytest.mark.parametrize(
    "answer, message",
    [
        (
            lambda ratio, **kwargs: ...,
            "TODO 2 (verdict): not done yet: it returns Ellipsis. Expected `above`, `below` or "
            "NOISE_VERDICT.",
        ),
        (
            lambda ratio, *, tolerance, above, below: above if ratio.median > tolerance else below,
            "TODO 2 (verdict): for ratios 1.00-1.30 (median 1.30) against a tolerance of "
            "1.10, expected \"within the noise: can't tell\"; found 'slower'.",
        ),
        (
            lambda ratio, *, tolerance, above, below: (
                above
                if ratio.minimum >= tolerance
                else below
                if ratio.maximum < tolerance
                else accelerator_wait.NOISE_VERDICT
            ),
            "TODO 2 (verdict): for ratios 1.08-1.10 (median 1.10) against a tolerance of "
            "1.10, expected 'the same'; found \"within the noise: can't tell\".",
        ),
        (
            lambda ratio, *, tolerance, above, below: "input-bound",
            "TODO 2 (verdict): for ratios 1.25-1.42 (median 1.33) against a tolerance of "
            "1.10, expected 'slower'; found 'input-bound'.",
        ),
        (
            lambda ratio, tolerance: ratio.minimum > tolerance,
            "TODO 2 (verdict): expected a verdict; found an error: ",
        ),
    ],
    ids=["stub", "median only", "strict at the tolerance", "fixed words", "wrong signature"],
)
def test_check_verdict_names_todo_2_and_the_range(answer, message):
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        checks.check_verdict(answer, todo=2)
