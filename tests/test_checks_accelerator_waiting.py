"""utils/checks/accelerator_waiting.py (lesson 5): right answers pass, mistakes name the TODO."""

import re

import pytest
import tensorflow as tf

from utils import checks, comparison


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


def test_check_verdict_passes_the_course_rule(capsys):
    checks.check_verdict(comparison.verdict, todo=2)
    assert capsys.readouterr().out == (
        "TODO 2 passed: 5 pairs of ranges judged: faster, slower, and within the noise (too "
        "close, or overlapping).\n"
    )


def _ranges_only(candidate, baseline, *, min_effect, faster, slower):
    if candidate.minimum > baseline.maximum:
        return faster
    return slower if baseline.minimum > candidate.maximum else comparison.WITHIN_NOISE


def _medians_only(candidate, baseline, *, min_effect, faster, slower):
    if candidate.median >= (1 + min_effect) * baseline.median:
        return faster
    return slower if baseline.median >= (1 + min_effect) * candidate.median else "the same"


def _one_sided(candidate, baseline, *, min_effect, faster, slower):
    far = candidate.median >= (1 + min_effect) * baseline.median
    return faster if far and candidate.minimum > baseline.maximum else comparison.WITHIN_NOISE


def _medians_only(candidate, baseline, *, min_effect, faster, slower):
    if candidate.median >= (1 + min_effect) * baseline.median:
        return faster
    far = baseline.median >= (1 + min_effect) * candidate.median
    return slower if far else comparison.WITHIN_NOISE


def _touching_counts(candidate, baseline, *, min_effect, faster, slower):
    if candidate.median >= (1 + min_effect) * baseline.median:
        return faster if candidate.minimum >= baseline.maximum else comparison.WITHIN_NOISE
    if baseline.median >= (1 + min_effect) * candidate.median:
        return slower if baseline.minimum >= candidate.maximum else comparison.WITHIN_NOISE
    return comparison.WITHIN_NOISE


RULE = (
    "Beyond the noise takes both: medians at least 10% apart and ranges that do not overlap; "
    "otherwise comparison.WITHIN_NOISE."
)


@pytest.mark.parametrize(
    "answer, message",
    [
        (
            lambda candidate, baseline, **kwargs: ...,
            "TODO 2 (verdict): not done yet: it returns Ellipsis. Expected `faster`, `slower` or "
            "comparison.WITHIN_NOISE.",
        ),
        (
            _ranges_only,
            "TODO 2 (verdict): for a candidate's runs 105 (104-106) against a baseline's 100 "
            f"(99-101), expected 'within the noise'; found 'faster'. {RULE}",
        ),
        (
            _medians_only,
            "TODO 2 (verdict): for a candidate's runs 130 (95-140) against a baseline's 100 "
            f"(90-105), expected 'within the noise'; found 'faster'. {RULE}",
        ),
        (
            _one_sided,
            "TODO 2 (verdict): for a candidate's runs 70 (65-75) against a baseline's 100 "
            f"(95-105), expected 'slower'; found 'within the noise'. {RULE}",
        ),
        (
            _touching_counts,
            "TODO 2 (verdict): for a candidate's runs 130 (120-140) against a baseline's 100 "
            f"(90-120), expected 'within the noise'; found 'faster'. {RULE}",
        ),
        (
            lambda candidate, baseline, **kwargs: "input-bound",
            "TODO 2 (verdict): for a candidate's runs 130 (125-135) against a baseline's 100 "
            f"(95-105), expected 'faster'; found 'input-bound'. {RULE}",
        ),
        (
            lambda ratio, tolerance: ratio.minimum > tolerance,
            "TODO 2 (verdict): expected a verdict; found an error: ",
        ),
    ],
    ids=[
        "stub",
        "ranges only",
        "medians only",
        "faster or not (never slower)",
        "touching ranges counted apart",
        "fixed words",
        "wrong signature",
    ],
)
def test_check_verdict_names_todo_2_and_the_range(answer, message):
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        checks.check_verdict(answer, todo=2)
