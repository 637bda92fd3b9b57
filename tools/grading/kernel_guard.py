"""The grader's guard, run inside a submission's kernel (not imported by the grader).

`prepare.py` sends this file's text into the kernel: once before the first learner cell,
followed by `_grader_state = _grader_snapshot(...)`, and at the start of every check
cell, followed by `_grader_restore(...)`. So the code that runs is this file, which
linters and tests read like any module. Rules for it: the standard library only, every
top-level name starts with `_grader_` (learner code that names one is flagged), no
`from __future__` import (it runs after other code in a cell), and it prints nothing.

What it restores, in every check cell: the functions of numpy, TensorFlow, Keras, JAX,
math and os as they were before the first learner cell (and the methods of tf.data's
dataset classes), the settings of the lab's own course objects (the simulated storage),
`sys.path` with the course first, IPython's input and AST hooks; then it runs the course
package's modules again from their files, dropping any `utils` module that is not the
course's (a decoy).
"""

_grader_libraries = ("numpy", "tensorflow", "keras", "jax", "math", "os")


def _grader_snapshot(namespace, names, shell):
    """Remembers what `_grader_restore` restores; returns it (the kernel keeps it).

    Args:
        namespace: the kernel's globals (the lab's objects are read from it).
        names: the names the lab's own cells bind (its course objects among them).
        shell: the kernel's IPython shell (`get_ipython()`).
    """
    import sys

    saved = {
        name: (module, {key: value for key, value in list(vars(module).items()) if callable(value)})
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in _grader_libraries and hasattr(module, "__dict__")
    }
    classes = {
        value: dict(vars(value))
        for name, (module, functions) in saved.items()
        if name.startswith("tensorflow.python.data.ops.")
        for value in functions.values()
        if isinstance(value, type) and value.__module__ == name
    }
    objects = [  # The lab's own course objects (the simulated storage): their settings.
        (item, {
            key: value
            for key, value in vars(item).items()
            if isinstance(value, (float, bool, type(None))) or callable(value)
        })
        for item in [namespace.get(name) for name in names]
        if type(item).__module__.split(".")[0] == "utils"
        and hasattr(item, "__dict__") and not isinstance(item, type)
    ]  # fmt: skip
    hooks = (
        list(shell.input_transformers_post),
        list(shell.input_transformers_cleanup),
        list(shell.ast_transformers),
    )
    return {
        "sys": sys,
        "saved": saved,
        "classes": classes,
        "path": list(sys.path),
        "objects": objects,
        "shell": shell,
        "hooks": hooks,
    }


def _grader_restore(state, root, utils):
    """Undoes what a TODO cell may have patched, then runs the course's modules again.

    Args:
        state: what `_grader_snapshot` returned.
        root: the course's folder, put first on `sys.path`.
        utils: the course package's folder; a `utils` module from elsewhere is dropped.
    """
    sys = state["sys"]
    attributes = [*state["saved"].values(), *state["classes"].items(), *state["objects"]]
    for owner, values in attributes:
        for key, value in values.items():
            if vars(owner).get(key) is not value:
                setattr(owner, key, value)
    sys.path[:] = [root] + [path for path in state["path"] if path != root]
    shell = state["shell"]
    (
        shell.input_transformers_post[:],
        shell.input_transformers_cleanup[:],
        shell.ast_transformers[:],
    ) = state["hooks"]
    course = sorted(
        (name for name in list(sys.modules) if name == "utils" or name.startswith("utils.")),
        key=lambda name: (-name.count("."), name),
    )
    for name in 2 * course:
        module = sys.modules.get(name)
        file = str(getattr(module, "__file__", None))
        if module is None or not file.startswith(utils):
            sys.modules.pop(name, None)
            continue
        module.__spec__.loader.exec_module(module)
