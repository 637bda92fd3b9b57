"""`python -m tools.benchmark NAME`: each side benchmark by its name, with its own options."""

import pytest

from tools import benchmark


@pytest.mark.parametrize("name", sorted(benchmark.SIDE_BENCHMARKS))
def test_a_side_benchmark_runs_by_its_name_with_its_own_options(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([name, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m tools.benchmark {name} [-h]")


def test_the_course_benchmark_s_help_names_each_side_benchmark(capsys):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["--help"])
    assert exit_info.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert help_text.startswith("usage: python -m tools.benchmark [-h] [--quick]")
    for name, (_, what) in benchmark.SIDE_BENCHMARKS.items():
        assert f"{name}: {what}" in help_text, name
