"""Out-of-place forms of in-place tensor ops that have no functional twin in the lowering table.

Note [in-place ops on a copy] (src/inductor/fx_import.rs, ``functional_form``): the importer
functionalizes ``x.op_(...)`` into ``op(x, ...)`` when ``op`` is a pointwise op it lowers. For
the others (``bernoulli_``, ``uniform_``, ``fill_``, ``index_add_``, ``scatter_``, ``x[i] = v``
...) it rewrites the node into a call of one of these functions: the in-place op runs, with
torch's own kernel, argument checks and random number draws, on a copy of ``x``, and the copy is
the new value of ``x`` for later readers (src/inductor/functionalize.rs renames them). Eager's
values are kept exactly; the cost is one copy of ``x``. The graph node's meta is ``x``'s.

Also here: ``dropout_noise`` (Note [dropout as a product]) and ``vjp_call``, the backward of an
op without a derivative rule of ours (Note [torch's derivative for rule-less ops]).
"""

from __future__ import annotations

import functools
import importlib
import math
import re

import torch


def method_on_copy(self: torch.Tensor, method: str, *args, **kwargs) -> torch.Tensor:
    """``self.clone()`` with the in-place method ``method`` (a ``str`` such as ``"bernoulli_"``)
    applied to it with ``args``/``kwargs``; ``self`` is not written. Same shape, dtype and
    strides as ``self``; raises what ``self.<method>(...)`` raises."""
    out = self.clone()
    getattr(out, method)(*args, **kwargs)
    return out


def setitem_on_copy(self: torch.Tensor, index, value) -> torch.Tensor:
    """``self.clone()`` with ``out[index] = value`` applied (``operator.setitem`` semantics:
    basic and advanced indexing, broadcasting ``value``); ``self`` is not written. Raises what
    ``self[index] = value`` raises (``IndexError``, shape mismatch ``RuntimeError``)."""
    out = self.clone()
    out[index] = value
    return out


def out_on_copy(out: torch.Tensor, fn, /, *args, **kwargs) -> torch.Tensor:
    """``fn(*args, **kwargs, out=c)`` on a clone ``c`` of ``out``, returned; ``out`` is not
    written (Note [out= on a copy] in src/inductor/fx_import.rs). ``c`` has what torch's out=
    overload gives it (a cast into ``out``'s dtype, a resize); raises what ``fn(..., out=out)``
    raises."""
    copy = out.clone()
    fn(*args, **kwargs, out=copy)
    return copy


def dropout_noise(x: torch.Tensor, p: float, strides=None) -> torch.Tensor:
    """The scaled keep-mask that training-mode ``F.dropout(x, p)`` multiplies ``x`` by (Note
    [dropout as a product] in src/inductor/fx_import.rs), drawn as eager draws it: on CPU
    ``empty_like(x).bernoulli_(1 - p).div_(1 - p)`` (ATen's ``_dropout_impl``), on CUDA the mask
    of ``torch.native_dropout`` (the fused kernel eager uses there) times ``1 / (1 - p)``. Both
    draw in memory order, so the mask is laid out with ``strides``, the strides eager's ``x``
    has (the compiled graph may hold ``x`` channels-last where eager's is contiguous; None:
    ``x``'s own). Same shape and dtype as ``x``; ``0 < p < 1``."""
    if strides is not None and tuple(x.stride()) != tuple(strides):
        x = torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device).copy_(x)
    if x.is_cuda:
        _, mask = torch.native_dropout(x, p, True)
        return mask.to(x.dtype) * (1.0 / (1.0 - p))
    return torch.empty_like(x).bernoulli_(1 - p).div_(1 - p)


