"""Test of tools/benchmark.py in --quick mode: the report's structure, not its timings."""

import json
import os
import subprocess
import sys

import pytest

from tools import benchmark
from tools.course_benchmark import (
    cores,
    grain_best,
    grain_loader,
    growth,
    pipelines,
    report,
    settings,
)
from tools.course_benchmark.settings import CEILING, REPO_ROOT, Row

CORE_COUNTS = settings.counts_up_to(len(os.sched_getaffinity(0)))

PIPELINES = [
    "files, one at a time",
    "files, 16 in flight",
    "image_dataset_from_directory",
    "original course TFRecords",
    "course pipeline",
] + (
    []
    if grain_loader.missing_reason()
    else ["Grain + ArrayRecord", "Grain, a request per record", "Grain at its best"]
)
QUICK_CORE_COUNTS = CORE_COUNTS[:1]  # --quick pins one child, to 1 core (cores.by_cores).
PINNED = [
    label
    for count in QUICK_CORE_COUNTS
    for label in (Row(CEILING.pipeline, None, count).label, Row("course pipeline", 0, count).label)
]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("benchmark")
    assert benchmark.main(["--quick", "--output-dir", str(output_dir)]) == 0
    return json.loads((output_dir / "benchmark.json").read_text()), output_dir


def test_every_pipeline_is_measured_at_each_latency_and_the_ceiling_once(quick_run):
    written, _ = quick_run
    expected = ["decode ceiling (no I/O)"] + [
        f"{name} @ {latency} ms" for latency in settings.LATENCIES_MS for name in PIPELINES
    ]
    assert list(written["pipelines"]) == expected + PINNED
    for label, figures in written["pipelines"].items():
        assert Row(figures["pipeline"], figures["latency_ms"], figures["cores"]).label == label
        assert set(figures) - {"cpu_us_per_image"} == {
            "pipeline",
            "latency_ms",
            "cores",
            "median",
            "min",
            "max",
            "runs",
        }
        assert 0 < figures["min"] <= figures["median"] <= figures["max"]
    headline = ["decode ceiling (no I/O)", "course pipeline @ 0 ms", "course pipeline @ 50 ms"]
    headline += [
        f"{name} @ {ms} ms"
        for ms in (0, 50)
        for name in ("Grain + ArrayRecord", "Grain at its best")
        if name in PIPELINES
    ]
    assert [len(written["pipelines"][name]["runs"]) for name in headline] == [2] * len(headline)
    assert [len(written["pipelines"][n]["cpu_us_per_image"]) for n in headline] == [2] * len(
        headline
    )
    assert len(written["pipelines"]["files, one at a time @ 0 ms"]["runs"]) == 1


def test_growth_and_shard_counts_are_positive_numbers(quick_run):
    written, output_dir = quick_run
    by_size, by_shards = written["scaling"]["by_size"], written["scaling"]["by_shard_count"]
    assert list(by_size) == [str(size) for size in settings.QUICK["sizes"]]
    assert list(by_shards) == [str(count) for count in settings.QUICK["shard_counts"]]
    for figures in by_size.values():
        assert set(figures) == {"write_seconds", "images_per_second", "cores_busy", "peak_rss_mb"}
        assert min(figures.values()) > 0
    for figures in by_shards.values():
        assert figures["min"] > 0 and len(figures["runs"]) == settings.QUICK["repeats"]
        assert len(figures["cores_busy"]) == settings.QUICK["repeats"]
        assert min(figures["cores_busy"]) > 0
    assert set(by_shards["2"]) == {"median", "min", "max", "runs", "cores_busy", "peak_rss_mb"}
    assert written["load"]["pipelines"]["summary"].startswith("The machine was ")
    assert (output_dir / "benchmark.png").stat().st_size > 10_000


