"""Test tiers: each test module's pytest markers, so that a contributor can leave tiers out.

A pytest plugin (pyproject.toml loads it: `-p tests.markers`, and registers the markers).
A module is marked here by its name, every test in it alike (`test_grading*`: the grader's
modules, new ones too). CONTRIBUTING.md gives the quick command, which leaves the marked
tiers out; the README's command runs everything.
"""

from fnmatch import fnmatchcase

import pytest

# Marker: the names (fnmatch patterns) of the test modules it marks, without ".py".
MODULES_BY_MARKER = {
    "notebooks": ("test_notebooks", "test_lab4_devices", "test_real_folder_labs"),
    "grading": ("test_grade", "test_grading*", "test_sandbox", "test_nbval_quick_check"),
    "bootstrap": ("test_bootstrap", "test_wheel"),
    "browser": ("test_open_labs",),
    "replicas": ("test_replicas",),
    "slow": ("test_benchmark",),  # tools.benchmark --quick, end to end.
}


def markers_of(module: str) -> list[str]:
    """Returns the markers of the test module named `module` ("test_grading_sealed_lab5").

    Args:
        module: a test module's name, without ".py".

    Returns:
        The markers with a name in MODULES_BY_MARKER that `module` matches.
    """
    return [
        marker
        for marker, patterns in MODULES_BY_MARKER.items()
        if any(fnmatchcase(module, pattern) for pattern in patterns)
    ]


@pytest.hookimpl(tryfirst=True)  # Before `-m` deselects by marker.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Adds to each collected test the markers of its module."""
    for item in items:
        for marker in markers_of(item.path.stem):
            item.add_marker(marker)
