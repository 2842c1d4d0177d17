//! Note [alias views]: a view fallback (`reshape`, `t`, `transpose`, ...) that only feeds ops
//! producing fresh tensors (matrix products, attention, kernels) is made without torch's view
//! machinery: `torch._C._dynamo.guards._reinterpret_tensor(base, sizes, strides, 0)` builds a
//! tensor on the base's storage at a layout computed here at compile time, for about 0.2 µs
//! instead of the ~1 µs (plus the plan's argument building) of a Python `reshape` call.
//! Tiny BERT's backward graph runs ~60 such views per call, most of them around the weight
//! gradients' `mm` (PyTorch's generated wrapper does the same with `reinterpret_tensor`).
//!
//! The layout must be exactly the one torch would give the view, so a view is aliased only
//! when:
//! - its base's layout at run time is known exactly: a graph input or constant (checked against
//!   compile-time metadata, or guarded by dynamo), a kernel output (we allocate it), a checked
//!   fallback output, the output of a matrix product whose compile-time layout is contiguous
//!   (`CONTIGUOUS_RESULT_TARGETS`: ATen always allocates it row-major), or another alias;
//! - the op is a pure view whose result layout follows from the base's (`t`, `transpose`,
//!   `permute`, `expand`, `squeeze`/`unsqueeze`, and `view`/`reshape`/`flatten` of a contiguous
//!   base; `contiguous` of a contiguous base is the base itself; basic indexing `x[a:b, i,
//!   None, ...]` with constant bounds, whose storage offset moves by the skipped elements), and
//!   that layout equals the buffer's compile-time layout (which kernels reading it were
//!   compiled for) in every dimension of size other than 1; the storage offset is the base's
//!   plus what a slice or an index skips;
//! - it is not a graph output or write-back (those keep torch's view: `_base`, the shared
//!   version counter that autograd's saved-tensor checks read), and every user is a kernel,
//!   another alias, or a fallback from [`FRESH_RESULT_TARGETS`], whose result never aliases its
//!   arguments: the reinterpreted tensor, with a version counter of its own, never escapes.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::fx_import::{FxArg, FxGraph, FxOp};
use super::ir::{BufferKind, GraphIr, Layout};
use super::wrapper::RtStep;

/// Fallback targets (fx `target_name`) whose results are always new tensors.
const FRESH_RESULT_TARGETS: &[&str] = &[
    "torch.mm",
    "torch.bmm",
    "torch.matmul",
    "torch.addmm",
    "torch._C._nn.linear",
    "torch._ops.aten.mm.default",
    "torch._ops.aten.bmm.default",
    "torch._ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
    "torch._ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
    "dynamo._functional.sdpa_efficient",
    "dynamo._functional.sdpa_efficient_backward",
    "torch._ops.aten.embedding_dense_backward.default",
    "torch._ops.aten.nll_loss_forward.default",
    "torch._ops.aten.nll_loss_backward.default",
    "torch._ops.aten._log_softmax_backward_data.default",
    "torch.nn.functional.embedding",
    "torch.gather",
    "torch.cat",
    "torch._ops.aten.cat.default",
    "torch.nn.functional.pad",
    "torch.nn.functional.cross_entropy",
    "torch.nn.functional.layer_norm",
];

/// Fallback targets whose result is always a new contiguous tensor (ATen allocates the matrix
/// product's result `[m, n]` row-major, `addmm` and `bmm` likewise; `matmul` folds batch dims
/// into an `mm` or runs `bmm` and views the result, and linear's batch dims are a view of it):
/// their output's layout is known exactly when the compile-time layout is contiguous, with no
/// check.
const CONTIGUOUS_RESULT_TARGETS: &[&str] = &[
    "torch.mm",
    "torch._ops.aten.mm.default",
    "torch._C._nn.linear",
    "torch.addmm",
    "torch.bmm",
    "torch._ops.aten.bmm.default",
    "torch.matmul",
];

fn is_contiguous(l: &Layout) -> bool {
    let want = Layout::contiguous_strides(&l.sizes);
    l.sizes.iter().zip(l.strides.iter().zip(&want)).all(|(&n, (a, b))| n == 1 || a == b)
}

