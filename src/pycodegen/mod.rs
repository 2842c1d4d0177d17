//! `PyCodegen`: emits the transformed bytecode of a compiled frame.
//!
//! The transformed code keeps the original prologue (MAKE_CELL / COPY_FREE_VARS / RESUME), then
//! loads every graph input from its `Source`, calls the compiled graph, rebuilds the frame's
//! return value from the graph's outputs, constants and sources (`Rebuild`), and returns it.
//! Every argument slot (positional, keyword-only, `*args`, `**kwargs`) becomes a plain
//! positional parameter, so the eval-frame hook can call it with the frame's `localsplus` array.

use crate::bytecode::opcode::op;
use crate::bytecode::{assemble, InstId, Instruction, Positions, PyVersion};
use crate::source::Source;
use crate::symbolic::code_info::{flags, CodeInfo};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::sync::Arc;

pub mod loop_body;
pub mod resume;

/// The fewest attribute and item loads that a graph call's inputs must take for them to be
/// read through an `InputPlan` (Note [input plans]): below it, the plan's call costs about what
/// it saves.
const MIN_PLAN_READS: usize = 8;

/// How to rebuild one value of the frame's result.
pub enum Rebuild {
    /// `result_of_graph[k]`.
    GraphOutput(usize),
    /// A constant object.
    Const(Py<PyAny>),
    /// A value reloaded from where the frame got it.
    Source(Arc<Source>),
    Tuple(Vec<Rebuild>),
    List(Vec<Rebuild>),
    /// A dict with constant keys.
    Dict(Vec<(Py<PyAny>, Rebuild)>),
    /// `iter(tuple(items))`: an iterator that was being stepped when the graph broke.
    Iterator(Vec<Rebuild>),
    /// `getattr(value, name)`: a bound method not yet called.
    Attr(Box<Rebuild>, String),
    /// `iter(list)` advanced by `pos` items, for a list the frame received.
    ListIter { list: Arc<Source>, pos: usize },
    /// `func(*args)`: a value made by calling a known function (a structseq or namedtuple class,
    /// `dict.items`, `enumerate`, `zip`, an iterator helper of `dynamo._C`).
    Call { func: Py<PyAny>, args: Vec<Rebuild> },
    /// `types.MethodType(func, self_)`: a bound method of a user object.
    BoundMethod { func: Py<PyAny>, self_: Box<Rebuild> },
    /// `set(members)`: a set built during tracing (members: a frozenset constant).
    SetOf(Py<PyAny>),
    /// The first rebuild of an object reached more than once: built, then kept in temporary
    /// local `id` (Note [shared rebuilds] in `symbolic::convert_frame`).
    Shared { id: u32, inner: Box<Rebuild> },
    /// A later reach of shared object `id`: a load of its temporary local.
    SharedRef(u32),
    /// The first rebuild of a shared object that may be reachable from itself: `shell` (the
    /// object, empty) is kept in temporary local `id` first, then `fill` (a call that gives it
    /// its contents, loading `id` where the object refers to itself) runs and its result is
    /// dropped; the object is pushed.
    SharedCyclic { id: u32, shell: Box<Rebuild>, fill: Box<Rebuild> },
    /// A function defined in the frame: MAKE_FUNCTION over `code` with positional `defaults`
    /// and the cells `closure` (`FrameCell`s, or cells made anew) as its closure.
    MakeFunction { code: Py<PyAny>, defaults: Vec<Rebuild>, closure: Vec<Rebuild> },
    /// The frame's own cell at this `localsplus` slot (`LOAD_CLOSURE`).
    FrameCell(u32),
}

/// How transformed code recovers when its graph raises: rerun the frame as the original code
/// (Note [graph failure reruns the frame]).
pub struct Rerun {
    /// `torch.is_grad_enabled()` at frame entry, restored before the rerun.
    pub grad_enabled: bool,
    /// Positions (in the graph's inputs) of the inputs the graph may write: copied before the
    /// call and put back before the rerun.
    pub snapshot: Vec<usize>,
    /// Whether the random number generators' states are kept too and put back before the rerun.
    pub rng: bool,
    /// Whether the autocast state is kept too (the graph enters or leaves an autocast block).
    pub autocast: bool,
    /// Whether the snapshot is kept on the graph's first call only (and on every call after it
    /// failed): a graph that writes its inputs with no op known to raise on values
    /// (`_C.snapshot_inputs_first_call`).
    pub first_call_only: bool,
}

impl Rerun {
    /// Whether anything is copied before the call (then kept on the stack for the handler).
    pub fn keeps_state(&self) -> bool {
        !self.snapshot.is_empty() || self.rng || self.autocast
    }
}

/// The callable of a replayed call (`SideEffect::CallMethod`).
pub enum Callee {
    /// Fetched through its source when the call runs (`logger.info`).
    Source(Arc<Source>),
    /// This object, held as a constant of the code.
    Object(Py<PyAny>),
    /// A `logging.Logger` method fetched through its source, called by
    /// `_polyfills.logger_call_at` so that its record names `site` (a constant
    /// `(pathname, lineno, funcName)`) as its caller (Note [logger calls]).
    AtSite { method: Arc<Source>, site: Py<PyAny> },
}

impl Callee {
    pub fn clone_ref(&self, py: Python<'_>) -> Callee {
        match self {
            Callee::Source(s) => Callee::Source(s.clone()),
            Callee::Object(o) => Callee::Object(o.clone_ref(py)),
            Callee::AtSite { method, site } => Callee::AtSite { method: method.clone(), site: site.clone_ref(py) },
        }
    }
}

