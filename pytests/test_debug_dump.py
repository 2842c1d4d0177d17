"""`DYNAMO_DEBUG_DIR`: per compiled frame, the original and transformed bytecode, the captured
graph, the guards, inductor's IR before and after fusion and the LLVM IR, with an index."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dynamo

SCRIPT = """
import torch, torchvision, dynamo
torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(1, 3, 64, 64)
with torch.no_grad():
    ref = model(x)
    out = dynamo.optimize("inductor")(model)(x)
torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)

def broken(x):
    y = x.sin()
    print("graph break")
    return y.cos() + 1

dynamo.optimize("inductor")(broken)(torch.randn(8))
"""


def run(tmp_path, env_dir):
    env = dict(os.environ)
    env.pop("DYNAMO_DEBUG_DIR", None)
    if env_dir is not None:
        env["DYNAMO_DEBUG_DIR"] = str(env_dir)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr


def test_resnet18_dump(tmp_path):
    pytest.importorskip("torchvision")
    dump = tmp_path / "dump"
    run(tmp_path, dump)
    (run_dir,) = list(dump.iterdir())
    index = (run_dir / "index.md").read_text()
    rows = [l for l in index.splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert len(rows) == 3, index  # ResNet.forward, broken, broken's resume function
    assert "ResNet.forward" in rows[0] and "conv2d x20" in rows[0] and "batch_norm x20" in rows[0], rows[0]
    assert "call to builtin print" in rows[1] and "sin" in rows[1], rows[1]
    frame = run_dir / "0000_ResNet.forward"
    files = {p.name: p.read_text() for p in frame.iterdir()}
    assert set(files) >= {"original_bytecode.txt", "transformed_bytecode.txt", "graph.txt", "fx_graph.py", "guards.txt",
                          "inductor_ir_pre_fusion.txt", "inductor_ir_post_fusion.txt", "kernel_ir.txt", "llvm_ir.ll"}, set(files)
    assert "_forward_impl" in files["original_bytecode.txt"] and "ResNet.forward" in files["original_bytecode.txt"]
    assert "CompiledGraph" in files["transformed_bytecode.txt"]
    for op in ("torch.conv2d", "batch_norm", "relu", "adaptive_avg_pool2d", "flatten", "linear"):
        assert op in files["graph.txt"], op
        assert op in files["fx_graph.py"], op
    assert "max_pool2d" in files["fx_graph.py"]  # graph.txt names torch's boolean_dispatch wrapper
    assert "TENSOR_MATCH: L['x']" in files["guards.txt"] and "TYPE_MATCH: L['self'] is <class 'torchvision.models.resnet.ResNet'>" in files["guards.txt"]
    # Before fusion every node is its own buffer; after fusion kernels hold several.
    pre, post = files["inductor_ir_pre_fusion.txt"], files["inductor_ir_post_fusion.txt"]
    assert "fallback call_function torch.conv2d" in pre and "pointwise" in pre and "(relu)" in pre
    assert post.count("kernel k") >= 10 and "fallback" in post
    assert "define" in files["llvm_ir.ll"] and "fadd" in files["llvm_ir.ll"]
    assert (run_dir / "0001_broken" / "summary.txt").read_text().startswith("graph break:")


def test_nothing_written_or_rendered_when_unset(tmp_path):
    pytest.importorskip("torchvision")
    run(tmp_path, None)
    assert list(tmp_path.iterdir()) == []
    if os.environ.get("DYNAMO_DEBUG_DIR"):
        pytest.skip("this process dumps")
    assert not dynamo._debug.ENABLED
    # Unset, inductor does not render its pre-fusion IR (the only dump text not kept anyway).
    import torch

    graphs = []

    def keep(gm, example_inputs):
        compiled = dynamo._C.inductor_compile(gm, example_inputs)
        graphs.append(compiled)
        return compiled

    dynamo.optimize(keep)(lambda x: torch.relu(x) * 2)(torch.randn(8))
    assert len(graphs) == 1 and graphs[0].ir_pre_fusion == "" and "kernel" in graphs[0].plan
