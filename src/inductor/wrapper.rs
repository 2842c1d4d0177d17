//! The runtime plan and the `CompiledGraph` pyclass that runs it (PyTorch: the wrapper code
//! `torch/_inductor/codegen/wrapper.py` generates, here interpreted from a compact plan).
//!
//! Invariants:
//! - A call first checks every tensor input against compile-time metadata (sizes, strides, dtype,
//!   device, requires_grad); on any mismatch the whole graph runs through `gm.forward`.
//! - Fallback outputs that kernels read are checked the same way before the kernel runs.
//! - Kernel outputs are allocated (`_empty_strided_cpu` on CPU, Note [fast allocation] in
//!   `inductor/mod.rs`; `torch.empty_strided` on CUDA) at the layout chosen by lowering and are
//!   written completely by their kernel before anything reads them.
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

    /// True when `t` would pass [`TensorCheck::matches`] with other strides: a tensor of this
    /// device, dtype and sizes (not requiring grad unless `grad_free`).
    fn matches_but_strides(&self, py: Python<'_>, t: &Bound<'_, PyAny>, tensor_type: &Bound<'_, PyAny>, grad_free: bool) -> PyResult<bool> {
        let any_strides = TensorCheck { sizes: self.sizes.clone_ref(py), strides: t.call_method0(intern!(py, "stride"))?.cast_into::<PyTuple>()?.unbind(), dtype: self.dtype.clone_ref(py), cuda: self.cuda };
        any_strides.matches(py, t, tensor_type, grad_free)
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
        // Note [tensors whose memory is not their value] (fx_import.rs): a negative-bit tensor
        // where the compile had a plain one. (A ZeroTensor shows as a null data pointer where a
        // kernel reads it; the fast check, torch's `TensorGuards`, compares dispatch keys.)
        if t.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
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

/// `FallbackCall::TupleItem`'s item taken straight from its tuple, when `args[0]` holds exactly a
/// tuple; `None` otherwise (the step then calls `operator.getitem`, which raises or indexes as
/// eagerly). An index out of range raises the tuple's own IndexError.
fn tuple_item<'py>(py: Python<'py>, call: &FallbackCall, args: &[ArgT], env: &[Option<Py<PyAny>>]) -> PyResult<Option<Bound<'py, PyAny>>> {
    let (FallbackCall::TupleItem(k, _), Some(ArgT::Slot(s))) = (call, args.first()) else { return Ok(None) };
    let Some(v) = env[*s].as_ref().map(|v| v.bind(py)) else { return Ok(None) };
    let Ok(tuple) = v.cast_exact::<PyTuple>() else { return Ok(None) };
    let n = tuple.len() as isize;
    let at = if *k < 0 { *k + n } else { *k };
    Ok(Some(if (0..n).contains(&at) { tuple.get_item(at as usize)? } else { tuple.as_any().get_item(*k)? }))
}

/// How a fallback node is called.
pub enum FallbackCall {
    /// `callable(*args, **kwargs)` (call_function and call_module).
    Call(Py<PyAny>),
    /// `args[0].name(*args[1:], **kwargs)`.
    Method(Py<PyString>),
    /// `operator.getitem(args[0], index)` with a constant int index (a tuple result's item:
    /// `max`'s values, attention's outputs): taken straight from the tuple when `args[0]` is
    /// one, otherwise called as `getitem` (the function kept here), so what is not a tuple
    /// raises or indexes as it would eagerly.
    TupleItem(isize, Py<PyAny>),
}

/// How to allocate one kernel output: `torch.empty_strided(sizes, strides, **kwargs)` into `slot`
/// (kwargs: dtype and a cached `torch.device`), or `_empty_strided_cpu(sizes, strides, dtype)`
/// (Note [fast allocation] in `inductor/mod.rs`).
pub struct Alloc {
    pub slot: usize,
    pub sizes: Py<PyTuple>,
    pub strides: Py<PyTuple>,
    pub kwargs: Py<PyDict>,
    pub dtype: Py<PyAny>,
}

