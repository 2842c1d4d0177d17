"""Findings of stop 50: each is the smallest program that broke needlessly, recompiled or
differed from eager, run eagerly and compiled and compared exactly, with graph, break,
recompile and fallback counts."""

import contextlib
import io

import pytest
import torch

import dynamo
from _compare import check as _check

BACKENDS = ["eager", "aot_eager", "inductor"]


# Note [comprehension loops in a driver] (src/pycodegen/loop_body.rs): a graph break inside a
# comprehension over an iterator the trace cannot step (`d.items()` of a dict argument, `zip`,
# `enumerate` of a frame argument, a user iterable) ran the comprehension (3.11) or the rest of
# the frame (3.12) eagerly: the loop body read its accumulator below the iterator, and the
# comprehension's frame had a free variable (3.11) or a cleanup handler (3.12). The loop now
# runs in the driver, its element compiled per item, and the code after it compiled.


class _Items:
    """An iterator whose `__next__` runs Python (as a DataLoader's): the trace cannot step it."""

    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return self

    @dynamo.disable
    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.pop(0)


def _metrics(x, d):
    y = x + 1
    r = {k: (y * v).sum().item() for k, v in d.items()}
    return r, y * 2


def _enumerated(x, L):
    k = "outer"
    r = [(print(k), y * x)[1] for k, y in enumerate(L)]
    return r, k


def _zipped(x, L):
    r = [x * v * w for v, w in zip(L, [3, 4, 5]) if dynamo.graph_break() is None]
    return r, x.sum()


def _filtered(x, d):
    r = {k: (x * v).sum().item() for k, v in d.items() if v != 2}
    return r


def _user_iterable(x, it):
    r = [(dynamo.graph_break(), x * v)[1] for v in it]
    return r, x - 1


def _appends_elsewhere(x, L):
    out = []
    r = [out.append((x * v).sum().item()) or v for i, v in enumerate(L)]
    return r, out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,make",
    [
        (_metrics, lambda: (torch.ones(2), {"a": 1, "b": 2})),
        (_enumerated, lambda: (torch.ones(2), [1, 2, 3])),
        (_zipped, lambda: (torch.ones(2), [1, 2, 3])),
        (_filtered, lambda: (torch.ones(2), {"a": 1, "b": 2, "c": 3})),
        (_user_iterable, lambda: (torch.ones(2), _Items([1, 2, 3]))),
        (_appends_elsewhere, lambda: (torch.ones(2), [1, 2, 3])),
    ],
)
def test_comprehension_with_break_over_opaque_iterator(fn, make, backend):
    c = _check(fn, make, backend)
    assert c["eager_fallbacks"] == 0, c
    # The element's graph and the code after the comprehension are compiled.
    assert c["graphs"] >= 2, c


