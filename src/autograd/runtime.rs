//! The per-call half of the AOTAutograd runtime in Rust: the `forward` of the
//! `torch.autograd.Function` that carries a compiled forward/backward pair, and the callable
//! dynamo's graph calls (PyTorch: `CompiledFunction` and its runtime wrappers in
//! `torch/_functorch/_aot_autograd/runtime_wrappers.py`). `python/dynamo/aot.py` builds the
//! Function class (its `backward`, compiled on first use, stays Python: it runs once per
//! training step, the forward once per call).
//!
//! Why Rust: a tiny graph whose parameter requires grad pays the Function's machinery on every
//! call; each Python frame around it (the runtime wrapper, `forward`, `save_for_backward`)
//! costs a few hundred ns of the "within 2 µs of eager" budget.
//!
//! Invariants: [`AotForward`] runs with grad mode off (torch's `Function.apply` turns it off
//! around `forward`); the compiled forward returns a tuple (outputs..., written-back values...,
//! saved...); nothing here keeps a reference to a tensor beyond the call.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use pyo3::intern;

/// `Function.forward(ctx, *inputs)`: runs the compiled forward, copies the written-back values
/// into their inputs (`input.copy_(value)`: batch-norm running statistics), hands the saved
/// values to `ctx` and marks the outputs without a tangent non-differentiable. Returns the
/// original outputs (a tuple). Errors: whatever the compiled forward or `copy_` raise.
#[pyclass(module = "dynamo._C", frozen)]
pub struct AotForward {
    fw: Py<PyAny>,
    n_out: usize,
    /// (index among the written-back values, input position).
    writebacks: Vec<(usize, usize)>,
    /// Outputs that receive no tangent.
    nondiff: Vec<usize>,
    /// Keep the inputs and their `_version`s on `ctx` (`dynamo_inputs`, `dynamo_versions`) for
    /// a backward under `create_graph=True` (Note [double backward] in `aot.py`).
    keep_inputs: bool,
    /// Leave the gradients of outputs backward did not reach as None (`ctx.materialize_grads =
    /// False`, Note [gradients of unused outputs] in `aot.py`).
    keep_none_grads: bool,
    tensor_type: Py<PyType>,
}

#[pymethods]
impl AotForward {
    #[new]
    #[pyo3(signature = (fw, n_out, writeback_inputs, nondiff, keep_inputs=false, keep_none_grads=false))]
    fn new(py: Python<'_>, fw: Py<PyAny>, n_out: usize, writeback_inputs: Vec<usize>, nondiff: Vec<usize>, keep_inputs: bool, keep_none_grads: bool) -> PyResult<Self> {
        let tensor_type = py.import("torch")?.getattr("Tensor")?.cast_into::<PyType>()?.unbind();
        Ok(AotForward { fw, n_out, writebacks: writeback_inputs.into_iter().enumerate().collect(), nondiff, keep_inputs, keep_none_grads, tensor_type })
    }

