"""AOTAutograd runtime: the ``torch.autograd.Function`` that runs a compiled forward graph and,
on ``backward``, the compiled backward graph (PyTorch: ``torch/_functorch/aot_autograd.py``,
``CompiledFunction``).

The joint graph, the derivative rules and the partitioner live in Rust (``src/autograd/``,
``dynamo._C.aot_joint``); this module only wires the two graphs into autograd:

- ``forward`` (``_C.AotForward``, Rust) runs the forward graph with grad mode off, writes
  mutated inputs back (batch-norm running statistics), saves the values the backward reads (as
  ``ctx.save_for_backward`` does, so in-place changes to them between forward and backward raise
  as in eager) and marks outputs that do not require grad as non-differentiable;
- ``backward`` makes the tangents contiguous, compiles the backward graph on first use (with the
  real saved values and tangents as example inputs) and runs it. Under ``create_graph=True`` it
  recomputes the forward through torch's autograd instead, so the gradients can be differentiated
  again (Note [double backward]).
"""

from __future__ import annotations

import contextlib
import copy
import math
import operator
import re
import weakref

import torch

from . import _C


class SavedResultRef(weakref.ref):
    """The weak reference Note [saved results] keeps to a forward output a node of the same
    graph saved: its own type, so that the tracer does not count it as a user's observer of the
    tensor's lifetime (``has_user_weakrefs`` in src/symbolic/translator.rs; a KV-cache update
    ``self.k = torch.cat([self.k, k])`` broke the graph at every decoding step)."""

    __slots__ = ()


try:
    from torch.fx._lazy_graph_module import _LazyGraphModule
except ImportError:  # a torch without lazy graph modules
    _GraphModuleClass = torch.fx.GraphModule
else:

    class _GraphModuleClass(_LazyGraphModule):
        """torch.fx's lazy graph module whose first ``forward`` call writes the code and runs
        the new ``forward`` directly. torch's own ``_lazy_forward`` calls the module
        (``self(*args)``), which runs global module hooks for the graph module and adds frames
        to a traceback: calling ``gm.forward`` of a plain GraphModule does neither."""

        def _lazy_forward(self, *args, **kwargs):
            self.real_recompile()
            return self.forward(*args, **kwargs)

        forward = _lazy_forward


def graph_module(root, graph):
    """``torch.fx.GraphModule(root, graph)`` whose Python code is written when first needed (a
    call of its ``forward``, ``.code``, printing): torch.fx's ``_LazyGraphModule`` where torch has
    it. Inductor reads the nodes only (Note [lazy graph modules] in src/autograd/export.rs)."""
    return _GraphModuleClass(root, graph)


def getitem_backward(grad, sizes, index):
    """Gradient of ``x[index]`` for basic indexing (ints, slices, None, ...): ``grad`` scattered
    into zeros of ``x``'s ``sizes`` (PyTorch's ``select_backward``/``slice_backward``). Called
    from backward graphs (rule ``getitem`` in src/autograd/rules.rs)."""
    out = grad.new_zeros(sizes)
    out[index] = grad
    return out


def index_backward(grad, sizes, indices):
    """Gradient of ``x[indices]`` for advanced indexing by a tuple of integer or bool tensors
    (no slices): ``grad`` accumulated into zeros of ``x``'s ``sizes`` at the indexed positions,
    repeated indices adding up (derivatives.yaml's ``index_backward``: ``index_put`` with
    ``accumulate=True``). Called from backward graphs (rule ``getitem`` in
    src/autograd/rules.rs)."""
    return grad.new_zeros(sizes).index_put(tuple(indices), grad, accumulate=True)


def sdpa_backward(grad, q, k, v, attn_mask, is_causal, scale, enable_gqa=False, mask_grad=False):
    """Gradients (q, k, v) of ``F.scaled_dot_product_attention`` without dropout, by the math
    attention's formulas on a recomputed probability matrix ``p`` (rule ``sdpa`` in
    src/autograd/rules.rs): gv = p^T g, gs = p * (g v^T - rowsum(p * g v^T)), gq = gs k * scale,
    gk = gs^T q * scale. A bool mask keeps the True entries; a float mask is added; a row with
    every key masked out has p = 0 (no gradient), as PyTorch's kernels give. With
    ``enable_gqa`` (fewer key/value heads than query heads, dim -3) key and value heads are
    repeated as torch repeats them (``repeat_interleave``) and their gradients summed back per
    group; with ``mask_grad`` a fourth result is the float mask's gradient (``gs`` summed to
    the mask's shape, ``dynamo._functional.mask_gradient``)."""
    from dynamo._functional import gqa_heads, gqa_sum, mask_gradient

    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    k, v, rep = gqa_heads(q, k, v, enable_gqa)
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    p = torch.softmax(s, -1)
    # A query row whose every key is masked out: PyTorch's attention returns zeros there and
    # passes no gradient through it (its softmax would be 0/0 = nan).
    p = p.masked_fill(torch.isneginf(s).all(-1, keepdim=True), 0.0)
    gv = p.transpose(-2, -1) @ grad
    gp = grad @ v.transpose(-2, -1)
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gq, gk = (gs @ k) * scale, (gs.transpose(-2, -1) @ q) * scale
    gk, gv = gqa_sum(gk, gv, rep)
    if mask_grad:
        return gq, gk, gv, mask_gradient(gs, attn_mask)
    return gq, gk, gv


def _eager_grad_fn_names(gm):
    """Per output of ``gm``: the type name of the ``grad_fn`` eager gives it, or None (no
    ``grad_fn``, or not a tensor). Read off the fake example values, which were made by the same
    ops under autograd (Note [grad_fn names])."""
    names = []
    for v in _output_example_values(gm):
        fn = v.grad_fn if v is not None else None
        names.append(type(fn).__name__ if fn is not None else None)
    return names


def _output_example_values(gm):
    """Per output of ``gm``: its fake example value when it is a tensor, else None."""
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    results = out.args[0] if out is not None else ()
    values = []
    segment = getattr(gm, "dynamo_segment", False)
    for a in results if isinstance(results, (tuple, list)) else [results]:
        v = a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None
        if segment and isinstance(v, torch.Tensor) and v._version != 0:
            # Note [stale segment outputs]: a segment's example values are the whole graph's
            # fake tensors, and one that a later segment writes in place has that write's
            # autograd history (`y += pool; y.relu_()` gave `y`, an output of the first
            # segment, ReluBackward0), so its saved-result checks and grad_fn name were made
            # up: the backward raised eager's "modified by an inplace operation" where eager
            # runs (timm's ResNet-D blocks). Such an output is left unchecked and unnamed.
            v = None
        values.append(v if isinstance(v, torch.Tensor) else None)
    return values


def _saved_outputs(gm):
    """``{output index k: (name, by_result, by_input, output_nr)}`` for each output of ``gm`` that eager's
    autograd saves for a backward (Note [saved results]): ``name`` is k's node in eager's error
    message and ``output_nr`` its index among that node's outputs, ``by_result`` the outputs whose backward runs k's own node when that node saves its
    result (relu, exp, tanh, sigmoid, softmax, sqrt, ...), ``by_input`` those whose backward runs
    a node of a later op of the graph that saved k as its input (``x * y`` saves ``y``). Read off
    the fake example values, whose autograd graph is eager's: an output's backward runs a node
    when that node is reachable from its own."""
    values = _output_example_values(gm)
    nodes = [getattr(v, "grad_fn", None) for v in values]
    if not any(n is not None for n in nodes):
        return {}
    output_of = {id(v): k for k, v in enumerate(values) if v is not None and v.grad_fn is not None}
    reachable = []
    savers = {}  # output index -> ids of the nodes that saved it as an input
    every = {}
    for fn in nodes:
        seen = set()
        stack = [fn] if fn is not None else []
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            every[id(node)] = node
            stack.extend(n for n, _ in node.next_functions if n is not None)
        reachable.append(seen)
    for node_id, node in every.items():
        for saved in _saved_inputs(node):
            k = output_of.get(id(saved))
            if k is not None:
                savers.setdefault(k, set()).add(node_id)
    found = {}
    for k, fn in enumerate(nodes):
        own = fn is not None and hasattr(type(fn), "_saved_result")
        by_input = [j for j, seen in enumerate(reachable) if savers.get(k, set()) & seen]
        if own or by_input:
            by_result = [j for j, seen in enumerate(reachable) if id(fn) in seen] if own else []
            # The node's name in the message: the op's name (`ReluBackward0` -> `Relu`).
            found[k] = (_message_name(fn), by_result, by_input, values[k].output_nr)
    return found


def _message_name(node):
    """How autograd's error messages name ``node``: ``ReluBackward0`` -> ``Relu``."""
    return re.sub(r"Backward\d*$", "", type(node).__name__)


_SAVED_ATTRS = {}


