"""The inductor backend's GPU path (src/inductor/cuda.rs, llvm/src/nvptx.rs) on CUDA tensors.

Every test compiles a graph whose inputs are CUDA tensors, asserts that its kernels really ran
on the GPU path (PTX in the compiled graph, kernel launches counted, no graph-level fallback),
and compares the result with eager torch on the same CUDA inputs: pointwise chains (contiguous,
transposed, sliced and unaligned views, broadcasting), softmax, log_softmax, layer_norm and
sum/mean/amax/amin/var reductions over several shapes, special values (inf, nan), an op the
GPU path lacks (a logged graph-level fallback to torch), and the end-to-end
`dynamo.optimize("inductor")` path with a recompile for CPU inputs.

Skipped as a whole when torch sees no CUDA device (CI here); run on a GPU machine with
`python -m pytest pytests/gpu -q`.
"""

import pytest
import torch
import torch.nn.functional as F

import dynamo
import dynamo._C as C

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DEV = "cuda"


def compile_fn(fn, inputs):
    gm = torch.fx.symbolic_trace(fn)
    return C.inductor_compile(gm, list(inputs))


def check(fn, *inputs, atol=1e-5, rtol=1e-5, gpu=True):
    """Compiles `fn` for `inputs`, runs it, compares with eager; with `gpu`, asserts the GPU path
    generated and launched kernels. Returns the compiled graph."""
    C.inductor_reset_counters()
    compiled = compile_fn(fn, inputs)
    got = compiled(*inputs)
    want = fn(*inputs)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device == w.device, (g.device, w.device)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, equal_nan=True)
    counters = C.inductor_counters()
    if gpu:
        assert not compiled.is_eager, compiled.plan
        assert counters["kernels_compiled"] >= 1, compiled.plan
        assert counters["kernel_calls"] >= 1, compiled.plan
        assert "PTX" in compiled.llvm_ir and ".target sm_" in compiled.llvm_ir
    return compiled


def randn(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(DEV)


SHAPES = [(1,), (7,), (1000,), (33, 65), (256, 1024), (4, 8, 16), (3, 1024, 1024)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pointwise_chain(shape):
    x, y = randn(*shape, seed=1), randn(*shape, seed=2)
    check(lambda x, y: (x * 2 + y).relu() * 0.5 + x, x, y)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_transcendental_chain(shape):
    x = randn(*shape, seed=3)
    check(lambda x: torch.sigmoid(x) * torch.tanh(x) + torch.exp(-x.abs()) + torch.log(x.abs() + 1e-3), x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(33, 65), (512, 768)], ids=str)
def test_gelu(shape, approximate):
    x = randn(*shape, seed=4) * 3
    check(lambda x: F.gelu(x, approximate=approximate), x, atol=2e-6)


def test_math_over_wide_ranges():
    x = torch.linspace(-120, 120, 100_003, device=DEV)
    check(lambda x: torch.exp(x), x, rtol=2e-6, atol=1e-37)
    check(lambda x: torch.tanh(x) + torch.erf(x), x)
    p = torch.logspace(-44, 38, 100_003, device=DEV)
    check(lambda p: torch.log(p), p, rtol=2e-6, atol=1e-6)
    s = torch.linspace(-0.9, 3, 10_007, device=DEV)
    check(lambda s: torch.log1p(s) + torch.expm1(s), s, rtol=2e-6, atol=1e-6)


def test_tanh_within_four_ulps():
    """Note [fast tanh] (nvptx.rs): tanh through `ex2.approx` stays within 4 float32 ulps of
    float64's tanh, on both sides of the branch point at |x| = 0.6 and out to saturation; its
    special values are eager's."""
    x = torch.cat([torch.linspace(-12, 12, 1_000_003, device=DEV), torch.linspace(0.55, 0.65, 100_001, device=DEV),
                   torch.linspace(-0.65, -0.55, 100_001, device=DEV), torch.logspace(-40, 0, 10_001, device=DEV)])
    compiled = check(lambda x: torch.tanh(x), x)
    got = compiled(x)
    ref = torch.tanh(x.double())
    ulp = torch.abs(ref.float()).nextafter(torch.tensor(float("inf"), device=DEV)) - torch.abs(ref.float())
    err = ((got.double() - ref).abs() / ulp.double()).max().item()
    assert err <= 4.0, err
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 20.0, -20.0], device=DEV)
    out = check(lambda x: torch.tanh(x), special, atol=0, rtol=0)(special)
    assert torch.equal(torch.signbit(out[:2]), torch.tensor([False, True], device=DEV))


