"""The test session leaves the checkout, HOME and the system temporary folder as it found them.

`tests/conftest.py` takes their state when the session starts (`tests/session_state.py`)
and points `TMPDIR` (and pytest's `tmp_path`) and `HOME` into a root of its own, which it
removes at the end. The tests named `test_the_session_left_*` run last (conftest moves them
there) and look for what escaped the root; under pytest-xdist the controller runs the same
checks (`SESSION_CHECKS`) once every worker has ended.
"""

import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from tests import conftest, session_state


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
    leftovers = session_state.course_leftovers(temp, before, temp / "own-root")
    assert leftovers == ["__autograph_generated_fileab12.py", "lesson6-x1y2", "tmpq9"]


def test_the_watcher_notes_the_other_runs_alive_as_each_entry_appeared(tmp_path):
    others = [["python -m pytest (another clone's run)"]]
    watcher = session_state.TempWatcher(tmp_path, others=lambda: others[0])
    (tmp_path / "__autograph_generated_file1.py").write_text("theirs or ours\n")
    watcher.poll()
    others[0] = []
    (tmp_path / "__autograph_generated_file2.py").write_text("ours\n")
    watcher.poll()
    assert watcher.others_at_birth == {
        "__autograph_generated_file1.py": ["python -m pytest (another clone's run)"],
        "__autograph_generated_file2.py": [],
    }
    leftovers = sorted(watcher.others_at_birth)
    assert this_sessions(leftovers, watcher) == (
        ["__autograph_generated_file2.py"],
        ["__autograph_generated_file1.py"],
    )


ANOTHER_RUN = """# pytest of another clone
import tempfile, time
time.sleep(1.5)  # The watcher's first looks see it alive, and nothing new.
tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", suffix=".py", delete=False)
time.sleep(3)
"""


def test_a_file_another_course_run_writes_is_not_counted(tmp_path):
    """A process outside this session's tree (as a run from another clone is) writes TF's file."""
    temp = tmp_path / "system-temp"
    temp.mkdir()
    watcher = session_state.TempWatcher(temp, every_s=0.2).start()
    env = {**os.environ, "TMPDIR": str(temp)}
    # `sh` starts it in the background and exits: it is nobody's child here, as another run.
    subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "$0" &', ANOTHER_RUN],
        env=env,
        check=True,
        timeout=30,
    )
    deadline = time.monotonic() + 20
    while not any(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    watcher.stop()
    [name] = watcher.others_at_birth
    assert name.startswith("__autograph_generated_file")
    others = watcher.others_at_birth[name]
    assert any("# pytest of another clone" in command for command in others), others
    leftovers = session_state.course_leftovers(temp, frozenset(), temp / "own-root")
    assert this_sessions(leftovers, watcher) == ([], [name])
    while any("# pytest of another clone" in c for c in session_state.other_course_runs()):
        time.sleep(0.5)  # Once it has ended, only the watcher can tell that it was there.


def this_sessions(leftovers: list[str], watcher) -> tuple[list[str], list[str]]:
    """Splits `leftovers` into (this session's, cannot tell): made while another run ran."""
    ours = [name for name in leftovers if not watcher.others_at_birth.get(name)]
    return ours, [name for name in leftovers if name not in ours]


def temp_folder_left() -> tuple[str, list[str]]:
    """(why the session fails, or "", notes): what it left in the system temporary folder."""
    assert conftest.TEMP_ROOT.is_dir()
    conftest.TEMP_WATCHER.poll()
    leftovers = session_state.course_leftovers(
        conftest.SYSTEM_TEMP, conftest.TEMP_BEFORE, conftest.TEMP_ROOT
    )
    ours, cannot_tell = this_sessions(leftovers, conftest.TEMP_WATCHER)
    failure = (
        f"The tests left {ours} in {conftest.SYSTEM_TEMP}, outside the session's temporary "
        f"root {conftest.TEMP_ROOT}: something ignored TMPDIR (no other course run was on "
        "the machine as they appeared)."
        if ours
        else ""
    )
    notes = []
    if cannot_tell:
        notes.append(
            f"{len(cannot_tell)} new course file(s) in {conftest.SYSTEM_TEMP} appeared while "
            f"other course runs were on the machine (e.g. {cannot_tell[0]}): not counted."
        )
    return failure, notes


def checkout_and_home_left() -> tuple[str, list[str]]:
    """(why the session fails, or "", notes): what it wrote in the checkout or the real HOME."""
    log = conftest.WRITER_LOG
    log.sample()
    ours, cannot_tell = [], []
    places = [("home", conftest.REAL_HOME, conftest.HOME_BEFORE, session_state.home_state)]
    if conftest.CHECKOUT_BEFORE is not None:  # None: not a git checkout.
        places.append(
            ("checkout", conftest.REPO_ROOT, conftest.CHECKOUT_BEFORE, session_state.checkout_state)
        )
    for place, root, before, state_of in places:
        changed = [root / path for path in session_state.differences(before, state_of(root))]
        theirs = session_state.attribute(changed, place, log)
        ours += theirs[0]
        cannot_tell += theirs[1]
    notes = []
    if cannot_tell:
        writers = log.writers_at("checkout", None) + log.writers_at("home", None)
        notes.append(
            f"{len(cannot_tell):,} change(s) in the checkout or the real HOME (e.g. "
            f"{cannot_tell[0]}) were made while other processes worked there (e.g. "
            f"{writers[0]!r}): not counted."
        )
    failure = (
        f"The tests wrote {len(ours):,} path(s) into the checkout or the real HOME, while "
        "no other process worked there:\n" + session_state.listing(sorted(map(str, ours)))
        if ours
        else ""
    )
    return failure, notes


# What the session must leave as it found it: checked by the tests below, last, or under
# pytest-xdist by the controller once every worker has ended (tests/conftest.py).
SESSION_CHECKS = (temp_folder_left, checkout_and_home_left)


def _as_a_test(check):
    failure, notes = check()
    for note in notes:
        warnings.warn(note, stacklevel=2)
    if failure:
        pytest.fail(failure, pytrace=False)


def test_the_session_left_nothing_of_the_course_in_the_temp_folder():
    _as_a_test(temp_folder_left)


def test_the_session_left_the_checkout_and_home_as_they_were():
    _as_a_test(checkout_and_home_left)


WRITES_HOME_AND_TEMP = """
import os, pathlib, tempfile

def test_writes_where_a_tool_would():
    pathlib.Path(os.path.expanduser("~/.keras")).mkdir()
    pathlib.Path(os.path.expanduser("~/.keras/keras.json")).write_text("{}")
    tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", delete=False)
"""


def test_a_session_writes_home_and_temp_files_under_its_root_only(tmp_path):
    """A child session (this conftest) whose test writes to ~ and the temp folder."""
    temp, home = tmp_path / "system-temp", tmp_path / "home"
    temp.mkdir()
    home.mkdir()
    (tmp_path / "test_child.py").write_text(WRITES_HOME_AND_TEMP)
    env = {**os.environ, "TMPDIR": str(temp), "HOME": str(home)}
    env.pop(conftest.data.CACHE_ENV_VAR, None)  # The child's cache goes under its root too.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            str(tmp_path / "test_child.py"),
        ],
        cwd=conftest.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 passed" in result.stdout
    assert sorted(p.name for p in temp.iterdir()) == []
    assert sorted(p.name for p in home.iterdir()) == []