    #[pyo3(signature = (ctx, *args))]
    fn __call__<'py>(&self, py: Python<'py>, ctx: &Bound<'py, PyAny>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        if self.keep_inputs {
            // Before the call: the versions the inputs had when the forward read them. (A
            // Python `forward` doing this cost about 1.5 µs a call: its frame, a generator.)
            let tensor = self.tensor_type.bind(py);
            let mut versions = Vec::with_capacity(args.len());
            for v in args.iter() {
                versions.push(if v.is_instance(tensor)? { v.getattr(intern!(py, "_version"))? } else { py.None().into_bound(py) });
            }
            ctx.setattr(intern!(py, "dynamo_inputs"), args)?;
            ctx.setattr(intern!(py, "dynamo_versions"), PyTuple::new(py, versions)?)?;
        }
        if self.keep_none_grads {
            // What `ctx.set_materialize_grads(False)` sets (torch/autograd/function.py).
            ctx.setattr(intern!(py, "materialize_grads"), false)?;
        }
        let outs = self.fw.bind(py).call1(args)?;
        let outs = outs.cast_into::<PyTuple>()?;
        let first_saved = self.n_out + self.writebacks.len();
        let mut saved = outs.get_slice(first_saved, outs.len());
        if !self.writebacks.is_empty() {
            // Note [saved inputs the forward writes]: an input the backward reads (saved, or
            // the source of a recomputed value) and the forward writes back is saved as it was
            // read: a copy taken before the write. Saving the input itself handed the backward
            // the written values (wrong gradients), or raised eager's "modified by an inplace
            // operation" error where eager's ops saved nothing.
            let written: Vec<Bound<'py, PyAny>> = self.writebacks.iter().map(|&(_, pos)| args.get_item(pos)).collect::<PyResult<_>>()?;
            if saved.iter().any(|v| written.iter().any(|w| w.is(&v))) {
                let copies: Vec<Bound<'py, PyAny>> = saved
                    .iter()
                    .map(|v| if written.iter().any(|w| w.is(&v)) { v.call_method0(intern!(py, "detach"))?.call_method0(intern!(py, "clone")) } else { Ok(v) })
                    .collect::<PyResult<_>>()?;
                saved = PyTuple::new(py, copies)?;
            }
        }
        for &(k, pos) in &self.writebacks {
            args.get_item(pos)?.call_method1(intern!(py, "copy_"), (outs.get_item(self.n_out + k)?,))?;
        }
        // `ctx.save_for_backward(*saved)` and `ctx.mark_non_differentiable(*marks)` only store
        // their arguments in these attributes (torch/autograd/function.py, FunctionCtx); the
        // C++ `Function.apply` reads them after `forward` returns.
        let tensor = self.tensor_type.bind(py);
        if saved.iter().all(|v| v.is_instance(tensor).unwrap_or(false) || v.is_none()) {
            ctx.setattr(intern!(py, "to_save"), saved)?;
        } else {
            // Symbolic sizes and numbers the backward needs (`grad * n` for `t * n` with `n` a
            // dynamic int) are not tensors: `save_for_backward` takes tensors only, so they ride
            // on `ctx` by position and `backward` puts them back in order (python/dynamo/aot.py).
            let mut tensors = Vec::new();
            let mut others = Vec::new();
            for (i, v) in saved.iter().enumerate() {
                if v.is_instance(tensor)? || v.is_none() {
                    tensors.push(v);
                } else {
                    others.push((i, v));
                }
            }
            ctx.setattr(intern!(py, "to_save"), PyTuple::new(py, tensors)?)?;
            ctx.setattr(intern!(py, "dynamo_saved_values"), others.into_pyobject(py)?)?;
        }
        let result = own_view_outputs(py, self.tensor_type.bind(py), &outs.get_slice(0, self.n_out))?;
        if !self.nondiff.is_empty() {
            let tensor = self.tensor_type.bind(py);
            let mut marks = Vec::new();
            for &k in &self.nondiff {
                let v = result.get_item(k)?;
                if v.is_instance(tensor)? {
                    marks.push(v);
                }
            }
            if !marks.is_empty() {
                ctx.setattr(intern!(py, "non_differentiable"), PyTuple::new(py, marks)?)?;
            }
        }
        Ok(result.into_any())
    }
}

/// The forward's outputs, with each one that is a view of an intermediate no other output shares
/// storage with replaced by a copy. Most view outputs never get here: the graph returns their
/// base and the view is made again after the call (Note [view outputs] in `aot.py`); this
/// covers the rest (`split`'s pieces, views a compiled graph makes where eager's value is not
/// one) (`clone`, which keeps the strides of a dense tensor). A view
/// returned from a custom `torch.autograd.Function` cannot be written in place by the caller
/// (autograd raises "Output 0 of CompiledFunction is a view and is being modified inplace"),
/// where eager's view of an intermediate can; no one else can see the difference, since the
/// intermediate it views is not returned. (torch's AOTAutograd instead returns the base and
/// makes the view again outside its Function.) Views that share storage with another output
/// are kept: copying them would break their aliasing.
fn own_view_outputs<'py>(py: Python<'py>, tensor: &Bound<'py, PyAny>, result: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
    let mut items: Vec<Bound<'py, PyAny>> = result.iter().collect();
    let storage = |t: &Bound<'py, PyAny>| -> PyResult<Option<usize>> {
        if !t.is_instance(tensor)? {
            return Ok(None);
        }
        Ok(Some(t.call_method0(intern!(py, "untyped_storage"))?.call_method0(intern!(py, "data_ptr"))?.extract()?))
    };
    let mut changed = false;
    for k in 0..items.len() {
        // `t._base` (a C getter) is None exactly when `t._is_view()` is false, without the
        // bound-method call.
        if !items[k].is_instance(tensor)? || items[k].getattr(intern!(py, "_base"))?.is_none() {
            continue;
        }
        let mine = storage(&items[k])?;
        let mut shared = false;
        for (j, other) in items.iter().enumerate() {
            if j != k && storage(other)? == mine {
                shared = true;
                break;
            }
        }
        if !shared {
            items[k] = clone_keeping_overlap(py, &items[k])?;
            changed = true;
        }
    }
    if !changed {
        return Ok(result.clone());
    }
    PyTuple::new(py, items)
}

