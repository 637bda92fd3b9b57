"""The course's layout: utils reaches TensorFlow through public APIs, lesson packages are named
like their checks. The import rules between its places are pyproject.toml's contracts
(tests/test_import_contracts.py); no test caps a module's or a lesson's lines."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_utils_import_no_private_tensorflow_module():
    private = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in sorted((REPO_ROOT / "utils").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "tensorflow.python" in line
    ]
    assert private == []


def test_each_lessons_equipment_is_named_like_its_check_module():
    packages = sorted(p.name for p in (REPO_ROOT / "utils" / "lessons").iterdir() if p.is_dir()
                      and (p / "__init__.py").exists())  # fmt: skip
    checks = {p.stem for p in (REPO_ROOT / "utils" / "checks").glob("*.py")}
    assert packages and set(packages) <= checks, sorted(set(packages) - checks)
