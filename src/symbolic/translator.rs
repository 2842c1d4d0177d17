//! `InstructionTranslator`: interprets one frame's bytecode over `VariableTracker`s.
//!
//! One handler per opcode family, reached from the single `match` in `step`. Calls of user
//! functions, bound methods and `nn.Module`s are inlined by running a child translator over the
//! callee's code with the same `OutputGraph` (TorchDynamo's InliningInstructionTranslator);
//! `torch.*` calls and tensor methods become graph nodes; operations on constants are folded by
//! running them. Python semantics follow CPython 3.11's `Python/ceval.c` for the stack layout of
//! each opcode (notably CALL's `[NULL|callable, callable|self, args...]`).
//!
//! This file keeps the frame machinery (the translator's state, `run_until`, the exception
//! table walk, the value stack) and the opcode dispatch (`step`). The object protocol the
//! handlers call (`getattr`, `call`, `binary`, `getitem`, ...) is in `object_protocol.rs`; what
//! each Python kind does is in its family's file under `variables/` (one `impl
//! InstructionTranslator` block per file), laid out as torch/_dynamo/variables/ is.

use crate::bytecode::opcode::op;
use crate::source::{ItemKey, Source};
use crate::symbolic::builder::{is_literal, is_torch_callable, wrap};
use crate::symbolic::code_info::CodeInfo;
use crate::symbolic::output_graph::{LazyRecipe, OutputGraph};
use crate::symbolic::side_effects::CellTarget;
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::variables::constant::const_bool;
use crate::symbolic::variables::lists::new_list;
use crate::symbolic::variables::dicts::{dict_from_pairs, dict_set};
use crate::symbolic::variables::functions::NestedFunction;
use crate::symbolic::variables::user_defined::{static_type_lookup, class_attr_source};
use crate::symbolic::variables::iter::borrow_iter;

/// Maximum depth of inlined calls.
pub(crate) const MAX_INLINE_DEPTH: usize = 24;

/// `BINARY_OP` oparg -> `operator` function name (Include/opcode.h NB_* order).
pub(crate) const BINARY_OPS: [&str; 26] = [
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift", "sub", "truediv", "xor",
    "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod", "ior", "ipow", "irshift", "isub", "itruediv", "ixor",
];

/// `COMPARE_OP` oparg -> `operator` function name (3.11: index into `dis.cmp_op`).
pub(crate) const COMPARE_OPS: [&str; 6] = ["lt", "le", "eq", "ne", "gt", "ge"];

/// Tensor methods that leave the graph (data-dependent or side-effecting): never traced.
pub(crate) const TENSOR_METHOD_DENYLIST: [&str; 15] = [
    "item", "tolist", "numpy", "data_ptr", "backward", "register_hook", "retain_grad", "storage",
    "untyped_storage", "__bool__", "__index__", "__int__", "__float__", "cpu_",
    // Compares the real storages of two tensors (fakes never share one with an input).
    "is_set_to",
];

/// Methods of `logging.Logger` whose calls are replayed after the graph (Note [logger calls]):
/// the standard levels and transformers' additions (`warning_once`, `info_once`,
/// `warning_advice`, set on `logging.Logger` by `transformers.utils.logging`).
/// `Logger.warn` is not among them: the `DeprecationWarning` it issues names its caller's line,
/// which a replayed call does not have.
pub(crate) const LOGGER_METHODS: [&str; 9] = ["debug", "info", "warning", "error", "critical", "log", "warning_once", "info_once", "warning_advice"];

/// The methods of `LOGGER_METHODS` that `logging.Logger` defines itself: their records name the
/// frame that called them (`Logger.findCaller`), which the replay supplies (Note [logger calls]).
pub(crate) const STDLIB_LOGGER_METHODS: [&str; 6] = ["debug", "info", "warning", "error", "critical", "log"];

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
    pub(crate) kw_names: Option<Py<PyTuple>>,
    pub(crate) depth: usize,
    pub og: &'a mut OutputGraph,
    /// Cells that belong to a real closure outside the traced frame: writing them is a side effect.
    /// Cells that outlive the frame (closures of the frame and of inlined functions), by
    /// tracker address: where a write to them is replayed.
    pub(crate) external_cells: HashMap<usize, CellTarget>,
    /// Closure of the function being run (cells as trackers), consumed by COPY_FREE_VARS.
    pub(crate) closure: Vec<VT>,
    /// Set when running a generator's frame: YIELD_VALUE suspends it (`Outcome::Yield`).
    pub(crate) generator: bool,
    /// In the frame being converted (depth 0): the `(ip, visit)` of each exception the trace
    /// raised and whose `except` clause it is running, outermost first (Note [handlers in the
    /// converted frame]).
    pub(crate) handlers_entered: Vec<(usize, usize)>,
    /// The exceptions whose `except` / `finally` clauses this frame's trace is running,
    /// innermost last (CPython's `exc_info` stack as far as this frame sets it: PUSH_EXC_INFO
    /// pushes, POP_EXCEPT pops). A bare `raise` re-raises the last one.
    pub(crate) handled: Vec<VT>,
    /// The line of the last instruction whose exception the trace took to a handler: the line
    /// a RERAISE (which has none of its own) reports, as CPython's traceback does.
    pub(crate) last_raise_line: Option<u32>,
    /// The dict the frame's first `locals()` / `vars()` returned: on CPython 3.11 the frame's
    /// one `f_locals` dict, which later calls update and return again (Note [locals() in a
    /// trace]).
    pub(crate) locals_dict: Option<VT>,
}

