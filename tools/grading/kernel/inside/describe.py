"""What the judge gets for a value the kernel kept: its kind, and its data or its graph.

A dataset goes as its graph (with the roles of its Python callbacks, `traced.roles`), a
Grain dataset as its steps (`grain.py`), a Beam `DoFn` class as one (lab 6's judge asks
the kernel to run it, `beam.py`), any other function as "a function", anything else as
`wire.py` data.
"""

import base64

import tensorflow as tf

from tools.grading.kernel.inside import grain, traced, wire

MISSING = object()  # What the kernel keeps for a name the notebook did not bind.


def describe(value, namespace):
    """What the judge gets for `value`, whose notebook's names are `namespace`."""
    if isinstance(value, type) and any(kind.__name__ == "DoFn" for kind in value.__mro__[1:]):
        return {"kind": "dofn"}
    if value is MISSING:
        return {"kind": "missing"}
    if isinstance(value, tf.data.Dataset):
        graph = tf.raw_ops.DatasetToGraphV2(
            input_dataset=tf.data.experimental.to_variant(value), external_state_policy=1
        ).numpy()
        roles = traced.roles(tf.compat.v1.GraphDef.FromString(graph), namespace)
        return {
            "kind": "dataset",
            "graph": base64.b64encode(graph).decode(),
            "spec": wire.encode(value.element_spec),
            "roles": roles,
        }
    if (described := grain.describe_grain(value, namespace)) is not None:
        return described
    if callable(value) and not isinstance(value, type):
        return {"kind": "function"}
    return {"kind": "value", "value": wire.encode(value)}
