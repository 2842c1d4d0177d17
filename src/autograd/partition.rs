//! Partitioner: splits the joint graph into a forward graph, which also returns the values the
//! backward needs ("saved tensors"), and a backward graph, which takes those saved values and
//! the tangents and returns one gradient per forward input (PyTorch: `default_partition` and
//! `min_cut_rematerialization_partition` in `torch/_functorch/partitioners.py`).
//!
//! Two policies (`dynamo.config.aot_partitioner`):
//! - [`Policy::SaveAll`] (`"save_all"`): every forward value a backward node reads is saved;
//! - [`Policy::MinCut`] (`"min_cut"`, the default): the rematerializing partitioner. The forward
//!   values are the vertices of a flow network; a minimum s-t cut picks the cheapest set of
//!   values (in bytes) to save such that everything else the backward reads can be recomputed
//!   from them, in the backward, by "recomputable" ops only: pointwise ops of the lowering
//!   table and views (cheap, and fused into the backward's kernels by the inductor). Matrix
//!   products, convolutions, reductions, random ops, in-place (functionalized) ops and anything
//!   else are banned from recomputation, so they run once, in the forward. See Note [min-cut].
//!
//! Invariants: node lists are in joint-graph (topological) order; the backward reads only
//! saved values, tangents and its own nodes (recomputed forward nodes included); forward node
//! side effects (running statistics) run only in the forward graph.

use std::collections::{BTreeSet, VecDeque};

use super::joint::JointGraph;
use crate::inductor::fx_import::{FxArg, FxOp};
use crate::inductor::ir::DType;

/// Which values the forward saves for the backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Save every forward value the backward reads.
    SaveAll,
    /// Save a minimum-byte cut; recompute cheap values in the backward (Note [min-cut]).
    MinCut,
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
    v.sort_unstable();
    v.dedup();
    v
}

fn is_input(j: &JointGraph, i: usize) -> bool {
    matches!(j.g.nodes[i].op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. })
}

/// View ops (by canonical name): recomputing one costs no kernel.
const VIEW_OPS: &[&str] = &["view", "reshape", "flatten", "unflatten", "transpose", "permute", "unsqueeze", "squeeze", "t", "expand", "contiguous"];

/// Substrings of the target names of random ops: never recomputed (a second draw would differ
/// from the forward's), whatever the lowering table says.
const RANDOM_MARKERS: &[&str] = &["rand", "dropout", "bernoulli", "normal", "multinomial", "uniform", "poisson"];

/// True for forward nodes the min-cut may recompute in the backward: pointwise ops of the
/// lowering table and views of tensors, never random or in-place (functionalized) ones.
pub fn recomputable(j: &JointGraph, i: usize) -> bool {
    let n = &j.g.nodes[i];
    if !matches!(n.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. }) || n.inplace || n.meta.is_none() {
        return false;
    }
    let target = n.target_name.to_ascii_lowercase();
    if RANDOM_MARKERS.iter().any(|m| target.contains(m)) {
        return false;
    }
    if n.recompute {
        // Note [activation checkpointing]: any deterministic op of a checkpointed region.
        return true;
    }
    match n.canonical {
        Some(c) if crate::inductor::lowering::is_pointwise_op(c) => true,
        // A view of a tensor (not `getitem` of a tuple: the tuple itself cannot be saved).
        Some(c) if VIEW_OPS.contains(&c) || c == "getitem" => {
            matches!(n.args.first(), Some(FxArg::Node(k)) if j.g.nodes[*k].meta.is_some())
        }
        _ => false,
    }
}

/// Bytes of one element of `d` (`Other` counts as 8, like the widest common dtypes).
fn itemsize(d: DType) -> u64 {
    match d {
        DType::F32 => 4,
        DType::Bool => 1,
        DType::BF16 | DType::F16 => 2,
        DType::I32 => 4,
        DType::F64 | DType::I64 | DType::Other => 8,
    }
}

/// Cost of saving a forward value that is not an input: a tensor with static sizes costs its
/// bytes; anything else (no meta: a structure, a symbolic-size tensor) a large finite cost, so
/// the cut saves it only where every alternative is worse (where save-all would save it too).
fn save_cost(j: &JointGraph, i: usize) -> u64 {
    match &j.g.nodes[i].meta {
        Some(m) => (m.layout.numel().max(0) as u64) * itemsize(m.layout.dtype),
        None => UNKNOWN_COST,
    }
}

