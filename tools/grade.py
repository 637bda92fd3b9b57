"""Grades a folder of submitted lab notebooks: a score per TODO, from the real check cells.

1. Copy every submission into the grader's own folder before running any, and warm the
   data cache (outside any sandbox) with the small datasets the labs will read.
2. For each submission: identify its lab (notebook metadata, else the title) and rebuild
   it on the current generated lab, as nbgrader does: every protected cell (set-up,
   parameters, text, checks) comes from the lab, the learner's TODO cells and every cell
   the learner added are kept in place. A TODO cell is found by its metadata, else by its
   `# TODO n:` line; of two copies, the last is graded. Before each check cell a guard
   restores the course's modules from their (read-only) files.
3. Run it under nbval (`--nbval-lax`, small data parameters, a per-cell timeout) in a
   bubblewrap sandbox of its own (`tools/sandbox.py`): read-only file system, private work
   folder, `/tmp` and HOME, no network, own PID namespace, memory limit, overall timeout.
4. Read the JUnit XML from the sandbox's work folder after it ended; score each TODO from
   its check cell: passed, or failed with the innermost line of its error. Flag code that
   touches the course's modules, the import system, IPython hooks or paths outside the
   work folder, for the instructor to read (flagged submissions are still graded).

Writes `scores.csv`, `scores.md` and one JUnit XML per submission to the output folder,
which must not be or contain the submissions folder. The exit status says whether grading
itself worked (0), not whether students passed.

Usage:
    python -m tools.grade submissions/ --output-dir build/grades [-j N] [--sandbox auto]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import csv
import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat

from tools import build_notebooks as build
from tools import sandbox
from tools.lesson_parameters import SMALL_PARAMETERS
from utils import data, progress

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY = build.METADATA_KEY
GRADER_FILES = ("scores.csv", "scores.md", "*.junit.xml")
# Runs before every check cell: restore every course module (`utils.*`) from its file,
# submodules before packages, twice (so `from ... import` names are fresh too), with each
# module's own loader (not `importlib.reload`, which
# a TODO cell can replace); a module object that is not the course's file is imported
# again. Then `checks` is the real package. What a TODO cell can still do in its kernel
# is listed in the README ("Grading"); such code is flagged.
GUARD = """\
import sys as _grader_sys
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
_TITLE = re.compile(r"^#\s*(?:Lab|Lesson)\s+(\d+)\b", re.MULTILINE)
# What a learner's code has no reason to touch: each pattern, and the flag it raises.
FLAGS = {
    "course modules": r"\b(?:utils|checks|sources|storage|data|display|timing|pipeline|records"
    r"|shard_files|conversion|errors|validation|training|models|strategy)\.[\w.]+\s*=[^=]"
    r"|\bsetattr\(|\bdelattr\(",
    "sys.modules": r"\bsys\.modules\b",
    "importlib": r"\bimportlib\b|\b__import__\b|\bbuiltins\b|\b__builtins__\b",
    "IPython hooks": r"\bget_ipython\b|\bIPython\b|^\s*[%!]",
    "paths outside the work folder": r"[\"'](?:/\w|~/|\.\./)|\bexpanduser\b|\bchdir\b",
    "processes": r"\bsubprocess\b|\bos\.(?:system|fork|kill|exec\w*|spawn\w*|popen)\b"
    r"|\bmultiprocessing\b|\bctypes\b|\bpty\b|\bposix_spawn|\bcreate_subprocess",
}


@dataclasses.dataclass
class Grade:
    """The grading of one submission."""

    submission: str
    lab: str = ""
    status: str = "graded"
    todos: dict[int, bool] = dataclasses.field(default_factory=dict)
    messages: dict[int, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    flags: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.todos.values())


@dataclasses.dataclass
class Options:
    """How each submission runs: timeouts, memory limit, sandbox (a bwrap path or None)."""

    cell_timeout: int = 300
    timeout: int = 1200
    memory_gb: float = 4.0
    bwrap: str | None = None
    cache: Path | None = None
    hide: tuple[Path, ...] = ()  # Folders the sandbox covers: submissions, output, HOME.


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


def _todo_of(cell: nbformat.NotebookNode) -> int | None:
    """The TODO number of a learner's code cell: its metadata, else its `# TODO n:` line."""
    if cell.cell_type != "code":
        return None
    todo = cell.get("metadata", {}).get(KEY, {}).get("todo")
    if todo is not None:
        return todo
    match = next(filter(None, map(build.TODO_LINE.match, cell.source.splitlines())), None)
    return int(match.group(1)) if match else None


