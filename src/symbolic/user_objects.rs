//! Objects of plain Python classes created inside the traced frame (torch's
//! `UserDefinedObjectVariable` for a new object, with new-object side effects).
//!
//! `cls(*args)` for a class that `is_plain_class` accepts makes a `UserObject`: no real object
//! exists while tracing; `__init__` (a dataclass's generated one included) is inlined with the
//! tracker as `self`, and attribute writes land in `attrs`. Nothing needs replaying for an
//! object that dies inside the frame; one that outlives the graph (returned, stored into an
//! object from the frame, live at a break) is rebuilt once by `dynamo._C.new_object(cls,
//! attrs)`, which writes the instance dict past the class's `__setattr__`. Attribute lookup
//! follows `object.__getattribute__` (Objects/object.c, `_PyObject_GenericGetAttrWithDict`):
//! data descriptors on the class, then the instance attributes, then the class attribute.

use crate::source::{ItemKey, Source};
use pyo3::prelude::*;
use pyo3::types::PyType;
use std::cell::RefCell;
use std::sync::Arc;

use crate::symbolic::variables::VT;

/// The tracked state of a user object built in the frame.
pub struct UserObject {
    pub cls: Py<PyAny>,
    /// Where the class was read from (its attributes are read and guarded through it).
    pub cls_source: Arc<Source>,
    /// Instance attributes in insertion order (the instance `__dict__`).
    pub attrs: RefCell<Vec<(String, VT)>>,
}

impl UserObject {
    pub fn get(&self, name: &str) -> Option<VT> {
        self.attrs.borrow().iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    pub fn set(&self, name: &str, v: VT) {
        let mut attrs = self.attrs.borrow_mut();
        match attrs.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = v,
            None => attrs.push((name.to_string(), v)),
        }
    }

    /// The source of the class attribute `name` found at `cls.__mro__[k]`:
    /// `cls.__mro__[k].__dict__[name]` (read without running descriptors).
    pub fn class_attr_source(&self, k: usize, name: &str) -> Arc<Source> {
        self.cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()))
    }
}

/// Whether instances of `cls` can be tracked as `UserObject`s: metaclass `type`, or `abc.ABCMeta`
/// with no abstract method left (so `object.__new__` succeeds, as for a `collections.abc.Sequence`
/// subclass), every class of the MRO but `object` a Python class (heap type) with an instance
/// `__dict__` and at most empty `__slots__` (the `collections.abc` mixins declare `()`),
/// `object`'s `__new__` and `__getattribute__`, no `__getattr__` or `__del__`, and `__init__`
/// either `object`'s or a Python function. (A Python `__setattr__`, as a frozen dataclass has, is
/// inlined on writes.)
pub fn is_plain_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(ty) = cls.cast::<PyType>() else { return Ok(false) };
    let type_type = py.get_type::<PyType>();
    let object = py.get_type::<PyAny>();
    let abc_meta = py.import("abc")?.getattr("ABCMeta")?;
    let plain_meta = |t: &Bound<'_, PyAny>| -> PyResult<bool> {
        let meta = t.get_type();
        if meta.is(&type_type) {
            return Ok(true);
        }
        Ok(meta.is(&abc_meta) && t.getattr("__abstractmethods__")?.len()? == 0)
    };
    if !plain_meta(ty.as_any())? || ty.is(&object) {
        return Ok(false);
    }
    let dictoffset: isize = ty.getattr("__dictoffset__")?.extract()?;
    if dictoffset == 0 {
        return Ok(false);
    }
    const HEAPTYPE: u64 = 1 << 9;
    for base in ty.getattr("__mro__")?.try_iter()? {
        let base = base?;
        if base.is(&object) {
            continue;
        }
        let flags: u64 = base.getattr("__flags__")?.extract()?;
        let d = base.getattr("__dict__")?;
        let slots_ok = match d.get_item("__slots__") {
            Ok(slots) => slots.len().map(|n| n == 0).unwrap_or(false) && !slots.is_instance_of::<pyo3::types::PyString>(),
            Err(_) => true,
        };
        if flags & HEAPTYPE == 0 || !(base.get_type().is(&type_type) || base.get_type().is(&abc_meta)) || !slots_ok {
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
    if !ty.getattr("__new__")?.is(object.getattr("__new__")?) || !ty.getattr("__getattribute__")?.is(object.getattr("__getattribute__")?) {
        return Ok(false);
    }
    if ty.hasattr("__getattr__")? || ty.hasattr("__del__")? {
        return Ok(false);
    }
    let init = ty.getattr("__init__")?;
    let setattr = ty.getattr("__setattr__")?;
    let is_function = |f: &Bound<'_, PyAny>| crate::symbolic::variables::type_name(f) == "function";
    Ok((init.is(object.getattr("__init__")?) || is_function(&init)) && (setattr.is(object.getattr("__setattr__")?) || is_function(&setattr)))
}
