"""Run-time semantics a fresh user found broken (each test is the smallest repro): graphs that
raise at run time, aliasing of mutated objects, class attributes, float constants."""

import contextlib

import pytest
import torch

import dynamo


def both(f, *make_args):
    """(eager, compiled) of `f(*args)` as (result or (exception type, message), mutated args)."""

    def once(fn):
        args = [m() for m in make_args]
        try:
            return fn(*args), args
        except Exception as e:  # noqa: BLE001 - comparing exceptions is the point
            return (type(e), str(e)), args

    return once(f), once(dynamo.optimize("eager")(f))


def test_graph_error_reaches_finally_and_keeps_earlier_effects():
    def f(x, idx, log):
        log.append("start")
        try:
            return x[idx]
        finally:
            log.append("finally")

    e, c = both(f, lambda: torch.ones(3), lambda: torch.tensor([5]), list)
    assert e[0][0] is IndexError and c[0][0] is IndexError
    assert c[1][2] == e[1][2] == ["start", "finally"]
    assert dynamo.counters()["graph_failures"] >= 1


def test_graph_error_is_caught_by_user_except():
    def f(x, idx):
        try:
            return x[idx]
        except IndexError:
            return x.sum()

    x = torch.ones(3)
    torch.testing.assert_close(dynamo.optimize("inductor")(f)(x, torch.tensor([7])), torch.tensor(3.0))


def test_graph_error_inside_no_grad_restores_grad_mode():
    def f(x, idx):
        with torch.no_grad():
            y = x[idx]
        return y

    opt = dynamo.optimize("inductor")(f)
    with pytest.raises(IndexError):
        opt(torch.ones(3), torch.tensor([5]))
    assert torch.is_grad_enabled()


def test_graph_error_traceback_points_at_user_line():
    def f(x, idx):
        y = x + 1
        return y[idx]  # the failing line

    import traceback

    try:
        dynamo.optimize("eager")(f)(torch.ones(3), torch.tensor([9]))
    except IndexError as e:
        frames = [(fr.name, fr.line) for fr in traceback.extract_tb(e.__traceback__)]
    assert ("f", "return y[idx]  # the failing line") in frames


def test_suppress_context_manager_swallows_graph_error():
    def f(x, idx):
        out = x * 2
        with contextlib.suppress(IndexError):
            out = x[idx]
        return out

    torch.testing.assert_close(dynamo.optimize("eager")(f)(torch.ones(3), torch.tensor([4])), torch.full((3,), 2.0))


def test_keyboard_interrupt_is_not_rerun():
    calls = []

    def backend(gm, example_inputs):
        def run(*args):
            calls.append(1)
            raise KeyboardInterrupt

        return run

    def f(x):
        return x + 1

    with pytest.raises(KeyboardInterrupt):
        dynamo.optimize(backend)(f)(torch.ones(1))
    assert calls == [1]


def test_mutating_graph_is_not_rerun():
    def f(x, idx):
        x.add_(1)
        return x[idx]

    x = torch.zeros(3)
    with pytest.raises(IndexError):
        dynamo.optimize("eager")(f)(x, torch.tensor([5]))
    # Eager would have added once; a rerun would have added twice.
    torch.testing.assert_close(x, torch.ones(3))


def test_aliased_arguments_after_distinct_ones_recompile():
    def f(a, b, x):
        a.append(1)
        return x * len(b)

    g = dynamo.optimize("eager")(f)
    torch.testing.assert_close(g([0], [0], torch.ones(2)), torch.ones(2))
    shared = [0]
    torch.testing.assert_close(g(shared, shared, torch.ones(2)), torch.full((2,), 2.0))


def test_aliased_objects_with_attribute_writes():
    class O:
        def __init__(self):
            self.v = 1

    def f(a, b, x):
        a.v = 10
        return x * b.v

    g = dynamo.optimize("eager")(f)
    torch.testing.assert_close(g(O(), O(), torch.ones(1)), torch.ones(1))
    o = O()
    torch.testing.assert_close(g(o, o, torch.ones(1)), torch.full((1,), 10.0))


