"""Tests of utils/timing.py."""

import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tools.building import machine
from utils import comparison, machine_load, storage, timing


def _slow_first_element(seconds):
    def maybe_sleep(index):
        if index == 0:
            time.sleep(seconds)
        return np.zeros((4, 4, 3), np.uint8)

    return tf.data.Dataset.range(50).map(
        lambda i: tf.numpy_function(maybe_sleep, [i], tf.uint8, stateful=True)
    )


def test_measure_throughput_excludes_warmup(capsys):
    result = timing.measure_throughput(_slow_first_element(0.5), num_images=20, label="x")
    assert result.warmup_seconds >= 0.5
    assert result.seconds < 0.5
    assert result.num_images == 20
    assert result.images_per_second == pytest.approx(20 / result.seconds)
    assert result.megabytes_per_second is None
    assert capsys.readouterr().out.startswith("x: Throughput: ")


def test_measure_throughput_counts_images_in_batches():
    images = tf.data.Dataset.from_tensors(tf.zeros((8, 8, 3), tf.uint8)).repeat(100)
    result = timing.measure_throughput(images.batch(10), num_images=35)
    assert result.num_images == 40  # Four whole batches of 10 reach 35.


def test_measure_throughput_counts_encoded_image_batches():
    strings = tf.data.Dataset.from_tensors(tf.constant("jpeg")).repeat(30).batch(5)
    assert timing.measure_throughput(strings, num_images=10).num_images == 10


def test_measure_throughput_stops_when_the_dataset_ends():
    images = tf.data.Dataset.from_tensors(tf.zeros((8, 8, 3))).repeat(6)
    result = timing.measure_throughput(images, num_images=100)
    assert result.num_images == 5  # One went to the warm-up.


def test_measure_throughput_reports_megabytes_from_storage(small_flowers):
    simulated = storage.SimulatedStorage(latency_ms=0)
    paths = sorted(str(p) for p in small_flowers.glob("*/*.jpg"))
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False  # Read nothing ahead.
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(simulated.read_file)
    result = timing.measure_throughput(
        dataset.with_options(options), num_images=20, storage=simulated
    )
    expected = (simulated.num_bytes_read - len(open(paths[0], "rb").read())) / 1e6
    assert result.megabytes_per_second == pytest.approx(expected / result.seconds)


def test_summary_line_format():
    result = timing.ThroughputResult("seq", 20, 2.0, 10.0, 0.5, 1.25)
    expected = "seq: Throughput: 10.0 images/s, 0.5 MB/s (20 images; warm-up 1.2 s excluded)"
    assert result.summary() == expected


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_images": 0}, r"`num_images` must be a positive integer"),
        ({"num_images": 5, "num_warmup_elements": -1}, r"`num_warmup_elements` must be"),
        ({"num_images": 5, "num_warmup_elements": 10}, r"ended after 3 elements, during the"),
    ],
    ids=["no images", "negative warm-up", "dataset shorter than warm-up"],
)
def test_measure_throughput_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        timing.measure_throughput(tf.data.Dataset.range(3), **kwargs)


def test_measure_throughput_not_a_dataset():
    with pytest.raises(ValueError, match=r"`dataset` must be a tf.data.Dataset"):
        timing.measure_throughput([1, 2, 3], num_images=2)


def test_measure_throughput_nothing_after_warmup():
    with pytest.raises(ValueError, match=r"ended right after the warm-up"):
        timing.measure_throughput(tf.data.Dataset.range(1), num_images=2)


def _fake_rates(rates_by_label, calls):
    """Candidates for `measure_in_turns` that return the next given rate and log the call."""

    def candidate(label):
        rates = iter(rates_by_label[label])

        def measure():
            calls.append(label)
            return next(rates)

        return measure

    return {label: candidate(label) for label in rates_by_label}


def test_measure_in_turns_alternates_the_order_and_keeps_every_run(capsys):
    calls = []
    rates = {"ceiling": [100, 90, 110, 100, 95], "pipeline": [80, 99, 70, 90, 85]}
    results = comparison.measure_in_turns(_fake_rates(rates, calls), repeats=5)
    assert calls == ["ceiling", "pipeline", "pipeline", "ceiling"] * 2 + ["ceiling", "pipeline"]
    assert results["pipeline"].values == (80, 99, 70, 90, 85)
    assert (results["pipeline"].median, results["pipeline"].minimum) == (85, 70)
    assert (results["pipeline"].maximum, results["pipeline"].num_runs) == (99, 5)
    assert capsys.readouterr().out.splitlines() == [
        "ceiling: 100 (90-110, 5 runs) images/s, taken in turns",
        "pipeline: 85 (70-99, 5 runs) images/s, taken in turns",
    ]


def test_spread_is_the_median_and_range_the_tools_and_summaries_print():
    assert comparison.spread([1200.0, 950.4, 3100.0]) == "1,200 (950-3,100)"
    assert comparison.spread((0.5, 0.25), ".2f") == "0.38 (0.25-0.50)"
    assert comparison.spread([7], ".0f", note="1 runs") == "7 (7-7, 1 runs)"


def test_ratio_in_turns_divides_round_by_round():
    pipeline_runs = comparison.RepeatedResult("pipeline", (80, 99, 70))
    ceiling_runs = comparison.RepeatedResult("ceiling", (100, 90, 100))
    share = comparison.ratio_in_turns(pipeline_runs, ceiling_runs)
    assert share.label == "pipeline / ceiling"
    assert share.values == pytest.approx((0.8, 1.1, 0.7))
    assert share.summary(".2f") == "pipeline / ceiling: 0.80 (0.70-1.10, 3 runs)"
    with pytest.raises(ValueError, match=r"same number of runs. Received: 2 \(a\) and 3"):
        comparison.ratio_in_turns(comparison.RepeatedResult("a", (1, 2)), ceiling_runs)


