"""utils/checks/tf_data_basics.py (lab 1): right answers pass, mistakes name the TODO."""

import re

import pytest
import tensorflow as tf

from utils import checks, storage
from utils.lab import data


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


# TODO 2: read_and_decode.
def _read_and_decode(reader, class_names):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):
        return tf.io.decode_jpeg(reader(path), channels=3), label_from_path(path)

    return read_and_decode


def test_check_read_and_decode_passes_on_one_image_per_class(small_source, class_names, capsys):
    simulated = storage.SimulatedStorage(latency_ms=1)
    checks.check_read_and_decode(
        _read_and_decode(simulated.read_file, class_names),
        todo=2,
        storage=simulated,
        source=small_source,
    )
    assert capsys.readouterr().out == (
        "TODO 2 passed: 5 images decoded to uint8 (height, width, 3); 5 sizes. "
        "Grayscale, CMYK and PNG files too.\n"
    )


def _expect_read_and_decode_to_fail(read_and_decode, source, *, latency_ms, match):
    with pytest.raises(checks.CheckFailed, match=match) as failure:
        checks.check_read_and_decode(
            read_and_decode,
            todo=2,
            storage=storage.SimulatedStorage(latency_ms),
            source=source,
        )
    return str(failure.value)


def test_check_read_and_decode_on_stub_says_not_done(small_source):
    def read_and_decode(path):
        image = ...
        label = ...
        return image, label

    _expect_read_and_decode_to_fail(
        read_and_decode,
        small_source,
        latency_ms=1,
        match=r"^TODO 2 \(read_and_decode\): not done yet",
    )


# The three likeliest wrong answers: tf.io.read_file, no channels=3, the folder's name.
def test_check_read_and_decode_bypassing_storage_is_caught(small_source, class_names):
    message = _expect_read_and_decode_to_fail(
        _read_and_decode(tf.io.read_file, class_names), small_source, latency_ms=1, match=None
    )
    assert message == (
        "TODO 2 (read_and_decode): expected 9 reads from the simulated storage; found 0. "
        "Read with simulated_storage.read_file(path), not tf.io.read_file, so that each "
        "image pays the storage latency."
    )


def test_check_read_and_decode_grayscale_is_caught(small_source, class_names):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):
        return tf.io.decode_jpeg(tf.io.read_file(path), channels=1), label_from_path(path)

    _expect_read_and_decode_to_fail(
        read_and_decode, small_source, latency_ms=0, match=r"found uint8 of shape \(\d+, \d+, 1\)"
    )


def test_check_read_and_decode_without_channels_3_fails_on_the_checks_own_files(
    small_source, class_names
):
    label_from_path = _label_from_path(class_names)

    def read_and_decode(path):  # Right for the sample's RGB JPEGs, wrong for the rest.
        return tf.io.decode_jpeg(tf.io.read_file(path)), label_from_path(path)

    _expect_read_and_decode_to_fail(
        read_and_decode,
        small_source,
        latency_ms=0,
        match=r"found uint8 of shape \(48, 64, 1\) for a grayscale JPEG \(1 channel\) the check "
        r"wrote \(daisy/grayscale\.jpg\)\. Images may have 1 or 4 channels: decode with "
        r"tf\.io\.decode_jpeg\(image_bytes, channels=3\)\.$",
    )

    def decode_image(path):  # decode_image without channels: 4 channels for a PNG with alpha.
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        return image, label_from_path(path)

    _expect_read_and_decode_to_fail(
        decode_image, small_source, latency_ms=0, match=r"shape \(48, 64, 1\) for a grayscale JPEG"
    )


