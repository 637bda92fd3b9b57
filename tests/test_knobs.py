"""Tests of lesson 8's knobs.py and knob_settings.py: one knob at a time."""

import inspect
import time

import pytest
import tensorflow as tf

from utils import comparison, pipeline, storage
from utils.lessons.where_the_time_goes import knob_settings, knobs


def _runs(label, *values):
    return comparison.RepeatedResult(label, tuple(values))


def _ablation():
    return knobs.Ablation(
        results={
            "num_parallel_reads": [_runs("1", 500, 520, 480), _runs("AUTOTUNE", 1000, 950, 990)],
            "prefetch": [_runs("true", 1000, 900, 1100), _runs("false", 1050, 1000, 980)],
        },
        most_open={"num_parallel_reads": {"1": 3, "AUTOTUNE": 3}},
        first_bytes_ms=[50.0, 60.0, 400.0],
    )


def test_measure_knobs_times_every_setting_in_turns_and_counts_the_opens(
    write_small_shards, capsys
):
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
        repeats=2,
    )
    labels = {
        knob: [result.label for result in results] for knob, results in ablation.results.items()
    }
    assert labels == {
        "num_parallel_reads": ["1", "AUTOTUNE"],
        "shards": ["1", "4"],
        "repeat": ["before the reads", "after the pipeline"],
        "deterministic": ["false", "true"],
        "prefetch": ["true", "false"],
        "cache": ["false", "true"],
    }
    assert {r.num_runs for results in ablation.results.values() for r in results} == {2}
    assert ablation.most_open["num_parallel_reads"]["1"] >= 1
    assert len(ablation.first_bytes_ms) >= 24  # At least one shard opened per run.
    assert capsys.readouterr().out.count("runs) images/s, taken in turns") == 12
    with pytest.raises(
        ValueError, match=r"`repeats` must be an integer of at least 2. Received: repeats=1"
    ):
        knobs.measure_knobs(
            paths,
            paths_by_count={},
            parallel_reads=[1],
            storage=simulated,
            target_size=32,
            num_classes=5,
            num_parallel_reads=4,
            batch_size=8,
            num_records=60,
            num_timed_images=16,
            repeats=1,
        )


def test_describe_verdicts_beyond_only_when_far_apart_and_the_ranges_separate():
    ablation = _ablation()
    assert knobs.describe_verdicts(ablation) == [
        "num_parallel_reads: AUTOTUNE is 1.98x 1 (medians 990 and 500 images/s; ranges "
        "950-1,000 and 480-520 over 3 rounds in turns): beyond the noise.",
        "prefetch: false and true differ by 1.00x (medians 1,000 and 1,000 images/s; ranges "
        "980-1,050 and 900-1,100 over 3 rounds in turns): not resolved in 3 rounds (the ranges "
        "overlap).",
    ]


def test_describe_open_shards_compares_autotune_with_one_reader():
    ablation = _ablation()
    line = knobs.describe_open_shards(ablation, num_cores=2)
    assert line.startswith(
        "Most shards open at once, by num_parallel_reads: 1: 3, AUTOTUNE: 3 (2 cores). "
    )
    assert line.endswith(
        "AUTOTUNE opened no more shards than num_parallel_reads=1 (3 and 3): one reader too "
        "opens the next shards before the current one ends."
    )
    ablation.most_open["num_parallel_reads"]["AUTOTUNE"] = 8
    assert knobs.describe_open_shards(ablation, num_cores=16).endswith(
        "AUTOTUNE opened 8, more than num_parallel_reads=1's 3."
    )


