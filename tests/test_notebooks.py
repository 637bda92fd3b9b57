"""Notebook tests: solutions execute (papermill), outputs are stable (nbval), labs guide learners.

Each lesson runs with small parameters. A lab with every TODO filled from its solution
passes every check; a lab with one TODO left as its stub fails at that TODO's own check.
"""

import ast
import copy
import json
import re
import subprocess
import sys

import nbformat
import pytest

from tests import notebook_runs
from tests.conftest import REAL_HOME, REPO_ROOT
from tools import build_notebooks as build
from tools.building import variants as build_variants
from tools.building.lesson_parameters import (
    SMALL_PARAMETERS,
    install_command,
    missing_modules,
)
from tools.building.outputs import METADATA_KEY

ALL_LESSONS = [source.stem for source in build.lesson_sources(REPO_ROOT)]


def _skip_without_modules(lesson, *values):
    """A test parameter that is skipped, saying why, when an optional lesson's modules miss."""
    missing = missing_modules(lesson)
    reason = f"{lesson} needs {', '.join(missing)}: {install_command()}" if missing else ""
    return pytest.param(
        *(values or (lesson,)), marks=pytest.mark.skipif(bool(missing), reason=reason)
    )


LESSONS = [_skip_without_modules(lesson) for lesson in ALL_LESSONS]
KEY = METADATA_KEY
SANITIZE_FILE = REPO_ROOT / "tests" / "nbval_sanitize.cfg"
AUTOGRAPH_FILES = "__autograph_generated_file"


def _todos(lesson):
    lab = nbformat.read(REPO_ROOT / "labs" / f"{lesson}.ipynb", as_version=4)
    return [c.metadata[KEY]["todo"] for c in lab.cells if "todo" in c.metadata.get(KEY, {})]


TODO_CASES = [(lesson, todo) for lesson in ALL_LESSONS for todo in _todos(lesson)]
LAB_CASES = [_skip_without_modules(lesson, lesson, todo) for lesson, todo in TODO_CASES]


# Lesson 5's checks time the learner's feed (idle time per step): it runs alone.
TIMED_LESSONS = ("05_accelerator_waiting",)


def _job(notebook, path):
    """Writes `notebook` to `path`; returns its run with the lesson's small parameters.

    The kernel gets an empty folder of its own as TMPDIR, which must be empty at the end
    (`_result`): a lesson deletes what it made there (its outputs, and Beam's working folders).
    """
    nbformat.write(notebook, path)
    scratch = path.with_name(path.stem + ".tmpdir")
    scratch.mkdir()
    lesson = path.name.split(".")[0]
    return notebook_runs.Job(
        input=path,
        output=path.with_name(path.stem + ".executed.ipynb"),
        parameters=SMALL_PARAMETERS[lesson],
        cwd=REPO_ROOT / "labs",
        tmpdir=scratch,
        alone=lesson in TIMED_LESSONS,
    )


def _result(job, error):
    """(executed notebook, the error it stopped at or None) of a run of `_job`."""
    if error is None:
        # TensorFlow's autograph writes its converted functions there and removes them at
        # interpreter exit, which papermill's shutdown may not wait for (it kills a kernel
        # slow to exit): TensorFlow's, not the lesson's; tools.run_course removes them with
        # the kernels' own temporary folder (tests/test_run_course.py).
        left = sorted(
            p.name for p in job.tmpdir.iterdir() if not p.name.startswith(AUTOGRAPH_FILES)
        )
        assert left == [], f"{job.input.stem} left {left} in its TMPDIR"
    return nbformat.read(job.output, as_version=4), error


def _selected_lessons(request, fixture):
    """The lessons of this module's selected tests that use `fixture` (and can run here)."""
    lessons = set()
    for item in request.session.items:
        if getattr(item, "module", None) is request.module and fixture in item.fixturenames:
            params = item.callspec.params if hasattr(item, "callspec") else {}
            lessons |= {params[k] for k in ("lesson", "executed_solution") if k in params}
    return sorted(lesson for lesson in lessons if not missing_modules(lesson))


