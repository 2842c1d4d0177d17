//! `convert_frame`: one frame in, transformed code and guards out.
//!
//! Wraps the frame's arguments and closure into trackers (guarding them), interprets the frame,
//! hands the captured graph to the backend as a `torch.fx.GraphModule`, and emits the transformed
//! code. Failures are `ConvertError`s the hook turns into an eager run with a logged reason.

use crate::graph::Arg;
use crate::guards::{GuardKind, GuardManager};
use crate::pycodegen::{compiled_frame_code, Rebuild};
use crate::source::Source;
use crate::symbolic::builder::wrap;
use crate::symbolic::code_info::code_info;
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::translator::{GlobalsInfo, InstructionTranslator};
use crate::symbolic::variables::VT;
use crate::symbolic::{Unsupported, VResult};
use crate::unsupported;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// The pieces of a frame at entry that conversion reads.
pub struct FrameInput<'py> {
    pub code: Bound<'py, PyAny>,
    pub globals: Bound<'py, PyDict>,
    pub builtins: Bound<'py, PyDict>,
    /// `func.__closure__` (cells) or None.
    pub closure: Option<Bound<'py, PyTuple>>,
    /// Values of the argument slots (`localsplus[0..n_arg_slots]`).
    pub args: Vec<Bound<'py, PyAny>>,
}

/// Why a frame was not converted.
#[derive(Debug)]
pub enum ConvertError {
    /// Symbolic execution met something it does not model: run eagerly.
    Unsupported(Unsupported),
    /// The backend raised while compiling the graph.
    Backend(PyErr),
    /// A bug in the compiler (bytecode emission, fx export, ...).
    Internal(PyErr),
}

impl From<Unsupported> for ConvertError {
    fn from(u: Unsupported) -> Self {
        ConvertError::Unsupported(u)
    }
}

/// A converted frame.
pub struct Converted {
    pub code: Py<PyAny>,
    pub guards: GuardManager,
    /// The captured graph as text (for logs and `explain`).
    pub graph_text: String,
    pub n_ops: usize,
    /// The fx GraphModule handed to the backend, if a graph was compiled.
    pub graph_module: Option<Py<PyAny>>,
}

