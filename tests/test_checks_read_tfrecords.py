"""utils/checks/read_tfrecords.py (lab 3): right answers pass, mistakes name the TODO."""

import pytest
import tensorflow as tf

from utils import checks
from utils.lab import storage


@pytest.fixture(scope="module")
def shard_paths(write_small_shards):
    return write_small_shards(4)


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


def _parse_batch(serialized_batch):
    from utils import pipeline

    return pipeline.parse_batch(serialized_batch, target_size=32, num_classes=5)


def _check_read(function, features=FEATURES, shard_paths=None):
    checks.check_read_tfrecord(
        function, features, todo=1, shard_paths=shard_paths, target_size=32, num_classes=5
    )


def test_check_read_tfrecord_passes(shard_paths, capsys):
    _check_read(_read_tfrecord, shard_paths=shard_paths)
    assert capsys.readouterr().out == (
        "TODO 1 passed: 8 records parsed to (uint8 image of shape (32, 32, 3), one-hot label).\n"
    )


def test_check_read_tfrecord_failures(shard_paths):
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(read_tfrecord\): not done yet"):
        _check_read(_read_tfrecord, features=..., shard_paths=shard_paths)
    with pytest.raises(
        checks.CheckFailed, match=r"not done yet: it returns \(Ellipsis, Ellipsis\)"
    ):
        _check_read(lambda serialized: (..., ...), shard_paths=shard_paths)
    dense = {**FEATURES, "one_hot_class": tf.io.FixedLenFeature([5], tf.float32)}
    with pytest.raises(checks.CheckFailed, match=r"features\['one_hot_class'\] to be a VarLen"):
        _check_read(_read_tfrecord, features=dense, shard_paths=shard_paths)
    no_default = {**FEATURES, "size": tf.io.FixedLenFeature([2], tf.int64)}
    with pytest.raises(checks.CheckFailed, match=r"to have a default_value"):
        _check_read(_read_tfrecord, features=no_default, shard_paths=shard_paths)

    def no_reshape(serialized):
        record = tf.io.parse_single_example(serialized, FEATURES)
        one_hot = tf.reshape(tf.sparse.to_dense(record["one_hot_class"]), [5])
        return tf.io.decode_jpeg(record["image"], channels=3), one_hot

    with pytest.raises(checks.CheckFailed, match=r"static shape \(32, 32, 3\).*tf.reshape"):
        _check_read(no_reshape, shard_paths=shard_paths)

    def sparse_label(serialized):
        record = tf.io.parse_single_example(serialized, FEATURES)
        image = tf.reshape(tf.io.decode_jpeg(record["image"], channels=3), [32, 32, 3])
        return image, tf.sparse.to_dense(record["one_hot_class"])

    with pytest.raises(checks.CheckFailed, match=r"one-hot labels of static shape \(5,\)"):
        _check_read(sparse_label, shard_paths=shard_paths)


def _check_parallel_records(candidate, storage_):
    """Lab 3's TODO 2 check on the 4 shards of 15 records that the fixture writes."""
    checks.check_parallel_records(
        candidate, todo=2, storage=storage_, num_parallel_reads=4, num_shards=4, num_records=60
    )


def _read_shards(storage_, shard_paths, cycle_length=4, **interleave_arguments):
    """Lab 3's TODO 2: the shards interleaved, each opened through the storage."""
    files = tf.data.Dataset.from_tensor_slices([str(path) for path in shard_paths])
    return files.interleave(
        storage_.open_tfrecord, cycle_length=cycle_length, **interleave_arguments
    )


def test_check_parallel_records_passes_and_fails(shard_paths, capsys):
    simulated = storage.SimulatedStorage(latency_ms=30)
    records = _read_shards(simulated, shard_paths, num_parallel_calls=4, deterministic=False)
    dataset = records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)

    def run(candidate):
        _check_parallel_records(candidate, simulated)

    run(dataset)
    assert (
        capsys.readouterr().out
        == "TODO 2 passed: all 60 records, read in parallel, in any order.\n"
    )
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(dataset\): not done yet"):
        run(...)
    # The likeliest mistakes: the order kept (no deterministic=False, or options thrown away),
    # files read one after another (cycle_length alone), the map not parallel, the reader
    # that keeps its order whatever the options say, the storage bypassed.
    in_order = _read_shards(simulated, shard_paths, num_parallel_calls=4)
    options = tf.data.Options()
    options.deterministic = False
    in_order.with_options(options)  # Fast-and-lean 07's mistake: options thrown away.
    with pytest.raises(checks.CheckFailed) as failure:
        run(in_order.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE))
    assert str(failure.value) == (
        "TODO 2 (dataset): expected the records in the order they arrive; found the files' "
        "order kept (options.deterministic=None, an interleave() without deterministic=False): "
        "a late shard then holds up every record behind it. Pass deterministic=False to "
        "interleave(); options set with with_options() count only on the dataset it returns, "
        "not on the one you called it on."
    )
    one_at_a_time = _read_shards(simulated, shard_paths).with_options(options)
    with pytest.raises(
        checks.CheckFailed,
        match=r"found at most 1\. Pass num_parallel_reads as interleave\(\)'s cycle_length and "
        r"num_parallel_calls: cycle_length alone opens that many files but reads them one "
        r"after another\.$",
    ):
        run(one_at_a_time.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE))
    with pytest.raises(checks.CheckFailed, match=r"expected a parallel map"):
        run(records.map(_read_tfrecord))
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected all 60 records, once each; found more than that \(does it repeat\?\)\.$",
    ):
        run(dataset.repeat())  # Forever: the check ends all the same.
    with pytest.raises(checks.CheckFailed, match=r"expected all 60 records, once each; found 30\."):
        run(dataset.take(30))
    with pytest.raises(
        checks.CheckFailed, match=r"images of rank 3; found .*batching comes in TODO 4\.$"
    ):
        run(dataset.batch(8))
    files = tf.data.Dataset.from_tensor_slices([str(path) for path in shard_paths])
    direct = files.interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=4, deterministic=False
    )
    with pytest.raises(
        checks.CheckFailed,
        match=r"it saw no request\. Open each shard with simulated_storage\.open_tfrecord",
    ):
        run(direct.map(_read_tfrecord, num_parallel_calls=-1))


