"""`sweep`: each candidate change to the course pipeline against it, in turns."""

from __future__ import annotations

from tools.building import machine
from tools.pipeline_profile.variants import build, ceiling, load_shards, time_with_cpu

NUM_SWEEP = 4000  # Images per run in the sweep: two candidates or four per change.

SWEEP = {
    "interleave block_length=16": {"block_length": 16},
    "interleave block_length=64": {"block_length": 64},
    "num_parallel_reads=2": {"cycle_length": 2},
    "num_parallel_reads=4": {"cycle_length": 4},
    "decode map: 1 call at a time": {"decode_calls": 1},
    "decode map: 2 calls at a time": {"decode_calls": 2},
    "decode map: 4 calls at a time": {"decode_calls": 4},
    "parse batch 32": {"parse_batch": 32},
    "parse batch 128": {"parse_batch": 128},
    "parse batch 256": {"parse_batch": 256},
    "TFRecordDataset buffer 1 MB": {"buffer_size": 1 << 20},
    "TFRecordDataset buffer 8 MB": {"buffer_size": 8 << 20},
    "private_threadpool_size=2": {"threads": 2},
    "private_threadpool_size=4": {"threads": 4},
    "max_intra_op_parallelism=1": {"intra_op": 1},
    "map_parallelization off": {"optimization": {"map_parallelization": False}},
    "inject_prefetch off": {"optimization": {"inject_prefetch": False}},
    "parallel_batch on": {"optimization": {"parallel_batch": True}},
    "dct_method=INTEGER_FAST": {"dct_method": "INTEGER_FAST"},
    "parse the image and label only": {"used_features_only": True},
    "16 records per read, rebatched": {"records_per_read": 16},
    "64 records per read, rebatched": {"records_per_read": 64},
}


def sweep(repeats: int, names: list[str] | None = None) -> dict:
    """Measures each SWEEP change against the course pipeline, in turns; returns ratios.

    Two ratios each, within each round: images/s (change / course pipeline) and work, the
    course pipeline's CPU time per image / the change's (above 1: less work per image).
    On a loaded machine the first is noisy; the second moves far less with the load.
    """
    import statistics

    from utils import comparison, machine_load

    paths, num_classes, jpegs = load_shards()
    course = lambda: build(paths, num_classes=num_classes)  # noqa: E731
    report = {"machine": machine.describe_machine(), "changes": {}}
    with machine_load.LoadWatch() as load:
        for name in names or list(SWEEP):
            change = SWEEP[name]
            print(f"{name}:", flush=True)
            makers = {
                "course pipeline": course,
                name: lambda c=change: build(paths, num_classes=num_classes, **c),
            }
            if "dct_method" in change:
                makers["ceiling"] = lambda: ceiling(jpegs)
                makers["ceiling, same dct_method"] = lambda c=change: ceiling(
                    jpegs, dct_method=c["dct_method"]
                )
            cpu = {label: [] for label in makers}
            candidates = {
                label: (lambda m=make, log=cpu[label]: time_with_cpu(m(), NUM_SWEEP, log))
                for label, make in makers.items()
            }
            measured = comparison.measure_in_turns(candidates, repeats=repeats)
            gain = comparison.ratio_in_turns(measured[name], measured["course pipeline"])
            work = [a / b for a, b in zip(cpu["course pipeline"], cpu[name], strict=True)]
            entry = {
                "ratio": gain.median,
                "min": gain.minimum,
                "max": gain.maximum,
                "runs": gain.num_runs,
                "work_ratio": statistics.median(work),
                "work_min": min(work),
                "work_max": max(work),
            }
            if "dct_method" in change:
                same = comparison.ratio_in_turns(
                    measured[name], measured["ceiling, same dct_method"]
                )
                entry["share_of_same_ceiling"] = same.median
                entry["ceiling_gain"] = comparison.ratio_in_turns(
                    measured["ceiling, same dct_method"], measured["ceiling"]
                ).median
            report["changes"][name] = entry
    report["load"] = load.summary()
    lines = [
        f"{'change':<32} {'/ course':>8} {'min-max':>11}  {'work':>5} {'min-max':>11}  verdict"
    ]
    for name, entry in report["changes"].items():
        verdict = describe_ratio(entry["min"], entry["max"])
        work = describe_ratio(entry["work_min"], entry["work_max"])
        lines.append(
            f"{name:<32} {entry['ratio']:>8.2f} {entry['min']:.2f}-{entry['max']:.2f}  "
            f"{entry['work_ratio']:>5.2f} {entry['work_min']:.2f}-{entry['work_max']:.2f}  "
            f"images/s: {verdict}; work: {work}"
        )
        if "share_of_same_ceiling" in entry:
            lines.append(
                f"{'':<32} its ceiling {entry['ceiling_gain']:.2f}x the usual one; "
                f"the change reaches {entry['share_of_same_ceiling']:.2f} of it"
            )
    report["lines"] = lines
    return report


def describe_ratio(low: float, high: float) -> str:
    """Says whether a ratio's range (to the course pipeline) is all above 1, all below, or not."""
    return "helps" if low > 1 else "hurts" if high < 1 else "within the spread"
