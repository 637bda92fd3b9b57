"""Tests of utils/knobs.py: lab 3's one-knob-at-a-time measurements, on 60 tiny images."""

import pytest
import tensorflow as tf

from utils import knobs, storage, timing


def _result(label, rate):
    return timing.ThroughputResult(label, 100, 100 / rate, rate, None, 0.0)


def _ablation():
    return knobs.Ablation(
        results={
            knobs.REPEATS: [_result("run 1", 1000), _result("run 2", 1100), _result("run 3", 1050)],
            "num_parallel_reads": [_result("1", 500), _result("AUTOTUNE", 1000)],
            "prefetch": [_result("true", 1000), _result("false", 1050)],
        },
        most_open={"AUTOTUNE": 3},
        first_bytes_ms=[50.0, 60.0, 400.0],
    )


def test_measure_knobs_times_every_setting_and_counts_the_opens(write_small_shards, capsys):
    paths = write_small_shards(4)
    simulated = storage.SimulatedStorage(latency_ms=1)
    ablation = knobs.measure_knobs(
        paths,
        paths_by_count={1: write_small_shards(1), 4: paths},
        parallel_reads=[1, tf.data.AUTOTUNE],
        storage=simulated,
        target_size=32,
        num_classes=5,
        num_parallel_reads=4,
        batch_size=8,
        num_records=60,
        num_timed_images=16,
    )
    labels = {
        knob: [result.label for result in results] for knob, results in ablation.results.items()
    }
    assert labels == {
        knobs.REPEATS: ["run 1", "run 2", "run 3"],
        "num_parallel_reads": ["1", "AUTOTUNE"],
        "shards": ["1", "4"],
        "deterministic": ["false", "true"],
        "prefetch": ["true", "false"],
        "cache": ["false", "true"],
    }
    assert ablation.most_open["1"] == 1
    assert len(ablation.first_bytes_ms) >= 13  # At least one shard opened per run.
    assert capsys.readouterr().out.count("    most shards open at once: ") == 13


def test_describe_verdicts_judges_each_knob_against_the_spread():
    assert knobs.describe_verdicts(_ablation(), num_cores=2) == [
        "The same pipeline, three times: 1,000 to 1,100 images/s, a spread of 10%: "
        "differences smaller than that are noise.",
        "With AUTOTUNE, at most 3 shards were open at once on this machine's 2 cores.",
        "num_parallel_reads: best setting 100% above the worst, beyond the noise.",
        "prefetch: best setting 5% above the worst, within the noise.",
    ]


def test_describe_ranges_goes_from_the_slowest_setting_to_the_fastest():
    assert knobs.describe_ranges(_ablation().results)[1:] == [
        "num_parallel_reads: from 500 images/s (1) to 1,000 images/s (AUTOTUNE)",
        "prefetch: from 1,000 images/s (true) to 1,050 images/s (false)",
    ]


def test_describe_storage_demand_counts_the_streams_needed():
    lines = knobs.describe_storage_demand(
        [50.0, 60.0, 400.0],
        images_per_second=2000,
        bytes_per_record=15_000,
        stream_megabytes_per_second=85,
    )
    assert lines == [
        "3 shard opens; first byte after 60 ms (median), 400 ms (slowest).",
        "The fast pipeline reads 30.0 MB/s (15.0 kB per image).",
        "One stream gives 85 MB/s: this pipeline needs 1 stream(s) at once.",
        "A host that decodes 20,000 of these images/s needs 300 MB/s: 4 streams at once.",
    ]
    no_cap = knobs.describe_storage_demand(
        [50.0], images_per_second=2000, bytes_per_record=15_000, stream_megabytes_per_second=None
    )
    assert len(no_cap) == 2
    with pytest.raises(ValueError, match=r"at least one wait. Received: \[\]"):
        knobs.describe_storage_demand(
            [], images_per_second=1, bytes_per_record=1, stream_megabytes_per_second=None
        )


def test_cache_sample_bounds_the_decoded_bytes_the_cache_rows_hold():
    paths = [f"/s/flowers{i:02d}-1250.tfrec" for i in range(16)]  # 20,000 records.
    sample, num_records = knobs.cache_sample(paths, num_records=20000, target_size=192)
    # 512 MB holds 4,854 decoded 192 x 192 images: 3 shards of 1,250.
    assert (sample, num_records) == (paths[:3], 3750)
    assert knobs.cache_sample(paths[:2], num_records=2500, target_size=192) == (paths[:2], 2500)
    big = ["/s/flowers00-9000.tfrec", "/s/flowers01-9000.tfrec"]
    assert knobs.cache_sample(big, num_records=18000, target_size=192) == (big[:1], 9000)
