"""What the grader reads of TensorFlow and Grain that their public APIs do not give.

The one module of the course that names a library's private attribute or module: a test
(tests/test_framework_internals.py) fails on one anywhere else in tools/ or utils/. Each
function says what it reaches and why no public API does. The grader's code that runs in
the learner's kernel (tools/grading/kernel/inside/traced.py, grain.py) calls them there,
where the lab has put the course on the path. Each is checked on each supported version
(TensorFlow 2.20 and 2.21, Keras 3.13 and 3.15, Grain 0.2.18) by
`tools/replicas/internals_check.py`: in the course's venv (tests/test_framework_internals.py)
and in the replicas' (tests/test_replicas.py, `python -m tools.replicas`).
"""

from __future__ import annotations

from collections.abc import Callable


def python_callback(token: str) -> Callable | None:
    """Returns the Python function that a graph's `PyFunc` node with `token` calls, or None.

    `tf.numpy_function` and `tf.py_function` keep their function in TensorFlow's registry
    of Python callbacks (`script_ops._py_funcs`) and put only its token in the graph;
    TensorFlow has no public lookup from a token to its function. The grader names each
    callback of a learner's dataset by what it is (a method of the simulated storage), so
    that the judge can bind its own.

    Args:
        token: the node's `token` attribute, e.g. `"pyfunc_3"`.

    Returns:
        The registered function (`tf.numpy_function` wraps it: its `__wrapped__` is the
        learner's), or None when the registry has none of that token.
    """
    from tensorflow.python.ops import script_ops

    return script_ops._py_funcs.get(token)


# What each Grain transformation was made with, by its constructor's argument names: Grain
# keeps them in private attributes and has no public accessor for them.
_GRAIN_SETTINGS = {
    "BatchIterDataset": lambda d: {
        "batch_size": d._batch_size,
        "drop_remainder": d._drop_remainder,
    },
    "PrefetchIterDataset": lambda d: {"read_options": d._read_options},
    "MapMapDataset": lambda d: {"transform": d._transform},
    "MapIterDataset": lambda d: {"transform": d._transform},
    "ShuffleMapDataset": lambda d: {"seed": d._seed},
    "WindowShuffleMapDataset": lambda d: {"window_size": d._window_size, "seed": d._seed},
    "RepeatMapDataset": lambda d: {
        "num_epochs": d._num_epochs,
        "reseed_each_epoch": d._reseed_each_epoch,
    },
    "SourceMapDataset": lambda d: {"source": d._source},
    "InterleaveIterDataset": lambda d: {"datasets": list(d._datasets)},
}
GRAIN_KINDS = tuple(_GRAIN_SETTINGS)

# What `mp_prefetch` adds around each worker's pipeline, by class name: two are Grain's
# private classes (no public name to test against).
GRAIN_WORKER_WRAPPERS = frozenset(
    {
        "WithOptionsIterDataset",
        "ProcessPrefetchIterDataset",
        "_MpContextIterDataset",
        "_LazyWorkerSliceIterDataset",
    }
)


def grain_settings(dataset: object) -> dict | None:
    """Returns the arguments a Grain transformation was made with, or None for another kind.

    Grain (0.2.18) keeps them in private attributes (`_batch_size`, `_seed`, ...) and
    offers no public accessor; its public `parents` gives the inputs. The grader describes
    a learner's Grain pipeline as data from these, and the judge makes it again with
    Grain's own public methods (tools/grading/judge/remote_grain.py).

    Args:
        dataset: a Grain `MapDataset` or `IterDataset` of a kind in `GRAIN_KINDS`.

    Returns:
        By kind: `batch_size`, `drop_remainder` (`batch`); `read_options`
        (`to_iter_dataset`); `transform` (`map`); `seed` (`shuffle`); `window_size`,
        `seed` (`WindowShuffleMapDataset`); `num_epochs`, `reseed_each_epoch` (`repeat`);
        `source` (`MapDataset.source`); `datasets` (an interleave's inputs, as
        `mp_prefetch` makes one per worker). None for any other kind.
    """
    read = _GRAIN_SETTINGS.get(type(dataset).__name__)
    return None if read is None else read(dataset)


def grain_inputs(dataset: object) -> list:
    """Returns the datasets a Grain dataset reads from, an interleave's included.

    Grain's public `parents` gives a transformation's inputs, but not an interleave's (the
    workers' pipelines of `mp_prefetch`): Grain keeps those private (`_datasets`).

    Args:
        dataset: a Grain `MapDataset` or `IterDataset`.

    Returns:
        Its parents, then an interleave's inputs; [] for a source.
    """
    interleaved = (grain_settings(dataset) or {}).get("datasets", [])
    return [*(getattr(dataset, "parents", ()) or ()), *interleaved]
