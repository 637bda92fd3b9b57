"""The judge: decides each TODO's verdict in a process that never runs a learner's code.

Run by the grader as `python -m tools.grading.judge.judge`, in a sandbox of its own, with a job
on standard input (JSON): a random key, the learner's kernel's socket, and the plan that
`judge_plan.py` made from the lab: the lab's own cells the checks need (the parameters as the
grader set them), where each TODO's values come in, and the lab's check cells. For a
TODO it fetches what the TODO made (`remote.fetch`: data, a dataset rebuilt from its graph,
a function that runs its traced graph), runs the lab's check cell on it, and prints
`VERDICT <json> <hmac>`: the grader takes only lines signed with the key, which the judge
read before anything of the learner's reached it. Output of the lab's cells goes to stderr.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
import sys

from tools.grading.feedback import error_line, plain_line
from tools.grading.judge import remote
from tools.grading.kernel.inside import wire


def run_check(source: str, todo: int, namespace: dict) -> tuple[bool, str]:
    """Runs a lab's check cell; returns (passed, its message)."""
    from utils.checks import CheckFailed

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(source, f"<check cell of TODO {todo}>", "exec"), namespace)
    except CheckFailed as failure:
        return False, plain_line(failure)
    except Exception as error:  # Any other error fails the TODO: its type and first line.
        return False, error_line(error)
    line = next((x for x in printed.getvalue().splitlines() if f"TODO {todo} passed" in x), "")
    return (True, plain_line(line)) if line else (False, "the check printed no 'passed' line")


def references(step: dict, namespace: dict) -> tuple[dict, dict]:
    """(values, as wire data) that a check cell's other lines (`step`) bind when its TODO
    is the lab's solution, run on a copy of the judge's names; ({}, {}) where there is no
    solution, it fails, or a value cannot cross to the kernel."""
    scratch = dict(namespace)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            exec(compile(step["reference"], "<the solution's TODO cell>", "exec"), scratch)
            exec(compile(step["source"], "<lab cell>", "exec"), scratch)
        values = {name: scratch[name] for name in step["binds"] if name in scratch}
        return values, {name: wire.encode(value) for name, value in values.items()}
    except Exception as error:  # The kernel's values stand, as without a solution.
        print(f"the solution's values: {error_line(error)}", file=sys.stderr)
        return {}, {}


def judge(job: dict, emit) -> None:
    """Runs the plan of `job`, calling `emit(todo, passed, message)` for each check. Where
    a check fails, the lines its cell adds take the solution's TODO (`references`), in the
    judge and, sent with the verdict, in the kernel."""
    namespace: dict = {"__name__": "__judge__"}
    client = remote.Client(job["socket"], job["seconds"])
    problems: dict[int, str] = {}
    plan, taken = job["plan"], set()
    try:
        for index, step in enumerate(plan):
            todo = step.get("todo")
            if index in taken:  # A check cell's lines, whose values the solution gave.
                continue
            if step["kind"] == "code":
                try:
                    with contextlib.redirect_stdout(sys.stderr):
                        exec(compile(step["source"], "<lab cell>", "exec"), namespace)
                except Exception as error:  # A later check then says what is missing.
                    print(f"lab cell: {error_line(error)}", file=sys.stderr)
            elif step["kind"] == "fetch":
                for name in step["names"]:
                    try:
                        namespace[name] = remote.fetch(client, todo, name, namespace)
                    except OSError:  # The kernel is gone: a cell above stopped it.
                        namespace.pop(name, None)
                        problems[todo] = "not run: the kernel had stopped (a cell above ended it)"
                    except Exception as error:  # Said for the TODO: never the whole run.
                        namespace.pop(name, None)
                        problems[todo] = f"TODO {todo}: {plain_line(error)}"
            else:
                passed, message = (
                    (False, problems[todo])
                    if todo in problems
                    else run_check(step["source"], todo, namespace)
                )
                emit(todo, passed, message)
                after = plan[index + 1] if index + 1 < len(plan) else {}
                values, sent = {}, {}
                if not passed and after.get("todo") == todo and after.get("reference"):
                    values, sent = references(after, namespace)
                if values:
                    namespace.update(values)
                    taken.add(index + 1)
                with contextlib.suppress(remote.NotSealable, OSError):
                    client.ask(op="judged", todo=todo, references=sent)  # The kernel goes on.
    finally:
        with contextlib.suppress(OSError):
            client.done()


def main() -> int:
    # The verdicts' own copy of the grader's pipe; file descriptor 1 itself then goes to
    # the error stream, so that nothing else (a learner's graph printing to standard output
    # from TensorFlow's C++ side) writes among the verdict lines.
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    job = json.loads(sys.stdin.readline())
    key = bytes.fromhex(job.pop("key"))
    sys.path.insert(0, job["course"])

    def emit(todo: int, passed: bool, message: str) -> None:
        payload = json.dumps({"todo": todo, "passed": passed, "message": message})
        signature = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
        out.write(f"VERDICT {payload} {signature}\n")
        out.flush()

    sys.stdout = sys.stderr  # Only `emit` writes to the grader's pipe.
    judge(job, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
