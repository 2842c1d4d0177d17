//! The runtime plan and the `CompiledGraph` pyclass that runs it (PyTorch: the wrapper code
//! `torch/_inductor/codegen/wrapper.py` generates, here interpreted from a compact plan).
//!
//! Invariants:
//! - A call first checks every tensor input against compile-time metadata (sizes, strides, dtype,
//!   device, requires_grad); on any mismatch the whole graph runs through `gm.forward`.
//! - Fallback outputs that kernels read are checked the same way before the kernel runs.
//! - Kernel outputs are allocated with `torch.empty_strided` at the layout chosen by lowering and
//!   are written completely by their kernel before anything reads them.
//! - Nothing on the call path imports modules or looks up module attributes: callables, dtype
//!   objects, size/stride tuples and kwargs dicts are cached at compile time.

use std::sync::atomic::Ordering;

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use super::codegen::CodegenResult;
use super::counters;
use super::ir::Layout;

/// How a runtime value is rebuilt from the environment: a buffer slot, a constant, or a container.
pub enum ArgT {
    Slot(usize),
    Const(Py<PyAny>),
    Tuple(Vec<ArgT>),
    List(Vec<ArgT>),
}

impl ArgT {
    /// Calls `f` on every slot this template reads.
    pub fn for_each_slot(&self, f: &mut impl FnMut(usize)) {
        match self {
            ArgT::Slot(i) => f(*i),
            ArgT::Const(_) => {}
            ArgT::Tuple(items) | ArgT::List(items) => items.iter().for_each(|a| a.for_each_slot(f)),
        }
    }

    fn build<'py>(&self, py: Python<'py>, env: &[Option<Py<PyAny>>]) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            ArgT::Slot(i) => match &env[*i] {
                Some(v) => v.bind(py).clone(),
                None => return Err(PyRuntimeError::new_err(format!("inductor: buf{i} read before it was computed"))),
            },
            ArgT::Const(v) => v.bind(py).clone(),
            ArgT::Tuple(items) => {
                let v: Vec<Bound<'py, PyAny>> = items.iter().map(|a| a.build(py, env)).collect::<PyResult<_>>()?;
                PyTuple::new(py, v)?.into_any()
            }
            ArgT::List(items) => {
                let v: Vec<Bound<'py, PyAny>> = items.iter().map(|a| a.build(py, env)).collect::<PyResult<_>>()?;
                PyList::new(py, v)?.into_any()
            }
        })
    }
}

/// Expected metadata of a tensor, with the Python objects to compare against cached.
pub struct TensorCheck {
    pub sizes: Py<PyTuple>,
    pub strides: Py<PyTuple>,
    pub dtype: Py<PyAny>,
    /// The CUDA device the tensor must be on (`None`: the CPU); the compile's target.
    pub cuda: Option<i64>,
}

impl TensorCheck {
    pub fn new(py: Python<'_>, layout: &Layout, dtype: Py<PyAny>) -> PyResult<TensorCheck> {
        Ok(TensorCheck {
            sizes: PyTuple::new(py, &layout.sizes)?.unbind(),
            strides: PyTuple::new(py, &layout.strides)?.unbind(),
            dtype,
            cuda: match super::cuda::target() {
                super::cuda::Target::Cpu => None,
                super::cuda::Target::Cuda(i) => Some(i),
            },
        })
    }

