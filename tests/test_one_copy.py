"""One copy of each reference solution: a lesson's solved function is the `utils` helper.

A lesson's cell tagged `save` holds a TODO's function that is also a helper; the build
writes it into the `utils` module that hands it out, below a `# Generated from` line
(tools/building/saved.py, d2l's `#@save`). Here:
- the modules hold what the lessons give (the build's own comparison), and each saved
  function, read with `ast`, is its lesson's, statement for statement and docstring
  included (the module's own prefix aside: `comparison.WITHIN_NOISE` is `WITHIN_NOISE` in
  `comparison.py`);
- each is defined once in `utils`, in its module (`HANDED_OUT`); `NOT_COPIES` lists
  namesakes that do another job, with the reason;
- a saved cell is a TODO's solution or code the lab gives whole (`(given code)`: lab 2's
  `resize_and_crop` and `recompress`);
- lesson 8's ceiling, a solved assignment, is run beside `pipeline.decode_ceiling_dataset`
  and returns the same batches.
A last test checks that every function holding a solution region whose name is also a `def`
in `utils/` is saved, generalized or listed in `NOT_COPIES`.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

from tools import build_notebooks
from tools.building import saved as build_saved
from tools.building.regions import TODO_LINE, find_regions

ROOT = Path(__file__).resolve().parents[1]
LAB_2 = "notebooks/02_write_tfrecords.py"
LESSON_8 = "notebooks/08_where_the_time_goes.py"

# (lesson source, function, helper module): the lesson's cell is tagged `save`, and the
# build writes the function into the module.
HANDED_OUT = [
    (LAB_2, "resize_and_crop", "utils.records"),
    (LAB_2, "recompress", "utils.records"),
    (LAB_2, "to_example", "utils.records"),
    (LAB_2, "write_shard", "utils.shard_files"),
]
# (lesson source, function): a `utils` namesake that is not a copy, and why.
NOT_COPIES = {
    ("notebooks/07_scale_out_reading.py", "dataset_fn"): (
        "sharding's is local to a host process and reads its settings from the launcher"
    ),
    ("notebooks/03_read_tfrecords.py", "read_tfrecord"): (
        "lab 3's reader for labs 4 and 5, its settings as arguments (solved_reader.lab3_reader; "
        "tests/test_real_apis.py compares it with lab 3's)"
    ),
}


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    """Returns the top-level functions of a Python file (a lesson source or a module)."""
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


class _WithoutPrefix(ast.NodeTransformer):
    """`shard_files.shard_name` in the lesson is `shard_name` inside utils/shard_files.py."""

    def __init__(self, module_name: str):
        self.module_name = module_name

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == self.module_name:
            return ast.copy_location(ast.Name(id=node.attr, ctx=node.ctx), node)
        return self.generic_visit(node)


def _helper_path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def test_the_modules_hold_what_the_lessons_give():
    problems = build_saved.problems(ROOT, build_notebooks.lesson_sources(ROOT))
    assert problems == [], "\n".join(problems)


def test_the_saved_functions_are_the_ones_handed_out():
    saved = build_saved.saved_functions(ROOT, build_notebooks.lesson_sources(ROOT))
    assert sorted(saved) == sorted(name for _, name, _ in HANDED_OUT)


@pytest.mark.parametrize(
    "lesson, name, module", HANDED_OUT, ids=[f"{m}.{n}" for _, n, m in HANDED_OUT]
)
def test_each_saved_function_is_its_lessons_solution(lesson, name, module):
    path, module_name = _helper_path(module), module.rsplit(".", 1)[1]
    helper = _functions(path)[name]
    lines, taught_node = path.read_text().splitlines(), _functions(ROOT / lesson)[name]
    lesson_lines = (ROOT / lesson).read_text().splitlines()
    function_lines = lesson_lines[taught_node.lineno - 1 : taught_node.end_lineno]
    todos = [m.group(1) for m in map(TODO_LINE.match, function_lines) if m]
    origin = f"TODO {todos[0]}" if todos else "given code"
    marker = f"# Generated from {lesson} ({origin}) by tools/building/saved.py."
    assert lines[helper.lineno - 2] == marker
    taught = ast.unparse(_WithoutPrefix(module_name).visit(taught_node))
    solved = ast.unparse(helper)
    diff = "\n".join(
        difflib.unified_diff(taught.splitlines(), solved.splitlines(), lesson, module, lineterm="")
    )
    assert solved == taught, f"{module}.{name} differs from {lesson}'s:\n{diff}"


def test_no_utils_module_defines_a_saved_function_again():
    saved = {name: module for _, name, module in HANDED_OUT}
    allowed = {name for _, name in NOT_COPIES}
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in sorted((ROOT / "utils").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and node.name in set(saved) - allowed
        and not (path == _helper_path(saved[node.name]) and node.col_offset == 0)
    ]
    assert found == [], "a second copy: call the saved function in its module instead"


@pytest.mark.parametrize("lesson, name, module", HANDED_OUT, ids=[n for _, n, _ in HANDED_OUT])
def test_the_saved_function_runs_from_its_module(lesson, name, module):
    assert callable(getattr(importlib.import_module(module), name))


def _lesson_namespace(lesson: str, names: list[str], **given) -> dict:
    """Runs the named top-level functions and assignments of a lesson in a fresh namespace."""
    tree = ast.parse((ROOT / lesson).read_text())
    wanted = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in names)
        or (
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) in names for t in node.targets)
        )
    ]
    namespace = dict(given)
    exec(compile(ast.Module(body=wanted, type_ignores=[]), lesson, "exec"), namespace)
    return namespace


def test_ceiling_of_lesson_8_equals_pipeline_decode_ceiling_dataset():
    """Lesson 8's TODO is an assignment, not a function: run it, and compare its batches."""
    import tensorflow as tf

    from utils import pipeline

    stored_jpegs = [  # Textured: a flip or a crop of one changes its pixels.
        tf.io.encode_jpeg(
            tf.random.stateless_uniform([8, 8, 3], seed=(i, 1), maxval=256, dtype=tf.int32)
            .numpy()
            .astype("uint8")
        ).numpy()
        for i in range(7)
    ]
    lesson = _lesson_namespace(
        LESSON_8,
        ["decode_batch", "ceiling_dataset"],
        tf=tf,
        stored_jpegs=stored_jpegs,
        BATCH_SIZE=3,
    )
    helper = pipeline.decode_ceiling_dataset(stored_jpegs, batch_size=3)
    assert lesson["ceiling_dataset"].element_spec == helper.element_spec
    for solved, helped in zip(lesson["ceiling_dataset"].take(5), helper.take(5), strict=True):
        np.testing.assert_array_equal(solved.numpy(), helped.numpy())