/// Bytes of the saved forward values that are not graph inputs (with [`save_cost`]'s sizes;
/// values without meta are not counted).
pub fn saved_bytes(j: &JointGraph, p: &Partition) -> u64 {
    p.saved.iter().filter(|&&s| !is_input(j, s) && j.g.nodes[s].meta.is_some()).map(|&s| save_cost(j, s)).sum()
}

const UNKNOWN_COST: u64 = 1 << 40;
const INF: u64 = 1 << 62;

/// A flow network with integer capacities; maximum flow by Dinic's algorithm (BFS level graph,
/// then blocking flows by DFS with per-vertex edge cursors).
struct FlowNetwork {
    /// Per vertex: indices into `edges`.
    adj: Vec<Vec<usize>>,
    /// (head, residual capacity); edge `e ^ 1` is the reverse of edge `e`.
    edges: Vec<(usize, u64)>,
}

impl FlowNetwork {
    fn new(n: usize) -> Self {
        FlowNetwork { adj: vec![Vec::new(); n], edges: Vec::new() }
    }

    fn add_edge(&mut self, from: usize, to: usize, cap: u64) {
        self.adj[from].push(self.edges.len());
        self.edges.push((to, cap));
        self.adj[to].push(self.edges.len());
        self.edges.push((from, 0));
    }

    /// Levels from `s` over edges with residual capacity (None: unreachable).
    fn levels(&self, s: usize) -> Vec<Option<u32>> {
        let mut level = vec![None; self.adj.len()];
        level[s] = Some(0);
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for &e in &self.adj[u] {
                let (v, cap) = self.edges[e];
                if cap > 0 && level[v].is_none() {
                    level[v] = Some(level[u].unwrap_or(0) + 1);
                    queue.push_back(v);
                }
            }
        }
        level
    }

    /// Pushes up to `limit` from `u` to `t` along the level graph; returns the amount pushed.
    fn push(&mut self, u: usize, t: usize, limit: u64, level: &[Option<u32>], cursor: &mut [usize]) -> u64 {
        if u == t {
            return limit;
        }
        while cursor[u] < self.adj[u].len() {
            let e = self.adj[u][cursor[u]];
            let (v, cap) = self.edges[e];
            if cap > 0 && level[v].is_some() && level[v] == level[u].map(|l| l + 1) {
                let pushed = self.push(v, t, limit.min(cap), level, cursor);
                if pushed > 0 {
                    self.edges[e].1 -= pushed;
                    self.edges[e ^ 1].1 += pushed;
                    return pushed;
                }
            }
            cursor[u] += 1;
        }
        0
    }

    /// The maximum flow from `s` to `t` (saturating at [`INF`]).
    fn max_flow(&mut self, s: usize, t: usize) -> u64 {
        let mut flow: u64 = 0;
        loop {
            let level = self.levels(s);
            if level[t].is_none() || flow >= INF {
                return flow;
            }
            let mut cursor = vec![0; self.adj.len()];
            loop {
                let pushed = self.push(s, t, INF, &level, &mut cursor);
                if pushed == 0 {
                    break;
                }
                flow = flow.saturating_add(pushed);
            }
        }
    }

    /// Vertices that reach `t` over edges with residual capacity (the sink side of the minimum
    /// cut closest to the sink).
    fn reaching(&self, t: usize) -> Vec<bool> {
        let mut seen = vec![false; self.adj.len()];
        seen[t] = true;
        let mut queue = VecDeque::from([t]);
        while let Some(v) = queue.pop_front() {
            // An edge u -> v with residual capacity is the reverse of the edge stored at v.
            for &e in &self.adj[v] {
                let u = self.edges[e].0;
                if !seen[u] && self.edges[e ^ 1].1 > 0 {
                    seen[u] = true;
                    queue.push_back(u);
                }
            }
        }
        seen
    }
}

