"""Tests of the set-up cell (tools/building/setup_cell.py), utils/lab/runtime.py, packages.py."""

import ast
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import DOCUMENTS, REPO_ROOT
from tools import build_notebooks as build
from tools import readme_numbers
from tools.building import lesson_modules, setup_cell
from tools.building import variants as build_variants
from tools.building.regions import BuildError
from utils import checks
from utils.lab import packages, runtime

LESSONS = [path.stem for path in build.lesson_sources(REPO_ROOT)]


def _setup_cells(notebook):
    return [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_gets_the_one_template(lesson):
    lab, solution = build_variants.split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    has_backend = lesson in ("04_train_keras", "09_grain_arrayrecord")
    expected = setup_cell.render(lesson, has_backend_parameter=has_backend)
    for notebook in (lab, solution):
        (cell,) = _setup_cells(notebook)
        assert cell.source == expected
        # Collapsed: a form on Colab, hidden input in JupyterLab.
        assert cell.metadata["cellView"] == "form"
        assert cell.metadata["jupyter"] == {"source_hidden": True}
    lines = expected.splitlines()
    # JupyterLab shows the hidden cell's first line; Colab's form title comes after it.
    assert lines[:2] == [
        "# Set-up: run this cell first",
        '#@title Set-up: run this cell first { display-mode: "form" }',
    ]
    version = setup_cell.course_version()
    assert f"course version {version}" in lines[2]
    assert "git+" not in expected and "github.com" not in expected  # No repository needed.
    # An assignment, not an expression: the cell shows the printed line, not a repr.
    backend = "BACKEND" if has_backend else '"auto"'
    call = f"runtime.prepare({backend}, also_install=COURSE_REQUIREMENTS)"
    assert lines[-1] == f"course_runtime = {call}"
    wanted = setup_cell.course_requirements(lesson)
    block = "\n".join(f"    {json.dumps(k)}: {json.dumps(v)}," for k, v in wanted.items())
    assert f"COURSE_REQUIREMENTS = {{\n{block}\n}}\n" in expected
    if has_backend:  # The parameters cell comes first: the set-up reads it.
        tags = [c.metadata.get("tags", []) for c in lab.cells]
        assert tags.index(["parameters"]) < tags.index(["setup", "nbval-ignore-output"])


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_lab_embeds_the_modules_its_lesson_reaches_as_in_the_checkout(lesson):
    lab, _ = build_variants.split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    (cell,) = _setup_cells(lab)
    embedded = setup_cell.embedded_files(cell.source)
    assert sorted(embedded) == lesson_modules.lesson_files(lesson)
    set_up = {
        "utils/lab/runtime.py",
        "utils/lab/packages.py",
    }  # The set-up's own, and what it installs by.
    assert {*set_up, lesson_modules.check_module(lesson)} <= set(embedded)
    assert all(embedded[name] == (REPO_ROOT / name).read_text() for name in embedded)
    sha256, text = setup_cell.payload(lesson)
    data = json.dumps(setup_cell.course_files(lesson), sort_keys=True).encode()
    assert f'COURSE_SHA256 = "{hashlib.sha256(data).hexdigest()}"' in cell.source
    assert sha256 == hashlib.sha256(data).hexdigest() and text in cell.source
    # Every lab's set-up cell was 127 KB when it held all of utils/; issue 44: lab 1's about
    # half of that, the whole cell (its code and the course it embeds). Issue 65's phone
    # folders (formats read by their bytes, OS leftovers, one-line listings) added 4.7 KB.
    budget = 70_000 if lesson == "01_tf_data_basics" else 100_000
    assert len(cell.source) <= budget, f"{lesson}'s set-up cell is {len(cell.source):,} characters"


def test_a_lab_carries_no_other_lessons_check_module():
    files = lesson_modules.lesson_files("01_tf_data_basics")
    checks = [name for name in files if name.startswith("utils/checks/")]
    assert checks == [
        "utils/checks/__init__.py",
        "utils/checks/_base.py",
        "utils/checks/_samples.py",
        "utils/checks/tf_data_basics.py",
    ]
    assert (
        "utils/lessons/scale_out_reading/host_processes.py" not in files
    )  # Lesson 7's processes: not lab 1's.


IMPORT_EACH = """
import importlib, json, sys
for folder, modules in json.loads(sys.argv[1]).items():
    for name in [n for n in sys.modules if n.split(".")[0] == "utils"]:
        del sys.modules[name]
    sys.path.insert(0, folder)
    for module in modules:
        importlib.import_module(module)
        assert sys.modules["utils"].__file__.startswith(folder), sys.modules["utils"].__file__
    sys.path.remove(folder)
print("imported")
"""


def test_each_lab_imports_every_module_from_its_own_files_alone(tmp_path):
    """What a lab carries is enough: each module imports from the lab's files alone, and each
    check the lesson calls is in its own lesson's module, which the lab carries."""
    runs = {}
    for lesson in LESSONS:
        folder = tmp_path / lesson
        for name, text in setup_cell.course_files(lesson).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        names = sorted(
            name[:-3].replace("/", ".").removesuffix(".__init__")
            for name in setup_cell.course_files(lesson)
        )
        source = (REPO_ROOT / "notebooks" / f"{lesson}.py").read_text()
        called = set(re.findall(r"\bchecks\.(check_\w+)\(", source))
        assert called and {checks.LESSON_OF_CHECK.get(name) for name in called} == {
            lesson_modules.check_module(lesson)[len("utils/checks/") : -3]
        }, lesson
        runs[str(folder)] = names
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT_EACH, json.dumps(runs)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.stdout.splitlines()[-1:] == ["imported"], done.stderr[-3000:]


def test_the_reach_follows_imports_at_any_depth(tmp_path):
    """A lesson importing `a`, which imports `b` inside a function: both, and their package."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "utils" / "checks").mkdir(parents=True)
    files = {
        "notebooks/09_reach.py": "from utils import a\n",
        "utils/__init__.py": "",
        "utils/a.py": "def f():\n    from utils.b import g\n    return g\n",
        "utils/b.py": "import json\n",
        "utils/c.py": "",  # Reached by nothing.
        "utils/checks/__init__.py": "",
        "utils/checks/reach.py": "from utils.checks import _base\n",
        "utils/checks/_base.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert lesson_modules.lesson_files("09_reach", tmp_path) == [
        "utils/__init__.py",
        "utils/a.py",
        "utils/b.py",
        "utils/checks/__init__.py",
        "utils/checks/_base.py",
        "utils/checks/reach.py",
    ]


def test_embedded_files_refuses_a_damaged_payload():
    code = setup_cell.render("01_tf_data_basics", has_backend_parameter=False)
    sha = setup_cell.SHA_PATTERN.search(code).group(1)
    with pytest.raises(ValueError, match=r"does not match its SHA-256"):
        setup_cell.embedded_files(code.replace(sha, "0" * 64))
    with pytest.raises(ValueError, match=r"embeds no course"):
        setup_cell.embedded_files("print(1)")


def test_lesson_6_installs_beam_pinned_as_requirements_beam_txt():
    pins = setup_cell.pinned_requirements(REPO_ROOT / "requirements-beam.txt")
    assert pins == ["apache-beam[tfrecord]==2.77.0", "pandas<3"]
    wanted = setup_cell.course_requirements("06_convert_with_beam")
    assert wanted["apache_beam"] == pins
    assert "apache_beam" not in setup_cell.course_requirements("01_tf_data_basics")
    assert "apache" not in setup_cell.render("01_tf_data_basics", has_backend_parameter=False)
    grain = setup_cell.course_requirements("09_grain_arrayrecord")["grain"]
    assert grain == setup_cell.pinned_requirements(REPO_ROOT / "requirements-grain.txt")


def test_every_lab_installs_what_the_course_imports_as_requirements_txt_pins_it():
    assert setup_cell.course_requirements("01_tf_data_basics") == {
        "numpy": ["numpy>=1.26"],
        "matplotlib": ["matplotlib>=3.8"],
        "PIL": ["pillow>=10.1"],
        "pillow_heif": ["pillow-heif>=1.0"],
        "tqdm": ["tqdm>=4.66"],
        "psutil": ["psutil>=5.9"],
        "ml_dtypes": ["ml_dtypes>=0.5"],
        "ipywidgets": ["ipywidgets>=8"],
    }


def _third_party_imports(paths):
    """The top-level modules `paths` import that are neither the standard library nor ours."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.add(node.module.split(".")[0])
    return sorted(found - set(sys.stdlib_module_names) - {"utils", "__future__"})


def test_the_set_up_covers_every_module_the_course_imports():
    """A bare JAX host lacks matplotlib and Pillow: whatever the labs import, the set-up
    installs where missing (TensorFlow, Keras with it, JAX: the backends)."""
    paths = [*REPO_ROOT.glob("utils/**/*.py"), *REPO_ROOT.glob("notebooks/*.py")]
    covered = {*setup_cell.COURSE_MODULES, "tensorflow", "keras", "jax"}
    covered |= {"absl", "google"}  # absl-py and protobuf: TensorFlow's own requirements.
    covered |= {module for module, _ in setup_cell.EXTRA_PACKAGES.values()}
    covered.add("array_record")  # In requirements-grain.txt, beside grain.
    assert [m for m in _third_party_imports(paths) if m not in covered] == []
    assert {"matplotlib", "PIL", "tqdm", "psutil"} <= set(_third_party_imports(paths))


def test_course_requirements_names_a_module_requirements_txt_lacks(tmp_path):
    (tmp_path / "requirements.txt").write_text("numpy>=1.26\nmatplotlib-inline\n")
    with pytest.raises(
        ValueError,
        match=r"^requirements.txt has no line for matplotlib "
        r"\(matplotlib\)$",
    ):
        setup_cell.course_requirements("01_tf_data_basics", tmp_path)


@pytest.mark.parametrize(
    "setting, expected",
    [
        ("", None),
        ('[tool.tpu-speed-pipelines]\nrepository = ""\n', None),
        (
            '[tool.tpu-speed-pipelines]\nrepository = "someone/flowers-course"\n',
            "someone/flowers-course",
        ),
    ],
    ids=["no table", "empty", "published"],
)
def test_repository_is_a_setting_empty_by_default(tmp_path, setting, expected):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nversion = "9.9"\n\n{setting}')
    assert setup_cell.repository(tmp_path) == expected
    assert setup_cell.repository() is None  # This checkout: not published.


@pytest.mark.parametrize("name", ["tpu-speed-pipelines/tpu-speed-pipelines", "https://x/y/z"])
def test_repository_refuses_the_placeholder_and_non_repositories(tmp_path, name):
    (tmp_path / "pyproject.toml").write_text(f'[tool.tpu-speed-pipelines]\nrepository = "{name}"\n')
    with pytest.raises(ValueError, match=r"is not a repository of this course. Set it to"):
        setup_cell.repository(tmp_path)


# The course's own repository, wherever a notebook or the README could name it.
COURSE_ADDRESS = re.compile(
    r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)"
    r"|raw\.githubusercontent\.com/([\w.-]+/[\w.-]+)"
    r"|github\.com/([\w.-]+/tpu-speed-pipelines\b|tpu-speed-pipelines/[\w.-]+)"
    r"|git\+https?://\S+"
)