/// Converts one frame.
pub fn convert(py: Python<'_>, frame: &FrameInput<'_>, backend: &Bound<'_, PyAny>) -> Result<Converted, ConvertError> {
    let ci = code_info(&frame.code)?;
    let mut og = OutputGraph::new(py).map_err(ConvertError::Internal)?;
    let torch = py.import("torch").map_err(ConvertError::Internal)?;
    let grad: bool = torch.call_method0("is_grad_enabled").and_then(|g| g.extract()).map_err(ConvertError::Internal)?;
    og.add_guard(None, GuardKind::GradMode(grad));
    let dd = torch.call_method0("get_default_dtype").map_err(ConvertError::Internal)?;
    og.add_guard(None, GuardKind::DefaultDtype(dd.unbind()));

    let mut locals: Vec<Option<VT>> = vec![None; ci.localsplus.len()];
    for (i, v) in frame.args.iter().enumerate() {
        let source = Arc::new(Source::Local { name: ci.localsplus[i].clone(), idx: i as u32 });
        locals[i] = Some(wrap(py, &mut og, v, source)?);
    }
    let mut closure = Vec::new();
    if let Some(cells) = &frame.closure {
        let base = ci.localsplus.len() - ci.n_freevars;
        for (j, cell) in cells.iter().enumerate() {
            let contents = match cell.getattr("cell_contents") {
                Ok(c) => c,
                Err(_) => unsupported!("free variable '{}' is empty", ci.localsplus[base + j]),
            };
            let source = Arc::new(Source::Closure { name: ci.localsplus[base + j].clone(), idx: j as u32, slot: (base + j) as u32 });
            let v = wrap(py, &mut og, &contents, source)?;
            closure.push(VT::Cell(Rc::new(RefCell::new(Some(v)))));
        }
    }
    let g = Rc::new(GlobalsInfo { globals: frame.globals.clone().unbind(), builtins: frame.builtins.clone().unbind(), source: None, trusted: false });
    let returned = {
        let mut tx = InstructionTranslator::new(ci.clone(), g, locals, closure, &mut og, 0);
        tx.mark_external_cells();
        tx.run(py)?
    };

    let mut outputs: Vec<Arg> = Vec::new();
    let mut out_index: HashMap<crate::graph::NodeId, usize> = HashMap::new();
    let result = rebuild_of(py, &og, &returned, &mut outputs, &mut out_index)?;
    og.graph.outputs = outputs;
    let n_ops = og.graph.n_ops();
    let graph_text = og.graph.to_string();
    let (compiled, graph_module) = if n_ops == 0 {
        (None, None)
    } else {
        let gm = og.to_fx(py).map_err(ConvertError::Internal)?;
        let example_inputs = PyList::new(py, og.inputs.iter().map(|(_, v)| v.bind(py))).map_err(ConvertError::Internal)?;
        let compiled = backend.call1((&gm, example_inputs)).map_err(ConvertError::Backend)?;
        if !compiled.is_callable() {
            return Err(ConvertError::Backend(pyo3::exceptions::PyTypeError::new_err("backend did not return a callable")));
        }
        (Some(compiled.unbind()), Some(gm.unbind()))
    };
    let inputs: Vec<Arc<Source>> = og.inputs.iter().map(|(s, _)| s.clone()).collect();
    let code = compiled_frame_code(py, &ci, compiled, &inputs, &result).map_err(ConvertError::Internal)?;
    let guards = GuardManager::new(py, std::mem::take(&mut og.guards)).map_err(ConvertError::Internal)?;
    Ok(Converted { code, guards, graph_text, n_ops, graph_module })
}

/// How to rebuild the returned tracker; tensors computed by the graph become graph outputs.
fn rebuild_of(py: Python<'_>, og: &OutputGraph, vt: &VT, outputs: &mut Vec<Arg>, out_index: &mut HashMap<crate::graph::NodeId, usize>) -> VResult<Rebuild> {
    let mut rec = |v: &VT| rebuild_of(py, og, v, outputs, out_index);
    Ok(match vt {
        VT::Tensor(t) => {
            let is_placeholder = matches!(og.graph.node(t.node).op, crate::graph::Op::Placeholder { .. });
            match (&t.source, is_placeholder) {
                (Some(s), true) => Rebuild::Source(s.clone()),
                _ => {
                    let k = *out_index.entry(t.node).or_insert_with(|| {
                        outputs.push(Arg::Node(t.node));
                        outputs.len() - 1
                    });
                    Rebuild::GraphOutput(k)
                }
            }
        }
        VT::Constant(c) => Rebuild::Const(c.clone_ref(py)),
        VT::Tuple(items) => Rebuild::Tuple(items.iter().map(&mut rec).collect::<VResult<_>>()?),
        VT::List(l) => {
            let l = l.borrow();
            match &l.source {
                Some(s) => Rebuild::Source(s.clone()),
                None => Rebuild::List(l.items.iter().map(&mut rec).collect::<VResult<_>>()?),
            }
        }
        VT::Dict(d) => {
            let d = d.borrow();
            match &d.source {
                Some(s) => Rebuild::Source(s.clone()),
                None => Rebuild::Dict(d.items.iter().map(|(k, v)| Ok((k.clone_ref(py), rec(v)?))).collect::<VResult<_>>()?),
            }
        }
        VT::Module { source: Some(s), .. } | VT::Function { source: Some(s), .. } | VT::PyModule { source: Some(s), .. } => Rebuild::Source(s.clone()),
        VT::TorchFunction(o) | VT::Builtin(o) | VT::Class(o) => Rebuild::Const(o.clone_ref(py)),
        other => unsupported!("returning {} from a compiled frame", other.describe(py)),
    })
}