def restore_protected_cells(submission: nbformat.NotebookNode, lab: nbformat.NotebookNode):
    """Returns the lab with the learner's cells in it, and notes for the report.

    Every protected cell (found in the submission by cell id or by identical source, or
    missing) is the lab's own; each TODO cell is the learner's (the last copy when there are
    several); every other learner cell is kept after the protected or TODO cell it followed.
    Each check cell starts with the guard.
    """
    lab_ids = {cell.id: index for index, cell in enumerate(lab.cells)}
    lab_sources = {cell.source: index for index, cell in enumerate(lab.cells)}
    lab_todos = {
        cell.metadata[KEY]["todo"]: index
        for index, cell in enumerate(lab.cells)
        if "todo" in cell.metadata.get(KEY, {})
    }
    todo_cells: dict[int, list[nbformat.NotebookNode]] = {}
    added: dict[int, list[nbformat.NotebookNode]] = {}  # Lab position -> cells after it.
    anchor = -1
    todo_by_id = {lab.cells[index].id: todo for todo, index in lab_todos.items()}
    for cell in submission.cells:
        todo = _todo_of(cell)
        if todo is None and cell.cell_type == "code":
            todo = todo_by_id.get(cell.get("id"))
        if todo in lab_todos:
            todo_cells.setdefault(todo, []).append(cell)
            anchor = lab_todos[todo]
            continue
        index = lab_ids.get(cell.get("id"), lab_sources.get(cell.source))
        if index is not None and index not in lab_todos.values():
            anchor = index
        else:
            added.setdefault(anchor, []).append(copy.deepcopy(cell))
    restored, notes = copy.deepcopy(lab), []
    restored.cells = [copy.deepcopy(cell) for cell in added.get(-1, [])]
    guard = GUARD % {"utils": str(REPO_ROOT / "utils")}
    for index, cell in enumerate(lab.cells):
        cell = copy.deepcopy(cell)
        marks = cell.metadata.get(KEY, {})
        if "todo" in marks:
            copies = todo_cells.get(marks["todo"], [])
            if not copies:
                notes.append(f"TODO {marks['todo']}: no cell found in the submission")
            else:
                cell.source = copies[-1].source
            if len(copies) > 1:
                notes.append(
                    f"TODO {marks['todo']}: {len(copies)} cells found; the last one was graded"
                )
        elif "check" in marks:
            cell.source = guard + cell.source
        restored.cells.append(cell)
        restored.cells += added.get(index, [])
    for cell in restored.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return restored, notes


def learner_code(submission: nbformat.NotebookNode, lab: nbformat.NotebookNode) -> str:
    """Returns the code the learner wrote: the code cells that are not the lab's own."""
    restored, _ = restore_protected_cells(submission, lab)
    protected = {cell.source for cell in lab.cells if "todo" not in cell.metadata.get(KEY, {})}
    guard = GUARD % {"utils": str(REPO_ROOT / "utils")}
    return "\n".join(
        cell.source
        for cell in restored.cells
        if cell.cell_type == "code"
        and cell.source not in protected
        and not cell.source.startswith(guard)
    )


def find_flags(code: str) -> list[str]:
    """Returns the names of `FLAGS` whose pattern occurs in `code`."""
    return [name for name, pattern in FLAGS.items() if re.search(pattern, code, re.MULTILINE)]


def inject_parameters(notebook: nbformat.NotebookNode, parameters: dict):
    """Returns the notebook with a cell setting `parameters` after its `parameters` cell."""
    notebook = copy.deepcopy(notebook)
    index = next(
        i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])
    )
    source = "# Parameters injected by the grader\n" + "\n".join(
        f"{name} = {value!r}" for name, value in parameters.items()
    )
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    cell.id = "injected-parameters"
    notebook.cells.insert(index + 1, cell)
    return notebook


def _nbval_command(notebook: Path, junit: Path, cell_timeout: int) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
        "--nbval-current-env", "--nbval-cell-timeout", str(cell_timeout),
        f"--junitxml={junit}", "-o", "junit_family=xunit1", str(notebook),
    ]  # fmt: skip


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


