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

Note [inference-mode blocks]: ``torch.inference_mode(mode).__enter__`` (torch/autograd/grad_mode.py)
makes a ``torch._C._InferenceMode(mode)`` guard, c10::InferenceMode, which sets the thread's whole
autograd state (grad mode ``not mode``, inference mode ``mode``) and restores the state it found on
exit. The trace models a block as ``enter_inference_mode(mode)`` / ``exit_inference_mode()`` nodes
over one per-thread stack of those guards, and enters the mode for real while tracing, so fake
tensors made in the block are inference tensors (``is_inference()`` answers as eager's) and grad
mode reads as eager's. Tensors made in the block carry the inference key only when the ops run
under the mode, so a graph holding these nodes runs through torch (``aot.py``, Note [autocast]).
The stack's depth is part of ``snapshot``: a trace that stopped inside a block, and a failed graph,
leave it as they found it. A break inside the block leaves an ``InferenceModeExit`` on the stack.
"""

import threading

import torch

_INFERENCE = threading.local()


def _inference_stack():
    """The thread's entered ``_InferenceMode`` guards, innermost last, each with its mode and the
    grad mode it found."""
    stack = getattr(_INFERENCE, "stack", None)
    if stack is None:
        stack = _INFERENCE.stack = []
    return stack


def enter_inference_mode(mode):
    """What ``torch.inference_mode(mode).__enter__()`` does (torch/autograd/grad_mode.py): a
    ``torch._C._InferenceMode(mode)`` guard entered, kept on the thread's stack. Returns None."""
    prev_grad = torch.is_grad_enabled()
    guard = torch._C._InferenceMode(mode)
    guard.__enter__()
    _inference_stack().append((guard, (mode, prev_grad)))


def exit_inference_mode():
    """What the block's ``__exit__`` does: the innermost guard exits, putting back the autograd
    state it found. Returns None."""
    guard, _ = _inference_stack().pop()
    guard.__exit__(None, None, None)


class InferenceModeExit:
    """The ``__exit__`` of an inference-mode block cut by a graph break, handed to the resume
    function on the stack (Note [inference-mode blocks]). Calling it with the exception triple
    leaves the block and returns None, as ``inference_mode.__exit__`` does (no exception is
    swallowed)."""

    __slots__ = ()

    def __call__(self, *exc_info):
        exit_inference_mode()

    def __repr__(self):
        return "<inference_mode exit>"

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
    modes = tuple(mode for _, mode in _inference_stack())
    return devices, torch.is_autocast_cache_enabled(), _nesting(), modes


def restore(state):
    """Puts back a ``snapshot``: after a trace that switched autocast for real, and before a
    failed graph's frame reruns (Note [graph failure reruns the frame])."""
    devices, cache_enabled, nesting, modes = state
    # Inference-mode guards entered since (Note [inference-mode blocks]) exit innermost first;
    # those the snapshot held and that have exited since (a trace of a resume function left the
    # block that a graph had entered) are entered again. Grad mode is the caller's to set: it
    # stays as it was.
    grad = torch.is_grad_enabled()
    stack = _inference_stack()
    keep = 0
    while keep < min(len(stack), len(modes)) and stack[keep][1] == modes[keep]:
        keep += 1
    while len(stack) > keep:
        exit_inference_mode()
    for mode, prev_grad in modes[keep:]:
        # Entered again over the grad mode it found the first time, which its exit puts back.
        torch._C._set_grad_enabled(prev_grad)
        enter_inference_mode(mode)
    torch._C._set_grad_enabled(grad)
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
