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
use super::ir::{BufferId, BufferKind, GraphIr, ReadsHandler};

/// One fused kernel to be: realized Pointwise buffers sharing one iteration space.
#[derive(Clone, Debug)]
pub struct KernelGroup {
    pub members: Vec<BufferId>,
    pub ranges: Vec<i64>,
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
            BufferKind::Pointwise(pw) => {
                let mut h = ReadsHandler::default();
                let n = pw.ranges.len();
                let index: Vec<_> = (0..n).map(|d| super::ir::Affine::var(d, n)).collect();
                (pw.inner_fn)(&mut h, &index);
                h.reads
            }
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
        BufferKind::Fallback(_) => true,
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
        if ir.pointwise(BufferId(b as u32)).is_none() {
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

    let legal = |members: &[BufferId]| -> Result<(), String> {
        let set: HashSet<u32> = members.iter().map(|m| m.0).collect();
        for m in members {
            for &a in &anc[m.0 as usize] {
                if set.contains(&a) || !is_executed(ir, BufferId(a)) {
                    continue;
                }
                if let Some(inner) = anc[a as usize].iter().find(|x| set.contains(x)) {
                    return Err(format!("buf{a} depends on buf{inner} and feeds {m}"));
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
        let Some(pw) = ir.pointwise(id) else { continue };
        if !pw.realized {
            continue;
        }
        let mut placed = None;
        for (gi, grp) in groups.iter().enumerate() {
            if grp.reach.is_disjoint(&reach[b]) {
                continue;
            }
            let first = grp.members[0];
            if grp.ranges != pw.ranges {
                let msg = format!(
                    "cannot fuse {id} with {first}: ranges {:?} differ from {:?}",
                    pw.ranges, grp.ranges
                );
                tracing::debug!(target: "inductor::fusion", "{msg}");
                why_no_fuse.push(msg);
                continue;
            }
            let mut members = grp.members.clone();
            members.push(id);
            match legal(&members) {
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
                groups.push(KernelGroup { members: vec![id], ranges: pw.ranges.clone(), reach: reach[b].clone() });
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
                    match ir.pointwise(*m) {
                        Some(pw) if pw.realized && pw.ranges == grp.ranges => {}
                        _ => errors.push(format!("{m} in kernel group {gi} is not a realized pointwise over {:?}", grp.ranges)),
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
