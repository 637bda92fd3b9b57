"""Step `flag`: what a learner's code does that it has no reason to do, for the instructor.

Takes the learner's cells (TODO and added) and the lab; gives `Grade.flags` (names of
`FLAGS`, in their order) and, when flagged, `Grade.diff` (the code against the lab's, for
`review.md`). A flag does not change a score: the sandbox and the guard do what can be
done, a flag says what cannot be prevented inside the learner's own kernel.
"""

from __future__ import annotations

import ast
import difflib
import re

import nbformat

from tools.grading.model import KEY, Submission, marks, parse, without_magics
from tools.grading.submission.identify import named_learner
from tools.grading.submission.prepare import lab_parameters
from tools.grading.submission.restore import learner_cells
from tools.grading.submission.syntax_flags import (
    COURSE_MODULES,
    bound_names,
    os_sys_aliases,
    syntax_flags,
)

OTHER_LEARNER = "another learner's id in its metadata"
# What a learner's code has no reason to do, by flag: regular expressions on the code.
FLAGS = {
    "exec/eval/compile": r"(?<![.\w])(?:exec|eval|compile|execfile)\s*\(",
    "imported modules": r"\bsetattr\(|\bdelattr\(",
    "lab objects": r"^(?!)",  # Found from the code's syntax (`syntax_flags`).
    "reassigned parameters": r"^(?!)",
    "sys.modules": r"\bsys\.modules\b",
    "sys.path": r"\bsys\.path\b|\bPYTHONPATH\b|\bsite\.addsitedir\b",
    "import system": r"\bimportlib\b|\b__import__\b|\bbuiltins\b|\b__builtins__\b",
    "aliased os/sys": r"\bimport\s+(?:[\w.]+\s+as\s+\w+\s*,\s*)*(?:os|sys)\s+as\b"
    r"|=\s*(?:os|sys)\s*$|\bfrom\s+(?:os|sys)\s+import",
    "IPython hooks": r"\bget_ipython\b|\bIPython\b|^\s*[%!]"
    r"|\bsys\.(?:excepthook|settrace|setprofile)"
    r"|\bsys\.meta_path\b|\batexit\b",
    "paths outside the work folder": r"[\"'](?:/\w|~/|\.\./)|\bexpanduser\b|\bchdir\b"
    r"|\bsolutions\b|\bnotebooks/",
    "processes": r"\bsubprocess\b|\bos\.(?:system|fork\w*|kill\w*|exec\w*|spawn\w*|popen)\b"
    r"|\bfork\b|\bmultiprocessing\b|\bctypes\b|\bpty\b|\bposix_spawn|\bcreate_subprocess"
    r"|\bthreading\.Thread\b|\bsignal\b",
    "the grader's names": r"\b_grader_\w*",
    "hidden cells": r"^(?!)",  # A cell of the learner's tagged `setup` or hidden (`step`).
}
FLAG_NAMES = tuple(FLAGS)
LIBRARY_MODULES = frozenset({"np", "tf", "keras", "jax"})  # As the labs import them.


def _lab_names(lab: nbformat.NotebookNode):
    """The modules the lab imports, the names it binds, and its course objects."""
    lab_names, modules, objects, course = set(), set(), set(), {"utils"}
    for cell in lab.cells:
        if cell.cell_type != "code" or "todo" in marks(cell):
            continue
        try:
            tree = parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("utils"):
                    course |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                lab_names.add(node.id)
        for node in tree.body:  # `name = course_module.make_something(...)`
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                root = node.value.func
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in course:
                    objects |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return lab_names, modules, objects


def find_flags(code: str, lab: nbformat.NotebookNode | None = None) -> list[str]:
    """Returns the names of `FLAGS` that `code` (a learner's cells) raises, in their order.

    An alias of `os` or `sys` (`import sys as s`, `s = sys`) is read as the module itself.
    A course module's name (`COURSE_MODULES`) is a module unless the code or the lab binds
    it as a name of its own (`data = ...`).
    """
    plain = code
    for alias, module in os_sys_aliases(code).items():
        plain = re.sub(rf"\b{re.escape(alias)}\.", f"{module}.", plain)
    found = {name for name, pattern in FLAGS.items() if re.search(pattern, plain, re.MULTILINE)}
    parameters, lab_names, objects = set(), set(), set()
    modules = set(LIBRARY_MODULES | {"utils"})
    if lab is not None:
        parameters = set(lab_parameters(lab, {}))
        lab_names, lab_modules, objects = _lab_names(lab)
        modules |= lab_modules
        lab_names -= parameters | modules
    own = bound_names(code) | lab_names | parameters
    modules |= COURSE_MODULES - own
    found |= syntax_flags(without_magics(code), parameters, lab_names, modules, objects)
    return [name for name in FLAGS if name in found]


def _is_labs_setup(cell) -> bool:
    return "setup" in cell.metadata.get("tags", []) and "added" not in cell.metadata.get(KEY, {})


def _hidden(cell) -> bool:
    return "setup" in cell.metadata.get("tags", []) or cell.metadata.get("jupyter", {}).get(
        "source_hidden", False
    )


def review_diff(lab: nbformat.NotebookNode, restored: nbformat.NotebookNode) -> str:
    """The learner's code against the lab's, as a unified diff of the code cells."""

    def code(notebook):
        return [
            line
            for cell in notebook.cells
            if cell.cell_type == "code"
            and "check" not in marks(cell)
            and not _is_labs_setup(cell)  # A learner's cell is shown whatever its tags.
            for line in [f"# --- {cell.get('id')}", *cell.source.splitlines()]
        ]

    return "\n".join(
        difflib.unified_diff(code(lab), code(restored), "lab", "submission", lineterm="", n=1)
    )


def step(submission: Submission) -> bool:
    """Flags the learner's cells, and a notebook whose metadata names another learner than
    its file's name; keeps their diff against the lab when flagged."""
    grade = submission.grade
    mine = learner_cells(submission.restored)
    grade.flags = find_flags("\n".join(c.source for c in mine), submission.lab)
    if any(_hidden(c) for c in mine if "added" in c.metadata.get(KEY, {})):
        grade.flags.append("hidden cells")
    named = named_learner(submission.notebook)
    if named and named != grade.learner:
        grade.flags.append(OTHER_LEARNER)
        grade.notes.append(
            f"The notebook's metadata names another learner ({named}): graded as "
            f"{grade.learner}, the learner its file's name gives."
        )
    if grade.flags:
        grade.diff = review_diff(submission.lab, submission.restored)
    return True


__all__ = ["COURSE_MODULES", "FLAGS", "FLAG_NAMES", "KEY", "find_flags", "review_diff", "step"]
