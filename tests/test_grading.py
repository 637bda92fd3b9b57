"""Tests of tools/grading/: one class per grading step, in the order `grade.STEPS` runs them.

Small and in-process (no kernel); the outside-in run
over hostile submissions is tests/test_grade.py.
"""

import copy
import csv
import datetime

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import grade
from tools.building.variants import split_variants
from tools.grading.classroom import gradebook, reports
from tools.grading.feedback import feedback
from tools.grading.judge import judge_output
from tools.grading.kernel import grade_kernel
from tools.grading.kernel.grade_kernel import CellResult
from tools.grading.model import KEY, Grade, Limits, Options, Submission, marks, todo_of
from tools.grading.submission import flags, identify, prepare, run, score, syntax_flags, versions
from tools.grading.submission.prepare import judged_cells
from tools.grading.submission.restore import restore_protected_cells

LAB1 = "01_tf_data_basics"


@pytest.fixture(scope="module")
def lab1():
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{LAB1}.py")
    return lab, solution


def _submission(path, labs=None):
    return Submission(
        path=path,
        labs=labs or {"current": {}},
        limits={},
        options=Options(),
        grade=Grade(submission=path.name),
    )


def test_steps_are_listed_by_name_in_order():
    assert [name for name, _ in grade.STEPS] == [
        "read",
        "identify",
        "choose_lab",
        "restore",
        "flag",
        "prepare",
        "run",
        "score",
    ]


def test_grading_modules_say_what_they_are_for():
    for path in sorted((REPO_ROOT / "tools" / "grading").rglob("*.py")):
        assert path.read_text().startswith('"""'), f"{path.name} has no docstring"


class TestModel:
    def test_options_are_keyword_only(self):
        with pytest.raises(TypeError, match="positional"):
            Options(30.0)
        assert Options(memory_gb=2.0).memory_gb == 2.0
        with pytest.raises(TypeError, match="positional"):
            Limits({}, 30.0, 120.0)
        assert Limits(cells={"todo-1": 5.0}, added=30.0, total=120.0).of("added-3") == 30.0

    def test_marks_from_metadata_or_stable_id_and_todo_from_its_line(self):
        assert marks(nbformat.v4.new_code_cell(id="check-3")) == {"check": 3}
        assert marks(nbformat.v4.new_code_cell(id="cell-3")) == {}
        assert todo_of(nbformat.v4.new_code_cell("# TODO 2: decode\nx = 1", id="x")) == 2
        assert todo_of(nbformat.v4.new_markdown_cell("# TODO 2: decode")) is None


class TestIdentify:
    def test_read_an_unreadable_file_ends_its_grading_with_the_reason(self, tmp_path):
        path = tmp_path / "x.ipynb"
        path.write_text('{"cells": [ not json')
        submission = _submission(path)
        assert identify.read(submission) is False
        assert submission.grade.status.startswith("unreadable: NotJSONError: ")

    def test_identify_an_other_course_says_unknown_lab(self, tmp_path, lab1):
        submission = _submission(tmp_path / "a.ipynb", {"current": {LAB1: lab1[0]}})
        submission.notebook = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_markdown_cell("# Homework 7")]
        )
        assert identify.identify(submission) is False
        assert submission.grade.status == (
            "unknown lab: no course metadata and no 'Lab N' or 'Lesson N' title"
        )

    def test_a_learner_is_who_the_file_says_and_metadata_naming_another_is_flagged(
        self, tmp_path, lab1
    ):
        """A blank lab whose metadata names ann took ann's row: her correct submission was
        set aside as "earlier". Now it is bob's, flagged, and ann's row stays hers."""
        blank = copy.deepcopy(lab1[0])
        blank.metadata[KEY]["learner"] = "ann"
        nbformat.write(blank, tmp_path / "bob_01.ipynb")
        labs = versions.load_labs(REPO_ROOT, tmp_path / "no-releases")
        submission = _submission(tmp_path / "bob_01.ipynb", labs)
        submission.id_pattern = r"^(?P<id>[a-z]+)_"
        for _, step in grade.STEPS[:5]:  # read, identify, choose_lab, restore, flag
            assert step(submission) is True
        bob = submission.grade
        assert (bob.learner, bob.flags) == ("bob", [flags.OTHER_LEARNER])
        assert bob.notes[-1] == (
            "The notebook's metadata names another learner (ann): graded as bob, the learner "
            "its file's name gives."
        )
        ann = Grade("ann_01.ipynb", learner="ann", lab=LAB1)
        ann.submitted = datetime.datetime(2026, 12, 1)
        bob.submitted = ann.submitted + datetime.timedelta(hours=1)  # Later, but not ann's.
        assert [g.status for g in gradebook.keep_latest([ann, bob])] == ["graded", "graded"]
        review = reports.review_markdown([bob])
        assert f"## bob_01.ipynb (bob, {LAB1}): {flags.OTHER_LEARNER}\n" in review
        assert "- The notebook's metadata names another learner (ann): graded as bob" in review


