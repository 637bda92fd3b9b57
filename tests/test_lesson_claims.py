"""The lessons' sentences rely only on numbers a cell above them prints (issue 18)."""

import jupytext
import pytest

from tests.conftest import REPO_ROOT


def _cells(stem):
    notebook = jupytext.read(REPO_ROOT / "notebooks" / f"{stem}.py", fmt="py:percent")
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def _code_above(cells, phrase):
    """Returns the code of every cell above the first markdown cell containing `phrase`."""
    for index, (kind, source) in enumerate(cells):
        if kind == "markdown" and phrase in source:
            return "\n".join(text for k, text in cells[:index] if k == "code")
    raise AssertionError(f"No markdown cell says {phrase!r}.")


@pytest.mark.parametrize(
    "stem, phrase, printed",
    [
        (
            "01_tf_data_basics",
            "Since each pass over `filenames` has a new order",
            "The next pass starts with the same 5 paths:",
        ),
        (
            "02_write_tfrecords",
            "Read the two lines above: how much of the saving",
            "without resizing {same_size:,.0f}",
        ),
        (
            "02_write_tfrecords",
            "Read the two lines above: how much of the saving",
            "{decode_same_size.images_per_second:,.0f}",
        ),
        ("03_read_tfrecords", "the line above says how many shards", "knobs.describe_verdicts("),
        ("03_read_tfrecords", "with the verdicts printed above", "knobs.describe_verdicts("),
        ("03_read_tfrecords", "the bandwidth printed above", "knobs.describe_storage_demand("),
        (
            "03_read_tfrecords",
            "the number of streams printed above",
            "stream_megabytes_per_second=STREAM_MEGABYTES",
        ),
        ("03_read_tfrecords", "(see the\n#   count above)", "ablation.first_bytes_ms"),
        ("03_read_tfrecords", "opens only as many shards as the", "num_cores=os.cpu_count()"),
        ("03_read_tfrecords", "The dashed line is the decode ceiling", "ceiling=ceiling"),
        (
            "04_train_keras",
            "bfloat16 keeps\n# such a gradient (the end of each",
            "step_timing.describe_float_formats()",
        ),
        ("05_accelerator_waiting", "Read the verdicts above", "judge(step_ratio"),
        ("05_accelerator_waiting", "Read the verdicts above", "references={name: need.median"),
        ("05_accelerator_waiting", "as the chart does with the medians", "median_bars(delivered)"),
        ("05_accelerator_waiting", "Compare the two verdicts above", '"fewer calls pay"'),
        ("05_accelerator_waiting", "says how many lie elsewhere", "decode_less.crop_differences("),
        ("05_accelerator_waiting", "The line on the\n# machine's load", "decode_load.summary()"),
        ("05_accelerator_waiting", "A ratio near 1 means decoding", "judge(speedup"),
        ("07_scale_out_reading", "The lines above say which limit held", "The lower limit:"),
        ("07_scale_out_reading", "the lower of the two limits", "cpu_limit = os.cpu_count()"),
    ],
)
def test_sentence_relies_on_a_number_printed_above(stem, phrase, printed):
    assert printed in _code_above(
        _cells(stem), phrase.replace("\n# ", "\n").replace("\n#  ", "\n ")
    )


def test_lab1_grid_and_sizes_show_the_same_nine_images():
    cells = _cells("01_tf_data_basics")
    code = "\n".join(source for kind, source in cells if kind == "code")
    assert "nine_paths, _, _ = sources.readable_sample(shuffled_paths, 9)" in code
    assert "from_tensor_slices(nine_paths).map(read_and_decode)" in code
    assert "images_and_labels.take(9)" in code


def test_lab3_attributes_the_discarded_options_bug_to_fast_and_lean_07():
    text = "\n".join(source for _, source in _cells("03_read_tfrecords"))
    assert "fast-and-lean 07, Xception" in text
    assert "reads one file at a time" not in text
    assert "exactly `LATENCY_MS`, so no file is ever late" not in text


@pytest.mark.parametrize(
    "stem, todo, hint",
    [
        ("01_tf_data_basics", 2, "`class_names == folder` gives one\nboolean per class"),
        ("02_write_tfrecords", 1, "`tf.shape()` gives int32"),
    ],
    ids=["lab 1 TODO 2: string to class index", "lab 2 TODO 1: the dtype trap"],
)
def test_todo_instructions_carry_the_hint(stem, todo, hint):
    cells = _cells(stem)
    (instruction,) = [s for k, s in cells if k == "markdown" and f"**TODO {todo}.**" in s]
    assert "*Hint:*" in instruction and hint in instruction


def test_lab4_validation_reads_in_the_fixed_order_its_text_says():
    cells = _cells("04_train_keras")
    below = "\n".join(
        text
        for _, text in cells[[s for _, s in cells].index(_markdown(cells, "Validation reads")) :]
    )
    assert "in a fixed order (`deterministic=True`" in below
    assert "read_images(validation_paths, deterministic=True)" in below
    code = "\n".join(text for kind, text in cells if kind == "code")
    assert "deterministic=deterministic" in code


def test_lab4_times_nothing_and_points_to_lesson_5():
    cells = _cells("04_train_keras")
    code = "\n".join(text for kind, text in cells if kind == "code")
    assert "time_training_steps(" not in code and "measure_input_bound(" not in code
    assert "`05_accelerator_waiting`" in "\n".join(text for _, text in cells)


def _markdown(cells, phrase):
    (source,) = [text for kind, text in cells if kind == "markdown" and phrase in text]
    return source


def test_lesson5_per_core_batch_section_claims_no_tpu_shape_from_this_device():
    text = "\n".join(
        source for kind, source in _cells("05_accelerator_waiting") if kind == "markdown"
    )
    text = text.replace("\n# ", " ").replace("\n", " ")
    for fact in [
        "a **convolution**'s rows are batch x height x width",
        "128 x 128 on v5e",
        "256 x 256 on v6e",
        "tiles of 8 x 128",
        "batch per core a multiple of 8 and feature sizes (channels, units) multiples of 128",
        "It cannot measure the MXU",
        "the numbers say nothing about a TPU's shape",
    ]:
        assert fact in text, fact
    assert "measure the shape of it" not in text and "images are its rows" not in text
    code = "\n".join(source for kind, source in _cells("05_accelerator_waiting") if kind == "code")
    assert "step_timing.describe_matrix_shapes(timed_model" in code


def test_lesson5_dates_tensorflow_tpus_crop_while_decoding():
    cells = _cells("05_accelerator_waiting")
    text = _markdown(cells, "## Decode less").replace("\n# ", " ").replace("\n", " ")
    assert "since its commit 9a3c65a (2023-11-08) the training crop decodes the whole image" in text
    assert "only its evaluation centre crop still uses `decode_and_crop_jpeg()`" in text
    assert "pick the crop *before* decoding" not in text


def test_lesson5_judges_every_ratio_with_the_learners_verdict():
    code = "\n".join(text for kind, text in _cells("05_accelerator_waiting") if kind == "code")
    # Each ratio taken in turns is printed through judge(), which calls verdict() (TODO 2).
    assert code.count("timing.ratio_in_turns(") == 5 and code.count("judge(") == 7
    assert "said = verdict(ratio, tolerance=step_timing.TOLERANCE" in code
