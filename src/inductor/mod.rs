//! TorchInductor: fx graph -> lowering -> Scheduler (fusion) -> LLVM kernels + fallbacks.
//!
//! Pipeline (see README.md): `fx_import` -> `lowering` -> `scheduler` -> `codegen` -> `wrapper`.
//! Entry points on `dynamo._C`: `inductor_compile(gm, example_inputs) -> CompiledGraph`,
//! `inductor_counters()`, `inductor_reset_counters()`.
//!
//! Invariants: compilation never raises for an unsupported graph: anything not handled runs through
//! torch (a FallbackKernel per node, or `gm.forward` for the whole graph), with the reason logged
//! and written into `CompiledGraph.plan`.

pub mod alias;
pub mod codegen;
pub mod constant_folding;
pub mod cse;
pub mod cuda;
pub mod decompositions;
pub mod functionalize;
pub mod fx_import;
pub mod ir;
pub mod layout;
pub mod lowering;
pub mod scheduler;
pub mod wrapper;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

use fx_import::{FxArg, FxGraph, FxOp};
use ir::{BufferKind, DType, GraphIr, PrintHandler};
use scheduler::{Schedule, Step};
use wrapper::{Alloc, ArgT, CompiledGraph, FallbackCall, RtStep, Runtime, StepTimes, TensorCheck};

/// Process-wide counters (PyTorch: `torch._dynamo.utils.counters["inductor"]`).
pub mod counters {
    use std::sync::atomic::AtomicU64;
    /// Calls of `inductor_compile`.
    pub static GRAPHS_COMPILED: AtomicU64 = AtomicU64::new(0);
    /// LLVM kernels JIT-compiled.
    pub static KERNELS_COMPILED: AtomicU64 = AtomicU64::new(0);
    /// Kernel executions.
    pub static KERNEL_CALLS: AtomicU64 = AtomicU64::new(0);
    /// Nodes planned as FallbackKernel calls into torch.
    pub static FALLBACK_NODES: AtomicU64 = AtomicU64::new(0);
    /// Graphs planned to run entirely through `gm.forward`.
    pub static EAGER_GRAPHS: AtomicU64 = AtomicU64::new(0);
    /// Calls whose inputs differed from compile-time metadata (ran through `gm.forward`).
    pub static GUARD_FAILURES: AtomicU64 = AtomicU64::new(0);
    /// Fallback results copied into the layout the plan expected (wrapper.rs's Note
    /// [fallback layouts]).
    pub static LAYOUT_FIXUPS: AtomicU64 = AtomicU64::new(0);
    /// Kernels of compiled graphs whose machine code was already loaded (llvm's Note [kernel
    /// cache]); they count in `kernels_compiled` too.
    pub static KERNEL_CACHE_HITS: AtomicU64 = AtomicU64::new(0);
    /// Kernels whose object code was read from the disk cache instead of being optimized and
    /// compiled (llvm's Note [kernel disk cache]); they count in `kernels_compiled` too.
    pub static KERNEL_DISK_HITS: AtomicU64 = AtomicU64::new(0);
    /// Microseconds spent in LLVM making PTX (GPU path).
    pub static GPU_LLVM_US: AtomicU64 = AtomicU64::new(0);
    /// Microseconds spent turning PTX into loaded machine code (GPU path): the driver's JIT
    /// compiler, or nvJitLink (summed over its threads) plus loading the cubins (cuda.rs, Note
    /// [nvJitLink]).
    pub static GPU_JIT_US: AtomicU64 = AtomicU64::new(0);
    /// GPU modules reused from the per-device module cache (cuda.rs, Note [module cache]).
    pub static GPU_MODULE_CACHE_HITS: AtomicU64 = AtomicU64::new(0);
    /// GPU modules loaded from a cubin that nvJitLink made (cuda.rs, Note [nvJitLink]); the
    /// others went through the driver's PTX JIT.
    pub static GPU_CUBIN_MODULES: AtomicU64 = AtomicU64::new(0);

    pub fn all() -> [(&'static str, &'static AtomicU64); 13] {
        [
            ("graphs_compiled", &GRAPHS_COMPILED),
            ("kernels_compiled", &KERNELS_COMPILED),
            ("kernel_calls", &KERNEL_CALLS),
            ("fallback_nodes", &FALLBACK_NODES),
            ("eager_graphs", &EAGER_GRAPHS),
            ("guard_failures", &GUARD_FAILURES),
            ("layout_fixups", &LAYOUT_FIXUPS),
            ("kernel_cache_hits", &KERNEL_CACHE_HITS),
            ("kernel_disk_cache_hits", &KERNEL_DISK_HITS),
            ("gpu_llvm_us", &GPU_LLVM_US),
            ("gpu_jit_us", &GPU_JIT_US),
            ("gpu_module_cache_hits", &GPU_MODULE_CACHE_HITS),
            ("gpu_cubin_modules", &GPU_CUBIN_MODULES),
        ]
    }
}

/// Counter values by name.
#[pyfunction]
fn inductor_counters(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (name, c) in counters::all() {
        d.set_item(name, c.load(Ordering::Relaxed))?;
    }
    Ok(d)
}

/// The thread pool parallel kernels run on: `"openmp"` (PyTorch's own OpenMP team, found in the
/// process) or `"rayon"` (see Note [one thread pool] in llvm/src/jit.rs).
#[pyfunction]
fn inductor_thread_pool() -> &'static str {
    dynamo_llvm::jit::thread_pool_name()
}