class TestChooseLab:
    def test_step_reads_the_points_and_notes_a_missing_version(self, tmp_path, lab1):
        lab = copy.deepcopy(lab1[0])
        next(c for c in lab.cells if c.id == "todo-2").metadata[KEY]["points"] = 3
        submission = _submission(tmp_path / "a.ipynb", {"current": {LAB1: lab}, "version": "9"})
        submission.notebook = copy.deepcopy(lab1[1])
        del submission.notebook.metadata[KEY]["version"]
        submission.grade.lab = LAB1
        assert versions.step(submission) is True
        assert submission.grade.points == {1: 1, 2: 3, 3: 1}
        version = lab.metadata[KEY]["version"]
        assert submission.grade.notes == [
            "no course version in the notebook's metadata; graded against the current lab "
            f"(version {version})"
        ]


class TestFlags:
    def test_course_modules_are_the_packages_modules(self):
        utils = REPO_ROOT / "utils"
        files = {p.stem for p in utils.rglob("*.py") if p.name != "__init__.py"}
        packages = {p.parent.name for p in utils.rglob("__init__.py")}
        assert flags.COURSE_MODULES == files | packages
        assert {"storage", "checks", "tf_data_basics", "utils"} <= flags.COURSE_MODULES

    def test_a_new_module_is_covered_without_a_list(self, tmp_path):
        (tmp_path / "utils" / "checks").mkdir(parents=True)
        for name in ("__init__.py", "brand_new.py", "checks/__init__.py", "checks/lab9.py"):
            (tmp_path / "utils" / name).write_text("")
        assert syntax_flags.course_modules(tmp_path / "utils") == {
            "utils",
            "brand_new",
            "checks",
            "lab9",
        }

    @pytest.mark.parametrize(
        "code, found",
        [
            ("storage.read_file = f", ["imported modules"]),
            ("tf_data_basics.check_filenames = print", ["imported modules"]),
            ("data = {}\ndata['a'] = 1", []),
            ("models = []\nmodels[0] = m", []),
        ],
        ids=["a course module", "a check module", "own dict named data", "own list"],
    )
    def test_course_module_names_without_a_lab(self, code, found):
        assert flags.find_flags(code) == found


class TestPrepare:
    def test_the_kernel_runs_no_check_and_the_judge_plans_every_one(self, lab1):
        lab = lab1[0]
        restored, _ = restore_protected_cells(lab, lab)
        prepared, plan = prepare.judged_cells(restored, lab, {"NUM_IMAGES": 7}, 60)
        checks = [c.source for c in lab.cells if "check" in marks(c)]
        for _, code in prepared:
            compile(code, "cell", "exec")  # Without magics, every cell is plain Python.
            assert "checks.check_" not in code
        assert [s["todo"] for s in plan if s["kind"] == "check"] == list(range(1, len(checks) + 1))
        assert (
            "NUM_IMAGES = 7"
            in dict((c.get("id"), code) for c, code in prepared)["injected-parameters"]
        )


class TestScore:
    def test_a_timeout_stops_the_run_and_names_its_cell(self):
        cells = [nbformat.v4.new_code_cell(id=i) for i in ("todo-1", "check-1", "check-2")]
        results = [
            CellResult("timeout", error="timed out after 30 s"),
            CellResult("not run"),
            CellResult("not run"),
        ]
        mark = Grade("a.ipynb", points={1: 1, 2: 1})
        score.score(mark, [(c, "") for c in cells], results, {})
        stop = "the cell of TODO 1 timed out after 30 s; the cells after it were not run"
        assert mark.notes == [f"Stopped: {stop}"]
        assert mark.messages == {
            1: "your TODO 1 cell failed: timed out after 30 s",
            2: f"not run: {stop}",
        }
        assert mark.passed == {1: False, 2: False} and mark.total == 0


