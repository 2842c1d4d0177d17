"""Note [ATen sum order] (llvm/src/emit.rs) for sums of an expression that reads a keepdim
statistic: `x - x.logsumexp(1, keepdim=True)` reads the statistic at `[i0, 0]`, an operand that
moves along one reduced dim only and so never decides eager's layout. The kernel adds in ATen's
order there, as for `x - x.mean(0, keepdim=True)` (fuzzer seed 1230000, program 1006:
`(GT - GT.logsumexp(1, keepdim=True)).std()` of `ones(4, 4)` was 2.46e-7 where eager gives 0,
its float32 mean of sixteen equal values being exact in ATen's order and not in a reassociated
one)."""

import pytest
import torch

import dynamo
import dynamo._C as C

STATS = {
    "logsumexp": lambda x, d: x.logsumexp(d, keepdim=True),
    "mean": lambda x, d: x.mean(d, keepdim=True),
    "sum": lambda x, d: x.sum(d, keepdim=True),
    "amax": lambda x, d: x.amax(d, keepdim=True),
    "column": lambda x, d: x[:, 1:2] if d == 1 else x[1:2],
}


def compiled(fn, *inputs):
    cg = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    assert not [l for l in cg.plan.splitlines() if l.startswith("fallback") and "logsumexp" not in l], cg.plan
    return cg(*inputs)


@pytest.mark.parametrize("stat", sorted(STATS))
@pytest.mark.parametrize("dim", [0, 1])
# At most 4 rows when the statistic reduces over dim 0: a column sum of more rows adds in
# ATen's 4-way interleaved order, which our column sums do not take (the statistic itself, not
# the outer sum, would differ in its last bit).
@pytest.mark.parametrize("shape", [(4, 4), (2, 8), (3, 5), (4, 16)])
@pytest.mark.parametrize("seed", range(6))
def test_sum_reading_a_keepdim_statistic_is_eagers(stat, dim, shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * 3
    s = STATS[stat]

    def total(x):
        return (x - s(x, dim)).sum()

    def average(x):
        return (x * s(x, dim) + 1).mean()

    for fn in (total, average):
        got, want = compiled(fn, x), fn(x)
        assert got.item() == want.item(), (fn.__name__, got.item(), want.item())


@pytest.mark.parametrize("n", [4, 5, 8])
def test_std_of_constant_rows_is_eagers(n):
    # Eager's float32 mean of n*n equal values is exact for n = 4 (std 0), not for 5 or 8.
    x = torch.ones(n, n)

    def f(x):
        return (x - x.logsumexp(1, keepdim=True)).std()

    assert compiled(f, x).item() == f(x).item()


def test_fuzzer_program_1006():
    gt = torch.ones(4, 4)

    def f(x):
        return ((x - x.logsumexp(1, keepdim=True)).std() * x).any()

    dynamo.reset()
    want = f(gt)
    got = dynamo.optimize("inductor")(f)(gt)
    assert type(got) is type(want) and got.dtype == want.dtype and bool(got) == bool(want)
