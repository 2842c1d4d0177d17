//! `CodeInfo`: a decoded code object (instructions plus the tables handlers index into).
//!
//! Decoding is cached per code object for the life of the process (the cache keeps the code
//! object alive so its address is not reused).

use crate::bytecode::{self, CodeBytes, Instruction, PyVersion};
use crate::symbolic::{Unsupported, VResult};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// `co_flags` bits (Include/cpython/code.h).
pub mod flags {
    pub const CO_OPTIMIZED: u32 = 0x1;
    pub const CO_NEWLOCALS: u32 = 0x2;
    pub const CO_VARARGS: u32 = 0x4;
    pub const CO_VARKEYWORDS: u32 = 0x8;
    pub const CO_NESTED: u32 = 0x10;
    pub const CO_GENERATOR: u32 = 0x20;
    pub const CO_COROUTINE: u32 = 0x80;
    pub const CO_ITERABLE_COROUTINE: u32 = 0x100;
    pub const CO_ASYNC_GENERATOR: u32 = 0x200;
}

/// A code object, decoded.
pub struct CodeInfo {
    pub code: Py<PyAny>,
    pub insts: Vec<Instruction>,
    pub names: Vec<String>,
    pub consts: Py<PyTuple>,
    pub varnames: Vec<String>,
    /// Names of all `localsplus` slots: varnames, then cell variables that are not arguments, then free variables.
    pub localsplus: Vec<String>,
    pub n_freevars: usize,
    /// `len(co_cellvars)`, including arguments that are also cells (they share their slot).
    pub n_cellvars: usize,
    /// The `localsplus` slot of each of `co_cellvars`, in that order (an argument that is a cell
    /// keeps its argument slot).
    pub cell_slots: Vec<u32>,
    pub argcount: usize,
    /// `co_posonlyargcount`: the first this many of the `argcount` positional parameters
    /// cannot be passed by keyword.
    pub posonlyargcount: usize,
    pub kwonlyargcount: usize,
    pub flags: u32,
    pub name: String,
    pub filename: String,
    pub firstlineno: u32,
    /// Live varnames at each instruction's entry (`bytecode::live_locals`).
    pub live: Vec<Vec<bool>>,
    /// `append_only_globals`, computed on first use.
    append_only_globals: OnceLock<Vec<String>>,
}

impl CodeInfo {
    /// Number of argument slots at frame entry (positional, keyword-only, `*args`, `**kwargs`).
    pub fn n_arg_slots(&self) -> usize {
        self.argcount
            + self.kwonlyargcount
            + usize::from(self.flags & flags::CO_VARARGS != 0)
            + usize::from(self.flags & flags::CO_VARKEYWORDS != 0)
    }

    /// The line a frame paused at instruction `ip` reports as `f_lineno` (CPython's
    /// `PyCode_Addr2Line` over the line table); an instruction without a line of its own takes the
    /// nearest line before it, else the code's first line.
    pub fn line_of(&self, ip: usize) -> u32 {
        self.insts[ip].positions.line.or_else(|| self.insts[..ip].iter().rev().find_map(|i| i.positions.line)).unwrap_or(self.firstlineno)
    }

    /// Index of the first instruction after the prologue (MAKE_CELL / COPY_FREE_VARS / RESUME).
    pub fn body_start(&self) -> usize {
        self.insts.iter().position(|i| i.opcode == bytecode::opcode::op::RESUME).map(|i| i + 1).unwrap_or(0)
    }

    /// Cell slots that already hold their cell when the frame starts: cells the prologue does
    /// not make with MAKE_CELL. The compiler makes every cell in the prologue, so these exist
    /// only in resume functions, which receive the cells of the frame that broke as arguments
    /// (Note [cells across a graph break] in `pycodegen::resume`).
    pub fn cells_on_entry(&self) -> Vec<u32> {
        let made: Vec<u32> = self.insts[..self.body_start()].iter().filter(|i| i.opcode == bytecode::opcode::op::MAKE_CELL).map(|i| i.arg).collect();
        self.cell_slots.iter().copied().filter(|s| !made.contains(s)).collect()
    }

    /// Names of the cell variables that are not arguments (their slots follow the varnames).
    pub fn plain_cellvars(&self) -> &[String] {
        &self.localsplus[self.varnames.len()..self.localsplus.len() - self.n_freevars]
    }

