//! The GPU path of the inductor backend: graphs whose inputs are CUDA tensors get their fused
//! kernels compiled to PTX (`dynamo_llvm::nvptx`) and launched through the CUDA driver API on
//! PyTorch's current stream, on the data pointers of tensors PyTorch allocated (its caching
//! allocator); fallbacks (matmul, convolution, anything not lowered) stay torch's CUDA ops.
//!
//! Invariants:
//! - No link-time CUDA dependency: `libcuda.so.1` is opened with `dlopen` the first time a graph
//!   with CUDA inputs is compiled; without it (no driver, CPU-only machine) such graphs run
//!   through `gm.forward`, with the reason logged on `inductor::fallback`.
//! - Note [compile target]: while `inductor_compile` runs, a thread-local [`Target`] says which
//!   device kernels are generated for; `Layout::cpu` then means "on the target device" (a CPU
//!   tensor in a CUDA graph is not on it, so ops that read it fall back to torch).
//! - Kernels run in the primary context of the target device (PyTorch's); a graph's modules
//!   are loaded once, at compile time (its kernels' scalar twins on first need, Note [lazy
//!   twins]), and unloaded with the last compiled graph that uses them (Note [module cache]).
//! - Compile time: LLVM makes a graph's distinct kernels on several threads, and the same
//!   threads assemble their PTX to cubin through nvJitLink where it is found (Note [parallel
//!   modules], Note [nvJitLink]); otherwise the driver's PTX compiler, at its default level
//!   (Note [JIT level]), is most of what is left (measured by `benchmarks/gpu_compile_sweep.py`; the counters `gpu_llvm_us`,
//!   `gpu_jit_us`, `gpu_module_cache_hits` and `gpu_cubin_modules` of `inductor_counters()`).
//! - A launch error raises, and the compiled graph reruns the whole graph through `gm.forward`
//!   (Note [errors rerun eagerly] in `wrapper.rs`): never a wrong answer.
//!
//! `DYNAMO_INDUCTOR_GPU=0` turns the path off (graphs on CUDA tensors then run every op as a
//! fallback call into torch, as before this path existed).

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use dynamo_llvm as llvm;
use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;

use super::codegen::KernelPlan;
use super::ir::GraphIr;
use super::scheduler::Schedule;

/// The device a compile generates kernels for (Note [compile target]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Target {
    #[default]
    Cpu,
    /// CUDA device of this index.
    Cuda(i64),
}

thread_local! {
    static TARGET: Cell<Target> = const { Cell::new(Target::Cpu) };
}

/// The target of the compile running on this thread (`Cpu` outside `inductor_compile`).
pub fn target() -> Target {
    TARGET.with(|t| t.get())
}

/// Sets the thread's compile target until dropped.
pub struct TargetGuard(Target);

impl TargetGuard {
    pub fn set(t: Target) -> TargetGuard {
        TargetGuard(TARGET.with(|c| c.replace(t)))
    }
}

impl Drop for TargetGuard {
    fn drop(&mut self) {
        TARGET.with(|c| c.set(self.0));
    }
}

/// True when a tensor on `device` (a `torch.device`) is on the current compile target.
pub fn on_target(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ty: String = device.getattr(intern!(py, "type"))?.extract()?;
    Ok(match target() {
        Target::Cpu => ty == "cpu",
        Target::Cuda(idx) => ty == "cuda" && device.getattr(intern!(py, "index"))?.extract::<Option<i64>>()?.unwrap_or(0) == idx,
    })
}

/// The target for a graph called with `examples`: the device of the first CUDA tensor among
/// them, when the GPU path is on; else the CPU.
pub fn target_of(py: Python<'_>, examples: &Bound<'_, PyAny>) -> PyResult<Target> {
    if std::env::var("DYNAMO_INDUCTOR_GPU").is_ok_and(|v| v == "0") {
        return Ok(Target::Cpu);
    }
    let tensor = py.import(intern!(py, "torch"))?.getattr(intern!(py, "Tensor"))?;
    for x in examples.try_iter()? {
        let x = x?;
        if x.is_instance(&tensor)? && x.getattr(intern!(py, "is_cuda"))?.is_truthy()? {
            let idx: i64 = x.call_method0(intern!(py, "get_device"))?.extract()?;
            return Ok(Target::Cuda(idx));
        }
    }
    Ok(Target::Cpu)
}

type CuResult = c_int;
type CuDevice = c_int;
type Handle = *mut c_void;

