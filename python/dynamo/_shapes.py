"""Symbolic sizes (dynamic shapes): the glue between the Rust tracer and torch's ``ShapeEnv``.

The tracer (src/symbolic/output_graph.rs, Note [symbolic sizes]) propagates shapes with torch's
own meta functions on fake tensors. For an input with dynamic dimensions, the fake tensor's sizes
are ``torch.SymInt``s over size symbols of a ``ShapeEnv``; every decision the trace takes on
them (a branch, a specialization, a broadcast that needs two sizes equal) is recorded there as a
guard. This module creates those fakes, folds sizes that are known numbers, and exports the
``ShapeEnv``'s guards as plain nested tuples that Rust turns into its own relation guards
(``GuardKind::ShapeRelations`` in src/guards), checked on every cache hit without Python.

It also holds ``SpecializedGraph``: a backend of ours given a graph with symbolic sizes compiles
one static version per distinct input shape (in milliseconds), keyed by the inputs' sizes and
strides at call time.
"""

from __future__ import annotations

import contextlib

import torch

#: Name prefix of the torch ``ConstantSource`` given to the k-th dynamic input's fake tensor.
_SOURCE_PREFIX = "__dynamo_dyn"


def attach_shape_env(fake_mode) -> object:
    """Gives ``fake_mode`` a fresh ``ShapeEnv`` (data-dependent outputs stay errors: ``.item()``
    and ``nonzero`` on fakes raise as they do without one, which the tracer turns into graph
    breaks). Returns the ``ShapeEnv``."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv(allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False)
    fake_mode.shape_env = env
    return env


def symbolic_fake(fake_mode, tensor: torch.Tensor, dims, k: int):
    """A fake of ``tensor`` whose sizes at ``dims`` are size symbols (0 and 1 stay static, as
    torch specializes them). ``k`` names the input in the ``ShapeEnv``'s sources."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    dims = set(dims)
    if tensor._base is not None or tensor.storage_offset() != 0:
        # A view (a batch sliced from a dataset tensor): fakeified as a fresh tensor of the same
        # sizes and strides at offset 0, so neither its base's sizes nor its storage offset
        # become symbols (no guard may depend on them: the graph computes on the real input).
        # Aliasing between inputs is still checked at run time where it matters (mutated inputs,
        # functionalize::mutated_input_shares_storage).
        alias = tensor.detach().as_strided(tensor.size(), tensor.stride(), 0).detach()
        alias.requires_grad_(tensor.requires_grad)
        tensor = alias
    ctx = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if i in dims else DimDynamic.STATIC for i in range(tensor.dim())]
    )
    return fake_mode.from_tensor(
        tensor, static_shapes=False, source=ConstantSource(f"{_SOURCE_PREFIX}{k}"), symbolic_context=ctx
    )


def symbolic_int(shape_env, value: int, k: int):
    """A ``SymInt`` for a Python int input (the k-th dynamic input) whose value changed between
    compiles (automatic dynamic ints)."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    source = ConstantSource(f"{_SOURCE_PREFIX}{k}")
    # Not assumed positive, and 0 and 1 are not specialized (torch's unspecialized ints).
    sym = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
    return shape_env.create_symintnode(sym, hint=value, source=source)


def symbolic_float(shape_env, value: float, k: int):
    """A ``SymFloat`` for a Python float input (the k-th dynamic input): floats are graph inputs,
    not constants, as torch's ``specialize_float = False``. A use of its value in Python (a
    branch on it) makes a float guard, which ``export_guards`` refuses (the frame is then
    compiled with the value specialized)."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    source = ConstantSource(f"{_SOURCE_PREFIX}{k}")
    sym = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
    return shape_env.create_symfloatnode(sym, hint=value, source=source)


def float_derived(s) -> bool:
    """Whether the symbolic number ``s`` was computed from a float input (Note [float inputs]):
    its expression holds a float symbol, or an operand of the operation that made it did."""
    node = s.node
    if getattr(node, "_dynamo_float", False):
        return True
    expr = node.expr
    return any(not sym.is_integer for sym in getattr(expr, "free_symbols", ()))


