"""Findings of stop 46's testers and leftovers of earlier ones: each is the smallest program
that differed from eager, run eagerly and compiled and compared exactly (values, types,
identity, mutated state), with graph counts that show the code was captured."""

import copy

import pytest
import torch

import dynamo


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _function(params, *lines):
    """A function `f(params)` whose body is `lines` (compiled from text, so each test case is a
    frame of its own, as a user's function is)."""
    import operator

    ns = {}
    body = "\n".join("    " + line for line in lines)
    exec(f"def f({params}):\n{body}", {"torch": torch, "operator": operator}, ns)
    return ns["f"]


def check(f, *args, backend="eager", graphs=1):
    """Runs `f` eagerly and compiled on deep copies of `args`; compares results and the
    arguments afterwards; returns the compiled result."""
    want_args = copy.deepcopy(args)
    want = f(*want_args)
    dynamo.reset()
    got_args = copy.deepcopy(args)
    explained = dynamo.explain(f)(*copy.deepcopy(args))
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(*got_args)
    assert _same(got, want), (got, want)
    assert all(_same(g, w) for g, w in zip(got_args, want_args))
    assert explained.graph_count == graphs, explained.break_reasons
    assert explained.graph_break_count == 0, explained.break_reasons
    return got


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_every_read_of_tensor_device_is_a_new_object(backend):
    # Eager's `x.device` is a new torch.device at every read (THPDevice_New); a fake tensor
    # hands out one object, so `x.device is x.device` was True.
    def f(x):
        d = x.device
        return x.device is x.device, d is d, x.device == d, x.device is torch.device("cpu"), x + 1

    check(f, torch.ones(3), backend=backend)


def _both(f, *args, backend="inductor"):
    """`f` eagerly and compiled (after a reset) on clones of `args`: (eager, compiled, eager
    args after, compiled args after)."""
    ea = [a.clone() if isinstance(a, torch.Tensor) and not a._is_zerotensor() else a for a in args]
    ca = [a.clone() if isinstance(a, torch.Tensor) and not a._is_zerotensor() else a for a in args]
    want = f(*ea)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(*ca)
    return want, got, ea, ca


NEG_BODIES = {
    "mul": lambda x: x * 2,
    "add": lambda x: x + 0,
    "sum": lambda x: x.sum(0),
    "clone": lambda x: x.clone(),
    "where": lambda x: torch.where(x > -1.5, x, x * 3),
    "slice_mul": lambda x: x[1:] * 2,
    "to64": lambda x: x.to(torch.float64) + 1,
    "maximum": lambda x: torch.maximum(x, x * 0.5),
}


@pytest.mark.parametrize("body", sorted(NEG_BODIES))
def test_negative_bit_inputs_keep_their_sign(body):
    # Note [tensors whose memory is not their value]: kernels read the memory of a neg-bit
    # tensor, which holds minus its value.
    f = NEG_BODIES[body]
    x = torch._neg_view(torch.tensor([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]]))
    want, got, _, _ = _both(f, x)
    assert torch.equal(got, want), (got, want)


def test_negative_bit_made_in_the_graph():
    z = torch.tensor([1 + 2j, 3 - 1j])

    def f(z):
        return z.conj().imag * 2, z.conj().real + z.conj().imag

    want, got, _, _ = _both(f, z)
    assert all(torch.equal(g, w) for g, w in zip(got, want)), (got, want)


def test_a_later_negative_bit_input_runs_as_eager():
    f = lambda x: x * 2 + 1
    dynamo.reset()
    cf = dynamo.optimize("inductor")(f)
    plain = torch.tensor([1.0, 2.0])
    assert torch.equal(cf(plain), f(plain))
    neg = torch._neg_view(torch.tensor([1.0, 2.0]))
    assert torch.equal(cf(neg), f(neg))
    assert torch.equal(cf(plain), f(plain))


def test_negative_bit_input_written_in_place():
    def f(x, y):
        x.add_(y)
        return x * 1

    base_e, base_c = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    xe, xc = torch._neg_view(base_e), torch._neg_view(base_c)
    y = torch.tensor([10.0, 20.0])
    want = f(xe, y)
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(xc, y)
    assert torch.equal(got, want) and torch.equal(xc, xe) and torch.equal(base_c, base_e)