def test_no_notebook_or_readme_line_points_at_an_unconfigured_address():
    configured = setup_cell.repository()
    texts = {name: (REPO_ROOT / name).read_text() for name in DOCUMENTS}
    # The README's clone command names the placeholder owner until the course is published
    # (tools.readme_numbers writes it from pyproject.toml; test_readme_numbers checks it).
    clone = readme_numbers.CLONE.search(texts["README.md"])["body"]
    assert (configured or f"{readme_numbers.PLACEHOLDER_OWNER}/tpu-speed-pipelines") in clone
    texts["README.md"] = readme_numbers.CLONE.sub("", texts["README.md"])
    for source in build.lesson_sources(REPO_ROOT):
        lab, solution = build_variants.split_variants(source)
        texts[f"built lab of {source.name}"] = nbformat.writes(lab)
        texts[f"built solution of {source.name}"] = nbformat.writes(solution)
    for folder in ("labs", "solutions"):  # What a learner downloads.
        for path in sorted((REPO_ROOT / folder).glob("*.ipynb")):
            texts[f"{folder}/{path.name}"] = path.read_text()
    found = [
        (name, match.group(0))
        for name, text in texts.items()
        for match in COURSE_ADDRESS.finditer(text)
        if configured is None or configured not in match.groups()
    ]
    assert found == []


