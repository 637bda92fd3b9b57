"""Who uses each name of `utils/`: the lessons (directly or through what they call), tools, tests.

A lab's set-up cell embeds the `utils/` modules its lesson reaches (`tools/building/setup_cell.py`),
so what a lesson reaches is shipped to learners. This measures what a learner needs: it
parses each module, lists its top-level names (functions, classes, constants) with their
line counts (`tools/building/utils_references.py`), and follows references from the lessons
(`notebooks/*.py` and the set-up cell's template) through `utils` itself. A name no lesson
reaches is maintainers' machinery: the report says who uses it (other unreached utils,
tools, tests, nobody).

    python -m tools.utils_usage            # per module: lines, lines lessons reach, the rest
    python -m tools.utils_usage --names    # also each unreached name and its users

Static references only; a name reached through `getattr` or a string is not seen, so check
a move with the tests before trusting it.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tools.building import lesson_modules
from tools.building.utils_references import (
    PACKAGE,
    REPO_ROOT,
    Module,
    attribute_names,
    file_refs,
    imports,
    package_modules,
    references,
)


def lesson_roots(root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    """What the lessons and the set-up cell's template refer to in `utils`."""
    mods = package_modules(root)
    submodules = set(mods)
    found: set[tuple[str, str]] = set()
    for path in sorted((root / "notebooks").glob("*.py")):
        found |= file_refs(path, submodules, root)
    template = root / "tools" / "building" / "setup_cell_template.py"
    if template.exists():
        for node in ast.walk(ast.parse(template.read_text())):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "TEMPLATE" for t in node.targets
            ):
                tree = ast.parse(ast.literal_eval(node.value))
                modules, names = imports(tree, "")
                found |= references(tree, modules, names, "", set(), submodules)
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
        used |= attribute_names(ast.parse(path.read_text()))
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
            for key in file_refs(path, submodules, root):
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
    lines += reach_lines(mods, root)
    return total, total - unreached_total, lines


def reach_lines(mods: dict[str, Module], root: Path = REPO_ROOT) -> list[str]:
    """Lines by place (the top, lab/, lessons/, checks/), then what each lesson's lab embeds."""
    places = {"top": 0, "lab": 0, "lessons": 0, "checks": 0}
    for mod in mods.values():
        parts = mod.name.split(".")
        places[parts[1] if len(parts) > 1 and parts[1] in places else "top"] += mod.num_lines
    lines = ["by place: " + ", ".join(f"{place} {count}" for place, count in places.items())]
    for source in sorted((root / "notebooks").glob("[0-9][0-9]_*.py")):
        files = lesson_modules.lesson_files(source.stem, root)
        count = sum(len((root / name).read_text().splitlines()) for name in files)
        lines.append(f"{source.stem} reaches {count} lines in {len(files)} files (its lab's)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", action="store_true", help="each unreached name and its users")
    args = parser.parse_args(argv)
    _, _, lines = report(show_names=args.names)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
