"""Findings of stop 51: each is the smallest program that broke needlessly, recompiled or
differed from eager, run eagerly and compiled and compared exactly, with graph, break,
recompile and fallback counts."""

import warnings

import pytest
import torch
import torch.nn as nn

import dynamo
from _compare import check

BACKENDS = ["eager", "aot_eager", "inductor"]


def _batch(i):
    """Inputs whose batch size changes on every call (automatic dynamic from the second)."""
    return (torch.randn(2 + i, 4, 4, generator=torch.Generator().manual_seed(i)),)


# Note [formatting symbolic sizes] (src/symbolic/output_graph.rs): formatting a size the
# graph computes (torchvision ViT's `torch._assert(x.dim() == 3, f"... got {x.shape}")`)
# specialized it, a recompile for every batch size (or a break, for an intermediate's
# shape).


def _assert_with_shape(x):
    y = x.reshape(x.shape[0], -1)
    torch._assert(y.dim() == 2, f"Expected (batch, features) got {y.shape}")
    return y * 2


def _assert_with_input_shape(x):
    torch._assert(x.dim() == 3, f"Expected 3 dims got {x.shape} and {x.shape[0] * 2}")
    return x + 1


def _helper_check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _message_to_helper(x):
    y = x.flatten(1)
    _helper_check(y.shape[1] == 16, f"bad {y.shape}")
    return y.sum(1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_assert_with_shape, _assert_with_input_shape, _message_to_helper])
def test_formatted_symbolic_sizes_do_not_specialize(fn, backend):
    c = check(fn, _batch, backend, calls=5)
    assert c["graph_breaks"] == 0, c
    # Static, then dynamic: no compile per batch size.
    assert c["graphs"] == 2 and c["recompiles"] == 1, c


def _shape_text_used(x):
    y = x.reshape(x.shape[0], -1)
    s = f"{y.shape}"
    if s == "torch.Size([3, 16])":
        return y + 1
    return y - 1


def _shape_text_escapes(x):
    y = x.reshape(x.shape[0], -1)
    s = f"{y.shape}|{y.shape[0] * 3}"
    dynamo.graph_break()
    return y * 2, s


def _shape_text_after_metadata_change(x):
    n = x.shape[0] * 2
    s = f"{n}"
    x.unsqueeze_(0)
    dynamo.graph_break()
    return s, x.shape


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_shape_text_used, _shape_text_escapes, _shape_text_after_metadata_change])
def test_formatted_symbolic_sizes_values(fn, backend):
    """A used text specializes its sizes (the branch is taken as eager takes it); a text that
    lives past a break is the graph's own size, also after the tensor's metadata changed."""
    c = check(fn, _batch, backend, calls=5)
    assert c["eager_fallbacks"] == 0, c


# Note [symbolic module arguments] (src/symbolic/variables/nn_module.rs): HF question
# answering's loss `nn.CrossEntropyLoss(ignore_index=start_logits.size(1))` broke once the
# length was dynamic.


def _qa_loss(logits, pos):
    ignored_index = logits.size(1)
    pos = pos.clamp(0, ignored_index)
    loss_fct = nn.CrossEntropyLoss(ignore_index=ignored_index)
    return loss_fct(logits, pos)


def _flatten_from_size(x, pos):
    n = x.size(1)
    return nn.Softmax(dim=n - n + 1)(x) + pos.float().mean()


def _constructor_uses_value(x, pos):
    n = x.size(1)
    return nn.Dropout(p=n / 1000)(x) * 0 + x


_QA = [
    (torch.linspace(-1, 1, 16).reshape(2, 8), torch.tensor([1, 30])),
    (torch.linspace(-2, 1, 24).reshape(3, 8), torch.tensor([1, 2, 99])),
    (torch.linspace(-1, 3, 24).reshape(2, 12), torch.tensor([5, 40])),
    (torch.linspace(-1, 2, 20).reshape(4, 5), torch.tensor([5, 40, 2, 1])),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_qa_loss, _flatten_from_size])
