"""Tests of tools/readme_numbers.py: the README's numbers blocks come from solutions/."""

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import readme_numbers

README = """# Course

**Lab 1**. <!-- numbers:01_lab:begin -->
typed by hand: 999 images/s
<!-- numbers:01_lab:end -->

Prose after the block stays.
"""
GENERATED = (
    "Printed by [solutions/01_lab.ipynb](solutions/01_lab.ipynb)'s summary cell:\n\n"
    "```\nsequential 18.9 images/s\nparallel 301.3 images/s\n```\n"
)


def _solution(
    root, stem="01_lab", tags=("summary",), texts=("sequential 18.9 images/s\n",), seconds=None
):
    notebook = nbformat.v4.new_notebook()
    if seconds is not None:
        notebook.metadata["tpu_speed_pipelines"] = {"execution_seconds": seconds}
    cell = nbformat.v4.new_code_cell("print(...)", metadata={"tags": list(tags)})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
    notebook.cells = [nbformat.v4.new_code_cell("x = 1"), cell]
    (root / "solutions").mkdir(exist_ok=True)
    nbformat.write(notebook, root / "solutions" / f"{stem}.ipynb")


@pytest.fixture
def root(tmp_path):
    _solution(tmp_path, texts=("sequential 18.9 images/s\n", "parallel 301.3 images/s\n"))
    (tmp_path / "README.md").write_text(README)
    return tmp_path


def test_write_replaces_only_the_block_with_the_summary_cells_stdout(root, capsys):
    assert readme_numbers.main([], root=root) == 0
    assert (root / "README.md").read_text() == README.replace(
        "typed by hand: 999 images/s\n", GENERATED
    )
    assert capsys.readouterr().out == "README.md: 1 numbers block(s) rewritten: 01_lab.\n"
    assert readme_numbers.main(["--check"], root=root) == 0


def test_check_fails_naming_the_block_that_differs_and_writes_nothing(root, capsys):
    assert readme_numbers.main(["--check"], root=root) == 1
    assert capsys.readouterr().err == (
        "README.md: the numbers block of 01_lab differs from solutions/01_lab.ipynb. "
        "Run: python -m tools.readme_numbers\n"
    )
    assert (root / "README.md").read_text() == README


def test_a_solution_without_a_block_in_any_document_is_an_error(root, capsys):
    _solution(root, stem="02_other")
    assert readme_numbers.main(["--check"], root=root) == 1
    assert capsys.readouterr().err == (
        "No document (README.md) has a numbers block for solutions/02_other.ipynb. Add the lines "
        "<!-- numbers:02_other:begin --> and <!-- numbers:02_other:end --> where its numbers "
        "belong, then run: python -m tools.readme_numbers\n"
    )


def test_a_block_naming_no_solution_is_an_error(root, capsys):
    (root / "README.md").write_text(README.replace("01_lab", "07_gone"))
    assert readme_numbers.main([], root=root) == 1
    assert capsys.readouterr().err == (
        "README.md has a numbers block for 07_gone, but solutions/07_gone.ipynb does not exist. "
        "Remove the block or fix its name.\n"
    )
    assert (root / "README.md").read_text() == README.replace("01_lab", "07_gone")


@pytest.mark.parametrize(
    "tags, texts, found",
    [
        ((), ("x\n",), "no cell tagged summary"),
        (("summary",), (), "1 cell(s) tagged summary, which printed nothing"),
    ],
    ids=["no summary cell", "unexecuted"],
)
def test_a_solution_without_printed_summary_is_an_error(tmp_path, capsys, tags, texts, found):
    _solution(tmp_path, tags=tags, texts=texts)
    (tmp_path / "README.md").write_text(README)
    assert readme_numbers.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        f"solutions/01_lab.ipynb: {found}. Tag the lesson's summary cell `summary` and run: "
        "make build\n"
    )


