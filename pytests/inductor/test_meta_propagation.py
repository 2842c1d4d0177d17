"""Meta propagation of graphs whose nodes carry no meta (fx_import.rs, Note [meta propagation on
the GPU]): list arguments (FX's ``immutable_list``) and device arguments naming the compile
target run on meta tensors instead of failing over to FakeTensorProp; results equal eager."""

import os
import subprocess
import sys
import textwrap

import torch

import dynamo._C as C
from dynamo.utils import call_on_device


def _cat_to(x, y):
    return (torch.cat([x, y], 1).to(x.device) * 2).relu() + 1


def test_list_and_device_arguments_compile_equal_to_eager():
    x, y = torch.randn(4, 3), torch.randn(4, 5)
    gm = torch.fx.symbolic_trace(_cat_to)
    got = C.inductor_compile(gm, [x, y])(x, y)
    got = got[0] if isinstance(got, (tuple, list)) else got
    torch.testing.assert_close(got, _cat_to(x, y), rtol=0, atol=0)


def test_list_and_device_arguments_need_no_fake_tensors():
    # The smallest graph that failed: `torch.cat` of a list and `.to(device)` (before: "expected
    # Tensor as element 0 in argument 0, but got Node" and "Cannot copy out of meta tensor").
    code = textwrap.dedent(
        """
        import torch, dynamo._C as C
        def f(x, y):
            return (torch.cat([x, y], 1).to(x.device) * 2).relu() + 1
        x, y = torch.randn(4, 3), torch.randn(4, 5)
        C.inductor_compile(torch.fx.symbolic_trace(f), [x, y])(x, y)
        print("ok")
        """
    )
    env = dict(os.environ, DYNAMO_LOGS="+inductor::lowering", NO_COLOR="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert "meta propagation failed" not in r.stderr, r.stderr[-2000:]


def test_call_on_device_gives_meta_layouts_and_reuses_them():
    # A CUDA device need not exist: the op runs on fake tensors of that device.
    q = torch.empty(2, 4, 8, 16, device="meta")
    dev = torch.device("cuda", 0)
    out = call_on_device(torch.nn.functional.scaled_dot_product_attention, (q, q, q), {"is_causal": True}, dev)
    again = call_on_device(torch.nn.functional.scaled_dot_product_attention, (q, q, q), {"is_causal": True}, dev)
    assert out.device.type == "meta" and out.shape == (2, 4, 8, 16)
    assert again.stride() == out.stride()
    both = call_on_device(lambda a: (a * 2, [a.sum(0), 3]), (q,), {}, dev)
    assert isinstance(both, tuple) and isinstance(both[1], list) and both[1][1] == 3
    assert both[0].device.type == "meta" and both[1][0].shape == (4, 8, 16)
