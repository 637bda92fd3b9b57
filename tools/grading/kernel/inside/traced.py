"""Functions traced into TensorFlow graphs for the judge, which runs them on its own inputs.

A graph goes with its inputs' and outputs' names, the constants it captured (as `wire.py`
data: never a variable, a table or a dataset, state that data cannot carry) and the role
of each Python callback in it, named by the notebook's name for its object (`roles`).
"""

import base64

import tensorflow as tf

from tools.grading.kernel.inside import wire
from utils.lab.framework_internals import python_callback


def roles(graph_def, namespace):
    """Returns {token: role} of every Python callback (`tf.numpy_function`) in the graph.

    A role names the callback by what it is: `["object", name, method]` for a method of an
    object bound to `name` in the notebook, `["function", module, name]` for a function;
    None where it is neither. The judge binds only methods of the course's own objects.
    What TensorFlow keeps private (a callback's function) is read through the course's
    `utils.lab.framework_internals`.
    """
    found = {}
    functions = graph_def.library.function
    nodes = list(graph_def.node) + [node for f in functions for node in f.node_def]
    for node in nodes:
        if "token" not in node.attr:
            continue
        token = node.attr["token"].s.decode()
        callback = python_callback(token)
        inner = getattr(callback, "__wrapped__", callback)
        owner, role = getattr(inner, "__self__", None), None
        if owner is not None:
            names = [key for key, value in list(namespace.items()) if value is owner]
            if names:
                role = ["object", names[0], getattr(inner, "__name__", "")]
        elif inner is not None:
            role = ["function", getattr(inner, "__module__", ""), getattr(inner, "__name__", "")]
        found[token] = role
    return found


def captures(concrete, count):
    """What a function traced for `count` arguments captured, as [placeholder, data]: never
    a variable, a table or a dataset (state of the kernel's that data cannot carry)."""
    found = []
    for placeholder, value in zip(concrete.inputs[count:], concrete.captured_inputs, strict=True):
        if value.dtype in (tf.resource, tf.variant):
            raise TypeError("the function uses a variable, a table or a dataset made outside it")
        found.append([placeholder.name, wire.encode(value)])
    return found


def structure(value):
    """A function's outputs, with each tensor named by its graph name."""
    if isinstance(value, tf.Tensor):
        return {"out": value.name}
    if isinstance(value, (tuple, list)):
        return {type(value).__name__: [structure(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": {str(key): structure(item) for key, item in value.items()}}
    return {"const": wire.encode(value)}


def trace(function, specs, namespace):
    """The graph of `function` traced for `specs`: what the judge runs for each call."""
    stubs = []  # A graph cannot return `...`: it returns None there, and the judge `...`.

    def traced(*args):
        outputs = function(*args)
        stubs[:] = [leaf is Ellipsis for leaf in tf.nest.flatten(outputs)]
        return tf.nest.map_structure(lambda leaf: None if leaf is Ellipsis else leaf, outputs)

    concrete = tf.function(traced).get_concrete_function(*specs)
    specs = [spec for spec in specs if isinstance(spec, tf.TensorSpec)]  # Others: constants.
    leaves = tf.nest.flatten(concrete.structured_outputs)
    outputs = tf.nest.pack_sequence_as(
        concrete.structured_outputs,
        [Ellipsis if stub else leaf for leaf, stub in zip(leaves, stubs, strict=True)],
    )
    graph_def = concrete.graph.as_graph_def()
    return {
        "graph": base64.b64encode(graph_def.SerializeToString()).decode(),
        "inputs": [tensor.name for tensor in concrete.inputs[: len(specs)]],
        "captures": captures(concrete, len(specs)),
        "structure": structure(outputs),
        "roles": roles(graph_def, namespace),
    }