/// The driver API entry points this path uses, resolved from `libcuda.so.1`.
struct Driver {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut Handle, CuDevice) -> CuResult,
    ctx_get_current: unsafe extern "C" fn(*mut Handle) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(Handle) -> CuResult,
    module_load_data_ex: unsafe extern "C" fn(*mut Handle, *const c_void, c_uint, *mut c_int, *mut *mut c_void) -> CuResult,
    module_get_function: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> CuResult,
    module_unload: unsafe extern "C" fn(Handle) -> CuResult,
    launch_kernel: unsafe extern "C" fn(Handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Handle, *mut *mut c_void, *mut *mut c_void) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

// SAFETY: the struct holds plain function pointers into a library that stays loaded.
unsafe impl Send for Driver {}
unsafe impl Sync for Driver {}

/// The driver, loaded once per process; `Err` says why it cannot be (no libcuda, no device).
fn driver() -> Result<&'static Driver, String> {
    static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols have the driver API's
            // documented C signatures (cuda.h), which the field types spell out.
            unsafe {
                let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL);
                if h.is_null() {
                    return Err("libcuda.so.1 cannot be loaded".to_string());
                }
                macro_rules! sym {
                    ($name:literal) => {{
                        let p = libc::dlsym(h, concat!($name, "\0").as_ptr() as *const c_char);
                        if p.is_null() {
                            return Err(format!("libcuda.so.1 has no {}", $name));
                        }
                        std::mem::transmute::<*mut c_void, _>(p)
                    }};
                }
                let d = Driver {
                    init: sym!("cuInit"),
                    device_get: sym!("cuDeviceGet"),
                    device_get_attribute: sym!("cuDeviceGetAttribute"),
                    primary_ctx_retain: sym!("cuDevicePrimaryCtxRetain"),
                    ctx_get_current: sym!("cuCtxGetCurrent"),
                    ctx_set_current: sym!("cuCtxSetCurrent"),
                    module_load_data_ex: sym!("cuModuleLoadDataEx"),
                    module_get_function: sym!("cuModuleGetFunction"),
                    module_unload: sym!("cuModuleUnload"),
                    launch_kernel: sym!("cuLaunchKernel"),
                    get_error_string: sym!("cuGetErrorString"),
                };
                check(&d, (d.init)(0), "cuInit")?;
                Ok(d)
            }
        })
        .as_ref()
        .map_err(|e| e.clone())
}

fn check(d: &Driver, r: CuResult, what: &str) -> Result<(), String> {
    if r == 0 {
        return Ok(());
    }
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string or leaves it null.
    let msg = unsafe {
        (d.get_error_string)(r, &mut s);
        if s.is_null() {
            String::new()
        } else {
            CStr::from_ptr(s).to_string_lossy().into_owned()
        }
    };
    Err(format!("{what} failed: CUDA error {r} {msg}"))
}

