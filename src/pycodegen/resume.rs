//! Graph breaks: the transformed code that runs the graph captured before an unsupported
//! instruction, runs that instruction as ordinary Python, and continues in a resume function.
//!
//! Layout of the transformed code of a frame that breaks at instruction `I` (3.11):
//! ```text
//! prologue (MAKE_CELL / COPY_FREE_VARS / RESUME)
//! call the graph -> STORE_FAST tmp              (result tuple of the compiled graph)
//! build every live value (locals, stack below I, I's operands) into one tuple -> STORE_FAST tmp
//! restore locals; push I's operands (NULLs with PUSH_NULL)
//! I                                             (run for real)
//! args = locals + stack-below-I + I's results
//! return __resume_at_<offset>_<n>(*args)        (once per successor: two for a conditional jump)
//! ```
//! Every value is built from the pre-break state before any local is overwritten, so sources
//! read the values the frame saw. The resume function is the original code with all locals and
//! the stack as parameters and a prefix that pushes the stack back and jumps to the
//! continuation point (torch/_dynamo/resume_execution.py does the same for 3.11). Resume code is
//! cached per (code, target, stack layout, unbound locals), so repeated breaks reuse it.
//!
//! Note [cells across a graph break]: a function made before the break must keep sharing its
//! cells with the code after it, so cells travel as the cell objects, never as their contents.
//! The transformed code keeps the prologue's MAKE_CELLs, gives each cell the contents the trace
//! left in it (`SideEffect::SetDeref`, replayed with the other side effects, after every live
//! value was read and before the instruction runs), rebuilds functions made in the trace over
//! the real cells (`Rebuild::MakeFunction`), and passes the cells to the resume function: an
//! argument that is a cell in its own slot, the other cell variables after the stack values.
//! The resume function names those cell variables as parameters too; `code.replace` then gives
//! each its parameter slot (a cell variable named in `co_varnames` shares the varname's slot,
//! as an argument that is a cell does), so they arrive already made and the jump over the
//! prologue skips MAKE_CELL. Tracing such a frame wraps each of them as a cell whose contents
//! are `L['name'].cell_contents` (`CodeInfo::cells_on_entry`); writes to them are side effects
//! (`CellTarget::FrameCell`). torch's Dynamo passes the cells as the resume function's closure
//! instead; parameters keep a cell variable's slot kind, so an unbound read still raises
//! `UnboundLocalError` as in the original frame rather than the `NameError` of a free variable.

use super::{finish_with, is_deref, PyCodegen, Rebuild, SideEffect};
use crate::bytecode::opcode::op;
use crate::bytecode::{assemble, InstId, Instruction, Positions, PyVersion};
use crate::source::Source;
use crate::symbolic::code_info::{flags, CodeInfo};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Everything needed to emit the code of a frame that breaks at one instruction.
pub struct BreakPlan<'a> {
    /// Temporary locals for shared rebuilds (`Rebuild::Shared`).
    pub n_shared: u32,
    pub compiled_fn: Option<Py<PyAny>>,
    pub inputs: &'a [Arc<Source>],
    /// Bound locals: (varnames index, value).
    pub locals: Vec<(u32, Rebuild)>,
    /// Locals unbound at the break (deleted again in the resume function).
    pub unbound: Vec<u32>,
    /// Locals bound at the break that the resume function does not receive (never touched
    /// again): the transformed frame keeps its slot until it returns (Note [resume call
    /// lifetimes] in src/eval_frame/hook.rs).
    pub kept: Vec<u32>,
    /// The stack below the instruction's operands (`None`: a NULL).
    pub preserved: Vec<Option<Rebuild>>,
    /// The instruction's operands (`None`: a NULL).
    pub operands: Vec<Option<Rebuild>>,
    /// The breaking instruction, copied from the original code.
    pub inst: Instruction,
    /// A pending KW_NAMES tuple for a breaking CALL.
    pub kw_names: Option<Py<PyAny>>,
    /// Values the instruction pushes (0 for a conditional jump).
    pub n_results: usize,
    /// The resume function pushes a NULL above the results: a break at a method load on a
    /// CPython that puts the call's NULL after the callable (3.13), where the instruction runs
    /// as a plain attribute load (see [`resume_code`]).
    pub null_on_top: bool,
    /// Where execution continues: `[next]`, or `[fallthrough, jump target]` for a conditional jump.
    pub targets: Vec<usize>,
    pub globals: Py<PyAny>,
    /// Writes outside the frame, replayed before the instruction runs.
    pub effects: Vec<SideEffect>,
    /// Set when a failing graph may rerun the frame as the original code (Note [graph failure
    /// reruns the frame]).
    pub rerun_on_failure: Option<super::Rerun>,
    /// A `FOR_ITER` over an iterator the trace cannot step: instead of running it, call this
    /// loop driver with the first `n` varnames, the preserved stack and the iterator (Note
    /// [loop bodies as functions] in `pycodegen::loop_body`).
    pub loop_driver: Option<(Py<PyAny>, u32)>,
}


