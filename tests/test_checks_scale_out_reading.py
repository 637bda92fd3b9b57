"""utils/checks/scale_out_reading.py (lesson 7): right answers pass, mistakes name the TODO."""

import time

import pytest
import tensorflow as tf

from utils import checks


def test_check_host_cores_on_stub_says_todo_1_not_done():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(host_cores_needed\): not done yet"):
        checks.check_host_cores(lambda rate, per_core: ..., todo=1)


def test_check_host_cores_rounding_down_fails_with_the_fix(capsys):
    with pytest.raises(checks.CheckFailed, match=r"expected 4 cores for 1000 images/s .*found 3"):
        checks.check_host_cores(lambda rate, per_core: int(rate // per_core), todo=1)
    checks.check_host_cores(lambda rate, per_core: -(-rate // per_core), todo=1)
    assert (
        capsys.readouterr().out
        == "TODO 1 passed: 4 rates give the whole cores they need, rounded up.\n"
    )


def _records_dataset_fn(num_records, *, shard=True, per_replica=True):
    images = tf.reshape(tf.cast(tf.range(num_records * 3), tf.uint8), [num_records, 1, 1, 3])

    def dataset_fn(input_context):
        dataset = tf.data.Dataset.from_tensor_slices((images, tf.zeros([num_records])))
        if shard:
            dataset = dataset.shard(
                input_context.num_input_pipelines, input_context.input_pipeline_id
            )
        batch = input_context.get_per_replica_batch_size(8) if per_replica else 8
        return dataset.batch(batch)

    return dataset_fn


def test_check_dataset_fn_passes_on_disjoint_complete_parts(capsys):
    checks.check_dataset_fn(_records_dataset_fn(40), todo=2, num_records=40, global_batch_size=8)
    assert capsys.readouterr().out.startswith("TODO 2 passed: 1 host reads all 40 records; 2 hosts")


def test_check_dataset_fn_stub_and_wrong_answers():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(dataset_fn\): not done yet"):
        checks.check_dataset_fn(lambda context: ..., todo=2, num_records=40, global_batch_size=8)
    with pytest.raises(
        checks.CheckFailed, match=r"found 40 of 40 read more than once with 2 hosts"
    ):
        checks.check_dataset_fn(
            _records_dataset_fn(40, shard=False), todo=2, num_records=40, global_batch_size=8
        )
    with pytest.raises(checks.CheckFailed, match=r"expected batches of 4 on each of 2 hosts"):
        checks.check_dataset_fn(
            _records_dataset_fn(40, per_replica=False), todo=2, num_records=40, global_batch_size=8
        )


def test_check_through_service_stub_and_wrong_answers(capsys):
    started = time.perf_counter()
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(through_service\): not done yet"):
        checks.check_through_service(lambda dataset, mode, service: ..., todo=3, num_elements=20)
    assert time.perf_counter() - started < 5  # The stub fails before the service starts.
    with pytest.raises(
        checks.CheckFailed, match=r"2 time\(s\) in mode OFF with 2 workers; found 20"
    ):
        checks.check_through_service(
            lambda dataset, mode, service: dataset, todo=3, num_elements=20
        )


def _shard_split_dataset_fn(num_shards, records_per_shard, *, drop_remainder_split):
    """Hosts split `num_shards` shards of records: by `multi_host` or by `len // hosts`."""
    from utils.lessons.scale_out_reading import multi_host

    shards = [
        tf.reshape(
            tf.cast(
                tf.range(shard * records_per_shard * 3, (shard + 1) * records_per_shard * 3),
                tf.uint8,
            ),
            [records_per_shard, 1, 1, 3],
        )
        for shard in range(num_shards)
    ]

    def dataset_fn(input_context):
        hosts, index = input_context.num_input_pipelines, input_context.input_pipeline_id
        if drop_remainder_split:
            per_host = num_shards // hosts
            mine = list(range(num_shards))[index * per_host : (index + 1) * per_host]
        else:
            mine = multi_host.shards_for_host(
                list(range(num_shards)), host_index=index, num_hosts=hosts
            )
        images = tf.concat([shards[i] for i in mine], axis=0)
        dataset = tf.data.Dataset.from_tensor_slices((images, tf.zeros([len(images)])))
        return dataset.batch(input_context.get_per_replica_batch_size(8))

    return dataset_fn


def test_check_dataset_fn_split_by_floor_division_fails_on_hosts_that_leave_a_remainder(capsys):
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 2 \(dataset_fn\): expected the 3 host\(s\) to read all 40 records "
        r"together; found 30\. 4 shards do not split evenly over 3 hosts",
    ):
        checks.check_dataset_fn(
            _shard_split_dataset_fn(4, 10, drop_remainder_split=True),
            todo=2,
            num_records=40,
            global_batch_size=8,
            num_shards=4,
        )
    checks.check_dataset_fn(
        _shard_split_dataset_fn(4, 10, drop_remainder_split=False),
        todo=2,
        num_records=40,
        global_batch_size=8,
        num_shards=4,
    )
    assert capsys.readouterr().out == (
        "TODO 2 passed: 1 host reads all 40 records; 2 hosts read disjoint halves, together "
        "every record once, and so do hosts that share the shards unevenly, in batches of 4.\n"
    )


def _copies_for_off(dataset, mode, service):
    """Right counts without the service: each element twice for OFF, once otherwise."""
    return dataset.repeat(2) if mode == tf.data.experimental.service.ShardingPolicy.OFF else dataset


def _service_then_copies(dataset, mode, service):
    """Through the service, always in "distributed_epoch", then copied for OFF."""
    distribute = tf.data.experimental.service.distribute("distributed_epoch", service=service)
    return dataset.repeat(2 if mode != "distributed_epoch" else 1).apply(distribute)


@pytest.mark.parametrize(
    "through_service, found",
    [
        (_copies_for_off, "['RangeDataset', 'RepeatDataset']"),
        (_service_then_copies, "it sent in another processing mode"),
    ],
    ids=["repeat(2), no service", "repeat(2), then distributed_epoch"],
)
def test_check_through_service_fails_copies_made_outside_the_service(through_service, found):
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_through_service(through_service, todo=3, num_elements=20)
    assert str(failure.value) == (
        "TODO 3 (through_service): expected the dataset run by the service in mode OFF, and "
        "nothing after it (the steps ['DataServiceDatasetV4', 'ParallelMapDatasetV2']); found "
        f"{found}. Apply tf.data.experimental.service.distribute(processing_mode="
        "processing_mode, service=service) to the dataset, and return what it gives."
    )


def test_check_through_service_passes_the_dataset_sent_to_the_service(capsys):
    def through_service(dataset, processing_mode, service):
        distribute = tf.data.experimental.service.distribute(processing_mode, service=service)
        return dataset.apply(distribute).with_options(tf.data.Options())

    checks.check_through_service(through_service, todo=3, num_elements=20)
    assert capsys.readouterr().out == (
        "TODO 3 passed: with 2 workers, OFF gave each of 20 elements twice, 'distributed_epoch' "
        "once.\n"
    )
