"""Scatter and gather kernels.

`aten.embedding_dense_backward` is a Scatter (Note [scatter stores] in llvm/src/kernel.rs): each
weight row adds the gradients of its tokens in token order, as ATen's CPU kernel does, so the
result is eager's bit for bit; padding_idx rows stay zero. `torch.gather` is an indirect load
(Note [indirect loads]) of a tensor in memory or of a view of one (Note [views of memory] in
src/inductor/lowering.rs), so BERT's `gather` of its expanded `token_type_ids` buffer is a
kernel."""

import pytest
import torch
import torch.nn.functional as F

import dynamo
import dynamo._C as C

EDB = torch.ops.aten.embedding_dense_backward.default


def fallbacks(compiled):
    return [line for line in compiled.plan.splitlines() if line.startswith("fallback")]


def compile_fx(fn, inputs):
    return C.inductor_compile(torch.fx.symbolic_trace(fn), inputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("shape, rows, padding", [((7,), 5, -1), ((4, 32), 20, 3), ((2, 3, 50), 6, 0), ((3000,), 1200, 1199)])
def test_embedding_backward_equals_eager_bit_for_bit(dtype, index_dtype, shape, rows, padding):
    # Many tokens per row (and 3000 tokens into 1200 rows, past ATen's parallel grain), so the
    # order of the additions shows; values of mixed magnitude so that order changes bits.
    g = torch.Generator().manual_seed(0)
    grad = (torch.randn(*shape, 8, generator=g) * torch.logspace(-3, 3, 8)).to(dtype)
    idx = torch.randint(0, rows, shape, generator=g, dtype=index_dtype)
    idx.view(-1)[::7] = max(padding, 0)

    def fn(grad, idx):
        return EDB(grad * 2, idx, rows, padding, False)

    compiled = compile_fx(fn, [grad, idx])
    assert not fallbacks(compiled), compiled.plan
    assert "scatter_add" in compiled.kernel_ir, compiled.kernel_ir
    out = compiled(grad, idx)
    want = fn(grad, idx)
    assert out.dtype == dtype and out.shape == (rows, 8)
    assert torch.equal(out, want)
    if padding >= 0:
        assert not out[padding].any()
    # New values at the same layout: the output is zeroed again on every call.
    idx2 = torch.randint(0, rows, shape, generator=g, dtype=index_dtype)
    assert torch.equal(compiled(grad, idx2), fn(grad, idx2))


def test_scale_grad_by_freq_runs_through_torch():
    grad, idx = torch.randn(6, 4), torch.tensor([1, 1, 2, 0, 1, 3])

    def fn(grad, idx):
        return EDB(grad, idx, 5, -1, True)

    compiled = compile_fx(fn, [grad, idx])
    assert len(fallbacks(compiled)) == 1, compiled.plan
    assert torch.equal(compiled(grad, idx), fn(grad, idx))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_embedding_training_gradient_is_eagers(backend):
    # BERT's embedding block in training: three lookups, their sum and a layer norm; the weight
    # gradients are scatters fused with the layer norm's backward.
    g = torch.Generator().manual_seed(1)
    w, p, t = (torch.randn(n, 16, generator=g) for n in (50, 12, 2))
    ids = torch.randint(0, 50, (4, 12), generator=g)
    pos = torch.arange(12).unsqueeze(0)

    def fn(ids, w, p, t):
        h = F.embedding(ids, w, padding_idx=0) + F.embedding(pos, p) + F.embedding(torch.zeros_like(ids), t)
        return F.layer_norm(h, (16,))

    grads = []
    for compiled in (False, True):
        params = [x.clone().requires_grad_() for x in (w, p, t)]
        dynamo.reset()
        out = (dynamo.optimize(backend)(fn) if compiled else fn)(ids, *params)
        (out * torch.linspace(-1, 1, 16)).sum().backward()
        grads.append([x.grad for x in params])
    for got, want in zip(*reversed(grads)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not grads[1][0][0].any(), "padding_idx row got a gradient"


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_equals_eager(dim):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 7, generator=g)
    size = x.shape[dim]
    idx = torch.randint(0, size, (4, 6), generator=g)

    def fn(x, idx):
        return torch.gather(x, dim, idx) + 1

    compiled = compile_fx(fn, [x, idx])
    assert not fallbacks(compiled), compiled.plan
    assert "indirect_load" in compiled.kernel_ir
    assert torch.equal(compiled(x, idx), fn(x, idx))


def test_gather_of_a_view_of_an_input_is_a_kernel():
    # BERT: `token_type_ids.expand(1, -1)` gathered at the positions, then the lookup.
    buffer = torch.zeros(1, 64, dtype=torch.int64)
    buffer[0, 10:20] = 1
    table = torch.randn(2, 8)
    pos = torch.arange(32).unsqueeze(0)

    def fn(buffer, table, pos):
        tt = torch.gather(buffer[:, :40].expand(1, -1), 1, pos).expand(3, 32)
        return F.embedding(tt, table) * 2

    compiled = compile_fx(fn, [buffer, table, pos])
    assert not fallbacks(compiled), compiled.plan
    assert torch.equal(compiled(buffer, table, pos), fn(buffer, table, pos))
    # Transposed views gather too.
    x = torch.randn(6, 5)

    def tr(x, idx):
        return torch.gather(x.t(), 1, idx)

    idx = torch.randint(0, 6, (5, 3))
    compiled = compile_fx(tr, [x, idx])
    assert not fallbacks(compiled), compiled.plan
    assert torch.equal(compiled(x, idx), tr(x, idx))


def test_gather_of_a_computed_tensor_runs_through_torch():
    x, idx = torch.randn(4, 5), torch.randint(0, 5, (4, 2))

    def fn(x, idx):
        return torch.gather(x * 2, 1, idx)

    compiled = compile_fx(fn, [x, idx])
    assert any("gather" in line for line in fallbacks(compiled)), compiled.plan
    assert torch.equal(compiled(x, idx), fn(x, idx))


@pytest.mark.parametrize("bad", [5, 100, -1])
def test_gather_out_of_range_raises_eagers_error(bad):
    x, idx = torch.randn(4, 5), torch.randint(0, 5, (4, 3))

    def fn(x, idx):
        return torch.gather(x, 1, idx) * 2

    compiled = compile_fx(fn, [x, idx])
    compiled(x, idx)
    broken = idx.clone()
    broken[2, 1] = bad
    with pytest.raises(RuntimeError) as eager:
        fn(x, broken)
    with pytest.raises(RuntimeError) as got:
        compiled(x, broken)
    assert str(got.value) == str(eager.value)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_gather_under_dynamo_equals_eager(backend):
    # Both index dtypes torch accepts; the int32 one reads its rows sign-extended.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, generator=g)
    for dt in (torch.int64, torch.int32):
        idx = torch.randint(0, 5, (4, 3), dtype=dt, generator=g)

        def fn(x, idx):
            return torch.gather(x, 1, idx) * 3

        dynamo.reset()
        assert torch.equal(dynamo.optimize(backend)(fn)(x, idx), fn(x, idx))
        c = dynamo.counters()
        assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
        if backend == "inductor":
            assert c["inductor_fallback_nodes"] == 0 and c["inductor_kernels_compiled"] >= 1, c
