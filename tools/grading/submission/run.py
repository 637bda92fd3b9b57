"""Step `run`: the prepared cells, one by one, in a fresh sandboxed kernel.

Takes `Submission.prepared`, the lesson's `Limits` and the `Options`; gives
`Submission.results` (one `grade_kernel.CellResult` per prepared cell) and the judge's
verdicts. The work folder holds the submission's HOME and its data cache (links to the
shared, read-only datasets); it and the judge's folder are deleted when the run ends.
The kernel sends the first `grade_kernel.OUTPUT_LIMIT` characters each cell prints and
drops the rest as it is printed; the feedback says so (`printed_note`). What they wrote is bounded
(`model.DiskLimits`, from the lesson's limits).

A lab with a `BACKEND` parameter (lab 4) runs, kernel and judge alike, on the Keras backend
the learner's set-up cell said it ran on, else on the committed solution's
(`keras_environment`); on JAX with `GRADER_DEVICES` simulated CPU devices, and the Keras
distribution the kernel set crosses to the judge after each TODO (`with_keras_distribution`).

One mistake costs one TODO: where a TODO's verdict fails (its cell raised, or was
interrupted past its time limit, or its answer is wrong), the lab's solution of that TODO
runs in the kernel after the judge's verdict (`stand_in_code`), so the cells after it,
the later TODOs among them, run on what the lab would have given them.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tools.building.outputs import SOLUTION_ENVIRONMENTS
from tools.grading.judge.judge_output import JudgeOutput
from tools.grading.judge.references import reference_cells
from tools.grading.judge.start import start_judge
from tools.grading.kernel import grade_kernel
from tools.grading.kernel.cells import SOCKET_NAME, keep_code
from tools.grading.kernel.grade_kernel import KERNEL_DIED
from tools.grading.kernel.workfolder import DiskWatch, prepare_work
from tools.grading.model import KEY, REPO_ROOT, Limits, Options, Submission, marks, parse

# JAX's simulated CPU devices in a lab graded on JAX: the fewest that tell a distribution
# over every device from one over the first device only.
GRADER_DEVICES = 2
VERDICT_WAIT_SECONDS = 5  # For the judge's verdict line, read on a thread, after its TODO.
_BACKEND_SAID = re.compile(r"^Backend: (tensorflow|jax) \(", re.MULTILINE)
KERAS_DISTRIBUTION = "_grader_keras_distribution"
# The kernel's Keras distribution as data: None, or its kind and its devices' names.
BIND_DISTRIBUTION = f"""# Grader: the Keras distribution this kernel set, for the judge.
import keras as _grader_keras

{KERAS_DISTRIBUTION} = _grader_keras.distribution.distribution()
if {KERAS_DISTRIBUTION} is not None:
    {KERAS_DISTRIBUTION} = {{
        "kind": type({KERAS_DISTRIBUTION}).__name__,
        "devices": [
            str(d) if isinstance(d, str) else f"{{d.platform}}:{{d.id}}"
            for d in {KERAS_DISTRIBUTION}.device_mesh.devices.flat
        ],
    }}
"""
# The judge sets the same: Keras's public distributions are DataParallel and ModelParallel.
SET_DISTRIBUTION = f"""# Grader: the Keras distribution the learner's kernel set (its word).
import keras as _grader_keras

_grader_set = {KERAS_DISTRIBUTION}
if _grader_set is None:
    _grader_keras.distribution.set_distribution(None)
else:
    _grader_mesh = _grader_keras.distribution.DeviceMesh(
        (len(_grader_set["devices"]),), ["batch"], [str(d) for d in _grader_set["devices"]]
    )
    _grader_keras.distribution.set_distribution(
        _grader_keras.distribution.DataParallel(device_mesh=_grader_mesh)
        if _grader_set["kind"] == "DataParallel"
        else _grader_keras.distribution.ModelParallel(
            layout_map=_grader_keras.distribution.LayoutMap(_grader_mesh), batch_dim_name="batch"
        )
    )
