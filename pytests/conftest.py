"""Shared pytest set-up: every test starts and ends with an empty dynamo cache and seeded RNGs,
and every graph a test produces must have compiled: `fx.GraphModule` generates and compiles
Python code for each graph it is given, so a graph whose code is not valid Python (or any other
internal compiler failure) shows up as a `compile_errors` count, which fails the test."""

import random

import pytest
import torch

import dynamo

# A sample user suite, run by test_pytest_plugin.py through pytester with the plugin's options.
collect_ignore = ["plugin_sample"]


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (long training runs; ci/test passes it)")


def pytest_configure(config):
    config.addinivalue_line("markers", "compile_errors_expected: the test provokes internal compiler failures on purpose")
    config.addinivalue_line("markers", "slow: takes tens of seconds; skipped unless --runslow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_dynamo_state(request):
    """Reset dynamo's caches and counters around each test, and seed torch and random."""
    dynamo.reset()
    torch.manual_seed(0)
    random.seed(0)
    yield
    errors = dynamo.counters()["compile_errors"]
    dynamo.reset()
    if request.node.get_closest_marker("compile_errors_expected") is None:
        assert errors == 0, f"{errors} frame(s) failed inside the compiler and ran eagerly (see the dynamo warning)"
