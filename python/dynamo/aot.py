"""AOTAutograd runtime: the ``torch.autograd.Function`` that runs a compiled forward graph and,
on ``backward``, the compiled backward graph (PyTorch: ``torch/_functorch/aot_autograd.py``,
``CompiledFunction``).

The joint graph, the derivative rules and the partitioner live in Rust (``src/autograd/``,
``dynamo._C.aot_joint``); this module only wires the two graphs into autograd:

- ``forward`` runs the forward graph with grad mode off, writes mutated inputs back (batch-norm
  running statistics), saves the values the backward reads (``ctx.save_for_backward``, so
  in-place changes to them between forward and backward raise as in eager) and marks outputs
  that do not require grad as non-differentiable;
- ``backward`` (differentiating it again raises a clean error, see ``_refuse_double_backward``) makes
  the tangents contiguous, compiles the backward graph on first use (with the real saved values
  and tangents as example inputs) and runs it.
"""

from __future__ import annotations

import torch

from . import _C


def _tensor_list(values):
    return [v for v in values if isinstance(v, torch.Tensor)]


def aot_compile(gm, example_inputs, fw_compiler, bw_compiler, inference_compiler):
    """Compiles ``gm`` for training when grad mode is on and an input requires grad: returns a
    callable ``(*inputs) -> tuple`` whose outputs carry a ``grad_fn`` backed by the compiled
    backward graph. Otherwise returns ``inference_compiler(gm, example_inputs)``. A graph our
    derivative rules cannot differentiate runs through ``gm.forward`` (torch's autograd records
    it); the reason is logged on ``aot::partition`` and counted in ``aot_eager_graphs``.

    Compilers take ``(fx.GraphModule, example_inputs)`` and return a callable.
    """
    params = [p for p in gm.parameters()] + [b for b in gm.buffers()]
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in list(example_inputs) + params
    )
    if not needs_grad:
        return inference_compiler(gm, example_inputs)
    from . import config

    plan = _C.aot_joint(gm, example_inputs, recompute=config.aot_recompute)
    if isinstance(plan, str):
        return gm.forward
    extra = list(plan.extra_inputs)
    fw_inputs = list(example_inputs) + extra
    with torch.no_grad():
        fw = fw_compiler(plan.fw, fw_inputs)
    return _make_runtime(plan, fw, bw_compiler, extra)


_DOUBLE_BACKWARD = (
    b"dynamo: a compiled graph's backward cannot be differentiated (double backward); "
    b"run this code without dynamo, or without create_graph=True"
)


def _refuse_double_backward(res):
    """Under ``create_graph=True`` the gradients get a grad_fn that raises when they are
    differentiated (as ``once_differentiable`` does, but also when no incoming gradient requires
    grad): the backward graph's saved values carry no history, so differentiating it would
    silently drop terms."""
    tensors = [r for r in res if r is not None]
    if not tensors:
        return res
    err = torch._C._functions.DelayedError(_DOUBLE_BACKWARD, len(tensors))
    out = err(*[r.detach().requires_grad_() for r in tensors])
    wrapped = iter((out,) if isinstance(out, torch.Tensor) else out)
    return tuple(None if r is None else next(wrapped) for r in res)


def _make_runtime(plan, fw, bw_compiler, extra):
    n_out = plan.n_outputs
    n_wb = len(plan.writeback_inputs)
    writebacks = list(enumerate(plan.writeback_inputs))
    tangent_outputs = list(plan.tangent_outputs)
    nondiff = [k for k in range(n_out) if k not in set(tangent_outputs)]
    input_requires_grad = list(plan.input_requires_grad)
    state = {"bw": None}

    def compile_backward(bw_args):
        with torch.no_grad():
            state["bw"] = bw_compiler(plan.bw, bw_args)
        _C.aot_count_backward()
        return state["bw"]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outs = fw(*args)
            for k, pos in writebacks:
                args[pos].copy_(outs[n_out + k])
            saved = outs[n_out + n_wb:]
            ctx.save_for_backward(*saved)
            result = tuple(outs[:n_out])
            marks = _tensor_list(result[k] for k in nondiff)
            if marks:
                ctx.mark_non_differentiable(*marks)
            return result

        @staticmethod
        def backward(ctx, *grads):
            saved = ctx.saved_tensors
            with torch.no_grad():
                tangents = [grads[k].contiguous() for k in tangent_outputs]
                bw_args = list(saved) + tangents
                bw = state["bw"] or compile_backward(bw_args)
                res = tuple(r if need else None for r, need in zip(bw(*bw_args), input_requires_grad))
            if torch.is_grad_enabled():
                res = _refuse_double_backward(res)
            return res

    def runtime(*args):
        return CompiledFunction.apply(*args, *extra)

    runtime.plan = plan
    runtime.fw = fw
    runtime._state = state
    return runtime
