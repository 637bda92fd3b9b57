"""The sources on the network: a `gs://` glob listed, the flower_photos archive downloaded.

Either one's failure is one line: why (offline, not signed in, not allowed) and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from utils import errors, readable_images
from utils.lab import data

FLOWER_PHOTOS_URL = (
    "https://storage.googleapis.com/download.tensorflow.org/example_images/flower_photos.tgz"
)

# What to do when a source on the network cannot be reached.
_OFFLINE_NEXT_STEP = (
    'Without the network, set DATA_SOURCE = "embedded" (generated here, no download) or '
    "a local folder of your photos (<folder>/<class>/*.jpg)."
)
_NETWORK_ERRORS = (
    "Could not resolve host",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Connection refused",
    "Network is unreachable",
    "timed out",
    "Timeout was reached",
    "Couldn't connect",
)


def list_gcs_glob(pattern: str) -> list[str]:
    """Lists the files a `gs://` glob matches, sorted.

    Args:
        pattern: the glob, such as "gs://my-bucket/flowers/*/*.jpg".

    Returns:
        The matching paths; none if nothing matches.

    Raises:
        ValueError: in one line (`gcs_failure_message`), if the listing fails.
    """
    import tensorflow as tf  # Imported here: the other sources do not need TensorFlow.

    os.environ.setdefault("NO_GCE_CHECK", "true")  # Off Google Cloud, skip the metadata probe.
    try:
        paths = tf.io.gfile.glob(pattern)
    except tf.errors.OpError as error:
        raise ValueError(gcs_failure_message(pattern, errors.error_message(error))) from None
    return sorted(paths)


def gcs_failure_message(pattern: str, error: str) -> str:
    """Says, in one line, why a `gs://` source could not be listed and what to do.

    Args:
        pattern: the `gs://` glob given.
        error: the first line of TensorFlow's error.

    Returns:
        The message: offline, not signed in or not allowed, or the error as it came.
    """
    sign_in = (
        "sign in with `gcloud auth application-default login` (on Colab: "
        "`from google.colab import auth; auth.authenticate_user()`)"
    )
    if any(sign in error for sign in _NETWORK_ERRORS):
        return (
            f"Cannot reach {pattern}: this machine is offline ({_network_reason(error)}). "
            f"{_OFFLINE_NEXT_STEP} For your own bucket, go online and {sign_in}."
        )
    if any(code in error for code in ("401", "403", "Permission", "credentials", "Unauth")):
        return (
            f"Cannot list {pattern}: not allowed ({error[:120]}). To read your own bucket, "
            f"{sign_in}; a public bucket may be closed (gs://flowers-public is). "
            f"{_OFFLINE_NEXT_STEP}"
        )
    return f"Cannot list {pattern}: {error[:200]}. {_OFFLINE_NEXT_STEP}"


def _network_reason(error: str) -> str:
    """The known network error named in `error`."""
    return next(sign for sign in _NETWORK_ERRORS if sign in error)


def download_flower_photos(
    url: str = FLOWER_PHOTOS_URL, cache_dir: str | os.PathLike | None = None
) -> Path:
    """Downloads and unpacks the flower_photos archive once; returns its image root.

    Args:
        url: the archive's address.
        cache_dir: the cache folder; `data.default_cache_dir()` if None.

    Returns:
        The folder that holds the class folders (daisy, dandelion, ...).

    Raises:
        ValueError: if the download fails (offline: one line with what to do instead), or
            the archive holds no class folders of images.

    Example:
        root = remote_sources.download_flower_photos()
    """
    import keras  # Imported here: only this source needs it.

    cache = Path(cache_dir) if cache_dir is not None else data.default_cache_dir()
    extracted = cache / "datasets" / "flower_photos"
    root = _find_image_root(extracted)
    if root is None:
        cache.mkdir(parents=True, exist_ok=True)  # Else Keras falls back to /tmp/.keras.
        try:
            keras.utils.get_file("flower_photos", origin=url, extract=True, cache_dir=str(cache))
        except Exception as error:  # Keras wraps every download error in a bare Exception.
            text = errors.first_line(error)
            reason = _network_reason(text) if any(s in text for s in _NETWORK_ERRORS) else text
            raise ValueError(
                f"Cannot download flower_photos from {url}: {reason[:200]}. "
                f"{_OFFLINE_NEXT_STEP} Online, it is downloaded once and then read from "
                f"{cache / 'datasets'}."
            ) from None
        root = _find_image_root(extracted)
    if root is None:
        raise ValueError(
            f"The archive from {url} holds no <class>/*.jpg folders in {extracted}. Check "
            f"that the URL is the flower_photos archive; if it is, the download may have been "
            f"cut short: delete what was downloaded under {cache / 'datasets'} and run this again."
        )
    return root


def _find_image_root(folder: Path) -> Path | None:
    """Returns `folder` or the first folder below it whose subfolders hold JPEGs."""
    if not folder.is_dir():
        return None
    for candidate in [folder, *sorted(p for p in folder.rglob("*") if p.is_dir())]:
        if any(readable_images.is_image_file(p) for p in candidate.glob("*/*")):
            return candidate
    return None
