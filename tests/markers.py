"""Test tiers: each test module's pytest markers, so that a contributor can leave tiers out.

A pytest plugin (pyproject.toml loads it: `-p tests.markers`, and registers the markers).
A module is marked by its name here, every test in it alike; CONTRIBUTING.md gives the
quick command, which leaves the marked tiers out. The README's command runs everything.
"""

import pytest

# Marker: the test modules it marks (tests/<name>.py).
MODULES_BY_MARKER = {
    "notebooks": ("test_notebooks", "test_lab4_devices", "test_real_folder_labs"),
    "grading": (
        "test_grade",
        "test_grading",
        "test_grading_gradebook",
        "test_grading_sealed",
        "test_grading_sealed_labs_2_9",
        "test_grading_sealed_labs_4_6_7",
        "test_sandbox",
    ),
    "bootstrap": ("test_bootstrap", "test_wheel"),
    "browser": ("test_open_labs",),
    "replicas": ("test_replicas",),
    "slow": ("test_benchmark",),
}


@pytest.hookimpl(tryfirst=True)  # Before `-m` deselects by marker.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Adds to each collected test the markers of its module."""
    for item in items:
        for marker, modules in MODULES_BY_MARKER.items():
            if item.path.stem in modules:
                item.add_marker(marker)
