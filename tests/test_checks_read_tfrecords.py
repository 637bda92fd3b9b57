"""utils/checks/read_tfrecords.py (lab 3): right answers pass, mistakes name the TODO."""

import shutil

import pytest
import tensorflow as tf

from utils import checks, storage
from utils.checks import read_tfrecords
from utils.lab import shard_cache


@pytest.fixture(scope="module")
def shards(small_source, tmp_path_factory):
    """The 60 images in 4 shards of 32 px: a `ShardSet`, as lab 3's `ensure_shards` gives."""
    folder = tmp_path_factory.mktemp("shards")
    return shard_cache.ensure_shards(small_source, folder, target_size=32, num_shards=4)


FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}


def _read_tfrecord(serialized, features=FEATURES, size=32):
    record = tf.io.parse_single_example(serialized, features)
    image = tf.reshape(tf.io.decode_jpeg(record["image"], channels=3), [size, size, 3])
    return image, tf.reshape(tf.sparse.to_dense(record["one_hot_class"]), [5])


def _check_read(function, shards, features=FEATURES):
    checks.check_read_tfrecord(function, features, todo=1, shards=shards)


def test_check_read_tfrecord_passes(shards, capsys):
    _check_read(_read_tfrecord, shards)
    assert capsys.readouterr().out == (
        "TODO 1 passed: 8 records parsed to (uint8 image of shape (32, 32, 3), one-hot label).\n"
    )


def test_check_read_tfrecord_failures(shards):
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(read_tfrecord\): not done yet"):
        _check_read(_read_tfrecord, shards, features=...)
    with pytest.raises(
        checks.CheckFailed, match=r"not done yet: it returns \(Ellipsis, Ellipsis\)"
    ):
        _check_read(lambda serialized: (..., ...), shards)
    no_default = {**FEATURES, "size": tf.io.FixedLenFeature([2], tf.int64)}
    with pytest.raises(checks.CheckFailed) as failed:
        _check_read(_read_tfrecord, shards, features=no_default)
    assert str(failed.value) == (
        "TODO 1 (read_tfrecord): expected records written without 'size' to parse too; found "
        "they fail. Give features['size'] a default_value, such as [0, 0]."
    )
    wrong_length = {**FEATURES, "one_hot_class": tf.io.FixedLenFeature([4], tf.float32)}
    with pytest.raises(checks.CheckFailed, match=r"expected a record to parse with `features`"):
        _check_read(_read_tfrecord, shards, features=wrong_length)
    image_as_int = {**FEATURES, "image": tf.io.VarLenFeature(tf.string)}
    with pytest.raises(checks.CheckFailed, match=r"features\['image'\] to parse to one string"):
        _check_read(_read_tfrecord, shards, features=image_as_int)
    with pytest.raises(checks.CheckFailed, match=r"found no such key"):
        _check_read(_read_tfrecord, shards, features={"image": FEATURES["image"]})

    def no_reshape(serialized):
        record = tf.io.parse_single_example(serialized, FEATURES)
        one_hot = tf.reshape(tf.sparse.to_dense(record["one_hot_class"]), [5])
        return tf.io.decode_jpeg(record["image"], channels=3), one_hot

    with pytest.raises(checks.CheckFailed, match=r"static shape \(32, 32, 3\).*tf.reshape"):
        _check_read(no_reshape, shards)

    def sparse_label(serialized):
        record = tf.io.parse_single_example(serialized, FEATURES)
        image = tf.reshape(tf.io.decode_jpeg(record["image"], channels=3), [32, 32, 3])
        return image, tf.sparse.to_dense(record["one_hot_class"])

    with pytest.raises(checks.CheckFailed, match=r"one-hot labels of static shape \(5,\)"):
        _check_read(sparse_label, shards)


def _read_dense_label(serialized):
    """A right answer written otherwise: a dense one-hot feature, the image cast by ensure_shape."""
    record = tf.io.parse_single_example(serialized, DENSE_FEATURES)
    image = tf.ensure_shape(tf.image.decode_image(record["image"], channels=3), [32, 32, 3])
    return image, record["one_hot_class"]


