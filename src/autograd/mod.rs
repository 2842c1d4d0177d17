//! AOTAutograd: for a captured graph whose inputs require grad (under grad mode), a joint
//! forward+backward graph built by our own derivative rules, partitioned into a forward graph
//! and a backward graph, each exported as a `torch.fx.GraphModule` for a backend to compile
//! (PyTorch: `torch/_functorch/aot_autograd.py`).
//!
//! Pipeline: `fx_import` -> `functionalize` (both from `inductor/`) -> [`joint::build_joint`]
//! (derivative rules in [`rules`]) -> [`partition::partition`] -> [`export`] (fx graphs).
//! Entry point: `dynamo._C.aot_joint(gm, example_inputs, partitioner="min_cut") -> AotPlan | str`; a
//! `str` is the reason no joint graph was built; the runtime then splits the graph around ops
//! without a derivative rule (`aot_rule_gaps`) or runs it eagerly (logged on `aot::partition`,
//! counted in `aot_graph_splits` / `aot_eager_graphs`). The `torch.autograd.Function` that runs
//! the two graphs is built in `python/dynamo/aot.py`; its per-call parts (`forward`, the callable
//! the graph runs) are [`runtime`]'s.
//!
//! Invariants: the forward graph computes exactly the original graph's values (same torch
//! calls, functionalized), plus the mutated-input values and the saved tensors as extra
//! outputs; the backward graph is pure.

pub mod export;
pub mod joint;
pub mod partition;
pub mod rules;
pub mod runtime;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::counters::{bump, c};
use crate::inductor::fx_import::{FxArg, FxOp};
use crate::inductor::{functionalize, fx_import};

/// What `aot_joint` produced: the two graphs and what the runtime needs to call them.
#[pyclass(module = "dynamo._C", frozen)]
pub struct AotPlan {
    /// Forward `GraphModule`: inputs (placeholders, then get_attr values) -> (outputs...,
    /// written-back values..., saved...).
    #[pyo3(get)]
    pub fw: Py<PyAny>,
    /// Backward `GraphModule`: (saved..., tangents...) -> one gradient (or None) per input.
    #[pyo3(get)]
    pub bw: Py<PyAny>,
    /// Number of original outputs.
    #[pyo3(get)]
    pub n_outputs: usize,
    /// Indices of the outputs that receive a tangent (differentiable tensors).
    #[pyo3(get)]
    pub tangent_outputs: Vec<usize>,
    /// Input positions written back after the forward (`input.copy_(value)`), in output order.
    #[pyo3(get)]
    pub writeback_inputs: Vec<usize>,
    /// Number of saved values.
    #[pyo3(get)]
    pub n_saved: usize,
    /// Bytes of the saved values that are not graph inputs (tensors with static sizes).
    #[pyo3(get)]
    pub saved_bytes: u64,
    /// Forward nodes recomputed by the backward (min-cut policy).
    #[pyo3(get)]
    pub n_recomputed: usize,
    /// Whether each input (placeholders, then extra inputs) requires grad.
    #[pyo3(get)]
    pub input_requires_grad: Vec<bool>,
    /// Values of the graph's get_attr nodes, passed after the placeholders.
    #[pyo3(get)]
    pub extra_inputs: Py<PyList>,
    /// The joint graph, rendered.
    #[pyo3(get)]
    pub joint: String,
    /// Per input: the tangents (positions in `tangent_outputs`) its gradient is computed from.
    /// An input none of whose tangents arrives gets no gradient, as in eager (Note [gradients
    /// of unused outputs] in `aot.py`).
    #[pyo3(get)]
    pub input_tangent_deps: Vec<Vec<usize>>,
}

