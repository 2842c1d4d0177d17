"""Findings of stop 49: each is the smallest program that differed from eager (or recompiled
where nothing it used changed), run eagerly and compiled and compared exactly, with graph and
recompile counts."""

import contextlib
import io

import pytest
import torch

import dynamo
from _compare import same as _same

BACKENDS = ["eager", "aot_eager", "inductor"]


def _run(fn, calls, backend):
    """`fn` over `calls` (argument tuples) eagerly, then compiled: (results, stdout) of each."""
    out = {}
    for mode in ("eager", "compiled"):
        dynamo.reset()
        f = fn if mode == "eager" else dynamo.optimize(backend)(fn)
        buf = io.StringIO()
        res = []
        with contextlib.redirect_stdout(buf):
            for args in calls:
                try:
                    res.append(("ok", f(*args)))
                except Exception as e:  # noqa: BLE001 - compared with eager's
                    res.append(("raise", type(e), str(e)))
        out[mode] = (res, buf.getvalue())
    return out["eager"], out["compiled"]


def _check(fn, calls, backend):
    (er, eo), (cr, co) = _run(fn, calls, backend)
    assert eo == co
    assert len(er) == len(cr)
    for x, y in zip(er, cr):
        assert _same(x, y), (x, y)


# A tuple of frame arguments formatted with `%` (`'step %d/%d' % (i, n)`) realized both ints at
# BUILD_TUPLE, so a loop printing its step recompiled at every step until the cache limit; the
# tuple is now a lazy constant (Note [lazy constants] in src/symbolic/output_graph.rs), and
# every use of it still guards its items.


def _fmt_tuple(x, i, j):
    print("step %d/%d" % (i, j))
    return x + 1


def _fmt_tuple_str(x, s, i):
    msg = "%s-%05d" % (s, i)
    return x * 2, msg


def _tuple_index(x, i, j):
    t = (i, j)
    return x + t[1]


def _tuple_unpack(x, i, j):
    t = (i, j)
    a, b = t
    return x * a - b


def _tuple_returned(x, i, j):
    t = (i, j)
    return x + 1, t


def _tuple_across_break(x, i, j):
    t = (i, j)
    dynamo.graph_break()
    return x + 1, t, "%d:%d" % t


def _tuple_as_key(x, i, j):
    d = {(i, j): x}
    return d[(i, j)] + 1, list(d)


def _tuple_compared(x, i, j):
    if (i, j) > (2, 0):
        return x + 1
    return x - 1


def _tuple_len_hash(x, i, j):
    t = (i, j, i)
    return x + len(t), t.count(i), hash(t) == hash((i, j, i))