ZERO_BODIES = {
    "mul": lambda x: x * 2,
    "sum": lambda x: x.sum(),
    "sin": lambda x: x.sin() + 1,
    "add": lambda x: x + torch.ones(3, 4),
}


@pytest.mark.parametrize("body", sorted(ZERO_BODIES))
def test_zero_tensor_inputs_run_without_crashing(body):
    # A ZeroTensor has no memory: kernels given its null pointer crashed the interpreter.
    f = ZERO_BODIES[body]
    z = torch._efficientzerotensor(3, 4)
    want = f(z)
    for first in (z, torch.zeros(3, 4)):
        dynamo.reset()
        cf = dynamo.optimize("inductor")(f)
        cf(first)
        assert torch.equal(cf(z), want)


OUT_CASES = [
    ("sum", lambda x, o: torch.sum(x, 0, out=o), (4, 5), (4, 5)),
    ("sum_row", lambda x, o: torch.sum(x, 0, out=o), (4, 5), (1, 5)),
    ("sum_3d", lambda x, o: torch.sum(x, 0, out=o), (4, 5), (2, 1, 5)),
    ("amax", lambda x, o: torch.amax(x, 1, keepdim=True, out=o), (4, 5), (4, 4)),
    ("add", lambda x, o: torch.add(x, 1, out=o), (5,), (5, 1)),
    ("exp", lambda x, o: torch.exp(x, out=o), (5,), (3, 5)),
    ("sin", lambda x, o: torch.sin(x, out=o), (5,), (6, 5)),
    ("mean_0d", lambda x, o: torch.mean(x, out=o), (4, 5), (1,)),
    ("matmul", lambda x, o: torch.matmul(x, x.t(), out=o), (4, 5), (2, 4, 4)),
]


@pytest.mark.parametrize("name,op,xshape,oshape", OUT_CASES, ids=[c[0] for c in OUT_CASES])
def test_out_of_another_shape_is_resized(name, op, xshape, oshape):
    # Eager's out= overloads resize `out` to the result's shape (with a warning when it held
    # elements); the compiled plan copied the result into the old shape, broadcast.
    import warnings

    def f(x, o):
        op(x, o)
        return o, o * 2

    x = torch.randn(*xshape, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got, ea, ca = _both(f, x, torch.zeros(*oshape))
    assert got[0].shape == want[0].shape and ca[1].shape == ea[1].shape
    assert got[0] is ca[1]
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(ca[1], ea[1])


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_ambient_autocast_is_guarded(backend):
    # Note [ambient autocast]: compiled outside autocast and called inside it (and back), the
    # trace's decision on the result dtype went stale.
    def f(x):
        y = x @ x
        return (y + 1 if y.dtype == torch.float32 else y - 1), y.dtype

    dynamo.reset()
    cf = dynamo.optimize(backend)(f)
    x = torch.ones(2, 2)
    for _ in range(2):
        want = f(x)
        got = cf(x)
        assert got[1] == want[1] and torch.equal(got[0], want[0])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = f(x)
            got = cf(x)
        assert got[1] == want[1] == torch.bfloat16 and torch.equal(got[0], want[0])
        with torch.autocast("cpu", dtype=torch.float16):
            want = f(x)
            got = cf(x)
        assert got[1] == want[1] == torch.float16 and torch.equal(got[0], want[0])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_patched_tensor_operators_are_what_runs(backend):
    # Note [patched tensor operators]: the inductor lowered `x + 1` as an add whatever
    # `torch.Tensor.__add__` held; a patch after the compile must recompile, and so must undoing it.
    f = lambda x: x + 1
    g = lambda x: 2 * x - x
    dynamo.reset()
    cf, cg = dynamo.optimize(backend)(f), dynamo.optimize(backend)(g)
    x, y = torch.zeros(2), torch.ones(2)
    assert torch.equal(cf(x), f(x)) and torch.equal(cg(y), g(y))
    orig_add, orig_rmul = torch.Tensor.__add__, torch.Tensor.__rmul__
    try:
        torch.Tensor.__add__ = lambda self, o: torch.mul(self, o)
        torch.Tensor.__rmul__ = lambda self, o: torch.add(self, o)
        assert torch.equal(cf(x), f(x)) and torch.equal(cg(y), g(y))
        dynamo.reset()
        assert torch.equal(dynamo.optimize(backend)(f)(x), f(x))
    finally:
        torch.Tensor.__add__, torch.Tensor.__rmul__ = orig_add, orig_rmul
    assert torch.equal(cf(x), f(x)) and torch.equal(cg(y), g(y))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inputs_no_gradient_reaches_are_not_linked(backend, capsys):
    # Note [inputs no gradient reaches]: `t0` crosses the graph break but only feeds a dead
    # value; linking it into the output's autograd graph made backward walk into its history.
    def f(x, y):
        t0 = x * y.mean()
        x.mul_(2)
        print("gb")
        t6 = y.relu()
        t7 = torch.where(t0 > 0, t0, 0.5)  # noqa: F841 (dead, as in the tester's program)
        return t6

    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, generator=g, requires_grad=True)
    y = torch.randn(3, 3, generator=g, requires_grad=True)
    f(a * 1, y).sum().backward()
    want_a, want_y = a.grad, y.grad.clone()
    a.grad = y.grad = None
    dynamo.reset()
    out = dynamo.optimize(backend)(f)(a * 1, y)
    out.sum().backward()
    assert want_a is None and a.grad is None
    assert torch.equal(y.grad, want_y)
    assert capsys.readouterr().out == "gb\ngb\n"


