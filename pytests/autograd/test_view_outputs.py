"""Outputs of a compiled autograd graph that are views of an intermediate or of an input
(fuzzer seeds 70012 program 312, 73010 program 192). Eager lets the caller write such a view in
place (or raises its own error); a view made inside the graph's ``torch.autograd.Function``
would be one autograd forbids to modify. The graph returns the view's base instead and the view
ops run again after the call (Note [view outputs] in python/dynamo/aot.py); a view that cannot
be made again that way is copied by the runtime (src/autograd/runtime.rs, ``own_view_outputs``)."""

import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_an_intermediate_written_in_place_after_the_graph(backend, capsys):
    def f(p):
        x = (p * 1).permute(1, 0)
        print("break")
        x.mul_(2)
        return (x * x).sum()

    p_eager = torch.randn(2, 3, requires_grad=True)
    p_comp = p_eager.detach().clone().requires_grad_()
    expected = f(p_eager)
    expected.backward()
    out = dynamo.optimize(backend)(f)(p_comp)
    out.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(p_comp.grad, p_eager.grad)
    c = dynamo.counters()
    assert c["graphs"] == 2 and c["aot_graphs"] >= 1 and c["eager_fallbacks"] == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_two_outputs_sharing_an_intermediate(backend, capsys):
    # The view's base is itself an output: the view is made again from it, so the write
    # after the break reaches `y` as in eager.
    def f(p):
        y = p * 1
        x = y.permute(1, 0)
        print("break")
        x.mul_(2)
        return y.sum()

    p = torch.randn(2, 3, requires_grad=True)
    expected = f(p)
    torch.testing.assert_close(dynamo.optimize(backend)(f)(p), expected)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_expanded_view_output_keeps_its_broadcast(backend):
    # Found by the fuzzer (seed 73010, program 192): an expanded view returned from a graph
    # whose input requires grad was copied densely, so the caller's in-place write succeeded
    # where eager's raises.
    def f(p):
        return (p * 2).amax(1, keepdim=True).expand(4, 4)

    p = torch.randn(4, 4, requires_grad=True)
    want = f(p)
    got = dynamo.optimize(backend)(f)(p)
    assert got.stride() == want.stride() == (1, 0)
    torch.testing.assert_close(got, want)
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="single memory location"):
            want.add_(1)
        with pytest.raises(RuntimeError, match="single memory location"):
            got.add_(1)


# Each view kind: (name, base shape, view of `a`). Run on an intermediate (`x * 2`), on a
# non-leaf input, on a leaf input and on a parameter; read, then written in place.
VIEWS = [
    ("expand", (1, 3), lambda a: a.expand(4, 3)),
    ("expand_as", (1, 3), lambda a: a.expand_as(torch.empty(2, 3))),
    ("view", (2, 3), lambda a: a.view(3, 2)),
    ("view_flat", (2, 3), lambda a: a.view(-1)),
    ("reshape", (2, 3), lambda a: a.reshape(6)),
    ("flatten", (2, 3), lambda a: a.flatten()),
    ("unflatten", (2, 6), lambda a: a.unflatten(1, (3, 2))),
    ("slice", (2, 3), lambda a: a[:, 1:]),
    ("select", (2, 3), lambda a: a[1]),
    ("step_slice", (4, 3), lambda a: a[::2, None]),
    ("narrow", (2, 3), lambda a: a.narrow(1, 0, 2)),
    ("transpose", (2, 3), lambda a: a.transpose(0, 1)),
    ("torch_transpose", (2, 3), lambda a: torch.transpose(a, 0, 1)),
    ("t", (2, 3), lambda a: a.t()),
    ("permute", (2, 3, 2), lambda a: a.permute(2, 0, 1)),
    ("movedim", (2, 3, 2), lambda a: a.movedim(0, 2)),
    ("unsqueeze", (2, 3), lambda a: a.unsqueeze(1)),
    ("squeeze", (1, 3), lambda a: a.squeeze(0)),
    ("diagonal", (3, 3), lambda a: a.diagonal()),
    ("as_strided", (2, 3), lambda a: a.as_strided((2, 2), (3, 1), 1)),
    ("as_strided_overlap", (2, 3), lambda a: a.as_strided((3, 3), (1, 1))),
    ("chain", (2, 3), lambda a: a.t()[1:].unsqueeze(0).transpose(1, 2)),
    # Not a view: reshape copies a transposed tensor (the output is a copy in eager too).
    ("reshape_copy", (2, 3), lambda a: a.t().reshape(-1)[1:]),
]
BASES = ["intermediate", "input", "leaf_input", "parameter"]


