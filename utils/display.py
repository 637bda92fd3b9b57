"""Images for the labs: a grid with class and size, predictions, rows to compare."""

from __future__ import annotations

import functools
import io
import math
import sys
import textwrap
import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

from utils import arguments

if TYPE_CHECKING:
    pass

MAX_WIDTH_INCHES = 10  # 1,000 pixels at matplotlib's 100 dpi: the width of a notebook.
# Photographs compress several times better as JPEG than as PNG, the inline backend's
# format: lab 1's grid of nine was 697 KB as PNG and is 86 KB as JPEG at this quality.
JPEG_QUALITY = 85


def show_images(
    dataset: tf.data.Dataset,
    *,
    class_names: Sequence[str],
    num_images: int = 9,
    num_columns: int = 3,
) -> Figure:
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
    arguments.check_integer("num_images", num_images, 1)
    pairs = list(dataset.take(num_images).as_numpy_iterator())
    if not pairs:
        raise ValueError(
            "The dataset yielded no (image, label) pairs to show: it is empty. Check what it "
            "was built from (an empty list of paths, a filter that keeps nothing, take(0))."
        )
    num_rows = math.ceil(len(pairs) / num_columns)
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(2.5 * num_columns, 2.7 * num_rows))
    for axis in axes.flat:
        axis.axis("off")
    for axis, (image, label) in zip(axes.flat, pairs, strict=False):
        if image.dtype != "uint8" and image.max() > 1.0:
            image = image / 255.0
        axis.imshow(image)
        height, width = image.shape[:2]
        axis.set_title(image_title(class_names[int(label)], height, width), fontsize=10)
    figure.tight_layout()
    return shown_as_jpeg(figure)


@functools.cache
def _font_characters() -> frozenset[int]:
    """The code points matplotlib's default font draws (its fallback fonts' too)."""
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    # The families matplotlib falls back through (3.6 and later), a generic one ("sans-serif")
    # by its list of fonts; each found with the public `findfont`, without its default.
    names = []
    for family in matplotlib.rcParams["font.family"]:
        names += matplotlib.rcParams.get(f"font.{family}", [family])
    paths = {font_manager.findfont(font_manager.FontProperties())}
    for name in names:
        try:
            found = font_manager.FontProperties(family=name)
            paths.add(font_manager.findfont(found, fallback_to_default=False))
        except ValueError:  # Not installed here.
            continue
    return frozenset(code for path in paths for code in FT2Font(str(path)).get_charmap())


def drawable(text: str) -> str:
    """Returns `text` with each character the plot font lacks (an emoji) named instead.

    matplotlib draws a missing glyph as an empty box and warns `Glyph ... missing from
    font(s)`; "cats \U0001f431" becomes "cats [cat face]", still telling classes apart.

    Args:
        text: a title or label, as a class name may hold anything a folder name can.

    Returns:
        The text, each missing character as "[its Unicode name]" (or "[U+XXXX]").
    """
    known = _font_characters()
    parts = []
    for character in text:
        if character.isspace() or ord(character) in known:
            parts.append(character)
        else:
            name = unicodedata.name(character, "").lower()
            parts.append(f"[{name or f'U+{ord(character):04X}'}]")
    return "".join(parts)


# Characters of a title line that fit above one image of `show_images` at font size 10.
TITLE_LINE_CHARACTERS = 24


def image_title(class_name: str, height: int, width: int) -> str:
    """Returns an image's title: its whole class name and size, wrapped to fit its column.

    A long class name goes on several lines rather than being cut or overlapping the
    next image's title: two names that share their start still read differently.

    Args:
        class_name: the class name, whole.
        height: the image's height in pixels.
        width: the image's width in pixels.

    Returns:
        The title, lines of at most `TITLE_LINE_CHARACTERS` characters; a character the
        plot font lacks is named (`drawable`).
    """
    text = f"{drawable(class_name)} ({height}x{width})"
    return "\n".join(textwrap.wrap(text, TITLE_LINE_CHARACTERS, break_on_hyphens=False))


# Names listed whole up to this many; beyond it, the first `NAMES_SHOWN` and a count.
MAX_NAMES_LISTED = 12
NAMES_SHOWN = 4


def short_list(
    names: Sequence[str], *, max_listed: int = MAX_NAMES_LISTED, shown: int = NAMES_SHOWN
) -> str:
    """Returns names joined by commas, shortened beyond `max_listed` to stay one line.

    Args:
        names: the names (classes, files), in the order to list them.
        max_listed: the most names listed whole.
        shown: how many are named when there are more than `max_listed`.

    Returns:
        Every name up to `max_listed`; beyond, the first `shown` and how many more, as in
        "n01440764, n01443537, n01484850, n01491361, ... (996 more)".

    Example:
        print(f"{len(class_names):,} classes:", display.short_list(class_names))
    """
    if len(names) <= max_listed:
        return ", ".join(names)
    listed = ", ".join(names[:shown])
    return f"{listed}, ... ({len(names) - shown:,} more)"


def describe_saving(before: float, after: float) -> str:
    """Says what a change of size saved, or how much it grew: "72% saved" or "grew 3.6x".

    Args:
        before: the size before (bytes, or bytes per image), more than 0.
        after: the size after, in the same unit.

    Returns:
        The share saved when `after` is at most `before`; otherwise the factor it grew by.
    """
    return f"{1 - after / before:.0%} saved" if after <= before else f"grew {after / before:.1f}x"


