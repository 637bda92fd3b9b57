"""The sandbox refuses every way out, whoever runs the grader: as root too (CI and this
project's machines run as root). Each attempt is made from inside the sandbox the grader
makes, with the binds it makes (issue 62)."""

import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import grade
from tools.building.outputs import METADATA_KEY as KEY
from tools.grading.kernel import course_seal, sandbox

BWRAP = sandbox.find_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None,
    reason="bwrap is missing or cannot make user namespaces here (apt-get install bubblewrap)",
)
SITE_PACKAGES = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
# Every read-only bind a submission's kernel and judge get, and the system's.
BINDS = [REPO_ROOT / "utils", REPO_ROOT / "tools", Path(sys.prefix), Path(sys.base_prefix)]
# Tries each way out with the system calls themselves and prints {attempt: errno name}
# ("done" where it worked). A write that works leaves no change: it writes what is there.
ATTEMPTS = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
found = {}

def said(name, code):
    found[name] = "done" if code == 0 else errno.errorcode[ctypes.get_errno()]

def write(name, path, data=b"x"):
    try:
        with open(path, "ab" if data == b"" else "wb") as file:
            file.write(data)
        found[name] = "done"
    except OSError as error:
        found[name] = errno.errorcode[error.errno]

for path in json.loads(sys.argv[1]):
    flags = MS_REMOUNT | MS_BIND
    said(f"remount rw {path}", libc.mount(None, path.encode(), None, flags, None))
    write(f"write {path}", os.path.join(path, "planted.py"))
