# %% [markdown]
# # Lesson 6 (optional) · Convert at scale with Apache Beam
#
# Lab 2 converted the images with a loop on one machine. With millions of images, the
# conversion belongs on a distributed engine. Apache Beam runs the same pipeline on your
# machine (the DirectRunner, here) or on many machines (Google Cloud Dataflow, Flink,
# Spark). This lesson writes lab 2's conversion as a Beam pipeline that reuses lab 2's
# functions, checks its output with lab 2's validation, and measures what Beam costs on
# one small machine.
#
# **You will:**
#
# 1. Convert one image in a Beam `DoFn`, sending unreadable images to a side output (TODO 1).
# 2. Assemble the pipeline: match, reshuffle, convert, write the shards and skip list (TODO 2).
#
# Then you run it, validate its output, and compare its speed with lab 2's loop.

# %% [markdown]
# ## Set-up
#
# Run this cell before the ones below. It finds the course's `utils` package (beside
# `labs/` in a checkout) or installs it, installs TensorFlow for `tf.data` where it is
# missing, and says which backend Keras runs on, and why.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import hashlib
import json
import logging
import tempfile
from pathlib import Path

logging.getLogger().setLevel(logging.ERROR)  # Beam logs warnings about optional packages.
import apache_beam as beam
import tensorflow as tf
from apache_beam.io import fileio

from utils import charts, checks, readable_images, records, shard_files, timing
from utils.lab import conversion, data, sources, validation
from utils.lessons.convert_with_beam import beam_conversion

print(f"Apache Beam {beam.__version__}")

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192
JPEG_QUALITY = 90
NUM_SHARDS = 16
OUTPUT_DIR = None  # None: a new temporary folder; or a folder of yours (gs:// on Dataflow).
SEED = 42

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())
# The lesson's scratch folder: deleted when the kernel stops (or by `scratch.cleanup()`).
scratch = tempfile.TemporaryDirectory(prefix="lesson6-")
output_dir = OUTPUT_DIR or f"{scratch.name}/flowers-beam"
print("Beam's shards will go to:", output_dir)

# %% [markdown]
# ## 1. Convert one image in a `DoFn` (TODO 1)
#
# A Beam pipeline is a graph of transforms over collections (`PCollection`s). `ParDo`
# runs a `DoFn` on every element, on whichever worker holds it; its `process` method
# *yields* zero, one or more outputs. An output wrapped in `beam.pvalue.TaggedOutput(tag,
# value)` goes to a side output instead of the main one: that is how bad images are set
# aside, counted and listed, instead of crashing a job of a million images or vanishing.
#
# `beam_conversion.convert_image(path, ...)` does lab 2's work for one file with lab 2's
# own functions (`records.resize_and_crop`, `recompress`, `to_example`): it returns
# `(serialized record, None)`, or `(None, error)` for a file that cannot be decoded.
#
# **TODO 1.** Complete `ConvertImage.process(path)`: call `beam_conversion.convert_image`
# with `class_names=source.class_names`, `target_size=TARGET_SIZE` and
# `quality=JPEG_QUALITY`; yield the record, or, when there is none, yield
# `beam.pvalue.TaggedOutput("skipped", json.dumps({"path": path, "error": error}))`.


# %%
class ConvertImage(beam.DoFn):
    """One image path in; its record out, or a skipped entry on the side output."""

    def process(self, path):
        # TODO 1: convert the image; yield the record, or a TaggedOutput for a skipped one.
        ### BEGIN SOLUTION
        record, error = beam_conversion.convert_image(
            path, class_names=source.class_names, target_size=TARGET_SIZE, quality=JPEG_QUALITY
        )
        if record is None:
            yield beam.pvalue.TaggedOutput("skipped", json.dumps({"path": path, "error": error}))
        else:
            yield record
        ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
checks.check_convert_dofn(ConvertImage, todo=1, class_names=source.class_names)

