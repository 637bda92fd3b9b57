"""Data sources: the embedded dataset, a local folder, flower_photos, or a `gs://` glob.

The two on the network are downloaded or listed by `remote_sources`.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from pathlib import Path

from utils import readable_images
from utils.lab import data, remote_sources

_EXPECTED = (
    'Expected "embedded", "flower_photos", a local folder laid out as <folder>/<class>/*.jpg '
    '(or .jpeg, .png, .heic, .avif), or a glob such as "gs://my-bucket/flowers/*/*.jpg".'
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
        paths: every image file, sorted (a list): `.jpg`, `.jpeg`, `.png`, `.heic`, `.heif`
            and `.avif` in any letter case (`readable_images.is_image_file`).
        not_images: the other files in the class folders, listed and not read.
        subfolders: folders (and links) inside the class folders, named and not read: a
            label is the folder just above the photo (lab 1's TODO reads it from the path).
        os_leftovers: files an operating system left (`readable_images.is_os_leftover`:
            `._*`, `.DS_Store`, files in `__MACOSX/`, `@eaDir/` ...), ignored: not images,
            not classes, only counted.
    """

    name: str
    pattern: str
    class_names: tuple[str, ...]
    num_images: int
    is_remote: bool
    empty_class_folders: tuple[str, ...] = ()
    # Lists, not tuples: `tf.data.Dataset.from_tensor_slices(source.paths)` reads a list as
    # one tensor of paths, a tuple as a structure of scalars (lab 1's TODO 1).
    paths: list[str] = dataclasses.field(default_factory=list, hash=False)
    not_images: list[str] = dataclasses.field(default_factory=list, hash=False)
    subfolders: tuple[str, ...] = ()
    os_leftovers: tuple[str, ...] = ()

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
            One line (images, classes, where), plus one line each for empty class
            folders, files that are not images and operating-system files ignored; each
            names a few and counts the rest.
        """
        from utils import display  # Imported here: listing a source needs no matplotlib.

        where = "real cloud storage" if self.is_remote else "local disk"
        classes = display.short_list(self.class_names)
        text = f"{self.num_images} images in {len(self.class_names)} classes ({classes}), {where}"
        if self.empty_class_folders:
            empty = ", ".join(self.empty_class_folders)
            text += f"\nWARNING: empty class folder(s), not used as classes: {empty}"
        if self.not_images:
            text += (
                f"\nNot read: {len(self.not_images):,} file(s) in the class folders are not "
                f"{'/'.join(readable_images.IMAGE_EXTENSIONS)} images: "
                + display.short_list(self._relative(self.not_images), max_listed=3, shown=3)
            )
        if self.os_leftovers:
            text += (
                f"\nIgnored: {len(self.os_leftovers):,} file(s) an operating system made "
                "(._* copies, .DS_Store, __MACOSX/, Thumbs.db ...), not photos."
            )
        return text + self.subfolders_not_read()

    def subfolders_not_read(self) -> str:
        """Names the folders inside class folders, whose photos are not read.

        Returns:
            One line, starting with a newline, naming a few and counting the rest; "" if
            there are none.
        """
        if not self.subfolders:
            return ""
        from utils import display

        return (
            f"\nNot read: {len(self.subfolders):,} folder(s) inside the class folders (only "
            "<class>/<file> is read; move their photos up into the class folder): "
            + display.short_list(self._relative(self.subfolders), max_listed=3, shown=3)
        )

    def _relative(self, paths: tuple[str, ...]) -> list[str]:
        """Local paths as `<class>/<name>...` under the source's folder; others as given."""
        if self.is_remote:
            return list(paths)
        root = str(Path(self.pattern).parent.parent) + os.sep
        return [path[len(root) :] if path.startswith(root) else path for path in paths]


