"""The set-up cell of every lab and solution: one template, put into each lesson by the build.

A lesson source marks where the set-up goes with a code cell tagged `setup`; the build
(`tools/build_notebooks.py`) replaces that cell's code with `render(...)`: the cell's code
(`tools/building/setup_cell_template.py`) with this lesson's tokens filled in.

The lab carries its course. A learner often has the lab file and nothing else (uploaded
to Colab, imported into Kaggle, downloaded into Workbench), so every generated notebook
holds the course files its lesson reaches (`tools/building/lesson_modules.py`: the `utils/` modules
it imports, at any depth) as a JSON map {path: text}, xz-compressed, base85-encoded, with
the SHA-256 of the map (`payload`). The
cell uses, in this order and saying which: a clone beside the notebook (`utils/` in the
notebook's folder or the one above), an installed course (pip, or `utils/` on sys.path),
`$TPU_SPEED_PIPELINES_SOURCE` (a local folder, used as it is; anything else is given to
pip), else the embedded copy, unpacked into `<cache>/course/<version>-<sha12>/` (the data
cache of `utils.lab.data`) and put first on sys.path: no pip, no network.

Why the payload is in the cell's source, not in the notebook's metadata: a kernel is not
told which notebook it serves ("ipykernel is not aware it is attached to a notebook",
ipython/ipython#12554; #11924: Jupyter makes reading the notebook from the kernel hard on
purpose), and on Colab the notebook lives in Drive, not on the runtime's disk: no code in
the notebook can read the file or its metadata, on any of the platforms. A cell's source
is the one part of the notebook every kernel is sent. The cell is a Colab form (`#@title`
and `cellView: "form"`) and hidden in JupyterLab (`jupyter.source_hidden`: JupyterLab shows
its first line, a plain comment), so a learner sees its title and at most 3 printed lines:
where the course came from, an install line if TensorFlow (or Beam, lesson 6) is missing,
and the backend with why (`utils.lab.runtime.prepare`).

The repository's address is a setting (`[tool.tpu-speed-pipelines] repository` in
pyproject.toml, "owner/name" on GitHub), empty until a maintainer publishes the course;
the labs' "Open in Colab" links appear only when it is set, and the placeholder address is
refused (`repository`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (requirements-dev.txt).
    import tomli as tomllib

from tools.building import lesson_modules
from tools.building.setup_cell_template import TEMPLATE

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_ENV_VAR = "TPU_SPEED_PIPELINES_SOURCE"
CACHE_ENV_VAR = "TPU_SPEED_PIPELINES_CACHE"  # As utils.lab.data.CACHE_ENV_VAR.
SETUP_TAG = "setup"
# The address the course was drafted with; no such repository exists.
PLACEHOLDER_REPOSITORY = "tpu-speed-pipelines/tpu-speed-pipelines"
PAYLOAD_LINE_LENGTH = 1000
PAYLOAD_PATTERN = re.compile(r'COURSE_PAYLOAD = """\n([^"]*)"""')
SHA_PATTERN = re.compile(r'COURSE_SHA256 = "([0-9a-f]{64})"')


def form_header(title: str) -> str:
    """Returns the first two lines of a collapsed cell: a plain comment, then Colab's form title.

    JupyterLab shows a hidden cell's first line in its place (`jupyter.source_hidden`), so
    that line reads as a sentence; Colab's form takes its title from `#@title`, and
    "display-mode" hides the code until "Show code" is clicked.
    """
    return f'# {title}\n#@title {title} {{ display-mode: "form" }}'


TITLE = form_header("Set-up: run this cell first")
# Cell metadata that collapses the cell: Colab's form view, JupyterLab's hidden input.
CELL_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}

# Optional packages a lesson installs where they are missing: its module, and the file
# whose pinned requirements it installs.
EXTRA_PACKAGES = {
    "06_convert_with_beam": ("apache_beam", "requirements-beam.txt"),
    "09_grain_arrayrecord": ("grain", "requirements-grain.txt"),  # With ArrayRecord.
}
# The modules the course's `utils` and lessons import beyond TensorFlow, Keras and JAX
# (ipywidgets: tqdm's notebook bars), each with the distribution whose requirements.txt line
# installs it where it is missing (a bare JAX host has none of them).
COURSE_MODULES = {
    "numpy": "numpy",
    "matplotlib": "matplotlib",
    "PIL": "pillow",
    "tqdm": "tqdm",
    "psutil": "psutil",
    "ml_dtypes": "ml_dtypes",
    "ipywidgets": "ipywidgets",
    "pillow_heif": "pillow-heif",
}


def read_pyproject(root: Path = REPO_ROOT) -> dict:
    """Returns `root`'s pyproject.toml, parsed; {} where there is none."""
    path = root / "pyproject.toml"
    return tomllib.loads(path.read_text()) if path.is_file() else {}


def course_version(root: Path = REPO_ROOT) -> str:
    """Returns the course's version, from pyproject.toml (the tag is `v<version>`)."""
    return read_pyproject(root)["project"]["version"]


def repository(root: Path = REPO_ROOT) -> str | None:
    """Returns the GitHub repository ("owner/name") the course is published at, or None.

    It is `repository` in pyproject.toml's `[tool.tpu-speed-pipelines]` table; empty (or
    absent) means not published: no notebook links to a repository then.

    Raises:
        ValueError: if it is set to the placeholder address or is not "owner/name".
    """
    settings = read_pyproject(root).get("tool", {}).get("tpu-speed-pipelines", {})
    name = settings.get("repository", "").strip()
    if not name:
        return None
    if name.lower() == PLACEHOLDER_REPOSITORY or not re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        raise ValueError(
            f"pyproject.toml: [tool.tpu-speed-pipelines] repository = {name!r} is not a "
            "repository of this course. Set it to the GitHub 'owner/name' where the course "
            'is published, or to "" (no links).'
        )
    return name


def pinned_requirements(path: Path) -> list[str]:
    """Returns the requirement lines of a requirements file, comments dropped."""
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def course_files(stem: str, root: Path = REPO_ROOT) -> dict[str, str]:
    """Returns the course files lesson `stem` reaches: {"utils/....py": text}, by path.

    Only what the lesson imports, at any depth (`tools/building/lesson_modules.py`): a lab carries
    its own lesson's modules, not the whole package.
    """
    return {name: (root / name).read_text() for name in lesson_modules.lesson_files(stem, root)}


def payload(stem: str, root: Path = REPO_ROOT) -> tuple[str, str]:
    """Returns (sha256, text) of lesson `stem`'s course files as its set-up cell embeds them.

    The text is the JSON of `course_files`, xz-compressed and base85-encoded, in lines of
    PAYLOAD_LINE_LENGTH characters; the SHA-256 is that of the JSON.
    """
    data = json.dumps(course_files(stem, root), sort_keys=True).encode()
    encoded = base64.b85encode(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)).decode()
    step = PAYLOAD_LINE_LENGTH
    lines = [encoded[start : start + step] for start in range(0, len(encoded), step)]
    return hashlib.sha256(data).hexdigest(), "\n".join(lines)