/// For each input gradient of `j`, the tangents (by position among the tangent placeholders)
/// among its ancestors in the joint graph.
fn input_tangent_deps(j: &joint::JointGraph) -> Vec<Vec<usize>> {
    let tangent_pos: std::collections::HashMap<usize, usize> = j.tangents.iter().flatten().enumerate().map(|(t, &node)| (node, t)).collect();
    j.input_grads
        .iter()
        .map(|g| {
            let Some(g) = *g else { return Vec::new() };
            let mut seen = std::collections::HashSet::new();
            let mut stack = vec![g];
            let mut deps = std::collections::BTreeSet::new();
            while let Some(n) = stack.pop() {
                if !seen.insert(n) {
                    continue;
                }
                if let Some(&t) = tangent_pos.get(&n) {
                    deps.insert(t);
                }
                let node = &j.g.nodes[n];
                for a in node.args.iter().chain(node.kwargs.iter().map(|(_, a)| a)) {
                    a.for_each_node(&mut |k| stack.push(k));
                }
            }
            deps.into_iter().collect()
        })
        .collect()
}

/// Builds the joint graph of `gm` and partitions it; returns the reason instead when the graph
/// must run eagerly.
fn build(py: Python<'_>, gm: &Bound<'_, PyAny>, example_inputs: &Bound<'_, PyAny>, policy: partition::Policy) -> Result<AotPlan, String> {
    let mut g = fx_import::import_graph(py, gm, example_inputs).map_err(|e| e.to_string())?;
    g.writebacks = functionalize::functionalize(&mut g)?;
    let j = joint::build_joint(py, g).map_err(|e| e.to_string())?;
    let joint_text = joint::render(&j);
    tracing::debug!(target: "aot::joint_graph", "joint graph:\n{joint_text}");
    let p = partition::partition(&j, policy);
    let py_err = |e: PyErr| format!("fx export failed: {e}");
    let fw_outputs = partition::forward_outputs(&j, &p);
    let fw = export::graph_module(py, &j.g, &j.inputs, &p.fw_nodes, &fw_outputs).map_err(py_err)?;
    let mut bw_inputs = p.saved.clone();
    bw_inputs.extend(j.tangents.iter().flatten().copied());
    let bw_outputs: Vec<FxArg> = j.input_grads.iter().map(|g| g.map(FxArg::Node).unwrap_or(FxArg::None)).collect();
    let bw = export::graph_module(py, &j.g, &bw_inputs, &p.bw_nodes, &bw_outputs).map_err(py_err)?;
    let writeback_inputs = j
        .g
        .writebacks
        .iter()
        .map(|wb| j.inputs.iter().position(|&i| i == wb.dst).ok_or_else(|| "writeback to a non-input".to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let extra: Vec<Py<PyAny>> = j
        .inputs
        .iter()
        .filter_map(|&i| match j.g.nodes[i].op {
            FxOp::GetAttr { value } => Some(j.g.side_table[value].clone_ref(py)),
            _ => None,
        })
        .collect();
    tracing::debug!(
        target: "aot::graphs",
        "partitioned ({policy:?}): {} forward nodes, {} backward nodes, {} saved ({} bytes besides inputs), {} recomputed",
        p.fw_nodes.len(),
        p.bw_nodes.len(),
        p.saved.len(),
        partition::saved_bytes(&j, &p),
        p.recomputed.len()
    );
    Ok(AotPlan {
        fw: fw.unbind(),
        bw: bw.unbind(),
        n_outputs: j.outputs.len(),
        tangent_outputs: j.tangents.iter().enumerate().filter(|(_, t)| t.is_some()).map(|(k, _)| k).collect(),
        writeback_inputs,
        n_saved: p.saved.len(),
        saved_bytes: partition::saved_bytes(&j, &p),
        n_recomputed: p.recomputed.len(),
        input_requires_grad: j.input_requires_grad.clone(),
        extra_inputs: PyList::new(py, extra).map_err(py_err)?.unbind(),
        joint: joint_text,
        input_tangent_deps: input_tangent_deps(&j),
    })
}

/// `aot_joint(gm, example_inputs, partitioner="min_cut") -> AotPlan | str`: the forward and
/// backward graphs of `gm`, or why it must run eagerly (a missing derivative rule names its op).
/// `partitioner` is `"min_cut"` (Note [min-cut] in `partition.rs`) or `"save_all"`; anything
/// else raises `ValueError`. Counted in `aot_graphs`; the caller counts the fallbacks
/// (`aot_count_eager`, `aot_count_split`).
#[pyfunction]
#[pyo3(signature = (gm, example_inputs, partitioner = "min_cut"))]
fn aot_joint(py: Python<'_>, gm: &Bound<'_, PyAny>, example_inputs: &Bound<'_, PyAny>, partitioner: &str) -> PyResult<Py<PyAny>> {
    let policy = match partitioner {
        "min_cut" => partition::Policy::MinCut,
        "save_all" => partition::Policy::SaveAll,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown partitioner {other:?}; expected \"min_cut\" or \"save_all\""
            )))
        }
    };
    match build(py, gm, example_inputs, policy) {
        Ok(plan) => {
            bump(&c::aot_graphs);
            Ok(Py::new(py, plan)?.into_any())
        }
        Err(reason) => {
            tracing::debug!(target: "aot::partition", "no joint graph: {reason}");
            Ok(pyo3::types::PyString::new(py, &reason).into_any().unbind())
        }
    }
}