/// (operands popped, results pushed) at run time for the instructions a graph break may stop
/// at (3.11 stack layouts from Python/ceval.c; CALL pops its NULL/callable slots and arguments
/// itself, PRECALL does not). `None`: no graph break at this instruction.
pub fn break_operands(inst: &Instruction) -> Option<(usize, usize)> {
    let a = inst.arg as usize;
    Some(match inst.opcode {
        op::CALL => (a + 2, 1),
        // 3.13: the tuple of keyword names sits above the arguments.
        op::CALL_KW => (a + 3, 1),
        op::TO_BOOL | op::CONVERT_VALUE => (1, 1),
        op::CALL_FUNCTION_EX => (3 + (a & 1), 1),
        op::POP_JUMP_FORWARD_IF_FALSE | op::POP_JUMP_FORWARD_IF_TRUE | op::POP_JUMP_BACKWARD_IF_FALSE | op::POP_JUMP_BACKWARD_IF_TRUE => (1, 0),
        op::POP_JUMP_FORWARD_IF_NONE | op::POP_JUMP_FORWARD_IF_NOT_NONE | op::POP_JUMP_BACKWARD_IF_NONE | op::POP_JUMP_BACKWARD_IF_NOT_NONE => (1, 0),
        // 3.11's `a and b` / `a or b` whose value is kept: the value is popped on the
        // fall-through path and kept on the jump (`jump_results`).
        op::JUMP_IF_FALSE_OR_POP | op::JUMP_IF_TRUE_OR_POP => (1, 0),
        op::STORE_ATTR | op::DELETE_SUBSCR => (2, 0),
        op::STORE_GLOBAL | op::STORE_DEREF | op::DELETE_ATTR => (1, 0),
        op::STORE_SUBSCR => (3, 0),
        op::BINARY_SUBSCR | op::BINARY_OP | op::COMPARE_OP | op::IS_OP | op::CONTAINS_OP => (2, 1),
        // 3.12: `obj[start:end]` and `obj[start:end] = v`.
        op::BINARY_SLICE => (3, 1),
        op::STORE_SLICE => (4, 0),
        op::UNARY_NEGATIVE | op::UNARY_NOT | op::UNARY_INVERT | op::UNARY_POSITIVE | op::LOAD_ATTR | op::GET_ITER => (1, 1),
        // Emitted as LOAD_ATTR; the NULL below the bound method is re-pushed by the resume function.
        op::LOAD_METHOD => (1, 1),
        op::LOAD_GLOBAL if a & 1 == 0 => (0, 1),
        op::FORMAT_VALUE => (1 + usize::from(a & 0x04 != 0), 1),
        op::BUILD_STRING | op::BUILD_TUPLE | op::BUILD_LIST | op::BUILD_SET => (a, 1),
        op::BUILD_MAP => (2 * a, 1),
        op::BEFORE_WITH => (1, 2),
        // The next item (with the iterator below it), or on exhaustion nothing: the iterator is
        // popped and the jump taken (`jumps_too`).
        op::FOR_ITER => (1, 2),
        // Structural pattern matching (3.11): these push without popping their subject.
        op::MATCH_MAPPING | op::MATCH_SEQUENCE | op::GET_LEN => (1, 2),
        op::MATCH_KEYS => (2, 3),
        op::MATCH_CLASS => (3, 1),
        // `raise` / `raise exc` / `raise exc from cause`: no successor (`successors`).
        op::RAISE_VARARGS => (a, 0),
        // `del x` of a user object, or of an unbound `x` (Note [resume call lifetimes] in
        // src/eval_frame/hook.rs): the value is put in its slot, and the instruction deletes it.
        op::DELETE_FAST => (0, 0),
        // Rebinding a local that holds an object with `__del__`: runs as it is.
        op::STORE_FAST => (1, 0),
        _ => return None,
    })
}

/// Where execution goes after breaking instruction `inst` at index `ip` when it completes:
/// `[ip + 1]`, `[ip + 1, jump target]` for `jumps_too`, or nothing for a `raise` (it only
/// leaves through the exception table, so no resume function follows it).
pub fn successors(inst: &Instruction, ip: usize) -> Vec<usize> {
    if inst.opcode == op::RAISE_VARARGS {
        vec![]
    } else if jumps_too(inst.opcode) {
        vec![ip + 1, inst.target.expect("jump target").0 as usize]
    } else {
        vec![ip + 1]
    }
}

/// Whether the instruction has two successors: a conditional jump (no results on either, but
/// for `jump_results`), or FOR_ITER (its results on the fall-through path only).
pub fn jumps_too(opcode: u8) -> bool {
    is_conditional_jump(opcode) || matches!(opcode, op::FOR_ITER | op::JUMP_IF_FALSE_OR_POP | op::JUMP_IF_TRUE_OR_POP)
}