def test_build_refuses_the_placeholder_repository(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nversion = "9.9"\n\n[tool.tpu-speed-pipelines]\n'
        'repository = "tpu-speed-pipelines/tpu-speed-pipelines"\n'
    )
    (tmp_path / "notebooks" / "09_test.py").write_text(
        SETUP_SOURCE.replace('# %% tags=["setup"]\n# The build puts the set-up code here.\n\n', "")
    )
    with pytest.raises(BuildError, match=r"repository = 'tpu-speed-pipelines/tpu-speed"):
        build_variants.split_variants(tmp_path / "notebooks" / "09_test.py", tmp_path)


SETUP_SOURCE = """# %% [markdown]
# # Lab 9 · A test lesson
#
# **You will:**
#
# 1. Make a number (TODO 1).

# %% tags=["setup"]
# The build puts the set-up code here.

# %% tags=["parameters"]
BACKEND = "auto"

# %%
# TODO 1: make a number.
### BEGIN SOLUTION
answer = 42
### END SOLUTION

# %%
checks.check_number(answer, todo=1)
"""


@pytest.mark.parametrize(
    "edit, message",
    [
        (("", ""), r"the parameters cell sets BACKEND, so it must come before the cell tagged"),
        (
            ('BACKEND = "auto"', 'SIZE = 1\n\n# %% tags=["setup"]\nx = 1'),
            r"expected one code cell tagged setup \(the build puts the set-up code there\); "
            r"found 2",
        ),
    ],
)
def test_build_refuses_a_misplaced_or_doubled_setup_cell(tmp_path, edit, message):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "9.9"\n')
    source = tmp_path / "notebooks" / "09_test.py"
    source.write_text(SETUP_SOURCE.replace(*edit))
    with pytest.raises(BuildError, match=message):
        build_variants.split_variants(source, tmp_path)