CALLS_IJ = [(torch.ones(3), k, k + 1) for k in range(5)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_fmt_tuple, _tuple_index, _tuple_unpack, _tuple_returned, _tuple_across_break, _tuple_as_key, _tuple_compared, _tuple_len_hash])
def test_lazy_tuple_of_arguments_matches_eager(fn, backend):
    _check(fn, CALLS_IJ, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_tuple_with_a_string_matches_eager(backend):
    _check(_fmt_tuple_str, [(torch.ones(2), s, k) for k, s in enumerate(["a", "bb", "a", "c"])], backend)


def test_printing_a_tuple_of_step_counters_does_not_recompile():
    dynamo.reset()
    f = dynamo.optimize("eager")(_fmt_tuple)
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        for k in range(8):
            f(torch.ones(2), k, 100 - k)
    assert buf.getvalue().splitlines()[3] == "step 3/97"
    c = dynamo.counters()
    assert c["recompiles"] == 0 and c["cache_hits"] == 14, c


# An error that the fake-tensor trace cannot see (a kernel without an implementation for the
# dtype: `x & x` of floats, `lerp` of ints; a dim check: `softmax(x, 1)` of a 1-d tensor),
# raised by a graph that also writes an input, escaped the user's `except` (and skipped the
# write): such a graph was not protected at all. It is now protected on its first call and,
# once it failed, on every call (`_C.snapshot_inputs_first_call`, Note [graph failure reruns
# the frame] in src/pycodegen/mod.rs).


def _bitand_then_write(x):
    try:
        y = x & x
    except Exception:  # noqa: BLE001 - the program under test
        y = x.sum()
    x.mul_(2)
    return y


def _write_then_softmax(x):
    x.add_(1)
    try:
        y = torch.softmax(x, 1)
    except IndexError:
        y = x * 3
    return y


def _write_then_lerp(x):
    x.add_(1)
    return torch.lerp(x, x, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn,make",
    [(_bitand_then_write, lambda: torch.arange(6.0)), (_write_then_softmax, lambda: torch.arange(4.0)), (_write_then_lerp, lambda: torch.arange(4))],
)
def test_unseen_kernel_error_in_a_graph_writing_its_input_reruns_as_eager(fn, make, backend):
    dynamo.reset()
    cf = dynamo.optimize(backend)(fn)
    for _ in range(3):
        a, b = make(), make()
        try:
            e = ("ok", fn(a))
        except Exception as ex:  # noqa: BLE001
            e = ("raise", type(ex), str(ex))
        try:
            c = ("ok", cf(b))
        except Exception as ex:  # noqa: BLE001
            c = ("raise", type(ex), str(ex))
        assert _same(e, c), (e, c)
        assert torch.equal(a, b)
    counters = dynamo.counters()
    assert counters["graphs"] == 1 and counters["graph_failures"] == 3, counters


def _write_input(x, y):
    x.add_(y)
    return x * 2


def test_a_graph_writing_its_input_is_protected_on_its_first_call_only():
    dynamo.reset()
    cf = dynamo.optimize("eager")(_write_input)
    a = torch.ones(3)
    for k in range(3):
        cf(a, torch.full((3,), float(k)))
    assert torch.equal(a, torch.full((3,), 4.0))
    # An error on a later call (a shape the graph's guards let through would not do; a
    # `y` that fails to broadcast recompiles): the user sees eager's exception.
    with pytest.raises(RuntimeError):
        cf(a, torch.ones(4))
    assert torch.equal(a, torch.full((3,), 4.0))


# J1: a tensor guard compared the device index only, -1 for both `cpu` and `meta`: a graph
# compiled for a meta tensor ran for a cpu one (and the other way round).


def _by_device(x):
    if x.device.type == "meta":
        return x.new_zeros(x.shape)
    return x * 2 + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_meta_tensor_and_a_cpu_tensor_get_their_own_graphs(backend):
    dynamo.reset()
    cf = dynamo.optimize(backend)(_by_device)
    m = cf(torch.ones(2, device="meta"))
    assert m.device.type == "meta"
    assert torch.equal(cf(torch.ones(2)), torch.full((2,), 3.0))
    assert cf(torch.ones(2, device="meta")).device.type == "meta"


def test_a_module_moved_to_meta_after_the_compile_recompiles():
    dynamo.reset()
    m = torch.nn.Linear(2, 2)
    f = dynamo.optimize("eager")(lambda x: (m(x).device.type, m.weight.is_meta))
    assert f(torch.ones(2)) == ("cpu", False)
    m.to("meta")
    assert f(torch.ones(2, device="meta")) == ("meta", True)


# J3: an object is true when its class defines neither `__bool__` nor `__len__`; one the class
# gains after the compile was not guarded (`if cfg:` kept its old branch).


class _Plain:
    pass


class _Plain2:
    pass


_PLAIN = _Plain()


def _truth_of_global(x):
    return x + 1 if _PLAIN else x - 1


def _truth_of_argument(x, o):
    return x + 1 if o else x - 1


@pytest.mark.parametrize("dunder", ["__len__", "__bool__"])
def test_truth_dunder_added_to_the_class_after_the_compile(dunder):
    value = (lambda s: 0) if dunder == "__len__" else (lambda s: False)
    for cls in (_Plain, _Plain2):
        assert not hasattr(cls, dunder)
    dynamo.reset()
    f = dynamo.optimize("eager")(_truth_of_global)
    g = dynamo.optimize("eager")(_truth_of_argument)
    try:
        assert f(torch.zeros(1)).item() == 1 and g(torch.zeros(1), _Plain2()).item() == 1
        setattr(_Plain, dunder, value)
        setattr(_Plain2, dunder, value)
        assert f(torch.zeros(1)).item() == -1 and g(torch.zeros(1), _Plain2()).item() == -1
    finally:
        delattr(_Plain, dunder)
        delattr(_Plain2, dunder)


# I2: `torch.ones(3, requires_grad=True)` made in the frame is a new leaf; under AOTAutograd it
# came back as an output of the compiled function's autograd node (`is_leaf` False, `.grad`
# never filled). Such a graph now runs through torch's autograd (src/autograd/joint.rs).


def _factory_leaf(x):
    w = torch.ones(3, requires_grad=True)
    return (x * w).sum(), w


def _tensor_leaf_backward_inside(x):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * w).sum()
    y.backward()
    return w.grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leaf_made_in_the_frame_gets_its_grad(backend):
    dynamo.reset()
    x = torch.arange(3.0).requires_grad_()
    loss, w = dynamo.optimize(backend)(_factory_leaf)(x)
    loss.backward()
    assert w.is_leaf and torch.equal(w.grad, torch.arange(3.0)) and torch.equal(x.grad, torch.ones(3))
    x = torch.arange(3.0).requires_grad_()
    assert torch.equal(dynamo.optimize(backend)(_tensor_leaf_backward_inside)(x), torch.arange(3.0))


