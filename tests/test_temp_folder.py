"""The test session leaves nothing of the course in the system temporary folder.

`tests/conftest.py` lists the system temporary folder when the session starts and points
`TMPDIR` (and pytest's `tmp_path`) at a root of its own, which it removes at the end. This
test runs last (conftest moves it there) and looks for what escaped the root.
"""

from pathlib import Path

import pytest

from tests import conftest

COURSE_NAMES = ("__autograph_generated_file", "tpu_speed_pipelines", "pytest-of-", "lesson")
COURSE_SUFFIXES = {".ipynb", ".tfrec", ".tfrecord", ".jpg", ".keras", ".json"}


def course_leftovers(temp: Path, before: frozenset[str], own_root: Path) -> list[str]:
    """Returns the new entries of `temp` (not in `before`) that look like the course's.

    An entry is the course's if its name starts like one of the course's temporary files
    and folders, or if it is a folder holding notebooks, shards, images or models. Other
    new entries (another program's, on a shared machine) are not counted.
    """
    leftovers = []
    for path in sorted(temp.iterdir()):
        if path.name in before or path == own_root:
            continue
        named = path.name.startswith(COURSE_NAMES)
        holds = path.is_dir() and any(
            p.suffix in COURSE_SUFFIXES for p in _files(path, limit=10_000)
        )
        if named or holds:
            leftovers.append(path.name)
    return leftovers


def _files(folder: Path, *, limit: int):
    for count, path in enumerate(folder.rglob("*")):
        if count >= limit:
            return
        yield path


def test_course_leftovers_names_new_course_entries_only(tmp_path):
    temp = tmp_path / "temp"
    (temp / "old_tpu_speed_pipelines").mkdir(parents=True)
    before = frozenset(p.name for p in temp.iterdir())
    (temp / "__autograph_generated_fileab12.py").write_text("x = 1\n")
    (temp / "lesson6-x1y2").mkdir()
    (temp / "tmpq9" / "shards").mkdir(parents=True)
    (temp / "tmpq9" / "shards" / "flowers00-12.tfrec").write_bytes(b"")
    (temp / "tmpz3").mkdir()  # Another program's empty folder.
    (temp / "other.log").write_text("not ours\n")
    (temp / "own-root").mkdir()
    leftovers = course_leftovers(temp, before, temp / "own-root")
    assert leftovers == ["__autograph_generated_fileab12.py", "lesson6-x1y2", "tmpq9"]


def other_course_runs() -> list[str]:
    """Returns the command lines of course runs outside this session's processes.

    On a shared machine their files land in the same system temp folder, and no file says
    which process made it.
    """
    import psutil

    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True))}
    ours |= {p.pid for p in me.parents()}
    markers = ("pytest", "ipykernel", "papermill", "tools.run_course", "tools.build_notebooks")
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["pid"] not in ours and any(m in command for m in markers):
            found.append(command[:120])
    return found


def test_the_session_left_nothing_of_the_course_in_the_temp_folder():
    assert conftest.TEMP_ROOT.is_dir()
    leftovers = course_leftovers(conftest.SYSTEM_TEMP, conftest.TEMP_BEFORE, conftest.TEMP_ROOT)
    others = other_course_runs() if leftovers else []
    if others:
        pytest.skip(
            f"{len(leftovers)} new course file(s) in {conftest.SYSTEM_TEMP}, but other course "
            f"runs share it ({len(others)} processes, e.g. {others[0]!r}): cannot tell whose"
        )
    assert leftovers == [], (
        f"The tests left {leftovers} in {conftest.SYSTEM_TEMP}, outside the session's "
        f"temporary root {conftest.TEMP_ROOT}: something ignored TMPDIR."
    )


def test_a_session_removes_its_temporary_root_and_leaves_the_temp_folder_empty(tmp_path):
    import os
    import subprocess
    import sys

    temp = tmp_path / "system-temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    env.pop(conftest.data.CACHE_ENV_VAR, None)  # The child's cache goes under its root too.
    node = "tests/test_temp_folder.py::test_course_leftovers_names_new_course_entries_only"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
        cwd=conftest.REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 passed" in result.stdout
    assert sorted(p.name for p in temp.iterdir()) == []
