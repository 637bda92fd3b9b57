"""The judge's side of `kernel/inside/beam.py`: lab 6's `DoFn` and pipeline, run in the kernel.

A learner's `DoFn` class stands here as a class whose `process(path)` sends the judge's
file (its bytes, at its path) to the kernel, where the learner's `process` runs; the outputs
come back as data (records' bytes, a `TaggedOutput`'s tag and value, or a type's name).
A learner's pipeline builder, given the check's Beam pipeline, sends the check's input
folder the same way; the kernel runs the learner's pipeline on it and sends back the files
it wrote, which the judge puts in the check's output folder, adding no step of its own to
the check's pipeline. The check then validates those outputs as it validates any.
"""

from __future__ import annotations

import base64
from pathlib import Path

from tools.grading.kernel.inside import wire

_MAX_BYTES = 64 * 2**20  # Of the check's input files sent to the kernel, in all.


def _files(paths) -> dict[str, str]:
    files, size = {}, 0
    for path in paths:
        if path.is_file() and not path.is_symlink():
            size += path.stat().st_size
            if size > _MAX_BYTES:
                raise ValueError("the check's input files are too large to send")
            files[str(path)] = base64.b64encode(path.read_bytes()).decode()
    return files


def _output(data):
    """An output as the check sees it: a record's bytes, a `TaggedOutput`, or a stand-in."""
    import apache_beam as beam

    if "tagged" in data:
        tag, value = data["tagged"]
        return beam.pvalue.TaggedOutput(str(tag), _output(value))
    if "type" in data:  # An object that does not cross: one of a class of that name.
        return type(str(data["type"]), (), {})()
    return wire.decode(data["value"])


def dofn_class(client, todo: int, name: str) -> type:
    """Stands for the learner's `DoFn` class: `process` runs in the kernel."""

    def process(self, path):
        files = _files([Path(path)]) if Path(path).is_file() else {}
        answer = client.ask(op="dofn_process", todo=todo, name=name, path=str(path), files=files)
        if "returned" in answer:
            return _output(answer["returned"])
        return iter([_output(item) for item in answer["items"]])

    return type(name, (), {"process": process})


def call(function, args: tuple):
    """`build(pipeline, source, output_dir, num_shards)` for a `remote.RemoteFunction`."""
    _pipeline, source, output_dir, num_shards = args
    root = Path(source.pattern).parent.parent
    answer = function.client.ask(
        op="beam_build",
        todo=function.todo,
        name=function.name,
        root=str(root),
        files=_files(sorted(root.rglob("*"))),
        output_dir=str(output_dir),
        num_shards=int(num_shards),
    )
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    for file_name, content in answer.items():
        if Path(file_name).name == file_name and file_name not in (".", ".."):
            (Path(output_dir) / file_name).write_bytes(base64.b64decode(content))
