//! Constant folding: values that depend on no graph input are computed once, at compile time,
//! and become constants of the graph (PyTorch: `torch/_inductor/constant_folding.py`, run there
//! on the joint graph; here on the imported fx graph after functionalization).
//!
//! What folds: a call (`call_function`, `call_method`) whose tensor arguments are all folded
//! values, for example `torch.arange(64)`, or an op that reads only the metadata of its first
//! argument (`x.new_ones(...)`, `torch.zeros_like(x)`, `x.size()`), whose sizes are static and
//! guarded. Transformers builds its causal attention mask this way from `arange`, `cumsum`,
//! `new_ones` and comparisons: GPT-2's 25 mask nodes (10 tiny kernels and 15 torch calls on every
//! call) become one constant tensor.
//!
//! What never folds:
//! - graph inputs and `get_attr` values (parameters and buffers can be updated in place between
//!   calls, so nothing computed from them may be frozen);
//! - ops that draw random numbers or leave memory uninitialized (`rand*`, `dropout`,
//!   `bernoulli`, `normal`, `empty*`, ...: [`NONDETERMINISTIC`]), and submodule calls;
//! - a folded value that a graph output may alias (the output itself, or a view of it, as far as
//!   [`super::functionalize::returns_fresh`] can tell): eager returns a fresh tensor on every call,
//!   and a caller writing into it must not change what the next call computes. Such values, and
//!   everything they are a view of, are computed on every call as before.
//!
//! Only the *frontier* (folded values read by a node that is not folded) is kept: each becomes a
//! `get_attr` node holding the computed value, its metadata read from the value itself; interior
//! folded nodes become `get_attr` nodes of `None` with no users. A call that raises at compile
//! time, a tensor that requires grad, or more than [`MAX_FOLDED_BYTES`] of folded tensors leaves
//! the graph as it was (logged on `inductor::constant_folding`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::fx_import::{self, FxArg, FxGraph, FxOp};

/// Substrings of call targets (qualified function names or method names) whose results differ
/// from call to call.
const NONDETERMINISTIC: &[&str] = &[
    "rand", "dropout", "bernoulli", "normal", "multinomial", "poisson", "empty", "uniform", "exponential",
    "cauchy", "geometric", "seed", "rrelu",
];

/// Ops whose result depends on their first argument's metadata (sizes, dtype, device) only.
const METADATA_ONLY: &[&str] = &[
    "new_ones",
    "new_zeros",
    "new_full",
    "ones_like",
    "zeros_like",
    "full_like",
    "size",
    "dim",
    "torch.ones_like",
    "torch.zeros_like",
    "torch.full_like",
];

/// Upper bound on the bytes of folded tensors kept alive by one compiled graph.
pub const MAX_FOLDED_BYTES: i64 = 64 << 20;

fn target_name(g: &FxGraph, i: usize) -> &str {
    match &g.nodes[i].op {
        FxOp::CallMethod { name } => name.as_str(),
        _ => g.nodes[i].target_name.as_str(),
    }
}

/// Whether node `j`'s metadata makes a stand-in of it (`evaluate`): its dtype must be one the
/// layout names (an int8 or uint8 value would have stood in as float32, and `ones_like` of it
/// folded to a float32 constant).
fn stand_in_possible(g: &FxGraph, j: usize) -> bool {
    g.nodes[j].meta.as_ref().is_some_and(|m| m.layout.dtype.torch_name().is_some())
}

/// Which nodes may fold, by the rules in the module docs (the output rule not yet applied).
fn foldable(g: &FxGraph) -> Vec<bool> {
    let mut folded = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if !matches!(n.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. }) || n.inplace {
            continue;
        }
        let name = target_name(g, i);
        if NONDETERMINISTIC.iter().any(|s| name.contains(s)) {
            continue;
        }
        let metadata_only = METADATA_ONLY.contains(&name);
        let mut ok = true;
        for (k, a) in n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)).enumerate() {
            a.for_each_node(&mut |j| {
                let static_self = k == 0 && metadata_only && stand_in_possible(g, j) && matches!(a, FxArg::Node(_));
                if !folded[j] && !static_self {
                    ok = false;
                }
            });
        }
        folded[i] = ok;
    }
    folded
}

