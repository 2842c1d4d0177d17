"""Real models whose graphs ran through torch with no kernel (benchmarks/bench_capture_survey.py,
docs/PERF.md): each case is the smallest graph that fell back, compiled vs eager (values,
gradients, buffers) plus the kernels it now gets.

- `torch._weight_norm` (nn.utils.parametrizations.weight_norm): a reduction kernel, and a
  derivative rule of ours for training.
- `x.clone()` / `torch.clone(x)` (spectral_norm's parametrization clones its `u`/`v`): a copy
  kernel.
- `f(..., out=t)` (spectral_norm's power iteration, `F.normalize(..., out=u)`): functionalized
  through `dynamo._functional.out_on_copy` (Note [out= on a copy] in src/inductor/fx_import.rs),
  so a training graph no longer runs eagerly under autograd.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parametrizations as P

import dynamo
import dynamo._C as C


def compile_fx(fn, inputs):
    return C.inductor_compile(torch.fx.symbolic_trace(fn), inputs)


def weight_norm(v, g, dim: int):
    return torch._weight_norm(v, g, dim)


@pytest.mark.parametrize(
    ("v_shape", "g_shape", "dim"),
    [((8, 5), (8, 1), 0), ((4, 3, 5), (1, 3, 1), 1), ((6, 7), (1, 7), -2 + 3), ((3, 4, 5), (), -1), ((5, 6), (5, 1), -2)],
)
def test_weight_norm_is_one_kernel(v_shape, g_shape, dim):
    torch.manual_seed(0)
    v, g = torch.randn(v_shape), torch.rand(g_shape) + 0.5
    C.inductor_reset_counters()
    compiled = compile_fx(lambda v, g: weight_norm(v, g, dim), [v, g])
    assert C.inductor_counters()["fallback_nodes"] == 0, compiled.plan
    assert C.inductor_counters()["kernels_compiled"] == 1, compiled.plan
    torch.testing.assert_close(compiled(v, g), torch._weight_norm(v, g, dim), rtol=1e-6, atol=1e-6)


def test_clone_is_a_copy_kernel():
    def f(x, y):
        return x.clone(memory_format=torch.contiguous_format) + torch.clone(y), x.clone()

    x = torch.randn(6, 4).t()  # preserve_format keeps the transposed strides
    y = torch.randn(4, 6, dtype=torch.float64)
    C.inductor_reset_counters()
    compiled = compile_fx(f, [x, y])
    assert C.inductor_counters()["fallback_nodes"] == 0, compiled.plan
    assert C.inductor_counters()["kernels_compiled"] >= 1
    got, want = compiled(x, y), f(x, y)
    for a, b in zip(got, want):
        assert torch.equal(a, b) and a.dtype == b.dtype and a.stride() == b.stride()
    assert got[1].data_ptr() != x.data_ptr()


def _step(model, x, compiled):
    torch.manual_seed(1)
    m = dynamo.optimize("inductor")(model) if compiled else model
    out = m(x)
    out.square().mean().backward()
    return out


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
@pytest.mark.parametrize("train", [False, True])
def test_parametrized_linear_runs_kernels(kind, train):
    torch.manual_seed(0)
    make = getattr(P, kind)
    model = make(torch.nn.Linear(8, 6))
    model.train(train)
    ref = copy.deepcopy(model)
    x = torch.randn(4, 8)
    dynamo.reset()
    C.inductor_reset_counters()
    with torch.set_grad_enabled(train):
        m = dynamo.optimize("inductor")(model)
        for _ in range(2):  # the second call reads the buffers the first wrote
            got, want = m(x), ref(x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
            if train:
                got.square().mean().backward()
                want.square().mean().backward()
    if train:
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)
    for (name, b), c in zip(model.named_buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=name)
    counters = dynamo.counters()
    assert counters["graphs"] == 1
    assert counters["inductor_kernels_compiled"] >= 1
    if train:
        assert counters["aot_graphs"] == 1
        assert counters["aot_eager_graphs"] == 0


def test_out_keyword_on_an_input_is_written_back():
    def f(x, u):
        torch.nn.functional.normalize(x * 2, dim=0, out=u)
        return u + 1

    x, u = torch.randn(5), torch.zeros(5)
    u_ref = u.clone()
    v0 = u._version
    compiled = dynamo.optimize("inductor")(f)
    dynamo.reset()
    got = compiled(x, u)
    want = f(x, u_ref)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(u, u_ref)
    assert u._version > v0
    assert dynamo.counters()["inductor_eager_graphs"] == 0
    assert dynamo.counters()["inductor_kernels_compiled"] >= 1


def test_out_keyword_with_a_cast_and_a_tuple_out():
    # out= of another dtype casts as torch's out= overload does; a tuple out= is refused (the
    # graph runs through torch) and still equals eager.
    def cast(x, o):
        torch.add(x, 1, out=o)
        return o * 2

    def pair(x, a, b):
        torch.max(x, 0, out=(a, b))
        return a + 1

    x = torch.randn(3, 4)
    o, o_ref = torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64)
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize("inductor")(cast)(x, o), cast(x, o_ref))
    torch.testing.assert_close(o, o_ref)
    assert dynamo.counters()["inductor_eager_graphs"] == 0
    a, b = torch.zeros(4), torch.zeros(4, dtype=torch.long)
    a2, b2 = torch.zeros(4), torch.zeros(4, dtype=torch.long)
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize("inductor")(pair)(x, a, b), pair(x, a2, b2))
    assert torch.equal(b, b2)


def test_functional_normalize_is_fresh_for_aliasing():
    # F.normalize / torch.mv results never alias their arguments: writing them through out=
    # keeps the graph functionalizable.
    def f(w, v, u):
        wf = w.flatten(1)
        with torch.no_grad():
            F.normalize(torch.mv(wf, v), dim=0, eps=1e-12, out=u)
        return w / torch.vdot(u, torch.mv(wf, v))

    w = torch.randn(6, 4, requires_grad=True)
    v, u = F.normalize(torch.randn(4), dim=0), torch.zeros(6)
    w2, u2 = w.detach().clone().requires_grad_(), u.clone()
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(w, v, u)
    want = f(w2, v, u2)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(u, u2)
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)
    assert dynamo.counters()["aot_graphs"] == 1
    assert dynamo.counters()["aot_eager_graphs"] == 0
    assert dynamo.counters()["inductor_kernels_compiled"] >= 1


def two_dropouts(x, y, z, w):
    # The first mask's input comes from a kernel that also computes `c`, which waits for the
    # matmul after the second mask; the second mask's input is a graph input, ready at once.
    a = torch.sin(x) * 2
    da = F.dropout(a, 0.5, True)
    db = F.dropout(y, 0.5, True)
    c = torch.cos(x) + torch.mm(z, w)
    return da + 1, db * 3, c


def test_random_fallbacks_draw_in_graph_order():
    # Note [random fallbacks in graph order] (src/inductor/scheduler.rs): T5's training forward
    # drew the decoder's first dropout mask before the encoder's.
    inputs = [torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 3), torch.randn(3, 8)]
    compiled = compile_fx(two_dropouts, inputs)
    assert compiled.kernel_names, compiled.plan
    plan = compiled.plan
    assert plan.index("(dropout_noise)") < plan.index("(dropout_1_noise)"), plan
    torch.manual_seed(3)
    got = compiled(*inputs)
    torch.manual_seed(3)
    want = two_dropouts(*inputs)
    for a, b in zip(got, want):
        # The same masks (another mask differs by whole values); sin may differ in the last bit.
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_t5_shaped_training_step_equals_eager():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    t = transformers
    torch.manual_seed(0)
    model = t.T5ForConditionalGeneration(
        t.T5Config(num_layers=1, num_decoder_layers=1, num_heads=2, d_model=16, d_kv=8, d_ff=32, vocab_size=32)
    )
    model.train()
    ref = copy.deepcopy(model)
    ids = torch.randint(0, 32, (2, 6))
    kw = {"input_ids": ids, "labels": ids, "decoder_input_ids": ids}
    dynamo.reset()
    torch.manual_seed(1)
    got = dynamo.optimize("inductor")(model)(**kw).loss
    torch.manual_seed(1)
    want = ref(**kw).loss
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    got.backward()
    want.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert dynamo.counters()["inductor_kernels_compiled"] > 0


class AttentionBlock(torch.nn.Module):
    # torchvision's ViT encoder block: a pre-norm MultiheadAttention without dropout.
    def __init__(self, dropout):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)
        self.attn = torch.nn.MultiheadAttention(16, 2, dropout=dropout, batch_first=True)

    def forward(self, x):
        y = self.ln(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        return (x + y).relu()


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_attention_without_dropout_is_not_split(dropout):
    # Note [attention without dropout] (src/autograd/rules.rs): with dropout_p 0 the attention op
    # takes torch's derivative in the compiled graph; with dropout it keeps its own segment.
    torch.manual_seed(0)
    model = AttentionBlock(dropout).train()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 5, 16)
    dynamo.reset()
    torch.manual_seed(1)
    got = dynamo.optimize("inductor")(model)(x)
    torch.manual_seed(1)
    want = ref(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    got.square().mean().backward()
    want.square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)
    counters = dynamo.counters()
    assert counters["aot_graphs"] == 1
    # With dropout the attention used to keep its own segment: nn.MultiheadAttention was one
    # `multi_head_attention_forward` leaf. Traced through (Note [torch functions traced
    # through] in src/symbolic/builder.rs), its sdpa draws its dropout noise in the graph
    # (`sdpa_dropout_noise`, eager's random stream, checked by the equality above), so neither
    # case splits.
    assert counters["aot_graph_splits"] == 0 and counters["aot_eager_graphs"] == 0, counters
    assert counters["inductor_kernels_compiled"] >= 2


@pytest.mark.parametrize("form", ["function", "method"])
def test_mv_dot_vdot_have_rules(form, monkeypatch):
    # spectral_norm's sigma = vdot(u, mv(W, v)): both ops took torch's derivative through
    # `vjp_call` in every backward (a second forward and a torch.autograd.grad each: the step
    # was 1.5x eager's); their derivatives.yaml rules make them plain backward nodes.
    import dynamo._functional as functional

    calls = []
    real = functional.vjp_call
    monkeypatch.setattr(functional, "vjp_call", lambda *a: calls.append(a) or real(*a))

    def f(w, v, u):
        if form == "method":
            return (w * 2).mv(v.sin()).dot(u).mul(3) + u.vdot(w.mv(v))
        return torch.dot(torch.mv(w * 2, v.sin()), u) * 3 + torch.vdot(u, torch.mv(w, v))

    torch.manual_seed(0)
    args = [torch.randn(5, 4, requires_grad=True), torch.randn(4, requires_grad=True), torch.randn(5, requires_grad=True)]
    ref = [a.detach().clone().requires_grad_() for a in args]
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(*args)
    want = f(*ref)
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    for a, b in zip(args, ref):
        torch.testing.assert_close(a.grad, b.grad)
    assert not calls
    assert dynamo.counters()["aot_graphs"] == 1 and dynamo.counters()["aot_eager_graphs"] == 0
