"""Tests of the sealed verdicts (tools/grading/judge/: start, graphs, judge; kernel/inside/wire).

In-process and small; tests/test_grade.py grades hostile submissions end to end.
"""

import hashlib
import hmac
import json

import nbformat
import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from tools.building.variants import split_variants
from tools.grading.judge import graphs, judge_output, judge_plan
from tools.grading.kernel.inside import wire
from tools.grading.model import KEY
from tools.grading.submission import flags
from utils import storage

LAB1 = "01_tf_data_basics"


@pytest.fixture(scope="module")
def lab1():
    return split_variants(REPO_ROOT / "notebooks" / f"{LAB1}.py")[0]


class TestWire:
    @pytest.mark.parametrize(
        "value",
        [
            None,
            True,
            3,
            2.5,
            "path",
            b"\x00bytes",
            ...,
            (1, [2, {"a": b"x"}]),
            tf.TensorSpec([None, 3], tf.uint8),
            tf.string,
        ],
        ids=lambda value: type(value).__name__,
    )
    def test_data_crosses_and_comes_back_equal(self, value):
        assert wire.decode(wire.loads(wire.dumps(wire.encode(value)))) == value

    def test_arrays_and_tensors_come_back_as_arrays(self):
        image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
        back = wire.decode(wire.encode(tf.constant(image)))
        assert back.dtype == np.uint8 and np.array_equal(back, image)
        strings = wire.decode(wire.encode(tf.constant([b"a/roses/1.jpg", b"b"])))
        assert strings.tolist() == [b"a/roses/1.jpg", b"b"]

    def test_code_and_objects_do_not_cross(self):
        with pytest.raises(wire.WireError, match="a function does not cross to the judge"):
            wire.encode(lambda: 1)
        with pytest.raises(wire.WireError, match="an array of object does not cross|a Options"):
            wire.encode(tf.data.Options())
        with pytest.raises(wire.WireError, match="not wire data"):
            wire.decode({"pickle": "gASV"})


class TestPlan:
    def test_the_judge_runs_only_the_lab_cells_its_checks_need(self, lab1):
        steps = judge_plan.plan(lab1, "NUM_IMAGES = 100")
        kinds = [(s["kind"], s.get("todo"), s.get("names")) for s in steps]
        assert kinds == [
            ("code", None, None),
            ("code", None, None),
            ("code", None, None),
            ("fetch", 1, ["filenames"]),
            ("check", 1, None),
            ("code", None, None),
            ("fetch", 2, ["read_and_decode"]),
            ("check", 2, None),
            ("fetch", 3, ["parallel"]),
            ("check", 3, None),
        ]
        code = [s["source"] for s in steps if s["kind"] == "code"]
        assert code[1] == "NUM_IMAGES = 100"  # The grader's parameters, not the lab's.
        assert code[3].startswith("def label_from_path(path):")  # Given code TODO 2 calls.
        assert not any(
            "measure_throughput" in source for source in code
        )  # Speed tests: not needed.

    def test_a_cell_whose_comprehension_reuses_a_functions_argument_is_not_needed(self):
        """`path` in a print cell's comprehension is that comprehension's own: not the `path`
        a needed function reads, so the judge does not run the print (lab 1's pass lines)."""
        cells = [
            nbformat.v4.new_code_cell("print([path.upper() for path in ['a']])"),
            nbformat.v4.new_code_cell("def f(path):\n    return len(path)"),
            nbformat.v4.new_code_cell("checks.check_x(f, todo=1)"),
        ]
        cells[2].metadata[KEY] = {"check": 1}
        lab = nbformat.v4.new_notebook(cells=cells)
        sources = [s["source"] for s in judge_plan.plan(lab, "", references={})]
        assert sources == ["def f(path):\n    return len(path)", "checks.check_x(f, todo=1)"]

    def test_bound_names_of_a_todo_cell(self):
        source = (
            "options = tf.data.Options()\ndef f(x):\n    y = 1\n    return x\na, (b, c) = 1, (2, 3)"
        )
        assert judge_plan.bound_names(source) == ["options", "f", "a", "b", "c"]


