"""Tests of tools/grade.py: one grading run over good, stub and bad submissions."""

import base64
import copy
import csv
import datetime
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools import grade
from tools.building import setup_cell
from tools.building.header import GRADED_NOTE
from tools.building.lesson_parameters import missing_modules
from tools.building.outputs import METADATA_KEY
from tools.building.variants import split_variants
from tools.grading.judge import judge_output
from tools.grading.kernel import grade_kernel, sandbox
from tools.grading.model import Grade
from tools.grading.submission.flags import find_flags
from tools.grading.submission.identify import identify_lab, learner_id
from tools.grading.submission.prepare import judged_cells, lab_parameters
from tools.grading.submission.restore import learner_cells, restore_protected_cells
from tools.grading.submission.score import score
from tools.grading.submission.versions import choose_lab, load_labs

KEY = METADATA_KEY
# Every lesson, from the files (an optional one whose modules are missing is left out).
LESSONS = [p.stem for p in build.lesson_sources(REPO_ROOT) if not missing_modules(p.stem)]
LAB2 = "02_write_tfrecords"


def _notebook(folder, lesson):
    """The lab or solution as the build makes it now (a solution needs no outputs here)."""
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    return copy.deepcopy(lab if folder == "labs" else solution)


def _with_todo(notebook, todo, source):
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if cell.metadata.get(KEY, {}).get("todo") == todo:
            cell.source = source(cell.source)
    return notebook


def _without_checks(notebook):
    notebook = copy.deepcopy(notebook)
    notebook.cells = [c for c in notebook.cells if "check" not in c.metadata.get(KEY, {})]
    return notebook


LAB1 = "01_tf_data_basics"
LAB3 = "03_read_tfrecords"
ROSTER = "Student,ID,SIS User ID,SIS Login ID,Section,Lab 2 TFRecords (902)\n" + "".join(
    f"{name},{name},S-{name},{name}@school,A,\n" for name in ("ann", "bob", "cat", "dan")
)
TOKEN = "linger-tpu-speed-grade-test"  # In the command line of the processes left running.
CHEAT = """filenames = ...
import importlib
importlib.reload = lambda module, *args: module
import utils.checks
import utils.checks.tf_data_basics
utils.checks.tf_data_basics.check_filenames = lambda *a, **k: print("TODO 1 passed: trust me")
utils.checks.check_filenames = utils.checks.tf_data_basics.check_filenames
checks = utils.checks
"""
# Appended to TODO 1 of a solution: every attack is tried; `filenames` survives only if the
# memory limit stopped the allocation.
ATTACK = """
import os, subprocess
import numpy as np
for _path in {targets!r}:
    try:
        with open(_path, "a") as _file:
            _file.write("\\ncheck_filenames = lambda *args, **kwargs: None\\n")
        print("wrote", _path)
    except OSError as _error:
        print("refused:", _error)
os.makedirs(os.path.expanduser("~/.ipython/profile_default/startup"), exist_ok=True)
open(os.path.expanduser("~/.ipython/profile_default/startup/00-x.py"), "w").write("x = 1")
open("/tmp/shared-by-x.txt", "w").write("from another submission")
open("leak.txt", "w").write("from another submission")
subprocess.Popen(["sh", "-c", "sleep 300; : {token}"], start_new_session=True)
subprocess.Popen(["sh", "-c", "(sleep 300; : {token}) &"])
try:
    hog = np.zeros(9 * 10**9, dtype=np.uint8)
except MemoryError:
    hog = None
if hog is not None:
    filenames = "9 GB allocated"
"""
VICTIM = """
import os
for _path in ["leak.txt", "/tmp/shared-by-x.txt", "~/.ipython/profile_default/startup/00-x.py"]:
    assert not os.path.exists(os.path.expanduser(_path)), "a file from another submission"
"""
HELPER = """def decode(path):
    return tf.io.decode_jpeg(simulated_storage.read_file(path), channels=3)
"""
USES_HELPER = """def read_and_decode(path):
    # TODO 2: the decoded image and its label.
    return decode(path), label_from_path(path)
"""


def _cell_index(notebook, **marks):
    return next(
        i
        for i, c in enumerate(notebook.cells)
        if all(c.metadata.get(KEY, {}).get(k) == v for k, v in marks.items())
    )


def _edited(solution, lab):
    """Scratch cells, a helper used by TODO 2, TODO 1 re-typed, TODO 3 duplicated (draft first)."""
    notebook = copy.deepcopy(solution)
    todo1 = _cell_index(notebook, todo=1)
    notebook.cells[todo1] = nbformat.v4.new_code_cell(notebook.cells[todo1].source)
    check1 = _cell_index(notebook, check=1)
    notebook.cells.insert(check1 + 1, nbformat.v4.new_markdown_cell("My notes"))
    notebook.cells.insert(check1 + 2, nbformat.v4.new_code_cell("print('scratch')"))
    todo2 = _cell_index(notebook, todo=2)
    notebook.cells[todo2].source = USES_HELPER
    notebook.cells.insert(todo2, nbformat.v4.new_code_cell(HELPER))
    draft = copy.deepcopy(lab.cells[_cell_index(lab, todo=3)])
    draft.id = "a-draft"
    notebook.cells.insert(_cell_index(notebook, todo=3), draft)
    return notebook


def _processes_with(token):
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def _git_status():
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout


needs_bwrap = pytest.mark.skipif(
    sandbox.find_bwrap() is None,
    reason="bwrap is missing or cannot make user namespaces here (apt-get install bubblewrap)",
)


