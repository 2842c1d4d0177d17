"""Python kinds the trace left to graph breaks, round s36: each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values, gradients, Python types,
mutated state, exceptions), with a graph and break count showing it was captured."""

import pytest
import torch

import dynamo
from conftest import same_structure as _same

from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]
TRAIN_BACKENDS = ["eager", "aot_eager", "inductor"]


def _structure(v):
    """What eager and compiled results are compared on: values, Python types, and for
    tensors dtype, shape and `requires_grad`."""
    if isinstance(v, torch.Tensor):
        return ("tensor", v.detach().clone(), v.dtype, tuple(v.shape), v.requires_grad)
    if isinstance(v, (tuple, list)):
        return (type(v), [_structure(i) for i in v])
    return (type(v), v)




def train_step(f, inputs):
    """`f(*inputs)` on fresh leaves, then `backward` of the sum of its differentiable tensor
    outputs: the outputs' structure and each input's gradient (None where eager gives None)."""
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t for t in inputs]
    out = f(*leaves)
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    loss = sum((o.float().sum() for o in flat if isinstance(o, torch.Tensor) and o.requires_grad), torch.zeros(()))
    if loss.requires_grad:
        loss.backward()
    return _structure(out), [t.grad if isinstance(t, torch.Tensor) else None for t in leaves]


def check_train(f, *inputs, backend="eager", graphs=1, breaks=0):
    """`train_step` eagerly and compiled: equal outputs, types, `requires_grad` and gradients,
    and `graphs` graphs with `breaks` breaks."""
    want = train_step(f, inputs)
    dynamo.reset()
    got = train_step(dynamo.optimize(backend)(f), inputs)
    assert _same(want, got), f"\n eager    {want!r}\n compiled {got!r}"
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (graphs, breaks), c
    return want


# ----- custom torch.autograd.Function ---------------------------------------------------------


class ScaledMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.scale = scale
        ctx.save_for_backward(x, w)
        return (x @ w) * scale

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        return gy @ w.t() * ctx.scale, x.t() @ gy * ctx.scale, None


class WrongCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x + 1  # not the true derivative: the user's backward must be what runs


BACKWARD_SEEN = []


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.needs = ctx.needs_input_grad
        ctx.save_for_backward(a, b)
        return a * b + 1

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        BACKWARD_SEEN.append(ctx.needs)
        return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)


class SortWithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort(-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx, x.shape[-1]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gv, gi, gn):
        (idx,) = ctx.saved_tensors
        return torch.zeros_like(gv).scatter(-1, idx, gv) * 2


class TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        BACKWARD_SEEN.append((g1 is None, g2 is None))
        out = torch.zeros_like(g1 if g1 is not None else g2)
        if g1 is not None:
            out = out + g1 * 2
        if g2 is not None:
            out = out + g2 * 30
        return out


