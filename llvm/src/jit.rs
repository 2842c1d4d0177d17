//! `JitModule`: kernels -> one LLVM module each -> O3 -> host object code (or the disk cache's
//! copy, Note [kernel disk cache]) -> loaded through ORC LLJIT.
//!
//! Invariants:
//! - One process-wide LLJIT (behind a mutex) links every module; the code of each LLVM module is
//!   owned by a `ModuleCode` (its resource tracker), shared by every `JitModule` that runs one of
//!   its kernels and freed with the last of them. A module holds one kernel, linked under a
//!   symbol derived from its cache key (`link_symbol`), so live modules never clash; the kernel's
//!   own name (`unique_kernel_prefix` helps) is what dumps and profiles show.
//! - Note [kernel cache]: a kernel equal to one already loaded (same loops, loads, ops, stores and
//!   dtypes after legalization; names aside) is not compiled again: the repeated blocks of a
//!   transformer, or a graph compiled again after a guard failure, reuse the machine code.
//! - Code is generated for the host CPU (`LLVMGetHostCPUName`/`Features`), so AVX2/AVX-512 are used
//!   where present; libm calls vectorize through glibc's libmvec when it can be loaded.
//! - A kernel entry has the C signature `void(void **args, i64 start, i64 end)`; `run` passes one
//!   pointer per `KernelArg`, in order, and splits `[0, ranges[0])` across threads when the kernel
//!   is large: the OpenMP team of the libgomp already loaded in the process (PyTorch's own
//!   intra-op pool, so our kernels and torch's never oversubscribe the cores; Note [one thread
//!   pool]), else rayon's pool.

use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use inkwell::context::Context;
use inkwell::llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use inkwell::llvm_sys::orc2::lljit::*;
use inkwell::llvm_sys::orc2::*;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::values::AnyValue;
use inkwell::OptimizationLevel;
use sha2::{Digest, Sha256};
use rayon::prelude::*;

use crate::emit::{Emitter, TargetInfo};
use crate::kernel::Kernel;
use crate::legalize::legalize;
use crate::CodegenError;

/// Kernels with at least this many points run split across threads.
pub const PARALLEL_MIN_NUMEL: i64 = 1 << 16;

/// Chunks per thread for a parallel kernel.
const CHUNKS_PER_THREAD: i64 = 4;

// Note [one thread pool]: PyTorch runs its CPU ops on an OpenMP team (libgomp). Its workers spin
// for a while after each parallel region; a second pool (rayon) starting right after would put
// twice as many busy threads as cores on the machine at every kernel/extern-kernel boundary. So
// when the process has libgomp loaded (torch brings it), parallel kernels run on that same team
// through libgomp's ABI entry `GOMP_parallel`, with `omp_get_max_threads()` threads (what
// `torch.set_num_threads` sets); chunks are handed out through an atomic counter. Without libgomp
// (the Rust tests), rayon runs them. `DYNAMO_THREADS=rayon` forces rayon.

/// libgomp's entry points, resolved from the copy already loaded in the process.
struct Gomp {
    parallel: unsafe extern "C" fn(extern "C" fn(*mut libc::c_void), *mut libc::c_void, libc::c_uint, libc::c_uint),
    max_threads: unsafe extern "C" fn() -> libc::c_int,
}

fn gomp() -> Option<&'static Gomp> {
    static GOMP: OnceLock<Option<Gomp>> = OnceLock::new();
    GOMP.get_or_init(|| {
        if std::env::var("DYNAMO_THREADS").is_ok_and(|v| v == "rayon") {
            return None;
        }
        // The path of a loaded libgomp, from this process's mappings.
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let path = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| {
            let name = p.rsplit('/').next().unwrap_or("");
            name.starts_with("libgomp") && name.contains(".so")
        })?;
        let cpath = CString::new(path).ok()?;
        // SAFETY: RTLD_NOLOAD only returns a handle to a library that is already loaded; the
        // symbols have libgomp's documented C ABI.
        unsafe {
            let handle = libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if handle.is_null() {
                return None;
            }
            let parallel = libc::dlsym(handle, c"GOMP_parallel".as_ptr());
            let max_threads = libc::dlsym(handle, c"omp_get_max_threads".as_ptr());
            if parallel.is_null() || max_threads.is_null() {
                return None;
            }
            Some(Gomp { parallel: std::mem::transmute(parallel), max_threads: std::mem::transmute(max_threads) })
        }
    })
    .as_ref()
}

/// Which pool runs parallel kernels: `"openmp"` (the process's libgomp team, shared with PyTorch)
/// or `"rayon"`.
pub fn thread_pool_name() -> &'static str {
    if gomp().is_some() {
        "openmp"
    } else {
        "rayon"
    }
}

/// Work shared by an OpenMP team: chunk `c` of `n_chunks` covers outer iterations
/// `[units * c / n_chunks * align, ...)`.
struct TeamWork {
    f: KernelFn,
    args: *const *mut u8,
    next: std::sync::atomic::AtomicI64,
    n_chunks: i64,
    units: i64,
    align: i64,
    outer: i64,
}

