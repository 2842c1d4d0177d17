"""The guard check's fast paths keep every guard's meaning (src/guards/mod.rs): NO_ATTR on an
nn.Module answered from its dicts without running `nn.Module.__getattr__`, NO_INSTANCE_ATTR with
interned names, DICT_KEYS by key identity (Note [fast dict keys check]), and the test-only timer
`dynamo._C.time_guards` (Note [guard check timing]). Each test changes what a guard protects and
expects a recompile and eager's answer; where the change keeps the guard's condition true (equal
keys in new objects), it expects a cache hit."""

import builtins

import pytest
import torch
import torch.nn as nn

import dynamo


class Sub(nn.Module):
    def forward(self, x):
        return x + 1


class HasAttr(nn.Module):
    """Branches on `hasattr(self.sub, "extra")`: a NO_ATTR guard on `self.sub`."""

    def __init__(self):
        super().__init__()
        self.sub = Sub()

    def forward(self, x):
        if hasattr(self.sub, "extra"):
            return self.sub(x) * 3
        return self.sub(x)


def guards_of(fn):
    """The guard texts of `fn`'s most recent cache entry."""
    return dynamo._C.cached_guards(fn.__code__)[0].splitlines()


def recompiles():
    return dynamo.counters()["recompiles"]


@pytest.mark.parametrize("how", ["parameter", "buffer", "submodule", "instance", "class"])
def test_no_attr_on_a_module_sees_each_way_the_attribute_appears(how):
    dynamo.reset()
    m = HasAttr()
    fast = dynamo.optimize("eager")(m)
    x = torch.ones(2)
    assert torch.equal(fast(x), x + 1)
    assert any(g.startswith("NO_ATTR: not hasattr(L['self'].sub, 'extra')") for g in guards_of(HasAttr.forward))
    assert torch.equal(fast(x), x + 1) and recompiles() == 0
    if how == "parameter":
        m.sub.register_parameter("extra", nn.Parameter(torch.zeros(1)))
    elif how == "buffer":
        m.sub.register_buffer("extra", torch.zeros(1))
    elif how == "submodule":
        m.sub.extra = nn.Identity()
    elif how == "instance":
        object.__setattr__(m.sub, "extra", 1)
    else:
        Sub.extra = 1
    try:
        assert hasattr(m.sub, "extra")
        assert torch.equal(fast(x), m(x)) and torch.equal(m(x), (x + 1) * 3)
        assert recompiles() == 1
    finally:
        if how == "class":
            del Sub.extra


def test_no_instance_attr_sees_forward_set_on_the_instance():
    dynamo.reset()
    m = HasAttr()
    fast = dynamo.optimize("eager")(m)
    x = torch.ones(2)
    assert torch.equal(fast(x), x + 1)
    assert "NO_INSTANCE_ATTR: 'forward' not in L['self'].sub.__dict__" in guards_of(HasAttr.forward)
    m.sub.forward = lambda x: x - 5
    assert torch.equal(fast(x), m(x)) and torch.equal(m(x), x - 5)
    assert recompiles() == 1


CFG = {"a": 1, "b": 2}


def sum_cfg(x):
    for k, v in CFG.items():
        x = x + v * len(k)
    return x


def compiled_sum_cfg():
    dynamo.reset()
    global CFG
    CFG = {"a": 1, "b": 2}
    fast = dynamo.optimize("eager")(sum_cfg)
    x = torch.zeros(2)
    assert torch.equal(fast(x), sum_cfg(x))
    assert "DICT_KEYS: list(G['CFG'].keys()) == ['a', 'b']" in guards_of(sum_cfg)
    return fast, x


def test_dict_keys_equal_keys_in_new_objects_hit_the_cache():
    global CFG
    fast, x = compiled_sum_cfg()
    # Equal str keys that are other objects than the recorded ones: the identity walk fails, the
    # slow comparison passes.
    a, b = "".join(["a"]), "".join(["b"])
    CFG = {a: 1, b: 2}
    assert torch.equal(fast(x), sum_cfg(x)) and recompiles() == 0


@pytest.mark.parametrize("change", ["reordered", "key added", "key removed", "key renamed", "subclass", "longer key"])
def test_dict_keys_change_recompiles(change):
    global CFG
    fast, x = compiled_sum_cfg()

    class D(dict):
        pass

    if change == "reordered":
        CFG = {"b": 2, "a": 1}
    elif change == "key added":
        CFG["c"] = 3
    elif change == "key removed":
        del CFG["b"]
    elif change == "key renamed":
        CFG = {"a": 1, "bb": 2}
    elif change == "subclass":
        CFG = D(a=1, b=2)
    else:
        # Same size and first key object, the second key changed in place of the dict.
        del CFG["b"]
        CFG["bbb"] = 2
    assert torch.equal(fast(x), sum_cfg(x))
    assert recompiles() == 1


