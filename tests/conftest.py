"""Test set-up: no progress bars, no TensorFlow log lines, and one temporary root.

Everything a test session writes to the temporary folder goes under one root made at
start-up, `<system temp>/tpu_speed_pipelines_tests-XXXX/`, removed when the session ends:
`TMPDIR` points there (for the notebooks' kernels and every subprocess), so do pytest's
`tmp_path` folders and the tests' data cache. A test's `tmp_path` is deleted as soon as the
test passes (`tmp_path_retention_policy = "failed"` in pyproject.toml), so a heavy one (the
bootstrap's virtual environment) does not wait for the end. Pass `--basetemp DIR` to keep
the tests' folders; set `TPU_SPEED_PIPELINES_CACHE` to keep the data cache between runs.
`HOME` is `<root>/home` too (Jupyter, IPython, Keras, matplotlib, Chromium write there).
`tests/test_temp_folder.py` runs last and checks that the session left the checkout and the
real HOME as they were, and nothing of the course in the system temporary folder outside
the root (`tests/session_state.py` takes their state at start-up, and notes which other
processes write there meanwhile, so that a learner's JupyterLab is never taken for a test).

Notebooks run by the tests inherit this environment; MPLBACKEND is left alone so that they
show their figures inline, as they do for a learner.

With pytest-xdist (the README's `-n 2`) the controller makes the root and takes the
state; each worker works in `<root>/<worker id>/` (its own TMPDIR, HOME and data cache: no
two processes build the same dataset at once) and runs no `test_the_session_left_*`: the
controller runs the same checks once every worker has ended (`pytest_sessionfinish`). A
test module goes to one worker whole (`--dist loadfile` in pyproject.toml), so a module's
fixtures are made once.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests import session_state
from utils.lab import data, progress  # Neither imports TensorFlow.

os.environ[progress.DISABLE_ENV_VAR] = "1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

REPO_ROOT = Path(__file__).resolve().parents[1]
# The course's documents, relative to the root: README.md first, then CONTRIBUTING.md, docs/.
DOCUMENTS = [
    "README.md",
    "CONTRIBUTING.md",
    *sorted(f"docs/{path.name}" for path in (REPO_ROOT / "docs").glob("*.md")),
]
LAST_TESTS = ("tests/test_temp_folder.py::test_the_session_left_",)  # Their names start so.
SYSTEM_TEMP = Path(tempfile.gettempdir())
REAL_HOME = Path.home()
TEMP_BEFORE: frozenset[str] = frozenset()  # The system temp folder's entries at start-up.
TEMP_ROOT: Path | None = None  # The session's temporary root, once pytest is configured.
TEMP_WATCHER: session_state.TempWatcher | None = None
CHECKOUT_BEFORE: dict | None = None  # `session_state.checkout_state` at start-up.
HOME_BEFORE: dict = {}  # `session_state.home_state(REAL_HOME)` at start-up.
WRITER_LOG: session_state.WriterLog | None = None  # Other writers, through the session.
WORKER: str | None = None  # In a pytest-xdist worker, its id ("gw0").


def _work_in(root: Path, cache: str) -> None:
    """Points TMPDIR, tempfile, HOME and the data cache into `root`."""
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)  # tempfile caches its folder; pytest's tmp_path asks it.
    os.environ[data.CACHE_ENV_VAR] = cache
    (root / "home").mkdir()
    os.environ["HOME"] = str(root / "home")
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ.pop(name, None)  # Under HOME, as they are by default.


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """What an xdist worker needs of the controller's set-up (pytest-xdist's hook)."""
    node.workerinput["tests_root"] = str(TEMP_ROOT)
    node.workerinput["tests_real_home"] = str(REAL_HOME)


def pytest_configure(config):
    """Takes the checkout's, HOME's and the temp folder's state; points TMPDIR, HOME at a root.

    In an xdist worker: a folder of its own in the controller's root, and no state taken.
    """
    global TEMP_BEFORE, TEMP_ROOT, TEMP_WATCHER, CHECKOUT_BEFORE, HOME_BEFORE, WRITER_LOG
    global WORKER, REAL_HOME
    if hasattr(config, "workerinput"):
        WORKER = config.workerinput["workerid"]
        REAL_HOME = Path(config.workerinput["tests_real_home"])
        TEMP_ROOT = Path(config.workerinput["tests_root"]) / WORKER
        TEMP_ROOT.mkdir()
        _work_in(TEMP_ROOT, str(Path(os.environ[data.CACHE_ENV_VAR]) / WORKER))
        return
    TEMP_BEFORE = frozenset(p.name for p in SYSTEM_TEMP.iterdir())
    TEMP_WATCHER = session_state.TempWatcher(SYSTEM_TEMP).start()
    WRITER_LOG = session_state.WriterLog(REPO_ROOT, REAL_HOME).start()
    CHECKOUT_BEFORE = session_state.checkout_state(REPO_ROOT)
    HOME_BEFORE = session_state.home_state(REAL_HOME)
    TEMP_ROOT = Path(tempfile.mkdtemp(prefix="tpu_speed_pipelines_tests-"))
    _work_in(TEMP_ROOT, os.environ.get(data.CACHE_ENV_VAR) or str(TEMP_ROOT / "cache"))


def pytest_collection_modifyitems(config, items):
    """Moves the checks of what the session left to the end of the session; an xdist worker
    leaves them to the controller."""
    last = [item for item in items if item.nodeid.startswith(LAST_TESTS)]
    items[:] = [item for item in items if item not in last]
    if WORKER is None:
        items.extend(last)
    elif last:
        config.hook.pytest_deselected(items=last)


def pytest_sessionfinish(session):
    """The controller of an xdist run checks what the session left, once every worker ended."""
    if WORKER is not None or not session.config.pluginmanager.has_plugin("dsession"):
        return
    from tests import test_temp_folder

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for check in test_temp_folder.SESSION_CHECKS:
        failure, notes = check()
        for note in notes:
            reporter.write_line(f"warning: {note}", yellow=True)
        if failure:
            reporter.write("\n")  # After the progress line, which xdist leaves open.
            reporter.write_sep("=", f"FAILED {check.__name__}", red=True)
            reporter.write_line(failure)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Removes the session's temporary root (after pytest's own clean-up)."""
    if WORKER is not None:  # Its folder goes with the controller's root.
        return
    if TEMP_WATCHER is not None:
        TEMP_WATCHER.stop()
    if WRITER_LOG is not None:
        WRITER_LOG.stop()
    if TEMP_ROOT is not None:
        shutil.rmtree(TEMP_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def small_flowers():
    """A 60-image embedded dataset, generated once per cache."""
    from utils.lab import data

    return data.make_flowers_dataset(60)


@pytest.fixture(scope="session")
def write_small_shards(small_flowers, tmp_path_factory):
    """Returns `write(num_shards, target_size=32)`: shard paths of the 60 images, made once."""
    from utils import shard_files
    from utils.lab import conversion, sources

    made = {}

    def write(num_shards, target_size=32):
        if (num_shards, target_size) not in made:
            source = sources.resolve_source(str(small_flowers))
            output_dir = tmp_path_factory.mktemp("shards")
            conversion.convert(source, output_dir, target_size=target_size, num_shards=num_shards)
            made[num_shards, target_size] = shard_files.find_shards(str(output_dir))
        return made[num_shards, target_size]

    return write


@pytest.fixture(scope="session")
def small_source(small_flowers):
    """The 60-image embedded dataset as an image source."""
    from utils.lab import sources

    return sources.resolve_source(str(small_flowers))


@pytest.fixture(scope="session")
def converted(small_source, tmp_path_factory):
    """`(output_dir, report)`: the 60 images converted once into 4 shards of 64 px (seed 3)."""
    from utils.lab import conversion

    output_dir = tmp_path_factory.mktemp("shards")
    report = conversion.convert(small_source, output_dir, target_size=64, num_shards=4, seed=3)
    return output_dir, report


@pytest.fixture(scope="session")
def flowers_400(tmp_path_factory):
    """Shard paths of a 400-image embedded dataset at 48 px, in 5 shards; made once."""
    from utils.lab import shard_cache, sources

    source = sources.resolve_source("embedded", num_images=400)
    folder = tmp_path_factory.mktemp("flowers_400")
    return shard_cache.ensure_shards(source, folder, target_size=48, num_shards=5).paths


PHOTOS = REPO_ROOT / "tests" / "data" / "photos"


@pytest.fixture(scope="session")
def real_photo_folder(tmp_path_factory):
    """A learner's folder of real photographs, with every kind of trouble; made once.

    `<tmp>/photos [2024]/` holds 4 classes of 8 real photos each (crops, flips and sizes
    derived from `tests/data/photos` and matplotlib's `grace_hopper.jpg`), saved as .jpg,
    .JPG, .jpeg and .png; plus 3 unreadable files (truncated, empty, text), a grayscale
    and a CMYK JPEG, a PNG named .jpg, a 16-bit PNG, files that are not images we read
    (.webp, .txt), an empty class folder and a class folder of non-images only.

    Returns:
        A dict: `root`, `readable` (paths that convert), `unreadable` (paths skipped),
        `not_images` (paths listed, not read), `classes`, `empty_class_folders`.
    """
    import io

    import matplotlib.cbook
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("learner") / "photos [2024]"
    families = {
        "cats": ["chelsea.jpg"],
        "coffee": ["coffee.jpg"],
        "people": ["astronaut.jpg", "grace_hopper.jpg"],
        "space": ["rocket.jpg", "hubble_deep_field.jpg"],
    }
    hopper = Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg"))
    hopper.thumbnail((320, 320))
    photos = {path.name: Image.open(path) for path in PHOTOS.glob("*.jpg")}
    photos["grace_hopper.jpg"] = hopper.convert("RGB")
    rng = np.random.default_rng(2024)
    readable, unreadable, not_images = [], [], []
    extensions = [".jpg", ".jpg", ".JPG", ".jpeg", ".png", ".jpg", ".jpg", ".jpg"]
    for class_name, names in families.items():
        (root / class_name).mkdir(parents=True)
        for index, extension in enumerate(extensions):
            photo = photos[names[index % len(names)]].convert("RGB")
            width, height = photo.size
            left, top = rng.integers(0, width // 4), rng.integers(0, height // 4)
            crop = photo.crop((left, top, left + 3 * width // 4, top + 3 * height // 4))
            if index % 2:
                crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            side = int(rng.integers(120, 240))
            crop = crop.resize((side, int(side * crop.size[1] / crop.size[0])))
            path = root / class_name / f"{class_name}_{index:02d}{extension}"
            crop.save(path, format="PNG" if extension == ".png" else "JPEG", quality=90)
            readable.append(path)

    def encoded(image, file_format, **kwargs):
        buffer = io.BytesIO()
        image.save(buffer, format=file_format, **kwargs)
        return buffer.getvalue()

    camera = Image.open(PHOTOS / "camera.jpg")  # A real grayscale photograph.
    coffee = photos["coffee.jpg"].convert("RGB")
    good_jpeg = encoded(coffee, "JPEG")
    troubles = {
        "cats/truncated.jpg": (good_jpeg[: len(good_jpeg) // 2], unreadable),
        "coffee/empty.jpg": (b"", unreadable),
        "space/not_an_image.jpg": (b"This is not an image.\n", unreadable),
        "people/grayscale.jpg": (encoded(camera.convert("L"), "JPEG"), readable),
        "space/cmyk.jpg": (encoded(coffee.convert("CMYK"), "JPEG"), readable),
        "cats/png_named.jpg": (encoded(coffee, "PNG"), readable),
        "coffee/deep_16bit.png": (
            encoded(Image.fromarray(np.asarray(camera.convert("L"), np.uint16) * 257), "PNG"),
            readable,
        ),
        "cats/hopper.webp": (encoded(photos["grace_hopper.jpg"], "WEBP"), not_images),
        "space/notes.txt": (b"where these photos come from\n", not_images),
        "drafts/readme.txt": (b"nothing to see\n", not_images),
        "drafts/sketch.webp": (encoded(camera, "WEBP"), not_images),
    }
    for name, (content, kind) in troubles.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(content)
        kind.append(root / name)
    (root / "lilies").mkdir()
    return {
        "root": root,
        "readable": sorted(str(p) for p in readable),
        "unreadable": sorted(str(p) for p in unreadable),
        "not_images": sorted(str(p) for p in not_images),
        "classes": tuple(sorted(families)),
        "empty_class_folders": ("drafts", "lilies"),
    }
