"""Where dynamo's GPU compile time goes, and what the compile options cost at run time.

For each configuration (LLVM pass pipeline `DYNAMO_NVPTX_PASSES`, LLVM instruction-selection
level `DYNAMO_NVPTX_CODEGEN_OPT`, the CUDA driver's PTX compiler level `DYNAMO_CUDA_JIT_OPT`;
"default" is nvptx.rs's Note [NVPTX pipeline], each listed twice to show the noise)
and each workload of bench_gpu.py named in --only, compiles the workload cold (the driver's PTX
cache and dynamo's module cache off) and prints: the first call's milliseconds, the LLVM and
driver-JIT milliseconds inside it, and the steady milliseconds per call (median of CUDA-event
timings). Needs a CUDA device; run from the repository root.

Usage: python benchmarks/gpu_compile_sweep.py [--only pointwise,softmax] [--iters 30]
"""

import argparse
import os
import statistics
import sys
import time

os.environ["CUDA_CACHE_DISABLE"] = "1"
os.environ["DYNAMO_CUDA_MODULE_CACHE"] = "0"

CONFIGS = [
    ("default", {}),
    ("default / jit 1", {"DYNAMO_CUDA_JIT_OPT": "1"}),
    ("O3 / isel 3 / jit 4", {"DYNAMO_NVPTX_PASSES": "default<O3>", "DYNAMO_NVPTX_CODEGEN_OPT": "3"}),
    ("default", {}),
    ("default / jit 1", {"DYNAMO_CUDA_JIT_OPT": "1"}),
    ("O3 / isel 3 / jit 4", {"DYNAMO_NVPTX_PASSES": "default<O3>", "DYNAMO_NVPTX_CODEGEN_OPT": "3"}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="pointwise,softmax,layer_norm,gelu_mlp,conv_bn_relu")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--configs", default=None, help="comma-separated indices into the list")
    args = ap.parse_args()
    sys.argv = [sys.argv[0]]  # bench_gpu parses its own arguments at import
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    import bench_gpu
    import dynamo
    import dynamo._C as C
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 0
    dev = torch.device("cuda", 0)
    warm = torch.randn(64, device=dev)
    with torch.no_grad():
        dynamo.optimize("inductor")(lambda t: t + 1)(warm)
    configs = CONFIGS if args.configs is None else [CONFIGS[int(i)] for i in args.configs.split(",")]
    rows = ["| config | workload | first call ms | LLVM ms | driver JIT ms | steady ms |", "| --- | --- | --- | --- | --- | --- |"]
    work = {name: bench_gpu.make(name, dev) for name in args.only.split(",")}
    for label, env in configs:
        for k in ("DYNAMO_NVPTX_PASSES", "DYNAMO_NVPTX_CODEGEN_OPT", "DYNAMO_CUDA_JIT_OPT"):
            os.environ.pop(k, None)
        os.environ.update(env)
        for name, (fn, inputs, _, _) in work.items():
            with torch.no_grad():
                C.inductor_reset_counters()
                dynamo.reset()
                f = dynamo.optimize("inductor")(bench_gpu.fresh(fn))
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f(*inputs)
                torch.cuda.synchronize()
                first = (time.perf_counter() - t0) * 1e3
                c = C.inductor_counters()
                ms = bench_gpu.time_calls(f, inputs, args.iters, 3)
            rows.append(f"| {label} | {name} | {first:.1f} | {c['gpu_llvm_us'] / 1e3:.1f} | {c['gpu_jit_us'] / 1e3:.1f} | {ms:.3f} |")
            print(rows[-1], flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