class K:
    k = 1

    def meth(self, x):
        return x * 3


def test_class_attribute_read_through_the_class_is_guarded():
    def f(x):
        return x * K.k

    g = dynamo.optimize("eager")(f)
    try:
        torch.testing.assert_close(g(torch.ones(1)), torch.ones(1))
        K.k = 5
        torch.testing.assert_close(g(torch.ones(1)), torch.full((1,), 5.0))
    finally:
        K.k = 1


def test_class_attribute_write_is_replayed():
    def f(x):
        K.k += 1
        return x * K.k

    g = dynamo.optimize("eager")(f)
    try:
        outs = [g(torch.ones(1)).item() for _ in range(2)]
        assert outs == [2.0, 3.0] and K.k == 3
    finally:
        K.k = 1


def test_method_replaced_on_the_class_is_seen():
    def f(o, x):
        return o.meth(x)

    g = dynamo.optimize("eager")(f)
    o = K()
    old = K.meth
    try:
        torch.testing.assert_close(g(o, torch.ones(1)), torch.full((1,), 3.0))
        K.meth = lambda self, x: x - 100
        torch.testing.assert_close(g(o, torch.ones(1)), torch.full((1,), -99.0))
    finally:
        K.meth = old


def test_negative_zero_float_argument_recompiles():
    def f(x, n):
        return 1 / (x * n)

    g = dynamo.optimize("eager")(f)
    assert g(torch.ones(1), 0.0).item() == float("inf")
    assert g(torch.ones(1), -0.0).item() == float("-inf")


def test_absent_attribute_added_to_the_class_later():
    class P:
        pass

    o = P()

    def f(x):
        return x + getattr(o, "a", 100)

    g = dynamo.optimize("eager")(f)
    assert g(torch.zeros(1)).item() == 100
    P.a = 7
    assert g(torch.zeros(1)).item() == 7


def test_hasattr_of_a_parameter_registered_later():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1 if hasattr(self, "extra") else x

    m = M()
    g = dynamo.optimize("eager")(m)
    assert g(torch.zeros(1)).item() == 0
    m.extra = torch.nn.Parameter(torch.ones(1))
    assert g(torch.zeros(1)).item() == 1


def test_getattr_default_on_a_tensor_with_an_instance_attribute():
    def f(x):
        return x + getattr(x, "foo", 1)

    g = dynamo.optimize("eager")(f)
    assert g(torch.zeros(1)).item() == 1
    t = torch.zeros(1)
    t.foo = 10
    assert g(t).item() == 10


def test_classmethod_with_super_called_through_an_instance():
    class A:
        @classmethod
        def cm(cls, x):
            return x + 1

    class B(A):
        @classmethod
        def cm(cls, x):
            return super().cm(x) + 100

    b = B()

    def f(x):
        return b.cm(x)

    torch.testing.assert_close(dynamo.optimize("eager")(f)(torch.ones(1)), f(torch.ones(1)))


def test_super_setattr_inside_a_custom_setattr_does_not_recurse():
    class SetA:
        def __setattr__(self, n, v):
            super().__setattr__(n, v)

    o = SetA()

    def f(x):
        o.a = 1
        return x + o.a

    torch.testing.assert_close(dynamo.optimize("eager")(f)(torch.ones(1)), torch.full((1,), 2.0))
    assert o.__dict__ == {"a": 1}


def test_custom_getattribute_runs_as_often_as_in_eager():
    calls = []

    class G:
        def __getattribute__(self, n):
            calls.append(n)
            return object.__getattribute__(self, n)

    o = G()
    o.a = 1

    def f(x):
        return x + o.a

    f(torch.zeros(1))
    eager_calls = list(calls)
    calls.clear()
    dynamo.optimize("eager")(f)(torch.zeros(1))
    assert calls == eager_calls == ["a"]