@pytest.mark.parametrize(
    "body",
    ["n.real is n", "n.numerator is n", "n.conjugate() is n", "operator.index(n) is n", "n.__index__() is n", "n.__pos__() is n", "(n.imag, n.denominator)"],
)
def test_symbolic_ints_give_themselves_back(body):
    # Note [identity of symbolic numbers]: once `n` is symbolic (the second call), these are the
    # very int passed in, as CPython's `long_long` gives it; no specialization on its value.
    f = _function("x, n", f"return x + 1, {body}")
    dynamo.reset()
    cf = dynamo.optimize("eager")(f)
    for n in [1000, 2000, 3000, 4000]:
        want, got = f(torch.ones(2), n)[1], cf(torch.ones(2), n)[1]
        assert got == want and type(got) is type(want), (n, got, want)
    # A static compile, then one with `n` symbolic for every later value.
    assert dynamo.utils.counters["stats"]["unique_graphs"] == 2


MULTI_VIEW_BODIES = {
    "split_zero": "b.split(1)[0].zero_()",
    "chunk_add": "b.chunk(2)[1].add_(1)",
    "unbind_mul": "b.unbind(0)[0].mul_(2)",
    "torch_chunk": "torch.chunk(b, 2, 1)[0].fill_(3)",
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("body", sorted(MULTI_VIEW_BODIES))
def test_pieces_of_multi_output_views_refuse_in_place_writes(backend, body):
    # A piece of `split`/`chunk` leaves the graph (the in-place write breaks it) and is made
    # again from its base by the same op (Note [view outputs]), so autograd raises eager's error.
    f = _function("x", "b = x * 1", MULTI_VIEW_BODIES[body], "return b")

    def outcome(fn):
        try:
            return ("ok", fn(torch.ones(2, 2, requires_grad=True)).tolist())
        except RuntimeError as e:
            return ("raised", str(e))

    want = outcome(f)
    assert want[0] == "raised"
    dynamo.reset()
    assert outcome(dynamo.optimize(backend)(f)) == want
    dynamo.reset()
    assert dynamo.explain(f)(torch.ones(2, 2)).graph_count >= 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_pieces_of_split_carry_gradients_across_a_break(backend, capsys):
    def f(x):
        b = x * 2
        p, q = b.split(1)
        print("gb")
        return (p * 3 + q.sin()).sum()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, generator=g, requires_grad=True)
    f(x).backward()
    want = x.grad.clone()
    x.grad = None
    dynamo.reset()
    dynamo.optimize(backend)(f)(x).backward()
    torch.testing.assert_close(x.grad, want)


