"""Tests of tools/building/saved.py: the lessons' cells tagged `save`, written into `utils`."""

import shutil

import pytest

from tests.conftest import REPO_ROOT
from tests.test_build_notebooks import SETUP_LESSON, UNEXECUTED
from tools import build_notebooks as build
from tools.building import saved as build_saved
from tools.building.regions import BuildError

LESSON = '''# %%
import math

from utils import helpers

# %% tags=["parameters"]
SIZE = 3

# %% tags=["save"]
def scaled(x, *, unit=helpers.UNIT):
    """Returns x in `unit`s, `helpers.UNIT` unless told."""
    # TODO 2: scale x.
    ### BEGIN SOLUTION
    result = [helpers.ratio(v) * math.pi for v in x]  # A comment stays.
    ### END SOLUTION
    return f"{helpers.prefix(result)} {unit}"

# %%
print(scaled([1]))
'''
MARKER = "# Generated from notebooks/09_test_lesson.py (TODO 2) by tools/building/saved.py."
HELPERS = f'''"""Helpers."""

import math

UNIT = "m"


def ratio(value):
    return value


{MARKER}
def scaled(x):
    return x


def prefix(values):
    return str(values)
'''
# What the build writes in utils/helpers.py: the lesson's function, `helpers.` dropped.
WRITTEN = HELPERS.replace(
    "def scaled(x):\n    return x\n",
    '''def scaled(x, *, unit=UNIT):
    """Returns x in `unit`s, `helpers.UNIT` unless told."""
    result = [ratio(v) * math.pi for v in x]  # A comment stays.
    return f"{prefix(result)} {unit}"
''',
)
COMMAND = "Run: make build (or, without executing, python -m tools.build_notebooks --embed-only)"
STALE = f"utils/helpers.py is out of date with the lessons' cells tagged save. {COMMAND}"


def _root(tmp_path, text=LESSON, helpers=HELPERS):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "utils").mkdir()
    (tmp_path / "notebooks" / "09_test_lesson.py").write_text(text)
    (tmp_path / "utils" / "helpers.py").write_text(helpers)
    return tmp_path


def _sources(root):
    return build.lesson_sources(root)


def test_write_puts_the_lessons_solution_below_its_line_without_the_modules_prefix(tmp_path):
    root = _root(tmp_path)
    assert build_saved.problems(root, _sources(root)) == [STALE]
    assert build_saved.write(root, _sources(root)) == [root / "utils" / "helpers.py"]
    assert (root / "utils" / "helpers.py").read_text() == WRITTEN
    assert build_saved.write(root, _sources(root)) == []  # Unchanged: not written again.
    assert build_saved.problems(root, _sources(root)) == []


def test_problems_name_a_module_edited_by_hand_or_a_lesson_changed(tmp_path):
    root = _root(tmp_path, helpers=WRITTEN)
    assert build_saved.problems(root, _sources(root)) == []
    helpers = root / "utils" / "helpers.py"
    helpers.write_text(WRITTEN.replace("* math.pi", "* 2"))
    assert build_saved.problems(root, _sources(root)) == [STALE]
    helpers.write_text(WRITTEN)
    lesson = root / "notebooks" / "09_test_lesson.py"
    lesson.write_text(lesson.read_text().replace("* math.pi", "* 2"))
    assert build_saved.problems(root, _sources(root)) == [STALE]


def test_a_cell_the_lab_gives_whole_is_saved_as_given_code(tmp_path):
    """Lab 2's `resize_and_crop` is given code, not a TODO: still one copy, marked so."""
    given = LESSON.replace("    # TODO 2: scale x.\n", "").replace("    ### BEGIN SOLUTION\n", "")
    given = given.replace("    ### END SOLUTION\n", "")
    marker = MARKER.replace("(TODO 2)", "(given code)")
    root = _root(tmp_path, given, HELPERS.replace(MARKER, marker))
    assert build_saved.write(root, _sources(root)) == [root / "utils" / "helpers.py"]
    written = (root / "utils" / "helpers.py").read_text()
    assert f"{marker}\ndef scaled(x, *, unit=UNIT):" in written
    assert "result = [ratio(v) * math.pi for v in x]  # A comment stays." in written
    assert build_saved.problems(root, _sources(root)) == []


def test_without_a_saved_cell_nothing_is_written(tmp_path):
    root = _root(tmp_path, LESSON.replace('# %% tags=["save"]', "# %%"), helpers='"""H."""\n')
    assert build_saved.saved_functions(root, _sources(root)) == {}
    assert build_saved.write(root, _sources(root)) == []
    assert build_saved.problems(root, _sources(root)) == []


