"""Dynamic shapes (Note [symbolic sizes] in src/symbolic/output_graph.rs): a dimension that
changed between compiles becomes symbolic, so later sizes reuse one graph; guards are relations
over sizes (SHAPE_RELATIONS), and their failures name the relation."""

import pytest
import torch

import dynamo


class CompileCounter:
    """Counts backend calls (graphs compiled) and keeps each graph module."""

    def __init__(self):
        self.frame_count = 0
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


def _check(fn, opt, *args):
    ref = fn(*args)
    got = opt(*args)
    if isinstance(ref, tuple):
        assert type(got) is tuple and len(got) == len(ref)
        for r, g in zip(ref, got):
            if isinstance(r, torch.Tensor):
                torch.testing.assert_close(g, r)
            else:
                assert type(g) is type(r) and g == r
    else:
        torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_changing_batch_compiles_twice(backend):
    def f(x, y):
        b = x.shape[0]
        z = x.view(b, -1) * 2 + y.sum()
        return z.relu(), b * 3

    opt = dynamo.optimize(backend)(f)
    for n in [4, 5, 6, 7, 9, 12, 30]:
        _check(f, opt, torch.randn(n, 3, 2), torch.randn(3))
    c = dynamo.counters()
    assert c["compiles"] == 2 and c["recompiles"] == 1


def test_symbolic_size_is_a_graph_value():
    cnt = CompileCounter()

    def f(x):
        n = x.size(0)
        return torch.arange(n) + x.sum(), n // 2, x.shape

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 4, 8, 11]:
        _check(f, opt, torch.randn(n))
    assert cnt.frame_count == 2
    # The second graph computes the sizes from its input: no constant 4, 8 or 11.
    code = cnt.graphs[1].code
    assert "size()" in code and "arange" in code
    out = opt(torch.randn(13))
    assert type(out[2]) is torch.Size and out[2] == torch.Size([13]) and out[1] == 6


def test_size_one_and_zero_specialize():
    cnt = CompileCounter()

    def f(x):
        return x * x.shape[0]

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 4, 5]:
        _check(f, opt, torch.randn(n, 2))
    assert cnt.frame_count == 2
    # 0 and 1 are specialized (as torch does): each compiles once, then alternating is free.
    for n in [1, 0, 6, 1, 0, 7, 1, 0, 8]:
        _check(f, opt, torch.randn(n, 2))
    assert cnt.frame_count == 4


def test_python_use_of_a_size_specializes_it():
    cnt = CompileCounter()

    def f(x):
        if x.shape[0] > 4:
            return x + 1
        return x - 1

    opt = dynamo.optimize(cnt)(f)
    for n in [2, 3, 5, 6, 7, 3]:
        _check(f, opt, torch.randn(n))
    # 2 (static), 3 (dynamic, guarded <= 4), 5 (dynamic, guarded > 4): the rest hit.
    assert cnt.frame_count == 3


def test_specialized_value_is_guarded():
    cnt = CompileCounter()

    def f(x):
        return x * int(str(x.shape[0]))

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 5, 6, 5]:
        _check(f, opt, torch.randn(n))
    # `str` saw the value: the dynamic graph is valid for that size only.
    assert cnt.frame_count == 3


def test_shape_guard_failure_names_the_relation():
    from dynamo import _C

    def f(x):
        return x * 2

    opt = dynamo.optimize("eager")(f)
    opt(torch.randn(3))
    opt(torch.randn(4))  # dim 0 is dynamic now, guarded >= 2 (0/1 specialization)
    opt(torch.randn(7))
    assert dynamo.counters()["compiles"] == 2
    opt(torch.randn(1))
    assert dynamo.counters()["compiles"] == 3
    last = _C.recompile_reasons()[-1]
    assert "shape guard L['x'].size()[0] >= 2 failed (L['x'].size()[0] = 1)" in last
    assert "SHAPE_RELATIONS" in last