def run_nbval(notebook: Path, junit: Path, options: Options) -> str | None:
    """Runs nbval over `notebook` in its folder, sandboxed; returns None, or why it stopped."""
    work = notebook.parent
    env = prepare_work(work, options.cache)
    command = sandbox.with_memory_limit(
        _nbval_command(notebook, junit, options.cell_timeout), int(options.memory_gb * 2**30)
    )
    if options.bwrap:
        read_only = [REPO_ROOT, Path(sys.prefix), Path(sys.base_prefix)]
        if options.cache is not None:
            read_only.append(options.cache)
        command = sandbox.bwrap_command(
            options.bwrap, command, work=work, env=env, read_only=read_only, hide=options.hide
        )
        env = {}
    process = subprocess.Popen(
        command,
        cwd=work,
        env=env or None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        process.wait(timeout=options.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return f"timed out after {options.timeout} s"
    finally:
        if not options.bwrap:  # Without a PID namespace, end what the group left running.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return None


def read_junit(junit: Path, limit: int = 20_000_000) -> str | None:
    """Returns the text of a JUnit file the sandbox wrote: a plain file, not a link."""
    try:
        info = junit.lstat()
    except FileNotFoundError:
        return None
    if not junit.is_file() or junit.is_symlink() or info.st_size > limit:
        return None
    return junit.read_text(errors="replace")


def parse_junit(text: str | None) -> dict[int, tuple[bool, str]]:
    """Returns {code cell index: (passed, why not)} from nbval's JUnit XML; skipped fails."""
    if not text:
        return {}
    results = {}
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return {}
    for case in root.iter("testcase"):
        match = re.search(r"Cell (\d+)", case.get("name", ""))
        if not match:
            continue
        # nbval skips the cells after one that timed out or killed the kernel.
        outcome = next((case.find(tag) for tag in ("failure", "error", "skipped")
                        if case.find(tag) is not None), None)  # fmt: skip
        if outcome is None:
            results[int(match.group(1))] = (True, "")
        elif outcome.tag == "skipped":
            results[int(match.group(1))] = (False, f"not run: {outcome.get('message', '')}")
        else:
            results[int(match.group(1))] = (False, _innermost_error_line(outcome))
    return results


def _innermost_error_line(failure: ElementTree.Element) -> str:
    """The check's own message, else the innermost `SomeError: ...` line, else the first."""
    text = (failure.text or "") + "\n" + (failure.get("message") or "")
    text = re.sub(r"(\x1b|#x1B)\[[0-9;]*m", "", text)  # Colours, as nbval writes them.
    match = re.search(r"CheckFailed: (.+)", text)
    if match:
        return match.group(1).strip()[:300]
    errors = [
        line
        for line in re.findall(r"^\W*(\w+(?:Error|Exception|Interrupt): .+)$", text, re.M)
        if not line.rstrip().endswith("in user code:")
    ]
    if errors:
        return errors[-1].strip()[:300]
    match = re.search(r"(Timeout.+|.*[Tt]imed out.+)", text)
    if match:
        return match.group(1).strip()[:300]
    return (failure.get("message") or "failed").strip().splitlines()[0][:300]


def grade_submission(
    path: Path, labs: dict[str, nbformat.NotebookNode], output_dir: Path, options: Options
) -> Grade:
    """Grades one submission (a copy the grader owns); never raises for a bad submission."""
    started = time.perf_counter()
    grade = Grade(submission=path.name)
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as error:  # Not JSON, not a notebook: a bad submission, not a crash.
        grade.status = f"unreadable: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
        return grade
    lesson = identify_lab(submission, labs)
    if lesson is None:
        grade.status = "unknown lab: no course metadata and no 'Lab N' or 'Lesson N' title"
        return grade
    grade.lab = lesson
    lab = labs[lesson]
    todos = [c.metadata[KEY]["todo"] for c in lab.cells if "todo" in c.metadata.get(KEY, {})]
    restored, grade.notes = restore_protected_cells(submission, lab)
    grade.flags = find_flags(learner_code(submission, lab))
    restored = inject_parameters(restored, SMALL_PARAMETERS[lesson])
    code_cells = [cell for cell in restored.cells if cell.cell_type == "code"]
    check_cells = {  # nbval numbers code cells from 0: "Cell 6" is the 7th code cell.
        index: cell.metadata[KEY]["check"]
        for index, cell in enumerate(code_cells)
        if "check" in cell.metadata.get(KEY, {})
    }
    work = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=path.parent.parent / "work"))
    notebook_path = work / f"{lesson}.ipynb"
    nbformat.write(restored, notebook_path)
    junit = work / "junit.xml"
    problem = run_nbval(notebook_path, junit, options)
    text = read_junit(junit)
    if text is not None:
        (output_dir / f"{path.stem}.junit.xml").write_text(text)
    if problem:
        grade.status = problem
    results = parse_junit(text)
    for index, todo in check_cells.items():
        passed, message = results.get(index, (False, problem or "not run"))
        grade.todos[todo] = passed
        if not passed:
            grade.messages[todo] = message or "failed"
    for todo in todos:
        grade.todos.setdefault(todo, False)
    grade.seconds = time.perf_counter() - started
    return grade


