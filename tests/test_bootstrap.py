"""The generated set-up cell where a learner has the lab file and nothing else.

Upload-only runs: the notebook alone in an empty folder, `HOME` empty, no
`$TPU_SPEED_PIPELINES_SOURCE`, no course installed, the network cut (`bwrap --unshare-net`:
loopback only, for the kernel's sockets). Papermill runs inside the same sandbox.

How the environments are made, and how faithful they are. A virtual environment with
TensorFlow takes 1.3 GB and minutes of pip, so none is installed: each "fresh" environment
is an empty venv (no pip, nothing installed) whose one `.pth` file names a folder of
symbolic links to the entries of the test's own site-packages, leaving out what that
platform lacks. Python, Jupyter's kernel, TensorFlow, JAX and Keras are then the very
files a real install gives; what is not reproduced is the platform's exact set of
versions (these are requirements-dev.txt's), and pip resolving TensorFlow's dependencies:
- Kaggle/Workbench-like: everything but the course (Jupyter, TensorFlow, JAX).
- Colab-TPU-like: no TensorFlow (nor the course). A wheel folder stands in for the package
  index (`PIP_NO_INDEX`, `PIP_FIND_LINKS`, which pip reads as the set-up's own options);
  its `tensorflow-cpu 2.21.0` wheel holds the dist-info and a `.pth` naming a folder of
  links to this environment's TensorFlow, so what pip installs is the real TensorFlow,
  imported in the running kernel (`utils.lab.packages.pip_install` puts a new `.pth` in force).
- TensorFlow unobtainable: the Colab-TPU-like environment, no wheel folder: pip meets the
  cut network.
"""

import base64
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import threading
import time
import venv
import zipfile
from importlib.util import find_spec
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools.building import setup_cell
from tools.building.kernels import KERNEL_OPTIONS
from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.building.variants import split_variants

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
VERSION = setup_cell.course_version()
# What the set-up prints where TensorFlow is missing (utils.lab.runtime.tensorflow_requirement).
INSTALLING = "Installing tensorflow-cpu>=2.20.0,<=2.21.0 with pip (at most 10 min) ..."
DECOY = 'raise_me = "a learner\'s own utils.py"\n'
# Lab 4 on lab 1's 100 embedded images, not SMALL_PARAMETERS' 160: in a sandbox with lab 1
# they are drawn once (its empty HOME's cache), and where alone, fewer are drawn.
LAB4_PARAMETERS = {
    **SMALL_PARAMETERS["04_train_keras"],
    "NUM_IMAGES": SMALL_PARAMETERS["01_tf_data_basics"]["NUM_IMAGES"],
}
EMBEDDED = (
    "Course {version}: the copy embedded in this notebook, unpacked in "
    "/tmp/home/.cache/tpu_speed_pipelines/course/{version}-{sha12}."
)
# Runs notebooks with papermill, in the sandbox: argv[1] is a JSON list of runs.
DRIVER = """
import json, os, sys, papermill
from papermill.exceptions import PapermillExecutionError
for run in json.loads(sys.argv[1]):
    os.environ.update(run["env"])
    try:
        papermill.execute_notebook(run["input"], run["output"], parameters=run["parameters"],
            kernel_name="bare", cwd=run["cwd"], progress_bar=False, **run["kernel_options"])
    except PapermillExecutionError as error:
        print("FAILED", run["output"], error.ename, flush=True)
"""


