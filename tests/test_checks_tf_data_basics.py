"""utils/checks/tf_data_basics.py (lab 1): right answers pass, mistakes name the TODO."""

import pytest
import tensorflow as tf

from utils import checks
from utils.lab import data, storage


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


def test_check_filenames_shuffled_without_a_seed_says_why_the_seed_matters(paths, capsys):
    unseeded = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths))
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_filenames(unseeded, todo=1, expected_count=60, class_names=data.CLASSES)
    assert str(failure.value) == (
        "TODO 1 (filenames): expected the order drawn from a seed; found shuffle() without "
        "one. Each run of the notebook then reads the files in another order, so a number or "
        "a mistake you saw once cannot be seen again. Pass the seed: "
        ".shuffle(len(source.paths), seed=SEED)."
    )
    seeded = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=7)
    checks.check_filenames(seeded, todo=1, expected_count=60, class_names=data.CLASSES)
    assert capsys.readouterr().out.startswith("TODO 1 passed: 60 files")


def test_check_filenames_names_a_small_buffer_and_a_repeated_order(paths):
    # The likeliest wrong answers once TODO 1 says the outcome, not the call.
    small = tf.data.Dataset.from_tensor_slices(paths).shuffle(8, seed=SEED_FOR_TESTS)
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_filenames(small, todo=1, expected_count=60, class_names=data.CLASSES)
    assert str(failure.value) == (
        "TODO 1 (filenames): expected a shuffle over all 60 paths; found a buffer of 8. "
        "shuffle(n) draws each element from the next n only, so the first path out is always "
        "one of the first 8: pass a buffer of len(source.paths)."
    )
    same_order = tf.data.Dataset.from_tensor_slices(paths).shuffle(
        len(paths), seed=SEED_FOR_TESTS, reshuffle_each_iteration=False
    )
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected a new order on each pass \(each epoch\); found the same order twice: "
        r"shuffle\(\.\.\., reshuffle_each_iteration=False\) keeps the first pass's order\.",
    ):
        checks.check_filenames(same_order, todo=1, expected_count=60, class_names=data.CLASSES)


SEED_FOR_TESTS = 7


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
        read_and_decode,
        todo=3,
        sample_paths=paths[:2],
        storage=simulated,
        class_names=data.CLASSES,
    )
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
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 4 \(parallel\): expected a map with num_parallel_calls=8; found none",
    ):
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


def test_check_parallel_reading_autotune_fails_whatever_the_cores(paths, class_names):
    simulated = storage.SimulatedStorage(latency_ms=1)
    dataset = _mapped(paths, simulated, class_names, calls=tf.data.AUTOTUNE, threads=8)
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 4 \(parallel\): expected num_parallel_calls=8 \(NUM_PARALLEL_READS\); "
        r"found tf\.data\.AUTOTUNE, which sizes itself from this machine's cores",
    ):
        checks.check_parallel_reading(dataset, todo=4, storage=simulated, num_parallel_reads=8)


def test_check_parallel_reading_without_its_own_threads_fails_on_local_disk_too(paths, class_names):
    local = storage.SimulatedStorage(latency_ms=0)
    dataset = _mapped(paths, local, class_names, calls=8)
    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 4 \(parallel\): expected a thread pool of 8 threads "
        r"\(options\.threading\.private_threadpool_size\); found the default",
    ):
        checks.check_parallel_reading(dataset, todo=4, storage=local, num_parallel_reads=8)
