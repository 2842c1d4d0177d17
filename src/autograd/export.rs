//! Export of a subset of the joint graph as a `torch.fx.GraphModule` (the forward or the
//! backward graph handed to a backend).
//!
//! Invariants: `placeholders` become the graph's placeholders in the given order; `nodes` are
//! emitted in the given (topological) order and may refer only to placeholders and earlier
//! emitted nodes; call_module targets are registered as submodules `m<index>` of the root.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::inductor::fx_import::{FxArg, FxGraph, FxOp};

fn to_py<'py>(py: Python<'py>, g: &FxGraph, env: &HashMap<usize, Bound<'py, PyAny>>, a: &FxArg) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    Ok(match a {
        FxArg::Node(i) => env
            .get(i)
            .cloned()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err(format!("export: node {} is not in this graph", g.nodes[*i].name)))?,
        FxArg::Int(v) => v.into_bound_py_any(py)?,
        FxArg::Float(v) => v.into_bound_py_any(py)?,
        FxArg::Bool(v) => v.into_bound_py_any(py)?,
        FxArg::None => py.None().into_bound(py),
        FxArg::Str(s) => PyString::new(py, s).into_any(),
        FxArg::Tuple(items) => PyTuple::new(py, items.iter().map(|x| to_py(py, g, env, x)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::List(items) => PyList::new(py, items.iter().map(|x| to_py(py, g, env, x)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::Ellipsis => py.Ellipsis().into_bound(py),
        FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } | FxArg::Py(i) => g.side_table[*i].bind(py).clone(),
    })
}

/// A valid, unique Python identifier for a placeholder.
fn ident(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        format!("v_{s}")
    } else {
        s
    }
}

/// Builds `GraphModule(root, graph)` from `placeholders`, `nodes` and `outputs` of `g`.
pub fn graph_module<'py>(
    py: Python<'py>,
    g: &FxGraph,
    placeholders: &[usize],
    nodes: &[usize],
    outputs: &[FxArg],
) -> PyResult<Bound<'py, PyAny>> {
    let fx = py.import("torch.fx")?;
    let graph = fx.getattr("Graph")?.call0()?;
    let root = py.import("torch.nn")?.getattr("Module")?.call0()?;
    let mut env: HashMap<usize, Bound<'py, PyAny>> = HashMap::new();
    for &p in placeholders {
        let v = graph.call_method1("placeholder", (ident(&g.nodes[p].name),))?;
        // torch.fx may rename the node (`sum_1` becomes `sum` when that name is free) and then
        // emits `target = name` lines whose order can clobber another placeholder (`sum_1 =
        // sum; sum_2 = sum_1`); the graphs are called positionally, so the parameter takes the
        // node's name.
        v.setattr("target", v.getattr("name")?)?;
        env.insert(p, v);
    }
    for &i in nodes {
        let n = &g.nodes[i];
        let args = PyTuple::new(py, n.args.iter().map(|a| to_py(py, g, &env, a)).collect::<PyResult<Vec<_>>>()?)?;
        let kwargs = PyDict::new(py);
        for (k, v) in &n.kwargs {
            kwargs.set_item(k, to_py(py, g, &env, v)?)?;
        }
        let v = match &n.op {
            FxOp::CallFunction { target } => graph.call_method1("call_function", (g.side_table[*target].bind(py), args, kwargs))?,
            FxOp::CallMethod { name } => graph.call_method1("call_method", (name.as_str(), args, kwargs))?,
            FxOp::CallModule { target } => {
                let name = format!("m{i}");
                root.call_method1("add_module", (name.as_str(), g.side_table[*target].bind(py)))?;
                graph.call_method1("call_module", (name.as_str(), args, kwargs))?
            }
            _ => return Err(pyo3::exceptions::PyRuntimeError::new_err(format!("export: {} is not a call", n.name))),
        };
        env.insert(i, v);
    }
    let out = PyTuple::new(py, outputs.iter().map(|a| to_py(py, g, &env, a)).collect::<PyResult<Vec<_>>>()?)?;
    graph.call_method1("output", (out,))?;
    fx.getattr("GraphModule")?.call1((root, graph))
}
