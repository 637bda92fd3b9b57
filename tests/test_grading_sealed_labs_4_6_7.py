"""Sealed verdicts of labs 4, 6 and 7: a check's dataset and Beam objects.

In-process: the kernel's side (`tools/grading/kernel/inside/`, started as the grader
starts it, on a real socket) answers the judge's side (`remote_datasets.py`,
`remote_beam.py`). End to end: one grading run (bwrap) of each lab's
solution and of a blank lab 4 and 6 that rewrites its kernel's replies and fakes
`utils.checks` (lab 6 only where Beam is installed).
"""

import copy
import shutil
import tempfile
from pathlib import Path

import keras
import nbformat
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from tests.test_grade import KERNEL_FORGER, grade_with_fixed_limits, needs_bwrap
from tests.test_grading_sealed_labs_2_9 import fresh_kernel_side
from tools.building.lesson_parameters import missing_modules
from tools.building.variants import split_variants
from tools.grading.judge import judge, judge_plan, remote
from tools.grading.kernel import cells
from tools.grading.kernel.inside import answers
from tools.grading.model import KEY, marks
from tools.grading.submission import prepare

LAB4, LAB6, LAB7 = "04_train_keras", "06_convert_with_beam", "07_scale_out_reading"
LESSONS = [LAB4, LAB7] + ([] if missing_modules(LAB6) else [LAB6])


def _variants(lesson):
    return split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")


@pytest.fixture
def kernel():
    """A kernel's namespace with the grader's start cell run; `keep(todo, name, value)`, and a
    judge's client on its socket."""
    folder = Path(tempfile.mkdtemp(prefix="k"))  # A socket's path is short: not tmp_path.
    namespace = {}
    fresh_kernel_side()
    exec(cells.start_code(folder / cells.SOCKET_NAME, 60.0), namespace)
    client = remote.Client(str(folder / cells.SOCKET_NAME), 60.0)

    def keep(todo, name, value):
        answers.kept.update({f"{todo}:{name}": value, f"{todo}:": True})
        return remote.fetch(client, todo, name, {})

    yield namespace, keep
    client.done()
    shutil.rmtree(folder)


def test_a_function_of_the_checks_dataset_runs_in_the_judge_on_its_own_dataset(kernel):
    namespace, keep = kernel
    seen_in_kernel = []

    def through(dataset, factor, policy, done):
        seen_in_kernel.append((dataset.element_spec, policy))
        return dataset.map(lambda x: x * factor).batch(2) if done else ...

    function = keep(3, "through", through)
    judges = tf.data.Dataset.range(5)
    off = tf.data.experimental.service.ShardingPolicy.OFF
    result = function(judges, 10, off, True)
    assert [batch.tolist() for batch in result.as_numpy_iterator()] == [[0, 10], [20, 30], [40]]
    spec, policy = seen_in_kernel[0]  # A placeholder, never an element.
    assert spec == tf.TensorSpec([], tf.int64) and policy is off
    assert function(judges, 10, off, False) is Ellipsis  # A stub's `...` comes back as `...`.


REPLICAS_LINE = "num_replicas = len(keras.distribution.list_devices())  # A replica on each device."


def _then_references(todo, lines):
    return (
        f"try:\n    {lines}\nfinally:  # Grader: the judge's values.\n"
        f"    globals().update(_grader_answers.references.pop({todo}, {{}}))"
    )


def test_the_kernel_runs_a_check_cells_other_lines_then_takes_the_judges_values():
    lab, _ = _variants(LAB4)
    kept = {
        marks(c)["check"]: prepare.kernel_source(c, marks(c))
        for c in lab.cells
        if "check" in marks(c)
    }
    assert kept == {
        1: _then_references(1, REPLICAS_LINE),
        2: _then_references(2, "train_dataset = make_training_dataset(train_paths)"),
    }
    # TODO 1 left undone: the cell's line counts Keras's devices, not the TODO's `...`
    # (so the cells below run in the notebook too); the judge's values replace it.
    fresh_kernel_side()
    answers.references[1] = {"num_replicas": 1}
    namespace = {"devices": ..., "_grader_answers": answers, "keras": keras}
    exec(kept[1], namespace)
    assert namespace["num_replicas"] == 1 and answers.references == {}


