"""Tensors of `torch.Tensor` subclasses with their own `__torch_function__` are traced (Note
[tensor subclasses] in src/symbolic/variables/tensor_subclass.rs): the user's
`__torch_function__` is inlined, so what it logs, counts or changes matches eager; the ops it runs
go into the graph; results come back as instances of the subclass, with their attributes.
Every case compares with eager: the type of every result, its values and `__dict__`, and the
side effects `__torch_function__` made; and asserts one graph and no break."""

import pytest
import torch
import torch.nn as nn

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]

LOG = []


class Logged(torch.Tensor):
    """Logs the name of every function it sees."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs)


class Scaled(torch.Tensor):
    """Doubles the result of every `mul`; runs the op itself with subclass dispatch off."""

    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        Scaled.calls += 1
        with torch._C.DisableTorchFunctionSubclass():
            ret = func(*args, **kwargs)
            if func.__name__ == "mul":
                ret = ret * 2
            if isinstance(ret, torch.Tensor):
                ret = ret.as_subclass(cls)
        return ret


class Tagged(torch.Tensor):
    """Results carry a Python attribute; the class has a constant, a method and a property."""

    unit = "m"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs)
        if isinstance(out, Tagged):
            out.tag = func.__name__
        return out

    def doubled(self):
        return self * 2

    @property
    def first(self):
        return self[0]


class Base(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append(("base", cls.__name__, tuple(t.__name__ for t in types)))
        return super().__torch_function__(func, types, args, kwargs)


class Derived(Base):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append(("derived", cls.__name__, tuple(t.__name__ for t in types)))
        return super().__torch_function__(func, types, args, kwargs)


class Polite(torch.Tensor):
    """Declines whenever a `Loud` tensor takes part."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if any(t is Loud for t in types):
            LOG.append("polite declines")
            return NotImplemented
        LOG.append("polite")
        return super().__torch_function__(func, types, args, kwargs)


