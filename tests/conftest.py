"""Test set-up: no progress bars, no TensorFlow log lines, and a data cache of the tests' own.

Notebooks run by the tests inherit this environment; MPLBACKEND is left alone so that they
show their figures inline, as they do for a learner.
"""

import os
import tempfile
from pathlib import Path

os.environ["TPU_SPEED_PIPELINES_NO_PROGRESS"] = "1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault(
    "TPU_SPEED_PIPELINES_CACHE", str(Path(tempfile.gettempdir()) / "tpu_speed_pipelines_tests")
)

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def small_flowers():
    """A 60-image embedded dataset, generated once per cache."""
    from utils import data

    return data.make_flowers_dataset(60)


@pytest.fixture(scope="session")
def write_small_shards(small_flowers, tmp_path_factory):
    """Returns `write(num_shards, target_size=32)`: shard paths of the 60 images, made once."""
    from utils import sources, tfrecords

    made = {}

    def write(num_shards, target_size=32):
        if (num_shards, target_size) not in made:
            source = sources.resolve_source(str(small_flowers))
            output_dir = tmp_path_factory.mktemp("shards")
            tfrecords.convert(source, output_dir, target_size=target_size, num_shards=num_shards)
            made[num_shards, target_size] = tfrecords.find_shards(str(output_dir))
        return made[num_shards, target_size]

    return write
