//! Guards: the conditions under which a compiled frame may be reused, checked in Rust.
//!
//! A `GuardManager` flattens the `Source`s its guards read into an access plan (each node: a
//! parent and one step: local slot, closure cell, global, attribute, item), evaluates each source
//! at most once per check, and runs the guards in the order they were added. Nothing here runs
//! Python-level code except the attribute/item lookups a source itself implies.
//! See Note [tensor guards] for what a `TENSOR_MATCH` compares.

pub mod shapes;

use crate::source::Source;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// What a guard checks about the value at its source.
///
/// Note [tensor guards]: a tensor input is specialized on its exact Python type, dtype, device,
/// `requires_grad`, sizes and strides (static shapes), as torch's `TENSOR_MATCH` does without
/// dynamic shapes. Any difference recompiles. An input with dynamic dimensions (Note [symbolic
/// sizes] in `src/symbolic/output_graph.rs`) skips those sizes and must be contiguous instead of
/// matching strides; the relations between its sizes are the frame's `SHAPE_RELATIONS` guard.
#[derive(Debug)]
pub enum GuardKind {
    /// `type(v) is T`.
    TypeMatch(Py<PyAny>),
    /// `v is obj`, for an object that takes no weak reference (`None`, a bool, a dict): it is
    /// kept alive, so its address cannot be reused. Made by [`GuardKind::id_match`].
    IdMatch(Py<PyAny>),
    /// `v is not obj`: an identity test the trace answered False for a constant from the frame
    /// and an object of the code (`mode is "train"` with an equal but distinct str; Note
    /// [identity of constants] in src/symbolic/object_protocol.rs). `obj` is a constant of the
    /// code object, alive as long as the code is.
    NotIdMatch(Py<PyAny>),
    /// `v is ref() and type(v) is ty()`: the object of an identity guard held through a weak
    /// reference, so that a cache entry does not keep the user's object (a module, an instance,
    /// a function) alive after the user let go of it (torch's Dynamo keeps `id()` only). Once
    /// the object is gone the guard fails: nothing else can be `is` a dead object. The object's
    /// type at compile time is checked too (held weakly as well): an instance of a heap type can
    /// change class (`obj.__class__ = C`), and a lazy module does so once its first call has
    /// materialized it (`LazyLinear` becomes `Linear`), which must recompile a frame whose trace
    /// broke at the uninitialized module. Made by [`GuardKind::id_match`].
    IdMatchWeak { obj: Py<pyo3::types::PyWeakrefReference>, ty: Py<pyo3::types::PyWeakrefReference> },
    /// `type(v) is type(c) and v == c`.
    ConstantMatch(Py<PyAny>),
    /// `len(v) == n` for a tuple or list (after a `TypeMatch`).
    LenMatch(usize),
    /// See Note [tensor guards].
    TensorMatch(TensorSpec),
    /// A tuple/list/range iterator whose remaining items equal this tuple of literals (read
    /// without consuming it, through `__reduce__`: `(iter, (seq,), pos)`).
    IteratorMatch(Py<PyAny>, Py<PyAny>),
    /// `v is <value at the other source>`: two inputs that were one object when compiled
    /// (the graph has a single placeholder for both).
    AliasOf(Arc<Source>),
    /// `v is not <value at the other source>`: two objects that were distinct when compiled,
    /// one of which the frame mutates (the trace kept one tracker each).
    NotAliasOf(Arc<Source>),
    /// `type(v) is T` and `v` has `n` items left (`exact`) or at least `n`, by its
    /// `__length_hint__`, exact for tuple, list and range iterators: the items the trace took
    /// from an iterator passed in (Note [items of iterators from outside the frame]).
    IteratorLen { ty: Py<PyAny>, n: usize, exact: bool },
    /// `v` is a list iterator over the object at `seq`, `pos` items in
    /// (`v.__reduce__() == (iter, (seq,), pos)`).
    IteratorOver { seq: Arc<Source>, pos: usize },
    /// `v` is a dict key/value/item iterator over the dict at `dict`, with `remaining` items
    /// left and the dict's size unchanged since it was made (`dict_iter_state`).
    DictIterOver { dict: Arc<Source>, remaining: usize },
    /// `list(v.keys()) == keys` for a dict (key order included).
    DictKeys(Py<PyAny>),
    /// `tuple(v) == members` for an exact `set` (after a `TypeMatch`): equal members of the
    /// same types in the same iteration order (Note [sets from outside the frame] in
    /// `builder.rs`).
    SetMembers(Py<PyTuple>),
    /// `name not in v.__dict__` (no instance attribute shadows the class one, e.g. `forward`).
    NoInstanceAttr(String),
    /// `not hasattr(v, name)` through the generic lookup (instance dict, class MRO) or, for an
    /// `nn.Module`, its `__getattr__` tables too: an attribute the frame found absent.
    NoAttr(String),
    /// `torch.is_grad_enabled() == flag` (global state; no source).
    GradMode(bool),
    /// `torch.get_default_dtype() is dtype` (global state; no source).
    DefaultDtype(Py<PyAny>),
    /// `v.name` (`v.name()` with `call`) equals `expected` (`is None` for None; otherwise the
    /// same type and `==`): a tensor query the trace folded to a constant that TENSOR_MATCH does
    /// not pin (`x.storage_offset()`, `x.is_leaf`, `x.is_conj()`, ...; Note [tensor queries]).
    TensorQuery { name: Py<PyString>, call: bool, expected: Py<PyAny> },
    /// `func() == expected` (the same type, `==`): a torch function reading mutable global state
    /// (`torch.is_autocast_enabled()`, `torch.get_num_threads()`, ...) that the trace folded to a
    /// constant (torch's GLOBAL_STATE guard; Note [global state queries]). No source.
    GlobalQuery { func: Py<PyAny>, args: Py<PyTuple>, expected: Py<PyAny> },
    /// Relations between the sizes of inputs with dynamic dimensions (no source of its own: it
    /// reads the sizes at `ShapeGuard::sources`).
    ShapeRelations(shapes::ShapeGuard),
    /// The names the trace read from a torch module's dict or a torch class without a guard each
    /// still hold the objects it saw (Note [attribute version guards]). No source.
    AttrVersion(VersionGuard),
}

/// Note [attribute version guards]: the trace reads torch's own modules and classes without a
/// guard per attribute (`F.gelu`, `torch.relu`, `x.relu`, the globals of an inlined torch
/// function): guarding each would cost a lookup per name per call. A user can still replace
/// one after compiling (`F.gelu = my_gelu`, `torch.Tensor.relu = ...`), and the cached graph
/// would keep running the old op. So each dict (a module's `__dict__`, an inlined function's
/// globals) or class the trace read from gets one guard listing the names it read and the
/// objects they held (absent: `None`), and a version tag CPython changes on every write:
/// - a dict's `ma_version_tag` (Include/cpython/dictobject.h; deprecated in 3.12 but kept and
///   bumped on every insert, delete and clear through 3.13: Objects/dictobject.c,
///   `_PyDict_NotifyEvent`);
/// - a class's `tp_version_tag`, which `type_setattro` resets to 0 through `PyType_Modified` on
///   a write to the class or any base (Objects/typeobject.c), and `_PyType_Lookup` assigns anew.
/// The check compares the tag with the one last seen: equal (and not 0) passes at the cost of
/// one load. Otherwise each name is looked up again (`PyDict_GetItem`, `_PyType_Lookup`, which
/// reads the class's MRO without binding descriptors) and compared by identity; if all hold,
/// the new tag is remembered, so a write to an unrelated name costs one slow check, not a
/// recompile. Classes without a mutable dict (`Py_TPFLAGS_IMMUTABLETYPE`) get no guard.
#[derive(Debug)]
pub struct VersionGuard {
    /// The dict or class (kept alive, so its address cannot be reused).
    pub holder: Py<PyAny>,
    /// `holder` is a class (looked up along its MRO), else a dict.
    pub is_type: bool,
    /// Each name read and the object it held (`None`: absent).
    pub names: Vec<(Py<PyString>, Option<Py<PyAny>>)>,
    /// The tag last seen with every name unchanged (0: none yet).
    pub tag: std::sync::atomic::AtomicU64,
}