def ulps(got, ref):
    """Largest error of float32 `got` against float64 `ref`, in float32 ulps of `ref`."""
    r = ref.float().abs()
    ulp = (r.nextafter(torch.tensor(float("inf"), device=DEV)) - r).double()
    return ((got.double() - ref).abs() / ulp).max().item()


def test_exp_within_three_ulps():
    """Note [fast exp] (nvptx.rs): exp through `ex2.approx` on the reduced argument stays within
    3 float32 ulps of float64's exp over the range whose results are normal floats, and gives
    eager's special values (0 below -104, inf above 89, NaN, the subnormal range within atol)."""
    x = torch.cat([torch.linspace(-87, 88, 2_000_003, device=DEV), torch.linspace(-1, 1, 100_001, device=DEV)])
    compiled = check(lambda x: torch.exp(x), x, rtol=8e-7, atol=0)
    assert ulps(compiled(x), torch.exp(x.double())) <= 3.0
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 88.7, 89.0, 200.0, 1e30,
                            -103.0, -104.0, -110.0, -200.0, -1e30, 1e-40, -1e-40], device=DEV)
    check(lambda x: torch.exp(x), special, rtol=8e-7, atol=1e-44)


def test_rsqrt_and_reciprocal_within_one_ulp():
    """Note [fast reciprocals] (nvptx.rs): rsqrt and reciprocal from the hardware's
    approximations and a Newton step, within 1 float32 ulp of float64's over the whole float
    range (subnormals included), with eager's special values; layer_norm's rsqrt among them."""
    x = torch.cat([torch.logspace(-44, 38, 1_000_003, device=DEV), torch.linspace(0.5, 4, 100_001, device=DEV)])
    compiled = check(lambda x: torch.rsqrt(x), x, rtol=4e-7, atol=0)
    assert ulps(compiled(x), torch.rsqrt(x.double())) <= 1.0
    y = torch.cat([x, -x])
    compiled = check(lambda y: torch.reciprocal(y), y, rtol=2.5e-7, atol=1e-44)
    normal = (y.abs() < 8e37) & (y.abs() > 3e-39)  # subnormal or overflowing results: atol above
    assert ulps(compiled(y)[normal], 1 / y[normal].double()) <= 1.0
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.0, 1e-40, 3e38, -3e38, 1e-45], device=DEV)
    check(lambda x: torch.rsqrt(x), special, rtol=4e-7, atol=0)
    check(lambda x: torch.reciprocal(x), special, rtol=2.5e-7, atol=1e-44)
    check(lambda x: torch.sigmoid(x) + 1 / x, special * 3)


def test_gpt2_gelu_matches_eager():
    """GPT-2's `gelu_new` as transformers writes it (pow 3.0, tanh), the kernel Note [fast tanh]
    is about, on a [64, 3072] slice of its input."""
    x = randn(64, 3072, seed=47) * 4
    check(lambda x: 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0)))), x, atol=2e-6)


def test_special_values():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40, 88.0, -88.0] * 4, device=DEV)
    check(lambda x: torch.exp(x), x)
    check(lambda x: torch.log(x), x)
    check(lambda x: torch.tanh(x), x)
    check(lambda x: torch.erf(x), x)
    check(lambda x: torch.sigmoid(x), x)
    check(lambda x: torch.relu(x) + torch.maximum(x, x * 2), x)


