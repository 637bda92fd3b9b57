"""README's "3.10 to 3.13 work" holds on the CPython releases with the `ast.parse` race.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 fail with "SystemError: AST constructor recursion
depth mismatch" when two threads parse at once (python/cpython#106905). The grader is the
course's one part that parses in threads (one per submission, `tools/grade.py -j`): every
parse of its steps goes through `tools.grading.model.parse`, one thread at a time.
"""

import ast
import threading

from tests.conftest import REPO_ROOT
from tools.grading import model

GRADER_MODULES = sorted(
    [*(REPO_ROOT / "tools" / "grading").rglob("*.py"), *(REPO_ROOT / "tools").glob("grade*.py")]
)


def _parse_calls(path):
    """Yields (function name, line) of each `ast.parse(...)` call in a module."""
    tree = ast.parse(path.read_text())
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "ast"
                ):
                    yield function.name, node.lineno


def test_the_readme_names_the_versions_that_work():
    readme = (REPO_ROOT / "README.md").read_text()
    assert "You need Python 3.11 (3.10 to 3.13 work)" in readme


def test_the_grader_parses_only_through_model_parse():
    calls = {
        f"{path.relative_to(REPO_ROOT)}:{line} ({name})"
        for path in GRADER_MODULES
        for name, line in _parse_calls(path)
    }
    assert len(GRADER_MODULES) > 10
    assert [call for call in calls if not call.startswith("tools/grading/model.py")] == []
    assert [call.split(" ")[-1] for call in calls] == ["(parse)"]


def test_model_parse_waits_for_another_thread_s_parse():
    parsed = threading.Event()
    with model.PARSE_LOCK:  # Another thread is parsing.
        worker = threading.Thread(target=lambda: (model.parse("x = 1"), parsed.set()))
        worker.start()
        assert not parsed.wait(0.3)
    assert parsed.wait(10)
    worker.join()
