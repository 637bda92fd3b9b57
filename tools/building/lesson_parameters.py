"""Small parameters for each lesson: what the tests and the grader run the notebooks with.

Each lesson runs in well under a minute or two on 2 cores with these, and every code path
of the full lesson still runs. Every lesson in notebooks/ must have an entry.

Also: the optional lessons, and the modules they need beyond requirements.txt.
"""

import os
import sys
from importlib.util import find_spec

OPTIONAL_MODULES = {  # Lesson 7 needs only TF.
    "06_convert_with_beam": ("apache_beam",),
    "09_grain_arrayrecord": ("grain", "array_record", "jax"),
}


def missing_modules(lesson: str) -> list[str]:
    """Returns the modules an optional lesson needs that are not installed here."""
    return [module for module in OPTIONAL_MODULES.get(lesson, ()) if find_spec(module) is None]


# What the optional lessons need, in one file (lesson 9 needs JAX beside Grain).
OPTIONAL_REQUIREMENTS = "requirements-optional.txt"


def install_command() -> str:
    """Returns the command that installs the optional lessons' packages into this Python's
    environment, relative to the current folder (the clone, where the tools run)."""
    return f"{os.path.relpath(sys.executable)} -m pip install -r {OPTIONAL_REQUIREMENTS}"


SMALL_PARAMETERS = {
    "01_tf_data_basics": {
        "NUM_IMAGES": 100,
        "NUM_PARALLEL_READS": 8,
        "NUM_TIMED_IMAGES": 60,
        "NUM_TIMED_SEQUENTIAL": 5,
        "SPEED_TEST_REPEATS": 2,
    },
    "02_write_tfrecords": {
        "NUM_IMAGES": 100,
        "NUM_SHARDS": 4,
        "NUM_SAMPLE": 20,
        "DECODE_TIMED_IMAGES": 80,
        "DECODE_REPEATS": 2,
    },
    "03_read_tfrecords": {
        "NUM_IMAGES": 100,
        "NUM_SHARDS": 4,
        "NUM_PARALLEL_READS": 4,
        "BATCH_SIZE": 16,
        "NUM_TIMED_IMAGES": 160,
        "NUM_TIMED_FILES": 40,
        "NUM_TIMED_SEQUENTIAL": 4,
        "SPEED_TEST_REPEATS": 2,
    },
    "04_train_keras": {
        "NUM_IMAGES": 160,
        "NUM_SHARDS": 4,
        "VALIDATION_SHARDS": 1,
        "IMAGE_SIZE": 32,
        "TRAINING_IMAGES": 640,
        "EPOCHS": 2,
        "STEPS_PER_EXECUTION": 2,
    },
    "05_accelerator_waiting": {
        "NUM_IMAGES": 160,
        "NUM_SHARDS": 4,
        "NUM_TIMED_STEPS": 4,
        "NUM_ROUNDS": 2,
    },
    "06_convert_with_beam": {"NUM_IMAGES": 100, "NUM_SHARDS": 4},
    "07_scale_out_reading": {
        "NUM_IMAGES": 100,
        "NUM_SHARDS": 4,
        "BATCH_SIZE": 16,
        "NUM_TIMED_IMAGES": 160,
        # One round: each round starts a tf.data service cluster per worker count, a
        # TensorFlow process each (2 rounds cost 131 s of CPU, the most of any lesson).
        "REPEATS": 1,
        "NUM_ORIGINALS": 20,
        "CROP_SIZE": 64,
    },
    "08_where_the_time_goes": {
        "NUM_IMAGES": 100,
        "NUM_SHARDS": 4,
        "NUM_PARALLEL_READS": 4,
        "BATCH_SIZE": 16,
        "NUM_TIMED_IMAGES": 80,
        "CEILING_REPEATS": 2,
        "TIMELINE_BATCHES": 4,
        "ABLATION_PARALLEL_READS": [1, 4],
        "ABLATION_SHARD_COUNTS": [1, 4],
        "ABLATION_REPEATS": 2,
    },
    "09_grain_arrayrecord": {
        "NUM_IMAGES": 100,
        "NUM_SHARDS": 4,
        "BATCH_SIZE": 16,
        "IMAGE_SIZE": 32,
        "TRAINING_STEPS": 4,
        "NUM_PARALLEL_READS": 4,
        "NUM_TIMED_IMAGES": 160,
        "NUM_WARMUP_IMAGES": 32,
        "SPEED_TEST_REPEATS": 2,
    },
}
