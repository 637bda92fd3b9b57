"""Grain datasets described as data the judge rebuilds them from.

A MapDataset is described by its length, and its elements are read here when the judge
asks for them by index (`items`). An IterDataset is described by its steps, from the last
to the first: each a Grain transformation with its settings (`["batch", 16, true]`), down
to a MapDataset or a data source the notebook binds to a name; a function it maps is named
by the notebook's name for it. The judge makes the same steps itself, with its own objects
of those names (`tools/grading/judge/remote_grain.py`): no Python of the learner's crosses.
The settings Grain keeps private are read through `utils.lab.framework_internals`.
"""

from tools.grading.kernel.inside import wire
from tools.grading.kernel.inside.calls import error_of
from utils.lab import framework_internals as internals


def _element(read):
    try:
        return {"value": wire.encode(read())}
    except BaseException as error:  # An element that does not cross says what it is.
        return {"error": error_of(error)}


def items(request, value):
    """The elements `request["start"]` to `request["stop"]` of `value`, each as data."""
    return [
        _element(lambda i=i: value[i]) for i in range(int(request["start"]), int(request["stop"]))
    ]


def name_of(value, namespace):
    """The notebook's first public name for `value`, or None."""
    names = [key for key, item in list(namespace.items()) if item is value and key[:1] != "_"]
    return names[0] if names else None


def _step(node, kind, namespace):
    """(the step of a Grain dataset's node as data, its parents to follow)."""
    parents = list(getattr(node, "parents", ()) or ())
    if kind in internals.GRAIN_WORKER_WRAPPERS:  # What mp_prefetch adds around each worker.
        return None, parents
    settings = internals.grain_settings(node)
    if settings is None:
        return ["unknown", kind], []
    if kind == "InterleaveIterDataset":  # mp_prefetch: one input per worker process.
        workers = settings["datasets"]
        if not all(type(w).__name__ == "ProcessPrefetchIterDataset" for w in workers):
            return ["unknown", kind], []
        return ["mp_prefetch", len(workers)], workers[:1]
    steps = {
        "BatchIterDataset": lambda s: ["batch", int(s["batch_size"]), bool(s["drop_remainder"])],
        "PrefetchIterDataset": lambda s: [
            "to_iter_dataset",
            int(s["read_options"].num_threads),
            int(s["read_options"].prefetch_buffer_size),
        ],
        "MapMapDataset": lambda s: ["map", name_of(s["transform"], namespace)],
        "MapIterDataset": lambda s: ["map", name_of(s["transform"], namespace)],
        "ShuffleMapDataset": lambda s: ["shuffle", int(s["seed"])],
        "WindowShuffleMapDataset": lambda s: [
            "window_shuffle",
            int(s["window_size"]),
            int(s["seed"]),
        ],
        "RepeatMapDataset": lambda s: ["repeat", s["num_epochs"], bool(s["reseed_each_epoch"])],
        "SourceMapDataset": lambda s: ["source", name_of(s["source"], namespace)],
    }
    return steps[kind](settings), parents


def chain(value, namespace):
    """The steps of a Grain IterDataset, from the last to its named data source; where a
    step below cannot be described, to the last MapDataset the notebook names."""
    steps, node, named = [], value, None
    for _ in range(100):
        kind = type(node).__name__
        name = name_of(node, namespace) if node is not value else None
        if name is not None and kind.endswith("MapDataset"):
            named = [*steps, ["named", name]]
        step, parents = _step(node, kind, namespace)
        steps += [step] if step else []
        if step and step[0] == "source" and step[1] is not None:
            return steps
        if (step and step[0] in ("unknown", "source")) or len(parents) != 1:
            return named or [*steps, ["unknown", kind]]
        node = parents[0]
    return named or [*steps, ["unknown", "a pipeline of over 100 steps"]]


def describe_grain(value, namespace):
    """A Grain dataset described as data; None for any other value."""
    if not type(value).__module__.startswith("grain"):
        return None
    bases = [kind.__name__ for kind in type(value).__mro__]
    described = {"kind": "grain", "type": type(value).__name__}
    if "MapDataset" in bases:
        return {**described, "base": "MapDataset", "length": len(value)}
    if "IterDataset" in bases:
        return {**described, "base": "IterDataset", "steps": chain(value, namespace)}
    return None
