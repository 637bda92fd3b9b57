"""What a test session must leave as it found it: the checkout, HOME and the temp folder.

`tests/conftest.py` takes `checkout_state` and `home_state` before the session starts and
runs a `TempWatcher` and a `WriterLog` through it; `tests/test_temp_folder.py` compares at
the end. No file says which process wrote it, so a change counts as the tests' only when no
other process that writes there (`other_writers`) was alive as it was made (`WriterLog`): a
learner's JupyterLab or course run beside the tests is never taken for the tests.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

# Caches that tools keep in a checkout by design (gitignored): not counted as writes.
CACHES_IN_THE_CHECKOUT = (
    ".venv",
    "**/__pycache__/**",
    ".pytest_cache",
    ".ruff_cache",
    "**/.ipynb_checkpoints/**",
)
# Where the course's tools write in a HOME: IPython, Jupyter, Keras, matplotlib, fontconfig,
# Beam, Chromium (crash reports, dconf, its NSS database), Playwright, the data cache.
HOME_PLACES = (
    ".ipython",
    ".jupyter",
    ".local/share/jupyter",
    ".keras",
    ".config/matplotlib",
    ".cache/matplotlib",
    ".cache/fontconfig",
    ".apache_beam",
    ".pki",
    ".config/chromium",
    ".cache/chromium",
    ".cache/dconf",
    ".cache/ms-playwright",
    ".cache/tpu_speed_pipelines",
)
# The names of the course's temporary files and folders, and what a folder of its holds.
COURSE_NAMES = ("__autograph_generated_file", "tpu_speed_pipelines", "pytest-of-", "lesson")
COURSE_SUFFIXES = {".ipynb", ".tfrec", ".tfrecord", ".jpg", ".keras", ".json"}
# The command lines of a course run: another one on the machine writes where this one does.
COURSE_RUN_MARKERS = (
    "pytest",
    "ipykernel",
    "papermill",
    "tools.run_course",
    "tools.build_notebooks",
)
# The command lines of what writes in HOME's `HOME_PLACES`: course runs, Jupyter, Chromium.
HOME_WRITER_MARKERS = (*COURSE_RUN_MARKERS, "jupyter", "chrom")
# What a failure message lists of the paths the tests wrote (it says how many in all).
MAX_LISTED = 30


def checkout_state(root: Path) -> dict[str, tuple] | None:
    """Returns what `git status` lists in `root` (changed, untracked, ignored), with each stat.

    The caches of `CACHES_IN_THE_CHECKOUT` are left out. Returns None outside a git checkout.
    """
    excluded = [f":(exclude,glob){pattern}" for pattern in CACHES_IN_THE_CHECKOUT]
    result = subprocess.run(
        [
            "git",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignored=traditional",
            "--",
            ".",
            *excluded,
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        return None
    state = {}
    for entry in filter(None, result.stdout.split("\0")):
        code, path = entry[:2], entry[3:]
        try:
            stat = os.lstat(root / path)
            state[path] = (code, stat.st_size, stat.st_mtime_ns)
        except OSError:
            state[path] = (code,)
    return state


def home_state(home: Path) -> dict[str, int]:
    """Returns the files and folders of `HOME_PLACES` in `home`, with their mtimes.

    The rest of HOME is the user's: the tests' own HOME is elsewhere, and what the course's
    tools would write by mistake lands in these places.
    """
    state: dict[str, int] = {}
    for place in HOME_PLACES:
        for path in [home / place, *(home / place).rglob("*")]:
            try:
                state[str(path.relative_to(home))] = os.lstat(path).st_mtime_ns
            except OSError:
                continue
    return state


def differences(before: dict, after: dict) -> list[str]:
    """Returns the keys that are new, gone or changed, sorted."""
    gone = object()
    keys = before.keys() | after.keys()
    return sorted(key for key in keys if before.get(key, gone) != after.get(key, gone))


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


def other_course_runs() -> list[str]:
    """Returns the command lines of course runs outside this process's tree (parents too)."""
    import psutil

    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True))}
    ours |= {p.pid for p in me.parents()}
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["pid"] not in ours and any(m in command for m in COURSE_RUN_MARKERS):
            found.append(command[:120])
    return found


