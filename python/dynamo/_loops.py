"""Runs a `for` loop over an iterator the trace cannot step (a `DataLoader`), calling its body
as a function per item (Note [loop bodies as functions] in `src/pycodegen/loop_body.rs`).

The transformed code of the frame that breaks at the loop's `FOR_ITER` calls a `LoopDriver`
with the frame's varnames, the stack below the iterator and the iterator. The body functions
and the exit resume functions are made at compile time for every state (set of bound
varnames) the loop can reach; each is a code object the frame hook compiles like any other.
"""

from . import _C

_END = object()


class LoopDriver:
    """Steps `iterator` as `FOR_ITER` would and calls the loop body function per item.

    `bodies` maps the varnames bound at the loop head (a tuple of indices) to (body function,
    the varnames it receives); a body function returns `(0, bound, values)` at the back edge,
    `(1, target, bound, values)` when it leaves the loop for instruction `target` of the
    original code, `(2, value)` for `return value`. `exits` maps (target, bound) to the resume
    function that continues there; `exhausted` is the loop's exit and `exit_live` the varnames
    live there. Exceptions raised by the iterator or the body propagate as in the loop.
    """

    __slots__ = ("n_vars", "n_preserved", "start", "bodies", "exits", "exhausted", "exit_live", "fill")

    def __init__(self, n_vars, n_preserved, start, bodies, exits, exhausted, exit_live):
        self.n_vars = n_vars
        self.n_preserved = n_preserved
        self.start = start
        self.bodies = bodies
        self.exits = exits
        self.exhausted = exhausted
        self.exit_live = frozenset(exit_live)
        # The stack below the item in a body function: only FOR_ITER and the loop's exits read
        # it, and those run here.
        self.fill = (None,) * (n_preserved + 1)

    def __call__(self, *args):
        n = self.n_vars
        values = list(args[:n])
        preserved = args[n:n + self.n_preserved]
        it = args[n + self.n_preserved]
        del args
        state = self.start
        bodies, fill = self.bodies, self.fill
        while True:
            item = next(it, _END)
            if item is _END:
                target, bound = self.exhausted, tuple(v for v in state if v in self.exit_live)
                break
            fn, passed = bodies[state]
            call = [None] * n
            for v in passed:
                call[v] = values[v]
            call.extend(fill)
            call.append(item)
            # The body holds the only references to what it receives, and its frame links to
            # the loop's caller (Notes [resume call lifetimes], [resume frames link to the
            # caller] in src/eval_frame/hook.rs).
            values = item = None
            r = _C.call_resume(fn, call)
            kind = r[0]
            if kind == 0:
                state = r[1]
                values = [None] * n
                for v, x in zip(state, r[2]):
                    values[v] = x
            elif kind == 1:
                values = [None] * n
                for v, x in zip(r[2], r[3]):
                    values[v] = x
                target, bound = r[1], r[2]
                break
            else:
                return r[1]
            r = None
        # The resume function that continues after the loop, called the same way.
        fn = self.exits[(target, bound)]
        call = [None] * n
        for v in bound:
            call[v] = values[v]
        call.extend(preserved)
        values = r = preserved = None
        return _C.call_resume(fn, call)
