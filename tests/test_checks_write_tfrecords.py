"""utils/checks/write_tfrecords.py (lab 2): right answers pass, mistakes name the TODO."""

import re
import types

import pytest
import tensorflow as tf

from utils import checks, records, shard_files
from utils.lab import data

# The course's solved functions, copied as a learner would write them: the checks refuse
# the course's own objects (a TODO answered by calling them earns nothing).
_reference_to_example = types.FunctionType(
    records.to_example.__code__, records.to_example.__globals__, "to_example"
)
_reference_write_shard = types.FunctionType(
    shard_files.write_shard.__code__, shard_files.write_shard.__globals__, "write_shard"
)


def test_check_to_example_passes_and_names_the_wrong_feature(capsys):
    checks.check_to_example(_reference_to_example, todo=1, class_names=data.CLASSES)
    assert capsys.readouterr().out == (
        "TODO 1 passed: the record parses with the schema and holds the right values.\n"
    )

    def with_feature(name, feature):
        def to_example(image_jpeg, class_index, original_size, class_names):
            example = _reference_to_example(image_jpeg, class_index, original_size, class_names)
            if feature is None:
                del example.features.feature[name]
            else:
                example.features.feature[name].CopyFrom(feature)
            return example

        return to_example

    def run(function):
        checks.check_to_example(function, todo=1, class_names=data.CLASSES)

    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(to_example\): not done yet"):
        run(lambda *args: ...)
    with pytest.raises(checks.CheckFailed, match=r"expected a feature 'size'"):
        run(with_feature("size", None))
    floats = tf.train.Feature(float_list=tf.train.FloatList(value=[2.0]))
    with pytest.raises(
        checks.CheckFailed, match=r"expected 'class' as int64_list; found float_list.$"
    ):
        run(with_feature("class", floats))
    resized = tf.train.Feature(int64_list=tf.train.Int64List(value=[192, 192]))
    with pytest.raises(checks.CheckFailed, match=r"expected size=\[300, 400\]; found \[192, 192\]"):
        run(with_feature("size", resized))
    with pytest.raises(checks.CheckFailed, match=r"found a dict"):
        run(lambda *args: {"image": b""})


def _write_to_final_name(serialized_examples, output_dir, index):
    records = list(serialized_examples)
    path = f"{output_dir}/{shard_files.shard_name(index, len(records))}"
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    return path


def _write_streaming_to_final_name(serialized_examples, output_dir, index):
    path = f"{output_dir}/{shard_files.shard_name(index, 5)}"
    with tf.io.TFRecordWriter(path) as writer:
        for record in serialized_examples:
            writer.write(record)
    return path


def test_check_write_shard_passes_on_the_safe_writer(capsys):
    checks.check_write_shard(_reference_write_shard, todo=2)
    assert capsys.readouterr().out == (
        "TODO 2 passed: flowers03-5.tfrec holds its 5 records, written twice over; an "
        "interrupted write leaves no finished-looking shard.\n"
    )


def _safe_writer(rename):
    def write_shard(serialized_examples, output_dir, index):
        temporary = shard_files.temporary_path(output_dir, index)
        num_records = 0
        with tf.io.TFRecordWriter(temporary) as writer:
            for record in serialized_examples:
                writer.write(record)
                num_records += 1
        final_path = f"{output_dir}/{shard_files.shard_name(index, num_records)}"
        rename(temporary, final_path)
        return final_path

    return write_shard


def test_check_write_shard_accepts_other_renames_and_a_path_object(capsys):
    import os
    from pathlib import Path

    for rename in (os.replace, os.rename, lambda a, b: Path(a).replace(b)):
        checks.check_write_shard(_safe_writer(rename), todo=2)
        assert capsys.readouterr().out.startswith("TODO 2 passed")
    as_path = _safe_writer(os.replace)
    checks.check_write_shard(lambda *args: Path(as_path(*args)), todo=2)
    assert capsys.readouterr().out.startswith("TODO 2 passed")


def test_check_write_shard_without_overwrite_fails_on_the_second_run():
    # Passes in a fresh folder; the lab run again finds the shard there.
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 2 \(write_shard\): expected the shard written again when the lab runs a "
        r"second time; writing flowers03-5.tfrec into a folder that already holds it fails: "
        r".*\. Replace the old shard: tf.io.gfile.rename\(temporary, final_path, "
        r"overwrite=True\)\.$",
    ):
        checks.check_write_shard(_safe_writer(tf.io.gfile.rename), todo=2)

    def keep_the_old(temporary, final_path):  # Skips the rename: the old shard stays.
        if not tf.io.gfile.exists(final_path):
            tf.io.gfile.rename(temporary, final_path)
        else:
            tf.io.gfile.remove(temporary)

    with pytest.raises(
        checks.CheckFailed,
        match=r"expected the 5 new records of a second run of the lab; found \[b'record 0'",
    ):
        checks.check_write_shard(_safe_writer(keep_the_old), todo=2)


