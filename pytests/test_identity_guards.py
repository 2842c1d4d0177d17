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
