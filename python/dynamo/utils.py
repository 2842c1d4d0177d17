"""``counters()`` and ``explain()``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import _C


def _flat_counters() -> dict[str, int]:
    """Counters since the last ``reset()``: frames_seen, cache_hits, cache_misses, compiles,
    recompiles, graphs, eager_fallbacks, cache_limit_hits, and inductor's kernels_compiled,
    kernel_calls, fallback_nodes when the inductor backend is built in."""
    out = dict(_C.counters())
    from . import _shapes

    # Static compilations of graphs with symbolic sizes, one per distinct input shape.
    out["shape_specializations"] = _shapes.stats["specializations"]
    try:
        out.update({f"inductor_{k}": v for k, v in _C.inductor_counters().items()})
    except AttributeError:
        pass
    return out


class _Counters:
    """``dynamo.counters`` / ``dynamo.utils.counters``: called, the flat counters since the last
    ``reset()`` (``_flat_counters``); indexed by a category, a ``collections.Counter`` as
    ``torch._dynamo.utils.counters[category]`` gives (a defaultdict of Counters there), so code
    written for torch reads the same numbers:

    - ``"stats"``: ``unique_graphs`` (graphs compiled), ``calls_captured`` (not counted here:
      0), ``frames_seen``, ``cache_hits``, ``cache_misses``, ``recompiles``;
    - ``"frames"``: ``total`` (frames seen) and ``ok`` (frames compiled);
    - ``"graph_break"``: one entry per break reason message, its count;
    - ``"aot_autograd"``: ``total`` (differentiated graphs);
    - ``"inductor"``: inductor's counters (``kernels_compiled``, ``kernel_calls``, ...);
    - ``"flat"``: every flat counter.

    Other categories are empty Counters. Counters are read when indexed (a snapshot), and reset
    by ``dynamo.reset()`` (``clear()`` does the same)."""

    def __call__(self) -> dict[str, int]:
        return _flat_counters()

    def __getitem__(self, category: str):
        import collections

        flat = _flat_counters()
        if category == "stats":
            return collections.Counter({"unique_graphs": flat["graphs"], "calls_captured": 0, "frames_seen": flat["frames_seen"], "cache_hits": flat["cache_hits"], "cache_misses": flat["cache_misses"], "recompiles": flat["recompiles"]})
        if category == "frames":
            return collections.Counter({"total": flat["frames_seen"], "ok": flat["compiles"]})
        if category == "graph_break":
            return collections.Counter(r.split(": ", 1)[-1] for r in _C.break_reasons())
        if category == "aot_autograd":
            return collections.Counter({"total": flat.get("aot_graphs", 0)})
        if category == "inductor":
            return collections.Counter({k[len("inductor_"):]: v for k, v in flat.items() if k.startswith("inductor_")})
        if category == "flat":
            return collections.Counter(flat)
        return collections.Counter()

    def __contains__(self, category: str) -> bool:
        return category in ("stats", "frames", "graph_break", "aot_autograd", "inductor", "flat")

    def keys(self):
        return ["stats", "frames", "graph_break", "aot_autograd", "inductor", "flat"]

    def __iter__(self):
        # Without it, iteration fell back to the sequence protocol: __getitem__(0), (1), ...
        # each gave an empty Counter and never raised IndexError (audit 53, U1: a hang).
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]

    def clear(self) -> None:
        from . import eval_frame

        eval_frame.reset()

    def __repr__(self) -> str:
        return f"counters({_flat_counters()!r})"


counters = _Counters()


@dataclass
class ExplainOutput:
    """What ``explain(fn)(*args)`` found: graphs, their op counts, break reasons and guards."""

    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)
    ops_per_graph: list = field(default_factory=list)
    out_guards: list = field(default_factory=list)
    compile_times: str = ""

    @property
    def symbolic_shapes(self) -> list:
        """Per graph, ``name: [sizes]`` of each input whose sizes are symbolic (``s0``, ...) and
        ``name: s1`` of each symbolic int or float input (Note [symbolic sizes])."""
        out = []
        for gm in self.graphs:
            for node in gm.graph.nodes:
                if node.op != "placeholder":
                    continue
                v = node.meta.get("example_value")
                if isinstance(v, (torch.SymInt, torch.SymFloat)):
                    out.append(f"{node.name}: {v}")
                elif isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape):
                    out.append(f"{node.name}: [{', '.join(str(s) for s in v.shape)}]")
        return out

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(o) for o in self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines.extend(f"  {r}" for r in self.break_reasons)
        shapes = self.symbolic_shapes
        if shapes:
            lines.append("Symbolic Shapes:")
            lines.extend(f"  {s}" for s in shapes)
        if self.out_guards:
            lines.append("Guards:")
            lines.extend(f"  {line}" for g in self.out_guards for line in str(g).splitlines())
        return "\n".join(lines)


def explain(fn):
    """``explain(fn)(*args, **kwargs) -> ExplainOutput``: runs ``fn`` under a recording backend."""
    from .eval_frame import OptimizedModule, optimize, reset

    # Look through an already-optimized function or module to its original (as torch's explain
    # does): running the wrapper would switch to its own backend and record nothing here.
    while True:
        if isinstance(fn, OptimizedModule):
            fn = fn._orig_mod
        elif getattr(fn, "_dynamo_orig_callable", None) is not None:
            fn = fn._dynamo_orig_callable
        else:
            break

    def inner(*args, **kwargs):
        reset()
        out = ExplainOutput()

        def backend(gm, example_inputs):
            out.graphs.append(gm)
            out.ops_per_graph.append([n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")])
            return gm.forward

        optimize(backend)(fn)(*args, **kwargs)
        out.graph_count = len(out.graphs)
        out.break_reasons = list(_C.break_reasons())
        out.graph_break_count = len(out.break_reasons)
        codes = [getattr(fn, "__code__", None)]
        out.out_guards = [g for c in codes if c is not None for g in _C.cached_guards(c)]
        return out

    return inner


_FAKE_MODE = []
# (fn, device, argument layouts) -> the output layouts call_on_device found for them.
_LAYOUTS: dict = {}


def _fake_mode():
    """One ``FakeTensorMode`` for ``call_on_device`` (its dispatch cache then serves the same op
    on the same sizes again: GPT-2's twelve attention calls)."""
    if not _FAKE_MODE:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _FAKE_MODE.append(FakeTensorMode())
    return _FAKE_MODE[0]


def call_on_device(fn, args, kwargs, device):
    """``fn(*args, **kwargs)`` for meta-tensor arguments standing for tensors on ``device`` (a
    CUDA ``torch.device``): runs ``fn`` on fake tensors of that device and returns meta tensors
    of the sizes, strides and dtypes its results would have there (tuples and lists kept).
    Used by inductor's meta propagation for ops whose output layout depends on the device
    (attention, convolution: Note [meta propagation on the GPU] in src/inductor/fx_import.rs).
    """
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils import _pytree as pytree

    mode = _fake_mode()

    def to_fake(x):
        if isinstance(x, torch.Tensor) and x.device.type == "meta":
            return FakeTensor(mode, x, device)
        return x

    def describe(x):
        if isinstance(x, torch.Tensor):
            return ("tensor", tuple(x.shape), x.stride(), x.dtype, x.device.type)
        return x

    try:
        key = (fn, device, pytree.tree_map(describe, (tuple(args), dict(kwargs))))
        key = (key[0], key[1], tuple(pytree.tree_leaves(key[2])), str(pytree.tree_structure(key[2])))
        hash(key)
    except TypeError:
        key = None
    layouts = _LAYOUTS.get(key) if key is not None else None
    if layouts is None:
        fargs, fkwargs = pytree.tree_map(to_fake, (tuple(args), dict(kwargs)))
        with mode:
            out = fn(*fargs, **fkwargs)

        def layout(x):
            if isinstance(x, torch.Tensor):
                return ("tensor", tuple(x.shape), x.stride(), x.dtype)
            return x

        layouts = pytree.tree_map(layout, out)
        if key is not None:
            _LAYOUTS[key] = layouts

    def to_meta(x):
        if isinstance(x, tuple) and len(x) == 4 and x[0] == "tensor":
            return torch.empty_strided(x[1], x[2], dtype=x[3], device="meta")
        return x

    return pytree.tree_map(to_meta, layouts, is_leaf=lambda x: isinstance(x, tuple) and len(x) == 4 and x[0] == "tensor")