unsafe extern "C" {
    /// Objects/typeobject.c: the attribute `name` found along `type`'s MRO, unbound (borrowed;
    /// NULL without an error when absent). Assigns the class a version tag when it has none.
    fn _PyType_Lookup(t: *mut ffi::PyTypeObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

impl VersionGuard {
    /// A guard over `holder` (a dict, or a class) with no names yet.
    pub fn new(holder: Py<PyAny>, is_type: bool) -> Self {
        let tag = std::sync::atomic::AtomicU64::new(unsafe { Self::tag_of(holder.as_ptr(), is_type) });
        VersionGuard { holder, is_type, names: Vec::new(), tag }
    }

    /// The object `name` holds now (borrowed; null when absent).
    unsafe fn lookup(&self, name: *mut ffi::PyObject) -> *mut ffi::PyObject {
        if self.is_type {
            _PyType_Lookup(self.holder.as_ptr() as *mut ffi::PyTypeObject, name)
        } else {
            let p = ffi::PyDict_GetItemWithError(self.holder.as_ptr(), name);
            if p.is_null() {
                ffi::PyErr_Clear();
            }
            p
        }
    }

    unsafe fn tag_of(p: *mut ffi::PyObject, is_type: bool) -> u64 {
        if is_type {
            (*(p as *mut ffi::PyTypeObject)).tp_version_tag as u64
        } else {
            #[allow(deprecated)]
            (*(p as *mut ffi::PyDictObject)).ma_version_tag
        }
    }

    /// Records that the trace read `name` (once per name) and what it held.
    pub fn read(&mut self, py: Python<'_>, name: &str) {
        if self.names.iter().any(|(n, _)| n.bind(py).to_str().is_ok_and(|s| s == name)) {
            return;
        }
        let n = PyString::intern(py, name);
        let now = unsafe { Bound::from_borrowed_ptr_or_opt(py, self.lookup(n.as_ptr())) }.map(|v| v.unbind());
        self.names.push((n.unbind(), now));
    }

    /// Whether every name still holds its object (see the Note): one load when nothing was
    /// written since the last check. Returns the first name that changed.
    pub fn check(&self) -> Result<(), &Py<PyString>> {
        use std::sync::atomic::Ordering::Relaxed;
        let seen = self.tag.load(Relaxed);
        if seen != 0 && unsafe { Self::tag_of(self.holder.as_ptr(), self.is_type) } == seen {
            return Ok(());
        }
        for (name, old) in &self.names {
            let now = unsafe { self.lookup(name.as_ptr()) };
            if now != old.as_ref().map(|o| o.as_ptr()).unwrap_or(std::ptr::null_mut()) {
                return Err(name);
            }
        }
        self.tag.store(unsafe { Self::tag_of(self.holder.as_ptr(), self.is_type) }, Relaxed);
        Ok(())
    }

    /// `module.__dict__` / `Class` for guard text.
    fn describe(&self, py: Python<'_>) -> String {
        let h = self.holder.bind(py);
        if self.is_type {
            return qualified_name(py, &self.holder);
        }
        match h.get_item("__name__").ok().and_then(|n| n.extract::<String>().ok()) {
            Some(n) => format!("{n}.__dict__"),
            None => "a dict".into(),
        }
    }
}

/// The tensor properties a `TENSOR_MATCH` pins.
#[derive(Debug)]
pub struct TensorSpec {
    pub ty: Py<PyAny>,
    pub dtype: Py<PyAny>,
    /// `tensor.get_device()`: -1 for CPU (and for `meta`, whence `device_type`).
    pub device: i64,
    /// `tensor.device.type`: `"cpu"`, `"cuda"`, `"meta"`, ...
    pub device_type: String,
    pub requires_grad: bool,
    /// `tensor.is_inference()`: made under `torch.inference_mode` (Note [inference tensor
    /// inputs]).
    pub inference: bool,
    /// The tensor has the negative or conjugate bit, or is a ZeroTensor (Note [tensors whose
    /// memory is not their value] in src/inductor/fx_import.rs). Read on the slow path only:
    /// torch's `TensorGuards` (Note [fast tensor guards]) compares the dispatch keys, which hold
    /// these bits, so a value that differs here never passes the fast check.
    pub lazy_value: bool,
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
    /// Dimensions whose size is symbolic: not compared; the tensor must then be contiguous.
    pub dynamic_dims: Vec<usize>,
    /// `ty` is a subclass with `__torch_function__` on: the metadata is read through a plain
    /// alias (`dynamo._subclass.plain`), so the check runs no user code.
    pub read_plain: bool,
}

/// The strides of a contiguous (row-major) tensor of `sizes` (size-0/1 dims count as 1,
/// as `TensorImpl::compute_contiguous` lets their stride be anything but we pin this one).
pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![0; sizes.len()];
    let mut acc = 1i64;
    for d in (0..sizes.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d].max(1));
    }
    strides
}

/// One guard: a kind applied to the value at a source (global-state guards have none).
#[derive(Debug)]
pub struct Guard {
    pub source: Option<Arc<Source>>,
    pub kind: GuardKind,
}

impl GuardKind {
    /// `v is obj`: [`GuardKind::IdMatchWeak`] when `obj` takes a weak reference, else
    /// [`GuardKind::IdMatch`].
    pub fn id_match(obj: Py<PyAny>) -> GuardKind {
        Python::attach(|py| {
            let o = obj.bind(py);
            match (pyo3::types::PyWeakrefReference::new(o), pyo3::types::PyWeakrefReference::new(o.get_type().as_any())) {
                (Ok(r), Ok(t)) => GuardKind::IdMatchWeak { obj: r.unbind(), ty: t.unbind() },
                _ => GuardKind::IdMatch(obj),
            }
        })
    }

    /// The torch spelling of the kind, used in dumps and recompile reasons.
    pub fn name(&self) -> &'static str {
        match self {
            GuardKind::TypeMatch(_) => "TYPE_MATCH",
            GuardKind::IdMatch(_) | GuardKind::IdMatchWeak { .. } => "ID_MATCH",
            GuardKind::NotIdMatch(_) => "NOT_ID_MATCH",
            GuardKind::ConstantMatch(_) => "CONSTANT_MATCH",
            GuardKind::LenMatch(_) => "LENGTH_CHECK",
            GuardKind::IteratorMatch(..) => "ITERATOR_MATCH",
            GuardKind::IteratorLen { .. } => "ITERATOR_LEN",
            GuardKind::AliasOf(_) => "DUPLICATE_INPUT",
            GuardKind::NotAliasOf(_) => "NO_ALIAS",
            GuardKind::IteratorOver { .. } => "ITERATOR_OVER",
            GuardKind::DictIterOver { .. } => "DICT_ITERATOR_OVER",
            GuardKind::DictKeys(_) => "DICT_KEYS",
            GuardKind::SetMembers(_) => "SET_MEMBERS",
            GuardKind::NoInstanceAttr(_) => "NO_INSTANCE_ATTR",
            GuardKind::NoAttr(_) => "NO_ATTR",
            GuardKind::TensorMatch(_) => "TENSOR_MATCH",
            GuardKind::GradMode(_) => "GRAD_MODE",
            GuardKind::DefaultDtype(_) => "DEFAULT_DTYPE",
            GuardKind::TensorQuery { .. } => "TENSOR_QUERY",
            GuardKind::GlobalQuery { .. } => "GLOBAL_STATE",
            GuardKind::ShapeRelations(_) => "SHAPE_RELATIONS",
            GuardKind::AttrVersion(_) => "ATTR_VERSION",
        }
    }
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = self.source.as_ref().map(|s| s.to_string()).unwrap_or_else(|| "global state".into());
        Python::attach(|py| match &self.kind {
            GuardKind::TypeMatch(t) => write!(f, "TYPE_MATCH: {src} is {}", repr(py, t)),
            GuardKind::IdMatch(o) => write!(f, "ID_MATCH: {src} is <{}>", short_repr(py, o)),
            GuardKind::NotIdMatch(o) => write!(f, "NOT_ID_MATCH: {src} is not <{}>", short_repr(py, o)),
            GuardKind::IdMatchWeak { obj: r, .. } => match pyo3::types::PyWeakrefMethods::upgrade(r.bind(py)) {
                Some(o) => write!(f, "ID_MATCH: {src} is <{}>", short_repr(py, &o.unbind())),
                None => write!(f, "ID_MATCH: {src} is <dead object>"),
            },
            GuardKind::ConstantMatch(c) => write!(f, "CONSTANT_MATCH: {src} == {}", repr(py, c)),
            GuardKind::LenMatch(n) => write!(f, "LENGTH_CHECK: len({src}) == {n}"),
            GuardKind::AliasOf(other) => write!(f, "DUPLICATE_INPUT: {src} is {other}"),
            GuardKind::NotAliasOf(other) => write!(f, "NO_ALIAS: {src} is not {other}"),
            GuardKind::IteratorOver { seq, pos } => write!(f, "ITERATOR_OVER: {src} iterates {seq}, {pos} items in"),
            GuardKind::DictIterOver { dict, remaining } => write!(f, "DICT_ITERATOR_OVER: {src} iterates {dict}, {remaining} items left"),
            GuardKind::DictKeys(k) => write!(f, "DICT_KEYS: list({src}.keys()) == {}", repr(py, k)),
            GuardKind::SetMembers(m) => write!(f, "SET_MEMBERS: tuple({src}) == {}", repr(py, &m.clone_ref(py).into_any())),
            GuardKind::NoInstanceAttr(n) => write!(f, "NO_INSTANCE_ATTR: '{n}' not in {src}.__dict__"),
            GuardKind::NoAttr(n) => write!(f, "NO_ATTR: not hasattr({src}, '{n}')"),
            GuardKind::IteratorMatch(_, items) => write!(f, "ITERATOR_MATCH: remaining items of {src} == {}", repr(py, items)),
            GuardKind::IteratorLen { ty, n, exact } => write!(f, "ITERATOR_LEN: {src} is a {} with {}{n} items left", ty.bind(py).getattr("__name__").map(|n| n.to_string()).unwrap_or_default(), if *exact { "" } else { ">= " }),
            GuardKind::TensorMatch(t) if !t.dynamic_dims.is_empty() => {
                let sizes = t.sizes.iter().enumerate().map(|(d, s)| if t.dynamic_dims.contains(&d) { "None".to_string() } else { s.to_string() }).collect::<Vec<_>>().join(", ");
                write!(f, "TENSOR_MATCH: {src} dtype={} device={} requires_grad={} size=[{sizes}] stride=contiguous", repr(py, &t.dtype), t.device, t.requires_grad)
            }
            GuardKind::TensorMatch(t) => write!(
                f,
                "TENSOR_MATCH: {src} dtype={} device={} requires_grad={} size={:?} stride={:?}",
                repr(py, &t.dtype),
                t.device,
                t.requires_grad,
                t.sizes,
                t.strides
            ),
            GuardKind::ShapeRelations(sg) => write!(f, "{sg}"),
            GuardKind::AttrVersion(vg) => {
                let names: Vec<String> = vg.names.iter().map(|(n, _)| n.to_string()).collect();
                write!(f, "ATTR_VERSION: {} unchanged in {}", vg.describe(py), names.join(", "))
            }
            GuardKind::GradMode(g) => write!(f, "GRAD_MODE: torch.is_grad_enabled() == {}", if *g { "True" } else { "False" }),
            GuardKind::DefaultDtype(d) => write!(f, "DEFAULT_DTYPE: torch.get_default_dtype() is {}", repr(py, d)),
            GuardKind::TensorQuery { name, call, expected } => write!(f, "TENSOR_QUERY: {src}.{name}{} == {}", if *call { "()" } else { "" }, repr(py, expected)),
            GuardKind::GlobalQuery { func, args, expected } => write!(f, "GLOBAL_STATE: {}{} == {}", qualified_name(py, func), args_repr(py, args), repr(py, expected)),
        })
    }
}

