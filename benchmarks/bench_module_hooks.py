"""A torchvision resnet18 (eval, batch 4, 64x64, CPU) with a forward hook on layer1[0].conv1 that
scales its output and a forward-pre hook on layer1[0].bn1 that returns None, under eager,
torch.compile and dynamo's inductor in one run (Note [module hooks]: before, the hooks broke the
graph in every enclosing frame). Prints the graph and break counts, median ms per call and
the ratios, and first-call compile seconds. Usage: `python benchmarks/bench_module_hooks.py`."""

import time

import torch
import torchvision

import dynamo


def median_ms(f, x, n=20):
    """Median wall time of `f(x)` in milliseconds over `n` calls after 3 warm-up calls."""
    with torch.no_grad():
        for _ in range(3):
            f(x)
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            f(x)
            ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def main():
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    m.layer1[0].conv1.register_forward_hook(lambda mod, args, out: out * 0.5)
    m.layer1[0].bn1.register_forward_pre_hook(lambda mod, args: None)
    x = torch.randn(4, 3, 64, 64)
    with torch.no_grad():
        want = m(x)
        t0 = time.perf_counter()
        dyn = dynamo.optimize("inductor")(m)
        got = dyn(x)
        dyn_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        tc = torch.compile(m)
        got_tc = tc(x)
        tc_compile = time.perf_counter() - t0
    print(f"max abs diff vs eager: dynamo {(got - want).abs().max().item():.2e}, torch.compile {(got_tc - want).abs().max().item():.2e}")
    c = dynamo.counters()
    print(f"dynamo: graphs {c['graphs']}, breaks {c['graph_breaks']}, kernels {c['inductor_kernels_compiled']}")
    e, d, t = median_ms(m, x), median_ms(dyn, x), median_ms(tc, x)
    print(f"median ms/call: eager {e:.2f}, dynamo {d:.2f}, torch.compile {t:.2f}; "
          f"speedup over eager: dynamo {e / d:.2f}x, torch.compile {e / t:.2f}x; dynamo/torch.compile time {d / t:.2f}x")
    print(f"first-call compile s: dynamo {dyn_compile:.2f}, torch.compile {tc_compile:.2f} ({tc_compile / dyn_compile:.1f}x)")
    c = dynamo.counters()
    print(f"dynamo after timing: compiles {c['compiles']}, recompiles {c['recompiles']}, cache hits {c['cache_hits']}")


if __name__ == "__main__":
    main()
