"""Tests of tools/profile_pipeline.py and tools/pipeline_profile/: every stage and every change
in the sweep builds and reads, and the stage figure fits the notebook width. Timings are not
tested."""

import matplotlib.image
import pytest

from tools import profile_pipeline
from tools.pipeline_profile import stages, sweep, variants


@pytest.fixture(scope="module")
def shard_paths(write_small_shards):
    return write_small_shards(4)


@pytest.mark.parametrize(
    "stage, shape",
    [("read", (16,)), ("+ parse", (16,)), ("+ decode", (16, 32, 32, 3))],
)
def test_each_stage_yields_what_it_has_done_so_far(shard_paths, stage, shape):
    dataset = variants.build(
        shard_paths, num_classes=5, stage=stage, parse_batch=16, target_size=32
    )
    element = next(iter(dataset))
    first = element[0] if isinstance(element, tuple) else element
    assert tuple(first.shape) == shape


def test_every_change_in_the_sweep_reads_the_same_images(shard_paths):
    for name, change in sweep.SWEEP.items():
        settings = {"parse_batch": 16, **change}
        dataset = variants.build(shard_paths, num_classes=5, target_size=32, **settings)
        images, labels = next(iter(dataset))
        batch = min(settings["parse_batch"], 60)  # The shards hold 60 records.
        # In any order (deterministic=False), the short last batch (60 % 32) may come first.
        sizes = {batch, 60 % batch} - {0}
        assert images.shape[0] in sizes and tuple(images.shape[1:]) == (32, 32, 3), name
        assert tuple(labels.shape) == (images.shape[0], 5), name


def test_stage_figure_is_at_most_1000_pixels_wide(tmp_path):
    figures = {
        name: {"cpu_us_per_image": cost, "cores_busy": 1.9}
        for name, cost in zip(
            [*variants.STAGES, "decode ceiling (no I/O)"],
            [9, 16, 175, 173, 157],
            strict=True,
        )
    }
    report = {"stages": figures, "decomposition": {"cores": 2}, "load": "The machine was idle"}
    path = tmp_path / "stages.png"
    stages.plot_stages(report, path)
    assert matplotlib.image.imread(path).shape[1] <= 1000


def test_unknown_sweep_change_is_refused_with_the_names(capsys):
    with pytest.raises(SystemExit):
        profile_pipeline.main(["sweep", "--only", "faster please"])
    assert "--only: unknown change(s) ['faster please']; choose from" in capsys.readouterr().err


def test_parsing_only_the_used_features_gives_the_same_images_and_labels(shard_paths):
    def first_batch(**change):
        # One decode call at a time: the first batch out is the first batch read (the
        # pipeline is not deterministic; with parallel calls any batch can come first).
        dataset = variants.build(
            shard_paths,
            num_classes=5,
            target_size=32,
            parse_batch=16,
            cycle_length=1,
            decode_calls=1,
            **change,
        )
        return [tensor.numpy() for tensor in next(iter(dataset))]

    (images, labels), (all_images, all_labels) = first_batch(used_features_only=True), first_batch()
    assert (images == all_images).all() and (labels == all_labels).all()
    assert labels.dtype == all_labels.dtype and labels.sum() == 16  # One-hot, one per image.