/// Records that a graph runs through `gm.forward` under torch's autograd (no joint graph and
/// no split possible): logged on `aot::partition` and counted in `aot_eager_graphs`.
#[pyfunction]
fn aot_count_eager(reason: &str) {
    bump(&c::aot_eager_graphs);
    tracing::info!(target: "aot::partition", "graph runs eagerly under autograd: {reason}");
}

/// `aot_rule_gaps(gm, example_inputs) -> list[(node name, reason)] | str`: the nodes on a
/// differentiable path that have no derivative rule (the runtime splits the graph around them),
/// or a `str` saying why splitting cannot help.
#[pyfunction]
fn aot_rule_gaps(py: Python<'_>, gm: &Bound<'_, PyAny>, example_inputs: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let res = (|| -> Result<Vec<(String, String)>, String> {
        let mut g = fx_import::import_graph(py, gm, example_inputs).map_err(|e| e.to_string())?;
        g.writebacks = functionalize::functionalize(&mut g)?;
        joint::rule_gaps(py, g).map_err(|e| e.to_string())
    })();
    match res {
        Ok(gaps) => Ok(PyList::new(py, gaps)?.into_any().unbind()),
        Err(reason) => Ok(pyo3::types::PyString::new(py, &reason).into_any().unbind()),
    }
}

/// Records that a graph was split around `op` (no derivative rule): logged on `aot::partition`
/// with the op's name and counted in `aot_graph_splits`.
#[pyfunction]
fn aot_count_split(op: &str) {
    bump(&c::aot_graph_splits);
    tracing::info!(target: "aot::partition", "graph split around {op}: no derivative rule; it runs through torch's autograd");
}

/// Records that a differentiated graph runs through `gm.forward` under torch's autograd because
/// its compiled forward has no kernel of ours (Note [forward without kernels] in `aot.py`):
/// logged on `aot::partition` and counted in `aot_kernelless_graphs`.
#[pyfunction]
fn aot_count_kernelless(ops: &str) {
    bump(&c::aot_kernelless_graphs);
    tracing::info!(target: "aot::partition", "forward graph compiles to no kernel (only {ops}): runs through torch's autograd");
}

/// `aot_draws_random(target) -> bool`: whether the op named by `target` (a dotted path or a
/// method name, as torch.fx prints it) draws random numbers (`rules::draws_random`: a dropout,
/// a `rand*` factory, or one of torch's sampling ops; `normalize` is not `normal`).
#[pyfunction]
fn aot_draws_random(target: &str) -> bool {
    rules::draws_random(target)
}

/// Counts one backward graph compiled by a backend (called by the runtime on first backward).
#[pyfunction]
fn aot_count_backward() {
    bump(&c::aot_backward_graphs);
}

/// Registers the AOTAutograd entry points on `dynamo._C`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(aot_joint, m)?)?;
    m.add_function(wrap_pyfunction!(aot_count_backward, m)?)?;
    m.add_function(wrap_pyfunction!(aot_draws_random, m)?)?;
    m.add_function(wrap_pyfunction!(aot_rule_gaps, m)?)?;
    m.add_function(wrap_pyfunction!(aot_count_split, m)?)?;
    m.add_function(wrap_pyfunction!(aot_count_eager, m)?)?;
    m.add_function(wrap_pyfunction!(aot_count_kernelless, m)?)?;
    m.add_class::<AotPlan>()?;
    runtime::register(m)?;
    Ok(())
}
