//! Attribute reads of `torch.nn.Module` objects without Python frames: the guards and the
//! transformed code read `self.weight`, `self.fc1` on every call of a compiled frame.
//!
//! A module keeps its parameters, buffers and submodules in the instance dicts `_parameters`,
//! `_buffers` and `_modules`, so `module.weight` first fails the generic lookup (CPython builds
//! and clears an `AttributeError`) and then runs `nn.Module.__getattr__` as a Python frame:
//! about 0.5 µs a read. [`getattr`] answers such a read from the three dicts directly when that
//! is provably what the slow path would return, and takes `PyObject_GetAttr` otherwise.

use std::ffi::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::eval_frame::ffi::type_lookup;

/// `nn.Module.__getattr__`, `object.__getattribute__` (as found in `object.__dict__`) and the
/// interned names the fast path reads. `None` when torch cannot be imported.
struct ModuleAttrs {
    module_getattr: Py<PyAny>,
    object_getattribute: Py<PyAny>,
    getattr_name: Py<PyString>,
    getattribute_name: Py<PyString>,
    dicts: [Py<PyString>; 3],
}

static MODULE_ATTRS: PyOnceLock<Option<ModuleAttrs>> = PyOnceLock::new();

fn module_attrs(py: Python<'_>) -> Option<&ModuleAttrs> {
    MODULE_ATTRS
        .get_or_init(py, || {
            let module = py.import("torch.nn").ok()?.getattr("Module").ok()?;
            let getattr_name = PyString::intern(py, "__getattr__").unbind();
            let getattribute_name = PyString::intern(py, "__getattribute__").unbind();
            // The raw class-dict entries, as `_PyType_Lookup` returns them.
            let module_getattr = module.getattr("__dict__").ok()?.get_item("__getattr__").ok()?.unbind();
            let object_getattribute = py.get_type::<PyAny>().getattr("__dict__").ok()?.get_item("__getattribute__").ok()?.unbind();
            Some(ModuleAttrs {
                module_getattr,
                object_getattribute,
                getattr_name,
                getattribute_name,
                dicts: ["_parameters", "_buffers", "_modules"].map(|n| PyString::intern(py, n).unbind()),
            })
        })
        .as_ref()
}

/// `getattr(obj, name)` (new reference, or NULL with an exception set), with the fast path for
/// `nn.Module` instances: when `type(obj)` keeps `object.__getattribute__` and
/// `nn.Module.__getattr__` and has no class attribute `name`, the generic lookup returns the
/// instance `__dict__` entry when there is one; otherwise it fails and `nn.Module.__getattr__`
/// runs, which returns the first of `_parameters[name]`, `_buffers[name]`, `_modules[name]`
/// (torch/nn/modules/module.py). This returns the same without running either. Anything else
/// takes `PyObject_GetAttr`.
///
/// # Safety
/// `obj` and `name` are valid object pointers (`name` a str) and the GIL is held.
pub unsafe fn getattr(py: Python<'_>, obj: *mut ffi::PyObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject {
    match module_attr(py, obj, name) {
        Lookup::Found(v) => v,
        Lookup::Absent | Lookup::Unknown => ffi::PyObject_GetAttr(obj, name),
    }
}

/// Whether `hasattr(obj, name)` is provably false for an `nn.Module` instance without running
/// `nn.Module.__getattr__` (which builds and raises an `AttributeError`, ~3 µs): Some(false)
/// when the fast path of [`getattr`] finds the name nowhere, Some(true) when it finds it, None
/// when `hasattr` itself must decide (not a module as [`getattr`] describes, a class attribute).
///
/// # Safety
/// `obj` and `name` are valid object pointers (`name` a str) and the GIL is held.
pub unsafe fn module_hasattr(py: Python<'_>, obj: *mut ffi::PyObject, name: *mut ffi::PyObject) -> Option<bool> {
    match module_attr(py, obj, name) {
        Lookup::Found(v) => {
            ffi::Py_DECREF(v);
            Some(true)
        }
        Lookup::Absent => Some(false),
        Lookup::Unknown => None,
    }
}

/// What the fast path of [`getattr`] found.
enum Lookup {
    /// The attribute (a new reference).
    Found(*mut ffi::PyObject),
    /// The slow path would raise `AttributeError` from `nn.Module.__getattr__`.
    Absent,
    /// The slow path must decide.
    Unknown,
}

/// The fast path of [`getattr`].
unsafe fn module_attr(py: Python<'_>, obj: *mut ffi::PyObject, name: *mut ffi::PyObject) -> Lookup {
    if ffi::PyUnicode_CheckExact(name) == 0 {
        return Lookup::Unknown;
    }
    let Some(attrs) = module_attrs(py) else { return Lookup::Unknown };
    let tp = ffi::Py_TYPE(obj);
    if type_lookup(tp, attrs.getattr_name.as_ptr()) != attrs.module_getattr.as_ptr()
        || type_lookup(tp, attrs.getattribute_name.as_ptr()) != attrs.object_getattribute.as_ptr()
        || !type_lookup(tp, name).is_null()
    {
        return Lookup::Unknown;
    }
    let dict = ffi::PyObject_GenericGetDict(obj, std::ptr::null_mut::<c_void>());
    if dict.is_null() {
        ffi::PyErr_Clear();
        return Lookup::Unknown;
    }
    let dict = Bound::from_owned_ptr(py, dict);
    if ffi::PyDict_CheckExact(dict.as_ptr()) == 0 {
        return Lookup::Unknown;
    }
    // In the instance dict: with no class attribute of that name (checked above), the generic
    // lookup returns the entry (`_PyObject_GenericGetAttrWithDict`: no descriptor to prefer).
    let own = ffi::PyDict_GetItemWithError(dict.as_ptr(), name);
    if !own.is_null() {
        ffi::Py_INCREF(own);
        return Lookup::Found(own);
    }
    if !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        return Lookup::Unknown;
    }
    for key in &attrs.dicts {
        let d = ffi::PyDict_GetItemWithError(dict.as_ptr(), key.as_ptr());
        if d.is_null() {
            if !ffi::PyErr_Occurred().is_null() {
                ffi::PyErr_Clear();
                return Lookup::Unknown;
            }
            continue;
        }
        // `name in d` and `d[name]` on an exact dict (a subclass may override either).
        if ffi::PyDict_CheckExact(d) == 0 {
            return Lookup::Unknown;
        }
        let v = ffi::PyDict_GetItemWithError(d, name);
        if !v.is_null() {
            ffi::Py_INCREF(v);
            return Lookup::Found(v);
        }
        if !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            return Lookup::Unknown;
        }
    }
    // Not found anywhere: `nn.Module.__getattr__` raises `AttributeError`.
    Lookup::Absent
}

/// `getattr(obj, name)` for transformed code (the read of a `Source::Attr`): the same result
/// and exceptions as `obj.name`, without a Python frame for `nn.Module` parameters, buffers
/// and submodules (see [`getattr`]).
#[pyfunction]
pub fn load_attr<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    unsafe { Bound::from_owned_ptr_or_err(py, getattr(py, obj.as_ptr(), name.as_ptr())) }
}
