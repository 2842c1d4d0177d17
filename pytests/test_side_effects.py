"""Side effects replayed after the graph (src/symbolic/side_effects.rs): writes to objects that
outlive the frame are recorded while tracing, seen by later reads in the same frame, and applied
in program order after the graph runs, without a graph break."""

import pytest
import torch

import dynamo

COUNTER = 0
STATE = {"calls": 0}


class Box:
    def __init__(self):
        self.scale = 2.0
        self.items = []
        self.hits = 0

    def bump(self, n):
        self.hits += n
        return self.hits


class Stepper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.lin(x) * self.steps


def compile_count(f, *args):
    """(result, graphs compiled, graph breaks) of `f(*args)` under the eager backend."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    out = dynamo.optimize(backend)(f)(*args)
    return out, len(graphs), dynamo.counters()["graph_breaks"]


def test_attribute_write_on_user_object_is_replayed_without_break():
    def f(box, x):
        box.hits = box.hits + 1
        y = x * box.scale
        box.scale = box.scale + 1.0  # a later read sees the new value
        return y + box.scale

    b_eager, b_comp = Box(), Box()
    x = torch.randn(3)
    expected = f(b_eager, x)
    dynamo.reset()
    out, n_graphs, n_breaks = compile_count(f, b_comp, x)
    torch.testing.assert_close(out, expected)
    assert (b_comp.hits, b_comp.scale) == (b_eager.hits, b_eager.scale) == (1, 3.0)
    assert n_graphs == 1 and n_breaks == 0


def test_user_method_is_inlined_and_its_writes_replayed():
    def f(box, x):
        n = box.bump(2)
        return x + n

    b = Box()
    out, n_graphs, n_breaks = compile_count(f, b, torch.zeros(2))
    torch.testing.assert_close(out, torch.full((2,), 2.0))
    assert b.hits == 2 and n_breaks == 0


def test_list_mutations_from_outside_the_frame():
    def f(xs, x):
        xs.append(x.sum())
        xs.extend([1, 2])
        xs[0] = "first"
        del xs[1]
        last = xs.pop()
        xs.insert(0, last)
        return x * len(xs)

    a, b = ["a", "b", "c"], ["a", "b", "c"]
    x = torch.ones(2)
    expected = f(a, x)
    dynamo.reset()
    out, _, n_breaks = compile_count(f, b, x)
    torch.testing.assert_close(out, expected)
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert type(p) is type(q)
        if isinstance(p, torch.Tensor):
            torch.testing.assert_close(p, q)
        else:
            assert p == q
    assert n_breaks == 0


def test_dict_mutations_keep_order_and_identity():
    def f(d, x):
        d["new"] = x + 1
        d.update({"a": 10})
        old = d.pop("b")
        d.setdefault("c", 5)
        del d["new"]
        d["new"] = old
        return x * 2

    a, b = {"a": 1, "b": 2}, {"a": 1, "b": 2}
    ident = id(b)
    x = torch.ones(2)
    expected = f(a, x)
    dynamo.reset()
    out, _, n_breaks = compile_count(f, b, x)
    torch.testing.assert_close(out, expected)
    assert list(a.items()) == list(b.items()) and id(b) == ident
    assert n_breaks == 0


def test_global_write_then_read():
    def f(x):
        global COUNTER
        COUNTER = COUNTER + 1
        return x + COUNTER

    global COUNTER
    COUNTER = 0
    opt = dynamo.optimize("eager")(f)
    outs = [opt(torch.zeros(1)).item() for _ in range(3)]
    assert outs == [1.0, 2.0, 3.0]
    assert COUNTER == 3


def test_module_attribute_counter():
    torch.manual_seed(0)
    m = Stepper()
    ref = Stepper()
    ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 4)
    opt = dynamo.optimize("inductor")(m)
    for _ in range(3):
        torch.testing.assert_close(opt(x), ref(x))
    assert m.steps == ref.steps == 3


def test_effects_land_before_a_graph_break_observes_them(capsys):
    def f(box, x):
        box.hits = 41
        box.items.append("a")
        print(box.hits, box.items)  # runs in Python after the replay
        box.hits += 1
        return x + box.hits

    b = Box()
    out = dynamo.optimize("eager")(f)(b, torch.zeros(1))
    assert capsys.readouterr().out == "41 ['a']\n"
    assert b.hits == 42 and b.items == ["a"]
    torch.testing.assert_close(out, torch.full((1,), 42.0))


def test_swap_of_attributes_reads_before_writes():
    def f(box, x):
        t = box.scale
        box.scale = box.hits
        box.hits = t
        return x

    b = Box()
    b.hits = 7
    dynamo.optimize("eager")(f)(b, torch.zeros(1))
    assert (b.scale, b.hits) == (7, 2.0)


def test_new_list_stored_and_returned_stays_one_object():
    def f(box, x):
        fresh = [x + 1]
        box.items = fresh
        return fresh

    b = Box()
    out = dynamo.optimize("eager")(f)(b, torch.zeros(1))
    assert out is b.items


def test_aliased_lists_share_mutations():
    def f(a, b, x):
        a.append(1)
        return x + len(b)

    xs = []
    out = dynamo.optimize("eager")(f)(xs, xs, torch.zeros(1))
    assert xs == [1]
    torch.testing.assert_close(out, torch.ones(1))
    ys, zs = [], []
    out = dynamo.optimize("eager")(f)(ys, zs, torch.zeros(1))  # not aliased any more: recompiles
    assert ys == [1] and zs == []
    torch.testing.assert_close(out, torch.zeros(1))


def test_property_is_inlined():
    class P:
        def __init__(self):
            self._v = 3.0

        @property
        def v(self):
            return self._v * 2

    def f(p, x):
        return x * p.v

    out, _, n_breaks = compile_count(f, P(), torch.ones(2))
    torch.testing.assert_close(out, torch.full((2,), 6.0))
    assert n_breaks == 0


def test_object_with_len_truth_is_not_assumed_true():
    class Empty:
        def __len__(self):
            return 0

    def f(o, x):
        if o:
            return x + 1
        return x - 1

    out = dynamo.optimize("eager")(f)(Empty(), torch.zeros(1))
    torch.testing.assert_close(out, -torch.ones(1))


def test_custom_setattr_is_a_graph_break_not_a_skip():
    class Loud:
        def __init__(self):
            object.__setattr__(self, "log", [])

        def __setattr__(self, k, v):
            self.log.append(k)
            object.__setattr__(self, k, v)

    def f(o, x):
        o.a = 1
        return x + 1

    o = Loud()
    out = dynamo.optimize("eager")(f)(o, torch.zeros(1))
    torch.testing.assert_close(out, torch.ones(1))
    assert o.log == ["a"] and o.a == 1


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_training_style_logging_list(backend):
    def step(log, x, w):
        y = torch.relu(x @ w)
        log.append(y.sum())
        return y

    x, w = torch.randn(4, 3), torch.randn(3, 2)
    log_e, log_c = [], []
    opt = dynamo.optimize(backend)(step)
    for _ in range(3):
        torch.testing.assert_close(opt(log_c, x, w), step(log_e, x, w))
    assert len(log_c) == 3
    for p, q in zip(log_c, log_e):
        torch.testing.assert_close(p, q)


def make_counter():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count

    def read():
        return count

    return step, read


def test_nonlocal_write_of_the_compiled_frame():
    step, read = make_counter()
    opt = dynamo.optimize("eager")(step)
    outs = [opt(torch.ones(1)).item() for _ in range(3)]
    assert outs == [1.0, 2.0, 3.0] and read() == 3


def test_nonlocal_write_in_an_inlined_closure():
    step, read = make_counter()

    def f(x):
        y = step(x)
        return step(y) + read()

    expected_step, expected_read = make_counter()

    def g(x):
        y = expected_step(x)
        return expected_step(y) + expected_read()

    out, n_graphs, n_breaks = compile_count(f, torch.ones(1))
    torch.testing.assert_close(out, g(torch.ones(1)))
    assert read() == expected_read() == 2
    assert n_breaks == 0


def test_getattr_default_and_hasattr_of_absent_attributes():
    class Cfg:
        def __init__(self):
            self.width = 3

    class M(torch.nn.Module):
        def forward(self, x):
            return x * getattr(self, "scale", 2)

    def f(c, m, x):
        if hasattr(c, "depth"):
            x = x + 100
        return m(x) * getattr(c, "missing", 1) + c.width

    c, m = Cfg(), M()
    out, n_graphs, n_breaks = compile_count(f, c, m, torch.ones(2))
    torch.testing.assert_close(out, f(c, m, torch.ones(2)))
    assert n_breaks == 0
    c.depth = 1  # the attribute appears: the guard sends the call to a recompile
    torch.testing.assert_close(dynamo.optimize("eager")(f)(c, m, torch.ones(2)), f(c, m, torch.ones(2)))


def test_user_mapping_in_and_indexing_are_inlined():
    import collections.abc

    class Registry(collections.abc.Mapping):
        def __init__(self):
            self._d = {"double": 2.0, "triple": 3.0}

        def __getitem__(self, k):
            return self._d[k]

        def __iter__(self):
            return iter(self._d)

        def __len__(self):
            return len(self._d)

    def f(reg, x, name):
        if name in reg:
            return x * reg[name]
        return x

    reg = Registry()
    for name in ["double", "triple"]:
        out, _, n_breaks = compile_count(f, reg, torch.ones(2), name)
        torch.testing.assert_close(out, f(reg, torch.ones(2), name))
        assert n_breaks == 0
    # A missing key makes Mapping.__contains__ catch KeyError: not traced, still correct.
    torch.testing.assert_close(dynamo.optimize("eager")(f)(reg, torch.ones(2), "none"), torch.ones(2))