def vjp_call(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted):
    """Gradients of one forward op that has no derivative rule of ours, by torch's own autograd
    (Note [torch's derivative for rule-less ops] in src/autograd/rules.rs).

    The op is ``fn(*args, **kwargs)`` (``fn`` a dotted path such as
    ``"torch.nn.functional.softplus"``: the longest importable module prefix, then attributes), or ``args[0].<method>(*args[1:], **kwargs)`` when
    ``method`` is a ``str``; ``kwargs`` is ``dict(zip(kw_names, kw_values))``. ``slots`` and
    ``kw_slots`` mirror ``args`` and ``kw_values`` (lists and tuples item by item): an int ``k``
    marks a tensor to differentiate as the ``k``-th of ``n_wanted`` (one tensor may appear in
    several places), ``None`` anything else. ``grads`` is the gradient of the op's value (a
    tensor), or a tuple with one gradient or ``None`` per item of a tuple value (``max(dim)``,
    ``topk``, ``unbind``). The op runs again with detached copies of the marked tensors under
    ``torch.enable_grad()`` and ``torch.autograd.grad`` is applied: the result is a tuple of
    ``n_wanted`` gradients, each of its tensor's shape and dtype (zeros where the value does
    not depend on it). Raises what the op or its backward raises in eager.
    """
    got = _vjp(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted)
    return tuple(torch.zeros_like(t) if r is None else r for t, r in got)


def vjp_zeros(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted):
    """What ``vjp_call`` returns when ``grads`` is zero, without running the op or its
    backward: a zero gradient of each marked tensor's shape and dtype (Note [zero tangents] in
    ``aot.py``; an op without a derivative, ``floor_divide``, must not raise for an output that
    got no gradient)."""
    marked = [None] * n_wanted

    def walk(a, slot):
        if isinstance(slot, int) and not isinstance(slot, bool):
            marked[slot] = a
        elif isinstance(slot, (list, tuple)):
            for x, s in zip(a, slot):
                walk(x, s)

    walk(tuple(args), tuple(slots))
    for v, s in zip(kw_values, kw_slots):
        walk(v, s)
    return tuple(torch.zeros_like(t) for t in marked)


def vjp_undefined(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted):
    """Which of ``vjp_call``'s ``n_wanted`` gradients torch's autograd leaves undefined (None)
    for these arguments whatever their values: a tuple of bools, asked once at compile time on
    meta tensors (``args`` as for ``vjp_call``; ``grads`` a bool, or a tuple of bools, saying
which of the op's values get a gradient). Eager passes no gradient on
    from such an edge (``linalg_vector_norm(x, ord=0)``'s derivative is undefined), so a leaf
    reached only through it keeps ``.grad`` None, where a zero gradient would have an optimizer
    step it (Note [undefined derivatives] in src/autograd/rules.rs). Raises what the op raises
    on meta tensors; the caller then assumes every gradient is defined."""
    got = _vjp(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted, ones=True)
    return tuple(r is None for _, r in got)


def vjp_probe(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted):
    """``vjp_undefined``'s tuple followed by one more bool: True when eager's autograd saves no
    tensor for the op's backward (every node the op records is one of torch's generated
    ``...Backward<N>`` nodes and none holds a saved tensor), so its gradients do not depend on
    the values of its tensor arguments, only on their layouts (Note [value-free backward] in
    src/autograd/rules.rs). Asked once at compile time on meta tensors; raises as
    ``vjp_undefined`` does."""
    saved = [False]

    def inspect(out):
        saved[0] = not _saves_no_tensor(out)

    got = _vjp(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted, ones=True, on_out=inspect)
    return tuple(r is None for _, r in got) + (not saved[0],)


def _saves_no_tensor(outs):
    """True when the autograd graph recorded for ``outs`` (down to its leaves) consists of
    torch's generated nodes only (``CloneBackward0``), none of which saved a tensor."""
    from .aot import _autograd_nodes, _saved_attrs

    for node in _autograd_nodes(o.grad_fn for o in outs if isinstance(o, torch.Tensor)):
        if type(node).__name__ == "AccumulateGrad":
            continue
        if not re.search(r"Backward\d+$", type(node).__name__):
            return False
        for a in _saved_attrs(type(node))[1]:
            try:
                v = getattr(node, a)
            except Exception:
                return False
            if isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(t, torch.Tensor) for t in v)):
                return False
    return True


def stand_in(sizes, strides, dtype):
    """A zero-filled CPU tensor of the given layout: what the backward of an op whose eager
    backward reads no values of its arguments runs the op again on, in place of the forward's
    tensor (Note [value-free backward] in src/autograd/rules.rs)."""
    return torch.empty_strided(sizes, strides, dtype=getattr(torch, dtype)).zero_()