class SetupStyle(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x.exp() * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out * 0.5, None


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g.neg() * ctx.alpha, None


grad_reverse = GradReverse.apply


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_apply_is_one_op(backend):
    """`Cls.apply` of a user Function is one graph op calling the real apply (Note [custom
    autograd.Function]): the user's backward computes the gradient (a deliberately wrong one
    here), non-tensor ctx attributes reach it, and the code around stays in the same graph.
    It was GB0006 at `.apply` and GB0007 at `ctx.save_for_backward`."""

    def f(x, w):
        h = ScaledMM.apply(x.sin(), w, 0.5).relu()
        return WrongCube.apply(h * 2).sum() + grad_reverse(h, 0.3).sum()

    torch.manual_seed(0)
    check_train(f, torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_needs_input_grad(backend):
    """`ctx.needs_input_grad` is eager's in forward and backward (one input without grad), and
    the backward runs once per `backward()`, as in eager."""

    def f(a, b):
        return NeedsGrad.apply(a * 2, b).tanh()

    BACKWARD_SEEN.clear()
    check_train(f, torch.randn(5, requires_grad=True), torch.randn(5), backend=backend)
    assert BACKWARD_SEEN == [(True, False), (True, False)], BACKWARD_SEEN


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_non_differentiable_once_differentiable_and_non_tensor_output(backend):
    """`mark_non_differentiable` (the index output does not require grad), a
    `once_differentiable` backward, and an int among the outputs (its Python type kept)."""

    def f(x):
        v, i, n = SortWithIndex.apply(x * 1.5)
        return v.sin(), i, n + 1

    check_train(f, torch.randn(3, 6, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_set_materialize_grads(backend):
    """With `set_materialize_grads(False)` the backward sees None for the output nothing
    used, as in eager."""

    def f(x):
        a, b = TwoOut.apply(x + 1)
        return a.cos()

    BACKWARD_SEEN.clear()
    check_train(f, torch.randn(4, requires_grad=True), backend=backend)
    assert BACKWARD_SEEN == [(False, True), (False, True)], BACKWARD_SEEN


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_setup_context_and_no_grad(backend):
    """A Function with a separate `setup_context`; and one called under `no_grad`, whose
    output does not require grad."""

    def f(x):
        y = SetupStyle.apply(x * 2, 3.0)
        with torch.no_grad():
            z = SetupStyle.apply(x, 2.0)
        return y + z, z

    check_train(f, torch.randn(4, requires_grad=True), backend=backend)


class InModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return grad_reverse(self.lin(x), 0.5).relu() + NeedsGrad.apply(x, x)


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_autograd_function_in_a_module_trains(backend):
    """A Function inside a module's forward: parameter gradients equal eager's."""
    torch.manual_seed(0)
    m = InModule()
    x = torch.randn(3, 4)
    m(x).sum().backward()
    want = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    dynamo.reset()
    dynamo.optimize(backend)(m)(x).sum().backward()
    for p, w in zip(m.parameters(), want):
        torch.testing.assert_close(p.grad, w)
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


EFFECTS = []


class AppendsInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        EFFECTS.append(1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Prints(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward")
        return x + 1

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("fn_cls", [AppendsInForward, Dirty, Prints])
def test_autograd_function_with_effects_is_a_break(fn_cls, capsys):
    """A forward with an effect outside the graph (a list append, `mark_dirty` and an in-place
    write, a print) keeps the apply in Python: a break whose reason names the Function, and
    eager's values, gradients and effects."""

    def f(x):
        return fn_cls.apply(x * 1).sum() * 3

    x = torch.randn(3, requires_grad=fn_cls is not Dirty)
    EFFECTS.clear()
    want = train_step(f, [x])
    n_effects = len(EFFECTS)
    dynamo.reset()
    explained = dynamo.explain(f)(x.detach().clone().requires_grad_(x.requires_grad))
    EFFECTS.clear()
    dynamo.reset()
    got = train_step(dynamo.optimize("eager")(f), [x])
    assert len(EFFECTS) == n_effects
    assert _same(want, got), (want, got)
    assert any(f"{fn_cls.__name__}.apply runs in Python" in str(r) for r in explained.break_reasons), explained.break_reasons


def test_autograd_function_explain_counts():
    """`explain` of the tester's reproducer: one graph, no break (torch.compile: 1 / 0)."""

    def f(x, w):
        return ScaledMM.apply(x, w, 0.5).relu().sum()

    dynamo.reset()
    e = dynamo.explain(f)(torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True))
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


# ----- __class__ of every kind ------------------------------------------------------------------

import collections
import functools


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_attribute_of_every_kind(backend):
    """`v.__class__` is `type(v)` for every kind the trace models (Note [__class__ of every
    kind]): a tensor, a symbolic or constant number, tuples, lists, dicts, `torch.return_types`,
    dict views, iterators, deques, sets and partials; `__name__`, `__qualname__`, `__module__`,
    `isinstance` and `is type(v)` on it are eager's. `t.__class__.__name__` was GB0016 and
    `.__class__` of a tuple or a return type GB0016."""

    def f(x, n):
        r = x.max(0)
        d = {"a": 1}
        vals = [x, x * 2, (x, x), [x], r, d, d.keys(), d.items(), iter([1, 2]), iter((1,)), collections.deque([1]), {1, 2}, functools.partial(max, 1), x.shape[0], n, 2.5]
        out = []
        for v in vals:
            c = v.__class__
            out.append((c, c.__name__, c.__qualname__, c.__module__, isinstance(v, c), c is type(v)))
        return x.sin(), out, f"{x.__class__.__name__}:{r.__class__.__name__}:{(x, x).__class__.__name__}"

    check(f, torch.ones(3), 2, graphs=1, breaks=0, backend=backend)
    no_fallback()


def test_class_attribute_of_a_dynamic_size():
    """`n.__class__` of a symbolic size is `int` (the eager value's type) and keeps the size
    symbolic: three lengths, two compiles."""

    def f(x):
        n = x.shape[0]
        return x * 2, n.__class__, n.__class__.__name__

    dynamo.reset()
    cf = dynamo.optimize("eager")(f)
    for k in (3, 4, 5):
        x = torch.randn(k)
        got, want = cf(x), f(x)
        assert got[1:] == want[1:] and torch.equal(got[0], want[0])
    assert dynamo.counters()["compiles"] == 2, dynamo.counters()


class HasClassProperty:
    @property
    def __class__(self):
        return int


def test_class_attribute_overridden_by_a_property():
    """A class that defines `__class__` itself answers through it, as eager does."""
    obj = HasClassProperty()

    def f(x):
        return x + 1, obj.__class__, isinstance(obj, int)

    check(f, torch.ones(2))


def test_iterator_on_the_stack_at_a_break_keeps_its_type():
    """An iterator on the stack at a break that is not a `for` loop's (an item of a list
    display being built) is rebuilt as the iterator it is (`list_iterator`), not as the tuple
    snapshot a loop iterator travels as (Note [loop iterators as snapshots]); it gave
    `tuple_iterator`."""

    def f(x):
        vals = [iter([1, 2]), print("between"), iter([3, 4])]
        total = 0
        for v in (5, 6):
            total += v
            print("in loop", total)
        return x + total, [type(v) for v in vals], [list(v) for v in vals if v is not None]

    check(f, torch.ones(2), graphs=1)


# ----- sizes kept symbolic under automatic dynamic shapes -------------------------------------


def _compiles_over_lengths(f, make, lengths, backend="eager"):
    dynamo.reset()
    cf = dynamo.optimize(backend)(f)
    for n in lengths:
        args = make(n)
        want, got = f(*args), cf(*args)
        assert type(want) is type(got)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            if isinstance(w, torch.Tensor):
                assert w.dtype == g.dtype and w.shape == g.shape and torch.equal(w, g), (n, w, g)
            else:
                assert type(w) is type(g) and w == g, (n, w, g)
    return dynamo.counters()["compiles"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_of_a_list_of_sizes_stays_symbolic(backend):
    """`torch.tensor([T] * B)` (CTC input lengths) and `torch.tensor([T, 2.5 * T])` of a size
    T: `torch.stack` of `torch.scalar_tensor`s with `torch.tensor`'s dtype, so T stays symbolic
    (2 compiles for 6 lengths, as torch.compile; it was one per length). `[T] * B` with B a
    dynamic size specializes B (the list's length is static)."""

    def lengths(x):
        B, T = x.shape[:2]
        return x.sum() * 0 + torch.tensor([T] * B), torch.tensor((T, T * 2.5)), torch.tensor([1, T], dtype=torch.float64)

    assert _compiles_over_lengths(lengths, lambda n: (torch.randn(2, n, 4),), [5, 6, 7, 9, 12, 3], backend) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_of_a_size_ratio_stays_symbolic(backend):
    """`round(T / 3)` of a size: its guard (`RoundToInt`, halves to even) is modelled, so T
    stays symbolic (3 compiles for 8 lengths, as torch.compile; it was one per length up to the
    cache limit)."""

    def third(x):
        T = x.shape[1]
        return x[:, : round(T / 3)] * 2, round(T / 2)

    assert _compiles_over_lengths(third, lambda n: (torch.randn(2, n, 4),), [5, 6, 7, 9, 12, 13, 3, 17], backend) <= 3


# ----- a logging call before a lock block ------------------------------------------------------

import logging
import threading

S36_LOCK = threading.Lock()
SEEN_BY_HANDLER = []


class LockWatchingHandler(logging.Handler):
    """A handler that records the message and whether `S36_LOCK` was held when it ran (not
    compiled itself: the breaks counted are the frame's)."""

    @dynamo.disable
    def emit(self, record):
        SEEN_BY_HANDLER.append((record.getMessage(), S36_LOCK.locked()))


S36_LOG = logging.getLogger("dynamo.test_kinds_s36")
S36_LOG.addHandler(LockWatchingHandler())
S36_LOG.setLevel(logging.INFO)
S36_LOG.propagate = False


@pytest.mark.parametrize("backend", BACKENDS)
def test_logging_before_and_inside_a_lock_block(backend):
    """A logging call with a user handler, then a `with lock:` block with another logging
    call inside: the lock's replayed `acquire()`/`release()` are replayed in call order with
    the logging calls (Note [lock blocks]), so the handler sees the lock free, then held, as in
    eager. The acquire counted as a write and the first call broke the graph (GB0005)."""

    def fn(x):
        S36_LOG.info("before %d", 1)
        with S36_LOCK:
            y = x + 1
            S36_LOG.info("inside %d", 2)
        return y * 2

    SEEN_BY_HANDLER.clear()
    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    assert SEEN_BY_HANDLER == [("before 1", False), ("inside 2", True)] * 2, SEEN_BY_HANDLER
    assert not S36_LOCK.locked()
