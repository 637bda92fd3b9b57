"""The top-level names of the `utils` modules, their sizes, and what each one refers to.

Static references only (`module.name`, `from module import name`, bare names inside a
module): what `tools/utils_usage.py` follows from the lessons.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "utils"


@dataclasses.dataclass
class Module:
    """One parsed module: its top-level names and what each refers to."""

    name: str  # Dotted, e.g. "utils.timing".
    path: Path
    num_lines: int
    spans: dict[str, int]  # Top-level name -> its number of lines.
    refs: dict[str, set[tuple[str, str]]]  # Top-level name -> (module, name) it uses.
    module_refs: set[tuple[str, str]]  # Used by module-level statements (always run).
    aliases: dict[str, tuple[str, str]]  # Name imported at top level -> (module, name).
    methods: dict[str, tuple[int, set[str]]]  # "Class.method" -> (lines, attributes it uses).
    attributes: dict[str, set[str]]  # Top-level name -> attribute names its code uses.


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """The dotted name of a `.py` file under `root`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(tree: ast.AST, own: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Module aliases (local name -> module) and imported names (local -> (module, name))."""
    modules: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    package = own if own.count(".") == 0 or Path(own).name else own
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != PACKAGE:
                    continue
                if alias.asname:
                    modules[alias.asname] = alias.name
                else:
                    modules[PACKAGE] = PACKAGE
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # Relative import inside the package.
                parent = own.rsplit(".", node.level)[0] if "." in own else package
                base = f"{parent}.{node.module}" if node.module else parent
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                # `from utils import timing` names a module; `from utils.x import f` a name.
                names[local] = (base, alias.name)
    return modules, names


def references(
    node: ast.AST,
    modules: dict[str, str],
    names: dict[str, tuple[str, str]],
    own: str,
    own_names: set[str],
    submodules: set[str],
) -> set[tuple[str, str]]:
    """The (module, name) pairs `node` refers to."""
    found: set[tuple[str, str]] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute):
            chain = []
            inner: ast.AST = child
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if not isinstance(inner, ast.Name):
                continue
            chain.append(inner.id)
            chain.reverse()  # e.g. ["timing", "measure_throughput"] or ["utils", "timing", "x"].
            head = chain[0]
            if head in modules:
                dotted = modules[head]
            elif head in names and f"{names[head][0]}.{names[head][1]}" in submodules:
                dotted = f"{names[head][0]}.{names[head][1]}"
            else:
                continue
            for part in chain[1:]:
                if f"{dotted}.{part}" in submodules:
                    dotted = f"{dotted}.{part}"
                    continue
                found.add((dotted, part))
                break
        elif isinstance(child, ast.Name):
            if child.id in names:
                module, name = names[child.id]
                if f"{module}.{name}" not in submodules:
                    found.add((module, name))
            elif child.id in own_names:
                found.add((own, child.id))
    return found


def span(node: ast.stmt) -> int:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - start + 1


def parse_module(path: Path, submodules: set[str], root: Path = REPO_ROOT) -> Module:
    """Parse one module of the package."""
    text = path.read_text()
    tree = ast.parse(text)
    own = module_name(path, root)
    modules, names = imports(tree, own)
    spans: dict[str, int] = {}
    bodies: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        targets: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            targets = [node.name]
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        for target in targets:
            spans[target] = spans.get(target, 0) + span(node)
            bodies.setdefault(target, []).append(node)
    own_names = set(spans)
    refs = {
        name: set().union(
            *(references(n, modules, names, own, own_names, submodules) for n in nodes)
        )
        - {(own, name)}
        for name, nodes in bodies.items()
    }
    module_refs: set[tuple[str, str]] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # Decorators, defaults and annotations run at import.
            for part in [*node.decorator_list, *getattr(node, "bases", [])]:
                module_refs |= references(part, modules, names, own, set(), submodules)
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            continue  # A constant is counted when something uses it.
        module_refs |= references(node, modules, names, own, set(), submodules)
    aliases = {
        local: target
        for local, target in names.items()
        if f"{target[0]}.{target[1]}" not in submodules
        and any(
            isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == local for a in n.names)
            for n in tree.body
        )
    }
    methods = {
        f"{node.name}.{item.name}": (span(item), attribute_names(item))
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and not (item.name.startswith("__") and item.name.endswith("__"))
    }
    attributes = {
        name: set().union(
            *(attribute_names(n) for n in nodes if not isinstance(n, ast.ClassDef)),
            *(
                attribute_names(part)
                for n in nodes
                if isinstance(n, ast.ClassDef)
                for part in n.body
                if not isinstance(part, ast.FunctionDef | ast.AsyncFunctionDef)
                or part.name.startswith("__")
            ),
        )
        for name, nodes in bodies.items()
    }
    return Module(
        own, path, len(text.splitlines()), spans, refs, module_refs, aliases, methods, attributes
    )


def attribute_names(node: ast.AST) -> set[str]:
    """Every `x.name` in `node`, and strings given to getattr."""
    found = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    found |= {
        n.args[1].value
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id in ("getattr", "hasattr")
        and len(n.args) > 1
        and isinstance(n.args[1], ast.Constant)
    }
    return found


def package_modules(root: Path = REPO_ROOT) -> dict[str, Module]:
    """Every module of `utils/`, by dotted name."""
    paths = sorted((root / PACKAGE).rglob("*.py"))
    submodules = {module_name(p, root) for p in paths}
    return {module_name(p, root): parse_module(p, submodules, root) for p in paths}


def file_refs(path: Path, submodules: set[str], root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text())
    modules, names = imports(tree, module_name(path, root))
    found = references(tree, modules, names, "", set(), submodules)
    # `from utils.x import f` counts even if f is only passed along.
    found |= {t for t in names.values() if f"{t[0]}.{t[1]}" not in submodules}
    return found
