"""Errors that eager raises at an instruction the trace folds or checks (Note [errors of folded
operations] in src/symbolic/mod.rs): an index out of a constant tuple, an attribute a literal
lacks (`None.foo`), an index out of a tensor's static size. A `try` around them takes its
handler in the trace (one graph, no break; issue 7 audit B1), and uncaught they leave the frame
with eager's exception and line."""

import subprocess
import sys
import textwrap

import pytest
import torch

import dynamo
from test_python_kinds import check


def tuple_index(x):
    try:
        return (1,)[5]
    except IndexError as e:
        return x + 1, str(e)


def none_attribute(x):
    o = None
    try:
        return o.foo
    except AttributeError as e:
        return x + 2, str(e), e.name


def str_attribute(x):
    try:
        return "abc".foo
    except AttributeError as e:
        return x + 5, str(e)


def tensor_index(x):
    try:
        return x[10]
    except IndexError as e:
        return x + 3, str(e)


def tensor_index_2d(x):
    try:
        return x[1, 7]
    except IndexError as e:
        return x * 4, str(e)


@pytest.mark.parametrize("fn", [tuple_index, none_attribute, str_attribute, tensor_index, tensor_index_2d], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_handler_taken_in_the_trace(fn, backend):
    # One graph, no break; result, arguments and printed text equal to eager's.
    check(fn, torch.ones(4, 4), graphs=1, breaks=0, backend=backend)


UNCAUGHT = """
import torch, dynamo, traceback
def f(x):
    y = x * 2
    return {expr}
for compiled in (False, True):
    try:
        (dynamo.optimize("eager")(f) if compiled else f)(torch.ones(4))
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        print(type(e).__name__, e, tb.lineno, tb.name)
"""


@pytest.mark.parametrize("expr", ["y[10]", "(1,)[3]", "[1][3]", "None.foo"])
def test_uncaught_in_a_fresh_process(expr):
    # The first region of a process, left by an exception: the hook's switch-off ran a first
    # import of torch's frame-hook API with the exception pending, which cleared it
    # (SystemError "attempted to fetch exception but none was set").
    src = textwrap.dedent(UNCAUGHT.format(expr=expr))
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], (lines, out.stderr[-2000:])