def test_equal_sizes_relation_and_its_message():
    from dynamo import _C

    def f(x, y):
        return x.view(-1) + y.view(-1)

    opt = dynamo.optimize("eager")(f)
    opt(torch.randn(3, 2), torch.randn(6))
    opt(torch.randn(4, 2), torch.randn(8))  # dynamic; the add needs 2*s0 == s1
    opt(torch.randn(9, 2), torch.randn(18))
    assert dynamo.counters()["compiles"] == 2
    # The dynamic graph relies on 2 * x.size(0) == y.size(0): a mismatch recompiles, naming it,
    # and then raises as eager does.
    with pytest.raises(RuntimeError):
        opt(torch.randn(5, 2), torch.randn(12))
    assert any("SHAPE_RELATIONS" in r and "L['y'].size()[0]" in r for r in _C.recompile_reasons())


def test_mark_dynamic_first_compile():
    cnt = CompileCounter()

    def f(x):
        return x.sum(1) * x.shape[1]

    x = torch.randn(3, 5)
    dynamo.mark_dynamic(x, 1)
    opt = dynamo.optimize(cnt)(f)
    _check(f, opt, x)
    assert "size()" in cnt.graphs[0].code
    for n in [6, 7]:
        y = torch.randn(3, n)
        _check(f, opt, y)
    # Unmarked inputs with other sizes: the graph's guard accepts them (dim 1 is symbolic).
    assert cnt.frame_count == 1


def test_mark_static_keeps_a_dimension_specialized():
    cnt = CompileCounter()

    def f(x):
        return x * 2

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 4, 5]:
        x = torch.randn(n)
        dynamo.mark_static(x, 0)
        _check(f, opt, x)
    assert cnt.frame_count == 3


def test_dynamic_false_and_true():
    def f(x):
        return x.cos() * x.shape[0]

    cnt = CompileCounter()
    opt = dynamo.optimize(cnt, dynamic=False)(f)
    for n in [3, 4, 5]:
        _check(f, opt, torch.randn(n))
    assert cnt.frame_count == 3
    dynamo.reset()
    cnt = CompileCounter()
    opt = dynamo.optimize(cnt, dynamic=True)(f)
    for n in [3, 4, 5]:
        _check(f, opt, torch.randn(n))
    assert cnt.frame_count == 1


def test_config_automatic_dynamic_off():
    def f(x):
        return x + 1

    dynamo.config.automatic_dynamic_shapes = False
    try:
        opt = dynamo.optimize("eager")(f)
        for n in [3, 4, 5]:
            _check(f, opt, torch.randn(n))
        assert dynamo.counters()["compiles"] == 3
    finally:
        dynamo.config.automatic_dynamic_shapes = True


@pytest.mark.parametrize("order", ["automatic_first", "static_first"])
def test_the_two_dynamic_switches_are_independent(order):
    # Tester 7 #2: both switches were one setting, so `assume_static_by_default = True` turned
    # automatic dynamic shapes back on (4 sizes gave 2 compiles, torch gives 4).
    def f(x):
        return x * 2

    cfg = dynamo.config
    try:
        if order == "automatic_first":
            cfg.automatic_dynamic_shapes = False
            cfg.assume_static_by_default = True
        else:
            cfg.assume_static_by_default = True
            cfg.automatic_dynamic_shapes = False
        assert cfg.automatic_dynamic_shapes is False and cfg.assume_static_by_default is True
        dynamo.reset()
        opt = dynamo.optimize("eager")(f)
        for n in [3, 4, 5, 6]:
            _check(f, opt, torch.randn(n))
        assert dynamo.counters()["compiles"] == 4
        # assume_static_by_default = False wins while it is set, and leaves the other as it was.
        cfg.assume_static_by_default = False
        assert cfg.automatic_dynamic_shapes is False
        dynamo.reset()
        opt = dynamo.optimize("eager")(f)
        for n in [3, 4, 5]:
            _check(f, opt, torch.randn(n))
        assert dynamo.counters()["compiles"] == 1
    finally:
        cfg.assume_static_by_default = True
        cfg.automatic_dynamic_shapes = True


