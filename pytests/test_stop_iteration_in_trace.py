"""StopIteration of an exhausted `next(it)` inside a `try` of the same frame is raised in the
trace (Note [StopIteration in the trace] in src/symbolic/variables/builtin.rs): the handler
runs in the graph. One that leaves its frame, where it changes meaning (PEP 479 in a generator,
the end of a `for` loop), stays a graph break, and Python raises it."""

import torch

from test_python_kinds import check

X = torch.tensor([1.0, -2.0, 3.0])


def test_caught_in_the_frame():
    def f(x):
        it = iter([1])
        next(it)
        try:
            next(it)
        except StopIteration as e:
            return x + 1, e.value, e.args
        return x - 1

    check(f, X, graphs=1, breaks=0)


def test_while_loop_ended_by_stop_iteration():
    def f(x):
        it = iter([1, 2, 3])
        out = []
        while True:
            try:
                out.append(next(it))
            except StopIteration:
                break
        return out, x * len(out)

    check(f, X, graphs=1, breaks=0)


def first(it):
    try:
        return next(it)
    except StopIteration:
        return None


def test_caught_in_an_inlined_helper():
    def f(x):
        return first(iter([])), first(iter([5])), x * 2

    check(f, X, graphs=1, breaks=0)


def gen_catching(it):
    try:
        yield next(it)
    except StopIteration:
        yield -1


def test_caught_inside_a_generator():
    def f(x):
        return list(gen_catching(iter([]))), list(gen_catching(iter([4]))), x * 2

    check(f, X, graphs=1, breaks=0)


def test_not_matched_by_the_handler():
    def f(x):
        it = iter([])
        try:
            next(it)
        except ValueError:
            return x + 1
        return x - 1

    check(f, X, graphs=0, breaks=1)


def gen_leaking(it):
    try:
        yield next(it)
    except ValueError:
        yield -1


def test_leaving_a_generator_is_runtime_error():
    def f(x):
        y = x * 2
        try:
            return list(gen_leaking(iter([]))), y
        except RuntimeError as e:
            return str(e), y + 1

    check(f, X, graphs=0)


def test_through_finally():
    def f(x):
        try:
            next(iter([]))
        finally:
            y = x + 1
        return y

    check(f, X, graphs=0)


def returns_after_one(x):
    yield x
    return "rv"


def returns_a_tensor(x):
    if False:
        yield
    return x * 2


def test_a_finished_generator_carries_its_return_value():
    """The step that finishes a generator raises StopIteration(value) (`e.value`, `e.args`);
    a later step a bare one. A value that is no constant breaks."""

    def f(x):
        it = returns_after_one(x)
        next(it)
        try:
            next(it)
        except StopIteration as e:
            first = (e.value, e.args, repr(e))
        try:
            next(it)
        except StopIteration as e:
            later = (e.value, e.args)
        return first, later, x + 1

    check(f, X, graphs=1, breaks=0)

    def g(x):
        try:
            next(returns_a_tensor(x))
        except StopIteration as e:
            return e.value

    check(g, X, graphs=0)


def test_reraised_to_an_outer_handler_of_the_frame():
    """A `finally` or an unmatched `except` clause re-raising StopIteration to an outer `try`
    of the same frame keeps it in the trace; so does an explicit `raise StopIteration(v)`."""

    def through_finally(x):
        it = iter([])
        try:
            try:
                next(it)
            finally:
                y = x + 1
        except StopIteration:
            return y * 2
        return y

    def explicit(x):
        try:
            try:
                raise StopIteration(3)
            except ValueError:
                pass
        except StopIteration as e:
            return x + e.value
        return x

    check(through_finally, X, graphs=1, breaks=0)
    check(explicit, X, graphs=1, breaks=0)


class CountsToTwo:
    def __init__(self):
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self):
        self.n += 1
        if self.n > 2:
            try:
                raise StopIteration
            finally:
                self.done = True
        return self.n


def test_leaving_a_user_next_ends_the_loop():
    # (Graphs: on 3.12 and later the comprehension is inlined into the frame, PEP 709, and the
    # break in `__next__` leaves the whole frame to Python; results are eager's either way.)
    def f(x):
        it = CountsToTwo()
        out = [v for v in it]
        return out, it.done, x * 2

    check(f, X, graphs=0)
