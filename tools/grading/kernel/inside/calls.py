"""Calls the judge drives: the learner's function run here, fed item by item by the judge.

A call with an iterator among its arguments (`start_call`) runs the learner's function on
a thread of its own; each item the function reads is asked of the judge (`feed`), so what
the judge's iterator does between items (stop, raise, look at the folder) happens when it
would. A folder the judge made for the function stands for one the kernel makes at the
judge's path in the work folder, which the judge reads. While the kernel runs a TODO's
function for the judge, the course's solved copy of it raises (`call_refusing_copy`), and
each file renamed is noted with its size then (`watch_renames`).
"""

import builtins
import importlib
import os
import queue
import shutil
import threading

import tensorflow as tf

from tools.grading.kernel.inside import wire

_current = {}  # "call": (inbox, outbox) of the call the judge drives now.

# The course's solved copy of a TODO's function, by the TODO's name (lab 2): while the
# kernel runs that TODO's function for the judge, the copy raises (its code swapped, so an
# alias or an earlier import raises too), and the judge's check says it earns nothing.
COURSE_COPIES = {
    "to_example": ("utils.records", "to_example"),
    "write_shard": ("utils.shard_files", "write_shard"),
}


def error_of(error):
    """[an error's type name, its message's first line]: an error as data."""
    lines = str(error).strip().splitlines()
    return [type(error).__name__, lines[0] if lines else ""]


def _raised(name, message):
    """The built-in exception of that name (RuntimeError for any other), with `message`."""
    kind = getattr(builtins, str(name), None)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        kind = RuntimeError
    return kind(str(message))


def _refuse_course_copy(name):
    """Swaps the code of TODO `name`'s course copy for a raiser; returns what undoes it."""

    def _refuse(*args, **keywords):
        raise NotImplementedError("course copy")

    where = COURSE_COPIES.get(str(name))
    try:
        function = getattr(importlib.import_module(where[0]), where[1]) if where else None
        code = function.__code__ if function is not None else None
    except (ImportError, AttributeError):
        code = None
    if code is None:
        return lambda: None
    function.__code__ = _refuse.__code__

    def restore():
        function.__code__ = code

    return restore


def call_refusing_copy(name, function, args):
    """`function(*args)` with TODO `name`'s course copy refused."""
    restore = _refuse_course_copy(name)
    try:
        return function(*args)
    finally:
        restore()


def watch_renames(renamed):
    """Notes each file's name and size when it is renamed (tf.io.gfile.rename, os.rename,
    os.replace, shutil.move, Path.rename); returns the function that undoes it."""
    originals = (tf.io.gfile.rename, os.rename, os.replace, shutil.move)

    def noting(original):
        def rename(source, *args, **keywords):
            try:
                renamed.append([os.path.basename(os.fspath(source)), os.path.getsize(source)])
            except (OSError, TypeError):
                pass
            return original(source, *args, **keywords)

        return rename

    tf.io.gfile.rename, os.rename, os.replace, shutil.move = map(noting, originals)

    def restore():
        tf.io.gfile.rename, os.rename, os.replace, shutil.move = originals

    return restore


def start_call(request, function):
    """Starts `function` on the judge's arguments, on a thread of its own; returns its first
    state: it wants an item, it returned, or it raised."""
    inbox, outbox = queue.Queue(), queue.Queue()

    def fed():
        while True:
            outbox.put({"state": "wants"})
            item = inbox.get()
            if "raise" in item:
                raise _raised(*item["raise"])
            if "end" in item:
                return
            yield wire.decode(item["item"])

    args = []
    for data in request["args"]:
        if "fed" in data:
            args.append(fed())
        elif "folder" in data:
            os.makedirs(data["folder"], exist_ok=True)
            args.append(data["folder"])
        else:
            args.append(wire.decode(data))

    def run():
        renamed = []  # (name, size then) of each file renamed during the call: the judge's
        restore = watch_renames(renamed)  # check of a shard renamed while open.
        try:
            value = call_refusing_copy(request["name"], function, args)
        except BaseException as error:  # Said to the judge, which raises it in the check.
            restore()
            outbox.put({"state": "raised", "error": error_of(error), "renamed": renamed})
            return
        restore()
        outbox.put({"state": "returned", "value": wire.encode(value), "renamed": renamed})

    _current["call"] = (inbox, outbox)
    threading.Thread(target=run, daemon=True).start()
    return outbox.get(timeout=float(request["seconds"]))


def feed(request):
    """Gives the running call the judge's next item (or its end, or its error); returns the
    call's next state."""
    inbox, outbox = _current["call"]
    inbox.put(request["feed"])
    return outbox.get(timeout=float(request["seconds"]))
