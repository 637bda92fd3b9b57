"""Sealed verdicts of lab 5: a feed that keeps the stand-in busy, judged in the judge by
what load cannot change (its batches and its graph), never by a timing (issue 61).

One grading run (bwrap) of lab 5's solution, of a blank lab that rewrites its kernel's
replies, of three wrong answers to TODO 2 (the naive feed itself, the naive feed with a
prefetch alone, one batch repeated) and of a right one written otherwise (lab 1's parallel
map of NUM_PARALLEL_READS, then a prefetch). The learner's `feed` crosses as a graph
without Python callbacks (lab 3's reader on the shards on disk).
"""

import copy

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_grade import (
    KERNEL_FORGER,
    _cell_index,
    _set_todo,
    grade_with_fixed_limits,
    needs_bwrap,
)
from tools.building.variants import split_variants

LAB5 = "05_accelerator_waiting"
WRONG_FEEDS = {
    "x-5-naive.ipynb": "feed = naive_feed\n",
    "x-5-one-batch.ipynb": "feed = tf.data.Dataset.from_tensors(next(iter(naive_feed))).repeat()\n",
    "x-5-prefetch-alone.ipynb": "feed = naive_feed.prefetch(tf.data.AUTOTUNE)\n",
    "y-5-parallel-map.ipynb": (
        "feed = read_shards(shard_names)\n"
        "feed = feed.map(read_tfrecord, num_parallel_calls=NUM_PARALLEL_READS)\n"
        "feed = feed.batch(BATCH_SIZE, drop_remainder=True).prefetch(tf.data.AUTOTUNE)\n"
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Lab 5's solution, a blank lab that forges its kernel's replies, two wrong feeds, graded."""
    folder = tmp_path_factory.mktemp("submissions")
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{LAB5}.py")
    nbformat.write(solution, folder / "sol_05.ipynb")
    forger = copy.deepcopy(lab)  # A blank lab that rewrites its kernel's replies.
    forger.cells.insert(_cell_index(lab, todo=1), nbformat.v4.new_code_cell(KERNEL_FORGER))
    nbformat.write(forger, folder / "forger_05.ipynb")
    for name, source in WRONG_FEEDS.items():
        nbformat.write(_set_todo(solution, 2, source), folder / name)
    return grade_with_fixed_limits(folder, tmp_path_factory.mktemp("grades"))


@needs_bwrap
def test_lab5_scores_what_its_feeds_earn(graded):
    status, rows, _ = graded
    assert status == 0
    found = {name: (row["TODO 1"], row["TODO 2"]) for name, row in rows.items()}
    assert found == {
        "sol_05.ipynb": ("1", "1"),
        "forger_05.ipynb": ("0", "0"),
        "x-5-naive.ipynb": ("1", "0"),
        "x-5-one-batch.ipynb": ("1", "0"),
        "x-5-prefetch-alone.ipynb": ("1", "0"),
        "y-5-parallel-map.ipynb": ("1", "1"),
    }


@needs_bwrap
def test_lab5_judges_messages_name_todo_2_and_the_mistake(graded):
    report = graded[2]
    assert (
        "- forger_05.ipynb, TODO 2: TODO 2 (feed): not done yet: feed is still ... (Ellipsis). "
        "Expected a tf.data.Dataset of the naive feed's batches that keeps the accelerator "
        "busy.\n"
    ) in report
    for name in ("x-5-naive.ipynb", "x-5-prefetch-alone.ipynb"):
        assert (
            f"- {name}, TODO 2: TODO 2 (feed): expected images decoded several at once and "
            "batches made ahead of the step; found a feed that lacks one. Decode in parallel: "
            "`map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)`, then batch and prefetch.\n"
        ) in report
    assert (
        "- x-5-one-batch.ipynb, TODO 2: TODO 2 (feed): expected new batches from the shards; "
        "found the same batch again"
    ) in report
