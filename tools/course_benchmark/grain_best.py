"""Grain at its best: worker processes and a JPEG decoder, chosen here by measuring them in turns.

Grain's users run CPU-heavy work (decoding) in worker processes
(`IterDataset.mp_prefetch`), past Python's GIL; the threads-only row shows Grain without
them. Each worker count (1, 2, 4, ... up to the cores this process may use) with each
decoder of the settings' `grain_decoders` is measured at 0 ms (nothing to wait for: the
work per image decides), `repeats` rounds in turns; the fastest median is the setting of
the headline row `GRAIN_BEST`, at every latency. Each worker has Grain's read options of
the threads-only row (`grain_loader.NUM_THREADS` threads, `PREFETCH_BUFFER_SIZE` ahead).
"""

from __future__ import annotations

from tools.course_benchmark.measure import figures_of, quietly, rate
from tools.course_benchmark.report import in_turns, ratio_text
from tools.course_benchmark.settings import (
    BATCH_SIZE,
    COURSE,
    GRAIN,
    GRAIN_BEST,
    Row,
    counts_up_to,
)
from utils import machine_load


def describe(num_workers: int, decoder: str) -> str:
    """One setting in words: `2 workers, pillow`."""
    return f"{num_workers} worker{'s' if num_workers > 1 else ''}, {decoder}"


def choose(array_records: list[str], num_classes: int, settings: dict) -> dict:
    """Measures Grain with each worker count and decoder, in turns; returns them and the fastest.

    Args:
        array_records: the ArrayRecord files (`grain_loader.ensure_array_records`).
        num_classes: the one-hot label's length.
        settings: the benchmark's settings (`timed`, `repeats`, `grain_decoders`).

    Returns:
        `{"chosen": {"num_workers", "decoder", "label"}, "candidates": {label: figures}}`,
        each candidate's figures with its `num_workers` and `decoder`, in the order measured.
    """
    from tools.course_benchmark import grain_loader
    from utils import comparison, storage

    local = storage.SimulatedStorage(latency_ms=0)
    settings_by_label = {
        describe(workers, decoder): {"num_workers": workers, "decoder": decoder}
        for decoder in settings["grain_decoders"]
        for workers in counts_up_to(machine_load.usable_cores())
    }

    def grain(num_workers: int, decoder: str):
        return grain_loader.grain_images(
            array_records,
            num_classes=num_classes,
            batch_size=BATCH_SIZE,
            storage=local,
            num_workers=num_workers,
            decoder=decoder,
        )

    rates = {
        label: rate(lambda s=setting: grain(**s), settings["timed"])
        for label, setting in settings_by_label.items()
    }
    print(
        f"  {GRAIN_BEST}: {len(rates)} settings in turns, {settings['repeats']} rounds ...",
        flush=True,
    )
    measured = quietly(comparison.measure_in_turns, rates, repeats=settings["repeats"])
    best = max(measured, key=lambda label: measured[label].median)
    return {
        "chosen": {**settings_by_label[best], "label": best},
        "candidates": {
            label: {**settings_by_label[label], **figures_of(result)}
            for label, result in measured.items()
        },
    }


def grain_best_lines(results: dict, choice: dict) -> list[str]:
    """Says which setting won and how Grain at its best stands, ratios within each round.

    Args:
        results: the pipeline results (`GRAIN_BEST`, `GRAIN` and `COURSE` at each latency).
        choice: `choose`'s result.

    Returns:
        The candidates' medians and the winner; then, at each latency, Grain at its best
        over the course pipeline and over Grain in threads, and its CPU per image.
    """
    from utils.comparison import spread

    candidates = choice["candidates"]
    lines = [
        f"{GRAIN_BEST}: {choice['chosen']['label']} (Grain's processes, each with its reading "
        f"threads), the fastest at 0 ms of "
        + "; ".join(
            f"{label} {figures['median']:,.0f} ({figures['min']:,.0f}-{figures['max']:,.0f})"
            for label, figures in candidates.items()
        )
        + f" images/s, {len(next(iter(candidates.values()))['runs'])} rounds in turns"
    ]
    for latency in sorted({row.latency_ms for row in results if row.pipeline == GRAIN_BEST}):
        best, course, threads = Row(GRAIN_BEST, latency), Row(COURSE, latency), Row(GRAIN, latency)
        lines.append(
            f"{GRAIN_BEST} at {latency} ms / {COURSE}: "
            f"{ratio_text(in_turns(results, best, course))}; / {GRAIN} (threads): "
            f"{ratio_text(in_turns(results, best, threads))}"
        )
        cpu = spread(results[best]["cpu_us_per_image"])
        lines.append(f"  CPU time per image at {latency} ms, microseconds, with its workers: {cpu}")
    return lines
