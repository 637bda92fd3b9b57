"""The learner's kernel's answers to the judge: what each TODO made, described as data.

Sent as text into the kernel, before `export_server.py` (see there): `_grader_keep` after
each TODO cell, `_grader_answer` for each question of the judge's: a value described
(`wire.py` data, a dataset's graph, "a function"), a function traced for the judge's
arguments (tensors, or constants), or called with them; `export_calls.py` adds the rest.
What TensorFlow keeps private (a callback's function) is read through the course's
`utils.lab.framework_internals`, imported in the kernel.
"""

_grader_kept = {}
_grader_judged = set()
_grader_finished = []
_grader_references = {}  # TODO -> {name: value}, the solution's, sent where its check failed.


def _grader_keep(todo, names, namespace):
    """Keeps the values `names` have now in `namespace` (a missing name is kept as missing),
    then waits until the judge has judged the TODO: a later cell that crashes the kernel
    cannot take an earlier TODO's verdict with it, and the two never compete for the CPU."""
    import time

    for name in names:
        _grader_kept[f"{todo}:{name}"] = namespace.get(name, _grader_kept)
    _grader_kept[f"{todo}:"] = True
    while todo not in _grader_judged and not _grader_finished:
        time.sleep(0.05)


def _grader_roles(graph_def, namespace):
    """Returns {token: role} of every Python callback (`tf.numpy_function`) in the graph.

    A role names the callback by what it is: `["object", name, method]` for a method of an
    object bound to `name` in the notebook, `["function", module, name]` for a function;
    None where it is neither. The judge binds only methods of the course's own objects.
    """
    from utils.lab.framework_internals import python_callback

    roles = {}
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
        roles[token] = role
    return roles


def _grader_describe(wire, value, namespace):
    """What the judge gets for a kept value: its kind, and its data or its graph."""
    import base64

    import tensorflow as tf

    if value is _grader_kept:
        return {"kind": "missing"}
    if isinstance(value, tf.data.Dataset):
        graph = tf.raw_ops.DatasetToGraphV2(
            input_dataset=tf.data.experimental.to_variant(value), external_state_policy=1
        ).numpy()
        roles = _grader_roles(tf.compat.v1.GraphDef.FromString(graph), namespace)
        return {
            "kind": "dataset",
            "graph": base64.b64encode(graph).decode(),
            "spec": wire.encode(value.element_spec),
            "roles": roles,
        }
    if (grain := _grader_grain(wire, value, namespace)) is not None:  # noqa: F821 (export_grain)
        return grain
    if callable(value) and not isinstance(value, type):
        return {"kind": "function"}
    return {"kind": "value", "value": wire.encode(value)}


def _grader_structure(wire, value):
    """A function's outputs, with each tensor named by its graph name."""
    import tensorflow as tf

    if isinstance(value, tf.Tensor):
        return {"out": value.name}
    if isinstance(value, (tuple, list)):
        return {type(value).__name__: [_grader_structure(wire, item) for item in value]}
    if isinstance(value, dict):
        return {"dict": {str(key): _grader_structure(wire, item) for key, item in value.items()}}
    return {"const": wire.encode(value)}


def _grader_trace(wire, function, specs, namespace):
    """The graph of `function` traced for `specs`: what the judge runs for each call."""
    import base64

    import tensorflow as tf

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
        "captures": _grader_captures(wire, concrete, len(specs)),  # noqa: F821 (export_objects.py)
        "structure": _grader_structure(wire, outputs),
        "roles": _grader_roles(graph_def, namespace),
    }


_grader_context = {}  # What an op of export_*.py needs besides its request: the notebook's names.


def _grader_finish():
    _grader_finished.append(True)


def _grader_answer(wire, request, namespace):
    import time

    if request["op"] == "judged":
        sent = request.get("references") or {}
        if sent:
            _grader_references[request["todo"]] = {n: wire.decode(v) for n, v in sent.items()}
        _grader_judged.add(request["todo"])
        return True
    key = f"{request['todo']}:{request['name']}"
    while key not in _grader_kept and not _grader_finished:
        time.sleep(0.05)
    value = _grader_kept.get(key, _grader_kept)
    _grader_context["namespace"] = namespace  # The notebook's names, for the ops below.
    if request["op"] in _grader_more_ops:  # noqa: F821 (export_calls.py)
        return _grader_more_ops[request["op"]](wire, request, value)  # noqa: F821
    if request["op"] == "describe":
        same = _grader_same_as(_grader_kept, request, value)  # noqa: F821 (export_grain.py)
        return {"kind": "same", "as": same} if same else _grader_describe(wire, value, namespace)
    if request["op"] == "call":  # Python values in, the result described (data or a graph).
        args = [wire.decode(arg) for arg in request["args"]]
        try:  # Lab 2's course copies refused (export_calls.py).
            result = _grader_call_refusing_copy(request["name"], value, args)  # noqa: F821
        except NotImplementedError as error:
            if not str(error).startswith("course copy"):
                raise
            return {"kind": "raised", "error": ["NotImplementedError", "course copy"]}
        return _grader_describe(wire, result, namespace)
    specs = [wire.decode(spec) for spec in request["specs"]]
    return _grader_trace(wire, value, specs, namespace)
