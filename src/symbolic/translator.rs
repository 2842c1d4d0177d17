//! `InstructionTranslator`: interprets one frame's bytecode over `VariableTracker`s.
//!
//! One handler per opcode family, reached from the single `match` in `step`. Calls of user
//! functions, bound methods and `nn.Module`s are inlined by running a child translator over the
//! callee's code with the same `OutputGraph` (TorchDynamo's InliningInstructionTranslator);
//! `torch.*` calls and tensor methods become graph nodes; operations on constants are folded by
//! running them. Python semantics follow CPython 3.11's `Python/ceval.c` for the stack layout of
//! each opcode (notably CALL's `[NULL|callable, callable|self, args...]`).

use crate::guards::GuardKind;
use crate::symbolic::side_effects::CellTarget;
use crate::bytecode::opcode::op;
use crate::source::{ItemKey, Source};
use crate::symbolic::builder::{is_literal, is_torch_callable, wrap};
use crate::symbolic::code_info::{code_info, flags, CodeInfo};
use crate::symbolic::output_graph::{LazyRecipe, OutputGraph};
use crate::symbolic::variables::{borrow_iter, type_name, DictState, DictView, GeneratorFrame, IterError, IterKind, IterRequest, IteratorState, ListState, NestedFunction, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::{graph_break, unsupported};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// Maximum depth of inlined calls.
const MAX_INLINE_DEPTH: usize = 24;

/// `BINARY_OP` oparg -> `operator` function name (Include/opcode.h NB_* order).
const BINARY_OPS: [&str; 26] = [
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift", "sub", "truediv", "xor",
    "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod", "ior", "ipow", "irshift", "isub", "itruediv", "ixor",
];

/// The `operator` function of the out-of-place form of an in-place operator (`iand` -> `and_`);
/// other names are returned as they are.
fn out_of_place(name: &str) -> &str {
    match BINARY_OPS.iter().position(|n| *n == name) {
        Some(k) if k >= 13 => BINARY_OPS[k - 13],
        _ => name,
    }
}

/// `COMPARE_OP` oparg -> `operator` function name (3.11: index into `dis.cmp_op`).
const COMPARE_OPS: [&str; 6] = ["lt", "le", "eq", "ne", "gt", "ge"];

/// Tensor methods that leave the graph (data-dependent or side-effecting): never traced.
const TENSOR_METHOD_DENYLIST: [&str; 14] = [
    "item", "tolist", "numpy", "data_ptr", "backward", "register_hook", "retain_grad", "storage",
    "untyped_storage", "__bool__", "__index__", "__int__", "__float__", "cpu_",
];

/// Methods of `logging.Logger` whose calls are replayed after the graph (Note [logger calls]):
/// the standard levels and transformers' additions (`warning_once`, `info_once`,
/// `warning_advice`, set on `logging.Logger` by `transformers.utils.logging`).
const LOGGER_METHODS: [&str; 10] = ["debug", "info", "warning", "warn", "error", "critical", "log", "warning_once", "info_once", "warning_advice"];

/// Functions that tell user code it is being compiled (all answer True while tracing).
const COMPILING_QUERIES: [&str; 5] = [
    "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling",
    "torch._dynamo.is_compiling",
    "torch._dynamo.external_utils.is_compiling",
    "torch._utils.is_compiling",
];

/// Tensor attributes that are not static metadata: reading them is not traced.
const TENSOR_ATTR_DENYLIST: [&str; 5] = ["grad", "data", "_base", "grad_fn", "_version"];

/// Where global names of the code being interpreted are looked up, and how they are sourced.
pub struct GlobalsInfo {
    pub globals: Py<PyDict>,
    pub builtins: Py<PyDict>,
    /// `None`: the frame's own globals (`Source::Global`). `Some(src)`: `src[name]` (the
    /// `__globals__` of an inlined function from another module).
    pub source: Option<Arc<Source>>,
    /// Values from these globals are trusted without guards (torch's own modules).
    pub trusted: bool,
}

pub struct InstructionTranslator<'a> {
    pub code: Arc<CodeInfo>,
    pub g: Rc<GlobalsInfo>,
    pub stack: Vec<VT>,
    pub locals: Vec<Option<VT>>,
    pub ip: usize,
    kw_names: Option<Py<PyTuple>>,
    depth: usize,
    pub og: &'a mut OutputGraph,
    /// Cells that belong to a real closure outside the traced frame: writing them is a side effect.
    /// Cells that outlive the frame (closures of the frame and of inlined functions), by
    /// tracker address: where a write to them is replayed.
    external_cells: HashMap<usize, CellTarget>,
    /// Closure of the function being run (cells as trackers), consumed by COPY_FREE_VARS.
    closure: Vec<VT>,
    /// Set when running a generator's frame: YIELD_VALUE suspends it (`Outcome::Yield`).
    generator: bool,
    /// In the frame being converted (depth 0): the `(ip, visit)` of each exception the trace
    /// raised and whose `except` clause it is running, outermost first (Note [handlers in the
    /// converted frame]).
    handlers_entered: Vec<(usize, usize)>,
    /// The line of the last instruction whose exception the trace took to a handler: the line
    /// a RERAISE (which has none of its own) reports, as CPython's traceback does.
    last_raise_line: Option<u32>,
}

enum Flow {
    Continue,
    Return(VT),
    Yield(VT),
}

/// The live state of the frame just before a graph-break instruction.
pub struct BreakState {
    pub ip: usize,
    pub stack: Vec<VT>,
    pub locals: Vec<Option<VT>>,
    /// Keyword names set by a KW_NAMES before the breaking CALL.
    pub kw_names: Option<Py<PyTuple>>,
}

/// How tracing of the converted frame ended.
pub enum Outcome {
    Return(VT),
    Break(BreakState),
    /// A generator's frame reached a `yield` (only when `generator` is set).
    Yield(VT),
}

impl<'a> InstructionTranslator<'a> {
    pub fn new(code: Arc<CodeInfo>, g: Rc<GlobalsInfo>, locals: Vec<Option<VT>>, closure: Vec<VT>, og: &'a mut OutputGraph, depth: usize) -> Self {
        let start = 0;
        InstructionTranslator {
            code,
            g,
            stack: Vec::new(),
            locals,
            ip: start,
            kw_names: None,
            depth,
            og,
            external_cells: HashMap::new(),
            closure,
            generator: false,
            handlers_entered: Vec::new(),
            last_raise_line: None,
        }
    }

    /// Marks closure cells, and cells the frame receives already made (a resume function's:
    /// `CodeInfo::cells_on_entry`), as external (their writes would escape the frame).
    pub fn mark_external_cells(&mut self) {
        let base = self.code.localsplus.len() - self.closure.len();
        for (j, c) in self.closure.iter().enumerate() {
            if let VT::Cell(rc) = c {
                self.external_cells.insert(Rc::as_ptr(rc) as usize, CellTarget::FrameFree((base + j) as u32));
            }
        }
        for (i, l) in self.locals.iter().enumerate() {
            if let Some(VT::Cell(rc)) = l {
                self.external_cells.insert(Rc::as_ptr(rc) as usize, CellTarget::FrameCell(i as u32));
            }
        }
    }

    /// Runs until RETURN_VALUE and returns the returned tracker (inlined calls).
    pub fn run(&mut self, py: Python<'_>) -> VResult<VT> {
        match self.run_until(py, None)? {
            Outcome::Return(v) => Ok(v),
            Outcome::Break(_) => unreachable!("no break requested"),
            Outcome::Yield(_) => unsupported!("yield outside a generator"),
        }
    }

    /// Runs the frame being converted. With `break_at = Some((ip, visit))`, stops before the
    /// `visit`-th execution of instruction `ip` and returns the live state for a graph break
    /// (the speculation log of a previous attempt that failed there).
    pub fn run_until(&mut self, py: Python<'_>, break_at: Option<(usize, usize)>) -> VResult<Outcome> {
        let mut budget = 200_000usize;
        let mut visits: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        loop {
            budget -= 1;
            if budget == 0 {
                unsupported!("instruction budget exhausted in {}", self.code.name);
            }
            let ip = self.ip;
            if ip >= self.code.insts.len() {
                unsupported!("fell off the end of {}", self.code.name);
            }
            let visit = {
                let v = visits.entry(ip).or_insert(0);
                *v += 1;
                *v
            };
            if break_at == Some((ip, visit)) {
                return Ok(Outcome::Break(BreakState {
                    ip,
                    stack: self.stack.clone(),
                    locals: self.locals.clone(),
                    kw_names: self.kw_names.as_ref().map(|k| k.clone_ref(py)),
                }));
            }
            if self.depth == 0 {
                self.og.top_ip = (ip, visit);
            }
            self.ip += 1;
            let flow = match self.step(py, ip) {
                Err(e) if e.raised.is_some() && self.code.insts[ip].exn.is_some() => match self.unwind_to_handler(py, ip, &e) {
                    Ok(()) => {
                        if self.depth == 0 {
                            self.handlers_entered.push((ip, visit));
                        }
                        continue;
                    }
                    Err(_) => Err(e),
                },
                other => other,
            };
            let flow = flow.map_err(|e| {
                let mut e = self.annotate(e, ip);
                if e.raised.is_some() && self.code.insts[ip].exn.is_some() {
                    // A handler of this frame (try/except, with) would see the exception: not
                    // modelled, so it is an ordinary break and Python runs the handler.
                    e.raised = None;
                }
                if self.depth == 0 {
                    if let Some(&first) = self.handlers_entered.first() {
                        // Note [handlers in the converted frame]: no break inside an `except`
                        // clause the trace entered; the break is at the instruction that raised,
                        // which Python then runs with its handlers.
                        e.break_at = Some(first);
                        e.raised = None;
                    } else if e.break_at.is_none() {
                        e.break_at = Some((ip, visit));
                    }
                }
                e
            })?;
            match flow {
                Flow::Continue => {}
                Flow::Return(v) => return Ok(Outcome::Return(v)),
                Flow::Yield(v) => return Ok(Outcome::Yield(v)),
            }
        }
    }

    /// Note [handlers in the converted frame]: an exception the trace raises inside a `try` of
    /// the frame being converted itself (not only of an inlined call) is handled in the trace
    /// too, so `try: ... raise ValueError ... except ValueError:` is captured, in a resume
    /// function as well. A graph break is never taken inside such an `except` clause: the
    /// resumed code would run its cleanup without the exception state CPython's unwinder set
    /// up. Any failure there (or the exception leaving the clause) moves the break back to the
    /// instruction that raised, where Python runs the handler for real, as before.
    ///
    /// An exception the trace raised at `ip`, inside a `try` of this frame: as
    /// CPython's unwinder does (Objects/exception_handling_notes.txt), the value stack is cut
    /// to the handler's depth, the offset of `ip` is pushed when the entry says `lasti`, then
    /// the exception object, and control goes to the handler; PUSH_EXC_INFO,
    /// CHECK_EXC_MATCH, POP_EXCEPT and RERAISE then run the `except` clauses in the trace.
    /// `Err` when the exception cannot be made a value (it stays a break).
    fn unwind_to_handler(&mut self, py: Python<'_>, ip: usize, e: &Unsupported) -> VResult<()> {
        let exn = self.code.insts[ip].exn.expect("checked by the caller");
        let exc = match &e.exc_value {
            Some(v) => v.clone_ref(py),
            None => {
                let name = e.raised.expect("checked by the caller");
                let msg = e.reason.split_once(": ").map(|(_, m)| m).unwrap_or("");
                let msg = msg.split(" (at ").next().unwrap_or(msg);
                py.import("builtins")?.getattr(name)?.call1((msg,))?.unbind()
            }
        };
        self.stack.truncate(exn.depth as usize);
        if exn.lasti {
            let offset = self.code.insts[ip].offset.unwrap_or(0) as i64;
            self.stack.push(VT::constant(offset.into_pyobject(py)?.into_any().unbind()));
        }
        self.og.raised_exceptions.push(exc.clone_ref(py));
        let point = self.og.top_ip;
        self.og.raise_points.push(point);
        if self.code.insts[ip].opcode != op::RERAISE {
            self.last_raise_line = self.code.insts[ip].positions.line.or(self.last_raise_line);
        }
        self.stack.push(VT::constant(exc));
        self.kw_names = None;
        self.ip = exn.handler.0 as usize;
        Ok(())
    }

