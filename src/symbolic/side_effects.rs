//! Side effects recorded during tracing and replayed after the graph (the role of
//! `torch/_dynamo/side_effects.py`).
//!
//! Mutations of objects that exist outside the frame cannot go into the graph. Tracing records
//! them instead, in first-write order, and later reads in the same frame see the pending values:
//! - attribute writes on user objects and modules reached from the frame (`obj.name = v`),
//! - global writes (`STORE_GLOBAL`, or into another module's globals through an inlined call),
//! - mutations of lists and dicts reached from the frame (append, extend, setitem, pop, ...),
//!   kept as the tracker's new contents,
//! - steps of iterators reached from the frame (`next(it)` on an argument, an attribute or a
//!   global): the caller's iterator is advanced by as many steps after the graph (Note
//!   [iterators from outside the frame]).
//!
//! The transformed code replays them after the graph ran, before the frame returns or before the
//! instruction a graph break runs in Python (which may observe them). All values and targets are
//! loaded first and the stores run afterwards, so a replayed store never changes what another
//! one reads (Note [side effect replay] in `pycodegen`).

use crate::source::Source;
use crate::symbolic::variables::{DictState, IteratorState, ListState, VT};
use pyo3::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A pending `obj.name = value` on an object reached through `source`.
pub struct AttrWrite {
    /// Address of the object (kept alive by `obj`): the identity the write is keyed on.
    pub ptr: usize,
    pub obj: Py<PyAny>,
    pub source: Arc<Source>,
    pub name: String,
    pub value: VT,
    /// Replay through `object.__setattr__` (the write came through it, bypassing the class's
    /// own `__setattr__`).
    pub generic: bool,
}

/// A pending global write: `name` in the globals dict at address `dict`, which is the frame's
/// own (`dict_source` `None`, replayed with `STORE_GLOBAL`) or another module's, reached through
/// `dict_source`.
/// A call with constant arguments, replayed after the graph, in call order: `callee(*args,
/// **kwargs)`, its result dropped. A logging method (`logger.name(...)`, Note [logger calls] in
/// `symbolic::translator`) or an `lru_cache` wrapper whose call was traced through `__wrapped__`
/// (Note [lru_cache'd calls] in `symbolic::variables::functions`).
pub struct LoggerCall {
    pub callee: crate::pycodegen::Callee,
    pub args: Py<PyAny>,
    /// How each argument is made at run time, when one of them is a lazy constant (Note [lazy
    /// constants]: `log.info(f"lr={lr}")` formats the argument of each call); `None` when
    /// `args` are all plain constants.
    pub lazy_args: Option<Vec<crate::symbolic::output_graph::LazyRecipe>>,
    pub kwargs: Option<Py<PyAny>>,
    /// `SideEffects::writes` when the call was traced: a logging call followed by writes is not
    /// replayed (its handlers would see them; Note [logger calls]).
    pub writes_before: u64,
    /// `OutputGraph::top_ip` when the call was traced: where the frame breaks instead.
    pub at: (usize, usize),
    /// The call may be replayed after later writes: its records reach only the standard
    /// library's or pytest's handlers, which read nothing else (`_polyfills.logger_sees_only_records`).
    pub reorderable: bool,
}

pub struct GlobalWrite {
    pub dict: usize,
    pub dict_source: Option<Arc<Source>>,
    pub name: String,
    pub value: VT,
}

/// Where a cell that outlives the frame lives, so that a write to it can be replayed.
#[derive(Clone, Debug)]
pub enum CellTarget {
    /// A free variable of the frame itself, at this `localsplus` slot (`STORE_DEREF`).
    FrameFree(u32),
    /// A cell variable a resume function received from the frame that broke, at this
    /// `localsplus` slot (`STORE_DEREF`): functions made before the break share it.
    FrameCell(u32),
    /// A cell object reached through this source (`fn.__closure__[i]`), written through
    /// `cell_contents`.
    Object(Arc<Source>),
    /// Not reachable again (a closure of a function without a source): a write is a graph break.
    Unknown,
}

/// A list, tuple, range or dict iterator that exists outside the frame (reached through
/// `source`), stepped by the trace through `state`.
///
/// Note [iterators from outside the frame]: stepping an iterator is a mutation of it. The trace
/// steps its own tracker (the items it walks are pinned by the iterator's guards), and the
/// transformed code steps the real iterator as many times after the graph
/// (`dynamo._C.advance_iter`), once more when the trace found it exhausted (CPython's list and
/// tuple iterators then drop their sequence). A graph break hands the real iterator itself to
/// the resume function (it is reloaded from `source`, never rebuilt as a copy), so the steps the
/// rest of the frame takes advance the caller's iterator too. One tracker per iterator object:
/// a second path to the same iterator is guarded as an alias of the first, and two iterators the
/// trace stepped as different objects are guarded to stay different.
pub struct ExternalIter {
    /// Address of the iterator (kept alive by `obj`).
    pub ptr: usize,
    pub obj: Py<PyAny>,
    pub source: Arc<Source>,
    pub state: Rc<RefCell<IteratorState>>,
    /// `state.pos` when it was wrapped.
    pub start: usize,
    /// A tuple, list or range iterator of literals whose items are lazy constants: guarded by
    /// `ITERATOR_LEN` once the trace is done (Note [items of iterators from outside the
    /// frame]).
    pub literal_items: bool,
}

