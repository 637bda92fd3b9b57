"""The embedded "flowers" dataset: generated JPEGs in the original course's layout."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import json
import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from utils.lab import progress

CLASSES = ("daisy", "dandelion", "roses", "sunflowers", "tulips")
# Images per class in the public flower_photos archive (3,670 in all).
FLOWER_PHOTOS_CLASS_COUNTS = (633, 898, 641, 699, 799)
DEFAULT_NUM_IMAGES = sum(FLOWER_PHOTOS_CLASS_COUNTS)
DEFAULT_SEED = 42
MIN_SIDE, MAX_SIDE = 200, 500
CACHE_ENV_VAR = "TPU_SPEED_PIPELINES_CACHE"
_COMPLETE_MARKER = "dataset.json"
_GENERATOR_VERSION = 1

# Petal count, petal depth and centre size give each class its shape; colours are
# drawn from one shared palette so that no single pixel's colour gives the class away.
_CLASS_SHAPES = {
    "daisy": dict(petals=(13, 18), depth=(0.55, 0.7), centre=(0.18, 0.26), rings=0),
    "dandelion": dict(petals=(34, 44), depth=(0.12, 0.2), centre=(0.05, 0.1), rings=0),
    "roses": dict(petals=(5, 6), depth=(0.1, 0.18), centre=(0.0, 0.0), rings=5),
    "sunflowers": dict(petals=(7, 9), depth=(0.3, 0.45), centre=(0.42, 0.52), rings=0),
    "tulips": dict(petals=(3, 3), depth=(0.45, 0.6), centre=(0.0, 0.0), rings=0),
}


def default_cache_dir() -> Path:
    """Returns the folder that caches generated and downloaded data.

    Returns:
        `$TPU_SPEED_PIPELINES_CACHE` when set, else `~/.cache/tpu_speed_pipelines`
        (the folder may not exist yet).
    """
    return Path(os.environ.get(CACHE_ENV_VAR, Path.home() / ".cache" / "tpu_speed_pipelines"))


def class_counts(num_images: int) -> list[int]:
    """Splits `num_images` over the 5 classes in the proportions of flower_photos.

    Args:
        num_images: total number of images, at least 5.

    Returns:
        One count per class in `CLASSES` order; they add up to `num_images`.

    Raises:
        ValueError: if `num_images` is not an integer of at least 5.
    """
    if isinstance(num_images, bool) or not isinstance(num_images, int) or num_images < 5:
        raise ValueError(
            f"`num_images` must be an integer of at least 5 (one per class). "
            f"Received: num_images={num_images!r}"
        )
    shares = np.array(FLOWER_PHOTOS_CLASS_COUNTS) * num_images / DEFAULT_NUM_IMAGES
    counts = np.maximum(np.floor(shares).astype(int), 1)
    # Largest remainder first, so the counts add up exactly.
    for index in np.argsort(-(shares - np.floor(shares))):
        if counts.sum() >= num_images:
            break
        counts[index] += 1
    while counts.sum() > num_images:
        counts[np.argmax(counts)] -= 1
    return counts.tolist()


def render_flower(class_name: str, rng: np.random.Generator) -> np.ndarray:
    """Draws one image of a flower of `class_name`, of a random size and aspect ratio.

    Args:
        class_name: one of `CLASSES`; each class has its own flower shape.
        rng: the random generator: the same state draws the same image.

    Returns:
        A uint8 array (height, width, 3), each side from `MIN_SIDE` to `MAX_SIDE`.
    """
    shape = _CLASS_SHAPES[class_name]
    height, width = rng.integers(MIN_SIDE, MAX_SIDE + 1, size=2)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    palette = rng.uniform(0.05, 1.0, size=(4, 3)).astype(np.float32)
    background, petal, centre, shade = palette
    # A soft diagonal gradient behind the flower.
    gradient = (x / width + y / height)[..., None] / 2
    image = background * (0.6 + 0.4 * gradient) + shade * 0.25 * (1 - gradient)

    radius = rng.uniform(0.3, 0.45) * min(height, width)
    cy = height / 2 + rng.uniform(-0.12, 0.12) * height
    cx = width / 2 + rng.uniform(-0.12, 0.12) * width
    dy, dx = (y - cy) / radius, (x - cx) / radius
    distance = np.hypot(dy, dx)
    angle = np.arctan2(dy, dx) + rng.uniform(0, 2 * np.pi)

    num_petals = rng.integers(shape["petals"][0], shape["petals"][1] + 1)
    depth = rng.uniform(*shape["depth"])
    outline = 1 - depth * (0.5 - 0.5 * np.cos(num_petals * angle))
    if class_name == "tulips":
        # A cup: taller than wide, open at the top.
        outline = outline * (0.75 + 0.25 * np.abs(np.sin(angle)))
    flower = distance < outline
    petal_shading = 0.75 + 0.25 * np.cos(num_petals * angle)
    if shape["rings"]:
        # Rose petals wrap round the centre in a spiral.
        spiral = np.sin(2 * np.pi * (shape["rings"] * distance + angle / (2 * np.pi)))
        petal_shading = 0.6 + 0.4 * spiral
    image = np.where(flower[..., None], petal * petal_shading[..., None], image)

    centre_radius = rng.uniform(*shape["centre"])
    if centre_radius:
        seeds = 0.8 + 0.2 * np.sin(40 * distance) * np.sin(12 * angle)
        image = np.where((distance < centre_radius)[..., None], centre * seeds[..., None], image)

    noise = rng.normal(0, 0.03, size=image.shape).astype(np.float32)
    return (np.clip(image + noise, 0, 1) * 255).astype(np.uint8)


def _image_rng(seed: int, class_name: str, index: int) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}/{class_name}/{index}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _write_images(folder: Path, class_name: str, indices: range, seed: int) -> int:
    """Writes the JPEGs `indices` of one class into `folder / class_name`; returns bytes."""
    class_dir = folder / class_name
    class_dir.mkdir(parents=True, exist_ok=True)
    num_bytes = 0
    for index in indices:
        pixels = render_flower(class_name, _image_rng(seed, class_name, index))
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        (class_dir / f"{class_name}_{index:04d}.jpg").write_bytes(buffer.getvalue())
        num_bytes += buffer.tell()
    return num_bytes


def _dataset_root(cache: Path, num_images: int, seed: int) -> Path:
    return cache / f"flowers-embedded-v{_GENERATOR_VERSION}-n{num_images}-seed{seed}"


def is_cached(
    num_images: int, *, seed: int = DEFAULT_SEED, cache_dir: str | os.PathLike | None = None
) -> bool:
    """Whether `make_flowers_dataset(num_images, seed=seed)` would find it finished in the cache.

    Args:
        num_images: number of images in all.
        seed: seed of the generator.
        cache_dir: where datasets are cached; `default_cache_dir()` if None.

    Returns:
        True when the dataset is there and finished (an interrupted one is not).
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return (_dataset_root(cache, num_images, seed) / _COMPLETE_MARKER).exists()


