"""The layering of `utils` and `tools` holds: `lint-imports` checks pyproject.toml's contracts.

Each contract is shown to break on the import it forbids, added to a copy of `utils` and
`tools`. And no module of `utils` or `tools` imports one that imports it back (on grimp's
graph, import-linter's own).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.conftest import REPO_ROOT
from tools.building import setup_cell

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # requirements-dev.txt's pin.
CONTRACTS = [c["name"] for c in setup_cell.read_pyproject()["tool"]["importlinter"]["contracts"]]
FROM_TOOLS, INDEPENDENT, FLOORS, BUILD, ROOMS, KERNEL_SIDE, GRADER = CONTRACTS


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Runs `lint-imports` on the packages under `root` with its pyproject.toml; no cache."""
    command = [LINT_IMPORTS, "--no-cache", "--no-logo", str(root / "pyproject.toml")]
    # One contract a line: rich wraps at the terminal's width.
    environment = {**os.environ, "COLUMNS": "500", "PYTHONPATH": str(root)}
    return subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True)


def _verdicts(output: str) -> dict[str, str]:
    """{contract name: "KEPT" or "BROKEN"} from `lint-imports`' summary lines."""
    found = {}
    for line in output.splitlines():
        for name in CONTRACTS:
            if line.startswith(f"{name} "):
                found[name] = line[len(name) + 1 :].split(" ")[0]
    return found


def test_the_checkout_keeps_every_contract():
    result = _lint_imports(REPO_ROOT)
    assert result.returncode == 0, f"Run: lint-imports\n{result.stdout}{result.stderr}"
    assert _verdicts(result.stdout) == dict.fromkeys(CONTRACTS, "KEPT")
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


# A copy of `utils` and `tools` with new modules, or `utils.models` rewritten (no module of utils
# imports them, so no other path changes).
PROCESSES = "from utils.lessons.scale_out_reading import processes\n"


@pytest.mark.parametrize(
    "modules, broken, why",
    [
        ({"utils/lab/probe.py": "import tools\n"}, (FROM_TOOLS,), "utils.lab.probe -> tools (l.3)"),
        (
            {"utils/lessons/write_tfrecords/probe.py": PROCESSES},
            (INDEPENDENT,),
            "utils.lessons.write_tfrecords is not allowed to import "
            "utils.lessons.scale_out_reading",
        ),
        (
            {"utils/checks/probe.py": "from utils.checks import write_tfrecords\n"},
            (INDEPENDENT,),
            "utils.checks.probe is not allowed to import utils.checks.write_tfrecords",
        ),
        (
            {"utils/checks/probe.py": PROCESSES},
            (INDEPENDENT,),
            "utils.checks.probe is not allowed to import utils.lessons.scale_out_reading",
        ),
        (
            {"utils/lab/probe.py": PROCESSES},
            (FLOORS,),
            "utils.lab.probe -> utils.lessons.scale_out_reading.processes (l.3)",
        ),
        (
            {"utils/models.py": PROCESSES},
            (FLOORS,),
            "utils.models -> utils.lessons.scale_out_reading.processes (l.3)",
        ),
        (
            {"utils/models.py": "from utils.checks import _base\n"},
            (FLOORS,),
            "utils.models -> utils.checks._base (l.3)",
        ),
        (
            {"utils/models.py": "from utils.lab import data\n"},
            (FLOORS,),
            "utils.models -> utils.lab.data (l.3)",
        ),
        ({"utils/probe.py": "import os\n"}, (FLOORS,), "utils.probe"),
        (
            {"tools/building/probe.py": "from tools.grading.kernel.inside import wire\n"},
            (BUILD,),
            "tools.building.probe -> tools.grading.kernel.inside.wire (l.3)",
        ),
        (
            {"tools/grading/judge/probe.py": "from tools.course_benchmark import settings\n"},
            (GRADER,),
            "tools.grading.judge.probe -> tools.course_benchmark.settings (l.3)",
        ),
        (
            {"tools/grading/judge/probe.py": "from tools.grading.submission import score\n"},
            (ROOMS,),
            "tools.grading.judge.probe -> tools.grading.submission.score (l.3)",
        ),
        (
            {"tools/grading/kernel/inside/probe.py": "from tools.grading import model\n"},
            (KERNEL_SIDE,),
            "tools.grading.kernel.inside.probe -> tools.grading.model (l.3)",
        ),
    ],
    ids=[
        "utils imports tools",
        "a lesson's equipment imports another's",
        "a lesson's checks import another's",
        "a lesson's checks import another's equipment",
        "the lab imports a lesson's equipment",
        "the top imports a lesson's equipment",
        "the top imports the checks",
        "the top imports the lab",
        "a new top module on no floor",
        "the build imports the grader",
        "the grader imports a benchmark",
        "a room of the grader imports one above it",
        "the learner's kernel imports the grader",
    ],
)
def test_an_import_the_contracts_forbid_breaks_exactly_its_contracts(
    tmp_path, modules, broken, why
):
    for package in ("utils", "tools"):
        shutil.copytree(
            REPO_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path)
    for name, text in modules.items():
        (tmp_path / name).write_text(f'"""A probe."""\n\n{text}')
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert _verdicts(result.stdout) == {
        name: "BROKEN" if name in broken else "KEPT" for name in CONTRACTS
    }
    assert why in result.stdout


def test_an_import_for_type_hints_only_breaks_no_contract(tmp_path):
    """A top module may name the lab's types under `TYPE_CHECKING` (`storage`'s `ImageSource`)."""
    for package in ("utils", "tools"):
        shutil.copytree(
            REPO_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "utils" / "errors.py").write_text(
        '"""A probe."""\n\nfrom typing import TYPE_CHECKING\n\n'
        "if TYPE_CHECKING:\n    from utils.lab import data\n"
    )
    result = _lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout
    assert _verdicts(result.stdout) == dict.fromkeys(CONTRACTS, "KEPT")


def _cycles(graph: grimp.ImportGraph) -> list[str]:
    """Each direct import "a -> b" of `graph` where b imports a back, directly or not."""
    return sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )


def test_no_module_of_utils_imports_one_that_imports_it_back():
    """Module by module: import-linter's `acyclic_siblings` takes a package for one module,
    and `utils.display -> utils.arguments`, `utils.lab.sources -> utils.display` close
    no cycle."""
    graph = grimp.build_graph("utils", cache_dir=None)
    assert _cycles(graph) == []
    graph.add_import(importer="utils.arguments", imported="utils.display")
    assert _cycles(graph) == [
        "utils.arguments -> utils.display",
        "utils.display -> utils.arguments",
    ]


def test_no_module_of_tools_imports_one_that_imports_it_back():
    """The build's steps imported `variants` back for its `Lesson` (now in `model.py`)."""
    graph = grimp.build_graph("tools", cache_dir=None)
    assert _cycles(graph) == []
    graph.add_import(importer="tools.building.model", imported="tools.building.variants")
    assert "tools.building.model -> tools.building.variants" in _cycles(graph)