    /// Index of the first free variable's `localsplus` slot.
    pub fn first_free_slot(&self) -> usize {
        self.localsplus.len() - self.n_freevars
    }

    /// The argument and free-variable slots that the code only appends to (Note [append-only
    /// lists]): every reachable instruction naming the slot is a `LOAD_FAST` (of an argument) or
    /// a `LOAD_DEREF` (of a free variable, or of a cell a resume function receives as an
    /// argument) directly followed by `LOAD_METHOD append` (3.12's `LOAD_ATTR` with the method
    /// bit reads as `LOAD_METHOD` here), or a `LOAD_FAST` that only hands the value back unread:
    /// a straight run of `LOAD_FAST` / `LOAD_CONST` / `BUILD_TUPLE` up to `RETURN_VALUE` (a loop
    /// body function's exit stub, `return outs`). Such a slot is never stored, deleted, made a
    /// cell, passed to a closure or read any other way, so the code cannot observe the value's
    /// length or items; neither can it when no reachable instruction names the slot. Empty
    /// when the code's stack depths cannot be computed.
    pub fn append_only_slots(&self) -> Vec<u32> {
        use bytecode::opcode::op;
        let Ok(depths) = bytecode::analysis::stack_depths(&self.insts) else { return Vec::new() };
        let n_args = self.n_arg_slots() as u32;
        let first_free = self.first_free_slot() as u32;
        let n_slots = self.localsplus.len() as u32;
        let considered = |slot: u32| slot < n_args || (slot >= first_free && slot < n_slots);
        let returned_unread = |from: usize| {
            for inst in &self.insts[from..] {
                match inst.opcode {
                    op::LOAD_FAST | op::LOAD_CONST | op::BUILD_TUPLE => continue,
                    op::RETURN_VALUE => return true,
                    _ => return false,
                }
            }
            false
        };
        let mut ok = vec![true; n_slots as usize];
        for (i, inst) in self.insts.iter().enumerate() {
            let names_slot = matches!(
                inst.opcode,
                op::LOAD_FAST
                    | op::LOAD_FAST_CHECK
                    | op::LOAD_FAST_AND_CLEAR
                    | op::STORE_FAST
                    | op::DELETE_FAST
                    | op::LOAD_CLOSURE
                    | op::LOAD_DEREF
                    | op::STORE_DEREF
                    | op::DELETE_DEREF
                    | op::MAKE_CELL
                    | op::LOAD_CLASSDEREF
                    | op::LOAD_FROM_DICT_OR_DEREF
            );
            if !names_slot || !considered(inst.arg) || depths.get(i).is_none_or(|d| d.is_none()) {
                continue;
            }
            let slot = inst.arg as usize;
            let next = self.insts.get(i + 1);
            let appends = next.is_some_and(|n| n.opcode == op::LOAD_METHOD && self.names.get(n.arg as usize).is_some_and(|m| m == "append"));
            // Note [append-only stack slots]: `LOAD_FAST s; DELETE_FAST s` (a resume or loop
            // body function's prefix) moves the value to the stack.
            let to_stack = next.is_some_and(|n| n.opcode == op::DELETE_FAST && n.arg == inst.arg);
            let moved = i > 0 && self.insts[i - 1].opcode == op::LOAD_FAST && self.insts[i - 1].arg == inst.arg;
            ok[slot] &= match inst.opcode {
                op::LOAD_FAST if to_stack => stack_value_append_only(&self.insts, &depths, i),
                op::LOAD_FAST => appends || returned_unread(i + 1),
                op::LOAD_DEREF => appends,
                op::DELETE_FAST => moved,
                _ => false,
            };
        }
        // A slot no reachable instruction names (a resume function's copy of the original code
        // skips the part that appends) is not read either.
        (0..n_slots).filter(|&s| considered(s) && ok[s as usize]).collect()
    }
}