said("remount /tmp larger", libc.mount(None, b"/tmp", None, MS_REMOUNT, b"size=10g"))
said("mount a tmpfs over /tmp", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
said("user namespace", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
write("plant a .pth", os.path.join(sys.argv[2], "planted.pth"), b"import os\n")
write("plant a check", os.path.join(sys.argv[3], "checks", "tf_data_basics.py"), b"")
write("sysctl", "/proc/sys/kernel/core_pattern", open("/proc/sys/kernel/core_pattern", "rb").read())
write("own /proc", "/proc/self/oom_score_adj", b"0")
write("/dev", "/dev/planted")
status = open("/proc/self/status").read()
found["CapEff"] = status.split("CapEff:")[1].split()[0]
found["uid"] = status.split("Uid:")[1].split()[0]
print(json.dumps(found))
"""


def _attempts(tmp_path: Path) -> dict[str, str]:
    paths = [str(path) for path in BINDS] + ["/usr", "/etc"]
    command = [sys.executable, "-c", ATTEMPTS, json.dumps(paths)]
    command += [str(SITE_PACKAGES), str(REPO_ROOT / "utils")]
    full = sandbox.bwrap_command(
        BWRAP, command, work=tmp_path, env={"PATH": "/usr/bin:/bin"}, read_only=BINDS
    )
    result = subprocess.run(full, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@needs_bwrap
def test_no_way_out_of_the_sandbox_works_as_root_or_not(tmp_path):
    """As root, bwrap alone left CAP_SYS_ADMIN inside (`CapEff 000001fffeffffff`): a
    submission remounted utils/ read-write and wrote into the checkout."""
    found = _attempts(tmp_path)
    expected = {"CapEff": "0000000000000000", "uid": sandbox.SANDBOX_ID}
    for path in [*BINDS, Path("/usr"), Path("/etc")]:
        expected[f"remount rw {path}"] = "EPERM"
        expected[f"write {path}"] = "EROFS"
    expected.update(
        {
            "remount /tmp larger": "EPERM",
            "mount a tmpfs over /tmp": "EPERM",
            "user namespace": "ENOSPC",  # --disable-userns: no namespace of its own is left.
            "plant a .pth": "EROFS",
            "plant a check": "EROFS",
            "sysctl": "EROFS",  # /proc is read-only: a process of root's may write /proc/sys.
            "own /proc": "EROFS",
            "/dev": "EROFS",
        }
    )
    assert found == expected
    planted = [SITE_PACKAGES / "planted.pth", *(path / "planted.py" for path in BINDS)]
    assert [path for path in planted if path.exists()] == []


@needs_bwrap
def test_every_try_is_refused_again(tmp_path):
    """Refused every time, not once: ten sandboxes in a row find the same."""
    first = _attempts(tmp_path)
    assert all(_attempts(tmp_path) == first for _ in range(9))


@needs_bwrap
def test_the_work_folder_is_the_sandboxs_own_and_the_graders(tmp_path):
    """Inside, the grader's folder is nobody's, the sandbox's user: it writes there; outside,
    what it wrote is the grader's user's, which the grader reads and deletes."""
    script = "import os; open('made', 'w').write('x'); print(os.stat('.').st_uid, os.getuid())"
    full = sandbox.bwrap_command(
        BWRAP, [sys.executable, "-c", script], work=tmp_path, env={}, read_only=BINDS
    )
    result = subprocess.run(full, capture_output=True, text=True, timeout=60)
    assert result.stdout == f"{sandbox.SANDBOX_ID} {sandbox.SANDBOX_ID}\n", result.stderr
    assert (tmp_path / "made").stat().st_uid == os.getuid()


def test_the_fix_names_a_bwrap_too_old(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "bwrap_version", lambda path: (0, 6, 1))
    assert sandbox.bwrap_fix().startswith(
        "bwrap 0.6.1 is older than 0.8, which the sandbox needs (--disable-userns, --size): "
        "install bubblewrap 0.8 or later"
    )


def _course(tmp_path: Path) -> tuple[Path, Path]:
    course, venv = tmp_path / "course", tmp_path / "venv"
    (course / "utils" / "checks").mkdir(parents=True)
    (course / "utils" / "checks" / "tf_data_basics.py").write_text("def check_filenames(): ...\n")
    (venv / "site-packages").mkdir(parents=True)
    (venv / "site-packages" / "numpy.py").write_text("x = 1\n")
    return course, venv


@pytest.mark.parametrize(
    "change",
    [
        lambda course, venv: (course / "utils/checks/tf_data_basics.py").write_text("pass\n"),
        lambda course, venv: (course / "utils/checks/new_check.py").write_text(""),
        lambda course, venv: (venv / "site-packages/planted.pth").write_text("import os\n"),
        lambda course, venv: (venv / "site-packages/numpy.py").write_text("x = 2\n"),
    ],
    ids=["a check replaced", "a check added", "a .pth planted", "a module changed in place"],
)
def test_the_seal_names_the_submission_that_changed_the_course(tmp_path, change):
    course, venv = _course(tmp_path)
    seal = course_seal.CourseSeal([course / "utils"], [venv])
    seal.started("ann_01.ipynb")
    seal.verify("ann_01.ipynb")  # Nothing changed.
    seal.started("bob_01.ipynb")
    seal.started("cat_01.ipynb")
    change(course, venv)
    with pytest.raises(course_seal.CourseChanged) as raised:
        seal.verify("bob_01.ipynb")
    assert str(raised.value) == (
        "the course files the judge imports changed while bob_01.ipynb ran (running beside "
        "it: cat_01.ipynb): the run stops here and writes no grade. Restore what changed "
        "(git status shows utils/ and tools/) and grade again without that submission."
    )


def test_a_changed_course_stops_the_run_and_writes_no_grade(tmp_path, monkeypatch, capsys):
    """The grader stops at the first submission after which the seal finds a change."""

    def verify(self, submission):
        raise course_seal.CourseChanged(f"changed while {submission} ran")

    monkeypatch.setattr(course_seal.CourseSeal, "verify", verify)
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "broken.ipynb").write_text("not json")
    output = tmp_path / "grades"
    assert grade.main([str(tmp_path / "submissions"), "--output-dir", str(output)]) == 3
    assert capsys.readouterr().err == "error: changed while broken.ipynb ran\n"
    assert not (output / "grades.csv").exists()


# A lab 1 TODO 1 cell that tries every way out from the learner's kernel, then does nothing:
# it prints which tries worked (none may).
BREAKOUT = """import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_worked = []
for _path in {binds!r}:
    if _libc.mount(None, _path.encode(), None, 32 | 4096, None) == 0:  # MS_REMOUNT | MS_BIND
        _worked.append("remount " + _path)
if _libc.mount(None, b"/tmp", None, 32, b"size=10g") == 0:
    _worked.append("remount /tmp")
for _path, _text in {plants!r}:
    try:
        with open(_path, "a") as _file:
            _file.write(_text)
        _worked.append(_path)
    except OSError:
        pass
print("ways out that worked:", _worked)
filenames = ...
"""
FORGED_CHECK = "\\ndef check_filenames(*args, **kwargs):\\n    print('TODO 1 passed: forged')\\n"


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """Lab 1, graded one submission at a time as root: a breakout, then a blank lab (0/3
    whatever the breakout did), a solution, a blank lab whose metadata names the solution's
    learner (handed in later), and a solution from a learner whose id is a formula."""
    from tests.test_grade import _notebook, _with_todo

    lab, solution = (
        _notebook("labs", "01_tf_data_basics"),
        _notebook("solutions", "01_tf_data_basics"),
    )
    plants = [
        (str(REPO_ROOT / "utils" / "checks" / "tf_data_basics.py"), FORGED_CHECK),
        (str(REPO_ROOT / "utils" / "checks" / "planted.py"), FORGED_CHECK),
        (str(REPO_ROOT / "tools" / "grading" / "planted.py"), "x = 1\n"),
        (str(SITE_PACKAGES / "planted.pth"), "import os\n"),
    ]
    binds = [str(path) for path in BINDS] + ["/usr", "/etc"]
    breakout = BREAKOUT.format(binds=binds, plants=plants)
    folder = tmp_path_factory.mktemp("class")
    submissions = {
        "a_01.ipynb": _with_todo(lab, 1, lambda source: breakout),
        "b_01.ipynb": lab,
        "c_01.ipynb": solution,
        "d_01.ipynb": copy.deepcopy(lab),
        "=1+2_01.ipynb": solution,
    }
    submissions["d_01.ipynb"].metadata[KEY]["learner"] = "c"
    for name, notebook in submissions.items():
        nbformat.write(notebook, folder / name)
    later = (folder / "c_01.ipynb").stat().st_mtime + 3600
    os.utime(folder / "d_01.ipynb", (later, later))
    output = tmp_path_factory.mktemp("grades")
    status = grade.main(
        [str(folder), "--output-dir", str(output), "-j", "1", "--id-pattern", r"^(?P<id>[^_]+)_"]
        + ["--cell-timeout", "400", "--timeout", "900"]
    )
    return status, output, plants


@needs_bwrap
def test_a_hostile_class_as_root_gets_each_learner_their_own_grade(hostile_class):
    status, output, plants = hostile_class
    assert status == 0
    for path, text in plants:  # Nothing written under the course or in the venv.
        assert not Path(path).exists() or text not in Path(path).read_text()
    with open(output / "grades.csv", newline="") as file:
        rows = [(r["learner"], r["total"], r["status"], r["flags"]) for r in csv.DictReader(file)]
    assert rows == [
        ("'=1+2", "3", "graded", ""),
        ("a", "0", "graded", "paths outside the work folder; processes"),
        ("b", "0", "graded", ""),  # After the breakout: still 0, no forged check.
        ("c", "3", "graded", ""),  # Not set aside by d's metadata.
        ("d", "0", "graded", "another learner's id in its metadata"),
    ]
    feedback = (output / "feedback" / "a-01_tf_data_basics.md").read_text()
    assert "ways out that worked: []\n" in feedback
    with open(output / "grades.csv", newline="") as file:
        cells = [cell for row in csv.reader(file) for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]


@needs_bwrap
def test_the_sandbox_sees_the_graders_copy_of_the_course(tmp_path):
    course = sandbox.copy_course(tmp_path / "course")
    assert sorted(path.name for path in course.iterdir()) == ["tools", "utils"]
    assert not list(course.rglob("__pycache__"))
    (course / "utils" / "copied.txt").write_text("the copy")
    script = f"cat {REPO_ROOT}/utils/copied.txt; test -e {SITE_PACKAGES} && echo venv"
    full = sandbox.bwrap_command(
        BWRAP, ["sh", "-c", script], work=tmp_path, env={}, read_only=BINDS, course=course
    )
    assert subprocess.run(full, capture_output=True, text=True).stdout == "the copyvenv\n"
    assert not (REPO_ROOT / "utils" / "copied.txt").exists()