// Note [min-cut]: the choice of saved values as a minimum s-t cut (the idea of PyTorch's
// rematerializing partitioner). Each forward value v (inputs and call nodes) is an edge
// v_in -> v_out whose capacity is the cost of saving v: its bytes, or 0 for a graph input
// the backward reads (parameters and the caller's inputs are alive anyway; one it does not read
// is never saved, Note [inputs eager does not save]). A use of u by a forward node v is an
// edge u_out -> v_in, and a forward value a backward node reads an edge v_out -> sink, both of
// infinite capacity; so are source -> v_in for inputs and for values that must be computed in
// the forward ([`recomputable`] is false: matmul, conv, reductions, random and in-place ops).
// In a finite cut, the source side holds what the forward computes; the sink side what the
// backward has: a value whose v_in is on the source side and v_out on the sink side is saved,
// one wholly on the sink side is recomputed (every input of it is saved or recomputed, as the
// infinite use edges cannot be cut). "Save every value the backward reads" is one finite cut, so
// the minimum never costs more bytes than save-all. Among minimum cuts we take the one closest
// to the sink (the least recomputation): the sink side is what reaches the sink in the residual
// network.

// Note [inputs eager does not save]: an input the backward's derivative rules read is one eager
// saves too (the rules read what derivatives.yaml's formulas read), and it is alive anyway, so
// saving it costs nothing; so is one whose view a rule reads (`mm(x, w.t())` saves the view,
// which shares `w`'s version counter). An input no rule reads is one eager never saves: saving it only to
// recompute something from it in the backward would change what the user may do between the
// forward and `backward()`. PPO-style observation normalization, `loss = net((obs - mean) /
// std); mean.add_(delta); loss.backward()`, works in eager (`sub` and `div` by a constant save
// nothing of `mean`), but with `mean` saved and `obs - mean` recomputed, autograd's version
// check raised "one of the variables needed for gradient computation has been modified by an
// inplace operation" (and without the check the gradient would have used the new mean). So such
// an input's saving capacity is infinite: the cut never goes through it, and what the backward
// needs of values computed from it is saved as computed, as eager saves it. The inputs of a
// checkpointed region are the exception: eager's checkpoint saves them to run the region again.
// (Activation memory can grow where a pointwise value computed only from inputs was recomputed
// before; it is what eager keeps.)

// Note [save bases, not views]: a view has the bytes of its base, so "save the view" and "save
// its base, recompute the view" cost the same, and the cut closest to the sink saved the view
// (tiny BERT: each attention layer's q, k, v `view` + `transpose` were forward graph outputs).
// A view as a forward output stays a torch view call (Note [alias views] in
// src/inductor/alias.rs keeps outputs as torch's views: ~1.5 µs each), while a view recomputed
// in the backward from a saved base, and one that then only feeds fresh-result ops in the
// forward, can be aliased (~0.2 µs). So each view's capacity carries a tie-breaker: bytes x
// TIE_SCALE, plus 1 for a view (`VIEW_OPS` but `contiguous`, which copies a non-contiguous
// input). Among cuts of equal bytes, the one that saves fewer views wins; bytes still decide
// otherwise, as long as a cut's extra views number fewer than TIE_SCALE x its byte saving
// (byte costs differ by whole elements, so 64 or more views for 4 bytes). The scale is small so
// that a saved value of unknown size (UNKNOWN_COST x 16 = 2^44) leaves room for 2^18 of them
// in a flow below INF.
const TIE_SCALE: u64 = 16;

// Note [activation checkpointing]: `torch.utils.checkpoint.checkpoint(fn, *args,
// use_reentrant=False)` is traced by inlining `fn` (src/symbolic/object_protocol.rs,
// `activation_checkpoint`); the nodes it makes carry fx `meta["recompute"]` (`FxNode::recompute`,
// torch.compile's tag for the same regions). Eager's non-reentrant checkpoint saves only the
// region's inputs and runs the region again during the backward; here that is a partitioning
// choice: under the min-cut policy a tagged node is recomputable whatever its op (matmuls
// included; random ops still never are: a second draw would differ) and its saving capacity is
// infinite, so the cut goes through the region's inputs and everything the backward reads from
// inside the region is recomputed in the backward graph. Values and gradients are those of
// eager either way; only memory changes. "save_all" ignores the tags (the comparison policy).

/// True for a pure view node (`VIEW_OPS` but `contiguous`): see Note [save bases, not views].
fn is_view(j: &JointGraph, v: usize) -> bool {
    j.g.nodes[v].canonical.is_some_and(|c| c != "contiguous" && VIEW_OPS.contains(&c))
}

