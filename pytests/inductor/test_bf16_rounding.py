"""bfloat16 stores and roundings in CPU kernels are bit-exact with eager's float -> bfloat16
conversion (round to nearest even; NaN to 0xFFFF, as ATen's vectorized `cvtfp32_bf16`) on every
CPU: the kernel
rounds with integer operations (`trunc_to_bf16` in llvm/src/emit.rs), since LLVM's `fptrunc` to
bfloat becomes a call to `__truncsfbf2` without AVX512-BF16, which the JIT cannot resolve."""

import torch

import dynamo._C as C


def _values():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g) * torch.logspace(-30, 30, 4096)
    # Exact ties between two bfloat16 values (round half to even both ways), NaN, infinities,
    # the largest finite float (rounds to infinity), zeros and subnormals.
    ties = torch.tensor([0x3F808000, 0x3F818000, 0xBF808000 - (1 << 32), 0x7F7FFFFF, 0x00008000, 0x00018000], dtype=torch.int64).to(torch.int32).view(torch.float32)
    special = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-45, -1e-40])
    return torch.cat([x, ties, special])


def _compile(fn, *inputs):
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(inputs))
    assert not compiled.is_eager, compiled.plan
    return compiled


def test_store_to_bfloat16_is_bit_exact():
    x = _values()

    def fn(x):
        return (x * 1.0).to(torch.bfloat16)

    got = _compile(fn, x)(x)
    want = fn(x)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_bfloat16_arithmetic_rounds_each_result_as_eager():
    x = _values()[:4096].to(torch.bfloat16)
    y = _values()[1:4097].flip(0).to(torch.bfloat16)

    def fn(x, y):
        return (x * y + x) / 3

    got = _compile(fn, x, y)(x, y)
    want = fn(x, y)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
