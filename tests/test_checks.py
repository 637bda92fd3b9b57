"""Tests of utils/checks.py: each check passes on a right answer and names its TODO otherwise."""

import pytest
import tensorflow as tf

from utils import checks, data, records, shard_files, storage


@pytest.fixture
def paths(small_flowers):
    return sorted(str(p) for p in small_flowers.glob("*/*.jpg"))


@pytest.fixture
def class_names():
    return tf.constant(data.CLASSES)


def _label_from_path(class_names):
    def label_from_path(path):
        folder = tf.strings.split(path, "/")[-2]
        return tf.argmax(tf.cast(class_names == folder, tf.int32))

    return label_from_path


# TODO 1: filenames.
def test_check_filenames_passes_on_shuffled_listing(small_flowers, capsys):
    filenames = tf.data.Dataset.list_files(str(small_flowers / "*" / "*.jpg"), seed=1)
    checks.check_filenames(filenames, todo=1, expected_count=60, class_names=data.CLASSES)
    assert capsys.readouterr().out == "TODO 1 passed: 60 files in 5 class folders.\n"


def test_check_filenames_on_stub_says_todo_1_not_done():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(filenames\): not done yet"):
        checks.check_filenames(..., todo=1, expected_count=60, class_names=data.CLASSES)


def test_check_filenames_wrong_type_and_count(paths):
    with pytest.raises(checks.CheckFailed, match=r"expected a tf.data.Dataset .*; found a list"):
        checks.check_filenames(paths, todo=1, expected_count=60, class_names=data.CLASSES)
    fewer = tf.data.Dataset.from_tensor_slices(paths[:10]).shuffle(10, seed=1)
    with pytest.raises(checks.CheckFailed, match=r"expected 60 paths; found 10"):
        checks.check_filenames(fewer, todo=1, expected_count=60, class_names=data.CLASSES)


def test_check_filenames_sorted_is_not_shuffled(paths):
    ordered = tf.data.Dataset.from_tensor_slices(paths)
    with pytest.raises(checks.CheckFailed, match=r"found them sorted"):
        checks.check_filenames(ordered, todo=1, expected_count=60, class_names=data.CLASSES)


def test_check_filenames_not_string_elements():
    numbers = tf.data.Dataset.range(60)
    with pytest.raises(checks.CheckFailed, match=r"expected elements that are string scalars"):
        checks.check_filenames(numbers, todo=1, expected_count=60, class_names=data.CLASSES)


# TODO 2: label_from_path.
def test_check_label_from_path_passes(paths, class_names, capsys):
    checks.check_label_from_path(
        _label_from_path(class_names), todo=2, sample_paths=paths[::7], class_names=data.CLASSES
    )
    assert capsys.readouterr().out.startswith("TODO 2 passed: 9 labels match")


def test_check_label_from_path_on_stub_says_not_done(paths):
    def label_from_path(path):
        label = ...
        return label

    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(label_from_path\): not done yet"):
        checks.check_label_from_path(
            label_from_path, todo=2, sample_paths=paths[:3], class_names=data.CLASSES
        )


def test_check_label_from_path_wrong_label_names_the_file(paths):
    with pytest.raises(checks.CheckFailed, match=r"expected label 1 \(dandelion\) for .*; found 0"):
        checks.check_label_from_path(
            lambda path: tf.constant(0, tf.int64),
            todo=2,
            sample_paths=[p for p in paths if "/dandelion/" in p][:2],
            class_names=data.CLASSES,
        )


def test_check_label_from_path_python_strings_fail_with_hint(paths):
    def label_from_path(path):
        return data.CLASSES.index(path.numpy().decode().split("/")[-2])

    with pytest.raises(checks.CheckFailed, match=r"computed with TensorFlow ops"):
        checks.check_label_from_path(
            label_from_path, todo=2, sample_paths=paths[:2], class_names=data.CLASSES
        )


def _check_label(label_from_path, paths):
    checks.check_label_from_path(
        label_from_path, todo=2, sample_paths=paths, class_names=data.CLASSES
    )


def test_check_label_from_path_partly_done_is_not_done_from_the_value(paths, class_names):
    def label_from_path(path):
        tf.strings.split(path, "/")[-2]  # Started, not finished.
        label = ...
        return label

    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 2 \(label_from_path\): not done yet: it returns Ellipsis\.",
    ):
        _check_label(label_from_path, paths[:2])


