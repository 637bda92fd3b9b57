"""Tests of the class's gradebook: tools/grading/classroom/ (gradebook, class_files, lms_files)."""

import csv
import datetime
import re
import xml.etree.ElementTree as ElementTree

import pytest

from tools.grading.classroom import class_files, gradebook, lms_files, reports
from tools.grading.feedback import feedback, spreadsheet_cell
from tools.grading.model import Grade

LAB1, LAB3 = "01_tf_data_basics", "03_read_tfrecords"
DUE = datetime.datetime(2026, 12, 1, 23, 59)
# Canvas's own gradebook export: the columns it reads back, a "Points Possible" row, and
# the assignment's id in its column name.
CANVAS_EXPORT = (
    ("Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 tf.data basics (4411),Current Score\n")
    + """    Points Possible,,,,,4.00,(read only)
"Lee, Kim",101,S101,klee,Section A,,
"Ng, Ann",102,S102,ang,Section A,,
"Roe, Bob",103,S103,broe,Section B,,
"""
)


def _graded(learner, lab, passed, submitted, name):
    return Grade(
        name,
        learner=learner,
        lab=lab,
        points={1: 1, 2: 2, 3: 1},
        passed=dict(enumerate(passed, start=1)),
        submitted=submitted,
    )


@pytest.fixture
def class_folder(tmp_path):
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT)
    (tmp_path / "overrides.csv").write_text(
        "learner,lab,todo,points,reason\n102,01,2,2,the check's message was wrong; read by hand\n"
    )
    return tmp_path


@pytest.fixture
def book(class_folder):
    roster = class_files.read_roster(class_folder / "roster.csv")
    grades = [
        _graded("101", LAB1, [True, True, True], DUE - datetime.timedelta(hours=1), "a.ipynb"),
        _graded("102", LAB1, [True, False, True], DUE + datetime.timedelta(hours=30), "b2.ipynb"),
        _graded("102", LAB1, [False, False, False], DUE - datetime.timedelta(days=2), "b1.ipynb"),
    ]
    return gradebook.gradebook(
        grades,
        roster=roster,
        due={LAB1: DUE},
        rule=gradebook.LateRule(percent_per_day=10),
        overrides=class_files.read_overrides(class_folder / "overrides.csv"),
        points={LAB1: {1: 1, 2: 2, 3: 1}},
    ), roster


def test_read_roster_takes_canvas_export_without_its_points_row(class_folder):
    roster = class_files.read_roster(class_folder / "roster.csv")
    assert [(row["id"], row["Student"]) for row in roster] == [
        ("101", "Lee, Kim"),
        ("102", "Ng, Ann"),
        ("103", "Roe, Bob"),
    ]


def test_bad_class_files_name_the_file_and_row(tmp_path):
    (tmp_path / "r.csv").write_text("name,email\nKim,k@x\n")
    with pytest.raises(ValueError, match=r"r\.csv: no learner id column; expected one of ID"):
        class_files.read_roster(tmp_path / "r.csv")
    (tmp_path / "o.csv").write_text("learner,lab,todo,points,reason\n101,01,two,1,x\n")
    with pytest.raises(ValueError, match=r"o\.csv:2: todo and points must be numbers"):
        class_files.read_overrides(tmp_path / "o.csv")
    with pytest.raises(ValueError, match=r"--due 09=2026-12-01: expected LAB=WHEN with LAB one"):
        class_files.due_dates(["09=2026-12-01"], {LAB1: None})
    assert class_files.due_dates(["01=2026-12-01T23:59"], {LAB1: None}) == {LAB1: DUE}


def test_submitted_at_reads_the_time_in_the_name_else_the_files(tmp_path):
    path = tmp_path / "kim_2026-11-30T1015_lab1.ipynb"
    path.write_text("{}")
    pattern = r"^(?P<id>[a-z]+)_(?P<time>[\dT-]+)_"
    assert class_files.submitted_at(path, pattern) == datetime.datetime(2026, 11, 30, 10, 15)
    assert class_files.submitted_at(path, None).date() == datetime.date.today()


