"""`with torch.autocast(...)` blocks inside a compiled function (Note [autocast blocks] in
python/dynamo/_amp.py): traced into the graph as state switches, not a graph break; results,
dtypes, gradients and the autocast state after the call equal eager's, also across a break
inside the block, an exception leaving it, a graph that fails at run time, and a later call
under another ambient autocast state."""

import warnings

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def autocast_state():
    return (
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
        torch.is_autocast_cache_enabled(),
        # The nesting count (torch returns it only from an increment or a decrement).
        torch.autocast_increment_nesting() - 1 + 0 * torch.autocast_decrement_nesting(),
    )


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=1e-2, rtol=1e-2)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def compare(fn, *args, backend="eager", calls=2):
    """Runs `fn` eagerly and compiled `calls` times; the results and the autocast state after
    each call must agree. Returns the counters."""
    before = autocast_state()
    expected = fn(*args)
    assert autocast_state() == before
    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    for _ in range(calls):
        got = compiled(*args)
        assert same(expected, got), (expected, got)
        assert autocast_state() == before
    return dynamo.counters()


LIN = torch.nn.Linear(8, 8)
X = torch.randn(4, 8)


def block(x):
    y = x * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = LIN(y)
        w = z.relu()
        inside = torch.is_autocast_enabled("cpu")
    return w.float() + 1, z.dtype, inside, torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_is_one_graph(backend):
    c = compare(block, X, backend=backend)
    assert (c["graphs"], c["graph_breaks"], c["recompiles"]) == (1, 0, 0), c


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_a_block(backend):
    lin = torch.nn.Linear(8, 4)

    def loss_of(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = lin(x).relu()
        return out.float().pow(2).sum(), out.dtype

    def grads(f):
        loss, dtype = f(X)
        loss.backward()
        g = (lin.weight.grad, lin.bias.grad)
        lin.weight.grad = lin.bias.grad = None
        return loss.detach(), dtype, g

    expected = grads(loss_of)
    dynamo.reset()
    compiled = dynamo.optimize(backend)(loss_of)
    for _ in range(2):
        assert same(expected, grads(compiled))
    c = dynamo.counters()
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_block(backend):
    printed = []

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = LIN(x)
            printed.append(torch.is_autocast_enabled("cpu"))  # traced
            print("inside")  # a graph break inside the block
            w = LIN(z.float()).relu()
            inner = torch.is_autocast_enabled("cpu")
        return w, z.dtype, inner, torch.is_autocast_enabled("cpu")

    c = compare(fn, X, backend=backend, calls=3)
    assert c["graph_breaks"] >= 1, c
    assert c["recompiles"] == 0, (c, dynamo._C.recompile_reasons())
    assert printed == [True] * 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_blocks_and_a_disabled_inner_block(backend):
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = LIN(x)
            with torch.autocast("cpu", enabled=False):
                b = LIN(x)
                with torch.autocast("cpu"):  # the dtype set by the outer block: bfloat16
                    c = LIN(x)
            d = LIN(x)
        return a.dtype, b.dtype, c.dtype, d.dtype, a + d, b

    c = compare(fn, X, backend=backend)
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_under_another_ambient_state_recompiles(backend):
    def fn(x):
        with torch.autocast("cpu", enabled=False):
            y = LIN(x)
        return LIN(x), y

    # Under an ambient autocast the block disables it: the results differ in dtype.
    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    for ambient in (False, True, False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ambient):
            expected = fn(X)
            got = compiled(X)
        assert same(expected, got), (ambient, expected, got)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["recompiles"] == 1, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_block_that_changes_nothing_keeps_kernels(backend):
    """transformers' rotary embeddings: `autocast(enabled=False)` with no autocast around it
    (Note [autocast blocks that change nothing]) records nothing, so inductor still compiles
    the graph to kernels."""

    def fn(x):
        with torch.autocast(device_type="cpu", enabled=False):
            y = (x.float() * 2).sin()
        return y + 1

    c = compare(fn, X, backend=backend)
    assert (c["graphs"], c["graph_breaks"], c["aot_eager_graphs"]) == (1, 0, 0), c
    if backend == "inductor":
        assert c["inductor_kernel_calls"] > 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_leaving_a_block_restores_the_state(backend):
    def fn(x, i):
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = LIN(x)
                raise KeyError(i)
        except KeyError as e:
            return y, e.args, torch.is_autocast_enabled("cpu")

    compare(fn, X, 3, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_that_fails_at_run_time_reruns_from_the_entry_state(backend):
    def fn(x, idx):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = LIN(x)
            picked = y[idx]  # an index out of range fails when the graph runs
        return picked

    before = autocast_state()
    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    assert same(fn(X, torch.tensor([1])), compiled(X, torch.tensor([1])))
    with pytest.raises(IndexError):
        fn(X, torch.tensor([9]))
    with pytest.raises(IndexError):
        compiled(X, torch.tensor([9]))
    assert autocast_state() == before


def test_as_binds_the_autocast_object():
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16) as ac:
            y = LIN(x)
        return y, type(ac) is torch.autocast, ac.fast_dtype, ac.device

    c = compare(fn, X)
    assert c["graph_breaks"] == 0, c


def test_deprecated_cpu_amp_autocast_warns_at_the_users_line():
    def fn(x):
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            return LIN(x)

    def warned(f):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = f(X)
        return out, [(x.category, str(x.message), x.lineno) for x in w]

    expected, eager_w = warned(fn)
    dynamo.reset()
    got, compiled_w = warned(dynamo.optimize("eager")(fn))
    assert same(expected, got)
    assert [w[:2] for w in compiled_w] == [w[:2] for w in eager_w] and eager_w
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_autocast_object_from_outside_the_frame(backend):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.amp = torch.autocast("cpu", dtype=torch.bfloat16)

        def forward(self, x):
            with self.amp:
                y = self.lin(x)
            return y, y.dtype

    net = Net()
    c = compare(net, X, backend=backend)
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c
    # A change to the object's fields recompiles (eager reads them at each __enter__).
    net.amp._enabled = False
    got = dynamo.optimize(backend)(net)(X)
    assert got[1] == torch.float32 == net(X)[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_autocast_decorated_function(backend):
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def project(x):
        return LIN(x)

    def fn(x):
        y = project(x)
        return y.float().relu(), y.dtype

    c = compare(fn, X, backend=backend)
    assert (c["graphs"], c["graph_breaks"]) == (1, 0), c