/// A copy of `t` that keeps its broadcast dimensions broadcast: `clone` of an expanded view
/// (stride 0 over a size above 1) would give a dense tensor, on which an in-place write
/// succeeds where eager's raises ("more than one element of the written-to tensor refers to a
/// single memory location"; fuzzer seed 73010, program 192). Such a view is copied at size 1
/// along its stride-0 dimensions and expanded again.
fn clone_keeping_overlap<'py>(py: Python<'py>, t: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let size: Vec<i64> = t.call_method0(intern!(py, "size"))?.extract()?;
    let stride: Vec<i64> = t.call_method0(intern!(py, "stride"))?.extract()?;
    if !size.iter().zip(&stride).any(|(&n, &s)| s == 0 && n > 1) {
        return t.call_method0(intern!(py, "clone"));
    }
    let slice_type = py.get_type::<pyo3::types::PySlice>();
    let index = size.iter().zip(&stride).map(|(_, &s)| if s == 0 { slice_type.call1((0, 1)) } else { slice_type.call1((py.None(),)) }).collect::<PyResult<Vec<_>>>()?;
    let compact = t.get_item(PyTuple::new(py, index)?)?.call_method0(intern!(py, "clone"))?;
    compact.call_method1(intern!(py, "expand"), (PyTuple::new(py, &size)?,))
}

/// The callable a captured graph runs: `apply(*args, *extra)`, or `eager_forward(*args)` under
/// saved-tensor hooks (Note [saved-tensor hooks at run time]; a non-reentrant
/// `torch.utils.checkpoint` region's among them, Note [checkpoint] in `aot.py`). `extra`: the graph's get_attr values.
#[pyclass(module = "dynamo._C", frozen)]
pub struct AotRuntime {
    apply: Py<PyAny>,
    extra: Py<PyTuple>,
    eager_forward: Py<PyAny>,
    top_hooks: Py<PyAny>,
    /// `torch.is_anomaly_enabled` (Note [anomaly mode]).
    anomaly_enabled: Py<PyAny>,
    /// The `torch.autograd.Function` subclass (for debugging: its `aot_plan`).
    #[pyo3(get)]
    function: Py<PyAny>,
    /// Whether the saved-tensor hooks fallback was logged (once per compiled graph).
    logged_checkpoint: AtomicBool,
    /// Positions (among `args` then `extra`) of the inputs the forward writes back into.
    mutated_inputs: Vec<usize>,
    tensor_type: Py<PyType>,
    /// Whether the aliasing fallback was logged (once per compiled graph).
    logged_alias: AtomicBool,
    /// Whether the forward-AD fallback was logged (once per compiled graph).
    logged_dual: AtomicBool,
    /// Positions (among `args` then `extra`) of inputs that require grad but that no output's
    /// gradient reaches: passed to `apply` detached (Note [inputs no gradient reaches] in aot.py).
    unreached: Vec<usize>,
}

#[pymethods]
impl AotRuntime {
    #[new]
    #[pyo3(signature = (function, extra, eager_forward, mutated_inputs=Vec::new(), unreached=Vec::new()))]
    fn new(py: Python<'_>, function: Py<PyAny>, extra: Py<PyTuple>, eager_forward: Py<PyAny>, mutated_inputs: Vec<usize>, unreached: Vec<usize>) -> PyResult<Self> {
        let apply = function.bind(py).getattr("apply")?.unbind();
        let top_hooks = py.import("torch._C._autograd")?.getattr("_top_saved_tensors_default_hooks")?.unbind();
        let anomaly_enabled = py.import("torch")?.getattr("is_anomaly_enabled")?.unbind();
        let tensor_type = py.import("torch")?.getattr("Tensor")?.cast_into::<PyType>()?.unbind();
        Ok(AotRuntime {
            apply,
            extra,
            eager_forward,
            top_hooks,
            anomaly_enabled,
            function,
            logged_checkpoint: AtomicBool::new(false),
            mutated_inputs,
            tensor_type,
            logged_alias: AtomicBool::new(false),
            logged_dual: AtomicBool::new(false),
            unreached,
        })
    }

