//! Kernel IR -> LLVM IR for the NVPTX target -> PTX text, for NVIDIA GPUs (sm_90 by default).
//!
//! The same [`Kernel`]s the CPU path runs (after [`legalize`]) become CUDA kernels:
//! - **Pointwise**: one thread per vector of `VEC` consecutive output points (grid-stride loop
//!   over the flattened iteration space). When every access is unit-stride or broadcast along the
//!   innermost loop and 4-byte wide, `VEC = 4` and unit-stride accesses are 128-bit loads and
//!   stores (`ld.global.nc.v4.f32`); such a kernel also gets a scalar twin `<name>_s` that the
//!   runtime launches when a pointer is not 16-byte aligned (a view with a storage offset).
//! - **Reduction**: one thread block per output point ("row"; grid-stride over rows). For each
//!   reduction loop of the kernel (its phases, see `kernel.rs`), the block's threads stride over
//!   the reduction space, accumulate per thread, then combine through warp shuffles
//!   (`shfl.sync.bfly`) and one shared-memory exchange between warps; every thread then holds
//!   the row's value for the next phase. Stores whose index moves along the reduction happen
//!   inside the loop of their value's phase; the others once per row, by thread 0. A single
//!   contiguous reduction dim of a multiple of 4 elements is read 4 elements a thread with
//!   128-bit loads (and a scalar twin `<name>_s` for unaligned pointers, as for pointwise).
//!   Reductions over leading dims (sums over the rows of [rows, features]) get blocks of
//!   adjacent output points instead (Note [column reductions]).
//!
//! Math: `exp`, `log`, `tanh`, `erf`, `log1p`, `expm1` are expanded inline (range reduction and
//! polynomials; no libdevice; the exponentials are the hardware's `ex2.approx` on a reduced
//! argument: Note [fast exp], Note [fast tanh]), accurate to a few float32 ulps (`erf`: 1.5e-7
//! absolute, the Abramowitz-Stegun 7.1.26 bound, away from 0); `sqrt` and division are
//! IEEE-rounded (`sqrt.rn`, `div.rn`; the expansions' own quotients: Note [inner divisions]),
//! reciprocals and `rsqrt` within an ulp (Note [fast reciprocals]). `sin` and `cos` reduce their argument exactly (Note [trig reduction]); a general `pow` and
//! float64 `sin`/`cos` are refused ([`unsupported`]), so callers fall back.
//!
//! Note [lazy twins]: with the default options ([`Twins::Lazy`]) a module holds the vectorized
//! kernels only; their scalar twins' launches are computed and [`compile_twins`] makes their
//! code when the runtime first needs it. Pointwise kernels are emitted in memory order (Note
//! [memory order]), and kernels equal but for their names once per module.
//!
//! Kernel parameters are the argument pointers in order (`ptr` each, inputs `noalias readonly`);
//! sizes and strides are compile-time constants, as on the CPU path. Entry points are marked
//! through `!nvvm.annotations` (LLVM 19 has no `ptx_kernel` calling convention yet).
//!
//! Invariant: this module knows nothing about CUDA's driver or Python; it produces text.

use std::collections::HashMap;

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::BasicValue;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate, OptimizationLevel};

use crate::kernel::{BinaryOp, DType, Expr, ExprId, Index, Kernel, ReduceOp, UnaryOp};
use crate::legalize::legalize;
use crate::CodegenError;

/// Threads per block of pointwise kernels.
pub const POINTWISE_BLOCK: u32 = 256;
/// Most blocks a launch asks for; kernels loop (grid-stride) over the rest.
pub const MAX_GRID: i64 = 1 << 20;
/// Most sweeps of a block over a row kept in registers (Note [persistent rows]).
pub const MAX_PERSISTENT_SWEEPS: i64 = 8;

/// How the runtime launches one kernel: `entry<<<grid, block>>>(args...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// PTX entry name.
    pub entry: String,
    pub grid: u32,
    pub block: u32,
}

/// One compiled kernel: its launch, and for vectorized pointwise kernels the scalar twin to use
/// when an argument pointer is not 16-byte aligned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxKernel {
    pub name: String,
    pub launch: Launch,
    /// The scalar twin's launch, for kernels that have one.
    pub unaligned: Option<Launch>,
    /// Whether the twin's code is in this module; else [`compile_twins`] makes it on demand
    /// (Note [lazy twins]).
    pub twin_in_module: bool,
}

/// The PTX of a module of kernels and how to launch each.
#[derive(Clone, Debug)]
pub struct PtxModule {
    /// PTX assembly text (NUL-free; the driver wants it NUL-terminated).
    pub ptx: String,
    pub kernels: Vec<PtxKernel>,
    /// The optimized LLVM IR, for dumps (empty unless `DYNAMO_DEBUG_DIR` is set).
    pub llvm_ir: String,
    /// Milliseconds spent emitting the IR, in the pass pipeline, and in instruction selection
    /// and PTX printing.
    pub timings_ms: [f64; 3],
}

/// Whether the optimized IR is wanted as text (debug dumps only: printing it costs time).
fn want_ir() -> bool {
    std::env::var_os("DYNAMO_DEBUG_DIR").is_some_and(|v| !v.is_empty())
}

fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Emit(msg.into())
}

fn e<T>(r: Result<T, inkwell::builder::BuilderError>) -> Result<T, CodegenError> {
    r.map_err(|err| bad(err.to_string()))
}

/// Why `kernel` cannot run on the GPU path (an op this emitter lacks), or `None`.
pub fn unsupported(kernel: &Kernel) -> Option<String> {
    if kernel.has_scatter() {
        // Note [scatter stores] (kernel.rs): they would need atomics in an order-preserving form.
        return Some("a scatter store has no NVPTX lowering yet".into());
    }
    let k = legalize(kernel);
    for ex in &k.exprs {
        match ex {
            Expr::Unary(op @ (UnaryOp::Sin | UnaryOp::Cos), a) if k.dtype_of(*a) != DType::F32 => {
                return Some(format!("{op:?} of {:?} has no NVPTX lowering yet", k.dtype_of(*a)))
            }
            Expr::Binary(BinaryOp::Pow, _, _) => return Some("pow has no NVPTX lowering yet".into()),
            // Note [float64 sums] (kernel.rs): the block and warp reductions here are float32.
            Expr::Reduce(_, a) if k.dtype_of(*a) == DType::F64 => {
                return Some("a float64 sum has no NVPTX lowering yet".into())
            }
            _ => {}
        }
    }
    None
}

/// How hard LLVM works on a module: the new-pass-manager pipeline run over the IR, the
/// instruction selector's level, and where scalar twins go. Note [NVPTX pipeline]: the emitter
/// already unrolls what it means to unroll (vector lanes, persistent sweeps) and the driver's
/// PTX compiler optimizes again (register allocation, scheduling, CSE, loop-invariant code), so
/// a short function pipeline (SROA, early CSE, instcombine, simplifycfg) and the `Less`
/// instruction selector take about half of LLVM's time and lose little run time (measured on
/// an H200 with `benchmarks/gpu_compile_sweep.py` against `default<O3>` + `Aggressive`:
/// pointwise, layer_norm, GELU and batch-norm kernels within 2%, softmax 5% slower).
/// `DYNAMO_NVPTX_PASSES` / `DYNAMO_NVPTX_CODEGEN_OPT` (0-3) override the defaults (for
/// measurements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxOptions {
    pub passes: String,
    pub codegen: OptimizationLevel,
    pub twins: Twins,
}

/// Which code a module gets for kernels with a scalar twin (Note [lazy twins]: a vectorized
/// kernel needs its twin only when some argument pointer is not 16-byte aligned, a view with an
/// odd storage offset, which most graphs never see; emitting it with every module doubled what
/// LLVM and the driver's compiler do for such kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Twins {
    /// Vectorized kernels only; the twins' launches are given, their code is left out.
    Lazy,
    /// Vectorized kernels and their twins.
    Eager,
    /// Only the twins (named `<name>_s`), as each kernel's `launch`.
    Only,
}

impl PtxOptions {
    /// The defaults, with the environment's overrides.
    pub fn from_env() -> PtxOptions {
        let passes = std::env::var("DYNAMO_NVPTX_PASSES").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_PASSES.to_string());
        let codegen = match std::env::var("DYNAMO_NVPTX_CODEGEN_OPT").ok().as_deref() {
            Some("0") => OptimizationLevel::None,
            Some("1") => OptimizationLevel::Less,
            Some("2") => OptimizationLevel::Default,
            Some("3") => OptimizationLevel::Aggressive,
            _ => DEFAULT_CODEGEN,
        };
        PtxOptions { passes, codegen, twins: Twins::Lazy }
    }
}

/// Default pipeline (Note [NVPTX pipeline]).
pub const DEFAULT_PASSES: &str = "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)";
/// Default instruction-selection level (Note [NVPTX pipeline]).
pub const DEFAULT_CODEGEN: OptimizationLevel = OptimizationLevel::Less;

/// Creates the NVPTX target machine for `sm` (for example `"sm_90"`).
fn target_machine(sm: &str, level: OptimizationLevel) -> Result<TargetMachine, CodegenError> {
    // Once per process: modules may be compiled on several threads at a time.
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    let target = Target::from_triple(&triple).map_err(|e| CodegenError::Jit(e.to_string()))?;
    target
        .create_target_machine(&triple, sm, "+ptx80", level, RelocMode::Default, CodeModel::Default)
        .ok_or_else(|| CodegenError::Jit(format!("cannot create an NVPTX target machine for {sm}")))
}

/// Compiles `kernels` (not yet legalized) to one PTX module for `sm` (`"sm_90"`) with the
/// default options ([`PtxOptions::from_env`]).
pub fn compile_ptx(kernels: &[Kernel], sm: &str) -> Result<PtxModule, CodegenError> {
    compile_ptx_with(kernels, sm, &PtxOptions::from_env())
}

/// Compiles the scalar twins of `kernels` (Note [lazy twins]): one module whose kernel `i` is
/// the twin `<name>_s` of `kernels[i]`, as its `launch`.
pub fn compile_twins(kernels: &[Kernel], sm: &str, opts: &PtxOptions) -> Result<PtxModule, CodegenError> {
    compile_ptx_with(kernels, sm, &PtxOptions { twins: Twins::Only, ..opts.clone() })
}

/// Compiles `kernels` to one PTX module for `sm` with `opts`.
pub fn compile_ptx_with(kernels: &[Kernel], sm: &str, opts: &PtxOptions) -> Result<PtxModule, CodegenError> {
    let t0 = std::time::Instant::now();
    let tm = target_machine(sm, opts.codegen)?;
    let ctx = Context::create();
    let module = ctx.create_module("dynamo_gpu_kernels");
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let mut g = Gen { ctx: &ctx, module: &module, b: ctx.create_builder(), annotations: Vec::new(), twins: opts.twins };
    let mut out: Vec<PtxKernel> = Vec::new();
    // Kernels equal but for their names (the repeated blocks of a transformer) are emitted once:
    // the later ones launch the first one's entry.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for k in kernels {
        if let Some(why) = unsupported(k) {
            return Err(bad(format!("{}: {why}", k.name)));
        }
        let k = memory_order(&legalize(k));
        let key = unnamed_key(&k);
        if let Some(&first) = seen.get(&key) {
            let mut dup = out[first].clone();
            dup.name = k.name.clone();
            out.push(dup);
            continue;
        }
        k.verify().map_err(|errs| CodegenError::Verify(errs.join("; ")))?;
        seen.insert(key, out.len());
        out.push(g.kernel(&k)?);
    }
    g.finish();
    module.verify().map_err(|e| CodegenError::Verify(e.to_string()))?;
    let t1 = std::time::Instant::now();
    module
        .run_passes(&opts.passes, &tm, PassBuilderOptions::create())
        .map_err(|e| CodegenError::Jit(e.to_string()))?;
    let t2 = std::time::Instant::now();
    let llvm_ir = if want_ir() { module.print_to_string().to_string() } else { String::new() };
    let buf = tm.write_to_memory_buffer(&module, FileType::Assembly).map_err(|e| CodegenError::Jit(e.to_string()))?;
    let ptx = String::from_utf8_lossy(buf.as_slice()).trim_end_matches('\0').to_string();
    let t3 = std::time::Instant::now();
    let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
    Ok(PtxModule { ptx, kernels: out, llvm_ir, timings_ms: [ms(t0, t1), ms(t1, t2), ms(t2, t3)] })
}

/// Note [memory order]: a pointwise kernel's loops permuted so that the innermost one moves
/// fastest through memory: the dims are ordered by the strides of the first store (largest
/// outermost; dims of size 1 or stride 0 go outermost, ties keep their order). Consecutive
/// threads then touch consecutive addresses of the output (coalesced, and vectorizable when the
/// loads agree), whatever order the loops were written in: the conv nets' channels-last
/// activations (`layout.rs`) iterate N, H, W, C. Each point is independent, so any order
/// computes the same values. Reductions keep their order.
pub fn memory_order(k: &Kernel) -> Kernel {
    let n = k.ranges.len();
    let Some(store) = k.stores.first() else { return k.clone() };
    if !k.reduction_ranges.is_empty() || n < 2 || transpose_plan(k).is_some() {
        return k.clone();
    }
    let key = |d: usize| if k.ranges[d] == 1 { i64::MAX } else { store.index.strides[d].abs() };
    let mut perm: Vec<usize> = (0..n).collect();
    // Stable: equal strides keep the written order.
    perm.sort_by(|&a, &b| {
        let (ka, kb) = (key(a), key(b));
        let (za, zb) = (ka == 0 || ka == i64::MAX, kb == 0 || kb == i64::MAX);
        zb.cmp(&za).then(kb.cmp(&ka))
    });
    if perm.iter().enumerate().all(|(i, &d)| i == d) {
        return k.clone();
    }
    let permute = |index: &Index| Index { offset: index.offset, strides: perm.iter().map(|&d| index.strides[d]).collect() };
    let mut out = k.clone();
    out.ranges = perm.iter().map(|&d| k.ranges[d]).collect();
    for index in out.expr_indices_mut() {
        *index = permute(index);
    }
    for st in out.stores.iter_mut() {
        st.index = permute(&st.index);
    }
    out
}

/// A legalized kernel's identity as machine code: everything but its own and its arguments'
/// names.
fn unnamed_key(k: &Kernel) -> String {
    let mut k = k.clone();
    k.name.clear();
    for a in &mut k.args {
        a.name.clear();
    }
    format!("{k:?}")
}

/// What makes two kernels (not yet legalized) the same machine code: [`unnamed_key`] of the
/// kernel as it is emitted.
pub fn kernel_key(k: &Kernel) -> String {
    unnamed_key(&memory_order(&legalize(k)))
}

/// What makes two lists of kernels the same PTX module up to entry names (the key of the
/// runtime's module cache): the kernels after legalization, names aside, in order.
pub fn module_key(kernels: &[Kernel]) -> String {
    kernels.iter().map(|k| unnamed_key(&memory_order(&legalize(k)))).collect::<Vec<_>>().join("\n")
}

fn next_pow2(x: i64) -> i64 {
    let mut p = 1;
    while p < x {
        p <<= 1;
    }
    p
}

/// Note [column reductions]: a reduction whose loads are unit-stride along the output's
/// innermost dim rather than along the reduction (the weight and bias gradients of LayerNorm
/// and of linear layers: sums over the rows of a [rows, features] tensor) gets a different
/// schedule than one block per output point, whose threads would each read with the row stride
/// (a 32-byte sector per 4-byte element). Here a block owns `cols` consecutive output points
/// ("columns"), thread `t` the column `t % cols`, and the block's `groups = block / cols` row
/// groups split the reduction: group `g` folds reduction indices g, g + groups, ..., unrolled
/// [`COLUMN_UNROLL`] times so that each thread has several loads in flight. A warp then reads
/// `32 / cols` rows of `cols` consecutive elements each: whole sectors, and with 8 columns of
/// float32 the same sectors a coalesced warp would read. The groups' partial values are combined
/// by warp shuffles across lanes of the same column and one shared-memory exchange between
/// warps ([`Gen::column_reduce`]); every thread then holds its column's value (several phases
/// work as for rows). `cols` is the widest of 32, 16, 8 that still gives [`COLUMN_BLOCKS`]
/// blocks, and `groups` about one row group per 8 rows, at most 1024 threads a block (512 when
/// more than two tensors are read or written at every point; the block size is declared to
/// ptxas with `.maxntid`, so that it keeps the registers such a block can have).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnPlan {
    pub cols: u32,
    pub groups: u32,
}

/// Blocks a column reduction wants at least (about one per SM of an H100/H200), Note [column
/// reductions].
pub const COLUMN_BLOCKS: i64 = 128;
/// Rows a thread of a column reduction folds per loop iteration (Note [column reductions]).
pub const COLUMN_UNROLL: i64 = 4;

/// The schedule of Note [column reductions] for `k` (legalized), or `None` when the kernel is
/// pointwise or has at least as many accesses unit-stride along the reduction as along the
/// output's innermost dim (those keep one block per output point).
/// `DYNAMO_NVPTX_COLUMNS=0` turns the schedule off (for measurements).
pub fn column_plan(k: &Kernel) -> Option<ColumnPlan> {
    let n_outer = k.ranges.len();
    if n_outer == 0 || k.reduction_ranges.is_empty() || k.has_masks() || std::env::var("DYNAMO_NVPTX_COLUMNS").is_ok_and(|v| v == "0") {
        return None;
    }
    let moves = |idx: &Index| idx.strides[n_outer..].iter().any(|s| *s != 0);
    let last_red = k.n_index_dims() - 1;
    let (mut along_cols, mut along_rows) = (0, 0);
    // Loads and stores at every point of the reduction (a pointwise member of the kernel, like
    // the gradient sum that LayerNorm's backward kernel also writes).
    let loads = k.exprs.iter().filter_map(|ex| match ex {
        Expr::Load { index, .. } => Some(index),
        _ => None,
    });
    for index in loads.chain(k.stores.iter().map(|s| &s.index)) {
        // Accesses fixed along the reduction happen once per output point; loads fixed along
        // the outputs (LayerNorm's per-row mean) are small and shared by every column.
        if !moves(index) || index.strides[..n_outer].iter().all(|s| *s == 0) {
            continue;
        }
        if index.strides[n_outer - 1] == 1 && k.ranges[n_outer - 1] > 1 {
            along_cols += 1;
        } else if index.strides[last_red] == 1 {
            along_rows += 1;
        }
    }
    if along_cols == 0 || along_rows >= along_cols {
        return None;
    }
    let outputs = k.numel();
    let r_total: i64 = k.reduction_ranges.iter().product();
    let (min_cols, mut max_block, _) = column_tuning();
    // Measured on the H200 (gpt2_train's column kernels): a kernel that reads several tensors
    // at every point (LayerNorm's backward, its gradient sum stored beside) ran 42 us with 1024
    // threads a block (64 registers a thread at most) and 25 us with 512; the plain bias
    // gradient sums ran faster with 1024 (11 against 14 us).
    let wide = along_cols + along_rows > 2 || k.stores.iter().any(|s| moves(&s.index));
    if wide && std::env::var("DYNAMO_NVPTX_COLUMN_TUNE").is_err() {
        max_block = max_block.min(512);
    }
    let cols = [32i64, 16, 8, 4, 2, 1].into_iter().filter(|c| *c >= min_cols).find(|c| (outputs + c - 1) / c >= COLUMN_BLOCKS).unwrap_or(min_cols);
    let groups = next_pow2((r_total + 7) / 8).clamp((32 / cols).max(1), max_block / cols);
    Some(ColumnPlan { cols: cols as u32, groups: groups as u32 })
}