DENSE_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "one_hot_class": tf.io.FixedLenFeature([5], tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}


def test_check_read_tfrecord_passes_a_dense_label_spec_and_other_spellings(shards, capsys):
    _check_read(_read_dense_label, shards, features=DENSE_FEATURES)
    without_size = {key: DENSE_FEATURES[key] for key in ("image", "one_hot_class")}
    _check_read(_read_dense_label, shards, features=without_size)

    def parse_then_decode(serialized):  # Another order: label first, decode_jpeg, then reshape.
        record = tf.io.parse_single_example(serialized, FEATURES)
        label = tf.reshape(tf.sparse.to_dense(record["one_hot_class"]), [5])
        image = tf.io.decode_jpeg(record["image"], channels=3)
        return tf.reshape(image, [32, 32, 3]), label

    _check_read(parse_then_decode, shards)
    assert capsys.readouterr().out.count("TODO 1 passed: 8 records parsed") == 3


def _names(shards):
    return tf.data.Dataset.from_tensor_slices(shards.paths)


def _interleaved(simulated, cycle_length=None, **interleave_arguments):
    """Lab 3's TODO 2 as `make(filenames, num_parallel_reads)`: these interleave arguments,
    cycle_length the function's argument unless given, each shard opened through the storage."""

    def make(filenames, num_parallel_reads):
        return filenames.interleave(
            simulated.open_tfrecord,
            cycle_length=num_parallel_reads if cycle_length is None else cycle_length,
            **interleave_arguments,
        )

    return make


def _check(make, simulated, shards):
    """Lab 3's TODO 2 check, 4 shards asked for at once, on the learner's function whose
    dataset `make(filenames, num_parallel_reads)` builds."""

    def read_shards(filenames, num_parallel_reads=4):
        return make(filenames, num_parallel_reads)

    checks.check_read_shards(
        read_shards, todo=2, storage=simulated, shards=shards, num_parallel_reads=4
    )


def _lab_answer(simulated):
    def read_shards(filenames, num_parallel_reads=4):
        return filenames.interleave(
            simulated.open_tfrecord,
            cycle_length=num_parallel_reads,
            num_parallel_calls=num_parallel_reads,
            deterministic=False,
        )

    return read_shards


def test_check_read_shards_passes_on_the_labs_answer(shards, capsys):
    simulated = storage.SimulatedStorage(latency_ms=30)
    checks.check_read_shards(
        _lab_answer(simulated), todo=2, storage=simulated, shards=shards, num_parallel_reads=4
    )
    assert capsys.readouterr().out == (
        "TODO 2 passed: all 60 records, read in parallel, in any order.\n"
    )
    # Also right: any order asked by the options instead (by its older name).
    options = tf.data.Options()
    options.experimental_deterministic = False

    def by_options(filenames, num_parallel_reads=4):
        reads = filenames.interleave(
            simulated.open_tfrecord,
            cycle_length=num_parallel_reads,
            num_parallel_calls=num_parallel_reads,
        )
        return reads.with_options(options)

    checks.check_read_shards(
        by_options, todo=2, storage=simulated, shards=shards, num_parallel_reads=4
    )

    def read_shards(filenames, num_parallel_reads=4):  # Keywords in another order.
        return filenames.interleave(
            simulated.open_tfrecord,
            num_parallel_calls=num_parallel_reads,
            deterministic=False,
            cycle_length=num_parallel_reads,
        )

    checks.check_read_shards(
        read_shards, todo=2, storage=simulated, shards=shards, num_parallel_reads=4
    )
    assert capsys.readouterr().out.count("TODO 2 passed") == 2  # Both.


def test_check_read_shards_fails_a_function_that_ignores_its_argument(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(
            _interleaved(simulated, 4, num_parallel_calls=4, deterministic=False), simulated, shards
        )
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected read_shards(filenames, 3) to read 3 shards at once; "
        "found cycle_length=4, num_parallel_calls=4. Use the num_parallel_reads argument, not "
        "a number of your own."
    )