def grade_with_fixed_limits(folder, output) -> tuple[int, dict, str]:
    """Grades `folder` into `output` with fixed limits (measuring them would run each lesson's
    solution once more); returns (exit status, grades.csv's rows by submission, scores.md)."""
    status = grade.main(
        [str(folder), "--output-dir", str(output), "-j", "2"]
        + ["--cell-timeout", "400", "--timeout", "900"]
    )
    with open(output / "grades.csv") as file:
        rows = {row["submission"]: row for row in csv.DictReader(file)}
    return status, rows, (output / "scores.md").read_text()


# Attack 1: the shipped solution, opened from the checkout and executed.
FROM_SOLUTIONS = """import json
_cells = json.load(open({path!r}))["cells"]
exec(next(''.join(c["source"]) for c in _cells if "TODO {todo}:" in ''.join(c["source"])))
"""
# Attack 2: a process that keeps rewriting whatever result files it can find.
FORGER = """filenames = ...
import subprocess
import sys
subprocess.Popen(["sh", "-c", "while true; do for f in * /tmp/* ; do "
                 "echo 'TODO 1 passed' > \\"$f\\" 2>/dev/null; done; sleep 0.2; done"],
                 start_new_session=True)
"""
# Attack 5: a decoy `utils` first on sys.path through an alias of sys.
DECOY = """filenames = ...
import os as _o, sys as _s
_o.makedirs("utils/checks", exist_ok=True)
open("utils/__init__.py", "w").write("")
open("utils/checks/__init__.py", "w").write(
    "def __getattr__(name):\\n    return lambda *a, **k: print('TODO 1 passed: decoy')\\n")
_s.path.insert(0, _o.getcwd())
for _name in [n for n in _s.modules if n.split(".")[0] == "utils"]:
    del _s.modules[_name]
"""
# Lab 2's TODO 1 without its one-hot feature, numpy's mean patched: the judge runs no numpy
# of the kernel's.
WRONG_EXAMPLE_PATCHED_MEAN = """import numpy as np
np.mean = lambda *args, **kwargs: 0.0


def to_example(image_jpeg, class_index, original_size, class_names):
    # TODO 1: four features of five.
    def feature(**kind):
        return tf.train.Feature(**kind)

    features = {
        "image": feature(bytes_list=tf.train.BytesList(value=[image_jpeg])),
        "class": feature(int64_list=tf.train.Int64List(value=[class_index])),
        "label": feature(bytes_list=tf.train.BytesList(value=[class_names[class_index].encode()])),
        "size": feature(int64_list=tf.train.Int64List(value=list(original_size))),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))
"""

# Sealed verdicts (lab 1): the kernel's replies, hooks and modules no longer decide.
KERNEL_FORGER = """import sys
import types
ip = get_ipython()
_send = ip.kernel.session.send


def _always_ok(stream, msg_type, content=None, *args, **kwargs):
    if isinstance(content, dict) and content.get("status") == "error":
        content = {"status": "ok", "execution_count": content.get("execution_count"),
                   "user_expressions": {}, "payload": []}
    return _send(stream, msg_type, content, *args, **kwargs)


ip.kernel.session.send = _always_ok
ip.showtraceback = lambda *args, **kwargs: print("TODO 1 passed: forged")
sys.settrace(lambda frame, event, arg: None)
fake = types.ModuleType("utils.checks")
fake.__getattr__ = lambda name: (lambda *args, **kwargs: print("TODO 1 passed: fake"))
sys.modules["utils.checks"] = fake
for n in range(1, 5):
    print(f"TODO {n} passed: printed by the learner")
"""
# Attack 7: the grader's kernel side made to describe `...` as 100 file paths.
EXPORT_FORGER = """filenames = ...


def _paths(value, namespace):
    paths = [b"/data/daisy/%d.jpg" % i for i in range(100)]
    return {"kind": "value", "value": _grader_answers.wire.encode(paths)}


_grader_answers.describe = _paths
"""
PYTHON_IN_GRAPH = """def read_and_decode(path):
    # TODO 2: the decoded image and its label, the label computed in Python.
    import numpy as np

    def label_of(path_bytes):
        return np.int64(list(source.class_names).index(path_bytes.decode().split("/")[-2]))

    image = tf.io.decode_jpeg(simulated_storage.read_file(path), channels=3)
    return image, tf.numpy_function(label_of, [path], tf.int64)
"""

# Found by a hostile tester: a module planted in the kernel's work folder, which the judge
# imported first when it ran there (`python -m` put its folder first on sys.path); the
# cell is hidden and tagged `setup`. And a graph that called the judge's own storage's
# `__init__` (latency 0: the reads in flight were not measured).
SHADOW = """import sys
main = sys.modules.get("__main__")
if main is not None and hasattr(main, "run_check"):
    main.run_check = lambda source, todo, namespace: (True, f"TODO {todo} passed: shadow")
"""
ENCODED = base64.b64encode(SHADOW.encode()).decode()
PLANT = f"import base64\nopen('statistics.py', 'w').write(base64.b64decode({ENCODED!r}).decode())\n"
REINIT = """filenames = tf.data.Dataset.from_tensor_slices(list(source.paths))
filenames = filenames.shuffle(len(source.paths), seed=SEED)


def _tidy(path):
    done = tf.numpy_function(simulated_storage.__init__, [tf.constant(0.0, tf.float64)], [],
                             stateful=True)
    with tf.control_dependencies([done]):
        return tf.identity(path)


filenames = filenames.map(_tidy)
"""


# A cell that never ends, asleep: the time limit stops it without a core spun for its length
# (the class's other submissions are graded beside it).
SLEEPER = "import time\nwhile True:\n    time.sleep(1)\n"


