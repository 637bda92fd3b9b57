"""The course's layout: lesson packages are named like their checks. The import rules between
its places are pyproject.toml's contracts (tests/test_import_contracts.py); private library
names are tests/test_framework_internals.py's; no test caps a module's or a lesson's lines."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_each_lessons_equipment_is_named_like_its_check_module():
    packages = sorted(
        p.name
        for p in (REPO_ROOT / "utils" / "lessons").iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    )
    checks = {p.stem for p in (REPO_ROOT / "utils" / "checks").glob("*.py")}
    assert packages and set(packages) <= checks, sorted(set(packages) - checks)
