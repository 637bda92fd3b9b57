"""Tests of utils/lessons/scale_out_reading/processes.py: the CPU time of a group of processes."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from utils.lessons.scale_out_reading import processes


def test_cpu_use_counts_this_process_busy_and_names_every_process():
    with processes.CpuUse({"this test": os.getpid(), "parent": os.getppid()}) as cpu:
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
    assert list(cpu.busy_cores) == ["this test", "parent"]
    # CPU seconds, not the share of the wall time: other programs may share the cores.
    assert 0.25 <= cpu.busy_cores["this test"] * cpu.seconds <= 0.3 + cpu.seconds  # Ticks of 10 ms.
    assert cpu.cpu_seconds >= cpu.busy_cores["this test"] * cpu.seconds
    assert cpu.summary().startswith(
        f"CPU cores busy: this test {cpu.busy_cores['this test']:.2f}, parent "
    )
    assert cpu.summary().endswith(f"; together {cpu.total:.2f} of {os.cpu_count()}.")


WHERE = """import json
import utils

print(json.dumps({"utils": utils.__file__}), flush=True)
"""
START_ONE = """import json, sys
from utils.lessons.scale_out_reading import processes

child = processes.start_module("utils.where")
print(json.dumps(processes.read_json_line(child, timeout_s=60, what="the child")))
child.wait()
"""


def test_a_child_imports_the_course_its_parent_did_not_an_installed_one(tmp_path):
    """Lab 7 uploaded alone: the set-up put its unpacked course on the kernel's sys.path
    only; the processes it starts must import that course (not another, or none)."""
    unpacked = tmp_path / "unpacked"
    shutil.copytree(Path(processes.__file__).parents[2], unpacked / "utils")  # utils/ whole.
    (unpacked / "utils" / "where.py").write_text(WHERE)
    code = f"import sys; sys.path.insert(0, {str(unpacked)!r})\n" + START_ONE
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"utils": str(unpacked / "utils" / "__init__.py")}
