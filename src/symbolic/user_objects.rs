//! Objects of plain Python classes created inside the traced frame (torch's
//! `UserDefinedObjectVariable` for a new object, with new-object side effects).
//!
//! `cls(*args)` for a class that `is_plain_class` accepts makes a `UserObject`: no real object
//! exists while tracing; `__init__` (a dataclass's generated one included) is inlined with the
//! tracker as `self`, and attribute writes land in `attrs`. Nothing needs replaying for an
//! object that dies inside the frame; one that outlives the graph (returned, stored into an
//! object from the frame, live at a break) is rebuilt once by `dynamo._C.new_object(cls,
//! attrs, items)`, which writes the instance dict past the class's `__setattr__` (and the dict
//! storage past its `__setitem__`). Attribute lookup follows `object.__getattribute__`
//! (Objects/object.c, `_PyObject_GenericGetAttrWithDict`): data descriptors on the class, then
//! the instance attributes, then the class attribute.
//!
//! Note [dict subclass objects]: an instance of a subclass of `dict` or `collections.OrderedDict`
//! (transformers' `ModelOutput`: an `OrderedDict` and a dataclass at once) has two stores, the
//! instance `__dict__` and the dict storage that `dict`'s C methods read. The tracker keeps both
//! as dict trackers: `attrs` (also what `o.__dict__` gives, so writes through it are attribute
//! writes) and `storage`. The class's own Python methods (`__setitem__`, `__getitem__`,
//! `__setattr__`, ...) are inlined as for any object; where the class's slot is `dict`'s or
//! `OrderedDict`'s C function (`type(o).keys`, `super().__setitem__`, `len(o)`, `k in o`,
//! `iter(o)`), the operation acts on `storage` (`storage_method`). Only the methods whose
//! `OrderedDict` version touches nothing but the storage are mapped: `OrderedDict.update` and
//! `setdefault` call the subclass's `__setitem__` back and are left to Python (a graph break).

use crate::source::{ItemKey, Source};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::symbolic::variables::{DictState, VT};

/// The tracked state of a user object built in the frame.
pub struct UserObject {
    pub cls: Py<PyAny>,
    /// Where the class was read from (its attributes are read and guarded through it).
    pub cls_source: Arc<Source>,
    /// The instance `__dict__`, in insertion order; `o.__dict__` is this very tracker.
    pub attrs: Rc<RefCell<DictState>>,
    /// For an instance of a `dict` / `OrderedDict` subclass: the dict storage (Note [dict
    /// subclass objects]); `None` for other classes.
    pub storage: Option<Rc<RefCell<DictState>>>,
}

/// The methods of `dict` and `collections.OrderedDict` that act on an instance's storage alone
/// (no call back into the subclass: `OrderedDict.update`/`setdefault`/`pop` go through the
/// subclass's `__getitem__`/`__setitem__`, `copy` calls the class, so they are not here).
/// `dict_subscript` calls a subclass's `__missing__`, which `is_plain_class` refuses.
pub const STORAGE_METHODS: [&str; 10] = ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__", "get", "keys", "values", "items"];

impl UserObject {
    /// A new object of `cls` with no attributes (and an empty dict storage when `dict_base`).
    pub fn new(cls: Py<PyAny>, cls_source: Arc<Source>, dict_base: bool) -> Self {
        let empty = || Rc::new(RefCell::new(DictState { items: Vec::new(), source: None, version: 0 }));
        UserObject { cls, cls_source, attrs: empty(), storage: dict_base.then(empty) }
    }