def _raises_in_element(x, L):
    r = [(print(i), x * (10 // (v - 2)))[1] for i, v in enumerate(L)]
    return r


def _changes_dict(x, d):
    r = [(d.__setitem__("new%d" % v, 0), dynamo.graph_break(), v)[2] for k, v in d.items()]
    return r


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize(
    "fn,make",
    [
        (_raises_in_element, lambda: (torch.ones(2), [1, 2, 3])),
        (_changes_dict, lambda: (torch.ones(2), {"a": 1})),
    ],
)
def test_comprehension_driver_errors_match_eager(fn, make, backend):
    """The exception and its traceback (the comprehension's line, no driver frame) are eager's:
    an error in the element, and `RuntimeError: dictionary changed size during iteration` from
    the iterator the driver steps."""
    _check(fn, make, backend)


def test_comprehension_accumulator_is_not_guarded():
    """The half-built list reaches each loop body function on the stack: it is wrapped
    append-only (Note [append-only stack slots] in src/symbolic/code_info.rs), so the body does
    not recompile as the list grows."""
    def f(x, it):
        return [(dynamo.graph_break(), x * v)[1] for v in it]

    dynamo.reset()
    c = dynamo.optimize("eager")(f)
    for n in (5, 7):
        out = c(torch.ones(2), _Items(torch.ones(2) * i for i in range(n)))
        assert len(out) == n and torch.equal(out[-1], torch.ones(2) * (n - 1))
    assert dynamo.counters()["recompiles"] == 0, dynamo.counters()


# K6: a graph with no input requiring grad went to inductor's inference compilation, which
# does not run the graph's `_set_grad_enabled` nodes: the resume function after a break inside
# a `no_grad()` block (which exits the block in its graph) left grad mode off for the rest of
# the program.


def _break_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("hi")
    return torch.ones(2) * 2, y


def _break_in_enable_grad(x):
    with torch.enable_grad():
        y = x * 2
        print("hi")
    return torch.ones(2) * 2, y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ambient", [True, False])
@pytest.mark.parametrize("fn", [_break_in_no_grad, _break_in_enable_grad])
def test_grad_mode_after_block_cut_by_break(fn, ambient, backend):
    dynamo.reset()
    f = dynamo.optimize(backend)(fn)
    with torch.set_grad_enabled(ambient):
        for _ in range(2):
            with contextlib.redirect_stdout(io.StringIO()):
                f(torch.randn(3))
            assert torch.is_grad_enabled() is ambient


# K1: `m.name` where the class defines `name` (a method, property, staticmethod, or a module
# set on the class) or the instance dict holds it, and `name` is also a submodule in `_modules`:
# Python finds the class's or instance's first; the trace took the submodule.


class _MethodShadows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.activation = torch.nn.ReLU()

    def activation(self, x):  # noqa: F811 - the shadowing is the point
        return x * 1.2

    def forward(self, x):
        return self.activation(x)


class _PropertyShadows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU()

    @property
    def act(self):  # noqa: F811
        return torch.nn.functional.silu

    def forward(self, x):
        return self.act(x)


class _ClassModuleShadows(torch.nn.Module):
    shared = torch.nn.Tanh()

    def __init__(self):
        super().__init__()
        self.shared = torch.nn.ReLU()

    def forward(self, x):
        return self.shared(x)


class _InstanceDictShadows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.nn.ReLU()
        object.__setattr__(self, "f", torch.neg)

    def forward(self, x):
        return self.f(x)


class _OwnGetattr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.g = torch.nn.ReLU()

    def __getattr__(self, name):
        if name == "g":
            return torch.sigmoid
        return super().__getattr__(name)

    def forward(self, x):
        return self.g(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [_MethodShadows, _PropertyShadows, _ClassModuleShadows, _InstanceDictShadows, _OwnGetattr])
def test_module_attribute_precedence(cls, backend):
    m = cls()
    x = torch.tensor([-1.0, 2.0, -3.0])
    expected = m(x)
    dynamo.reset()
    f = dynamo.optimize(backend)(m)
    for _ in range(2):
        assert torch.allclose(f(x), expected)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["recompiles"] == 0, c


# L5: a graph that holds an autocast block and writes an input had no failure handler at all,
# and the handler of the others re-raised a KeyboardInterrupt before putting the autocast state
# back: after the error every later matmul ran in bfloat16.


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_state_after_graph_error(backend):
    def fn(x, s):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            x.add_(1)
            y = x @ x
            z = torch.normal(y.float(), s)
        return z

    dynamo.reset()
    f = dynamo.optimize(backend)(fn)
    f(torch.ones(2, 2), torch.tensor([1.0, 1.0]))
    for _ in range(2):
        x = torch.ones(2, 2)
        with pytest.raises(RuntimeError, match="normal expects"):
            f(x, torch.tensor([-1.0, 1.0]))
        assert not torch.is_autocast_enabled("cpu")
        assert torch.equal(x, torch.full((2, 2), 2.0))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_autocast_state_after_keyboard_interrupt(backend):
    armed = [False]

    @dynamo.allow_in_graph
    def probe(t):
        if armed[0] and not isinstance(t, torch._subclasses.FakeTensor):
            raise KeyboardInterrupt
        return t * 1

    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = probe(x @ w)
            z = y @ w
        return z.float()

    dynamo.reset()
    f = dynamo.optimize(backend)(fn)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    f(x, w)
    armed[0] = True
    with pytest.raises(KeyboardInterrupt):
        f(x, w)
    assert not torch.is_autocast_enabled("cpu")


# L3: value-dependent errors of ops missing from `RAISES_ON_VALUES` (`torch.normal` with a
# negative std, an in-place integer `//=` by zero) left a graph that writes an input unprotected
# after its first call: the user's `except` was skipped and the side effects before it lost.


def _normal_in_try(mu, std, stats):
    stats.add_(1)
    try:
        return torch.normal(mu, std)
    except RuntimeError:
        return torch.zeros_like(mu) - 1


def _ifloordiv(x, y, log):
    x.add_(1)
    log.append("a")
    z = x.long()
    z //= y
    return z


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_errors_of_unlisted_ops_reach_handlers(backend):
    dynamo.reset()
    f = dynamo.optimize(backend)(_normal_in_try)
    stats = torch.zeros(1)
    for s in ([1.0, 1.0], [2.0, 2.0]):
        f(torch.zeros(2), torch.tensor(s), stats)
    assert f(torch.zeros(2), torch.tensor([-1.0, 1.0]), stats).tolist() == [-1.0, -1.0]
    assert stats.tolist() == [3.0]
    dynamo.reset()
    g = dynamo.optimize(backend)(_ifloordiv)
    for y in ([1, 2], [2, 3]):
        g(torch.ones(2), torch.tensor(y), [])
    x, log = torch.ones(2), []
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        g(x, torch.tensor([0, 1]), log)
    assert log == ["a"] and x.tolist() == [2.0, 2.0]


# L1: a KeyboardInterrupt (Ctrl-C), SystemExit or user BaseException raised while a frame was
# converted became a graph break or a compile error and the frame ran on; the inductor runtime
# reran the graph through `gm.forward` on one (Note [interrupts during a conversion]).


class _Fatal(BaseException):
    pass


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, _Fatal])
def test_base_exception_from_backend_propagates(exc):
    def backend(gm, example_inputs):
        raise exc()

    dynamo.reset()
    f = dynamo.optimize(backend)(lambda x: x.sin() + 1)
    with pytest.raises(exc):
        f(torch.ones(3))


def test_keyboard_interrupt_while_tracing_propagates():
    calls = [0]

    def slow(x):
        calls[0] += 1
        if calls[0] == 1:
            raise KeyboardInterrupt
        return x * 2

    op = dynamo.allow_in_graph(slow)

    def fn(x):
        return op(x + 1) - 1

    dynamo.reset()
    f = dynamo.optimize("eager")(fn)
    with pytest.raises(KeyboardInterrupt):
        f(torch.ones(3))
    assert torch.equal(f(torch.ones(3)), torch.full((3,), 3.0))
    assert dynamo.counters()["graphs"] == 1


def test_keyboard_interrupt_in_inductor_runtime_propagates():
    armed = [False]

    @dynamo.allow_in_graph
    def probe(t):
        if armed[0] and not isinstance(t, torch._subclasses.FakeTensor):
            raise KeyboardInterrupt
        return t * 1

    def fn(x):
        return probe(x.sin()).cos() + 1

    dynamo.reset()
    f = dynamo.optimize("inductor")(fn)
    f(torch.ones(8))
    armed[0] = True
    with pytest.raises(KeyboardInterrupt):
        f(torch.ones(8))


# M2: automatic dynamic made every dimension of a tensor whose batch changed symbolic; for an
# image batch the ShapeEnv's work on window-partition reshapes over symbolic channels and
# spatial sizes took minutes (torchvision MaxVit did not finish its second call in 300 s).
# Tensors of more than two dimensions now follow torch's per-dimension rule.


def test_image_batch_becomes_dynamic_in_its_batch_only():
    def f(x):
        b, c, h, w = x.shape
        return x.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 3, 5, 1).reshape(b, -1, c).sum(1)

    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    for b in (2, 3, 4, 5):
        x = torch.randn(b, 3, 8, 8)
        assert torch.allclose(g(x), f(x))
    assert dynamo.counters()["recompiles"] == 1
    # The spatial size never varied: it stayed static, so a new one compiles again.
    x = torch.randn(5, 3, 16, 16)
    assert torch.allclose(g(x), f(x))
    assert dynamo.counters()["recompiles"] == 2