/// Folded nodes that a graph output may alias: the output's nodes, and back through every node
/// that may return (a view of) its first tensor argument.
fn aliased_by_outputs(g: &FxGraph) -> Vec<bool> {
    let mut aliased = vec![false; g.nodes.len()];
    for a in &g.nodes[g.output].args {
        a.for_each_node(&mut |j| aliased[j] = true);
    }
    for i in (0..g.nodes.len()).rev() {
        if !aliased[i] || super::functionalize::returns_fresh(g, i) {
            continue;
        }
        for a in g.nodes[i].args.iter().chain(g.nodes[i].kwargs.iter().map(|(_, a)| a)) {
            a.for_each_node(&mut |j| aliased[j] = true);
        }
    }
    aliased
}

fn py_arg<'py>(py: Python<'py>, g: &FxGraph, values: &[Option<Bound<'py, PyAny>>], a: &FxArg) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    Ok(match a {
        FxArg::Node(j) => values[*j]
            .clone()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err(format!("{} is not folded", g.nodes[*j].name)))?,
        FxArg::Int(v) => v.into_bound_py_any(py)?,
        FxArg::Float(v) => v.into_bound_py_any(py)?,
        FxArg::Bool(v) => v.into_bound_py_any(py)?,
        FxArg::None => py.None().into_bound(py),
        FxArg::Str(s) => s.into_bound_py_any(py)?,
        FxArg::Py(i) | FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } => g.side_table[*i].bind(py).clone(),
        FxArg::Ellipsis => py.Ellipsis().into_bound(py),
        FxArg::Tuple(items) => {
            PyTuple::new(py, items.iter().map(|x| py_arg(py, g, values, x)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        FxArg::List(items) => {
            PyList::new(py, items.iter().map(|x| py_arg(py, g, values, x)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
    })
}

/// Runs node `i` on the folded values of its arguments (metadata-only ops read their first
/// argument's compile-time value: a meta-derived empty tensor would do as well, but the graph's
/// example value is not at hand here, so a stand-in of the same sizes, strides and dtype is made).
fn evaluate<'py>(py: Python<'py>, g: &FxGraph, values: &[Option<Bound<'py, PyAny>>], i: usize) -> PyResult<Bound<'py, PyAny>> {
    let n = &g.nodes[i];
    let torch = py.import("torch")?;
    let mut args = Vec::with_capacity(n.args.len());
    for (k, a) in n.args.iter().enumerate() {
        match a {
            FxArg::Node(j) if k == 0 && values[*j].is_none() => {
                // Metadata-only op on a value that is not folded: a stand-in with its metadata.
                let m = g.nodes[*j].meta.as_ref().expect("foldable() checked the meta");
                let name = m.layout.dtype.torch_name().ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no stand-in for an unmodelled dtype"))?;
                let dtype = torch.getattr(name)?;
                let kw = PyDict::new(py);
                kw.set_item("dtype", dtype)?;
                args.push(torch.call_method("empty_strided", (m.layout.sizes.clone(), m.layout.strides.clone()), Some(&kw))?);
            }
            _ => args.push(py_arg(py, g, values, a)?),
        }
    }
    let kwargs = PyDict::new(py);
    for (k, a) in &n.kwargs {
        kwargs.set_item(k, py_arg(py, g, values, a)?)?;
    }
    match &n.op {
        FxOp::CallFunction { target } => g.side_table[*target].bind(py).call(PyTuple::new(py, args)?, Some(&kwargs)),
        FxOp::CallMethod { name } => {
            let (this, rest) = args.split_first().ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("method call without self"))?;
            this.getattr(name.as_str())?.call(PyTuple::new(py, rest)?, Some(&kwargs))
        }
        _ => unreachable!("only calls fold"),
    }
}

/// Folds every input-independent value of `g` into a constant (module docs). Returns the nodes
/// that now hold folded values (empty when nothing could fold, or the graph was left as it was).
pub fn fold(py: Python<'_>, g: &mut FxGraph) -> Vec<usize> {
    fx_import::set_users(&mut g.nodes);
    let mut folded = foldable(g);
    if !folded.iter().any(|&f| f) {
        return Vec::new();
    }
    let aliased = aliased_by_outputs(g);
    for i in 0..g.nodes.len() {
        if folded[i] && aliased[i] {
            folded[i] = false;
        }
    }
    // Re-check the argument rule: a node whose folded argument was just unfolded cannot fold.
    for i in 0..g.nodes.len() {
        if !folded[i] {
            continue;
        }
        let metadata_only = METADATA_ONLY.contains(&target_name(g, i));
        let n = &g.nodes[i];
        let mut ok = true;
        for (k, a) in n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)).enumerate() {
            a.for_each_node(&mut |j| {
                let static_self = k == 0 && metadata_only && stand_in_possible(g, j) && matches!(a, FxArg::Node(_));
                if !folded[j] && !static_self {
                    ok = false;
                }
            });
        }
        folded[i] = ok;
    }
    // The frontier: folded values some unfolded node reads.
    let frontier: Vec<bool> =
        (0..g.nodes.len()).map(|i| folded[i] && g.nodes[i].users.iter().any(|&u| !folded[u])).collect();
    if !frontier.iter().any(|&f| f) {
        return Vec::new();
    }
    let mut values: Vec<Option<Bound<'_, PyAny>>> = vec![None; g.nodes.len()];
    let mut bytes = 0i64;
    for i in 0..g.nodes.len() {
        if !folded[i] {
            continue;
        }
        let v = match evaluate(py, g, &values, i) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(target: "inductor::constant_folding", "{} raised at compile time ({e}); nothing folded", g.nodes[i].name);
                return Vec::new();
            }
        };
        if frontier[i] {
            match fx_import::tensor_meta(py, &v) {
                Ok(Some(m)) => {
                    if m.requires_grad || !m.layout.cpu {
                        tracing::debug!(target: "inductor::constant_folding", "{} requires grad or is not on the CPU; nothing folded", g.nodes[i].name);
                        return Vec::new();
                    }
                    let storage = v.call_method0("untyped_storage").and_then(|s| s.call_method0("nbytes"));
                    match storage.and_then(|b| b.extract::<i64>()) {
                        Ok(b) => bytes += b,
                        Err(_) => return Vec::new(),
                    }
                }
                Ok(None) => {}
                Err(_) => return Vec::new(),
            }
        }
        values[i] = Some(v);
    }
    if bytes > MAX_FOLDED_BYTES {
        tracing::debug!(target: "inductor::constant_folding", "{bytes} bytes of constants; nothing folded");
        return Vec::new();
    }
    let none = g.side_table.len();
    g.side_table.push(py.None());
    let mut n_folded = 0;
    for i in 0..g.nodes.len() {
        if !folded[i] {
            continue;
        }
        n_folded += 1;
        let n = &mut g.nodes[i];
        n.args.clear();
        n.kwargs.clear();
        n.canonical = None;
        if frontier[i] {
            let v = values[i].take().expect("evaluated above");
            n.meta = fx_import::tensor_meta(py, &v).ok().flatten();
            g.side_table.push(v.unbind());
            n.op = FxOp::GetAttr { value: g.side_table.len() - 1 };
        } else {
            n.meta = None;
            n.op = FxOp::GetAttr { value: none };
        }
    }
    fx_import::set_users(&mut g.nodes);
    tracing::debug!(target: "inductor::constant_folding", "{n_folded} nodes folded into {} constants", frontier.iter().filter(|&&f| f).count());
    (0..g.nodes.len()).filter(|&i| frontier[i]).collect()
}
