//! Scheduler: groups realized Pointwise buffers into fused kernels and orders kernels and
//! fallbacks for execution (PyTorch: `torch/_inductor/scheduler.py`).
//!
//! Invariants:
//! - Unrealized Pointwise buffers are not scheduled: their readers inline them.
//! - A group holds realized Pointwise buffers with identical `ranges` that are connected through
//!   pointwise producers or a shared input, and never has an executed buffer outside the group that both depends on
//!   the group and feeds it (so one loop can compute the whole group).
//! - `steps` is a topological order of groups and fallbacks.
//! - Every refusal to fuse is logged on `inductor::fusion` and kept in `why_no_fuse`.

use std::collections::HashSet;

use super::fx_import::FxGraph;
use super::ir::{Affine, BufferId, BufferKind, DType, GraphIr, OpsHandler, OpsValue, Reduction};

/// The iteration space of a reduction kernel: `input_sizes`, of which dims `reduced` are walked
/// by the reduction loops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionSpace {
    pub input_sizes: Vec<i64>,
    pub reduced: Vec<usize>,
}

/// One fused kernel to be: realized Pointwise buffers sharing one iteration space, or (with
/// `reduction`) Reductions over one space plus the pointwise epilogues over that whole space
/// that read them (softmax's normalization, layer_norm's output).
#[derive(Clone, Debug)]
pub struct KernelGroup {
    pub members: Vec<BufferId>,
    /// The kernel's outer ranges (for reductions: `input_sizes` with the reduced dims set to 1).
    pub ranges: Vec<i64>,
    pub reduction: Option<ReductionSpace>,
    /// Buffers this group's loop body reaches through pointwise edges (pointwise producers and
    /// the buffers they read).
    reach: HashSet<BufferId>,
}

/// An execution step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run fused kernel `groups[i]`.
    Kernel(usize),
    /// Run the fallback that produces this buffer.
    Fallback(BufferId),
}

/// The scheduler's result.
pub struct Schedule {
    pub groups: Vec<KernelGroup>,
    pub steps: Vec<Step>,
    pub why_no_fuse: Vec<String>,
}

/// Direct reads of each buffer (pointwise loads, fallback arguments).
pub fn direct_reads(g: &FxGraph, ir: &GraphIr) -> Vec<Vec<BufferId>> {
    ir.buffers
        .iter()
        .map(|b| match &b.kind {
            BufferKind::Pointwise(_) | BufferKind::Reduction(_) | BufferKind::Scatter(_) => ir.body_reads(b.id),
            BufferKind::Fallback(fb) => {
                let node = &g.nodes[fb.node];
                let mut reads = Vec::new();
                for a in node.args.iter().chain(node.kwargs.iter().map(|(_, a)| a)) {
                    a.for_each_node(&mut |j| {
                        if let Some(buf) = ir.node_buffer[j] {
                            if !reads.contains(&buf) {
                                reads.push(buf);
                            }
                        }
                    });
                }
                reads
            }
            BufferKind::Input { .. } | BufferKind::Constant { .. } => Vec::new(),
        })
        .collect()
}

fn is_executed(ir: &GraphIr, b: BufferId) -> bool {
    match &ir.buffer(b).kind {
        BufferKind::Pointwise(pw) => pw.realized,
        BufferKind::Fallback(_) | BufferKind::Reduction(_) | BufferKind::Scatter(_) => true,
        _ => false,
    }
}

/// A set of buffer indices as bits: unions are word-wise, iteration is in ascending order.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, i: u32) {
        self.0[i as usize / 64] |= 1 << (i % 64);
    }
    fn contains(&self, i: u32) -> bool {
        (self.0[i as usize / 64] >> (i % 64)) & 1 == 1
    }
    fn union_with(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= *b;
        }
    }
    /// The least element of `self ∩ o`.
    fn first_common(&self, o: &Bits) -> Option<u32> {
        self.0.iter().zip(&o.0).enumerate().find_map(|(w, (a, b))| {
            let x = a & b;
            (x != 0).then(|| (w * 64) as u32 + x.trailing_zeros())
        })
    }
    /// Elements of `self` that are in `keep` and not in `drop`, in ascending order.
    fn iter_masked<'a>(&'a self, keep: &'a Bits, drop: &'a Bits) -> impl Iterator<Item = u32> + 'a {
        self.0.iter().zip(&keep.0).zip(&drop.0).enumerate().flat_map(|(w, ((a, k), d))| {
            let mut x = a & k & !d;
            std::iter::from_fn(move || {
                (x != 0).then(|| {
                    let b = x.trailing_zeros();
                    x &= x - 1;
                    (w * 64) as u32 + b
                })
            })
        })
    }
}

