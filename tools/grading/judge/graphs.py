"""Graphs from a learner's kernel, made runnable in the judge: no Python of the learner's.

Every Python callback in a graph (`tf.numpy_function`) is bound again to the judge's own
course object of the same name (the simulated storage's waits), or the graph is refused
with `NotSealable`. Then a dataset is rebuilt from its graph, and a function's outputs are
rebuilt from the names its traced graph gives them.
"""

from __future__ import annotations

import base64
import importlib

import tensorflow as tf

from tools.grading.kernel.inside import wire

_KEPT_GRAPHS: list = []  # TensorFlow forgets a graph's callbacks with it: keep them alive.


class NotSealable(ValueError):
    """What the TODO made cannot be checked outside the learner's kernel; says why."""


# The only Python callbacks a graph may call in the judge: the course's own, by name.
# Any other (a learner's, or another method of a course object: its `__init__` would
# reset the judge's storage) refuses the graph.
COURSE_CALLBACKS = {
    ("object", "SimulatedStorage", "_wait_for_path"),
    ("object", "SimulatedStorage", "_open_stream"),
    ("object", "SimulatedStorage", "_wait_for_stream"),
    ("function", "utils.records", "_read_header"),
    ("function", "utils.records", "_decode_with_pillow"),
}


def _callback(role, namespace: dict):
    """The judge's own callback for a role in `COURSE_CALLBACKS`, or None."""
    if not isinstance(role, list) or len(role) != 3:
        return None
    kind, owner_name, name = (str(part) for part in role)
    if kind == "object":
        owner = namespace.get(owner_name)
        if ("object", type(owner).__name__, name) in COURSE_CALLBACKS and type(
            owner
        ).__module__.startswith("utils."):
            return getattr(owner, name)
    elif (kind, owner_name, name) in COURSE_CALLBACKS:
        return getattr(importlib.import_module(owner_name), name)
    return None


def register_callback(callback) -> str:
    """Registers `callback` with TensorFlow as the kernel's `tf.numpy_function` did; returns
    the token a graph's node calls it by (public API only: a graph of its own, kept)."""
    graph = tf.Graph()
    with graph.as_default():
        token = tf.numpy_function(callback, [], tf.int64).op.get_attr("token")
    _KEPT_GRAPHS.append(graph)
    return token.decode()


def bind_callbacks(graph_def, roles: dict, namespace: dict) -> None:
    """Points every callback of `graph_def` at the judge's own; raises `NotSealable`."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    tokens = {}
    for node in nodes:
        if "token" not in node.attr:
            continue
        token = node.attr["token"].s.decode()
        if token not in tokens:
            callback = _callback(roles.get(token), namespace)
            if callback is None:
                raise NotSealable(
                    "it calls Python code of its own in the graph (tf.py_function or "
                    "tf.numpy_function), which is not graded: use TensorFlow operations"
                )
            tokens[token] = register_callback(callback)
        node.attr["token"].s = tokens[token].encode()


def learner_graph(answer: dict, namespace: dict) -> tf.compat.v1.GraphDef:
    """The graph of a kernel's answer, each of its Python callbacks bound to the judge's."""
    graph_def = tf.compat.v1.GraphDef.FromString(base64.b64decode(answer["graph"]))
    bind_callbacks(graph_def, answer["roles"], namespace)
    return graph_def


def rebuild_dataset(answer: dict, namespace: dict) -> tf.data.Dataset:
    """The learner's dataset, from its graph, reading through the judge's storage."""
    graph_def = learner_graph(answer, namespace)
    variant = tf.raw_ops.DatasetFromGraph(graph_def=graph_def.SerializeToString())
    return tf.data.experimental.from_variant(variant, structure=wire.decode(answer["spec"]))


def outputs_of(structure, tensors: dict):
    if "out" in structure:
        return tensors[structure["out"]]
    if "const" in structure:
        return wire.decode(structure["const"])
    if "tuple" in structure or "list" in structure:
        items = [outputs_of(item, tensors) for item in next(iter(structure.values()))]
        return tuple(items) if "tuple" in structure else items
    return {key: outputs_of(item, tensors) for key, item in structure["dict"].items()}


def names_of(structure) -> list[str]:
    if "out" in structure:
        return [structure["out"]]
    if "const" in structure:
        return []
    items = (
        structure.get("dict", {}).values()
        if "dict" in structure
        else next(iter(structure.values()))
    )
    return [name for item in items for name in names_of(item)]
