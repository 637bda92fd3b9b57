"""The flags found from a learner's code's syntax: assignments to modules, lab objects,
parameters; and the aliases of `os` and `sys` that the text patterns must see through.

Takes code and the names the lab defines; gives flag names (see `flags.FLAGS`).
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

from tools.grading.model import REPO_ROOT, parse, without_magics


def syntax_flags(
    code: str, parameters: set[str], lab_names: set[str], modules: set[str], objects: set[str]
) -> set[str]:
    """Flags found from the code's syntax: assignments to modules, lab objects, parameters.

    `objects` are the lab's course objects (`simulated_storage`, `source`): binding one
    of those names again is flagged too.
    """
    try:
        tree = parse(code)
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


def bound_names(code: str) -> set[str]:
    """The plain names `code` binds by assignment (not by import): the learner's own."""
    try:
        tree = parse(without_magics(code))
    except SyntaxError:
        return set()
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }


def os_sys_aliases(code: str) -> dict[str, str]:
    """Returns {alias: "os" or "sys"}: `import sys as s`, `import os as o, sys as s`, `s = sys`."""
    aliases = {}
    try:
        tree = parse(without_magics(code))
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


def course_modules(package: Path = REPO_ROOT / "utils") -> frozenset[str]:
    """The course package's name and the short name of each of its modules, at any depth.

    Found from the files (`pkgutil`, nothing imported), so a new or renamed module of
    `utils/` is covered without a list to keep.
    """
    names, folders = {package.name}, [package]
    while folders:
        folder = folders.pop()
        for module in pkgutil.iter_modules([str(folder)]):
            names.add(module.name)
            if module.ispkg:
                folders.append(folder / module.name)
    return frozenset(names)


COURSE_MODULES = course_modules()
