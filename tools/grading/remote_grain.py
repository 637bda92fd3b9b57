"""Grain datasets in the judge, rebuilt from the kernel's description (`export_calls.py`).

A MapDataset becomes one whose elements the judge asks the kernel for by index; an
IterDataset, one that gives the kernel's first two elements, whose steps are stand-ins
named as the kernel's were (what a check that counts worker processes walks). Only data
crosses: type names, numbers, arrays, bytes; no object of the learner's. Imported only
for a Grain value: Grain is an optional lesson's.
"""

from __future__ import annotations

import grain

from tools.grading import wire
from tools.grading.graphs import NotSealable
from tools.grading.remote_calls import error_of


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
            found = self.client.ask(op="items", todo=self.todo, name=self.name,
                                    start=start, stop=stop)  # fmt: skip
            self.cache.update(zip(range(start, stop), found, strict=True))
        return _element(self.cache[index])


class _Iterator(grain.DatasetIterator):
    def __init__(self, elements: list):
        super().__init__()
        self.elements = iter(elements)

    def __next__(self):
        return _element(next(self.elements))

    def get_state(self):
        raise NotSealable("a described Grain iterator has no state")

    def set_state(self, state):
        raise NotSealable("a described Grain iterator has no state")


class _Described(grain.IterDataset):
    def __init__(self, steps: list, elements: list):
        super().__init__()
        self._datasets = steps  # What a check walks: stand-ins named as the kernel's steps.
        self.elements = elements

    def __iter__(self):
        return _Iterator(self.elements)


def grain_value(answer: dict, client, todo: int, name: str):
    """A Grain dataset, rebuilt in the judge from the kernel's description (data only)."""
    if answer["base"] == "MapDataset":
        return grain.MapDataset.source(_Items(client, todo, name, int(answer["length"])))
    steps = [type(str(step), (), {})() for step in answer["steps"]]
    return type(str(answer["type"]), (_Described,), {})(steps, list(answer["elements"]))