def note_value_use(s):
    """Records that the trace reads the value of ``s`` (a branch, a comparison, ``int(s)``);
    returns its value when ``s`` is computed from a float input, else ``None`` (the caller
    asks the ``ShapeEnv``, which guards; a float input itself is read exactly there). For a float-derived value the ``ShapeEnv``'s answer cannot be
    trusted (sympy re-associates float arithmetic: ``(f + 1e-17) - f`` is ``1e-17`` there,
    ``0.0`` in Python), so the frame is marked to be compiled again with its floats
    specialized (``export_guards`` refuses it), as torch specializes a float that a guard
    reads; meanwhile the value is the node's hint, which torch computes operation by operation
    on Python numbers, and the ``ShapeEnv`` is not consulted (it would log failures)."""
    node = getattr(s, "node", None)
    env = getattr(node, "shape_env", None)
    if env is None or not float_derived(s):
        return None
    if getattr(node.expr, "is_Symbol", False) and not getattr(node, "_dynamo_float", False):
        # The float input itself, not computed: a relation between it and a number
        # (``lr > 0.3``) is exact, and guarded as such (evaluated in f64 in Rust).
        return None
    env._dynamo_float_read = True
    hint = node.hint
    if hint is None:
        return None
    if isinstance(s, torch.SymBool):
        return bool(hint)
    if isinstance(s, torch.SymFloat):
        return float(hint)
    return int(hint)


def _rounded(o) -> bool:
    """Whether ``o`` is a symbolic float that an operation already rounded (``n / m``,
    ``math.sqrt(n)``; not ``float(n)``, exact for the ints a size takes). Float arithmetic on
    it rounds a second time, where the ``ShapeEnv``'s exact algebra does not: ``(n / m) * m ==
    n`` holds there and not in Python for n = 1, m = 49 (Note [float constants with symbolic
    ints] in src/symbolic/variables/tensor.rs). ``floor``/``ceil`` of it, or one comparison,
    agree with Python for such values and stay symbolic."""
    if isinstance(o, torch.SymFloat):
        func = getattr(o.node.expr, "func", None)
        return getattr(func, "__name__", "") != "ToFloat"
    return False


def sym_constant(s, operands=()):
    """The Python number a ``SymInt``/``SymFloat``/``SymBool`` is known to equal (its
    expression after the ``ShapeEnv``'s replacements is a number), else ``None``. Never adds a
    guard. A value computed from a float input (``operands``: the example values of the
    operation's operands) is never folded, and is marked as float-derived (Note [float
    inputs]): sympy's algebra on it is not Python's IEEE double arithmetic. So is a value
    computed with a Python float constant, or by float arithmetic on an already rounded
    symbolic float (``_rounded``)."""
    if isinstance(s, (torch.SymInt, torch.SymFloat, torch.SymBool)) and (
        float_derived(s)
        or any(isinstance(o, (torch.SymInt, torch.SymFloat, torch.SymBool)) and float_derived(o) for o in operands)
        or any(type(o) is float for o in operands)
        or (isinstance(s, torch.SymFloat) and any(_rounded(o) for o in operands))
    ):
        s.node._dynamo_float = True
        return None
    node = s.node
    expr = node.expr
    env = getattr(node, "shape_env", None)
    if env is not None:
        expr = env.replace(expr)
    if not getattr(expr, "is_number", False):
        return None
    if isinstance(s, torch.SymBool):
        return bool(expr)
    if isinstance(s, torch.SymFloat):
        return float(expr)
    return int(expr)


def sym_hint(v) -> int:
    """The example value of a size (an int, or a ``SymInt``'s hint), without guarding."""
    if isinstance(v, torch.SymInt):
        hint = v.node.hint
        return int(hint) if hint is not None else int(v.node.expr)
    return int(v)


def size_hints(t) -> tuple[list[int], list[int]]:
    """(sizes, strides) of a (fake) tensor as example ints, without guarding."""
    return [sym_hint(s) for s in t.size()], [sym_hint(s) for s in t.stride()]


class UnsupportedShapeGuard(Exception):
    """A ``ShapeEnv`` expression the Rust guard evaluator does not model."""


