"""Identity tests decided at trace time are guarded (Note [identity guards] in
src/symbolic/object_protocol.rs): a function compiled when `mode is Mode.EVAL` was false must
not keep answering false when it becomes true (new-user finding: enum members, module
attributes, Flag members, user objects, and two arguments that become one object)."""

import enum

import pytest
import torch
import torch.nn as nn

import dynamo


class CompileCounter:
    """A backend that counts the graphs it is given and runs them as traced."""

    def __init__(self):
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return gm.forward


class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Layer:
    pass


A, B = Layer(), Layer()


def by_enum(x, mode):
    if mode is Mode.EVAL:
        return -x
    return x + 1


def by_flag_eq(x, p):
    if p == Perm.WRITE:
        return -x
    return x + 1


def by_identity(x, layer):
    if layer is B:
        return -x
    return x + 1


def self_attn(q, k):
    if q is k:
        return q * 10
    return q + k


def same_list(x, a, b):
    if a is b:
        return x * len(a)
    return x - len(b)


def check(fn, first, second):
    cnt = CompileCounter()
    cf = dynamo.optimize(cnt)(fn)
    for args in (first, second, first, second):
        want = fn(*args)
        got = cf(*args)
        assert torch.equal(got, want), (args, got, want)
    return cnt


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


def test_enum_member_argument():
    x = torch.ones(2)
    cnt = check(by_enum, (x, Mode.TRAIN), (x, Mode.EVAL))
    assert cnt.frame_count == 2  # one graph per member, then cache hits


def test_flag_member_compared_with_eq():
    x = torch.ones(2)
    cnt = check(by_flag_eq, (x, Perm.READ), (x, Perm.WRITE))
    assert cnt.frame_count == 2


def test_user_object_identity():
    x = torch.ones(2)
    cnt = check(by_identity, (x, A), (x, B))
    assert cnt.frame_count == 2


def test_two_tensor_arguments_that_become_one():
    a, b = torch.ones(2), torch.zeros(2)
    cnt = check(self_attn, (a, b), (a, a))
    assert cnt.frame_count == 2


def test_two_list_arguments_that_become_one():
    x, l1, l2 = torch.ones(2), [1, 2], [3]
    cnt = check(same_list, (x, l1, l2), (x, l1, l1))
    assert cnt.frame_count == 2


def test_module_enum_attribute_changed_after_compile():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mode = Mode.TRAIN

        def forward(self, x):
            if self.mode == Mode.EVAL:
                return -x
            return x

    net, x = Net(), torch.ones(2)
    cnet = dynamo.optimize("eager")(net)
    assert torch.equal(cnet(x), x)
    net.mode = Mode.EVAL
    assert torch.equal(cnet(x), -x)


def test_is_none_on_objects_does_not_pin_them():
    """`o is None` is decided by o's type: a new object of the same class each call is a cache
    hit, not a recompile."""

    def f(x, o):
        if o is None:
            return x
        return x + 1

    cnt = CompileCounter()
    cf = dynamo.optimize(cnt)(f)
    for _ in range(3):
        assert torch.equal(cf(torch.ones(2), Layer()), torch.full((2,), 2.0))
    assert cnt.frame_count == 1


# ----- identity guards do not keep the user's objects alive ------------------------------------
# An ID_MATCH guard holds its object through a weak reference where the object takes one
# (GuardKind::IdMatchWeak in src/guards/mod.rs): the cache entry does not keep a module, an
# instance or a function alive after the user let go of it, and a dead object fails the guard.


class Tracked:
    deleted = []

    def __init__(self, k):
        self.k = k

    def __del__(self):
        Tracked.deleted.append(self.k)


def test_identity_guarded_object_dies_when_released():
    import gc
    import weakref

    def f(x, obj):
        return x + (1 if obj is PINNED[0] else 2)

    dynamo.reset()
    compiled = dynamo.optimize(CompileCounter())(f)
    gc.disable()
    try:
        PINNED[:] = [Tracked(1)]
        w = weakref.ref(PINNED[0])
        assert torch.equal(compiled(torch.zeros(2), PINNED[0]), torch.ones(2))
        assert "ID_MATCH" in "\n".join(dynamo._C.cached_guards(f.__code__))
        PINNED.clear()
        assert w() is None  # freed by reference counts alone, as eagerly
        assert Tracked.deleted == [1]
        PINNED[:] = [Tracked(2)]
        # A new object (perhaps at the old address) is not the dead one: the guard fails.
        assert torch.equal(compiled(torch.zeros(2), PINNED[0]), torch.ones(2))
        assert torch.equal(compiled(torch.zeros(2), Tracked(3)), torch.full((2,), 2.0))
    finally:
        PINNED.clear()
        gc.enable()


PINNED = []


def test_del_in_a_compiled_destructor_does_not_resurrect():
    # `__del__` itself is a frame the hook compiles; `id(self)` there is pinned by ID_MATCH.
    import gc

    log = []

    class P:
        def __del__(self):
            log.append(id(self) > 0)

    def fn(x):
        p = P()
        return x - 1

    dynamo.reset()
    compiled = dynamo.optimize("eager")(fn)
    compiled(torch.ones(2))
    gc.collect()
    assert log == [True]
    assert not [o for o in gc.get_objects() if type(o) is P]


def test_compiled_module_is_freed_after_del():
    import gc
    import weakref

    dynamo.reset()
    m = nn.Linear(4, 4)
    f = dynamo.optimize("inductor")(m)
    f(torch.randn(2, 4))
    w = weakref.ref(m)
    del m, f
    gc.collect()
    assert w() is None
