"""Lesson 8's ablation chart: each knob's settings against the course pipeline's own."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from utils import comparison
from utils.display import MAX_WIDTH_INCHES

# A knob whose settings move the speed more than this many times its course setting's
# (the cache, reading from memory) gets a y-axis of its own, so that 2x effects elsewhere
# do not look flat beside it.
OWN_SCALE_RATIO = 3.0


def _ratios_to(
    first: comparison.RepeatedResult, results: list[comparison.RepeatedResult]
) -> list[comparison.RepeatedResult]:
    """Each result as a ratio to `first`, round by round where both ran the same rounds."""
    ratios = []
    for result in results:
        if result.num_runs == first.num_runs:
            ratios.append(comparison.ratio_in_turns(result, first, label=result.label))
        else:  # Not taken in the same rounds: each round against the first's median.
            values = tuple(value / first.median for value in result.values)
            ratios.append(comparison.RepeatedResult(result.label, values))
    return ratios


def plot_ablation(
    results_by_knob: dict[str, list[comparison.RepeatedResult]],
    *,
    title: str = "What each knob buys",
    course_settings: dict[str, str] | None = None,
) -> Figure:
    """Draws one small bar chart per knob: each setting's speed against the course's.

    Each bar is a setting's images/s divided by the course pipeline's setting of that knob,
    round by round (the median; its line spans the rounds), so 1.0 (dashed) is the course
    pipeline and a 2x effect is a bar twice as high; each panel's title names the setting
    it is against. The knobs share one y-axis, but a knob that moves the speed more than
    `OWN_SCALE_RATIO` times (the cache) gets its own, said in its title.

    Args:
        results_by_knob: knob name -> `comparison.RepeatedResult`s of images/s, one per
            setting, each labelled with its setting.
        title: the figure's title.
        course_settings: knob name -> the label of the course pipeline's setting; a knob
            not named here, or whose results hold no such label, is drawn against its
            first setting.

    Returns:
        The matplotlib Figure (at most 10 inches wide: 1,000 pixels at 100 dpi).

    Raises:
        ValueError: if `results_by_knob` is empty, or a knob has no result.

    Example:
        ablation_chart.plot_ablation({"prefetch": [on, off], "cache": [uncached, cached]})
    """
    if not results_by_knob:
        raise ValueError("`results_by_knob` must name at least one knob. Received: {}")
    empty = [knob for knob, results in results_by_knob.items() if not results]
    if empty:
        raise ValueError(f"Every knob needs at least one result. Received none for: {empty}")
    references, ratios_by_knob = {}, {}
    for knob, results in results_by_knob.items():
        wanted = (course_settings or {}).get(knob)
        reference = next((r for r in results if r.label == wanted), results[0])
        references[knob] = reference.label
        ratios_by_knob[knob] = _ratios_to(reference, results)
    own_scale = {
        knob
        for knob, ratios in ratios_by_knob.items()
        if max(r.maximum for r in ratios) > OWN_SCALE_RATIO
    }
    shared = [r for knob, ratios in ratios_by_knob.items() if knob not in own_scale for r in ratios]
    shared_top = max((r.maximum for r in shared), default=1.0)
    num_columns = min(3, len(ratios_by_knob))
    num_rows = math.ceil(len(ratios_by_knob) / num_columns)
    figure, axes = plt.subplots(
        num_rows, num_columns, figsize=(MAX_WIDTH_INCHES, 3.0 * num_rows + 0.5), squeeze=False
    )
    for axis in axes.flat[len(ratios_by_knob) :]:
        axis.axis("off")
    for axis, (knob, ratios) in zip(axes.flat, ratios_by_knob.items(), strict=False):
        labels = [ratio.label for ratio in ratios]
        medians = [ratio.median for ratio in ratios]
        spans = [
            [ratio.median - ratio.minimum for ratio in ratios],
            [ratio.maximum - ratio.median for ratio in ratios],
        ]
        bars = axis.bar(labels, medians, color="tab:blue")
        axis.errorbar(labels, medians, yerr=spans, fmt="none", ecolor="black")
        axis.bar_label(
            bars,
            labels=[f"{ratio:.2f}x" if ratio < 10 else f"{ratio:,.0f}x" for ratio in medians],
            fontsize=8,
            padding=1,
        )
        axis.axhline(1.0, color="gray", linestyle="--", linewidth=1)
        top = max(r.maximum for r in ratios) if knob in own_scale else shared_top
        axis.set_ylim(0, max(top, 1.0) * 1.2)
        scale = " (own scale)" if knob in own_scale else ""
        axis.set_title(f"{knob}: against {references[knob]}{scale}", fontsize=10)
        axis.tick_params(axis="x", labelrotation=30, labelsize=8)
        axis.tick_params(axis="y", labelsize=8)
    for row in axes:
        row[0].set_ylabel("x the course pipeline", fontsize=9)
    figure.suptitle(
        f"{title}\nimages/s against the course pipeline's setting (1.0, dashed): median of "
        "the rounds, the line spans them",
        fontsize=11,
    )
    figure.tight_layout()
    return figure