class TestScoreMessages:
    def test_a_check_failure_is_not_repeated_as_the_first_error(self):
        cells = [nbformat.v4.new_code_cell(id=i) for i in ("cell-13", "mine")]
        cells[1].source = "print(y)"
        cells[1].metadata[KEY] = {"added": True}
        results = [
            CellResult("error", error="AttributeError: 'ellipsis' object"),
            CellResult("error", error="NameError: name 'y' is not defined"),
        ]
        mark = Grade("a.ipynb", points={1: 1, 2: 1})
        verdicts = {
            1: judge_output.Verdict(False, "TODO 1 (x): not done yet"),
            2: judge_output.Verdict(False, "NameError: name 'x' is not defined"),
        }
        score.score(mark, [(c, "") for c in cells], results, verdicts)
        assert mark.messages == {
            1: "TODO 1 (x): not done yet",
            2: "NameError: name 'x' is not defined (a name the lab makes from TODO 1's result: "
            "fix TODO 1 first)",
        }
        assert mark.passed == {1: False, 2: False}
        assert mark.first_error == (
            "a cell you added (print(y)): NameError: name 'y' is not defined"
        )

    def test_the_judges_last_error_line_is_never_the_graders_explanation(self, tmp_path, lab1):
        """A graph printed "Error: ... give TODO 3 its point by hand" and ended the judge:
        the learner reads that the judge stopped; the instructor gets a flag and the line."""
        forged = "Error: the grader crashed; give TODO 3 its point by hand"
        submission = _submission(tmp_path / "kim.ipynb")
        submission.lab, submission.restored = lab1[0], copy.deepcopy(lab1[0])
        submission.grade.points = {1: 1, 2: 1, 3: 1}
        submission.prepared = [(nbformat.v4.new_code_cell(id="cell-1"), "")]
        submission.results = [CellResult("ok")]
        submission.verdicts = {
            1: judge_output.Verdict(True, "TODO 1 passed: 5 files."),
            0: judge_output.Verdict(False, forged),
        }
        assert score.step(submission) is True
        mark = submission.grade
        assert mark.messages == {
            1: "TODO 1 passed: 5 files.",
            2: "no verdict: the judge stopped before it judged TODO 2; your instructor will "
            "look at it",
            3: "no verdict: the judge stopped before it judged TODO 3; your instructor will "
            "look at it",
        }
        assert (mark.passed, mark.flags) == ({1: True, 2: False, 3: False}, ["judge stopped"])
        assert "by hand" not in feedback(mark)
        assert "- Your instructor will read your code (flagged: judge stopped)." in feedback(mark)
        assert mark.diff.startswith(
            f"# The judge's last error line (a learner's graph may print there): {forged}\n"
        )
        assert f"{forged}\n" in reports.review_markdown([mark])

    def test_a_kernel_dying_in_a_lab_cell_is_said_as_the_learners_kernel(self):
        """It blamed the lab's cell ("Stopped: the lab's cell cell-17 the kernel died")."""
        cells = [nbformat.v4.new_code_cell(id=i) for i in ("todo-3", "cell-17")]
        cells[0].metadata[KEY] = {"todo": 3}
        prepared = [(cell, "") for cell in cells]
        results = [CellResult("ok"), CellResult("died", error=grade_kernel.KERNEL_DIED)]
        run.name_the_todo(prepared, results)
        mark = Grade("a.ipynb", points={3: 1})
        score.score(mark, prepared, results, {3: judge_output.Verdict(True, "TODO 3 passed")})
        assert mark.notes == [
            "Stopped: your kernel died (memory, os._exit or a crash) after your TODO 3 cell, "
            "while the lab's cell cell-17 ran; the cells after it were not run"
        ]
        assert mark.passed == {3: True}

    def test_messages_name_the_graders_folders_without_their_paths(self, tmp_path):
        options = Options(cache=tmp_path / "cache", work_root=tmp_path / "work")
        text = (
            f"Cannot decode {tmp_path}/work/kim-x1y2/cache/flowers/roses/1.jpg; "
            f"read {tmp_path}/cache/flowers-embedded-100/a.jpg and "
            f"{tmp_path}/work/kim-x1y2/home/out.tfrec"
        )
        assert score.without_grader_paths(text, options) == (
            "Cannot decode <data cache>/flowers/roses/1.jpg; read "
            "<data cache>/flowers-embedded-100/a.jpg and <your work folder>/home/out.tfrec"
        )

    def test_feedback_says_which_parameters_the_grader_changed(self):
        mark = Grade(
            "a.ipynb",
            learner="kim",
            lab=LAB1,
            points={1: 1},
            passed={1: True},
            parameters={"NUM_PARALLEL_READS": (8, 16)},
        )
        assert (
            "- The grader ran your lab with other parameters than the lab's, to grade a class "
            "in minutes: NUM_PARALLEL_READS=8 (the lab's: 16). The checks' numbers above are "
            "from that run.\n"
        ) in feedback(mark)

    def test_prepare_records_the_parameters_it_changes(self, tmp_path, lab1):
        submission = _submission(tmp_path / "a.ipynb")
        submission.limits = {LAB1: Limits(cells={}, added=30.0, total=120.0)}
        submission.grade.lab, submission.lab = LAB1, lab1[0]
        submission.restored = copy.deepcopy(lab1[0])
        prepare.step(submission)
        assert submission.grade.parameters["NUM_IMAGES"] == (103, 3670)
        for same in ("NUM_PARALLEL_READS", "LATENCY_MS"):  # The grader's is the lab's (d71772b).
            assert same not in submission.grade.parameters


