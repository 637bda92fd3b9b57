"""Sealed verdicts of labs 2 and 9: a call fed by the judge, a folder copied back, Grain
rebuilt.

In-process tests run the kernel's side (`tools/grading/kernel/inside/`) and the
judge's side in one process; one grading run (bwrap where it works) grades hostile
submissions of both labs end to end (lab 2's solution scores 2/2 in tests/test_grade.py).
"""

import functools
import inspect
import json

import nbformat
import numpy as np
import pytest
import tensorflow as tf

from tests.test_checks_write_tfrecords import _renamed_inside_the_with_block, _write_to_final_name
from tests.test_grade import (
    KERNEL_FORGER,
    _cell_index,
    _notebook,
    _set_todo,
    _with_todo,
    grade_with_fixed_limits,
)
from tools.building.lesson_parameters import missing_modules
from tools.grading.judge import graphs, remote, remote_calls
from tools.grading.kernel.inside import answers, calls, wire
from tools.grading.kernel.inside.grain import chain
from utils import checks

LAB2, LAB9 = "02_write_tfrecords", "09_grain_arrayrecord"
needs_grain = pytest.mark.skipif(bool(missing_modules(LAB9)), reason="Grain is not installed")
# Reads every record before it writes: no file exists while the records come.
_unsafe = _write_to_final_name
UNSAFE = inspect.getsource(_unsafe).replace(_unsafe.__name__, "write_shard")
PATCHED_CHECKS = """write_shard = ...
import utils.checks.write_tfrecords as _module
for _name in dir(_module):
    if _name.startswith("check_"):
        setattr(_module, _name, lambda *args, todo=0, **kwargs: print(f"TODO {todo} passed: x"))
checks = types.SimpleNamespace(**{n: getattr(_module, n) for n in dir(_module)})
"""


def fresh_kernel_side():
    """Empties the kernel side's state, as a new kernel starts with."""
    for state in (answers.kept, answers.judged, answers.finished, answers.references):
        state.clear()


class _Kernel:
    """The kernel's side, a fresh one, answering in this process: its questions and answers
    go through JSON as over the socket."""

    def __init__(self, work):
        self.namespace: dict = {}
        fresh_kernel_side()
        self.address, self.seconds = str(work / "j.sock"), 30

    def keep(self, todo, **values):
        for name, value in values.items():
            answers.kept[f"{todo}:{name}"] = value

    def ask(self, **request):
        reply = answers.answer(json.loads(wire.dumps(request)), {})
        return json.loads(json.dumps(reply))


def _failure(check, function):
    with pytest.raises(checks.CheckFailed) as failure:
        check(function, todo=2)
    return str(failure.value)


def test_a_fed_call_fails_write_shard_as_the_lab_does(tmp_path):
    """The judge's iterator feeds the kernel's function; the judge reads its folder's copy."""
    kernel = _Kernel(tmp_path)
    kernel.keep(2, write_shard=_unsafe)
    judged = remote.RemoteFunction(kernel, 2, "write_shard", {})
    in_the_judge = _failure(checks.check_write_shard, judged)
    assert in_the_judge == _failure(checks.check_write_shard, _unsafe)
    assert "no file existed while they came" in in_the_judge
    written = [path.name for path in (tmp_path / "_grader_folders").glob("*/*")]
    assert written == ["flowers03-5.tfrec"]  # Written twice in the kernel; the third: nothing.


def test_a_rename_inside_the_writers_with_block_fails_in_the_judge_as_in_the_lab(tmp_path):
    """The kernel notes each rename's size and sends it as data: the judge's check fails the
    shard renamed while its writer was open, as the notebook's does (issue 61)."""
    kernel = _Kernel(tmp_path)
    renamed_open = _renamed_inside_the_with_block("gfile")
    kernel.keep(2, write_shard=renamed_open)
    judged = remote.RemoteFunction(kernel, 2, "write_shard", {})
    in_the_judge = _failure(checks.check_write_shard, judged)
    assert in_the_judge == _failure(checks.check_write_shard, renamed_open)
    assert "renamed with 0 of its" in in_the_judge
    reported = []
    restore = calls.watch_renames(reported)
    try:
        (tmp_path / "a").write_bytes(b"123")
        tf.io.gfile.rename(str(tmp_path / "a"), str(tmp_path / "b"))
    finally:
        restore()
    assert reported == [["a", 3]]


