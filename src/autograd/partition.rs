//! Partitioner: splits the joint graph into a forward graph, which also returns the values the
//! backward needs ("saved tensors"), and a backward graph, which takes those saved values and
//! the tangents and returns one gradient per forward input (PyTorch: `default_partition` and
//! `min_cut_rematerialization_partition` in `torch/_functorch/partitioners.py`).
//!
//! Two policies (`dynamo.config.aot_recompute`):
//! - save every needed intermediate ([`Policy::SaveAll`]): every forward value a backward node
//!   reads is saved;
//! - recompute cheap pointwise values ([`Policy::RecomputePointwise`]): a saved value computed
//!   by a pointwise op from values that are saved anyway (or are graph inputs) is recomputed in
//!   the backward instead, repeatedly, so chains of pointwise ops cost their inputs only; matrix
//!   products, convolutions and reductions stay saved. A simplification of the min-cut: it never
//!   trades one saved tensor for a bigger one, since only values whose inputs are already saved
//!   (or are inputs) are recomputed.
//!
//! Invariants: node lists are in joint-graph (topological) order; the backward reads only
//! saved values, tangents and its own nodes; forward node side effects (running statistics)
//! run only in the forward graph.

use std::collections::BTreeSet;

use super::joint::JointGraph;
use crate::inductor::fx_import::{FxArg, FxOp};

/// Which values the forward saves for the backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    SaveAll,
    RecomputePointwise,
}

/// The two graphs, as node lists of the joint graph.
#[derive(Debug, Default)]
pub struct Partition {
    /// Forward call nodes, in order.
    pub fw_nodes: Vec<usize>,
    /// Backward nodes (recomputed forward nodes included), in order.
    pub bw_nodes: Vec<usize>,
    /// Forward values (inputs included) passed to the backward.
    pub saved: Vec<usize>,
    /// Forward nodes recomputed in the backward.
    pub recomputed: Vec<usize>,
}

fn node_args(j: &JointGraph, i: usize) -> Vec<usize> {
    let n = &j.g.nodes[i];
    let mut v = Vec::new();
    for a in n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)) {
        a.for_each_node(&mut |k| v.push(k));
    }
    v
}

fn is_input(j: &JointGraph, i: usize) -> bool {
    matches!(j.g.nodes[i].op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. })
}

/// True for forward nodes cheap enough to recompute: pointwise ops of the lowering table.
fn cheap(j: &JointGraph, i: usize) -> bool {
    let n = &j.g.nodes[i];
    matches!(n.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. })
        && !n.inplace
        && n.canonical.is_some_and(crate::inductor::lowering::is_pointwise_op)
}

