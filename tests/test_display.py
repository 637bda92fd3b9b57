"""Tests of utils/display.py (images) and utils/charts.py (charts)."""

import warnings

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tensorflow as tf

from utils import charts, comparison, display, timing
from utils.lessons.where_the_time_goes import ablation_chart

matplotlib.use("Agg")  # No screen here.
CLASSES = ("a", "b", "c")


def _pairs(count, dtype=np.uint8):
    images = [np.full((10 + i, 20, 3), 100, dtype) for i in range(count)]
    return tf.data.Dataset.from_generator(
        lambda: ((image, i % 3) for i, image in enumerate(images)),
        output_signature=(
            tf.TensorSpec((None, 20, 3), tf.as_dtype(dtype)),
            tf.TensorSpec((), tf.int32),
        ),
    )


def test_show_images_titles_give_class_and_size():
    figure = display.show_images(_pairs(12), class_names=CLASSES)
    titles = [axis.get_title() for axis in figure.axes if axis.get_title()]
    assert titles[:3] == ["a (10x20)", "b (11x20)", "c (12x20)"]
    assert len(titles) == 9


def test_show_images_fewer_images_than_asked():
    figure = display.show_images(_pairs(4), class_names=CLASSES, num_images=9, num_columns=3)
    assert len([axis for axis in figure.axes if axis.get_title()]) == 4


def test_show_images_float_images_in_0_255_are_scaled():
    figure = display.show_images(_pairs(1, np.float32), class_names=CLASSES, num_images=1)
    shown = figure.axes[0].get_images()[0].get_array()
    assert shown.max() <= 1.0


def test_show_images_bad_input():
    with pytest.raises(ValueError, match=r"`num_images` must be a positive integer"):
        display.show_images(_pairs(1), class_names=CLASSES, num_images=0)
    with pytest.raises(ValueError) as error:
        display.show_images(_pairs(0), class_names=CLASSES)
    assert str(error.value) == (
        "The dataset yielded no (image, label) pairs to show: it is empty. Check what it was "
        "built from (an empty list of paths, a filter that keeps nothing, take(0))."
    )


def test_plot_throughput_bars_labels_and_log_scale():
    results = [
        timing.ThroughputResult("slow", 10, 1.0, 10.0, None, 0.0),
        timing.ThroughputResult("fast", 10, 0.01, 1000.0, None, 0.0),
    ]
    figure = charts.plot_throughput(results, title="T")
    axis = figure.axes[0]
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["slow", "fast"]
    assert [round(bar.get_height()) for bar in axis.patches] == [10, 1000]
    assert axis.get_yscale() == "log"
    assert charts.plot_throughput(results[:1]).axes[0].get_yscale() == "linear"
    # A dashed line 50x below the bars would sit on the axis, its label under a bar.
    far_below = charts.plot_throughput(results[1:], references={"the CPU consumes": 20})
    assert far_below.axes[0].get_yscale() == "log"


def test_plot_throughput_needs_results():
    with pytest.raises(ValueError, match=r"`results` must hold at least one"):
        charts.plot_throughput([])


def _result(label, rate):
    return timing.ThroughputResult(label, 100, 100 / rate, rate, None, 0.0)


def _runs(label, *values):
    return comparison.RepeatedResult(label, tuple(values))


def test_plot_ablation_draws_each_setting_against_the_courses():
    figure = ablation_chart.plot_ablation(
        {
            "reads": [_runs("1", 100, 95, 105), _runs("16", 400, 380, 420)],
            "prefetch": [_runs("on", 400, 400, 400), _runs("off", 800, 760, 840)],
            "cache": [_runs("off", 400, 400, 400), _runs("on", 4000, 4200, 3800)],
        },
        title="t",
        course_settings={"reads": "16", "prefetch": "on"},  # The cache: its first, "off".
    )
    reads, prefetch, cache = figure.axes[:3]
    assert [t.get_text() for t in reads.get_xticklabels()] == ["1", "16"]
    # Round by round: 100/400, 95/380, 105/420 are all 0.25; 800/400 ... are all 2.
    assert [t.get_text() for t in reads.texts] == ["0.25x", "1.00x"]
    assert reads.get_title() == "reads: against 16"
    assert [t.get_text() for t in prefetch.texts] == ["1.00x", "2.00x"]
    assert reads.get_ylim() == prefetch.get_ylim() == (0, pytest.approx(2.1 * 1.2))
    assert [list(line.get_ydata()) for line in reads.get_lines()[:1]] == [[1.0, 1.0]]
    # The cache moves it 10x: its own scale, said in its title; the others stay readable.
    assert cache.get_title() == "cache: against off (own scale)"
    assert cache.get_ylim() == (0, pytest.approx(10.5 * 1.2))
    assert reads.get_ylabel() == "x the course pipeline"