# M3: a shape relation holding a rounding of a float expression (`math.ceil(2.0 * float(n))`
# from a float-step `arange` feeding a reshape) was evaluated as a float relation, whose modulo
# is not modelled: it failed although it held, and every new shape compiled again.


def test_shape_guard_with_rounded_float():
    def f(x):
        b, n = x.shape
        pos = torch.arange(float(n), float(-n), -1.0)
        e = pos[None, :, None].expand(b, -1, 4) * x.sum()
        return e.reshape(-1, b).sum(0)

    dynamo.reset()
    g = dynamo.optimize("eager")(f)
    for s in ((2, 8), (3, 8), (2, 12), (3, 12), (4, 16), (5, 20)):
        x = torch.randn(*s)
        torch.testing.assert_close(g(x), f(x))
    assert dynamo.counters()["recompiles"] <= 2, dynamo.counters()


# M5: an instance of a class from `torchvision` (or any module whose name starts with "torch"
# but is not torch: `transforms.Compose`, `ops.poolers.LevelMapper`) was taken for torch's own,
# so calling it, iterating it or stepping it broke the graph.


class _Compose:
    __module__ = "torchvision.transforms.transforms"

    def __init__(self, fns):
        self.fns = fns

    def __call__(self, x):
        for f in self.fns:
            x = f(x)
        return x

    def __iter__(self):
        return iter(self.fns)