/// Most ops one kernel's body may hold, counting each member's inlined chain
/// (`Pointwise::n_ops`; a reduction counts 8). A member's value is computed by recursing through
/// the members it reads (`codegen::KernelOps::load`), so a kernel fusing a chain of thousands of
/// ops (`for _ in range(10000): x = x + 1`, each 256-op piece realized) would recurse that deep
/// and overflow the stack; past this bound the chain is split into several kernels.
pub const MAX_KERNEL_OPS: usize = 2048;

fn kernel_ops(ir: &GraphIr, b: BufferId) -> usize {
    match &ir.buffer(b).kind {
        BufferKind::Pointwise(pw) => pw.n_ops,
        _ => 8,
    }
}

/// Fuses and orders; see the module invariants.
///
/// Note [scheduler cost]: GPT-2's backward graph has about 3000 buffers and 1000 groups and
/// fallbacks, so nothing here may cost a walk over all ancestors per candidate fusion, or all
/// groups per buffer. Ancestor sets are bitsets; a buffer tries only the groups whose reach meets
/// its own (an index from buffer to groups, tried in group order as before); the legality check
/// explores each outside buffer and group once (word-wise set operations), and only when it fails
/// walks again, depth-first as it always did, for the message; the order of steps comes from
/// each unit's nearest units (through inlined pointwise) with the ready units in a min-heap,
/// which picks, step by step, the same unit as taking the first ready unit in buffer order over
/// all of its transitive dependencies. The groups, steps and messages are those of the earlier
/// quadratic version (checked by running both on the inductor, autograd, model and training
/// tests, 1703 of them, and the GPU tests: identical everywhere).
pub fn schedule(g: &FxGraph, ir: &GraphIr) -> Schedule {
    let n = ir.buffers.len();
    let mut reads = direct_reads(g, ir);
    // Note [random fallbacks in graph order].
    let mut previous_random: Option<BufferId> = None;
    for (b, buf) in ir.buffers.iter().enumerate() {
        if matches!(buf.kind, BufferKind::Fallback(_)) && super::layout::draws_random_node(&g.nodes[buf.node]) {
            if let Some(p) = previous_random {
                if !reads[b].contains(&p) {
                    reads[b].push(p);
                }
            }
            previous_random = Some(BufferId(b as u32));
        }
    }
    // Note [fallbacks that write their inputs] (lowering.rs): a reader of a written buffer
    // runs after the fallback when it comes after it in the graph, else before it.
    for (f, written) in &ir.fallback_writes {
        for b in 0..n {
            if b as u32 == f.0 || !reads[b].iter().any(|r| written.contains(r)) {
                continue;
            }
            if (b as u32) > f.0 {
                if !reads[b].contains(f) {
                    reads[b].push(*f);
                }
            } else if !reads[f.0 as usize].contains(&BufferId(b as u32)) {
                reads[f.0 as usize].push(BufferId(b as u32));
            }
        }
    }
    // Ancestors of every buffer (buffers read only earlier buffers).
    let mut anc: Vec<Bits> = Vec::with_capacity(n);
    for b in 0..n {
        let mut set = Bits::new(n);
        for r in &reads[b] {
            set.insert(r.0);
            set.union_with(&anc[r.0 as usize]);
        }
        anc.push(set);
    }
    let mut executed = Bits::new(n);
    for b in 0..n {
        if is_executed(ir, BufferId(b as u32)) {
            executed.insert(b as u32);
        }
    }
    // Pointwise reach: the buffer itself plus pointwise buffers reachable through pointwise edges.
    let mut reach: Vec<HashSet<BufferId>> = vec![HashSet::new(); n];
    for b in 0..n {
        if ir.pointwise(BufferId(b as u32)).is_none() && ir.reduction(BufferId(b as u32)).is_none() {
            continue;
        }
        let mut set = HashSet::from([BufferId(b as u32)]);
        for r in &reads[b] {
            // Sharing an input also connects (horizontal fusion: one pass over it).
            set.insert(*r);
            if ir.pointwise(*r).is_some() {
                set.extend(reach[r.0 as usize].iter().copied());
            }
        }
        reach[b] = set;
    }

    // Live buffers: what the graph returns or writes back, every fallback (it may have effects),
    // and what those read. Dead pointwise and reduction buffers are not scheduled.
    let mut live = vec![false; n];
    let mut stack: Vec<usize> = (0..n)
        .filter(|&b| ir.must_store.contains(&BufferId(b as u32)) || matches!(ir.buffers[b].kind, BufferKind::Fallback(_)))
        .collect();
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut live[b], true) {
            continue;
        }
        stack.extend(reads[b].iter().map(|r| r.0 as usize));
    }

    // The message of an illegal fusion: the depth-first walk of the first version.
    let refusal = |members: &[BufferId], set: &Bits, group_of: &[Option<usize>], groups: &[KernelGroup]| -> String {
        let mut seen = Bits::new(n);
        let mut stack: Vec<(u32, BufferId)> = Vec::new();
        for m in members {
            stack.extend(anc[m.0 as usize].iter_masked(&executed, set).map(|a| (a, *m)));
        }
        while let Some((a, m)) = stack.pop() {
            if seen.contains(a) {
                continue;
            }
            seen.insert(a);
            let unit: Vec<u32> = match group_of[a as usize] {
                Some(gi) => groups[gi].members.iter().map(|x| x.0).collect(),
                None => vec![a],
            };
            for u in unit {
                if let Some(inner) = anc[u as usize].first_common(set) {
                    return format!("buf{u} depends on buf{inner} and feeds {m}");
                }
                let mut skip = set.clone();
                skip.union_with(&seen);
                stack.extend(anc[u as usize].iter_masked(&executed, &skip).map(|x| (x, m)));
            }
        }
        String::new()
    };
    // A fusion is legal when no executed buffer outside the group both depends on the group and
    // feeds it, counting whole units: a buffer fused into another group brings that group's
    // dependencies along (two groups must never depend on each other).
    let legal = |members: &[BufferId], group_of: &[Option<usize>], groups: &[KernelGroup]| -> Result<(), String> {
        let mut set = Bits::new(n);
        for m in members {
            set.insert(m.0);
        }
        let mut seen = set.clone();
        let mut work: Vec<u32> = Vec::new();
        for m in members {
            for a in anc[m.0 as usize].iter_masked(&executed, &seen).collect::<Vec<_>>() {
                seen.insert(a);
                work.push(a);
            }
        }
        let mut groups_done: HashSet<usize> = HashSet::new();
        while let Some(a) = work.pop() {
            let unit: Vec<u32> = match group_of[a as usize] {
                Some(gi) if !groups_done.insert(gi) => continue,
                Some(gi) => groups[gi].members.iter().map(|x| x.0).collect(),
                None => vec![a],
            };
            for u in unit {
                if anc[u as usize].first_common(&set).is_some() {
                    return Err(refusal(members, &set, group_of, groups));
                }
                for x in anc[u as usize].iter_masked(&executed, &seen).collect::<Vec<_>>() {
                    seen.insert(x);
                    work.push(x);
                }
            }
        }
        Ok(())
    };

    let mut groups: Vec<KernelGroup> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    // Per buffer, the groups whose reach holds it (each group once, in creation order).
    let mut reached_by: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut why_no_fuse = Vec::new();
    let stored_prologues = stored_prologues();
    for b in 0..n {
        let id = BufferId(b as u32);
        // What this buffer needs of a group: its own space (pointwise ranges, or a reduction's).
        if !live[b] {
            tracing::debug!(target: "inductor::fusion", "{id} is dead; not scheduled");
            continue;
        }
        let (my_ranges, my_space) = match &ir.buffer(id).kind {
            BufferKind::Pointwise(pw) if pw.realized => (pw.ranges.clone(), None),
            BufferKind::Reduction(r) => {
                (r.outer_ranges(), Some(ReductionSpace { input_sizes: r.input_sizes.clone(), reduced: r.reduced.clone() }))
            }
            BufferKind::Scatter(sc) => {
                // Its own kernel, which nothing joins (it is in no group's reach).
                groups.push(KernelGroup { members: vec![id], ranges: sc.ranges.clone(), reduction: None, reach: HashSet::new() });
                group_of[b] = Some(groups.len() - 1);
                continue;
            }
            _ => continue,
        };
        // The groups whose reach meets this buffer's, in group order.
        let mut candidates: Vec<usize> = reach[b].iter().flat_map(|x| reached_by[x.0 as usize].iter().copied()).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let mut placed = None;
        for gi in candidates {
            let grp = &groups[gi];
            let first = grp.members[0];
            let fits = match (&grp.reduction, &my_space) {
                (None, None) => grp.ranges == my_ranges,
                (Some(space), Some(mine)) => space == mine,
                // A pointwise epilogue over the reduction's whole input space, or over its
                // output (computed once per point after the loops: `sum / n` for a mean).
                (Some(space), None) => member_index(space, &my_ranges).is_some(),
                // Note [stored prologues]: a reduction joins a pointwise group over its whole
                // input space; the group's buffers are stored from inside the reduction's first
                // loop (their phase) and inlined where the reduction reads them.
                (None, Some(mine)) => stored_prologues && grp.ranges == mine.input_sizes,
            };
            if !fits {
                let msg = format!("cannot fuse {id} with {first}: ranges {my_ranges:?} differ from {:?}", grp.ranges);
                tracing::debug!(target: "inductor::fusion", "{msg}");
                why_no_fuse.push(msg);
                continue;
            }
            let grp_ops: usize = grp.members.iter().map(|m| kernel_ops(ir, *m)).sum();
            if grp_ops + kernel_ops(ir, id) > MAX_KERNEL_OPS {
                let msg = format!("cannot fuse {id} with {first}: the kernel would hold more than {MAX_KERNEL_OPS} ops");
                tracing::debug!(target: "inductor::fusion", "{msg}");
                why_no_fuse.push(msg);
                continue;
            }
            let mut members = grp.members.clone();
            members.push(id);
            let checked = legal(&members, &group_of, &groups).and_then(|()| match grp.reduction.as_ref().or(my_space.as_ref()) {
                Some(space) => reduction_reads_ok(ir, &members, space),
                None => Ok(()),
            });
            match checked {
                Ok(()) => {
                    placed = Some(gi);
                    break;
                }
                Err(reason) => {
                    let msg = format!("cannot fuse {id} with {first}: {reason}");
                    tracing::debug!(target: "inductor::fusion", "{msg}");
                    why_no_fuse.push(msg);
                }
            }
        }
        let gi = match placed {
            Some(gi) => {
                groups[gi].members.push(id);
                if groups[gi].reduction.is_none() && my_space.is_some() {
                    // Note [stored prologues]: the group is now the reduction's kernel.
                    groups[gi].reduction = my_space.clone();
                    groups[gi].ranges = my_ranges.clone();
                }
                tracing::debug!(target: "inductor::fusion", "fuse {id} into {}", groups[gi].members[0]);
                gi
            }
            None => {
                groups.push(KernelGroup { members: vec![id], ranges: my_ranges, reduction: my_space, reach: HashSet::new() });
                groups.len() - 1
            }
        };
        group_of[b] = Some(gi);
        for x in &reach[b] {
            if groups[gi].reach.insert(*x) {
                reached_by[x.0 as usize].push(gi);
            }
        }
    }

    // Units: groups and fallbacks. Dependencies through unrealized pointwise are transparent.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    enum Unit {
        Group(usize),
        Fallback(u32),
    }
    let unit_of = |b: u32| -> Option<Unit> {
        match &ir.buffers[b as usize].kind {
            BufferKind::Pointwise(pw) if pw.realized => group_of[b as usize].map(Unit::Group),
            BufferKind::Reduction(_) | BufferKind::Scatter(_) => group_of[b as usize].map(Unit::Group),
            BufferKind::Fallback(_) => Some(Unit::Fallback(b)),
            _ => None,
        }
    };
    let mut units: Vec<(u32, Unit)> = Vec::new(); // (first buffer index, unit)
    for (gi, grp) in groups.iter().enumerate() {
        units.push((grp.members[0].0, Unit::Group(gi)));
    }
    for b in 0..n {
        if let BufferKind::Fallback(_) = ir.buffers[b].kind {
            units.push((b as u32, Unit::Fallback(b as u32)));
        }
    }
    units.sort();
    let index: std::collections::HashMap<Unit, usize> = units.iter().enumerate().map(|(i, (_, u))| (*u, i)).collect();
    // The nearest units each buffer's value needs: its own, or (a buffer no unit computes:
    // inlined pointwise, inputs) those of what it reads.
    let mut nearest: Vec<Vec<usize>> = Vec::with_capacity(n);
    for b in 0..n {
        let near = match unit_of(b as u32) {
            Some(u) => vec![index[&u]],
            None => {
                let mut v: Vec<usize> = reads[b].iter().flat_map(|r| nearest[r.0 as usize].iter().copied()).collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        };
        nearest.push(near);
    }
    let mut waiting = vec![0usize; units.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); units.len()];
    for (i, (_, u)) in units.iter().enumerate() {
        let members: Vec<u32> = match u {
            Unit::Group(gi) => groups[*gi].members.iter().map(|m| m.0).collect(),
            Unit::Fallback(b) => vec![*b],
        };
        let mut deps: Vec<usize> = members
            .iter()
            .flat_map(|&m| reads[m as usize].iter().flat_map(|r| nearest[r.0 as usize].iter().copied()))
            .filter(|&d| d != i)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[i] = deps.len();
        for d in deps {
            dependents[d].push(i);
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> =
        (0..units.len()).filter(|&i| waiting[i] == 0).map(std::cmp::Reverse).collect();
    let mut done = vec![false; units.len()];
    let mut steps = Vec::with_capacity(units.len());
    let step_of = |u: &Unit| match u {
        Unit::Group(gi) => Step::Kernel(*gi),
        Unit::Fallback(b) => Step::Fallback(BufferId(*b)),
    };
    while steps.len() < units.len() {
        let Some(std::cmp::Reverse(i)) = ready.pop() else {
            // Cannot happen when `legal` held for every group; keep going in buffer order.
            tracing::error!(target: "inductor::fusion", "cycle between fused groups; scheduling in order");
            for (i, (_, u)) in units.iter().enumerate() {
                if !std::mem::replace(&mut done[i], true) {
                    steps.push(step_of(u));
                }
            }
            break;
        };
        done[i] = true;
        steps.push(step_of(&units[i].1));
        for &j in &dependents[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(std::cmp::Reverse(j));
            }
        }
    }
    Schedule { groups, steps, why_no_fuse }
}