fn repr(py: Python<'_>, o: &Py<PyAny>) -> String {
    o.bind(py).repr().map(|r| r.to_string()).unwrap_or_else(|_| "<?>".into())
}

/// `module.name` of a function (for guard text).
fn qualified_name(py: Python<'_>, f: &Py<PyAny>) -> String {
    let f = f.bind(py);
    let get = |a: &str| f.getattr(a).ok().and_then(|v| v.extract::<String>().ok()).unwrap_or_default();
    format!("{}.{}", get("__module__"), get("__qualname__"))
}

/// `(a, b)` of an argument tuple (for guard text).
fn args_repr(py: Python<'_>, args: &Py<PyTuple>) -> String {
    let items: Vec<String> = args.bind(py).iter().map(|a| a.repr().map(|r| r.to_string()).unwrap_or_default()).collect();
    format!("({})", items.join(", "))
}

/// Whether `now` is the folded answer `expected`: `is None` for None, else `same_constant`.
fn same_answer(now: &Bound<'_, PyAny>, expected: &Bound<'_, PyAny>) -> bool {
    if expected.is_none() {
        return now.is_none();
    }
    same_constant(now, expected)
}

/// Note [exact constant guards]: a value the trace read as a constant (an argument, an item of
/// a tuple, a dict's keys, the items an iterator has left) is reproduced only by a value of the
/// same type at every level, not by any `==` one: `(1, 2) == (True, 2)`, `frozenset({1}) ==
/// frozenset({True})` and `(0.0,) == (-0.0,)` hold, yet `repr`, `type()` and `1 / x` of their
/// items differ. So containers compare item by item in iteration order (a frozenset's too),
/// floats and complex numbers by their bits (a NaN matches itself, -0.0 is not 0.0), and only
/// leaves of the same exact type compare with `==`. An error counts as different.
///
/// Whether `v` is interchangeable with the constant `c` (Note [exact constant guards]).
pub(crate) fn same_constant(v: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>) -> bool {
    use pyo3::types::{PyComplex, PyFloat, PyFrozenSet, PyList, PySlice};
    if v.is(c) {
        return true;
    }
    if v.get_type().as_ptr() != c.get_type().as_ptr() {
        return false;
    }
    if let (Ok(a), Ok(b)) = (v.cast::<PyFloat>(), c.cast::<PyFloat>()) {
        return a.value().to_bits() == b.value().to_bits();
    }
    if let (Ok(a), Ok(b)) = (v.cast::<PyComplex>(), c.cast::<PyComplex>()) {
        return a.real().to_bits() == b.real().to_bits() && a.imag().to_bits() == b.imag().to_bits();
    }
    // Item by item, in order (the lengths first).
    fn all_same<'py>(a: impl ExactSizeIterator<Item = Bound<'py, PyAny>>, b: impl ExactSizeIterator<Item = Bound<'py, PyAny>>) -> bool {
        a.len() == b.len() && a.zip(b).all(|(x, y)| same_constant(&x, &y))
    }
    if let (Ok(a), Ok(b)) = (v.cast::<PyTuple>(), c.cast::<PyTuple>()) {
        return all_same(a.iter(), b.iter());
    }
    if let (Ok(a), Ok(b)) = (v.cast::<PyList>(), c.cast::<PyList>()) {
        return all_same(a.iter(), b.iter());
    }
    if let (Ok(a), Ok(b)) = (v.cast::<PyFrozenSet>(), c.cast::<PyFrozenSet>()) {
        // In iteration order: two equal frozensets can iterate differently (`frozenset([9, 1])`
        // and `frozenset([1, 9])`), and the trace baked the order it saw into what it computed
        // from the members (`list(s)`, a loop, `str(s)`).
        return all_same(a.iter(), b.iter());
    }
    if let (Ok(a), Ok(b)) = (v.cast::<pyo3::types::PyDict>(), c.cast::<pyo3::types::PyDict>()) {
        return a.len() == b.len() && a.iter().zip(b.iter()).all(|((ka, va), (kb, vb))| same_constant(&ka, &kb) && same_constant(&va, &vb));
    }
    if crate::symbolic::builder::is_numpy_number(v) {
        // Note [numpy scalars]: by bytes, as floats by bits.
        return match (v.call_method0("tobytes"), c.call_method0("tobytes")) {
            (Ok(a), Ok(b)) => a.eq(b).unwrap_or(false),
            _ => false,
        };
    }
    if v.cast::<PySlice>().is_ok() {
        return ["start", "stop", "step"].iter().all(|f| match (v.getattr(*f), c.getattr(*f)) {
            (Ok(x), Ok(y)) => same_constant(&x, &y),
            _ => false,
        });
    }
    // A tensor key (Note [tensor dict keys]) is its very object: a tensor's `==` is elementwise.
    // (Asked after the cheap type-flag tests: ints and strs, the constants guards meet on every
    // cache hit, never are.)
    if !(v.is_instance_of::<pyo3::types::PyInt>() || v.is_instance_of::<pyo3::types::PyString>()) && crate::symbolic::builder::is_tensor_key(v) {
        return false;
    }
    v.eq(c).unwrap_or(false)
}

fn short_repr(py: Python<'_>, o: &Py<PyAny>) -> String {
    let ty = o.bind(py).get_type();
    ty.name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}

/// How to produce a value in the access plan.
#[derive(Debug)]
enum Step {
    Local(usize),
    Closure(usize),
    Global(Py<PyString>),
    Attr(usize, Py<PyString>),
    /// `PyObject_GenericGetAttr` (Objects/object.c): no user `__getattribute__` runs.
    GenericAttr(usize, Py<PyString>),
    Item(usize, Py<PyAny>),
    /// `f.__code__` / `f.__globals__` read from the function object's fields when the base is a
    /// plain function (`PyFunction_GetCode`/`PyFunction_GetGlobals`): the attribute lookup would
    /// fire the `object.__getattr__` audit event (3.12), whose Python audit hooks would enter the
    /// frame hook again from inside a guard check; other bases take the attribute path.
    FuncField(usize, FuncField, Py<PyString>),
    IterSeq(usize),
    /// `Source::IterItem`: item `k` of what the iterator has left, not consumed.
    IterItem(usize, usize),
    /// A module from `sys.modules`, resolved when the guards were built (absent: `None`).
    Module(Option<Py<PyAny>>),
    /// `Source::WeakRefCall`: the referent of an exact `weakref.ref` (None once dead).
    WeakRefCall(usize),
    /// `Source::DictItem`: `PyDict_GetItemWithError` on a dict instance (subclasses included), so
    /// no `__getitem__` or `__missing__` of a subclass runs; a missing key or a non-dict base
    /// reads as missing.
    DictItem(usize, Py<PyAny>),
    /// `Source::DictKey`: key `k` of a dict instance in its iteration order (the storage's, or
    /// an OrderedDict's linked list, read through the base class's C `keys`); a shorter dict
    /// or a non-dict base reads as missing.
    DictKey(usize, usize),
}

impl Step {
    /// The step's variant, for timing reports.
    fn kind(&self) -> &'static str {
        match self {
            Step::Local(_) => "LOCAL",
            Step::Closure(_) => "CLOSURE",
            Step::Global(_) => "GLOBAL",
            Step::Attr(..) => "ATTR",
            Step::GenericAttr(..) => "GENERIC_ATTR",
            Step::Item(..) => "ITEM",
            Step::FuncField(..) => "FUNC_FIELD",
            Step::IterSeq(_) => "ITER_SEQ",
            Step::IterItem(..) => "ITER_ITEM",
            Step::WeakRefCall(_) => "WEAKREF_CALL",
            Step::DictItem(..) => "DICT_ITEM",
            Step::DictKey(..) => "DICT_KEY",
            Step::Module(_) => "MODULE",
        }
    }
}

/// A field of a function object read without an attribute lookup (`Step::FuncField`).
#[derive(Debug, Clone, Copy)]
enum FuncField {
    Code,
    Globals,
}

/// The frame pieces guards read from: argument slots, closure, globals, builtins (all borrowed).
pub struct FrameRefs {
    pub locals: *const *mut ffi::PyObject,
    pub closure: *mut ffi::PyObject,
    pub globals: *mut ffi::PyObject,
    pub builtins: *mut ffi::PyObject,
}

/// Interned callables used on the check path, created once per manager.
#[derive(Debug)]
struct Hot {
    get_device: Py<PyString>,
    is_cpu: Py<PyString>,
    is_cuda: Py<PyString>,
    size: Py<PyString>,
    stride: Py<PyString>,
    dtype: Py<PyString>,
    requires_grad: Py<PyString>,
    /// `__dict__`, for NO_INSTANCE_ATTR.
    dict: Py<PyString>,
    /// Note [default device fast path]: `torch.get_default_device`, `torch.__dict__`,
    /// `torch._C._len_torch_function_stack` and the interned names read.
    get_default_device: Py<PyAny>,
    torch_dict: Py<PyAny>,
    len_function_stack: Py<PyAny>,
    global_device_context: Py<PyString>,
    device_context: Py<PyString>,
    is_grad_enabled: Py<PyAny>,
    get_default_dtype: Py<PyAny>,
}

