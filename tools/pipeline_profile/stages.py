"""`stages`: the course pipeline built up stage by stage beside the ceiling, and its figure."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tools.building import machine
from tools.pipeline_profile.variants import STAGES, build, ceiling, load_shards, time_with_cpu

NUM_TIMED = 8000  # Images per run.

ITERATOR = "iterator alone (a made batch)"


def stages(repeats: int, output_dir: Path) -> dict:
    """Measures the pipeline stage by stage beside the ceiling; saves `stages.png`."""
    import statistics

    import tensorflow as tf

    from utils import comparison, machine_load

    paths, num_classes, jpegs = load_shards()
    makers = {
        stage: (lambda s=stage: build(paths, num_classes=num_classes, stage=s)) for stage in STAGES
    }
    makers["decode ceiling (no I/O)"] = lambda: ceiling(jpegs)
    # The ceiling has no prefetch: this shows whether it leaves cores idle without one.
    makers["decode ceiling + prefetch"] = lambda: ceiling(jpegs).prefetch(tf.data.AUTOTUNE)
    # What the loop that takes the batches costs on its own (both sides pay it).
    made_batch = next(iter(ceiling(jpegs)))
    makers[ITERATOR] = lambda: tf.data.Dataset.from_tensors(made_batch).repeat()
    cpu = {name: [] for name in makers}
    rates = {
        name: (lambda n=name: time_with_cpu(makers[n](), NUM_TIMED, cpu[n])) for name in makers
    }
    with machine_load.LoadWatch() as load:
        measured = comparison.measure_in_turns(rates, repeats=repeats)
    cores = machine_load.usable_cores()
    report = {"load": load.summary(), "machine": machine.describe_machine(), "stages": {}}
    for name, result in measured.items():
        cpu_us = statistics.median(cpu[name]) * 1e6
        report["stages"][name] = {
            "images_per_second": result.median,
            "min": result.minimum,
            "max": result.maximum,
            "runs": list(result.values),
            "cpu_us_per_image": cpu_us,
            "cores_busy": result.median * cpu_us / 1e6,
        }
    full, top = report["stages"][STAGES[-1]], report["stages"]["decode ceiling (no I/O)"]
    report["decomposition"] = {
        "rate_ratio": full["images_per_second"] / top["images_per_second"],
        "busy_ratio": full["cores_busy"] / top["cores_busy"],
        "work_ratio": top["cpu_us_per_image"] / full["cpu_us_per_image"],
        "cores": cores,
    }
    lines = [
        f"{'stage':<30} {'images/s':>9} {'min-max':>13} {'CPU us/image':>12} {'cores busy':>10}"
    ]
    for name, figures in report["stages"].items():
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        lines.append(
            f"{name:<30} {figures['images_per_second']:>9,.0f} {spread:>13} "
            f"{figures['cpu_us_per_image']:>12.0f} {figures['cores_busy']:>10.2f}"
        )
    parts = report["decomposition"]
    lines.append(
        f"course pipeline / ceiling: {parts['rate_ratio']:.2f} = cores busy "
        f"{parts['busy_ratio']:.2f} x CPU work per image {parts['work_ratio']:.2f} "
        f"(medians of {repeats} runs in turns)"
    )
    report["lines"] = lines
    plot_stages(report, output_dir / "stages.png")
    return report


def plot_stages(report: dict, path: Path) -> None:
    """Saves CPU time per image by stage (pipeline vs ceiling) and cores busy, 960 px wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = report["stages"]
    costs = [figures[STAGES[0]]["cpu_us_per_image"]] + [
        figures[b]["cpu_us_per_image"] - figures[a]["cpu_us_per_image"]
        for a, b in zip(STAGES, STAGES[1:], strict=False)
    ]
    names = ["read + CRC", "parse", "decode + batch", "prefetch"]
    figure, (work, busy) = plt.subplots(1, 2, figsize=(9.6, 4.2), width_ratios=[2, 1])
    left = 0.0
    for name, cost, color in zip(names, costs, plt.colormaps["tab10"].colors, strict=False):
        # A stage that measured below zero is noise: drawn as nothing, labelled as measured.
        label = f"{name}: {cost:.0f}" + (" (noise)" if cost < 0 else "")
        work.barh("course pipeline", max(cost, 0.0), left=left, color=color, label=label)
        left += max(cost, 0.0)
    work.barh(
        "decode ceiling",
        figures["decode ceiling (no I/O)"]["cpu_us_per_image"],
        color="black",
        label="ceiling: decode + batch",
    )
    work.set_xlabel("CPU time per image (microseconds, all threads)")
    work.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
    work.set_title("Work per image")
    labels = ["course pipeline", "decode ceiling"]
    cores = [figures[STAGES[-1]]["cores_busy"], figures["decode ceiling (no I/O)"]["cores_busy"]]
    busy.barh(labels, cores, color=["tab:blue", "black"])
    busy.axvline(report["decomposition"]["cores"], color="tab:red", linestyle="--")
    busy.set_xlabel("cores busy (CPU time / wall time)")
    busy.set_title("Cores kept busy")
    busy.invert_yaxis()
    work.invert_yaxis()
    figure.suptitle(textwrap.fill(report["load"], 150), fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