/// The values on the stack at the jump target of a breaking instruction that jumps, above the
/// stack below its operands: 3.11's JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP keep their
/// operand there (Python/ceval.c); every other jump pops it.
pub fn jump_results(opcode: u8) -> usize {
    usize::from(matches!(opcode, op::JUMP_IF_FALSE_OR_POP | op::JUMP_IF_TRUE_OR_POP))
}

/// Whether the instruction is a conditional jump with two successors.
pub fn is_conditional_jump(opcode: u8) -> bool {
    matches!(
        opcode,
        op::POP_JUMP_FORWARD_IF_FALSE
            | op::POP_JUMP_FORWARD_IF_TRUE
            | op::POP_JUMP_BACKWARD_IF_FALSE
            | op::POP_JUMP_BACKWARD_IF_TRUE
            | op::POP_JUMP_FORWARD_IF_NONE
            | op::POP_JUMP_FORWARD_IF_NOT_NONE
            | op::POP_JUMP_BACKWARD_IF_NONE
            | op::POP_JUMP_BACKWARD_IF_NOT_NONE
    )
}

/// How the resume function gets back one slot of the preserved stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackSlot {
    /// A parameter, pushed as is.
    Value,
    /// A NULL (PUSH_NULL): it cannot be passed as an argument.
    Null,
    /// An iterator being stepped (a `for` loop): passed as a tuple of its remaining items, so
    /// the resume function can trace them, and turned back into an iterator with GET_ITER.
    Iter,
}

type ResumeKey = (usize, usize, Vec<StackSlot>, usize, bool, Vec<u32>);

fn resume_cache() -> &'static Mutex<HashMap<ResumeKey, Py<PyAny>>> {
    static C: OnceLock<Mutex<HashMap<ResumeKey, Py<PyAny>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

static RESUME_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Where a resume code object came from: the original code it continues and how many
/// instructions of prefix it puts before the original's (relocated) instructions.
struct ResumeOrigin {
    code: Py<PyAny>,
    prefix: usize,
}

/// Resume code (by address; the codes live forever in `resume_cache`) -> its origin.
fn resume_origins() -> &'static Mutex<HashMap<usize, ResumeOrigin>> {
    static C: OnceLock<Mutex<HashMap<usize, ResumeOrigin>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The original code and instruction index that instruction `target` of `ci` stands for when
/// `ci` is a resume function (its body is the original's instructions after a prefix), so a
/// break in a resume function continues in a resume function of the original code, as
/// torch's `ContinueExecutionCache.generate_based_on_original_code_object` does: a loop that
/// breaks at the same place on every iteration reuses one resume function instead of
/// building a resume function of a resume function (whose prologue and parameters would grow
/// with every iteration, making compile time quadratic in the trip count). `None` for an
/// original code, or a target inside the prefix.
pub fn original_target(py: Python<'_>, ci: &CodeInfo, target: usize) -> Option<(Arc<CodeInfo>, usize)> {
    let (code, prefix) = {
        let origins = resume_origins().lock();
        let o = origins.get(&(ci.code.as_ptr() as usize))?;
        (o.code.clone_ref(py), o.prefix)
    };
    if target < prefix {
        return None;
    }
    let oci = crate::symbolic::code_info::code_info(code.bind(py)).ok()?;
    let t = target - prefix;
    let same = oci.insts.get(t).zip(ci.insts.get(target)).map(|(a, b)| a.opcode == b.opcode);
    if same != Some(true) {
        return None;
    }
    Some((oci, t))
}

