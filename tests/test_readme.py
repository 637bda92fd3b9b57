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
