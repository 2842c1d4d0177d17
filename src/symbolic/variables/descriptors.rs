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
