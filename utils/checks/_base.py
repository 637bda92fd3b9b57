"""What every check shares: the error it raises, how it words a failure, the dataset graph."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import tensorflow as tf

from utils import errors

# What a learner's code raises when it is unfinished or wrong; a check turns it into a message.
CHECK_ERRORS = (AttributeError, TypeError, ValueError, KeyError, tf.errors.OpError)


# Steps `with_options()` adds to a dataset's graph; they change no element.
OPTIONS_ONLY_OPS = {"OptionsDataset", "PrivateThreadPoolDataset", "MaxIntraOpParallelismDataset"}


QUOTED_ERROR_CHARACTERS = 120  # Of an error's line a check quotes.


def first_line(error: Exception) -> str:
    """The first line of an error's message, without TensorFlow's wrapping of an op's error
    (`{{function_node __wrapped__...}}`, `[Op:...]`): what a check quotes of an error.

    Args:
        error: any exception.

    Returns:
        One line: the message's first line, or the error's type name when it has none.
    """
    if isinstance(error, tf.errors.OpError) and error.message:
        line = errors.error_message(error) or type(error).__name__
    else:
        line = errors.first_line(error)
    # Quoted inside a message of two lines at most, before its fix: cut, never the fix.
    return (
        line if len(line) <= QUOTED_ERROR_CHARACTERS else line[: QUOTED_ERROR_CHARACTERS - 1] + "…"
    )


# What the course's solved copy of a TODO's function raises while a check runs that TODO:
# the learner's code called it (lab 2's `records.to_example`, `shard_files.write_shard`).
COURSE_COPY = "course copy"


def _refuse(*args: object, **keywords: object) -> None:
    raise NotImplementedError("course copy")  # COURSE_COPY: no name of a closure here.


@contextlib.contextmanager
def refusing_course_copy(function: Callable) -> Iterator[None]:
    """Makes the course's solved copy of a TODO's function raise while the block runs.

    Its code is swapped, not its name: an alias (`to_example = records.to_example`) or an
    import made earlier (`from utils.records import to_example`) raises too.

    Args:
        function: the course's function (a module-level one, without a closure).

    Yields:
        Nothing; the function's own code is back after the block.
    """
    code = function.__code__
    function.__code__ = _refuse.__code__
    try:
        yield
    finally:
        function.__code__ = code


def is_course_copy_error(error: BaseException) -> bool:
    """Whether `error` is what a refused course copy raised (here, or in the grader's kernel).

    Args:
        error: an error the learner's function raised.

    Returns:
        True for `NotImplementedError("course copy")`.
    """
    return isinstance(error, NotImplementedError) and str(error).startswith(COURSE_COPY)


class CheckFailed(AssertionError):
    """A TODO's result is missing or wrong; the message says which TODO and why."""

    def _render_traceback_(self) -> list[str]:
        # IPython (JupyterLab, Colab, nbconvert) shows what this returns instead of the
        # traceback: the learner reads the message, not the check's own frames.
        return [f"CheckFailed: {self}"]


class DataProblem(ValueError):
    """The data or a parameter is wrong, not the learner's TODO; the message names it."""


def fail(todo: int, name: str, message: str) -> None:
    """Fails a check: "TODO <todo> (<name>): <message>".

    Args:
        todo: the TODO's number.
        name: what the TODO makes (a variable or function name).
        message: what was expected, what was found, and how to fix it.

    Raises:
        CheckFailed: always, without a chained traceback.
    """
    __tracebackhide__ = True
    raise CheckFailed(f"TODO {todo} ({name}): {message}") from None


def require_done(value: object, todo: int, name: str, expected: str) -> None:
    """Fails with "not done yet" when `value` is still the stub's `...`.

    Args:
        value: the learner's result.
        todo: the TODO's number.
        name: the result's name.
        expected: what a done result is, for the message.

    Raises:
        CheckFailed: when `value` is `...`.
    """
    __tracebackhide__ = True
    if value is Ellipsis:
        fail(todo, name, f"not done yet: {name} is still ... (Ellipsis). Expected {expected}.")


def require_result(result: object, todo: int, name: str, expected: str) -> None:
    """Fails with "not done yet" when a function returned ..., None, or a tuple holding one.

    This is decided from the value the learner's function returned, called eagerly, never
    from the wording of an error TensorFlow raises on it.

    Args:
        result: what the learner's function returned.
        todo: the TODO's number.
        name: the function's name.
        expected: what it should return, for the message.

    Raises:
        CheckFailed: when the result is not done.
    """
    __tracebackhide__ = True
    parts = result if isinstance(result, tuple) else (result,)
    if any(part is Ellipsis or part is None for part in parts):
        fail(todo, name, f"not done yet: it returns {describe(result)}. Expected {expected}.")


def describe(value: object) -> str:
    """A short description of a value for a message: a tensor by dtype and shape, not values.

    Args:
        value: anything; a tuple is described part by part.

    Returns:
        E.g. "a float32 tensor of shape (192, 192, 3)", "None", "a list".
    """
    if isinstance(value, tuple):
        return "(" + ", ".join(describe(part) for part in value) + ")"
    if value is Ellipsis or value is None:
        return repr(value)
    if isinstance(value, tf.Tensor | tf.Variable):
        return f"a {value.dtype.name} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def call_eagerly(
    function: Callable, args: Sequence, *, todo: int, name: str, expected: str
) -> object:
    """Calls `function(*args)` once, eagerly; fails on an error or on the stub's `...`.

    Run inside `Dataset.map` only afterwards, so that "not done yet" is decided from the
    value returned, not from the error TensorFlow raises when it meets `...` in a graph.

    Args:
        function: the learner's function.
        args: its arguments.
        todo: the TODO's number.
        name: the function's name.
        expected: what it should return, for the message.

    Returns:
        What `function` returned.

    Raises:
        CheckFailed: when it raises one of `CHECK_ERRORS` or returns a stub's value.
    """
    __tracebackhide__ = True
    try:
        result = function(*args)
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}; found an error: {first_line(error)}")
    require_result(result, todo, name, expected)
    return result


