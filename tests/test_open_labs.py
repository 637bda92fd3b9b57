"""The README's third command (tools/open_labs.py) serves the labs, and lab 1 runs in a browser.

The server tests run the README's command as written, from a folder laid out like a clone
(labs/, utils/, tools/ and .venv as links to this checkout and its environment), with a
fresh HOME, a free loopback port (`JUPYTER_PORT`), a known token (`JUPYTER_TOKEN`) and
`BROWSER=true`, so that no browser window opens. As root the command must add
`--allow-root` itself. The browser test opens lab 1 in headless Chromium (Debian's
`chromium`, driven by Playwright), reads what the hidden cells show, saves it unedited,
runs every cell from the Run menu and reads TODO 1's "not done yet" message from the page;
it skips only where Chromium or Playwright is missing.
"""

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import open_labs
from tools.building.lesson_parameters import SMALL_PARAMETERS

README_COMMAND = ".venv/bin/python -m tools.open_labs"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
TOKEN = "course-test-token"


def test_copy_labs_copies_the_missing_labs_and_keeps_the_learners(tmp_path):
    labs, work = tmp_path / "labs", tmp_path / "work"
    labs.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb", "notes.txt"):
        (labs / name).write_text(f"lab {name}")
    work.mkdir()
    (work / "01_a.ipynb").write_text("the learner's work")
    assert open_labs.copy_labs(labs, work) == (["02_b.ipynb"], ["01_a.ipynb"])
    assert (work / "01_a.ipynb").read_text() == "the learner's work"
    assert sorted(p.name for p in work.iterdir()) == ["01_a.ipynb", "02_b.ipynb"]


def test_copy_labs_outside_a_clone_says_where_to_run_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Run this from the root of the clone: "):
        open_labs.copy_labs(tmp_path / "labs", tmp_path / "work")
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("uid, added", [(0, True), (1000, False)], ids=["root", "user"])
def test_jupyter_command_adds_allow_root_only_for_root(uid, added):
    command = open_labs.jupyter_command(["--port", "8899"], uid=uid)
    expected = [sys.executable, "-m", "jupyterlab", "work", "--port", "8899"]
    assert command == expected + (["--allow-root"] if added else [])