def _saved_attrs(node_type):
    """``(inputs, all)``: the names of the saved values an autograd node type exposes
    (``_saved_self``, ``_saved_other``, ``_saved_result``, ...; not the ``_raw`` variants),
    without and with its saved results. Cached per type."""
    attrs = _SAVED_ATTRS.get(node_type)
    if attrs is None:
        every = [a for a in dir(node_type) if a.startswith("_saved_") and not a.endswith("_raw")]
        attrs = _SAVED_ATTRS[node_type] = ([a for a in every if not a.startswith("_saved_result")], every)
    return attrs


def _saved_inputs(node):
    """The tensors ``node`` saved that are not its own result (``_saved_self``, ``_saved_other``,
    lists of them), as the tensor objects given to it: a saved input unpacks to the very tensor."""
    found = []
    for a in _saved_attrs(type(node))[0]:
        try:
            v = getattr(node, a)
        except Exception:  # a saved value that cannot be read back (released, or not a tensor)
            continue
        for t in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(t, torch.Tensor):
                found.append(t)
    return found


_INPLACE_OPERATORS = frozenset(
    (operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
     operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
     operator.irshift, operator.imatmul)
)


def _writes_in_place(node):
    """True when fx ``node`` may write one of its tensor arguments in place: a ``x.op_()`` method,
    a function named ``op_`` (``torch.relu_``), ``setitem`` or an augmented assignment, or a call
    given ``inplace=True`` or ``out=``."""
    if node.op == "call_method":
        return node.target.endswith("_") and not node.target.startswith("__")
    if node.op != "call_function":
        return False
    if node.target in _INPLACE_OPERATORS or node.kwargs.get("inplace") is True or "out" in node.kwargs:
        return True
    name = getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("__")


def _autograd_nodes(roots):
    """Each autograd node reachable from the ``grad_fn`` nodes ``roots`` (None entries skipped),
    once, depth first through ``next_functions``."""
    stack = [r for r in roots if r is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(n for n, _ in node.next_functions if n is not None)


def _stale_saved_tensor(gm):
    """The name of an autograd node (``SigmoidBackward0``) of ``gm``'s trace that saved a tensor
    which the graph later wrote in place, or None (Note [writes to saved tensors]). Only graphs
    with an in-place op are walked."""
    if not any(_writes_in_place(n) for n in gm.graph.nodes):
        return None
    for node in _autograd_nodes(v.grad_fn for v in _output_example_values(gm) if v is not None):
        for a in _saved_attrs(type(node))[1]:
            try:
                getattr(node, a)
            except RuntimeError as e:
                if "modified by an inplace operation" in str(e):
                    return type(node).__name__
            except Exception:  # a value released or not readable back: not our question
                pass
    return None


# Note [writes to saved tensors]: eager's autograd refuses a backward that reads a tensor written
# in place after an op saved it (``z = x.sigmoid(); z.mul_(2)``: "one of the variables needed
# for gradient computation has been modified by an inplace operation"). Inside a graph our
# functionalized joint graph computes the derivative of the functional program instead, a
# gradient where eager raises: a user's bug silently answered. Which tensors an op saves is
# torch's knowledge (derivatives.yaml), so it is read off torch: the trace ran every op on fake
# tensors under autograd, so the fake outputs' autograd graph is eager's, with eager's saved
# tensors and version counters, and reading a saved tensor back raises that very error when it
# was written since. Such a graph runs through ``gm.forward``: torch's autograd records it, and
# the backward raises eager's error exactly when eager's does (only if a gradient reaches the
# saving node). The walk costs nothing for graphs without in-place ops; torch.compile raises
# the error at compile time instead (BackendCompilerFailed). Writes made after the graph are
# Note [saved results]'s.


def _output_meta(gm):
    """``(shape, dtype, device)`` of each tensor output of ``gm`` (its fake example value), None
    for the others."""
    return [(tuple(v.shape), v.dtype, v.device) if v is not None else None for v in _output_example_values(gm)]


def _modified_saved_output(value, which, saved_version):
    """The RuntimeError eager's autograd raises when a saved tensor was written in place before
    the backward that reads it (torch/csrc/autograd/saved_variable.cpp, ``unpack``): ``which``
    is its ", which is output N of Node," part. The hint is taken from torch itself, so that it
    follows the anomaly mode and torch's wording."""
    with torch.enable_grad():
        probe = torch.zeros(1, requires_grad=True).exp()
        probe.add_(1)
    try:
        with torch.enable_grad():
            probe.backward()
        hint = ""
    except RuntimeError as e:
        hint = str(e).split(" instead.", 1)[-1]
    sizes = "[" + ", ".join(str(d) for d in value.shape) + "]"
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{value.type()} {sizes}]{which} is at version {value._version}; expected version {saved_version} instead.{hint}"
    )


# Note [saved results]: eager's autograd saves tensors for its backward and checks, when the
# backward reads one, that nothing wrote it in place since ("one of the variables needed for
# gradient computation has been modified by an inplace operation"). A graph output can be such a
# tensor in two ways: its own node saves it (relu, exp, tanh, sigmoid, softmax, sqrt, ... save
# their result), or a later op of the graph saved it as an input (``y * x`` saves ``y``). The
# compiled backward saves what the partitioner chose (often the input, or a mask), so a program
# that wrote such an output and then ran the backward got gradients where eager raises. For each
# such output, the Function's forward keeps a detached alias (same storage and version counter,
# no grad_fn, so no reference cycle; eager keeps the tensor alive until its backward too), its
# version, and a weak reference to the output the user holds; the backward raises eager's error,
# worded as eager words it, when the version moved and a gradient reaches an output from which
# eager's backward runs the saving node (reachability in the fake tensors' autograd graph, which
# is eager's). Reaching is what decides in eager (a backward through another output does not
# run the saving node), so these Functions turn off grad materialization: an output no gradient
# reaches gets None, and the backward makes its zeros from the output's metadata.


def _unchecked_saved_results(ctx, ids):
    """Moves the saved tensors that are outputs eager saves too (``ids``: their ``id``s) out of
    ``ctx.to_save`` into ``ctx.dynamo_saved_values`` (by position, as detached aliases), so that
    torch's own check at ``ctx.saved_tensors`` does not raise for them: the Note [saved results]
    check raises eager's error exactly when a gradient reaches eager's saving node. With the
    native check, writing ``relu(x)`` (an output) and then differentiating another output made
    the backward raise where eager runs (Note [inputs eager does not save] in
    src/autograd/partition.rs saves such outputs instead of recomputing them from ``x``)."""
    to_save = ctx.to_save
    if not any(t is not None and id(t) in ids for t in to_save):
        return
    full = list(to_save)
    for i, v in getattr(ctx, "dynamo_saved_values", None) or ():
        full.insert(i, v)
    keep, side = [], []
    for i, v in enumerate(full):
        if isinstance(v, torch.Tensor) and id(v) in ids:
            side.append((i, v.detach()))
        elif v is not None and not isinstance(v, torch.Tensor):
            side.append((i, v))
        else:
            keep.append(v)
    ctx.to_save = tuple(keep)
    ctx.dynamo_saved_values = side


def _main_grad_fn_name(names):
    """The name the compiled Function's node takes: the most common of ``names``, the first of
    equally common ones; None when no output has a ``grad_fn`` (Note [grad_fn names])."""
    present = [n for n in names if n is not None]
    if not present:
        return None
    return max(present, key=lambda n: (present.count(n), -present.index(n)))


def _named_grad_fns(runtime, names, main):
    """``runtime`` whose outputs eager names other than ``main`` (the name of the compiled
    Function's node) go through an identity Function named for each (Note [grad_fn names])."""
    others = [(i, n) for i, n in enumerate(names) if n is not None and n != main]
    if not others:
        return runtime
    idents = {n: _identity_function(n) for _, n in others}
    plan = [(i, idents[n].apply) for i, n in others]
    tensor = torch.Tensor

    def call(*args):
        outs = runtime(*args)
        outs = list(outs)
        for i, apply in plan:
            o = outs[i]
            if isinstance(o, tensor) and o.grad_fn is not None:
                outs[i] = apply(o)
        return tuple(outs)

    return call


def _identity_function(name):
    """A ``torch.autograd.Function`` passing its tensor through (a new tensor object over the
    same storage, not a view), whose node's type is named ``name``. A missing gradient passes
    through as None (Note [gradients of unused outputs]): filling it with zeros gave a None
    gradient of eager (a custom Function's backward returning None for the output's consumer)
    as zeros to every input behind it."""

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x.detach()

        @staticmethod
        def backward(ctx, grad):
            return grad

    Identity._backward_cls.__name__ = Identity._backward_cls.__qualname__ = name
    return Identity


# Note [grad_fn names]: the outputs of a compiled differentiable graph share one autograd node,
# an instance of the ``CompiledFunction``'s backward class, so ``print(model(x))`` showed
# ``grad_fn=<CompiledFunctionBackward>`` where eager shows ``grad_fn=<ReluBackward0>``
# (torch/_tensor_str.py prints ``type(t.grad_fn).__name__``; ``grad_fn.name()`` gives the same).
# Each output's eager name is read off the fake example value of the graph's output, made by the
# same ops under autograd. The node's class takes the most common name; an output eager names
# otherwise (a loss next to the logits it came from) passes through an identity Function whose
# node is named for it, one ``Function.apply`` (a few µs) per such output and call, paid only by
# graphs whose outputs have several names. Only the names are eager's: the nodes'
# ``next_functions`` are the compiled graph's inputs, not eager's chain of nodes.


