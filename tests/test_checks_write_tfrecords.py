"""utils/checks/write_tfrecords.py (lab 2): right answers pass, mistakes name the TODO."""

import pytest
import tensorflow as tf

from utils import checks, records
from utils.lab import data, shard_files


@pytest.fixture
def sample_images(small_flowers):
    paths = sorted(str(p) for p in small_flowers.glob("*/*.jpg"))
    return [tf.io.decode_jpeg(tf.io.read_file(p), channels=3).numpy() for p in paths[::12]]


def test_check_resize_and_crop_passes_on_reference_and_other_methods(sample_images, capsys):
    checks.check_resize_and_crop(
        records.resize_and_crop, todo=1, sample_images=sample_images, target_size=64
    )
    assert capsys.readouterr().out == (
        "TODO 1 passed: 5 images resized and cropped to uint8 image of shape (64, 64, 3).\n"
    )

    def keras_crop(image, size):  # Crop to a square, then resize: the same picture.
        resizing = tf.keras.layers.Resizing(size, size, crop_to_aspect_ratio=True, antialias=True)
        resized = resizing(image)
        return tf.saturate_cast(tf.round(resized), tf.uint8)

    checks.check_resize_and_crop(keras_crop, todo=1, sample_images=sample_images, target_size=64)


def test_check_resize_and_crop_failures(sample_images):
    def run(function):
        checks.check_resize_and_crop(function, todo=1, sample_images=sample_images, target_size=64)

    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(resize_and_crop\): not done yet"):
        run(lambda image, size: ...)
    with pytest.raises(checks.CheckFailed, match=r"found float32 of shape \(64, 64, 3\)"):
        run(lambda image, size: tf.image.resize(image, [size, size]))
    with pytest.raises(checks.CheckFailed, match=r"Cut the centre square, its side the SHORTER"):
        run(lambda image, size: tf.saturate_cast(tf.image.resize(image, [size, size]), tf.uint8))
    with pytest.raises(checks.CheckFailed, match=r"Cut the centre square, its side the SHORTER"):
        run(lambda image, size: tf.image.resize_with_crop_or_pad(image, size, size))
    with pytest.raises(checks.CheckFailed, match=r"TensorFlow ops"):
        run(lambda image, size: tf.constant(image.numpy()[:size, :size]))


