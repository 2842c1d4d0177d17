"""Random pointwise graphs (seeded) vs eager: mixes of unary/binary/compare/where ops over
broadcast and non-contiguous inputs, with extra outputs, so fusion and inlining are exercised on
shapes nobody wrote by hand."""

import random

import pytest
import torch

import dynamo._C as C

UNARY = ["sin", "cos", "tanh", "sigmoid", "relu", "neg", "abs", "exp_small", "sqrt_abs", "log_abs"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum", "minimum"]


def build(seed):
    rng = random.Random(seed)
    n_ops = rng.randint(2, 12)
    program = []
    for i in range(n_ops):
        kind = rng.random()
        if kind < 0.4:
            program.append(("unary", rng.choice(UNARY), rng.randrange(i + 3)))
        elif kind < 0.85:
            program.append(("binary", rng.choice(BINARY), rng.randrange(i + 3), rng.randrange(i + 3)))
        elif kind < 0.95:
            program.append(("where", rng.randrange(i + 3), rng.randrange(i + 3), rng.randrange(i + 3)))
        else:
            program.append(("scalar", rng.choice(["add", "mul"]), rng.randrange(i + 3), rng.uniform(-2, 2)))
    n_outputs = rng.randint(1, 3)
    outputs = [rng.randrange(3, n_ops + 3) for _ in range(n_outputs)]

    def fn(x, y, z):
        vals = [x, y, z]
        for op in program:
            if op[0] == "unary":
                v = vals[op[2]]
                name = op[1]
                if name == "exp_small":
                    r = torch.exp(torch.tanh(v))
                elif name == "sqrt_abs":
                    r = torch.sqrt(torch.abs(v))
                elif name == "log_abs":
                    r = torch.log(torch.abs(v) + 1.0)
                elif name == "relu":
                    r = torch.relu(v)
                elif name == "neg":
                    r = -v
                else:
                    r = getattr(torch, name)(v)
            elif op[0] == "binary":
                a, b = vals[op[2]], vals[op[3]]
                name = op[1]
                if name == "div_safe":
                    r = a / (torch.abs(b) + 1.0)
                elif name in ("maximum", "minimum"):
                    r = getattr(torch, name)(a, b)
                else:
                    r = getattr(torch, name)(a, b)
            elif op[0] == "where":
                r = torch.where(vals[op[1]] > vals[op[2]], vals[op[2]], vals[op[3]])
            else:
                r = vals[op[2]] + op[3] if op[1] == "add" else vals[op[2]] * op[3]
            vals.append(r)
        return tuple(vals[i] for i in outputs)

    return fn


def inputs(seed, m=9, n=13):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g)
    y = torch.randn(n, m, generator=g).t()  # transposed
    z = torch.randn(n, generator=g)  # broadcast
    if seed % 3 == 0:
        z = torch.randn(m, 1, generator=g)
    if seed % 4 == 0:
        x = torch.randn(m, 2 * n, generator=g)[:, 1::2]  # sliced with offset
    return x, y, z


@pytest.mark.parametrize("seed,shape", [(s, (9, 13)) for s in range(60)] + [(s, (150, 77)) for s in range(60, 80)])
def test_random_pointwise_graph(seed, shape):
    """(150, 77) makes the transposed operand take the tiled path: full 16x16 tiles staged through
    registers, ragged edge tiles, 128-blocks."""
    fn = build(seed)
    args = inputs(seed, *shape)
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), list(args))
    got = compiled(*args)
    want = fn(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride(), compiled.plan
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5, equal_nan=True, msg=compiled.plan)
    assert not compiled.is_eager
    assert len(compiled.kernel_names) >= 1


# ---- graphs with reductions, views, indexing and in-place ops ------------------------------------

def binary(name, a, b):
    """One of BINARY applied to `a` and `b` (`div_safe` divides by `|b| + 1`)."""
    return a / (torch.abs(b) + 1.0) if name == "div_safe" else getattr(torch, name)(a, b)


REDUCE = ["sum", "mean", "amax", "amin", "softmax", "log_softmax", "layer_norm", "var"]
VIEW = ["t", "slice", "unsqueeze_sum", "flip_view", "select"]


def build_mixed(seed, n_last):
    """A random program over [m, n] values mixing pointwise ops, reductions over a random dim
    (broadcast back with keepdim), views (transposes, slices, indexing) and in-place updates of
    intermediates; every value stays [m, n] so any op can read any earlier value."""
    rng = random.Random(seed)
    n_ops = rng.randint(3, 10)
    program = []
    for i in range(n_ops):
        kind = rng.random()
        src = rng.randrange(i + 2)
        if kind < 0.35:
            program.append(("reduce", rng.choice(REDUCE), src, rng.choice([0, 1, -1])))
        elif kind < 0.55:
            program.append(("view", rng.choice(VIEW), src))
        elif kind < 0.7:
            program.append(("inplace", rng.choice(["add_", "mul_", "relu_"]), src, rng.randrange(i + 2)))
        else:
            program.append(("binary", rng.choice(BINARY), src, rng.randrange(i + 2)))
    outputs = sorted({rng.randrange(2, n_ops + 2) for _ in range(rng.randint(1, 3))})

    def fn(x, y):
        vals = [x, y]
        for op in program:
            v = vals[op[2]]
            if op[0] == "reduce":
                name, d = op[1], op[3]
                if name == "softmax":
                    r = torch.softmax(v, d)
                elif name == "log_softmax":
                    r = torch.log_softmax(v, d)
                elif name == "layer_norm":
                    r = torch.nn.functional.layer_norm(v, (n_last,))
                elif name == "var":
                    r = v - v.var(d, keepdim=True, correction=0)
                else:
                    r = v - getattr(torch, name)(v, d, keepdim=True)
            elif op[0] == "view":
                name = op[1]
                if name == "t":
                    r = v.t().t() * 1.5
                elif name == "slice":
                    r = v[:, ::1] + v[::1, :]
                elif name == "unsqueeze_sum":
                    r = v.unsqueeze(0).sum(0)
                elif name == "flip_view":
                    r = v.transpose(0, 1).contiguous().transpose(0, 1)
                else:
                    r = v + v[0]
            elif op[0] == "inplace":
                r = v * 1.0  # a fresh intermediate to update
                if op[1] == "add_":
                    r.add_(vals[op[3]])
                elif op[1] == "mul_":
                    r.mul_(0.5)
                else:
                    r.relu_()
            else:
                r = binary(op[1], v, vals[op[3]])
            vals.append(r)
        return tuple(vals[i] for i in outputs)

    return fn


