"""Where the GPU time of a bench_gpu.py workload goes, per kernel, for torch.compile and dynamo.

For each workload named in --only and each engine of --engines, compiles the workload (warm:
caches on), runs --warmup calls, then records --iters calls under torch.profiler (CUDA
activities) and prints the kernels by their total GPU time per call (top --top), with the
call count and mean microseconds of each, and the GPU time per call summed over all kernels.
Comparing the two engines' lists shows which of dynamo's kernels (or which of torch's ops
around them) make the difference. Needs a CUDA device; run from the repository root.

With --host, also per engine (before the profiled calls, --iters calls each): the host time of
one call started on an idle GPU (perf_counter around the call, no synchronization: the CPU
cost of tracing guards, launching kernels and calling torch's ops), the wall time of one
synchronized call, and the host functions taking the most time over those calls (cProfile,
top --top by own time). A host time near the wall time means the call is bound by the CPU
launching work, not by the GPU kernels. Medians, milliseconds.

Usage: python benchmarks/gpu_profile.py [--only gpt2,gpt2_train] [--engines torch.compile,dynamo]
                                        [--iters 3] [--warmup 3] [--top 25] [--host]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def host_times(name, engine, call, inputs, iters, top):
    """Prints the median host and wall milliseconds of one call (see the module docs) over
    `iters` calls, then cProfile's `top` functions by own time over `iters` more calls."""
    import cProfile
    import pstats
    import statistics
    import time

    import torch
    host, wall = [], []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call(*inputs)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
    print(f"\n## {name} / {engine}: host {statistics.median(host):.3f} ms per call, "
          f"wall {statistics.median(wall):.3f} ms (synchronized), medians of {iters}")
    pr = cProfile.Profile()
    for _ in range(iters):
        torch.cuda.synchronize()
        pr.enable()
        call(*inputs)
        pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="gpt2")
    ap.add_argument("--engines", default="torch.compile,dynamo")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--host", action="store_true", help="also time the host side of a call")
    args = ap.parse_args()
    # bench_gpu parses the command line when imported: give it its own (warm caches).
    argv, sys.argv = sys.argv, [sys.argv[0], "--warm-caches"]
    import bench_gpu
    sys.argv = argv
    import torch
    if not torch.cuda.is_available():
        print("gpu_profile: no CUDA device; nothing to measure", file=sys.stderr)
        return 0
    bench_gpu.ARGS = argparse.Namespace(iters=args.iters, warmup=args.warmup)
    from torch.profiler import ProfilerActivity, profile
    dev = torch.device("cuda", 0)
    for name in args.only.split(","):
        fn, inputs, _, training = bench_gpu.make(name, dev)
        for engine in args.engines.split(","):
            if training:
                model = bench_gpu.copy.deepcopy(fn)
                call = bench_gpu.train_step(model, bench_gpu.engine_fn(engine, model))
                grad = torch.enable_grad()
            else:
                call = bench_gpu.engine_fn(engine, fn)
                grad = torch.no_grad()
            with grad:
                for _ in range(args.warmup):
                    call(*inputs)
                torch.cuda.synchronize()
                if args.host:
                    host_times(name, engine, call, inputs, args.iters, args.top)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(args.iters):
                        call(*inputs)
                    torch.cuda.synchronize()
            rows = []
            for ev in prof.key_averages():
                t = getattr(ev, "device_time_total", None)
                if t is None:
                    t = ev.cuda_time_total
                if t > 0 and ev.count > 0 and ev.device_type == torch.autograd.DeviceType.CUDA:
                    rows.append((t / args.iters, ev.count / args.iters, t / ev.count, ev.key))
            rows.sort(reverse=True)
            total = sum(r[0] for r in rows)
            print(f"\n## {name} / {engine}: {total / 1e3:.3f} ms of GPU kernels per call, {len(rows)} distinct kernels")
            print("| us per call | calls per call | us each | kernel |")
            print("| --- | --- | --- | --- |")
            for us, n, each, key in rows[: args.top]:
                print(f"| {us:.1f} | {n:g} | {each:.1f} | {key[:110]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
