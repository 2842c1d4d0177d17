"""Float arguments of a converted frame (symbolic ``SymFloat`` inputs, Note [symbolic sizes]):
a float that is not finite or is -0.0 is never a symbol (it is specialized as a constant), a
graph traced with a finite symbolic float is not reused for inf, NaN or -0.0, and a constant
float guard tells -0.0 from 0.0 and matches NaN with NaN. Every result equals eager."""

import math

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]
SPECIAL = [math.inf, -math.inf, math.nan, -0.0, 0.0, 1.5]


def same(a, b):
    """Eager-equal, with NaN equal to NaN and -0.0 different from 0.0."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def check(fn, calls, backend):
    opt = dynamo.optimize(backend)(fn)
    for args in calls:
        assert same(opt(*args), fn(*args)), (args, opt(*args), fn(*args))


def compare_special(n):
    return n == math.inf, n != n, n < math.inf, n == -math.inf


def guard_loss(x, l):
    if l == float("inf") or l != l:
        return x * 0, "skipped"
    return x * l, "ok"


def sign_of(s):
    return str(s), math.copysign(1.0, s)


def item_compare(t):
    return t.item() == float("inf"), t.item() != t.item(), t * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparison_with_inf_and_nan(backend):
    # First call with the special value (it must not become a symbol), then a finite graph
    # called with each special value (the float guard must fail).
    check(compare_special, [(math.inf,), (math.nan,)], backend)
    dynamo.reset()
    check(compare_special, [(1.0,)] + [(v,) for v in SPECIAL], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_on_nan_argument(backend):
    x = torch.ones(2)
    check(guard_loss, [(x, math.nan), (x, 2.0), (x, math.inf), (x, math.nan), (x, 3.0)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_zero_argument(backend):
    check(sign_of, [(-0.0,), (0.0,), (-0.0,), (1.5,), (-0.0,), (0.0,)], backend)
    dynamo.reset()
    check(sign_of, [(0.0,), (-0.0,)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_compared_with_inf(backend):
    check(item_compare, [(torch.tensor(v),) for v in [math.inf, math.nan, 1.0, math.inf, -0.0, math.nan]], backend)


def test_special_float_is_constant():
    # inf, NaN and -0.0 are guarded as constants: no symbolic float input for them.
    opt = dynamo.optimize("eager")(lambda x, n: x * n)
    x = torch.ones(2)
    for v in [math.nan, math.nan, -0.0, -0.0]:
        assert same(opt(x, v), x * v)


def sgd_step(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    return w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lr", [0.1, 1, 0.25])
def test_inplace_leaf_update_under_no_grad_with_float_step(backend, lr):
    # The graph ends inside `no_grad` (a graph break at `w.grad`): compiled on its first call
    # (symbolic float input), it must still leave grad mode off for the in-place update.
    opt = dynamo.optimize(backend)(sgd_step)
    for _ in range(2):
        w, we = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
        w.grad, we.grad = torch.ones(2), torch.ones(2)
        r, re = opt(w, lr), sgd_step(we, lr)
        assert r is w and torch.equal(w, we) and torch.equal(w.grad, we.grad) and w.requires_grad and w.is_leaf
        assert torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_update_under_no_grad_with_float_step(backend):
    def train_step(model, x, lr):
        model(x).sum().backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
        return model(x)

    torch.manual_seed(0)
    m, me = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    me.load_state_dict(m.state_dict())
    x = torch.randn(4, 3)
    opt = dynamo.optimize(backend)(train_step)
    for lr in [0.1, 0.2]:
        out, oute = opt(m, x, lr), train_step(me, x, lr)
        assert torch.allclose(out, oute)
        for p, pe in zip(m.parameters(), me.parameters()):
            assert torch.allclose(p, pe) and torch.allclose(p.grad, pe.grad) and p.is_leaf


# Note [float inputs]: Python float arithmetic on a float argument is IEEE double arithmetic,
# evaluated in order; sympy's algebra (re-association, exact constants) must never decide a
# value or a branch.

def cancel(x, f):
    return x * ((f + 1e-17) - f)


def absorbed(x, f):
    return x * 2 if f + 1e-17 == f else x * 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [cancel, absorbed])
def test_float_argument_arithmetic_is_not_reassociated(backend, fn):
    # (0.5 + 1e-17) rounds to 0.5 in IEEE double: the difference is 0.0 and the sum equals f.
    dynamo.reset()
    x = torch.ones(2)
    assert torch.equal(dynamo.optimize(backend)(fn)(x, 0.5), fn(x, 0.5))


def _float_ops(x, f):
    # Each line's value differs between exact (re-associated) and IEEE double arithmetic for
    # some argument below.
    a = (f + 1e16) - 1e16
    b = (f * 3.0) / 3.0 - f
    c = (f + 0.1) + 0.2 - (f + (0.1 + 0.2))
    d = f // 0.1
    e = f % 0.1
    g = f ** 2 - f * f
    h = abs(-f) - f
    i = max(f, f + 1e-17) - f
    j = min(f, f - 1e-17) - f
    return x * a, x * b, x * c, x * d, x * e, x * g, x * h, x * i, x * j


def _float_reads(x, f):
    # Reads of float-derived values: comparisons, round/int/math functions.
    k = (f + 1e-17) - f
    return (x + 1, k == 0.0, (f * 3.0) / 3.0 == f, f + 0.1 + 0.2 == f + 0.3, int(f * 10), round(f * 10),
            math.floor(f * 10), math.ceil(f * 10), round(f, 1))


FLOAT_VALUES = [0.5, 0.7, 1.1, 2.675, 1e-17, 3.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_argument_ops_match_python(backend):
    dynamo.reset()
    check(_float_ops, [(torch.ones(1), v) for v in FLOAT_VALUES], backend)
    # Arithmetic only: one graph serves every finite value.
    assert dynamo.counters()["recompiles"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_argument_reads_match_python(backend):
    dynamo.reset()
    # Each read specializes the float (a recompile per value, as torch): one value per reset
    # keeps under the cache size limit.
    for v in FLOAT_VALUES:
        dynamo.reset()
        check(_float_reads, [(torch.ones(1), v)], backend)
    for v in FLOAT_VALUES + SPECIAL:
        dynamo.reset()
        check(_float_compares, [(torch.ones(1), v)], backend)


def _float_compares(x, f):
    return x + 1, (f + 1e-17) - f == 0.0, f * 0.0 == 0.0, f - f == 0.0, f + 1e16 - 1e16 < f


def test_branch_on_float_argument_specializes():
    # A branch on a float-derived value compiles with the float as a constant (as torch does):
    # no symbolic float in the graph, and a new value recompiles.
    dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(example_inputs)
        return gm.forward

    opt = dynamo.optimize(backend)(absorbed)
    x = torch.ones(2)
    assert torch.equal(opt(x, 0.5), absorbed(x, 0.5))
    assert graphs[-1] == [x] or all(isinstance(a, torch.Tensor) for a in graphs[-1])
    assert torch.equal(opt(x, 1e-17), absorbed(x, 1e-17))
    assert len(graphs) == 2


def test_float_argument_arithmetic_writes_nothing_to_stderr():
    import subprocess
    import sys

    child = (
        "import torch, dynamo\n"
        "for b in ['eager', 'aot_eager', 'inductor']:\n"
        "    dynamo.reset()\n"
        "    g = dynamo.optimize(b)(lambda x, f: (x * 1, divmod(f, 0.5)))\n"
        "    for v in (1.0, 1.5, 2.5):\n"
        "        g(torch.ones(1), v)\n"
        "    dynamo.reset()\n"
        "    dynamo.optimize(b)(lambda x, f: (x * 1, 1.0 + f == 1.0))(torch.ones(1), 1e-17)\n"
    )
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.strip() == ""
