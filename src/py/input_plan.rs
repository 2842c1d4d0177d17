//! Note [input plans]: the transformed code loads every graph input from where the frame got it
//! (a parameter is `self.bert.encoder.layer[0].attention.self.query.weight`), one bytecode
//! load per link of each chain. BERT's forward graph takes 45 inputs through 300 links, each an
//! `_C.load_attr` call from bytecode (~120 ns: the call itself costs more than the lookup), and
//! chains share most of their links. An [`InputPlan`] is the whole set of chains compiled into one
//! list of steps, a shared link read once: the transformed code pushes the chains' roots (locals,
//! cells, globals: whatever is not an attribute or item read) and calls the plan once; the plan
//! returns the inputs as a tuple, in reverse order, for `UNPACK_SEQUENCE` to push in call order.
//!
//! Each step reads exactly as the bytecode it replaces (`CodeGen::load_source`): an attribute
//! through [`super::getattr::getattr`] (`_C.load_attr`'s lookup) or `PyObject_GetAttr` for a
//! dunder (`LOAD_ATTR`), an item through `PyObject_GetItem` (`BINARY_SUBSCR`), a dict-storage
//! item through `dict.__getitem__`, a generic attribute through `PyObject_GenericGetAttr`
//! (`object.__getattribute__`); an error propagates as the bytecode's would, with its
//! exception. Reading a shared link once is what the bytecode would see too: these reads run
//! no user code on the objects they are used for (module attributes, dict items), and the
//! guards that admitted the call had just read the same chains.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::source::ItemKey;

/// One step of an [`InputPlan`]: reads a value from a root argument or an earlier step.
enum Step {
    /// The plan's `i`-th argument.
    Root(usize),
    /// `getattr(values[base], name)` through the module fast path (`_C.load_attr`).
    Attr { base: usize, name: Py<PyString> },
    /// `values[base].name` for a dunder name (`LOAD_ATTR`).
    DunderAttr { base: usize, name: Py<PyString> },
    /// `object.__getattribute__(values[base], name)`.
    GenericAttr { base: usize, name: Py<PyString> },
    /// `values[base][key]` (`BINARY_SUBSCR`).
    Item { base: usize, key: Py<PyAny> },
    /// `dict.__getitem__(values[base], key)`.
    DictItem { base: usize, key: Py<PyAny> },
}

/// The read of one chain link, as [`InputPlan::build`] takes it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Link {
    Attr(String),
    GenericAttr(String),
    Item(ItemKey),
    DictItem(ItemKey),
}

/// A compiled set of input chains (Note [input plans]). Calling it with the roots returns the
/// inputs as a tuple in reverse order. Errors: whatever the failing read raises.
#[pyclass(frozen, module = "dynamo._C")]
pub struct InputPlan {
    steps: Vec<Step>,
    /// The step giving each input, in input order.
    outputs: Vec<usize>,
    roots: usize,
    dict_getitem: Py<PyAny>,
}

impl InputPlan {
    /// A plan from `chains`: per input, its root's index among the plan's arguments and the
    /// links read from it in order. Links shared by several chains (the same root and the same
    /// links up to there) become one step.
    pub fn build(py: Python<'_>, roots: usize, chains: Vec<(usize, Vec<Link>)>) -> PyResult<InputPlan> {
        use std::collections::HashMap;
        // A step is keyed by its base step and its link.
        let mut index: HashMap<(usize, Link), usize> = HashMap::new();
        let mut steps: Vec<Step> = (0..roots).map(Step::Root).collect();
        let mut outputs = Vec::with_capacity(chains.len());
        for (root, links) in chains {
            let mut at = root;
            for link in links {
                if let Some(&i) = index.get(&(at, link.clone())) {
                    at = i;
                    continue;
                }
                let base = at;
                steps.push(match &link {
                    Link::Attr(n) if n.starts_with("__") => Step::DunderAttr { base, name: PyString::intern(py, n).unbind() },
                    Link::Attr(n) => Step::Attr { base, name: PyString::intern(py, n).unbind() },
                    Link::GenericAttr(n) => Step::GenericAttr { base, name: PyString::intern(py, n).unbind() },
                    Link::Item(k) => Step::Item { base, key: k.to_object(py) },
                    Link::DictItem(k) => Step::DictItem { base, key: k.to_object(py) },
                });
                at = steps.len() - 1;
                index.insert((base, link), at);
            }
            outputs.push(at);
        }
        let dict_getitem = py.get_type::<pyo3::types::PyDict>().getattr("__getitem__")?.unbind();
        Ok(InputPlan { steps, outputs, roots, dict_getitem })
    }

    /// How many reads the plan makes (its steps past the roots).
    pub fn reads(&self) -> usize {
        self.steps.len() - self.roots
    }
}

#[pymethods]
impl InputPlan {
    /// `plan(*roots)`: the inputs, last first. Errors: `TypeError` for a wrong number of roots;
    /// otherwise what the failing read raises.
    #[pyo3(signature = (*roots))]
    fn __call__<'py>(&self, py: Python<'py>, roots: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
        if roots.len() != self.roots {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!("input plan takes {} roots, got {}", self.roots, roots.len())));
        }
        let mut values: Vec<Bound<'py, PyAny>> = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let v = match step {
                Step::Root(i) => roots.get_item(*i)?,
                // SAFETY: both pointers are valid objects (a value and an interned str) and the
                // GIL is held; the result is a new reference or NULL with an exception set.
                Step::Attr { base, name } => unsafe { Bound::from_owned_ptr_or_err(py, super::getattr::getattr(py, values[*base].as_ptr(), name.as_ptr()))? },
                Step::DunderAttr { base, name } => values[*base].getattr(name.bind(py))?,
                // SAFETY: as above; `PyObject_GenericGetAttr` is `object.__getattribute__`.
                Step::GenericAttr { base, name } => unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyObject_GenericGetAttr(values[*base].as_ptr(), name.as_ptr()))? },
                Step::Item { base, key } => values[*base].get_item(key.bind(py))?,
                Step::DictItem { base, key } => self.dict_getitem.bind(py).call1((&values[*base], key.bind(py)))?,
            };
            values.push(v);
        }
        PyTuple::new(py, self.outputs.iter().rev().map(|&i| &values[i]))
    }

    fn __repr__(&self) -> String {
        format!("<InputPlan: {} inputs from {} roots in {} reads>", self.outputs.len(), self.roots, self.reads())
    }
}

/// Test-only: an [`InputPlan`] from `chains` of `(root index, [(kind, key)])`, kind one of
/// "attr", "generic" (a str key), "item", "dict" (an int or str key). Errors: `ValueError` for
/// another kind or key.
#[pyfunction]
pub fn _input_plan_for_tests(py: Python<'_>, roots: usize, chains: Vec<(usize, Vec<(String, Bound<'_, PyAny>)>)>) -> PyResult<InputPlan> {
    let key = |k: &Bound<'_, PyAny>| -> PyResult<ItemKey> {
        if let Ok(i) = k.extract::<i64>() {
            return Ok(ItemKey::Int(i));
        }
        Ok(ItemKey::Str(k.extract::<String>()?))
    };
    let mut built = Vec::new();
    for (root, links) in chains {
        let mut ls = Vec::new();
        for (kind, k) in links {
            ls.push(match kind.as_str() {
                "attr" => Link::Attr(k.extract()?),
                "generic" => Link::GenericAttr(k.extract()?),
                "item" => Link::Item(key(&k)?),
                "dict" => Link::DictItem(key(&k)?),
                _ => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown link kind {kind}"))),
            });
        }
        built.push((root, ls));
    }
    InputPlan::build(py, roots, built)
}
