"""Python kinds the trace left to graph breaks, round s37: each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values, Python types, mutated
state, exceptions, and here `is_inference()` of tensors and the thread's grad and inference
modes afterwards), with a graph and break count showing it was captured."""

import sys

import pytest
import torch

import dynamo
from conftest import same_structure as _same

from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]
TRAIN_BACKENDS = ["eager", "aot_eager", "inductor"]


def _picture(v):
    """Values, Python types and, for tensors, dtype, shape, `requires_grad` and
    `is_inference()`; exceptions by type and message."""
    if isinstance(v, torch.Tensor):
        return ("tensor", v.detach().clone(), v.dtype, tuple(v.shape), v.requires_grad, v.is_inference())
    if isinstance(v, (tuple, list)):
        return (type(v), [_picture(i) for i in v])
    if isinstance(v, BaseException):
        return (type(v), str(v))
    return (type(v), v)




def _modes():
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled()


def _run(f, inputs, backward):
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t for t in inputs]
    try:
        out = f(*leaves)
        if backward:
            flat = list(out) if isinstance(out, (tuple, list)) else [out]
            loss = sum((o.sum() for o in flat if isinstance(o, torch.Tensor) and o.requires_grad), torch.zeros(()))
            if loss.requires_grad:
                loss.backward()
    except Exception as e:  # compared like a value
        out = e
    grads = [t.grad if isinstance(t, torch.Tensor) else None for t in leaves]
    return _picture(out), grads, _modes()


def check_modes(f, *inputs, backend="eager", graphs=1, breaks=0, backward=False, calls=2, runs_eagerly=False):
    """`f(*inputs)` eagerly and compiled (twice: the second call runs the cached code): equal
    outputs, `is_inference()`, gradients, errors and thread modes after the call, and `graphs`
    graphs with `breaks` breaks."""
    want = _run(f, inputs, backward)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    for _ in range(calls):
        got = _run(g, inputs, backward)
        assert _same(want, got), f"\n eager    {want!r}\n compiled {got!r}"
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (graphs, breaks), c
    assert c["recompiles"] == 0, c
    if runs_eagerly:
        assert c["eager_fallbacks"] >= 1, c
    else:
        no_fallback()
    return want