def test_the_readme_gives_the_command_tested_here():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("**Work through the labs yourself**") :]
    block = re.search(r"```bash\n(.*?)\n```", section, re.DOTALL)
    assert block[1] == README_COMMAND


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _small_lab1(path: Path):
    """Writes lab 1 with its small parameters (as a learner might edit the cell)."""
    lab = nbformat.read(REPO_ROOT / "labs" / "01_tf_data_basics.ipynb", as_version=4)
    cell = next(c for c in lab.cells if "parameters" in c.metadata.get("tags", []))
    for name, value in SMALL_PARAMETERS["01_tf_data_basics"].items():
        cell.source = re.sub(rf"^{name} = \S+", f"{name} = {value!r}", cell.source, flags=re.M)
    nbformat.write(lab, path)


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """The README's command, running in a clone-like folder; yields (url, clone, output)."""
    clone = tmp_path_factory.mktemp("clone")
    for name in ("labs", "utils", "tools"):
        (clone / name).symlink_to(REPO_ROOT / name)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    (clone / "work").mkdir()
    _small_lab1(clone / "work" / "01_tf_data_basics.ipynb")
    port = _free_port()
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "HOME": str(home), "JUPYTER_PORT": str(port), "BROWSER": "true"}
    env |= {"JUPYTER_TOKEN": TOKEN, "PYTHONPATH": str(clone)}
    log = clone / "server.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            ["bash", "-c", README_COMMAND],
            cwd=clone,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {url}:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield url, clone, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_readme_command_serves_the_labs_on_loopback(lab_server):
    url, clone, log = lab_server
    with urllib.request.urlopen(f"{url}/api/contents?token={TOKEN}", timeout=10) as answer:
        listed = answer.read().decode()
    labs = sorted(p.name for p in (REPO_ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
    assert all(f'"name": "{name}"' in listed.replace('":"', '": "') for name in labs), listed
    text = log.read_text()
    others = len(labs) - 1
    assert f"work/: copied {others} lab(s) from labs/; kept your 1 copies" in text
    assert ("Running as root (a container?)" in text) == (os.getuid() == 0)
    assert "Running as root is not recommended" not in text
    assert sorted(p.name for p in (clone / "work").iterdir()) == labs


def _browser():
    """Returns (playwright module, reason to skip or None)."""
    try:
        from playwright import sync_api
    except ImportError:
        return None, "Playwright is not installed (pip install -r requirements-dev.txt)"
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return None, "no Chromium (Debian: apt-get install chromium; .ci/run does it as root)"
    return sync_api, None


def _wait_for_the_kernel(url, notebook, timeout_s=60):
    """Waits until the server has a session for `notebook` whose kernel is idle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/sessions?token={TOKEN}", timeout=5) as answer:
            sessions = json.load(answer)
        if any(
            s["path"].endswith(notebook) and s["kernel"]["execution_state"] == "idle"
            for s in sessions
        ):
            return
        time.sleep(0.5)
    pytest.fail(f"No idle kernel for {notebook} after {timeout_s} s: {sessions}")


def _save_unedited(page, path: Path, timeout_s: float = 20) -> tuple[str, str]:
    """Saves the open notebook with Ctrl+S; returns its text (before, after)."""
    before, mtime = path.read_text(), path.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + timeout_s
    # jupyter_server's atomic_writing writes into the file itself (its backup copy is what
    # is renamed, on failure): a read between its truncation and its last write finds an
    # empty or partial file, so wait until the new text is a whole notebook.
    while True:
        if path.stat().st_mtime_ns != mtime:
            with contextlib.suppress(json.JSONDecodeError):
                text = path.read_text()
                json.loads(text)
                return before, text
        if time.monotonic() > deadline:
            pytest.fail(f"JupyterLab did not save {path.name} within {timeout_s} s")
        time.sleep(0.2)


def test_lab1_in_chromium_stops_at_todo1_saying_not_done_yet(lab_server, tmp_path):
    sync_api, reason = _browser()
    if reason:
        pytest.skip(reason)
    url, clone, _ = lab_server
    expected = "TODO 1 (filenames): not done yet: filenames is still ... (Ellipsis)."
    home = tmp_path / "browser-home"  # Chromium's NSS database, fontconfig's cache, ...
    home.mkdir()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            headless=True,
            args=CHROMIUM_FLAGS,
            env={**os.environ, "HOME": str(home)},  # Its profile is in TMPDIR (Playwright's).
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab/tree/01_tf_data_basics.ipynb?token={TOKEN}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
            _wait_for_the_kernel(url, "01_tf_data_basics.ipynb")
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
            hidden_cells = page.locator(".jp-PlaceholderText").all_text_contents()
            in_view = page.locator(".jp-Notebook").inner_text()
            saved = _save_unedited(page, clone / "work" / "01_tf_data_basics.ipynb")
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            # JupyterLab renders only the cells in view: wait for the output to exist. If
            # it asks which kernel to start, take its proposal, as a learner would.
            error = page.locator(".jp-OutputArea-output", has_text="TODO 1 (filenames)").first
            select = page.locator(".jp-Dialog button", has_text="Select")
            deadline = time.monotonic() + 90
            while error.count() == 0:
                if time.monotonic() > deadline:
                    page.screenshot(path=str(clone / "timeout.png"), full_page=True)
                    pytest.fail(f"No TODO 1 message after 90 s; see {clone / 'timeout.png'}")
                if select.is_visible():
                    select.click()
                time.sleep(0.5)
            shown = error.text_content()  # Rendered or not (cells out of view are not).
        finally:
            browser.close()
    assert expected in shown, shown
    assert "CheckFailed" in shown
    # Nothing of Colab's forms or nbval's markers in the learner's view.
    assert hidden_cells == [
        "# Set-up: run this cell first",
        "# Hand-in code: what the last cell calls",
    ]
    assert "#@title" not in in_view and "NBVAL" not in in_view
    # Saved unedited, the lab gains only what no file can know: the kernel's Python version.
    before, after = saved
    version = f'"pygments_lexer": "ipython3",\n   "version": "{platform.python_version()}"\n'
    assert after == before.replace('"pygments_lexer": "ipython3"\n', version)
    assert (home / ".config" / "chromium" / "Crash Reports").is_dir()  # Not the real HOME's.


def test_make_lab_passes_jupyterlab_s_arguments_on():
    if shutil.which("make") is None:
        pytest.skip("no make here (Debian: apt-get install make)")
    result = subprocess.run(
        ["make", "-n", "lab", "ARGS=--no-browser --port 8889"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == ".venv/bin/python -m tools.open_labs --no-browser --port 8889\n"
    readme = (REPO_ROOT / "README.md").read_text()
    assert 'make lab ARGS="--no-browser --port 8889"' in readme