    /// The `Err` that raises `exc` (a builtin exception instance held as a constant) in the
    /// trace, or a break for anything else.
    fn raise_value(&self, py: Python<'_>, exc: &VT) -> Unsupported {
        let Some(v) = exc.as_constant(py) else {
            return Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!("raise of {}", exc.describe(py)));
        };
        let cls = v.get_type();
        let name = cls.name().map(|n| n.to_string()).unwrap_or_default();
        let module = cls.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        match TRACED_EXCEPTIONS.iter().find(|n| **n == name) {
            Some(n) if module == "builtins" => Unsupported::raise_value(n, v.clone().unbind(), v.str().map(|s| s.to_string()).unwrap_or_default()),
            _ => Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!("raise of {}", type_name(&v))),
        }
    }

    fn annotate(&self, e: Unsupported, ip: usize) -> Unsupported {
        if e.reason.contains(" (at ") {
            return e;
        }
        // A RERAISE reports the line that raised the exception it re-raises, as CPython's
        // traceback does (the cleanup ones have no line of their own); other instructions
        // without a line, the nearest line before them.
        let reraised = self.last_raise_line.filter(|_| self.code.insts[ip].opcode == op::RERAISE);
        let line = reraised
            .or(self.code.insts[ip].positions.line)
            .or_else(|| self.code.insts[..ip].iter().rev().find_map(|i| i.positions.line))
            .unwrap_or(self.code.firstlineno);
        Unsupported { reason: format!("{} (at {}:{} in {})", e.reason, self.code.filename, line, self.code.name), ..e }
    }

    /// Pops a value the instruction uses: a lazy constant gets its guards (Note [lazy
    /// constants] in `output_graph.rs`).
    fn pop(&mut self) -> VResult<VT> {
        let v = self.pop_unused()?;
        self.og.realize(&v);
        Ok(v)
    }

    /// Pops a value the instruction only moves or drops (STORE_FAST, POP_TOP) or records how
    /// it is made from (FORMAT_VALUE, BUILD_STRING).
    fn pop_unused(&mut self) -> VResult<VT> {
        self.stack.pop().ok_or_else(|| Unsupported::new("stack underflow"))
    }

    fn popn(&mut self, n: usize) -> VResult<Vec<VT>> {
        let items = self.popn_unused(n)?;
        for v in &items {
            self.og.realize(v);
        }
        Ok(items)
    }

    fn popn_unused(&mut self, n: usize) -> VResult<Vec<VT>> {
        if self.stack.len() < n {
            unsupported!("stack underflow");
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    /// `slice(*items)` for constant bounds (BUILD_SLICE, and 3.12's BINARY_SLICE/STORE_SLICE).
    fn make_slice(&mut self, py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
        if items.iter().any(|i| matches!(i, VT::SymNum(_))) && items.iter().all(|i| matches!(i, VT::SymNum(_) | VT::Constant(_))) {
            // Symbolic bounds stay symbolic: `slice(None, n)` is a graph value (Note [symbolic
            // sizes]); where a slice's value is needed it specializes like a number.
            let slice = py.import("builtins")?.getattr("slice")?;
            return self.og.call(py, Some(&slice), None, &items, &[]);
        }
        let consts: Option<Vec<_>> = items.iter().map(|i| i.as_constant(py)).collect();
        match consts {
            Some(c) => {
                let slice = py.import("builtins")?.getattr("slice")?.call1(PyTuple::new(py, c)?)?;
                Ok(VT::constant(slice.unbind()))
            }
            None => unsupported!("slice with non-constant bounds"),
        }
    }

    fn jump(&mut self, ip: usize) {
        self.ip = self.code.insts[ip].target.map(|t| t.0 as usize).expect("jump has a target");
    }

    fn step(&mut self, py: Python<'_>, ip: usize) -> VResult<Flow> {
        let inst = &self.code.insts[ip];
        let arg = inst.arg;
        let opcode = inst.opcode;
        match opcode {
            op::NOP | op::RESUME | op::PRECALL | op::EXTENDED_ARG => {}
            op::POP_TOP => {
                self.pop_unused()?;
            }
            op::PUSH_NULL => self.stack.push(VT::Null),
            op::COPY => {
                let v = self.stack[self.stack.len() - arg as usize].clone();
                self.stack.push(v);
            }
            op::SWAP => {
                let n = self.stack.len();
                self.stack.swap(n - 1, n - arg as usize);
            }
            op::LOAD_CONST => {
                let c = self.code.consts.bind(py).get_item(arg as usize)?;
                let v = self.wrap_unguarded(py, &c)?;
                self.stack.push(v);
            }
            // A failing `assert`: the class, called with the message (if any) and raised.
            op::LOAD_ASSERTION_ERROR => {
                let cls = py.import("builtins")?.getattr("AssertionError")?;
                let v = self.wrap_unguarded(py, &cls)?;
                self.stack.push(v);
            }
            op::LOAD_FAST | op::LOAD_FAST_CHECK => match &self.locals[arg as usize] {
                Some(v) => self.stack.push(v.clone()),
                None => unsupported!("local '{}' referenced before assignment", self.code.localsplus[arg as usize]),
            },
            // 3.12 inlined comprehensions (PEP 709) save the outer binding of the loop variable
            // (NULL when unbound) and restore it with STORE_FAST afterwards.
            op::LOAD_FAST_AND_CLEAR => {
                let v = self.locals[arg as usize].take().unwrap_or(VT::Null);
                self.stack.push(v);
            }
            op::STORE_FAST => {
                let v = self.pop_unused()?;
                self.locals[arg as usize] = if matches!(v, VT::Null) { None } else { Some(v) };
            }
            op::DELETE_FAST => self.locals[arg as usize] = None,
            op::MAKE_CELL => {
                let old = self.locals[arg as usize].take();
                self.locals[arg as usize] = Some(VT::Cell(Rc::new(RefCell::new(old))));
            }
            op::COPY_FREE_VARS => {
                let n = arg as usize;
                let base = self.code.localsplus.len() - n;
                if self.closure.len() != n {
                    unsupported!("closure has {} cells, code expects {n}", self.closure.len());
                }
                for i in 0..n {
                    self.locals[base + i] = Some(self.closure[i].clone());
                }
            }
            op::LOAD_CLOSURE => {
                let v = self.locals[arg as usize].clone().ok_or_else(|| Unsupported::new("empty closure slot"))?;
                self.stack.push(v);
            }
            op::LOAD_DEREF => {
                let v = match &self.locals[arg as usize] {
                    Some(VT::Cell(c)) => c.borrow().clone(),
                    _ => unsupported!("LOAD_DEREF of a slot that is not a cell"),
                };
                match v {
                    Some(v) => self.stack.push(v),
                    None => unsupported!("free variable '{}' referenced before assignment", self.code.localsplus[arg as usize]),
                }
            }
            op::STORE_DEREF => {
                let v = self.pop()?;
                match &self.locals[arg as usize] {
                    Some(VT::Cell(c)) => {
                        if let Some(target) = self.external_cells.get(&(Rc::as_ptr(c) as usize)).cloned() {
                            // `nonlocal` write to a cell that outlives the frame: replayed.
                            if matches!(target, CellTarget::Unknown) {
                                graph_break!(SideEffect, "write to a closure cell of an enclosing frame");
                            }
                            self.og.side_effects.store_cell(target, c);
                        }
                        *c.borrow_mut() = Some(v);
                    }
                    _ => unsupported!("STORE_DEREF of a slot that is not a cell"),
                }
            }
            op::LOAD_GLOBAL => {
                let name = self.code.names[(arg >> 1) as usize].clone();
                let v = self.load_global(py, &name)?;
                self.push_callable(v, arg & 1 == 1);
            }
            op::LOAD_ATTR => {
                let obj = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let v = self.getattr(py, &obj, &name)?;
                self.stack.push(v);
            }
            op::LOAD_METHOD => {
                let obj = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let v = self.getattr(py, &obj, &name)?;
                self.push_callable(v, true);
            }
            op::STORE_ATTR => {
                let obj = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let v = self.pop()?;
                self.store_attr(py, &obj, &name, v)?;
            }
            op::STORE_GLOBAL => {
                let v = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let g = self.g.clone();
                if g.trusted {
                    unsupported!("write to global '{name}' of a torch module");
                }
                self.og.side_effects.store_global(g.globals.as_ptr() as usize, g.source.clone(), &name, v);
            }
            op::IMPORT_NAME => {
                let fromlist = self.pop()?;
                let level = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let v = self.import_name(py, &name, &level, &fromlist)?;
                self.stack.push(v);
            }
            op::IMPORT_FROM => {
                let m = self.stack.last().cloned().ok_or_else(|| Unsupported::new("IMPORT_FROM on an empty stack"))?;
                let name = self.code.names[arg as usize].clone();
                let v = match &m {
                    VT::PyModule { obj, .. } if !obj.bind(py).hasattr(name.as_str())? => {
                        // `from pkg import submodule` that is not an attribute yet: a real import.
                        graph_break!(UnsupportedOpcode, "from {} import {name} (not loaded)", m.describe(py));
                    }
                    _ => self.getattr(py, &m, &name)?,
                };
                self.stack.push(v);
            }
            op::DELETE_SUBSCR => {
                let idx = self.pop()?;
                let obj = self.pop()?;
                self.delitem(py, &obj, idx)?;
            }
            op::KW_NAMES => {
                let names = self.code.consts.bind(py).get_item(arg as usize)?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
                self.kw_names = Some(names.unbind());
            }
            // 3.13: the keyword names are a constant tuple on the stack, above the arguments.
            op::CALL_KW => {
                let names = self.pop()?;
                let names = names
                    .as_constant(py)
                    .and_then(|t| t.cast_into::<PyTuple>().ok())
                    .ok_or_else(|| Unsupported::new("CALL_KW without a constant tuple of keyword names"))?;
                self.kw_names = Some(names.unbind());
                self.call_from_stack(py, arg as usize)?;
            }
            op::CALL => self.call_from_stack(py, arg as usize)?,
            op::CALL_FUNCTION_EX => {
                let kwargs_vt = if arg & 1 == 1 { Some(self.pop()?) } else { None };
                let args_vt = self.pop()?;
                // [NULL, func] before 3.13, [func, NULL] from 3.13 on.
                let mut func = self.pop()?;
                if func.is_null() {
                    func = self.pop()?;
                } else if self.stack.last().map(|v| v.is_null()).unwrap_or(false) {
                    self.pop()?;
                }
                let args = self.unpack(py, &args_vt)?;
                let mut kwargs = Vec::new();
                if let Some(kw) = kwargs_vt {
                    kwargs = self.dict_items(py, &kw)?;
                }
                let r = self.call(py, &func, args, kwargs)?;
                self.stack.push(r);
            }
            op::TO_BOOL => {
                let v = self.pop()?;
                let t = self.truth(py, &v)?;
                self.stack.push(const_bool(py, t));
            }
            op::CONVERT_VALUE => {
                let v = self.pop()?;
                let c = v.as_constant(py).ok_or_else(|| Unsupported::new(format!("f-string of {}", v.describe(py))))?;
                let c = match arg {
                    1 => c.str()?.into_any(),
                    2 => c.repr()?.into_any(),
                    3 => py.import("builtins")?.getattr("ascii")?.call1((c,))?,
                    _ => unsupported!("CONVERT_VALUE {arg}"),
                };
                self.stack.push(VT::constant(c.unbind()));
            }
            op::MAKE_FUNCTION => {
                let code = self.pop()?;
                let closure = if arg & 0x08 != 0 {
                    let v = self.pop()?;
                    self.unpack(py, &v)?
                } else {
                    vec![]
                };
                if arg & 0x04 != 0 {
                    self.pop()?;
                }
                let kwdefaults = if arg & 0x02 != 0 {
                    let v = self.pop()?;
                    self.dict_items(py, &v)?
                } else {
                    vec![]
                };
                let defaults = if arg & 0x01 != 0 {
                    let v = self.pop()?;
                    self.unpack(py, &v)?
                } else {
                    vec![]
                };
                let code_obj = match code.as_constant(py) {
                    Some(c) => c,
                    None => unsupported!("MAKE_FUNCTION without a constant code object"),
                };
                let qualname: String = code_obj.getattr("co_qualname")?.extract()?;
                self.stack.push(VT::NestedFunction(Rc::new(NestedFunction {
                    code: code_obj.unbind(),
                    globals: self.g.globals.clone_ref(py).into_any(),
                    defaults,
                    kwdefaults,
                    closure,
                    qualname,
                })));
            }
            op::RETURN_VALUE => {
                let v = self.pop()?;
                return Ok(Flow::Return(v));
            }
            op::RETURN_CONST => {
                let c = self.code.consts.bind(py).get_item(arg as usize)?;
                let v = self.wrap_unguarded(py, &c)?;
                return Ok(Flow::Return(v));
            }
            op::BEFORE_WITH => {
                let ctx = self.pop()?;
                match ctx {
                    VT::GradModeCtx { enabled, set_on_create, prev } => {
                        let restore = if set_on_create { prev } else { self.grad_enabled(py)? };
                        if !set_on_create {
                            self.set_grad_enabled(py, enabled)?;
                        }
                        self.stack.push(VT::GradModeExit { restore });
                        self.stack.push(VT::none(py));
                    }
                    VT::Opaque { obj, source } => {
                        // A user context manager: `__enter__`/`__exit__` are looked up on the
                        // type (special method lookup, Python/ceval.c BEFORE_WITH) and inlined.
                        let ty = obj.bind(py).get_type();
                        let mut methods = Vec::new();
                        for name in ["__exit__", "__enter__"] {
                            match static_type_lookup(&ty, name)? {
                                Some((k, f)) if type_name(&f) == "function" => {
                                    let func = wrap(py, self.og, &f, class_attr_source(&source, k, name))?;
                                    methods.push(VT::Method { func: Box::new(func), self_: Box::new(VT::Opaque { obj: obj.clone(), source: source.clone() }) });
                                }
                                _ => graph_break!(UnsupportedOpcode, "with block over {} object ({name} is not a Python function)", type_name(obj.bind(py))),
                            }
                        }
                        let enter = methods.pop().expect("__enter__");
                        let exit = methods.pop().expect("__exit__");
                        let entered = self.call(py, &enter, vec![], vec![])?;
                        self.stack.push(exit);
                        self.stack.push(entered);
                    }
                    other => graph_break!(UnsupportedOpcode, "with block over {}", other.describe(py)),
                }
            }
            // A generator's frame (IterKind::Generator), run one step at a time. The generator
            // protocol pushes the sent value (None) after RETURN_GENERATOR and, when the frame
            // is resumed, after each YIELD_VALUE (`resume_generator`).
            op::RETURN_GENERATOR if self.generator => self.stack.push(VT::none(py)),
            op::YIELD_VALUE if self.generator => {
                let v = self.pop()?;
                return Ok(Flow::Yield(v));
            }
            // Note [yield from]: `yield from it` delegates to the sub-iterator: GET_YIELD_FROM_ITER
            // makes it (a generator stays itself, anything else gets `iter()`), then a loop of
            // SEND (one step of it, with the value sent into this frame) and YIELD_VALUE (each
            // item passes through to this generator's consumer). When it is exhausted the
            // expression's value is its return value (`StopIteration.value`; None for a plain
            // iterator). 3.11's SEND pops the receiver as it jumps out of the loop; 3.12's and
            // 3.13's leave it for END_SEND. The trace only ever resumes a generator with None
            // (`next()`), so what is sent on is always None, which steps the sub-iterator; the
            // `throw()` path (CLEANUP_THROW) is never reached in the trace.
            op::GET_YIELD_FROM_ITER if self.generator => {
                let v = self.pop()?;
                let it = self.make_iter(py, &v)?;
                self.stack.push(VT::Iterator(it));
            }
            op::SEND if self.generator => {
                let sent = self.pop()?;
                if !sent.as_constant(py).is_some_and(|c| c.is_none()) {
                    graph_break!(UnsupportedOpcode, "yield from with a value sent in ({})", sent.describe(py));
                }
                let receiver = match self.stack.last() {
                    Some(VT::Iterator(it)) => it.clone(),
                    Some(other) => graph_break!(UntracedValue, "yield from over {} (not an iterator the trace models)", other.describe(py)),
                    None => unsupported!("SEND on an empty stack"),
                };
                let was_exhausted = borrow_iter(&receiver).map_err(|_| Unsupported::new("yield from over a running iterator"))?.exhausted;
                match self.step_iter(py, &receiver)? {
                    Some(item) => self.stack.push(item),
                    None => {
                        let returned = if was_exhausted { None } else { receiver.borrow_mut().returned.take() };
                        if matches!(crate::bytecode::PyVersion::CURRENT, crate::bytecode::PyVersion::V311) {
                            self.pop()?;
                        }
                        self.stack.push(returned.unwrap_or_else(|| VT::none(py)));
                        self.jump(ip);
                    }
                }
            }
            op::END_SEND if self.generator => {
                let v = self.pop()?;
                self.pop()?;
                self.stack.push(v);
            }
            op::UNARY_NEGATIVE | op::UNARY_POSITIVE | op::UNARY_INVERT => {
                let v = self.pop()?;
                let name = match opcode {
                    op::UNARY_NEGATIVE => "neg",
                    op::UNARY_POSITIVE => "pos",
                    _ => "invert",
                };
                let r = self.operator(py, name, vec![v])?;
                self.stack.push(r);
            }
            op::UNARY_NOT => {
                let v = self.pop()?;
                let t = self.truth(py, &v)?;
                self.stack.push(VT::constant(pyo3::types::PyBool::new(py, !t).to_owned().into_any().unbind()));
            }
            op::BINARY_OP => {
                let b = self.pop()?;
                let a = self.pop()?;
                let name = BINARY_OPS.get(arg as usize).ok_or_else(|| Unsupported::new(format!("BINARY_OP {arg}")))?;
                let r = self.binary(py, name, a, b)?;
                self.stack.push(r);
            }
            op::COMPARE_OP => {
                let b = self.pop()?;
                let a = self.pop()?;
                let name = COMPARE_OPS.get(arg as usize).ok_or_else(|| Unsupported::new(format!("COMPARE_OP {arg}")))?;
                let r = self.compare(py, name, a, b)?;
                self.stack.push(r);
            }
            op::IS_OP => {
                let b = self.pop()?;
                let a = self.pop()?;
                let same = self.is_same(py, &a, &b)?;
                self.stack.push(const_bool(py, same != (arg == 1)));
            }
            op::CONTAINS_OP => {
                let container = self.pop()?;
                let item = self.pop()?;
                let found = self.contains(py, &container, &item)?;
                self.stack.push(const_bool(py, found != (arg == 1)));
            }
            op::BINARY_SUBSCR => {
                let idx = self.pop()?;
                let obj = self.pop()?;
                let r = self.getitem(py, &obj, &idx)?;
                self.stack.push(r);
            }
            // 3.12: `obj[start:end]` and `obj[start:end] = v` without BUILD_SLICE.
            op::BINARY_SLICE => {
                let bounds = self.popn(2)?;
                let obj = self.pop()?;
                let idx = self.make_slice(py, bounds)?;
                let r = self.getitem(py, &obj, &idx)?;
                self.stack.push(r);
            }
            op::STORE_SLICE => {
                let bounds = self.popn(2)?;
                let obj = self.pop()?;
                let v = self.pop()?;
                let idx = self.make_slice(py, bounds)?;
                self.setitem(py, &obj, idx, v)?;
            }
            // 3.12: `super().name` / `super(cls, obj).name` with the method bit in arg & 1.
            op::LOAD_SUPER_ATTR => {
                let obj = self.pop()?;
                let cls = self.pop()?;
                let sup = self.pop()?;
                let s = self.call(py, &sup, vec![cls, obj], vec![])?;
                let name = self.code.names[(arg >> 2) as usize].clone();
                let v = self.getattr(py, &s, &name)?;
                self.push_callable(v, arg & 1 == 1);
            }
            op::STORE_SUBSCR => {
                let idx = self.pop()?;
                let obj = self.pop()?;
                let v = self.pop()?;
                self.setitem(py, &obj, idx, v)?;
            }
            op::BUILD_TUPLE => {
                let items = self.popn(arg as usize)?;
                self.stack.push(make_tuple(py, items)?);
            }
            op::BUILD_SET => {
                let items = self.popn(arg as usize)?;
                let set = self.new_set(py, &items)?;
                self.stack.push(set);
            }
            op::SET_UPDATE | op::SET_ADD => {
                let v = self.pop()?;
                let items = if opcode == op::SET_ADD { vec![v] } else { self.iter_items(py, &v)? };
                let idx = self.stack.len() - arg as usize;
                match &self.stack[idx] {
                    VT::Set(set) => {
                        let set = set.clone();
                        let consts = self.set_members_of(py, &items)?;
                        let set = set.borrow();
                        for c in consts {
                            set.bind(py).call_method1("add", (c,))?;
                        }
                    }
                    _ => unsupported!("SET_UPDATE of a non-set"),
                }
            }
            op::BUILD_LIST => {
                let items = self.popn(arg as usize)?;
                self.stack.push(new_list(items));
            }
            op::LIST_APPEND => {
                let v = self.pop()?;
                let idx = self.stack.len() - arg as usize;
                match &self.stack[idx] {
                    VT::List(l) if l.borrow().source.is_none() => l.borrow_mut().items.push(v),
                    _ => unsupported!("LIST_APPEND to a list this frame did not build"),
                }
            }
            op::LIST_EXTEND => {
                let v = self.pop()?;
                let items = self.unpack(py, &v)?;
                let idx = self.stack.len() - arg as usize;
                match &self.stack[idx] {
                    VT::List(l) if l.borrow().source.is_none() => l.borrow_mut().items.extend(items),
                    _ => unsupported!("LIST_EXTEND to a list this frame did not build"),
                }
            }
            op::LIST_TO_TUPLE => {
                let v = self.pop()?;
                let items = self.unpack(py, &v)?;
                self.stack.push(make_tuple(py, items)?);
            }
            op::BUILD_MAP => {
                let items = self.popn(2 * arg as usize)?;
                let mut d = Vec::new();
                for kv in items.chunks(2) {
                    let k = kv[0].as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
                    d.push((k.unbind(), kv[1].clone()));
                }
                self.stack.push(new_dict(d));
            }
            op::BUILD_CONST_KEY_MAP => {
                let keys = self.pop()?;
                let vals = self.popn(arg as usize)?;
                let keys = keys.as_constant(py).ok_or_else(|| Unsupported::new("BUILD_CONST_KEY_MAP keys"))?;
                let mut d = Vec::new();
                for (k, v) in keys.try_iter()?.zip(vals) {
                    d.push((k?.unbind(), v));
                }
                self.stack.push(new_dict(d));
            }
            op::MAP_ADD => {
                let v = self.pop()?;
                let k = self.pop()?;
                let k = k.as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
                let idx = self.stack.len() - arg as usize;
                match &self.stack[idx] {
                    VT::Dict(d) if d.borrow().source.is_none() => dict_set(py, &mut d.borrow_mut(), k.unbind(), v)?,
                    _ => unsupported!("MAP_ADD to a dict this frame did not build"),
                }
            }
            op::DICT_UPDATE | op::DICT_MERGE => {
                let v = self.pop()?;
                let items = self.dict_items(py, &v)?;
                let idx = self.stack.len() - arg as usize;
                let VT::Dict(d) = &self.stack[idx] else { unsupported!("DICT_UPDATE to a dict this frame did not build") };
                if d.borrow().source.is_some() {
                    unsupported!("DICT_UPDATE to a dict this frame did not build");
                }
                let d = d.clone();
                for (k, v) in items {
                    // DICT_MERGE (`f(a=1, **kw)`, `f(**a, **b)`) refuses a key given twice, as
                    // CPython's `_PyDict_MergeEx(.., 2)` does; `{**a, **b}` (DICT_UPDATE) keeps
                    // the last.
                    let key = PyString::new(py, &k);
                    if opcode == op::DICT_MERGE && d.borrow().items.iter().any(|(have, _)| have.bind(py).eq(&key).unwrap_or(false)) {
                        return Err(self.repeated_keyword(py, idx, &k));
                    }
                    dict_set(py, &mut d.borrow_mut(), key.into_any().unbind(), v)?;
                }
            }
            op::BUILD_SLICE => {
                let items = self.popn(arg as usize)?;
                let slice = self.make_slice(py, items)?;
                self.stack.push(slice);
            }
            op::FORMAT_VALUE => {
                // A lazy argument formatted into a string is not used yet (Note [lazy constants]):
                // the string records how to format it again at run time.
                let spec = if arg & 0x04 != 0 { Some(self.pop_unused()?) } else { None };
                let v = self.pop_unused()?;
                let recipes = (self.og.lazy_recipe(py, &v), spec.as_ref().map(|s| self.og.lazy_recipe(py, s)));
                if recipes.0.is_none() || matches!(recipes.1, Some(None)) {
                    self.og.realize(&v);
                    if let Some(s) = &spec {
                        self.og.realize(s);
                    }
                }
                let c = v.as_constant(py).ok_or_else(|| Unsupported::new(format!("f-string of {}", v.describe(py))))?;
                let builtins = py.import("builtins")?;
                let conv = match arg & 0x03 {
                    1 => Some(builtins.getattr("str")?),
                    2 => Some(builtins.getattr("repr")?),
                    3 => Some(builtins.getattr("ascii")?),
                    _ => None,
                };
                let c = match &conv {
                    Some(f) => f.call1((c,))?,
                    None => c,
                };
                let spec_value = match &spec {
                    Some(s) => s.as_constant(py).ok_or_else(|| Unsupported::new("format spec"))?,
                    None => PyString::new(py, "").into_any(),
                };
                let format = builtins.getattr("format")?;
                let r = format.call1((c, &spec_value))?;
                let out = match recipes {
                    (Some((rv, mut bases)), spec_recipe) if !matches!(spec_recipe, Some(None)) => {
                        let rv = match conv {
                            Some(f) => LazyRecipe::Call(f.unbind(), vec![rv]),
                            None => rv,
                        };
                        let rs = match spec_recipe.flatten() {
                            Some((rs, b)) => {
                                bases.extend(b);
                                rs
                            }
                            None => LazyRecipe::Const(spec_value.unbind()),
                        };
                        self.og.lazy_derived(r.unbind(), LazyRecipe::Call(format.unbind(), vec![rv, rs]), bases)
                    }
                    _ => VT::constant(r.unbind()),
                };
                self.stack.push(out);
            }
            op::BUILD_STRING => {
                let items = self.popn_unused(arg as usize)?;
                let recipes: Option<Vec<_>> = items.iter().map(|i| self.og.lazy_recipe(py, i)).collect();
                if recipes.is_none() {
                    for i in &items {
                        self.og.realize(i);
                    }
                }
                let mut s = String::new();
                for i in &items {
                    let c = i.as_constant(py).ok_or_else(|| Unsupported::new("BUILD_STRING of non-constant"))?;
                    s.push_str(&c.extract::<String>()?);
                }
                let value = PyString::new(py, &s).into_any().unbind();
                let out = match recipes {
                    Some(rs) => {
                        let bases = rs.iter().flat_map(|(_, b)| b.iter().copied()).collect();
                        let parts = LazyRecipe::Tuple(rs.into_iter().map(|(r, _)| r).collect());
                        let join = PyString::new(py, "").getattr("join")?.unbind();
                        self.og.lazy_derived(value, LazyRecipe::Call(join, vec![parts]), bases)
                    }
                    None => VT::constant(value),
                };
                self.stack.push(out);
            }
            op::UNPACK_SEQUENCE => {
                let v = self.pop()?;
                let items = self.unpack(py, &v)?;
                if items.len() != arg as usize {
                    unsupported!("UNPACK_SEQUENCE of {} items into {arg}", items.len());
                }
                self.stack.extend(items.into_iter().rev());
            }
            op::UNPACK_EX => {
                let v = self.pop()?;
                let items = self.unpack(py, &v)?;
                let before = (arg & 0xff) as usize;
                let after = (arg >> 8) as usize;
                if items.len() < before + after {
                    unsupported!("UNPACK_EX: not enough values");
                }
                let mid = new_list(items[before..items.len() - after].to_vec());
                let mut out: Vec<VT> = items[..before].to_vec();
                out.push(mid);
                out.extend(items[items.len() - after..].iter().cloned());
                self.stack.extend(out.into_iter().rev());
            }
            op::GET_ITER => {
                let v = self.pop()?;
                let it = self.make_iter(py, &v)?;
                self.stack.push(VT::Iterator(it));
            }
            op::FOR_ITER => {
                let next = match self.stack.last().cloned() {
                    Some(VT::Iterator(it)) => self.step_iter(py, &it)?,
                    // An iterator of a user type (a DataLoader's): stepping it runs its Python
                    // `__next__`; the loop runs in Python and what it calls is compiled frame
                    // by frame.
                    Some(other) => graph_break!(UntracedValue, "for loop over {} (its __next__ runs in Python)", other.describe(py)),
                    None => unsupported!("FOR_ITER on an empty stack"),
                };
                match next {
                    Some(v) => self.stack.push(v),
                    None => {
                        self.pop()?;
                        self.jump(ip);
                    }
                }
            }
            op::JUMP_FORWARD | op::JUMP_BACKWARD | op::JUMP_BACKWARD_NO_INTERRUPT => self.jump(ip),
            op::POP_JUMP_FORWARD_IF_FALSE | op::POP_JUMP_BACKWARD_IF_FALSE | op::POP_JUMP_FORWARD_IF_TRUE | op::POP_JUMP_BACKWARD_IF_TRUE => {
                let v = self.pop()?;
                let t = self.truth(py, &v)?;
                let on_true = matches!(opcode, op::POP_JUMP_FORWARD_IF_TRUE | op::POP_JUMP_BACKWARD_IF_TRUE);
                if t == on_true {
                    self.jump(ip);
                }
            }
            op::POP_JUMP_FORWARD_IF_NONE | op::POP_JUMP_BACKWARD_IF_NONE | op::POP_JUMP_FORWARD_IF_NOT_NONE | op::POP_JUMP_BACKWARD_IF_NOT_NONE => {
                let v = self.pop()?;
                let is_none = self.is_same(py, &v, &VT::none(py))?;
                let on_none = matches!(opcode, op::POP_JUMP_FORWARD_IF_NONE | op::POP_JUMP_BACKWARD_IF_NONE);
                if is_none == on_none {
                    self.jump(ip);
                }
            }
            op::JUMP_IF_FALSE_OR_POP | op::JUMP_IF_TRUE_OR_POP => {
                let v = self.stack.last().cloned().ok_or_else(|| Unsupported::new("stack underflow"))?;
                self.og.realize(&v);
                let t = self.truth(py, &v)?;
                if t == (opcode == op::JUMP_IF_TRUE_OR_POP) {
                    self.jump(ip);
                } else {
                    self.pop()?;
                }
            }
            // The `except` machinery, reached only through `unwind_to_handler` (an exception the
            // trace raised inside a `try` of a traced frame).
            op::PUSH_EXC_INFO => {
                let exc = self.pop()?;
                // The exception being handled before this one (`sys.exc_info()` outside any
                // handler of the trace): restored by POP_EXCEPT, not otherwise read here.
                self.stack.push(VT::none(py));
                self.stack.push(exc);
            }
            op::CHECK_EXC_MATCH => {
                let want = self.pop()?;
                let exc = self.stack.last().cloned().ok_or_else(|| Unsupported::new("stack underflow"))?;
                let (Some(e), cls) = (exc.as_constant(py), match &want {
                    VT::Class(c) => Some(c.bind(py).clone()),
                    VT::Tuple(items) => items.iter().map(|i| match i {
                        VT::Class(c) => Some(c.bind(py).clone()),
                        _ => None,
                    }).collect::<Option<Vec<_>>>().and_then(|cs| PyTuple::new(py, cs).ok().map(|t| t.into_any())),
                    _ => None,
                }) else {
                    unsupported!("except clause over {}", want.describe(py));
                };
                let Some(cls) = cls else { unsupported!("except clause over {}", want.describe(py)) };
                self.stack.push(const_bool(py, e.is_instance(&cls)?));
            }
            op::POP_EXCEPT => {
                self.pop()?;
                if self.depth == 0 {
                    self.handlers_entered.pop();
                }
            }
            op::RERAISE => {
                let exc = self.pop()?;
                return Err(self.raise_value(py, &exc));
            }
            op::RAISE_VARARGS if arg == 1 => {
                let exc = self.pop()?;
                let exc = match &exc {
                    // `raise IndexError`: the class called with no arguments.
                    VT::Class(_) => self.call(py, &exc, vec![], vec![])?,
                    _ => exc,
                };
                return Err(self.raise_value(py, &exc));
            }
            _ => graph_break!(UnsupportedOpcode, "opcode {} is not supported", crate::bytecode::opcode::name(opcode)),
        }
        Ok(Flow::Continue)
    }

    // ----- grad mode ---------------------------------------------------------------------

    /// The grad mode tracing currently sees (the real global mode, switched as tracing goes).
    fn grad_enabled(&self, py: Python<'_>) -> VResult<bool> {
        Ok(self.og.handles.torch.bind(py).call_method0("is_grad_enabled")?.extract()?)
    }

    /// Switches grad mode at this point of the graph (a `torch._C._set_grad_enabled` node) and
    /// for the rest of tracing (fake tensors then compute `requires_grad` as eager would).
    fn set_grad_enabled(&mut self, py: Python<'_>, flag: bool) -> VResult<()> {
        let setter = self.og.handles.torch.bind(py).getattr("_C")?.getattr("_set_grad_enabled")?;
        self.og.record_effect(py, &setter, &[const_bool(py, flag)])?;
        setter.call1((flag,))?;
        Ok(())
    }

    // ----- values -----------------------------------------------------------------------

    /// Wraps a value whose stability needs no guard (a code constant, an attribute of a trusted
    /// object): literals become constants, other values are classified like `builder::wrap` but
    /// without guards or sources.
    pub fn wrap_unguarded(&mut self, py: Python<'_>, v: &Bound<'_, PyAny>) -> VResult<VT> {
        if is_literal(py, v) || type_name(v) == "code" {
            return Ok(VT::constant(v.clone().unbind()));
        }
        if v.is_instance(self.og.handles.module_type.bind(py))? {
            unsupported!("module {} reached without a source", type_name(v));
        }
        if self.og.is_tensor(py, v) {
            unsupported!("tensor constant reached without a source");
        }
        let tn = type_name(v);
        Ok(match tn.as_str() {
            "function" if is_torch_callable(v) => VT::TorchFunction(Rc::new(v.clone().unbind())),
            "function" => VT::Function { obj: Rc::new(v.clone().unbind()), source: None },
            "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor" | "method-wrapper" if is_torch_callable(v) => {
                VT::TorchFunction(Rc::new(v.clone().unbind()))
            }
            "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor" | "method-wrapper" => VT::Builtin(Rc::new(v.clone().unbind())),
            // Modules, subclasses included (`torch.backends`' GenericModule).
            _ if v.is_instance_of::<pyo3::types::PyModule>() => VT::PyModule { obj: Rc::new(v.clone().unbind()), source: None },
            _ if v.is_instance_of::<pyo3::types::PyType>() => VT::Class(Rc::new(v.clone().unbind())),
            _ => unsupported!("cannot trace a value of type {tn}"),
        })
    }

    /// Wraps `v` reached through `source` (guarded), or unguarded when there is no source or the
    /// holder is trusted.
    fn wrap_from(&mut self, py: Python<'_>, v: &Bound<'_, PyAny>, source: Option<Arc<Source>>) -> VResult<VT> {
        match source {
            Some(s) => wrap(py, self.og, v, s),
            None => self.wrap_unguarded(py, v),
        }
    }

    fn load_global(&mut self, py: Python<'_>, name: &str) -> VResult<VT> {
        let g = self.g.clone();
        if let Some(v) = self.og.side_effects.global(g.globals.as_ptr() as usize, name) {
            return Ok(v);
        }
        let globals = g.globals.bind(py);
        let (value, in_globals) = match globals.get_item(name)? {
            Some(v) => (v, true),
            None => match g.builtins.bind(py).get_item(name)? {
                Some(v) => (v, false),
                None => unsupported!("name '{name}' is not defined"),
            },
        };
        if g.trusted {
            return self.wrap_unguarded(py, &value);
        }
        let source = match (&g.source, in_globals) {
            (None, _) | (_, false) => Arc::new(Source::Global { name: name.to_string() }),
            (Some(s), true) => s.item(ItemKey::Str(name.to_string())),
        };
        wrap(py, self.og, &value, source)
    }

    fn getattr(&mut self, py: Python<'_>, obj: &VT, name: &str) -> VResult<VT> {
        // Any attribute but the (guarded) code object can differ between closures of one code.
        if name != "__code__" {
            self.pin_identity(obj);
        }
        match obj {
            VT::Module { obj: m, source } => self.module_getattr(py, m.bind(py), source.clone(), name),
            VT::Tensor(t) => {
                if TENSOR_ATTR_DENYLIST.contains(&name) {
                    unsupported!("Tensor.{name} is not traced");
                }
                let fake = t.fake.bind(py);
                let v = fake.getattr(name)?;
                if self.og.is_tensor(py, &v) {
                    let getattr = self.og.handles.getattr.clone_ref(py);
                    return self.og.call(py, Some(getattr.bind(py)), None, &[obj.clone(), VT::constant(PyString::new(py, name).into_any().unbind())], &[]);
                }
                if v.is_callable() && !is_literal(py, &v) {
                    return Ok(VT::TensorMethod { tensor: t.clone(), name: name.to_string() });
                }
                if self.og.shape_env.is_some() && name == "shape" {
                    // Symbolic sizes are graph values (Note [symbolic sizes]): `x.size()`.
                    return self.og.call(py, None, Some("size"), &[obj.clone()], &[]);
                }
                if self.og.shape_env.is_some() && crate::symbolic::variables::is_sym(&v) {
                    let getattr = self.og.handles.getattr.clone_ref(py);
                    return self.og.call(py, Some(getattr.bind(py)), None, &[obj.clone(), VT::constant(PyString::new(py, name).into_any().unbind())], &[]);
                }
                Ok(VT::constant(v.unbind()))
            }
            VT::Constant(c) => {
                let v = c.bind(py).getattr(name)?;
                Ok(VT::constant(v.unbind()))
            }
            VT::PyModule { obj: m, source } => {
                let v = m.bind(py).getattr(name)?;
                let trusted = m.bind(py).getattr("__name__").ok().and_then(|n| n.extract::<String>().ok()).map(|n| n == "torch" || n.starts_with("torch.") || n == "math" || n == "operator").unwrap_or(false);
                let src = if trusted { None } else { source.as_ref().map(|s| s.attr(name)) };
                if src.is_none() && !trusted {
                    unsupported!("attribute of a module without a source");
                }
                self.wrap_from(py, &v, src)
            }
            VT::Class(c) => {
                if let Some(v) = self.og.side_effects.attr(c, name) {
                    return Ok(v);
                }
                let v = c.bind(py).getattr(name)?;
                // A user class reached from the frame: its attributes can change, so they are
                // read through its source and guarded (torch's own classes are trusted).
                let module = c.bind(py).getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
                let trusted = module == "torch" || module.starts_with("torch.") || module == "builtins";
                match self.og.class_sources.get(&(c.as_ptr() as usize)).cloned() {
                    Some(src) if !trusted => wrap(py, self.og, &v, src.attr(name)),
                    _ => self.wrap_unguarded(py, &v),
                }
            }
            VT::List(_) | VT::Dict(_) | VT::Set(_) => Ok(VT::ContainerMethod { container: Box::new(obj.clone()), name: name.to_string() }),
            // `torch.Size.numel` of a symbolic size: the product of its items, a graph value.
            VT::NamedTuple { .. } if name == "numel" && is_symbolic_size(py, self.og, obj) => {
                Ok(VT::ContainerMethod { container: Box::new(obj.clone()), name: name.to_string() })
            }
            // Other methods of a symbolic `torch.Size` (`count`, `index`) see its values.
            VT::NamedTuple { items, .. } if is_symbolic_size(py, self.og, obj) => {
                let vals = items.iter().map(|i| i.as_constant(py).ok_or_else(|| Unsupported::new("torch.Size item without a value"))).collect::<VResult<Vec<_>>>()?;
                let size = self.og.handles.size_type.bind(py).call1((PyTuple::new(py, vals)?,))?;
                Ok(VT::constant(size.getattr(name)?.unbind()))
            }
            VT::NamedTuple { cls, items } => match crate::symbolic::variables::named_tuple_field(cls.bind(py), name)? {
                Some(i) if i < items.len() => Ok(items[i].clone()),
                _ => unsupported!("attribute '{name}' of {}", obj.describe(py)),
            },
            // Immutable facts of a function whose identity is guarded (its code object included:
            // `__code__` can be reassigned, but then the ID_MATCH'd function was too).
            VT::Function { obj: f, .. } if matches!(name, "__name__" | "__qualname__" | "__module__" | "__code__" | "__doc__") => Ok(VT::constant(f.bind(py).getattr(name)?.unbind())),
            // A function's class is `types.FunctionType` for good (`__class__` assignment is
            // refused for it: Objects/typeobject.c, `object_set_class`).
            VT::Function { obj: f, .. } if name == "__class__" => Ok(VT::Class(Rc::new(f.bind(py).get_type().into_any().unbind()))),
            VT::Opaque { obj: o, source } => {
                let o = o.bind(py).clone();
                self.user_getattr(py, obj, &o, source, name)
            }
            VT::Super { cls, obj: inner } => {
                let cls = cls.bind(py).clone();
                self.super_getattr(py, &cls, inner, name)
            }
            VT::UserObject(o) => {
                let o = o.clone();
                self.user_object_getattr(py, obj, &o, name)
            }
            // A bound method's two halves (Objects/classobject.c, `method_memberlist`).
            VT::Method { func, .. } if name == "__func__" => Ok((**func).clone()),
            VT::Method { self_, .. } if name == "__self__" => Ok((**self_).clone()),
            VT::Partial(p) => match name {
                "func" => Ok(p.func.clone()),
                "args" => make_tuple(py, p.args.clone()),
                "keywords" => Ok(p.keywords.clone()),
                _ => graph_break!(UntracedValue, "attribute '{name}' of {}", obj.describe(py)),
            },
            other => unsupported!("attribute '{name}' of {}", other.describe(py)),
        }
    }

    /// `obj.name` on a user object reached through `source`: a pending write of this trace, else
    /// the class's own `__getattribute__` when it is a Python function (inlined, e.g.
    /// transformers' `PretrainedConfig` alias map), else `generic_getattr`.
    fn user_getattr(&mut self, py: Python<'_>, vt: &VT, obj: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&obj.clone().unbind(), name) {
            return Ok(v);
        }
        let ty = obj.get_type();
        if !has_generic_getattribute(py, &ty)? {
            if let Some(v) = self.call_attr_hook(py, vt, &ty, source, "__getattribute__", name)? {
                return Ok(v);
            }
            graph_break!(UntracedValue, "attribute '{name}' of {} (custom __getattribute__)", vt.describe(py));
        }
        self.generic_getattr(py, vt, obj, source, name)
    }

    /// Whether `obj.name` raises AttributeError, decided without running user code where the
    /// lookup is generic: no pending write, not in the instance dict (or a module's parameters,
    /// buffers and submodules), not on the class, no Python `__getattr__`. For a class with its
    /// own `__getattribute__` the real `hasattr` must agree too. When absent, a NO_INSTANCE_ATTR
    /// guard keeps it so (the class is already type- or identity-guarded).
    fn attr_absent(&mut self, py: Python<'_>, v: &VT, name: &str) -> VResult<bool> {
        let (obj, source) = match v {
            VT::Opaque { obj, source } => (obj.bind(py).clone(), source.clone()),
            VT::Module { obj, source: Some(source) } => (obj.bind(py).clone(), source.clone()),
            _ => return Ok(false),
        };
        if self.og.side_effects.attr(&obj.clone().unbind(), name).is_some() || self.tracked_instance_dict(&obj).is_some() {
            return Ok(false);
        }
        let ty = obj.get_type();
        if static_type_lookup(&ty, name)?.is_some() {
            return Ok(false);
        }
        let is_module = matches!(v, VT::Module { .. });
        let module_getattr = self.og.handles.module_type.bind(py).getattr("__getattr__")?;
        match static_type_lookup(&ty, "__getattr__")? {
            Some((_, f)) if !(is_module && f.is(&module_getattr)) => return Ok(false),
            _ => {}
        }
        if !has_generic_getattribute(py, &ty)? {
            // Deciding would run the user's __getattribute__ (at trace and at guard time).
            return Ok(false);
        }
        let d = crate::guards::generic_getattr(&obj, "__dict__");
        let in_dict = |t: Option<Bound<'_, PyAny>>| t.and_then(|t| t.contains(name).ok()).unwrap_or(true);
        if in_dict(d.clone()) {
            return Ok(false);
        }
        if is_module {
            let tables = ["_parameters", "_buffers", "_modules"];
            if tables.iter().any(|t| in_dict(d.as_ref().and_then(|d| d.get_item(t).ok()))) {
                return Ok(false);
            }
        }
        self.og.add_guard(Some(source), GuardKind::NoAttr(name.to_string()));
        Ok(true)
    }

    /// `hook(obj, name)` inlined, where `hook` (`__getattribute__` or `__getattr__`) is a Python
    /// function on `ty`; `None` when the type has no such Python function.
    fn call_attr_hook(&mut self, py: Python<'_>, vt: &VT, ty: &Bound<'_, pyo3::types::PyType>, source: &Arc<Source>, hook: &str, name: &str) -> VResult<Option<VT>> {
        match static_type_lookup(ty, hook)? {
            Some((k, f)) if type_name(&f) == "function" => {
                let func = wrap(py, self.og, &f, class_attr_source(source, k, hook))?;
                let key = VT::constant(PyString::new(py, name).into_any().unbind());
                self.call(py, &func, vec![vt.clone(), key], vec![]).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// `object.__getattribute__(obj, name)` (Objects/object.c, `_PyObject_GenericGetAttrWithDict`):
    /// a data descriptor on the type (a Python `property` is inlined), then the instance
    /// `__dict__`, then the type's attribute (functions bind `self`, classmethods the class),
    /// then a Python `__getattr__` (inlined). Class attributes are sourced as
    /// `type(obj).__mro__[k].__dict__[name]`. Anything else is a graph break.
    fn generic_getattr(&mut self, py: Python<'_>, vt: &VT, obj: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&obj.clone().unbind(), name) {
            return Ok(v);
        }
        // Note [logger calls]: a logging method of a `logging.Logger` (transformers'
        // `logger.warning_once` in `PreTrainedModel.loss_function` among them) is not traced:
        // its call is replayed after the graph, so the log comes out as in eager and the graph
        // does not break. The lookup happens again at replay (guarded: the logger's type).
        if LOGGER_METHODS.contains(&name) && matches!(vt, VT::Opaque { .. }) && obj.is_instance(&py.import("logging")?.getattr("Logger")?)? {
            self.og.add_guard(Some(source.clone()), GuardKind::TypeMatch(obj.get_type().into_any().unbind()));
            return Ok(VT::LoggerMethod { logger: Box::new(vt.clone()), name: name.to_string() });
        }
        let ty = obj.get_type();
        for base in ty.getattr("__mro__")?.try_iter()? {
            if self.og.side_effects.attr(&base?.unbind(), name).is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} after a write to its class", vt.describe(py));
            }
        }
        let class_attr = static_type_lookup(&ty, name)?;
        if name == "__dict__" && crate::guards::generic_getattr(obj, "__dict__").map(|d| d.is_exact_instance_of::<PyDict>()).unwrap_or(false) {
            // The instance dict as a dict tracker (its writes replay as dict mutations); pending
            // attribute writes would be invisible through it.
            if self.og.side_effects.attrs.iter().any(|w| w.ptr == obj.as_ptr() as usize) {
                graph_break!(UntracedValue, "__dict__ of {} after an attribute write", vt.describe(py));
            }
            let src = if has_generic_getattribute(py, &ty)? { source.attr("__dict__") } else { source.generic_attr("__dict__") };
            let d = crate::guards::generic_getattr(obj, "__dict__").expect("checked above");
            return wrap(py, self.og, &d, src);
        }
        let tracked = self.tracked_instance_dict(obj);
        if let Some((k, ca)) = &class_attr {
            if is_data_descriptor(ca)? {
                if type_name(ca) == "property" {
                    let fget = ca.getattr("fget")?;
                    if type_name(&fget) == "function" {
                        let func = wrap(py, self.og, &fget, class_attr_source(source, *k, name).attr("fget"))?;
                        return self.call(py, &func, vec![vt.clone()], vec![]);
                    }
                }
                if type_name(ca) == "member_descriptor" {
                    // A `__slots__` entry (Objects/descrobject.c, `member_get`): the value
                    // stored in the instance's slot, reached as `obj.name` (a dataclass
                    // `Field`'s `name`, `type`, `_field_type`). An empty slot raises.
                    let src = if has_generic_getattribute(py, &ty)? { source.attr(name) } else { source.generic_attr(name) };
                    return match ca.call_method1("__get__", (obj, &ty)) {
                        Ok(v) => wrap(py, self.og, &v, src),
                        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) && has_generic_getattribute(py, &ty)? => {
                            self.og.add_guard(Some(source.clone()), GuardKind::NoAttr(name.to_string()));
                            Err(Unsupported::raise("AttributeError", format!("'{}' object has no attribute '{name}'", type_name(obj))))
                        }
                        Err(e) => Err(e.into()),
                    };
                }
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca));
            }
        }
        if let Some(d) = &tracked {
            // `obj.__dict__` is a tracker of this trace: it holds the current instance attributes.
            let found = d.borrow().items.iter().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)).map(|(_, v)| v.clone());
            if let Some(v) = found {
                return Ok(v);
            }
        } else {
            let in_instance = crate::guards::generic_getattr(obj, "__dict__").and_then(|d| d.cast::<PyDict>().ok().and_then(|d| d.get_item(name).ok().flatten()));
            if let Some(v) = in_instance {
                let src = if has_generic_getattribute(py, &ty)? { source.attr(name) } else { source.generic_attr(name) };
                return wrap(py, self.og, &v, src);
            }
        }
        let Some((k, ca)) = class_attr else {
            if let Some(v) = self.call_attr_hook(py, vt, &ty, source, "__getattr__", name)? {
                return Ok(v);
            }
            if static_type_lookup(&ty, "__getattr__")?.is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} (computed by __getattr__)", vt.describe(py));
            }
            // Not on the instance (its dict is this trace's tracker, or the real one lacks the
            // name, guarded so), nor on the class (type-guarded), and no `__getattr__`: the
            // lookup raises, as `_PyObject_GenericGetAttrWithDict` does.
            if tracked.is_none() {
                self.og.add_guard(Some(source.clone()), GuardKind::NoInstanceAttr(name.to_string()));
            }
            return Err(Unsupported::raise("AttributeError", format!("'{}' object has no attribute '{name}'", type_name(obj))));
        };
        // The instance may gain an attribute of that name later: guard that it has none.
        self.og.add_guard(Some(source.clone()), GuardKind::NoInstanceAttr(name.to_string()));
        self.bind_class_attr(py, vt, &ty, source, k, &ca, name)
    }

    /// The dict tracker of `obj.__dict__`, if this trace read the instance dict (attribute reads
    /// and writes then go through it).
    fn tracked_instance_dict(&self, obj: &Bound<'_, PyAny>) -> Option<Rc<RefCell<DictState>>> {
        let d = crate::guards::generic_getattr(obj, "__dict__")?;
        self.og.dicts_by_ptr.get(&(d.as_ptr() as usize)).map(|(_, st)| st.clone())
    }

    /// The value of class attribute `ca` (found at `type(obj).__mro__[k]`) looked up through an
    /// instance `vt`: functions bind it, classmethods bind the class, staticmethods unwrap.
    #[allow(clippy::too_many_arguments)]
    fn bind_class_attr(&mut self, py: Python<'_>, vt: &VT, ty: &Bound<'_, pyo3::types::PyType>, source: &Arc<Source>, k: usize, ca: &Bound<'_, PyAny>, name: &str) -> VResult<VT> {
        let ca_src = class_attr_source(source, k, name);
        match type_name(ca).as_str() {
            "function" => {
                let func = wrap(py, self.og, ca, ca_src)?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(vt.clone()) })
            }
            "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, ca_src.attr("__func__")),
            "classmethod" => {
                let func = wrap(py, self.og, &ca.getattr("__func__")?, ca_src.attr("__func__"))?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(ty.clone().into_any().unbind()))) })
            }
            // `o.__setattr__` / `o.__getattribute__` inherited from `object`: the generic
            // attribute protocol bound to `o` (`o.__setattr__(n, v)` is `o.n = v`).
            "wrapper_descriptor" if matches!(vt, VT::Opaque { .. }) && (ca.is(py.get_type::<PyAny>().getattr("__setattr__")?) || ca.is(py.get_type::<PyAny>().getattr("__getattribute__")?)) => {
                Ok(VT::GenericAttr { obj: Box::new(vt.clone()), set: name == "__setattr__" })
            }
            // `d.get(k)` on a dict subclass that does not override `get`: dict's method on the
            // instance's storage (see `dict_storage_method`).
            "method_descriptor" if matches!(vt, VT::Opaque { .. }) => {
                let VT::Opaque { obj, .. } = vt else { unreachable!() };
                let o = obj.bind(py).clone();
                match self.dict_storage_method(py, &o, source, ca, name)? {
                    Some(m) => Ok(m),
                    None => graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca)),
                }
            }
            // Other descriptors (C methods, cached_property, partialmethod...) bind in ways not
            // modelled: the read runs in Python.
            _ if ca.get_type().hasattr("__get__")? && !ca.is_instance_of::<pyo3::types::PyType>() => {
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca))
            }
            _ => wrap(py, self.og, ca, ca_src),
        }
    }

    /// A read-only method of `dict` (`ca`, found on the MRO of a dict subclass instance `o`
    /// reached through `source`: `super().get(k)` in a subclass that overrides `get`) bound to
    /// the instance's dict storage, as torch's `UserDefinedDictVariable` reads its `_dict_vt`.
    /// The storage is wrapped item by item with guards that read it through the subclass, so
    /// its `keys`, `__len__` and `__getitem__` must be dict's own. Writing methods are not
    /// offered (they would have to replay past the subclass's own `__setitem__`): `None`.
    fn dict_storage_method(&mut self, py: Python<'_>, o: &Bound<'_, PyAny>, source: &Arc<Source>, ca: &Bound<'_, PyAny>, name: &str) -> VResult<Option<VT>> {
        const READS: [&str; 8] = ["get", "__getitem__", "__contains__", "keys", "values", "items", "__len__", "copy"];
        let dict_type = py.get_type::<PyDict>();
        if !READS.contains(&name) || !ca.getattr("__objclass__").map(|c| c.is(&dict_type)).unwrap_or(false) {
            return Ok(None);
        }
        let Ok(d) = o.cast::<PyDict>() else { return Ok(None) };
        let ty = o.get_type();
        for slot in ["keys", "__len__", "__getitem__"] {
            let own = static_type_lookup(&ty, slot)?.map(|(_, f)| f.is(dict_type.getattr(slot).expect("dict slot"))).unwrap_or(false);
            if !own {
                return Ok(None);
            }
        }
        let state = crate::symbolic::builder::wrap_dict_storage(py, self.og, d, source, false)?;
        Ok(Some(VT::ContainerMethod { container: Box::new(VT::Dict(state)), name: name.to_string() }))
    }

    /// Whether `c` is one of torch's own `nn.Module` classes (`torch.nn.modules.*`).
    fn is_torch_nn_class(&mut self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        let Ok(t) = c.cast::<pyo3::types::PyType>() else { return Ok(false) };
        Ok(module.starts_with("torch.nn.modules.") && t.is_subclass(self.og.handles.module_type.bind(py))?)
    }

    /// `cls(*args, **kwargs)` for a torch `nn.Module` class with literal arguments that makes a
    /// module without parameters, tensor buffers or children (a loss, an activation,
    /// `Dropout(p)`): built for real now, under `torch.random.fork_rng` so that the construction
    /// leaves the random state as it found it, and used as a module without a source (a
    /// `DerivedModule` that a rebuild makes again from the same arguments). Anything else is
    /// left to Python (a graph break), before any construction.
    fn construct_module(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        let qual = crate::symbolic::variables::qualname(cls);
        let Some(vals) = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>() else {
            graph_break!(UnsupportedCall, "constructing {qual} with non-literal arguments");
        };
        let kw = PyDict::new(py);
        for (k, v) in kwargs {
            match self.literal_value(py, v) {
                Some(v) => kw.set_item(k, v)?,
                None => graph_break!(UnsupportedCall, "constructing {qual} with a non-literal argument '{k}'"),
            }
        }
        let vals = PyTuple::new(py, vals)?;
        let fork = py.import("torch.random")?.getattr("fork_rng")?;
        let fork_kw = PyDict::new(py);
        fork_kw.set_item("devices", PyList::empty(py))?;
        let ctx = fork.call((), Some(&fork_kw))?;
        ctx.call_method0("__enter__")?;
        let made = cls.call(&vals, Some(&kw));
        ctx.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        let m = made?;
        let empty = |what: &str| -> PyResult<bool> { Ok(m.call_method0(what)?.try_iter()?.next().is_none()) };
        if !(empty("parameters")? && empty("buffers")? && empty("children")?) {
            graph_break!(UnsupportedCall, "constructing {qual}, which has parameters, buffers or submodules");
        }
        let partial = crate::symbolic::partial::partial_type(py)?;
        let mut all = vec![cls.clone()];
        all.extend(vals.iter());
        let remake = partial.call(PyTuple::new(py, all)?, Some(&kw))?;
        self.og.derived_modules.insert(m.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: m.clone().unbind(), children: vec![], remake: Some(remake.unbind()) });
        Ok(VT::Module { obj: Rc::new(m.unbind()), source: None })
    }

    /// `m[a:b]` on a `ModuleList` or `Sequential` (their own `__getitem__`): the container their
    /// `__getitem__` makes (`self.__class__(...)` over the selected children, built for real:
    /// the constructor only registers the children), as a module without a source whose
    /// children are read through their sources in `m` (`OutputGraph::derived_modules`). The
    /// children are identity-guarded as they are read, so a call that slices afresh reuses the
    /// compiled code (the new container itself is never guarded).
    fn module_slice(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>, idx: &Bound<'_, PyAny>) -> VResult<VT> {
        let nn = py.import("torch.nn")?;
        let own = ["ModuleList", "Sequential"].iter().any(|c| {
            let f = nn.getattr(*c).and_then(|c| c.getattr("__getitem__"));
            f.map(|f| m.get_type().getattr("__getitem__").map(|g| g.is(&f)).unwrap_or(false)).unwrap_or(false)
        });
        if !own {
            unsupported!("slicing {}", type_name(m));
        }
        let sub = m.get_item(idx)?;
        let parent = m.getattr("_modules")?;
        let parent_keys: Vec<String> = parent.call_method0("keys")?.try_iter()?.map(|k| k?.extract::<String>()).collect::<PyResult<_>>()?;
        let mut children = Vec::new();
        for item in sub.getattr("_modules")?.call_method0("items")?.try_iter()? {
            let (k, c): (String, Bound<'_, PyAny>) = item?.extract()?;
            let Some(pk) = parent_keys.iter().find(|pk| parent.get_item(pk.as_str()).map(|p| p.is(&c)).unwrap_or(false)) else {
                unsupported!("a slice of {} holds a module that is not its child", type_name(m));
            };
            let Some(src) = self.module_child_source(py, m, source, pk) else {
                unsupported!("slicing a module without a source");
            };
            children.push((k, src));
        }
        self.og.derived_modules.insert(sub.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: sub.clone().unbind(), children, remake: None });
        Ok(VT::Module { obj: Rc::new(sub.unbind()), source: None })
    }

    /// The source of child `key` of module `m`: `source.key`, or for a container made during
    /// tracing (`module_slice`) the child's source in the container it was sliced from.
    fn module_child_source(&self, _py: Python<'_>, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>, key: &str) -> Option<Arc<Source>> {
        match source {
            Some(s) => Some(s.attr(key)),
            None => self.og.derived_modules.get(&(m.as_ptr() as usize)).and_then(|d| d.children.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())),
        }
    }

    /// `super(cls, obj).name`: the first class after `cls` in `type(obj).__mro__` that defines
    /// `name` (Objects/typeobject.c, `super_getattro`).
    fn super_getattr(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, inner: &VT, name: &str) -> VResult<VT> {
        if let VT::UserObject(uo) = inner {
            // The same walk over the new object's class; its attributes are sourced through
            // the class (`cls.__mro__[k].__dict__[name]`).
            let ty = uo.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
            let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
            let Some(start) = mro.iter().position(|c| c.is(cls)) else {
                unsupported!("super(): {} is not in the MRO of {}", crate::symbolic::variables::qualname(cls), inner.describe(py));
            };
            let object_type = py.get_type::<PyAny>();
            for k in start + 1..mro.len() {
                let d = mro.get_item(k)?.getattr("__dict__")?;
                if !d.contains(name)? {
                    continue;
                }
                let ca = d.get_item(name)?;
                let src = uo.class_attr_source(k, name);
                for (slot, set) in [("__getattribute__", false), ("__setattr__", true)] {
                    if ca.is(object_type.getattr(slot)?) {
                        return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set });
                    }
                }
                let builtin_init = ca.is(object_type.getattr("__init__")?)
                    || (name == "__init__" && uo.storage.is_some() && ca.getattr("__objclass__").map(|c| crate::symbolic::user_objects::dict_base_type(py, &c).unwrap_or(false)).unwrap_or(false));
                if builtin_init {
                    // `super().__init__()` reaching `object.__init__` (or the dict base's, with
                    // no arguments): nothing to do (`call_unbound_descriptor`).
                    return Ok(VT::Method { func: Box::new(VT::Builtin(Rc::new(ca.unbind()))), self_: Box::new(inner.clone()) });
                }
                if let Some(storage) = uo.storage_method(py, &ca, name)? {
                    // `super().__setitem__(k, v)` in a dict subclass: the storage's own method.
                    return Ok(VT::ContainerMethod { container: Box::new(storage), name: name.to_string() });
                }
                return match type_name(&ca).as_str() {
                    "function" => Ok(VT::Method { func: Box::new(wrap(py, self.og, &ca, src)?), self_: Box::new(inner.clone()) }),
                    "property" => {
                        let fget = wrap(py, self.og, &ca.getattr("fget")?, src.attr("fget"))?;
                        self.call(py, &fget, vec![inner.clone()], vec![])
                    }
                    "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__")),
                    "classmethod" => Ok(VT::Method { func: Box::new(wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__"))?), self_: Box::new(VT::Class(Rc::new(uo.cls.clone_ref(py)))) }),
                    other => unsupported!("super().{name} is a {other}"),
                };
            }
            unsupported!("super().{name} not found")
        }
        let (o, source) = match inner {
            VT::Opaque { obj, source } => (obj.bind(py).clone(), source.clone()),
            VT::Module { obj, source: Some(source) } => (obj.bind(py).clone(), source.clone()),
            other => unsupported!("super() over {}", other.describe(py)),
        };
        let ty = o.get_type();
        let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
        let Some(start) = mro.iter().position(|c| c.is(cls)) else {
            unsupported!("super(): {} is not in the MRO of {}", crate::symbolic::variables::qualname(cls), type_name(&o));
        };
        let object_type = py.get_type::<pyo3::types::PyAny>();
        for k in start + 1..mro.len() {
            let d = mro.get_item(k)?.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            if ca.is(object_type.getattr("__getattribute__")?) {
                return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set: false });
            }
            if ca.is(object_type.getattr("__setattr__")?) {
                return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set: true });
            }
            if type_name(&ca) == "property" {
                let fget = ca.getattr("fget")?;
                let func = wrap(py, self.og, &fget, class_attr_source(&source, k, name).attr("fget"))?;
                return self.call(py, &func, vec![inner.clone()], vec![]);
            }
            if matches!(type_name(&ca).as_str(), "function" | "staticmethod" | "classmethod") {
                return self.bind_class_attr(py, inner, &ty, &source, k, &ca, name);
            }
            if let Some(m) = self.dict_storage_method(py, &o, &source, &ca, name)? {
                return Ok(m);
            }
            unsupported!("super().{name} is a {}", type_name(&ca));
        }
        unsupported!("super().{name} not found")
    }

    /// `obj.name = v`: recorded as a side effect on user objects and modules from the frame
    /// whose class stores attributes plainly (no custom `__setattr__`, no data descriptor);
    /// anything else is a graph break.
    fn store_attr(&mut self, py: Python<'_>, obj: &VT, name: &str, v: VT) -> VResult<()> {
        match obj {
            VT::UserObject(o) => {
                let o = o.clone();
                self.user_object_setattr(py, obj, &o, name, v, false)
            }
            VT::Opaque { obj: o, source } => {
                let o = o.bind(py);
                let ty = o.get_type();
                let object_type = py.get_type::<pyo3::types::PyAny>();
                let plain = ty.getattr("__setattr__")?.is(object_type.getattr("__setattr__")?) && crate::guards::generic_getattr(&o, "__dict__").is_some();
                let descriptor = match static_type_lookup(&ty, name)? {
                    Some((_, ca)) => is_data_descriptor(&ca)?,
                    None => false,
                };
                if !plain || descriptor {
                    graph_break!(SideEffect, "attribute write {}.{name} (custom __setattr__ or a descriptor)", obj.describe(py));
                }
                self.record_attr_write(py, o, source, name, v, false)
            }
            VT::Module { obj: o, source: Some(source) } => {
                let m = o.bind(py);
                let ty = m.get_type();
                let module_setattr = self.og.handles.module_type.bind(py).getattr("__setattr__")?;
                let registered = ["_parameters", "_buffers", "_modules"].iter().any(|t| {
                    m.getattr("__dict__").and_then(|d| d.get_item(t)).and_then(|t| t.contains(name)).unwrap_or(true)
                });
                let descriptor = match static_type_lookup(&ty, name)? {
                    Some((_, ca)) => is_data_descriptor(&ca)?,
                    None => false,
                };
                if !ty.getattr("__setattr__")?.is(&module_setattr) || registered || descriptor || matches!(v, VT::Tensor(_) | VT::Module { .. }) {
                    graph_break!(SideEffect, "attribute write {}.{name} (a parameter, buffer, submodule or tensor)", obj.describe(py));
                }
                self.og.side_effects.store_attr(py, o, source.clone(), name, v);
                Ok(())
            }
            VT::Class(c) => {
                // `C.name = v` on a plain class (metaclass `type`) reached from the frame.
                let cls = c.bind(py);
                let src = self.og.class_sources.get(&(c.as_ptr() as usize)).cloned();
                match src {
                    Some(src) if cls.get_type().is(py.get_type::<pyo3::types::PyType>()) => {
                        self.og.side_effects.store_attr(py, c, src, name, v);
                        Ok(())
                    }
                    _ => graph_break!(SideEffect, "attribute write {}.{name}", obj.describe(py)),
                }
            }
            _ => graph_break!(SideEffect, "attribute write {}.{name}", obj.describe(py)),
        }
    }

    /// `IMPORT_NAME`: traced only when the module is already in `sys.modules` (then `import`
    /// has no effect but the lookup, Python/import.c `PyImport_ImportModuleLevelObject`); the
    /// top-level package for a plain `import a.b`, the module itself with a fromlist. Relative
    /// imports resolve against the frame's `__package__`/`__name__` as importlib does.
    fn import_name(&mut self, py: Python<'_>, name: &str, level: &VT, fromlist: &VT) -> VResult<VT> {
        let level: i64 = level.as_constant(py).ok_or_else(|| Unsupported::new("import level"))?.extract()?;
        let fromlist = fromlist.as_constant(py).ok_or_else(|| Unsupported::new("import fromlist"))?;
        let full = if level == 0 {
            name.to_string()
        } else {
            let globals = self.g.globals.bind(py);
            let package = match globals.get_item("__package__")? {
                Some(p) if !p.is_none() => p,
                _ => match globals.get_item("__name__")? {
                    Some(n) => n,
                    None => unsupported!("relative import without __package__"),
                },
            };
            let rel = format!("{}{}", ".".repeat(level as usize), name);
            match py.import("importlib.util")?.call_method1("resolve_name", (rel, package)) {
                Ok(r) => r.extract()?,
                Err(_) => unsupported!("relative import of {name} does not resolve"),
            }
        };
        let want_top = fromlist.is_none() || !fromlist.is_truthy()?;
        let target = if want_top && level == 0 { full.split('.').next().unwrap_or(&full).to_string() } else { full.clone() };
        let modules = py.import("sys")?.getattr("modules")?;
        if !modules.contains(&full)? || !modules.contains(&target)? {
            graph_break!(UnsupportedOpcode, "import of {full} (not loaded yet: importing runs its code)");
        }
        let m = modules.get_item(&target)?;
        let trusted = target == "torch" || target.starts_with("torch.") || target == "math" || target == "operator";
        let source = if trusted { None } else { Some(Arc::new(Source::Module { name: target })) };
        Ok(VT::PyModule { obj: Rc::new(m.unbind()), source })
    }

    /// A torch query about the runtime environment (`torch.cuda.is_available()`,
    /// `torch.backends.mps.is_built()`, `torch.cuda.is_current_stream_capturing()`, ...) with
    /// constant arguments: run for real and folded when it returns a literal. A query that
    /// raises is a graph break, so the user sees the error from their own line.
    fn environment_query(&mut self, py: Python<'_>, f: &Bound<'_, PyAny>, name: &str, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let module_ok = ["torch.cuda.", "torch.backends.", "torch.xpu.", "torch.mps.", "torch.distributed.", "torch.jit.", "torch.version."].iter().any(|m| name.starts_with(m));
        let last = name.rsplit('.').next().unwrap_or("");
        if !module_ok || !(last.starts_with("is_") || last.starts_with("get_") || last.starts_with("has_") || last == "device_count") {
            return Ok(None);
        }
        let Some(vals) = constants_of(py, args) else { return Ok(None) };
        let kw = PyDict::new(py);
        for (k, v) in kwargs {
            match v.as_constant(py) {
                Some(c) => kw.set_item(k, c)?,
                None => return Ok(None),
            }
        }
        match f.call(PyTuple::new(py, vals)?, Some(&kw)) {
            Ok(r) if is_literal(py, &r) => Ok(Some(VT::constant(r.unbind()))),
            Ok(_) => Ok(None),
            Err(e) => graph_break!(UnsupportedCall, "call to {name} raised {e}"),
        }
    }

    /// `super()` (zero arguments: the `__class__` cell and the first argument, as
    /// Objects/typeobject.c `super_init_without_args` finds them) or `super(cls, obj)`.
    fn make_super(&mut self, args: &[VT]) -> VResult<VT> {
        let unwrap_cell = |v: Option<VT>| match v {
            Some(VT::Cell(c)) => c.borrow().clone(),
            other => other,
        };
        let (cls, obj) = match args.len() {
            0 => {
                let Some(slot) = self.code.localsplus.iter().position(|n| n == "__class__") else {
                    unsupported!("super() without a __class__ cell");
                };
                (unwrap_cell(self.locals[slot].clone()), unwrap_cell(self.locals.first().cloned().flatten()))
            }
            2 => (Some(args[0].clone()), Some(args[1].clone())),
            n => unsupported!("super() with {n} arguments"),
        };
        match (cls, obj) {
            (Some(VT::Class(c)), Some(obj)) => Ok(VT::Super { cls: c, obj: Box::new(obj) }),
            _ => unsupported!("super() arguments are not a class and an object"),
        }
    }

    /// Records `obj.name = v` on a user object: through the tracker of its instance dict when
    /// the trace read `obj.__dict__` (so both views agree), else as a pending attribute write
    /// (`generic`: replayed through `object.__setattr__`).
    fn record_attr_write(&mut self, py: Python<'_>, o: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str, v: VT, generic: bool) -> VResult<()> {
        if let Some(d) = self.tracked_instance_dict(o) {
            dict_set(py, &mut d.borrow_mut(), PyString::new(py, name).into_any().unbind(), v)?;
            self.og.side_effects.mutate_dict(&d);
            return Ok(());
        }
        let obj = o.clone().unbind();
        self.og.side_effects.store_attr(py, &obj, source.clone(), name, v);
        if generic {
            self.og.side_effects.mark_generic(&obj, name);
        }
        Ok(())
    }

    /// `del obj[idx]` on a list or dict tracker (recorded as a side effect for one from the frame).
    fn delitem(&mut self, py: Python<'_>, obj: &VT, idx: VT) -> VResult<()> {
        if let VT::UserObject(o) = obj {
            // `type(o).__delitem__(o, k)`, as `setitem`.
            if let Some(m) = self.python_dunder(py, obj, "__delitem__")? {
                return self.call(py, &m, vec![idx], vec![]).map(|_| ());
            }
            return match o.storage_slot(py, "__delitem__")? {
                Some(storage) => self.delitem(py, &storage, idx),
                None => unsupported!("del on {}", obj.describe(py)),
            };
        }
        let k = idx.as_constant(py).ok_or_else(|| Unsupported::new("del with a non-constant index"))?;
        match obj {
            VT::List(l) => {
                let k: i64 = k.extract().map_err(|_| Unsupported::new("del of a list slice"))?;
                let mut st = l.borrow_mut();
                let n = st.items.len() as i64;
                let k = if k < 0 { k + n } else { k };
                if k < 0 || k >= n {
                    unsupported!("list assignment index out of range (IndexError)");
                }
                st.items.remove(k as usize);
                if st.source.is_some() {
                    drop(st);
                    self.og.side_effects.mutate_list(l);
                }
                Ok(())
            }
            VT::Dict(d) => {
                let mut st = d.borrow_mut();
                let Some(pos) = st.items.iter().position(|(kk, _)| kk.bind(py).eq(&k).unwrap_or(false)) else {
                    unsupported!("del of a missing dict key (KeyError)");
                };
                st.items.remove(pos);
                st.version += 1;
                if st.source.is_some() {
                    drop(st);
                    self.og.side_effects.mutate_dict(d);
                }
                Ok(())
            }
            _ => unsupported!("del on {}", obj.describe(py)),
        }
    }

    /// `nn.Module.__getattr__` order: `_parameters`, `_buffers`, `_modules`, then the instance
    /// dict and the class (torch/nn/modules/module.py).
    fn module_getattr(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, source: Option<Arc<Source>>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&m.clone().unbind(), name) {
            return Ok(v);
        }
        let src = source.as_ref().map(|s| s.attr(name));
        let d = m.getattr("__dict__")?;
        for table in ["_parameters", "_buffers", "_modules"] {
            if let Some(t) = d.get_item(table).ok() {
                if let Ok(Some(v)) = t.cast::<PyDict>().map(|t| t.get_item(name)).unwrap_or(Ok(None)) {
                    return match (src, table) {
                        (Some(s), _) => wrap(py, self.og, &v, s),
                        (None, "_modules") => match self.module_child_source(py, m, &source, name) {
                            Some(s) => wrap(py, self.og, &v, s),
                            None => unsupported!("module attribute without a source"),
                        },
                        (None, _) if self.og.derived_modules.contains_key(&(m.as_ptr() as usize)) => self.wrap_unguarded(py, &v),
                        (None, _) => unsupported!("module attribute without a source"),
                    };
                }
            }
        }
        let cls = m.get_type();
        let in_instance = d.cast::<PyDict>().ok().and_then(|d| d.get_item(name).ok().flatten());
        if in_instance.is_none() {
            // The raw class attribute decides the binding (`type(m).__mro__[k].__dict__[name]`):
            // a staticmethod gives its function unbound, a classmethod binds the class
            // (Objects/funcobject.c, `sm_descr_get` / `cm_descr_get`). Reading it through
            // `getattr(cls, name)` would make a staticmethod look like a plain function.
            if let Some((_, raw)) = static_type_lookup(&cls, name)? {
                match type_name(&raw).as_str() {
                    "staticmethod" => {
                        let f = raw.getattr("__func__")?;
                        return Ok(VT::Function { obj: Rc::new(f.unbind()), source: src });
                    }
                    "classmethod" => {
                        let f = raw.getattr("__func__")?;
                        let func = VT::Function { obj: Rc::new(f.unbind()), source: src.as_ref().map(|s| s.attr("__func__")) };
                        return Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(cls.clone().into_any().unbind()))) });
                    }
                    _ => {}
                }
            }
            if let Ok(class_attr) = cls.getattr(name) {
                if type_name(&class_attr) == "function" {
                    let func_src = src.as_ref().map(|s| s.attr("__func__"));
                    let func = VT::Function { obj: Rc::new(class_attr.unbind()), source: func_src };
                    let self_vt = VT::Module { obj: Rc::new(m.clone().unbind()), source };
                    return Ok(VT::Method { func: Box::new(func), self_: Box::new(self_vt) });
                }
                if type_name(&class_attr) == "property" {
                    let fget = class_attr.getattr("fget")?;
                    // Sourced as `type(m).__mro__[k].__dict__[name].fget` when the module is, so
                    // that a getter from another module's globals (transformers'
                    // `PreTrainedModel.loss_function`) reads them through `fget.__globals__`.
                    let func = match (&source, static_type_lookup(&cls, name)?) {
                        (Some(s), Some((k, raw))) if raw.is(&class_attr) && type_name(&fget) == "function" => wrap(py, self.og, &fget, class_attr_source(s, k, name).attr("fget"))?,
                        _ => VT::Function { obj: Rc::new(fget.unbind()), source: None },
                    };
                    let self_vt = VT::Module { obj: Rc::new(m.clone().unbind()), source };
                    return self.call(py, &func, vec![self_vt], vec![]);
                }
            }
        }
        let v = m.getattr(name)?;
        match src {
            Some(s) => wrap(py, self.og, &v, s),
            // A module made in the trace: nothing else holds it, its attributes are as made.
            None if self.og.derived_modules.contains_key(&(m.as_ptr() as usize)) => self.wrap_unguarded(py, &v),
            None => unsupported!("module attribute without a source"),
        }
    }

    fn truth(&mut self, py: Python<'_>, v: &VT) -> VResult<bool> {
        Ok(match v {
            VT::Constant(c) => c.bind(py).is_truthy()?,
            // `bool(sym)`: decided on the example value, guarded in the ShapeEnv.
            VT::SymNum(s) => s.fake.bind(py).is_truthy()?,
            VT::Tensor(_) => graph_break!(DataDependentBranch, "branch on the value of a tensor"),
            VT::Tuple(items) | VT::NamedTuple { items, .. } => !items.is_empty(),
            VT::List(l) => !l.borrow().items.is_empty(),
            VT::Dict(d) | VT::DictView { dict: d, .. } => !d.borrow().items.is_empty(),
            VT::Null => unsupported!("truth of NULL"),
            VT::Module { obj, .. } => {
                if obj.bind(py).hasattr("__len__")? {
                    obj.bind(py).len()? > 0
                } else {
                    true
                }
            }
            VT::UserObject(o) => {
                let ty = o.cls.bind(py);
                if !ty.hasattr("__bool__")? {
                    // `dict.__len__` decides for a dict subclass (`nb_bool` is unset, `mp_length` is dict's).
                    if let Some(VT::Dict(d)) = o.storage_slot(py, "__len__")? {
                        return Ok(!d.borrow().items.is_empty());
                    }
                }
                if ty.hasattr("__bool__")? || ty.hasattr("__len__")? {
                    graph_break!(UntracedValue, "truth value of {} (it defines __bool__ or __len__)", v.describe(py));
                }
                true
            }
            VT::Opaque { obj, .. } => {
                // `bool(obj)` runs the class's __bool__ or __len__ (Objects/typeobject.c slots).
                let ty = obj.bind(py).get_type();
                if ty.hasattr("__bool__")? || ty.hasattr("__len__")? {
                    graph_break!(UntracedValue, "truth value of {} (it defines __bool__ or __len__)", v.describe(py));
                }
                true
            }
            _ => true,
        })
    }

    /// `a is b`.
    /// Pins a closure guarded by its code (Note [closure guards]) to its identity: called
    /// before anything depends on which function object it is.
    fn pin_identity(&mut self, v: &VT) {
        if let VT::Function { obj, source: Some(s) } = v {
            if self.og.unpinned_functions.remove(&(obj.as_ptr() as usize)) {
                Python::attach(|py| self.og.add_guard(Some(s.clone()), GuardKind::IdMatch(obj.clone_ref(py))));
            }
        }
    }

    fn is_same(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<bool> {
        self.pin_identity(a);
        self.pin_identity(b);
        Ok(match (a, b) {
            (VT::Constant(x), VT::Constant(y)) => x.bind(py).is(y.bind(py)),
            (VT::Tensor(x), VT::Tensor(y)) => x.node == y.node,
            (VT::Module { obj: x, .. }, VT::Module { obj: y, .. }) => x.bind(py).is(y.bind(py)),
            (VT::Class(x), VT::Class(y)) | (VT::TorchFunction(x), VT::TorchFunction(y)) | (VT::Builtin(x), VT::Builtin(y)) => x.bind(py).is(y.bind(py)),
            (VT::Constant(c), _) | (_, VT::Constant(c)) if c.bind(py).is_none() => false,
            (VT::Constant(_), _) | (_, VT::Constant(_)) => false,
            (VT::List(x), VT::List(y)) => Rc::ptr_eq(x, y),
            (VT::Dict(x), VT::Dict(y)) => Rc::ptr_eq(x, y),
            (VT::Partial(x), VT::Partial(y)) => Rc::ptr_eq(x, y) || matches!((&x.obj, &y.obj), (Some(p), Some(q)) if p.is(q)),
            (VT::Partial(_), _) | (_, VT::Partial(_)) => false,
            (VT::UserObject(x), VT::UserObject(y)) => Rc::ptr_eq(x, y),
            // A new object is none of the objects that existed before it.
            (VT::UserObject(_), _) | (_, VT::UserObject(_)) => false,
            (VT::List(l), _) | (_, VT::List(l)) if l.borrow().source.is_none() => false,
            (VT::Dict(d), _) | (_, VT::Dict(d)) if d.borrow().source.is_none() => false,
            (VT::NestedFunction(x), VT::NestedFunction(y)) => Rc::ptr_eq(x, y),
            (VT::NestedFunction(_), _) | (_, VT::NestedFunction(_)) => false,
            _ => match (real_object(a), real_object(b)) {
                (Some(x), Some(y)) => x.as_ptr() == y.as_ptr(),
                _ => unsupported!("identity comparison of {} and {}", a.describe(py), b.describe(py)),
            },
        })
    }

    fn contains(&mut self, py: Python<'_>, container: &VT, item: &VT) -> VResult<bool> {
        // A symbolic int in a tuple or list of ints (`n in (3, 4)`): `==` item by item, each a
        // guard on the relation (`Ne(s0, 3)`), instead of specializing `n` to its value.
        // (Floats are left out: `in` tests identity before `==`, which a NaN would expose.)
        let sym_int = |v: &VT| match v {
            VT::SymNum(s) => type_name(s.fake.bind(py)) == "SymInt",
            _ => false,
        };
        let constant_items = match container {
            VT::Constant(c) if ["tuple", "frozenset"].contains(&type_name(c.bind(py)).as_str()) => {
                Some(c.bind(py).try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<PyResult<Vec<VT>>>()?)
            }
            _ => None,
        };
        if sym_int(item) && (constant_items.is_some() || matches!(container, VT::Tuple(_) | VT::List(_) | VT::NamedTuple { .. })) {
            let items = match constant_items {
                Some(items) => items,
                None => self.iter_items(py, container)?,
            };
            let int_like = |v: &VT| {
                sym_int(v)
                    || matches!(v, VT::Constant(c) if c.bind(py).is_instance_of::<pyo3::types::PyInt>() && !c.bind(py).is_instance_of::<pyo3::types::PyBool>())
            };
            if items.iter().all(int_like) {
                for v in items {
                    let eq = self.sym_operator(py, "eq", vec![item.clone(), v])?;
                    if self.truth(py, &eq)? {
                        return Ok(true);
                    }
                }
                return Ok(false);
            }
        }
        if let (Some(c), Some(i)) = (container.as_constant(py), item.as_constant(py)) {
            return Ok(c.contains(i)?);
        }
        match (container, item.as_constant(py)) {
            (VT::Dict(d) | VT::DictView { dict: d, view: DictView::Keys }, Some(k)) => {
                for (key, _) in &d.borrow().items {
                    if key.bind(py).eq(&k)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            (VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) | VT::DictView { .. }, Some(k)) => {
                for v in self.iter_items(py, container)? {
                    match v.as_constant(py) {
                        Some(c) if c.eq(&k)? => return Ok(true),
                        Some(_) => {}
                        None => unsupported!("`in` over non-constant items"),
                    }
                }
                Ok(false)
            }
            (VT::Module { obj, .. }, Some(k)) => Ok(obj.bind(py).contains(k)?),
            (VT::Set(set), Some(k)) => Ok(set.borrow().bind(py).contains(k)?),
            (VT::Set(set), None) => {
                let set = set.clone();
                let member = self.set_members_of(py, std::slice::from_ref(item))?;
                let found = set.borrow().bind(py).contains(&member[0])?;
                Ok(found)
            }
            (VT::UserObject(o), _) => {
                // `type(o).__contains__`: Python code inlined (its result's truth), or the dict
                // storage's (Note [dict subclass objects]).
                if let Some(m) = self.python_dunder(py, container, "__contains__")? {
                    let r = self.call(py, &m, vec![item.clone()], vec![])?;
                    return self.truth(py, &r);
                }
                match o.storage_slot(py, "__contains__")? {
                    Some(storage) => self.contains(py, &storage, item),
                    None => graph_break!(UntracedValue, "`in` on {}", container.describe(py)),
                }
            }
            (VT::Opaque { obj, source }, _) => {
                // `__contains__` looked up on the type and inlined when it is Python code
                // (collections.abc.Mapping's, a user container's); its result must be constant.
                let ty = obj.bind(py).get_type();
                let Some((k, f)) = static_type_lookup(&ty, "__contains__")?.filter(|(_, f)| type_name(f) == "function") else {
                    graph_break!(UntracedValue, "`in` on {}", container.describe(py));
                };
                let func = wrap(py, self.og, &f, class_attr_source(source, k, "__contains__"))?;
                let r = self.call(py, &func, vec![container.clone(), item.clone()], vec![])?;
                let t = self.truth(py, &r)?;
                Ok(t)
            }
            _ => unsupported!("`in` on {}", container.describe(py)),
        }
    }

    fn operator(&mut self, py: Python<'_>, name: &str, args: Vec<VT>) -> VResult<VT> {
        if args.iter().any(|a| matches!(a, VT::SymNum(_))) && !args.iter().any(|a| matches!(a, VT::Tensor(_))) {
            return self.sym_operator(py, name, args);
        }
        let f = self.og.handles.operator.bind(py).getattr(name)?;
        if args.iter().all(|a| matches!(a, VT::Constant(_))) {
            let vals: Vec<_> = args.iter().map(|a| a.as_constant(py).unwrap()).collect();
            return Ok(VT::constant(f.call1(PyTuple::new(py, vals)?)?.unbind()));
        }
        if args.iter().any(|a| matches!(a, VT::Tensor(_))) {
            return self.og.call(py, Some(&f), None, &args, &[]);
        }
        unsupported!("operator.{name} on {}", args.iter().map(|a| a.describe(py)).collect::<Vec<_>>().join(", "))
    }

    /// `operator.<name>` over symbolic numbers and Python numbers (Note [symbolic sizes]):
    /// arithmetic becomes a graph node over `SymInt`s; a comparison is decided at once on the
    /// example values (`bool(sym)`, a guard in the `ShapeEnv`), so no `SymBool` reaches the
    /// graph; anything else specializes the symbolic operands to their values.
    fn sym_operator(&mut self, py: Python<'_>, name: &str, args: Vec<VT>) -> VResult<VT> {
        let numeric = args.iter().all(|a| match a {
            VT::SymNum(_) => true,
            VT::Constant(c) => {
                let c = c.bind(py);
                c.is_instance_of::<pyo3::types::PyInt>() || c.is_instance_of::<pyo3::types::PyFloat>()
            }
            _ => false,
        });
        let base = out_of_place(name);
        let arithmetic = matches!(base, "add" | "sub" | "mul" | "floordiv" | "mod" | "truediv" | "neg" | "pos" | "pow" | "abs");
        let comparison = matches!(base, "lt" | "le" | "eq" | "ne" | "gt" | "ge");
        if numeric && arithmetic {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            return self.og.call(py, Some(&f), None, &args, &[]);
        }
        if numeric && comparison {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            let mut vals = Vec::with_capacity(args.len());
            for a in &args {
                vals.push(match a {
                    VT::SymNum(s) => s.fake.bind(py).clone(),
                    other => other.as_constant(py).expect("numeric operand"),
                });
            }
            let r = f.call1(PyTuple::new(py, vals)?)?;
            let r = if crate::symbolic::variables::is_sym(&r) { crate::symbolic::variables::specialize_sym(&r)? } else { r };
            return Ok(VT::constant(r.unbind()));
        }
        let specialized = args.into_iter().map(|a| match &a {
            VT::SymNum(_) => a.as_constant(py).map(|c| VT::constant(c.unbind())).ok_or_else(|| Unsupported::new("symbolic number without a value")),
            _ => Ok(a),
        }).collect::<VResult<Vec<_>>>()?;
        self.operator(py, name, specialized)
    }

    /// A builtin or `math` function over symbolic numbers whose result stays a graph value
    /// instead of specializing its operands (Note [symbolic sizes]), so that `max(n, 4)`,
    /// `float(n)`, `math.sqrt(n)` or `divmod(n, 3)` compile once for every value of `n`, as in
    /// torch.compile. Every operand must be a symbolic number or a Python `int`/`float`; the
    /// graph calls torch's SymInt-aware forms (`torch.sym_max`, `torch.sym_float`,
    /// `torch._sym_sqrt`, ...), which compute the same values as the builtins on plain numbers.
    /// `None`: not one of these, the caller specializes.
    fn sym_builtin(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT]) -> VResult<Option<VT>> {
        #[derive(PartialEq, Clone, Copy)]
        enum Kind {
            Int,
            Float,
        }
        let kind_of = |a: &VT| -> Option<Kind> {
            match a {
                VT::SymNum(s) => match type_name(s.fake.bind(py)).as_str() {
                    "SymInt" => Some(Kind::Int),
                    "SymFloat" => Some(Kind::Float),
                    _ => None,
                },
                VT::Constant(c) => {
                    let c = c.bind(py);
                    if c.is_instance_of::<pyo3::types::PyBool>() {
                        None
                    } else if c.is_instance_of::<pyo3::types::PyInt>() {
                        Some(Kind::Int)
                    } else if c.is_instance_of::<pyo3::types::PyFloat>() {
                        Some(Kind::Float)
                    } else {
                        None
                    }
                }
                _ => None,
            }
        };
        let Some(kinds) = args.iter().map(kind_of).collect::<Option<Vec<Kind>>>() else {
            return Ok(None);
        };
        if kinds.is_empty() {
            return Ok(None);
        }
        let builtins = self.og.handles.builtins.bind(py).clone();
        let is = |name: &str| builtins.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let torch = self.og.handles.torch.bind(py).clone();
        let one = args.len() == 1;
        if one && is("abs") {
            return self.sym_operator(py, "abs", args.to_vec()).map(Some);
        }
        if one && (is("int") || is("round")) {
            // `int(n)` and `round(n)` of an int are `n`; of a float, `int` truncates toward zero
            // (torch.sym_int), and `round` (banker's rounding) specializes.
            return match kinds[0] {
                Kind::Int => Ok(Some(args[0].clone())),
                Kind::Float if is("int") => self.og.call(py, Some(&torch.getattr("sym_int")?), None, args, &[]).map(Some),
                Kind::Float => Ok(None),
            };
        }
        if one && is("float") {
            return match kinds[0] {
                Kind::Float => Ok(Some(args[0].clone())),
                Kind::Int => self.og.call(py, Some(&torch.getattr("sym_float")?), None, args, &[]).map(Some),
            };
        }
        if args.len() == 2 && is("pow") {
            return self.sym_operator(py, "pow", args.to_vec()).map(Some);
        }
        if args.len() == 2 && is("divmod") {
            let q = self.sym_operator(py, "floordiv", args.to_vec())?;
            let r = self.sym_operator(py, "mod", args.to_vec())?;
            return Ok(Some(VT::Tuple(Rc::new(vec![q, r]))));
        }
        if args.len() >= 2 && (is("max") || is("min")) {
            // `max(a, b)` returns one of its operands, so its type is that operand's: only
            // operands of one kind fold into `torch.sym_max`/`sym_min` (which may promote).
            if kinds.iter().any(|k| *k != kinds[0]) {
                return Ok(None);
            }
            let f = torch.getattr(if is("max") { "sym_max" } else { "sym_min" })?;
            let mut acc = args[0].clone();
            for a in &args[1..] {
                acc = self.og.call(py, Some(&f), None, &[acc, a.clone()], &[])?;
            }
            return Ok(Some(acc));
        }
        let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "math" && one {
            let name: String = b.getattr("__name__")?.extract()?;
            match name.as_str() {
                // `math.floor`/`ceil`/`trunc` of an int are the int; of a SymFloat, the function
                // itself is symbolic (`SymFloat.__floor__` gives a SymInt).
                "floor" | "ceil" | "trunc" => {
                    return match kinds[0] {
                        Kind::Int => Ok(Some(args[0].clone())),
                        Kind::Float => self.og.call(py, Some(b), None, args, &[]).map(Some),
                    };
                }
                "sqrt" | "cos" | "cosh" | "sin" | "sinh" | "tan" | "tanh" | "asin" | "acos" | "atan" | "log2" => {
                    // torch._sym_<name>: the math function of the value as a float; a domain
                    // error (math.sqrt(-1)) is raised by the example value, as eager would.
                    let f = torch.getattr(format!("_sym_{name}").as_str())?;
                    let x = match kinds[0] {
                        Kind::Float => args[0].clone(),
                        Kind::Int => self.og.call(py, Some(&torch.getattr("sym_float")?), None, args, &[])?,
                    };
                    return self.og.call(py, Some(&f), None, &[x], &[]).map(Some);
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// `torch.tensor(n)` / `torch.as_tensor(n)` of one symbolic number: a 0-dim tensor built by
    /// `torch.scalar_tensor(n, dtype=...)`, which keeps `n` symbolic (`torch.tensor` reads the
    /// number's value, which would specialize it). The dtype is `torch.tensor`'s inference for
    /// a Python scalar (int64 for an int, the default dtype for a float) unless `dtype=` is
    /// given; `device=` and `requires_grad=` pass through. `None`: not this case.
    fn sym_scalar_tensor(&mut self, py: Python<'_>, name: &str, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !matches!(name, "torch.tensor" | "torch.as_tensor") || args.len() != 1 {
            return Ok(None);
        }
        let VT::SymNum(s) = &args[0] else {
            return Ok(None);
        };
        if !kwargs.iter().all(|(k, _)| matches!(k.as_str(), "dtype" | "device" | "requires_grad")) || (name == "torch.as_tensor" && kwargs.iter().any(|(k, _)| k == "requires_grad")) {
            return Ok(None);
        }
        let torch = self.og.handles.torch.bind(py).clone();
        let mut kw = kwargs.to_vec();
        if !kw.iter().any(|(k, _)| k == "dtype") {
            let dtype = match type_name(s.fake.bind(py)).as_str() {
                "SymInt" => torch.getattr("int64")?,
                "SymFloat" => torch.call_method0("get_default_dtype")?,
                _ => return Ok(None),
            };
            kw.push(("dtype".to_string(), VT::constant(dtype.unbind())));
        }
        self.og.call(py, Some(&torch.getattr("scalar_tensor")?), None, args, &kw).map(Some)
    }

    fn binary(&mut self, py: Python<'_>, name: &str, a: VT, b: VT) -> VResult<VT> {
        let base = out_of_place(name);
        // A set of this trace against another one or a constant frozenset: run on the real
        // sets (copies of constants); `frozenset op set` is a frozenset, `set op frozenset` a set
        // (Objects/setobject.c makes the result of the left operand's type).
        let as_set = |v: &VT| -> Option<Py<PyAny>> {
            match v {
                VT::Set(s) => Some(s.borrow().clone_ref(py)),
                VT::Constant(c) if type_name(c.bind(py)) == "frozenset" => Some(c.clone_ref(py)),
                _ => None,
            }
        };
        if let (Some(x), Some(y)) = (as_set(&a), as_set(&b)) {
            if matches!(base, "and_" | "or_" | "sub" | "xor") && (matches!(a, VT::Set(_)) || matches!(b, VT::Set(_))) && !(matches!(a, VT::Set(_)) && matches!(b, VT::Set(_))) {
                if name.starts_with('i') && matches!(a, VT::Set(_)) {
                    let f = self.og.handles.operator.bind(py).getattr(name)?;
                    f.call1((x.bind(py), y.bind(py)))?;
                    return Ok(a.clone());
                }
                let f = self.og.handles.operator.bind(py).getattr(base)?;
                let r = f.call1((x.bind(py), y.bind(py)))?;
                if type_name(&r) == "frozenset" {
                    return Ok(VT::constant(r.unbind()));
                }
                return Ok(VT::Set(Rc::new(RefCell::new(r.unbind()))));
            }
        }
        if let (VT::Set(x), VT::Set(y)) = (&a, &b) {
            if matches!(base, "and_" | "or_" | "sub" | "xor") {
                if name.starts_with('i') {
                    // In place: the same set object, as `s &= t` keeps aliases in sync.
                    let f = self.og.handles.operator.bind(py).getattr(name)?;
                    f.call1((x.borrow().bind(py), y.borrow().bind(py)))?;
                    return Ok(a.clone());
                }
                let f = self.og.handles.operator.bind(py).getattr(base)?;
                let r = f.call1((x.borrow().bind(py), y.borrow().bind(py)))?;
                return Ok(VT::Set(Rc::new(RefCell::new(r.unbind()))));
            }
        }
        match (&a, &b, base) {
            (VT::Tuple(_) | VT::NamedTuple { .. } | VT::Constant(_), VT::Tuple(_) | VT::NamedTuple { .. } | VT::Constant(_), "add") if is_seq(&a) || is_seq(&b) => {
                if let (Some(_), Some(_)) = (a.as_constant(py), b.as_constant(py)) {
                    return self.operator(py, name, vec![a, b]);
                }
                let mut items = self.unpack(py, &a)?;
                items.extend(self.unpack(py, &b)?);
                // `torch.Size` + tuple, either way round, is a `torch.Size`.
                if is_symbolic_size(py, self.og, &a) || is_symbolic_size(py, self.og, &b) {
                    let size_type = self.og.handles.size_type.clone_ref(py);
                    return make_size(py, size_type.bind(py), items);
                }
                make_tuple(py, items)
            }
            (VT::List(l), _, "add") if name.starts_with('i') => {
                if l.borrow().source.is_some() {
                    self.og.side_effects.mutate_list(l);
                }
                let extra = self.unpack(py, &b)?;
                l.borrow_mut().items.extend(extra);
                Ok(a.clone())
            }
            (VT::List(_), VT::List(_), "add") => {
                let mut items = self.unpack(py, &a)?;
                items.extend(self.unpack(py, &b)?);
                Ok(new_list(items))
            }
            // Sequence repetition (`[1] * (ndim - 1)`, `n * (x,)`): the same items `n` times, as
            // `list_repeat` / `tuplerepeat` (Objects/listobject.c, tupleobject.c) share them;
            // `n <= 0` gives an empty sequence. `l *= n` repeats the list in place.
            (VT::List(_) | VT::Tuple(_), VT::Constant(_), "mul") | (VT::Constant(_), VT::List(_) | VT::Tuple(_), "mul")
                if repeat_count(py, if matches!(a, VT::Constant(_)) { &a } else { &b }).is_some() =>
            {
                let (seq, count) = if matches!(a, VT::Constant(_)) { (&b, &a) } else { (&a, &b) };
                let n = repeat_count(py, count).unwrap_or(0).max(0) as usize;
                let items = self.unpack(py, seq)?;
                if items.len().saturating_mul(n) > 1 << 20 {
                    unsupported!("sequence repetition to more than 2**20 items");
                }
                let repeated: Vec<VT> = (0..n).flat_map(|_| items.iter().cloned()).collect();
                match seq {
                    VT::List(l) if name.starts_with('i') && matches!(a, VT::List(_)) => {
                        if l.borrow().source.is_some() {
                            self.og.side_effects.mutate_list(l);
                        }
                        l.borrow_mut().items = repeated;
                        Ok(a.clone())
                    }
                    VT::List(_) => Ok(new_list(repeated)),
                    _ => make_tuple(py, repeated),
                }
            }
            // `n += t` with a Python number `n`: numbers have no `__iadd__`, so CPython computes
            // `n + t` (Objects/abstract.c, `binary_iop1`). Recorded as the out-of-place operator:
            // fx prints `operator.iadd(0, t)` as `0 += t`, which is not Python.
            (VT::Constant(_), VT::Tensor(_), _) if name.starts_with('i') => self.operator(py, out_of_place(name), vec![a, b]),
            _ => self.operator(py, name, vec![a, b]),
        }
    }

    fn compare(&mut self, py: Python<'_>, name: &str, a: VT, b: VT) -> VResult<VT> {
        match (&a, &b) {
            (VT::Tensor(_), _) | (_, VT::Tensor(_)) => self.operator(py, name, vec![a, b]),
            (VT::Constant(_), VT::Constant(_)) => self.operator(py, name, vec![a, b]),
            (VT::SymNum(_), VT::SymNum(_) | VT::Constant(_)) | (VT::Constant(_), VT::SymNum(_)) => self.operator(py, name, vec![a, b]),
            _ if name == "eq" || name == "ne" => {
                // `!=` is `not ==` only while the class keeps `object.__ne__`.
                for v in [&a, &b] {
                    if let VT::UserObject(o) = v {
                        if name == "ne" && !o.cls.bind(py).getattr("__ne__")?.is(py.get_type::<PyAny>().getattr("__ne__")?) {
                            graph_break!(UntracedValue, "!= of {} (its class defines __ne__)", v.describe(py));
                        }
                    }
                }
                let eq = self.equal(py, &a, &b)?;
                Ok(const_bool(py, eq == (name == "eq")))
            }
            _ => unsupported!("comparison {name} of {} and {}", a.describe(py), b.describe(py)),
        }
    }

    /// `a == b` as `PyObject_RichCompareBool` decides it (Objects/object.c): identical objects
    /// are equal; lists and tuples compare by length and item by item (Objects/listobject.c,
    /// `list_richcompare`; a list never equals a tuple); dicts by keys and values
    /// (Objects/dictobject.c, `dict_equal`); other objects by identity only when their type keeps
    /// `object.__eq__`. Anything else (a tensor item, a user `__eq__`) is not decided here.
    fn equal(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<bool> {
        match (a, b) {
            (VT::Tensor(x), VT::Tensor(y)) if x.node == y.node => return Ok(true),
            (VT::Tensor(_), _) | (_, VT::Tensor(_)) => graph_break!(DataDependentBranch, "truth of a tensor comparison inside a container comparison"),
            (VT::Constant(x), VT::Constant(y)) => return Ok(x.bind(py).eq(y.bind(py))?),
            // A symbolic size against a number (`x.shape == (3, 3)` item by item): the
            // comparison's outcome is a guard on the relation, not on the size's value.
            (VT::SymNum(_), VT::SymNum(_) | VT::Constant(_)) | (VT::Constant(_), VT::SymNum(_)) => {
                let r = self.operator(py, "eq", vec![a.clone(), b.clone()])?;
                return self.truth(py, &r);
            }
            (VT::List(x), VT::List(y)) if Rc::ptr_eq(x, y) => return Ok(true),
            (VT::Dict(x), VT::Dict(y)) if Rc::ptr_eq(x, y) => return Ok(true),
            // `functools.partial` keeps `object.__eq__`: identity (a literal's `__eq__` does not
            // know a partial either).
            (VT::Partial(_), VT::Partial(_) | VT::Constant(_)) | (VT::Constant(_), VT::Partial(_)) => return self.is_same(py, a, b),
            (VT::UserObject(_), _) | (_, VT::UserObject(_)) => return self.user_object_eq(py, a, b),
            _ => {}
        }
        if let (Some((ka, xs)), Some((kb, ys))) = (self.sequence_items(py, a)?, self.sequence_items(py, b)?) {
            if ka != kb || xs.len() != ys.len() {
                return Ok(false);
            }
            for (x, y) in xs.iter().zip(ys.iter()) {
                if !self.equal(py, x, y)? {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        match (a, b) {
            (VT::Dict(x), VT::Dict(y)) => {
                let xs: Vec<(Py<PyAny>, VT)> = x.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect();
                let ys: Vec<(Py<PyAny>, VT)> = y.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect();
                if xs.len() != ys.len() {
                    return Ok(false);
                }
                for (k, v) in &xs {
                    let mut found = None;
                    for (k2, v2) in &ys {
                        if k.bind(py).eq(k2.bind(py))? {
                            found = Some(v2.clone());
                            break;
                        }
                    }
                    match found {
                        Some(v2) if self.equal(py, v, &v2)? => {}
                        _ => return Ok(false),
                    }
                }
                Ok(true)
            }
            (VT::Set(x), VT::Set(y)) => Ok(x.borrow().bind(py).eq(y.borrow().bind(py))?),
            (VT::Set(s), VT::Constant(c)) | (VT::Constant(c), VT::Set(s)) => Ok(s.borrow().bind(py).eq(c.bind(py))?),
            (VT::List(_) | VT::Tuple(_) | VT::NamedTuple { .. } | VT::Dict(_), VT::Constant(c))
            | (VT::Constant(c), VT::List(_) | VT::Tuple(_) | VT::NamedTuple { .. } | VT::Dict(_))
                if is_scalar_constant(c.bind(py)) =>
            {
                // Neither side's __eq__ knows the other: identity, and they are distinct.
                Ok(false)
            }
            _ => {
                let default_eq = |v: &VT| -> PyResult<bool> {
                    let obj_eq = py.get_type::<pyo3::types::PyAny>().getattr("__eq__")?;
                    Ok(match v {
                        VT::Constant(c) => c.bind(py).is_none(),
                        other => match real_object(other) {
                            Some(o) => o.bind(py).get_type().getattr("__eq__")?.is(&obj_eq),
                            None => false,
                        },
                    })
                };
                if default_eq(a)? && default_eq(b)? {
                    return self.is_same(py, a, b);
                }
                graph_break!(UntracedValue, "== of {} and {}", a.describe(py), b.describe(py))
            }
        }
    }

    /// ("list" or "tuple", items) of a list or tuple tracker or a constant tuple.
    fn sequence_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<(&'static str, Vec<VT>)>> {
        Ok(match v {
            VT::List(l) => Some(("list", l.borrow().items.clone())),
            VT::Tuple(items) | VT::NamedTuple { items, .. } => Some(("tuple", items.as_ref().clone())),
            VT::Constant(c) if c.bind(py).is_instance_of::<PyTuple>() => {
                Some(("tuple", c.bind(py).try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<Vec<_>>>()?))
            }
            _ => None,
        })
    }

    fn getitem(&mut self, py: Python<'_>, obj: &VT, idx: &VT) -> VResult<VT> {
        match obj {
            VT::Tensor(_) => {
                let f = self.og.handles.getitem.clone_ref(py);
                self.og.call(py, Some(f.bind(py)), None, &[obj.clone(), idx.clone()], &[])
            }
            VT::Constant(c) => match idx.as_constant(py) {
                Some(i) => Ok(VT::constant(c.bind(py).get_item(i)?.unbind())),
                None => unsupported!("constant indexed by {}", idx.describe(py)),
            },
            VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) => {
                let items = self.unpack(py, obj)?;
                let i = idx.as_constant(py).ok_or_else(|| Unsupported::new("sequence index is not a constant"))?;
                if let Ok(k) = i.extract::<i64>() {
                    let n = items.len() as i64;
                    let k2 = if k < 0 { k + n } else { k };
                    if k2 < 0 || k2 >= n {
                        // Lengths of these trackers are exact (guarded for inputs).
                        let what = if matches!(obj, VT::List(_)) { "list" } else { "tuple" };
                        let msg = format!("{what} index out of range");
                        let exc = pyo3::exceptions::PyIndexError::new_err(msg.clone()).into_value(py).into_any();
                        return Err(Unsupported::raise_value("IndexError", exc, msg));
                    }
                    return Ok(items[k2 as usize].clone());
                }
                if type_name(&i) == "slice" {
                    let ind = i.call_method1("indices", (items.len(),))?;
                    let (start, stop, step): (i64, i64, i64) = ind.extract()?;
                    let mut out = Vec::new();
                    let mut k = start;
                    while (step > 0 && k < stop) || (step < 0 && k > stop) {
                        out.push(items[k as usize].clone());
                        k += step;
                    }
                    if is_symbolic_size(py, self.og, obj) {
                        let size_type = self.og.handles.size_type.clone_ref(py);
                        return make_size(py, size_type.bind(py), out);
                    }
                    return if matches!(obj, VT::List(_)) { Ok(new_list(out)) } else { make_tuple(py, out) };
                }
                unsupported!("sequence index of type {}", type_name(&i))
            }
            VT::Dict(d) => {
                let k = idx.as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
                for (key, v) in &d.borrow().items {
                    if key.bind(py).eq(&k)? {
                        return Ok(v.clone());
                    }
                }
                // The tracker holds every key (a dict from a source has its keys guarded):
                // `dict_subscript` raises KeyError(key).
                let exc = pyo3::exceptions::PyKeyError::new_err((k.clone().unbind(),)).into_value(py).into_any();
                Err(Unsupported::raise_value("KeyError", exc, k.repr().map(|r| r.to_string()).unwrap_or_default()))
            }
            VT::Module { obj: m, source } => {
                let i = idx.as_constant(py).ok_or_else(|| Unsupported::new("module index is not a constant"))?;
                let m = m.bind(py);
                if type_name(&i) == "slice" {
                    return self.module_slice(py, m, source, &i);
                }
                let child = m.get_item(&i)?;
                let keys: Vec<String> = m.getattr("_modules")?.call_method0("keys")?.try_iter()?.map(|k| k?.extract::<String>()).collect::<PyResult<_>>()?;
                for k in keys {
                    let c = m.getattr("_modules")?.get_item(&k)?;
                    if c.is(&child) {
                        return match self.module_child_source(py, m, source, &k) {
                            Some(s) => wrap(py, self.og, &child, s),
                            None => unsupported!("module item without a source"),
                        };
                    }
                }
                unsupported!("indexing {} does not give one of its submodules", type_name(m))
            }
            VT::UserObject(o) => match self.python_dunder(py, obj, "__getitem__")? {
                Some(m) => self.call(py, &m, vec![idx.clone()], vec![]),
                None => match o.storage_slot(py, "__getitem__")? {
                    Some(storage) => self.getitem(py, &storage, idx),
                    None => unsupported!("indexing {}", obj.describe(py)),
                },
            },
            VT::Opaque { obj: o, source } => {
                // `__getitem__` looked up on the type and inlined when it is Python code.
                let ty = o.bind(py).get_type();
                let Some((k, f)) = static_type_lookup(&ty, "__getitem__")?.filter(|(_, f)| type_name(f) == "function") else {
                    graph_break!(UntracedValue, "indexing {}", obj.describe(py));
                };
                let func = wrap(py, self.og, &f, class_attr_source(source, k, "__getitem__"))?;
                self.call(py, &func, vec![obj.clone(), idx.clone()], vec![])
            }
            _ => unsupported!("indexing {}", obj.describe(py)),
        }
    }

    fn setitem(&mut self, py: Python<'_>, obj: &VT, idx: VT, v: VT) -> VResult<()> {
        match obj {
            VT::Tensor(_) => {
                let f = self.og.handles.operator.bind(py).getattr("setitem")?;
                self.og.call(py, Some(&f), None, &[obj.clone(), idx, v], &[])?;
                Ok(())
            }
            VT::List(lst) => {
                let k: i64 = idx.as_constant(py).ok_or_else(|| Unsupported::new("list index"))?.extract()?;
                let mut l = lst.borrow_mut();
                let n = l.items.len() as i64;
                let k = if k < 0 { k + n } else { k };
                if k < 0 || k >= n {
                    unsupported!("list assignment index out of range");
                }
                l.items[k as usize] = v;
                if l.source.is_some() {
                    drop(l);
                    self.og.side_effects.mutate_list(lst);
                }
                Ok(())
            }
            VT::Dict(d) => {
                let k = idx.as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
                dict_set(py, &mut d.borrow_mut(), k.unbind(), v)?;
                if d.borrow().source.is_some() {
                    self.og.side_effects.mutate_dict(d);
                }
                Ok(())
            }
            // `type(o).__setitem__(o, k, v)`: the class's Python method inlined, or the dict
            // storage's (Note [dict subclass objects]).
            VT::UserObject(o) => match self.python_dunder(py, obj, "__setitem__")? {
                Some(m) => self.call(py, &m, vec![idx, v], vec![]).map(|_| ()),
                None => match o.storage_slot(py, "__setitem__")? {
                    Some(storage) => self.setitem(py, &storage, idx, v),
                    None => unsupported!("item assignment on {}", obj.describe(py)),
                },
            },
            _ => unsupported!("item assignment on {}", obj.describe(py)),
        }
    }

    /// The items of a sequence-like tracker.
    pub fn unpack(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<VT>> {
        Ok(match v {
            VT::Tuple(items) | VT::NamedTuple { items, .. } => items.as_ref().clone(),
            VT::List(l) => l.borrow().items.clone(),
            VT::Iterator(it) => self.drain_iter(py, it)?,
            _ => self.iter_items(py, v)?,
        })
    }

    /// `type(v)` when tracing knows it without running anything.
    fn type_of(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Py<PyAny>>> {
        Ok(match v {
            VT::Opaque { obj, .. } | VT::Module { obj, .. } => Some(obj.bind(py).get_type().into_any().unbind()),
            VT::NamedTuple { cls, .. } => Some(cls.clone_ref(py)),
            VT::Tuple(_) => Some(py.get_type::<PyTuple>().into_any().unbind()),
            VT::List(_) => Some(py.get_type::<PyList>().into_any().unbind()),
            VT::Dict(_) => Some(py.get_type::<PyDict>().into_any().unbind()),
            VT::DictView { view, .. } => Some(PyDict::new(py).call_method0(view.method())?.get_type().into_any().unbind()),
            VT::Partial(_) => Some(crate::symbolic::partial::partial_type(py)?.unbind()),
            VT::UserObject(o) => Some(o.cls.clone_ref(py)),
            // A graph input keeps its exact Python type (TENSOR_MATCH pins it: Parameter, a
            // subclass...); a tensor computed by the graph is a plain torch.Tensor.
            VT::Tensor(t) => match &t.source {
                Some(src) => match self.og.inputs.iter().find(|(s, _)| s == src) {
                    Some((_, real)) => Some(real.bind(py).get_type().into_any().unbind()),
                    None => None,
                },
                None => Some(self.og.handles.tensor_type.clone_ref(py)),
            },
            _ => None,
        })
    }

    /// The (key, value) pairs `dict(v)` / `d.update(v)` take from `v`: a dict, a view of its
    /// items, or an iterable of pairs; keys must be constants.
    fn mapping_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<(Py<PyAny>, VT)>> {
        if let VT::Dict(d) = v {
            return Ok(d.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect());
        }
        if let VT::UserObject(o) = v {
            if let Some(storage) = &o.storage {
                // `dict_merge` (Objects/dictobject.c) copies the storage of a dict whose
                // `tp_iter` is dict's own; any other (an OrderedDict subclass) is read through
                // `b.keys()` and `b[key]`, the subclass's methods included.
                let dict_iter = py.get_type::<PyDict>().getattr("__iter__")?;
                if o.cls.bind(py).getattr("__iter__")?.is(&dict_iter) {
                    return self.mapping_items(py, &VT::Dict(storage.clone()));
                }
                let keys = self.getattr(py, v, "keys")?;
                let keys = self.call(py, &keys, vec![], vec![])?;
                let mut out = Vec::new();
                for k in self.iter_items(py, &keys)? {
                    let key = k.as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?.unbind();
                    let val = self.getitem(py, v, &k)?;
                    out.push((key, val));
                }
                return Ok(out);
            }
        }
        if let VT::Constant(c) = v {
            if let Ok(d) = c.bind(py).cast::<PyDict>() {
                return Ok(d.iter().map(|(k, v)| (k.unbind(), VT::constant(v.unbind()))).collect());
            }
        }
        let mut out = Vec::new();
        for pair in self.iter_items(py, v)? {
            let kv = self.unpack(py, &pair)?;
            if kv.len() != 2 {
                unsupported!("dict() from an item of length {}", kv.len());
            }
            let k = kv[0].as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
            if k.hash().is_err() {
                unsupported!("unhashable dict key");
            }
            out.push((k.unbind(), kv[1].clone()));
        }
        Ok(out)
    }

    /// A fresh Python value equal to `v` when `v` is a literal or a container of literals built
    /// during tracing.
    fn literal_value<'py>(&self, py: Python<'py>, v: &VT) -> Option<Bound<'py, PyAny>> {
        match v {
            VT::Constant(c) => Some(c.bind(py).clone()),
            VT::Tuple(items) => PyTuple::new(py, constants_of(py, items)?).ok().map(|t| t.into_any()),
            VT::List(l) => PyList::new(py, constants_of(py, &l.borrow().items)?).ok().map(|l| l.into_any()),
            VT::Set(set) => set.borrow().bind(py).call_method0("copy").ok().filter(|c| c.try_iter().map(|it| it.flatten().all(|m| is_literal(py, &m))).unwrap_or(false)),
            VT::DictView { dict, view } => {
                // A view of a fresh dict with the same keys (and values, when they matter).
                let real = PyDict::new(py);
                for (k, v) in &dict.borrow().items {
                    let v = match view {
                        DictView::Keys => py.None().into_bound(py),
                        _ => v.as_constant(py)?,
                    };
                    real.set_item(k.bind(py), v).ok()?;
                }
                real.call_method0(view.method()).ok()
            }
            _ => None,
        }
    }

    /// The real objects a traced set holds for `items`: literals, and objects from the frame
    /// whose identity is guarded and whose type hashes and compares by identity (`object`'s
    /// `__hash__` and `__eq__`: a module in `named_children`'s `memo`), so that membership
    /// runs no user code. Anything else is not modelled.
    fn set_members_of<'py>(&mut self, py: Python<'py>, items: &[VT]) -> VResult<Vec<Bound<'py, PyAny>>> {
        let object_type = py.get_type::<PyAny>();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if let Some(c) = item.as_constant(py) {
                out.push(c);
                continue;
            }
            self.pin_identity(item);
            if let VT::Tensor(t) = item {
                // A tensor hashes by identity (`Tensor.__hash__` is `id`), and each graph value
                // has its own fake tensor: the fake stands for it in the set.
                let fake = t.fake.bind(py).clone();
                self.og.set_members.insert(fake.as_ptr() as usize, item.clone());
                out.push(fake);
                continue;
            }
            let obj = match item {
                VT::Module { obj, .. } | VT::Class(obj) | VT::Builtin(obj) | VT::TorchFunction(obj) => obj.bind(py).clone(),
                VT::Function { obj, source: Some(_) } => obj.bind(py).clone(),
                other => unsupported!("set member {} is not a literal or an identity-guarded object", other.describe(py)),
            };
            let ty = obj.get_type();
            if !(ty.getattr("__hash__")?.is(object_type.getattr("__hash__")?) && ty.getattr("__eq__")?.is(object_type.getattr("__eq__")?)) {
                unsupported!("set member {} hashes or compares with its own methods", item.describe(py));
            }
            self.og.set_members.insert(obj.as_ptr() as usize, item.clone());
            out.push(obj);
        }
        Ok(out)
    }

    /// A private set of literal members.
    fn new_set(&mut self, py: Python<'_>, items: &[VT]) -> VResult<VT> {
        let consts = self.set_members_of(py, items)?;
        let set = pyo3::types::PySet::new(py, consts)?;
        Ok(VT::Set(Rc::new(RefCell::new(set.into_any().unbind()))))
    }

    /// One step of an iterator (FOR_ITER, `next()`): `None` when exhausted. A step that raises
    /// in CPython (a dict that changed size) is a graph break, so the instruction runs for real
    /// and raises there (the iterator is rebuilt in the state that raises, see `rebuild_of`).
    pub fn step_iter(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>) -> VResult<Option<VT>> {
        let mut resume = |req: IterRequest<'_>| -> Result<Option<VT>, IterError> {
            let r = match req {
                IterRequest::Resume(f) => resume_generator(py, self.og, self.depth + 1, f),
                IterRequest::Call(func, args) => self.call(py, func, args, vec![]).map(Some),
                IterRequest::Truth(v) => self.truth(py, v).map(|t| Some(const_bool(py, t))),
                IterRequest::MakeIter(v) => self.make_iter(py, v).map(|i| Some(VT::Iterator(i))),
                IterRequest::Add(a, b) => self.binary(py, "add", a, b).map(Some),
            };
            r.map_err(IterError::Unsupported)
        };
        let r = match borrow_iter(it) {
            Ok(mut state) => state.next_item(py, &mut resume),
            Err(e) => Err(e),
        };
        match r {
            Ok(v) => Ok(v),
            Err(IterError::Raise(msg)) => graph_break!(RaisesException, "RuntimeError: {msg}"),
            Err(IterError::Unsupported(u)) => Err(u),
        }
    }

    /// Every remaining item of an iterator, exhausting it (`list(it)`, unpacking).
    pub fn drain_iter(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>) -> VResult<Vec<VT>> {
        let mut out = Vec::new();
        while let Some(v) = self.step_iter(py, it)? {
            out.push(v);
            if out.len() > 100_000 {
                unsupported!("iteration too long to unroll");
            }
        }
        Ok(out)
    }

    /// `iter(v)`: the iterator CPython's `tp_iter` of `v` makes. Lists and dicts (and their
    /// views) get live iterators; an iterator is its own iterator; other iterables are walked
    /// once, now, into a fixed sequence.
    /// `iter(o)` for a user object whose class's `__iter__` is a Python generator function
    /// (`collections.abc.Sequence.__iter__`, a user's `def __iter__: yield ...`): the
    /// generator, stepped lazily in the trace. `None` for anything else.
    fn python_iter(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Rc<RefCell<IteratorState>>>> {
        if !matches!(v, VT::UserObject(_) | VT::Opaque { .. }) {
            return Ok(None);
        }
        let Some(m) = self.python_dunder(py, v, "__iter__")? else { return Ok(None) };
        let is_generator = match &m {
            VT::Method { func, .. } => match func.as_ref() {
                VT::Function { obj, .. } => {
                    let f: u32 = obj.bind(py).getattr("__code__")?.getattr("co_flags")?.extract()?;
                    f & flags::CO_GENERATOR != 0
                }
                _ => false,
            },
            _ => false,
        };
        if !is_generator {
            return Ok(None);
        }
        match self.call(py, &m, vec![], vec![])? {
            VT::Iterator(it) => Ok(Some(it)),
            other => unsupported!("__iter__ of {} gave {}", v.describe(py), other.describe(py)),
        }
    }

    fn make_iter(&mut self, py: Python<'_>, v: &VT) -> VResult<Rc<RefCell<IteratorState>>> {
        if let Some(it) = self.python_iter(py, v)? {
            return Ok(it);
        }
        if let VT::UserObject(o) = v {
            // `dict.__iter__` / `OrderedDict.__iter__` of a dict subclass: its storage's keys.
            if let Some(storage) = o.storage_slot(py, "__iter__")? {
                return self.make_iter(py, &storage);
            }
        }
        let state = match v {
            VT::Iterator(it) => return Ok(it.clone()),
            VT::List(l) => IteratorState::over_list(l.clone()),
            VT::Dict(d) => IteratorState::over_dict(d.clone(), DictView::Keys),
            VT::DictView { dict, view } => IteratorState::over_dict(dict.clone(), *view),
            other => IteratorState::over(self.iter_items(py, other)?),
        };
        Ok(Rc::new(RefCell::new(state)))
    }

    fn iter_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<VT>> {
        if let Some(it) = self.python_iter(py, v)? {
            return self.drain_iter(py, &it);
        }
        if let VT::UserObject(o) = v {
            if let Some(storage) = o.storage_slot(py, "__iter__")? {
                return self.iter_items(py, &storage);
            }
        }
        Ok(match v {
            VT::Set(set) => {
                let set = set.borrow();
                let mut out = Vec::new();
                for m in set.bind(py).try_iter()? {
                    let m = m?;
                    out.push(match self.og.set_members.get(&(m.as_ptr() as usize)) {
                        // Its order follows the members' hashes, for a tensor its address: the
                        // fake's is not the real tensor's.
                        Some(VT::Tensor(_)) => unsupported!("iterating a set that holds tensors (its order follows their addresses)"),
                        Some(vt) if !is_literal(py, &m) => vt.clone(),
                        _ if is_literal(py, &m) => VT::constant(m.unbind()),
                        _ => unsupported!("set member of type {} without a tracker", type_name(&m)),
                    });
                }
                out
            }
            VT::Constant(c) => {
                let mut out = Vec::new();
                for item in c.bind(py).try_iter()? {
                    let item = item?;
                    if !is_literal(py, &item) {
                        unsupported!("iterating a constant yields a non-literal");
                    }
                    out.push(VT::constant(item.unbind()));
                    if out.len() > 100_000 {
                        unsupported!("iteration too long to unroll");
                    }
                }
                out
            }
            VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) | VT::Iterator(_) => self.unpack(py, v)?,
            VT::Dict(_) | VT::DictView { .. } => {
                let it = self.make_iter(py, v)?;
                self.drain_iter(py, &it)?
            }
            VT::Module { obj, source } => {
                let m = obj.bind(py);
                let cls = m.get_type();
                let nn = py.import("torch.nn")?;
                let is_seq = cls.getattr("__iter__")?.is(&nn.getattr("Sequential")?.getattr("__iter__")?)
                    || cls.getattr("__iter__")?.is(&nn.getattr("ModuleList")?.getattr("__iter__")?);
                let is_dict = cls.getattr("__iter__")?.is(&nn.getattr("ModuleDict")?.getattr("__iter__")?);
                let modules = m.getattr("_modules")?;
                let keys: Vec<String> = modules.call_method0("keys")?.try_iter()?.map(|k| k?.extract::<String>()).collect::<PyResult<_>>()?;
                if is_dict {
                    return Ok(keys.iter().map(|k| VT::constant(PyString::new(py, k).into_any().unbind())).collect());
                }
                if !is_seq {
                    unsupported!("iterating module {}", type_name(m));
                }
                let mut out = Vec::new();
                for k in keys {
                    let c = modules.get_item(&k)?;
                    if c.is_none() {
                        continue;
                    }
                    match self.module_child_source(py, m, source, &k) {
                        Some(s) => out.push(wrap(py, self.og, &c, s)?),
                        None => unsupported!("module iteration without a source"),
                    }
                }
                out
            }
            VT::Tensor(t) => {
                let n: i64 = t.fake.bind(py).call_method1("size", (0,))?.extract()?;
                let mut out = Vec::new();
                for i in 0..n {
                    let idx = VT::constant(i.into_pyobject(py)?.into_any().unbind());
                    out.push(self.getitem(py, v, &idx)?);
                }
                out
            }
            VT::Opaque { .. } => graph_break!(UntracedValue, "iterating {} (its __iter__ runs in Python)", v.describe(py)),
            _ => unsupported!("iterating {}", v.describe(py)),
        })
    }

    fn dict_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<(String, VT)>> {
        match v {
            VT::Dict(d) => d.borrow().items.iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v.clone()))).collect(),
            VT::Constant(c) => {
                let d = c.bind(py).cast::<PyDict>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                d.iter().map(|(k, v)| Ok((k.extract::<String>()?, VT::constant(v.unbind())))).collect()
            }
            // `f(**o)` for a dict subclass object merges it as `dict(o)` does.
            VT::UserObject(o) if o.storage.is_some() => self.mapping_items(py, v)?.into_iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v))).collect(),
            _ => unsupported!("** of {}", v.describe(py)),
        }
    }

    /// The TypeError of a DICT_MERGE that meets keyword `key` twice, for the call whose
    /// keyword dict sits at stack index `dict_idx`: CPython's message names the callable
    /// (`_PyObject_FunctionStr`: `module.qualname()`, or `qualname()` for builtins), read from
    /// the stack below the positional arguments (past the NULL of the call's layout). A break
    /// when the callable is not a real object the message can name.
    fn repeated_keyword(&self, py: Python<'_>, dict_idx: usize, key: &str) -> Unsupported {
        let callable = (2..=3).filter_map(|k| dict_idx.checked_sub(k)).map(|i| &self.stack[i]).find(|v| !v.is_null());
        let real = match callable {
            Some(VT::Class(c)) | Some(VT::Builtin(c)) | Some(VT::TorchFunction(c)) => Some(c.bind(py).clone()),
            Some(VT::Function { obj, .. }) | Some(VT::Module { obj, .. }) => Some(obj.bind(py).clone()),
            _ => None,
        };
        let Some(f) = real else {
            return Unsupported::new(format!("keyword argument '{key}' given twice to a call of a traced value"));
        };
        let name = match f.getattr("__qualname__").and_then(|q| q.extract::<String>()) {
            Ok(q) => match f.getattr("__module__").and_then(|m| m.extract::<String>()) {
                Ok(m) if m != "builtins" => format!("{m}.{q}()"),
                _ => format!("{q}()"),
            },
            Err(_) => f.str().map(|s| s.to_string()).unwrap_or_default(),
        };
        let msg = format!("{name} got multiple values for keyword argument '{key}'");
        match py.import("builtins").and_then(|b| b.getattr("TypeError")).and_then(|t| t.call1((msg.as_str(),))) {
            Ok(e) => Unsupported::raise_value("TypeError", e.unbind(), msg),
            Err(e) => Unsupported::new(e.to_string()),
        }
    }

    /// Pushes a callable loaded for a call, with the NULL marker when `with_null` (LOAD_GLOBAL's
    /// NULL bit, LOAD_METHOD of a plain attribute, LOAD_SUPER_ATTR's method bit) on the side
    /// this CPython puts it ([`PyVersion::null_after_callable`](crate::bytecode::PyVersion::null_after_callable)).
    fn push_callable(&mut self, v: VT, with_null: bool) {
        let after = crate::bytecode::PyVersion::CURRENT.null_after_callable();
        if with_null && !after {
            self.stack.push(VT::Null);
        }
        self.stack.push(v);
        if with_null && after {
            self.stack.push(VT::Null);
        }
    }

    /// CALL `n` (and CALL_KW after it took the keyword names): pops the arguments and the two
    /// slots below them, `[NULL, callable]` (3.11/3.12), `[callable, NULL]` (3.13) or
    /// `[method, self]` (every version), calls, and pushes the result.
    fn call_from_stack(&mut self, py: Python<'_>, n: usize) -> VResult<()> {
        let mut args = self.popn(n)?;
        let b = self.pop()?;
        let a = self.pop()?;
        let func = if a.is_null() {
            b
        } else if b.is_null() {
            a
        } else {
            args.insert(0, b);
            a
        };
        let kwargs = self.split_kwargs(py, &mut args)?;
        let r = self.call(py, &func, args, kwargs)?;
        self.stack.push(r);
        Ok(())
    }

    fn split_kwargs(&mut self, py: Python<'_>, args: &mut Vec<VT>) -> VResult<Vec<(String, VT)>> {
        let Some(names) = self.kw_names.take() else { return Ok(vec![]) };
        let names = names.bind(py);
        let n = names.len();
        let vals = args.split_off(args.len() - n);
        names.iter().zip(vals).map(|(k, v)| Ok((k.extract::<String>()?, v))).collect()
    }

    // ----- calls ------------------------------------------------------------------------

    /// Runs module `func` (a `VT::Module`) as `nn.Module.__call__` does: its `forward`, after
    /// checking that no hooks are registered (guarded) and `forward` is the class's.
    fn call_module(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let VT::Module { obj, source } = func else { unsupported!("call_module of {}", func.describe(py)) };
        let m = obj.bind(py);
        let cls = m.get_type();
        for hooks in ["_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"] {
            if let Ok(h) = m.getattr(hooks) {
                if h.len().unwrap_or(0) > 0 {
                    unsupported!("module {} has {hooks}", type_name(m));
                }
            }
        }
        let gh = py.import("torch.nn.modules.module")?;
        for hooks in ["_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks"] {
            if let Ok(h) = gh.getattr(hooks) {
                if h.len().unwrap_or(0) > 0 {
                    unsupported!("global module {hooks} are registered");
                }
            }
        }
        // Hooks and an instance-level `forward` change what calling the module does:
        // guard that they stay absent.
        if let Some(s) = source {
            for hooks in ["_forward_hooks", "_forward_pre_hooks"] {
                self.og.add_guard(Some(s.attr(hooks)), crate::guards::GuardKind::LenMatch(0));
            }
            self.og.add_guard(Some(s.clone()), crate::guards::GuardKind::NoInstanceAttr("forward".into()));
        }
        if m.getattr("__dict__")?.contains("forward")? {
            unsupported!("module {} has an instance-level forward", type_name(m));
        }
        let fwd = cls.getattr("forward")?;
        if type_name(&fwd) != "function" {
            unsupported!("module {} forward is not a Python function", type_name(m));
        }
        let f = VT::Function { obj: Rc::new(fwd.unbind()), source: source.as_ref().map(|s| s.attr("forward").attr("__func__")) };
        let mut all = vec![func.clone()];
        all.extend(args);
        self.inline_call(py, &f, all, kwargs)
    }

    /// Calls `func(*args, **kwargs)` symbolically.
    pub fn call(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if let VT::Function { obj, .. } = func {
            if let Some(sig) = self.inspect_signature(py, obj.bind(py), &args, &kwargs)? {
                return Ok(sig);
            }
        }
        if let VT::Class(c) = func {
            // A builtin exception class called with constant arguments: the exception object
            // itself (it has no effects), so `raise KeyError(k)` can be raised in the trace.
            let c = c.bind(py);
            let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            let is_exc = c.cast::<pyo3::types::PyType>().map(|t| t.is_subclass_of::<pyo3::exceptions::PyBaseException>().unwrap_or(false)).unwrap_or(false);
            if module == "builtins" && is_exc && kwargs.is_empty() {
                if let Some(vals) = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>() {
                    return Ok(VT::constant(c.call1(PyTuple::new(py, vals)?)?.unbind()));
                }
            }
        }
        match func {
            VT::Function { obj, .. } if obj.bind(py).is(self.og.handles.module_call.bind(py)) && matches!(args.first(), Some(VT::Module { .. })) => {
                // `nn.Module.__call__(m, ...)` (from a `__call__` override's `super().__call__`):
                // Note [module __call__ override].
                let mut args = args;
                let m = args.remove(0);
                self.call_module(py, &m, args, kwargs)
            }
            VT::Function { .. } | VT::NestedFunction(_) => self.inline_call(py, func, args, kwargs),
            VT::Method { func, self_ } => {
                let mut all = vec![(**self_).clone()];
                all.extend(args);
                self.call(py, func, all, kwargs)
            }
            VT::Module { obj, source } => {
                let m = obj.bind(py);
                let call = m.get_type().getattr("__call__")?;
                if !call.is(self.og.handles.module_call.bind(py)) {
                    // Note [module __call__ override]: a Python `__call__` of the module's class
                    // (transformers' GradientCheckpointingLayer) is inlined like any method; its
                    // `super().__call__(...)` reaches `nn.Module.__call__`, which runs the module
                    // as below (`call_module`).
                    if type_name(&call) == "function" {
                        let f = VT::Function { obj: Rc::new(call.unbind()), source: source.as_ref().map(|s| s.attr("__call__").attr("__func__")) };
                        let mut all = vec![func.clone()];
                        all.extend(args);
                        return self.inline_call(py, &f, all, kwargs);
                    }
                    unsupported!("module {} overrides __call__", type_name(m));
                }
                self.call_module(py, func, args, kwargs)
            }
            VT::Class(c) if self.grad_mode_class(py, c.bind(py))?.is_some() => {
                let kind = self.grad_mode_class(py, c.bind(py))?.unwrap();
                let prev = self.grad_enabled(py)?;
                match kind {
                    "no_grad" => Ok(VT::GradModeCtx { enabled: false, set_on_create: false, prev }),
                    "enable_grad" => Ok(VT::GradModeCtx { enabled: true, set_on_create: false, prev }),
                    _ => {
                        let flag = match args.first().or(kwargs.first().map(|(_, v)| v)).and_then(|a| a.as_constant(py)) {
                            Some(f) => f.is_truthy()?,
                            None => graph_break!(UnsupportedCall, "set_grad_enabled with a non-constant flag"),
                        };
                        self.set_grad_enabled(py, flag)?;
                        Ok(VT::GradModeCtx { enabled: flag, set_on_create: true, prev })
                    }
                }
            }
            VT::TorchFunction(f) => {
                let f = f.bind(py).clone();
                let name = crate::symbolic::output_graph::qualname_full(&f);
                // Compile-state queries answer as under torch.compile: code takes its
                // compile-friendly path (torch/compiler/__init__.py).
                if COMPILING_QUERIES.contains(&name.as_str()) {
                    return Ok(const_bool(py, true));
                }
                if name == "torch.compiler.is_exporting" {
                    return Ok(const_bool(py, false));
                }
                if let Some(v) = self.environment_query(py, &f, &name, &args, &kwargs)? {
                    return Ok(v);
                }
                if ["seed", "set_", "manual_seed", "_set", "use_deterministic", "compile", "_dynamo", "autograd.grad", "backward", "no_grad", "enable_grad"]
                    .iter()
                    .any(|d| name.contains(d))
                {
                    graph_break!(UnsupportedCall, "call to {name} is not traced");
                }
                if type_name(&f) == "type" {
                    unsupported!("constructing {name}");
                }
                // An optimizer's or LR scheduler's method (`opt.zero_grad()`, `opt.step()`,
                // `sched.step()`) is Python code over the optimizer object's state, not a
                // tensor op: it runs as ordinary Python (torch.compile leaves zero_grad to eager
                // too, `torch._disable_dynamo`), with the parameters and state it updates for real.
                if type_name(&f) == "function" && name.starts_with("torch.optim.") && is_method_qualname(&f) {
                    graph_break!(UnsupportedCall, "call to {name} runs eagerly (optimizer and LR scheduler methods are not captured)");
                }
                if let Some(r) = self.sym_scalar_tensor(py, &name, &args, &kwargs)? {
                    return Ok(r);
                }
                self.og.call(py, Some(&f), None, &args, &kwargs)
            }
            VT::TensorMethod { tensor, name } => {
                if TENSOR_METHOD_DENYLIST.contains(&name.as_str()) {
                    graph_break!(DataDependentValue, "Tensor.{name}() is not traced");
                }
                let mut all = vec![VT::Tensor(tensor.clone())];
                all.extend(args);
                self.og.call(py, None, Some(name), &all, &kwargs)
            }
            VT::Class(c) if crate::symbolic::variables::namedtuple_constructor(py, c.bind(py))?.is_some() => {
                // namedtuple's generated `__new__(cls, a, b, ...)`: fields by position or name,
                // missing ones from `_field_defaults`.
                let (fields, defaults) = crate::symbolic::variables::namedtuple_constructor(py, c.bind(py))?.expect("checked");
                if args.len() > fields.len() {
                    unsupported!("{}() takes {} arguments but {} were given (TypeError)", func.describe(py), fields.len(), args.len());
                }
                let mut slots: Vec<Option<VT>> = vec![None; fields.len()];
                for (i, a) in args.into_iter().enumerate() {
                    slots[i] = Some(a);
                }
                for (k, v) in kwargs {
                    match fields.iter().position(|f| *f == k) {
                        Some(i) if slots[i].is_none() => slots[i] = Some(v),
                        _ => unsupported!("{}() got an unexpected or repeated argument '{k}' (TypeError)", func.describe(py)),
                    }
                }
                let mut items = Vec::with_capacity(fields.len());
                for (name, slot) in fields.iter().zip(slots) {
                    items.push(match slot {
                        Some(v) => v,
                        None => match defaults.get_item(name)? {
                            Some(d) if is_literal(py, &d) => VT::constant(d.unbind()),
                            Some(_) => unsupported!("namedtuple default of field '{name}' is not a literal"),
                            None => unsupported!("{}() missing argument '{name}' (TypeError)", func.describe(py)),
                        },
                    });
                }
                Ok(VT::NamedTuple { cls: c.clone(), items: Rc::new(items) })
            }
            VT::Class(c) if self.is_trackable_class(py, c.bind(py))? => {
                let c = c.clone();
                self.construct_user_object(py, &c, args, kwargs)
            }
            VT::Class(c) if self.is_torch_nn_class(py, c.bind(py))? => {
                let c = c.bind(py).clone();
                self.construct_module(py, &c, &args, &kwargs)
            }
            VT::Builtin(b) | VT::Class(b) => {
                let b = b.bind(py).clone();
                self.call_builtin(py, &b, args, kwargs)
            }
            VT::Constant(c) if c.bind(py).is_callable() => {
                let vals: Option<Vec<_>> = args.iter().map(|a| a.as_constant(py)).collect();
                let kw = PyDict::new(py);
                for (k, v) in &kwargs {
                    kw.set_item(k, v.as_constant(py).ok_or_else(|| Unsupported::new("non-constant keyword"))?)?;
                }
                match vals {
                    Some(vals) => {
                        let r = c.bind(py).call(PyTuple::new(py, vals)?, Some(&kw))?;
                        if !is_literal(py, &r) {
                            unsupported!("constant method returned a non-literal");
                        }
                        Ok(VT::constant(r.unbind()))
                    }
                    None => unsupported!("method of a constant called with non-constant arguments"),
                }
            }
            VT::ContainerMethod { container, name } => self.call_container_method(py, container, name, args, kwargs),
            VT::Partial(p) => {
                // `func(*p.args, *args, **{**p.keywords, **kwargs})` (`partial_call`).
                let mut all = p.args.clone();
                all.extend(args);
                let mut kw = crate::symbolic::partial::keyword_items(py, &p.keywords)?;
                for (k, v) in kwargs {
                    match kw.iter_mut().find(|(n, _)| *n == k) {
                        Some(slot) => slot.1 = v,
                        None => kw.push((k, v)),
                    }
                }
                let func = p.func.clone();
                self.call(py, &func, all, kw)
            }
            VT::LoggerMethod { logger, name } => {
                let VT::Opaque { source, .. } = logger.as_ref() else { unsupported!("{} on a logger without a source", func.describe(py)) };
                let consts = args.iter().map(|a| a.as_constant(py).filter(|_| matches!(a, VT::Constant(_)))).collect::<Option<Vec<_>>>();
                let kw = kwargs.iter().map(|(k, a)| a.as_constant(py).filter(|_| matches!(a, VT::Constant(_))).map(|c| (k.clone(), c))).collect::<Option<Vec<_>>>();
                let (Some(consts), Some(kw)) = (consts, kw) else {
                    graph_break!(UntracedValue, "{} with arguments that are not constants", func.describe(py));
                };
                let kwargs = if kw.is_empty() {
                    None
                } else {
                    let d = PyDict::new(py);
                    for (k, v) in kw {
                        d.set_item(k, v)?;
                    }
                    Some(d.into_any().unbind())
                };
                self.og.side_effects.logger_calls.push(crate::symbolic::side_effects::LoggerCall {
                    logger: source.clone(),
                    name: name.clone(),
                    args: PyTuple::new(py, consts)?.into_any().unbind(),
                    kwargs,
                });
                Ok(VT::none(py))
            }
            VT::GradModeExit { restore } => {
                let restore = *restore;
                self.set_grad_enabled(py, restore)?;
                Ok(VT::none(py))
            }
            VT::GenericAttr { obj: inner, set } if matches!(inner.as_ref(), VT::UserObject(_)) => {
                let VT::UserObject(o) = inner.as_ref() else { unreachable!() };
                let name: String = match args.first().and_then(|a| a.as_constant(py)) {
                    Some(n) => n.extract()?,
                    None => unsupported!("{} with a non-constant name", func.describe(py)),
                };
                if *set {
                    if args.len() != 2 {
                        unsupported!("object.__setattr__ with {} arguments", args.len());
                    }
                    let o = o.clone();
                    self.user_object_setattr(py, inner, &o, &name, args[1].clone(), true)?;
                    return Ok(VT::none(py));
                }
                let o = o.clone();
                self.user_object_getattr(py, inner, &o, &name)
            }
            VT::GenericAttr { obj: inner, set } => {
                let VT::Opaque { obj: o, source } = inner.as_ref() else {
                    unsupported!("{} on {}", func.describe(py), inner.describe(py));
                };
                let name: String = match args.first().and_then(|a| a.as_constant(py)) {
                    Some(n) => n.extract()?,
                    None => unsupported!("{} with a non-constant name", func.describe(py)),
                };
                let o = o.bind(py).clone();
                if *set {
                    let ty = o.get_type();
                    let descriptor = match static_type_lookup(&ty, &name)? {
                        Some((_, ca)) => is_data_descriptor(&ca)?,
                        None => false,
                    };
                    if descriptor || args.len() != 2 || !crate::guards::generic_getattr(&o, "__dict__").is_some() {
                        graph_break!(SideEffect, "object.__setattr__ of {}.{name} (a descriptor)", inner.describe(py));
                    }
                    // Replayed as object.__setattr__: a plain STORE_ATTR would run the class's
                    // own __setattr__ (the frame this write may come from).
                    self.record_attr_write(py, &o, source, &name, args[1].clone(), true)?;
                    return Ok(VT::none(py));
                }
                self.generic_getattr(py, inner, &o, source, &name)
            }
            other @ VT::Opaque { .. } => graph_break!(UntracedValue, "call to {}", other.describe(py)),
            other => unsupported!("call to {}", other.describe(py)),
        }
    }

    fn call_container_method(&mut self, py: Python<'_>, container: &VT, name: &str, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if let (VT::NamedTuple { items, .. }, "numel") = (container, name) {
            // `torch.Size.numel()` (torch/csrc/Size.cpp: the product of the sizes, 1 when empty)
            // over symbolic sizes: `mul` nodes, so the count stays symbolic.
            if !args.is_empty() || !kwargs.is_empty() {
                unsupported!("torch.Size.numel() takes no arguments");
            }
            let Some(first) = items.first() else {
                return Ok(VT::constant(1i64.into_pyobject(py)?.into_any().unbind()));
            };
            let mut acc = first.clone();
            for i in items.iter().skip(1) {
                acc = self.operator(py, "mul", vec![acc, i.clone()])?;
            }
            return Ok(acc);
        }
        // The special methods behind the syntax, called by name (`a.__setitem__(0, v)` is
        // `a[0] = v`): the same slots CPython's opcodes reach (Objects/listobject.c,
        // Objects/dictobject.c), so they share the opcode's implementation here.
        if kwargs.is_empty() && name.starts_with("__") {
            match (container, name, args.len()) {
                (_, "__setitem__", 2) => {
                    self.setitem(py, container, args[0].clone(), args[1].clone())?;
                    return Ok(VT::none(py));
                }
                (_, "__delitem__", 1) => {
                    self.delitem(py, container, args[0].clone())?;
                    return Ok(VT::none(py));
                }
                (VT::List(_) | VT::Dict(_), "__getitem__", 1) => return self.getitem(py, container, &args[0]),
                (_, "__contains__", 1) => {
                    let found = self.contains(py, container, &args[0])?;
                    return Ok(const_bool(py, found));
                }
                (_, "__len__", 0) => {
                    let len = self.og.handles.builtins.bind(py).getattr("len")?;
                    return self.call_builtin(py, &len, vec![container.clone()], vec![]);
                }
                (_, "__iter__", 0) => return Ok(VT::Iterator(self.make_iter(py, container)?)),
                // `list.__iadd__` extends in place and returns the list itself; `dict.__ior__`
                // updates in place and returns the dict; `set.__ior__` and friends likewise.
                (VT::List(_), "__iadd__", 1) => {
                    self.call_container_method(py, container, "extend", args, vec![])?;
                    return Ok(container.clone());
                }
                (VT::Dict(_), "__ior__", 1) => {
                    if !matches!(&args[0], VT::Dict(_)) && args[0].as_constant(py).map(|c| !c.is_instance_of::<PyDict>()).unwrap_or(true) {
                        graph_break!(UnsupportedCall, "dict.__ior__ with {}", args[0].describe(py));
                    }
                    self.call_container_method(py, container, "update", args, vec![])?;
                    return Ok(container.clone());
                }
                (VT::Set(_), "__ior__" | "__iand__" | "__isub__" | "__ixor__", 1) => {
                    let op = &name[2..name.len() - 2];
                    return self.binary(py, op, container.clone(), args[0].clone());
                }
                _ => graph_break!(UnsupportedCall, "{}.{name}() is not modelled", container.describe(py)),
            }
        }
        if !kwargs.is_empty() && !matches!((container, name), (VT::Dict(_), "update")) {
            unsupported!("{}.{name}() with keyword arguments", container.describe(py));
        }
        match (container, name) {
            (VT::List(l), "append" | "extend" | "insert" | "pop" | "clear" | "reverse") => {
                if l.borrow().source.is_some() {
                    self.og.side_effects.mutate_list(l);
                }
                let mut extend_items = None;
                if name == "extend" {
                    extend_items = Some(self.unpack(py, &args[0])?);
                }
                let mut l = l.borrow_mut();
                match name {
                    "append" => l.items.push(args[0].clone()),
                    "extend" => l.items.extend(extend_items.unwrap()),
                    "clear" => l.items.clear(),
                    "reverse" => l.items.reverse(),
                    "insert" => {
                        let k: i64 = args[0].as_constant(py).ok_or_else(|| Unsupported::new("insert index"))?.extract()?;
                        let n = l.items.len() as i64;
                        let k = if k < 0 { (k + n).max(0) } else { k.min(n) };
                        l.items.insert(k as usize, args[1].clone());
                    }
                    _ => {
                        let k: i64 = match args.first() {
                            Some(a) => a.as_constant(py).ok_or_else(|| Unsupported::new("pop index"))?.extract()?,
                            None => -1,
                        };
                        let n = l.items.len() as i64;
                        let k = if k < 0 { k + n } else { k };
                        if k < 0 || k >= n {
                            unsupported!("pop index out of range");
                        }
                        return Ok(l.items.remove(k as usize));
                    }
                }
                Ok(VT::none(py))
            }
            (VT::List(l), "index" | "count") => {
                let items = l.borrow().items.clone();
                let consts: Option<Vec<_>> = items.iter().map(|i| i.as_constant(py)).collect();
                let x = args[0].as_constant(py);
                match (consts, x) {
                    (Some(c), Some(x)) => Ok(VT::constant(PyList::new(py, c)?.call_method1(name, (x,))?.unbind())),
                    _ => unsupported!("list.{name} over non-constant items"),
                }
            }
            (VT::Set(set), "add" | "discard" | "remove" | "update" | "clear") => {
                let items = match name {
                    "update" => args.iter().map(|a| self.iter_items(py, a)).collect::<VResult<Vec<_>>>()?.concat(),
                    "clear" => vec![],
                    _ => args.clone(),
                };
                let consts = self.set_members_of(py, &items)?;
                let set = set.borrow();
                let set = set.bind(py);
                match name {
                    "update" => {
                        for c in consts {
                            set.call_method1("add", (c,))?;
                        }
                    }
                    "clear" => {
                        set.call_method0("clear")?;
                    }
                    _ => {
                        set.call_method1(name, (consts[0].clone(),))?;
                    }
                }
                Ok(VT::none(py))
            }
            (VT::Dict(d), "items" | "keys" | "values") if args.is_empty() => {
                let view = match name {
                    "items" => DictView::Items,
                    "keys" => DictView::Keys,
                    _ => DictView::Values,
                };
                Ok(VT::DictView { dict: d.clone(), view })
            }
            (VT::Dict(d), "update" | "pop" | "setdefault" | "clear") => {
                let mut new_items: Vec<(Py<PyAny>, VT)> = match (name, args.first()) {
                    ("update", Some(other)) if args.len() == 1 => self.mapping_items(py, other)?,
                    ("update", None) => vec![],
                    ("update", _) => unsupported!("dict.update() with {} arguments", args.len()),
                    _ => vec![],
                };
                for (k, v) in kwargs {
                    new_items.push((PyString::new(py, &k).into_any().unbind(), v));
                }
                let key = match name {
                    "pop" | "setdefault" => Some(args.first().and_then(|a| a.as_constant(py)).ok_or_else(|| Unsupported::new("dict key is not a constant"))?),
                    _ => None,
                };
                let result = {
                    let mut st = d.borrow_mut();
                    let pos = match &key {
                        Some(k) => st.items.iter().position(|(kk, _)| kk.bind(py).eq(k).unwrap_or(false)),
                        None => None,
                    };
                    match name {
                        "update" => {
                            for (k, v) in new_items {
                                dict_set(py, &mut st, k, v)?;
                            }
                            VT::none(py)
                        }
                        "clear" => {
                            if !st.items.is_empty() {
                                st.version += 1;
                            }
                            st.items.clear();
                            VT::none(py)
                        }
                        "pop" => match (pos, args.get(1)) {
                            (Some(i), _) => {
                                st.version += 1;
                                st.items.remove(i).1
                            }
                            (None, Some(default)) => default.clone(),
                            (None, None) => unsupported!("dict.pop() of a missing key (KeyError)"),
                        },
                        _ => match pos {
                            Some(i) => st.items[i].1.clone(),
                            None => {
                                let v = args.get(1).cloned().unwrap_or_else(|| VT::none(py));
                                st.items.push((key.clone().expect("setdefault key").unbind(), v.clone()));
                                st.version += 1;
                                v
                            }
                        },
                    }
                };
                if d.borrow().source.is_some() {
                    self.og.side_effects.mutate_dict(d);
                }
                Ok(result)
            }
            (VT::Dict(d), "get") => {
                let k = args[0].as_constant(py).ok_or_else(|| Unsupported::new("dict key is not a constant"))?;
                for (key, v) in &d.borrow().items {
                    if key.bind(py).eq(&k)? {
                        return Ok(v.clone());
                    }
                }
                Ok(args.get(1).cloned().unwrap_or_else(|| VT::none(py)))
            }
            _ => unsupported!("{}.{name}()", container.describe(py)),
        }
    }

    /// Which grad-mode context class `c` is (`torch.no_grad`, `torch.enable_grad`,
    /// `torch.set_grad_enabled`), if any.
    fn grad_mode_class(&self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<Option<&'static str>> {
        let torch = self.og.handles.torch.bind(py);
        for name in ["no_grad", "enable_grad", "set_grad_enabled"] {
            if torch.getattr(name)?.is(c) {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }

    /// `inspect.signature(f)` of a function or bound method whose function object the trace
    /// pins (an ID or code guard): computed now, on the real function, as a constant. A
    /// `Signature` is immutable (`replace` makes a new one), so a constant is exact; what it
    /// depends on beyond the code (defaults, annotations) is read once, as torch's
    /// `InspectSignatureVariable` does. Tracing inspect's own code instead runs into `id()` and
    /// unwrap loops (transformers' `apply_chunking_to_forward` asks it in every BERT layer).
    /// `None`: not this call, trace it as usual.
    fn inspect_signature(&mut self, py: Python<'_>, f: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        // Checked on every traced call: compare against the function looked up once.
        static SIGNATURE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        let signature = SIGNATURE.get_or_try_init(py, || py.import("inspect")?.getattr("signature").map(Bound::unbind))?.bind(py);
        if !f.is(signature) || args.len() != 1 || !kwargs.is_empty() {
            return Ok(None);
        }
        let target = match &args[0] {
            VT::Function { obj, .. } => obj.bind(py).clone(),
            VT::Method { func, self_ } => {
                let (VT::Function { obj, .. }, Some(this)) = (func.as_ref(), real_object(self_)) else { return Ok(None) };
                py.import("types")?.getattr("MethodType")?.call1((obj.bind(py), this.bind(py)))?
            }
            _ => return Ok(None),
        };
        self.pin_identity(&args[0]);
        match signature.call1((target,)) {
            Ok(sig) => Ok(Some(VT::constant(sig.unbind()))),
            Err(_) => Ok(None),
        }
    }

    /// Python builtins (and builtin types used as functions) with tracker arguments.
    fn call_builtin(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        // A builtin given a symbolic size (`max(3, x.shape[0])`, `int(n)`, `range(t)`) sees its
        // value: specialized, with a guard in the ShapeEnv (Note [symbolic sizes]).
        let specialize = |v: VT| -> VResult<VT> {
            match &v {
                VT::SymNum(_) => Ok(VT::constant(v.as_constant(py).ok_or_else(|| Unsupported::new("symbolic number without a value"))?.unbind())),
                _ => Ok(v),
            }
        };
        if kwargs.is_empty() && args.iter().any(|a| matches!(a, VT::SymNum(_))) {
            if let Some(r) = self.sym_builtin(py, b, &args)? {
                return Ok(r);
            }
        }
        let args = args.into_iter().map(specialize).collect::<VResult<Vec<_>>>()?;
        let kwargs = kwargs.into_iter().map(|(k, v)| Ok((k, specialize(v)?))).collect::<VResult<Vec<_>>>()?;
        let builtins = self.og.handles.builtins.bind(py).clone();
        let is = |name: &str| builtins.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let all_const = args.iter().all(|a| matches!(a, VT::Constant(_))) && kwargs.iter().all(|(_, a)| matches!(a, VT::Constant(_)));
        if let Some(r) = self.call_unbound_descriptor(py, b, &args, &kwargs)? {
            return Ok(r);
        }
        if b.is(&crate::symbolic::partial::partial_type(py)?) {
            return self.make_partial(py, args, kwargs);
        }
        if is("callable") && args.len() == 1 && kwargs.is_empty() {
            if let Some(c) = self.is_callable(py, &args[0])? {
                return Ok(const_bool(py, c));
            }
        }
        if is("setattr") && args.len() == 3 && kwargs.is_empty() {
            // `setattr(o, name, v)` is `o.name = v` (Python/bltinmodule.c, `builtin_setattr`
            // calls `PyObject_SetAttr`, the slot STORE_ATTR uses too).
            let name: String = match args[1].as_constant(py).and_then(|n| n.extract::<String>().ok()) {
                Some(n) => n,
                None => graph_break!(UnsupportedBuiltin, "setattr with a non-constant or non-string name"),
            };
            self.store_attr(py, &args[0], &name, args[2].clone())?;
            return Ok(VT::none(py));
        }
        if is("super") {
            return self.make_super(&args);
        }
        if is("len") {
            if let Some(m) = self.python_dunder(py, &args[0], "__len__")? {
                // `builtin_len` -> `PyObject_Size`: the slot's result must be a non-negative int
                // (else TypeError / ValueError, left to Python).
                let n = self.call(py, &m, vec![], vec![])?;
                return match n.as_constant(py).and_then(|c| c.extract::<i64>().ok()) {
                    Some(k) if k >= 0 && n.as_constant(py).map(|c| c.is_instance_of::<pyo3::types::PyInt>()).unwrap_or(false) => Ok(n),
                    _ => graph_break!(UntracedValue, "len() of {}: __len__ gave {}", args[0].describe(py), n.describe(py)),
                };
            }
            if let VT::UserObject(o) = &args[0] {
                if let Some(storage) = o.storage_slot(py, "__len__")? {
                    return self.call_builtin(py, b, vec![storage], kwargs);
                }
            }
            return Ok(match &args[0] {
                VT::Tensor(t) if self.og.shape_env.is_some() && t.fake.bind(py).call_method0("dim").and_then(|d| d.extract::<usize>()).unwrap_or(0) > 0 => {
                    // `len(x)` is `x.size(0)`, symbolic for a dynamic first dimension.
                    let zero = VT::constant(0i64.into_pyobject(py)?.into_any().unbind());
                    self.og.call(py, None, Some("size"), &[args[0].clone(), zero], &[])?
                }
                VT::Tensor(t) => VT::constant(t.fake.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Module { obj, .. } => VT::constant(obj.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Constant(c) => VT::constant(c.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Dict(d) | VT::DictView { dict: d, .. } => VT::constant(d.borrow().items.len().into_pyobject(py)?.into_any().unbind()),
                VT::Set(set) => VT::constant(set.borrow().bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Opaque { obj, source } if obj.bind(py).is_instance_of::<pyo3::types::PyDict>() && obj.bind(py).get_type().getattr("__len__")?.is(py.get_type::<pyo3::types::PyDict>().getattr("__len__")?) => {
                    // A dict of a type kept as an opaque object (a module's `_forward_hooks`
                    // OrderedDict): `dict.__len__` runs no user code; its type is guarded where
                    // it was wrapped, its size here.
                    let n = obj.bind(py).len()?;
                    self.og.add_guard(Some(source.clone()), GuardKind::LenMatch(n));
                    VT::constant(n.into_pyobject(py)?.into_any().unbind())
                }
                other => {
                    let n = self.unpack(py, other)?.len();
                    VT::constant(n.into_pyobject(py)?.into_any().unbind())
                }
            });
        }
        if is("isinstance") {
            let cls = match &args[1] {
                VT::Class(c) => c.bind(py).clone(),
                VT::Constant(c) => c.bind(py).clone(),
                VT::Tuple(items) => {
                    let cs: VResult<Vec<_>> = items.iter().map(|i| match i {
                        VT::Class(c) => Ok(c.bind(py).clone()),
                        _ => unsupported!("isinstance with a non-class"),
                    }).collect();
                    PyTuple::new(py, cs?)?.into_any()
                }
                _ => unsupported!("isinstance with {}", args[1].describe(py)),
            };
            let r = match &args[0] {
                VT::Tensor(t) => {
                    // Fake tensors are instances of the real tensor classes for isinstance purposes;
                    // ask about the real input type when there is one.
                    let probe = t.fake.bind(py).clone();
                    let tensor_type = self.og.handles.tensor_type.bind(py).clone();
                    let is_param = t.source.as_ref().map(|_| probe.getattr("__class__").map(|c| c.is(self.og.handles.parameter_type.bind(py))).unwrap_or(false)).unwrap_or(false);
                    let _ = is_param;
                    let sample = tensor_type.call_method1("__new__", (&tensor_type,)).ok();
                    match sample {
                        Some(s) => s.is_instance(&cls)?,
                        None => probe.is_instance(&cls)?,
                    }
                }
                VT::Constant(c) => c.bind(py).is_instance(&cls)?,
                VT::Module { obj, .. } | VT::Opaque { obj, .. } => obj.bind(py).is_instance(&cls)?,
                VT::Tuple(_) => py.get_type::<PyTuple>().is_subclass(&cls).unwrap_or(false) || cls.is(py.get_type::<PyTuple>()),
                VT::NamedTuple { .. } | VT::DictView { .. } | VT::Partial(_) | VT::UserObject(_) => {
                    let ty = self.type_of(py, &args[0])?.expect("a known type");
                    ty.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?
                }
                VT::List(_) => cls.is(py.get_type::<PyList>()) || py.get_type::<PyList>().is_subclass(&cls).unwrap_or(false),
                VT::Dict(_) => cls.is(py.get_type::<PyDict>()) || py.get_type::<PyDict>().is_subclass(&cls).unwrap_or(false),
                VT::Function { obj, .. } | VT::TorchFunction(obj) | VT::Builtin(obj) | VT::Class(obj) => obj.bind(py).is_instance(&cls)?,
                // A bound method (of a module, a user object...) is a `types.MethodType`
                // (Objects/classobject.c), whatever it is bound to.
                VT::Method { .. } => {
                    let method_type = py.import("types")?.getattr("MethodType")?;
                    method_type.cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?
                }
                other => unsupported!("isinstance of {}", other.describe(py)),
            };
            return Ok(const_bool(py, r));
        }
        if is("getattr") || is("hasattr") {
            let name: String = args[1].as_constant(py).ok_or_else(|| Unsupported::new("getattr with a non-constant name"))?.extract()?;
            // Only objects whose attributes cannot change under us (constants, classes, Python
            // modules, static tensor metadata) may answer "missing"; for anything else a lookup
            // we cannot trace is unsupported, never "absent".
            let known_missing = match &args[0] {
                VT::Constant(o) | VT::Class(o) => Some(!o.bind(py).hasattr(name.as_str())?),
                VT::PyModule { obj, .. } => Some(!obj.bind(py).hasattr(name.as_str())?),
                // A real tensor can carry instance attributes the fake one lacks: only a class
                // attribute is known present; anything else is not decided here.
                // A tensor made by the graph has no instance attributes; a graph input is asked
                // for real and guarded (`hasattr(t, "jax")` in transformers answers False).
                VT::Tensor(t) => {
                    if t.fake.bind(py).get_type().hasattr(name.as_str())? {
                        Some(false)
                    } else {
                        match &t.source {
                            None => Some(true),
                            Some(src) => {
                                let real = self.og.inputs.iter().find(|(s, _)| s == src).map(|(_, v)| v.clone_ref(py));
                                match real {
                                    Some(r) if !r.bind(py).hasattr(name.as_str())? => {
                                        self.og.add_guard(Some(src.clone()), GuardKind::NoAttr(name.clone()));
                                        Some(true)
                                    }
                                    _ => None,
                                }
                            }
                        }
                    }
                }
                VT::Opaque { .. } | VT::Module { .. } => Some(self.attr_absent(py, &args[0], &name)?),
                // A new object: its instance attributes are all in the tracker; the class is
                // asked (and guarded through its source).
                VT::UserObject(o) => {
                    if o.get(py, &name).is_some() {
                        Some(false)
                    } else if o.cls.bind(py).hasattr(name.as_str())? {
                        None
                    } else {
                        self.og.add_guard(Some(o.cls_source.clone()), GuardKind::NoAttr(name.clone()));
                        Some(true)
                    }
                }
                _ => None,
            };
            if known_missing == Some(true) {
                return match (is("hasattr"), args.get(2)) {
                    (true, _) => Ok(const_bool(py, false)),
                    (false, Some(default)) => Ok(default.clone()),
                    (false, None) => unsupported!("getattr of a missing attribute '{name}'"),
                };
            }
            // CPython's `builtin_getattr` / `builtin_hasattr`: an AttributeError from the
            // lookup (here one the trace raised, with the guards that keep it raised) gives
            // the default or False; any other error propagates.
            return match (self.getattr(py, &args[0], &name), is("hasattr"), args.get(2)) {
                (Ok(_), true, _) => Ok(const_bool(py, true)),
                (Ok(v), false, _) => Ok(v),
                (Err(e), true, _) if e.is_raised("AttributeError") => Ok(const_bool(py, false)),
                (Err(e), false, Some(default)) if e.is_raised("AttributeError") => Ok(default.clone()),
                (Err(e), _, _) => Err(e),
            };
        }
        if is("range") && all_const {
            let vals: Vec<_> = args.iter().map(|a| a.as_constant(py).unwrap()).collect();
            return Ok(VT::constant(b.call1(PyTuple::new(py, vals)?)?.unbind()));
        }
        // Iterator builtins make lazy iterators over live iterators of their arguments, stepped
        // as CPython steps them (a loop body that mutates the list being walked sees it).
        if is("enumerate") && args.len() <= 2 && kwargs.iter().all(|(k, _)| k == "start") && !args.is_empty() {
            let start = match args.get(1).or(kwargs.first().map(|(_, v)| v)) {
                Some(s) => s.as_constant(py).ok_or_else(|| Unsupported::new("enumerate start is not a constant"))?,
                None => 0i64.into_pyobject(py)?.into_any(),
            };
            let count: i64 = start.extract().map_err(|_| Unsupported::new("enumerate start is not a small int"))?;
            let inner = self.make_iter(py, &args[0])?;
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Enumerate { inner, count })))));
        }
        if is("zip") && kwargs.is_empty() {
            let inners = args.iter().map(|a| self.make_iter(py, a)).collect::<VResult<Vec<_>>>()?;
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Zip(inners))))));
        }
        if let Some(it) = self.lazy_iterator(py, b, &args, &kwargs)? {
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(it)))));
        }
        if is("iter") && args.len() == 1 {
            return Ok(VT::Iterator(self.make_iter(py, &args[0])?));
        }
        if is("reversed") && args.len() == 1 {
            if let VT::List(l) = &args[0] {
                let index = l.borrow().items.len() as i64 - 1;
                return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::ListReversed { list: l.clone(), index })))));
            }
            if let VT::Tuple(items) | VT::NamedTuple { items, .. } = &args[0] {
                let mut items = items.as_ref().clone();
                items.reverse();
                return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::over(items)))));
            }
            if matches!(&args[0], VT::Dict(_) | VT::DictView { .. }) {
                unsupported!("reversed() of a dict or dict view");
            }
        }
        if is("bool") && args.len() == 1 && kwargs.is_empty() && matches!(args[0], VT::UserObject(_) | VT::List(_) | VT::Dict(_) | VT::DictView { .. } | VT::Tuple(_) | VT::NamedTuple { .. }) {
            // `bool(v)` is the truth test of `if v:` (`PyObject_IsTrue`).
            let t = self.truth(py, &args[0])?;
            return Ok(const_bool(py, t));
        }
        if is("dict") && args.len() <= 1 {
            let mut items: Vec<(Py<PyAny>, VT)> = Vec::new();
            let pairs = match args.first() {
                Some(a) => self.mapping_items(py, a)?,
                None => vec![],
            };
            let kw = kwargs.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v));
            let mut st = DictState { items: Vec::new(), source: None, version: 0 };
            for (k, v) in pairs.into_iter().chain(kw) {
                dict_set(py, &mut st, k, v)?;
            }
            items.append(&mut st.items);
            return Ok(new_dict(items));
        }
        if is("set") && args.len() <= 1 && kwargs.is_empty() {
            let items = match args.first() {
                Some(a) => self.iter_items(py, a)?,
                None => vec![],
            };
            return self.new_set(py, &items);
        }
        if is("list") || is("tuple") {
            let items = match args.first() {
                Some(a) => self.iter_items(py, a)?,
                None => vec![],
            };
            return if is("list") { Ok(new_list(items)) } else { make_tuple(py, items) };
        }
        if (is("min") || is("max")) && args.len() >= 1 && !all_const {
            let items = if args.len() == 1 { self.iter_items(py, &args[0])? } else { args.clone() };
            if items.iter().all(|i| matches!(i, VT::Constant(_))) {
                let vals: Vec<_> = items.iter().map(|a| a.as_constant(py).unwrap()).collect();
                return Ok(VT::constant(b.call1((PyTuple::new(py, vals)?,))?.unbind()));
            }
            unsupported!("min/max over tensors");
        }
        if is("abs") && matches!(args.first(), Some(VT::Tensor(_))) {
            return self.operator(py, "abs", args);
        }
        if is("type") && args.len() == 1 {
            if let Some(ty) = self.type_of(py, &args[0])? {
                return Ok(VT::Class(Rc::new(ty)));
            }
        }
        if is("next") && (args.len() == 1 || args.len() == 2) {
            if let VT::Iterator(it) = &args[0] {
                let item = self.step_iter(py, it)?;
                return match (item, args.get(1)) {
                    (Some(v), _) => Ok(v),
                    (None, Some(default)) => Ok(default.clone()),
                    (None, None) => graph_break!(UnsupportedCall, "next() of an exhausted iterator (StopIteration)"),
                };
            }
        }
        if is("print") || is("input") || is("open") || is("exec") || is("eval") || is("setattr") || is("delattr") || is("globals") || is("locals") || is("vars") || is("id") || is("super") {
            graph_break!(UnsupportedBuiltin, "call to builtin {}", crate::symbolic::variables::qualname(b));
        }
        if (is("str") || is("repr")) && args.len() == 1 && kwargs.is_empty() {
            if let VT::Class(c) = &args[0] {
                // `type.__repr__` (Objects/typeobject.c, `type_repr`): `<class 'module.qualname'>`
                // from the (identity-guarded) class, unless its metaclass has its own.
                let meta = c.bind(py).get_type();
                let type_type = py.get_type::<pyo3::types::PyType>();
                if meta.getattr("__repr__")?.is(type_type.getattr("__repr__")?) && meta.getattr("__str__")?.is(type_type.getattr("__str__")?) {
                    return Ok(VT::constant(c.bind(py).repr()?.into_any().unbind()));
                }
            }
        }
        // Pure builtins over literal values, including lists, tuples and sets of literals built
        // during tracing (each passed as a fresh copy, so the call cannot mutate our state).
        let literal_args: Option<Vec<Bound<'_, PyAny>>> = args.iter().map(|a| self.literal_value(py, a)).collect();
        let literal_kwargs: Option<Vec<(String, Bound<'_, PyAny>)>> = kwargs.iter().map(|(k, v)| self.literal_value(py, v).map(|v| (k.clone(), v))).collect();
        if let (Some(vals), Some(kvals)) = (literal_args, literal_kwargs) {
            let pure = ["abs", "min", "max", "round", "int", "float", "bool", "str", "tuple", "frozenset", "sum", "any", "all", "divmod", "pow", "sorted", "reversed", "repr", "hash", "type", "slice", "chr", "ord", "format", "len"];
            let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            let is_pure = pure.iter().any(|n| is(n)) || module == "math" || module == "_operator" || module == "operator" || (module == "torch" && type_name(b) == "type");
            if is_pure {
                let kw = PyDict::new(py);
                for (k, v) in kvals {
                    kw.set_item(k, v)?;
                }
                let r = b.call(PyTuple::new(py, vals)?, Some(&kw))?;
                if is_literal(py, &r) {
                    return Ok(VT::constant(r.unbind()));
                }
                if let Ok(l) = r.cast::<PyList>() {
                    if l.iter().all(|i| is_literal(py, &i)) {
                        return Ok(new_list(l.iter().map(|i| VT::constant(i.unbind())).collect()));
                    }
                }
                if type_name(&r) == "list_reverseiterator" || type_name(&r) == "reversed" {
                    let items: Vec<VT> = r.try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<_>>()?;
                    return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::over(items)))));
                }
                return self.wrap_unguarded(py, &r);
            }
        }
        if (is("any") || is("all")) && args.len() == 1 && kwargs.is_empty() {
            // Stops at the first deciding item, as CPython's does (a generator is not run further).
            let want = is("any");
            let it = self.make_iter(py, &args[0])?;
            while let Some(v) = self.step_iter(py, &it)? {
                if self.truth(py, &v)? == want {
                    return Ok(const_bool(py, want));
                }
            }
            return Ok(const_bool(py, !want));
        }
        if is("sum") || is("any") || is("all") {
            let items = self.iter_items(py, &args[0])?;
            if is("sum") {
                let mut acc = args.get(1).cloned().unwrap_or_else(|| VT::constant(0i64.into_pyobject(py).unwrap().into_any().unbind()));
                for it in items {
                    acc = self.binary(py, "add", acc, it)?;
                }
                return Ok(acc);
            }
        }
        // operator.* functions from user code (operator.add(x, y)).
        let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "_operator" && args.iter().any(|a| matches!(a, VT::Tensor(_))) {
            return self.og.call(py, Some(b), None, &args, &kwargs);
        }
        graph_break!(UnsupportedCall, "call to {} with {}", crate::symbolic::variables::qualname(b), args.iter().map(|a| a.describe(py)).collect::<Vec<_>>().join(", "))
    }

    /// Whether calling class `c` makes a tracked `UserObject`: a plain Python class
    /// (`user_objects::is_plain_class`) outside torch, reached through a source.
    fn is_trackable_class(&mut self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "torch" || module.starts_with("torch.") {
            return Ok(false);
        }
        Ok(self.og.class_sources.contains_key(&(c.as_ptr() as usize)) && crate::symbolic::user_objects::is_plain_class(py, c)?)
    }

    /// `cls(*args, **kwargs)` for a trackable class: `object.__new__` gives a fresh tracker, then
    /// `__init__` is inlined on it (`type_call` in Objects/typeobject.c); `__init__` must return
    /// None (else TypeError, left to Python).
    fn construct_user_object(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let cls_source = self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned().expect("trackable classes have a source");
        let dict_base = crate::symbolic::user_objects::has_dict_base(py, cls.bind(py))?;
        let obj = Rc::new(crate::symbolic::user_objects::UserObject::new(cls.clone_ref(py), cls_source, dict_base));
        let vt = VT::UserObject(obj.clone());
        let ty = cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        let (k, init) = static_type_lookup(&ty, "__init__")?.expect("object defines __init__");
        // `dict.__init__` / `OrderedDict.__init__` without arguments leave the storage empty;
        // with arguments they insert (OrderedDict's through the subclass's `__setitem__`).
        if init.is(py.get_type::<PyAny>().getattr("__init__")?) || type_name(&init) != "function" {
            if !args.is_empty() || !kwargs.is_empty() {
                let why = if dict_base { "arguments for the dict base's __init__" } else { "takes no arguments (TypeError)" };
                graph_break!(UnsupportedCall, "{}(): {why}", crate::symbolic::variables::qualname(cls.bind(py)));
            }
            return Ok(vt);
        }
        let func = wrap(py, self.og, &init, obj.class_attr_source(k, "__init__"))?;
        let mut all = vec![vt.clone()];
        all.extend(args);
        let r = self.call(py, &func, all, kwargs)?;
        if !r.as_constant(py).map(|c| c.is_none()).unwrap_or(false) {
            graph_break!(UnsupportedCall, "__init__ of {} returned {} (TypeError)", crate::symbolic::variables::qualname(cls.bind(py)), r.describe(py));
        }
        Ok(vt)
    }

    /// The special method `name` of a user object (new in the frame, or reached through a
    /// source) bound to it, when its class defines it as a Python function: CPython calls the
    /// type's slot, never an instance attribute (`_PyType_Lookup`), so `len(o)`, `o[i]` inline
    /// `type(o).__len__(o)`, `type(o).__getitem__(o, i)`. `None` when the class has no Python
    /// function of that name.
    fn python_dunder(&mut self, py: Python<'_>, obj: &VT, name: &str) -> VResult<Option<VT>> {
        let (ty, src) = match obj {
            VT::UserObject(o) => {
                let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                match static_type_lookup(&ty, name)? {
                    Some((k, f)) if type_name(&f) == "function" => (f, o.class_attr_source(k, name)),
                    _ => return Ok(None),
                }
            }
            VT::Opaque { obj: o, source } => {
                let ty = o.bind(py).get_type();
                match static_type_lookup(&ty, name)? {
                    Some((k, f)) if type_name(&f) == "function" => (f, class_attr_source(source, k, name)),
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let func = wrap(py, self.og, &ty, src)?;
        Ok(Some(VT::Method { func: Box::new(func), self_: Box::new(obj.clone()) }))
    }

    /// `o.name` on a new user object (see `user_objects.rs` for the lookup order).
    fn user_object_getattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::user_objects::UserObject>, name: &str) -> VResult<VT> {
        if name == "__class__" {
            return Ok(VT::Class(Rc::new(o.cls.clone_ref(py))));
        }
        let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        for base in ty.getattr("__mro__")?.try_iter()? {
            if self.og.side_effects.attr(&base?.unbind(), name).is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} after a write to its class", vt.describe(py));
            }
        }
        let class_attr = static_type_lookup(&ty, name)?;
        if let Some((k, ca)) = &class_attr {
            if name == "__dict__" && type_name(ca) == "getset_descriptor" {
                // The instance dict's own getter (`subtype_dict`, or OrderedDict's): the tracker
                // that holds the attributes, so writes through it are attribute writes.
                return Ok(VT::Dict(o.attrs.clone()));
            }
            if is_data_descriptor(ca)? {
                if type_name(ca) == "property" {
                    let fget = ca.getattr("fget")?;
                    if type_name(&fget) == "function" {
                        let func = wrap(py, self.og, &fget, o.class_attr_source(*k, name).attr("fget"))?;
                        return self.call(py, &func, vec![vt.clone()], vec![]);
                    }
                }
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca));
            }
        }
        if let Some(v) = o.get(py, name) {
            return Ok(v);
        }
        let Some((k, ca)) = class_attr else {
            if static_type_lookup(&ty, "__getattr__")?.is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} (computed by __getattr__)", vt.describe(py));
            }
            // Every instance attribute of a new object is in its tracker; the class is reached
            // through its source, guarded to keep lacking the name: the lookup raises.
            self.og.add_guard(Some(o.cls_source.clone()), GuardKind::NoAttr(name.to_string()));
            return Err(Unsupported::raise("AttributeError", format!("'{}' object has no attribute '{name}'", crate::symbolic::variables::qualname(o.cls.bind(py)))));
        };
        let src = o.class_attr_source(k, name);
        let object_type = py.get_type::<PyAny>();
        match type_name(&ca).as_str() {
            "function" => {
                let func = wrap(py, self.og, &ca, src)?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(vt.clone()) })
            }
            "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__")),
            "classmethod" => {
                let func = wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__"))?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(o.cls.clone_ref(py)))) })
            }
            "wrapper_descriptor" if ca.is(object_type.getattr("__setattr__")?) || ca.is(object_type.getattr("__getattribute__")?) => {
                Ok(VT::GenericAttr { obj: Box::new(vt.clone()), set: name == "__setattr__" })
            }
            // `o.keys` on a dict subclass that does not override it: dict's method on the
            // storage (Note [dict subclass objects]).
            "method_descriptor" | "wrapper_descriptor" if o.storage_method(py, &ca, name)?.is_some() => {
                let storage = o.storage_method(py, &ca, name)?.expect("checked");
                Ok(VT::ContainerMethod { container: Box::new(storage), name: name.to_string() })
            }
            _ if ca.get_type().hasattr("__get__")? && !ca.is_instance_of::<pyo3::types::PyType>() => {
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(&ca))
            }
            _ => wrap(py, self.og, &ca, src),
        }
    }

    /// `o.name = v` on a new user object: the class's Python `__setattr__` is inlined (a frozen
    /// dataclass's raises, which is left to Python); a data descriptor on the class is not
    /// modelled; otherwise the attribute lands in the tracker. `generic`: `object.__setattr__`.
    fn user_object_setattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::user_objects::UserObject>, name: &str, v: VT, generic: bool) -> VResult<()> {
        let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        if let Some((_, ca)) = static_type_lookup(&ty, name)? {
            if is_data_descriptor(&ca)? {
                graph_break!(SideEffect, "attribute write {}.{name} (a {} on its class)", vt.describe(py), type_name(&ca));
            }
        }
        if !generic {
            let (k, setattr) = static_type_lookup(&ty, "__setattr__")?.expect("object defines __setattr__");
            if !setattr.is(py.get_type::<PyAny>().getattr("__setattr__")?) {
                let func = wrap(py, self.og, &setattr, o.class_attr_source(k, "__setattr__"))?;
                let key = VT::constant(PyString::new(py, name).into_any().unbind());
                self.call(py, &func, vec![vt.clone(), key, v], vec![])?;
                return Ok(());
            }
        }
        o.set(py, name, v);
        Ok(())
    }

    /// `a == b` where one side is a new user object: the rich comparison protocol
    /// (Objects/object.c, `do_richcompare`): the reflected `__eq__` first when the right
    /// operand's type is a proper subclass overriding it, a Python `__eq__` inlined,
    /// `NotImplemented` passing to the other side, identity when neither decides.
    fn user_object_eq(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<bool> {
        let object_eq = py.get_type::<PyAny>().getattr("__eq__")?;
        let eq_of = |this: &mut Self, v: &VT| -> VResult<Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>> {
            let Some(ty) = this.type_of(py, v)? else { return Ok(None) };
            let ty = ty.bind(py).clone();
            let f = ty.getattr("__eq__")?;
            Ok(Some((ty, f)))
        };
        let (ea, eb) = (eq_of(self, a)?, eq_of(self, b)?);
        let (Some((ta, fa)), Some((tb, fb))) = (ea, eb) else {
            // A constant or a container on the other side: its `__eq__` does not know the
            // object; the object's own decides (or identity).
            let (obj, other) = if matches!(a, VT::UserObject(_)) { (a, b) } else { (b, a) };
            if matches!(other, VT::Constant(_)) {
                let VT::UserObject(o) = obj else { unreachable!() };
                if o.cls.bind(py).getattr("__eq__")?.is(&object_eq) {
                    return Ok(false);
                }
            }
            graph_break!(UntracedValue, "== of {} and {}", a.describe(py), b.describe(py));
        };
        let tb_sub = tb.cast::<pyo3::types::PyType>().ok().map(|t| !t.is(&ta) && t.is_subclass(&ta).unwrap_or(false)).unwrap_or(false);
        let order: Vec<(&VT, &VT, Bound<'_, PyAny>)> = if tb_sub && !fb.is(&fa) { vec![(b, a, fb), (a, b, fa)] } else { vec![(a, b, fa), (b, a, fb)] };
        for (x, y, f) in order {
            if f.is(&object_eq) {
                continue;
            }
            if type_name(&f) != "function" {
                graph_break!(UntracedValue, "== of {} and {} (a {} __eq__)", a.describe(py), b.describe(py), type_name(&f));
            }
            let func = match x {
                VT::UserObject(o) => {
                    let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                    let (k, _) = static_type_lookup(&ty, "__eq__")?.expect("found above");
                    wrap(py, self.og, &f, o.class_attr_source(k, "__eq__"))?
                }
                _ => graph_break!(UntracedValue, "== of {} and {} (the other side's __eq__)", a.describe(py), b.describe(py)),
            };
            let r = self.call(py, &func, vec![x.clone(), y.clone()], vec![])?;
            if let Some(c) = r.as_constant(py) {
                if c.is(&py.NotImplemented()) {
                    continue;
                }
            }
            return self.truth(py, &r);
        }
        self.is_same(py, a, b)
    }

    /// `functools.partial(func, *args, **kwargs)` built in the frame. A partial of a partial is
    /// flattened as `partial_new` does (Modules/_functoolsmodule.c) when the inner one is exact
    /// and has no instance dict (always so for a `Partial` tracker).
    fn make_partial(&mut self, py: Python<'_>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let Some(func) = args.first().cloned() else {
            graph_break!(UnsupportedCall, "functools.partial() without a function (TypeError)");
        };
        if self.is_callable(py, &func)? != Some(true) {
            graph_break!(UnsupportedCall, "functools.partial() of {} (TypeError unless callable)", func.describe(py));
        }
        let (func, mut all, mut kw) = match &func {
            VT::Partial(inner) => (inner.func.clone(), inner.args.clone(), crate::symbolic::partial::keyword_items(py, &inner.keywords)?),
            other => (other.clone(), vec![], vec![]),
        };
        all.extend(args.into_iter().skip(1));
        for (k, v) in kwargs {
            match kw.iter_mut().find(|(n, _)| *n == k) {
                Some(slot) => slot.1 = v,
                None => kw.push((k, v)),
            }
        }
        let keywords = new_dict(kw.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v)).collect());
        Ok(VT::Partial(Rc::new(crate::symbolic::partial::PartialFunction { func, args: all, keywords, obj: None, source: None })))
    }

    /// `callable(v)` (Objects/object.c, `PyCallable_Check`: the type has `tp_call`), when
    /// tracing knows the answer without running anything.
    fn is_callable(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<bool>> {
        Ok(Some(match v {
            VT::Function { .. } | VT::NestedFunction(_) | VT::Method { .. } | VT::TorchFunction(_) | VT::TensorMethod { .. } | VT::Builtin(_) | VT::Class(_)
            | VT::ContainerMethod { .. } | VT::Partial(_) | VT::GenericAttr { .. } | VT::GradModeExit { .. } | VT::LoggerMethod { .. } => true,
            VT::Tensor(_) | VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) | VT::Dict(_) | VT::DictView { .. } | VT::Set(_) | VT::Iterator(_) | VT::PyModule { .. } | VT::Cell(_)
            | VT::GradModeCtx { .. } => false,
            VT::Constant(c) => c.bind(py).is_callable(),
            // The type's `__call__` decides; the class is guarded by TYPE_MATCH or ID_MATCH.
            VT::Module { obj, .. } | VT::Opaque { obj, .. } => obj.bind(py).get_type().hasattr("__call__")?,
            VT::UserObject(o) => o.cls.bind(py).hasattr("__call__")?,
            _ => return Ok(None),
        }))
    }

    /// `map`, `filter` and the `itertools` iterators tracing models lazily (`IterKind::Map` and
    /// siblings): each step pulls from live iterators of the arguments and calls the function
    /// traced, as CPython's `tp_iternext` does. `itertools.product` reads its arguments whole
    /// at construction (Modules/itertoolsmodule.c, `product_new`), so it is a fixed sequence.
    /// `None`: `b` is none of these, or is called with arguments not modelled.
    fn lazy_iterator(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<IterKind>> {
        let builtins = self.og.handles.builtins.bind(py).clone();
        let itertools = py.import("itertools")?;
        let is = |m: &Bound<'_, PyAny>, name: &str| m.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let kw = |name: &str| kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let none_or = |v: Option<VT>| v.filter(|v| !v.as_constant(py).map(|c| c.is_none()).unwrap_or(false));
        let kind = if is(&builtins, "map") && args.len() >= 2 && kwargs.is_empty() {
            let inners = args[1..].iter().map(|a| self.make_iter(py, a)).collect::<VResult<Vec<_>>>()?;
            IterKind::Map { func: args[0].clone(), inners }
        } else if is(&builtins, "filter") && args.len() == 2 && kwargs.is_empty() {
            let inner = self.make_iter(py, &args[1])?;
            IterKind::Filter { func: none_or(Some(args[0].clone())), inner }
        } else if is(&itertools, "chain") && kwargs.is_empty() {
            IterKind::Chain { pending: args.iter().cloned().collect(), active: None }
        } else if is(&itertools, "islice") && (2..=4).contains(&args.len()) && kwargs.is_empty() {
            let ints = args[1..].iter().map(|a| match a.as_constant(py) {
                Some(c) if c.is_none() => Ok(None),
                Some(c) => c.extract::<i64>().ok().filter(|v| *v >= 0).map(|v| Some(v as usize)).ok_or(()),
                None => Err(()),
            }).collect::<Result<Vec<_>, ()>>();
            let Ok(ints) = ints else { graph_break!(UnsupportedCall, "islice() with bounds that are not constant non-negative ints") };
            let (start, stop, step) = match ints.len() {
                1 => (None, ints[0], None),
                2 => (ints[0], ints[1], None),
                _ => (ints[0], ints[1], ints[2]),
            };
            if step == Some(0) {
                graph_break!(UnsupportedCall, "islice() with step 0 (ValueError)");
            }
            let inner = self.make_iter(py, &args[0])?;
            IterKind::Islice { inner, next: start.unwrap_or(0), stop, step: step.unwrap_or(1), count: 0 }
        } else if is(&itertools, "accumulate") && (1..=2).contains(&args.len()) && kwargs.iter().all(|(k, _)| k == "func" || k == "initial") {
            let inner = self.make_iter(py, &args[0])?;
            let func = none_or(args.get(1).cloned().or_else(|| kw("func")));
            IterKind::Accumulate { inner, func, total: None, initial: none_or(kw("initial")) }
        } else if is(&itertools, "zip_longest") && kwargs.iter().all(|(k, _)| k == "fillvalue") {
            let inners = args.iter().map(|a| self.make_iter(py, a).map(Some)).collect::<VResult<Vec<_>>>()?;
            IterKind::ZipLongest { inners, fill: kw("fillvalue").unwrap_or_else(|| VT::none(py)) }
        } else if is(&itertools, "product") && kwargs.iter().all(|(k, _)| k == "repeat") {
            let repeat: usize = match kw("repeat").and_then(|r| r.as_constant(py)) {
                Some(r) => r.extract::<i64>().ok().filter(|r| *r >= 0).map(|r| r as usize).ok_or_else(|| Unsupported::new("product() repeat"))?,
                None if kwargs.is_empty() => 1,
                None => unsupported!("product() with a non-constant repeat"),
            };
            let mut pools = Vec::new();
            for a in args {
                pools.push(self.iter_items(py, a)?);
            }
            let pools: Vec<Vec<VT>> = (0..repeat).flat_map(|_| pools.iter().cloned()).collect();
            let mut out: Vec<Vec<VT>> = vec![vec![]];
            for pool in &pools {
                out = out.into_iter().flat_map(|prefix| pool.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(v.clone());
                    p
                })).collect();
                if out.len() > 100_000 {
                    unsupported!("product() too long to unroll");
                }
            }
            IterKind::Items(out.into_iter().map(|t| crate::symbolic::variables::tuple_of(py, t)).collect())
        } else {
            return Ok(None);
        };
        Ok(Some(kind))
    }

    /// A method of a builtin type called through the type (`list.__setitem__(a, 0, v)`,
    /// `dict.get(d, k)`, `torch.Tensor.__setitem__(t, i, v)`, `object.__setattr__(o, n, v)`):
    /// the same call as the bound method on the first argument when that argument is of the
    /// descriptor's `__objclass__` (Objects/descrobject.c checks it and raises TypeError
    /// otherwise; a mismatch is left to run in Python). `None`: `b` is not such a descriptor.
    fn call_unbound_descriptor(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !matches!(type_name(b).as_str(), "wrapper_descriptor" | "method_descriptor") || args.is_empty() {
            return Ok(None);
        }
        let Ok(owner) = b.getattr("__objclass__") else { return Ok(None) };
        let name: String = b.getattr("__name__")?.extract()?;
        let rest = args[1..].to_vec();
        let exact = |t: &Bound<'_, pyo3::types::PyType>| owner.is(t);
        let recv = &args[0];
        if name == "__init__" && args.len() == 1 && kwargs.is_empty() {
            // `object.__init__(o)`, or `dict.__init__(o)` with no mapping to insert: no effect.
            let no_op = match recv {
                VT::UserObject(o) => owner.is(py.get_type::<PyAny>()) || (o.storage.is_some() && crate::symbolic::user_objects::dict_base_type(py, &owner)?),
                _ => false,
            };
            if no_op {
                return Ok(Some(VT::none(py)));
            }
        }
        if let VT::UserObject(o) = recv {
            // `dict.__setitem__(o, k, v)` / `OrderedDict.keys(o)` on a dict subclass object:
            // the storage's method (Note [dict subclass objects]).
            if o.cls.bind(py).cast::<pyo3::types::PyType>().map(|t| t.is_subclass(&owner).unwrap_or(false)).unwrap_or(false) {
                if let Some(storage) = o.storage_method(py, b, &name)? {
                    let method = VT::ContainerMethod { container: Box::new(storage), name };
                    return self.call(py, &method, rest, kwargs.to_vec()).map(Some);
                }
            }
        }
        let matches = match recv {
            VT::List(_) => exact(&py.get_type::<PyList>()),
            VT::Dict(_) => exact(&py.get_type::<PyDict>()),
            VT::Set(_) => exact(&py.get_type::<pyo3::types::PySet>()),
            VT::Tensor(_) => owner.cast::<pyo3::types::PyType>().map(|o| self.og.handles.tensor_type.bind(py).cast::<pyo3::types::PyType>().map(|t| t.is_subclass(o).unwrap_or(false)).unwrap_or(false)).unwrap_or(false),
            VT::Opaque { .. } | VT::UserObject(_) => owner.is(py.get_type::<PyAny>()) && matches!(name.as_str(), "__setattr__" | "__getattribute__"),
            _ => false,
        };
        if !matches {
            return Ok(None);
        }
        let method = match recv {
            VT::List(_) | VT::Dict(_) | VT::Set(_) => VT::ContainerMethod { container: Box::new(recv.clone()), name },
            VT::Tensor(t) => VT::TensorMethod { tensor: t.clone(), name },
            _ => VT::GenericAttr { obj: Box::new(recv.clone()), set: name == "__setattr__" },
        };
        self.call(py, &method, rest, kwargs.to_vec()).map(Some)
    }

    /// Inlines a user function: binds arguments to the callee's locals and interprets its code
    /// with the same output graph.
    fn inline_call(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if self.depth >= MAX_INLINE_DEPTH {
            unsupported!("inlining depth limit reached");
        }
        let (code_obj, globals, defaults, kwdefaults, closure, external, fn_source) = match func {
            VT::Function { obj, source } => {
                let f = obj.bind(py);
                let code = f.getattr("__code__")?;
                let globals = f.getattr("__globals__")?.cast_into::<PyDict>().map_err(|e| Unsupported::new(e.to_string()))?;
                let module = f.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
                let trusted = module.starts_with("torch.") || module == "torch";
                let defaults = match f.getattr("__defaults__")? {
                    d if d.is_none() => vec![],
                    d => {
                        let d = d.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
                        let mut out = Vec::new();
                        for (i, v) in d.iter().enumerate() {
                            let src = if trusted { None } else { source.as_ref().map(|s| s.attr("__defaults__").item(ItemKey::Int(i as i64))) };
                            out.push(if src.is_none() && is_literal(py, &v) { VT::constant(v.unbind()) } else { self.wrap_from(py, &v, src)? });
                        }
                        out
                    }
                };
                let mut kwdefaults = Vec::new();
                if let Ok(kd) = f.getattr("__kwdefaults__")?.cast_into::<PyDict>() {
                    for (k, v) in kd.iter() {
                        let key: String = k.extract()?;
                        let src = if trusted { None } else { source.as_ref().map(|s| s.attr("__kwdefaults__").item(ItemKey::Str(key.clone()))) };
                        kwdefaults.push((key, if src.is_none() && is_literal(py, &v) { VT::constant(v.unbind()) } else { self.wrap_from(py, &v, src)? }));
                    }
                }
                let mut closure = Vec::new();
                if let Ok(cl) = f.getattr("__closure__")?.cast_into::<PyTuple>() {
                    for (i, cell) in cl.iter().enumerate() {
                        if let Some(rc) = self.og.cells_by_ptr.get(&(cell.as_ptr() as usize)) {
                            closure.push(VT::Cell(rc.clone()));
                            continue;
                        }
                        let contents = match cell.getattr("cell_contents") {
                            Ok(c) => c,
                            Err(_) => unsupported!("empty closure cell"),
                        };
                        let cell_src = source.as_ref().map(|s| s.attr("__closure__").item(ItemKey::Int(i as i64)));
                        let src = cell_src.as_ref().map(|c| c.attr("cell_contents"));
                        if src.is_none() && !trusted {
                            unsupported!("closure of a function without a source");
                        }
                        let v = self.wrap_from(py, &contents, if trusted { None } else { src })?;
                        let rc = Rc::new(RefCell::new(Some(v)));
                        self.og.cells_by_ptr.insert(cell.as_ptr() as usize, rc.clone());
                        if let (Some(c), false) = (cell_src, trusted) {
                            self.og.cell_sources.insert(Rc::as_ptr(&rc) as *const () as usize, c);
                        }
                        closure.push(VT::Cell(rc));
                    }
                }
                let same_globals = globals.is(self.g.globals.bind(py)) && self.g.source.is_none();
                let gsource = if same_globals || trusted { None } else {
                    match source {
                        Some(s) => Some(s.attr("__globals__")),
                        None => unsupported!("function {} from other globals without a source", crate::symbolic::variables::qualname(f)),
                    }
                };
                let g = if same_globals && !trusted {
                    self.g.clone()
                } else {
                    Rc::new(GlobalsInfo { globals: globals.unbind(), builtins: self.g.builtins.clone_ref(py), source: gsource, trusted })
                };
                (code.unbind(), g, defaults, kwdefaults, closure, true, source.clone())
            }
            VT::NestedFunction(nf) => {
                let g = self.g.clone();
                (nf.code.clone_ref(py), g, nf.defaults.clone(), nf.kwdefaults.clone(), nf.closure.clone(), false, None)
            }
            _ => unreachable!(),
        };
        let ci = code_info(code_obj.bind(py))?;
        if ci.flags & (flags::CO_COROUTINE | flags::CO_ASYNC_GENERATOR | flags::CO_ITERABLE_COROUTINE) != 0 {
            unsupported!("inlining coroutine {}", ci.name);
        }
        let is_generator = ci.flags & flags::CO_GENERATOR != 0;
        let locals = bind_args(py, &ci, args, kwargs, &defaults, &kwdefaults)?;
        // Closure cells of a function from outside the frame are reached as
        // `fn.__closure__[i]` (writes replay through `cell_contents`).
        let external_cells: Vec<(usize, CellTarget)> = if external {
            closure
                .iter()
                .enumerate()
                .filter_map(|(i, c)| match c {
                    VT::Cell(rc) => Some((
                        Rc::as_ptr(rc) as usize,
                        match &fn_source {
                            Some(s) => CellTarget::Object(s.attr("__closure__").item(ItemKey::Int(i as i64))),
                            None => CellTarget::Unknown,
                        },
                    )),
                    _ => None,
                })
                .collect()
        } else {
            vec![]
        };
        if is_generator {
            // Nothing of the body runs before the first step (CPython's generator frame starts
            // suspended at RETURN_GENERATOR).
            let mut cells: HashMap<usize, CellTarget> = external_cells.into_iter().collect();
            cells.extend(self.external_cells.iter().map(|(k, v)| (*k, v.clone())));
            let trusted = globals.trusted;
            let mut frame = GeneratorFrame { code: ci, g: globals, stack: Vec::new(), locals, closure, external_cells: cells, ip: 0, returned: None };
            if trusted {
                // torch's own generators (nn.Module.parameters, named_children, ...) only walk
                // the module tree: they run to the end here, so a loop over them is a fixed
                // sequence that can cross a graph break (Note [loop iterators as snapshots]).
                let mut items = Vec::new();
                while let Some(v) = resume_generator(py, self.og, self.depth + 1, &mut frame)? {
                    items.push(v);
                    if items.len() > 100_000 {
                        unsupported!("generator too long to unroll");
                    }
                }
                let mut state = IteratorState::over(items);
                // What `yield from` over it evaluates to once exhausted.
                state.returned = frame.returned.take();
                return Ok(VT::Iterator(Rc::new(RefCell::new(state))));
            }
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Generator(Some(Box::new(frame))))))));
        }
        let mut child = InstructionTranslator::new(ci, globals, locals, closure, self.og, self.depth + 1);
        child.external_cells.extend(external_cells);
        child.external_cells.extend(self.external_cells.iter().map(|(k, v)| (*k, v.clone())));
        child.run(py)
    }
}