/// Splits `j` under `policy`.
pub fn partition(j: &JointGraph, policy: Policy) -> Partition {
    let first_bw = j.n_fwd;
    // Backward nodes the input gradients need (dead ones dropped).
    let mut needed = vec![false; j.g.nodes.len()];
    let mut stack: Vec<usize> = j.input_grads.iter().flatten().copied().collect();
    while let Some(i) = stack.pop() {
        if i < first_bw || needed[i] {
            continue;
        }
        needed[i] = true;
        stack.extend(node_args(j, i));
    }
    let bw: Vec<usize> = (first_bw..j.g.nodes.len())
        .filter(|&i| needed[i] && !matches!(j.g.nodes[i].op, FxOp::Placeholder { .. }))
        .collect();
    let mut saved: BTreeSet<usize> = BTreeSet::new();
    for &i in &bw {
        for k in node_args(j, i) {
            if k < first_bw {
                saved.insert(k);
            }
        }
    }
    let mut recomputed: BTreeSet<usize> = BTreeSet::new();
    if policy == Policy::RecomputePointwise {
        loop {
            let mut changed = false;
            for s in saved.clone() {
                if is_input(j, s) || !cheap(j, s) {
                    continue;
                }
                let args = node_args(j, s);
                if args.iter().all(|&a| is_input(j, a) || saved.contains(&a) || recomputed.contains(&a)) {
                    saved.remove(&s);
                    recomputed.insert(s);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Recomputed nodes read saved values or other recomputed nodes only.
        for &r in &recomputed {
            for a in node_args(j, r) {
                if !recomputed.contains(&a) {
                    saved.insert(a);
                }
            }
        }
    }
    let fw_nodes: Vec<usize> = (0..first_bw)
        .filter(|&i| matches!(j.g.nodes[i].op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. }))
        .collect();
    let mut bw_nodes: Vec<usize> = recomputed.iter().copied().collect();
    bw_nodes.extend(bw);
    Partition { fw_nodes, bw_nodes, saved: saved.into_iter().collect(), recomputed: recomputed.into_iter().collect() }
}

/// The forward graph's results: the original outputs, then the written-back values, then the
/// saved values.
pub fn forward_outputs(j: &JointGraph, p: &Partition) -> Vec<FxArg> {
    let mut v = j.outputs.clone();
    v.extend(j.g.writebacks.iter().map(|wb| FxArg::Node(wb.src)));
    v.extend(p.saved.iter().map(|&s| FxArg::Node(s)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inductor::fx_import::{FxGraph, FxNode};

    fn n(name: &str, op: FxOp, canonical: Option<&'static str>, args: Vec<usize>) -> FxNode {
        FxNode {
            name: name.into(),
            op,
            canonical,
            target_name: name.into(),
            args: args.into_iter().map(FxArg::Node).collect(),
            kwargs: Vec::new(),
            meta: None,
            users: Vec::new(),
            inplace: false,
        }
    }

    /// x, w -> mm -> relu -> output; the backward reads relu and w (and mm when `reads_mm`);
    /// returns the partition under `policy`.
    fn split(policy: Policy, reads_mm: bool) -> Partition {
        let call = || FxOp::CallFunction { target: 0 };
        let nodes = vec![
            n("x", FxOp::Placeholder { position: 0 }, None, vec![]),
            n("w", FxOp::Placeholder { position: 1 }, None, vec![]),
            n("mm", call(), None, vec![0, 1]),
            n("relu", call(), Some("relu"), vec![2]),
            n("output", FxOp::Output, None, vec![3]),
            n("tangent", FxOp::Placeholder { position: usize::MAX }, None, vec![]),
            n("gt", call(), None, vec![3]),
            n("where", call(), None, vec![6, 5]),
            n("gx", call(), None, vec![7, if reads_mm { 2 } else { 1 }]),
            n("unused", call(), None, vec![2]),
        ];
        let j = JointGraph {
            g: FxGraph { nodes, side_table: Vec::new(), output: 4, writebacks: Vec::new() },
            n_fwd: 5,
            inputs: vec![0, 1],
            input_requires_grad: vec![true, false],
            outputs: vec![FxArg::Node(3)],
            tangents: vec![Some(5)],
            input_grads: vec![Some(8), None],
            requires_grad: vec![true, false, true, true, false, true, false, false, false, false],
        };
        partition(&j, policy)
    }

    #[test]
    fn save_all_saves_what_the_backward_reads() {
        let p = split(Policy::SaveAll, false);
        assert_eq!(p.fw_nodes, vec![2, 3]);
        assert_eq!(p.bw_nodes, vec![6, 7, 8], "dead backward node 9 is dropped");
        assert_eq!(p.saved, vec![1, 3]);
        assert!(p.recomputed.is_empty());
    }

    #[test]
    fn recompute_keeps_non_pointwise_values_saved() {
        // relu's input (mm) is not saved, so relu stays saved: nothing is recomputed.
        let p = split(Policy::RecomputePointwise, false);
        assert_eq!(p.saved, vec![1, 3]);
        assert!(p.recomputed.is_empty());
    }

    #[test]
    fn recompute_pointwise_from_saved_inputs() {
        // mm is saved anyway, so relu is recomputed from it in the backward.
        let p = split(Policy::RecomputePointwise, true);
        assert_eq!(p.saved, vec![2]);
        assert_eq!(p.recomputed, vec![3]);
        assert_eq!(p.bw_nodes, vec![3, 6, 7, 8]);
        assert_eq!(split(Policy::SaveAll, true).saved, vec![2, 3]);
    }
}
