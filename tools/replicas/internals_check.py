"""Checks, on the TensorFlow, Keras and Grain at hand, what the grader relies on of them.

`python tools/replicas/internals_check.py` (the course's root on PYTHONPATH) prints one JSON
line per check, {"check", "ok", "detail"}, and a last one of the versions: each function of
`utils.lab.framework_internals`, and each public route the grader takes where a private one
once was (a dataset's variant, a learner's graph run with its functions, a callback bound
to the judge's, a model rebuilt in Keras's safe mode). `tests/test_replicas.py` runs it in
each replica's venv, `tests/test_framework_internals.py` in the course's own: so an upgrade
that breaks one fails a named check, not a lab's grading. Imports TensorFlow, Keras, numpy
and (where installed) Grain only, besides the course.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parents[2]


def check_python_callback():
    import tensorflow as tf

    from tools.grading.kernel.inside import traced
    from utils.lab import framework_internals

    def double(x):
        return x * 2

    dataset = tf.data.Dataset.range(2).map(lambda x: tf.numpy_function(double, [x], tf.int64))
    graph = tf.raw_ops.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(dataset))
    graph_def = tf.compat.v1.GraphDef.FromString(graph.numpy())
    nodes = [n for f in graph_def.library.function for n in f.node_def if "token" in n.attr]
    (token,) = {node.attr["token"].s.decode() for node in nodes}
    found = framework_internals.python_callback(token)
    assert getattr(found, "__wrapped__", found) is double, f"token {token} gave {found!r}"
    assert framework_internals.python_callback("no such token") is None
    roles = traced.roles(graph_def, {})
    assert roles == {token: ["function", __name__, "double"]}, roles
    return f"{token} -> double"


def check_dataset_graph():
    import tensorflow as tf

    from utils.checks._base import dataset_ops

    dataset = tf.data.Dataset.range(8).map(lambda x: x + 1).batch(2).prefetch(1)
    ops = dataset_ops(dataset)
    assert ops and ops[0] == "RangeDataset" and ops[-1] == "PrefetchDataset", ops
    return " > ".join(ops)


def check_callback_bound():
    import tensorflow as tf

    from tools.grading.judge import graphs

    calls = []

    def judges(x):
        calls.append(int(x))
        return x + 100

    token = graphs.register_callback(judges)

    @tf.function
    def run(x):
        return tf.raw_ops.PyFunc(input=[x], token=token, Tout=[tf.int64])[0]

    assert int(run(tf.constant(1, tf.int64))) == 101 and calls == [1], calls
    return f"{token} -> the judge's function"


def _trace(path: str) -> None:
    """In a process of its own: the kernel's answer for a function of a check's dataset."""
    import tensorflow as tf

    from tools.grading.kernel.inside import objects, wire

    def through(dataset, factor):
        return dataset.map(lambda x: x * factor).filter(lambda x: x > 0).batch(2)

    request = {
        "args": [{"dataset": wire.encode(tf.TensorSpec([], tf.int64))}, {"value": wire.encode(10)}]
    }
    answer = objects.trace_datasets(request, through, {})
    Path(path).write_text(json.dumps(answer))


def check_learner_graph_runs():
    """A learner's graph with functions of its own (`map`, `filter`), traced in another
    process, runs in the judge on the judge's dataset."""
    import tempfile

    import tensorflow as tf

    from tools.grading.judge import remote_datasets

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answer.json"
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, __file__, "--trace", str(path)]
        subprocess.run(command, check=True, env=environment)
        answer = json.loads(path.read_text())
    client = types.SimpleNamespace(ask=lambda **request: answer)
    function = types.SimpleNamespace(client=client, todo=3, name="through", namespace={})
    result = remote_datasets.call(function, (tf.data.Dataset.range(5), 10))
    batches = [batch.tolist() for batch in result.as_numpy_iterator()]
    assert batches == [[10, 20], [30, 40]], batches
    return str(batches)


def check_grain_settings():
    import grain

    from tools.grading.kernel.inside.grain import chain
    from utils.lab import framework_internals

    def parse(record):
        return record

    data = [b"r%d" % i for i in range(8)]
    windowed = grain.experimental.WindowShuffleMapDataset(
        grain.MapDataset.source(data), window_size=4, seed=5
    )
    loader = windowed.shuffle(seed=3).repeat(2).map(parse).to_iter_dataset(grain.ReadOptions(2, 8))
    loader = loader.map(parse).batch(4, drop_remainder=True)
    loader = loader.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    steps = chain(loader, {"data": data, "parse": parse})
    expected = [
        ["mp_prefetch", 2],
        ["batch", 4, True],
        ["map", "parse"],
        ["to_iter_dataset", 2, 8],
        ["map", "parse"],
        ["repeat", 2, True],
        ["shuffle", 3],
        ["window_shuffle", 4, 5],
        ["source", "data"],
    ]
    assert steps == expected, steps
    assert framework_internals.grain_settings(grain.MapDataset.source(data).filter(bool)) is None
    return f"{len(expected)} steps, every kind of {len(framework_internals.GRAIN_KINDS)}"


CHECKS = {
    "python_callback": check_python_callback,
    "dataset_graph": check_dataset_graph,
    "callback_bound": check_callback_bound,
    "learner_graph_runs": check_learner_graph_runs,
    "grain_settings": check_grain_settings,
}
NEEDS = {"grain_settings": "grain"}  # The others need TensorFlow (and Keras, which it brings).


def versions() -> dict[str, str]:
    """The versions this process checks: TensorFlow, Keras, Grain (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name, packages in {
        "tensorflow": ("tensorflow", "tensorflow-cpu"),
        "keras": ("keras",),
        "grain": ("grain",),
    }.items():
        for package in packages:
            try:
                found[name] = version(package)
                break
            except PackageNotFoundError:
                found[name] = None
    return found


def run() -> list[dict]:
    """Runs every check whose library is installed; returns {"check", "ok", "detail"} each."""
    results = []
    for name, check in CHECKS.items():
        needs = ("tensorflow", NEEDS.get(name, "keras"))
        if any(importlib.util.find_spec(module) is None for module in needs):
            continue
        try:
            results.append({"check": name, "ok": True, "detail": check()})
        except Exception as error:  # A check that breaks says how, in one line.
            detail = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            results.append({"check": name, "ok": False, "detail": detail})
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--trace"]:
        _trace(sys.argv[2])
    else:
        for result in run():
            print(json.dumps(result), flush=True)
        print(json.dumps({"versions": versions()}), flush=True)
