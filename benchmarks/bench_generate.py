"""Tiny GPT-2 `generate()` with a compiled `model.forward`: compiles and time per token, eager vs
torch.compile vs dynamo.

    python benchmarks/bench_generate.py [--tokens 8 16] [--backend inductor] [--repeats 20] [--threads 1]

For each number of new tokens: a fresh compile of `model.forward` (reset), the first
`generate()` (which compiles: prefill, first decode step, then the cache length symbolic), the
compile count after it, then the median over `--repeats` of warm `generate()` calls divided by
the number of new tokens (ms/token, prefill included). Greedy decoding, batch 2, prompt 5,
DynamicCache; outputs are checked equal to eager. The model is tiny (2 layers, 32 wide), so the
figures measure per-call overhead (guards, dispatch), not kernels.
"""

import argparse
import copy
import statistics
import time

import torch
import torch._dynamo
import transformers as T
from torch._dynamo.utils import counters

import dynamo


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1: steadier on a shared machine)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = T.GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                       bos_token_id=0, eos_token_id=1, pad_token_id=1)
    model = T.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(2, 64, (2, 5))
    mask = torch.ones_like(ids)
    print(f"torch {torch.__version__}, transformers {T.__version__}, backend {a.backend}, threads {torch.get_num_threads()}")
    print(f"{'tokens':>6} {'runner':>13} {'compiles':>8} {'first s':>8} {'ms/token':>9} {'vs eager':>8}")
    for n in a.tokens:
        gen = lambda m: m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, do_sample=False)  # noqa: E731
        want = gen(model)
        rows = {}
        for runner in ["eager", "torch.compile", "dynamo"]:
            m = copy.copy(model)
            compiles = "-"
            if runner == "torch.compile":
                torch._dynamo.reset()
                counters.clear()
                m.forward = torch.compile(model.forward, backend=a.backend)
            elif runner == "dynamo":
                dynamo.reset()
                m.forward = dynamo.optimize(a.backend)(model.forward)
            t0 = time.perf_counter()
            got = gen(m)
            first = time.perf_counter() - t0
            assert torch.equal(got, want), runner
            if runner == "torch.compile":
                compiles = counters["frames"]["ok"]
            elif runner == "dynamo":
                compiles = dynamo.counters()["compiles"]
            times = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                gen(m)
                times.append(time.perf_counter() - t0)
            rows[runner] = statistics.median(times) / n * 1e3
            print(f"{n:>6} {runner:>13} {compiles:>8} {first:>8.2f} {rows[runner]:>9.3f} {rows[runner] / rows['eager']:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()
