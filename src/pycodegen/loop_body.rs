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
//! - a jump back to the loop head (the back edge, `continue`): `(0, bound, values)`;
//! - a jump out of the loop (`break`, after popping the iterator): `(1, target, bound, values)`,
//!   and the driver continues in the resume function of the original code at `target`;
//! - `return v`: `(2, v)`.
//!
//! `bound` is the tuple of the varnames the stub passes on (bound on every path to it and live
//! after it: a definite-assignment analysis over the body), `values` their values. When the
//! iterator is exhausted the driver continues in the resume function at the loop exit. So the
//! body's tensor code (forward and loss of a training step) is traced once as the body
//! function's frame and every later iteration hits its cache, whatever the trip count.
//!
//! Refused (the frame runs as before: the loop in Python, what it calls compiled frame by
//! frame): bodies that read the stack below the item (a comprehension appending to its list
//! with LIST_APPEND), loops inside try/with blocks (their handlers would need the body's locals), bodies
//! with exception handlers outside the body, exits whose stack is not the loop's, frames with
//! cell or free variables, a local that is bound on some paths to an exit only (its passing
//! would need a check at run time), and loops whose entry states do not settle within
//! `MAX_STATES` body functions.

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

/// Where control leaves the body of a loop.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Exit {
    /// Back to the loop head, passing on these varnames.
    Continue(Vec<u32>),
    /// Out of the loop to `target` (an instruction of the original code), passing these.
    Leave(usize, Vec<u32>),
    /// `RETURN_VALUE`.
    Return,
    /// 3.12's `RETURN_CONST` of this `co_consts` index.
    ReturnConst(u32),
}

/// The loop at `FOR_ITER` `head`: its body is `head + 1 .. end`; `depth` is the stack depth
/// at the head (the iterator included).
#[derive(Clone, Copy, Debug)]
pub struct LoopShape {
    pub head: usize,
    pub end: usize,
    pub depth: u32,
}

