"""Data sources: the embedded dataset, a local folder, flower_photos, or a `gs://` glob."""

from __future__ import annotations

import dataclasses
import glob
import os
from pathlib import Path
from typing import TYPE_CHECKING

from utils import data, errors, readable_images

if TYPE_CHECKING:
    pass

FLOWER_PHOTOS_URL = (
    "https://storage.googleapis.com/download.tensorflow.org/example_images/flower_photos.tgz"
)
_EXPECTED = (
    'Expected "embedded", "flower_photos", a local folder laid out as <folder>/<class>/*.jpg '
    '(or .jpeg, .png), or a glob such as "gs://my-bucket/flowers/*/*.jpg".'
)


@dataclasses.dataclass(frozen=True)
class ImageSource:
    """Where the images are, resolved from the `DATA_SOURCE` parameter.

    Attributes:
        name: the parameter as given.
        pattern: where the images are, as a glob: the `gs://` glob given, or
            `<folder>/*/*` for a local folder. Use `paths`: a local folder's path is never
            used as a glob (it may hold `[`, `*` or `?`).
        class_names: the class folder names, sorted; a label is an index into them.
        num_images: the number of image files, `len(paths)`.
        is_remote: True for real cloud storage (`gs://`), where no latency is simulated.
        empty_class_folders: folders beside the class folders that hold no images; they
            are not classes (a class needs images to learn from). Local folders only.
        paths: every image file, sorted: `.jpg`, `.jpeg` and `.png` in any letter case.
        not_images: the other files in the class folders, listed and not read.
        subfolders: folders (and links) inside the class folders, named and not read: a
            label is the folder just above the photo (lab 1's TODO reads it from the path).
    """

    name: str
    pattern: str
    class_names: tuple[str, ...]
    num_images: int
    is_remote: bool
    empty_class_folders: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    not_images: tuple[str, ...] = ()
    subfolders: tuple[str, ...] = ()

    @property
    def match_pattern(self) -> str:
        """`pattern` for engines that match files by glob (Beam's `fileio.MatchFiles`).

        A local folder's path is escaped (`glob.escape`), so that a `[` in a folder name
        matches itself; the glob also matches files that are not images: keep those for
        which `is_image_file` is true. A `gs://` glob is returned as given.
        """
        if self.is_remote:
            return self.pattern
        root = Path(self.pattern).parent.parent
        return os.path.join(glob.escape(str(root)), "*", "*")

    def describe(self) -> str:
        """Says what the source is, and what in it is not read.

        Returns:
            One line (images, classes, where), plus warning lines for empty class folders
            and files that are not images.
        """
        where = "real cloud storage" if self.is_remote else "local disk"
        classes = ", ".join(self.class_names)
        text = f"{self.num_images} images in {len(self.class_names)} classes ({classes}), {where}"
        if self.empty_class_folders:
            empty = ", ".join(self.empty_class_folders)
            text += f"\nWARNING: empty class folder(s), not used as classes: {empty}"
        if self.not_images:
            text += (
                f"\nNot read: {len(self.not_images)} file(s) in the class folders are not "
                f"{'/'.join(readable_images.IMAGE_EXTENSIONS)} images:"
            )
            text += "".join(f"\n  {path}" for path in self.not_images)
        return text + self.subfolders_not_read()

    def subfolders_not_read(self) -> str:
        """Names the folders inside class folders, whose photos are not read.

        Returns:
            Lines, each starting with a newline; "" if there are none.
        """
        if not self.subfolders:
            return ""
        return (
            f"\nNot read: {len(self.subfolders)} folder(s) inside the class folders (only "
            "<class>/<file> is read; move their photos up into the class folder):"
            + "".join(f"\n  {folder}" for folder in self.subfolders)
        )


