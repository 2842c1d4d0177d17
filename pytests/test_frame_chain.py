"""The frames a compiled function's code sees above it are eager's (Note [resume frames link to
the caller] in src/eval_frame/hook.rs): `sys._getframe(1)`, `f_back`, `inspect.stack()`,
`warnings.warn(..., stacklevel=2)` and a logging call's `stacklevel` name the function's
caller, also after a graph break (in a resume function), inside a loop body function run by
the loop driver, and with no break (the `optimize` wrapper's frame is not in the chain)."""

import inspect
import logging
import sys
import warnings

import pytest
import torch

import dynamo

from test_loop_bodies import Steps  # an iterator the trace cannot step: its loop runs in the driver

BACKENDS = ["eager", "inductor"]


def caller(fn, x):
    return fn(x)  # the line every "caller" location names


CALLER_LINE = caller.__code__.co_firstlineno + 1


def where(frame):
    return frame.f_code.co_name, frame.f_code.co_filename == __file__


def stack_names():
    return [s.function for s in inspect.stack()[1:4]]


def after_a_break(x):
    y = x + 1
    print("", end="")
    return y, where(sys._getframe(1)), stack_names(), where(sys._getframe().f_back)


def without_a_break(x):
    y = x + 1
    return y, where(sys._getframe(1)), stack_names()


def in_a_loop_body(x):
    seen = []
    for i in Steps(2):
        x = x + i
        print("", end="")
        seen.append((where(sys._getframe(1)), stack_names()))
    return x, seen


def warns_after_a_break(x):
    y = x * 2
    print("", end="")
    warnings.warn("after", UserWarning, stacklevel=2)
    return y


def warns_without_a_break(x):
    warnings.warn("plain", UserWarning, stacklevel=2)
    return x * 2


def compare(fn, backend):
    x = torch.ones(3)
    with warnings.catch_warnings(record=True) as we:
        warnings.simplefilter("always")
        want = caller(fn, x)
    dynamo.reset()
    opt = dynamo.optimize(backend)(fn)
    with warnings.catch_warnings(record=True) as wc:
        warnings.simplefilter("always")
        got = [caller(opt, x)]
        got.append(caller(opt, x))
    for g in got:
        assert torch.equal(g[0] if isinstance(g, tuple) else g, want[0] if isinstance(want, tuple) else want)
        if isinstance(g, tuple):
            assert g[1:] == want[1:]
    w_want = [(w.filename, w.lineno, str(w.message)) for w in we]
    w_got = [(w.filename, w.lineno, str(w.message)) for w in wc]
    assert w_got == w_want * 2
    return want, dynamo.counters()


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_above_a_resume_function_are_the_callers(backend):
    want, c = compare(after_a_break, backend)
    assert want[1] == ("caller", True) and want[2][:2] == ["after_a_break", "caller"]
    assert c["graphs"] >= 1 and c["graph_breaks"] >= 1, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_above_a_compiled_frame_are_the_callers(backend):
    # `sys._getframe` and `inspect.stack` run as breaks, in the transformed frame itself.
    want, c = compare(without_a_break, backend)
    assert want[1] == ("caller", True)
    assert c["graphs"] >= 1, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_above_a_loop_body_are_the_callers(backend):
    want, c = compare(in_a_loop_body, backend)
    assert [s[0] for s in want[1]] == [("caller", True)] * 2
    assert c["graphs"] >= 1, c


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [warns_after_a_break, warns_without_a_break])
def test_warning_with_stacklevel_2_names_the_callers_line(fn, backend):
    x = torch.ones(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        caller(fn, x)
    assert [(r.filename, r.lineno) for r in w] == [(__file__, CALLER_LINE)]
    compare(fn, backend)


LOG = logging.getLogger("dynamo_test_frame_chain")


def logs_at_level_2(x):
    LOG.warning("up one", stacklevel=2)
    return x + 1


def test_logging_stacklevel_past_the_compiled_frame_names_the_caller():
    recs = []

    class Keep(logging.Handler):
        def emit(self, r):
            recs.append((r.funcName, r.lineno, r.pathname))

    h = Keep()
    LOG.addHandler(h)
    LOG.propagate = False
    try:
        caller(logs_at_level_2, torch.ones(2))
        dynamo.reset()
        opt = dynamo.optimize("eager")(logs_at_level_2)
        caller(opt, torch.ones(2))
        caller(opt, torch.ones(2))
    finally:
        LOG.removeHandler(h)
        LOG.propagate = True
    assert recs == [("caller", CALLER_LINE, __file__)] * 3


def test_an_exception_after_a_break_has_eagers_traceback_frames():
    def fails(x):
        y = x + 1
        print("", end="")
        raise ValueError(y.shape)

    def frames(fn):
        try:
            caller(fn, torch.ones(2))
        except ValueError as e:
            tb = e.__traceback__
            out = []
            while tb is not None:
                out.append(tb.tb_frame.f_code.co_name)
                tb = tb.tb_next
            return out

    dynamo.reset()
    want = frames(fails)
    got = frames(dynamo.optimize("eager")(fails))
    # The optimize wrapper is one frame more (`_fn`), as with torch.compile.
    assert got[:2] == want[:2] and got[-1] == want[-1] == "fails"


def test_the_frame_chain_a_resume_function_sees_is_well_formed(tmp_path):
    # 3.13 crashed (and faulthandler printed `File ???`): linking the resume frame to the
    # transformed frame's `previous` put two shim entry frames in a row, which CPython never
    # has. faulthandler walks the raw chain and names every frame.
    import faulthandler

    out = tmp_path / "stack.txt"

    def fn(x):
        y = x + 1
        print("", end="")
        with open(out, "w") as fh:
            faulthandler.dump_traceback(fh, all_threads=False)
        return y

    dynamo.reset()
    caller(dynamo.optimize("eager")(fn), torch.ones(2))
    text = out.read_text()
    assert "???" not in text, text
    assert '"fn"' not in text and " in fn" in text and " in caller" in text, text
    assert dynamo.counters()["graph_breaks"] >= 1
