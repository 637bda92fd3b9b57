"""Tests of tools/build_notebooks.py: regions, stubs, validation, determinism, --check."""

import ast
import base64
import json
import lzma
import os
import re
import shutil
import tempfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools.building import machine, setup_cell
from tools.building import outputs as build_outputs
from tools.building.header import SOLUTION_NOTE, graded_note
from tools.building.model import Lesson
from tools.building.outputs import EXECUTION_SECONDS, METADATA_KEY, without_machine_paths
from tools.building.regions import BuildError, find_regions, make_stub
from tools.building.variants import STEPS, split_variants, to_text

TMP = tempfile.gettempdir().rstrip("/")
MINIMAL_LESSON = '''# %% [markdown]
# # Lab 9 · A test lesson
#
# **You will:**
#
# 1. Make a number (TODO 1).
# 2. Write a function (TODO 2).

# %% tags=["parameters"]
SIZE = 3

# %%
# TODO 1: make a number.
### BEGIN SOLUTION
answer = SIZE * 14
### END SOLUTION

# %%
checks.check_number(answer, todo=1)

# %%
def double(x):
    """Doubles x."""
    # TODO 2: return twice x.
    ### BEGIN SOLUTION
    result = 2 * x
    ### END SOLUTION
    return result


# %%
checks.check_double(double, todo=2)
'''


def _lesson_root(tmp_path, text=MINIMAL_LESSON, name="09_test_lesson.py"):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / name).write_text(text)
    return tmp_path


def _code_sources(notebook):
    """The code cells' sources, but the lab's hand-in cells (tests/test_hand_in.py)."""
    cells = [c for c in notebook.cells if "hand_in" not in c.metadata.get("tags", [])]
    return [cell.source for cell in cells if cell.cell_type == "code"]


def test_find_regions_returns_line_numbers():
    text = (
        "a\n### BEGIN SOLUTION\nb\n### END SOLUTION\n    ### BEGIN SOLUTION\n    ### END SOLUTION\n"
    )
    assert find_regions(text, "x.py") == [(2, 4), (5, 6)]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "### BEGIN SOLUTION\n### BEGIN SOLUTION\n",
            r"^x.py:2: ### BEGIN SOLUTION inside the region opened at line 1",
        ),
        ("ok\n### BEGIN SOLUTION\nb\n", r"^x.py:2: ### BEGIN SOLUTION without ### END SOLUTION"),
        ("### END SOLUTION\n", r"^x.py:1: ### END SOLUTION without ### BEGIN SOLUTION"),
    ],
    ids=["nested", "unterminated", "end without begin"],
)
def test_find_regions_malformed_names_file_and_line(text, message):
    with pytest.raises(BuildError, match=message):
        find_regions(text, "x.py")


def test_make_stub_assigns_ellipsis_to_each_name_and_keeps_indent():
    region = [
        "    options = tf.data.Options()",
        "    options.threading.private_threadpool_size = 4",
        "    image, label = f(x)",
        "    total += 1",
        "    print(image)",
    ]
    stub = make_stub(region, 1, "x.py")
    assert stub == [
        "    options = ...",
        "    image = ...",
        "    label = ...",
        "    total = ...",
    ]


def test_make_stub_finds_names_assigned_inside_blocks_but_not_in_functions():
    region = [
        "with strategy.scope():",
        "    model = make_model()",
        "    model.compile()",
        "for path in paths:",
        "    count += 1",
        "def helper():",
        "    hidden = 1",
    ]
    assert make_stub(region, 4, "x.py") == ["model = ...", "count = ..."]


def test_make_stub_subscript_assignment_stubs_no_index_name():
    # Lab 2's to_example: `one_hot[class_index] = 1.0` must not stub the parameter.
    region = [
        "    one_hot = [0.0] * len(class_names)",
        "    one_hot[class_index] = 1.0",
        "    table[key].value, (first, *rest) = 2, pair",
        "    label = class_names[class_index].encode()",
    ]
    assert make_stub(region, 3, "x.py") == [
        "    one_hot = ...",
        "    first = ...",
        "    rest = ...",
        "    label = ...",
    ]


