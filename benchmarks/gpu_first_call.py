"""Where the first (compiling) call of a bench_gpu.py workload goes, for dynamo on the GPU.

For each workload named in --only, compiles it cold with dynamo --reps times (dynamo reset
between; the CUDA driver's PTX cache and dynamo's module cache off) and prints per rep the first
call's milliseconds, the LLVM and driver-JIT milliseconds inside it (`inductor_counters()`),
and, with --stages, inductor's own per-stage lines (`DYNAMO_LOGS=+inductor::compile_time`, on
stderr). With --profile, one more rep runs under cProfile and the top functions by cumulative
and by own time are printed (Rust entry points show as their `dynamo._C` builtins). With --tc,
torch.compile compiles the workload first (cold, as in bench_gpu.py), to see whether what it
leaves running (compile workers) slows dynamo's compile. With --ptx DIR, the PTX of each
one-graph workload is written there and the driver's JIT is timed on it with each
`CU_JIT_OPTIMIZATION_LEVEL` (all reps listed). Needs a CUDA device; run from the repository root.

Usage: python benchmarks/gpu_first_call.py [--only pointwise,encoder_layer] [--reps 3]
                                           [--stages] [--profile] [--tc] [--ptx DIR]
"""

import argparse
import cProfile
import ctypes
import io
import os
import pstats
import sys
import tempfile
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--only", default="pointwise,softmax,layer_norm,gelu_mlp,encoder_layer")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--stages", action="store_true")
ap.add_argument("--profile", action="store_true")
ap.add_argument("--tc", action="store_true")
ap.add_argument("--ptx", default=None)
ap.add_argument("--top", type=int, default=30)
ARGS = ap.parse_args()

_root = tempfile.mkdtemp(prefix="gpu_first_call_")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_root, "inductor")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_root, "triton")
os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
os.environ["CUDA_CACHE_DISABLE"] = "1"
os.environ["DYNAMO_CUDA_MODULE_CACHE"] = "0"
if ARGS.stages:
    os.environ["DYNAMO_LOGS"] = "+inductor::compile_time"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv = [sys.argv[0], "--warm-caches"]  # bench_gpu parses its own arguments at import
import bench_gpu  # noqa: E402
import torch  # noqa: E402


def first_call(name, engine, dev, profile=False):
    """(first-call ms, counters, cProfile stats or None) of one cold compile of `name`."""
    import dynamo._C as C
    fn, inputs, _, training = bench_gpu.make(name, dev)
    C.inductor_reset_counters()
    if training:
        model = bench_gpu.copy.deepcopy(fn)
        call = bench_gpu.train_step(model, bench_gpu.engine_fn(engine, model))
        grad = torch.enable_grad()
    else:
        call = bench_gpu.engine_fn(engine, fn)
        grad = torch.no_grad()
    prof = cProfile.Profile() if profile else None
    with grad:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        call(*inputs)
        torch.cuda.synchronize()
        if prof:
            prof.disable()
        first = (time.perf_counter() - t0) * 1e3
        t1 = time.perf_counter()
        call(*inputs)
        torch.cuda.synchronize()
        second = (time.perf_counter() - t1) * 1e3
    return first, second, dict(C.inductor_counters()), prof


def jit_times(ptx, reps):
    """{level: [ms per rep]} of cuModuleLoadDataEx on `ptx` (bytes, NUL-terminated)."""
    cu = ctypes.CDLL("libcuda.so.1")
    out = {}
    for level in (None, 4, 3, 2, 1, 0):
        ts = []
        for _ in range(reps):
            mod = ctypes.c_void_p()
            if level is None:
                opts = (ctypes.c_int * 0)()
                vals = (ctypes.c_void_p * 0)()
                n = 0
            else:
                opts = (ctypes.c_int * 1)(7)
                vals = (ctypes.c_void_p * 1)(level)
                n = 1
            t0 = time.perf_counter()
            r = cu.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(ptx), n, opts, vals)
            ts.append((time.perf_counter() - t0) * 1e3)
            assert r == 0, r
            cu.cuModuleUnload(mod)
        out[level] = ts
    return out


def main():
    dev = torch.device("cuda", 0)
    import dynamo
    warm = torch.randn(64, device=dev)
    with torch.no_grad():
        if ARGS.tc:
            torch.compile(lambda t: t + 1)(warm)
        dynamo.optimize("inductor")(lambda t: t + 1)(warm)
    torch.cuda.synchronize()
    for name in ARGS.only.split(","):
        if ARGS.tc:
            t0 = time.perf_counter()
            first_call(name, "torch.compile", dev)
            print(f"# {name}: torch.compile first call {(time.perf_counter() - t0) * 1e3:.0f} ms", flush=True)
        for rep in range(ARGS.reps):
            first, second, c, _ = first_call(name, "dynamo", dev)
            print(f"{name} rep {rep}: first call {first:.1f} ms (second {second:.1f} ms), LLVM {c.get('gpu_llvm_us', 0) / 1e3:.1f} ms, "
                  f"JIT {c.get('gpu_jit_us', 0) / 1e3:.1f} ms, {c.get('kernels_compiled', 0)} kernels, {c.get('graphs_compiled', 0)} graphs", flush=True)
            print(f"## end {name} rep {rep}", file=sys.stderr, flush=True)
        if ARGS.profile:
            first, _, _, prof = first_call(name, "dynamo", dev, profile=True)
            for key in ("cumulative", "tottime"):
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats(key).print_stats(ARGS.top)
                print(f"### {name}: cProfile of a first call ({first:.1f} ms), by {key}\n{s.getvalue()}", flush=True)
        if ARGS.ptx and name in ("pointwise", "softmax", "layer_norm", "gelu_mlp"):
            import dynamo._C as C
            fn, inputs, _, _ = bench_gpu.make(name, dev)
            if isinstance(fn, torch.nn.Module):
                with torch.no_grad():
                    gm = torch.fx.symbolic_trace(fn)
                    compiled = C.inductor_compile(gm, list(inputs))
            else:
                gm = torch.fx.symbolic_trace(fn)
                compiled = C.inductor_compile(gm, list(inputs))
            text = compiled.llvm_ir
            ptx = text[text.index("//\n// Generated by LLVM NVPTX"):] if "Generated by LLVM NVPTX" in text else text.split("; PTX\n", 1)[-1]
            os.makedirs(ARGS.ptx, exist_ok=True)
            with open(os.path.join(ARGS.ptx, f"{name}.ptx"), "w") as fh:
                fh.write(ptx)
            for level, ts in jit_times(ptx.encode() + b"\0", 4).items():
                print(f"{name} PTX {len(ptx)} bytes, JIT level {level}: " + ", ".join(f"{t:.1f}" for t in ts) + " ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
