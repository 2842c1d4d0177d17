"""A warning a torch call issues inside a compiled function (softmax without `dim`,
`torch.tensor(tensor)`) is issued once per call at the user's line, as eagerly: not while
tracing on fake tensors, and not from the backend's code (Note [warnings of traced calls] in
src/symbolic/output_graph.rs)."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def softmax_without_dim(x):
    y = x * 2
    return F.softmax(y)


def tensor_of_tensor(x):
    t = torch.tensor(x)
    return t + 1


def two_warnings(x):
    a = F.softmax(x)
    b = torch.tensor(a)
    return a + b


def recorded(fn, x, calls, action):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter(action)
        outs = [fn(x) for _ in range(calls)]
    return outs, [(r.filename, r.lineno, str(r.message), r.category) for r in w]


@pytest.mark.parametrize("action", ["always", "default"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [softmax_without_dim, tensor_of_tensor, two_warnings])
def test_warning_issued_at_the_users_line_once_per_call(fn, backend, action):
    x = torch.ones(3)
    e_out, e_w = recorded(fn, x, 3, action)
    # A fresh registry for the compiled run ("default" shows a location once per registry).
    fn.__globals__.pop("__warningregistry__", None)
    c_out, c_w = recorded(dynamo.optimize(backend)(fn), x, 3, action)
    fn.__globals__.pop("__warningregistry__", None)
    assert e_w and c_w == e_w
    for a, b in zip(e_out, c_out):
        assert torch.allclose(a, b)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["recompiles"] == 0


def test_warning_as_error_raises_the_same_warning():
    x = torch.ones(3)
    cf = dynamo.optimize("eager")(softmax_without_dim)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="Implicit dimension choice"):
            softmax_without_dim(x)
        with pytest.raises(UserWarning, match="Implicit dimension choice"):
            cf(x)
