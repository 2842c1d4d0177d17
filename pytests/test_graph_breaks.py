"""Graph breaks: the graph before an unsupported instruction, the instruction in Python, and a
resume function compiled in turn."""

import sys

import array
import collections

import pytest
import torch

import dynamo
from dynamo import _C


def test_print_between_computations_two_graphs_one_break(capsys):
    def f(x):
        y = torch.sin(x) + 1
        print("between")
        return torch.cos(y) * 2

    x = torch.randn(5)
    out = dynamo.explain(f)(x)
    assert out.graph_count == 2
    assert out.graph_break_count == 1
    assert "print" in out.break_reasons[0] and "test_graph_breaks.py" in out.break_reasons[0]
    capsys.readouterr()
    opt = dynamo.optimize("inductor")(f)
    for _ in range(3):
        torch.testing.assert_close(opt(x), f(x))
    assert capsys.readouterr().out == "between\n" * 6


def test_branch_on_tensor_value_both_sides():
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1

    opt = dynamo.optimize(backend)(f)
    for i in range(8):
        x = torch.randn(6) + (4.0 if i % 2 else -4.0)
        torch.testing.assert_close(opt(x), f(x))
    n = len(calls)
    assert n == 3  # the prefix and one graph per side
    for i in range(8):
        x = torch.randn(6) + (4.0 if i % 2 else -4.0)
        torch.testing.assert_close(opt(x), f(x))
    assert len(calls) == n


def test_loop_with_print_does_not_grow_graphs(capsys):
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    def f(x, n):
        for i in range(n):
            x = x * 1.5 + 1
            if i % 2:
                print(i)
        return x

    opt = dynamo.optimize(backend)(f)
    for _ in range(3):
        torch.testing.assert_close(opt(torch.ones(3), 6), f(torch.ones(3), 6))
    n = len(calls)
    for _ in range(5):
        torch.testing.assert_close(opt(torch.ones(3), 6), f(torch.ones(3), 6))
    assert len(calls) == n
    assert capsys.readouterr().out == "1\n3\n5\n" * 16


def test_item_used_as_python_value():
    def f(x):
        s = x.sum().item()
        return x * s

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), f(x))
    assert dynamo.counters()["graph_breaks"] == 1


def test_break_inside_inlined_call_keeps_outer_graph():
    def helper(y):
        print("in helper")
        return y * 3

    def f(x):
        a = x + 1
        b = helper(a)
        return b - 1

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(3)
    torch.testing.assert_close(opt(x), f(x))
    torch.testing.assert_close(opt(x), f(x))
    c = dynamo.counters()
    assert c["graph_breaks"] >= 1 and c["graphs"] >= 2, c


def test_exception_after_break_keeps_type_and_traceback():
    def f(x):
        y = x + 1
        print("before")
        raise KeyError("missing " + str(int(y.shape[0])))

    opt = dynamo.optimize("eager")(f)
    with pytest.raises(KeyError, match="missing 3") as info:
        opt(torch.ones(3))
    frames = [tb.name for tb in info.traceback]
    assert any("resume" in n or n == "f" for n in frames), frames


def test_locals_and_stack_survive_break():
    def f(x, scale):
        acc = [x]
        total = x.sum() * 0
        for i, w in enumerate([1.0, 2.0, 3.0]):
            total = total + x * w
            print(i)
        acc.append(total)
        return acc, scale, total + scale

    opt = dynamo.optimize("eager")(f)
    x = torch.randn(2)
    got, ref = opt(x, 0.5), f(x, 0.5)
    assert len(got[0]) == 2 and got[1] == 0.5
    torch.testing.assert_close(got[0][1], ref[0][1])
    torch.testing.assert_close(got[2], ref[2])


class _Holder:
    def __init__(self, w):
        self.w = w


def test_getattr_default_is_not_taken_for_untraceable_objects():
    def f(h, x):
        y = x * h.w
        if getattr(h, "bias", None) is not None:
            y = y + h.bias
        return y, hasattr(h, "bias")

    opt = dynamo.optimize("eager")(f)
    h = _Holder(torch.ones(3))
    x = torch.randn(3)
    opt(h, x)
    h.bias = torch.full((3,), 5.0)
    got, ref = opt(h, x), f(h, x)
    torch.testing.assert_close(got[0], ref[0])
    assert got[1] is True


def test_chained_resume_functions_keep_bound_methods_of_this_call():
    class Obj:
        pass

    def fn(x):
        lst = [x, 1]
        o = Obj()
        o.v = x + 1
        print("break")
        lst.append(x * 2 + o.v)
        return lst

    opt = dynamo.optimize("eager")(fn)
    for scale in (1.0, 3.0, 5.0):
        x = torch.ones(2) * scale
        got, ref = opt(x), fn(x)
        assert len(got) == len(ref) == 3
        torch.testing.assert_close(got[2], ref[2])