#: Float functions a shape relation may apply (`math.<name>` of a size or number), evaluated in
#: f64 by `src/guards/shapes.rs`.
_UNARY_FLOAT_FNS = ("sqrt", "exp", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh")


def _convert(expr, sym_index):
    import sympy

    from torch.utils._sympy import functions as F

    if expr is sympy.true:
        return ("int", 1)
    if expr is sympy.false:
        return ("int", 0)
    if isinstance(expr, sympy.Integer):
        return ("int", int(expr))
    if isinstance(expr, sympy.Float):
        return ("float", float(expr))
    if isinstance(expr, sympy.Rational):
        # p/q (sympy keeps `s0 / 3` exact): a float quotient, as the relation is one over floats.
        return ("truediv", ("int", int(expr.p)), ("int", int(expr.q)))
    if isinstance(expr, sympy.Number):
        raise UnsupportedShapeGuard(f"non-integer constant {expr}")
    if isinstance(expr, sympy.Symbol):
        if expr not in sym_index:
            raise UnsupportedShapeGuard(f"symbol {expr} has no input source")
        return ("sym", sym_index[expr])
    args = [_convert(a, sym_index) for a in expr.args] if not isinstance(expr, sympy.Pow) else None
    rel = {
        sympy.Eq: "eq",
        sympy.Ne: "ne",
        sympy.Lt: "lt",
        sympy.Le: "le",
        sympy.Gt: "gt",
        sympy.Ge: "ge",
    }
    for cls, name in rel.items():
        if type(expr) is cls:
            return (name, *args)
    if isinstance(expr, sympy.Add):
        return ("add", *args)
    if isinstance(expr, sympy.Mul):
        return ("mul", *args)
    if isinstance(expr, sympy.Pow):
        base, exp = expr.args
        if isinstance(exp, sympy.Integer) and int(exp) >= 0:
            return ("pow", _convert(base, sym_index), ("int", int(exp)))
        raise UnsupportedShapeGuard(f"power {expr}")
    if isinstance(expr, F.FloorDiv):
        return ("floordiv", *args)
    if isinstance(expr, F.PowByNatural):
        return ("pow", *args)
    # Float-valued functions (from `float(n)`, `n / 3`, `math.sqrt(n)`, `abs`): relations over
    # them are evaluated in f64, as Python computes them.
    if isinstance(expr, sympy.Abs):
        return ("abs", *args)
    if isinstance(expr, F.ToFloat):
        return ("tofloat", *args)
    if isinstance(expr, (F.FloatTrueDiv, F.IntTrueDiv)):
        return ("truediv", *args)
    if isinstance(expr, F.FloatPow):
        return ("powf", *args)
    if isinstance(expr, (F.FloorToInt, F.CeilToInt, F.TruncToInt, F.RoundToInt)):
        return ({F.FloorToInt: "floor", F.CeilToInt: "ceil", F.TruncToInt: "trunc", F.RoundToInt: "round"}[type(expr)], *args)
    if type(expr).__name__.startswith("OpaqueUnaryFn_"):
        fn = type(expr).__name__[len("OpaqueUnaryFn_"):]
        if fn in _UNARY_FLOAT_FNS:
            return (fn, *args)
    if isinstance(expr, (F.Mod, F.PythonMod)) or type(expr).__name__ == "Mod":
        return ("mod", *args)
    if isinstance(expr, (sympy.Max, getattr(F, "Max", sympy.Max))):
        return ("max", *args)
    if isinstance(expr, (sympy.Min, getattr(F, "Min", sympy.Min))):
        return ("min", *args)
    if isinstance(expr, sympy.And):
        return ("and", *args)
    if isinstance(expr, sympy.Or):
        return ("or", *args)
    if isinstance(expr, sympy.Not):
        return ("not", *args)
    raise UnsupportedShapeGuard(f"{type(expr).__name__}: {expr}")


def export_guards(shape_env):
    """The ``ShapeEnv``'s facts as relations over the dynamic inputs' sizes.

    Returns ``(bindings, relations)``: ``bindings[i] = (k, dim)`` says size symbol ``i`` is
    ``size(dim)`` of the k-th dynamic input; each relation is a nested tuple
    (``("ge", ("sym", 0), ("int", 2))``) over ``sym``/``int`` leaves and the operators
    ``add mul pow floordiv mod max min eq ne lt le gt ge and or not`` and, over floats,
    ``abs tofloat truediv powf floor ceil trunc`` and unary float functions (``sqrt``, ``cos``, ...). They say: every other
    source of a symbol (sizes found equal) equals its first; each symbol lies in its value
    range (``>= 2`` after 0/1 specialization); every guard the trace recorded holds; every
    replacement the ``ShapeEnv`` learned (``s1 == s0``) holds. Raises ``UnsupportedShapeGuard``
    for an expression outside that language (the frame is then compiled with static shapes).
    """
    import sympy

    if getattr(shape_env, "_dynamo_float_read", False):
        raise UnsupportedShapeGuard("the trace read the value of a float input")
    sym_index = {}
    bindings = []
    relations = []
    for sym, sources in shape_env.var_to_sources.items():
        first = None
        for src in sources:
            if getattr(src, "source_name", "").startswith(_SOURCE_PREFIX):
                # A symbolic int or float input: the value itself (dim -1 for an int, -2 for a
                # float: its symbol is not declared integer).
                binding = (int(src.source_name[len(_SOURCE_PREFIX):]), -1 if sym.is_integer else -2)
            else:
                base = getattr(src, "base", None)
                name = getattr(base, "source_name", "")
                if getattr(src, "prop", None) is None or src.prop.name != "SIZE" or not name.startswith(_SOURCE_PREFIX):
                    raise UnsupportedShapeGuard(f"symbol {sym} comes from {src.name}")
                binding = (int(name[len(_SOURCE_PREFIX):]), int(src.idx))
            if first is None:
                first = len(bindings)
                sym_index[sym] = first
                bindings.append(binding)
            else:
                # Another size found equal to the first at creation: bound separately, then equal.
                other = len(bindings)
                bindings.append(binding)
                relations.append(("eq", ("sym", other), ("sym", first)))
    for sym, vr in shape_env.var_to_range.items():
        if sym not in sym_index:
            continue
        for bound, op in ((vr.lower, "ge"), (vr.upper, "le")):
            if isinstance(bound, sympy.Integer):
                relations.append((op, ("sym", sym_index[sym]), ("int", int(bound))))
    for g in shape_env.guards:
        relations.append(_convert(g.expr, sym_index))
    for sym, e in shape_env.replacements.items():
        if sym in sym_index:
            relations.append(("eq", ("sym", sym_index[sym]), _convert(e, sym_index)))
    if getattr(shape_env, "deferred_runtime_asserts", None):
        if any(shape_env.deferred_runtime_asserts.values()):
            raise UnsupportedShapeGuard("deferred runtime asserts")
    return bindings, relations


def is_symbolic_graph(gm) -> bool:
    """Whether any node of ``gm`` has a symbolic example value (a size symbol in a shape, or a
    ``SymInt``)."""
    for node in gm.graph.nodes:
        v = node.meta.get("example_value")
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape):
            return True
    return False


