"""Cheap tests of the replicas (tools/replicas): their lists, plans, verdicts and table.

The replicas themselves are built and run by `python -m tools.replicas` in `.ci/run`.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REAL_HOME
from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.replicas import __main__ as command
from tools.replicas import environments, execute, internals_check, runs

LISTED = {replica.name: replica for replica in environments.replicas()}


def test_every_platform_has_a_list_a_plan_and_its_python():
    assert set(LISTED) == {"bare-jax", "colab-gpu", "colab-tpu", "kaggle-tpu"}
    assert set(runs.PLANS) == set(runs.FULL_PLANS) == set(LISTED)
    assert {name: replica.python for name, replica in LISTED.items()} == {
        "bare-jax": "3.12",
        "colab-gpu": "3.13",
        "colab-tpu": "3.13",
        "kaggle-tpu": "3.12",
    }
    for replica in LISTED.values():
        assert all(
            re.fullmatch(r"[\w.-]+(\[\w+\])?==[\w.+]+", line) for line in replica.requirements
        )
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", replica.header["date"]), replica.name


def _pins(name):
    return dict(line.lower().replace("_", "-").split("==") for line in LISTED[name].requirements)


def test_colab_tpu_has_colabs_versions_and_no_tensorflow():
    pins = _pins("colab-tpu")
    expected = {
        "jax": "0.7.2",
        "jaxlib": "0.7.2",
        "keras": "3.13.2",
        "numpy": "2.1.3",
        "protobuf": "7.35.1",
        "h5py": "3.16.0",
        "ml-dtypes": "0.6.0",
        "grain": "0.2.18",
        "array-record": "0.8.3",
        "ipykernel": "6.17.1",
        "ipython": "7.34.0",
        "matplotlib": "3.10.0",
    }
    assert {name: pins.get(name) for name in expected} == expected
    assert not [name for name in pins if name.startswith("tensorflow")]
    assert "a72407924822ea377410b69f0a290150bcb5c9c2" in LISTED["colab-tpu"].header["source"]
    assert (
        _pins("colab-gpu")["tensorflow"] == "2.20.0"
        and _pins("kaggle-tpu")["tensorflow-cpu"] == "2.20.0"
    )
    assert not {"matplotlib", "pillow", "tensorflow"} & set(_pins("bare-jax"))


def test_a_list_without_its_header_is_refused_naming_the_key(tmp_path):
    path = tmp_path / "somewhere.txt"
    path.write_text("# platform: x\n# python: 3.12\n# date: 2026-01-01\nnumpy==2.1.3\n")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(path))}: the header has no '# source: ...' line$"
    ):
        environments.read_replica(path)


def test_find_python_takes_pyenvs_newest_patch_release(tmp_path, monkeypatch):
    for version in ("3.13.0", "3.13.12", "3.13.9", "3.12.1"):
        (tmp_path / "versions" / version / "bin").mkdir(parents=True)
        (tmp_path / "versions" / version / "bin" / "python").touch()
    assert environments.find_python("3.13", tmp_path) == tmp_path / "versions/3.13.12/bin/python"
    monkeypatch.setenv("PATH", str(tmp_path))  # No python3.9 on PATH either.
    with pytest.raises(
        environments.ReplicaUnbuildable, match=r"^no Python 3\.9 here \(pyenv install 3\.9\)$"
    ):
        environments.find_python("3.9", tmp_path)


def test_a_replica_without_its_python_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(environments.ReplicaUnbuildable) as failure:
        environments.build(LISTED["kaggle-tpu"], tmp_path / "cache")
    assert str(failure.value) == (
        "kaggle-tpu: cannot be built here: no Python 3.12 here (pyenv install 3.12)"
    )


def test_a_cached_venv_is_used_without_pip(tmp_path):
    replica = LISTED["colab-tpu"]
    ready = tmp_path / f"colab-tpu-{replica.key}"
    ready.mkdir()
    (ready / "ready").write_text("built\n")
    assert environments.build(replica, tmp_path, python=tmp_path / "no-such-python") == ready


def test_a_replica_that_cannot_be_built_says_so_naming_the_package(tmp_path, monkeypatch):
    """An empty wheel folder is the package index: uv finds no wheel, the one line names it."""
    lists, wheels = tmp_path / "lists", tmp_path / "wheels"
    lists.mkdir(), wheels.mkdir()
    (lists / "nowhere.txt").write_text(
        "# platform: nowhere\n# python: 3.11\n# source: a test\n# date: 2026-11-24\n"
        "no-such-package-anywhere==1.0\n"
    )
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # Never the caller's.
    (replica,) = environments.replicas(lists)
    with pytest.raises(environments.ReplicaUnbuildable) as failure:
        environments.build(replica, tmp_path / "cache", python=sys.executable)
    assert str(failure.value) == (
        "nowhere: cannot be built here: no no-such-package-anywhere==1.0 for Python 3.11 on "
        "the package index"
    )
    assert list((tmp_path / "cache").iterdir()) == []  # Nothing half-built is kept.


@pytest.mark.parametrize(
    "said",
    [
        "  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version of"
        " numpy==99.0.0 and you require\n      numpy==99.0.0, we can conclude that your\n",
        "  ╰─▶ Because numpy==99.0.0 has no wheels with a matching Python ABI tag and you require"
        "\n      numpy==99.0.0, we can conclude that your requirements are unsatisfiable.\n",
    ],
)
def test_uvs_other_messages_name_the_package_too(said):
    replica = LISTED["kaggle-tpu"]
    assert environments.unbuildable_reason(replica, said) == (
        "kaggle-tpu: cannot be built here: no numpy==99.0.0 for Python 3.12 on the package index"
    )
    assert environments.unbuildable_reason(replica, "error: Broken pipe\n") == (
        "kaggle-tpu: cannot be built here: uv failed (error: Broken pipe)"
    )


def test_the_command_fails_on_a_replica_it_cannot_build(tmp_path, monkeypatch, capsys):
    def unbuildable(replica, cache):
        raise environments.ReplicaUnbuildable(f"{replica.name}: cannot be built here: no x==1")

    monkeypatch.setattr(environments, "build", unbuildable)
    monkeypatch.setenv(environments.CACHE_ENV_VAR, str(tmp_path))
    assert command.main(["--only", "kaggle-tpu"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "kaggle-tpu: cannot be built here: no x==1" in lines
    assert re.fullmatch(r"kaggle-tpu +build the venv +FAILED +0\.0", lines[-3])
    assert lines[-1] == "0 passed, 1 failed"


def _notebook(*cells):
    notebook = nbformat.v4.new_notebook()
    for source, meta, outputs in cells:
        cell = nbformat.v4.new_code_cell(
            source, metadata={"tpu_speed_pipelines": meta} if meta else {}
        )
        cell.outputs = outputs
        notebook.cells.append(cell)
    return notebook


def _error(ename, evalue, traceback=None):
    return nbformat.v4.new_output(
        "error", ename=ename, evalue=evalue, traceback=traceback or [f"{ename}: {evalue}"]
    )


TODO = ("x = ...", {"todo": 1}, [])
MISSING = "No module named 'matplotlib'"
STOP = "TODO 1 (filenames): not done yet: it returns None. Expected a list."
LAB = runs.labs(["01_tf_data_basics"])[0]
SOLUTION = runs.solutions(["01_tf_data_basics"])[0]


@pytest.mark.parametrize(
    "cells, expected",
    [
        ([TODO, ("check", {"check": 1}, [_error("CheckFailed", STOP)])], None),
        ([TODO, ("check", {"check": 1}, [])], "ran to the end: no stop at TODO 1's check"),
        (
            [("import matplotlib", {}, [_error("ModuleNotFoundError", MISSING)]), TODO],
            "stopped at cell 0 (check None): ModuleNotFoundError: No module named 'matplotlib'",
        ),
        (
            [
                ("x = ...", {"todo": 1}, []),
                (
                    "check",
                    {"check": 1},
                    [_error("CheckFailed", STOP, ["Traceback ...", "CheckFailed"])],
                ),
            ],
            f"stopped at cell 1 (check 1): CheckFailed: {STOP}",
        ),
    ],
    ids=["the stop", "no stop", "an earlier error", "a traceback, not the plain line"],
)
def test_a_lab_must_stop_at_its_first_todos_check_with_the_plain_message(cells, expected):
    assert runs.verdict(LAB, _notebook(*cells)) == expected


def test_a_solution_must_run_without_an_error():
    assert runs.verdict(SOLUTION, _notebook(("x = 1", {"todo": 1}, []))) is None
    failed = _notebook(("x", {}, [_error("NameError", "name 'x' is not defined")]))
    assert runs.verdict(SOLUTION, failed) == "NameError: name 'x' is not defined"


def test_the_full_plans_run_what_the_issue_asks():
    names = {name: [run.name for run in plan()] for name, plan in runs.FULL_PLANS.items()}
    labs = [f"lab{n:02d}" for n in range(1, 10)]
    solutions = [f"solution{n:02d}" for n in (1, 2, 3, 4, 5, 7, 8)]
    assert names["colab-tpu"] == [*labs, *solutions, "solution04-jax1"]
    assert names["kaggle-tpu"] == [*labs, *solutions, "solution04-jax8"]
    assert names["colab-gpu"] == [*labs, *solutions]
    assert names["bare-jax"] == ["lab04", "solution04"]
    eight = [run for run in runs.FULL_PLANS["kaggle-tpu"]() if run.name.endswith("jax8")]
    assert {run.env["XLA_FLAGS"] for run in eight} == {"--xla_force_host_platform_device_count=8"}
    assert [run.parameters for run in eight] == [{"BACKEND": "jax"}]  # The defaults.


def test_cis_plans_keep_every_replica_and_run_lesson_4_small_on_1_and_8_devices():
    names = {name: [run.name for run in plan()] for name, plan in runs.PLANS.items()}
    assert names == {
        "bare-jax": ["lab04", "solution04"],
        "colab-gpu": [f"solution{n:02d}" for n in (1, 2, 3, 5, 7, 8, 4)],
        "colab-tpu": [*(f"lab{n:02d}" for n in (1, 2, 3, 4, 5, 7, 8, 9)), "solution04-jax1-small"],
        "kaggle-tpu": [
            "lab01",
            *(f"solution{n:02d}" for n in (1, 2, 3, 5, 7, 8)),
            "solution04-jax8-small",
        ],
    }
    for replica, devices in (("colab-tpu", "1"), ("kaggle-tpu", "8")):
        for run, lesson in zip(runs.PLANS[replica]()[-1:], runs.JAX_LESSONS, strict=True):
            assert run.parameters == {**SMALL_PARAMETERS[lesson], "BACKEND": "jax"}
            assert run.env.get("XLA_FLAGS", "=1").endswith(f"={devices}")
            assert runs.DATA_CACHE not in run.env  # Small runs make their own data.


def test_moves_are_said_as_the_set_up_says_them():
    before = {"h5py": "3.16.0", "numpy": "2.1.3", "six": "1.17.0"}
    after = {"h5py": "3.14.0", "numpy": "2.1.3", "tensorflow-cpu": "2.21.0"}
    assert execute.moves(before, after) == ["h5py 3.16.0 -> 3.14.0", "six 1.17.0 -> gone"]


def _with_setup_output(printed):
    notebook = _notebook(
        ("set-up", {}, [nbformat.v4.new_output("stream", name="stdout", text=printed)])
    )
    notebook.cells[0].metadata["tags"] = ["setup"]
    return notebook


@pytest.mark.parametrize(
    "printed, after, passed, detail",
    [
        ("Installing ...\n", {"h5py": "3.16.0", "tensorflow-cpu": "2.20.0"}, True, ""),
        (
            "Installing ...\npip changed installed packages: h5py 3.16.0 -> 3.14.0.\n",
            {"h5py": "3.14.0", "tensorflow-cpu": "2.21.0"},
            True,
            "",
        ),
        (
            "Installing ...\n",
            {"h5py": "3.14.0", "tensorflow-cpu": "2.21.0"},
            False,
            "the set-up said it moved nothing",
        ),
    ],
    ids=["nothing moved", "a move, said", "a move, unsaid"],
)
def test_the_set_up_row_fails_on_a_move_it_did_not_name(tmp_path, printed, after, passed, detail):
    output = tmp_path / "lab01.out.ipynb"
    nbformat.write(_with_setup_output(printed), output)
    row = execute._setup_row("colab-tpu", LAB, output, {"h5py": "3.16.0"}, after)
    assert (row.passed, row.detail) == (passed, detail)
    moved = "h5py 3.16.0 -> 3.14.0" if after["h5py"] != "3.16.0" else "none"
    assert row.what == f"lab01's set-up: 1 packages added, moved: {moved}"


def test_the_versions_of_a_python_are_read_from_its_metadata():
    import pytest as module

    found = execute.versions(sys.executable)
    assert found["pytest"] == module.__version__ and found["nbformat"] == nbformat.__version__


def test_the_table_shows_each_row_and_why_one_failed():
    rows = [
        execute.Result("colab-tpu", "lab 01 to its first TODO", True, 0.42),
        execute.Result("colab-tpu", "solution 04", False, 1.0, "NameError: x"),
    ]
    assert command.table(rows).splitlines() == [
        "replica     what ran                 result  minutes",
        "colab-tpu   lab 01 to its first TODO passed      0.4",
        "colab-tpu   solution 04              FAILED      1.0",
        "              NameError: x",
    ]


def test_bwrap_probe_says_false_without_bwrap(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("bwrap")

    monkeypatch.setattr(subprocess, "run", missing)
    assert execute.bwrap_works() is False


# The replicas' venvs with TensorFlow, where this machine has them cached (building one
# needs the network: `python -m tools.replicas` does). Their versions: colab-gpu TensorFlow
# 2.20.0 and Keras 3.13.2, kaggle-tpu tensorflow-cpu 2.20.0 and Keras 3.15.1, Grain 0.2.18.
CACHE = (
    os.environ.get(environments.CACHE_ENV_VAR) or REAL_HOME / ".cache/tpu_speed_pipelines/replicas"
)
CACHED = {name: Path(CACHE) / f"{name}-{LISTED[name].key}" for name in ("colab-gpu", "kaggle-tpu")}


@pytest.mark.parametrize("name", sorted(CACHED))
def test_the_graders_internals_hold_on_each_replicas_versions(name):
    venv = CACHED[name]
    if not (venv / "ready").is_file():
        pytest.skip(f"{name}'s venv is not cached here (python -m tools.replicas builds it)")
    *checks, versions = execute.check_internals(venv / "bin" / "python")
    pins = _pins(name)
    expected = {
        "tensorflow": pins.get("tensorflow") or pins["tensorflow-cpu"],
        "keras": pins["keras"],
        "grain": pins["grain"],
    }
    assert versions == {"versions": expected}
    assert [c["check"] for c in checks] == list(internals_check.CHECKS)
    assert [c for c in checks if not c["ok"]] == []


def test_a_failed_internals_check_is_a_failed_row_naming_it(monkeypatch):
    said = [
        {"check": "python_callback", "ok": False, "detail": "AttributeError: _py_funcs"},
        {"check": "grain_settings", "ok": True, "detail": "9 steps"},
        {"versions": {"tensorflow": "2.22.0", "keras": "3.16.0", "grain": None}},
    ]
    monkeypatch.setattr(execute, "check_internals", lambda python: said)
    rows = execute.internals_rows("colab-gpu", Path("python"))
    assert [(r.what, r.passed, r.detail) for r in rows] == [
        (
            "grader's internals: python_callback (tensorflow 2.22.0, keras 3.16.0)",
            False,
            "AttributeError: _py_funcs",
        ),
        ("grader's internals: grain_settings (tensorflow 2.22.0, keras 3.16.0)", True, ""),
    ]


def test_a_lab_passes_grading_on_full_marks_for_its_solution_and_zero_for_its_blank():
    scored = {
        "solution-01_tf_data_basics.ipynb": "4/4",
        "blank-01_tf_data_basics.ipynb": "0/4",
        "solution-02_write_tfrecords.ipynb": "3/4",
        "blank-02_write_tfrecords.ipynb": "0/4",
        "solution-03_read_tfrecords.ipynb": "4/4",
        "blank-03_read_tfrecords.ipynb": "grader error: prepare: FileNotFoundError: x",
    }
    lessons = ["01_tf_data_basics", "02_write_tfrecords", "03_read_tfrecords", "05_x"]
    rows = execute.grade_rows("colab-gpu", scored, lessons)
    assert [(r.what, r.passed, r.detail) for r in rows] == [
        ("grade lab 01: solution full marks, blank lab zero", True, ""),
        ("grade lab 02: solution full marks, blank lab zero", False, "solution 3/4; blank lab 0/4"),
        (
            "grade lab 03: solution full marks, blank lab zero",
            False,
            "solution 4/4; blank lab grader error: prepare: FileNotFoundError: x",
        ),
        (
            "grade lab 05: solution full marks, blank lab zero",
            False,
            "solution not graded; blank lab not graded",
        ),
    ]


def test_ci_grades_the_core_labs_on_colab_gpu_and_full_on_kaggle_tpu_too():
    core = [f"{n:02d}" for n in range(1, 6)]
    assert [lesson[:2] for lesson in runs.CORE] == core
    assert runs.GRADED == {"colab-gpu": runs.CORE}
    assert runs.FULL_GRADED == {"colab-gpu": runs.CORE, "kaggle-tpu": runs.CORE}


def test_the_grades_csv_is_read_as_scores_or_the_graders_status(tmp_path):
    path = tmp_path / "grades.csv"
    path.write_text(
        "learner,submission,total,maximum,status\nx,solution-01.ipynb,4,4,graded\n"
        "y,blank-01.ipynb,,,grader error: prepare: FileNotFoundError: x\n"
    )
    assert execute.scores(path) == {
        "solution-01.ipynb": "4/4",
        "blank-01.ipynb": "grader error: prepare: FileNotFoundError: x",
    }