    #[pyo3(signature = (*args))]
    fn __call__<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        // Note [saved-tensor hooks at run time]: the compiled Function saves the partitioner's
        // residuals, not what each op saves, so under `saved_tensors_hooks` (activation
        // compression, offloading, a non-reentrant checkpoint's counting hooks) the pack hook
        // saw another set of tensors, and value-changing hooks gave other gradients. The graph
        // runs through torch's autograd instead, op by op, as eager does (torch.compile does not
        // compile under such hooks either).
        let hooks = self.top_hooks.bind(py).call1((false,))?;
        if !hooks.is_none() {
            if !self.logged_checkpoint.swap(true, Ordering::Relaxed) {
                let checkpoint = hooks
                    .get_item(0)
                    .and_then(|h| h.getattr(intern!(py, "__module__")))
                    .is_ok_and(|m| m.extract::<&str>().is_ok_and(|m| m == "torch.utils.checkpoint"));
                if checkpoint {
                    tracing::info!(
                        target: "aot::partition",
                        "graph runs through torch's autograd inside a non-reentrant torch.utils.checkpoint region \
                         (its recomputation must save the tensors eager saves; checkpoint recomputes it eagerly)"
                    );
                } else {
                    tracing::info!(
                        target: "aot::partition",
                        "graph runs through torch's autograd under saved-tensor hooks \
                         (the hooks must see the tensors each op saves, not the compiled graph's residuals)"
                    );
                }
            }
            return self.eager_forward.bind(py).call1(args);
        }
        // Note [forward-AD graphs] in aot.py: a dual input's tangent would not pass through the
        // compiled Function (it has no `jvp`); torch's ops carry it.
        if crate::inductor::wrapper::has_dual_input(py, args)? {
            if !self.logged_dual.swap(true, Ordering::Relaxed) {
                tracing::info!(target: "aot::partition", "graph runs through torch's autograd: an input is a forward-AD dual tensor");
            }
            return self.eager_forward.bind(py).call1(args);
        }
        // Note [anomaly mode]: under `torch.autograd.set_detect_anomaly(True)` eager's backward
        // checks every node's gradients for NaN and names the node that made one
        // (`SqrtBackward0`), with the traceback of the forward op that created it. The compiled
        // backward is one node, which would take the blame under the graph's last op's name, so
        // while anomaly detection is on the graph runs through torch's autograd, op by op, as
        // the debugging tool expects.
        if self.anomaly_enabled.bind(py).call0()?.is_truthy()? {
            return self.eager_forward.bind(py).call1(args);
        }
        let extra = self.extra.bind(py);
        if self.mutated_input_aliases(py, args, extra)? {
            if !self.logged_alias.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    target: "aot::partition",
                    "graph runs through torch: a mutated input shares storage with another input \
                     (eager sees the write through both; the compiled forward reads the inputs before writing back)"
                );
            }
            return self.eager_forward.bind(py).call1(args);
        }
        if extra.is_empty() && self.unreached.is_empty() {
            self.apply.bind(py).call1(args)
        } else {
            let mut all: Vec<Bound<'py, PyAny>> = args.iter().chain(extra.iter()).collect();
            for &i in &self.unreached {
                if let Some(a) = all.get_mut(i) {
                    if a.is_instance(self.tensor_type.bind(py))? {
                        *a = a.call_method0(intern!(py, "detach"))?;
                    }
                }
            }
            self.apply.bind(py).call1(PyTuple::new(py, all)?)
        }
    }
}

impl AotRuntime {
    /// True when an input the forward writes back into shares storage with another tensor input
    /// (`f(a, a.detach())` mutating the second, `x.data.mul_(2)`): eager sees the write through
    /// both names, the functional forward reads every input before its write-back. The same
    /// check as the inductor runtime's (`functionalize::mutated_input_shares_storage`).
    fn mutated_input_aliases(&self, py: Python<'_>, args: &Bound<'_, PyTuple>, extra: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.mutated_inputs.is_empty() {
            return Ok(false);
        }
        let inputs: Vec<Bound<'_, PyAny>> = args.iter().chain(extra.iter()).collect();
        let tensor = self.tensor_type.bind(py);
        crate::inductor::functionalize::mutated_input_shares_storage(py, &inputs, self.mutated_inputs.iter().copied(), tensor)
    }
}

/// Registers the runtime classes on `dynamo._C`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AotForward>()?;
    m.add_class::<AotRuntime>()?;
    Ok(())
}
