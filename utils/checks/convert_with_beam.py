"""Checks for lesson 6: the conversion as a Beam DoFn and as a Beam pipeline."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import tensorflow as tf

from utils import readable_images, records, shard_files
from utils.checks import _samples
from utils.checks._base import CHECK_ERRORS, fail, first_line, passed
from utils.lab import data, sources, validation


def _write_dofn_samples(folder: Path, class_names: Sequence[str]) -> dict[str, str]:
    """Writes a readable JPEG, a grayscale JPEG and an empty file into the class folders.

    Returns:
        `{path: what it is}`.
    """
    picture = _samples.sample_picture()
    first, last = class_names[0], class_names[-1]
    files = {
        f"{first}/photo.jpg": ("a readable JPEG", _samples.encode(picture, "RGB", "JPEG")),
        f"{last}/grayscale.jpg": ("a grayscale JPEG", _samples.encode(picture, "L", "JPEG")),
        f"{first}/empty.jpg": ("an empty file", b""),
    }
    written = {}
    for relative, (what, content) in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written[str(path)] = f"{what} ({relative})"
    return written


def _outputs_of(dofn_class: type, path: str, what: str, *, todo: int, name: str) -> list:
    """What Beam would take from `process(path)`: the items of the iterable it returns."""
    __tracebackhide__ = True
    import apache_beam as beam

    try:
        returned = dofn_class().process(path)
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected one output for {what}; found an error: {first_line(error)}")
    if returned is None:
        return []
    if isinstance(returned, bytes | str | beam.pvalue.TaggedOutput | tf.Tensor):
        size = f" of {len(returned):,}" if isinstance(returned, bytes | str) else ""
        fail(
            todo,
            name,
            f"expected process() to yield its output; for {what} it returns a "
            f"{type(returned).__name__}{size}. Beam iterates over what process() returns, so "
            "a record returned gives one output per byte. Use `yield`, not `return`.",
        )
    try:
        return list(returned)
    except TypeError:
        fail(
            todo,
            name,
            f"expected process() to yield its output; for {what} it returns a "
            f"{type(returned).__name__}, which Beam cannot iterate over. Use "
            "`yield`.",
        )


def _check_skipped_entry(output: object, path: str, what: str, *, todo: int, name: str) -> None:
    __tracebackhide__ = True
    import apache_beam as beam

    expected = 'TaggedOutput("skipped", json.dumps({"path": path, "error": error}))'
    if not isinstance(output, beam.pvalue.TaggedOutput) or output.tag != "skipped":
        fail(todo, name, f"expected {expected} for {what}; found {output!r:.80}.")
    entry = output.value
    if isinstance(entry, str):
        try:
            entry = json.loads(entry)
        except ValueError:
            pass
    elif not isinstance(entry, bytes):
        fail(
            todo,
            name,
            f"expected the skipped entry for {what} to be a string, json.dumps(...) of "
            f"the path and the error; found a {type(entry).__name__}. WriteToText writes "
            "each entry as one line of text, which lab 2's validation reads back as JSON.",
        )
    if not isinstance(entry, dict) or entry.get("path") != path or not entry.get("error"):
        found = repr(output.value)  # A long path is cut in the middle: its end says most.
        found = found if len(found) <= 80 else f"{found[:30]}...{found[-47:]}"
        fail(
            todo,
            name,
            f"expected the skipped entry for {what} to be json.dumps({{'path': path, "
            f"'error': error}}); found {found}. Each line of the skipped list is "
            "read back as a JSON object naming the file and why it was skipped.",
        )


def check_convert_dofn(dofn_class: type, *, todo: int, class_names: Sequence[str]) -> None:
    """Checks `dofn_class().process(path)`: a record, or a "skipped" entry, per file.

    One record for a readable image; one `TaggedOutput("skipped", ...)` naming the path
    and the error for an unreadable one. The files it converts are written into temporary
    folders named after `class_names`.

    Args:
        dofn_class: the learner's `beam.DoFn` subclass.
        todo: the TODO's number, named in every message.
        class_names: the class names the learner's DoFn labels with.

    Raises:
        CheckFailed: naming the TODO and the file, when `process` returns instead of
            yielding, yields nothing or more than one output, a wrong record, or a skipped
            entry that is not the JSON of the path and the error.

    Example:
        checks.check_convert_dofn(ConvertImage, todo=1, class_names=source.class_names)
    """
    __tracebackhide__ = True
    name = "ConvertImage.process"
    expected = "one serialized record per readable image, a 'skipped' TaggedOutput otherwise"
    with tempfile.TemporaryDirectory() as folder:
        files = _write_dofn_samples(Path(folder), class_names)
        for path, what in files.items():
            outputs = _outputs_of(dofn_class, path, what, todo=todo, name=name)
            if not outputs:
                fail(
                    todo, name, f"not done yet: it yields nothing for {what}. Expected {expected}."
                )
            if len(outputs) != 1:
                kinds = ", ".join(type(output).__name__ for output in outputs[:4])
                fail(todo, name, f"expected one output for {what}; found {len(outputs)}: {kinds}.")
            output = outputs[0]
            if what.startswith("an empty file"):
                _check_skipped_entry(output, path, what, todo=todo, name=name)
                continue
            if not isinstance(output, bytes):
                fail(
                    todo,
                    name,
                    f"expected the record's bytes for {what}; found {type(output).__name__}.",
                )
            record = records.parse_record(tf.constant(output))
            folder_name = Path(path).parent.name
            if record["label"].numpy().decode() != folder_name:
                fail(todo, name, f"expected label {folder_name} for {what}.")
    passed(todo, "a record for each readable image, a 'skipped' entry for an unreadable one.")


def _damaged_folder(folder: Path, class_names: Sequence[str] | None) -> Path:
    """`data.make_damaged_dataset`'s files, in folders named after `class_names` in turn."""
    made = data.make_damaged_dataset(folder / "made", images_per_class=1)
    if not class_names or list(class_names) == list(data.CLASSES):
        return made
    root = folder / "images"
    for index, class_name in enumerate(data.CLASSES):
        target = root / class_names[index % len(class_names)]
        target.mkdir(parents=True, exist_ok=True)
        for path in (made / class_name).iterdir():
            path.rename(target / path.name)
    return root