"""


def learner_backend(notebook) -> str | None:
    """The Keras backend the learner's set-up cell said it ran on ("Backend: jax (...)"
    in its saved output), or None where no set-up output says one."""
    for cell in notebook.cells if notebook is not None else []:
        if cell.cell_type != "code" or "setup" not in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            found = _BACKEND_SAID.search("".join(text) if isinstance(text, list) else text)
            if found:
                return found.group(1)
    return None


def keras_environment(lab, notebook=None) -> dict[str, str]:
    """The environment the kernel and the judge of a lab with a `BACKEND` parameter start
    with: `KERAS_BACKEND` as the learner's set-up output says (`learner_backend`), else as
    the committed solution was built (`SOLUTION_ENVIRONMENTS`, else TensorFlow), and on JAX
    `XLA_FLAGS` for `GRADER_DEVICES` CPU devices; {} for a lab without `BACKEND`."""
    parameters = next((c for c in lab.cells if "parameters" in c.metadata.get("tags", [])), None)
    if parameters is None or not re.search(r"^BACKEND\s*=", parameters.source, re.MULTILINE):
        return {}
    source = str(lab.metadata.get(KEY, {}).get("source", ""))
    built = SOLUTION_ENVIRONMENTS.get(source, {}).get("KERAS_BACKEND", "tensorflow")
    backend = learner_backend(notebook) or built
    if backend != "jax":
        return {"KERAS_BACKEND": backend}
    devices = f"--xla_force_host_platform_device_count={GRADER_DEVICES}"
    return {"KERAS_BACKEND": "jax", "XLA_FLAGS": devices}


def _kept_names(code: str) -> tuple[int, list[str]]:
    """(the TODO, the names) of a grader's keep cell (`keep_code`)."""
    call = next(
        node.value
        for node in parse(code).body
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    )
    return ast.literal_eval(call.args[0]), list(ast.literal_eval(call.args[1]))


def with_keras_distribution(prepared: list, plan: list) -> tuple[list, list]:
    """`prepared` and the judge's `plan` with the kernel's Keras distribution kept after each
    TODO (`BIND_DISTRIBUTION`, as data) and set in the judge before the TODO's check
    (`SET_DISTRIBUTION`): a check reads the distribution the TODO set (lab 4's on JAX)."""
    kept = []
    for cell, code in prepared:
        if str(cell.get("id", "")).startswith("grader-keep"):
            todo, names = _kept_names(code)
            code = BIND_DISTRIBUTION + keep_code(todo, [*names, KERAS_DISTRIBUTION])
        kept.append((cell, code))
    steps = []
    for step in plan:
        if step["kind"] != "fetch":
            steps.append(step)
            continue
        steps.append({**step, "names": [*step["names"], KERAS_DISTRIBUTION]})
        steps.append({"kind": "code", "source": SET_DISTRIBUTION, "needed": True})
    return kept, steps


def stand_in_code(
    prepared: list, solutions: dict[int, str], judge_output: JudgeOutput
) -> Callable[[int, list], str]:
    """`grade_kernel.run_cells`'s `stand_in`: after a TODO's keep cell (the judge has judged
    the TODO), the solution's TODO cell where the verdict failed, or is missing and the
    learner's TODO cell failed; else ""."""
    todo_cells = {
        todo: index
        for index, (cell, _) in enumerate(prepared)
        if (todo := (marks(cell) or cell.metadata.get(KEY, {})).get("todo")) is not None
    }

    def stand_in(index: int, results: list) -> str:
        cell = prepared[index][0]
        todo = cell.metadata.get(KEY, {}).get("check")
        if not str(cell.get("id", "")).startswith("grader-keep") or todo not in solutions:
            return ""
        deadline = time.monotonic() + VERDICT_WAIT_SECONDS
        while todo not in judge_output.found and time.monotonic() < deadline:
            time.sleep(0.05)
        verdict = judge_output.found.get(todo)
        cell_failed = todo in todo_cells and results[todo_cells[todo]].status == "error"
        failed = not verdict.passed if verdict is not None else cell_failed
        return f"# Grader: the lab's solution of TODO {todo}.\n{solutions[todo]}" if failed else ""

    return stand_in


