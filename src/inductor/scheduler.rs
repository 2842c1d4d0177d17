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

use std::collections::{BTreeSet, HashSet};

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
            BufferKind::Pointwise(_) | BufferKind::Reduction(_) => ir.body_reads(b.id),
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
        BufferKind::Fallback(_) | BufferKind::Reduction(_) => true,
        _ => false,
    }
}

/// Fuses and orders; see the module invariants.
pub fn schedule(g: &FxGraph, ir: &GraphIr) -> Schedule {
    let n = ir.buffers.len();
    let reads = direct_reads(g, ir);
    // Ancestors of every buffer, as sorted sets (graphs are small).
    let mut anc: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); n];
    for b in 0..n {
        let mut set = BTreeSet::new();
        for r in &reads[b] {
            set.insert(r.0);
            set.extend(anc[r.0 as usize].iter().copied());
        }
        anc[b] = set;
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

    // A fusion is legal when no executed buffer outside the group both depends on the group and
    // feeds it, counting whole units: a buffer fused into another group brings that group's
    // dependencies along (two groups must never depend on each other).
    let legal = |members: &[BufferId], group_of: &[Option<usize>], groups: &[KernelGroup]| -> Result<(), String> {
        let set: HashSet<u32> = members.iter().map(|m| m.0).collect();
        let mut seen: HashSet<u32> = HashSet::new();
        let mut stack: Vec<(u32, BufferId)> = Vec::new();
        for m in members {
            for &a in &anc[m.0 as usize] {
                stack.push((a, *m));
            }
        }
        while let Some((a, m)) = stack.pop() {
            if set.contains(&a) || !is_executed(ir, BufferId(a)) || !seen.insert(a) {
                continue;
            }
            // The unit `a` runs in: its group's members, or itself.
            let unit: Vec<u32> = match group_of[a as usize] {
                Some(gi) => groups[gi].members.iter().map(|x| x.0).collect(),
                None => vec![a],
            };
            for u in unit {
                if let Some(inner) = anc[u as usize].iter().find(|x| set.contains(x)) {
                    return Err(format!("buf{u} depends on buf{inner} and feeds {m}"));
                }
                for &x in &anc[u as usize] {
                    stack.push((x, m));
                }
            }
        }
        Ok(())
    };

    let mut groups: Vec<KernelGroup> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    let mut why_no_fuse = Vec::new();
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
            _ => continue,
        };
        let mut placed = None;
        for (gi, grp) in groups.iter().enumerate() {
            if grp.reach.is_disjoint(&reach[b]) {
                continue;
            }
            let first = grp.members[0];
            let fits = match (&grp.reduction, &my_space) {
                (None, None) => grp.ranges == my_ranges,
                (Some(space), Some(mine)) => space == mine,
                // A pointwise epilogue over the reduction's whole input space, or over its
                // output (computed once per point after the loops: `sum / n` for a mean).
                (Some(space), None) => member_index(space, &my_ranges).is_some(),
                (None, Some(_)) => false,
            };
            if !fits {
                let msg = format!("cannot fuse {id} with {first}: ranges {my_ranges:?} differ from {:?}", grp.ranges);
                tracing::debug!(target: "inductor::fusion", "{msg}");
                why_no_fuse.push(msg);
                continue;
            }
            let mut members = grp.members.clone();
            members.push(id);
            let checked = legal(&members, &group_of, &groups).and_then(|()| match &grp.reduction {
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
        match placed {
            Some(gi) => {
                groups[gi].members.push(id);
                groups[gi].reach.extend(reach[b].iter().copied());
                group_of[b] = Some(gi);
                tracing::debug!(target: "inductor::fusion", "fuse {id} into {}", groups[gi].members[0]);
            }
            None => {
                group_of[b] = Some(groups.len());
                groups.push(KernelGroup { members: vec![id], ranges: my_ranges, reduction: my_space, reach: reach[b].clone() });
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
            BufferKind::Reduction(_) => group_of[b as usize].map(Unit::Group),
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
    let deps_of = |u: Unit| -> HashSet<Unit> {
        let members: Vec<u32> = match u {
            Unit::Group(gi) => groups[gi].members.iter().map(|m| m.0).collect(),
            Unit::Fallback(b) => vec![b],
        };
        let mut deps = HashSet::new();
        for m in members {
            for &a in &anc[m as usize] {
                if let Some(du) = unit_of(a) {
                    if du != u {
                        deps.insert(du);
                    }
                }
            }
        }
        deps
    };
    let all_deps: Vec<HashSet<Unit>> = units.iter().map(|(_, u)| deps_of(*u)).collect();
    let mut done: HashSet<Unit> = HashSet::new();
    let mut steps = Vec::new();
    while steps.len() < units.len() {
        let next = units
            .iter()
            .enumerate()
            .find(|(i, (_, u))| !done.contains(u) && all_deps[*i].iter().all(|d| done.contains(d)));
        let Some((_, (_, u))) = next else {
            // Cannot happen when `legal` held for every group; keep going in buffer order.
            tracing::error!(target: "inductor::fusion", "cycle between fused groups; scheduling in order");
            for (_, u) in &units {
                if done.insert(*u) {
                    steps.push(match u {
                        Unit::Group(gi) => Step::Kernel(*gi),
                        Unit::Fallback(b) => Step::Fallback(BufferId(*b)),
                    });
                }
            }
            break;
        };
        done.insert(*u);
        steps.push(match u {
            Unit::Group(gi) => Step::Kernel(*gi),
            Unit::Fallback(b) => Step::Fallback(BufferId(*b)),
        });
    }
    Schedule { groups, steps, why_no_fuse }
}

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