def test_the_judge_runs_a_check_cells_other_lines_after_its_check():
    lab, solution = _variants(LAB4)
    steps = [
        (s["kind"], s.get("todo"), s["source"].splitlines()[-1] if s.get("source") else "")
        for s in judge_plan.plan(lab, "")
    ]
    after = steps[steps.index(("check", 1, "checks.check_distribution(devices, todo=1)")) + 1]
    assert after == ("code", 1, REPLICAS_LINE)
    (step,) = [s for s in judge_plan.plan(lab, "") if s.get("reference")]  # TODO 1's, needed.
    assert step["binds"] == ["num_replicas"]
    assert step["reference"] == next(c.source for c in solution.cells if marks(c).get("todo") == 1)
    assert "keras.distribution.set_distribution(" in step["reference"]
    # No check reads what check 2 binds after it: the judge does not run it.
    assert not [s for s in steps if "make_training_dataset(train_paths)" in s[2]]


def _cell(source, **course_marks):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata[KEY] = course_marks
    return cell


CHECKS_OF_THE_LAB = """import types
from utils import checks


def check_scale(scale, todo):
    if scale(2) != (32, 0.2):
        found = scale(2)
        raise checks.CheckFailed(f"TODO {todo} (scale): at 2, expected (32, 0.2); found {found}.")
    print(f"TODO {todo} passed: scaled")


def check_total(todo, total):
    print(f"TODO {todo} passed: a total of {total}")


mine = types.SimpleNamespace(check_scale=check_scale, check_total=check_total)"""


def _judged(scale, references):
    """The verdicts of a lab of lab 4's shape, check 1's other line binding what TODO 3
    takes, TODO 1 kept as `scale`; and what the judge sent to the kernel."""
    lab = nbformat.v4.new_notebook(
        cells=[
            _cell(CHECKS_OF_THE_LAB),
            _cell("def scale(n):\n    ...", todo=1),
            _cell("mine.check_scale(scale, todo=1)\nbatch, rate = scale(1)", check=1),
            _cell("total = batch * 2"),
            _cell("def double(x):\n    ...", todo=3),
            _cell("mine.check_total(3, total)", check=3),
        ]
    )
    folder = Path(tempfile.mkdtemp(prefix="k"))  # A socket's path is short: not tmp_path.
    fresh_kernel_side()
    exec(cells.start_code(folder / cells.SOCKET_NAME, 60.0), {})
    answers.kept.update({"1:scale": scale, "1:": True, "3:": True})
    verdicts = []
    job = {
        "socket": str(folder / cells.SOCKET_NAME),
        "seconds": 60.0,
        "plan": judge_plan.plan(lab, "", references),
    }
    try:
        judge.judge(job, lambda *verdict: verdicts.append(verdict))
    finally:
        shutil.rmtree(folder)
    return verdicts, dict(answers.references)


SOLUTION = "def scale(n):\n    return 16 * n, min(0.1 * n, 0.2)"


def test_a_wrong_todo_1_costs_todo_1_only():
    """TODO 1 wrong at 2 replicas, right at 1: the lab's line takes its values, in the
    kernel and in the judge (no solution here), and TODO 3 passes."""
    verdicts, sent = _judged(lambda n: (16, 0.1), {})
    assert verdicts == [
        (1, False, "TODO 1 (scale): at 2, expected (32, 0.2); found (16, 0.1)."),
        (3, True, "TODO 3 passed: a total of 32"),
    ]
    assert sent == {}