def saved_tensors_hooks_active():
    """Whether ``torch.autograd.graph.saved_tensors_hooks`` (or a checkpoint's) are active: a
    global-state guard of graphs with values that require
    grad (``keep_dead_grad_values`` in src/symbolic/convert_frame.rs), and the condition under
    which ``_C.AotRuntime`` runs a graph through torch's autograd (Note [saved-tensor hooks at
    run time] in src/autograd/runtime.rs)."""
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


def _holds_grad_tensor(value):
    """True for a tuple/list/dict (nested) holding a tensor that requires grad."""
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, torch.Tensor) and v.requires_grad or _holds_grad_tensor(v) for v in value)
    if isinstance(value, dict):
        return _holds_grad_tensor(list(value.values()))
    return False


def _negative_pow_bases(gm):
    """Gives every ``operator.pow`` of ``gm`` whose base is a negative number (or -0.0) a node of
    its own for the base, then regenerates the code: torch.fx prints ``operator.pow(-2.0, x)``
    as ``-2.0 ** x``, which Python reads as ``-(2.0 ** x)`` (Note [negative powers bases in fx
    code] in src/symbolic/output_graph.rs; AOTAutograd's retrace makes such nodes again for
    symbolic numbers)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.pow or len(node.args) != 2:
            continue
        base = node.args[0]
        if type(base) not in (int, float) or math.copysign(1.0, base) > 0:
            continue
        with gm.graph.inserting_before(node):
            neg = gm.graph.call_function(operator.neg, (-base,))
        neg.meta["example_value"] = base
        node.args = (neg, node.args[1])
        changed = True
    if changed:
        gm.recompile()


def _compilers(backend, guarded):
    """(forward, backward, inference) compilers of ``backend``; ``guarded``: dynamo's guards
    have checked the graph's inputs (false for segments, whose inputs are intermediates)."""
    if backend == "aot_eager":

        def fx_module(g, _inputs):
            _negative_pow_bases(g)
            return g.forward

        return fx_module, fx_module, fx_module

    def forward(g, inputs):
        return _C.inductor_compile(g, inputs, inputs_guarded=guarded)

    def backward(g, inputs):
        # Its sums come from derivative rules, which eager does not compute in ATen's sum order
        # either: vectorized (Note [backward sum order] in src/inductor/decompositions.rs).
        return _C.inductor_compile(g, inputs, aten_sum_order=False)

    return forward, backward, forward


def _grad_switches(gm):
    """The constant arguments of ``gm``'s ``torch._C._set_grad_enabled`` nodes, in graph order
    (a ``torch.no_grad()``/``enable_grad()`` block inside the graph, or one cut by a graph
    break)."""
    return [
        node.args[0]
        for node in gm.graph.nodes
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled and len(node.args) == 1 and isinstance(node.args[0], bool)
    ]


# Note [grad-mode regions]: a graph is compiled with grad mode as it is entered (dynamo calls the
# backend so, Note [backend grad mode] in convert_frame.rs; a ``SpecializedGraph`` or a segment
# compiles on its first call), and its ``_set_grad_enabled`` nodes switch the mode from there. The
# fake tensors of the trace recorded which values require grad in each region. The graph needs
# the autograd path when grad mode is on anywhere in it (on entry, or switched on) and an input
# requires grad. Two things then differ from a graph without switches: ``Function.apply``
# records the outputs only when grad mode is on when it is called, so a graph entered under
# ``no_grad`` that switches grad on is applied with grad on; and ``apply`` restores the mode its
# forward switched, so the mode the graph leaves (the last switch) is set after the call, as the
# graph's own nodes would (the resume function after a break inside an ``enable_grad()`` block
# runs under it).


_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def _autocast_active():
    """True when autocast is enabled for any device type (Note [autocast])."""
    for device in _AUTOCAST_DEVICES:
        try:
            if torch.is_autocast_enabled(device):
                return True
        except (RuntimeError, ValueError):  # a device type this build does not know
            continue
    return False


def _switches_autocast(gm):
    """Whether ``gm`` enters or leaves an autocast block or an inference-mode block (Notes
    [autocast blocks] and [inference-mode blocks] in ``_amp.py``): either runs through torch."""
    from . import _amp

    switches = (_amp.enter_autocast, _amp.exit_autocast, _amp.enter_inference_mode, _amp.exit_inference_mode)
    return any(n.op == "call_function" and n.target in switches for n in gm.graph.nodes)


_FORWARD_AD_OPS = frozenset(("make_dual", "unpack_dual", "_make_dual", "_unpack_dual", "_fw_primal", "_has_same_storage_numel"))


def _uses_forward_ad(gm):
    """True when ``gm`` makes or reads forward-AD dual tensors (``fwAD.make_dual``,
    ``fwAD.unpack_dual``, ``torch._make_dual``, ...; Note [forward-AD graphs])."""
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method"):
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
            if name in _FORWARD_AD_OPS:
                return True
    return False


# Note [forward-AD graphs]: a dual tensor carries its tangent beside its primal and torch's ops
# propagate it; neither our kernels nor the compiled autograd.Function do (a Function without a
# ``jvp`` drops it), so ``fwAD.unpack_dual(y).tangent`` of a compiled result was None. A graph
# that makes or unpacks duals itself (``with fwAD.dual_level(): y = f(fwAD.make_dual(x, t))``
# traced after the ``dual_level`` break) runs through ``gm.forward`` whatever its inputs; a graph
# called with dual inputs does so per call (``has_dual_input`` in src/inductor/wrapper.rs for
# inductor's inference graphs, Note [forward-AD duals]; ``_C.AotRuntime`` for differentiable
# ones), since the guards do not see tangents.


def aot_compile(gm, example_inputs, backend, guarded=True):
    """Compiles ``gm`` with ``backend`` (``"aot_eager"`` or ``"inductor"``). When grad mode is on
    (on entry or in a region the graph switches it on, Note [grad-mode regions]) and an input (or
    parameter) requires grad, returns a callable ``(*inputs) -> tuple`` whose outputs carry a
    ``grad_fn`` backed by the compiled backward graph; otherwise the backend's inference
    compilation of ``gm``.

    Ops without a derivative rule split the graph (Note [segments]); a graph that cannot be
    differentiated at all (an output aliasing an input, a mutated input that requires grad) runs
    through ``gm.forward``, so torch's autograd records it. Both are logged on
    ``aot::partition`` and counted (``aot_graph_splits``, ``aot_eager_graphs``).
    """
    from . import _shapes

    reason = gm.meta.get("dynamo_eager_autograd") if hasattr(gm, "meta") else None
    if reason is not None:
        # Note [autograd introspection at a break] (src/symbolic/convert_frame.rs).
        _C.aot_count_eager(reason)
        return gm.forward
    if _shapes.is_symbolic_graph(gm):
        # Symbolic sizes: one static compilation per input shape (dynamo._shapes).
        return _shapes.SpecializedGraph(gm, lambda g, args: aot_compile(g, args, backend, guarded))
    if _uses_forward_ad(gm):
        # Note [forward-AD graphs].
        _C.aot_count_eager("the graph makes or reads forward-AD dual tensors: their tangents are torch's")
        return gm.forward
    if _autocast_active() or _switches_autocast(gm):
        # Note [autocast]: autocast casts inside each op at run time; the graph does not show
        # those casts, so neither the joint graph's derivative rules nor inductor's kernels
        # would follow them (the backward mixed float32 and bfloat16). Until the casts are made
        # explicit in the graph, it runs through torch, whose autograd records them: under an
        # ambient autocast, and when the graph holds an autocast block of its own.
        # An inference-mode block too: its tensors are inference tensors only when the ops run
        # under the mode, and saving one for backward raises torch's error (Note
        # [inference-mode blocks]).
        _C.aot_count_eager("autocast or inference mode is switched: its effects are not explicit in the graph")
        return gm.forward
    fw_compiler, bw_compiler, inference_compiler = _compilers(backend, guarded)
    params = [p for p in gm.parameters()] + [b for b in gm.buffers()]
    switches = _grad_switches(gm)
    entry_grad = torch.is_grad_enabled()
    needs_grad = (entry_grad or True in switches) and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in list(example_inputs) + params
    )
    if not needs_grad and switches and any(v is not None and v.requires_grad for v in _output_example_values(gm)):
        # A leaf made with ``requires_grad=True`` inside an ``enable_grad()`` block of a graph
        # entered under ``no_grad`` (audit 50, K6): the inference compilation would drop it.
        _C.aot_count_eager("a tensor made in the graph requires grad")
        return gm.forward
    if not needs_grad:
        compiled = inference_compiler(gm, example_inputs)
        # A compiled graph does not run its ``_set_grad_enabled`` nodes: the mode the graph
        # leaves is set after it (the resume function after a break inside a ``no_grad()``
        # block exits the block in its graph: audit 50, K6).
        return _leaving_grad_mode(compiled, switches[-1]) if switches else compiled
    from . import config

    if any(_holds_grad_tensor(v) for v in example_inputs):
        # A segment of a split graph may receive a tuple (``max(dim)``'s result) whose tensors
        # require grad: the autograd.Function would not see them.
        _C.aot_count_eager("an input is a structure holding tensors that require grad")
        return gm.forward
    views = _view_outputs(gm, entry_grad if switches else None)
    if views is not None:
        # Note [view outputs]: the graph without its view outputs, which are made again from
        # their bases around the compiled callable.
        return views.wrap(_no_outputs if views.empty else aot_compile(views.gm, example_inputs, backend, guarded))
    stale = _stale_saved_tensor(gm)
    if stale is not None:
        # Note [writes to saved tensors].
        _C.aot_count_eager(f"an in-place op writes a tensor that {stale} saved for backward")
        return gm.forward
    plan = _C.aot_joint(_flash_attention_graph(gm), example_inputs, partitioner=config.aot_partitioner)
    if isinstance(plan, str):
        segmented = _split_around_gaps(gm, example_inputs, backend)
        if segmented is not None:
            return segmented
        _C.aot_count_eager(plan)
        return gm.forward
    extra = list(plan.extra_inputs)
    fw_inputs = list(example_inputs) + extra
    if extra:  # get_attr values are not guarded by dynamo
        fw_compiler = _compilers(backend, False)[0]
    with torch.no_grad():
        fw = fw_compiler(plan.fw, fw_inputs)
    if not switches and config.aot_eager_without_kernels and getattr(fw, "kernel_names", None) == []:
        # Note [forward without kernels].
        _C.aot_count_kernelless(", ".join(sorted({_target_name(n) for n in gm.graph.nodes if n.op == "call_function"})))
        return gm.forward
    # Note [grad_fn names].
    names = _eager_grad_fn_names(gm)
    main = _main_grad_fn_name(names)
    runtime = _make_runtime(
        plan, fw, bw_compiler, extra, gm.forward, entry_grad if switches else None, main, _saved_outputs(gm), _output_meta(gm)
    )
    runtime = _named_grad_fns(runtime, names, main)
    return _with_grad_regions(runtime, entry_grad, switches[-1]) if switches else runtime