def _lab_with_todos_filled(lesson, keep_stub=()):
    """The generated lab with each TODO cell's stub replaced by the solution's code."""
    lab = nbformat.read(REPO_ROOT / "labs" / f"{lesson}.ipynb", as_version=4)
    solution = nbformat.read(REPO_ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    solution_sources = {cell.id: cell.source for cell in solution.cells}
    for cell in lab.cells:
        todo = cell.metadata.get(KEY, {}).get("todo")
        if todo is not None and todo not in keep_stub:
            cell.source = solution_sources[cell.id]
    return lab


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _check_outputs(notebook):
    return {
        cell.metadata[KEY]["check"]: _stdout(cell)
        for cell in notebook.cells
        if "check" in cell.metadata.get(KEY, {})
    }


def test_every_lesson_has_small_parameters():
    assert set(ALL_LESSONS) <= set(SMALL_PARAMETERS)


TRIAL = "TRIAL"  # What a trial cell prints first, then the TODO and what its check raised.


def _trial_code(todo, stub, check):
    """A cell that runs TODO `todo`'s stub, then its check; prints what each raised."""
    return (
        f"# Trial: TODO {todo} left as the lab's stub, then its check.\n"
        "import json as _json\n"
        "_trial = {}\n"
        "try:\n"
        f"    exec({stub!r}, globals())\n"
        "except Exception as _error:\n"
        "    _trial['stub'] = f'{type(_error).__name__}: {_error}'\n"
        "try:\n"
        f"    exec({check!r}, globals())\n"
        "except Exception as _error:\n"
        "    _trial.update(ename=type(_error).__name__, evalue=str(_error))\n"
        f"print({TRIAL!r}, {todo}, _json.dumps(_trial))\n"
    )


def _sources_by(notebook, mark):
    """{n: source} of the cells marked `mark` (`todo` or `check`) n."""
    cells = [c for c in notebook.cells if mark in c.metadata.get(KEY, {})]
    return {c.metadata[KEY][mark]: c.source for c in cells}


def _with_trials(lab, solution):
    """The solution with, before each TODO's cell, a trial of the lab's stub and its check.

    A trial runs where the lab with only that TODO left would reach it: every cell above
    is the solution's, and the lab's cells are the solution's but for the TODO stubs
    (`test_a_filled_lab_is_the_solution_code_for_code`). So one run checks that each
    TODO left alone fails at its own check, and the solution's own cells run after it.
    """
    stubs, checks = _sources_by(lab, "todo"), _sources_by(solution, "check")
    notebook = copy.deepcopy(solution)
    cells = []
    for cell in notebook.cells:
        todo = cell.metadata.get(KEY, {}).get("todo")
        if todo is not None:
            trial = nbformat.v4.new_code_cell(_trial_code(todo, stubs[todo], checks[todo]))
            trial.id, trial.metadata = f"trial-{todo}", {KEY: {"trial": todo}}
            cells.append(trial)
        cells.append(cell)
    notebook.cells = cells
    return notebook


def _trials(notebook):
    """{todo: what its trial's stub and check raised} from an executed notebook."""
    found = {}
    for cell in notebook.cells:
        if "trial" in cell.metadata.get(KEY, {}):
            line = _stdout(cell).strip().splitlines()[-1]
            name, todo, raised = line.split(" ", 2)
            assert name == TRIAL, line
            found[int(todo)] = json.loads(raised)
    return found


@pytest.fixture(scope="module")
def lesson_runs(request, tmp_path_factory):
    """`run(variant, lesson)`: (output path, `_result`) of the lesson's "solution" (built from
    the source, with its trials) or its "lab" as generated. At the first call, every run
    that this module's selected tests need is made in one `notebook_runs.execute_all` (two at
    a time, the solutions first), so that `-k` on one lesson runs that lesson alone."""

    def solution(lesson):
        lab, solution = build_variants.split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
        return _with_trials(lab, solution), "solutions"

    def lab(lesson):
        lab = nbformat.read(REPO_ROOT / "labs" / f"{lesson}.ipynb", as_version=4)
        return lab, f"lab{lesson[:2]}"

    notebooks = {"solution": solution, "lab": lab}  # The notebook, its folder's name.
    fixtures = {"solution": "solution_runs", "lab": "generated_lab_runs"}
    done = {}

    def run(variant, lesson):
        if f"{variant} {lesson}" not in done:
            wanted = [(variant, lesson)] + [
                (kind, name)
                for kind in notebooks
                for name in _selected_lessons(request, fixtures[kind])
            ]
            jobs = {}
            for kind, name in wanted:
                if f"{kind} {name}" not in {**done, **jobs}:
                    notebook, folder = notebooks[kind](name)
                    path = tmp_path_factory.mktemp(folder) / f"{name}.ipynb"
                    jobs[f"{kind} {name}"] = _job(notebook, path)
            for key, error in notebook_runs.execute_all(jobs).items():
                done[key] = jobs[key], error
        job, error = done[f"{variant} {lesson}"]
        return job.output, _result(job, error)

    return run


@pytest.fixture(scope="module")
def solution_runs(lesson_runs):
    """`run(lesson)`: (executed path, executed solution, trials), run once per lesson; cached.

    The solution is built from the source, so that this runs what the lead will commit
    (the sync test compares the committed files with the source). The executed copy
    written for nbval is the solution's alone: the trial cells are taken out of it.
    """
    runs = {}

    def run(lesson):
        if lesson not in runs:
            executed, (notebook, error) = lesson_runs("solution", lesson)
            assert error is None, f"{lesson} failed: {error}"
            trials = _trials(notebook)
            notebook.cells = [c for c in notebook.cells if "trial" not in c.metadata.get(KEY, {})]
            nbformat.write(notebook, executed)
            runs[lesson] = executed, notebook, trials
        return runs[lesson]

    return run


@pytest.fixture(scope="module", params=LESSONS)
def executed_solution(request, solution_runs):
    lesson = request.param
    executed, notebook, _ = solution_runs(lesson)
    return lesson, executed, notebook


def test_solution_executes_and_passes_every_check(executed_solution):
    lesson, _, notebook = executed_solution
    outputs = _check_outputs(notebook)
    todos = _todos(lesson)
    assert todos, f"labs/{lesson}.ipynb has no TODO cells"
    assert sorted(outputs) == todos
    passed = {todo: text[: len(f"TODO {todo} passed: ")] for todo, text in outputs.items()}
    assert passed == {todo: f"TODO {todo} passed: " for todo in todos}, outputs


def test_solution_summary_and_plots_are_produced(executed_solution):
    lesson, _, notebook = executed_solution
    from tools.run_course import summary_text

    summary = summary_text(notebook)
    # Lab 4 measures a model; the others, images/s.
    measured = "Validation accuracy" if lesson.startswith("04") else "images/s"
    assert measured in summary
    images = [
        o
        for c in notebook.cells
        for o in c.get("outputs", [])
        if {"image/png", "image/jpeg"} & set(o.get("data", {}))
    ]
    # Each lesson's figures: lab 1 the photos and its summary chart, lab 2 the resized
    # images and the quality plot, lab 3 its speed test, lab 4 its training history,
    # lesson 5 its timeline, 6 and 7 one chart each, 8 three, 9 two.
    figures = {"01": 2, "02": 2, "03": 1, "04": 1, "05": 1, "06": 1, "07": 1, "08": 3, "09": 2}
    assert len(images) == figures[lesson[:2]]


def _nbval(notebook_path):
    """Runs strict nbval (this environment's kernel, timings masked) over one notebook.

    Strict: every cell's outputs are compared, except in the cells the build tags
    `nbval-ignore-output` (those without `# NBVAL_CHECK_OUTPUT`).
    """
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        str(SANITIZE_FILE),
        "--nbval-cell-timeout",
        "300",
        str(notebook_path),
    ]
    return subprocess.run(command, cwd=notebook_path.parent, capture_output=True, text=True)


