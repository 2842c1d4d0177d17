//! Exception objects of the user's own classes, made and read in the trace (torch's
//! `ExceptionVariable` for user classes).
//!
//! Note [user exception objects]: an exception the trace makes is a real object held as a
//! constant (`raise KeyError(k)`, `raise ShapeError("...")`), so that `except` clauses test its
//! real type and the handler reads eager's `args`. Two things about a class of the user's run
//! Python code, and both must run in the trace, on every call, not once while tracing:
//! - its `__init__` (`class ConfigError(Exception): def __init__(self, key): self.key = key`):
//!   `construct_exception` makes the object with `BaseException.__new__(cls, *args)` (a C slot:
//!   `BaseException_new`, Objects/exceptions.c, stores every positional argument as `args`) and
//!   inlines `__init__` on it. The object is new and only the trace holds it, so its attribute
//!   writes are made on it for real (`store_exception_attr`), and only immutable constants are
//!   written: the object outlives the trace as a constant.
//! - the Python attributes of its class read on the object (a `property`, a method called in the
//!   handler, `__str__` is left to Python): `user_exception_attr` inlines them on the object,
//!   read from the class through its source, where the plain `getattr` would have run them once
//!   at trace time (their side effects then lost from the second call on: audit 53).
//!
//! Anything else (a Python `__new__`, a metaclass, a custom `__getattr__` / `__getattribute__` /
//! `__setattr__`, a non-constant argument or attribute, a class without a source to guard) is
//! left to Python, a graph break as before.

use crate::graph_break;
use crate::source::ItemKey;
use crate::symbolic::builder::wrap;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::user_defined::{has_generic_getattribute, has_generic_setattr, is_data_descriptor, python_new, static_type_lookup};
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::{Unsupported, VResult};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::rc::Rc;

/// The `__module__` of a class ("builtins" for the interpreter's own).
fn module_of(o: &Bound<'_, PyAny>) -> String {
    o.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default()
}


/// The class of `e` when `e` is an exception object of a user's class (its `__module__` is not
/// `builtins`): its Python attributes run in the trace (Note [user exception objects]).
pub(crate) fn user_exception_type<'py>(e: &Bound<'py, PyAny>) -> Option<Bound<'py, PyType>> {
    if !e.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        return None;
    }
    let ty = e.get_type();
    (module_of(ty.as_any()) != "builtins").then_some(ty)
}

/// The text of exception `e` for a log line or a break reason, without running Python code:
/// `str(e)` for a builtin class's (C code), the repr of its `args` for a user's class, whose
/// `__str__` may be Python with effects (it runs in the trace where the program calls it).
pub(crate) fn exception_text(e: &Bound<'_, PyAny>) -> String {
    match user_exception_type(e) {
        Some(_) => e.getattr("args").and_then(|a| a.repr()).map(|r| r.to_string()).unwrap_or_default(),
        None => e.str().map(|s| s.to_string()).unwrap_or_default(),
    }
}

