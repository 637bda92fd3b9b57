"""Issue 61's answers graded end to end (bwrap): the grader gives the notebook's verdict.

Lab 1's literal `from_tensor_slices(source.paths)` with `shuffle(100)` (the grader's 103
images, so a fixed 100 is no full shuffle there either: TODO 1 fails, TODO 3 passes); lab 2
answered by the course's own `records.to_example` (TODO 1 earns nothing) and a writer that
renames inside its `with` block (TODO 2 fails); lab 3's `read_shards` that ignores its
argument, or whose cycle_length of 1 interleave() refuses (TODO 2 fails); lab 1's
read_and_decode with tf.io.read_file (TODO 2 fails, TODO 3 not with it); lab 3's dense
one-hot spec (passes); the solutions score full marks.
"""

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_grade import _set_todo, grade_with_fixed_limits, needs_bwrap
from tools.building.variants import split_variants

IGNORES_ARGUMENT = """open_tfrecord = simulated_storage.open_tfrecord


def read_shards(filenames, num_parallel_reads=NUM_PARALLEL_READS):
    return filenames.interleave(
        open_tfrecord,
        cycle_length=NUM_PARALLEL_READS,
        num_parallel_calls=NUM_PARALLEL_READS,
        deterministic=False,
    )


shard_names = tf.data.Dataset.from_tensor_slices(shards.paths)
"""
CYCLE_OF_ONE = IGNORES_ARGUMENT.replace("cycle_length=NUM_PARALLEL_READS", "cycle_length=1")
COURSE_COPY = """def to_example(image_jpeg, class_index, original_size, class_names):
    return records.to_example(image_jpeg, class_index, original_size, class_names)
"""
RENAMED_OPEN = """def write_shard(serialized_examples, output_dir, index):
    temporary = shard_files.temporary_path(output_dir, index)
    num_records = 0
    with tf.io.TFRecordWriter(temporary) as writer:
        for record in serialized_examples:
            writer.write(record)
            num_records += 1
        final_path = f"{output_dir}/{shard_files.shard_name(index, num_records)}"
        tf.io.gfile.rename(temporary, final_path, overwrite=True)
    return final_path
"""
READ_FILE = """def read_and_decode(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    return image, label_from_path(path)
"""
DENSE_LABEL = """features = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "one_hot_class": tf.io.FixedLenFeature([len(class_names)], tf.float32),
    "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
}


def read_tfrecord(serialized):
    record = tf.io.parse_single_example(serialized, features)
    image = tf.io.decode_jpeg(record["image"], channels=3)
    image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
    return image, record["one_hot_class"]
"""
SHUFFLE_100 = (
    "filenames = tf.data.Dataset.from_tensor_slices(source.paths).shuffle(100, seed=SEED)\n"
)


def _solution(lesson):
    return split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")[1]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    lab1, lab2, lab3 = (
        _solution(name) for name in ("01_tf_data_basics", "02_write_tfrecords", "03_read_tfrecords")
    )
    notebooks = {
        "sol_01.ipynb": lab1,
        "sol_02.ipynb": lab2,
        "sol_03.ipynb": lab3,
        "x-shuffle100_01.ipynb": _set_todo(lab1, 1, SHUFFLE_100),
        "x-copy_02.ipynb": _set_todo(lab2, 1, COURSE_COPY),
        "x-renamed_02.ipynb": _set_todo(lab2, 2, RENAMED_OPEN),
        "x-ignores_03.ipynb": _set_todo(lab3, 2, IGNORES_ARGUMENT),
        "x-cycle1_03.ipynb": _set_todo(lab3, 2, CYCLE_OF_ONE),
        "x-readfile_01.ipynb": _set_todo(lab1, 2, READ_FILE),
        "y-dense_03.ipynb": _set_todo(lab3, 1, DENSE_LABEL),
    }
    for name, notebook in notebooks.items():
        nbformat.write(notebook, folder / name)
    return grade_with_fixed_limits(folder, tmp_path_factory.mktemp("grades"))


@needs_bwrap
def test_each_answer_scores_in_the_grader_as_in_the_notebook(graded):
    status, rows, report = graded
    assert status == 0
    found = {name: [row[f"TODO {n}"] for n in (1, 2, 3)] for name, row in rows.items()}
    assert found == {
        "sol_01.ipynb": ["1", "1", "1"],
        "sol_02.ipynb": ["1", "1", ""],
        "sol_03.ipynb": ["1", "1", ""],
        "x-shuffle100_01.ipynb": ["0", "1", "1"],
        "x-copy_02.ipynb": ["0", "1", ""],
        "x-renamed_02.ipynb": ["1", "0", ""],
        "x-ignores_03.ipynb": ["1", "0", ""],
        "x-cycle1_03.ipynb": ["1", "0", ""],
        # TODO 2 bypasses the storage: TODO 3's map is judged on its settings (one mistake).
        "x-readfile_01.ipynb": ["1", "0", "1"],
        "y-dense_03.ipynb": ["1", "1", ""],  # A dense one-hot spec parses to the same label.
    }
    assert (
        "- x-ignores_03.ipynb, TODO 2: TODO 2 (read_shards): expected read_shards(filenames, 3) "
        "to read 3 shards at once; found cycle_length=4, num_parallel_calls=4. Use the "
        "num_parallel_reads argument, not a number of your own.\n"
    ) in report
    assert (  # interleave() refuses it as the dataset is made: the check's words, not TF's.
        "- x-cycle1_03.ipynb, TODO 2: TODO 2 (read_shards): expected 4 shards read at once; "
        "interleave() refuses a num_parallel_calls above its cycle_length. Pass "
        "num_parallel_reads as both.\n"
    ) in report
    assert "function_node" not in report
    assert "found the file renamed with 0 of its " in report
    assert "found a call to records.to_example, the course's solved copy" in report
    assert "expected a shuffle over all 103 paths; found a buffer of 100." in report