/// Builtin exceptions the trace raises as values (`raise`, failed lookups) and lets `try` /
/// `except` clauses of inlined frames handle.
const TRACED_EXCEPTIONS: [&str; 10] = ["AttributeError", "IndexError", "KeyError", "LookupError", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "ZeroDivisionError", "AssertionError"];

/// Runs a traced generator's frame up to its next `yield` (`Some(value)`) or its return (`None`),
/// keeping its state in `f` for the next step.
fn resume_generator(py: Python<'_>, og: &mut OutputGraph, depth: usize, f: &mut GeneratorFrame) -> VResult<Option<VT>> {
    if depth > MAX_INLINE_DEPTH {
        unsupported!("generator nesting too deep");
    }
    let mut child = InstructionTranslator::new(f.code.clone(), f.g.clone(), std::mem::take(&mut f.locals), std::mem::take(&mut f.closure), og, depth);
    child.generator = true;
    child.external_cells = std::mem::take(&mut f.external_cells);
    child.stack = std::mem::take(&mut f.stack);
    child.ip = f.ip;
    if f.ip > 0 {
        // The value `next()` sends into the suspended YIELD_VALUE.
        child.stack.push(VT::none(py));
    }
    let outcome = child.run_until(py, None);
    f.locals = std::mem::take(&mut child.locals);
    f.closure = std::mem::take(&mut child.closure);
    f.external_cells = std::mem::take(&mut child.external_cells);
    f.stack = std::mem::take(&mut child.stack);
    f.ip = child.ip;
    // An exception leaving a generator finishes it, which its frame state here does not model:
    // not catchable inside the trace.
    let outcome = outcome.map_err(|e| Unsupported { raised: None, ..e });
    match outcome? {
        Outcome::Yield(v) => Ok(Some(v)),
        Outcome::Return(v) => {
            f.returned = Some(v);
            Ok(None)
        }
        Outcome::Break(_) => unsupported!("graph break inside a generator"),
    }
}