class TestReports:
    def test_learners_whose_names_differ_only_in_a_space_get_a_file_each(self, tmp_path):
        grades = [
            Grade(
                f"{name}_01.ipynb",
                learner=name,
                lab=LAB1,
                points={1: 1},
                passed={1: name == "Kim Lee"},
            )
            for name in ("Kim Lee", "Kim_Lee")
        ]
        reports.write_reports(grades, tmp_path, "bwrap")
        assert sorted(p.name for p in (tmp_path / "feedback").iterdir()) == [
            f"Kim_Lee-{LAB1}-2.md",
            f"Kim_Lee-{LAB1}.md",
        ]
        assert sorted(p.name for p in (tmp_path / "junit").iterdir()) == [
            f"Kim_Lee-{LAB1}-2.xml",
            f"Kim_Lee-{LAB1}.xml",
        ]
        assert "Total: 1 / 1" in (tmp_path / "feedback" / f"Kim_Lee-{LAB1}.md").read_text()
        assert "Total: 0 / 1" in (tmp_path / "feedback" / f"Kim_Lee-{LAB1}-2.md").read_text()
        with open(tmp_path / "grades.csv") as file:
            assert [row["feedback"] for row in csv.DictReader(file)] == [
                f"feedback/Kim_Lee-{LAB1}.md",
                f"feedback/Kim_Lee-{LAB1}-2.md",
            ]


class TestReportsWrite:
    def test_write_reports_from_grades(self, tmp_path):
        good = Grade(
            "a.ipynb",
            learner="ann",
            lab=LAB1,
            version="1",
            points={1: 1, 2: 2},
            passed={1: True, 2: False},
            messages={2: "TODO 2 (x): wrong"},
        )
        bad = Grade("b.ipynb", learner="b", status="unreadable: ValueError: x")
        reports.write_reports([good, bad], tmp_path, "NOT ISOLATED (--sandbox none)")
        with open(tmp_path / "grades.csv") as file:
            rows = list(csv.reader(file))
        assert rows[1:] == [
            [
                "ann",
                LAB1,
                "1",
                "1",
                "0",
                "1",
                "3",
                "",
                "graded",
                "a.ipynb",
                f"feedback/ann-{LAB1}.md",
                "",
                "",
                "",
                "1",
                "",
            ],
            [
                "b",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "unreadable: ValueError: x",
                "b.ipynb",
                "feedback/b-unknown.md",
                "",
                "",
                "",
                "",
                "",
            ],
        ]
        assert (
            "| b.ipynb | b |  | unreadable: ValueError: x |  |  | not graded |  |"
            in (tmp_path / "scores.md").read_text()
        )
        assert "- a.ipynb, TODO 2: TODO 2 (x): wrong\n" in (tmp_path / "scores.md").read_text()
        assert (tmp_path / "review.md").read_text() == "# Flagged submissions\n\nNone.\n"
        assert sorted(p.name for p in (tmp_path / "feedback").iterdir()) == [
            f"ann-{LAB1}.md",
            "b-unknown.md",
        ]
        (tmp_path / "mine.txt").write_text("kept")
        reports.remove_old_reports(tmp_path)
        assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["mine.txt"]


