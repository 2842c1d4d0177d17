//! `VariableTracker`: the symbolic value of every stack slot and local during tracing.
//!
//! A closed enum. Immutable Python values are `Constant`s (operations on them are folded by
//! running the real operation); tensors are graph nodes carrying a fake example value; containers
//! built during tracing hold trackers. Trackers that came from the frame carry the `Source` they
//! were read from (which is also what guards were installed on).

use crate::graph::NodeId;
use crate::source::Source;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A tensor in the graph: its node, its fake example value (a `FakeTensor`), and where it came
/// from when it is a graph input.
pub struct TensorVariable {
    pub node: NodeId,
    pub fake: Py<PyAny>,
    pub source: Option<Arc<Source>>,
}

/// A Python number computed from symbolic sizes (Note [symbolic sizes] in `output_graph.rs`):
/// `x.size(0)` of a tensor with a dynamic dimension, `b * t`, `n // heads`. It is a graph node
/// whose fake value is a `torch.SymInt` (or `SymFloat`) over the `ShapeEnv`'s size symbols;
/// Python-level uses that need its value (`if`, `range`, indexing a list) specialize it, which
/// records a shape guard in the `ShapeEnv`.
pub struct SymNodeVariable {
    pub node: NodeId,
    pub fake: Py<PyAny>,
    /// Where a symbolic int/float graph input came from (its placeholder); `None` for computed
    /// values.
    pub source: Option<Arc<Source>>,
}

/// Which view of a dict: `d.keys()`, `d.values()` or `d.items()` (also what an iterator over
/// the dict yields; iterating the dict itself walks its keys).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DictView {
    Keys,
    Values,
    Items,
}

impl DictView {
    /// The method of `dict` that makes this view (`dict.keys`, ...).
    pub fn method(self) -> &'static str {
        match self {
            DictView::Keys => "keys",
            DictView::Values => "values",
            DictView::Items => "items",
        }
    }
}

/// What an iterator walks, mirroring CPython's iterator types: each reads its container live at
/// every step, so a loop body that mutates the container sees what CPython's loop would.
pub enum IterKind {
    /// A fixed sequence (a tuple, a range, a string, an inlined generator's yields, ...).
    Items(Vec<VariableTracker>),
    /// `listiterator` (Objects/listobject.c, `listiter_next`): item `pos` of the live list.
    List(Rc<RefCell<ListState>>),
    /// `list_reverseiterator` (`listreviter_next`): item `index` while `0 <= index < len`,
    /// counting down; exhausted for good otherwise.
    ListReversed { list: Rc<RefCell<ListState>>, index: i64 },
    /// A dict iterator (Objects/dictobject.c, `dictiter_iternextkey` and friends): `used` is the
    /// dict's size when the iterator was made and `version` its structure then; a different size
    /// at a step raises `RuntimeError: dictionary changed size during iteration`.
    Dict { dict: Rc<RefCell<DictState>>, view: DictView, used: usize, version: u64 },
    /// `enumerate(inner, start)` (Objects/enumobject.c): `count` is the next index.
    Enumerate { inner: Rc<RefCell<IteratorState>>, count: i64 },
    /// `zip(*inners)` (Python/bltinmodule.c, `zip_next`): steps each inner in order and stops at
    /// the first exhausted one (items already taken from the earlier ones are dropped).
    Zip(Vec<Rc<RefCell<IteratorState>>>),
    /// A generator made in the trace: its frame runs up to the next `yield` at each step, so
    /// its body interleaves with the loop that consumes it as in CPython. `None` while a step
    /// runs it (a generator that steps itself is "already executing").
    Generator(Option<Box<GeneratorFrame>>),
    /// `map(func, *inners)` (Python/bltinmodule.c, `map_next`): one item of each inner, in
    /// order, stopping at the first exhausted one; then `func(*items)`.
    Map { func: VariableTracker, inners: Vec<Rc<RefCell<IteratorState>>> },
    /// `filter(func, inner)` (`filter_next`): the next item whose `func(item)` (the item
    /// itself for `None`) is true.
    Filter { func: Option<VariableTracker>, inner: Rc<RefCell<IteratorState>> },
    /// `itertools.chain(*iterables)` (Modules/itertoolsmodule.c, `chain_next`): `iter()` of
    /// each iterable is taken only when the previous one is exhausted.
    Chain { pending: std::collections::VecDeque<VariableTracker>, active: Option<Rc<RefCell<IteratorState>>> },
    /// `itertools.islice(inner, start, stop, step)` (`islice_next`): `count` items taken from
    /// `inner` so far, `next` the index of the next item to yield.
    Islice { inner: Rc<RefCell<IteratorState>>, next: usize, stop: Option<usize>, step: usize, count: usize },
    /// `itertools.accumulate(inner, func, initial=...)` (`accumulate_next`): running
    /// `func(total, item)` (`+` when `func` is None), `initial` first when given.
    Accumulate { inner: Rc<RefCell<IteratorState>>, func: Option<VariableTracker>, total: Option<VariableTracker>, initial: Option<VariableTracker> },
    /// `itertools.zip_longest(*inners, fillvalue=fill)` (`zip_longest_next`): an exhausted inner
    /// gives `fill` until every inner is exhausted (`None` marks an exhausted one).
    ZipLongest { inners: Vec<Option<Rc<RefCell<IteratorState>>>>, fill: VariableTracker },
}