def test_broadcast_and_views():
    x = randn(64, 128, seed=5)
    b = randn(128, seed=6)
    check(lambda x, b: torch.relu(x + b), x, b)
    check(lambda x: x.t() * 2 + 1, x)
    check(lambda x, b: x[:, 1:] * 3 + b[1:], x, b)  # unaligned views: the scalar twin kernel
    wide = randn(64, 256, seed=7)
    check(lambda w: w[:, ::2] - 1, wide)


def test_compare_where_and_casts():
    x, y = randn(100, 37, seed=8), randn(100, 37, seed=9)
    check(lambda x, y: torch.where(x > y, x, y * 2), x, y)
    check(lambda x: (x > 0).float() * x, x)


@pytest.mark.parametrize("shape", [(1, 10), (7, 1000), (128, 1024), (64, 8192), (3, 5, 33)], ids=str)
def test_softmax(shape):
    x = randn(*shape, seed=10) * 4
    check(lambda x: torch.softmax(x, dim=-1), x)
    check(lambda x: torch.log_softmax(x, dim=-1), x)


def test_softmax_inner_dim_and_special_values():
    x = randn(8, 300, 16, seed=11)
    check(lambda x: torch.softmax(x, dim=1), x)
    y = randn(4, 50, seed=12)
    y[0, 3] = float("-inf")
    y[1, :] = float("-inf")
    y[2, 7] = float("nan")
    check(lambda y: torch.softmax(y, dim=-1), y)


@pytest.mark.parametrize("shape", [(3, 5), (7, 1000), (64, 768), (512, 1024), (16, 4096)], ids=str)
def test_layer_norm(shape):
    n = shape[-1]
    x = randn(*shape, seed=13) * 2 + 1
    w, b = randn(n, seed=14), randn(n, seed=15)
    check(lambda x, w, b: F.layer_norm(x, (n,), w, b), x, w, b, atol=2e-5)
    check(lambda x: F.layer_norm(x, (n,)), x, atol=2e-5)


@pytest.mark.parametrize("shape", [(1000,), (33, 65), (128, 4096), (4, 8, 16)], ids=str)
def test_reductions(shape):
    x = randn(*shape, seed=16)
    check(lambda x: x.sum(dim=-1), x, atol=1e-4)
    check(lambda x: x.mean(dim=-1), x)
    check(lambda x: x.amax(dim=-1) - x.amin(dim=-1), x)
    check(lambda x: x.sum(), x, atol=1e-3)
    if len(shape) > 1:
        check(lambda x: x.sum(dim=0), x, atol=1e-4)
        check(lambda x: x.var(dim=-1), x, atol=1e-4)


@pytest.mark.parametrize("shape", [(2048, 768), (2048, 3072), (300, 100), (7, 5), (16, 8192), (4, 50, 24)], ids=str)
def test_column_reductions(shape):
    """nvptx's Note [column reductions]: sums over the leading dims (the bias and LayerNorm
    weight gradients) split the rows over row groups of blocks that own adjacent columns;
    widths that are no multiple of a block's columns, several reductions and two phases."""
    x, y = randn(*shape, seed=40), randn(*shape, seed=41)
    lead = tuple(range(len(shape) - 1))
    check(lambda x: x.sum(dim=lead), x, atol=1e-3, rtol=1e-4)
    check(lambda x: x.amax(dim=lead) - x.amin(dim=lead), x)
    check(lambda x, y: ((x * y).sum(dim=lead), (x + 1).sum(dim=lead)), x, y, atol=1e-3, rtol=1e-4)
    check(lambda x: x.var(dim=lead), x, atol=1e-4, rtol=1e-4)
    check(lambda x: torch.softmax(x, dim=0), x, atol=1e-5, rtol=1e-4)


def test_column_reduction_special_values():
    x = randn(64, 40, seed=42)
    x[3, 1] = float("nan")
    x[:, 2] = float("-inf")
    x[5, 4] = float("inf")
    check(lambda x: x.amax(dim=0), x)
    check(lambda x: x.sum(dim=0), x, atol=1e-4)


