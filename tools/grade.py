"""Grades a folder of submitted lab notebooks: points per TODO, from the real check cells.

1. Copy every submission into the grader's own folder before running any, and warm the
   data cache (outside any sandbox) with the small datasets the labs will read.
2. Time limits per lesson, from its solution's own run in the sandbox (cached per lesson
   source): each cell gets `CELL_MULTIPLE` times its solution time (at least `CELL_FLOOR`
   s), the submission `SUBMISSION_MULTIPLE` times the solution's total (at least
   `SUBMISSION_FLOOR` s); printed. `--cell-timeout` / `--timeout` set them instead.
3. For each submission: its learner id (`--id-pattern` on the file name, else the
   notebook's metadata, else the file name), its lab and version (graded against the lab of
   its version where `labs/` or `--releases` holds it, else the current one, in one line).
   Rebuild it on that lab, as nbgrader does: every protected cell (set-up, parameters,
   text, checks) comes from the lab; the learner's TODO cells (found by metadata, stable
   id `todo-n`, or `# TODO n:` line; of two copies the last) and added cells stay in place.
   Each check cell starts with the lab's parameters as literals and a guard that restores
   the course's modules, `sys.path`, patched functions of numpy/TF/Keras and IPython hooks.
4. Run the cells one by one in a kernel sandboxed with bubblewrap (`tools/grade_kernel.py`):
   only the virtual environment, Python, `utils/` and the data cache are there (no
   solutions, lesson sources or git history), no network, its own PID namespace, a memory
   limit. The grader reads each cell's result from the kernel's replies, in its own memory.
   A cell past its limit stops the run; the TODOs passed before it are kept.
5. Score each TODO from its check cell (passed only if the check printed "TODO n passed");
   a TODO cell's own error is reported for that TODO. Flag what cannot be prevented
   (`FLAG_NAMES`) for the instructor, who reads `review.md` (`--review` prints it).

Writes to the output folder (which must not be or contain the submissions folder):
`grades.csv` (one row per submission: learner, lab, version, points per TODO, total,
maximum, flags), `scores.md` (the instructor's table), `feedback/<learner>-<lab>.md` (one
file per submission, for the learner), `junit/<learner>-<lab>.xml` (a test case per TODO)
and `review.md` (flagged submissions' code, diffed
against the lab). The exit status says whether grading itself worked (0), not whether
students passed.

Usage:
    python -m tools.grade submissions/ --output-dir build/grades [-j N] [--review]
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import csv
import dataclasses
import difflib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat

from tools import build_notebooks as build
from tools import grade_kernel, sandbox, setup_cell
from tools.lesson_parameters import SMALL_PARAMETERS
from utils import data, progress

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY = build.METADATA_KEY
GRADER_FILES = ("grades.csv", "scores.md", "review.md", "feedback/*.md", "junit/*.xml")
CELL_FLOOR, CELL_MULTIPLE = 30, 10
SUBMISSION_FLOOR, SUBMISSION_MULTIPLE = 120, 5
LIMITS_FILE = "grader-limits.json"  # In the data cache: each lesson's solution run.
# Runs before the first learner cell: what the guard restores later.
SNAPSHOT = """\
# Grader: remember the functions of the modules imported so far, sys.path, IPython hooks.
import sys as _grader_sys
_grader_saved = {
    _grader_name: (_grader_module, {
        _grader_key: _grader_value
        for _grader_key, _grader_value in list(vars(_grader_module).items())
        if callable(_grader_value)
    })
    for _grader_name, _grader_module in list(_grader_sys.modules.items())
    if _grader_name.split(".")[0] in ("numpy", "tensorflow", "keras", "jax", "math", "os")
    and hasattr(_grader_module, "__dict__")
}
_grader_classes = {
    _grader_value: dict(vars(_grader_value))
    for _grader_name, (_grader_module, _grader_names) in _grader_saved.items()
    if _grader_name.startswith("tensorflow.python.data.ops.")
    for _grader_value in _grader_names.values()
    if isinstance(_grader_value, type) and _grader_value.__module__ == _grader_name
}
_grader_path = list(_grader_sys.path)
_grader_objects = [  # The lab's own course objects (the simulated storage): their settings.
    (_grader_object, {
        _grader_key: _grader_value
        for _grader_key, _grader_value in vars(_grader_object).items()
        if isinstance(_grader_value, (float, bool, type(None))) or callable(_grader_value)
    })
    for _grader_object in [globals().get(_grader_name) for _grader_name in %(names)r]
    if type(_grader_object).__module__.split(".")[0] == "utils"
    and hasattr(_grader_object, "__dict__") and not isinstance(_grader_object, type)
]
_grader_shell = get_ipython()
_grader_hooks = (list(_grader_shell.input_transformers_post),
                 list(_grader_shell.input_transformers_cleanup),
                 list(_grader_shell.ast_transformers))
