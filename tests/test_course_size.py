"""The course's size and layout (issue 44): lessons short, utils small and in three places."""

import ast
from pathlib import Path

import pytest

from tests.test_contracts import _lesson_of as lesson_of_check_module

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_LESSON_LINES = 450
LESSONS = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_there_are_lessons_to_measure():
    assert len(LESSONS) >= 9


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.stem for path in LESSONS])
def test_each_lesson_source_is_at_most_450_lines(lesson):
    num_lines = len(lesson.read_text().splitlines())
    assert num_lines <= MAX_LESSON_LINES, (
        f"{lesson.relative_to(REPO_ROOT)} is {num_lines} lines, over {MAX_LESSON_LINES}: "
        "say the same thing shorter (never drop a measurement, a TODO or a check)."
    )


def test_utils_import_no_private_tensorflow_module():
    private = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in sorted((REPO_ROOT / "utils").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "tensorflow.python" in line
    ]
    assert private == []


MAX_TOP_LINES = 2_500


def _lines(paths) -> int:
    return sum(len(path.read_text().splitlines()) for path in paths)


def test_the_top_of_utils_is_at_most_2500_lines():
    """What a lesson calls and a learner may open: the top's modules, not lab/ or lessons/."""
    top = sorted((REPO_ROOT / "utils").glob("*.py"))
    assert {"display.py", "timing.py", "comparison.py", "records.py"} <= {p.name for p in top}
    assert _lines(top) <= MAX_TOP_LINES, (
        f"utils/*.py is {_lines(top):,} lines, over {MAX_TOP_LINES:,}: a module that is the "
        "lab's equipment goes to utils/lab/, one lesson's to utils/lessons/<lesson>/."
    )


def _imported_utils(path: Path) -> set[str]:
    """The `utils` modules `path` imports, at any depth (a function's own imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("utils"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("utils")}
    return found


def _lesson_of(module: str) -> str | None:
    """The lesson package `module` is in ("utils.lessons.scale_out_reading.processes")."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["utils", "lessons"] and len(parts) > 2 else None


def _checks_lesson(module: str) -> str | None:
    """The lesson a check module checks ("utils.checks.write_tfrecords_shard"): it may use
    that lesson's equipment (test_contracts names a check module's lesson)."""
    if not module.startswith("utils.checks."):
        return None
    return lesson_of_check_module(module.rsplit(".", 1)[1])


UTILS_FILES = sorted((REPO_ROOT / "utils").rglob("*.py"))


@pytest.mark.parametrize(
    "path", UTILS_FILES, ids=[p.relative_to(REPO_ROOT).as_posix() for p in UTILS_FILES]
)
def test_no_module_reaches_into_another_lessons_equipment(path):
    """The top and the lab never import one lesson's equipment; a lesson (its equipment and
    its checks), no other's."""
    dotted = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
    own = _lesson_of(dotted) or _checks_lesson(dotted)
    foreign = sorted(m for m in _imported_utils(path) if _lesson_of(m) not in (None, own))
    assert foreign == [], f"{path.relative_to(REPO_ROOT)} imports {foreign}"


def test_each_lessons_equipment_is_named_like_its_check_module():
    packages = sorted(p.name for p in (REPO_ROOT / "utils" / "lessons").iterdir() if p.is_dir()
                      and (p / "__init__.py").exists())  # fmt: skip
    checks = {p.stem for p in (REPO_ROOT / "utils" / "checks").glob("*.py")}
    assert packages and set(packages) <= checks, sorted(set(packages) - checks)


def test_the_import_rule_catches_a_lesson_importing_another(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from utils.lessons.scale_out_reading import processes\n")
    assert _imported_utils(module) == {"utils.lessons.scale_out_reading.processes"}
    assert _lesson_of("utils.lessons.scale_out_reading.processes") == "scale_out_reading"
    assert _lesson_of("utils.lab.storage") is None