def test_table_and_targets_give_ratios_to_the_ceiling_and_to_files(quick_run, capsys):
    written, _ = quick_run
    results = pipelines.results_from_json(written["pipelines"])
    assert list(results) == [CEILING] + [
        Row(name, latency) for latency in settings.LATENCIES_MS for name in PIPELINES
    ] + [
        Row(name, latency, count)
        for count in QUICK_CORE_COUNTS
        for name, latency in ((CEILING.pipeline, None), ("course pipeline", 0))
    ]
    lines = report.format_table(results)
    assert lines[0].split() == [
        "pipeline",
        "images/s",
        "min-max",
        "runs",
        "/ceiling",
        "/files",
        "1x1",
    ]
    assert len(lines) == 1 + len(written["pipelines"])
    assert lines[1].split()[-2:] == ["1.000", "1.0x"]  # The ceiling against itself.
    targets = report.targets(results)
    assert [line.split(":")[0] for line in targets if not line.startswith("  ")] == [
        "course pipeline at 0 ms / decode ceiling",
        "course pipeline at 50 ms / decode ceiling",
        "course pipeline / original course pipeline",
        "course pipeline / image_dataset_from_directory at 50 ms",
    ]
    assert [line.split(" (")[0] for line in targets if line.startswith("  ")] == [
        "  work share at 0 ms",
        "  work share at 50 ms",
    ]


def test_targets_take_ratios_within_each_round_and_say_met_or_not():
    def runs(*values):
        return {"median": 0, "min": 0, "max": 0, "runs": list(values)}

    results = {
        CEILING: runs(100, 110, 90),
        Row("course pipeline", 0): runs(96, 99, 90),  # 0.96, 0.90, 1.00 of the ceiling.
        Row("course pipeline", 50): runs(80, 88, 81),  # 0.80, 0.80, 0.90.
        Row("original course TFRecords", 0): runs(70, 75, 70),
        Row("original course TFRecords", 50): runs(60, 60, 60),
        Row("image_dataset_from_directory", 50): {"median": 4.0},
    }
    results[Row("course pipeline", 50)]["median"] = 81
    assert report.targets(results) == [
        "course pipeline at 0 ms / decode ceiling: 0.96 (range 0.90-1.00, -0.06/+0.04, "
        "3 runs in turns); target >= 0.95: met; spread within +-0.05: NOT met",
        "course pipeline at 50 ms / decode ceiling: 0.80 (range 0.80-0.90, -0.00/+0.10, "
        "3 runs in turns); target >= 0.9: NOT met; spread within +-0.05: NOT met",
        "course pipeline / original course pipeline: 1.32x (1.29-1.37) at 0 ms, "
        "1.35x (1.33-1.47) at 50 ms; target >= 1.3x at 0 ms: met",
        "course pipeline / image_dataset_from_directory at 50 ms: 20.2x (medians); "
        "target >= 10x: met",
    ]


def test_growth_summary_says_linear_flat_or_not():
    figures = {
        1000: {"write_seconds": 2.0, "images_per_second": 9000, "peak_rss_mb": 700},
        16000: {"write_seconds": 30.0, "images_per_second": 8800, "peak_rss_mb": 720},
    }
    summary = growth.growth_summary(figures)
    assert summary[1] == "  write time grew 15.0x (linear, within 50%)"
    assert "(flat)" in summary[2] and "(flat: nothing is cached whole)" in summary[3]
    figures[16000]["peak_rss_mb"] = 7000
    assert growth.growth_summary(figures)[3].endswith("(GROWS)")


def test_cores_busy_per_run_and_the_runs_that_fell_short():
    results = {
        CEILING: {"runs": [10_000.0, 6_000.0], "cpu_us_per_image": [190.0, 180.0]},
        Row("course pipeline", 0): {"runs": [9_000.0, 8_000.0], "cpu_us_per_image": [200.0, 230.0]},
        Row("course pipeline", 50): {"runs": [6_000.0], "cpu_us_per_image": [200.0]},
        Row("files, one at a time", 0): {"runs": [20.0]},
    }
    assert report.cores_busy_lines(results, num_cores=2) == [
        "  decode ceiling (no I/O): cores busy per run 1.90 1.08",
        "  course pipeline @ 0 ms: cores busy per run 1.80 1.84",
        "  course pipeline @ 50 ms: cores busy per run 1.20",
        "  runs without simulated latency that kept fewer than 1.5 of 2 cores busy: 1 of 4",
    ]


def test_shard_counts_show_each_runs_cores_busy():
    by_shard_count = {
        4: {
            "median": 6_330.0,
            "min": 6_320.0,
            "max": 10_500.0,
            "runs": [6_320.0, 6_330.0, 10_500.0],
            "cores_busy": [1.21, 1.25, 1.93],
            "peak_rss_mb": 900.0,
        },
    }
    assert growth.format_shard_counts(by_shard_count)[1].split() == [
        "4",
        "6,330",
        "6,320-10,500",
        "3",
        "900",
        "1.21",
        "1.25",
        "1.93",
    ]