def test_layer_norm_backward_matches_eager():
    """LayerNorm's weight and bias gradients (column reductions over the rows) in a training
    graph on the GPU path."""
    torch.manual_seed(1)
    ln = torch.nn.LayerNorm(768).to(DEV)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    ref = __import__("copy").deepcopy(ln)
    x = randn(8, 256, 768, seed=43)
    g = randn(8, 256, 768, seed=44)

    def step(m, x, g):
        y = m(x)
        (y * g).sum().backward()
        return y

    C.inductor_reset_counters()
    got = dynamo.optimize("inductor")(step)(ln, x, g)
    counters = C.inductor_counters()
    want = step(ref, x, g)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(ln.weight.grad, ref.weight.grad, atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(ln.bias.grad, ref.bias.grad, atol=2e-3, rtol=1e-4)
    assert counters["kernels_compiled"] >= 2 and counters["kernel_calls"] >= 2, counters


def test_residual_layer_norm_backward_matches_eager():
    """A residual around LayerNorm: the backward kernel of its weight and bias gradients (column
    reductions) also writes the sum of the two gradient paths at every point."""
    torch.manual_seed(2)
    ln = torch.nn.LayerNorm(768).to(DEV)
    ref = __import__("copy").deepcopy(ln)
    x = randn(4, 128, 768, seed=45).requires_grad_()
    xr = x.detach().clone().requires_grad_()
    g = randn(4, 128, 768, seed=46)

    def step(m, x, g):
        y = m(x) * 2 + x
        (y * g).sum().backward()
        return y

    got = dynamo.optimize("inductor")(step)(ln, x, g)
    want = step(ref, xr, g)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ln.weight.grad, ref.weight.grad, atol=2e-3, rtol=1e-4)
    torch.testing.assert_close(ln.bias.grad, ref.bias.grad, atol=2e-3, rtol=1e-4)


def test_residual_stream_is_realized_once():
    """lowering.rs's Note [reused chains]: a residual stream read by a LayerNorm and by the next
    residual add is realized instead of recomputed from every earlier layer's output by each
    LayerNorm; results equal eager."""
    n = 256

    def f(h, ws):
        outs = []
        for i in range(8):
            h = h + torch.tanh(F.layer_norm(h, (n,)) * ws[i])
            outs.append(h.sum(dim=-1))
        return torch.stack(outs)

    h, ws = randn(64, n, seed=49), randn(8, n, seed=50)
    compiled = check(f, h, ws, atol=1e-4, rtol=1e-4)
    # The last LayerNorm's kernel reads a few tensors, not every layer's statistics and weights
    # (over 20 when the stream is recomputed).
    widest = max(line.count(": F32") for line in compiled.kernel_ir.splitlines() if line.startswith("kernel "))
    assert widest <= 14, compiled.kernel_ir


def test_max_propagates_nan():
    x = randn(4, 100, seed=17)
    x[1, 50] = float("nan")
    check(lambda x: x.amax(dim=-1), x)
    check(lambda x: x.amin(dim=-1), x)


def test_matmul_stays_torch_and_epilogue_fuses():
    x, w, b = randn(64, 128, seed=18), randn(256, 128, seed=19), randn(256, seed=20)
    compiled = check(lambda x, w, b: torch.relu(F.linear(x, w) + b), x, w, b, atol=1e-4, rtol=1e-4)
    assert "fallback" in compiled.plan


def test_unsupported_op_falls_back_to_torch():
    x, y = randn(100, seed=21).abs(), randn(100, seed=37)
    compiled = check(lambda x, y: torch.pow(x, y) * 2, x, y, gpu=False)
    assert compiled.is_eager and "GPU codegen failed" in compiled.plan, compiled.plan


