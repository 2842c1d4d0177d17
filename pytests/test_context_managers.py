"""Context managers traced into the graph (issue 7, item 6): `@contextlib.contextmanager`
managers (Note [generator context managers] in src/symbolic/variables/ctx_manager.rs), whose
generator the trace steps at `__enter__` and at a normal exit, and managers built in the frame
from a user class or contextlib's plain ones (`nullcontext`). Each runs eagerly and compiled
and is compared exactly, with no graph break."""

import contextlib
import copy

import pytest
import torch

import dynamo
from test_python_kinds import check

X = torch.arange(4.0)
BACKENDS = ["eager", "inductor"]


@contextlib.contextmanager
def scaled(log, factor):
    log.append("enter")
    try:
        yield factor * 2
    finally:
        log.append("exit")


def generator_manager(x, log):
    with scaled(log, 1.5) as s:
        log.append("body")
        y = x * s
    return y + 1


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.calls = 0

    @contextlib.contextmanager
    def counting(self):
        self.calls += 1
        yield self.lin
        self.calls += 10

    def forward(self, x):
        with self.counting() as lin:
            y = lin(x)
        return y.relu(), self.calls


def nested_managers(x, log):
    with scaled(log, 1.0) as a, scaled(log, 2.0) as b:
        y = x * a + b
    with contextlib.nullcontext(3) as c:
        y = y + c
    return y


class Recording:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, *exc):
        self.log.append(("out", exc))
        return False


def user_manager_built_in_the_frame(x, log):
    with Recording(log) as r:
        y = x + len(r.log)
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [generator_manager, nested_managers, user_manager_built_in_the_frame], ids=lambda f: f.__name__)
def test_manager(fn, backend):
    check(fn, X, [], backend=backend, breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_contextmanager_method_of_a_module(backend):
    torch.manual_seed(0)
    eager_model = Model()
    model = copy.deepcopy(eager_model)
    dynamo.reset()
    compiled = dynamo.optimize(backend)(model)
    for _ in range(3):
        (want, want_calls), (got, got_calls) = eager_model(X), compiled(X)
        torch.testing.assert_close(got, want)
        assert got_calls == want_calls
    c = dynamo.counters()
    # The counter attribute changes each call: one recompile makes it dynamic.
    assert c["graph_breaks"] == 0 and c["recompiles"] <= 1, c


@contextlib.contextmanager
def yields_twice():
    yield 1
    yield 2


def manager_that_does_not_stop(x):
    try:
        with yields_twice():
            y = x + 1
    except RuntimeError as e:
        return str(e)
    return y


def test_a_generator_that_does_not_stop_raises_eagers_error():
    assert check(manager_that_does_not_stop, X, graphs=0) == (str, "generator didn't stop")


def break_inside_the_block(x, log):
    y = x + 1
    with scaled(log, 1.0) as s:
        y = y * s
        print("inside")  # a graph break: the block runs as ordinary Python
        y = y + 1
    return y * 2


def manager_made_before_a_break(x, log):
    cm = scaled(log, 2.0)
    y = x + 1
    print("between")
    with cm as s:
        y = y * s
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [break_inside_the_block, manager_made_before_a_break], ids=lambda f: f.__name__)
def test_a_break_moves_before_the_manager(fn, backend):
    """A half-run generator cannot be rebuilt: the break goes where the manager was made
    (the code before it is still a graph), not to the whole frame."""
    check(fn, X, [], backend=backend)
    c = dynamo.counters()
    assert c["eager_fallbacks"] == 0 and c["graphs"] >= 1, c


XG = torch.arange(3.0, requires_grad=True)


def no_grad_made_before_a_break(x):
    ctx = torch.no_grad()
    print("break")
    with ctx:
        y = x * 2
    return y, y.requires_grad


def set_grad_enabled_made_before_a_break(x):
    ctx = torch.set_grad_enabled(False)  # switches now, as eager does
    y = x * 2
    print("break")
    with ctx:
        z = x * 3
    return y.requires_grad, z.requires_grad, torch.is_grad_enabled()


def autocast_made_before_a_break(x):
    ctx = torch.autocast("cpu", dtype=torch.bfloat16)
    print("break")
    with ctx:
        y = x @ x
    return y, y.dtype


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [no_grad_made_before_a_break, set_grad_enabled_made_before_a_break, autocast_made_before_a_break], ids=lambda f: f.__name__)
def test_a_manager_made_before_a_break_and_entered_after(fn, backend):
    """Issue 7, item 6: the resume function receives the manager (grad-mode ones are made
    again by the same call, `set_grad_enabled` with the mode it found) and traces its block."""
    try:
        check(fn, XG, backend=backend)
    finally:
        torch.set_grad_enabled(True)
    c = dynamo.counters()
    assert c["eager_fallbacks"] == 0 and c["graph_breaks"] == 1, c
