"""Note [ATen sum order] (llvm/src/emit.rs) for sums of values read through masked or gathered
loads: eager sums the fresh, row-major result of `cat`, `pad` or `embedding`, so the kernel adds
in ATen's order there too and `.sum().item()` prints eager's digits (fuzzer seed 800031:
`(torch.cat([y[:2], x[2:]]) * 2 + x).sum()` of 4x4 tensors printed -13.682414054870605 where
eager printed -13.682413101196289)."""

import pytest
import torch
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def compiled_equal(fn, *inputs):
    cg = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    assert not [l for l in cg.plan.splitlines() if l.startswith("fallback")], cg.plan
    got, want = cg(*inputs), fn(*inputs)
    return got.item() == want.item(), got.item(), want.item()


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("shape", [(4, 4), (2, 8), (3, 5), (5, 8)])  # sums of at most 64 (ATEN_ORDER_MAX)
def test_sum_of_cat_and_pad_is_eagers(seed, shape):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(*shape, generator=g) * 7, torch.randn(*shape, generator=g) * 7
    h = shape[0] // 2

    def cat(x, y):
        return (torch.cat([y[:h], x[h:]], 0) * 2 + x).sum()

    def pad(x, y):
        return (F.pad(x, (1, 2)) * 3 - 1).sum()

    for fn in (cat, pad):
        same, got, want = compiled_equal(fn, x, y)
        assert same, (fn.__name__, got, want)


@pytest.mark.parametrize("seed", range(20))
def test_sum_of_embedding_is_eagers(seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(10, 6, generator=g) * 5
    ids = torch.randint(0, 10, (2, 4), generator=g)

    def fn(ids, w):
        return (F.embedding(ids, w) * 1.5).sum()

    same, got, want = compiled_equal(fn, ids, w)
    assert same, (got, want)


def test_fuzzer_program_prints_eagers_digits():
    g = torch.Generator().manual_seed(1234)
    x, y = (torch.randn(4, 4, generator=g) for _ in range(2))

    def f(x, y):
        return str((torch.cat([y[:2], x[2:]], 0) * 2 + x).sum().item())

    dynamo.reset()
    assert dynamo.optimize("inductor")(f)(x, y) == f(x, y) == "-13.682413101196289"