def test_this_readme_matches_the_committed_solutions(capsys):
    assert readme_numbers.main(["--check"], root=REPO_ROOT) == 0, capsys.readouterr().err
    assert (
        capsys.readouterr().out == "The documents' numbers blocks match the committed solutions.\n"
    )


TIMES_README = README + "\n<!-- times:begin -->\nold\n<!-- times:end -->\nAfter.\n"


def test_times_block_lists_each_solution_s_execution_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(readme_numbers.lesson_parameters.OPTIONAL_MODULES, "02_beam", ("beam",))
    _solution(tmp_path, seconds=90)
    _solution(tmp_path, stem="02_beam", seconds=150)
    readme = TIMES_README + "<!-- numbers:02_beam:begin -->\n<!-- numbers:02_beam:end -->\n"
    (tmp_path / "README.md").write_text(readme)
    assert readme_numbers.main([], root=tmp_path) == 0
    text = (tmp_path / "README.md").read_text()
    times = text[text.index("<!-- times:begin -->") : text.index("After.")]
    assert times == (
        "<!-- times:begin -->\n"
        "How long each solution took to execute in the build (`make build`, full parameters; "
        "its `execution_seconds`):\n\n```\n"
        "lesson                       minutes\n"
        "01_lab                           1.5\n"
        "02_beam                          2.5  run_course runs it only with beam\n"
        "all lessons                      4.0\n"
        "without 02                       1.5\n"
        "```\n<!-- times:end -->\n"
    )
    capsys.readouterr()
    assert readme_numbers.main(["--check"], root=tmp_path) == 0
    _solution(tmp_path, seconds=96)
    assert readme_numbers.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        "README.md: the times block differs from the solutions' execution times. "
        "Run: python -m tools.readme_numbers\n"
    )


def test_blocks_in_docs_are_written_there_with_links_from_docs(root, capsys):
    (root / "docs").mkdir()
    (root / "docs" / "lessons.md").write_text(
        "# Lessons\n<!-- numbers:01_lab:begin -->\nold\n<!-- numbers:01_lab:end -->\n"
    )
    (root / "README.md").write_text("# Course\n")
    assert readme_numbers.main([], root=root) == 0
    assert capsys.readouterr().out == "docs/lessons.md: 1 numbers block(s) rewritten: 01_lab.\n"
    written = (root / "docs" / "lessons.md").read_text()
    assert (
        "Printed by [solutions/01_lab.ipynb](../solutions/01_lab.ipynb)'s summary cell:" in written
    )
    assert (root / "README.md").read_text() == "# Course\n"
    assert readme_numbers.main(["--check"], root=root) == 0


def test_times_block_needs_every_solution_s_time(tmp_path, capsys):
    _solution(tmp_path)
    (tmp_path / "README.md").write_text(TIMES_README)
    assert readme_numbers.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        "solutions/01_lab.ipynb has no execution time (tpu_speed_pipelines.execution_seconds "
        "in its metadata): it was not executed by the build. Run: make build\n"
    )


def test_this_readme_has_the_labs_table_and_its_facts():
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme_numbers.LABS.search(readme) is not None
    facts = [match["name"] for match in readme_numbers.FACT.finditer(readme)]
    assert facts == [
        "lessons_run",
        "lesson_minutes",
        "lessons_skipped",
        "lessons_partly_run",
        "test_count",
        "test_minutes",
        "venv_gb",
    ]


def _lab(root, stem, title, *, prose="Read this.", todo=None):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["tpu_speed_pipelines"] = {"source": f"notebooks/{stem}.py"}
    code = nbformat.v4.new_code_cell("x = ...\ny = 2")
    if todo:
        code.metadata["tpu_speed_pipelines"] = {"todo": todo}
    notebook.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\n{prose}"), code]
    (root / "labs").mkdir(exist_ok=True)
    nbformat.write(notebook, root / "labs" / f"{stem}.ipynb")


