"""tools.lesson_load: what a lab asks of a learner, counted and turned into minutes."""

import nbformat
import pytest

from tools import lesson_load
from tools.building.outputs import METADATA_KEY


def _notebook(cells, **metadata):
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata[METADATA_KEY] = metadata
    return notebook


def _lab_and_solution():
    title = nbformat.v4.new_markdown_cell("<!-- Generated from x.py -->\n# Lab 9 · Five words here")
    header = nbformat.v4.new_markdown_cell("**What is graded:** many words " * 20)
    header.id = "cell-links"
    setup = nbformat.v4.new_code_cell("import os\n" * 40, metadata={"tags": ["setup"]})
    todo = nbformat.v4.new_code_cell(
        "# TODO 1: two words.\nx = ...\n\ny = x  # three more words\n",
        metadata={METADATA_KEY: {"todo": 1, "points": 1}},
    )
    check = nbformat.v4.new_code_cell("check(x, todo=1)")
    hand_in = nbformat.v4.new_markdown_cell("## Hand in " * 30, metadata={"tags": ["hand_in"]})
    lab = _notebook([title, header, setup, todo, check, hand_in], source="x.py")
    solved = nbformat.v4.new_code_cell("print('one two three')")
    solved.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="one two three\n"),
        nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"}),
        nbformat.v4.new_output("execute_result", data={"text/plain": "'four five'"}),
    ]
    setup_outputs = nbformat.v4.new_code_cell("", metadata={"tags": ["setup"]})
    setup_outputs.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x " * 500)]
    solution = _notebook([title, setup_outputs, solved], execution_seconds=90)
    return lab, solution


def test_counts_what_the_learner_reads_and_not_the_generated_cells():
    lab, solution = _lab_and_solution()
    load = lesson_load.lesson_load(lab, solution)
    # Title: "# Lab 9 · Five words here": 5 words (not "#", "·", nor the banner comment).
    assert load.prose_words == 5
    # "x = ...", "y = x  # ...", "check(x, todo=1)": 3 lines; comments "TODO 1: two words."
    # (4 words) and "three more words" (3).
    assert (load.code_lines, load.comment_words) == (3, 7)
    assert load.todos == 1
    # The stream's 3 words and the result's 2; the figure counted apart, its text not read.
    assert (load.output_words, load.figures) == (5, 1)
    assert load.execution_minutes == 1.5
    expected = (5 + 7) / 150 + 3 / 10 + 5 / 200 + 6 + 1.5
    assert load.minutes == pytest.approx(expected)


def test_fenced_code_in_the_text_is_read_as_code():
    cell = nbformat.v4.new_markdown_cell("In short:\n\n```python\nx = 1  # one\n```\nDone.")
    lab, solution = _notebook([cell]), _notebook([])
    load = lesson_load.lesson_load(lab, solution)
    assert (load.prose_words, load.code_lines, load.comment_words) == (3, 1, 1)


def test_count_code_splits_code_from_comments():
    assert lesson_load.count_code("x = 1  # one\n\n# two words\n") == (1, 3)
    assert lesson_load.count_code("") == (0, 0)


def test_over_targets_names_each_lab_and_the_core():
    lab, solution = _lab_and_solution()
    load = lesson_load.lesson_load(lab, solution)
    wordy = lesson_load.dataclasses.replace(load, lesson="01_wordy", prose_words=801)
    slow = lesson_load.dataclasses.replace(load, lesson="02_slow", execution_minutes=200)
    assert lesson_load.over_targets({"01": load}) == []
    assert lesson_load.over_targets({"01": wordy, "02": slow}) == [
        "01_wordy: 801 words of prose (target 800)",
        f"labs 1-5 take about {wordy.minutes + slow.minutes:.0f} minutes (target 150)",
    ]


def test_the_course_report_covers_every_lesson(capsys):
    assert lesson_load.main([]) == 0
    printed = capsys.readouterr().out
    loads = lesson_load.every_lesson()
    assert sorted(loads) == [f"0{n}" for n in range(1, 10)]
    for load in loads.values():
        assert load.lesson in printed
        assert load.todos >= 1 and load.prose_words > 0 and load.code_lines > 0
    assert "Core (labs 1-5): about" in printed


def test_a_lab_without_its_solution_is_named(tmp_path):
    (tmp_path / "labs").mkdir()
    (tmp_path / "solutions").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "labs" / "01_x.ipynb")
    with pytest.raises(FileNotFoundError, match="01_x.ipynb has no solution"):
        lesson_load.every_lesson(tmp_path)


def _lab_with_todo(text_above, stub, solved):
    todo_metadata = {METADATA_KEY: {"todo": 1, "points": 1}}
    intro = nbformat.v4.new_markdown_cell(text_above)
    lab_todo = nbformat.v4.new_code_cell(stub, metadata=todo_metadata)
    lab_todo.id = "todo-1"
    solved_todo = nbformat.v4.new_code_cell(solved, metadata=todo_metadata)
    solved_todo.id = "todo-1"
    lab = _notebook([intro, lab_todo], source="x.py")
    solution = _notebook([intro, solved_todo], execution_seconds=0)
    return lab, solution


def test_a_todo_whose_api_is_named_nowhere_before_it_counts_12_minutes():
    solved = "parallel = files.map(read, num_parallel_calls=4)\n"
    lab, solution = _lab_with_todo("**TODO 1.** Read them all at once.", "parallel = ...", solved)
    load = lesson_load.lesson_load(lab, solution)
    assert load.unnamed == ((1, ("map", "num_parallel_calls")),)
    named_lab, named_solution = _lab_with_todo(
        "**TODO 1.** With `map()` and its `num_parallel_calls`, read them.",
        "parallel = ...",
        solved,
    )
    named = lesson_load.lesson_load(named_lab, named_solution)
    assert named.unnamed == ()
    more_words = named.prose_words - load.prose_words
    assert load.minutes - named.minutes == pytest.approx(
        lesson_load.MINUTES_PER_UNNAMED_TODO - lesson_load.MINUTES_PER_TODO - more_words / 150
    )


def test_the_api_leaves_out_builtins_the_stub_and_what_the_lab_defines():
    stub = "def to_list(x):\n    items = ...\n    return sorted(items)\n"
    solved = "def to_list(x):\n    items = list(helper(x, key=1))\n    return sorted(items)\n"
    lab, solution = _lab_with_todo("def helper(x, key): ...", stub, solved)
    # `list` is a builtin, `sorted` is in the stub, `helper` is the lab's; `key` is named.
    assert lesson_load.unnamed_apis(lab, solution) == ()
    assert lesson_load.called_names(solved) == {"helper", "key"}
    assert lesson_load.called_names("d.map(f)") == {"map"}  # A method, not the builtin.


def test_the_core_names_the_api_of_every_todo():
    """Issue 60, item 6: every TODO of labs 1-5 names the API it needs somewhere above it.

    (Whether the core fits its minutes is `tools.lesson_load --check`'s, on the build's
    execution times.)
    """
    loads = lesson_load.every_lesson()
    for number in lesson_load.CORE_LESSONS:
        assert loads[number].unnamed == (), loads[number].lesson
