//! Attribute writes and reads that run Python code of the object's class: a Python
//! `__setattr__`, a property's setter, a data descriptor's `__set__` / `__get__`
//! (Objects/object.c, `PyObject_GenericSetAttr`; Objects/typeobject.c, `slot_tp_setattro`).
//!
//! Note [traced descriptors]: `o.name = v` on an object from the frame whose class defines
//! `__setattr__` in Python is the call `type(o).__setattr__(o, name, v)`, inlined (its
//! `object.__setattr__` / `super().__setattr__` writes are recorded as generic writes); with
//! `object.__setattr__`, a data descriptor found on the class takes the write: a property's
//! `fset(o, v)` or `type(d).__set__(d, o, v)`, inlined. Reads of a data descriptor with a Python
//! `__get__` are `type(d).__get__(d, o, type(o))`, inlined. Every function is read through the
//! class's source and guarded there, so redefining it recompiles. A property without a setter,
//! C descriptors (slots, `__slots__` members) and modules keep their break.
//!
//! Note [user code at class lookups]: reading an attribute through a class (`A.d`) or a module
//! can run user code too, and eager runs it at every call: a descriptor's `__get__(None, A)`, a
//! metaclass `property` or data descriptor, a metaclass `__getattr__`, a module's PEP 562
//! `__getattr__`, a module subclass's property (`torch.backends.cudnn.deterministic`, a
//! `ContextProp`). Running it once at trace time and baking the answer in loses its side effects
//! and its later answers. So the Python ones are inlined (`class_getattr_user_code`: read through
//! the class's `__mro__[k].__dict__`, which runs no descriptor, and guarded there), the
//! `__getattr__` hooks are graph breaks (the attribute then is read by Python at each call), and
//! torch's module properties are read and guarded on their value (`module_attr_source`), as
//! `torch.backends.cuda.matmul.allow_tf32` already was. `isinstance` / `issubclass` with a
//! metaclass `__instancecheck__` / `__subclasscheck__` in Python inline the hook, and an object
//! whose class defines `__class__` (a property) breaks (`builtin.rs`).

use crate::source::Source;
use crate::symbolic::builder::wrap;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::user_defined::{class_attr_source, is_data_descriptor, static_type_lookup};
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::VResult;
use pyo3::prelude::*;
use pyo3::types::PyType;
use std::sync::Arc;

/// Where attribute `name` of the class at MRO index `k` is read from, for an object reached
/// through `source` (an object from the frame) or made in the trace (`cls_source`).
fn attr_source(obj: &VT, source: &Arc<Source>, k: usize, name: &str) -> Arc<Source> {
    match obj {
        VT::UserObject(o) => o.class_attr_source(k, name),
        _ => class_attr_source(source, k, name),
    }
}

/// Note [properties without a setter or deleter]: `o.p = v` (or `del o.p`) where `p` is a
/// property without `fset` (`fdel`) raises AttributeError before anything runs
/// (Objects/descrobject.c, `property_descr_set`), with a message naming the property and the
/// qualified name of `type(o)`. The trace raises it, so a `try` around the write takes its
/// handler there (audit 53, T6: the write was a break, and inside a `try` the frame ran with no
/// graph). The exception is eager's own: the property's `__set__` / `__delete__` run on a
/// stand-in object of a fresh class with the same qualified name, which only the message reads.
fn property_refusal(py: Python<'_>, prop: &Bound<'_, PyAny>, ty: &Bound<'_, PyType>, deleting: bool) -> crate::symbolic::Unsupported {
    let made = (|| -> PyResult<PyErr> {
        let qualname = ty.getattr("__qualname__")?;
        let standin_type = py.get_type::<PyType>().call1((qualname, pyo3::types::PyTuple::empty(py), pyo3::types::PyDict::new(py)))?;
        let standin = standin_type.call0()?;
        let r = if deleting { prop.call_method1("__delete__", (standin,)) } else { prop.call_method1("__set__", (standin, py.None())) };
        Ok(match r {
            Err(e) => e,
            Ok(_) => pyo3::exceptions::PyRuntimeError::new_err("property without a setter accepted a write"),
        })
    })();
    match made {
        Ok(e) => crate::symbolic::Unsupported::folded(py, e),
        Err(e) => e.into(),
    }
}