def test_labs_table_gives_each_lab_s_minutes_to_read_and_do_and_to_run(tmp_path, capsys):
    _solution(tmp_path, stem="01_lab", seconds=90)
    _solution(tmp_path, stem="06_extra", seconds=30)
    _lab(tmp_path, "01_lab", "Lab 1 · Read | write", prose="word " * 300, todo=1)
    _lab(tmp_path, "06_extra", "Lesson 6 (optional) · More")
    (tmp_path / "README.md").write_text(
        "<!-- labs:begin -->\nold\n<!-- labs:end -->\nTook <!-- fact:lesson_minutes -->9"
        "<!-- /fact --> min.\n<!-- numbers:01_lab:begin -->\n<!-- numbers:01_lab:end -->\n"
        "<!-- numbers:06_extra:begin -->\n<!-- numbers:06_extra:end -->\n"
    )
    assert readme_numbers.main([], root=tmp_path) == 0
    text = (tmp_path / "README.md").read_text()
    # Lab 1: 300 words / 150 + 2 code lines / 10 + 1 output word / 200 + 6 + 1.5 = 9.7 min.
    assert text.startswith(
        "<!-- labs:begin -->\n"
        "| lab | minutes to read and do | minutes to run |\n"
        "| --- | ---: | ---: |\n"
        "| [Lab 1 · Read \\| write](labs/01_lab.ipynb) ([solution](solutions/01_lab.ipynb)) "
        "| 10 | 1.5 |\n"
        "| [Lesson 6 (optional) · More](labs/06_extra.ipynb) "
        "([solution](solutions/06_extra.ipynb)) | 1 | 0.5 |\n"
        "| labs 1-5, the core | 10 | 1.5 |\n"
        "<!-- labs:end -->\nTook <!-- fact:lesson_minutes -->2.0<!-- /fact --> min.\n"
    )
    capsys.readouterr()
    _solution(tmp_path, stem="01_lab", seconds=300)
    assert readme_numbers.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        "README.md: the labs table differs from the labs and solutions (tools.lesson_load). "
        "Run: python -m tools.readme_numbers\n"
        "README.md: the fact lesson_minutes differs from the solutions. "
        "Run: python -m tools.readme_numbers\n"
    )


def test_measured_facts_are_left_alone_by_check_and_an_unknown_fact_is_an_error(root, capsys):
    readme = "Tests: <!-- fact:test_count -->1,000<!-- /fact -->.\n" + README
    (root / "README.md").write_text(readme)
    readme_numbers.main([], root=root)
    capsys.readouterr()
    assert readme_numbers.main(["--check"], root=root) == 0
    assert "<!-- fact:test_count -->1,000<!-- /fact -->" in (root / "README.md").read_text()
    (root / "README.md").write_text(readme.replace("test_count", "tests_count"))
    assert readme_numbers.main(["--check"], root=root) == 1
    assert capsys.readouterr().err == (
        "README.md: no fact called 'tests_count'; known: all_lesson_minutes, lesson_minutes, "
        "lessons_partly_run, lessons_run, lessons_skipped, "
        "test_count, test_minutes, venv_gb.\n"
    )


def test_measure_reads_the_tests_minutes_from_pytest_s_last_line(tmp_path):
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "big").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n")
    log = tmp_path / "pytest.log"
    log.write_text("...\n= 1241 passed, 1 failed, 3 skipped, 2 warnings in 1379.61s (0:22:59) =\n")
    facts = readme_numbers.measured_facts(tmp_path, log)
    # pytest's own count (1,241 + 1 + 3), not the collected one: warnings are no tests.
    assert facts == {"test_count": "1,245", "venv_gb": "0.0", "test_minutes": "23"}
    assert readme_numbers.measured_facts(tmp_path, None) == {"venv_gb": "0.0"}
    assert readme_numbers._disk_bytes(tmp_path / ".venv") >= 3_000_000
    log.write_text("collected 3 items\n")
    with pytest.raises(readme_numbers.NumbersError, match=r"pytest.log: no pytest summary line"):
        readme_numbers.measured_facts(tmp_path, log)