def write_reports(grades: list[Grade], output_dir: Path, isolation: str) -> None:
    """Writes scores.csv and scores.md: one row per submission, one column per TODO."""
    max_todo = max([max(g.todos, default=0) for g in grades] + [0])
    columns = [f"TODO {n}" for n in range(1, max_todo + 1)]
    with open(output_dir / "scores.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(
            ["submission", "lab", "status", *columns, "total", "flags", "first errors", "sandbox"]
        )
        for grade in grades:
            marks = [_mark(grade, n) for n in range(1, max_todo + 1)]
            errors = "; ".join(f"TODO {n}: {m}" for n, m in sorted(grade.messages.items()))
            flags = "; ".join(grade.flags)
            writer.writerow(
                [grade.submission, grade.lab, grade.status, *marks, grade.total, flags, errors,
                 isolation]
            )  # fmt: skip
    lines = [
        f"Sandbox: {isolation}",
        "",
        "| submission | lab | status | " + " | ".join(columns) + " | total | flags |",
        "|" + " --- |" * (len(columns) + 5),
    ]
    for grade in grades:
        marks = " | ".join(_mark(grade, n) for n in range(1, max_todo + 1))
        total = f"{grade.total}/{len(grade.todos)}" if grade.todos else "0"
        flags = ", ".join(grade.flags)
        lines.append(
            f"| {grade.submission} | {grade.lab} | {grade.status} | {marks} | {total} | {flags} |"
        )
    lines.append("")
    for grade in grades:
        for todo, message in sorted(grade.messages.items()):
            lines.append(f"- {grade.submission}, TODO {todo}: {message}")
        for note in grade.notes:
            lines.append(f"- {grade.submission}: {note}")
        if grade.flags:
            lines.append(
                f"- {grade.submission}: flagged for review (its code touches "
                f"{', '.join(grade.flags)}); still graded"
            )
    (output_dir / "scores.md").write_text("\n".join(lines) + "\n")


def _mark(grade: Grade, todo: int) -> str:
    if todo not in grade.todos:
        return ""
    return "pass" if grade.todos[todo] else "fail"


def load_labs(root: Path = REPO_ROOT) -> dict[str, nbformat.NotebookNode]:
    """Returns the current generated labs, by lesson name."""
    return {
        path.stem: nbformat.read(path, as_version=4) for path in sorted(root.glob("labs/*.ipynb"))
    }


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
            "bwrap (read-only file system, hidden submissions, output folder and HOME, "
            "private work folder and /tmp, no network, own PID namespace, memory limit)"
        )
    if mode == "none":
        return None, "NOT ISOLATED (--sandbox none)"
    return None, "NOT ISOLATED (no working bwrap here)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "grades")
    parser.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per submission")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="submissions graded at once (default: the core count)")  # fmt: skip
    parser.add_argument("--memory-gb", type=float, default=4.0,
                        help="memory limit per process of a submission (RLIMIT_DATA)")  # fmt: skip
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default="auto",
                        help="auto: bwrap where it works, else none (loudly)")  # fmt: skip
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
        print("error: --sandbox bwrap, but bwrap is missing or cannot make namespaces here "
              "(Debian/Ubuntu: sudo apt-get install bubblewrap)", file=sys.stderr)  # fmt: skip
        return 2
    if bwrap is None:
        print(f"WARNING: {isolation}: submissions can read and write your files, the course "
              "and each other's; grade only work you trust.", file=sys.stderr)  # fmt: skip
    print(f"Sandbox: {isolation}", flush=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    for pattern in GRADER_FILES:  # Only what an earlier grading wrote; nothing else.
        for old in output_dir.glob(pattern):
            old.unlink()
    labs = load_labs()
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
                lesson = identify_lab(nbformat.read(copies / path.name, as_version=4), labs)
            except Exception:
                continue
            if lesson:
                lessons.add(lesson)
        hide = (args.submissions, output_dir, Path.home())
        options = Options(args.cell_timeout, args.timeout, args.memory_gb, bwrap,
                          warm_cache(lessons), hide)  # fmt: skip
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [
                pool.submit(grade_submission, copies / path.name, labs, output_dir, options)
                for path in paths
            ]
            grades = []
            for path, job in zip(paths, jobs, strict=True):
                grades.append(job.result())
                print(f"Graded {path.name} in {grades[-1].seconds:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    write_reports(grades, output_dir, isolation)
    print((output_dir / "scores.md").read_text())
    print(f"Wrote {output_dir / 'scores.csv'} and {output_dir / 'scores.md'}")
    print(f"{len(grades)} submissions in {elapsed:.0f} s with -j {args.jobs}: "
          f"{elapsed / len(grades):.1f} s per submission")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
