"""utils/checks/grain_arrayrecord.py (lesson 9): right answers pass, mistakes name the TODO."""

import functools

import numpy as np
import pytest

from tools.building.lesson_parameters import missing_modules
from utils import checks

pytestmark = pytest.mark.skipif(
    bool(missing_modules("09_grain_arrayrecord")), reason="lesson 9 needs grain and array_record"
)


@pytest.fixture(scope="module")
def array_records(write_small_shards, tmp_path_factory):
    """The 60 small images in 4 shards, copied to 4 ArrayRecord files."""
    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    folder = tmp_path_factory.mktemp("arrayrecord")
    return grain_arrayrecord.write_array_records(write_small_shards(4), str(folder))


@pytest.fixture(scope="module")
def data_source(array_records):
    import grain

    return grain.sources.ArrayRecordDataSource(array_records)


def _records_per_file(array_records):
    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    return [grain_arrayrecord.count_records(path) for path in array_records]


def _check_shuffled(shuffled, data_source, array_records, num_epochs=2):
    checks.check_shuffled(
        shuffled,
        todo=1,
        data_source=data_source,
        records_per_file=_records_per_file(array_records),
        num_epochs=num_epochs,
    )


def test_check_shuffled_passes_a_global_shuffle_reseeded_each_epoch(
    data_source, array_records, capsys
):
    import grain

    shuffled = grain.MapDataset.source(data_source).shuffle(seed=42).repeat(2)
    _check_shuffled(shuffled, data_source, array_records)
    assert capsys.readouterr().out == (
        "TODO 1 passed: 2 epochs of 60 records, each a global shuffle, each in a new order.\n"
    )


def test_check_shuffled_names_each_mistake(data_source, array_records):
    import grain

    source = grain.MapDataset.source(data_source)
    cases = [
        (..., r"^TODO 1 \(shuffled\): not done yet: shuffled is still \.\.\."),
        ([b"x"], r"found a list\. Start from grain\.MapDataset\.source"),
        (source.shuffle(seed=1), r"expected 2 epochs of 60 records .* found 60\."),
        (source.repeat(2), r"found them in the files' order"),
        (source.repeat(2).shuffle(seed=1), r"each of the 60 records once in epoch 1"),
        (source.shuffle(seed=1).repeat(2, reseed_each_epoch=False), r"found epoch 2 in epoch 1"),
        (source.shuffle(seed=1).map(len).repeat(2), r"serialized records \(bytes\)"),
    ]
    # Each file's records shuffled, the files in order: not a global shuffle.
    files = [
        grain.MapDataset.source(grain.sources.ArrayRecordDataSource([path])).shuffle(seed=1)
        for path in array_records
    ]
    within_files = grain.MapDataset.concatenate(files).repeat(2)
    cases.append((within_files, r"a global shuffle .* a shuffle within a file"))
    window = grain.experimental.WindowShuffleMapDataset(source, window_size=10, seed=1)
    cases.append(
        (window.repeat(2), r"0 of the last quarter.s records .* within a file or a window")
    )
    for shuffled, message in cases:
        with pytest.raises(checks.CheckFailed, match=message):
            _check_shuffled(shuffled, data_source, array_records)


def _parse(record):
    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    return grain_arrayrecord.parse_record(record, num_classes=5)


def _loader(shuffled, num_workers=1, batch_size=8):
    import grain

    loader = shuffled.map(_parse).batch(batch_size, drop_remainder=True).to_iter_dataset()
    return loader.mp_prefetch(grain.MultiprocessingOptions(num_workers=num_workers))


@pytest.fixture(scope="module")
def shuffled(data_source):
    import grain

    from utils.lessons.grain_arrayrecord import grain_arrayrecord

    grain_arrayrecord.use_flag_defaults()
    return grain.MapDataset.source(data_source).shuffle(seed=42).repeat(2)


def _check_loader(loader, shuffled, num_workers=1):
    checks.check_loader(
        loader, todo=2, shuffled=shuffled, batch_size=8, num_classes=5, num_workers=num_workers
    )


