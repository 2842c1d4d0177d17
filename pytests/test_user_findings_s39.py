"""Smallest failing inputs of what new users' programs found (stop 39), each fixed kind with
its test."""

import collections
import os
import random
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import dynamo


def _breaks(fn, *args):
    dynamo.reset()
    ex = dynamo.explain(fn)(*args)
    return ex.graph_count, ex.graph_break_count, [str(r) for r in ex.break_reasons]


# ----- OrderedDict() in torch's own code: nn.Module.state_dict -------------------------------


def _state_dict(m, x):
    return m.state_dict(), x + 1


def test_state_dict_in_the_frame_is_one_graph_with_eagers_metadata():
    torch.manual_seed(0)
    m = nn.Linear(2, 2)
    x = torch.ones(2)
    assert _breaks(_state_dict, m, x)[:2] == (1, 0)
    dynamo.reset()
    (sd_c, y_c), (sd_e, y_e) = dynamo.optimize("eager")(_state_dict)(m, x), _state_dict(m, x)
    assert type(sd_c) is collections.OrderedDict and list(sd_c) == list(sd_e)
    assert all(sd_c[k] is sd_e[k] or torch.equal(sd_c[k], sd_e[k]) for k in sd_e)
    assert sd_c._metadata == sd_e._metadata and type(sd_c._metadata) is collections.OrderedDict
    assert torch.equal(y_c, y_e)


def test_a_break_reason_of_a_call_without_arguments_says_so():
    import os

    def f(x):
        pid = os.getpid()  # a C function left to Python: its reason names its arguments
        return x + 1, pid

    g, b, reasons = _breaks(f, torch.ones(1))
    assert (g, b) == (1, 1) and "call to getpid with no arguments (at " in reasons[0], reasons
    dynamo.reset()
    assert dynamo.optimize("eager")(f)(torch.ones(1))[1] == f(torch.ones(1))[1]


# ----- nn.Sequential of parameterless torch layers built in the frame ------------------------


def _sequential(x):
    seq = nn.Sequential(nn.ReLU(), nn.Tanh())
    return seq(x)


def _sequential_index_and_iter(x):
    seq = nn.Sequential(nn.ReLU(), nn.Sigmoid())
    for m in seq:
        x = m(x)
    return seq[1](x) + len(seq)


@pytest.mark.parametrize("fn", [_sequential, _sequential_index_and_iter])
def test_sequential_built_in_the_frame_is_one_graph(fn):
    x = torch.randn(4)
    assert _breaks(fn, x)[:2] == (1, 0)
    dynamo.reset()
    assert torch.equal(dynamo.optimize("inductor")(fn)(x), fn(x))


def test_a_sequential_built_in_the_frame_that_is_returned_is_still_a_break():
    def f(x):
        seq = nn.Sequential(nn.ReLU())
        return seq, x + 1

    g, b, reasons = _breaks(f, torch.ones(1))
    assert b >= 1 and any("outlives the graph" in r for r in reasons), reasons
    dynamo.reset()
    seq, y = dynamo.optimize("eager")(f)(torch.ones(1))
    assert type(seq) is nn.Sequential and type(seq[0]) is nn.ReLU and torch.equal(y, torch.ones(1) + 1)


# ----- TORCH_WARN_ONCE warnings are not spent by tracing -------------------------------------

