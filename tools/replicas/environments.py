"""The replicas' environments: a list read, its Python found, its venv built once and cached.

A list (`<name>.txt` beside this module) is pip requirements with a header of `# key: value`
lines: `python` (the platform's version, e.g. 3.13), `platform`, `source` and `date`. Its
venv is cached under the cache folder as `<name>-<sha12>/` (of its Python and requirement
lines), with a file `ready` written last: a changed list builds a new venv (the old one of
that name is removed). uv builds it (`uv venv --seed`, then `uv pip install`), an order of
magnitude faster than pip for the same `pip freeze` (docs/replicas.md); the venv keeps pip,
which the labs' set-up installs with, as on the platforms.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

LISTS = Path(__file__).parent
CACHE_ENV_VAR = "TPU_SPEED_PIPELINES_REPLICAS"
HEADER_KEYS = ("platform", "python", "source", "date")


class ReplicaUnbuildable(RuntimeError):
    """A replica cannot be built here; the message is one line naming what is missing."""


@dataclasses.dataclass(frozen=True)
class Replica:
    """One platform's replica: its name, header fields and pinned requirements."""

    name: str
    header: dict[str, str]
    requirements: tuple[str, ...]
    key: str  # SHA-256 of its Python and requirements, 12 hex digits: the cache key.

    @property
    def python(self) -> str:
        return self.header["python"]


def read_replica(path: Path) -> Replica:
    """Reads a replica's list.

    Raises:
        ValueError: naming the file and the header key it lacks.
    """
    text = path.read_text()
    header = dict(re.findall(r"^# (\w+): (.+)$", text, re.MULTILINE))
    for key in HEADER_KEYS:
        if key not in header:
            raise ValueError(f"{path}: the header has no '# {key}: ...' line")
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    requirements = tuple(line for line in lines if line)
    keyed = "\n".join([header["python"], *requirements])  # A comment changed builds nothing.
    key = hashlib.sha256(keyed.encode()).hexdigest()[:12]
    return Replica(path.stem, header, requirements, key)


def replicas(folder: Path = LISTS) -> list[Replica]:
    """Returns every replica whose list is in `folder`, by name."""
    return [read_replica(path) for path in sorted(folder.glob("*.txt"))]


def cache_folder() -> Path:
    """Returns where the venvs are cached: `$TPU_SPEED_PIPELINES_REPLICAS`, else ~/.cache/...

    CI runs on the same machine again, so the default, in the home folder, is found again.
    """
    default = Path.home() / ".cache" / "tpu_speed_pipelines" / "replicas"
    return Path(os.environ.get(CACHE_ENV_VAR) or default)


def find_python(version: str, pyenv_root: Path | None = None) -> Path:
    """Returns a Python `version` ("3.13"): pyenv's newest 3.13.x, else `python3.13` on PATH.

    Raises:
        ReplicaUnbuildable: if there is none.
    """
    root = pyenv_root or Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [p for p in (root / "versions").glob(f"{version}.*") if (p / "bin/python").exists()]
    patch = lambda p: int(p.name.split(".")[2]) if p.name.split(".")[2].isdigit() else -1  # noqa: E731
    if found:
        return max(found, key=patch) / "bin" / "python"
    on_path = shutil.which(f"python{version}")
    if on_path:
        return Path(on_path)
    raise ReplicaUnbuildable(f"no Python {version} here (pyenv install {version})")


def unbuildable_reason(replica: Replica, uv_stderr: str) -> str:
    """Returns the one line that says why uv could not build `replica`, naming the package."""
    said = " ".join(uv_stderr.split())  # uv wraps its lines.
    missing = re.findall(r"and you require (\S+?)(?:,| and|$)", said)  # No version, no wheel.
    if missing:
        return (
            f"{replica.name}: cannot be built here: no {missing[0]} for Python "
            f"{replica.python} on the package index"
        )
    lines = [line.strip() for line in uv_stderr.splitlines() if line.strip()]
    return f"{replica.name}: cannot be built here: uv failed ({(lines or ['no message'])[-1]})"


def build(replica: Replica, cache: Path, python: Path | None = None) -> Path:
    """Returns the replica's venv, building it first if the cache has none for its list.

    Raises:
        ReplicaUnbuildable: one line naming the package (or Python) that cannot be had.
    """
    folder = cache / f"{replica.name}-{replica.key}"
    if (folder / "ready").is_file():
        return folder
    try:
        python = python or find_python(replica.python)
    except ReplicaUnbuildable as error:
        raise ReplicaUnbuildable(f"{replica.name}: cannot be built here: {error}") from None
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob(f"{replica.name}-*"):  # Another list's venv, or a build cut short.
        shutil.rmtree(old)
    uv = [sys.executable, "-m", "uv", "--quiet"]
    subprocess.run([*uv, "venv", "--seed", "--python", str(python), str(folder)], check=True)
    requirements = folder / "requirements.txt"
    requirements.write_text("\n".join(replica.requirements) + "\n")
    result = subprocess.run(
        [
            *uv,
            "pip",
            "install",
            "--python",
            str(folder / "bin" / "python"),
            "-r",
            str(requirements),
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(folder)
        raise ReplicaUnbuildable(unbuildable_reason(replica, result.stderr))
    (folder / "ready").write_text(f"{replica.header['source']}\n")
    return folder


def working_copy(venv: Path, target: Path) -> Path:
    """Returns a copy of `venv` at `target` made of hard links: what a run installs or
    removes there leaves the cached venv as it was (pip replaces files, never edits them)."""
    subprocess.run(["cp", "-al", str(venv), str(target)], check=True)
    return target
