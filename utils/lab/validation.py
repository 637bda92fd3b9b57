"""Validation of a set of TFRecord shards: every record read back, every input accounted for."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import errors, readable_images, records, shard_files, sidecar
from utils.lab import progress

# Beyond this many classes the table is folded: a column a class would not fit a screen.
MAX_CLASS_COLUMNS = 12
_MAX_RECORD_PROBLEMS = 5  # Problems listed per shard; one bad schema would repeat per record.


@dataclasses.dataclass(frozen=True)
class ShardReport:
    """One shard read back: its name, the count in its name, records read, per-class counts."""

    name: str
    count_in_name: int | None
    num_records: int
    class_counts: dict[str, int]


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """What `validate` found.

    Attributes:
        output_dir: the shards' folder.
        shards: one `ShardReport` per shard.
        class_names: the classes, from the sidecar.
        num_input_images: images in the source, from the sidecar.
        skipped: (path, error) of each image the conversion skipped, from the sidecar.
        problems: everything wrong, one line each; empty when the set is valid.
    """

    output_dir: str
    shards: list[ShardReport]
    class_names: list[str]
    num_input_images: int
    skipped: list[tuple[str, str]]
    problems: list[str]

    @property
    def num_records(self) -> int:
        """The records read from all the shards together."""
        return sum(shard.num_records for shard in self.shards)

    @property
    def ok(self) -> bool:
        """True when validation found no problem."""
        return not self.problems

    def summary(self) -> str:
        """Returns the report `validate` prints.

        Returns:
            A table of shards by class, the totals, the skipped files and the problems.
        """
        width = max([len(s.name) for s in self.shards] + [5])
        folded = len(self.class_names) > MAX_CLASS_COLUMNS  # Three columns, not one a class.
        # Each class column is as wide as its whole name: a name cut short could look like
        # another ("sunflowers_red" and "sunflowers_yellow" both cut to "sunflowers").
        columns = {name: max(10, len(name)) for name in self.class_names}
        header = f"{'shard':<{width}}  {'records':>7}  " + (
            f"{'classes':>7}  per class"
            if folded
            else "  ".join(f"{name:>{columns[name]}}" for name in self.class_names)
        )

        def row(counts: dict) -> str:
            if folded:
                per_class = [counts.get(name, 0) for name in self.class_names]
                present = sum(count > 0 for count in per_class)
                return f"{present:>7}  {min(per_class)}-{max(per_class)}"
            return "  ".join(f"{counts.get(n, 0):>{columns[n]}}" for n in self.class_names)

        lines = [header, "-" * len(header)]
        for shard in self.shards:
            counts = row(shard.class_counts)
            lines.append(f"{shard.name:<{width}}  {shard.num_records:>7}  {counts}")
        totals = collections.Counter()
        for shard in self.shards:
            totals.update(shard.class_counts)
        counts = row(totals)
        lines += ["-" * len(header), f"{'total':<{width}}  {self.num_records:>7}  {counts}"]
        if folded:
            lines.append(
                f"({len(self.class_names):,} classes, a column each too many: 'classes' counts "
                "those in a shard, 'per class' a class's fewest-most records.)"
            )
        return "\n".join([*lines, "", self.accounting()])

    def accounting(self) -> str:
        """Returns what every summary of the set ends with: the inputs accounted for, the verdict.

        Returns:
            "Input images: N = written + skipped.", the skipped files a line per reason
            (`readable_images.describe_skipped`), then "Valid: ..." or each problem.
        """
        lines = [
            f"Input images: {self.num_input_images} = {self.num_records} written "
            f"+ {len(self.skipped)} skipped."
        ]
        if self.skipped:
            lines.append(readable_images.describe_skipped(self.skipped, "  Skipped"))
        if self.ok:
            lines.append("Valid: every record parses, every count matches.")
        else:
            lines.append(f"INVALID: {len(self.problems)} problem(s):")
            lines += [f"  {problem}" for problem in self.problems]
        return "\n".join(lines)


def validate(output_dir: str, *, verbose: bool = True) -> ValidationReport:
    """Reads every shard in `output_dir` back and checks it against its name and the sidecar.

    Checks: the sidecar exists; every record parses with `records.FEATURES`; its image
    decodes to the sidecar's size with 3 channels; its class, label and one-hot agree; its
    original size is positive; each shard holds the count in its name and in the sidecar,
    at the size written; the shards are those the sidecar lists, none missing and no
    extra one; no conversion was left unfinished; there are records of at least 2 classes;
    and the records plus the skipped images add up to the input images. Without the
    sidecar, it says so and reads no record (there is nothing to check them against).

    Args:
        output_dir: the shards' folder (local or `gs://`).
        verbose: print the report's summary.

    Returns:
        A `ValidationReport`; `report.ok` is True when nothing is wrong.

    Example:
        report = validation.validate("/tmp/flowers-tfrec")
        assert report.ok, report.problems
    """
    output_dir = str(output_dir).rstrip("/")
    problems = []
    try:
        metadata = sidecar.read_metadata(output_dir)
    except FileNotFoundError as error:
        metadata = {}
        problems.append(str(error))
    if tf.io.gfile.exists(f"{output_dir}/{shard_files.INCOMPLETE_FOLDER}"):
        problems.append(
            f"{shard_files.INCOMPLETE_FOLDER}: a conversion into this folder did not finish. "
            "Run it again: it finishes that set, or deletes it if it was not whole."
        )
    shards = []
    if not metadata:
        # Without the sidecar there are no classes or sizes to check the records against.
        found = shard_files.find_shards(output_dir)
        problems.append(
            f"{len(found)} shard-like file(s) in {output_dir}; their records are not checked "
            "without the sidecar."
        )
    else:
        class_names = list(metadata.get("class_names", []))
        problems += [f"{line}." for line in shard_files.shard_set_problems(output_dir, metadata)]
        for name in progress.track(sorted(metadata.get("shards", {})), desc="Validating shards"):
            path = f"{output_dir}/{name}"
            if not tf.io.gfile.exists(path):
                continue
            shard, shard_problems = _read_shard(path, class_names, metadata.get("target_size"))
            count = metadata["shards"][name]
            if shard.num_records != count and shard.count_in_name is None:
                shard_problems.append(
                    f"{name}: the sidecar says {count} records; it holds {shard.num_records}."
                )
            shards.append(shard)
            problems += shard_problems
    skipped = [(image["path"], image["error"]) for image in metadata.get("skipped", [])]
    num_inputs = metadata.get("num_input_images", 0)
    num_records = sum(shard.num_records for shard in shards)
    if metadata and num_records + len(skipped) != num_inputs:
        problems.append(
            f"Input images {num_inputs} != {num_records} records + {len(skipped)} skipped: "
            f"{num_inputs - num_records - len(skipped)} image(s) unaccounted for."
        )
    if metadata and num_records == 0:
        problems.append("No records: nothing to learn from.")
    if metadata and len(metadata.get("class_names", [])) < 2:
        problems.append(
            f"Classes {metadata.get('class_names')}: a classifier needs at least 2 classes."
        )
    class_names = list(metadata.get("class_names", []))
    report = ValidationReport(output_dir, shards, class_names, num_inputs, skipped, problems)
    if verbose:
        print(report.summary())
    return report


def _record_facts(serialized):
    record = records.parse_record(serialized)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    return (
        record["class"],
        record["label"],
        record["size"],
        record["one_hot_class"],
        tf.shape(image),
    )


def _read_shard(
    path: str, class_names: list[str], target_size: int | None
) -> tuple[ShardReport, list[str]]:
    """Reads one shard; returns its `ShardReport` and the problems found in it."""
    name = Path(path).name
    problems, counts, num_records = [], collections.Counter(), 0
    facts = tf.data.TFRecordDataset(path).map(_record_facts)
    try:
        for class_index, label, size, one_hot, shape in facts.as_numpy_iterator():
            problem = _record_problem(class_index, label, size, one_hot, shape, class_names)
            if problem is None and target_size and tuple(shape) != (target_size, target_size, 3):
                problem = f"image of shape {tuple(shape)}, not ({target_size}, {target_size}, 3)"
            if problem and len(problems) < _MAX_RECORD_PROBLEMS:
                problems.append(f"{name}: record {num_records}: {problem}.")
            elif problem and len(problems) == _MAX_RECORD_PROBLEMS:
                problems.append(f"{name}: more records with problems; the first are above.")
            counts[label.decode(errors="replace")] += 1
            num_records += 1
    except tf.errors.OpError as error:
        message = errors.error_message(error)
        problems.append(f"{name}: record {num_records} does not parse: {message}")
    count_in_name = shard_files.shard_record_count(path)
    if count_in_name is not None and count_in_name != num_records:
        problems.append(f"{name}: its name says {count_in_name} records; it holds {num_records}.")
    return ShardReport(name, count_in_name, num_records, dict(counts)), problems


def _record_problem(
    class_index: np.int64,
    label: bytes,
    size: np.ndarray,
    one_hot: np.ndarray,
    shape: np.ndarray,
    class_names: list[str],
) -> str | None:
    if not 0 <= class_index < len(class_names):
        return f"class {class_index} is not an index into {len(class_names)} classes"
    if label.decode(errors="replace") != class_names[class_index]:
        return f"label {label!r} is not class {class_index} ({class_names[class_index]})"
    if len(one_hot) != len(class_names) or int(np.argmax(one_hot)) != class_index:
        return f"one_hot_class {one_hot.tolist()} does not encode class {class_index}"
    if min(size) < 1:
        return f"original size {size.tolist()} is not a positive (height, width)"
    if shape[-1] != 3:
        return f"image with {shape[-1]} channels, not 3"
    return None