def test_make_stub_lab2_to_example_keeps_class_index():
    source = REPO_ROOT / "notebooks" / "02_write_tfrecords.py"
    lab, _ = split_variants(source, REPO_ROOT)
    (cell,) = [c for c in lab.cells if "def to_example(" in c.source]
    assert "class_index = ..." not in cell.source
    assert "    one_hot = ..." in cell.source


def test_make_stub_without_assignments_is_an_ellipsis():
    assert make_stub(["print('hi')"], 1, "x.py") == ["..."]


def test_make_stub_invalid_python_names_the_todo():
    with pytest.raises(BuildError, match=r"x.py: the solution of TODO 3 is not valid"):
        make_stub(["answer = ("], 3, "x.py")


def test_split_variants_lab_has_stubs_solution_has_code(tmp_path):
    root = _lesson_root(tmp_path)
    lab, solution = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    lab_code, solution_code = _code_sources(lab), _code_sources(solution)
    assert lab_code[1] == "# TODO 1: make a number.\nanswer = ..."
    assert solution_code[1] == "# TODO 1: make a number.\nanswer = SIZE * 14"
    assert "    result = ...\n    return result" in lab_code[3]
    assert "BEGIN SOLUTION" not in "".join(lab_code + solution_code)
    for code in lab_code:
        ast.parse(code)  # Every stub still runs.


def test_the_build_is_its_named_steps_in_order(tmp_path):
    root = _lesson_root(tmp_path)
    assert [name for name, _ in STEPS] == [
        "split into lab and solution, stubs for the lab",
        "validate the TODOs and checks",
        "add the hand-in cells",
        "stamp the course version",
        "put the set-up code",
        "tag the unchecked outputs",
        "add the header",
    ]
    lesson = Lesson(root / "notebooks" / "09_test_lesson.py", root)
    first, *rest = [step for _, step in STEPS]
    first(lesson)
    assert lesson.todos == [1, 2] and len(lesson.lab.cells) == len(lesson.solution.cells) == 6
    assert "answer = ..." in lesson.lab.cells[2].source  # A stub, no header yet.
    for step in rest:
        step(lesson)
    assert lesson.lab.cells[1].id == "cell-links"
    expected = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    assert [to_text(n) for n in lesson.variants] == [to_text(n) for n in expected]


def test_split_variants_marks_todo_and_check_cells(tmp_path):
    root = _lesson_root(tmp_path)
    lab, _ = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    marks = [cell.metadata.get("tpu_speed_pipelines") for cell in lab.cells]
    assert [m for m in marks if m] == [
        {"todo": 1, "points": 1},
        {"check": 1},
        {"todo": 2, "points": 1},
        {"check": 2},
    ]
    assert ["parameters"] in [cell.metadata.get("tags") for cell in lab.cells]
    ids = [cell.id for cell in lab.cells if cell.metadata.get("tpu_speed_pipelines")]
    assert ids == ["todo-1", "check-1", "todo-2", "check-2"]  # Stable: from the TODO's number.


def test_split_variants_header_banner_links_and_metadata(tmp_path):
    root = _lesson_root(tmp_path)
    lab, solution = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    assert lab.cells[0].source.startswith(
        "<!-- Generated from notebooks/09_test_lesson.py by tools/build_notebooks.py."
    )
    assert lab.cells[1].source == graded_note({1: 1, 2: 1})  # Not published: no links.
    assert "colab.research" not in nbformat.writes(lab) + nbformat.writes(solution)
    assert lab.metadata["tpu_speed_pipelines"] == {
        "source": "notebooks/09_test_lesson.py",
        "variant": "lab",
        "version": setup_cell.course_version(),
    }
    assert lab.metadata["kernelspec"]["name"] == "python3"
    assert [c.id for c in lab.cells if "hand_in" not in c.metadata.get("tags", [])] == [
        c.id for c in solution.cells
    ]  # The lab has its hand-in cells besides (tests/test_hand_in.py).


