"""Faults a user found with real programs (stop 34), each with its smallest input."""

import pytest
import torch
import torch.nn.functional as F

import dynamo


def set_branches(x, **kwargs):
    r = []
    unexpected = set(kwargs) - {"match", "check"}
    if unexpected:
        r.append(f"unexpected {sorted(unexpected)}")
    s = set()
    if s:
        r.append("empty set is true")
    r.append("yes" if {1} - {1} else "no")
    r.append(not set())
    t = {1, 2}
    t.discard(1)
    t.discard(2)
    r.append(t or "empty")
    while set():
        r.append("entered")
        break
    return x + 1, r


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_truth_of_a_set_built_in_the_frame(backend):
    """Note [truth of every kind]: `if s:` on an empty set made in the frame took the true
    branch (truth had a default of True for kinds it did not list)."""
    x = torch.ones(2)
    want = set_branches(x, match=1)
    dynamo.reset()
    got = dynamo.optimize(backend)(set_branches)(x, match=1)
    assert got[1] == want[1]
    assert torch.equal(got[0], want[0])
    assert dynamo.counters()["graphs"] == 1


def pooled_residual(x):
    y = x[:, :, ::2, ::2] * 2
    y += F.avg_pool2d(x, 2)  # avg_pool2d has no derivative rule: the graph is split around it
    return y.relu_()


def inplace_after_consumer(x):
    v1 = x.sin()
    v2 = torch.erfinv(v1.tanh() * 0.5)
    v1.relu_()
    return v1 * 1 + v2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [pooled_residual, inplace_after_consumer])
def test_inplace_write_in_a_later_segment(backend, fn):
    """Note [stale segment outputs] in aot.py: a segment's output written in place by a later
    segment carried that write's history in its fake value, and its saved-result check raised
    eager's "modified by an inplace operation" in backward (timm's ResNet-D blocks:
    `x += downsample(shortcut); x = act(x)` with ReLU(inplace=True))."""

    def run(f):
        torch.manual_seed(0)
        x = torch.randn(1, 2, 4, 4, requires_grad=True)
        out = f(x)
        out.sum().backward()
        return out.detach(), x.grad

    want = run(fn)
    dynamo.reset()
    got = run(dynamo.optimize(backend)(fn))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_compiled_module_forwards_the_container_protocol():
    seq = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    opt = dynamo.optimize("inductor")(seq)
    assert len(opt) == 2 and opt[0] is seq[0] and list(opt) == list(seq) and seq[1] in opt
    assert bool(opt)
    lin = dynamo.optimize("inductor")(torch.nn.Linear(2, 2))
    assert bool(lin)
    with pytest.raises(TypeError, match=r"object of type 'Linear' has no len\(\)"):
        len(lin)
    with pytest.raises(TypeError, match="'Linear' object is not iterable"):
        iter(lin)


BETAS = torch.linspace(1e-4, 0.02, 20)
ALPHAS = 1 - BETAS
ABAR = torch.cumprod(ALPHAS, 0)


def ddpm_step(x, i):
    return (x - BETAS[i] / (1 - ABAR[i]).sqrt() * x) / ALPHAS[i].sqrt()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_tensor_indexed_by_a_changing_int_compiles_twice(backend):
    """Note [symbolic int index]: `betas[i]` specialized the symbolic `i`, so a 20-step sampling
    loop compiled 8 times and then ran eagerly; it is `select(0, i)` with a range guard."""
    dynamo.reset()
    step = dynamo.optimize(backend)(ddpm_step)
    x = y = torch.ones(3)
    for i in reversed(range(20)):
        x, y = step(x, i), ddpm_step(y, i)
        torch.testing.assert_close(x, y)
    c = dynamo.counters()
    assert (c["compiles"], c["cache_limit_hits"]) == (2, 0), c
    torch.testing.assert_close(step(x, -3), ddpm_step(x, -3))
    with pytest.raises(IndexError) as want:
        ddpm_step(x, 25)
    with pytest.raises(IndexError) as got:
        step(x, 25)
    assert str(got.value) == str(want.value)


class CachedAttention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.k_cache = None
        self.v_cache = None

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], 1)
            v = torch.cat([self.v_cache, v], 1)
        self.k_cache, self.v_cache = k, v
        seen = self.k_cache.shape[1]  # read back after the write
        return F.scaled_dot_product_attention(q, self.k_cache, v) * seen, k


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_tensor_written_to_a_module_attribute_in_forward(backend):
    """Note [tensor attributes written in forward]: a hand-written KV cache broke the graph at
    each attribute write; the writes are replayed after the graph and read back in it."""

    def run(compile_):
        torch.manual_seed(0)
        attn = CachedAttention(8).eval()
        f = dynamo.optimize(backend)(attn) if compile_ else attn
        outs = []
        with torch.no_grad():
            for t in range(4):
                out, k = f(torch.randn(1, 3 if t == 0 else 1, 8))
                assert k is attn.k_cache
                outs.append(out)
        return torch.cat(outs, 1), attn.k_cache, attn.v_cache

    want = run(False)
    dynamo.reset()
    got = run(True)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["graphs"] == c["compiles"], c


def test_writing_a_parameter_from_outside_still_registers_it():
    class Holder(torch.nn.Module):
        def forward(self, x, p):
            self.w = p  # nn.Module.__setattr__ registers a Parameter
            return x * self.w

    p = torch.nn.Parameter(torch.ones(2))
    m = Holder()
    dynamo.reset()
    out = dynamo.optimize("eager")(m)(torch.ones(2), p)
    assert torch.equal(out, torch.ones(2))
    assert m._parameters["w"] is p