/// Floats of shared memory a column reduction of `block` threads uses: one per warp and column,
/// and one per column for the totals (Note [column reductions]).
fn column_smem(block: u32, cols: u32) -> u32 {
    ((block / 32) * cols + cols).max(1)
}

/// The narrowest block (in columns), the most threads a block, and the rows unrolled of Note
/// [column reductions]: 8, 1024 and [`COLUMN_UNROLL`], or `DYNAMO_NVPTX_COLUMN_TUNE=cols,block,unroll`
/// (powers of two; for measurements).
fn column_tuning() -> (i64, i64, i64) {
    let parsed = std::env::var("DYNAMO_NVPTX_COLUMN_TUNE").ok().and_then(|v| {
        let xs: Vec<i64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        let ok = xs.len() == 3 && xs[0] >= 1 && xs[0] <= 32 && xs[1] >= 32 && xs[1] <= 1024 && xs[2] >= 1 && xs[2] <= 16;
        (ok && xs.iter().all(|x| x.count_ones() == 1)).then(|| (xs[0], xs[1], xs[2]))
    });
    parsed.unwrap_or((8, 1024, COLUMN_UNROLL))
}

/// Side of the square tiles of Note [tiled transposes], in elements.
pub const TRANSPOSE_TILE: i64 = 32;
/// Threads of a tiled-transpose block: 32 columns by 8 rows, each thread taking 4 rows of a
/// 32x32 tile (Note [tiled transposes]).
pub const TRANSPOSE_BLOCK: u32 = 256;

/// Note [tiled transposes]: a pointwise kernel whose output and some input are unit-stride in
/// different dims (a layout change: an NCHW activation made channels-last for a convolution, the
/// batch norm + ReLU after a channels-last convolution written back as NCHW) cannot have both
/// its reads and its writes coalesced with one thread per point: one of them touches a 32-byte
/// sector per 4-byte element. `legalize` already puts such a kernel's two dims last (the input's
/// unit-stride dim `a`, then the output's `b`) and marks it `tile` (for the CPU's transposed
/// register tiles). Here it runs as 32x32 tiles of (a, b), one per block iteration (grid-stride
/// over the tiles, outer dims outermost): the block first reads each *staged* load (a plain load
/// unit-stride along `a` and strided along `b`) along `a`, 32 consecutive elements per warp, into
/// a shared-memory tile of 32x33 elements (the extra column keeps the transposed reads free of
/// bank conflicts); after a barrier every thread computes points along `b`, reading the staged
/// values from the tile and every other load from global memory (unit-stride or broadcast along
/// `b` for the kernels this takes), and stores them coalesced. This is the classic shared-memory
/// transpose (NVIDIA's "An Efficient Matrix Transpose in CUDA C/C++", 32x8 threads per 32x32
/// tile), generalized to the staged loads of a fused kernel. Each point's value is computed by
/// the same expressions as the one-thread-per-point kernel, so results are unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposePlan {
    /// Expression ids of the staged loads.
    pub staged: Vec<usize>,
    /// Points of the outer dims (all but the last two), flattened.
    pub outer: i64,
    /// Tiles along `a` and along `b`.
    pub tiles_a: i64,
    pub tiles_b: i64,
}

/// The plan of Note [tiled transposes] for `k` (legalized), or `None`: `k` must be a pointwise
/// kernel that `legalize` tiled, without masks, indirect loads or scatter stores, whose stores
/// are all unit-stride along the innermost dim and which has at least one load to stage.
/// `DYNAMO_NVPTX_TILED=0` turns the tiles off (one thread per point, for A/B measurements).
pub fn transpose_plan(k: &Kernel) -> Option<TransposePlan> {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let n = k.ranges.len();
    if *OFF.get_or_init(|| std::env::var_os("DYNAMO_NVPTX_TILED").is_some_and(|v| v == "0")) || k.tile.is_none() || !k.reduction_ranges.is_empty() || n < 2 || k.has_masks() || k.has_scatter() || k.stores.is_empty() {
        return None;
    }
    let (a, b) = (n - 2, n - 1);
    if !k.stores.iter().all(|s| s.index.strides[b] == 1) {
        return None;
    }
    let staged: Vec<usize> = k
        .exprs
        .iter()
        .enumerate()
        .filter_map(|(i, ex)| match ex {
            Expr::Load { index, .. } if index.strides[a] == 1 && !matches!(index.strides[b], 0 | 1) => Some(i),
            _ => None,
        })
        .collect();
    if staged.is_empty() {
        return None;
    }
    let tiles = |r: i64| (r + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    Some(TransposePlan { staged, outer: k.ranges[..a].iter().product(), tiles_a: tiles(k.ranges[a]), tiles_b: tiles(k.ranges[b]) })
}

/// How a kernel is launched when emitted with `vec` points per thread (its grid and block).
fn launch_of(k: &Kernel, name: &str, vec: u32) -> Launch {
    if let Some(p) = transpose_plan(k) {
        let tiles = p.outer * p.tiles_a * p.tiles_b;
        return Launch { entry: name.to_string(), grid: tiles.clamp(1, MAX_GRID) as u32, block: TRANSPOSE_BLOCK };
    }
    if let Some(p) = column_plan(k) {
        let blocks = (k.numel() + p.cols as i64 - 1) / p.cols as i64;
        return Launch { entry: name.to_string(), grid: blocks.clamp(1, MAX_GRID) as u32, block: p.cols * p.groups };
    }
    if k.reduction_ranges.is_empty() {
        let work = k.numel() / vec as i64;
        Launch {
            entry: name.to_string(),
            grid: ((work + POINTWISE_BLOCK as i64 - 1) / POINTWISE_BLOCK as i64).clamp(1, MAX_GRID) as u32,
            block: POINTWISE_BLOCK,
        }
    } else {
        let r_total: i64 = k.reduction_ranges.iter().product();
        Launch { entry: name.to_string(), grid: k.numel().clamp(1, MAX_GRID) as u32, block: reduction_block(r_total / vec as i64) }
    }
}

/// Threads per block for a reduction over `r` elements: about 4 elements a thread, a power of
/// two from one warp to 1024.
pub fn reduction_block(r: i64) -> u32 {
    next_pow2((r + 3) / 4).clamp(32, 1024) as u32
}

struct Gen<'ctx, 'm> {
    ctx: &'ctx Context,
    module: &'m Module<'ctx>,
    b: Builder<'ctx>,
    /// Every entry, with the block size it is declared for (`.maxntid`), if any.
    annotations: Vec<(FunctionValue<'ctx>, Option<u32>)>,
    twins: Twins,
}

/// Which vector width a pointwise kernel can use: 4 when every access is unit-stride or
/// broadcast along the innermost loop, 4-byte unit-stride accesses only, and every offset and
/// outer stride keeps 4-element groups 16-byte aligned.
fn pointwise_vec(k: &Kernel) -> u32 {
    let Some(&inner) = k.ranges.last() else { return 1 };
    if inner % 4 != 0 {
        return 1;
    }
    let n = k.ranges.len();
    let ok = |arg: u32, index: &Index, is_store: bool| -> bool {
        let s = index.strides[n - 1];
        let dt = k.args[arg as usize].dtype;
        match s {
            1 => dt.size_bytes() == 4 && index.offset % 4 == 0 && index.strides[..n - 1].iter().all(|x| x % 4 == 0),
            0 => !is_store,
            _ => false,
        }
    };
    // Note [masked loads]: a range check must be the same for the lanes of a vector (constant
    // along the innermost loop: max_pool2d over channels-last activations), so one mask
    // guards each vector load.
    let loads_ok = k.exprs.iter().all(|ex| match ex {
        Expr::Load { arg, index } | Expr::MaskedLoad { arg, index, .. } => ok(*arg, index, false),
        Expr::InRange { index, .. } => index.strides[n - 1] == 0,
        _ => true,
    });
    if loads_ok && k.stores.iter().all(|s| ok(s.arg, &s.index, true)) {
        4
    } else {
        1
    }
}

/// Vector width of a reduction kernel's loops: 4 when there is one reduction dim, its range is
/// a multiple of 4, and every access that moves along it is 4-byte, unit-stride along it, with
/// offsets and outer strides keeping 4-element groups 16-byte aligned; else 1.
fn reduction_vec(k: &Kernel) -> u32 {
    let n_outer = k.ranges.len();
    if k.has_masks() || k.reduction_ranges.len() != 1 || k.reduction_ranges[0] % 4 != 0 {
        return 1;
    }
    let ok = |arg: u32, index: &Index| -> bool {
        if index.strides[n_outer] == 0 {
            return true; // a row value: loaded once per row, or stored by thread 0
        }
        index.strides[n_outer] == 1
            && k.args[arg as usize].dtype.size_bytes() == 4
            && index.offset % 4 == 0
            && index.strides[..n_outer].iter().all(|s| s % 4 == 0)
    };
    let loads_ok = k.exprs.iter().all(|ex| match ex {
        Expr::Load { arg, index } => ok(*arg, index),
        _ => true,
    });
    if loads_ok && k.stores.iter().all(|s| ok(s.arg, &s.index)) {
        4
    } else {
        1
    }
}

fn storage_type<'ctx>(ctx: &'ctx Context, dt: DType) -> BasicTypeEnum<'ctx> {
    match dt {
        DType::F32 => ctx.f32_type().into(),
        DType::F64 => ctx.f64_type().into(),
        DType::I64 => ctx.i64_type().into(),
        DType::I32 => ctx.i32_type().into(),
        DType::Bool => ctx.i8_type().into(),
        DType::BF16 => ctx.bf16_type().into(),
        DType::F16 => ctx.f16_type().into(),
    }
}

fn value_type<'ctx>(ctx: &'ctx Context, dt: DType) -> BasicTypeEnum<'ctx> {
    match dt.value_type() {
        DType::Bool => ctx.bool_type().into(),
        other => storage_type(ctx, other),
    }
}

