"""The code of every lab's hand-in cells: runs in the learner's kernel, pasted by the build.

The build (`tools/building/variants.py`) pastes this file, as it is, into a hidden cell after
the set-up cell of every lab and solution (so that "Run all" defines it before a failing
check stops the run); the last cell sets `LEARNER_ID` and calls `hand_in(...)` with the
lab's own check calls. It is not in `utils/`: every set-up cell embeds all of `utils/`
within a size budget (tests/test_setup_cell.py), and this code needs nothing of it (the
standard library only).

`hand_in` runs each TODO's check again and prints "N of M TODOs pass" with each failing
TODO's message; then, with a learner id, it copies the notebook's saved file beside it as
`<id>_<lab>.ipynb`, which the grader's `--id-pattern '^(?P<id>[^_]+)_'` reads (the id is in
the copy's metadata too, which the grader reads without a pattern). The kernel learns the
file from the front end: VS Code sets `__vsc_ipynb_file__`, JupyterLab 4 (jupyter_server's
`JPY_SESSION_NAME`, which ipykernel puts in `__session__`). On Colab (the notebook is in
Drive) and elsewhere it says how to download a copy under that name.
"""

import contextlib
import datetime
import io
import json
import os
import re
import sys
import time
from pathlib import Path

COURSE_KEY = "tpu_speed_pipelines"  # The notebooks' metadata key; the grader reads `learner`.
LEARNER_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.@-]*")


class HandInError(ValueError):
    """The learner's id cannot name the copy; the message says what to change."""

    def _render_traceback_(self):  # IPython shows this one line, not the traceback.
        return [f"HandInError: {self}"]


def run_checks(checks):
    """Runs each TODO's check, its own output hidden; prints "N of M TODOs pass" and the
    message of each TODO that does not. Returns {todo: None if it passed, else its message}.

    `checks` maps each TODO's number to a function without arguments that runs its check.
    A check passes when it returns; its error's first line is its message (a `CheckFailed`
    names its TODO already). A name not defined means a cell above has not run, or failed.
    """
    found = {}
    for todo, check in checks.items():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check()
            found[todo] = None
        except NameError as error:
            found[todo] = (
                f"TODO {todo}: not checked: {error}: a cell above has not run, or stopped on "
                "an error. Run the cells above in order (Run > Run All Above Selected Cell; "
                "Colab: Runtime > Run before), fixing what stops them, then this one."
            )
        except Exception as error:
            lines = str(error).strip().splitlines() or [type(error).__name__]
            named = lines[0].startswith(f"TODO {todo} ")
            found[todo] = lines[0] if named else f"TODO {todo}: {type(error).__name__}: {lines[0]}"
    passing = [str(todo) for todo, message in found.items() if message is None]
    summary = f"{len(passing)} of {len(found)} TODOs pass"
    print(f"{summary}: {', '.join(passing)}." if passing else f"{summary}.")
    for message in found.values():
        if message is not None:
            print(message)
    return found


def copy_name(learner_id, lab):
    """Returns `<learner_id>_<lab>.ipynb`; raises HandInError if the id cannot name it."""
    if not LEARNER_ID_PATTERN.fullmatch(learner_id):
        raise HandInError(
            f"LEARNER_ID = {learner_id!r} cannot name the copy: use letters, digits, '-', "
            "'.' or '@', starting with a letter or digit (no '_' or spaces: the grader reads "
            "the id up to the first '_')."
        )
    return f"{learner_id}_{lab}.ipynb"


def notebook_path(namespace, environ=os.environ):
    """Returns this notebook's file where the front end says it, else None.

    VS Code puts the path in `__vsc_ipynb_file__`; JupyterLab 4 in `JPY_SESSION_NAME` and
    `__session__`, absolute or from the server's root (then the kernel's folder is the
    notebook's, so its name finds it there).
    """
    for said in (
        namespace.get("__vsc_ipynb_file__"),
        namespace.get("__session__"),
        environ.get("JPY_SESSION_NAME"),
    ):
        if not isinstance(said, str) or not said.endswith(".ipynb"):
            continue
        for path in (Path(said), Path.cwd() / Path(said).name):
            if path.is_file():
                return path.resolve()
    return None


def _metadata(path):
    """The course's metadata of a notebook file; {} when it is not a notebook of ours."""
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get(COURSE_KEY)
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def save_copy(notebook, learner_id, lab):
    """Copies `notebook` (its saved file) beside it as `copy_name`, the id in its metadata.

    Nothing is overwritten but an earlier copy of this lab by this learner; nothing is
    deleted. Returns what it did, for the learner.
    """
    name = copy_name(learner_id, lab)
    target = notebook.with_name(name)
    if Path(_metadata(notebook).get("source", lab)).stem != lab:
        return f"Not copied: {notebook} is not lab {lab}'s notebook. Save this lab, then retry."
    if target == notebook:
        return f"This notebook is named {name} already: save it (Ctrl+S) and hand in that file."
    replaced = ""
    if target.exists():
        earlier = _metadata(target)
        if earlier.get("learner") != learner_id or Path(earlier.get("source", "")).stem != lab:
            return (
                f"Not copied: {target} exists and is not an earlier copy of yours; it was "
                "left as it is. Rename or move it, then run this cell again."
            )
        replaced = " It replaced your earlier copy."
    content = json.loads(notebook.read_text(encoding="utf-8"))
    content.setdefault("metadata", {}).setdefault(COURSE_KEY, {})["learner"] = learner_id
    target.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    saved = notebook.stat().st_mtime
    age = time.time() - saved
    ago = f"{age / 60:.0f} min ago" if age >= 90 else f"{max(age, 0):.0f} s ago"
    return (
        f"Wrote {target}: this notebook as it was last saved, at "
        f"{datetime.datetime.fromtimestamp(saved):%H:%M:%S} ({ago}); what you changed after "
        f"that is not in it (save, then run this cell again).{replaced} Hand in that file."
    )


def hand_in(checks, *, lab, learner_id, namespace):
    """The hand-in cell: `run_checks`, then a copy to hand in (`save_copy`), or the steps
    to make one where the kernel cannot see the notebook's file. Prints; returns None (a
    cell shows no value)."""
    name = copy_name(learner_id, lab) if learner_id else None  # A bad id fails first.
    run_checks(checks)
    print()
    if name is None:
        print(
            f'To hand in: set LEARNER_ID = "<your id>" in this cell, save the notebook '
            f"(Ctrl+S), and run this cell again: it makes the copy to hand in, named "
            f"<your id>_{lab}.ipynb."
        )
        return
    path = notebook_path(namespace)
    if "google.colab" in sys.modules:
        print(
            "On Colab the notebook is in Drive, not on this machine: File > Save, then File > "
            f"Download > Download .ipynb, name the file {name} and hand in that file."
        )
    elif path is None:
        print(
            "This front end does not tell the kernel where the notebook is (JupyterLab 4 and "
            f"VS Code do): save the notebook, download or copy it as {name}, hand in that file."
        )
    else:
        print(save_copy(path, learner_id, lab))