# Note [forward without kernels]: when inductor compiles a differentiated graph's forward to no
# kernel of ours (every op falls back to ATen: one ``nn.Linear``, a chain of matmuls, views),
# the compiled path would run those same ATen ops inside a ``torch.autograd.Function``, whose
# machinery (``Function.apply``, the ctx, the saved-tensor bookkeeping, the runtime wrapper) costs
# ~2 µs a call and fuses nothing. So the graph runs through ``gm.forward`` with torch's autograd
# recording each op, as eager does: the same ATen ops, so results equal eager's exactly, and
# the backward is ATen's derivative of each op (what our backward graph would mostly have
# called too). Only for graphs without grad-mode switches (Note [grad-mode regions]), and
# counted in ``aot_kernelless_graphs``; ``config.aot_eager_without_kernels = False`` keeps the
# compiled path (the derivative-rule tests use it, so each rule is still run under inductor).
# nn.Linear(16, 16) on a 16-vector: the AOT runtime call was 7.1 µs against ``F.linear``'s 4.8.


# Note [view outputs]: a graph output that is a view (expand, view, reshape, slicing,
# transpose, t, unsqueeze, diagonal, as_strided, ...) of an intermediate or of an input cannot
# leave through the graph's ``torch.autograd.Function`` as eager's does: autograd forbids
# in-place writes to a view made inside a custom Function ("...is a view and is being modified
# inplace. This view was created inside a custom Function..."), where eager allows them or
# raises its own error (an expanded view: "more than one element of the written-to tensor
# refers to a single memory location"), and an output aliasing an input would lose its
# ``_base``. So, decided once at compile time, the graph is rewritten to return each such
# view's base instead (an intermediate becomes an extra output; an input is not returned at
# all), and after the call the view ops between base and output are run again on the real
# base, with autograd recording them as in eager: the output is an ordinary view (its
# ``_base``, ``grad_fn`` name, in-place rules and gradients are eager's). A view step is a node
# whose traced value is a view of (or the very tensor of) its first argument's storage and
# whose other arguments are constants; in-place ops are never steps. Graphs without view
# outputs are compiled as before and pay nothing per call. (PyTorch's AOTAutograd does the
# same in its runtime wrappers, regenerating the view by replay or ``as_strided``.) In a graph
# with grad-mode switches (Note [grad-mode regions]) each step is made again in the mode its
# node ran in: a view made under ``no_grad`` of a tensor that requires grad then carries eager's
# creation meta, so an in-place write to it under grad mode raises eager's "...is a view of a
# view which was created in no_grad mode..." instead of the custom Function's error (fuzz
# 108007:388).

_IDENTITY_STEPS = frozenset(
    ("contiguous", "to", "float", "double", "half", "bfloat16", "type", "type_as", "view_as", "reshape_as", "expand_as")
)


def _target_name(node):
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


def _view_step(node):
    """Whether ``node`` only makes a view of (or returns) its first argument, so that it can be
    run again outside the graph on the real tensor (Note [view outputs])."""
    if node.op not in ("call_method", "call_function") or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    name = _target_name(node)
    if not name or (name.endswith("_") and not name.endswith("__")) or name.startswith("__i"):
        return False  # in-place methods (``add_``, ``transpose_``, ``__iadd__``) write
    if node.op == "call_function" and getattr(node.target, "__module__", None) in ("_operator", "operator") and name.startswith("i"):
        return False  # ``operator.iadd`` and its kind
    rest = list(node.args[1:]) + list(node.kwargs.values())
    has_node = []
    torch.fx.node.map_arg(rest, has_node.append)
    if has_node:
        return False
    value, source = _example(node), _example(node.args[0])
    if not isinstance(value, torch.Tensor) or not isinstance(source, torch.Tensor):
        return False
    if value is source:
        return name in _IDENTITY_STEPS
    root = source._base if source._base is not None else source
    return value._base is root


# Multi-output view ops: their pieces are views that autograd refuses to write in place
# ("Output 0 of Split is a view and is being modified inplace ...").
_MULTI_VIEW_OPS = frozenset(("split", "chunk", "unbind", "split_with_sizes", "tensor_split", "hsplit", "vsplit", "dsplit"))


def _multi_view_piece(node):
    """The node ``s`` when ``node`` is ``s[k]`` (a constant ``k``) and ``s`` is a multi-output
    view op (``x.split(1)``, ``torch.chunk(x, 2)``) of a tensor with constant arguments, whose
    piece is a view of ``x``'s storage; None otherwise. Such a piece is made again from ``x``
    by the same op (Note [view outputs]), so that it is eager's multi-output view."""
    if node.op != "call_function" or node.target is not operator.getitem or len(node.args) != 2 or not isinstance(node.args[1], int):
        return None
    s = node.args[0]
    if not isinstance(s, torch.fx.Node) or s.op not in ("call_method", "call_function") or _target_name(s) not in _MULTI_VIEW_OPS:
        return None
    if not s.args or not isinstance(s.args[0], torch.fx.Node):
        return None
    has_node = []
    torch.fx.node.map_arg(list(s.args[1:]) + list(s.kwargs.values()), has_node.append)
    if has_node:
        return None
    value, source = _example(node), _example(s.args[0])
    if not isinstance(value, torch.Tensor) or not isinstance(source, torch.Tensor):
        return None
    root = source._base if source._base is not None else source
    return s if value._base is root else None


class _ViewOutputs:
    """A graph rewritten to return the bases of its view outputs (Note [view outputs]), and how
    to make those views again after the compiled graph ran."""

    def __init__(self, gm, specs, steps, empty, early=()):
        self.gm = gm
        # Outputs (positions) that are views of an input taken before the graph writes that
        # input in place: made before the compiled graph runs (Note [views taken before a write]).
        self.early = tuple(early)
        # Nothing left to run: every output is a view of an input (``return x.t()``).
        self.empty = empty
        # Per original output: ("out", index into the rewritten graph's outputs) |
        # ("input", placeholder index) | ("attr", the attribute's value), and the view steps
        # from that base to the output, outermost last, as (node name, kind, target, args, kwargs,
        # grad mode: None where the graph switches none).
        self.specs = specs
        self.steps = steps

    def wrap(self, compiled):
        specs, steps, early = self.specs, self.steps, self.early

        def replay(value, chain, memo):
            for name, op, target, rest, kwargs, grad in chain:
                if op == "piece":
                    # ``target``: the multi-output op, run once per base (its pieces share
                    # one autograd node, as eager's); ``rest``: the piece's index.
                    if name not in memo:
                        s_op, s_target, s_rest, s_kwargs = target
                        with contextlib.nullcontext() if grad is None else torch.set_grad_enabled(grad):
                            memo[name] = getattr(value, s_target)(*s_rest, **s_kwargs) if s_op == "call_method" else s_target(value, *s_rest, **s_kwargs)
                    value = memo[name][rest[0]]
                    continue
                if name in memo:
                    value = memo[name]
                    continue
                with contextlib.nullcontext() if grad is None else torch.set_grad_enabled(grad):
                    value = getattr(value, target)(*rest, **kwargs) if op == "call_method" else target(value, *rest, **kwargs)
                memo[name] = value
            return value

        def call(*args):
            memo = {}
            made = {k: replay(args[specs[k][1]], steps[k], memo) for k in early}
            res = compiled(*args)
            out = []
            for k, ((kind, where), chain) in enumerate(zip(specs, steps)):
                if k in made:
                    out.append(made[k])
                    continue
                value = res[where] if kind == "out" else args[where] if kind == "input" else where
                out.append(replay(value, chain, memo))
            return tuple(out)

        call.compiled = compiled
        return call