/// A write outside the frame, replayed after the graph (see `symbolic::side_effects`).
pub enum SideEffect {
    /// `target.name = value`.
    SetAttr { target: Arc<Source>, name: String, value: Rebuild },
    /// `target.cell_contents = value` for a cell made anew by the transformed code (a shared
    /// rebuild, filled after everything that may reach it was made: Note [cells of inlined
    /// calls] in `symbolic::convert_frame`).
    FillCell { target: Rebuild, value: Rebuild },
    /// `object.__setattr__(target, name, value)`: past the class's own `__setattr__`.
    GenericSetAttr { target: Arc<Source>, name: String, value: Rebuild },
    /// `STORE_DEREF slot`: a cell or free variable of the frame (a `nonlocal` write, the contents
    /// of the frame's own cells at a graph break or for a function the frame returns).
    SetDeref { slot: u32, value: Rebuild },
    /// `name = value` in the frame's own globals (`STORE_GLOBAL`).
    SetGlobal { name: String, value: Rebuild },
    /// `target[key] = value` (a global of another module, through its `__globals__`).
    SetItem { target: Arc<Source>, key: Py<PyAny>, value: Rebuild },
    /// `target[:] = items`: a list's new contents.
    ListContents { target: Arc<Source>, items: Rebuild },
    /// `list.__setitem__(target, slice(None), items)`: the new contents of the list storage of
    /// a `list` subclass instance, written past the subclass's own `__setitem__` (Note [list
    /// subclass objects from outside the frame] in `symbolic::variables::user_defined`).
    ListStorageContents { target: Arc<Source>, items: Rebuild },
    /// `list.extend(target, items)`: what the trace appended to a list it only appends to
    /// (Note [append-only lists] in `symbolic::variables::lists`).
    ListExtend { target: Arc<Source>, items: Rebuild },
    /// `dynamo._C.replace_dict_storage(target, items)`: the new contents of the dict storage of
    /// a `dict` subclass instance, written past the subclass (Note [dict subclass objects from
    /// outside the frame] in `symbolic::variables::user_defined`).
    DictStorageContents { target: Arc<Source>, items: Rebuild, key_ops: Option<Py<PyAny>> },
    /// `dynamo._polyfills.deque_replace(target, items)`: a deque's new contents (Note [deques]).
    DequeContents { target: Arc<Source>, items: Rebuild },
    /// `dynamo._C.replace_dict(target, items, key_ops=...)`: a dict's new contents, in order,
    /// with the trace's changes of its keys (`key_ops`, a tuple of `(op, key)`) replayed first
    /// (Note [dict rewrites keep the layout] in src/py/mod.rs).
    DictContents { target: Arc<Source>, items: Rebuild, key_ops: Option<Py<PyAny>> },
    /// `method(*args, **kwargs)` with constant arguments (a logging call, an `lru_cache`
    /// wrapper's call), after the writes, its result dropped.
    CallMethod { method: Callee, args: Py<PyAny>, kwargs: Option<Py<PyAny>>, arg_rebuilds: Option<Vec<Rebuild>> },
    /// `dynamo._C.advance_iter(target, steps)`: the steps the trace took on an iterator from
    /// outside the frame, after the writes (a list iterator reads the list's new items), before
    /// the calls; `before_writes`: before every write instead (a dict iterator, which checks
    /// its dict's size at each step).
    AdvanceIter { target: Arc<Source>, steps: usize, before_writes: bool },
    /// `dynamo._polyfills.replay_hook(module, method, hook, kwargs, removed)`: a forward hook
    /// the trace registered (Note [hooks registered in the trace] in
    /// `symbolic::variables::hooks`), first of all effects, in registration order, right after
    /// the graph (`emit_hook_replays`); the real handle it returns is kept in the shared
    /// temporary `handle_slot`.
    ReplayHook { module: Arc<Source>, method: String, hook: Rebuild, kwargs: Py<PyAny>, removed: bool, handle_slot: u32 },
}

/// Builds instruction lists against a code object's names and constants.
pub struct PyCodegen {
    pub insts: Vec<Instruction>,
    pub names: Vec<String>,
    pub consts: Vec<Py<PyAny>>,
    cellvars: Vec<String>,
    /// `len(co_varnames)`: slots from here up are cell and free variables only.
    nv: u32,
    /// Cell slots that hold their cell at frame entry (`CodeInfo::cells_on_entry`).
    entry_cells: Vec<u32>,
    /// Source position given to emitted instructions (tracebacks show its line).
    pub pos: Positions,
    /// When set, the graph's result tuple lives in this fast local instead of on the stack.
    pub result_local: Option<u32>,
    /// Added to `localsplus` indices of cell and free variables that follow the varnames (extra
    /// locals were inserted after the varnames, before them); see `deref_slot`.
    pub deref_shift: u32,
    /// Where the appended copy of the original code starts (`original_copy`), once made.
    copy_base: Option<u32>,
    /// The fast-local slot of shared rebuild 0 (`Rebuild::Shared`); the others follow.
    pub shared_base: u32,
}

/// `ci`'s instructions as they are when placed from index `base` of a new instruction list, in
/// code whose cell and free variables moved `deref_shift` slots up (extra locals inserted
/// before them): jump targets and exception handlers shift by `base`; byte offsets are dropped.
pub fn relocated(ci: &CodeInfo, base: u32, deref_shift: u32) -> Vec<Instruction> {
    let nv = ci.varnames.len() as u32;
    ci.insts
        .iter()
        .map(|orig| {
            let mut i = orig.clone();
            i.offset = None;
            if let Some(t) = i.target {
                i.target = Some(InstId(t.0 + base));
            }
            if let Some(e) = i.exn.as_mut() {
                e.handler = InstId(e.handler.0 + base);
            }
            if is_deref(i.opcode) && i.arg >= nv {
                i.arg += deref_shift;
            }
            i
        })
        .collect()
}

/// Opcodes that name a cell or free variable by `localsplus` index.
pub fn is_deref(opcode: u8) -> bool {
    matches!(opcode, op::LOAD_DEREF | op::STORE_DEREF | op::DELETE_DEREF | op::LOAD_CLOSURE | op::MAKE_CELL | op::LOAD_CLASSDEREF | op::LOAD_FROM_DICT_OR_DEREF)
}

/// Whether `v` is a frozenset or a tuple holding one at any depth (Note [frozenset constants]).
fn holds_frozenset(v: &Bound<'_, PyAny>) -> bool {
    if v.is_instance_of::<pyo3::types::PyFrozenSet>() {
        return true;
    }
    match v.cast::<pyo3::types::PyTuple>() {
        Ok(t) => t.iter().any(|i| holds_frozenset(&i)),
        Err(_) => false,
    }
}

impl PyCodegen {
    pub fn new(py: Python<'_>, ci: &CodeInfo) -> PyResult<Self> {
        let consts = ci.consts.bind(py).iter().map(|c| c.unbind()).collect();
        let cellvars: Vec<String> = ci.code.bind(py).getattr("co_cellvars")?.extract()?;
        Ok(PyCodegen {
            insts: Vec::new(),
            names: ci.names.clone(),
            consts,
            cellvars,
            nv: ci.varnames.len() as u32,
            entry_cells: ci.cells_on_entry(),
            pos: Positions::line(ci.firstlineno),
            result_local: None,
            deref_shift: 0,
            copy_base: None,
            shared_base: ci.varnames.len() as u32,
        })
    }

