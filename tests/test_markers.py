"""Tests of tests/markers.py: the test tiers, their markers and CONTRIBUTING's quick command."""

import fnmatch
import subprocess
import sys

from tests import markers
from tests.conftest import REPO_ROOT
from tools.building import setup_cell

# CONTRIBUTING.md's quick command leaves out every tier.
QUICK = " and ".join(f"not {marker}" for marker in markers.MODULES_BY_MARKER)


def test_each_marker_is_registered_and_marks_test_modules_that_exist():
    registered = setup_cell.read_pyproject()["tool"]["pytest"]["ini_options"]["markers"]
    assert [line.split(":")[0] for line in registered] == list(markers.MODULES_BY_MARKER)
    names = [path.stem for path in (REPO_ROOT / "tests").glob("test_*.py")]
    patterns = [pattern for found in markers.MODULES_BY_MARKER.values() for pattern in found]
    assert [pattern for pattern in patterns if not fnmatch.filter(names, pattern)] == []
    assert [name for name in names if len(markers.markers_of(name)) > 1] == []  # One tier.


def test_a_module_is_marked_by_its_name():
    assert markers.markers_of("test_grading") == ["grading"]
    assert markers.markers_of("test_grading_sealed_lab5") == ["grading"]  # test_grading*
    assert markers.markers_of("test_grade") == ["grading"]
    assert markers.markers_of("test_benchmark") == ["slow"]
    assert markers.markers_of("test_benchmark_decode") == []  # A tiny run.
    assert markers.markers_of("test_lint") == []


def test_a_marker_selects_its_modules_tests_and_the_quick_command_leaves_them_out():
    def collected(expression):
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        command += ["-m", expression, "tests/test_wheel.py", "tests/test_lint.py"]
        result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-3000:]
        return sorted({line.split("::")[0] for line in result.stdout.splitlines() if "::" in line})

    assert collected("bootstrap") == ["tests/test_wheel.py"]
    assert collected(QUICK) == ["tests/test_lint.py"]


def test_contributing_gives_the_quick_command():
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    assert f'.venv/bin/python -m pytest -n 2 -m "{QUICK}"' in contributing