# ----- torch.inference_mode ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_inference_mode_block(backend):
    def f(x):
        y = x * 2
        with torch.inference_mode():
            z = y.detach() + 1
            inside = (torch.is_inference_mode_enabled(), torch.is_grad_enabled(), z.is_inference(), z.requires_grad)
        w = z * 3
        return y, z, w, inside, w.is_inference(), torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    check_modes(f, torch.randn(3, requires_grad=True), backend=backend, backward=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_false_and_nested(backend):
    def f(x):
        with torch.no_grad():
            with torch.inference_mode(mode=False):
                a = x * 2  # grad mode is on here: c10::InferenceMode(false) sets it
                ga = torch.is_grad_enabled()
        with torch.inference_mode():
            b = x + 1
            with torch.inference_mode(False):
                c = b * 2
                gc = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
            d = c + 1
        return a, ga, b, c, gc, d, a.requires_grad

    check_modes(f, torch.randn(3, requires_grad=True), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_object_made_before_the_block(backend):
    def f(x):
        m = torch.inference_mode()
        y = x + 1
        with m:
            z = y * 2
        return z, z.is_inference(), type(m).__name__

    check_modes(f, torch.randn(3), backend=backend)


@torch.inference_mode()
def _doubled(x):
    return x * 2, torch.is_inference_mode_enabled()


@torch.inference_mode
def _tripled(x):
    return x * 3


@torch.inference_mode(False)
def _plus_one(x):
    return x + 1, torch.is_inference_mode_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_decorator(backend):
    def f(x):
        a, on = _doubled(x)
        b = _tripled(x)
        c, off = _plus_one(x)
        return a, on, b, c, off, a.is_inference(), b.is_inference(), c.is_inference()

    check_modes(f, torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_exception_restores_the_mode(backend):
    def f(x):
        try:
            with torch.inference_mode():
                y = x * 2
                raise ValueError("inside")
        except ValueError as e:
            return y, str(e), torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    check_modes(f, torch.randn(3), backend=backend)


def test_inference_mode_exception_leaves_the_frame():
    def f(x):
        with torch.inference_mode():
            y = x * 2
            raise KeyError(y.shape[0])

    # The raise runs as Python (GB0009), inside the block the graph entered.
    want = check_modes(f, torch.randn(3), graphs=1, breaks=1)
    assert want[0][0] is KeyError


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_break_inside_the_block(backend, capsys):
    def f(x):
        with torch.inference_mode():
            y = x * 2
            print("inside", torch.is_inference_mode_enabled())
            z = y + 1
        return y, z, z.is_inference(), torch.is_inference_mode_enabled()

    check_modes(f, torch.randn(3), backend=backend, graphs=2, breaks=1)


@pytest.mark.parametrize("backend", TRAIN_BACKENDS)
def test_inference_tensor_saved_for_backward_raises(backend):
    def f(x):
        with torch.inference_mode():
            w = torch.ones(3) * 2
        return x * w

    # The product fails on fake tensors with eager's error (GB0008): it runs as Python to raise it.
    want = check_modes(f, torch.randn(3, requires_grad=True), backend=backend, graphs=1, breaks=1, backward=True)
    assert want[0][0] is RuntimeError and "Inference tensors cannot be saved for backward" in want[0][1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_tensor_written_outside_the_block_raises(backend):
    def f(x):
        with torch.inference_mode():
            w = x * 2
        w.add_(1)
        return w

    want = check_modes(f, torch.randn(3), backend=backend, graphs=1, breaks=1)
    assert want[0][0] is RuntimeError and "Inplace update to inference tensor outside InferenceMode" in want[0][1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_graph_that_fails_reruns_from_the_entry_modes(backend):
    def f(x, i):
        with torch.inference_mode():
            y = x * 2
            z = y[i]  # out of range: the graph raises, the frame reruns as Python
        return z

    want = check_modes(f, torch.randn(3), torch.tensor([5]), backend=backend)
    assert want[0][0] is IndexError and dynamo.counters()["graph_failures"] == 2


def test_inference_mode_graph_under_an_outer_inference_mode():
    def f(x):
        with torch.inference_mode(False):
            y = x * 2
        return y, y.is_inference(), torch.is_inference_mode_enabled()

    with torch.inference_mode():
        check_modes(f, torch.randn(3))


# ----- the frame's own namespace and frame object (CPython 3.11) --------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_locals_is_the_frames_one_dict(backend):
    """On 3.11 `locals()` / `vars()` return the frame's one `f_locals` dict, updated by each call
    (bound names written, unbound ones deleted, other keys kept) (Note [locals() in a trace])."""

    if sys.version_info >= (3, 13):
        pytest.skip("PEP 667: locals() is a new snapshot per call")

    def f(x):
        a = 1
        l = locals()
        b = x * 2
        l["extra"] = 5
        l2 = locals()
        del a
        v = vars()
        names = dir()
        return sorted(l), l is l2, v is l, names, b, l["b"] is b

    check(f, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_exec_after_locals_runs_the_frame_eagerly(backend):
    """`exec` at a break would write the transformed frame's dict, not the one `locals()`
    returned: the frame runs eagerly (Note [breaks that would show the transformed frame])."""
    if sys.version_info >= (3, 13):
        pytest.skip("PEP 667: locals() is a new snapshot per call")

    def f(x):
        a = 1
        b = x * 2
        l = locals()
        v = vars()
        exec("zz = 5")
        return sorted(l), sorted(v), sorted(locals()), b

    check(f, torch.ones(2), graphs=0, backend=backend)
    assert dynamo.counters()["eager_fallbacks"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_kept_frame_object_runs_the_frame_eagerly(backend):
    import inspect
    import sys

    def f(x):
        fr = inspect.currentframe()
        first = fr.f_code.co_firstlineno
        lineno_offset = fr.f_lineno - first
        loc = sorted(dict(fr.f_locals).keys())
        c = x + 1
        return lineno_offset, loc, c

    def g(x):
        fr = sys._getframe()
        y = x + 1
        return fr.f_lineno - g.__code__.co_firstlineno, sorted(fr.f_locals), y

    check(f, torch.ones(2), graphs=0, backend=backend)
    check(g, torch.ones(2), graphs=0, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_attributes_read_at_once(backend):
    import sys

    def f(x):
        y = x + 1
        line = sys._getframe().f_lineno - f.__code__.co_firstlineno
        return y * 2, line

    def g(x):
        y = x + 1
        same = sys._getframe().f_globals is globals()
        return y * 2, same

    check(f, torch.ones(2), graphs=0, backend=backend)
    check(g, torch.ones(2), graphs=1, backend=backend)
    no_fallback()


# ----- torch.distributions ----------------------------------------------------------------------

import torch.distributions as D  # noqa: E402

# Fixed values: the validation test below compares exactly, and a process's first random numbers
# differ from run to run (its log_prob under inductor differed from eager's in the last bit for
# some draws).
_G = torch.Generator().manual_seed(37)
LOC, SCALE, X = torch.randn(3, generator=_G), torch.rand(3, generator=_G) + 0.5, torch.randn(3, generator=_G)

DISTRIBUTIONS = {
    "normal": lambda l, s, x: (lambda d: (d.log_prob(x), d.entropy(), d.mean, d.stddev, d.variance))(D.Normal(l, s, validate_args=False)),
    "normal_rsample": lambda l, s, x: D.Normal(l, s, validate_args=False).rsample((2,)),
    "normal_sample": lambda l, s, x: D.Normal(l, s, validate_args=False).sample(),
    "categorical_logits": lambda l, s, x: (lambda d: (d.log_prob(torch.tensor([0, 1, 2])), d.entropy(), d.probs))(
        D.Categorical(logits=torch.stack([l, s, x]), validate_args=False)
    ),
    "categorical_probs": lambda l, s, x: (lambda d: (d.log_prob(torch.tensor([0, 1, 2])), d.entropy(), d.logits))(
        D.Categorical(probs=torch.stack([s, s * 2, s]), validate_args=False)
    ),
    "bernoulli": lambda l, s, x: (lambda d: (d.log_prob(torch.ones(3)), d.entropy(), d.probs))(D.Bernoulli(logits=l, validate_args=False)),
    "independent": lambda l, s, x: D.Independent(D.Normal(l, s, validate_args=False), 1, validate_args=False).log_prob(x),
    "uniform": lambda l, s, x: D.Uniform(l - 1, l + s, validate_args=False).log_prob(l),
    "multivariate_normal": lambda l, s, x: D.MultivariateNormal(l, torch.diag(s), validate_args=False).log_prob(x),
}


def _seeded(f):
    def run(*args):
        torch.manual_seed(0)
        return f(*args)

    return run


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_distribution_methods_are_one_graph(name, backend):
    """Note [torch.distributions as user objects]: a distribution built in the frame is a
    tracked object; its methods are inlined tensor math (before: a break at the constructor
    and one per method call)."""
    op = DISTRIBUTIONS[name]

    def f(l, s, x):
        return op(l, s, x)

    want = _run(_seeded(f), (LOC, SCALE, X), False)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    got = _run(_seeded(g), (LOC, SCALE, X), False)
    assert _same(want, got), f"\n eager    {want!r}\n compiled {got!r}"
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c
    no_fallback()


def test_distribution_in_a_policy_loss_trains():
    pol = torch.nn.Linear(4, 6)

    def loss_fn(obs, act):
        out = pol(obs)
        dist = D.Normal(out[:, :3], out[:, 3:].clamp(-5, 2).exp(), validate_args=False)
        return -dist.log_prob(act).sum(-1).mean() - 0.01 * dist.entropy().mean()

    obs, act = torch.randn(5, 4), torch.randn(5, 3)
    want = loss_fn(obs, act)
    want.backward()
    want_grads = [p.grad.clone() for p in pol.parameters()]
    pol.zero_grad()
    dynamo.reset()
    got = dynamo.optimize("inductor")(loss_fn)(obs, act)
    got.backward()
    assert torch.allclose(want, got)
    assert all(torch.allclose(a, p.grad, atol=1e-6) for a, p in zip(want_grads, pol.parameters()))
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


@pytest.mark.parametrize("backend", BACKENDS)
def test_distribution_argument_validation_runs_as_eager(backend):
    """`validate_args` (on by default) checks tensor values: each check runs as Python where it
    is reached, so a bad argument raises eager's ValueError."""

    def good(l, s, x):
        d = D.Normal(l, s, validate_args=True)
        return d.log_prob(x), d.entropy()

    def bad(l, s, x):
        # Explicit: other tests may switch the process-wide default off.
        return D.Normal(l, -s, validate_args=True).log_prob(x)

    check(good, LOC, SCALE, X, graphs=1, backend=backend)
    want = check(bad, LOC, SCALE, X, graphs=1, backend=backend)
    assert want[0] is ValueError


# ----- kinds left as named breaks ---------------------------------------------------------------


def _break_reasons(f, *args):
    dynamo.reset()
    return [str(r) for r in dynamo.explain(f)(*args).break_reasons]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exit_stack_is_a_named_break_with_eagers_results(backend, capsys):
    import contextlib

    def f(x):
        log = []
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.no_grad())
            stack.callback(log.append, "closed")
            y = x * 2
        try:
            with contextlib.ExitStack() as stack:
                stack.push(lambda *exc: True)  # suppresses the error
                raise KeyError("k")
        finally:
            log.append("after")
        return y, y.requires_grad, torch.is_grad_enabled(), list(log)

    want = check(f, torch.ones(2, requires_grad=True), graphs=1, backend=backend)
    assert want[1][3] == (list, [(str, "closed"), (str, "after")]), want
    reasons = _break_reasons(f, torch.ones(2, requires_grad=True))
    assert any("contextlib.ExitStack is not traced" in r for r in reasons), reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_bytearray_is_a_named_break_with_eagers_results(backend):
    def f(x):
        b = bytearray(b"abc")
        b[0] = 100
        b.append(101)
        b.extend(b"xy")
        del b[1]
        return x + len(b), bytes(b), b[1], b, b.hex(), type(b).__name__

    check(f, torch.ones(2), graphs=1, backend=backend)
    reasons = _break_reasons(f, torch.ones(2))
    assert any("bytearray is not modelled" in r for r in reasons), reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_context_entered_by_hand(backend):
    """`m.__enter__()` / `m.__exit__()` on a context made in the frame: at the break the local
    and the bound method were rebuilt as two objects, and `__exit__` on the fresh one switched
    grad mode off for good (eager: back on). The frame now runs eagerly."""

    def f(x):
        m = torch.no_grad()
        m.__enter__()
        y = x * 2
        m.__exit__(None, None, None)
        return y, torch.is_grad_enabled()

    def g(x):
        m = torch.inference_mode()
        m.__enter__()
        y = x * 2
        m.__exit__(None, None, None)
        return y, y.is_inference(), torch.is_inference_mode_enabled()

    check_modes(f, torch.ones(2, requires_grad=True), backend=backend, graphs=0, breaks=0, runs_eagerly=True)
    check_modes(g, torch.ones(2), backend=backend, graphs=0, breaks=0, runs_eagerly=True)