def test_check_write_shard_count_and_len_mistakes():
    def off_by_one(serialized_examples, output_dir, index):  # The last index, not the count.
        temporary = shard_files.temporary_path(output_dir, index)
        with tf.io.TFRecordWriter(temporary) as writer:
            for count, record in enumerate(serialized_examples):  # noqa: B007
                writer.write(record)
        final_path = f"{output_dir}/{shard_files.shard_name(index, count)}"
        tf.io.gfile.rename(temporary, final_path, overwrite=True)
        return final_path

    with pytest.raises(
        checks.CheckFailed,
        match=r"expected a shard named flowers03-5.tfrec; found flowers03-4.tfrec\. Its name "
        r"holds the number of records written\.$",
    ):
        checks.check_write_shard(off_by_one, todo=2)

    def with_len(serialized_examples, output_dir, index):
        final_path = f"{output_dir}/{shard_files.shard_name(index, len(serialized_examples))}"
        return final_path

    with pytest.raises(checks.CheckFailed, match=r"read once and without len\(\) \(a generator\)"):
        checks.check_write_shard(with_len, todo=2)


def test_check_write_shard_failures():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(write_shard\): not done yet"):
        checks.check_write_shard(lambda *args: ..., todo=2)
    with pytest.raises(checks.CheckFailed, match=r"no file existed while they came"):
        checks.check_write_shard(_write_to_final_name, todo=2)
    with pytest.raises(checks.CheckFailed, match=r"left \['flowers00-5.tfrec'\], which looks"):
        checks.check_write_shard(_write_streaming_to_final_name, todo=2)

    def no_rename(serialized_examples, output_dir, index):
        path = shard_files.temporary_path(output_dir, index)
        with tf.io.TFRecordWriter(path) as writer:
            for record in serialized_examples:
                writer.write(record)
        return path

    with pytest.raises(checks.CheckFailed, match=r"expected a shard named flowers03-5.tfrec"):
        checks.check_write_shard(no_rename, todo=2)


def _to_example_with(name, make_feature):
    """The reference `to_example`, but feature `name` built by `make_feature(...)`."""

    def to_example(*args):
        features = dict(_reference_to_example(*args).features.feature)
        features[name] = make_feature(*args)
        return tf.train.Example(features=tf.train.Features(feature=features))

    return to_example


EXPECTED = (
    "TODO 1 (to_example): expected a tf.train.Example with the features image, class, label, "
    "size, one_hot_class; found "
)


def test_check_to_example_explains_the_likeliest_mistakes():
    def failure(to_example):
        with pytest.raises(checks.CheckFailed) as failed:
            checks.check_to_example(to_example, todo=1, class_names=data.CLASSES)
        return str(failed.value)

    bytes_list, int64_list = tf.train.BytesList, tf.train.Int64List
    not_a_list = _to_example_with(
        "image", lambda jpeg, *_: tf.train.Feature(bytes_list=bytes_list(value=jpeg))
    )
    assert failure(not_a_list) == EXPECTED + (
        "an error: expected bytes, int found. A feature holds a list: "
        "BytesList(value=[image_jpeg]), not value=image_jpeg (bytes taken one by one are ints)."
    )
    index_not_a_list = _to_example_with(
        "class", lambda _, index, *__: tf.train.Feature(int64_list=int64_list(value=index))
    )
    assert failure(index_not_a_list).endswith(
        "A feature holds a list: Int64List(value=[class_index]), not value=class_index."
    )
    text = _to_example_with(
        "label",
        lambda _, index, __, names: tf.train.Feature(bytes_list=bytes_list(value=[names[index]])),
    )
    assert failure(text) == EXPECTED + (
        "an error: expected bytes, str found. A bytes_list holds bytes, not text: encode the "
        "class name (class_names[class_index].encode())."
    )

    def a_dict(image_jpeg, *_):
        image = tf.train.Feature(bytes_list=bytes_list(value=[image_jpeg]))
        return tf.train.Example(features={"image": image})

    assert failure(a_dict) == EXPECTED + (
        'an error: Protocol message Features has no "image" field. tf.train.Example takes '
        "features=tf.train.Features(feature=<your dict>), not the dict itself."
    )
    resized = _to_example_with(
        "size", lambda *_: tf.train.Feature(int64_list=int64_list(value=[192, 192]))
    )
    assert failure(resized) == (
        "TODO 1 (to_example): expected size=[300, 400]; found [192, 192]. It holds "
        "original_size: the image's (height, width) BEFORE resizing."
    )
    assert failure(lambda *args: _reference_to_example(*args).SerializeToString()) == EXPECTED + (
        "a bytes. Return the Example itself, not its bytes."
    )


