"""Findings of stop 47's testers: each is the smallest program that differed from eager, run
eagerly and compiled and compared exactly (values, types, identity, mutated state), with graph
counts that show the code was captured."""

import copy

import pytest
import torch

import dynamo


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and [type(k) for k in a] == [type(k) for k in b] and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _run(f, make_args, backend):
    """`f` on fresh arguments from `make_args()`, eagerly and compiled (after a reset): the two
    results and the two argument lists after the calls, and the compiled frame's explanation."""
    want_args = make_args()
    want = f(*want_args)
    dynamo.reset()
    explained = dynamo.explain(f)(*make_args())
    dynamo.reset()
    got_args = make_args()
    got = dynamo.optimize(backend)(f)(*got_args)
    return want, got, want_args, got_args, explained


# C5: a loop over `enumerate(it)` or `zip(it, ...)` with a graph break in its body traveled to
# the resume function as a snapshot of its remaining items, so the iterator `it` it steps (a
# local, or the caller's) was left one item in: `list(it)` after the loop gave the rest again.

def _loop_over_local_iterator(x):
    it = iter([1, 2, 3])
    for i, v in enumerate(it):
        x = x + v * i
        dynamo.graph_break()
    return x, list(it)


def _zip_over_local_iterator(x):
    it = iter([1, 2, 3])
    for a, b in zip(it, (4, 5, 6)):
        x = x + a * b
        dynamo.graph_break()
    return x, list(it)


def _loop_over_callers_iterator(x, it):
    for i, v in enumerate(it):
        x = x + v
        dynamo.graph_break()
    return x


def _zip_stops_early_over_callers_iterator(x, it):
    for a, b in zip((10, 20), it):
        x = x + a * b
        dynamo.graph_break()
    return x


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_loop_over_local_iterator, _zip_over_local_iterator])
def test_loop_over_iterator_of_a_local_steps_it(f, backend):
    want, got, _, _, explained = _run(f, lambda: (torch.zeros(1),), backend)
    assert _same(got, want), (got, want)
    assert explained.graph_count >= 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_loop_over_callers_iterator, _zip_stops_early_over_callers_iterator])
def test_loop_over_callers_iterator_steps_it(f, backend):
    want, got, want_args, got_args, explained = _run(f, lambda: (torch.zeros(1), iter([1, 2, 3, 4])), backend)
    assert _same(got, want), (got, want)
    assert list(got_args[1]) == list(want_args[1])
    assert explained.graph_count >= 2


# C1: the replay of a dict from outside the frame took an equal key of another type for the
# same key (`2` and `2.0`): after `d.pop(2); d[2.0] = v` eager's dict holds the key 2.0 and the
# compiled one kept 2. Every dict kind a replay writes: dict, OrderedDict, defaultdict, a dict
# subclass; `del` and `pop`; int/float and int/bool.

class _DictSubclass(dict):
    pass


def _pop_then_insert_equal_key(x, d):
    d.pop(2)
    d[2.0] = "new"
    return x + 1


def _del_then_insert_true(x, d):
    del d[1]
    d[True] = "new"
    return x + 1


def _assign_equal_key_keeps_stored(x, d):
    d[2.0] = "new"
    return x + 1


DICT_KINDS = {
    "dict": lambda: {1: "a", 2: "b"},
    "OrderedDict": lambda: __import__("collections").OrderedDict([(1, "a"), (2, "b")]),
    "defaultdict": lambda: __import__("collections").defaultdict(list, {1: "a", 2: "b"}),
    "subclass": lambda: _DictSubclass({1: "a", 2: "b"}),
}


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("kind", sorted(DICT_KINDS))
@pytest.mark.parametrize("f", [_pop_then_insert_equal_key, _del_then_insert_true, _assign_equal_key_keeps_stored])
def test_replayed_dict_keeps_eagers_key_objects(f, kind, backend):
    make = DICT_KINDS[kind]
    want, got, want_args, got_args, explained = _run(f, lambda: (torch.ones(1), make()), backend)
    assert _same(got, want)
    assert _same(got_args[1], want_args[1]), (got_args[1], want_args[1])
    assert explained.graph_count == 1 and explained.graph_break_count == 0


# C2, C3: OrderedDict.move_to_end kept the stored key object in eager but stored the argument
# (`move_to_end(True)` on key 1 gave key True); OrderedDict's KeyError for a missing tuple key
# has the tuple as its arguments (`PyErr_SetObject`), dict's has it wrapped.

