"""The judge's side of a sealed verdict: what a TODO made, rebuilt in the judge's process.

Takes the answers of the learner's kernel (`export_server.py`) as data; gives values the
lab's check cells take as they are: a dataset rebuilt from its graph, a function whose every
call runs the graph the learner's function was traced to, data, or `...`. Every Python
callback in a graph (`tf.numpy_function`) is bound again to the judge's own course object
of the same name (the simulated storage's waits), or the graph is refused: no code of the
learner's runs here, only TensorFlow's operations.
"""

from __future__ import annotations

import base64
import importlib
import socket
import struct
import time

import tensorflow as tf
from tensorflow.python.ops import script_ops

from tools.grading import wire

_KEPT_CALLBACKS: list = []  # The registry holds weak references: keep the callbacks alive.


class NotSealable(ValueError):
    """What the TODO made cannot be checked outside the learner's kernel; says why."""


class Client:
    """Asks the learner's kernel about the values each TODO made."""

    def __init__(self, address: str, seconds: float):
        deadline = time.monotonic() + seconds
        while True:  # The kernel makes the socket when its first grader cell runs.
            self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.connection.settimeout(seconds)
            try:
                self.connection.connect(address)
                return
            except OSError:
                self.connection.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def ask(self, **request) -> dict:
        message = wire.dumps(request)
        self.connection.sendall(struct.pack("!I", len(message)) + message)
        reply = wire.loads(self._receive(struct.unpack("!I", self._receive(4))[0]))
        if "error" in reply:
            raise NotSealable(str(reply["error"]))
        return reply["ok"]

    def done(self) -> None:
        message = wire.dumps({"op": "done"})
        self.connection.sendall(struct.pack("!I", len(message)) + message)
        self.connection.close()

    def _receive(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.connection.recv(size - len(data))
            if not chunk:
                raise NotSealable("the learner's kernel stopped answering")
            data += chunk
        return data


def _callback(role, namespace: dict):
    """The judge's own callback for a role, or None: course objects and functions only."""
    if role and role[0] == "object" and len(role) == 3:
        owner = namespace.get(role[1])
        if type(owner).__module__.split(".")[0] == "utils" and not isinstance(owner, type):
            method = getattr(type(owner), role[2], None)
            return getattr(owner, role[2]) if callable(method) else None
    if role and role[0] == "function" and len(role) == 3 and role[1].startswith("utils."):
        function = getattr(importlib.import_module(role[1]), role[2], None)
        return function if callable(function) else None
    return None


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
            _KEPT_CALLBACKS.append(callback)
            tokens[token] = script_ops._py_funcs.insert(callback)
        node.attr["token"].s = tokens[token].encode()


def rebuild_dataset(answer: dict, namespace: dict) -> tf.data.Dataset:
    """The learner's dataset, from its graph, reading through the judge's storage."""
    graph_def = tf.compat.v1.GraphDef.FromString(base64.b64decode(answer["graph"]))
    bind_callbacks(graph_def, answer["roles"], namespace)
    variant = tf.raw_ops.DatasetFromGraph(graph_def=graph_def.SerializeToString())
    return tf.data.experimental.from_variant(variant, structure=wire.decode(answer["spec"]))


def _outputs(structure, tensors: dict):
    if "out" in structure:
        return tensors[structure["out"]]
    if "const" in structure:
        return wire.decode(structure["const"])
    if "tuple" in structure or "list" in structure:
        items = [_outputs(item, tensors) for item in next(iter(structure.values()))]
        return tuple(items) if "tuple" in structure else items
    return {key: _outputs(item, tensors) for key, item in structure["dict"].items()}


def _names(structure) -> list[str]:
    if "out" in structure:
        return [structure["out"]]
    if "const" in structure:
        return []
    items = (
        structure.get("dict", {}).values()
        if "dict" in structure
        else next(iter(structure.values()))
    )
    return [name for item in items for name in _names(item)]


class RemoteFunction:
    """Stands for a learner's function: each call runs its traced graph, in the judge."""

    def __init__(self, client: Client, todo: int, name: str, namespace: dict):
        self.client, self.todo, self.name, self.namespace = client, todo, name, namespace
        self.__name__ = name
        self._imported: dict = {}

    def __call__(self, *args):
        tensors = [tf.convert_to_tensor(arg) for arg in args]
        specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in tensors)
        if specs not in self._imported:
            self._imported[specs] = self._import(specs)
        return self._imported[specs](*tensors)

    def _import(self, specs):
        answer = self.client.ask(op="trace", todo=self.todo, name=self.name,
                                 specs=[wire.encode(spec) for spec in specs])  # fmt: skip
        graph_def = tf.compat.v1.GraphDef.FromString(base64.b64decode(answer["graph"]))
        bind_callbacks(graph_def, answer["roles"], self.namespace)
        structure, names = answer["structure"], _names(answer["structure"])
        captured = {name: wire.decode(value) for name, value in answer["captures"]}

        if not names:  # Nothing computed (a stub's `...`): the outputs are constants.
            return lambda *inputs: _outputs(structure, {})

        def body(*inputs):
            constants = {name: tf.constant(value) for name, value in captured.items()}
            mapping = {**dict(zip(answer["inputs"], inputs, strict=True)), **constants}
            return tf.graph_util.import_graph_def(
                graph_def, input_map=mapping, return_elements=names, name="learner"
            )

        graph = tf.compat.v1.wrap_function(body, list(specs))
        return lambda *inputs: _outputs(structure, dict(zip(names, graph(*inputs), strict=True)))


def fetch(client: Client, todo: int, name: str, namespace: dict):
    """The value `name` had after TODO `todo`'s cell, rebuilt in the judge."""
    answer = client.ask(op="describe", todo=todo, name=name)
    kind = answer["kind"]
    if kind == "missing":
        raise NotSealable(f"`{name}` was not defined after your TODO {todo} cell ran")
    if kind == "dataset":
        return rebuild_dataset(answer, namespace)
    if kind == "function":
        return RemoteFunction(client, todo, name, namespace)
    return wire.decode(answer["value"])
