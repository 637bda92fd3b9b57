"""What ruff cannot say of `utils`' contracts, and that what it says is configured to bite.

Ruff says most (pyproject.toml's `[tool.ruff.lint]`, run by tests/test_lint.py): every
parameter and return typed (ANN), a docstring on every public module, class and function
(D1), `Args:` naming each parameter (D417), `Returns:`/`Yields:` where a multi-line docstring
returns or yields, `Raises:` naming what the body raises (DOC). Read here with `ast` what its
rules leave out, for each public function, class and method of a public class:

- a docstring: pydocstyle counts the names of a `_` module (`utils/checks/_base.py`) private;
- a type at least: ruff spares a wholly untyped function (`ignore-fully-untyped`, for the
  functions generated from a lesson's cells: the learner's code as the lesson writes it);
- an `Args:` section when it takes parameters: D417 checks the names only in one that exists;
- a `Returns:` (or `Yields:`) section when it returns something: DOC201 takes a docstring of
  one line, or one whose summary starts with "Returns", as enough;
- a `Raises:` section when it raises: DOC501 skips a docstring of one line; and in a check
  (`check_*`), naming `CheckFailed` in a lesson's check (`utils.checks`): a check raises
  through a helper, which DOC501 does not see.

A generated function (a `tools.building.saved.BLOCK_LINE` above it) is exempt, and a
property needs a docstring only. And the checks' layout: one module per lesson, named
after it (what each may import: pyproject.toml's import-linter contracts).
"""

import ast
import json
import pkgutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.test_lint import RUFF
from tools.building import saved as build_saved

UTILS = Path(__file__).resolve().parents[1] / "utils"


def _modules(folder: Path, prefix: str) -> list[tuple[str, Path]]:
    """Every module of the package in `folder`, by dotted name, found without importing."""
    found = [(prefix, folder / "__init__.py")]
    for info in pkgutil.iter_modules([str(folder)]):
        name = f"{prefix}.{info.name}"
        if info.ispkg:
            found += _modules(folder / info.name, name)
        else:
            found.append((name, folder / f"{info.name}.py"))
    return found


MODULES = _modules(UTILS, "utils")


