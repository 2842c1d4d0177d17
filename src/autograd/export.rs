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

// Note [constants fx cannot write]: torch.fx writes a node argument it does not know as its
// `repr` (torch/fx/graph.py, `_get_repr`), which for a class (`x.type(torch.LongTensor)`: the
// legacy tensor types), a generator, a partial or a user object is not Python
// (`<class 'torch.LongTensor'>`): the graph module's code did not compile (SyntaxError), so the
// whole frame ran eagerly, or the backend failed. Such a constant becomes an attribute of the
// graph module, read by a `get_attr` node (`_dynamo_const_0`), as torch.fx keeps tensors; the
// importer (src/inductor/fx_import.rs) turns a `get_attr` of anything but a tensor or a module
// back into the constant. [`fx_writes_as_python`] says which constants torch.fx writes as Python.

/// Whether torch.fx writes `obj` as a node argument that evaluates back to it (Note [constants
/// fx cannot write]): `None`, bools, ints, floats, complex numbers, strings, bytes, `...`,
/// torch's dtypes, devices, layouts, memory formats and `Size`s, enum members, op overloads,
/// slices, and exact tuples and lists (named tuples too) of those.
pub(crate) fn fx_writes_as_python(obj: &Bound<'_, PyAny>) -> bool {
    use pyo3::types::{PyBool, PyBytes, PyComplex, PyFloat, PyInt, PyList, PySlice};
    let py = obj.py();
    if obj.is_none()
        || obj.is(&py.Ellipsis())
        || obj.is_exact_instance_of::<PyBool>()
        || obj.is_exact_instance_of::<PyInt>()
        || obj.is_exact_instance_of::<PyFloat>()
        || obj.is_exact_instance_of::<PyComplex>()
        || obj.is_exact_instance_of::<PyString>()
        || obj.is_exact_instance_of::<PyBytes>()
    {
        return true;
    }
    if let Ok(s) = obj.cast::<PySlice>() {
        return ["start", "stop", "step"].iter().all(|f| s.getattr(*f).is_ok_and(|v| fx_writes_as_python(&v)));
    }
    if obj.is_exact_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let plain_tuple = obj.is_exact_instance_of::<PyTuple>() || obj.hasattr("_fields").unwrap_or(false);
        if !obj.is_exact_instance_of::<PyList>() && !plain_tuple && type_module(obj) != "torch" {
            return false;
        }
        return obj.try_iter().is_ok_and(|it| it.into_iter().all(|v| v.is_ok_and(|v| fx_writes_as_python(&v))));
    }
    let ty = obj.get_type();
    let qual = ty.qualname().map(|q| q.to_string()).unwrap_or_default();
    let module = type_module(obj);
    if module == "torch" && ["dtype", "device", "layout", "memory_format", "Size"].contains(&qual.as_str()) {
        return true;
    }
    if module == "torch._ops" && qual == "OpOverload" {
        return true;
    }
    py.import("enum").and_then(|e| e.getattr("Enum")).is_ok_and(|e| obj.is_instance(&e).unwrap_or(false))
}

fn type_module(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default()
}

/// `obj` as a node argument of `graph`: itself when torch.fx writes it as Python, else a
/// `get_attr` node of a new attribute of `root` holding it (Note [constants fx cannot write]).
pub(crate) fn fx_constant<'py>(graph: &Bound<'py, PyAny>, root: &Bound<'py, PyAny>, obj: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if fx_writes_as_python(&obj) {
        return Ok(obj);
    }
    let mut k = 0usize;
    while root.hasattr(format!("_dynamo_const_{k}").as_str())? {
        k += 1;
    }
    let name = format!("_dynamo_const_{k}");
    // `object.__setattr__`: nn.Module's own would take a module or tensor as a submodule or
    // parameter candidate; a plain attribute is what `GraphModule` copies for `get_attr`.
    py_object_setattr(root, &name, &obj)?;
    graph.call_method1("get_attr", (name,))
}

fn py_object_setattr(target: &Bound<'_, PyAny>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = target.py();
    py.import("builtins")?.getattr("object")?.call_method1("__setattr__", (target, name, value))?;
    Ok(())
}

fn to_py<'py>(py: Python<'py>, g: &FxGraph, env: &HashMap<usize, Bound<'py, PyAny>>, a: &FxArg, out: &(Bound<'py, PyAny>, Bound<'py, PyAny>)) -> PyResult<Bound<'py, PyAny>> {
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
        FxArg::Tuple(items) => PyTuple::new(py, items.iter().map(|x| to_py(py, g, env, x, out)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::List(items) => PyList::new(py, items.iter().map(|x| to_py(py, g, env, x, out)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::Ellipsis => py.Ellipsis().into_bound(py),
        FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } => g.side_table[*i].bind(py).clone(),
        FxArg::Py(i) => fx_constant(&out.0, &out.1, g.side_table[*i].bind(py).clone())?,
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

/// The class of the graph modules dynamo makes: a subclass of torch.fx's `_LazyGraphModule` where
/// torch has it (`python/dynamo/aot.py`), else `GraphModule`. Note [lazy graph modules]: a GraphModule writes and compiles the
/// Python code of its graph when it is made (3 ms for tiny BERT's 111-node inference graph, more
/// for the joint graph's forward and backward), code that inductor never runs: it reads the
/// nodes, and the code is needed only where a graph runs through `gm.forward` (a backend that
/// calls it, an eager fallback) or is printed. The lazy class writes it on first use, as
/// torch.compile's graphs do (`torch._dynamo.config.use_lazy_graph_module`).
pub fn graph_module_class(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    // `dynamo.aot._GraphModuleClass`: the lazy class (with a `forward` that calls the written
    // code directly) or, on a torch without it, GraphModule.
    py.import("dynamo.aot")?.getattr("_GraphModuleClass")
}

/// Builds `GraphModule(root, graph)` (lazily: [`graph_module_class`]) from `placeholders`,
/// `nodes` and `outputs` of `g`.
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
    let gr = (graph.clone(), root.clone());
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
        let args = PyTuple::new(py, n.args.iter().map(|a| to_py(py, g, &env, a, &gr)).collect::<PyResult<Vec<_>>>()?)?;
        let kwargs = PyDict::new(py);
        for (k, v) in &n.kwargs {
            kwargs.set_item(k, to_py(py, g, &env, v, &gr)?)?;
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
    let out = PyTuple::new(py, outputs.iter().map(|a| to_py(py, g, &env, a, &gr)).collect::<PyResult<Vec<_>>>()?)?;
    graph.call_method1("output", (out,))?;
    graph_module_class(py)?.call1((root, graph))
}
