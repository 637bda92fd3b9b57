"""Plots for the labs: a grid of labelled images, and a throughput bar chart."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import tensorflow as tf


def show_images(
    dataset: tf.data.Dataset,
    *,
    class_names: Sequence[str],
    num_images: int = 9,
    num_columns: int = 3,
):
    """Shows the first `num_images` (image, label) pairs of `dataset` in a grid.

    Each title gives the class name and the image's size in pixels, height x width.

    Args:
        dataset: unbatched (image, label) pairs; image uint8 or float in [0, 1] or [0, 255],
            shape (height, width, 3); label an integer index into `class_names`.
        class_names: the class names.
        num_images: how many images to show.
        num_columns: images per row.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: if `num_images` is not positive or the dataset yields no images.

    Example:
        display.show_images(images_and_labels, class_names=source.class_names)
    """
    if isinstance(num_images, bool) or not isinstance(num_images, int) or num_images < 1:
        raise ValueError(f"`num_images` must be a positive integer. Received: {num_images!r}")
    pairs = list(dataset.take(num_images).as_numpy_iterator())
    if not pairs:
        raise ValueError("The dataset yielded no (image, label) pairs to show.")
    num_rows = math.ceil(len(pairs) / num_columns)
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(2.5 * num_columns, 2.7 * num_rows))
    for axis in axes.flat:
        axis.axis("off")
    for axis, (image, label) in zip(axes.flat, pairs, strict=False):
        if image.dtype != "uint8" and image.max() > 1.0:
            image = image / 255.0
        axis.imshow(image)
        height, width = image.shape[:2]
        axis.set_title(f"{class_names[int(label)]} ({height}x{width})")
    figure.tight_layout()
    return figure


def plot_throughput(results, *, title: str = "Images per second", log_scale: bool | None = None):
    """Draws one bar per `ThroughputResult`, labelled with its images/s.

    Args:
        results: `timing.ThroughputResult`s, in the order to draw them.
        title: the chart's title.
        log_scale: use a log y axis; None chooses it when the fastest is 30x the slowest.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: if `results` is empty.

    Example:
        display.plot_throughput([sequential, parallel], title="Individual files")
    """
    if not results:
        raise ValueError("`results` must hold at least one ThroughputResult. Received: []")
    rates = [result.images_per_second for result in results]
    if log_scale is None:
        log_scale = max(rates) / min(rates) >= 30
    figure, axis = plt.subplots(figsize=(1.6 + 1.9 * len(results), 4))
    bars = axis.bar([result.label for result in results], rates, color="tab:blue")
    axis.bar_label(bars, labels=[f"{rate:,.0f}" for rate in rates], padding=2)
    axis.set_ylabel("images/s" + (" (log scale)" if log_scale else ""))
    if log_scale:
        axis.set_yscale("log")
    axis.set_title(title)
    axis.tick_params(axis="x", labelrotation=15)
    figure.tight_layout()
    return figure