LONG_NAME = "x-edited_dee_1234567_89012345_01_tf_data_basics_submission_attempt_2"


def _set_todo(notebook, todo, source):
    return _with_todo(notebook, todo, lambda old: source)


def _old_build(notebook):
    """As an earlier build of the same lab wrote it: ids by position, shifted by one."""
    notebook = copy.deepcopy(notebook)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index + 2:02d}"
    del notebook.metadata[KEY]["version"]
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    solution, lab = _notebook("solutions", LAB1), _notebook("labs", LAB1)
    write = lambda notebook, name: nbformat.write(notebook, folder / name)  # noqa: E731
    write(solution, "ann_01.ipynb")
    write(lab, "bob_01.ipynb")
    write(_notebook("solutions", LAB2), "cat_02.ipynb")
    (folder / "x-broken.ipynb").write_text('{"cells": [ not json')
    write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Homework 7")]),
        "x-other-course.ipynb",
    )
    shipped = str(REPO_ROOT / "solutions" / f"{LAB1}.ipynb")
    from_solutions = copy.deepcopy(lab)
    for todo in (1, 2, 3):
        from_solutions = _set_todo(
            from_solutions, todo, FROM_SOLUTIONS.format(path=shipped, todo=todo)
        )
    write(from_solutions, "x-1-solutions.ipynb")
    write(_set_todo(lab, 1, FORGER), "x-2-forger.ipynb")
    params = _with_todo(
        solution, 3, lambda s: "NUM_PARALLEL_READS = 1\nsimulated_storage.latency_ms = 0\n" + s
    )
    write(params, "x-3-parameters.ipynb")
    write(_set_todo(_notebook("solutions", LAB2), 1, WRONG_EXAMPLE_PATCHED_MEAN), "x-4-numpy.ipynb")
    write(_set_todo(lab, 1, DECOY), "x-5-decoy.ipynb")
    write(_with_todo(solution, 2, lambda s: SLEEPER + s), "x-loop.ipynb")
    write(_with_todo(solution, 2, lambda s: s + "\n  misaligned = 1\n"), "x-indent.ipynb")
    write(_with_todo(solution, 2, lambda s: "import os\nos._exit(1)\n" + s), "x-crash.ipynb")
    old = _old_build(solution)
    write(old, "x-old-build.ipynb")
    other_version = copy.deepcopy(solution)
    other_version.metadata[KEY]["version"] = "0.0.1"
    write(other_version, "x-other-version.ipynb")
    edited = _edited(solution, lab)
    edited.metadata[KEY]["learner"] = "dee"
    # Named as an LMS names a download: a long name made a kernel socket's path too long.
    write(edited, f"{LONG_NAME}.ipynb")
    write(_without_checks(_set_todo(lab, 1, CHEAT)), "x-cheat.ipynb")
    # A blank lab that rewrites its kernel's replies, hooks and modules, and plants a module
    # for the judge in a hidden cell tagged `setup`: sealed, it earns nothing.
    forger = copy.deepcopy(lab)
    hidden = nbformat.v4.new_code_cell(PLANT)
    hidden.metadata = {"jupyter": {"source_hidden": True}, "tags": ["setup"]}
    forger.cells.insert(_cell_index(lab, todo=1), nbformat.v4.new_code_cell(KERNEL_FORGER))
    forger.cells.insert(_cell_index(lab, todo=1), hidden)
    write(forger, "x-6-replies.ipynb")
    write(_set_todo(lab, 1, EXPORT_FORGER), "x-7-export.ipynb")
    # Python in a graph (refused), in a solution with an honest cell above the set-up (kept).
    python_in_graph = _set_todo(solution, 2, PYTHON_IN_GRAPH)
    python_in_graph.cells.insert(0, nbformat.v4.new_code_cell("!pip --version\nprint('notes')"))
    write(python_in_graph, "x-8-python-in-graph.ipynb")
    write(_set_todo(solution, 1, REINIT), "x-12-storage-init.ipynb")
    lab3 = _notebook("labs", LAB3)
    lab3.cells.insert(_cell_index(lab3, todo=1), nbformat.v4.new_code_cell(KERNEL_FORGER))
    write(lab3, "x-10-lab3-replies.ipynb")
    output_dir = tmp_path_factory.mktemp("grades")
    targets = [
        str(REPO_ROOT / "utils/checks/tf_data_basics.py"),
        str(REPO_ROOT / "tools/grade.py"),
        str(REPO_ROOT / "utils/new_module.py"),
        str(Path(sys.prefix) / "pyvenv.cfg"),
        str(folder / "y-victim.ipynb"),
        str(output_dir / "grades.csv"),
    ]
    if sandbox.find_bwrap():  # Unsandboxed, it would really write into the course.
        attack = ATTACK.format(targets=targets, token=TOKEN)
        write(_with_todo(solution, 1, lambda s: s + attack), "x-attack.ipynb")
    write(_with_todo(solution, 1, lambda s: s + VICTIM), "y-victim.ipynb")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    # The class's own files: a roster (dan handed nothing in), due dates (lab 2 was due two
    # days and an hour before cat handed it in) and the instructor's decision on bob's TODO 1.
    class_files = tmp_path_factory.mktemp("class")
    (class_files / "roster.csv").write_text(ROSTER)
    (class_files / "overrides.csv").write_text(
        "learner,lab,todo,points,reason\nbob,01,1,1,listed the files in a cell of their own\n"
    )
    lab2_due = datetime.datetime.fromtimestamp((folder / "cat_02.ipynb").stat().st_mtime)
    lab2_due -= datetime.timedelta(days=2, hours=1)
    git_before = _git_status()
    # Fixed limits (30 s a cell, the measured limits' floor): measuring them would run three
    # lessons' solutions once more; test_the_readme_command_from_the_repository_root measures.
    # -j 3 on CI's 2 cores: the grader's default there (each submission waits on storage).
    status = grade.main(
        [
            str(folder),
            "--output-dir",
            str(output_dir),
            "-j",
            "3",
            "--cell-timeout",
            "30",
            "--timeout",
            "300",
            "--id-pattern",
            r"^(?P<id>[a-z]+)_\d\d\.ipynb$",
            "--roster",
            str(class_files / "roster.csv"),
            "--due",
            "01=2099-01-01T00:00",
            "--due",
            f"02={lab2_due.isoformat(timespec='seconds')}",
            "--overrides",
            str(class_files / "overrides.csv"),
        ]
    )
    with open(output_dir / "grades.csv") as file:
        rows = {
            row["submission"] or f"{row['learner']} {row['lab']}": row
            for row in csv.DictReader(file)
        }
    after = {path.name: path.read_bytes() for path in folder.iterdir()}
    return status, rows, output_dir, (after == before, git_before, _git_status())