extern "C" fn team_body(data: *mut libc::c_void) {
    // SAFETY: `data` is the `TeamWork` that `run` keeps alive until GOMP_parallel returns.
    let w = unsafe { &*(data as *const TeamWork) };
    loop {
        let c = w.next.fetch_add(1, Ordering::Relaxed);
        if c >= w.n_chunks {
            break;
        }
        let start = (w.units * c / w.n_chunks * w.align).min(w.outer);
        let end = (w.units * (c + 1) / w.n_chunks * w.align).min(w.outer);
        // SAFETY: chunks are disjoint ranges of the outer loop; see `JitModule::run`.
        unsafe { (w.f)(w.args, start, end) };
    }
}

/// libm functions whose AVX-512 libmvec variants are less exact than their AVX2 ones, so only
/// the AVX2 variants are offered (loops calling them vectorize at 8 lanes). Over 2^20 floats
/// of N(0, 36), bit-compared with eager: `_ZGVeN16v_tanhf` differs in 31% of elements and returns
/// +-0.99999994 where eager's (and the AVX2 variant's) tanh is exactly +-1 (|x| > 9.02: 39771
/// elements; `(torch.tanh(x) * 6).long()` then changes), against 3.9% and 1 for AVX2;
/// `_ZGVeN16v_erff` differs in 28% (up to 4 ulp) against 13% (2 ulp). The others are as exact
/// at either width (Note [512-bit vectors] in emit.rs).
const AVX512_INEXACT: &[&str] = &["tanhf", "erff"];

/// The float32 functions computed in double by default (Note [float math in double]);
/// `DYNAMO_LLVM_MATH_IN_DOUBLE` (comma-separated float64 names, empty for none) overrides it.
const MATH_IN_DOUBLE: &[&str] = &["log", "log1p", "expm1", "sin", "cos"];

/// libm functions `emit` calls, with their vector-ABI parameter codes.
const MATH_FUNCTIONS: &[(&str, &str)] =
    &[
        ("sinf", "v"),
        ("cosf", "v"),
        ("expf", "v"),
        ("logf", "v"),
        ("tanhf", "v"),
        ("erff", "v"),
        ("log1pf", "v"),
        ("expm1f", "v"),
        ("powf", "vv"),
        ("exp", "v"),
        ("log", "v"),
        ("log1p", "v"),
        ("expm1", "v"),
        ("sin", "v"),
        ("cos", "v"),
        ("tanh", "v"),
        ("erf", "v"),
    ];

/// Vector widths that give the same bits as a function's canonical variant, measured with
/// glibc 2.36 over 2^32/97 float32 inputs (every 97th bit pattern): `_ZGVdN8v_expf` equals
/// `_ZGVeN16v_expf` on all of them (`_ZGVbN4v_expf` differs on 0.4%), and the float64 `exp`,
/// `erf`, `sin` and `cos` give the same bits at 4 and 8 lanes over 2*10^7 random inputs
/// (`tanh`, `expm1` and `log1p` do not). Entries: (function, extra lane count offered beside
/// the canonical width when the canonical width is twice it).
const SAME_BITS: &[(&str, u32)] = &[("expf", 8), ("exp", 4), ("erf", 4), ("sin", 4), ("cos", 4)];

/// The libmvec symbols offered to the loop vectorizer: per function of [`MATH_FUNCTIONS`], its
/// canonical variant (the widest ISA that `wide_vectors` allows, AVX2 for [`AVX512_INEXACT`],
/// whose symbol `resolves`) and the same-bits widths of [`SAME_BITS`]; the canonical one comes
/// first. Note [one routine per math function] in emit.rs says why no other width is offered.
fn offered_variants(vector_isas: &[(char, u32)], wide_vectors: bool, resolves: impl Fn(&str) -> bool) -> Vec<String> {
    let mut symbols = Vec::new();
    for (name, params) in MATH_FUNCTIONS {
        let lanes_of = |isa_lanes: u32| if crate::emit::F64_MATH.contains(name) { isa_lanes / 2 } else { isa_lanes };
        let usable = |isa: char| !(isa == 'e' && (!wide_vectors || AVX512_INEXACT.contains(name)));
        let Some(canonical) = vector_isas
            .iter()
            .filter(|(isa, _)| usable(*isa))
            .map(|&(isa, lanes)| (isa, lanes_of(lanes)))
            .find(|&(isa, lanes)| resolves(&format!("_ZGV{isa}N{lanes}{params}_{name}")))
        else {
            continue;
        };
        symbols.push(format!("_ZGV{}N{}{params}_{name}", canonical.0, canonical.1));
        for &(isa, lanes) in vector_isas {
            let lanes = lanes_of(lanes);
            let same = SAME_BITS.iter().any(|&(f, l)| f == *name && l == lanes && lanes * 2 == canonical.1);
            let sym = format!("_ZGV{isa}N{lanes}{params}_{name}");
            if same && usable(isa) && resolves(&sym) {
                symbols.push(sym);
            }
        }
    }
    symbols
}

