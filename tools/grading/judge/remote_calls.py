"""The judge's side of `kernel/inside/calls.py`: calls it drives item by item (Grain: remote_grain).

A learner's function called with an iterator runs in the learner's kernel; each item it
reads comes from the check's own iterator, in the judge, when the function asks for it.
A folder of the judge's among the arguments stands for a fresh folder in the kernel's
work folder (which the judge sees read-only): before each item and after the call, the
judge copies that folder's files into its own, so the check reads the files the function
wrote. Only data crosses: no object of the learner's.
"""

from __future__ import annotations

import builtins
import itertools
import shutil
import tempfile
from pathlib import Path

from tools.grading.judge.graphs import NotSealable
from tools.grading.kernel.inside import wire
from utils.checks import write_tfrecords

_MAX_COPY = 64 * 2**20  # Bytes of one file the judge copies from the kernel's folder.
_NUMBERS = itertools.count()  # Each judge's folder gets a new kernel's folder.


def error_of(kind: str, message: str) -> Exception:
    """A built-in exception of that name, else `NotSealable`: data, never a learner's class."""
    found = getattr(builtins, str(kind), None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found(str(message))
    return NotSealable(f"{kind}: {message}")


def _judges_folder(arg) -> bool:
    if not isinstance(arg, str) or not Path(arg).is_dir():
        return False
    return Path(tempfile.gettempdir()).resolve() in Path(arg).resolve().parents


def _mirror(folders: dict, work: Path) -> None:
    """Makes each judge's folder hold what its kernel's folder holds now (files copied)."""
    for judges, kernels in list(folders.items()):
        if not Path(judges).is_dir():  # The check is done with it.
            continue
        kernel = Path(kernels)
        inside = kernel.is_dir() and work.resolve() in kernel.resolve().parents
        found = {path.name: path for path in kernel.iterdir()} if inside else {}
        for old in Path(judges).iterdir():
            if old.name not in found:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        for name, path in found.items():
            target = Path(judges) / name
            if path.is_dir() and not path.is_symlink():
                target.mkdir(exist_ok=True)
            elif path.is_file() and not path.is_symlink() and path.stat().st_size <= _MAX_COPY:
                target.write_bytes(path.read_bytes())
            else:  # A link or anything else: its name only.
                target.write_bytes(b"")


def call_fed(client, todo: int, name: str, args: tuple, folders: dict):
    """Calls the learner's function in the kernel, feeding it the check's iterator."""
    work = Path(client.address).parent
    encoded, items = [], iter(())
    for arg in args:
        if hasattr(arg, "__next__"):
            encoded.append({"fed": True})
            items = arg
        elif _judges_folder(arg):
            kernels = folders.setdefault(arg, str(work / "_grader_folders" / str(next(_NUMBERS))))
            encoded.append({"folder": kernels})
        else:
            encoded.append(wire.encode(arg))
    ask = lambda **request: client.ask(todo=todo, name=name, seconds=client.seconds, **request)  # noqa: E731
    reply, raised, feed = ask(op="start", args=encoded), None, {"item": None}
    while reply["state"] == "wants":
        _mirror(folders, work)
        if "item" not in feed:  # The check's iterator had ended: a kernel asking on is not.
            raise NotSealable("it asked for records after the last one")
        try:
            feed = {"item": wire.encode(next(items))}
        except StopIteration:
            feed = {"end": True}
        except BaseException as error:  # The check's own interruption, sent on to the function.
            raised, feed = error, {"raise": [type(error).__name__, str(error)]}
        reply = ask(op="feed", feed=feed)
    _mirror(folders, work)
    for renamed, size in reply.get("renamed", [])[:100]:  # For lab 2's check: sizes as data.
        write_tfrecords.record_rename(str(renamed), int(size))
    if reply["state"] == "raised":
        kind, message = reply["error"]
        raise (
            raised
            if raised is not None and kind == type(raised).__name__
            else error_of(kind, message)
        )
    value = wire.decode(reply["value"])
    for judges, kernels in folders.items():  # A path in the kernel's folder: the judge's copy.
        if isinstance(value, str) and value.startswith(kernels + "/"):
            value = judges + value[len(kernels) :]
    return value


def call_with_keywords(function, args: tuple, keywords: dict):
    """Calls the learner's function in the kernel with keywords; its result comes back as data."""
    keywords = {str(key): wire.encode(value) for key, value in keywords.items()}
    encoded = {"args": [wire.encode(arg) for arg in args], "keywords": keywords}
    answer = function.client.ask(
        op="call_keywords", todo=function.todo, name=function.name, **encoded
    )
    if answer.get("kind") != "value":
        raise NotSealable(f"it returned a {answer.get('kind')}, which does not cross here")
    return wire.decode(answer["value"])