_COMPOSE = _Compose([lambda t: t * 2, lambda t: t + 1])


def _call_compose(x):
    return _COMPOSE(x).sin()


def _iter_compose(x):
    for f in _COMPOSE:
        x = f(x)
    return x


@pytest.mark.parametrize("fn", [_call_compose, _iter_compose])
def test_torchvision_classes_are_traced(fn):
    x = torch.rand(3, 5)
    dynamo.reset()
    assert torch.allclose(dynamo.optimize("eager")(fn)(x), fn(x))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


# K13: a multi-output `out=` op returned new trackers, not the `out` tensors: `vals is v` was
# False inside the frame.


def _sort_out(x, v, i):
    vals, idx = torch.sort(x, out=(v, i))
    return vals is v, idx is i, vals + 0


def _frexp_out(x, m, e):
    r = torch.frexp(x, out=[m, e])
    return r[0] is m, r.exponent is e


def _max_out(x, v, i):
    r = torch.max(x, dim=0, out=(v, i))
    return r.values is v, r[1] is i, type(r)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,idx_dtype", [(_sort_out, torch.long), (_frexp_out, torch.int32), (_max_out, torch.long)]
)
def test_multi_output_out_identity(fn, idx_dtype, backend):
    c = _check(fn, lambda: (torch.tensor([3.0, 1.0, 2.0]), torch.empty(0), torch.empty(0, dtype=idx_dtype)), backend)
    assert c["graphs"] == 1, c


# K3: calling a `dynamo.optimize`d function from a frame being traced broke the graph (the
# wrapper sets the hook again), and the inner backend compiled the inner function; it is now
# inlined under the outer backend (Note [nested optimize]).


def test_nested_optimize_is_inlined_under_the_outer_backend():
    seen = {"outer": 0, "inner": 0}

    def outer_be(gm, example_inputs):
        seen["outer"] += 1
        return gm.forward

    def inner_be(gm, example_inputs):
        seen["inner"] += 1
        return gm.forward

    def helper(x):
        return x.sin() * 2

    wrapped = dynamo.optimize(inner_be)(helper)

    def step(x):
        return wrapped(x + 1).cos()

    x = torch.randn(4)
    expected = (helper(x + 1)).cos()
    dynamo.reset()
    f = dynamo.optimize(outer_be)(step)
    assert torch.allclose(f(x), expected)
    assert seen == {"outer": 1, "inner": 0}
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


# K4: numpy integer and float scalars (`np.int64(8)`, `np.float32(2.5)`) broke the graph at
# every use; they are literals now (Note [numpy scalars] in src/symbolic/builder.rs), and a graph
# op gets their Python number.

np = pytest.importorskip("numpy")


def _np_mod(x, a, b):
    return x + (a % b), a % b


def _np_scale(x, s):
    return x * s


def _np_size(x, n):
    return torch.zeros(n, 4) + x[n - 2], list(range(n))


def _np_reciprocal(x, s):
    with np.errstate(divide="ignore"):
        return x * s, 1 / s


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,make",
    [
        (_np_mod, lambda: (torch.linspace(-1, 1, 4), 4096, np.int64(8))),
        (_np_scale, lambda: (torch.linspace(-1, 1, 4), np.float32(2.5))),
        (_np_scale, lambda: (torch.ones(4, dtype=torch.int32), np.int64(3))),
        (_np_size, lambda: (torch.linspace(-1, 1, 4), np.int64(3))),
    ],
)
def test_numpy_scalars_are_captured(fn, make, backend):
    c = _check(fn, make, backend)
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def test_numpy_scalar_guard_tells_signed_zeros_apart():
    dynamo.reset()
    f = dynamo.optimize("eager")(_np_reciprocal)
    assert f(torch.ones(2), np.float32(-0.0))[1] == -np.inf
    assert f(torch.ones(2), np.float32(0.0))[1] == np.inf
    r = f(torch.ones(2), np.float32(0.5))[1]
    assert type(r) is np.float32 and r == 2.0
