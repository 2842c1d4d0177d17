//! Loops over iterators that cannot be traced (a `DataLoader`): the loop runs in a small
//! driver (`dynamo._loops.LoopDriver`) and its body is a function of its own, compiled frame
//! by frame like any other code.
//!
//! Note [loop bodies as functions]: a `for` loop whose `FOR_ITER` steps an iterator the trace
//! cannot model (its `__next__` runs Python we do not trace) cannot be resumed at its head on
//! every iteration: each resume function would call the next one, one Python frame per
//! iteration (a training loop of 1000 batches would exceed the recursion limit). Instead the
//! frame breaks at the `FOR_ITER` and hands the iterator and the live locals to a driver, which
//! steps the iterator in Python and calls a *loop body function* per item. The body function is
//! the original code with a prefix that pushes the loop's stack back (the values below the
//! iterator and the iterator itself as `None`: only `FOR_ITER` and the loop's exits read them)
//! and the item, and jumps to the first instruction of the body; every way out of the body is
//! redirected to a stub that returns to the driver:
//!
//! - a jump back to the loop head (the back edge, `continue`): `(0, bound, values, dead,
//!   dead_values)`;
//! - a jump out of the loop (`break`, after popping the iterator): `(1, target, bound, values,
//!   dead, dead_values)`, and the driver continues in the resume function of the original code
//!   at `target`;
//! - `return v`: `(2, v)`.
//!
//! `bound` is the tuple of the varnames the stub passes on (bound on every path to it and live
//! after it: a definite-assignment analysis over the body), `values` their values; `dead` the
//! varnames bound on every path to it but dead after it (Note [dead locals across loop
//! iterations]). When the
//! iterator is exhausted the driver continues in the resume function at the loop exit. So the
//! body's tensor code (forward and loss of a training step) is traced once as the body
//! function's frame and every later iteration hits its cache, whatever the trip count.
//!
//! Refused (the frame runs as before: the loop in Python, what it calls compiled frame by
//! frame): bodies that read the iterator's stack slot, loops inside try/with blocks (their handlers would need the body's locals), bodies
//! with exception handlers outside the body, exits whose stack is not the loop's, frames with
//! cell variables (free variables: Note [free variables of loop bodies]), a local that is bound on some paths to an exit only (its passing
//! would need a check at run time), and loops whose entry states do not settle within
//! `MAX_STATES` body functions.

// Note [comprehension loops in a driver]: a comprehension's loop body reads the stack below
// its iterator: LIST_APPEND, SET_ADD and MAP_ADD add to the list, set or dict being built
// there (3.11 runs a comprehension as a frame of its own, with `.0` the iterator; 3.12 inlines
// it, with the saved loop variable below the accumulator, a NULL when it was unbound). So a
// comprehension over an iterator the trace cannot step (`d.items()` of a dict the loop must
// watch, `zip`, `enumerate` of an opaque iterable) with a break in its element goes to the
// driver too: the driver hands the body function the very accumulator object in its stack
// slot (`LoopShape::reads`), the body's frame appends to it as to any list input (a side
// effect replayed after its graph), and the exit resume function receives it with the rest of
// the stack. Slots the body does not read stay `None` (a NULL cannot be passed: the exit
// resume function pushes it itself). So `{k: v.item() for k, v in metrics.items()}` runs its
// element's graphs per item and the code after the comprehension stays compiled (audit 49,
// I3).

// Note [free variables of loop bodies]: a frame with free variables (a closure, a 3.11
// comprehension reading the enclosing function's locals) keeps them in its body and exit
// functions: their code starts with COPY_FREE_VARS, as the original's, and the transformed
// frame hands its closure (the cells of its free variables, LOAD_CLOSURE) to the driver after
// the iterator, which makes each body and exit function over it once per loop. Cell
// variables stay refused: a body would need the cells made by the frame's prologue.