impl<'ctx> Gen<'ctx, '_> {
    fn decl(&self, name: &str, ret: BasicTypeEnum<'ctx>, params: &[BasicTypeEnum<'ctx>]) -> FunctionValue<'ctx> {
        if let Some(f) = self.module.get_function(name) {
            return f;
        }
        let ps: Vec<BasicMetadataTypeEnum> = params.iter().map(|p| (*p).into()).collect();
        self.module.add_function(name, ret.fn_type(&ps, false), None)
    }

    fn call(&self, name: &str, ret: BasicTypeEnum<'ctx>, args: &[BasicValueEnum<'ctx>]) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let tys: Vec<BasicTypeEnum> = args.iter().map(|a| a.get_type()).collect();
        let f = self.decl(name, ret, &tys);
        let margs: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        e(self.b.build_call(f, &margs, ""))?.try_as_basic_value().basic().ok_or_else(|| bad(format!("{name} returned void")))
    }

    fn call_void(&self, name: &str, args: &[BasicValueEnum<'ctx>]) -> Result<(), CodegenError> {
        let f = self.module.get_function(name).unwrap_or_else(|| {
            let ps: Vec<BasicMetadataTypeEnum> = args.iter().map(|a| a.get_type().into()).collect();
            self.module.add_function(name, self.ctx.void_type().fn_type(&ps, false), None)
        });
        let margs: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        e(self.b.build_call(f, &margs, ""))?;
        Ok(())
    }

    /// A special register (`tid.x`, `ntid.x`, `ctaid.x`, `nctaid.x`) as i64.
    fn sreg(&self, name: &str) -> Result<IntValue<'ctx>, CodegenError> {
        let v = self.call(&format!("llvm.nvvm.read.ptx.sreg.{name}"), self.ctx.i32_type().into(), &[])?;
        e(self.b.build_int_z_extend(v.into_int_value(), self.ctx.i64_type(), name))
    }

    fn f32c(&self, v: f64) -> FloatValue<'ctx> {
        self.ctx.f32_type().const_float(v)
    }

    fn fintr(&self, name: &str, args: &[FloatValue<'ctx>]) -> Result<FloatValue<'ctx>, CodegenError> {
        let ty = args[0].get_type();
        let suffix = if ty == self.ctx.f64_type() { "f64" } else { "f32" };
        let vals: Vec<BasicValueEnum> = args.iter().map(|a| (*a).into()).collect();
        Ok(self.call(&format!("{name}.{suffix}"), ty.into(), &vals)?.into_float_value())
    }

    fn fadd(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        e(self.b.build_float_add(a, b, ""))
    }
    fn fmul(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        e(self.b.build_float_mul(a, b, ""))
    }
    fn fma(&self, a: FloatValue<'ctx>, b: FloatValue<'ctx>, c: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        self.fintr("llvm.fma", &[a, b, c])
    }
    /// Note [inner divisions]: `n / d` for the quotients inside the math expansions (`tanh`,
    /// `erf`, `log`), whose divisors are finite and in [1, 2^126] by construction: an
    /// approximate reciprocal (`div.approx.f32`) and one Newton step on the exact residual
    /// (`fma`), within about half an ulp of the rounded quotient. A `div.rn.f32` makes ptxas add
    /// a slow path for subnormal and huge operands to every division site, and the driver's
    /// JIT spent about 2 ms on each (the pointwise chain's 4 vectorized `tanh`s: 22 ms to JIT,
    /// 14.5 ms with `div.full.f32`, H200). Divisions the graph asks for stay `div.rn`, but for
    /// divisions of 1 (Note [fast reciprocals]). Float64
    /// divides as it always did.
    fn div_inner(&self, n: FloatValue<'ctx>, d: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let f32t = self.ctx.f32_type();
        if n.get_type() != f32t {
            return e(self.b.build_float_div(n, d, ""));
        }
        let rcp = self.call("llvm.nvvm.div.approx.f", f32t.into(), &[self.f32c(1.0).into(), d.into()])?.into_float_value();
        let q0 = self.fmul(n, rcp)?;
        let r = self.fma(e(self.b.build_float_neg(q0, ""))?, d, n)?;
        self.fma(r, rcp, q0)
    }
    fn select_f(&self, c: IntValue<'ctx>, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        Ok(e(self.b.build_select(c, a, b, ""))?.into_float_value())
    }
    fn fcmp(&self, p: FloatPredicate, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<IntValue<'ctx>, CodegenError> {
        e(self.b.build_float_compare(p, a, b, ""))
    }
    /// Horner evaluation of `coeffs[0] + x*(coeffs[1] + x*(...))`.
    fn poly(&self, x: FloatValue<'ctx>, coeffs: &[f64]) -> Result<FloatValue<'ctx>, CodegenError> {
        let mut acc = self.f32c(*coeffs.last().expect("nonempty"));
        for c in coeffs.iter().rev().skip(1) {
            acc = self.fma(acc, x, self.f32c(*c))?;
        }
        Ok(acc)
    }

    /// `exp(x)` for float32 `x`: x = n*ln2 + r (Cody-Waite) with n = rint(x log2(e)) clamped to
    /// [-126, 127], exp(r) as the hardware's `ex2.approx.f32` of r*log2(e), times 2^n built from
    /// exponent bits; within about 2.5 float32 ulps where the result is normal (Note [fast exp]).
    /// -inf gives 0, +inf and overflow give inf, NaN stays NaN.
    ///
    /// Note [fast exp]: the cold first call of a one-kernel graph is mostly the driver's PTX
    /// compiler (cuda.rs, Note [nvJitLink]), whose time grows with the instructions it is given.
    /// softmax over 8192-wide rows runs 16 exponentials a thread, and each was a degree-7
    /// polynomial plus clamps, `rint`, 2^n in two halves and four selects (about 28
    /// instructions). As CUDA's `expf` (which eager calls; 2 ulps), the reduced argument now goes
    /// to `ex2.approx.f32` (MUFU, about 2 ulps; |r log2(e)| <= 1/2 for normal results, so the
    /// rounding of that product adds at most ln2/2 of an ulp), and nothing needs a select:
    /// x log2(e) is clamped with `max`/`min` (NaN becomes -126) so that 2^n is a normal float
    /// made of bits, and r keeps the rest of x. Results outside the normal range come from r:
    /// below 2^-126, ex2 of r log2(e) in (-24, 0) scaled by 2^-126 rounds once into a
    /// subnormal (the product's rounding error, under 2^-20 relative, is below a subnormal's
    /// precision); above 2^127 the product overflows to inf; |x| huge or infinite makes ex2
    /// give inf or 0; a NaN x makes r NaN. 13 instructions.
    fn exp(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let f32t = self.ctx.f32_type();
        if x.get_type() != f32t {
            return Err(bad("exp: float32 only on NVPTX"));
        }
        let t = self.fmul(x, self.f32c(std::f64::consts::LOG2_E))?;
        let t = self.fintr("llvm.maxnum", &[t, self.f32c(-126.0)])?;
        let t = self.fintr("llvm.minnum", &[t, self.f32c(127.0)])?;
        let n = self.fintr("llvm.rint", &[t])?;
        let r = self.fma(n, self.f32c(-0.693_145_751_953_125), x)?;
        let r = self.fma(n, self.f32c(-1.428_606_765_330_187e-6), r)?;
        let rt = self.fmul(r, self.f32c(std::f64::consts::LOG2_E))?;
        let p = self.call("llvm.nvvm.ex2.approx.f", f32t.into(), &[rt.into()])?.into_float_value();
        let ni = e(self.b.build_float_to_signed_int(n, i32t, ""))?;
        let biased = e(self.b.build_int_add(ni, i32t.const_int(127, false), ""))?;
        let bits = e(self.b.build_left_shift(biased, i32t.const_int(23, false), ""))?;
        let pow2 = e(self.b.build_bit_cast(bits, f32t, ""))?.into_float_value();
        self.fmul(p, pow2)
    }

    /// Note [fast reciprocals]: `1 / d` and `1 / sqrt(x)` for float32, the reciprocal and
    /// rsqrt ops (legalize.rs writes both as a division of 1). `div.rn`, `rcp.rn` and `sqrt.rn`
    /// make ptxas add a slow path (subnormal and huge operands) at every site, and the driver's
    /// JIT spent about 10 ms on layer_norm's `sqrt.rn` + `rcp.rn` (its rsqrt; 45 -> 35 ms for the
    /// whole kernel with `rsqrt.approx.f32`, H200). Here the hardware's approximation (`rcp` /
    /// `rsqrt.approx.f32`, 1 and 2 ulps, subnormals included) is refined by one Newton step on
    /// the exact residual (`fma`): y + y e with e = 1 - d y, or y + (y/2) e with
    /// e = 1 - (x y) y, within about half an ulp of the rounded result (eager's rsqrt is
    /// CUDA's `rsqrtf`, 2 ulps). The step is NaN exactly where the approximation is already
    /// exact (d or x zero or infinite: y is inf or 0; or NaN), which a select keeps. A `1 / x`
    /// written in the graph is a division of 1 too and takes the same path (float32 only);
    /// other divisions stay `div.rn`.
    fn rcp(&self, d: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let f32t = self.ctx.f32_type();
        // LLVM has no intrinsic for the non-ftz `rcp.approx.f32` (subnormals kept), hence the asm.
        let fty = f32t.fn_type(&[f32t.into()], false);
        let asm = self.ctx.create_inline_asm(fty, "rcp.approx.f32 $0, $1;".into(), "=f,f".into(), false, false, None, false);
        let y = e(self.b.build_indirect_call(fty, asm, &[d.into()], ""))?.try_as_basic_value().basic().ok_or_else(|| bad("rcp asm"))?.into_float_value();
        let r = self.fma(e(self.b.build_float_neg(d, ""))?, y, self.f32c(1.0))?;
        let z = self.fma(y, r, y)?;
        self.select_f(self.fcmp(FloatPredicate::UNO, z, z)?, y, z)
    }

    /// `1 / sqrt(x)` for float32 (Note [fast reciprocals]).
    fn rsqrt(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let f32t = self.ctx.f32_type();
        let y = self.call("llvm.nvvm.rsqrt.approx.f", f32t.into(), &[x.into()])?.into_float_value();
        let xy = self.fmul(x, y)?;
        let r = self.fma(e(self.b.build_float_neg(xy, ""))?, y, self.f32c(1.0))?;
        let z = self.fma(self.fmul(y, self.f32c(0.5))?, r, y)?;
        self.select_f(self.fcmp(FloatPredicate::UNO, z, z)?, y, z)
    }

    /// `log(x)`: x = m * 2^k with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s = (m-1)/(m+1),
    /// by its series to s^9 (|s| <= 0.172: error under 2e-9); subnormals are scaled first.
    /// log(0) = -inf, log(x<0) = NaN, log(inf) = inf.
    fn log(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let f32t = self.ctx.f32_type();
        let tiny = self.fcmp(FloatPredicate::OLT, x, self.f32c(1.175_494_350_822_287_5e-38))?;
        let xs = self.select_f(tiny, self.fmul(x, self.f32c(8_388_608.0))?, x)?;
        let bias = e(self.b.build_select(tiny, i32t.const_int((127 + 23) as u64, false), i32t.const_int(127, false), ""))?.into_int_value();
        let bits = e(self.b.build_bit_cast(xs, i32t, ""))?.into_int_value();
        let expo = e(self.b.build_right_shift(bits, i32t.const_int(23, false), false, ""))?;
        let expo = e(self.b.build_and(expo, i32t.const_int(0xff, false), ""))?;
        let k = e(self.b.build_int_sub(expo, bias, ""))?;
        let mbits = e(self.b.build_and(bits, i32t.const_int(0x007f_ffff, false), ""))?;
        let mbits = e(self.b.build_or(mbits, i32t.const_int(0x3f80_0000, false), ""))?;
        let m = e(self.b.build_bit_cast(mbits, f32t, ""))?.into_float_value();
        let big = self.fcmp(FloatPredicate::OGT, m, self.f32c(std::f64::consts::SQRT_2))?;
        let m = self.select_f(big, self.fmul(m, self.f32c(0.5))?, m)?;
        let k = e(self.b.build_int_add(k, e(self.b.build_int_z_extend(big, i32t, ""))?, ""))?;
        let kf = e(self.b.build_signed_int_to_float(k, f32t, ""))?;
        let num = e(self.b.build_float_sub(m, self.f32c(1.0), ""))?;
        let den = self.fadd(m, self.f32c(1.0))?;
        let s = self.div_inner(num, den)?;
        let s2 = self.fmul(s, s)?;
        let p = self.poly(s2, &[2.0, 2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0])?;
        let lm = self.fmul(s, p)?;
        let res = self.fma(kf, self.f32c(0.693_145_751_953_125), lm)?;
        let res = self.fma(kf, self.f32c(1.428_606_765_330_187e-6), res)?;
        let res = self.select_f(self.fcmp(FloatPredicate::OEQ, x, self.f32c(0.0))?, self.f32c(f64::NEG_INFINITY), res)?;
        let res = self.select_f(self.fcmp(FloatPredicate::OLT, x, self.f32c(0.0))?, self.f32c(f64::NAN), res)?;
        let res = self.select_f(self.fcmp(FloatPredicate::OEQ, x, self.f32c(f64::INFINITY))?, x, res)?;
        self.select_f(self.fcmp(FloatPredicate::UNO, x, x)?, x, res)
    }

    /// `tanh(x)` for float32 `x`: x + x^3 P(x^2) for |x| < 0.6, else
    /// sign(x) (1 - 2 / (2^(2|x| log2(e)) + 1)); within about 3 float32 ulps (Note [fast tanh]).
    /// tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN stays NaN.
    ///
    /// Note [fast tanh]: GPT-2's GELU (`0.5 x (1 + tanh(...))`, [4096, 3072]) took 37 us against
    /// Triton's 23 us (H200): the kernel was bound by instructions, not memory, because `tanh`
    /// used the general [`Gen::exp`] of the time (clamps, `rint`, a degree-7 polynomial, 2^n in two halves
    /// for subnormal results, four selects) on an argument that is never negative and is clamped
    /// here anyway. The exponential is now the hardware's `ex2.approx.f32` (MUFU; 2 ulps on its
    /// own, the argument's rounding adds ln2/2 of an ulp of 2|x| log2(e)), as CUDA's libdevice
    /// `tanhf` (which Triton calls) does. The quotient amplifies that error by q / tanh(x)
    /// (q = 2 / (e + 1)), which is why the branch point moved from 0.3 (2.4x) to 0.6 (0.86x);
    /// below it a least-squares polynomial in s = x^2 on [0, 0.36] (degree 4, 7.8e-9 relative;
    /// the Taylor series to x^11 is off by 5e-6 at 0.6) in the form fma(x s, P(s), x).
    fn tanh(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let f32t = self.ctx.f32_type();
        if x.get_type() != f32t {
            return Err(bad("tanh: float32 only on NVPTX"));
        }
        let ax = self.fintr("llvm.fabs", &[x])?;
        let s = self.fmul(x, x)?;
        let p = self.poly(s, &[-0.333_333_046_721_709_66, 0.133_321_330_807_515_46, -0.053_803_585_099_944_72, 0.020_868_224_413_815_292, -0.005_985_061_405_521_356])?;
        let small = self.fma(self.fmul(x, s)?, p, x)?;
        // 2|x| log2(e) clamped to 64 (tanh is 1 in float32 from |x| = 9 on) keeps the divisor
        // finite for `div_inner`; NaN stays NaN (the comparison is false, ex2 passes it on).
        let t = self.fmul(ax, self.f32c(2.0 * std::f64::consts::LOG2_E))?;
        let t = self.select_f(self.fcmp(FloatPredicate::OGT, t, self.f32c(64.0))?, self.f32c(64.0), t)?;
        let e2 = self.call("llvm.nvvm.ex2.approx.f", f32t.into(), &[t.into()])?.into_float_value();
        let q = self.div_inner(self.f32c(2.0), self.fadd(e2, self.f32c(1.0))?)?;
        let big = e(self.b.build_float_sub(self.f32c(1.0), q, ""))?;
        // 1 - q >= 0, so the sign is a select (NVPTX expands `llvm.copysign` to 7 instructions).
        let neg = e(self.b.build_float_neg(big, ""))?;
        let big = self.select_f(self.fcmp(FloatPredicate::OLT, x, self.f32c(0.0))?, neg, big)?;
        let res = self.select_f(self.fcmp(FloatPredicate::OLT, ax, self.f32c(0.6))?, small, big)?;
        // tanh(+-0) = +-0: the fma gives +0 for x = -0 ((-0 * 0) * P(0) is +0, and +0 + -0 = +0;
        // the device run of test_tanh_within_four_ulps found it).
        self.select_f(self.fcmp(FloatPredicate::OEQ, x, self.f32c(0.0))?, x, res)
    }

    /// `erf(x)`: Maclaurin series to x^13 for |x| < 0.5; else Abramowitz-Stegun 7.1.26.
    fn erf(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let ax = self.fintr("llvm.fabs", &[x])?;
        let x2 = self.fmul(x, x)?;
        let c = 2.0 / std::f64::consts::PI.sqrt();
        let p = self.poly(x2, &[c, -c / 3.0, c / 10.0, -c / 42.0, c / 216.0, -c / 1320.0, c / 9360.0])?;
        let small = self.fmul(x, p)?;
        // |x| clamped to 10 for the divisor (finite for `div_inner`): from there on exp(-x^2)
        // makes the polynomial's term vanish (erf is 1 in float32 from |x| = 4), as before.
        let axc = self.select_f(self.fcmp(FloatPredicate::OGT, ax, self.f32c(10.0))?, self.f32c(10.0), ax)?;
        let t = self.div_inner(self.f32c(1.0), self.fma(axc, self.f32c(0.327_591_1), self.f32c(1.0))?)?;
        let q = self.poly(t, &[0.0, 0.254_829_592, -0.284_496_736, 1.421_413_741, -1.453_152_027, 1.061_405_429])?;
        let ex = self.exp(e(self.b.build_float_neg(x2, ""))?)?;
        let big = e(self.b.build_float_sub(self.f32c(1.0), self.fmul(q, ex)?, ""))?;
        let big = self.fintr("llvm.copysign", &[big, x])?;
        let res = self.select_f(self.fcmp(FloatPredicate::OLT, ax, self.f32c(0.5))?, small, big)?;
        self.select_f(self.fcmp(FloatPredicate::UNO, x, x)?, x, res)
    }

    /// `log1p(x)` = log(u) - ((u - 1) - x) / u with u = 1 + x (the rounding of u corrected).
    fn log1p(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let u = self.fadd(x, self.f32c(1.0))?;
        let l = self.log(u)?;
        let um1 = e(self.b.build_float_sub(u, self.f32c(1.0), ""))?;
        let corr = e(self.b.build_float_div(e(self.b.build_float_sub(um1, x, ""))?, u, ""))?;
        let res = e(self.b.build_float_sub(l, corr, ""))?;
        // u == 1 (|x| tiny): log1p(x) = x; u == inf: inf.
        let res = self.select_f(self.fcmp(FloatPredicate::OEQ, u, self.f32c(1.0))?, x, res)?;
        self.select_f(self.fcmp(FloatPredicate::OEQ, u, self.f32c(f64::INFINITY))?, u, res)
    }

    /// `expm1(x)`: Taylor polynomial to x^9 for |x| < 0.5, else exp(x) - 1.
    fn expm1(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let ax = self.fintr("llvm.fabs", &[x])?;
        let mut coeffs = vec![1.0f64];
        let mut f = 1.0;
        for k in 2..=9 {
            f *= k as f64;
            coeffs.push(1.0 / f);
        }
        let small = self.fmul(x, self.poly(x, &coeffs)?)?;
        let big = e(self.b.build_float_sub(self.exp(x)?, self.f32c(1.0), ""))?;
        self.select_f(self.fcmp(FloatPredicate::OLT, ax, self.f32c(0.5))?, small, big)
    }

    /// The 2/pi table of [`Gen::sin_cos`]: 160 zero bits, then the first 224 bits of the binary
    /// fraction of 2/pi, as big-endian 32-bit words (in the device's constant memory).
    fn two_over_pi(&self) -> PointerValue<'ctx> {
        const NAME: &str = "dynamo_two_over_pi";
        if let Some(g) = self.module.get_global(NAME) {
            return g.as_pointer_value();
        }
        let i32t = self.ctx.i32_type();
        let words: [u32; 12] = [0, 0, 0, 0, 0, 0xa2f9_836e, 0x4e44_1529, 0xfc27_57d1, 0xf534_ddc0, 0xdb62_9599, 0x3c43_9041, 0xfe51_63ab];
        let vals: Vec<IntValue> = words.iter().map(|w| i32t.const_int(*w as u64, false)).collect();
        let arr = i32t.array_type(words.len() as u32);
        let g = self.module.add_global(arr, Some(AddressSpace::from(4u16)), NAME);
        g.set_linkage(Linkage::Internal);
        g.set_constant(true);
        g.set_initializer(&i32t.const_array(&vals));
        g.as_pointer_value()
    }

    /// `(sin(x), cos(x))` for float32 `x`, accurate to about one ulp over the whole float range.
    ///
    /// Note [trig reduction]: |x| <= pi/4 is used as is; otherwise |x| = m * 2^(E-150) is
    /// reduced exactly (Payne-Hanek): the bits of 2/pi from 2^-(E-151) on (a 96-bit window
    /// of the table, so that the bits contributing multiples of 4 to m * 2/pi * 2^(E-150) are
    /// skipped) times the 24-bit m give the quadrant (2 bits) and a 64-bit fraction f, and
    /// r = f * pi/2 (in float64; f >= 1/2 is taken as f - 1 with the next quadrant, so
    /// |r| <= pi/4). sin and cos of r are Cephes' sinf/cosf minimax polynomials; the quadrant
    /// swaps and negates them, and sin takes the sign of x. inf and NaN give NaN.
    fn sin_cos(&self, x: FloatValue<'ctx>) -> Result<(FloatValue<'ctx>, FloatValue<'ctx>), CodegenError> {
        let i32t = self.ctx.i32_type();
        let i64t = self.ctx.i64_type();
        let f32t = self.ctx.f32_type();
        let c64 = |v: u64| i64t.const_int(v, false);
        let ax = self.fintr("llvm.fabs", &[x])?;
        let bits = e(self.b.build_bit_cast(ax, i32t, ""))?.into_int_value();
        let bits = e(self.b.build_int_z_extend(bits, i64t, ""))?;
        let expo = e(self.b.build_right_shift(bits, c64(23), false, ""))?;
        let m = e(self.b.build_or(e(self.b.build_and(bits, c64(0x7f_ffff), ""))?, c64(0x80_0000), ""))?;
        // First window bit (0-based, in the zero-padded table): 160 + (E - 150 - 1) - 1.
        let b0 = e(self.b.build_int_add(expo, c64(8), ""))?;
        let wi = e(self.b.build_right_shift(b0, c64(5), false, ""))?;
        let sh = e(self.b.build_and(b0, c64(31), ""))?;
        let table = self.two_over_pi();
        let arr = i32t.array_type(12);
        let word = |k: u64| -> Result<IntValue<'ctx>, CodegenError> {
            let idx = e(self.b.build_int_add(wi, c64(k), ""))?;
            // SAFETY (of the index): E <= 255 gives wi <= 8, so wi + 3 < 12.
            let p = unsafe { e(self.b.build_in_bounds_gep(arr, table, &[i64t.const_zero(), idx], ""))? };
            let v = e(self.b.build_load(i32t, p, ""))?.into_int_value();
            e(self.b.build_int_z_extend(v, i64t, ""))
        };
        let t: Vec<IntValue> = (0..4).map(word).collect::<Result<_, _>>()?;
        let rsh = e(self.b.build_int_sub(c64(32), sh, ""))?;
        let window = |k: usize| -> Result<IntValue<'ctx>, CodegenError> {
            let pair = e(self.b.build_or(e(self.b.build_left_shift(t[k], c64(32), ""))?, t[k + 1], ""))?;
            e(self.b.build_and(e(self.b.build_right_shift(pair, rsh, false, ""))?, c64(0xffff_ffff), ""))
        };
        let (w_hi, w_mid, w_lo) = (window(0)?, window(1)?, window(2)?);
        let p_lo = e(self.b.build_int_nuw_mul(m, w_lo, ""))?;
        let p_mid = e(self.b.build_int_nuw_mul(m, w_mid, ""))?;
        let p_hi = e(self.b.build_int_nuw_mul(m, w_hi, ""))?;
        let low = e(self.b.build_int_add(p_lo, e(self.b.build_left_shift(p_mid, c64(32), ""))?, ""))?;
        let carry = e(self.b.build_int_compare(IntPredicate::ULT, low, p_lo, ""))?;
        let carry = e(self.b.build_int_z_extend(carry, i64t, ""))?;
        let high = e(self.b.build_int_add(e(self.b.build_int_add(p_hi, e(self.b.build_right_shift(p_mid, c64(32), false, ""))?, ""))?, carry, ""))?;
        let q = e(self.b.build_right_shift(high, c64(30), false, ""))?;
        let frac = e(self.b.build_or(
            e(self.b.build_left_shift(e(self.b.build_and(high, c64(0x3fff_ffff), ""))?, c64(34), ""))?,
            e(self.b.build_right_shift(low, c64(30), false, ""))?,
            "",
        ))?;
        // frac as a signed number is f or f - 1 (top bit set): the quadrant moves up by one.
        let up = e(self.b.build_int_compare(IntPredicate::SLT, frac, i64t.const_zero(), ""))?;
        let q = e(self.b.build_int_add(q, e(self.b.build_int_z_extend(up, i64t, ""))?, ""))?;
        let fd = e(self.b.build_signed_int_to_float(frac, self.ctx.f64_type(), ""))?;
        let rd = e(self.b.build_float_mul(fd, self.ctx.f64_type().const_float(std::f64::consts::FRAC_PI_2 / 18_446_744_073_709_551_616.0), ""))?;
        let r_big = e(self.b.build_float_trunc(rd, f32t, ""))?;
        let small = self.fcmp(FloatPredicate::OLE, ax, self.f32c(std::f64::consts::FRAC_PI_4))?;
        let r = self.select_f(small, ax, r_big)?;
        let q = e(self.b.build_select(small, i64t.const_zero(), q, ""))?.into_int_value();
        let z = self.fmul(r, r)?;
        let sp = self.fma(self.fmul(r, z)?, self.poly(z, &[-1.666_665_461_1e-1, 8.332_160_873_6e-3, -1.951_529_589_1e-4])?, r)?;
        let cp = self.poly(z, &[4.166_664_568_298_827e-2, -1.388_731_625_493_765e-3, 2.443_315_711_809_948e-5])?;
        let cp = self.fma(self.fmul(z, z)?, cp, self.fma(z, self.f32c(-0.5), self.f32c(1.0))?)?;
        let swap = e(self.b.build_int_compare(IntPredicate::NE, e(self.b.build_and(q, c64(1), ""))?, i64t.const_zero(), ""))?;
        let neg_s = e(self.b.build_int_compare(IntPredicate::NE, e(self.b.build_and(q, c64(2), ""))?, i64t.const_zero(), ""))?;
        let q1 = e(self.b.build_int_add(q, c64(1), ""))?;
        let neg_c = e(self.b.build_int_compare(IntPredicate::NE, e(self.b.build_and(q1, c64(2), ""))?, i64t.const_zero(), ""))?;
        let s = self.select_f(swap, cp, sp)?;
        let s = self.select_f(neg_s, e(self.b.build_float_neg(s, ""))?, s)?;
        // sin(-x) = -sin(x), -0 included: the sign bit of x goes onto the result.
        let xb = e(self.b.build_bit_cast(x, i32t, ""))?.into_int_value();
        let sign = e(self.b.build_and(xb, i32t.const_int(0x8000_0000, false), ""))?;
        let sb = e(self.b.build_bit_cast(s, i32t, ""))?.into_int_value();
        let s = e(self.b.build_bit_cast(e(self.b.build_xor(sb, sign, ""))?, f32t, ""))?.into_float_value();
        let c = self.select_f(swap, sp, cp)?;
        let c = self.select_f(neg_c, e(self.b.build_float_neg(c, ""))?, c)?;
        let not_finite = self.fcmp(FloatPredicate::UNO, e(self.b.build_float_sub(x, x, ""))?, self.f32c(0.0))?;
        let nan = self.f32c(f64::NAN);
        Ok((self.select_f(not_finite, nan, s)?, self.select_f(not_finite, nan, c)?))
    }

    /// One expression other than `Load` and `Reduce`, from its operands' values.
    fn op(&self, k: &Kernel, ex: &Expr, get: &dyn Fn(ExprId) -> BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let ctx = self.ctx;
        let b = &self.b;
        let f32t = ctx.f32_type();
        let boolt = ctx.bool_type();
        let fv = |id: &ExprId| get(*id).into_float_value();
        let iv = |id: &ExprId| get(*id).into_int_value();
        let is_f32 = |id: &ExprId| k.dtype_of(*id) == DType::F32;
        Ok(match ex {
            Expr::ConstF32(bits) => f32t.const_float(f32::from_bits(*bits) as f64).into(),
            Expr::ConstF64(bits) => ctx.f64_type().const_float(f64::from_bits(*bits)).into(),
            Expr::ConstInt(dt, v) => value_type(ctx, *dt).into_int_type().const_int(*v as u64, true).into(),
            Expr::ConstBool(v) => boolt.const_int(*v as u64, false).into(),
            Expr::Unary(op @ (UnaryOp::Neg | UnaryOp::Abs), a) if k.dtype_of(*a).is_int() => {
                let neg = e(b.build_int_neg(iv(a), ""))?;
                if *op == UnaryOp::Neg {
                    neg.into()
                } else {
                    let lt = e(b.build_int_compare(IntPredicate::SLT, iv(a), iv(a).get_type().const_zero(), ""))?;
                    e(b.build_select(lt, neg, iv(a), ""))?
                }
            }
            Expr::Unary(op, a) => match op {
                UnaryOp::Neg => e(b.build_float_neg(fv(a), ""))?.into(),
                UnaryOp::Abs => self.fintr("llvm.fabs", &[fv(a)])?.into(),
                UnaryOp::Sqrt => self.fintr("llvm.sqrt", &[fv(a)])?.into(),
                UnaryOp::Floor => self.fintr("llvm.floor", &[fv(a)])?.into(),
                UnaryOp::Ceil => self.fintr("llvm.ceil", &[fv(a)])?.into(),
                UnaryOp::Not => e(b.build_xor(iv(a), boolt.const_int(1, false), ""))?.into(),
                UnaryOp::Exp if is_f32(a) => self.exp(fv(a))?.into(),
                UnaryOp::Log if is_f32(a) => self.log(fv(a))?.into(),
                UnaryOp::Tanh if is_f32(a) => self.tanh(fv(a))?.into(),
                UnaryOp::Erf if is_f32(a) => self.erf(fv(a))?.into(),
                UnaryOp::Log1p if is_f32(a) => self.log1p(fv(a))?.into(),
                UnaryOp::Expm1 if is_f32(a) => self.expm1(fv(a))?.into(),
                UnaryOp::Sin if is_f32(a) => self.sin_cos(fv(a))?.0.into(),
                UnaryOp::Cos if is_f32(a) => self.sin_cos(fv(a))?.1.into(),
                UnaryOp::RoundBF16 | UnaryOp::RoundF16 => {
                    let half = if *op == UnaryOp::RoundBF16 { ctx.bf16_type() } else { ctx.f16_type() };
                    let t = e(b.build_float_trunc(fv(a), half, ""))?;
                    e(b.build_float_ext(t, f32t, ""))?.into()
                }
                other => return Err(bad(format!("{other:?} has no NVPTX lowering"))),
            },
            Expr::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), x, y) if k.dtype_of(*x).is_int() => match op {
                BinaryOp::Add => e(b.build_int_add(iv(x), iv(y), ""))?.into(),
                BinaryOp::Sub => e(b.build_int_sub(iv(x), iv(y), ""))?.into(),
                _ => e(b.build_int_mul(iv(x), iv(y), ""))?.into(),
            },
            Expr::Binary(op, x, y) => match op {
                BinaryOp::Add => e(b.build_float_add(fv(x), fv(y), ""))?.into(),
                BinaryOp::Sub => e(b.build_float_sub(fv(x), fv(y), ""))?.into(),
                BinaryOp::Mul => e(b.build_float_mul(fv(x), fv(y), ""))?.into(),
                // Note [fast reciprocals]: 1 / sqrt(a) and 1 / d (the legalized rsqrt and reciprocal).
                BinaryOp::Div if is_f32(x) && matches!(k.exprs[x.0 as usize], Expr::ConstF32(bits) if f32::from_bits(bits) == 1.0) => {
                    match k.exprs[y.0 as usize] {
                        Expr::Unary(UnaryOp::Sqrt, a) => self.rsqrt(fv(&a))?.into(),
                        _ => self.rcp(fv(y))?.into(),
                    }
                }
                BinaryOp::Div => e(b.build_float_div(fv(x), fv(y), ""))?.into(),
                BinaryOp::And => e(b.build_and(iv(x), iv(y), ""))?.into(),
                BinaryOp::Or => e(b.build_or(iv(x), iv(y), ""))?.into(),
                other => return Err(bad(format!("{other:?} has no NVPTX lowering"))),
            },
            Expr::Compare(op, x, y) if k.dtype_of(*x).is_int() || k.dtype_of(*x) == DType::Bool => {
                crate::emit::build_compare(b, *op, true, get(*x), get(*y))?
            }
            Expr::Compare(op, x, y) => {
                crate::emit::build_compare(b, *op, false, get(*x), get(*y))?
            }
            Expr::Select(c, x, y) => e(b.build_select(iv(c), get(*x), get(*y), ""))?,
            Expr::Cast(to, a) => {
                let from = k.dtype_of(*a).value_type();
                let to = to.value_type();
                let to_ty = value_type(ctx, to);
                crate::emit::build_cast(b, from, to, to_ty, get(*a), true)?
            }
            Expr::Load { .. } | Expr::MaskedLoad { .. } | Expr::InRange { .. } | Expr::Reduce(..) => {
                return Err(bad("loads, range checks and reductions are emitted by the kernel loop"))
            }
            // The GPU lowering does not make these yet (embedding and gather stay torch calls
            // on CUDA tensors): Note [indirect loads] in kernel.rs.
            Expr::IndirectLoad { .. } => return Err(bad("indirect loads have no NVPTX lowering")),
        })
    }

    /// Converts a loaded storage value to its register value (half -> f32, byte -> i1).
    fn from_storage(&self, dt: DType, raw: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        Ok(match dt {
            DType::BF16 | DType::F16 => e(self.b.build_float_ext(raw.into_float_value(), self.ctx.f32_type(), ""))?.into(),
            DType::Bool => e(self.b.build_int_compare(IntPredicate::NE, raw.into_int_value(), self.ctx.i8_type().const_zero(), ""))?.into(),
            _ => raw,
        })
    }

    /// Converts a register value to its storage form.
    fn to_storage(&self, dt: DType, v: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        Ok(match dt {
            DType::BF16 => e(self.b.build_float_trunc(v.into_float_value(), self.ctx.bf16_type(), ""))?.into(),
            DType::F16 => e(self.b.build_float_trunc(v.into_float_value(), self.ctx.f16_type(), ""))?.into(),
            DType::Bool => e(self.b.build_int_z_extend(v.into_int_value(), self.ctx.i8_type(), ""))?.into(),
            _ => v,
        })
    }

    fn gep(&self, dt: DType, base: PointerValue<'ctx>, off: IntValue<'ctx>) -> Result<PointerValue<'ctx>, CodegenError> {
        // SAFETY (of the IR): offsets stay inside the tensor the runtime bound to `base`.
        unsafe { e(self.b.build_in_bounds_gep(storage_type(self.ctx, dt), base, &[off], "")) }
    }

    /// `offset + sum(strides[d] * idx[d])` over the dims `dims` of `index`.
    fn linear(&self, index: &Index, idx: &[(usize, IntValue<'ctx>)], with_offset: bool) -> Result<IntValue<'ctx>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let mut acc = i64t.const_int(if with_offset { index.offset as u64 } else { 0 }, true);
        for &(d, v) in idx {
            let s = index.strides[d];
            if s == 0 {
                continue;
            }
            let term = e(self.b.build_int_nsw_mul(v, i64t.const_int(s as u64, true), ""))?;
            acc = e(self.b.build_int_nsw_add(acc, term, ""))?;
        }
        Ok(acc)
    }

    /// `0 <= index < size` at the loop position `idx` (one unsigned compare).
    fn in_range(&self, index: &Index, size: i64, idx: &[(usize, IntValue<'ctx>)]) -> Result<IntValue<'ctx>, CodegenError> {
        let c = self.linear(index, idx, true)?;
        e(self.b.build_int_compare(IntPredicate::ULT, c, self.ctx.i64_type().const_int(size as u64, false), ""))
    }

    /// Note [masked loads]: `lanes` elements of `arg` at `index` (a vector load when `lanes` is
    /// 4, whose lanes share `mask`) where `mask` holds; element 0 (the vector at 0) is read where
    /// it does not and the values selected to zero, so no branch splits the threads.
    #[allow(clippy::too_many_arguments)]
    fn masked_load(&self, dt: DType, base: PointerValue<'ctx>, index: &Index, idx: &[(usize, IntValue<'ctx>)], mask: IntValue<'ctx>, lanes: usize) -> Result<Vec<BasicValueEnum<'ctx>>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let off = self.linear(index, idx, true)?;
        let off = e(self.b.build_select(mask, off, i64t.const_zero(), ""))?.into_int_value();
        let ptr = self.gep(dt, base, off)?;
        let raws: Vec<BasicValueEnum> = if lanes > 1 {
            let vt = storage_type(self.ctx, dt).vec_type_of(lanes as u32)?;
            let raw = e(self.b.build_load(vt, ptr, ""))?;
            raw.as_instruction_value().expect("load").set_alignment(16).map_err(|m| bad(m.to_string()))?;
            (0..lanes)
                .map(|l| e(self.b.build_extract_element(raw.into_vector_value(), i64t.const_int(l as u64, false), "")))
                .collect::<Result<_, _>>()?
        } else {
            let raw = e(self.b.build_load(storage_type(self.ctx, dt), ptr, ""))?;
            raw.as_instruction_value().expect("load").set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
            vec![raw]
        };
        let mut out = Vec::with_capacity(lanes);
        for raw in raws {
            let v = self.from_storage(dt, raw)?;
            let zero: BasicValueEnum = match v {
                BasicValueEnum::FloatValue(f) => f.get_type().const_zero().into(),
                BasicValueEnum::IntValue(i) => i.get_type().const_zero().into(),
                other => return Err(bad(format!("masked load of {other:?}"))),
            };
            out.push(e(self.b.build_select(mask, v, zero, ""))?);
        }
        Ok(out)
    }

    /// Splits the linear index `flat` over `ranges` (row-major) into one index per dim.
    fn unflatten(&self, flat: IntValue<'ctx>, ranges: &[i64]) -> Result<Vec<IntValue<'ctx>>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let mut out = Vec::with_capacity(ranges.len());
        for d in 0..ranges.len() {
            let inner: i64 = ranges[d + 1..].iter().product();
            let mut v = flat;
            if inner != 1 {
                v = e(self.b.build_int_unsigned_div(v, i64t.const_int(inner as u64, false), ""))?;
            }
            if d > 0 {
                v = e(self.b.build_int_unsigned_rem(v, i64t.const_int(ranges[d] as u64, false), ""))?;
            }
            out.push(v);
        }
        Ok(out)
    }

    fn new_entry(&mut self, k: &Kernel, name: &str) -> FunctionValue<'ctx> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let params: Vec<BasicMetadataTypeEnum> = k.args.iter().map(|_| ptr.into()).collect();
        let f = self.module.add_function(name, self.ctx.void_type().fn_type(&params, false), Some(Linkage::External));
        for (i, a) in k.args.iter().enumerate() {
            let kind = |n: &str| inkwell::attributes::Attribute::get_named_enum_kind_id(n);
            f.add_attribute(inkwell::attributes::AttributeLoc::Param(i as u32), self.ctx.create_enum_attribute(kind("noalias"), 0));
            if !a.is_output {
                f.add_attribute(inkwell::attributes::AttributeLoc::Param(i as u32), self.ctx.create_enum_attribute(kind("readonly"), 0));
            }
            f.get_nth_param(i as u32).expect("param").set_name(&a.name);
        }
        self.annotations.push((f, None));
        f
    }

    fn kernel(&mut self, k: &Kernel) -> Result<PtxKernel, CodegenError> {
        if let Some(plan) = transpose_plan(k) {
            // Scalar accesses only: no scalar twin (Note [tiled transposes]).
            let name = if self.twins == Twins::Only { format!("{}_s", k.name) } else { k.name.clone() };
            let launch = self.tiled_transpose(k, &name, &plan)?;
            return Ok(PtxKernel { name: k.name.clone(), launch, unaligned: None, twin_in_module: false });
        }
        let pointwise = k.reduction_ranges.is_empty();
        let vec = if pointwise {
            pointwise_vec(k)
        } else if column_plan(k).is_some() {
            1
        } else {
            reduction_vec(k)
        };
        let twin_name = format!("{}_s", k.name);
        let emit = |g: &mut Self, name: &str, vec: u32| if pointwise { g.pointwise(k, name, vec) } else { g.reduction(k, name, vec) };
        match self.twins {
            Twins::Only => {
                // The scalar twin alone, as the kernel's launch.
                let launch = emit(self, &twin_name, 1)?;
                Ok(PtxKernel { name: k.name.clone(), launch, unaligned: None, twin_in_module: false })
            }
            mode => {
                let launch = emit(self, &k.name, vec)?;
                if vec == 1 {
                    return Ok(PtxKernel { name: k.name.clone(), launch, unaligned: None, twin_in_module: false });
                }
                let (unaligned, in_module) = if mode == Twins::Eager {
                    (emit(self, &twin_name, 1)?, true)
                } else {
                    (launch_of(k, &twin_name, 1), false)
                };
                Ok(PtxKernel { name: k.name.clone(), launch, unaligned: Some(unaligned), twin_in_module: in_module })
            }
        }
    }

    /// Emits a grid-stride loop `for w in [tid_global, n) step total_threads` and returns
    /// (w, the function, exit block); the caller emits the body and calls `close_grid_loop`.
    fn open_grid_loop(
        &self,
        f: FunctionValue<'ctx>,
        n: i64,
    ) -> Result<(IntValue<'ctx>, inkwell::values::PhiValue<'ctx>, IntValue<'ctx>, inkwell::basic_block::BasicBlock<'ctx>, inkwell::basic_block::BasicBlock<'ctx>), CodegenError> {
        let i64t = self.ctx.i64_type();
        let entry = self.ctx.append_basic_block(f, "entry");
        let body = self.ctx.append_basic_block(f, "body");
        let exit = self.ctx.append_basic_block(f, "exit");
        self.b.position_at_end(entry);
        let tid = self.sreg("tid.x")?;
        let ntid = self.sreg("ntid.x")?;
        let ctaid = self.sreg("ctaid.x")?;
        let nctaid = self.sreg("nctaid.x")?;
        let start = e(self.b.build_int_nuw_add(e(self.b.build_int_nuw_mul(ctaid, ntid, ""))?, tid, ""))?;
        let stride = e(self.b.build_int_nuw_mul(nctaid, ntid, ""))?;
        let nv = i64t.const_int(n as u64, false);
        let c = e(self.b.build_int_compare(IntPredicate::ULT, start, nv, ""))?;
        e(self.b.build_conditional_branch(c, body, exit))?;
        self.b.position_at_end(body);
        let w = e(self.b.build_phi(i64t, "w"))?;
        w.add_incoming(&[(&start, entry)]);
        Ok((w.as_basic_value().into_int_value(), w, stride, body, exit))
    }

    fn close_grid_loop(&self, w: inkwell::values::PhiValue<'ctx>, stride: IntValue<'ctx>, n: i64, body: inkwell::basic_block::BasicBlock<'ctx>, exit: inkwell::basic_block::BasicBlock<'ctx>) -> Result<(), CodegenError> {
        let _ = body;
        let i64t = self.ctx.i64_type();
        let cur = self.b.get_insert_block().expect("block");
        let next = e(self.b.build_int_nuw_add(w.as_basic_value().into_int_value(), stride, ""))?;
        let c = e(self.b.build_int_compare(IntPredicate::ULT, next, i64t.const_int(n as u64, false), ""))?;
        w.add_incoming(&[(&next, cur)]);
        let header = w.as_basic_value().into_int_value().as_instruction().and_then(|i| i.get_parent()).expect("phi block");
        e(self.b.build_conditional_branch(c, header, exit))?;
        self.b.position_at_end(exit);
        e(self.b.build_return(None))?;
        Ok(())
    }

    /// A pointwise kernel with `vec` consecutive points per thread (1 or 4).
    fn pointwise(&mut self, k: &Kernel, name: &str, vec: u32) -> Result<Launch, CodegenError> {
        let f = self.new_entry(k, name);
        let n_dims = k.ranges.len();
        let numel = k.numel();
        let work = numel / vec as i64;
        let launch = launch_of(k, name, vec);
        let (w, phi, stride, body, exit) = self.open_grid_loop(f, work.max(0))?;
        let i64t = self.ctx.i64_type();
        let first = e(self.b.build_int_nuw_mul(w, i64t.const_int(vec as u64, false), ""))?;
        let idx = self.unflatten(first, &k.ranges)?;
        let dims: Vec<(usize, IntValue)> = idx.iter().copied().enumerate().collect();
        let ptrs: Vec<PointerValue> = (0..k.args.len()).map(|i| f.get_nth_param(i as u32).expect("param").into_pointer_value()).collect();
        let lanes = vec as usize;
        let mut vals: Vec<Vec<BasicValueEnum>> = vec![Vec::with_capacity(k.exprs.len()); lanes];
        for ex in &k.exprs {
            if let Expr::InRange { index, size } = ex {
                // Constant along the innermost loop when vectorized (`pointwise_vec`).
                let c = self.in_range(index, *size, &dims)?;
                for lv in vals.iter_mut() {
                    lv.push(c.into());
                }
                continue;
            }
            if let Expr::MaskedLoad { arg, index, mask } = ex {
                let dt = k.args[*arg as usize].dtype;
                let m = vals[0][mask.0 as usize].into_int_value();
                let vector = lanes > 1 && n_dims > 0 && index.strides[n_dims - 1] == 1;
                let got = self.masked_load(dt, ptrs[*arg as usize], index, &dims, m, if vector { lanes } else { 1 })?;
                for (lane, lv) in vals.iter_mut().enumerate() {
                    lv.push(got[if vector { lane } else { 0 }]);
                }
                continue;
            }
            if let Expr::Load { arg, index } = ex {
                let dt = k.args[*arg as usize].dtype;
                let off = self.linear(index, &dims, true)?;
                let ptr = self.gep(dt, ptrs[*arg as usize], off)?;
                if lanes > 1 && n_dims > 0 && index.strides[n_dims - 1] == 1 {
                    let vt = storage_type(self.ctx, dt).vec_type_of(lanes as u32)?;
                    let raw = e(self.b.build_load(vt, ptr, ""))?;
                    raw.as_instruction_value().expect("load").set_alignment(16).map_err(|m| bad(m.to_string()))?;
                    for (lane, lv) in vals.iter_mut().enumerate() {
                        let x = e(self.b.build_extract_element(raw.into_vector_value(), i64t.const_int(lane as u64, false), ""))?;
                        lv.push(self.from_storage(dt, x)?);
                    }
                } else {
                    let raw = e(self.b.build_load(storage_type(self.ctx, dt), ptr, ""))?;
                    raw.as_instruction_value().expect("load").set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
                    let v = self.from_storage(dt, raw)?;
                    for lv in vals.iter_mut() {
                        lv.push(v);
                    }
                }
                continue;
            }
            for lane in 0..lanes {
                let lv = &vals[lane];
                let v = self.op(k, ex, &|id: ExprId| lv[id.0 as usize])?;
                vals[lane].push(v);
            }
        }
        for s in &k.stores {
            let dt = k.args[s.arg as usize].dtype;
            let off = self.linear(&s.index, &dims, true)?;
            let ptr = self.gep(dt, ptrs[s.arg as usize], off)?;
            if lanes > 1 {
                let st = storage_type(self.ctx, dt);
                let vt = st.vec_type_of(lanes as u32)?;
                let mut vv = vt.get_undef();
                for (lane, lv) in vals.iter().enumerate() {
                    let x = self.to_storage(dt, lv[s.value.0 as usize])?;
                    vv = e(self.b.build_insert_element(vv, x, i64t.const_int(lane as u64, false), ""))?;
                }
                let st = e(self.b.build_store(ptr, vv))?;
                st.set_alignment(16).map_err(|m| bad(m.to_string()))?;
            } else {
                let x = self.to_storage(dt, vals[0][s.value.0 as usize])?;
                let st = e(self.b.build_store(ptr, x))?;
                st.set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
            }
        }
        self.close_grid_loop(phi, stride, work.max(0), body, exit)?;
        Ok(launch)
    }

    /// Emits `for j in 0..TILE/8 { body(ty + 8 j) }` as a loop (one copy of the body: the
    /// driver's compile time grows with the code it is given, Note [fast exp]).
    fn tile_rows(&self, f: FunctionValue<'ctx>, ty: IntValue<'ctx>, body: &mut dyn FnMut(&Self, IntValue<'ctx>) -> Result<(), CodegenError>) -> Result<(), CodegenError> {
        let i64t = self.ctx.i64_type();
        let rows = (TRANSPOSE_BLOCK as i64) / TRANSPOSE_TILE;
        let pre = self.b.get_insert_block().expect("block");
        let head = self.ctx.append_basic_block(f, "tile_rows");
        let after = self.ctx.append_basic_block(f, "tile_rows_done");
        e(self.b.build_unconditional_branch(head))?;
        self.b.position_at_end(head);
        let j = e(self.b.build_phi(i64t, "j"))?;
        j.add_incoming(&[(&i64t.const_zero(), pre)]);
        let jv = j.as_basic_value().into_int_value();
        let r = e(self.b.build_int_nuw_add(ty, e(self.b.build_int_nuw_mul(jv, i64t.const_int(rows as u64, false), ""))?, "r"))?;
        body(self, r)?;
        let next = e(self.b.build_int_nuw_add(jv, i64t.const_int(1, false), ""))?;
        let cur = self.b.get_insert_block().expect("block");
        j.add_incoming(&[(&next, cur)]);
        let c = e(self.b.build_int_compare(IntPredicate::ULT, next, i64t.const_int((TRANSPOSE_TILE / rows) as u64, false), ""))?;
        e(self.b.build_conditional_branch(c, head, after))?;
        self.b.position_at_end(after);
        Ok(())
    }

    /// Runs `body` where `cond` holds (a branch around it; no value leaves the body).
    fn when(&self, f: FunctionValue<'ctx>, cond: IntValue<'ctx>, body: &mut dyn FnMut(&Self) -> Result<(), CodegenError>) -> Result<(), CodegenError> {
        let then = self.ctx.append_basic_block(f, "in_tile");
        let done = self.ctx.append_basic_block(f, "in_tile_done");
        e(self.b.build_conditional_branch(cond, then, done))?;
        self.b.position_at_end(then);
        body(self)?;
        e(self.b.build_unconditional_branch(done))?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// A pointwise kernel run as 32x32 tiles through shared memory (Note [tiled transposes]).
    fn tiled_transpose(&mut self, k: &Kernel, name: &str, plan: &TransposePlan) -> Result<Launch, CodegenError> {
        let f = self.new_entry(k, name);
        if let Some(last) = self.annotations.last_mut() {
            last.1 = Some(TRANSPOSE_BLOCK);
        }
        let launch = launch_of(k, name, 1);
        let i64t = self.ctx.i64_type();
        let n = k.ranges.len();
        let (a, b) = (n - 2, n - 1);
        let (ra, rb) = (k.ranges[a], k.ranges[b]);
        let tile = TRANSPOSE_TILE as u64;
        let pitch = tile + 1;
        let tiles = plan.outer * plan.tiles_a * plan.tiles_b;
        // One shared tile per staged load, of its storage type.
        let smem: Vec<PointerValue> = plan
            .staged
            .iter()
            .enumerate()
            .map(|(s, &i)| {
                let Expr::Load { arg, .. } = &k.exprs[i] else { unreachable!("staged loads are loads") };
                self.shared_array(&format!("{name}_tile{s}"), storage_type(self.ctx, k.args[*arg as usize].dtype), (tile * pitch) as u32)
            })
            .collect();
        let ptrs: Vec<PointerValue> = (0..k.args.len()).map(|i| f.get_nth_param(i as u32).expect("param").into_pointer_value()).collect();
        let entry = self.ctx.append_basic_block(f, "entry");
        let body = self.ctx.append_basic_block(f, "tile");
        let exit = self.ctx.append_basic_block(f, "exit");
        self.b.position_at_end(entry);
        let tid = self.sreg("tid.x")?;
        let ctaid = self.sreg("ctaid.x")?;
        let nctaid = self.sreg("nctaid.x")?;
        let tx = e(self.b.build_int_unsigned_rem(tid, i64t.const_int(tile, false), "tx"))?;
        let ty = e(self.b.build_int_unsigned_div(tid, i64t.const_int(tile, false), "ty"))?;
        let c = e(self.b.build_int_compare(IntPredicate::ULT, ctaid, i64t.const_int(tiles as u64, false), ""))?;
        e(self.b.build_conditional_branch(c, body, exit))?;
        self.b.position_at_end(body);
        let t_phi = e(self.b.build_phi(i64t, "t"))?;
        t_phi.add_incoming(&[(&ctaid, entry)]);
        let t = t_phi.as_basic_value().into_int_value();
        let per_outer = i64t.const_int((plan.tiles_a * plan.tiles_b) as u64, false);
        let ob = e(self.b.build_int_unsigned_div(t, per_outer, "ob"))?;
        let rem = e(self.b.build_int_unsigned_rem(t, per_outer, ""))?;
        let tb_n = i64t.const_int(plan.tiles_b as u64, false);
        let a0 = e(self.b.build_int_nuw_mul(e(self.b.build_int_unsigned_div(rem, tb_n, ""))?, i64t.const_int(tile, false), "a0"))?;
        let b0 = e(self.b.build_int_nuw_mul(e(self.b.build_int_unsigned_rem(rem, tb_n, ""))?, i64t.const_int(tile, false), "b0"))?;
        let outer: Vec<(usize, IntValue)> = self.unflatten(ob, &k.ranges[..a])?.into_iter().enumerate().collect();
        let point = |g: &Self, ia: IntValue<'ctx>, ib: IntValue<'ctx>| -> Result<(Vec<(usize, IntValue<'ctx>)>, IntValue<'ctx>), CodegenError> {
            let mut dims = outer.clone();
            dims.push((a, ia));
            dims.push((b, ib));
            let ok_a = e(g.b.build_int_compare(IntPredicate::ULT, ia, i64t.const_int(ra as u64, false), ""))?;
            let ok_b = e(g.b.build_int_compare(IntPredicate::ULT, ib, i64t.const_int(rb as u64, false), ""))?;
            Ok((dims, e(g.b.build_and(ok_a, ok_b, ""))?))
        };
        let slot = |g: &Self, s: usize, row: IntValue<'ctx>, col: IntValue<'ctx>| -> Result<PointerValue<'ctx>, CodegenError> {
            let Expr::Load { arg, .. } = &k.exprs[plan.staged[s]] else { unreachable!("staged loads are loads") };
            let at = e(g.b.build_int_nuw_add(e(g.b.build_int_nuw_mul(row, i64t.const_int(pitch, false), ""))?, col, ""))?;
            g.gep(k.args[*arg as usize].dtype, smem[s], at)
        };
        // Phase 1: the staged loads, read along `a` (thread column tx), into tile[row b][col a].
        self.tile_rows(f, ty, &mut |g, r| {
            let ia = e(g.b.build_int_nuw_add(a0, tx, ""))?;
            let ib = e(g.b.build_int_nuw_add(b0, r, ""))?;
            let (dims, ok) = point(g, ia, ib)?;
            g.when(f, ok, &mut |g| {
                for s in 0..plan.staged.len() {
                    let Expr::Load { arg, index } = &k.exprs[plan.staged[s]] else { unreachable!("staged loads are loads") };
                    let dt = k.args[*arg as usize].dtype;
                    let off = g.linear(index, &dims, true)?;
                    let raw = e(g.b.build_load(storage_type(g.ctx, dt), g.gep(dt, ptrs[*arg as usize], off)?, ""))?;
                    raw.as_instruction_value().expect("load").set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
                    e(g.b.build_store(slot(g, s, r, tx)?, raw))?;
                }
                Ok(())
            })
        })?;
        self.call_void("llvm.nvvm.barrier0", &[])?;
        // Phase 2: the points along `b` (thread column tx), staged values from tile[tx][row].
        self.tile_rows(f, ty, &mut |g, r| {
            let ia = e(g.b.build_int_nuw_add(a0, r, ""))?;
            let ib = e(g.b.build_int_nuw_add(b0, tx, ""))?;
            let (dims, ok) = point(g, ia, ib)?;
            g.when(f, ok, &mut |g| {
                let mut vals: Vec<BasicValueEnum> = Vec::with_capacity(k.exprs.len());
                for (i, ex) in k.exprs.iter().enumerate() {
                    let v = match ex {
                        Expr::Load { arg, index } => {
                            let dt = k.args[*arg as usize].dtype;
                            let ptr = match plan.staged.iter().position(|&x| x == i) {
                                Some(s) => slot(g, s, tx, r)?,
                                None => g.gep(dt, ptrs[*arg as usize], g.linear(index, &dims, true)?)?,
                            };
                            let raw = e(g.b.build_load(storage_type(g.ctx, dt), ptr, ""))?;
                            raw.as_instruction_value().expect("load").set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
                            g.from_storage(dt, raw)?
                        }
                        other => g.op(k, other, &|id: ExprId| vals[id.0 as usize])?,
                    };
                    vals.push(v);
                }
                for st in &k.stores {
                    let dt = k.args[st.arg as usize].dtype;
                    let ptr = g.gep(dt, ptrs[st.arg as usize], g.linear(&st.index, &dims, true)?)?;
                    let x = g.to_storage(dt, vals[st.value.0 as usize])?;
                    let ins = e(g.b.build_store(ptr, x))?;
                    ins.set_alignment(dt.size_bytes() as u32).map_err(|m| bad(m.to_string()))?;
                }
                Ok(())
            })
        })?;
        // The next tile overwrites the shared tiles: everyone has read them first.
        self.call_void("llvm.nvvm.barrier0", &[])?;
        self.close_grid_loop(t_phi, nctaid, tiles, body, exit)?;
        Ok(launch)
    }

    /// The shared-memory scratch of one kernel: `n` floats (row reductions: 33, one per warp and
    /// one for the result; column reductions: one per warp and column).
    fn smem(&self, name: &str, n: u32) -> PointerValue<'ctx> {
        self.shared_array(&format!("{name}_smem"), self.ctx.f32_type().into(), n)
    }

    /// A module-internal shared-memory (address space 3) array `global` of `n` elements of
    /// `elem`, 16-byte aligned, uninitialized.
    fn shared_array(&self, global: &str, elem: BasicTypeEnum<'ctx>, n: u32) -> PointerValue<'ctx> {
        let arr = elem.array_type(n);
        let g = self.module.add_global(arr, Some(AddressSpace::from(3u16)), global);
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&arr.get_undef());
        g.set_alignment(16);
        g.as_pointer_value()
    }

    fn combine(&self, op: ReduceOp, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        match op {
            ReduceOp::Sum | ReduceOp::OrderedSum => self.fadd(a, b),
            // Note [NaN-propagating max]: one `max.NaN.f32` (sm_80+) instead of two compares,
            // an or and a select; the same values, except that +0 wins over -0 (here either one
            // could come out, by the order of the combines).
            ReduceOp::Max if a.get_type() == self.ctx.f32_type() => self.fintr("llvm.maximum", &[a, b]),
            ReduceOp::Min if a.get_type() == self.ctx.f32_type() => self.fintr("llvm.minimum", &[a, b]),
            ReduceOp::Max | ReduceOp::Min => {
                // NaN-propagating: keep `a` when it wins or is NaN, else `b` (NaN if `b` is).
                let p = if op == ReduceOp::Max { FloatPredicate::OGT } else { FloatPredicate::OLT };
                let wins = e(self.b.build_or(self.fcmp(p, a, b)?, self.fcmp(FloatPredicate::UNO, a, a)?, ""))?;
                self.select_f(wins, a, b)
            }
        }
    }

    fn warp_reduce(&self, op: ReduceOp, mut v: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        for off in [16u64, 8, 4, 2, 1] {
            let o = self
                .call(
                    "llvm.nvvm.shfl.sync.bfly.f32",
                    self.ctx.f32_type().into(),
                    &[i32t.const_int(0xffff_ffff, false).into(), v.into(), i32t.const_int(off, false).into(), i32t.const_int(0x1f, false).into()],
                )?
                .into_float_value();
            v = self.combine(op, v, o)?;
        }
        Ok(v)
    }

    /// Combines every thread's `v` over the block; every thread gets the result.
    fn block_reduce(&self, f: FunctionValue<'ctx>, op: ReduceOp, v: FloatValue<'ctx>, smem: PointerValue<'ctx>, block: u32, lane: IntValue<'ctx>, warp: IntValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let f32t = self.ctx.f32_type();
        let arr = f32t.array_type(33);
        let slot = |i: IntValue<'ctx>| -> Result<PointerValue<'ctx>, CodegenError> {
            unsafe { e(self.b.build_in_bounds_gep(arr, smem, &[i64t.const_zero(), i], "")) }
        };
        let v = self.warp_reduce(op, v)?;
        let n_warps = (block / 32) as u64;
        if n_warps == 1 {
            return Ok(v);
        }
        let is_lane0 = e(self.b.build_int_compare(IntPredicate::EQ, lane, i64t.const_zero(), ""))?;
        let w0 = self.ctx.append_basic_block(f, "warp_leader");
        let w0_done = self.ctx.append_basic_block(f, "warp_leader_done");
        e(self.b.build_conditional_branch(is_lane0, w0, w0_done))?;
        self.b.position_at_end(w0);
        e(self.b.build_store(slot(warp)?, v))?;
        e(self.b.build_unconditional_branch(w0_done))?;
        self.b.position_at_end(w0_done);
        self.call_void("llvm.nvvm.barrier0", &[])?;
        let first = self.ctx.append_basic_block(f, "first_warp");
        let first_done = self.ctx.append_basic_block(f, "first_warp_done");
        let is_w0 = e(self.b.build_int_compare(IntPredicate::EQ, warp, i64t.const_zero(), ""))?;
        e(self.b.build_conditional_branch(is_w0, first, first_done))?;
        self.b.position_at_end(first);
        let in_range = e(self.b.build_int_compare(IntPredicate::ULT, lane, i64t.const_int(n_warps, false), ""))?;
        let safe_lane = e(self.b.build_select(in_range, lane, i64t.const_zero(), ""))?.into_int_value();
        let x = e(self.b.build_load(f32t, slot(safe_lane)?, ""))?.into_float_value();
        let x = self.select_f(in_range, x, self.f32c(op.identity() as f64))?;
        let x = self.warp_reduce(op, x)?;
        let st_bb = self.ctx.append_basic_block(f, "store_total");
        e(self.b.build_conditional_branch(is_lane0, st_bb, first_done))?;
        self.b.position_at_end(st_bb);
        e(self.b.build_store(slot(i64t.const_int(32, false))?, x))?;
        e(self.b.build_unconditional_branch(first_done))?;
        self.b.position_at_end(first_done);
        self.call_void("llvm.nvvm.barrier0", &[])?;
        let total = e(self.b.build_load(f32t, slot(i64t.const_int(32, false))?, "total"))?.into_float_value();
        // The scratch is reused by the next reduction: everyone reads `total` first.
        self.call_void("llvm.nvvm.barrier0", &[])?;
        Ok(total)
    }

    /// Combines `v` over the row groups of a column reduction (Note [column reductions]): thread
    /// `t` holds column `t % cols`. Warp shuffles combine lanes `cols` apart; each warp's first
    /// `cols` lanes write their column's partial to `smem[warp * cols + c]`; the first warp folds
    /// the slots (each lane a share of them, then shuffles again), so that its lanes hold their
    /// column's total, the first `cols` of them the ones that store it. With `broadcast` (a later
    /// loop reads the value) the totals go through `smem[n_slots + c]` to every thread; without,
    /// only the first warp's value is right.
    #[allow(clippy::too_many_arguments)]
    fn column_reduce(&self, op: ReduceOp, v: FloatValue<'ctx>, smem: PointerValue<'ctx>, block: u32, cols: u32, lane: IntValue<'ctx>, warp: IntValue<'ctx>, col: IntValue<'ctx>, broadcast: bool) -> Result<FloatValue<'ctx>, CodegenError> {
        let i32t = self.ctx.i32_type();
        let i64t = self.ctx.i64_type();
        let f32t = self.ctx.f32_type();
        let shuffles = |mut v: FloatValue<'ctx>| -> Result<FloatValue<'ctx>, CodegenError> {
            let mut off = 16u64;
            while off >= cols as u64 {
                let o = self
                    .call(
                        "llvm.nvvm.shfl.sync.bfly.f32",
                        f32t.into(),
                        &[i32t.const_int(0xffff_ffff, false).into(), v.into(), i32t.const_int(off, false).into(), i32t.const_int(0x1f, false).into()],
                    )?
                    .into_float_value();
                v = self.combine(op, v, o)?;
                off /= 2;
            }
            Ok(v)
        };
        let v = shuffles(v)?;
        let n_warps = (block / 32) as u64;
        if n_warps <= 1 {
            return Ok(v);
        }
        let f = self.b.get_insert_block().and_then(|bb| bb.get_parent()).ok_or_else(|| bad("no function"))?;
        let n_slots = n_warps * cols as u64;
        let arr = f32t.array_type(column_smem(block, cols));
        let slot = |i: IntValue<'ctx>| -> Result<PointerValue<'ctx>, CodegenError> {
            // SAFETY (of the IR): indices stay below n_slots + cols, the array's length.
            unsafe { e(self.b.build_in_bounds_gep(arr, smem, &[i64t.const_zero(), i], "")) }
        };
        let lead = e(self.b.build_int_compare(IntPredicate::ULT, lane, i64t.const_int(cols as u64, false), ""))?;
        let st_bb = self.ctx.append_basic_block(f, "col_partial");
        let st_done = self.ctx.append_basic_block(f, "col_partial_done");
        e(self.b.build_conditional_branch(lead, st_bb, st_done))?;
        self.b.position_at_end(st_bb);
        let mine = e(self.b.build_int_nuw_add(e(self.b.build_int_nuw_mul(warp, i64t.const_int(cols as u64, false), ""))?, col, ""))?;
        e(self.b.build_store(slot(mine)?, v))?;
        e(self.b.build_unconditional_branch(st_done))?;
        self.b.position_at_end(st_done);
        self.call_void("llvm.nvvm.barrier0", &[])?;
        // The first warp: lane l folds slots l, l + 32, ... (all of column l % cols).
        let pre = self.b.get_insert_block().expect("block");
        let w0 = self.ctx.append_basic_block(f, "col_first_warp");
        let w0_done = self.ctx.append_basic_block(f, "col_first_warp_done");
        let is_w0 = e(self.b.build_int_compare(IntPredicate::EQ, warp, i64t.const_zero(), ""))?;
        e(self.b.build_conditional_branch(is_w0, w0, w0_done))?;
        self.b.position_at_end(w0);
        let mut x: Option<FloatValue> = None;
        for j in 0..n_slots.div_ceil(32) {
            let i = e(self.b.build_int_nuw_add(lane, i64t.const_int(32 * j, false), ""))?;
            let y = if 32 * (j + 1) <= n_slots {
                e(self.b.build_load(f32t, slot(i)?, ""))?.into_float_value()
            } else {
                let ok = e(self.b.build_int_compare(IntPredicate::ULT, i, i64t.const_int(n_slots, false), ""))?;
                let safe = e(self.b.build_select(ok, i, i64t.const_zero(), ""))?.into_int_value();
                let y = e(self.b.build_load(f32t, slot(safe)?, ""))?.into_float_value();
                self.select_f(ok, y, self.f32c(op.identity() as f64))?
            };
            x = Some(match x {
                Some(a) => self.combine(op, a, y)?,
                None => y,
            });
        }
        let x = shuffles(x.ok_or_else(|| bad("a column reduction without slots"))?)?;
        if broadcast {
            let tb = self.ctx.append_basic_block(f, "col_total");
            let tb_done = self.ctx.append_basic_block(f, "col_total_done");
            e(self.b.build_conditional_branch(lead, tb, tb_done))?;
            self.b.position_at_end(tb);
            let at = e(self.b.build_int_nuw_add(col, i64t.const_int(n_slots, false), ""))?;
            e(self.b.build_store(slot(at)?, x))?;
            e(self.b.build_unconditional_branch(tb_done))?;
            self.b.position_at_end(tb_done);
        }
        let w0_end = self.b.get_insert_block().expect("block");
        e(self.b.build_unconditional_branch(w0_done))?;
        self.b.position_at_end(w0_done);
        let total = e(self.b.build_phi(f32t, "col_total"))?;
        total.add_incoming(&[(&x, w0_end), (&self.f32c(op.identity() as f64), pre)]);
        // The first warp has read every slot before anyone writes the next reduction's.
        self.call_void("llvm.nvvm.barrier0", &[])?;
        if broadcast {
            let at = e(self.b.build_int_nuw_add(col, i64t.const_int(n_slots, false), ""))?;
            return Ok(e(self.b.build_load(f32t, slot(at)?, ""))?.into_float_value());
        }
        Ok(total.as_basic_value().into_float_value())
    }

    /// A reduction kernel: one block per output point, or per group of output points (Note
    /// [column reductions]); see the module docs.
    fn reduction(&mut self, k: &Kernel, name: &str, vec: u32) -> Result<Launch, CodegenError> {
        let f = self.new_entry(k, name);
        let lanes = vec as usize;
        let i64t = self.ctx.i64_type();
        let f32t = self.ctx.f32_type();
        let n_outer = k.ranges.len();
        let rows = k.numel();
        let r_total: i64 = k.reduction_ranges.iter().product();
        let launch = launch_of(k, name, vec);
        let block = launch.block;
        // Note [column reductions]: with a plan, "row" below is the thread's output point, the
        // block loops over groups of `cols` of them, and the reduction is split over row groups.
        let col_plan = column_plan(k);
        let smem = match col_plan {
            Some(p) => {
                if let Some(last) = self.annotations.last_mut() {
                    last.1 = Some(block);
                }
                self.smem(name, column_smem(block, p.cols))
            }
            None => self.smem(name, 33),
        };
        let inner = k.inner_exprs();
        let phase = k.phases();
        // Loops: loop p accumulates the reductions whose operand has phase p and runs the stores
        // whose index moves along the reduction and whose value has phase p.
        let red_dims = |idx: &Index| idx.strides[n_outer..].iter().any(|s| *s != 0);
        let mut n_loops = 0usize;
        for (i, ex) in k.exprs.iter().enumerate() {
            if let Expr::Reduce(_, a) = ex {
                n_loops = n_loops.max(phase[a.0 as usize] + 1);
                let _ = i;
            }
        }
        for s in &k.stores {
            if red_dims(&s.index) {
                n_loops = n_loops.max(phase[s.value.0 as usize] + 1);
            }
        }
        let ptrs: Vec<PointerValue> = (0..k.args.len()).map(|i| f.get_nth_param(i as u32).expect("param").into_pointer_value()).collect();

        // Rows: grid-stride loop.
        let entry = self.ctx.append_basic_block(f, "entry");
        let row_bb = self.ctx.append_basic_block(f, "row");
        let exit = self.ctx.append_basic_block(f, "exit");
        self.b.position_at_end(entry);
        let tid = self.sreg("tid.x")?;
        let ctaid = self.sreg("ctaid.x")?;
        let nctaid = self.sreg("nctaid.x")?;
        let lane = e(self.b.build_and(tid, i64t.const_int(31, false), "lane"))?;
        let warp = e(self.b.build_right_shift(tid, i64t.const_int(5, false), false, "warp"))?;
        // Column plans: the thread's column in its block's group and its row group.
        let (col, group) = match col_plan {
            Some(p) => (
                e(self.b.build_and(tid, i64t.const_int(p.cols as u64 - 1, false), "col"))?,
                e(self.b.build_right_shift(tid, i64t.const_int(p.cols.trailing_zeros() as u64, false), false, "group"))?,
            ),
            None => (i64t.const_zero(), tid),
        };
        // Iterations of the block loop: rows, or groups of columns.
        let block_iters = match col_plan {
            Some(p) => (rows + p.cols as i64 - 1) / p.cols as i64,
            None => rows,
        };
        let rows_v = i64t.const_int(block_iters as u64, false);
        let c = e(self.b.build_int_compare(IntPredicate::ULT, ctaid, rows_v, ""))?;
        e(self.b.build_conditional_branch(c, row_bb, exit))?;
        self.b.position_at_end(row_bb);
        let row_phi = e(self.b.build_phi(i64t, "row"))?;
        row_phi.add_incoming(&[(&ctaid, entry)]);
        let block_row = row_phi.as_basic_value().into_int_value();
        // The output point this thread computes; a column past the end (the last group of a
        // width not a multiple of `cols`) computes the last one again: it skips the stores of
        // the reductions' values, and its stores along the reduction write the same values as
        // the thread of the last column (same loads, same operations), to the same places.
        let (row, in_range) = match col_plan {
            Some(p) => {
                let o = e(self.b.build_int_nuw_add(e(self.b.build_int_nuw_mul(block_row, i64t.const_int(p.cols as u64, false), ""))?, col, ""))?;
                let ok = e(self.b.build_int_compare(IntPredicate::ULT, o, i64t.const_int(rows as u64, false), ""))?;
                let o = e(self.b.build_select(ok, o, i64t.const_int(rows.max(1) as u64 - 1, false), ""))?.into_int_value();
                (o, Some(ok))
            }
            None => (block_row, None),
        };
        let outer_idx = self.unflatten(row, &k.ranges)?;
        let outer_dims: Vec<(usize, IntValue)> = outer_idx.iter().copied().enumerate().collect();

        // Row-scope values: expressions not varying along the reduction, computed once per row
        // as soon as the reductions they read are done.
        let mut row_vals: HashMap<usize, BasicValueEnum> = HashMap::new();
        let reduce_vals: HashMap<usize, FloatValue> = HashMap::new();
        let mut reduce_vals = reduce_vals;
        let compute_row = |g: &Gen<'ctx, '_>, upto_phase: usize, row_vals: &mut HashMap<usize, BasicValueEnum<'ctx>>, reduce_vals: &HashMap<usize, FloatValue<'ctx>>| -> Result<(), CodegenError> {
            for (i, ex) in k.exprs.iter().enumerate() {
                if inner[i] || phase[i] > upto_phase || row_vals.contains_key(&i) {
                    continue;
                }
                let v = match ex {
                    Expr::Reduce(..) => match reduce_vals.get(&i) {
                        Some(v) => (*v).into(),
                        None => continue,
                    },
                    Expr::Load { arg, index } => {
                        let dt = k.args[*arg as usize].dtype;
                        let off = g.linear(index, &outer_dims, true)?;
                        let ptr = g.gep(dt, ptrs[*arg as usize], off)?;
                        let raw = e(g.b.build_load(storage_type(g.ctx, dt), ptr, ""))?;
                        g.from_storage(dt, raw)?
                    }
                    Expr::InRange { index, size } => g.in_range(index, *size, &outer_dims)?.into(),
                    Expr::MaskedLoad { arg, index, mask } => {
                        let dt = k.args[*arg as usize].dtype;
                        let m = row_vals[&(mask.0 as usize)].into_int_value();
                        g.masked_load(dt, ptrs[*arg as usize], index, &outer_dims, m, 1)?[0]
                    }
                    other => {
                        let rv = &*row_vals;
                        g.op(k, other, &|id: ExprId| rv[&(id.0 as usize)])?
                    }
                };
                row_vals.insert(i, v);
            }
            Ok(())
        };
        compute_row(self, 0, &mut row_vals, &reduce_vals)?;
        // Note [persistent rows]: when each thread's share of a row is a few exact sweeps, the
        // loops are unrolled and every inner value (loads first) is kept in registers from one
        // phase to the next: softmax and layer_norm read their row from memory once instead of
        // once per phase, and each thread has all its loads of a phase in flight at once.
        let sweep = match col_plan {
            Some(p) => p.groups as i64,
            None => block as i64 * vec as i64,
        };
        let unroll = if col_plan.is_some() { column_tuning().2 } else { 1 };
        let persistent = (r_total > 0 && r_total % sweep == 0 && r_total / sweep <= MAX_PERSISTENT_SWEEPS).then_some(r_total / sweep);
        let mut kept: Vec<(Vec<(usize, IntValue)>, Vec<HashMap<usize, BasicValueEnum>>, HashMap<usize, BasicValueEnum>)> = Vec::new();
        // The thread's first reduction index.
        let r0 = e(self.b.build_int_nuw_mul(group, i64t.const_int(vec as u64, false), "r0"))?;
        if let Some(sweeps) = persistent {
            for it in 0..sweeps {
                let r = e(self.b.build_int_nuw_add(r0, i64t.const_int((it * sweep) as u64, false), ""))?;
                let ridx = self.unflatten(r, &k.reduction_ranges)?;
                let mut dims = outer_dims.clone();
                dims.extend(ridx.iter().enumerate().map(|(j, v)| (n_outer + j, *v)));
                kept.push((dims, vec![HashMap::new(); lanes], HashMap::new()));
            }
        }
        for p in 0..n_loops {
            let reds: Vec<(usize, ReduceOp, ExprId)> = k
                .exprs
                .iter()
                .enumerate()
                .filter_map(|(i, ex)| match ex {
                    Expr::Reduce(op, a) if phase[a.0 as usize] == p => Some((i, *op, *a)),
                    _ => None,
                })
                .collect();
            let stores: Vec<&crate::kernel::Store> =
                k.stores.iter().filter(|s| red_dims(&s.index) && phase[s.value.0 as usize] == p).collect();
            let accs: Vec<FloatValue> = if persistent.is_some() {
                let mut accs: Vec<FloatValue> = reds.iter().map(|(_, op, _)| self.f32c(op.identity() as f64)).collect();
                for (dims, it_vals, vloads) in kept.iter_mut() {
                    let cx = Ctx { inner: &inner, row_vals: &row_vals, ptrs: &ptrs, dims, lanes };
                    accs = self.iteration(k, &cx, it_vals, vloads, &reds, accs, &stores)?;
                }
                accs
            } else {
                let identities: Vec<FloatValue> = reds.iter().map(|(_, op, _)| self.f32c(op.identity() as f64)).collect();
                let (r_start, accs_start) = if unroll > 1 && lanes == 1 && r_total >= sweep * unroll {
                    self.unrolled_loop(k, f, p, UnrolledLoop { r0, sweep, unroll, r_total, outer_dims: &outer_dims }, &inner, &row_vals, &ptrs, &reds, identities, &stores)?
                } else {
                    (r0, identities)
                };
                let pre = self.b.get_insert_block().expect("block");
                let body = self.ctx.append_basic_block(f, &format!("loop{p}"));
                let done = self.ctx.append_basic_block(f, &format!("loop{p}_done"));
                let any = e(self.b.build_int_compare(IntPredicate::ULT, r_start, i64t.const_int(r_total as u64, false), ""))?;
                e(self.b.build_conditional_branch(any, body, done))?;
                self.b.position_at_end(body);
                let r_phi = e(self.b.build_phi(i64t, "r"))?;
                r_phi.add_incoming(&[(&r_start, pre)]);
                let r = r_phi.as_basic_value().into_int_value();
                let mut acc_phis = Vec::new();
                for a in &accs_start {
                    let ph = e(self.b.build_phi(f32t, "acc"))?;
                    ph.add_incoming(&[(a, pre)]);
                    acc_phis.push(ph);
                }
                let ridx = self.unflatten(r, &k.reduction_ranges)?;
                let mut all_dims = outer_dims.clone();
                all_dims.extend(ridx.iter().enumerate().map(|(j, v)| (n_outer + j, *v)));
                let mut it_vals: Vec<HashMap<usize, BasicValueEnum>> = vec![HashMap::new(); lanes];
                let mut vloads: HashMap<usize, BasicValueEnum> = HashMap::new();
                let cx = Ctx { inner: &inner, row_vals: &row_vals, ptrs: &ptrs, dims: &all_dims, lanes };
                let accs_in: Vec<FloatValue> = acc_phis.iter().map(|ph| ph.as_basic_value().into_float_value()).collect();
                let new_accs = self.iteration(k, &cx, &mut it_vals, &mut vloads, &reds, accs_in, &stores)?;
                let body_end = self.b.get_insert_block().expect("block");
                let r_next = e(self.b.build_int_nuw_add(r, i64t.const_int(sweep as u64, false), ""))?;
                r_phi.add_incoming(&[(&r_next, body_end)]);
                for (ph, nv) in acc_phis.iter().zip(&new_accs) {
                    ph.add_incoming(&[(nv, body_end)]);
                }
                let more = e(self.b.build_int_compare(IntPredicate::ULT, r_next, i64t.const_int(r_total as u64, false), ""))?;
                e(self.b.build_conditional_branch(more, body, done))?;
                self.b.position_at_end(done);
                // Every phi first (they must head the block), then the block-wide combines.
                let mut outs = Vec::new();
                for (a, nv) in accs_start.iter().zip(&new_accs) {
                    let out = e(self.b.build_phi(f32t, "acc_out"))?;
                    out.add_incoming(&[(a, pre), (nv, body_end)]);
                    outs.push(out.as_basic_value().into_float_value());
                }
                outs
            };
            for ((i, op, _), acc) in reds.iter().zip(accs) {
                let total = match col_plan {
                    Some(cp) => self.column_reduce(*op, acc, smem, block, cp.cols, lane, warp, col, p + 1 < n_loops)?,
                    None => self.block_reduce(f, *op, acc, smem, block, lane, warp)?,
                };
                reduce_vals.insert(*i, total);
            }
            compute_row(self, p + 1, &mut row_vals, &reduce_vals)?;
        }
        // Stores of row values, by thread 0.
        let outer_stores: Vec<_> = k.stores.iter().filter(|s| !red_dims(&s.index)).collect();
        if !outer_stores.is_empty() {
            compute_row(self, usize::MAX, &mut row_vals, &reduce_vals)?;
            let st_bb = self.ctx.append_basic_block(f, "row_store");
            let st_done = self.ctx.append_basic_block(f, "row_store_done");
            // Thread 0 of the row, or of each column (the first row group, columns in range).
            let mut t0 = e(self.b.build_int_compare(IntPredicate::EQ, group, i64t.const_zero(), ""))?;
            if let Some(ok) = in_range {
                t0 = e(self.b.build_and(t0, ok, ""))?;
            }
            e(self.b.build_conditional_branch(t0, st_bb, st_done))?;
            self.b.position_at_end(st_bb);
            for s in outer_stores {
                let dt = k.args[s.arg as usize].dtype;
                let v = *row_vals.get(&(s.value.0 as usize)).ok_or_else(|| bad("row store of an unknown value"))?;
                let off = self.linear(&s.index, &outer_dims, true)?;
                let ptr = self.gep(dt, ptrs[s.arg as usize], off)?;
                let x = self.to_storage(dt, v)?;
                e(self.b.build_store(ptr, x))?;
            }
            e(self.b.build_unconditional_branch(st_done))?;
            self.b.position_at_end(st_done);
        }
        let cur = self.b.get_insert_block().expect("block");
        let next = e(self.b.build_int_nuw_add(block_row, nctaid, ""))?;
        row_phi.add_incoming(&[(&next, cur)]);
        let more = e(self.b.build_int_compare(IntPredicate::ULT, next, rows_v, ""))?;
        e(self.b.build_conditional_branch(more, row_bb, exit))?;
        self.b.position_at_end(exit);
        e(self.b.build_return(None))?;
        Ok(launch)
    }

    /// The unrolled part of reduction loop `p` (Note [column reductions]): while all of
    /// `r, r + sweep, ..., r + (unroll - 1) * sweep` are below `r_total`, folds them into the
    /// accumulators and runs `stores` (every inner load of the `unroll` iterations emitted
    /// first, so that they are in flight together). Returns the first index left and the accumulators, for the loop
    /// that finishes the rest one sweep at a time.
    #[allow(clippy::too_many_arguments)]
    fn unrolled_loop(
        &self,
        k: &Kernel,
        f: FunctionValue<'ctx>,
        p: usize,
        lp: UnrolledLoop<'_, 'ctx>,
        inner: &[bool],
        row_vals: &HashMap<usize, BasicValueEnum<'ctx>>,
        ptrs: &[PointerValue<'ctx>],
        reds: &[(usize, ReduceOp, ExprId)],
        accs: Vec<FloatValue<'ctx>>,
        stores: &[&crate::kernel::Store],
    ) -> Result<(IntValue<'ctx>, Vec<FloatValue<'ctx>>), CodegenError> {
        let i64t = self.ctx.i64_type();
        let f32t = self.ctx.f32_type();
        let n_outer = k.ranges.len();
        let pre = self.b.get_insert_block().expect("block");
        let body = self.ctx.append_basic_block(f, &format!("loop{p}_unrolled"));
        let done = self.ctx.append_basic_block(f, &format!("loop{p}_unrolled_done"));
        // r + (unroll - 1) * sweep < r_total  <=>  r < lim
        let lim = i64t.const_int((lp.r_total - (lp.unroll - 1) * lp.sweep) as u64, false);
        let any = e(self.b.build_int_compare(IntPredicate::ULT, lp.r0, lim, ""))?;
        e(self.b.build_conditional_branch(any, body, done))?;
        self.b.position_at_end(body);
        let r_phi = e(self.b.build_phi(i64t, "r"))?;
        r_phi.add_incoming(&[(&lp.r0, pre)]);
        let r = r_phi.as_basic_value().into_int_value();
        let mut acc_phis = Vec::new();
        for a in &accs {
            let ph = e(self.b.build_phi(f32t, "acc"))?;
            ph.add_incoming(&[(a, pre)]);
            acc_phis.push(ph);
        }
        let mut iters = Vec::new();
        for u in 0..lp.unroll {
            let ru = e(self.b.build_int_nuw_add(r, i64t.const_int((u * lp.sweep) as u64, false), ""))?;
            let ridx = self.unflatten(ru, &k.reduction_ranges)?;
            let mut dims = lp.outer_dims.to_vec();
            dims.extend(ridx.iter().enumerate().map(|(j, v)| (n_outer + j, *v)));
            let mut it_vals: Vec<HashMap<usize, BasicValueEnum>> = vec![HashMap::new(); 1];
            let mut vloads: HashMap<usize, BasicValueEnum> = HashMap::new();
            {
                let cx = Ctx { inner, row_vals, ptrs, dims: &dims, lanes: 1 };
                for (i, ex) in k.exprs.iter().enumerate() {
                    if inner[i] && matches!(ex, Expr::Load { .. }) {
                        eval(self, k, i, &cx, 0, &mut it_vals[0], &mut vloads)?;
                    }
                }
            }
            iters.push((dims, it_vals, vloads));
        }
        let mut cur: Vec<FloatValue> = acc_phis.iter().map(|ph| ph.as_basic_value().into_float_value()).collect();
        for (dims, it_vals, vloads) in iters.iter_mut() {
            let cx = Ctx { inner, row_vals, ptrs, dims, lanes: 1 };
            cur = self.iteration(k, &cx, it_vals, vloads, reds, cur, stores)?;
        }
        let body_end = self.b.get_insert_block().expect("block");
        let r_next = e(self.b.build_int_nuw_add(r, i64t.const_int((lp.unroll * lp.sweep) as u64, false), ""))?;
        r_phi.add_incoming(&[(&r_next, body_end)]);
        for (ph, nv) in acc_phis.iter().zip(&cur) {
            ph.add_incoming(&[(nv, body_end)]);
        }
        let more = e(self.b.build_int_compare(IntPredicate::ULT, r_next, lim, ""))?;
        e(self.b.build_conditional_branch(more, body, done))?;
        self.b.position_at_end(done);
        let r_out = e(self.b.build_phi(i64t, "r_left"))?;
        r_out.add_incoming(&[(&lp.r0, pre), (&r_next, body_end)]);
        let mut outs = Vec::new();
        for (a, nv) in accs.iter().zip(&cur) {
            let out = e(self.b.build_phi(f32t, "acc_unrolled"))?;
            out.add_incoming(&[(a, pre), (nv, body_end)]);
            outs.push(out.as_basic_value().into_float_value());
        }
        Ok((r_out.as_basic_value().into_int_value(), outs))
    }

    /// One iteration of a reduction loop (one sweep of the block over `lanes` consecutive
    /// elements a thread): folds the values of `reds` into `accs` and runs `stores`.
    #[allow(clippy::too_many_arguments)]
    fn iteration(
        &self,
        k: &Kernel,
        cx: &Ctx<'_, 'ctx>,
        it_vals: &mut [HashMap<usize, BasicValueEnum<'ctx>>],
        vloads: &mut HashMap<usize, BasicValueEnum<'ctx>>,
        reds: &[(usize, ReduceOp, ExprId)],
        accs: Vec<FloatValue<'ctx>>,
        stores: &[&crate::kernel::Store],
    ) -> Result<Vec<FloatValue<'ctx>>, CodegenError> {
        let i64t = self.ctx.i64_type();
        let mut out = Vec::with_capacity(accs.len());
        for ((_, op, a), acc) in reds.iter().zip(accs) {
            let mut acc = acc;
            for (lane, iv) in it_vals.iter_mut().enumerate() {
                let x = eval(self, k, a.0 as usize, cx, lane, iv, vloads)?.into_float_value();
                acc = self.combine(*op, acc, x)?;
            }
            out.push(acc);
        }
        for s in stores {
            let dt = k.args[s.arg as usize].dtype;
            let off = self.linear(&s.index, cx.dims, true)?;
            let ptr = self.gep(dt, cx.ptrs[s.arg as usize], off)?;
            if cx.lanes > 1 {
                let vt = storage_type(self.ctx, dt).vec_type_of(cx.lanes as u32)?;
                let mut vv = vt.get_undef();
                for (lane, iv) in it_vals.iter_mut().enumerate() {
                    let v = eval(self, k, s.value.0 as usize, cx, lane, iv, vloads)?;
                    let x = self.to_storage(dt, v)?;
                    vv = e(self.b.build_insert_element(vv, x, i64t.const_int(lane as u64, false), ""))?;
                }
                let st = e(self.b.build_store(ptr, vv))?;
                st.set_alignment(16).map_err(|m| bad(m.to_string()))?;
            } else {
                let v = eval(self, k, s.value.0 as usize, cx, 0, &mut it_vals[0], vloads)?;
                let x = self.to_storage(dt, v)?;
                e(self.b.build_store(ptr, x))?;
            }
        }
        Ok(out)
    }

    /// Writes `!nvvm.annotations`: every entry is a kernel.
    fn finish(&mut self) {
        let i32t = self.ctx.i32_type();
        for (f, max_threads) in &self.annotations {
            let md = self.ctx.metadata_node(&[
                f.as_global_value().as_pointer_value().into(),
                self.ctx.metadata_string("kernel").into(),
                i32t.const_int(1, false).into(),
            ]);
            let _ = self.module.add_global_metadata("nvvm.annotations", &md);
            if let Some(n) = max_threads {
                let md = self.ctx.metadata_node(&[
                    f.as_global_value().as_pointer_value().into(),
                    self.ctx.metadata_string("maxntidx").into(),
                    i32t.const_int(*n as u64, false).into(),
                ]);
                let _ = self.module.add_global_metadata("nvvm.annotations", &md);
            }
        }
    }
}

/// The shape of [`Gen::unrolled_loop`]: the thread's first reduction index, the step between
/// its indices, how many a loop iteration folds, the reduction's size, and the output point's
/// loop variables.
struct UnrolledLoop<'a, 'ctx> {
    r0: IntValue<'ctx>,
    sweep: i64,
    unroll: i64,
    r_total: i64,
    outer_dims: &'a [(usize, IntValue<'ctx>)],
}

/// What [`eval`] reads: which expressions vary along the reduction, the row's values, the
/// argument pointers, the loop variables of this iteration, and the lanes a thread handles.
struct Ctx<'a, 'ctx> {
    inner: &'a [bool],
    row_vals: &'a HashMap<usize, BasicValueEnum<'ctx>>,
    ptrs: &'a [PointerValue<'ctx>],
    dims: &'a [(usize, IntValue<'ctx>)],
    lanes: usize,
}

