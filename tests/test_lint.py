"""Ruff lints and formats everything that is Python: utils, tools, tests and lesson sources.

In `utils` it also checks each function's types and docstring (pyproject.toml's `ANN`, `D`
and `DOC` rules; tests/test_contracts.py shows they bite, and checks what they cannot ask).
"""

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

RUFF = Path(sys.executable).parent / "ruff"  # The one requirements-dev.txt pins.


def test_ruff_check_passes():
    result = subprocess.run([RUFF, "check", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"Run: ruff check --fix .\n{result.stdout}{result.stderr}"


def test_ruff_format_check_passes():
    command = [RUFF, "format", "--check", "."]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"Run: ruff format .\n{result.stdout}{result.stderr}"


def test_lesson_sources_need_no_formatter_or_linter_exceptions():
    found = [
        f"{path.name}:{number}"
        for path in sorted((REPO_ROOT / "notebooks").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "# fmt:" in line or "# noqa" in line
    ]
    assert found == [], f"Lesson lines that switch off ruff: {found}"