// Note [dead locals across loop iterations]: in eager a local keeps its value until it is
// rebound, deleted or the frame returns, even when nothing reads it again: `o = Obj(v)` in a
// loop body frees the previous iteration's object when the next iteration rebinds `o`, and the
// last one when the function returns. A body function that received only the live varnames
// dropped `o` at the end of each iteration, so a `__del__` or a weak-reference callback ran
// before the code that follows in eager (breaker6 06c, breaker7 R2). Passing every bound
// varname would make the first iteration (where `o` is unbound) and the later ones different
// states, each a body function compiled on its own (a training loop's `loss` and `out`). So
// each exit also returns the dead varnames bound on every path to it, and the driver carries
// them into the next body (or the exit's resume function) only when freeing one is observable
// (`dynamo._loops._free_observable`: a class with `__del__`, a weak reference other than
// torch's own): a variant of the body that receives them, planned beside each state while the
// budget lasts. Otherwise they are dropped when the body returns, as before, which nothing can
// tell apart from eager. The varnames bound at the break and dead at the head start the same way.

use crate::bytecode::analysis::{stack_depths, stack_effect};
use crate::bytecode::opcode::{self, op};
use crate::bytecode::{assemble, InstId, Instruction, Positions, PyVersion};
use crate::symbolic::code_info::{flags, CodeInfo};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Most distinct entry states (sets of bound locals) one loop may need body functions for.
const MAX_STATES: usize = 8;

/// Where control leaves the body of a loop. Each jump names the varnames it passes on (live
/// there and bound on every path) and those it may carry (bound on every path, dead there:
/// Note [dead locals across loop iterations]).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Exit {
    /// Back to the loop head, passing on these varnames, and carrying those.
    Continue(Vec<u32>, Vec<u32>),
    /// Out of the loop to `target` (an instruction of the original code), passing these and
    /// carrying those.
    Leave(usize, Vec<u32>, Vec<u32>),
    /// `RETURN_VALUE`.
    Return,
    /// 3.12's `RETURN_CONST` of this `co_consts` index.
    ReturnConst(u32),
}

/// The loop at `FOR_ITER` `head`: its body is `head + 1 .. end`; `depth` is the stack depth
/// at the head (the iterator included); bit `j` of `reads` is set when the body reads stack
/// slot `j` below the iterator (a comprehension's accumulator).
#[derive(Clone, Copy, Debug)]
pub struct LoopShape {
    pub head: usize,
    pub end: usize,
    pub depth: u32,
    pub reads: u64,
}

/// The shape of the loop at `head` when its body can become a function (Note [loop bodies as
/// functions]), `None` otherwise.
pub fn loop_shape(ci: &CodeInfo, head: usize) -> Option<LoopShape> {
    let insts = &ci.insts;
    let inst = insts.get(head)?;
    let own_handler = |e: Option<crate::bytecode::ExnTarget>| e.is_none_or(|e| comprehension_cleanup(ci, e.handler.index()));
    if inst.opcode != op::FOR_ITER || !own_handler(inst.exn) || ci.n_cellvars > 0 {
        return None;
    }
    let end = inst.target?.index();
    if end <= head + 1 || end > insts.len() {
        return None;
    }
    let depths = stack_depths(insts).ok()?;
    let depth = depths[head]?;
    let in_body = |t: usize| t > head && t < end;
    let mut reads = 0u64;
    for i in head + 1..end {
        let Some(d) = depths[i] else { continue };
        let ins = &insts[i];
        if let Some(e) = ins.exn {
            if !in_body(e.handler.index()) && !comprehension_cleanup(ci, e.handler.index()) {
                return None;
            }
        }
        if (ins.opcode == op::RETURN_VALUE && d != 1) || (ins.opcode == op::RETURN_CONST && d != 0) {
            return None;
        }
        // The stack below the iterator reaches the body function as `None`s, but for the slots
        // the body reads: a comprehension's LIST_APPEND / SET_ADD / MAP_ADD reaches its list,
        // set or dict there (Note [comprehension loops in a driver]). Nothing may read the
        // iterator's slot. (3.11 ceval: PEEK(oparg) after popping the item, or the key and
        // value; COPY reads PEEK(oparg).)
        let popped = match ins.opcode {
            op::LIST_APPEND | op::SET_ADD => Some(1),
            op::MAP_ADD => Some(2),
            op::COPY => Some(0),
            _ => None,
        };
        if let Some(k) = popped {
            let at = d as i64 - k - ins.arg as i64;
            if at == depth as i64 - 1 || !(0..64).contains(&at) {
                return None;
            }
            if at < depth as i64 - 1 {
                reads |= 1u64 << at;
            }
        }
        if let Some(t) = ins.target {
            let t = t.index();
            if !in_body(t) {
                let after = d as i64 + stack_effect(ins.opcode, ins.arg, true).ok()? as i64;
                if t == head {
                    if after != depth as i64 {
                        return None;
                    }
                } else if !opcode::is_unconditional_jump(ins.opcode) || after != depth as i64 - 1 {
                    return None;
                }
            }
        }
        if i + 1 == end && !opcode::is_terminator(ins.opcode) {
            return None;
        }
    }
    Some(LoopShape { head, end, depth, reads })
}