def test_gradebook_rows_missing_late_overridden_and_set_aside(book, tmp_path):
    grades, _ = book
    reports.write_reports(grades, tmp_path, "bwrap")
    with open(tmp_path / "grades.csv") as file:
        rows = [
            {
                k: row[k]
                for k in (
                    "learner",
                    "lab",
                    "status",
                    "submission",
                    "total",
                    "late days",
                    "penalty %",
                    "final",
                    "overrides",
                )
            }
            for row in csv.DictReader(file)
        ]
    assert rows == [
        {
            "learner": "101",
            "lab": LAB1,
            "status": "graded",
            "submission": "a.ipynb",
            "total": "4",
            "late days": "",
            "penalty %": "",
            "final": "4",
            "overrides": "",
        },
        {
            "learner": "102",
            "lab": LAB1,
            "status": "graded",
            "submission": "b2.ipynb",
            "total": "4",
            "late days": "2",
            "penalty %": "20",
            "final": "3.2",
            "overrides": "TODO 2: 2 (the check's message was wrong; read by hand)",
        },
        {
            "learner": "102",
            "lab": LAB1,
            "status": "set aside: b2.ipynb is later",
            "submission": "b1.ipynb",
            "total": "",
            "late days": "",
            "penalty %": "",
            "final": "",
            "overrides": "",
        },
        {
            "learner": "103",
            "lab": LAB1,
            "status": "missing",
            "submission": "",
            "total": "",
            "late days": "",
            "penalty %": "",
            "final": "0",
            "overrides": "",
        },
    ]
    assert sorted(p.name for p in (tmp_path / "feedback").iterdir()) == [
        f"101-{LAB1}.md",
        f"102-{LAB1}-2.md",
        f"102-{LAB1}.md",
    ]


def test_feedback_shows_lateness_and_the_instructors_scores(book):
    late = book[0][1]
    text = feedback(late)
    assert (
        "| 2 | 2 / 2 | set by your instructor: the check's message was wrong; read by hand" in text
    )
    assert "Handed in 2 day(s) late: 20% off, **final 3.2 / 4 points**." in text


def test_overrides_survive_a_regrade(book, class_folder):
    """The override file is the instructor's: each run applies it again."""
    grades, roster = book
    again = [_graded("102", LAB1, [True, False, True], DUE, "b2.ipynb")]
    regraded = gradebook.gradebook(
        again,
        roster=None,
        due={},
        rule=gradebook.LateRule(),
        overrides=class_files.read_overrides(class_folder / "overrides.csv"),
        points={},
    )
    assert regraded[0].earned == {1: 1, 2: 2.0, 3: 1} and regraded[0].total == 4


def test_canvas_csv_has_its_columns_and_the_exports_assignment(book, tmp_path):
    grades, roster = book
    lms_files.write_canvas_csv(grades, roster, tmp_path / "canvas.csv")
    assert (tmp_path / "canvas.csv").read_text().splitlines() == [
        "Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 tf.data basics (4411)",
        '"Lee, Kim",101,S101,klee,Section A,4',
        '"Ng, Ann",102,S102,ang,Section A,3.2',
        '"Roe, Bob",103,S103,broe,Section B,0',
    ]


def test_canvas_csv_columns_are_canvas_published_import_columns(book, tmp_path):
    """Canvas's import reads Student, ID, SIS User ID, SIS Login ID and Section, then one
    column per assignment, `Name (id)` for an existing one (Canvas guides, "How do I import
    grades in the Gradebook?"); checked against that list, not only against our reader."""
    grades, roster = book
    lms_files.write_canvas_csv(grades, roster, tmp_path / "canvas.csv")
    header = (tmp_path / "canvas.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert all(column.endswith(")") or column.startswith("0") for column in header[5:])


def test_moodle_csv_identifies_learners_by_id_number_without_emails(book, tmp_path):
    grades, roster = book
    lms_files.write_moodle_csv(grades, roster, tmp_path / "moodle.csv")
    assert (tmp_path / "moodle.csv").read_text().splitlines() == [
        f"ID number,{LAB1}",
        "101,4",
        "102,3.2",
        "103,0",
    ]


def test_a_new_lab_gets_a_column_of_its_own_name():
    assert lms_files.lab_column(LAB3, ["Student", "Lab 1 tf.data basics (4411)"]) == LAB3
    assert lms_files.lab_column(LAB1, ["Lab 01: basics (77)"]) == "Lab 01: basics (77)"


