"""Objects die where eager frees them, also after a graph break (Note [resume call lifetimes] in
src/eval_frame/hook.rs).

After a break, the rest of the frame runs in a resume function that the transformed frame
calls. The transformed frame lets go of its locals before the call and `_C.call_resume` drops
its own references once the resume frame holds the arguments, so a `del` or a rebinding in the
resume function frees the object at that point, as eager does: weak references die, weak
containers shrink, `__del__` runs in program order. Each case compares everything observable
with eager over several calls, and checks that the frame was split, not run eagerly."""

import gc
import weakref

import pytest
import torch

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]


class P:
    def __init__(self, v):
        self.v = v


LOG = []


class Noisy:
    def __init__(self, name):
        self.name = name

    def __del__(self):
        LOG.append(f"del {self.name}")


CACHE = weakref.WeakKeyDictionary()
SEEN = weakref.WeakSet()


def _run(fn, n=3):
    out = []
    for i in range(n):
        LOG.clear()
        CACHE.clear()
        SEEN.clear()
        r = fn(torch.ones(2) * i)
        out.append((tuple(v.tolist() if isinstance(v, torch.Tensor) else v for v in r), list(LOG)))
    return out


def check(fn, backend):
    gc.disable()  # frees must come from reference counts, as in eager
    try:
        want = _run(fn)
        dynamo.reset()
        got = _run(dynamo.optimize(backend)(fn))
    finally:
        gc.enable()
    assert got == want
    c = dynamo.counters()
    assert c["graphs"] >= 1 and c["graph_breaks"] >= 1, c
    return want


@pytest.mark.parametrize("backend", BACKENDS)
def test_weakref_to_an_object_made_in_the_frame_dies_at_del(backend):
    # breaker3 06: `w() is None` was False compiled.
    def fn(x):
        p = P(x)
        w = weakref.ref(p)
        y = x * 2
        del p  # a break (Note [resume call lifetimes]), after the graph of `y`
        return y, w() is None

    want = check(fn, backend)
    assert all(r[0][1] is True for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weakref_to_a_tensor_made_in_the_frame_dies_at_del(backend):
    def fn(x):
        t = x * 2
        w = weakref.ref(t)
        del t
        return x + 1, w() is None

    want = check(fn, backend)
    assert all(r[0][1] is True for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rebinding_frees_the_old_value(backend):
    def fn(x):
        t = x * 3
        w = weakref.ref(t)
        t = x + 1
        return t, w() is None

    check(fn, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weak_containers_shrink(backend):
    def fn(x):
        k = P(x)
        CACHE[k] = 5.0
        SEEN.add(k)
        n_before = len(CACHE), len(SEEN)
        y = x - 1
        del k
        return y, n_before, len(CACHE), len(SEEN)

    want = check(fn, backend)
    assert all(r[0][1:] == ((1, 1), 0, 0) for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_runs_in_program_order_across_breaks(backend):
    def fn(x):
        a = Noisy("a")
        y = x + 1
        print("", end="")  # a break
        del a
        LOG.append("after del")
        b = Noisy("b")
        z = y * 2
        print("", end="")  # a second break
        b = None
        LOG.append("end")
        return z, len(LOG)

    want = check(fn, backend)
    assert want[0][1] == ["del a", "after del", "del b", "end"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_still_used_after_the_break_are_kept(backend):
    # Only the caller's references go: what the resume function still names stays alive.
    def fn(x):
        p = P(x * 2)
        w = weakref.ref(p)
        keep = [p]
        del p
        return keep[0].v + 1, w() is None, len(keep)

    want = check(fn, backend)
    assert all(r[0][1] is False for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_with_block_and_a_cell(backend):
    def fn(x):
        p = P(x)
        w = weakref.ref(p)

        def read():
            return w() is None

        with torch.no_grad():
            y = x + 1
            del p
            dead = read()
        return y, dead, torch.is_grad_enabled()

    want = check(fn, backend)
    assert all(r[0][1] is True for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_object_never_named_again_lives_until_return(backend):
    # Dead after the break but still bound: eager frees it when the frame returns.
    def fn(x):
        p = P(x)
        w = weakref.ref(p)
        y = x * 2
        print("", end="")  # a break; `p` is never named again
        return y, w() is None

    want = check(fn, backend)
    assert all(r[0][1] is False for r in want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_del_of_an_unbound_local_raises_as_eager(backend):
    def fn(x, flag):
        if flag:
            t = x + 1
        y = x * 2
        del t
        return y

    dynamo.reset()
    compiled = dynamo.optimize(backend)(fn)
    assert torch.equal(compiled(torch.ones(2), True), fn(torch.ones(2), True))
    with pytest.raises(UnboundLocalError) as eager_err:
        fn(torch.ones(2), False)
    with pytest.raises(UnboundLocalError) as got_err:
        compiled(torch.ones(2), False)
    assert str(got_err.value) == str(eager_err.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rebinding_an_object_with_del_in_a_loop(backend):
    def fn(x):
        node = Noisy("first")
        for i in range(3):
            x = x + 1
            node = Noisy(f"n{i}")  # frees the previous node here
            LOG.append(f"made n{i}")
        y = x * 2
        print("", end="")  # a break
        node = None
        LOG.append("end")
        return y, len(LOG)

    check(fn, backend)
