"""Module forward and forward-pre hooks are traced as `nn.Module._call_impl` runs them (Note
[module hooks] in src/symbolic/variables/nn_module.rs), not broken on: before, a hooked
submodule broke the graph in every enclosing frame (GB0013 `module Conv2d has _forward_hooks`),
so a resnet with one hook compiled per block and reached the cache size limit. Each test
compares eager and compiled exactly (outputs, grads, hook call order and arguments, printed
text) and counts graphs and breaks. Backward hooks stay a named graph break."""

import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as module_mod

import dynamo


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.blocks = nn.Sequential(Block(), Block())
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(x.mean((2, 3)))


def _net():
    torch.manual_seed(0)
    return Net().eval()


def _explain(fn, *args, **kwargs):
    dynamo.reset()
    out = dynamo.explain(fn)(*args, **kwargs)
    return out.graph_count, out.graph_break_count, [str(r) for r in out.break_reasons]


def _same_as_eager(f, x, log):
    """Runs `f(x)` eagerly, then under `explain` (1 graph, 0 breaks) and compiled on the eager
    backend; returns the compiled function after asserting that its result and the hook log
    `log` (a list the hooks append to, emptied between runs) equal eager's."""
    want = f(x)
    want_log = list(log)
    log.clear()
    assert _explain(f, x)[:2] == (1, 0)
    log.clear()
    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    assert torch.equal(opt(x), want) and log == want_log
    return opt


def test_hooked_submodules_are_one_graph_with_the_hook_log_of_eager():
    net = _net()
    log = []

    def fh(mod, args, out):
        log.append(("fwd", type(mod).__name__, tuple(args[0].shape), tuple(out.shape)))

    def pre(mod, args):
        log.append(("pre", type(mod).__name__, tuple(args[0].shape)))

    net.blocks[0].conv.register_forward_hook(fh)
    net.blocks[1].bn.register_forward_pre_hook(pre)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        want = net(x)
        want_log = list(log)
        log.clear()
        opt = _same_as_eager(net, x, log)
        for _ in range(2):
            log.clear()
            assert torch.equal(opt(x), want) and log == want_log
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0 and c["recompiles"] == 0, c


def test_pre_hook_replacements_none_tensor_and_tuple():
    lin = nn.Linear(3, 3)
    seen = []
    lin.register_forward_pre_hook(lambda m, args: seen.append(len(args)))  # None: unchanged
    lin.register_forward_pre_hook(lambda m, args: args[0] * 2)  # a tensor: wrapped in a tuple
    lin.register_forward_pre_hook(lambda m, args: (args[0] + 1,))  # a tuple: the new args
    lin.register_forward_hook(lambda m, args, out: out * args[0].sum())  # sees the new args

    def f(x):
        return lin(x) - 1

    _same_as_eager(f, torch.randn(2, 3), seen)


def test_hooks_with_kwargs_and_always_call():
    class Scale(nn.Module):
        def forward(self, x, scale=1.0, shift=None):
            return x * scale + (0 if shift is None else shift)

    m = Scale()
    calls = []

    def pre_kw(mod, args, kwargs):
        calls.append(("pre_kw", sorted(kwargs)))
        kwargs["shift"] = args[0].sum()  # changed in place: forward sees it
        return None

    def pre_kw_replace(mod, args, kwargs):
        return (args[0] + 1,), {**kwargs, "scale": 3.0}

    def post_kw(mod, args, kwargs, out):
        calls.append(("post_kw", sorted(kwargs), kwargs["scale"]))
        return out + kwargs["shift"]

    def post_always(mod, args, out):
        calls.append(("always",))

    m.register_forward_pre_hook(pre_kw, with_kwargs=True)
    m.register_forward_pre_hook(pre_kw_replace, with_kwargs=True)
    m.register_forward_hook(post_kw, with_kwargs=True)
    m.register_forward_hook(post_always, always_call=True)

    def f(x):
        return m(x, scale=2.0)

    _same_as_eager(f, torch.randn(4), calls)