def check_build_conversion(
    build_conversion: Callable, *, todo: int, class_names: Sequence[str] = ()
) -> None:
    """Runs `build_conversion` on a small folder with bad files and validates its output.

    It runs on Beam's DirectRunner in a temporary folder, and validates the shards and
    the skipped list like lab 2's. The folder's classes are named after `class_names`
    (the learner's DoFn knows only those); the embedded dataset's by default.

    Args:
        build_conversion: the learner's function, `(pipeline, source, output_dir,
            num_shards)`, that adds the conversion's steps to a Beam pipeline.
        todo: the TODO's number, named in every message.
        class_names: the class names the learner's DoFn labels with.

    Raises:
        CheckFailed: naming the TODO, when the pipeline fails, writes other shards, reads
            no file, converts non-images, or its output does not validate.

    Example:
        checks.check_build_conversion(build_conversion, todo=2)
    """
    __tracebackhide__ = True
    from utils.lessons.convert_with_beam import beam_conversion

    name = "build_conversion"
    with tempfile.TemporaryDirectory() as folder:
        # A `[` in the folder's name and a note among the images: the pipeline must match
        # the escaped path (`source.match_pattern`) and keep only the images.
        root = _damaged_folder(Path(folder) / "photos [check]", class_names)
        note = sorted(p for p in root.iterdir() if p.is_dir())[0] / "notes.txt"
        note.write_text("Not an image.\n")
        source = sources.resolve_source(str(root))
        output_dir = str(Path(folder) / "shards")
        try:
            beam_conversion.convert_with_beam(
                source, output_dir, num_shards=2, build=build_conversion, verbose=False
            )
        except (*CHECK_ERRORS, RuntimeError) as error:
            fail(todo, name, f"running the pipeline fails: {first_line(error)}")
        shards = [Path(path).name for path in shard_files.find_shards(output_dir)]
        if not shards:
            fail(
                todo,
                name,
                "not done yet: the pipeline wrote no shards. Expected 2, named "
                "flowers-0000N-of-00002.tfrec.",
            )
        wanted = ["flowers-00000-of-00002.tfrec", "flowers-00001-of-00002.tfrec"]
        if shards != wanted:
            fail(todo, name, f"expected shards {wanted}; found {shards}.")
        report = validation.validate(output_dir, verbose=False)
        if report.num_records == 0 and not report.skipped:
            fail(
                todo,
                name,
                f"the pipeline read no file of {root}. Match "
                "`source.match_pattern` (the folder's path escaped: a `[` in a "
                "folder name is not a glob's `[...]`).",
            )
        skipped_paths = [path for path, _ in report.skipped]
        not_images = [Path(p).name for p in skipped_paths if not readable_images.is_image_file(p)]
        if not_images:
            fail(
                todo,
                name,
                f"{', '.join(not_images)} went to the conversion: keep only the "
                "images with beam.Filter(readable_images.is_image_file).",
            )
        if len(report.skipped) != 3:
            fail(
                todo,
                name,
                f"expected the 3 unreadable files in the skipped list; found "
                f"{len(report.skipped)}. Write converted.skipped with WriteToText "
                f"to {beam_conversion.SKIPPED_FILE}.",
            )
        if not report.ok:
            fail(todo, name, f"the output does not validate: {report.problems[0]}")
    passed(
        todo,
        f"{report.num_input_images} images = {report.num_records} records in 2 "
        f"shards + {len(report.skipped)} skipped.",
    )