/// What a lazy iterator asks of the translator while it steps (calls run traced).
pub enum IterRequest<'a> {
    /// Run a generator's frame to its next `yield`.
    Resume(&'a mut GeneratorFrame),
    /// `func(*args)`.
    Call(&'a VariableTracker, Vec<VariableTracker>),
    /// `bool(v)`, answered as a constant bool tracker.
    Truth(&'a VariableTracker),
    /// `iter(v)`, answered as an `Iterator` tracker.
    MakeIter(&'a VariableTracker),
    /// `a + b`.
    Add(VariableTracker, VariableTracker),
}

/// The suspended frame of a generator being traced (`IterKind::Generator`).
pub struct GeneratorFrame {
    pub code: Arc<crate::symbolic::code_info::CodeInfo>,
    pub g: Rc<crate::symbolic::translator::GlobalsInfo>,
    pub stack: Vec<VariableTracker>,
    pub locals: Vec<Option<VariableTracker>>,
    pub closure: Vec<VariableTracker>,
    pub external_cells: std::collections::HashMap<usize, crate::symbolic::side_effects::CellTarget>,
    /// The next instruction; 0 before the first step.
    pub ip: usize,
    /// What the frame returned (`StopIteration.value`), once it has.
    pub returned: Option<VariableTracker>,
}

/// Why an iterator step cannot give an item.
pub enum IterError {
    /// CPython raises `RuntimeError` with this message at this step.
    Raise(&'static str),
    /// The step depends on something not modelled.
    Unsupported(crate::symbolic::Unsupported),
}

/// Answers an `IterRequest` (`Resume`: `Ok(None)` when the generator returned).
pub type ResumeGenerator<'r> = dyn FnMut(IterRequest<'_>) -> Result<Option<VariableTracker>, IterError> + 'r;

/// An iterator being stepped during tracing.
pub struct IteratorState {
    pub kind: IterKind,
    /// Items produced so far (for `Items`, `List` and `Dict`: the index of the next one).
    pub pos: usize,
    /// Set once a step found the iterator exhausted: CPython's iterators stay exhausted (a list
    /// iterator drops its list), even if the container grows afterwards.
    pub exhausted: bool,
    /// A generator's return value (`StopIteration.value`), kept once the step that exhausted it
    /// ran: what `yield from` over it evaluates to. `None` stands for Python's None.
    pub returned: Option<VariableTracker>,
}

impl IteratorState {
    /// An iterator over a fixed sequence of items.
    pub fn over(items: Vec<VariableTracker>) -> Self {
        IteratorState::of(IterKind::Items(items))
    }

    pub fn of(kind: IterKind) -> Self {
        IteratorState { kind, pos: 0, exhausted: false, returned: None }
    }

    /// A live iterator over a list tracker.
    pub fn over_list(list: Rc<RefCell<ListState>>) -> Self {
        IteratorState::of(IterKind::List(list))
    }

    /// A live iterator over a dict tracker's keys, values or items.
    pub fn over_dict(dict: Rc<RefCell<DictState>>, view: DictView) -> Self {
        let (used, version) = {
            let d = dict.borrow();
            (d.items.len(), d.version)
        };
        IteratorState::of(IterKind::Dict { dict, view, used, version })
    }

    /// The next item, advancing the position (`Ok(None)` when exhausted).
    pub fn next_item(&mut self, py: Python<'_>, resume: &mut ResumeGenerator<'_>) -> Result<Option<VariableTracker>, IterError> {
        if self.exhausted {
            return Ok(None);
        }
        let item = match &mut self.kind {
            IterKind::Items(items) => items.get(self.pos).cloned(),
            IterKind::List(l) => l.borrow().items.get(self.pos).cloned(),
            IterKind::ListReversed { list, index } => {
                let l = list.borrow();
                if *index >= 0 && (*index as usize) < l.items.len() {
                    let v = l.items[*index as usize].clone();
                    *index -= 1;
                    Some(v)
                } else {
                    *index = -1;
                    None
                }
            }
            IterKind::Dict { dict, view, used, version } => {
                let d = dict.borrow();
                if d.items.len() != *used {
                    // CPython makes this sticky (`di_used = -1`): every later step raises too.
                    *used = usize::MAX;
                    return Err(IterError::Raise("dictionary changed size during iteration"));
                }
                if d.version != *version {
                    return Err(IterError::Unsupported(crate::symbolic::Unsupported::new("a dict whose keys changed (same size) while iterated")));
                }
                match d.items.get(self.pos) {
                    None => None,
                    Some((k, v)) => Some(match view {
                        DictView::Keys => VariableTracker::constant(k.clone_ref(py)),
                        DictView::Values => v.clone(),
                        DictView::Items => tuple_of(py, vec![VariableTracker::constant(k.clone_ref(py)), v.clone()]),
                    }),
                }
            }
            IterKind::Enumerate { inner, count } => {
                let next = borrow_iter(inner)?.next_item(py, resume)?;
                match next {
                    Some(v) => {
                        let i = VariableTracker::constant((*count).into_pyobject(py).map_err(|e| IterError::Unsupported(crate::symbolic::Unsupported::new(e.to_string())))?.into_any().unbind());
                        *count += 1;
                        Some(tuple_of(py, vec![i, v]))
                    }
                    None => None,
                }
            }
            IterKind::Zip(inners) => {
                let mut out = Vec::with_capacity(inners.len());
                let mut done = inners.is_empty();
                for it in inners.iter() {
                    let next = borrow_iter(it)?.next_item(py, resume)?;
                    match next {
                        Some(v) => out.push(v),
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                (!done).then(|| tuple_of(py, out))
            }
            IterKind::Generator(frame) => {
                let Some(mut f) = frame.take() else {
                    return Err(IterError::Unsupported(crate::symbolic::Unsupported::new("a generator stepped while it runs (ValueError: generator already executing)")));
                };
                let r = resume(IterRequest::Resume(&mut f));
                if f.returned.is_some() {
                    self.returned = f.returned.take();
                }
                *frame = Some(f);
                r?
            }
            IterKind::Map { func, inners } => {
                let mut args = Vec::with_capacity(inners.len());
                let mut done = inners.is_empty();
                for it in inners.iter() {
                    match borrow_iter(it)?.next_item(py, resume)? {
                        Some(v) => args.push(v),
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                if done {
                    None
                } else {
                    let func = func.clone();
                    resume(IterRequest::Call(&func, args))?
                }
            }
            IterKind::Filter { func, inner } => loop {
                let Some(v) = borrow_iter(inner)?.next_item(py, resume)? else { break None };
                let verdict = match func {
                    Some(f) => {
                        let f = f.clone();
                        resume(IterRequest::Call(&f, vec![v.clone()]))?.ok_or_else(|| IterError::Unsupported(crate::symbolic::Unsupported::new("filter predicate gave no value")))?
                    }
                    None => v.clone(),
                };
                let truth = resume(IterRequest::Truth(&verdict))?;
                if truth.and_then(|t| t.as_constant(py)).map(|t| t.is_truthy().unwrap_or(false)).unwrap_or(false) {
                    break Some(v);
                }
            },
            IterKind::Chain { pending, active } => loop {
                if let Some(it) = active.clone() {
                    if let Some(v) = borrow_iter(&it)?.next_item(py, resume)? {
                        break Some(v);
                    }
                    *active = None;
                }
                let Some(next) = pending.pop_front() else { break None };
                match resume(IterRequest::MakeIter(&next))? {
                    Some(VariableTracker::Iterator(it)) => *active = Some(it),
                    _ => return Err(IterError::Unsupported(crate::symbolic::Unsupported::new("chain() over a value without an iterator"))),
                }
            },
            IterKind::Islice { inner, next, stop, step, count } => {
                let mut out = None;
                if stop.map_or(true, |s| *count < s) {
                    let mut exhausted = false;
                    while *count < *next {
                        if borrow_iter(inner)?.next_item(py, resume)?.is_none() {
                            exhausted = true;
                            break;
                        }
                        *count += 1;
                    }
                    if !exhausted && stop.map_or(true, |s| *count < s) {
                        if let Some(v) = borrow_iter(inner)?.next_item(py, resume)? {
                            *count += 1;
                            *next += *step;
                            if let Some(s) = stop {
                                if *next > *s {
                                    *next = *s;
                                }
                            }
                            out = Some(v);
                        }
                    }
                }
                out
            }
            IterKind::Accumulate { inner, func, total, initial } => {
                if let Some(init) = initial.take() {
                    *total = Some(init.clone());
                    Some(init)
                } else {
                    match borrow_iter(inner)?.next_item(py, resume)? {
                        None => None,
                        Some(v) => {
                            let new_total = match (total.take(), func) {
                                (None, _) => v,
                                (Some(t), None) => resume(IterRequest::Add(t, v))?.expect("a sum"),
                                (Some(t), Some(f)) => {
                                    let f = f.clone();
                                    resume(IterRequest::Call(&f, vec![t, v]))?.expect("a result")
                                }
                            };
                            *total = Some(new_total.clone());
                            Some(new_total)
                        }
                    }
                }
            }
            IterKind::ZipLongest { inners, fill } => {
                let mut out = Vec::with_capacity(inners.len());
                let mut stop = inners.is_empty();
                for slot in inners.iter_mut() {
                    let item = match slot {
                        Some(it) => borrow_iter(it)?.next_item(py, resume)?,
                        None => None,
                    };
                    match item {
                        Some(v) => out.push(v),
                        None => {
                            if slot.is_some() {
                                *slot = None;
                            }
                            out.push(fill.clone());
                        }
                    }
                }
                // CPython counts the active inners: when the last one runs out the whole step
                // stops, even in the middle of a tuple.
                if inners.iter().all(|s| s.is_none()) {
                    stop = true;
                }
                (!stop).then(|| tuple_of(py, out))
            }
        };
        match &item {
            Some(_) => self.pos += 1,
            None => self.exhausted = true,
        }
        Ok(item)
    }
}

/// A mutable list created or read during tracing.
pub struct ListState {
    pub items: Vec<VariableTracker>,
    /// Set when the list came from the frame (it has a source): mutating it is a side effect.
    pub source: Option<Arc<Source>>,
    /// Its length when the frame started (for a list from the frame).
    pub entry_len: usize,
}

/// A dict with constant keys (insertion ordered).
pub struct DictState {
    pub items: Vec<(Py<PyAny>, VariableTracker)>,
    pub source: Option<Arc<Source>>,
    /// Bumped by every insertion of a new key and every deletion (not by value updates): a dict
    /// iterator compares it with the version it started at.
    pub version: u64,
}

/// A function defined while tracing (MAKE_FUNCTION): code, globals, defaults, closure cells.
pub struct NestedFunction {
    pub code: Py<PyAny>,
    pub globals: Py<PyAny>,
    pub defaults: Vec<VariableTracker>,
    pub kwdefaults: Vec<(String, VariableTracker)>,
    pub closure: Vec<VariableTracker>,
    pub qualname: String,
}

/// The symbolic value of a Python object.
#[derive(Clone)]
pub enum VariableTracker {
    /// CPython's NULL stack marker (PUSH_NULL, LOAD_GLOBAL with the push-null bit).
    Null,
    /// An immutable Python value (None, bool, int, float, str, tuple of such, dtype, device,
    /// torch.Size, slice, ...). Operations on constants are folded by running them.
    Constant(Rc<Py<PyAny>>),
    Tensor(Rc<TensorVariable>),
    /// A symbolic size or a number computed from one (see `SymNodeVariable`).
    SymNum(Rc<SymNodeVariable>),
    Tuple(Rc<Vec<VariableTracker>>),
    /// An instance of a tuple subclass with named fields: a `torch.return_types.*` structseq
    /// (what `max(dim)`, `sort`, `topk`, ... return) or a `collections.namedtuple` class. It
    /// behaves as a tuple and comes back out of the graph as `cls`.
    NamedTuple { cls: Rc<Py<PyAny>>, items: Rc<Vec<VariableTracker>> },
    List(Rc<RefCell<ListState>>),
    Dict(Rc<RefCell<DictState>>),
    /// `d.keys()`, `d.values()` or `d.items()`: a live view of a dict tracker.
    DictView { dict: Rc<RefCell<DictState>>, view: DictView },
    /// An `nn.Module` instance reached from the frame (identity-guarded).
    Module { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A user Python function: calls are inlined.
    Function { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A function created during tracing (MAKE_FUNCTION); calls are inlined.
    NestedFunction(Rc<NestedFunction>),
    /// A bound method: `func` is inlined with `self_` as its first argument.
    Method { func: Box<VariableTracker>, self_: Box<VariableTracker> },
    /// A `torch.*` / `torch.nn.functional.*` callable: calls become graph nodes.
    TorchFunction(Rc<Py<PyAny>>),
    /// A method of a tensor, not yet called (`x.add`): calls become `call_method` nodes.
    TensorMethod { tensor: Rc<TensorVariable>, name: String },
    /// A Python builtin we model (len, isinstance, range, ...), or a type used as a value.
    Builtin(Rc<Py<PyAny>>),
    /// A class (a `type`): used in isinstance checks, or called when constructing constants.
    Class(Rc<Py<PyAny>>),
    /// A Python module object (torch, math, torch.nn.functional, ...).
    PyModule { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A method of a list or dict tracker (`xs.append`, `d.items`), not yet called.
    ContainerMethod { container: Box<VariableTracker>, name: String },
    Iterator(Rc<RefCell<IteratorState>>),
    /// A value from the frame that tracing does not model (a user object, a set, a generator,
    /// ...). It may be stored, passed around and returned; any other use is unsupported and
    /// becomes a graph break. Guarded by TYPE_MATCH only, since nothing else about it was read.
    Opaque { obj: Rc<Py<PyAny>>, source: Arc<Source> },
    /// An instance of a plain Python class (a dataclass included) created during tracing
    /// (see `user_objects.rs`): its attributes live in the tracker.
    UserObject(Rc<crate::symbolic::user_objects::UserObject>),
    /// A `functools.partial` (see `partial.rs`): calls are the call of its function.
    Partial(Rc<crate::symbolic::partial::PartialFunction>),
    /// A set built during tracing whose members are literals, kept as a private real `set`
    /// (it cannot be seen outside the frame until it is rebuilt).
    Set(Rc<RefCell<Py<PyAny>>>),
    /// `torch.no_grad()`, `torch.enable_grad()` or `torch.set_grad_enabled(flag)`: a grad-mode
    /// context manager. `set_on_create` is true for set_grad_enabled, which switches the mode
    /// when it is constructed (torch/autograd/grad_mode.py); `prev` is the mode before that.
    GradModeCtx { enabled: bool, set_on_create: bool, prev: bool },
    /// The `__exit__` of a grad-mode context pushed by BEFORE_WITH: restores `restore`.
    GradModeExit { restore: bool },
    /// A local that is a cell (MAKE_CELL / COPY_FREE_VARS): the tracker it currently holds.
    Cell(Rc<RefCell<Option<VariableTracker>>>),
    /// `super(cls, obj)`: attribute lookups walk `type(obj).__mro__` after `cls`
    /// (Objects/typeobject.c, `super_getattro`).
    Super { cls: Rc<Py<PyAny>>, obj: Box<VariableTracker> },
    /// `object.__getattribute__` / `object.__setattr__` bound to `obj` (reached through
    /// `super()`): the generic attribute protocol, bypassing the class's override.
    GenericAttr { obj: Box<VariableTracker>, set: bool },
    /// A logging method (`warning`, transformers' `warning_once`, ...) of a `logging.Logger`
    /// reached through a source: calling it with constant arguments is replayed after the
    /// graph (`SideEffects::logger_calls`) instead of run while tracing.
    LoggerMethod { logger: Box<VariableTracker>, name: String },
}

pub type VT = VariableTracker;

impl VariableTracker {
    pub fn constant(obj: Py<PyAny>) -> VT {
        VT::Constant(Rc::new(obj))
    }

    pub fn none(py: Python<'_>) -> VT {
        VT::constant(py.None())
    }

    /// A short description for error messages and logs.
    pub fn describe(&self, py: Python<'_>) -> String {
        match self {
            VT::Null => "NULL".into(),
            VT::Constant(c) => format!("constant {}", c.bind(py).repr().map(|r| r.to_string()).unwrap_or_default()),
            VT::Tensor(t) => format!("tensor {}", t.node),
            VT::SymNum(s) => format!("symbolic number {} = {}", s.node, s.fake.bind(py).str().map(|r| r.to_string()).unwrap_or_default()),
            VT::Tuple(_) => "tuple".into(),
            VT::NamedTuple { cls, .. } => qualname(cls.bind(py)),
            VT::DictView { view, .. } => format!("dict_{}", view.method()),
            VT::List(_) => "list".into(),
            VT::Dict(_) => "dict".into(),
            VT::Module { obj, .. } => format!("module {}", type_name(obj.bind(py))),
            VT::Function { obj, .. } => format!("function {}", qualname(obj.bind(py))),
            VT::NestedFunction(f) => format!("function {}", f.qualname),
            VT::Method { func, .. } => format!("method {}", func.describe(py)),
            VT::TorchFunction(f) => format!("torch function {}", qualname(f.bind(py))),
            VT::TensorMethod { name, .. } => format!("Tensor.{name}"),
            VT::Builtin(b) => format!("builtin {}", qualname(b.bind(py))),
            VT::Class(c) => format!("class {}", qualname(c.bind(py))),
            VT::PyModule { obj, .. } => format!("module {}", qualname(obj.bind(py))),
            VT::ContainerMethod { name, .. } => format!("container method {name}"),
            VT::Iterator(_) => "iterator".into(),
            VT::GradModeCtx { enabled, .. } => format!("grad mode context ({enabled})"),
            VT::GradModeExit { .. } => "grad mode context exit".into(),
            VT::Set(_) => "set".into(),
            VT::Partial(p) => format!("functools.partial of {}", p.func.describe(py)),
            VT::UserObject(o) => format!("{} object built in the frame", qualname(o.cls.bind(py))),
            VT::Opaque { obj, .. } => format!("{} object", type_name(obj.bind(py))),
            VT::Cell(_) => "cell".into(),
            VT::Super { cls, .. } => format!("super({})", qualname(cls.bind(py))),
            VT::GenericAttr { set, .. } => (if *set { "object.__setattr__" } else { "object.__getattribute__" }).into(),
            VT::LoggerMethod { name, .. } => format!("Logger.{name}"),
        }
    }

    /// The Python value of a constant, if this is one. A symbolic number is specialized to its
    /// example value: `int(sym)` / `float(sym)` records the guard `sym == value` in the
    /// `ShapeEnv`, so the code that reads the value stays valid exactly while the guard holds.
    pub fn as_constant<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match self {
            VT::Constant(c) => Some(c.bind(py).clone()),
            VT::SymNum(s) => specialize_sym(s.fake.bind(py)).ok(),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, VT::Null)
    }
}

/// The plain Python value of a `torch.SymInt` / `SymFloat` / `SymBool` (its `__int__`,
/// `__float__` or `__bool__`, which guard on the value through the `ShapeEnv`).
pub fn specialize_sym<'py>(sym: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = sym.py();
    if let Ok(s) = sym.cast::<pyo3::types::PySlice>() {
        // A slice with symbolic bounds: each bound specialized.
        let bound = |name: &str| -> PyResult<Bound<'py, PyAny>> {
            let b = s.getattr(name)?;
            if is_sym(&b) { specialize_sym(&b) } else { Ok(b) }
        };
        return py.import("builtins")?.getattr("slice")?.call1((bound("start")?, bound("stop")?, bound("step")?));
    }
    let name = type_name(sym);
    let builtins = py.import("builtins")?;
    let conv = match name.as_str() {
        "SymFloat" => "float",
        "SymBool" => "bool",
        _ => "int",
    };
    builtins.getattr(conv)?.call1((sym,))
}

/// Whether `v` is a `torch.SymInt`, `SymFloat` or `SymBool`.
pub fn is_sym(v: &Bound<'_, PyAny>) -> bool {
    let ty = v.get_type();
    matches!(ty.name().map(|n| n.to_string()).as_deref(), Ok("SymInt" | "SymFloat" | "SymBool"))
        && ty.module().map(|m| m.to_string() == "torch").unwrap_or(false)
}

/// Whether `cls` is a tuple subclass with named fields whose instances behave exactly as tuples
/// apart from their type and field attributes: a structseq (`torch.return_types.max`, with no
/// fields outside the tuple) or a `collections.namedtuple` class that overrides none of the
/// tuple protocol. Instances are tracked as `NamedTuple`.
pub fn is_named_tuple_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(ty) = cls.cast::<pyo3::types::PyType>() else { return Ok(false) };
    let tuple = py.get_type::<pyo3::types::PyTuple>();
    if ty.is(&tuple) || !ty.is_subclass(&tuple)? {
        return Ok(false);
    }
    // Instances without a `__dict__` only: the tracker holds the items and nothing else.
    if ty.getattr("__dictoffset__")?.extract::<isize>()? != 0 {
        return Ok(false);
    }
    let structseq = ty.hasattr("n_sequence_fields")?;
    if structseq {
        let n: usize = ty.getattr("n_fields")?.extract()?;
        let m: usize = ty.getattr("n_sequence_fields")?.extract()?;
        if n != m {
            return Ok(false);
        }
    } else if !(ty.hasattr("_fields")? && ty.hasattr("_make")?) {
        return Ok(false);
    }
    for name in ["__getitem__", "__iter__", "__len__", "__contains__", "__add__", "__eq__", "__ne__", "__hash__", "__getattribute__", "__bool__"] {
        let mine = ty.getattr(name).ok();
        let base = tuple.getattr(name).ok();
        match (mine, base) {
            (Some(a), Some(b)) if a.is(&b) => {}
            (None, None) => {}
            _ => return Ok(false),
        }
    }
    Ok(!ty.hasattr("__getattr__")?)
}

/// The field names and defaults of a `collections.namedtuple` class whose instances are made by
/// the `__new__` that namedtuple generated (not overridden, no `__init__`), if `cls` is one.
pub fn namedtuple_constructor<'py>(py: Python<'py>, cls: &Bound<'py, PyAny>) -> PyResult<Option<(Vec<String>, Bound<'py, PyDict>)>> {
    if !is_named_tuple_class(py, cls)? || cls.hasattr("n_sequence_fields")? {
        return Ok(None);
    }
    let new = cls.getattr("__new__")?;
    let generated = new
        .getattr("__globals__")
        .and_then(|g| g.get_item("__name__"))
        .and_then(|n| n.extract::<String>())
        .map(|n| n.starts_with("namedtuple_"))
        .unwrap_or(false);
    let object_init = py.get_type::<PyAny>().getattr("__init__")?;
    if !generated || !cls.getattr("__init__")?.is(&object_init) {
        return Ok(None);
    }
    let fields: Vec<String> = cls.getattr("_fields")?.extract()?;
    let defaults = cls.getattr("_field_defaults")?.cast_into::<PyDict>()?;
    Ok(Some((fields, defaults)))
}

/// Which item of a `NamedTuple` of class `cls` the attribute `name` reads, if it is a field
/// (a namedtuple's `_tuplegetter`, a structseq's member).
pub fn named_tuple_field(cls: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<usize>> {
    for base in cls.getattr("__mro__")?.try_iter()? {
        let d = base?.getattr("__dict__")?;
        if !d.contains(name)? {
            continue;
        }
        let attr = d.get_item(name)?;
        return Ok(match type_name(&attr).as_str() {
            "_tuplegetter" => Some(attr.call_method0("__reduce__")?.get_item(1)?.get_item(0)?.extract()?),
            "member_descriptor" if cls.hasattr("n_sequence_fields")? => {
                let names: Vec<String> = cls.getattr("__match_args__")?.extract()?;
                names.iter().position(|n| n == name)
            }
            _ => None,
        });
    }
    Ok(None)
}

/// A mutable borrow of an iterator's state, refused when it is already borrowed (an iterator
/// stepped from inside its own step: a generator that iterates itself).
pub fn borrow_iter(it: &Rc<RefCell<IteratorState>>) -> Result<std::cell::RefMut<'_, IteratorState>, IterError> {
    it.try_borrow_mut().map_err(|_| IterError::Unsupported(crate::symbolic::Unsupported::new("an iterator stepped from inside its own step (ValueError: generator already executing)")))
}

/// A tuple tracker; a tuple of constants folds into one constant tuple.
pub fn tuple_of(py: Python<'_>, items: Vec<VariableTracker>) -> VariableTracker {
    if let Some(vals) = items.iter().map(|i| i.as_constant(py)).collect::<Option<Vec<_>>>() {
        if let Ok(t) = pyo3::types::PyTuple::new(py, vals) {
            return VariableTracker::constant(t.into_any().unbind());
        }
    }
    VariableTracker::Tuple(Rc::new(items))
}

pub fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

pub fn qualname(o: &Bound<'_, PyAny>) -> String {
    o.getattr("__qualname__")
        .or_else(|_| o.getattr("__name__"))
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| type_name(o))
}
