"""The judge's side of `kernel/inside/objects.py`: a learner's function of the check's datasets.

A check that passes a dataset of its own (lab 7's `through_service` gets a
`Dataset.range`) does not send it to the kernel: the kernel traces the learner's function
with a placeholder for each dataset, and the judge runs that graph on its own datasets, in
its own process (lab 7: against the judge's own tf.data service). The other arguments
cross as data; a `ShardingPolicy` by its name. Python callbacks are bound as for any graph.
"""

from __future__ import annotations

import tensorflow as tf

from tools.grading.judge.graphs import NotSealable, learner_graph
from tools.grading.kernel.inside import wire


def _argument(arg) -> dict:
    if isinstance(arg, tf.data.Dataset):
        return {"dataset": wire.encode(arg.element_spec)}
    if isinstance(arg, tf.data.experimental.service.ShardingPolicy):
        return {"policy": arg.name}
    try:
        return {"value": wire.encode(arg)}
    except wire.WireError as error:
        message = f"the check's arguments cannot reach your function: {error}"
        raise NotSealable(message) from None


def call(function, args: tuple):
    """`function(*args)` for a `remote.RemoteFunction`: its graph, run on the check's datasets."""
    answer = function.client.ask(
        op="trace_datasets",
        todo=function.todo,
        name=function.name,
        args=[_argument(arg) for arg in args],
    )
    if "value" in answer:  # Not a dataset: `...`, None or other data.
        return wire.decode(answer["value"])
    graph_def = learner_graph(answer, function.namespace)
    captured = {name: wire.decode(value) for name, value in answer["captures"]}
    datasets = [arg for arg in args if isinstance(arg, tf.data.Dataset)]

    def imported(*variants):
        mapping = {name: tf.constant(value) for name, value in captured.items()}
        mapping.update(zip(answer["inputs"], variants, strict=True))
        (variant,) = tf.graph_util.import_graph_def(
            graph_def, input_map=mapping, return_elements=[answer["output"]], name="learner"
        )
        return variant

    # `wrap_function` runs a GraphDef in TF2 and makes its functions (the learner's `map`
    # functions) known to the eager runtime that iterates the result.
    variants = [tf.TensorSpec([], tf.variant)] * len(datasets)
    run = tf.compat.v1.wrap_function(imported, variants)
    variant = run(*[tf.data.experimental.to_variant(dataset) for dataset in datasets])
    return tf.data.experimental.from_variant(variant, wire.decode(answer["spec"]))
