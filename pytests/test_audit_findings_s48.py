"""Findings of stop 48's testers: each is the smallest program that differed from eager, run
eagerly and compiled and compared exactly (values, types, identity, effects), with graph counts
that show the code was captured."""

import collections
import enum

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]

# E1/E2: an instance of a user subclass of int, float, str or tuple (an IntEnum member with a
# method, a namedtuple subclass with a method) was a constant: its Python methods, properties
# and operators ran once, at compile time, and their results (and the objects they returned)
# were reused on every call. Note [subclasses of literal types] in src/symbolic/builder.rs.

STATE = {"k": 1}
EFFECTS = []


class RInt(int):
    def scale(self):
        EFFECTS.append("scale")
        return int(self) * STATE["k"]

    @property
    def twice(self):
        return int(self) * 2 * STATE["k"]

    def __neg__(self):
        return STATE["k"]

    def __bool__(self):
        return STATE["k"] != 2


class RFloat(float):
    def scale(self):
        return float(self) * STATE["k"]


class RStr(str):
    def __add__(self, other):
        EFFECTS.append("add")
        return str(STATE["k"]) + other

    def upper(self):
        return "U" * STATE["k"]

    def __len__(self):
        return STATE["k"]


class RTuple(tuple):
    def __getitem__(self, i):
        return STATE["k"]

    def __iter__(self):
        return iter([STATE["k"]] * 2)

    def __contains__(self, v):
        return STATE["k"] == 2


class Pair(collections.namedtuple("Pair", "a b")):
    def scale(self):
        return self.a * STATE["k"]


class Level(enum.IntEnum):
    LOW = 2

    def scale(self):
        return self.value * STATE["k"]


class Mode(str, enum.Enum):
    FAST = "fast"

    def tag(self):
        return self.value * STATE["k"]


CASES = [
    ("int_method", lambda x, o: x * o.scale(), RInt(2)),
    ("int_property", lambda x, o: x * o.twice, RInt(2)),
    ("int_neg", lambda x, o: x * -o, RInt(2)),
    ("int_bool", lambda x, o: x * 2 if o else x * 3, RInt(2)),
    ("float_method", lambda x, o: x * o.scale(), RFloat(1.5)),
    ("str_add", lambda x, o: (x + 1, o + "z"), RStr("a")),
    ("str_method", lambda x, o: (x + 1, o.upper()), RStr("a")),
    ("str_len", lambda x, o: x * len(o), RStr("a")),
    ("tuple_getitem", lambda x, o: x * o[0], RTuple((1, 1))),
    ("tuple_iter", lambda x, o: x * sum(a for a in o), RTuple((1, 1))),
    ("tuple_contains", lambda x, o: x * (1 in o), RTuple((1, 1))),
    ("namedtuple_subclass_method", lambda x, o: x * o.scale(), Pair(2, 0)),
    ("int_enum_method", lambda x, o: x * o.scale(), Level.LOW),
    ("str_enum_method", lambda x, o: (x + 1, o.tag()), Mode.FAST),
]


def _plain(r):
    if isinstance(r, tuple):
        return tuple(_plain(v) for v in r)
    if isinstance(r, torch.Tensor):
        return r.tolist()
    return (type(r), r)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,f,arg", CASES, ids=[c[0] for c in CASES])
def test_methods_of_literal_subclasses_run_on_every_call(name, f, arg, backend):
    dynamo.reset()
    compiled = dynamo.optimize(backend)(f)
    try:
        for k in (1, 2, 3):
            STATE["k"] = k
            EFFECTS.clear()
            want = _plain(f(torch.ones(3), arg))
            want_effects = list(EFFECTS)
            EFFECTS.clear()
            got = _plain(compiled(torch.ones(3), arg))
            assert got == want, f"k={k}"
            assert EFFECTS == want_effects, f"k={k}"
    finally:
        STATE["k"] = 1
    assert dynamo.counters()["graphs"] >= 1


class MyInt(int):
    def double(self):
        return MyInt(self * 2)


class MyStr(str):
    def twice(self):
        return MyStr(self + self)


class MyTup(tuple):
    def ext(self):
        return MyTup(self + (1,))


def _builds_new_objects(x):
    i = MyInt(7)
    s = MyStr("a")
    t = MyTup((1,))
    return x * i, i.double(), s.twice(), t.ext()