/// Sizes and strides equal in every dimension of size other than 1.
fn same_layout(a: &Layout, sizes: &[i64], strides: &[i64]) -> bool {
    a.sizes == sizes && a.sizes.iter().zip(a.strides.iter().zip(strides)).all(|(&n, (x, y))| n == 1 || x == y)
}

fn ints(args: &[FxArg]) -> Option<Vec<i64>> {
    let items = match args {
        [FxArg::Tuple(items)] | [FxArg::List(items)] => items.as_slice(),
        _ => args,
    };
    items.iter().map(|a| if let FxArg::Int(v) = a { Some(*v) } else { None }).collect()
}

fn wrap(d: i64, rank: usize) -> Option<usize> {
    let n = rank.max(1) as i64;
    let w = if d < 0 { d + n } else { d };
    (0..n).contains(&w).then_some(w as usize)
}

/// What an aliased view is: `None` inside means the base itself (contiguous of contiguous);
/// otherwise (sizes, strides, storage offset increment) of the reinterpreted tensor.
type ViewLayout = Option<(Vec<i64>, Vec<i64>, i64)>;

/// Sizes, strides and storage offset increment of basic indexing `base[index]` (a slice, an
/// int, None or `...`, or a tuple of those; Python's slice rules clamp the bounds, torch allows
/// only positive steps); `None` for anything else (tensor indices, an int out of range: torch
/// then raises as it would).
fn basic_index_layout(index: &FxArg, sizes: &[i64], strides: &[i64]) -> Option<(Vec<i64>, Vec<i64>, i64)> {
    let items: Vec<&FxArg> = match index {
        FxArg::Tuple(items) => items.iter().collect(),
        other => vec![other],
    };
    let rank = sizes.len();
    let consuming = items.iter().filter(|a| matches!(a, FxArg::Slice { .. } | FxArg::Int(_))).count();
    if consuming > rank || items.iter().filter(|a| matches!(a, FxArg::Ellipsis)).count() > 1 {
        return None;
    }
    let (mut out_s, mut out_t, mut offset, mut d) = (Vec::new(), Vec::new(), 0i64, 0usize);
    for a in items {
        match a {
            FxArg::Ellipsis => {
                for _ in 0..rank - consuming {
                    out_s.push(sizes[d]);
                    out_t.push(strides[d]);
                    d += 1;
                }
            }
            FxArg::None => {
                out_s.push(1);
                out_t.push(1);
            }
            FxArg::Int(i) => {
                let n = sizes[d];
                let i = if *i < 0 { i + n } else { *i };
                if !(0..n).contains(&i) {
                    return None;
                }
                offset += i * strides[d];
                d += 1;
            }
            FxArg::Slice { start, stop, step, .. } => {
                let n = sizes[d];
                let step = step.unwrap_or(1);
                if step <= 0 {
                    return None;
                }
                let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
                let lo = start.map_or(0, clamp);
                let hi = stop.map_or(n, clamp);
                let len = if hi > lo { (hi - lo + step - 1) / step } else { 0 };
                out_s.push(len);
                out_t.push(strides[d] * step);
                if len > 0 {
                    offset += lo * strides[d];
                }
                d += 1;
            }
            _ => return None,
        }
    }
    out_s.extend_from_slice(&sizes[d..]);
    out_t.extend_from_slice(&strides[d..]);
    Some((out_s, out_t, offset))
}

/// The layout torch gives `node` (a view op of `base`), when it follows from `base` alone.
/// The pure views `view_layout` computes from their base's layout (besides basic indexing and
/// `contiguous`).
const VIEW_OPS: &[&str] = &["t", "transpose", "permute", "view", "reshape", "flatten", "unflatten", "expand", "unsqueeze", "squeeze"];

