"""The judge's plan for a lab: the lab cells it runs, where each TODO's values come in.

Takes the lab (never the submission) and the grader's parameters; gives a list of steps:
`code` (a lab cell that a later check needs, found from the names it binds and the
names the checks read), `fetch` (the names a TODO binds that a later step reads) and
`check` (a lab check cell's check calls). A check cell's other lines, which bind what
the lab takes from the TODO, are a `code` step after it with the lab's solution of the
TODO (`reference`): where the check failed, the judge runs them on the solution and sends
the values to the kernel, so that one mistake costs one TODO (nbgrader and otter isolate
their tests so). Speed tests and plots that no check reads are left out.
"""

from __future__ import annotations

import ast

import nbformat

from tools.grading.judge.references import reference_cells
from tools.grading.model import marks, parse, without_magics


def bound_names(source: str) -> list[str]:
    """The names a lab's TODO cell binds at top level (`x = ...`, `def f`), in order."""
    names = []
    for node in parse(without_magics(source)).body:
        targets = getattr(node, "targets", [getattr(node, "target", None)])
        found = (
            [node.name]
            if isinstance(node, ast.FunctionDef | ast.ClassDef)
            else [
                element.id
                for target in targets
                if target is not None
                for element in ast.walk(target)
                if isinstance(element, ast.Name)
            ]
        )
        names += [name for name in found if name not in names]
    return names


def split_check_cell(source: str) -> tuple[str, str]:
    """(its check calls, its other lines) of a check cell's source; "" for none. The other
    lines bind what the lab takes from the TODO for the cells below (lab 4's
    `global_batch_size, learning_rate = scale_for_replicas(...)`)."""
    body = parse(without_magics(source)).body
    checks = [
        node
        for node in body
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr.startswith("check_")
    ]
    if len(checks) == len(body):
        return source, ""
    taken = {line for node in checks for line in range(node.lineno, node.end_lineno + 1)}
    lines = list(enumerate(source.splitlines(), 1))
    return (
        "\n".join(line for number, line in lines if number in taken),
        "\n".join(line for number, line in lines if number not in taken),
    )


def _loads(source: str) -> set[str]:
    tree = parse(without_magics(source))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


# Scopes of their own: what they bind stays inside (a function's locals, a comprehension's
# loop variable), so it is not a name the cell binds.
_INNER_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _stores(source: str) -> set[str]:
    """The names a cell binds at its top level: assignments, definitions and imports."""
    stores, nodes = set(), list(parse(without_magics(source)).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            stores |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        if isinstance(node, _INNER_SCOPES):
            if hasattr(node, "name"):  # A def or class binds its own name.
                stores.add(node.name)
            continue
        nodes.extend(ast.iter_child_nodes(node))
    return stores


def _defines_functions(source: str) -> bool:
    """A cell of function definitions (and settings made by one call each): a TODO's Grain
    step may map one of them by name (lesson 9's `parse`), so the judge defines them too."""
    body = parse(without_magics(source)).body
    calls = lambda node: [n for n in ast.walk(node) if isinstance(n, ast.Call)]  # noqa: E731
    return any(isinstance(n, ast.FunctionDef) for n in body) and all(
        isinstance(n, ast.FunctionDef) or isinstance(n, ast.Assign) and len(calls(n.value)) < 2
        for n in body
    )


def plan(lab: nbformat.NotebookNode, literals: str, references: dict | None = None) -> list[dict]:
    """The judge's steps: the lab cells the checks need, each TODO's fetch, each check.
    `references`: {todo: its solution's cell}; None: `reference_cells(lab)`."""
    references = reference_cells(lab) if references is None else references
    steps: list[dict] = []
    for cell in lab.cells:
        cell_marks, tags = marks(cell), cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "setup" in tags or "hand_in" in tags:
            continue
        if "parameters" in tags:
            steps.append({"kind": "code", "source": literals, "needed": True})
        elif "todo" in cell_marks:
            todo = cell_marks["todo"]
            steps.append({"kind": "fetch", "todo": todo, "names": bound_names(cell.source)})
        elif "check" in cell_marks:
            todo = cell_marks["check"]
            checks, others = split_check_cell(cell.source)
            steps.append({"kind": "check", "todo": todo, "source": checks})
            if others:  # Run whatever the check says, as in the kernel (see above).
                steps.append(
                    {
                        "kind": "code",
                        "source": others,
                        "needed": False,
                        "todo": todo,
                        "reference": references.get(todo, ""),
                        "binds": sorted(_stores(others)),
                    }
                )
        else:
            defines = _defines_functions(cell.source)
            steps.append({"kind": "code", "source": cell.source, "needed": defines})
    needed: set[str] = set()
    for step in reversed(steps):  # A lab cell runs only if a later check needs what it binds.
        if step["kind"] == "check":
            needed |= _loads(step["source"])
        elif step["kind"] == "fetch":  # Only what a check or a needed lab cell reads.
            step["names"] = [name for name in step["names"] if name in needed]
        elif step["kind"] == "code":
            if step["needed"] or _stores(step["source"]) & needed:
                step["needed"] = True
                needed |= _loads(step["source"]) | _loads(step.get("reference", ""))
    return [step for step in steps if step.get("needed", True)]