def _replay_step(n, modes):
    """The step ``_ViewOutputs.wrap`` runs for chain node ``n``: (name, kind, target, args, kwargs,
    grad mode); a piece of a multi-output view op (``_multi_view_piece``) is ("piece", the op's
    (kind, target, args, kwargs), (index,)), named by the op's node so its pieces share one call."""
    s = _multi_view_piece(n) if not _view_step(n) else None
    if s is not None:
        return (s.name, "piece", (s.op, s.target, tuple(s.args[1:]), dict(s.kwargs)), (n.args[1],), {}, modes[s.name])
    return (n.name, n.op, n.target, tuple(n.args[1:]), dict(n.kwargs), modes[n.name])


def _view_outputs(gm, entry_grad=None):
    """``_ViewOutputs`` for ``gm`` when one of its outputs is a view step chain (Note [view
    outputs]) over a base that is an input, a get_attr value or an intermediate that is not
    itself a view; None otherwise (the common case: nothing changes). ``entry_grad``: the grad
    mode the graph is entered with when it switches modes (Note [grad-mode regions]), so each
    step is made again in its own mode; None when it switches none."""
    modes = {}
    mode = entry_grad
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled and node.args and isinstance(node.args[0], bool):
            mode = node.args[0]
        modes[node.name] = mode
    out_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    outputs = out_node.args[0]
    if not isinstance(outputs, (tuple, list)):
        return None
    chains = []
    for o in outputs:
        chain = []
        node = o
        while isinstance(node, torch.fx.Node):
            if _view_step(node):
                chain.append(node)
                node = node.args[0]
                continue
            piece_of = _multi_view_piece(node)
            if piece_of is None:
                break
            chain.append(node)
            node = piece_of.args[0]
        base = _example(node) if isinstance(node, torch.fx.Node) else None
        if not chain or not isinstance(base, torch.Tensor):
            chains.append(None)
        elif node.op in ("placeholder", "get_attr") or base._base is None:
            chains.append((node, chain[::-1]))
        else:
            chains.append(None)  # a view of a view that is not a step (``split``'s pieces)
    if all(c is None for c in chains):
        return None
    graph = torch.fx.Graph()
    env = {}
    graph.graph_copy(gm.graph, env)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    kept = [env[o] if isinstance(o, torch.fx.Node) else o for o, c in zip(outputs, chains) if c is None]
    specs, steps = [], []
    kept_index = {}
    j = 0
    for o, c in zip(outputs, chains):
        if c is None:
            specs.append(("out", j))
            steps.append(())
            if isinstance(o, torch.fx.Node):
                kept_index.setdefault(o.name, j)
            j += 1
    new_outputs = list(kept)
    for k, (o, c) in enumerate(zip(outputs, chains)):
        if c is None:
            continue
        base, chain = c
        if base.op == "placeholder":
            spec = ("input", placeholders.index(base.name))
        elif base.op == "get_attr":
            spec = ("attr", _fetch_attr(gm, base.target))
        else:
            if base.name not in kept_index:
                kept_index[base.name] = len(new_outputs)
                new_outputs.append(env[base])
            spec = ("out", kept_index[base.name])
        specs.insert(k, spec)
        steps.insert(k, tuple(_replay_step(n, modes) for n in chain))
    graph.output(tuple(new_outputs))
    # The steps' nodes are dead now unless something else reads them; they only make views,
    # so they can go (a general dead-code pass could drop in-place ops fx thinks pure).
    step_names = {n.name for c in chains if c is not None for n in c[1]}
    for node in reversed(list(graph.nodes)):
        if node.name in step_names and not node.users:
            graph.erase_node(node)
    empty = not new_outputs and all(n.op in ("placeholder", "output") for n in graph.nodes)
    # Note [views taken before a write]: a view of an input that the graph then writes in place
    # (``v = y[0]; y.add_(x)``) is made before the compiled graph runs, as eager made it before
    # the write: it shares the input's storage, so it sees the written values, and autograd
    # keeps its creation facts (a view taken while ``y`` did not require grad refuses a later
    # in-place write, "a leaf Variable that requires grad is being used in an in-place
    # operation", as eager does). Made after the call, it was a fresh view of the written input.
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    early = []
    for k, c in enumerate(chains):
        if c is None or c[0].op != "placeholder":
            continue
        base, chain = c
        writes = [order[u.name] for u in base.users if _writes_in_place(u) and u.args and u.args[0] is base]
        if writes and max(order[n.name] for n in chain) < min(writes):
            early.append(k)
    return _ViewOutputs(graph_module(gm, graph), specs, steps, empty, early)


def _no_outputs(*_args):
    return ()


def _fetch_attr(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _leaving_grad_mode(compiled, exit_grad):
    """``compiled`` (a graph without autograd), then grad mode ``exit_grad``: the mode its last
    ``_set_grad_enabled`` node sets (Note [grad-mode regions]). An exception leaves the mode to
    the caller (``_C.graph_failed`` puts back the frame's)."""
    set_grad = torch._C._set_grad_enabled

    def call(*args):
        out = compiled(*args)
        set_grad(exit_grad)
        return out

    return call


def _with_grad_regions(runtime, entry_grad, exit_grad):
    """``runtime`` called with grad mode on, then left with ``exit_grad`` set, the mode the graph
    leaves (Note [grad-mode regions]); an exception puts back ``entry_grad``."""
    set_grad = torch._C._set_grad_enabled

    def call(*args):
        set_grad(True)
        try:
            out = runtime(*args)
        except BaseException:
            set_grad(entry_grad)
            raise
        set_grad(exit_grad)
        return out

    return call


# Note [flash attention]: eager's ``scaled_dot_product_attention`` runs one of torch's fused
# kernels, whose backward needs statistics of the forward (the logsumexp, and on the GPU the
# dropout RNG's state) that the public function does not return. For the joint graph
# the call is rewritten into the aten overload eager itself calls, which returns them, read
# through ``getitem``; the derivative rule (``sdpa_fused`` in src/autograd/rules.rs) then calls
# the fused backward on the saved output and logsumexp instead
# of recomputing the attention matrix with matrix products (``sdpa_backward``, kept for every
# other case: dropout, grouped-query attention, bool masks, other backends).
# - CPU: ``aten._scaled_dot_product_flash_attention_for_cpu`` -> ``(output, logsumexp)``, for
#   the calls for which eager takes that kernel: 4-d float32/float64 tensors with equal batch,
#   head and head-dim sizes, unit stride in the last dim, no dropout and no mask or a float mask
#   of the query's dtype that needs no gradient.
# - CUDA: ``aten._scaled_dot_product_efficient_attention`` (through
#   ``dynamo._functional.sdpa_efficient``, which returns ``(output, logsumexp)``; the RNG state
#   it also returns is unused without dropout), when torch's own choice for the call
#   (``torch._fused_sdp_choice``, asked of real tensors of the same layout) is the
#   memory-efficient kernel, without dropout; a mask (bool, or float of the query's dtype, that
#   needs no gradient) becomes the bias eager computes from it before that kernel
#   (``dynamo._functional.sdpa_efficient_bias``).
#   On GPT-2's training step on an H200 the recomputed backward (batched products and a
#   softmax-backward kernel) took 2.1 ms more GPU time a step than eager's fused backward.
# ``gm`` itself is left alone: its ``forward`` stays the eager fallback.

_SDPA_TARGETS = (torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)
_SDPA_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def _example(arg):
    return arg.meta.get("example_value", arg.meta.get("val")) if isinstance(arg, torch.fx.Node) else arg


def _cuda_sdpa_is_efficient(q, k, v, mask, causal, scale):
    """True when eager's CUDA ``scaled_dot_product_attention`` of tensors like ``q``, ``k``,
    ``v`` (fake or real) takes the memory-efficient kernel (Note [flash attention]). torch's
    choice (``torch._fused_sdp_choice``) reads sizes, strides, dtypes, ``requires_grad`` and the
    device's capability; fake tensors answer "math" whatever they are, so it is asked of
    uninitialized real tensors of the same layout (none over 64 Mi elements of storage)."""
    try:
        from torch.nn.attention import SDPBackend

        def probe(t):
            extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
            if extent > 1 << 26:
                raise ValueError("too large to probe")
            real = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device)
            return real.requires_grad_(t.requires_grad)

        m = None if mask is None else probe(mask)
        choice = torch._fused_sdp_choice(probe(q), probe(k), probe(v), m, 0.0, causal, scale=scale)
        return choice == SDPBackend.EFFICIENT_ATTENTION.value
    except Exception:  # noqa: BLE001 - no choice known: the call keeps its generic rule
        return False