    /// True when `t` is a CPU tensor not requiring grad (unless `grad_free`) with exactly this
    /// dtype and sizes, and these strides in every dimension of size other than 1.
    fn matches(&self, py: Python<'_>, t: &Bound<'_, PyAny>, tensor_type: &Bound<'_, PyAny>, grad_free: bool) -> PyResult<bool> {
        if !t.is_instance(tensor_type)? {
            return Ok(false);
        }
        if !t.getattr(intern!(py, "dtype"))?.is(self.dtype.bind(py)) {
            return Ok(false);
        }
        match self.cuda {
            None => {
                if !t.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
                    return Ok(false);
                }
            }
            Some(idx) => {
                if !t.getattr(intern!(py, "is_cuda"))?.is_truthy()? || t.call_method0(intern!(py, "get_device"))?.extract::<i64>()? != idx {
                    return Ok(false);
                }
            }
        }
        if !grad_free && t.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
            return Ok(false);
        }
        if !t.getattr(intern!(py, "shape"))?.eq(self.sizes.bind(py))? {
            return Ok(false);
        }
        let strides = t.call_method0(intern!(py, "stride"))?;
        if !strides.eq(self.strides.bind(py))? {
            // The stride of a size-1 dimension is never used to address an element (the index
            // there is always 0), and torch sets it differently in different ops (a [N, C, 1, 1]
            // result may come back with strides (C, 1, 1, 1) or (C, 1, C, C)): only the other
            // dimensions must agree.
            let got: Vec<i64> = strides.extract()?;
            let want: Vec<i64> = self.strides.bind(py).extract()?;
            let sizes: Vec<i64> = self.sizes.bind(py).extract()?;
            if got.len() != want.len() || sizes.iter().zip(got.iter().zip(&want)).any(|(&n, (a, b))| n != 1 && a != b) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// How a fallback node is called.
pub enum FallbackCall {
    /// `callable(*args, **kwargs)` (call_function and call_module).
    Call(Py<PyAny>),
    /// `args[0].name(*args[1:], **kwargs)`.
    Method(Py<PyString>),
}

/// How to allocate one kernel output: `torch.empty_strided(sizes, strides, **kwargs)` into `slot`
/// (kwargs: dtype and a cached `torch.device("cpu")`).
pub struct Alloc {
    pub slot: usize,
    pub sizes: Py<PyTuple>,
    pub strides: Py<PyTuple>,
    pub kwargs: Py<PyDict>,
}

/// One runtime step.
pub enum RtStep {
    /// Run kernel `kernel` of the JIT module; `args` are buffer slots (in kernel argument order),
    /// `allocs` the outputs to allocate first, `big` releases the GIL while it runs.
    Kernel { kernel: usize, args: Vec<usize>, allocs: Vec<Alloc>, big: bool },
    /// Call into torch and put the result into `slot`; `check` validates it when kernels read it.
    Fallback { slot: usize, call: FallbackCall, args: Vec<ArgT>, kwargs: Vec<(Py<PyString>, ArgT)>, check: Option<TensorCheck> },
}

/// A compiled plan: inputs to check, steps, the output template.
pub struct Runtime {
    /// See Note [grad-free graphs]: inputs may require grad, but grad mode must be off.
    pub grad_free: bool,
    /// Note [guarded inputs]: the caller (dynamo's transformed code) has already checked every
    /// graph input with TENSOR_MATCH guards (dtype, device, sizes, strides, requires_grad), so
    /// the per-call input checks are skipped; a direct `inductor_compile` keeps them.
    pub inputs_guarded: bool,
    pub is_grad_enabled: Py<PyAny>,
    pub n_slots: usize,
    /// (graph input position, slot, check) for every placeholder.
    pub inputs: Vec<(usize, usize, Option<TensorCheck>)>,
    /// (slot, value, check) for get_attr values.
    pub constants: Vec<(usize, Py<PyAny>, Option<TensorCheck>)>,
    pub steps: Vec<RtStep>,
    /// Per step, the slots whose last reader it is: they are dropped right after it, so a dead
    /// intermediate's memory goes back to the allocator for the next ones (Note [dead buffers]).
    pub free_after: Vec<Vec<usize>>,
    pub output: ArgT,
    pub codegen: Option<CodegenResult>,
    /// Set when the kernels run on a CUDA device (`cuda.rs`); `codegen` is then `None`.
    pub cuda: Option<super::cuda::CudaRuntime>,
    pub empty_strided: Py<PyAny>,
    pub tensor_type: Py<PyAny>,
    /// (input slot, value slot): after the steps, `env[dst].copy_(env[src])` (mutated inputs,
    /// see `functionalize`).
    pub writebacks: Vec<(usize, usize)>,
    /// Per-step timing (`DYNAMO_INDUCTOR_STEP_TIMES=1` at compile time; None otherwise): see
    /// [`StepTimes`].
    pub step_times: Option<StepTimes>,
}

/// Wall time of each runtime step over the calls of one compiled graph, for finding the slow
/// ones (`CompiledGraph.step_times()`). The minimum over calls is the figure to read on a busy
/// machine: preemption only ever adds time. Enabled by `DYNAMO_INDUCTOR_STEP_TIMES=1` when the
/// graph is compiled; off, the call path does not read the clock.
pub struct StepTimes {
    /// One label per step (the kernel's name, the fallback's target), then "prologue" (input
    /// binding) and "epilogue" (write-backs and the output).
    pub labels: Vec<String>,
    /// (minimum ns, total ns, calls) per label.
    pub stats: std::sync::Mutex<Vec<(u64, u64, u64)>>,
}

impl StepTimes {
    /// Timing for `labels` (the steps), with "prologue" and "epilogue" appended.
    pub fn new(mut labels: Vec<String>) -> StepTimes {
        labels.push("prologue".into());
        labels.push("epilogue".into());
        let n = labels.len();
        StepTimes { labels, stats: std::sync::Mutex::new(vec![(u64::MAX, 0, 0); n]) }
    }

    fn record(&self, k: usize, since: std::time::Instant) {
        let ns = since.elapsed().as_nanos() as u64;
        if let Ok(mut s) = self.stats.lock() {
            let e = &mut s[k];
            e.0 = e.0.min(ns);
            e.1 += ns;
            e.2 += 1;
        }
    }

    /// True when `DYNAMO_INDUCTOR_STEP_TIMES` is set to a non-empty value other than "0".
    pub fn enabled() -> bool {
        std::env::var("DYNAMO_INDUCTOR_STEP_TIMES").is_ok_and(|v| !v.is_empty() && v != "0")
    }
}

impl Runtime {
    /// Runs the plan; `Ok(None)` means a metadata check failed and the caller must run eagerly.
    fn run<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let timer = self.step_times.as_ref();
        let n_steps = self.steps.len();
        let mut t0 = timer.map(|_| std::time::Instant::now());
        let tensor_type = self.tensor_type.bind(py);
        let mut env: Vec<Option<Py<PyAny>>> = (0..self.n_slots).map(|_| None).collect();
        if args.len() != self.inputs.len() {
            return Ok(None);
        }
        if self.grad_free && self.is_grad_enabled.bind(py).call0()?.is_truthy()? {
            return Ok(None);
        }
        if self.mutated_input_aliases(py, args)? {
            return Ok(None);
        }
        for (pos, slot, check) in &self.inputs {
            let v = args.get_item(*pos)?;
            if let (Some(check), false) = (check, self.inputs_guarded) {
                if !check.matches(py, &v, tensor_type, self.grad_free)? {
                    return Ok(None);
                }
            }
            env[*slot] = Some(v.unbind());
        }
        for (slot, value, check) in &self.constants {
            if let Some(check) = check {
                if !check.matches(py, value.bind(py), tensor_type, self.grad_free)? {
                    return Ok(None);
                }
            }
            env[*slot] = Some(value.clone_ref(py));
        }
        let data_ptr = intern!(py, "data_ptr");
        if let (Some(t), Some(start)) = (timer, t0) {
            t.record(n_steps, start);
        }
        for (si, step) in self.steps.iter().enumerate() {
            if timer.is_some() {
                t0 = Some(std::time::Instant::now());
            }
            match step {
                RtStep::Kernel { kernel, args, allocs, big } => {
                    for a in allocs {
                        let t = self
                            .empty_strided
                            .bind(py)
                            .call((a.sizes.bind(py), a.strides.bind(py)), Some(a.kwargs.bind(py)))?;
                        env[a.slot] = Some(t.unbind());
                    }
                    let mut ptrs: Vec<usize> = Vec::with_capacity(args.len());
                    for slot in args {
                        let t = env[*slot].as_ref().expect("kernel argument not computed").bind(py);
                        ptrs.push(t.call_method0(data_ptr)?.extract::<usize>()?);
                    }
                    let k = *kernel;
                    if let Some(cu) = &self.cuda {
                        cu.launch(py, k, &ptrs)?;
                        counters::KERNEL_CALLS.fetch_add(1, Ordering::Relaxed);
                        for slot in &self.free_after[si] {
                            env[*slot] = None;
                        }
                        continue;
                    }
                    let cg = self.codegen.as_ref().expect("kernel step without codegen");
                    // SAFETY: every argument is a tensor whose layout was checked (inputs,
                    // fallback results) or chosen by us (outputs); outputs are fresh allocations.
                    if *big {
                        py.detach(|| unsafe { cg.jit.run(k, std::mem::transmute::<&[usize], &[*mut u8]>(&ptrs)) });
                    } else {
                        unsafe { cg.jit.run(k, std::mem::transmute::<&[usize], &[*mut u8]>(&ptrs)) };
                    }
                    counters::KERNEL_CALLS.fetch_add(1, Ordering::Relaxed);
                    if let (Some(t), Some(start)) = (timer, t0) {
                        t.record(si, start);
                    }
                }
                RtStep::Fallback { slot, call, args, kwargs, check } => {
                    let built: Vec<Bound<'py, PyAny>> = args.iter().map(|a| a.build(py, &env)).collect::<PyResult<_>>()?;
                    let kw = if kwargs.is_empty() {
                        None
                    } else {
                        let d = PyDict::new(py);
                        for (k, v) in kwargs {
                            d.set_item(k.bind(py), v.build(py, &env)?)?;
                        }
                        Some(d)
                    };
                    let res = match call {
                        FallbackCall::Call(f) => f.bind(py).call(PyTuple::new(py, built)?, kw.as_ref())?,
                        FallbackCall::Method(name) => {
                            let (this, rest) = built
                                .split_first()
                                .ok_or_else(|| PyRuntimeError::new_err("inductor: method call without self"))?;
                            this.getattr(name.bind(py))?.call(PyTuple::new(py, rest)?, kw.as_ref())?
                        }
                    };
                    if let Some(check) = check {
                        if !check.matches(py, &res, tensor_type, self.grad_free)? {
                            return Ok(None);
                        }
                    }
                    env[*slot] = Some(res.unbind());
                    if let (Some(t), Some(start)) = (timer, t0) {
                        t.record(si, start);
                    }
                }
            }
            for slot in &self.free_after[si] {
                env[*slot] = None;
            }
        }
        if timer.is_some() {
            t0 = Some(std::time::Instant::now());
        }
        for (dst, src) in &self.writebacks {
            let (Some(d), Some(v)) = (&env[*dst], &env[*src]) else {
                return Err(PyRuntimeError::new_err("inductor: writeback of a value that was not computed"));
            };
            d.bind(py).call_method1(intern!(py, "copy_"), (v.bind(py),))?;
        }
        let out = self.output.build(py, &env)?;
        if let (Some(t), Some(start)) = (timer, t0) {
            t.record(n_steps + 1, start);
        }
        Ok(Some(out))
    }

    /// True when a mutated input shares storage with another tensor input: eager would see the
    /// mutation through both names, the functionalized plan would not, so the caller runs eagerly.
    fn mutated_input_aliases(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.writebacks.is_empty() {
            return Ok(false);
        }
        let inputs: Vec<Bound<'_, PyAny>> = args.iter().collect();
        let mutated = self
            .writebacks
            .iter()
            .filter_map(|(dst, _)| self.inputs.iter().find(|(_, slot, _)| slot == dst).map(|(pos, _, _)| *pos));
        super::functionalize::mutated_input_shares_storage(py, &inputs, mutated, self.tensor_type.bind(py))
    }
}

