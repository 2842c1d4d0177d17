"""``counters()`` and ``explain()``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import _C


def counters() -> dict[str, int]:
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