/// Saved and recomputed forward values under the minimum cut for the backward `reads` (forward
/// values read by needed backward nodes); the forward values are the forward graph's and the
/// `forward_side` nodes (Note [forward-side statistics]).
fn min_cut(j: &JointGraph, reads: &BTreeSet<usize>, forward_side: &BTreeSet<usize>) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let value = |v: usize| is_input(j, v) || matches!(j.g.nodes[v].op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. });
    let verts: Vec<usize> = (0..j.n_fwd).filter(|&v| value(v)).chain(forward_side.iter().copied()).collect();
    let mut pos: Vec<Option<usize>> = vec![None; j.g.nodes.len()];
    for (k, &v) in verts.iter().enumerate() {
        pos[v] = Some(k);
    }
    // Inputs the backward reads, directly or through views (`mm(x, w.t())` saves `w.t()`, which
    // shares `w`'s version counter: eager's "saved" is `w`).
    let mut read_inputs = BTreeSet::new();
    for &r in reads {
        let mut v = r;
        while !is_input(j, v) && is_view(j, v) {
            match j.g.nodes[v].args.first() {
                Some(FxArg::Node(u)) => v = *u,
                _ => break,
            }
        }
        if is_input(j, v) {
            read_inputs.insert(v);
        }
    }
    // Inputs of checkpointed regions: eager's checkpoint saves them (Note [activation
    // checkpointing]).
    let checkpointed_users: BTreeSet<usize> =
        (0..j.n_fwd).filter(|&v| j.g.nodes[v].recompute).flat_map(|v| node_args(j, v)).filter(|&u| is_input(j, u)).collect();
    let nv = verts.len();
    let (source, sink) = (2 * nv, 2 * nv + 1);
    let (vin, vout) = (|k: usize| 2 * k, |k: usize| 2 * k + 1);
    let mut net = FlowNetwork::new(2 * nv + 2);
    for (k, &v) in verts.iter().enumerate() {
        let cost = if is_input(j, v) {
            // Note [inputs eager does not save].
            if read_inputs.contains(&v) || checkpointed_users.contains(&v) { 0 } else { INF }
        } else if j.g.nodes[v].recompute && recomputable(j, v) {
            // Note [activation checkpointing]: never saved; the cut passes through the region's
            // inputs (or through its random ops, which cannot be recomputed).
            INF
        } else {
            save_cost(j, v) * TIE_SCALE + u64::from(is_view(j, v))
        };
        net.add_edge(vin(k), vout(k), cost);
        if is_input(j, v) || !recomputable(j, v) {
            net.add_edge(source, vin(k), INF);
        }
        for u in node_args(j, v) {
            if let Some(ku) = pos[u] {
                net.add_edge(vout(ku), vin(k), INF);
            }
        }
    }
    for &r in reads {
        if let Some(k) = pos[r] {
            net.add_edge(vout(k), sink, INF);
        }
    }
    let flow = net.max_flow(source, sink);
    debug_assert!(flow < INF, "save-all is a finite cut");
    let sink_side = net.reaching(sink);
    let cut = |k: usize| !sink_side[vin(k)] && sink_side[vout(k)];
    // Walk back from the backward's reads: a cut value is saved, anything else recomputed.
    let (mut saved, mut recomputed) = (BTreeSet::new(), BTreeSet::new());
    let mut stack: Vec<usize> = reads.iter().copied().collect();
    while let Some(v) = stack.pop() {
        if saved.contains(&v) || recomputed.contains(&v) {
            continue;
        }
        let Some(k) = pos[v] else { continue };
        if is_input(j, v) || cut(k) || !recomputable(j, v) {
            saved.insert(v);
        } else {
            recomputed.insert(v);
            stack.extend(node_args(j, v).into_iter().filter(|&u| pos[u].is_some()));
        }
    }
    (saved, recomputed)
}