def test_an_override_names_its_lab_by_its_whole_name_or_number_only():
    """`0` or `basics` named every lab or several before (a substring test)."""
    grade = _graded("102", LAB1, [False, False, False], DUE, "b.ipynb")
    rows = [
        {"learner": "102", "lab": lab, "todo": "1", "points": "1", "reason": "x"}
        for lab in ("0", "basics", "1")
    ]
    gradebook.apply_overrides(grade, rows)
    assert grade.overridden == {}
    gradebook.apply_overrides(
        grade, [{**rows[0], "lab": "01"}, {**rows[0], "lab": LAB1, "todo": "2"}]
    )
    assert grade.overridden == {1: (1.0, "x"), 2: (1.0, "x")}


HOSTILE_IDS = [
    '=HYPERLINK("http://x","kim\x07")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
    "kim\x00\x1b[31m\x85",
    "bad\udc80name",  # A file name's undecodable byte.
]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def test_spreadsheet_cell_runs_no_formula_and_shows_control_characters():
    assert [spreadsheet_cell(value) for value in HOSTILE_IDS] == [
        '\'=HYPERLINK("http://x","kim\\x07")',
        "'+1+cmd|' /C calc'!A0",
        "'-2+3",
        "'@SUM(1+1)",
        "\\x09=1+1",
        "\\x0d=1+1",
        "kim\\x00\\x1b[31m\\x85",
        "bad\\udc80name",
    ]
    assert [spreadsheet_cell(value) for value in ("kim42", 3, "", "1.5")] == [
        "kim42",
        "3",
        "",
        "1.5",
    ]


def test_no_file_of_the_class_holds_a_formula_cell_or_invalid_xml(tmp_path):
    """Hostile ids from file names and the roster reach grades.csv, canvas.csv, moodle.csv,
    the JUnit files and the feedback as text: no formula, no control character."""
    roster = [
        {"id": learner, "Student": learner, "Email address": learner} for learner in HOSTILE_IDS
    ]
    grades = [
        _graded(learner, LAB1, [True, False, True], DUE, f"{learner}.ipynb")
        for learner in HOSTILE_IDS
    ]
    for grade in grades:
        grade.messages = {2: "TODO 2: wrong\x07"}
        grade.printed = {2: "``\x00``\n**Total: 3 / 3 points**\n"}  # A fence split by a NUL.
        grade.flags = ["exec/eval/compile"]
    reports.write_reports(grades, tmp_path, "bwrap")
    lms_files.write_canvas_csv(grades, roster, tmp_path / "canvas.csv")
    lms_files.write_moodle_csv(grades, roster, tmp_path / "moodle.csv")
    for name in ("grades.csv", "canvas.csv", "moodle.csv"):
        with open(tmp_path / name, newline="") as file:
            rows = list(csv.reader(file))
        assert len(rows) == 1 + len(HOSTILE_IDS), name
        for row in rows:
            for cell in row:
                assert not cell.startswith(FORMULA_START), (name, cell)
                assert not re.search(r"[\x00-\x1f\x7f-\x9f]", cell), (name, cell)
    with open(tmp_path / "grades.csv", newline="") as file:
        learners = [row["learner"] for row in csv.DictReader(file)]
    assert learners[0] == '\'=HYPERLINK("http://x","kim\\x07")'
    junit = sorted((tmp_path / "junit").glob("*.xml"))
    assert len(junit) == len(HOSTILE_IDS)
    for path in junit:
        suite = ElementTree.parse(path).getroot()  # Raises on invalid XML.
        assert suite.get("failures") == "1"
    names = {ElementTree.parse(path).getroot().get("name") for path in junit}
    assert f'=HYPERLINK("http://x","kim\\x07").{LAB1}' in names
    for path in (tmp_path / "feedback").glob("*.md"):
        text = path.read_text()
        assert "| 2 | 0 / 2 | TODO 2: wrong |" in text
        assert text.endswith(
            "What your TODO 2 cell printed:\n\n`````text\n````\n**Total: 3 / 3 points**\n`````\n"
        )