# %% [markdown]
# ## 2. The pipeline (TODO 2)
#
# - `fileio.MatchFiles(source.match_pattern)` lists the files; `beam.Map(lambda match:
#   match.path)` keeps their paths, and `beam.Filter(readable_images.is_image_file)` only the
#   images' (a class folder may also hold notes or other files). `match_pattern` is the
#   folder's glob with its own path escaped: a folder named `photos [2024]` is matched as
#   written, not as a glob's `[...]`.
# - `beam.Reshuffle()` right after them. `MatchFiles` is `Create([pattern]) | MatchAll()`:
#   one match call, on one worker, which yields every path. A runner that fuses
#   consecutive steps into one (Dataflow does) would then run the conversion of every
#   path on that same worker. `Reshuffle()` breaks the fusion: the paths are
#   redistributed, and the conversion spreads over the workers. (The DirectRunner used
#   here runs on one machine either way.)
# - `beam.ParDo(ConvertImage()).with_outputs("skipped", main="records")` gives both
#   outputs: `converted.records` and `converted.skipped`.
# - `beam.io.WriteToTFRecord(prefix, file_name_suffix=".tfrec", num_shards=N)` writes the
#   records into N shards named `flowers-00000-of-00016.tfrec`. Beam does not know how
#   many records each shard holds until the end, so its names have no count; lab 2's
#   validation reads Beam's names too, and the sidecar is written after the run.
# - `beam.io.WriteToText(path, shard_name_template="")` writes the skipped list as one file.
#
# **TODO 2.** Complete `build_conversion(pipeline, source, output_dir, num_shards)` with
# those five steps. Write the shards with the prefix `f"{output_dir}/flowers"` and the
# skipped list to `f"{output_dir}/{beam_conversion.SKIPPED_FILE}"`.


# %%
def build_conversion(pipeline, source, output_dir, num_shards):
    """Adds lab 2's conversion to a Beam pipeline."""
    # TODO 2: match the files, convert each, write the shards and the skipped list.
    ### BEGIN SOLUTION
    paths = (
        pipeline
        | "Match files" >> fileio.MatchFiles(source.match_pattern)
        | "Paths" >> beam.Map(lambda match: match.path)
        | "Images only" >> beam.Filter(readable_images.is_image_file)
        | "Spread over workers" >> beam.Reshuffle()
    )
    converted = paths | "Convert" >> beam.ParDo(ConvertImage()).with_outputs(
        "skipped", main="records"
    )
    converted.records | "Write shards" >> beam.io.WriteToTFRecord(
        f"{output_dir}/flowers", file_name_suffix=".tfrec", num_shards=num_shards
    )
    converted.skipped | "Write skipped" >> beam.io.WriteToText(
        f"{output_dir}/{beam_conversion.SKIPPED_FILE}", shard_name_template=""
    )
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
checks.check_build_conversion(build_conversion, todo=2, class_names=source.class_names)

# %% [markdown]
# ## Run it
#
# `beam_conversion.convert_with_beam()` creates the pipeline with its options (here the
# local DirectRunner), adds your `build_conversion`, runs it, and then writes lab 2's
# sidecar: it counts the records of each shard and takes in the skipped list.

# %%
beam_run = beam_conversion.convert_with_beam(
    source,
    output_dir,
    target_size=TARGET_SIZE,
    num_shards=NUM_SHARDS,
    jpeg_quality=JPEG_QUALITY,
    build=build_conversion,
)

# %%
# Beam deals the records to its shards in turn, from a random first shard in each bundle.
beam_validation = validation.validate(output_dir)

# %% [markdown]
# ## Beam against lab 2's loop, on this machine
#
# The same images, converted by lab 2's `conversion.convert()` (one `tf.data` pipeline,
# all cores) into another folder.

# %%
loop_report = conversion.convert(
    source,
    f"{scratch.name}/flowers-loop",
    target_size=TARGET_SIZE,
    num_shards=NUM_SHARDS,
    jpeg_quality=JPEG_QUALITY,
    seed=SEED,
)