def test_a_todo_answered_by_the_courses_own_copy_fails_in_the_judge(tmp_path):
    """Lab 2's TODOs answered by calling records.to_example or shard_files.write_shard: the
    kernel refuses the copy while it runs the TODO's function, and the judge's check says
    so, as the notebook's does (issue 61)."""
    from utils import records, shard_files
    from utils.lab import data

    def to_example(*args):
        return records.to_example(*args)

    def write_shard(serialized_examples, output_dir, index):
        return shard_files.write_shard(serialized_examples, output_dir, index)

    kernel = _Kernel(tmp_path)
    kernel.keep(1, to_example=to_example)
    kernel.keep(2, write_shard=write_shard)
    judged_example = remote.RemoteFunction(kernel, 1, "to_example", {})
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_to_example(judged_example, todo=1, class_names=data.CLASSES)
    assert "found a call to records.to_example, the course's solved copy" in str(failure.value)
    judged_shard = remote.RemoteFunction(kernel, 2, "write_shard", {})
    assert "found a call to shard_files.write_shard" in _failure(
        checks.check_write_shard, judged_shard
    )
    kernel_only = calls.call_refusing_copy
    with pytest.raises(NotImplementedError, match="course copy"):  # The kernel's own refusal.
        kernel_only("to_example", to_example, [b"x", 0, [1, 1], ["a"]])
    assert records.to_example(b"x", 0, [1, 1], ["a"]).features.feature["class"]  # Restored.


def test_the_judge_copies_names_of_links_never_what_they_point_to(tmp_path):
    work, judges = tmp_path / "work", tmp_path / "judge"
    (work / "f").mkdir(parents=True)
    judges.mkdir()
    (tmp_path / "secret").write_text("not the learner's")
    (work / "f" / "link").symlink_to(tmp_path / "secret")
    (work / "f" / "shard").write_bytes(b"records")
    (judges / "old").write_text("gone")
    remote_calls._mirror({str(judges): str(work / "f")}, work)
    found = {p.name: p.read_bytes() for p in judges.iterdir()}
    assert found == {"link": b"", "shard": b"records"}


def test_a_kernel_that_asks_on_after_the_last_record_is_refused(tmp_path):
    class Greedy:  # A forged kernel: it wants records for ever.
        address, seconds = str(tmp_path / "j.sock"), 1

        def ask(self, **request):
            return {"state": "wants"}

    with pytest.raises(graphs.NotSealable, match="asked for records after the last one"):
        remote_calls.call_fed(Greedy(), 2, "write_shard", (iter([b"a", b"b"]),), {})


def test_only_built_in_errors_are_raised_in_the_judge():
    assert type(remote_calls.error_of("TypeError", "bad")) is TypeError
    for name in ("KeyboardInterrupt", "SystemExit", "CheckFailed", "__import__"):
        assert isinstance(remote_calls.error_of(name, "x"), graphs.NotSealable), name


def test_constants_beside_tensors_are_traced_as_tf_function_does(tmp_path):
    kernel = _Kernel(tmp_path)
    kernel.keep(1, resize=lambda image, size: tf.image.resize(image, [size, size]))
    judged = remote.RemoteFunction(kernel, 1, "resize", {})
    found = judged(tf.zeros([5, 7, 3]), 4)
    assert isinstance(found, tf.Tensor) and found.shape == (4, 4, 3)


@needs_grain
def test_a_grain_loader_crosses_as_its_steps_and_is_made_again(tmp_path):
    import grain

    from tools.grading.judge import remote_grain

    kernel = _Kernel(tmp_path)
    source = [b"r%d" % i for i in range(8)]

    def parse(record):
        return record

    loader = grain.MapDataset.source(source).shuffle(seed=3).repeat(2).map(parse)
    loader = loader.to_iter_dataset().batch(2, drop_remainder=True)
    kernel.namespace.update(data_source=source, parse=parse)
    steps = chain(loader, kernel.namespace)
    assert steps == [
        ["batch", 2, True],
        ["to_iter_dataset", 16, 500],
        ["map", "parse"],
        ["repeat", 2, True],
        ["shuffle", 3],
        ["source", "data_source"],
    ]
    rebuilt = remote_grain.rebuild(steps, {"data_source": list(source), "parse": parse})
    assert [b.tolist() for b in rebuilt] == [b.tolist() for b in loader]
    with pytest.raises(graphs.NotSealable, match="maps Python code of its own"):
        remote_grain.rebuild(
            steps, {"data_source": source, "parse": remote.RemoteFunction(kernel, 2, "parse", {})}
        )


def _record_and_length(record):
    return np.frombuffer(record, np.uint8), np.float32(record[0])


