"""Where the course pipeline's time goes against the decode ceiling, and what could close the gap.

Three measurements on the benchmark's data (3,670 embedded images in 16 shards of 192 px,
local disk), each in one run with its candidates measured in turns
(`comparison.measure_in_turns`) and the machine's load printed:

1. `stages`: the pipeline built up stage by stage: read (TFRecord files, CRC checked),
   + parse (`parse_example` by batch), + decode (the JPEGs: the pipeline without
   prefetch), + prefetch (the course pipeline), beside the ceiling (the same JPEG bytes
   decoded from memory) and the loop that takes the batches alone (a made batch
   repeated: the iterator's Python side, which both sides pay). For each: images/s,
   and this process's CPU time per image, which adds up across stages even when they
   run in parallel, and the cores kept busy (CPU time / wall time). The pipeline's
   rate / the ceiling's is then (cores busy, pipeline / ceiling) x (CPU per image,
   ceiling / pipeline): lost to idle cores (waits, contention) or to extra work
   (reading, parsing). Saves a figure.
2. `sweep`: each candidate change to the pipeline against the course pipeline, in turns,
   its ratio taken within each round; `dct_method="INTEGER_FAST"` also against a ceiling
   that decodes the same way.
3. `shards`: the images written in 4, 16 and 64 shards, each read right after writing
   and again after `sync` and a pause, in turns, to explain the shard-count row.

Usage:
    python -m tools.profile_pipeline stages   # about 2 minutes on 2 cores (cache warm)
    python -m tools.profile_pipeline sweep    # about 5 minutes
    python -m tools.profile_pipeline shards --repeats 3   # about 10 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tools.building import machine
from tools.pipeline_profile import shard_counts, stages, sweep
from tools.pipeline_profile.variants import NUM_IMAGES
from utils.lab import progress

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["stages", "sweep", "shards"])
    parser.add_argument("--repeats", type=int, default=5, help="rounds in turns (default 5)")
    parser.add_argument("--num-images", type=int, default=NUM_IMAGES, help="shards: images")
    parser.add_argument("--only", nargs="*", help="sweep: these changes only (names in SWEEP)")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "profile")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    unknown = sorted(set(args.only or []) - set(sweep.SWEEP))
    if unknown:
        parser.error(f"--only: unknown change(s) {unknown}; choose from {list(sweep.SWEEP)}")
    args.output_dir.mkdir(parents=True, exist_ok=True)

    print(f"Machine: {machine.describe_machine()}", flush=True)
    start = time.perf_counter()
    if args.what == "stages":
        report = stages.stages(args.repeats, args.output_dir)
    elif args.what == "sweep":
        report = sweep.sweep(args.repeats, args.only)
    else:
        report = shard_counts.shards(args.repeats, num_images=args.num_images)
    report["seconds"] = time.perf_counter() - start
    print("\n".join([report["load"], "", *report["lines"]]))
    path = args.output_dir / f"{args.what}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\nWrote {path} in {report['seconds']:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