/// The value of expression `i` at `lane` of the current iteration, emitted on first use
/// (memoized in `it_vals`; with several lanes, each inner load is one vector load in `vloads`).
fn eval<'ctx>(
    g: &Gen<'ctx, '_>,
    k: &Kernel,
    i: usize,
    c: &Ctx<'_, 'ctx>,
    lane: usize,
    it_vals: &mut HashMap<usize, BasicValueEnum<'ctx>>,
    vloads: &mut HashMap<usize, BasicValueEnum<'ctx>>,
) -> Result<BasicValueEnum<'ctx>, CodegenError> {
    let (inner, row_vals, ptrs, dims) = (c.inner, c.row_vals, c.ptrs, c.dims);
    if !inner[i] {
        return row_vals.get(&i).copied().ok_or_else(|| bad(format!("%{i} used before its reductions finished")));
    }
    if let Some(v) = it_vals.get(&i) {
        return Ok(*v);
    }
    let ex = &k.exprs[i];
    let v = match ex {
        Expr::Load { arg, index } => {
            let dt = k.args[*arg as usize].dtype;
            if c.lanes > 1 {
                let raw = match vloads.get(&i) {
                    Some(v) => *v,
                    None => {
                        let off = g.linear(index, dims, true)?;
                        let ptr = g.gep(dt, ptrs[*arg as usize], off)?;
                        let vt = storage_type(g.ctx, dt).vec_type_of(c.lanes as u32)?;
                        let raw = e(g.b.build_load(vt, ptr, ""))?;
                        raw.as_instruction_value().expect("load").set_alignment(16).map_err(|m| bad(m.to_string()))?;
                        vloads.insert(i, raw);
                        raw
                    }
                };
                let x = e(g.b.build_extract_element(raw.into_vector_value(), g.ctx.i64_type().const_int(lane as u64, false), ""))?;
                g.from_storage(dt, x)?
            } else {
                let off = g.linear(index, dims, true)?;
                let ptr = g.gep(dt, ptrs[*arg as usize], off)?;
                let raw = e(g.b.build_load(storage_type(g.ctx, dt), ptr, ""))?;
                g.from_storage(dt, raw)?
            }
        }
        Expr::InRange { index, size } => g.in_range(index, *size, dims)?.into(),
        Expr::MaskedLoad { arg, index, mask } => {
            // Masked reductions run one lane a thread (`reduction_vec`).
            let m = eval(g, k, mask.0 as usize, c, lane, it_vals, vloads)?.into_int_value();
            let dt = k.args[*arg as usize].dtype;
            g.masked_load(dt, ptrs[*arg as usize], index, dims, m, 1)?[0]
        }
        other => {
            let mut ops: Vec<usize> = Vec::new();
            match other {
                Expr::Unary(_, a) | Expr::Cast(_, a) => ops.push(a.0 as usize),
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => ops.extend([a.0 as usize, b.0 as usize]),
                Expr::Select(c, a, b) => ops.extend([c.0 as usize, a.0 as usize, b.0 as usize]),
                _ => {}
            }
            for o in ops {
                eval(g, k, o, c, lane, it_vals, vloads)?;
            }
            let iv = &*it_vals;
            g.op(k, other, &|id: ExprId| {
                let j = id.0 as usize;
                if inner[j] {
                    iv[&j]
                } else {
                    row_vals[&j]
                }
            })?
        }
    };
    it_vals.insert(i, v);
    Ok(v)
}