def _vjp(fn, method, args, kw_names, kw_values, slots, kw_slots, grads, n_wanted, ones=False, on_out=None):
    """(leaf, gradient or None) for each of the ``n_wanted`` marked tensors of ``vjp_call``:
    the op run again on detached copies under ``enable_grad`` and ``torch.autograd.grad`` with
    ``allow_unused``. With ``ones``, ``grads`` says which values get a gradient (bools) and
    each such gradient is ``ones_like`` its value."""
    leaves = [None] * n_wanted

    def swap(a, slot):
        if isinstance(slot, int) and not isinstance(slot, bool):
            if leaves[slot] is None:
                leaves[slot] = a.detach().requires_grad_(True)
            return leaves[slot]
        if isinstance(slot, (list, tuple)):
            return type(a)([swap(x, s) for x, s in zip(a, slot)])
        return a

    a = swap(tuple(args), tuple(slots))
    kwargs = {k: swap(v, s) for k, v, s in zip(kw_names, kw_values, kw_slots)}
    op = getattr(type(a[0]), method) if isinstance(method, str) else _resolve(fn)
    with torch.enable_grad():
        out = op(*a, **kwargs)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if on_out is not None:
        on_out(outs)
    gs = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    if ones:
        gs = tuple(torch.ones_like(o) if p and isinstance(o, torch.Tensor) else None for o, p in zip(outs, gs))
    pairs = [(o, g) for o, g in zip(outs, gs)
             if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
    if not pairs:
        return [(t, None) for t in leaves]
    got = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True)
    return list(zip(leaves, got))


