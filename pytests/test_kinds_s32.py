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


# ----- grad_fn names of compiled outputs ------------------------------------------------------


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_printed_output_of_a_compiled_model_names_eagers_grad_fn(backend):
    """`print(model(x))` shows `grad_fn=<ReluBackward0>` as in eager, not the compiled
    Function's `CompiledFunctionBackward` (Note [grad_fn names] in python/dynamo/aot.py)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2), torch.nn.ReLU())

    def fn(x):
        out = model(x)
        text = repr(out)
        return out, text, type(out.grad_fn).__name__

    def loss_fn(x):
        loss = torch.nn.functional.mse_loss(model(x), torch.ones(1, 2))
        print(loss)
        return loss

    check(fn, torch.randn(1, 3), graphs=1, backend=backend)
    check(loss_fn, torch.randn(1, 3), graphs=1, backend=backend)
    dynamo.reset()
    compiled = dynamo.optimize(backend)(model)
    x = torch.randn(2, 3)
    assert repr(compiled(x)) == repr(model(x))
    assert compiled(x).grad_fn.name() == model(x).grad_fn.name() == "ReluBackward0"


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_outputs_with_different_grad_fns_keep_their_names_and_gradients(backend):
    """A graph whose outputs eager names differently (the logits and the loss, at the break of
    `print`): each keeps eager's name, and gradients through both are eager's (Note [grad_fn
    names] in python/dynamo/aot.py)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))

    def step(x, y):
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        print(loss)
        print(out)
        return out, loss, [type(t.grad_fn).__name__ for t in (out, loss)]

    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    want = step(x, y)
    check(step, x, y, graphs=1, backend=backend)
    dynamo.reset()
    got = dynamo.optimize(backend)(step)(x, y)
    assert got[2] == want[2] == ["AddmmBackward0", "NllLossBackward0"]
    for w, g in zip(want[:2], got[:2]):
        torch.testing.assert_close(g, w)
    grads = []
    for out, loss in (want[:2], got[:2]):
        model.zero_grad()
        (out.sum() * 0.5 + loss).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for w, g in zip(*grads):
        torch.testing.assert_close(g, w)


# ----- results eager's backward saves ---------------------------------------------------------


def _modify_then_backward(fn, write, through):
    torch.manual_seed(0)
    x = torch.randn(2, 3, requires_grad=True)
    outs = fn(x)
    write(outs)
    try:
        sum(outs[i].sum() for i in through).backward()
    except RuntimeError as e:
        return "raised", str(e)
    return "ran", x.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize(
    "name,fn,write,through",
    [
        ("relu", lambda x: (x.relu(),), lambda o: o[0].add_(1), [0]),
        ("exp", lambda x: (x.exp(), x.sin()), lambda o: o[0].mul_(2), [0, 1]),
        ("other_output_only", lambda x: (x.exp(), x.sin()), lambda o: o[0].mul_(2), [1]),
        ("through_a_later_op", lambda x: (x.relu(), x.relu().sigmoid()), lambda o: o[0].add_(1), [1]),
        ("sqrt_twice", lambda x: ((x.abs() + 1).sqrt(),), lambda o: o[0].add_(1).add_(1), [0]),
        ("softmax_and_logits", lambda x: (x @ x.T, (x @ x.T).softmax(-1)), lambda o: o[1].add_(1), [1]),
        ("untouched", lambda x: (x.tanh(),), lambda o: None, [0]),
    ],
)
def test_writing_a_result_eager_saves_raises_at_backward(backend, name, fn, write, through):
    """Eager's relu/exp/sqrt/softmax/... nodes save their result: writing it in place before
    the backward reaches the node raises eager's RuntimeError ("... which is output 0 of Relu,
    is at version 1; expected version 0 instead"). The compiled backward saved other tensors
    and returned gradients (Note [saved results] in python/dynamo/aot.py); a backward that does
    not reach the node still runs."""
    want = _modify_then_backward(fn, write, through)
    dynamo.reset()
    got = _modify_then_backward(dynamo.optimize(backend)(fn), write, through)
    assert got[0] == want[0]
    if want[0] == "raised":
        assert got[1] == want[1]
    else:
        torch.testing.assert_close(got[1], want[1])
    assert dynamo.counters()["graphs"] == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize(
    "name,fn,write",
    [
        ("saved_by_a_later_mul", lambda x: ((y := x.sin()), y * x), lambda o: o[0].add_(1)),
        ("saved_as_other", lambda x: ((y := x * 2), x * y), lambda o: o[0].mul_(3)),
        ("chunk_saved_by_mul", lambda x: ((c := x.chunk(2, 1))[1] * 1, c[1] * 1 * x), lambda o: o[0].add_(1)),
        ("written_but_not_saved", lambda x: ((y := x * 2), y + 1), lambda o: o[0].add_(1)),
    ],
)
def test_writing_an_output_a_later_op_saved_raises_at_backward(backend, name, fn, write):
    """The output is saved as the input of a later op (`y * x` saves `y`): eager names it by the
    node it has after the write ("which is output 0 of Add")."""
    want = _modify_then_backward(fn, write, [0, 1])
    dynamo.reset()
    got = _modify_then_backward(dynamo.optimize(backend)(fn), write, [0, 1])
    assert got[0] == want[0]
    if want[0] == "raised":
        assert got[1] == want[1]
    else:
        torch.testing.assert_close(got[1], want[1])


# ----- the frame's namespace at a break -------------------------------------------------------


def _callers_names():
    import sys

    return sorted(sys._getframe(1).f_locals)


@pytest.mark.parametrize("backend", BACKENDS)
def test_code_run_at_a_break_sees_only_the_users_names(backend):
    """`eval` with the frame's namespace, or a helper reading its caller's `f_locals`, runs at a
    break in the transformed frame: its temporary `__graph_out` is unbound there, not bound
    (Note [temporaries unbound at the break] in src/pycodegen/resume.rs)."""

    def with_eval(x):
        y = x + 1
        z = 3
        names = eval("sorted(locals())")
        return y * z, names

    def with_helper(x):
        y = x * 2
        names = _callers_names()
        return y + 1, names

    check(with_eval, torch.ones(2), graphs=1, backend=backend)
    check(with_helper, torch.ones(2), graphs=1, backend=backend)