def test_check_label_from_path_tries_every_class_not_only_the_sample(paths, class_names):
    daisies = [p for p in paths if "/daisy/" in p][:3]  # Index 0: a constant 0 is right here.
    with pytest.raises(
        checks.CheckFailed, match=r"expected label 1 \(dandelion\) for .*/dandelion/"
    ):
        _check_label(lambda path: tf.constant(0, tf.int64), daisies)

    def last_part(path):  # The file's name instead of its folder's: no class matches, 0.
        name = tf.strings.split(path, "/")[-1]
        return tf.argmax(tf.cast(class_names == name, tf.int32))

    with pytest.raises(checks.CheckFailed, match=r"expected label 1 \(dandelion\)"):
        _check_label(last_part, daisies)


def test_check_label_from_path_off_by_one_says_indices_start_at_0(paths, class_names):
    label_from_path = _label_from_path(class_names)
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected labels \[0, 1, 2, 3, 4\] for the classes in order; found "
        r"\[1, 2, 3, 4, 5\], each one too high\. Indices start at 0\.$",
    ):
        _check_label(lambda path: label_from_path(path) + 1, paths[:3])


def test_check_label_from_path_folder_name_one_hot_and_float_say_what_to_return(paths, class_names):
    with pytest.raises(
        checks.CheckFailed, match=r"found a string tensor: the folder's name itself\. Compare"
    ):
        _check_label(lambda path: tf.strings.split(path, "/")[-2], paths[:2])
    with pytest.raises(
        checks.CheckFailed, match=r"expected one number per path .*found shape \(5,\)"
    ):
        _check_label(lambda path: class_names == tf.strings.split(path, "/")[-2], paths[:2])
    label_from_path = _label_from_path(class_names)
    with pytest.raises(checks.CheckFailed, match=r"found a float32 tensor: tf.argmax\(\) gives"):
        _check_label(lambda path: tf.cast(label_from_path(path), tf.float32), paths[:2])


def test_check_label_from_path_accepts_other_right_answers(paths, class_names, capsys):
    def with_where(path):  # tf.where instead of argmax, int32.
        folder = tf.strings.split(path, "/")[-2]
        return tf.cast(tf.where(class_names == folder)[0, 0], tf.int32)

    lookup = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(class_names, tf.range(5, dtype=tf.int64)), -1
    )

    def with_table(path):  # A lookup table, splitting with a regex.
        return lookup.lookup(tf.strings.regex_replace(path, r".*/([^/]+)/[^/]+$", r"\1"))

    for label_from_path in (with_where, with_table):
        _check_label(label_from_path, paths[:2])
        assert capsys.readouterr().out == "TODO 2 passed: 2 labels match their folders.\n"


# TODO 3: read_and_decode.
def _read_and_decode(reader, class_names):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):
        return tf.io.decode_jpeg(reader(path), channels=3), label_from_path(path)

    return read_and_decode


def test_check_read_and_decode_passes(paths, class_names, capsys):
    simulated = storage.SimulatedStorage(latency_ms=1)
    checks.check_read_and_decode(
        _read_and_decode(simulated.read_file, class_names),
        todo=3,
        sample_paths=paths[:4],
        storage=simulated,
        class_names=data.CLASSES,
    )
    assert capsys.readouterr().out == (
        "TODO 3 passed: 4 images decoded to uint8 (height, width, 3); 4 sizes. "
        "Grayscale, CMYK and PNG files too.\n"
    )


def _expect_read_and_decode_to_fail(read_and_decode, paths, *, latency_ms, match):
    with pytest.raises(checks.CheckFailed, match=match):
        checks.check_read_and_decode(
            read_and_decode,
            todo=3,
            sample_paths=paths[:2],
            storage=storage.SimulatedStorage(latency_ms),
            class_names=data.CLASSES,
        )


def test_check_read_and_decode_on_stub_says_not_done(paths):
    def read_and_decode(path):
        image = ...
        label = ...
        return image, label

    _expect_read_and_decode_to_fail(
        read_and_decode, paths, latency_ms=1, match=r"^TODO 3 \(read_and_decode\): not done yet"
    )


def test_check_read_and_decode_bypassing_storage_is_caught(paths, class_names):
    _expect_read_and_decode_to_fail(
        _read_and_decode(tf.io.read_file, class_names),
        paths,
        latency_ms=1,
        match=r"Read with storage.read_file\(path\)",
    )


def test_check_read_and_decode_grayscale_is_caught(paths, class_names):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):
        return tf.io.decode_jpeg(tf.io.read_file(path), channels=1), label_from_path(path)

    _expect_read_and_decode_to_fail(
        read_and_decode, paths, latency_ms=0, match=r"found uint8 of shape \(\d+, \d+, 1\)"
    )


