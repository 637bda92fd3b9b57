"""Tests of tools/run_course.py."""

import os
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests import conftest
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
        lesson_parameters.OPTIONAL_MODULES, "06_convert_with_beam", ("no_such_module",)
    )
    assert run_course.main(["--only", "06", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Skipping 06_convert_with_beam: it needs no_such_module" in out
    assert list(tmp_path.iterdir()) == []


def test_a_failed_lesson_is_one_line_and_keeps_the_last_good_run(monkeypatch, tmp_path, capsys):
    root = tmp_path / "course"
    (root / "solutions").mkdir(parents=True)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [
        nbformat.v4.new_code_cell("N = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "raise ConnectionError('flower_photos: no network (download failed)\\nmore')"
        ),
    ]
    nbformat.write(notebook, root / "solutions" / "01_offline.ipynb")
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "01_offline.ipynb").write_text("the last good run")
    monkeypatch.setattr(run_course, "REPO_ROOT", root)
    monkeypatch.chdir(tmp_path)
    assert run_course.main(["--output-dir", str(output_dir)]) == 1
    assert capsys.readouterr().out == (
        "Running 01_offline ...\n"
        "01_offline stopped in cell 2: ConnectionError: flower_photos: no network (download "
        "failed) (the run with the error: out/01_offline.failed.ipynb)\n\n"
    )
    assert (output_dir / "01_offline.ipynb").read_text() == "the last good run"
    assert sorted(p.name for p in output_dir.iterdir()) == [
        "01_offline.failed.ipynb",
        "01_offline.ipynb",
    ]


def test_beam_install_command_names_this_environment_s_pip():
    command = lesson_parameters.beam_install_command()
    assert command.endswith(" -m pip install -r requirements-beam.txt")
    assert "python" in command.split()[0]


def test_absolute_paths_reads_paths_as_typed_where_the_command_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    parameters = {
        "DATA_SOURCE": "../messy",
        "OUTPUT_DIR": "~/my-shards",
        "SHARDS_DIR": None,
        "NUM_IMAGES": 40,
    }
    assert run_course.absolute_paths(parameters, work) == {
        "DATA_SOURCE": str(work / "../messy"),
        "OUTPUT_DIR": str(tmp_path / "home" / "my-shards"),
        "SHARDS_DIR": None,
        "NUM_IMAGES": 40,
    }
    kept = {"DATA_SOURCE": "flower_photos", "OUTPUT_DIR": "gs://my-bucket/shards"}
    assert run_course.absolute_paths(kept, work) == kept
    assert run_course.absolute_paths({"DATA_SOURCE": "embedded"}, work) == {
        "DATA_SOURCE": "embedded"
    }


def _course_with_one_lesson(root, cells: list[str]) -> None:
    """A course root whose solutions/ holds 01_paths.ipynb: a parameters cell, then `cells`."""
    (root / "solutions").mkdir(parents=True)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.cells = [
        nbformat.v4.new_code_cell(
            'DATA_SOURCE = "embedded"\nOUTPUT_DIR = None', metadata={"tags": ["parameters"]}
        ),
        *[nbformat.v4.new_code_cell(source) for source in cells[:-1]],
        nbformat.v4.new_code_cell(cells[-1], metadata={"tags": ["summary"]}),
    ]
    nbformat.write(notebook, root / "solutions" / "01_paths.ipynb")


def _git_status() -> str:
    import subprocess

    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=run_course.REPO_ROOT,
        capture_output=True,
        text=True,
    ).stdout


def test_main_reads_relative_paths_from_where_the_user_ran_it(monkeypatch, tmp_path, capsys):
    root = tmp_path / "course"
    _course_with_one_lesson(
        root,
        [
            "import os, pathlib\n"
            "pathlib.Path(OUTPUT_DIR).mkdir()\n"
            "pathlib.Path(OUTPUT_DIR, 'shard').write_text('x')",
            "print(DATA_SOURCE, os.path.isdir(DATA_SOURCE))\nprint(OUTPUT_DIR)",
        ],
    )
    (tmp_path / "user" / "messy").mkdir(parents=True)
    (tmp_path / "user" / "work").mkdir()
    monkeypatch.setattr(run_course, "REPO_ROOT", root)
    monkeypatch.chdir(tmp_path / "user" / "work")
    status_before = _git_status()
    arguments = ["-p", "DATA_SOURCE", "../messy", "-p", "OUTPUT_DIR", "my-shards"]
    assert run_course.main([*arguments, "--output-dir", str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out.split("=== 01_paths: what it measured ===\n")[1]
    work = tmp_path / "user" / "work"
    assert summary.splitlines()[:2] == [f"{work / '../messy'} True", str(work / "my-shards")]
    assert (work / "my-shards" / "shard").read_text() == "x"
    assert sorted(p.name for p in (root / "solutions").iterdir()) == ["01_paths.ipynb"]
    assert _git_status() == status_before


def test_heartbeat_names_the_running_cell_from_papermill_s_copy(tmp_path):
    running = tmp_path / "01_slow.running.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Lab")] + [
        nbformat.v4.new_code_cell(f"step({i})") for i in range(3)
    ]
    for cell, status in zip(notebook.cells[1:], ["completed", "running", "pending"], strict=True):
        cell.metadata["papermill"] = {"status": status}
    nbformat.write(notebook, running)
    assert run_course.Heartbeat("01_slow", running)._where() == ", cell 2 of 3"
    assert run_course.Heartbeat("01_slow", tmp_path / "not-yet.ipynb")._where() == ""


def test_main_prints_a_heartbeat_while_a_lesson_runs(monkeypatch, tmp_path, capsys):
    root = tmp_path / "course"
    _course_with_one_lesson(root, ["import time\ntime.sleep(2.5)", "print('done')"])
    monkeypatch.setattr(run_course, "REPO_ROOT", root)
    monkeypatch.setattr(run_course, "HEARTBEAT_SECONDS", 0.5)
    assert run_course.main(["--output-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    beats = [line for line in out.splitlines() if "still running" in line]
    assert len(beats) >= 2, out
    assert beats[0].startswith("  01_paths: still running, 0 m 0")
    assert any(line.endswith(", cell 2 of 3") for line in beats), beats


def test_the_kernels_temporary_files_go_with_the_run(monkeypatch, tmp_path, capsys):
    root = tmp_path / "course"
    (root / "solutions").mkdir(parents=True)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    left = (
        "import tempfile\n"  # What TensorFlow's autograph does: a file it never deletes.
        "handle, path = tempfile.mkstemp(prefix='__autograph_generated_file', suffix='.py')\n"
        "print(path)"
    )
    notebook.cells = [nbformat.v4.new_code_cell(left, metadata={"tags": ["summary"]})]
    nbformat.write(notebook, root / "solutions" / "01_leaves_a_file.ipynb")
    monkeypatch.setattr(run_course, "REPO_ROOT", root)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "system-temp"))
    (tmp_path / "system-temp").mkdir()
    assert run_course.main(["--output-dir", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    kernel_file = Path(printed[printed.index("=== 01_leaves_a_file: what it measured ===") + 1])
    assert kernel_file.name.startswith("__autograph_generated_file")
    assert kernel_file.parent.name.startswith("tpu_speed_pipelines_course-")
    assert not kernel_file.parent.exists()
    assert list((tmp_path / "system-temp").iterdir()) == []
    assert os.environ["TMPDIR"] == str(tmp_path / "system-temp")
    assert tempfile.gettempdir() == str(conftest.TEMP_ROOT)  # This process's, as before.
