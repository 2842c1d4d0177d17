"""Findings of stop 46's testers and leftovers of earlier ones: each is the smallest program
that differed from eager, run eagerly and compiled and compared exactly (values, types,
identity, mutated state), with graph counts that show the code was captured."""

import copy

import pytest
import torch

import dynamo


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def check(f, *args, backend="eager", graphs=1):
    """Runs `f` eagerly and compiled on deep copies of `args`; compares results and the
    arguments afterwards; returns the compiled result."""
    want_args = copy.deepcopy(args)
    want = f(*want_args)
    dynamo.reset()
    got_args = copy.deepcopy(args)
    explained = dynamo.explain(f)(*copy.deepcopy(args))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(*got_args)
    assert _same(got, want), (got, want)
    assert all(_same(g, w) for g, w in zip(got_args, want_args))
    assert explained.graph_count == graphs, explained.break_reasons
    assert explained.graph_break_count == 0, explained.break_reasons
    return got


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_every_read_of_tensor_device_is_a_new_object(backend):
    # Eager's `x.device` is a new torch.device at every read (THPDevice_New); a fake tensor
    # hands out one object, so `x.device is x.device` was True.
    def f(x):
        d = x.device
        return x.device is x.device, d is d, x.device == d, x.device is torch.device("cpu"), x + 1

    check(f, torch.ones(3), backend=backend)