pub(crate) enum Flow {
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
            handled: Vec::new(),
            last_raise_line: None,
            locals_dict: None,
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
            Outcome::Yield(_) => graph_break!(InternalInconsistency, "yield outside a generator"),
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
                graph_break!(UnrollLimit, "instruction budget exhausted in {}", self.code.name);
            }
            crate::symbolic::convert_frame::check_compile_budget(self.og.shape_env.is_some())?;
            let ip = self.ip;
            if ip >= self.code.insts.len() {
                graph_break!(InternalInconsistency, "fell off the end of {}", self.code.name);
            }
            let visit = {
                let v = visits.entry(ip).or_insert(0);
                *v += 1;
                *v
            };
            if break_at == Some((ip, visit)) {
                let mut stack = self.stack.clone();
                self.unbind_builtin_methods(py, &mut stack);
                return Ok(Outcome::Break(BreakState {
                    ip,
                    stack,
                    locals: self.locals.clone(),
                    kw_names: self.kw_names.as_ref().map(|k| k.clone_ref(py)),
                }));
            }
            if self.depth == 0 {
                self.og.top_ip = (ip, visit);
            }
            if !self.g.trusted {
                self.og.user_loc = Some((self.code.clone(), ip, self.g.globals.clone_ref(py).into_any()));
            }
            self.ip += 1;
            let watched = if self.depth == 0 { self.og.side_effects.walked_dict_versions() } else { Vec::new() };
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
            let flow = match flow {
                Ok(f) if watched.iter().any(|(d, version)| d.borrow().version != *version) => {
                    // Note [dicts walked by iterators from outside the frame].
                    let _ = f;
                    Err(Unsupported::of(
                        crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation,
                        "a dict that an iterator from outside the frame walks changes its keys: its next steps depend on CPython's table layout",
                    ))
                }
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
    pub(crate) fn unwind_to_handler(&mut self, py: Python<'_>, ip: usize, e: &Unsupported) -> VResult<()> {
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
        if !self.reraises(ip) {
            self.last_raise_line = self.code.insts[ip].positions.line.or(self.last_raise_line);
        }
        self.stack.push(VT::constant(exc));
        self.kw_names = None;
        self.ip = exn.handler.0 as usize;
        Ok(())
    }

    /// The `Err` that raises `exc` (a builtin exception instance held as a constant) in the
    /// trace, or a break for anything else.
    pub(crate) fn raise_value(&self, py: Python<'_>, exc: &VT) -> Unsupported {
        let Some(v) = exc.as_constant(py) else {
            return Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!("raise of {}", exc.describe(py)));
        };
        let cls = v.get_type();
        let name = cls.name().map(|n| n.to_string()).unwrap_or_default();
        let module = cls.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        let traced = match TRACED_EXCEPTIONS.iter().find(|n| **n == name) {
            Some(n) if module == "builtins" => Some(*n),
            _ if module != "builtins" => traced_exception_base(cls.as_any()),
            _ => None,
        };
        match traced {
            Some(n) => Unsupported::raise_value(n, v.clone().unbind(), crate::symbolic::variables::exceptions::exception_text(&v)),
            None => Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!("raise of {}", type_name(&v))),
        }
    }

    /// `raise exc` / RERAISE at the current instruction: `raise_value`, and also a StopIteration
    /// (exactly that class) where `stop_iteration_is_traced`: a `finally` or an unmatched
    /// `except` clause re-raising it to an outer handler of the frame keeps it in the trace.
    /// One that would leave any other frame is a break, as `raise_value` makes it.
    fn raise_in_frame(&self, py: Python<'_>, exc: &VT) -> Unsupported {
        if let Some(v) = exc.as_constant(py) {
            if self.stop_iteration_is_traced() && v.get_type().is(py.get_type::<pyo3::exceptions::PyStopIteration>()) {
                return Unsupported::raise_value("StopIteration", v.clone().unbind(), crate::symbolic::variables::exceptions::exception_text(&v));
            }
        }
        self.raise_value(py, exc)
    }

    /// True for the instructions that re-raise an exception with its traceback as it was
    /// (RERAISE, a bare `raise`): CPython's traceback gains no line of theirs (Python/ceval.c
    /// goes to `exception_unwind` past `PyTraceBack_Here`).
    fn reraises(&self, ip: usize) -> bool {
        let i = &self.code.insts[ip];
        i.opcode == op::RERAISE || (i.opcode == op::RAISE_VARARGS && i.arg == 0)
    }

    /// Whether a StopIteration raised at the current instruction stays in the trace: a `try` of
    /// this frame covers the instruction (Note [StopIteration in the trace] in
    /// `variables/builtin.rs`), or this frame is a user iterator's `__next__` being stepped,
    /// whose caller ends the step on it (Note [user iterators] in `variables/iter.rs`).
    pub(crate) fn stop_iteration_is_traced(&self) -> bool {
        self.code.insts.get(self.ip.wrapping_sub(1)).is_some_and(|i| i.exn.is_some()) || self.og.next_frames.last() == Some(&self.depth)
    }

    pub(crate) fn annotate(&self, e: Unsupported, ip: usize) -> Unsupported {
        if e.reason.contains(" (at ") {
            return e;
        }
        // A RERAISE reports the line that raised the exception it re-raises, as CPython's
        // traceback does (the cleanup ones have no line of their own); other instructions
        // without a line, the nearest line before them.
        let reraised = self.last_raise_line.filter(|_| self.reraises(ip));
        let line = reraised
            .or(self.code.insts[ip].positions.line)
            .or_else(|| self.code.insts[..ip].iter().rev().find_map(|i| i.positions.line))
            .unwrap_or(self.code.firstlineno);
        Unsupported { reason: format!("{} (at {}:{} in {})", e.reason, self.code.filename, line, self.code.name), ..e }
    }

    /// Where the record of a logging call made at the current instruction says it was made:
    /// `(pathname, lineno, funcName)` of the frame `Logger.findCaller` picks for the call's
    /// `stacklevel` (1: this frame; 2: the frame that called it, one of `og.inline_sites`), as
    /// CPython's Lib/logging/__init__.py does. A graph break where the replay cannot say it the
    /// same way (Note [logger calls]): `exc_info`/`stack_info` (read from the frame's exception
    /// state and stack), a `stacklevel` that is not a constant int >= 1, or one that reaches a
    /// generator's caller or past the converted frame.
    pub(crate) fn logging_call_site(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>, what: &str) -> VResult<Py<PyAny>> {
        let mut stacklevel = 1i64;
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                match k.extract::<String>()?.as_str() {
                    "exc_info" | "stack_info" if v.is_truthy()? => {
                        graph_break!(UnsupportedCall, "{what} with {k}= (the record reads the frame's exception or stack)")
                    }
                    "stacklevel" => match v.extract::<i64>() {
                        Ok(n) if n >= 1 && !v.is_instance_of::<pyo3::types::PyBool>() => stacklevel = n,
                        _ => graph_break!(UnsupportedCall, "{what} with stacklevel={}", v.repr()?),
                    },
                    _ => {}
                }
            }
        }
        let mut frame = Some((self.code.clone(), self.ip));
        let mut sites = self.og.inline_sites.iter().rev();
        for _ in 1..stacklevel {
            frame = match sites.next() {
                Some(site) => site.clone(),
                None => graph_break!(UnsupportedCall, "{what} with stacklevel={stacklevel}, past the compiled frame"),
            };
        }
        let Some((code, ip)) = frame else {
            graph_break!(UnsupportedCall, "{what} with stacklevel={stacklevel}, at a generator's caller");
        };
        Ok((code.filename.clone(), code.line_of(ip), code.name.clone()).into_pyobject(py)?.into_any().unbind())
    }

    /// Pops a value the instruction uses: a lazy constant gets its guards (Note [lazy
    /// constants] in `output_graph.rs`).
    pub(crate) fn pop(&mut self) -> VResult<VT> {
        let v = self.pop_unused()?;
        self.og.realize(&v);
        Ok(v)
    }

    /// Pops a value the instruction only moves or drops (STORE_FAST, POP_TOP) or records how
    /// it is made from (FORMAT_VALUE, BUILD_STRING).
    pub(crate) fn pop_unused(&mut self) -> VResult<VT> {
        self.stack.pop().ok_or_else(|| Unsupported::new("stack underflow"))
    }

    pub(crate) fn popn(&mut self, n: usize) -> VResult<Vec<VT>> {
        let items = self.popn_unused(n)?;
        for v in &items {
            self.og.realize(v);
        }
        Ok(items)
    }

    pub(crate) fn popn_unused(&mut self, n: usize) -> VResult<Vec<VT>> {
        if self.stack.len() < n {
            graph_break!(InternalInconsistency, "stack underflow");
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    /// `slice(*items)` for constant bounds (BUILD_SLICE, and 3.12's BINARY_SLICE/STORE_SLICE).
    pub(crate) fn make_slice(&mut self, py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
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
            None => graph_break!(UnsupportedOperation, "slice with non-constant bounds"),
        }
    }

    pub(crate) fn jump(&mut self, ip: usize) {
        self.ip = self.code.insts[ip].target.map(|t| t.0 as usize).expect("jump has a target");
    }

    pub(crate) fn step(&mut self, py: Python<'_>, ip: usize) -> VResult<Flow> {
        let inst = &self.code.insts[ip];
        let arg = inst.arg;
        let opcode = inst.opcode;
        match opcode {
            op::NOP | op::RESUME | op::PRECALL | op::EXTENDED_ARG => {}
            op::POP_TOP => {
                // Note [observable frees]: `P()` or `lst.pop()` as a statement frees the value.
                // (Not when a local still holds the object: a `match` drops its copy of the
                // subject this way.)
                let held_by_local = |v: &VT| match v {
                    VT::Opaque { obj, .. } => self.locals.iter().flatten().any(|l| matches!(l, VT::Opaque { obj: o, .. } if o.as_ptr() == obj.as_ptr())),
                    _ => false,
                };
                if self.stack.last().is_some_and(|v| lifetime_observable(py, v) && !held_by_local(v)) {
                    graph_break!(ObjectLifetime, "discarding a value whose free is observable (Note [observable frees])");
                }
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
            // Note [class statements]: a `class` statement in the frame is LOAD_BUILD_CLASS, the
            // body's MAKE_FUNCTION and a call of `builtins.__build_class__`. That call is not
            // traced (it runs the body against a fresh namespace and makes a new class object on
            // every execution), so it is a graph break at the call, where the body function is
            // rebuilt and Python makes the class; the code before and after stays in graphs.
            // Before, the opcode itself was unsupported and the whole frame ran eagerly.
            op::LOAD_BUILD_CLASS => {
                let build = py.import("builtins")?.getattr("__build_class__")?;
                self.stack.push(VT::Builtin(Rc::new(build.unbind())));
            }
            op::LOAD_FAST | op::LOAD_FAST_CHECK => match &self.locals[arg as usize] {
                Some(v) => self.stack.push(v.clone()),
                None => graph_break!(RaisesException, "local '{}' referenced before assignment", self.code.localsplus[arg as usize]),
            },
            // 3.12 inlined comprehensions (PEP 709) save the outer binding of the loop variable
            // (NULL when unbound) and restore it with STORE_FAST afterwards.
            op::LOAD_FAST_AND_CLEAR => {
                let v = self.locals[arg as usize].take().unwrap_or(VT::Null);
                self.stack.push(v);
            }
            op::STORE_FAST => {
                // Note [resume call lifetimes] (src/eval_frame/hook.rs): rebinding a local that
                // holds an object with a `__del__` may run it here, before what follows.
                if self.locals[arg as usize].as_ref().is_some_and(|old| self.local_free_observable(py, old, arg as usize)) {
                    graph_break!(ObjectLifetime, "rebinding a local that holds an object whose free is observable (Note [observable frees])");
                }
                let v = self.pop_unused()?;
                self.locals[arg as usize] = if matches!(v, VT::Null) { None } else { Some(v) };
            }
            // Note [hidden stack slots] (pycodegen/resume.rs): a resume function's prefix
            // empties its `__stackN` parameters once their values are on the stack.
            op::DELETE_FAST if self.code.localsplus[arg as usize].starts_with("__stack") && self.locals[arg as usize].is_some() => {
                self.locals[arg as usize] = None;
            }
            op::DELETE_FAST => match &self.locals[arg as usize] {
                None => graph_break!(RaisesException, "local '{}' deleted before assignment", self.code.localsplus[arg as usize]),
                // Note [resume call lifetimes] (src/eval_frame/hook.rs): `del` of a user object
                // may free it there, running its `__del__` and weak-reference callbacks (a
                // `WeakKeyDictionary` entry goes) before the next line reads what they changed;
                // the trace cannot run that, so the `del` runs as ordinary Python when the free
                // may be observed: weak references to the object, a `__del__` of its class or
                // of what it holds (`lifetime_observable`), the rule for rebinding its local.
                // transformers' `_sample` does `del outputs` (a `ModelOutput` of tensors and the
                // cache) in every decoding step.
                Some(v @ VT::UserObject(_)) if self.local_free_observable(py, v, arg as usize) => graph_break!(ObjectLifetime, "del of a user object (its finalizers may run)"),
                Some(v @ VT::Opaque { obj, .. }) if self.local_free_observable(py, v, arg as usize) || (self.opaque_held_only_here(py, v, arg as usize) && real_free_observable(py, obj.bind(py), 0, &mut 0)) => {
                    graph_break!(ObjectLifetime, "del of a user object (its finalizers may run)")
                }
                Some(v) if self.local_free_observable(py, v, arg as usize) => graph_break!(ObjectLifetime, "del of a container whose free is observable (Note [observable frees])"),
                Some(_) => self.locals[arg as usize] = None,
            },
            op::MAKE_CELL => {
                let old = self.locals[arg as usize].take();
                self.locals[arg as usize] = Some(VT::Cell(Rc::new(RefCell::new(old))));
            }
            op::COPY_FREE_VARS => {
                let n = arg as usize;
                let base = self.code.localsplus.len() - n;
                if self.closure.len() != n {
                    graph_break!(InternalInconsistency, "closure has {} cells, code expects {n}", self.closure.len());
                }
                for i in 0..n {
                    self.locals[base + i] = Some(self.closure[i].clone());
                }
            }
            op::LOAD_CLOSURE => {
                let v = self.locals[arg as usize].clone().ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "empty closure slot"))?;
                self.stack.push(v);
            }
            op::LOAD_DEREF => {
                let v = match &self.locals[arg as usize] {
                    Some(VT::Cell(c)) => {
                        // Note [free variables wrapped when read] (convert_frame.rs).
                        if self.og.unread_free_vars.remove(&(Rc::as_ptr(c) as usize)) {
                            let held = c.borrow().clone();
                            if let Some(VT::Opaque { obj, source }) = held {
                                let v = wrap(py, self.og, obj.bind(py), source)?;
                                *c.borrow_mut() = Some(v);
                            }
                        }
                        c.borrow().clone()
                    }
                    _ => graph_break!(InternalInconsistency, "LOAD_DEREF of a slot that is not a cell"),
                };
                match v {
                    Some(v) => self.stack.push(v),
                    None => graph_break!(RaisesException, "free variable '{}' referenced before assignment", self.code.localsplus[arg as usize]),
                }
            }
            // `del` of a cell variable (Python/ceval.c: the cell's contents become NULL; a later
            // read raises NameError). A cell that outlives the frame (a free variable, a resume
            // function's cell) or holds an object whose free is observable, or an empty one
            // (which raises), stays a break: Python runs the `del`.
            op::DELETE_DEREF => {
                let Some(VT::Cell(c)) = &self.locals[arg as usize] else {
                    graph_break!(InternalInconsistency, "DELETE_DEREF of a slot that is not a cell");
                };
                if self.external_cells.contains_key(&(Rc::as_ptr(c) as usize)) {
                    graph_break!(SideEffect, "del of a closure cell that outlives the frame");
                }
                // An argument's cell is made holding the argument (MAKE_CELL of its slot), and a
                // resume function's prologue would make it so again: emptying it is not
                // replayed, so its `del` runs in Python.
                if (arg as usize) < self.code.n_arg_slots() {
                    graph_break!(SideEffect, "del of the argument '{}', a cell variable", self.code.localsplus[arg as usize]);
                }
                match c.borrow().as_ref() {
                    None => graph_break!(RaisesException, "del of the empty cell variable '{}'", self.code.localsplus[arg as usize]),
                    Some(old) if lifetime_observable(py, old) => graph_break!(ObjectLifetime, "del of a cell that holds an object whose free is observable (Note [observable frees])"),
                    Some(_) => {}
                }
                *c.borrow_mut() = None;
            }
            op::STORE_DEREF => {
                // Note [observable frees]: a cell's old contents may go with the write (a local
                // that a closure captures, `nonlocal p; p = None`).
                if let Some(VT::Cell(c)) = &self.locals[arg as usize] {
                    if c.borrow().as_ref().is_some_and(|old| lifetime_observable(py, old)) {
                        graph_break!(ObjectLifetime, "rebinding a cell that holds an object whose free is observable (Note [observable frees])");
                    }
                }
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
                    _ => graph_break!(InternalInconsistency, "STORE_DEREF of a slot that is not a cell"),
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
                // Note [methods of builtin types at a break]: this NULL's pair goes to CALL.
                self.push_with_marker(v, Some(VT::MethodNull));
            }
            op::STORE_ATTR => {
                let name = self.code.names[arg as usize].clone();
                // Note [observable frees]: the attribute's old value may go with the write.
                if let Some(obj) = self.stack.last() {
                    if self.old_attr_observable(py, obj, &name) {
                        graph_break!(ObjectLifetime, "overwriting attribute '{name}' that holds an object whose free is observable (Note [observable frees])");
                    }
                }
                let obj = self.pop()?;
                let v = self.pop()?;
                self.store_attr(py, &obj, &name, v)?;
            }
            op::DELETE_ATTR => {
                let obj = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                self.delete_attr(py, &obj, &name)?;
            }
            op::STORE_GLOBAL => {
                let v = self.pop()?;
                let name = self.code.names[arg as usize].clone();
                let g = self.g.clone();
                self.store_global_in(py, &g, &name, v)?;
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
                // Note [observable frees]: the item may go with it.
                if self.stack.len() >= 2 && self.old_item_observable(py, &self.stack[self.stack.len() - 2], &self.stack[self.stack.len() - 1]) {
                    graph_break!(ObjectLifetime, "deleting an item whose free is observable (Note [observable frees])");
                }
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
                let args = self.iter_items_sized(py, &args_vt)?;
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
                // 3.13's `{o!s}` / `{o!r}` of a user object (Note [text of user objects]).
                let user_text = match arg {
                    1 => self.user_text(py, &v, "str", None)?,
                    2 => self.user_text(py, &v, "repr", None)?,
                    _ => None,
                };
                if let Some(text) = user_text {
                    self.stack.push(text);
                    return Ok(Flow::Continue);
                }
                let c = v.as_constant(py).or_else(|| v.as_enum_member(py)).or_else(|| self.literal_sequence(py, &v)).or(crate::symbolic::variables::builtin::literal_named_tuple(py, &v)?).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, format!("f-string of {}", v.describe(py))))?;
                let c = match arg {
                    1 => c.str()?.into_any(),
                    2 => c.repr()?.into_any(),
                    3 => py.import("builtins")?.getattr("ascii")?.call1((c,))?,
                    _ => graph_break!(UnsupportedOpcode, "CONVERT_VALUE {arg}"),
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
                let annotated = arg & 0x04 != 0;
                // The annotations: a tuple of names and values, alternating (Python/compile.c,
                // `compiler_visit_annotations`), which `func_get_annotations` turns into the
                // `__annotations__` dict on first read. Kept as that dict, an attribute of the
                // function (Note [attributes of functions made in the frame]), so that reads see
                // it and a function that escapes gets it back.
                let annotations = if annotated {
                    let v = self.pop()?;
                    let flat = self.unpack(py, &v)?;
                    let mut pairs = Vec::with_capacity(flat.len() / 2);
                    for kv in flat.chunks(2) {
                        let [k, v] = kv else { graph_break!(InternalInconsistency, "MAKE_FUNCTION annotations of odd length") };
                        let Some(key) = k.as_constant(py).filter(|k| k.is_instance_of::<pyo3::types::PyString>()) else {
                            graph_break!(InternalInconsistency, "MAKE_FUNCTION annotation name is not a str");
                        };
                        pairs.push((key.unbind(), v.clone()));
                    }
                    Some(crate::symbolic::variables::dicts::new_dict(pairs))
                } else {
                    None
                };
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
                    None => graph_break!(InternalInconsistency, "MAKE_FUNCTION without a constant code object"),
                };
                let qualname: String = code_obj.getattr("co_qualname")?.extract()?;
                self.stack.push(VT::NestedFunction(Rc::new(NestedFunction {
                    code: code_obj.unbind(),
                    g: self.g.clone(),
                    defaults,
                    kwdefaults,
                    closure,
                    qualname,
                    annotated,
                    attrs: RefCell::new(annotations.map(|a| ("__annotations__".to_string(), a)).into_iter().collect()),
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
                    VT::GradModeCtx { enabled, set_on_create, prev, .. } => {
                        let restore = if set_on_create { prev } else { self.grad_enabled(py)? };
                        // `set_grad_enabled.__enter__` switches to its mode again (the one
                        // made in the frame already did, so that records nothing).
                        if !set_on_create || self.grad_enabled(py)? != enabled {
                            self.set_grad_enabled(py, enabled)?;
                        }
                        self.stack.push(VT::GradModeExit { restore });
                        self.stack.push(VT::none(py));
                    }
                    VT::InferenceModeCtx { mode } => {
                        // `inference_mode.__enter__` returns None.
                        self.enter_inference_mode(py, mode)?;
                        self.stack.push(VT::InferenceModeExit);
                        self.stack.push(VT::none(py));
                    }
                    VT::GeneratorCtx(ctx) => {
                        let (exit, entered) = self.enter_generator_ctx(py, &ctx)?;
                        self.stack.push(exit);
                        self.stack.push(entered);
                    }
                    VT::AutocastCtx(m) => {
                        let restore = self.enter_autocast(py, &m)?;
                        self.stack.push(VT::AutocastExit(std::rc::Rc::new(restore)));
                        // `autocast.__enter__` returns the object itself.
                        self.stack.push(VT::AutocastCtx(m));
                    }
                    VT::TorchFunctionCtx { entered: false, all } => {
                        self.og.torch_function_disabled += 1;
                        self.og.torch_function_all_disabled += usize::from(all);
                        self.stack.push(VT::TorchFunctionCtx { entered: true, all });
                        self.stack.push(VT::none(py));
                    }
                    // Note [profiler ranges]: a `torch.profiler.record_function(name)` block
                    // (also `torch.autograd.profiler.record_function`, and a function it
                    // decorates) only marks a range for a running profiler; it changes no
                    // value. As under torch.compile, compiled code does not enter it (the range
                    // is missing from a profile, the ops are there): the block's `__exit__`
                    // does nothing, and `as r` is the object, as `__enter__` returns it.
                    VT::Constant(c) if self.is_record_function(py, c.bind(py))? => {
                        tracing::debug!(target: "dynamo::graph_breaks", "record_function block traced as a no-op (its range is not recorded in compiled code)");
                        let exit = py.import("dynamo._polyfills")?.getattr("profiler_block_exit")?;
                        self.stack.push(VT::Function { obj: Rc::new(exit.unbind()), source: None });
                        self.stack.push(VT::Constant(c));
                    }
                    VT::Opaque { obj, source } if self.is_record_function(py, obj.bind(py))? => {
                        let exit = py.import("dynamo._polyfills")?.getattr("profiler_block_exit")?;
                        self.stack.push(VT::Function { obj: Rc::new(exit.unbind()), source: None });
                        self.stack.push(VT::Opaque { obj, source });
                    }
                    VT::Opaque { obj, source } if crate::symbolic::variables::hooks::is_lock(py, obj.bind(py)) => {
                        let entered = self.enter_lock(py, &VT::Opaque { obj: obj.clone(), source: source.clone() })?;
                        self.stack.push(VT::LockExit { lock: Box::new(VT::Opaque { obj, source }) });
                        self.stack.push(entered);
                    }
                    VT::HookHandle(h) => {
                        // `RemovableHandle.__enter__` returns the handle; `__exit__` removes it.
                        self.stack.push(VT::ContainerMethod { container: Box::new(VT::HookHandle(h.clone())), name: "__exit__".into() });
                        self.stack.push(VT::HookHandle(h));
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
                    VT::UserObject(_) => {
                        // A context manager built in the frame (a user class, `nullcontext`,
                        // `suppress`): its class's `__enter__`/`__exit__`, inlined.
                        let (Some(enter), Some(exit)) = (self.python_dunder(py, &ctx, "__enter__")?, self.python_dunder(py, &ctx, "__exit__")?) else {
                            graph_break!(UnsupportedOpcode, "with block over {} (no Python __enter__ and __exit__)", ctx.describe(py));
                        };
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
            // 3.12+: the handler around a generator's body (INTRINSIC_STOPITERATION_ERROR, then
            // RERAISE) passes any exception but StopIteration on unchanged (Note [generator
            // throw]); a StopIteration becoming RuntimeError is left to Python.
            op::CALL_INTRINSIC_1 if self.generator && arg == 3 => {
                let v = self.pop()?;
                let stop = v.as_constant(py).is_some_and(|c| c.is_instance_of::<pyo3::exceptions::PyStopIteration>());
                if stop || v.as_constant(py).is_none() {
                    graph_break!(RaisesException, "generator raised StopIteration (RuntimeError)");
                }
                self.stack.push(v);
            }
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
                    None => graph_break!(InternalInconsistency, "SEND on an empty stack"),
                };
                let was_exhausted = borrow_iter(&receiver).map_err(|_| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "yield from over a running iterator"))?.exhausted;
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
            op::GET_LEN => {
                let v = self.stack.last().cloned().ok_or_else(|| Unsupported::new("GET_LEN on an empty stack"))?;
                let len = self.og.handles.builtins.bind(py).getattr("len")?;
                let n = self.call_builtin(py, &len, vec![v], vec![])?;
                self.stack.push(n);
            }
            op::MATCH_MAPPING | op::MATCH_SEQUENCE => {
                let v = self.stack.last().cloned().ok_or_else(|| Unsupported::new("MATCH_MAPPING on an empty stack"))?;
                let r = self.match_type_flag(py, &v, opcode == op::MATCH_MAPPING)?;
                self.stack.push(const_bool(py, r));
            }
            op::MATCH_KEYS => {
                let n = self.stack.len();
                if n < 2 {
                    graph_break!(InternalInconsistency, "MATCH_KEYS on a short stack");
                }
                let (subject, keys) = (self.stack[n - 2].clone(), self.stack[n - 1].clone());
                let r = self.match_keys(py, &subject, &keys)?;
                self.stack.push(r);
            }
            op::MATCH_CLASS => {
                let names = self.pop()?;
                let cls = self.pop()?;
                let subject = self.pop()?;
                let r = self.match_class(py, &subject, &cls, &names, arg as usize)?;
                self.stack.push(r);
            }
            op::UNARY_NOT => {
                let v = self.pop()?;
                let t = self.truth(py, &v)?;
                self.stack.push(VT::constant(pyo3::types::PyBool::new(py, !t).to_owned().into_any().unbind()));
            }
            op::BINARY_OP => {
                // `"step %d" % i` of an argument not used yet (Note [lazy string formatting]).
                if matches!(arg, 6 | 19) && self.stack.len() >= 2 && matches!(self.stack[self.stack.len() - 2], VT::Constant(_)) {
                    let (a, b) = (self.stack[self.stack.len() - 2].clone(), self.stack[self.stack.len() - 1].clone());
                    let mod_op = self.og.handles.operator.bind(py).getattr("mod")?;
                    if let Some(r) = self.lazy_string_format(py, &mod_op, &a, &[b])? {
                        self.popn_unused(2)?;
                        self.stack.push(r);
                        return Ok(Flow::Continue);
                    }
                }
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
                // Note [observable frees]: the old items may go with the write.
                if self.stack.len() >= 3 && matches!(&self.stack[self.stack.len() - 3], VT::List(_)) && lifetime_observable(py, &self.stack[self.stack.len() - 3]) {
                    graph_break!(ObjectLifetime, "overwriting items whose free is observable (Note [observable frees])");
                }
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
                // Note [observable frees]: the old item may go with the write.
                if self.stack.len() >= 2 && self.old_item_observable(py, &self.stack[self.stack.len() - 2], &self.stack[self.stack.len() - 1]) {
                    graph_break!(ObjectLifetime, "overwriting an item whose free is observable (Note [observable frees])");
                }
                let idx = self.pop()?;
                let obj = self.pop()?;
                let v = self.pop()?;
                self.setitem(py, &obj, idx, v)?;
            }
            op::BUILD_TUPLE => {
                // A tuple of constants with a lazy one is lazy too (`'%d %d' % (i, j)`, Note
                // [lazy constants]): its items are not used yet.
                let n = arg as usize;
                let lazy = n > 0 && self.stack.len() >= n && self.stack[self.stack.len() - n..].iter().all(|v| matches!(v, VT::Constant(_))) && self.stack[self.stack.len() - n..].iter().any(|v| self.og.lazy_recipe(py, v).is_some_and(|(_, b)| !b.is_empty()));
                let items = if lazy { self.popn_unused(n)? } else { self.popn(n)? };
                let t = if lazy { self.og.build_lazy_tuple(py, items)? } else { self.og.build_tuple(py, items)? };
                self.stack.push(t);
            }
            op::BUILD_SET => {
                let items = self.popn(arg as usize)?;
                let set = self.new_set(py, &items)?;
                self.stack.push(set);
            }
            op::SET_UPDATE | op::SET_ADD => {
                let v = self.pop()?;
                let items = if opcode == op::SET_ADD { vec![v.clone()] } else { vec![] };
                let idx = self.stack.len() - arg as usize;
                if let VT::Set(set) = &self.stack[idx] {
                    self.set_write(set, if opcode == op::SET_ADD { "SET_ADD" } else { "SET_UPDATE" })?;
                }
                match &self.stack[idx] {
                    VT::Set(set) if opcode == op::SET_UPDATE => {
                        // `_PySet_Update` is `set.update` (a frozenset constant of a literal
                        // merged as `set_merge` does, Note [set order]).
                        let set = set.clone();
                        self.set_method(py, &set, "update", &[v])?;
                    }
                    VT::Set(set) => {
                        let set = set.clone();
                        let consts = self.set_members_of(py, &items)?;
                        let set = set.borrow();
                        for c in consts {
                            set.bind(py).call_method1("add", (c,))?;
                        }
                    }
                    _ => graph_break!(InternalInconsistency, "SET_UPDATE of a non-set"),
                }
            }
            op::BUILD_LIST => {
                let items = self.popn(arg as usize)?;
                self.stack.push(new_list(items));
            }
            op::LIST_APPEND => {
                let v = self.pop()?;
                let idx = self.stack.len() - arg as usize;
                // A list display cut by a graph break reaches the resume function half built, as
                // an argument (a list with a source): its appends are recorded like `l.append`.
                match &self.stack[idx] {
                    VT::List(l) => {
                        if l.borrow().source.is_some() {
                            self.og.side_effects.mutate_list(l);
                        }
                        l.borrow_mut().items.push(v)
                    }
                    _ => graph_break!(UnsupportedOperation, "LIST_APPEND to a value that is not a list"),
                }
            }
            op::LIST_EXTEND => {
                let v = self.pop()?;
                let items = self.iter_items_sized(py, &v)?;
                let idx = self.stack.len() - arg as usize;
                match &self.stack[idx] {
                    VT::List(l) => {
                        if l.borrow().source.is_some() {
                            self.og.side_effects.mutate_list(l);
                        }
                        l.borrow_mut().items.extend(items)
                    }
                    _ => graph_break!(UnsupportedOperation, "LIST_EXTEND to a value that is not a list"),
                }
            }
            op::LIST_TO_TUPLE => {
                let v = self.pop()?;
                let items = self.unpack(py, &v)?;
                let t = self.og.build_tuple(py, items)?;
                self.stack.push(t);
            }
            // A dict display inserts its pairs in order (`dict_from_pairs`): equal keys merge.
            op::BUILD_MAP => {
                let items = self.popn(2 * arg as usize)?;
                let mut pairs = Vec::with_capacity(items.len() / 2);
                for kv in items.chunks(2) {
                    let k = self.dict_key(py, &kv[0])?;
                    pairs.push((k.unbind(), kv[1].clone()));
                }
                self.stack.push(dict_from_pairs(py, pairs)?);
            }
            op::BUILD_CONST_KEY_MAP => {
                let keys = self.pop()?;
                let vals = self.popn(arg as usize)?;
                let keys = keys.as_constant(py).ok_or_else(|| Unsupported::new("BUILD_CONST_KEY_MAP keys"))?;
                let keys = keys.try_iter()?.map(|k| k.map(Bound::unbind)).collect::<PyResult<Vec<_>>>()?;
                self.stack.push(dict_from_pairs(py, keys.into_iter().zip(vals))?);
            }
            op::MAP_ADD => {
                let v = self.pop()?;
                let k = self.pop()?;
                let k = self.dict_key(py, &k)?;
                let idx = self.stack.len() - arg as usize;
                // A dict comprehension cut by a graph break reaches the resume function half
                // built, as an argument (a dict with a source): its insertions are recorded like
                // `d[k] = v` (MAP_ADD is `PyDict_SetItem` on the exact dict BUILD_MAP made).
                match &self.stack[idx] {
                    VT::Dict(d) => {
                        dict_set(py, &mut d.borrow_mut(), k.unbind(), v)?;
                        if d.borrow().source.is_some() {
                            self.og.side_effects.mutate_dict(d);
                        }
                    }
                    _ => graph_break!(UnsupportedOperation, "MAP_ADD to a value that is not a dict"),
                }
            }
            op::DICT_UPDATE | op::DICT_MERGE => {
                let v = self.pop()?;
                // `{**a}` (DICT_UPDATE, `PyDict_Update`) takes a dict's keys of any kind, a
                // tensor's too (Note [tensor dict keys]); a call's `**kw` (DICT_MERGE) strs only.
                let items: Vec<(Py<PyAny>, VT)> = match &v {
                    VT::Dict(_) if opcode == op::DICT_UPDATE => self.mapping_items(py, &v)?,
                    _ => self.dict_items(py, &v)?.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v)).collect(),
                };
                let idx = self.stack.len() - arg as usize;
                let VT::Dict(d) = &self.stack[idx] else { graph_break!(UnsupportedOperation, "DICT_UPDATE to a dict this frame did not build") };
                if d.borrow().source.is_some() {
                    graph_break!(UnsupportedOperation, "DICT_UPDATE to a dict this frame did not build");
                }
                let d = d.clone();
                for (k, v) in items {
                    // DICT_MERGE (`f(a=1, **kw)`, `f(**a, **b)`) refuses a key given twice, as
                    // CPython's `_PyDict_MergeEx(.., 2)` does; `{**a, **b}` (DICT_UPDATE) keeps
                    // the last.
                    if opcode == op::DICT_MERGE && d.borrow().items.iter().any(|(have, _)| have.bind(py).eq(k.bind(py)).unwrap_or(false)) {
                        return Err(self.repeated_keyword(py, idx, &k.bind(py).extract::<String>()?));
                    }
                    dict_set(py, &mut d.borrow_mut(), k, v)?;
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
                // Note [formatting symbolic inputs].
                let v = self.og.lazy_text_of(py, &v).unwrap_or(v);
                let spec = spec.map(|s| self.og.lazy_text_of(py, &s).unwrap_or(s));
                let recipes = (self.og.lazy_recipe(py, &v), spec.as_ref().map(|s| self.og.lazy_recipe(py, s)));
                if recipes.0.is_none() || matches!(recipes.1, Some(None)) {
                    self.og.realize(&v);
                    if let Some(s) = &spec {
                        self.og.realize(s);
                    }
                }
                // Note [text of user objects]: `{o}` is `format(o, spec)`, `{o!s}` / `{o!r}` the
                // str / repr then formatted.
                let user_text = match arg & 0x03 {
                    0 => self.user_text(py, &v, "format", spec.as_ref())?,
                    1 => self.user_text(py, &v, "str", None)?,
                    2 => self.user_text(py, &v, "repr", None)?,
                    _ => None,
                };
                if let Some(text) = user_text {
                    let out = match (arg & 0x03, &spec) {
                        (0, _) | (_, None) => text,
                        (_, Some(s)) => {
                            let s = s.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "format spec"))?;
                            let t = text.as_constant(py).expect("a str");
                            VT::constant(py.import("builtins")?.getattr("format")?.call1((t, s))?.unbind())
                        }
                    };
                    self.stack.push(out);
                    return Ok(Flow::Continue);
                }
                let c = v.as_constant(py).or_else(|| v.as_enum_member(py)).or_else(|| self.literal_sequence(py, &v)).or(crate::symbolic::variables::builtin::literal_named_tuple(py, &v)?).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, format!("f-string of {}", v.describe(py))))?;
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
                    Some(s) => s.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "format spec"))?,
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
                    let c = i.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "BUILD_STRING of non-constant"))?;
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
                let sequence = matches!(v, VT::List(_) | VT::Tuple(_)) || v.as_constant(py).is_some_and(|c| c.is_instance_of::<PyTuple>() || c.is_instance_of::<PyString>());
                let items = self.unpack(py, &v)?;
                if items.len() != arg as usize {
                    // Python/ceval.c `unpack_iterable`'s ValueError, raised in the trace for a
                    // sequence (whose items were all taken anyway); an iterator would have been
                    // consumed only up to the extra item, so it stays a break.
                    if sequence {
                        let msg = if items.len() > arg as usize { format!("too many values to unpack (expected {arg})") } else { format!("not enough values to unpack (expected {arg}, got {})", items.len()) };
                        let e = py.get_type::<pyo3::exceptions::PyValueError>().call1((msg.as_str(),))?;
                        return Err(Unsupported::raise_value("ValueError", e.unbind(), msg));
                    }
                    graph_break!(RaisesException, "UNPACK_SEQUENCE of {} items into {arg}", items.len());
                }
                self.stack.extend(items.into_iter().rev());
            }
            op::UNPACK_EX => {
                let v = self.pop()?;
                let sequence = matches!(v, VT::List(_) | VT::Tuple(_)) || v.as_constant(py).is_some_and(|c| c.is_instance_of::<PyTuple>() || c.is_instance_of::<PyString>());
                let items = self.unpack(py, &v)?;
                let before = (arg & 0xff) as usize;
                let after = (arg >> 8) as usize;
                if items.len() < before + after {
                    // Python/ceval.c `unpack_iterable`'s ValueError, raised in the trace for a
                    // sequence (audit 51, O4: a caught one ran the whole frame eagerly).
                    if sequence {
                        let msg = format!("not enough values to unpack (expected at least {}, got {})", before + after, items.len());
                        let e = py.get_type::<pyo3::exceptions::PyValueError>().call1((msg.as_str(),))?;
                        return Err(Unsupported::raise_value("ValueError", e.unbind(), msg));
                    }
                    graph_break!(RaisesException, "UNPACK_EX: not enough values");
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
                    Some(VT::Iterator(it)) => match self.step_iter(py, &it) {
                        // A user iterator whose `__next__` the trace cannot follow (a
                        // `dynamo.disable`d one, one that reads a tensor's value) is a loop
                        // over an untraced iterator: it runs in a loop driver (Note [loop
                        // bodies as functions] in pycodegen/loop_body.rs), not the whole frame
                        // eagerly. An exception it raises still runs the FOR_ITER for real.
                        Err(mut e)
                            if self.depth == 0
                                && e.kind != crate::symbolic::graph_break::GraphBreakKind::RaisesException
                                && matches!(it.borrow().kind, crate::symbolic::variables::iter::IterKind::UserNext(_)) =>
                        {
                            e.kind = crate::symbolic::graph_break::GraphBreakKind::UntracedValue;
                            e.reason = format!("for loop over a user iterator whose __next__ is not traced ({})", e.reason);
                            return Err(e);
                        }
                        r => r?,
                    },
                    // An iterator of a user type (a DataLoader's): stepping it runs its Python
                    // `__next__`; the loop runs in Python and what it calls is compiled frame
                    // by frame.
                    Some(other) => graph_break!(UntracedValue, "for loop over {} (its __next__ runs in Python)", other.describe(py)),
                    None => graph_break!(InternalInconsistency, "FOR_ITER on an empty stack"),
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
                // The exception being handled before this one (None outside any handler of the
                // trace): restored by POP_EXCEPT, not otherwise read here.
                self.stack.push(self.handled.last().cloned().unwrap_or_else(|| VT::none(py)));
                self.handled.push(exc.clone());
                self.stack.push(exc);
            }
            // Note [with blocks that raise]: an exception the trace raised inside a `with` block
            // reaches the block's handler (PUSH_EXC_INFO; WITH_EXCEPT_START), which calls the
            // manager's `__exit__` (4th on the stack) with the exception's type, value and
            // traceback and pushes what it returns; a true result suppresses the exception
            // (POP_JUMP_IF_TRUE over the RERAISE). The trace has no traceback object for an
            // exception it raised, so it passes None, and only to an `__exit__` that cannot see
            // the difference: torch's grad-mode, autocast and DisableTorchFunctionSubclass exits
            // (which only restore their state), and a Python `__exit__` whose code never reads
            // the parameter the traceback lands in (`contextlib.suppress`, `nullcontext`, most
            // user managers). A @contextmanager generator's exit (the exception is thrown into
            // the generator) and any other `__exit__` stay a break, which moves back to the
            // instruction that raised (Note [handlers in the converted frame]).
            op::WITH_EXCEPT_START => {
                let n = self.stack.len();
                if n < 4 {
                    graph_break!(InternalInconsistency, "WITH_EXCEPT_START on a short stack");
                }
                let (exit, exc) = (self.stack[n - 4].clone(), self.stack[n - 1].clone());
                let Some(value) = exc.as_constant(py) else {
                    graph_break!(UnsupportedOperation, "with block exit of {}", exc.describe(py));
                };
                if !self.exit_ignores_traceback(py, &exit)? {
                    graph_break!(UnsupportedCall, "{} of a with block that raised (it may read the traceback)", exit.describe(py));
                }
                let ty = self.wrap_unguarded(py, value.get_type().as_any())?;
                let r = self.call(py, &exit, vec![ty, exc, VT::none(py)], vec![])?;
                self.stack.push(r);
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
                    graph_break!(UnsupportedOperation, "except clause over {}", want.describe(py));
                };
                let Some(cls) = cls else { graph_break!(UnsupportedOperation, "except clause over {}", want.describe(py)) };
                self.stack.push(const_bool(py, e.is_instance(&cls)?));
            }
            op::POP_EXCEPT => {
                self.pop()?;
                self.handled.pop();
                if self.depth == 0 {
                    self.handlers_entered.pop();
                }
            }
            op::RERAISE => {
                let exc = self.pop()?;
                return Err(self.raise_in_frame(py, &exc));
            }
            op::RAISE_VARARGS if arg == 1 => {
                let exc = self.pop()?;
                let exc = match &exc {
                    // `raise IndexError`: the class called with no arguments.
                    VT::Class(_) => self.call(py, &exc, vec![], vec![])?,
                    _ => exc,
                };
                return Err(self.raise_in_frame(py, &exc));
            }
            // A bare `raise` (Python/ceval.c, `do_raise` with no exception): re-raises the
            // exception this frame's innermost running `except` clause handles. One handled
            // outside the trace (the converted frame called from a handler, or a clause the
            // trace did not enter) stays a break.
            op::RAISE_VARARGS if arg == 0 => {
                let Some(exc) = self.handled.last().cloned() else {
                    graph_break!(RaisesException, "bare raise outside an except clause of the trace");
                };
                return Err(self.raise_in_frame(py, &exc));
            }
            op::RAISE_VARARGS if arg == 2 => {
                // `raise exc from cause` (Python/ceval.c, `do_raise`): a class is called with
                // no arguments; the cause (None, an exception, or an exception class, called)
                // becomes `__cause__`, and `__suppress_context__` is set. `os.environ[key]`
                // raises `KeyError(key) from None` for a missing variable, which
                // `os.environ.get` catches.
                let cause = self.pop()?;
                let exc = self.pop()?;
                let exc = match &exc {
                    VT::Class(_) => self.call(py, &exc, vec![], vec![])?,
                    _ => exc,
                };
                let cause = match &cause {
                    VT::Class(_) => self.call(py, &cause, vec![], vec![])?,
                    _ => cause,
                };
                let (Some(e), Some(c)) = (exc.as_constant(py), cause.as_constant(py)) else {
                    graph_break!(RaisesException, "raise {} from {}", exc.describe(py), cause.describe(py));
                };
                let base_exc = py.get_type::<pyo3::exceptions::PyBaseException>();
                if !e.is_instance(&base_exc)? || !(c.is_none() || c.is_instance(&base_exc)?) {
                    graph_break!(RaisesException, "raise {} from {}", exc.describe(py), cause.describe(py));
                }
                e.setattr("__cause__", &c)?;
                e.setattr("__suppress_context__", true)?;
                return Err(self.raise_value(py, &exc));
            }
            _ => graph_break!(UnsupportedOpcode, "opcode {} is not supported", crate::bytecode::opcode::name(opcode)),
        }
        Ok(Flow::Continue)
    }

    // ----- grad mode ---------------------------------------------------------------------

    /// Wraps a value whose stability needs no guard (a code constant, an attribute of a trusted
    /// object): literals become constants, other values are classified like `builder::wrap` but
    /// without guards or sources.
    pub fn wrap_unguarded(&mut self, py: Python<'_>, v: &Bound<'_, PyAny>) -> VResult<VT> {
        if is_literal(py, v) || type_name(v) == "code" {
            return Ok(VT::constant(v.clone().unbind()));
        }
        if v.is_instance(self.og.handles.module_type.bind(py))? {
            // A child of a container the trace built (Note [Sequential of modules made in the
            // trace] in `variables/nn_module.rs`) is itself a module the trace built.
            if self.og.derived_modules.contains_key(&(v.as_ptr() as usize)) {
                return Ok(VT::Module { obj: Rc::new(v.clone().unbind()), source: None });
            }
            graph_break!(MissingSource, "module {} reached without a source", type_name(v));
        }
        if self.og.is_tensor(py, v) {
            graph_break!(MissingSource, "tensor constant reached without a source");
        }
        let tn = type_name(v);
        Ok(match tn.as_str() {
            "function" if is_torch_callable(v) => VT::TorchFunction(Rc::new(v.clone().unbind())),
            "function" => VT::Function { obj: Rc::new(v.clone().unbind()), source: None },
            "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor" | "method-wrapper" if is_torch_callable(v) => {
                VT::TorchFunction(Rc::new(v.clone().unbind()))
            }
            "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor" | "method-wrapper" => VT::Builtin(Rc::new(v.clone().unbind())),
            // `torch.ops.ns.op`, read from the `torch.ops` namespaces (immutable once loaded).
            "OpOverloadPacket" | "OpOverload" if is_torch_callable(v) => VT::TorchFunction(Rc::new(v.clone().unbind())),
            // Modules, subclasses included (`torch.backends`' GenericModule).
            _ if v.is_instance_of::<pyo3::types::PyModule>() => VT::PyModule { obj: Rc::new(v.clone().unbind()), source: None },
            _ if v.is_instance_of::<pyo3::types::PyType>() => VT::Class(Rc::new(v.clone().unbind())),
            // A tuple of classes (`torch.types._Number`, read by torch.distributions'
            // `isinstance(loc, _Number)`): immutable, its items wrapped the same way.
            "tuple" if v.cast::<PyTuple>().is_ok_and(|t| t.get_type().is(py.get_type::<PyTuple>()) && t.iter().all(|i| i.is_instance_of::<pyo3::types::PyType>())) => {
                let items = v.try_iter()?.map(|i| self.wrap_unguarded(py, &i?)).collect::<VResult<Vec<_>>>()?;
                VT::Tuple(Rc::new(items))
            }
            _ if crate::symbolic::builder::is_plain_enum_member(py, v) => match enum_member_source(py, v)? {
                Some(source) => VT::Opaque { obj: Rc::new(v.clone().unbind()), source },
                None => graph_break!(UntrackedType, "cannot trace a value of type {tn} (an enum member whose class is not reachable by name)"),
            },
            _ => graph_break!(UntrackedType, "cannot trace a value of type {tn}"),
        })
    }

    /// Wraps `v` reached through `source` (guarded), or unguarded when there is no source or the
    /// holder is trusted.
    pub(crate) fn wrap_from(&mut self, py: Python<'_>, v: &Bound<'_, PyAny>, source: Option<Arc<Source>>) -> VResult<VT> {
        match source {
            Some(s) => wrap(py, self.og, v, s),
            None => self.wrap_unguarded(py, v),
        }
    }

    /// `name = v` in the namespace `g` (STORE_GLOBAL, or `globals()[name] = v`): recorded and
    /// replayed after the graph; later reads in the trace see it.
    pub(crate) fn store_global_in(&mut self, py: Python<'_>, g: &Rc<GlobalsInfo>, name: &str, v: VT) -> VResult<()> {
        if g.trusted {
            graph_break!(SideEffect, "write to global '{name}' of a torch module");
        }
        // Note [observable frees]: the old value may go with the write.
        let old = match self.og.side_effects.global(g.globals.as_ptr() as usize, &name) {
            Some(v) => lifetime_observable(py, &v),
            None => g.globals.bind(py).get_item(&name).ok().flatten().is_some_and(|o| {
                let cls_del = o.get_type().hasattr("__del__").unwrap_or(false);
                cls_del || has_user_weakrefs(py, &o)
            }),
        };
        if old {
            graph_break!(ObjectLifetime, "overwriting global '{name}' that holds an object whose free is observable (Note [observable frees])");
        }
        self.og.side_effects.store_global(g.globals.as_ptr() as usize, g.source.clone(), &name, v);
        Ok(())
    }

    pub(crate) fn load_global(&mut self, py: Python<'_>, name: &str) -> VResult<VT> {
        let g = self.g.clone();
        if let Some(v) = self.og.side_effects.global(g.globals.as_ptr() as usize, name) {
            return Ok(v);
        }
        let globals = g.globals.bind(py);
        let (value, in_globals) = match globals.get_item(name)? {
            Some(v) => (v, true),
            None => match g.builtins.bind(py).get_item(name)? {
                Some(v) => (v, false),
                None => graph_break!(RaisesException, "name '{name}' is not defined"),
            },
        };
        if g.trusted {
            // A torch module's global (Note [attribute version guards]); one found in builtins
            // is recorded absent from the globals.
            self.og.read_unguarded_attr(py, globals.as_any(), name);
            return self.wrap_unguarded(py, &value);
        }
        let source = match (&g.source, in_globals) {
            (None, _) | (_, false) => Arc::new(Source::Global { name: name.to_string() }),
            (Some(s), true) => s.item(ItemKey::Str(name.to_string())),
        };
        if in_globals && value.get_type().is(py.get_type::<PyList>()) && self.code.append_only_globals().iter().any(|n| n == name) {
            // Note [append-only lists]: a hook collecting outputs in a module-level list.
            return Ok(crate::symbolic::builder::wrap_append_only_list(self.og, &value, source));
        }
        wrap(py, self.og, &value, source)
    }

    /// `del obj.name`: on a user object built in the frame, its class's Python `__delattr__`
    /// is inlined, or the attribute leaves the tracker; deletions on objects from outside the
    /// frame are graph breaks (not replayed).
    pub(crate) fn delete_attr(&mut self, py: Python<'_>, obj: &VT, name: &str) -> VResult<()> {
        match obj {
            VT::UserObject(o) => {
                let o = o.clone();
                self.user_object_delattr(py, obj, &o, name, false)
            }
            _ => graph_break!(SideEffect, "attribute deletion {}.{name}", obj.describe(py)),
        }
    }

    /// `del o.name` on a new user object (Objects/object.c, `_PyObject_GenericSetAttrWithDict`
    /// with no value): the class's Python `__delattr__` inlined unless `generic`; a data
    /// descriptor on the class (a property's deleter) is not modelled; otherwise the instance
    /// attribute is removed, and a missing one raises AttributeError.
    pub(crate) fn user_object_delattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::variables::user_defined::UserObject>, name: &str, generic: bool) -> VResult<()> {
        let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        if !generic {
            let (k, delattr) = static_type_lookup(&ty, "__delattr__")?.expect("object defines __delattr__");
            if !crate::symbolic::variables::user_defined::is_generic_delattr(py, &delattr)? {
                if type_name(&delattr) != "function" {
                    graph_break!(SideEffect, "attribute deletion {}.{name} (a {} __delattr__)", vt.describe(py), type_name(&delattr));
                }
                let func = wrap(py, self.og, &delattr, o.class_attr_source(k, "__delattr__"))?;
                let key = VT::constant(PyString::new(py, name).into_any().unbind());
                self.call(py, &func, vec![vt.clone(), key], vec![])?;
                return Ok(());
            }
        }
        if self.property_delete(py, vt, o, &ty, name)? {
            return Ok(());
        }
        if let Some((_, ca)) = static_type_lookup(&ty, name)? {
            if crate::symbolic::variables::user_defined::is_data_descriptor(&ca)? {
                graph_break!(SideEffect, "attribute deletion {}.{name} (a {} on its class)", vt.describe(py), type_name(&ca));
            }
        }
        for base in ty.getattr("__mro__")?.try_iter()? {
            if self.og.side_effects.attr(&base?.unbind(), name).is_some() {
                graph_break!(SideEffect, "attribute deletion {}.{name} after a write to its class", vt.describe(py));
            }
        }
        if !o.remove(py, name) {
            return Err(Unsupported::raise("AttributeError", crate::symbolic::variables::no_attribute_message(o.cls.bind(py), name)));
        }
        Ok(())
    }

    /// `IMPORT_NAME`: traced only when the module is already in `sys.modules` (then `import`
    /// has no effect but the lookup, Python/import.c `PyImport_ImportModuleLevelObject`); the
    /// top-level package for a plain `import a.b`, the module itself with a fromlist. Relative
    /// imports resolve against the frame's `__package__`/`__name__` as importlib does.
    pub(crate) fn import_name(&mut self, py: Python<'_>, name: &str, level: &VT, fromlist: &VT) -> VResult<VT> {
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
                    None => graph_break!(UnsupportedOperation, "relative import without __package__"),
                },
            };
            let rel = format!("{}{}", ".".repeat(level as usize), name);
            match py.import("importlib.util")?.call_method1("resolve_name", (rel, package)) {
                Ok(r) => r.extract()?,
                Err(_) => graph_break!(RaisesException, "relative import of {name} does not resolve"),
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

    /// The TypeError of a DICT_MERGE that meets keyword `key` twice, for the call whose
    /// keyword dict sits at stack index `dict_idx`: CPython's message names the callable
    /// (`_PyObject_FunctionStr`: `module.qualname()`, or `qualname()` for builtins), read from
    /// the stack below the positional arguments (past the NULL of the call's layout). A break
    /// when the callable is not a real object the message can name.
    pub(crate) fn repeated_keyword(&self, py: Python<'_>, dict_idx: usize, key: &str) -> Unsupported {
        let callable = (2..=3).filter_map(|k| dict_idx.checked_sub(k)).map(|i| &self.stack[i]).find(|v| !v.is_null());
        let real = match callable {
            Some(VT::Class(c)) | Some(VT::Builtin(c)) | Some(VT::TorchFunction(c)) => Some(c.bind(py).clone()),
            Some(VT::Function { obj, .. }) | Some(VT::Module { obj, .. }) => Some(obj.bind(py).clone()),
            _ => None,
        };
        let Some(f) = real else {
            return Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::ArgumentMismatch, format!("keyword argument '{key}' given twice to a call of a traced value"));
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

    /// Note [methods of builtin types at a break]: for `d.values(1)` CPython's LOAD_METHOD
    /// pushes the method descriptor found on the type and `d` (`_PyObject_GetMethod`), and CALL
    /// calls the descriptor with `d` first; the trace holds one tracker for the bound method.
    /// Rebuilt as a bound method for the resumed code, a call that fails would raise the bound
    /// method's error, which names another function (`defaultdict.values()` for eager's
    /// `dict.values()`, `count()` for `str.count()`: Objects/descrobject.c and methodobject.c
    /// format them differently). So at a break, a `[NULL, bound method]` pair whose method is a
    /// method descriptor of a builtin type goes back onto the stack as `[descriptor, self]`,
    /// exactly what LOAD_METHOD left there. Only a pair LOAD_METHOD made (`VT::MethodNull`):
    /// a PUSH_NULL or LOAD_GLOBAL pair may be CALL_FUNCTION_EX's (`fmt.format(**kw)`), which
    /// calls the slot above the NULL alone and needs the NULL itself.
    fn unbind_builtin_methods(&mut self, py: Python<'_>, stack: &mut [VT]) {
        let after = crate::bytecode::PyVersion::CURRENT.null_after_callable();
        for i in 0..stack.len().saturating_sub(1) {
            let (null_i, m_i) = if after { (i + 1, i) } else { (i, i + 1) };
            if !matches!(stack[null_i], VT::MethodNull) {
                continue;
            }
            // Note [C methods of objects from the frame] (`user_defined.rs`): a builtin base's
            // C method bound to an object from the frame, found on its class.
            if let VT::Method { func, self_ } = &stack[m_i] {
                if matches!(&**func, VT::Builtin(b) if type_name(b.bind(py)) == "method_descriptor") && matches!(&**self_, VT::Opaque { .. }) {
                    let (descr, receiver) = ((**func).clone(), (**self_).clone());
                    let lo = null_i.min(m_i);
                    stack[lo] = descr;
                    stack[lo + 1] = receiver;
                    continue;
                }
            }
            let mut polyfill = false;
            let (receiver, ty, name) = match &stack[m_i] {
                // A list or dict from the frame stays behind its bound method: handed to the
                // resume function itself, it would be guarded by its length (an append-only
                // list, Note [append-only lists], would recompile at every append). Their
                // bound methods' errors are eager's for the exact types.
                VT::ContainerMethod { container, .. } if matches!(&**container, VT::List(l) | VT::Deque(l) if l.borrow().source.is_some()) || matches!(&**container, VT::Dict(d) if d.borrow().source.is_some()) => continue,
                VT::ContainerMethod { container, name } => match self.type_of(py, container) {
                    Ok(Some(ty)) => ((**container).clone(), ty, name.clone()),
                    _ => continue,
                },
                // An OrderedDict method traced as its `dynamo._polyfills` version: the C method
                // it stands in for (the polyfill itself must not run outside the trace), always
                // `OrderedDict`'s. Its receiver may be the storage tracker of an OrderedDict from
                // outside the frame, a dict tracker whose type is `dict`: `dict.update` on the
                // real OrderedDict writes the hash table past its linked list, so the new keys
                // were missing from `list(od)` (audit 52, Q1).
                VT::Method { func, self_ } => {
                    let Some(f) = crate::symbolic::variables::user_defined::real_object(func) else { continue };
                    let f = f.bind(py);
                    let Ok(table) = py.import("dynamo._polyfills").and_then(|m| m.getattr("ODICT_METHODS")) else { continue };
                    let Ok(table) = table.cast_into::<PyDict>() else { continue };
                    let Some(name) = table.iter().find(|(_, v)| v.is(f)).and_then(|(k, _)| k.extract::<String>().ok()) else { continue };
                    let Ok(odict) = py.import("collections").and_then(|c| c.getattr("OrderedDict")) else { continue };
                    polyfill = true;
                    ((**self_).clone(), odict.unbind(), name)
                }
                VT::Constant(c) if type_name(c.bind(py)) == "builtin_function_or_method" => {
                    let b = c.bind(py);
                    let (Ok(this), Ok(name)) = (b.getattr("__self__"), b.getattr("__name__").and_then(|n| n.extract::<String>())) else { continue };
                    if this.is_instance_of::<pyo3::types::PyModule>() || !crate::symbolic::builder::is_literal(py, &this) {
                        continue;
                    }
                    (VT::constant(this.clone().unbind()), this.get_type().into_any().unbind(), name)
                }
                _ => continue,
            };
            let ty = ty.bind(py);
            // Instances with a `__dict__` could shadow the method: left as they are.
            if !polyfill && ty.getattr("__dictoffset__").and_then(|d| d.extract::<isize>()).map_or(true, |d| d != 0) {
                continue;
            }
            let Ok(descr) = ty.getattr(name.as_str()) else { continue };
            if type_name(&descr) != "method_descriptor" {
                continue;
            }
            let lo = null_i.min(m_i);
            stack[lo] = VT::Builtin(Rc::new(descr.unbind()));
            stack[lo + 1] = receiver;
        }
    }

    /// Pushes a callable loaded for a call, with the NULL marker when `with_null` (LOAD_GLOBAL's
    /// NULL bit, LOAD_METHOD of a plain attribute, LOAD_SUPER_ATTR's method bit) on the side
    /// this CPython puts it ([`PyVersion::null_after_callable`](crate::bytecode::PyVersion::null_after_callable)).
    pub(crate) fn push_callable(&mut self, v: VT, with_null: bool) {
        self.push_with_marker(v, with_null.then_some(VT::Null));
    }

    /// [`Self::push_callable`] with the given NULL marker (`VT::Null` or `VT::MethodNull`).
    fn push_with_marker(&mut self, v: VT, null: Option<VT>) {
        let after = crate::bytecode::PyVersion::CURRENT.null_after_callable();
        match null {
            Some(n) if after => {
                self.stack.push(v);
                self.stack.push(n);
            }
            Some(n) => {
                self.stack.push(n);
                self.stack.push(v);
            }
            None => self.stack.push(v),
        }
    }

    /// CALL `n` (and CALL_KW after it took the keyword names): pops the arguments and the two
    /// slots below them, `[NULL, callable]` (3.11/3.12), `[callable, NULL]` (3.13) or
    /// `[method, self]` (every version), calls, and pushes the result.
    pub(crate) fn call_from_stack(&mut self, py: Python<'_>, n: usize) -> VResult<()> {
        let mut args = self.popn_unused(n)?;
        let b = self.pop_unused()?;
        let a = self.pop_unused()?;
        // `"step {}".format(i)` of an argument not used yet (Note [lazy string formatting]):
        // only a constant or builtin callable can be `str.format`.
        let func = if a.is_null() { &b } else { &a };
        let func_obj = match func {
            VT::Builtin(f) => Some(f.bind(py).clone()),
            VT::Constant(_) => func.as_constant(py),
            _ => None,
        };
        if let (None, Some(func_obj)) = (&self.kw_names, func_obj) {
            let rest: Vec<VT> = if a.is_null() || b.is_null() { args.clone() } else { std::iter::once(b.clone()).chain(args.iter().cloned()).collect() };
            let str_format = py.get_type::<PyString>().getattr("format")?;
            let bound_format = func_obj.getattr("__name__").is_ok_and(|n| n.to_string() == "format") && func_obj.getattr("__self__").is_ok_and(|s| s.is_exact_instance_of::<PyString>());
            let call = if bound_format {
                Some((VT::constant(func_obj.getattr("__self__")?.unbind()), rest))
            } else if func_obj.is(&str_format) && !rest.is_empty() {
                Some((rest[0].clone(), rest[1..].to_vec()))
            } else {
                None
            };
            if let Some((fmt, fargs)) = call {
                if let Some(r) = self.lazy_string_format(py, &str_format, &fmt, &fargs)? {
                    self.stack.push(r);
                    return Ok(());
                }
            }
        }
        // A logging call replays its lazy arguments as they are (Note [lazy constants]); a
        // Python function's call binds them to its parameters, a move (`call` realizes them
        // where the call is not inlined).
        let inlined = |v: &VT| match v {
            VT::Function { .. } | VT::NestedFunction(_) => true,
            VT::Method { func, .. } => matches!(**func, VT::Function { .. } | VT::NestedFunction(_)),
            VT::TorchFunction(f) => f.bind(py).is(self.og.handles.torch_assert.bind(py)),
            _ => false,
        };
        if !matches!((&a, &b), (VT::LoggerMethod { .. }, _) | (_, VT::LoggerMethod { .. })) && !inlined(if a.is_null() { &b } else { &a }) {
            for v in args.iter().chain([&b, &a]) {
                self.og.realize(v);
            }
        }
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

    /// Note [lazy string formatting]: `"step %d" % i` and `"step {}".format(i)` of an int the
    /// frame received and has not used yet (a lazy constant, Note [lazy constants]) make a
    /// string that is itself lazy, as an f-string of it does (FORMAT_VALUE): the string is
    /// formatted again at run time from the argument, so a training loop that prints or logs its
    /// step counter does not guard on the counter and recompile at every step (eight steps,
    /// then the frame ran eagerly for good). `how` is `operator.mod` or `str.format`; `fmt` a
    /// constant exact `str`; `args` its operands (for `%`, one: a constant or a tuple of
    /// constants). `None` when this is not such a call (no lazy argument, another kind of
    /// value, or an operation that raises): the caller then runs it as usual.
    fn lazy_string_format(&mut self, py: Python<'_>, how: &Bound<'_, PyAny>, fmt: &VT, args: &[VT]) -> VResult<Option<VT>> {
        // A symbolic number input formats as its lazy constant (Note [formatting symbolic
        // inputs]); a tuple of them too.
        let text_of = |og: &mut crate::symbolic::output_graph::OutputGraph, a: &VT| -> VT {
            match a {
                VT::Tuple(items) if items.iter().any(|i| matches!(i, VT::SymNum(_))) => VT::Tuple(Rc::new(items.iter().map(|i| og.lazy_text_of(py, i).unwrap_or_else(|| i.clone())).collect())),
                _ => og.lazy_text_of(py, a).unwrap_or_else(|| a.clone()),
            }
        };
        let args: Vec<VT> = args.iter().map(|a| text_of(self.og, a)).collect();
        let args = &args[..];
        // Only constants: `as_constant` of a symbolic number would specialize it.
        if !matches!(fmt, VT::Constant(_)) || !args.iter().all(|a| matches!(a, VT::Constant(_)) || matches!(a, VT::Tuple(items) if items.iter().all(|i| matches!(i, VT::Constant(_))))) {
            return Ok(None);
        }
        let Some(text) = fmt.as_constant(py).filter(|t| t.is_exact_instance_of::<PyString>()) else { return Ok(None) };
        // The format itself is used: a format string the frame received (on the stack at a
        // break before the operands, `'Loss: %.4f' % loss.item()`: audit 51, N8) is guarded
        // by value, a stable guard.
        self.og.realize(fmt);
        if !matches!(self.og.lazy_recipe(py, fmt), Some((LazyRecipe::Const(_), _))) {
            return Ok(None);
        }
        let mut values = Vec::with_capacity(args.len());
        let mut recipes = Vec::with_capacity(args.len());
        let mut bases = Vec::new();
        for a in args {
            match a {
                VT::Tuple(items) if how.is(&self.og.handles.operator.bind(py).getattr("mod")?) => {
                    let mut vals = Vec::with_capacity(items.len());
                    let mut parts = Vec::with_capacity(items.len());
                    for i in items.iter() {
                        let (Some(v), Some((r, b))) = (i.as_constant(py), self.og.lazy_recipe(py, i)) else { return Ok(None) };
                        vals.push(v);
                        parts.push(r);
                        bases.extend(b);
                    }
                    values.push(PyTuple::new(py, vals)?.into_any());
                    recipes.push(LazyRecipe::Tuple(parts));
                }
                _ => {
                    let (Some(v), Some((r, b))) = (a.as_constant(py), self.og.lazy_recipe(py, a)) else { return Ok(None) };
                    values.push(v);
                    recipes.push(r);
                    bases.extend(b);
                }
            }
        }
        if bases.is_empty() {
            return Ok(None);
        }
        let mut call_args = vec![text.clone()];
        call_args.extend(values);
        let Ok(r) = how.call1(PyTuple::new(py, call_args)?) else { return Ok(None) };
        if !r.is_exact_instance_of::<PyString>() {
            return Ok(None);
        }
        let mut recipe_args = vec![LazyRecipe::Const(text.unbind())];
        recipe_args.extend(recipes);
        Ok(Some(self.og.lazy_derived(r.unbind(), LazyRecipe::Call(how.clone().unbind(), recipe_args), bases)))
    }

    pub(crate) fn split_kwargs(&mut self, py: Python<'_>, args: &mut Vec<VT>) -> VResult<Vec<(String, VT)>> {
        let Some(names) = self.kw_names.take() else { return Ok(vec![]) };
        let names = names.bind(py);
        let n = names.len();
        let vals = args.split_off(args.len() - n);
        names.iter().zip(vals).map(|(k, v)| Ok((k.extract::<String>()?, v))).collect()
    }

    // ----- calls ------------------------------------------------------------------------

    /// `lifetime_observable` for the value of local `slot` that a rebinding or `del` lets go of
    /// (Note [observable frees]): an object from outside the frame read through an attribute,
    /// an item or a global, or through another local that still holds it (`cfg = self`), is
    /// still held there, so dropping this local frees nothing.
    /// Whether the object from outside in local `slot` may be held by this frame alone: it came
    /// in as that very local and no other local holds it (`local_free_observable`'s test).
    fn opaque_held_only_here(&self, py: Python<'_>, v: &VT, slot: usize) -> bool {
        let VT::Opaque { obj, source } = v else { return false };
        match &**source {
            Source::Local { idx, .. } => {
                let i = *idx as usize;
                !(i != slot && self.locals.get(i).and_then(|l| l.as_ref()).is_some_and(|l| matches!(l, VT::Opaque { obj: o, .. } if o.bind(py).is(obj.bind(py)))))
            }
            _ => false,
        }
    }

    fn local_free_observable(&self, py: Python<'_>, v: &VT, slot: usize) -> bool {
        if let VT::Opaque { obj, source } = v {
            let held_elsewhere = match &**source {
                Source::Local { idx, .. } => {
                    let i = *idx as usize;
                    i != slot && self.locals.get(i).and_then(|l| l.as_ref()).is_some_and(|l| matches!(l, VT::Opaque { obj: o, .. } if o.bind(py).is(obj.bind(py))))
                }
                _ => true,
            };
            if held_elsewhere {
                return false;
            }
        }
        if let VT::Tensor(t) = v {
            // As for an object: one reached through anything but a local (a parameter, a
            // module's attribute) is held there; another local holding it keeps it alive.
            let from_local = matches!(t.source.as_deref(), Some(Source::Local { .. }));
            let held_elsewhere = self.locals.iter().enumerate().any(|(i, l)| i != slot && matches!(l, Some(VT::Tensor(o)) if o.node == t.node));
            return t.weakly_referenced && from_local && !held_elsewhere;
        }
        lifetime_observable(py, v)
    }

    /// Whether `obj.name` now holds an object whose free is observable (Note [observable
    /// frees]): a pending write of the trace, an instance attribute of an object the trace made,
    /// or the instance `__dict__` entry of an object from outside.
    fn old_attr_observable(&self, py: Python<'_>, obj: &VT, name: &str) -> bool {
        match obj {
            VT::UserObject(o) => o.attrs.borrow().items.iter().any(|(k, v)| k.bind(py).eq(name).unwrap_or(false) && lifetime_observable(py, v)),
            VT::Opaque { obj: o, source } => match self.og.side_effects.attr(o, name) {
                Some(v) => lifetime_observable(py, &v),
                None => o
                    .bind(py)
                    .getattr("__dict__")
                    .ok()
                    .and_then(|d| d.cast_into::<PyDict>().ok())
                    .and_then(|d| d.get_item(name).ok().flatten())
                    .is_some_and(|v| lifetime_observable(py, &VT::Opaque { obj: Rc::new(v.unbind()), source: source.clone() })),
            },
            _ => false,
        }
    }

    /// Whether `obj[idx]` of a list or dict the trace tracks holds an object whose free is
    /// observable (Note [observable frees]); false when the index is not a constant.
    fn old_item_observable(&self, py: Python<'_>, obj: &VT, idx: &VT) -> bool {
        match obj {
            VT::List(l) => {
                let Some(k) = idx.as_constant(py).and_then(|k| k.extract::<i64>().ok()) else {
                    // A slice or a computed index: any item may go.
                    return lifetime_observable(py, obj);
                };
                let st = l.borrow();
                let n = st.items.len() as i64;
                let k = if k < 0 { k + n } else { k };
                (0..n).contains(&k) && lifetime_observable(py, &st.items[k as usize])
            }
            VT::Dict(d) => match idx.as_key(py) {
                Some(k) => d.borrow().items.iter().any(|(key, v)| key.bind(py).eq(&k).unwrap_or(false) && lifetime_observable(py, v)),
                None => lifetime_observable(py, obj),
            },
            _ => false,
        }
    }
}

impl<'a> InstructionTranslator<'a> {
    /// Whether `exit`, the `__exit__` of a with block, gives the same result whether it is
    /// handed the exception's traceback or None (Note [with blocks that raise]).
    fn exit_ignores_traceback(&self, py: Python<'_>, exit: &VT) -> VResult<bool> {
        let code = match exit {
            // A generator manager's exit throws the value in; the traceback it then sets on
            // an exception let through is never read in the trace.
            VT::GradModeExit { .. } | VT::InferenceModeExit | VT::AutocastExit(_) | VT::TorchFunctionCtx { entered: true, .. } | VT::GeneratorCtxExit(_) | VT::LockExit { .. } => return Ok(true),
            VT::Method { func, .. } => match func.as_ref() {
                VT::Function { obj, .. } => obj.bind(py).getattr("__code__")?,
                VT::NestedFunction(f) => f.code.bind(py).clone(),
                _ => return Ok(false),
            },
            // A plain function as the exit (Note [profiler ranges]): the traceback is its third
            // argument.
            VT::Function { obj, .. } if type_name(obj.bind(py)) == "function" => return Ok(!reads_argument(py, &obj.bind(py).getattr("__code__")?, 2)?),
            _ => return Ok(false),
        };
        Ok(!reads_argument(py, &code, 3)?)
    }
}

/// Whether the code object `code` can read the argument a call with positional arguments
/// reaching index `pos` puts there: the parameter at `pos`, or the `*args` tuple when there are
/// fewer positional parameters. Any reference to that local counts (loads, stores, deletes, a
/// cell), and so does a call that can read the frame's locals (`locals`, `vars`, `sys`).
fn reads_argument(py: Python<'_>, code: &Bound<'_, PyAny>, pos: usize) -> PyResult<bool> {
    let argcount: usize = code.getattr("co_argcount")?.extract()?;
    let kwonly: usize = code.getattr("co_kwonlyargcount")?.extract()?;
    let flags: u32 = code.getattr("co_flags")?.extract()?;
    let varnames: Vec<String> = code.getattr("co_varnames")?.extract()?;
    const CO_VARARGS: u32 = 0x04;
    let name = if pos < argcount {
        varnames[pos].clone()
    } else if flags & CO_VARARGS != 0 {
        varnames[argcount + kwonly].clone()
    } else {
        // The call raises eager's TypeError (too many arguments) before the body runs.
        return Ok(false);
    };
    let cellvars: Vec<String> = code.getattr("co_cellvars")?.extract()?;
    let names: Vec<String> = code.getattr("co_names")?.extract()?;
    if cellvars.contains(&name) || names.iter().any(|n| matches!(n.as_str(), "locals" | "vars" | "sys" | "_getframe" | "exc_info" | "exception")) {
        return Ok(true);
    }
    for ins in py.import("dis")?.call_method1("get_instructions", (code,))?.try_iter()? {
        let ins = ins?;
        let opname: String = ins.getattr("opname")?.extract()?;
        if !opname.contains("FAST") {
            continue;
        }
        let argval = ins.getattr("argval")?;
        let hit = match argval.extract::<String>() {
            Ok(n) => n == name,
            // 3.13's LOAD_FAST_LOAD_FAST and siblings name two locals.
            Err(_) => argval.extract::<Vec<String>>().map(|ns| ns.contains(&name)).unwrap_or(true),
        };
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Builtin exceptions the trace raises as values (`raise`, failed lookups) and lets `try` /
/// `except` clauses of inlined frames handle. `Exception` and `BaseException` are there for
/// the user's own classes derived from them (`class ConfigError(Exception): pass`): the trace
/// makes none itself. Left out: StopIteration and StopAsyncIteration, whose meaning changes as
/// they leave a frame (Note [StopIteration in the trace] in `variables/builtin.rs`), and the
/// ones an error of the tracer itself or of the process can be (KeyboardInterrupt, SystemExit,
/// MemoryError, RecursionError, SystemError): a folded operation's must stay Python's.
pub(crate) const TRACED_EXCEPTIONS: [&str; 26] = [
    "AttributeError", "IndexError", "KeyError", "LookupError", "ValueError", "TypeError", "RuntimeError",
    "NotImplementedError", "ZeroDivisionError", "AssertionError", "ArithmeticError", "OverflowError",
    "FloatingPointError", "NameError", "UnboundLocalError", "OSError", "FileNotFoundError", "EOFError",
    "BufferError", "ImportError", "ModuleNotFoundError", "UnicodeError", "GeneratorExit", "Warning", "Exception",
    "BaseException",
];

/// The entry of `TRACED_EXCEPTIONS` that exception class `cls` is or derives from, nearest
/// first in its MRO: a builtin one itself, or a class such as dataclasses'
/// `FrozenInstanceError(AttributeError)` or a user's `class ShapeError(ValueError)`, whose
/// instances the trace makes and raises as values too (`plain_exception_class`). Its name is
/// what `Unsupported::raised` reports (`getattr(o, name, default)` takes the default for an
/// AttributeError subclass, as eager's `builtin_getattr` does).
pub(crate) fn traced_exception_base(cls: &Bound<'_, PyAny>) -> Option<&'static str> {
    let mro = cls.getattr("__mro__").ok()?;
    for base in mro.try_iter().ok()?.flatten() {
        let module = base.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module != "builtins" {
            continue;
        }
        let name = base.getattr("__name__").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
        return TRACED_EXCEPTIONS.iter().find(|n| **n == name).copied();
    }
    None
}

/// Whether calling exception class `cls` runs no Python code: no metaclass, and its `__new__`
/// and `__init__` are BaseException's C slots (no class of its MRO defines them in Python),
/// so the instance can be made at trace time from constant arguments, as eager makes it.
pub(crate) fn plain_exception_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> bool {
    let Ok(t) = cls.cast::<pyo3::types::PyType>() else { return false };
    if !t.get_type().is(py.get_type::<pyo3::types::PyType>()) || !t.is_subclass_of::<pyo3::exceptions::PyBaseException>().unwrap_or(false) {
        return false;
    }
    ["__new__", "__init__"].iter().all(|m| cls.getattr(*m).is_ok_and(|f| !matches!(type_name(&f).as_str(), "function" | "method")))
}

/// Whether freeing `v` is observable (Note [observable frees]): a user object whose class
/// defines `__del__` (CPython runs it when the last reference goes: Objects/typeobject.c,
/// `slot_tp_finalize`), an object from outside the frame that weak references point to (their
/// callbacks run, a `WeakKeyDictionary` / `WeakValueDictionary` entry goes), or a list, tuple or
/// dict the trace tracks that holds one (up to a few levels deep).
pub(crate) fn lifetime_observable(py: Python<'_>, v: &VT) -> bool {
    observable_at(py, v, 0)
}

/// Whether calling `f` makes a weak reference to an argument (Note [observable frees]): a
/// `weakref.ref` type or subclass (`KeyedRef`, `WeakMethod`), `weakref.proxy`,
/// `weakref.finalize`, or a weak container's class.
pub(crate) fn makes_weak_reference(py: Python<'_>, f: &Bound<'_, PyAny>) -> bool {
    let Ok(weakref) = py.import("weakref") else { return false };
    let named = |n: &str| weakref.getattr(n).is_ok_and(|c| c.is(f));
    if ["proxy", "finalize", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"].iter().any(|n| named(n)) {
        return true;
    }
    match (f.cast::<pyo3::types::PyType>(), weakref.getattr("ref")) {
        (Ok(t), Ok(r)) => t.is_subclass(&r).unwrap_or(false),
        _ => false,
    }
}

/// Whether `o` has a weak reference other than torch's `WeakIdRef`s (Note [torch's own weak
/// references]); `weakref.getweakrefs` (Modules/_weakref.c) is empty for a type without weak
/// reference support.
pub(crate) fn has_user_weakrefs(py: Python<'_>, o: &Bound<'_, PyAny>) -> bool {
    let Ok(refs) = py.import("weakref").and_then(|w| w.getattr("getweakrefs")).and_then(|f| f.call1((o,))) else { return false };
    let id_ref = py.import("torch.utils.weak").and_then(|m| m.getattr("WeakIdRef")).ok();
    let saved_ref = py.import("dynamo.aot").and_then(|m| m.getattr("SavedResultRef")).ok();
    let ours = |r: &Bound<'_, PyAny>| [&id_ref, &saved_ref].iter().any(|t| t.as_ref().is_some_and(|t| r.get_type().is(t)));
    refs.try_iter().map(|it| it.flatten().any(|r| !ours(&r))).unwrap_or(false)
}

// Note [torch's own weak references]: converting a tensor to a fake tensor (every graph input,
// every call) memoizes it in torch's MetaConverter/FakeTensorConverter under a
// `torch.utils.weak.WeakIdRef`, whose callback only drops the memo entry. Counted as an
// observer, it made the KV-cache update `self.keys = torch.cat([self.keys, k], -2)` of
// transformers' `DynamicLayer` a graph break (Note [observable frees]) in every decoding step.
// Those references are not observable by user code, so they are not counted; a user's own
// `WeakIdKeyDictionary` on a tensor is the (rare) case this misses. Nor is the reference
// `aot.py` keeps to a forward output a node saved (`SavedResultRef`, Note [saved results]).
fn observable_at(py: Python<'_>, v: &VT, depth: u32) -> bool {
    if depth > 3 {
        return false;
    }
    let cls = match v {
        VT::Opaque { obj, .. } => {
            // An enum member lives as long as its class (which holds it in `_member_map_`);
            // the weak reference its identity guard keeps is ours.
            if crate::symbolic::builder::is_plain_enum_member(py, obj.bind(py)) {
                return false;
            }
            if has_user_weakrefs(py, obj.bind(py)) {
                return true;
            }
            obj.bind(py).get_type().into_any()
        }
        VT::UserObject(o) => {
            // An object made in the trace has no weak references (making one breaks); freeing
            // it frees what only it holds: its attributes and, for a dict subclass, its items.
            let held = |d: &Option<Rc<RefCell<crate::symbolic::variables::dicts::DictState>>>| d.as_ref().is_some_and(|d| d.borrow().items.iter().any(|(_, i)| observable_at(py, i, depth + 1)));
            if held(&Some(o.attrs.clone())) || held(&o.storage) {
                return true;
            }
            if o.list.as_ref().is_some_and(|l| l.borrow().items.iter().any(|i| observable_at(py, i, depth + 1))) {
                return true;
            }
            o.cls.bind(py).clone()
        }
        VT::Tensor(t) => return t.weakly_referenced,
        VT::List(l) => return l.borrow().items.iter().any(|i| observable_at(py, i, depth + 1)),
        VT::Tuple(items) => return items.iter().any(|i| observable_at(py, i, depth + 1)),
        VT::Dict(d) => return d.borrow().items.iter().any(|(_, i)| observable_at(py, i, depth + 1)),
        _ => return false,
    };
    cls.hasattr("__del__").unwrap_or(false)
}

/// Whether freeing the real object `o` may be observed (Note [observable frees]), for `del` of
/// a local that alone may hold it: it has weak references or a class with `__del__`, or what it
/// holds does (its instance `__dict__`, the
/// items of a dict, list or tuple), down to the depth `observable_at` looks. `seen` counts the
/// objects looked at; past a few hundred the answer is yes, as for anything not looked at.
fn real_free_observable(py: Python<'_>, o: &Bound<'_, PyAny>, depth: u32, seen: &mut usize) -> bool {
    *seen += 1;
    if *seen > 256 {
        return true;
    }
    if has_user_weakrefs(py, o) || o.get_type().hasattr("__del__").unwrap_or(false) {
        return true;
    }
    if depth >= 3 || crate::symbolic::builder::is_literal(py, o) || o.is_instance_of::<pyo3::types::PyType>() || o.is_instance_of::<pyo3::types::PyModule>() {
        return false;
    }
    // A tensor holds no Python objects whose free runs code (its `__dict__` aside, which
    // user code rarely fills).
    let mut held: Vec<Bound<'_, PyAny>> = Vec::new();
    if let Ok(d) = o.getattr("__dict__").and_then(|d| d.cast_into::<PyDict>().map_err(PyErr::from)) {
        held.extend(d.values().iter());
    }
    if let Ok(d) = o.cast::<PyDict>() {
        held.extend(d.values().iter());
    } else if let Ok(l) = o.cast::<pyo3::types::PyList>() {
        held.extend(l.iter());
    } else if let Ok(t) = o.cast::<PyTuple>() {
        held.extend(t.iter());
    }
    held.iter().any(|h| real_free_observable(py, h, depth + 1, seen))
}

// Note [observable frees]: Note [resume call lifetimes] (src/eval_frame/hook.rs) makes objects
// die where eager frees them across a break; inside one trace nothing is freed until the graph
// has run and its side effects replayed, so an instruction that drops what may be the last
// reference to an object whose free is observable (`lifetime_observable`) is a graph break at
// that instruction, and Python runs it: rebinding or deleting a local (STORE_FAST,
// DELETE_FAST), discarding an expression's value (POP_TOP: `P()`, `lst.pop()`), overwriting an
// attribute, a global or an item (STORE_ATTR, STORE_GLOBAL, STORE_SUBSCR), deleting an item
// (DELETE_SUBSCR), emptying a container (`clear`, `remove`). A break costs a graph; only
// frames that handle such objects pay it. Weak references are never made inside a trace (the
// call breaks), so an object made by the trace is observable only through its `__del__`; after
// such a break the objects come back from outside, with their weak references counted.
// torch's Dynamo frees all of these late (at the end of the frame, or when the rest of the
// function returns).

// Note [enum members of trusted modules]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A member of a plain enum class that the trace reaches without a guard (a global of a torch
// module read unguarded, `_OrthMaps.matrix_exp` in `torch.nn.utils.parametrizations`) is used
// by its real object like any other enum member (Note [enum members] in `builder.rs`). An
// `Opaque` needs a source for the rebuilt code, so it is given the member's name path:
// `sys.modules[cls.__module__].<cls.__qualname__>.<name>`, checked now to give the same object
// (a class made in a function, `<locals>` in its qualname, has no such path: `None`). No guard
// is added: the holder is trusted, as the unguarded read that reached it.
/// The source of an enum member by its name path (Note [enum members of trusted modules]).
fn enum_member_source(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Source>>> {
    let cls = v.get_type();
    let module: String = cls.getattr("__module__")?.extract()?;
    let qualname: String = cls.getattr("__qualname__")?.extract()?;
    let name: String = v.getattr("_name_")?.extract()?;
    if qualname.contains('<') {
        return Ok(None);
    }
    let Some(m) = py.import("sys")?.getattr("modules")?.get_item(&module).ok() else { return Ok(None) };
    let mut source = Arc::new(Source::Module { name: module });
    let mut obj = m;
    for part in qualname.split('.').chain(std::iter::once(name.as_str())) {
        let Ok(next) = obj.getattr(part) else { return Ok(None) };
        obj = next;
        source = source.attr(part);
    }
    Ok(obj.is(v).then_some(source))
}

impl<'a> InstructionTranslator<'a> {
    /// A list or tuple built in the trace whose items are all literals, a set of literals, or a
    /// dict of literal keys whose values are literals or such containers, as a real object:
    /// its `str`/`repr`/`format` is the C one of its type over literals, folded exactly
    /// (`f"{[1, 2]}"`, `str({'a': 1})`, a dataclass repr of a list field). A traced key (a
    /// tensor's) is not a literal.
    /// Whether `o` is a `torch.autograd.profiler.record_function` object (Note [profiler
    /// ranges]).
    pub(crate) fn is_record_function(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<bool> {
        o.is_instance(&py.import("torch.autograd.profiler")?.getattr("record_function")?)
    }

    pub(crate) fn literal_sequence<'py>(&self, py: Python<'py>, v: &VT) -> Option<Bound<'py, PyAny>> {
        match v {
            VT::List(_) | VT::Tuple(_) => {
                let real = self.literal_value(py, v)?;
                let items_literal = real.try_iter().ok()?.all(|i| i.is_ok_and(|i| is_literal(py, &i)));
                items_literal.then_some(real)
            }
            VT::Set(_) => self.literal_view(py, v),
            VT::Dict(_) => self.literal_value_or_dict(py, v),
            // A deque built in the frame, of literals: a real `deque(items, maxlen)`, whose text
            // is `deque([...])` or `deque([...], maxlen=n)` as eager's.
            VT::Deque(l) => {
                let st = l.borrow();
                if st.source.is_some() {
                    return None;
                }
                let maxlen = st.deque.as_ref().and_then(|d| d.maxlen);
                let mut items = Vec::with_capacity(st.items.len());
                for item in &st.items {
                    let VT::Constant(c) = item else { return None };
                    if !is_literal(py, c.bind(py)) {
                        return None;
                    }
                    items.push(c.bind(py).clone());
                }
                py.import("collections").ok()?.getattr("deque").ok()?.call1((pyo3::types::PyList::new(py, items).ok()?, maxlen)).ok()
            }
            _ => None,
        }
    }
}
