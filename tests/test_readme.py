"""README.md's layout names every command in tools/, and no benchmarks/ folder."""

import re

from tests.conftest import REPO_ROOT


def _maintainers_layout():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## For maintainers") :]
    return section[section.index("```\n") + 4 : section.index("\n```", section.index("```\n"))]


def test_the_layout_names_every_tools_module():
    layout = _maintainers_layout()
    modules = sorted(p.stem for p in (REPO_ROOT / "tools").glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 10
    named = set(re.findall(r"\w+", layout[layout.index("tools/") :]))
    assert [module for module in modules if module not in named] == []


def test_benchmarks_are_in_tools_not_in_a_benchmarks_folder():
    assert not (REPO_ROOT / "benchmarks").exists()
    for name in ("README.md", "pyproject.toml", "Makefile", ".ci/run"):
        text = (REPO_ROOT / name).read_text()
        assert re.findall(r"(?<![\w.])benchmarks/", text) == [], name


SETUP_PLACE = (
    "It is the lab's first code cell, except where the parameters cell sets\n`BACKEND` (labs 4 "
    "and 5): there the parameters come first, because the set-up reads them."
)


def test_the_readme_says_where_the_set_up_cell_is_and_the_labs_agree():
    import nbformat

    assert SETUP_PLACE in (REPO_ROOT / "README.md").read_text()
    places = {}
    for path in sorted((REPO_ROOT / "labs").glob("[0-9][0-9]_*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        code = [c for c in cells if c.cell_type == "code"]
        tags = [c.metadata.get("tags", []) for c in code]
        parameters = next(i for i, t in enumerate(tags) if "parameters" in t)
        setup = next(i for i, t in enumerate(tags) if "setup" in t)
        sets_backend = re.search(r"^BACKEND = ", code[parameters].source, re.M) is not None
        places[path.stem] = (setup, parameters) if sets_backend else (setup,)
        assert places[path.stem] == ((1, 0) if sets_backend else (0,)), path.name
    assert places["04_train_keras"] == (1, 0)  # The README's example.
    assert len(places) >= 6
