//! `functools.partial` objects as trackers (torch's `FunctoolsPartialVariable`).
//!
//! A partial is its function, its positional arguments and its keyword dict
//! (Modules/_functoolsmodule.c, `partial_call`: `func(*args, *call_args, **{**keywords,
//! **call_kwargs})`). One built in the frame is flattened as CPython flattens a partial of an
//! exact partial (`partial_new`); one from the frame keeps its real object for identity and is
//! guarded by TYPE_MATCH, with its function, arguments and keywords read through their sources
//! (`p.func`, `p.args`, `p.keywords`), each guarded there. A partial whose instance `__dict__`
//! is not empty stays an opaque object.

use crate::guards::GuardKind;
use crate::source::Source;
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::variables::VT;
use crate::symbolic::VResult;
use crate::unsupported;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::rc::Rc;
use std::sync::Arc;

/// The tracked state of one `functools.partial`.
pub struct PartialFunction {
    pub func: VT,
    pub args: Vec<VT>,
    /// A dict tracker (or a constant dict): `p.keywords`, read at each call.
    pub keywords: VT,
    /// The real object, for a partial reached from the frame.
    pub obj: Option<Py<PyAny>>,
    pub source: Option<Arc<Source>>,
}

/// `functools.partial`, the type.
pub fn partial_type(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("functools")?.getattr("partial")
}

/// Whether `value` is an exact `functools.partial` with an empty instance dict.
pub fn is_plain_partial(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !value.get_type().is(&partial_type(py)?) {
        return Ok(false);
    }
    let d = value.getattr("__dict__")?;
    Ok(d.len()? == 0)
}

/// Wraps a partial from the frame reached through `source` (see the module doc for guards).
pub fn wrap_partial(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<VT> {
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
    og.add_guard(Some(source.attr("__dict__")), GuardKind::LenMatch(0));
    let func = crate::symbolic::builder::wrap(py, og, &value.getattr("func")?, source.attr("func"))?;
    let args = match crate::symbolic::builder::wrap(py, og, &value.getattr("args")?, source.attr("args"))? {
        VT::Tuple(items) => items.as_ref().clone(),
        VT::Constant(c) => c.bind(py).try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<Vec<_>>>()?,
        other => unsupported!("partial args wrapped as {}", other.describe(py)),
    };
    let keywords = crate::symbolic::builder::wrap(py, og, &value.getattr("keywords")?, source.attr("keywords"))?;
    if !matches!(keywords, VT::Dict(_)) {
        unsupported!("partial keywords with keys that are not strings");
    }
    Ok(VT::Partial(Rc::new(PartialFunction { func, args, keywords, obj: Some(value.clone().unbind()), source: Some(source) })))
}

/// The (name, value) pairs of a partial's keyword dict, in order.
pub fn keyword_items(py: Python<'_>, keywords: &VT) -> VResult<Vec<(String, VT)>> {
    match keywords {
        VT::Dict(d) => d.borrow().items.iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v.clone()))).collect(),
        VT::Constant(c) => {
            let d = c.bind(py).cast::<PyDict>().map_err(|e| crate::symbolic::Unsupported::new(e.to_string()))?.clone();
            d.iter().map(|(k, v)| Ok((k.extract::<String>()?, VT::constant(v.unbind())))).collect()
        }
        other => unsupported!("partial keywords are {}", other.describe(py)),
    }
}