/// Host facts, computed once.
struct Host {
    triple: String,
    target: TargetInfo,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let _ = Target::initialize_native(&InitializationConfig::default());
        set_llvm_options();
        let cpu = TargetMachine::get_host_cpu_name().to_string();
        let features = TargetMachine::get_host_cpu_features().to_string();
        let triple = TargetMachine::get_default_triple().as_str().to_string_lossy().into_owned();
        let mut vector_isas = Vec::new();
        let has_mvec = triple.starts_with("x86_64")
            && inkwell::support::load_library_permanently(std::path::Path::new("libmvec.so.1")).is_ok();
        if has_mvec && std::env::var_os("DYNAMO_LLVM_NO_LIBMVEC").is_none() {
            let has = |f: &str| features.split(',').any(|x| x == f);
            if has("+avx512f") {
                vector_isas.push(('e', 16));
            }
            if has("+avx2") {
                vector_isas.push(('d', 8));
            }
            vector_isas.push(('b', 4));
        }
        let has = |f: &str| features.split(',').any(|x| x == f);
        let wide_vectors = ["+avx512f", "+avx512bw", "+avx512dq", "+avx512vl"].iter().all(|f| has(f))
            && std::env::var("DYNAMO_LLVM_VECTOR_BITS").map_or(true, |v| v != "256");
        let vector_symbols = offered_variants(&vector_isas, wide_vectors, |sym| {
            let c = CString::new(sym).unwrap();
            !unsafe { inkwell::llvm_sys::support::LLVMSearchForAddressOfSymbol(c.as_ptr()) }.is_null()
        });
        let math_in_double = match std::env::var("DYNAMO_LLVM_MATH_IN_DOUBLE") {
            Ok(v) => v.split(',').filter(|n| crate::emit::F64_MATH.contains(n)).map(str::to_string).collect(),
            Err(_) => MATH_IN_DOUBLE.iter().map(|n| n.to_string()).collect(),
        };
        Host { triple, target: TargetInfo { cpu, features, vector_isas, vector_symbols, wide_vectors, math_in_double } }
    })
}

/// LLVM's command-line options for every compile, set once per process: ours
/// ([`LLVM_OPTIONS`]) then whatever `DYNAMO_LLVM_ARGS` adds (space-separated, for experiments).
fn set_llvm_options() {
    let mut args: Vec<String> = vec!["dynamo".into()];
    args.extend(LLVM_OPTIONS.iter().map(|s| s.to_string()));
    if let Ok(extra) = std::env::var("DYNAMO_LLVM_ARGS") {
        args.extend(extra.split_whitespace().map(str::to_string));
    }
    let cargs: Vec<CString> = args.iter().map(|a| CString::new(a.as_str()).unwrap()).collect();
    let ptrs: Vec<*const c_char> = cargs.iter().map(|a| a.as_ptr()).collect();
    // SAFETY: called once (inside HOST's OnceLock), before any compile; the strings outlive it.
    unsafe { inkwell::llvm_sys::support::LLVMParseCommandLineOptions(ptrs.len() as i32, ptrs.as_ptr(), std::ptr::null()) };
}

/// The new-pass-manager pipeline every module runs: `default<O3>`, or `DYNAMO_LLVM_PIPELINE`.
fn pipeline() -> String {
    std::env::var("DYNAMO_LLVM_PIPELINE").unwrap_or_else(|_| "default<O3>".into())
}

/// LLVM options we always set (see [`set_llvm_options`]).
const LLVM_OPTIONS: &[&str] = &[];

/// The emitter's view of the host (CPU, features, libmvec variants).
pub fn host_target_info() -> TargetInfo {
    host().target.clone()
}

/// The process-wide LLJIT and the link symbols its main dylib defines now (Note [kernel disk
/// cache]: a symbol whose module is being dropped stays defined until its tracker is removed).
struct Lljit(LLVMOrcLLJITRef, std::collections::HashSet<String>);
// SAFETY: LLJIT is internally synchronized; we additionally serialize all calls through a Mutex.
unsafe impl Send for Lljit {}

fn take_error(err: LLVMErrorRef) -> Result<(), CodegenError> {
    if err.is_null() {
        return Ok(());
    }
    unsafe {
        let msg = LLVMGetErrorMessage(err);
        let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(msg);
        Err(CodegenError::Jit(text))
    }
}

fn jit() -> Result<&'static Mutex<Lljit>, CodegenError> {
    static JIT: OnceLock<Result<Mutex<Lljit>, String>> = OnceLock::new();
    let res = JIT.get_or_init(|| unsafe {
        host();
        let mut j: LLVMOrcLLJITRef = std::ptr::null_mut();
        take_error(LLVMOrcCreateLLJIT(&mut j, std::ptr::null_mut())).map_err(|e| e.to_string())?;
        let mut gen: LLVMOrcDefinitionGeneratorRef = std::ptr::null_mut();
        take_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
            &mut gen,
            LLVMOrcLLJITGetGlobalPrefix(j),
            None,
            std::ptr::null_mut(),
        ))
        .map_err(|e| e.to_string())?;
        LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j), gen);
        define_runtime_helpers(j).map_err(|e| e.to_string())?;
        Ok(Mutex::new(Lljit(j, Default::default())))
    });
    res.as_ref().map_err(|e| CodegenError::Jit(e.clone()))
}

