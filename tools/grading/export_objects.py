"""The learner's kernel's answers for calls with the judge's objects: datasets.

Sent as text into the kernel after `export_calls.py` (rules as for `export_values.py`).
`trace_datasets`: a check that passes a dataset of its own (lab 7's `through_service`)
sends each dataset's element spec and the other arguments as data; the function is traced
with a placeholder for each dataset, and the graph it builds goes back, for the judge to
run on its own datasets (`remote_datasets.py`).
"""


def _grader_trace_datasets(wire, request, function):
    import base64

    import tensorflow as tf

    policies = tf.data.experimental.service.ShardingPolicy
    specs, fixed = [], []  # A placeholder for each dataset; the other arguments' values.
    for data in request["args"]:
        if "dataset" in data:
            specs.append(tf.data.DatasetSpec(wire.decode(data["dataset"])))
            fixed.append(None)
        elif "policy" in data:
            fixed.append([policies[str(data["policy"])]])
        else:
            fixed.append([wire.decode(data["value"])])
    returned = []  # What the function returned, when it is no dataset (a stub's `...`).

    def traced(*datasets):
        given = iter(datasets)
        result = function(*[next(given) if value is None else value[0] for value in fixed])
        if isinstance(result, tf.data.Dataset):
            return result
        returned.append(result)
        return None

    concrete = tf.function(traced).get_concrete_function(*specs)
    if returned:
        return {"value": wire.encode(returned[0])}
    graph_def = concrete.graph.as_graph_def()
    return {
        "graph": base64.b64encode(graph_def.SerializeToString()).decode(),
        "inputs": [tensor.name for tensor in concrete.inputs[: len(specs)]],
        "output": concrete.outputs[0].name,
        "spec": wire.encode(concrete.structured_outputs.element_spec),
        "captures": _grader_captures(wire, concrete, len(specs)),
        # The storage's waits by the notebook's name for the storage, as for any graph.
        "roles": _grader_roles(graph_def, _grader_context.get("namespace", {})),  # noqa: F821
    }


def _grader_json(value):
    """A compile configuration's leaves as JSON: numpy numbers as numbers, nothing else."""
    if hasattr(value, "tolist") and not isinstance(value, type):
        return value.tolist()
    raise TypeError(f"a {type(value).__name__} in the compile configuration")


_grader_more_ops["trace_datasets"] = _grader_trace_datasets  # noqa: F821 (export_calls.py)


def _grader_captures(wire, concrete, count):
    """What a function traced for `count` arguments captured, as [placeholder, data]: never
    a variable, a table or a dataset (state of the kernel's that data cannot carry)."""
    import tensorflow as tf

    captures = []
    for placeholder, value in zip(concrete.inputs[count:], concrete.captured_inputs, strict=True):
        if value.dtype in (tf.resource, tf.variant):
            raise TypeError("the function uses a variable, a table or a dataset made outside it")
        captures.append([placeholder.name, wire.encode(value)])
    return captures