def test_checked_outputs_are_tagged_for_nbval_and_the_rest_ignored():
    lab, _ = build_variants.split_variants(REPO_ROOT / "notebooks" / "01_tf_data_basics.py")
    checked = []
    for cell in lab.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "parameters" in tags:
            continue
        assert ("nbval-ignore-output" in tags) != ("nbval-check-output" in tags), tags
        assert "NBVAL" not in cell.source, cell.source[:80]  # Not in the learner's view.
        if "nbval-check-output" in tags:
            checked.append(cell.source.splitlines()[0])
    assert checked == [
        "checks.check_filenames(",
        "checks.check_read_and_decode(read_and_decode, todo=2, storage=simulated_storage, "
        "source=source)",
        "checks.check_parallel_reading(",
    ]
    nbformat.validate(lab)


def test_a_source_cell_tagged_nbval_check_output_keeps_its_tag():
    cell = nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["nbval-check-output"]})
    notebook = nbformat.v4.new_notebook(cells=[cell])
    build_variants._tag_unchecked_outputs(notebook)
    assert (cell.source, cell.metadata["tags"]) == ("print(1)", ["nbval-check-output"])


def test_choose_backend(monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setattr(runtime, "attached_tpu", lambda: None)
    assert runtime.choose_backend() == runtime.Runtime("tensorflow", "auto: no TPU attached")
    monkeypatch.setattr(runtime, "attached_tpu", lambda: "/dev/accel0")
    monkeypatch.setattr(runtime, "_installed", lambda name: False)
    assert runtime.choose_backend("auto") == runtime.Runtime(
        "jax",
        "auto: a TPU is attached (/dev/accel0), JAX is installed and TensorFlow has no TPU "
        "support here",
    )
    monkeypatch.setattr(runtime, "_installed", lambda name: name == "tensorflow-tpu")
    assert runtime.choose_backend().backend == "tensorflow"  # Kaggle's TPU VM.
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert runtime.choose_backend() == runtime.Runtime("jax", "auto: KERAS_BACKEND=jax is set")
    assert runtime.choose_backend("tensorflow") == runtime.Runtime(
        "tensorflow", "BACKEND='tensorflow'"
    )
    with pytest.raises(ValueError, match=r"^`BACKEND` must be one of .*Received: BACKEND='torch'"):
        runtime.choose_backend("torch")


def test_prepare_refuses_to_switch_the_backend_of_a_running_kernel():
    import keras

    assert keras.backend.backend() == "tensorflow"
    pytest.importorskip("jax", reason="the JAX branch needs jax (requirements-dev.txt)")
    saved = os.environ.get("KERAS_BACKEND")
    with pytest.raises(
        ValueError,
        match=r"Keras is already running on tensorflow in this "
        r"kernel; jax needs a fresh one\. Restart the kernel",
    ):
        runtime.prepare("jax")
    assert os.environ.get("KERAS_BACKEND") == saved


def test_tensorflow_versions_end_at_requirements_txt_pin():
    requirement = runtime.tensorflow_requirement()
    assert requirement == "tensorflow-cpu>=2.20.0,<=2.21.0"  # Linux x86_64, as in CI.
    upper = requirement.split("<=")[1]
    assert f"tensorflow-cpu=={upper};" in (REPO_ROOT / "requirements.txt").read_text()


PIP_COMMAND_TAIL = [
    "-m",
    "pip",
    "install",
    "--quiet",
    "--no-color",
    "--progress-bar",
    "off",
    "--disable-pip-version-check",
    "--timeout",
    "20",
    "--retries",
    "1",
]


def test_pip_install_is_quiet_never_waits_and_keeps_what_is_installed(capsys):
    calls = []

    def install(command, **options):
        calls.append((command, options, Path(command[-1]).read_text()))
        return subprocess.CompletedProcess(command, 0, "", "")

    packages.pip_install(["tensorflow-cpu>=2.20.0,<=2.21.0"], install=install)
    ((command, options, constraints),) = calls
    assert command[1:-2] == [*PIP_COMMAND_TAIL, "tensorflow-cpu>=2.20.0,<=2.21.0"]
    assert command[-2] == "-c"  # Every installed package pinned where it is.
    pins = constraints.splitlines()
    assert f"numpy=={importlib.metadata.version('numpy')}" in pins
    assert f"pytest=={importlib.metadata.version('pytest')}" in pins
    assert len(pins) == len(packages.installed_versions())
    assert options["stdin"] is subprocess.DEVNULL and options["timeout"] == 600
    assert options["env"]["GIT_TERMINAL_PROMPT"] == "0" and options["env"]["PIP_NO_INPUT"] == "1"
    printed = capsys.readouterr().out
    assert printed == "Installing tensorflow-cpu>=2.20.0,<=2.21.0 with pip (at most 10 min) ...\n"


def test_pip_install_names_each_package_it_had_to_move(monkeypatch, capsys):
    """No TensorFlow keeps h5py 3.16 (say): pip runs again unconstrained, and says so."""
    calls = []
    before = {"h5py": "3.16.0", "numpy": "2.1.3", "six": "1.17.0"}
    after = {"h5py": "3.14.0", "numpy": "2.1.3", "tensorflow-cpu": "2.21.0"}
    snapshots = iter([before, after])
    monkeypatch.setattr(packages, "installed_versions", lambda: next(snapshots))

    def install(command, **options):
        calls.append(command)
        if "-c" in command:
            stderr = (
                "ERROR: Cannot install tensorflow-cpu because these package versions have "
                "conflicting dependencies.\nERROR: ResolutionImpossible: for help visit ...\n"
            )
            return subprocess.CompletedProcess(command, 1, "", stderr)
        return subprocess.CompletedProcess(command, 0, "", "")

    packages.pip_install(["tensorflow-cpu==2.21.0"], install=install)
    assert [command[1:] for command in calls[1:]] == [[*PIP_COMMAND_TAIL, "tensorflow-cpu==2.21.0"]]
    assert capsys.readouterr().out.splitlines() == [
        "Installing tensorflow-cpu==2.21.0 with pip (at most 10 min) ...",
        "pip changed installed packages: h5py 3.16.0 -> 3.14.0, six 1.17.0 -> gone.",
    ]


def _failing_pip(command, **options):
    stderr = "\x1b[31mERROR: Could not find a version\x1b[0m\nERROR: No matching distribution\n"
    return subprocess.CompletedProcess(command, 1, "", stderr)


def _offline_pip(command, **options):
    stderr = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError("
        "...: Failed to establish a new connection: [Errno -3]')': /simple/x/\n"
        "ERROR: No matching distribution found\n"
    )
    return subprocess.CompletedProcess(command, 1, "", stderr)


def _slow_pip(command, **options):
    raise subprocess.TimeoutExpired(command, options["timeout"])


@pytest.mark.parametrize(
    "install, why",
    [
        (_failing_pip, "ERROR: No matching distribution"),
        (
            _offline_pip,
            "ERROR: No matching distribution found; the package index could not be "
            "reached: is this runtime online?",
        ),
        (_slow_pip, "no result within 600 s"),
    ],
    ids=["pip fails", "pip is offline", "pip times out"],
)
def test_pip_install_failure_is_one_line_saying_how_to_go_on(install, why):
    with pytest.raises(packages.SetupFailed) as failure:
        packages.pip_install(["tensorflow-cpu==2.21.0", "pandas<3"], install=install)
    assert str(failure.value) == (
        f"pip could not install tensorflow-cpu==2.21.0, pandas<3 ({why}). Run by hand in a "
        "cell: %pip install tensorflow-cpu==2.21.0 'pandas<3' (or pick a runtime that has "
        "them), then run this cell again."
    )
    assert failure.value._render_traceback_() == [f"SetupFailed: {failure.value}"]


def test_pip_install_puts_a_new_pth_file_in_force(tmp_path, monkeypatch):
    site_packages, added = tmp_path / "site-packages", tmp_path / "added"
    site_packages.mkdir()
    added.mkdir()
    monkeypatch.setattr(packages.site, "getsitepackages", lambda: [str(site_packages)])
    monkeypatch.setattr(packages.site, "getusersitepackages", lambda: str(site_packages))
    monkeypatch.setattr(packages.sys, "path", list(packages.sys.path))

    def install(command, **options):
        (site_packages / "new.pth").write_text(f"# comment\nimport os\n{added}\n/no/such\n")
        return subprocess.CompletedProcess(command, 0, "", "")

    packages.pip_install(["x"], install=install)
    assert packages.sys.path[-1] == str(added) and "/no/such" not in packages.sys.path


# TensorFlow's CUDA build on a machine without a GPU, standing in: its first look for
# devices (the learner's first TensorFlow cell, unless the set-up looked) writes the error
# line to file descriptor 2, as the C++ runtime does, once.
CUDA_TENSORFLOW = {
    "tensorflow/__init__.py": "__version__ = '2.20.0'\nfrom tensorflow import config\n",
    "tensorflow/config.py": (
        "import os\nlooked = []\n\ndef list_physical_devices(device_type=None):\n"
        "    if not looked:\n"
        "        os.write(2, b'E0000 cuda_executor.cc: failed call to cuInit: INTERNAL: CUDA "
        "error: Failed call to cuInit: UNKNOWN ERROR (303)\\n')\n"
        "    looked.append(device_type)\n    return []\n"
    ),
    "keras/__init__.py": "__version__ = '3.13.2'\n",
}
LEARNER_AFTER_THE_SET_UP = """import os
from utils.lab import runtime
runtime.prepare("tensorflow")
import tensorflow as tf
print(tf.config.list_physical_devices("GPU"))  # The learner's first TensorFlow cell.
os.write(2, b"the learner's own error line\\n")
"""


def test_prepare_keeps_tensorflow_s_cuinit_error_out_of_the_learner_s_view(tmp_path):
    for name, text in CUDA_TENSORFLOW.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        [sys.executable, "-c", LEARNER_AFTER_THE_SET_UP],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Backend: tensorflow (BACKEND='tensorflow'). TensorFlow 2.20.0, Keras 3.13.2; "
        f"{os.cpu_count()} CPU cores.",
        "[]",
    ]
    assert result.stderr == "the learner's own error line\n"  # No cuInit line; stderr back.