def test_sin_cos_over_the_whole_float_range():
    """Note [trig reduction]: exact argument reduction, so huge arguments are right too."""
    mags = torch.logspace(-40, 38, 50_001, device=DEV)
    x = torch.cat([mags, -mags, torch.linspace(-20, 20, 10_001, device=DEV), randn(10_000, seed=29) * 1e4,
                   torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")], device=DEV)])
    check(lambda x: torch.sin(x), x, atol=2e-7, rtol=1e-6)
    check(lambda x: torch.cos(x), x, atol=2e-7, rtol=1e-6)
    check(lambda x, y: torch.sin(x) * 2 + torch.cos(y), randn(256, 1024, seed=30), randn(256, 1024, seed=31))


def test_channels_last_pointwise_iterates_in_memory_order():
    """nvptx's Note [memory order]: a channels-last operand is read and written coalesced."""
    x = randn(8, 64, 28, 28, seed=32).to(memory_format=torch.channels_last)
    b = randn(64, 1, 1, seed=33)
    compiled = check(lambda x, b: torch.relu(x * 2 + b), x, b)
    out = compiled(x, b)
    assert out.stride() == torch.relu(x * 2 + b).stride()
    # Vectorized along C (stride 1 in memory): 128-bit loads.
    assert "ld.global.nc.v4.f32" in compiled.llvm_ir


def test_conv_bn_relu_runs_channels_last():
    """layout.rs on the GPU target: the convolutions get channels-last inputs (cuDNN NHWC)."""
    torch.backends.cudnn.allow_tf32 = False
    try:
        m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                torch.nn.Conv2d(32, 32, 3, padding=1))
        m = m.to(DEV).eval()
        with torch.no_grad():
            m[1].running_mean.uniform_(-1, 1)
            m[1].running_var.uniform_(0.5, 2)
        x = randn(4, 16, 20, 20, seed=34)
        with torch.no_grad():
            want = m(x)
            got = dynamo.optimize("inductor")(m)(x)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert got.stride() == want.stride()
    finally:
        torch.backends.cudnn.allow_tf32 = True


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("shape", [(2, 40, 33, 35), (1, 64, 16, 16), (3, 17, 5, 70), (2, 8, 9, 9)])
def test_layout_changes_run_as_shared_memory_tiles(shape, dtype):
    """nvptx's Note [tiled transposes]: NCHW -> channels-last and back, sizes off the 32x32
    tiles, every storage type; the values are exact (a copy, or one op on staged values)."""
    x = randn(*shape, seed=40)
    x = (x > 0) if dtype == torch.bool else (x * 8).to(dtype)
    to_cl = check(lambda x: x.contiguous(memory_format=torch.channels_last), x, atol=0, rtol=0)
    assert to_cl(x).stride() == x.contiguous(memory_format=torch.channels_last).stride()
    xc = x.contiguous(memory_format=torch.channels_last)
    y = randn(shape[1], 1, 1, seed=41).to(torch.float32 if dtype == torch.bool else dtype)
    if dtype == torch.bool:
        back = check(lambda x, y: (x & (y > 0)).contiguous(), xc, y, atol=0, rtol=0)
    else:
        back = check(lambda x, y: (x * y).contiguous(), xc, y, atol=0, rtol=0)
    tiled = [c for c in (to_cl, back) if "_tile0[" in c.llvm_ir]
    # legalize tiles a layout change when both of its dims hold at least 16 points.
    assert len(tiled) == (2 if min(shape[1], shape[2] * shape[3]) >= 16 else 0), [c.plan for c in (to_cl, back)]


def test_transposed_matrix_plus_row_is_tiled():
    x, b = randn(300, 77, seed=42), randn(300, seed=43)
    compiled = check(lambda x, b: (x.t() + b).relu().contiguous(), x, b, atol=0, rtol=0)
    assert "_tile0[" in compiled.llvm_ir and "bar.sync" in compiled.llvm_ir


def test_single_conv_bn_relu_runs_channels_last_and_returns_nchw():
    """layout.rs's Note [one GPU convolution]: one convolution also converts; the batch norm +
    ReLU are fused into the tiled change back to eager's NCHW result."""
    torch.backends.cudnn.allow_tf32 = False
    try:
        w = randn(24, 8, 3, 3, seed=44)
        rm, rv = randn(24, seed=45), randn(24, seed=46).abs() + 0.5
        g, b = randn(24, seed=47), randn(24, seed=48)
        x = randn(3, 8, 30, 34, seed=49)
        fn = lambda x, w, rm, rv, g, b: F.relu(F.batch_norm(F.conv2d(x, w, padding=1), rm, rv, g, b, False))
        compiled = check(fn, x, w, rm, rv, g, b, atol=1e-4, rtol=1e-4)
        assert compiled(x, w, rm, rv, g, b).stride() == fn(x, w, rm, rv, g, b).stride()
        # The change back (24 channels) is tiled; the input's (8 channels) is too narrow for
        # a tile (legalize tiles dims of at least 16 points).
        assert compiled.llvm_ir.count("_tile0[") == 1, compiled.plan
    finally:
        torch.backends.cudnn.allow_tf32 = True


def test_equal_graphs_share_their_module():
    """cuda.rs's Note [module cache]: a graph compiled again reuses the loaded module."""
    x = randn(128, 256, seed=35)
    first = compile_fn(lambda x: torch.softmax(x * 3, dim=-1), [x])
    C.inductor_reset_counters()
    again = check(lambda x: torch.softmax(x * 3, dim=-1), x)
    assert C.inductor_counters()["gpu_module_cache_hits"] == 1
    torch.testing.assert_close(first(x), again(x))


def test_many_kernels_compile_on_several_threads():
    """Note [parallel modules]: distinct kernels spread over modules; equal ones compile once."""
    def f(x):
        outs = []
        for k in range(12):
            y = torch.softmax(x * (k + 1), dim=-1)  # equal kernels but for a constant
            outs.append(y.sum(dim=-1) + k)
        return torch.stack(outs)

    x = randn(64, 512, seed=36)
    check(f, x, atol=1e-5, rtol=1e-5)



def _torch_ships_nvjitlink():
    import glob
    import os
    import sys
    return any(glob.glob(os.path.join(p, "nvidia", d, "lib", "libnvJitLink.so*")) for p in sys.path for d in ("cu13", "nvjitlink"))


@pytest.mark.skipif(not _torch_ships_nvjitlink(), reason="torch's CUDA wheel ships no nvJitLink here")
def test_multi_module_graphs_load_cubins(monkeypatch):
    """cuda.rs's Note [nvJitLink]: every module of a graph of several modules is assembled to a
    cubin on the compile threads and loaded as such (nvJitLink once refused about half of them:
    the PTX was not NUL-terminated), and the results equal eager's."""
    monkeypatch.setenv("DYNAMO_CUDA_COMPILE_THREADS", "4")
    monkeypatch.setenv("DYNAMO_CUDA_MODULE_CACHE", "0")

    def f(a, b, c, d):  # four iteration spaces: four kernels that cannot fuse, four modules
        return [torch.softmax(t * 2, dim=-1) for t in (a, b, c, d)]

    inputs = [randn(64 >> i, 512 >> i, seed=37 + i) for i in range(4)]
    check(f, *inputs, atol=1e-5, rtol=1e-5)
    assert C.inductor_counters()["gpu_cubin_modules"] == 4, C.inductor_counters()


def test_cpu_graphs_unchanged():
    x = torch.randn(50, 60)
    compiled = check(lambda x: torch.softmax(x * 2, dim=-1), x, gpu=False)
    assert not compiled.is_eager and "PTX" not in compiled.llvm_ir


def test_end_to_end_optimize_and_device_recompile():
    def f(x, y):
        return torch.softmax(x @ y, dim=-1) * 2 + 1

    x, y = randn(32, 64, seed=22), randn(64, 48, seed=23)
    opt = dynamo.optimize("inductor")(f)
    C.inductor_reset_counters()
    torch.testing.assert_close(opt(x, y), f(x, y), atol=1e-5, rtol=1e-4)
    counters = C.inductor_counters()
    assert counters["kernels_compiled"] >= 1 and counters["kernel_calls"] >= 1, counters
    assert counters["eager_graphs"] == 0, counters
    xc, yc = x.cpu(), y.cpu()
    out = opt(xc, yc)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, f(xc, yc), atol=1e-5, rtol=1e-4)


