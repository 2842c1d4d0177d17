"""Note [input plans] (src/py/input_plan.rs): a graph whose inputs are read through chains of
attribute and item loads (a module's parameters) gets them from one `InputPlan` call. The
inputs must be exactly the objects the bytecode loads would give: the same tensors, the new
ones after the module changes, and the same exceptions when a read fails."""

import torch

import dynamo
from dynamo import _C


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 4), "b": torch.nn.Linear(4, 4)})
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.register_buffer("shift", torch.arange(4.0))

    def forward(self, x):
        x = self.inner["a"](x) + self.inner["b"](x)
        for layer in self.layers:
            x = layer(x).relu()
        return x + self.shift


def plans_in(fn):
    return [c for code in _C.cached_code(fn.__code__) for c in code.co_consts if isinstance(c, _C.InputPlan)]


def test_parameters_come_from_one_plan_and_equal_eager():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(2, 4)
    opt = dynamo.optimize("inductor")(m)
    assert torch.allclose(opt(x), m(x), atol=1e-6)
    plans = plans_in(type(m).forward)
    assert len(plans) == 1
    # x, 5 Linear layers x 2 parameters and the buffer: 12 inputs from the roots self and x,
    # their shared links (self.inner, self.layers, self.layers[k], ...) read once: 18 reads.
    assert "12 inputs from 2 roots in 18 reads" in repr(plans[0])


def test_plan_reads_the_new_objects_after_the_module_changes():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(2, 4)
    opt = dynamo.optimize("eager")(m)
    opt(x)
    with torch.no_grad():
        m.layers[1].weight.mul_(2)  # in place: same object, new values
    m.inner["b"].bias = torch.nn.Parameter(torch.ones(4))  # a new object
    m.shift = torch.full((4,), 3.0)
    assert torch.equal(opt(x), m(x))


def test_plan_with_a_root_per_argument_and_global():
    weights = {"w": torch.ones(3), "v": torch.full((3,), 2.0)}

    class Holder:
        pass

    h = Holder()
    h.items = [torch.ones(3) * k for k in range(6)]

    def f(x, d, o):
        return x * d["w"] + d["v"] + sum(o.items[k] for k in range(6)) + weights["w"]

    x = torch.arange(3.0)
    d = {"w": torch.full((3,), 5.0), "v": torch.ones(3)}
    opt = dynamo.optimize("eager")(f)
    assert torch.equal(opt(x, d, h), f(x, d, h))
    h.items[4] = torch.full((3,), 100.0)
    assert torch.equal(opt(x, d, h), f(x, d, h))
    assert len(plans_in(f)) == 1


def test_plan_is_off_below_its_threshold():
    m = torch.nn.Linear(2, 2)
    opt = dynamo.optimize("eager")(m)
    opt(torch.ones(1, 2))
    assert plans_in(type(m).forward) == []


def test_input_plan_reads_as_bytecode_does():
    # A plan built by hand: roots, shared links, errors of a failing read.
    class O:
        pass

    o = O()
    o.a = O()
    o.a.t = (10, 20)
    o.a.d = {"k": 7}
    chains = [
        (0, [("attr", "a"), ("attr", "t"), ("item", 1)]),
        (0, [("attr", "a"), ("attr", "d"), ("dict", "k")]),
        (0, [("attr", "a"), ("attr", "__class__")]),
    ]
    plan = _C._input_plan_for_tests(1, chains)
    assert "3 inputs from 1 roots in 6 reads" in repr(plan)  # o.a read once, not 3 times
    assert plan(o) == (O, 7, 20)
    del o.a.t
    try:
        plan(o)
    except AttributeError as e:
        assert "'O' object has no attribute 't'" in str(e)
    else:
        raise AssertionError("a failed read must raise")
