"""Converts images to TFRecord shards with Apache Beam: lab 2's conversion, scaled out.

Everything after `--` is passed to Beam as pipeline options. Without them it runs on the
local DirectRunner. See lesson 6 and the README for the Dataflow command.

Usage:
    python -m tools.convert_beam --source embedded --output-dir /tmp/flowers-beam
    python -m tools.convert_beam --source "gs://BUCKET/flowers/*/*.jpg" \\
        --output-dir gs://BUCKET/flowers-tfrecords --num-shards 64 -- \\
        --runner=DataflowRunner --project=PROJECT --region=us-central1 \\
        --temp_location=gs://BUCKET/tmp --requirements_file=requirements-beam.txt \\
        --extra_package=dist/tpu_speed_pipelines-0.1.0-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import sys

from utils import records
from utils.lab import conversion, sources, validation
from utils.lessons.convert_with_beam import beam_conversion


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    beam_args = argv[argv.index("--") + 1 :] if "--" in argv else ["--runner=DirectRunner"]
    own_args = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="embedded", help="as the labs' DATA_SOURCE")
    parser.add_argument("--num-images", type=int, default=3670, help="embedded source only")
    parser.add_argument("--output-dir", required=True, help="a local or gs:// folder of yours")
    parser.add_argument("--num-shards", type=int, default=conversion.DEFAULT_NUM_SHARDS)
    parser.add_argument("--target-size", type=int, default=records.DEFAULT_TARGET_SIZE)
    parser.add_argument("--jpeg-quality", type=int, default=records.DEFAULT_JPEG_QUALITY)
    args = parser.parse_args(own_args)
    source = sources.resolve_source(args.source, num_images=args.num_images)
    beam_conversion.convert_with_beam(
        source,
        args.output_dir,
        target_size=args.target_size,
        num_shards=args.num_shards,
        jpeg_quality=args.jpeg_quality,
        pipeline_args=beam_args,
    )
    report = validation.validate(args.output_dir)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