/// Whether exception class `ty` is one whose objects the trace may make (Note [user exception
/// objects]): every dunder its own classes (those outside `builtins` on its MRO) define is one
/// the trace runs as Python when the program uses it (`__init__`, `__str__`, `__repr__`,
/// `__format__`) or one that is not code (`__module__`, `__doc__`, ...). An operator, `__eq__`,
/// `__hash__`, `__bool__`, `__len__`, `__getattr__` or any other dunder would be run by a folded
/// operation at trace time, once, instead of at each call: such classes are left to Python.
pub(crate) fn exception_class_traceable(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    const ALLOWED: [&str; 13] = [
        "__init__", "__str__", "__repr__", "__format__", "__module__", "__qualname__", "__doc__", "__dict__",
        "__weakref__", "__annotations__", "__firstlineno__", "__static_attributes__", "__slotnames__",
    ];
    for base in ty.getattr("__mro__")?.try_iter()? {
        let base = base?;
        if module_of(&base) == "builtins" {
            continue;
        }
        for key in base.getattr("__dict__")?.try_iter()? {
            let key = key?;
            let Ok(k) = key.extract::<String>() else { return Ok(false) };
            if k.starts_with("__") && k.ends_with("__") && !ALLOWED.contains(&k.as_str()) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

impl<'a> InstructionTranslator<'a> {
    /// The real values of `args` and `kwargs` when every one is an immutable literal (a constant
    /// or a tuple of them): an exception object holds its arguments themselves, so a list made
    /// into a copy would lose the handler's `e.args[0].append(...)` (audit 52, S3). `None`
    /// otherwise.
    #[allow(clippy::type_complexity)]
    fn immutable_literal_args<'py>(&self, py: Python<'py>, args: &[VT], kwargs: &[(String, VT)]) -> PyResult<Option<(Vec<Bound<'py, PyAny>>, Bound<'py, PyDict>)>> {
        let immutable = |a: &VT| matches!(a, VT::Constant(_) | VT::Tuple(_));
        if !args.iter().all(immutable) || !kwargs.iter().all(|(_, v)| immutable(v)) {
            return Ok(None);
        }
        let Some(vals) = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>() else { return Ok(None) };
        let kw = PyDict::new(py);
        for (name, v) in kwargs {
            let Some(v) = self.literal_value(py, v) else { return Ok(None) };
            kw.set_item(name, v)?;
        }
        Ok(Some((vals, kw)))
    }

    /// `cls(*args, **kwargs)` for an exception class of the user's with a Python `__init__`
    /// (Note [user exception objects]): the new object as a constant, `__init__` inlined on it.
    /// `None` when the class or the arguments are not of that kind (the caller goes on).
    pub(crate) fn construct_exception(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let c = cls.bind(py);
        let Ok(ty) = c.cast::<PyType>() else { return Ok(None) };
        if !ty.get_type().is(py.get_type::<PyType>())
            || !ty.is_subclass_of::<pyo3::exceptions::PyBaseException>()?
            || crate::symbolic::translator::traced_exception_base(c).is_none()
            || python_new(ty)?.is_some()
            || !exception_class_traceable(ty)?
        {
            return Ok(None);
        }
        let Some((k, init)) = static_type_lookup(ty, "__init__")? else { return Ok(None) };
        if type_name(&init) != "function" {
            return Ok(None);
        }
        let Some(cls_source) = self.og.class_sources.get(&(c.as_ptr() as usize)).cloned() else { return Ok(None) };
        let Some((vals, kw)) = self.immutable_literal_args(py, args, kwargs)? else { return Ok(None) };
        // `type_call` (Objects/typeobject.c): `tp_new(cls, args, kwargs)`, then `tp_init`.
        let mut new_args = vec![c.clone()];
        new_args.extend(vals);
        let obj = c.getattr("__new__")?.call(PyTuple::new(py, new_args)?, Some(&kw)).map_err(|e| Unsupported::folded(py, e))?;
        self.og.fresh_exceptions.push(obj.clone().unbind());
        let made = VT::constant(obj.unbind());
        let init_source = cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str("__init__".into()));
        let func = wrap(py, self.og, &init, init_source)?;
        let mut all = vec![made.clone()];
        all.extend(args.iter().cloned());
        let r = self.call(py, &func, all, kwargs.to_vec())?;
        if !r.as_constant(py).is_some_and(|v| v.is_none()) {
            graph_break!(UnsupportedCall, "__init__ of {} returned {} (TypeError)", crate::symbolic::variables::qualname(c), r.describe(py));
        }
        Ok(Some(made))
    }

    /// `e.name = v` on an exception object `construct_exception` made (Note [user exception
    /// objects]): written on the object for real. `false` for any other object.
    pub(crate) fn store_exception_attr(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>, name: &str, v: &VT) -> VResult<bool> {
        if !self.og.fresh_exceptions.iter().any(|e| e.is(&**c)) {
            return Ok(false);
        }
        let e = c.bind(py);
        let ty = e.get_type();
        if !has_generic_setattr(py, &ty)? {
            graph_break!(SideEffect, "attribute write {}.{name} (custom __setattr__)", type_name(e));
        }
        // A Python data descriptor (a property's setter) would run at trace time; the C ones
        // of BaseException (`args`, `__cause__`, ...) are eager's own code.
        if let Some((_, attr)) = static_type_lookup(&ty, name)? {
            if is_data_descriptor(&attr)? && !matches!(type_name(&attr).as_str(), "getset_descriptor" | "member_descriptor") {
                graph_break!(SideEffect, "attribute write {}.{name} through a {}", type_name(e), type_name(&attr));
            }
        }
        let value = match v {
            VT::Constant(_) | VT::Tuple(_) => self.literal_value(py, v),
            _ => None,
        };
        let Some(value) = value else {
            graph_break!(SideEffect, "attribute write {}.{name} of {} (an exception object holds constants only)", type_name(e), v.describe(py));
        };
        e.setattr(name, value).map_err(|err| Unsupported::folded(py, err))?;
        Ok(true)
    }

    /// `e.name` on an exception object of a user's class (Note [user exception objects]) when
    /// the class's attribute is Python code or a class attribute: a method bound to `e`, a
    /// property's getter inlined, a class attribute read through its source. `None` where the
    /// plain lookup is eager's own (builtins' attributes, the instance dict, a missing one).
    pub(crate) fn user_exception_attr(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>, name: &str) -> VResult<Option<VT>> {
        let e = c.bind(py);
        let Some(ty) = user_exception_type(e) else { return Ok(None) };
        if !has_generic_getattribute(py, &ty)? || static_type_lookup(&ty, "__getattr__")?.is_some() {
            graph_break!(UnsupportedOperation, "attribute {name} of a {} object (custom __getattr__ or __getattribute__)", type_name(e));
        }
        let Some((k, attr)) = static_type_lookup(&ty, name)? else { return Ok(None) };
        let owner = ty.getattr("__mro__")?.get_item(k)?;
        if module_of(&owner) == "builtins" {
            return Ok(None);
        }
        let data = is_data_descriptor(&attr)?;
        if !data && crate::guards::generic_getattr(e, "__dict__").is_some_and(|d| d.contains(name).unwrap_or(false)) {
            return Ok(None);
        }
        let Some(cls_source) = self.og.class_sources.get(&(ty.as_ptr() as usize)).cloned() else {
            graph_break!(UnsupportedOperation, "attribute {name} of a {} object (its class has no source to guard)", type_name(e));
        };
        let source = cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()));
        let this = VT::Constant(c.clone());
        match type_name(&attr).as_str() {
            "function" => {
                let f = wrap(py, self.og, &attr, source)?;
                Ok(Some(VT::Method { func: Box::new(f), self_: Box::new(this) }))
            }
            "property" => {
                let fget = attr.getattr("fget")?;
                if fget.is_none() {
                    return Ok(None);
                }
                let f = wrap(py, self.og, &fget, source.attr("fget"))?;
                Ok(Some(self.call(py, &f, vec![this], vec![])?))
            }
            "staticmethod" => Ok(Some(wrap(py, self.og, &attr.getattr("__func__")?, source.attr("__func__"))?)),
            "classmethod" => {
                let f = wrap(py, self.og, &attr.getattr("__func__")?, source.attr("__func__"))?;
                Ok(Some(VT::Method { func: Box::new(f), self_: Box::new(VT::Class(Rc::new(ty.clone().into_any().unbind()))) }))
            }
            _ if data || attr.get_type().hasattr("__get__")? => {
                graph_break!(UnsupportedOperation, "attribute {name} of a {} object (a {} on its class)", type_name(e), type_name(&attr));
            }
            _ => Ok(Some(wrap(py, self.og, &attr, source)?)),
        }
    }

    /// `super().name` inside a method of an exception object `construct_exception` made: the
    /// class attribute after `cls` on its MRO, a Python function bound to it (read through the
    /// class's source) or a C method of a builtin exception class (`BaseException.__init__`,
    /// run by `call_exception_slot`). `None` for any other object.
    pub(crate) fn exception_super_attr(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>, cls: &Bound<'_, PyAny>, name: &str) -> VResult<Option<VT>> {
        if !self.og.fresh_exceptions.iter().any(|e| e.is(&**c)) {
            return Ok(None);
        }
        let ty = c.bind(py).get_type();
        let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
        let Some(start) = mro.iter().position(|k| k.is(cls)) else { return Ok(None) };
        for k in start + 1..mro.len() {
            let base = mro.get_item(k)?;
            let d = base.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            if module_of(&base) == "builtins" {
                if !matches!(type_name(&ca).as_str(), "wrapper_descriptor" | "method_descriptor") {
                    return Ok(None);
                }
                return Ok(Some(VT::Method { func: Box::new(VT::Builtin(Rc::new(ca.unbind()))), self_: Box::new(VT::Constant(c.clone())) }));
            }
            if type_name(&ca) != "function" {
                return Ok(None);
            }
            let Some(cls_source) = self.og.class_sources.get(&(ty.as_ptr() as usize)).cloned() else { return Ok(None) };
            let source = cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()));
            let f = wrap(py, self.og, &ca, source)?;
            return Ok(Some(VT::Method { func: Box::new(f), self_: Box::new(VT::Constant(c.clone())) }));
        }
        Ok(None)
    }

    /// `BaseException.__init__(e, *args)` and the other C methods of a builtin exception class
    /// called on an exception object `construct_exception` made, with constant arguments: run
    /// on it for real (they act on the object alone). `None` for anything else.
    pub(crate) fn call_exception_slot(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>, method: &Bound<'_, PyAny>, owner: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !self.og.fresh_exceptions.iter().any(|e| e.is(&**c)) || module_of(owner) != "builtins" {
            return Ok(None);
        }
        let Some((mut vals, kw)) = self.immutable_literal_args(py, args, kwargs)? else { return Ok(None) };
        vals.insert(0, c.bind(py).clone());
        let r = method.call(PyTuple::new(py, vals)?, Some(&kw)).map_err(|e| Unsupported::folded(py, e))?;
        Ok(Some(VT::constant(r.unbind())))
    }

    /// `type(e).name` bound to `e` when it is a Python function of a user's exception class
    /// (`__str__`, `__eq__`, `__len__`, ...: `python_dunder`), read through the class's source.
    /// `None` when the class has no Python function of that name or `e` is not such an object.
    pub(crate) fn user_exception_dunder(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>, name: &str) -> VResult<Option<VT>> {
        let e = c.bind(py);
        let Some(ty) = user_exception_type(e) else { return Ok(None) };
        let Some((k, f)) = static_type_lookup(&ty, name)? else { return Ok(None) };
        if type_name(&f) != "function" {
            return Ok(None);
        }
        let Some(cls_source) = self.og.class_sources.get(&(ty.as_ptr() as usize)).cloned() else {
            graph_break!(UnsupportedOperation, "{name} of a {} object (its class has no source to guard)", type_name(e));
        };
        let source = cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()));
        let func = wrap(py, self.og, &f, source)?;
        Ok(Some(VT::Method { func: Box::new(func), self_: Box::new(VT::Constant(c.clone())) }))
    }
}