def _renamed_inside_the_with_block(rename_name):
    """The likeliest wrong answer: the rename inside the writer's `with` block, the writer
    still open (its buffered bytes not yet in the file)."""

    def write_shard(serialized_examples, output_dir, index):
        import os

        temporary = shard_files.temporary_path(output_dir, index)
        num_records = 0
        with tf.io.TFRecordWriter(temporary) as writer:
            for record in serialized_examples:
                writer.write(record)
                num_records += 1
            final_path = f"{output_dir}/{shard_files.shard_name(index, num_records)}"
            if rename_name == "gfile":
                tf.io.gfile.rename(temporary, final_path, overwrite=True)
            else:
                os.replace(temporary, final_path)
        return final_path

    return write_shard


@pytest.mark.parametrize("rename_name", ["gfile", "os.replace"])
def test_check_write_shard_fails_a_rename_inside_the_writers_with_block(rename_name):
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_write_shard(_renamed_inside_the_with_block(rename_name), todo=2)
    assert re.fullmatch(
        r"TODO 2 \(write_shard\): expected a whole shard under its final name at every "
        r"instant; found the file renamed with \d+ of its \d+ bytes written: the writer was "
        r"still open\. Rename after the with block, once the writer is closed\.",
        str(failure.value),
    )


def test_check_write_shard_passes_a_writer_closed_by_hand_then_renamed(capsys):
    """Another right answer: the writer closed with close(), then tf.io.gfile.rename."""

    def write_shard(serialized_examples, output_dir, index):
        temporary = shard_files.temporary_path(output_dir, index)
        writer = tf.io.TFRecordWriter(temporary)
        count = 0
        for record in serialized_examples:
            writer.write(record)
            count += 1
        writer.close()
        final_path = f"{output_dir}/{shard_files.shard_name(index, count)}"
        tf.io.gfile.rename(temporary, final_path, overwrite=True)
        return final_path

    checks.check_write_shard(write_shard, todo=2)
    assert capsys.readouterr().out.startswith("TODO 2 passed")


def test_check_to_example_refuses_the_courses_own_copy():
    """Calling records.to_example, by its name, an alias or an earlier import: 0 points."""
    from utils.records import to_example as imported_earlier

    def by_name(*args):
        return records.to_example(*args)

    message = (
        "TODO 1 (to_example): expected an Example your code builds; found a call to "
        "records.to_example, the course's solved copy, which earns nothing here. Build it "
        "with tf.train.Example."
    )
    for answer in (by_name, records.to_example, lambda *args: imported_earlier(*args)):
        with pytest.raises(checks.CheckFailed) as failure:
            checks.check_to_example(answer, todo=1, class_names=data.CLASSES)
        assert str(failure.value) == message
    assert records.to_example(b"x", 0, [1, 1], ["a"]).features.feature["class"]  # Restored.


def test_check_write_shard_refuses_the_courses_own_copy():
    def by_name(serialized_examples, output_dir, index):
        return shard_files.write_shard(serialized_examples, output_dir, index)

    for answer in (by_name, shard_files.write_shard):
        with pytest.raises(checks.CheckFailed) as failure:
            checks.check_write_shard(answer, todo=2)
        assert str(failure.value) == (
            "TODO 2 (write_shard): expected a shard your code writes; found a call to "
            "shard_files.write_shard, the course's solved copy, which earns nothing here. "
            "Write it with tf.io.TFRecordWriter."
        )


def test_check_to_example_passes_right_answers_written_otherwise(capsys):
    """The one-hot from tf.one_hot, the features made one by one in another order, and the
    label encoded with bytes(); then the Example parsed from its own bytes."""

    def one_by_one(image_jpeg, class_index, original_size, class_names):
        example = tf.train.Example()
        feature = example.features.feature
        one_hot = tf.one_hot(class_index, len(class_names)).numpy().tolist()
        feature["one_hot_class"].float_list.value.extend(one_hot)
        feature["size"].int64_list.value.extend([int(v) for v in original_size])
        feature["label"].bytes_list.value.append(bytes(class_names[class_index], "utf-8"))
        feature["class"].int64_list.value.append(class_index)
        feature["image"].bytes_list.value.append(image_jpeg)
        return example

    def round_trip(*args):
        return tf.train.Example.FromString(one_by_one(*args).SerializeToString())

    for answer in (one_by_one, round_trip):
        checks.check_to_example(answer, todo=1, class_names=data.CLASSES)
    assert capsys.readouterr().out.count("TODO 1 passed") == 2