// Note [forward-side statistics]: some derivative rules need statistics of forward values that
// do not depend on the gradient: layer_norm's mean and rstd of its input. Computed in the
// backward (where the rule is applied), they cost the backward's layer-norm kernels two more
// passes over each row (tiny BERT: 3 reduction loops per row instead of 1). Torch's
// AOTAutograd gets them from the forward (`native_layer_norm` returns them, and the backward's
// `native_layer_norm_backward` reads them). Cross-entropy's log_softmax gradient likewise reads
// the logits' row max and sum of exp(x - max), which the forward's loss kernel already sums.
// Here a rule makes such values with `Builder::forward_call`: nodes in the backward region of
// the joint graph that read only forward values (and each other), with canonical names and
// meta. The partitioner treats them
// as forward values: they are vertices of the min-cut network like any forward node
// (reductions are not recomputable, so they run in the forward; the pointwise ones between
// them may be recomputed in the backward, where the cut says), and the forward graph computes
// the ones it needs after its own nodes. Their sums are `aten.sum.dim_IntList`/`aten.mean.dim`,
// which the inductor lowers as plain vectorized sums (`sum_unordered`, `mean_unordered`), not
// in ATen's order (Note [backward sum order] in src/inductor/decompositions.rs): in the forward
// graph they join the layer norm's own kernel (the same reduction space), whose sums are the
// same expressions (the kernel builder shares them), so they cost two stores per row. Tiny
// BERT's backward: 33 kernels and 194 us a step before, 27 and 157 after.