def test_the_course_reader_passes_too(shard_paths, capsys):
    # Other lessons read through `tfrecord_dataset` with the options: the same check holds.
    simulated = storage.SimulatedStorage(latency_ms=30)
    options = tf.data.Options()
    options.deterministic = False
    records = simulated.tfrecord_dataset(shard_paths, num_parallel_reads=4).with_options(options)
    _check_parallel_records(
        records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE), simulated
    )
    assert capsys.readouterr().out.startswith("TODO 2 passed")


def test_an_order_kept_by_todo_2_does_not_fail_todo_4_too(shard_paths, capsys):
    # One mistake, one TODO: TODO 2's records kept the files' order (no deterministic=False).
    simulated = storage.SimulatedStorage(latency_ms=0)
    in_order = _read_shards(simulated, shard_paths, num_parallel_calls=4)
    fast = in_order.batch(16).map(_parse_batch, num_parallel_calls=-1).prefetch(-1)
    checks.check_fast_dataset(fast, todo=4, batch_size=16, records=in_order)
    assert capsys.readouterr().out.startswith("TODO 4 passed")
    # Records read in any order, but TODO 4 reads the shards again, in order: its own mistake.
    any_order = _read_shards(simulated, shard_paths, num_parallel_calls=4, deterministic=False)
    ordered_again = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=4).batch(16)
    ordered_again = ordered_again.map(_parse_batch, -1).prefetch(-1)
    with pytest.raises(checks.CheckFailed, match=r"^TODO 4 \(fast\): expected the shards read"):
        checks.check_fast_dataset(ordered_again, todo=4, batch_size=16, records=any_order)


ORDER_KEPT_BY_THE_READER = (
    "expected the shards read in any order; found LegacyParallelInterleaveDatasetV2 marked "
    'deterministic: "true": it keeps the files\' order whatever the options say, as '
    "tf.data.TFRecordDataset(paths, num_parallel_reads=<an integer>) always does. Interleave "
    "the files instead, with deterministic=False: filenames.interleave("
    "simulated_storage.open_tfrecord, cycle_length=..., num_parallel_calls=..., "
    "deterministic=False)."
)


def test_check_parallel_records_with_integer_tfrecord_reads_on_local_disk_fails(shard_paths):
    local_disk = storage.SimulatedStorage(latency_ms=0)  # No wait: no request is counted.
    options = tf.data.Options()
    options.deterministic = False
    records = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=16).with_options(options)
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_parallel_records(
            records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE),
            todo=2,
            storage=local_disk,
            num_parallel_reads=16,
            num_shards=4,
            num_records=60,
        )
    assert str(failure.value) == f"TODO 2 (dataset): {ORDER_KEPT_BY_THE_READER}"


def test_check_parallel_records_with_an_interleave_on_local_disk_passes(shard_paths, capsys):
    local_disk = storage.SimulatedStorage(latency_ms=0)
    options = tf.data.Options()
    options.deterministic = False
    files = tf.data.Dataset.from_tensor_slices([str(path) for path in shard_paths])
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=16, num_parallel_calls=16)
    checks.check_parallel_records(
        records.with_options(options).map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE),
        todo=2,
        storage=local_disk,
        num_parallel_reads=16,
        num_shards=4,
        num_records=60,
    )
    assert capsys.readouterr().out.startswith("TODO 2 passed")


def test_check_parallel_records_accepts_options_after_the_map_and_the_old_option_name(
    shard_paths, capsys
):
    simulated = storage.SimulatedStorage(latency_ms=30)
    records = simulated.tfrecord_dataset(shard_paths, num_parallel_reads=4)
    options = tf.data.Options()
    options.experimental_deterministic = False  # The older name of the same option.
    after_map = records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
    _check_parallel_records(after_map.with_options(options), simulated)
    assert capsys.readouterr().out.startswith("TODO 2 passed")


