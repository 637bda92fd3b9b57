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
        ("05_accelerator_waiting", "a bar below a dashed line", "step_timing.describe_keeps_up("),
        ("05_accelerator_waiting", "a bar below a dashed line", "references=consumers"),
        (
            "05_accelerator_waiting",
            "Read the images/s column above",
            "step_timing.time_batch_sizes(",
        ),
        (
            "05_accelerator_waiting",
            "Compare the two ratios above",
            "step_timing.describe_steps_per_execution(",
        ),
        ("05_accelerator_waiting", "says how many lie elsewhere", "decode_less.crop_differences("),
        ("05_accelerator_waiting", "Read the ratios printed above", "decode_less.time_variants("),
        (
            "05_accelerator_waiting",
            "the min-max ranges show how much the numbers",
            'summary(".2f")',
        ),
        (
            "05_accelerator_waiting",
            "the min-max ranges show how much the numbers",
            "decode_load.summary()",
        ),
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
