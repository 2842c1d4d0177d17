"""Benchmark of the inductor slice (not collected by pytest).

    .venv/bin/python pytests/inductor/bench_pointwise.py [--torch-compile]

Prints: inductor_compile latency for `torch.sin(x) + torch.cos(y) * 2` (first compile in this
process, then warm), steady-state time on 4096x4096 float32 (contiguous and with x transposed)
against eager (and torch.compile with --torch-compile), and per-call time of `x + 1` on 16 floats.
Timings are medians; other processes on the machine make them noisy, so compare ratios.
"""

import json
import statistics
import subprocess
import sys
import time

import torch

import dynamo._C as C


def sin_cos(x, y):
    return torch.sin(x) + torch.cos(y) * 2


def median_ms(fn, *args, n=15, warmup=3):
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    start = time.perf_counter()
    C.inductor_compile(torch.fx.symbolic_trace(sin_cos), [x, y])
    first = (time.perf_counter() - start) * 1e3
    warm = min(
        median_ms(lambda: C.inductor_compile(torch.fx.symbolic_trace(sin_cos), [x, y]), n=5, warmup=0)
        for _ in range(2)
    )
    print(f"compile sin/cos: first {first:.1f} ms, warm {warm:.1f} ms (symbolic_trace included)")

    engines = ["eager", "dynamo"] + (["torch.compile"] if "--torch-compile" in sys.argv else [])
    results = {}
    for engine in engines:
        # One process per engine: thread pools (OpenMP, rayon) of one engine spinning after its
        # calls would otherwise slow down the next engine's threads on this 2-core machine.
        out = subprocess.run(
            [sys.executable, __file__, "--steady", engine], capture_output=True, text=True, check=True
        ).stdout
        results[engine] = json.loads(out.strip().splitlines()[-1])
    for label in ("contiguous", "x transposed"):
        base = results["eager"][label]
        row = ", ".join(f"{e} {results[e][label]:.1f} ms ({base / results[e][label]:.2f}x)" for e in engines)
        print(f"4096x4096 {label}: {row}")

    small = torch.randn(16)
    add1 = lambda t: t + 1  # noqa: E731
    compiled = C.inductor_compile(torch.fx.symbolic_trace(add1), [small])
    n = 100_000
    for name, fn in {"eager": add1, "dynamo": compiled}.items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                fn(small)
            best = min(best, (time.perf_counter() - start) / n * 1e6)
        print(f"x + 1 on 16 floats: {name} {best:.2f} us per call")


def steady(engine):
    big_x, big_y = torch.randn(4096, 4096), torch.randn(4096, 4096)
    big_xt = torch.randn(4096, 4096).t()
    out = {}
    for label, (a, b) in {"contiguous": (big_x, big_y), "x transposed": (big_xt, big_y)}.items():
        if engine == "eager":
            fn = sin_cos
        elif engine == "dynamo":
            fn = C.inductor_compile(torch.fx.symbolic_trace(sin_cos), [a, b])
        else:
            fn = torch.compile(sin_cos)
        out[label] = median_ms(fn, a, b)
    print(json.dumps(out))


if __name__ == "__main__":
    if "--steady" in sys.argv:
        steady(sys.argv[sys.argv.index("--steady") + 1])
    else:
        main()