def _has_bwrap():
    probe = ["bwrap", "--ro-bind", "/", "/", "--unshare-net", "true"]
    try:
        return subprocess.run(probe, capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


needs_bwrap = pytest.mark.skipif(not _has_bwrap(), reason="bubblewrap (bwrap) cannot run here")


def _link_view(folder, leave_out):
    """Makes `folder`: links to the site-packages entries whose names do not start so."""
    folder.mkdir()
    for entry in SITE_PACKAGES.iterdir():
        if not entry.name.endswith(".pth") and not entry.name.startswith(leave_out):
            (folder / entry.name).symlink_to(entry)
    return folder


COURSE_ENTRIES = ("tpu_speed_pipelines", "__editable__", "__pycache__", "utils")
TENSORFLOW_ENTRIES = ("tensorflow", "tensorboard")


def _fresh_environment(tmp_path, name, leave_out):
    """Returns the Python of an empty venv that sees the site-packages less `leave_out`."""
    prefix = tmp_path / name
    venv.create(prefix, with_pip=False)
    view = _link_view(tmp_path / f"{name}-view", leave_out)
    site = Path(sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["purelib"])
    (site / "platform.pth").write_text(f"{view}\n")
    return prefix / "bin" / "python"


def _tensorflow_wheel(folder, tmp_path):
    """Writes a `tensorflow-cpu 2.21.0` wheel that puts this environment's TensorFlow in force."""
    view = tmp_path / "tensorflow-view"
    view.mkdir()
    for entry in SITE_PACKAGES.iterdir():
        if entry.name.startswith(TENSORFLOW_ENTRIES) and not entry.name.endswith(".dist-info"):
            (view / entry.name).symlink_to(entry)
    info = "tensorflow_cpu-2.21.0.dist-info"
    files = {
        "tensorflow_cpu_files.pth": f"{view}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.21.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir()
    with zipfile.ZipFile(folder / "tensorflow_cpu-2.21.0-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return folder


def _run_upload_only(tmp_path, python, runs, env=None, timeout=900):
    """Runs notebooks alone in empty folders, sandboxed; returns their executed copies.

    `runs`: (name, notebook, parameters) each; a notebook that fails keeps its outputs up
    to the failing cell.
    """
    kernels = tmp_path / "kernels" / "kernels" / "bare"
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "bare", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    specs = []
    for name, notebook, parameters in runs:
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(notebook, folder / f"{name}.ipynb")
        specs.append(
            {
                "input": str(folder / f"{name}.ipynb"),
                "output": str(tmp_path / f"{name}.out.ipynb"),
                "parameters": parameters,
                "cwd": str(folder),
                "env": {},
                # The sandbox, with a network of its own, cannot import tools/ (a clone
                # under /tmp): its kernels keep jupyter_client's TCP, on no shared port.
                "kernel_options": {"extra_arguments": KERNEL_OPTIONS["extra_arguments"]},
            }
        )
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp/home",
        "JUPYTER_PATH": str(tmp_path / "kernels"),
        "TPU_SPEED_PIPELINES_NO_PROGRESS": "1",
        "PIP_CONFIG_FILE": os.devnull,  # Not this machine's pip settings (local wheels).
        **(env or {}),
    }
    sandbox = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/tmp/home",
        "--bind",
        str(tmp_path),
        str(tmp_path),
        # After the tmpfs, which would hide them: this Python's environment, where a clone
        # (and its .venv) lives under /tmp.
        "--ro-bind",
        sys.prefix,
        sys.prefix,
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
    ]
    command = ["env", "-i", *(f"{k}={v}" for k, v in environment.items())]
    command += [*sandbox, sys.executable, "-c", DRIVER, json.dumps(specs)]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    executed = {name: nbformat.read(tmp_path / f"{name}.out.ipynb", 4) for name, _, _ in runs}
    return executed, result.stdout, seconds


def _setup_output(notebook):
    """Returns what the set-up cell printed, and its error's one line (or None)."""
    (cell,) = [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]
    printed = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    errors = [o for o in cell.outputs if o.output_type == "error"]
    stderr = [o.text for o in cell.outputs if o.get("name") == "stderr"]
    assert stderr == []  # Quiet: no pip, TensorFlow, absl or JAX log lines.
    return printed, (errors[0].traceback if errors else None)


def _failure(notebook):
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                return cell, f"{output.ename}: {output.evalue}"
    return None, None


def _embedded_line(stem):
    sha256, _ = setup_cell.payload(stem)
    return EMBEDDED.format(version=VERSION, sha12=sha256[:12])


# The upload-only platforms build their notebooks in threads; CPython 3.11's `ast` keeps its
# recursion depth per interpreter, not per thread, and `ast.parse` in two threads at once can
# raise "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).
_BUILDING = threading.Lock()


def _notebook(stem, variant):
    with _BUILDING:
        lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{stem}.py")
    return lab if variant == "lab" else solution


def _setup_code(backend="auto"):
    code = setup_cell.render("01_tf_data_basics", has_backend_parameter=True)
    return f"BACKEND = {backend!r}\n{code}"


def test_setup_cell_finds_the_course_beside_a_decoy_utils_py(tmp_path):
    (tmp_path / "utils.py").write_text(DECOY)
    code = (
        "import utils\n"  # The learner's module was imported first: the set-up replaces it.
        + _setup_code()
        + "\nfrom utils import checks\n"
        + "print('RESULT', sys.modules['utils'].__file__, checks.__name__)\n"
    )
    # From standard input, as `-c` would, but with no limit on the argument's length; the
    # backend left to the set-up (a test before may have chosen one in this process).
    environment = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-"],
        input=code,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] in (
        f"Course {VERSION}: on sys.path at {REPO_ROOT}.",  # PYTHONPATH names this checkout.
        f"Course {VERSION}: installed at {REPO_ROOT}.",
    )
    assert lines[1].startswith("Backend: tensorflow (auto: no TPU attached). TensorFlow 2.21.0")
    assert lines[2] == f"RESULT {REPO_ROOT / 'utils' / '__init__.py'} utils.checks"
    assert result.stderr == ""  # TensorFlow's import-time log lines are dropped.


