//! Common subexpression elimination of math-function calls on the imported fx graph: a second
//! call of the same transcendental op on the same arguments reads the first call's value
//! (PyTorch runs a general CSE pass, `torch/_inductor/fx_passes/...` `fx_graph_cse`, on the
//! graphs it compiles; this one is restricted to the ops where it changes results).
//!
//! Note [one evaluation of a math function]: eager computes `torch.erf(x)` twice with one routine, so both calls give the same bits.
//! The generated code may compute two such nodes in two kernels whose loops take different
//! routines (libmvec's vector variant of one width in one loop, another width or the scalar
//! libm function in the other): one-ulp differences, harmless alone, but
//! `torch.erf(x) - torch.erf(x).min(1, keepdim=True).values > 0` then held at the row's
//! minimum, where eager gives False (the differential fuzzer's inductor seed 2500000, id 6052).
//! Merging the calls makes it one node, computed once for both of its readers. Only pure,
//! deterministic ops of [`CSE_OPS`] are merged, and only calls that are not in-place forms, not
//! in an activation-checkpointed region, and not a written-back value.

use std::collections::HashMap;

use pyo3::prelude::*;

use super::fx_import::{self, FxArg, FxGraph, FxOp};

/// Canonical op names (the lowering table's) merged when their calls are identical: the
/// transcendental functions, whose bits depend on the routine that computes them, and the
/// reductions built on them.
const CSE_OPS: &[&str] = &[
    "erf", "exp", "expm1", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "pow", "softmax", "log_softmax",
];

/// Reductions that return new tensors in a tuple (`x.min(1)` gives `(values, indices)`):
/// their values alias nothing they read.
const TUPLE_REDUCTIONS: &[&str] = &["min", "max", "sort", "topk", "kthvalue", "median", "mode", "var_mean", "std_mean", "aminmax", "cummax", "cummin"];

/// `a` with every `Node(i)` that `replace` maps replaced by its target.
fn rewrite(a: &mut FxArg, replace: &[Option<usize>]) {
    match a {
        FxArg::Node(i) => {
            if let Some(j) = replace[*i] {
                *i = j;
            }
        }
        FxArg::Tuple(items) | FxArg::List(items) => items.iter_mut().for_each(|x| rewrite(x, replace)),
        _ => {}
    }
}

/// Merges identical calls of [`CSE_OPS`] (same op, same target, same arguments after earlier
/// merges); the later call becomes a dead `get_attr` of None, as constant folding leaves its
/// interior nodes. Returns how many calls were merged (Note [one evaluation of a math
/// function]).
pub fn eliminate(py: Python<'_>, g: &mut FxGraph) -> usize {
    let n = g.nodes.len();
    fx_import::set_users(&mut g.nodes);
    // A call whose value can reach the graph's outputs as itself or a view stays: eager
    // returns a distinct tensor for each call, which a caller may write into.
    let internal = |g: &FxGraph, i: usize| {
        g.nodes[i].users.iter().all(|&u| {
            let user = &g.nodes[u];
            let name = match &user.op {
                FxOp::CallMethod { name } => name.as_str(),
                _ => user.target_name.rsplit('.').next().unwrap_or(""),
            };
            !matches!(user.op, FxOp::Output) && (super::functionalize::returns_fresh(g, u) || TUPLE_REDUCTIONS.contains(&name))
        })
    };
    let written: Vec<usize> = g.writebacks.iter().flat_map(|w| [w.dst, w.src]).collect();
    let mut replace: Vec<Option<usize>> = vec![None; n];
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut merged = 0;
    for i in 0..n {
        if merged > 0 {
            let node = &mut g.nodes[i];
            node.args.iter_mut().for_each(|a| rewrite(a, &replace));
            node.kwargs.iter_mut().for_each(|(_, a)| rewrite(a, &replace));
        }
        let node = &g.nodes[i];
        let Some(op) = node.canonical else { continue };
        if !CSE_OPS.contains(&op) || node.inplace || node.recompute || written.contains(&i) || !internal(g, i) {
            continue;
        }
        let kind = match &node.op {
            FxOp::CallFunction { .. } => "call_function",
            FxOp::CallMethod { .. } => "call_method",
            _ => continue,
        };
        let key = format!("{kind}|{}|{op}|{:?}|{:?}", node.target_name, node.args, node.kwargs);
        match seen.get(&key) {
            Some(&first) => {
                replace[i] = Some(first);
                merged += 1;
            }
            None => {
                seen.insert(key, i);
            }
        }
    }
    if merged == 0 {
        return 0;
    }
    let none = g.side_table.len();
    g.side_table.push(py.None());
    for (i, r) in replace.iter().enumerate() {
        if r.is_some() {
            let node = &mut g.nodes[i];
            node.args.clear();
            node.kwargs.clear();
            node.canonical = None;
            node.meta = None;
            node.op = FxOp::GetAttr { value: none };
        }
    }
    fx_import::set_users(&mut g.nodes);
    merged
}