/// A graph compiled by `inductor_compile`; calling it returns what `gm.forward` would.
#[pyclass(module = "dynamo._C", frozen)]
pub struct CompiledGraph {
    pub forward: Py<PyAny>,
    pub runtime: Option<Runtime>,
    pub kernel_names: Vec<String>,
    pub llvm_ir: String,
    pub plan: String,
    pub kernel_ir: String,
    /// The lowered IR before fusion, one buffer a line; rendered only for `DYNAMO_DEBUG_DIR`.
    pub ir_pre_fusion: String,
}

#[pymethods]
impl CompiledGraph {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if kwargs.is_some_and(|k| !k.is_empty()) {
            return self.forward.bind(py).call(args, kwargs);
        }
        if let Some(rt) = &self.runtime {
            match rt.run(py, args) {
                Ok(Some(out)) => return Ok(out),
                Ok(None) => {}
                Err(err) => {
                    // Note [errors rerun eagerly]: a step raised (an index out of range in a
                    // fallback, a user error torch reports). The plan defers every input
                    // mutation to its end and its kernels write only fresh buffers, so nothing
                    // the caller can see has changed yet: running `gm.forward` performs the
                    // graph's in-place updates in program order and raises where eager raises,
                    // leaving exactly eager's state behind (the trial found `x.mul_(2)` lost
                    // before a failing gather).
                    tracing::debug!(target: "inductor::guards", "a step raised ({err}); running gm.forward");
                    return self.forward.bind(py).call1(args);
                }
            }
            counters::GUARD_FAILURES.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: "inductor::guards", "input metadata differs from compile time; running gm.forward");
        }
        self.forward.bind(py).call1(args)
    }

    /// `[(label, min_ns, total_ns, calls)]` per runtime step when the graph was compiled with
    /// `DYNAMO_INDUCTOR_STEP_TIMES=1` (see `StepTimes`), else an empty list.
    fn step_times(&self) -> Vec<(String, u64, u64, u64)> {
        let Some(t) = self.runtime.as_ref().and_then(|r| r.step_times.as_ref()) else { return Vec::new() };
        let stats = t.stats.lock().map(|s| s.clone()).unwrap_or_default();
        t.labels.iter().cloned().zip(stats).map(|(l, (mn, tot, n))| (l, if n == 0 { 0 } else { mn }, tot, n)).collect()
    }

    /// Names of the JIT-compiled kernels, in execution order.
    #[getter]
    fn kernel_names(&self) -> Vec<String> {
        self.kernel_names.clone()
    }

    /// LLVM IR of the kernel module after the O3 pipeline ("" when no kernel was compiled).
    #[getter]
    fn llvm_ir(&self) -> &str {
        &self.llvm_ir
    }

    /// Human-readable plan: kernels with their fused nodes, fallbacks and why.
    #[getter]
    fn plan(&self) -> &str {
        &self.plan
    }

    /// The lowered IR before fusion ("" unless `DYNAMO_DEBUG_DIR` is set, or the graph never
    /// reached lowering).
    #[getter]
    fn ir_pre_fusion(&self) -> &str {
        &self.ir_pre_fusion
    }

    /// Kernel IR (the `dynamo_llvm::Kernel` dumps) of every kernel.
    #[getter]
    fn kernel_ir(&self) -> &str {
        &self.kernel_ir
    }

    /// True when the whole graph runs through `gm.forward`.
    #[getter]
    fn is_eager(&self) -> bool {
        self.runtime.is_none()
    }

    fn __repr__(&self) -> String {
        format!("<CompiledGraph kernels={:?} eager={}>", self.kernel_names, self.runtime.is_none())
    }
}
