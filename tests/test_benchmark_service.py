"""Test of tools/course_benchmark/service.py on tiny parameters: its rows, not its timings."""

import re

import pytest

from tools.course_benchmark import service as benchmark_service

LABELS = [benchmark_service.NO_SERVICE, "service, 1 worker", "service, 2 workers"]


def test_main_on_tiny_parameters_prints_a_row_per_configuration(capsys):
    arguments = "--num-images 60 --num-shards 2 --target-size 32 --batch-size 8 --timed 16"
    assert benchmark_service.main([*arguments.split(), "--latency-ms", "1", "--repeats", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "2 shards, 60 records of 32 px; SIMULATED 1 ms per shard; 16 images timed, "
        "2 alternating repetition(s); " + lines[0].rsplit("; ", 1)[1]
    )
    assert lines[1].split() == [
        "pipeline",
        "images/s",
        "min-max",
        "CPU",
        "cores",
        "CPU",
        "ms/image",
        "vs",
        "none",
    ]
    rows = [
        re.fullmatch(r"(.+?) +([\d,]+) +([\d,]+)-([\d,]+) +([\d.]+) +([\d.]+) +([\d.]+)x", line)
        for line in lines[2:5]
    ]
    assert [row.group(1) for row in rows] == LABELS
    for row in rows:
        median, low, high = (float(row.group(n).replace(",", "")) for n in (2, 3, 4))
        assert 0 < low <= median <= high
    assert rows[0].group(7) == "1.00"
    assert re.fullmatch(
        r"Load average \(1, 5, 15 min\) before: [\d. ]+; after: [\d. ]+\.", lines[5]
    )


def test_format_rows_gives_ratios_to_no_service():
    figures = {
        "median": 400.0,
        "min": 380.0,
        "max": 1200.0,
        "cpu_cores": 0.5,
        "cpu_ms_per_image": 1.25,
    }
    results = {label: dict(figures) for label in LABELS}
    results["service, 2 workers"]["median"] = 800.0
    assert benchmark_service.format_rows(results)[1:] == [
        "no service (this process)          400       380-1,200       0.50         1.250    1.00x",
        "service, 1 worker                  400       380-1,200       0.50         1.250    1.00x",
        "service, 2 workers                 800       380-1,200       0.50         1.250    2.00x",
    ]


def test_main_rejects_zero_repeats_with_the_option_named(capsys):
    with pytest.raises(SystemExit):
        benchmark_service.main(["--repeats", "0"])
    assert "--repeats and --timed must be >= 1 (got 0, 4000)" in capsys.readouterr().err