/// `__truncsfbf2` (float -> bfloat16), the compiler-runtime helper LLVM calls for an `fptrunc` to
/// bfloat on CPUs without AVX512-BF16 when its own passes make one (instcombine narrowing a
/// comparison of two extended bfloat16 values, for instance; the emitter itself rounds with
/// integer operations, `emit::trunc_to_bf16`). libgcc_s does not export it, so without this
/// definition such a kernel failed to link. Same rounding as the emitter: nearest even, NaN to
/// 0xFFFF. The x86-64 ABI passes the float in XMM0 and returns the bfloat16 in the low 16 bits
/// of XMM0, which an `f32` return whose bits hold it matches.
extern "C" fn trunc_sf_bf2(x: f32) -> f32 {
    let bits = x.to_bits();
    let b16 = if x.is_nan() { 0xFFFF } else { (bits.wrapping_add(0x7FFF + ((bits >> 16) & 1))) >> 16 };
    f32::from_bits(b16)
}

/// Defines the runtime helpers of [`trunc_sf_bf2`] in the JIT's main dylib as absolute symbols.
unsafe fn define_runtime_helpers(j: LLVMOrcLLJITRef) -> Result<(), CodegenError> {
    if !cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    let name = CString::new("__truncsfbf2").expect("no NUL");
    let flags = LLVMJITSymbolFlags {
        GenericFlags: (LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported as u8) | (LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsCallable as u8),
        TargetFlags: 0,
    };
    let mut pairs = [LLVMOrcCSymbolMapPair {
        Name: LLVMOrcLLJITMangleAndIntern(j, name.as_ptr()),
        Sym: LLVMJITEvaluatedSymbol { Address: trunc_sf_bf2 as *const () as usize as u64, Flags: flags },
    }];
    let mu = LLVMOrcAbsoluteSymbols(pairs.as_mut_ptr(), pairs.len());
    take_error(LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j), mu))
}

/// Returns a fresh prefix (`k<n>_`) for kernel names, unique in this process.
pub fn unique_kernel_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("k{}_", NEXT.fetch_add(1, Ordering::Relaxed))
}

type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// The machine code of one LLVM module, loaded in the process-wide LLJIT; dropping it unloads
/// the code.
struct ModuleCode {
    tracker: LLVMOrcResourceTrackerRef,
    /// The link symbol the module defines.
    symbol: String,
}

// SAFETY: the tracker is only touched in `drop`, under the JIT mutex.
unsafe impl Send for ModuleCode {}
unsafe impl Sync for ModuleCode {}

impl Drop for ModuleCode {
    fn drop(&mut self) {
        if let Ok(jit) = jit() {
            let mut guard = jit.lock().unwrap_or_else(|e| e.into_inner());
            unsafe {
                let _ = take_error(LLVMOrcResourceTrackerRemove(self.tracker));
                LLVMOrcReleaseResourceTracker(self.tracker);
            }
            guard.1.remove(&self.symbol);
        }
    }
}

/// A loaded kernel as the cache keeps it (Note [kernel cache]).
struct CacheEntry {
    func: KernelFn,
    /// The function's optimized LLVM IR, for `JitModule::llvm_ir`.
    ir: String,
    code: Weak<ModuleCode>,
}

/// Loaded kernels by [`cache_key`]; entries whose code was freed are dropped on the next miss.
fn kernel_cache() -> &'static Mutex<HashMap<String, CacheEntry>> {
    static CACHE: OnceLock<Mutex<HashMap<String, CacheEntry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What makes two legalized kernels the same machine code: everything but the kernel's and its
/// arguments' names.
fn cache_key(k: &Kernel) -> String {
    let mut k = k.clone();
    k.name.clear();
    for a in &mut k.args {
        a.name.clear();
    }
    format!("{k:?}")
}

/// One loaded kernel and the loop facts `run` needs.
pub struct CompiledKernel {
    pub name: String,
    func: KernelFn,
    /// Trip count of the outermost loop after legalization (the range that is split).
    pub outer: i64,
    /// Points in the whole iteration space.
    pub numel: i64,
    /// Points times reduction-loop trips: the amount of work that decides threading.
    pub work: i64,
    /// Number of pointer arguments expected by `run`.
    pub n_args: usize,
    /// Outer-loop chunks given to threads start at multiples of this.
    align: i64,
    /// Runs as one call (Note [scatter stores] in kernel.rs).
    serial: bool,
}

/// Timings of one compile, in milliseconds: `emit_ms`, `opt_ms` and `codegen_ms` add up the
/// kernels' own times (which overlap when they are built on several threads), `link_ms` is the
/// wall time of loading them into the JIT, `wall_ms` that of the whole compile.
#[derive(Clone, Debug, Default)]
pub struct CompileTimes {
    pub emit_ms: f64,
    pub opt_ms: f64,
    pub codegen_ms: f64,
    pub link_ms: f64,
    pub wall_ms: f64,
}