def _move_to_end_with_equal_key(x):
    import collections

    m = collections.OrderedDict([(1, "a"), ("x", 2)])
    m.move_to_end(True)
    m.move_to_end(1.0, last=False)
    return x + 1, list(m.items()), [type(k) for k in m]


def _missing_tuple_keys(x):
    import collections

    m = collections.OrderedDict([(1, "a")])
    out = []
    for call in (lambda: m.move_to_end((1, 2)), lambda: m.pop((3, 4)), lambda: m.pop(()), lambda: {}.pop((5, 6)), lambda: m[(7, 8)]):
        try:
            call()
        except KeyError as e:
            out.append(e.args)
    return x + 1, out


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_move_to_end_with_equal_key, _missing_tuple_keys])
def test_ordered_dict_methods_as_cpython(f, backend):
    want, got, _, _, explained = _run(f, lambda: (torch.ones(1),), backend)
    assert _same(got, want), (got, want)
    assert explained.graph_count == 1 and explained.graph_break_count == 0


# D1: a frame recompiled for a changed int, with a graph break inside an inlined call inside an
# inference-mode block, left inference mode on after it returned (every later op of the program
# ran without autograd): the recompile's static graph (`_shapes.static_graph`) ran the graph's
# `enter_inference_mode` node, which that graph never leaves, and its inference-mode guard was
# entered under the fake mode.

_LINEAR = torch.nn.Linear(8, 4)


def _input_from_generator(i):
    g = torch.Generator().manual_seed(i)  # a graph break inside an inlined call
    return torch.randn(3, 8, generator=g)


def _eval_in_inference_mode(i):
    with torch.inference_mode():
        return _LINEAR(_input_from_generator(i + 1))


def _eval_in_nested_blocks(i):
    with torch.no_grad():
        with torch.inference_mode():
            y = _LINEAR(_input_from_generator(i + 1))
    return y


def _eval_under_autocast(i):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return _LINEAR(_input_from_generator(i + 1))