def _flash_call(node):
    """``(device, q, k, v, mask, is_causal, scale)`` (nodes and constants; ``device`` "cpu" or
    "cuda") when the sdpa call ``node`` takes torch's CPU flash kernel or its CUDA
    memory-efficient kernel (Note [flash attention]), else None."""
    if node.op != "call_function" or node.target not in _SDPA_TARGETS or len(node.args) > len(_SDPA_PARAMS):
        return None
    params = dict(_SDPA_DEFAULTS)
    params.update(zip(_SDPA_PARAMS, node.args))
    if any(k not in _SDPA_PARAMS for k in node.kwargs):
        return None
    params.update(node.kwargs)
    if params["dropout_p"] != 0.0 or params["enable_gqa"] is not False or not isinstance(params["is_causal"], bool):
        return None
    if params["scale"] is not None and not isinstance(params["scale"], float):
        return None
    q, k, v = (_example(params[n]) for n in ("query", "key", "value"))
    if not all(isinstance(t, torch.Tensor) and isinstance(p, torch.fx.Node) for t, p in zip((q, k, v), (params["query"], params["key"], params["value"]))):
        return None
    if any(t.dtype != q.dtype or t.device != q.device or t.dim() != 4 for t in (q, k, v)):
        return None
    if any(not isinstance(s, int) for t in (q, k, v) for s in tuple(t.shape) + tuple(t.stride())):
        return None
    if not (q.shape[:2] == k.shape[:2] == v.shape[:2] and q.shape[3] == k.shape[3] == v.shape[3] and k.shape[2] == v.shape[2]):
        return None
    if any(t.stride(-1) != 1 for t in (q, k, v)) or 0 in q.shape or 0 in k.shape:
        return None
    mask = params["attn_mask"]
    call = (q.device.type, params["query"], params["key"], params["value"], mask, params["is_causal"], params["scale"])
    m = None
    if mask is not None:
        m = _example(mask)
        if not isinstance(mask, torch.fx.Node) or not isinstance(m, torch.Tensor) or m.requires_grad or m.device != q.device:
            return None
        if m.dtype != q.dtype and not (q.device.type == "cuda" and m.dtype == torch.bool):
            return None
    if q.device.type == "cuda":
        if not any(t.requires_grad for t in (q, k, v)):
            return None
        return call if _cuda_sdpa_is_efficient(q, k, v, m, params["is_causal"], params["scale"]) else None
    if q.device.type != "cpu" or q.dtype not in (torch.float32, torch.float64):
        return None
    return call