/// Binds call arguments to a code object's parameter slots (CPython's `_PyEval_MakeFrameVector`
/// order: positional, keyword-only, `*args`, `**kwargs`).
fn bind_args(py: Python<'_>, ci: &CodeInfo, args: Vec<VT>, kwargs: Vec<(String, VT)>, defaults: &[VT], kwdefaults: &[(String, VT)]) -> VResult<Vec<Option<VT>>> {
    let mut locals: Vec<Option<VT>> = vec![None; ci.localsplus.len()];
    let nargs = ci.argcount;
    let has_varargs = ci.flags & flags::CO_VARARGS != 0;
    let has_varkw = ci.flags & flags::CO_VARKEYWORDS != 0;
    let mut extra = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        if i < nargs {
            locals[i] = Some(a);
        } else {
            extra.push(a);
        }
    }
    if !extra.is_empty() && !has_varargs {
        unsupported!("{}() takes {nargs} positional arguments but more were given", ci.name);
    }
    let mut extra_kw = Vec::new();
    for (k, v) in kwargs {
        match ci.varnames[..nargs + ci.kwonlyargcount].iter().position(|n| *n == k) {
            Some(i) => {
                if locals[i].is_some() {
                    unsupported!("{}() got multiple values for argument '{k}'", ci.name);
                }
                locals[i] = Some(v);
            }
            None if has_varkw => extra_kw.push((PyString::new(py, &k).into_any().unbind(), v)),
            None => unsupported!("{}() got an unexpected keyword argument '{k}'", ci.name),
        }
    }
    let first_default = nargs.saturating_sub(defaults.len());
    for i in 0..nargs {
        if locals[i].is_none() {
            if i >= first_default {
                locals[i] = Some(defaults[i - first_default].clone());
            } else {
                unsupported!("{}() missing required argument '{}'", ci.name, ci.varnames[i]);
            }
        }
    }
    for i in nargs..nargs + ci.kwonlyargcount {
        if locals[i].is_none() {
            match kwdefaults.iter().find(|(k, _)| *k == ci.varnames[i]) {
                Some((_, v)) => locals[i] = Some(v.clone()),
                None => unsupported!("{}() missing keyword-only argument '{}'", ci.name, ci.varnames[i]),
            }
        }
    }
    let mut slot = nargs + ci.kwonlyargcount;
    if has_varargs {
        locals[slot] = Some(make_tuple(py, extra)?);
        slot += 1;
    }
    if has_varkw {
        locals[slot] = Some(new_dict(extra_kw));
    }
    Ok(locals)
}