@functools.lru_cache(maxsize=None)
def _resolve(path: str):
    """The object a dotted path names: the longest importable module prefix, then attributes
    (``torch._C._nn.gelu``). Raises ``ImportError``/``AttributeError`` when nothing matches."""
    parts = path.split(".")
    for k in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for p in parts[k:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(f"cannot resolve {path}")


def sdpa_efficient_bias(attn_mask: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """The additive bias eager's CUDA ``scaled_dot_product_attention`` hands the
    memory-efficient kernel for ``attn_mask`` (aten/src/ATen/native/transformers/attention.cpp:
    ``convert_boolean_attn_mask``, then ``preprocess_mask``): a bool mask becomes 0 where True and
    ``-inf`` where False, in ``query``'s dtype; the mask is expanded to ``(B, H, L, S)`` (``B, H,
    L`` from ``query``, ``S`` from ``key``); a last dim that is not a multiple of 16 is padded to
    one and sliced back (``pad_bias``), so that rows start aligned; otherwise a bias whose first
    three strides are not multiples of 16 is made contiguous. Used by the fused attention form
    of Note [flash attention] in aot.py."""
    bias = attn_mask
    if bias.dtype == torch.bool:
        bias = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(attn_mask.logical_not(), float("-inf"))
    bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    last = bias.shape[-1]
    if last % 16:
        return torch.nn.functional.pad(bias, (0, 16 - last % 16))[..., :last]
    if bias.stride(0) % 16 or bias.stride(1) % 16 or bias.stride(2) % 16:
        return bias.contiguous()
    return bias


def sdpa_efficient(query, key, value, attn_bias, is_causal: bool, scale):
    """``(output, logsumexp)`` of torch's CUDA memory-efficient attention without dropout, the
    kernel eager's ``scaled_dot_product_attention`` runs for these tensors (Note [flash
    attention] in aot.py): ``aten._scaled_dot_product_efficient_attention`` with the logsumexp
    computed. Its other results (the dropout RNG's seed and offset) are not returned: without
    dropout they are empty CPU tensors the backward ignores, and a CPU tensor among a CUDA
    graph's saved values would fail the compiled backward's device checks. Shapes: query
    ``(B, H, L, E)``, key ``(B, H, S, E)``, value ``(B, H, S, Ev)``, ``attn_bias`` None or from
    ``sdpa_efficient_bias``; output ``(B, H, L, Ev)``, logsumexp ``(B, H, L rounded up to 32)``
    float32."""
    out, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention.default(
        query, key, value, attn_bias, True, 0.0, is_causal, scale=scale
    )
    return out, lse


def sdpa_efficient_backward(grad, query, key, value, attn_bias, out, lse, is_causal: bool, scale, needs):
    """Gradients ``(d query, d key, d value)`` of ``sdpa_efficient`` for the output gradient
    ``grad``: torch's fused backward (derivatives.yaml:
    ``_scaled_dot_product_efficient_attention_backward``) reading the saved ``out`` and ``lse``;
    ``needs`` (three bools) says which of query, key, value need a gradient (None for the
    others). The RNG seed and offset it takes are unused without dropout; empty CPU tensors
    stand for them, as in eager."""
    unused = torch.empty((), dtype=torch.long)
    gq, gk, gv, _ = torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(
        grad, query, key, value, attn_bias, out, lse, unused, unused, 0.0, [*needs, False], is_causal, scale=scale
    )
    return gq, gk, gv


def sdpa_dropout_noise(query: torch.Tensor, key: torch.Tensor, p: float) -> torch.Tensor:
    """The scaled keep-mask CPU ``F.scaled_dot_product_attention(..., dropout_p=p)`` multiplies
    its attention weights by (Note [attention dropout as a product] in
    src/inductor/fx_import.rs), drawn as eager draws it: ATen's math path calls
    ``at::dropout(attn, p, true)``, which is ``empty_like(attn).bernoulli_(1 - p).div_(1 - p)``.
    Shape ``(*query.shape[:-1], key.shape[-2])``, ``query``'s dtype and device; ``0 < p < 1``."""
    shape = (*query.shape[:-1], key.shape[-2])
    noise = torch.empty(shape, dtype=query.dtype, device=query.device)
    return noise.bernoulli_(1 - p).div_(1 - p)


def sdpa_math(query, key, value, attn_mask, noise, is_causal: bool, scale, enable_gqa: bool):
    """``F.scaled_dot_product_attention`` with its dropout given as ``noise`` (from
    ``sdpa_dropout_noise``), computed as ATen's math path on the CPU computes it
    (``_scaled_dot_product_attention_math``): query and the transposed key each scaled by the
    square root of ``scale`` (default ``1 / sqrt(E)``), a boolean or causal mask as ``-inf``
    added, ``_safe_softmax`` over the last dim (all-masked rows give 0, not NaN), the weights
    times ``noise``, then ``@ value``. Shapes: query ``(..., L, E)``, key ``(..., S, E)``, value
    ``(..., S, Ev)``, result ``(..., L, Ev)``; with ``enable_gqa`` key and value heads repeat to
    query's. Deterministic given ``noise``, so its backward may run it again."""
    L, S = query.size(-2), key.size(-2)
    factor = (1.0 / math.sqrt(query.size(-1)) if scale is None else scale)
    sqrt_factor = math.sqrt(abs(factor))
    key, value, _ = gqa_heads(query, key, value, enable_gqa)
    q = query * (sqrt_factor if factor >= 0 else -sqrt_factor)
    attn = torch.matmul(q, key.transpose(-2, -1) * sqrt_factor)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        attn = attn.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn = attn.masked_fill(~attn_mask, float("-inf"))
        else:
            attn = attn + attn_mask
    attn = torch._safe_softmax(attn, -1) if hasattr(torch, "_safe_softmax") else torch.softmax(attn, -1)
    return torch.matmul(attn * noise, value)


def sdpa_math_backward(grad, query, key, value, attn_mask, noise, is_causal: bool, scale, enable_gqa: bool, mask_grad: bool = False):
    """Gradients ``(d query, d key, d value)`` of ``sdpa_math`` for the output gradient ``grad``
    (Note [attention dropout as a product] in src/inductor/fx_import.rs), written out instead of
    running ``sdpa_math`` again under autograd: with ``s`` the square root of the scale, the
    weights ``A = _safe_softmax((q s)(k s)^T + mask)`` recomputed and ``P = A * noise``,
    ``dv = P^T grad``, ``dA = (grad v^T) * noise``, ``dS = A * (dA - sum(dA * A, -1))`` (softmax's
    backward; all-masked rows have ``A = 0`` and get 0), ``dq = (dS (k s)) s``, ``dk = (dS^T (q s)) s``
    (the sign of a negative scale on ``dq``); with ``enable_gqa`` the repeated key/value heads
    are summed back. Shapes and dtypes are those of the inputs. With ``mask_grad`` (a float
    mask that requires grad, T5's position bias) a fourth result is the mask's gradient:
    ``dS`` (the mask is added to the scores) summed over the dims the mask was broadcast
    along, in the mask's dtype."""
    L, S = query.size(-2), key.size(-2)
    factor = (1.0 / math.sqrt(query.size(-1)) if scale is None else scale)
    s = math.sqrt(abs(factor))
    sq = s if factor >= 0 else -s
    key, value, rep = gqa_heads(query, key, value, enable_gqa)
    q = query * sq
    ks = key * s
    attn = torch.matmul(q, ks.transpose(-2, -1))
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        attn = attn.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        attn = attn.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else attn + attn_mask
    a = torch._safe_softmax(attn, -1) if hasattr(torch, "_safe_softmax") else torch.softmax(attn, -1)
    dv = torch.matmul((a * noise).transpose(-2, -1), grad)
    da = torch.matmul(grad, value.transpose(-2, -1)) * noise
    ds = a * (da - (da * a).sum(-1, keepdim=True))
    dq = torch.matmul(ds, ks) * sq
    dk = torch.matmul(ds.transpose(-2, -1), q) * s
    dk, dv = gqa_sum(dk, dv, rep)
    if mask_grad:
        return dq, dk, dv, mask_gradient(ds, attn_mask)
    return dq, dk, dv


def gqa_heads(query, key, value, enable_gqa: bool):
    """``(key, value, rep)``: with ``enable_gqa`` and fewer key/value heads than query heads
    (dim -3), key and value with each head repeated ``rep = query heads / key heads`` times in
    place (``repeat_interleave``, as torch's grouped-query attention repeats them); otherwise
    the inputs and ``rep = 1``."""
    if enable_gqa and key.dim() >= 3 and query.size(-3) != key.size(-3):
        rep = query.size(-3) // key.size(-3)
        return key.repeat_interleave(rep, -3), value.repeat_interleave(rep, -3), rep
    return key, value, 1


def gqa_sum(dk, dv, rep: int):
    """The gradients of the key and value ``gqa_heads`` repeated ``rep`` times: each group of
    ``rep`` consecutive heads (dim -3) summed back to one."""
    if rep == 1:
        return dk, dv
    shape = (*dk.shape[:-3], dk.size(-3) // rep, rep, *dk.shape[-2:])
    return dk.reshape(shape).sum(-3), dv.reshape(shape[:-1] + (dv.size(-1),)).sum(-3)


def mask_gradient(ds, attn_mask):
    """The gradient of a float attention mask added to the scores whose gradient is ``ds``
    (``(..., L, S)``): ``ds`` summed over the dims ``attn_mask`` was broadcast along (leading
    dims it lacks and its size-1 dims, torch's ``sum_to_size``), in the mask's dtype."""
    return ds.sum_to_size(attn_mask.shape).to(attn_mask.dtype)


def clamp_passes_bounds() -> bool:
    """Whether this torch's derivative of ``clamp`` with number bounds passes the gradient at an
    input equal to a bound (``x.clamp(min=0)`` at ``x = 0``): torch up to 2.11 did, 2.15 gives
    0 there (Note [clamp at its bounds] in src/autograd/rules.rs)."""
    with torch.enable_grad():
        x = torch.zeros(1, requires_grad=True)
        (g,) = torch.autograd.grad(x.clamp(min=0.0).sum(), x)
    return bool(g.item() != 0)


def autograd_function_apply(cls):
    """The graph op for ``cls.apply`` of a user ``torch.autograd.Function`` (Note [custom
    autograd.Function] in src/symbolic/variables/functions.rs): a plain function calling
    ``cls.apply(*args)``, so torch.fx can name it (a bound C classmethod has no module). It
    carries ``cls`` as ``dynamo_autograd_function``, which keeps the op out of the
    rerun-in-backward path (its forward runs once, under torch's autograd)."""

    def apply(*args):
        return cls.apply(*args)

    apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
    apply.dynamo_autograd_function = cls
    return apply