def _thread_state():
    return (torch.is_inference_mode_enabled(), torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("f", [_eval_in_inference_mode, _eval_in_nested_blocks, _eval_under_autocast])
def test_recompiled_frame_leaves_autograd_state_as_found(f, backend):
    from dynamo import _amp

    before = _thread_state()
    want = [f(i) for i in range(4)]
    dynamo.reset()
    compiled = dynamo.optimize(backend)(f)
    for i in range(4):
        got = compiled(i)
        assert _thread_state() == before, i
        assert len(_amp._inference_stack()) == 0
        assert got.is_inference() == want[i].is_inference() and got.dtype == want[i].dtype
        torch.testing.assert_close(got, want[i], rtol=1e-2 if got.dtype == torch.bfloat16 else 1e-5, atol=1e-5)
    y = _LINEAR(torch.ones(2, 8)).sum()
    assert y.requires_grad and not y.is_inference()


# D4: reading `p.grad` of a parameter (grad-norm logging, rescaling) broke the graph once per
# parameter (GB0021 "Tensor.grad is not traced"); on 3.12 the list comprehension around it made
# the whole frame run as ordinary Python. A leaf input's gradient is now an input of the graph
# (Note [gradients of inputs]).

def _grad_norm(m):
    return torch.stack([p.grad.norm() for p in m.parameters()]).norm()


def _rescale_grads(m, c):
    with torch.no_grad():
        for p in m.parameters():
            p.grad.mul_(c)
    return c


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_gradients_of_parameters_are_graph_inputs(backend):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    m(torch.randn(2, 8)).sum().backward()
    explained = dynamo.explain(_grad_norm)(m)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    dynamo.reset()
    norm, rescale = dynamo.optimize(backend)(_grad_norm), dynamo.optimize(backend)(_rescale_grads)
    for step in range(3):
        assert torch.equal(norm(m), _grad_norm(m))
        want = [p.grad * 0.5 for p in m.parameters()]
        rescale(m, 0.5)
        assert all(torch.equal(p.grad, w) for p, w in zip(m.parameters(), want))
        # New gradient tensors (set_to_none, then a backward) are new inputs, not a recompile.
        m.zero_grad(set_to_none=True)
        m(torch.randn(2, 8)).sum().backward()
    assert dynamo.counters()["recompiles"] == 0


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_gradient_that_is_none_then_a_tensor(backend):
    def f(p):
        return p.grad is None, (p.grad if p.grad is not None else torch.zeros(1)) + 1

    p = torch.nn.Parameter(torch.ones(2))
    dynamo.reset()
    compiled = dynamo.optimize(backend)(f)
    for grad in (None, torch.full((2,), 3.0), None, torch.full((2,), 5.0)):
        p.grad = grad
        assert _same(compiled(p), f(p))


def test_gradient_of_a_tensor_made_in_the_graph_warns_as_eager():
    import warnings

    def f(x):
        y = x * 2
        return y.grad, y + 1

    x = torch.ones(2, requires_grad=True)
    dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = dynamo.optimize("eager")(f)(x)
    assert got[0] is None and any("not a leaf Tensor" in str(w.message) for w in caught)


# D3: HF Llama with gradient checkpointing ran every decoder layer eagerly: each layer's region
# sets and resets transformers' `CompileableContextVar` fields, which counted as effects outside
# the trace (Note [checkpointed Python effects]). Writes that leave every attribute as the region
# found it no longer count; a write that stays still makes the region run through torch.

class _Flag:
    def __init__(self):
        self.value = None
        self.active = False


_FLAG = _Flag()


def _layer_with_set_and_reset(x, w):
    _FLAG.value = x
    _FLAG.active = True
    h = x @ w
    _FLAG.value = None
    _FLAG.active = False
    return torch.tanh(h)  # saves its result after the reset: eager's recomputation resets too


def _layer_resetting_after_its_last_save(x, w):
    _FLAG.value = x
    _FLAG.active = True
    y = torch.tanh(x @ w)
    # Eager's recomputation stops after tanh saved its result (early stop): these do not run
    # again in the backward, which leaves the flag set.
    _FLAG.value = None
    _FLAG.active = False
    return y


def _layer_that_leaves_a_flag(x, w):
    _FLAG.active = True
    return torch.tanh(x @ w)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("layer", [_layer_with_set_and_reset, _layer_resetting_after_its_last_save, _layer_that_leaves_a_flag])
def test_checkpoint_region_with_attribute_writes(layer, backend):
    from torch.utils.checkpoint import checkpoint

    def f(x, w):
        return checkpoint(layer, x, w, use_reentrant=False).sum()

    x, w = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    _FLAG.value, _FLAG.active = None, False
    want = f(x, w)
    (want_grad,) = torch.autograd.grad(want, w)
    want_state = (_FLAG.value, _FLAG.active)
    _FLAG.value, _FLAG.active = None, False
    dynamo.reset()
    explained = dynamo.explain(f)(x, w)
    _FLAG.value, _FLAG.active = None, False
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x, w)
    (got_grad,) = torch.autograd.grad(got, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)
    assert _FLAG.value is want_state[0] and _FLAG.active == want_state[1]
    breaks = 0 if layer is _layer_with_set_and_reset else 1
    assert explained.graph_break_count == breaks, explained.break_reasons


def test_llama_with_gradient_checkpointing_is_one_graph():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=37, max_position_embeddings=64)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg).train()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers 5 renames it (FutureWarning)
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(1, 99, (2, 9))
    dynamo.reset()
    explained = dynamo.explain(m)(input_ids=ids, labels=ids)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


# D2: on CPython 3.12+ a comprehension is inlined into its function (PEP 709) inside an
# exception-table entry that restores the loop variable, whose old value sits on the stack: NULL
# when it was unbound (LOAD_FAST_AND_CLEAR). A graph break in the comprehension's body refused
# that NULL ("try/with block opened in the middle of a call") and the whole frame ran as
# ordinary Python. The NULL is now pushed and dropped as one (Note [protected breaks]); on 3.11
# the comprehension is a function of its own and these already compiled.

def _comprehension_over_items(y):
    z = y * 2
    vals = [t.item() for t in z]
    return z + 1, vals


def _comprehension_restores_bound_variable(y):
    t = "outer"
    vals = [t.item() for t in y * 2]
    return vals, t


def _comprehension_raises_at_the_break(y):
    z = y + 1
    try:
        vals = [t.item() for t in z]  # rows of two elements: item() raises
    except RuntimeError as e:
        try:
            t
            bound = True
        except NameError:
            bound = False
        return z * 2, str(e), bound
    return vals