@pytest.mark.parametrize("backend", BACKENDS)
def test_objects_returned_by_such_methods_are_new_each_call(backend):
    dynamo.reset()
    compiled = dynamo.optimize(backend)(_builds_new_objects)
    a = compiled(torch.ones(2))
    b = compiled(torch.ones(2))
    assert [type(v) for v in a[1:]] == [MyInt, MyStr, MyTup]
    assert a[1:] == (14, "aa", (1, 1))
    assert all(u is not v for u, v in zip(a[1:], b[1:]))
    a[1].tag = "leak"
    assert not hasattr(compiled(torch.ones(2))[1], "tag")


PlainPair = collections.namedtuple("PlainPair", "a b")


class PlainLevel(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize("value", [torch.Size([2, 3]), PlainPair(1, 2), PlainLevel.HIGH, True, 3, "s", (1, "a")])
def test_fixed_objects_stay_constants(value):
    # C types, namedtuples and enum members without methods of their own are still folded:
    # one graph, no break, and the object itself comes back.
    def f(x, v):
        return x + 1, v

    dynamo.reset()
    out = dynamo.optimize("eager")(f)(torch.ones(1), value)
    assert out[1] is value
    assert (dynamo.counters()["graphs"], dynamo.counters()["graph_breaks"]) == (1, 0)


def test_int_enum_method_is_traced_without_a_break():
    def f(x, o):
        return x * o.scale()

    dynamo.reset()
    compiled = dynamo.optimize("eager")(f)
    assert torch.equal(compiled(torch.ones(2), Level.LOW), torch.full((2,), 2.0))
    assert (dynamo.counters()["graphs"], dynamo.counters()["graph_breaks"]) == (1, 0)


# F2/F4: a tensor live at a graph break but off the loss path (used after the break only for
# its shape or `.item()`) is an output of the differentiable graph that gets no gradient. Its
# tangent was filled with zeros and multiplied through its branch of the backward: `0 * inf`
# made NaN input gradients where eager's are inf, and an op without a derivative
# (`floor_divide`) made backward raise where eager never reaches it. Note [zero tangents] in
# python/dynamo/aot.py.


def _statistic_only_logged(x):
    y = x.log()
    aux = (y * y).sum()
    dynamo.graph_break()
    return y, aux.item()


def _shape_only(x):
    y = x.log()
    z = y**3
    dynamo.graph_break()
    return y, z.shape


def _no_derivative_off_the_loss_path(x):
    y = x.abs()
    z = x // 2
    dynamo.graph_break()
    return y, z.shape


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("f,values", [
    (_statistic_only_logged, [0.0, -2.0, 3.0]),
    (_shape_only, [0.0, -2.0, 3.0]),
    (_no_derivative_off_the_loss_path, [1.5, -2.5]),
])
def test_outputs_without_gradient_add_nothing_to_backward(f, values, backend):
    want_x = torch.tensor(values, requires_grad=True)
    want = f(want_x)
    want[0].sum().backward()
    dynamo.reset()
    for _ in range(2):
        got_x = torch.tensor(values, requires_grad=True)
        got = dynamo.optimize(backend)(f)(got_x)
        got[0].sum().backward()
        torch.testing.assert_close(got[0].detach(), want[0].detach(), rtol=0, atol=0, equal_nan=True)
        assert got[1] == want[1] or (got[1] != got[1] and want[1] != want[1])
        torch.testing.assert_close(got_x.grad, want_x.grad, rtol=1e-6, atol=0, equal_nan=True)
    assert dynamo.counters()["aot_graphs"] >= 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_both_outputs_with_gradients_still_sum(backend):
    # The rewritten backward is used only for the outputs that got none.
    def f(x):
        y = x.log()
        aux = (y * y).sum()
        return y, aux

    x0 = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    y, aux = f(x0)
    (y.sum() + aux).backward()
    dynamo.reset()
    x1 = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    y1, aux1 = dynamo.optimize(backend)(f)(x1)
    (y1.sum() + aux1).backward()
    assert torch.allclose(x1.grad, x0.grad)


# F3: relu and hardtanh passed a zero gradient at a NaN input, where ATen's threshold_backward
# and hardtanh_backward pass the incoming gradient on (they zero only where the comparison
# holds).

@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("f", [
    lambda x: x.relu(),
    lambda x: torch.relu(x * 2),
    lambda x: torch.nn.functional.hardtanh(x),
    lambda x: torch.nn.functional.hardtanh(x, -0.5, 2.0),
], ids=["relu", "relu_of_product", "hardtanh", "hardtanh_bounds"])
def test_relu_and_hardtanh_backward_at_nan(f, backend):
    values = [float("nan"), 0.5, -2.0, 0.0, 1.0, -1.0, 2.0, float("inf")]
    want_x = torch.tensor(values, requires_grad=True)
    f(want_x).sum().backward()
    dynamo.reset()
    got_x = torch.tensor(values, requires_grad=True)
    dynamo.optimize(backend)(f)(got_x).sum().backward()
    assert got_x.grad.tolist() == want_x.grad.tolist()


# G1: inductor fused a read of a batch norm's running statistics made before a training-mode
# call with a read made after it into one kernel that ran before the call (which updates them
# in place, through torch): the read after saw the old statistics, and an eval-mode norm after
# a training one in the same graph normalized with them. Note [fallbacks that write their
# inputs] in src/inductor/lowering.rs.


def _eval_train_eval(bn, x1, x2, x3):
    bn.eval()
    y1 = bn(x1)
    bn.train()
    y2 = bn(x2)
    bn.eval()
    y3 = bn(x3)
    bn.train()
    return y1, y2, y3


def _read_before_and_after(bn, x):
    before = bn.running_mean + 0
    bn(x)
    return before, bn.running_mean * 2, bn.running_var.sum()


def _two_updates_with_reads(x, rm, rv):
    a = torch.nn.functional.batch_norm(x, rm, rv, training=True)
    r1 = rm * 1
    b = torch.nn.functional.batch_norm(x * 2, rm, rv, training=True)
    return a, r1, b, rm * 1, rv + 0


def _instance_norm_stats(m, x):
    b = m.running_mean + 0
    y = m(x)
    return b, y, m.running_mean * 1


def _bn_case(f):
    torch.manual_seed(0)
    if f is _eval_train_eval:
        return (torch.nn.BatchNorm1d(4),) + tuple(torch.randn(8, 4) + 3 for _ in range(3))
    if f is _read_before_and_after:
        return torch.nn.BatchNorm1d(4), torch.randn(8, 4) + 3
    if f is _two_updates_with_reads:
        return torch.randn(8, 4) + 2, torch.zeros(4), torch.ones(4)
    return torch.nn.InstanceNorm1d(4, track_running_stats=True), torch.randn(2, 4, 6) + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [_eval_train_eval, _read_before_and_after, _two_updates_with_reads, _instance_norm_stats])
