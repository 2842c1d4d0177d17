"""Runs a `for` loop over an iterator the trace cannot step (a `DataLoader`), calling its body
as a function per item (Note [loop bodies as functions] in `src/pycodegen/loop_body.rs`).

The transformed code of the frame that breaks at the loop's `FOR_ITER` calls a `LoopDriver`
with the frame's varnames, the stack below the iterator and the iterator. The body functions
and the exit resume functions are made at compile time for every state (set of bound
varnames) the loop can reach; each is a code object the frame hook compiles like any other.
"""

import weakref
from types import FunctionType

from torch.utils.weak import WeakIdRef

from . import _C

_END = object()


def _free_observable(value, depth=0):
    """Whether freeing ``value`` can be seen by the program (Note [dead locals across loop
    iterations] in src/pycodegen/loop_body.rs): its class defines ``__del__``, a weak reference
    other than torch's own ``WeakIdRef`` (fake-tensor memos) points to it, or a list, tuple or
    dict holds such a value (two levels deep)."""
    cls = type(value)
    if hasattr(cls, "__del__"):
        return True
    try:
        refs = weakref.getweakrefs(value)
    except TypeError:
        refs = ()
    if any(type(r) is not WeakIdRef for r in refs):
        return True
    if depth < 2:
        if cls is list or cls is tuple:
            return any(_free_observable(v, depth + 1) for v in value)
        if cls is dict:
            return any(_free_observable(v, depth + 1) for v in value.values())
    return False


def _function(code, globals, closure):
    """The function of ``code`` over ``globals`` and the cells ``closure`` (Note [free variables
    of loop bodies] in src/pycodegen/loop_body.rs)."""
    return FunctionType(code, globals, None, None, closure)


def _fill(values, names, items):
    """``values[v] = item`` for each varname index ``v`` of ``names`` and item of ``items``."""
    for v, item in zip(names, items):
        values[v] = item


class LoopDriver:
    """Steps `iterator` as `FOR_ITER` would and calls the loop body function per item.

    `bodies` maps (the varnames bound at the loop head, the dead varnames carried in) to (body
    function, the varnames it receives); a body function returns `(0, bound, values, dead,
    dead_values)` at the back edge, `(1, target, bound, values, dead, dead_values)` when it
    leaves the loop for instruction `target` of the original code, `(2, value)` for `return
    value`. `exits` maps (target, bound) to the resume function that continues there;
    `exhausted` is the loop's exit and `exit_live` the varnames live there. `start_dead`: the
    varnames bound at the break but dead at the head. `n_preserved` values of the stack below
    the iterator are passed (a NULL is not); `stack_map` gives, per slot below the iterator,
    the index of the passed value the body functions receive there (a comprehension's
    accumulator), or -1 for `None`. The dead varnames whose free is
    observable are carried into the next call (Note [dead locals across loop iterations] in
    src/pycodegen/loop_body.rs). Exceptions raised by the iterator or the body propagate as in
    the loop.
    """

    __slots__ = ("n_vars", "n_preserved", "stack_map", "start", "start_dead", "bodies", "exits", "exhausted", "exit_live", "fill", "globals")

    def __init__(self, n_vars, n_preserved, stack_map, start, start_dead, bodies, exits, exhausted, exit_live, globals=None):
        self.n_vars = n_vars
        self.n_preserved = n_preserved
        self.stack_map = stack_map
        self.start = start
        self.start_dead = start_dead
        self.bodies = bodies
        self.exits = exits
        self.exhausted = exhausted
        self.exit_live = frozenset(exit_live)
        # Set when the frame has free variables: `bodies` and `exits` then hold codes, made
        # functions over `globals` and the closure the frame passes after the iterator.
        self.globals = globals
        # The stack below the item in a body function: only FOR_ITER and the loop's exits read
        # it, and those run here, but for a comprehension's accumulator (Note [comprehension
        # loops in a driver]): then `None`, and the stack is made per call.
        self.fill = None if any(i >= 0 for i in stack_map) else (None,) * (len(stack_map) + 1)

    @staticmethod
    def _carry(values, dead, table, key):
        """The dead varnames to carry: all of `dead` when `table` has a body or exit for `key`
        (planned while the budget lasted) and freeing one of their values is observable, else
        none."""
        if dead and key in table and any(_free_observable(values[v]) for v in dead):
            return dead
        return ()

    def __call__(self, args):
        try:
            # `args` is the transformed frame's list (varnames, the stack below the iterator, the
            # iterator); emptied here, so that only this frame holds the values.
            n = self.n_vars
            values = args[:n]
            preserved = tuple(args[n:n + self.n_preserved])
            it = args[n + self.n_preserved]
            bodies, exits = self.bodies, self.exits
            if self.globals is not None:
                closure = args[n + self.n_preserved + 1]
                bodies = {k: (_function(code, self.globals, closure), passed) for k, (code, passed) in bodies.items()}
                exits = {k: _function(code, self.globals, closure) for k, code in exits.items()}
            args.clear()
            del args
            state = self.start
            fill = self.fill
            if fill is None:
                fill = tuple(preserved[i] if i >= 0 else None for i in self.stack_map) + (None,)
            carry = self._carry(values, self.start_dead, bodies, (state, self.start_dead))
            while True:
                item = next(it, _END)
                if item is _END:
                    target = self.exhausted
                    bound = tuple(sorted({v for v in state if v in self.exit_live} | set(carry)))
                    break
                fn, passed = bodies[(state, carry)]
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
                if kind == 2:
                    return r[1]
                values = [None] * n
                if kind == 0:
                    _, state, live_values, dead, dead_values = r
                else:
                    _, target, state, live_values, dead, dead_values = r
                r = None
                # (In a helper: a loop variable here would keep the last value alive.)
                _fill(values, state, live_values)
                _fill(values, dead, dead_values)
                live_values = dead_values = None
                if kind == 0:
                    carry = self._carry(values, dead, bodies, (state, dead))
                else:
                    carry = self._carry(values, dead, exits, (target, tuple(sorted({*state, *dead}))))
                    bound = tuple(sorted({*state, *carry}))
                    break
            # The loop is left: CPython pops the iterator there (END_FOR / FOR_ITER at its end, the
            # POP_TOP a `break` jumps through), so a generator it was closes now, before the code
            # after the loop runs (its `finally` and `with` exits run at the `break`).
            it = None
            # The resume function that continues after the loop, called the same way.
            fn = exits[(target, bound)]
            call = [None] * n
            for v in bound:
                call[v] = values[v]
            call.extend(preserved)
            values = preserved = None
            return _C.call_resume(fn, call)
        except BaseException as e:
            # This frame's own traceback entry goes (it is not a frame of eager's): the
            # traceback shows the loop body's line, or the iterator's frames, under the
            # caller's `for` line (`_C.drop_loop_traceback_head`). A bare `raise` adds none.
            tb = e.__traceback__
            if tb is not None and tb.tb_frame.f_code is _DRIVER_CODE:
                e.__traceback__ = tb.tb_next
            raise


_DRIVER_CODE = LoopDriver.__call__.__code__
