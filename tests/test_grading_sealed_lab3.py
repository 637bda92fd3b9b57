"""Lab 3's TODO 2 in the judge: `read_shards` called again with another `num_parallel_reads`
(issue 61: a function that ignores its argument fails) crosses as the graph the kernel
traces over a placeholder of the check's dataset, its storage waits bound to the judge's."""

import json

import pytest
import tensorflow as tf

from tests.test_grading_sealed_labs_2_9 import _Kernel
from tools.grading.judge import remote
from tools.grading.kernel.inside import answers, wire
from utils import checks, storage
from utils.lab import shard_cache


class _LabKernel(_Kernel):
    """The kernel's side with the lab's own names in its namespace (its storage)."""

    def __init__(self, work, namespace):
        super().__init__(work)
        self.lab_namespace = namespace

    def ask(self, **request):
        reply = answers.answer(json.loads(wire.dumps(request)), self.lab_namespace)
        return json.loads(json.dumps(reply))


@pytest.fixture(scope="module")
def shards(small_source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    return shard_cache.ensure_shards(small_source, folder, target_size=32, num_shards=4)


def _reader(learners, ignores_argument):
    def read_shards(filenames, num_parallel_reads=4):
        reads = 4 if ignores_argument else num_parallel_reads
        return filenames.interleave(
            learners.open_tfrecord,
            cycle_length=reads,
            num_parallel_calls=reads,
            deterministic=False,
        )

    return read_shards


def test_read_shards_traced_for_the_judge_names_the_storage_its_waits_need(tmp_path):
    """The kernel traces `read_shards` over a placeholder of the check's dataset; the storage's
    waits in that graph are named by the notebook's name for the storage, which the judge
    binds to its own (before, the trace named none, and the call was refused as "Python
    code of its own")."""
    learners = storage.SimulatedStorage(latency_ms=20)
    kernel = _LabKernel(tmp_path, {"simulated_storage": learners})
    kernel.keep(2, read_shards=_reader(learners, False))
    names = tf.data.Dataset.from_tensor_slices(["a.tfrec"])
    answer = kernel.ask(
        op="trace_datasets",
        todo=2,
        name="read_shards",
        args=[{"dataset": wire.encode(names.element_spec)}, {"value": wire.encode(3)}],
    )
    roles = [role for role in answer["roles"].values()]
    assert roles and all(role[:2] == ["object", "simulated_storage"] for role in roles)


def test_read_shards_called_again_in_the_judge_passes_a_right_answer(tmp_path, shards, capsys):
    """In one process the judge's import of the kernel's functions meets their first
    definitions (two processes in the grader): the check's second call is skipped, never
    failed, where it cannot be made."""
    learners = judges = storage.SimulatedStorage(latency_ms=20)
    kernel = _LabKernel(tmp_path, {"simulated_storage": learners})
    kernel.keep(2, read_shards=_reader(learners, False))
    judged = remote.RemoteFunction(kernel, 2, "read_shards", {"simulated_storage": judges})
    records = _reader(judges, False)(tf.data.Dataset.from_tensor_slices(shards.paths))
    checks.check_read_shards(
        records, todo=2, storage=judges, shards=shards, num_parallel_reads=4, read_shards=judged
    )
    assert capsys.readouterr().out.startswith("TODO 2 passed")
