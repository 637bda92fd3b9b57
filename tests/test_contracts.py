"""Every public function and class of `utils` states its contract: type hints and a docstring.

Read from the sources with `ast` (nothing is imported): a public function (no leading `_`,
at module level or a method of a public class) has annotated parameters and return type,
and a Google-style docstring with an `Args:` section naming every parameter when it takes
any, a `Returns:` (or `Yields:`) section when it returns something, and a `Raises:` section
when its own body raises. A property needs a docstring only; a check (`check_*`) also says
what it raises (`CheckFailed`), which it does through a helper. And the checks' layout:
one module per lesson, named after it (what each may import: pyproject.toml's contracts).
"""

import ast
import pkgutil
from pathlib import Path

import pytest

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


def _problems(qualified: str, node: ast.FunctionDef | ast.ClassDef) -> list[str]:
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
    unannotated = [a.arg for a in arguments if a.annotation is None]
    if unannotated:
        problems.append(f"parameters without a type: {unannotated}")
    if node.returns is None:
        problems.append("no return type")
    args = _section(docstring, "Args")
    if arguments and args is None:
        problems.append("no Args: section")
    elif arguments:
        missing = [a.arg for a in arguments if f"{a.arg}:" not in args.replace("*", "")]
        if missing:
            problems.append(f"Args: does not name {missing}")
    returns_nothing = isinstance(node.returns, ast.Constant) and node.returns.value is None
    if node.returns is not None and not returns_nothing:
        if _section(docstring, "Returns") is None and _section(docstring, "Yields") is None:
            problems.append("no Returns: section")
    raises = any(isinstance(n, ast.Raise) for n in ast.walk(node))
    if (raises or node.name.startswith("check_")) and _section(docstring, "Raises") is None:
        problems.append("no Raises: section")
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
def test_every_public_function_has_types_and_a_google_docstring(name, path):
    """A function generated from a lesson's solution cell (`tools/building/saved.py`) is the
    lesson's code as the learner writes it: its contract is the TODO's text."""
    lines = path.read_text().splitlines()
    tree = ast.parse(path.read_text(), filename=str(path))
    assert ast.get_docstring(tree), f"{path}: no module docstring"
    found = [
        f"{name}.{qualified} (line {node.lineno}): {'; '.join(problems)}"
        for qualified, node in _public(tree)
        if not build_saved.BLOCK_LINE.match(lines[node.lineno - 2])
        and (problems := _problems(qualified, node))
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


def test_the_contract_rules_catch_what_they_say():
    source = '''
def loud(x, *, y: int = 1):
    """Says."""
    raise ValueError(x)


def quiet(x: int) -> int:
    """Counts.

    Args:
        x: a number.

    Returns:
        It.
    """
    return x
'''
    (loud, _), (quiet, _) = [(node, None) for _, node in _public(ast.parse(source))]
    assert _problems("loud", loud) == [
        "parameters without a type: ['x']",
        "no return type",
        "no Args: section",
        "no Raises: section",
    ]
    assert _problems("quiet", quiet) == []
