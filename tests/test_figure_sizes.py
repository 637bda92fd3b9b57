"""Figures of photographs are stored as JPEG, and every committed image stays small.

`utils.display` shows its grids of photographs as JPEG under the inline backend (PNG, the
backend's format, made lab 1's grid of nine 697 KB). The budget below is checked on
`solutions/`, which the build executes: it holds once the solutions are rebuilt.
"""

import base64

import nbclient
import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools.building.kernels import UnixSocketKernelManager

# The most an image in a committed solution may weigh, decoded: the committed grids of
# photographs, re-encoded as JPEG at quality 85, weigh 86-135 KB; the charts, PNG, 15-65 KB.
MAX_IMAGE_BYTES = 150_000
MAX_SOLUTION_1_BYTES = 300_000  # Issue 54's bound for the whole of solution 1.

GRID_OF_PHOTOS = """\
import numpy as np
import tensorflow as tf
from PIL import Image
from utils import display
paths = sorted((REPO_ROOT / "tests" / "data" / "photos").glob("*.jpg"))[:4]
images = [np.asarray(Image.open(path).convert("RGB").resize((300, 225))) for path in paths]
pairs = tf.data.Dataset.from_tensor_slices((np.stack(images), list(range(len(images)))))
figure = display.show_images(pairs, class_names=[p.stem for p in paths], num_images=4)
"""


def _images(notebook):
    """(cell index, MIME type, decoded bytes) of every image output."""
    return [
        (index, mime, base64.b64decode(output["data"][mime]))
        for index, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        for mime in ("image/png", "image/jpeg")
        if mime in output.get("data", {})
    ]


def test_a_grid_of_photographs_is_shown_once_as_a_jpeg_in_a_notebook():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"from pathlib import Path\nREPO_ROOT = Path({str(REPO_ROOT)!r})"
        ),
        nbformat.v4.new_code_cell(GRID_OF_PHOTOS),
    ]
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=UnixSocketKernelManager,
        timeout=300,
        resources={"metadata": {"path": REPO_ROOT}},
    )
    client.execute()
    [(cell, mime, data)] = _images(notebook)
    assert (cell, mime) == (1, "image/jpeg")
    assert data[:3] == b"\xff\xd8\xff" and len(data) < MAX_IMAGE_BYTES


@pytest.mark.parametrize(
    "solution", sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem
)
def test_every_committed_image_is_within_the_budget(solution):
    """Passes once the solutions are rebuilt with the JPEG grids."""
    notebook = nbformat.read(solution, as_version=4)
    heavy = [
        f"cell {cell}: {mime}, {len(data):,} bytes"
        for cell, mime, data in _images(notebook)
        if len(data) > MAX_IMAGE_BYTES
    ]
    assert heavy == [], f"{solution.name}: images over {MAX_IMAGE_BYTES:,} bytes"
    if solution.name.startswith("01_"):
        assert solution.stat().st_size <= MAX_SOLUTION_1_BYTES
