"""Checks for lesson 7: host cores needed, per-host sharding, the tf.data service."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    OPTIONS_ONLY_OPS,
    dataset_steps,
    fail,
    first_line,
    passed,
    require_result,
)
from utils.lessons.scale_out_reading import multi_host


def check_host_cores(host_cores_needed: Callable, *, todo: int) -> None:
    """Checks `host_cores_needed(images_per_second, images_per_second_per_core)`.

    The answer is a whole number of cores, rounded up, on a few rates.

    Args:
        host_cores_needed: the learner's function, called eagerly.
        todo: the TODO's number, named in every message.

    Raises:
        CheckFailed: naming the TODO and the rate, when an answer is not the cores
            needed, rounded up to a whole number.

    Example:
        checks.check_host_cores(host_cores_needed, todo=1)
    """
    __tracebackhide__ = True
    name = "host_cores_needed"
    cases = [(1000.0, 300.0, 4), (600.0, 300.0, 2), (10.0, 300.0, 1), (5000.0, 1250.0, 4)]
    for rate, per_core, expected in cases:
        try:
            result = host_cores_needed(rate, per_core)
        except CHECK_ERRORS as error:
            fail(
                todo,
                name,
                f"expected a whole number of cores; found an error: {first_line(error)}",
            )
        require_result(result, todo, name, "a whole number of cores")
        if result != expected or not float(result).is_integer():
            fail(
                todo,
                name,
                f"expected {expected} cores for {rate:g} images/s at {per_core:g} "
                f"images/s per core; found {result!r}. A part of a core is a whole "
                f"core to book: round up (math.ceil).",
            )
    passed(todo, f"{len(cases)} rates give the whole cores they need, rounded up.")


def _host_records(
    dataset_fn: Callable, num_hosts: int, host_index: int, todo: int, name: str, num_replicas: int
) -> tuple[list[str], int | None]:
    """Runs the learner's dataset_fn as host `host_index` of `num_hosts`; returns (ids, batch)."""
    __tracebackhide__ = True
    context = tf.distribute.InputContext(
        num_input_pipelines=num_hosts,
        input_pipeline_id=host_index,
        num_replicas_in_sync=num_replicas,
    )
    try:
        dataset = dataset_fn(context)
        require_result(dataset, todo, name, "a tf.data.Dataset of this host's batches")
        if not isinstance(dataset, tf.data.Dataset):
            fail(todo, name, f"expected a tf.data.Dataset; found a {type(dataset).__name__}.")
        ids, first_batch = [], None
        for images, _ in dataset.as_numpy_iterator():
            first_batch = first_batch or len(images)
            ids += [multi_host.record_id(image) for image in images]
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected this host's batches; found an error as host {host_index} "
            f"of {num_hosts}: {first_line(error)}",
        )
    return ids, first_batch


def check_dataset_fn(
    dataset_fn: Callable,
    *,
    todo: int,
    num_records: int,
    global_batch_size: int,
    num_shards: int | None = None,
) -> None:
    """Runs `dataset_fn(input_context)` as each host of 1, of 2, and of a count that leaves
    a remainder.

    The hosts must read disjoint parts that together hold every record once, in
    per-replica batches. With `num_shards`, it also runs as each of the fewest hosts that
    do not divide the shards (3 of 4 shards): a split by `len(shards) // num_hosts` drops
    the remainder there. That count is checked for records only (its batch size need not
    divide the global batch).

    Args:
        dataset_fn: the learner's function of a `tf.distribute.InputContext`.
        todo: the TODO's number, named in every message.
        num_records: the records the hosts must read together.
        global_batch_size: the batch of all replicas together.
        num_shards: the shards the hosts share; None: only 1 and 2 hosts are tried.

    Raises:
        CheckFailed: naming the TODO, when a host's batches are not per replica, a
            record is read twice, or the hosts miss records.

    Example:
        checks.check_dataset_fn(dataset_fn, todo=2, num_records=3670, global_batch_size=64,
                                num_shards=16)
    """
    __tracebackhide__ = True
    name = "dataset_fn"
    uneven = [n for n in range(3, (num_shards or 0) + 1) if num_shards % n][:1]
    for num_hosts in (1, 2, *uneven):
        batched = num_hosts in (1, 2)
        seen = {}
        for host_index in range(num_hosts):
            ids, first_batch = _host_records(
                dataset_fn, num_hosts, host_index, todo, name, num_hosts if batched else 1
            )
            expected_batch = global_batch_size // num_hosts
            if batched and first_batch != expected_batch:
                fail(
                    todo,
                    name,
                    f"expected batches of {expected_batch} on each of {num_hosts} hosts "
                    f"(global batch {global_batch_size}); found {first_batch}. Use "
                    "input_context.get_per_replica_batch_size().",
                )
            for record in ids:
                seen[record] = seen.get(record, 0) + 1
        repeated = sum(1 for count in seen.values() if count > 1)
        if repeated:
            fail(
                todo,
                name,
                f"expected each record read by one host only; found {repeated} of "
                f"{num_records} read more than once with {num_hosts} hosts. Give each host "
                "its own shards with multi_host.shards_for_host().",
            )
        if len(seen) != num_records:
            hint = (
                f" {num_shards} shards do not split evenly over {num_hosts} hosts: a split by "
                "len(shard_paths) // num_hosts leaves the remainder unread. Use "
                "multi_host.shards_for_host()."
                if not batched
                else ""
            )
            fail(
                todo,
                name,
                f"expected the {num_hosts} host(s) to read all {num_records} records "
                f"together; found {len(seen)}.{hint}",
            )
    half = global_batch_size // 2
    also = ", and so do hosts that share the shards unevenly" if uneven else ""
    passed(
        todo,
        f"1 host reads all {num_records} records; 2 hosts read disjoint halves, "
        f"together every record once{also}, in batches of {half}.",
    )