class TestThreads:
    """The grader grades submissions in threads (`-j N`)."""

    def test_parse_lets_one_thread_at_a_time_into_ast_parse(self, monkeypatch):
        import ast
        import threading
        import time

        from tools.grading import model

        inside, most = [0], [0]
        real_parse = ast.parse

        def watched_parse(code, *args, **kwargs):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            time.sleep(0.002)  # Widen the window a race needs.
            inside[0] -= 1
            return real_parse(code, *args, **kwargs)

        monkeypatch.setattr(ast, "parse", watched_parse)
        threads = [
            threading.Thread(target=lambda: [model.parse("x = (1 + 2)") for _ in range(20)])
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert most[0] == 1

    def test_no_grading_step_calls_ast_parse_directly(self):
        for path in sorted((REPO_ROOT / "tools" / "grading").rglob("*.py")):
            if path.name != "model.py":
                assert "ast.parse(" not in path.read_text(), f"{path.name}: use model.parse"

    def test_a_step_that_raises_is_that_submissions_grader_error_row(self, tmp_path, monkeypatch):
        def broken_step(submission):
            submission.grade.passed[1] = True
            raise SystemError("AST constructor recursion depth mismatch (before=15, after=11)")

        monkeypatch.setattr(grade, "STEPS", (("read", lambda s: True), ("flag", broken_step)))
        path = tmp_path / "kim_01.ipynb"
        result = grade.grade_submission(path, {"current": {}}, {}, Options())
        assert result.status == (
            "grader error: flag: SystemError: AST constructor recursion depth mismatch "
            "(before=15, after=11)"
        )
        assert result.passed == {} and result.total == 0


@pytest.mark.parametrize("lesson", ["01_tf_data_basics", "02_write_tfrecords"])
def test_the_grader_runs_nothing_after_the_last_check(lesson):
    """Nothing after the last check cell decides a verdict (lab 1's speed tests, plots)."""
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    restored, _ = restore_protected_cells(solution, lab)
    code = [c.id for c in restored.cells if c.cell_type == "code"]
    last_check = max(i for i, cell_id in enumerate(code) if cell_id.startswith("check-"))
    after = set(code[last_check + 1 :])
    assert after, f"{lesson} has no cell after its last check: nothing to test"
    kept, plan = judged_cells(restored, lab, {}, 60)
    kept = [cell.get("id") for cell, _ in kept]
    last = max(marks(c)["todo"] for c in lab.cells if "todo" in marks(c))
    assert plan[-1] == {"kind": "check", "todo": last, "source": plan[-1]["source"]}
    assert kept[-2:] == [f"grader-keep-{last}", "grader-finish"] and not after & set(kept)


@pytest.mark.parametrize("cores, free_gib, jobs", [(2, 23, 4), (16, 10, 5), (1, 1, 1)])
def test_default_jobs_are_two_a_core_within_free_memory(monkeypatch, cores, free_gib, jobs):
    from types import SimpleNamespace

    from tools.grading.classroom import arguments

    monkeypatch.setattr(arguments, "usable_cores", lambda: cores)
    memory = SimpleNamespace(available=free_gib * 2**30)
    monkeypatch.setattr(arguments.psutil, "virtual_memory", lambda: memory)
    assert arguments.default_jobs() == jobs


def test_a_kernel_whose_socket_path_is_too_long_says_so_and_what_to_do(tmp_path):
    work = tmp_path / ("w" * 100)  # A long TMPDIR, as macOS's is, with a long folder in it.
    work.mkdir()
    kernel = grade_kernel.SandboxedKernel(work, {}, bwrap=None, read_only=[], memory_bytes=2**30)
    with pytest.raises(RuntimeError) as raised:
        kernel.start()
    assert str(raised.value) == (
        f"its socket's path ({work}/k-65535) is longer than a Unix socket allows (107 bytes): "
        "set TMPDIR to a shorter folder"
    )
    assert kernel.process is None and sorted(work.iterdir()) == []  # Nothing started, written.
