"""The kernel's answers to the judge's questions about what each TODO made.

The grader's cells call `keep` right after each TODO cell (what the TODO bound, kept, then
a wait for the judge's check of it) and `finish` after the last; a check cell's other lines
take the solution's values the judge sent where the check failed (`references`).
`answer` is called for each question (`server.py`): a value described (`describe.py`), a
function traced for the judge's arguments (`traced.py`) or called with them, or one of the
calls the judge drives (`calls.py`, `grain.py`, `objects.py`, `beam.py`).
"""

import time

import numpy as np

from tools.grading.kernel.inside import beam, calls, grain, objects, traced, wire
from tools.grading.kernel.inside.describe import MISSING, describe

kept = {}  # "todo:name" -> the value after the TODO's cell; "todo:" -> True once kept.
judged = set()  # The TODOs the judge has judged.
finished = []  # Not empty once the last cell has run, or the judge has gone.
references = {}  # TODO -> {name: value}, the solution's, sent where its check failed.


def keep(todo, names, namespace):
    """Keeps the values `names` have now in `namespace` (a missing name is kept as missing),
    then waits until the judge has judged the TODO: a later cell that crashes the kernel
    cannot take an earlier TODO's verdict with it, and the two never compete for the CPU."""
    for name in names:
        kept[f"{todo}:{name}"] = namespace.get(name, MISSING)
    kept[f"{todo}:"] = True
    while todo not in judged and not finished:
        time.sleep(0.05)


def finish():
    """Says that no more will be kept: a question about a TODO not kept waits no more."""
    finished.append(True)


def same_as(kept, request, value):
    """The earlier name of the same TODO whose value this one is, or shares arrays with
    (lab 9's `resumed_batch = next_batch`): the judge then binds one object to both."""

    def arrays(value):
        """The numpy arrays `value` is or holds (a tuple or list of them)."""
        items = value if isinstance(value, (tuple, list)) else [value]
        return [item for item in items if isinstance(item, np.ndarray)]

    if value is None or value is ... or isinstance(value, (bool, int, float, str, bytes)):
        return None  # One object by the language, not by the learner: two stubs are `...`.
    for key, other in kept.items():
        todo, _, name = key.partition(":")
        if todo != str(request["todo"]) or not name or other is MISSING:
            continue
        if name == request["name"]:
            return None  # Only names kept before this one.
        if other is value or any(
            np.shares_memory(x, y) for x in arrays(value) for y in arrays(other)
        ):
            return name
    return None


def _call_keywords(request, function, namespace):
    """Calls `function` with the judge's arguments and keywords; describes its result."""
    args = [wire.decode(data) for data in request["args"]]
    keywords = {key: wire.decode(data) for key, data in request["keywords"].items()}
    return describe(function(*args, **keywords), namespace)


def _call(request, function, namespace):
    """Calls `function` with the judge's Python values, the TODO's course copy refused
    (`calls.call_refusing_copy`); describes its result (data or a graph)."""
    args = [wire.decode(arg) for arg in request["args"]]
    try:
        result = calls.call_refusing_copy(request["name"], function, args)
    except NotImplementedError as error:
        if not str(error).startswith("course copy"):
            raise
        return {"kind": "raised", "error": ["NotImplementedError", "course copy"]}
    return describe(result, namespace)


def _describe_kept(request, value, namespace):
    same = same_as(kept, request, value)
    return {"kind": "same", "as": same} if same else describe(value, namespace)


def _trace(request, function, namespace):
    specs = [wire.decode(spec) for spec in request["specs"]]
    return traced.trace(function, specs, namespace)


# What each question of the judge's asks of the kept value:
# op -> (request, value, namespace) -> the answer, as data.
QUESTIONS = {
    "describe": _describe_kept,
    "call": _call,
    "call_keywords": _call_keywords,
    "trace": _trace,
    "start": lambda request, value, namespace: calls.start_call(request, value),
    "feed": lambda request, value, namespace: calls.feed(request),
    "items": lambda request, value, namespace: grain.items(request, value),
    "trace_datasets": objects.trace_datasets,
    "dofn_process": lambda request, value, namespace: beam.dofn_process(request, value),
    "beam_build": lambda request, value, namespace: beam.beam_build(request, value),
}


def answer(request, namespace):
    """The answer to one question of the judge's; `namespace` holds the notebook's names.

    `judged` says the judge has judged a TODO (with the solution's values where its check
    failed); any other question about a TODO's name waits until that TODO is kept.
    """
    if request["op"] == "judged":
        sent = request.get("references") or {}
        if sent:
            references[request["todo"]] = {n: wire.decode(v) for n, v in sent.items()}
        judged.add(request["todo"])
        return True
    key = f"{request['todo']}:{request['name']}"
    while key not in kept and not finished:
        time.sleep(0.05)
    value = kept.get(key, MISSING)
    return QUESTIONS.get(request["op"], _trace)(request, value, namespace)