# %%
def image_set(folder):
    """The set of (label, SHA-256 of the image's JPEG bytes) in a folder of shards."""
    parsed = tf.data.TFRecordDataset(shard_files.find_shards(folder)).map(records.parse_record)
    return {
        (record["label"].decode(), hashlib.sha256(record["image"]).hexdigest())
        for record in parsed.as_numpy_iterator()
    }


same_images = image_set(output_dir) == image_set(loop_report.output_dir)
print(f"Beam and lab 2's loop wrote the same (label, image) pairs: {same_images}")

# %% [markdown]
# ## Bad input, through Beam (optional)
#
# The folder of damaged files from lab 2: the unreadable files go to the side output and
# into the sidecar, and the validation shows input = written + skipped. What TensorFlow's
# JPEG decoder logged on the truncated file is printed once, after the report.

# %%
damaged_source = sources.resolve_source(
    str(data.make_damaged_dataset(Path(scratch.name) / "damaged"))
)
damaged_output = f"{scratch.name}/damaged-beam"
damaged_run = beam_conversion.convert_with_beam(
    damaged_source, damaged_output, target_size=TARGET_SIZE, num_shards=2, build=build_conversion
)

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
beam_rate = beam_run.report.records_per_second
loop_rate = loop_report.records_per_second
print(
    f"Beam (DirectRunner, this machine): {beam_run.report.num_written} images in "
    f"{beam_run.report.seconds:.1f} s, {beam_rate:.0f} images/s."
)
print(
    f"Lab 2's loop: {loop_report.num_written} images in {loop_report.seconds:.1f} s, "
    f"{loop_rate:.0f} images/s: Beam ran at {beam_rate / loop_rate:.2f}x its speed here."
)
speeds = [
    timing.ThroughputResult(
        name, report.num_written, report.seconds, report.records_per_second, None, 0.0
    )
    for name, report in [("Beam, DirectRunner", beam_run.report), ("lab 2's loop", loop_report)]
]
figure = charts.plot_throughput(speeds, title="Converting the same images on this machine")
print(
    f"Validation: {'valid' if beam_validation.ok else 'INVALID'}; "
    f"{beam_validation.num_input_images} input images = {beam_validation.num_records} "
    f"written + {len(beam_validation.skipped)} skipped; same images as lab 2: {same_images}."
)

# %% [markdown]
# On one small machine, Beam is slower than a `tf.data` loop: it moves every element
# through its own machinery (serialization between steps, bundles, a final rename of the
# shards), and the DirectRunner exists to test pipelines, not to be fast. What it buys is
# that the same code runs on many machines. On Dataflow, the match is one call, and the
# conversion and the writes after the `Reshuffle()` are spread over as many workers as the
# job needs, and a failed worker's work is retried; the loop of lab 2 would take days for
# a hundred million images on one machine.
#
# **Running it on Dataflow** (not run here: it needs a Google Cloud project and billing).
# The workers need TensorFlow and Beam (a requirements file) and the course's `utils` (a
# wheel):
#
# ```bash
# echo tensorflow-cpu==2.21.0 > /tmp/dataflow-requirements.txt
# cat requirements-beam.txt >> /tmp/dataflow-requirements.txt
# pip wheel --no-deps -w dist .
# python -m tools.convert_beam --source "gs://YOUR_BUCKET/flowers/*/*.jpg" \
#     --output-dir gs://YOUR_BUCKET/flowers-tfrecords --num-shards 64 -- \
#     --runner=DataflowRunner --project=YOUR_PROJECT --region=us-central1 \
#     --temp_location=gs://YOUR_BUCKET/tmp --requirements_file=/tmp/dataflow-requirements.txt \
#     --extra_package=dist/tpu_speed_pipelines-0.1.0-py3-none-any.whl
# ```
#
# Labs 3 and 4 read Beam's shards like lab 2's: pass the output folder as `SHARDS_DIR`.
