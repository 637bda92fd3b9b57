"""Who uses each name of `utils/`: the lessons (directly or through what they call), tools, tests.

Every `.py` of `utils/` is embedded in every lab's set-up cell (`tools/setup_cell.py`), so
what stays in `utils/` is shipped to every learner. This measures what a learner needs:
it parses each module, lists its top-level names (functions, classes, constants) with
their line counts, and follows references from the lessons (`notebooks/*.py` and the
set-up cell's template) through `utils` itself. A name no lesson reaches is maintainers'
machinery: the report says who uses it (other unreached utils, tools, tests, nobody).

    python -m tools.utils_usage            # per module: lines, lines lessons reach, the rest
    python -m tools.utils_usage --names    # also each unreached name and its users

Static references only (`module.name`, `from module import name`, bare names inside a
module); a name reached through `getattr` or a string is not seen, so check a move with
the tests before trusting it.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
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


def _imports(tree: ast.AST, own: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
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


def _references(
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


def _span(node: ast.stmt) -> int:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - start + 1


def parse_module(path: Path, submodules: set[str], root: Path = REPO_ROOT) -> Module:
    """Parse one module of the package."""
    text = path.read_text()
    tree = ast.parse(text)
    own = module_name(path, root)
    modules, names = _imports(tree, own)
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
            spans[target] = spans.get(target, 0) + _span(node)
            bodies.setdefault(target, []).append(node)
    own_names = set(spans)
    refs = {
        name: set().union(
            *(_references(n, modules, names, own, own_names, submodules) for n in nodes)
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
                module_refs |= _references(part, modules, names, own, set(), submodules)
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            continue  # A constant is counted when something uses it.
        module_refs |= _references(node, modules, names, own, set(), submodules)
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
        f"{node.name}.{item.name}": (_span(item), _attribute_names(item))
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and not (item.name.startswith("__") and item.name.endswith("__"))
    }
    attributes = {
        name: set().union(
            *(_attribute_names(n) for n in nodes if not isinstance(n, ast.ClassDef)),
            *(
                _attribute_names(part)
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


def _attribute_names(node: ast.AST) -> set[str]:
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


def _file_refs(path: Path, submodules: set[str], root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text())
    modules, names = _imports(tree, module_name(path, root))
    found = _references(tree, modules, names, "", set(), submodules)
    # `from utils.x import f` counts even if f is only passed along.
    found |= {t for t in names.values() if f"{t[0]}.{t[1]}" not in submodules}
    return found


def lesson_roots(root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    """What the lessons and the set-up cell's template refer to in `utils`."""
    mods = package_modules(root)
    submodules = set(mods)
    found: set[tuple[str, str]] = set()
    for path in sorted((root / "notebooks").glob("*.py")):
        found |= _file_refs(path, submodules, root)
    setup = root / "tools" / "setup_cell.py"
    if setup.exists():
        template = ast.parse(setup.read_text())
        for node in ast.walk(template):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "TEMPLATE" for t in node.targets
            ):
                text = ast.literal_eval(node.value) if isinstance(node.value, ast.Constant) else ""
                try:
                    found |= _references(ast.parse(text), {}, {}, "", set(), submodules)
                    tree = ast.parse(text)
                    modules, names = _imports(tree, "")
                    found |= _references(tree, modules, names, "", set(), submodules)
                except SyntaxError:
                    pass
    return found