/// Whether `c` is None, a bool, a number, a string or bytes: a value whose `__eq__` answers
/// NotImplemented for containers.
fn is_scalar_constant(c: &Bound<'_, PyAny>) -> bool {
    c.is_none()
        || c.is_instance_of::<pyo3::types::PyBool>()
        || c.is_instance_of::<pyo3::types::PyInt>()
        || c.is_instance_of::<pyo3::types::PyFloat>()
        || c.is_instance_of::<PyString>()
        || c.is_instance_of::<pyo3::types::PyBytes>()
}

/// The Python values of trackers that are all constants.
fn constants_of<'py>(py: Python<'py>, items: &[VT]) -> Option<Vec<Bound<'py, PyAny>>> {
    items.iter().map(|i| i.as_constant(py)).collect()
}

fn is_seq(v: &VT) -> bool {
    matches!(v, VT::Tuple(_) | VT::NamedTuple { .. })
}

pub fn const_bool(py: Python<'_>, b: bool) -> VT {
    VT::constant(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind())
}

/// A tuple tracker; all-constant tuples fold into one constant tuple.
/// A `torch.Size` of `items`: a constant when every item is one, else a `NamedTuple` tracker
/// of class `torch.Size` (symbolic sizes, Note [symbolic sizes]).
pub fn make_size(py: Python<'_>, size_type: &Bound<'_, PyAny>, items: Vec<VT>) -> VResult<VT> {
    if items.iter().all(|i| matches!(i, VT::Constant(_))) {
        let vals: Vec<_> = items.iter().map(|i| i.as_constant(py).unwrap()).collect();
        return Ok(VT::constant(size_type.call1((PyTuple::new(py, vals)?,))?.unbind()));
    }
    Ok(VT::NamedTuple { cls: Rc::new(size_type.clone().unbind()), items: Rc::new(items) })
}