# Fewer training images a class than this cannot teach a model the class.
MIN_IMAGES_PER_CLASS = 10


def say_if_too_few_per_class(class_counts: Mapping[str, int], *, num_validation: int) -> None:
    """Prints one line when a class has too few training images to learn it from.

    Args:
        class_counts: {class: its training images} (`sampling.count_shard_classes`).
        num_validation: the validation images the accuracy is measured on.

    Example:
        display.say_if_too_few_per_class(sampling.count_shard_classes(train_paths,
            class_names), num_validation=num_validation)
    """
    few = {name: count for name, count in class_counts.items() if count < MIN_IMAGES_PER_CLASS}
    if not few:
        return
    named = short_list([f"{name} {count}" for name, count in few.items()], max_listed=4, shown=4)
    line = (
        f"WARNING: {len(few):,} of {len(class_counts):,} classes have under "
        f"{MIN_IMAGES_PER_CLASS} training images ({named}): too few to learn a class; expect "
        "accuracy near chance, whatever the pipeline."
    )
    if num_validation:
        line += (
            f" The validation accuracy is measured on {num_validation:,} image(s): each one "
            f"moves it by {1 / num_validation:.2f}, so even 1.00 can be luck, not learning."
        )
    print(line)


def show_predictions(
    images: np.ndarray,
    labels: np.ndarray,
    probabilities: np.ndarray,
    *,
    class_names: Sequence[str],
    num_columns: int = 4,
) -> Figure:
    """Shows images titled with the predicted class; wrong predictions in red.

    Args:
        images: uint8 images (n, height, width, 3).
        labels: the true class indices (n,).
        probabilities: the model's outputs (n, num_classes).
        class_names: the class names.
        num_columns: images per row.

    Returns:
        The matplotlib Figure.
    """
    predicted = np.argmax(probabilities, axis=1)
    num_rows = math.ceil(len(images) / num_columns)
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(2.4 * num_columns, 2.6 * num_rows))
    for axis in axes.flat:
        axis.axis("off")
    for axis, image, label, guess in zip(axes.flat, images, labels, predicted, strict=False):
        axis.imshow(image)
        right = guess == label
        text = class_names[guess] if right else f"{class_names[guess]} (is {class_names[label]})"
        text = drawable(text)
        wrapped = "\n".join(textwrap.wrap(text, TITLE_LINE_CHARACTERS, break_on_hyphens=False))
        axis.set_title(wrapped, color="black" if right else "red", fontsize=9)
    figure.tight_layout()
    return shown_as_jpeg(figure)


def show_image_rows(rows: dict[str, Sequence[np.ndarray]], *, title: str | None = None) -> Figure:
    """Shows images in rows, one row per label, the label above the row's first image.

    Args:
        rows: label -> images (uint8 arrays `(height, width, 3)`), in the order to show.
        title: the figure's title; None for none.

    Returns:
        The matplotlib Figure (at most 10 inches wide: 1,000 pixels at 100 dpi).

    Raises:
        ValueError: if `rows` is empty or holds no image.

    Example:
        display.show_image_rows({"original": originals, "cropped": crops})
    """
    num_columns = max((len(images) for images in rows.values()), default=0)
    if num_columns == 0:
        raise ValueError("`rows` must hold at least one image. Received: none.")
    figure, axes = plt.subplots(
        len(rows),
        num_columns,
        figsize=(min(MAX_WIDTH_INCHES, 2.0 * num_columns), 2.2 * len(rows) + 0.3),
        squeeze=False,
    )
    for row_axes, (label, images) in zip(axes, rows.items(), strict=True):
        for axis in row_axes:
            axis.axis("off")
        for axis, image in zip(row_axes, images, strict=False):
            axis.imshow(image)
        row_axes[0].set_title(drawable(label), fontsize=9, loc="left")
    if title:
        figure.suptitle(drawable(title), fontsize=10)
    figure.tight_layout()
    return shown_as_jpeg(figure)


def shown_as_jpeg(figure: Figure) -> Figure:
    """Shows a figure of photographs in the notebook as a JPEG, where it would be a PNG.

    Under IPython's inline backend (JupyterLab, Colab) the figure is shown now, as a JPEG
    at `JPEG_QUALITY`, and closed, so that the backend does not show it again as a PNG.
    Elsewhere (a script, another backend) it is left as it is.

    Args:
        figure: a figure of photographs (a grid of images).

    Returns:
        `figure`.
    """
    ipython = sys.modules.get("IPython")  # Imported wherever a kernel runs this.
    if ipython is None or ipython.get_ipython() is None:
        return figure
    if "inline" not in matplotlib.get_backend():
        return figure
    buffer = io.BytesIO()
    figure.savefig(
        buffer, format="jpeg", bbox_inches="tight", pil_kwargs={"quality": JPEG_QUALITY}
    )  # As the inline backend saves its PNG: cut to what is drawn.
    plt.close(figure)
    ipython.display.display(ipython.display.Image(data=buffer.getvalue(), format="jpeg"))
    return figure