def test_describe_ranges_lists_every_setting_slowest_first():
    assert knobs.describe_ranges(_ablation().results) == [
        "num_parallel_reads: 1 500 (480-520); AUTOTUNE 990 (950-1,000) images/s",
        "prefetch: true 1,000 (900-1,100); false 1,000 (980-1,050) images/s",
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
    sample, num_records = knob_settings.cache_sample(paths, num_records=20000, target_size=192)
    # 512 MB holds 4,854 decoded 192 x 192 images: 3 shards of 1,250.
    assert (sample, num_records) == (paths[:3], 3750)
    assert knob_settings.cache_sample(paths[:2], num_records=2500, target_size=192) == (
        paths[:2],
        2500,
    )
    big = ["/s/flowers00-9000.tfrec", "/s/flowers01-9000.tfrec"]
    assert knob_settings.cache_sample(big, num_records=18000, target_size=192) == (big[:1], 9000)


def test_settings_by_knob_puts_the_course_setting_first_and_the_cache_on_its_sample():
    paths = [f"/s/flowers{i:02d}-1250.tfrec" for i in range(16)]  # 20,000 records.
    settings = knob_settings.settings_by_knob(
        paths,
        paths_by_count={1: paths[:1], 16: paths},
        parallel_reads=[1, tf.data.AUTOTUNE],
        num_records=20000,
        target_size=192,
    )
    assert {knob: list(rows) for knob, rows in settings.items()} == {
        "num_parallel_reads": ["1", "AUTOTUNE"],
        "shards": ["1", "16"],
        "repeat": ["before the reads", "after the pipeline"],
        "deterministic": ["false", "true"],
        "prefetch": ["true", "false"],
        "cache": ["false (3 of 16 shards)", "true (3 of 16 shards)"],
    }
    assert settings["num_parallel_reads"]["AUTOTUNE"] == {"num_parallel_reads": tf.data.AUTOTUNE}
    assert settings["cache"]["true (3 of 16 shards)"] == {
        "cache": True,
        "paths": paths[:3],
        "records_per_pass": 3750,
    }


class _StreamLog(storage.SimulatedStorage):
    """Simulated storage that keeps each stream's span: from its request to its last bytes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spans = {}

    def _open(self, num_bytes, *, transfer):
        requested = time.monotonic()
        stream = super()._open(num_bytes, transfer=transfer)
        self.spans[stream] = [requested, time.monotonic()]
        return stream

    def wait_for_bytes(self, stream, num_bytes):
        super().wait_for_bytes(stream, num_bytes)
        if stream in self.spans:
            self.spans[stream][1] = time.monotonic()

    def most_streams_at_once(self):
        events = sorted(
            [(start, 1) for start, _ in self.spans.values()]
            + [(end, -1) for _, end in self.spans.values()],
            key=lambda event: (event[0], event[1]),  # An end before a start at the same time.
        )
        open_now = most = 0
        for _, change in events:
            open_now += change
            most = max(most, open_now)
        return most


def _read(dataset, num_batches):
    for _ in dataset.take(num_batches):
        pass


def test_one_shard_is_read_as_one_stream_whatever_the_parallel_reads(write_small_shards):
    # Issue 37, item 4: the "shards: 1" row read one file 16 times at once (the names were
    # repeated before 16 parallel reads), each open a stream with its own bandwidth.
    (one_shard,) = write_small_shards(1)  # 60 records.
    settings = {"target_size": 32, "num_classes": 5, "num_parallel_reads": 4, "batch_size": 8}
    logged = _StreamLog(latency_ms=20, megabytes_per_second=1)
    _read(knobs.shard_count_dataset([one_shard], storage=logged, **settings), 25)  # 3+ passes.
    assert logged.num_requests >= 3  # One open per pass,
    assert logged.max_in_flight == 1  # never two at once,
    assert logged.most_streams_at_once() == 1  # and each pass's stream ends before the next.

    # What the row measured before: the course pipeline, names repeated before the reads.
    joined = _StreamLog(latency_ms=20, megabytes_per_second=1)
    _read(pipeline.tfrecord_images([one_shard], storage=joined, epochs=None, **settings), 25)
    assert joined.max_in_flight > 1 and joined.most_streams_at_once() > 1


def test_describe_open_shards_says_autotune_is_sized_from_the_cores():
    line = knobs.describe_open_shards(_ablation(), num_cores=2)
    assert "tf.data reads ceil(cores / 3) = 1 shard(s) at once on 2 cores" in line
    assert "opens up to 2 more ahead" in line
    assert "= 32 shard(s) at once on 96 cores" in knobs.describe_open_shards(
        _ablation(), num_cores=96
    )


def test_prefetch_false_row_turns_off_tf_datas_own_prefetch_too():
    # Issue 60, item 3: "prefetch: false" measures a pipeline with no prefetch at all;
    # by default tf.data adds one at the end of a pipeline that has none.
    assert knobs.WITHOUT_INJECTED_PREFETCH.experimental_optimization.inject_prefetch is False
    source = inspect.getsource(knobs.measure_knobs)
    assert 'if settings.get("prefetch") is False:' in source
    assert "variant.with_options(WITHOUT_INJECTED_PREFETCH)" in source