def embedded_files(code: str) -> dict[str, str]:
    """Returns the files a set-up cell's code embeds, checked against its SHA-256.

    Raises:
        ValueError: if the code holds no payload or the payload does not match its SHA-256.
    """
    found, sha = PAYLOAD_PATTERN.search(code), SHA_PATTERN.search(code)
    if not found or not sha:
        raise ValueError("The set-up cell embeds no course (no COURSE_PAYLOAD and SHA-256).")
    data = lzma.decompress(base64.b85decode("".join(found.group(1).split())))
    if hashlib.sha256(data).hexdigest() != sha.group(1):
        raise ValueError("The set-up cell's embedded course does not match its SHA-256.")
    return json.loads(data)


def course_requirements(stem: str, root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """Returns {module: [requirement]} of what lesson `stem` imports besides TensorFlow.

    Each of COURSE_MODULES with its requirements.txt line; lesson 6 adds Apache Beam's
    pinned lines (EXTRA_PACKAGES).

    Raises:
        ValueError: if requirements.txt has no line for one of COURSE_MODULES.
    """
    lines = pinned_requirements(root / "requirements.txt")
    wanted = {}
    for module, distribution in COURSE_MODULES.items():
        found = [line for line in lines if re.match(rf"{distribution}\b(?![-.])", line, re.I)]
        if not found:
            raise ValueError(f"requirements.txt has no line for {distribution} ({module})")
        wanted[module] = found
    if stem in EXTRA_PACKAGES:
        module, requirements_file = EXTRA_PACKAGES[stem]
        wanted[module] = pinned_requirements(root / requirements_file)
    return wanted


def _dict_lines(wanted: dict[str, list[str]]) -> str:
    """Returns the code of `wanted`, one key a line."""
    lines = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in wanted.items())
    return "{\n" + lines + "}"


def render(stem: str, *, has_backend_parameter: bool, root: Path = REPO_ROOT) -> str:
    """Returns the set-up cell's code for the lesson `stem`."""
    sha256, text = payload(stem, root)
    replacements = {
        "__TITLE__": TITLE,
        "__VERSION__": course_version(root),
        "__SOURCE_ENV_VAR__": SOURCE_ENV_VAR,
        "__CACHE_ENV_VAR__": CACHE_ENV_VAR,
        "__SHA256__": sha256,
        "__BACKEND__": "BACKEND" if has_backend_parameter else '"auto"',
        "__REQUIREMENTS__": _dict_lines(course_requirements(stem, root)),
        "__PAYLOAD__": text,  # Last: base85 text could hold a token's characters.
    }
    code = TEMPLATE
    for token, value in replacements.items():
        code = code.replace(token, value)
    return code
