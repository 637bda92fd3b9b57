"""Grain datasets in the judge, rebuilt from the kernel's description (`kernel/inside/grain.py`).

A MapDataset becomes one whose elements the judge asks the kernel for by index (data).
An IterDataset is made again, step by step, with Grain's own transformations and the
judge's objects of the names the kernel gave (its `shuffled`, its `data_source`, the lab's
`parse`): the judge runs it, worker processes and all, and no Python of the learner's.
Imported only for a Grain value: Grain is an optional lesson's.
"""

from __future__ import annotations

import types

import grain

from tools.grading.judge.graphs import NotSealable
from tools.grading.judge.remote_calls import error_of
from tools.grading.kernel.inside import wire


def _element(data: dict):
    if "error" in data:
        raise error_of(*data["error"])
    return wire.decode(data["value"])


class _Items:
    """The elements of the kernel's MapDataset, asked for by index, 64 at a time."""

    def __init__(self, client, todo: int, name: str, length: int):
        self.client, self.todo, self.name, self.length = client, todo, name, length
        self.cache: dict = {}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if index not in self.cache:
            start = index - index % 64
            stop = min(start + 64, self.length)
            found = self.client.ask(
                op="items", todo=self.todo, name=self.name, start=start, stop=stop
            )
            self.cache.update(zip(range(start, stop), found, strict=True))
        return _element(self.cache[index])


_MAX_ELEMENTS = 100_000  # Elements of a MapDataset the judge's workers are given.
_MAX_WORKERS, _MAX_THREADS = 64, 256  # Processes and threads the judge starts for a pipeline.


def _root(step: list, namespace: dict):
    """The MapDataset the steps start from: the judge's own object of that name."""
    found = namespace.get(step[1]) if isinstance(step[1], str) else None
    if step[0] == "source" and found is not None and not isinstance(found, grain.MapDataset):
        return grain.MapDataset.source(found)  # The lab's own data source, or data.
    if step[0] != "named" or not isinstance(found, grain.MapDataset):
        raise NotSealable(f"it starts from {step[1] or 'a value'} the grader cannot rebuild")
    if len(found) > _MAX_ELEMENTS:
        raise NotSealable(f"it starts from {len(found)} elements, over {_MAX_ELEMENTS}")
    return grain.MapDataset.source([found[i] for i in range(len(found))])  # Data, to pickle.


def _function(name, namespace: dict):
    found = namespace.get(name) if isinstance(name, str) else None
    if not isinstance(found, types.FunctionType):
        raise NotSealable(
            "it maps Python code of its own, which is not graded: map a function of the "
            "lab's (such as parse) by its name"
        )
    return found


def rebuild(steps: list, namespace: dict):
    """The learner's Grain pipeline, made again from its steps with the judge's objects."""
    dataset = _root(steps[-1], namespace)
    for step in reversed(steps[:-1]):
        kind, *settings = step
        if kind == "shuffle":
            dataset = dataset.shuffle(seed=int(settings[0]))
        elif kind == "window_shuffle":
            dataset = grain.experimental.WindowShuffleMapDataset(
                dataset, window_size=int(settings[0]), seed=int(settings[1])
            )
        elif kind == "repeat":
            dataset = dataset.repeat(settings[0], reseed_each_epoch=bool(settings[1]))
        elif kind == "map":
            dataset = dataset.map(_function(settings[0], namespace))
        elif kind == "to_iter_dataset":
            threads, buffer = (min(int(n), _MAX_THREADS) for n in settings)
            dataset = dataset.to_iter_dataset(grain.ReadOptions(threads, buffer))
        elif kind == "batch":
            dataset = dataset.batch(int(settings[0]), drop_remainder=bool(settings[1]))
        elif kind == "mp_prefetch":
            options = grain.MultiprocessingOptions(num_workers=min(int(settings[0]), _MAX_WORKERS))
            dataset = dataset.mp_prefetch(options)
        else:
            raise NotSealable(f"it uses a Grain step the grader cannot rebuild: {settings[:1]}")
    return dataset


def grain_value(answer: dict, client, todo: int, name: str, namespace: dict):
    """A Grain dataset, rebuilt in the judge from the kernel's description (data only)."""
    if answer["base"] == "MapDataset":
        return grain.MapDataset.source(_Items(client, todo, name, int(answer["length"])))
    return rebuild(list(answer["steps"]), namespace)