def _comprehension_raises_after_the_break(y):
    try:
        vals = [1 / t.item() for t in y]  # y[1] == 0: ZeroDivisionError in the resume function
    except ZeroDivisionError as e:
        try:
            t
            bound = True
        except NameError:
            bound = False
        return str(e), bound
    return vals


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f, make", [
    (_comprehension_over_items, lambda: (torch.arange(3.0),)),
    (_comprehension_restores_bound_variable, lambda: (torch.arange(3.0),)),
    (_comprehension_raises_at_the_break, lambda: (torch.ones(2, 2),)),
    (_comprehension_raises_after_the_break, lambda: (torch.tensor([1.0, 0.0, 2.0]),)),
])
def test_graph_break_inside_a_comprehension(f, make, backend):
    want, got, _, _, explained = _run(f, make, backend)
    assert _same(got, want), (got, want)
    assert explained.graph_count >= 1, explained.break_reasons
    assert dynamo.counters()["eager_fallbacks"] == 0


# C4: a set or frozenset of literals built in the frame came back from a frozenset among the
# transformed code's constants, which CPython remakes when it builds a code object (strings
# interned, through a tuple): another table, so members whose hashes collide iterated in
# another order than eager's (`set('ab')` under PYTHONHASHSEED=24), and a global frozenset
# came back as another object (Note [frozenset constants] in pycodegen).

_FROZEN = frozenset("ab")


def _sets_of_literals(x):
    return x + 1, _FROZEN, (_FROZEN, 1), frozenset("ab"), set("ab"), {"a", "b"}, set("the"), frozenset("xyz")


def test_returned_global_frozenset_is_the_same_object():
    dynamo.reset()
    got = dynamo.optimize("eager")(_sets_of_literals)(torch.ones(1))
    assert got[1] is _FROZEN and got[2][0] is _FROZEN


@pytest.mark.parametrize("seed", ["24", "1", "3", "17"])
def test_sets_of_literals_iterate_as_eager_under_hash_seeds(seed):
    import os
    import subprocess
    import sys

    code = (
        "import torch, dynamo, sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_audit_findings_s47 import _sets_of_literals as f\n"
        "order = lambda r: [list(v) if not isinstance(v, tuple) else list(v[0]) for v in r[1:]]\n"
        "want = order(f(torch.ones(1)))\n"
        "for bk in ('eager', 'inductor'):\n"
        "    dynamo.reset()\n"
        "    got = order(dynamo.optimize(bk)(f)(torch.ones(1)))\n"
        "    assert got == want, (bk, got, want)\n"
    ) % os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONHASHSEED=seed)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_gradients_read_before_and_after_clipping_in_one_graph(backend):
    # clip_grad_norm_ writes the gradients inside one graph op; reads of `p.grad` after it must
    # see the clipped values, reads before it the old ones.
    def f(m):
        before = torch.stack([p.grad.norm() for p in m.parameters()]).norm()
        total = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        after = torch.stack([p.grad.norm() for p in m.parameters()]).norm()
        return before, total, after, m[0].weight.grad * 1

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    me, mc = copy.deepcopy(m), copy.deepcopy(m)
    for mm in (me, mc):
        torch.manual_seed(1)
        mm(torch.randn(4, 8)).pow(2).sum().backward()
    dynamo.reset()
    want, got = f(me), dynamo.optimize(backend)(f)(mc)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)
    for p, q in zip(me.parameters(), mc.parameters()):
        torch.testing.assert_close(q.grad, p.grad)
    assert dynamo.counters()["graph_breaks"] == 0


def _dict_comprehension_with_a_break(y):
    z = y * 2
    d = {(i if i % 2 else float(i)) // 2: z[i].item() for i in range(5)}  # equal keys of two types
    return z + sum(d.values()), d


def _set_comprehension_with_a_break(y):
    z = y * 2
    s = {int(t.item()) % 3 for t in z}
    return z + len(s), sorted(s)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("f", [_dict_comprehension_with_a_break, _set_comprehension_with_a_break])
def test_dict_and_set_comprehensions_with_a_break(f, backend):
    # On 3.12+ the comprehension's dict reaches the resume function as an argument, and its
    # MAP_ADD is recorded as an insertion (before, that resume function ran as ordinary Python).
    # A set comprehension's resume function still does (SET_ADD to a set from outside the
    # frame), with eager's values.
    want, got, _, _, explained = _run(f, lambda: (torch.arange(5.0),), backend)
    assert _same(got, want), (got, want)
    if f is _dict_comprehension_with_a_break:
        assert dynamo.counters()["eager_fallbacks"] == 0
