"""The judge's side of `export_objects.py`'s `call_model`: a learner's model, rebuilt by Keras.

A check that passes a strategy (lab 4's `build_model(choice)`) names it to the kernel: the
lab's own, or a stand-in. The kernel calls the learner's function with its own strategy
of that name and sends the model back as data: its Keras configuration (`to_json`) and
its compile configuration (optimizer, schedule, loss, metrics, steps per execution). The
judge rebuilds the model from them with Keras's own classes, in safe mode: a class or a
function of the learner's (a custom layer, a Python loss, a `Lambda`) is refused, not run.
What the check reads of the model is then the judge's own Keras object. One fact crosses
as the kernel's word: whether each variable was made under the stand-in's scope (the
judge then builds the model under its own stand-in's scope, or outside any).
"""

from __future__ import annotations

import contextlib
import json

from tools.grading import wire
from tools.grading.graphs import NotSealable


def _first_line(error: Exception) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def rebuild(answer: dict, stand_in=None):
    """The model the kernel described, built again with Keras; raises `NotSealable`."""
    import keras

    in_scope = answer.get("in_scope")
    scope = stand_in.scope() if stand_in is not None and in_scope and all(in_scope) else None
    try:
        with scope or contextlib.nullcontext():
            # Safe mode refuses a `Lambda`'s code; the compile configuration is read in safe
            # mode too (Keras's default: the course never enables unsafe deserialization).
            model = keras.saving.deserialize_keras_object(
                json.loads(answer["model"]), safe_mode=True
            )
            compile_config = json.loads(answer["compile"])
            if compile_config:
                model.compile_from_config(compile_config)
    except Exception as error:  # Anything Keras cannot rebuild from its own classes.
        raise NotSealable(
            "your model is checked outside your notebook, rebuilt from its configuration with "
            f"Keras's own layers, losses and optimizers, and that failed: {_first_line(error)}"
        ) from None
    return model


def call(function, args: tuple):
    """`function(*args)` for a `remote.RemoteFunction` given a strategy: the model, rebuilt."""
    encoded, stand_in = [], None
    for arg in args:
        if type(arg).__name__ == "StrategyChoice":
            lab = arg is function.namespace.get("choice")
            encoded.append({"strategy": "lab" if lab else "stand_in"})
            stand_in = None if lab else arg
        else:
            try:
                encoded.append({"value": wire.encode(arg)})
            except wire.WireError as error:
                message = f"the check's arguments cannot reach your function: {error}"
                raise NotSealable(message) from None
    answer = function.client.ask(
        op="call_model", todo=function.todo, name=function.name, args=encoded
    )
    if "value" in answer:  # Not a model: `...`, None or other data.
        return wire.decode(answer["value"])
    return rebuild(answer, stand_in)