def _public(tree: ast.Module):
    """(qualified name, node) of each public function, class and method of a public class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            yield node.name, node
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                    yield f"{node.name}.{member.name}", member


def _section(docstring: str, title: str) -> str | None:
    """The text of a Google-style section (`Args:`), up to the next section; None if absent."""
    lines = docstring.splitlines()
    if f"{title}:" not in (line.strip() for line in lines):
        return None
    start = [line.strip() for line in lines].index(f"{title}:") + 1
    body = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break
        body.append(line)
    return "\n".join(body)


def _problems(node: ast.FunctionDef | ast.ClassDef, module: str) -> list[str]:
    """What ruff cannot say of one public function or class of `module` (the module docstring
    says why)."""
    docstring = ast.get_docstring(node) or ""
    if not docstring:
        return ["no docstring"]
    if isinstance(node, ast.ClassDef):
        return []
    if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
        return []
    problems = []
    arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
    arguments = [a for a in arguments if a.arg not in ("self", "cls")]
    if node.returns is None and all(a.annotation is None for a in arguments):
        problems.append("no types")
    if arguments and _section(docstring, "Args") is None:
        problems.append("no Args: section")
    returns_nothing = isinstance(node.returns, ast.Constant) and node.returns.value is None
    if node.returns is not None and not returns_nothing:
        if _section(docstring, "Returns") is None and _section(docstring, "Yields") is None:
            problems.append("no Returns: section")
    raises = _section(docstring, "Raises")
    raising = "\n" not in docstring and any(isinstance(n, ast.Raise) for n in ast.walk(node))
    if raises is None and (raising or node.name.startswith("check_")):
        problems.append("no Raises: section")
    elif node.name.startswith("check_") and module.startswith("utils.checks."):
        if "CheckFailed" not in raises:
            problems.append("Raises: does not name CheckFailed")
    return problems


def test_the_package_is_found():
    names = [name for name, _ in MODULES]
    assert "utils.checks.tf_data_basics" in names and "utils.timing" in names
    assert {
        "utils.records",
        "utils.shard_files",
        "utils.lab.conversion",
        "utils.storage",
    } <= set(names)


@pytest.mark.parametrize("name, path", MODULES, ids=[name for name, _ in MODULES])
def test_every_public_function_has_the_sections_ruff_cannot_ask_for(name, path):
    lines = path.read_text().splitlines()
    tree = ast.parse(path.read_text(), filename=str(path))
    assert ast.get_docstring(tree), f"{path}: no module docstring"
    found = [
        f"{name}.{qualified} (line {node.lineno}): {'; '.join(problems)}"
        for qualified, node in _public(tree)
        if not build_saved.BLOCK_LINE.match(lines[node.lineno - 2])
        and (problems := _problems(node, name))
    ]
    assert found == []


LESSONS = sorted(p.stem[3:] for p in (UTILS.parent / "notebooks").glob("[0-9][0-9]_*.py"))
CHECK_MODULES = sorted(
    info.name for info in pkgutil.iter_modules([str(UTILS / "checks")]) if info.name[0] != "_"
)


def test_each_lessons_checks_are_in_a_module_named_after_it():
    assert LESSONS == [
        "accelerator_waiting",
        "convert_with_beam",
        "grain_arrayrecord",
        "read_tfrecords",
        "scale_out_reading",
        "tf_data_basics",
        "train_keras",
        "where_the_time_goes",
        "write_tfrecords",
    ]
    # A lesson's checks: one module, named after it, sized by its job.
    assert CHECK_MODULES == LESSONS


def _ruff(source: str, filename: str) -> list[tuple[int, str]]:
    """(line, rule) of each finding of the checkout's ruff configuration on `source`, read
    as the file `filename`."""
    command = [RUFF, "check", "--output-format", "json", "--stdin-filename", filename, "-"]
    result = subprocess.run(command, input=source, cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode in (0, 1), result.stderr  # 1: findings; 2: ruff could not run.
    return sorted((f["location"]["row"], f["code"]) for f in json.loads(result.stdout))


# A public module (pydocstyle skips a `_` one) whose functions each break a contract.
BROKEN = '''"""Breaks a contract in each function."""


def untyped(count, *, scale: int = 1) -> int:
    """Scales.

    Args:
        count: how many.
        scale: by how much.
    """
    return count * scale


def loud(count: int, reason: str) -> None:
    """Fails.

    Args:
        count: how many.
    """
    raise ValueError(count)


def bare(count: int) -> None:
    print(count)
'''


@pytest.mark.parametrize("folder", ["utils", "tools", "tests", "notebooks"])
def test_ruff_holds_utils_and_nothing_else_to_the_contracts(folder):
    found = _ruff(BROKEN, f"{folder}/probe.py")
    if folder == "utils":
        # An untyped parameter, no Returns:, a parameter missing from Args:, no Raises:, no
        # docstring.
        assert found == [(4, "ANN001"), (5, "DOC201"), (14, "D417"), (15, "DOC501"), (23, "D103")]
    else:
        assert found == []


# What ruff's configuration lets pass in `utils` (in a `_` module, as `utils/checks/_base.py`).
RUFF_LETS_PASS = '''"""What only the hand rules catch."""


def undocumented(count: int) -> None:
    print(count)


def untyped(count):
    """Says."""
    print(count)


def counted() -> int:
    """The count."""
    return 1


def loud() -> None:
    """Fails."""
    raise ValueError("never")


def summary(count: int) -> str:
    """Returns a line.

    Args:
        count: how many.
    """
    return str(count)


def check_count(count: int) -> None:
    """Checks.

    Args:
        count: how many.
    """
    print(count)


def check_range(count: int) -> None:
    """Checks.

    Args:
        count: how many.

    Raises:
        ValueError: never.
    """
    print(count)


def check_quiet(count: int) -> int:
    """Checks.

    Args:
        count: how many.

    Returns:
        It.

    Raises:
        CheckFailed: never.
    """
    return count
'''


def test_the_hand_rules_catch_what_ruff_lets_pass():
    assert _ruff(RUFF_LETS_PASS, "utils/checks/_probe.py") == []
    tree = ast.parse(RUFF_LETS_PASS)
    found = {name: _problems(node, "utils.checks._probe") for name, node in _public(tree)}
    assert found == {
        "undocumented": ["no docstring"],
        "untyped": ["no types", "no Args: section"],
        "counted": ["no Returns: section"],
        "loud": ["no Raises: section"],
        "summary": ["no Returns: section"],
        "check_count": ["no Raises: section"],
        "check_range": ["Raises: does not name CheckFailed"],
        "check_quiet": [],
    }