def _placeholder_sizes(gm):
    """The example sizes of a graph's tensor placeholders: an int, or ``"sym"`` for a symbol."""
    out = []
    for node in gm.graph.nodes:
        v = node.meta.get("example_value") if node.op == "placeholder" else None
        if isinstance(v, torch.Tensor):
            out.append(["sym" if isinstance(s, torch.SymInt) and not s.node.expr.is_number else int(s) for s in v.size()])
    return out


# (batch, length) calls whose first change is in the length only, then in the batch.
_PAIRS = [(4, 16), (4, 9), (3, 20), (6, 5), (2, 31), (5, 12)]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_input_varying_in_two_dimensions_compiles_twice(backend):
    # Note [whole-tensor automatic dynamic]: the recompile at (4, 9) makes both dimensions
    # symbolic, so the later batch change reuses that graph (torch, by dimension: 3 compiles).
    emb = torch.nn.Embedding(50, 8)

    def f(ids):
        h = emb(ids)
        return h.softmax(-1).sum(1) * ids.shape[1]

    opt = dynamo.optimize(backend)(f)
    with torch.no_grad():
        for b, t in _PAIRS:
            _check(f, opt, torch.randint(0, 50, (b, t)))
    c = dynamo.counters()
    assert c["compiles"] == 2 and c["recompiles"] == 1


def test_whole_tensor_automatic_dynamic_off_is_per_dimension():
    cnt = CompileCounter()

    def f(x):
        return x.cos().sum(1) * x.shape[1]

    dynamo.config.automatic_dynamic_whole_tensor = False
    try:
        assert dynamo.config.automatic_dynamic_whole_tensor is False
        opt = dynamo.optimize(cnt)(f)
        for b, t in _PAIRS:
            _check(f, opt, torch.randn(b, t))
        # Static, then the length symbolic, then the batch too: torch's automatic dynamic.
        assert cnt.frame_count == 3
        assert _placeholder_sizes(cnt.graphs[1]) == [[4, "sym"]]
    finally:
        dynamo.config.automatic_dynamic_whole_tensor = True
    assert dynamo.config.automatic_dynamic_whole_tensor is True
    dynamo.reset()
    cnt = CompileCounter()
    opt = dynamo.optimize(cnt)(f)
    for b, t in _PAIRS:
        _check(f, opt, torch.randn(b, t))
    assert cnt.frame_count == 2
    assert _placeholder_sizes(cnt.graphs[1]) == [["sym", "sym"]]


def test_whole_tensor_automatic_dynamic_keeps_size_one_and_marked_static_dims():
    cnt = CompileCounter()

    def f(x):
        return (x * 2).sum(-1)

    opt = dynamo.optimize(cnt)(f)
    for n in [5, 7, 9]:
        x = torch.randn(3, 1, n)
        dynamo.mark_static(x, 0)
        _check(f, opt, x)
    assert cnt.frame_count == 2
    # dim 0 marked static, dim 1 of size 1 specialized (torch's 0/1 rule), dim 2 symbolic.
    assert _placeholder_sizes(cnt.graphs[1]) == [[3, 1, "sym"]]
    _check(f, opt, torch.randn(4, 1, 9))
    assert cnt.frame_count == 3


def test_non_contiguous_input_stays_static():
    cnt = CompileCounter()

    def f(x):
        return x * 2

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 4, 5]:
        _check(f, opt, torch.randn(2, n).t())
    assert cnt.frame_count == 3
    # A contiguous input of a size seen dynamic is still guarded contiguous.
    _check(f, opt, torch.randn(5, 2))


def test_broadcast_relation_between_inputs():
    cnt = CompileCounter()

    def f(x, y):
        return (x * y).sum(-1)

    opt = dynamo.optimize(cnt)(f)
    for n in [3, 4, 5, 6]:
        _check(f, opt, torch.randn(n, 4), torch.randn(n, 4))
    assert cnt.frame_count == 2
    # Unequal sizes that do not broadcast raise as in eager.
    with pytest.raises(RuntimeError):
        opt(torch.randn(3, 4), torch.randn(5, 4))