def test_runs_on_current_stream():
    x = randn(1024, 1024, seed=24)
    compiled = compile_fn(lambda x: torch.softmax(x, dim=-1), [x])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = compiled(x)
    s.synchronize()
    torch.testing.assert_close(got, torch.softmax(x, dim=-1))


def test_training_step_matches_eager():
    """Forward and backward graphs (src/autograd) run their kernels on the GPU path too."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256), torch.nn.Linear(256, 10)).to(DEV)
    ref = __import__("copy").deepcopy(model)
    x = randn(32, 64, seed=25)
    target = torch.randint(0, 10, (32,), device=DEV)

    def step(m, x, target):
        loss = F.cross_entropy(m(x), target)
        loss.backward()
        return loss

    C.inductor_reset_counters()
    loss = dynamo.optimize("inductor")(step)(model, x, target)
    counters = C.inductor_counters()
    want = step(ref, x, target)
    torch.testing.assert_close(loss, want, atol=1e-5, rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    assert counters["kernels_compiled"] >= 2 and counters["kernel_calls"] >= 2, counters


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_storage_computes_in_float32(dtype):
    x, y = randn(64, 256, seed=26).to(dtype), randn(64, 256, seed=27).to(dtype)
    tol = dict(atol=1e-2, rtol=1e-2)
    check(lambda x, y: (x * 2 + y).relu() - 1, x, y, **tol)
    check(lambda x: torch.softmax(x, dim=-1), x, **tol)


def test_int_and_double_values():
    i = torch.arange(-500, 500, device=DEV)
    check(lambda i: (i * 3 - 7).abs() + 1, i)
    d = randn(1000, seed=28).double()
    check(lambda d: (d * 2 + 1).sqrt().abs(), d.abs())


POOL_ARGS = [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=2),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=3, ceil_mode=True),
]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("kw", POOL_ARGS)
def test_max_pool2d_window_kernel(kw, channels_last):
    """decompositions.rs's Note [window reductions] on the GPU: padded windows read through
    masked loads (kernel.rs, Note [masked loads]); NaN and -inf as ATen's kernel."""
    x = randn(2, 8, 13, 11, seed=40)
    x[0, 0, 0, 0] = float("nan")
    x[1, 3, 5, 5] = float("nan")
    x[0, 1, :3, :3] = float("-inf")
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    compiled = check(lambda x: F.max_pool2d(x * 2, **kw), x, atol=0, rtol=0)
    assert "fallback" not in compiled.plan or "max_pool2d" not in compiled.plan.split("fallback", 1)[1], compiled.plan
    assert compiled(x).stride() == F.max_pool2d(x * 2, **kw).stride()