impl Hot {
    /// Note [default device fast path]: `torch.get_default_device()` (torch/__init__.py) is
    /// Python that filters the torch-function mode stack for a `DeviceContext`, then reads the
    /// thread-local `_GLOBAL_DEVICE_CONTEXT.device_context`, and returns `torch.device("cpu")`
    /// when it finds neither: ~3.6 µs a check for a frame that makes a tensor with a factory
    /// (tiny GPT-2's). Both of its sources are read here the way it reads them (the stack's
    /// length through `torch._C._len_torch_function_stack()`, the context through
    /// `torch.__dict__["_GLOBAL_DEVICE_CONTEXT"]`, which `global` reads): an empty stack and no
    /// context prove the answer is `device("cpu")`. True only then; otherwise (a mode on the
    /// stack, any context set, an error) the guard calls the function as before.
    fn default_device_is_cpu(&self, py: Python<'_>) -> bool {
        let stack_empty = self.len_function_stack.bind(py).call0().is_ok_and(|n| n.extract::<usize>().is_ok_and(|n| n == 0));
        if !stack_empty {
            return false;
        }
        let Ok(Some(ctx)) = self.torch_dict.bind(py).get_item(self.global_device_context.bind(py)).map(Some).or_else(|_| Ok::<_, PyErr>(None)) else {
            return false;
        };
        match ctx.getattr_opt(self.device_context.bind(py)) {
            Ok(None) => true,
            Ok(Some(c)) => c.is_none(),
            Err(_) => false,
        }
    }
}

/// A set of guards plus the plan that fetches their sources.
#[derive(Debug)]
pub struct GuardManager {
    steps: Vec<Step>,
    /// For each guard: (index into `steps` or usize::MAX for global-state guards).
    guard_slots: Vec<usize>,
    /// For each guard: the step of its second source (`DUPLICATE_INPUT`), else usize::MAX.
    other_slots: Vec<usize>,
    /// For a `SHAPE_RELATIONS` guard: the step of each bound size's tensor; empty otherwise.
    shape_slots: Vec<Vec<usize>>,
    /// For each step: the source it fetches (named in a failure's text).
    step_sources: Vec<Option<Source>>,
    pub guards: Vec<Guard>,
    hot: Hot,
    /// Note [fast tensor guards]: per guard, for a static TENSOR_MATCH, torch's C++
    /// `TensorGuards(...).check` made from the first value that passed the guard (None inside:
    /// torch has none, or making it failed).
    fast: Vec<std::sync::OnceLock<Option<Py<PyAny>>>>,
    tensor_guards: Option<Py<PyAny>>,
    /// Per guard: the interned attribute name of a NO_INSTANCE_ATTR / NO_ATTR guard, else None.
    names: Vec<Option<Py<PyString>>>,
    /// Per guard: a GLOBAL_STATE `torch.get_default_device() == device('cpu')` (Note [default
    /// device fast path]).
    cpu_default_device: Vec<bool>,
    /// Note [guards before reads]: the check's order, one flat list: `FETCH | i` fetches step
    /// `i`, a plain `gi` checks guard `gi`; guards that read no step (global state) first, then
    /// after each step the guards whose last step it is, each in guard order.
    schedule: Vec<u32>,
}

/// The tag of a fetch in `GuardManager::schedule`.
const FETCH: u32 = 1 << 31;

/// Note [guards before reads]: a step reads a value out of its base (an attribute, an item, a
/// key, an iterator's items), and on a value of another type than the trace saw that read can
/// run user code (a property, `__getattr__`, a `__getitem__` override, a defaultdict's
/// `__missing__`, which inserts the key) or consume an iterator (`enumerate`'s `__reduce__`
/// holds its inner iterator). So, as torch's guard tree does, every guard is checked as soon as
/// the steps it reads have been fetched, before any later step: the TYPE_MATCH of a base fails
/// before a step reads through it. A cache entry recorded for a plain dict thus never calls a
/// defaultdict's `__missing__` on a later call with one, and an entry recorded for a list
/// iterator never drains a zip. Steps are planned after their bases, so each guard's last step
/// follows the steps of its sources' bases.

/// A guard that did not hold: its text and why.
#[derive(Debug, Clone)]
pub struct GuardFailure {
    pub guard: String,
    pub reason: String,
}

impl fmt::Display for GuardFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason, self.guard)
    }
}

impl GuardManager {
    /// The frame locals this entry identity-guards (`ID_MATCH` on `L['self']` and other
    /// arguments): (`localsplus` index, address of the object; None when its weak reference
    /// died, which no live object matches). Note [recompile limit per object] in
    /// src/eval_frame/hook.rs.
    pub fn id_matched_locals(&self, py: Python<'_>) -> Vec<(u32, Option<usize>)> {
        let mut out = Vec::new();
        for g in &self.guards {
            let Some(Source::Local { idx, .. }) = g.source.as_deref() else { continue };
            match &g.kind {
                GuardKind::IdMatch(o) => out.push((*idx, Some(o.as_ptr() as usize))),
                GuardKind::IdMatchWeak { obj, .. } => {
                    let live = pyo3::types::PyWeakrefMethods::upgrade(obj.bind(py));
                    out.push((*idx, live.map(|o| o.as_ptr() as usize)));
                }
                _ => {}
            }
        }
        out
    }

    /// Builds the access plan for `guards`.
    pub fn new(py: Python<'_>, guards: Vec<Guard>) -> PyResult<Self> {
        let mut steps = Vec::new();
        let mut memo: HashMap<Source, usize> = HashMap::new();
        let mut guard_slots = Vec::with_capacity(guards.len());
        let mut other_slots = Vec::with_capacity(guards.len());
        let mut shape_slots = Vec::with_capacity(guards.len());
        for g in &guards {
            match &g.kind {
                GuardKind::ShapeRelations(sg) => shape_slots.push(sg.sources.iter().map(|(s, _)| plan(py, s, &mut steps, &mut memo)).collect()),
                _ => shape_slots.push(Vec::new()),
            }
            match &g.source {
                Some(s) => guard_slots.push(plan(py, s, &mut steps, &mut memo)),
                None => guard_slots.push(usize::MAX),
            }
            match &g.kind {
                GuardKind::AliasOf(o) | GuardKind::NotAliasOf(o) | GuardKind::IteratorOver { seq: o, .. } | GuardKind::DictIterOver { dict: o, .. } => {
                    other_slots.push(plan(py, o, &mut steps, &mut memo))
                }
                _ => other_slots.push(usize::MAX),
            }
        }
        let torch = py.import("torch")?;
        let hot = Hot {
            get_device: PyString::intern(py, "get_device").unbind(),
            is_cpu: PyString::intern(py, "is_cpu").unbind(),
            is_cuda: PyString::intern(py, "is_cuda").unbind(),
            size: PyString::intern(py, "size").unbind(),
            stride: PyString::intern(py, "stride").unbind(),
            dtype: PyString::intern(py, "dtype").unbind(),
            requires_grad: PyString::intern(py, "requires_grad").unbind(),
            dict: PyString::intern(py, "__dict__").unbind(),
            get_default_device: torch.getattr("get_default_device")?.unbind(),
            torch_dict: torch.getattr("__dict__")?.unbind(),
            len_function_stack: torch.getattr("_C")?.getattr("_len_torch_function_stack")?.unbind(),
            global_device_context: PyString::intern(py, "_GLOBAL_DEVICE_CONTEXT").unbind(),
            device_context: PyString::intern(py, "device_context").unbind(),
            is_grad_enabled: torch.getattr("is_grad_enabled")?.unbind(),
            get_default_dtype: torch.getattr("get_default_dtype")?.unbind(),
        };
        let mut step_sources = vec![None; steps.len()];
        for (s, i) in memo {
            step_sources[i] = Some(s);
        }
        let fast = guards.iter().map(|_| std::sync::OnceLock::new()).collect();
        let tensor_guards = py.import("torch._C._dynamo.guards").and_then(|m| m.getattr("TensorGuards")).ok().map(|t| t.unbind());
        let names = guards
            .iter()
            .map(|g| match &g.kind {
                GuardKind::NoInstanceAttr(n) | GuardKind::NoAttr(n) => Some(PyString::intern(py, n).unbind()),
                _ => None,
            })
            .collect();
        let cpu = torch.getattr("device")?.call1(("cpu",))?;
        let cpu_default_device = guards
            .iter()
            .map(|g| match &g.kind {
                GuardKind::GlobalQuery { func, args, expected } => {
                    func.is(&hot.get_default_device) && args.bind(py).is_empty() && same_answer(&cpu, expected.bind(py))
                }
                _ => false,
            })
            .collect();
        let mut after: Vec<Vec<u32>> = vec![Vec::new(); steps.len() + 1];
        for gi in 0..guards.len() {
            let last = [guard_slots[gi], other_slots[gi]].into_iter().chain(shape_slots[gi].iter().copied()).filter(|&s| s != usize::MAX).max();
            after[last.map_or(0, |s| s + 1)].push(gi as u32);
        }
        let mut schedule = Vec::with_capacity(steps.len() + guards.len());
        schedule.extend_from_slice(&after[0]);
        for i in 0..steps.len() {
            schedule.push(FETCH | i as u32);
            schedule.extend_from_slice(&after[i + 1]);
        }
        Ok(GuardManager { steps, guard_slots, other_slots, shape_slots, step_sources, guards, hot, fast, tensor_guards, names, cpu_default_device, schedule })
    }

