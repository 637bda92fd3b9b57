"""The output folder's safety: a conversion deletes or overwrites only files the course wrote.

While a set is being written, a manifest (`MANIFEST_FILE`) lists every file the run may
create; a conversion deletes only files that a sidecar or a manifest lists, never a file
by its name alone.
"""

from __future__ import annotations

import errno as _errno
import os
import re
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from utils import shard_files, sources
from utils.shard_files import (
    MANIFEST_FILE,
    METADATA_FILE,
    SHARD_PREFIX,
    SHARD_SUFFIX,
    TEMPORARY_SUFFIX,
)

# Names a conversion writes: shards, their temporary names, the sidecar and the manifest.
_COURSE_FILE = re.compile(
    rf"^({SHARD_PREFIX}\d+(-\d+)?{re.escape(SHARD_SUFFIX)}|{re.escape(METADATA_FILE)}|"
    rf"{re.escape(MANIFEST_FILE)})({re.escape(TEMPORARY_SUFFIX)})?$"
)


def clean_up_after(output_dir: str, manifest: Manifest | None, problem: tuple) -> str:
    """Deletes every file the manifests list after a failed write; returns the one-line message.

    The previous set's files go too (the run had begun replacing them), so that the next
    run finds the folder as the course found it first, with only the user's own files.

    Args:
        output_dir: the shards' folder.
        manifest: the failed run's manifest; None if it could not be written.
        problem: (what happened, what to do), from `output_folder_problem`.

    Returns:
        "Cannot write the shards in <output_dir>: <what happened>; <what was cleaned>. <what to do>"
    """
    listed = files_of_previous_set(output_dir) | set(manifest.files if manifest else ())
    deleted, left = _delete_quietly(output_dir, listed)
    written = set() if manifest is None else set(manifest.files) - set(manifest.previous)
    written.add(MANIFEST_FILE)  # This run's manifest, when it could be written.
    left_of_this_run = [name for name in left if name in written]
    if left_of_this_run:
        names = ", ".join(left_of_this_run[:3])
        cleaned = f"{len(left_of_this_run)} file(s) it wrote could not be deleted ({names})"
    elif manifest is not None and any(name in written for name in deleted):
        cleaned = "the files this run wrote there are deleted, so the next run starts clean"
    else:
        cleaned = "nothing of this run is left there"
    what_happened, what_to_do = problem
    return f"Cannot write the shards in {output_dir}: {what_happened}; {cleaned}. {what_to_do}"


class OutputFolderError(OSError):
    """The output folder cannot take the shards (disk full, read-only); one line says what to do."""


def output_folder_problem(error: BaseException) -> tuple[str, str] | None:
    """Says what went wrong in an output folder, and what to do, if a write error says so.

    Args:
        error: an error raised while writing (TensorFlow's or Python's).

    Returns:
        (what happened, what to do), or None when the error is not about the folder.
    """
    errno_value = getattr(error, "errno", None)
    text = str(getattr(error, "message", "") or error)
    elsewhere = (
        "Set OUTPUT_DIR to a folder you can write to (None: the course cache), then run it again."
    )
    if (
        isinstance(error, tf.errors.ResourceExhaustedError)
        or errno_value in (_errno.ENOSPC, _errno.EDQUOT)
        or "No space left on device" in text
    ):
        return (
            "the disk is full (No space left on device)",
            "Free some space there, or set OUTPUT_DIR to a folder on a disk with room, "
            "then run it again.",
        )
    if errno_value == _errno.EROFS or "Read-only file system" in text:
        return "the folder is read-only (Read-only file system)", elsewhere
    if (
        isinstance(error, tf.errors.PermissionDeniedError)
        or errno_value in (_errno.EACCES, _errno.EPERM)
        or "Permission denied" in text
    ):
        return "you are not allowed to write there (Permission denied)", elsewhere
    return None


def _delete_quietly(output_dir: str, names: set[str]) -> tuple[list[str], list[str]]:
    """Deletes the listed files that are there, the manifest last; returns (deleted, left)."""
    deleted, left = [], []
    for name in sorted(names - {MANIFEST_FILE}) + [MANIFEST_FILE]:
        path = f"{output_dir}/{name}"
        try:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
                deleted.append(name)
        except (tf.errors.OpError, OSError):
            left.append(name)
    return deleted, left