/// Whether `v` is a `torch.Size` tracker with symbolic items.
fn is_symbolic_size(py: Python<'_>, og: &OutputGraph, v: &VT) -> bool {
    matches!(v, VT::NamedTuple { cls, .. } if cls.bind(py).is(og.handles.size_type.bind(py)))
}

pub fn make_tuple(py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
    if items.iter().all(|i| matches!(i, VT::Constant(_))) {
        let vals: Vec<_> = items.iter().map(|i| i.as_constant(py).unwrap()).collect();
        return Ok(VT::constant(PyTuple::new(py, vals)?.into_any().unbind()));
    }
    Ok(VT::Tuple(Rc::new(items)))
}

pub fn new_list(items: Vec<VT>) -> VT {
    VT::List(Rc::new(RefCell::new(ListState { entry_len: items.len(), items, source: None })))
}

pub fn new_dict(items: Vec<(Py<PyAny>, VT)>) -> VT {
    VT::Dict(Rc::new(RefCell::new(DictState { items, source: None, version: 0 })))
}

/// The attribute `name` as the type `ty` defines it (first hit along `__mro__`, without running
/// descriptors), like `inspect.getattr_static` on a type.
fn static_type_lookup<'py>(ty: &Bound<'py, pyo3::types::PyType>, name: &str) -> PyResult<Option<(usize, Bound<'py, PyAny>)>> {
    for (k, base) in ty.getattr("__mro__")?.try_iter()?.enumerate() {
        let d = base?.getattr("__dict__")?;
        if d.contains(name)? {
            return Ok(Some((k, d.get_item(name)?)));
        }
    }
    Ok(None)
}