/// Makes the device's primary context (PyTorch's) current on this thread if none is.
fn ensure_context(d: &Driver, device: i64) -> Result<(), String> {
    // SAFETY: plain driver calls with out-pointers to locals.
    unsafe {
        let mut cur: Handle = std::ptr::null_mut();
        check(d, (d.ctx_get_current)(&mut cur), "cuCtxGetCurrent")?;
        if !cur.is_null() {
            return Ok(());
        }
        let mut dev: CuDevice = 0;
        check(d, (d.device_get)(&mut dev, device as c_int), "cuDeviceGet")?;
        let mut ctx: Handle = std::ptr::null_mut();
        check(d, (d.primary_ctx_retain)(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
        check(d, (d.ctx_set_current)(ctx), "cuCtxSetCurrent")
    }
}

/// The compute capability (major, minor) of `device`.
fn compute_capability(device: i64) -> Result<(i32, i32), String> {
    let d = driver()?;
    // SAFETY: plain driver calls with out-pointers to locals.
    unsafe {
        let mut dev: CuDevice = 0;
        check(d, (d.device_get)(&mut dev, device as c_int), "cuDeviceGet")?;
        let (mut ma, mut mi) = (0, 0);
        // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76 (cuda.h).
        check(d, (d.device_get_attribute)(&mut ma, 75, dev), "cuDeviceGetAttribute")?;
        check(d, (d.device_get_attribute)(&mut mi, 76, dev), "cuDeviceGetAttribute")?;
        Ok((ma, mi))
    }
}

/// The `sm_XY` name LLVM 19 can target for `device`: its own compute capability up to sm_90
/// (newer devices run sm_90 PTX, compiled by the driver).
pub fn sm_name(device: i64) -> Result<String, String> {
    let (major, minor) = compute_capability(device)?;
    let cc = (major * 10 + minor).min(90);
    if cc < 70 {
        return Err(format!("compute capability {major}.{minor} is older than sm_70"));
    }
    Ok(format!("sm_{cc}"))
}

/// nvJitLink's entry points (`nvJitLink.h`; the unversioned names every release exports).
struct NvJitLink {
    create: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Handle) -> c_int,
    add_data: unsafe extern "C" fn(Handle, c_int, *const c_void, usize, *const c_char) -> c_int,
    complete: unsafe extern "C" fn(Handle) -> c_int,
    cubin_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
    error_log_size: unsafe extern "C" fn(Handle, *mut usize) -> c_int,
    error_log: unsafe extern "C" fn(Handle, *mut c_char) -> c_int,
}

// SAFETY: plain function pointers into a library that stays loaded; nvJitLink handles are
// independent, so different threads may each drive their own.
unsafe impl Send for NvJitLink {}
unsafe impl Sync for NvJitLink {}

/// Note [nvJitLink]: the driver's PTX JIT compiles one module at a time however many threads
/// call it (Note [parallel modules]), but nvJitLink (the CUDA toolkit's in-process linker,
/// which runs ptxas as a library) compiles PTX to a cubin on any number of threads at once, and
/// the driver loads a cubin in well under a millisecond. Measured on an H200 (each module
/// compiled once, cold): GPT-2's 13 modules took 1313 ms through the driver, 1392 ms through
/// nvJitLink on one thread and 201 ms on 13; resnet18's 443 ms, 476 ms and 60 ms. A one-module
/// graph gains nothing, and the driver's code was faster there (the 8192x8192 pointwise chain
/// 0.208 ms against 0.235, softmax 0.138 against 0.174 from nvJitLink 13.0's cubin), so by
/// default only graphs of two or more modules use it. PyTorch's CUDA wheels ship the library
/// (`nvidia/cu13/lib`, or `nvidia/nvjitlink/lib` for CUDA 12) and load it; it is found by its
/// soname, else on `sys.path`. `DYNAMO_NVJITLINK`: `0` never uses it, `1` uses it for every
/// graph, a path names the library; `DYNAMO_NVJITLINK_OPTS` adds options (space-separated,
/// for measurements). Without it, or when it or the driver refuses a module, that module is
/// loaded as PTX through the driver's JIT.
fn nvjitlink(py: Python<'_>) -> Option<&'static NvJitLink> {
    static LIB: OnceLock<Option<NvJitLink>> = OnceLock::new();
    LIB.get_or_init(|| {
        let env = std::env::var("DYNAMO_NVJITLINK").ok();
        if env.as_deref() == Some("0") {
            return None;
        }
        let mut candidates: Vec<String> = env.into_iter().filter(|v| v != "1").collect();
        candidates.extend(["libnvJitLink.so.13", "libnvJitLink.so.12"].map(String::from));
        if let Ok(path) = py.import("sys").and_then(|s| s.getattr("path")).and_then(|p| p.extract::<Vec<String>>()) {
            for dir in path {
                for rel in ["nvidia/cu13/lib/libnvJitLink.so.13", "nvidia/nvjitlink/lib/libnvJitLink.so.12"] {
                    let f = std::path::Path::new(&dir).join(rel);
                    if f.exists() {
                        candidates.push(f.to_string_lossy().into_owned());
                    }
                }
            }
        }
        for name in candidates {
            let Ok(cname) = CString::new(name.clone()) else { continue };
            // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols have nvJitLink.h's C
            // signatures, which the field types spell out.
            unsafe {
                let h = libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
                if h.is_null() {
                    continue;
                }
                macro_rules! sym {
                    ($name:literal) => {{
                        let p = libc::dlsym(h, concat!($name, "\0").as_ptr() as *const c_char);
                        if p.is_null() {
                            continue;
                        }
                        std::mem::transmute::<*mut c_void, _>(p)
                    }};
                }
                let lib = NvJitLink {
                    create: sym!("nvJitLinkCreate"),
                    destroy: sym!("nvJitLinkDestroy"),
                    add_data: sym!("nvJitLinkAddData"),
                    complete: sym!("nvJitLinkComplete"),
                    cubin_size: sym!("nvJitLinkGetLinkedCubinSize"),
                    cubin: sym!("nvJitLinkGetLinkedCubin"),
                    error_log_size: sym!("nvJitLinkGetErrorLogSize"),
                    error_log: sym!("nvJitLinkGetErrorLog"),
                };
                tracing::debug!(target: "inductor::compile_time", "nvJitLink from {name}");
                return Some(lib);
            }
        }
        tracing::debug!(target: "inductor::compile_time", "no nvJitLink: PTX goes through the driver's JIT");
        None
    })
    .as_ref()
}

impl NvJitLink {
    /// Assembles `ptx` into a cubin for `arch` (`sm_90`), on the calling thread.
    fn cubin_of(&self, ptx: &str, arch: &str) -> Result<Vec<u8>, String> {
        let mut opts = vec![CString::new(format!("-arch={arch}")).map_err(|e| e.to_string())?];
        for o in std::env::var("DYNAMO_NVJITLINK_OPTS").unwrap_or_default().split_whitespace() {
            opts.push(CString::new(o).map_err(|e| e.to_string())?);
        }
        // nvJitLink reads PTX as a C string (the size notwithstanding): NUL-terminate it.
        let text = CString::new(ptx).map_err(|e| e.to_string())?;
        let opts: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut h: Handle = std::ptr::null_mut();
        // SAFETY: nvJitLink calls on a handle this function creates and destroys; buffers are
        // sized by the library's own size queries. NVJITLINK_INPUT_PTX = 2.
        unsafe {
            if (self.create)(&mut h, opts.len() as u32, opts.as_ptr()) != 0 {
                return Err("nvJitLinkCreate failed".into());
            }
            let r = (|| {
                let mut r = (self.add_data)(h, 2, text.as_ptr() as *const c_void, ptx.len(), c"dynamo.ptx".as_ptr());
                if r == 0 {
                    r = (self.complete)(h);
                }
                if r != 0 {
                    let mut n = 0usize;
                    (self.error_log_size)(h, &mut n);
                    let mut log = vec![0u8; n + 1];
                    (self.error_log)(h, log.as_mut_ptr() as *mut c_char);
                    let log = String::from_utf8_lossy(&log).trim_end_matches('\0').to_string();
                    return Err(format!("nvJitLink error {r}: {log}"));
                }
                let mut n = 0usize;
                if (self.cubin_size)(h, &mut n) != 0 || n == 0 {
                    return Err("nvJitLinkGetLinkedCubinSize failed".into());
                }
                let mut out = vec![0u8; n];
                if (self.cubin)(h, out.as_mut_ptr() as *mut c_void) != 0 {
                    return Err("nvJitLinkGetLinkedCubin failed".into());
                }
                Ok(out)
            })();
            (self.destroy)(&mut h);
            r
        }
    }
}

/// A kernel entry point and its launch shape: (function, grid, block).
#[derive(Clone, Copy)]
struct Func(Handle, u32, u32);

// SAFETY: a CUDA function handle may be used from any thread of the process.
unsafe impl Send for Func {}
unsafe impl Sync for Func {}

/// One PTX module loaded into the primary context of `device`; unloaded when dropped.
struct Loaded {
    module: Handle,
    device: i64,
}

impl Loaded {
    /// Loads `ptx` with the driver's PTX compiler at `jit_opt` (Note [JIT level]). Returns the
    /// module and the milliseconds the driver's compiler says it spent.
    fn new(ptx: &str, device: i64, jit_opt: Option<u32>) -> Result<(Loaded, f32), String> {
        let d = driver()?;
        ensure_context(d, device)?;
        let text = CString::new(ptx).map_err(|e| e.to_string())?;
        let mut module: Handle = std::ptr::null_mut();
        // CUjit_option values (cuda.h): CU_JIT_WALL_TIME = 2 (out: a float of milliseconds in
        // the value slot), CU_JIT_OPTIMIZATION_LEVEL = 7 (in: 0-4).
        let mut opts: Vec<c_int> = vec![2];
        let mut vals: Vec<*mut c_void> = vec![std::ptr::null_mut()];
        if let Some(level) = jit_opt {
            opts.push(7);
            vals.push(level as usize as *mut c_void);
        }
        // SAFETY: `text` is NUL-terminated PTX; `opts`/`vals` have the same length, each value
        // of the type its option documents.
        unsafe {
            check(
                d,
                (d.module_load_data_ex)(&mut module, text.as_ptr() as *const c_void, opts.len() as c_uint, opts.as_mut_ptr(), vals.as_mut_ptr()),
                "cuModuleLoadDataEx",
            )?;
        }
        Ok((Loaded { module, device }, f32::from_bits(vals[0] as usize as u32)))
    }

    /// Loads a cubin (machine code made by nvJitLink, Note [nvJitLink]): no JIT compiler runs.
    fn from_cubin(cubin: &[u8], device: i64) -> Result<Loaded, String> {
        let d = driver()?;
        ensure_context(d, device)?;
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: `cubin` is a complete ELF image the driver reads during the call.
        unsafe {
            check(
                d,
                (d.module_load_data_ex)(&mut module, cubin.as_ptr() as *const c_void, 0, std::ptr::null_mut(), std::ptr::null_mut()),
                "cuModuleLoadDataEx (cubin)",
            )?;
        }
        Ok(Loaded { module, device })
    }

    /// The entry point `l.entry` of this module, with `l`'s launch shape.
    fn func(&self, l: &llvm::nvptx::Launch) -> Result<Func, String> {
        let d = driver()?;
        let name = CString::new(l.entry.as_str()).map_err(|e| e.to_string())?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: `module` is loaded; `name` is NUL-terminated.
        unsafe { check(d, (d.module_get_function)(&mut f, self.module, name.as_ptr()), "cuModuleGetFunction")? };
        Ok(Func(f, l.grid, l.block))
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let Ok(d) = driver() {
            // SAFETY: the module was loaded by `Loaded::new` and no kernel of it is launched
            // after this (its owner is being dropped).
            unsafe {
                if ensure_context(d, self.device).is_ok() {
                    let _ = (d.module_unload)(self.module);
                }
            }
        }
    }
}

/// A kernel's code for unaligned arguments (the scalar twin, nvptx's Note [lazy twins]).
enum Twin {
    /// The kernel has none (it is scalar already).
    None,
    Loaded(Func),
    /// Compiled on first use: index into `LazyTwins::kernels`.
    Lazy(usize),
}

/// Note [lazy twins] (runtime side): the scalar twins of a graph's vectorized kernels are
/// compiled, all in one module, the first time any kernel of the graph is launched with an
/// argument pointer that is not 16-byte aligned.
struct LazyTwins {
    kernels: Vec<llvm::Kernel>,
    sm: String,
    opts: llvm::nvptx::PtxOptions,
    jit: Option<u32>,
    done: OnceLock<Result<(Loaded, Vec<Func>), String>>,
}

/// A graph's loaded kernels: one or more PTX modules (compiled in parallel, Note [parallel
/// modules]) and each kernel's entry points.
pub struct CudaModule {
    /// Held to unload the modules with the graph.
    _modules: Vec<Loaded>,
    /// Per kernel: its function for aligned arguments, and its twin.
    funcs: Vec<(Func, Twin)>,
    lazy: Option<LazyTwins>,
    pub device: i64,
    /// The PTX of every module, for dumps.
    pub ptx: String,
}

// SAFETY: CUDA module and function handles may be used from any thread of the process.
unsafe impl Send for CudaModule {}
unsafe impl Sync for CudaModule {}
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

impl CudaModule {
    /// The twin of kernel `j` of the lazy list, compiling and loading the twins on first use.
    fn lazy_twin(&self, j: usize) -> Result<Func, String> {
        let lz = self.lazy.as_ref().ok_or("no lazy twins")?;
        let r = lz.done.get_or_init(|| {
            let m = llvm::nvptx::compile_twins(&lz.kernels, &lz.sm, &lz.opts).map_err(|e| e.to_string())?;
            let (loaded, _) = Loaded::new(&m.ptx, self.device, lz.jit)?;
            let funcs = m.kernels.iter().map(|k| loaded.func(&k.launch)).collect::<Result<Vec<_>, _>>()?;
            Ok((loaded, funcs))
        });
        match r {
            Ok((_, funcs)) => Ok(funcs[j]),
            Err(e) => Err(e.clone()),
        }
    }

    /// Launches kernel `k` on `stream` with the device pointers `ptrs` (one per kernel argument).
    ///
    /// # Safety
    /// `ptrs` must point to device memory of this module's device laid out as the kernel's
    /// compile-time sizes and strides say, outputs not aliasing anything else.
    pub unsafe fn launch(&self, k: usize, ptrs: &[u64], stream: usize) -> Result<(), String> {
        let d = driver()?;
        ensure_context(d, self.device)?;
        let (aligned, twin) = &self.funcs[k];
        let unaligned = ptrs.iter().any(|p| p % 16 != 0);
        let Func(f, grid, block) = match twin {
            Twin::Loaded(u) if unaligned => *u,
            Twin::Lazy(j) if unaligned => self.lazy_twin(*j)?,
            _ => *aligned,
        };
        let mut params: Vec<*mut c_void> = ptrs.iter().map(|p| p as *const u64 as *mut c_void).collect();
        check(d, (d.launch_kernel)(f, grid, 1, 1, block, 1, 1, 0, stream as Handle, params.as_mut_ptr(), std::ptr::null_mut()), "cuLaunchKernel")
    }
}

/// What the runtime needs to run a graph's kernels on the GPU.
pub struct CudaRuntime {
    /// Shared with other graphs whose kernels are the same (Note [module cache]).
    pub module: Arc<CudaModule>,
    /// `torch._C._cuda_getCurrentRawStream` (device index -> stream handle).
    pub current_stream: Py<PyAny>,
}

impl CudaRuntime {
    /// Launches kernel `k` on PyTorch's current stream of the module's device.
    pub fn launch(&self, py: Python<'_>, k: usize, ptrs: &[usize]) -> PyResult<()> {
        let stream: usize = self.current_stream.bind(py).call1((self.module.device,))?.extract()?;
        let ptrs: Vec<u64> = ptrs.iter().map(|p| *p as u64).collect();
        // SAFETY: the caller bound tensors whose layouts were checked or allocated by the plan.
        unsafe { self.module.launch(k, &ptrs, stream) }.map_err(PyRuntimeError::new_err)
    }
}

/// Note [JIT level]: the optimization level the driver's PTX compiler runs at
/// (`CU_JIT_OPTIMIZATION_LEVEL`, 0-4; the driver's default is 4). `DYNAMO_CUDA_JIT_OPT`
/// overrides the default (for measurements); `None` passes no option.
fn jit_level() -> Option<u32> {
    match std::env::var("DYNAMO_CUDA_JIT_OPT").ok().and_then(|v| v.parse::<u32>().ok()) {
        Some(l) if l <= 4 => Some(l),
        _ => DEFAULT_JIT_LEVEL,
    }
}

/// Default of Note [JIT level].
const DEFAULT_JIT_LEVEL: Option<u32> = None;

/// Note [module cache]: loaded modules by device, target, options and kernels (names aside;
/// `nvptx::module_key`). A graph compiled again (after `dynamo.reset()`, a guard failure, or
/// the same code reached from another frame) reuses the loaded module while some compiled
/// graph still holds it: neither LLVM nor the driver's compiler runs again. Entries are weak,
/// so a module is unloaded with the last graph that uses it. `DYNAMO_CUDA_MODULE_CACHE=0`
/// turns it off (for cold-compile measurements).
fn module_cache() -> &'static Mutex<HashMap<String, Weak<CudaModule>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Weak<CudaModule>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Note [parallel modules]: a graph's distinct kernels (equal kernels are compiled once) are
/// split into up to `DYNAMO_CUDA_COMPILE_THREADS` (default: the cores, at most 16) modules of
/// consecutive kernels, each made by LLVM, and assembled to a cubin by nvJitLink (Note
/// [nvJitLink]), on its own thread; the driver then loads them one after the other on the
/// calling thread. Without nvJitLink the driver compiles the PTX as it loads it: loading from
/// several threads at once was no faster on an H200 host (the driver's PTX compiler seems to
/// run one module at a time; the threads only added contention: resnet18's 18 kernels took
/// 3.5 s of driver time summed over 16 threads against 0.4 s on one).
fn compile_threads(n_kernels: usize) -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let want = std::env::var("DYNAMO_CUDA_COMPILE_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(cores.min(16));
    want.clamp(1, n_kernels.max(1))
}

/// What loading one module gives: the module, each of its kernels' (aligned function, twin
/// launch if lazy, twin function if in the module), its PTX, LLVM and driver/nvJitLink microseconds.
type Part = (Loaded, Vec<(Func, Option<llvm::nvptx::Launch>, Option<Func>)>, String, u64, u64);

/// One module compiled on a worker thread: its PTX, LLVM's microseconds, and (Note
/// [nvJitLink]) its cubin or why there is none, with nvJitLink's microseconds.
struct Made {
    m: llvm::nvptx::PtxModule,
    llvm_us: u64,
    cubin: Option<Result<Vec<u8>, String>>,
    link_us: u64,
}

/// Compiles one module of `kernels` to PTX (on the calling thread), and to a cubin for `arch`
/// when `link` is given.
fn compile_part(kernels: &[llvm::Kernel], sm: &str, opts: &llvm::nvptx::PtxOptions, link: Option<(&NvJitLink, &str)>) -> Result<Made, String> {
    let t0 = std::time::Instant::now();
    let m = llvm::nvptx::compile_ptx_with(kernels, sm, opts).map_err(|e| e.to_string())?;
    let t1 = std::time::Instant::now();
    let cubin = link.map(|(lib, arch)| lib.cubin_of(&m.ptx, arch));
    let link_us = t1.elapsed().as_micros() as u64;
    Ok(Made { m, llvm_us: (t1 - t0).as_micros() as u64, cubin, link_us })
}

/// Loads a module made by [`compile_part`]: its cubin when there is one that the driver takes,
/// else its PTX through the driver's JIT.
fn load_part(made: Made, device: i64, jit: Option<u32>) -> Result<Part, String> {
    let Made { m, llvm_us, cubin, link_us } = made;
    let t1 = std::time::Instant::now();
    let from_cubin = match cubin {
        Some(Ok(image)) => match Loaded::from_cubin(&image, device) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::debug!(target: "inductor::compile_time", "cubin not loaded ({e}); loading PTX");
                None
            }
        },
        Some(Err(e)) => {
            tracing::debug!(target: "inductor::compile_time", "nvJitLink refused a module ({e}); loading PTX");
            None
        }
        None => None,
    };
    let via_cubin = from_cubin.is_some();
    if via_cubin {
        super::counters::GPU_CUBIN_MODULES.fetch_add(1, Ordering::Relaxed);
    }
    let (loaded, jit_wall_ms) = match from_cubin {
        Some(l) => (l, 0.0),
        None => Loaded::new(&m.ptx, device, jit)?,
    };
    let t2 = std::time::Instant::now();
    tracing::debug!(
        target: "inductor::compile_time",
        "{} GPU kernels: LLVM {:.1} ms (emit {:.1}, passes {:.1}, isel+print {:.1}), nvJitLink {:.1} ms, driver load {:.1} ms of {} (its compiler: {:.1} ms)",
        m.kernels.len(),
        llvm_us as f64 / 1e3,
        m.timings_ms[0],
        m.timings_ms[1],
        m.timings_ms[2],
        link_us as f64 / 1e3,
        (t2 - t1).as_secs_f64() * 1e3,
        if via_cubin { "cubin" } else { "PTX" },
        jit_wall_ms
    );
    let mut funcs = Vec::with_capacity(m.kernels.len());
    for k in &m.kernels {
        let f = loaded.func(&k.launch)?;
        let (lazy, twin) = match &k.unaligned {
            Some(u) if k.twin_in_module => (None, Some(loaded.func(u)?)),
            Some(u) => (Some(u.clone()), None),
            None => (None, None),
        };
        funcs.push((f, lazy, twin));
    }
    let jit_us = (t2 - t1).as_micros() as u64 + if via_cubin { link_us } else { 0 };
    Ok((loaded, funcs, m.ptx, llvm_us, jit_us))
}