/// The folder of the kernel disk cache (a `str` path), or None when it is off: see Note [kernel
/// disk cache] in llvm/src/jit.rs for the environment variables that decide it (read once per
/// process).
#[pyfunction]
fn kernel_disk_cache_dir() -> Option<String> {
    dynamo_llvm::jit::disk_cache_dir().map(|p| p.to_string_lossy().into_owned())
}

/// Sets every counter to zero.
#[pyfunction]
fn inductor_reset_counters() {
    for (_, c) in counters::all() {
        c.store(0, Ordering::Relaxed);
    }
}

fn eager(forward: Py<PyAny>, reason: &str) -> CompiledGraph {
    counters::EAGER_GRAPHS.fetch_add(1, Ordering::Relaxed);
    tracing::info!(target: "inductor::fallback", "graph runs through gm.forward: {reason}");
    CompiledGraph {
        forward,
        runtime: None,
        kernel_names: Vec::new(),
        llvm_ir: String::new(),
        plan: format!("eager: {reason}\n"),
        kernel_ir: String::new(),
        ir_pre_fusion: String::new(),
    }
}

fn arg_template(py: Python<'_>, g: &FxGraph, ir: &GraphIr, a: &FxArg) -> PyResult<ArgT> {
    Ok(match a {
        FxArg::Node(j) => ArgT::Slot(
            ir.node_buffer[*j]
                .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("argument refers to the output node"))?
                .0 as usize,
        ),
        FxArg::Int(v) => ArgT::Const(v.into_py_any(py)?),
        FxArg::Float(v) => ArgT::Const(v.into_py_any(py)?),
        FxArg::Bool(v) => ArgT::Const(v.into_py_any(py)?),
        FxArg::None => ArgT::Const(py.None()),
        FxArg::Str(s) => ArgT::Const(PyString::new(py, s).into_any().unbind()),
        FxArg::Py(i) | FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } => ArgT::Const(g.side_table[*i].clone_ref(py)),
        FxArg::Ellipsis => ArgT::Const(py.Ellipsis()),
        FxArg::Tuple(items) => ArgT::Tuple(items.iter().map(|x| arg_template(py, g, ir, x)).collect::<PyResult<_>>()?),
        FxArg::List(items) => ArgT::List(items.iter().map(|x| arg_template(py, g, ir, x)).collect::<PyResult<_>>()?),
    })
}

/// Renders the lowered IR before the scheduler fuses it (the `DYNAMO_DEBUG_DIR` dump
/// `inductor_ir_pre_fusion.txt`): one line per buffer, in topological order, with its fx node,
/// layout and body (pointwise and reduction bodies in the plan's notation; fallbacks name the
/// torch op and why it was not lowered).
fn render_ir(g: &FxGraph, ir: &GraphIr) -> String {
    let mut s = String::new();
    for b in &ir.buffers {
        let layout = b.layout.as_ref().map(|l| format!(" {:?}{:?}", l.dtype, l.sizes)).unwrap_or_default();
        let body = match &b.kind {
            BufferKind::Input { position } => format!("input #{position}"),
            BufferKind::Constant { .. } => "constant (get_attr)".to_string(),
            BufferKind::Pointwise(pw) => {
                format!("pointwise{} {}", if pw.realized { " (realized)" } else { "" }, PrintHandler::render(pw))
            }
            BufferKind::Reduction(r) => format!("reduction {}", PrintHandler::render_reduction(r)),
            BufferKind::Scatter(sc) => PrintHandler::render_scatter(sc),
            BufferKind::Fallback(fb) => format!("fallback {}: {}", lowering::describe(&g.nodes[fb.node]), fb.reason),
        };
        let _ = writeln!(s, "{} ({}){layout} = {body}", b.id, b.name);
    }
    s
}

/// Renders the plan text: one block per step.
fn render_plan(g: &FxGraph, ir: &GraphIr, sched: &Schedule, kernel_names: &[String]) -> String {
    let mut s = String::new();
    let mut k = 0;
    for step in &sched.steps {
        match step {
            Step::Kernel(gi) => {
                let grp = &sched.groups[*gi];
                let _ = writeln!(s, "kernel {} ranges {:?}", kernel_names.get(k).map(|x| x.as_str()).unwrap_or("?"), grp.ranges);
                k += 1;
                for m in &grp.members {
                    let b = ir.buffer(*m);
                    if let Some(pw) = ir.pointwise(*m) {
                        let _ = writeln!(s, "  {m} ({}) = {}", b.name, PrintHandler::render(pw));
                    }
                    if let Some(r) = ir.reduction(*m) {
                        let _ = writeln!(s, "  {m} ({}) = {}", b.name, PrintHandler::render_reduction(r));
                    }
                    if let BufferKind::Scatter(sc) = &b.kind {
                        let _ = writeln!(s, "  {m} ({}) = {}", b.name, PrintHandler::render_scatter(sc));
                    }
                }
                // Unrealized producers inlined into this group (the scheduler's reach, restricted).
                let inlined_set = inlined_into(ir, &grp.members);
                let inlined: Vec<String> = ir
                    .buffers
                    .iter()
                    .filter(|b| inlined_set.contains(&b.id))
                    .map(|b| format!("{} ({})", b.id, b.name))
                    .collect();
                if !inlined.is_empty() {
                    let _ = writeln!(s, "  inlined: {}", inlined.join(", "));
                }
            }
            Step::Fallback(buf) => {
                if let BufferKind::Fallback(fb) = &ir.buffer(*buf).kind {
                    let _ = writeln!(s, "fallback {buf} = {}: {}", lowering::describe(&g.nodes[fb.node]), fb.reason);
                }
            }
        }
    }
    for w in &sched.why_no_fuse {
        let _ = writeln!(s, "why no fuse: {w}");
    }
    s
}

