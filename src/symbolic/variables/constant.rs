//! Constants (torch's `ConstantVariable`): immutable Python values (None, bools, numbers,
//! strings, bytes, tuples of constants) held as `VT::Constant`; operations on them are folded
//! by running the real operation.

use crate::symbolic::builder::is_literal;
use crate::symbolic::variables::VT;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::dicts::DictView;

impl<'a> InstructionTranslator<'a> {
    /// `literal_value`, and for a dict tracker of literal values a fresh dict of the same keys
    /// and values, in order: for calls that only read a dict (`str.format_map`, `"%(a)s" % d`).
    /// A dict that contains itself (`d[2] = d`) is not a literal: None, never an endless copy.
    pub(crate) fn literal_value_or_dict<'py>(&self, py: Python<'py>, v: &VT) -> Option<Bound<'py, PyAny>> {
        self.literal_value_or_dict_in(py, v, &mut Vec::new())
    }

    fn literal_value_or_dict_in<'py>(&self, py: Python<'py>, v: &VT, open: &mut Vec<usize>) -> Option<Bound<'py, PyAny>> {
        match v {
            VT::Dict(d) => {
                let ptr = std::rc::Rc::as_ptr(d) as usize;
                if open.contains(&ptr) {
                    return None;
                }
                open.push(ptr);
                let real = PyDict::new(py);
                for (k, v) in &d.borrow().items {
                    // Note [tensor dict keys]: a traced key is no literal.
                    if crate::symbolic::variables::dicts::is_traced_key(k.bind(py)) {
                        return None;
                    }
                    // A symbolic number is its value, specialized, as in a list or tuple
                    // (`constants_of`): `str({'k': f})` of a float argument.
                    let value = match v {
                        VT::SymNum(_) => v.as_constant(py)?,
                        _ => self.literal_value_or_dict_in(py, v, open)?,
                    };
                    real.set_item(k.bind(py), value).ok()?;
                }
                open.pop();
                Some(real.into_any())
            }
            _ => self.literal_value(py, v),
        }
    }

    /// [`Self::literal_value`] for a call that only reads its arguments (a pure builtin, a
    /// method of a literal, `str`/`repr`): a set built in the trace is passed as its private
    /// real set itself, not a copy, since a copy may lay its members out in another table
    /// order (`set_merge` re-inserts into a table of another size) and so iterate, print and
    /// join them in another order than eager's set.
    pub(crate) fn literal_view<'py>(&self, py: Python<'py>, v: &VT) -> Option<Bound<'py, PyAny>> {
        match v {
            VT::Set(set) => {
                let real = set.borrow().bind(py).clone();
                let members_literal = real.try_iter().map(|it| it.flatten().all(|m| is_literal(py, &m))).unwrap_or(false);
                members_literal.then_some(real)
            }
            _ => self.literal_value(py, v),
        }
    }

    /// The real arguments of a call made at trace time that takes literals only
    /// ([`Self::literal_value`]): the positional values and a dict of the keyword ones. A graph
    /// break naming `what` (and the keyword) when one is not a literal.
    pub(crate) fn literal_call_args<'py>(
        &self,
        py: Python<'py>,
        args: &[VT],
        kwargs: &[(String, VT)],
        what: &str,
    ) -> crate::symbolic::VResult<(Vec<Bound<'py, PyAny>>, Bound<'py, PyDict>)> {
        let Some(vals) = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>() else {
            crate::graph_break!(UnsupportedCall, "{what} with non-literal arguments");
        };
        let kw = PyDict::new(py);
        for (k, v) in kwargs {
            match self.literal_value(py, v) {
                Some(v) => kw.set_item(k, v)?,
                None => crate::graph_break!(UnsupportedCall, "{what} with a non-literal argument '{k}'"),
            }
        }
        Ok((vals, kw))
    }

    /// A fresh Python value equal to `v` when `v` is a literal or a container of literals built
    /// during tracing.
    pub(crate) fn literal_value<'py>(&self, py: Python<'py>, v: &VT) -> Option<Bound<'py, PyAny>> {
        match v {
            VT::Constant(c) => Some(c.bind(py).clone()),
            VT::Tuple(items) => PyTuple::new(py, constants_of(py, items)?).ok().map(|t| t.into_any()),
            VT::List(l) => PyList::new(py, constants_of(py, &l.borrow().items)?).ok().map(|l| l.into_any()),
            VT::Set(set) => set.borrow().bind(py).call_method0("copy").ok().filter(|c| c.try_iter().map(|it| it.flatten().all(|m| is_literal(py, &m))).unwrap_or(false)),
            VT::DictView { dict, view, .. } => {
                // A view of a fresh dict with the same keys (and values, when they matter).
                let real = PyDict::new(py);
                for (k, v) in &dict.borrow().items {
                    if crate::symbolic::variables::dicts::is_traced_key(k.bind(py)) {
                        return None;
                    }
                    let v = match view {
                        DictView::Keys => py.None().into_bound(py),
                        _ => v.as_constant(py)?,
                    };
                    real.set_item(k.bind(py), v).ok()?;
                }
                real.call_method0(view.method()).ok()
            }
            _ => None,
        }
    }
}

/// Whether `c` is None, a bool, a number, a string or bytes: a value whose `__eq__` answers
/// NotImplemented for containers.
pub(crate) fn is_scalar_constant(c: &Bound<'_, PyAny>) -> bool {
    c.is_none()
        || c.is_instance_of::<pyo3::types::PyBool>()
        || c.is_instance_of::<pyo3::types::PyInt>()
        || c.is_instance_of::<pyo3::types::PyFloat>()
        || c.is_instance_of::<PyString>()
        || c.is_instance_of::<pyo3::types::PyBytes>()
}

/// The Python values of trackers that are all constants.
pub(crate) fn constants_of<'py>(py: Python<'py>, items: &[VT]) -> Option<Vec<Bound<'py, PyAny>>> {
    items.iter().map(|i| i.as_constant(py)).collect()
}

pub fn const_bool(py: Python<'_>, b: bool) -> VT {
    VT::constant(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind())
}