_WARN_ONCE_SCRIPT = textwrap.dedent(
    """
    import sys, warnings, torch, dynamo
    def metrics(x):
        return torch.tensor([x.sum(), x.mean()]) * 2
    def warns(fn, x):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fn(x)
        return [str(m.message).split(".")[0] for m in w]
    x = torch.randn(4, requires_grad=True)
    backend = sys.argv[1]
    fn = metrics if backend == "none" else dynamo.optimize(backend)(metrics)
    print(warns(fn, x), warns(metrics, x))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_a_warn_once_warning_is_issued_once_per_process_as_eager(backend):
    def run(b):
        out = subprocess.run([sys.executable, "-c", _WARN_ONCE_SCRIPT, b], capture_output=True, text=True, env=os.environ, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    eager = run("none")
    assert "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior" in eager
    assert run(backend) == eager


def test_a_warn_once_warning_traced_on_fake_tensors_leaves_the_slot_to_eager():
    # In this process the slot may be spent already; what tracing must not do is change
    # torch's warn-always setting or show anything itself.
    before = torch.is_warn_always_enabled()

    def f(x):
        return torch.tensor([x.sum(), x.mean()]) * 2

    x = torch.randn(4, requires_grad=True)
    dynamo.reset()
    with torch.no_grad():
        assert torch.equal(dynamo.optimize("eager")(f)(x), f(x))
    assert torch.is_warn_always_enabled() is before


# ----- re functions on literals fold -----------------------------------------------------------


def _re_findall(x):
    return x * len(re.findall(r"\d", "a1b22"))


def _re_mixed(x):
    parts = re.split(r"[,;]", "a,b;c")
    parts.append("d")  # a list of its own, as eager's
    n, k = re.subn(r"b+", "-", "abbcb")
    return x + len(parts) + k, parts, n, re.escape("a.b"), re.findall(r"(\d)(\w)", "1a2b")


@pytest.mark.parametrize("fn", [_re_findall, _re_mixed])
def test_re_calls_on_literals_fold_into_one_graph(fn):
    x = torch.randn(3)
    assert _breaks(fn, x)[:2] == (1, 0)
    dynamo.reset()
    c = dynamo.optimize("inductor")(fn)
    for _ in range(2):
        got, want = c(x), fn(x)
        if isinstance(want, tuple):
            assert torch.equal(got[0], want[0]) and got[1:] == want[1:] and got[1] is not c(x)[1]
        else:
            assert torch.equal(got, want)


def test_re_call_with_a_callable_repl_or_a_bad_pattern_is_as_eager():
    def f(x):
        return x + len(re.sub(r"\d", lambda m: m.group(0) * 2, "a1b2"))

    def g(x):
        return x + len(re.findall(r"(", "a"))

    x = torch.ones(1)
    dynamo.reset()
    assert torch.equal(dynamo.optimize("eager")(f)(x), f(x))
    dynamo.reset()
    with pytest.raises(re.error):
        dynamo.optimize("eager")(g)(x)


# ----- Python random seeded in the frame ---------------------------------------------------


def _seed_random(x):
    random.seed(0)
    return x * random.random()


def _seed_draws(x):
    random.seed("abc")
    a = random.randint(1, 6)
    b = random.uniform(0.0, 2.0)
    c = random.getrandbits(7) + random.randrange(10)
    return x + a + b + c, a


@pytest.mark.parametrize("fn", [_seed_random, _seed_draws])
def test_random_seeded_in_the_frame_is_one_graph_and_leaves_eagers_state(fn):
    x = torch.ones(3)
    assert _breaks(fn, x)[:2] == (1, 0)
    dynamo.reset()
    c = dynamo.optimize("inductor")(fn)
    for _ in range(2):
        random.seed(123)
        random.gauss(0, 1)  # a pending gauss_next: the seed in the frame must clear it
        want = fn(x)
        state = random.getstate()
        random.seed(123)
        random.gauss(0, 1)
        got = c(x)
        assert random.getstate() == state
        assert repr(got) == repr(want)


def test_random_draws_without_a_seed_in_the_frame_or_other_methods_after_it_are_breaks():
    def unseeded(x):
        return x * random.random()

    def gauss_after_seed(x):
        random.seed(1)
        y = x + random.random()
        return y * random.gauss(0, 1)

    x = torch.ones(2)
    for fn in (unseeded, gauss_after_seed):
        assert _breaks(fn, x)[1] >= 1
        dynamo.reset()
        c = dynamo.optimize("eager")(fn)
        random.seed(5)
        want, state = fn(x), random.getstate()
        random.seed(5)
        got = c(x)
        assert torch.equal(got, want) and random.getstate() == state