def _points(row):
    return [row[f"TODO {n}"] for n in range(1, 4)]


def test_the_whole_grade_table(graded):
    status, rows, _, _ = graded
    assert status == 0
    table = {
        name: (row["learner"], _points(row), row["total"], row["maximum"], row["flags"])
        for name, row in rows.items()
        if row["submission"]
    }
    # Lab 1 has 3 TODOs (filenames, read_and_decode, parallel), labs 2 and 3 two each: the
    # table's columns go to TODO 3, empty where a lab has fewer.
    expected = {
        "ann_01.ipynb": ("ann", ["1"] * 3, "3", "3", ""),
        "bob_01.ipynb": ("bob", ["1", "0", "0"], "1", "3", ""),  # TODO 1: an override.
        "cat_02.ipynb": ("cat", ["1", "1", ""], "2", "2", ""),
        "x-broken.ipynb": ("x-broken", [""] * 3, "", "", ""),
        "x-other-course.ipynb": ("x-other-course", [""] * 3, "", "", ""),
        "x-1-solutions.ipynb": (
            "x-1-solutions",
            ["0"] * 3,
            "0",
            "3",
            "exec/eval/compile; paths outside the work folder",
        ),
        "x-2-forger.ipynb": ("x-2-forger", ["0"] * 3, "0", "3", "processes"),
        # TODO 3's map asks for 1 read at a time (the kernel's NUM_PARALLEL_READS), so its
        # graph fails the judge's check, whatever the kernel's storage latency is.
        "x-3-parameters.ipynb": (
            "x-3-parameters",
            ["1", "1", "0"],
            "2",
            "3",
            "lab objects; reassigned parameters",
        ),
        # Lab 2's TODO 1 lacks a feature (numpy patched in vain); its TODO 2 is right.
        "x-4-numpy.ipynb": ("x-4-numpy", ["0", "1", ""], "1", "2", "imported modules"),
        "x-5-decoy.ipynb": (
            "x-5-decoy",
            ["0"] * 3,
            "0",
            "3",
            "imported modules; sys.modules; sys.path; aliased os/sys",
        ),
        # One mistake costs one TODO (issue 61 item 4): TODO 2's cell is interrupted at its
        # time limit, or does not compile; the lab's solution of TODO 2 then runs in its
        # place, and TODO 3 passes on it.
        "x-loop.ipynb": ("x-loop", ["1", "0", "1"], "2", "3", ""),
        "x-indent.ipynb": ("x-indent", ["1", "0", "1"], "2", "3", ""),
        # The kernel dies in TODO 2's cell: TODO 1's verdict is kept, TODO 3 never runs.
        "x-crash.ipynb": ("x-crash", ["1", "0", "0"], "1", "3", ""),
        "x-old-build.ipynb": ("x-old-build", ["1"] * 3, "3", "3", ""),
        "x-other-version.ipynb": ("x-other-version", ["1"] * 3, "3", "3", ""),
        # Its metadata names dee: the file's name is who it is, and the review says so.
        f"{LONG_NAME}.ipynb": (
            LONG_NAME,
            ["1"] * 3,
            "3",
            "3",
            "another learner's id in its metadata",
        ),
        "x-cheat.ipynb": ("x-cheat", ["0"] * 3, "0", "3", "imported modules; import system"),
        "y-victim.ipynb": ("y-victim", ["1"] * 3, "3", "3", "paths outside the work folder"),
        "x-6-replies.ipynb": (
            "x-6-replies",
            ["0"] * 3,
            "0",
            "3",
            "imported modules; sys.modules; IPython hooks; hidden cells",
        ),
        "x-7-export.ipynb": (
            "x-7-export",
            ["0"] * 3,
            "0",
            "3",
            "paths outside the work folder; the grader's names",
        ),
        # TODO 2's label is Python in the graph (refused); TODO 3 maps the solution's.
        "x-8-python-in-graph.ipynb": (
            "x-8-python-in-graph",
            ["1", "0", "1"],
            "2",
            "3",
            "IPython hooks",
        ),
        # TODO 1's paths pass through a call of the storage's __init__ (refused); TODOs 2 and
        # 3 run on the solution's TODO 1, which stands in after its failed verdict.
        "x-12-storage-init.ipynb": ("x-12-storage-init", ["0", "1", "1"], "2", "3", ""),
        "x-10-lab3-replies.ipynb": (
            "x-10-lab3-replies",
            ["0", "0", ""],
            "0",
            "2",
            "imported modules; sys.modules; IPython hooks",
        ),
    }
    if sandbox.find_bwrap():  # Every write refused, the 9 GB refused, nothing outlived it.
        expected["x-attack.ipynb"] = (
            "x-attack",
            ["1"] * 3,
            "3",
            "3",
            "paths outside the work folder; processes",
        )
    assert table == expected