def test_torch_module_built_from_symbolic_int(fn, backend):
    c = check(fn, lambda i: _QA[i], backend, calls=4)
    assert c["graph_breaks"] == 0, c
    assert c["graphs"] == 2, c


@pytest.mark.parametrize("backend", ["eager"])
def test_torch_module_constructor_using_symbolic_int_still_right(backend):
    """A constructor that computes with the size (`Dropout(p=n / 1000)` validates `p`) is a
    break as before, with eager's results."""
    torch.manual_seed(0)
    c = check(_constructor_uses_value, lambda i: (torch.ones(2 + i, 3 + i), torch.tensor([1])), backend, calls=3)
    assert c["eager_fallbacks"] == 0, c


# CPython 3.11's `a and b` / `a or b` of tensors whose value is kept (JUMP_IF_FALSE_OR_POP /
# JUMP_IF_TRUE_OR_POP) could not be a break point: the whole frame ran eagerly (audit 50, K7).
# The break now runs the jump, the operand kept on the jump's path.


def _tensor_and(a, b):
    x = (a * 2).relu() + b.sin()
    y = x @ x.T
    ok = y.sum() > 0 and a.sum() > 0
    return y * (2 if ok else 3), ok


def _tensor_or(a, b):
    x = a + 1
    r = x.sum() > 3 or b
    return x * 2, r


def _kept_values(a, b):
    return bool(a.sum() and b.sum()), a.sum() or b.sum(), (a.sum() > 0 and 5)


_SIGNS = [
    (torch.ones(4, 4), torch.ones(4, 4)),
    (-torch.ones(4, 4), torch.ones(4, 4)),
    (torch.zeros(4, 4), torch.ones(4, 4)),
    (torch.ones(4, 4), torch.zeros(4, 4)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_tensor_and, _tensor_or, _kept_values])
def test_kept_tensor_and_or_breaks_at_the_jump(fn, backend):
    for i in range(len(_SIGNS)):
        c = check(fn, lambda _, i=i: _SIGNS[i], backend, calls=1)
        assert c["eager_fallbacks"] == 0, c
        # The work before the jump is captured.
        assert c["graphs"] >= 1, c


# Note [profiler ranges] (src/symbolic/translator.rs): `torch.profiler.record_function` blocks
# broke 2-7 times each (its object, its `__enter__` over torch's profiler ops, typing helpers).


def _range_block(x):
    with torch.autograd.profiler.record_function("blk"):
        y = x * 2 + 1
    return y.sin()


def _range_across_break(x):
    with torch.profiler.record_function("blk") as r:
        y = x * 2 + 1
        dynamo.graph_break()
        y = y + 1
    return y.sin(), type(r).__name__, r.name


_RANGE = torch.profiler.record_function("outer")


def _range_from_outside(x):
    with _RANGE:
        return x + 1


@torch.profiler.record_function("decorated")
def _ranged_helper(x):
    return x * 3


def _calls_ranged_helper(x):
    return _ranged_helper(x) + 1


def _range_with_error(x):
    try:
        with torch.profiler.record_function("err"):
            raise ValueError("boom")
    except ValueError as e:
        return x + 1, str(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_range_block, _range_across_break, _range_from_outside, _calls_ranged_helper, _range_with_error])
def test_record_function_blocks_are_traced(fn, backend):
    c = check(fn, lambda: (torch.linspace(-1, 1, 8),), backend)
    breaks = 1 if fn is _range_across_break else 0
    assert c["graph_breaks"] == breaks and c["eager_fallbacks"] == 0, c
    assert c["graphs"] == breaks + 1, c


def test_record_function_under_a_profiler():
    """Compiled code runs under a running profiler; its ops are profiled."""
    f = dynamo.optimize("eager")(_range_block)
    x = torch.linspace(-1, 1, 8)
    with torch.profiler.profile() as prof:
        got = f(x)
    assert torch.allclose(got, _range_block(x))
    assert any("sin" in e.name for e in prof.events())