def test_a_lab_is_written_as_jupyter_saves_it_with_the_kernel_s_own_metadata(tmp_path):
    """JupyterLab rewrites what differs from nbformat's form or from what the kernel says."""
    root = _lesson_root(tmp_path)
    lab, _ = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    text = to_text(lab)
    assert nbformat.writes(nbformat.reads(text, as_version=4)) + "\n" == text
    assert all(cell.id for cell in lab.cells)
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    assert lab.metadata["kernelspec"] == {
        "display_name": spec["display_name"],
        "language": spec["language"],
        "name": KERNEL_NAME,
    }
    kernel_says = dict(IPythonKernel.language_info)
    assert lab.metadata["language_info"] == {
        key: value for key, value in kernel_says.items() if key != "version"
    }


@pytest.mark.parametrize(
    "edit, message",
    [
        (("(TODO 2)", "(TODO 3)"), r"objectives in the first cell name TODOs \[1\]"),
        (
            ("# TODO 2: return", "# TODO 3: return"),
            r"TODOs must be numbered 1..N in order; found \[1, 3\]",
        ),
        (
            ("checks.check_double(double, todo=2)", "double(1)"),
            r"TODO 2 must be followed by a check cell",
        ),
        (('# %% tags=["parameters"]', "# %%"), r"expected one cell tagged parameters; found 0"),
        (
            ("    # TODO 2: return twice x.\n", ""),
            r"cell \d+\): a solution region with no `# TODO n:`",
        ),
    ],
    ids=[
        "objective mismatch",
        "numbering gap",
        "no check cell",
        "no parameters",
        "no TODO comment",
    ],
)
def test_split_variants_malformed_lesson_says_what_is_wrong(tmp_path, edit, message):
    root = _lesson_root(tmp_path, MINIMAL_LESSON.replace(*edit))
    with pytest.raises(BuildError, match=message):
        split_variants(root / "notebooks" / "09_test_lesson.py", root)


def test_split_variants_links_to_the_configured_repository_at_the_version_tag(tmp_path):
    root = _lesson_root(tmp_path)
    (root / "pyproject.toml").write_text(
        '[project]\nversion = "9.9"\n\n[tool.tpu-speed-pipelines]\nrepository = "someone/course"\n'
    )
    lab, solution = split_variants(root / "notebooks" / "09_test_lesson.py", root)
    colab = "https://colab.research.google.com/github/someone/course/blob/v9.9"
    raw = "https://raw.githubusercontent.com/someone/course/v9.9"
    assert lab.cells[1].source == (
        f"[Open in Colab]({colab}/labs/09_test_lesson.ipynb) · [Open in Vertex AI Workbench]"
        "(https://console.cloud.google.com/vertex-ai/workbench/deploy-notebook?download_url="
        f"{raw}/labs/09_test_lesson.ipynb)\n\n{graded_note({1: 1, 2: 1})}"
    )
    assert solution.cells[1].source == (
        f"[Open in Colab]({colab}/solutions/09_test_lesson.ipynb) · [Open in Vertex AI "
        "Workbench](https://console.cloud.google.com/vertex-ai/workbench/deploy-notebook?"
        f"download_url={raw}/solutions/09_test_lesson.ipynb)\n\n"
        + SOLUTION_NOTE.format(stem="09_test_lesson")
    )


SETUP_LESSON = MINIMAL_LESSON.replace(
    '# %% tags=["parameters"]', '# %% tags=["setup"]\n# The set-up.\n\n# %% tags=["parameters"]'
)


def _course_root(tmp_path):
    root = _lesson_root(tmp_path, SETUP_LESSON)
    (root / "pyproject.toml").write_text('[project]\nversion = "9.9"\n')
    # The set-up cell lists what the course installs where it is missing, from these pins.
    (root / "requirements.txt").write_text((REPO_ROOT / "requirements.txt").read_text())
    (root / "utils" / "checks").mkdir(parents=True)
    (root / "utils" / "__init__.py").write_text('COURSE = "tpu-speed-pipelines"\n')
    # Reached through the checks (every lab embeds them): the module the tests below change.
    (root / "utils" / "checks" / "__init__.py").write_text(
        '"""Checks."""\nfrom utils import timing\n'
    )
    (root / "utils" / "timing.py").write_text("SPEED = 0\n")
    build.build(root, execute=False)
    return root