def test_prepare_installs_what_is_missing_in_one_pip_command(monkeypatch, capsys):
    calls = []

    def install(command, **options):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setattr(runtime, "attached_tpu", lambda: None)
    wanted = {"no_such_module_x": ["x==1"], "json": ["never"], "no_such_module_y": ["y", "z"]}
    runtime.prepare("tensorflow", also_install=wanted, install=install)
    assert [command[len(PIP_COMMAND_TAIL) + 1 : -2] for command in calls] == [["x==1", "y", "z"]]
    assert capsys.readouterr().out.splitlines()[0] == (
        "Installing x==1, y, z with pip (at most 10 min) ..."
    )


@pytest.mark.parametrize(
    "backend, visible, driver, expected",
    [
        ("tensorflow", 0, True, "this TensorFlow sees none (a CPU build, tensorflow-cpu)"),
        ("jax", 0, True, "this JAX sees none (a CPU build)"),
        ("tensorflow", 1, True, None),
        ("tensorflow", 0, False, None),
    ],
    ids=["tf-cpu beside a GPU", "jax-cpu beside a GPU", "GPU seen", "no driver"],
)
def test_a_gpu_the_framework_cannot_see_is_said(monkeypatch, backend, visible, driver, expected):
    """On an H200 machine lab 4 on tensorflow-cpu trained on the CPU and said nothing."""
    monkeypatch.setattr(runtime.os.path, "exists", lambda path: driver and "nvidia" in path)
    asked = []
    notice = runtime.unused_gpu_notice(backend, lambda: asked.append(1) or visible)
    assert len(asked) == driver  # Without a driver the framework is never asked (a TPU VM).
    if expected is None:
        assert notice is None
    else:
        assert expected in notice and notice.startswith("An NVIDIA GPU is here, but ")
        assert "Keras trains on the CPU." in notice