import operator as _operator

#: Pointwise ops where a Python number combined with a tensor is only a value (never a size).
_VALUE_OPS = {
    _operator.add, _operator.sub, _operator.mul, _operator.truediv, _operator.pow,
    torch.add, torch.sub, torch.mul, torch.div, torch.pow, torch.true_divide,
    "add", "sub", "mul", "div", "pow", "true_divide", "__add__", "__sub__", "__mul__",
    "__truediv__", "__radd__", "__rsub__", "__rmul__", "__rtruediv__",
}


def runtime_number_inputs(gm) -> set:
    """Indices of the placeholders of ``gm`` that stay inputs of its static versions: floats
    (never sizes), and symbolic ints whose every use is a pointwise op with a tensor result
    (``x * n``: a value, not a size). Other ints are folded into each static version."""
    memo = {}

    def value_only(node):
        # Every use: a pointwise op giving a tensor, arithmetic giving a value-only number, or
        # the graph's output.
        if node not in memo:
            memo[node] = False
            memo[node] = bool(node.users) and all(
                u.op == "output"
                or (
                    u.op in ("call_function", "call_method")
                    and u.target in _VALUE_OPS
                    and (
                        isinstance(u.meta.get("example_value"), torch.Tensor)
                        or (isinstance(u.meta.get("example_value"), torch.SymInt) and value_only(u))
                    )
                )
                for u in node.users
            )
        return memo[node]

    out = set()
    for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        v = node.meta.get("example_value")
        if isinstance(v, (float, torch.SymFloat)) or (isinstance(v, torch.SymInt) and value_only(node)):
            out.add(i)
    return out