impl<'a> InstructionTranslator<'a> {
    /// `obj.name = v` through Python code of `obj`'s class (Note [traced descriptors]); false
    /// when no such code takes the write (the caller's generic path decides). `source`: the
    /// object's source (for an object from the frame; ignored for a `UserObject`).
    pub(crate) fn traced_setattr(&mut self, py: Python<'_>, obj: &VT, ty: &Bound<'_, PyType>, source: &Arc<Source>, name: &str, v: VT) -> VResult<bool> {
        let object_setattr = py.get_type::<PyAny>().getattr("__setattr__")?;
        if !matches!(obj, VT::UserObject(_)) {
            if let Some((k, f)) = static_type_lookup(ty, "__setattr__")? {
                if type_name(&f) == "function" {
                    let func = wrap(py, self.og, &f, attr_source(obj, source, k, "__setattr__"))?;
                    let m = VT::Method { func: Box::new(func), self_: Box::new(obj.clone()) };
                    let key = VT::constant(pyo3::types::PyString::new(py, name).into_any().unbind());
                    self.call(py, &m, vec![key, v], vec![])?;
                    return Ok(true);
                }
            }
        }
        if !ty.getattr("__setattr__")?.is(&object_setattr) {
            return Ok(false);
        }
        let Some((k, ca)) = static_type_lookup(ty, name)? else { return Ok(false) };
        let src = attr_source(obj, source, k, name);
        if type_name(&ca) == "property" {
            let fset = ca.getattr("fset")?;
            if fset.is_none() {
                // Note [properties without a setter or deleter].
                return Err(property_refusal(py, &ca, ty, false));
            }
            if type_name(&fset) != "function" {
                return Ok(false);
            }
            let f = wrap(py, self.og, &fset, src.attr("fset"))?;
            self.call(py, &f, vec![obj.clone(), v], vec![])?;
            return Ok(true);
        }
        if !is_data_descriptor(&ca)? {
            return Ok(false);
        }
        let dty = ca.get_type();
        let Some((k2, set_fn)) = static_type_lookup(&dty, "__set__")? else { return Ok(false) };
        if type_name(&set_fn) != "function" {
            return Ok(false);
        }
        let descr = wrap(py, self.og, &ca, src.clone())?;
        let f = wrap(py, self.og, &set_fn, class_attr_source(&src, k2, "__set__"))?;
        self.call(py, &f, vec![descr, obj.clone(), v], vec![])?;
        Ok(true)
    }

    /// `obj.name` where `type(obj)` has a data descriptor `name` whose `__get__` is a Python
    /// function (not a property, which the generic lookup already runs): `type(d).__get__(d,
    /// obj, type(obj))`, inlined. `None` otherwise.
    pub(crate) fn traced_descriptor_get(&mut self, py: Python<'_>, obj: &VT, ty: &Bound<'_, PyType>, source: &Arc<Source>, name: &str) -> VResult<Option<VT>> {
        if !ty.getattr("__getattribute__")?.is(&py.get_type::<PyAny>().getattr("__getattribute__")?) {
            return Ok(None);
        }
        let Some((k, ca)) = static_type_lookup(ty, name)? else { return Ok(None) };
        if matches!(type_name(&ca).as_str(), "property" | "function" | "classmethod" | "staticmethod") || !is_data_descriptor(&ca)? {
            return Ok(None);
        }
        let dty = ca.get_type();
        let Some((k2, get_fn)) = static_type_lookup(&dty, "__get__")? else { return Ok(None) };
        if type_name(&get_fn) != "function" {
            return Ok(None);
        }
        let src = attr_source(obj, source, k, name);
        let descr = wrap(py, self.og, &ca, src.clone())?;
        let f = wrap(py, self.og, &get_fn, class_attr_source(&src, k2, "__get__"))?;
        let owner = match obj {
            VT::UserObject(o) => VT::Class(std::rc::Rc::new(o.cls.clone_ref(py))),
            _ => wrap(py, self.og, ty.as_any(), source.generic_attr("__class__"))?,
        };
        self.call(py, &f, vec![descr, obj.clone(), owner], vec![]).map(Some)
    }
}