/// Whether the exception handler at `handler` is a 3.12+ inlined comprehension's cleanup (PEP
/// 709: Python/compile.c `pop_inlined_comprehension_state`): `SWAP 2; POP_TOP` (the
/// accumulator), `SWAP n` and `STORE_FAST`s that put back the loop variables the comprehension
/// saved, `RERAISE`, none of it protected by a handler of its own. An exception through it
/// leaves the frame, whose locals are then gone, so a loop body function may raise past it
/// (Note [comprehension loops in a driver]).
pub fn comprehension_cleanup(ci: &CodeInfo, handler: usize) -> bool {
    let insts = &ci.insts;
    let at = |i: usize| insts.get(i).filter(|x| x.exn.is_none());
    if !(at(handler).is_some_and(|x| x.opcode == op::SWAP && x.arg == 2) && at(handler + 1).is_some_and(|x| x.opcode == op::POP_TOP)) {
        return false;
    }
    let mut i = handler + 2;
    if at(i).is_some_and(|x| x.opcode == op::SWAP) {
        i += 1;
    }
    let mut stores = 0;
    while at(i).is_some_and(|x| x.opcode == op::STORE_FAST) {
        i += 1;
        stores += 1;
    }
    stores > 0 && at(i).is_some_and(|x| x.opcode == op::RERAISE)
}