class _TBPTTCell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(4, 8)
        self.rec = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x, h):
        h = torch.tanh(self.inp(x) + self.rec(h.detach()))
        return self.out(h), h


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_truncated_backprop_through_time_with_a_detached_state(backend):
    # Note [inputs no gradient reaches]: the carried state `h` is only used detached, so eager
    # never links it; the compiled Function linked it, and the second step's backward ran into
    # the first step's freed graph.
    def train(model):
        g = torch.Generator().manual_seed(1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        h, losses = torch.zeros(2, 8), []
        for _ in range(3):
            y, h = model(torch.randn(2, 4, generator=g), h)
            loss = y.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().clone() for p in model.parameters()]

    torch.manual_seed(0)
    m = _TBPTTCell()
    m2 = copy.deepcopy(m)
    want_losses, want_params = train(m)
    dynamo.reset()
    got_losses, got_params = train(dynamo.optimize(backend)(m2))
    assert got_losses == pytest.approx(want_losses, rel=1e-5)
    for g, w in zip(got_params, want_params):
        torch.testing.assert_close(g, w)


NON_DIFFERENTIABLE_USES = {
    "detach": "(a.detach() * 3 + b).sum()",
    "compare": "((a > 0).float() * b).sum()",
    "zeros_like": "(torch.zeros_like(a) + b).sum()",
    "new_ones": "(a.new_ones(3) * b).sum()",
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("use", sorted(NON_DIFFERENTIABLE_USES))
def test_inputs_used_without_gradient_get_no_backward_call(backend, use):
    f = _function("a, b", f"return {NON_DIFFERENTIABLE_USES[use]}")

    def run(fn):
        v = torch.ones(3, requires_grad=True)
        w = torch.ones(3, requires_grad=True)
        a, b = v * 2, w * 5
        calls = []
        a.register_hook(lambda g: calls.append(g))
        fn(a, b).backward()
        # `a`'s graph was freed by that backward: eager never enters it again.
        fn(a, w * 5).backward()
        return calls, v.grad, w.grad

    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    assert got[0] == want[0] == [] and got[1] is None and want[1] is None
    torch.testing.assert_close(got[2], want[2])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_zero_exponent_keeps_its_input_linked(backend):
    # `x ** 0` has a gradient that reads no tangent, yet eager links `x` (PowBackward0):
    # the output requires grad and x.grad is zeros.
    f = lambda x: (x**0 * 2).sum()
    x = torch.randn(3, requires_grad=True)
    f(x).backward()
    want = x.grad.clone()
    x.grad = None
    dynamo.reset()
    out = dynamo.optimize(backend)(f)(x)
    assert out.requires_grad
    out.backward()
    assert torch.equal(x.grad, want)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_an_input_taken_before_the_graph_writes_it(backend):
    # Note [views taken before a write]: `v` was made after the graph's writeback of `y`, so it
    # was a fresh view of a tensor requiring grad, and `v.zero_()` passed where eager raises.
    def f(x, y):
        v = y[0]
        y.add_(x)
        v.zero_()
        return y

    def outcome(fn):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, 3, generator=g).requires_grad_().clone()
        y = torch.randn(3, 3, generator=g)
        try:
            return ("ok", fn(x, y).tolist())
        except RuntimeError as e:
            return ("raised", str(e))

    want = outcome(f)
    assert want[0] == "raised"
    dynamo.reset()
    assert outcome(dynamo.optimize(backend)(f)) == want


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_an_input_taken_before_the_write_sees_it(backend, capsys):
    def f(x, y):
        v = y[0]
        y.mul_(x)
        print("gb")
        return v * 1, y * 1

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 3, generator=g, requires_grad=True)
    y0 = torch.randn(3, 3, generator=g)
    want = f(x, y0.clone())
    sum(w.sum() for w in want).backward()
    want_grad = x.grad.clone()
    x.grad = None
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x, y0.clone())
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    sum(w.sum() for w in got).backward()
    torch.testing.assert_close(x.grad, want_grad)
