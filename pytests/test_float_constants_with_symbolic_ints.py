"""Note [float constants with symbolic ints] (src/symbolic/variables/tensor.rs): Python mixes an
int with a float in IEEE double arithmetic and compares them exactly; the ShapeEnv's algebra is
exact. A symbolic int (an int argument or a size that changed between calls) compared with a
float constant compares as Python does, and a value computed with a float constant, or by
float arithmetic on an already rounded float, is read with Python's value (the frame then
compiles with static values). Each program is called with values that make the int symbolic,
then with the value where the two arithmetics differ."""

import pytest
import torch

import dynamo

F53 = 9007199254740992.0  # 2.0 ** 53


def above(x, n):
    if n > F53:
        return x + 1
    return x - 1


def tenth_times_ten(x):
    n = x.shape[0]
    v = (n * 0.1) * 10
    return x + 1, v, v == n


def tenths(x):
    n = x.shape[0]
    return x.sum(), n * 0.1 + n * 0.2 == n * 0.3


def divide_then_multiply(x, n, m):
    return x + 1, (n / m) * m == n


def minus_a_float(x, n):
    m = max(n, F53)
    return x + 1, m, n - F53


CASES = [
    (above, lambda i: (torch.zeros(1), [1, 2, 2**53 + 1, 2**53][i])),
    (tenth_times_ten, lambda i: (torch.zeros([2, 3, 5, 6][i]),)),
    (tenths, lambda i: (torch.zeros([2, 3, 5, 4][i]),)),
    (divide_then_multiply, lambda i: (torch.zeros(1), [3, 2, 1, 5][i], [3, 5, 49, 7][i])),
    (minus_a_float, lambda i: (torch.zeros(1), [1, 2, 2**53 + 1, 3][i])),
]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn", [c[0] for c in CASES], ids=[c[0].__name__ for c in CASES])
def test_symbolic_int_with_floats_is_pythons(fn, backend):
    make = dict((c[0], c[1]) for c in CASES)[fn]
    opt = dynamo.optimize(backend)(fn)
    for i in range(4):
        want, got = fn(*make(i)), opt(*make(i))
        assert _same(want, got), (i, want, got)
