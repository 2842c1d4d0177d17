"""Autocast state switches that a graph records for a ``with torch.autocast(...)`` block.

Note [autocast blocks]: torch's ``autocast.__enter__`` and ``__exit__`` (torch/amp/autocast_mode.py)
only set thread-local state: the device type's enabled flag and fast dtype, the cast cache flag,
and a nesting count whose return to zero clears the cast cache. The trace models a block as
those switches: entering records an ``enter_autocast`` node and sets the state for real while
tracing (fake tensors then take the dtypes autocast gives), leaving records ``exit_autocast``
with the state from before the block. The state at frame entry is guarded, so the recorded
"before" values are the ones eager's ``__enter__`` would save. The casts themselves happen
inside each op when the graph runs, so a graph holding these nodes runs through torch
(``aot.py``, Note [autocast]). A break inside the block leaves the block's ``__exit__`` on the
stack as an ``AutocastExit``.
"""

import torch

# Device types whose autocast state a snapshot keeps: those this torch build knows.
_DEVICES = []
for _d in ("cpu", "cuda", "xpu", "mps", "hpu"):
    try:
        torch.is_autocast_enabled(_d)
        torch.get_autocast_dtype(_d)
    except (RuntimeError, ValueError, TypeError):
        continue
    _DEVICES.append(_d)
_DEVICES = tuple(_DEVICES)


def enter_autocast(device_type, dtype, enabled, cache_enabled):
    """What ``torch.autocast(device_type, dtype, enabled, cache_enabled).__enter__()`` does to
    the thread's state (torch/amp/autocast_mode.py). ``device_type``: "cpu", "cuda", ...;
    ``dtype``: the fast dtype (a ``torch.dtype``). Returns None."""
    torch.set_autocast_enabled(device_type, enabled)
    torch.set_autocast_dtype(device_type, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache_enabled)


def exit_autocast(device_type, prev_enabled, prev_dtype, prev_cache_enabled):
    """What the block's ``__exit__`` does: the cast cache is dropped when the nesting count
    returns to zero, then the state saved by ``__enter__`` comes back. Returns None."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device_type, prev_enabled)
    torch.set_autocast_dtype(device_type, prev_dtype)
    torch.set_autocast_cache_enabled(prev_cache_enabled)


class AutocastExit:
    """The ``__exit__`` of an autocast block cut by a graph break, handed to the resume
    function on the stack (Note [autocast blocks]). Calling it with the exception triple
    leaves the block (``exit_autocast``) and returns False: autocast never swallows an
    exception. An inactive one is the exit of a block that changed nothing and was not entered
    (Note [autocast blocks that change nothing] in ``ctx_manager.rs``): it does nothing."""

    __slots__ = ("active", "device_type", "prev_enabled", "prev_dtype", "prev_cache_enabled")

    def __init__(self, active, device_type, prev_enabled, prev_dtype, prev_cache_enabled):
        self.active = active
        self.device_type = device_type
        self.prev_enabled = prev_enabled
        self.prev_dtype = prev_dtype
        self.prev_cache_enabled = prev_cache_enabled

    def __call__(self, *exc_info):
        if self.active:
            exit_autocast(self.device_type, self.prev_enabled, self.prev_dtype, self.prev_cache_enabled)
        return False

    def __repr__(self):
        return f"<autocast exit of {self.device_type!r}>"


def _nesting():
    """The autocast nesting count (torch only returns it from an increment or decrement)."""
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return n


def snapshot():
    """The thread's whole autocast state: per device type (enabled, fast dtype), the cast cache
    flag and the nesting count. For ``restore``."""
    devices = tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _DEVICES)
    return devices, torch.is_autocast_cache_enabled(), _nesting()


def restore(state):
    """Puts back a ``snapshot``: after a trace that switched autocast for real, and before a
    failed graph's frame reruns (Note [graph failure reruns the frame])."""
    devices, cache_enabled, nesting = state
    for d, enabled, dtype in devices:
        torch.set_autocast_enabled(d, enabled)
        torch.set_autocast_dtype(d, dtype)
    torch.set_autocast_cache_enabled(cache_enabled)
    now = _nesting()
    while now > nesting:
        now = torch.autocast_decrement_nesting()
        if now == 0:
            # As leaving the outermost block would: the trace's casts (of fake tensors) go.
            torch.clear_autocast_cache()
    while now < nesting:
        now = torch.autocast_increment_nesting()
