"""The documents: README.md short and linked, CONTRIBUTING.md's map and layout complete."""

import re

from tests.conftest import DOCUMENTS, REPO_ROOT
from tools import readme_numbers


def _maintainers_layout():
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    section = contributing[contributing.index("## The layout") :]
    return section[section.index("```\n") + 4 : section.index("\n```", section.index("```\n"))]


def _modules():
    """Every module of the packages utils/ and tools/ and their subpackages, as a path."""
    return {
        path.relative_to(REPO_ROOT).as_posix()
        for package in ("utils", "tools")
        for path in (REPO_ROOT / package).rglob("*.py")
        if path.name != "__init__.py" and (path.parent / "__init__.py").exists()
    }


def test_the_module_map_names_every_module_and_only_modules_that_exist():
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    assert contributing.index("## The module map") < contributing.index("## The layout")
    named = re.findall(r"^- `((?:utils|tools)/[\w/]+\.py)`: \S", contributing, re.M)
    assert len(named) == len(set(named)), "a module is named twice"
    assert sorted(_modules() - set(named)) == [], "missing from CONTRIBUTING.md's module map"
    assert sorted(set(named) - _modules()) == [], "in the module map, but not a module"


def test_the_readme_is_short_and_points_at_each_document():
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 100
    for document in DOCUMENTS[1:] + ["LICENSE"]:
        assert f"]({document})" in readme, document
    assert "Apache License" in (REPO_ROOT / "LICENSE").read_text()


def test_the_readme_gives_the_clone_and_both_commands_in_its_first_30_lines():
    first = (REPO_ROOT / "README.md").read_text().splitlines()[:30]
    assert first.count("```bash") == 3
    assert [line for line in first if line.startswith("git clone ")] == [
        "git clone https://github.com/OWNER/tpu-speed-pipelines.git && cd tpu-speed-pipelines"
    ]
    assert [line for line in first if line.startswith("python3 -m venv .venv")] == [
        "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt "
        "&& .venv/bin/python -m tools.run_course",
        "python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt "
        "&& .venv/bin/python -m pytest -n 2",
    ]


def test_the_readme_writes_every_command_as_it_is_run():
    readme = (REPO_ROOT / "README.md").read_text()
    bare = re.findall(r"(?<!\.venv/bin/)(?<![\w/])(?:python3?|pip) -m? ?[\w.-]+", readme)
    assert bare == ["python3 -m venv", "python3 -m venv"]


# Numbers in the README that no command measures: Python versions, a port, the licence, and
# the measuring machine's cores.
NAMED_NUMBERS = {"2", "2.0", "3.10", "3.11", "3.13", "8889"}


def test_every_number_in_the_readme_is_written_by_readme_numbers():
    text = (REPO_ROOT / "README.md").read_text()
    blocks = (readme_numbers.LABS, readme_numbers.TIMES, readme_numbers.BLOCK, readme_numbers.CLONE)
    for block in blocks:
        text = block.sub("", text)
    text = readme_numbers.FACT.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # Link targets: file names.
    assert set(re.findall(r"\d[\d.,-]*\d|\d", text)) <= NAMED_NUMBERS


def test_the_readme_has_no_maintainers_talk():
    readme = (REPO_ROOT / "README.md").read_text()
    for words in (r"\bbudget\b", r"\bissue\b", r"#\d+", r"\bpins?\b", r"\breplica\b"):
        assert re.findall(words, readme, re.IGNORECASE) == [], words


def test_every_relative_link_in_the_documents_resolves():
    broken = []
    for document in DOCUMENTS:
        path = REPO_ROOT / document
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{document}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
                slugs = {
                    re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings
                }
                if anchor not in slugs:
                    broken.append(f"{document}: {target} (no such heading)")
    assert broken == []


def test_the_layout_names_every_tools_module():
    layout = _maintainers_layout()
    modules = sorted(p.stem for p in (REPO_ROOT / "tools").glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 10
    named = set(re.findall(r"\w+", layout[layout.index("tools/") :]))
    assert [module for module in modules if module not in named] == []


def test_benchmarks_are_in_tools_not_in_a_benchmarks_folder():
    assert not (REPO_ROOT / "benchmarks").exists()
    for name in (*DOCUMENTS, "pyproject.toml", "Makefile", ".ci/run"):
        text = (REPO_ROOT / name).read_text()
        assert re.findall(r"(?<![\w.])benchmarks/", text) == [], name


SETUP_PLACE = (
    "It is the lab's first code cell, except where the parameters cell sets\n`BACKEND` (labs 4 "
    "and 5): there the parameters come first, because the set-up reads them."
)


def test_the_platforms_page_says_where_the_set_up_cell_is_and_the_labs_agree():
    import nbformat

    assert SETUP_PLACE in (REPO_ROOT / "docs" / "platforms.md").read_text()
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
    assert places["04_train_keras"] == (1, 0)  # The page's example.
    assert len(places) >= 6