def test_batch_norm_relu_max_pool_is_one_vectorized_kernel():
    """resnet's stem: batch norm + ReLU computed at each window position of the pool, one
    kernel; channels-last, so each thread reads 4 channels with 128-bit loads."""
    x = randn(4, 64, 28, 28, seed=41).contiguous(memory_format=torch.channels_last)
    mean, var = randn(64, seed=42), randn(64, seed=43).abs() + 0.5
    w, b = randn(64, seed=44), randn(64, seed=45)

    def f(x, mean, var, w, b):
        y = torch.relu(F.batch_norm(x, mean, var, w, b, False, 0.1, 1e-5))
        return F.max_pool2d(y, 3, 2, 1)

    compiled = check(f, x, mean, var, w, b, atol=1e-5, rtol=1e-5)
    assert C.inductor_counters()["kernels_compiled"] == 1, compiled.plan
    assert "ld.global.nc.v4.f32" in compiled.llvm_ir


def test_compile_launches_nothing_and_keeps_eager_checks():
    """Note [probes on the CPU] (fx_import.rs): compiling a pointwise graph for CUDA inputs
    allocates no CUDA memory (its eager-check probes run on CPU tensors), and what eager refuses
    on CUDA tensors is still refused, with eager's error and the caller's tensor not written."""
    x, y = randn(64, 64, seed=60), randn(64, 64, seed=61)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    compiled = compile_fn(lambda x, y: (torch.tanh(x) * 2 + y).relu() * 0.5 + x, (x, y))
    assert torch.cuda.memory_stats().get("allocation.all.allocated", 0) == before
    assert not compiled.is_eager, compiled.plan
    torch.testing.assert_close(compiled(x, y), (torch.tanh(x) * 2 + y).relu() * 0.5 + x)
    for fn, make, msg in [
        (lambda x: x.mul_(1.5), lambda: torch.arange(1, 4, device=DEV), "result type Float can't be cast"),
        (lambda x: x.add_(x, alpha=0.5), lambda: torch.arange(1, 4, device=DEV), "alpha must not be a floating"),
        (lambda b: 2 - b, lambda: torch.tensor([True, False], device=DEV), "with a bool tensor"),
    ]:
        dynamo.reset()
        t = make()
        saved = t.clone()
        with pytest.raises((RuntimeError, NotImplementedError), match=msg):
            dynamo.optimize("inductor")(fn)(t)
        assert torch.equal(t, saved)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("layout,seq", [("heads_transposed", 32), ("contiguous", 40)])