"""
# Runs at the start of every check cell, after the parameters' literal values.
GUARD = """\
# Grader: undo what a TODO cell may have patched, then load the real checks.
for _grader_module, _grader_names in _grader_saved.values():
    for _grader_key, _grader_value in _grader_names.items():
        if vars(_grader_module).get(_grader_key) is not _grader_value:
            setattr(_grader_module, _grader_key, _grader_value)
for _grader_class, _grader_names in _grader_classes.items():
    for _grader_key, _grader_value in _grader_names.items():
        if vars(_grader_class).get(_grader_key) is not _grader_value:
            setattr(_grader_class, _grader_key, _grader_value)
for _grader_object, _grader_names in _grader_objects:
    for _grader_key, _grader_value in _grader_names.items():
        if vars(_grader_object).get(_grader_key) is not _grader_value:
            setattr(_grader_object, _grader_key, _grader_value)
_grader_sys.path[:] = [%(root)r] + [p for p in _grader_path if p != %(root)r]
(_grader_shell.input_transformers_post[:], _grader_shell.input_transformers_cleanup[:],
 _grader_shell.ast_transformers[:]) = _grader_hooks
for _grader_name in 2 * sorted(
    (n for n in list(_grader_sys.modules) if n == "utils" or n.startswith("utils.")),
    key=lambda n: (-n.count("."), n),
):
    _grader_module = _grader_sys.modules.get(_grader_name)
    _grader_file = str(getattr(_grader_module, "__file__", None))
    if _grader_module is None or not _grader_file.startswith(%(utils)r):
        _grader_sys.modules.pop(_grader_name, None)
        continue
    _grader_module.__spec__.loader.exec_module(_grader_module)
import utils.checks as checks
"""
# What a learner's code has no reason to do, by flag: regular expressions on the code.
FLAGS = {
    "exec/eval/compile": r"(?<![.\w])(?:exec|eval|compile|execfile)\s*\(",
    "imported modules": r"\bsetattr\(|\bdelattr\(",
    "lab objects": r"^(?!)",  # Found from the code's syntax (`_syntax_flags`).
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
}
FLAG_NAMES = tuple(FLAGS)


@dataclasses.dataclass
class Grade:
    """The grading of one submission."""

    submission: str
    learner: str = ""
    lab: str = ""
    version: str = ""
    status: str = "graded"
    points: dict[int, int] = dataclasses.field(default_factory=dict)  # TODO -> its worth.
    passed: dict[int, bool] = dataclasses.field(default_factory=dict)
    messages: dict[int, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    flags: list[str] = dataclasses.field(default_factory=list)
    first_error: str = ""
    diff: str = ""
    seconds: float = 0.0

    @property
    def earned(self) -> dict[int, int]:
        return {todo: self.points[todo] * self.passed.get(todo, False) for todo in self.points}

    @property
    def total(self) -> int:
        return sum(self.earned.values())

    @property
    def maximum(self) -> int:
        return sum(self.points.values())


@dataclasses.dataclass
class Limits:
    """Seconds a lesson's cells may take: per lab cell id, for added cells, in all."""

    cells: dict[str, float]
    added: float
    total: float
    why: str = ""

    def of(self, cell_id: str) -> float:
        return self.cells.get(cell_id, self.added)


@dataclasses.dataclass
class Options:
    """How each submission runs: limits, memory, sandbox (a bwrap path or None), cache."""

    cell_timeout: float | None = None
    timeout: float | None = None
    memory_gb: float = 4.0
    bwrap: str | None = None
    cache: Path | None = None
    work_root: Path | None = None


def identify_lab(notebook: nbformat.NotebookNode, labs: dict[str, nbformat.NotebookNode]):
    """Returns the lesson name (`01_tf_data_basics`) of a submission, or None if unknown."""
    source = notebook.metadata.get(KEY, {}).get("source", "")
    if Path(source).stem in labs:
        return Path(source).stem
    for cell in notebook.cells[:3]:
        match = _TITLE.search(cell.source) if cell.cell_type == "markdown" else None
        if match:
            found = [name for name in labs if name.startswith(f"{int(match.group(1)):02d}_")]
            return found[0] if found else None
    return None


_TITLE = re.compile(r"^#\s*(?:Lab|Lesson)\s+(\d+)\b", re.MULTILINE)
_STABLE_ID = re.compile(r"^(todo|check)-(\d+)$")


def _marks(cell: nbformat.NotebookNode) -> dict:
    """A cell's course marks: its metadata, else what its stable id (`todo-3`) says."""
    marks = cell.get("metadata", {}).get(KEY, {})
    if "todo" in marks or "check" in marks:
        return marks
    match = _STABLE_ID.match(str(cell.get("id", "")))
    return {match.group(1): int(match.group(2))} if match else {}


def _todo_of(cell: nbformat.NotebookNode) -> int | None:
    """The TODO number of a learner's code cell: metadata, stable id, else `# TODO n:`."""
    if cell.cell_type != "code":
        return None
    marks = _marks(cell)
    if "check" in marks:
        return None
    if "todo" in marks:
        return marks["todo"]
    match = next(filter(None, map(build.TODO_LINE.match, cell.source.splitlines())), None)
    return int(match.group(1)) if match else None