impl CompileTimes {
    fn add(&mut self, o: &CompileTimes) {
        self.emit_ms += o.emit_ms;
        self.opt_ms += o.opt_ms;
        self.codegen_ms += o.codegen_ms;
    }
}

// Note [kernel disk cache]: every kernel is its own LLVM module, named by a link symbol derived
// from its cache key (`link_symbol`: the same loops, loads, ops and stores give the same symbol,
// in every process), so its object code does not depend on the graph it came from or on the
// order of compiles. The object code of each module is kept on disk under a SHA-256 of
// everything that decides it: the module's unoptimized IR (which the emitter, the host's vector
// functions and ATen's vector width all show in), the host triple, CPU and features, the LLVM
// version, the pass pipeline and `DYNAMO_LLVM_ARGS`. A later process that builds the same
// module reads the object back instead of optimizing and compiling it: a training script run a
// second time pays only for emitting and linking (torch.compile's FX graph and code caches do
// the same for its Triton/C++ code). Two live modules never define one symbol: the in-memory
// cache (Note [kernel cache]) holds every live kernel by its key, and a key has one symbol.
// The directory is `$DYNAMO_CACHE_DIR`, else `$XDG_CACHE_HOME/dynamo`, else `~/.cache/dynamo`,
// with a `kernels-v1` folder inside; `DYNAMO_DISK_CACHE=0` or torch's
// `TORCHINDUCTOR_FORCE_DISABLE_CACHES=1` turns it off. A file is written under a temporary name
// and renamed, so a reader sees a whole entry or none; an entry that does not parse is ignored
// and rebuilt. Nothing is evicted (an entry is the size of its machine code, a few KiB).
// Modules are built on up to `compile_threads()` threads (LLVM contexts are independent).

/// The link symbol of a kernel with cache key `key` (Note [kernel disk cache]): `dk_` and 32 hex
/// digits of the key's SHA-256.
fn link_symbol(key: &str) -> String {
    let d = Sha256::digest(key.as_bytes());
    let mut s = String::with_capacity(35);
    s.push_str("dk_");
    for b in &d[..16] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Threads that build kernels: `DYNAMO_COMPILE_THREADS`, else the cores this process may use.
fn compile_threads() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("DYNAMO_COMPILE_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    })
}

/// The kernel disk cache's folder, or None when it is off (Note [kernel disk cache]).
pub fn disk_cache_dir() -> Option<&'static std::path::Path> {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let off = |var: &str, val: &str| std::env::var(var).is_ok_and(|v| v.trim() == val);
        if off("DYNAMO_DISK_CACHE", "0") || off("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1") {
            return None;
        }
        let nonempty = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
        let base = nonempty("DYNAMO_CACHE_DIR")
            .or_else(|| nonempty("XDG_CACHE_HOME").map(|p| p.join("dynamo")))
            .or_else(|| nonempty("HOME").map(|p| p.join(".cache").join("dynamo")))?;
        let dir = base.join("kernels-v1");
        std::fs::create_dir_all(&dir).ok()?;
        Some(dir)
    })
    .as_deref()
}

/// Magic bytes that open a disk cache entry: then the optimized IR's length (u64, little
/// endian), the IR, and the object code.
const DISK_MAGIC: &[u8; 8] = b"DYNK\x001\x00\x00";