/// Unrealized pointwise buffers the bodies of `members` inline (iterative, each buffer visited once).
fn inlined_into(ir: &GraphIr, members: &[ir::BufferId]) -> std::collections::HashSet<ir::BufferId> {
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<ir::BufferId> = members.to_vec();
    while let Some(b) = stack.pop() {
        let Some(pw) = ir.pointwise(b) else { continue };
        let mut h = ir::ReadsHandler::default();
        let n = pw.ranges.len();
        let idx: Vec<_> = (0..n).map(|d| ir::Affine::var(d, n)).collect();
        (pw.inner_fn)(&mut h, &idx);
        for r in h.reads {
            if ir.pointwise(r).is_some_and(|p| !p.realized) && seen.insert(r) {
                stack.push(r);
            }
        }
    }
    seen
}

/// Tells code generation the float vector width of ATen's sum kernel (Note [ATen sum order] in
/// llvm/src/emit.rs), once per process. It is measured, not read from the CPU capability (on an
/// AVX-512 host torch 2.x still sums with 8 lanes): `torch.sum` of 40 fixed values is compared
/// with that order for 8 and 16 lanes; when neither matches, the order is not reproduced (0).
///
/// Note [once-only inits that call Python]: the probe runs torch, which releases the GIL, so a
/// `std::sync::Once` here deadlocked threads compiling concurrently (one waiting in `call_once`
/// holding the GIL, the initializing one waiting for the GIL: found calling a compiled module
/// from a thread pool). `PyOnceLock` detaches from the interpreter while it waits.
fn match_aten_vector_width(py: Python<'_>) {
    static DONE: pyo3::sync::PyOnceLock<()> = pyo3::sync::PyOnceLock::new();
    DONE.get_or_init(py, || {
        let probe = || -> PyResult<i64> {
            let xs: Vec<f32> = (0..40).map(|i| ((i * 7919 % 97) as f32 - 48.0) * 0.173_f32 + 1.0 / (i as f32 + 3.0)).collect();
            let torch = py.import("torch")?;
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("dtype", torch.getattr("float32")?)?;
            let t = torch.call_method("tensor", (xs.clone(),), Some(&kw))?;
            let got = t.call_method0("sum")?.call_method0("item")?.extract::<f64>()? as f32;
            for w in [8usize, 16] {
                if aten_order_sum(&xs, w).to_bits() == got.to_bits() {
                    return Ok(w as i64);
                }
            }
            Ok(0)
        };
        let w = probe().unwrap_or(0);
        tracing::debug!(target: "inductor::output_code", "ATen sum vector width: {w}");
        dynamo_llvm::emit::set_aten_vector_width(w);
    });
}

/// A contiguous row's float32 sum in ATen's order for `w` lanes, for rows of `w` to `64 w`
/// elements (Note [ATen sum order]): the reference the probe above compares against.
fn aten_order_sum(xs: &[f32], w: usize) -> f32 {
    let n = xs.len();
    let nv = n / w;
    let ilp_end = 4 * w * (nv / 4);
    let mut lanes = vec![0f32; 4 * w];
    let mut tail = 0f32;
    for (r, &x) in xs.iter().enumerate() {
        if r < ilp_end {
            lanes[(r / w % 4) * w + r % w] += x;
        } else if r < nv * w {
            lanes[r % w] += x;
        } else {
            tail += x;
        }
    }
    let mut total = tail;
    for l in 0..w {
        let mut p = lanes[l];
        for k in 1..4 {
            p += lanes[k * w + l];
        }
        total += p;
    }
    total
}

