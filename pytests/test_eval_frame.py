"""The frame hook, the cache and guards: what gets captured, when it recompiles, what stays eager."""

import sys
import threading

import pytest
import torch

import dynamo
from dynamo import _C


class CompileCounter:
    """A backend that counts graphs and ops, then runs the graph as is (torch._dynamo.testing)."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
        self.graphs.append(gm)
        return gm.forward


def test_capture_and_cache_hit():
    cnt = CompileCounter()

    def f(x, y):
        return torch.sin(x) + torch.cos(y) * 2

    x, y = torch.randn(8, 8), torch.randn(8, 8)
    opt = dynamo.optimize(cnt)(f)
    torch.testing.assert_close(opt(x, y), f(x, y))
    torch.testing.assert_close(opt(x, y), f(x, y))
    assert cnt.frame_count == 1
    assert cnt.op_count == 4
    c = dynamo.counters()
    assert c["compiles"] == 1 and c["cache_hits"] == 1


def test_context_manager_captures_frames_started_inside():
    cnt = CompileCounter()

    def f(x):
        return x * 2 + 1

    x = torch.randn(3)
    with dynamo.optimize(cnt):
        out = f(x)
    torch.testing.assert_close(out, x * 2 + 1)
    assert cnt.frame_count == 1
    # Outside the block nothing is compiled.
    f(x)
    assert cnt.frame_count == 1


@pytest.mark.parametrize(
    "change",
    [
        ("int", lambda x: (x, 3), "L['n'] == 3, expected 2"),
        ("dtype", lambda x: (x.double(), 2), "dtype mismatch"),
        ("shape", lambda x: (torch.randn(5, 4), 2), "size mismatch"),
    ],
    ids=lambda c: c[0],
)
def test_one_recompile_per_change_names_guard(change):
    _, make, expected = change
    cnt = CompileCounter()

    def f(x, n):
        return x * n + 1

    opt = dynamo.optimize(cnt)(f)
    x = torch.randn(4, 4)
    opt(x, 2)
    opt(x, 2)
    args = make(x)
    torch.testing.assert_close(opt(*args), f(*args))
    torch.testing.assert_close(opt(*args), f(*args))
    assert cnt.frame_count == 2
    assert dynamo.counters()["recompiles"] == 1
    reasons = _C.recompile_reasons()
    assert len(reasons) == 1
    assert expected in reasons[0], reasons[0]
    assert "Recompiling function" in reasons[0] and "f" in reasons[0]


def test_cache_size_limit_falls_back_with_one_warning():
    cnt = CompileCounter()

    def f(x, n):
        return x + n

    # dynamic=False: each value of `n` is its own compile (automatic dynamic ints would make `n`
    # a graph input after its second value).
    opt = dynamo.optimize(cnt, dynamic=False)(f)
    old = dynamo.config.cache_size_limit
    dynamo.config.cache_size_limit = 2
    try:
        x = torch.ones(2)
        opt(x, 0)
        opt(x, 1)
        with pytest.warns(UserWarning, match=r"(?s)cache_size_limit \(2\) reached.*L\['n'\] == 2") as rec:
            out = opt(x, 2)
        torch.testing.assert_close(out, x + 2)
        # One warning, naming only the last reason (the newest entry's failing guard), as torch's.
        (w,) = [w for w in rec if "cache_size_limit" in str(w.message)]
        text = str(w.message)
        assert text.count("expected") == 1 and "expected 1" in text, text
        assert 'DYNAMO_LOGS="recompiles"' in text, text
        assert w.filename == __file__, w.filename  # points at the user's call, not dynamo's wrapper
        torch.testing.assert_close(opt(x, 3), x + 3)
    finally:
        dynamo.config.cache_size_limit = old
    assert cnt.frame_count == 2


def test_grad_mode_is_guarded():
    cnt = CompileCounter()

    def f(x):
        return x * 2

    opt = dynamo.optimize(cnt)(f)
    x = torch.randn(3, requires_grad=True)
    assert opt(x).requires_grad
    with torch.no_grad():
        assert not opt(x).requires_grad
    assert cnt.frame_count == 2


def test_user_exception_keeps_type_and_message():
    def f(x):
        if x.shape[0] == 3:
            raise ValueError("bad size 3")
        return x + 1

    opt = dynamo.optimize("eager")(f)
    with pytest.raises(ValueError, match="bad size 3"):
        opt(torch.ones(3))
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2) + 1)


def test_shape_error_inside_graph_is_the_users():
    def f(x, y):
        return x + y

    opt = dynamo.optimize("eager")(f)
    with pytest.raises(RuntimeError, match="must match the size"):
        opt(torch.ones(3), torch.ones(4))


def test_unsupported_call_in_with_block_breaks_with_reason():
    def f(x):
        with open(__file__) as fh:  # a file object is not traced: breaks, the block runs in Python
            fh.readline()
        return x + 1

    opt = dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2) + 1)
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2) + 1)
    reasons = _C.break_reasons()
    assert any("open" in r for r in reasons), reasons
    assert dynamo.counters()["graph_breaks"] >= 1


def test_failing_backend_falls_back_or_raises():
    def broken(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def f(x):
        return x.relu()

    x = torch.randn(4)
    torch.testing.assert_close(dynamo.optimize(broken)(f)(x), x.relu())
    dynamo.reset()
    dynamo.config.suppress_errors = False
    try:
        with pytest.raises(RuntimeError, match="backend exploded"):
            dynamo.optimize(broken)(f)(x)
    finally:
        dynamo.config.suppress_errors = True


def test_disable_and_run_only():
    cnt = CompileCounter()

    def inner(x):
        return x - 1

    def f(x):
        return x * 3

    disabled = dynamo.disable(inner)
    with dynamo.optimize(cnt):
        disabled(torch.ones(2))
    assert cnt.frame_count == 0

    opt = dynamo.optimize(cnt)(f)
    opt(torch.ones(2))
    assert cnt.frame_count == 1
    ran = dynamo.run(f)
    torch.testing.assert_close(ran(torch.ones(2)), torch.ones(2) * 3)
    torch.testing.assert_close(ran(torch.ones(5)), torch.ones(5) * 3)  # miss: eager, no compile
    assert cnt.frame_count == 1


def test_reset_forgets_everything():
    cnt = CompileCounter()

    def f(x):
        return x + 2

    opt = dynamo.optimize(cnt)(f)
    opt(torch.ones(2))
    dynamo.reset()
    assert dynamo.counters()["compiles"] == 0
    opt(torch.ones(2))
    assert cnt.frame_count == 2


def test_generators_are_not_captured():
    cnt = CompileCounter()

    def gen(x):
        yield x + 1
        yield x + 2

    with dynamo.optimize(cnt):
        out = list(gen(torch.ones(2)))
    assert len(out) == 2 and cnt.frame_count == 0


def test_hook_is_per_thread():
    cnt = CompileCounter()

    def f(x):
        return x + 5

    results = []

    def other():
        results.append(f(torch.ones(1)))

    with dynamo.optimize(cnt):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert cnt.frame_count == 0
    with dynamo.optimize(cnt):
        f(torch.ones(1))
    assert cnt.frame_count == 1


def test_nested_optimize_restores_outer():
    outer, inner = CompileCounter(), CompileCounter()

    def f(x):
        return x * 7

    def g(x):
        return x * 8

    with dynamo.optimize(outer):
        with dynamo.optimize(inner):
            f(torch.ones(1))
        g(torch.ones(1))
    assert inner.frame_count == 1 and outer.frame_count == 1


def test_closures_kwargs_and_varargs():
    cnt = CompileCounter()
    scale = torch.tensor(3.0)

    def f(x, *rest, bias=1.0, **extra):
        y = x * scale + bias
        for r in rest:
            y = y + r
        return y * extra.get("gain", 1.0)

    opt = dynamo.optimize(cnt)(f)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x, x, x, bias=2.0, gain=0.5), f(x, x, x, bias=2.0, gain=0.5))
    torch.testing.assert_close(opt(x), f(x))
    assert cnt.frame_count == 2


def test_return_structures_rebuilt():
    def f(x, xs):
        return {"a": x + 1, "b": [x * 2, 3, xs]}, (x, None)

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(2)
    xs = [1, 2]
    out = opt(x, xs)
    ref = f(x, xs)
    assert list(out[0]) == ["a", "b"]
    torch.testing.assert_close(out[0]["a"], ref[0]["a"])
    assert out[0]["b"][1] == 3 and out[0]["b"][2] is xs
    assert out[1][0] is x and out[1][1] is None


def test_module_forward_inlined_and_params_are_inputs():
    cnt = CompileCounter()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def f(x):
        return m(x)

    x = torch.randn(3, 4)
    torch.testing.assert_close(dynamo.optimize(cnt)(f)(x), m(x))
    assert cnt.frame_count == 1
    placeholders = [n for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 5  # x + 2 weights + 2 biases
    guards = "\n".join(_C.cached_guards(f.__code__))
    assert "TENSOR_MATCH: getattr(L['m'], '0').weight" in guards
    assert "ID_MATCH: L['m']" in guards


# Regressions found by trying the project as a new user (each was a wrong result or a crash).


def test_aliased_inputs_are_guarded():
    def add(a, b):
        return a + b

    opt = dynamo.optimize("eager")(add)
    x = torch.ones(2)
    torch.testing.assert_close(opt(x, x), add(x, x))
    torch.testing.assert_close(opt(2 * x, x), add(2 * x, x))
    torch.testing.assert_close(opt(torch.zeros(2), x), add(torch.zeros(2), x))
    xs = [x, x]
    f = dynamo.optimize("eager")(lambda l: l[0] - l[1])
    f(xs)
    torch.testing.assert_close(f([2 * x, x]), x)


def test_dict_inputs_are_guarded_on_keys():
    def h(d):
        return d["a"] + d.get("z", 0)

    opt = dynamo.optimize("eager")(h)
    x = torch.ones(2)
    opt({"a": x, "b": x})
    torch.testing.assert_close(opt({"a": x, "z": x}), h({"a": x, "z": x}))


def test_submodule_forward_replacement_and_hooks_take_effect():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, a):
            return self.lin(a)

    x = torch.ones(1, 2)
    n = Net()
    on = dynamo.optimize("eager")(n)
    on(x)
    n.lin.forward = lambda a: a * 100
    torch.testing.assert_close(on(x), n(x))
    n2 = Net()
    on2 = dynamo.optimize("eager")(n2)
    on2(x)
    n2.lin.register_forward_hook(lambda m, i, o: o * 0)
    torch.testing.assert_close(on2(x), n2(x))


def test_callable_returned_by_backend_is_not_traced():
    compiles = []

    def wrapping_backend(gm, example_inputs):
        compiles.append(gm)

        def run(*args):
            return gm.forward(*[a.contiguous() for a in args])

        return run

    @dynamo.optimize(wrapping_backend)
    def f(a):
        return a.sin() + 1

    x = torch.ones(3)
    for _ in range(3):
        torch.testing.assert_close(f(x), x.sin() + 1)
    assert len(compiles) == 1

    @dynamo.optimize(lambda gm, ex: (lambda *args: (torch.zeros(1),)))
    def g(a):
        return a.cos() + 1

    torch.testing.assert_close(g(torch.ones(3)), torch.zeros(1))


def test_config_rejects_unknown_settings():
    with pytest.raises(AttributeError, match="cache_size_limt"):
        dynamo.config.cache_size_limt = 3


def test_grad_mode_context_managers_in_graph():
    cnt = CompileCounter()

    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 3
        with torch.no_grad():
            w = x * 4
        z = y + x
        return y, z, w

    opt = dynamo.optimize(cnt)(f)
    x = torch.randn(3, requires_grad=True)
    for flag in (True, False):
        got, ref = opt(x, flag), f(x, flag)
        for g, r in zip(got, ref):
            assert g.requires_grad == r.requires_grad
            torch.testing.assert_close(g, r)
    assert torch.is_grad_enabled()
    assert cnt.frame_count == 2


def test_optimized_sequential_module_is_captured():
    cnt = CompileCounter()
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    opt = dynamo.optimize(cnt)(m)
    x = torch.randn(6, 4)
    ref_m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    ref_m.load_state_dict(m.state_dict())
    torch.testing.assert_close(opt(x), ref_m(x))
    m.eval()
    ref_m.eval()
    torch.testing.assert_close(opt(x), ref_m(x))
    torch.testing.assert_close(m[1].running_mean, ref_m[1].running_mean)
    assert m[1].num_batches_tracked == ref_m[1].num_batches_tracked
    assert cnt.frame_count == 2


def test_returned_closure_sees_final_cell_values():
    cnt = CompileCounter()

    def fn(x, k=2.0):
        scale = x.sum()

        def apply(t, bias=k):
            return t * scale + bias

        scale = scale * 2
        return apply, scale

    opt = dynamo.optimize(cnt)(fn)
    x = torch.randn(3)
    (g, s), (g_ref, s_ref) = opt(x), fn(x)
    torch.testing.assert_close(s, s_ref)
    torch.testing.assert_close(g(torch.ones(2)), g_ref(torch.ones(2)))
    assert cnt.frame_count == 1


def test_sets_and_pure_builtins_fold_into_one_graph():
    cnt = CompileCounter()

    def fn(x, names):
        s = set(names)
        s.add("z")
        s.discard("a")
        common = sorted(s & {"b", "z", "q"})
        n = len(s) + max(3, x.shape[0]) - min([4, 2, 9]) + sum([1, 2]) + any([]) + all([])
        return x * n, common, sorted(s), list(reversed([1, 2, 3]))

    opt = dynamo.optimize(cnt)(fn)
    for args in ((torch.ones(3), ["a", "b", "c"]), (torch.ones(5), ["b", "q"])):
        got, ref = opt(*args), fn(*args)
        torch.testing.assert_close(got[0], ref[0])
        assert got[1:] == ref[1:]
    assert cnt.frame_count == 2


def test_answered_frames_are_released():
    """A frame the hook answers for itself (running the transformed code instead) is cleared and
    popped as CPython would have: on 3.12 the hook does it (ffi::finish_taken_over), on 3.11 the
    caller. Argument references come back, deep recursion crosses the thread's data-stack chunks
    (a frame that opened a chunk frees it), and a frame answered with an exception is released
    too."""

    def f(x, y):
        return x * 2 + y

    def bad(x):
        return x + "a"

    opt, opt_bad = dynamo.optimize("eager")(f), dynamo.optimize("eager")(bad)
    x, y = torch.ones(3), torch.full((3,), 2.0)
    opt(x, y)
    before = (sys.getrefcount(x), sys.getrefcount(y))
    hits = dynamo.counters()["cache_hits"]
    for _ in range(2000):
        opt(x, y)
    assert dynamo.counters()["cache_hits"] - hits == 2000

    def rec(n):
        return opt(x, y) if n == 0 else rec(n - 1)

    # The first data-stack chunk holds 16 KiB; a few hundred frames cross into new chunks.
    for depth in range(0, 400, 7):
        torch.testing.assert_close(rec(depth), x * 2 + y)
    for _ in range(50):
        with pytest.raises(TypeError):
            opt_bad(x)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_missing_attribute_guard_failure_names_the_source():
    """A guard whose source can no longer be read (the attribute was deleted) fails with the
    source's name and the exception, not an index into the guard plan."""

    class Holder:
        pass

    h = Holder()
    h.scale = 2.0
    h.t = torch.ones(2)

    def f(x):
        return x * h.t

    cnt = CompileCounter()
    opt = dynamo.optimize(cnt)(f)
    x = torch.ones(2)
    torch.testing.assert_close(opt(x), x)
    before = len(_C.recompile_reasons())
    del h.t
    with pytest.raises(AttributeError):
        opt(x)
    reasons = _C.recompile_reasons()[before:]
    assert reasons, "the missing attribute must be reported as a recompile reason"
    assert "h" in reasons[-1] and "could not be read (AttributeError" in reasons[-1], reasons[-1]
    assert "source #" not in reasons[-1]


def test_logs_to_a_file_carry_no_colour_codes(tmp_path):
    """DYNAMO_LOGS output redirected away from a terminal is plain text (no ANSI escapes)."""
    import subprocess

    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch, dynamo\n"
        "def f(x):\n"
        "    y = x + 1\n"
        "    print('side')\n"
        "    return y * 2\n"
        "dynamo.optimize('eager')(f)(torch.ones(2))\n"
    )
    r = subprocess.run(
        [sys.executable, str(prog)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "DYNAMO_LOGS": "graph_breaks"},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "graph_breaks" in r.stderr, r.stderr
    assert "\x1b[" not in r.stderr, repr(r.stderr[:300])