def test_reads_of_running_stats_around_a_training_norm(f, backend):
    want_args = _bn_case(f)
    want = f(*want_args)
    dynamo.reset()
    got_args = _bn_case(f)
    got = dynamo.optimize(backend)(f)(*got_args)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    for a, b in zip(got_args, want_args):
        if isinstance(a, torch.nn.Module):
            for (_, u), (_, v) in zip(a.named_buffers(), b.named_buffers()):
                torch.testing.assert_close(u, v)
        else:
            torch.testing.assert_close(a, b)
    assert dynamo.counters()["graphs"] == 1


# E5/E6/E7: an iterable object without `__len__` was counted by `len()` (eager raises
# TypeError), `'{}'.format(o)` of an iterable object formatted its items as a list (only
# `str.join` takes an iterable), and `len()` of an itertools object named the type without its
# module.


class _Iterable:
    def __iter__(self):
        return iter([1, 2])

    def __str__(self):
        return "O!"


def _len_of_iterable(x, o):
    try:
        n = len(o)
    except TypeError as e:
        return x * -1, str(e)
    return x * n, ""


def _format_of_iterable(x, o):
    return x + 1, "{}".format(o), "v={}".format(o), "{0!s}".format(o), f"{o}", ",".join(map(str, [1, 2])), "-".join(["a", "b"])


def _len_of_chain(x):
    import itertools

    try:
        return x * len(itertools.chain([1], [2])), ""
    except TypeError as e:
        return x + 1, str(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f,args", [
    (_len_of_iterable, lambda: (torch.ones(2), _Iterable())),
    (_format_of_iterable, lambda: (torch.ones(2), _Iterable())),
    (_len_of_chain, lambda: (torch.ones(2),)),
], ids=["len", "format", "len_chain"])
def test_iterable_objects_are_not_their_items(f, args, backend):
    want = f(*args())
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(*args())
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert dynamo.counters()["graphs"] == 1