def test_checkout_state_sees_what_a_test_would_write_but_not_the_caches(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / ".gitignore").write_text(".venv\n__pycache__/\nbuild/\n.ruff_cache/\n")
    (tmp_path / "lesson.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    before = session_state.checkout_state(tmp_path)
    for cache in (".venv/lib/x.py", "tools/__pycache__/x.pyc", ".ruff_cache/0.1/x"):
        (tmp_path / cache).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / cache).write_text("a cache\n")
    assert session_state.differences(before, session_state.checkout_state(tmp_path)) == []
    (tmp_path / "build" / "grades").mkdir(parents=True)
    (tmp_path / "build" / "grades" / "grades.csv").write_text("a class's grades\n")
    (tmp_path / "stray.txt").write_text("\n")
    (tmp_path / "lesson.py").write_text("x = 2\n")
    after = session_state.checkout_state(tmp_path)
    changed = session_state.differences(before, after)
    assert changed == ["build/grades/grades.csv", "lesson.py", "stray.txt"]
    assert session_state.checkout_state(tmp_path / "build") is not None  # Inside the repo.
    assert session_state.checkout_state(Path("/")) is None  # Not a git checkout.


def test_home_state_sees_the_course_tools_places_only(tmp_path):
    (tmp_path / ".claude").mkdir()
    before = session_state.home_state(tmp_path)
    (tmp_path / ".keras").mkdir()
    (tmp_path / ".keras" / "keras.json").write_text("{}")
    (tmp_path / ".config" / "chromium" / "Crash Reports").mkdir(parents=True)
    (tmp_path / ".claude" / "another program's").write_text("\n")
    (tmp_path / ".viminfo").write_text("the learner's editor\n")
    changed = session_state.differences(before, session_state.home_state(tmp_path))
    assert changed == [
        ".config/chromium",
        ".config/chromium/Crash Reports",
        ".keras",
        ".keras/keras.json",
    ]


# The files a child session needs to run this module's checks on a checkout of its own.
CHECK_FILES = (
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/session_state.py",
    "tests/test_temp_folder.py",
    "utils/__init__.py",
    "utils/lab/__init__.py",
    "utils/lab/data.py",
    "utils/lab/progress.py",
    "tests/markers.py",
)
THE_CHECK = "tests/test_temp_folder.py::test_the_session_left_the_checkout_and_home_as_they_were"