/// The forward-side nodes (Note [forward-side statistics]) a needed backward node reads, with
/// their forward-side ancestors; any that reads another backward node is left in the backward.
fn forward_side(j: &JointGraph, needed: &[bool]) -> BTreeSet<usize> {
    let mut set: BTreeSet<usize> = BTreeSet::new();
    for &i in &j.forward_side {
        // In index order, so a node's forward-side arguments were decided before it.
        if needed[i] && node_args(j, i).iter().all(|&u| u < j.n_fwd || set.contains(&u)) {
            set.insert(i);
        }
    }
    set
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
    let fside = forward_side(j, &needed);
    let bw: Vec<usize> = (first_bw..j.g.nodes.len())
        .filter(|&i| needed[i] && !fside.contains(&i) && !matches!(j.g.nodes[i].op, FxOp::Placeholder { .. }))
        .collect();
    let mut reads: BTreeSet<usize> = BTreeSet::new();
    for &i in &bw {
        reads.extend(node_args(j, i).into_iter().filter(|&k| k < first_bw || fside.contains(&k)));
    }
    let (saved, recomputed) = match policy {
        Policy::SaveAll => (reads, BTreeSet::new()),
        Policy::MinCut => min_cut(j, &reads, &fside),
    };
    let fw_nodes: Vec<usize> = (0..first_bw)
        .filter(|&i| matches!(j.g.nodes[i].op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. }))
        .chain(fside.iter().copied())
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
    use crate::inductor::fx_import::{FxGraph, FxNode, TensorMeta};
    use crate::inductor::ir::Layout;

    fn meta(numel: i64, dtype: DType) -> Option<TensorMeta> {
        Some(TensorMeta { layout: Layout { sizes: vec![numel], strides: vec![1], dtype, cpu: true }, requires_grad: true })
    }

    fn n(name: &str, op: FxOp, canonical: Option<&'static str>, args: Vec<usize>) -> FxNode {
        FxNode {
            name: name.into(),
            op,
            canonical,
            target_name: name.into(),
            args: args.into_iter().map(FxArg::Node).collect(),
            kwargs: Vec::new(),
            meta: meta(100, DType::F32),
            users: Vec::new(),
            inplace: false,
            recompute: false,
        }
    }

    fn call() -> FxOp {
        FxOp::CallFunction { target: 0 }
    }

    /// A joint graph over `nodes`: forward `[0, n_fwd)` (the output node last, reading
    /// `output`), inputs the placeholders, the gradient of input 0 in the last node.
    fn joint(nodes: Vec<FxNode>, n_fwd: usize, output: usize) -> JointGraph {
        let inputs: Vec<usize> = (0..n_fwd).filter(|&i| matches!(nodes[i].op, FxOp::Placeholder { .. })).collect();
        let last = nodes.len() - 1;
        let n_nodes = nodes.len();
        JointGraph {
            g: FxGraph { nodes, side_table: Vec::new(), output: n_fwd - 1, writebacks: Vec::new() },
            n_fwd,
            input_requires_grad: inputs.iter().enumerate().map(|(k, _)| k == 0).collect(),
            input_grads: inputs.iter().enumerate().map(|(k, _)| (k == 0).then_some(last)).collect(),
            inputs,
            outputs: vec![FxArg::Node(output)],
            tangents: vec![Some(n_fwd)],
            requires_grad: vec![true; n_nodes],
            forward_side: Vec::new(),
        }
    }

    /// x, w -> mm -> relu -> output; the backward reads relu and w (mm instead of w when
    /// `reads_mm`).
    fn split(policy: Policy, reads_mm: bool) -> Partition {
        let nodes = vec![
            n("x", FxOp::Placeholder { position: 0 }, None, vec![]),
            n("w", FxOp::Placeholder { position: 1 }, None, vec![]),
            n("mm", call(), None, vec![0, 1]),
            n("relu", call(), Some("relu"), vec![2]),
            n("output", FxOp::Output, None, vec![3]),
            n("tangent", FxOp::Placeholder { position: usize::MAX }, None, vec![]),
            n("unused", call(), None, vec![2]),
            n("gt", call(), None, vec![3]),
            n("where", call(), None, vec![7, 5]),
            n("gx", call(), None, vec![8, if reads_mm { 2 } else { 1 }]),
        ];
        partition(&joint(nodes, 5, 3), policy)
    }

    #[test]
    fn save_all_saves_what_the_backward_reads() {
        let p = split(Policy::SaveAll, false);
        assert_eq!(p.fw_nodes, vec![2, 3]);
        assert_eq!(p.bw_nodes, vec![7, 8, 9], "dead backward node 6 is dropped");
        assert_eq!(p.saved, vec![1, 3]);
        assert!(p.recomputed.is_empty());
        assert_eq!(split(Policy::SaveAll, true).saved, vec![2, 3]);
    }

    #[test]
    fn min_cut_ties_keep_the_value_the_backward_reads() {
        // Saving relu or saving mm (and recomputing relu) cost the same: the cut closest to the
        // sink saves relu, recomputing nothing.
        let p = split(Policy::MinCut, false);
        assert_eq!(p.saved, vec![1, 3]);
        assert!(p.recomputed.is_empty());
    }

    #[test]
    fn min_cut_recomputes_pointwise_from_a_saved_matmul() {
        // mm is read anyway (and cannot be recomputed), so relu is recomputed from it.
        let p = split(Policy::MinCut, true);
        assert_eq!(p.saved, vec![2]);
        assert_eq!(p.recomputed, vec![3]);
        assert_eq!(p.bw_nodes, vec![3, 7, 8, 9]);
    }

    /// x, w -> mm -> (GELU, tanh form) a = mm * 0.5, b = tanh(mm), c = b + 1, y = a * c ->
    /// mm2(y, w) -> output. The backward reads mm, a, b, c, y and w.
    fn gelu_mlp() -> JointGraph {
        let nodes = vec![
            n("x", FxOp::Placeholder { position: 0 }, None, vec![]),
            n("w", FxOp::Placeholder { position: 1 }, None, vec![]),
            n("mm", call(), None, vec![0, 1]),
            n("a", call(), Some("mul"), vec![2]),
            n("b", call(), Some("tanh"), vec![2]),
            n("c", call(), Some("add"), vec![4]),
            n("y", call(), Some("mul"), vec![3, 5]),
            n("mm2", call(), None, vec![6, 1]),
            n("output", FxOp::Output, None, vec![7]),
            n("tangent", FxOp::Placeholder { position: usize::MAX }, None, vec![]),
            n("g1", call(), None, vec![9, 6, 1]),
            n("g2", call(), None, vec![10, 3, 4, 5]),
            n("gx", call(), None, vec![11, 2, 1]),
        ];
        joint(nodes, 9, 7)
    }

    #[test]
    fn min_cut_saves_one_matmul_output_for_a_gelu_chain() {
        let j = gelu_mlp();
        let all = partition(&j, Policy::SaveAll);
        assert_eq!(all.saved, vec![1, 2, 3, 4, 5, 6]);
        let p = partition(&j, Policy::MinCut);
        assert_eq!(p.saved, vec![1, 2]);
        assert_eq!(p.recomputed, vec![3, 4, 5, 6]);
        assert_eq!(saved_bytes(&j, &p), 400);
        assert_eq!(saved_bytes(&j, &all), 2000);
    }

    #[test]
    fn min_cut_prefers_a_small_mask_and_never_recomputes_random_ops() {
        // x -> mm -> r = rand_like-named node (pointwise by its canonical name) -> m = mm * r ->
        // gt = m > 0 (bool); the backward reads gt and r.
        let mut nodes = vec![
            n("x", FxOp::Placeholder { position: 0 }, None, vec![]),
            n("mm", call(), None, vec![0, 0]),
            n("rand_like", call(), Some("add"), vec![1]),
            n("m", call(), Some("mul"), vec![1, 2]),
            n("gt", call(), Some("gt"), vec![3]),
            n("output", FxOp::Output, None, vec![3]),
            n("tangent", FxOp::Placeholder { position: usize::MAX }, None, vec![]),
            n("gx", call(), None, vec![6, 4, 2]),
        ];
        nodes[4].meta = meta(100, DType::Bool);
        let j = joint(nodes, 6, 3);
        let p = partition(&j, Policy::MinCut);
        // Recomputing gt from mm and the random values costs 400 + 400; saving it costs 100.
        assert_eq!(p.saved, vec![2, 4]);
        assert!(p.recomputed.is_empty());
        assert!(!recomputable(&j, 2));
    }

    #[test]
    fn an_input_no_rule_reads_is_never_saved() {
        // Note [inputs eager does not save]: x, mean, w -> d = x - mean -> y = d * w; the
        // backward reads d and w. Recomputing d from x and mean would save nothing of size,
        // but eager never saves x or mean, so d itself is saved.
        let nodes = vec![
            n("w", FxOp::Placeholder { position: 0 }, None, vec![]),
            n("x", FxOp::Placeholder { position: 1 }, None, vec![]),
            n("mean", FxOp::Placeholder { position: 2 }, None, vec![]),
            n("d", call(), Some("sub"), vec![1, 2]),
            n("y", call(), Some("mul"), vec![3, 0]),
            n("output", FxOp::Output, None, vec![4]),
            n("tangent", FxOp::Placeholder { position: usize::MAX }, None, vec![]),
            n("gw", call(), Some("mul"), vec![6, 3]),
        ];
        let j = joint(nodes, 6, 4);
        let p = partition(&j, Policy::MinCut);
        assert_eq!(p.saved, vec![3]);
        assert!(p.recomputed.is_empty());
    }

    #[test]
    fn a_checkpointed_region_is_recomputed_from_its_inputs() {
        // Note [activation checkpointing]: with every node of the GELU MLP's region (mm .. y)
        // tagged, the backward recomputes mm too (a matmul, never recomputed untagged), and the
        // forward saves only the region's input x and w; save-all ignores the tags.
        let mut j = gelu_mlp();
        for i in 2..=6 {
            j.g.nodes[i].recompute = true;
        }
        let p = partition(&j, Policy::MinCut);
        assert_eq!(p.saved, vec![0, 1]);
        assert_eq!(p.recomputed, vec![2, 3, 4, 5, 6]);
        assert_eq!(saved_bytes(&j, &p), 0);
        assert_eq!(partition(&j, Policy::SaveAll).saved, vec![1, 2, 3, 4, 5, 6]);
        // A random op inside the region is saved, and what it feeds is recomputed from it.
        j.g.nodes[4].target_name = "dropout".into();
        let p = partition(&j, Policy::MinCut);
        assert_eq!(p.saved, vec![0, 1, 4]);
        assert_eq!(p.recomputed, vec![2, 3, 5, 6]);
    }

    #[test]
    fn max_flow_of_a_small_network() {
        // s=0 -> 1 (3), s -> 2 (2), 1 -> 2 (1), 1 -> t=3 (2), 2 -> t (3): max flow 5.
        let mut net = FlowNetwork::new(4);
        for (a, b, c) in [(0, 1, 3), (0, 2, 2), (1, 2, 1), (1, 3, 2), (2, 3, 3)] {
            net.add_edge(a, b, c);
        }
        assert_eq!(net.max_flow(0, 3), 5);
        let side = net.reaching(3);
        assert!(!side[0] && side[3]);
    }
}