UNEXECUTED = "solutions/09_test_lesson.ipynb has no outputs. Run: make build"


def test_check_names_notebooks_whose_embedded_course_differs_from_utils(tmp_path):
    root = _course_root(tmp_path)
    assert build.check(root) == [UNEXECUTED]
    (root / "utils" / "timing.py").write_text("SPEED = 1\n")
    assert build.check(root) == [
        f"{folder}/09_test_lesson.ipynb embeds a course package that differs from the "
        "checkout's in 1 file(s): utils/timing.py. Run: make build"
        for folder in ("labs", "solutions")
    ]


def test_embed_only_rewrites_only_the_set_up_cells_and_keeps_the_outputs(
    tmp_path, monkeypatch, capsys
):
    root = _course_root(tmp_path)
    path = root / "solutions" / "09_test_lesson.ipynb"
    solution = nbformat.read(path, as_version=4)
    answer = next(c for c in solution.cells if c.id == "todo-1")
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    path.write_text(to_text(solution))
    (root / "utils" / "timing.py").write_text("SPEED = 1\n")
    before = {p: nbformat.read(p, as_version=4) for p in (path, root / "labs" / path.name)}
    monkeypatch.setattr(build, "REPO_ROOT", root)
    capsys.readouterr()  # What the build above printed.
    assert build.main(["--embed-only"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Re-embedded the course in labs/09_test_lesson.ipynb",
        "Re-embedded the course in solutions/09_test_lesson.ipynb",
        "Re-embedded the course in 2 notebook(s).",
    ]
    assert build.check(root) == []  # The solution's output is still there.
    for written, old in before.items():
        new = nbformat.read(written, as_version=4)
        changed = [c.id for c, o in zip(new.cells, old.cells, strict=True) if c != o]
        assert changed == [c.id for c in old.cells if "setup" in c.metadata.get("tags", [])]
    assert build.embed_only(root) == []  # Nothing left to embed.
    (root / "labs" / path.name).unlink()
    with pytest.raises(BuildError, match=r"^labs/09_test_lesson.ipynb is missing"):
        build.embed_only(root)


def test_check_accepts_the_same_course_compressed_differently(tmp_path):
    root = _course_root(tmp_path)
    path = root / "labs" / "09_test_lesson.ipynb"
    text = path.read_text()
    data = json.dumps(setup_cell.course_files("09_test_lesson", root), sort_keys=True).encode()
    other = base64.b85encode(lzma.compress(data, preset=0)).decode()
    _, ours = setup_cell.payload("09_test_lesson", root)
    assert other != ours
    path.write_text(text.replace(json.dumps(ours)[1:-1], other))
    assert path.read_text() != text
    assert build.check(root) == [UNEXECUTED]
    path.write_text(text.replace("COURSE_MARK = ", "COURSE_MARK  = "))
    assert build.check(root)[0].startswith("labs/09_test_lesson.ipynb is out of date")


def test_build_twice_writes_identical_bytes(tmp_path):
    root = _lesson_root(tmp_path)
    first = {p: p.read_bytes() for p in build.build(root, execute=False)}
    second = {p: p.read_bytes() for p in build.build(root, execute=False)}
    assert first == second
    assert build.check(root) == ["solutions/09_test_lesson.ipynb has no outputs. Run: make build"]


EXECUTABLE_LESSON = MINIMAL_LESSON.replace(
    '# %% tags=["parameters"]',
    """# %%
from types import SimpleNamespace

checks = SimpleNamespace(
    check_number=lambda value, todo: print(f"TODO {todo} passed: {value}"),
    check_double=lambda function, todo: print(f"TODO {todo} passed: {function(2)}"),
)

# %% tags=["parameters"]""",
)


def test_build_executes_solution_and_keeps_only_its_outputs(tmp_path):
    root = _lesson_root(tmp_path, EXECUTABLE_LESSON)
    build.build(root, execute=True)
    solution = nbformat.read(root / "solutions" / "09_test_lesson.ipynb", as_version=4)
    printed = [o.text for c in solution.cells for o in c.get("outputs", [])]
    assert printed == ["TODO 1 passed: 42\n", "TODO 2 passed: 4\n"]  # No hand-in: the lab's.
    assert "papermill" not in solution.metadata
    assert [cell.id for cell in solution.cells if "papermill" in cell.metadata] == []
    seconds = solution.metadata[METADATA_KEY].pop(EXECUTION_SECONDS)
    assert isinstance(seconds, int) and 0 <= seconds < 120  # The README's lesson time.
    measured = solution.metadata[METADATA_KEY].pop(build_outputs.BUILD_MACHINE)
    assert measured["description"] == machine.describe_machine()
    assert measured["jpeg_decodes_per_second"] > 0  # The course run's estimate scales by it.
    assert solution.metadata[METADATA_KEY] == {
        "source": "notebooks/09_test_lesson.py",
        "variant": "solution",
        "version": setup_cell.course_version(),
    }
    assert build.check(root) == []  # The time is not compared with the source.


def test_check_hand_edited_lab_fails_naming_the_file(tmp_path):
    root = _lesson_root(tmp_path)
    build.build(root, execute=False)
    lab_path = root / "labs" / "09_test_lesson.ipynb"
    lab_path.write_text(lab_path.read_text().replace("answer = ...", "answer = 42"))
    problems = build.check(root)
    assert (
        "labs/09_test_lesson.ipynb is out of date with notebooks/09_test_lesson.py. Run: make build"
        in problems
    )


def test_check_stale_and_missing_files(tmp_path):
    root = _lesson_root(tmp_path)
    build.build(root, execute=False)
    (root / "labs" / "09_test_lesson.ipynb").unlink()
    shutil.copy(root / "solutions" / "09_test_lesson.ipynb", root / "solutions" / "08_old.ipynb")
    problems = build.check(root)
    assert (
        "solutions/08_old.ipynb has no source in notebooks/. Delete it, or add notebooks/08_old.py."
        in problems
    )
    assert "labs/09_test_lesson.ipynb is missing. Run: make build" in problems


def test_check_ignores_outputs_of_solutions(tmp_path):
    root = _lesson_root(tmp_path)
    build.build(root, execute=False)
    path = root / "solutions" / "09_test_lesson.ipynb"
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    code[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    code[0].execution_count = 1
    path.write_text(to_text(notebook))
    assert build.check(root) == []


def test_main_check_on_this_repository_passes(capsys):
    assert build.main(["--check"]) == 0
    assert "labs/ and solutions/ match notebooks/" in capsys.readouterr().out


def test_main_reports_build_errors_with_exit_code_1(tmp_path, monkeypatch, capsys):
    root = _lesson_root(
        tmp_path, MINIMAL_LESSON.replace("### END SOLUTION\n\n# %%\nchecks", "\n# %%\nchecks", 1)
    )
    monkeypatch.setattr(build, "REPO_ROOT", root)
    assert build.main(["--no-execute"]) == 1
    assert "notebooks/09_test_lesson.py:" in capsys.readouterr().err


def _solution_lines(cell_source):
    """The stripped lines inside a source cell's solution blocks, and those outside them."""
    inside, outside, in_block = set(), set(), False
    for line in cell_source.splitlines():
        if line.strip() in ("### BEGIN SOLUTION", "### END SOLUTION"):
            in_block = line.strip() == "### BEGIN SOLUTION"
        elif line.strip():
            (inside if in_block else outside).add(line.strip())
    return inside, outside


def test_real_labs_have_no_solution_code_and_parse():
    for source in build.lesson_sources(REPO_ROOT):
        lab, solution = split_variants(source)
        graded = [c for c in lab.cells if "hand_in" not in c.metadata.get("tags", [])]
        for cell_lab, cell_solution in zip(graded, solution.cells, strict=True):
            assert cell_lab.id == cell_solution.id
            if cell_lab.cell_type == "code":
                ast.parse(cell_lab.source)
        todo_cells = {
            c.metadata[METADATA_KEY]["todo"]: c
            for c in lab.cells
            if "todo" in c.metadata.get(METADATA_KEY, {})
        }
        # The core's 11 TODOs (issue 50: two hours), then the optional lessons'.
        todos = {"01": 3, "02": 2, "03": 2, "04": 2, "05": 2, "06": 2, "07": 3, "08": 1, "09": 3}
        assert len(todo_cells) == todos[source.name[:2]], source.name
        blocks = [c.source for c in jupytext.read(source).cells if "### BEGIN SOLUTION" in c.source]
        assert len(blocks) == len(todo_cells), source.name
        for block in blocks:
            todo = int(re.search(r"# TODO (\d+):", block).group(1))
            inside, outside = _solution_lines(block)
            lab_lines = {line.strip() for line in todo_cells[todo].source.splitlines()}
            leaked = (inside - outside) & lab_lines
            assert leaked == set(), f"{source.name} TODO {todo} shows solution code: {leaked}"
            assert inside, f"{source.name} TODO {todo}: an empty solution block"


def test_without_machine_paths_shows_home_as_a_tilde_and_temporary_folders_as_tmpdir():
    outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="Shards in /home/ann/.cache/x\n"),
        nbformat.v4.new_output(
            "execute_result", data={"text/plain": "'/home/ann/a.jpg'", "image/png": "iVBO"}
        ),
        nbformat.v4.new_output("stream", name="stdout", text="/home/annex/b.jpg\n"),
        nbformat.v4.new_output("stream", name="stdout", text=f"{TMP}/tmp1xt5phr0/damaged\n"),
    ]
    shown = without_machine_paths(outputs, home=Path("/home/ann"))
    assert shown[0]["text"] == "Shards in ~/.cache/x\n"
    assert shown[1]["data"] == {"text/plain": "'~/a.jpg'", "image/png": "iVBO"}
    assert shown[2]["text"] == "/home/annex/b.jpg\n"  # Another user's folder is left alone.
    assert shown[3]["text"] == "$TMPDIR/damaged\n"
    assert outputs[0]["text"] == "Shards in /home/ann/.cache/x\n"  # The input is not changed.


