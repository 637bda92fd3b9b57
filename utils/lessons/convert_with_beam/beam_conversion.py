"""Lab 2's conversion on Apache Beam: the same functions, on an engine that scales out.

Each image is converted by `ConvertImage`, which calls lab 2's reference functions
(`records.resize_and_crop`, `recompress`, `to_example`); an image that cannot be read or
decoded goes to the `skipped` side output, which is written as a list, never dropped.
Beam writes the shards with its own names (`flowers-00000-of-00016.tfrec`); after the run,
`finish` counts the records of each shard and writes lab 2's sidecar, so that
`validation.validate` and labs 3-4 read Beam's output like lab 2's.

Needs `pip install -r requirements-beam.txt`. Locally it runs on Beam's DirectRunner; on
Dataflow, pass the runner, project, region and `gs://` paths as pipeline options.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import errors, readable_images, records, shard_files
from utils.lab import conversion, data, output_folder, shard_metadata

if TYPE_CHECKING:
    import apache_beam

    from utils.lab import sources

# Beam turns a glob into a regular expression; an escaped `[` (`[[]`, see
# `ImageSource.match_pattern`) makes Python's `re` warn of a "possible nested set", which is
# not one here.
warnings.filterwarnings(
    "ignore", message="Possible nested set", category=FutureWarning, module="apache_beam"
)

SKIPPED = "skipped"
SKIPPED_FILE = "skipped.jsonl"


@contextlib.contextmanager
def _own_temporary_folder():
    """Runs the block with `tempfile`'s folder set to a new one, deleted afterwards.

    In IPython, Beam leaves its `beam-pipeline-temp*` folders behind (it expects
    Interactive Beam to delete them): one per pipeline, in the user's /tmp.
    """
    with tempfile.TemporaryDirectory(prefix="beam-") as folder:
        previous, tempfile.tempdir = tempfile.tempdir, folder
        try:
            yield
        finally:
            tempfile.tempdir = previous


def _beam():
    try:
        import apache_beam
    except ImportError as error:
        raise ImportError(
            "Apache Beam is not installed. Run: pip install -r requirements-beam.txt"
        ) from error
    return apache_beam


def convert_image(
    path: str, *, class_names: Sequence[str], target_size: int, quality: int
) -> tuple[bytes, None] | tuple[None, str]:
    """Converts one image file into a serialized record, with lab 2's functions.

    Args:
        path: an image file in a class folder (its folder's name is its class).
        class_names: the class names, in label order.
        target_size: side of the stored images, in pixels.
        quality: the JPEG quality the images are recompressed at.

    Returns:
        (serialized record, None), or (None, the error) if the file cannot be read or
        decoded.
    """
    try:
        # Upright (EXIF Orientation) and decoded no larger than needed, as `conversion` does.
        image_bytes = tf.io.read_file(path)
        image, size = records.decode_upright(image_bytes, min_side=target_size)
        image = records.to_srgb(image, image_bytes)  # As `conversion` does: colours as shown.
    except tf.errors.OpError as error:
        return None, errors.error_message(error)
    original_size = [int(side) for side in size.numpy()]
    resized = records.resize_and_crop(image, target_size)
    jpeg = records.recompress(resized, quality).numpy()
    class_index = list(class_names).index(path.replace("\\", "/").rsplit("/", 2)[-2])
    example = records.to_example(jpeg, class_index, original_size, class_names)
    return example.SerializeToString(), None


def make_convert_dofn(
    class_names: Sequence[str], target_size: int, quality: int
) -> apache_beam.DoFn:
    """Makes the conversion's Beam DoFn.

    Args:
        class_names: all class names, in label order (`convert_image`'s).
        target_size: the side of the square each image becomes.
        quality: the JPEG quality of the recompressed images.

    Returns:
        A `ConvertImage` DoFn: a path in, a record out, or a JSON entry (path, error) on
        the "skipped" side output.

    Raises:
        ImportError: if Apache Beam is not installed (with the command that installs it).
    """
    beam = _beam()

    class ConvertImage(beam.DoFn):
        def process(self, path):
            record, error = convert_image(
                path, class_names=class_names, target_size=target_size, quality=quality
            )
            if record is None:
                yield beam.pvalue.TaggedOutput(SKIPPED, json.dumps({"path": path, "error": error}))
            else:
                yield record

    return ConvertImage()


def build_pipeline(
    pipeline: apache_beam.Pipeline,
    source: sources.ImageSource,
    output_dir: str,
    num_shards: int,
    *,
    target_size: int,
    quality: int,
) -> None:
    """Adds the conversion to a Beam `pipeline`: match, reshuffle, convert, write shards, skips.

    Args:
        pipeline: the Beam pipeline to add the steps to.
        source: the images to convert.
        output_dir: where the shards and the skipped list are written.
        num_shards: the number of shards Beam writes.
        target_size: side of the stored images, in pixels.
        quality: the JPEG quality the images are recompressed at.

    Raises:
        ImportError: if Apache Beam is not installed (with the command that installs it).
    """
    beam = _beam()
    from apache_beam.io import fileio

    paths = (
        pipeline
        | "Match files" >> fileio.MatchFiles(source.match_pattern)
        | "Paths" >> beam.Map(lambda metadata: metadata.path)
        | "Images only" >> beam.Filter(readable_images.is_image_file)
        # MatchFiles is Create([pattern]) | MatchAll(): one match call. A runner that fuses
        # steps (Dataflow) would run every step after it on that one worker; a Reshuffle
        # breaks the fusion and spreads the paths over the workers.
        | "Spread over workers" >> beam.Reshuffle()
    )
    converted = paths | "Convert" >> beam.ParDo(
        make_convert_dofn(source.class_names, target_size, quality)
    ).with_outputs(SKIPPED, main="records")
    converted.records | "Write shards" >> beam.io.WriteToTFRecord(
        f"{output_dir}/{shard_files.SHARD_PREFIX}",
        file_name_suffix=shard_files.SHARD_SUFFIX,
        num_shards=num_shards,
    )
    converted[SKIPPED] | "Write skipped" >> beam.io.WriteToText(
        f"{output_dir}/{SKIPPED_FILE}", shard_name_template=""
    )


@dataclasses.dataclass(frozen=True)
class BeamRun:
    """What `convert_with_beam` did: the lab 2 report, and Beam's own time."""

    report: conversion.ConversionReport
    pipeline_seconds: float


def convert_with_beam(
    source: sources.ImageSource,
    output_dir: str,
    *,
    target_size: int = records.DEFAULT_TARGET_SIZE,
    num_shards: int = conversion.DEFAULT_NUM_SHARDS,
    jpeg_quality: int = records.DEFAULT_JPEG_QUALITY,
    pipeline_args: Sequence[str] = ("--runner=DirectRunner",),
    build: Callable | None = None,
    verbose: bool = True,
) -> BeamRun:
    """Runs the conversion on Beam, then writes lab 2's sidecar next to Beam's shards.

    Args:
        source: a `sources.ImageSource`.
        output_dir: a local folder, or `gs://` on Dataflow.
        target_size: side of the stored images, as in `conversion.convert`.
        num_shards: the number of shards Beam writes.
        jpeg_quality: the JPEG quality the images are recompressed at.
        pipeline_args: Beam pipeline options, e.g. `["--runner=DataflowRunner",
            "--project=...", "--region=...", "--temp_location=gs://..."]`.
        build: `build(pipeline, source, output_dir, num_shards)` adds the transforms (the
            learner's, in lesson 6); `build_pipeline` by default.
        verbose: print the report's summary.

    Returns:
        A `BeamRun`.

    Raises:
        ImportError: if Apache Beam is not installed (with the command that installs it).

    Example:
        run = beam_conversion.convert_with_beam(source, "/tmp/flowers-beam", num_shards=16)
    """
    beam = _beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    output_dir = str(output_dir).rstrip("/")
    tf.io.gfile.makedirs(output_dir)  # The sidecar goes there, even if Beam wrote nothing.
    # Only the previous set's own files (as its sidecar lists them) are deleted.
    for name in output_folder.start_new_set(output_dir):
        tf.io.gfile.remove(f"{output_dir}/{name}")
    start = time.perf_counter()
    if build is None:
        build = functools.partial(build_pipeline, target_size=target_size, quality=jpeg_quality)
    # TensorFlow's decoder logs a line of its own on a bad file: said once, after the report.
    with _own_temporary_folder(), errors.decoder_messages() as logged:
        with beam.Pipeline(options=PipelineOptions(list(pipeline_args))) as pipeline:
            build(pipeline, source, output_dir, num_shards)
    pipeline_seconds = time.perf_counter() - start
    report = finish(source, output_dir, target_size=target_size, jpeg_quality=jpeg_quality)
    report = dataclasses.replace(report, seconds=pipeline_seconds)
    if verbose:
        print(report.summary())
        if logged:
            print(f"TensorFlow's decoder logged, on the skipped files: {'; '.join(logged)}")
    return BeamRun(report, pipeline_seconds)


def finish(
    source: sources.ImageSource, output_dir: str, *, target_size: int, jpeg_quality: int
) -> conversion.ConversionReport:
    """Counts the records Beam wrote, reads its skipped list, and writes lab 2's sidecar.

    Args:
        source: the images that were converted.
        output_dir: the folder Beam wrote the shards and the skipped list to.
        target_size: side of the stored images, in pixels.
        jpeg_quality: the JPEG quality the images were recompressed at.

    Returns:
        The conversion's report, as lab 2's conversion gives it (its `seconds` is 0).
    """
    shards = shard_files.find_shards(output_dir)
    counts, output_bytes = [], 0
    for path in shards:
        images = tf.data.TFRecordDataset(path).map(lambda r: records.parse_record(r)["image"])
        lengths = [len(image) for image in images.as_numpy_iterator()]
        counts.append(len(lengths))
        output_bytes += sum(lengths)
    skipped_path = f"{output_dir}/{SKIPPED_FILE}"
    skipped = []
    if tf.io.gfile.exists(skipped_path):
        with tf.io.gfile.GFile(skipped_path) as file:
            entries = [json.loads(line) for line in file if line.strip()]
        skipped = [conversion.SkippedImage(e["path"], e["error"]) for e in entries]
        tf.io.gfile.remove(skipped_path)  # Its content goes into the sidecar.
    skipped_paths = {image.path for image in skipped}
    inputs = conversion.source_paths(source)
    report = conversion.ConversionReport(
        output_dir=output_dir,
        shards=shards,
        shard_counts=counts,
        num_input_images=len(inputs),
        skipped=sorted(skipped, key=lambda image: image.path),
        empty_class_folders=list(source.empty_class_folders),
        input_bytes=sum(tf.io.gfile.stat(p).length for p in inputs if p not in skipped_paths),
        output_image_bytes=output_bytes,
        seconds=0.0,
    )
    # Beam's order is its own; the seed is the course's default, so ensure_shards finds it.
    fingerprint = conversion.input_fingerprint(
        source,
        target_size=target_size,
        num_shards=len(shards),
        jpeg_quality=jpeg_quality,
        seed=data.DEFAULT_SEED,
    )
    shard_metadata.write_metadata(
        output_dir, source, report, target_size, jpeg_quality, fingerprint=fingerprint
    )
    return report
