"""Tests of tools/course_benchmark/read_routing.py."""

import tensorflow as tf

from tools.course_benchmark import read_routing
from utils import storage


def test_routing_tf_read_file_sends_library_reads_through_the_storage(small_flowers):
    paths = sorted(str(p) for p in small_flowers.glob("*/*.jpg"))[:3]
    original = tf.io.read_file
    simulated = storage.SimulatedStorage(latency_ms=0)
    with read_routing.routing_tf_read_file(simulated) as routed:
        # Looked up while the map is traced, as a library's own call to it is.
        dataset = tf.data.Dataset.from_tensor_slices(paths).map(lambda p: tf.io.read_file(p))
    assert routed is simulated and tf.io.read_file is original
    assert list(dataset.as_numpy_iterator()) == [open(p, "rb").read() for p in paths]
    assert simulated.num_requests == 3


def test_routing_restores_tf_read_file_when_the_block_raises():
    original = tf.io.read_file
    try:
        with read_routing.routing_tf_read_file(storage.SimulatedStorage(latency_ms=0)):
            raise KeyError("inside")
    except KeyError:
        pass
    assert tf.io.read_file is original
