"""The course benchmark's report: the table, the targets' verdicts, the cores busy, the figure."""

from __future__ import annotations

from pathlib import Path

from tools.course_benchmark.settings import (
    CEILING,
    COURSE,
    FILES_ONE_AT_A_TIME,
    FROM_DIRECTORY,
    GRAIN,
    GRAIN_BEST,
    GRAIN_PER_RECORD,
    LATENCIES_MS,
    ORIGINAL,
    TARGET_LATENCY_RATIO,
    TARGET_OVER_FROM_DIRECTORY,
    TARGET_OVER_ORIGINAL,
    TARGET_SHARE_OF_CEILING,
    TARGET_SPREAD,
    Row,
)

# A run whose own process kept fewer than this share of the cores busy, on an idle
# machine, decoded at a fraction of the machine's rate: on the project's 2-core VM some
# processes decode at one core's rate (6,3xx images/s) with both cores half idle.
FULL_CORES_SHARE = 0.75


def cores_busy_lines(results: dict, num_cores: int) -> list[str]:
    """Says, per headline pipeline, how many cores each run kept busy, and which fell short.

    A run's cores busy is its CPU time per image x its images/s. Runs without simulated
    latency (nothing to wait for) that kept fewer than `FULL_CORES_SHARE` of the cores busy
    explain a low end of a range that the work per image does not: the pipeline waited,
    with cores idle, rather than worked more. Runs at a simulated latency are listed but
    not counted: waiting for storage is what they measure; nor are runs pinned to fewer
    cores (`Row.cores`).

    Args:
        results: the headline results, with `runs` (images/s) and `cpu_us_per_image`.
        num_cores: the machine's cores.

    Returns:
        One line per pipeline that has CPU times, then one line that counts the short runs
        without simulated latency.
    """
    lines, short, total = [], 0, 0
    threshold = FULL_CORES_SHARE * num_cores
    for row, figures in results.items():
        if "cpu_us_per_image" not in figures:
            continue
        pairs = zip(figures["runs"], figures["cpu_us_per_image"], strict=True)
        busy = [rate * cpu_us / 1e6 for rate, cpu_us in pairs]
        if not row.latency_ms and row.cores is None:  # Nothing to wait for, on every core.
            short += sum(cores < threshold for cores in busy)
            total += len(busy)
        lines.append(f"  {row.label}: cores busy per run " + " ".join(f"{c:.2f}" for c in busy))
    lines.append(
        f"  runs without simulated latency that kept fewer than {threshold:.1f} of {num_cores} "
        f"cores busy: {short} of {total}"
    )
    return lines


def format_table(results: dict) -> list[str]:
    """Formats the pipeline results with ratios (of medians) to the ceiling and to files."""
    ceiling = results[CEILING]["median"]
    lines = [
        f"{'pipeline':<38} {'images/s':>10} {'min-max':>15} {'runs':>4} {'/ceiling':>8} "
        f"{'/files 1x1':>10}",
    ]
    for row, figures in results.items():
        baseline = results.get(Row(FILES_ONE_AT_A_TIME, row.latency_ms), figures)["median"]
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        lines.append(
            f"{row.label:<38} {figures['median']:>10,.1f} {spread:>15} {len(figures['runs']):>4} "
            f"{figures['median'] / ceiling:>8.3f} {figures['median'] / baseline:>9.1f}x"
        )
    return lines


def in_turns(results: dict, numerator: Row, denominator: Row, *, key: str = "runs"):
    """The ratio of two headline results, round by round (`comparison.ratio_in_turns`)."""
    from utils import comparison

    return comparison.ratio_in_turns(
        comparison.RepeatedResult(numerator.label, tuple(results[numerator][key])),
        comparison.RepeatedResult(denominator.label, tuple(results[denominator][key])),
    )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def targets(results: dict) -> list[str]:
    """Checks the issue's targets against these results, ratios taken within each round."""
    lines = []
    for latency in LATENCIES_MS:
        share = in_turns(results, Row(COURSE, latency), CEILING)
        target = TARGET_SHARE_OF_CEILING[latency]
        low, high = share.median - share.minimum, share.maximum - share.median
        spread_met = max(low, high) <= TARGET_SPREAD
        lines.append(
            f"{COURSE} at {latency} ms / decode ceiling: {share.median:.2f} "
            f"(range {share.minimum:.2f}-{share.maximum:.2f}, -{low:.2f}/+{high:.2f}, "
            f"{share.num_runs} runs in turns); target >= {target}: "
            f"{_verdict(share.median >= target)}; spread within "
            f"+-{TARGET_SPREAD}: {_verdict(spread_met)}"
        )
        if "cpu_us_per_image" in results[CEILING]:
            work = in_turns(results, CEILING, Row(COURSE, latency), key="cpu_us_per_image")
            lines.append(
                f"  work share at {latency} ms (the ceiling's CPU time per image / the "
                f"pipeline's; moves little with load): {work.median:.2f} "
                f"(range {work.minimum:.2f}-{work.maximum:.2f})"
            )
    speedups = [
        in_turns(results, Row(COURSE, latency), Row(ORIGINAL, latency)) for latency in LATENCIES_MS
    ]
    lines.append(
        f"{COURSE} / original course pipeline: "
        + ", ".join(
            f"{s.median:.2f}x ({s.minimum:.2f}-{s.maximum:.2f}) at {latency} ms"
            for s, latency in zip(speedups, LATENCIES_MS, strict=True)
        )
        + f"; target >= {TARGET_OVER_ORIGINAL}x at {LATENCIES_MS[0]} ms: "
        + _verdict(speedups[0].median >= TARGET_OVER_ORIGINAL)
    )
    slow = LATENCIES_MS[-1]
    directory = results[Row(FROM_DIRECTORY, slow)]["median"]
    course = results[Row(COURSE, slow)]["median"]
    lines.append(
        f"{COURSE} / {FROM_DIRECTORY} at {slow} ms: {course / directory:.1f}x "
        f"(medians); target >= {TARGET_OVER_FROM_DIRECTORY}x: "
        f"{_verdict(course / directory >= TARGET_OVER_FROM_DIRECTORY)}"
    )
    return lines


