"""A small class graded as an instructor grades one (issue 51): prints, disk fillers, a sleeper.

Lab 1's and lab 4's solutions with a `tf.print` of images inside a graph function (it
prints in the kernel and again in the judge, which runs the learner's graph), a cell that
prints 50 MB, a blank lab, two submissions that try to write 5 GB (in `/tmp`, in the work
folder) and one that sleeps: graded in one run at the default `-j`, with the time limits
measured from the solutions. Unit tests of what that run relies on: the judge's output
read while it runs (`judge_output.py`), the disk bounds and their arithmetic.
"""

import contextlib
import csv
import io
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_grade import _notebook, _processes_with, _with_todo, needs_bwrap
from tools import grade
from tools.building.outputs import METADATA_KEY
from tools.grading import model
from tools.grading.judge import judge_output
from tools.grading.kernel import grade_kernel, sandbox, workfolder
from tools.grading.submission import run
from utils.lab import data

LAB1, LAB4 = "01_tf_data_basics", "04_train_keras"
TOKEN = "linger-tpu-speed-output-test"  # In the command line of a process the sleeper starts.
# At HEAD before issue 51 both scored 2/4: the judge blocked on its full stderr pipe.
PRINT_IMAGE = (
    '    tf.print("decoded", tf.shape(image), image, summarize=64)\n    return image, label'
)
PRINT_BATCH = """    def printed(images, labels):
        tf.print("augmented batch", tf.shape(images), images)
        return images, labels

    dataset = dataset.map(printed)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)"""
PRINT_50_MB = "\nfor _ in range(50):\n    print('x' * 10**6)\n"
FILL_TMP = """with open("/tmp/fill", "wb") as _file:
    for _ in range(500):
        _file.write(b"0" * 10**7)
"""
FILL_WORK = """with open("fill", "wb") as _file:
    for _ in range(500):
        _file.write(b"0" * 10**7)
"""
SLEEPER = f"""import subprocess, time
subprocess.Popen(["sh", "-c", "sleep 300; : {TOKEN}"], start_new_session=True)
while True:
    time.sleep(1)
"""


def _replaced(old, new):
    return lambda source: source.replace(old, new)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    solution, lab = _notebook("solutions", LAB1), _notebook("labs", LAB1)
    submissions = {
        "print_01": _with_todo(solution, 2, _replaced("    return image, label", PRINT_IMAGE)),
        "print_04": _with_todo(
            _notebook("solutions", LAB4),
            2,
            _replaced("    dataset = dataset.prefetch(tf.data.AUTOTUNE)", PRINT_BATCH),
        ),
        "printer_01": _with_todo(solution, 1, lambda source: source + PRINT_50_MB),
        "blank_01": lab,
        "filltmp_01": _with_todo(solution, 2, lambda source: FILL_TMP + source),
        "fillwork_01": _with_todo(solution, 2, lambda source: FILL_WORK + source),
        "sleeper_01": _with_todo(solution, 3, lambda source: SLEEPER + source),
    }
    for name, notebook in submissions.items():
        nbformat.write(notebook, folder / f"{name}.ipynb")
    output_dir = tmp_path_factory.mktemp("grades")
    temp_before = set(Path(tempfile.gettempdir()).iterdir())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = grade.main([str(folder), "--output-dir", str(output_dir), "--disk-gb", "0.3"])
    with open(output_dir / "grades.csv") as file:
        rows = {row["learner"]: row for row in csv.DictReader(file)}
    # The data cache (the datasets, the limits) is the session's, kept for the next run.
    left = set(Path(tempfile.gettempdir()).iterdir()) - temp_before - {data.default_cache_dir()}
    return status, rows, output_dir, printed.getvalue(), left