fn view_layout(g: &FxGraph, node: usize, base: &Layout, out: &Layout) -> Option<ViewLayout> {
    let n = &g.nodes[node];
    if !n.kwargs.is_empty() {
        return None;
    }
    let rank = base.sizes.len();
    let (bs, bt) = (&base.sizes, &base.strides);
    if n.canonical? == "getitem" {
        // Only of a tensor (a tuple-valued node, attention's outputs, has no tensor meta).
        let FxArg::Node(b) = n.args.first()? else { return None };
        g.nodes[*b].meta.as_ref()?;
        let (sizes, strides, offset) = basic_index_layout(n.args.get(1)?, bs, bt)?;
        return same_layout(out, &sizes, &strides).then_some(Some((sizes, strides, offset)));
    }
    let (sizes, strides) = match n.canonical? {
        "contiguous" if n.args.len() == 1 && is_contiguous(base) => return Some(None),
        "view" | "reshape" | "flatten" | "unflatten" if is_contiguous(base) && base.numel() == out.numel() => {
            (out.sizes.clone(), Layout::contiguous_strides(&out.sizes))
        }
        "t" if rank <= 2 && n.args.len() == 1 => (bs.iter().rev().copied().collect(), bt.iter().rev().copied().collect()),
        "transpose" => {
            let d = ints(&n.args[1..])?;
            let [a, b] = d[..] else { return None };
            let (a, b) = (wrap(a, rank)?, wrap(b, rank)?);
            let (mut s, mut t) = (bs.clone(), bt.clone());
            if rank > 0 {
                s.swap(a, b);
                t.swap(a, b);
            }
            (s, t)
        }
        "permute" => {
            let d = ints(&n.args[1..])?;
            if d.len() != rank {
                return None;
            }
            let d: Vec<usize> = d.iter().map(|&x| wrap(x, rank)).collect::<Option<_>>()?;
            (d.iter().map(|&k| bs[k]).collect(), d.iter().map(|&k| bt[k]).collect())
        }
        "expand" => {
            let to = &out.sizes;
            let lead = to.len().checked_sub(rank)?;
            let mut t = Vec::with_capacity(to.len());
            for (k, &s) in to.iter().enumerate() {
                if k < lead {
                    t.push(0);
                } else if bs[k - lead] == s {
                    t.push(bt[k - lead]);
                } else if bs[k - lead] == 1 {
                    t.push(0);
                } else {
                    return None;
                }
            }
            (to.clone(), t)
        }
        "squeeze" | "unsqueeze" | "view" | "reshape" | "flatten" => {
            // Only dims of size 1 come or go: the other dims keep their strides, in order.
            let keep_b: Vec<usize> = (0..rank).filter(|&k| bs[k] != 1).collect();
            let keep_o: Vec<usize> = (0..out.sizes.len()).filter(|&k| out.sizes[k] != 1).collect();
            if keep_b.len() != keep_o.len() || keep_b.iter().zip(&keep_o).any(|(&b, &o)| bs[b] != out.sizes[o]) {
                return None;
            }
            let mut t = vec![1; out.sizes.len()];
            for (&b, &o) in keep_b.iter().zip(&keep_o) {
                t[o] = bt[b];
            }
            (out.sizes.clone(), t)
        }
        _ => return None,
    };
    same_layout(out, &sizes, &strides).then_some(Some((sizes, strides, 0)))
}

/// False when `DYNAMO_INDUCTOR_ALIAS_VIEWS=0` at compile time (every view stays a torch call;
/// for measuring this against it).
pub fn enabled() -> bool {
    std::env::var("DYNAMO_INDUCTOR_ALIAS_VIEWS").map_or(true, |v| v != "0")
}