def test_setup_cell_in_a_clone_says_so(tmp_path):
    code = _setup_code() + "\nprint('RESULT', sys.path[0])\n"
    labs = REPO_ROOT / "labs"
    result = subprocess.run(
        [sys.executable, "-"], input=code, cwd=labs, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == f"Course {VERSION}: the clone in the folder above."
    assert result.stdout.splitlines()[-1] == f"RESULT {REPO_ROOT}"


@needs_bwrap
def test_setup_cell_with_an_unusable_source_fails_in_one_line(tmp_path):
    python = _fresh_environment(tmp_path, "kaggle", COURSE_ENTRIES)
    code = _setup_code().replace("from utils.lab import runtime", "raise SystemExit(0)  #")
    script = tmp_path / "setup.py"
    script.write_text(code)
    missing = tmp_path / "no-such-course"
    command = [
        "env",
        "-i",
        "PATH=/usr/bin:/bin",
        "HOME=/tmp/home",
        f"PIP_CONFIG_FILE={os.devnull}",
        f"{setup_cell.SOURCE_ENV_VAR}={missing}",
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/tmp/home",
        "--bind",
        str(tmp_path),
        str(tmp_path),
        # After the tmpfs, as in _run_upload_only: the site-packages the view links to (pip
        # among them) are in this Python's environment, under /tmp when the clone is.
        "--ro-bind",
        sys.prefix,
        sys.prefix,
        "--unshare-net",
        "--die-with-parent",
        str(python),
        str(script),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stdout == f"Installing the course from {missing} with pip ...\n"
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"SetupFailed: pip could not install the course from "
        rf"\$TPU_SPEED_PIPELINES_SOURCE={missing} \(ERROR: .+\)\. Run by hand in a cell: "
        rf"%pip install {missing} ; or unset TPU_SPEED_PIPELINES_SOURCE to use the copy "
        r"embedded in this notebook; then run this cell again\.",
        last,
    ), last
    assert "\x1b[" not in result.stderr


def _kaggle(folder):
    """Kaggle or Workbench: Jupyter and TensorFlow, no course, nothing else."""
    python = _fresh_environment(folder, "kaggle", COURSE_ENTRIES)
    runs = [
        ("lab01", _notebook("01_tf_data_basics", "lab"), SMALL_PARAMETERS["01_tf_data_basics"]),
        (
            "solution01",
            _notebook("01_tf_data_basics", "solution"),
            SMALL_PARAMETERS["01_tf_data_basics"],
        ),
        ("solution04", _notebook("04_train_keras", "solution"), LAB4_PARAMETERS),
    ]
    return python, _run_upload_only(folder, python, runs)


def _colab_tpu(folder):
    """Colab's TPU runtime: JAX, no TensorFlow; a wheel folder is the package index."""
    python = _fresh_environment(folder, "colab", COURSE_ENTRIES + TENSORFLOW_ENTRIES)
    wheels = _tensorflow_wheel(folder / "wheels", folder)
    runs = [
        (
            "solution04",
            _notebook("04_train_keras", "solution"),
            {**LAB4_PARAMETERS, "BACKEND": "jax"},
        ),
    ]
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    return python, _run_upload_only(folder, python, runs, env=env)


def _offline_colab_tpu(folder):
    """Colab's TPU runtime with the network cut: TensorFlow cannot be had."""
    python = _fresh_environment(folder, "colab", COURSE_ENTRIES + TENSORFLOW_ENTRIES)
    runs = [("lab01", _notebook("01_tf_data_basics", "lab"), {})]
    return python, _run_upload_only(folder, python, runs)


@pytest.fixture(scope="module")
def upload_only(tmp_path_factory):
    """`run(platform)`: (its folder, Python, `_run_upload_only`'s result) for `_kaggle`,
    `_colab_tpu` (where JAX is installed) and `_offline_colab_tpu`, all started at once: each
    is a sandbox of its own that mostly waits (on its kernel's start, on pip). The module
    ends when all three have."""
    platforms = [_kaggle, _offline_colab_tpu] + ([_colab_tpu] if find_spec("jax") else [])
    folders = {platform: tmp_path_factory.mktemp(platform.__name__[1:]) for platform in platforms}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(platforms)) as pool:
        futures = {platform: pool.submit(platform, folder) for platform, folder in folders.items()}
        yield lambda platform: (folders[platform], *futures[platform].result())