@needs_bwrap
def test_a_class_solutions_full_marks_fillers_and_sleeper_stopped_with_their_line(graded):
    status, rows, output_dir, printed, _ = graded
    assert status == 0
    points = {name: [row[f"TODO {n}"] for n in range(1, 4)] for name, row in rows.items()}
    assert points == {  # Lab 1 has 3 TODOs, lab 4 has 2.
        "print_01": ["1", "1", "1"],
        "print_04": ["1", "1", ""],
        "printer_01": ["1", "1", "1"],
        "blank_01": ["0", "0", "0"],
        "filltmp_01": ["1", "0", "0"],
        "fillwork_01": ["1", "0", "0"],
        "sleeper_01": ["1", "1", "0"],
    }
    report = (output_dir / "scores.md").read_text()
    for name, place in (("filltmp_01", "/tmp"), ("fillwork_01", "its work folder")):
        assert (
            f"- {name}.ipynb: Stopped: the cell of TODO 2 wrote more than 0.3 GB in {place}; "
            "the cells after it were not run\n"
        ) in report
    # Interrupted at its limit, its TODO fails and the run goes on (issue 61 item 4).
    assert re.search(
        r"- sleeper_01.ipynb, TODO 3: your TODO 3 cell failed: ran past the cell's time limit "
        r"\(\d+ s\)\n",
        report,
    )
    assert "- sleeper_01.ipynb: Stopped" not in report
    for lesson in (LAB1, LAB4):  # Measured, as usual; the disk's from --disk-gb.
        assert re.search(
            rf"^Limits for {lesson}: its solution ran in .+; disk --disk-gb 0.3: "
            r"0.3 GB each$",
            printed,
            re.M,
        )


@needs_bwrap
def test_a_class_prints_cost_nothing_and_the_feedback_says_where_they_were_cut(graded):
    output_dir = graded[2]
    text = (output_dir / "feedback" / f"printer_01-{LAB1}.md").read_text()
    assert "**Total: 3 / 3 points**" in text
    assert f"\n- {run.PRINTED_NOTE}\n" in text
    text = (output_dir / "feedback" / f"print_04-{LAB4}.md").read_text()
    assert "**Total: 2 / 2 points**" in text


@needs_bwrap
def test_a_class_leaves_nothing_behind_and_prints_the_seconds_per_submission(graded):
    _, rows, _, printed, left = graded
    assert left == set() and _processes_with(TOKEN) == []
    for name in rows:
        assert re.search(rf"^Graded {name}\.ipynb in \d+ s$", printed, re.M)
    assert re.search(
        r"^7 submissions in \d+ s with -j \d+: [\d.]+ s per submission$", printed, re.M
    )


SIGNED = """import hashlib, hmac, json, sys
key = bytes.fromhex(sys.argv[1])
sys.stderr.write(("tf.print " * 1000 + "\\n") * 1000)  # 9 MB: past any pipe's buffer.
sys.stdout.write("x" * 10**6)  # One long line, cut, with no verdict in it.
forged = json.dumps({"todo": 2, "passed": True, "message": "forged"})
sys.stdout.write(f"\\nVERDICT {forged} 00\\n")  # Not signed with the key.
payload = json.dumps({"todo": 1, "passed": True, "message": "TODO 1 passed: 5 files."})
signature = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
print(f"VERDICT {payload} {signature}", flush=True)
sys.stderr.write("ValueError: the last line\\n")
"""