/// Whether instances of `ty` look attributes up generically: `__getattribute__` is
/// `object`'s, or a builtin base's slot wrapper that is generic too (dict, list, OrderedDict...).
fn has_generic_getattribute(py: Python<'_>, ty: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    let getattribute = ty.getattr("__getattribute__")?;
    if getattribute.is(py.get_type::<pyo3::types::PyAny>().getattr("__getattribute__")?) {
        return Ok(true);
    }
    Ok(type_name(&getattribute) == "wrapper_descriptor"
        && getattribute
            .getattr("__objclass__")
            .and_then(|c| c.getattr("__name__"))
            .map(|n| ["dict", "list", "tuple", "set", "OrderedDict"].contains(&n.to_string().as_str()))
            .unwrap_or(false))
}

/// Where class attribute `name` of the object at `source` lives when `type(obj).__mro__[k]`
/// defines it: `type(obj).__mro__[k].__dict__[name]` (a `mappingproxy` item, read without
/// running descriptors).
fn class_attr_source(source: &Arc<Source>, k: usize, name: &str) -> Arc<Source> {
    source.generic_attr("__class__").attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()))
}

/// The Python object a tracker stands for, when it is a real object from the frame or a code
/// constant (not a value built or computed during tracing).
fn real_object(v: &VT) -> Option<&Py<PyAny>> {
    match v {
        VT::Module { obj, .. } | VT::Function { obj, .. } | VT::Opaque { obj, .. } | VT::PyModule { obj, .. } => Some(obj),
        VT::Class(o) | VT::Builtin(o) | VT::TorchFunction(o) => Some(o),
        _ => None,
    }
}

