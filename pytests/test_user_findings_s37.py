"""Smallest failing inputs of what new users' programs found (stop 37), each fixed kind with
its test."""

import pytest
import torch
import torch.nn.functional as F

import dynamo


BACKENDS = ["aot_eager", "inductor"]


def _grads(fn, backend, *, weight_decay=None):
    """(value, grads of x and y or None) after ``fn(x, y).backward()``, eagerly when
    ``backend`` is None; with ``weight_decay`` also x and y after one AdamW step (a parameter
    with a None gradient is not stepped, one with a zero gradient is decayed)."""
    x = torch.tensor([0.0, 1.5, -2.0], requires_grad=True)
    y = torch.tensor([1.0, 0.5, 3.0], requires_grad=True)
    run = fn if backend is None else dynamo.optimize(backend)(fn)
    out = run(x, y)
    out.backward()
    grads = (None if x.grad is None else x.grad.clone(), None if y.grad is None else y.grad.clone())
    if weight_decay is not None:
        torch.optim.AdamW([x, y], lr=0.1, weight_decay=weight_decay).step()
        return out.detach(), grads, (x.detach().clone(), y.detach().clone())
    return out.detach(), grads


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return torch.allclose(a, b, atol=1e-6)


class _NoGradForB(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * 2 + b

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def _custom_function_none(x, y):
    # y's only path is the Function's second input, whose gradient is None.
    return _NoGradForB.apply(x.sin(), y * 3).sum() + x.sum()


def _norm_ord0(x, y):
    # linalg_vector_norm's derivative for ord=0 is undefined: x gets no gradient at all.
    return torch.linalg.vector_norm(x.sin() * y, ord=0) + torch.nn.functional.softplus(y).sum()


def _norm_ord0_and_more(x, y):
    # x reaches the loss through the norm and through exp: only exp's gradient counts.
    return torch.linalg.vector_norm(x * y, ord=0) + x.exp().sum() + x.norm(p=0)


def _tensor_norm_p0(x, y):
    return x.norm(p=0) * y.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_custom_function_none, _norm_ord0, _norm_ord0_and_more, _tensor_norm_p0])