def other_writers(checkout: Path, home: Path) -> dict[str, list[str]]:
    """Returns the command lines of processes outside this process's tree that write where we look.

    `"checkout"`: every process whose working folder is inside `checkout` (an editor,
    JupyterLab, a course run started there). `"home"`: the course runs, Jupyter and Chromium
    processes whose HOME is `home` (they write in `HOME_PLACES`).
    """
    import psutil

    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True)), *(p.pid for p in me.parents())}
    found: dict[str, list[str]] = {"checkout": [], "home": []}
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        if process.info["pid"] in ours:
            continue
        command = " ".join(process.info["cmdline"] or [])[:120]
        if process.info["cwd"] and Path(process.info["cwd"]).is_relative_to(checkout):
            found["checkout"].append(command)
        if any(marker in command for marker in HOME_WRITER_MARKERS):
            try:
                process_home = process.environ().get("HOME")
            except (psutil.Error, OSError):
                continue  # Gone, or another user's: not writing in this HOME.
            if process_home == str(home):
                found["home"].append(command)
    return found


class WriterLog:
    """Notes every `every_s` seconds which other processes write in the checkout and in HOME.

    `writers_at(place, mtime_ns)` says who was alive around a change made at that time; a
    change no other writer could have made is the tests' own. A look costs about 0.15 s of
    CPU with 130 processes (2-core VM), hence every 5 s; a writer that lives less than
    that between two looks can go unseen.
    """

    def __init__(self, checkout: Path, home: Path, *, every_s: float = 5.0, writers=None):
        self._writers = writers or (lambda: other_writers(checkout, home))
        self.every_s = every_s
        self.samples: list[tuple[int, dict[str, list[str]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> WriterLog:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        now = time.time_ns()
        self.samples.append((now, self._writers()))

    def writers_at(self, place: str, mtime_ns: int | None) -> list[str]:
        """Returns the writers seen in the samples on either side of `mtime_ns` (None: in all)."""
        if mtime_ns is None:
            around = self.samples
        else:
            before = [s for s in self.samples if s[0] <= mtime_ns][-1:] or self.samples[:1]
            after = [s for s in self.samples if s[0] >= mtime_ns][:1] or self.samples[-1:]
            around = before + after
        return sorted({command for _, found in around for command in found[place]})

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 (a process gone mid-scan: look again next time)
                continue


def attribute(changed: list[Path], place: str, log: WriterLog) -> tuple[list[Path], list[Path]]:
    """Splits changed paths into (the tests', cannot tell): made while another writer was alive.

    A path that is gone has no time: it is the tests' only if no other writer was ever seen.
    """
    ours, cannot_tell = [], []
    for path in changed:
        try:
            mtime_ns = os.lstat(path).st_mtime_ns
        except OSError:
            mtime_ns = None
        (cannot_tell if log.writers_at(place, mtime_ns) else ours).append(path)
    return ours, cannot_tell


def listing(paths: list, *, limit: int = MAX_LISTED) -> str:
    """Returns the first `limit` paths, one a line, and how many more there are."""
    lines = [f"  {path}" for path in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"  ... and {len(paths) - limit:,} more")
    return "\n".join(lines)


class TempWatcher:
    """Notes, for each new entry of the temp folder, the other course runs alive as it appeared.

    No file says which process made it; an entry that appeared while no other course run
    was on the machine can only be this session's. `poll()` looks every `every_s` seconds
    in a thread of its own between `start()` and `stop()`.
    """

    def __init__(self, temp: Path, *, every_s: float = 1.0, others=other_course_runs):
        self.temp, self.every_s, self._others = temp, every_s, others
        self.known = set(os.listdir(temp))
        self.others_at_birth: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> TempWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def poll(self) -> None:
        names = set(os.listdir(self.temp))
        new = names - self.known
        self.known |= names
        if new:
            others = self._others()
            self.others_at_birth.update({name: others for name in new})

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 (a process gone mid-scan: look again next time)
                continue