    /// The text of a failure to read step `i`'s source: the source's name and the exception the
    /// read raised (a missing attribute, key or index), e.g.
    /// `L['self'].cfg could not be read (AttributeError: 'M' object has no attribute 'cfg')`.
    fn fetch_failure(&self, py: Python<'_>, i: usize, err: Option<PyErr>) -> String {
        let name = self.step_sources.get(i).and_then(|s| s.as_ref()).map(|s| s.to_string()).unwrap_or_else(|| format!("source #{i}"));
        match err {
            Some(e) => {
                let ty = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "exception".into());
                format!("{name} could not be read ({ty}: {})", e.value(py))
            }
            None => format!("{name} could not be read"),
        }
    }

    /// Checks every guard against the frame; `Ok(())` when all hold, else the first failure.
    /// With `explain == false` the failure text is not built (the cache-hit path).
    pub fn check(&self, py: Python<'_>, frame: &FrameRefs, explain: bool) -> Result<(), Option<GuardFailure>> {
        self.check_impl::<false>(py, frame, explain, &mut [])
    }

    /// Note [guard check timing]: `dynamo._C.time_guards` (src/py/mod.rs) runs the check of a
    /// code object's most recent cache entry against values a test supplies for the frame's
    /// argument slots, closure and globals, so its cost is read with a timer rather than from
    /// perf sample ratios. The whole-check figure runs the same code as the cache-hit path
    /// (`check_impl::<false>`); the per-step and per-guard figures come from a second pass
    /// that reads the clock between pieces (`Instant::now`, ~20-30 ns a read, charged to the
    /// piece before it), so they add up to more than the whole: use them to rank, not to sum.
    ///
    /// Test-only (Note [guard check timing]): runs `n` checks of `frame` and returns the mean
    /// time of one whole check (ns), then, from `n` further checks timed piece by piece, the
    /// mean ns of each step of the access plan (its source's text) and of each guard (its
    /// text), in plan/guard order. Errors with the failure's text when the check fails.
    pub fn time_checks(&self, py: Python<'_>, frame: &FrameRefs, n: usize) -> Result<(f64, Vec<(String, f64)>, Vec<(String, f64)>), String> {
        if let Err(f) = self.check(py, frame, true) {
            return Err(f.map(|f| f.to_string()).unwrap_or_default());
        }
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            let _ = std::hint::black_box(self.check(py, frame, false));
        }
        let whole = t0.elapsed().as_nanos() as f64 / n.max(1) as f64;
        let mut times = vec![0u64; self.steps.len() + self.guards.len()];
        for _ in 0..n {
            let _ = self.check_impl::<true>(py, frame, false, &mut times);
        }
        let per = |t: u64| t as f64 / n.max(1) as f64;
        let steps = (0..self.steps.len())
            .map(|i| {
                let name = self.step_sources[i].as_ref().map(|s| s.to_string()).unwrap_or_default();
                (format!("{} {name}", self.steps[i].kind()), per(times[i]))
            })
            .collect();
        let guards = self.guards.iter().enumerate().map(|(gi, g)| (g.to_string(), per(times[self.steps.len() + gi]))).collect();
        Ok((whole, steps, guards))
    }

    /// [`GuardManager::check`]; with `TIMED`, adds the ns each step takes to `times[step]` and
    /// each guard to `times[steps + guard]` (Note [guard check timing]).
    fn check_impl<const TIMED: bool>(&self, py: Python<'_>, frame: &FrameRefs, explain: bool, times: &mut [u64]) -> Result<(), Option<GuardFailure>> {
        let mut values: smallvec::SmallVec<[Option<Bound<'_, PyAny>>; 16]> = smallvec::SmallVec::new();
        values.resize(self.steps.len(), None);
        let mut clock = if TIMED { Some(std::time::Instant::now()) } else { None };
        // Adds the time since the last lap to `times[slot]`.
        let mut lap = |times: &mut [u64], slot: usize| {
            if let Some(c) = clock.as_mut() {
                let now = std::time::Instant::now();
                times[slot] += (now - *c).as_nanos() as u64;
                *c = now;
            }
        };
        let nsteps = self.steps.len();
        // Note [guards before reads]: each guard right after the last step it reads.
        for &op in &self.schedule {
            if op & FETCH == 0 {
                let gi = op as usize;
                self.check_guard(py, gi, &values, explain)?;
                if TIMED {
                    lap(times, nsteps + gi);
                }
                continue;
            }
            let i = (op & !FETCH) as usize;
            let v = unsafe { self.fetch(py, &self.steps[i], frame, &values) };
            if TIMED {
                lap(times, i);
            }
            match v {
                Some(v) => values[i] = Some(v),
                None => {
                    // A missing attribute / key is itself a guard failure; clear the error.
                    let err = if PyErr::occurred(py) { PyErr::take(py) } else { None };
                    // Only fail if some guard reads this node (they all do: the plan is built from guards).
                    let g = self.guard_slots.iter().position(|&s| s >= i && s != usize::MAX).unwrap_or(0);
                    return Err(explain.then(|| GuardFailure {
                        guard: self.guards.get(g).map(|g| g.to_string()).unwrap_or_default(),
                        reason: self.fetch_failure(py, i, err),
                    }));
                }
            }
        }
        Ok(())
    }

    /// Checks guard `gi` against the fetched `values` (every step it reads is fetched).
    #[inline(always)]
    fn check_guard(&self, py: Python<'_>, gi: usize, values: &[Option<Bound<'_, PyAny>>], explain: bool) -> Result<(), Option<GuardFailure>> {
        let (g, slot, other, shape_slots) = (&self.guards[gi], self.guard_slots[gi], self.other_slots[gi], &self.shape_slots[gi]);
        if let GuardKind::ShapeRelations(sg) = &g.kind {
            let mut vals: smallvec::SmallVec<[i64; 8]> = smallvec::SmallVec::new();
            let mut fvals: smallvec::SmallVec<[f64; 8]> = smallvec::SmallVec::new();
            for (((&step, (_, dim)), &used), &is_float) in shape_slots.iter().zip(&sg.sources).zip(&sg.used).zip(&sg.floats) {
                if !used {
                    vals.push(0);
                    fvals.push(0.0);
                    continue;
                }
                // A symbolic int or float input: its TYPE_MATCH ran before (guards keep
                // their order).
                let read = match dim {
                    Some(d) => values[step].as_ref().and_then(|t| t.call_method1(self.hot.size.bind(py), (*d,)).ok()).and_then(|s| s.extract::<i64>().ok()).map(|n| (n, n as f64)),
                    None if is_float => values[step].as_ref().and_then(|v| v.extract::<f64>().ok()).map(|x| (0, x)),
                    None => values[step].as_ref().and_then(|v| v.extract::<i64>().ok()).map(|n| (n, n as f64)),
                };
                match read {
                    Some((n, x)) => {
                        vals.push(n);
                        fvals.push(x);
                    }
                    None => return Err(explain.then(|| GuardFailure { guard: g.to_string(), reason: format!("cannot read the size {}", sg.sources[vals.len()].0) })),
                }
            }
            if let Err(reason) = sg.check(&vals, &fvals, explain) {
                return Err(explain.then(|| GuardFailure { guard: g.to_string(), reason: reason.unwrap_or_default() }));
            }
            return Ok(());
        }
        let value = if slot == usize::MAX { None } else { values[slot].as_ref() };
        if other != usize::MAX {
            let same = match (value, values[other].as_ref(), &g.kind) {
                (Some(it), Some(seq), GuardKind::IteratorOver { pos, .. }) => iterator_state(it).map(|(s, p)| s.is(seq) && p == *pos).unwrap_or(false),
                (Some(it), Some(d), GuardKind::DictIterOver { remaining, .. }) => dict_iter_state(it).map(|(dd, r)| dd.is(d) && r == *remaining).unwrap_or(false),
                (Some(a), Some(b), GuardKind::NotAliasOf(_)) => !a.is(b),
                (Some(a), Some(b), _) => a.is(b),
                _ => false,
            };
            if !same {
                return Err(explain.then(|| GuardFailure { guard: g.to_string(), reason: format!("{} is no longer the same object", src(g)) }));
            }
            return Ok(());
        }
        let fast_tensor = match (&g.kind, value) {
            (GuardKind::TensorMatch(spec), Some(v)) if spec.dynamic_dims.is_empty() => Some(v),
            _ => None,
        };
        if let Some(v) = fast_tensor {
            if let Some(Some(check)) = self.fast[gi].get() {
                if check.bind(py).call1((v,)).is_ok_and(|r| r.as_ptr() == unsafe { ffi::Py_True() }) {
                    return Ok(());
                }
            }
        }
        if let Err(reason) = self.check_one(py, gi, g, value, explain) {
            return Err(explain.then(|| GuardFailure { guard: g.to_string(), reason: reason.unwrap_or_default() }));
        }
        if let Some(v) = fast_tensor {
            if self.fast[gi].get().is_none() {
                let read_plain = matches!(&g.kind, GuardKind::TensorMatch(spec) if spec.read_plain);
                let _ = self.fast[gi].set(self.make_fast_tensor_check(py, v, read_plain));
            }
        }
        Ok(())
    }

    /// Note [fast tensor guards]: a static TENSOR_MATCH reads six attributes through Python
    /// (type, dtype, `get_device()`, requires_grad, `size()`, `stride()`: ~0.4 µs a tensor, so
    /// ~17 µs a call for tiny BERT's 43 tensors). torch's `TensorGuards` checks the same things
    /// (and the dispatch keys) in C++ from one call. It is made from `v`, a value that just
    /// passed the slow check, with every size and stride static, so whenever it passes, the slow
    /// check would have too; when it fails, the slow check decides (and explains). None when torch
    /// has no `TensorGuards` or making one failed. With `read_plain` (a subclass with a
    /// `__torch_function__`) the example's sizes and strides are read through a plain alias, so
    /// the subclass sees no call it would not see in eager; `TensorGuards` itself reads in C++.
    fn make_fast_tensor_check(&self, py: Python<'_>, v: &Bound<'_, PyAny>, read_plain: bool) -> Option<Py<PyAny>> {
        let tg = self.tensor_guards.as_ref()?.bind(py);
        let made = (|| -> PyResult<Py<PyAny>> {
            let plain = if read_plain { py.import("dynamo._subclass")?.call_method1("plain", (v,))? } else { v.clone() };
            let sizes = plain.call_method0(self.hot.size.bind(py))?;
            let strides = plain.call_method0(self.hot.stride.bind(py))?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("dynamic_dims_sizes", pyo3::types::PyList::new(py, [pyo3::types::PyList::new(py, sizes.try_iter()?.collect::<PyResult<Vec<_>>>()?)?])?)?;
            kw.set_item("dynamic_dims_strides", pyo3::types::PyList::new(py, [pyo3::types::PyList::new(py, strides.try_iter()?.collect::<PyResult<Vec<_>>>()?)?])?)?;
            let guards = tg.call((v,), Some(&kw))?;
            let check = guards.getattr("check")?;
            // It must accept the value it was made from.
            if check.call1((v,))?.as_ptr() != unsafe { ffi::Py_True() } {
                return Err(pyo3::exceptions::PyRuntimeError::new_err("TensorGuards rejects its own example"));
            }
            Ok(check.unbind())
        })();
        made.ok()
    }

    unsafe fn fetch<'py>(
        &self,
        py: Python<'py>,
        step: &Step,
        frame: &FrameRefs,
        values: &[Option<Bound<'py, PyAny>>],
    ) -> Option<Bound<'py, PyAny>> {
        match step {
            Step::Local(i) => {
                let p = *frame.locals.add(*i);
                if p.is_null() {
                    None
                } else {
                    Some(Bound::from_borrowed_ptr(py, p))
                }
            }
            Step::Closure(i) => {
                if frame.closure.is_null() {
                    return None;
                }
                let cell = ffi::PyTuple_GetItem(frame.closure, *i as ffi::Py_ssize_t);
                if cell.is_null() {
                    return None;
                }
                let v = ffi::PyCell_Get(cell);
                Bound::from_owned_ptr_or_opt(py, v)
            }
            Step::Global(name) => {
                let mut p = ffi::PyDict_GetItemWithError(frame.globals, name.as_ptr());
                if p.is_null() && !PyErr::occurred(py) {
                    p = ffi::PyDict_GetItemWithError(frame.builtins, name.as_ptr());
                }
                Bound::from_borrowed_ptr_or_opt(py, p)
            }
            Step::Attr(base, name) => {
                let b = values[*base].as_ref()?;
                // nn.Module parameters/buffers/submodules without running Module.__getattr__.
                Bound::from_owned_ptr_or_opt(py, crate::py::getattr::getattr(py, b.as_ptr(), name.as_ptr()))
            }
            Step::FuncField(base, field, name) => {
                let b = values[*base].as_ref()?;
                if ffi::PyFunction_Check(b.as_ptr()) != 0 {
                    let p = match field {
                        FuncField::Code => ffi::PyFunction_GetCode(b.as_ptr()),
                        FuncField::Globals => ffi::PyFunction_GetGlobals(b.as_ptr()),
                    };
                    Bound::from_borrowed_ptr_or_opt(py, p)
                } else {
                    Bound::from_owned_ptr_or_opt(py, ffi::PyObject_GetAttr(b.as_ptr(), name.as_ptr()))
                }
            }
            Step::GenericAttr(base, name) => {
                let b = values[*base].as_ref()?;
                Bound::from_owned_ptr_or_opt(py, ffi::PyObject_GenericGetAttr(b.as_ptr(), name.as_ptr()))
            }
            Step::Item(base, key) => {
                let b = values[*base].as_ref()?;
                Bound::from_owned_ptr_or_opt(py, ffi::PyObject_GetItem(b.as_ptr(), key.as_ptr()))
            }
            Step::DictItem(base, key) => {
                let b = values[*base].as_ref()?;
                if ffi::PyDict_Check(b.as_ptr()) == 0 {
                    return None;
                }
                // Borrowed (or NULL, with an error set when the key's hash or comparison raised).
                let p = ffi::PyDict_GetItemWithError(b.as_ptr(), key.as_ptr());
                if p.is_null() {
                    ffi::PyErr_Clear();
                }
                Bound::from_borrowed_ptr_or_opt(py, p)
            }
            Step::DictKey(base, k) => {
                let b = values[*base].as_ref()?;
                let d = b.cast::<pyo3::types::PyDict>().ok()?;
                if d.is_exact_instance_of::<pyo3::types::PyDict>() {
                    // The storage walked in order, no Python code run.
                    let (mut pos, mut key, mut val): (ffi::Py_ssize_t, *mut ffi::PyObject, *mut ffi::PyObject) = (0, std::ptr::null_mut(), std::ptr::null_mut());
                    let mut i = 0usize;
                    while ffi::PyDict_Next(d.as_ptr(), &mut pos, &mut key, &mut val) != 0 {
                        if i == *k {
                            return Bound::from_borrowed_ptr_or_opt(py, key);
                        }
                        i += 1;
                    }
                    return None;
                }
                crate::symbolic::builder::storage_keys(py, d).ok().and_then(|l| l.get_item(*k).ok())
            }
            Step::IterSeq(base) => {
                let b = values[*base].as_ref()?;
                iterator_state(b).ok().map(|(seq, _)| seq)
            }
            Step::IterItem(base, k) => {
                let b = values[*base].as_ref()?;
                iterator_remaining(b).ok().and_then(|r| r.get_item(*k).ok())
            }
            Step::Module(m) => m.as_ref().map(|m| m.bind(py).clone()),
            Step::WeakRefCall(base) => {
                // Only an exact weakref.ref is called (no Python `__call__` runs in a guard);
                // anything else reads as missing, which fails the guard.
                let b = values[*base].as_ref()?;
                if !crate::symbolic::object_protocol::is_exact_weakref(b) {
                    return None;
                }
                b.call0().ok()
            }
        }
    }

    /// `name in v.__dict__` for a NO_INSTANCE_ATTR guard (guard `gi`): `__dict__` read through
    /// `object.__getattribute__` (no user `__getattribute__` runs); no `__dict__` reads as
    /// absent, an error from `in` as present. With the names interned once per manager
    /// (`names`, `Hot::dict`), an exact dict costs one lookup of a cached hash.
    fn has_instance_attr(&self, py: Python<'_>, gi: usize, v: &Bound<'_, PyAny>, name: &str) -> bool {
        let n = self.names[gi].as_ref().map(|n| n.bind(py).clone()).unwrap_or_else(|| PyString::new(py, name));
        // SAFETY: live pointers; the result is a new reference or NULL.
        let d = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyObject_GenericGetAttr(v.as_ptr(), self.hot.dict.as_ptr())) };
        let Some(d) = d else {
            let _ = PyErr::take(py);
            return false;
        };
        if unsafe { ffi::PyDict_CheckExact(d.as_ptr()) } != 0 {
            let r = unsafe { ffi::PyDict_Contains(d.as_ptr(), n.as_ptr()) };
            if r < 0 {
                let _ = PyErr::take(py);
            }
            return r != 0;
        }
        d.contains(&n).unwrap_or(true)
    }

    fn check_one(&self, py: Python<'_>, gi: usize, g: &Guard, v: Option<&Bound<'_, PyAny>>, explain: bool) -> Result<(), Option<String>> {
        let fail = |msg: &dyn Fn() -> String| Err(explain.then(msg));
        match &g.kind {
            GuardKind::TypeMatch(t) => {
                let v = v.unwrap();
                if v.get_type().as_ptr() != t.as_ptr() {
                    return fail(&|| format!("{} is of type {}", src(g), v.get_type().name().map(|n| n.to_string()).unwrap_or_default()));
                }
            }
            GuardKind::IdMatch(o) => {
                if v.unwrap().as_ptr() != o.as_ptr() {
                    return fail(&|| format!("{} is a different object", src(g)));
                }
            }
            GuardKind::NotIdMatch(o) => {
                if v.unwrap().as_ptr() == o.as_ptr() {
                    return fail(&|| format!("{} is that very object", src(g)));
                }
            }
            GuardKind::IdMatchWeak { obj, ty } => {
                // SAFETY: `obj` and `ty` are live weak references; `wr_object` is the referent,
                // or `None` once that died (Include/cpython/weakrefobject.h,
                // `PyWeakref_GET_OBJECT` of 3.11/3.12), read without a new reference: only
                // addresses are compared.
                let referent = |r: &Py<pyo3::types::PyWeakrefReference>| unsafe { (*(r.as_ptr() as *mut pyo3::ffi::PyWeakReference)).wr_object };
                let v = v.unwrap();
                let o = referent(obj);
                if o == unsafe { pyo3::ffi::Py_None() } || o != v.as_ptr() {
                    return fail(&|| format!("{} is a different object", src(g)));
                }
                // SAFETY: `v` is a live object; its type is read without a new reference.
                if referent(ty) != unsafe { pyo3::ffi::Py_TYPE(v.as_ptr()) } as *mut pyo3::ffi::PyObject {
                    return fail(&|| format!("{} changed class to {}", src(g), v.get_type().name().map(|n| n.to_string()).unwrap_or_default()));
                }
            }
            GuardKind::ConstantMatch(c) => {
                let v = v.unwrap();
                let c = c.bind(py);
                // Note [exact constant guards]: floats by bits (-0.0 and 0.0 are equal but not
                // interchangeable, 1/x), a NaN matches itself, tuples item by item with types.
                let same = same_constant(v, c);
                if !same {
                    return fail(&|| format!("{} == {}, expected {}", src(g), v.repr().map(|r| r.to_string()).unwrap_or_default(), c.repr().map(|r| r.to_string()).unwrap_or_default()));
                }
            }
            GuardKind::LenMatch(n) => {
                let len = v.unwrap().len().unwrap_or(usize::MAX);
                if len != *n {
                    return fail(&|| format!("len({}) == {len}, expected {n}", src(g)));
                }
            }
            GuardKind::TensorMatch(spec) => return self.check_tensor(py, g, spec, v.unwrap(), explain),
            GuardKind::AliasOf(_) | GuardKind::NotAliasOf(_) | GuardKind::IteratorOver { .. } | GuardKind::DictIterOver { .. } => {}
            GuardKind::DictKeys(keys) => {
                let v = v.unwrap();
                // Note [fast dict keys check].
                if same_key_objects(v, keys.bind(py)) {
                    return Ok(());
                }
                // Equal keys of the same types (`1`, `1.0` and `True` are equal keys of
                // different objects). A dict subclass's keys are its storage's, read through the
                // base class's C method (Note [dict subclass storage]).
                let keys_of = match v.cast::<pyo3::types::PyDict>() {
                    Ok(d) if !d.is_exact_instance_of::<pyo3::types::PyDict>() => crate::symbolic::builder::storage_keys(py, d).map(|l| l.into_any()),
                    _ => v.call_method0("keys"),
                };
                let same = keys_of
                    .and_then(|k| pyo3::types::PyList::new(py, k.try_iter()?.collect::<PyResult<Vec<_>>>()?))
                    .map(|l| {
                        // Note [exact constant guards]: `(1,)` and `(True,)` are equal keys.
                        l.len() == keys.bind(py).len().unwrap_or(usize::MAX)
                            && l.iter().zip(keys.bind(py).try_iter().into_iter().flatten()).all(|(a, b)| b.map(|b| same_constant(&a, &b)).unwrap_or(false))
                    })
                    .unwrap_or(false);
                if !same {
                    return fail(&|| format!("{} has other keys", src(g)));
                }
            }
            GuardKind::SetMembers(members) => {
                let v = v.unwrap();
                // A set of literals iterates without running Python code (no `__eq__` runs:
                // the members are compared by `same_constant`).
                let members = members.bind(py);
                let same = v.cast::<pyo3::types::PySet>().is_ok_and(|s| {
                    s.len() == members.len() && s.iter().zip(members.iter()).all(|(a, b)| same_constant(&a, &b))
                });
                if !same {
                    return fail(&|| format!("{} has other members", src(g)));
                }
            }
            GuardKind::NoInstanceAttr(name) => {
                let v = v.unwrap();
                let shadowed = self.has_instance_attr(py, gi, v, name);
                if shadowed {
                    return fail(&|| format!("{}.{name} is set on the instance", src(g)));
                }
            }
            GuardKind::NoAttr(name) => {
                let v = v.unwrap();
                let n = self.names[gi].as_ref().map(|n| n.bind(py).clone()).unwrap_or_else(|| PyString::new(py, name));
                // SAFETY: both pointers are live; the GIL is held.
                let has = unsafe { crate::py::getattr::module_hasattr(py, v.as_ptr(), n.as_ptr()) };
                if has.unwrap_or_else(|| v.hasattr(&n).unwrap_or(true)) {
                    return fail(&|| format!("{} now has attribute {name}", src(g)));
                }
            }
            GuardKind::IteratorMatch(ty, items) => {
                let v = v.unwrap();
                let same = v.get_type().as_ptr() == ty.as_ptr()
                    && iterator_remaining(v).map(|r| same_constant(r.as_any(), items.bind(py))).unwrap_or(false);
                if !same {
                    return fail(&|| format!("{} has other remaining items", src(g)));
                }
            }
            GuardKind::IteratorLen { ty, n, exact } => {
                let v = v.unwrap();
                let left = if v.get_type().as_ptr() == ty.as_ptr() { v.call_method0("__length_hint__").and_then(|l| l.extract::<usize>()).ok() } else { None };
                if !left.is_some_and(|l| if *exact { l == *n } else { l >= *n }) {
                    return fail(&|| format!("{} has {} items left", src(g), left.map(|l| l.to_string()).unwrap_or_else(|| "other".into())));
                }
            }
            GuardKind::GradMode(flag) => {
                let now = self.hot.is_grad_enabled.bind(py).call0().and_then(|r| r.is_truthy()).unwrap_or(!flag);
                if now != *flag {
                    return fail(&|| format!("grad mode is {now}, expected {flag}"));
                }
            }
            GuardKind::DefaultDtype(d) => {
                let now = self.hot.get_default_dtype.bind(py).call0();
                if now.map(|n| n.as_ptr() != d.as_ptr()).unwrap_or(true) {
                    return fail(&|| "default dtype changed".to_string());
                }
            }
            GuardKind::TensorQuery { name, call, expected } => {
                let v = v.unwrap();
                let now = v.getattr(name.bind(py)).and_then(|a| if *call { a.call0() } else { Ok(a) });
                if !now.as_ref().is_ok_and(|n| same_answer(n, expected.bind(py))) {
                    return fail(&|| format!("{}.{name}{} changed, expected {}", src(g), if *call { "()" } else { "" }, repr(py, expected)));
                }
            }
            GuardKind::GlobalQuery { func, args, expected } => {
                // Note [default device fast path].
                if self.cpu_default_device[gi] && self.hot.default_device_is_cpu(py) {
                    return Ok(());
                }
                let now = func.bind(py).call1(args.bind(py));
                if !now.as_ref().is_ok_and(|n| same_answer(n, expected.bind(py))) {
                    return fail(&|| format!("{}() changed, expected {}", qualified_name(py, func), repr(py, expected)));
                }
            }
            GuardKind::AttrVersion(vg) => {
                if let Err(name) = vg.check() {
                    return fail(&|| format!("{}.{name} was replaced", vg.describe(py)));
                }
            }
            // Checked by `check` itself (it needs several sources).
            GuardKind::ShapeRelations(_) => {}
        }
        Ok(())
    }

    fn check_tensor(&self, py: Python<'_>, g: &Guard, spec: &TensorSpec, v: &Bound<'_, PyAny>, explain: bool) -> Result<(), Option<String>> {
        let name = || src(g);
        if v.get_type().as_ptr() != spec.ty.as_ptr() {
            return Err(explain.then(|| format!("tensor {} type mismatch", name())));
        }
        // A tensor subclass with a `__torch_function__` would see these reads: ask a plain alias
        // (Note [tensor subclasses] in `src/symbolic/variables/tensor_subclass.rs`).
        let plain;
        let v = if !spec.read_plain {
            v
        } else {
            plain = py.import("dynamo._subclass").and_then(|m| m.call_method1("plain", (v,))).map_err(|_| None)?;
            &plain
        };
        let dtype = v.getattr(self.hot.dtype.bind(py)).map_err(|_| None)?;
        if dtype.as_ptr() != spec.dtype.as_ptr() {
            return Err(explain.then(|| format!("tensor {} dtype mismatch. expected {}, actual {}", name(), repr(py, &spec.dtype), dtype)));
        }
        let device_obj = v.call_method0(self.hot.get_device.bind(py)).map_err(|_| None)?;
        // CPython keeps one object per small int (-5..=256, so every CPU's -1 and the first GPUs'
        // indices): the same object means the same device, without `extract`, which for -1
        // must also fetch and clear a possible Python error (a PyErr take per CPU tensor per call).
        let same = spec.device.into_pyobject(py).is_ok_and(|e| e.as_ptr() == device_obj.as_ptr());
        let device: i64 = if same { spec.device } else { device_obj.extract().map_err(|_| None)? };
        if device != spec.device {
            return Err(explain.then(|| format!("tensor {} device mismatch. expected {}, actual {}", name(), spec.device, device)));
        }
        // The index alone does not tell `cpu` from `meta` (both -1).
        let same_type = match spec.device_type.as_str() {
            "cpu" => v.getattr(self.hot.is_cpu.bind(py)).map_err(|_| None)?.as_ptr() == unsafe { ffi::Py_True() },
            "cuda" => v.getattr(self.hot.is_cuda.bind(py)).map_err(|_| None)?.as_ptr() == unsafe { ffi::Py_True() },
            other => v.getattr("device").and_then(|d| d.getattr("type")).is_ok_and(|t| t.extract::<String>().is_ok_and(|t| t == other)),
        };
        if !same_type {
            return Err(explain.then(|| format!("tensor {} device type mismatch. expected {}", name(), spec.device_type)));
        }
        let rg = v.getattr(self.hot.requires_grad.bind(py)).map(|r| r.as_ptr() == unsafe { ffi::Py_True() }).map_err(|_| None)?;
        if rg != spec.requires_grad {
            return Err(explain.then(|| format!("tensor {} requires_grad mismatch. expected {}, actual {}", name(), spec.requires_grad, rg)));
        }
        // Note [inference tensor inputs]: a tensor made under `torch.inference_mode` cannot be
        // saved for backward, so a graph compiled for ordinary tensors raises "Inference tensors
        // cannot be saved for backward" only after its kernels ran (batch-norm statistics
        // updated, dropout drawn, the frame's earlier Python effects not replayed), where eager
        // raises at the op that saves it. Such an input is another compile: its trace raises at
        // that op, which runs eagerly after a graph holding what came before. torch's
        // `TensorGuards` (the fast check) already tell them apart by their dispatch keys.
        let inference = v.call_method0(intern!(py, "is_inference")).map(|r| r.as_ptr() == unsafe { ffi::Py_True() }).map_err(|_| None)?;
        if inference != spec.inference {
            return Err(explain.then(|| format!("tensor {} is_inference mismatch. expected {}, actual {}", name(), spec.inference, inference)));
        }
        let lazy = crate::inductor::fx_import::is_lazy_value(py, v).map_err(|_| None)?;
        if lazy != spec.lazy_value {
            return Err(explain.then(|| format!("tensor {} negative/conjugate/zero bit mismatch. expected {}, actual {}", name(), spec.lazy_value, lazy)));
        }
        let sizes = v.call_method0(self.hot.size.bind(py)).map_err(|_| None)?;
        let strides = v.call_method0(self.hot.stride.bind(py)).map_err(|_| None)?;
        if !spec.dynamic_dims.is_empty() {
            let actual: Vec<i64> = sizes.extract().map_err(|_| None)?;
            if actual.len() != spec.sizes.len() {
                return Err(explain.then(|| format!("tensor {} size mismatch rank {} != expected {}", name(), actual.len(), spec.sizes.len())));
            }
            for (d, (a, e)) in actual.iter().zip(&spec.sizes).enumerate() {
                if a != e && !spec.dynamic_dims.contains(&d) {
                    return Err(explain.then(|| format!("tensor {} size mismatch at index {d}. expected {e}, actual {a}", name())));
                }
            }
            if let Some(msg) = compare_ints(&strides, &contiguous_strides(&actual)) {
                return Err(explain.then(|| format!("tensor {} is not contiguous: stride mismatch {msg}", name())));
            }
            return Ok(());
        }
        if let Some(msg) = compare_ints(&sizes, &spec.sizes) {
            return Err(explain.then(|| format!("tensor {} size mismatch {msg}", name())));
        }
        if let Some(msg) = compare_ints(&strides, &spec.strides) {
            return Err(explain.then(|| format!("tensor {} stride mismatch {msg}", name())));
        }
        Ok(())
    }

    /// All guards, one per line, for logs and `explain`.
    pub fn dump(&self) -> String {
        self.guards.iter().map(|g| g.to_string()).collect::<Vec<_>>().join("\n")
    }
}