/// The shape of the loop at `head` when its body can become a function (Note [loop bodies as
/// functions]), `None` otherwise.
pub fn loop_shape(ci: &CodeInfo, head: usize) -> Option<LoopShape> {
    let insts = &ci.insts;
    let inst = insts.get(head)?;
    if inst.opcode != op::FOR_ITER || inst.exn.is_some() || ci.n_freevars > 0 || ci.n_cellvars > 0 {
        return None;
    }
    let end = inst.target?.index();
    if end <= head + 1 || end > insts.len() {
        return None;
    }
    let depths = stack_depths(insts).ok()?;
    let depth = depths[head]?;
    let in_body = |t: usize| t > head && t < end;
    for i in head + 1..end {
        let Some(d) = depths[i] else { continue };
        let ins = &insts[i];
        if let Some(e) = ins.exn {
            if !in_body(e.handler.index()) {
                return None;
            }
        }
        if (ins.opcode == op::RETURN_VALUE && d != 1) || (ins.opcode == op::RETURN_CONST && d != 0) {
            return None;
        }
        // The stack below the item reaches the body function as `None`s: nothing may read it
        // but the pops of the loop's exits (a comprehension's LIST_APPEND reaches its list).
        // (3.11 ceval: PEEK(oparg) after popping the item, or the key and value.)
        let popped = match ins.opcode {
            op::LIST_APPEND | op::SET_ADD => Some(1),
            op::MAP_ADD => Some(2),
            op::COPY => Some(0),
            _ => None,
        };
        if popped.is_some_and(|k| (d as i64 - k - ins.arg as i64) < depth as i64) {
            return None;
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
    Some(LoopShape { head, end, depth })
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
        if let Some(e) = ins.exn {
            // An exception leaves before or after the instruction's own write.
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
                        Exit::Continue(vec![])
                    } else {
                        Exit::Leave(t, vec![])
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
    /// Varnames bound at the loop head (the driver's key).
    pub head_bound: Vec<u32>,
    /// Varnames the body function receives (the others arrive unbound).
    pub passed: Vec<u32>,
    pub code: Py<PyAny>,
}

/// The body functions and loop exits of one loop, for every entry state reachable from the
/// state at the break.
pub struct LoopPlan {
    pub bodies: Vec<Body>,
    /// (target in the original code, varnames bound at the head or at the exit): the driver
    /// continues at `target` with the varnames live there.
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
    let head_live = live_at(shape.head, bound);
    let mut todo = vec![head_live];
    let mut bodies: Vec<Body> = Vec::new();
    let mut exits: Vec<(usize, Vec<u32>)> = Vec::new();
    while let Some(state) = todo.pop() {
        if bodies.iter().any(|b| b.head_bound == state) {
            continue;
        }
        if bodies.len() >= MAX_STATES {
            return Ok(None);
        }
        // Exhausted with this state: the exit resume function.
        let exhausted = (shape.end, live_at(shape.end, &state));
        if !exits.contains(&exhausted) {
            exits.push(exhausted);
        }
        let passed = live_at(shape.head + 1, &state);
        let Some((code, outs)) = body_code(py, ci, shape, &passed)? else { return Ok(None) };
        for e in outs {
            match e {
                Exit::Continue(b) => todo.push(b),
                Exit::Leave(t, b) => {
                    if !exits.contains(&(t, b.clone())) {
                        exits.push((t, b));
                    }
                }
                Exit::Return | Exit::ReturnConst(_) => {}
            }
        }
        bodies.push(Body { head_bound: state, passed, code });
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
        let pass_on = |t: usize| -> Option<Vec<u32>> {
            let live = ci.live.get(t)?;
            let mut out = Vec::new();
            for v in 0..nv as usize {
                if live[v] && must[v] != may[v] {
                    return None;
                }
                if live[v] && must[v] {
                    out.push(v as u32);
                }
            }
            Some(out)
        };
        let exit = match exit {
            Exit::Continue(_) => match pass_on(shape.head) {
                Some(b) => Exit::Continue(b),
                None => return Ok(None),
            },
            Exit::Leave(t, _) => match pass_on(t) {
                Some(b) => Exit::Leave(t, b),
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
            Exit::Continue(b) | Exit::Leave(_, b) => {
                insts[at].target = Some(stub);
                let (kind, drop) = if matches!(exit, Exit::Continue(_)) { (0, shape.depth) } else { (1, shape.depth - 1) };
                for _ in 0..drop {
                    push(&mut insts, op::POP_TOP, 0, epos);
                }
                let c = add_const(&mut new_consts, int(kind));
                push(&mut insts, op::LOAD_CONST, c, epos);
                let mut n = 1;
                if let Exit::Leave(t, _) = exit {
                    let c = add_const(&mut new_consts, int(t as i64));
                    push(&mut insts, op::LOAD_CONST, c, epos);
                    n += 1;
                }
                let c = add_const(&mut new_consts, tuple_of(b)?);
                push(&mut insts, op::LOAD_CONST, c, epos);
                for &v in b {
                    push(&mut insts, op::LOAD_FAST, v, epos);
                }
                push(&mut insts, op::BUILD_TUPLE, b.len() as u32, epos);
                push(&mut insts, op::BUILD_TUPLE, n + 2, epos);
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
    if layout.contains(&super::resume::StackSlot::Null) || layout.len() as u32 + 1 != shape.depth {
        return Ok(None);
    }
    let Some(plan) = plan_loop(py, ci, shape, bound)? else { return Ok(None) };
    let nv = ci.varnames.len() as u32;
    let tuple_of = |vs: &[u32]| PyTuple::new(py, vs.iter().map(|&v| v as i64));
    let function = py.import("types")?.getattr("FunctionType")?;
    let bodies = PyDict::new(py);
    for b in &plan.bodies {
        let f = function.call1((b.code.bind(py), globals.bind(py)))?;
        bodies.set_item(tuple_of(&b.head_bound)?, (f, tuple_of(&b.passed)?))?;
    }
    let exits = PyDict::new(py);
    for (t, b) in &plan.exits {
        let unbound: Vec<u32> = (0..nv).filter(|v| !b.contains(v)).collect();
        let code = super::resume::resume_code(py, ci, *t, layout, 0, false, &unbound)?;
        exits.set_item((*t as i64, tuple_of(b)?), function.call1((code.bind(py), globals.bind(py)))?)?;
    }
    let live = |t: usize| -> Vec<u32> { (0..nv).filter(|&v| ci.live.get(t).is_some_and(|l| l[v as usize])).collect() };
    let start: Vec<u32> = bound.iter().copied().filter(|v| live(shape.head).contains(v)).collect();
    let driver = py.import("dynamo._loops")?.getattr("LoopDriver")?.call1((
        nv,
        layout.len(),
        tuple_of(&start)?,
        bodies,
        exits,
        shape.end as i64,
        tuple_of(&live(shape.end))?,
    ))?;
    Ok(Some(driver.unbind()))
}