/// Note [append-only stack slots]: a resume function or a loop body function receives the
/// stack of the code it continues as hidden parameters, each moved to the stack by its prefix
/// (`LOAD_FAST s; DELETE_FAST s`: Note [hidden stack slots] in pycodegen/resume.rs). A list
/// comprehension cut by a graph break, or run by a loop driver (Note [comprehension loops in a
/// driver] in pycodegen/loop_body.rs), hands its half-built list on that way. Wrapped as a
/// plain list, its length would be guarded, and every iteration of the comprehension would
/// compile its body again. Such a list is append-only (Note [append-only lists]) when, from the
/// `LOAD_FAST` at `load` on, the stack position it was pushed at is only read by `LIST_APPEND`
/// (as its list), only consumed by `POP_TOP` or returned (`RETURN_VALUE`, reconstructed as the
/// same object) or dropped by an exception's unwinding, and only moved by `SWAP`: a forward
/// walk over every path, tracking that position. `pushes_at_most` bounds what an instruction
/// pushes, so that the positions it consumes are known from its stack effect (Python/
/// bytecodes.c: what each instruction pops and pushes).
fn stack_value_append_only(insts: &[bytecode::Instruction], depths: &[Option<u32>], load: usize) -> bool {
    use bytecode::opcode::op;
    fn pushes_at_most(opcode: u8, arg: u32) -> i64 {
        match opcode {
            op::STORE_FAST | op::STORE_DEREF | op::STORE_GLOBAL | op::STORE_NAME | op::STORE_ATTR | op::STORE_SUBSCR | op::STORE_SLICE | op::DELETE_SUBSCR | op::DELETE_FAST
            | op::DELETE_DEREF | op::DELETE_GLOBAL | op::DELETE_NAME | op::DELETE_ATTR | op::POP_TOP | op::END_FOR | op::POP_JUMP_FORWARD_IF_FALSE | op::POP_JUMP_FORWARD_IF_TRUE
            | op::POP_JUMP_FORWARD_IF_NONE | op::POP_JUMP_FORWARD_IF_NOT_NONE | op::POP_JUMP_BACKWARD_IF_FALSE | op::POP_JUMP_BACKWARD_IF_TRUE | op::POP_JUMP_BACKWARD_IF_NONE
            | op::POP_JUMP_BACKWARD_IF_NOT_NONE | op::JUMP_IF_FALSE_OR_POP | op::JUMP_IF_TRUE_OR_POP | op::JUMP_FORWARD | op::JUMP_BACKWARD | op::JUMP_BACKWARD_NO_INTERRUPT
            | op::RETURN_VALUE | op::RETURN_CONST | op::RAISE_VARARGS | op::RERAISE | op::POP_EXCEPT | op::NOP | op::RESUME | op::PRECALL | op::KW_NAMES | op::CACHE
            | op::EXTENDED_ARG | op::COPY_FREE_VARS | op::MAKE_CELL | op::PRINT_EXPR | op::SETUP_ANNOTATIONS | op::IMPORT_STAR | op::LIST_APPEND | op::SET_ADD | op::MAP_ADD
            | op::LIST_EXTEND | op::SET_UPDATE | op::DICT_UPDATE | op::DICT_MERGE => 0,
            op::LOAD_FAST | op::LOAD_FAST_CHECK | op::LOAD_FAST_AND_CLEAR | op::LOAD_CONST | op::LOAD_DEREF | op::LOAD_CLOSURE | op::LOAD_CLASSDEREF | op::LOAD_NAME
            | op::PUSH_NULL | op::LOAD_ASSERTION_ERROR | op::LOAD_BUILD_CLASS | op::BUILD_TUPLE | op::BUILD_LIST | op::BUILD_SET | op::BUILD_MAP | op::BUILD_CONST_KEY_MAP
            | op::BUILD_STRING | op::BUILD_SLICE | op::BINARY_OP | op::BINARY_SUBSCR | op::BINARY_SLICE | op::COMPARE_OP | op::IS_OP | op::CONTAINS_OP | op::CALL | op::CALL_KW
            | op::CALL_FUNCTION_EX | op::UNARY_NEGATIVE | op::UNARY_POSITIVE | op::UNARY_NOT | op::UNARY_INVERT | op::FORMAT_VALUE | op::MAKE_FUNCTION | op::GET_ITER
            | op::LIST_TO_TUPLE | op::IMPORT_NAME | op::IMPORT_FROM | op::TO_BOOL | op::CONVERT_VALUE | op::CALL_INTRINSIC_1 | op::CALL_INTRINSIC_2 | op::GET_LEN => 1,
            op::UNPACK_SEQUENCE => arg as i64,
            op::UNPACK_EX => (arg & 0xff) as i64 + (arg >> 8) as i64 + 1,
            _ => 2,
        }
    }
    let Some(Some(d0)) = depths.get(load) else { return false };
    // The position held at each instruction: None not yet seen, Some(None) gone, Some(Some(p)).
    let mut at: Vec<Option<Option<u32>>> = vec![None; insts.len()];
    let mut work: Vec<(usize, Option<u32>)> = vec![(load + 1, Some(*d0))];
    while let Some((i, pos)) = work.pop() {
        let Some(slot) = at.get_mut(i) else { return false };
        match slot {
            Some(seen) if *seen == pos => continue,
            Some(_) => return false,
            None => *slot = Some(pos),
        }
        let inst = &insts[i];
        let Some(Some(d)) = depths.get(i).copied() else { continue };
        let (d, arg) = (d as i64, inst.arg);
        let mut next = pos;
        if let Some(p) = pos.map(|p| p as i64) {
            if inst.opcode == op::LOAD_FAST && i == load {
                return false;
            }
            match inst.opcode {
                op::SWAP => {
                    let other = d - arg as i64;
                    if p == d - 1 {
                        next = Some(other as u32);
                    } else if p == other {
                        next = Some((d - 1) as u32);
                    }
                }
                op::COPY if p == d - arg as i64 => return false,
                op::LIST_APPEND if p == d - 1 - arg as i64 => {}
                op::SET_ADD | op::LIST_EXTEND | op::SET_UPDATE | op::DICT_UPDATE | op::DICT_MERGE if p == d - 1 - arg as i64 => return false,
                op::MAP_ADD if p == d - 2 - arg as i64 => return false,
                op::POP_TOP if p == d - 1 => next = None,
                op::RETURN_VALUE if p == d - 1 => continue,
                op::FOR_ITER => {
                    // Jumping (exhausted) pops the iterator; stepping pops nothing.
                    if p == d - 1 {
                        return false;
                    }
                }
                _ => {
                    let effect = match bytecode::analysis::stack_effect(inst.opcode, arg, false) {
                        Ok(e) => e as i64,
                        Err(_) => return false,
                    };
                    let mut lowest = d + effect - pushes_at_most(inst.opcode, arg);
                    if inst.target.is_some() {
                        if let Ok(e) = bytecode::analysis::stack_effect(inst.opcode, arg, true) {
                            lowest = lowest.min(d + e as i64 - pushes_at_most(inst.opcode, arg));
                        }
                    }
                    if p >= lowest {
                        return false;
                    }
                }
            }
            if let Some(e) = inst.exn {
                let kept = if (e.depth as i64) > p { pos } else { None };
                work.push((e.handler.index(), kept));
            }
        } else if inst.opcode == op::LOAD_FAST && i == load {
            return false;
        }
        if !bytecode::opcode::is_terminator(inst.opcode) && i + 1 < insts.len() {
            work.push((i + 1, next));
        }
        if let Some(t) = inst.target {
            work.push((t.index(), next));
        }
    }
    true
}