/// The resume code continuing `ci` at instruction `target`, taking every varname, then the
/// non-NULL stack values (`layout` describes the preserved stack; `n_results` more values
/// follow), then the cells of `ci`'s other cell variables (`CodeInfo::plain_cellvars`) as
/// positional parameters. With `null_on_top` its prefix pushes a NULL after the results: a
/// method load that broke ran as a plain attribute load, and 3.13 lays a method call out as
/// `[bound method, NULL, args...]` (3.11 and 3.12 put that NULL below, in `layout`). Cached.
/// Note [hidden stack slots]: the resume function receives the stack below the breaking
/// instruction (and its results) as parameters named `__stackN`, and its prefix pushes them
/// back. Each is deleted as soon as it is on the stack (LOAD_FAST then DELETE_FAST): a
/// parameter slot would otherwise hold a second reference until the function returns, so a
/// value the user's code discards (`P()` as a statement, `lst.pop()`) would not be freed there
/// (Note [resume call lifetimes]), and `locals()` / `vars()` / `sys._getframe().f_locals` would
/// list the internal names (an unbound slot is left out: Objects/frameobject.c,
/// `_PyFrame_FastToLocalsWithError`). The transformed code's own temporaries (`__graph_out`,
/// `__sharedN`) are emptied the same way before the breaking instruction runs (`break_code`).
/// The translator unbinds such a slot at DELETE_FAST without a break.
pub fn resume_code(py: Python<'_>, ci: &CodeInfo, target: usize, layout: &[StackSlot], n_results: usize, null_on_top: bool, unbound: &[u32]) -> PyResult<Py<PyAny>> {
    let key: ResumeKey = (ci.code.as_ptr() as usize, target, layout.to_vec(), n_results, null_on_top, unbound.to_vec());
    if let Some(c) = resume_cache().lock().get(&key) {
        return Ok(c.clone_ref(py));
    }
    let nv = ci.varnames.len() as u32;
    let k = (layout.iter().filter(|n| **n != StackSlot::Null).count() + n_results) as u32;
    let pos = Positions::line(ci.firstlineno);
    let mut insts: Vec<Instruction> = Vec::new();
    let mut push = |opcode: u8, arg: u32| insts.push(Instruction::new(opcode, arg).with_positions(pos));
    if ci.n_freevars > 0 {
        push(op::COPY_FREE_VARS, ci.n_freevars as u32);
    }
    push(op::RESUME, 0);
    for &u in unbound {
        push(op::DELETE_FAST, u);
    }
    let mut j = 0;
    for &slot in layout {
        match slot {
            StackSlot::Null => push(op::PUSH_NULL, 0),
            StackSlot::Value | StackSlot::Iter => {
                push(op::LOAD_FAST, nv + j);
                // Note [hidden stack slots].
                push(op::DELETE_FAST, nv + j);
                if slot == StackSlot::Iter {
                    push(op::GET_ITER, 0);
                }
                j += 1;
            }
        }
    }
    for _ in 0..n_results {
        push(op::LOAD_FAST, nv + j);
        push(op::DELETE_FAST, nv + j);
        j += 1;
    }
    if null_on_top {
        push(op::PUSH_NULL, 0);
    }
    let prefix = insts.len() as u32 + 1;
    insts.push(Instruction::jump(op::JUMP_FORWARD, InstId(target as u32 + prefix)).with_positions(pos));
    insts.extend(super::relocated(ci, prefix, k as u32));
    let asm = assemble(&insts, ci.firstlineno, PyVersion::CURRENT)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("assembling resume code: {e}")))?;
    let offset = ci.insts[target].offset.unwrap_or(0);
    let name = format!("__resume_at_{offset}_{}", RESUME_COUNT.fetch_add(1, Ordering::Relaxed));
    let mut varnames = ci.varnames.clone();
    // Unique names: a resume function of a resume function keeps the older stack slots.
    varnames.extend((0..k).map(|i| format!("__stack{}", nv + i)));
    // Note [cells across a graph break]: the cell variables become parameters after the stack
    // slots. `code.replace` gives a cellvar named in co_varnames its varname's slot (as for an
    // argument that is a cell), so each cell keeps its index shifted by `k`, like the free
    // variables (`relocated`), and the caller passes the cells themselves in those slots. The
    // prologue that would make them (MAKE_CELL) is jumped over.
    varnames.extend(ci.plain_cellvars().iter().cloned());
    let kwargs = PyDict::new(py);
    kwargs.set_item("co_code", PyBytes::new(py, &asm.code))?;
    kwargs.set_item("co_linetable", PyBytes::new(py, &asm.linetable))?;
    kwargs.set_item("co_exceptiontable", PyBytes::new(py, &asm.exceptiontable))?;
    kwargs.set_item("co_stacksize", asm.stacksize)?;
    kwargs.set_item("co_varnames", PyTuple::new(py, &varnames)?)?;
    kwargs.set_item("co_nlocals", varnames.len())?;
    kwargs.set_item("co_argcount", varnames.len())?;
    kwargs.set_item("co_posonlyargcount", 0)?;
    kwargs.set_item("co_kwonlyargcount", 0)?;
    kwargs.set_item("co_flags", ci.flags & !(flags::CO_VARARGS | flags::CO_VARKEYWORDS))?;
    // Note [resume frames in tracebacks]: the code after a break runs in the resume
    // function's frame, which tracebacks show under `co_name`: it keeps the original's name, so
    // an error raised after a break reads as eager's (the transformed frame that called it
    // drops its own entry: `PyCodegen::drop_own_traceback_entry`). `co_qualname` (debug dumps,
    // logs) keeps the predictable `__resume_at_<offset>_<n>`.
    kwargs.set_item("co_name", &ci.name)?;
    kwargs.set_item("co_qualname", &name)?;
    let code = ci.code.bind(py).call_method("replace", (), Some(&kwargs))?.unbind();
    resume_origins().lock().insert(code.as_ptr() as usize, ResumeOrigin { code: ci.code.clone_ref(py), prefix: prefix as usize });
    resume_cache().lock().insert(key, code.clone_ref(py));
    Ok(code)
}

