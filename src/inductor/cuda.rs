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
//! - Kernels run in the primary context of the target device (PyTorch's); a module is loaded
//!   once, at compile time, and unloaded with the compiled graph.
//! - A launch error raises, and the compiled graph reruns the whole graph through `gm.forward`
//!   (Note [errors rerun eagerly] in `wrapper.rs`): never a wrong answer.
//!
//! `DYNAMO_INDUCTOR_GPU=0` turns the path off (graphs on CUDA tensors then run every op as a
//! fallback call into torch, as before this path existed).

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

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

/// The `sm_XY` name LLVM 19 can target for `device`: its own compute capability up to sm_90
/// (newer devices run sm_90 PTX, compiled by the driver).
pub fn sm_name(device: i64) -> Result<String, String> {
    let d = driver()?;
    // SAFETY: plain driver calls with out-pointers to locals.
    let (major, minor) = unsafe {
        let mut dev: CuDevice = 0;
        check(d, (d.device_get)(&mut dev, device as c_int), "cuDeviceGet")?;
        let (mut ma, mut mi) = (0, 0);
        check(d, (d.device_get_attribute)(&mut ma, 75, dev), "cuDeviceGetAttribute")?;
        check(d, (d.device_get_attribute)(&mut mi, 76, dev), "cuDeviceGetAttribute")?;
        (ma, mi)
    };
    let cc = (major * 10 + minor).min(90);
    if cc < 70 {
        return Err(format!("compute capability {major}.{minor} is older than sm_70"));
    }
    Ok(format!("sm_{cc}"))
}

/// A loaded PTX module and its kernels' entry points.
pub struct CudaModule {
    module: Handle,
    /// Per kernel: (function, grid, block) for aligned arguments, then for unaligned ones.
    funcs: Vec<((Handle, u32, u32), Option<(Handle, u32, u32)>)>,
    pub device: i64,
    pub ptx: String,
}

// SAFETY: CUDA module and function handles may be used from any thread of the process.
unsafe impl Send for CudaModule {}
unsafe impl Sync for CudaModule {}

impl CudaModule {
    /// Loads `m` into the primary context of `device`.
    pub fn load(m: &llvm::nvptx::PtxModule, device: i64) -> Result<CudaModule, String> {
        let d = driver()?;
        ensure_context(d, device)?;
        let text = CString::new(m.ptx.as_str()).map_err(|e| e.to_string())?;
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: `text` is NUL-terminated PTX; no JIT options are passed.
        unsafe {
            check(d, (d.module_load_data_ex)(&mut module, text.as_ptr() as *const c_void, 0, std::ptr::null_mut(), std::ptr::null_mut()), "cuModuleLoadDataEx")?;
        }
        let mut out = CudaModule { module, funcs: Vec::new(), device, ptx: m.ptx.clone() };
        let get = |l: &llvm::nvptx::Launch| -> Result<(Handle, u32, u32), String> {
            let name = CString::new(l.entry.as_str()).map_err(|e| e.to_string())?;
            let mut f: Handle = std::ptr::null_mut();
            // SAFETY: `module` was loaded above; `name` is NUL-terminated.
            unsafe { check(d, (d.module_get_function)(&mut f, module, name.as_ptr()), "cuModuleGetFunction")? };
            Ok((f, l.grid, l.block))
        };
        for k in &m.kernels {
            let aligned = get(&k.launch)?;
            let unaligned = k.unaligned.as_ref().map(get).transpose()?;
            out.funcs.push((aligned, unaligned));
        }
        Ok(out)
    }

    /// Launches kernel `k` on `stream` with the device pointers `ptrs` (one per kernel argument).
    ///
    /// # Safety
    /// `ptrs` must point to device memory of this module's device laid out as the kernel's
    /// compile-time sizes and strides say, outputs not aliasing anything else.
    pub unsafe fn launch(&self, k: usize, ptrs: &[u64], stream: usize) -> Result<(), String> {
        let d = driver()?;
        ensure_context(d, self.device)?;
        let (aligned, unaligned) = &self.funcs[k];
        let (f, grid, block) = match unaligned {
            Some(u) if ptrs.iter().any(|p| p % 16 != 0) => *u,
            _ => *aligned,
        };
        let mut params: Vec<*mut c_void> = ptrs.iter().map(|p| p as *const u64 as *mut c_void).collect();
        check(d, (d.launch_kernel)(f, grid, 1, 1, block, 1, 1, 0, stream as Handle, params.as_mut_ptr(), std::ptr::null_mut()), "cuLaunchKernel")
    }
}

impl Drop for CudaModule {
    fn drop(&mut self) {
        if let Ok(d) = driver() {
            // SAFETY: the module was loaded by `load` and no kernel of it is launched after this.
            unsafe {
                if ensure_context(d, self.device).is_ok() {
                    let _ = (d.module_unload)(self.module);
                }
            }
        }
    }
}

/// What the runtime needs to run a graph's kernels on the GPU.
pub struct CudaRuntime {
    pub module: CudaModule,
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

/// Builds every group's kernel, compiles them to PTX and loads it on `device`.
pub fn codegen(py: Python<'_>, ir: &GraphIr, sched: &Schedule, device: i64) -> Result<(Vec<KernelPlan>, CudaRuntime, String), String> {
    let current_stream = py
        .import("torch")
        .and_then(|t| t.getattr("_C"))
        .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
        .map_err(|e| format!("torch has no CUDA stream accessor: {e}"))?
        .unbind();
    let sm = sm_name(device)?;
    let (kernels, plans) = super::codegen::build_kernels(ir, sched)?;
    let t0 = std::time::Instant::now();
    let m = llvm::nvptx::compile_ptx(&kernels, &sm).map_err(|e| e.to_string())?;
    let t1 = std::time::Instant::now();
    let module = CudaModule::load(&m, device)?;
    tracing::debug!(
        target: "inductor::compile_time",
        "{} GPU kernels for {sm}: LLVM {:.1} ms, driver load {:.1} ms",
        kernels.len(),
        (t1 - t0).as_secs_f64() * 1e3,
        t1.elapsed().as_secs_f64() * 1e3
    );
    tracing::trace!(target: "llvm::ir", "{}", m.ptx);
    Ok((plans, CudaRuntime { module, current_stream }, m.llvm_ir))
}