def restore_protected_cells(submission: nbformat.NotebookNode, lab: nbformat.NotebookNode):
    """Returns the lab with the learner's cells in it, and notes for the report.

    Every protected cell is the lab's own; each TODO cell is the learner's (the last copy
    when there are several); every other learner cell is kept after the protected or TODO
    cell it followed (a protected cell is recognised by its source, its check mark, or its
    id). Learner cells carry the mark `{"added": True}`; no cell's source is changed here.
    """
    lab_sources = {cell.source: index for index, cell in enumerate(lab.cells)}
    lab_ids = {cell.id: index for index, cell in enumerate(lab.cells)}
    lab_todos = {_marks(c)["todo"]: i for i, c in enumerate(lab.cells) if "todo" in _marks(c)}
    lab_checks = {_marks(c)["check"]: i for i, c in enumerate(lab.cells) if "check" in _marks(c)}
    todo_cells: dict[int, list[nbformat.NotebookNode]] = {}
    added: dict[int, list[nbformat.NotebookNode]] = {}  # Lab position -> cells after it.
    anchor = -1
    for cell in submission.cells:
        todo = _todo_of(cell)
        if todo in lab_todos:
            todo_cells.setdefault(todo, []).append(cell)
            anchor = lab_todos[todo]
            continue
        check = _marks(cell).get("check")
        index = lab_checks.get(check, lab_sources.get(cell.source, lab_ids.get(cell.get("id"))))
        if index is not None and index not in lab_todos.values():
            anchor = index
        else:
            new = copy.deepcopy(cell)
            new.setdefault("metadata", {})[KEY] = {"added": True}
            added.setdefault(anchor, []).append(new)
    restored, notes = copy.deepcopy(lab), []
    restored.cells = list(added.get(-1, []))
    for index, cell in enumerate(lab.cells):
        cell = copy.deepcopy(cell)
        todo = _marks(cell).get("todo")
        if todo is not None:
            copies = todo_cells.get(todo, [])
            if not copies:
                notes.append(f"TODO {todo}: no cell found in the submission")
            else:
                cell.source = copies[-1].source
            if len(copies) > 1:
                notes.append(f"TODO {todo}: {len(copies)} cells found; the last one was graded")
        restored.cells.append(cell)
        restored.cells += added.get(index, [])
    for number, cell in enumerate(restored.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if "added" in cell.metadata.get(KEY, {}):
            cell.id = f"added-{number}"
    return restored, notes


def learner_cells(restored: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells a learner wrote: the TODO cells and the added ones."""
    return [
        cell
        for cell in restored.cells
        if cell.cell_type == "code"
        and ({"todo", "added"} & set(_marks(cell) or cell.metadata.get(KEY, {})))
    ]


def lab_parameters(lab: nbformat.NotebookNode, injected: dict) -> dict:
    """Returns the lab's parameters (literal values of its parameters cell), `injected` last."""
    cell = next(c for c in lab.cells if "parameters" in c.metadata.get("tags", []))
    values = {}
    for statement in ast.parse(cell.source).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                try:
                    values[target.id] = ast.literal_eval(statement.value)
                except ValueError:
                    pass
    return {**values, **injected}


def _syntax_flags(
    code: str, parameters: set[str], lab_names: set[str], modules: set[str], objects: set[str]
):
    """Flags found from the code's syntax: assignments to modules, lab objects, parameters.

    `objects` are the lab's course objects (`simulated_storage`, `source`): binding one
    of those names again is flagged too.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found = set()
    for node in tree.body:  # A lab object bound again at top level.
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            for element in ast.walk(target) if isinstance(target, ast.AST) else []:
                if isinstance(element, ast.Name) and element.id in objects:
                    found.add("lab objects")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            for element in ast.walk(target):
                if isinstance(element, ast.Name) and isinstance(element.ctx, ast.Store):
                    if element.id in parameters:
                        found.add("reassigned parameters")
                if isinstance(element, ast.Attribute | ast.Subscript) and not isinstance(
                    element.ctx, ast.Load
                ):
                    root = element.value
                    while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
                        root = root.value if not isinstance(root, ast.Call) else root.func
                    if isinstance(root, ast.Name) and root.id in modules:
                        found.add("imported modules")
                    elif isinstance(root, ast.Name) and root.id in lab_names | parameters:
                        found.add("lab objects")
    return found


def find_flags(code: str, lab: nbformat.NotebookNode | None = None) -> list[str]:
    """Returns the names of `FLAGS` that `code` (a learner's cells) raises, in their order.

    An alias of `os` or `sys` (`import sys as s`, `s = sys`) is read as the module itself.
    """
    plain = code
    for alias, module in _os_sys_aliases(code).items():
        plain = re.sub(rf"\b{re.escape(alias)}\.", f"{module}.", plain)
    found = {name for name, pattern in FLAGS.items() if re.search(pattern, plain, re.MULTILINE)}
    parameters, lab_names, modules = set(), set(), {"np", "tf", "keras", "jax", "utils"}
    objects, course = set(), {"utils"}
    if lab is not None:
        parameters = set(lab_parameters(lab, {}))
        for cell in lab.cells:
            if cell.cell_type != "code" or "todo" in _marks(cell):
                continue
            try:
                tree = ast.parse(cell.source)
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
        lab_names -= parameters | modules
    found |= _syntax_flags(_without_magics(code), parameters, lab_names, modules, objects)
    return [name for name in FLAGS if name in found]


def _os_sys_aliases(code: str) -> dict[str, str]:
    """Returns {alias: "os" or "sys"}: `import sys as s`, `import os as o, sys as s`, `s = sys`."""
    aliases = {}
    try:
        tree = ast.parse(_without_magics(code))
    except SyntaxError:
        return aliases
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.name in ("os", "sys") and name.asname and name.asname != name.name:
                    aliases[name.asname] = name.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            if node.value.id in ("os", "sys"):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        aliases[target.id] = node.value.id
    return aliases


def _without_magics(code: str) -> str:
    return "\n".join("" if re.match(r"^\s*[%!]", line) else line for line in code.splitlines())


def lab_names(lab: nbformat.NotebookNode) -> list[str]:
    """The names the lab's own code cells bind at top level (not the TODO cells')."""
    names = []
    for cell in lab.cells:
        if cell.cell_type != "code" or "todo" in _marks(cell):
            continue
        if "added" in cell.metadata.get(KEY, {}):
            continue
        try:
            tree = ast.parse(_without_magics(cell.source))
        except SyntaxError:
            continue
        for node in tree.body:
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                for element in ast.walk(target) if target is not None else []:
                    if isinstance(element, ast.Name) and element.id not in names:
                        names.append(element.id)
    return names


def prepare_cells(
    restored: nbformat.NotebookNode, parameters: dict
) -> list[tuple[nbformat.NotebookNode, str]]:
    """Returns (cell, code to run) for every code cell, with the grader's cells added.

    After the parameters cell: the injected parameters. Before the first learner cell: the
    snapshot the guard restores from. Each check cell: the parameters as literals, the
    guard, then the check.
    """
    literals = "# Grader: the lab's parameters, as the grader set them.\n" + "\n".join(
        f"{name} = {value!r}" for name, value in parameters.items()
    )
    guard = GUARD % {"root": str(REPO_ROOT), "utils": str(REPO_ROOT / "utils")}
    prepared, snapshot_done = [], False
    for cell in restored.cells:
        if cell.cell_type != "code":
            continue
        marks = _marks(cell) or cell.metadata.get(KEY, {})
        if ("todo" in marks or "added" in marks) and not snapshot_done:
            snapshot = SNAPSHOT % {"names": lab_names(restored)}
            prepared.append((nbformat.v4.new_code_cell(id="grader-snapshot"), snapshot))
            snapshot_done = True
        if "check" in marks:
            prepared.append((cell, literals + "\n" + guard + cell.source))
        else:
            prepared.append((cell, cell.source))
        if "parameters" in cell.metadata.get("tags", []):
            prepared.append((nbformat.v4.new_code_cell(id="injected-parameters"), literals))
    return prepared


def _describe(cell: nbformat.NotebookNode) -> str:
    marks = _marks(cell) or cell.metadata.get(KEY, {})
    if "todo" in marks:
        return f"the cell of TODO {marks['todo']}"
    if "check" in marks:
        return f"the check cell of TODO {marks['check']}"
    if "added" in marks:
        first = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else "empty"
        return f"a cell you added ({first})"
    return f"the lab's cell {cell.get('id')}"


def score(grade: Grade, prepared: list, results: list[grade_kernel.CellResult]) -> None:
    """Sets each TODO's verdict and message from the cells' results, by cell marks."""
    todo_errors: dict[int, str] = {}
    stop = ""
    for (cell, _), result in zip(prepared, results, strict=True):
        marks = _marks(cell) or cell.metadata.get(KEY, {})
        if result.status in ("timeout", "died") and not stop:
            stop = f"{_describe(cell)} {result.error}; the cells after it were not run"
            grade.notes.append(f"Stopped: {stop}")
        if result.status in ("error", "timeout", "died") and not grade.first_error:
            grade.first_error = f"{_describe(cell)}: {result.error}"
        if "todo" in marks and result.status in ("error", "timeout", "died"):
            todo_errors[marks["todo"]] = result.error
        if "check" in marks:
            todo = marks["check"]
            passed = result.status == "ok" and f"TODO {todo} passed" in result.output
            grade.passed[todo] = passed
            if passed:
                grade.messages[todo] = _passed_line(result.output, todo)
            elif todo in todo_errors:
                grade.messages[todo] = f"your TODO {todo} cell failed: {todo_errors[todo]}"
            elif result.status == "not run":
                grade.messages[todo] = (
                    f"not run: {stop or result.error or 'an earlier cell stopped the run'}"
                )
            elif result.status == "ok":
                grade.messages[todo] = "the check printed no 'passed' line"
            else:
                grade.messages[todo] = result.error or result.status
                failed = [n for n, ok in grade.passed.items() if n < todo and not ok]
                if result.error.startswith("NameError") and failed:
                    grade.messages[todo] += (
                        f" (a name the lab makes from TODO {failed[0]}'s result: fix TODO "
                        f"{failed[0]} first)"
                    )
    for todo in grade.points:
        grade.passed.setdefault(todo, False)
        grade.messages.setdefault(todo, "not run")


def _passed_line(output: str, todo: int) -> str:
    line = next(line for line in output.splitlines() if f"TODO {todo} passed" in line)
    return line.strip()[:400]


def prepare_work(work: Path, cache: Path | None) -> dict[str, str]:
    """Makes a submission's work folder (home, data cache) and returns its environment.

    The private cache links to each finished embedded dataset of the shared cache (read-only
    in the sandbox); anything else a lab writes to its cache (shards) stays in the folder.
    """
    (work / "home").mkdir(parents=True)
    (work / "cache").mkdir()
    if cache is not None and cache.is_dir():
        for dataset in cache.glob("flowers-embedded-*"):
            if (dataset / "dataset.json").exists():
                (work / "cache" / dataset.name).symlink_to(dataset)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(work / "home"),
        "TMPDIR": "/tmp",
        data.CACHE_ENV_VAR: str(work / "cache"),
        progress.DISABLE_ENV_VAR: "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "NO_GCE_CHECK": "true",
    }


def run_prepared(prepared: list, limits: Limits, options: Options, label: str):
    """Runs prepared cells in a fresh sandboxed kernel; returns their results."""
    work = Path(tempfile.mkdtemp(prefix=f"{label[:40]}-", dir=options.work_root))
    env = prepare_work(work, options.cache)
    read_only = [REPO_ROOT / "utils", Path(sys.prefix), Path(sys.base_prefix)]
    if options.cache is not None:
        read_only.append(options.cache)
    kernel = grade_kernel.SandboxedKernel(
        work, env, bwrap=options.bwrap, read_only=read_only,
        memory_bytes=int(options.memory_gb * 2**30),
    )  # fmt: skip
    cell_limits = [limits.of(cell.get("id", "")) for cell, _ in prepared]
    return grade_kernel.run_cells(
        [code for _, code in prepared], cell_limits, kernel, total_limit=limits.total
    )


def fixed_limits(options: Options) -> Limits | None:
    """The limits `--cell-timeout` and `--timeout` set, or None to measure them."""
    if options.cell_timeout is None and options.timeout is None:
        return None
    cell = options.cell_timeout or 300
    total = options.timeout or 1200
    why = f"--cell-timeout {cell:g} s per cell, --timeout {total:g} s per submission"
    return Limits({}, cell, total, why)


def measure_limits(lesson: str, lab: nbformat.NotebookNode, options: Options) -> Limits:
    """Returns a lesson's limits from its solution's run in the sandbox (cached)."""
    fixed = fixed_limits(options)
    if fixed is not None:
        return fixed
    source = REPO_ROOT / "notebooks" / f"{lesson}.py"
    solution = build.split_variants(source)[1] if source.exists() else None
    if solution is None:
        return Limits({}, 300, 1200, "no lesson source here: 300 s per cell, 1200 s in all")
    parameters = lab_parameters(lab, SMALL_PARAMETERS.get(lesson, {}))
    digest = hashlib.sha256(
        (build.to_text(solution) + json.dumps(parameters, sort_keys=True)).encode()
    ).hexdigest()[:16]
    store = (options.cache or data.default_cache_dir()) / LIMITS_FILE
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    seconds = known.get(lesson, {}).get(digest)
    if seconds is None:
        print(f"Timing {lesson}'s solution in the sandbox, for its time limits ...", flush=True)
        restored, _ = restore_protected_cells(solution, lab)
        prepared = prepare_cells(restored, parameters)
        results = run_prepared(prepared, Limits({}, 900, 3600), options, f"time-{lesson}")
        bad = [r for r in results if r.status != "ok"]
        if bad:
            print(f"WARNING: {lesson}'s solution did not run cleanly ({bad[0].error}); "
                  "limits from what did run", flush=True)  # fmt: skip
        seconds = {
            cell.get("id", ""): r.seconds for (cell, _), r in zip(prepared, results, strict=True)
        }
        known.setdefault(lesson, {})[digest] = seconds
        if not bad:
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_text(json.dumps(known, indent=1))
    cells = {cell_id: max(CELL_FLOOR, CELL_MULTIPLE * t) for cell_id, t in seconds.items()}
    total_solution = sum(seconds.values())
    total = max(SUBMISSION_FLOOR, SUBMISSION_MULTIPLE * total_solution)
    added = max(cells.values(), default=CELL_FLOOR)
    why = (
        f"its solution ran in {total_solution:.0f} s: each cell {CELL_MULTIPLE}x its time "
        f"(at least {CELL_FLOOR} s; up to {added:.0f} s), {total:.0f} s in all "
        f"({SUBMISSION_MULTIPLE}x, at least {SUBMISSION_FLOOR} s)"
    )
    return Limits(cells, added, total, why)


def learner_id(path: Path, notebook: nbformat.NotebookNode | None, pattern: str | None) -> str:
    """The learner's id: `--id-pattern`'s group `id` (or 1) in the file name, else the
    notebook's metadata (`tpu_speed_pipelines.learner`), else the file's name."""
    if pattern:
        match = re.search(pattern, path.name)
        if match:
            return match.groupdict().get("id") or (
                match.group(1) if match.groups() else match.group(0)
            )
    if notebook is not None:
        found = notebook.metadata.get(KEY, {}).get("learner")
        if isinstance(found, str) and found.strip():
            return found.strip()
    return path.stem


def choose_lab(notebook, lesson: str, labs: dict) -> tuple[nbformat.NotebookNode, str, str]:
    """Returns (the lab to grade against, its version, a note or "") for a submission."""
    current = labs["current"][lesson]
    current_version = current.metadata.get(KEY, {}).get("version") or labs["version"]
    version = notebook.metadata.get(KEY, {}).get("version")
    if version is None:
        return (
            current,
            current_version,
            (
                f"no course version in the notebook's metadata; graded against the current lab "
                f"(version {current_version})"
            ),
        )
    if version == current_version:
        return current, version, ""
    kept = labs.get(version, {}).get(lesson)
    if kept is not None:
        return kept, version, ""
    return (
        current,
        current_version,
        (
            f"made from version {version} of the lab, which this grader does not have "
            f"(--releases); graded against the current lab (version {current_version})"
        ),
    )


def grade_submission(path: Path, labs: dict, limits: dict, options: Options,
                     id_pattern: str | None = None) -> Grade:  # fmt: skip
    """Grades one submission (a copy the grader owns); never raises for a bad submission."""
    started = time.perf_counter()
    grade = Grade(submission=path.name, learner=learner_id(path, None, id_pattern))
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as error:  # Not JSON, not a notebook: a bad submission, not a crash.
        grade.status = f"unreadable: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
        return grade
    grade.learner = learner_id(path, submission, id_pattern)
    lesson = identify_lab(submission, labs["current"])
    if lesson is None:
        grade.status = "unknown lab: no course metadata and no 'Lab N' or 'Lesson N' title"
        return grade
    grade.lab = lesson
    lab, grade.version, note = choose_lab(submission, lesson, labs)
    if note:
        grade.notes.append(note)
    grade.points = {
        _marks(c)["todo"]: c.metadata.get(KEY, {}).get("points", build.DEFAULT_POINTS)
        for c in lab.cells
        if "todo" in _marks(c)
    }
    restored, notes = restore_protected_cells(submission, lab)
    grade.notes += notes
    mine = learner_cells(restored)
    grade.flags = find_flags("\n".join(c.source for c in mine), lab)
    if grade.flags:
        grade.diff = review_diff(lab, restored)
    parameters = lab_parameters(lab, SMALL_PARAMETERS.get(lesson, {}))
    prepared = prepare_cells(restored, parameters)
    results = run_prepared(prepared, limits[lesson], options, path.stem)
    score(grade, prepared, results)
    grade.seconds = time.perf_counter() - started
    return grade


def review_diff(lab: nbformat.NotebookNode, restored: nbformat.NotebookNode) -> str:
    """The learner's code against the lab's, as a unified diff of the code cells."""

    def code(notebook):
        return [
            line
            for cell in notebook.cells
            if cell.cell_type == "code"
            and not any(m in _marks(cell) for m in ("check",))
            and "setup" not in cell.metadata.get("tags", [])
            for line in [f"# --- {cell.get('id')}", *cell.source.splitlines()]
        ]

    return "\n".join(difflib.unified_diff(code(lab), code(restored), "lab", "submission",
                                          lineterm="", n=1))  # fmt: skip


def _mark(grade: Grade, todo: int) -> str:
    if todo not in grade.points:
        return ""
    return "pass" if grade.passed.get(todo) else "fail"


def write_reports(grades: list[Grade], output_dir: Path, isolation: str) -> None:
    """Writes grades.csv, scores.md, review.md and one feedback file per submission."""
    max_todo = max([max(g.points, default=0) for g in grades] + [0])
    columns = [f"TODO {n}" for n in range(1, max_todo + 1)]
    with open(output_dir / "grades.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["learner", "lab", "version", *columns, "total", "maximum", "flags",
                         "status", "submission"])  # fmt: skip
        for grade in grades:
            earned = grade.earned
            marks = [earned.get(n, "") for n in range(1, max_todo + 1)]
            writer.writerow([grade.learner, grade.lab, grade.version, *marks, grade.total,
                             grade.maximum, "; ".join(grade.flags), grade.status,
                             grade.submission])  # fmt: skip
    lines = [
        f"Sandbox: {isolation}",
        "",
        "| submission | learner | lab | status | " + " | ".join(columns) + " | total | flags |",
        "|" + " --- |" * (len(columns) + 6),
    ]
    for grade in grades:
        marks = " | ".join(_mark(grade, n) for n in range(1, max_todo + 1))
        total = f"{grade.total}/{grade.maximum}" if grade.points else "0"
        lines.append(f"| {grade.submission} | {grade.learner} | {grade.lab} | {grade.status} | "
                     f"{marks} | {total} | {', '.join(grade.flags)} |")  # fmt: skip
    lines.append("")
    for grade in grades:
        for todo in sorted(grade.points):
            if not grade.passed.get(todo):
                lines.append(f"- {grade.submission}, TODO {todo}: {grade.messages.get(todo, '')}")
        for note in grade.notes:
            lines.append(f"- {grade.submission}: {note}")
        if grade.flags:
            lines.append(f"- {grade.submission}: flagged for review (its code touches "
                         f"{', '.join(grade.flags)}); still graded; see review.md")  # fmt: skip
    (output_dir / "scores.md").write_text("\n".join(lines) + "\n")
    review = ["# Flagged submissions", ""]
    for grade in grades:
        if grade.flags:
            title = f"## {grade.submission} ({grade.learner}, {grade.lab}): "
            review += [title + ", ".join(grade.flags), "", "```diff", grade.diff, "```", ""]
    if len(review) == 2:
        review.append("None.")
    (output_dir / "review.md").write_text("\n".join(review) + "\n")
    (output_dir / "feedback").mkdir(exist_ok=True)
    (output_dir / "junit").mkdir(exist_ok=True)
    for grade in grades:
        name = re.sub(r"[^\w.-]+", "_", f"{grade.learner}-{grade.lab or 'unknown'}")
        (output_dir / "feedback" / f"{name}.md").write_text(feedback(grade))
        (output_dir / "junit" / f"{name}.xml").write_bytes(junit_xml(grade))


def junit_xml(grade: Grade) -> bytes:
    """One JUnit test suite per submission, one test case per TODO (written by the grader)."""
    failed = sum(not grade.passed.get(todo) for todo in grade.points)
    suite = ElementTree.Element(
        "testsuite", name=f"{grade.learner}.{grade.lab}", tests=str(len(grade.points)),
        failures=str(failed), time=f"{grade.seconds:.1f}",
    )  # fmt: skip
    for todo in sorted(grade.points):
        case = ElementTree.SubElement(suite, "testcase", classname=grade.lab, name=f"TODO {todo}")
        if not grade.passed.get(todo):
            ElementTree.SubElement(case, "failure", message=grade.messages.get(todo, ""))
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def feedback(grade: Grade) -> str:
    """A learner's feedback, in Markdown: points, the check's message, the first error."""
    lines = [f"# Feedback: {grade.lab or 'unknown lab'}", ""]
    lines.append(f"Learner: {grade.learner} · submission: {grade.submission} · course "
                 f"version: {grade.version or 'unknown'}")  # fmt: skip
    lines.append("")
    if grade.status != "graded":
        lines += [f"Not graded: {grade.status}.", ""]
        return "\n".join(lines)
    lines += [f"**Total: {grade.total} / {grade.maximum} points**", "",
              "| TODO | points | result |", "| --- | --- | --- |"]  # fmt: skip
    for todo in sorted(grade.points):
        earned = grade.earned[todo]
        message = grade.messages.get(todo, "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {todo} | {earned} / {grade.points[todo]} | {message} |")
    lines.append("")
    if grade.first_error:
        lines += [f"First error: {grade.first_error}", ""]
    for note in grade.notes:
        lines.append(f"- {note}")
    if grade.flags:
        lines.append("- Your instructor will read your code: it uses "
                     f"{', '.join(grade.flags)}.")  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


def load_labs(root: Path = REPO_ROOT, releases: Path | None = None) -> dict:
    """Returns {"current": labs/ by lesson, "version": the course's, version: {lesson: lab}}.

    The labs of other versions are those in `releases/<version>/`, by their metadata.
    """
    current = {p.stem: nbformat.read(p, as_version=4) for p in sorted(root.glob("labs/*.ipynb"))}
    labs: dict = {"current": current, "version": setup_cell.course_version(root)}
    if releases is not None and releases.is_dir():
        for path in sorted(releases.glob("*/*.ipynb")):
            notebook = nbformat.read(path, as_version=4)
            version = notebook.metadata.get(KEY, {}).get("version", path.parent.name)
            labs.setdefault(version, {})[path.stem] = notebook
    return labs


def warm_cache(lessons: set[str]) -> Path:
    """Makes, outside any sandbox, the embedded datasets the lessons read; returns the cache."""
    for lesson in sorted(lessons):
        parameters = SMALL_PARAMETERS.get(lesson, {})
        data.make_flowers_dataset(parameters.get("NUM_IMAGES", data.DEFAULT_NUM_IMAGES))
    return data.default_cache_dir()


def output_dir_problem(submissions: Path, output_dir: Path) -> str | None:
    """Why `output_dir` may not be used for these submissions, or None."""
    submissions, output_dir = submissions.resolve(), output_dir.resolve()
    if submissions == output_dir or submissions.is_relative_to(output_dir):
        return (
            f"--output-dir {output_dir} is or contains the submissions folder {submissions}; "
            "choose another folder (nothing was changed)"
        )
    if output_dir.exists() and not output_dir.is_dir():
        return f"--output-dir {output_dir} is a file, not a folder"
    return None


def choose_sandbox(mode: str) -> tuple[str | None, str]:
    """Returns (bwrap path or None, the words the report uses for the isolation)."""
    bwrap = sandbox.find_bwrap() if mode in ("auto", "bwrap") else None
    if bwrap:
        return bwrap, (
            "bwrap (only the venv, Python, utils/ and the data cache, read-only; no "
            "solutions, sources or other submissions; private work folder and /tmp, no "
            "network, own PID namespace, memory limit)"
        )
    if mode == "none":
        return None, "NOT ISOLATED (--sandbox none)"
    return None, "NOT ISOLATED (no working bwrap here)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "grades")
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds per cell (default: from each lesson's solution run)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per submission (default: from the solution run)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="submissions graded at once (default: the core count)",
    )
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=4.0,
        help="memory limit per process of a submission (RLIMIT_DATA)",
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "none"),
        default="auto",
        help="auto: bwrap where it works, else none (loudly)",
    )
    parser.add_argument(
        "--id-pattern",
        help="regular expression on the file name; its group "
        "'id' (or 1) is the learner's id, e.g. '^(?P<id>[^_]+)_'",
    )
    parser.add_argument(
        "--releases",
        type=Path,
        default=REPO_ROOT / "releases",
        help="folder of released labs, releases/<version>/NN_*.ipynb",
    )
    parser.add_argument("--review", action="store_true",
                        help="print the flagged submissions' code against the lab")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"error: {args.submissions} is not a folder of notebooks", file=sys.stderr)
        return 2
    paths = sorted(args.submissions.glob("*.ipynb"))
    if not paths:
        print(f"error: no .ipynb files in {args.submissions}", file=sys.stderr)
        return 2
    output_dir = args.output_dir.resolve()
    problem = output_dir_problem(args.submissions, output_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"error: -j must be 1 or more; got {args.jobs}", file=sys.stderr)
        return 2
    bwrap, isolation = choose_sandbox(args.sandbox)
    if args.sandbox == "bwrap" and bwrap is None:
        print(f"error: --sandbox bwrap, but {sandbox.bwrap_fix()}", file=sys.stderr)
        return 2
    if bwrap is None:
        fix = f" To isolate: {sandbox.bwrap_fix()}." if args.sandbox == "auto" else ""
        print(f"WARNING: {isolation}: submissions can read and write your files, the course "
              f"and each other's; grade only work you trust.{fix}", file=sys.stderr)  # fmt: skip
    print(f"Sandbox: {isolation}", flush=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    for pattern in GRADER_FILES:  # Only what an earlier grading wrote; nothing else.
        for old in output_dir.glob(pattern):
            old.unlink()
    labs = load_labs(REPO_ROOT, args.releases)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grader-") as workspace:
        copies = Path(workspace) / "submissions"
        copies.mkdir()
        (Path(workspace) / "work").mkdir()
        for path in paths:  # Every copy is made before any submission runs.
            (copies / path.name).write_bytes(path.read_bytes())
        lessons = set()
        for path in paths:
            try:
                lesson = identify_lab(nbformat.read(copies / path.name, as_version=4),
                                      labs["current"])  # fmt: skip
            except Exception:
                continue
            if lesson:
                lessons.add(lesson)
        options = Options(args.cell_timeout, args.timeout, args.memory_gb, bwrap,
                          warm_cache(lessons), Path(workspace) / "work")  # fmt: skip
        limits = {}
        for lesson in sorted(lessons):
            limits[lesson] = measure_limits(lesson, labs["current"][lesson], options)
            print(f"Time limits for {lesson}: {limits[lesson].why}", flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [
                pool.submit(
                    grade_submission, copies / path.name, labs, limits, options, args.id_pattern
                )  # fmt: skip
                for path in paths
            ]
            grades = []
            for path, job in zip(paths, jobs, strict=True):
                grades.append(job.result())
                print(f"Graded {path.name} in {grades[-1].seconds:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    write_reports(grades, output_dir, isolation)
    print((output_dir / "scores.md").read_text())
    if args.review:
        print((output_dir / "review.md").read_text())
    print(f"Wrote {output_dir / 'grades.csv'}, scores.md, review.md and "
          f"{len(grades)} files in {output_dir / 'feedback'}")  # fmt: skip
    print(f"{len(grades)} submissions in {elapsed:.0f} s with -j {args.jobs}: "
          f"{elapsed / len(grades):.1f} s per submission")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
