"""Graph breaks inside try and with blocks (Note [protected breaks] in src/pycodegen/resume.rs):
the breaking instruction runs under the block's handler, and the resume function re-enters the
block. Every test compares against the same function run eagerly, exceptions included."""

import contextlib

import pytest
import torch

import dynamo


class Recorder:
    """A user context manager that logs enter/exit and optionally swallows exceptions."""

    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, value, tb):
        self.log.append(("exit", None if typ is None else typ.__name__))
        return self.swallow


def run_both(f, *args):
    """Runs `f` eagerly and under dynamo twice; returns (eager, compiled) as (value|exception, log)."""

    def once(fn):
        log = []
        try:
            return fn(log, *args), log
        except Exception as e:  # noqa: BLE001 - the point is to compare exceptions
            return (type(e), str(e)), log

    eager = once(f)
    opt = dynamo.optimize("eager")(f)
    compiled = [once(opt) for _ in range(2)]
    return eager, compiled


def assert_same(eager, compiled):
    for c in compiled:
        assert type(c[0]) is type(eager[0])
        if isinstance(eager[0], torch.Tensor):
            torch.testing.assert_close(c[0], eager[0])
        else:
            assert c[0] == eager[0]
        assert c[1] == eager[1]


def test_break_inside_user_with_block():
    def f(log, x):
        with Recorder(log):
            y = x + 1
            log.append("body")  # list.append on a frame input: a break
            y = y * 2
        return y - 1

    eager, compiled = run_both(f, torch.ones(3))
    assert_same(eager, compiled)
    assert eager[1] == ["enter", "body", ("exit", None)]


def test_exception_after_break_in_with_block_reaches_exit():
    def f(log, x):
        with Recorder(log):
            log.append("body")
            raise ValueError("boom")
        return x

    eager, compiled = run_both(f, torch.ones(3))
    assert_same(eager, compiled)
    assert eager[0] == (ValueError, "boom")


def test_exception_raised_by_breaking_instruction_is_handled_by_the_block():
    def bad(log):
        log.append("bad")
        raise KeyError("k")

    def f(log, x):
        y = x + 1
        try:
            bad(log)  # the breaking call itself raises
            y = y * 100
        except KeyError:
            log.append("caught")
            y = y - 1
        return y

    eager, compiled = run_both(f, torch.ones(3))
    assert_same(eager, compiled)
    assert eager[1] == ["bad", "caught"]


def test_swallowing_context_manager_continues_after_block():
    def f(log, x):
        y = x * 3
        with Recorder(log, swallow=True):
            log.append("body")
            raise RuntimeError("swallowed")
        return y + 1

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)
    assert eager[1] == ["enter", "body", ("exit", "RuntimeError")]


def test_breaking_call_raises_into_swallowing_context_manager():
    def bad(log):
        log.append("bad")
        raise RuntimeError("x")

    def f(log, x):
        y = x * 3
        with Recorder(log, swallow=True):
            bad(log)
            y = y * 100
        return y + 1

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)


def test_try_finally_with_break_in_try_and_finally():
    def f(log, x):
        y = x + 1
        try:
            log.append("try")
            y = y * 2
        finally:
            log.append("finally")
            y = y + 10
        return y

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)


def test_break_inside_except_handler():
    def f(log, x):
        y = x + 1
        try:
            raise ValueError("v")
        except ValueError as e:
            log.append(str(e))
            y = y * 2
        return y

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)


def test_nested_with_blocks_and_loop():
    def f(log, x):
        for i in range(3):
            with Recorder(log):
                with Recorder(log):
                    x = x + i
                    log.append(i)
                x = x * 2
        return x

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)


def test_break_in_with_inside_loop_then_loop_break_statement():
    def f(log, x):
        for i in range(5):
            with Recorder(log):
                log.append(i)
                if i == 2:
                    break
                x = x + 1
        return x

    eager, compiled = run_both(f, torch.ones(2))
    assert_same(eager, compiled)


def test_no_grad_block_with_break_keeps_grad_mode():
    def f(log, x):
        with torch.no_grad():
            y = x * 2
            log.append(torch.is_grad_enabled())
            z = y + 1
        w = x * 3
        return z.requires_grad, w.requires_grad, torch.is_grad_enabled()

    x = torch.ones(2, requires_grad=True)
    eager, compiled = run_both(f, x)
    assert_same(eager, compiled)
    assert eager[0] == (False, True, True)


def test_contextlib_contextmanager_block_with_break():
    @contextlib.contextmanager
    def cm(log):
        log.append("in")
        try:
            yield
        finally:
            log.append("out")

    def f(log, x):
        with cm(log):
            y = x.sin()
            log.append("mid")
        return y.cos()

    eager, compiled = run_both(f, torch.randn(4))
    assert_same(eager, compiled)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_with_block_break_graph_count(backend):
    def f(log, x):
        y = torch.sin(x) + 1
        with Recorder(log):
            log.append("in")
            y = torch.cos(y) * 2
        return y

    x = torch.randn(8)
    # A manager built in the frame has its __enter__/__exit__ inlined: one graph.
    out = dynamo.explain(f)([], x)
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    log, eager_log = [], []
    torch.testing.assert_close(dynamo.optimize(backend)(f)(log, x), f(eager_log, x))
    assert log == eager_log

    def g(log, x):
        y = torch.sin(x) + 1
        with Recorder(log):
            log.append("in")
            print("break")  # a break inside the block: the manager crosses it
            y = torch.cos(y) * 2
        return y

    out = dynamo.explain(g)([], x)
    assert out.graph_break_count >= 1 and out.graph_count >= 2
    log, eager_log = [], []
    dynamo.reset()
    torch.testing.assert_close(dynamo.optimize(backend)(g)(log, x), g(eager_log, x))
    assert log == eager_log


class Scale:
    """A plain user context manager whose methods tracing inlines."""

    def __init__(self):
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return 2.0

    def __exit__(self, *exc):
        self.depth -= 1
        return False


def test_user_context_manager_is_inlined_without_breaks():
    def f(cm, x):
        with cm as k:
            y = x * k
        return y + cm.depth

    cm = Scale()
    out = dynamo.explain(f)(cm, torch.ones(2))
    assert out.graph_break_count == 0, out.break_reasons
    cm = Scale()
    torch.testing.assert_close(dynamo.optimize("inductor")(f)(cm, torch.ones(2)), torch.full((2,), 2.0))
    assert cm.depth == 0


def test_break_inside_user_context_manager_exits_once():
    def f(cm, x, log):
        with cm as k:
            log.append(cm.depth)
            print("inside")
            y = x * k
        log.append(cm.depth)
        return y

    cm, log = Scale(), []
    torch.testing.assert_close(dynamo.optimize("eager")(f)(cm, torch.ones(2), log), torch.full((2,), 2.0))
    assert log == [1, 0] and cm.depth == 0


@pytest.mark.parametrize("ctx", ["no_grad", "enable_grad"])
def test_break_inside_grad_mode_block_is_not_an_eager_frame(ctx, capsys):
    def f(x):
        with getattr(torch, ctx)():
            y = x * 2
            print("mode", torch.is_grad_enabled())
            z = y + 1
        return z, torch.is_grad_enabled()

    x = torch.ones(2, requires_grad=True)
    expected = f(x)
    fallbacks = dynamo.counters()["eager_fallbacks"]
    got = dynamo.optimize("eager")(f)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[0].requires_grad == expected[0].requires_grad and got[1] == expected[1] is True
    assert dynamo.counters()["eager_fallbacks"] == fallbacks
    assert capsys.readouterr().out.count(f"mode {ctx == 'enable_grad'}") == 2