// Note [random fallbacks in graph order]: the steps take the first ready unit in buffer order,
// so a fallback whose inputs are ready early ran before earlier fallbacks that waited for a
// kernel. For random draws that changed the values: in T5's training forward the decoder's
// first dropout mask (whose input, the decoder embeddings, is ready at once) was drawn before
// the encoder's, so every mask after it differed from eager's with the same seed (the survey's
// `vs eager` failed on every gradient). Fallbacks that draw random numbers
// (`layout::draws_random_node`: dropout masks, `rand*`, `bernoulli`, random methods run on a
// copy) therefore depend on the previous such fallback of the graph, and the generator is
// stepped in eager's order.
// Other units still move freely. The edge is a read of the previous random fallback added to
// the buffer's reads before anything else looks at them, so fusion sees it too: a group may not
// hold both a buffer an earlier random fallback needs and one a later random fallback feeds (T5
// fused such a pair, which left no order of steps that keeps eager's draws).

/// Checks the IR and schedule invariants stated in `ir.rs` and this module; returns every
/// violation found (not just the first). Run after scheduling in debug builds or with
/// `DYNAMO_VERIFY=1`.
pub fn verify(g: &FxGraph, ir: &GraphIr, sched: &Schedule) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let reads = direct_reads(g, ir);
    for (b, rs) in reads.iter().enumerate() {
        for r in rs {
            if r.0 as usize >= b {
                errors.push(format!("buf{b} reads {r}, which is not earlier"));
            }
        }
        let buf = &ir.buffers[b];
        if let BufferKind::Pointwise(pw) = &buf.kind {
            match &buf.layout {
                Some(l) if l.sizes == pw.ranges => {}
                other => errors.push(format!("buf{b}: pointwise ranges {:?} but layout {other:?}", pw.ranges)),
            }
        }
    }
    let mut position: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for (i, step) in sched.steps.iter().enumerate() {
        match step {
            Step::Kernel(gi) => {
                let grp = &sched.groups[*gi];
                for m in &grp.members {
                    position.insert(m.0, i);
                    let ok = match (&grp.reduction, &ir.buffer(*m).kind) {
                        (None, BufferKind::Pointwise(pw)) => pw.realized && pw.ranges == grp.ranges,
                        (Some(space), BufferKind::Pointwise(pw)) => pw.realized && member_index(space, &pw.ranges).is_some(),
                        (Some(space), BufferKind::Reduction(r)) => r.input_sizes == space.input_sizes && r.reduced == space.reduced,
                        (None, BufferKind::Scatter(sc)) => sc.ranges == grp.ranges && grp.members.len() == 1,
                        _ => false,
                    };
                    if !ok {
                        errors.push(format!("{m} in kernel group {gi} does not fit its space {:?}", grp.ranges));
                    }
                }
            }
            Step::Fallback(b) => {
                position.insert(b.0, i);
            }
        }
    }
    // Every executed buffer runs after the executed buffers it (transitively, through inlined
    // pointwise) reads.
    for (&b, &at) in &position {
        let mut stack = reads[b as usize].clone();
        let mut seen = HashSet::new();
        while let Some(r) = stack.pop() {
            if !seen.insert(r) {
                continue;
            }
            match position.get(&r.0) {
                Some(&p) if p > at || (p == at && !is_same_step(sched, at)) => {
                    errors.push(format!("buf{b} (step {at}) reads {r}, computed later (step {p})"))
                }
                Some(_) => {}
                None => stack.extend(reads[r.0 as usize].iter().copied()),
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn is_same_step(sched: &Schedule, step: usize) -> bool {
    matches!(sched.steps[step], Step::Kernel(_))
}

/// Handler that inlines unrealized Pointwise producers and records every other load with its
/// index (the reads a fused kernel makes from memory or from its own members). Realized
/// pointwise loads are recorded, not followed: they are members (inlined by codegen) or memory.
pub struct IndexedReads<'a> {
    pub ir: &'a GraphIr,
    pub loads: Vec<(BufferId, Vec<Affine>)>,
}

impl OpsHandler for IndexedReads<'_> {
    fn load(&mut self, buf: BufferId, index: &[Affine]) -> OpsValue {
        match self.ir.pointwise(buf) {
            Some(pw) if !pw.realized => {
                let f = pw.inner_fn.clone();
                f(self, index)
            }
            _ => {
                self.loads.push((buf, index.to_vec()));
                OpsValue(0)
            }
        }
    }
    fn load_indirect(&mut self, buf: BufferId, index: &[Affine], dim: usize, _row: OpsValue) -> OpsValue {
        // Read from memory at a data-dependent row (never a group member): recorded at row 0.
        let mut at = index.to_vec();
        at[dim] = Affine::constant(0, at[dim].coeffs.len());
        self.loads.push((buf, at));
        OpsValue(0)
    }
    fn constant(&mut self, _v: f64, _d: DType) -> OpsValue {
        OpsValue(0)
    }
    fn unary(&mut self, _op: super::ir::UnaryOp, _a: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn binary(&mut self, _op: super::ir::BinaryOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn compare(&mut self, _op: super::ir::CmpOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn where_(&mut self, _c: OpsValue, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn to_dtype(&mut self, _a: OpsValue, _d: DType) -> OpsValue {
        OpsValue(0)
    }
}

/// The index at which a reader over the reduction space reads reduction `r`'s result for its own
/// point: input dim `d` of each output dim, or 0 for a reduced (kept) dim.
/// Dims of size 1 read index 0 (so `i0` over a size-1 dim and the constant 0 compare equal).
pub fn reduction_identity_index(r: &Reduction, n_vars: usize) -> Vec<Affine> {
    r.out_dims()
        .into_iter()
        .map(|d| {
            if r.reduced.contains(&d) || r.input_sizes[d] == 1 {
                Affine::constant(0, n_vars)
            } else {
                Affine::var(d, n_vars)
            }
        })
        .collect()
}

/// `index` with the coefficients of variables whose range is 1 dropped (they are always 0).
pub fn drop_unit_vars(index: &[Affine], var_ranges: &[i64]) -> Vec<Affine> {
    index
        .iter()
        .map(|a| {
            let mut a = a.clone();
            for (c, r) in a.coeffs.iter_mut().zip(var_ranges) {
                if *r == 1 {
                    *c = 0;
                }
            }
            a
        })
        .collect()
}

/// Note [stored prologues]: in a training graph the residual sum before a layer norm (and
/// other values a reduction reads that must also be kept: outputs saved for the backward) was
/// its own pointwise kernel, writing a buffer the norm's kernel then read back; torch.compile
/// makes them one kernel (`cpp_fused_add_native_layer_norm`). A reduction may now join a
/// pointwise group whose ranges are its whole input space: the group becomes the reduction's
/// kernel, the pointwise buffers are stored from inside its first loop (the emitter stores a
/// value in the loop of its phase, `Kernel::phases`) and inlined where the reduction reads them.
/// `DYNAMO_INDUCTOR_STORED_PROLOGUES=0` at compile time turns it off (for measurements).
fn stored_prologues() -> bool {
    std::env::var("DYNAMO_INDUCTOR_STORED_PROLOGUES").map_or(true, |v| v != "0")
}

/// In a reduction group, members may read member reductions only at their own point (the value
/// the kernel holds after the reduction loop), never at another index.
fn reduction_reads_ok(ir: &GraphIr, members: &[BufferId], space: &ReductionSpace) -> Result<(), String> {
    let n = space.input_sizes.len();
    let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
    for m in members {
        let mut h = IndexedReads { ir, loads: Vec::new() };
        match &ir.buffer(*m).kind {
            BufferKind::Pointwise(pw) => {
                let placement = member_index(space, &pw.ranges).ok_or_else(|| format!("{m} does not fit the space"))?;
                let idx: Vec<Affine> = placement
                    .iter()
                    .map(|p| match p {
                        Some(d) => Affine::var(*d, n),
                        None => Affine::constant(0, n),
                    })
                    .collect();
                (pw.inner_fn)(&mut h, &idx);
            }
            BufferKind::Reduction(r) => {
                (r.inner_fn)(&mut h, &index);
            }
            _ => return Err(format!("{m} is neither pointwise nor a reduction")),
        }
        for (buf, idx) in h.loads {
            if !members.contains(&buf) {
                continue;
            }
            // Pointwise members are inlined at any index; a member reduction only exists at
            // the point being computed.
            if let Some(r) = ir.reduction(buf) {
                if drop_unit_vars(&idx, &space.input_sizes) != reduction_identity_index(r, n) {
                    return Err(format!("{m} reads {buf} at another point than its own"));
                }
            }
        }
    }
    Ok(())
}

/// Where a pointwise buffer over `ranges` sits in a reduction space: for each of its dims, the
/// input dim whose loop variable it follows, or `None` for a size-1 dim that is always 0. It fits
/// when `ranges` is the whole input space (an epilogue inside the reduction loop), the output
/// with kept dims, or the output without them (computed after the loops).
pub fn member_index(space: &ReductionSpace, ranges: &[i64]) -> Option<Vec<Option<usize>>> {
    let n = space.input_sizes.len();
    if ranges == space.input_sizes.as_slice() {
        return Some((0..n).map(Some).collect());
    }
    let kept: Vec<i64> = (0..n).map(|d| if space.reduced.contains(&d) { 1 } else { space.input_sizes[d] }).collect();
    if ranges == kept.as_slice() {
        return Some((0..n).map(|d| (!space.reduced.contains(&d)).then_some(d)).collect());
    }
    let outer: Vec<usize> = (0..n).filter(|d| !space.reduced.contains(d)).collect();
    let squeezed: Vec<i64> = outer.iter().map(|&d| space.input_sizes[d]).collect();
    if ranges == squeezed.as_slice() {
        return Some(outer.into_iter().map(Some).collect());
    }
    None
}
