"""The lessons' solved functions that are also helpers: one copy, generated into `utils`.

d2l-en's `#@save`, here a cell tag (`# %% tags=["save"]`): not in the cell's text, so a lab,
whose function is still a stub, does not say it is saved. Each saved function is written into
the `utils` module that hands it out, below the line `# Generated from <lesson> (TODO n) by
tools/building/saved.py.` (or `(given code)`, for a cell the lab gives whole) put once above
its `def`: not into a module of their own, as
`write_shard` reads `shard_files`' names and `shard_files` calls it, and `utils` has no
import cycle (tests/test_utils_usage.py). A step of the build
(`tools/build_notebooks.py`): read each tagged cell as the solution has it (marker and
`# TODO n:` lines dropped), functions only; write each where its line is, the module's own
prefix dropped (`shard_files.shard_name` is `shard_name` in `shard_files.py`), once the
module is found to have every name the function uses.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from pathlib import Path

import jupytext

from tools.building.regions import BEGIN, END, TODO_LINE, BuildError

SAVE_TAG = "save"
BLOCK_LINE = re.compile(
    r"^# Generated from \S+ \((TODO \d+|given code)\) by tools/building/saved\.py\.$"
)
COMMAND = "Run: make build (or, without executing, python -m tools.build_notebooks --embed-only)"


def saved_functions(root: Path, sources: list[Path]) -> dict[str, tuple[str, str]]:
    """Returns {name: (marker line, function text)} of the lessons' cells tagged `save`.

    Raises:
        BuildError: naming the cell, if it has more than one TODO, or holds not only functions.
    """
    found: dict[str, tuple[str, str]] = {}
    for source in sources:
        name = source.relative_to(root).as_posix()
        cells = jupytext.reads(source.read_text(), fmt="py:percent").cells
        for index, cell in enumerate(cells):
            if SAVE_TAG not in cell.metadata.get("tags", []):
                continue
            where, lines = f"{name} (cell {index + 1})", cell.source.splitlines()
            todos = [m.group(1) for m in map(TODO_LINE.match, lines) if m]
            if cell.cell_type != "code" or len(todos) > 1:
                raise BuildError(
                    f"{where}: a cell tagged save is a code cell with one TODO at most."
                )
            origin = f"TODO {todos[0]}" if todos else "given code"
            kept = [line for line in lines if line.strip() not in (BEGIN, END)]
            code = "\n".join(line for line in kept if not TODO_LINE.match(line))
            for node in ast.parse(code).body:
                if not isinstance(node, ast.FunctionDef) or node.name in found:
                    raise BuildError(
                        f"{where}: a cell tagged `{SAVE_TAG}` holds only functions, each saved "
                        f"once; found `{ast.unparse(node).splitlines()[0]}`."
                    )
                marker = f"# Generated from {name} ({origin}) by tools/building/saved.py."
                found[node.name] = (marker, ast.get_source_segment(code, node, padded=True))
    return found


def without_prefix(code: str, module: str) -> str:
    """`code` with `module.` dropped where it names that module: in `module.py`, its own names."""
    lines = code.splitlines(keepends=True)
    nodes = [n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Attribute)]
    own = [n for n in nodes if isinstance(n, ast.Name) and n.id == module]
    for node in sorted(own, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[node.lineno - 1].encode()  # Offsets count UTF-8 bytes.
        line = line[: node.col_offset] + line[node.end_col_offset + 1 :]  # The name and its dot.
        lines[node.lineno - 1] = line.decode()
    return "".join(lines)


def _global_names(code: str) -> set[str]:
    """The names `code`'s functions read from their module: defaults, globals, builtins."""
    names = set()

    def visit(table: symtable.SymbolTable) -> None:
        module = table.get_type() == "module"  # There: every name read; in a function: globals.
        found = [s for s in table.get_symbols() if (s.is_referenced() if module else s.is_global())]
        names.update(symbol.get_name() for symbol in found)
        for child in table.get_children():
            visit(child)

    visit(symtable.symtable(code, "<saved>", "exec"))
    return names


def _module_names(text: str, name: str) -> set[str]:
    """The names a module binds at its top: imports, functions, classes, assignments."""
    symbols = symtable.symtable(text, name, "exec").get_symbols()
    return {s.get_name() for s in symbols if s.is_assigned() or s.is_imported()}


def generated(root: Path, sources: list[Path]) -> dict[Path, str]:
    """Returns {path: text} of each `utils` module holding a block, as the lessons give it.

    Raises:
        BuildError: if a saved function has no block, or two; a block's function is not
            saved; or a module lacks a name its saved function uses.
    """
    saved, placed, texts = saved_functions(root, sources), {}, {}
    for path in sorted((root / "utils").rglob("*.py")):
        if "by tools/building/saved.py." not in (text := path.read_text()):
            continue
        tree, lines = ast.parse(text), text.splitlines(keepends=True)
        defs = {node.lineno: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        for number in reversed(range(len(lines))):
            if not BLOCK_LINE.match(lines[number].rstrip("\n")):
                continue
            node, where = defs.get(number + 2), f"{path.relative_to(root)}:{number + 1}"
            if node is None or node.name not in saved or node.name in placed:
                raise BuildError(f"{where}: not above the `def` of a function a lesson saves.")
            marker, code = saved[node.name][0], without_prefix(saved[node.name][1], path.stem)
            unknown = _global_names(code) - _module_names(text, path.name) - set(dir(builtins))
            if unknown:
                raise BuildError(f"{where}: {node.name} uses {sorted(unknown)}, not in the module.")
            lines[number : node.end_lineno] = [f"{marker}\n{code}\n"]
            placed[node.name] = where
        texts[path] = "".join(lines)
    for name, (marker, _) in saved.items():
        if name not in placed:
            raise BuildError(
                f"`{name}` is saved, but no module of utils holds it: put the line `{marker}` "
                f"above a `def {name}(...)` where it belongs. {COMMAND}"
            )
    return texts


def problems(root: Path, sources: list[Path]) -> list[str]:
    """One message per `utils` module whose generated blocks differ from the lessons'."""
    try:
        texts = generated(root, sources)
    except BuildError as error:
        return [str(error)]
    stale = [path.relative_to(root) for path, text in texts.items() if path.read_text() != text]
    return [
        f"{path} is out of date with the lessons' cells tagged save. {COMMAND}" for path in stale
    ]


def write(root: Path, sources: list[Path]) -> list[Path]:
    """Writes each module whose generated blocks differ from the lessons'; returns those."""
    written = []
    for path, text in generated(root, sources).items():
        if path.read_text() != text:
            path.write_text(text)
            print(f"Wrote {path.relative_to(root)}")
            written.append(path)
    return written