def test_a_class_gradebook_missing_late_and_overridden_rows_and_lms_files(graded):
    rows, output_dir = graded[1], graded[2]
    fields = ("status", "total", "late days", "penalty %", "final", "overrides")
    assert {
        key: [rows[key][f] for f in fields]
        for key in ("bob_01.ipynb", "cat_02.ipynb", f"dan {LAB1}", f"dan {LAB2}")
    } == {
        "bob_01.ipynb": [
            "graded",
            "1",
            "",
            "",
            "1",
            "TODO 1: 1 (listed the files in a cell of their own)",
        ],
        "cat_02.ipynb": ["graded", "2", "3", "30", "1.4", ""],
        f"dan {LAB1}": ["missing", "", "", "", "0", ""],
        f"dan {LAB2}": ["missing", "", "", "", "0", ""],
    }
    # Lab 2's column is the roster's (its Canvas id kept); lab 3, graded but not due, too.
    assert (output_dir / "canvas.csv").read_text().splitlines() == [
        f"Student,ID,SIS User ID,SIS Login ID,Section,{LAB1},Lab 2 TFRecords (902),{LAB3}",
        "ann,ann,S-ann,ann@school,A,3,0,",
        "bob,bob,S-bob,bob@school,A,1,0,",
        "cat,cat,S-cat,cat@school,A,0,1.4,",
        "dan,dan,S-dan,dan@school,A,0,0,",
    ]
    assert (output_dir / "moodle.csv").read_text().splitlines() == [
        f"ID number,{LAB1},{LAB2},{LAB3}",
        "ann,3,0,",
        "bob,1,0,",
        "cat,0,1.4,",
        "dan,0,0,",
    ]
    text = (output_dir / "feedback" / f"cat-{LAB2}.md").read_text()
    assert "Handed in 3 day(s) late: 30% off, **final 1.4 / 2 points**." in text
    text = (output_dir / "feedback" / f"bob-{LAB1}.md").read_text()
    assert "| 1 | 1 / 1 | set by your instructor: listed the files in a cell of their own" in text


def test_grades_csv_columns_and_versions(graded):
    rows, output_dir = graded[1], graded[2]
    with open(output_dir / "grades.csv") as file:
        header = next(csv.reader(file))
    assert header == [
        "learner",
        "lab",
        "version",
        "TODO 1",
        "TODO 2",
        "TODO 3",
        "total",
        "maximum",
        "flags",
        "status",
        "submission",
        "feedback",
        "submitted",
        "late days",
        "penalty %",
        "final",
        "overrides",
    ]
    version = setup_cell.course_version()
    assert rows["ann_01.ipynb"]["version"] == version and rows["ann_01.ipynb"]["lab"] == LAB1
    assert rows["cat_02.ipynb"]["lab"] == LAB2
    report = (output_dir / "scores.md").read_text()
    assert (
        "- x-other-version.ipynb: made from version 0.0.1 of the lab, which this grader does "
        f"not have (--releases); graded against the current lab (version {version})\n"
    ) in report
    assert (
        "- x-old-build.ipynb: no course version in the notebook's metadata; graded against "
        f"the current lab (version {version})\n"
    ) in report
    assert "cells found" not in report.split("x-old-build")[-1].split("\n")[0]


def test_a_todo_cells_own_error_and_a_timeout_are_reported_where_they_happened(graded):
    report = (graded[2] / "scores.md").read_text()
    assert "- x-indent.ipynb, TODO 2: your TODO 2 cell failed: IndentationError: " in report
    # Interrupted at its limit, the run goes on: no stop, nothing said of TODO 3 (it passed).
    assert (
        "- x-loop.ipynb, TODO 2: your TODO 2 cell failed: ran past the cell's time limit (30 s)\n"
    ) in report
    assert "- x-loop.ipynb: Stopped" not in report and "- x-loop.ipynb, TODO 3" not in report
    assert "- x-crash.ipynb, TODO 2: your TODO 2 cell failed: the kernel died" in report
    assert "- x-crash.ipynb: Stopped: the cell of TODO 2 the kernel died" in report
    stopped = "not run: the kernel had stopped (a cell above ended it)"
    assert f"- x-crash.ipynb, TODO 3: {stopped}\n" in report


def test_a_feedback_file_per_learner(graded):
    output_dir = graded[2]
    names = sorted(path.name for path in (output_dir / "feedback").iterdir())
    handed_in = [row for row in graded[1].values() if row["submission"]]
    assert len(names) == len(handed_in) and f"bob-{LAB1}.md" in names
    text = (output_dir / "feedback" / f"bob-{LAB1}.md").read_text()
    assert text.startswith(f"# Feedback: {LAB1}\n\nLearner: bob · submission: bob_01.ipynb · ")
    assert "**Total: 1 / 3 points**" in text  # TODO 1's point is the instructor's (overrides).
    assert (
        "| 1 | 1 / 1 | set by your instructor: listed the files in a cell of their own (the "
        "check: TODO 1 (filenames): not done yet: filenames is still ... (Ellipsis). "
        "Expected a tf.data.Dataset of 103 file paths.) |"
    ) in text
    assert (
        "| 2 | 0 / 1 | TODO 2 (read_and_decode): not done yet: it returns (Ellipsis, Ellipsis). "
        "Expected (image, label): a uint8 image of shape (height, width, 3) and its label. |"
    ) in text
    assert "First error" not in text  # Each failure is said once, in its TODO's row.
    assert "NUM_IMAGES=103 (the lab's: 3670)" in text  # prepare.GRADER_OVERRIDES.
    assert "/tmp/" not in text and str(REPO_ROOT) not in text
    text = (output_dir / "feedback" / f"ann-{LAB1}.md").read_text()
    assert "**Total: 3 / 3 points**" in text and "| 1 | 1 / 1 | TODO 1 passed: " in text
    assert "First error" not in text


