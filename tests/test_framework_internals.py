"""The private names of TensorFlow, Keras and Grain live in one module, and hold here.

`utils/lab/framework_internals.py` is the one module of tools/ and utils/ that reads a
library's private attribute or imports its private module; each of its functions, and each
public route the grader takes instead of a private one, is checked on this venv's versions
(`tools/replicas/internals_check.py`; tests/test_replicas.py runs it in the replicas').
"""

import ast

from tests.conftest import REPO_ROOT
from tools.replicas import internals_check

COMPAT = REPO_ROOT / "utils" / "lab" / "framework_internals.py"
SCANNED = sorted(path for top in ("tools", "utils") for path in (REPO_ROOT / top).rglob("*.py"))
# Documented names that start with "_": namedtuple's methods, os._exit.
DOCUMENTED = {"_asdict", "_fields", "_make", "_replace", "_exit"}
PRIVATE_MODULES = ("tensorflow.python", "tensorflow.core", "keras.src")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(trees) -> set[str]:
    """Every name the course defines: functions, classes, variables, attributes, arguments."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return names


def _private_uses(tree, own: set[str]) -> list[tuple[int, str]]:
    """(line, what) of each private name of another package that `tree` reaches."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if node.attr not in own and node.attr not in DOCUMENTED:
                found.append((node.lineno, f".{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and _private(str(node.args[1].value))
            and node.args[1].value not in own
        ):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            modules += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for module in modules:
                outside = module.split(".")[0] not in ("utils", "tools", "__future__")
                if module.startswith(PRIVATE_MODULES) or (
                    outside and any(_private(part) for part in module.split("."))
                ):
                    found.append((node.lineno, f"import {module}"))
    return found


def _strings(tree) -> set[str]:
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_no_private_name_of_a_library_outside_the_compatibility_module():
    trees = {path: ast.parse(path.read_text()) for path in SCANNED}
    own = _defined_here(trees.values())
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {what}"
        for path, tree in trees.items()
        if path != COMPAT
        for line, what in _private_uses(tree, own)
    ]
    assert not found, "Move these into utils/lab/framework_internals.py:\n" + "\n".join(found)


def test_the_compatibility_modules_private_names_appear_nowhere_else():
    """Its names (`_batch_size`, `_MpContextIterDataset`, ...) are in no other file, as an
    attribute or a string: no copy of a private name escapes the scan above by its spelling."""
    compat = ast.parse(COMPAT.read_text())
    names = {what[1:] for _, what in _private_uses(compat, set())}
    names |= {s for s in _strings(compat) if s.isidentifier() and _private(s)}
    assert {"_py_funcs", "_batch_size", "_datasets", "_MpContextIterDataset"} <= names
    for path in SCANNED:
        if path == COMPAT:
            continue
        tree = ast.parse(path.read_text())
        attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not names & (attributes | _strings(tree)), (
            f"{path.relative_to(REPO_ROOT)}: {sorted(names & (attributes | _strings(tree)))}"
        )


def test_the_scan_finds_a_private_attribute_and_a_private_import():
    tree = ast.parse(
        "import tensorflow as tf\nfrom tensorflow.python.ops import script_ops\n"
        "from grain._src.python import dataset\nx = tf.data.Dataset.range(1)._variant_tensor\n"
        "y = own._mine\nz = point._replace(x=1)\nw = getattr(node, '_parents', ())\n"
    )
    assert _private_uses(tree, {"_mine"}) == [
        (2, "import tensorflow.python.ops"),
        (3, "import grain._src.python"),
        (4, "._variant_tensor"),
        (7, "getattr(..., '_parents')"),
    ]


def test_every_check_of_the_grader_on_tensorflow_keras_and_grain_passes_here():
    results = internals_check.run()
    assert [r["check"] for r in results] == list(internals_check.CHECKS)
    failed = [f"{r['check']}: {r['detail']}" for r in results if not r["ok"]]
    assert not failed, "\n".join(failed)