def make_flowers_dataset(
    num_images: int = DEFAULT_NUM_IMAGES,
    *,
    seed: int = DEFAULT_SEED,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Generates the embedded flowers dataset once and returns its root folder.

    The root holds `<class>/<class>_NNNN.jpg` for the 5 classes of `CLASSES`, in the
    proportions of the public flower_photos archive. Images are 200-500 px a side. The same
    `num_images` and `seed` always give the same bytes; a finished dataset is reused from
    the cache, and an interrupted one is never mistaken for finished.

    Args:
        num_images: number of images in all (3,670 like flower_photos by default).
        seed: seed of the generator.
        cache_dir: where datasets are cached; `default_cache_dir()` if None.

    Returns:
        The dataset's root folder.

    Raises:
        ValueError: if `num_images` is less than 5 or `seed` is not an integer.
        OSError: if the finished dataset cannot be moved into the cache (another process
            finishing the same dataset first is not an error: its copy is used).

    Example:
        root = data.make_flowers_dataset(500)
        print(sorted(p.name for p in root.iterdir()))  # ['daisy', 'dandelion', ...]
    """
    counts = class_counts(num_images)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"`seed` must be an integer. Received: seed={seed!r}")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = _dataset_root(cache, num_images, seed)
    if (root / _COMPLETE_MARKER).exists():
        return root

    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=root.name + ".partial-", dir=cache))
    try:
        # "spawn", not fork: forking a process that runs JAX's (or TensorFlow's) threads can
        # deadlock, and JAX warns so in the notebook.
        spawn = multiprocessing.get_context("spawn")
        workers = os.cpu_count() or 1
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn) as pool:
            jobs = [
                pool.submit(
                    _write_images, staging, name, range(start, min(start + 50, count)), seed
                )
                for name, count in zip(CLASSES, counts, strict=True)
                for start in range(0, count, 50)
            ]
            num_bytes = sum(job.result() for job in progress.track(jobs, desc="Drawing flowers"))
        manifest = {"classes": list(CLASSES), "class_counts": counts, "seed": seed}
        manifest["num_bytes"] = num_bytes
        (staging / _COMPLETE_MARKER).write_text(json.dumps(manifest, indent=1))
        if root.exists() and not (root / _COMPLETE_MARKER).exists():
            shutil.rmtree(root)  # Left incomplete by an older version; start clean.
        try:
            staging.rename(root)
        except OSError:
            # Another process (a second notebook) drew the same dataset meanwhile: its copy,
            # which it may be reading, stays; this one is dropped.
            if not (root / _COMPLETE_MARKER).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


# The damaged inputs `make_damaged_dataset` adds: file name -> what is wrong with it.
DAMAGED_FILES = {
    "daisy/truncated.jpg": "unreadable: a JPEG cut off half way",
    "daisy/empty.jpg": "unreadable: an empty file",
    "roses/not_an_image.jpg": "unreadable: text with a .jpg name",
    "dandelion/grayscale.jpg": "readable: a one-channel (grayscale) JPEG",
    "sunflowers/cmyk.jpg": "readable: a four-channel CMYK JPEG",
    "tulips/png_named.jpg": "readable: a PNG file with a .jpg name",
}
EMPTY_CLASS_FOLDER = "lilies"


def make_damaged_dataset(folder: str | os.PathLike, *, images_per_class: int = 4) -> Path:
    """Writes a small dataset with every kind of bad input the conversion must survive.

    `folder` gets `images_per_class` good JPEGs in each class folder, the files of
    `DAMAGED_FILES` (three unreadable, three readable only when decoded to 3 channels),
    and an empty class folder `EMPTY_CLASS_FOLDER`.

    Args:
        folder: where to write; made if missing, existing files of the same names replaced.
        images_per_class: good JPEGs per class.

    Returns:
        `folder`, as a Path.

    Example:
        root = data.make_damaged_dataset("/tmp/damaged")
        source = sources.resolve_source(str(root))
    """
    root = Path(folder)
    for class_name in CLASSES:
        _write_images(root, class_name, range(images_per_class), DEFAULT_SEED)
    pixels = render_flower("daisy", _image_rng(DEFAULT_SEED, "daisy", images_per_class))
    image = Image.fromarray(pixels)
    encoded = {}
    for name, mode, file_format in [
        ("jpeg", "RGB", "JPEG"),
        ("grayscale", "L", "JPEG"),
        ("cmyk", "CMYK", "JPEG"),
        ("png", "RGB", "PNG"),
    ]:
        buffer = io.BytesIO()
        image.convert(mode).save(buffer, format=file_format)
        encoded[name] = buffer.getvalue()
    contents = {
        "daisy/truncated.jpg": encoded["jpeg"][: len(encoded["jpeg"]) // 2],
        "daisy/empty.jpg": b"",
        "roses/not_an_image.jpg": b"This is not an image.\n",
        "dandelion/grayscale.jpg": encoded["grayscale"],
        "sunflowers/cmyk.jpg": encoded["cmyk"],
        "tulips/png_named.jpg": encoded["png"],
    }
    for name, content in contents.items():
        (root / name).write_bytes(content)
    (root / EMPTY_CLASS_FOLDER).mkdir(exist_ok=True)
    return root