def test_plot_ablation_rejects_nothing_to_plot():
    with pytest.raises(ValueError, match="at least one knob"):
        ablation_chart.plot_ablation({})
    with pytest.raises(ValueError, match=r"Received none for: \['cache'\]"):
        ablation_chart.plot_ablation({"cache": []})


def test_show_predictions_marks_wrong_answers_in_red():
    images = np.zeros((3, 8, 8, 3), np.uint8)
    probabilities = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]])
    figure = display.show_predictions(
        images, np.array([0, 2, 2]), probabilities, class_names=CLASSES, num_columns=3
    )
    titles = [(axis.get_title(), axis.title.get_color()) for axis in figure.axes]
    assert titles == [("a", "black"), ("b (is c)", "red"), ("c", "black")]


def _saved_width(figure, tmp_path):
    """Returns the width in pixels of the figure as a notebook saves it (tight, 100 dpi)."""
    path = tmp_path / "figure.png"
    figure.savefig(path, bbox_inches="tight", dpi=100)
    return matplotlib.image.imread(path).shape[1]


def _result(label, rate):
    return timing.ThroughputResult(label, 100, 100 / rate, rate, None, 0.0)


def test_lab3_figures_fit_the_notebook_width(tmp_path):
    knobs = {
        "num_parallel_reads": [_runs(str(n), 300 * n, 310 * n) for n in (1, 4, 16)]
        + [_runs("AUTOTUNE", 1400, 1450)],
        "shards": [_runs(str(n), 1000 + n, 1010 + n) for n in (1, 4, 16, 64)],
        "deterministic": [_runs("false", 1500, 1550), _runs("true", 1400, 1450)],
        "prefetch": [_runs("true", 1500, 1550), _runs("false", 1450, 1500)],
        "cache": [_runs("false", 1500, 1550), _runs("true", 40000, 41000)],
    }
    assert _saved_width(ablation_chart.plot_ablation(knobs, title="x" * 90), tmp_path) <= 1000
    speed = [
        _result(n, r)
        for n, r in [
            ("files, one at a time", 17),
            ("files, parallel", 300),
            ("TFRecords, one reader", 1200),
            ("TFRecords, fast", 1500),
        ]
    ]
    figure = charts.plot_throughput(speed, ceiling=_result("decode ceiling", 2100))
    assert _saved_width(figure, tmp_path) <= 1000
    (line,) = figure.axes[0].get_lines()
    assert list(line.get_ydata()) == [2100, 2100]
    assert figure.axes[0].texts[-1].get_text() == "decode ceiling: 2,100"
    plt.close("all")


def test_plot_throughput_draws_a_repeated_ceiling_at_its_median_with_its_range():
    ceiling = comparison.RepeatedResult("decode ceiling", (2000.0, 2100.0, 2300.0))
    figure = charts.plot_throughput([_result("TFRecords, fast", 1500)], ceiling=ceiling)
    (line,) = figure.axes[0].get_lines()
    assert list(line.get_ydata()) == [2100, 2100]
    assert figure.axes[0].texts[-1].get_text() == "decode ceiling: 2,100 (2,000-2,300, 3 runs)"
    plt.close("all")


def test_plot_quality_trade_off_each_panel_scaled_to_its_own_values(tmp_path):
    figure = charts.plot_quality_trade_off(
        [50, 90], [6.0, 14.0], [2900, 2100], reference=("originals", 38.7, 1630)
    )
    kilobytes_axis, speed_axis = figure.axes
    assert kilobytes_axis.get_ylim() == pytest.approx((0, 38.7 * 1.15))
    assert speed_axis.get_ylim() == pytest.approx((0, 2900 * 1.15))
    assert _saved_width(figure, tmp_path) <= 1000
    plt.close("all")