@pytest.mark.parametrize("seed", range(40))
def test_random_graph_with_reductions_views_and_mutation(seed):
    m, n = [(7, 11), (1, 9), (16, 33), (5, 1)][seed % 4]
    fn = build_mixed(seed, n)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g)
    y = torch.randn(n, m, generator=g).t() if seed % 2 else torch.randn(m, n, generator=g)
    compiled = compile_and_compare(fn, [x, y])
    assert not compiled.is_eager, compiled.plan
    assert len(compiled.kernel_names) >= 1


def compile_and_compare(fn, args):
    """Compiles `fn` (traced by torch.fx) with the inductor, runs it on `args` and asserts that
    every output equals eager's (dtype, shape, values within 1e-4, NaN where eager has NaN).
    Returns the compiled graph (its `plan` names kernels and fallbacks)."""
    compiled = C.inductor_compile(torch.fx.symbolic_trace(fn), args)
    got = compiled(*args)
    want = fn(*args)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, compiled.plan
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4, equal_nan=True, msg=compiled.plan)
    return compiled


# ---- graphs with indexing: gather, index_select, advanced indexing, cat, masks ----------------

INDEX = ["gather", "index_select", "rows", "cols", "masked_fill", "cat_split", "cat_strided", "embedding", "flip", "where_mask", "index_add"]


def build_indexing(seed, m, n):
    """A random program over [m, n] values mixing indexing ops (with index tensors passed as
    inputs: a row permutation `pr` [m], a column permutation `pc` [n], a gather index `gi` [m, n]
    in [0, n)), pointwise ops and reductions; every value stays [m, n]."""
    rng = random.Random(seed)
    n_ops = rng.randint(2, 8)
    program = []
    for i in range(n_ops):
        kind = rng.random()
        src = rng.randrange(i + 2)
        if kind < 0.6:
            program.append(("index", rng.choice(INDEX), src, rng.randrange(i + 2), rng.randrange(1, max(n, 2))))
        elif kind < 0.75:
            program.append(("reduce", rng.choice(["sum", "amax", "softmax"]), src, rng.choice([0, 1])))
        else:
            program.append(("binary", rng.choice(BINARY), src, rng.randrange(i + 2)))
    outputs = sorted({rng.randrange(2, n_ops + 2) for _ in range(rng.randint(1, 3))})

    def fn(x, y, pr, pc, gi):
        vals = [x, y]
        for op in program:
            v = vals[op[2]]
            if op[0] == "index":
                name, w, k = op[1], vals[op[3]], op[4]
                if name == "gather":
                    r = torch.gather(v, 1, gi)
                elif name == "index_select":
                    r = torch.index_select(v, 0, pr) + torch.index_select(w, 1, pc)
                elif name == "rows":
                    r = v[pr] * 2.0
                elif name == "cols":
                    r = v[:, pc] - w
                elif name == "masked_fill":
                    r = v.masked_fill(w > 0.3, -0.5)
                elif name == "cat_split":
                    r = torch.cat([v[:, k:], v[:, :k]], 1) if n > 1 else v + 1.0
                elif name == "cat_strided":
                    r = torch.cat([v[:, ::2], v[:, 1::2]], 1)
                elif name == "embedding":
                    r = torch.nn.functional.embedding(pr, v)
                elif name == "flip":
                    r = torch.flip(v, [0]) + w
                elif name == "where_mask":
                    r = torch.where(v > w, v, torch.zeros_like(v))
                else:
                    r = v.index_add(0, pr, w, alpha=0.5)
            elif op[0] == "reduce":
                name, d = op[1], op[3]
                r = torch.softmax(v, d) if name == "softmax" else v - getattr(torch, name)(v, d, keepdim=True)
            else:
                r = binary(op[1], v, vals[op[3]])
            vals.append(r)
        return tuple(vals[i] for i in outputs)

    return fn


@pytest.mark.parametrize("seed", range(40))
def test_random_graph_with_indexing(seed):
    m, n = [(7, 11), (1, 9), (16, 33), (5, 1), (12, 8)][seed % 5]
    fn = build_indexing(seed, m, n)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g)
    y = torch.randn(n, m, generator=g).t() if seed % 2 else torch.randn(m, n, generator=g)
    if seed % 7 == 3:
        x[0, 0] = float("nan")
        y[-1, -1] = float("inf")
    pr = torch.randperm(m, generator=g)
    pc = torch.randperm(n, generator=g)
    gi = torch.randint(0, n, (m, n), generator=g)
    compile_and_compare(fn, [x, y, pr, pc, gi])