/// The `"inductor"` backend: compiles `gm` for inputs like `example_inputs`.
/// `aten_sum_order=False` lowers `sum`/`mean` nodes as plain vectorized sums (backward graphs,
/// Note [backward sum order] in decompositions.rs).
#[pyfunction]
#[pyo3(signature = (gm, example_inputs, *, inputs_guarded = false, aten_sum_order = true))]
fn inductor_compile(
    py: Python<'_>,
    gm: &Bound<'_, PyAny>,
    example_inputs: &Bound<'_, PyAny>,
    inputs_guarded: bool,
    aten_sum_order: bool,
) -> PyResult<CompiledGraph> {
    counters::GRAPHS_COMPILED.fetch_add(1, Ordering::Relaxed);
    match_aten_vector_width(py);
    let t_start = std::time::Instant::now();
    let forward = gm.getattr("forward")?.unbind();
    // Note [compile target] (cuda.rs): kernels are generated for the device of the inputs.
    let target = cuda::target_of(py, example_inputs)?;
    let _target_guard = cuda::TargetGuard::set(target);
    let _sum_order_guard = decompositions::SumOrderGuard::set(aten_sum_order);
    let mut g = match fx_import::import_graph(py, gm, example_inputs) {
        Ok(g) => g,
        Err(e) => return Ok(eager(forward, &e.to_string())),
    };
    let t_import = std::time::Instant::now();
    // Note [grad-free graphs]: compiled with grad mode off (inference under torch.no_grad()),
    // nothing the graph computes is recorded by autograd, so parameters that require grad do
    // not stop kernels. The runtime then requires grad mode to be off at call time too.
    let grad_free = !py.import("torch")?.call_method0("is_grad_enabled")?.extract::<bool>()?;
    if grad_free {
        for n in g.nodes.iter_mut() {
            if let Some(m) = n.meta.as_mut() {
                m.requires_grad = false;
            }
        }
    }
    // Note [grad inputs]: a graph whose inputs require grad runs eagerly so autograd records it.
    // The "inductor" backend sends such graphs through AOTAutograd (src/autograd) first, which
    // hands us grad-free forward and backward graphs; a direct call keeps this fallback.
    // Values computed from parameters that require grad (call_module) count too: a kernel would
    // cut them off the autograd graph.
    for n in &g.nodes {
        if let Some(meta) = &n.meta {
            if meta.requires_grad {
                let what = match n.op {
                    FxOp::Placeholder { .. } | FxOp::GetAttr { .. } => "input",
                    _ => "value",
                };
                return Ok(eager(forward, &format!("{what} {} requires grad", n.name)));
            }
        }
    }
    match functionalize::functionalize(&mut g) {
        Ok(writebacks) => g.writebacks = writebacks,
        Err(reason) => return Ok(eager(forward, &reason)),
    }
    match layout::optimize(py, &mut g) {
        Ok(0) => {}
        Ok(n) => tracing::debug!(target: "inductor::layout", "{n} convolutions run channels-last"),
        Err(e) => tracing::debug!(target: "inductor::layout", "layout left as traced: {e}"),
    }
    if cuda::target() == cuda::Target::Cpu {
        let n = layout::explicit_reshape_copies(&mut g);
        if n > 0 {
            tracing::debug!(target: "inductor::layout", "{n} copying reshapes made explicit (Note [reshape copies])");
        }
    }
    let merged = cse::eliminate(py, &mut g);
    if merged > 0 {
        tracing::debug!(target: "inductor::cse", "{merged} repeated math calls merged (Note [one evaluation of a math function])");
    }
    let folded = constant_folding::fold(py, &mut g);
    let t_layout = std::time::Instant::now();
    let ir = lowering::lower(&g);
    let ir_pre_fusion = if crate::debug::enabled() { render_ir(&g, &ir) } else { String::new() };
    let sched = scheduler::schedule(&g, &ir);
    if cfg!(debug_assertions) || std::env::var_os("DYNAMO_VERIFY").is_some_and(|v| v == "1") {
        if let Err(errors) = scheduler::verify(&g, &ir, &sched) {
            // A broken invariant must not run: report it and fall back to torch.
            tracing::error!(target: "inductor::schedule", "verification failed: {}", errors.join("; "));
            return Ok(eager(forward, &format!("inductor verification failed: {}", errors.join("; "))));
        }
    }
    let n_fallbacks = sched.steps.iter().filter(|s| matches!(s, Step::Fallback(_))).count();
    let t_sched = std::time::Instant::now();
    // A graph with nothing to generate still runs on the runtime plan: calling torch's kernels
    // from Rust costs less per op than gm.forward's Python.
    let mut gpu: Option<(Vec<codegen::KernelPlan>, cuda::CudaRuntime, String)> = None;
    let cg = if sched.groups.is_empty() {
        None
    } else if let cuda::Target::Cuda(device) = target {
        match cuda::codegen(py, &ir, &sched, device) {
            Ok(r) => {
                gpu = Some(r);
                None
            }
            Err(e) => {
                let mut cg = eager(forward, &format!("GPU codegen failed: {e}"));
                cg.ir_pre_fusion = ir_pre_fusion;
                return Ok(cg);
            }
        }
    } else {
        match codegen::codegen(&ir, &sched) {
            Ok(cg) => Some(cg),
            Err(e) => {
                let mut cg = eager(forward, &format!("codegen failed: {e}"));
                cg.ir_pre_fusion = ir_pre_fusion;
                return Ok(cg);
            }
        }
    };
    let kernel_plans: &[codegen::KernelPlan] = match (&cg, &gpu) {
        (Some(c), _) => c.kernels.as_slice(),
        (None, Some((plans, _, _))) => plans.as_slice(),
        _ => &[],
    };
    let t_codegen = std::time::Instant::now();
    let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
    tracing::debug!(
        target: "inductor::compile_time",
        "{} nodes: import {:.1} ms, functionalize+layout {:.1} ms, lower+schedule {:.1} ms, codegen+llvm {:.1} ms",
        g.nodes.len(),
        ms(t_start, t_import),
        ms(t_import, t_layout),
        ms(t_layout, t_sched),
        ms(t_sched, t_codegen)
    );
    counters::KERNELS_COMPILED.fetch_add(kernel_plans.len() as u64, Ordering::Relaxed);
    counters::FALLBACK_NODES.fetch_add(n_fallbacks as u64, Ordering::Relaxed);

    // Build the runtime plan.
    let torch = py.import("torch")?;
    let dtype_obj = |d: DType| -> PyResult<Py<PyAny>> { Ok(torch.getattr(d.torch_name().unwrap_or("float32"))?.unbind()) };
    let examples: Vec<Bound<'_, PyAny>> = example_inputs.try_iter()?.collect::<PyResult<_>>()?;
    let mut inputs = Vec::new();
    let mut constants = Vec::new();
    let read_by_kernel = |b: ir::BufferId| kernel_plans.iter().any(|k| k.args.iter().any(|(a, out)| *a == b && !out));
    for b in &ir.buffers {
        match &b.kind {
            BufferKind::Input { position } => {
                let check = match &b.layout {
                    Some(l) => Some(TensorCheck::new(py, l, examples[*position].getattr("dtype")?.unbind())?),
                    None => None,
                };
                inputs.push((*position, b.id.0 as usize, check));
            }
            BufferKind::Constant { node } => {
                // Interior nodes of a folded computation (constant_folding) have no users.
                if g.nodes[*node].users.is_empty() {
                    continue;
                }
                let FxOp::GetAttr { value } = g.nodes[*node].op else { unreachable!() };
                let v = g.side_table[value].bind(py);
                // A folded value is ours alone: nothing can change its metadata between calls.
                let check = match &b.layout {
                    Some(l) if !folded.contains(node) => Some(TensorCheck::new(py, l, v.getattr("dtype")?.unbind())?),
                    _ => None,
                };
                constants.push((b.id.0 as usize, v.clone().unbind(), check));
            }
            _ => {}
        }
    }
    let mut steps = Vec::new();
    let mut kernel_order = Vec::new();
    // Note [fast allocation]: kernel outputs of a CPU graph are allocated through
    // `torch._C._dynamo.guards._empty_strided_cpu(sizes, strides, dtype)`, the C++ entry
    // torch.compile's generated wrappers call: no Python argument parsing or dispatcher, 0.36 µs
    // against torch.empty_strided's 0.80 µs a call (tiny BERT's training step allocates ~50
    // such outputs). Absent in this torch: torch.empty_strided with keyword arguments.
    let fast_alloc = match target {
        cuda::Target::Cpu => py.import("torch._C._dynamo.guards").and_then(|m| m.getattr("_empty_strided_cpu")).ok().map(|f| f.unbind()),
        cuda::Target::Cuda(_) => None,
    };
    let cpu_device = match target {
        cuda::Target::Cpu => torch.getattr("device")?.call1(("cpu",))?,
        cuda::Target::Cuda(i) => torch.getattr("device")?.call1(("cuda", i))?,
    };
    let mut step_labels: Vec<String> = Vec::new();
    for step in &sched.steps {
        match step {
            Step::Kernel(gi) => {
                let plan = &kernel_plans[*gi];
                let mut allocs = Vec::new();
                for (buf, is_out) in &plan.args {
                    if !is_out {
                        continue;
                    }
                    let l = ir.buffer(*buf).layout.as_ref().expect("kernel output without layout");
                    let kw = PyDict::new(py);
                    let dtype = dtype_obj(l.dtype)?;
                    kw.set_item("dtype", dtype.bind(py))?;
                    // A torch.device object: a "cpu" string would be parsed on every call.
                    kw.set_item("device", &cpu_device)?;
                    allocs.push(Alloc {
                        slot: buf.0 as usize,
                        sizes: PyTuple::new(py, &l.sizes)?.unbind(),
                        strides: PyTuple::new(py, &l.strides)?.unbind(),
                        kwargs: kw.unbind(),
                        dtype,
                    });
                }
                let grp = &sched.groups[*gi];
                let reduction_trips: i64 =
                    grp.reduction.as_ref().map(|sp| sp.reduced.iter().map(|&d| sp.input_sizes[d]).product()).unwrap_or(1);
                let big = grp.ranges.iter().product::<i64>() * reduction_trips >= dynamo_llvm::jit::PARALLEL_MIN_NUMEL;
                steps.push(RtStep::Kernel {
                    kernel: *gi,
                    args: plan.args.iter().map(|(b, _)| b.0 as usize).collect(),
                    allocs,
                    big,
                });
                step_labels.push(plan.name.clone());
                kernel_order.push(plan.name.clone());
            }
            Step::Fallback(buf) => {
                let BufferKind::Fallback(fb) = &ir.buffer(*buf).kind else { unreachable!() };
                let node = &g.nodes[fb.node];
                let call = match &node.op {
                    FxOp::CallFunction { target }
                        if node.target_name == "_operator.getitem" && node.kwargs.is_empty() && matches!(node.args.as_slice(), [FxArg::Node(_), FxArg::Int(_)]) =>
                    {
                        let FxArg::Int(k) = node.args[1] else { unreachable!() };
                        FallbackCall::TupleItem(k as isize, g.side_table[*target].clone_ref(py))
                    }
                    FxOp::CallFunction { target } | FxOp::CallModule { target } => {
                        FallbackCall::Call(g.side_table[*target].clone_ref(py))
                    }
                    FxOp::CallMethod { name } => FallbackCall::Method(PyString::new(py, name).unbind()),
                    _ => unreachable!("only call nodes fall back"),
                };
                let args = node.args.iter().map(|a| arg_template(py, &g, &ir, a)).collect::<PyResult<_>>()?;
                let kwargs = node
                    .kwargs
                    .iter()
                    .map(|(k, a)| Ok((PyString::new(py, k).unbind(), arg_template(py, &g, &ir, a)?)))
                    .collect::<PyResult<_>>()?;
                let check = match (&ir.buffer(*buf).layout, read_by_kernel(*buf) || alias::views_of_tuple_item(&g, &ir, fb.node)) {
                    (Some(l), true) => Some(TensorCheck::new(py, l, dtype_obj(l.dtype)?)?),
                    _ => None,
                };
                step_labels.push(node.target_name.clone());
                steps.push(RtStep::Fallback { slot: buf.0 as usize, call, args, kwargs, check });
            }
        }
    }
    let out_node = &g.nodes[g.output];
    let output = match out_node.args.first() {
        Some(a) => arg_template(py, &g, &ir, a)?,
        None => ArgT::Const(py.None()),
    };
    let slot = |node: usize| ir.node_buffer[node].map(|b| b.0 as usize);
    // A writeback whose value has another shape than its input (`out=` of another shape, Note
    // [out= on a copy] in fx_import.rs) resizes the input first; decided here from the metas
    // (an unknown shape counts as possibly different).
    let sizes_of = |node: usize| g.nodes[node].meta.as_ref().map(|m| m.layout.sizes.clone());
    let writebacks: Vec<(usize, usize, usize, bool)> = g
        .writebacks
        .iter()
        .map(|wb| {
            let resize = sizes_of(wb.dst).is_none() || sizes_of(wb.dst) != sizes_of(wb.src);
            slot(wb.dst).zip(slot(wb.src)).map(|(d, s)| (d, s, wb.bumps, resize)).ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("writeback without buffer"))
        })
        .collect::<PyResult<_>>()?;
    let mut plan = render_plan(&g, &ir, &sched, &kernel_order);
    for wb in &g.writebacks {
        let _ = writeln!(plan, "writeback {}.copy_({})", g.nodes[wb.dst].name, g.nodes[wb.src].name);
    }
    tracing::debug!(target: "inductor::schedule", "plan:\n{plan}");
    let kernel_ir = kernel_plans.iter().map(|k| k.kernel_ir.clone()).collect::<Vec<_>>().join("\n");
    let llvm_ir = match (&cg, &gpu) {
        (Some(c), _) => c.jit.llvm_ir.clone(),
        (None, Some((_, rt, ir))) => format!("{ir}\n; PTX\n{}", rt.module.ptx),
        _ => String::new(),
    };
    // Note [dead buffers]: every slot is dropped after the last step that reads it (outputs and
    // writeback sources excepted), as eager frees an intermediate when its last use ends; keeping
    // them all to the end of the call made every allocation fresh memory (page faults, cold
    // caches: resnet18 ran 25% slower than eager on the same kernels).
    let mut keep = vec![false; ir.buffers.len()];
    output.for_each_slot(&mut |s| keep[s] = true);
    // Note [index checks]: read after the steps, so kept to the end.
    let index_checks: Vec<usize> = ir.index_checks.iter().map(|b| b.0 as usize).collect();
    index_checks.iter().for_each(|&s| keep[s] = true);
    for (dst, src, _, _) in &writebacks {
        keep[*dst] = true;
        keep[*src] = true;
    }
    let mut last_use: Vec<Option<usize>> = vec![None; ir.buffers.len()];
    for (si, step) in steps.iter().enumerate() {
        let mut mark = |s: usize| last_use[s] = Some(si);
        match step {
            RtStep::Kernel { args, .. } => args.iter().for_each(|&s| mark(s)),
            RtStep::Alias { slot, src, .. } => {
                mark(*slot);
                mark(*src);
            }
            RtStep::Fallback { slot, args, kwargs, .. } => {
                mark(*slot);
                args.iter().for_each(|a| a.for_each_slot(&mut mark));
                kwargs.iter().for_each(|(_, a)| a.for_each_slot(&mut mark));
            }
        }
    }
    let mut free_after: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (slot, last) in last_use.iter().enumerate() {
        if let (Some(si), false) = (last, keep[slot]) {
            free_after[*si].push(slot);
        }
    }
    // Note [scratch arena]: kernel outputs only kernels read live in a per-graph arena.
    let scratch = if gpu.is_none() { plan_scratch_slots(&ir, &mut steps, &keep, &last_use, &index_checks) } else { None };
    if let Some(sc) = &scratch {
        let slots: Vec<String> = sc.offsets.iter().enumerate().filter(|(_, o)| o.is_some()).map(|(i, _)| format!("buf{i}")).collect();
        let _ = writeln!(plan, "scratch arena {} bytes: {}", sc.bytes, slots.join(", "));
    }
    // Note [alias views]: after the arena is planned (an alias's base is a tensor, not arena
    // bytes, because the fallback read it when the arena was planned).
    let exact_inputs: Vec<usize> = inputs
        .iter()
        .filter(|(_, _, c)| c.is_some())
        .map(|(_, s, _)| *s)
        .chain(constants.iter().filter(|(s, _, c)| c.is_some() || ir.buffers[*s].layout.is_some()).map(|(s, _, _)| *s))
        .collect();
    if gpu.is_none() && alias::enabled() {
        for (slot, src) in alias::alias_views(py, &g, &ir, &mut steps, &keep, &exact_inputs)? {
            if let Some(label) = step_labels.get_mut(steps.iter().position(|s| matches!(s, RtStep::Alias { slot: a, .. } if *a == slot)).unwrap_or(usize::MAX)) {
                *label = format!("alias {label}");
            }
            let _ = writeln!(plan, "alias buf{slot} = reinterpret(buf{src})");
        }
        // Note [allocated as viewed] in alias.rs.
        for (slot, src) in alias::allocate_as_viewed(py, &mut steps, &keep)? {
            let _ = writeln!(plan, "buf{src} allocated as its view buf{slot}");
        }
        // Note [identity dropout] in alias.rs.
        for (slot, src) in alias::identity_dropouts(py, &g, &ir, &mut steps)? {
            if let Some(label) = step_labels.get_mut(steps.iter().position(|s| matches!(s, RtStep::Alias { slot: a, .. } if *a == slot)).unwrap_or(usize::MAX)) {
                *label = format!("alias {label}");
            }
            let _ = writeln!(plan, "alias buf{slot} = buf{src} (dropout returns its input)");
        }
    }
    let runtime = Runtime {
        scratch,
        free_after,
        grad_free,
        inputs_guarded,
        is_grad_enabled: py.import("torch")?.getattr("is_grad_enabled")?.unbind(),
        n_slots: ir.buffers.len(),
        inputs,
        constants,
        steps,
        output,
        codegen: cg,
        cuda: gpu.map(|(_, rt, _)| rt),
        empty_strided: match &fast_alloc {
            Some(f) => f.clone_ref(py),
            None => torch.getattr("empty_strided")?.unbind(),
        },
        fast_alloc: fast_alloc.is_some(),
        tensor_type: torch.getattr("Tensor")?.unbind(),
        writebacks,
        index_checks,
        step_times: StepTimes::enabled().then(|| StepTimes::new(step_labels)),
        fast_inputs: std::sync::OnceLock::new(),
        tensor_guards: py.import("torch._C._dynamo.guards").and_then(|m| m.getattr("TensorGuards")).ok().map(|t| t.unbind()),
    };
    Ok(CompiledGraph { forward, runtime: Some(runtime), kernel_names: kernel_order, llvm_ir, plan, kernel_ir, ir_pre_fusion })
}