/// Emits the transformed code of a frame that breaks as `plan` says.
pub fn break_code(py: Python<'_>, ci: &CodeInfo, plan: BreakPlan<'_>) -> PyResult<Py<PyAny>> {
    let mut cg = PyCodegen::new(py, ci)?;
    // Everything emitted stands for the breaking instruction: a traceback through this frame
    // (an error raised by the instruction or in the resume function) shows the user's line.
    cg.pos = plan.inst.positions;
    let nv = ci.varnames.len() as u32;
    let tmp = nv;
    // Note [protected breaks]: a NULL below the handler's depth (CPython 3.12's inlined
    // comprehension keeps its loop variable's old value there, NULL when it was unbound:
    // `LOAD_FAST_AND_CLEAR`) is pushed with PUSH_NULL and dropped into this scratch local
    // (STORE_FAST takes a NULL: it is how the comprehension restores an unbound variable).
    let n_protected = plan.inst.exn.map_or(0, |e| e.depth as usize);
    let protected_null = plan.loop_driver.is_none() && plan.preserved.iter().take(n_protected).any(|p| p.is_none());
    let null_scratch = nv + 1 + plan.n_shared;
    // After the varnames: the graph's result tuple, then the shared rebuilds' temporaries (and
    // the scratch local).
    cg.deref_shift = 1 + plan.n_shared + protected_null as u32;
    cg.shared_base = nv + 1;
    cg.result_local = Some(tmp);
    for inst in &ci.insts[..ci.body_start()] {
        let mut i = inst.clone();
        i.exn = None;
        if is_deref(i.opcode) && i.arg >= nv {
            i.arg += cg.deref_shift;
        }
        cg.insts.push(i);
    }
    let has_graph = plan.compiled_fn.is_some();
    let call = cg.emit_graph_call(py, plan.compiled_fn.as_ref().map(|f| f.clone_ref(py)), plan.inputs, plan.rerun_on_failure.as_ref());
    cg.emit(op::STORE_FAST, tmp);
    // Note [hooks registered in the trace]: the real handles exist before the live values
    // (which may hold one) are built.
    cg.emit_hook_replays(py, &plan.effects, 0);

    // One tuple of every live value, built before anything is stored.
    let mut n_all = 0u32;
    for (_, rb) in &plan.locals {
        cg.rebuild(py, rb, 0);
        n_all += 1;
    }
    let preserved_start = n_all;
    for rb in plan.preserved.iter().flatten() {
        match rb {
            // Passed as the tuple of its remaining items (see `StackSlot::Iter`).
            Rebuild::Iterator(items) => {
                for it in items {
                    cg.rebuild(py, it, 0);
                }
                cg.emit(op::BUILD_TUPLE, items.len() as u32);
            }
            other => cg.rebuild(py, other, 0),
        }
        n_all += 1;
    }
    let preserved_end = n_all;
    let mut operand_idx = Vec::new();
    for rb in &plan.operands {
        match rb {
            Some(rb) => {
                cg.rebuild(py, rb, 0);
                operand_idx.push(Some(n_all));
                n_all += 1;
            }
            None => operand_idx.push(None),
        }
    }
    cg.emit(op::BUILD_TUPLE, n_all);
    // Side effects land before the instruction (which may observe them), after the live values
    // were read, and while `tmp` still holds the graph's outputs and the locals are as they were
    // on entry (their sources read them).
    cg.emit_side_effects(py, &plan.effects, 0);
    cg.emit(op::STORE_FAST, tmp);
    let item = |cg: &mut PyCodegen, i: u32| {
        cg.emit(op::LOAD_FAST, tmp);
        cg.load_const((i as i64).into_pyobject(py).unwrap().into_any().unbind());
        cg.emit(op::BINARY_SUBSCR, 0);
    };
    for (j, (slot, _)) in plan.locals.iter().enumerate() {
        item(&mut cg, j as u32);
        cg.emit(op::STORE_FAST, *slot);
    }
    // Note [resume call lifetimes]: a local the trace deleted or left unbound lets go of what
    // its slot still holds (an argument, a value stored before an earlier break) before the
    // instruction runs, as eager's `del` did before it; every value was read above.
    for &slot in &plan.unbound {
        let stored = plan.locals.iter().any(|(s, _)| *s == slot);
        if !stored && !plan.kept.contains(&slot) && (slot as usize) < ci.varnames.len() && !ci.cell_slots.contains(&slot) {
            cg.load_const(py.None());
            cg.emit(op::STORE_FAST, slot);
            cg.emit(op::DELETE_FAST, slot);
        }
    }
    // Note [protected breaks]: inside a try or with block, the breaking instruction must run
    // under the block's exception handler. Then the whole stack is rebuilt for real, the
    // instruction carries its exception-table entry pointing into a copy of the original code
    // (handler, cleanup and everything after), and the normal path jumps over that copy to the
    // resume call. Exceptions raised inside the resume function are handled there, since it
    // keeps the original exception table.
    // Only the slots below the handler's depth are pushed: the unwinder drops everything above
    // it, and the normal path drops these again before the resume call (a NULL into
    // `null_scratch`: POP_TOP cannot drop one).
    let protected = plan.inst.exn;
    let mut k = preserved_start;
    for p in plan.preserved.iter().take(n_protected) {
        let Some(rb) = p.as_ref() else {
            cg.emit(op::PUSH_NULL, 0);
            continue;
        };
        item(&mut cg, k);
        if matches!(rb, Rebuild::Iterator(_)) {
            // A fresh iterator over the remaining items, as the resume function gets.
            cg.emit(op::GET_ITER, 0);
        }
        k += 1;
    }
    for idx in &operand_idx {
        match idx {
            Some(i) => item(&mut cg, *i),
            None => cg.emit(op::PUSH_NULL, 0),
        }
    }
    if let Some(kw) = &plan.kw_names {
        cg.consts.push(kw.clone_ref(py));
        let i = cg.consts.len() as u32 - 1;
        cg.emit(op::KW_NAMES, i);
    }
    if let Some((driver, n_pass)) = &plan.loop_driver {
        // Note [loop bodies as functions]: the iterator (the operand) goes to the driver in the
        // place of FOR_ITER's results.
        cg.emit(op::BUILD_TUPLE, operand_idx.len() as u32);
        let driver_call = emit_resume_call(py, &mut cg, ci, &plan, Callee::Object(driver.clone_ref(py)), *n_pass, &[], tmp, preserved_start, preserved_end)?;
        cg.drop_own_traceback_entry(py, &[driver_call], "drop_loop_traceback_head")?;
        if let (true, Some(rerun)) = (has_graph, &plan.rerun_on_failure) {
            cg.protect_graph_call(py, ci, call, rerun)?;
        }
        let mut varnames = ci.varnames.clone();
        varnames.push("__graph_out".to_string());
        varnames.extend((0..plan.n_shared).map(|i| format!("__shared{i}")));
        return finish_with(py, ci, cg, |kw| {
            kw.set_item("co_varnames", PyTuple::new(py, &varnames)?)?;
            kw.set_item("co_nlocals", varnames.len())?;
            Ok(())
        });
    }
    let mut inst = plan.inst.clone();
    inst.exn = None;
    inst.offset = None;

    if is_deref(inst.opcode) && inst.arg >= nv {
        inst.arg += cg.deref_shift;
    }
    // Note [resume call lifetimes]: while the instruction runs (a call runs user code: a
    // helper that rebinds its argument, a `__del__`), this frame holds only what eager's frame
    // holds: the temporaries of the rebuilds are emptied and `tmp` keeps just the stack below
    // the operands, which the resume call takes.
    // Note [temporaries unbound at the break]: code the instruction runs may read this frame's
    // locals (`eval`/`exec` with the frame's namespace, `sys._getframe(1).f_locals` in a
    // helper): the temporaries are unbound rather than set to None, so that only the user's
    // names are there (an unbound slot is left out: Objects/frameobject.c,
    // `_PyFrame_FastToLocalsWithError`). `tmp` stays bound only while it holds stack values
    // below the operands; the resume call then takes none from it (`emit_resume_call`).
    for s in 0..plan.n_shared {
        cg.load_const(py.None());
        cg.emit(op::STORE_FAST, cg.shared_base + s);
        cg.emit(op::DELETE_FAST, cg.shared_base + s);
    }
    if preserved_end == preserved_start {
        cg.load_const(py.None());
        cg.emit(op::STORE_FAST, tmp);
        cg.emit(op::DELETE_FAST, tmp);
    } else {
        cg.emit(op::LOAD_FAST, tmp);
        cg.load_const(py.import("builtins")?.getattr("slice")?.call1((preserved_start, preserved_end))?.unbind());
        cg.emit(op::BINARY_SUBSCR, 0);
        cg.emit(op::STORE_FAST, tmp);
    }
    let (preserved_start, preserved_end) = (0, preserved_end - preserved_start);
    let jump_at = cg.insts.len();
    cg.insts.push(inst);
    let mut over_copy = None;
    if let Some(exn) = protected {
        if !plan.targets.is_empty() {
            over_copy = Some(cg.insts.len());
            cg.insts.push(Instruction::jump(op::JUMP_FORWARD, InstId(0)));
        }
        let base = cg.original_copy(ci);
        cg.insts[jump_at].exn = Some(crate::bytecode::ExnTarget { handler: InstId(exn.handler.0 + base), ..exn });
    }
    let layout: Vec<StackSlot> = plan
        .preserved
        .iter()
        .map(|p| match p {
            None => StackSlot::Null,
            Some(Rebuild::Iterator(_)) => StackSlot::Iter,
            Some(_) => StackSlot::Value,
        })
        .collect();
    let mut resume_calls = Vec::new();
    for (n, &target) in plan.targets.iter().enumerate() {
        let label = InstId(cg.insts.len() as u32);
        if n == 0 {
            if let Some(j) = over_copy {
                cg.insts[j].target = Some(label);
            }
        } else {
            cg.insts[jump_at].target = Some(label);
        }
        let (n_results, null_on_top) = if n == 0 { (plan.n_results, plan.null_on_top) } else { (jump_results(plan.inst.opcode), false) };
        // In a resume function, continue in a resume function of the original code: it takes
        // only the original's varnames (this one's extra `__stack` parameters are read by its
        // prefix only, dead here).
        let (code, n_pass, cells) = match original_target(py, ci, target) {
            Some((oci, t)) => {
                let unbound: Vec<u32> = plan.unbound.iter().copied().filter(|&u| (u as usize) < oci.varnames.len()).collect();
                (resume_code(py, &oci, t, &layout, n_results, null_on_top, &unbound)?, oci.varnames.len() as u32, oci.plain_cellvars().to_vec())
            }
            None => (resume_code(py, ci, target, &layout, n_results, null_on_top, &plan.unbound)?, nv, ci.plain_cellvars().to_vec()),
        };
        cg.emit(op::BUILD_TUPLE, n_results as u32);
        // The protected slots are on the real stack under the results: drop them (the resume
        // call takes the values built before the instruction ran).
        for p in plan.preserved.iter().take(n_protected).rev() {
            cg.emit(op::SWAP, 2);
            match p {
                Some(_) => cg.emit(op::POP_TOP, 0),
                None => cg.emit(op::STORE_FAST, null_scratch),
            }
        }
        // Note [the line of a frame waiting on its resume call]: while the resume function runs,
        // this frame sits at the resume call, and its `f_lineno` is what a frame object taken
        // before the break (`fr = sys._getframe()`) reports. Eager's frame would be running the
        // continuation, so the call carries the line of the first statement after the breaking
        // one (its first instruction on another line): right for a read on that statement,
        // stale for later ones (the resume function is a frame of its own; torch's Dynamo has
        // the same limit). Tracebacks are unaffected (`drop_own_traceback_entry`).
        let saved_pos = cg.pos;
        let next_line = ci.insts[target..].iter().map(|i| i.positions).find(|p| p.line.is_some() && p.line != plan.inst.positions.line);
        if let Some(p) = next_line {
            cg.pos = Positions::line(p.line.expect("checked"));
        }
        resume_calls.push(emit_resume_call(py, &mut cg, ci, &plan, Callee::Code(code), n_pass, &cells, tmp, preserved_start, preserved_end)?);
        cg.pos = saved_pos;
    }
    cg.drop_own_traceback_entry(py, &resume_calls, "drop_traceback_head")?;
    if let (true, Some(rerun)) = (has_graph, &plan.rerun_on_failure) {
        cg.protect_graph_call(py, ci, call, rerun)?;
    }
    let mut varnames = ci.varnames.clone();
    varnames.push("__graph_out".to_string());
    varnames.extend((0..plan.n_shared).map(|i| format!("__shared{i}")));
    if protected_null {
        varnames.push("__null".to_string());
    }
    finish_with(py, ci, cg, |kw| {
        kw.set_item("co_varnames", PyTuple::new(py, &varnames)?)?;
        kw.set_item("co_nlocals", varnames.len())?;
        Ok(())
    })
}

