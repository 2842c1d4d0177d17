"""Python kinds whose corners gave silent wrong answers (issue 7), round s32: each program runs
eagerly and compiled on copies of the same inputs and is compared exactly (values and their types,
mutated arguments, printed text, exceptions), with a graph count showing it was captured."""

import pytest
import torch

import dynamo
from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- dir() of the frame ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_dir_without_arguments_lists_the_frames_names(backend):
    """`dir()` is the sorted names of the frame's bound locals: run at a break it listed the
    transformed code's temporary `__graph_out` too (Note [locals() in a trace])."""

    def fn(x):
        y = x + 1
        z = 2

        def inner():
            return z

        names = dir()
        del y
        return x * 2, names, dir(), inner()

    check(fn, torch.ones(2), graphs=1, breaks=0, backend=backend)
    no_fallback()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dir_after_a_break(backend):
    def fn(x):
        y = x + 1
        print("break")
        return y, dir()

    check(fn, torch.ones(2), graphs=1, backend=backend)