def check_output_dir(source: sources.ImageSource, output_dir: str | Path) -> str:
    """Checks that a conversion may write in a folder.

    Args:
        source: the images to convert.
        output_dir: the folder the shards would go to.

    Returns:
        `output_dir` as a string, without a final "/".

    Raises:
        ValueError: if `output_dir` is inside the source's images, or holds a file that a
            conversion would overwrite although no sidecar or manifest of the course lists it.
    """
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise ValueError(f"`output_dir` must be a folder path. Received: {output_dir!r}")
    output_dir = as_typed(output_dir)
    if "://" not in output_dir and Path(output_dir).is_file():
        raise ValueError(
            f"`output_dir` {Path(output_dir).absolute()} is a file, not a folder: give a "
            "folder for the shards (it is created if needed)."
        )
    image_root = source.pattern.rsplit("/", 2)[0]
    if f"{output_dir}/".startswith(f"{image_root}/"):
        raise ValueError(
            f"`output_dir` {output_dir} is inside the source's image folder {image_root}: "
            "write the shards somewhere else."
        )
    ours = files_of_previous_set(output_dir)
    theirs = [
        n for n in shard_files.list_folder(output_dir) if _COURSE_FILE.match(n) and n not in ours
    ]
    if theirs:
        raise ValueError(
            f"`output_dir` {output_dir} holds {', '.join(sorted(theirs))}, which no sidecar or "
            "manifest of the course lists, so the course did not write it; a conversion would "
            "overwrite it. Move it, or choose another output_dir."
        )
    return output_dir


def as_typed(folder: str | Path) -> str:
    """Returns a folder path as a shell reads it: `~` expanded, without a final "/".

    Args:
        folder: a local folder or a `gs://` folder.

    Returns:
        The path as a string; a `gs://` path is kept as given.
    """
    folder = str(folder)
    if "://" not in folder:
        folder = os.path.expanduser(folder)
    return folder.rstrip("/") or folder


def files_of_previous_set(output_dir: str) -> set[str]:
    """Returns the names of the files the course wrote in `output_dir`, by its own lists.

    They are the shards the sidecar lists and the sidecar itself, and every file an
    unfinished run's manifest lists (its temporary files, its shards, the previous set's).
    Nothing else is ever deleted or overwritten.

    Args:
        output_dir: the shards' folder.

    Returns:
        The file names; a name with a "/" is never one of them.
    """
    names = set()
    metadata = shard_files.read_json(f"{output_dir}/{METADATA_FILE}")
    if metadata is not None and isinstance(metadata.get("shards"), dict):
        names |= set(metadata["shards"]) | {METADATA_FILE}
    manifest = shard_files.read_json(f"{output_dir}/{MANIFEST_FILE}")
    if manifest is not None and isinstance(manifest.get("files"), list):
        names |= set(manifest["files"]) | {MANIFEST_FILE}
    names.add(f"{METADATA_FILE}{TEMPORARY_SUFFIX}")
    names.add(f"{MANIFEST_FILE}{TEMPORARY_SUFFIX}")
    # A name with a "/" is not a file of this folder: never follow it.
    return {name for name in names if "/" not in name and name not in ("", ".", "..")}


def start_new_set(output_dir: str) -> list[str]:
    """Creates `output_dir` and marks the set there unfinished; returns the previous set's files.

    The previous set's files (as its sidecar or an unfinished run's manifest lists them)
    go into a new manifest before the sidecar is removed, so that a run stopped at any
    point leaves a list of every file the course wrote there.

    Args:
        output_dir: the shards' folder, created if needed.

    Returns:
        The names of the previous set's files that are there, sorted.
    """
    tf.io.gfile.makedirs(output_dir)
    previous = sorted(
        name
        for name in files_of_previous_set(output_dir)
        if name not in (METADATA_FILE, MANIFEST_FILE) and tf.io.gfile.exists(f"{output_dir}/{name}")
    )
    shard_files.write_json(f"{output_dir}/{MANIFEST_FILE}", {"files": previous})
    metadata = f"{output_dir}/{METADATA_FILE}"
    if tf.io.gfile.exists(metadata):
        tf.io.gfile.remove(metadata)
    return previous


class Manifest:
    """The list of files a conversion in progress may have written, kept on disk."""

    def __init__(self, output_dir: str, previous: Sequence[str]):
        """Starts the list with the previous set's files (`start_new_set`).

        Args:
            output_dir: the shards' folder.
            previous: the previous set's file names there.
        """
        self.output_dir = output_dir
        self.previous = list(previous)
        self.files = list(previous)

    def add(self, names: Sequence[str]) -> None:
        """Lists `names` (before they are written, where they can be known).

        Args:
            names: file names in `output_dir`.
        """
        self.files += [name for name in names if name not in self.files]
        shard_files.write_json(f"{self.output_dir}/{MANIFEST_FILE}", {"files": self.files})

    def _remove(self, names) -> None:
        for name in names:
            path = f"{self.output_dir}/{name}"
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)

    def delete_previous(self, keep: Sequence[str]) -> None:
        """Deletes the previous set's files and this run's temporary files, except `keep`.

        Args:
            keep: file names not to delete (the shards this run wrote).
        """
        temporary = [name for name in self.files if name.endswith(TEMPORARY_SUFFIX)]
        self._remove(sorted(set(self.previous + temporary) - set(keep)))

    def delete_all(self) -> None:
        """Deletes every file listed, then the manifest: an empty folder of the course's."""
        self._remove(self.files)
        self.finish()

    def finish(self) -> None:
        """Deletes the manifest: the set is finished (or gone)."""
        self._remove([MANIFEST_FILE])