def test_check_read_and_decode_folder_name_or_wrong_label_says_use_label_from_path(
    small_source,
):
    def folder_name(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return image, tf.strings.split(path, "/")[-2]

    message = _expect_read_and_decode_to_fail(folder_name, small_source, latency_ms=0, match=None)
    assert message == (  # The file by its class folder and name: no folder of the machine's.
        "TODO 2 (read_and_decode): expected label 0 (an integer) for daisy/daisy_0000.jpg; "
        "found b'daisy'. The label is label_from_path(path)."
    )

    def always_zero(path):
        return tf.io.decode_jpeg(tf.io.read_file(path), channels=3), tf.constant(0, tf.int64)

    message = _expect_read_and_decode_to_fail(always_zero, small_source, latency_ms=0, match=None)
    assert re.fullmatch(
        r"TODO 2 \(read_and_decode\): expected label 1 for dandelion/dandelion_\d+\.jpg; "
        r"found 0\. The label is label_from_path\(path\)\.",
        message,
    )


def test_check_read_and_decode_accepts_decode_image_with_channels_3(
    small_source, class_names, capsys
):
    label_from_path = _label_from_path(class_names)
    simulated = storage.SimulatedStorage(latency_ms=1)

    def read_and_decode(path):
        image = tf.io.decode_image(simulated.read_file(path), channels=3, expand_animations=False)
        return image, label_from_path(path)

    checks.check_read_and_decode(read_and_decode, todo=2, storage=simulated, source=small_source)
    assert capsys.readouterr().out.startswith("TODO 2 passed: 5 images decoded")


def test_check_read_and_decode_partly_done_is_not_done(small_source):
    def read_and_decode(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        label = ...
        return image, label

    _expect_read_and_decode_to_fail(
        read_and_decode,
        small_source,
        latency_ms=1,
        match=r"^TODO 2 \(read_and_decode\): not done yet: it returns \(a uint8 tensor of shape "
        r"\(\d+, \d+, 3\), Ellipsis\)\. Expected",
    )


# TODO 3: parallel reading, on `filenames` that carries one thread per read (the lab's cell).
def _mapped(paths, simulated, class_names, calls, threads=None):
    filenames = tf.data.Dataset.from_tensor_slices(paths)
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        filenames = filenames.with_options(options)
    return filenames.map(
        _read_and_decode(simulated.read_file, class_names), num_parallel_calls=calls
    )


def test_check_parallel_reading_passes_on_filenames_with_threads(paths, class_names, capsys):
    simulated = storage.SimulatedStorage(latency_ms=50)
    dataset = _mapped(paths, simulated, class_names, calls=8, threads=8)
    checks.check_parallel_reading(dataset, todo=3, storage=simulated, num_parallel_reads=8)
    assert capsys.readouterr().out == "TODO 3 passed: reads overlap (at least 4 in flight).\n"


def test_check_parallel_reading_on_stub_says_not_done():
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(parallel\): not done yet"):
        checks.check_parallel_reading(
            ..., todo=3, storage=storage.SimulatedStorage(50), num_parallel_reads=8
        )


def _parallel_failure(dataset, simulated):
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_parallel_reading(dataset, todo=3, storage=simulated, num_parallel_reads=8)
    return str(failure.value)


# The likeliest wrong answers: no num_parallel_calls, AUTOTUNE, a small number, a new list.
def test_check_parallel_reading_sequential_map_says_pass_num_parallel_calls(paths, class_names):
    simulated = storage.SimulatedStorage(latency_ms=20)
    dataset = _mapped(paths, simulated, class_names, calls=None, threads=8)
    assert _parallel_failure(dataset, simulated) == (
        "TODO 3 (parallel): expected a map with num_parallel_calls=8; found none: the images "
        "are read one at a time. Pass num_parallel_calls=NUM_PARALLEL_READS to map()."
    )


def test_check_parallel_reading_autotune_fails_whatever_the_cores(paths, class_names):
    simulated = storage.SimulatedStorage(latency_ms=1)
    dataset = _mapped(paths, simulated, class_names, calls=tf.data.AUTOTUNE, threads=8)
    assert _parallel_failure(dataset, simulated).startswith(
        "TODO 3 (parallel): expected num_parallel_calls=8 (NUM_PARALLEL_READS); found "
        "tf.data.AUTOTUNE, which sizes itself from this machine's cores"
    )


def test_check_parallel_reading_a_few_calls_says_how_many_wait(paths, class_names):
    simulated = storage.SimulatedStorage(latency_ms=1)
    dataset = _mapped(paths, simulated, class_names, calls=2, threads=8)
    assert _parallel_failure(dataset, simulated) == (
        "TODO 3 (parallel): expected num_parallel_calls=8 (NUM_PARALLEL_READS); found 2: at "
        "most 2 reads wait at once. Pass num_parallel_calls=NUM_PARALLEL_READS."
    )


def test_check_parallel_reading_without_filenames_threads_fails_on_local_disk_too(
    paths, class_names
):
    local = storage.SimulatedStorage(latency_ms=0)
    dataset = _mapped(paths, local, class_names, calls=8)  # A new list: no thread pool.
    assert _parallel_failure(dataset, local) == (
        "TODO 3 (parallel): expected the map applied to `filenames`, which carries a pool of 8 "
        "threads (the cell above the TODO); found the default pool, one thread per core, and "
        "a read that waits holds its thread. Start from filenames.map(...)."
    )


def test_check_parallel_reading_a_read_and_decode_without_the_storage_is_todo_2s_mistake(
    paths, class_names, capsys
):
    """TODO 2's `tf.io.read_file` costs TODO 2 only: TODO 3's map is judged on its settings."""
    simulated = storage.SimulatedStorage(latency_ms=20)

    def skip_storage(path):  # Parallel, but nothing waits on the storage: no reads counted.
        return tf.io.decode_jpeg(tf.io.read_file(path), channels=3), tf.constant(0, tf.int64)

    options = tf.data.Options()
    options.threading.private_threadpool_size = 8
    bypass = (
        tf.data.Dataset.from_tensor_slices(paths)
        .with_options(options)
        .map(skip_storage, num_parallel_calls=8)
    )
    checks.check_parallel_reading(bypass, todo=3, storage=simulated, num_parallel_reads=8)
    assert capsys.readouterr().out == (
        "TODO 3 passed: a parallel map of 8 reads (in flight not measured: read_and_decode "
        "does not read through simulated_storage, TODO 2's concern).\n"
    )
    sequential = tf.data.Dataset.from_tensor_slices(paths).with_options(options).map(skip_storage)
    with pytest.raises(checks.CheckFailed, match=r"found none: the images are read one at a time"):
        checks.check_parallel_reading(sequential, todo=3, storage=simulated, num_parallel_reads=8)


def test_check_parallel_reading_wants_num_parallel_reads_itself(paths, class_names):
    """Half of NUM_PARALLEL_READS (a number that passed the grader's 8, not the lab's 16) fails."""
    simulated = storage.SimulatedStorage(latency_ms=1)
    dataset = _mapped(paths, simulated, class_names, calls=4, threads=8)
    assert _parallel_failure(dataset, simulated).startswith(
        "TODO 3 (parallel): expected num_parallel_calls=8 (NUM_PARALLEL_READS); found 4"
    )


def test_check_filenames_a_fixed_buffer_below_the_labs_images_fails_on_few_images_too(paths):
    """shuffle(100) or shuffle(1000): a full shuffle of 60 paths, not of the lab's 3,670."""
    for buffer in (100, 1000):
        fixed = tf.data.Dataset.from_tensor_slices(paths).shuffle(buffer, seed=SEED_FOR_TESTS)
        with pytest.raises(checks.CheckFailed) as failure:
            checks.check_filenames(fixed, todo=1, expected_count=60, class_names=data.CLASSES)
        assert str(failure.value) == (
            "TODO 1 (filenames): expected a buffer that follows the data, len(source.paths); "
            f"found a fixed {buffer}, too small for the lab's 3670 images. Pass "
            "len(source.paths) as the buffer."
        )


def test_check_filenames_passes_right_answers_written_otherwise(paths, capsys):
    """The paths as a list (from_tensor_slices of the list itself), a large fixed buffer,
    shuffle then map-free listing from a tensor."""
    as_list = tf.data.Dataset.from_tensor_slices(list(paths)).shuffle(
        len(paths), seed=SEED_FOR_TESTS
    )
    large = tf.data.Dataset.from_tensor_slices(tf.constant(paths)).shuffle(
        10_000, seed=SEED_FOR_TESTS
    )
    for filenames in (as_list, large):
        checks.check_filenames(filenames, todo=1, expected_count=60, class_names=data.CLASSES)
    assert capsys.readouterr().out.count("TODO 1 passed: 60 files") == 2


def test_check_failed_is_an_assertion_error_without_chained_traceback():
    with pytest.raises(checks.CheckFailed) as caught:
        checks.check_filenames(..., todo=1, expected_count=1, class_names=())
    assert isinstance(caught.value, AssertionError)
    assert caught.value.__suppress_context__


def test_check_filenames_passes_from_tensor_slices_of_source_paths_itself(small_source, capsys):
    """`source.paths` is a list: the literal answer makes a dataset of paths, not a crash."""
    filenames = tf.data.Dataset.from_tensor_slices(small_source.paths)
    filenames = filenames.shuffle(len(small_source.paths), seed=SEED_FOR_TESTS)
    checks.check_filenames(
        filenames,
        todo=1,
        expected_count=small_source.num_images,
        class_names=small_source.class_names,
    )
    assert capsys.readouterr().out.startswith(f"TODO 1 passed: {small_source.num_images} files")
