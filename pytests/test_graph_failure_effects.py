"""State when a compiled graph raises (Note [graph failure reruns the frame] in
src/pycodegen/mod.rs): side effects are replayed only after the graph returns, so a graph that
raises on tensor values (an index out of range, an integer division by zero) makes the frame
rerun as ordinary Python. Every effect that precedes the failing op in program order (list
appends, attribute and global writes, in-place writes to the inputs) must then be visible after
the exception exactly as in eager, and the exception is the user's. A graph that writes its
inputs runs after copies of those inputs were taken, which are put back before the rerun."""

import pytest
import torch
import torch.nn.functional as F

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]
COUNTER = {"n": 0}


class Box:
    def __init__(self):
        self.hits = 0


def outcome(f, make_args, compiled_backend=None):
    """(exception type, message, the args after the call) of `f` on fresh args."""
    args = make_args()
    fn = f if compiled_backend is None else dynamo.optimize(compiled_backend)(f)
    try:
        fn(*args)
        exc = None
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        exc = e
    return (type(exc), str(exc)), args


def assert_same_state(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), (a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            assert_same_state(x, y)
    elif isinstance(a, Box):
        assert vars(a) == vars(b)
    else:
        assert a == b


def check(f, make_args, backend):
    (eager_exc, eager_args) = outcome(f, make_args)
    dynamo.reset()
    (comp_exc, comp_args) = outcome(f, make_args, backend)
    assert eager_exc[0] is not type(None), "the program must raise"
    assert comp_exc == eager_exc
    assert_same_state(comp_args, eager_args)
    c = dynamo.counters()
    assert c["graph_failures"] == 1 and c["graphs"] >= 1 and c["eager_fallbacks"] == 0, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_append_and_inplace_input_write_before_an_index_out_of_range(backend):
    def f(lst, x, idx, w):
        lst.append(1)
        x += 1
        return F.embedding(idx, w)

    check(f, lambda: ([], torch.zeros(2), torch.tensor([5]), torch.arange(6.0).view(3, 2)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_and_global_writes_before_an_integer_division_by_zero(backend):
    def f(box, a, b):
        box.hits += 1
        COUNTER["n"] += 1
        return torch.div(a, b, rounding_mode="floor") + 1

    COUNTER["n"] = 0
    (eager_exc, eager_args) = outcome(f, lambda: (Box(), torch.tensor([4]), torch.tensor([0])))
    eager_n = COUNTER["n"]
    COUNTER["n"] = 0
    dynamo.reset()
    (comp_exc, comp_args) = outcome(f, lambda: (Box(), torch.tensor([4]), torch.tensor([0])), backend)
    assert eager_exc[0] is RuntimeError and comp_exc == eager_exc
    assert comp_args[0].hits == eager_args[0].hits == 1 and COUNTER["n"] == eager_n == 1
    assert dynamo.counters()["graph_failures"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_through_a_view_of_an_input_then_gather_out_of_range(backend):
    def f(log, x, idx):
        log.append("start")
        x[0] += 10  # an in-place write to a view of the input
        y = x * 2
        log.append("scaled")
        return torch.gather(y, 0, idx)

    check(f, lambda: ([], torch.arange(3.0), torch.tensor([7])), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_failure_in_a_resume_function_after_a_break(backend, capsys):
    def f(lst, x, idx, w):
        lst.append("before")
        print("break")
        lst.append("after")
        x.mul_(3)
        return F.embedding(idx, w).sum()

    check(f, lambda: ([], torch.ones(2), torch.tensor([9]), torch.arange(4.0).view(2, 2)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_users_handler_sees_the_state_of_eager(backend):
    def f(lst, x, idx, w):
        try:
            lst.append(len(lst))
            x.add_(1)
            out = F.embedding(idx, w)
        except IndexError as e:
            lst.append(("caught", x.sum().item(), str(e)))
            out = None
        return out

    make = lambda: ([], torch.zeros(3), torch.tensor([4]), torch.arange(4.0).view(2, 2))  # noqa: E731
    eager_args = make()
    f(*eager_args)
    dynamo.reset()
    comp_args = make()
    dynamo.optimize(backend)(f)(*comp_args)
    assert_same_state(comp_args, eager_args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_that_writes_inputs_and_does_not_fail_is_unchanged(backend):
    def f(lst, x, idx, w):
        lst.append(1)
        x += 1
        return F.embedding(idx, w) * 2

    make = lambda: ([], torch.zeros(2), torch.tensor([1, 0]), torch.arange(6.0).view(3, 2))  # noqa: E731
    torch.manual_seed(0)
    eager_args = make()
    expected = f(*eager_args)
    dynamo.reset()
    torch.manual_seed(0)
    comp_args = make()
    opt = dynamo.optimize(backend)(f)
    out = opt(*comp_args)
    assert torch.equal(out, expected)
    assert_same_state(comp_args, eager_args)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0 and c["graph_failures"] == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_caught_error_in_a_segment_run_by_torch_prints_nothing(backend, capfd):
    """An op the backend leaves to torch (batch norm in training) runs in an fx GraphModule
    segment; its error, caught by the user, must not print fx's "Call using an FX-traced Module"
    traceback (eager prints nothing)."""
    bn = torch.nn.BatchNorm1d(3)

    def f(x, idx):
        return bn(x)[idx]

    g = dynamo.optimize(backend)(f)
    x = torch.arange(6.0).view(2, 3)
    g(x, torch.tensor([0, 1]))
    capfd.readouterr()
    with pytest.raises(IndexError):
        g(x, torch.tensor([0, 5]))
    assert capfd.readouterr().err == ""


# --- state that a graph changes without an in-place op on its first argument -------------------
# (breaker2 findings 04 and 07: the rerun after a failure drew random numbers twice and applied
# batch norm's running-statistics update twice.)


def _rng_outcome(f, make_args, backend=None):
    """(exception, the next numbers the global generator gives) after a failing call of `f`."""
    torch.manual_seed(0)
    (exc, _args) = outcome(f, make_args, backend)
    return exc, torch.rand(3).tolist()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "draw",
    [
        lambda x: torch.rand(3) + x,
        lambda x: torch.randn_like(x) * x,
        lambda x: F.dropout(x, 0.5, training=True),
        lambda x: torch.bernoulli(torch.full_like(x, 0.5)) + x,
        lambda x: x.clone().uniform_() + x,
    ],
    ids=["rand", "randn_like", "dropout", "bernoulli", "uniform_"],
)
def test_a_rerun_draws_the_random_numbers_eager_draws(backend, draw):
    def f(x, idx):
        noise = draw(x)
        return noise + x[idx]

    make = lambda: (torch.ones(3), torch.tensor([0, 9]))  # noqa: E731
    want = _rng_outcome(f, make)
    dynamo.reset()
    got = _rng_outcome(f, make, backend)
    assert want[0][0] is IndexError
    assert got == want
    assert dynamo.counters()["graph_failures"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm", ["batch_norm", "instance_norm", "functional_batch_norm"])
def test_a_rerun_updates_running_statistics_once(backend, norm):
    torch.manual_seed(0)
    if norm == "batch_norm":
        mod = torch.nn.BatchNorm1d(3)
        apply = mod
    elif norm == "instance_norm":
        mod = torch.nn.InstanceNorm1d(3, track_running_stats=True)
        apply = mod
    else:
        mod = torch.nn.BatchNorm1d(3)  # its buffers, passed to F.batch_norm by the frame

        def apply(x):
            return F.batch_norm(x, mod.running_mean, mod.running_var, training=True, momentum=0.3)

    def f(x, idx):
        return apply(x)[idx]

    def run(fn):
        mod.reset_running_stats()
        x = torch.arange(12.0).view(2, 3, 2) if norm == "instance_norm" else torch.arange(6.0).view(2, 3)
        fn(x, torch.tensor([0, 1]))  # compiles and succeeds
        try:
            fn(x * 3 + 1, torch.tensor([0, 5]))
            exc = None
        except IndexError as e:
            exc = str(e)
        return exc, mod.running_mean.tolist(), mod.running_var.tolist(), int(mod.num_batches_tracked)

    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    assert want[0] is not None and got == want
    c = dynamo.counters()
    assert c["graph_failures"] == 1 and c["graphs"] >= 1, dict(c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_and_foreach_writes_are_put_back_before_the_rerun(backend):
    def f(a, b, c, lst, idx):
        torch.add(a, b, out=c)  # writes c, not a
        torch._foreach_add_(lst, 1.0)  # writes every tensor of the list
        return c[idx]

    check(f, lambda: (torch.ones(2), torch.ones(2), torch.zeros(2), [torch.zeros(2), torch.ones(2)], torch.tensor([4])), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "change",
    [
        lambda x, y: x.t_(),
        lambda x, y: x.transpose_(0, 1),
        lambda x, y: x.unsqueeze_(0),
        lambda x, y: x.squeeze_(),
        lambda x, y: x.as_strided_((3,), (2,)),
        lambda x, y: x.set_(y),
        lambda x, y: x.resize_(6),
    ],
    ids=["t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "set_", "resize_"],
)
def test_a_rerun_starts_from_the_inputs_layout(backend, change):
    """In-place ops that change an input's shape, strides or storage are put back too before the
    rerun (breaker3 finding 03): the user sees eager's IndexError and eager's final layout."""

    def f(x, y, j):
        change(x, y)
        return x.flatten()[j] * 2

    def make():
        return torch.arange(6.0).view(2, 3), torch.arange(4.0), 50

    def run(fn):
        x, y, j = make()
        try:
            fn(x, y, 1)  # compiles, succeeds
            x, y, _ = make()
            fn(x, y, j)
            exc = None
        except IndexError as e:
            exc = str(e)
        return exc, tuple(x.shape), x.stride(), x.tolist()

    want = run(f)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(f))
    assert want[0] is not None and got == want
