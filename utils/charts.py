"""Charts for the labs: throughput bars and quality trade-offs."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from utils import comparison, timing
from utils.display import MAX_WIDTH_INCHES


def plot_throughput(
    results: Sequence[timing.ThroughputResult | comparison.RepeatedResult],
    *,
    title: str = "Images per second",
    log_scale: bool | None = None,
    ceiling: timing.ThroughputResult | comparison.RepeatedResult | None = None,
    references: dict[str, float] | None = None,
) -> Figure:
    """Draws one bar per result, labelled with its images/s.

    Args:
        results: `timing.ThroughputResult`s, or `comparison.RepeatedResult`s of images/s
            (drawn at their median, with a line spanning their range), in the order to
            draw them.
        title: the chart's title.
        log_scale: use a log y axis; None chooses it when the highest bar or line is 30x
            the lowest.
        ceiling: a `ThroughputResult`, or a `RepeatedResult` of images/s (drawn at its
            median, labelled with its range), drawn as a dashed reference line (the decode
            ceiling: no bar can pass it for long); None for none.
        references: more dashed lines, {label: images/s} (what an accelerator consumes).

    Returns:
        The matplotlib Figure (at most 10 inches wide: 1,000 pixels at 100 dpi).

    Raises:
        ValueError: if `results` is empty.

    Example:
        charts.plot_throughput([sequential, parallel], title="Individual files")
    """
    if not results:
        raise ValueError("`results` must hold at least one ThroughputResult. Received: []")
    repeated = [result for result in results if isinstance(result, comparison.RepeatedResult)]
    rates = [
        result.median if isinstance(result, comparison.RepeatedResult) else result.images_per_second
        for result in results
    ]
    lines = []  # (text, images/s) of each dashed line.
    if isinstance(ceiling, comparison.RepeatedResult):
        lines.append((f"{ceiling.label}: {ceiling.summary().split(': ', 1)[1]}", ceiling.median))
    elif ceiling is not None:
        rate = ceiling.images_per_second
        lines.append((f"{ceiling.label}: {rate:,.0f}", rate))
    lines += [(f"{label}: {rate:,.0f}", rate) for label, rate in (references or {}).items()]
    top = max(rates + [rate for _, rate in lines] + [result.maximum for result in repeated])
    bottom = min(rates + [rate for _, rate in lines] + [result.minimum for result in repeated])
    if log_scale is None:
        log_scale = top / bottom >= 30  # Bars and lines: a line far below hides on a linear axis.
    figure, axis = plt.subplots(figsize=(min(MAX_WIDTH_INCHES, 1.6 + 1.9 * len(results)), 4))
    bars = axis.bar([result.label for result in results], rates, color="tab:blue")
    if repeated:  # The range of each measured-in-turns bar.
        low = [rate - getattr(r, "minimum", rate) for rate, r in zip(rates, results, strict=True)]
        high = [getattr(r, "maximum", rate) - rate for rate, r in zip(rates, results, strict=True)]
        axis.errorbar(range(len(rates)), rates, yerr=[low, high], fmt="none", ecolor="black")
    axis.set_ylabel("images/s" + (" (log scale)" if log_scale else ""))
    if log_scale:
        axis.set_yscale("log")
        # Room for the value labels inside the frame, and for the lowest line's label.
        axis.set_ylim(bottom / 3, top * 3)
    else:
        axis.set_ylim(0, top * 1.15)
    labels = axis.bar_label(bars, labels=[f"{rate:,.0f}" for rate in rates], padding=2)
    for label, rate in zip(labels, rates, strict=True):
        # Above the bar, unless a dashed line runs where the label would be: then inside.
        if any(0 <= _points_above(axis, rate, line) < 16 for _, line in lines):
            label.xyann = (0, -3)
            label.set(verticalalignment="top", color="white")
    colors = ["tab:red", "tab:purple", "tab:green", "tab:orange"]
    on_the_left: list[float] = []  # A label too close to one on the left goes to the right.
    for index, (text, rate) in enumerate(lines):
        color = colors[index % len(colors)]
        axis.axhline(rate, color=color, linestyle="--", linewidth=1)
        crowded = any(abs(_points_above(axis, rate, other)) < 12 for other in on_the_left)
        if not crowded:
            on_the_left.append(rate)
        axis.annotate(
            text,
            (0.99 if crowded else 0.01, rate),
            ha="right" if crowded else "left",
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            color=color,
            fontsize=9,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )
    axis.set_title(title, fontsize=10, wrap=True)
    axis.tick_params(axis="x", labelrotation=15)
    figure.tight_layout()
    return figure


def _points_above(axis: Axes, value: float, line: float) -> float:
    """How far `line` runs above `value` on `axis`, in points (negative: below it)."""
    to_pixels = axis.transData.transform
    pixels = to_pixels((0, line))[1] - to_pixels((0, value))[1]
    return pixels * 72 / axis.figure.dpi


def plot_quality_trade_off(
    qualities: Sequence[int],
    kilobytes: Sequence[float],
    images_per_second: Sequence[float | comparison.RepeatedResult],
    *,
    reference: tuple[str, float, float] | None = None,
    psnr_db: Sequence[float] | None = None,
) -> Figure:
    """Draws bytes per image, decode speed and (if given) PSNR against JPEG quality.

    Args:
        qualities: the JPEG qualities measured.
        kilobytes: mean kB per image at each quality.
        images_per_second: decode speed at each quality: numbers, or
            `comparison.RepeatedResult`s (drawn at their median, a bar spanning their range).
        reference: optional (label, kilobytes, images_per_second) drawn as dashed lines,
            such as the original images.
        psnr_db: the PSNR at each quality, in dB: a third panel, what the bytes cost in
            detail.

    Returns:
        The matplotlib Figure (at most 10 inches wide: 1,000 pixels at 100 dpi).

    Example:
        charts.plot_quality_trade_off([50, 90], [6.1, 14.2], [2900, 2100])
    """
    figure, axes = plt.subplots(1, 3 if psnr_db else 2, figsize=(MAX_WIDTH_INCHES, 3.4))
    repeated = [r for r in images_per_second if isinstance(r, comparison.RepeatedResult)]
    speeds = [
        r.median if isinstance(r, comparison.RepeatedResult) else r for r in images_per_second
    ]
    panels = (("kB per image", kilobytes), ("images/s, one image per decode call", speeds))
    for index, (axis, (name, values)) in enumerate(zip(axes[:2], panels, strict=True)):
        axis.plot(qualities, values, "o-", label="resized, at this quality")
        top = max(values)
        if index == 1 and repeated:
            spans = [
                [value - result.minimum for value, result in zip(values, repeated, strict=True)],
                [result.maximum - value for value, result in zip(values, repeated, strict=True)],
            ]
            axis.errorbar(qualities, values, yerr=spans, fmt="none", ecolor="black", capsize=3)
            top = max(result.maximum for result in repeated)
        if reference is not None:
            level = reference[1 + index]
            axis.axhline(level, color="tab:red", linestyle="--", label=reference[0])
            top = max(top, level)
        axis.set_xlabel("JPEG quality")
        axis.set_title(name, fontsize=10)
        axis.set_ylim(0, top * 1.15)
        axis.tick_params(labelsize=8)
    if psnr_db:
        axes[2].plot(qualities, psnr_db, "o-", color="tab:green")
        axes[2].set_xlabel("JPEG quality")
        axes[2].set_title("PSNR, dB (higher: more detail kept)", fontsize=10)
        axes[2].tick_params(labelsize=8)
    axes[0].legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return figure