def run_prepared(
    prepared: list,
    limits: Limits,
    options: Options,
    label: str,
    judge_plan: list,
    environment: dict[str, str] | None = None,
    solutions: dict[int, str] | None = None,
):
    """Runs prepared cells in a fresh sandboxed kernel, the judge beside it on `judge_plan`,
    both with `environment` too (`keras_environment`); where a TODO fails, its cell of
    `solutions` ({todo: the lab's solution}) runs after it (`stand_in_code`); returns (the
    cells' results, the judge's verdicts, the most bytes seen written in /tmp and in the
    work folders: {"tmp": ..., "work": ...})."""
    environment = environment or {}
    if environment.get("KERAS_BACKEND") == "jax":
        prepared, judge_plan = with_keras_distribution(prepared, judge_plan)
    # `limits.disk` where `limits.measure_limits` made them; a plain `Limits`, the floors.
    disk = limits.disk
    # A short name: the kernel's sockets are in it, and a socket's path has 107 bytes at most.
    work = Path(tempfile.mkdtemp(prefix=f"{label[:12]}-", dir=options.work_root))
    data_folders = [options.cache] if options.cache is not None else []
    read_only = [REPO_ROOT / "utils", Path(sys.prefix), Path(sys.base_prefix), *data_folders]
    job = {
        "socket": SOCKET_NAME,
        "seconds": limits.total,
        "plan": judge_plan,
        "read_only": data_folders,
    }
    env = prepare_work(work, options.cache, environment)  # The kernel's; the judge's too.
    judge, key, own = start_judge(job, work, options, disk, environment)
    judge_output = JudgeOutput(judge, key)
    kernel = grade_kernel.SandboxedKernel(
        work,
        env,
        bwrap=options.bwrap,
        read_only=read_only,
        memory_bytes=int(options.memory_gb * 2**30),
        tmp_bytes=disk.tmp_bytes,
        file_bytes=disk.work_bytes,
        course=options.course,
    )
    watch = DiskWatch(disk, [work, own], lambda: [p.pid for p in (kernel.process, judge) if p])
    kernel.watch = watch.check
    # A grader's keep cell waits for the judge's check of its TODO: the check's time.
    cell_limits = [
        limits.total
        if str(cell.get("id", "")).startswith("grader-keep")
        else limits.of(cell.get("id", ""))
        for cell, _ in prepared
    ]

    def wait_for_judge(results):
        if results and results[-1].status != "ok":  # The run stopped: nothing more will come.
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            judge.wait(timeout=limits.total)

    try:
        solutions = solutions or {}
        results = grade_kernel.run_cells(
            [code for _, code in prepared],
            cell_limits,
            kernel,
            total_limit=limits.total,
            before_stop=wait_for_judge,
            interruptible=[
                index
                for index, (cell, _) in enumerate(prepared)
                if "todo" in (marks(cell) or cell.metadata.get(KEY, {}))
            ],
            stand_in=stand_in_code(prepared, solutions, judge_output),
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(judge.pid, signal.SIGKILL)
        judge.wait()
        verdicts = judge_output.verdicts()
        for folder in (work, own):
            shutil.rmtree(folder, ignore_errors=True)
    return results, verdicts, watch.most


def name_the_todo(prepared: list, results: list) -> None:
    """Adds to a lab cell's timeout the TODO whose cell came last before it (a lab cell's id
    means nothing to a learner; its time is mostly that TODO's code), and says a kernel that
    died in a lab cell is the learner's kernel (what their cells left running, a thread
    among them), not the lab's cell."""
    todo = None
    for (cell, _), result in zip(prepared, results, strict=True):
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        if "todo" in cell_marks:
            todo = cell_marks["todo"]
        elif todo is None or "check" in cell_marks:
            continue
        elif result.status == "timeout":
            result.error += f", after the cell of TODO {todo}"
        elif result.error == KERNEL_DIED and "added" not in cell_marks:
            result.error = (
                f"your kernel died (memory, os._exit or a crash) after your TODO {todo} cell, "
                f"while the lab's cell {cell.get('id')} ran"
            )


def todo_prints(prepared: list, results: list) -> dict[int, str]:
    """What each TODO's cell printed (as far as it is kept), for the learner's feedback."""
    found = {}
    for (cell, _), result in zip(prepared, results, strict=True):
        todo = (marks(cell) or cell.metadata.get(KEY, {})).get("todo")
        if todo is not None and result.output.strip():
            found[todo] = without_grader_folders(result.output)
    return found


def without_grader_folders(text: str) -> str:
    """`text` without the grader's folders (its Python environment, the course): a warning
    printed by a package names its file ("<venv>/lib/.../interleave_op.py:44: UserWarning")."""
    for folder, shown in (
        (sys.prefix, "<python>"),
        (sys.base_prefix, "<python>"),
        (REPO_ROOT, "<course>"),
    ):
        text = text.replace(str(folder).rstrip("/") + "/", shown + "/")
    return text


PRINTED_NOTE = (
    "Your cells printed more than the grader keeps: the first "
    f"{grade_kernel.OUTPUT_LIMIT:,} characters of each cell; the rest was dropped as it was "
    "printed (printing costs no points)."
)


def printed_note(results: list) -> str:
    """The feedback's line where a cell printed more than the grader keeps, else ""."""
    cut = any(result.printed > grade_kernel.OUTPUT_LIMIT for result in results)
    return PRINTED_NOTE if cut else ""


def step(submission: Submission) -> bool:
    """Runs the submission's prepared cells within its lesson's limits."""
    limits = submission.limits[submission.grade.lab]
    submission.results, submission.verdicts, _ = run_prepared(
        submission.prepared,
        limits,
        submission.options,
        submission.path.stem,
        submission.judge_plan,
        keras_environment(submission.lab, submission.notebook),
        reference_cells(submission.lab),
    )
    name_the_todo(submission.prepared, submission.results)
    submission.grade.printed = todo_prints(submission.prepared, submission.results)
    note = printed_note(submission.results)
    if note:
        submission.grade.notes.append(note)
    return True