@needs_bwrap
def test_upload_only_with_tensorflow_runs_labs_1_and_4(upload_only):
    """Kaggle or Workbench: Jupyter and TensorFlow, no course, nothing else."""
    folder, _, (executed, stdout, _) = upload_only(_kaggle)
    assert stdout.splitlines() == [f"FAILED {folder / 'lab01.out.ipynb'} CheckFailed"]
    for name in ("lab01", "solution01", "solution04"):
        printed, error = _setup_output(executed[name])
        lines = printed.splitlines()
        stem = {"01": "01_tf_data_basics", "04": "04_train_keras"}[name[-2:]]
        assert lines[0] == _embedded_line(stem), name  # Each lab carries its own modules.
        assert re.fullmatch(
            r"Backend: tensorflow \(auto: no TPU attached\)\. TensorFlow 2\.21\.0, Keras "
            r"[\d.]+; \d+ CPU cores\.",
            lines[1],
        ), lines
        assert len(lines) == 2 and error is None
    cell, message = _failure(executed["lab01"])
    assert message.startswith("CheckFailed: TODO 1 (filenames): not done yet"), message
    assert cell.metadata["tpu_speed_pipelines"] == {"check": 1}
    assert _failure(executed["solution01"]) == (None, None)
    assert _failure(executed["solution04"]) == (None, None)


@needs_bwrap
def test_upload_only_on_jax_installs_tensorflow_from_the_index(upload_only):
    """Colab's TPU runtime: JAX, no TensorFlow; a wheel folder is the package index."""
    pytest.importorskip("jax", reason="the Colab-like environment needs jax")
    _, python, (executed, stdout, _) = upload_only(_colab_tpu)
    assert stdout == ""
    printed, error = _setup_output(executed["solution04"])
    lines = printed.splitlines()
    assert lines[:2] == [
        _embedded_line("04_train_keras"),
        INSTALLING,
    ]
    assert re.fullmatch(
        r"Backend: jax \(BACKEND='jax'\)\. TensorFlow 2\.21\.0, Keras [\d.]+ on JAX [\d.]+ "
        r"\(TensorFlow for tf\.data only\); \d+ CPU cores\.",
        lines[2],
    ), lines
    assert len(lines) == 3 and error is None
    assert _failure(executed["solution04"]) == (None, None)
    installed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('tensorflow-cpu'))"],
        capture_output=True,
        text=True,
    )
    assert installed.stdout == "2.21.0\n"


@needs_bwrap
def test_upload_only_without_tensorflow_anywhere_fails_in_one_line(upload_only):
    """Colab's TPU runtime with the network cut: TensorFlow cannot be had."""
    folder, _, (executed, stdout, seconds) = upload_only(_offline_colab_tpu)
    assert stdout.splitlines() == [f"FAILED {folder / 'lab01.out.ipynb'} SetupFailed"]
    printed, error = _setup_output(executed["lab01"])
    assert printed.splitlines() == [
        _embedded_line("01_tf_data_basics"),
        INSTALLING,
    ]
    (line,) = error
    assert re.fullmatch(
        r"SetupFailed: pip could not install tensorflow-cpu>=2\.20\.0,<=2\.21\.0 \(ERROR: .+; "
        r"the package index could not be reached: is this runtime online\?\)\. Run by "
        r"hand in a cell: %pip install 'tensorflow-cpu>=2\.20\.0,<=2\.21\.0' \(or pick a "
        r"runtime that has them\), then run this cell again\.",
        line,
    ), line
    assert "\x1b[" not in line
    assert seconds < 300  # pip gives up on a cut network well within its timeout.