/// Note [scratch arena]: a kernel output that only kernels read (not a fallback, not the
/// graph's output, not a write-back) needs no tensor: it lives at a fixed offset of a per-graph
/// arena, reused by every call. Offsets come from the buffers' lifetimes in step order
/// ([`plan_scratch`]: a buffer defined at step d and last read at step l may share bytes with one
/// whose last reader ran before d), so the arena holds what is live at once, not their sum.
/// This replaces, per such buffer and call, a `torch.empty_strided` (Python argument parsing,
/// malloc, and page faults whenever glibc had returned the memory to the system: kernels of
/// tiny BERT's backward spent 30 of their 40 µs there) and the `data_ptr` read. A call takes an
/// arena from `pool` and puts it back when done; a call that finds the pool empty (another
/// thread runs the same graph, its kernels having released the GIL) makes a fresh one, so two
/// calls never share one. Graphs whose arena would exceed [`SCRATCH_MAX_BYTES`] keep
/// allocating tensors (an arena is memory held between calls). GPU graphs do not use it.
pub struct Scratch {
    /// Per buffer slot: its byte offset in the arena, for the buffers that live there.
    pub offsets: Vec<Option<usize>>,
    /// Arena size in bytes.
    pub bytes: usize,
    pool: parking_lot::Mutex<Vec<ScratchBuf>>,
}

/// Largest arena a graph keeps between calls (Note [scratch arena]).
pub const SCRATCH_MAX_BYTES: usize = 16 << 20;

/// Alignment of the arena and of every buffer in it (a cache line, as torch's CPU allocator).
const SCRATCH_ALIGN: usize = 64;

/// One arena: `bytes` zeroed bytes aligned to `SCRATCH_ALIGN`, freed on drop.
struct ScratchBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: the arena is plain memory owned by this value; the pool hands it to one call at a time.
unsafe impl Send for ScratchBuf {}

impl ScratchBuf {
    fn new(bytes: usize) -> ScratchBuf {
        let layout = std::alloc::Layout::from_size_align(bytes.max(SCRATCH_ALIGN), SCRATCH_ALIGN).expect("scratch layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        ScratchBuf { ptr, layout }
    }
}

impl Drop for ScratchBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// An arena taken from a [`Scratch`]'s pool for one call; goes back to the pool on drop (also
/// when the call fails).
struct ScratchLease<'a> {
    scratch: &'a Scratch,
    buf: Option<ScratchBuf>,
}

impl ScratchLease<'_> {
    fn base(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.ptr.as_ptr() as usize)
    }
}

impl Drop for ScratchLease<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.scratch.pool.lock().push(b);
        }
    }
}

impl Scratch {
    /// An arena layout: `offsets` per slot and the total size (see [`plan_scratch`]).
    pub fn new(offsets: Vec<Option<usize>>, bytes: usize) -> Scratch {
        Scratch { offsets, bytes, pool: parking_lot::Mutex::new(Vec::new()) }
    }

    fn lease(&self) -> ScratchLease<'_> {
        let buf = self.pool.lock().pop().unwrap_or_else(|| ScratchBuf::new(self.bytes));
        ScratchLease { scratch: self, buf: Some(buf) }
    }
}

/// Offsets in one arena for buffers given as `(first step, last step, bytes)`, and the arena's
/// size (Note [scratch arena]). Buffers are placed in order of their first step, each at the
/// lowest offset (a multiple of 64) where it overlaps no buffer still live at that step; a
/// buffer last read at step `l` is live through `l`, so one defined at `l` (the same kernel
/// reads the first and writes the second) never shares its bytes.
pub fn plan_scratch(buffers: &[(usize, usize, usize)]) -> (Vec<usize>, usize) {
    let round = |n: usize| n.div_ceil(SCRATCH_ALIGN).max(1) * SCRATCH_ALIGN;
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| buffers[i].0);
    let mut offsets = vec![0; buffers.len()];
    // (offset, end, last step) of the buffers placed so far.
    let mut placed: Vec<(usize, usize, usize)> = Vec::new();
    let mut total = 0;
    for i in order {
        let (def, _, bytes) = buffers[i];
        let size = round(bytes);
        let mut live: Vec<(usize, usize)> = placed.iter().filter(|p| p.2 >= def).map(|p| (p.0, p.1)).collect();
        live.sort_unstable();
        let mut at = 0;
        for (lo, hi) in live {
            if at + size <= lo {
                break;
            }
            at = at.max(hi);
        }
        offsets[i] = at;
        placed.push((at, at + size, buffers[i].1));
        total = total.max(at + size);
    }
    (offsets, total)
}

