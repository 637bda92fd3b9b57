"""Times labs 2 and 3 on a big folder of photos and reports each one's peak memory.

A benchmark, not a test: run it on an idle machine. Steps:
1. Make the folder once (kept in the course cache): `--num-images` JPEGs in 5 class
   folders, copies of a 500-image embedded dataset under new names (what is measured is
   how the labs scale with the number of files, not what the photos show).
2. Run lab 2, then lab 3, as solutions built from notebooks/ (unexecuted, as
   tools/build_notebooks.py makes them) with papermill, each in a process of its own,
   with the small parameters of tools/building/lesson_parameters.py, DATA_SOURCE = the folder
   and the shards in a new temporary folder (lab 3 reads lab 2's).
3. Print, per lab: the wall time, and the peak resident memory of its kernel and of
   the process that ran papermill.

Usage:
    python -m tools.benchmark big-folder --num-images 20000
    python -m tools.benchmark big-folder --num-images 600  # a quick check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.building.kernels import KERNEL_OPTIONS
from tools.building.lesson_parameters import SMALL_PARAMETERS
from utils.lab import data, progress

REPO_ROOT = Path(__file__).resolve().parents[2]
LABS = ("02_write_tfrecords", "03_read_tfrecords")
NUM_DISTINCT_IMAGES = 500
PEAK_GOAL_MEGABYTES = 1536


def make_big_folder(num_images: int) -> Path:
    """Returns a folder of `num_images` JPEGs in the embedded dataset's 5 classes, made once.

    Args:
        num_images: how many image files.

    Returns:
        The folder, in the course cache.
    """
    folder = data.default_cache_dir() / f"big-folder-{num_images}"
    done = folder / ".complete"
    if done.exists():
        return folder
    originals = sorted(data.make_flowers_dataset(NUM_DISTINCT_IMAGES).glob("*/*.jpg"))
    for index in range(num_images):
        original = originals[index % len(originals)]
        copy = folder / original.parent.name / f"{original.stem}_{index:06d}.jpg"
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(original, copy)  # Same bytes, no space taken.
        except OSError:
            shutil.copyfile(original, copy)
    done.write_text("")
    return folder


def run_one(lab: str, parameters: dict) -> dict:
    """Runs one lab with papermill in this process; returns its time and peak memory.

    Args:
        lab: the lesson's stem, e.g. "02_write_tfrecords".
        parameters: the papermill parameters.

    Returns:
        {"lab", "seconds", "kernel_peak_mb", "runner_peak_mb"}.
    """
    import nbformat
    import papermill

    from tools.build_notebooks import split_variants

    _, solution = split_variants(REPO_ROOT / "notebooks" / f"{lab}.py")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        nbformat.write(solution, Path(scratch) / "input.ipynb")
        papermill.execute_notebook(
            str(Path(scratch) / "input.ipynb"),
            str(Path(scratch) / f"{lab}.ipynb"),
            parameters=parameters,
            cwd=str(REPO_ROOT / "solutions"),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
    seconds = time.perf_counter() - start
    # ru_maxrss is in KiB on Linux: the kernel is this process's child, waited for.
    kernel = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    runner = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"lab": lab, "seconds": seconds, "kernel_peak_mb": kernel, "runner_peak_mb": runner}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.benchmark big-folder", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--num-images", type=int, default=20000)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # Internal: run one lab (JSON).
    args = parser.parse_args(argv)
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.one:
        lab, parameters = json.loads(args.one)
        print(json.dumps(run_one(lab, parameters)))
        return 0
    folder = make_big_folder(args.num_images)
    print(f"Folder: {folder} ({args.num_images} images)", flush=True)
    failed = False
    with tempfile.TemporaryDirectory() as shards:
        for lab in LABS:
            parameters = {**SMALL_PARAMETERS[lab], "DATA_SOURCE": str(folder)}
            parameters["OUTPUT_DIR" if lab.startswith("02") else "SHARDS_DIR"] = shards
            command = [sys.executable, "-m", "tools.benchmark", "big-folder"]
            command += ["--one", json.dumps([lab, parameters])]
            done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
            if done.returncode:
                print(f"{lab} failed:\n{done.stderr[-3000:]}")
                return 1
            result = json.loads(done.stdout.strip().splitlines()[-1])
            peak = max(result["kernel_peak_mb"], result["runner_peak_mb"])
            failed |= peak > PEAK_GOAL_MEGABYTES
            print(
                f"{lab}: {result['seconds']:.0f} s; peak memory {result['kernel_peak_mb']:,.0f} "
                f"MB in the kernel, {result['runner_peak_mb']:,.0f} MB in papermill's process "
                f"(goal: at most {PEAK_GOAL_MEGABYTES:,} MB).",
                flush=True,
            )
    return 1 if failed else 0