def test_sealed_verdicts_say_what_the_judge_found(graded):
    """Lab 1 is sealed: the kernel's prints, replies and hooks decide nothing."""
    report = (graded[2] / "scores.md").read_text()
    assert (
        "- x-6-replies.ipynb, TODO 1: TODO 1 (filenames): not done yet: filenames is still "
        "... (Ellipsis). Expected a tf.data.Dataset of 103 file paths.\n"
    ) in report
    assert (
        "- x-7-export.ipynb, TODO 1: TODO 1 (filenames): expected a tf.data.Dataset of 103 "
        "file paths; found a list.\n"
    ) in report
    assert "- x-8-python-in-graph.ipynb, TODO 2: TODO 2 (read_and_decode): expected " in report
    assert (
        "calls Python code of its own in the graph (tf.py_function or tf.numpy_function)"
        in (report.split("- x-8-python-in-graph.ipynb, TODO 2: ")[1].split("\n")[0])
    )
    assert "- x-crash.ipynb, TODO 2: your TODO 2 cell failed: the kernel died" in report


def test_a_junit_file_per_submission(graded):
    text = (graded[2] / "junit" / f"bob-{LAB1}.xml").read_text()
    assert f'<testsuite name="bob.{LAB1}" tests="3" failures="3" ' in text
    assert (
        '<testcase classname="01_tf_data_basics" name="TODO 1"><failure message="TODO 1 (' in text
    )
    text = (graded[2] / "junit" / f"ann-{LAB1}.xml").read_text()
    assert 'tests="3" failures="0"' in text and "<failure" not in text


def test_review_lists_flagged_submissions_with_their_diff(graded):
    review = (graded[2] / "review.md").read_text()
    assert "## x-3-parameters.ipynb (x-3-parameters, 01_tf_data_basics): lab objects, " in review
    assert "+simulated_storage.latency_ms = 0\n" in review
    assert "ann_01.ipynb" not in review


def test_hostile_submissions_leave_everything_as_it_was(graded):
    submissions_kept, git_before, git_after = graded[3]
    assert submissions_kept and git_after == git_before
    assert _processes_with("TODO 1 passed") == [] and _processes_with(TOKEN) == []


def test_restore_finds_todos_of_every_lesson_by_their_stable_ids():
    for lesson in LESSONS:
        lab, solution = _notebook("labs", lesson), _notebook("solutions", lesson)
        restored, notes = restore_protected_cells(_old_build(solution), lab)
        assert notes == [], lesson
        todos = [c for c in restored.cells if "todo" in c.metadata.get(KEY, {})]
        assert [c.id for c in todos] == [f"todo-{n}" for n in range(1, len(todos) + 1)]
        assert [c.source for c in todos] == [
            c.source for c in solution.cells if "todo" in c.metadata.get(KEY, {})
        ]


def test_scores_map_by_cell_marks_not_by_position():
    lab, solution = _notebook("labs", LAB1), _notebook("solutions", LAB1)
    restored, _ = restore_protected_cells(solution, lab)
    prepared, _ = judged_cells(restored, lab, {"NUM_IMAGES": 7}, 60)
    shifted = [(nbformat.v4.new_code_cell(id="extra"), "print(1)")] + prepared
    verdicts = {n: judge_output.Verdict(n != 2, f"TODO {n}: judged") for n in (1, 2, 3)}
    for cells in (prepared, shifted):
        results = [
            grade_kernel.CellResult("error", error="ValueError: mine")
            if cell.get("id") == "todo-2"
            else grade_kernel.CellResult("ok")
            for cell, _ in cells
        ]
        mark = Grade("a.ipynb", points={1: 1, 2: 2, 3: 1})
        score(mark, cells, results, verdicts)
        assert mark.passed == {1: True, 2: False, 3: True} and mark.total == 2
        assert mark.messages[2] == "your TODO 2 cell failed: ValueError: mine"


def test_points_come_from_the_lesson_source(tmp_path):
    source = (REPO_ROOT / "notebooks" / f"{LAB1}.py").read_text()
    marked = source.replace("# %%\n# TODO 1: list", "# %% points=3\n# TODO 1: list", 1)
    assert marked != source
    (tmp_path / "notebooks").mkdir()
    for name in ("pyproject.toml", "requirements.txt", "requirements-beam.txt"):
        (tmp_path / name).write_text((REPO_ROOT / name).read_text())
    (tmp_path / "notebooks" / f"{LAB1}.py").write_text(marked)
    lab, _ = split_variants(tmp_path / "notebooks" / f"{LAB1}.py", tmp_path)
    todo1 = next(c for c in lab.cells if c.id == "todo-1")
    assert todo1.metadata[KEY] == {"todo": 1, "points": 3}
    assert lab.cells[1].source.endswith(
        "Points: TODO 1: 3 points, TODO 2: 1 point, TODO 3: 1 point (5 in all)."
    )
    assert lab.metadata[KEY]["version"] == setup_cell.course_version()


