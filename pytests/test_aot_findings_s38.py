"""AOTAutograd findings of tester 5 (round s38), each compared with eager exactly: values,
gradients, exception type and message, and graph/break counts."""

import pytest
import torch

import dynamo

TRAIN = ["aot_eager", "inductor"]


def _outcome(thunk):
    """``("ok", value)`` or ``("raise", type, message)`` of ``thunk()``."""
    try:
        return ("ok", thunk())
    except Exception as e:  # compared like a value
        return ("raise", type(e), str(e))


def _same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# --- finding 11: in-place changes of graph outputs/inputs that eager never saved ------------


def _mutate_output_after_break(make):
    def f(x):
        v = x * 2
        y = make(v)
        print("graph break")
        v.add_(1)  # legal in eager: no autograd node saved v
        return y.sum()

    return f


def _train_11(f, backend):
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], requires_grad=True)
    g = f if backend is None else dynamo.optimize(backend)(f)

    def step():
        g(x).backward()
        return x.grad.clone()

    return _outcome(step)


@pytest.mark.parametrize("backend", TRAIN)
@pytest.mark.parametrize(
    "make",
    [lambda v: v.clone(), lambda v: v[:, :2].clone(), lambda v: v.t().contiguous(), lambda v: v.expand(3, 2, 3).clone()],
    ids=["clone", "slice_clone", "contiguous", "expand_clone"],
)
def test_inplace_on_unsaved_graph_output_then_backward(backend, make, capsys):
    f = _mutate_output_after_break(make)
    want = _train_11(f, None)
    dynamo.reset()
    got = _train_11(f, backend)
    assert want[0] == "ok"
    assert _same(got, want)
    assert dynamo.counters()["graphs"] >= 1


@pytest.mark.parametrize("backend", TRAIN)
def test_inplace_on_unsaved_graph_input_then_backward(backend):
    def loss_of(w):
        return w.clone().sum()

    def run(g):
        w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

        def step():
            loss = g(w)
            with torch.no_grad():
                w.add_(1)
            loss.backward()
            return w.grad.clone(), w.detach().clone()

        return _outcome(step)

    want = run(loss_of)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(loss_of))
    assert want[0] == "ok" and _same(got, want)
    assert dynamo.counters()["graphs"] == 1


@pytest.mark.parametrize("backend", TRAIN)
def test_inplace_on_saved_graph_output_still_raises(backend, capsys):
    """Where eager did save the written tensor (``v * v`` saves ``v``), the backward raises
    eager's error, as before."""

    def f(x):
        v = x * 2
        y = v * v
        print("graph break")
        v.add_(1)
        return y.sum()

    want = _train_11(f, None)
    dynamo.reset()
    got = _train_11(f, backend)
    assert want[0] == "raise"
    assert got[:2] == want[:2]


# --- finding 01: saved-tensor hooks around compiled code ------------------------------------


def _pack_toy(t):
    return t * 0 + 100  # a value-changing pack hook (activation "compression")


def _toy(x):
    return (x.sin() * x).sum()


def _with_hooks(f, log):
    def pack(t):
        log.append(tuple(t.shape))
        return _pack_toy(t)

    def run(x):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = f(x)
        y.backward()
        return y.detach()

    return run


@pytest.mark.parametrize("backend", TRAIN)
def test_saved_tensors_hooks_see_eager_saves(backend):
    def run(f):
        x = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
        log = []
        y = _with_hooks(f, log)(x)
        return y, x.grad.clone(), log

    want = run(_toy)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(_toy))
    assert _same(got, want)
    assert dynamo.counters()["graphs"] == 1


@pytest.mark.parametrize("backend", TRAIN)
def test_saved_tensors_hooks_graph_not_reused_across_hook_state(backend):
    """A graph compiled without hooks is not reused with hooks active, nor the other way round;
    a value that the graph drops is packed as eager packs it."""

    def f(x):
        x.exp()  # dropped: eager still records (and packs) its saved result under hooks
        return (x.sin() * x).sum()

    def run(g, hooked):
        x = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
        log = []
        if hooked:
            y = _with_hooks(g, log)(x)
        else:
            y = g(x)
            y.backward()
        return y.detach(), x.grad.clone(), log

    want = [run(f, h) for h in (False, True, False)]
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    got = [run(g, h) for h in (False, True, False)]
    assert _same(got, want)


# --- finding 02: forward-mode AD through compiled graphs ------------------------------------

import torch.autograd.forward_ad as fwAD  # noqa: E402


def _dual_made_inside(x, t):
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, t) * 2).sum()
        return fwAD.unpack_dual(y).tangent


def _lin():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 3)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("backend", TRAIN)
@pytest.mark.parametrize("kind", ["elementwise_sum", "linear"])
def test_forward_ad_dual_made_in_frame_keeps_tangent(backend, kind):
    lin = _lin()

    def with_linear(x, t):
        with fwAD.dual_level():
            y = lin(fwAD.make_dual(x, t))
            return fwAD.unpack_dual(y).tangent

    f = _dual_made_inside if kind == "elementwise_sum" else with_linear
    x, t = torch.randn(2, 3), torch.ones(2, 3)
    want = f(x, t)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x, t)
    assert got is not None and torch.equal(got, want)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("backend", TRAIN)
def test_forward_ad_dual_input_to_differentiable_graph(backend):
    """A dual passed into a graph whose parameters require grad (the AOTAutograd Function)."""
    lin = _lin()

    def f(x):
        return torch.tanh(lin(x)) * 3

    def run(g):
        with fwAD.dual_level():
            p, t = fwAD.unpack_dual(g(fwAD.make_dual(torch.linspace(0, 1, 6).reshape(2, 3), torch.ones(2, 3))))
            return p.detach(), t

    want = run(f)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    plain = torch.randn(2, 3)
    torch.testing.assert_close(g(plain), f(plain))  # compiled on plain tensors first
    got = run(g)
    assert got[1] is not None and _same(got, want)


# --- finding 10: inductor dropout on an expanded tensor -------------------------------------


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("make", [lambda x: (x[:1] * 1).expand(4, 6), lambda x: (x * 1)[:, ::2]], ids=["expanded", "strided"])
def test_dropout_on_non_dense_tensor_draws_eager_mask_and_stream(backend, make):
    import torch.nn.functional as F

    def f(x):
        return F.dropout(make(x), 0.5)

    x = torch.randn(4, 6)

    def run(g):
        torch.manual_seed(0)
        out = g(x)
        return out, torch.rand(3)

    want = run(f)
    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    got = [run(g) for _ in range(2)]
    assert _same(got[0], want) and _same(got[1], want)