def reached(mods: dict[str, Module], roots: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The closure of `roots` through the package's own references."""
    seen: set[tuple[str, str]] = set()
    imported: set[str] = set()
    todo = list(roots)
    while todo:
        key = todo.pop()
        module, name = key
        if key in seen or module not in mods:
            continue
        seen.add(key)
        mod = mods[module]
        if module not in imported:
            imported.add(module)
            todo.extend(mod.module_refs)
            # A package's __init__ runs when any of its modules is imported.
            parts = module.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in mods and parent not in imported:
                    imported.add(parent)
                    todo.extend(mods[parent].module_refs)
        todo.extend(mod.refs.get(name, ()))
        if name in mod.aliases:
            todo.append(mod.aliases[name])
    return seen


def unreached_methods(
    mods: dict[str, Module], reach: set[tuple[str, str]], root: Path = REPO_ROOT
) -> dict[tuple[str, str], int]:
    """Methods of reached classes whose name no lesson and no reached code uses as `x.name`.

    A method is matched by name only (`x.summary()` keeps every reached class's `summary`),
    so this under-counts; its own class's other unreached methods do not keep it.
    """
    used: set[str] = set()
    for path in sorted((root / "notebooks").glob("*.py")):
        used |= _attribute_names(ast.parse(path.read_text()))
    for module, name in reach:
        used |= mods[module].attributes.get(name, set())
    pending = {
        (mod.name, method): info
        for mod in mods.values()
        for method, info in mod.methods.items()
        if (mod.name, method.split(".")[0]) in reach
    }
    changed = True
    while changed:
        changed = False
        for key, (_, attributes) in list(pending.items()):
            if key[1].split(".")[1] in used:
                used |= attributes
                del pending[key]
                changed = True
    return {key: lines for key, (lines, _) in pending.items()}


def users(root: Path = REPO_ROOT) -> dict[tuple[str, str], set[str]]:
    """(module, name) -> the folders that refer to it outside the package ("tools", "tests")."""
    submodules = set(package_modules(root))
    found: dict[tuple[str, str], set[str]] = {}
    for folder in ("tools", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            for key in _file_refs(path, submodules, root):
                found.setdefault(key, set()).add(folder)
    return found


def report(root: Path = REPO_ROOT, *, show_names: bool = False) -> tuple[int, int, list[str]]:
    """Lines of learner-facing `utils` (checks apart): (all lines, lines lessons reach, report)."""
    mods = package_modules(root)
    reach = reached(mods, lesson_roots(root))
    outside = users(root)
    methods = unreached_methods(mods, reach, root)
    internal: dict[tuple[str, str], set[str]] = {}
    for mod in mods.values():
        for name, refs in mod.refs.items():
            for ref in refs:
                internal.setdefault(ref, set()).add(f"{mod.name}.{name}")
    lines = [f"{'module':34} {'lines':>6} {'unreached':>9}  unreached names"]
    total = unreached_total = 0
    for mod in mods.values():
        if mod.name.startswith(f"{PACKAGE}.checks"):
            continue
        unreached = {n: s for n, s in mod.spans.items() if (mod.name, n) not in reach}
        # Private constants and helpers count with what uses them; list public ones only.
        public = sorted(n for n in unreached if not n.startswith("_"))
        own_methods = {m: n for (module, m), n in methods.items() if module == mod.name}
        unreached.update(own_methods)
        public += sorted(m for m in own_methods if not m.split(".")[1].startswith("_"))
        num_unreached = sum(unreached.values())
        total += mod.num_lines
        unreached_total += num_unreached
        lines.append(f"{mod.name:34} {mod.num_lines:6} {num_unreached:9}  {', '.join(public)}")
        if show_names:
            for name in public:
                who = sorted(outside.get((mod.name, name), set()))
                if "." in name:
                    who = ["(a method: grep its name)"]
                via = sorted(internal.get((mod.name, name), set()))
                where = ", ".join(who + via) or "nobody"
                lines.append(f"    {name} ({unreached[name]} lines): {where}")
    lines.append(f"{'total (checks apart)':34} {total:6} {unreached_total:9}")
    checks = sum(m.num_lines for m in mods.values() if m.name.startswith(f"{PACKAGE}.checks"))
    lines.append(f"{'utils.checks (all)':34} {checks:6}")
    return total, total - unreached_total, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", action="store_true", help="each unreached name and its users")
    args = parser.parse_args(argv)
    _, _, lines = report(show_names=args.names)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