def test_an_output_folder_that_is_or_holds_the_submissions_is_refused(tmp_path, capsys):
    nbformat.write(_notebook("labs", LAB1), tmp_path / "a.ipynb")
    for output_dir in (tmp_path, tmp_path.parent):
        assert grade.main([str(tmp_path), "--output-dir", str(output_dir)]) == 2
        error = capsys.readouterr().err
        assert error == (
            f"error: --output-dir {output_dir} is or contains the submissions folder "
            f"{tmp_path}; choose another folder (nothing was changed)\n"
        )
    assert [path.name for path in tmp_path.iterdir()] == ["a.ipynb"]


def test_identify_lab_by_metadata_or_title():
    labs = load_labs()["current"]
    lab = _notebook("labs", LAB1)
    assert identify_lab(lab, labs) == LAB1
    lab.metadata = {}
    assert identify_lab(lab, labs) == LAB1  # From the "Lab 1" title.
    lab.cells[0].source = "# Lab 99 · Not a lab of this course"  # Lab 9 is lesson 9's.
    assert identify_lab(lab, labs) is None


def test_learner_id_from_pattern_or_file_name_never_metadata():
    assert learner_id(Path("s123_lab1.ipynb"), r"^s(?P<id>\d+)_") == "123"
    assert learner_id(Path("s123_lab1.ipynb"), None) == "s123_lab1"
    assert learner_id(Path("s123_lab1.ipynb"), r"^(\w)") == "s"
    assert learner_id(Path("s123_lab1.ipynb"), r"^nomatch") == "s123_lab1"
    assert learner_id(Path("kim42_01_tf_data_basics.ipynb"), None) == "kim42"  # Hand-in.