def test_check_read_and_decode_without_channels_3_fails_on_the_checks_own_files(paths, class_names):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):  # Right for the sample's RGB JPEGs, wrong for the rest.
        return tf.io.decode_jpeg(tf.io.read_file(path)), label_from_path(path)

    _expect_read_and_decode_to_fail(
        read_and_decode,
        paths,
        latency_ms=0,
        match=r"found uint8 of shape \(48, 64, 1\) for a grayscale JPEG \(1 channel\) the check "
        r"wrote \(.*/daisy/grayscale\.jpg\)\. Images may have 1 or 4 channels: decode with "
        r"tf\.io\.decode_jpeg\(image_bytes, channels=3\)\.$",
    )

    def decode_image(path):  # decode_image without channels: 4 channels for a PNG with alpha.
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        return image, label_from_path(path)

    _expect_read_and_decode_to_fail(
        decode_image, paths, latency_ms=0, match=r"shape \(48, 64, 1\) for a grayscale JPEG"
    )


def test_check_read_and_decode_accepts_decode_image_with_channels_3(paths, class_names, capsys):
    label_from_path = _label_from_path(class_names)
    simulated = storage.SimulatedStorage(latency_ms=1)

    def read_and_decode(path):
        image = tf.io.decode_image(simulated.read_file(path), channels=3, expand_animations=False)
        return image, label_from_path(path)

    checks.check_read_and_decode(
        read_and_decode, todo=3, sample_paths=paths[:2], storage=simulated,
        class_names=data.CLASSES,
    )  # fmt: skip
    assert capsys.readouterr().out.startswith("TODO 3 passed: 2 images decoded")


def test_check_read_and_decode_partly_done_is_not_done(paths, class_names):
    def read_and_decode(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        label = ...
        return image, label

    _expect_read_and_decode_to_fail(
        read_and_decode,
        paths,
        latency_ms=1,
        match=r"^TODO 3 \(read_and_decode\): not done yet: it returns \(a uint8 tensor of shape "
        r"\(\d+, \d+, 3\), Ellipsis\)\. Expected",
    )


# TODO 4: parallel reading.
def _mapped(paths, simulated, class_names, calls, threads=None):
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(
        _read_and_decode(simulated.read_file, class_names), num_parallel_calls=calls
    )
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        dataset = dataset.with_options(options)
    return dataset


def test_check_parallel_reading_passes_with_enough_threads(paths, class_names, capsys):
    simulated = storage.SimulatedStorage(latency_ms=50)
    dataset = _mapped(paths, simulated, class_names, calls=8, threads=8)
    checks.check_parallel_reading(dataset, todo=4, storage=simulated, num_parallel_reads=8)
    assert capsys.readouterr().out == "TODO 4 passed: reads overlap (at least 4 in flight).\n"


def test_check_parallel_reading_sequential_map_fails_with_hint(paths, class_names):
    simulated = storage.SimulatedStorage(latency_ms=20)
    dataset = _mapped(paths, simulated, class_names, calls=None)
    with pytest.raises(checks.CheckFailed, match=r"TODO 4 \(parallel\): expected about 8 reads"):
        checks.check_parallel_reading(dataset, todo=4, storage=simulated, num_parallel_reads=8)


def test_check_parallel_reading_on_stub_says_not_done():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 4 \(parallel\): not done yet"):
        checks.check_parallel_reading(
            ..., todo=4, storage=storage.SimulatedStorage(50), num_parallel_reads=8
        )


def test_check_failed_is_an_assertion_error_without_chained_traceback():
    with pytest.raises(checks.CheckFailed) as caught:
        checks.check_filenames(..., todo=1, expected_count=1, class_names=())
    assert isinstance(caught.value, AssertionError)
    assert caught.value.__suppress_context__


# Lab 2: resize_and_crop, recompress, to_example, write_shard.
@pytest.fixture
def sample_images(paths):
    return [tf.io.decode_jpeg(tf.io.read_file(p), channels=3).numpy() for p in paths[::12]]


def test_check_resize_and_crop_passes_on_reference_and_other_methods(sample_images, capsys):
    checks.check_resize_and_crop(
        records.resize_and_crop, todo=1, sample_images=sample_images, target_size=64
    )
    assert capsys.readouterr().out == (
        "TODO 1 passed: 5 images resized and cropped to uint8 image of shape (64, 64, 3).\n"
    )

    def keras_crop(image, size):  # Crop to a square, then resize: the same picture.
        resized = tf.keras.layers.Resizing(size, size, crop_to_aspect_ratio=True)(image)
        return tf.saturate_cast(tf.round(resized), tf.uint8)

    checks.check_resize_and_crop(keras_crop, todo=1, sample_images=sample_images, target_size=64)


def test_check_resize_and_crop_failures(sample_images):
    def run(function):
        checks.check_resize_and_crop(function, todo=1, sample_images=sample_images, target_size=64)

    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(resize_and_crop\): not done yet"):
        run(lambda image, size: ...)
    with pytest.raises(checks.CheckFailed, match=r"found float32 of shape \(64, 64, 3\)"):
        run(lambda image, size: tf.image.resize(image, [size, size]))
    with pytest.raises(checks.CheckFailed, match=r"Scale so the SHORTER side"):
        run(lambda image, size: tf.saturate_cast(tf.image.resize(image, [size, size]), tf.uint8))
    with pytest.raises(checks.CheckFailed, match=r"Scale so the SHORTER side"):
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

    with pytest.raises(checks.CheckFailed, match=r"Scale so the SHORTER side is target_size"):
        checks.check_resize_and_crop(by_height, todo=1, sample_images=wide, target_size=64)

    def plain_cast(image, size):  # tf.cast instead of saturate_cast(round()): right too.
        return tf.cast(records.resize_and_crop(image, size), tf.float32) + 0.4

    checks.check_resize_and_crop(
        lambda image, size: tf.cast(plain_cast(image, size), tf.uint8),
        todo=1, sample_images=wide, target_size=64,
    )  # fmt: skip
    assert capsys.readouterr().out.startswith("TODO 1 passed: 5 images resized")


def test_check_recompress_passes_and_fails(sample_images, capsys):
    resized = [records.resize_and_crop(tf.constant(i), 64).numpy() for i in sample_images]
    checks.check_recompress(records.recompress, todo=2, sample_images=resized, quality=90)
    assert capsys.readouterr().out.startswith("TODO 2 passed: 5 images recompressed to JPEG")
    checks.check_recompress(
        lambda image, quality: tf.io.encode_jpeg(image, quality=quality),
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


# Lab 3: read_tfrecord, the parallel dataset, parse_batch, the fast pipeline.
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


def test_check_parallel_records_passes_and_fails(shard_paths, capsys):
    simulated = storage.SimulatedStorage(latency_ms=30)
    options = tf.data.Options()
    options.deterministic = False
    records = simulated.tfrecord_dataset(shard_paths, num_parallel_reads=4).with_options(options)
    dataset = records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)

    def run(candidate):
        checks.check_parallel_records(
            candidate,
            todo=2,
            storage=simulated,
            num_parallel_reads=4,
            num_shards=4,
            num_records=60,
        )

    run(dataset)
    assert (
        capsys.readouterr().out
        == "TODO 2 passed: all 60 records, read in parallel, in any order.\n"
    )
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(dataset\): not done yet"):
        run(...)
    discarded = simulated.tfrecord_dataset(shard_paths, num_parallel_reads=4)
    discarded.with_options(options)  # Fast-and-lean 07's mistake: options thrown away.
    with pytest.raises(
        checks.CheckFailed,
        match=r"deterministic = False on the dataset itself; found None\. .*options set on one "
        r"you then throw away never apply\.$",
    ):
        run(discarded.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE))
    with pytest.raises(checks.CheckFailed, match=r"expected a parallel map"):
        run(records.map(_read_tfrecord))
    one_reader = simulated.tfrecord_dataset(shard_paths).with_options(options)
    with pytest.raises(checks.CheckFailed, match=r"found at most 1\. Pass num_parallel_reads"):
        run(one_reader.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE))
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
    direct = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=4).with_options(options)
    with pytest.raises(
        checks.CheckFailed,
        match=r"it saw no request\. Read them with simulated_storage\.tfrecord_dataset",
    ):
        run(direct.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE))