class Loud(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append("loud")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class NoWrap(torch.Tensor):
    """Switches dispatch off: results are plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl


class MyParam(nn.Parameter):
    pass


def _same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-6, atol=1e-6)
        gd = {k: v for k, v in got.__dict__.items() if not k.startswith("_dynamo")}
        wd = {k: v for k, v in want.__dict__.items() if not k.startswith("_dynamo")}
        assert gd == wd, (gd, wd)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want, (got, want)


def _effects():
    return (list(LOG), Scaled.calls)


def _reset_effects():
    LOG.clear()
    Scaled.calls = 0


def check(fn, *args, backend, graphs=1):
    """`fn(*args)` compiled twice (compile, then the cached code) equals eager each time."""
    dynamo.reset()
    _reset_effects()
    want = fn(*args)
    want_effects = _effects()
    opt = dynamo.optimize(backend)(fn)
    for _ in range(2):
        _reset_effects()
        got = opt(*args)
        _same(got, want)
        assert _effects() == want_effects, (_effects(), want_effects)
    c = dynamo.counters()
    reasons = dynamo._C.break_reasons()
    assert not any("GB0015" in r for r in reasons), reasons
    assert c["graphs"] == graphs and c["graph_breaks"] == 0, (c, reasons)
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_logging_subclass_sees_every_call(backend):
    def fn(x, y):
        a = torch.add(x, y)
        b = a.mul(2)
        c = b + 1
        d = 1 - c
        e = -d[1:]
        return e.sin(), d.shape, d.dim(), type(d), isinstance(d, Logged), isinstance(y, Logged)

    x = torch.randn(4).as_subclass(Logged)
    check(fn, x, torch.randn(4), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_that_scales_outputs(backend):
    def fn(x):
        return x * 3, x.mul(2) + 1, torch.mul(x, x)

    check(fn, torch.arange(4.0).as_subclass(Scaled), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_attributes(backend):
    def fn(x):
        y = x.doubled()
        y.extra = x.scale
        return y, x.first, x.unit, x.scale * 2, y + 1

    x = torch.arange(3.0).as_subclass(Tagged)
    x.scale = 1.5
    got = check(fn, x, backend=backend)
    assert got[0].tag == "mul" and got[0].extra == 1.5 and got[4].tag == "add"


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_made_in_the_frame(backend):
    def fn(x):
        y = x.as_subclass(Logged)
        z = y * 2
        return z, z.as_subclass(torch.Tensor), type(z.as_subclass(torch.Tensor))

    check(fn, torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_result_used_afterwards(backend):
    def fn(x):
        return (x + 1).relu()

    x = torch.randn(5).as_subclass(Logged)
    dynamo.reset()
    LOG.clear()
    want = fn(x) * 2
    want_log = list(LOG)
    LOG.clear()
    got = dynamo.optimize(backend)(fn)(x) * 2
    _same(got, want)
    assert LOG == want_log


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixing_subclass_and_plain_tensors(backend):
    def fn(x, p):
        a = p + x
        b = torch.cat([p, x])
        c = torch.where(p > 0, x, p)
        d = p * 2
        return a, b, c, d, type(d)

    check(fn, torch.randn(3).as_subclass(Logged), torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_subclasses_most_derived_first(backend):
    def fn(b, d):
        return b + d, d * b, torch.sub(b, d)

    check(fn, torch.randn(3).as_subclass(Base), torch.randn(3).as_subclass(Derived), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_not_implemented_passes_to_the_next_type(backend):
    def fn(p, q):
        return p + q, p * 2

    check(fn, torch.randn(3).as_subclass(Polite), torch.randn(3).as_subclass(Loud), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_torch_function_gives_plain_results(backend):
    def fn(x):
        return x * 2, type(x * 2), type(x)

    check(fn, torch.randn(3).as_subclass(NoWrap), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_subclass_in_a_module(backend):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    m.weight = MyParam(m.weight.detach().clone())

    def fn(x):
        out = m(x)
        return out, type(m.weight), isinstance(m.weight, nn.Parameter), type(out)

    x = torch.randn(4, 3)
    check(fn, x, backend=backend)
    # The gradient reaches the subclass parameter.
    m.zero_grad()
    fn(x)[0].sum().backward()
    want = m.weight.grad.clone()
    m.zero_grad()
    dynamo.optimize(backend)(fn)(x)[0].sum().backward()
    torch.testing.assert_close(m.weight.grad, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_through_a_subclass(backend):
    def fn(x):
        return (x * x).sum() + x.sin().mean()

    base = torch.randn(5, requires_grad=True)
    dynamo.reset()
    LOG.clear()
    want = fn(base.as_subclass(Logged))
    want.backward()
    want_grad, want_log = base.grad.clone(), list(LOG)
    base.grad = None
    LOG.clear()
    got = dynamo.optimize(backend)(fn)(base.as_subclass(Logged))
    got.backward()
    _same(got, want)
    assert LOG == want_log
    torch.testing.assert_close(base.grad, want_grad)
    assert dynamo.counters()["graph_breaks"] == 0


def test_subclass_type_is_guarded():
    def fn(x):
        return x + 1

    dynamo.reset()
    opt = dynamo.optimize("eager")(fn)
    LOG.clear()
    assert type(opt(torch.ones(2).as_subclass(Logged))) is Logged
    assert LOG == ["add"]
    LOG.clear()
    assert type(opt(torch.ones(2))) is torch.Tensor
    assert LOG == []
    assert dynamo.counters()["recompiles"] == 1


def test_guard_checks_run_no_torch_function():
    def fn(x):
        return x * 2

    dynamo.reset()
    opt = dynamo.optimize("eager")(fn)
    x = torch.ones(2).as_subclass(Logged)
    opt(x)
    LOG.clear()
    opt(x)
    assert LOG == ["mul"]


def test_torch_dispatch_subclass_is_a_clean_break():
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")

    def fn(x):
        return x + 1

    x = two_tensor.TwoTensor(torch.ones(2), torch.zeros(2))
    dynamo.reset()
    want = fn(x)
    got = dynamo.optimize("eager")(fn)(x)
    assert type(got) is type(want)
    torch.testing.assert_close(got.a, want.a)
    torch.testing.assert_close(got.b, want.b)
    assert dynamo.counters()["graphs"] == 0
    assert any("[GB0015 tensor_subclass]" in r and "__torch_dispatch__" in r for r in dynamo._C.break_reasons()), dynamo._C.break_reasons()


def _kwargs_and_defaults(x):
    # C functions pass kwargs=None without keywords; Python-level Tensor methods (`split`,
    # `__len__`) pass their own defaults as keywords.
    return torch.add(x, 1, alpha=2), torch.stack([x, x]), x.sum(dim=0, keepdim=True), x.split(2), len(x)


def _in_place(x):
    y = x.clone()
    y.add_(1)
    y += 2
    return y, x.max(0)


def _disabled_in_the_frame(x):
    with torch._C.DisableTorchFunctionSubclass():
        y = x * 2
    return y, type(y), x + 1


def _returned_twice(x):
    y = x.clone()
    return y, y


def _shapes(x):
    return x.view(-1, 2).t() @ x.view(-1, 2), x.size(0), x.shape[0] * 2, x.dim()


@pytest.mark.parametrize("fn", [_kwargs_and_defaults, _in_place, _disabled_in_the_frame, _returned_twice, _shapes])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_what_torch_function_receives(fn, backend):
    got = check(fn, torch.arange(4.0).as_subclass(Logged), backend=backend)
    if fn is _returned_twice:
        assert got[0] is got[1]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_subclass_tensors_live_across_a_graph_break(backend):
    def fn(x):
        a = x * 2
        print("break")
        return a + 1, type(a)

    x = torch.arange(4.0).as_subclass(Logged)
    dynamo.reset()
    LOG.clear()
    want = fn(x)
    want_log = list(LOG)
    LOG.clear()
    got = dynamo.optimize(backend)(fn)(x)
    _same(got, want)
    assert LOG == want_log
    assert not any("GB0015" in r for r in dynamo._C.break_reasons())