JUPYTER_BESIDE = """# jupyter lab stand-in: the learner's JupyterLab, in the same HOME as the tests
import os, pathlib, time
signals = pathlib.Path(os.environ["SIGNALS"])
while not (signals / "session started").exists():  # The child session has taken HOME's state.
    time.sleep(0.1)
workspaces = pathlib.Path.home() / ".jupyter" / "lab" / "workspaces"
workspaces.mkdir(parents=True)
for number in range(100):
    (workspaces / f"lab{number}.jupyterlab-workspace").write_text("{}")
(signals / "saved").touch()
time.sleep(8)
"""

WAITS = """import os, pathlib, time

def test_waits_while_jupyterlab_saves():
    signals = pathlib.Path(os.environ["SIGNALS"])
    (signals / "session started").touch()
    while not (signals / "saved").exists():
        time.sleep(0.1)
"""

WRITES_THE_CHECKOUT = """import pathlib

def test_writes_into_the_checkout():
    out = pathlib.Path(__file__).parents[1] / "build" / "out"
    out.mkdir(parents=True)
    for number in range(40):
        (out / f"f{number:02d}.txt").write_text("a stray result\\n")
"""


def run_the_check(tmp_path, child_test: str, *, beside: str | None = None, options=()):
    """Runs `child_test` and then the check in a child session on a git checkout of its own.

    Args:
        child_test: the text of `tests/test_child.py` in that checkout.
        beside: a script started first, outside the child's process tree, with its HOME.
        options: pytest's options for the child (`-n 1`: the check is the xdist controller's).

    Returns:
        The child's `subprocess.CompletedProcess`.
    """
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    home.mkdir()
    for name in CHECK_FILES:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_bytes((conftest.REPO_ROOT / name).read_bytes())
    (checkout / "tests" / "test_child.py").write_text(child_test)
    (checkout / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=checkout, check=True, capture_output=True)
    env = {**os.environ, "HOME": str(home), "SIGNALS": str(tmp_path)}
    env.pop(conftest.data.CACHE_ENV_VAR, None)
    if beside:  # `sh` starts it in the background and exits: it is nobody's child here.
        subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -c "$0" &', beside], env=env, check=True, timeout=30
        )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *options,
            "tests/test_child.py",
            THE_CHECK,
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_check_passes_while_jupyterlab_writes_in_the_same_home(tmp_path):
    result = run_the_check(tmp_path, WAITS, beside=JUPYTER_BESIDE)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "2 passed, 1 warning" in result.stdout
    assert "103 change(s) in the checkout or the real HOME" in result.stdout
    assert "jupyter lab stand-in" in result.stdout
    assert len(list((tmp_path / "home" / ".jupyter").rglob("*"))) == 102  # It wrote, meanwhile.


def test_the_check_fails_in_a_few_lines_when_a_test_writes_into_the_checkout(tmp_path):
    result = run_the_check(tmp_path, WRITES_THE_CHECKOUT)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed, 1 passed" in result.stdout
    out = tmp_path / "checkout" / "build" / "out"
    expected = (
        "The tests wrote 40 path(s) into the checkout or the real HOME, while no other "
        "process worked there:\n"
        + "\n".join(f"  {out}/f{number:02d}.txt" for number in range(30))
        + "\n  ... and 10 more"
    )
    start = result.stdout.index(expected.splitlines()[0])
    assert result.stdout[start:].startswith(expected + "\n"), result.stdout[start:][:3000]
    # The report is as short as its message, wherever the checkout is (a CI clone's paths are
    # longer than a developer's): no path beyond the 30 listed, each at most twice (the
    # failure and pytest's short summary), never f30-f39.
    listed = [line for line in result.stdout.splitlines() if f"{out}/f" in line]
    assert len(listed) <= 2 * 30 and f"{out}/f30.txt" not in result.stdout


def test_under_xdist_the_controller_fails_the_session_once_the_workers_end(tmp_path):
    result = run_the_check(tmp_path, WRITES_THE_CHECKOUT, options=["-n", "1"])
    assert result.returncode == 1, result.stdout[-3000:]
    # The worker left the check out (its test alone passed); the controller ran it after.
    assert re.search(r"^1 passed in [\d.]+s$", result.stdout, re.M), result.stdout[-3000:]
    out = tmp_path / "checkout" / "build" / "out"
    expected = (
        "The tests wrote 40 path(s) into the checkout or the real HOME, while no other "
        f"process worked there:\n  {out}/f00.txt\n"
    )
    assert re.search(
        r"^=+ FAILED checkout_and_home_left =+\n" + re.escape(expected), result.stdout, re.M
    )


def test_listing_says_how_many_it_leaves_out():
    assert session_state.listing(["a", "b", "c"], limit=2) == "  a\n  b\n  ... and 1 more"
    assert session_state.listing(["a"], limit=2) == "  a"
