"""Self-checks run after each TODO: properties of the result, with plain-words failures.

Each check takes the learner's result and `todo=n`, prints "TODO n passed: ..." or raises
`CheckFailed` with a message that names the TODO and says what is missing or wrong.
Each lesson's checks live in a module named after it (`tf_data_basics` for
`notebooks/01_tf_data_basics.py`); what they share is in `_base` and `_samples`.
"""

from utils.checks._base import CheckFailed, DataProblem
from utils.checks.accelerator_waiting import check_in_memory, check_verdict
from utils.checks.convert_with_beam import check_build_conversion, check_convert_dofn
from utils.checks.read_tfrecords import (
    check_fast_dataset,
    check_parallel_records,
    check_parse_batch,
    check_read_tfrecord,
)
from utils.checks.scale_out_reading import check_dataset_fn, check_host_cores, check_through_service
from utils.checks.tf_data_basics import (
    check_filenames,
    check_label_from_path,
    check_parallel_reading,
    check_read_and_decode,
)
from utils.checks.train_keras import (
    check_augment,
    check_compiled_model,
    check_scaling,
    check_training_dataset,
)
from utils.checks.where_the_time_goes import check_ceiling_dataset
from utils.checks.write_tfrecords import (
    check_recompress,
    check_resize_and_crop,
    check_to_example,
    check_write_shard,
)

__all__ = [
    "CheckFailed",
    "DataProblem",
    "check_augment",
    "check_build_conversion",
    "check_ceiling_dataset",
    "check_compiled_model",
    "check_convert_dofn",
    "check_dataset_fn",
    "check_fast_dataset",
    "check_filenames",
    "check_host_cores",
    "check_in_memory",
    "check_label_from_path",
    "check_parallel_reading",
    "check_parallel_records",
    "check_parse_batch",
    "check_read_and_decode",
    "check_read_tfrecord",
    "check_recompress",
    "check_resize_and_crop",
    "check_scaling",
    "check_through_service",
    "check_to_example",
    "check_training_dataset",
    "check_verdict",
    "check_write_shard",
]
