"""Growing or reordering a module container after a compile recompiles (issue 7, nn.Module kinds).

A `ModuleList`/`Sequential`/`ModuleDict` that the frame iterates or takes `len()` of is the same
object after `append`/`update`/`del`, so its identity guard still holds; the trace depends on
its children's names and order, which are now guarded (`DICT_KEYS` on `._modules`). Before, the
old graph kept running: a silent wrong result (found by a new-user run).
"""

import pytest
import torch
import torch.nn as nn

import dynamo


class Counter:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


class Loop(nn.Module):
    def __init__(self, container):
        super().__init__()
        self.layers = container

    def forward(self, x):
        if isinstance(self.layers, nn.ModuleDict):
            for name in self.layers:
                x = self.layers[name](x)
        else:
            for layer in self.layers:
                x = layer(x)
        return x * len(self.layers)


def _grow(container):
    if isinstance(container, nn.ModuleDict):
        container.update({"b": nn.Linear(3, 3)})
    else:
        container.append(nn.Linear(3, 3))


@pytest.mark.parametrize("kind", ["ModuleList", "Sequential", "ModuleDict"])
@pytest.mark.parametrize("backend", ["counter", "aot_eager", "inductor"])
def test_appending_a_child_recompiles(kind, backend):
    torch.manual_seed(0)
    container = {"ModuleList": lambda: nn.ModuleList([nn.Linear(3, 3)]),
                 "Sequential": lambda: nn.Sequential(nn.Linear(3, 3)),
                 "ModuleDict": lambda: nn.ModuleDict({"a": nn.Linear(3, 3)})}[kind]()
    m = Loop(container)
    cnt = Counter()
    opt = dynamo.optimize(cnt if backend == "counter" else backend)(m)
    x = torch.randn(2, 3)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
        _grow(container)
        torch.testing.assert_close(opt(x), m(x))
        torch.testing.assert_close(opt(x), m(x))
        # Removing the new child again: the first graph's guards hold once more.
        if kind == "ModuleDict":
            del container["b"]
        else:
            del container[1]
        torch.testing.assert_close(opt(x), m(x))
    if backend == "counter":
        assert cnt.graphs == 2


def test_len_of_a_module_list_is_guarded():
    layers = nn.ModuleList([nn.Identity()])

    def f(x):
        return x * len(layers)

    cnt = Counter()
    opt = dynamo.optimize(cnt)(f)
    x = torch.ones(2)
    torch.testing.assert_close(opt(x), x)
    layers.append(nn.Identity())
    torch.testing.assert_close(opt(x), x * 2)
    assert cnt.graphs == 2


def test_replacing_a_child_in_place_recompiles():
    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
    m = Loop(layers)
    cnt = Counter()
    opt = dynamo.optimize(cnt)(m)
    x = torch.randn(2, 3)
    with torch.no_grad():
        torch.testing.assert_close(opt(x), m(x))
        layers[1] = nn.Linear(3, 3)
        torch.testing.assert_close(opt(x), m(x))


@pytest.mark.parametrize("backend", ["counter", "aot_eager", "inductor"])
def test_isinstance_parameter_answers_as_eager(backend):
    """`isinstance(p, nn.Parameter)` inside the frame is the real object's answer: True for a
    Parameter argument or module attribute, False for a tensor the graph computed."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x, p):
            y = x * 2
            flags = (isinstance(self.w, nn.Parameter), isinstance(p, nn.Parameter), isinstance(x, nn.Parameter),
                     isinstance(y, nn.Parameter), isinstance(y, torch.Tensor), [isinstance(q, nn.Parameter) for q in self.parameters()])
            scaled = [q * 2 if isinstance(q, nn.Parameter) else q for q in (self.w, y)]
            return flags, scaled

    m = M()
    p = nn.Parameter(torch.full((2,), 3.0))
    x = torch.ones(2)
    cnt = Counter()
    opt = dynamo.optimize(cnt if backend == "counter" else backend)(m)
    e_flags, e_scaled = m(x, p)
    c_flags, c_scaled = opt(x, p)
    assert c_flags == e_flags == (True, True, False, False, True, [True])
    for a, b in zip(c_scaled, e_scaled):
        torch.testing.assert_close(a, b)
    if backend == "counter":
        assert cnt.graphs == 1