/// Note [dicts walked by iterators from outside the frame]: a dict iterator of CPython walks
/// its dict's entry table by position (Objects/dictobject.c, `dictiter_iternextkey`): a
/// deleted key leaves a hole, an inserted one goes at the end, and a resize compacts the
/// table, so what the iterator yields after a change that keeps the size (`del d[k]; d[k] =
/// v`, the move-to-end idiom) depends on the table's layout. The trace keeps a dict as its
/// ordered items, and its replay writes them back whole (`replace_dict`), which compacts the
/// table: a real iterator over the dict (a loop continued in a resume function) then skipped
/// or repeated keys. So an instruction of the converted frame that changes the keys of a dict
/// that such an iterator, not yet exhausted, walks is a graph break: Python runs it on the
/// real dict, and the next resume function takes the iterator again only when the items it
/// has left are the tracker's (`builder::wrap`'s check through `__reduce__`), else steps it in
/// Python.
impl SideEffects {
    /// Each dict tracker that an unexhausted iterator from outside the frame walks, with its
    /// structure version now.
    pub fn walked_dict_versions(&self) -> Vec<(Rc<RefCell<crate::symbolic::variables::dicts::DictState>>, u64)> {
        if self.external_iters.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for e in &self.external_iters {
            let st = e.state.borrow();
            if st.exhausted {
                continue;
            }
            match &st.kind {
                crate::symbolic::variables::IterKind::Dict { dict, .. } | crate::symbolic::variables::IterKind::DictReversed { dict, .. } => {
                    let v = dict.borrow().version;
                    out.push((dict.clone(), v));
                }
                _ => {}
            }
        }
        out
    }
}

impl ExternalIter {
    /// Steps to replay on the real iterator: those the trace took, one more when the trace saw
    /// it exhausted.
    pub fn steps(&self) -> usize {
        let st = self.state.borrow();
        st.pos.saturating_sub(self.start) + usize::from(st.exhausted)
    }
}

/// Everything a frame's trace changed outside itself, in first-change order per kind.
#[derive(Default)]
pub struct SideEffects {
    pub attrs: Vec<AttrWrite>,
    pub globals: Vec<GlobalWrite>,
    /// Lists from the frame whose contents changed (their tracker holds the new items).
    pub lists: Vec<Rc<RefCell<ListState>>>,
    /// Dicts from the frame whose contents changed.
    pub dicts: Vec<Rc<RefCell<DictState>>>,
    /// Cells that outlive the frame and were written (`nonlocal`); the tracker holds the value.
    pub cells: Vec<(CellTarget, Rc<RefCell<Option<VT>>>)>,
    /// Logging calls, in call order.
    pub logger_calls: Vec<LoggerCall>,
    /// Iterators from outside the frame, in wrap order (stepped or not).
    pub external_iters: Vec<ExternalIter>,
    /// Forward hooks registered in the trace, in registration order (Note [hooks registered in
    /// the trace] in `variables/hooks.rs`).
    pub hooks: Vec<Rc<RefCell<crate::symbolic::variables::hooks::HookRegistration>>>,
    /// How many writes were recorded, repeated writes to the same place included: a trace step
    /// that leaves it (and `logger_calls`) unchanged wrote nothing outside the trace.
    pub writes: u64,
    /// How many of `writes` were attribute writes (`store_attr`).
    pub attr_writes: u64,
    /// While a checkpointed region is traced: its attribute writes in order, each with the
    /// number of tensors autograd had saved in the region before it (Note [checkpointed Python
    /// effects] in `object_protocol.rs`).
    pub checkpoint_log: Option<CheckpointLog>,
}

/// The attribute writes of a checkpointed region being traced, interleaved with the tensors
/// autograd saves there (counted by a `saved_tensors_hooks` pack hook appending to `packs`).
pub struct CheckpointLog {
    pub packs: Py<pyo3::types::PyList>,
    /// (tensors saved before the write, object address, attribute, value).
    pub writes: Vec<(usize, usize, String, VT)>,
    /// A checkpoint nested in the region installed its own hooks: the count is not the region's.
    pub nested: bool,
}

