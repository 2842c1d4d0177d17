"""In-place and tensor-scalar arithmetic across dtypes: every backend gives eager's result dtype,
values, writes to the caller's tensor, and eager's exception (type and message) where torch
refuses the op (an in-place result type that cannot cast to the written tensor's dtype, a float
`alpha` on integral tensors, `-` with a bool operand). Note [eager's dtype checks] in
src/inductor/fx_import.rs; issue #7, findings 01, 02 and 10."""

import operator
import warnings

import pytest
import torch

import dynamo

DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64, torch.complex64]
SCALARS = [True, 2, 1.5, 1j, torch.tensor(True), torch.tensor(3, dtype=torch.uint8), torch.tensor(2),
           torch.tensor(1.5, dtype=torch.float64), torch.tensor(1j, dtype=torch.complex64)]


def op_add_(x, s):
    return x.add_(s)


def op_sub_(x, s):
    return x.sub_(s)


def op_mul_(x, s):
    return x.mul_(s)


def op_div_(x, s):
    return x.div_(s)


def op_iadd(x, s):
    x += s
    return x


def op_isub(x, s):
    x -= s
    return x


def op_imul(x, s):
    x *= s
    return x


def op_itruediv(x, s):
    x /= s
    return x


def op_temp_mul_(x, s):
    y = x * 1
    y.mul_(s)
    return y


def op_add_alpha_(x, s):
    return x.add_(x, alpha=s)


def op_sub_alpha(x, s):
    return torch.sub(x, x, alpha=s)


def op_add(x, s):
    return x + s


def op_rsub(x, s):
    return s - x


def op_mul(x, s):
    return torch.mul(x, s)


def op_div(x, s):
    return x / s


OPS = [op_add_, op_sub_, op_mul_, op_div_, op_iadd, op_isub, op_imul, op_itruediv, op_temp_mul_, op_add_alpha_,
       op_sub_alpha, op_add, op_rsub, op_mul, op_div]


def make(dtype):
    return torch.tensor([1, 2, 3]).to(dtype)


def outcome(fn, x, s):
    """(result, caller's tensor after, exception) of `fn(x, s)`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = fn(x, s)
            return r, x, None
        except Exception as e:  # compared with eager's below
            return None, x, (type(e), str(e))


def same(a, b):
    if a is None or b is None:
        return a is b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.complex32:  # torch.equal has no ComplexHalf kernel
        a, b = a.to(torch.complex64), b.to(torch.complex64)
    return torch.equal(a, b)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_sweep_matches_eager(backend, op):
    mismatches = []
    for dtype in DTYPES:
        for s in SCALARS:
            want = outcome(op, make(dtype), s)
            dynamo.reset()
            got = outcome(dynamo.optimize(backend)(op), make(dtype), s)
            if not (same(got[0], want[0]) and same(got[1], want[1]) and got[2] == want[2]):
                mismatches.append((dtype, s, want, got))
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize(
    "fn, make_x, exc, msg",
    [
        (lambda x: x.mul_(1.5), lambda: torch.arange(1, 4), RuntimeError, "result type Float can't be cast"),
        (lambda x: x.mul_(1j), lambda: torch.arange(1.0, 4.0), RuntimeError, "result type ComplexFloat can't"),
        (lambda b: b.mul_(1.5), lambda: torch.tensor([True, False]), RuntimeError, "desired output type Bool"),
        (lambda x: x.add_(x, alpha=0.5), lambda: torch.arange(1, 4), RuntimeError, "alpha must not be a floating"),
        (lambda x: x.sub_(True), lambda: torch.arange(3), NotImplementedError, "Subtraction, the `-` operator"),
        (lambda b: 2 - b, lambda: torch.tensor([True, False]), NotImplementedError, "with a bool tensor"),
        (lambda x: operator.imul(x, torch.tensor(1.5)), lambda: torch.arange(1, 4), RuntimeError, "can't be cast"),
    ],
)
def test_refused_inplace_leaves_caller_tensor(backend, fn, make_x, exc, msg):
    """Smallest inputs of findings 01, 02 and 10: eager's error, and the input is not written."""
    dynamo.reset()
    x = make_x()
    before = x.clone()
    with pytest.raises(exc, match=msg.replace("(", r"\(")):
        dynamo.optimize(backend)(fn)(x)
    assert torch.equal(x, before)


def test_accepted_inplace_still_compiles_to_kernels():
    """The probe refuses nothing torch accepts: `x.mul_(2)` on int64 and `y.add_(1.5)` on float32
    are kernels, not an eager fallback."""
    import dynamo._C as C

    def f(x, y):
        x.mul_(2)
        y.add_(1.5)
        return x + 1, y * 2

    dynamo.reset()
    C.inductor_reset_counters()
    x, y = torch.arange(4), torch.ones(4)
    got = dynamo.optimize("inductor")(f)(x.clone(), y.clone())
    want = f(x.clone(), y.clone())
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert C.inductor_counters()["eager_graphs"] == 0