/// Definite (`must`) and possible (`may`) assignment of the varnames over the body, from
/// `entry` at its first instruction: the state at each exit of the body, in instruction order.
fn exits_of(ci: &CodeInfo, shape: LoopShape, entry: &[bool]) -> Vec<(usize, Exit, Vec<bool>, Vec<bool>)> {
    let n = entry.len();
    let (start, end) = (shape.head + 1, shape.end);
    let mut must: Vec<Option<Vec<bool>>> = vec![None; end];
    let mut may: Vec<Option<Vec<bool>>> = vec![None; end];
    let mut work = vec![start];
    must[start] = Some(entry.to_vec());
    may[start] = Some(entry.to_vec());
    let merge = |must: &mut Vec<Option<Vec<bool>>>, may: &mut Vec<Option<Vec<bool>>>, to: usize, m: &[bool], y: &[bool]| -> bool {
        let mut changed = false;
        match &mut must[to] {
            None => {
                must[to] = Some(m.to_vec());
                may[to] = Some(y.to_vec());
                return true;
            }
            Some(cur) => {
                for k in 0..cur.len() {
                    if cur[k] && !m[k] {
                        cur[k] = false;
                        changed = true;
                    }
                }
            }
        }
        let cur = may[to].as_mut().expect("set with must");
        for k in 0..cur.len() {
            if !cur[k] && y[k] {
                cur[k] = true;
                changed = true;
            }
        }
        changed
    };
    let mut exits: HashMap<usize, (Vec<bool>, Vec<bool>)> = HashMap::new();
    while let Some(i) = work.pop() {
        let (m0, y0) = (must[i].clone().expect("visited"), may[i].clone().expect("visited"));
        let ins = &ci.insts[i];
        let (mut m, mut y) = (m0.clone(), y0.clone());
        let slot = ins.arg as usize;
        match ins.opcode {
            op::STORE_FAST if slot < n => {
                m[slot] = true;
                y[slot] = true;
            }
            op::DELETE_FAST if slot < n => {
                m[slot] = false;
                y[slot] = false;
            }
            _ => {}
        }
        if let Some(e) = ins.exn.filter(|e| e.handler.index() > shape.head && e.handler.index() < end) {
            // An exception leaves before or after the instruction's own write (a handler out of
            // the body is a comprehension's cleanup, which leaves the frame).
            let mb: Vec<bool> = m0.iter().zip(&m).map(|(a, b)| *a && *b).collect();
            let yb: Vec<bool> = y0.iter().zip(&y).map(|(a, b)| *a || *b).collect();
            if merge(&mut must, &mut may, e.handler.index(), &mb, &yb) {
                work.push(e.handler.index());
            }
        }
        let mut succ = Vec::new();
        if !opcode::is_terminator(ins.opcode) && i + 1 < end {
            succ.push(i + 1);
        }
        if let Some(t) = ins.target {
            succ.push(t.index());
        }
        if matches!(ins.opcode, op::RETURN_VALUE | op::RETURN_CONST) {
            exits.insert(i, (m.clone(), y.clone()));
        }
        for s in succ {
            if s > shape.head && s < end {
                if merge(&mut must, &mut may, s, &m, &y) {
                    work.push(s);
                }
            } else {
                let e = exits.entry(i).or_insert_with(|| (m.clone(), y.clone()));
                for k in 0..n {
                    e.0[k] &= m[k];
                    e.1[k] |= y[k];
                }
            }
        }
    }
    let mut out: Vec<_> = exits
        .into_iter()
        .map(|(i, (m, y))| {
            let ins = &ci.insts[i];
            let exit = match ins.opcode {
                op::RETURN_VALUE => Exit::Return,
                op::RETURN_CONST => Exit::ReturnConst(ins.arg),
                _ => {
                    let t = ins.target.expect("exit by a jump").index();
                    if t == shape.head {
                        Exit::Continue(vec![], vec![])
                    } else {
                        Exit::Leave(t, vec![], vec![])
                    }
                }
            };
            (i, exit, m, y)
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out
}

/// One body function: the entry state it was built for and its code.
pub struct Body {
    /// Varnames bound at the loop head (the driver's key, with `carried`).
    pub head_bound: Vec<u32>,
    /// Varnames dead at the head that the body receives anyway (Note [dead locals across loop
    /// iterations]); empty for the body every state has.
    pub carried: Vec<u32>,
    /// Varnames the body function receives (the others arrive unbound).
    pub passed: Vec<u32>,
    pub code: Py<PyAny>,
}

/// The body functions and loop exits of one loop, for every entry state reachable from the
/// state at the break.
pub struct LoopPlan {
    pub bodies: Vec<Body>,
    /// (target in the original code, varnames bound at the head or at the exit): the driver
    /// continues at `target` with the varnames live there, and those carried.
    pub exits: Vec<(usize, Vec<u32>)>,
}

type BodyKey = (usize, usize, Vec<u32>);

/// Body code per (original code address, head, received varnames): (the original code, kept
/// alive so that its address is never reused by another code object, the body code, its exits).
fn body_cache() -> &'static Mutex<HashMap<BodyKey, (Py<PyAny>, Py<PyAny>, Vec<Exit>)>> {
    static C: OnceLock<Mutex<HashMap<BodyKey, (Py<PyAny>, Py<PyAny>, Vec<Exit>)>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

static BODY_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Plans the loop at `shape` of `ci` (an original code) entered with the varnames `bound`
/// bound at its head: body functions for every state the loop can reach, and the exits.
/// `Ok(None)` when a body cannot be built (see the Note's refusals).
pub fn plan_loop(py: Python<'_>, ci: &CodeInfo, shape: LoopShape, bound: &[u32]) -> PyResult<Option<LoopPlan>> {
    let live_at = |t: usize, set: &[u32]| -> Vec<u32> { set.iter().copied().filter(|&v| ci.live.get(t).is_some_and(|l| l[v as usize])).collect() };
    let union = |a: &[u32], b: &[u32]| -> Vec<u32> {
        let mut u: Vec<u32> = a.iter().chain(b).copied().collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    let head_live = live_at(shape.head, bound);
    let start_dead: Vec<u32> = bound.iter().copied().filter(|v| !head_live.contains(v)).collect();
    // States without carried varnames first (every loop needs them), then the carrying variants
    // while the budget lasts (without one, the driver drops what it would carry).
    let mut todo: Vec<(Vec<u32>, Vec<u32>)> = vec![(head_live.clone(), vec![])];
    let mut variants: Vec<(Vec<u32>, Vec<u32>)> = vec![];
    if !start_dead.is_empty() {
        variants.push((head_live, start_dead));
    }
    let mut bodies: Vec<Body> = Vec::new();
    let mut exits: Vec<(usize, Vec<u32>)> = Vec::new();
    let add_exit = |exits: &mut Vec<(usize, Vec<u32>)>, e: (usize, Vec<u32>)| {
        if !exits.contains(&e) {
            exits.push(e);
        }
    };
    loop {
        let (state, carried, variant) = match todo.pop() {
            Some((s, c)) => (s, c, false),
            None => match variants.pop() {
                Some((s, c)) => (s, c, true),
                None => break,
            },
        };
        if bodies.iter().any(|b| b.head_bound == state && b.carried == carried) {
            continue;
        }
        if variant && bodies.len() >= 2 * MAX_STATES {
            continue;
        }
        if !variant && bodies.iter().filter(|b| b.carried.is_empty()).count() >= MAX_STATES {
            return Ok(None);
        }
        let passed = union(&live_at(shape.head + 1, &state), &carried);
        let Some((code, outs)) = body_code(py, ci, shape, &passed)? else {
            if variant {
                continue;
            }
            return Ok(None);
        };
        // Exhausted with this state: the exit resume function.
        add_exit(&mut exits, (shape.end, union(&live_at(shape.end, &state), &carried)));
        for e in outs {
            match e {
                Exit::Continue(b, d) => {
                    if !d.is_empty() {
                        variants.push((b.clone(), d));
                    }
                    todo.push((b, vec![]));
                }
                Exit::Leave(t, b, d) => {
                    if !d.is_empty() {
                        add_exit(&mut exits, (t, union(&b, &d)));
                    }
                    add_exit(&mut exits, (t, b));
                }
                Exit::Return | Exit::ReturnConst(_) => {}
            }
        }
        bodies.push(Body { head_bound: state, carried, passed, code });
    }
    Ok(Some(LoopPlan { bodies, exits }))
}

/// The body function of the loop `shape` of `ci` receiving the varnames `passed` (the others
/// unbound), with its exits; `None` when a local would be passed on some paths only. Cached.
fn body_code(py: Python<'_>, ci: &CodeInfo, shape: LoopShape, passed: &[u32]) -> PyResult<Option<(Py<PyAny>, Vec<Exit>)>> {
    let key: BodyKey = (ci.code.as_ptr() as usize, shape.head, passed.to_vec());
    if let Some((_, c, e)) = body_cache().lock().get(&key) {
        return Ok(Some((c.clone_ref(py), e.clone())));
    }
    let nv = ci.varnames.len() as u32;
    let mut entry = vec![false; nv as usize];
    for &v in passed {
        entry[v as usize] = true;
    }
    // The exits, with the varnames each passes on.
    let mut exits = Vec::new();
    for (i, exit, must, may) in exits_of(ci, shape, &entry) {
        let pass_on = |t: usize| -> Option<(Vec<u32>, Vec<u32>)> {
            let live = ci.live.get(t)?;
            let (mut out, mut dead) = (Vec::new(), Vec::new());
            for v in 0..nv as usize {
                if live[v] && must[v] != may[v] {
                    return None;
                }
                if must[v] {
                    if live[v] { &mut out } else { &mut dead }.push(v as u32);
                }
            }
            Some((out, dead))
        };
        let exit = match exit {
            Exit::Continue(..) => match pass_on(shape.head) {
                Some((b, d)) => Exit::Continue(b, d),
                None => return Ok(None),
            },
            Exit::Leave(t, ..) => match pass_on(t) {
                Some((b, d)) => Exit::Leave(t, b, d),
                None => return Ok(None),
            },
            other => other,
        };
        exits.push((i, exit));
    }
    // Stack below the item: the values under the iterator and the iterator, all `None`.
    let k = shape.depth + 1;
    let pos = Positions::line(ci.firstlineno);
    let mut insts: Vec<Instruction> = Vec::new();
    let push = |insts: &mut Vec<Instruction>, opcode: u8, arg: u32, pos: Positions| insts.push(Instruction::new(opcode, arg).with_positions(pos));
    // Note [free variables of loop bodies]: the body function is made over the frame's closure.
    if ci.n_freevars > 0 {
        push(&mut insts, op::COPY_FREE_VARS, ci.n_freevars as u32, pos);
    }
    push(&mut insts, op::RESUME, 0, pos);
    for v in 0..nv {
        if !entry[v as usize] {
            push(&mut insts, op::DELETE_FAST, v, pos);
        }
    }
    // Note [hidden stack slots] (resume.rs): each slot is emptied once on the stack.
    for j in 0..k {
        push(&mut insts, op::LOAD_FAST, nv + j, pos);
        push(&mut insts, op::DELETE_FAST, nv + j, pos);
    }
    let prefix = insts.len() as u32 + 1;
    insts.push(Instruction::jump(op::JUMP_FORWARD, InstId(shape.head as u32 + 1 + prefix)).with_positions(pos));
    insts.extend(super::relocated(ci, prefix, k));
    let consts = ci.consts.bind(py);
    let mut new_consts: Vec<Py<PyAny>> = consts.iter().map(|c| c.unbind()).collect();
    let add_const = |new_consts: &mut Vec<Py<PyAny>>, obj: Py<PyAny>| -> u32 {
        new_consts.push(obj);
        new_consts.len() as u32 - 1
    };
    let int = |v: i64| v.into_pyobject(py).unwrap().into_any().unbind();
    let tuple_of = |vs: &[u32]| -> PyResult<Py<PyAny>> { Ok(PyTuple::new(py, vs.iter().map(|&v| v as i64))?.into_any().unbind()) };
    // Stubs after the code; each exit instruction is pointed at its stub.
    let mut described = Vec::new();
    for (i, exit) in exits {
        let at = i + prefix as usize;
        let stub = InstId(insts.len() as u32);
        let epos = insts[at].positions;
        match &exit {
            Exit::Return | Exit::ReturnConst(_) => {
                insts[at] = Instruction::jump(op::JUMP_FORWARD, stub).with_positions(epos).with_exn(insts[at].exn);
                if let Exit::ReturnConst(c) = exit {
                    push(&mut insts, op::LOAD_CONST, c, epos);
                }
                let kind = add_const(&mut new_consts, int(2));
                push(&mut insts, op::LOAD_CONST, kind, epos);
                push(&mut insts, op::SWAP, 2, epos);
                push(&mut insts, op::BUILD_TUPLE, 2, epos);
                push(&mut insts, op::RETURN_VALUE, 0, epos);
            }
            Exit::Continue(b, d) | Exit::Leave(_, b, d) => {
                insts[at].target = Some(stub);
                let (kind, drop) = if matches!(exit, Exit::Continue(..)) { (0, shape.depth) } else { (1, shape.depth - 1) };
                for _ in 0..drop {
                    push(&mut insts, op::POP_TOP, 0, epos);
                }
                let c = add_const(&mut new_consts, int(kind));
                push(&mut insts, op::LOAD_CONST, c, epos);
                let mut n = 1;
                if let Exit::Leave(t, ..) = exit {
                    let c = add_const(&mut new_consts, int(t as i64));
                    push(&mut insts, op::LOAD_CONST, c, epos);
                    n += 1;
                }
                for names in [b, d] {
                    let c = add_const(&mut new_consts, tuple_of(names)?);
                    push(&mut insts, op::LOAD_CONST, c, epos);
                    for &v in names {
                        push(&mut insts, op::LOAD_FAST, v, epos);
                    }
                    push(&mut insts, op::BUILD_TUPLE, names.len() as u32, epos);
                }
                push(&mut insts, op::BUILD_TUPLE, n + 4, epos);
                push(&mut insts, op::RETURN_VALUE, 0, epos);
            }
        }
        described.push(exit);
    }
    let asm = assemble(&insts, ci.firstlineno, PyVersion::CURRENT)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("assembling loop body code: {e}")))?;
    let offset = ci.insts[shape.head].offset.unwrap_or(0);
    let name = format!("__loop_body_at_{offset}_{}", BODY_COUNT.fetch_add(1, Ordering::Relaxed));
    let mut varnames = ci.varnames.clone();
    varnames.extend((0..k).map(|i| format!("__stack{}", nv + i)));
    let kwargs = PyDict::new(py);
    kwargs.set_item("co_code", PyBytes::new(py, &asm.code))?;
    kwargs.set_item("co_linetable", PyBytes::new(py, &asm.linetable))?;
    kwargs.set_item("co_exceptiontable", PyBytes::new(py, &asm.exceptiontable))?;
    kwargs.set_item("co_stacksize", asm.stacksize)?;
    kwargs.set_item("co_consts", PyTuple::new(py, new_consts.iter().map(|c| c.bind(py)))?)?;
    kwargs.set_item("co_varnames", PyTuple::new(py, &varnames)?)?;
    kwargs.set_item("co_nlocals", varnames.len())?;
    kwargs.set_item("co_argcount", varnames.len())?;
    kwargs.set_item("co_posonlyargcount", 0)?;
    kwargs.set_item("co_kwonlyargcount", 0)?;
    kwargs.set_item("co_flags", ci.flags & !(flags::CO_VARARGS | flags::CO_VARKEYWORDS))?;
    // As a resume function's (Note [resume frames in tracebacks] in resume.rs): the frame's
    // name is the original's, as tracebacks, `inspect.stack()` and logging records show it.
    kwargs.set_item("co_name", &ci.name)?;
    kwargs.set_item("co_qualname", &name)?;
    let code = ci.code.bind(py).call_method("replace", (), Some(&kwargs))?.unbind();
    body_cache().lock().insert(key, (ci.code.clone_ref(py), code.clone_ref(py), described.clone()));
    Ok(Some((code, described)))
}

/// The loop driver (`dynamo._loops.LoopDriver`) for the loop `shape` of `ci` (an original
/// code) entered with the varnames `bound` bound and the stack below the iterator laid out as
/// `layout`: body functions and exit resume functions for every state the loop can reach,
/// made over `globals`. `None` when a body cannot be built (Note [loop bodies as functions]).
pub fn make_driver(py: Python<'_>, ci: &CodeInfo, shape: LoopShape, bound: &[u32], layout: &[super::resume::StackSlot], globals: &Py<PyAny>) -> PyResult<Option<Py<PyAny>>> {
    if layout.len() as u32 + 1 != shape.depth {
        return Ok(None);
    }
    // Per stack slot below the iterator: the index of its value among those the transformed
    // frame passes (NULLs are not passed) when the body reads it, else -1 (`None` in the body).
    let mut stack_map = Vec::with_capacity(layout.len());
    let mut passed_index = 0i64;
    for (j, slot) in layout.iter().enumerate() {
        let read = shape.reads & (1u64 << j) != 0;
        match slot {
            super::resume::StackSlot::Null if read => return Ok(None),
            super::resume::StackSlot::Iter if read => return Ok(None),
            super::resume::StackSlot::Null => stack_map.push(-1),
            _ => {
                stack_map.push(if read { passed_index } else { -1 });
                passed_index += 1;
            }
        }
    }
    let Some(plan) = plan_loop(py, ci, shape, bound)? else { return Ok(None) };
    let nv = ci.varnames.len() as u32;
    let tuple_of = |vs: &[u32]| PyTuple::new(py, vs.iter().map(|&v| v as i64));
    // Functions over the frame's globals, or their codes when the driver makes them over the
    // closure it is handed (Note [free variables of loop bodies]).
    let function = py.import("types")?.getattr("FunctionType")?;
    let make = |code: &Py<PyAny>| -> PyResult<Bound<'_, PyAny>> {
        if ci.n_freevars > 0 {
            Ok(code.bind(py).clone())
        } else {
            function.call1((code.bind(py), globals.bind(py)))
        }
    };
    let bodies = PyDict::new(py);
    for b in &plan.bodies {
        bodies.set_item((tuple_of(&b.head_bound)?, tuple_of(&b.carried)?), (make(&b.code)?, tuple_of(&b.passed)?))?;
    }
    let exits = PyDict::new(py);
    for (t, b) in &plan.exits {
        let unbound: Vec<u32> = (0..nv).filter(|v| !b.contains(v)).collect();
        let code = super::resume::resume_code(py, ci, *t, layout, 0, false, &unbound)?;
        exits.set_item((*t as i64, tuple_of(b)?), make(&code)?)?;
    }
    let live = |t: usize| -> Vec<u32> { (0..nv).filter(|&v| ci.live.get(t).is_some_and(|l| l[v as usize])).collect() };
    let start: Vec<u32> = bound.iter().copied().filter(|v| live(shape.head).contains(v)).collect();
    let start_dead: Vec<u32> = bound.iter().copied().filter(|v| !start.contains(v)).collect();
    let driver = py.import("dynamo._loops")?.getattr("LoopDriver")?.call1((
        nv,
        passed_index,
        PyTuple::new(py, &stack_map)?,
        tuple_of(&start)?,
        tuple_of(&start_dead)?,
        bodies,
        exits,
        shape.end as i64,
        tuple_of(&live(shape.end))?,
        if ci.n_freevars > 0 { Some(globals.clone_ref(py)) } else { None },
    ))?;
    Ok(Some(driver.unbind()))
}
