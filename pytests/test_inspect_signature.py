"""`inspect.signature(f)` inside a traced frame is computed on the real function (a constant: a
Signature is immutable) instead of tracing inspect's own code, which broke the graph in every
layer of transformers' BERT (`apply_chunking_to_forward`) and more: `isinstance` of a bound method
and a bound method's `__func__`/`__self__` are traced too."""

import inspect
import types

import torch

import dynamo


class Chunked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def chunk(self, x):
        return self.lin(x).relu()

    def forward(self, x):
        fn = self.chunk
        n_args = len(inspect.signature(fn).parameters)
        assert isinstance(fn, types.MethodType) and fn.__self__ is self and fn.__func__ is Chunked.chunk
        if n_args != 1:
            raise ValueError("wrong arity")
        return fn(x) * n_args + len(inspect.signature(helper).parameters)


def helper(a, b=2, *rest, key=None):
    return a


def test_signature_of_methods_and_functions_is_traced():
    torch.manual_seed(0)
    m = Chunked().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        want = m(x)
        dynamo.reset()
        with dynamo.optimize("inductor"):
            got = m(x)
    torch.testing.assert_close(got, want)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