impl<'a> InstructionTranslator<'a> {
    /// Note [non-data descriptors]: `obj.name` where the instance has no such attribute and the
    /// class's attribute is a non-data descriptor (a type with `__get__` but neither `__set__`
    /// nor `__delete__`) calls `type(d).__get__(d, obj, type(obj))` (Objects/object.c,
    /// `_PyObject_GenericGetAttrWithDict`). A Python `__get__` is inlined, so its effects and
    /// answer are traced; `functools.cached_property`'s runs as
    /// `dynamo._polyfills.cached_property_get` (its code without the 3.11 lock), so the first
    /// read computes and stores the value in the instance's `__dict__` (an attribute write of
    /// the trace) and later reads find it there. `None`: the descriptor's `__get__` is C code
    /// (the caller decides).
    ///
    /// `ca`: the descriptor, found on the class at `ca_src`; `owner`: the tracker of
    /// `type(obj)`.
    pub(crate) fn nondata_descriptor_get(&mut self, py: Python<'_>, obj: &VT, ca: &Bound<'_, PyAny>, ca_src: Arc<Source>, owner: VT) -> VResult<Option<VT>> {
        let dty = ca.get_type();
        if dty.is(py.import("functools")?.getattr("cached_property")?) {
            let name = "cached_property_get";
            let f = py.import("dynamo._polyfills")?.getattr(name)?;
            let func = wrap(py, self.og, &f, Arc::new(Source::Module { name: "dynamo._polyfills".into() }).attr(name))?;
            let descr = wrap(py, self.og, ca, ca_src)?;
            return self.call(py, &func, vec![descr, obj.clone(), owner], vec![]).map(Some);
        }
        let Some((k, get_fn)) = static_type_lookup(&dty, "__get__")? else { return Ok(None) };
        if type_name(&get_fn) != "function" {
            return Ok(None);
        }
        let descr = wrap(py, self.og, ca, ca_src.clone())?;
        let f = wrap(py, self.og, &get_fn, class_attr_source(&ca_src, k, "__get__"))?;
        self.call(py, &f, vec![descr, obj.clone(), owner], vec![]).map(Some)
    }
}

/// Whether `f`, a function found on a descriptor's or metaclass's type, is user code: a Python
/// function outside the modules whose descriptors are pure lookups (torch's own, `enum`'s member
/// properties, `abc`, `typing`, `functools.cached_property` read through the class).
pub(crate) fn is_user_code(f: &Bound<'_, PyAny>) -> bool {
    if type_name(f) != "function" {
        return false;
    }
    let module = f.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    !(module == "torch" || module.starts_with("torch.") || matches!(module.as_str(), "enum" | "abc" | "_py_abc" | "typing" | "functools" | "types" | "dataclasses"))
}