/// The arena layout for the kernel outputs that only kernels read (Note [scratch arena] in
/// wrapper.rs), with their tensor allocations removed from `steps`; None when there are none or
/// the arena would exceed `SCRATCH_MAX_BYTES`. `keep`: slots the output or a write-back reads;
/// `last_use`: per slot, the last step reading it.
/// `checks`: Note [index checks] slots, kept (not freed) but only read by the runtime after the
/// steps: they live in the arena to the end of the call, where the runtime reads them directly.
fn plan_scratch_slots(
    ir: &GraphIr,
    steps: &mut [RtStep],
    keep: &[bool],
    last_use: &[Option<usize>],
    checks: &[usize],
) -> Option<wrapper::Scratch> {
    let n = ir.buffers.len();
    let mut read_by_fallback = vec![false; n];
    for step in steps.iter() {
        if let RtStep::Fallback { args, kwargs, .. } = step {
            let mut mark = |s: usize| read_by_fallback[s] = true;
            args.iter().for_each(|a| a.for_each_slot(&mut mark));
            kwargs.iter().for_each(|(_, a)| a.for_each_slot(&mut mark));
        }
    }
    let mut slots = Vec::new();
    let mut spans = Vec::new();
    for (si, step) in steps.iter().enumerate() {
        let RtStep::Kernel { allocs, .. } = step else { continue };
        for a in allocs {
            let check = checks.contains(&a.slot);
            if (keep[a.slot] && !check) || read_by_fallback[a.slot] {
                continue;
            }
            let Some(l) = ir.buffers[a.slot].layout.as_ref() else { continue };
            if l.sizes.iter().any(|&d| d == 0) || l.strides.iter().any(|&st| st < 0) {
                continue;
            }
            let extent: i64 = 1 + l.sizes.iter().zip(&l.strides).map(|(&d, &st)| (d - 1) * st).sum::<i64>();
            let bytes = extent as usize * codegen::kernel_dtype(l.dtype).size_bytes();
            slots.push(a.slot);
            let end = if check { steps.len() } else { last_use[a.slot].unwrap_or(si).max(si) };
            spans.push((si, end, bytes));
        }
    }
    if slots.is_empty() {
        return None;
    }
    let (offsets, bytes) = wrapper::plan_scratch(&spans);
    if bytes > wrapper::SCRATCH_MAX_BYTES {
        tracing::debug!(target: "inductor::schedule", "no scratch arena: {bytes} bytes of kernel-only intermediates");
        return None;
    }
    let mut by_slot = vec![None; n];
    for (&slot, &off) in slots.iter().zip(&offsets) {
        by_slot[slot] = Some(off);
    }
    for step in steps.iter_mut() {
        if let RtStep::Kernel { allocs, .. } = step {
            allocs.retain(|a| by_slot[a.slot].is_none());
        }
    }
    Some(wrapper::Scratch::new(by_slot, bytes))
}