def test_views_and_reshapes_over_symbolic_sizes():
    cnt = CompileCounter()

    def f(x):
        b, t, c = x.shape
        h = x.view(b, t, 2, c // 2).transpose(1, 2)
        return h.reshape(b * 2, t, -1).softmax(-1), len(x)

    opt = dynamo.optimize(cnt)(f)
    for b, t in [(2, 3), (3, 5), (4, 7), (5, 2), (2, 9)]:
        _check(f, opt, torch.randn(b, t, 8))
    assert cnt.frame_count <= 3


def test_symbolic_size_survives_a_graph_break():
    def f(x):
        b = x.shape[0]
        y = x * 2
        print("break")
        return y.view(b, -1) + b

    opt = dynamo.optimize("eager")(f)
    for n in [3, 4, 5, 6, 7]:
        _check(f, opt, torch.randn(n, 2, 2))
    assert dynamo.counters()["cache_limit_hits"] == 0
    assert dynamo.counters()["compiles"] <= 4


@pytest.mark.parametrize("backend", ["inductor"])
def test_inductor_specializes_kernels_per_shape(backend):
    def f(x):
        return (x.sin() + 1).sum(-1)

    opt = dynamo.optimize(backend)(f)
    for n in [3, 4, 5, 4, 5]:
        _check(f, opt, torch.randn(n, 16))
    c = dynamo.counters()
    assert c["compiles"] == 2
    assert c["shape_specializations"] == 2  # sizes 4 and 5 through the dynamic graph
    assert c["inductor_kernel_calls"] > 0


@pytest.mark.parametrize("views", [False, True], ids=["copies", "views"])
def test_training_step_with_ragged_last_batch(views):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    opt_m = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    data = torch.randn(70, 8)
    target = torch.randint(0, 2, (70,))

    def step(m, o, x, y):
        o.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    compiled = dynamo.optimize("inductor")(step)
    for _ in range(3):
        for i in range(0, 70, 16):
            x, y = data[i : i + 16], target[i : i + 16]
            # Batches sliced from the dataset are views at growing storage offsets.
            a = compiled(model, opt_m, x if views else x.clone(), y if views else y.clone())
            b = step(ref, opt_r, x.clone(), y.clone())
            torch.testing.assert_close(a, b)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
    from dynamo import _C

    # One recompile per compiled frame at most: the one the smaller last batch causes.
    recompiled = [r.split(" in ")[0] for r in _C.recompile_reasons()]
    assert all(recompiled.count(f) == 1 for f in recompiled), _C.recompile_reasons()
    # The forward and loss are compiled for the full batches and once, symbolic, for the last.
    assert dynamo.counters()["graphs"] == 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_float_argument_is_a_graph_input(backend):
    def scale(x, lr):
        return x - lr * x.sin()

    opt = dynamo.optimize(backend)(scale)
    x = torch.randn(16)
    for i in range(8):
        _check(scale, opt, x, 0.1 * (i + 1))
    c = dynamo.counters()
    assert c["compiles"] == 1
    if backend == "inductor":
        # One static version serves every value: the float stays a run-time input.
        assert c["shape_specializations"] <= 1


def test_branch_on_a_float_specializes_it():
    def f(x, lr):
        if lr > 0.3:
            return x * lr
        return x - lr

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(4)
    for v in [0.1, 0.5, 0.1, 0.5, -0.0, 0.0]:
        _check(f, opt, x, v)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_module_int_attribute_counting_calls_compiles_twice(backend):
    class CallCounter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.lin(x) * self.calls

    torch.manual_seed(0)
    m, ref = CallCounter(), CallCounter()
    ref.load_state_dict(m.state_dict())
    opt = dynamo.optimize(backend)(m)
    x = torch.randn(3, 4)
    with torch.no_grad():
        for _ in range(8):
            _check(ref, opt, x)
    assert m.calls == ref.calls == 8 and type(m.calls) is int
    c = dynamo.counters()
    assert c["compiles"] == 2
    if backend == "inductor":
        assert c["shape_specializations"] <= 1


def test_int_argument_used_as_a_size():
    cnt = CompileCounter()

    def f(x, n):
        return x[:n] * n, torch.zeros(n)

    opt = dynamo.optimize(cnt)(f)
    x = torch.randn(20)
    for n in [3, 4, 5, 9, 12]:
        _check(f, opt, x, n)
    assert cnt.frame_count == 2


def test_loop_counter_in_resume_function_does_not_thrash():
    def f(x):
        for i in range(12):
            x = torch.sin(x) * 1.01 + i
            if i % 4 == 0:
                print("step", i)
        return x

    opt = dynamo.optimize("eager")(f)
    _check(f, opt, torch.randn(8))
    assert dynamo.counters()["cache_limit_hits"] == 0


def test_explain_shows_symbolic_shapes_and_shape_guards():
    def f(x, n):
        return x.view(x.shape[0], -1).sum(1) * n

    x = torch.randn(4, 3, 2)
    dynamo.mark_dynamic(x, 0)
    ex = dynamo.explain(f)(x, 2.5)
    text = str(ex)
    assert ex.graph_count == 1
    assert len(ex.symbolic_shapes) == 2  # x's first size and the float
    assert "Symbolic Shapes:" in text and ", 3, 2]" in text
    assert any("SHAPE_RELATIONS: L['x'].size()[0] >= 2" in g for g in ex.out_guards)
    assert any("size=[None, 3, 2] stride=contiguous" in g for g in ex.out_guards)


def test_contiguous_and_transposed_input_of_one_shape_cost_one_recompile():
    cnt = CompileCounter()

    def f(x):
        return x * 2 + 1

    opt = dynamo.optimize(cnt)(f)
    base = torch.randn(6, 6)
    for i in range(12):
        _check(f, opt, base if i % 2 else base.t())
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_checkpoint_with_changing_sizes(backend):
    """Compiling a new shape's static version must not run the user's saved-tensor hooks
    (activation checkpointing counts what they pack)."""
    from torch.utils.checkpoint import checkpoint

    def body(t):
        return (t * 2).sin()

    def f(x):
        return checkpoint(body, x, use_reentrant=False)

    opt = dynamo.optimize(backend)(f)
    for n in [2, 2, 3, 3, 4]:
        x = torch.randn(n, requires_grad=True)
        opt(x).sum().backward()
        ref = x.detach().clone().requires_grad_()
        f(ref).sum().backward()
        torch.testing.assert_close(x.grad, ref.grad)


def test_saved_tensor_hooks_pack_once_per_call_of_a_dynamic_graph():
    packs = []

    def pack(t):
        packs.append(tuple(t.shape))
        return t

    opt = dynamo.optimize("aot_eager", dynamic=True)(lambda t: (t * 2).sin())
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        opt(torch.randn(3, requires_grad=True))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        (lambda t: (t * 2).sin())(torch.randn(3, requires_grad=True))
    assert packs[: len(packs) // 2] == packs[len(packs) // 2 :]


def test_branch_on_a_float_argument_compiles_once_per_branch():
    def f(x, lr):
        if lr > 0.3:
            return x * lr
        return x - lr

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(4)
    for v in [0.1, 0.5, 0.2, 0.6, 0.05, 0.9]:
        _check(f, opt, x, v)
    # The float relation lr > 0.3 (or its negation) is a guard evaluated in f64.
    assert dynamo.counters()["compiles"] == 2


@pytest.mark.parametrize("op", ["pad", "interpolate"])
def test_ops_whose_meta_kernel_specializes_stay_symbolic(op):
    import torch.nn.functional as F

    fns = {"pad": lambda x: F.pad(x, (0, 2)), "interpolate": lambda x: F.interpolate(x[None], scale_factor=2.0)}
    fn = fns[op]
    opt = dynamo.optimize("eager")(fn)
    for n in [2, 4, 5, 6] * 3:
        _check(fn, opt, torch.randn(n, 3))
    assert dynamo.counters()["compiles"] == 2


def _same(a, b):
    """Exact equality for results mixing tensors and Python numbers: same types, same values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return a == b


import math  # noqa: E402

# Builtins and math functions over a changing int `n` and float `f`: each stays a graph value
# (torch.sym_max, sym_float, _sym_sqrt, scalar_tensor, ...), so the function compiles twice
# (static, then symbolic), as under torch.compile, and returns eager's types.
SYMBOLIC_BUILTINS = {
    "max_min": lambda x, n, f: (x * max(n, 4), max(n, 2, 9), min(f, 0.5), min(n, 7)),
    "int_float_round": lambda x, n, f: (x * float(n), int(f), int(n), float(f), round(n)),
    "math": lambda x, n, f: (x * math.sqrt(n), math.floor(f), math.ceil(f), math.trunc(f), math.floor(n), math.cos(f)),
    "divmod_pow_abs": lambda x, n, f: (x * pow(n, 2), divmod(n, 3), abs(-n), abs(f - 1.0)),
    "membership": lambda x, n, f: (x * (2 if n in (30, 40) else 1), n in [70, 80], n not in (1, 2), n in {60, 90}),
    "tensor_of_number": lambda x, n, f: (x + torch.tensor(n), torch.tensor(f), torch.tensor(n, dtype=torch.float32), torch.as_tensor(n)),
    "size_numel": lambda x, n, f: (x.reshape(-1)[: x.shape.numel() - 1].sum() * n, x[1:].shape.numel()),
    "max_of_size": lambda x, n, f: (x.new_zeros(max(x.shape[0], 2)).sum() + x.sum(), abs(x.shape[0] - 9)),
}


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("case", sorted(SYMBOLIC_BUILTINS))
def test_builtins_over_symbolic_numbers_compile_twice(case, backend):
    fn = SYMBOLIC_BUILTINS[case]
    opt = dynamo.optimize(backend)(fn)
    for i, (n, f) in enumerate([(5, 1.5), (6, -2.5), (7, 0.25), (8, 3.75), (9, -0.5), (3, 2.0)]):
        x = torch.randn(4 + i, 2)
        ref, got = fn(x, n, f), opt(x, n, f)
        assert _same(ref, got), (n, f, ref, got)
    assert dynamo.counters()["compiles"] == 2


def test_membership_of_a_symbolic_int_guards_each_comparison():
    # `n in (3, 4)` guards `n != 3` and `n != 4` while it is False: other values reuse the graph,
    # a member recompiles (its comparison's guard fails).
    def f(x, n):
        return x * (2 if n in (3, 4) else 1)

    opt = dynamo.optimize("eager")(f)
    for n in [5, 6, 7, 8]:
        assert torch.equal(opt(torch.ones(2), n), f(torch.ones(2), n))
    assert dynamo.counters()["compiles"] == 2
    assert torch.equal(opt(torch.ones(2), 3), f(torch.ones(2), 3))
    assert dynamo.counters()["compiles"] == 3


@pytest.mark.parametrize("kind", [tuple, torch.Size, list])
def test_shape_argument_items_become_symbolic(kind):
    # A shape passed as a tuple, torch.Size or list whose items change: those items are
    # symbolic inputs on the recompile (torch's automatic dynamic), so later shapes hit.
    def f(x, size):
        return x.reshape(size) * 2, size

    opt = dynamo.optimize("eager")(f)
    for n in [2, 4, 5, 6, 7]:
        x = torch.randn(n * 3)
        size = kind((n, 3))
        ref, got = f(x, size), opt(x, size)
        assert torch.equal(ref[0], got[0])
        assert type(got[1]) is kind and got[1] == size
    assert dynamo.counters()["compiles"] == 2


def test_shape_argument_static_item_is_still_guarded():
    def f(x, size):
        return x.reshape(size) + 1

    opt = dynamo.optimize("eager")(f)
    for n in [2, 4, 5]:
        assert torch.equal(opt(torch.ones(n * 3), (n, 3)), f(torch.ones(n * 3), (n, 3)))
    assert dynamo.counters()["compiles"] == 2
    # The second item was the same at every call: a new value of it recompiles.
    assert torch.equal(opt(torch.ones(8), (2, 4)), f(torch.ones(8), (2, 4)))
    assert dynamo.counters()["compiles"] == 3


@pytest.mark.parametrize("other", [(3, 3), torch.Size([3, 3])])
def test_shape_compared_with_a_tuple_guards_the_relation(other):
    # `x.shape == (3, 3)` compares item by item: guards on the relations (`s0 != 3`), so the
    # symbolic graph serves every other size; the equal size gets its own graph.
    def f(x):
        if x.shape == other:
            return x + 1
        return x - 1

    opt = dynamo.optimize("eager")(f)
    for n in [2, 4, 5, 3, 6, 3]:
        x = torch.randn(n, 3)
        assert torch.equal(opt(x), f(x))
    assert dynamo.counters()["compiles"] == 3


# Branches on float functions of a symbolic int: the ShapeEnv's guards (`ToFloat`, `Abs`,
# `OpaqueUnaryFn_sqrt`, `FloorToInt`, true division) are checked in Rust, so the symbolic graph
# serves every value on the same side of the branch (torch.compile: 3 graphs for each).
BRANCHES = {
    "sqrt": lambda x, n: x + 1 if math.sqrt(n) > 2.5 else x - 1,
    "true_division": lambda x, n: x + 1 if float(n) / 3 > 2 else x - 1,
    "abs": lambda x, n: x + 1 if abs(n - 7) > 1 else x - 1,
    "floor": lambda x, n: x + 1 if math.floor(n / 4) == 2 else x - 1,
    "max_of_size": lambda x, n: x + 1 if max(x.shape[0], 4) > 5 else x - 1,
}


@pytest.mark.parametrize("case", sorted(BRANCHES))
def test_branch_on_a_float_function_of_a_size_guards_the_relation(case):
    fn = BRANCHES[case]
    opt = dynamo.optimize("eager")(fn)
    for i, n in enumerate([5, 6, 7, 8, 9, 10, 11, 12, 5, 9]):
        x = torch.randn(4 + i % 4, 2)
        torch.testing.assert_close(opt(x, n), fn(x, n))
    assert dynamo.counters()["compiles"] == 3


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_symbolic_int_saved_for_backward(backend):
    # Found by the fuzzer (seed 73012, program 108): `p * n` with `n` an int that changed
    # between calls saves the symbolic `n` for the backward; save_for_backward takes tensors
    # only ("argument 0 is of type int"), so it rides on ctx.
    def f(p, n):
        return (p * n + 1).sum()

    opt = dynamo.optimize(backend)(f)
    for n in [2, 3, 4, 5]:
        p = torch.randn(4, 4, requires_grad=True)
        q = p.detach().clone().requires_grad_()
        opt(p, n).backward()
        f(q, n).backward()
        torch.testing.assert_close(p.grad, q.grad)
    assert dynamo.counters()["compiles"] == 2


# ----- type-only uses of a symbolic size (Note [type-only uses of symbolic numbers]) ----------


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_isinstance_of_a_growing_cache_length_compiles_twice(backend):
    # transformers' causal-mask code (masking_utils._preprocess_mask_arguments) on a KV cache:
    # `isinstance(q_offset, torch.Tensor)` of the cache length specialized it, so generate()
    # recompiled at every decoded token.
    def f(x, cache):
        n = cache.shape[-2]
        off = n.to(x.device) if isinstance(n, torch.Tensor) else n
        return x + off

    opt = dynamo.optimize(backend)(f)
    for k in range(3, 11):
        x, cache = torch.randn(4), torch.randn(2, k, 8)
        torch.testing.assert_close(opt(x, cache), f(x, cache))
    assert dynamo.counters()["compiles"] == 2


# Uses of a size `n` (and a float `f`) that depend on its type only: they answer as eager, and
# `n` stays symbolic, so growing sizes compile twice (static, then symbolic).
TYPE_ONLY = {
    "isinstance": lambda x, n, f: (x * n, isinstance(n, int), isinstance(n, (torch.Tensor, float)), isinstance(f, float)),
    "type": lambda x, n, f: (x * n, type(n) is int, type(n) == float, type(n), type(f)),
    "callable_hasattr": lambda x, n, f: (x * n, callable(n), hasattr(n, "item"), hasattr(n, "bit_length")),
    "getattr_missing": lambda x, n, f: (x * n, getattr(n, "device", None), getattr(f, "dtype", 3), getattr(n, "shape", "no")),
    "eq_none_str": lambda x, n, f: (x * n, n == None, n != None, n == "auto", None == n, f == None),  # noqa: E711
    "in_none_str": lambda x, n, f: (x * n, n in (None, "auto"), n not in [None]),
}


@pytest.mark.parametrize("case", sorted(TYPE_ONLY))
def test_type_only_uses_of_a_size_keep_it_symbolic(case):
    fn = TYPE_ONLY[case]

    def g(x, cache, f):
        return fn(x, cache.shape[-2], f)

    opt = dynamo.optimize("eager")(g)
    for k in range(3, 9):
        x, cache = torch.randn(4), torch.randn(2, k, 8)
        ref, got = g(x, cache, 1.5), opt(x, cache, 1.5)
        assert _same(ref, got), (k, ref, got)
    assert dynamo.counters()["compiles"] == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_rotary_slices_of_a_symbolic_size_with_grad(backend):
    """`x[..., : x.shape[-1] // 2]` under dynamic shapes makes a `slice` node; when AOTAutograd
    split the graph around an op without a rule, torch.fx's split_module could not read that
    value's symbols and the graph was thrown away (every Llama/Mistral/Qwen rotary embedding:
    graph_failures, recompiles up to the cache limit)."""

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)

    def f(q, cos, sin):
        return q * cos + rotate_half(q) * sin

    compiled = dynamo.optimize(backend, dynamic=True)(f)
    for n in (5, 7):
        q = torch.randn(2, 4, n, 8, requires_grad=True)
        cos, sin = torch.randn(2, 1, n, 8), torch.randn(2, 1, n, 8)
        want = f(q, cos, sin)
        (gq_want,) = torch.autograd.grad(want.sum(), q)
        got = compiled(q, cos, sin)
        (gq_got,) = torch.autograd.grad(got.sum(), q)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gq_got, gq_want)
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_failures"] == 0 and c["recompiles"] == 0, c


def test_dynamic_true_keeps_parameters_buffers_and_module_ints_static():
    """Note [dynamic=True and object state]: as torch, `dynamic=True` makes the tensors passed
    in symbolic but keeps parameters, buffers and ints read from modules static (until they
    change); symbolic kernel sizes and paddings made a conv stack's sizes grow layer by layer
    and torch's ShapeEnv slow with them (resnet18's first call took 111 s)."""
    layers = []
    for _ in range(3):
        layers += [torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).eval()
    counter = CompileCounter()
    compiled = dynamo.optimize(counter, dynamic=True)(model)
    for hw in (8, 11):
        x = torch.randn(2, 4, hw, hw)
        torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == 1
    (gm,) = counter.graphs
    shapes = {n.name: n.meta["example_value"].shape for n in gm.graph.nodes if isinstance(n.meta.get("example_value"), torch.Tensor)}
    weights = [s for name, s in shapes.items() if name.endswith("_weight") and len(s) == 4]
    assert weights and all(all(isinstance(d, int) for d in s) for s in weights), weights
    out = shapes[max(n for n in shapes if n.startswith("relu"))]
    assert [str(d) for d in out[2:]] == [str(d) for d in shapes[next(n for n in shapes if n.startswith("l_"))][2:]], shapes
