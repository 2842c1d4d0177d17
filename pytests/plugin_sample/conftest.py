"""Sample suite for the pytest plugin (run by ../test_pytest_plugin.py through pytester; the
main `pytest pytests` run does not collect it). Registers the `perturb` backend: a planted
wrong-result bug that adds 0.5 to the first output of every graph containing `torch.cumsum`,
which `--dynamo-compare` must catch and report with the test's name."""

import pytest
import torch

import dynamo


def pytest_configure(config):
    # Tests return their results for --dynamo-compare; run plainly, pytest would warn.
    config.addinivalue_line("filterwarnings", "ignore::pytest.PytestReturnNotNoneWarning")


@dynamo.backends.register_backend(name="perturb")
def perturb(gm, example_inputs):
    forward = gm.forward
    if not any(n.target is torch.cumsum or n.target == "cumsum" for n in gm.graph.nodes):
        return forward

    def run(*args):
        out = forward(*args)
        return (out[0] + 0.5, *out[1:])

    return run


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@pytest.fixture
def batch():
    torch.manual_seed(1)
    return torch.randn(6, 8), torch.randn(6, 4)
