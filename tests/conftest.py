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
