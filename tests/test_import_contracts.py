"""The layering of `utils` holds: `lint-imports` checks pyproject.toml's import-linter contracts.

Each contract is shown to break on the import it forbids, added to a copy of `utils`.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tools import setup_cell

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # requirements-dev.txt's pin.
CONTRACTS = [c["name"] for c in setup_cell.read_pyproject()["tool"]["importlinter"]["contracts"]]
FROM_TOOLS, INDEPENDENT, LESSONS_PROTECTED, CHECKS_PROTECTED, ACYCLIC = CONTRACTS


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


@pytest.mark.parametrize(
    "module, line, broken, why",
    [
        ("utils/display.py", "import tools", (FROM_TOOLS,), "utils.display -> tools (l."),
        (
            "utils/lessons/write_tfrecords/recompression.py",
            "from utils.lessons.scale_out_reading import processes",
            (INDEPENDENT,),
            "utils.lessons.write_tfrecords is not allowed to import "
            "utils.lessons.scale_out_reading",
        ),
        (
            "utils/checks/tf_data_basics.py",
            "from utils.checks import write_tfrecords",
            (INDEPENDENT,),
            "utils.checks.tf_data_basics is not allowed to import utils.checks.write_tfrecords",
        ),
        (
            "utils/checks/tf_data_basics.py",
            "from utils.lessons.scale_out_reading import processes",
            (INDEPENDENT,),
            "utils.checks.tf_data_basics is not allowed to import utils.lessons.scale_out_reading",
        ),
        (
            "utils/lab/shard_cache.py",
            "from utils.lessons.scale_out_reading import processes",
            (LESSONS_PROTECTED, ACYCLIC),  # The lessons import the lab: a cycle too.
            "utils.lab.shard_cache -> utils.lessons.scale_out_reading.processes",
        ),
        (
            "utils/sampling.py",
            "from utils.lessons.scale_out_reading import processes",
            (LESSONS_PROTECTED,),
            "utils.sampling -> utils.lessons.scale_out_reading.processes",
        ),
        (
            "utils/sampling.py",
            "from utils.checks import _base",
            (CHECKS_PROTECTED,),
            "utils.sampling -> utils.checks._base",
        ),
        (
            "utils/errors.py",
            "from utils.lab import data",
            (ACYCLIC,),
            "- .errors -> .lab (1 import)",
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
        "a cycle between the top and the lab",
    ],
)
def test_an_import_the_contracts_forbid_breaks_exactly_its_contracts(
    tmp_path, module, line, broken, why
):
    shutil.copytree(
        REPO_ROOT / "utils", tmp_path / "utils", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text('"""The maintainers\' commands."""\n')
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path)
    before = _lint_imports(tmp_path)
    assert before.returncode == 0, before.stdout
    with (tmp_path / module).open("a") as source:
        source.write(f"{line}\n")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1
    assert _verdicts(result.stdout) == {
        name: "BROKEN" if name in broken else "KEPT" for name in CONTRACTS
    }
    assert why in result.stdout