def test_a_todo_1_left_undone_costs_todo_1_only():
    """TODO 1 returns `...`: the judge runs the lab's line on the solution's TODO 1 and
    sends the kernel its values; TODO 3 is graded on them."""
    verdicts, sent = _judged(lambda n: (..., ...), {1: SOLUTION})
    assert verdicts == [
        (1, False, "TODO 1 (scale): at 2, expected (32, 0.2); found (Ellipsis, Ellipsis)."),
        (3, True, "TODO 3 passed: a total of 32"),
    ]
    assert sent == {1: {"batch": 16, "rate": 0.1}}
    verdicts, _ = _judged(lambda n: (..., ...), {})
    assert verdicts[1] == (3, False, "NameError: name 'total' is not defined")  # Without.


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Each lab's solution, a forging blank of labs 4 and 6, lab 4's solution with TODO 1 left
    undone. Lab 7's forging blank is left out: its cells start host and service processes
    (about 45 s of CPU a submission here), and a forging blank earns nothing the same way
    in the other labs graded here and in tests/test_grade.py (1-6, 9)."""
    folder = tmp_path_factory.mktemp("submissions")
    for lesson in LESSONS:
        lab, solution = _variants(lesson)
        nbformat.write(solution, folder / f"sol_{lesson[:2]}.ipynb")
        if lesson == LAB7:
            continue
        forger = copy.deepcopy(lab)  # A blank lab that rewrites its kernel's replies.
        first_todo = next(i for i, c in enumerate(lab.cells) if "todo" in marks(c))
        forger.cells.insert(first_todo, nbformat.v4.new_code_cell(KERNEL_FORGER))
        nbformat.write(forger, folder / f"forger_{lesson[:2]}.ipynb")
    lab, solution = _variants(LAB4)  # Lab 4's solution with TODO 1 left undone.
    stub = next(c.source for c in lab.cells if marks(c).get("todo") == 1)
    for cell in solution.cells:
        cell.source = stub if marks(cell).get("todo") == 1 else cell.source
    nbformat.write(solution, folder / "undone1_04.ipynb")
    return grade_with_fixed_limits(folder, tmp_path_factory.mktemp("grades"))


@needs_bwrap
def test_solutions_score_full_marks_and_forging_blanks_zero(graded):
    status, rows, _ = graded
    assert status == 0
    found = {name: (row["status"], row["total"], row["maximum"]) for name, row in rows.items()}
    expected = {
        "sol_04.ipynb": ("graded", "2", "2"),
        "forger_04.ipynb": ("graded", "0", "2"),
        "undone1_04.ipynb": ("graded", "1", "2"),  # TODO 2 on the solution's TODO 1.
        "sol_06.ipynb": ("graded", "2", "2"),
        "forger_06.ipynb": ("graded", "0", "2"),
        "sol_07.ipynb": ("graded", "3", "3"),
    }
    graded_labs = {lesson[:2] for lesson in LESSONS}
    assert found == {name: row for name, row in expected.items() if name[-8:-6] in graded_labs}


@needs_bwrap
def test_the_judges_messages_for_a_forging_blank(graded):
    report = graded[2]
    not_done = (
        "TODO 1 (devices): not done yet: devices is still ... (Ellipsis). Expected the names "
        "of the 2 device(s) Keras trains on here, \\['cpu:0', 'cpu:1'\\]."  # Brackets escaped.
    )
    assert f"- forger_04.ipynb, TODO 1: {not_done}\n" in report
    if LAB6 in LESSONS:
        assert (
            "- forger_06.ipynb, TODO 2: TODO 2 (build_conversion): not done yet: the pipeline "
            "wrote no shards. Expected 2, named flowers-0000N-of-00002.tfrec.\n"
        ) in report
    assert "printed by the learner" not in report and "fake" not in report
    undone = [line for line in report.splitlines() if line.startswith("- undone1_04.ipynb, ")]
    assert undone == [f"- undone1_04.ipynb, TODO 1: {not_done}"]


class _Converter:  # A learner's DoFn, as lab 6 writes it (made a beam.DoFn below).
    def process(self, path):
        content = open(path, "rb").read()
        if content:
            yield content
        else:
            import apache_beam as beam

            yield beam.pvalue.TaggedOutput("skipped", f'{{"path": "{path}"}}')


class _Returner:  # Returns its record instead of yielding it.
    def process(self, path):
        return open(path, "rb").read()


def test_a_dofns_process_runs_in_the_kernel_on_the_judges_file(kernel, tmp_path):
    beam = pytest.importorskip("apache_beam")
    _, keep = kernel
    photo, empty = tmp_path / "roses" / "photo.jpg", tmp_path / "roses" / "empty.jpg"
    photo.parent.mkdir()
    photo.write_bytes(b"\xff\xd8 bytes")
    empty.write_bytes(b"")
    converter = keep(1, "ConvertImage", type("ConvertImage", (_Converter, beam.DoFn), {}))
    assert converter.__name__ == "ConvertImage" and not issubclass(converter, beam.DoFn)
    assert list(converter().process(str(photo))) == [b"\xff\xd8 bytes"]
    (skipped,) = converter().process(str(empty))
    assert isinstance(skipped, beam.pvalue.TaggedOutput) and skipped.tag == "skipped"
    assert skipped.value == f'{{"path": "{empty}"}}'
    returner = keep(2, "Returner", type("Returner", (_Returner, beam.DoFn), {}))
    assert returner().process(str(photo)) == b"\xff\xd8 bytes"  # The check says: use yield.