/// (sequence, position) of a list or tuple iterator, read through `__reduce__` without
/// consuming it (`(iter, (seq,), pos)`; an exhausted one reduces to `(iter, ((),))`).
pub fn iterator_state<'py>(it: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let red = it.call_method0("__reduce__")?;
    let seq = red.get_item(1)?.get_item(0)?;
    let pos: usize = if red.len()? > 2 { red.get_item(2)?.extract()? } else { usize::MAX };
    Ok((seq, pos))
}

/// (the dict, items left) of a dict key/value/item iterator that still holds its dict: an error
/// when it is exhausted (it dropped its dict) or its dict changed size since it was made (its
/// length hint is then 0, and `__reduce__`, which walks a copy of it, raises). A dict iterator's
/// only references are its dict and, for items, a cached result tuple (Objects/dictobject.c,
/// `dictiter_traverse`).
pub fn dict_iter_state<'py>(it: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let py = it.py();
    let remaining: usize = it.call_method0("__length_hint__")?.extract()?;
    if remaining == 0 {
        it.call_method0("__reduce__")?;
    }
    let referents = py.import("gc")?.call_method1("get_referents", (it,))?;
    for r in referents.try_iter()? {
        let r = r?;
        if r.is_instance_of::<pyo3::types::PyDict>() {
            return Ok((r, remaining));
        }
    }
    Err(pyo3::exceptions::PyValueError::new_err("dict iterator without a dict or items left"))
}

