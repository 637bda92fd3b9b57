"""The learner's side of a sealed verdict, run inside the submission's kernel.

The grader sends this file's text into the kernel (as `kernel_guard.py` is sent). Before
the first learner cell, `_grader_start(...)` starts a thread that answers the judge's
questions over a Unix socket in the work folder; right after each TODO cell,
`_grader_keep(n, names, globals())` keeps what the TODO bound; after the last cell,
`_grader_finish()` says no more will come. A question about TODO n waits until TODO n's
cell has run, so the judge follows the kernel cell by cell. Nothing here decides a
verdict: it only describes values (`wire.py` data) and hands over TensorFlow graphs, which
the judge rebuilds and runs in its own process (`judge.py`). So learner code that changes
this code can only send other data or other graphs, which the judge checks like any.

Rules, as for the guard: standard library, numpy and TensorFlow only; every top-level name
starts with `_grader_`; no `from __future__` import; it prints nothing.
"""

_grader_kept = {}
_grader_judged = set()
_grader_finished = []


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
    from tensorflow.python.ops import script_ops

    roles = {}
    functions = graph_def.library.function
    nodes = list(graph_def.node) + [node for f in functions for node in f.node_def]
    for node in nodes:
        if "token" not in node.attr:
            continue
        token = node.attr["token"].s.decode()
        callback = script_ops._py_funcs.get(token)
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
            input_dataset=value._variant_tensor, external_state_policy=1
        ).numpy()
        roles = _grader_roles(tf.compat.v1.GraphDef.FromString(graph), namespace)
        return {"kind": "dataset", "graph": base64.b64encode(graph).decode(),
                "spec": wire.encode(value.element_spec), "roles": roles}  # fmt: skip
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

    concrete = tf.function(function).get_concrete_function(*specs)
    captures = []
    for placeholder, value in zip(
        concrete.inputs[len(specs) :], concrete.captured_inputs, strict=True
    ):
        if value.dtype in (tf.resource, tf.variant):
            raise TypeError("the function uses a variable, a table or a dataset made outside it")
        captures.append([placeholder.name, wire.encode(value)])
    graph_def = concrete.graph.as_graph_def()
    return {
        "graph": base64.b64encode(graph_def.SerializeToString()).decode(),
        "inputs": [tensor.name for tensor in concrete.inputs[: len(specs)]],
        "captures": captures,
        "structure": _grader_structure(wire, concrete.structured_outputs),
        "roles": _grader_roles(graph_def, namespace),
    }


def _grader_finish():
    _grader_finished.append(True)


def _grader_answer(wire, request, namespace):
    import time

    if request["op"] == "judged":
        _grader_judged.add(request["todo"])
        return True
    key = f"{request['todo']}:{request['name']}"
    while key not in _grader_kept and not _grader_finished:
        time.sleep(0.05)
    value = _grader_kept.get(key, _grader_kept)
    if request["op"] == "describe":
        return _grader_describe(wire, value, namespace)
    specs = [wire.decode(spec) for spec in request["specs"]]
    return _grader_trace(wire, value, specs, namespace)


def _grader_start(wire, address, seconds, namespace):
    """Starts answering the judge, on a thread of its own, at the Unix socket `address`."""
    import socket
    import threading

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    server.settimeout(seconds)
    threading.Thread(
        target=_grader_serve, args=(wire, server, seconds, namespace), daemon=True
    ).start()


def _grader_serve(wire, server, seconds, namespace):
    """Answers the judge on the listening `server` until it is done, or `seconds` pass."""
    import struct

    def receive(connection, size):
        data = b""
        while len(data) < size:
            chunk = connection.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the judge left")
            data += chunk
        return data

    try:
        connection, _ = server.accept()
        connection.settimeout(seconds)
        while True:
            request = wire.loads(
                receive(connection, struct.unpack("!I", receive(connection, 4))[0])
            )
            if request.get("op") == "done":
                return
            try:
                reply = {"ok": _grader_answer(wire, request, namespace)}
            except Exception as error:  # Said to the judge, which reports it for the TODO.
                lines = str(error).strip().splitlines()
                reply = {"error": f"{type(error).__name__}: {lines[-1] if lines else ''}"[:400]}
            message = wire.dumps(reply)
            connection.sendall(struct.pack("!I", len(message)) + message)
    except (OSError, ConnectionError):
        return
    finally:
        server.close()
        _grader_finished.append(True)  # No judge any more: nothing to wait for.
