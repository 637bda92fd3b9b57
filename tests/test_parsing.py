"""utils/lessons/read_tfrecords/parsing.py: what lab 3's reader adds to parsing alone."""

import tensorflow as tf

from utils.lessons.read_tfrecords import parsing, solved_reader

CLASSES = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
FEATURES = {  # Lab 3's solution.
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}


def test_describe_parsing_shows_the_default_the_sparse_label_and_the_static_shape(
    write_small_shards,
):
    (path, *_) = write_small_shards(2)
    read_tfrecord, _ = solved_reader.lab3_reader(32, CLASSES)
    assert parsing.describe_parsing(FEATURES, read_tfrecord, str(path)) == (
        'A record without "size" parses to size [0, 0]; "one_hot_class" parses to a '
        "SparseTensor.\n"
        "Image shape known before reading: decoded (None, None, 3); "
        "from read_tfrecord (32, 32, 3)."
    )


def test_describe_parsing_shows_another_default_and_a_dense_label(write_small_shards):
    (path, *_) = write_small_shards(2)
    read_tfrecord, _ = solved_reader.lab3_reader(32, CLASSES)
    features = FEATURES | {
        "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[-1, -1]),
        "one_hot_class": tf.io.FixedLenFeature([5], tf.float32),
    }
    first_line = parsing.describe_parsing(features, read_tfrecord, str(path)).splitlines()[0]
    assert first_line == (
        'A record without "size" parses to size [-1, -1]; "one_hot_class" parses to a dense Tensor.'
    )


def test_describe_parsing_says_what_a_record_without_size_does_for_every_declaration(
    write_small_shards,
):
    """Features the check accepts without "size", or "size" without a default: a line for
    each, never an error in the cell after TODO 1's check."""
    (path, *_) = write_small_shards(2)
    read_tfrecord, _ = solved_reader.lab3_reader(32, CLASSES)
    no_size = {key: FEATURES[key] for key in ("image", "one_hot_class")}
    assert parsing.describe_parsing(no_size, read_tfrecord, str(path)).splitlines()[0] == (
        'Your features leave "size" out: a record without it parses all the same; '
        '"one_hot_class" parses to a SparseTensor.'
    )
    no_default = FEATURES | {"size": tf.io.FixedLenFeature([2], tf.int64)}
    assert parsing.describe_parsing(no_default, read_tfrecord, str(path)).splitlines()[0] == (
        'A record without "size" fails to parse: it has no default_value; '
        '"one_hot_class" parses to a SparseTensor.'
    )