/// What a break continues in: a resume code (made a function over the frame's globals and
/// closure) or a callable object (a loop driver).
enum Callee {
    Code(Py<PyAny>),
    Object(Py<PyAny>),
}

/// `return resume(*(locals + preserved + results + cells))` with the results' tuple on top of
/// the stack, through `_C.call_resume` (Note [resume call lifetimes]); `cells` names the resume code's cell variables that are not arguments of the
/// original (Note [cells across a graph break]). Returns the index of the call of a resume
/// (of a resume function or of a loop driver), for `PyCodegen::drop_own_traceback_entry`.
#[allow(clippy::too_many_arguments)]
fn emit_resume_call(
    py: Python<'_>,
    cg: &mut PyCodegen,
    ci: &CodeInfo,
    plan: &BreakPlan<'_>,
    callee: Callee,
    n_pass: u32,
    cells: &[String],
    tmp: u32,
    preserved_start: u32,
    preserved_end: u32,
) -> PyResult<usize> {
    // The instruction's results are on the stack as one tuple; the stack values below the
    // operands, if any, are in `tmp` (unbound when there are none: Note [temporaries unbound at
    // the break]).
    if preserved_end > preserved_start {
        cg.emit(op::LOAD_FAST, tmp);
        let slice = py.import("builtins")?.getattr("slice")?.call1((preserved_start, preserved_end))?;
        cg.load_const(slice.unbind());
        cg.emit(op::BINARY_SUBSCR, 0);
        cg.emit(op::SWAP, 2);
        cg.emit(op::BINARY_OP, 0);
    }
    // The first `n_pass` varnames (all of them, or the original code's when `code` is a
    // resume function of the original: see `original_target`). An argument that is a cell
    // (in a resume function, every cell) is passed as the cell.
    for i in 0..n_pass {
        if plan.unbound.contains(&i) {
            cg.load_const(py.None());
        } else if ci.cell_slots.contains(&i) {
            cg.emit(op::LOAD_CLOSURE, i);
        } else {
            cg.emit(op::LOAD_FAST, i);
        }
    }
    cg.emit(op::BUILD_TUPLE, n_pass);
    cg.emit(op::SWAP, 2);
    cg.emit(op::BINARY_OP, 0);
    if !cells.is_empty() {
        // The other cells, found by name: in a resume function they sit after its stack slots.
        for name in cells {
            let Some(slot) = ci.localsplus.iter().position(|n| n == name) else {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(format!("resume function: no cell '{name}' in the breaking frame")));
            };
            let slot = cg.deref_slot(slot as u32);
            cg.emit(op::LOAD_CLOSURE, slot);
        }
        cg.emit(op::BUILD_TUPLE, cells.len() as u32);
        cg.emit(op::BINARY_OP, 0);
    }
    // Note [resume call lifetimes]: the arguments go to `_C.call_resume` in a list, and this
    // frame lets go of the locals it passes and of its temporaries before the call, so the
    // resume function holds the only references its caller had (what `del` or a rebinding there
    // frees is freed). Locals it does not pass (never touched again) stay here until the frame
    // returns, as in eager.
    // [args] -> [list]
    cg.emit(op::BUILD_LIST, 0);
    cg.emit(op::SWAP, 2);
    cg.emit(op::LIST_EXTEND, 1);
    let is_driver = matches!(callee, Callee::Object(_));
    if is_driver {
        if ci.n_freevars > 0 {
            // Note [free variables of loop bodies] (loop_body.rs): the closure after the
            // iterator.
            let first_free = ci.first_free_slot() as u32;
            for j in 0..ci.n_freevars as u32 {
                let slot = cg.deref_slot(first_free + j);
                cg.emit(op::LOAD_CLOSURE, slot);
            }
            cg.emit(op::BUILD_TUPLE, ci.n_freevars as u32);
            cg.emit(op::LIST_APPEND, 1);
        }
        // The driver gets the list itself and empties it once it holds the values (so neither
        // `call_resume` nor its own arguments keep them alive).
        cg.emit(op::BUILD_LIST, 1);
    }
    for slot in 0..tmp + 1 + plan.n_shared {
        let kept = slot < n_pass && plan.kept.contains(&slot);
        if !kept && (slot >= ci.varnames.len() as u32 || !ci.cell_slots.contains(&slot)) {
            cg.load_const(py.None());
            cg.emit(op::STORE_FAST, slot);
        }
    }
    let call_resume = py.import("dynamo._C")?.getattr("call_resume")?.unbind();
    cg.emit(op::PUSH_NULL, 0);
    if PyVersion::CURRENT.null_after_callable() {
        // [list, NULL, call_resume] -> [call_resume, NULL, list] (3.13 order).
        cg.load_const(call_resume);
        cg.emit(op::SWAP, 3);
    } else {
        // [list, NULL] -> [NULL, list, call_resume] -> [NULL, call_resume, list].
        cg.emit(op::SWAP, 2);
        cg.load_const(call_resume);
        cg.emit(op::SWAP, 2);
    }
    // A loop driver goes through `call_resume` too, so that its frame, and the body functions
    // it calls the same way, link to this frame's caller (Note [resume frames link to the
    // caller] in src/eval_frame/hook.rs).
    match callee {
        Callee::Object(driver) => cg.load_const(driver),
        Callee::Code(code) if ci.n_freevars > 0 => {
            let first_free = ci.first_free_slot() as u32;
            for j in 0..ci.n_freevars as u32 {
                let slot = cg.deref_slot(first_free + j);
                cg.emit(op::LOAD_CLOSURE, slot);
            }
            cg.emit(op::BUILD_TUPLE, ci.n_freevars as u32);
            cg.load_const(code);
            cg.emit(op::MAKE_FUNCTION, 0x08);
        }
        Callee::Code(code) => {
            let func = py.import("types")?.getattr("FunctionType")?.call1((code.bind(py), plan.globals.bind(py)))?;
            cg.load_const(func.unbind());
        }
    }
    // [.., list, f] -> [.., f, list]: `call_resume(f, list)`.
    cg.emit(op::SWAP, 2);
    cg.emit(op::PRECALL, 2);
    cg.emit(op::CALL, 2);
    let call = cg.insts.len() - 1;
    cg.emit(op::RETURN_VALUE, 0);
    Ok(call)
}
