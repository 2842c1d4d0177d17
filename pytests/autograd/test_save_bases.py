"""Note [save bases, not views] (src/autograd/partition.rs): among cuts of equal bytes the
min-cut partitioner saves a view's base, not the view, so the forward graph does not return
the view (it stays a cheap alias there, Note [alias views]) and the backward recomputes it from
the base; gradients equal eager's."""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo


class Heads(nn.Module):
    """q/k/v projections split into heads (`view` + `transpose`) feeding attention, as BERT's
    self-attention does."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        def heads(t):
            return t.view(2, 8, 2, 8).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        return out.transpose(1, 2).reshape(2, 8, 16).sum()


def _graph():
    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    dynamo.optimize(capture)(Heads())(torch.randn(2, 8, 16))
    (gm, example_inputs), = graphs
    return gm, example_inputs


def _saved_ops(plan):
    """The fx ops of the forward graph's saved outputs (those after the user outputs)."""
    out = next(n for n in plan.fw.graph.nodes if n.op == "output")
    vals = out.args[0][plan.n_outputs + len(plan.writeback_inputs):]
    return [v.target if v.op == "call_method" else getattr(v.target, "__name__", str(v.target)) for v in vals if v.op != "placeholder"]


def test_min_cut_saves_the_projections_not_their_head_views():
    gm, example_inputs = _graph()
    plan = dynamo._C.aot_joint(gm, example_inputs, partitioner="min_cut")
    saved = _saved_ops(plan)
    assert "transpose" not in saved and "view" not in saved, saved
    assert saved.count("linear") == 3, saved
    # The same bytes as saving the views: the tie-break costs no memory.
    save_all = dynamo._C.aot_joint(gm, example_inputs, partitioner="save_all")
    assert plan.saved_bytes <= save_all.saved_bytes


def test_gradients_equal_eager():
    torch.manual_seed(0)
    model = Heads()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 8, 16)
    dynamo.optimize("inductor")(model)(x).backward()
    ref(x).backward()
    for p, r in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-5, atol=1e-5)
    c = dynamo.counters()
    assert c["aot_graphs"] == 1 and c["aot_backward_graphs"] == 1, c