/// Vector type of `n` lanes of a basic type (only scalar float/int types are asked for).
trait VecTypeOf<'ctx> {
    fn vec_type_of(&self, n: u32) -> Result<inkwell::types::VectorType<'ctx>, CodegenError>;
}

impl<'ctx> VecTypeOf<'ctx> for BasicTypeEnum<'ctx> {
    fn vec_type_of(&self, n: u32) -> Result<inkwell::types::VectorType<'ctx>, CodegenError> {
        match self {
            BasicTypeEnum::FloatType(t) => Ok(t.vec_type(n)),
            BasicTypeEnum::IntType(t) => Ok(t.vec_type(n)),
            other => Err(bad(format!("no vector of {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KernelBuilder;

    fn relu_add() -> Kernel {
        let mut b = KernelBuilder::new("pw", vec![64, 128]);
        let x = b.input("x", DType::F32);
        let y = b.input("y", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![128, 1] });
        let ly = b.load(y, Index { offset: 0, strides: vec![0, 1] });
        let s = b.binary(BinaryOp::Add, lx, ly);
        let r = b.unary(UnaryOp::Relu, s);
        b.store(o, Index { offset: 0, strides: vec![128, 1] }, r);
        b.finish().unwrap()
    }

    /// Batch norm + ReLU over a channels-last [2, 64, 7x8] activation written as NCHW: the
    /// input is unit-stride along C, the output along H*W (Note [tiled transposes]).
    fn nhwc_to_nchw_bn_relu(hw: i64) -> Kernel {
        let mut b = KernelBuilder::new("bn", vec![2, 64, hw]);
        let x = b.input("x", DType::F32);
        let scale = b.input("scale", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![hw * 64, 1, 64] });
        let ls = b.load(scale, Index { offset: 0, strides: vec![0, 1, 0] });
        let m = b.binary(BinaryOp::Mul, lx, ls);
        let r = b.unary(UnaryOp::Relu, m);
        b.store(o, Index { offset: 0, strides: vec![64 * hw, hw, 1] }, r);
        b.finish().unwrap()
    }

    #[test]
    fn layout_changes_run_as_shared_memory_tiles() {
        let k = legalize(&nhwc_to_nchw_bn_relu(56));
        let plan = transpose_plan(&k).expect("a tiled transpose");
        assert_eq!(plan, TransposePlan { staged: vec![0], outer: 2, tiles_a: 2, tiles_b: 2 });
        let m = compile_ptx(&[nhwc_to_nchw_bn_relu(56)], "sm_90").unwrap();
        let pk = &m.kernels[0];
        assert_eq!(pk.launch, Launch { entry: "bn".into(), grid: 8, block: TRANSPOSE_BLOCK });
        assert_eq!(pk.unaligned, None);
        assert!(m.ptx.contains(".shared .align 16 .b8 bn_tile0[4224]"), "{}", m.ptx);
        assert_eq!(m.ptx.matches("bar.sync").count(), 2, "{}", m.ptx);
        assert!(m.ptx.contains(".maxntid 256"), "{}", m.ptx);
        // The channel scale is not staged: it is broadcast along the output's dim.
        assert!(!m.ptx.contains("bn_tile1"), "{}", m.ptx);
        // Small layout changes keep one thread per point (legalize does not tile them).
        assert_eq!(transpose_plan(&legalize(&nhwc_to_nchw_bn_relu(8))), None);
    }

    fn softmax() -> Kernel {
        let mut b = KernelBuilder::new_reduction("softmax", vec![32], vec![1000]);
        let x = b.input("x", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![1000, 1] });
        let m = b.reduce(ReduceOp::Max, lx);
        let d = b.binary(BinaryOp::Sub, lx, m);
        let ex = b.unary(UnaryOp::Exp, d);
        let s = b.reduce(ReduceOp::Sum, ex);
        let q = b.binary(BinaryOp::Div, ex, s);
        b.store(o, Index { offset: 0, strides: vec![1000, 1] }, q);
        b.finish().unwrap()
    }

    #[test]
    fn pointwise_is_vectorized_with_scalar_twin() {
        let m = compile_ptx(&[relu_add()], "sm_90").unwrap();
        let k = &m.kernels[0];
        assert_eq!(k.launch, Launch { entry: "pw".into(), grid: 8, block: 256 });
        assert_eq!(k.unaligned.as_ref().unwrap().entry, "pw_s");
        assert!(m.ptx.contains(".visible .entry pw("), "{}", m.ptx);
        assert!(m.ptx.contains("ld.global.nc.v4.f32"), "{}", m.ptx);
        assert!(m.ptx.contains("st.global.v4.f32"), "{}", m.ptx);
        insta::assert_snapshot!("nvptx_relu_add", m.ptx);
    }

    #[test]
    fn softmax_uses_shuffles_and_one_block_per_row() {
        let m = compile_ptx(&[softmax()], "sm_90").unwrap();
        let k = &m.kernels[0];
        assert_eq!(k.launch, Launch { entry: "softmax".into(), grid: 32, block: 64 });
        assert_eq!(k.unaligned, Some(Launch { entry: "softmax_s".into(), grid: 32, block: 256 }));
        assert!(m.ptx.contains("shfl.sync.bfly.b32"), "{}", m.ptx);
        assert!(m.ptx.contains("bar.sync"), "{}", m.ptx);
        assert!(!m.ptx.contains("call"), "no calls: math is inline\n{}", m.ptx);
    }

    #[test]
    fn contiguous_rows_reduce_with_vector_loads() {
        let mut b = KernelBuilder::new_reduction("rowsum", vec![16], vec![4096]);
        let x = b.input("x", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![4096, 1] });
        let s = b.reduce(ReduceOp::Sum, lx);
        b.store(o, Index { offset: 0, strides: vec![1, 0] }, s);
        let m = compile_ptx(&[b.finish().unwrap()], "sm_90").unwrap();
        let k = &m.kernels[0];
        assert_eq!(k.launch, Launch { entry: "rowsum".into(), grid: 16, block: 256 });
        assert_eq!(k.unaligned, Some(Launch { entry: "rowsum_s".into(), grid: 16, block: 1024 }));
        assert!(m.ptx.contains("ld.global.nc.v4.f32"), "{}", m.ptx);
    }

    fn column_sum(rows: i64, cols: i64) -> Kernel {
        let mut b = KernelBuilder::new_reduction("colsum", vec![cols], vec![rows]);
        let x = b.input("x", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![1, cols] });
        let s = b.reduce(ReduceOp::Sum, lx);
        b.store(o, Index { offset: 0, strides: vec![1, 0] }, s);
        b.finish().unwrap()
    }

    #[test]
    fn column_sums_split_rows_over_groups() {
        // Note [column reductions]: the bias gradient of a linear layer, summed over the 2048
        // rows of [2048, 768]: 8 columns a block (96 blocks), 128 row groups, 4 rows unrolled.
        let k = column_sum(2048, 768);
        assert_eq!(column_plan(&legalize(&k)), Some(ColumnPlan { cols: 8, groups: 128 }));
        let m = compile_ptx(&[k], "sm_90").unwrap();
        assert_eq!(m.kernels[0].launch, Launch { entry: "colsum".into(), grid: 96, block: 1024 });
        assert_eq!(m.kernels[0].unaligned, None);
        assert!(m.ptx.contains(".maxntid 1024"), "{}", m.ptx);
        assert!(m.ptx.contains("shfl.sync.bfly.b32"), "{}", m.ptx);
        assert_eq!(m.ptx.matches("ld.global.nc.f32").count(), 5, "4 unrolled + the tail\n{}", m.ptx);
        insta::assert_snapshot!("nvptx_column_sum", m.ptx);
        // Wide outputs get wider blocks; row sums keep one block per row.
        assert_eq!(column_plan(&legalize(&column_sum(2048, 3072))), Some(ColumnPlan { cols: 16, groups: 64 }));
        assert_eq!(column_plan(&legalize(&column_sum(16, 8192))), Some(ColumnPlan { cols: 32, groups: 2 }));
        assert_eq!(column_plan(&legalize(&softmax())), None);
    }

    #[test]
    fn layer_norm_weight_gradient_is_a_column_reduction() {
        // sum over rows of dy * (x - mean[row]) * rstd[row], with the bias gradient beside it
        // (two reductions of one loop) and a pointwise member stored at every point (the
        // gradient sum `dy + x` of the plan GPT-2's backward has), over a width that is no
        // multiple of the block's columns.
        let (rows, cols) = (300, 100);
        let mut b = KernelBuilder::new_reduction("ln_wgrad", vec![cols], vec![rows]);
        let dy = b.input("dy", DType::F32);
        let x = b.input("x", DType::F32);
        let mean = b.input("mean", DType::F32);
        let rstd = b.input("rstd", DType::F32);
        let dw = b.output("dw", DType::F32);
        let db = b.output("db", DType::F32);
        let acc = b.output("acc", DType::F32);
        let ldy = b.load(dy, Index { offset: 0, strides: vec![1, cols] });
        let lx = b.load(x, Index { offset: 0, strides: vec![1, cols] });
        let lm = b.load(mean, Index { offset: 0, strides: vec![0, 1] });
        let lr = b.load(rstd, Index { offset: 0, strides: vec![0, 1] });
        let c = b.binary(BinaryOp::Sub, lx, lm);
        let xh = b.binary(BinaryOp::Mul, c, lr);
        let p = b.binary(BinaryOp::Mul, ldy, xh);
        let sw = b.reduce(ReduceOp::Sum, p);
        let sb = b.reduce(ReduceOp::Sum, ldy);
        b.store(dw, Index { offset: 0, strides: vec![1, 0] }, sw);
        b.store(db, Index { offset: 0, strides: vec![1, 0] }, sb);
        let sum = b.binary(BinaryOp::Add, ldy, lx);
        b.store(acc, Index { offset: 0, strides: vec![1, cols] }, sum);
        let k = b.finish().unwrap();
        assert_eq!(column_plan(&legalize(&k)), Some(ColumnPlan { cols: 8, groups: 64 }));
        let m = compile_ptx(&[k], "sm_90").unwrap();
        assert_eq!(m.kernels[0].launch, Launch { entry: "ln_wgrad".into(), grid: 13, block: 512 });
        assert!(m.ptx.contains(".maxntid 512"), "{}", m.ptx);
        // 4 unrolled rows and the tail: each stores the member.
        assert_eq!(m.ptx.matches("st.global.f32").count(), 5 + 2, "{}", m.ptx);
    }

    /// Softmax over 64 rows of 8192 float32 (`exp(x - max) / sum`); with `by_reciprocal` the
    /// division is written as a multiplication by the reciprocal of the sum, as legalize does.
    fn softmax_rows_8192(by_reciprocal: bool) -> Kernel {
        let mut b = KernelBuilder::new_reduction("softmax", vec![64], vec![8192]);
        let x = b.input("x", DType::F32);
        let o = b.output("out", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![8192, 1] });
        let m = b.reduce(ReduceOp::Max, lx);
        let d = b.binary(BinaryOp::Sub, lx, m);
        let ex = b.unary(UnaryOp::Exp, d);
        let s = b.reduce(ReduceOp::Sum, ex);
        let q = if by_reciprocal {
            let inv = b.unary(UnaryOp::Reciprocal, s);
            b.binary(BinaryOp::Mul, ex, inv)
        } else {
            b.binary(BinaryOp::Div, ex, s)
        };
        b.store(o, Index { offset: 0, strides: vec![8192, 1] }, q);
        b.finish().unwrap()
    }

    #[test]
    fn short_rows_are_read_once() {
        // Note [persistent rows]: softmax over 8192-wide rows is 4 sweeps of 512 threads x 4
        // lanes; x is loaded once per sweep (4 vector loads), not once per phase (12).
        let m = compile_ptx(&[softmax_rows_8192(false)], "sm_90").unwrap();
        assert_eq!(m.kernels[0].launch.block, 512);
        let aligned = m.ptx.split(".entry softmax_s").next().unwrap();
        assert_eq!(aligned.matches("ld.global.nc.v4.f32").count(), 4, "{aligned}");
        assert_eq!(aligned.matches("st.global.v4.f32").count(), 4, "{aligned}");
    }

    #[test]
    fn two_reductions_in_one_loop() {
        // amax - amin over rows: both accumulate in loop 0 (the device run found their exit
        // phis interleaved with the first block reduction's code).
        for r in [1000, 65] {
            let mut b = KernelBuilder::new_reduction("range", vec![33], vec![r]);
            let x = b.input("x", DType::F32);
            let o = b.output("out", DType::F32);
            let lx = b.load(x, Index { offset: 0, strides: vec![r, 1] });
            let mx = b.reduce(ReduceOp::Max, lx);
            let mn = b.reduce(ReduceOp::Min, lx);
            let d = b.binary(BinaryOp::Sub, mx, mn);
            b.store(o, Index { offset: 0, strides: vec![1, 0] }, d);
            let m = compile_ptx(&[b.finish().unwrap()], "sm_90").unwrap();
            assert!(m.ptx.contains("max.f32") || m.ptx.contains("setp"), "{}", m.ptx);
        }
    }

    #[test]
    fn sin_cos_compile_with_the_exact_reduction() {
        let mut b = KernelBuilder::new("s", vec![8]);
        let x = b.input("x", DType::F32);
        let o = b.output("o", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![1] });
        let s = b.unary(UnaryOp::Sin, lx);
        let c = b.unary(UnaryOp::Cos, s);
        b.store(o, Index { offset: 0, strides: vec![1] }, c);
        let k = b.finish().unwrap();
        assert!(unsupported(&k).is_none());
        let m = compile_ptx(&[k], "sm_90").unwrap();
        // Note [trig reduction]: the 2/pi table in constant memory, read by the reduction.
        assert!(m.ptx.contains("dynamo_two_over_pi") && m.ptx.contains("ld.const"), "{}", m.ptx);
        assert!(!m.ptx.contains("call"), "no calls: math is inline\n{}", m.ptx);
    }

    /// GPT-2's GELU (`gelu_new`): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    fn gelu_tanh(n: i64) -> Kernel {
        let mut b = KernelBuilder::new("gelu", vec![n]);
        let x = b.input("x", DType::F32);
        let o = b.output("o", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![1] });
        let c = |b: &mut KernelBuilder, v: f32| b.const_f32(v);
        let x2 = b.binary(BinaryOp::Mul, lx, lx);
        let x3 = b.binary(BinaryOp::Mul, x2, lx);
        let k = c(&mut b, 0.044715);
        let kx3 = b.binary(BinaryOp::Mul, k, x3);
        let inner = b.binary(BinaryOp::Add, lx, kx3);
        let r = c(&mut b, (2.0f32 / std::f32::consts::PI).sqrt());
        let arg = b.binary(BinaryOp::Mul, r, inner);
        let t = b.unary(UnaryOp::Tanh, arg);
        let one = c(&mut b, 1.0);
        let t1 = b.binary(BinaryOp::Add, one, t);
        let half = c(&mut b, 0.5);
        let hx = b.binary(BinaryOp::Mul, half, lx);
        let y = b.binary(BinaryOp::Mul, hx, t1);
        b.store(o, Index { offset: 0, strides: vec![1] }, y);
        b.finish().unwrap()
    }

    #[test]
    fn tanh_uses_the_hardware_exponential() {
        // Note [fast tanh]: one ex2.approx per lane, no rint/cvt of the general exp's 2^n,
        // and few enough instructions that the GELU kernel stays memory-bound.
        let m = compile_ptx(&[gelu_tanh(1 << 20)], "sm_90").unwrap();
        let body = m.ptx.split(".visible .entry gelu(").nth(1).unwrap();
        let insts = body.lines().filter(|l| l.trim_end().ends_with(';') && !l.trim_start().starts_with(".reg")).count();
        if std::env::var_os("DYNAMO_PRINT_PTX").is_some() {
            eprintln!("{}\n{insts} instructions", m.ptx);
        }
        assert_eq!(body.matches("ex2.approx.f32").count(), 4, "{}", m.ptx);
        assert!(!body.contains("cvt.rni"), "{}", m.ptx);
        assert!(insts < 190, "{insts} instructions\n{}", m.ptx);
    }

    /// Instructions of entry `name`'s body in `ptx` (lines ending in `;`, `.reg` lines aside),
    /// and the body.
    fn entry_body<'a>(ptx: &'a str, name: &str) -> (usize, &'a str) {
        let body = ptx.split(&format!(".visible .entry {name}(")).nth(1).unwrap();
        let body = body.split(".visible .entry").next().unwrap();
        (body.lines().filter(|l| l.trim_end().ends_with(';') && !l.trim_start().starts_with(".reg")).count(), body)
    }

    #[test]
    fn softmax_is_small_for_the_driver() {
        // Note [fast exp], Note [fast reciprocals], Note [NaN-propagating max]: 8192-wide
        // softmax rows (16 points a thread): one ex2.approx per exponential and no selects in
        // it, one max.NaN per max combine, the reciprocal without rcp.rn's slow path; the
        // driver's JIT time follows the instruction count (828 lines of PTX before).
        let m = compile_ptx(&[softmax_rows_8192(true)], "sm_90").unwrap();
        let (insts, body) = entry_body(&m.ptx, "softmax");
        if std::env::var_os("DYNAMO_PRINT_PTX").is_some() {
            eprintln!("{}\n{insts} instructions", m.ptx);
        }
        assert_eq!(body.matches("ex2.approx.f32").count(), 16, "{body}");
        assert!(body.matches("max.NaN.f32").count() >= 16, "{body}");
        assert!(body.matches("setp.nan").count() <= 1 && !body.contains("rcp.rn") && !body.contains("div.rn"), "{body}");
        assert!(insts < 480, "{insts} instructions\n{body}");
    }

    #[test]
    fn rsqrt_and_reciprocal_skip_the_slow_paths() {
        // Note [fast reciprocals]: rsqrt and reciprocal (a division of 1 after legalize) are the
        // hardware approximations and a Newton step; other divisions stay div.rn.
        let mut b = KernelBuilder::new("recips", vec![1 << 16]);
        let x = b.input("x", DType::F32);
        let y = b.input("y", DType::F32);
        let o = b.output("o", DType::F32);
        let lx = b.load(x, Index { offset: 0, strides: vec![1] });
        let ly = b.load(y, Index { offset: 0, strides: vec![1] });
        let r = b.unary(UnaryOp::Rsqrt, lx);
        let i = b.unary(UnaryOp::Reciprocal, ly);
        let q = b.binary(BinaryOp::Div, lx, ly);
        let s = b.binary(BinaryOp::Add, r, i);
        let s = b.binary(BinaryOp::Add, s, q);
        b.store(o, Index { offset: 0, strides: vec![1] }, s);
        let m = compile_ptx(&[b.finish().unwrap()], "sm_90").unwrap();
        let (_, body) = entry_body(&m.ptx, "recips");
        assert_eq!(body.matches("rsqrt.approx.f32").count(), 4, "{body}");
        assert_eq!(body.matches("rcp.approx.f32").count(), 4, "{body}");
        assert!(!body.contains("sqrt.rn") && !body.contains("rcp.rn"), "{body}");
        assert_eq!(body.matches("div.rn.f32").count(), 4, "{body}");
    }

    #[test]
    fn equal_kernels_are_emitted_once() {
        let mut a = relu_add();
        let mut b = relu_add();
        a.name = "first".into();
        b.name = "second".into();
        let m = compile_ptx(&[a, b], "sm_90").unwrap();
        assert_eq!(m.kernels.len(), 2);
        assert_eq!(m.kernels[1].launch.entry, "first");
        assert!(!m.ptx.contains("second"));
    }
}