def _key(args, runtime):
    # Runtime number inputs (floats, value-only ints) are keyed by type only.
    key = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.stride(), a.dtype, a.device))
        elif i in runtime:
            key.append(type(a))
        else:
            key.append((type(a), a))
    return tuple(key)


def static_graph(gm, args, runtime=frozenset()):
    """A copy of ``gm`` specialized to ``args``' shapes: every node's ``example_value`` is
    recomputed on static fake tensors, and nodes whose value is a number (sizes and arithmetic
    on them) are folded into constants, so the copy is the graph a static capture would give.
    Float inputs stay inputs (and what is computed from them stays a node): they never decide
    a shape, so one static graph serves every value."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from dynamo import _amp

    # The graph's effect nodes run here too: grad mode switches, autocast and inference-mode
    # blocks (Note [inference-mode blocks] in _amp.py), which a graph cut by a break inside a
    # block enters without leaving. The thread's state is put back as it was found.
    grad = torch.is_grad_enabled()
    ambient = _amp.snapshot()
    try:
        return _static_graph(gm, args, runtime)
    finally:
        _amp.restore(ambient)
        torch._C._set_grad_enabled(grad)


def _is_effect(node):
    """Whether `node` is one of the trace's effect nodes on the thread's autograd or autocast
    state (`torch._C._set_grad_enabled`, the `dynamo._amp` switches)."""
    t = node.target
    return node.op == "call_function" and (t is torch._C._set_grad_enabled or getattr(t, "__module__", None) == "dynamo._amp")


def _static_graph(gm, args, runtime):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    graph = torch.fx.Graph()
    env = {}
    values = {}
    runtime_inputs = runtime
    runtime = set()  # nodes whose value depends on a runtime number input
    placeholders = iter(args)
    index = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            real = next(placeholders)
            new = graph.node_copy(node, lambda n: env[n])
            v = mode.from_tensor(real) if isinstance(real, torch.Tensor) else real
            if index in runtime_inputs:
                runtime.add(node)
            index += 1
        elif node.op == "output":
            graph.node_copy(node, lambda n: env[n])
            continue
        else:
            fn_args = torch.fx.node.map_arg(node.args, lambda n: values[n])
            fn_kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
            # An effect node (a grad-mode, autocast or inference-mode switch) runs outside the
            # fake mode: an inference-mode guard entered inside it would keep the mode's Python
            # dispatch key in the state it puts back when it exits (after the mode has ended).
            with contextlib.nullcontext() if _is_effect(node) else mode:
                if node.op == "call_function":
                    v = node.target(*fn_args, **fn_kwargs)
                elif node.op == "call_method":
                    v = getattr(fn_args[0], node.target)(*fn_args[1:], **fn_kwargs)
                elif node.op == "get_attr":
                    v = getattr(gm, node.target)
                else:  # "call_module" (graphs a user's pass rewrote): the submodule on fakes
                    v = gm.get_submodule(node.target)(*fn_args, **fn_kwargs)
            if any(a in runtime for a in node.all_input_nodes):
                runtime.add(node)
            elif isinstance(v, (int, float, bool)) or (
                isinstance(v, (tuple, list)) and all(isinstance(i, (int, float, bool)) for i in v)
            ):
                env[node] = v
                values[node] = v
                continue
            new = graph.node_copy(node, lambda n: env[n])
        new.meta = dict(node.meta)
        new.meta["example_value"] = v
        env[node] = new
        values[node] = v
    from .aot import graph_module

    return graph_module(gm, graph)


def _identity(t):
    return t


@contextlib.contextmanager
def _masked_saved_tensor_hooks():
    """Pushes identity saved-tensor hooks over the user's for the duration, if any are set."""
    autograd = torch._C._autograd
    if autograd._top_saved_tensors_default_hooks(False) is None:
        yield
        return
    autograd._push_saved_tensors_default_hooks(_identity, _identity)
    try:
        yield
    finally:
        autograd._pop_saved_tensors_default_hooks()


#: Static compilations kept per graph with symbolic inputs; past it, new input shapes (or
#: values of symbolic ints and floats) run the graph module itself, with torch's kernels.
MAX_SPECIALIZATIONS = 16


