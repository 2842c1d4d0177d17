"""Tests with a graph break, opted-out tests, and a test reading its own counters."""

import pytest
import torch

import dynamo


def helper(x):
    return torch.relu(x) * 2


def test_graph_break_in_the_middle():
    x = torch.randn(8)
    y = x.sin() + 1
    print("graph break here")  # a call the compiler does not capture
    return helper(y.cos())


def test_data_dependent_branch():
    x = torch.arange(5.0)
    if x.sum().item() > 3:  # .item() leaves the graph
        return x * 2
    return x


@pytest.mark.dynamo_skip(reason="exercises an eager-only API")
def test_skipped_by_marker():
    prev = dynamo._C.set_eval_frame(None)  # the callback in force (None: running eagerly)
    dynamo._C.set_eval_frame(prev)
    assert prev is None
    return torch.ones(2)


@dynamo.disable
def test_disabled_by_decorator():
    return torch.zeros(3) + 1


def test_counts_its_own_graphs(dynamo_counters):
    def f(x):
        return x.exp() + x

    dynamo.optimize("eager")(f)(torch.randn(4))
    assert dynamo_counters["graphs"] >= 1
    assert dynamo_counters["recompiles"] == 0


def test_nothing_to_capture():
    assert [1, 2] + [3] == [1, 2, 3]
