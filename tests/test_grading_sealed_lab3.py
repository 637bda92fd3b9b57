"""Lab 3's TODO 2 in the judge: the check calls `read_shards` itself (and again with another
`num_parallel_reads`: issue 61, a function that ignores its argument fails); each call crosses
as the graph the kernel traces over a placeholder of the check's dataset, its storage waits
bound to the judge's. The calls themselves are graded end to end, in two processes as the
grader runs them, in test_grading_sealed_answers (one process meets its own definitions)."""

import json

import pytest
import tensorflow as tf

from tests.test_grading_sealed_labs_2_9 import _Kernel
from tools.grading.kernel.inside import answers, wire
from utils import storage
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