/// The disk cache's key of a module: SHA-256, in hex, of its unoptimized IR and of everything
/// else that decides its object code (Note [kernel disk cache]).
fn disk_key(host: &Host, unoptimized_ir: &str) -> String {
    let (mut major, mut minor, mut patch) = (0u32, 0u32, 0u32);
    // SAFETY: writes three integers.
    unsafe { inkwell::llvm_sys::core::LLVMGetVersion(&mut major, &mut minor, &mut patch) };
    let mut h = Sha256::new();
    for part in [
        format!("llvm {major}.{minor}.{patch}"),
        host.triple.clone(),
        host.target.cpu.clone(),
        host.target.features.clone(),
        pipeline(),
        std::env::var("DYNAMO_LLVM_ARGS").unwrap_or_default(),
        format!("{:?}", OptimizationLevel::Aggressive),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    h.update(unoptimized_ir.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a disk cache entry: (optimized IR, object code).
fn disk_read(dir: &std::path::Path, key: &str) -> Option<(String, Vec<u8>)> {
    let bytes = std::fs::read(dir.join(format!("{key}.kobj"))).ok()?;
    let rest = bytes.strip_prefix(DISK_MAGIC.as_slice())?;
    let (len, rest) = rest.split_at_checked(8)?;
    let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
    let (ir, obj) = rest.split_at_checked(len)?;
    if obj.is_empty() {
        return None;
    }
    Some((String::from_utf8(ir.to_vec()).ok()?, obj.to_vec()))
}

/// Writes a disk cache entry under a temporary name, then renames it; failures only cost a
/// later rebuild.
fn disk_write(dir: &std::path::Path, key: &str, ir: &str, obj: &[u8]) {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!("{key}.{}.{}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let mut bytes = Vec::with_capacity(16 + ir.len() + obj.len());
    bytes.extend_from_slice(DISK_MAGIC);
    bytes.extend_from_slice(&(ir.len() as u64).to_le_bytes());
    bytes.extend_from_slice(ir.as_bytes());
    bytes.extend_from_slice(obj);
    if std::fs::write(&tmp, &bytes).is_err() || std::fs::rename(&tmp, dir.join(format!("{key}.kobj"))).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// One kernel's module, built: its optimized IR (under its link symbol) and object code.
struct Built {
    ir: String,
    obj: Vec<u8>,
    from_disk: bool,
    times: CompileTimes,
}

/// Builds one kernel (already named by its link symbol) as its own module, or reads it from the
/// disk cache.
fn build_one(host: &Host, kernel: &Kernel) -> Result<Built, CodegenError> {
    let t0 = Instant::now();
    let ctx = Context::create();
    let module = ctx.create_module("dynamo_kernels");
    let triple = TargetTriple::create(&host.triple);
    let target = Target::from_triple(&triple).map_err(|e| CodegenError::Jit(e.to_string()))?;
    let tm = target
        .create_target_machine(&triple, &host.target.cpu, &host.target.features, OptimizationLevel::Aggressive, RelocMode::PIC, CodeModel::Small)
        .ok_or_else(|| CodegenError::Jit("cannot create a target machine for the host".into()))?;
    module.set_triple(&triple);
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let mut em = Emitter::new(&ctx, &module, host.target.clone());
    em.emit_kernel(kernel)?;
    em.finish();
    module.verify().map_err(|e| CodegenError::Verify(e.to_string()))?;
    let dir = disk_cache_dir();
    let key = dir.map(|_| disk_key(host, &module.print_to_string().to_string()));
    let t1 = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
    if let (Some(dir), Some(key)) = (dir, &key) {
        if let Some((ir, obj)) = disk_read(dir, key) {
            return Ok(Built { ir, obj, from_disk: true, times: CompileTimes { emit_ms: ms(t0, Instant::now()), ..Default::default() } });
        }
    }
    module.run_passes(&pipeline(), &tm, PassBuilderOptions::create()).map_err(|e| CodegenError::Jit(e.to_string()))?;
    let ir = module.get_function(&kernel.name).map(|f| f.print_to_string().to_string()).unwrap_or_default();
    let t2 = Instant::now();
    let obj = tm.write_to_memory_buffer(&module, FileType::Object).map_err(|e| CodegenError::Jit(e.to_string()))?;
    let obj = obj.as_slice().to_vec();
    let t3 = Instant::now();
    if let (Some(dir), Some(key)) = (dir, &key) {
        disk_write(dir, key, &ir, &obj);
    }
    Ok(Built { ir, obj, from_disk: false, times: CompileTimes { emit_ms: ms(t0, t1), opt_ms: ms(t1, t2), codegen_ms: ms(t2, t3), ..Default::default() } })
}

/// Builds every job's kernel ([`build_one`]) on up to [`compile_threads`] threads, results in
/// job order; the first error wins.
fn build_all(host: &Host, jobs: &[(Kernel, String)]) -> Result<Vec<Built>, CodegenError> {
    let n_threads = compile_threads().min(jobs.len());
    if n_threads <= 1 {
        return jobs.iter().map(|(k, _)| build_one(host, k)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<Built, CodegenError>>> = (0..jobs.len()).map(|_| None).collect();
    let done: Mutex<Vec<(usize, Result<Built, CodegenError>)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|s| {
        for _ in 0..n_threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = build_one(host, &jobs[i].0);
                done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    for (i, r) in done.into_inner().unwrap_or_else(|e| e.into_inner()) {
        slots[i] = Some(r);
    }
    slots.into_iter().map(|r| r.unwrap_or_else(|| Err(CodegenError::Jit("a kernel build thread panicked".into())))).collect()
}

/// Loads a built kernel with cache key `key` and link symbol `symbol`, and enters it in the
/// in-memory cache; or, where another thread loaded the same kernel meanwhile, takes that one.
/// A symbol still defined by a module that is being dropped (its last user gone, its tracker not
/// yet removed) is waited for, outside the lock, so the JIT never sees one symbol twice.
fn link(jit: &Mutex<Lljit>, key: &str, symbol: &str, b: Built) -> Result<(KernelFn, String, Arc<ModuleCode>), CodegenError> {
    loop {
        let mut guard = jit.lock().unwrap_or_else(|e| e.into_inner());
        // Lock order: the JIT, then the cache (ModuleCode::drop takes only the JIT's).
        let mut cache = kernel_cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((func, ir, code)) = cache.get(key).and_then(|e| e.code.upgrade().map(|c| (e.func, e.ir.clone(), c))) {
            return Ok((func, ir, code));
        }
        if !guard.1.contains(symbol) {
            // SAFETY: the JIT is locked and defines no `symbol` now.
            let (func, code) = unsafe { load_object(guard.0, &b.obj, symbol) }?;
            guard.1.insert(symbol.to_string());
            cache.retain(|_, e| e.code.strong_count() > 0);
            cache.insert(key.to_string(), CacheEntry { func, ir: b.ir.clone(), code: Arc::downgrade(&code) });
            return Ok((func, b.ir, code));
        }
        drop(cache);
        drop(guard);
        std::thread::yield_now();
    }
}

/// Adds object code that defines `symbol` to the JIT under a resource tracker of its own and
/// returns the loaded function and its code.
///
/// # Safety
/// `j` is the process-wide LLJIT, locked by the caller, whose main dylib does not define `symbol`.
unsafe fn load_object(j: LLVMOrcLLJITRef, obj: &[u8], symbol: &str) -> Result<(KernelFn, Arc<ModuleCode>), CodegenError> {
    let jd = LLVMOrcLLJITGetMainJITDylib(j);
    let tracker = LLVMOrcJITDylibCreateResourceTracker(jd);
    let name = CString::new("dynamo_kernels").expect("no NUL");
    let buf = inkwell::llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(obj.as_ptr() as *const c_char, obj.len(), name.as_ptr());
    let release = |tracker| {
        let _ = take_error(LLVMOrcResourceTrackerRemove(tracker));
        LLVMOrcReleaseResourceTracker(tracker);
    };
    if let Err(e) = take_error(LLVMOrcLLJITAddObjectFileWithRT(j, tracker, buf)) {
        release(tracker);
        return Err(e);
    }
    let cname = CString::new(symbol).map_err(|e| CodegenError::Jit(e.to_string()))?;
    let mut addr: LLVMOrcExecutorAddress = 0;
    if let Err(e) = take_error(LLVMOrcLLJITLookup(j, &mut addr, cname.as_ptr())) {
        release(tracker);
        return Err(e);
    }
    if addr == 0 {
        release(tracker);
        return Err(CodegenError::Jit(format!("symbol {symbol} resolved to null")));
    }
    Ok((std::mem::transmute::<usize, KernelFn>(addr as usize), Arc::new(ModuleCode { tracker, symbol: symbol.to_string() })))
}

/// Builds IR for `kernels` (after legalization) in a fresh module; returns the module's text.
/// Used for dumps and snapshot tests; nothing is compiled.
pub fn emit_ir(kernels: &[Kernel]) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let module = ctx.create_module("dynamo_kernels");
    let mut em = Emitter::new(&ctx, &module, TargetInfo::default());
    for k in kernels {
        em.emit_kernel(&legalize(k))?;
    }
    em.finish();
    module.verify().map_err(|e| CodegenError::Verify(e.to_string()))?;
    Ok(module.print_to_string().to_string())
}

/// A set of JIT-compiled kernels sharing one LLVM module; freed on drop.
pub struct JitModule {
    /// Keeps the code of every kernel loaded.
    _code: Vec<Arc<ModuleCode>>,
    pub kernels: Vec<CompiledKernel>,
    /// Each kernel's LLVM IR after the O3 pipeline (kernels taken from the cache keep the name
    /// they were first compiled under).
    pub llvm_ir: String,
    pub times: CompileTimes,
    /// How many of `kernels` came from the cache (Note [kernel cache]).
    pub cache_hits: usize,
    /// How many of the kernels built were read from the disk cache (Note [kernel disk cache]).
    pub disk_hits: usize,
}

// SAFETY: the kernels are immutable machine code, kept loaded by `_code`.
unsafe impl Send for JitModule {}
unsafe impl Sync for JitModule {}

impl JitModule {
    /// Legalizes `kernels`, takes the ones already loaded from the cache (Note [kernel cache]),
    /// and builds the others, one LLVM module each, on up to [`compile_threads`] threads: emit,
    /// optimize (`default<O3>`), compile for the host, or read the object code from the disk
    /// cache (Note [kernel disk cache]); then loads them into the process-wide LLJIT.
    pub fn compile(kernels: &[Kernel]) -> Result<JitModule, CodegenError> {
        let host = host();
        let jit = jit()?;
        let t0 = Instant::now();
        let legal: Vec<Kernel> = kernels.iter().map(legalize).collect();
        let keys: Vec<String> = legal.iter().map(cache_key).collect();
        let symbols: Vec<String> = keys.iter().map(|k| link_symbol(k)).collect();
        // Per kernel: the loaded function, its IR (under its link symbol) and its code, from the
        // cache or built below.
        let mut found: Vec<Option<(KernelFn, String, Arc<ModuleCode>)>> = Vec::with_capacity(legal.len());
        {
            let cache = kernel_cache().lock().unwrap_or_else(|e| e.into_inner());
            for key in &keys {
                found.push(cache.get(key).and_then(|e| e.code.upgrade().map(|c| (e.func, e.ir.clone(), c))));
            }
        }
        let cache_hits = found.iter().filter(|f| f.is_some()).count();
        // Kernels to build: the first of each key that the cache lacks.
        let mut to_compile: Vec<usize> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            if found[i].is_none() && !to_compile.iter().any(|&j| keys[j] == *key) {
                to_compile.push(i);
            }
        }
        let mut times = CompileTimes::default();
        let mut disk_hits = 0;
        if !to_compile.is_empty() {
            let jobs: Vec<(Kernel, String)> = to_compile
                .iter()
                .map(|&i| {
                    let mut k = legal[i].clone();
                    k.name = symbols[i].clone();
                    (k, symbols[i].clone())
                })
                .collect();
            let built = build_all(host, &jobs)?;
            let t_link = Instant::now();
            for ((&i, b), (_, symbol)) in to_compile.iter().zip(built).zip(&jobs) {
                times.add(&b.times);
                disk_hits += b.from_disk as usize;
                found[i] = Some(link(jit, &keys[i], symbol, b)?);
            }
            // Later duplicates of a kernel built here.
            let cache = kernel_cache().lock().unwrap_or_else(|e| e.into_inner());
            for i in 0..legal.len() {
                if found[i].is_none() {
                    let e = &cache[&keys[i]];
                    let code = e.code.upgrade().expect("built above and held by `found`");
                    found[i] = Some((e.func, e.ir.clone(), code));
                }
            }
            drop(cache);
            times.link_ms = t_link.elapsed().as_secs_f64() * 1e3;
        }
        let mut compiled = Vec::with_capacity(legal.len());
        let mut code: Vec<Arc<ModuleCode>> = Vec::new();
        let mut llvm_ir = String::new();
        for ((k, f), symbol) in legal.iter().zip(found).zip(&symbols) {
            let (func, ir, c) = f.expect("every kernel was found or compiled");
            if !code.iter().any(|x| Arc::ptr_eq(x, &c)) {
                code.push(c);
            }
            // The dump shows the kernel's own name, not its link symbol.
            llvm_ir.push_str(&ir.replace(symbol.as_str(), &k.name));
            llvm_ir.push('\n');
            compiled.push(CompiledKernel {
                name: k.name.clone(),
                func,
                outer: k.ranges.first().copied().unwrap_or(1),
                numel: k.numel(),
                work: k.numel() * k.reduction_ranges.iter().product::<i64>(),
                n_args: k.args.len(),
                serial: k.has_scatter(),
                align: match k.tile {
                    Some(t) if k.ranges.len() == 2 => crate::emit::TILE_BLOCK.max(t),
                    _ => 1,
                },
            });
        }
        times.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(JitModule { _code: code, kernels: compiled, llvm_ir, cache_hits, disk_hits, times })
    }

    /// Runs kernel `idx` over its whole iteration space.
    ///
    /// # Safety
    /// `ptrs` must hold `n_args` pointers to buffers that cover every element the kernel's
    /// indices address, with the dtypes the kernel was built for; outputs must not alias anything.
    pub unsafe fn run(&self, idx: usize, ptrs: &[*mut u8]) {
        let k = &self.kernels[idx];
        debug_assert_eq!(ptrs.len(), k.n_args);
        if k.numel == 0 {
            return;
        }
        let f = k.func;
        if k.serial {
            f(ptrs.as_ptr(), 0, k.outer);
            return;
        }
        let team = gomp();
        let n_threads = match team {
            Some(g) => unsafe { (g.max_threads)() }.max(1) as i64,
            None => rayon::current_num_threads() as i64,
        };
        if let (Some(g), true) = (team, k.work >= PARALLEL_MIN_NUMEL && k.outer > 1 && n_threads > 1) {
            let units = (k.outer + k.align - 1) / k.align;
            let work = TeamWork {
                f,
                args: ptrs.as_ptr() as *const *mut u8,
                next: std::sync::atomic::AtomicI64::new(0),
                n_chunks: (n_threads * CHUNKS_PER_THREAD).min(units),
                units,
                align: k.align,
                outer: k.outer,
            };
            let team_size = n_threads.min(work.n_chunks) as libc::c_uint;
            unsafe { (g.parallel)(team_body, &work as *const TeamWork as *mut libc::c_void, team_size, 0) };
        } else if k.work >= PARALLEL_MIN_NUMEL && k.outer > 1 && n_threads > 1 {
            // A few chunks per thread so work stealing evens out busy cores; chunk edges fall on
            // `align` (tile blocks) so tiled kernels keep full tiles.
            let units = (k.outer + k.align - 1) / k.align;
            let n_chunks = (n_threads * CHUNKS_PER_THREAD).min(units);
            let base = ptrs.as_ptr() as usize;
            let (outer, align) = (k.outer, k.align);
            (0..n_chunks).into_par_iter().for_each(|c| {
                let start = (units * c / n_chunks * align).min(outer);
                let end = (units * (c + 1) / n_chunks * align).min(outer);
                // SAFETY: chunks are disjoint ranges of the outer loop; see the function contract.
                unsafe { f(base as *const *mut u8, start, end) };
            });
        } else {
            f(ptrs.as_ptr(), 0, k.outer);
        }
    }
}

