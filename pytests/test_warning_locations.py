"""A warning a torch call issues inside a compiled function (softmax without `dim`,
`torch.tensor(tensor)`) is issued once per call at the user's line, as eagerly: not while
tracing on fake tensors, and not from the backend's code (Note [warnings of traced calls] in
src/symbolic/output_graph.rs)."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


def softmax_without_dim(x):
    y = x * 2
    return F.softmax(y)


def tensor_of_tensor(x):
    t = torch.tensor(x)
    return t + 1


def two_warnings(x):
    a = F.softmax(x)
    b = torch.tensor(a)
    return a + b


def recorded(fn, x, calls, action):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter(action)
        outs = [fn(x) for _ in range(calls)]
    return outs, [(r.filename, r.lineno, str(r.message), r.category) for r in w]


@pytest.mark.parametrize("action", ["always", "default"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [softmax_without_dim, tensor_of_tensor, two_warnings])
def test_warning_issued_at_the_users_line_once_per_call(fn, backend, action):
    x = torch.ones(3)
    e_out, e_w = recorded(fn, x, 3, action)
    # A fresh registry for the compiled run ("default" shows a location once per registry).
    fn.__globals__.pop("__warningregistry__", None)
    c_out, c_w = recorded(dynamo.optimize(backend)(fn), x, 3, action)
    fn.__globals__.pop("__warningregistry__", None)
    assert e_w and c_w == e_w
    for a, b in zip(e_out, c_out):
        assert torch.allclose(a, b)
    c = dynamo.counters()
    assert c["graph_breaks"] == 0 and c["recompiles"] == 0


def test_warning_as_error_raises_the_same_warning():
    x = torch.ones(3)
    cf = dynamo.optimize("eager")(softmax_without_dim)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="Implicit dimension choice"):
            softmax_without_dim(x)
        with pytest.raises(UserWarning, match="Implicit dimension choice"):
            cf(x)


def resize_through_out(x):
    o = torch.empty(5)
    torch.sum(x, 0, out=o)
    return o


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_warning_worded_differently_on_fake_tensors_is_issued_once_with_the_kernels_text(backend):
    # breaker7 R6: resizing an `out=` tensor warns from the fake path with other words (a torch
    # f-string without its `f`), and the graph's kernel warned again from the backend's line.
    x = torch.ones(2, 2)
    e_out, e_w = recorded(resize_through_out, x, 2, "always")
    c_out, c_w = recorded(dynamo.optimize(backend)(resize_through_out), x, 2, "always")
    assert len(e_w) == 2 and c_w == e_w
    assert all(torch.equal(a, b) for a, b in zip(e_out, c_out))


# ----- logging records name the frame that made the call (Note [logger calls]) ------------------

import logging  # noqa: E402

LOG = logging.getLogger("dynamo_test_warning_locations")
STATE = []


class Records(logging.Handler):
    """Keeps what a handler can see of each record, and of the program's state when it runs."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def emit(self, r):
        self.seen.append((r.levelname, r.getMessage(), r.pathname, r.lineno, r.funcName, r.module, len(STATE)))


def logged(fn, x, calls=2):
    h = Records()
    LOG.addHandler(h)
    LOG.propagate, LOG.level = False, logging.DEBUG
    try:
        outs = []
        for _ in range(calls):
            STATE.clear()
            outs.append(fn(x))
    finally:
        LOG.removeHandler(h)
        LOG.propagate, LOG.level = True, logging.NOTSET
    return outs, h.seen


def log_in_helper(x, level=1):
    LOG.warning("helper %s", 1, stacklevel=level)
    return x * 2


def calls_helper(x):
    y = log_in_helper(x + 1)
    LOG.info("caller")
    return y - 1


def calls_helper_at_level_2(x):
    y = log_in_helper(x + 1, 2)
    return y - 1


def log_then_write(x):
    LOG.info("start")
    STATE.append(1)
    y = x * 2
    LOG.info("mid")
    STATE.append(2)
    return y


def log_with_exc_info(x):
    x = x * 2
    try:
        raise KeyError("k")
    except KeyError:
        LOG.error("failed", exc_info=True)
    return x + 1


