"""Self-checks run after each TODO: properties of the result, with plain-words failures.

Each check takes the learner's result and `todo=n`, prints "TODO n passed: ..." or raises
`CheckFailed` with a message that names the TODO and says what is missing or wrong.
Each lesson's checks live in a module named after it (`tf_data_basics` for
`notebooks/01_tf_data_basics.py`); what they share is in `_base` and `_samples`.

A lesson's check module is imported when one of its checks is first used
(`checks.check_filenames`): a lab carries only its own lesson's module
(tools/building/setup_cell.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from utils.checks._base import CheckFailed, DataProblem

# Each check's lesson module.
LESSON_OF_CHECK = {
    "check_in_memory": "accelerator_waiting",
    "check_feed_keeps_up": "accelerator_waiting",
    "check_build_conversion": "convert_with_beam",
    "check_convert_dofn": "convert_with_beam",
    "check_read_shards": "read_tfrecords",
    "check_read_tfrecord": "read_tfrecords",
    "check_loader": "grain_arrayrecord",
    "check_resumed": "grain_arrayrecord",
    "check_shuffled": "grain_arrayrecord",
    "check_dataset_fn": "scale_out_reading",
    "check_host_cores": "scale_out_reading",
    "check_through_service": "scale_out_reading",
    "check_filenames": "tf_data_basics",
    "check_parallel_reading": "tf_data_basics",
    "check_read_and_decode": "tf_data_basics",
    "check_distribution": "train_keras",
    "check_training_dataset": "train_keras",
    "check_ceiling_dataset": "where_the_time_goes",
    "check_to_example": "write_tfrecords",
    "check_write_shard": "write_tfrecords",
}

__all__ = ["CheckFailed", "DataProblem", *LESSON_OF_CHECK]


def __getattr__(name: str) -> Callable:
    """Returns the check `name`, importing its lesson's module on first use.

    Args:
        name: a check's name, e.g. "check_filenames".

    Returns:
        The check function.

    Raises:
        AttributeError: if no lesson has a check of that name.
    """
    if name not in LESSON_OF_CHECK:
        raise AttributeError(f"module 'utils.checks' has no attribute {name!r}")
    module = importlib.import_module(f"utils.checks.{LESSON_OF_CHECK[name]}")
    return getattr(module, name)