def test_global_hooks_run_in_order_with_module_hooks():
    lin = nn.Linear(3, 2)
    order = []
    lin.register_forward_pre_hook(lambda m, a: order.append("local_pre"))
    lin.register_forward_hook(lambda m, a, o: order.append("local_post"))
    h1 = module_mod.register_module_forward_pre_hook(lambda m, a: order.append(("global_pre", type(m).__name__)))
    h2 = module_mod.register_module_forward_hook(lambda m, a, o: o * 2)
    try:
        def f(x):
            return lin(x).sum(-1)

        x = torch.randn(2, 3)
        opt = _same_as_eager(f, x, order)
    finally:
        h1.remove()
        h2.remove()
    # Removing the global hooks recompiles: the result is eager's without them.
    order.clear()
    want = f(x)
    want_order = list(order)
    order.clear()
    assert torch.equal(opt(x), want) and order == want_order


def test_adding_removing_and_swapping_hooks_after_compiling_recompiles():
    net = _net()
    x = torch.randn(1, 3, 6, 6)
    dynamo.reset()
    opt = dynamo.optimize("eager")(net)
    with torch.no_grad():
        assert torch.equal(opt(x), net(x))
        # Added after the first compile.
        h = net.blocks[1].conv.register_forward_hook(lambda m, a, o: o * 0)
        assert torch.equal(opt(x), net(x))
        # Swapped under the same id: the hook's identity is guarded.
        net.blocks[1].conv._forward_hooks[h.id] = lambda m, a, o: o * 3
        assert torch.equal(opt(x), net(x))
        h.remove()
        assert torch.equal(opt(x), net(x))
        p = net.fc.register_forward_pre_hook(lambda m, a: (a[0] + 10,))
        assert torch.equal(opt(x), net(x))
        p.remove()
        assert torch.equal(opt(x), net(x))
    c = dynamo.counters()
    assert c["graph_breaks"] == 0, c


def _hooked_seq(log, printing):
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    for i, sub in enumerate(seq):
        sub.register_forward_pre_hook(lambda m, a, i=i: log.append(("pre", i)))
        sub.register_forward_hook(lambda m, a, o, i=i: log.append(("post", i, tuple(o.shape))))
    if printing:
        # `print` is a graph break (as in torch.compile): the text and order stay eager's.
        seq[1].register_forward_hook(lambda m, a, o: print("relu out", tuple(o.shape), len(log)))
    return seq


@pytest.mark.parametrize("printing", [False, True])
def test_side_effects_of_a_hook_closure_replayed_once_per_call_in_order(capsys, printing):
    log = []
    seq = _hooked_seq(log, printing)

    def f(x):
        log.append("start")
        y = seq(x)
        log.append("end")
        return y

    x = torch.randn(2, 3)
    want = f(x)
    want_log = list(log)
    want_out = capsys.readouterr().out
    log.clear()
    dynamo.reset()
    opt = dynamo.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(opt(x), want)
        assert log == want_log
        assert capsys.readouterr().out == want_out
        log.clear()
    c = dynamo.counters()
    if not printing:
        assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def test_hooked_training_step_grads_equal_eager():
    def run(compiled):
        net = _net().train()
        net.blocks[0].bn.register_forward_pre_hook(lambda m, a: (a[0] * 0.5,))
        net.blocks[1].conv.register_forward_hook(lambda m, a, o: o.tanh())
        x = torch.randn(2, 3, 6, 6)
        dynamo.reset()
        f = dynamo.optimize("aot_eager")(net) if compiled else net
        out = f(x)
        out.sum().backward()
        grads = [p.grad.clone() for p in net.parameters()]
        return out.detach(), grads, [b.clone() for b in net.buffers()]

    want = run(False)
    got = run(True)
    assert dynamo.counters()["graph_breaks"] == 0
    torch.testing.assert_close(got[0], want[0])
    for g, w in zip(got[1] + got[2], want[1] + want[2]):
        torch.testing.assert_close(g, w)


def test_backward_hooks_stay_a_named_break():
    lin = nn.Linear(3, 3)
    grads = []
    lin.register_full_backward_hook(lambda m, gi, go: grads.append(go[0].clone()))

    def f(x):
        return lin(x).relu().sum()

    x = torch.randn(2, 3, requires_grad=True)
    f(x).backward()
    want = list(grads)
    grads.clear()
    _, breaks, reasons = _explain(f, x)
    assert breaks >= 1 and any("_backward_hooks (backward hooks are not traced)" in r for r in reasons), reasons
    grads.clear()
    dynamo.reset()
    dynamo.optimize("eager")(f)(x).backward()
    assert len(grads) == len(want) and all(torch.equal(g, w) for g, w in zip(grads, want))