impl CodeInfo {
    /// The global names that the code only appends to (Note [append-only lists]): every
    /// reachable instruction naming the global is a `LOAD_GLOBAL` without the NULL bit directly
    /// followed by `LOAD_METHOD append`, and the code has no `STORE_GLOBAL`/`DELETE_GLOBAL` of it
    /// (`LOAD_GLOBAL`'s argument is `namei << 1 | push_null`, Python/bytecodes.c). A hook or
    /// helper that collects results in a module-level list (`acts.append(o)`) cannot observe
    /// the list's length or items through such a name.
    pub fn append_only_globals(&self) -> &[String] {
        self.append_only_globals.get_or_init(|| self.find_append_only_globals())
    }

    fn find_append_only_globals(&self) -> Vec<String> {
        use bytecode::opcode::op;
        let Ok(depths) = bytecode::analysis::stack_depths(&self.insts) else { return Vec::new() };
        let mut verdict: HashMap<u32, bool> = HashMap::new();
        for (i, inst) in self.insts.iter().enumerate() {
            if depths.get(i).is_none_or(|d| d.is_none()) {
                continue;
            }
            let (namei, ok) = match inst.opcode {
                op::LOAD_GLOBAL => {
                    let next = self.insts.get(i + 1);
                    let appends = inst.arg & 1 == 0
                        && next.is_some_and(|n| n.opcode == op::LOAD_METHOD && self.names.get(n.arg as usize).is_some_and(|m| m == "append"));
                    (inst.arg >> 1, appends)
                }
                op::STORE_GLOBAL | op::DELETE_GLOBAL => (inst.arg, false),
                _ => continue,
            };
            *verdict.entry(namei).or_insert(true) &= ok;
        }
        let mut names: Vec<String> = verdict.into_iter().filter(|&(_, ok)| ok).filter_map(|(n, _)| self.names.get(n as usize).cloned()).collect();
        names.sort();
        names
    }
}