def test_check_resize_and_crop_scale_from_the_height_fails_on_a_tall_copy(sample_images, capsys):
    wide = [image[: image.shape[0] // 2] for image in sample_images]  # All landscape.

    def by_height(image, size):  # Right for landscape images only.
        height_width = tf.cast(tf.shape(image)[:2], tf.float32)
        new_size = tf.cast(tf.round(height_width * size / height_width[0]), tf.int32)
        resized = tf.image.resize(image, new_size, antialias=True)
        cropped = tf.image.resize_with_crop_or_pad(resized, size, size)
        return tf.saturate_cast(tf.round(cropped), tf.uint8)

    with pytest.raises(
        checks.CheckFailed, match=r"Cut the centre square, its side the SHORTER of height and width"
    ):
        checks.check_resize_and_crop(by_height, todo=1, sample_images=wide, target_size=64)

    def plain_cast(image, size):  # tf.cast instead of saturate_cast(round()): right too.
        return tf.cast(records.resize_and_crop(image, size), tf.float32) + 0.4

    checks.check_resize_and_crop(
        lambda image, size: tf.cast(plain_cast(image, size), tf.uint8),
        todo=1,
        sample_images=wide,
        target_size=64,
    )
    assert capsys.readouterr().out.startswith("TODO 1 passed: 5 images resized")


def test_check_resize_and_crop_without_antialias_is_caught(sample_images):
    def without_antialias(image, size):  # The lab's solution but for antialias=True.
        height_width = tf.cast(tf.shape(image)[:2], tf.float32)
        new_size = tf.cast(tf.round(height_width * size / tf.reduce_min(height_width)), tf.int32)
        cropped = tf.image.resize_with_crop_or_pad(tf.image.resize(image, new_size), size, size)
        return tf.saturate_cast(tf.round(cropped), tf.uint8)

    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_resize_and_crop(
            without_antialias, todo=1, sample_images=sample_images, target_size=64
        )
    assert str(failure.value) == (
        "TODO 1 (resize_and_crop): expected a resize with antialias=True; found one without. "
        "Shrinking a 256-px image to 64 px then reads 1 pixel in 4 and turns fine detail into "
        "noise (aliasing): the model trains on artefacts that the photos do not have. Pass "
        "antialias=True to tf.image.resize."
    )


def test_check_recompress_without_optimize_size_is_caught(sample_images):
    resized = [records.resize_and_crop(tf.constant(i), 64).numpy() for i in sample_images]

    def without_optimize_size(image, quality):
        return tf.io.encode_jpeg(image, quality=quality)

    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_recompress(without_optimize_size, todo=2, sample_images=resized, quality=90)
    plain = sum(len(without_optimize_size(i, 90).numpy()) for i in resized)
    optimized = sum(len(records.recompress(tf.constant(i), 90).numpy()) for i in resized)
    assert plain > optimized  # What the check is about: the same pixels in more bytes.
    assert str(failure.value) == (
        f"TODO 2 (recompress): expected optimize_size=True; without it the same pixels take "
        f"{plain / optimized - 1:.0%} more bytes ({plain / 5:,.0f} instead of "
        f"{optimized / 5:,.0f} per image), which storage sends again on every epoch. Pass "
        "optimize_size=True to tf.io.encode_jpeg."
    )


def test_check_recompress_passes_and_fails(sample_images, capsys):
    resized = [records.resize_and_crop(tf.constant(i), 64).numpy() for i in sample_images]
    checks.check_recompress(records.recompress, todo=2, sample_images=resized, quality=90)
    assert capsys.readouterr().out.startswith("TODO 2 passed: 5 images recompressed to JPEG")
    checks.check_recompress(  # Another right answer: the same op under its other name.
        lambda image, quality: tf.image.encode_jpeg(image, "rgb", quality, optimize_size=True),
        todo=2,
        sample_images=resized,
        quality=90,
    )

    def run(function):
        checks.check_recompress(function, todo=2, sample_images=resized, quality=90)

    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(recompress\): not done yet"):
        run(lambda image, quality: ...)
    with pytest.raises(checks.CheckFailed, match=r"expected JPEG at quality 90; .* Pass quality"):
        run(lambda image, quality: tf.io.encode_jpeg(image, quality=50))
    with pytest.raises(checks.CheckFailed, match=r"they do not decode"):
        run(lambda image, quality: tf.io.serialize_tensor(image))
    with pytest.raises(checks.CheckFailed, match=r"they decode to another"):
        run(lambda image, quality: tf.io.encode_jpeg(255 - image, quality=quality))


def test_check_to_example_passes_and_names_the_wrong_feature(capsys):
    checks.check_to_example(records.to_example, todo=3, class_names=data.CLASSES)
    assert capsys.readouterr().out == (
        "TODO 3 passed: the record parses with the schema and holds the right values.\n"
    )

    def with_feature(name, feature):
        def to_example(image_jpeg, class_index, original_size, class_names):
            example = records.to_example(image_jpeg, class_index, original_size, class_names)
            if feature is None:
                del example.features.feature[name]
            else:
                example.features.feature[name].CopyFrom(feature)
            return example

        return to_example

    def run(function):
        checks.check_to_example(function, todo=3, class_names=data.CLASSES)

    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(to_example\): not done yet"):
        run(lambda *args: ...)
    with pytest.raises(checks.CheckFailed, match=r"expected a feature 'size'"):
        run(with_feature("size", None))
    floats = tf.train.Feature(float_list=tf.train.FloatList(value=[2.0]))
    with pytest.raises(checks.CheckFailed, match=r"expected 'class' to be a int64_list; found a"):
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
    checks.check_write_shard(shard_files.write_shard, todo=4)
    assert capsys.readouterr().out == (
        "TODO 4 passed: flowers03-5.tfrec holds its 5 records, written twice over; an "
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
        checks.check_write_shard(_safe_writer(rename), todo=4)
        assert capsys.readouterr().out.startswith("TODO 4 passed")
    as_path = _safe_writer(os.replace)
    checks.check_write_shard(lambda *args: Path(as_path(*args)), todo=4)
    assert capsys.readouterr().out.startswith("TODO 4 passed")


def test_check_write_shard_without_overwrite_fails_on_the_second_run():
    # Passes in a fresh folder; the lab run again finds the shard there.
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 4 \(write_shard\): expected the shard written again when the lab runs a "
        r"second time; writing flowers03-5.tfrec into a folder that already holds it fails: "
        r".*\. Replace the old shard: tf.io.gfile.rename\(temporary, final_path, "
        r"overwrite=True\)\.$",
    ):
        checks.check_write_shard(_safe_writer(tf.io.gfile.rename), todo=4)

    def keep_the_old(temporary, final_path):  # Skips the rename: the old shard stays.
        if not tf.io.gfile.exists(final_path):
            tf.io.gfile.rename(temporary, final_path)
        else:
            tf.io.gfile.remove(temporary)

    with pytest.raises(
        checks.CheckFailed,
        match=r"expected the 5 new records of a second run of the lab; found \[b'record 0'",
    ):
        checks.check_write_shard(_safe_writer(keep_the_old), todo=4)


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
        checks.check_write_shard(off_by_one, todo=4)

    def with_len(serialized_examples, output_dir, index):
        final_path = f"{output_dir}/{shard_files.shard_name(index, len(serialized_examples))}"
        return final_path

    with pytest.raises(checks.CheckFailed, match=r"read once and without len\(\) \(a generator\)"):
        checks.check_write_shard(with_len, todo=4)


def test_check_write_shard_failures():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 4 \(write_shard\): not done yet"):
        checks.check_write_shard(lambda *args: ..., todo=4)
    with pytest.raises(checks.CheckFailed, match=r"no file existed while they came"):
        checks.check_write_shard(_write_to_final_name, todo=4)
    with pytest.raises(checks.CheckFailed, match=r"left \['flowers00-5.tfrec'\], which looks"):
        checks.check_write_shard(_write_streaming_to_final_name, todo=4)

    def no_rename(serialized_examples, output_dir, index):
        path = shard_files.temporary_path(output_dir, index)
        with tf.io.TFRecordWriter(path) as writer:
            for record in serialized_examples:
                writer.write(record)
        return path

    with pytest.raises(checks.CheckFailed, match=r"expected a shard named flowers03-5.tfrec"):
        checks.check_write_shard(no_rename, todo=4)