def compare_logs(fn, backend, breaks):
    x = torch.ones(3)
    e_out, e_seen = logged(fn, x)
    dynamo.reset()
    c_out, c_seen = logged(dynamo.optimize(backend)(fn), x)
    assert e_seen and c_seen == e_seen
    assert all(torch.equal(a, b) for a, b in zip(e_out, c_out))
    c = dynamo.counters()
    assert c["graphs"] >= 1 and (c["graph_breaks"] > 0) == breaks, c
    return e_seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_logging_call_in_an_inlined_function_names_that_function(backend):
    # The call is replayed after the graph, from the compiled frame: the record named the
    # caller's `def` line and function (`findCaller` walks the real stack).
    seen = compare_logs(calls_helper, backend, breaks=False)
    assert seen[0][4] == "log_in_helper" and seen[1][4] == "calls_helper"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_logging_call_with_stacklevel_2_names_the_inlined_functions_caller(backend):
    seen = compare_logs(calls_helper_at_level_2, backend, breaks=False)
    assert seen[0][4] == "calls_helper_at_level_2"


def test_a_logging_call_followed_by_writes_runs_before_them():
    # breaker7 R5: the replayed calls ran after every write of the trace; a handler saw them.
    seen = compare_logs(log_then_write, "eager", breaks=True)
    assert [s[-1] for s in seen[:2]] == [0, 1]


def test_a_logging_call_with_exc_info_reads_the_exception_being_handled():
    compare_logs(log_with_exc_info, "eager", breaks=True)


def test_a_record_that_propagates_to_pytests_capture_handler_does_not_break(caplog):
    # CI sets CI=true, which makes transformers' loggers propagate to the root logger, where
    # pytest's LogCaptureHandler (test-runner code, never compiled) formats the record.
    LOG.propagate = True
    caplog.set_level(logging.INFO, logger=LOG.name)
    x = torch.ones(3)
    dynamo.reset()
    out = dynamo.optimize("eager")(calls_helper)(x)
    assert torch.equal(out, calls_helper(x))
    assert [(r.getMessage(), r.funcName) for r in caplog.records] == [("helper 1", "log_in_helper"), ("caller", "calls_helper")] * 2
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def test_a_logging_call_followed_by_writes_replays_when_only_library_handlers_see_it():
    import logging.handlers

    h = logging.handlers.BufferingHandler(100)
    h.setFormatter(logging.Formatter("%(funcName)s:%(lineno)d %(message)s"))
    LOG.addHandler(h)
    LOG.propagate, LOG.level = False, logging.INFO

    def run(fn):
        h.buffer.clear()
        STATE.clear()
        out = fn(torch.ones(3))
        return out, [h.format(r) for r in h.buffer], list(STATE)

    try:
        want = run(log_then_write)
        dynamo.reset()
        got = run(dynamo.optimize("eager")(log_then_write))
    finally:
        LOG.removeHandler(h)
        LOG.propagate, LOG.level = True, logging.NOTSET
    assert torch.equal(want[0], got[0]) and want[1:] == got[1:]
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["graph_breaks"] == 0, c


def builds_a_warning_lstm(x):
    lstm = torch.nn.LSTM(2, 2, dropout=0.2)  # one layer: torch warns that dropout is unused
    return lstm(x)[0].sum() * 0 + x.sum()


@pytest.mark.parametrize("action", ["always", "default"])
def test_a_module_built_in_the_frame_warns_once_per_construction(action):
    """The tracer builds a torch module to see whether it has parameters; its constructor's
    warnings are held back, so Python's construction after the break warns once, as eagerly
    (it warned twice)."""
    x = torch.ones(3, 1, 2)
    torch.manual_seed(0)
    eager = recorded(builds_a_warning_lstm, x, 2, action)
    dynamo.reset()
    torch.manual_seed(0)
    compiled = recorded(dynamo.optimize("eager")(builds_a_warning_lstm), x, 2, action)
    assert compiled[1] == eager[1] and len(eager[1]) >= 1