def test_check_loader_passes_batches_made_in_worker_processes(shuffled, capsys):
    import grain

    # Batched after to_iter_dataset, each of 2 workers batches every other record.
    by_record = shuffled.map(_parse).to_iter_dataset().batch(8, drop_remainder=True)
    two_workers = by_record.mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    _check_loader(two_workers, shuffled, num_workers=2)
    assert "in 2 worker processes" in capsys.readouterr().out
    _check_loader(_loader(shuffled), shuffled)
    assert capsys.readouterr().out == (
        "TODO 2 passed: batches of 8 images and one-hot labels from shuffled's records, "
        "in 1 worker processes.\n"
    )


def test_check_loader_names_each_mistake(shuffled):
    import grain

    batches = shuffled.map(_parse).batch(8, drop_remainder=True)
    other_order = grain.MapDataset.source(shuffled).shuffle(seed=7)  # Another order.
    cases = [
        (..., r"^TODO 2 \(loader\): not done yet"),
        (batches, r"found a BatchMapDataset\. Call \.to_iter_dataset\(\)"),
        (batches.to_iter_dataset(), r"expected 1 worker processes; found 0"),
        (_loader(shuffled, num_workers=0), r"found 0\. .*num_workers=0 starts none"),
        (_loader(shuffled, batch_size=4), r"found \(4, 32, 32, 3\) uint8"),
        (
            _loader(other_order),
            r"the first batch to hold shuffled's first records; found other images",
        ),
    ]
    for loader, message in cases:
        with pytest.raises(checks.CheckFailed, match=message):
            _check_loader(loader, shuffled)
    with pytest.raises(checks.CheckFailed, match=r"expected 2 worker processes; found 1"):
        _check_loader(_loader(shuffled), shuffled, num_workers=2)


@pytest.fixture(scope="module")
def resume(shuffled):
    """Lab 9's TODO 3 done right on a loader of no worker processes: the loader, its first
    batch, the state after two batches, the batch after it, and a fresh iterator's state."""
    loader = _loader(shuffled, num_workers=0)
    iterator, fresh = iter(loader), iter(loader)
    first_batch, _ = next(iterator), next(iterator)
    state = iterator.get_state()
    return {
        "loader": loader,
        "first_batch": first_batch,
        "state": state,
        "next_batch": next(iterator),
        "fresh_state": fresh.get_state(),
    }


def _check_resumed(resume, resumed_batch, **change):
    values = {key: resume[key] for key in ("state", "next_batch", "first_batch", "loader")}
    checks.check_resumed(resumed_batch, todo=3, **{**values, **change})


def _copy(batch):
    return tuple(part.copy() for part in batch)


def test_check_resumed_passes_the_batch_after_the_state(resume, capsys):
    _check_resumed(resume, _copy(resume["next_batch"]))
    assert capsys.readouterr().out == (
        "TODO 3 passed: the resumed iterator gave the batch that followed the saved state.\n"
    )


_ZEROS = np.zeros((1,))
RESUME_MISTAKES = {  # resumed_batch and what else the learner set: the message, whole.
    "resumed not done": (
        ...,
        {},
        "TODO 3 (resumed_batch): not done yet: resumed_batch is "
        "still ... (Ellipsis). Expected the iterator's state and the batches "
        "around it.",
    ),
    "not a state": (
        "next",
        {"state": "state"},
        "TODO 3 (state): expected the dict iterator.get_state() returns; found a str.",
    ),
    "an empty state": (
        "next",
        {"state": {}},
        "TODO 3 (state): expected the dict "
        "iterator.get_state() returns, saved after two batches; found an empty "
        "dict, which restores nothing. Take state = iterator.get_state().",
    ),
    "equal zeros": (
        _ZEROS.copy(),
        {"next_batch": _ZEROS.copy()},
        "TODO 3 (next_batch): "
        "expected a batch (images, labels), as next() on an iterator of loader "
        "gives; found a ndarray.",
    ),
    "a state of another kind": (
        "next",
        {"state": {"epoch": 2}},
        "TODO 3 (state): "
        "expected the dict iterator.get_state() returns; found one that "
        "a fresh iterator of loader cannot restore (KeyError: "
        "'next_index'). Take state = iterator.get_state().",
    ),
    "a fresh iterator's state": (
        "first",
        {"state": "fresh", "next_batch": "first"},
        "TODO 3 (state): expected the state after two batches of "
        "iterator; found a fresh iterator's (restored, it gives the "
        "loader's first batch). Take state = iterator.get_state() "
        "after first_batch and second_batch.",
    ),
    "not restored": (
        "first",
        {},
        "TODO 3 (resumed_batch): expected the batch that followed "
        "the saved state; found the loader's first batch: the state was saved but "
        "not restored. Call resumed.set_state(state) before next(resumed).",
    ),
    "another batch": (
        "other",
        {},
        "TODO 3 (resumed_batch): expected the batch a fresh "
        "iterator of loader gives after set_state(state); found another batch. "
        "Take resumed_batch = next(resumed) right after "
        "resumed.set_state(state).",
    ),
    "next batch taken late": (
        "next",
        {"next_batch": "other"},
        "TODO 3 (next_batch): expected "
        "the batch that follows the saved state; found another batch. "
        "Save the state with get_state() right before "
        "next_batch = next(iterator).",
    ),
}


