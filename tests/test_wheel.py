"""The course as a wheel: every package of `utils` in it, and it works where no checkout is.

The wheel is built offline from a copy of the checkout's sources (pip, `--no-build-isolation`
with requirements-dev.txt's setuptools). A fresh venv that sees this environment's packages
but not the course (`tests/test_bootstrap.py`'s `_fresh_environment`) then runs lab 1's
set-up cell with `$TPU_SPEED_PIPELINES_SOURCE` naming the wheel (pip installs it from the
file) and imports every module a lesson's lab embeds (`tools/building/lesson_modules.py`).
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO_ROOT
from tests.test_bootstrap import COURSE_ENTRIES, _fresh_environment
from tools.building import lesson_modules, setup_cell

# What the build reads, and the packages it must leave out (tools, tests).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "utils", "tools", "tests", "notebooks")
LESSONS = sorted(path.stem for path in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
# After the set-up cell: each module a lab embeds, imported, and the folder it came from.
IMPORT_EVERY_MODULE = """
import importlib
for name in {modules!r}:
    module = importlib.import_module(name)
    print("FROM", name, module.__file__)
"""
# requirements.txt's lines that `pip install .` leaves out, and why: the platform brings its
# own TensorFlow build (CPU, GPU or TPU); the rest run the lessons headless or open them.
NOT_INSTALLED_WITH_THE_COURSE = {
    "tensorflow-cpu",
    "tensorflow",
    "papermill",
    "ipykernel",
    "jupytext",
    "nbformat",
    "jupyterlab",
    "tomli",  # The tools' pyproject reader before Python 3.11.
}


def _requirements(lines) -> dict[str, Requirement]:
    """The requirements of `lines` (comments and options dropped), by canonical name."""
    requirements = {}
    for line in lines:
        line = line.split(" #")[0].strip()
        if line and not line.startswith(("#", "-")):
            requirement = Requirement(line)
            requirements[requirement.name.lower().replace("_", "-")] = requirement
    return requirements


def test_pip_install_of_the_course_brings_what_requirements_txt_gives_the_labs():
    declared = _requirements(setup_cell.read_pyproject()["project"]["dependencies"])
    pinned = _requirements((REPO_ROOT / "requirements.txt").read_text().splitlines())
    for_the_labs = {
        name: requirement
        for name, requirement in pinned.items()
        if name not in NOT_INSTALLED_WITH_THE_COURSE
    }
    assert sorted(declared) == sorted(for_the_labs)
    for name, requirement in for_the_labs.items():
        assert (declared[name].specifier, declared[name].marker) == (
            requirement.specifier,
            requirement.marker,
        ), name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The course's wheel, built from a copy of the checkout's sources."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO_ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(REPO_ROOT / name, source / name)
    folder = tmp_path_factory.mktemp("wheel")
    options = ["--quiet", "--no-deps", "--no-index", "--no-build-isolation"]
    command = [sys.executable, "-m", "pip", "wheel", *options, "--wheel-dir", str(folder)]
    environment = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    built = subprocess.run([*command, str(source)], capture_output=True, text=True, env=environment)
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = folder.glob("*.whl")
    return path


def test_the_wheel_holds_every_module_of_utils_and_nothing_else(wheel):
    version = setup_cell.course_version()
    assert wheel.name == f"tpu_speed_pipelines-{version}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(name for name in names if not name.startswith("tpu_speed_pipelines-"))
    expected = sorted(
        path.relative_to(REPO_ROOT).as_posix()
        for path in (REPO_ROOT / "utils").rglob("*.py")
        if "__pycache__" not in path.parts
    )
    assert modules == expected
    assert {"utils/lab/runtime.py", "utils/checks/_base.py"} <= set(modules)
    assert any(name.startswith("utils/lessons/") for name in modules)


def test_a_set_up_cell_given_the_wheel_installs_it_and_each_lab_s_modules_import(tmp_path, wheel):
    python = _fresh_environment(tmp_path, "fresh", COURSE_ENTRIES)
    prefix = python.parents[1]
    site = Path(sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["purelib"])
    modules = sorted(
        {
            name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
            for lesson in LESSONS
            for name in lesson_modules.lesson_files(lesson)
        }
    )
    code = setup_cell.render("01_tf_data_basics", has_backend_parameter=False)
    script = tmp_path / "lab" / "setup.py"
    script.parent.mkdir()
    script.write_text(code + IMPORT_EVERY_MODULE.format(modules=modules))
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",  # What the course needs is there; pip installs the file alone.
        setup_cell.SOURCE_ENV_VAR: str(wheel),
    }
    result = subprocess.run(
        [str(python), str(script)],
        cwd=script.parent,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"Installing the course from {wheel} with pip ...",
        f"Course {setup_cell.course_version()}: $TPU_SPEED_PIPELINES_SOURCE={wheel}.",
    ]
    assert lines[2].startswith("Backend: tensorflow (auto: no TPU attached). TensorFlow ")
    imported = dict(line.split(" ")[1:] for line in lines[3:])
    assert sorted(imported) == modules
    outside = {name: file for name, file in imported.items() if site not in Path(file).parents}
    assert outside == {}, json.dumps(outside, indent=1)