def test_undefined_gradient_stays_none(fn, backend):
    """Eager leaves ``.grad`` None for a leaf whose every path has an undefined derivative
    (Note [undefined derivatives] in src/autograd/rules.rs); we gave it zeros."""
    dynamo.reset()
    want = _grads(fn, None)
    got = _grads(fn, backend)
    assert torch.equal(want[0], got[0])
    for w, g in zip(want[1], got[1]):
        assert _same(w, g), (w, g)
    assert dynamo.counters()["graphs"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_undefined_gradient_not_stepped_by_adamw(backend):
    """AdamW decays a parameter with a zero gradient and skips one whose gradient is None."""
    dynamo.reset()
    want = _grads(_norm_ord0, None, weight_decay=0.5)
    got = _grads(_norm_ord0, backend, weight_decay=0.5)
    assert want[1][0] is None and got[1][0] is None
    for w, g in zip(want[2], got[2]):
        assert torch.equal(w, g)
    assert dynamo.counters()["graphs"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_named_output_passes_missing_gradient(backend):
    """An output eager names otherwise (Note [grad_fn names]) passes through an identity
    Function; a None gradient from its consumer must reach the graph as None."""

    def fn(x, y):
        return x.sin(), y * 3

    dynamo.reset()
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    y = torch.tensor([2.0, 3.0], requires_grad=True)
    s, t = dynamo.optimize(backend)(fn)(x, y)
    assert type(s.grad_fn).__name__ == "SinBackward0" and type(t.grad_fn).__name__ == "MulBackward0"
    _NoGradForB.apply(s, t).sum().backward()
    assert y.grad is None
    assert torch.allclose(x.grad, 2 * x.detach().cos())


def _times_three_slice(x):
    return x[..., :1] * 3  # a slice constant in the transformed code


def test_torch_compile_around_optimized_function():
    """torch.compile of a function calling a dynamo-optimized one (tester3 finding 08, the
    reverse nesting): torch's trace inlines the wrapped function (``_torchdynamo_inline``), as
    torch nests its own compiles; it raised InternalTorchDynamoError."""
    torch._dynamo.reset()
    dynamo.reset()
    inner = dynamo.optimize("inductor")(_times_three_slice)

    def outer(x):
        return inner(x) + 1

    x = torch.arange(4.0).reshape(2, 2)
    assert torch.equal(torch.compile(outer, backend="eager")(x), _times_three_slice(x) + 1)


def test_region_entered_under_torch_compile(capsys):
    """A dynamo region entered while torch.compile's frame hook is live (after torch's trace
    broke before the call; an optimized module torch does not inline) runs with our hook alone
    (Note [torch's hook inside a region]); torch's hook is back after it, and ours keeps working
    after torch.compile returns."""
    torch._dynamo.reset()
    dynamo.reset()

    def body(x):
        y = x[..., :1] * 5
        print("inner break")
        return y + x.sum()

    inner = dynamo.optimize("eager")(body)
    lin = torch.nn.Linear(2, 2)
    mod = dynamo.optimize("inductor")(lin)

    def outer(x):
        y = x * 2
        print("outer break")
        return inner(y) + 1, mod(y).relu(), y.cos()

    x = torch.arange(4.0).reshape(2, 2)
    for _ in range(2):
        got = torch.compile(outer, backend="eager")(x)
        want = (body(x * 2) + 1, lin(x * 2).relu(), (x * 2).cos())
        for g, w in zip(got, want):
            assert torch.allclose(g, w)
    assert dynamo.counters()["graphs"] >= 1  # the module's graph is ours
    assert torch._C._dynamo.eval_frame.get_eval_frame_callback() is None
    after = dynamo.optimize("eager")(lambda t: t - 1)
    before = dynamo.counters()["graphs"]
    assert torch.equal(after(x), x - 1)
    assert dynamo.counters()["graphs"] == before + 1
    out = capsys.readouterr().out
    assert out.count("outer break") == 2 and out.count("inner break") >= 2


_LEGACY = [
    ("ByteTensor", torch.uint8), ("CharTensor", torch.int8), ("ShortTensor", torch.int16),
    ("IntTensor", torch.int32), ("LongTensor", torch.int64), ("HalfTensor", torch.float16),
    ("BFloat16Tensor", torch.bfloat16), ("FloatTensor", torch.float32),
    ("DoubleTensor", torch.float64), ("BoolTensor", torch.bool),
]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_isinstance_legacy_tensor_types_of_computed_tensors(backend):
    """``isinstance(t, torch.ByteTensor)`` of a tensor the graph computed answers by its dtype
    and device (tester4 finding 01: every computed tensor was a FloatTensor and never a
    ByteTensor, so torchvision's ``to_tensor`` skipped its ``/ 255``)."""

    def fn(x):
        out = []
        for _, dtype in _LEGACY:
            t = (x * 2).to(dtype)
            out.append(tuple(isinstance(t, getattr(torch, name)) for name, _ in _LEGACY))
        t = x.long() * 2
        out.append((isinstance(t, (torch.FloatTensor, torch.LongTensor)), isinstance(t, ((torch.ByteTensor,), torch.Tensor)),
                    isinstance(t, torch.cuda.LongTensor), isinstance(t, torch.Tensor)))
        return x + 1, out

    dynamo.reset()
    x = torch.ones(3)
    assert dynamo.optimize(backend)(fn)(x)[1] == fn(x)[1]
    assert dynamo.counters()["graphs"] == 1


def _to_tensor_like(pic):
    # torchvision.transforms.functional.to_tensor's branch
    img = pic.permute(2, 0, 1).contiguous()
    if isinstance(img, torch.ByteTensor):
        return img.to(dtype=torch.get_default_dtype()).div(255)
    return img


def test_to_tensor_divides_bytes():
    dynamo.reset()
    pic = torch.arange(24, dtype=torch.uint8).reshape(2, 4, 3)
    got = dynamo.optimize("inductor")(_to_tensor_like)(pic)
    want = _to_tensor_like(pic)
    assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_constants_fx_cannot_write(backend):
    """A legacy tensor type as an argument (``labels.type(torch.LongTensor)``, tester4 finding
    02) was written into the graph's code as ``<class 'torch.LongTensor'>``: a SyntaxError, so
    the whole frame ran eagerly (Note [constants fx cannot write])."""
    codes = []

    def record(gm, example_inputs):
        codes.append(gm.code)
        return gm.forward

    def fn(x):
        a = x.type(torch.LongTensor) + 1
        b = x.type(torch.DoubleTensor) * 2
        return a * 2, b

    x = torch.tensor([1.5, 2.7, 3.1])
    want = fn(x)
    for b in (record, backend):
        dynamo.reset()
        got = dynamo.optimize(b)(fn)(x)
        assert dynamo.counters()["graphs"] == 1
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and torch.equal(g, w)
    assert len(codes) == 1 and "_dynamo_const_" in codes[0]
    compile(codes[0], "<graph>", "exec")


def _conv_then_random(a, w):
    y = F.conv2d(a, w)
    z = F.conv2d(a, w).relu()
    z.uniform_()
    return (y * torch.rand_like(y), torch.bernoulli(y.sigmoid()), F.dropout(y, 0.3, True),
            torch.randn_like(y).relu(), z + 1, torch.rand(3))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_random_draws_after_channels_last_conv(backend):
    """A random op over a convolution's output drew in the channels-last order the layout pass
    gave the output, not eager's (tester4 finding 03: dropout after a conv zeroed other
    activations; Note [random draws in eager's order] in src/inductor/layout.rs)."""
    torch.manual_seed(0)
    w = torch.randn(4, 3, 3, 3) * 0.1
    x = torch.rand(2, 3, 6, 6)
    torch.manual_seed(3)
    want = _conv_then_random(x, w)
    dynamo.reset()
    torch.manual_seed(3)
    got = dynamo.optimize(backend)(_conv_then_random)(x, w)
    assert dynamo.counters()["graphs"] == 1
    for g, e in zip(got, want):
        assert torch.equal(g, e) and g.stride() == e.stride()


def test_dropout_after_conv_trains_as_eager():
    """squeezenet's classifier (dropout, then a 1x1 convolution) in a training step: loss and
    gradients equal eager's with the same seed."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.squeezenet1_1(num_classes=10).train()
    img = torch.rand(2, 3, 64, 64)

    def step(m):
        torch.manual_seed(3)
        loss = m(img).logsumexp(-1).sum()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    want = step(model)
    model.zero_grad()
    dynamo.reset()
    got = step(dynamo.optimize("inductor")(model))
    assert torch.allclose(got[0], want[0], atol=1e-5)
    for g, e in zip(got[1], want[1]):
        assert torch.allclose(g, e, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_generate_resume_functions_compile():
    """HF ``generate`` under dynamo: converting the decode loop's resume function panicked in
    ``remove_unused_tensor_inputs`` (an input's node number was stale after symbolic-number
    nodes left the graph), so that frame ran eagerly (tester4 finding 04); the conftest fails a
    test in which a frame failed inside the compiler."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                     vocab_size=100, max_position_embeddings=64, rotary_pct=0.5)
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(cfg).eval()
    ids = torch.randint(3, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=4, do_sample=False)
        dynamo.reset()
        got = dynamo.optimize("eager")(lambda x: model.generate(x, max_new_tokens=4, do_sample=False))(ids)
    assert torch.equal(got, want)
    assert dynamo.counters()["graphs"] >= 1
