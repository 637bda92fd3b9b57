"""Photo folders the tests make: files written under a root, and every file's hash after a run."""

import hashlib
from pathlib import Path


def make_folder(root: Path, files: dict[str, bytes]) -> Path:
    """Writes `files` ({"class/name.jpg": bytes}) under `root`; returns `root`."""
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


def file_hashes(root: Path) -> dict[str, str]:
    """Every file under `root` (hidden ones too) by its relative path, with its hash."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