/// One runtime step.
pub enum RtStep {
    /// Run kernel `kernel` of the JIT module; `args` are buffer slots (in kernel argument order),
    /// `allocs` the outputs to allocate first, `big` releases the GIL while it runs.
    Kernel { kernel: usize, args: Vec<usize>, allocs: Vec<Alloc>, big: bool },
    /// Call into torch and put the result into `slot`; `check` validates it when kernels read it.
    Fallback { slot: usize, call: FallbackCall, args: Vec<ArgT>, kwargs: Vec<(Py<PyString>, ArgT)>, check: Option<TensorCheck> },
    /// A view made without torch's view machinery (Note [alias views] in alias.rs):
    /// `reinterpret(env[src], sizes, strides, 0)` into `slot`, or `env[src]` itself when
    /// `layout` is None.
    Alias { slot: usize, src: usize, layout: Option<(Py<PyTuple>, Py<PyTuple>, i64)>, reinterpret: Py<PyAny> },
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
    /// `empty_strided` is `_empty_strided_cpu`, called with positional (sizes, strides, dtype).
    pub fast_alloc: bool,
    pub tensor_type: Py<PyAny>,
    /// (input slot, value slot, in-place ops): after the steps, `env[dst].copy_(env[src])`
    /// (mutated inputs, see `functionalize`), then its version counter moved on by the in-place
    /// ops after the first (Note [version counter of written-back inputs]); the flag: the value's
    /// shape may differ from the input's (an `out=` of another shape), which is then resized.
    pub writebacks: Vec<(usize, usize, usize, bool)>,
    /// Note [index checks] (`GraphIr::index_checks`): slots of 0-d float32 tensors, nonzero when
    /// an index the kernels read rows with was out of range. Read after the steps, before the
    /// write-backs: a nonzero one fails the call, which then runs `gm.forward` (Note [errors
    /// rerun eagerly]), so torch raises its own error from the same state.
    pub index_checks: Vec<usize>,
    /// Per-step timing (`DYNAMO_INDUCTOR_STEP_TIMES=1` at compile time; None otherwise): see
    /// [`StepTimes`].
    pub step_times: Option<StepTimes>,
    /// Kernel-only intermediates' arena (Note [scratch arena]); None: every kernel output is a
    /// tensor.
    pub scratch: Option<Scratch>,
    /// Note [fast input checks]: when every graph input is a checked tensor, in order, torch's
    /// C++ `TensorGuards(...).check` made from the first inputs that passed the per-input checks
    /// (None inside: not possible). It pins the same properties and more (every stride, the
    /// dispatch keys), so a pass skips the per-input checks (six Python attribute reads a
    /// tensor: ~20 µs a call for tiny BERT's backward graph, 45 inputs); a failure runs them.
    pub fast_inputs: std::sync::OnceLock<Option<Py<PyAny>>>,
    pub tensor_guards: Option<Py<PyAny>>,
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
            tracing::debug!(target: "inductor::guards", "{} arguments for {} inputs", args.len(), self.inputs.len());
            return Ok(None);
        }
        if self.grad_free && self.is_grad_enabled.bind(py).call0()?.is_truthy()? {
            tracing::debug!(target: "inductor::guards", "grad mode is on for a graph compiled without grad");
            return Ok(None);
        }
        if self.mutated_input_aliases(py, args)? {
            tracing::debug!(target: "inductor::guards", "a mutated input aliases another input");
            return Ok(None);
        }
        let fast_ok = !self.inputs_guarded
            && matches!(self.fast_inputs.get(), Some(Some(check)) if check.bind(py).call1(args).is_ok_and(|r| r.is_truthy().unwrap_or(false)));
        for (pos, slot, check) in &self.inputs {
            let v = args.get_item(*pos)?;
            if let (Some(check), false, false) = (check, self.inputs_guarded, fast_ok) {
                if !check.matches(py, &v, tensor_type, self.grad_free)? {
                    tracing::debug!(target: "inductor::guards", "input {pos} differs from compile time (sizes {}, strides {})", check.sizes.bind(py), check.strides.bind(py));
                    return Ok(None);
                }
            }
            env[*slot] = Some(v.unbind());
        }
        if !self.inputs_guarded && !fast_ok && self.fast_inputs.get().is_none() {
            let _ = self.fast_inputs.set(self.make_fast_inputs(py, args));
        }
        for (slot, value, check) in &self.constants {
            if let Some(check) = check {
                if !check.matches(py, value.bind(py), tensor_type, self.grad_free)? {
                    tracing::debug!(target: "inductor::guards", "a constant differs from compile time");
                    return Ok(None);
                }
            }
            env[*slot] = Some(value.clone_ref(py));
        }
        let data_ptr = intern!(py, "data_ptr");
        let lease = self.scratch.as_ref().map(|s| s.lease());
        let scratch_base = lease.as_ref().map_or(0, |l| l.base());
        let scratch_offsets: &[Option<usize>] = self.scratch.as_ref().map_or(&[], |s| &s.offsets);
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
                        let t = if self.fast_alloc {
                            self.empty_strided.bind(py).call1((a.sizes.bind(py), a.strides.bind(py), a.dtype.bind(py)))?
                        } else {
                            self.empty_strided.bind(py).call((a.sizes.bind(py), a.strides.bind(py)), Some(a.kwargs.bind(py)))?
                        };
                        env[a.slot] = Some(t.unbind());
                    }
                    let mut ptrs: Vec<usize> = Vec::with_capacity(args.len());
                    for slot in args {
                        if let Some(Some(off)) = scratch_offsets.get(*slot) {
                            ptrs.push(scratch_base + off);
                            continue;
                        }
                        let t = env[*slot].as_ref().expect("kernel argument not computed").bind(py);
                        let ptr = t.call_method0(data_ptr)?.extract::<usize>()?;
                        if ptr == 0 && t.call_method0(intern!(py, "numel"))?.extract::<usize>()? > 0 {
                            // A ZeroTensor input (Note [tensors whose memory is not their value]
                            // in fx_import.rs): no memory to read. Nothing the caller sees has
                            // changed yet (Note [errors rerun eagerly]).
                            return Err(PyRuntimeError::new_err("inductor: a kernel argument has no memory (a ZeroTensor)"));
                        }
                        ptrs.push(ptr);
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
                    let res = match tuple_item(py, call, args, &env)? {
                        Some(item) => item,
                        None => {
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
                            match call {
                                FallbackCall::Call(f) | FallbackCall::TupleItem(_, f) => f.bind(py).call(PyTuple::new(py, built)?, kw.as_ref())?,
                                FallbackCall::Method(name) => {
                                    let (this, rest) = built
                                        .split_first()
                                        .ok_or_else(|| PyRuntimeError::new_err("inductor: method call without self"))?;
                                    this.getattr(name.bind(py))?.call(PyTuple::new(py, rest)?, kw.as_ref())?
                                }
                            }
                        }
                    };
                    let mut res = res;
                    if let Some(check) = check {
                        if !check.matches(py, &res, tensor_type, self.grad_free)? {
                            // Note [fallback layouts]: torch's meta function promised other
                            // strides than the real op returned (CPU batch norm of a transposed
                            // input is contiguous, its meta keeps the input's strides). The step
                            // has run, and may have had effects (a training batch norm's running
                            // statistics, the random stream): running `gm.forward` now would
                            // repeat them. The values are right, so they are copied into the
                            // layout the later steps index with, and the plan goes on.
                            if !check.matches_but_strides(py, &res, tensor_type, self.grad_free)? {
                                tracing::debug!(target: "inductor::guards", "a fallback's result differs from its meta beyond strides (planned sizes {}, strides {})", check.sizes.bind(py), check.strides.bind(py));
                                return Ok(None);
                            }
                            counters::LAYOUT_FIXUPS.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(target: "inductor::guards", "a fallback returned other strides than its meta; copied into the planned layout");
                            let fixed = py.import(intern!(py, "torch"))?.getattr(intern!(py, "empty_strided"))?.call(
                                (check.sizes.bind(py), check.strides.bind(py)),
                                Some(&{
                                    let kw = PyDict::new(py);
                                    kw.set_item("dtype", res.getattr(intern!(py, "dtype"))?)?;
                                    kw.set_item("device", res.getattr(intern!(py, "device"))?)?;
                                    kw
                                }),
                            )?;
                            fixed.call_method1(intern!(py, "copy_"), (&res,))?;
                            res = fixed;
                        }
                    }
                    env[*slot] = Some(res.unbind());
                    if let (Some(t), Some(start)) = (timer, t0) {
                        t.record(si, start);
                    }
                }
                RtStep::Alias { slot, src, layout, reinterpret } => {
                    let base = env[*src].as_ref().ok_or_else(|| PyRuntimeError::new_err(format!("inductor: buf{src} read before it was computed")))?;
                    let v = match layout {
                        None => base.clone_ref(py),
                        Some((sizes, strides, offset)) => reinterpret.bind(py).call1((base.bind(py), sizes.bind(py), strides.bind(py), *offset))?.unbind(),
                    };
                    env[*slot] = Some(v);
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
        for slot in &self.index_checks {
            let bad: f64 = match scratch_offsets.get(*slot) {
                // SAFETY: the lease keeps the arena alive, and the kernel that stored this 0-d
                // float32 has run (every step has).
                Some(Some(off)) => f64::from(unsafe { std::ptr::read((scratch_base + off) as *const f32) }),
                _ => {
                    let t = env[*slot].as_ref().ok_or_else(|| PyRuntimeError::new_err("inductor: index check not computed"))?;
                    t.bind(py).call_method0(intern!(py, "item"))?.extract()?
                }
            };
            if bad != 0.0 {
                return Err(pyo3::exceptions::PyIndexError::new_err("inductor: an index read by a kernel is out of range"));
            }
        }
        for (dst, src, bumps, resize) in &self.writebacks {
            let (Some(d), Some(v)) = (&env[*dst], &env[*src]) else {
                return Err(PyRuntimeError::new_err("inductor: writeback of a value that was not computed"));
            };
            let d = d.bind(py);
            // `f(..., out=t)` with a `t` of another shape resizes `t` to the result's, as eager's
            // out= overloads do (`at::native::resize_output`; Note [out= on a copy] in
            // fx_import.rs): the copy would broadcast into the old shape instead.
            if *resize {
                let shape = v.bind(py).getattr(intern!(py, "shape"))?;
                if !d.getattr(intern!(py, "shape"))?.eq(&shape)? {
                    d.call_method1(intern!(py, "resize_"), (&shape,))?;
                }
            }
            d.call_method1(intern!(py, "copy_"), (v.bind(py),))?;
            if *bumps > 1 {
                let version: usize = d.getattr(intern!(py, "_version"))?.extract()?;
                let set = py.import(intern!(py, "torch"))?.getattr(intern!(py, "_C"))?.getattr(intern!(py, "_autograd"))?.getattr(intern!(py, "_unsafe_set_version_counter"))?;
                set.call1(((d,), (version + bumps - 1,)))?;
            }
        }
        let out = self.output.build(py, &env)?;
        if let (Some(t), Some(start)) = (timer, t0) {
            t.record(n_steps + 1, start);
        }
        Ok(Some(out))
    }

    /// Note [fast input checks]: `TensorGuards(*args)` with every size and stride static, when
    /// every input is checked, in order, and it accepts `args` (which just passed the per-input
    /// checks).
    fn make_fast_inputs(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> Option<Py<PyAny>> {
        let tg = self.tensor_guards.as_ref()?.bind(py);
        if args.is_empty() || self.inputs.len() != args.len() || self.inputs.iter().enumerate().any(|(k, (pos, _, c))| *pos != k || c.is_none()) {
            return None;
        }
        let made = (|| -> PyResult<Option<Py<PyAny>>> {
            let mut sizes = Vec::new();
            let mut strides = Vec::new();
            for v in args.iter() {
                if !v.is_instance(self.tensor_type.bind(py))? {
                    return Ok(None);
                }
                sizes.push(PyList::new(py, v.call_method0(intern!(py, "size"))?.try_iter()?.collect::<PyResult<Vec<_>>>()?)?);
                strides.push(PyList::new(py, v.call_method0(intern!(py, "stride"))?.try_iter()?.collect::<PyResult<Vec<_>>>()?)?);
            }
            let kw = PyDict::new(py);
            kw.set_item("dynamic_dims_sizes", PyList::new(py, sizes)?)?;
            kw.set_item("dynamic_dims_strides", PyList::new(py, strides)?)?;
            let check = tg.call(args, Some(&kw))?.getattr("check")?;
            Ok(check.call1(args)?.is_truthy()?.then(|| check.unbind()))
        })();
        made.ok().flatten()
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
            .filter_map(|(dst, _, _, _)| self.inputs.iter().find(|(_, slot, _)| slot == dst).map(|(pos, _, _)| *pos));
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

/// Note [forward-AD duals]: a dual tensor (`torch.autograd.forward_ad.make_dual`) carries its
/// tangent beside its primal; torch's ops propagate it, our kernels read the primal only, so a
/// compiled call would return outputs without tangents (a silently lost derivative). While a
/// forward-AD level is active (`forward_ad._current_level >= 0`, set by `dual_level()`) and
/// an input has a tangent at that level, the call runs `gm.forward`, whose torch ops carry the
/// tangents (it runs no kernel: `kernel_calls` does not move). The check is made per call, not at compile
/// time: the frame's guards do not see tangents, so the same compiled graph serves calls with
/// and without duals, and calls without a dual level (the common case) pay one module
/// attribute read.
pub(crate) fn has_dual_input(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
    static FORWARD_AD: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let fwad = FORWARD_AD.get_or_try_init(py, || py.import("torch.autograd.forward_ad").map(|m| m.into_any().unbind()))?.bind(py);
    let level: i64 = fwad.getattr(intern!(py, "_current_level"))?.extract().unwrap_or(-1);
    if level < 0 {
        return Ok(false);
    }
    let unpack = fwad.getattr(intern!(py, "unpack_dual"))?;
    let tensor_type = py.import(intern!(py, "torch"))?.getattr(intern!(py, "Tensor"))?;
    for a in args.iter() {
        if a.is_instance(&tensor_type)? && !unpack.call1((&a,))?.getattr(intern!(py, "tangent"))?.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
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
        if self.runtime.is_some() && has_dual_input(py, args)? {
            tracing::info!(target: "inductor::fallback", "an input is a forward-AD dual tensor; running gm.forward");
            return self.forward.bind(py).call1(args);
        }
        if let Some(rt) = &self.runtime {
            match rt.run(py, args) {
                Ok(Some(out)) => return Ok(out),
                Ok(None) => {}
                // A KeyboardInterrupt (a BaseException that is not an Exception) stops the
                // program as in eager: it is not a failed step to run again.
                Err(err) if !err.is_instance_of::<pyo3::exceptions::PyException>(py) => return Err(err),
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

#[cfg(test)]
mod tests {
    use super::plan_scratch;

    /// Buffers whose lifetimes overlap never share bytes; a buffer defined after another's last
    /// reader reuses its bytes; one defined at that reader's step does not.
    #[test]
    fn scratch_offsets_follow_lifetimes() {
        // (first step, last step, bytes)
        let bufs = [(0, 2, 100), (1, 1, 64), (2, 3, 64), (3, 4, 200), (4, 4, 10)];
        let (offsets, total) = plan_scratch(&bufs);
        for i in 0..bufs.len() {
            assert_eq!(offsets[i] % 64, 0);
            for j in 0..i {
                let live_together = bufs[i].0 <= bufs[j].1 && bufs[j].0 <= bufs[i].1;
                let (a0, a1) = (offsets[i], offsets[i] + bufs[i].2);
                let (b0, b1) = (offsets[j], offsets[j] + bufs[j].2);
                if live_together {
                    assert!(a1 <= b0 || b1 <= a0, "buffers {i} and {j} overlap: {offsets:?}");
                }
            }
        }
        // buf1 (steps 1..=1) is dead at step 2: buf2 takes its bytes; buf2 is read at step 3,
        // where buf3 is defined, so buf3 goes elsewhere.
        assert_eq!(offsets, vec![0, 128, 128, 192, 0]);
        assert_eq!(total, 192 + 256);
    }
}