def test_dict_keys_of_equal_value_and_another_type_recompile():
    dynamo.reset()
    table = {1: 10, 2: 20}

    def f(x):
        for k in table:
            x = x + k
        return x

    fast = dynamo.optimize("eager")(f)
    x = torch.zeros(2)
    assert torch.equal(fast(x), f(x))
    assert any(g.startswith("DICT_KEYS") for g in guards_of(f))
    table.clear()
    table[1.0] = 10
    table[2] = 20
    assert torch.equal(fast(x), f(x)) and fast(x).dtype == torch.float32
    assert recompiles() == 1


def test_time_guards_runs_the_cache_entry_check():
    dynamo.reset()
    m = HasAttr()
    fast = dynamo.optimize("eager")(m)
    x = torch.ones(2)
    fast(x)
    fn = HasAttr.forward
    whole, steps, guards = dynamo._C.time_guards(fn.__code__, [m, x], fn.__closure__, fn.__globals__, builtins.__dict__, 10)
    assert whole > 0
    assert [g for g, _ in guards] == guards_of(fn)
    assert any(s.startswith("LOCAL L['self']") for s, _ in steps)
    # Another kind of object in a slot fails the check with its reason (another instance of
    # the class passes: Note [modules guarded by type]).
    dynamo._C.time_guards(fn.__code__, [HasAttr(), x], fn.__closure__, fn.__globals__, builtins.__dict__, 10)
    with pytest.raises(ValueError, match="TYPE_MATCH"):
        dynamo._C.time_guards(fn.__code__, [nn.Linear(2, 2), x], fn.__closure__, fn.__globals__, builtins.__dict__, 10)
    with pytest.raises(ValueError, match="no cache entry"):
        dynamo._C.time_guards(sum_cfg.__code__, [x], None, sum_cfg.__globals__, builtins.__dict__, 10)


# Chains through closure cells, bound methods, dict values and default tuples (most of a
# transformers model's guard sources) still see each link change.

def test_closure_cell_rebound_recompiles():
    dynamo.reset()
    scale = 2

    def helper(x):
        return x * scale

    def f(x):
        return helper(x) + 1

    fast = dynamo.optimize("eager")(f)
    x = torch.ones(2)
    assert torch.equal(fast(x), f(x))
    assert any("cell_contents" in g for g in guards_of(f))
    scale = 5  # noqa: F841 - read through helper's closure cell
    assert torch.equal(fast(x), f(x)) and torch.equal(f(x), x * 5 + 1)
    assert recompiles() == 1


def test_dict_value_and_default_tuple_item_changes_recompile():
    global CFG
    fast, x = compiled_sum_cfg()
    CFG["b"] = 7
    assert torch.equal(fast(x), sum_cfg(x)) and recompiles() == 1

    dynamo.reset()

    def g(x, k=3, m=4):
        return x * k + m

    def f(x):
        return g(x)

    fast = dynamo.optimize("eager")(f)
    assert torch.equal(fast(x), f(x))
    g.__defaults__ = (3, 9)
    assert torch.equal(fast(x), f(x)) and torch.equal(f(x), x * 3 + 9)
    assert recompiles() == 1


def test_bound_method_function_replaced_on_the_instance_recompiles():
    dynamo.reset()

    class A:
        def get(self):
            return 2

    a = A()
    bound = a.get

    def f(x):
        return x * bound()

    fast = dynamo.optimize("eager")(f)
    x = torch.ones(2)
    assert torch.equal(fast(x), x * 2)
    bound = A().get  # another bound method of the same function: no recompile needed
    A.get = lambda self: 3
    bound = a.get  # a bound method of another function
    assert torch.equal(fast(x), f(x)) and torch.equal(f(x), x * 3)
    assert recompiles() >= 1


# Note [default device fast path]: the default-device guard answers "cpu" without calling
# torch.get_default_device() only when no mode and no global device context is set.

def factory(x):
    return x + 1, torch.zeros(2)


def compiled_factory():
    dynamo.reset()
    fast = dynamo.optimize("eager")(factory)
    x = torch.ones(2)
    out = fast(x)
    assert out[1].device.type == "cpu"
    assert "GLOBAL_STATE: torch.get_default_device() == device(type='cpu')" in guards_of(factory)
    assert fast(x)[1].device.type == "cpu" and recompiles() == 0
    return fast, x


def test_default_device_context_manager_recompiles():
    fast, x = compiled_factory()
    with torch.device("meta"):
        out = fast(x)
    assert out[1].device.type == "meta" and recompiles() == 1
    assert fast(x)[1].device.type == "cpu"


def test_set_default_device_recompiles():
    fast, x = compiled_factory()
    torch.set_default_device("meta")
    try:
        out = fast(x)
    finally:
        torch.set_default_device(None)
    assert out[1].device.type == "meta" and recompiles() == 1
    assert fast(x)[1].device.type == "cpu"


def test_default_device_cpu_under_a_context_still_hits():
    fast, x = compiled_factory()
    # A DeviceContext for cpu: the fast path steps aside, the call answers cpu, the entry holds.
    with torch.device("cpu"):
        assert fast(x)[1].device.type == "cpu"
    assert recompiles() == 0