# I1: raising and catching a user exception class derived from Exception broke the graph twice
# (its construction, then its raise), leaving the handler and the rest of the frame to Python.


class _UserError(Exception):
    pass


class _UserSubError(_UserError):
    pass


def _raise_and_catch_user_error(x):
    y = x * 2
    try:
        raise _UserSubError("m", 3)
    except _UserError as e:
        z = (type(e).__name__, e.args, str(e))
    return y + 1, z


def _raise_user_error_out(x):
    if x.shape[0] > 1:
        raise _UserSubError("too big")
    return x * 2


def _catch_from_inlined(x):
    try:
        return _raise_user_error_out(x)
    except Exception as e:  # noqa: BLE001 - the program under test
        return x + 1, repr(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_raise_and_catch_user_error, _catch_from_inlined])
def test_user_exception_raised_and_caught_in_one_graph(fn, backend):
    _check(fn, [(torch.ones(2),), (torch.ones(2),)], backend)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["graphs"] == 1, c


def test_user_exception_leaving_the_frame_has_eagers_traceback():
    dynamo.reset()
    with pytest.raises(_UserSubError, match="too big") as info:
        dynamo.optimize("eager")(_raise_user_error_out)(torch.ones(2))
    assert info.traceback[-1].name == "_raise_user_error_out"


# J12: a float argument is a symbolic input from its first compile, an int one once it changed;
# formatting one into a string (`f"lr={lr}"`, `'%d' % step`, `log.info("lr %s", lr)`) guarded
# its value, so a step logging its learning rate recompiled at every call and ran eagerly for
# good after eight. Note [formatting symbolic inputs] in src/symbolic/output_graph.rs.

import logging  # noqa: E402

_LOG = logging.getLogger("dynamo.tests.s49")


def _print_lr(x, lr):
    print(f"lr={lr}")
    return x * lr


def _print_used_step(x, i):
    y = x + i
    print("step %d" % i)
    return y


def _print_lr_and_step(x, lr, i):
    print("lr=%.4f step %d" % (lr, i))
    return x * lr + i


def _log_lr(x, lr):
    _LOG.info("lr %s", lr)
    return x * lr


def _log_fstring(x, lr):
    _LOG.info(f"lr {lr:.3f}")
    return x * lr


def _string_of_lr_used(x, lr):
    s = f"{lr}"
    if s.startswith("0.1"):
        return x + 1
    return x - 1