def test_measure_in_turns_times_datasets_quietly(capsys):
    images = tf.data.Dataset.from_tensors(tf.zeros((8, 8, 3), tf.uint8)).repeat().batch(4)
    results = comparison.measure_in_turns({"zeros": images}, num_images=8, repeats=2)
    assert results["zeros"].num_runs == 2 and results["zeros"].minimum > 0
    assert capsys.readouterr().out.count("\n") == 1  # One summary line, no per-run lines.
    with pytest.raises(
        ValueError, match=r"`repeats` must be a positive integer. Received: repeats=0"
    ):
        comparison.measure_in_turns({"zeros": images}, num_images=8, repeats=0)
    with pytest.raises(ValueError, match=r"`num_images` is needed to time the dataset 'zeros'"):
        comparison.measure_in_turns({"zeros": images}, repeats=1)


@pytest.mark.parametrize(
    "values, expected",
    [
        (
            (0.9, 0.95, 0.93),
            "The pipeline reaches 93% of the decode ceiling (median; 90%-95% over 3 runs in "
            "turns).",
        ),
        (
            (0.9, 1.04, 0.97),
            "The pipeline reaches 97% of the decode ceiling (median; 90%-104% over 3 runs in "
            "turns). Runs above 100% are noise: a pipeline that reads, parses and decodes "
            "the same JPEGs cannot outrun decoding them alone, so the two sides met "
            "different loads (other work on the machine, or runs too short to average it out).",
        ),
        (
            (1.1, 1.3, 1.2),
            "The pipeline measured 120% of the decode ceiling (110%-130% over 3 runs in "
            "turns): noise, not a result: a pipeline that reads, parses and decodes the same "
            "JPEGs cannot outrun decoding them alone, so the two sides met different loads "
            "(other work on the machine, or runs too short to average it out). Measure "
            "again on an idle machine.",
        ),
    ],
    ids=["below", "range above 100%", "median above 100%"],
)
def test_describe_share_of_ceiling_calls_above_100_percent_noise(values, expected):
    share = comparison.RepeatedResult("share", values)
    assert comparison.describe_share_of_ceiling(share) == expected


def test_describe_load_says_when_the_machine_was_not_idle():
    busy = machine_load.describe_load(load_before=1.2, load_after=2.9, other_cores=0.9, num_cores=2)
    assert busy == (
        "The machine was NOT idle: other processes kept 0.90 of 2 cores busy on average "
        "(load average 1.20 before, 2.90 after); these are not idle-machine figures."
    )
    idle = machine_load.describe_load(
        load_before=0.1, load_after=1.8, other_cores=0.05, num_cores=2
    )
    assert idle == (
        "The machine was idle: other processes kept 0.05 of 2 cores busy on average "
        "(load average 0.10 before, 1.80 after, which counts this run too)."
    )
    unknown = machine_load.describe_load(
        load_before=0.5, load_after=0.5, other_cores=None, num_cores=2
    )
    assert unknown.startswith("The machine was NOT idle: the load average before was 0.50")


def test_load_watch_counts_a_running_child_process_as_its_own_work():
    # A pipeline's own worker processes (Grain's mp_prefetch, a tf.data service's workers)
    # run while they are measured: their CPU is this run's, not another program's.
    busy_loop = (
        "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass"
    )
    with machine_load.LoadWatch() as load:
        child = subprocess.Popen([sys.executable, "-c", busy_loop])
        time.sleep(1.0)  # Measured while the child still runs; waited for only after.
    child.wait()
    # This process only sleeps: what it counts as its own is the child's. A core at most;
    # at least a third of one even while other tests keep both cores busy (pytest -n 2).
    assert 0.33 < load.own_cores <= 1.1, load.summary()


def test_load_watch_sees_other_processes_and_not_its_own_work():
    with machine_load.LoadWatch() as load:
        sum(range(3_000_000))  # This process's own work does not count as other load.
    assert load.other_cores is not None and load.other_cores >= 0
    assert load.summary().startswith("The machine was ")
    assert machine.describe_machine() == (
        f"{machine_load.describe_cpu()}, Python {platform.python_version()}"
    )


def test_describe_cpu_names_a_model_and_the_cores_this_process_may_use():
    description = machine_load.describe_cpu()
    assert re.fullmatch(r".+, \d+ cores", description)
    assert description.endswith(f", {len(os.sched_getaffinity(0))} cores")


def test_load_watch_counts_a_busy_process_beside_it_as_other_load():
    # Another program: started through a shell that exits, so that it is not this
    # process's child (a child is this run's own work: the test below).
    loop = f"{shlex.quote(sys.executable)} -c 'while True: pass' >/dev/null 2>&1 & echo $!"
    busy_pid = int(subprocess.run(loop, shell=True, capture_output=True, text=True).stdout)
    try:
        time.sleep(0.3)  # Let it start.
        with machine_load.LoadWatch() as load:
            time.sleep(1.0)
    finally:
        os.kill(busy_pid, signal.SIGKILL)
    assert load.other_cores >= 0.5  # The loop alone keeps most of a core busy.
    on_two_cores = machine_load.describe_load(
        load_before=load.load_before,
        load_after=load.load_after,
        other_cores=load.other_cores,
        num_cores=2,
    )
    assert on_two_cores.startswith("The machine was NOT idle: other processes kept ")


def test_throughput_timer_times_quietly_each_call(capsys):
    timer = timing.throughput_timer(tf.data.Dataset.range(100).repeat(), num_images=10)
    assert timer() > 0 and timer() > 0
    assert capsys.readouterr().out == ""