def test_check_parallel_records_accepts_options_after_the_map_and_the_old_option_name(
    shard_paths, capsys
):
    simulated = storage.SimulatedStorage(latency_ms=30)
    records = simulated.tfrecord_dataset(shard_paths, num_parallel_reads=4)
    options = tf.data.Options()
    options.experimental_deterministic = False  # The older name of the same option.
    after_map = records.map(_read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
    checks.check_parallel_records(
        after_map.with_options(options), todo=2, storage=simulated, num_parallel_reads=4,
        num_shards=4, num_records=60,
    )  # fmt: skip
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
    records = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=4).with_options(options)
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
        match=r"expected records read in any order \(options.deterministic = False\); found "
        r"None\. Build on TODO 2's `records`",
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


def test_check_fast_dataset_accepts_prefetch_1_drop_remainder_and_options_here(shard_paths, capsys):
    options = tf.data.Options()
    options.deterministic = False
    records = tf.data.TFRecordDataset(shard_paths, num_parallel_reads=4)
    parsed = records.batch(16, drop_remainder=True).map(_parse_batch, num_parallel_calls=-1)
    for fast in (
        parsed.with_options(options).prefetch(1),
        parsed.prefetch(-1).with_options(options),
    ):
        checks.check_fast_dataset(fast, todo=4, batch_size=16)
        assert capsys.readouterr().out.startswith("TODO 4 passed: batches of 16")