@needs_grain
def test_a_resume_is_checked_on_the_judges_own_loader(tmp_path):
    """Lab 9's TODO 3 as the judge checks it: the kernel's state crosses as data and is
    restored into the loader the judge made again; an empty state restores nothing. (The
    state of worker processes is a dict of lists and dicts of ints too.)"""
    import grain

    from tools.grading.judge import remote_grain
    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    grain_arrayrecord.use_flag_defaults()
    kernel, source = _Kernel(tmp_path), [bytes([i] * 4) for i in range(16)]
    loader = grain.MapDataset.source(source).shuffle(seed=3).repeat(2).map(_record_and_length)
    loader = loader.to_iter_dataset().batch(2, drop_remainder=True)  # No worker: quick.
    iterator, resumed = iter(loader), iter(loader)
    try:
        first_batch, _ = next(iterator), next(iterator)
        state = iterator.get_state()
        next_batch = next(iterator)
        resumed.set_state(state)
        resumed_batch = next(resumed)
        kernel.keep(3, state=state, next_batch=next_batch, resumed_batch=resumed_batch)
        kernel.keep(3, further_batch=next(resumed))  # Issue 61: the batch after it too.
        never_restored = iter(loader)
        copied_beside_it = next(never_restored)
    finally:
        iterator.close()
        resumed.close()
    kernel.namespace.update(data_source=source, parse=_record_and_length)
    steps = chain(loader, kernel.namespace)
    judges = {"data_source": list(source), "parse": _record_and_length}
    names = ("state", "next_batch", "resumed_batch", "further_batch")
    fetched = {name: remote.fetch(kernel, 3, name, {}) for name in names}
    check = functools.partial(
        checks.check_resumed,
        todo=3,
        first_batch=first_batch,
        loader=remote_grain.rebuild(steps, judges),
    )
    check(
        fetched["resumed_batch"],
        state=fetched["state"],
        next_batch=fetched["next_batch"],
        further_batch=fetched["further_batch"],
    )
    kernel.keep(3, further_batch=copied_beside_it)  # A copy beside an iterator never restored.
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(resumed\): .* was not restored"):
        check(
            tuple(part.copy() for part in fetched["next_batch"]),
            state=fetched["state"],
            next_batch=fetched["next_batch"],
            further_batch=remote.fetch(kernel, 3, "further_batch", {}),
        )
    kernel.keep(3, state={})
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(state\): .* found an empty dict"):
        check(
            fetched["next_batch"],
            state=remote.fetch(kernel, 3, "state", {}),
            next_batch=fetched["next_batch"],
        )


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Lab 2's unsafe and patched answers; lab 9's solution, blank, and a resume that returns
    `next_batch` itself (an empty state and a batch of zeros are judged in-process above and
    in tests/test_checks_grain_arrayrecord.py), graded with fixed limits."""
    folder = tmp_path_factory.mktemp("submissions")
    lab2, solution2 = _notebook("labs", LAB2), _notebook("solutions", LAB2)
    forged = {}
    unsafe = _set_todo(solution2, 2, UNSAFE)
    forged["x-2-unsafe.ipynb"] = unsafe
    forged["x-2-patched.ipynb"] = _set_todo(lab2, 2, "import types\n" + PATCHED_CHECKS)
    if not missing_modules(LAB9):
        forged["x-9-solution.ipynb"] = _notebook("solutions", LAB9)
        forged["x-9-blank.ipynb"] = _notebook("labs", LAB9)
        unrestored = _with_todo(
            _notebook("solutions", LAB9),
            3,
            lambda source: source.replace(
                "resumed_batch = next(resumed)", "resumed_batch = next_batch"
            ),
        )
        todo3 = unrestored.cells[_cell_index(unrestored, todo=3)].source
        assert "resumed_batch = next_batch" in todo3
        forged["x-9-unrestored.ipynb"] = unrestored
    for name, notebook in forged.items():  # Each rewrites its kernel's replies, hooks, modules.
        cell = nbformat.v4.new_code_cell(KERNEL_FORGER)
        notebook.cells.insert(_cell_index(notebook, todo=1), cell)
        nbformat.write(notebook, folder / name)
    status, rows, report = grade_with_fixed_limits(folder, tmp_path_factory.mktemp("grades"))
    assert status == 0
    return rows, report


def test_labs_2_and_9_score_what_their_answers_earn(graded):
    rows, report = graded
    # grades.csv has a column per TODO of the labs graded: lab 2 has 2, lab 9 has 3.
    found = {name: [row.get(f"TODO {n}", "") for n in range(1, 4)] for name, row in rows.items()}
    expected = {
        "x-2-unsafe.ipynb": ["1", "0", ""],
        "x-2-patched.ipynb": ["0", "0", ""],
    }
    if not missing_modules(LAB9):
        expected |= {
            "x-9-solution.ipynb": ["1", "1", "1"],
            "x-9-blank.ipynb": ["0"] * 3,
            "x-9-unrestored.ipynb": ["1", "1", "0"],
        }
        assert (  # One object in the kernel is one in the judge: its check sees it.
            "- x-9-unrestored.ipynb, TODO 3: TODO 3 (resumed_batch): expected the first batch of "
            "`resumed`, a fresh iterator after resumed.set_state(state); found next_batch itself"
            in report
        )
    assert found == expected
    assert (
        "- x-2-unsafe.ipynb, TODO 2: TODO 2 (write_shard): expected the records to go into a "
        "file as they come (a shard can be larger than memory); no file existed while they "
        "came." in report
    )
    assert (  # Its check, patched in its kernel, printed "passed"; the judge's did not.
        "- x-2-patched.ipynb, TODO 2: TODO 2 (write_shard): expected the path of the shard "
        "written; found an error: 'ellipsis' object is not callable." in report
    )