/// The items a tuple, list or range iterator has left, as a tuple, without consuming it
/// (`it.__reduce__()` is `(iter, (seq,), pos)` for these types; an exhausted one reduces to
/// `(iter, ((),))`; from CPython 3.12 a range iterator reduces to `(iter, (range,), None)`, the
/// range starting at its next item: Objects/rangeobject.c, `rangeiter_reduce`).
/// Any other iterator is refused before its `__reduce__` runs: `enumerate`'s and `zip`'s
/// reduce to their inner iterators, which collecting would consume (Note [guards before
/// reads]).
pub fn iterator_remaining<'py>(it: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let kind = it.get_type().name()?;
    if !matches!(kind.to_str()?, "list_iterator" | "tuple_iterator" | "range_iterator" | "longrange_iterator") {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!("not a sequence iterator: {kind}")));
    }
    let red = it.call_method0("__reduce__")?;
    let seq = red.get_item(1)?.get_item(0)?;
    let pos: usize = match (red.len()? > 2).then(|| red.get_item(2)).transpose()? {
        Some(p) if !p.is_none() => p.extract()?,
        _ => 0,
    };
    // Note [iterators over subclass storage]: a list or tuple iterator walks its sequence's
    // storage (Objects/listobject.c `listiter_next` reads `PyList_GET_ITEM`, tupleobject.c
    // `tupleiter_next` `PyTuple_GET_ITEM`), whatever `__iter__`/`__getitem__`/`__len__` a
    // subclass of the sequence defines: its items are read the same way, never through the
    // subclass's methods (`list.__iter__(l)` of a list subclass with its own `__iter__`).
    let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = seq.cast::<pyo3::types::PyList>() {
        l.iter().collect()
    } else if let Ok(t) = seq.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        seq.try_iter()?.collect::<PyResult<Vec<_>>>()?
    };
    let seq = PyTuple::new(it.py(), items)?;
    seq.get_slice(pos.min(seq.len()), seq.len()).cast_into::<PyTuple>().map_err(|e| e.into())
}