# Note [autograd introspection at a break] (src/symbolic/convert_frame.rs): a hook or
# `retain_grad` on a tensor the graph computed and used, or `autograd.grad` with respect to
# it, saw only part of its gradient (or raised "appears to not have been used in the graph")
# under AOTAutograd.


def _hook_on_used_intermediate(x):
    y = x * 2
    z = y + 1
    y.register_hook(lambda g: g * 2)
    w = y * 3
    return (z + w).sum()


def _grad_wrt_intermediate(x):
    y = x * 2
    z = (y**2).sum()
    (g,) = torch.autograd.grad(z, y)
    return g


def _grad_wrt_view(x):
    a = x[:, 0]
    loss = (a * x[:, 1]).sum()
    (g,) = torch.autograd.grad(loss, a, create_graph=True)
    return g


@pytest.mark.parametrize("backend", BACKENDS)
def test_hook_sees_the_whole_gradient(backend):
    x = torch.ones(2, requires_grad=True)
    _hook_on_used_intermediate(x).backward()
    dynamo.reset()
    y = torch.ones(2, requires_grad=True)
    dynamo.optimize(backend)(_hook_on_used_intermediate)(y).backward()
    assert torch.equal(x.grad, y.grad), (x.grad, y.grad)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_grad_wrt_intermediate, _grad_wrt_view])
def test_autograd_grad_with_respect_to_intermediate(fn, backend):
    c = check(fn, lambda: (torch.arange(6.0).reshape(3, 2).requires_grad_(),), backend)
    assert c["graphs"] >= 1, c


# Note [calls made for their effects] (src/symbolic/output_graph.rs): a torch call given
# tensors that answers None was folded to None and its effect lost.


def _vector_to_list(ts, v):
    torch.nn.utils.vector_to_parameters(v, ts)
    return ts[0] + 1


def _bump_version(t):
    torch.autograd.graph.increment_version(t)
    return t + 1, t._version


def _assert_close_inside(a, b):
    torch.testing.assert_close(a, b)
    return a + b


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_made_for_their_effects_run(backend):
    def run(f):
        ts = [nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(1))]
        r = f(ts, torch.tensor([5.0, 6.0, 7.0]))
        return r.tolist(), [t.tolist() for t in ts]

    dynamo.reset()
    assert run(dynamo.optimize(backend)(_vector_to_list)) == run(_vector_to_list)
    c = check(_bump_version, lambda: (torch.ones(2),), backend)
    assert c["eager_fallbacks"] == 0, c
    # The assertion runs: a failing one raises eager's AssertionError.
    c = check(_assert_close_inside, lambda: (torch.ones(2), torch.zeros(2)), backend)


# `torch._C._is_torch_function_enabled()` / `_is_torch_function_all_disabled()` inside a
# `DisableTorchFunction(Subclass)` block the trace entered answered the state outside it.


