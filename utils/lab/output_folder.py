"""The output folder: a set of shards appears there whole, beside the user's files, or not at all.

As TensorFlow Datasets' `incomplete_dir`: written in a folder of its own, then moved in whole.
"""

import contextlib
from collections.abc import Iterator

import tensorflow as tf

from utils.shard_files import INCOMPLETE_FOLDER, shard_record_count
from utils.sidecar import METADATA_FILE, read_json

_REPLACED = "flowers_tfrecords.replaced.json"  # The previous sidecar, while its set is replaced.


@contextlib.contextmanager
def incomplete_dir(output_dir: str) -> Iterator[str]:
    """Yields a new folder, inside `output_dir`, to write a set of shards in, its sidecar last.

    When the block ends, the previous set's files (as its sidecar lists them) make way, sidecar
    first, and the set is moved in, sidecar last; if it raises, the new folder is deleted.

    Args:
        output_dir: the shards' folder, as typed; created if needed. A killed run's set there
            is finished first (or deleted, if its sidecar was not written).

    Yields:
        The new folder, `INCOMPLETE_FOLDER` in `output_dir`.

    Raises:
        ValueError: if `output_dir` holds a file a set could replace that no sidecar lists.
    """
    folder = f"{output_dir}/{INCOMPLETE_FOLDER}"
    names = set(tf.io.gfile.listdir(output_dir) if tf.io.gfile.isdir(output_dir) else [])
    names -= _listed(output_dir) | _listed(folder, _REPLACED)  # A killed run's too.
    theirs = [n for n in names if n == METADATA_FILE or shard_record_count(n) is not None]
    if theirs:
        raise ValueError(
            f"`output_dir` {output_dir} holds {', '.join(sorted(theirs))}, which no sidecar or "
            "unfinished run of the course lists, so the course did not write it; a conversion "
            "would overwrite it. Move it, or choose another output_dir."
        )
    _finish(folder, output_dir)
    try:
        tf.io.gfile.makedirs(folder)
        yield folder
    except BaseException:
        if tf.io.gfile.isdir(folder):
            tf.io.gfile.rmtree(folder)
        raise
    _finish(folder, output_dir)


def _finish(folder: str, output_dir: str) -> None:
    """Puts a finished set in the previous set's place (going on after a kill); else deletes it."""
    if tf.io.gfile.exists(f"{folder}/{METADATA_FILE}"):
        if tf.io.gfile.exists(f"{output_dir}/{METADATA_FILE}"):  # The previous set: unfinished.
            tf.io.gfile.rename(f"{output_dir}/{METADATA_FILE}", f"{folder}/{_REPLACED}", True)
        new = _listed(folder)
        for name in sorted(_listed(folder, _REPLACED) - new):
            if tf.io.gfile.exists(f"{output_dir}/{name}"):
                tf.io.gfile.remove(f"{output_dir}/{name}")
        for name in [*sorted(new - {METADATA_FILE}), METADATA_FILE]:
            if tf.io.gfile.exists(f"{folder}/{name}"):
                tf.io.gfile.rename(f"{folder}/{name}", f"{output_dir}/{name}", overwrite=True)
    if tf.io.gfile.isdir(folder):
        tf.io.gfile.rmtree(folder)


def _listed(folder: str, *sidecars: str) -> set[str]:
    """The files that course sidecars in `folder` list, and the sidecars (`METADATA_FILE` too)."""
    names = set()
    for sidecar in (METADATA_FILE, *sidecars):
        shards = (read_json(f"{folder}/{sidecar}") or {}).get("shards")
        names |= set(shards) | {sidecar} if isinstance(shards, dict) else set()
    return {name for name in names if "/" not in name and name not in ("", ".", "..")}


def start_new_set(output_dir: str) -> list[str]:
    """Finishes a killed run's set in `output_dir`, for lesson 6's Beam run, which writes in place.

    Args:
        output_dir: the shards' folder.

    Returns:
        The previous set's files there (which the Beam run deletes first), sorted.
    """
    _finish(f"{output_dir}/{INCOMPLETE_FOLDER}", output_dir)
    return sorted(n for n in _listed(output_dir) if tf.io.gfile.exists(f"{output_dir}/{n}"))