def test_split_variants_rejects_an_empty_cell_naming_file_and_line(tmp_path):
    root = _lesson_root(
        tmp_path, MINIMAL_LESSON.replace("# %%\ndef double", "# %%\n\n# %%\ndef double")
    )
    with pytest.raises(BuildError) as error:
        split_variants(root / "notebooks" / "09_test_lesson.py", root)
    assert str(error.value) == (
        "notebooks/09_test_lesson.py:21: an empty code cell. Delete its `# %%` line, "
        "or put code or text in it."
    )


def test_split_variants_rejects_an_empty_markdown_cell(tmp_path):
    root = _lesson_root(
        tmp_path, MINIMAL_LESSON.replace("# %%\ndef double", "# %% [markdown]\n# %%\ndef double")
    )
    with pytest.raises(
        BuildError, match=r"^notebooks/09_test_lesson.py:21: an empty markdown cell\."
    ):
        split_variants(root / "notebooks" / "09_test_lesson.py", root)


def test_execute_solution_runs_lab_4_on_a_jax_device_and_restores_the_environment(
    monkeypatch, tmp_path
):
    # Issue 60, item 4: lab 4's committed solution runs the lines its learners type,
    # Keras on JAX with DataParallel, on one device as on Colab's v5e-1; the kernel papermill starts
    # inherits the environment set around it, and the build's own is left as it was.
    import papermill

    seen = {}

    def execute_notebook(unexecuted, executed, **options):
        seen.update({name: os.environ.get(name) for name in ("KERAS_BACKEND", "XLA_FLAGS")})
        shutil.copy(unexecuted, executed)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setattr(machine, "build_machine", lambda: {})
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    notebook.metadata[METADATA_KEY] = {"source": "notebooks/04_train_keras.py"}
    build_outputs.execute_solution(notebook, cwd=tmp_path)
    assert seen == {
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
    }
    assert os.environ["KERAS_BACKEND"] == "tensorflow" and "XLA_FLAGS" not in os.environ
    notebook.metadata[METADATA_KEY] = {"source": "notebooks/05_accelerator_waiting.py"}
    build_outputs.execute_solution(notebook, cwd=tmp_path)
    assert seen == {"KERAS_BACKEND": "tensorflow", "XLA_FLAGS": None}
