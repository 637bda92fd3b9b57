"""The kernels the tools and tests start talk over abstract Unix sockets, so that two started
at once never race for a TCP port (tools/building/kernels.py)."""

import json

import nbformat
import papermill
import pytest

from tools.building.kernels import ABSTRACT_SOCKETS, KERNEL_OPTIONS

# What the kernel reads from its own connection file, and the abstract sockets it listens on
# (/proc/net/unix: "@name" for each).
CONNECTION = """
import json
from ipykernel import get_connection_file
info = json.load(open(get_connection_file()))
ports = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
listening = open("/proc/net/unix").read().split()
print(json.dumps({"transport": info["transport"],
                  "sockets": [f"{info['ip']}-{info[p]}" in listening for p in ports]}))
"""


@pytest.mark.skipif(not ABSTRACT_SOCKETS, reason="abstract Unix sockets are Linux's; TCP elsewhere")
def test_a_kernel_started_with_the_kernel_options_listens_on_five_abstract_sockets(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CONNECTION)])
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python"}
    nbformat.write(notebook, tmp_path / "in.ipynb")
    papermill.execute_notebook(
        str(tmp_path / "in.ipynb"),
        str(tmp_path / "out.ipynb"),
        cwd=str(tmp_path),
        progress_bar=False,
        **KERNEL_OPTIONS,
    )
    [output] = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    assert json.loads(output.text) == {"transport": "ipc", "sockets": [True] * 5}
