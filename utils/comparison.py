"""Measurements repeated in rounds, taken in turns: medians, ranges, ratios and verdicts."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import statistics
from collections.abc import Callable, Iterable

import tensorflow as tf

from utils import arguments, machine_load, timing


def spread(values: Iterable[float], number_format: str = ",.0f", *, note: str = "") -> str:
    """Returns runs' median and range in one phrase: `median (min-max)`.

    Args:
        values: one number per run.
        number_format: a format spec for the numbers, such as ",.0f" or ".2f".
        note: put inside the parentheses after the range, as in `median (min-max, note)`.

    Returns:
        The median, then the smallest and largest run in parentheses.
    """
    values = list(values)
    low, high = f"{min(values):{number_format}}", f"{max(values):{number_format}}"
    inside = f"{low}-{high}, {note}" if note else f"{low}-{high}"
    return f"{statistics.median(values):{number_format}} ({inside})"


@dataclasses.dataclass(frozen=True)
class RepeatedResult:
    """One quantity measured several times: its runs, median and range.

    Attributes:
        label: what was measured.
        values: one value per run, in the order the runs were taken.
        others_busy_cores: cores that other processes kept busy, on average, while the
            runs were taken (`machine_load.LoadWatch`); None when not watched.
        num_cores: the machine's cores, with `others_busy_cores`.
    """

    label: str
    values: tuple[float, ...]
    others_busy_cores: float | None = None
    num_cores: int | None = None

    @property
    def median(self) -> float:
        """The median of the runs."""
        return statistics.median(self.values)

    @property
    def minimum(self) -> float:
        """The smallest run."""
        return min(self.values)

    @property
    def maximum(self) -> float:
        """The largest run."""
        return max(self.values)

    @property
    def num_runs(self) -> int:
        """How many runs were taken."""
        return len(self.values)

    def summary(self, number_format: str = ",.0f") -> str:
        """Returns the median, range and run count in one line.

        Args:
            number_format: a format spec for the numbers, such as ",.0f" or ".0%".

        Returns:
            `label: median (min-max, N runs)`.
        """
        return f"{self.label}: {spread(self.values, number_format, note=f'{self.num_runs} runs')}"


def measure_in_turns(
    candidates: dict, *, num_images: int | None = None, repeats: int = 5
) -> dict[str, RepeatedResult]:
    """Measures several pipelines in turns, `repeats` rounds, and prints each one's spread.

    Round 1 takes the candidates in the given order, round 2 in reverse, and so on, so
    that a busy moment or a slow drift of a shared machine falls on every side alike.
    Compare them with `ratio_in_turns`, which divides within each round. The cores that
    other processes kept busy meanwhile go with every result: `verdict` judges nothing
    where they took a share of the machine.

    Args:
        candidates: label -> a `tf.data.Dataset` (timed with `measure_throughput`, its
            line not printed) or a function of no arguments that returns images/s.
        num_images: images to time per run of a dataset.
        repeats: rounds (at least 1; 5 or more for a figure that is quoted).

    Returns:
        label -> `RepeatedResult` of images/s, its values in round order, with the cores
        other processes kept busy during the rounds.

    Raises:
        ValueError: if `repeats` is not a positive integer, `candidates` is empty, or a
            dataset is given without `num_images`.

    Example:
        runs = comparison.measure_in_turns({"ceiling": ceiling, "pipeline": fast},
                                       num_images=4000, repeats=5)
    """
    arguments.check_integer("repeats", repeats, 1)
    if not candidates:
        raise ValueError("`candidates` must name at least one pipeline. Received: {}")
    labels = list(candidates)
    values = {label: [] for label in labels}
    with machine_load.LoadWatch() as load:
        for round_index in range(repeats):
            for label in labels if round_index % 2 == 0 else labels[::-1]:
                values[label].append(_images_per_second(candidates[label], label, num_images))
    results = {
        label: RepeatedResult(label, tuple(values[label]), load.other_cores, load.num_cores)
        for label in labels
    }
    for result in results.values():
        print(result.summary() + " images/s, taken in turns")
    return results


def _images_per_second(
    candidate: tf.data.Dataset | Callable[[], float], label: str, num_images: int | None
) -> float:
    if not isinstance(candidate, tf.data.Dataset):
        return float(candidate())
    if num_images is None:
        raise ValueError(f"`num_images` is needed to time the dataset {label!r}.")
    with contextlib.redirect_stdout(io.StringIO()):
        return timing.measure_throughput(
            candidate, num_images=num_images, label=label
        ).images_per_second


def ratio_in_turns(
    numerator: RepeatedResult, denominator: RepeatedResult, *, label: str = ""
) -> RepeatedResult:
    """Divides two results of `measure_in_turns` round by round: the ratio's own spread.

    Args:
        numerator: the runs divided.
        denominator: the runs divided by, taken in the same rounds.
        label: the result's label; by default "numerator / denominator".

    Returns:
        A `RepeatedResult` of the ratios, one per round.

    Raises:
        ValueError: if the two results have different numbers of runs.

    Example:
        share = comparison.ratio_in_turns(runs["pipeline"], runs["ceiling"])
    """
    if numerator.num_runs != denominator.num_runs:
        raise ValueError(
            f"Both results need the same number of runs. Received: {numerator.num_runs} "
            f"({numerator.label}) and {denominator.num_runs} ({denominator.label})."
        )
    ratios = tuple(a / b for a, b in zip(numerator.values, denominator.values, strict=True))
    label = label or f"{numerator.label} / {denominator.label}"
    return RepeatedResult(label, ratios, *_busiest(numerator, denominator))


# The course's one rule (`verdict`): a difference is "beyond the noise" when every round
# of one side beat every round of the other (the ranges do not overlap) AND the medians
# differ by at least this share (10%); "small but consistent" when the ranges are apart
# but the medians closer; "not resolved in N rounds" when the ranges overlap, however far
# apart the medians. Two settings that do not differ at all get separate ranges by chance
# with probability 2 (N!)^2 / (2N)! over N rounds each: 10% at 3 rounds, 0.8% at 5.
MIN_EFFECT = 0.10
BEYOND_NOISE = "beyond the noise"
SMALL_BUT_CONSISTENT = "small but consistent"


def _busiest(*results: RepeatedResult) -> tuple[float | None, int | None]:
    """The most cores other processes kept busy during any of `results`, and the cores."""
    watched = [r for r in results if r.others_busy_cores is not None]
    if not watched:
        return None, None
    busiest = max(watched, key=lambda result: result.others_busy_cores)
    return busiest.others_busy_cores, busiest.num_cores


def _judge(
    candidate: RepeatedResult, baseline: RepeatedResult, min_effect: float
) -> tuple[str, int, str]:
    """Returns (kind, sign, words): kind "busy", "overlap", "beyond" or "small"; sign +1
    where the candidate is faster, -1 where slower, 0 when not judged; words for the first
    two kinds."""
    busy, num_cores = _busiest(candidate, baseline)
    if busy is not None and busy > machine_load.NOT_IDLE_SHARE * num_cores:
        words = f"not judged: other processes kept {busy:.2f} of {num_cores} cores busy"
        return "busy", 0, f"{words} during these rounds"
    if not (candidate.minimum > baseline.maximum or baseline.minimum > candidate.maximum):
        rounds = min(candidate.num_runs, baseline.num_runs)
        return "overlap", 0, f"not resolved in {rounds} rounds (the ranges overlap)"
    ratio = candidate.median / baseline.median
    kind = "beyond" if max(ratio, 1 / ratio) >= 1 + min_effect else "small"
    return kind, (1 if ratio > 1 else -1), ""


def verdict(
    candidate: RepeatedResult,
    baseline: RepeatedResult,
    *,
    min_effect: float = MIN_EFFECT,
    faster: str = "faster",
    slower: str = "slower",
) -> str:
    """Judges two rates measured in turns (higher is faster) by the course's one rule.

    Args:
        candidate: the runs of the setting judged.
        baseline: the runs it is compared with, taken in the same rounds.
        min_effect: the smallest difference between medians that is an effect (10%).
        faster: the words for "the candidate is faster".
        slower: the words for "the candidate is slower".

    Returns:
        `beyond the noise: <faster or slower>` (ranges apart, medians at least
        `min_effect` apart); `small but consistent (under 10%): <faster or slower>`
        (ranges apart, medians closer); `not resolved in N rounds (the ranges overlap)`;
        or, where other processes kept more than a tenth of the cores busy during the
        rounds (`machine_load.NOT_IDLE_SHARE`), `not judged: ...` with their share.

    Example:
        print(comparison.verdict(runs["prefetch"], runs["none"], faster="prefetch pays"))
    """
    kind, sign, words = _judge(candidate, baseline, min_effect)
    if not sign:
        return words
    direction = faster if sign > 0 else slower
    if kind == "beyond":
        return f"{BEYOND_NOISE}: {direction}"
    return f"{SMALL_BUT_CONSISTENT} (under {min_effect:.0%}): {direction}"


def describe_difference(
    results: dict[str, RepeatedResult] | list[RepeatedResult],
    *,
    name: str,
    unit: str = "images/s",
    number_format: str = ",.0f",
) -> str:
    """Compares the fastest and slowest of several settings measured in turns, in one line.

    The verdict is `verdict`'s rule: beyond the noise, small but consistent, not resolved
    in N rounds, or not judged where other processes took a share of the cores.

    Args:
        results: label -> `RepeatedResult` (or a list of them), from `measure_in_turns`.
        name: what was varied, named at the start of the line.
        unit: the unit of the values.
        number_format: a format spec for the values.

    Returns:
        `name: <fastest> is <ratio>x <slowest> (medians ...; ranges ...): beyond the
        noise.` (or `small but consistent ...`), or `name: <fastest> and <slowest> differ
        by <ratio>x (...): not resolved in N rounds (the ranges overlap).` (or `not
        judged: ...`).

    Raises:
        ValueError: if fewer than two results are given.

    Example:
        print(comparison.describe_difference(runs, name="prefetch"))
    """
    values = list(results.values()) if isinstance(results, dict) else list(results)
    if len(values) < 2:
        raise ValueError(f"`results` must hold at least two settings. Received: {len(values)}")
    slowest, *_, fastest = sorted(values, key=lambda result: result.median)

    def span(result):
        return f"{result.minimum:{number_format}}-{result.maximum:{number_format}}"

    ratio = fastest.median / slowest.median
    numbers = (
        f"medians {fastest.median:{number_format}} and {slowest.median:{number_format}} {unit}; "
        f"ranges {span(fastest)} and {span(slowest)} over {fastest.num_runs} rounds in turns"
    )
    kind, sign, words = _judge(fastest, slowest, MIN_EFFECT)
    if not sign:
        pair = f"{fastest.label} and {slowest.label}"
        return f"{name}: {pair} differ by {ratio:.2f}x ({numbers}): {words}."
    said = BEYOND_NOISE
    if kind == "small":
        said = f"{SMALL_BUT_CONSISTENT} (every round of one beat every round of the other, "
        said += f"by less than {MIN_EFFECT:.0%})"
    return f"{name}: {fastest.label} is {ratio:.2f}x {slowest.label} ({numbers}): {said}."


def compare_in_turns(
    pipelines: dict[str, tuple[tf.data.Dataset, int]], *, repeats: int = 5
) -> dict[str, RepeatedResult]:
    """Times pipelines in turns and judges each against the one listed before it.

    Each pipeline is timed `repeats` times, in turns (`measure_in_turns`), its elements
    that fail to decode skipped (`ignore_errors()`); it prints each one's median and
    range of images/s, then, for each pipeline after the first, one line: its images/s
    over the previous one's, round by round (`ratio_in_turns`), and `verdict`'s words:
    `B is 3.04x A (2.61-3.52x round by round): beyond the noise: faster.`

    Args:
        pipelines: label -> (a `tf.data.Dataset` of images or (image, label) pairs, the
            images to time per run), in the order to compare them.
        repeats: rounds (at least 1; 5 or more for a figure that is quoted).

    Returns:
        label -> `RepeatedResult` of images/s, in the given order.

    Raises:
        ValueError: if fewer than two pipelines are given, or `repeats` is not a positive
            integer.

    Example:
        runs = comparison.compare_in_turns({"in order": (ordered, 400), "any order":
                                            (unordered, 400)}, repeats=5)
    """
    if len(pipelines) < 2:
        raise ValueError(f"`pipelines` must hold at least two. Received: {list(pipelines)}")
    timers = {
        label: timing.throughput_timer(dataset.ignore_errors(), num_images=num_images)
        for label, (dataset, num_images) in pipelines.items()
    }
    runs = measure_in_turns(timers, repeats=repeats)
    results = list(runs.values())
    for previous, current in itertools.pairwise(results):
        ratio = ratio_in_turns(current, previous)
        said = verdict(current, previous)
        print(
            f"{current.label} is {ratio.median:.2f}x {previous.label} ({ratio.minimum:.2f}-"
            f"{ratio.maximum:.2f}x round by round): {said}."
        )
    return runs


def describe_share_of_ceiling(share: RepeatedResult, *, name: str = "The pipeline") -> str:
    """Says what share of the decode ceiling `share` (a ratio in turns) is, with its spread.

    A median above 100% is called noise, with the reason: a pipeline that reads, parses and
    decodes the same JPEGs cannot outrun decoding them alone.

    Args:
        share: the pipeline's images/s divided by the ceiling's, in turns.
        name: what the sentence calls the pipeline.

    Returns:
        One or two sentences.

    Example:
        print(comparison.describe_share_of_ceiling(share, name="The course pipeline"))
    """
    spread = f"{share.minimum:.0%}-{share.maximum:.0%} over {share.num_runs} runs in turns"
    noise_reason = (
        "a pipeline that reads, parses and decodes the same JPEGs cannot outrun decoding "
        "them alone, so the two sides met different loads (other work on the machine, "
        "or runs too short to average it out)"
    )
    if share.median > 1:
        return (
            f"{name} measured {share.median:.0%} of the decode ceiling ({spread}): noise, "
            f"not a result: {noise_reason}. Measure again on an idle machine."
        )
    sentence = f"{name} reaches {share.median:.0%} of the decode ceiling (median; {spread})."
    if share.maximum > 1:
        sentence += f" Runs above 100% are noise: {noise_reason}."
    return sentence