impl SideEffects {
    /// The pending value of `obj.name`, if this trace wrote it.
    pub fn attr(&self, obj: &Py<PyAny>, name: &str) -> Option<VT> {
        let ptr = obj.as_ptr() as usize;
        self.attrs.iter().find(|w| w.ptr == ptr && w.name == name).map(|w| w.value.clone())
    }

    /// Records `obj.name = value` (a later write to the same attribute replaces the value).
    pub fn store_attr(&mut self, py: Python<'_>, obj: &Py<PyAny>, source: Arc<Source>, name: &str, value: VT) {
        let ptr = obj.as_ptr() as usize;
        self.writes += 1;
        self.attr_writes += 1;
        if let Some(log) = &mut self.checkpoint_log {
            log.writes.push((log.packs.bind(py).len(), ptr, name.to_string(), value.clone()));
        }
        match self.attrs.iter_mut().find(|w| w.ptr == ptr && w.name == name) {
            Some(w) => w.value = value,
            None => self.attrs.push(AttrWrite { ptr, obj: obj.clone_ref(py), source, name: name.to_string(), value, generic: false }),
        }
    }

    /// Marks the pending write of `obj.name` as made through `object.__setattr__`.
    pub fn mark_generic(&mut self, obj: &Py<PyAny>, name: &str) {
        let ptr = obj.as_ptr() as usize;
        if let Some(w) = self.attrs.iter_mut().find(|w| w.ptr == ptr && w.name == name) {
            w.generic = true;
        }
    }

    /// The pending value of global `name` in the dict at address `dict`.
    pub fn global(&self, dict: usize, name: &str) -> Option<VT> {
        self.globals.iter().find(|w| w.dict == dict && w.name == name).map(|w| w.value.clone())
    }

    /// Records a global write.
    pub fn store_global(&mut self, dict: usize, dict_source: Option<Arc<Source>>, name: &str, value: VT) {
        self.writes += 1;
        match self.globals.iter_mut().find(|w| w.dict == dict && w.name == name) {
            Some(w) => w.value = value,
            None => self.globals.push(GlobalWrite { dict, dict_source, name: name.to_string(), value }),
        }
    }

    /// Records a write to an outliving cell (its tracker will hold the value).
    pub fn store_cell(&mut self, target: CellTarget, cell: &Rc<RefCell<Option<VT>>>) {
        self.writes += 1;
        if !self.cells.iter().any(|(_, c)| Rc::ptr_eq(c, cell)) {
            self.cells.push((target, cell.clone()));
        }
    }

    /// Marks a list from the frame as mutated (its tracker's items are the new contents).
    pub fn mutate_list(&mut self, l: &Rc<RefCell<ListState>>) {
        self.writes += 1;
        if !self.lists.iter().any(|x| Rc::ptr_eq(x, l)) {
            self.lists.push(l.clone());
        }
    }

    /// Marks a dict from the frame as mutated.
    pub fn mutate_dict(&mut self, d: &Rc<RefCell<DictState>>) {
        self.writes += 1;
        if !self.dicts.iter().any(|x| Rc::ptr_eq(x, d)) {
            self.dicts.push(d.clone());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.attrs.is_empty() && self.globals.is_empty() && self.lists.is_empty() && self.dicts.is_empty() && self.cells.is_empty() && self.logger_calls.is_empty() && self.hooks.is_empty() && self.iter_steps() == 0
    }

    /// The tracker of the outside iterator at address `ptr`, with the source it was first
    /// reached through.
    pub fn external_iter(&self, ptr: usize) -> Option<(Arc<Source>, Rc<RefCell<IteratorState>>)> {
        self.external_iters.iter().find(|e| e.ptr == ptr).map(|e| (e.source.clone(), e.state.clone()))
    }

    /// The source of `state` when it is the tracker of an iterator from outside the frame.
    pub fn external_iter_source(&self, state: &Rc<RefCell<IteratorState>>) -> Option<Arc<Source>> {
        self.external_iters.iter().find(|e| Rc::ptr_eq(&e.state, state)).map(|e| e.source.clone())
    }

    /// Steps taken so far on iterators from outside the frame (a trace step that leaves it
    /// unchanged stepped none).
    pub fn iter_steps(&self) -> usize {
        self.external_iters.iter().map(|e| e.steps()).sum()
    }

    /// Number of pending effects (for logs and `explain`).
    pub fn len(&self) -> usize {
        self.attrs.len() + self.globals.len() + self.lists.len() + self.dicts.len() + self.cells.len() + self.logger_calls.len() + self.hooks.len() + self.external_iters.iter().filter(|e| e.steps() > 0).count()
    }
}