def resolve_source(
    source: str,
    *,
    num_images: int = data.DEFAULT_NUM_IMAGES,
    seed: int = data.DEFAULT_SEED,
    cache_dir: str | os.PathLike | None = None,
    flower_photos_url: str = FLOWER_PHOTOS_URL,
) -> ImageSource:
    """Turns a `DATA_SOURCE` parameter into an `ImageSource`.

    Args:
        source: "embedded" (generated here, no network), "flower_photos" (the public
            archive, downloaded once and cached; needs the network the first time), a local
            folder laid out as `<folder>/<class>/*.jpg` (relative to the working
            directory, `~` expanded), or a `gs://` glob of JPEG files.
        num_images: size of the embedded dataset; ignored for the other sources.
        seed: seed of the embedded dataset.
        cache_dir: where downloads and generated data are cached.
        flower_photos_url: where to download flower_photos from.

    Returns:
        The resolved `ImageSource`.

    Raises:
        ValueError: in one line, if `source` is unknown, a file, no folder (its absolute
            path is named), matches no images, or is on a network that cannot be reached.

    Example:
        source = sources.resolve_source("embedded", num_images=500)
        print(source.describe())
    """
    if not isinstance(source, str) or not source:
        raise ValueError(f"`source` must be a non-empty string. {_EXPECTED} Received: {source!r}")
    if source == "embedded":
        root = data.make_flowers_dataset(num_images, seed=seed, cache_dir=cache_dir)
        return _from_local_folder(source, root)
    if source == "flower_photos":
        return _from_local_folder(source, download_flower_photos(flower_photos_url, cache_dir))
    if source.startswith("gs://"):
        return _from_gcs_glob(source)
    if "://" in source:
        raise ValueError(f"Unknown data source {source!r}: only gs:// is supported. {_EXPECTED}")
    folder = Path(source).expanduser()  # "~/photos" as a shell reads it.
    # The absolute path, where the one given is not: which folder was looked for.
    where = "" if str(folder.absolute()) == source else f" ({folder.absolute()})"
    if folder.is_file():
        raise ValueError(
            f"Data source {source!r} is a file, not a folder{where}. Give the folder that "
            "holds one folder of images per class: <folder>/<class>/*.jpg."
        )
    if not folder.is_dir():
        raise ValueError(f"Unknown data source {source!r}: no such folder{where}. {_EXPECTED}")
    return _from_local_folder(source, folder)


def _from_local_folder(name: str, root: Path) -> ImageSource:
    """Lists every file of every class folder (no glob: the path may hold `[` or `*`)."""
    root = root.resolve()
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    paths, not_images, empty, subfolders = [], [], [], []
    for folder in folders:
        files = sorted(p for p in folder.iterdir() if p.is_file())
        subfolders += [_subfolder(p) for p in sorted(folder.iterdir()) if p.is_dir()]
        images = [str(p) for p in files if readable_images.is_image_file(p)]
        not_images += [str(p) for p in files if not readable_images.is_image_file(p)]
        paths += images
        if not images:
            empty.append(folder.name)
    class_names = tuple(sorted({Path(p).parent.name for p in paths}))
    if not paths:
        raise ValueError(
            f"Data source {name!r}: no .jpg, .jpeg or .png files in class folders under {root}. "
            f"{_EXPECTED}"
        )
    if len(class_names) < 2:
        raise ValueError(
            f"Data source {name!r}: only one class folder with images ({class_names[0]}) under "
            f"{root}; a classifier needs at least 2 classes to learn anything. Add a folder of "
            "images for each other class."
        )
    pattern = str(root / "*" / "*")
    return ImageSource(
        name, pattern, class_names, len(paths), False, tuple(empty), tuple(paths),
        tuple(not_images), tuple(subfolders),
    )  # fmt: skip


def _subfolder(folder: Path) -> str:
    """Names a folder inside a class folder: its images, found without following links."""
    if folder.is_symlink():
        return f"{folder} (a link to {folder.resolve()}, not followed)"
    found = sum(readable_images.is_image_file(f) for _, _, files in os.walk(folder) for f in files)
    return f"{folder} ({found} image(s))"


def _from_gcs_glob(pattern: str) -> ImageSource:
    import tensorflow as tf  # Imported here: the other sources do not need TensorFlow.

    os.environ.setdefault("NO_GCE_CHECK", "true")  # Off Google Cloud, skip the metadata probe.
    try:
        paths = tf.io.gfile.glob(pattern)
    except tf.errors.OpError as error:
        raise ValueError(gcs_failure_message(pattern, errors.error_message(error))) from None
    if not paths:
        raise ValueError(f"Data source {pattern!r} matched no files. {_EXPECTED}")
    paths = sorted(paths)
    class_names = tuple(sorted({p.rsplit("/", 2)[-2] for p in paths}))
    if len(class_names) < 2:
        raise ValueError(
            f"Data source {pattern!r}: its files are in one class folder ({class_names[0]}); a "
            "classifier needs at least 2 classes to learn anything."
        )
    return ImageSource(pattern, pattern, class_names, len(paths), True, paths=tuple(paths))


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
        root = sources.download_flower_photos()
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