def test_cuda_attention_runs_torchs_efficient_backward(backend, layout, seq):
    """CUDA ``scaled_dot_product_attention`` for which eager takes the memory-efficient kernel
    (float32, no dropout; causal, or with a bool or float mask that needs no gradient) is
    differentiated through torch's fused backward reading the saved output, logsumexp and RNG
    state (Note [flash attention] in python/dynamo/aot.py), not by recomputing the attention with
    matrix products; a mask becomes the bias eager makes of it (expanded, padded to a multiple of
    16 columns for `seq` 40). The output and the gradients equal eager's."""
    from dynamo import aot

    def attend(x, wq, wk, wv, mask, causal):
        b, l, _ = x.shape
        if layout == "heads_transposed":  # transformers' shape: heads moved out of the sequence
            q, k, v = ((x @ w).view(b, l, 4, 16).transpose(1, 2) for w in (wq, wk, wv))
        else:
            q, k, v = ((x @ w).view(b, 4, l, 16) for w in (wq, wk, wv))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return (out.transpose(1, 2).reshape(b, l, 64) * x).sum()

    x = randn(2, seq, 64, seed=40).requires_grad_()
    ws = [(randn(64, 64, seed=41 + j) / 8).requires_grad_() for j in range(3)]
    float_mask = randn(2, 1, seq, seq, seed=44)
    bool_mask = ((float_mask > 0) | torch.eye(seq, dtype=torch.bool, device=DEV)).expand(2, 4, seq, seq)
    for m, causal in ((None, True), (None, False), (float_mask, False), (bool_mask, False)):
        graphs = []

        def capture(gm, example_inputs):
            graphs.append((gm, example_inputs))
            return gm.forward

        f = lambda x, *ws: attend(x, *ws, m, causal)  # noqa: E731
        dynamo.reset()
        dynamo.optimize(capture)(f)(x, *ws)
        (gm, example_inputs), = graphs
        compiled = aot.aot_compile(gm, example_inputs, backend)
        bw_code = compiled.function.aot_plan.bw.code
        # `dynamo._functional.sdpa_efficient_backward` calls aten's
        # `_scaled_dot_product_efficient_attention_backward`; `sdpa_backward` is the recompute.
        assert "sdpa_efficient_backward" in bw_code and "sdpa_backward" not in bw_code, bw_code
        args = [x, *ws]
        got = compiled(*example_inputs)[0]
        grads = torch.autograd.grad(got, args)
        ref = f(*args)
        ref_grads = torch.autograd.grad(ref, args)
        torch.testing.assert_close(got, ref, atol=1e-3, rtol=1e-4)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-3)