/// Builds every group's kernel, compiles them to PTX and loads it on `device` (or takes the
/// module from the cache, Note [module cache]).
pub fn codegen(py: Python<'_>, ir: &GraphIr, sched: &Schedule, device: i64) -> Result<(Vec<KernelPlan>, CudaRuntime, String), String> {
    let current_stream = py
        .import("torch")
        .and_then(|t| t.getattr("_C"))
        .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
        .map_err(|e| format!("torch has no CUDA stream accessor: {e}"))?
        .unbind();
    let sm = sm_name(device)?;
    let (kernels, plans) = super::codegen::build_kernels(ir, sched)?;
    let opts = llvm::nvptx::PtxOptions::from_env();
    let jit = jit_level();
    let use_cache = !std::env::var("DYNAMO_CUDA_MODULE_CACHE").is_ok_and(|v| v == "0");
    let keys: Vec<String> = kernels.iter().map(llvm::nvptx::kernel_key).collect();
    let key = format!("{device}|{sm}|{opts:?}|{jit:?}|{}", keys.join("\n"));
    if use_cache {
        if let Some(m) = module_cache().lock().unwrap().get(&key).and_then(Weak::upgrade) {
            super::counters::GPU_MODULE_CACHE_HITS.fetch_add(1, Ordering::Relaxed);
            return Ok((plans, CudaRuntime { module: m, current_stream }, String::new()));
        }
    }
    // Distinct kernels, in order of first appearance; `which[i]` is kernel i's distinct index.
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut unique: Vec<usize> = Vec::new();
    let which: Vec<usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            *first.entry(k.as_str()).or_insert_with(|| {
                unique.push(i);
                unique.len() - 1
            })
        })
        .collect();
    let n_parts = compile_threads(unique.len());
    let per = unique.len().div_ceil(n_parts).max(1);
    let chunks: Vec<Vec<llvm::Kernel>> = unique.chunks(per).map(|c| c.iter().map(|&i| kernels[i].clone()).collect()).collect();
    // Note [nvJitLink]: the cubin targets the device's own architecture (PTX for sm_90 runs on
    // newer devices too).
    let always = std::env::var("DYNAMO_NVJITLINK").is_ok_and(|v| v == "1");
    let lib = if chunks.len() > 1 || always { nvjitlink(py) } else { None };
    let arch = compute_capability(device).map(|(ma, mi)| format!("sm_{ma}{mi}"))?;
    let link = lib.map(|l| (l, arch.as_str()));
    let t0 = std::time::Instant::now();
    let made: Vec<Result<Made, String>> = if chunks.len() <= 1 {
        chunks.iter().map(|c| compile_part(c, &sm, &opts, link)).collect()
    } else {
        // The threads touch no Python object.
        let (sm, opts) = (&sm, &opts);
        std::thread::scope(|s| {
            let handles: Vec<_> = chunks.iter().map(|c| s.spawn(move || compile_part(c, sm, opts, link))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a compile thread panicked".into()))).collect()
        })
    };
    let parts: Vec<Result<Part, String>> = made.into_iter().map(|r| r.and_then(|m| load_part(m, device, jit))).collect();
    let wall = t0.elapsed();
    let mut modules = Vec::new();
    let mut unique_funcs: Vec<(Func, Twin)> = Vec::new();
    let mut lazy_kernels = Vec::new();
    let mut ptx = String::new();
    let (mut llvm_us, mut jit_us) = (0u64, 0u64);
    let mut ui = 0;
    for part in parts {
        let (loaded, funcs, text, l_us, j_us) = part?;
        for (f, lazy, twin) in funcs {
            let t = match (lazy, twin) {
                (_, Some(tf)) => Twin::Loaded(tf),
                (Some(_), None) => {
                    lazy_kernels.push(kernels[unique[ui]].clone());
                    Twin::Lazy(lazy_kernels.len() - 1)
                }
                (None, None) => Twin::None,
            };
            unique_funcs.push((f, t));
            ui += 1;
        }
        modules.push(loaded);
        ptx.push_str(&text);
        llvm_us += l_us;
        jit_us += j_us;
    }
    super::counters::GPU_LLVM_US.fetch_add(llvm_us, Ordering::Relaxed);
    super::counters::GPU_JIT_US.fetch_add(jit_us, Ordering::Relaxed);
    tracing::debug!(
        target: "inductor::compile_time",
        "{} GPU kernels ({} distinct) in {} modules: {:.1} ms (LLVM {:.1} ms summed over threads, driver {:.1} ms)",
        kernels.len(),
        unique.len(),
        modules.len(),
        wall.as_secs_f64() * 1e3,
        llvm_us as f64 / 1e3,
        jit_us as f64 / 1e3
    );
    tracing::trace!(target: "llvm::ir", "{ptx}");
    let funcs = which
        .iter()
        .map(|&u| {
            let (f, t) = &unique_funcs[u];
            let t = match t {
                Twin::None => Twin::None,
                Twin::Loaded(x) => Twin::Loaded(*x),
                Twin::Lazy(j) => Twin::Lazy(*j),
            };
            (*f, t)
        })
        .collect();
    let lazy = (!lazy_kernels.is_empty()).then(|| LazyTwins { kernels: lazy_kernels, sm: sm.clone(), opts: opts.clone(), jit, done: OnceLock::new() });
    let module = Arc::new(CudaModule { _modules: modules, funcs, lazy, device, ptx });
    if use_cache {
        let mut cache = module_cache().lock().unwrap();
        cache.retain(|_, w| w.strong_count() > 0);
        cache.insert(key, Arc::downgrade(&module));
    }
    Ok((plans, CudaRuntime { module, current_stream }, String::new()))
}
