"""tools.utils_usage: which names of `utils` the lessons reach; every module of `utils` imports."""

import importlib
import textwrap
from pathlib import Path

from tools import utils_usage


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_report_follows_lessons_through_utils_and_names_the_rest(tmp_path):
    _write(
        tmp_path,
        {
            "utils/__init__.py": '"""Course."""\n',
            "utils/timing.py": """\
                from utils import helpers


                def measure():
                    return helpers.count()


                def describe_machine():
                    return "2 cores"


                class Watch:
                    def summary(self):
                        return 1

                    def probe(self):
                        return 2
                """,
            "utils/helpers.py": """\
                def count():
                    return 1


                def unused():
                    return 2
                """,
            "notebooks/01_lesson.py": """\
                from utils import timing

                timing.measure()
                timing.Watch().summary()
                """,
            "tools/bench.py": "from utils.timing import describe_machine\n",
        },
    )
    total, reached, lines = utils_usage.report(tmp_path, show_names=True)
    assert (total, reached) == (24, 18)
    assert lines[1:] == [
        "utils                                   1         0  ",
        "utils.helpers                           6         2  unused",
        "    unused (2 lines): nobody",
        "utils.timing                           17         4  describe_machine, Watch.probe",
        "    describe_machine (2 lines): tools",
        "    Watch.probe (2 lines): (a method: grep its name)",
        "total (checks apart)                   24         6",
        "utils.checks (all)                      0",
        "by place: top 24, lab 0, lessons 0, checks 0",
        "01_lesson reaches 24 lines in 3 files (its lab's)",  # With timing's helpers.
    ]


def test_every_utils_module_imports():
    """Each module alone (the import rules between them: pyproject.toml's contracts)."""
    modules = utils_usage.package_modules()
    assert "utils.lab.runtime" in modules and "utils.checks._base" in modules
    for name in modules:
        assert importlib.import_module(name).__name__ == name