def _torch_function_state(x):
    a = torch._C._is_torch_function_enabled()
    with torch._C.DisableTorchFunctionSubclass():
        b = torch._C._is_torch_function_enabled()
        with torch._C.DisableTorchFunction():
            c = torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()
        d = torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()
    return a, b, c, d, torch._C._is_torch_function_enabled(), x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_function_state_queries_in_blocks(backend):
    c = check(_torch_function_state, lambda: (torch.ones(2),), backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


# Note [identity of constants] (src/symbolic/object_protocol.rs): `a is b` of str/int/tuple
# arguments was answered at trace time and guarded by value only.

_BIG = 10**6
_TUP = (1, 2)


# `is` against a literal draws a SyntaxWarning when the code is compiled: compiled quietly.
_ns = {"_BIG": _BIG, "_TUP": _TUP}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", SyntaxWarning)
    exec(
        compile(
            "def _identity_of_arguments(x, a, b, n, t):\n"
            "    return (x * 2 if a is b else x * 3), a is 'train', n is _BIG, t is _TUP\n",
            __file__,
            "exec",
        ),
        _ns,
    )
_identity_of_arguments = _ns["_identity_of_arguments"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_of_constant_arguments_is_guarded(backend):
    s1 = "".join(["tr", "ain"])
    s2 = "".join(["tr", "ain"])
    calls = [
        (torch.ones(2), s1, s1, _BIG, _TUP),
        (torch.ones(2), s1, s2, int("1000000"), tuple([1, 2])),
        (torch.ones(2), "train", "train", _BIG, _TUP),
        (torch.ones(2), s2, s1, int("1000000"), _TUP),
    ]
    check(_identity_of_arguments, lambda i: calls[i], backend, calls=len(calls))


# A format string on the stack at a break (`print('Loss: %.4f' % loss.item())`) is a string
# argument of the resume function: the lazy formatting took only literal formats, so the
# float was specialized and the resume function compiled again at every step (audit 51, N8).


def _log_item(x, i):
    a = (x * 2).sum()
    print("Loss: %.4f" % a.item())
    print("Loss: {:.4f}".format(a.item()))
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_logging_an_item_does_not_recompile(backend):
    c = check(_log_item, lambda i: (torch.full((3,), float(i) + 0.5), i), backend, calls=6)
    assert c["recompiles"] == 0, c


# Cheap needless breaks: PEP 604 unions in `isinstance`, `math.prod` of symbolic sizes,
# `types.SimpleNamespace` attributes, `==` / `in` / dict lookups on torch functions.


def _unions(x, v):
    a = isinstance(v, int | None)
    y = x + 1
    b = isinstance(y, torch.Tensor | None)
    return y * 2, a, b, isinstance(v, (str | bytes) | float)


def _prod_of_sizes(x):
    import math

    h = x.reshape(x.shape[0], -1)
    n = math.prod(h.shape)
    return x.reshape(-1)[:n] * 2, math.prod(x.shape[1:]), math.prod(x.shape, start=2)


_CFG = __import__("types").SimpleNamespace(shift=3, act="relu")


def _namespace_config(x, c):
    y = x * c.scale + _CFG.shift
    if _CFG.act == "relu":
        y = y.relu()
    return y, getattr(c, "missing", 7), hasattr(c, "scale")


_OPS = (torch.add, torch.mul)
_HANDLERS = {torch.add: 1, torch.clone: 2}


def _torch_function_keys(x, func):
    return x + 1, func == torch.clone, func != torch.add, func in _OPS, func in _HANDLERS, _HANDLERS.get(func, 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,make",
    [
        (_unions, lambda i: (torch.ones(2), [1, None, "s", 2.0][i])),
        (_prod_of_sizes, lambda i: (torch.arange(12.0 * (i + 2)).reshape(i + 2, 3, 4),)),
        (_namespace_config, lambda i: (torch.ones(2), __import__("types").SimpleNamespace(scale=2.0))),
        (_torch_function_keys, lambda i: (torch.ones(2), [torch.clone, torch.add, torch.sub, torch.mul][i])),
    ],
)
def test_needless_breaks_s51(fn, make, backend):
    c = check(fn, make, backend, calls=4)
    assert c["graph_breaks"] == 0 and c["eager_fallbacks"] == 0, c


class _StaticForward(nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)


class _CallsStatic(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = _StaticForward()

    def forward(self, x):
        return self.mod(x) + _StaticForward()(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_with_static_forward(backend):
    """`self.mod(x)` of a module whose `forward` is a staticmethod: called without the module,
    as `Module._call_impl` calls it (the trace passed `self`, a TypeError, the frame eager)."""
    m = _CallsStatic()
    c = check(m, lambda: (torch.linspace(-1, 1, 5),), backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0 and c["eager_fallbacks"] == 0, c


def test_progress_bar_frames_are_not_compiled():
    """tqdm's own frames are skipped, as torch's skip list does: a bar updated with a new loss
    every step compiled tqdm's methods again at each step, until the cache limit warned."""
    tqdm = pytest.importorskip("tqdm").tqdm
    import io

    def epoch(xs, out):
        bar = tqdm(xs, file=out, mininterval=0, ascii=True)
        tot = 0.0
        for x in bar:
            loss = (x * 2).sum()
            tot += loss.item()
            bar.set_postfix(loss=loss.item())
        bar.close()
        return tot

    f = dynamo.optimize("eager")(epoch)
    for i in range(4):
        xs = [torch.full((3,), float(i + j)) for j in range(3)]
        assert f(xs, io.StringIO()) == epoch(xs, io.StringIO())
    c = dynamo.counters()
    assert c["recompiles"] <= 2 and c.get("cache_limit_hits", 0) == 0, c


def test_closure_dict_guarded_only_where_read():
    """Note [free variables wrapped when read] (src/symbolic/convert_frame.rs): the frames of a
    step that never read the closure's `metrics` dict do not guard its keys (each new key
    recompiled every frame of the step, until the cache limit)."""
    m = nn.Linear(4, 3)
    metrics = {}
    history = []

    def step(x, k):
        y = m(x).sum()
        dynamo.graph_break()
        z = y * 2
        dynamo.graph_break()
        metrics[k] = z.detach()
        history.append(k)
        return z

    f = dynamo.optimize("eager")(step)
    for i in range(6):
        x = torch.full((2, 4), float(i))
        assert torch.equal(f(x, "a%d" % (i % 2)), step(x, "a%d" % (i % 2)))
    c = dynamo.counters()
    # Only the last frame (which writes the dict) compiles again as keys appear.
    assert c["recompiles"] <= 3, c
    assert list(metrics) == ["a0", "a1"] and len(history) == 12


def test_nonrecursive_disable_skips_only_its_frame():
    """`torch._dynamo.disable(fn, recursive=False)`: `fn`'s own frame runs as Python, what it
    calls is compiled (its frame was traced)."""
    log = []

    def inner(x):
        log.append(("inner", torch.compiler.is_compiling()))
        return x * 3

    @torch._dynamo.disable(recursive=False)
    def outer(x):
        log.append(("outer", torch.compiler.is_compiling()))
        return inner(x)

    def f(x):
        return outer(x) + 1

    assert torch.equal(dynamo.optimize("eager")(f)(torch.ones(2)), f(torch.ones(2)))
    assert log[:2] == [("outer", False), ("inner", True)], log


def _star_unpack_caught(x, seq):
    try:
        a, *b, c = seq
    except ValueError as e:
        return x + 1, str(e)
    return x * 2, a, b, c


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_star_unpack_error_is_raised_in_the_trace(backend):
    """`a, *b, c = [1]` raises eager's ValueError inside the trace, so a `try` around it takes
    its handler there (the whole frame ran eagerly, audit 51, O4)."""
    seqs = [[1], [1, 2, 3], (4,), "ab", "a"]
    for i in range(len(seqs)):
        c = check(_star_unpack_caught, lambda _, i=i: (torch.ones(2), seqs[i]), backend, calls=1)
        assert c["eager_fallbacks"] == 0 and c["graphs"] == 1, c


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        out = x.mm(w.t())
        out += b.unsqueeze(0).expand_as(out)
        ctx.save_for_backward(x, w, b)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        return g.mm(w), g.t().mm(x), g.sum(0)


class _WritesArgumentView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.view(-1).mul_(2)
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_function_forward_writing_its_own_tensor(backend):
    """Note [writes in a traced autograd.Function forward] (variables/functions.rs): `out +=
    bias` on the forward's own result is traced; a write through a view of an argument still
    runs the Function in Python."""

    def f(x, w, b):
        return _LinearFn.apply(x, w, b) * 2

    def g(x):
        return _WritesArgumentView.apply(x.clone()) + 1

    def grads(fn, *args):
        args = [a.detach().clone().requires_grad_() for a in args]
        out = fn(*args)
        out.sum().backward()
        return out, [a.grad for a in args]

    args = (torch.linspace(-1, 1, 4).reshape(2, 2), torch.linspace(0, 1, 6).reshape(3, 2), torch.ones(3))
    dynamo.reset()
    got, want = grads(dynamo.optimize(backend)(f), *args), grads(f, *args)
    assert torch.allclose(got[0], want[0]) and all(torch.allclose(p, q) for p, q in zip(got[1], want[1]))
    assert dynamo.counters()["graph_breaks"] == 0
    c = check(g, lambda: (torch.linspace(-1, 1, 3),), backend)
    assert c["graph_breaks"] >= 1, c


def _views_of_argument(d, x):
    return x * 2, d.keys(), d.items(), d.values()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_views_of_an_ordered_dict_argument(backend):
    """`d.keys()` of an OrderedDict argument comes back as that dict's live `odict_keys` (the
    whole frame ran eagerly: it was taken for a view of a dict made in the frame)."""
    import collections

    d = collections.OrderedDict(a=1, b=2)
    dynamo.reset()
    got = dynamo.optimize(backend)(_views_of_argument)(d, torch.ones(2))
    want = _views_of_argument(d, torch.ones(2))
    assert [type(v) for v in got[1:]] == [type(v) for v in want[1:]]
    d["c"] = 3
    assert [list(v) for v in got[1:]] == [list(v) for v in want[1:]]
    assert dynamo.counters()["graphs"] == 1


class _WithNew:
    def __new__(cls, v):
        obj = super().__new__(cls)
        obj.created = True
        return obj

    def __init__(self, v):
        self.v = v


class _ObjectNew:
    def __new__(cls, *args):
        o = object.__new__(cls)
        o.tag = "t"
        return o


class _Singleton:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst


class _NotAnInstance:
    def __new__(cls, x):
        return x * 2

    def __init__(self, x):
        raise AssertionError("not called: __new__ returned something else")


def _builds_objects_with_new(x):
    w = _WithNew(x)
    w2 = _ObjectNew(1, 2)
    return w.v * 2, w.created, type(w).__name__, w2.tag, type(w2).__name__, _NotAnInstance(x)


def _singleton(x):
    s = _Singleton()
    return x + 1, s is _Singleton(), type(s).__name__


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_builds_objects_with_new, _singleton])
def test_classes_with_their_own_new(fn, backend):
    """Note [user __new__] (variables/user_defined.rs): `cls.__new__` is inlined, its
    `super().__new__(cls)` / `object.__new__(cls)` a new tracked object, `__init__` run only on
    an instance of the class (audit 51, O10: each construction broke)."""
    _Singleton._inst = None
    c = check(fn, lambda: (torch.ones(3),), backend)
    assert c["graph_breaks"] == 0 and c["eager_fallbacks"] == 0, c


def _sorts_ints_and_bools(x, seq):
    return x * len(seq), sorted(seq), max(seq), seq[0] < seq[2], seq[1] + seq[2]


def test_symbolic_int_against_a_bool(capfd):
    """A bool operand of a symbolic int is the int it is: `sorted([n, m, True])` once the ints
    are symbolic raised inside sympy (a break) and printed `failed to eval lt(5, False)`."""
    seqs = [[3, 1, True], [5, 2, False], [0, 4, False], [7, 1, True]]
    c = check(_sorts_ints_and_bools, lambda i: (torch.ones(2), seqs[i]), "eager", calls=4)
    assert c["graph_breaks"] == 0, c
    assert "failed to eval" not in capfd.readouterr().err


class _ReversedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)])
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        for layer in reversed(self.layers):
            x = layer(x)
        for layer in reversed(self.seq):
            x = layer(x)
        return x, type(reversed(self.layers)).__name__


@pytest.mark.parametrize("backend", BACKENDS)
def test_reversed_module_list(backend):
    """`reversed(self.layers)`: the sequence protocol's `reversed` over the children (it broke,
    and the loop body compiled once per layer)."""
    torch.manual_seed(0)
    m = _ReversedLayers()
    c = check(m, lambda: (torch.linspace(-1, 1, 8).reshape(2, 4),), backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c
