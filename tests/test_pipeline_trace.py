"""Tests of lesson 8's pipeline_trace.py: the measured timeline of a pipeline, and its chart."""

import functools

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import pytest

from utils import pipeline, storage
from utils.lessons.where_the_time_goes import pipeline_trace


@pytest.fixture(scope="module")
def shard_paths(write_small_shards):
    return write_small_shards(6)


def _trace(paths, *, parallel, num_batches=6):
    simulated = storage.SimulatedStorage(latency_ms=20)
    reads = 6 if parallel else None
    records = simulated.tfrecord_dataset(paths, num_parallel_reads=reads)
    parse = functools.partial(pipeline.parse_batch, target_size=32, num_classes=5)
    return pipeline_trace.trace_pipeline(
        records,
        parse,
        batch_size=8,
        num_batches=num_batches,
        step_ms=40,
        parallel=parallel,
        label="fast" if parallel else "slow",
    )


def test_trace_pipeline_stages_come_in_order_for_every_batch(shard_paths):
    traced = _trace(shard_paths, parallel=False)
    assert len(traced.read) == len(traced.decode) == len(traced.consume) == 6
    for (read_start, read_end), (decode_start, decode_end), (step_start, step_end) in zip(
        traced.read, traced.decode, traced.consume, strict=True
    ):
        assert read_start <= read_end <= decode_start <= decode_end <= step_start
        assert step_end - step_start >= 0.039
    # Without prefetch, a batch is decoded only once the step before it has ended.
    for (_, previous_step_end), (decode_start, _) in zip(
        traced.consume[:-1], traced.decode[1:], strict=True
    ):
        assert decode_start >= previous_step_end


def test_trace_pipeline_parallel_prepares_batches_during_the_step(shard_paths):
    traced = _trace(shard_paths, parallel=True)
    overlapped = [
        decode_end < step_end
        for (_, step_end), (_, decode_end) in zip(
            traced.consume[:-1], traced.decode[1:], strict=True
        )
    ]
    assert sum(overlapped) >= 3  # Prefetch: the next batch is ready before the step ends.


def test_trace_pipeline_too_few_records_names_the_count(shard_paths):
    with pytest.raises(ValueError, match=r"The records ran out after 8 batches; asked for 50\."):
        _trace(shard_paths, parallel=False, num_batches=50)


def test_trace_pipeline_bad_counts():
    with pytest.raises(ValueError, match=r"`num_batches` must be a positive integer"):
        pipeline_trace.trace_pipeline(
            None, None, batch_size=8, num_batches=0, step_ms=1, parallel=True, label=""
        )


def test_plot_timelines_two_panels_fit_the_notebook_width(tmp_path):
    matplotlib.use("Agg")  # No screen here.
    spans = [(0.1 * i, 0.1 * i + 0.05) for i in range(12)]
    slow = pipeline_trace.Timeline("slow", spans, spans, spans)
    figure = pipeline_trace.plot_timelines([slow, slow])
    assert [axis.get_title() for axis in figure.axes] == ["slow: 1.15 s", "slow: 1.15 s"]
    figure.savefig(tmp_path / "figure.png", bbox_inches="tight", dpi=100)  # As a notebook saves.
    assert matplotlib.image.imread(tmp_path / "figure.png").shape[1] <= 1000
    plt.close("all")


def test_plot_timelines_without_timelines_says_so():
    with pytest.raises(
        ValueError, match=r"`timelines` must hold at least one Timeline\. Received: \[\]"
    ):
        pipeline_trace.plot_timelines([])
