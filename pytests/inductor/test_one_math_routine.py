"""Every evaluation of a math function in generated code takes one routine (Note [one routine
per math function] in `llvm/src/emit.rs`).

`y = exp(x)` stored by one kernel's loop and recomputed inline by another's (a reduction over
a column, a transposed store) was computed by libmvec's vector `expf` in one loop body and by
libm's scalar `expf` in the other's remainder: one ulp apart, so
`(y - y.amax(1, keepdim=True)) == 0` held nowhere in some rows, where eager finds the maximum.
Eager's own routine differs from ours in the last bit, so the tests check what holds whatever the
routine is (every row has an element equal to its maximum), with the kernel counts that show the
code was generated."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import dynamo
import dynamo._C as C

FUNCTIONS = {
    "exp": torch.exp,
    "erf": torch.erf,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sin": torch.sin,
    "expm1": torch.expm1,
    "gelu": F.gelu,
    "silu": F.silu,
    "softplus": F.softplus,
    "pow": lambda x: torch.pow(x.abs(), 1.37),
}


def _compiled_counts(f, *args):
    C.inductor_reset_counters()
    dynamo.reset()
    got = dynamo.optimize("inductor")(f)(*args)
    counters = C.inductor_counters()
    assert counters["kernels_compiled"] >= 2
    assert counters["eager_graphs"] == 0
    return got


def test_maximum_of_a_recomputed_exp_is_one_of_its_elements():
    # The smallest failing input: exp recomputed by the amax kernel (strided columns) and by
    # the comparison's kernel (contiguous rows); 23 of 50 seeds had a row without its maximum.
    def f(x):
        y = torch.exp(x) * 1.5
        m = y.amax(1, keepdim=True)
        return ((y - m) == 0).t().sum(0)

    for seed in range(12):
        x = torch.randn(33, 5, generator=torch.Generator().manual_seed(seed)).t() * 3
        got = _compiled_counts(f, x)
        assert (got >= 1).all(), (seed, got)
        assert torch.equal(got, f(x)), seed


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize(
    "shape,dim,perm,transposed",
    [
        ((5, 33), 1, (1, 0), True),
        ((7, 5, 33), 0, (2, 0, 1), True),
        ((16, 31, 7), 2, (1, 0, 2), False),
        ((3, 3, 7), 0, (2, 0, 1), False),
        ((9, 9), 1, (1, 0), False),
        ((31, 1, 7), 1, (2, 1, 0), True),
    ],
)
def test_every_slice_holds_its_maximum(name, shape, dim, perm, transposed):
    fn = FUNCTIONS[name]

    def f(x, z):
        y = fn(x) * 1.5 + z
        r = (y - y.amax(dim, keepdim=True)) == 0
        return r.permute(perm).sum(perm.index(dim)), y.sum()

    for seed in range(3):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 3
        if transposed:
            x = x.transpose(0, -1).contiguous().transpose(0, -1)
        z = torch.zeros(shape[-1])
        got = _compiled_counts(f, x, z)[0]
        assert (got >= 1).all(), (seed, got)
