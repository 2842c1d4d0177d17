"""Constant folding (src/inductor/constant_folding.rs): values that depend on no graph input are
computed once at compile time; parameters, buffers, random ops and values an output may alias
are never frozen, and results equal eager's on every call.
"""

import pytest
import torch
import torch.nn as nn

import dynamo
import dynamo._C as C


def compile_fn(fn, inputs):
    """The graph dynamo captures from `fn` (torch.fx.symbolic_trace would evaluate the
    input-independent ops while tracing and leave constants behind), compiled by inductor."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    with torch.no_grad():
        dynamo.optimize(backend)(fn)(*inputs)
    dynamo.reset()
    assert len(graphs) == 1
    gm, examples = graphs[0]
    with torch.no_grad():
        cg = C.inductor_compile(gm, examples)

    def call(*args):
        out = cg(*args)
        return out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out

    call.plan = cg.plan
    return call


def causal_mask_add(x):
    # The shape of transformers' mask code: arange, comparisons, a cumsum, new_ones.
    i = torch.arange(8)
    mask = (i[:, None] >= i[None, :]) & (torch.ones(8, 8).cumsum(1) > 0)
    bias = torch.zeros(8, 8).masked_fill(~mask, -1e9)
    return x + bias


@pytest.mark.parametrize("shape", [(8, 8), (1, 8, 8), (3, 8, 8), (0, 8, 8)])
def test_mask_folds_and_matches_eager(shape):
    x = torch.randn(shape)
    cg = compile_fn(causal_mask_add, [x])
    assert "arange" not in cg.plan and "cumsum" not in cg.plan, cg.plan
    for _ in range(2):
        torch.testing.assert_close(cg(x), causal_mask_add(x))
    # A fresh input after the first call.
    y = torch.randn(shape)
    torch.testing.assert_close(cg(y), causal_mask_add(y))


def test_folded_values_with_nan_and_inf():
    def fn(x):
        c = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]) * torch.arange(4.0)
        return x + c

    x = torch.randn(3, 4)
    cg = compile_fn(fn, [x])
    torch.testing.assert_close(cg(x), fn(x), equal_nan=True)


def test_metadata_only_op_on_input_folds():
    def fn(x):
        return x * x.new_ones(4, 4).cumsum(0)

    x = torch.randn(4, 4).t()  # non-contiguous input
    cg = compile_fn(fn, [x])
    assert "cumsum" not in cg.plan and "new_ones" not in cg.plan, cg.plan
    torch.testing.assert_close(cg(x), fn(x))
    y = torch.randn(4, 4).t()
    torch.testing.assert_close(cg(y), fn(y))


def test_output_aliasing_a_constant_is_not_frozen():
    def fn(x):
        c = torch.arange(4.0) * 2
        return c.view(2, 2), x + c

    x = torch.randn(4)
    cg = compile_fn(fn, [x])
    a, _ = cg(x)
    a.add_(100)  # the caller owns the output: the next call must not see this
    a2, b2 = cg(x)
    ea, eb = fn(x)
    torch.testing.assert_close(a2, ea)
    torch.testing.assert_close(b2, eb)
    assert a2.data_ptr() != a.data_ptr()


def test_buffer_updates_are_seen():
    b = torch.arange(4.0)

    def fn(x, b):
        return x + b * 2 + torch.arange(4.0)

    x = torch.randn(4)
    cg = compile_fn(fn, [x, b])
    torch.testing.assert_close(cg(x, b), fn(x, b))
    b.add_(10)
    torch.testing.assert_close(cg(x, b), fn(x, b))


def test_random_ops_are_not_folded():
    def fn(x):
        return x + torch.rand(16)

    x = torch.zeros(16)
    cg = compile_fn(fn, [x])
    assert not torch.equal(cg(x), cg(x))


def test_error_at_fold_time_raises_like_eager():
    def fn(x):
        return x + x.new_ones(4)[10]

    x = torch.randn(4)
    cg = C.inductor_compile(torch.fx.symbolic_trace(fn), [x])
    with pytest.raises(IndexError):
        fn(x)
    with pytest.raises(IndexError):
        cg(x)


def test_dynamo_split_graph_runs_kernels():
    # dynamo records no example value on `split` (a tuple): the graph must not go through
    # whole-graph meta propagation for it, and must still lower around it.
    def fn(x):
        a, b = x.split(4, dim=1)
        return (a.sin() + b.cos()) * 2

    x = torch.randn(3, 8)
    C.inductor_reset_counters()
    f = dynamo.optimize("inductor")(fn)
    with torch.no_grad():
        torch.testing.assert_close(f(x), fn(x))
    counters = C.inductor_counters()
    assert counters["kernels_compiled"] >= 1
    assert counters["eager_graphs"] == 0
    dynamo.reset()