def test_judge_output_is_read_while_the_judge_prints_keeping_signed_verdicts():
    key = bytes(range(32))
    process = subprocess.Popen(
        [sys.executable, "-c", SIGNED, key.hex()], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    output = judge_output.JudgeOutput(process, key)
    assert process.wait(timeout=60) == 0  # It would block on a full pipe, unread.
    assert output.verdicts() == {
        1: judge_output.Verdict(True, "TODO 1 passed: 5 files."),
        0: judge_output.Verdict(False, "ValueError: the last line"),
    }


def test_disk_limits_from_the_solutions_run_or_the_option():
    assert workfolder.disk_limits({"tmp": 10**6, "work": 10**9}) == (
        model.DiskLimits(10**9, 4 * 10**9),
        "4x what its solution wrote, at least 1 GB in /tmp and 2 GB in the work folder: "
        "1 GB and 4 GB",
    )
    assert workfolder.disk_limits(None)[0] == model.DiskLimits(10**9, 2 * 10**9)
    assert workfolder.disk_limits(None, 0.5) == (
        model.DiskLimits(5 * 10**8, 5 * 10**8),
        "--disk-gb 0.5: 0.5 GB each",
    )


def test_disk_watch_sums_the_work_folders_and_names_the_bound(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_bytes(b"1" * 300_000)
    (tmp_path / "two").write_bytes(b"2" * 300_000)
    (tmp_path / "link").symlink_to(REPO_ROOT / "README.md")  # Not followed.
    watch = workfolder.DiskWatch(model.DiskLimits(10**6, 10**6), [tmp_path], lambda: [])
    assert watch.check() == "" and 600_000 <= watch.most["work"] < 700_000
    (tmp_path / "three").write_bytes(b"3" * 500_000)
    assert watch.check() == "wrote more than 0.001 GB in its work folder"


def test_a_cells_timeout_says_which_limit_and_how_long():
    class Sleepy:
        def start(self):
            pass

        def execute(self, code, limit):
            return grade_kernel.CellResult("timeout" if code == "sleep" else "ok", limit)

        def stop(self):
            pass

    results = grade_kernel.run_cells(["ok", "sleep"], [30, 30], Sleepy(), total_limit=100)
    assert results[1].error == "ran past the cell's time limit (30 s)"
    results = grade_kernel.run_cells(["sleep"], [300], Sleepy(), total_limit=100)
    assert results[0].error == "ran past the submission's time limit (100 s in all)"


def test_a_lab_cells_timeout_names_the_todo_whose_cell_came_before_it():
    todo = nbformat.v4.new_code_cell(id="todo-2", metadata={METADATA_KEY: {"todo": 2}})
    cells = [nbformat.v4.new_code_cell(id="setup"), todo, nbformat.v4.new_code_cell(id="cell-12")]
    late = "ran past the cell's time limit (30 s)"
    results = [
        grade_kernel.CellResult("timeout", error=late),
        grade_kernel.CellResult("ok"),
        grade_kernel.CellResult("timeout", error=late),
    ]
    run.name_the_todo([(cell, "") for cell in cells], results)
    assert [result.error for result in results] == [late, "", f"{late}, after the cell of TODO 2"]


FLOOD = """import threading


def _flood():
    while True:
        print("x" * 10**6)


threading.Thread(target=_flood, daemon=True).start()
"""
SUM = "import time\n_t = time.perf_counter()\nsum(range(3 * 10**7))\nprint('summed')\n"


@needs_bwrap
def test_a_flooding_thread_fills_no_buffer_and_slows_no_cell():
    """A thread printing 1 MB lines without pause: before, the kernel buffered and sent all
    of it (564 MB from its cell, 1.2 GB from the next), and a cell of 1 s took 55 s. Now
    each cell sends the first `OUTPUT_LIMIT` characters and the line that says so."""
    # A socket's path is short, not tmp_path's (under a worker's TMPDIR it passed 107 bytes).
    work = Path(tempfile.mkdtemp(prefix="k"))
    kernel = grade_kernel.SandboxedKernel(
        work,
        workfolder.prepare_work(work, None),
        bwrap=sandbox.find_bwrap(),
        read_only=[REPO_ROOT / "utils", Path(sys.prefix), Path(sys.base_prefix)],
        memory_bytes=4 * 2**30,
    )
    try:
        results = grade_kernel.run_cells([SUM, FLOOD, SUM, SUM], [120] * 4, kernel, total_limit=400)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert [result.status for result in results] == ["ok"] * 4, results[0]
    assert results[0].output == "summed\n"
    cut = len(grade_kernel.CUT_LINE)
    for result in results[1:]:  # The thread prints in whichever cell runs.
        assert result.printed == grade_kernel.OUTPUT_LIMIT + cut
        assert len(result.output) == grade_kernel.OUTPUT_LIMIT
    assert max(result.seconds for result in results[2:]) < 10 * results[0].seconds + 5
    assert run.printed_note(results) == run.PRINTED_NOTE
