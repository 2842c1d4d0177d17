"""Graph breaks in frames with cell variables (Note [cells across a graph break] in
src/pycodegen/resume.rs): the graph up to the break, the breaking instruction in Python, and a
resume function that receives the frame's live cells themselves, so that functions made before
the break keep sharing them with the code after it. Each program runs eagerly and compiled;
values, types, printed text and the cell contents seen afterwards must be equal, and the graph
counts show that both sides of the break were captured (no frame ran eagerly as a whole)."""

import pytest
import torch

import dynamo


def run_both(f, *make_args, capsys=None):
    """(eager result, compiled result, graphs, counters) of `f` on fresh copies of the args:
    `make_args` are zero-argument callables so mutable inputs are not shared between runs."""
    expected = f(*[m() for m in make_args])
    eager_text = capsys.readouterr().out if capsys else None
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    dynamo.reset()
    out = dynamo.optimize(backend)(f)(*[m() for m in make_args])
    if capsys:
        assert capsys.readouterr().out == eager_text
    return expected, out, len(graphs), dynamo.counters()


def same(a, b):
    """Exact equality of values and types, through tuples, lists, dicts and tensors."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b), (a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b, (a, b)


def X():
    return torch.arange(4.0)


def assert_captured(n_graphs, c, graphs, breaks=1):
    assert n_graphs == graphs, n_graphs
    assert c["graph_breaks"] == breaks
    assert c["eager_fallbacks"] == 0


def test_closure_made_before_the_break_called_after(capsys):
    def f(x):
        y = x + 1

        def g():
            return y * 2

        print("break")
        return g() + x

    expected, out, n, c = run_both(f, X, capsys=capsys)
    same(out, expected)
    assert_captured(n, c, 2)


def test_two_functions_share_a_cell_written_on_both_sides(capsys):
    def f(x):
        n = 0

        def inc():
            nonlocal n
            n += 1
            return x * n

        def add(k):
            nonlocal n
            n += k
            return n

        a = inc()  # written before the break, by the first function
        print("break", n)
        b = add(10)  # and after it, by the second
        c = inc()
        return a, b, c, n, inc, add

    expected, out, n_graphs, c = run_both(f, X, capsys=capsys)
    same(out[:4], expected[:4])
    # The returned functions still share one cell, holding what eager holds.
    assert out[4].__closure__[0] is out[5].__closure__[0] or out[4].__closure__[1] is out[5].__closure__[0]
    same((out[5](0), out[4]()), (expected[5](0), expected[4]()))
    assert_captured(n_graphs, c, 2)


def test_nonlocal_writes_across_the_break(capsys):
    def f(x):
        total = x.sum()
        steps = []

        def step(k):
            nonlocal total
            total = total * k
            steps.append(k)

        step(2)
        total = total + 1  # the frame writes its own cell too
        print("break")
        step(3)
        total = total - 1
        return total, steps

    expected, out, n, c = run_both(f, X, capsys=capsys)
    same(out, expected)
    assert_captured(n, c, 2)


def test_function_made_after_the_break_sees_cells_written_before(capsys):
    def f(x):
        scale = 2.0
        bias = x.mean()
        print("break")

        def g(t):
            return t * scale + bias

        scale = 3.0
        return g(x), g

    expected, out, n, c = run_both(f, X, capsys=capsys)
    same(out[0], expected[0])
    same(out[1](torch.ones(2)), expected[1](torch.ones(2)))
    assert_captured(n, c, 2)


def test_closure_returned_from_the_frame(capsys):
    def f(x):
        k = x.sum()

        def h(t):
            return t + k

        print("break")
        k = k * 10  # the returned closure sees the write made after the break
        return h

    expected, out, n, c = run_both(f, X, capsys=capsys)
    assert out.__code__ is expected.__code__
    same(out.__closure__[0].cell_contents, expected.__closure__[0].cell_contents)
    same(out(torch.ones(4)), expected(torch.ones(4)))
    assert_captured(n, c, 2)


def test_argument_that_is_a_cell(capsys):
    def f(x, n):
        def g():
            return x * n

        a = g()
        print("break")
        x = x + 1  # rebinds the argument's cell: g sees it
        n = n + 1
        return a, g(), x, n

    expected, out, n_graphs, c = run_both(f, X, lambda: 2, capsys=capsys)
    same(out, expected)
    assert_captured(n_graphs, c, 2)


def test_argument_cell_unchanged_before_the_break_read_after(capsys):
    def f(x, flag):
        def g():
            return x + 1 if flag else x - 1

        y = x.cos()
        print("break")
        return g() * y

    for flag in (True, False):
        expected, out, n, c = run_both(f, X, lambda: flag, capsys=capsys)
        same(out, expected)
        assert_captured(n, c, 2)


def test_cell_assigned_only_after_the_break(capsys):
    def f(x):
        def g():
            return z * 2

        y = x + 1
        print("break")
        z = y.sum()
        return g(), g

    expected, out, n, c = run_both(f, X, capsys=capsys)
    same(out[0], expected[0])
    same(out[1].__closure__[0].cell_contents, expected[1].__closure__[0].cell_contents)
    assert_captured(n, c, 2)


def test_unbound_cell_read_after_the_break_raises_as_eager(capsys):
    def f(x):
        y = x + 1
        print("break")
        if y.sum() > 1000:
            z = 1

        def g():
            return z

        return g()

    with pytest.raises(NameError) as eager:
        f(X())
    dynamo.reset()
    with pytest.raises(NameError) as compiled:
        dynamo.optimize("eager")(f)(X())
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)


def test_breaks_in_a_loop_share_cells_across_iterations(capsys):
    def f(x):
        acc = []
        count = 0

        def bump(t):
            nonlocal count
            count += 1
            acc.append(t * count)

        for i in range(4):
            bump(x + i)
            print("iteration", i, count)
        return count, acc

    expected, out, n, c = run_both(f, X, capsys=capsys)
    same(out, expected)
    assert c["eager_fallbacks"] == 0 and c["graph_breaks"] >= 1 and n >= 2


def test_closure_frame_with_its_own_cells_breaks(capsys):
    def outer():
        base = torch.ones(4)

        def f(x):
            m = x * base  # a free variable of f

            def g():
                return m + base

            print("break")
            return g()

        return f

    expected, out, n, c = run_both(outer(), X, capsys=capsys)
    same(out, expected)
    assert_captured(n, c, 2)


def test_closure_stored_outside_before_the_break():
    store = []

    def f(x, out):
        v = x + 1

        def g():
            return v

        out.append(g)
        print("break")
        v = v * 5
        return x

    f(X(), store)
    eager_value = store[0]()
    compiled_store = []
    dynamo.optimize("eager")(f)(X(), compiled_store)
    assert torch.equal(compiled_store[0](), eager_value)
    assert dynamo.counters()["eager_fallbacks"] == 0


def test_resume_function_recompiles_on_new_cell_contents(capsys):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, k):
        def g():
            return x * k

        print("break")
        return g() + k

    opt = dynamo.optimize(backend)(f)
    for k in (1, 2, 2, 3.5):
        same(opt(X(), k), f(X(), k))
    assert dynamo.counters()["eager_fallbacks"] == 0
    n = len(graphs)
    same(opt(X(), 2), f(X(), 2))
    assert len(graphs) == n  # cached: guards on the cell contents hold


def test_unbound_cell_read_by_the_frame_after_the_break_raises_as_eager(capsys):
    def f(x):
        y = x + 1
        print("break")
        if y.sum() > 1000:
            z = 1

        def g():
            return z

        return z + 1, g

    with pytest.raises(UnboundLocalError) as eager:
        f(X())
    dynamo.reset()
    with pytest.raises(UnboundLocalError) as compiled:
        dynamo.optimize("eager")(f)(X())
    assert str(compiled.value) == str(eager.value)


def test_function_made_in_the_frame_and_reached_twice_keeps_its_identity(capsys):
    # Note [shared rebuilds]: one function object, however many places reach it.
    def across_break(x):
        def g():
            return x

        d = {"a": g}
        print("break")
        return d["a"] is g, g() + 1

    def returned_twice(x):
        def g():
            return x + 1

        return g, [g]

    expected, out, n, c = run_both(across_break, X, capsys=capsys)
    same(out, expected)
    assert out[0] is True
    assert_captured(n, c, 1)  # nothing to compute before the break
    expected, out, n, c = run_both(returned_twice, X)
    assert out[0] is out[1][0] and expected[0] is expected[1][0]
    assert c["eager_fallbacks"] == 0


def test_containers_reached_twice_stay_one_object(capsys):
    # A list built in the frame that is returned and stored outside, a dict kept in a local and
    # handed to the breaking call, an iterator and its list: one object each, as in eager.
    class Holder:
        pass

    def returned_and_stored(x, holder):
        items = [x + 1]
        holder.items = items
        return items

    def live_and_passed_to_the_break(x):
        d = {"k": x * 2}
        print(d.keys())
        d["j"] = 1
        return d

    def iterator_and_its_list(x):
        lst = [x, x + 1, x + 2]
        it = iter(lst)
        first = next(it)
        print("break")
        lst.append(x * 10)
        return first, list(it), lst

    h_eager, h_comp = Holder(), Holder()
    expected = returned_and_stored(X(), h_eager)
    dynamo.reset()
    out = dynamo.optimize("eager")(returned_and_stored)(X(), h_comp)
    assert out is h_comp.items and expected is h_eager.items
    same(out, expected)
    assert dynamo.counters()["eager_fallbacks"] == 0 and dynamo.counters()["graphs"] == 1

    for f, graphs in ((live_and_passed_to_the_break, 1), (iterator_and_its_list, 2)):
        expected, out, n, c = run_both(f, X, capsys=capsys)
        same(out, expected)
        assert_captured(n, c, graphs)


def test_list_in_a_cell_and_returned_is_one_list():
    def f(x):
        items = [x]

        def g():
            return items

        return g, items

    g_e, items_e = f(X())
    dynamo.reset()
    g_c, items_c = dynamo.optimize("eager")(f)(X())
    assert g_e() is items_e and g_c() is items_c
    assert dynamo.counters()["eager_fallbacks"] == 0


SENTINEL = object()


def test_new_containers_and_functions_are_no_existing_object():
    # `is` between an object built in the frame and one from outside is False without running
    # anything (the dataclass `__init__` pattern `tags is _HAS_DEFAULT_FACTORY`).
    def f(x):
        lst, d = [x], {"k": x}

        def g():
            return x

        return x + 1, lst is SENTINEL, d is SENTINEL, g is SENTINEL, SENTINEL is not lst, g is g

    expected, out, n, c = run_both(f, X)
    same(out, expected)
    assert n == 1 and c["graph_breaks"] == 0 and c["eager_fallbacks"] == 0


def make_counter(start):
    count = start

    def inc(t):
        nonlocal count
        count += 1
        return t * count

    def get():
        return count

    return inc, get


def test_closures_of_an_inlined_factory_share_a_new_cell(capsys):
    # Note [cells of inlined calls]: the factory's cell exists only in the trace; it is made
    # once, holding what the trace left in it, and both returned functions close over it.
    def f(x):
        inc, get = make_counter(10)
        y = inc(x)
        return y, inc, get

    expected, out, n, c = run_both(f, X)
    same(out[0], expected[0])
    assert out[1].__closure__[0] is out[2].__closure__[0]
    same((out[1](torch.ones(1)), out[2]()), (expected[1](torch.ones(1)), expected[2]()))
    assert c["eager_fallbacks"] == 0 and n == 1

    def across_break(x):
        inc, get = make_counter(0)
        inc(x)
        print("break", get())
        inc(x)
        return get(), inc

    expected, out, n, c = run_both(across_break, X, capsys=capsys)
    same(out[0], expected[0])
    same(out[1](X()), expected[1](X()))
    assert c["eager_fallbacks"] == 0