def test_loop_over_tensors_across_breaks():
    # `collections` is a global here: a frame with free variables keeps its untraceable loop in
    # Python (Note [loop bodies as functions]), and on 3.12+ the dict comprehension is inlined
    # into that frame (PEP 709), so it would capture nothing.
    def fn(xs, labels):
        groups = collections.defaultdict(list)
        for t, lab in zip(xs, labels):
            groups[lab].append(t * 2)
        return {k: torch.stack(v).sum(0) for k, v in sorted(groups.items())}

    opt = dynamo.optimize("eager")(fn)
    xs = [torch.randn(2) for _ in range(4)]
    labels = ["b", "a", "b", "c"]
    for _ in range(2):
        got, ref = opt(xs, labels), fn(xs, labels)
        assert list(got) == list(ref)
        for k in ref:
            torch.testing.assert_close(got[k], ref[k])
    assert dynamo.counters()["graphs"] >= 1


def test_break_at_a_method_load_resumes():
    """A break at the load of a method (`q.append`: LOAD_METHOD on 3.11, LOAD_ATTR with the
    method bit on 3.12/3.13) resumes after it with the call's stack laid out as that version's
    CALL expects (3.13 puts the NULL above the bound method), with a value of the enclosing
    expression below it in the second case."""

    def fn(x, q):
        y = x.sin() * 2
        q.append(y.sum())
        return y.cos() + q.__len__()

    # `array.array`: a C container tracing does not model (a deque is modelled now).
    x = torch.randn(4)
    ref_q, q = array.array("d"), array.array("d")
    ref = fn(x, ref_q)
    out = dynamo.explain(fn)(x, array.array("d"))
    # Breaks: loading q.append, calling it, loading q.__len__, calling it.
    assert out.graph_break_count == 4, out.break_reasons
    assert sum("attribute 'append' of array" in r for r in out.break_reasons) == 1, out.break_reasons
    dynamo.reset()
    opt = dynamo.optimize("eager")(fn)
    torch.testing.assert_close(opt(x, q), ref)
    assert len(q) == len(ref_q) == 1
    torch.testing.assert_close(q[0], ref_q[0])
    assert dynamo.counters()["graphs"] == 4  # sin * 2, sum, cos, + n


# Regressions from probing graph breaks (each was a silent wrong result).


def test_next_advances_iterators_across_breaks():
    def a(xs):
        it = iter(xs)
        return next(it), next(it)

    def b(lst):
        it = iter(lst)
        first = next(it)
        print("it")
        second = next(it)
        return first, second, list(it)

    def c(xs):
        it = iter(xs)
        for x in it:
            if x.sum() > 0:
                break
        print("after")
        return list(it)

    xs = [torch.tensor(float(i)) for i in range(-1, 3)]
    for fn in (a, b, c):
        opt = dynamo.optimize("eager")(fn)
        for _ in range(2):
            got, ref = opt(list(xs)), fn(list(xs))
            assert type(got) is type(ref) and len(got) == len(ref)
            for g, r in zip(got, ref):
                if isinstance(r, list):
                    assert len(g) == len(r)
                    for gi, ri in zip(g, r):
                        torch.testing.assert_close(gi, ri)
                else:
                    torch.testing.assert_close(g, r)


def test_break_while_building_a_starred_literal_keeps_all_elements():
    def d(x, xs):
        return [*xs, x.sum().item(), x]

    def e(x):
        return {"a": x, **{"c": print("s")}, "b": 1}

    opt_d, opt_e = dynamo.optimize("inductor")(d), dynamo.optimize("inductor")(e)
    x = torch.ones(1)
    got = opt_d(x, [7])
    assert got[:2] == [7, 1.0] and len(got) == 3
    assert list(opt_e(x)) == ["a", "c", "b"]


def test_appending_to_the_list_being_iterated():
    def own(x):
        xs = [x, x + 1]
        out = []
        for y in xs:
            out.append(y)
            if len(out) == 1:
                xs.append(y + 10)
        return out

    def given(xs):
        out = []
        for x in xs:
            out.append(x)
            if len(out) == 1:
                xs.append(x + 10)
        return out

    got, ref = dynamo.optimize("eager")(own)(torch.zeros(1)), own(torch.zeros(1))
    assert len(got) == len(ref) == 3
    got, ref = dynamo.optimize("eager")(given)([torch.zeros(1)]), given([torch.zeros(1)])
    assert len(got) == len(ref) == 2
    torch.testing.assert_close(got[1], ref[1])


def test_frames_whose_arguments_are_cells_do_not_break():
    # `x` is captured by the lambda: an argument that is also a cell. A resume function would
    # skip the MAKE_CELL prologue, so such frames run eagerly instead of breaking (this crashed).
    def f(x, y):
        g = lambda: x * 2
        z = y + 1
        print("b")
        return z + g()

    opt = dynamo.optimize("eager")(f)
    for _ in range(2):
        torch.testing.assert_close(opt(torch.ones(2), torch.ones(2)), f(torch.ones(2), torch.ones(2)))


def test_dead_locals_are_not_carried_to_resume_functions():
    def f(x):
        big = [x * i for i in range(3)]
        total = big[0] + big[1] + big[2]
        print("b")
        return total * 2

    opt = dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))