def test_plot_quality_trade_off_draws_the_psnr_in_a_third_panel(tmp_path):
    # Lab 2 once printed "No artists with labels found to put in legend" under this chart.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = charts.plot_quality_trade_off(
            [50, 90], [6.0, 14.0], [2900, 2100], psnr_db=[33.5, 41.0]
        )
    _, _, psnr_axis = figure.axes
    (psnr_line,) = psnr_axis.get_lines()  # No threshold: the lab names no source for one.
    assert list(psnr_line.get_ydata()) == [33.5, 41.0]
    assert psnr_axis.get_title() == "PSNR, dB (higher: more detail kept)"
    assert _saved_width(figure, tmp_path) <= 1000
    plt.close("all")


def test_show_image_rows_one_row_per_label_and_rejects_nothing_to_show():
    rows = {"first": [np.zeros((8, 8, 3), np.uint8)] * 3, "second": [np.zeros((4, 6, 3), np.uint8)]}
    figure = display.show_image_rows(rows, title="Rows")
    assert [axis.get_title(loc="left") for axis in figure.axes[::3]] == ["first", "second"]
    assert sum(len(axis.images) for axis in figure.axes) == 4
    assert figure.get_figwidth() <= display.MAX_WIDTH_INCHES
    with pytest.raises(ValueError, match=r"`rows` must hold at least one image"):
        display.show_image_rows({"empty": []})


def test_lab4_figure_draws_what_each_accelerator_consumes(tmp_path):
    bars = [
        _result("pipeline, reading and decoding", 1400),
        _result("pipeline, from its cache", 9000),
        _result("training, fed without cache", 300),
    ]
    consumers = {"CPU consumes": 310.0, "the stand-in consumes": 5000}
    figure = charts.plot_throughput(bars, references=consumers, title="x" * 70)
    assert _saved_width(figure, tmp_path) <= 1000
    lines = figure.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[310.0, 310.0], [5000, 5000]]
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert texts[-2:] == ["CPU consumes: 310", "the stand-in consumes: 5,000"]
    assert figure.axes[0].get_ylim()[1] > 9000  # The bars' value labels stay in the frame.
    plt.close("all")


def test_a_value_label_under_a_dashed_line_moves_inside_its_bar():
    bars = [_result("pipeline", 2300), _result("cached", 19600), _result("training", 201)]
    figure = charts.plot_throughput(bars, references={"CPU consumes": 255.0})
    labels = {text.get_text(): text for text in figure.axes[0].texts}
    assert labels["201"].get_va() == "top" and labels["201"].get_color() == "white"
    assert labels["2,300"].get_va() == "bottom" and labels["2,300"].get_color() == "black"
    plt.close("all")


def test_image_title_wraps_a_long_class_name_whole():
    title = display.image_title("sunflowers_in_the_late_afternoon_light", 192, 192)
    assert title == "sunflowers_in_the_late_a\nfternoon_light (192x192)"
    assert display.image_title("daisy", 180, 240) == "daisy (180x240)"


def test_show_images_and_predictions_keep_long_class_names_whole():
    names = ["sunflowers_in_the_morning_sun", "sunflowers_in_the_evening_sun"]
    images = np.zeros((2, 8, 8, 3), np.uint8)
    pairs = tf.data.Dataset.from_tensor_slices((images, [0, 1]))
    figure = display.show_images(pairs, class_names=names, num_images=2, num_columns=2)
    assert [axis.get_title() for axis in figure.axes] == [
        "sunflowers_in_the_mornin\ng_sun (8x8)",
        "sunflowers_in_the_evenin\ng_sun (8x8)",
    ]
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2]])
    figure = display.show_predictions(images, np.array([0, 1]), probabilities, class_names=names)
    assert [axis.get_title() for axis in figure.axes[:2]] == [
        "sunflowers_in_the_mornin\ng_sun",
        "sunflowers_in_the_mornin\ng_sun (is sunflowers_in_\nthe_evening_sun)",
    ]