def test_resize_and_crop_of_a_one_pixel_wide_image_needs_no_clamp():
    import tensorflow as tf

    from utils import records

    for height, width in [(1, 1), (5, 1), (1, 300), (2, 3)]:
        image = tf.fill([height, width, 3], tf.constant(200, tf.uint8))
        square = records.resize_and_crop(image, 8)
        assert square.shape == (8, 8, 3), (height, width)
        assert square.dtype == tf.uint8
        assert int(tf.reduce_min(square)) == int(tf.reduce_max(square)) == 200, (height, width)


def _utils_defs() -> set[str]:
    names = set()
    for path in (ROOT / "utils").rglob("*.py"):
        names |= set(re.findall(r"^\s*def (\w+)\(", path.read_text(), flags=re.MULTILINE))
    return names


def _solved_functions() -> set[tuple[str, str]]:
    """(lesson, function) for every function of a lesson that holds a solution region."""
    found = set()
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        text = path.read_text()
        lesson = path.relative_to(ROOT).as_posix()
        regions = find_regions(text, lesson)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and any(
                node.lineno < begin and end <= node.end_lineno for begin, end in regions
            ):
                found.add((lesson, node.name))
    return found


def test_every_solved_function_with_a_utils_namesake_is_saved_or_listed():
    with_namesake = {key for key in _solved_functions() if key[1] in _utils_defs()}
    saved = {(lesson, name) for lesson, name, _ in HANDED_OUT}
    given = saved - _solved_functions()  # Saved whole from a cell without a TODO.
    assert given == {(LAB_2, "resize_and_crop"), (LAB_2, "recompress")}
    listed = saved | set(NOT_COPIES)
    assert with_namesake - listed == set(), "tag its cell `save`, or list it in NOT_COPIES"
    assert listed - given - with_namesake == set(), "these are listed but no longer pairs"