def _run(backend, view, base, shape, seed):
    """(output, the value of its `_base`, gradient of the leaf, the error of an in-place write
    or None, the written output) for eager (backend None) or a backend."""
    torch.manual_seed(seed)
    leaf = torch.randn(shape, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(shape))
    if base == "intermediate":
        def f(x):
            return view(x * 2), (x * x).sum()
    elif base == "parameter":
        def f(x):
            return view(weight), (x * weight).sum()
    else:
        # `x.sum()` saves nothing: a write into `x` through the view leaves its backward valid.
        def f(x):
            return view(x), (x.sum() * 3).sum()

    x = leaf if base in ("leaf_input", "parameter") else leaf * 1
    if backend is not None:
        dynamo.reset()
        f = dynamo.optimize(backend)(f)
    out, other = f(x)
    meta = (tuple(out.shape), out.stride(), out.storage_offset(), out.requires_grad, out.is_leaf,
            out.grad_fn.name() if out.grad_fn is not None else None, out._base is not None,
            out._base is x if base != "intermediate" else out._base is not None)
    values = out.detach().clone()
    error = None
    try:
        out.mul_(3)
    except RuntimeError as e:
        error = (type(e), str(e))
    loss = (out * torch.arange(out.numel(), dtype=out.dtype).view(out.shape)).sum() + other
    source = weight if base == "parameter" else leaf
    loss.backward()
    return meta, values, out.detach().clone(), error, source.grad


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("name,shape,view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_output_reads_writes_and_errors_as_eager(backend, name, shape, view, base):
    want = _run(None, view, base, shape, 0)
    got = _run(backend, view, base, shape, 0)
    assert got[0] == want[0]  # shape, strides, offset, requires_grad, is_leaf, grad_fn name, _base
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    assert got[3] == want[3]  # the in-place write's exception (type, message), or None
    torch.testing.assert_close(got[2], want[2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[4], want[4], rtol=1e-5, atol=1e-5)
    if name in ("expand", "expand_as") or (base in ("leaf_input", "parameter") and name != "reshape_copy"):
        assert want[3] is not None  # the kinds eager forbids are covered
    c = dynamo.counters()
    # The joint graph's own alias check sees `reshape` as a view (src/autograd/joint.rs): a
    # copying reshape of an input still sends its graph to torch's autograd.
    eager_graphs = 1 if name == "reshape_copy" and base != "intermediate" else 0
    assert c["aot_eager_graphs"] == eager_graphs and c["eager_fallbacks"] == 0, c


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_two_views_of_one_intermediate_share_it(backend):
    def f(x):
        a = x * 2
        t = a.t()
        return t, t[1:], a[0]

    x = torch.randn(2, 3, requires_grad=True)
    t, flat, row = dynamo.optimize(backend)(f)(x)
    assert t._base is flat._base is row._base
    t.mul_(2)
    torch.testing.assert_close(row, x[0].detach() * 4)
    (flat.sum() + row.sum()).backward()
    te, fe, re = f(xe := x.detach().clone().requires_grad_())
    te.mul_(2)
    (fe.sum() + re.sum()).backward()
    torch.testing.assert_close(x.grad, xe.grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_only_view_of_an_input_returned(backend):
    # Every output aliases an input: nothing is left to compile.
    def f(x):
        return x.t(), x[0]

    x = torch.randn(2, 3, requires_grad=True)
    t, row = dynamo.optimize(backend)(f)(x)
    assert t._base is x and row._base is x and t.grad_fn.name() == "TBackward0"
    (t.sum() + row.sum()).backward()
    torch.testing.assert_close(x.grad, torch.ones(2, 3) + torch.tensor([[1.0], [0.0]]))


# Note [view outputs], grad-mode switches (fuzz 108007:388): a view made under no_grad of a
# tensor that requires grad is made again in no_grad, so it carries eager's creation meta.
def _no_grad_view_written_after_break(x, p):
    t1 = p * 1
    with torch.no_grad():
        t1 = t1.contiguous().view(2, 8).view(4, 4)
    t1[:, 1] += 1
    return t1, x


def _no_grad_and_grad_views(x, p):
    t = p * 2
    with torch.no_grad():
        a = t.view(16)
        b = t.t()
    c = t.view(2, 8)
    return a, b, c, x + 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_no_grad_view_keeps_eagers_creation_meta(backend):
    def outcome(fn):
        try:
            fn(torch.ones(4, 4), torch.randn(4, 4, requires_grad=True))
            return "returned"
        except RuntimeError as e:
            return str(e)

    want = outcome(_no_grad_view_written_after_break)
    assert "created in no_grad mode" in want
    dynamo.reset()
    assert outcome(dynamo.optimize(backend)(_no_grad_view_written_after_break)) == want

    p = torch.randn(4, 4, requires_grad=True)
    want = _no_grad_and_grad_views(torch.ones(2), p)
    dynamo.reset()
    got = dynamo.optimize(backend)(_no_grad_and_grad_views)(torch.ones(2), p)
    assert dynamo.counters()["graphs"] == 1
    for g, w in zip(got, want):
        assert torch.equal(g, w)
        assert (g.requires_grad, g._base is not None, type(g.grad_fn).__name__) == (w.requires_grad, w._base is not None, type(w.grad_fn).__name__)
        if w._base is not None:
            assert torch._C._autograd._get_creation_meta(g) == torch._C._autograd._get_creation_meta(w)
    got[2].sum().backward()
    gp, p.grad = p.grad.clone(), None
    want[2].sum().backward()
    assert torch.equal(gp, p.grad)
