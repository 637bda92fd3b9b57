"""Benchmarks lab 4's training recipe: final and best validation accuracy over several seeds.

Accuracy, not speed: the numbers do not depend on the machine's load, only the run time does.

Steps:
1. Builds lab 4's solution from `notebooks/04_train_keras.py` (not the committed
   `solutions/`, which may be older).
2. Runs it with papermill `--runs` times per setting, with seeds `--first-seed`,
   `--first-seed + 1`, ..., at the lesson's default parameters (with
   `NUM_TIMED_IMAGES=64`: the reading-speed cell is timing, not training, and is not what
   this benchmark measures). The settings: `cpu` (one replica, the default backend) and
   `jax8` (eight simulated JAX devices: `XLA_FLAGS=--xla_force_host_platform_device_count=8`
   and `KERAS_BACKEND=jax`, set before the kernel starts).
3. Reads each run's printed final accuracy, best epoch and chance level, and prints a table
   and the verdict against the targets: every final validation accuracy >= 0.85 and within
   0.03 of its run's best epoch.

Usage:
    python -m tools.benchmark training                       # 5 seeds x 2 settings
    python -m tools.benchmark training --settings jax8 --runs 1 --parameters NUM_IMAGES=400
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import re
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LESSON = "04_train_keras"
MIN_FINAL_ACCURACY = 0.85
MAX_DROP_FROM_BEST = 0.03
SETTINGS = {
    "cpu": {},
    "jax8": {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "KERAS_BACKEND": "jax"},
}
# Not training parameters: the reading-speed cell's run length only.
FIXED_PARAMETERS = {"NUM_TIMED_IMAGES": 64}
ACCURACY_LINE = re.compile(
    r"Validation accuracy ([\d.]+); best epoch (\d+) of (\d+): ([\d.]+); chance level ([\d.]+)"
)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run's validation accuracies, as the lab printed them."""

    setting: str
    seed: int
    final: float
    best: float
    best_epoch: int
    epochs: int
    chance: float
    seconds: float

    @property
    def meets_targets(self) -> bool:
        """Final >= MIN_FINAL_ACCURACY and within MAX_DROP_FROM_BEST of the best epoch."""
        return self.final >= MIN_FINAL_ACCURACY and self.best - self.final <= MAX_DROP_FROM_BEST


def _parameter(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE; got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.benchmark training", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        choices=sorted(SETTINGS),
        default=["cpu", "jax8"],
        help="where to train (default: cpu jax8)",
    )
    parser.add_argument("--runs", type=int, default=5, help="seeds per setting (default 5)")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument(
        "--parameters",
        nargs="*",
        type=_parameter,
        default=[],
        help="NAME=VALUE overrides of the lesson's defaults, for a quick "
        "try; the benchmark's verdict is for the defaults",
    )
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error(f"--runs must be a positive integer; got {arguments.runs}")
    return arguments


def run_lab4(setting: str, seed: int, parameters: dict, scratch: Path) -> RunResult:
    """Executes lab 4's solution once; returns what it printed about its accuracy."""
    import nbformat
    import papermill

    from tools.building.kernels import KERNEL_OPTIONS
    from tools.building.variants import split_variants

    _, solution = split_variants(REPO_ROOT / "notebooks" / f"{LESSON}.py")
    path = scratch / f"{LESSON}_{setting}_{seed}.ipynb"
    nbformat.write(solution, path)
    saved = dict(os.environ)
    os.environ.update(SETTINGS[setting])
    backend = {"BACKEND": "jax"} if setting == "jax8" else {}
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(path),
            str(path),
            parameters={**FIXED_PARAMETERS, **backend, **parameters, "SEED": seed},
            cwd=str(REPO_ROOT / "labs"),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.perf_counter() - start
    notebook = nbformat.read(path, as_version=4)
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )
    match = ACCURACY_LINE.search(printed)
    if match is None:
        raise RuntimeError(f"{path}: no accuracy line in its output; it ends:\n{printed[-2000:]}")
    final, best_epoch, epochs, best, chance = match.groups()
    return RunResult(
        setting,
        seed,
        float(final),
        float(best),
        int(best_epoch),
        int(epochs),
        float(chance),
        seconds,
    )


def format_table(results: list[RunResult]) -> str:
    """The results as a Markdown table, with a verdict per run."""
    lines = [
        "| setting | seed | final | best (epoch) | best - final | chance | meets targets | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.setting} | {r.seed} | {r.final:.2f} | {r.best:.2f} ({r.best_epoch}/{r.epochs}) "
            f"| {r.best - r.final:.2f} | {r.chance:.2f} | {'yes' if r.meets_targets else 'NO'} "
            f"| {r.seconds:.0f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    arguments = parse_arguments(argv)
    parameters = dict(arguments.parameters)
    results = []
    with tempfile.TemporaryDirectory(prefix="benchmark_training_") as scratch:
        for setting in arguments.settings:
            for seed in range(arguments.first_seed, arguments.first_seed + arguments.runs):
                result = run_lab4(setting, seed, parameters, Path(scratch))
                print(
                    f"{setting}, seed {seed}: final {result.final:.2f}, best {result.best:.2f} "
                    f"(epoch {result.best_epoch}/{result.epochs}), {result.seconds:.0f} s",
                    flush=True,
                )
                results.append(result)
    print(format_table(results))
    failed = [r for r in results if not r.meets_targets]
    overrides = f" (with {parameters})" if parameters else ""
    print(
        f"{len(results) - len(failed)} of {len(results)} runs{overrides} meet the targets: final "
        f">= {MIN_FINAL_ACCURACY} and within {MAX_DROP_FROM_BEST} of the best epoch."
    )
    return 1 if failed else 0