/// Registers the inductor entry points on `dynamo._C`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inductor_compile, m)?)?;
    m.add_function(wrap_pyfunction!(inductor_counters, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_disk_cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(inductor_thread_pool, m)?)?;
    m.add_function(wrap_pyfunction!(inductor_reset_counters, m)?)?;
    m.add_class::<CompiledGraph>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fx_import::{FxArg, FxGraph, FxNode, FxOp, TensorMeta};
    use super::ir::{DType, Layout};
    use super::*;

    fn meta(sizes: &[i64]) -> Option<TensorMeta> {
        Some(TensorMeta {
            layout: Layout {
                sizes: sizes.to_vec(),
                strides: Layout::contiguous_strides(sizes),
                dtype: DType::F32,
                cpu: true,
            },
            requires_grad: false,
        })
    }

    fn node(name: &str, op: FxOp, canonical: Option<&'static str>, args: Vec<FxArg>, sizes: Option<&[i64]>) -> FxNode {
        FxNode {
            name: name.into(),
            op,
            canonical,
            target_name: canonical.unwrap_or(name).to_string(),
            args,
            kwargs: Vec::new(),
            meta: sizes.and_then(meta),
            users: Vec::new(),
            inplace: false,
            recompute: false,
        }
    }

    /// Lowers and schedules `nodes` (no Python involved) and renders the plan.
    fn plan_of(nodes: Vec<FxNode>) -> String {
        let output = nodes.len() - 1;
        let g = FxGraph { nodes, side_table: Vec::new(), output, writebacks: Vec::new() };
        let ir = lowering::lower(&g);
        let sched = scheduler::schedule(&g, &ir);
        scheduler::verify(&g, &ir, &sched).unwrap();
        let names: Vec<String> = (0..sched.groups.len()).map(|i| format!("kernel{i}")).collect();
        render_plan(&g, &ir, &sched, &names)
    }

    fn call(name: &str, canonical: &'static str, args: Vec<FxArg>, sizes: &[i64]) -> FxNode {
        node(name, FxOp::CallFunction { target: 0 }, Some(canonical), args, Some(sizes))
    }

    /// softmax(x, -1) + layer_norm decompose into reductions; each group becomes one kernel
    /// (max and sum and the normalized epilogue; mean, variance and the affine epilogue).
    #[test]
    fn softmax_and_layer_norm_plans() {
        let mut ln = call("layer_norm", "layer_norm", vec![FxArg::Node(0), FxArg::Tuple(vec![FxArg::Int(8)])], &[4, 8]);
        ln.kwargs.push(("eps".into(), FxArg::Float(1e-5)));
        let plan = plan_of(vec![
            node("x", FxOp::Placeholder { position: 0 }, None, vec![], Some(&[4, 8])),
            call("softmax", "softmax", vec![FxArg::Node(0), FxArg::Int(-1)], &[4, 8]),
            ln,
            call("add", "add", vec![FxArg::Node(1), FxArg::Node(2)], &[4, 8]),
            node("output", FxOp::Output, None, vec![FxArg::Tuple(vec![FxArg::Node(3)])], None),
        ]);
        insta::assert_snapshot!(plan);
    }

    /// A reshape that merges dims is not affine: it runs through torch and splits the kernels.
    #[test]
    fn views_inline_and_merging_reshape_falls_back() {
        let plan = plan_of(vec![
            node("x", FxOp::Placeholder { position: 0 }, None, vec![], Some(&[4, 6])),
            call("t", "t", vec![FxArg::Node(0)], &[6, 4]),
            call("mul", "mul", vec![FxArg::Node(1), FxArg::Float(2.0)], &[6, 4]),
            call("view", "view", vec![FxArg::Node(2), FxArg::Int(24)], &[24]),
            call("sin", "sin", vec![FxArg::Node(3)], &[24]),
            call("sum", "sum", vec![FxArg::Node(2), FxArg::Int(0)], &[4]),
            node("output", FxOp::Output, None, vec![FxArg::Tuple(vec![FxArg::Node(4), FxArg::Node(5)])], None),
        ]);
        insta::assert_snapshot!(plan);
    }

    #[test]
    fn sin_cos_fuses_into_one_kernel() {
        let plan = plan_of(vec![
            node("x", FxOp::Placeholder { position: 0 }, None, vec![], Some(&[4, 8])),
            node("y", FxOp::Placeholder { position: 1 }, None, vec![], Some(&[4, 8])),
            call("sin", "sin", vec![FxArg::Node(0)], &[4, 8]),
            call("cos", "cos", vec![FxArg::Node(1)], &[4, 8]),
            call("mul", "mul", vec![FxArg::Node(3), FxArg::Float(2.0)], &[4, 8]),
            call("add", "add", vec![FxArg::Node(2), FxArg::Node(4)], &[4, 8]),
            node("output", FxOp::Output, None, vec![FxArg::Tuple(vec![FxArg::Node(5)])], None),
        ]);
        insta::assert_snapshot!(plan);
    }

    #[test]
    fn fallback_splits_and_ranges_refuse_fusion() {
        let plan = plan_of(vec![
            node("x", FxOp::Placeholder { position: 0 }, None, vec![], Some(&[4, 8])),
            node("w", FxOp::Placeholder { position: 1 }, None, vec![], Some(&[8, 3])),
            call("exp", "exp", vec![FxArg::Node(0)], &[4, 8]),
            node("matmul", FxOp::CallFunction { target: 0 }, None, vec![FxArg::Node(2), FxArg::Node(1)], Some(&[4, 3])),
            call("relu", "relu", vec![FxArg::Node(3)], &[4, 3]),
            call("neg", "neg", vec![FxArg::Node(2)], &[4, 8]),
            node(
                "output",
                FxOp::Output,
                None,
                vec![FxArg::Tuple(vec![FxArg::Node(4), FxArg::Node(5)])],
                None,
            ),
        ]);
        insta::assert_snapshot!(plan);
    }
}
