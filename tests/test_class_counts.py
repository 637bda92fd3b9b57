"""Issue 52, item 4: output that stays readable at any class count (300 classes of 2 images)."""

import io

import numpy as np
import pytest
from PIL import Image

from utils import display
from utils.lab import conversion, sources, validation

FLOWERS = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
MANY = [f"n{index:08d}" for index in range(1000)]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (FLOWERS, "daisy, dandelion, roses, sunflowers, tulips"),
        (MANY[:12], ", ".join(MANY[:12])),
        (MANY[:13], "n00000000, n00000001, n00000002, n00000003, ... (9 more)"),
        (MANY, "n00000000, n00000001, n00000002, n00000003, ... (996 more)"),
        ([], ""),
    ],
    ids=["5 flowers", "a dozen", "13", "1,000", "none"],
)
def test_short_list_lists_a_dozen_names_whole_and_shortens_beyond(names, expected):
    assert display.short_list(names) == expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [(1724, 431, "75% saved"), (1724, 1724, "0% saved"), (1724, 6174, "grew 3.6x")],
)
def test_describe_saving_says_grew_instead_of_a_negative_saving(before, after, expected):
    assert display.describe_saving(before, after) == expected


def test_say_if_too_few_per_class_speaks_once_for_the_classes_under_ten(capsys):
    display.say_if_too_few_per_class({"daisy": 600, "roses": 587}, num_validation=300)
    assert capsys.readouterr().out == ""
    counts = {"cats \U0001f431": 7, "dogs": 8, "owls": 12}
    display.say_if_too_few_per_class(counts, num_validation=3)
    assert capsys.readouterr().out == (
        "WARNING: 2 of 3 classes have under 10 training images (cats \U0001f431 7, dogs 8): too "
        "few to learn a class; expect accuracy near chance, whatever the pipeline. The "
        "validation accuracy is measured on 3 image(s): each one moves it by 0.33, so even "
        "1.00 can be luck, not learning.\n"
    )


@pytest.fixture(scope="module")
def many_classes(tmp_path_factory):
    """300 class folders of 2 small JPEGs each, converted once."""
    root = tmp_path_factory.mktemp("many") / "photos"
    rng = np.random.default_rng(52)
    for index in range(300):
        folder = root / f"n{index:08d}"
        folder.mkdir(parents=True)
        for number in range(2):
            buffer = io.BytesIO()
            pixels = rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(buffer, "JPEG", quality=80)
            (folder / f"{number}.jpg").write_bytes(buffer.getvalue())
    source = sources.resolve_source(str(root))
    output_dir = root.parent / "shards"
    conversion.convert(source, output_dir, target_size=16, num_shards=4)
    return source, output_dir


def test_describe_of_300_classes_is_one_short_line(many_classes):
    source, _ = many_classes
    assert source.describe() == (
        "600 images in 300 classes (n00000000, n00000001, n00000002, n00000003, ... "
        "(296 more)), local disk"
    )


def test_validation_table_of_300_classes_is_folded(many_classes, capsys):
    _, output_dir = many_classes
    report = validation.validate(str(output_dir))
    assert report.ok
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index("shard                records  classes  per class") :]
    assert table[1] == "-" * len(table[0])
    assert table[7] == "total                    600      300  2-2"
    assert table[8] == (
        "(300 classes, a column each too many: 'classes' counts those in a shard, "
        "'per class' a class's fewest-most records.)"
    )
    assert max(len(line) for line in lines) < 120