@pytest.mark.parametrize(
    "edit, helpers, message",
    [
        (
            ("result = [", "result = SIZE * ["),
            HELPERS,
            "utils/helpers.py:12: scaled uses ['SIZE'], not in the module.",
        ),
        (
            ("def scaled(", "LIMIT = 2\n\n\ndef scaled("),
            HELPERS,
            "notebooks/09_test_lesson.py (cell 3): a cell tagged `save` holds only functions, "
            "each saved once; found `LIMIT = 2`.",
        ),
        (
            ("    # TODO 2: scale x.\n", "    # TODO 2: scale x.\n    # TODO 3: and again.\n"),
            HELPERS,
            "notebooks/09_test_lesson.py (cell 3): a cell tagged save is a code cell with one "
            "TODO at most.",
        ),
        (
            ("", ""),
            HELPERS.replace(f"{MARKER}\n", ""),
            f"`scaled` is saved, but no module of utils holds it: put the line `{MARKER}` "
            f"above a `def scaled(...)` where it belongs. {COMMAND}",
        ),
        (
            ("", ""),
            HELPERS.replace(f"{MARKER}\ndef scaled(", f"{MARKER}\ndef other("),
            "utils/helpers.py:12: not above the `def` of a function a lesson saves.",
        ),
    ],
    ids=["a lesson variable", "an assignment", "two TODOs", "no line", "another function"],
)
def test_what_cannot_be_saved_is_refused_with_its_place(tmp_path, edit, helpers, message):
    root = _root(tmp_path, LESSON.replace(*edit), helpers)
    with pytest.raises(BuildError) as error:
        build_saved.write(root, _sources(root))
    assert str(error.value) == message
    assert build_saved.problems(root, _sources(root)) == [message]
    assert (root / "utils" / "helpers.py").read_text() == helpers  # Nothing written.


def test_a_function_saved_by_two_lessons_is_refused(tmp_path):
    root = _root(tmp_path)
    shutil.copy(root / "notebooks" / "09_test_lesson.py", root / "notebooks" / "10_again.py")
    with pytest.raises(BuildError, match=r"^notebooks/10_again.py \(cell 3\): .* each saved once"):
        build_saved.saved_functions(root, _sources(root))


def test_without_prefix_drops_only_the_modules_own_name():
    code = 'def f(x):\n    """`m.A` stays."""\n    return m.A + n.m.B + f"{m.C(x)}é" + m.D\n'
    assert build_saved.without_prefix(code, "m") == (
        'def f(x):\n    """`m.A` stays."""\n    return A + n.m.B + f"{C(x)}é" + D\n'
    )


def test_build_writes_it_check_names_it_and_embed_only_rewrites_it(tmp_path):
    from tests.test_build_notebooks import _course_root

    (tmp_path / "given").mkdir()
    root = _course_root(tmp_path / "given")  # Built from the lesson without a saved cell.
    lesson = SETUP_LESSON.replace("# %%\ndef double(", '# %% tags=["save"]\ndef double(')
    assert lesson != SETUP_LESSON
    (root / "notebooks" / "09_test_lesson.py").write_text(lesson)
    marker = "# Generated from notebooks/09_test_lesson.py (TODO 2) by tools/building/saved.py."
    helpers = root / "utils" / "timing.py"
    helpers.write_text(f"SPEED = 0\n\n\n{marker}\ndef double(x):\n    return x\n")
    assert build.check(root)[0] == (
        f"utils/timing.py is out of date with the lessons' cells tagged save. {COMMAND}"
    )
    written = build.build(root, execute=False)
    assert written[0] == helpers
    assert "    result = 2 * x\n" in helpers.read_text()
    assert build.check(root) == [UNEXECUTED]
    helpers.write_text(helpers.read_text().replace("2 * x", "3 * x"))
    assert build.check(root)[0].startswith("utils/timing.py is out of date")
    assert build.embed_only(root)[0] == helpers
    assert build.check(root) == [UNEXECUTED]


LAB_2 = "notebooks/02_write_tfrecords.py"


def test_the_course_saves_lab_2s_solutions_and_given_code():
    saved = build_saved.saved_functions(REPO_ROOT, build.lesson_sources(REPO_ROOT))
    assert {name: marker for name, (marker, _) in saved.items()} == {
        name: f"# Generated from {LAB_2} ({origin}) by tools/building/saved.py."
        for name, origin in [
            ("resize_and_crop", "given code"),
            ("recompress", "given code"),
            ("to_example", "TODO 1"),
            ("write_shard", "TODO 2"),
        ]
    }
    assert not any("SOLUTION" in code or "# TODO" in code for _, code in saved.values())