/// Whether `attr` is a data descriptor (its type defines `__set__` or `__delete__`), which takes
/// precedence over the instance dict (Descriptor HowTo Guide, Python docs).
fn is_data_descriptor(attr: &Bound<'_, PyAny>) -> PyResult<bool> {
    let t = attr.get_type();
    Ok(t.hasattr("__set__")? || t.hasattr("__delete__")?)
}

fn dict_set(py: Python<'_>, d: &mut DictState, k: Py<PyAny>, v: VT) -> VResult<()> {
    for (key, val) in d.items.iter_mut() {
        if key.bind(py).eq(k.bind(py))? {
            *val = v;
            return Ok(());
        }
    }
    d.items.push((k, v));
    d.version += 1;
    Ok(())
}

/// Whether function `f` is defined in a class body (its `__qualname__` names the class, as
/// `Optimizer.zero_grad`), not at module level or inside another function.
fn is_method_qualname(f: &Bound<'_, PyAny>) -> bool {
    f.getattr("__qualname__")
        .ok()
        .and_then(|q| q.extract::<String>().ok())
        .is_some_and(|q| q.contains('.') && !q.contains("<locals>"))
}

/// The count of a sequence repetition: an int constant (a bool counts as 0 or 1, as in
/// CPython); `None` for anything else (a float raises TypeError there, left to the operator).
fn repeat_count(py: Python<'_>, v: &VT) -> Option<i64> {
    let VT::Constant(c) = v else { return None };
    let c = c.bind(py);
    if c.is_instance_of::<pyo3::types::PyInt>() {
        c.extract::<i64>().ok()
    } else {
        None
    }
}