fn src(g: &Guard) -> String {
    g.source.as_ref().map(|s| s.to_string()).unwrap_or_default()
}

/// `object.__getattribute__(v, name)` (`PyObject_GenericGetAttr`): no user `__getattribute__`
/// runs. `None` when the attribute is missing (the error is cleared).
pub fn generic_getattr<'py>(v: &Bound<'py, PyAny>, name: &str) -> Option<Bound<'py, PyAny>> {
    let py = v.py();
    let n = PyString::new(py, name);
    // SAFETY: both pointers are live for the call; the result is a new reference or NULL.
    let r = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyObject_GenericGetAttr(v.as_ptr(), n.as_ptr())) };
    if r.is_none() && PyErr::occurred(py) {
        let _ = PyErr::take(py);
    }
    r
}

/// Note [fast dict keys check]: DICT_KEYS compares `list(v.keys())` with the recorded keys by
/// `==` and by type, which builds a list and calls `keys()` (~0.7 µs for a config's 30 keys).
/// The recorded list holds the dict's own key objects, and a dict that was not rebuilt still
/// holds them: for an exact dict (whose `keys()` no subclass overrides) with as many entries,
/// walking it with `PyDict_Next` and finding the same object at each position proves the slow
/// check passes (`list.__eq__` takes identical items as equal, CPython's `list_richcompare`,
/// and an object has its own type). Anything else (another object, a subclass) takes the slow
/// check, which decides.
fn same_key_objects(v: &Bound<'_, PyAny>, keys: &Bound<'_, PyAny>) -> bool {
    let Ok(keys) = keys.cast::<pyo3::types::PyList>() else { return false };
    // A dict subclass's storage walks in its keys' order too, but for an OrderedDict, whose
    // order is its linked list's (Note [dict subclass storage]).
    let walkable = |p: *mut ffi::PyObject| unsafe {
        ffi::PyDict_CheckExact(p) != 0
            || (ffi::PyDict_Check(p) != 0 && crate::symbolic::builder::ordered_dict_type(v.py()).is_none_or(|od| ffi::PyObject_TypeCheck(p, od.as_ptr().cast()) == 0))
    };
    // SAFETY: `v` is a dict whose storage order is its iteration order, walked without running
    // Python code (no key comparison).
    unsafe {
        if !walkable(v.as_ptr()) || ffi::PyDict_Size(v.as_ptr()) != keys.len() as ffi::Py_ssize_t {
            return false;
        }
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut val: *mut ffi::PyObject = std::ptr::null_mut();
        let mut i = 0usize;
        while ffi::PyDict_Next(v.as_ptr(), &mut pos, &mut k, &mut val) != 0 {
            if i >= keys.len() || ffi::PyList_GET_ITEM(keys.as_ptr(), i as ffi::Py_ssize_t) != k {
                return false;
            }
            i += 1;
        }
        i == keys.len()
    }
}

/// Compares a tuple of Python ints with `expected`; returns a description of the first difference.
fn compare_ints(t: &Bound<'_, PyAny>, expected: &[i64]) -> Option<String> {
    let t = match t.cast::<PyTuple>() {
        Ok(t) => t,
        Err(_) => return Some("(not a tuple)".into()),
    };
    if t.len() != expected.len() {
        return Some(format!("rank {} != expected {}", t.len(), expected.len()));
    }
    for (i, (item, e)) in t.iter().zip(expected).enumerate() {
        let got: i64 = item.extract().unwrap_or(i64::MIN);
        if got != *e {
            return Some(format!("at index {i}. expected {e}, actual {got}"));
        }
    }
    None
}

fn plan(py: Python<'_>, s: &Arc<Source>, steps: &mut Vec<Step>, memo: &mut HashMap<Source, usize>) -> usize {
    if let Some(&i) = memo.get(s.as_ref()) {
        return i;
    }
    let step = match s.as_ref() {
        Source::Local { idx, .. } => Step::Local(*idx as usize),
        Source::Closure { idx, .. } => Step::Closure(*idx as usize),
        Source::Global { name } => Step::Global(PyString::intern(py, name).unbind()),
        Source::Module { name } => Step::Module(crate::source::imported_module(py, name)),
        Source::Attr { base, attr } => {
            let b = plan(py, base, steps, memo);
            let name = PyString::intern(py, attr).unbind();
            match attr.as_str() {
                "__code__" => Step::FuncField(b, FuncField::Code, name),
                "__globals__" => Step::FuncField(b, FuncField::Globals, name),
                _ => Step::Attr(b, name),
            }
        }
        Source::IterSeq { base } => {
            let b = plan(py, base, steps, memo);
            Step::IterSeq(b)
        }
        Source::IterItem { base, index } => {
            let b = plan(py, base, steps, memo);
            Step::IterItem(b, *index)
        }
        Source::WeakRefCall { base } => {
            let b = plan(py, base, steps, memo);
            Step::WeakRefCall(b)
        }
        Source::GenericAttr { base, attr } => {
            let b = plan(py, base, steps, memo);
            Step::GenericAttr(b, PyString::intern(py, attr).unbind())
        }
        Source::DictKey { base, index } => {
            let b = plan(py, base, steps, memo);
            Step::DictKey(b, *index)
        }
        Source::GetItem { base, key } | Source::DictItem { base, key } => {
            let b = plan(py, base, steps, memo);
            let k = key.to_object(py);
            if matches!(s.as_ref(), Source::DictItem { .. }) {
                Step::DictItem(b, k)
            } else {
                Step::Item(b, k)
            }
        }
    };
    steps.push(step);
    let i = steps.len() - 1;
    memo.insert(s.as_ref().clone(), i);
    i
}
