"""Tests of tools/run_course.py."""

import nbformat
import pytest

from tools import lesson_parameters, run_course


def test_summary_text_reads_the_cells_tagged_summary():
    notebook = nbformat.v4.new_notebook()
    tagged = nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["summary"]})
    tagged.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="10 images/s\n"),
        nbformat.v4.new_output("stream", name="stderr", text="noise\n"),
    ]
    other = nbformat.v4.new_code_cell("print(2)")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="not this\n")]
    notebook.cells = [other, tagged]
    assert run_course.summary_text(notebook) == "10 images/s"


def test_parse_parameters_reads_literals_and_keeps_strings():
    pairs = [["NUM_IMAGES", "500"], ["DATA_SOURCE", "flower_photos"], ["RATE", "0.5"]]
    assert run_course.parse_parameters(pairs) == {
        "NUM_IMAGES": 500,
        "DATA_SOURCE": "flower_photos",
        "RATE": 0.5,
    }


def test_main_unknown_lesson_exits_1(capsys):
    assert run_course.main(["--only", "99"]) == 1
    assert "No lesson matches --only '99'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"]])
def test_main_help(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_course.main(argv)
    assert exit_info.value.code == 0
    assert "Runs every lesson headless" in capsys.readouterr().out


def test_main_skips_an_optional_lesson_whose_modules_are_missing(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(
        lesson_parameters.OPTIONAL_MODULES, "05_convert_with_beam", ("no_such_module",)
    )
    assert run_course.main(["--only", "05", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Skipping 05_convert_with_beam: it needs no_such_module" in out
    assert list(tmp_path.iterdir()) == []
