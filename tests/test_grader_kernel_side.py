"""Tests of the grader's kernel side (tools/grading/kernel/inside/ and kernel/cells.py),
imported and run in this process: no kernel, no sandbox, no judge process."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tools.grading.judge import remote
from tools.grading.kernel import cells
from tools.grading.kernel.inside import answers, beam, calls, describe, grain, traced, wire


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """A new kernel's state for each test: nothing kept, judged or sent yet."""
    for name, empty in (("kept", {}), ("judged", set()), ("finished", []), ("references", {})):
        monkeypatch.setattr(answers, name, empty)


def ask(**request):
    """One question, through JSON as over the socket."""
    return answers.answer(wire.loads(wire.dumps(request)), {})


def test_the_kernel_side_is_one_folder_of_modules():
    assert cells.KERNEL_SIDE == Path(answers.__file__).parent
    assert sorted(path.name for path in cells.KERNEL_SIDE.glob("*.py")) == [
        "__init__.py",
        "answers.py",
        "beam.py",
        "calls.py",
        "describe.py",
        "grain.py",
        "objects.py",
        "server.py",
        "traced.py",
        "wire.py",
    ]


def test_keep_keeps_each_name_and_a_missing_one_as_missing():
    answers.judged.add(1)  # Judged already: keep does not wait.
    answers.keep(1, ["x", "y"], {"x": 3})
    assert answers.kept == {"1:x": 3, "1:y": describe.MISSING, "1:": True}
    assert ask(op="describe", todo=1, name="x") == {"kind": "value", "value": {"v": 3}}
    assert ask(op="describe", todo=1, name="y") == {"kind": "missing"}


def test_a_question_about_a_todo_not_kept_waits_until_the_end_then_finds_it_missing():
    answers.finish()
    assert ask(op="describe", todo=4, name="x") == {"kind": "missing"}


def test_judged_takes_the_solutions_values_and_the_check_cell_binds_them():
    sent = {"num_replicas": wire.encode(1)}
    assert ask(op="judged", todo=2, references=sent) is True
    assert answers.judged == {2} and answers.references == {2: {"num_replicas": 1}}
    namespace = {"_grader_answers": answers}
    exec(cells.references_code(2), namespace)
    assert namespace["num_replicas"] == 1 and answers.references == {}


def test_each_kind_of_value_is_described():
    namespace = {}
    assert describe.describe(len, namespace) == {"kind": "function"}
    assert describe.describe([b"a", 2], namespace) == {
        "kind": "value",
        "value": {"list": [{"bytes": "YQ=="}, {"v": 2}]},
    }
    dofn = type("DoFn", (), {})
    assert describe.describe(type("Mine", (dofn,), {}), namespace) == {"kind": "dofn"}
    dataset = describe.describe(tf.data.Dataset.range(3), namespace)
    assert (dataset["kind"], dataset["roles"]) == ("dataset", {})
    assert dataset["spec"] == {"spec": [[], "int64"]}
    with pytest.raises(wire.WireError, match="a object does not cross"):
        describe.describe(object(), namespace)


def test_two_names_of_one_todo_that_share_an_array_are_one():
    batch = np.arange(4)
    answers.kept.update({"3:next_batch": batch, "3:resumed_batch": batch[:2], "3:other": ...})
    assert answers.same_as(answers.kept, {"todo": 3, "name": "resumed_batch"}, batch[:2]) == (
        "next_batch"
    )
    assert answers.same_as(answers.kept, {"todo": 3, "name": "other"}, ...) is None


def test_a_call_of_the_courses_solved_copy_is_refused_and_the_copy_restored():
    from utils import records

    def to_example(*args):
        return records.to_example(*args)

    answers.kept.update({"1:to_example": to_example, "1:": True})
    args = [wire.encode(value) for value in (b"x", 0, [1, 1], ["a"])]
    assert ask(op="call", todo=1, name="to_example", args=args) == {
        "kind": "raised",
        "error": ["NotImplementedError", "course copy"],
    }
    assert records.to_example(b"x", 0, [1, 1], ["a"]).features.feature["class"]


def test_a_fed_call_asks_for_each_item_then_returns():
    answers.kept.update({"2:total": sum, "2:": True})
    request = {"op": "start", "todo": 2, "name": "total", "seconds": 10}
    assert ask(**request, args=[{"fed": True}]) == {"state": "wants"}
    for item in (3, 4):
        reply = ask(op="feed", todo=2, name="total", seconds=10, feed={"item": wire.encode(item)})
        assert reply == {"state": "wants"}
    reply = ask(op="feed", todo=2, name="total", seconds=10, feed={"end": True})
    assert reply == {"state": "returned", "value": {"v": 7}, "renamed": []}
    assert calls.error_of(ValueError("bad\nmore")) == ["ValueError", "bad"]


def test_a_function_is_traced_for_the_judges_specs_and_a_stub_stays_a_stub():
    answers.kept.update({"1:double": lambda x: (x * 2, ...), "1:": True})
    spec = wire.encode(tf.TensorSpec([None], tf.float32))
    found = ask(op="trace", todo=1, name="double", specs=[spec])
    assert found["captures"] == [] and found["roles"] == {}
    assert list(found["structure"]) == ["tuple"]
    assert found["structure"]["tuple"][1] == {"const": {"ellipsis": True}}


def test_a_traced_function_that_uses_a_variable_is_refused():
    variable = tf.Variable(1.0)
    concrete = tf.function(lambda x: x * variable).get_concrete_function(tf.TensorSpec([]))
    with pytest.raises(TypeError, match="a variable, a table or a dataset made outside it"):
        traced.captures(concrete, 1)


def test_only_grain_datasets_are_described_as_grain():
    assert grain.describe_grain([1, 2], {}) is None
    assert grain.name_of(len, {"_hidden": len, "size": len}) == "size"


def test_the_judges_files_are_written_only_in_temporary_folders():
    with pytest.raises(ValueError, match="not a temporary one: /etc/passwd"):
        beam._write_files({"/etc/passwd": ""})


def test_the_grader_cells_start_the_server_keep_and_finish_in_a_namespace():
    folder = Path(tempfile.mkdtemp(prefix="k"))  # A socket's path is short: not tmp_path.
    namespace = {"shards": 16}
    try:
        exec(cells.start_code(folder / cells.SOCKET_NAME, 30.0), namespace)
        assert namespace["_grader_answers"] is answers
        client = remote.Client(str(folder / cells.SOCKET_NAME), 30.0)
        answers.judged.add(1)
        exec(cells.keep_code(1, ["shards"]), namespace)
        assert client.ask(op="describe", todo=1, name="shards") == {
            "kind": "value",
            "value": {"v": 16},
        }
        exec(cells.FINISH_CODE, namespace)
        assert answers.finished == [True]
        client.done()
    finally:
        shutil.rmtree(folder)
