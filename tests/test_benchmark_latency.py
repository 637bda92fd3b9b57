"""Tests of tools/course_benchmark/latency.py: the variants it measures, its table (no timing)."""

from tools.course_benchmark import latency as benchmark_latency


def test_variants_cover_the_simulations_cost_and_the_knobs_at_50_ms():
    names = list(benchmark_latency.variants(["a.tfrec"], num_classes=5))
    assert names == [
        "no storage layer",
        benchmark_latency.BASELINE,
        "simulation @ 50 ms",
        "object storage @ 50 ms (p99 500, 85 MB/s)",
        "@ 50 ms, repeat() after the pipeline",
        "object storage, repeat() after the pipeline",
        "@ 50 ms, 32 reads in flight",
        "@ 50 ms, no final prefetch",
    ]


def test_format_results_gives_median_and_range_of_each_figure():
    results = {
        "simulation @ 0 ms": {
            "images_per_second": [6_000.0, 8_000.0, 7_000.0],
            "cpu_us_per_image": [250.0, 250.0, 250.0],
            "cores_busy": [1.5, 2.0, 1.75],
        },
        "simulation @ 50 ms": {
            "images_per_second": [6_000.0, 7_000.0, 6_500.0],
            "cpu_us_per_image": [280.0, 300.0, 290.0],
            "cores_busy": [1.68, 2.0, 1.9],
        },
    }
    lines = benchmark_latency.format_results(results)
    assert lines[0].split() == [
        "variant",
        "images/s",
        "CPU",
        "us/image",
        "cores",
        "busy",
        "/",
        "simulation",
        "@",
        "0",
        "ms",
    ]
    # Ratios within each round: 1.00, 0.875, 0.93.
    assert lines[2].split() == [
        "simulation",
        "@",
        "50",
        "ms",
        "6,500",
        "(6,000-7,000)",
        "290",
        "(280-300)",
        "1.90",
        "(1.68-2.00)",
        "0.93",
        "(0.88-1.00)",
    ]
    assert lines[1].split()[-2:] == ["1.00", "(1.00-1.00)"]