@pytest.mark.parametrize("mistake", RESUME_MISTAKES, ids=list(RESUME_MISTAKES))
def test_check_resumed_names_each_mistake(resume, mistake):
    resumed, change, message = RESUME_MISTAKES[mistake]
    batches = {
        "next": resume["next_batch"],
        "first": resume["first_batch"],
        "other": tuple(part[::-1].copy() for part in resume["next_batch"]),
    }
    named = {"fresh": resume["fresh_state"], **{k: _copy(v) for k, v in batches.items()}}
    change = {
        key: named.get(value, value) if isinstance(value, str) else value
        for key, value in change.items()
    }
    resumed = _copy(batches[resumed]) if isinstance(resumed, str) else resumed
    with pytest.raises(checks.CheckFailed) as failure:
        _check_resumed(resume, resumed, **change)
    assert str(failure.value) == message


@pytest.mark.parametrize("restored", [True, False], ids=["restored", "next_batch itself"])
def test_check_resumed_on_a_real_iterator(shuffled, restored, capsys):
    """The lab's TODO 3 on a loader of 1 worker: `resumed_batch = next_batch` shows nothing
    restored, though its values are right."""
    loader = _loader(shuffled)
    iterator = iter(loader)
    first_batch, _ = next(iterator), next(iterator)
    state = iterator.get_state()
    next_batch = next(iterator)
    resumed = iter(loader)
    resumed.set_state(state)
    resumed_batch = next(resumed) if restored else next_batch
    check = functools.partial(
        checks.check_resumed,
        todo=3,
        state=state,
        next_batch=next_batch,
        first_batch=first_batch,
        loader=loader,
    )
    try:
        if restored:
            check(resumed_batch)
            assert capsys.readouterr().out.startswith("TODO 3 passed: the resumed iterator")
        else:
            with pytest.raises(checks.CheckFailed) as failure:
                check(resumed_batch)
            assert str(failure.value) == (
                "TODO 3 (resumed_batch): expected the first batch of `resumed`, a fresh "
                "iterator after resumed.set_state(state); found next_batch itself (the same "
                "arrays), which shows nothing restored. Take resumed_batch = next(resumed)."
            )
    finally:
        iterator.close()
        resumed.close()


def test_check_resumed_a_copied_batch_beside_an_iterator_never_restored_fails(resume, capsys):
    """A real get_state() and a copy of next_batch, `resumed` a fresh iterator never restored:
    its next batch is not the restored order's second (issue 61)."""
    loader = resume["loader"]
    never_restored = iter(loader)
    further_batch = next(never_restored)
    with pytest.raises(checks.CheckFailed) as failure:
        _check_resumed(resume, _copy(resume["next_batch"]), further_batch=further_batch)
    assert str(failure.value) == (
        "TODO 3 (resumed): expected next(resumed) after resumed_batch to give the batch after "
        "it in the restored order; found another batch: `resumed` was not restored. Make "
        "resumed = iter(loader), then resumed.set_state(state)."
    )
    restored = iter(loader)  # The right answer: restored, its first batch, then the next.
    restored.set_state(resume["state"])
    resumed_batch = next(restored)
    _check_resumed(resume, resumed_batch, further_batch=next(restored))
    assert capsys.readouterr().out.startswith("TODO 3 passed")
