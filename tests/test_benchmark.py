"""Test of tools/benchmark.py in --quick mode: the report's structure, not its timings."""

import json

import pytest

from tools import benchmark

PIPELINES = [
    "files, one at a time",
    "files, 16 in flight",
    "image_dataset_from_directory",
    "original course TFRecords",
    "course pipeline",
]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("benchmark")
    assert benchmark.main(["--quick", "--output-dir", str(output_dir)]) == 0
    return json.loads((output_dir / "benchmark.json").read_text()), output_dir


def test_every_pipeline_is_measured_at_each_latency_and_the_ceiling_once(quick_run):
    report, _ = quick_run
    expected = ["decode ceiling (no I/O)"] + [
        f"{name} @ {latency} ms" for latency in benchmark.LATENCIES_MS for name in PIPELINES
    ]
    assert list(report["pipelines"]) == expected
    for figures in report["pipelines"].values():
        assert set(figures) == {"median", "min", "max"}
        assert 0 < figures["min"] <= figures["median"] <= figures["max"]


def test_growth_and_shard_counts_are_positive_numbers(quick_run):
    report, output_dir = quick_run
    by_size, by_shards = report["scaling"]["by_size"], report["scaling"]["by_shard_count"]
    assert list(by_size) == [str(size) for size in benchmark.QUICK["sizes"]]
    assert list(by_shards) == [str(count) for count in benchmark.QUICK["shard_counts"]]
    for figures in [*by_size.values(), *by_shards.values()]:
        assert all(value > 0 for value in figures.values())
    assert set(by_size["200"]) == {"write_seconds", "images_per_second", "peak_rss_mb"}
    assert (output_dir / "benchmark.png").stat().st_size > 10_000


def test_table_and_targets_give_ratios_to_the_ceiling_and_to_files(quick_run, capsys):
    report, _ = quick_run
    lines = benchmark.format_table(report["pipelines"])
    assert lines[0].split() == ["pipeline", "images/s", "min-max", "/ceiling", "/files", "1x1"]
    assert len(lines) == 1 + len(report["pipelines"])
    assert lines[1].split()[-2:] == ["1.000", "1.0x"]  # The ceiling against itself.
    targets = benchmark.targets(report["pipelines"])
    assert [line.split(":")[0] for line in targets] == [
        "course pipeline at 0 ms / decode ceiling",
        "course pipeline / image_dataset_from_directory at 50 ms",
        "course pipeline / original course pipeline",
    ]


def test_growth_summary_says_linear_flat_or_not():
    figures = {
        1000: {"write_seconds": 2.0, "images_per_second": 9000, "peak_rss_mb": 700},
        16000: {"write_seconds": 30.0, "images_per_second": 8800, "peak_rss_mb": 720},
    }
    summary = benchmark.growth_summary(figures)
    assert summary[1] == "  write time grew 15.0x (linear, within 50%)"
    assert "(flat)" in summary[2] and "(flat: nothing is cached whole)" in summary[3]
    figures[16000]["peak_rss_mb"] = 7000
    assert benchmark.growth_summary(figures)[3].endswith("(GROWS)")
