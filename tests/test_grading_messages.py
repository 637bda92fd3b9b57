"""A message a learner reads is one plain line: tools/grading/feedback.py's `plain_line`
and `markdown_text`, as the judge (`judge.py`), the score (`score.py`), the feedback, the
JUnit XML and scores.md (`reports.py`) use them."""

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat

from tools.grading import feedback
from tools.grading.classroom import reports
from tools.grading.judge import judge_output
from tools.grading.judge.judge import run_check
from tools.grading.kernel.grade_kernel import CellResult
from tools.grading.model import KEY, Grade, Options, Submission
from tools.grading.submission import score

LAB1 = "01_tf_data_basics"
# An error of a learner's that the judge raises: markup, then a directory listing.
LISTING = "raise OSError('<b>no</b> [shard](http://x/) in | data:\\nflowers00.tfrec\\nflowers01')"


def test_an_error_in_the_judge_is_its_type_and_first_line():
    assert run_check(LISTING, 3, {}) == (False, "OSError: <b>no</b> [shard](http://x/) in | data:")


def test_plain_line_drops_control_characters_and_cuts_long_lines():
    assert feedback.plain_line("\n  \n a\x00b\x1b[31m  c\t d\nsecond") == "a b [31m c d"
    error = ValueError("x" * 500)
    line = feedback.error_line(error)
    assert len(line) == feedback.ERROR_CHARACTERS and line == "ValueError: " + "x" * 187 + "…"
    assert feedback.error_line(KeyError()) == "KeyError:"


def test_markdown_text_shows_markup_as_text():
    assert feedback.markdown_text("![x](http://e/) <img src=x> a|b & `code` c\\d") == (
        "!\\[x\\](http://e/) &lt;img src=x&gt; a\\|b &amp; `code` c\\\\d"
    )


def _judged_error(tmp_path):
    """One submission's reports, its TODO 3 failed by the judge's error above."""
    _, message = run_check(LISTING, 3, {})
    grade = Grade(
        "kim.ipynb",
        learner="kim",
        lab=LAB1,
        points={1: 1, 3: 1},
        passed={1: True, 3: False},
        messages={1: "TODO 1 passed: 9 files.", 3: message},
        notes=["Stopped: the cell of TODO 3 failed\nwith <i>two</i> lines"],
    )
    reports.write_reports([grade], tmp_path, "bwrap")
    return grade


def test_a_judges_error_reaches_feedback_and_scores_md_as_one_escaped_line(tmp_path):
    _judged_error(tmp_path)
    text = (tmp_path / "feedback" / f"kim-{LAB1}.md").read_text()
    escaped = "OSError: &lt;b&gt;no&lt;/b&gt; \\[shard\\](http://x/) in \\| data:"
    assert f"| 3 | 0 / 1 | {escaped} |\n" in text
    assert "- Stopped: the cell of TODO 3 failed\n" in text and "flowers0" not in text
    scores = (tmp_path / "scores.md").read_text()
    assert f"- kim.ipynb, TODO 3: {escaped}\n" in scores
    assert "- kim.ipynb: Stopped: the cell of TODO 3 failed\n" in scores
    assert "flowers0" not in scores and "<" not in scores


def test_a_judges_error_reaches_junit_as_its_text(tmp_path):
    _judged_error(tmp_path)
    suite = ElementTree.parse(tmp_path / "junit" / f"kim-{LAB1}.xml").getroot()
    failures = [case.find("failure") for case in suite.iter("testcase")]
    assert failures[0] is None
    assert failures[1].get("message") == "OSError: <b>no</b> [shard](http://x/) in | data:"


def test_score_makes_a_kernels_error_one_line(tmp_path):
    cell = nbformat.v4.new_code_cell(id="todo-2")
    cell.metadata[KEY] = {"todo": 2}
    result = CellResult("error", error="ValueError: a\x07\n/etc\n/usr")
    submission = Submission(
        path=Path("a.ipynb"),
        labs={},
        limits={},
        options=Options(),
        grade=Grade("a.ipynb", points={2: 1}),
        prepared=[(cell, "")],
        results=[result],
    )
    submission.verdicts = {2: judge_output.Verdict(False, "TODO 2 (x): not done yet")}
    score.step(submission)
    assert submission.grade.messages == {2: "your TODO 2 cell failed: ValueError: a"}


def test_what_a_todo_cell_printed_is_shown_as_text_in_the_feedback():
    # Issue 51 item 1: a learner's prints are kept for the feedback, up to a cap, as text.
    printed = "batch (64, 192, 192, 3)\n```\n# Forged heading <script>\x1b[31m\tred\n"
    grade = Grade(
        "kim.ipynb",
        learner="kim",
        lab=LAB1,
        points={1: 1, 2: 1},
        passed={1: True, 2: True},
        printed={2: printed},
    )
    text = feedback.feedback(grade)
    assert text.endswith(
        "What your TODO 2 cell printed:\n\n"
        "````text\nbatch (64, 192, 192, 3)\n```\n# Forged heading <script>[31m\tred\n````\n"
    )


def test_each_todo_cells_print_is_kept_with_its_todo():
    from tools.grading.submission import run

    cells = [
        (nbformat.v4.new_code_cell("x = 1", metadata={KEY: {"todo": n}}), None) for n in (1, 2)
    ]
    cells.append((nbformat.v4.new_code_cell("check()", metadata={KEY: {"check": 2}}), None))
    results = [
        CellResult("ok", output="one\n"),
        CellResult("ok", output=" \n"),
        CellResult("ok", output="TODO 2 passed"),
    ]
    assert run.todo_prints(cells, results) == {1: "one\n"}