/// Note [checked tuple items]: an item of a tuple-valued fallback (`getitem(sdpa_backward, 2)`:
/// attention's gradients) has no layout the plan knows exactly, so the views torch takes of it
/// (`transpose(1, 2)`, then a `reshape` merging the heads) stayed Python calls, ~2-7 µs each,
/// six pairs per step in tiny BERT's backward. Such an item gets its result checked at run time
/// (its compile-time layout, ~0.5 µs; a mismatch runs the graph through torch), which makes it
/// an exact base for aliases. True for a `getitem` node of a node without tensor meta that some
/// view op (one `view_layout` knows) reads.
pub fn views_of_tuple_item(g: &FxGraph, ir: &GraphIr, node: usize) -> bool {
    let n = &g.nodes[node];
    let tuple_item = n.canonical == Some("getitem")
        && matches!(n.args.first(), Some(FxArg::Node(src)) if g.nodes[*src].meta.is_none());
    tuple_item
        && ir.node_buffer[node].is_some()
        && n.users.iter().any(|&u| {
            let user = &g.nodes[u];
            matches!(user.op, FxOp::CallMethod { .. } | FxOp::CallFunction { .. })
                && user.canonical.is_some_and(|c| VIEW_OPS.contains(&c))
        })
}

/// Rewrites eligible view fallbacks of `steps` into [`RtStep::Alias`] (Note [alias views]).
/// `keep`: slots the output or a write-back reads; `exact_inputs`: input and constant slots
/// whose layout is checked or guarded at run time. Returns the aliased slots with their bases.
pub fn alias_views(
    py: Python<'_>,
    g: &FxGraph,
    ir: &GraphIr,
    steps: &mut [RtStep],
    keep: &[bool],
    exact_inputs: &[usize],
) -> PyResult<Vec<(usize, usize)>> {
    let n = ir.buffers.len();
    // Candidates, found in step order (a base must be exact when its view runs).
    let mut candidate: Vec<Option<(usize, ViewLayout)>> = vec![None; n];
    let mut banned = vec![false; n];
    loop {
        let mut exact = vec![false; n];
        exact_inputs.iter().for_each(|&s| exact[s] = true);
        candidate.iter_mut().for_each(|c| *c = None);
        for step in steps.iter() {
            match step {
                RtStep::Kernel { args, .. } => args.iter().for_each(|&s| exact[s] = true),
                RtStep::Fallback { slot, args, check, .. } => {
                    let node = ir.buffers[*slot].node;
                    let contiguous_result = CONTIGUOUS_RESULT_TARGETS.contains(&g.nodes[node].target_name.as_str())
                        && ir.buffers[*slot].layout.as_ref().is_some_and(is_contiguous);
                    if check.is_some() || contiguous_result {
                        exact[*slot] = true;
                    }
                    if keep[*slot] || banned[*slot] {
                        continue;
                    }
                    let (Some(ArgTSlot(src)), Some(out)) = (args.first().map(ArgTSlot::of), ir.buffers[*slot].layout.as_ref()) else { continue };
                    let Some(src) = src else { continue };
                    let Some(base) = ir.buffers[src].layout.as_ref() else { continue };
                    if !exact[src] || base.dtype != out.dtype || base.cpu != out.cpu {
                        continue;
                    }
                    if !matches!(g.nodes[node].op, FxOp::CallMethod { .. } | FxOp::CallFunction { .. }) {
                        continue;
                    }
                    if let Some(v) = view_layout(g, node, base, out) {
                        candidate[*slot] = Some((src, v));
                        exact[*slot] = true;
                    }
                }
                RtStep::Alias { .. } => {}
            }
        }
        // A candidate whose value could escape through a user is banned; repeat until stable.
        let mut changed = false;
        for slot in 0..n {
            if candidate[slot].is_none() {
                continue;
            }
            let node = ir.buffers[slot].node;
            let ok = g.nodes[node].users.iter().all(|&u| {
                let user = &g.nodes[u];
                if matches!(user.op, FxOp::Output) {
                    return false;
                }
                match ir.node_buffer[u] {
                    Some(b) => match &ir.buffers[b.0 as usize].kind {
                        BufferKind::Fallback(_) => {
                            candidate[b.0 as usize].is_some() || FRESH_RESULT_TARGETS.contains(&user.target_name.as_str())
                        }
                        BufferKind::Pointwise(_) | BufferKind::Reduction(_) | BufferKind::Scatter(_) => true,
                        _ => false,
                    },
                    // Inlined into a kernel (no buffer of its own).
                    None => matches!(user.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. }) && user.canonical.is_some(),
                }
            });
            if !ok {
                banned[slot] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let reinterpret = py.import("torch._C._dynamo.guards")?.getattr("_reinterpret_tensor")?;
    let mut done = Vec::new();
    for step in steps.iter_mut() {
        let RtStep::Fallback { slot, .. } = step else { continue };
        let slot = *slot;
        let Some((src, v)) = candidate[slot].take() else { continue };
        let layout = match v {
            None => None,
            Some((sizes, strides, offset)) => Some((PyTuple::new(py, &sizes)?.unbind(), PyTuple::new(py, &strides)?.unbind(), offset)),
        };
        *step = RtStep::Alias { slot, src, layout, reinterpret: reinterpret.clone().unbind() };
        done.push((slot, src));
    }
    Ok(done)
}

/// Note [identity dropout]: `F.dropout(x, p=0.0, training=True)` and `F.dropout(x, p,
/// training=False)` return `x` itself, the same object (ATen's `_dropout_impl` returns its input
/// when `p == 0 || !train`, and the CPU path never takes the fused kernel for `p == 0`;
/// `F.dropout(x, 0.0, True) is x` holds). The lowering makes such a dropout a view when kernels
/// read it, but one read by the graph's output (a value saved for the backward: transformers'
/// attention and hidden dropouts at probability 0) stayed a call of `F.dropout`, ~7-10 µs of
/// Python argument handling. It becomes an [`RtStep::Alias`] without a layout, i.e. the input
/// object itself: what the call returned, at no cost, whatever its users (output or not).
/// Only a call with constant `p` / `training` and `inplace` absent or false is rewritten, and
/// one whose result is checked at run time (kernels read it) only when its input is a kernel
/// output of the same layout.
pub fn identity_dropouts(py: Python<'_>, g: &FxGraph, ir: &GraphIr, steps: &mut [RtStep]) -> PyResult<Vec<(usize, usize)>> {
    let mut done = Vec::new();
    let mut reinterpret = None;
    for step in steps.iter_mut() {
        let RtStep::Fallback { slot, args, kwargs, check, .. } = step else { continue };
        let node = &g.nodes[ir.buffers[*slot].node];
        if node.target_name != "torch.nn.functional.dropout" || !matches!(node.op, FxOp::CallFunction { .. }) {
            continue;
        }
        let Ok(a) = super::decompositions::bind(node, &["input", "p", "training", "inplace"]) else { continue };
        let p = match a[1] {
            None => Some(0.5),
            Some(FxArg::Float(v)) => Some(*v),
            Some(FxArg::Int(v)) => Some(*v as f64),
            _ => None,
        };
        let training = match a[2] {
            None => Some(true),
            Some(FxArg::Bool(b)) => Some(*b),
            _ => None,
        };
        let inplace = match a[3] {
            None => Some(false),
            Some(FxArg::Bool(b)) => Some(*b),
            _ => None,
        };
        let (Some(p), Some(training), Some(false)) = (p, training, inplace) else { continue };
        if training && p != 0.0 {
            continue;
        }
        // The runtime's input template must be the graph value itself (a plain slot), and no
        // keyword the binding did not see.
        let (Some(ArgTSlot(Some(src))), true) = (args.first().map(ArgTSlot::of), kwargs.len() == node.kwargs.len()) else { continue };
        // A checked result (kernels read it) keeps its call unless the input is a kernel output
        // (we allocate it, at its compile-time layout) with the layout the check expects: the
        // check validates the layout the kernels were compiled for.
        let kernel_output = matches!(ir.buffers[src].kind, BufferKind::Pointwise(_) | BufferKind::Reduction(_) | BufferKind::Scatter(_));
        if check.is_some() && !(kernel_output && ir.buffers[src].layout.is_some() && ir.buffers[src].layout == ir.buffers[*slot].layout) {
            continue;
        }
        if reinterpret.is_none() {
            reinterpret = Some(py.import("torch._C._dynamo.guards")?.getattr("_reinterpret_tensor")?.unbind());
        }
        let slot = *slot;
        *step = RtStep::Alias { slot, src, layout: None, reinterpret: reinterpret.as_ref().map(|r| r.clone_ref(py)).expect("set above") };
        done.push((slot, src));
    }
    Ok(done)
}

/// Note [allocated as viewed]: kernels read and write their buffers through data pointers, so a
/// kernel output whose tensor only one alias reads (a `[4, 32, 64]` gradient reshaped to
/// `[128, 64]`, or transposed, for a matrix product) can be allocated with the alias's sizes and
/// strides in the first place when both describe the same dense bytes; the alias then passes the
/// tensor itself (no `_reinterpret_tensor` call, ~0.2 µs each, about 60 per step in tiny BERT's
/// backward). Conditions: the view starts at the base's first element, addresses exactly its
/// elements (a dense layout: some order of its dims has strides 1, s0, s0*s1, ...), the base is
/// not kept (an output, a write-back) and nothing but kernels and this alias reads it. Returns
/// the (alias, base) slots rewritten.
pub fn allocate_as_viewed(py: Python<'_>, steps: &mut [RtStep], keep: &[bool]) -> PyResult<Vec<(usize, usize)>> {
    let n = keep.len();
    // Readers of each slot's tensor object (kernels read pointers only).
    let mut object_readers = vec![0usize; n];
    for step in steps.iter() {
        match step {
            RtStep::Kernel { .. } => {}
            RtStep::Alias { src, .. } => object_readers[*src] += 1,
            RtStep::Fallback { args, kwargs, .. } => {
                let mut mark = |s: usize| object_readers[s] += 1;
                args.iter().for_each(|a| a.for_each_slot(&mut mark));
                kwargs.iter().for_each(|(_, a)| a.for_each_slot(&mut mark));
            }
        }
    }
    let dense = |sizes: &[i64], strides: &[i64]| -> bool {
        let mut dims: Vec<(i64, i64)> = sizes.iter().zip(strides).filter(|(s, _)| **s != 1).map(|(s, t)| (*t, *s)).collect();
        dims.sort_unstable();
        let mut want = 1;
        for (t, s) in dims {
            if t != want {
                return false;
            }
            want *= s;
        }
        true
    };
    let mut rewrites: Vec<(usize, usize, Vec<i64>, Vec<i64>)> = Vec::new();
    for step in steps.iter() {
        let RtStep::Alias { slot, src, layout: Some((sizes, strides, 0)), .. } = step else { continue };
        if keep[*src] || object_readers[*src] != 1 {
            continue;
        }
        let sizes: Vec<i64> = sizes.bind(py).extract()?;
        let strides: Vec<i64> = strides.bind(py).extract()?;
        if sizes.contains(&0) || !dense(&sizes, &strides) {
            continue;
        }
        rewrites.push((*slot, *src, sizes, strides));
    }
    let mut done = Vec::new();
    for (slot, src, sizes, strides) in rewrites {
        let alloc = steps.iter_mut().find_map(|st| match st {
            RtStep::Kernel { allocs, .. } => allocs.iter_mut().find(|a| a.slot == src),
            _ => None,
        });
        let Some(alloc) = alloc else { continue };
        let base_sizes: Vec<i64> = alloc.sizes.bind(py).extract()?;
        let base_strides: Vec<i64> = alloc.strides.bind(py).extract()?;
        if base_sizes.iter().product::<i64>() != sizes.iter().product::<i64>() || !dense(&base_sizes, &base_strides) {
            continue;
        }
        alloc.sizes = PyTuple::new(py, &sizes)?.unbind();
        alloc.strides = PyTuple::new(py, &strides)?.unbind();
        for st in steps.iter_mut() {
            if let RtStep::Alias { slot: a, layout, .. } = st {
                if *a == slot {
                    *layout = None;
                }
            }
        }
        done.push((slot, src));
    }
    Ok(done)
}

/// The slot of a template argument that is a plain slot.
struct ArgTSlot(Option<usize>);

impl ArgTSlot {
    fn of(a: &super::wrapper::ArgT) -> ArgTSlot {
        ArgTSlot(if let super::wrapper::ArgT::Slot(s) = a { Some(*s) } else { None })
    }
}
