"""F.embedding lowered to kernels (Note [indirect loads] in llvm/src/kernel.rs, Note [index
checks] in src/inductor/ir.rs): each output element is a load of the weight's row, so lookups
fuse with their readers; an out-of-range index runs the graph eagerly, raising eager's error."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import dynamo._C as C


def counters():
    return C.inductor_counters()


def compile_fx(fn, inputs):
    return C.inductor_compile(torch.fx.symbolic_trace(fn), inputs)


def lookup(ids, w):
    return F.embedding(ids, w)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_lookup_equals_eager_bit_for_bit(index_dtype, weight_dtype, shape):
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(11, 6, generator=g) * 10).to(weight_dtype)
    ids = torch.randint(0, 11, shape, generator=g, dtype=index_dtype)
    C.inductor_reset_counters()
    compiled = compile_fx(lookup, [ids, w])
    assert counters()["fallback_nodes"] == 0, compiled.plan
    out = compiled(ids, w)
    assert out.dtype == weight_dtype and out.shape == (*shape, 6)
    assert torch.equal(out, lookup(ids, w))
    # Other values at the same layout: the same kernel, new rows.
    ids2 = torch.randint(0, 11, shape, generator=g, dtype=index_dtype)
    assert torch.equal(compiled(ids2, w), lookup(ids2, w))


def embeddings_and_norm(ids, pos, w, p, ln_w, ln_b):
    # BERT's embedding block: two lookups, their sum and a LayerNorm.
    h = F.embedding(ids, w) + F.embedding(pos, p)
    return F.layer_norm(h, (16,), ln_w, ln_b, 1e-12)


def test_lookups_fuse_with_their_readers():
    g = torch.Generator().manual_seed(1)
    w, p = torch.randn(50, 16, generator=g), torch.randn(12, 16, generator=g)
    ln_w, ln_b = torch.randn(16, generator=g), torch.randn(16, generator=g)
    ids = torch.randint(0, 50, (4, 12), generator=g)
    pos = torch.arange(12).unsqueeze(0)  # broadcast over the batch
    compiled = compile_fx(embeddings_and_norm, [ids, pos, w, p, ln_w, ln_b])
    # One kernel computes the lookups, the sum and the norm; the index checks are the others.
    assert compiled.kernel_ir.count("indirect_load") == 2, compiled.kernel_ir
    assert sum("indirect_load" in k for k in compiled.kernel_ir.split("\n\n")) == 1, compiled.kernel_ir
    assert not [line for line in compiled.plan.splitlines() if line.startswith("fallback")], compiled.plan
    torch.testing.assert_close(compiled(ids, pos, w, p, ln_w, ln_b), embeddings_and_norm(ids, pos, w, p, ln_w, ln_b))


@pytest.mark.parametrize("bad", [50, 51, 1000, -1, -50])
def test_out_of_range_index_raises_eagers_error(bad):
    g = torch.Generator().manual_seed(2)
    w, p = torch.randn(50, 16, generator=g), torch.randn(12, 16, generator=g)
    ln_w, ln_b = torch.ones(16), torch.zeros(16)
    ids = torch.randint(0, 50, (4, 12), generator=g)
    pos = torch.arange(12).unsqueeze(0)
    args = [ids, pos, w, p, ln_w, ln_b]
    compiled = compile_fx(embeddings_and_norm, args)
    compiled(*args)
    broken = ids.clone()
    broken[2, 7] = bad
    with pytest.raises(IndexError) as eager:
        embeddings_and_norm(broken, pos, w, p, ln_w, ln_b)
    with pytest.raises(IndexError) as got:
        compiled(broken, pos, w, p, ln_w, ln_b)
    assert str(got.value) == str(eager.value)
    # The graph still runs its kernels for good indices afterwards.
    calls = counters()["kernel_calls"]
    torch.testing.assert_close(compiled(*args), embeddings_and_norm(*args))
    assert counters()["kernel_calls"] > calls


def test_out_of_range_index_under_dynamo_keeps_state_and_traceback():
    emb = nn.Embedding(20, 8)
    seen = []

    def step(ids, acc):
        acc.add_(1)
        return emb(ids).sum(-1) * 2

    opt = dynamo.optimize("inductor")(step)
    acc_e, acc_c = torch.zeros(3), torch.zeros(3)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with torch.no_grad():
        torch.testing.assert_close(opt(ids, acc_c), step(ids, acc_e))
        bad = torch.tensor([[1, 2, 3], [4, 20, 6]])
        for fn, acc in ((step, acc_e), (opt, acc_c)):
            try:
                fn(bad, acc)
            except IndexError as e:
                seen.append(str(e))
    assert len(seen) == 2 and seen[0] == seen[1]
    # The in-place add before the failing lookup happened once in each, as in eager.
    assert torch.equal(acc_c, acc_e)


def renorm(ids, w):
    return F.embedding(ids, w, max_norm=1.0)


def test_max_norm_runs_through_torch_and_renormalizes_the_weight():
    g = torch.Generator().manual_seed(3)
    w_e = torch.randn(10, 4, generator=g) * 5
    w_c = w_e.clone()
    ids = torch.tensor([1, 3, 3, 7])
    with torch.no_grad():
        want = renorm(ids, w_e)
        got = dynamo.optimize("inductor")(renorm)(ids, w_c)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(w_c, w_e)


def computed_weight(ids, w):
    return F.embedding(ids, w * 2) + 1


def test_weight_computed_in_the_graph_falls_back_with_the_same_result():
    g = torch.Generator().manual_seed(4)
    w = torch.randn(9, 3, generator=g)
    ids = torch.randint(0, 9, (5,), generator=g)
    C.inductor_reset_counters()
    compiled = compile_fx(computed_weight, [ids, w])
    assert counters()["fallback_nodes"] == 1
    torch.testing.assert_close(compiled(ids, w), computed_weight(ids, w))


def view_indices(ids, w):
    # Indices read through views: a slice, a transpose, an expand.
    return F.embedding(ids[:, 1:].t(), w), F.embedding(ids[0].expand(3, -1), w)


def test_indices_through_views_and_empty_indices():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(30, 5, generator=g)
    ids = torch.randint(0, 30, (4, 6), generator=g)
    compiled = compile_fx(view_indices, [ids, w])
    for a, b in zip(compiled(ids, w), view_indices(ids, w)):
        assert torch.equal(a, b)
    empty = torch.zeros(0, 4, dtype=torch.int64)
    compiled_empty = compile_fx(lookup, [empty, w])
    assert compiled_empty(empty, w).shape == (0, 4, 5)


def test_training_through_an_embedding_matches_eager():
    torch.manual_seed(6)
    model = nn.Sequential(nn.Embedding(40, 16, padding_idx=0), nn.LayerNorm(16), nn.Linear(16, 40))
    ref = nn.Sequential(nn.Embedding(40, 16, padding_idx=0), nn.LayerNorm(16), nn.Linear(16, 40))
    ref.load_state_dict(model.state_dict())
    ids = torch.randint(0, 40, (8, 10))
    ids[0, :3] = 0
    opt = dynamo.optimize("inductor")(model)
    for m, run in ((ref, ref), (model, opt)):
        loss = F.cross_entropy(run(ids).reshape(-1, 40), ids.reshape(-1))
        loss.backward()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)
    assert torch.equal(model[0].weight.grad[0], torch.zeros(16))
