"""View fallbacks that only feed ops with fresh results run as ``_reinterpret_tensor`` aliases
(Note [alias views] in src/inductor/alias.rs): results equal eager's; a view the graph returns
stays torch's view (``_base``); autograd's saved-tensor version checks still see in-place
writes to a parameter whose transpose fed a matrix product."""

import pytest
import torch
import torch.nn as nn

import dynamo
import dynamo._C as C


def weight_grad(g, x):
    g2 = (g * 2).reshape(-1, 8)
    return torch.mm(g2.t(), x.reshape(-1, 4))


def test_views_around_mm_are_aliases():
    g, x = torch.randn(2, 3, 8), torch.randn(2, 3, 4)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(weight_grad), [g, x])
    assert compiled.plan.count("alias buf") == 3, compiled.plan
    for _ in range(3):
        torch.testing.assert_close(compiled(g, x), weight_grad(g, x), rtol=0, atol=0)
    # Inputs at a storage offset (slices of a larger tensor): the alias keeps the base's offset.
    gs, xs = torch.randn(60)[12:].reshape(2, 3, 8), torch.randn(30)[6:].reshape(2, 3, 4)
    torch.testing.assert_close(compiled(gs, xs), weight_grad(gs, xs), rtol=0, atol=0)
    # Another layout of x fails the input check and runs through torch.
    xt = torch.randn(4, 3, 2).permute(2, 1, 0)
    torch.testing.assert_close(compiled(g, xt), weight_grad(g, xt), rtol=0, atol=0)


def views_of_products(x, w, v):
    # mm's and linear's results are new contiguous tensors: their views feeding another product
    # are aliases without a check (CONTIGUOUS_RESULT_TARGETS).
    h = torch.mm(x, w).reshape(2, 3, 8).transpose(1, 2)
    y = torch.nn.functional.linear(x.reshape(2, 3, 4), v).reshape(6, 8).t()
    return torch.matmul(h, h.transpose(1, 2)), torch.mm(y, x)


def test_views_of_matrix_products_are_aliases():
    x, w, v = torch.randn(6, 4), torch.randn(4, 8), torch.randn(8, 4)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(views_of_products), [x, w, v])
    # x.reshape feeds linear (fresh) and is an alias too; 2 views of mm, 2 of linear.
    assert compiled.plan.count("alias buf") == 6, compiled.plan
    for _ in range(3):
        got, want = compiled(x, w, v), views_of_products(x, w, v)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def returned_view(a, b):
    return torch.mm(a, b).t(), torch.mm(a.t(), b)


def test_a_returned_view_stays_a_view():
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(returned_view), [a, b])
    got, want = compiled(a, b), returned_view(a, b)
    torch.testing.assert_close(got, want)
    assert got[0]._base is not None
    assert "alias buf" in compiled.plan  # a.t() feeds the second mm only


@pytest.mark.parametrize("backend", ["inductor"])
def test_inplace_write_to_a_parameter_before_backward_raises_as_eager(backend):
    w = nn.Parameter(torch.randn(4, 4))

    def f(x):
        return torch.mm(x, w.t()).sum()

    cf = dynamo.optimize(backend)(f)
    x = torch.randn(3, 4, requires_grad=True)
    errors = []
    for fn in (f, cf):
        loss = fn(x)
        with torch.no_grad():
            w.add_(1)
        try:
            loss.backward()
            errors.append(None)
        except RuntimeError as e:
            errors.append("modified by an inplace operation" in str(e))
    assert errors[0] == errors[1], errors


def sliced_lookups(ids, table, w):
    # transformers' `position_ids[:, :n]` feeding an embedding, and basic indexing feeding a
    # product: aliases at the skipped elements' offset.
    pos = ids[:, 1:5]
    rows = w[1:, ::2][..., None, 1]
    return torch.nn.functional.embedding(pos, table), torch.mm(w[2, None, :], rows), torch.mm(w[:3, -2:].t(), w[1:4])


def test_basic_indexing_views_are_aliases():
    ids, table, w = torch.arange(12).reshape(2, 6) % 5, torch.randn(5, 3), torch.randn(5, 4)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(sliced_lookups), [ids, table, w])
    # The embedding reads its slice inside its kernel (Note [indirect loads]); the products'
    # basic indexing stays aliases.
    assert compiled.plan.count("alias buf") >= 4, compiled.plan
    assert "indirect_load" in compiled.kernel_ir
    for _ in range(2):
        for a, b in zip(compiled(ids, table, w), sliced_lookups(ids, table, w)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Inputs at a storage offset: the alias adds the slice's offset to the base's.
    ids2, w2 = (torch.arange(40)[4:16] % 5).reshape(2, 6), torch.randn(30)[10:].reshape(5, 4)
    for a, b in zip(compiled(ids2, table, w2), sliced_lookups(ids2, table, w2)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def attention_then_projection(q, k, v, w):
    # Attention's outputs are a tuple: the views of its first item (heads merged back) feed mm.
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[0]
    merged = out.transpose(1, 2).reshape(2, 5, 8)
    return torch.mm(merged.reshape(-1, 8), w)


def test_views_of_a_tuple_item_are_aliases():
    # Note [checked tuple items]: the item's layout is checked when the call returns, which
    # makes it an exact base for the transpose and both reshapes.
    q, k, v = (torch.randn(2, 5, 2, 4).transpose(1, 2) for _ in range(3))
    w = torch.randn(8, 3)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(attention_then_projection), [q, k, v, w])
    assert compiled.plan.count("alias buf") == 3, compiled.plan
    for _ in range(3):
        torch.testing.assert_close(compiled(q, k, v, w), attention_then_projection(q, k, v, w), rtol=0, atol=0)


def test_kernel_output_allocated_as_its_only_view():
    # Note [allocated as viewed]: the kernel's [4, 8, 16] result is only reshaped for the matrix
    # product, so it is allocated as [32, 16] and the reshape passes it through.
    def fn(x, w):
        return torch.mm((x * 2).reshape(32, 16), w)

    x, w = torch.randn(4, 8, 16), torch.randn(16, 5)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), [x, w])
    assert "allocated as its view" in compiled.plan, compiled.plan
    assert torch.equal(compiled(x, w), fn(x, w))

    # Read by a fallback besides its view: keeps its own layout (torch sees the tensor).
    def both(x, w):
        y = x * 2
        return torch.mm(y.reshape(32, 16), w), torch.cumsum(y, 0)

    compiled = C.inductor_compile(torch.fx.symbolic_trace(both), [x, w])
    assert "allocated as its view" not in compiled.plan, compiled.plan
    for got, want in zip(compiled(x, w), both(x, w)):
        assert torch.equal(got, want)
