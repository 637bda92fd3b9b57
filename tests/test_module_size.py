"""Module sizes (issue 44): no module of `utils/` (checks included) or `tools/` over 300 lines."""

from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

MAX_MODULE_LINES = 300


def modules_over(folder: Path, max_lines: int = MAX_MODULE_LINES) -> list[str]:
    """Returns "path: N lines" for each `.py` under `folder` longer than `max_lines`."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        num_lines = len(path.read_text().splitlines())
        if num_lines > max_lines:
            found.append(f"{path.relative_to(folder.parent).as_posix()}: {num_lines} lines")
    return found


def test_modules_over_names_each_long_file_and_its_lines(tmp_path):
    (tmp_path / "tools" / "sub").mkdir(parents=True)
    (tmp_path / "tools" / "short.py").write_text("x = 1\n" * 300)
    (tmp_path / "tools" / "sub" / "long.py").write_text("x = 1\n" * 301)
    (tmp_path / "tools" / "notes.txt").write_text("x\n" * 400)
    assert modules_over(tmp_path / "tools") == ["tools/sub/long.py: 301 lines"]


@pytest.mark.parametrize("package", ["utils", "tools"])
def test_no_module_is_over_300_lines(package):
    over = modules_over(REPO_ROOT / package)
    assert over == [], (
        f"over {MAX_MODULE_LINES} lines: {'; '.join(over)}. Say the same thing shorter, or "
        "split out a module with one job, named by what it does."
    )