class SpecializedGraph:
    """The callable a backend of ours returns for a graph with symbolic sizes: one static
    compilation per distinct (sizes, strides, dtype, device) of the tensor inputs and value of
    the number inputs, made on first use by ``compile_fn(static_gm, args)`` and kept (at most
    ``MAX_SPECIALIZATIONS``; then ``gm.forward``). ``specializations`` counts them."""

    def __init__(self, gm, compile_fn):
        self.gm = gm
        self.compile_fn = compile_fn
        self.compiled = {}
        self.specializations = 0
        self.runtime = runtime_number_inputs(gm)

    def __call__(self, *args):
        key = _key(args, self.runtime)
        fn = self.compiled.get(key)
        if fn is None:
            if len(self.compiled) >= MAX_SPECIALIZATIONS:
                return self.gm.forward(*args)
            # Compiling runs ops on fake tensors that require grad: the user's saved-tensor
            # hooks (activation checkpointing) must not see them, as the frame hook masks
            # them while tracing.
            with _masked_saved_tensor_hooks():
                fn = self.compile_fn(static_graph(self.gm, args, self.runtime), list(args))
            self.compiled[key] = fn
            self.specializations += 1
            stats["specializations"] += 1
        return fn(*args)


#: Process-wide counts: ``specializations`` (static compilations of graphs with symbolic sizes).
stats = {"specializations": 0}


def forget_real_tensors(mode):
    """Drops what fake-tensor mode ``mode`` remembers of the real tensors it converted: the
    weak references (``torch.utils.weak.WeakIdRef``) its MetaConverter keys them by. The fake
    tensors of a compiled graph keep the mode alive, and those references made every tensor a
    frame had seen refuse ``torch.utils.swap_tensors`` ("it has weakref associated with it",
    which ``Module.to`` under ``set_swap_module_params_on_conversion`` runs). Called when a
    trace's OutputGraph goes; the mode converts anew if it is used again."""
    conv = getattr(mode, "fake_tensor_converter", None)
    describer = getattr(getattr(conv, "meta_converter", None), "describer", None)
    for name in ("lookup_tensor", "lookup_storage"):
        table = getattr(describer, name, None)
        if table is not None:
            table.clear()


class SymArgument(int):
    """Stands for a symbolic int argument of a torch module's constructor run at trace time
    (``nn.CrossEntropyLoss(ignore_index=logits.size(1))``, Note [symbolic module arguments] in
    src/symbolic/variables/nn_module.rs). It equals the size's current value and records any
    use of that value (arithmetic, comparison, hashing, conversion, formatting): a constructor
    that only stores it leaves ``used`` False, and the attribute that holds this very object
    stands for the symbolic int in the trace."""

    used = False

    def __new__(cls, value):
        return super().__new__(cls, value)


def _mark_use(name):
    base = getattr(int, name)

    def method(self, *args, **kwargs):
        self.used = True
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __floordiv__ __rfloordiv__ __truediv__ __rtruediv__ "
    "__mod__ __rmod__ __divmod__ __rdivmod__ __pow__ __rpow__ __neg__ __pos__ __abs__ __invert__ "
    "__and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__ "
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __index__ __int__ __float__ "
    "__round__ __trunc__ __floor__ __ceil__ __str__ __repr__ __format__ __reduce__ __reduce_ex__ "
    "__getnewargs__ __sizeof__ bit_length bit_count to_bytes as_integer_ratio conjugate"
).split():
    if hasattr(int, _name):
        setattr(SymArgument, _name, _mark_use(_name))
del _name


def sym_argument_users(module, spy):
    """The names of ``module``'s instance attributes that hold ``spy`` itself, or ``None`` when
    the constructor used its value or put it anywhere else (a tuple, a nested object)."""
    if spy.used:
        return None
    names = []
    for k, v in vars(module).items():
        if v is spy:
            names.append(k)
        elif isinstance(v, (tuple, list, dict, set)) and _holds(v, spy):
            return None
    return names


def _holds(container, spy):
    items = container.values() if isinstance(container, dict) else container
    for i in items:
        if i is spy or (isinstance(i, (tuple, list, dict, set)) and _holds(i, spy)):
            return True
    return False