# E12: `print("step %d" % i)` or `"step {}".format(i)` with the step counter an argument
# guarded the counter's value: every step recompiled, and after eight the frame ran eagerly for
# good (an f-string did not). Note [lazy string formatting] in src/symbolic/translator.rs.


def _print_percent(x, i):
    print("step %d" % i)
    return x + 1


def _print_format(x, i):
    print("step {} of {}".format(i, "n"))
    return x + 1


def _print_method_descriptor(x, i):
    print(str.format("[{:>4}]", i))
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [_print_percent, _print_format, _print_method_descriptor])
def test_formatting_a_step_counter_does_not_recompile(f, backend, capsys):
    for i in range(12):
        f(torch.ones(1), i)
    want = capsys.readouterr().out
    dynamo.reset()
    compiled = dynamo.optimize(backend)(f)
    for i in range(12):
        assert torch.equal(compiled(torch.ones(1), i), torch.ones(1) + 1)
    assert capsys.readouterr().out == want
    c = dynamo.counters()
    assert c["cache_limit_hits"] == 0 and c["compiles"] <= 3, dict(c)


def _format_then_use(x, i):
    s = "%d" % i
    t = "<{}>".format(i)
    return x + 1, s, t, s == "3"


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_strings_are_guarded_when_used(backend):
    # Compared inside the frame, the string's value decides: its argument is guarded.
    dynamo.reset()
    compiled = dynamo.optimize(backend)(_format_then_use)
    for i in (3, 4, 3, 5):
        got = compiled(torch.ones(1), i)
        assert got[1:] == _format_then_use(torch.ones(1), i)[1:]


# G2: ops called through `torch.ops` (aten's, or a `torch.library.custom_op`'s through the
# packet, an overload or the decorated function) broke the graph: transformers routes its MoE
# experts through `torch.ops.transformers.grouped_mm_fallback`.


@torch.library.custom_op("dynamo_s48::scale_add", mutates_args=())
def _scale_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


@_scale_add.register_fake
def _(x, y):
    return torch.empty_like(x)


def _through_torch_ops(x, y):
    a = x.sin()
    b = torch.ops.dynamo_s48.scale_add(a, y)
    c = torch.ops.dynamo_s48.scale_add.default(b, y)
    d = _scale_add(c, y)
    return d.cos() + torch.ops.aten.sin(x) + torch.ops.aten.cos.default(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_ops_are_graph_ops(backend):
    x, y = torch.randn(4), torch.randn(4)
    want = _through_torch_ops(x, y)
    dynamo.reset()
    got = dynamo.optimize(backend)(_through_torch_ops)(x, y)
    torch.testing.assert_close(got, want)
    assert (dynamo.counters()["graphs"], dynamo.counters()["graph_breaks"]) == (1, 0)


# E3: `match mode: case Mode.TRAIN:` dropped its copy of the subject with a POP_TOP that was
# taken for the last reference of an object with a weak reference (the identity guard's own):
# the whole frame ran eagerly.


class _Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


def _match_member(x, mode):
    match mode:
        case _Mode.TRAIN:
            y = x * 2
        case _Mode.EVAL:
            y = x * 3
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_match_on_enum_members_is_captured(backend):
    dynamo.reset()
    compiled = dynamo.optimize(backend)(_match_member)
    for mode in (_Mode.TRAIN, _Mode.EVAL, _Mode.TRAIN):
        assert torch.equal(compiled(torch.ones(2), mode), _match_member(torch.ones(2), mode))
    assert dynamo.counters()["graphs"] == 2 and dynamo.counters()["eager_fallbacks"] == 0


# G3: a module whose `forward` is decorated with `@torch.no_grad()` (transformers' M2M100 and
# NLLB sinusoidal position embeddings) broke the graph where a decorated function did not.


class _PositionEmbedding(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x):
        return torch.arange(x.shape[1]).float()[None, :, None].expand_as(x) * 0.1


class _WithPositions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pe = _PositionEmbedding()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        p = self.pe(x)
        return self.lin(x + p).relu().sum(), p.requires_grad, torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_decorated_forward_is_captured(backend):
    torch.manual_seed(0)
    m = _WithPositions()
    x = torch.randn(2, 3, 4)
    want = m(x)
    want[0].backward()
    want_grad = m.lin.weight.grad.clone()
    m.zero_grad()
    dynamo.reset()
    got = dynamo.optimize(backend)(m)(x)
    got[0].backward()
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    torch.testing.assert_close(m.lin.weight.grad, want_grad)
    assert (dynamo.counters()["graphs"], dynamo.counters()["graph_breaks"]) == (1, 0)


# F8: `create_graph=True` through a graph with an input that requires grad but reaches the
# output only through `detach()`, a comparison or a `where` condition (a gradient penalty's
# target) raised "One of the differentiated Tensors does not require grad": the double-backward
# rerun asked for the gradient of the detached copy that input is given to the graph as.


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("f", [
    lambda x, y: (x * y.detach()).sum(),
    lambda x, y: (x * (y > 0)).sum(),
    lambda x, y: torch.where(y > 0, x, -x).sum(),
    lambda x, y: torch.nn.functional.mse_loss(x, y.detach()) + (x * y).sum(),
], ids=["detach", "comparison", "where", "mixed"])
def test_create_graph_with_an_input_used_without_gradient(f, backend):
    def make():
        return torch.tensor([0.5, -1.0, 2.0], requires_grad=True), torch.tensor([1.0, -1.0, -0.3], requires_grad=True)

    x, y = make()
    want = torch.autograd.grad(f(x, y), (x,), create_graph=True)[0]
    want2 = torch.autograd.grad(want.sum(), (x, y), allow_unused=True) if want.requires_grad else None
    dynamo.reset()
    x, y = make()
    got = torch.autograd.grad(dynamo.optimize(backend)(f)(x, y), (x,), create_graph=True)[0]
    torch.testing.assert_close(got, want)
    assert got.requires_grad == want.requires_grad
    if want2 is not None:
        got2 = torch.autograd.grad(got.sum(), (x, y), allow_unused=True)
        for a, b in zip(got2, want2):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)