def test_check_read_shards_explains_num_parallel_calls_above_cycle_length(shards):
    """interleave() refuses it as the dataset is made: the check's message, not TensorFlow's
    `{{function_node ...}}` traceback in the learner's own cell (issue 61 item 3)."""
    simulated = storage.SimulatedStorage(latency_ms=30)
    refused = _interleaved(simulated, 1, num_parallel_calls=4, deterministic=False)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(refused, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected 4 shards read at once; interleave() refuses a "
        "num_parallel_calls above its cycle_length. Pass num_parallel_reads as both."
    )

    def raises(names, reads):
        raise TypeError("read_shards() got an unexpected keyword argument 'cycle'")

    with pytest.raises(checks.CheckFailed) as failure:
        _check(raises, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): read_shards(shard_names) fails: read_shards() got an "
        "unexpected keyword argument 'cycle'"
    )


def test_check_read_shards_fails_autotune_whatever_the_machine(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    autotuned = _interleaved(simulated, num_parallel_calls=-1, deterministic=False)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(autotuned, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected 4 shards in flight; found num_parallel_calls=AUTOTUNE, "
        "which counts the cores, not the storage's wait. Pass num_parallel_reads as "
        "cycle_length and num_parallel_calls."
    )


def test_check_read_shards_names_the_specific_mistake_before_the_order(shards):
    """No num_parallel_calls, or flat_map: their own message, not "deterministic=False"."""
    simulated = storage.SimulatedStorage(latency_ms=30)
    no_calls = _interleaved(simulated, deterministic=False)
    with pytest.raises(checks.CheckFailed, match=r"found an interleave\(\) without num_parallel"):
        _check(no_calls, simulated, shards)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(lambda names, reads: names.flat_map(simulated.open_tfrecord), simulated, shards)
    assert "found no interleave()" in str(failure.value)
    assert "Pass deterministic=False" not in str(failure.value)


def test_check_read_shards_on_the_stub_says_not_done(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(lambda names, reads: None, simulated, shards)  # The lab's stub returns nothing.
    assert str(failure.value) == (
        "TODO 2 (read_shards): not done yet: it returns None. Expected a tf.data.Dataset of "
        "the shards' serialized records."
    )


def test_check_read_shards_explains_the_order_kept(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    options = tf.data.Options()
    options.deterministic = False

    def options_thrown_away(names, reads):  # Fast-and-lean 07's mistake.
        in_order = _interleaved(simulated, num_parallel_calls=reads)(names, reads)
        in_order.with_options(options)
        return in_order

    with pytest.raises(checks.CheckFailed) as failure:
        _check(options_thrown_away, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected the records in the order they arrive; found the "
        "files' order kept (options.deterministic=None, an interleave() without "
        "deterministic=False): a late shard holds up the records behind it. Pass "
        "deterministic=False to interleave() (with_options() counts only on the dataset it "
        "returns)."
    )


def test_check_read_shards_explains_tfrecord_datasets_own_order(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    options = tf.data.Options()
    options.deterministic = False

    def integer_reads(names, reads):
        return tf.data.TFRecordDataset(names, num_parallel_reads=reads).with_options(options)

    with pytest.raises(checks.CheckFailed) as failure:
        _check(integer_reads, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected the shards read in any order; found "
        'LegacyParallelInterleaveDatasetV2 marked deterministic: "true", as '
        "TFRecordDataset(paths, num_parallel_reads=<an integer>) makes: it keeps the files' "
        "order whatever the options say. Interleave the files yourself, with "
        "deterministic=False."
    )


def test_check_read_shards_explains_cycle_length_alone(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    options = tf.data.Options()
    options.deterministic = False
    one_at_a_time = _interleaved(simulated)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(
            lambda names, reads: one_at_a_time(names, reads).with_options(options),
            simulated,
            shards,
        )
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected 4 shards read at once; found an interleave() without "
        "num_parallel_calls: cycle_length alone opens that many files but reads them one "
        "after another. Pass num_parallel_reads as its cycle_length and num_parallel_calls."
    )


def test_check_read_shards_explains_the_storage_bypassed(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)

    def direct(names, reads):
        return names.interleave(
            tf.data.TFRecordDataset,
            cycle_length=reads,
            num_parallel_calls=reads,
            deterministic=False,
        )

    with pytest.raises(checks.CheckFailed, match=r"it saw no request\. Open each shard with "):
        _check(direct, simulated, shards)
    # On local disk (no wait) the same reader is right.
    _check(direct, storage.SimulatedStorage(latency_ms=0), shards)


def test_check_read_shards_explains_too_few_shards_in_flight(shards, monkeypatch):
    simulated = storage.SimulatedStorage(latency_ms=30)
    one = _interleaved(simulated, 1, num_parallel_calls=1)
    with pytest.raises(checks.CheckFailed) as failure:
        _check(lambda names, reads: one(names, reads).with_options(_any_order()), simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected 4 shards read at once; found cycle_length=1, "
        "num_parallel_calls=1. Pass num_parallel_reads as both."
    )
    autotuned = _interleaved(simulated, -1, num_parallel_calls=-1)
    with pytest.raises(checks.CheckFailed, match=r"found num_parallel_calls=AUTOTUNE"):
        _check(
            lambda names, reads: autotuned(names, reads).with_options(_any_order()),
            simulated,
            shards,
        )
    # Where the graph cannot be read, the storage's count of shards in flight judges.
    monkeypatch.setattr(read_tfrecords, "dataset_steps", lambda dataset: None)

    def sequential(names, reads):
        return names.flat_map(simulated.open_tfrecord).with_options(_any_order())

    with pytest.raises(checks.CheckFailed) as failure:
        _check(sequential, simulated, shards)
    assert str(failure.value) == (
        "TODO 2 (read_shards): expected about 4 shards read at once; found at most 1. Pass "
        "num_parallel_reads as interleave()'s cycle_length and num_parallel_calls."
    )


def _any_order():
    options = tf.data.Options()
    options.deterministic = False
    return options


def test_check_read_shards_wants_the_records_themselves_all_once(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    right = _lab_answer(simulated)
    with pytest.raises(checks.CheckFailed, match=r"a scalar tf.string\) per element; found \("):
        _check(lambda names, reads: right(names, reads).map(_read_tfrecord), simulated, shards)
    with pytest.raises(checks.CheckFailed, match=r"found more than that \(does it repeat\?\)\.$"):
        _check(lambda names, reads: right(names, reads).repeat(), simulated, shards)  # Forever.
    with pytest.raises(checks.CheckFailed, match=r"expected all 60 records, once each; found 30"):
        _check(lambda names, reads: right(names, reads).take(30), simulated, shards)

    def unlinked(names, reads):
        return tf.data.TFRecordDataset(shards.paths).with_options(_any_order())

    with pytest.raises(checks.CheckFailed, match=r"found no interleave\(\)"):
        _check(unlinked, simulated, shards)


def test_check_read_shards_on_a_damaged_shard_names_it_not_the_todo(shards, tmp_path):
    damaged = [str(tmp_path / f"copy-{index}.tfrec") for index in range(len(shards.paths))]
    for source, target in zip(shards.paths, damaged, strict=True):
        shutil.copy(source, target)
    with open(damaged[1], "r+b") as file:
        file.truncate(100)
    copies = shard_cache.ShardSet(**{**vars(shards), "paths": damaged})
    simulated = storage.SimulatedStorage(latency_ms=0)
    with pytest.raises(checks.DataProblem, match=r"^Not a problem of TODO 2: a shard is damaged"):
        _check(
            _interleaved(simulated, num_parallel_calls=4, deterministic=False), simulated, copies
        )