def test_check_parse_batch_passes_and_fails(shard_paths, capsys):
    def run(function):
        checks.check_parse_batch(
            function, todo=3, read_tfrecord=_read_tfrecord, shard_paths=shard_paths
        )

    run(_parse_batch)
    assert capsys.readouterr().out.startswith("TODO 3 passed: 6 records in batches of 3")
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(parse_batch\): not done yet"):
        run(lambda batch: (..., ...))
    with pytest.raises(checks.CheckFailed, match=r"parsed with tf.io.parse_example; found an"):
        run(lambda batch: _read_tfrecord(batch))
    with pytest.raises(checks.CheckFailed, match=r"record 0 of the batch differs"):
        run(lambda batch: (_parse_batch(batch)[0][::-1], _parse_batch(batch)[1]))


def test_check_fast_dataset_passes_and_fails(shard_paths, capsys):
    options = tf.data.Options()
    options.deterministic = False
    records = storage.read_tfrecords(shard_paths, num_parallel_reads=4).with_options(options)
    fast = records.batch(16).map(_parse_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(-1)
    checks.check_fast_dataset(fast, todo=4, batch_size=16)
    assert capsys.readouterr().out == (
        "TODO 4 passed: batches of 16 images of (32, 32, 3), prefetched.\n"
    )
    threads = tf.data.Options()
    threads.threading.private_threadpool_size = 4
    checks.check_fast_dataset(fast.with_options(threads), todo=4, batch_size=16)  # Also right.
    assert capsys.readouterr().out.startswith("TODO 4 passed")
    with pytest.raises(checks.CheckFailed, match=r"^TODO 4 \(fast\): not done yet"):
        checks.check_fast_dataset(..., todo=4, batch_size=16)
    with pytest.raises(checks.CheckFailed, match=r"prefetch\(tf.data.AUTOTUNE\) as the last step"):
        checks.check_fast_dataset(fast.unbatch().batch(16), todo=4, batch_size=16)
    per_record = records.map(_read_tfrecord, num_parallel_calls=-1).batch(16).prefetch(-1)
    with pytest.raises(checks.CheckFailed, match=r"batched first, then parsed"):
        checks.check_fast_dataset(per_record, todo=4, batch_size=16)
    ordered = tf.data.TFRecordDataset(shard_paths).batch(16).map(_parse_batch, -1).prefetch(-1)
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected the records in the order they arrive; found the files' order kept "
        r"\(options.deterministic=None\): a late shard then holds up every record behind it\. "
        r"Build on TODO 2's `records`, which read the shards in any order\.$",
    ):
        checks.check_fast_dataset(ordered, todo=4, batch_size=16)
    sequential = records.batch(16).map(_parse_batch).prefetch(-1)
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected parse_batch in a parallel map; .* Pass num_parallel_calls=",
    ):
        checks.check_fast_dataset(sequential, todo=4, batch_size=16)
    with pytest.raises(checks.CheckFailed, match=r"the last is BatchDataset"):
        checks.check_fast_dataset(fast.unbatch().batch(16), todo=4, batch_size=16)
    integer_reads = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=4)
    integer_reads = integer_reads.with_options(options).batch(16).map(_parse_batch, -1)
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_fast_dataset(integer_reads.prefetch(-1), todo=4, batch_size=16)
    assert str(failure.value) == f"TODO 4 (fast): {ORDER_KEPT_BY_THE_READER}"


def test_check_fast_dataset_accepts_drop_remainder_options_here_and_a_fixed_buffer(
    shard_paths, capsys
):
    options = tf.data.Options()
    options.deterministic = False
    records = storage.read_tfrecords(shard_paths, num_parallel_reads=4)
    parsed = records.batch(16, drop_remainder=True).map(_parse_batch, num_parallel_calls=-1)
    for fast in (
        parsed.with_options(options).prefetch(tf.data.AUTOTUNE),
        parsed.prefetch(-1).with_options(options),
    ):
        checks.check_fast_dataset(fast, todo=4, batch_size=16)
        assert capsys.readouterr().out.startswith("TODO 4 passed: batches of 16")
        assert "fixed buffer" not in capsys.readouterr().out
    checks.check_fast_dataset(parsed.with_options(options).prefetch(4), todo=4, batch_size=16)
    assert capsys.readouterr().out.endswith(
        "prefetched (a fixed buffer of 4: AUTOTUNE would size it).\n"
    )


def test_check_fast_dataset_prefetch_of_one_batch_is_caught(shard_paths):
    options = tf.data.Options()
    options.deterministic = False
    records = storage.read_tfrecords(shard_paths, num_parallel_reads=4).with_options(options)
    parsed = records.batch(16).map(_parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_fast_dataset(parsed.prefetch(1), todo=4, batch_size=16)
    assert str(failure.value) == (
        "TODO 4 (fast): expected prefetch(tf.data.AUTOTUNE); found prefetch(1). A buffer of 1 "
        "batch absorbs no slow batch: when one shard answers late (this lab's storage has a "
        "long tail), the accelerator waits for it, step after step. AUTOTUNE grows the buffer "
        "while the consumer waits."
    )