@pytest.mark.parametrize(
    "fn,make,compiles",
    [
        (_print_lr, lambda k: (0.1 * (k + 1),), 2),
        (_print_used_step, lambda k: (k,), 3),
        (_print_lr_and_step, lambda k: (0.1 * (k + 1), k), 4),
        (_log_lr, lambda k: (0.1 * (k + 1),), 1),
        (_log_fstring, lambda k: (0.1 * (k + 1),), 1),
    ],
)
def test_formatting_a_symbolic_argument_does_not_recompile(fn, make, compiles, caplog):
    calls = [(torch.ones(2), *make(k)) for k in range(10)]
    with caplog.at_level(logging.INFO, logger="dynamo.tests.s49"):
        (er, eo), (cr, co) = _run(fn, calls, "eager")
    assert eo == co
    assert all(_same(x, y) for x, y in zip(er, cr))
    c = dynamo.counters()
    assert c["compiles"] <= compiles and c["cache_limit_hits"] == 0, c
    messages = [r.getMessage() for r in caplog.records if r.name == "dynamo.tests.s49"]
    assert messages[: len(messages) // 2] == messages[len(messages) // 2 :]


def test_a_string_of_a_symbolic_argument_that_is_used_guards_it():
    calls = [(torch.ones(2), v) for v in (0.1, 0.2, 0.15, 0.3)]
    _check(_string_of_lr_used, calls, "eager")


# J5, J3: what the trace finds missing on a class or a module (`hasattr(cfg, "FLAG")`,
# `getattr(K, "k", d)`, no `__neg__` so `-a` raises, no `__str__` so `str()` is the repr)
# was not guarded: a name the class, a base, its metaclass or the module gained after the
# compile was not seen. Every class lookup of a trace is now part of its class's ATTR_VERSION
# guard (Note [class lookups are versioned] in src/symbolic/variables/user_defined.rs), and a
# module's or class's missing name gets a NO_ATTR guard.

import types  # noqa: E402


def _fresh_classes():
    class Meta(type):
        pass

    class Base(metaclass=Meta):
        pass

    class K(Base):
        pass

    return Meta, Base, K


def test_missing_names_of_a_module_are_guarded():
    cfg = types.ModuleType("cfg_s49")

    def f(x):
        return x * 2 if hasattr(cfg, "DOUBLE") else x + getattr(cfg, "OFFSET", 0)

    dynamo.reset()
    cf = dynamo.optimize("eager")(f)
    assert cf(torch.ones(1)).item() == 1
    cfg.DOUBLE = True
    assert cf(torch.ones(1)).item() == 2
    del cfg.DOUBLE
    cfg.OFFSET = 10
    assert cf(torch.ones(1)).item() == 11


@pytest.mark.parametrize("where", ["class", "base", "metaclass"])
def test_missing_names_of_a_class_are_guarded(where):
    meta, base, k_cls = _fresh_classes()

    def g(x):
        return x + getattr(k_cls, "k", -1), hasattr(k_cls, "k")

    dynamo.reset()
    cg = dynamo.optimize("eager")(g)
    assert cg(torch.zeros(1))[0].item() == -1
    setattr({"class": k_cls, "base": base, "metaclass": meta}[where], "k", 6)
    r = cg(torch.zeros(1))
    assert r[0].item() == 6 and r[1] is True


def test_an_attribute_the_class_gains_is_seen_by_a_try_lookup_on_an_instance():
    class A:
        pass

    a = A()

    def h(x):
        try:
            return x + a.k
        except AttributeError:
            return x - 1

    dynamo.reset()
    ch = dynamo.optimize("eager")(h)
    assert ch(torch.zeros(1)).item() == -1
    A.k = 6
    assert ch(torch.zeros(1)).item() == 6


def test_an_instance_attribute_shadows_getattr_after_the_compile():
    class G:
        def __getattr__(self, n):
            if n == "k":
                return 100
            raise AttributeError(n)

    o = G()
    dynamo.reset()
    cj = dynamo.optimize("eager")(lambda x: x + getattr(o, "k", -1))
    assert cj(torch.zeros(1)).item() == 100
    o.k = 5
    assert cj(torch.zeros(1)).item() == 5


def _use_neg(x, a):
    try:
        return x + (-a)
    except TypeError:
        return x - 1


def _use_str(x, a):
    return x + len(str(a))


def _use_lt(x, a):
    try:
        return x + (1 if a < 3 else -1)
    except TypeError:
        return x - 7


def _use_getattribute(x, a):
    return x + getattr(a, "v", 1)


@pytest.mark.parametrize(
    "fn,dunder,impl",
    [
        (_use_neg, "__neg__", lambda s: 5),
        (_use_str, "__str__", lambda s: "xxxxxxxxxx"),
        (_use_lt, "__lt__", lambda s, o: True),
        (_use_getattribute, "__getattribute__", lambda s, n: 42),
    ],
)
def test_a_dunder_the_class_gains_after_the_compile_is_used(fn, dunder, impl):
    class A:
        def __repr__(self):
            return "A"

    a = A()
    dynamo.reset()
    cf = dynamo.optimize("eager")(fn)
    before = cf(torch.zeros(1), a)
    assert torch.equal(before, fn(torch.zeros(1), a))
    setattr(A, dunder, impl)
    after = cf(torch.zeros(1), a)
    assert torch.equal(after, fn(torch.zeros(1), a)) and not torch.equal(after, before)
    delattr(A, dunder)
    assert torch.equal(cf(torch.zeros(1), a), before)


def test_a_class_attribute_written_every_call_does_not_recompile():
    class Counter:
        calls = 0

    def f(x):
        Counter.calls += 1
        return x + 1

    dynamo.reset()
    cf = dynamo.optimize("eager")(f)
    for _ in range(5):
        cf(torch.zeros(1))
    assert Counter.calls == 5
    assert dynamo.counters()["recompiles"] <= 1  # the value guard of `calls`, then a dynamic int


# J4 / H1: the weak reference aot.py keeps to a forward output that a node saved (Note [saved
# results]) counted as a user's observer of the tensor's lifetime, so rebinding or overwriting
# it (a KV-cache update `c.k = torch.cat([c.k, k])`, `x = layer(x)` in an `nn.Sequential` fed
# by another compiled module) was a graph break (GB0026) at every step.


def _kv_update(x, c, wk, wv):
    c.k = torch.cat([c.k, (x @ wk)[None]], -2)
    c.v = torch.cat([c.v, (x @ wv)[None]], -2)
    return torch.nn.functional.scaled_dot_product_attention(x[None], c.k, c.v)


class _Cache:
    def __init__(self):
        self.k = torch.zeros(1, 1, 0, 4)
        self.v = torch.zeros(1, 1, 0, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kv_cache_of_saved_outputs_does_not_break(backend):
    torch.manual_seed(0)
    wk, wv = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    xs = [torch.randn(1, 1, 4) for _ in range(5)]
    ce, cc = _Cache(), _Cache()
    eager = [_kv_update(x, ce, wk, wv) for x in xs]
    dynamo.reset()
    f = dynamo.optimize(backend)(_kv_update)
    compiled = [f(x, cc, wk, wv) for x in xs]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(eager, compiled))
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_module_fed_by_another_does_not_break(backend):
    torch.manual_seed(0)
    g_net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    d_net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    dynamo.reset()
    g, d = dynamo.optimize(backend)(g_net), dynamo.optimize(backend)(d_net)
    x = torch.randn(2, 4)
    d(g(x)).sum().backward()
    grad = d_net[0].weight.grad.clone()
    d_net.zero_grad()
    d_net(g_net(x)).sum().backward()
    assert torch.allclose(grad, d_net[0].weight.grad)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["graphs"] == 2, c


# J2: the compiled code calls a module's `forward` as `nn.Module.__call__` would; a class whose
# `__call__` or `_call_impl` was replaced after the compile, or an instance `_call_impl`, was
# not seen.


class _Plus(torch.nn.Module):
    def forward(self, x):
        return x + 1


def test_module_call_replaced_on_the_class_after_the_compile():
    class M(_Plus):
        pass

    m = M()
    dynamo.reset()
    cf = dynamo.optimize("eager")(lambda x: m(x))
    assert cf(torch.zeros(1)).item() == 1
    M.__call__ = lambda s, x: x * 0 + 42
    assert cf(torch.zeros(1)).item() == 42
    del M.__call__
    M._call_impl = lambda s, x: x * 0 + 7
    assert cf(torch.zeros(1)).item() == 7


def test_instance_call_impl_is_honoured():
    m = _Plus()
    m._call_impl = lambda x: x * 0 + 9
    dynamo.reset()
    assert dynamo.optimize("eager")(lambda x: m(x))(torch.zeros(1)).item() == 9


# H4: `os.path.join` broke the graph on `os.fspath` (nanoGPT's `get_batch`); `os.fspath` of a
# str folds now.

import os  # noqa: E402


def _data_path(x, split):
    p = os.path.join("data", split + ".bin")
    return x + len(p), p


def test_os_path_join_of_strings_is_traced():
    _check(_data_path, [(torch.zeros(1), s) for s in ("train", "val", "train")], "eager")
    assert dynamo.counters()["graph_breaks"] == 0


# H2: an exception raised in a loop body that became a function (Note [loop bodies as
# functions]) showed the user's frame twice in its traceback (at the `for` line, then at the
# real line) with the loop driver's frame between; an error of the iterator showed the driver.

import sys  # noqa: E402
import traceback  # noqa: E402


def _inner_raises(x):
    if x.shape[0] == 1:
        raise ValueError("Expected more than 1 value")
    return x * 2


def _loop_body_raises(batches):
    tot = 0.0
    for i, x in enumerate(batches):
        y = _inner_raises(x)
        tot += y.sum().item()
    return tot


def _iterator_raises():
    yield torch.ones(2)
    raise KeyError("from iterator")


def _loop_over_failing_iterator(it):
    tot = 0
    for x in it:
        tot += (x * 2).sum().item()
    return tot


def _user_frames(fn, arg):
    try:
        fn(arg)
    except (ValueError, KeyError):
        tb = traceback.extract_tb(sys.exc_info()[2])
        return [(f.name, f.lineno) for f in tb if not f.filename.endswith(os.path.join("dynamo", "eval_frame.py"))][1:]
    raise AssertionError("no exception")


@pytest.mark.parametrize("backend", BACKENDS)
def test_traceback_of_an_error_in_a_loop_body_or_its_iterator_is_eagers(backend):
    batches = lambda: [torch.ones(2), torch.ones(1)]  # noqa: E731
    eager = _user_frames(_loop_body_raises, batches())
    dynamo.reset()
    assert _user_frames(dynamo.optimize(backend)(_loop_body_raises), batches()) == eager
    eager = _user_frames(_loop_over_failing_iterator, _iterator_raises())
    dynamo.reset()
    assert _user_frames(dynamo.optimize(backend)(_loop_over_failing_iterator), _iterator_raises()) == eager


# J7: the trace's fake-tensor mode kept weak references to every tensor the frame had seen (the
# compiled graph's fake tensors keep the mode alive), so `torch.utils.swap_tensors` on them (what
# `Module.to` runs under `set_swap_module_params_on_conversion`) raised "Cannot swap t1 because
# it has weakref associated with it" until `dynamo.reset()`.


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_seen_by_a_compile_can_be_swapped(backend):
    dynamo.reset()
    m = torch.nn.Linear(2, 2)
    dynamo.optimize(backend)(lambda x: m(x))(torch.ones(2))
    torch.utils.swap_tensors(m.weight, torch.nn.Parameter(torch.ones(2, 2)))
    assert torch.equal(m.weight, torch.ones(2, 2))
    t = torch.ones(2)
    dynamo.optimize(backend)(lambda x: x + 1)(t)
    torch.utils.swap_tensors(t, torch.zeros(2))
    assert torch.equal(t, torch.zeros(2))