# F7: the double backward of a graph calling `F.normalize` was refused (its name was taken for
# `torch.normal`'s, a random op whose rerun would differ), and the refusal's error node is not
# reached from the inputs: `autograd.grad(..., allow_unused=True)` gave None for the second
# derivative.


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_double_backward_through_normalize(backend):
    def f(x):
        return torch.nn.functional.normalize(x, dim=0)

    w = torch.tensor([1.0, 2.0, 3.0])
    x = torch.tensor([3.0, 4.0, 1.0], requires_grad=True)
    g = torch.autograd.grad((f(x) * w).sum(), x, create_graph=True)[0]
    want = torch.autograd.grad(g.sum(), x, allow_unused=True)[0]
    dynamo.reset()
    x = torch.tensor([3.0, 4.0, 1.0], requires_grad=True)
    g1 = torch.autograd.grad((dynamo.optimize(backend)(f)(x) * w).sum(), x, create_graph=True)[0]
    got = torch.autograd.grad(g1.sum(), x, allow_unused=True)[0]
    torch.testing.assert_close(g1, g)
    assert got is not None
    torch.testing.assert_close(got, want)


# E8: a function's `__name__`, `__qualname__`, `__doc__` and `__module__` read in the frame were
# folded without a guard: renaming the function later was not seen.


def _renamed_helper():
    pass


def _reads_helper_names(x):
    h = _renamed_helper
    return x + 1, h.__name__, h.__qualname__, h.__doc__, h.__module__


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_names_are_guarded(backend):
    dynamo.reset()
    compiled = dynamo.optimize(backend)(_reads_helper_names)
    old = (_renamed_helper.__name__, _renamed_helper.__qualname__, _renamed_helper.__doc__, _renamed_helper.__module__)
    try:
        for k in (1, 2, 2):
            _renamed_helper.__name__, _renamed_helper.__qualname__ = f"h{k}", f"q{k}"
            _renamed_helper.__doc__, _renamed_helper.__module__ = f"d{k}", f"m{k}"
            assert compiled(torch.ones(1))[1:] == _reads_helper_names(torch.ones(1))[1:]
    finally:
        (_renamed_helper.__name__, _renamed_helper.__qualname__, _renamed_helper.__doc__, _renamed_helper.__module__) = old
    assert dynamo.counters()["compiles"] == 2
