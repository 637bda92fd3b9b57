"""The course's size limits (issue 44): each lesson short, no private TensorFlow API in `utils`."""

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_LESSON_LINES = 450
LESSONS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_there_are_lessons_to_measure():
    assert len(LESSONS) >= 9


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_each_lesson_source_is_at_most_450_lines(lesson):
    num_lines = len(lesson.read_text().splitlines())
    assert num_lines <= MAX_LESSON_LINES, (
        f"{lesson.relative_to(REPO_ROOT)} is {num_lines} lines, over {MAX_LESSON_LINES}: "
        "say the same thing shorter (never drop a measurement, a TODO or a check)."
    )


def test_utils_import_no_private_tensorflow_module():
    private = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in sorted((REPO_ROOT / "utils").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "tensorflow.python" in line
    ]
    assert private == []