# nbval executes a notebook again: run it over lesson 1, which shows the build's tags and the
# sanitizer make strict nbval pass on a second run (and `test_nbval_fails_when_a_checked_output_
# changes` that it can fail). Every lesson's checked outputs are compared across two runs anyway
# (`test_committed_solution_checked_outputs_equal_a_fresh_run`: the committed run against this
# one), without a third execution of each lesson.
NBVAL_LESSONS = ["01_tf_data_basics"]


@pytest.mark.parametrize("executed_solution", NBVAL_LESSONS, indirect=True)
def test_nbval_over_executed_solution(executed_solution):
    _, executed_path, _ = executed_solution
    result = _nbval(executed_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("lesson", LESSONS)
def test_committed_solution_carries_outputs_of_a_full_run(lesson):
    solution = nbformat.read(REPO_ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    outputs = _check_outputs(solution)
    todos = _todos(lesson)
    assert todos, f"labs/{lesson}.ipynb has no TODO cells"
    assert sorted(outputs) == todos
    passed = {todo: text[: len(f"TODO {todo} passed: ")] for todo, text in outputs.items()}
    assert passed == {todo: f"TODO {todo} passed: " for todo in todos}, outputs
    errors = [o for c in solution.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []


@pytest.fixture(scope="module")
def generated_lab_runs(lesson_runs):
    """`run(lesson)`: the lab as generated (every TODO a stub), run once; cached."""
    return lambda lesson: lesson_runs("lab", lesson)[1]


def _up_to_check(notebook, todo):
    """The code cells' (id, source) up to and including TODO `todo`'s check cell."""
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    end = next(i for i, c in enumerate(cells) if c.metadata.get(KEY, {}).get("check") == todo)
    return [(c.id, c.source) for c in cells[: end + 1]]


@pytest.mark.parametrize("lesson", LESSONS)
def test_lab_as_generated_runs_up_to_todo_1_and_fails_there(lesson, generated_lab_runs):
    lab = nbformat.read(REPO_ROOT / "labs" / f"{lesson}.ipynb", as_version=4)
    # Up to TODO 1's check, the generated lab is the lab with only TODO 1 left.
    assert _up_to_check(lab, 1) == _up_to_check(_lab_with_todos_filled(lesson, {1}), 1)
    notebook, error = generated_lab_runs(lesson)
    assert error is not None and error.ename == "CheckFailed"
    assert error.evalue.startswith("TODO 1 (") and "not done yet" in error.evalue
    assert "todo=1" in error.source
    # What JupyterLab, Colab and nbconvert render: the message alone, no course frames.
    shown = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert [o.traceback for o in shown] == [[f"CheckFailed: {error.evalue}"]]


@pytest.mark.parametrize("lesson", ALL_LESSONS)
def test_a_filled_lab_is_the_solution_code_for_code(lesson):
    """The lab's code cells are the solution's, but for the TODO cells' stubs (and the
    lab's own hand-in cells, tests/test_hand_in.py).

    So the solution's run (above) is the run of a lab whose TODOs are all filled, and the
    one-TODO-left runs (below) cover each TODO's check inside the lab.
    """
    lab = _lab_with_todos_filled(lesson)
    solution = nbformat.read(REPO_ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    code = [
        (c.id, c.source)
        for c in lab.cells
        if c.cell_type == "code" and "hand_in" not in c.metadata.get("tags", [])
    ]
    assert code == [(c.id, c.source) for c in solution.cells if c.cell_type == "code"]
    stubs = _lab_with_todos_filled(lesson, keep_stub=set(_todos(lesson)))
    different = [c.id for c, s in zip(stubs.cells, lab.cells, strict=True) if c.source != s.source]
    assert len(different) == len(_todos(lesson)) > 0


@pytest.mark.parametrize(
    "lesson, todo", LAB_CASES, ids=[f"{name} TODO {n}" for name, n in TODO_CASES]
)
def test_lab_with_one_todo_left_fails_at_its_own_check(lesson, todo, solution_runs):
    """The trial of TODO `todo` (its stub, where the lab with only it left reaches it)."""
    _, notebook, trials = solution_runs(lesson)
    trial = trials[todo]
    assert "stub" not in trial, f"TODO {todo}'s stub cell raised {trial.get('stub')}"
    assert trial.get("ename") == "CheckFailed", trial
    assert trial["evalue"].startswith(f"TODO {todo} (")
    assert "not done yet" in trial["evalue"]
    check = next(c for c in notebook.cells if c.metadata.get(KEY, {}).get("check") == todo)
    assert f"todo={todo}" in check.source
    passed = _check_outputs(notebook)
    earlier = range(1, todo)  # Empty for TODO 1: no check runs before it.
    assert [passed[n].split(":")[0] for n in earlier] == [f"TODO {n} passed" for n in earlier]


@pytest.mark.parametrize("executed_solution", [ALL_LESSONS[0]], indirect=True)
def test_nbval_fails_when_a_checked_output_changes(executed_solution, tmp_path):
    _, executed_path, notebook = executed_solution
    notebook = copy.deepcopy(notebook)  # The fixture is shared with other tests.
    checks = [i for i, c in enumerate(notebook.cells) if c.metadata.get(KEY, {}).get("check") == 1]
    notebook.cells = notebook.cells[: checks[0] + 1]  # Run only up to TODO 1's check.
    notebook.cells[-1].outputs[0].text = "TODO 1 passed: 1 file in 1 class folder.\n"
    changed = tmp_path / executed_path.name
    nbformat.write(notebook, changed)
    result = _nbval(changed)
    assert result.returncode == 1
    assert re.search(r"^1 failed, \d+ passed", result.stdout.splitlines()[-1]), result.stdout


# The committed solutions ran with the full parameters, the suite's runs with the small
# ones. What their checked outputs (cells marked `# NBVAL_CHECK_OUTPUT`) say that depends on
# the parameters, as templates filled from a run's parameters (and from values a check
# derives from them). The committed output must show what its own parameters give; once
# each template is put back in both, the two outputs must be equal.
PARAMETER_DEPENDENT = {
    "01_tf_data_basics": ["{NUM_IMAGES} files", "at least {HALF_THE_PARALLEL_READS} in flight"],
    "02_write_tfrecords": [
        "{NUM_SHARDS} shards of",
        "Input images: {NUM_IMAGES} = {NUM_IMAGES} written",
    ],
    "03_read_tfrecords": ["all {NUM_IMAGES} records"],
    "04_train_keras": ["of ({IMAGE_SIZE}, {IMAGE_SIZE}, 3)"],
    "05_accelerator_waiting": [],  # Batches of BATCH_SIZE at TARGET_SIZE: the same in both.
    "06_convert_with_beam": [],
    "07_scale_out_reading": ["all {NUM_IMAGES} records", "in batches of {BATCH_PER_HOST}."],
    "08_where_the_time_goes": ["batches of {BATCH_SIZE} decoded images"],
    "09_grain_arrayrecord": ["{NUM_IMAGES} records", "batches of {BATCH_SIZE} images"],
}
DERIVED = {  # As the checks compute them.
    "HALF_THE_PARALLEL_READS": lambda p: max(2, p.get("NUM_PARALLEL_READS", 0) // 2),
    "BATCH_PER_HOST": lambda p: p.get("BATCH_SIZE", 0) // 2,  # check_dataset_fn's 2 hosts.
}
# Outputs that depend on the images drawn, not only on the parameters: masked in both.
DATA_DEPENDENT = [
    # Lab 2's shards: the records in each (fewest-most) and their megabytes.
    (r"shards of [\d,]+(-[\d,]+)? records, [\d.]+(-[\d.]+)? MB", "shards of N records, N MB"),
    (r"(?m)^(flowers\d+-\d+\.tfrec .*\n)+", lambda m: f"{m[0].count(chr(10))} shard rows\n"),
    (r"(?m)^(total \d+)( \d+)+$", r"\1 CLASS COUNTS"),
    (r"Average: [\d,]+ bytes", "Average: N bytes"),
]


def _parameters(notebook):
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    assignments = [s for s in ast.parse(cell.source).body if isinstance(s, ast.Assign)]
    return {s.targets[0].id: ast.literal_eval(s.value) for s in assignments}


def _comparable(text, lesson, parameters):
    """`text` with spacing evened out, the data masked, and each filled template put back."""
    text = re.sub(r"-{10,}", "-----", re.sub(r" {2,}", " ", text))
    for pattern, replacement in DATA_DEPENDENT:
        text = re.sub(pattern, replacement, text)
    values = {**parameters, **{name: f(parameters) for name, f in DERIVED.items()}}
    found = set()
    for template in PARAMETER_DEPENDENT[lesson]:
        filled = template.format(**values)
        if filled in text:
            found.add(template)
            text = text.replace(filled, template)
    return text, found


def _checked_outputs(notebook):
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    return [(c.source, _stdout(c)) for c in cells if build_variants.output_is_checked(c)]


def test_committed_solution_checked_outputs_equal_a_fresh_run(executed_solution):
    lesson, _, fresh = executed_solution
    committed = nbformat.read(REPO_ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    full = _parameters(committed)
    small = {**full, **SMALL_PARAMETERS[lesson]}
    committed_cells, fresh_cells = _checked_outputs(committed), _checked_outputs(fresh)
    assert [s for s, _ in committed_cells] == [s for s, _ in fresh_cells] != []
    found_committed, found_fresh = set(), set()
    for (source, committed_text), (_, fresh_text) in zip(committed_cells, fresh_cells, strict=True):
        expected, in_committed = _comparable(committed_text, lesson, full)
        actual, in_fresh = _comparable(fresh_text, lesson, small)
        assert actual == expected, f"{lesson}, the cell:\n{source}"
        found_committed |= in_committed
        found_fresh |= in_fresh
    # Each template matched both runs: the committed output shows its parameters' values.
    assert found_committed == found_fresh == set(PARAMETER_DEPENDENT[lesson])


@pytest.mark.parametrize("lesson", ALL_LESSONS)
def test_committed_outputs_name_no_folder_of_the_build_machine(lesson):
    """A learner reads the solution's outputs: the checkout's path or HOME means nothing there."""
    solution = nbformat.read(REPO_ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    machine = {str(REPO_ROOT), str(REAL_HOME)} - {"/"}  # HOME is the session's own.
    found = [
        (cell.id, folder)
        for cell in solution.cells
        for output in cell.get("outputs", [])
        for folder in machine
        if folder in str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
    ]
    assert found == []
