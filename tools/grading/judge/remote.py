"""The judge's side of a sealed verdict: what a TODO made, rebuilt in the judge's process.

Takes the answers of the learner's kernel (`kernel/inside/`) as data; gives values the
lab's check cells take as they are: a dataset rebuilt from its graph, a function whose every
call runs the graph the learner's function was traced to, data, or `...`. Every Python
callback in a graph (`tf.numpy_function`) is bound again to the judge's own course object
of the same name (the simulated storage's waits), or the graph is refused: no code of the
learner's runs here, only TensorFlow's operations.
"""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import tensorflow as tf

from tools.grading.judge import remote_beam, remote_calls, remote_datasets, remote_objects
from tools.grading.judge.graphs import (
    NotSealable,
    learner_graph,
    names_of,
    outputs_of,
    rebuild_dataset,
)
from tools.grading.kernel.inside import wire


class Client:
    """Asks the learner's kernel about the values each TODO made."""

    def __init__(self, address: str, seconds: float):
        self.address, self.seconds = address, seconds
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


class RemoteFunction:
    """Stands for a learner's function: each call runs its traced graph, in the judge."""

    def __init__(self, client: Client, todo: int, name: str, namespace: dict):
        self.client, self.todo, self.name, self.namespace = client, todo, name, namespace
        self.__name__ = name
        self._imported: dict = {}
        self._folders: dict = {}  # The judge's folders given to it: the kernel's for them.

    def __call__(self, *args, **keywords):
        if keywords:  # Python values by name: called in the kernel, with them as data.
            return remote_calls.call_with_keywords(self, args, keywords)
        if any(isinstance(arg, tf.data.Dataset) for arg in args):  # The check's own.
            return remote_datasets.call(self, args)
        if (call := remote_objects.caller(args)) is not None:  # A strategy, a Beam pipeline.
            return call(self, args)
        if any(hasattr(arg, "__next__") for arg in args):  # Fed item by item by the judge.
            return remote_calls.call_fed(self.client, self.todo, self.name, args, self._folders)
        args = [tf.constant(a) if isinstance(a, np.ndarray) else a for a in args]  # As tf does.
        if not any(tf.is_tensor(arg) for arg in args):  # Python values: called in the kernel.
            try:
                encoded = [wire.encode(arg) for arg in args]
            except wire.WireError as error:
                message = f"the check's arguments cannot reach your function: {error}"
                raise NotSealable(message) from None
            answer = self.client.ask(op="call", todo=self.todo, name=self.name, args=encoded)
            return value_of(answer, self.client, self.todo, self.name, self.namespace)
        tensors = [tf.convert_to_tensor(arg) for arg in args if tf.is_tensor(arg)]
        specs = [tf.TensorSpec(a.shape, a.dtype) if tf.is_tensor(a) else a for a in args]
        key = wire.dumps([wire.encode(spec) for spec in specs])  # Other values: constants.
        if key not in self._imported:
            self._imported[key] = self._import(specs)
        return self._imported[key](*tensors)

    def _import(self, specs):
        answer = self.client.ask(
            op="trace", todo=self.todo, name=self.name, specs=[wire.encode(spec) for spec in specs]
        )
        graph_def = learner_graph(answer, self.namespace)
        structure, names = answer["structure"], names_of(answer["structure"])
        captured = {name: wire.decode(value) for name, value in answer["captures"]}

        if not names:  # Nothing computed (a stub's `...`): the outputs are constants.
            return lambda *inputs: outputs_of(structure, {})

        def body(*inputs):
            constants = {name: tf.constant(value) for name, value in captured.items()}
            mapping = {**dict(zip(answer["inputs"], inputs, strict=True)), **constants}
            return tf.graph_util.import_graph_def(
                graph_def, input_map=mapping, return_elements=names, name="learner"
            )

        graph = tf.compat.v1.wrap_function(body, [s for s in specs if isinstance(s, tf.TensorSpec)])
        return lambda *inputs: outputs_of(structure, dict(zip(names, graph(*inputs), strict=True)))


def fetch(client: Client, todo: int, name: str, namespace: dict):
    """The value `name` had after TODO `todo`'s cell, rebuilt in the judge."""
    answer = client.ask(op="describe", todo=todo, name=name)
    return value_of(answer, client, todo, name, namespace)


def value_of(answer: dict, client: Client, todo: int, name: str, namespace: dict):
    """A value the kernel described, rebuilt: data, a dataset, or a remote function."""
    kind = answer["kind"]
    if kind == "missing":
        raise NotSealable(f"`{name}` was not defined after your TODO {todo} cell ran")
    if kind == "raised":  # A built-in error of the learner's function (a course copy's).
        raise remote_calls.error_of(*answer["error"])
    if kind == "same":  # The kernel's two names hold one object: so do the judge's.
        return namespace[answer["as"]]
    if kind == "dataset":
        return rebuild_dataset(answer, namespace)
    if kind == "function":
        return RemoteFunction(client, todo, name, namespace)
    if kind == "dofn":  # Lab 6's Beam DoFn class: its `process` runs in the kernel.
        return remote_beam.dofn_class(client, todo, name)
    if kind == "grain":  # Grain is an optional lesson's: imported only here.
        from tools.grading.judge import remote_grain

        return remote_grain.grain_value(answer, client, todo, name, namespace)
    try:
        return wire.decode(answer["value"])
    except wire.WireError as error:
        raise NotSealable(str(error)) from None
