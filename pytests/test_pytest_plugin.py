"""The pytest plugin (python/dynamo/pytest_plugin.py), driven with pytester on the sample suite
in plugin_sample/ (36 tests: modules, training steps, numerics, graph breaks, opted-out tests).
Each test runs the sample in a fresh pytest process with the plugin's options."""

import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SAMPLE = Path(__file__).parent / "plugin_sample"
N_SAMPLE = 36


@pytest.fixture
def sample(pytester):
    shutil.copytree(SAMPLE, pytester.path / "sample", ignore=shutil.ignore_patterns("__pycache__"))
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("sample", "-p", "no:cacheprovider", "-rf", *args)


def summary_of(result, nodeid):
    """The summary line of test `nodeid` (ends with its name) and the indented lines after it."""
    lines = result.outlines
    start = next(i for i, l in enumerate(lines) if l.startswith(f"sample/{nodeid}: graphs="))
    block = [lines[start]]
    for l in lines[start + 1:]:
        if not l.startswith("    "):
            break
        block.append(l)
    return block


def test_registered_through_pytest11_entry_point():
    eps = entry_points(group="pytest11")
    assert any(ep.value == "dynamo.pytest_plugin" for ep in eps), list(eps)


def test_sample_passes_under_inductor_and_summary_reports(sample):
    r = run(sample, "--dynamo=inductor")
    r.assert_outcomes(passed=N_SAMPLE)
    out = r.stdout.str()
    assert "dynamo summary (inductor)" in out
    # The break test: two graphs split at print, with the reason.
    block = summary_of(r, "test_special.py::test_graph_break_in_the_middle")
    assert "graphs=2 graph_breaks=1 recompiles=0" in block[0], block
    assert any("graph break:" in l and "print" in l for l in block[1:]), block
    # A test with no tensor code is listed as capturing nothing; opted-out tests are not compiled.
    nothing = out.split("captured nothing", 1)[1].split("opted out", 1)[0]
    assert "test_special.py::test_nothing_to_capture" in nothing
    assert "test_modules.py::test_mlp_forward_returns" not in nothing
    opted = out.split("opted out (2):", 1)[1]
    assert "test_skipped_by_marker (dynamo_skip: exercises an eager-only API)" in opted
    assert "test_disabled_by_decorator (dynamo.disable)" in opted
    assert "sample/test_special.py::test_skipped_by_marker: graphs=" not in out
    assert f"total: {N_SAMPLE - 2} tests compiled" in out


def test_compare_passes_on_correct_backend(sample):
    r = run(sample, "--dynamo-compare")
    r.assert_outcomes(passed=N_SAMPLE)
    out = r.stdout.str()
    assert "dynamo summary (inductor, compare)" in out
    assert "compare mismatches (0):" in out
    assert "test_counts_its_own_graphs (reads dynamo_counters)" in out


def test_compare_catches_a_planted_wrong_result(sample):
    # conftest's `perturb` backend adds 0.5 to the first output of graphs with a cumsum: only
    # test_cumsum_returns computes one, and nothing in the test itself checks it.
    r = run(sample, "--dynamo=perturb", "--dynamo-compare")
    r.assert_outcomes(passed=N_SAMPLE - 1, failed=1)
    r.stdout.fnmatch_lines([
        "*MISMATCH sample/test_numerics.py::test_cumsum_returns: compiled result differs from eager (perturb): return value:*",
        "FAILED sample/test_numerics.py::test_cumsum_returns - *",
    ])
    assert "compare mismatches (1):" in r.stdout.str()
    # Without --dynamo-compare the planted bug goes unnoticed (the test only returns its value).
    run(sample, "--dynamo=perturb").assert_outcomes(passed=N_SAMPLE)


def test_compare_checks_assert_close_arguments(sample):
    # A bug the test's own assertion cannot see: both of its sides come from the same wrong
    # graph output. A test whose compiled run fails where its eager run passed is listed too.
    (sample.path / "sample" / "test_both_sides.py").write_text(
        "import torch\n"
        "def test_both_sides_compiled():\n"
        "    y = torch.cumsum(torch.arange(4.0), 0)\n"
        "    torch.testing.assert_close(y, y)\n"
        "def test_own_assertion_fails():\n"
        "    x = torch.arange(4.0)\n"
        "    torch.testing.assert_close(torch.cumsum(x, 0), torch.tensor([0.0, 1.0, 3.0, 6.0]))\n"
    )
    r = run(sample, "--dynamo=perturb", "--dynamo-compare", "-k", "both_sides or own_assertion")
    r.assert_outcomes(failed=2)
    r.stdout.fnmatch_lines([
        "compare mismatches (2):",
        "*MISMATCH sample/test_both_sides.py::test_both_sides_compiled: compiled result differs from eager (perturb): assert_close #1 actual*",
        "*MISMATCH sample/test_both_sides.py::test_own_assertion_fails: eager run passed, compiled run (perturb) raised AssertionError*",
    ])


def test_nopython_fails_at_the_first_graph_break(sample):
    r = run(sample, "--dynamo=inductor", "--dynamo-nopython", "-k", "graph_break_in_the_middle or test_reductions or skipped_by_marker")
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines([
        "E*Unsupported: graph break in test_graph_break_in_the_middle*nopython=True*call to builtin print*",
        "FAILED sample/test_special.py::test_graph_break_in_the_middle*",
    ])


def test_without_options_the_suite_runs_eagerly(sample):
    # The fixture still counts (test_counts_its_own_graphs compiles explicitly); the marker and
    # disabled tests run; no summary section.
    r = run(sample)
    r.assert_outcomes(passed=N_SAMPLE)
    assert "dynamo summary" not in r.stdout.str()


def test_dynamo_counters_fixture_counts_only_its_test(pytester):
    pytester.makepyfile(
        test_counts="""
        import torch
        import dynamo

        def f(x):
            return x.sin() + 1

        def test_first(dynamo_counters):
            dynamo.optimize("eager")(f)(torch.randn(3))
            dynamo.optimize("eager")(f)(torch.randn(4))
            assert dynamo_counters["graphs"] == 2
            assert dynamo_counters["recompiles"] == 1
            assert len(dynamo_counters.recompile_reasons) == 1

        def test_second(dynamo_counters):
            assert dynamo_counters["graphs"] == 0
            assert dynamo_counters.break_reasons == []
        """
    )
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=2)


def test_failing_test_log_holds_no_structured_trace_records(pytester):
    # torch's structured-trace logger ("torch.__trace") logged empty DEBUG records while dynamo
    # traced; pytest attaches its capture handler to it, so they filled "Captured log call".
    pytester.makepyfile(test_noise='''
import torch
def test_fails():
    w = torch.ones(2)
    losses = [(w * i).sum().item() for i in range(3)]
    assert losses == [0.0, 2.0, 5.0]
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--dynamo=inductor")
    result.assert_outcomes(failed=1)
    assert "torch.__trace" not in result.stdout.str()