class _Unsent:
    """Stands in for a dataset: `apply` returns itself without running the transformation."""

    def apply(self, transformation: Callable) -> _Unsent:
        return self


def _stub_probe(through_service: Callable) -> object:
    """Returns what `through_service` gives for a stand-in dataset, no service contacted.

    `tf.data.experimental.service.distribute(...)` only builds a transformation; nothing is
    sent until it is applied to a real dataset. So a done function returns the stand-in, a
    stub returns `...` or None; any error here is left to the real run to report.
    """
    try:
        return through_service(_Unsent(), "distributed_epoch", "grpc://localhost:1")
    except Exception:  # noqa: BLE001 (the real run below reports it, with its message)
        return _Unsent()


def _service_steps(dataset: tf.data.Dataset) -> list | None:
    """The steps of `dataset` (options aside), each op with its service's processing mode."""
    steps = dataset_steps(dataset)
    if steps is None:
        return None
    kept = [step for step in steps if step.op not in OPTIONS_ONLY_OPS]
    return [(s.op, s.constants[1] if s.op.startswith("DataService") else None) for s in kept]


def _require_through_service(
    result: tf.data.Dataset,
    numbers: tf.data.Dataset,
    mode: tf.data.experimental.service.ShardingPolicy | str,
    address: str,
    todo: int,
    label: str,
) -> None:
    """Fails unless `result` is `numbers` sent to the service in `mode`, nothing after it.

    The counts alone pass a dataset copied by `repeat(2)` for OFF: the graph tells, with the
    processing mode the service was given.
    """
    __tracebackhide__ = True
    distribute = tf.data.experimental.service.distribute(processing_mode=mode, service=address)
    found, wanted = _service_steps(result), _service_steps(numbers.apply(distribute))
    if found is None or wanted is None or found == wanted:
        return
    ops = [op for op, _ in found]
    what = "it sent in another processing mode" if ops == [op for op, _ in wanted] else ops
    fail(
        todo,
        "through_service",
        f"expected the dataset run by the service in mode {label}, "
        f"and nothing after it (the steps {[op for op, _ in wanted]}); found {what}. Apply "
        "tf.data.experimental.service.distribute(processing_mode=processing_mode, "
        "service=service) to the dataset, and return what it gives.",
    )


def check_through_service(through_service: Callable, *, todo: int, num_elements: int = 100) -> None:
    """Runs `through_service(dataset, processing_mode, service)` on 2 local workers.

    `OFF` must give each element once per worker, `"distributed_epoch"` once.

    Args:
        through_service: the learner's function.
        todo: the TODO's number, named in every message.
        num_elements: the size of the dataset sent through the service.

    Raises:
        CheckFailed: naming the TODO and the mode, when the service gives another number
            of copies of each element.

    Example:
        checks.check_through_service(through_service, todo=3)
    """
    __tracebackhide__ = True
    from utils.lessons.scale_out_reading import data_service

    name = "through_service"
    off = tf.data.experimental.service.ShardingPolicy.OFF
    expected = {off: 2, "distributed_epoch": 1}
    # A stub fails here, before 3 processes are started for the service (about 45 s).
    require_result(_stub_probe(through_service), todo, name, "the dataset, run by the service")
    with data_service.LocalCluster(num_workers=2) as cluster:
        for mode, copies in expected.items():
            numbers = tf.data.Dataset.range(num_elements)
            try:
                result = through_service(numbers, mode, cluster.address)
                require_result(result, todo, name, "the dataset, run by the tf.data service")
                elements = list(result.as_numpy_iterator())
            except CHECK_ERRORS as error:
                fail(
                    todo,
                    name,
                    f"expected the dataset run by the service; found an error: {first_line(error)}",
                )
            label = "OFF" if mode is off else repr(mode)
            counts = {element: elements.count(element) for element in set(elements)}
            if len(elements) != copies * num_elements or set(counts.values()) != {copies}:
                hint = (
                    "Pass processing_mode and service on to "
                    "tf.data.experimental.service.distribute() and apply it to the dataset."
                )
                fail(
                    todo,
                    name,
                    f"expected each of {num_elements} elements {copies} time(s) in mode "
                    f"{label} with 2 workers; found {len(elements)} elements. {hint}",
                )
            _require_through_service(result, numbers, mode, cluster.address, todo, label)
    passed(
        todo,
        f"with 2 workers, OFF gave each of {num_elements} elements twice, 'distributed_epoch' "
        "once.",
    )