    /// The instance attribute `name`, if set.
    pub fn get(&self, py: Python<'_>, name: &str) -> Option<VT> {
        self.attrs.borrow().items.iter().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)).map(|(_, v)| v.clone())
    }

    /// Sets the instance attribute `name` (a new key bumps the dict's version, as an insertion
    /// into a real `__dict__` invalidates its iterators).
    pub fn set(&self, py: Python<'_>, name: &str, v: VT) {
        let mut attrs = self.attrs.borrow_mut();
        match attrs.items.iter_mut().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)) {
            Some(slot) => slot.1 = v,
            None => {
                attrs.items.push((PyString::new(py, name).into_any().unbind(), v));
                attrs.version += 1;
            }
        }
    }

    /// The source of the class attribute `name` found at `cls.__mro__[k]`:
    /// `cls.__mro__[k].__dict__[name]` (read without running descriptors).
    pub fn class_attr_source(&self, k: usize, name: &str) -> Arc<Source> {
        self.cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()))
    }

    /// The storage as a dict tracker when `method` (found on the class's MRO, or through
    /// `super()`) is `dict`'s or `OrderedDict`'s own C method named `name` in
    /// `STORAGE_METHODS`: calling it on the object is calling it on the storage.
    pub fn storage_method(&self, py: Python<'_>, method: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<VT>> {
        let Some(storage) = &self.storage else { return Ok(None) };
        if !STORAGE_METHODS.contains(&name) || !matches!(crate::symbolic::variables::type_name(method).as_str(), "method_descriptor" | "wrapper_descriptor") {
            return Ok(None);
        }
        let Ok(owner) = method.getattr("__objclass__") else { return Ok(None) };
        Ok(dict_base_type(py, &owner)?.then(|| VT::Dict(storage.clone())))
    }

    /// The storage when the class's own slot `name` (what the syntax reaches: `len(o)`,
    /// `o[k]`, `k in o`, `iter(o)`) is the builtin one rather than Python code.
    pub fn storage_slot(&self, py: Python<'_>, name: &str) -> PyResult<Option<VT>> {
        if self.storage.is_none() {
            return Ok(None);
        }
        let ty = self.cls.bind(py).cast::<PyType>()?.clone();
        for base in ty.getattr("__mro__")?.try_iter()? {
            let d = base?.getattr("__dict__")?;
            if d.contains(name)? {
                return self.storage_method(py, &d.get_item(name)?, name);
            }
        }
        Ok(None)
    }

    /// Whether attribute `key` holds the very object stored under the same key in the dict
    /// storage (`ModelOutput.__setitem__` writes both): rebuilt once and set twice
    /// (`dynamo._C.new_object`'s `from_items`), since a value reached twice would otherwise be
    /// rebuilt as two copies.
    pub fn attr_aliases_storage(&self, py: Python<'_>, key: &Bound<'_, PyAny>, v: &VT) -> bool {
        let Some(storage) = &self.storage else { return false };
        let st = storage.borrow();
        st.items.iter().any(|(k, sv)| k.bind(py).eq(key).unwrap_or(false) && same_object(py, sv, v))
    }
}

/// Whether two trackers stand for the same Python object (mutable kinds by identity of their
/// state; tensors by graph node; modules and constants by identity).
pub fn same_object(py: Python<'_>, a: &VT, b: &VT) -> bool {
    match (a, b) {
        (VT::List(x), VT::List(y)) => Rc::ptr_eq(x, y),
        (VT::Dict(x), VT::Dict(y)) => Rc::ptr_eq(x, y),
        (VT::Set(x), VT::Set(y)) => Rc::ptr_eq(x, y),
        (VT::Iterator(x), VT::Iterator(y)) => Rc::ptr_eq(x, y),
        (VT::UserObject(x), VT::UserObject(y)) => Rc::ptr_eq(x, y),
        (VT::Partial(x), VT::Partial(y)) => Rc::ptr_eq(x, y),
        (VT::Tuple(x), VT::Tuple(y)) => Rc::ptr_eq(x, y),
        (VT::Tensor(x), VT::Tensor(y)) => x.node == y.node,
        (VT::Module { obj: x, .. }, VT::Module { obj: y, .. }) => x.bind(py).is(y.bind(py)),
        (VT::Constant(x), VT::Constant(y)) => x.bind(py).is(y.bind(py)),
        _ => false,
    }
}

/// Whether `t` is `dict` or `collections.OrderedDict` (the builtin bases a tracked object may
/// have).
pub fn dict_base_type(py: Python<'_>, t: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(t.is(py.get_type::<PyDict>()) || t.is(py.import("collections")?.getattr("OrderedDict")?))
}

/// Whether instances of `cls` have a dict storage (`cls` subclasses `dict`).
pub fn has_dict_base(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(cls.cast::<PyType>().map(|t| t.is_subclass(&py.get_type::<PyDict>()).unwrap_or(false)).unwrap_or(false))
}

