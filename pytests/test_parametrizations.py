"""Parametrized modules (`torch.nn.utils.parametrize`): the `weight` property that
`register_parametrization` puts on the module's class is a Python getter defined in torch; it is
inlined (Note [module hooks]' neighbour in src/symbolic/variables/nn_module.rs,
`module_getattr`), not passed to a graph op, so weight_norm, spectral_norm and user
parametrizations compile with their module: values, gradients and spectral_norm's power-
iteration buffers equal eager's."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.utils.parametrize as P
from torch.nn.utils import parametrizations

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


class Symmetric(nn.Module):
    def forward(self, w):
        return w.triu() + w.triu(1).transpose(0, 1)


def _weight_norm():
    return parametrizations.weight_norm(nn.Linear(4, 5))


def _spectral_norm():
    return parametrizations.spectral_norm(nn.Linear(4, 5))


def _symmetric():
    m = nn.Linear(4, 4)
    P.register_parametrization(m, "weight", Symmetric())
    return m


MAKERS = {"weight_norm": _weight_norm, "spectral_norm": _spectral_norm, "symmetric": _symmetric}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("train", [False, True])
def test_parametrized_linear_matches_eager(backend, kind, train):
    torch.manual_seed(0)
    m = MAKERS[kind]().train(train)
    ref = copy.deepcopy(m)
    opt = dynamo.optimize(backend)(m)
    dynamo.reset()
    for step in range(3):
        x = torch.randn(3, 4)
        got = opt(x)
        want = ref(x)
        torch.testing.assert_close(got, want)
        got.square().sum().backward()
        want.square().sum().backward()
        for (name, p), q in zip(m.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
        for (name, b), c in zip(m.named_buffers(), ref.buffers()):
            torch.testing.assert_close(b, c, msg=name)  # spectral_norm's _u and _v
    c = dynamo.counters()
    assert c["graphs"] >= 1 and c["graph_breaks"] == 0, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cached_parametrization_matches_eager(backend):
    torch.manual_seed(0)
    m = _symmetric()
    x = torch.randn(2, 4)

    def f(x):
        with P.cached():
            return m(x) + m(x)

    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x)
    torch.testing.assert_close(got, f(x))