class TestVerdicts:
    def test_only_lines_signed_with_the_key_count(self):
        key = b"k" * 32
        payload = json.dumps({"todo": 1, "passed": False, "message": "TODO 1 (x): wrong"})
        signed = f"VERDICT {payload} {hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()}"
        forged = json.dumps({"todo": 2, "passed": True, "message": "TODO 2 passed"})
        output = "\n".join([signed, f"VERDICT {forged} {'0' * 64}", "TODO 3 passed", ""])
        verdicts = judge_output.read_verdicts(output, key)
        assert verdicts == {1: judge_output.Verdict(False, "TODO 1 (x): wrong")}


class TestRemote:
    def _graph_of(self, dataset):
        graph = tf.raw_ops.DatasetToGraphV2(
            input_dataset=tf.data.experimental.to_variant(dataset), external_state_policy=1
        ).numpy()
        return tf.compat.v1.GraphDef.FromString(graph)

    def test_a_learners_own_python_callback_is_refused(self):
        numbers = tf.data.Dataset.range(3).map(
            lambda x: tf.numpy_function(lambda y: y * 2, [x], tf.int64)
        )
        graph_def = self._graph_of(numbers)
        with pytest.raises(graphs.NotSealable, match=r"calls Python code of its own"):
            graphs.bind_callbacks(graph_def, {}, {})

    def test_a_storage_wait_is_bound_to_the_judges_own_storage(self):
        learners = storage.SimulatedStorage(latency_ms=0.1)
        judges = storage.SimulatedStorage(latency_ms=0.1)
        dataset = tf.data.Dataset.from_tensor_slices([__file__]).map(learners.read_file)
        graph_def = self._graph_of(dataset)
        (token,) = {
            n.attr["token"].s.decode()
            for f in graph_def.library.function
            for n in f.node_def
            if "token" in n.attr
        }
        rebuilt = graphs.rebuild_dataset(
            {
                "graph": __import__("base64").b64encode(graph_def.SerializeToString()).decode(),
                "roles": {token: ["object", "simulated_storage", "_wait_for_path"]},
                "spec": wire.encode(dataset.element_spec),
            },
            {"simulated_storage": judges},
        )
        assert len(list(rebuilt)) == 1
        assert (len(judges.latencies_ms), len(learners.latencies_ms)) == (1, 0)
        with pytest.raises(graphs.NotSealable):  # Not a course object: refused.
            graphs.bind_callbacks(graph_def, {token: ["object", "np", "save"]}, {"np": np})


def test_review_shows_a_learners_cell_tagged_setup(lab1):
    restored = nbformat.from_dict(json.loads(json.dumps(lab1)))
    hidden = nbformat.v4.new_code_cell("import sys\nsys.settrace(None)", id="mine")
    hidden.metadata["tags"] = ["setup"]
    hidden.metadata[KEY] = {"added": True}
    restored.cells.insert(0, hidden)
    assert "+sys.settrace(None)" in flags.review_diff(lab1, restored)


def test_parsing_specs_cross_and_a_named_tuple_is_not_a_tuple():
    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "size": tf.io.VarLenFeature(tf.int64),
    }
    back = wire.decode(wire.encode(features))
    assert back == features
    assert wire.decode(wire.encode(tf.io.FixedLenFeature([2], tf.int64, [0, 0]))).default_value == [
        0,
        0,
    ]


def test_only_the_courses_own_callbacks_are_bound():
    """A graph may not call any other method of a course object (its `__init__` reset the
    judge's storage to no latency) nor any other function of `utils`."""
    judges = storage.SimulatedStorage(latency_ms=50)
    namespace = {"simulated_storage": judges}
    assert graphs._callback(["object", "simulated_storage", "_wait_for_path"], namespace)
    for role in (
        ["object", "simulated_storage", "__init__"],
        ["object", "simulated_storage", "reset_counters"],
        ["function", "utils.storage", "SimulatedStorage"],
        None,
        "x",
    ):
        assert graphs._callback(role, namespace) is None
    assert judges.latency_ms == 50