    /// The emitted index of the original code's `localsplus` slot `slot` of a cell or free
    /// variable: slots after the varnames moved up by `deref_shift`; an argument that is a cell
    /// keeps its slot.
    pub fn deref_slot(&self, slot: u32) -> u32 {
        if slot >= self.nv {
            slot + self.deref_shift
        } else {
            slot
        }
    }

    pub fn emit(&mut self, opcode: u8, arg: u32) {
        self.insts.push(Instruction::new(opcode, arg).with_positions(self.pos));
    }

    fn name_idx(&mut self, name: &str) -> u32 {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                self.names.push(name.to_string());
                self.names.len() as u32 - 1
            }
        }
    }

    /// `LOAD_CONST obj` (always a new slot: identity matters for non-literal constants).
    pub fn load_const(&mut self, obj: Py<PyAny>) {
        // Note [frozenset constants]: building a code object remakes every frozenset among its
        // constants, also inside tuples (CPython's `intern_string_constants`: to a tuple and
        // back), so the loaded object would be another one, with another table (another
        // iteration order when members collide). Such a constant is loaded from a one-item
        // list instead, which the code keeps as it is.
        let held = Python::attach(|py| -> Option<(Py<PyAny>, Py<PyAny>)> {
            if !holds_frozenset(obj.bind(py)) {
                return None;
            }
            let list = pyo3::types::PyList::new(py, [obj.bind(py)]).ok()?.into_any().unbind();
            Some((list, 0i64.into_pyobject(py).ok()?.into_any().unbind()))
        });
        match held {
            Some((list, zero)) => {
                self.push_const(list);
                self.push_const(zero);
                self.emit(op::BINARY_SUBSCR, 0);
            }
            None => self.push_const(obj),
        }
    }

    /// A new constant slot holding `obj`, loaded.
    fn push_const(&mut self, obj: Py<PyAny>) {
        self.consts.push(obj);
        let i = self.consts.len() as u32 - 1;
        self.emit(op::LOAD_CONST, i);
    }

    /// Emits the loads that produce the value at `source` on the stack.
    pub fn load_source(&mut self, py: Python<'_>, source: &Source) {
        match source {
            Source::Local { idx, name } => {
                if self.entry_cells.contains(idx) {
                    // The slot's value at entry is the cell itself (`cell_contents` follows).
                    self.emit(op::LOAD_CLOSURE, *idx);
                } else if self.cellvars.contains(name) {
                    // An argument that is a cell: the prologue's MAKE_CELL wrapped it, and no
                    // user code ran since, so the cell holds the argument.
                    let slot = self.deref_slot(*idx);
                    self.emit(op::LOAD_DEREF, slot);
                } else {
                    self.emit(op::LOAD_FAST, *idx);
                }
            }
            Source::Closure { slot, .. } => {
                let slot = self.deref_slot(*slot);
                self.emit(op::LOAD_DEREF, slot);
            }
            Source::Global { name } => {
                let i = self.name_idx(name);
                self.emit(op::LOAD_GLOBAL, i << 1);
            }
            Source::GenericAttr { base, attr } => {
                let ga = py.get_type::<pyo3::types::PyAny>().getattr("__getattribute__").expect("object.__getattribute__");
                self.load_callable(ga.unbind());
                self.load_source(py, base);
                self.load_const(pyo3::types::PyString::new(py, attr).into_any().unbind());
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Source::WeakRefCall { base } => {
                // `operator.call(base)` (3.11+): `base()` with the callable-then-NULL order
                // of this version handled by `load_callable`.
                let call = py.import("operator").and_then(|m| m.getattr("call")).expect("operator.call");
                self.load_callable(call.unbind());
                self.load_source(py, base);
                self.emit(op::PRECALL, 1);
                self.emit(op::CALL, 1);
            }
            Source::Module { name } => {
                // Imported while tracing, so present; reloading it is what `import` would do.
                let m = crate::source::imported_module(py, name).unwrap_or_else(|| py.None());
                self.load_const(m);
            }
            Source::Attr { base, attr } if !attr.starts_with("__") => {
                // `_C.load_attr(base, attr)`: `base.attr` without a Python frame when base is an
                // nn.Module and attr one of its parameters, buffers or submodules (the inputs a
                // graph reads on every call; src/py/getattr.rs).
                let load_attr = py.import("dynamo._C").and_then(|m| m.getattr("load_attr")).expect("dynamo._C.load_attr");
                self.load_callable(load_attr.unbind());
                self.load_source(py, base);
                self.load_const(pyo3::types::PyString::intern(py, attr).into_any().unbind());
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Source::Attr { base, attr } => {
                self.load_source(py, base);
                let i = self.name_idx(attr);
                self.emit(op::LOAD_ATTR, i);
            }
            // `dynamo._polyfills.dict_key_at(base, index)` / `iter_peek(base, index)`.
            Source::DictKey { base, index } | Source::IterItem { base, index } => {
                let name = if matches!(source, Source::DictKey { .. }) { "dict_key_at" } else { "iter_peek" };
                let f = py.import("dynamo._polyfills").and_then(|m| m.getattr(name)).expect("a dynamo._polyfills function");
                self.load_callable(f.unbind());
                self.load_source(py, base);
                self.load_const((*index as i64).into_pyobject(py).unwrap().into_any().unbind());
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Source::IterSeq { base } => {
                self.load_source(py, base);
                let i = self.name_idx("__reduce__");
                self.emit(op::LOAD_METHOD, i);
                self.emit(op::PRECALL, 0);
                self.emit(op::CALL, 0);
                for k in [1i64, 0] {
                    self.load_const(k.into_pyobject(py).unwrap().into_any().unbind());
                    self.emit(op::BINARY_SUBSCR, 0);
                }
            }
            Source::DictItem { base, key } => {
                // `dict.__getitem__(base, key)`: the storage's item, no subclass code.
                let getitem = py.get_type::<pyo3::types::PyDict>().getattr("__getitem__").expect("dict.__getitem__");
                self.load_callable(getitem.unbind());
                self.load_source(py, base);
                self.load_const(key.to_object(py));
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Source::GetItem { base, key } => {
                self.load_source(py, base);
                self.load_const(key.to_object(py));
                self.emit(op::BINARY_SUBSCR, 0);
            }
        }
    }

    /// Note [input plans] (src/py/input_plan.rs): pushes `inputs` in order through one call of
    /// an `InputPlan` over their chains' roots and an `UNPACK_SEQUENCE`, when that replaces at
    /// least [`MIN_PLAN_READS`] attribute and item loads; returns false (nothing emitted) when
    /// it would not, or a plan cannot be made. `DYNAMO_INPUT_PLAN=0` turns plans off, for
    /// comparison.
    fn load_inputs_by_plan(&mut self, py: Python<'_>, inputs: &[Arc<Source>]) -> bool {
        use crate::py::input_plan::{InputPlan, Link};
        if std::env::var_os("DYNAMO_INPUT_PLAN").is_some_and(|v| v == "0") {
            return false;
        }
        let mut roots: Vec<Arc<Source>> = Vec::new();
        let mut chains = Vec::with_capacity(inputs.len());
        let mut loads = 0usize;
        for s in inputs {
            let mut links = Vec::new();
            let mut at = s.clone();
            loop {
                let (base, link) = match at.as_ref() {
                    Source::Attr { base, attr } => (base.clone(), Link::Attr(attr.clone())),
                    Source::GenericAttr { base, attr } => (base.clone(), Link::GenericAttr(attr.clone())),
                    Source::GetItem { base, key } => (base.clone(), Link::Item(key.clone())),
                    Source::DictItem { base, key } => (base.clone(), Link::DictItem(key.clone())),
                    _ => break,
                };
                links.push(link);
                at = base;
            }
            links.reverse();
            loads += links.len();
            let root = match roots.iter().position(|r| r == &at) {
                Some(i) => i,
                None => {
                    roots.push(at);
                    roots.len() - 1
                }
            };
            chains.push((root, links));
        }
        if loads < MIN_PLAN_READS {
            return false;
        }
        let Ok(plan) = InputPlan::build(py, roots.len(), chains) else { return false };
        let Ok(plan) = Py::new(py, plan) else { return false };
        self.load_callable(plan.into_any());
        for r in &roots {
            self.load_source(py, r);
        }
        self.emit(op::PRECALL, roots.len() as u32);
        self.emit(op::CALL, roots.len() as u32);
        self.emit(op::UNPACK_SEQUENCE, inputs.len() as u32);
        true
    }

    /// Pushes the constant callable `f` with the NULL marker a plain call needs, in the order
    /// this CPython's CALL reads them: `[NULL, f]` before 3.13, `[f, NULL]` from 3.13 on
    /// ([`PyVersion::null_after_callable`]). Two stack slots either way.
    pub fn load_callable(&mut self, f: Py<PyAny>) {
        if PyVersion::CURRENT.null_after_callable() {
            self.load_const(f);
            self.emit(op::PUSH_NULL, 0);
        } else {
            self.emit(op::PUSH_NULL, 0);
            self.load_const(f);
        }
    }

    /// Appends a copy of the whole original code (jump targets and handlers shifted, cell
    /// indices moved by `deref_shift`) and returns the index of its first instruction. Made once
    /// per codegen; nothing falls into it, callers jump or unwind into it.
    pub fn original_copy(&mut self, ci: &CodeInfo) -> u32 {
        if let Some(b) = self.copy_base {
            return b;
        }
        let base = self.insts.len() as u32;
        let copy = relocated(ci, base, self.deref_shift);
        self.insts.extend(copy);
        self.copy_base = Some(base);
        base
    }

    /// Emits the call of the compiled graph (`compiled_fn(*inputs)`, or `None` without one),
    /// leaving its result on the stack, and returns the range of emitted instructions for
    /// `protect_graph_call`. With a non-empty `snapshot` (positions in `inputs`), copies of those
    /// inputs are taken first (`_C.snapshot_inputs`; `_C.snapshot_inputs_and_rng` with `rng`, which
    /// keeps the generators' states too) and kept on the stack below the call for the failure
    /// handler; the normal path drops them.
    pub fn emit_graph_call(&mut self, py: Python<'_>, compiled_fn: Option<Py<PyAny>>, inputs: &[Arc<Source>], rerun: Option<&Rerun>) -> std::ops::Range<usize> {
        let keep = compiled_fn.is_some() && rerun.is_some_and(Rerun::keeps_state);
        let snapshot = match rerun {
            Some(r) if keep => &r.snapshot[..],
            _ => &[],
        };
        if keep {
            let rng = rerun.is_some_and(|r| r.rng);
            let autocast = rerun.is_some_and(|r| r.autocast);
            let first = rerun.is_some_and(|r| r.first_call_only);
            let name = if first && autocast { "snapshot_inputs_first_call_autocast" } else if first { "snapshot_inputs_first_call" } else if autocast { "snapshot_inputs_and_autocast" } else if rng { "snapshot_inputs_and_rng" } else { "snapshot_inputs" };
            let f = py.import("dynamo._C").and_then(|m| m.getattr(name)).expect("dynamo._C.snapshot_inputs");
            self.load_callable(f.unbind());
            if first {
                // The graph's own counter of calls left to protect.
                self.load_const(pyo3::types::PyList::new(py, [1i64]).expect("a list").into_any().unbind());
            } else if autocast {
                self.load_const(pyo3::types::PyBool::new(py, rng).to_owned().into_any().unbind());
            }
            for &k in snapshot {
                self.load_source(py, &inputs[k]);
            }
            let n = snapshot.len() as u32 + u32::from(autocast || first);
            self.emit(op::PRECALL, n);
            self.emit(op::CALL, n);
        }
        let start = self.insts.len();
        match compiled_fn {
            Some(f) => {
                self.load_callable(f);
                if !self.load_inputs_by_plan(py, inputs) {
                    for s in inputs {
                        self.load_source(py, s);
                    }
                }
                self.emit(op::PRECALL, inputs.len() as u32);
                self.emit(op::CALL, inputs.len() as u32);
            }
            None => self.load_const(py.None()),
        }
        let call = start..self.insts.len();
        if keep {
            self.emit(op::SWAP, 2);
            self.emit(op::POP_TOP, 0);
        }
        call
    }

    /// Note [graph failure reruns the frame]: when the graph raises (an index out of range, an
    /// integer division by zero: errors that depend on tensor values), the frame reruns from
    /// its first instruction as the original code, in ordinary Python: the user's try/except,
    /// finally and with blocks then see the error where eager would raise it, with the
    /// traceback on their line, and every effect that precedes the failing op in program order
    /// (list appends, attribute writes, in-place writes to inputs) happens as in eager, since
    /// side effects are replayed only after the graph returned. Sound because the graph call is
    /// the frame's first effect: a graph that may write its inputs (`Graph::mutated_inputs`)
    /// and may raise on values (`Graph::may_raise_on_values`) runs after `_C.snapshot_inputs`
    /// copied the inputs it writes, and `_C.graph_failed` puts those copies back before the
    /// rerun (a graph that writes inputs but has no op known to raise on values is protected on
    /// its first call only, `_C.snapshot_inputs_first_call`: errors that its fake-tensor trace
    /// could not see, a kernel missing for a dtype, show on that call; after such a failure,
    /// on every call); one that
    /// also draws random numbers (`Graph::uses_rng`) keeps the generators' states as well
    /// (`_C.snapshot_inputs_and_rng`), so the rerun draws what eager draws. The written inputs
    /// include the running statistics of a training `batch_norm` (`Node::written_args`). It also
    /// restores the grad mode of frame entry (the graph may have switched it), logs, and
    /// re-raises what is not an `Exception` (KeyboardInterrupt, SystemExit). Appended at the
    /// end: call after the last instruction that may fall through.
    pub fn protect_graph_call(&mut self, py: Python<'_>, ci: &CodeInfo, call: std::ops::Range<usize>, rerun: &Rerun) -> PyResult<()> {
        let handler = InstId(self.insts.len() as u32);
        let depth = u32::from(rerun.keeps_state());
        for i in call {
            self.insts[i].exn = Some(crate::bytecode::ExnTarget { handler, depth, lasti: false });
        }
        let f = py.import("dynamo._C")?.getattr("graph_failed")?;
        let grad = pyo3::types::PyBool::new(py, rerun.grad_enabled).to_owned().into_any().unbind();
        let null_after = PyVersion::CURRENT.null_after_callable();
        if depth == 0 && null_after {
            // Stack: [exc] -> [f, NULL, exc] -> graph_failed(exc, grad_enabled) (3.13 order).
            self.emit(op::PUSH_NULL, 0); // [exc, NULL]
            self.load_const(f.unbind()); // [exc, NULL, f]
            self.emit(op::SWAP, 3); // [f, NULL, exc]
            self.load_const(grad);
            self.emit(op::PRECALL, 2);
            self.emit(op::CALL, 2);
        } else if depth == 0 {
            // Stack: [exc] -> graph_failed(exc, grad_enabled) -> jump into the original code.
            self.emit(op::PUSH_NULL, 0);
            self.emit(op::SWAP, 2);
            self.load_const(f.unbind());
            self.emit(op::SWAP, 2);
            self.load_const(grad);
            self.emit(op::PRECALL, 2);
            self.emit(op::CALL, 2);
        } else if null_after {
            // Stack: [snapshot, exc] -> graph_failed(exc, grad_enabled, snapshot) (3.13 order).
            self.load_const(f.unbind()); // [snap, exc, f]
            self.emit(op::SWAP, 3); // [f, exc, snap]
            self.emit(op::PUSH_NULL, 0); // [f, exc, snap, NULL]
            self.emit(op::SWAP, 3); // [f, NULL, snap, exc]
            self.emit(op::SWAP, 2); // [f, NULL, exc, snap]
            self.load_const(grad); // [f, NULL, exc, snap, grad]
            self.emit(op::SWAP, 2); // [f, NULL, exc, grad, snap]
            self.emit(op::PRECALL, 3);
            self.emit(op::CALL, 3);
        } else {
            // Stack: [snapshot, exc] -> graph_failed(exc, grad_enabled, snapshot).
            self.emit(op::PUSH_NULL, 0); // [snap, exc, NULL]
            self.emit(op::SWAP, 3); // [NULL, exc, snap]
            self.load_const(f.unbind()); // [NULL, exc, snap, f]
            self.emit(op::SWAP, 3); // [NULL, f, snap, exc]
            self.emit(op::SWAP, 2); // [NULL, f, exc, snap]
            self.load_const(grad); // [NULL, f, exc, snap, grad]
            self.emit(op::SWAP, 2); // [NULL, f, exc, grad, snap]
            self.emit(op::PRECALL, 3);
            self.emit(op::CALL, 3);
        }
        self.emit(op::POP_TOP, 0);
        let jump_at = self.insts.len();
        self.insts.push(Instruction::jump(op::JUMP_FORWARD, InstId(0)));
        let base = self.original_copy(ci);
        self.insts[jump_at].target = Some(InstId(base + ci.body_start() as u32));
        Ok(())
    }

    /// Note [resume frames in tracebacks]: an exception leaving one of the resume calls `calls`
    /// (indices of their CALL_FUNCTION_EX) goes through a handler appended here that drops the
    /// traceback entry CPython just added for this frame (at the breaking instruction's line)
    /// and re-raises with RERAISE, which adds none: the traceback then shows the resume
    /// function's frame (named as the original, at the line that raised) as eager shows the one
    /// frame. Appended at the end: call after the last instruction that may fall through.
    ///
    /// `drop` names the `dynamo._C` function the handler calls: `drop_traceback_head` for resume
    /// calls; `drop_loop_traceback_head` for a loop driver's call, which drops this frame's
    /// entry only when a loop body (a frame named as this one) raised, and keeps it, at the
    /// `for` line, when the iterator did, as eager's traceback shows it.
    pub fn drop_own_traceback_entry(&mut self, py: Python<'_>, calls: &[usize], drop: &str) -> PyResult<()> {
        if calls.is_empty() {
            return Ok(());
        }
        let handler = InstId(self.insts.len() as u32);
        for &i in calls {
            self.insts[i].exn = Some(crate::bytecode::ExnTarget { handler, depth: 0, lasti: false });
        }
        let f = py.import("dynamo._C")?.getattr(drop)?;
        // Stack: [exc] -> drop_traceback_head(exc) -> RERAISE.
        if PyVersion::CURRENT.null_after_callable() {
            self.load_const(f.unbind()); // [exc, f]
            self.emit(op::SWAP, 2); // [f, exc]
            self.emit(op::PUSH_NULL, 0); // [f, exc, NULL]
            self.emit(op::SWAP, 2); // [f, NULL, exc]
        } else {
            self.emit(op::PUSH_NULL, 0); // [exc, NULL]
            self.emit(op::SWAP, 2); // [NULL, exc]
            self.load_const(f.unbind()); // [NULL, exc, f]
            self.emit(op::SWAP, 2); // [NULL, f, exc]
        }
        self.emit(op::PRECALL, 1);
        self.emit(op::CALL, 1);
        self.emit(op::RERAISE, 0);
        Ok(())
    }

    /// Emits the replay of `effects`. Note [side effect replay]: every effect's operands (its
    /// value, then its target) are pushed first, in order, and the stores run afterwards from the
    /// top down; so no store changes what another effect reads (`self.a = self.b; self.b = 1`
    /// replays as written). The stores thus run last effect first: `effects` comes in reverse
    /// write order (`plan_side_effects`), so new attributes and globals are inserted in the
    /// order the frame wrote them. The graph's result tuple sits `depth` slots below the top.
    /// Emits the hook replays among `effects` (Note [hooks registered in the trace] in
    /// `symbolic::variables::hooks`), each real handle stored in its shared temporary: right
    /// after the graph call, before the values that outlive the graph are built (a handle among
    /// them loads the temporary). Their values were planned first (shared rebuilds are made at
    /// their first reach), and registering a hook is seen by nothing the other effects run.
    /// `emit_side_effects` leaves them out. The graph's result tuple sits `depth` slots below
    /// the top.
    pub fn emit_hook_replays(&mut self, py: Python<'_>, effects: &[SideEffect], depth: u32) {
        for e in effects {
            if let SideEffect::ReplayHook { module, method, hook, kwargs, removed, handle_slot } = e {
                let replay = py.import("dynamo._polyfills").and_then(|m| m.getattr("replay_hook")).expect("dynamo._polyfills.replay_hook");
                self.load_callable(replay.unbind());
                self.load_source(py, module);
                self.load_const(pyo3::types::PyString::new(py, method).into_any().unbind());
                self.rebuild(py, hook, depth + 4);
                self.load_const(kwargs.clone_ref(py));
                self.load_const(pyo3::types::PyBool::new(py, *removed).to_owned().into_any().unbind());
                self.emit(op::PRECALL, 5);
                self.emit(op::CALL, 5);
                self.emit(op::STORE_FAST, self.shared_base + handle_slot);
            }
        }
    }

    pub fn emit_side_effects(&mut self, py: Python<'_>, effects: &[SideEffect], depth: u32) {
        for e in effects {
            if let SideEffect::AdvanceIter { target, steps, before_writes: true } = e {
                self.advance_iter(py, target, *steps);
            }
        }
        let mut d = depth;
        for e in effects {
            match e {
                SideEffect::SetAttr { target, value, .. } => {
                    self.rebuild(py, value, d);
                    self.load_source(py, target);
                    d += 2;
                }
                SideEffect::SetGlobal { value, .. } | SideEffect::SetDeref { value, .. } => {
                    self.rebuild(py, value, d);
                    d += 1;
                }
                SideEffect::FillCell { target, value } => {
                    self.rebuild(py, value, d);
                    self.rebuild(py, target, d + 1);
                    d += 2;
                }
                SideEffect::SetItem { target, key, value } => {
                    self.rebuild(py, value, d);
                    self.load_source(py, target);
                    self.load_const(key.clone_ref(py));
                    d += 3;
                }
                SideEffect::ListContents { target, items } => {
                    self.rebuild(py, items, d);
                    self.load_source(py, target);
                    let all = pyo3::types::PySlice::full(py).into_any().unbind();
                    self.load_const(all);
                    d += 3;
                }
                SideEffect::ListStorageContents { target, items } => {
                    let setitem = py.get_type::<pyo3::types::PyList>().getattr("__setitem__").expect("list.__setitem__");
                    self.load_callable(setitem.unbind());
                    self.load_source(py, target);
                    let all = pyo3::types::PySlice::full(py).into_any().unbind();
                    self.load_const(all);
                    self.rebuild(py, items, d + 4);
                    d += 5;
                }
                SideEffect::GenericSetAttr { target, name, value } => {
                    let setattr = py.get_type::<pyo3::types::PyAny>().getattr("__setattr__").expect("object.__setattr__");
                    self.load_callable(setattr.unbind());
                    self.load_source(py, target);
                    self.load_const(pyo3::types::PyString::new(py, name).into_any().unbind());
                    self.rebuild(py, value, d + 4);
                    d += 5;
                }
                SideEffect::DictContents { target, items, key_ops } | SideEffect::DictStorageContents { target, items, key_ops } => {
                    let name = if matches!(e, SideEffect::DictContents { .. }) { "replace_dict" } else { "replace_dict_storage" };
                    let mut replace = py.import("dynamo._C").and_then(|m| m.getattr(name)).expect("dynamo._C.replace_dict");
                    if let Some(ops) = key_ops {
                        let kwargs = PyDict::new(py);
                        kwargs.set_item("key_ops", ops.bind(py)).expect("a new dict");
                        replace = py.import("functools").and_then(|f| f.getattr("partial")).and_then(|p| p.call((replace,), Some(&kwargs))).expect("functools.partial");
                    }
                    self.load_callable(replace.unbind());
                    self.load_source(py, target);
                    self.rebuild(py, items, d + 3);
                    d += 4;
                }
                SideEffect::DequeContents { target, items } => {
                    let replace = py.import("dynamo._polyfills").and_then(|m| m.getattr("deque_replace")).expect("dynamo._polyfills.deque_replace");
                    self.load_callable(replace.unbind());
                    self.load_source(py, target);
                    self.rebuild(py, items, d + 3);
                    d += 4;
                }
                SideEffect::ListExtend { target, items } => {
                    let extend = py.get_type::<pyo3::types::PyList>().getattr("extend").expect("list.extend");
                    self.load_callable(extend.unbind());
                    self.load_source(py, target);
                    self.rebuild(py, items, d + 3);
                    d += 4;
                }
                SideEffect::CallMethod { .. } | SideEffect::AdvanceIter { .. } | SideEffect::ReplayHook { .. } => {}
            }
        }
        for e in effects.iter().rev() {
            match e {
                SideEffect::SetAttr { name, .. } => {
                    let i = self.name_idx(name);
                    self.emit(op::STORE_ATTR, i);
                }
                SideEffect::FillCell { .. } => {
                    let i = self.name_idx("cell_contents");
                    self.emit(op::STORE_ATTR, i);
                }
                SideEffect::SetGlobal { name, .. } => {
                    let i = self.name_idx(name);
                    self.emit(op::STORE_GLOBAL, i);
                }
                SideEffect::SetDeref { slot, .. } => {
                    let slot = self.deref_slot(*slot);
                    self.emit(op::STORE_DEREF, slot);
                }
                SideEffect::SetItem { .. } | SideEffect::ListContents { .. } => self.emit(op::STORE_SUBSCR, 0),
                SideEffect::DictContents { .. } | SideEffect::DictStorageContents { .. } | SideEffect::ListExtend { .. } | SideEffect::DequeContents { .. } => {
                    self.emit(op::PRECALL, 2);
                    self.emit(op::CALL, 2);
                    self.emit(op::POP_TOP, 0);
                }
                SideEffect::GenericSetAttr { .. } | SideEffect::ListStorageContents { .. } => {
                    self.emit(op::PRECALL, 3);
                    self.emit(op::CALL, 3);
                    self.emit(op::POP_TOP, 0);
                }
                SideEffect::CallMethod { .. } | SideEffect::AdvanceIter { .. } | SideEffect::ReplayHook { .. } => {}
            }
        }
        for e in effects {
            if let SideEffect::AdvanceIter { target, steps, before_writes: false } = e {
                self.advance_iter(py, target, *steps);
            }
        }
        // Calls last, in call order, once every write is in place.
        for e in effects {
            if let SideEffect::CallMethod { method: Callee::AtSite { method, site }, args, kwargs, arg_rebuilds } = e {
                // `_polyfills.logger_call_at(<method>, site, args, kwargs)`.
                let call_at = py.import("dynamo._polyfills").and_then(|m| m.getattr("logger_call_at")).expect("dynamo._polyfills.logger_call_at");
                self.load_callable(call_at.unbind());
                self.load_source(py, method);
                self.load_const(site.clone_ref(py));
                self.load_call_args(py, args, arg_rebuilds.as_deref());
                match kwargs {
                    Some(k) => self.load_const(k.clone_ref(py)),
                    None => self.load_const(py.None()),
                }
                self.emit(op::PRECALL, 4);
                self.emit(op::CALL, 4);
                self.emit(op::POP_TOP, 0);
                continue;
            }
            if let SideEffect::CallMethod { method, args, kwargs, arg_rebuilds } = e {
                // The callable and its NULL, in the version's order (load_callable).
                let null_after = PyVersion::CURRENT.null_after_callable();
                if !null_after {
                    self.emit(op::PUSH_NULL, 0);
                }
                match method {
                    Callee::Source(s) => self.load_source(py, s),
                    Callee::Object(o) => self.load_const(o.clone_ref(py)),
                    Callee::AtSite { .. } => unreachable!("called through logger_call_at above"),
                }
                if null_after {
                    self.emit(op::PUSH_NULL, 0);
                }
                self.load_call_args(py, args, arg_rebuilds.as_deref());
                if let Some(k) = kwargs {
                    self.load_const(k.clone_ref(py));
                }
                self.emit(op::CALL_FUNCTION_EX, u32::from(kwargs.is_some()));
                self.emit(op::POP_TOP, 0);
            }
        }
    }

    /// Pushes the argument tuple of a replayed call: the constant `args`, or the tuple of
    /// `rebuilds` (lazy constants made at run time: sources, constants and calls, never a graph
    /// output).
    fn load_call_args(&mut self, py: Python<'_>, args: &Py<PyAny>, rebuilds: Option<&[Rebuild]>) {
        match rebuilds {
            Some(rs) => {
                for r in rs {
                    self.rebuild(py, r, 0);
                }
                self.emit(op::BUILD_TUPLE, rs.len() as u32);
            }
            None => self.load_const(args.clone_ref(py)),
        }
    }

    /// `dynamo._C.advance_iter(<target>, steps)`, its result dropped (stack depth unchanged).
    fn advance_iter(&mut self, py: Python<'_>, target: &Arc<Source>, steps: usize) {
        let advance = py.import("dynamo._C").and_then(|m| m.getattr("advance_iter")).expect("dynamo._C.advance_iter");
        self.load_callable(advance.unbind());
        self.load_source(py, target);
        self.load_const((steps as i64).into_pyobject(py).unwrap().into_any().unbind());
        self.emit(op::PRECALL, 2);
        self.emit(op::CALL, 2);
        self.emit(op::POP_TOP, 0);
    }

    /// Pushes the rebuilt value; the graph's result tuple sits `depth` slots below the top.
    pub fn rebuild(&mut self, py: Python<'_>, r: &Rebuild, depth: u32) {
        match r {
            Rebuild::GraphOutput(k) => {
                match self.result_local {
                    Some(l) => self.emit(op::LOAD_FAST, l),
                    None => self.emit(op::COPY, depth + 1),
                }
                self.load_const((*k as i64).into_pyobject(py).unwrap().into_any().unbind());
                self.emit(op::BINARY_SUBSCR, 0);
            }
            Rebuild::Const(c) => self.load_const(c.clone_ref(py)),
            Rebuild::Source(s) => self.load_source(py, s),
            Rebuild::Shared { id, inner } => {
                self.rebuild(py, inner, depth);
                self.emit(op::COPY, 1);
                self.emit(op::STORE_FAST, self.shared_base + id);
            }
            Rebuild::SharedRef(id) => self.emit(op::LOAD_FAST, self.shared_base + id),
            Rebuild::SharedCyclic { id, shell, fill } => {
                self.rebuild(py, shell, depth);
                self.emit(op::STORE_FAST, self.shared_base + id);
                self.rebuild(py, fill, depth);
                self.emit(op::POP_TOP, 0);
                self.emit(op::LOAD_FAST, self.shared_base + id);
            }
            Rebuild::Tuple(items) | Rebuild::List(items) => {
                for (i, it) in items.iter().enumerate() {
                    self.rebuild(py, it, depth + i as u32);
                }
                let opcode = if matches!(r, Rebuild::Tuple(_)) { op::BUILD_TUPLE } else { op::BUILD_LIST };
                self.emit(opcode, items.len() as u32);
            }
            Rebuild::Dict(items) => {
                for (i, (_, v)) in items.iter().enumerate() {
                    self.rebuild(py, v, depth + i as u32);
                }
                let keys = PyTuple::new(py, items.iter().map(|(k, _)| k.bind(py).clone())).unwrap();
                self.load_const(keys.into_any().unbind());
                self.emit(op::BUILD_CONST_KEY_MAP, items.len() as u32);
            }
            Rebuild::Iterator(items) => {
                for (i, it) in items.iter().enumerate() {
                    self.rebuild(py, it, depth + i as u32);
                }
                self.emit(op::BUILD_TUPLE, items.len() as u32);
                self.emit(op::GET_ITER, 0);
            }
            Rebuild::Attr(base, name) => {
                self.rebuild(py, base, depth);
                let i = self.name_idx(name);
                self.emit(op::LOAD_ATTR, i);
            }
            Rebuild::ListIter { list, pos } => {
                let iter_at = py.import("dynamo._C").and_then(|m| m.getattr("iter_at")).expect("dynamo._C.iter_at");
                self.load_callable(iter_at.unbind());
                self.load_source(py, list);
                self.load_const((*pos as i64).into_pyobject(py).unwrap().into_any().unbind());
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Rebuild::BoundMethod { func, self_ } => {
                let method_type = py.import("types").and_then(|t| t.getattr("MethodType")).expect("types.MethodType");
                self.load_callable(method_type.unbind());
                self.load_const(func.clone_ref(py));
                self.rebuild(py, self_, depth + 3);
                self.emit(op::PRECALL, 2);
                self.emit(op::CALL, 2);
            }
            Rebuild::Call { func, args } => {
                self.load_callable(func.clone_ref(py));
                for (i, a) in args.iter().enumerate() {
                    self.rebuild(py, a, depth + 2 + i as u32);
                }
                self.emit(op::PRECALL, args.len() as u32);
                self.emit(op::CALL, args.len() as u32);
            }
            Rebuild::SetOf(members) => {
                self.load_callable(py.get_type::<pyo3::types::PySet>().into_any().unbind());
                // A frozenset loads as itself, not as the copy a code constant would be (Note
                // [frozenset constants]).
                self.load_const(members.clone_ref(py));
                self.emit(op::PRECALL, 1);
                self.emit(op::CALL, 1);
            }
            Rebuild::MakeFunction { code, defaults, closure } => {
                let mut flags = 0;
                let mut pushed = 0;
                if !defaults.is_empty() {
                    for (i, d) in defaults.iter().enumerate() {
                        self.rebuild(py, d, depth + i as u32);
                    }
                    self.emit(op::BUILD_TUPLE, defaults.len() as u32);
                    flags |= 0x01;
                    pushed += 1;
                }
                if !closure.is_empty() {
                    for (i, c) in closure.iter().enumerate() {
                        self.rebuild(py, c, depth + pushed + i as u32);
                    }
                    self.emit(op::BUILD_TUPLE, closure.len() as u32);
                    flags |= 0x08;
                }
                self.load_const(code.clone_ref(py));
                self.emit(op::MAKE_FUNCTION, flags);
            }
            Rebuild::FrameCell(slot) => {
                let slot = self.deref_slot(*slot);
                self.emit(op::LOAD_CLOSURE, slot);
            }
        }
    }
}

/// Builds the transformed code object for a fully captured frame: `compiled_fn` (or `None` when
/// the graph has no ops) is called with the inputs loaded from `inputs`, and `result` says how to
/// rebuild the return value; `effects` are replayed after it, `rerun_on_failure` says how a
/// failing graph is recovered, and `n_shared` temporary locals hold shared rebuilds.
#[allow(clippy::too_many_arguments)]
pub fn compiled_frame_code(
    py: Python<'_>,
    ci: &CodeInfo,
    compiled_fn: Option<Py<PyAny>>,
    inputs: &[Arc<Source>],
    result: &Rebuild,
    effects: &[SideEffect],
    rerun_on_failure: Option<Rerun>,
    n_shared: u32,
) -> PyResult<Py<PyAny>> {
    let mut cg = PyCodegen::new(py, ci)?;
    // Temporary locals of shared rebuilds go after the varnames: cell and free variables move up.
    let nv = ci.varnames.len() as u32;
    cg.deref_shift = n_shared;
    // Prologue: everything up to and including RESUME.
    let body = ci.body_start();
    for inst in &ci.insts[..body] {
        let mut i = inst.clone();
        i.exn = None;
        if is_deref(i.opcode) && i.arg >= nv {
            i.arg += n_shared;
        }
        cg.insts.push(i);
    }
    let has_graph = compiled_fn.is_some();
    let call = cg.emit_graph_call(py, compiled_fn, inputs, rerun_on_failure.as_ref());
    // The hooks are registered first; the result is rebuilt before the other side effects
    // replay (among them the contents of the cells that escaping functions close over): it
    // reads sources as they were.
    cg.emit_hook_replays(py, effects, 0);
    cg.rebuild(py, result, 0);
    cg.emit_side_effects(py, effects, 1);
    cg.emit(op::SWAP, 2);
    cg.emit(op::POP_TOP, 0);
    cg.emit(op::RETURN_VALUE, 0);
    if let (true, Some(rerun)) = (has_graph, &rerun_on_failure) {
        cg.protect_graph_call(py, ci, call, rerun)?;
    }
    let mut varnames = ci.varnames.clone();
    varnames.extend((0..n_shared).map(|i| format!("__shared{i}")));
    finish_with(py, ci, cg, |kw| {
        kw.set_item("co_varnames", PyTuple::new(py, &varnames)?)?;
        kw.set_item("co_nlocals", varnames.len())?;
        Ok(())
    })
}

/// Assembles `cg`'s instructions into `ci.code.replace(...)` with all argument slots positional.
pub fn finish(py: Python<'_>, ci: &CodeInfo, cg: PyCodegen) -> PyResult<Py<PyAny>> {
    finish_with(py, ci, cg, |_| Ok(()))
}

/// `finish`, letting the caller add or override `code.replace` arguments.
pub fn finish_with(py: Python<'_>, ci: &CodeInfo, cg: PyCodegen, extra: impl FnOnce(&Bound<'_, PyDict>) -> PyResult<()>) -> PyResult<Py<PyAny>> {
    let asm = assemble(&cg.insts, ci.firstlineno, PyVersion::CURRENT)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("assembling transformed code: {e}")))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("co_code", PyBytes::new(py, &asm.code))?;
    kwargs.set_item("co_linetable", PyBytes::new(py, &asm.linetable))?;
    kwargs.set_item("co_exceptiontable", PyBytes::new(py, &asm.exceptiontable))?;
    kwargs.set_item("co_stacksize", asm.stacksize)?;
    kwargs.set_item("co_consts", PyTuple::new(py, cg.consts.iter().map(|c| c.bind(py)))?)?;
    kwargs.set_item("co_names", PyTuple::new(py, &cg.names)?)?;
    kwargs.set_item("co_argcount", ci.n_arg_slots())?;
    kwargs.set_item("co_posonlyargcount", 0)?;
    kwargs.set_item("co_kwonlyargcount", 0)?;
    kwargs.set_item("co_flags", ci.flags & !(flags::CO_VARARGS | flags::CO_VARKEYWORDS))?;
    extra(&kwargs)?;
    Ok(ci.code.bind(py).call_method("replace", (), Some(&kwargs))?.unbind())
}
