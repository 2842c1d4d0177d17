"""Training loops as users write them, compiled once (issue: whole-model capture).

An int or str argument that the trace only passes along (to a resume function, into a `print`
or an f-string) is not guarded by value (Note [lazy constants] in src/symbolic/output_graph.rs),
so a training function taking `epoch` compiles nothing in its second epoch. Optimizer and LR
scheduler methods run as ordinary Python with a reason that says so.
"""

import contextlib
import io
import sys

import pytest
import torch

import dynamo


def run_calls(fn, calls):
    """Results and printed text of `fn(*args)` for each args tuple in `calls`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = [fn(*args) for args in calls]
    return results, out.getvalue()


def compiles_per_call(fn, calls, backend="eager"):
    """(results, printed text, compiles after the first call) of `optimize(backend)(fn)`."""
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = [opt(*calls[0])]
        first = dynamo.counters()["compiles"]
        results += [opt(*args) for args in calls[1:]]
    return results, out.getvalue(), dynamo.counters()["compiles"] - first


def printed_arg(x, epoch):
    y = x + 1
    print("epoch", epoch)
    return y * 2


def formatted_args(x, epoch, name):
    y = x + 1
    print(f"epoch {epoch:03d} of {name!r}: {epoch}")
    return y * 2


def moved_then_printed(x, epoch):
    e = epoch
    y = x.sin()
    print(e)
    return y


@pytest.mark.parametrize("fn,extra", [(printed_arg, ()), (formatted_args, ("run",)), (moved_then_printed, ())],
                         ids=["print", "f-string", "stored"])
def test_int_only_printed_is_not_guarded(fn, extra):
    """Equal results and printed text; after the first call no value of `epoch` compiles."""
    calls = [(torch.ones(2), e, *extra) for e in (1, 2, 3, 7)]
    want, want_text = run_calls(fn, calls)
    got, got_text, later = compiles_per_call(fn, calls)
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    assert got_text == want_text
    assert later == 0


def used_in_branch(x, n):
    y = x + 1
    print("n", n)
    if n > 2:
        return y * n
    return y - n


def used_in_graph(x, n, s):
    return x * n if s == "mul" else x + n


def test_int_and_str_used_by_the_trace_are_guarded():
    """Arguments the trace uses keep their guards: every call equals eager."""
    calls = [(torch.ones(2), n) for n in (1, 2, 3, 5, 2)]
    want, want_text = run_calls(used_in_branch, calls)
    got, got_text, _ = compiles_per_call(used_in_branch, calls)
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    assert got_text == want_text
    calls = [(torch.ones(2), n, s) for n, s in ((2, "mul"), (3, "mul"), (3, "add"), (2, "add"))]
    want, _ = run_calls(used_in_graph, calls)
    got, _, _ = compiles_per_call(used_in_graph, calls)
    for a, b in zip(want, got):
        assert torch.equal(a, b)


# ----- a training function taking `epoch`, with an LR scheduler ---------------------------------

class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def train(model, opt, sched, loader, loss_fn, epoch):
    """One epoch as pytorch/examples writes it, logging with the epoch number."""
    model.train()
    total = 0.0
    for i, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
        if i % 2 == 0:
            print(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
    sched.step()
    return total


def setup(kind, opt_name):
    torch.manual_seed(0)
    if kind == "net":
        model = SmallNet()
    else:
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 3, generator=g), torch.randn(16, 2, generator=g))
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    return model, opt, sched, torch.utils.data.DataLoader(data, batch_size=4)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="loop bodies as functions: CPython 3.11 only so far")
@pytest.mark.parametrize("kind", ["net", "sequential"])
@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_training_function_with_epoch_compiles_nothing_in_epoch_2(kind, opt_name):
    """Parameters, optimizer state, learning rate, losses and printed lines after two epochs
    equal eager's; one graph (forward and loss; torch.compile makes 3 for this code: the
    forward, the optimizer step and its recompile), and epoch 2 compiles nothing."""
    loss_fn = torch.nn.MSELoss()
    model, opt, sched, loader = setup(kind, opt_name)
    want, want_text = run_calls(train, [(model, opt, sched, loader, loss_fn, e) for e in (1, 2)])
    ref_params = [p.detach().clone() for p in model.parameters()]
    ref_state = [{k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()} for p in model.parameters()]
    model, opt, sched, loader = setup(kind, opt_name)
    dynamo.reset()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), dynamo.optimize("inductor"):
        got = [train(model, opt, sched, loader, loss_fn, 1)]
        c1 = dynamo.counters()
        got.append(train(model, opt, sched, loader, loss_fn, 2))
    c2 = dynamo.counters()
    assert got == want and out.getvalue() == want_text
    for a, b in zip(ref_params, model.parameters()):
        torch.testing.assert_close(b, a)
    for want_s, p in zip(ref_state, model.parameters()):
        for k, v in want_s.items():
            torch.testing.assert_close(opt.state[p][k], v)
    assert sched.get_last_lr() == [opt.defaults["lr"] * 0.25]
    assert c1["graphs"] == 1 and c1["eager_fallbacks"] == 0, c1
    assert c2["compiles"] == c1["compiles"] and c2["graphs"] == c1["graphs"], (c1, c2)


def test_optimizer_methods_break_with_their_reason():
    """`opt.zero_grad()` and `opt.step()` run as ordinary Python, and say so."""
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    dynamo.reset()
    ex = dynamo.explain(step)(torch.ones(3))
    reasons = "\n".join(ex.break_reasons)
    assert "Optimizer.zero_grad runs eagerly" in reasons, reasons
    assert "SGD.step runs eagerly" in reasons, reasons
    assert "cannot pass" not in reasons, reasons


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_clip_grad_norm_of_the_parameters_generator(backend):
    """`clip_grad_norm_(model.parameters(), c)` (Note [parameter iterables]): the generator is
    taken to its end and passed as the list torch makes of it; one graph, eager's norm and
    clipped gradients, and the generator is exhausted afterwards as in eager."""

    def make():
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 3)
        m(torch.randn(2, 3)).sum().mul(10).backward()
        return m

    def clip(m, x):
        params = m.parameters()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)
        return norm * x, list(params)

    eager_m, m = make(), make()
    x = torch.ones(2)
    want = clip(eager_m, x)
    dynamo.reset()
    got = dynamo.optimize(backend)(clip)(m, x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == []
    for p, q in zip(m.parameters(), eager_m.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0, c