def _flash_attention_graph(gm):
    """``gm``, or a copy of it whose ``scaled_dot_product_attention`` calls are rewritten into
    the fused aten overloads eager runs (Note [flash attention])."""
    if not any(n.op == "call_function" and n.target in _SDPA_TARGETS for n in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    changed = False
    for node in list(graph.nodes):
        call = _flash_call(node)
        if call is None:
            continue
        device, q, k, v, mask, causal, scale = call
        if device == "cpu":
            op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
            args, kwargs = (q, k, v, 0.0, causal), {"attn_mask": mask, "scale": scale}
        else:
            from ._functional import sdpa_efficient, sdpa_efficient_bias

            op = sdpa_efficient
            bias = None
            if mask is not None:
                with graph.inserting_before(node):
                    bias = graph.call_function(sdpa_efficient_bias, (mask, q, k))
                bias.meta = {"example_value": sdpa_efficient_bias(_example(mask), _example(q), _example(k))}
            args, kwargs = (q, k, v, bias, causal, scale), {}
        try:
            with torch.no_grad():
                values = op(*(_example(a) for a in args), **{n: _example(a) for n, a in kwargs.items()})
        except Exception:  # noqa: BLE001 - the call keeps its generic rule
            if isinstance(args[3], torch.fx.Node):
                graph.erase_node(args[3])
            continue
        with graph.inserting_before(node):
            fused = graph.call_function(op, args, kwargs)
            items = [graph.call_function(operator.getitem, (fused, j)) for j in range(len(values))]
        items[0].meta = dict(node.meta)
        for item, value in zip(items[1:], values[1:]):
            item.meta = {"example_value": value}
        node.replace_all_uses_with(items[0])
        graph.erase_node(node)
        changed = True
    return graph_module(gm, graph) if changed else gm


# Note [segments]: an op without a derivative rule does not send its whole graph to torch. The
# graph is split (torch.fx's split_module) into segments: each such op alone, run by torch with
# autograd recording it, and the runs of nodes between them, each compiled by aot_compile on its
# first call (its inputs are intermediates: their metadata is known only then, and it is fixed
# by the guards on the graph's inputs). One missing rule costs one segment boundary.


class _LazySegment(torch.nn.Module):
    """A segment of a split graph, compiled by ``aot_compile`` on its first call."""

    def __init__(self, gm, backend):
        super().__init__()
        # Compiled graphs return a tuple, as dynamo's graphs do; a segment returning one value
        # is made to return a 1-tuple and unwrapped after the call.
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.single = not isinstance(out.args[0], (tuple, list))
        if self.single:
            out.args = ((out.args[0],),)
            gm.recompile()
        gm.dynamo_segment = True  # Note [stale segment outputs]
        self.gm = gm
        self.backend = backend
        self.compiled = None

    def forward(self, *args):
        if self.compiled is None:
            self.compiled = aot_compile(self.gm, list(args), self.backend, guarded=False)
        res = self.compiled(*args)
        return res[0] if self.single else res


def _split_around_gaps(gm, example_inputs, backend):
    """The graph split around its ops without a derivative rule (Note [segments]), or None when
    splitting cannot help (the reason was logged by ``aot_joint``)."""
    gaps = _C.aot_rule_gaps(gm, example_inputs)
    if isinstance(gaps, str) or not gaps:
        return None
    from torch.fx.passes.split_module import split_module

    # Note [segment value names]: torch.fx's split_module names a segment's placeholders after
    # the values it receives, and its namespace turns "sum_1", "sum_2" into "sum", "sum_1"; the
    # segment's code then rebinds them in order (`sum_1 = sum; sum_2 = sum_1`), so two values
    # whose names differ by a numeric suffix arrive as the same tensor (fuzzer seed 730019:
    # `torch.maximum(a.sum(0), b.sum(0))` around the gap computed the max of `a` with itself).
    # The split runs on a copy whose value names end in a letter, which the namespace keeps.
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    gap_names = set()
    gap_original = {name for name, _ in gaps}
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "output"):
            was = node.name
            node._rename(f"{was}_v")
            if was in gap_original:
                gap_names.add(node.name)
    for node in gm.graph.nodes:
        # torch.fx's split_module reads the free symbols of every value that crosses segments
        # from its example value, and refuses a Python slice (`x[..., : x.shape[-1] // 2]` under
        # dynamic shapes makes a `slice` node, as every rotary embedding does): a tuple of its
        # bounds carries the same symbols.
        if "example_value" in node.meta:
            node.meta["example_value"] = _slices_as_tuples(node.meta["example_value"])
    gm.recompile()
    segment = [0]
    assignment = {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.name in gap_names:
            segment[0] += 1
            assignment[node.name] = segment[0]
            segment[0] += 1
        else:
            assignment[node.name] = segment[0]
    split = split_module(gm, gm, lambda n: assignment[n.name], keep_original_order=True)
    for name, reason in gaps:
        _C.aot_count_split(f"{name}: {reason}")
    gap_segments = {assignment[name] for name in gap_names}
    for name, sub in list(split.named_children()):
        index = int(name.rsplit("_", 1)[-1])
        if index not in gap_segments:
            setattr(split, name, _LazySegment(sub, backend))
        else:
            _quiet_errors(sub)
    return split.forward


def _slices_as_tuples(v):
    """``v`` with every ``slice`` (also inside tuples and lists) replaced by the tuple
    ``(start, stop, step)``, for torch.fx's free-symbol walk."""
    if isinstance(v, slice):
        return (v.start, v.stop, v.step)
    if type(v) in (tuple, list):
        return type(v)(_slices_as_tuples(i) for i in v)
    return v


def _quiet_errors(gm):
    """Makes calls of the fx GraphModule ``gm`` plain ``nn.Module`` calls. torch.fx's call
    wrapper prints "Call using an FX-traced Module ..." and a traceback to stderr for every
    exception raised in generated code, even one the user catches; eager prints nothing, so the
    segment's errors propagate silently (breaker2 finding 08). ``gm``'s class is its own
    (GraphModule makes one per instance), so only this module changes."""
    type(gm).__call__ = torch.nn.Module.__call__


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


# Note [checkpoint]: inside a non-reentrant ``torch.utils.checkpoint`` region (its saved-tensors
# hooks are the innermost ones) torch counts the tensors saved for backward and recomputes the
# region eagerly in the backward; our forward saves other tensors than eager's, so there the
# graph runs through torch (``gm.forward``) and the counts agree (``_C.AotRuntime`` checks).


# Note [double backward]: the compiled backward graph reads saved values that carry no autograd
# history, so its gradients cannot be differentiated again. When a backward runs with grad mode
# on (``torch.autograd.grad(..., create_graph=True)``, ``backward(create_graph=True)``), the
# Function instead reruns the captured graph (``gm.forward``) on the inputs it was called with,
# with autograd recording, and returns ``torch.autograd.grad`` of those outputs with
# ``create_graph=True``: gradients with a history back to the inputs, as in eager. The inputs are
# kept on ``ctx`` for this. Refused (the gradients raise when differentiated,
# ``_refuse_double_backward``) when the rerun would not compute the same values: the graph
# writes its inputs (batch-norm statistics), draws random numbers, or an input was changed in
# place since the forward.


def _reruns_exactly(gm, plan):
    """Whether running ``gm`` again on the same inputs computes the same values and writes
    nothing (Note [double backward]): no input written back, no call whose name says it draws
    random numbers, no submodule call (its class is not inspected)."""
    if list(plan.writeback_inputs):
        return False
    for node in gm.graph.nodes:
        if node.op == "call_module":
            return False
        if node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
            # By the op's own name (``F.normalize`` draws nothing; ``torch.normal`` does).
            if _C.aot_draws_random(name):
                return False
    return True


def _versions(values):
    return tuple(v._version if isinstance(v, torch.Tensor) else None for v in values)


def _rerun_backward(ctx, grads, eager_forward, n_extra, tangent_outputs, input_requires_grad):
    """The gradients of one call's inputs, differentiable (Note [double backward]): the graph
    rerun through torch's autograd on the inputs ``ctx`` kept. None for inputs that need no
    gradient or that the tangent outputs do not depend on."""
    inputs = ctx.dynamo_inputs
    n_args = len(inputs) - n_extra
    with torch.enable_grad():
        outs = eager_forward(*inputs[:n_args])
    pairs = [(outs[k], grads[k]) for k in tangent_outputs if isinstance(outs[k], torch.Tensor) and outs[k].requires_grad]
    # (An input no gradient reaches was handed to ``apply`` detached, Note [inputs no
    # gradient reaches]: it gets none here either.)
    wanted = [i for i, need in enumerate(input_requires_grad) if need and isinstance(inputs[i], torch.Tensor) and inputs[i].requires_grad]
    res = [None] * len(inputs)
    if not pairs or not wanted:
        return tuple(res)
    got = torch.autograd.grad(
        [o for o, _ in pairs], [inputs[i] for i in wanted], [g for _, g in pairs], create_graph=True, allow_unused=True
    )
    for i, g in zip(wanted, got):
        res[i] = g
    return tuple(res)


def _make_runtime(plan, fw, bw_compiler, extra, eager_forward, entry_grad=None, grad_fn_name=None, saved_results=None, output_meta=None):
    """The callable a captured graph runs: a ``torch.autograd.Function`` whose ``forward`` is
    ``_C.AotForward`` (runs ``fw``, writes mutated inputs back, saves what the backward reads)
    and whose ``backward`` compiles ``plan.bw`` on first use, called through ``_C.AotRuntime``
    (``apply(*args, *extra)``, or ``eager_forward`` inside a non-reentrant checkpoint, Note
    [checkpoint]). The per-call parts are Rust (src/autograd/runtime.rs): each Python frame
    there cost a few hundred ns of per-call overhead. ``entry_grad``, for a graph that switches
    grad mode (Note [grad-mode regions]): the mode the graph is entered with, which
    ``eager_forward`` runs under when the graph is run through torch (a checkpoint, a double
    backward) so that its first region records what eager would."""
    n_out = plan.n_outputs
    tangent_outputs = list(plan.tangent_outputs)
    nondiff = [k for k in range(n_out) if k not in set(tangent_outputs)]
    input_requires_grad = list(plan.input_requires_grad)
    state = {"bw": None}

    def compile_backward(bw_args):
        with torch.no_grad():
            state["bw"] = bw_compiler(plan.bw, bw_args)
        _C.aot_count_backward()
        return state["bw"]

    def compile_zero_tangent_backward(absent, bw_args):
        with torch.no_grad():
            state[absent] = bw_compiler(_zero_tangent_backward(plan.bw, plan.n_saved, absent), bw_args)
        _C.aot_count_backward()
        return state[absent]

    gm = getattr(eager_forward, "__self__", None)
    rerun = isinstance(gm, torch.fx.GraphModule) and _reruns_exactly(gm, plan)
    if entry_grad is not None:
        graph_forward = eager_forward

        def eager_forward(*args):
            torch._C._set_grad_enabled(entry_grad)
            return graph_forward(*args)
    n_extra = len(extra)
    # Note [gradients of unused outputs]: autograd calls the backward once any output got a
    # gradient, and by default fills the others with zeros. An input whose gradient is computed
    # only from outputs that got none must get None, as eager gives a parameter the loss never
    # reached (an optimizer steps a zero gradient but skips a None one: AdamW's weight decay
    # moved such a parameter). That happens even with one output: the engine runs the node of a
    # graph whose output fed only a later graph's ``detach``, with no gradient. So the missing
    # gradients stay None (``keep_none_grads``), are filled with zeros for the backward graph
    # here, and an input whose tangents all were missing gets None.
    deps = list(plan.input_tangent_deps)
    partial = [(i, [tangent_outputs[t] for t in d]) for i, (need, d) in enumerate(zip(input_requires_grad, deps)) if need and d]
    if partial and (
        output_meta is None
        or any(k >= len(output_meta) or output_meta[k] is None or not all(isinstance(d, int) for d in output_meta[k][0]) for k in tangent_outputs)
    ):
        partial = []
    unused_meta = {k: output_meta[k] for k in tangent_outputs} if partial else {}
    # With ``rerun``, the forward keeps its inputs and their versions on ctx (``dynamo_inputs``,
    # ``dynamo_versions``) for a backward under create_graph=True (Note [double backward]).
    fw_call = _C.AotForward(fw, n_out, list(plan.writeback_inputs), nondiff, rerun, bool(partial))
    # Note [saved results]: only outputs with a tangent can be reached by a gradient.
    checked = [(k,) + saved_results[k] for k in tangent_outputs if saved_results and k in saved_results]
    if checked:
        compiled_forward_call = fw_call
        zeros_meta = {k: output_meta[k] if output_meta else None for k in tangent_outputs}
        # Outputs without example meta (Note [stale segment outputs]) take their zeros' shape
        # from the forward's own result.
        unknown_meta = [k for k, m in zeros_meta.items() if m is None]

        def fw_call(ctx, *args):
            result = compiled_forward_call(ctx, *args)
            ctx.set_materialize_grads(False)
            if unknown_meta:
                ctx.dynamo_zeros_meta = {k: (result[k].shape, result[k].dtype, result[k].device) for k in unknown_meta}
            _unchecked_saved_results(ctx, {id(result[k]) for k, *_ in checked})
            ctx.dynamo_saved_results = [
                (name, by_result, by_input, result[k].detach(), result[k]._version, output_nr, SavedResultRef(result[k]))
                for k, name, by_result, by_input, output_nr in checked
            ]
            return result

        def check_grads(ctx, grads):
            for name, by_result, by_input, value, version, output_nr, user in ctx.dynamo_saved_results:
                if value._version == version:
                    continue
                # A later op's node runs before the node that made the tensor, and names the
                # tensor by the node it has now (the in-place op's); the making node names it
                # as its own output.
                if any(grads[j] is not None for j in by_input):
                    t = user()
                    fn = t.grad_fn if t is not None else None
                    which = f", which is output {output_nr} of {_message_name(fn)}," if fn is not None else ""
                    raise _modified_saved_output(value, which, version)
                if any(grads[j] is not None for j in by_result):
                    raise _modified_saved_output(value, f", which is output 0 of {name},", version)
            grads = list(grads)
            for k, meta in zeros_meta.items():
                if grads[k] is None:
                    shape, dtype, device = meta if meta is not None else ctx.dynamo_zeros_meta[k]
                    grads[k] = torch.zeros(shape, dtype=dtype, device=device)
            return grads

    else:
        check_grads = None

    class CompiledFunction(torch.autograd.Function):
        # For debugging: the AotPlan (joint graph text, fx graphs) and the compiled forward.
        aot_plan = plan
        compiled_forward = fw
        forward = fw_call

        @staticmethod
        def backward(ctx, *grads):
            missing = {k for k in tangent_outputs if grads[k] is None} if partial else None
            # Note [zero tangents]: the outputs that got no gradient, by tangent position.
            absent = frozenset(t for t, k in enumerate(tangent_outputs) if grads[k] is None)
            if check_grads is not None:
                # On the gradients as they arrived: a missing one reaches no saved result.
                grads = check_grads(ctx, grads)
            if missing:
                grads = list(grads)
                for k in missing:
                    if grads[k] is None:
                        shape, dtype, device = unused_meta[k]
                        grads[k] = torch.zeros(shape, dtype=dtype, device=device)
            if torch.is_grad_enabled() and rerun and _versions(ctx.dynamo_inputs) == ctx.dynamo_versions:
                return _rerun_backward(ctx, grads, eager_forward, n_extra, tangent_outputs, input_requires_grad)
            saved = ctx.saved_tensors
            others = getattr(ctx, "dynamo_saved_values", None)
            if others:
                # Non-tensor saved values (symbolic ints) back in their places (AotForward).
                saved = list(saved)
                for i, v in others:
                    saved.insert(i, v)
            with torch.no_grad():
                tangents = [grads[k].contiguous() for k in tangent_outputs]
                bw_args = list(saved) + tangents
                if absent:
                    bw = state.get(absent) or compile_zero_tangent_backward(absent, bw_args)
                else:
                    bw = state["bw"] or compile_backward(bw_args)
                res = tuple(r if need else None for r, need in zip(bw(*bw_args), input_requires_grad))
            if missing:
                res = list(res)
                for i, ks in partial:
                    if all(k in missing for k in ks):
                        res[i] = None
                res = tuple(res)
            if torch.is_grad_enabled():
                res = _refuse_double_backward(res)
            return res

    if grad_fn_name is not None:
        # Note [grad_fn names].
        CompiledFunction._backward_cls.__name__ = CompiledFunction._backward_cls.__qualname__ = grad_fn_name
    written = set(plan.writeback_inputs)
    candidates = [i for i, (need, d) in enumerate(zip(input_requires_grad, deps)) if need and not d and i not in written]
    unreached = _unreached_inputs(gm, candidates) if isinstance(gm, torch.fx.GraphModule) and candidates else []
    return _C.AotRuntime(CompiledFunction, tuple(extra), eager_forward, list(plan.writeback_inputs), unreached)


# Note [zero tangents]: an output that got no gradient (Note [gradients of unused outputs]) has
# its tangent filled with zeros for the backward graph, but eager never runs that output's
# branch of the backward: its contributions are absent, not zero. They differ where the branch
# multiplies the zero by an infinite or NaN local derivative (``0 * inf``): the tangent of
# ``(y * y).sum()``, a statistic of ``y = x.log()`` only logged after a graph break, times
# ``2 * y`` is NaN at ``x == 0``, which the sum with ``y``'s own gradient spreads to ``x.grad``
# where eager gives ``inf``. So for each set of absent tangents the backward graph is compiled
# once more, rewritten by ``_zero_tangent_backward``: the values that are exactly zero because
# they are made from zero tangents by linear ops (views, ``mul`` and ``div`` of a zero
# numerator, ``neg``, sums, products with a zero operand, ``add`` of two zeros) are replaced by
# ``zeros_like`` where a value that is not zero uses them.
_ZERO_PRESERVING_METHODS = frozenset({
    "reshape", "view", "expand", "expand_as", "view_as", "reshape_as", "permute", "transpose", "t", "squeeze", "unsqueeze",
    "contiguous", "clone", "flatten", "unflatten", "narrow", "select", "sum", "mean", "neg", "to", "type_as", "movedim",
    "__getitem__", "repeat", "sum_to_size", "diagonal", "tril", "triu",
})
_ZERO_PRESERVING_FUNCTIONS = {
    torch.reshape, torch.permute, torch.transpose, torch.squeeze, torch.unsqueeze, torch.flatten, torch.narrow,
    torch.select, torch.sum, torch.mean, torch.neg, torch.clone, torch.movedim, torch.diagonal, torch.tril, torch.triu,
    operator.neg, operator.getitem,
}
_ZERO_IF_ANY = {torch.mul, operator.mul, torch.matmul, torch.mm, torch.bmm, torch.outer}
_ZERO_IF_FIRST = {torch.div, operator.truediv}
_ZERO_IF_ALL = {torch.add, torch.sub, operator.add, operator.sub, torch.cat, torch.stack}


def _zero_tangent_backward(bw, n_saved, absent):
    """A copy of backward ``GraphModule`` ``bw`` (placeholders: ``n_saved`` saved values, then
    the tangents) in which the values made only from the tangents at positions ``absent`` by
    zero-preserving ops are ``zeros_like`` of themselves where other values use them (Note [zero
    tangents]). The result computes the same gradients, without ``0 * inf`` NaNs."""
    from . import _functional

    graph = copy.deepcopy(bw.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    zero = {placeholders[n_saved + t] for t in absent}

    def is_zero(a):
        return isinstance(a, torch.fx.Node) and a in zero

    def tensor_args(n):
        return [a for a in list(n.args) + list(n.kwargs.values()) if isinstance(a, torch.fx.Node)]

    for n in graph.nodes:
        if n.op == "call_method":
            first = n.args[0] if n.args else None
            if n.target in _ZERO_PRESERVING_METHODS and is_zero(first):
                zero.add(n)
            elif n.target == "mul" and any(is_zero(a) for a in n.args):
                zero.add(n)
            elif n.target == "div" and is_zero(first):
                zero.add(n)
        elif n.op == "call_function":
            args = tensor_args(n)
            if n.target is _functional.vjp_call and len(n.args) > 7:
                grads = n.args[7]
                grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
                if all(g is None or is_zero(g) for g in grads):
                    # The op's own backward is not run (it may have none).
                    n.target = _functional.vjp_zeros
                    zero.add(n)
            elif n.target in _ZERO_PRESERVING_FUNCTIONS and n.args and is_zero(n.args[0]):
                zero.add(n)
            elif n.target in _ZERO_IF_ANY and any(is_zero(a) for a in n.args[:2]):
                zero.add(n)
            elif n.target in _ZERO_IF_FIRST and n.args and is_zero(n.args[0]):
                zero.add(n)
            elif n.target in _ZERO_IF_ALL and args and all(is_zero(a) for a in args):
                zero.add(n)
    for n in list(graph.nodes):
        if n not in zero or n.op == "placeholder" or n.target is _functional.vjp_zeros:
            continue
        users = [u for u in n.users if u not in zero]
        if not users:
            continue
        with graph.inserting_after(n):
            zeros = graph.call_function(torch.zeros_like, (n,))
        for u in users:
            u.replace_input_with(n, zeros)
    graph.eliminate_dead_code()
    graph.lint()
    return torch.fx.GraphModule(bw, graph)


# Note [inputs no gradient reaches]: ``Function.apply`` links every input that requires grad
# into the outputs' autograd graph, where eager links an input only through the ops that use it
# differentiably. An input used only through ``detach()``, a comparison, ``zeros_like``,
# ``no_grad`` code, or not at all (a value computed before a graph break and dead after it)
# became a next function of the outputs' node: backward ran into its history ("Trying to
# backward through the graph a second time" in truncated backpropagation through time, whose
# carried state was already backwarded; "modified by an inplace operation" for a dead value),
# its tensor hooks were called with None, and the history stayed alive with the outputs. Which
# inputs eager links is torch's answer: the trace ran every op on fake tensors under autograd,
# so an input is linked when its fake (its AccumulateGrad, or its grad_fn) is reachable from the
# fake outputs' grad_fn. The others are given to ``apply`` detached, among the placeholders
# that require grad, are not written back, and whose gradient in the joint graph reads no
# tangent. (Both must agree: ``x ** 0`` has a gradient that reads no tangent, yet eager links
# ``x``; and a placeholder's fake is not always the object its ops' graph holds, so the walk
# alone would cut a parameter of mobilenet_v3 that does get a gradient.)
def _unreached_inputs(gm, candidates):
    """The positions in ``candidates`` (placeholder indices of ``gm``) whose fake example value
    the fake outputs' autograd graph does not reach (Note [inputs no gradient reaches]); an
    input without an example value counts as reached."""
    outputs = [v for v in _output_example_values(gm) if isinstance(v, torch.Tensor)]
    reached_vars = {id(v) for v in outputs}
    reached_fns = set()
    for node in _autograd_nodes(v.grad_fn for v in outputs):
        reached_fns.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            reached_vars.add(id(var))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    unreached = []
    for i in candidates:
        if i >= len(placeholders):
            continue
        ex = _example(placeholders[i])
        if not isinstance(ex, torch.Tensor) or not ex.requires_grad:
            continue
        if id(ex) in reached_vars or (ex.grad_fn is not None and id(ex.grad_fn) in reached_fns):
            continue
        unreached.append(i)
    return unreached