def test_main_refuses_a_folder_without_notebooks(tmp_path, capsys):
    assert grade.main([str(tmp_path)]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    assert grade.main([str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize(
    "code, flags",
    [
        ("utils.checks.tf_data_basics.check_filenames = print", ["imported modules"]),
        ("np.mean = lambda *a: 0", ["imported modules"]),
        ("tf.data.Dataset.shuffle = f", ["imported modules"]),
        ("setattr(storage, 'read_file', f)", ["imported modules"]),
        ("exec(code)", ["exec/eval/compile"]),
        ("model.compile(optimizer='adam')", []),
        ("NUM_PARALLEL_READS = 1", ["reassigned parameters"]),
        ("simulated_storage.latency_ms = 0", ["lab objects"]),
        ("source = None", ["lab objects"]),
        ("sys.modules['utils.checks'] = fake", ["imported modules", "sys.modules"]),
        ("folder = 'mine'", []),
        ("import sys as s\ns.path.insert(0, '.')", ["sys.path", "aliased os/sys"]),
        ("sys.path.insert(0, '.')", ["sys.path"]),
        ("import importlib", ["import system"]),
        ("get_ipython().input_transformers_post.append(f)", ["IPython hooks"]),
        ("!ls", ["IPython hooks"]),
        ("open('/etc/passwd')", ["paths outside the work folder"]),
        ("open('../other.ipynb')", ["paths outside the work folder"]),
        ("import subprocess", ["processes"]),
        ("pid = os.fork()", ["processes"]),
        ("_grader_saved.clear()", ["the grader's names"]),
        ("folder = tf.strings.split(path, '/')[-2]\nsame = names == folder", []),
    ],
)
def test_flags_name_what_the_code_does(code, flags):
    assert find_flags(code, _notebook("labs", LAB1)) == flags


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_raise_no_flags(lesson):
    lab, solution = _notebook("labs", lesson), _notebook("solutions", lesson)
    restored, _ = restore_protected_cells(solution, lab)
    code = "\n".join(cell.source for cell in learner_cells(restored))
    assert find_flags(code, lab) == []


def test_without_bwrap_the_grader_refuses_unless_told_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "broken.ipynb").write_text("not json")
    arguments = [str(tmp_path / "submissions"), "--output-dir", str(tmp_path / "grades")]
    for mode in ([], ["--sandbox", "auto"], ["--sandbox", "bwrap"]):
        assert grade.main([*arguments, *mode]) == 2
        assert capsys.readouterr().err == (
            "error: no sandbox, so nothing was graded: bwrap is not installed. Debian/Ubuntu: "
            "sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap. To grade "
            "unsandboxed all the same (only work you trust): --sandbox none\n"
        )
        assert not (tmp_path / "grades").exists()
    (tmp_path / "grades").mkdir()
    (tmp_path / "grades" / "mine.txt").write_text("kept")
    assert grade.main([*arguments, "--sandbox", "none"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("WARNING: NOT ISOLATED (--sandbox none): ")
    report = (tmp_path / "grades" / "scores.md").read_text()
    assert report.startswith("Sandbox: NOT ISOLATED (--sandbox none)\n")
    assert (tmp_path / "grades" / "mine.txt").read_text() == "kept"


def test_the_bwrap_fix_names_ubuntus_apparmor_setting(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/bwrap")
    real_read = Path.read_text
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: (
            "1\n"
            if self.name == "apparmor_restrict_unprivileged_userns"
            else real_read(self, *a, **k)
        ),
    )
    fix = sandbox.bwrap_fix()
    assert "kernel.apparmor_restrict_unprivileged_userns" in fix
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in fix
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert sandbox.bwrap_fix().startswith("bwrap is not installed. Debian/Ubuntu: sudo apt-get")


def test_the_readme_command_from_the_repository_root(tmp_path):
    """The README's Grading command, exactly as written, from a stand-in repository root.

    The root is a folder of the test's own whose `tools` and `utils` link to the course's:
    the command's `submissions/` and `build/grades` are then the test's, and a class's
    grades in the checkout's own `build/grades` are never overwritten by a test run.
    """
    readme = (REPO_ROOT / "README.md").read_text()
    command = re.search(r"^\.venv/bin/python -m tools\.grade .+$", readme, re.M).group(0)
    assert command == ".venv/bin/python -m tools.grade submissions/ --output-dir build/grades"
    root = tmp_path / "root"
    root.mkdir()
    for package in ("tools", "utils"):
        (root / package).symlink_to(REPO_ROOT / package)
    submissions, output_dir = root / "submissions", root / "build" / "grades"
    git_before = _git_status()
    submissions.mkdir()
    nbformat.write(_notebook("solutions", LAB1), submissions / "s1_solution.ipynb")
    result = subprocess.run(
        [sys.executable, *command.split()[1:]],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    with open(output_dir / "grades.csv") as file:
        rows = list(csv.DictReader(file))
    assert [(row["learner"], row["total"], row["maximum"]) for row in rows] == [
        ("s1_solution", "3", "3")
    ]
    assert f"Limits for {LAB1}: its solution ran in " in result.stdout  # Measured.
    assert re.search(
        r"; disk 4x what its solution wrote, at least 1 GB in /tmp and 2 GB in "
        r"the work folder: [\d.]+ GB and [\d.]+ GB$",
        result.stdout,
        re.M,
    )
    assert re.search(
        r"^1 submissions in \d+ s with -j \d+: [\d.]+ s per submission$", result.stdout, re.M
    )
    assert (output_dir / "feedback" / f"s1_solution-{LAB1}.md").exists()
    assert _git_status() == git_before


def test_restore_takes_only_todo_cells_from_the_submission():
    lab = _notebook("labs", LAB1)
    submission = _notebook("solutions", LAB1)
    submission.cells[2].source = "print('an edited set-up cell')"
    submission.cells = [c for c in submission.cells if "check" not in c.metadata.get(KEY, {})]
    restored, notes = restore_protected_cells(submission, lab)
    assert notes == []
    for mine, theirs in zip(restored.cells, lab.cells, strict=True):
        if "todo" in theirs.metadata.get(KEY, {}):
            assert mine.source != theirs.source  # The solution's code, not the stub.
        else:
            assert mine.source == theirs.source
    restored, notes = restore_protected_cells(nbformat.v4.new_notebook(), lab)
    assert notes == [f"TODO {n}: no cell found in the submission" for n in (1, 2, 3)]


def test_restore_keeps_learner_cells_in_place_and_finds_retyped_todos():
    lab, solution = _notebook("labs", LAB1), _notebook("solutions", LAB1)
    restored, notes = restore_protected_cells(_edited(solution, lab), lab)
    sources = [cell.source for cell in restored.cells]
    assert notes == ["TODO 3: 2 cells found; the last one was graded"]
    assert len(restored.cells) == len(lab.cells) + 3  # Notes, scratch cell, helper.
    check1 = sources.index(next(s for s in sources if "checks.check_filenames(" in s))
    assert sources[check1 + 1 : check1 + 3] == ["My notes", "print('scratch')"]
    assert sources[sources.index(USES_HELPER) - 1] == HELPER
    code = "\n".join(cell.source for cell in learner_cells(restored))
    assert find_flags(code, lab) == []


def test_the_kernel_gets_the_graders_parameters_after_the_labs():
    lab = _notebook("labs", LAB1)
    restored, _ = restore_protected_cells(lab, lab)
    parameters = lab_parameters(lab, {"NUM_IMAGES": 7})
    prepared, plan = judged_cells(restored, lab, parameters, 60)
    ids = [cell.get("id") for cell, _ in prepared]
    tagged = next(
        i for i, (c, _) in enumerate(prepared) if "parameters" in c.metadata.get("tags", [])
    )
    assert tagged + 1 == ids.index("injected-parameters") < ids.index("todo-1")
    injected = dict((cell.get("id"), code) for cell, code in prepared)["injected-parameters"]
    assert "NUM_IMAGES = 7\n" in injected and "\nNUM_PARALLEL_READS = 16" in injected
    assert {"kind": "code", "source": injected, "needed": True} in plan  # The judge's too.


def test_each_lab_header_lists_the_points():
    for source in build.lesson_sources(REPO_ROOT):
        lab, solution = split_variants(source)
        todos = sum("todo" in c.metadata.get(KEY, {}) for c in lab.cells)
        assert lab.cells[1].source.endswith(f" point ({todos} in all)."), source.name
        assert GRADED_NOTE not in solution.cells[1].source


def test_a_submission_is_graded_against_the_lab_of_its_version(tmp_path):
    lab = _notebook("labs", LAB1)
    old = copy.deepcopy(lab)
    old.metadata[KEY]["version"] = "0.0.9"
    (tmp_path / "0.0.9").mkdir()
    nbformat.write(old, tmp_path / "0.0.9" / f"{LAB1}.ipynb")
    labs = load_labs(REPO_ROOT, tmp_path)
    version = setup_cell.course_version()
    submission = copy.deepcopy(old)
    chosen, chosen_version, note = choose_lab(submission, LAB1, labs)
    assert (chosen.metadata[KEY]["version"], chosen_version, note) == ("0.0.9", "0.0.9", "")
    submission.metadata[KEY]["version"] = version
    chosen, chosen_version, note = choose_lab(submission, LAB1, labs)
    assert (chosen is labs["current"][LAB1], chosen_version, note) == (True, version, "")