impl<'a> InstructionTranslator<'a> {
    /// `cls.name` where the lookup runs user code (Note [user code at class lookups]): a data
    /// descriptor of the metaclass (a metaclass `property`: `fget(cls)`; else
    /// `type(d).__get__(d, cls, type(cls))`), or a descriptor found on the class whose type's
    /// `__get__` is a Python function (`type(d).__get__(d, None, cls)`), inlined so that its side
    /// effects replay and its answer is traced, not baked in. A name found nowhere on a class
    /// whose metaclass has a Python `__getattr__` is a graph break (eager calls it each time).
    /// `None`: the lookup runs no user code (the caller reads it). `source`: the class's source.
    ///
    /// Errors: a graph break when the class has no source (nothing to guard the functions on).
    pub(crate) fn class_getattr_user_code(&mut self, py: Python<'_>, cls_vt: &VT, cls: &Bound<'_, PyType>, source: Option<Arc<Source>>, name: &str) -> VResult<Option<VT>> {
        let meta = cls.get_type();
        let type_type = py.get_type::<PyType>();
        if let Some((k, ma)) = static_type_lookup(&meta, name)? {
            if !meta.is(&type_type) && is_data_descriptor(&ma)? {
                let (f, args) = if type_name(&ma) == "property" {
                    (ma.getattr("fget")?, vec![cls_vt.clone()])
                } else {
                    match static_type_lookup(&ma.get_type(), "__get__")? {
                        Some((_, g)) => (g, vec![VT::constant(ma.clone().unbind()), cls_vt.clone(), VT::Class(std::rc::Rc::new(meta.clone().into_any().unbind()))]),
                        None => return Ok(None),
                    }
                };
                if !is_user_code(&f) {
                    return Ok(None);
                }
                let Some(src) = source else { crate::graph_break!(MissingSource, "metaclass descriptor '{name}' of a class without a source") };
                let descr_src = class_attr_source(&src, k, name);
                let args = if type_name(&ma) == "property" { args } else {
                    let mut a = args;
                    a[0] = wrap(py, self.og, &ma, descr_src.clone())?;
                    a
                };
                let fsrc = if type_name(&ma) == "property" { descr_src.attr("fget") } else { descr_src.generic_attr("__class__").attr("__get__") };
                let func = wrap(py, self.og, &f, fsrc)?;
                return self.call(py, &func, args, vec![]).map(Some);
            }
        }
        let mro = cls.getattr("__mro__")?;
        for (k, base) in mro.try_iter()?.enumerate() {
            let d = base?.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            let Some((_, get_fn)) = static_type_lookup(&ca.get_type(), "__get__")? else { return Ok(None) };
            if !is_user_code(&get_fn) {
                return Ok(None);
            }
            let Some(src) = source else { crate::graph_break!(MissingSource, "descriptor '{name}' of a class without a source") };
            let descr_src = src.attr("__mro__").item(crate::source::ItemKey::Int(k as i64)).attr("__dict__").item(crate::source::ItemKey::Str(name.to_string()));
            let descr = wrap(py, self.og, &ca, descr_src.clone())?;
            let func = wrap(py, self.og, &get_fn, descr_src.generic_attr("__class__").attr("__get__"))?;
            let none = VT::constant(py.None());
            return self.call(py, &func, vec![descr, none, cls_vt.clone()], vec![]).map(Some);
        }
        if static_type_lookup(&meta, name)?.is_none() {
            if let Some((_, g)) = static_type_lookup(&meta, "__getattr__")? {
                if is_user_code(&g) {
                    crate::graph_break!(UntracedValue, "class attribute '{name}' answered by the metaclass's __getattr__");
                }
            }
        }
        Ok(None)
    }

    /// `del o.name` on a new user object where the class's `name` is a property: its deleter
    /// inlined, or the AttributeError of a property without one (Note [properties without a
    /// setter or deleter]). `false` for any other class attribute.
    pub(crate) fn property_delete(&mut self, py: Python<'_>, vt: &VT, o: &crate::symbolic::variables::user_defined::UserObject, ty: &Bound<'_, PyType>, name: &str) -> VResult<bool> {
        let Some((k, ca)) = static_type_lookup(ty, name)? else { return Ok(false) };
        if type_name(&ca) != "property" {
            return Ok(false);
        }
        let fdel = ca.getattr("fdel")?;
        if fdel.is_none() {
            return Err(property_refusal(py, &ca, ty, true));
        }
        if type_name(&fdel) != "function" {
            return Ok(false);
        }
        let f = wrap(py, self.og, &fdel, o.class_attr_source(k, name).attr("fdel"))?;
        self.call(py, &f, vec![vt.clone()], vec![])?;
        Ok(true)
    }
}