def require_dataset(value: object, todo: int, name: str, expected: str) -> None:
    """Fails unless `value` is done and a `tf.data.Dataset`.

    Args:
        value: the learner's result.
        todo: the TODO's number.
        name: the result's name.
        expected: what a done result is, for the message.

    Raises:
        CheckFailed: when `value` is `...` or not a dataset.
    """
    __tracebackhide__ = True
    require_done(value, todo, name, expected)
    if not isinstance(value, tf.data.Dataset):
        fail(todo, name, f"expected {expected}; found a {type(value).__name__}.")


def passed(todo: int, message: str) -> None:
    """Prints the check's one line: "TODO <todo> passed: <message>".

    Args:
        todo: the TODO's number.
        message: what was found, deterministic (it may be compared by nbval).
    """
    print(f"TODO {todo} passed: {message}")


class DatasetStep(NamedTuple):
    """One step of a dataset's graph: its op, its constant inputs, its `deterministic` attr."""

    op: str  # e.g. "ShuffleDatasetV3", "PrefetchDataset".
    constants: tuple  # Each input's value where it is a numeric constant, else None.
    # "true", "false" or "default" (follows `options.deterministic`); None: no such attr.
    deterministic: str | None = None


def dataset_steps(dataset: tf.data.Dataset) -> list[DatasetStep] | None:
    """Returns the steps of `dataset`'s graph, from source to output, with constant inputs.

    The one place a check reads a dataset's graph: only the order of steps (parse after
    batch, prefetch last, cache before repeat), a parallel map and a step's settings (a
    prefetch buffer of 1, a shuffle without a seed, an interleave that keeps its order
    whatever the options say) cannot be seen in the elements.
    Tolerant: should a TensorFlow version change how the graph is read, it returns None
    and the check skips those steps rather than fail a right answer.

    Args:
        dataset: the dataset to read the graph of.

    Returns:
        The steps, source first: e.g. `DatasetStep("PrefetchDataset", (None, -1))` for
        `prefetch(tf.data.AUTOTUNE)` (its input dataset, then its buffer size); None when
        the graph cannot be read.
    """
    try:
        graph = tf.raw_ops.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(dataset))
        graph_def = tf.compat.v1.GraphDef.FromString(graph.numpy())
    except (AttributeError, TypeError, ValueError, tf.errors.OpError):
        return None
    nodes = {node.name: node for node in graph_def.node}

    def constant(name: str) -> int | float | bytes | None:
        node = nodes.get(name.split(":")[0].lstrip("^"))
        if node is None or node.op != "Const":
            return None
        try:  # A resource (a shuffle's seed generator) has no numpy value.
            value = tf.make_ndarray(node.attr["value"].tensor)
        except (KeyError, TypeError, ValueError):
            return None
        return value.item() if value.size == 1 else None

    return [
        DatasetStep(
            node.op,
            tuple(constant(name) for name in node.input),
            node.attr["deterministic"].s.decode() if "deterministic" in node.attr else None,
        )
        for node in graph_def.node
        if "Dataset" in node.op
    ]


def dataset_ops(dataset: tf.data.Dataset) -> list[str] | None:
    """Returns the names of the dataset ops in `dataset`'s graph, from source to output.

    Args:
        dataset: the dataset to read the graph of.

    Returns:
        The op names (e.g. `"ParallelMapDatasetV2"`, `"PrefetchDataset"`), source first;
        None when the graph cannot be read (see `dataset_steps`).
    """
    steps = dataset_steps(dataset)
    return None if steps is None else [step.op for step in steps]
