"""Runs the conformance suite (shared/conformance) with CUDA inputs.

The suite's programs build their tensors with `harness.T` (a seeded CPU generator) and with
torch's factory functions; here `T` makes its tensor on the CPU as before and moves it to the
GPU, and `torch.set_default_device("cuda")` puts every other tensor the programs create there.
Eager and compiled runs both see CUDA tensors, so the suite compares dynamo's GPU path with
eager CUDA PyTorch.

Usage: python pytests/gpu/conformance_cuda.py CONFORMANCE_DIR [run.py arguments...]
(for example `python pytests/gpu/conformance_cuda.py ../shared/conformance --quiet --backend inductor`).
Exits as run.py does: 0 when every case passed. Without a CUDA device it prints why and exits 0.
"""

import sys

import torch


def main():
    if not torch.cuda.is_available():
        print("conformance_cuda: no CUDA device; nothing to run")
        return 0
    sys.path.insert(0, sys.argv[1])
    import harness

    cpu_T = harness.T

    def T(*shape, rg=False, **kw):
        with torch.device("cpu"):
            t = cpu_T(*shape, **kw)
        t = t.to("cuda")
        return t.requires_grad_(True) if rg else t

    harness.T = T  # before `cases` imports it
    import run

    torch.set_default_device("cuda")
    return run.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