fn cache() -> &'static Mutex<HashMap<usize, Arc<CodeInfo>>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<CodeInfo>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Decodes `code` (a Python code object), cached.
pub fn code_info(code: &Bound<'_, PyAny>) -> VResult<Arc<CodeInfo>> {
    let key = code.as_ptr() as usize;
    if let Some(ci) = cache().lock().get(&key) {
        return Ok(ci.clone());
    }
    let ci = Arc::new(decode_code(code)?);
    cache().lock().insert(key, ci.clone());
    Ok(ci)
}

fn strings(t: Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    t.try_iter()?.map(|s| s?.extract::<String>()).collect()
}

fn decode_code(code: &Bound<'_, PyAny>) -> VResult<CodeInfo> {
    let co_code = code.getattr("co_code")?;
    let exc = code.getattr("co_exceptiontable")?;
    let lt = code.getattr("co_linetable")?;
    let firstlineno: u32 = code.getattr("co_firstlineno")?.extract()?;
    let bytes = CodeBytes {
        code: co_code.cast::<PyBytes>().map_err(|e| Unsupported::new(e.to_string()))?.as_bytes(),
        exceptiontable: exc.cast::<PyBytes>().map_err(|e| Unsupported::new(e.to_string()))?.as_bytes(),
        linetable: lt.cast::<PyBytes>().map_err(|e| Unsupported::new(e.to_string()))?.as_bytes(),
        firstlineno,
        version: PyVersion::CURRENT,
    };
    let insts = bytecode::decode(&bytes).map_err(|e| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOpcode, format!("cannot decode bytecode: {e}")))?;
    let varnames = strings(code.getattr("co_varnames")?)?;
    let cellvars = strings(code.getattr("co_cellvars")?)?;
    let freevars = strings(code.getattr("co_freevars")?)?;
    let mut localsplus = varnames.clone();
    for c in &cellvars {
        if !varnames.contains(c) {
            localsplus.push(c.clone());
        }
    }
    let cell_slots = cellvars.iter().map(|c| localsplus.iter().position(|n| n == c).unwrap_or(0) as u32).collect();
    localsplus.extend(freevars.iter().cloned());
    let n_varnames: usize = code.getattr("co_nlocals")?.extract()?;
    let mut live = bytecode::live_locals(&insts, n_varnames);
    // Some reads of fast locals are implicit: zero-argument `super()` reads the first argument,
    // `locals()`/`vars()`/`eval`/`exec`/`dir()` read them all. Keep those live everywhere.
    let names = strings(code.getattr("co_names")?)?;
    let reads_all = names.iter().any(|n| matches!(n.as_str(), "locals" | "vars" | "eval" | "exec" | "dir"));
    let reads_first = reads_all || names.iter().any(|n| n == "super");
    for l in live.iter_mut() {
        if reads_all {
            l.iter_mut().for_each(|v| *v = true);
        } else if reads_first && !l.is_empty() {
            l[0] = true;
        }
    }
    Ok(CodeInfo {
        append_only_globals: OnceLock::new(),
        live,
        code: code.clone().unbind(),
        insts,
        names: strings(code.getattr("co_names")?)?,
        consts: code.getattr("co_consts")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?.unbind(),
        varnames,
        localsplus,
        n_freevars: freevars.len(),
        n_cellvars: cellvars.len(),
        cell_slots,
        argcount: code.getattr("co_argcount")?.extract()?,
        posonlyargcount: code.getattr("co_posonlyargcount")?.extract()?,
        kwonlyargcount: code.getattr("co_kwonlyargcount")?.extract()?,
        flags: code.getattr("co_flags")?.extract()?,
        name: code.getattr("co_name")?.extract()?,
        filename: code.getattr("co_filename")?.extract()?,
        firstlineno,
    })
}