def resolve_source(
    source: str,
    *,
    num_images: int = data.DEFAULT_NUM_IMAGES,
    seed: int = data.DEFAULT_SEED,
    cache_dir: str | os.PathLike | None = None,
    flower_photos_url: str = remote_sources.FLOWER_PHOTOS_URL,
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
        root = remote_sources.download_flower_photos(flower_photos_url, cache_dir)
        return _from_local_folder(source, root)
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
    entries = sorted(root.iterdir())
    leftovers = [str(p) for p in entries if readable_images.is_os_leftover(p)]
    leftovers = [f for p in leftovers for f in _files_in(Path(p))]
    folders = [
        p
        for p in entries
        if p.is_dir() and not p.name.startswith(".") and not readable_images.is_os_leftover(p)
    ]
    paths, not_images, empty, subfolders = [], [], [], []
    for folder in folders:
        inside = sorted(folder.iterdir())
        leftovers += [f for p in inside if readable_images.is_os_leftover(p) for f in _files_in(p)]
        inside = [p for p in inside if not readable_images.is_os_leftover(p)]
        files = [p for p in inside if p.is_file()]
        subfolders += [_subfolder(p) for p in inside if p.is_dir()]
        images = [str(p) for p in files if readable_images.is_image_file(p)]
        not_images += [str(p) for p in files if not readable_images.is_image_file(p)]
        paths += images
        if not images:
            empty.append(folder.name)
    class_names = tuple(sorted({Path(p).parent.name for p in paths}))
    if not paths:
        raise ValueError(_no_images_message(name, root, folders, not_images, subfolders))
    if len(class_names) < 2:
        raise ValueError(
            f"Data source {name!r}: only one class folder with images ({class_names[0]}) under "
            f"{root}; a classifier needs at least 2 classes to learn anything. Add a folder of "
            "images for each other class."
        )
    pattern = str(root / "*" / "*")
    return ImageSource(
        name,
        pattern,
        class_names,
        len(paths),
        False,
        tuple(empty),
        list(paths),
        list(not_images),
        tuple(subfolders),
        os_leftovers=tuple(leftovers),
    )


def _files_in(path: Path) -> list[str]:
    """`path` if it is a file (or a link), else every file under it, not following links."""
    if not path.is_dir() or path.is_symlink():
        return [str(path)]
    return sorted(str(Path(top) / f) for top, _, files in os.walk(path) for f in files)


def _no_images_message(
    name: str, root: Path, folders: list[Path], not_images: list[str], subfolders: list[str]
) -> str:
    """One line: the folder, what was found in it instead of images, and what to do."""
    from utils import display

    extensions = ", ".join(readable_images.IMAGE_EXTENSIONS)
    if not folders:
        files = [
            p.name for p in root.iterdir() if p.is_file() and not readable_images.is_os_leftover(p)
        ]
        images_here = sum(readable_images.is_image_file(f) for f in files)
        found = (
            f"no class folders, {images_here} image(s) directly in it"
            if images_here
            else f"no class folders and no images ({len(files)} other file(s))"
        )
        todo = "put each class's photos in a folder of its own: <folder>/<class>/<photo>"
    elif subfolders:
        found = (
            f"{len(folders)} class folder(s) whose photos are one level deeper: "
            + display.short_list(subfolders, max_listed=2, shown=2)
        )
        todo = "move the photos up into the class folders, or give the folder one level down"
    elif not not_images:
        names = display.short_list([f.name for f in folders])
        found = f"{len(folders)} class folder(s), all empty: {names}"
        todo = "copy the photos into the class folders"
    else:
        kinds = sorted({Path(p).suffix.lower() or Path(p).name for p in not_images})
        found = (
            f"{len(folders)} class folder(s) with {len(not_images)} file(s), none of them "
            f"{extensions} (found: {display.short_list(kinds, max_listed=5, shown=5)})"
        )
        todo = f"export the photos as JPEG or HEIC (extensions {extensions})"
    return f"Data source {name!r}: no images in {root}: {found}. What to do: {todo}. {_EXPECTED}"


def _subfolder(folder: Path) -> str:
    """Names a folder inside a class folder: its images, found without following links."""
    if folder.is_symlink():
        return f"{folder} (a link to {folder.resolve()}, not followed)"
    found = sum(
        readable_images.is_image_file(Path(top) / name)
        for top, _, names in os.walk(folder)
        for name in names
    )
    return f"{folder} ({found} image(s))"


def _from_gcs_glob(pattern: str) -> ImageSource:
    paths = remote_sources.list_gcs_glob(pattern)
    if not paths:
        raise ValueError(f"Data source {pattern!r} matched no files. {_EXPECTED}")
    class_names = tuple(sorted({p.rsplit("/", 2)[-2] for p in paths}))
    if len(class_names) < 2:
        raise ValueError(
            f"Data source {pattern!r}: its files are in one class folder ({class_names[0]}); a "
            "classifier needs at least 2 classes to learn anything."
        )
    return ImageSource(pattern, pattern, class_names, len(paths), True, paths=list(paths))