def ratio_text(ratio) -> str:
    spread = f"range {ratio.minimum:.2f}-{ratio.maximum:.2f}"
    return f"{ratio.median:.2f} ({spread}, {ratio.num_runs} runs)"


def latency_and_grain_lines(results: dict) -> list[str]:
    """Says what the latency costs each pipeline, and where Grain + ArrayRecord stands.

    Every ratio is taken within each round of the headline's turns (`comparison.ratio_in_turns`)
    and given as median and range. CPU time per image moves far less with other load than
    images/s, so it is given too (median and range, microseconds).

    Args:
        results: the pipeline results; Grain's rows may be missing (not installed).

    Returns:
        One line for the course pipeline's latency ratio; for Grain, if measured, its
        latency ratio and, at each latency, its ratio to the ceiling and to the course
        pipeline and both CPU times per image.
    """
    from utils.comparison import spread

    fast, slow = LATENCIES_MS
    lines = [
        f"{name} at {slow} ms / at {fast} ms: "
        + ratio_text(in_turns(results, Row(name, slow), Row(name, fast)))
        + (f"; target >= {TARGET_LATENCY_RATIO}" if name == COURSE else "")
        for name in (COURSE, GRAIN, GRAIN_BEST)
        if Row(name, fast) in results
    ]
    for latency in LATENCIES_MS if Row(GRAIN, fast) in results else ():
        grain, course = Row(GRAIN, latency), Row(COURSE, latency)
        lines.append(
            f"{GRAIN} at {latency} ms / decode ceiling: "
            f"{ratio_text(in_turns(results, grain, CEILING))}; / {COURSE}: "
            f"{ratio_text(in_turns(results, grain, course))}"
        )
        cpu = [spread(results[row]["cpu_us_per_image"]) for row in (grain, course)]
        lines.append(
            f"  CPU time per image at {latency} ms, microseconds: {GRAIN} {cpu[0]}; "
            f"{COURSE} {cpu[1]}"
        )
    return lines


def plot(results: dict, scale: dict, path: Path) -> None:
    """Saves the pipelines (log scale, with min-max) and the growth curves in one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (bars, growth) = plt.subplots(1, 2, figsize=(14, 5), width_ratios=[2, 1])
    rows = list(results)
    medians = [results[row]["median"] for row in rows]
    errors = [
        [m - results[row]["min"] for row, m in zip(rows, medians, strict=True)],
        [results[row]["max"] - m for row, m in zip(rows, medians, strict=True)],
    ]
    colors = [
        "black" if row.latency_ms is None else "tab:orange" if row.latency_ms else "tab:blue"
        for row in rows
    ]
    drawn = bars.barh([row.label for row in rows], medians, xerr=errors, color=colors)
    for bar, row in zip(drawn, rows, strict=True):
        if row.pipeline in (GRAIN, GRAIN_PER_RECORD, GRAIN_BEST):
            bar.set_hatch("//")
    bars.set_xscale("log")
    bars.invert_yaxis()
    bars.set_xlabel(
        f"images/s (log scale; blue: local disk, orange: {LATENCIES_MS[-1]} ms simulated latency)"
    )
    bars.set_title("Pipelines on the same data (hatched: Grain)")
    sizes = sorted(scale["by_size"])
    rates = [scale["by_size"][s]["images_per_second"] for s in sizes]
    memory = [scale["by_size"][s]["peak_rss_mb"] for s in sizes]
    growth.plot(sizes, rates, "o-", label="reading, images/s")
    growth.set_xscale("log")
    growth.set_xlabel("images in the dataset")
    growth.set_ylabel("images/s")
    other = growth.twinx()
    other.plot(sizes, memory, "s--", color="tab:red", label="peak RSS, MB")
    other.set_ylabel("peak RSS of reading (MB)")
    other.set_ylim(0, max(memory) * 1.3)
    growth.set_ylim(0, max(rates) * 1.3)
    growth.set_xticks(sizes, labels=[f"{size:,}" for size in sizes])
    growth.minorticks_off()
    growth.set_title("As the dataset grows")
    lines = growth.get_lines() + other.get_lines()  # One legend for both axes, at the top.
    growth.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
