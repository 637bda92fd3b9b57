"""Calls with the judge's own objects: a function of the check's datasets, traced here.

`trace_datasets`: a check that passes a dataset of its own (lab 7's `through_service`)
sends each dataset's element spec and the other arguments as data; the function is traced
with a placeholder for each dataset, and the graph it builds goes back, for the judge to
run on its own datasets (`tools/grading/judge/remote_datasets.py`).
"""

import base64

import tensorflow as tf

from tools.grading.kernel.inside import traced, wire


def trace_datasets(request, function, namespace):
    """`function` traced with a placeholder for each of the judge's datasets: its graph, or
    what it returned where that is no dataset (a stub's `...`)."""
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

    def traced_function(*datasets):
        given = iter(datasets)
        result = function(*[next(given) if value is None else value[0] for value in fixed])
        if isinstance(result, tf.data.Dataset):
            return result
        returned.append(result)
        return None

    concrete = tf.function(traced_function).get_concrete_function(*specs)
    if returned:
        return {"value": wire.encode(returned[0])}
    graph_def = concrete.graph.as_graph_def()
    return {
        "graph": base64.b64encode(graph_def.SerializeToString()).decode(),
        "inputs": [tensor.name for tensor in concrete.inputs[: len(specs)]],
        "output": concrete.outputs[0].name,
        "spec": wire.encode(concrete.structured_outputs.element_spec),
        "captures": traced.captures(concrete, len(specs)),
        # The storage's waits by the notebook's name for the storage, as for any graph.
        "roles": traced.roles(graph_def, namespace),
    }
