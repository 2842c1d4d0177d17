"""The kernel disk cache (llvm/src/jit.rs, Note [kernel disk cache]): a second process that
compiles the same graphs reads each kernel's object code back instead of optimizing and compiling
it, with results equal to eager; the cache can be turned off; a damaged entry is rebuilt; and
kernels built on several threads give the same results as kernels built on one.

Each case runs child processes (the cache's directory and switches are read once per process)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import json, sys, torch, dynamo

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def step(x):
        out = model(x)
        loss = torch.softmax(out, -1).log().sum() + torch.sin(out).mean()
        loss.backward()
        return out, loss

    expected_out, expected_loss = step(x)
    expected_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    out, loss = dynamo.optimize("inductor")(step)(x)
    grads = [p.grad for p in model.parameters()]
    c = dynamo.counters()
    json.dump({
        "equal": bool(torch.allclose(out, expected_out, rtol=1e-5, atol=1e-6)
                      and torch.allclose(loss, expected_loss, rtol=1e-5, atol=1e-6)
                      and all(torch.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(grads, expected_grads))),
        "out": out.detach().flatten().tolist(),
        "grads": [g.flatten().tolist() for g in grads],
        "kernels": c["inductor_kernels_compiled"],
        "disk_hits": c["inductor_kernel_disk_cache_hits"],
    }, sys.stdout)
    """
)


def run(tmp_path, **env):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    full_env = {k: v for k, v in os.environ.items() if k not in ("DYNAMO_DISK_CACHE", "DYNAMO_COMPILE_THREADS")}
    full_env.update(env)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def entries(cache):
    folder = cache / "kernels-v1"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_second_process_reads_every_kernel_from_disk(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, DYNAMO_CACHE_DIR=str(cache))
    assert first["equal"] and first["kernels"] > 0 and first["disk_hits"] == 0
    assert len(entries(cache)) > 0
    assert not [p for p in entries(cache) if p.suffix != ".kobj"], "temporary files left behind"
    second = run(tmp_path, DYNAMO_CACHE_DIR=str(cache))
    assert second["equal"]
    # Every kernel built (the in-process cache aside) came from disk, and computes the same bits.
    assert second["disk_hits"] == len(entries(cache))
    assert second["out"] == first["out"] and second["grads"] == first["grads"]


@pytest.mark.parametrize("switch", [{"DYNAMO_DISK_CACHE": "0"}, {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}])
def test_cache_off_writes_and_reads_nothing(tmp_path, switch):
    cache = tmp_path / "cache"
    for _ in range(2):
        got = run(tmp_path, DYNAMO_CACHE_DIR=str(cache), **switch)
        assert got["equal"] and got["disk_hits"] == 0
    assert entries(cache) == []


def test_damaged_entries_are_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, DYNAMO_CACHE_DIR=str(cache))
    files = entries(cache)
    for i, p in enumerate(files):
        data = p.read_bytes()
        # Cut inside the header, inside the IR, or leave only the header: none of them parse.
        p.write_bytes(data[: (4, 20, 16)[i % 3]])
    second = run(tmp_path, DYNAMO_CACHE_DIR=str(cache))
    assert second["equal"] and second["disk_hits"] == 0
    assert second["out"] == first["out"] and second["grads"] == first["grads"]
    # The rebuilt entries replaced the damaged ones and are read by the next process.
    third = run(tmp_path, DYNAMO_CACHE_DIR=str(cache))
    assert third["disk_hits"] == len(files) and third["out"] == first["out"]


def test_one_build_thread_and_several_agree(tmp_path):
    one = run(tmp_path, DYNAMO_DISK_CACHE="0", DYNAMO_COMPILE_THREADS="1")
    many = run(tmp_path, DYNAMO_DISK_CACHE="0", DYNAMO_COMPILE_THREADS="4")
    assert one["equal"] and many["equal"]
    assert one["out"] == many["out"] and one["grads"] == many["grads"]