def test_grain_rows_without_grain_are_skipped_with_the_reason(quick_run):
    written, _ = quick_run
    if grain_loader.missing_reason():
        assert written["skipped"] == {"Grain + ArrayRecord": grain_loader.missing_reason()}
        assert not any(name.startswith("Grain") for name in written["pipelines"])
    else:
        assert "skipped" not in written
        results = pipelines.results_from_json(written["pipelines"])
        lines = report.latency_and_grain_lines(results)
        assert [line.split(":")[0] for line in lines] == [
            "course pipeline at 50 ms / at 0 ms",
            "Grain + ArrayRecord at 50 ms / at 0 ms",
            "Grain at its best at 50 ms / at 0 ms",
            "Grain + ArrayRecord at 0 ms / decode ceiling",
            "  CPU time per image at 0 ms, microseconds",
            "Grain + ArrayRecord at 50 ms / decode ceiling",
            "  CPU time per image at 50 ms, microseconds",
        ]


def test_latency_and_grain_lines_take_ratios_within_each_round():
    def runs(*values, cpu=(300.0, 320.0)):
        return {"runs": list(values), "cpu_us_per_image": list(cpu)}

    results = {
        CEILING: runs(100, 200),
        Row("course pipeline", 0): runs(90, 160),
        Row("course pipeline", 50): runs(81, 160),  # 0.90 and 1.00 of 0 ms.
        Row("Grain + ArrayRecord", 0): runs(50, 60, cpu=(600.0, 700.0)),
        Row("Grain + ArrayRecord", 50): runs(40, 60, cpu=(650.0, 640.0)),
    }
    assert report.latency_and_grain_lines(results) == [
        "course pipeline at 50 ms / at 0 ms: 0.95 (range 0.90-1.00, 2 runs); target >= 0.97",
        "Grain + ArrayRecord at 50 ms / at 0 ms: 0.90 (range 0.80-1.00, 2 runs)",
        "Grain + ArrayRecord at 0 ms / decode ceiling: 0.40 (range 0.30-0.50, 2 runs); "
        "/ course pipeline: 0.47 (range 0.38-0.56, 2 runs)",
        "  CPU time per image at 0 ms, microseconds: Grain + ArrayRecord 650 (600-700); "
        "course pipeline 310 (300-320)",
        "Grain + ArrayRecord at 50 ms / decode ceiling: 0.35 (range 0.30-0.40, 2 runs); "
        "/ course pipeline: 0.43 (range 0.38-0.49, 2 runs)",
        "  CPU time per image at 50 ms, microseconds: Grain + ArrayRecord 645 (640-650); "
        "course pipeline 310 (300-320)",
    ]
    del results[Row("Grain + ArrayRecord", 0)], results[Row("Grain + ArrayRecord", 50)]
    assert len(report.latency_and_grain_lines(results)) == 1


def test_grain_at_its_best_is_the_fastest_of_the_settings_measured(quick_run):
    written, _ = quick_run
    if grain_loader.missing_reason():
        assert "grain_best" not in written
        return
    chosen, candidates = written["grain_best"]["chosen"], written["grain_best"]["candidates"]
    assert [(c["num_workers"], c["decoder"]) for c in candidates.values()] == [
        (count, decoder) for decoder in settings.QUICK["grain_decoders"] for count in CORE_COUNTS
    ]
    fastest = max(candidates, key=lambda label: candidates[label]["median"])
    assert chosen == {
        "label": fastest,
        "num_workers": candidates[fastest]["num_workers"],
        "decoder": candidates[fastest]["decoder"],
    }
    assert all(len(c["runs"]) == settings.QUICK["repeats"] for c in candidates.values())


def test_choose_takes_the_setting_with_the_highest_median(monkeypatch):
    from utils import comparison

    medians = {
        "1 worker, pillow": 900.0,
        "2 workers, pillow": 1500.0,
        "1 worker, tensorflow": 1000.0,
        "2 workers, tensorflow": 1400.0,
    }

    def measured(rates, repeats):
        assert list(rates) == list(medians) and repeats == 3
        return {
            label: comparison.RepeatedResult(label, (m, m + 10, m - 10))
            for label, m in medians.items()
        }

    monkeypatch.setattr(comparison, "measure_in_turns", measured)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    choice = grain_best.choose(["unused"], 5, {**settings.FULL, "repeats": 3})
    assert choice["chosen"] == {"num_workers": 2, "decoder": "pillow", "label": "2 workers, pillow"}
    assert choice["candidates"]["1 worker, tensorflow"]["runs"] == [1000.0, 1010.0, 990.0]