/// Whether instances of `cls` can be tracked as `UserObject`s: a plain metaclass (see
/// `plain_metaclass`) and, for an ABC, no abstract method left; every class of the MRO but
/// `object` a Python class (heap type) with an instance `__dict__` and at most empty `__slots__`
/// (the `collections.abc` mixins declare `()`), or one of the builtin bases `dict` and
/// `collections.OrderedDict` (Note [dict subclass objects]); the base's `__new__` and
/// `__getattribute__` (`object`'s, or `dict`'s for a dict subclass, both generic); no
/// `__getattr__`, `__del__` or (for a dict subclass) `__missing__`; and `__init__` either the
/// base's or a Python function. (A Python `__setattr__`, as a frozen dataclass has, is inlined
/// on writes.)
pub fn is_plain_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(ty) = cls.cast::<PyType>() else { return Ok(false) };
    let object = py.get_type::<PyAny>();
    if !plain_metaclass(py, &ty.get_type())? || ty.is(&object) {
        return Ok(false);
    }
    // An ABC with an abstract method left cannot be instantiated (`object.__new__` raises).
    if ty.get_type().is_subclass(&py.import("abc")?.getattr("ABCMeta")?)? && ty.getattr("__abstractmethods__")?.len()? != 0 {
        return Ok(false);
    }
    let dictoffset: isize = ty.getattr("__dictoffset__")?.extract()?;
    if dictoffset == 0 {
        return Ok(false);
    }
    const HEAPTYPE: u64 = 1 << 9;
    for base in ty.getattr("__mro__")?.try_iter()? {
        let base = base?;
        if base.is(&object) || dict_base_type(py, &base)? {
            continue;
        }
        let flags: u64 = base.getattr("__flags__")?.extract()?;
        let d = base.getattr("__dict__")?;
        let slots_ok = match d.get_item("__slots__") {
            Ok(slots) => slots.len().map(|n| n == 0).unwrap_or(false) && !slots.is_instance_of::<pyo3::types::PyString>(),
            Err(_) => true,
        };
        if flags & HEAPTYPE == 0 || !plain_metaclass(py, &base.get_type())? || !slots_ok {
            return Ok(false);
        }
        // contextlib's managers drive a generator whose end `__exit__` detects by catching
        // StopIteration, which the trace does not model; a tracked one holding a half-run
        // generator could not be rebuilt at a break. Left as real objects.
        let module = base.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "contextlib" {
            return Ok(false);
        }
    }
    let dict_sub = has_dict_base(py, cls)?;
    // `dict` has its own slot wrappers for `__new__` and (the generic) `__getattribute__`.
    let base = if dict_sub { py.get_type::<PyDict>().into_any() } else { object.clone().into_any() };
    if !ty.getattr("__new__")?.is(base.getattr("__new__")?) || !ty.getattr("__getattribute__")?.is(base.getattr("__getattribute__")?) {
        return Ok(false);
    }
    if ty.hasattr("__getattr__")? || ty.hasattr("__del__")? || (dict_sub && ty.hasattr("__missing__")?) {
        return Ok(false);
    }
    let init = ty.getattr("__init__")?;
    let setattr = ty.getattr("__setattr__")?;
    let is_function = |f: &Bound<'_, PyAny>| crate::symbolic::variables::type_name(f) == "function";
    let builtin_init = init.is(object.getattr("__init__")?) || (dict_sub && init.getattr("__objclass__").map(|o| dict_base_type(py, &o).unwrap_or(false)).unwrap_or(false));
    Ok((builtin_init || is_function(&init)) && (setattr.is(object.getattr("__setattr__")?) || is_function(&setattr)))
}

/// Whether metaclass `meta` leaves instance creation, attribute lookup and `isinstance` to
/// `type`: `type` itself, `abc.ABCMeta` (its `isinstance` only consults registrations, which do
/// not change what an instance is), or a Python subclass of `type` that overrides none of
/// `__call__`, `__getattribute__`, `__getattr__`, `__instancecheck__` and `__subclasscheck__`
/// (transformers' `_BCCacheNameMeta` overrides only `__setattr__`, which runs on writes to the
/// class, and those are graph breaks for any metaclass but `type`).
pub fn plain_metaclass(py: Python<'_>, meta: &Bound<'_, PyType>) -> PyResult<bool> {
    let type_type = py.get_type::<PyType>();
    let abc_meta = py.import("abc")?.getattr("ABCMeta")?;
    if meta.is(&type_type) || meta.is(&abc_meta) {
        return Ok(true);
    }
    if !meta.is_subclass(&type_type)? || meta.is_subclass(&abc_meta)? {
        return Ok(false);
    }
    for name in ["__call__", "__getattribute__", "__instancecheck__", "__subclasscheck__"] {
        if !meta.getattr(name)?.is(type_type.getattr(name)?) {
            return Ok(false);
        }
    }
    Ok(!meta.hasattr("__getattr__")?)
}