def test_grain_best_lines_say_the_winner_and_its_ratios_within_each_round():
    def runs(*values, cpu=(300.0, 320.0)):
        return {"runs": list(values), "cpu_us_per_image": list(cpu)}

    results = {
        Row("course pipeline", 0): runs(100, 200),
        Row("Grain + ArrayRecord", 0): runs(20, 40),
        Row("Grain at its best", 0): runs(50, 80, cpu=(400.0, 500.0)),
    }
    choice = {
        "chosen": {"label": "2 workers, pillow"},
        "candidates": {
            "1 worker, pillow": {"median": 30.0, "min": 29.0, "max": 31.0, "runs": [29.0, 31.0]},
            "2 workers, pillow": {"median": 52.0, "min": 50.0, "max": 54.0, "runs": [50.0, 54.0]},
        },
    }
    assert grain_best.grain_best_lines(results, choice) == [
        "Grain at its best: 2 workers, pillow (Grain's processes, each with its reading "
        "threads), the fastest at 0 ms of 1 worker, pillow 30 (29-31); 2 workers, pillow 52 "
        "(50-54) images/s, 2 rounds in turns",
        "Grain at its best at 0 ms / course pipeline: 0.45 (range 0.40-0.50, 2 runs); "
        "/ Grain + ArrayRecord (threads): 2.25 (range 2.00-2.50, 2 runs)",
        "  CPU time per image at 0 ms, microseconds, with its workers: 450 (400-500)",
    ]


def test_counts_up_to_the_cores_double_then_end_at_the_cores():
    assert [settings.counts_up_to(n) for n in (1, 2, 6, 16)] == [
        [1],
        [1, 2],
        [1, 2, 4, 6],
        [1, 2, 4, 8, 16],
    ]
    with pytest.raises(ValueError, match=r"`num_cores` must be >= 1. Received: num_cores=0"):
        settings.counts_up_to(0)


def test_a_pinned_child_reports_the_one_core_it_was_given():
    code = (
        "from tools.course_benchmark import cores; import os; "
        "print(cores.pin(1), len(os.sched_getaffinity(0)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert done.stdout.split() == ["1", "1"]
    too_many = len(os.sched_getaffinity(0)) + 1
    with pytest.raises(ValueError, match=rf"Received: num_cores={too_many}"):
        cores.pin(too_many)
    with pytest.raises(RuntimeError, match="Pin before TensorFlow starts"):
        import tensorflow  # noqa: F401

        cores.measure_on_cores(1, settings.QUICK)


def test_by_cores_refuses_a_child_that_kept_other_cores(monkeypatch):
    def child(command, **kwargs):
        figures = {"cores": 2, "runs": {}, "cpu_us_per_image": {}}
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps(figures), stderr="")

    monkeypatch.setattr(subprocess, "run", child)
    with pytest.raises(RuntimeError, match="Pinned to 1 cores, the child had 2"):
        cores.by_cores(settings.QUICK, quick=True)


def test_cores_lines_give_the_per_core_rates_and_the_growth_within_rounds():
    def runs(*values):
        return {"runs": list(values), "median": sorted(values)[len(values) // 2]}

    results = {
        Row(CEILING.pipeline, None, 1): runs(5000, 5200, 4800),
        Row("course pipeline", 0, 1): runs(4000, 4680, 4320),  # 0.80, 0.90, 0.90.
        Row(CEILING.pipeline, None, 2): runs(9000, 10400, 9600),  # x1.80, x2.00, x2.00.
        Row("course pipeline", 0, 2): runs(8400, 8320, 8640),  # x2.10, x1.78, x2.00.
        CEILING: runs(1, 1, 1),  # Rows on every core are not these lines' business.
    }
    assert cores.cores_lines(results) == [
        "On 1 core: course pipeline / decode ceiling 0.90 (range 0.80-0.90, 3 runs); "
        "per core: ceiling 5,000, course pipeline 4,320 images/s",
        "On 2 cores: course pipeline / decode ceiling 0.90 (range 0.80-0.93, 3 runs); "
        "per core: ceiling 4,800, course pipeline 4,200 images/s",
        "From 1 to 2 cores (x2), within each round: ceiling x2.00 (range 1.80-2.00, 3 runs); "
        "course pipeline x2.00 (range 1.78-2.10, 3 runs)",
    ]
