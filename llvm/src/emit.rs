//! Emission of a legalized [`Kernel`] as LLVM IR through inkwell: one `match` arm per op.
//!
//! Each kernel becomes two functions:
//! - `<name>_body(ptr noalias %a0, ..., i64 %start, i64 %end)`, internal: the loop nest, with
//!   the outermost loop running over `[start, end)` so callers can split it across threads;
//! - `<name>(ptr %args, i64 %start, i64 %end)`, external: loads the argument pointers from the
//!   array `args` and calls the body (one uniform C signature for every kernel).
//!
//! Invariants: the input passed `legalize` (no Relu/Sigmoid/Reciprocal/Rsqrt/Maximum/Minimum); every
//! libm call is `memory(none)` and carries a `vector-function-abi-variant` attribute naming the
//! glibc libmvec variants the host supports, so the loop vectorizer can widen it.

use std::collections::HashMap;

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FloatValue, FunctionValue, IntValue, PhiValue, PointerValue};
use inkwell::values::AsValueRef;
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};

use crate::kernel::{BinaryOp, CmpOp, DType, Expr, Index, Kernel, UnaryOp};
use crate::CodegenError;

/// What the emitter needs to know about the target.
#[derive(Clone, Debug, Default)]
pub struct TargetInfo {
    /// Host CPU name for the `target-cpu` function attribute (for example `znver4`).
    pub cpu: String,
    /// Host feature string for `target-features` (for example `+avx2,+avx512f,...`).
    pub features: String,
    /// libmvec variants usable on this host: (x86 ISA letter of the vector ABI, lane count),
    /// for example `('d', 8)` for AVX2; empty when libmvec is unavailable.
    pub vector_isas: Vec<(char, u32)>,
    /// Vector function symbols (`_ZGVdN8v_sinf` ...) that resolve in this process; a variant is
    /// only offered to the vectorizer when listed here.
    pub vector_symbols: Vec<String>,
    /// Vectorize at 512 bits (Note [512-bit vectors]).
    pub wide_vectors: bool,
    /// float64 names ([`F64_MATH`]) of the functions computed in double for float32 values
    /// (Note [float math in double]).
    pub math_in_double: Vec<String>,
}

/// libm's float64 functions a float32 kernel may call through
/// [`Emitter::call_math_in_double`](Note [float math in double]).
pub const F64_MATH: &[&str] = &["exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf"];

// Note [512-bit vectors]: LLVM's x86 tuning prefers 256-bit vectors on AVX-512 CPUs (Skylake's
// frequency drop under 512-bit code), so the vectorizer picks libmvec's AVX2 variants
// (`_ZGVdN8v_expf`). ATen runs its AVX-512 kernels on such hosts, and our kernels are the same
// kind of loops: when the host has AVX-512 F/BW/DQ/VL, kernels prefer 512-bit vectors
// (`prefer-vector-width`, with `min-legal-vector-width` so 512-bit vectors stay legal across
// the libmvec calls' vector ABI). Over 32768 floats on a 2-core Xeon: `exp` 11.1 -> 8.0 us,
// `sigmoid` 10.9 -> 8.2 us, the pointwise benchmark 55 -> 41 ms (docs/PERF.md). `tanh` and `erf`
// keep their AVX2 variants (`jit::AVX512_INEXACT`: the AVX-512 ones are less exact; their loops
// vectorize at 8 lanes). `DYNAMO_LLVM_VECTOR_BITS=256` keeps LLVM's preference, for
// comparison. Tried and dropped: PyTorch's own Sleef variants,
// which `libtorch_cpu` exports under vector-ABI names (`_ZGVeN16v_Sleef_tanhf_u10`): over the
// same floats `tanh` took 43 us and `exp` 8.0 (eager's contiguous `exp`/`tanh` are MKL's VML,
// not Sleef, so they gave no bit-exactness either). Also tried and dropped: `exp` and `erf` as
// inline LLVM functions of FMAs and integer operations (Cody-Waite reduction with a degree-6
// polynomial, exp within 0.9 ulp; erf from a degree-13 odd polynomial below 1 and
// 1 - exp(-x^2) R(x) above, within 1.0 ulp), vectorized with the loop at 16 lanes. Kernel time
// over 16384 floats (minimum of 3000 calls, `DYNAMO_INDUCTOR_STEP_TIMES`): `exp` 4.9 -> 4.0 us,
// but `erf` 8.6 -> 9.2, GELU 9.8 -> 10.5, softmax 5.8 -> 6.4, sigmoid 4.8 -> 5.5: libmvec's
// AVX-512 `expf` scales with `vscalefps` and needs no clamps, and its 8-lane `erff` already keeps
// the FMA units busy.

// Note [float math in double]: eager's float32 transcendental functions are correctly rounded
// in all but a few percent of elements (MKL's VML on contiguous tensors, glibc's scalar libm
// elsewhere), while libmvec's float32 vector functions are only faithful. Over 2^20 floats of
// N(0, 9) (`x * 2` after the function, so a kernel runs), bit-compared with eager: `log` differed
// in 37% of elements, `cos` 26%, `sin` 19%, `log1p` 12%, `expm1` 11%. One ulp is within any
// tolerance, but a value printed or formatted (`str(float(t.max()))`, the differential fuzzer's
// id 3865) or cut by `.long()` shows it. So these five run in float64 (libmvec's double vector
// variants at half the lanes) and are rounded once to float32: correctly rounded wherever the
// double result is not within half an ulp of a float32 tie, and then differing from eager only
// where eager itself is not correctly rounded (8.4%, 4.9%, 4.9%, 0.7%, 0.1% for the five). The
// cost, one thread over 2048x1024 floats: sin + cos 3.0 -> 3.4 ms (eager 6.6). `exp`, `tanh` and
// `erf` stay in float32 (51%, 5% and 20% of elements differ from eager): in double they made
// softmax 1.75 -> 2.20 ms (eager 1.24), GELU 1.38 -> 3.43 (eager 1.99), sigmoid 0.89 -> 1.95 (eager
// 1.40), a cost on every transformer block. Tried and dropped: `exp` inline in float64 (k =
// rint(x log2 e), r = x - k ln2 by one FMA, Taylor polynomial of degree 10, 2^k from exponent
// bits; correctly rounded, vectorized at 8 lanes): exp 0.9 -> 1.4 ms, softmax 1.2 -> 1.55, sigmoid
// and SiLU 0.9 -> 1.7, slower than eager's 1.2-1.5. `DYNAMO_LLVM_MATH_IN_DOUBLE` (comma-separated float64
// names, empty for none) picks another set, for such measurements;
// pytests/inductor/test_transcendental_exactness.py checks the five are correctly rounded.

// Note [one routine per math function]: eager computes every element of `torch.exp(x)` with one
// routine, so equal inputs give equal outputs wherever they sit. A kernel's loop has a vector
// body and a scalar remainder, and a value one kernel stores may be recomputed inline by
// another with other loop bounds (a reduction over columns, a transposed store): were those
// evaluations scalar libm in one place and a libmvec variant in the other, they would differ
// in the last bit (glibc 2.36, float32: scalar `expf` and `_ZGVeN16v_expf` on 2.2% of inputs,
// `erff` 31%, `tanhf` 2.8%; `_ZGVdN8v_erff` and `_ZGVeN16v_erff` on 48%), and
// `(y - y.amax(1, keepdim=True)) == 0` with `y = exp(x)` then missed the maximum (no element
// equal to its row's max; pytests/inductor/test_one_math_routine.py). So each function has one
// canonical vector variant (`jit::offered_variants`: the widest the host's vector width allows),
// and the scalar function a kernel calls is `dynamo_<name>`, that variant applied to a splat
// and read at lane 0: a remainder, an unvectorized loop and LLVM's constant folding (which
// only knows libm's names) all take the vectorized body's routine. The vectorizers get the
// canonical variant, the libmvec widths measured to give its bits (`jit::SAME_BITS`), and for
// each other narrower width `dynamo_<name>_v<w>`, the canonical variant on the lanes repeated
// (the SLP vectorizer packs four of a remainder's calls into one: a 16-lane `expf` loop over
// rows of 37 stays at 0.30-0.34 ms, against 0.55 with one call per remainder element). A loop
// wider than the canonical width calls `dynamo_<name>` per lane, so the cost model keeps such
// loops at the canonical width. libmvec's variants treat each lane alone (special inputs go
// to a per-lane fallback), so a lane's result does not depend on its neighbours.

/// A loop opened by [`open_loop`], closed by the caller after its body.
struct OpenLoop<'ctx> {
    phi: PhiValue<'ctx>,
    iv: IntValue<'ctx>,
    header: BasicBlock<'ctx>,
    latch: BasicBlock<'ctx>,
    exit: BasicBlock<'ctx>,
    step: i64,
}

/// Emits `for iv in (lo..hi).step_by(step)` up to its body, leaving the builder in the body.
fn open_loop<'ctx>(
    ctx: &'ctx Context,
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    step: i64,
    name: &str,
) -> Result<OpenLoop<'ctx>, CodegenError> {
    let pred = b.get_insert_block().ok_or_else(|| bad("builder not positioned"))?;
    let header = ctx.append_basic_block(f, &format!("loop_{name}"));
    let body = ctx.append_basic_block(f, &format!("body_{name}"));
    let latch = ctx.append_basic_block(f, &format!("latch_{name}"));
    let exit = ctx.append_basic_block(f, &format!("exit_{name}"));
    e(b.build_unconditional_branch(header))?;
    b.position_at_end(header);
    let phi = e(b.build_phi(ctx.i64_type(), name))?;
    phi.add_incoming(&[(&lo, pred)]);
    let iv = phi.as_basic_value().into_int_value();
    let cond = e(b.build_int_compare(IntPredicate::SLT, iv, hi, ""))?;
    e(b.build_conditional_branch(cond, body, exit))?;
    b.position_at_end(body);
    Ok(OpenLoop { phi, iv, header, latch, exit, step })
}

/// Closes `l`: branch to its latch, step, back to the header; leaves the builder at its exit.
fn close_loop<'ctx>(ctx: &'ctx Context, b: &Builder<'ctx>, l: &OpenLoop<'ctx>) -> Result<(), CodegenError> {
    close_loop_with_hints(ctx, b, l, &[])
}

/// As [`close_loop`], attaching `llvm.loop` hints (for example `llvm.loop.unroll.disable`) to
/// the back edge.
fn close_loop_with_hints<'ctx>(
    ctx: &'ctx Context,
    b: &Builder<'ctx>,
    l: &OpenLoop<'ctx>,
    hints: &[&str],
) -> Result<(), CodegenError> {
    e(b.build_unconditional_branch(l.latch))?;
    b.position_at_end(l.latch);
    let next = e(b.build_int_nsw_add(l.iv, ctx.i64_type().const_int(l.step as u64, false), ""))?;
    l.phi.add_incoming(&[(&next, l.latch)]);
    let back_edge = e(b.build_unconditional_branch(l.header))?;
    if !hints.is_empty() {
        use inkwell::llvm_sys::core::*;
        use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
        use inkwell::llvm_sys::prelude::LLVMMetadataRef;
        // SAFETY: plain metadata construction in `ctx`; the temporary node is replaced (and so
        // freed) before anything else can see it.
        unsafe {
            let c = ctx.raw();
            let temp = LLVMTemporaryMDNode(c, std::ptr::null_mut(), 0);
            let mut ops: Vec<LLVMMetadataRef> = vec![temp];
            for h in hints {
                let mut name = [LLVMMDStringInContext2(c, h.as_ptr() as *const _, h.len())];
                ops.push(LLVMMDNodeInContext2(c, name.as_mut_ptr(), 1));
            }
            let node = LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(temp, node);
            let kind = LLVMGetMDKindIDInContext(c, "llvm.loop".as_ptr() as *const _, 9);
            LLVMSetMetadata(back_edge.as_value_ref(), kind, LLVMMetadataAsValue(c, node));
        }
    }
    b.position_at_end(l.exit);
    Ok(())
}

/// Points along the contiguous dim that one column-reduction block accumulates at once
/// (Note [column reductions]): 256 floats per accumulator array, on the stack.
pub const COLUMN_BLOCK: i64 = 256;

/// The outer dim to run innermost when the kernel is a column reduction (see Note [column
/// reductions]): one reduction loop, and every load that moves with the reduction is either
/// unit-stride along the last outer dim of size > 1 and strided along the innermost reduction
/// dim, or broadcast along that outer dim; at least one load is unit-stride. Stores inside the reduction loop (pointwise
/// work over the reduced space fused into the kernel: a layer norm's input gradient beside its
/// weight gradient's column sum) must be unit-stride along that dim and strided along the
/// innermost reduction dim, as the loads.
fn column_dim(kernel: &Kernel, inner: &[bool], n_loops: usize, store_loop: &[Option<usize>]) -> Option<usize> {
    if n_loops != 1 || kernel.reduction_ranges.is_empty() || kernel.has_masks() || has_f64_sums(kernel) {
        return None;
    }
    let n_outer = kernel.ranges.len();
    let j = (0..n_outer).rev().find(|&d| kernel.ranges[d] > 1)?;
    let last_red = kernel.n_index_dims() - 1;
    for (st, l) in kernel.stores.iter().zip(store_loop) {
        if l.is_some() && (st.index.strides[j] != 1 || st.index.strides[last_red].abs() == 1) {
            return None;
        }
    }
    let mut unit = false;
    for (i, ex) in kernel.exprs.iter().enumerate() {
        if let Expr::Load { index, .. } = ex {
            if !inner[i] {
                continue;
            }
            // A load broadcast across the points (one value per reduction step: a row's mean
            // in a layer norm's backward) may be contiguous along the reduction.
            if (index.strides[j] == 1 && index.strides[last_red].abs() == 1) || !matches!(index.strides[j], 0 | 1) {
                return None;
            }
            unit |= index.strides[j] == 1;
        }
    }
    unit.then_some(j)
}

/// Whether some `Reduce` of `kernel` accumulates in float64 (Note [float64 sums] in kernel.rs):
/// such kernels take the plain row loop of `emit_reduction_nest`.
fn has_f64_sums(kernel: &Kernel) -> bool {
    (0..kernel.exprs.len()).any(|i| {
        matches!(kernel.exprs[i], Expr::Reduce(..)) && kernel.dtype_of(crate::kernel::ExprId(i as u32)) == DType::F64
    })
}

/// Marks the expressions `ex` reads directly (its operands) in `needed`; loads and constants
/// read none.
fn mark_direct_operands(ex: &Expr, needed: &mut [bool]) {
    match ex {
        Expr::Unary(_, a) | Expr::Cast(_, a) | Expr::Reduce(_, a) | Expr::MaskedLoad { mask: a, .. } | Expr::IndirectLoad { row: a, .. } => {
            needed[a.0 as usize] = true
        }
        Expr::Binary(_, a, c) | Expr::Compare(_, a, c) => {
            needed[a.0 as usize] = true;
            needed[c.0 as usize] = true;
        }
        Expr::Select(c, a, d) => {
            needed[c.0 as usize] = true;
            needed[a.0 as usize] = true;
            needed[d.0 as usize] = true;
        }
        _ => {}
    }
}

/// Marks `root` and every expression it (transitively) reads in `needed`.
fn mark_operands(kernel: &Kernel, root: usize, needed: &mut [bool]) {
    needed[root] = true;
    for k in (0..=root).rev() {
        if !needed[k] {
            continue;
        }
        mark_direct_operands(&kernel.exprs[k], needed);
    }
}

/// Per expression: whether it is (transitively) an operand of a `Reduce`.
fn feeds_reduce(kernel: &Kernel) -> Vec<bool> {
    let mut needed = vec![false; kernel.exprs.len()];
    for (k, ex) in kernel.exprs.iter().enumerate().rev() {
        let used = needed[k] || matches!(ex, Expr::Reduce(..));
        if !used {
            continue;
        }
        mark_direct_operands(ex, &mut needed);
    }
    needed
}

/// Elements summed in one block before the block sum joins the pairwise stack (Note [pairwise
/// sums]); the vectorized loop keeps 64 lanes, so each lane adds at most 64 values per block.
pub const SUM_BLOCK: i64 = 4096;

/// Note [ATen sum order]: `.item()` of a sum is printed by programs, so a `torch.sum`/`mean`
/// (`ReduceOp::OrderedSum`) over one contiguous reduction loop adds in the order of ATen's CPU
/// kernel (aten/src/ATen/native/cpu/SumKernel.cpp), when that order is a fixed set of partial
/// sums (no cascade levels): W is ATen's float vector width (8 with AVX2, 16 with AVX-512).
/// - n < W (`scalar_inner_sum`, `row_sum` with 4-way ILP), n < 64: element r goes to partial
///   r % 4 while r < 4 * (n / 4), the rest to partial 0; result ((p0 + p1) + p2) + p3.
/// - W <= n < 64 W (`vectorized_inner_sum`): with nv = n / W vectors and 4-way ILP over them,
///   element r goes to lane (r / W % 4, r % W) while r < 4 W (nv / 4), to lane (0, r % W) while
///   r < nv W; the remaining n - nv W elements to a tail sum. Lanes then combine as
///   p[l] = ((l0 + l1) + l2) + l3 per lane l, and the result is
///   (((tail + p[0]) + p[1]) + ...) + p[W - 1].
/// Every partial sum starts at +0.0 and adds its elements in index order. Rows longer than
/// [`ATEN_ORDER_MAX`] and strided ones keep the vectorized, reassociated sum, which agrees within
/// float rounding (so do column sums over many rows, where ATen's order is 4-way interleaved). Set once per process from torch's CPU capability by
/// [`set_aten_vector_width`].
static ATEN_VECTOR_WIDTH: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(8);

/// Longest row summed in ATen's order (Note [ATen sum order]): the partial sums live in a stack
/// array indexed per element, which LLVM does not vectorize, so longer rows keep the vectorized
/// sum.
pub const ATEN_ORDER_MAX: i64 = 64;

/// Sets ATen's float vector width (16 for its AVX-512 kernels, 8 otherwise); see
/// Note [ATen sum order].
pub fn set_aten_vector_width(w: i64) {
    ATEN_VECTOR_WIDTH.store(w, std::sync::atomic::Ordering::Relaxed);
}

/// Levels of the pairwise stack: enough for 2^31 blocks.
pub const PAIRWISE_LEVELS: u64 = 32;

/// Largest reduction space (in elements) whose expensive values are cached in a stack row
/// between the loops of a reduction kernel (Note [row cache]): 16384 floats, 64 KiB.
pub const ROW_CACHE_MAX: i64 = 16384;

/// The LLVM register type of a kernel value of dtype `dt` (bool is `i1` in registers).
fn elem_llvm_type(ctx: &Context, dt: DType) -> BasicTypeEnum<'_> {
    match dt.value_type() {
        DType::Bool => ctx.bool_type().into(),
        DType::F64 => ctx.f64_type().into(),
        DType::I64 => ctx.i64_type().into(),
        DType::I32 => ctx.i32_type().into(),
        _ => ctx.f32_type().into(),
    }
}

/// The LLVM type of one element of a buffer of dtype `dt` in memory (bool is one byte).
fn storage_type(ctx: &Context, dt: DType) -> BasicTypeEnum<'_> {
    match dt {
        DType::F32 => ctx.f32_type().into(),
        DType::Bool => ctx.i8_type().into(),
        DType::BF16 => ctx.bf16_type().into(),
        DType::F16 => ctx.f16_type().into(),
        DType::F64 => ctx.f64_type().into(),
        DType::I64 => ctx.i64_type().into(),
        DType::I32 => ctx.i32_type().into(),
    }
}

/// Per expression: whether computing it (inner operands included) calls a transcendental
/// function, so recomputing it costs more than a load.
fn expensive_exprs(kernel: &Kernel, inner: &[bool]) -> Vec<bool> {
    let mut out = vec![false; kernel.exprs.len()];
    for (i, ex) in kernel.exprs.iter().enumerate() {
        if !inner[i] {
            continue;
        }
        let op = |id: &crate::kernel::ExprId| out[id.0 as usize];
        out[i] = match ex {
            Expr::Unary(u, a) => {
                matches!(
                    u,
                    UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Erf
                        | UnaryOp::Log1p | UnaryOp::Expm1 | UnaryOp::Sigmoid
                ) || op(a)
            }
            Expr::Binary(bo, x, y) => *bo == BinaryOp::Pow || op(x) || op(y),
            Expr::Compare(_, x, y) => op(x) || op(y),
            Expr::Select(c, x, y) => op(c) || op(x) || op(y),
            Expr::Cast(_, a) => op(a),
            _ => false,
        };
    }
    out
}

/// Edge of the transposed tiles staged through registers (see Note [transposed tiles]); equal to
/// `legalize::TILE` so every full tile qualifies.
pub const TRANSPOSE_TILE: i64 = crate::legalize::TILE;

/// Edge of the outer blocks tiled loops are grouped into (iterations per dim).
pub const TILE_BLOCK: i64 = 128;

/// A load served from a transposed stack tile instead of memory.
struct StagedLoad<'ctx> {
    /// Index of the `Expr::Load` in `Kernel::exprs`.
    expr: usize,
    buffer: PointerValue<'ctx>,
    a_blk: IntValue<'ctx>,
    b_blk: IntValue<'ctx>,
}

/// Per-module emission state: declared math functions, `llvm.compiler.used` members.
pub struct Emitter<'ctx, 'm> {
    ctx: &'ctx Context,
    module: &'m Module<'ctx>,
    target: TargetInfo,
    math: HashMap<&'static str, (FunctionValue<'ctx>, Option<Attribute>)>,
    used: Vec<PointerValue<'ctx>>,
}

fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Emit(msg.into())
}

fn e<T>(r: Result<T, inkwell::builder::BuilderError>) -> Result<T, CodegenError> {
    r.map_err(|err| bad(err.to_string()))
}

/// `v` (of value type `from`) converted to value type `to` (LLVM type `to_ty`), as torch's
/// `Tensor.to(dtype)` converts: to bool, `x != 0` (NaN is true); from bool, 0 or 1; F32 <-> F64
/// widens exactly and narrows round-to-nearest-even; I32 -> I64 sign-extends, I64 -> I32 keeps
/// the low bits (torch's `.int()`); int -> float rounds to nearest; float -> int truncates toward
/// `x op y` as an i1: signed integer predicates for integers and bools, ordered float
/// predicates except `!=`, which is unordered (NaN != NaN is true, as in torch). Shared by the
/// CPU and the NVPTX code generators.
pub(crate) fn build_compare<'ctx>(b: &Builder<'ctx>, op: CmpOp, int: bool, x: BasicValueEnum<'ctx>, y: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>, CodegenError> {
    if int {
        let pred = match op {
            CmpOp::Eq => IntPredicate::EQ,
            CmpOp::Ne => IntPredicate::NE,
            CmpOp::Lt => IntPredicate::SLT,
            CmpOp::Le => IntPredicate::SLE,
            CmpOp::Gt => IntPredicate::SGT,
            CmpOp::Ge => IntPredicate::SGE,
        };
        return Ok(e(b.build_int_compare(pred, x.into_int_value(), y.into_int_value(), ""))?.into());
    }
    let pred = match op {
        CmpOp::Eq => FloatPredicate::OEQ,
        CmpOp::Ne => FloatPredicate::UNE,
        CmpOp::Lt => FloatPredicate::OLT,
        CmpOp::Le => FloatPredicate::OLE,
        CmpOp::Gt => FloatPredicate::OGT,
        CmpOp::Ge => FloatPredicate::OGE,
    };
    Ok(e(b.build_float_compare(pred, x.into_float_value(), y.into_float_value(), ""))?.into())
}

/// `x` (f32) rounded to bfloat16 with integer operations, returned as a `bfloat` value: round to
/// nearest even (c10/util/BFloat16.h, `round_to_nearest_even`), any NaN to 0xFFFF as ATen's
/// vectorized conversion gives it (aten/src/ATen/cpu/vec/vec256/vec256_bfloat16.h,
/// `cvtfp32_bf16`: what eager's bfloat16 kernels store). LLVM's
/// `fptrunc float to bfloat` is one instruction only with AVX512-BF16; elsewhere it becomes a call
/// to `__truncsfbf2`, which the JIT cannot resolve (libgcc_s exports the half-precision helpers,
/// not the bfloat16 ones), and the kernel failed to link on such CPUs (an AMD EPYC).
pub(crate) fn trunc_to_bf16<'ctx>(ctx: &'ctx Context, b: &Builder<'ctx>, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
    let i32t = ctx.i32_type();
    let bits = e(b.build_bit_cast(x, i32t, ""))?.into_int_value();
    let lsb = e(b.build_and(e(b.build_right_shift(bits, i32t.const_int(16, false), false, ""))?, i32t.const_int(1, false), ""))?;
    let bias = e(b.build_int_add(lsb, i32t.const_int(0x7FFF, false), ""))?;
    let rounded = e(b.build_right_shift(e(b.build_int_add(bits, bias, ""))?, i32t.const_int(16, false), false, ""))?;
    let r16 = e(b.build_int_truncate(rounded, ctx.i16_type(), ""))?;
    let is_nan = e(b.build_float_compare(FloatPredicate::UNO, x, x, ""))?;
    let r16 = e(b.build_select(is_nan, ctx.i16_type().const_int(0xFFFF, false), r16, ""))?;
    Ok(e(b.build_bit_cast(r16, ctx.bf16_type(), ""))?.into_float_value())
}

/// Note [bfloat16 widening by bits]: a bfloat16 value widened to float32 as its 16 bits shifted
/// into the high half (exact, as `fpext` is), not as `fpext bfloat`: LLVM's InstCombine narrows
/// `fptrunc(fdiv(fpext a, fpext b))` to a division in the narrow type when it believes both
/// operands fit, and took a bfloat16 operand as fitting float16: `x_f16 / s_bf16` with s =
/// 155648 divided by float16's inf (0 where eager gives 3.3e-4).
pub(crate) fn ext_bf16<'ctx>(ctx: &'ctx Context, b: &Builder<'ctx>, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, CodegenError> {
    let bits = e(b.build_bit_cast(x, ctx.i16_type(), ""))?.into_int_value();
    let wide = e(b.build_int_z_extend(bits, ctx.i32_type(), ""))?;
    let high = e(b.build_left_shift(wide, ctx.i32_type().const_int(16, false), ""))?;
    Ok(e(b.build_bit_cast(high, ctx.f32_type(), ""))?.into_float_value())
}

/// `v` (a value of `from`) converted to `to` as torch's `.to(dtype)` does: to bool, `!= 0`;
/// from bool, 0 or 1; between floats, rounding to nearest; between ints, sign extension or
/// truncation; int to float, rounding to nearest; float to int, truncation toward zero (C's
/// conversion, which torch uses), with NaN and out-of-range values as the machine gives them
/// (Note [float to int casts]; `saturate` for the NVPTX code generator). Shared by the CPU and
/// the NVPTX code generators.
pub(crate) fn build_cast<'ctx>(b: &Builder<'ctx>, from: DType, to: DType, to_ty: BasicTypeEnum<'ctx>, v: BasicValueEnum<'ctx>, saturate: bool) -> Result<BasicValueEnum<'ctx>, CodegenError> {
    if from == to {
        return Ok(v);
    }
    Ok(if to == DType::Bool {
        if from.is_float_value() {
            let x = v.into_float_value();
            e(b.build_float_compare(FloatPredicate::UNE, x, x.get_type().const_zero(), ""))?.into()
        } else {
            let x = v.into_int_value();
            e(b.build_int_compare(IntPredicate::NE, x, x.get_type().const_zero(), ""))?.into()
        }
    } else if from == DType::Bool {
        if to.is_float_value() {
            e(b.build_unsigned_int_to_float(v.into_int_value(), to_ty.into_float_type(), ""))?.into()
        } else {
            e(b.build_int_z_extend(v.into_int_value(), to_ty.into_int_type(), ""))?.into()
        }
    } else if from.is_float_value() && to.is_float_value() {
        if to == DType::F64 {
            e(b.build_float_ext(v.into_float_value(), to_ty.into_float_type(), ""))?.into()
        } else {
            e(b.build_float_trunc(v.into_float_value(), to_ty.into_float_type(), ""))?.into()
        }
    } else if from.is_int() && to.is_int() {
        if to == DType::I64 {
            e(b.build_int_s_extend(v.into_int_value(), to_ty.into_int_type(), ""))?.into()
        } else {
            e(b.build_int_truncate(v.into_int_value(), to_ty.into_int_type(), ""))?.into()
        }
    } else if from.is_int() {
        e(b.build_signed_int_to_float(v.into_int_value(), to_ty.into_float_type(), ""))?.into()
    } else {
        build_float_to_int(b, v.into_float_value(), to_ty.into_int_type(), saturate)?.into()
    })
}

/// Note [float to int casts]: a float out of the integer type's range, or NaN, has no value in
/// LLVM's `fptosi` (poison: a NaN the optimizer can prove folds to nothing, and the store of it
/// disappears, leaving whatever the output buffer held). Eager's conversions are defined by
/// the machine: on x86 `cvttss2si`/`cvttsd2si` (and their AVX-512 vector forms) give the
/// "integer indefinite" value, the type's minimum, for NaN and out-of-range values, so the CPU
/// code selects that minimum outside `[-2^(n-1), 2^(n-1))`. CUDA's `cvt.rzi` saturates and
/// gives 0 for NaN (`saturate`, the NVPTX code generator).
fn build_float_to_int<'ctx>(b: &Builder<'ctx>, x: inkwell::values::FloatValue<'ctx>, ity: inkwell::types::IntType<'ctx>, saturate: bool) -> Result<inkwell::values::IntValue<'ctx>, CodegenError> {
    let bits = ity.get_bit_width();
    let ft = x.get_type();
    let lo = ft.const_float(-(2f64.powi(bits as i32 - 1)));
    let hi = ft.const_float(2f64.powi(bits as i32 - 1));
    let above = e(b.build_float_compare(FloatPredicate::OGE, x, lo, ""))?;
    let below = e(b.build_float_compare(FloatPredicate::OLT, x, hi, ""))?;
    let in_range = e(b.build_and(above, below, ""))?;
    let raw = e(b.build_float_to_signed_int(x, ity, ""))?;
    let min = ity.const_int(1u64 << (bits - 1), false);
    if saturate {
        let max = ity.const_int((1u64 << (bits - 1)) - 1, false);
        let is_nan = e(b.build_float_compare(FloatPredicate::UNO, x, x, ""))?;
        let high = e(b.build_select(above, max, min, ""))?.into_int_value();
        let clamped = e(b.build_select(is_nan, ity.const_zero(), high, ""))?.into_int_value();
        return Ok(e(b.build_select(in_range, raw, clamped, ""))?.into_int_value());
    }
    Ok(e(b.build_select(in_range, raw, min, ""))?.into_int_value())
}

impl<'ctx, 'm> Emitter<'ctx, 'm> {
    pub fn new(ctx: &'ctx Context, module: &'m Module<'ctx>, target: TargetInfo) -> Self {
        Emitter { ctx, module, target, math: HashMap::new(), used: Vec::new() }
    }

    fn enum_attr(&self, name: &str, val: u64) -> Attribute {
        self.ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), val)
    }

    fn add_target_attrs(&self, f: FunctionValue<'ctx>) {
        if !self.target.cpu.is_empty() {
            f.add_attribute(AttributeLoc::Function, self.ctx.create_string_attribute("target-cpu", &self.target.cpu));
        }
        if !self.target.features.is_empty() {
            f.add_attribute(
                AttributeLoc::Function,
                self.ctx.create_string_attribute("target-features", &self.target.features),
            );
        }
        if self.target.wide_vectors {
            f.add_attribute(AttributeLoc::Function, self.ctx.create_string_attribute("prefer-vector-width", "512"));
            f.add_attribute(AttributeLoc::Function, self.ctx.create_string_attribute("min-legal-vector-width", "512"));
        }
        f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind", 0));
    }

    /// The function a kernel calls for the libm function `name` (`float(float)` or
    /// `float(float, float)`; float64 for [`F64_MATH`]) and the call-site attribute that names
    /// its vector variants. Where libmvec offers variants, that function is
    /// `dynamo_<name>`: the canonical variant applied to a splat of the arguments, lane 0
    /// (Note [one routine per math function]); elsewhere libm's own `name`.
    fn math_fn(&mut self, name: &'static str, arity: usize) -> (FunctionValue<'ctx>, Option<Attribute>) {
        if let Some(entry) = self.math.get(name) {
            return *entry;
        }
        // float32 functions end in `f` (`expf`); the float64 ones of Note [float math in
        // double] carry libm's plain names and half the lanes per vector.
        let double = F64_MATH.contains(&name);
        let ft: inkwell::types::FloatType<'ctx> = if double { self.ctx.f64_type() } else { self.ctx.f32_type() };
        let params: Vec<BasicMetadataTypeEnum> = vec![ft.into(); arity];
        let v_params = if arity == 1 { "v" } else { "vv" };
        // The offered variants, canonical first (`jit::offered_variants`).
        let offered: Vec<(String, u32)> = self
            .target
            .vector_symbols
            .iter()
            .filter_map(|sym| {
                let rest = sym.strip_prefix("_ZGV")?.strip_suffix(&format!("{v_params}_{name}"))?;
                let lanes = rest.get(2..)?.parse().ok()?;
                (rest.as_bytes().get(1) == Some(&b'N')).then(|| (sym.clone(), lanes))
            })
            .collect();
        let mut vector_fns = Vec::new();
        for (vname, lanes) in &offered {
            let vt = ft.vec_type(*lanes);
            let vparams: Vec<BasicMetadataTypeEnum> = vec![vt.into(); arity];
            let vf = self.module.get_function(vname).unwrap_or_else(|| {
                self.module.add_function(vname, vt.fn_type(&vparams, false), Some(Linkage::External))
            });
            vf.add_attribute(AttributeLoc::Function, self.enum_attr("memory", 0));
            vf.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind", 0));
            self.used.push(vf.as_global_value().as_pointer_value());
            vector_fns.push((vf, *lanes));
        }
        let pure = |f: FunctionValue<'ctx>| {
            f.add_attribute(AttributeLoc::Function, self.enum_attr("memory", 0));
            f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind", 0));
            f.add_attribute(AttributeLoc::Function, self.enum_attr("willreturn", 0));
        };
        let Some(&(canonical, lanes)) = vector_fns.first() else {
            let f = self.module.get_function(name).unwrap_or_else(|| {
                self.module.add_function(name, ft.fn_type(&params, false), Some(Linkage::External))
            });
            pure(f);
            self.math.insert(name, (f, None));
            return (f, None);
        };
        let scalar_name = format!("dynamo_{name}");
        let f = self.canonical_wrapper(&scalar_name, canonical, lanes, 1, ft, arity);
        f.add_attribute(AttributeLoc::Function, self.enum_attr("noinline", 0));
        // Every narrower width the host's vectors hold gets the canonical routine too: a
        // wrapper that fills the canonical width with copies of its lanes, so the loop
        // vectorizer at a narrower width and the SLP vectorizer packing a remainder's calls
        // stay on one routine.
        let mut variants: Vec<String> =
            offered.iter().map(|(vname, l)| format!("_ZGV_LLVM_N{l}{v_params}_{scalar_name}({vname})")).collect();
        let widths: Vec<u32> =
            self.target.vector_isas.iter().map(|&(_, l)| if double { l / 2 } else { l }).filter(|&w| w >= 2).collect();
        for w in widths {
            // Wider than the canonical width, two calls cost more than the narrower loop
            // (erf and tanh, 8 lanes on AVX-512 hosts: GELU 1.4 -> 1.9 ms over 2048x1000),
            // so a wider loop calls the scalar function per lane and the vectorizer avoids it.
            if offered.iter().any(|(_, l)| *l == w) || !(w < lanes && lanes % w == 0) {
                continue;
            }
            let wname = format!("{scalar_name}_v{w}");
            let wf = self.canonical_wrapper(&wname, canonical, lanes, w, ft, arity);
            self.used.push(wf.as_global_value().as_pointer_value());
            variants.push(format!("_ZGV_LLVM_N{w}{v_params}_{scalar_name}({wname})"));
        }
        let attr = Some(self.ctx.create_string_attribute("vector-function-abi-variant", &variants.join(",")));
        self.math.insert(name, (f, attr));
        (f, attr)
    }

    /// Defines `wname`, an internal pure function of `arity` arguments of `width` lanes of `ft`
    /// (a scalar for width 1) computing the libmvec variant `canonical` (`lanes` lanes) on
    /// them: a narrower input is repeated to fill `lanes` and the result's first `width` lanes
    /// are kept; a wider one is cut into parts of `lanes`, each a call, and put back together
    /// (Note [one routine per math function]).
    fn canonical_wrapper(
        &mut self,
        wname: &str,
        canonical: FunctionValue<'ctx>,
        lanes: u32,
        width: u32,
        ft: inkwell::types::FloatType<'ctx>,
        arity: usize,
    ) -> FunctionValue<'ctx> {
        let ty: BasicTypeEnum<'ctx> = if width == 1 { ft.into() } else { ft.vec_type(width).into() };
        let params: Vec<BasicMetadataTypeEnum> = vec![ty.into(); arity];
        let f = self.module.add_function(wname, ty.fn_type(&params, false), Some(Linkage::Internal));
        for attr in ["nounwind", "willreturn"] {
            f.add_attribute(AttributeLoc::Function, self.enum_attr(attr, 0));
        }
        f.add_attribute(AttributeLoc::Function, self.enum_attr("memory", 0));
        self.add_target_attrs(f);
        let b = self.ctx.create_builder();
        b.position_at_end(self.ctx.append_basic_block(f, "entry"));
        let i32t = self.ctx.i32_type();
        let mask = |idx: &mut dyn Iterator<Item = u32>| {
            let v: Vec<_> = idx.map(|i| i32t.const_int(i as u64, false)).collect();
            inkwell::types::VectorType::const_vector(&v)
        };
        let vt = ft.vec_type(lanes);
        let parts = if width > lanes { width / lanes } else { 1 };
        let mut results = Vec::new();
        for part in 0..parts {
            let args: Vec<BasicMetadataValueEnum> = (0..arity)
                .map(|i| {
                    let x = f.get_nth_param(i as u32).unwrap();
                    if width == 1 {
                        let one = b.build_insert_element(vt.get_poison(), x, i32t.const_zero(), "").expect("insertelement");
                        return b.build_shuffle_vector(one, vt.get_poison(), i32t.vec_type(lanes).const_zero(), "").expect("splat").into();
                    }
                    let xv = x.into_vector_value();
                    let m = if width > lanes {
                        mask(&mut (part * lanes..(part + 1) * lanes))
                    } else {
                        mask(&mut (0..lanes).map(|l| l % width))
                    };
                    b.build_shuffle_vector(xv, xv.get_type().get_poison(), m, "").expect("shufflevector").into()
                })
                .collect();
            let r = b.build_call(canonical, &args, "").expect("vector call").try_as_basic_value().basic().unwrap();
            results.push(r.into_vector_value());
        }
        let out: BasicValueEnum = if width == 1 {
            b.build_extract_element(results[0], i32t.const_zero(), "").expect("extractelement").into()
        } else if width < lanes {
            b.build_shuffle_vector(results[0], vt.get_poison(), mask(&mut (0..width)), "").expect("shufflevector").into()
        } else {
            // Concatenate the parts pairwise until one vector of `width` lanes is left.
            while results.len() > 1 {
                let n = results[0].get_type().get_size();
                results = results
                    .chunks(2)
                    .map(|p| b.build_shuffle_vector(p[0], p[1], mask(&mut (0..2 * n)), "").expect("concat"))
                    .collect();
            }
            results[0].into()
        };
        b.build_return(Some(&out)).expect("ret");
        f
    }

    fn call_math(
        &mut self,
        b: &Builder<'ctx>,
        name: &'static str,
        args: &[FloatValue<'ctx>],
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let (f, attr) = self.math_fn(name, args.len());
        let margs: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = b.build_call(f, &margs, name).map_err(|e| bad(e.to_string()))?;
        if let Some(attr) = attr {
            call.add_attribute(AttributeLoc::Function, attr);
        }
        call.try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| bad(format!("call to {name} returned void")))
    }

    /// The float32 function `f32_name` of `x`, or its float64 twin `f64_name` widened and
    /// narrowed when the target computes it in double (Note [float math in double]).
    fn call_unary_math(
        &mut self,
        b: &Builder<'ctx>,
        f32_name: &'static str,
        f64_name: &'static str,
        x: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        if x.get_type() == self.ctx.f32_type() && self.target.math_in_double.iter().any(|n| n == f64_name) {
            self.call_math_in_double(b, f64_name, x)
        } else {
            self.call_math(b, f32_name, &[x])
        }
    }

    /// `name` (a float64 libm function of [`F64_MATH`]) of the float32 `x`: widened, computed in
    /// float64 and rounded back once (Note [float math in double]).
    fn call_math_in_double(
        &mut self,
        b: &Builder<'ctx>,
        name: &'static str,
        x: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let (f64t, f32t) = (self.ctx.f64_type(), self.ctx.f32_type());
        let wide = b.build_float_ext(x, f64t, "").map_err(|e| bad(e.to_string()))?;
        let r = self.call_math(b, name, &[wide])?;
        b.build_float_trunc(r, f32t, "").map_err(|e| bad(e.to_string()))
    }

    fn call_intrinsic(
        &self,
        b: &Builder<'ctx>,
        name: &str,
        x: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let ty: BasicTypeEnum = x.get_type().into();
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, &[ty]))
            .ok_or_else(|| bad(format!("missing intrinsic {name}")))?;
        let call = b.build_call(decl, &[x.into()], "").map_err(|e| bad(e.to_string()))?;
        call.try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| bad(format!("intrinsic {name} returned void")))
    }

    /// Emits `kernel` (already legalized) and returns the external entry function.
    pub fn emit_kernel(&mut self, kernel: &Kernel) -> Result<FunctionValue<'ctx>, CodegenError> {
        kernel.verify().map_err(|errs| CodegenError::Verify(errs.join("; ")))?;
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let ptrt = ctx.ptr_type(AddressSpace::default());
        let n_args = kernel.args.len();

        // The body: noalias pointer params, loop nest over [start, end) x ranges[1..].
        let mut params: Vec<BasicMetadataTypeEnum> = vec![ptrt.into(); n_args];
        params.push(i64t.into());
        params.push(i64t.into());
        let body_fn = self.module.add_function(
            &format!("{}_body", kernel.name),
            ctx.void_type().fn_type(&params, false),
            Some(Linkage::Internal),
        );
        self.add_target_attrs(body_fn);
        for (i, a) in kernel.args.iter().enumerate() {
            let loc = AttributeLoc::Param(i as u32);
            body_fn.add_attribute(loc, self.enum_attr("noalias", 0));
            body_fn.add_attribute(loc, self.enum_attr("nocapture", 0));
            if !a.is_output {
                body_fn.add_attribute(loc, self.enum_attr("readonly", 0));
            }
        }
        let b = ctx.create_builder();
        let entry = ctx.append_basic_block(body_fn, "entry");
        b.position_at_end(entry);
        let ptrs: Vec<PointerValue> =
            (0..n_args).map(|i| body_fn.get_nth_param(i as u32).unwrap().into_pointer_value()).collect();
        let start = body_fn.get_nth_param(n_args as u32).unwrap().into_int_value();
        let end = body_fn.get_nth_param(n_args as u32 + 1).unwrap().into_int_value();
        let n_dims = kernel.ranges.len();

        // Note [scatter stores]: their outputs start at zero (the kernel runs as one call).
        let mut zeroed: Vec<u32> = Vec::new();
        for st in &kernel.stores {
            if let (Some(sc), false) = (&st.scatter, zeroed.contains(&st.arg)) {
                zeroed.push(st.arg);
                let dt = kernel.args[st.arg as usize].dtype;
                let bytes = i64t.const_int((sc.numel * dt.size_bytes() as i64) as u64, false);
                e(b.build_memset(ptrs[st.arg as usize], dt.size_bytes() as u32, ctx.i8_type().const_zero(), bytes))?;
            }
        }

        // Loop nest. Without tiling: one loop per dim, dim 0 over [start, end). With a tile T, the
        // two innermost dims (a, b) become a_blk, b_blk (step T), then a, b within the block
        // (bounded by min), so both operand orders reuse cache lines (transposes).
        if !kernel.reduction_ranges.is_empty() {
            self.emit_reduction_nest(&b, body_fn, kernel, &ptrs, start, end)?;
        } else {
            let mut loops: Vec<OpenLoop<'ctx>> = Vec::new();
            let mut ivs: Vec<IntValue<'ctx>> = Vec::with_capacity(n_dims);
            let bounds = |d: usize| -> (IntValue<'ctx>, IntValue<'ctx>) {
                if d == 0 {
                    (start, end)
                } else {
                    (i64t.const_zero(), i64t.const_int(kernel.ranges[d] as u64, false))
                }
            };
            let tiled = kernel.tile.filter(|_| n_dims >= 2);
            // Note [transposed tiles]: in a full TxT tile, each f32 load that is unit-stride along `a`
            // but strided along `b` is loaded as T vectors along `a`, transposed in registers and
            // staged in a stack buffer, so the vectorized inner loop over `b` reads it contiguously.
            // Partial tiles at the edges use plain (gathering) loads.
            let transposed: Vec<usize> = match tiled {
                Some(t) if t == TRANSPOSE_TILE => kernel
                    .exprs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, ex)| match ex {
                        Expr::Load { arg, index }
                            if kernel.args[*arg as usize].dtype == DType::F32
                                && index.strides[n_dims - 2] == 1
                                && !matches!(index.strides[n_dims - 1], 0 | 1) =>
                        {
                            Some(i)
                        }
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let tile_buffers: Vec<PointerValue<'ctx>> = transposed
                .iter()
                .map(|_| {
                    let ty = ctx.f32_type().array_type((TRANSPOSE_TILE * TRANSPOSE_TILE) as u32);
                    let buf = e(b.build_alloca(ty, "tile"))?;
                    if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&buf) {
                        let _ = inst.set_alignment(64);
                    }
                    Ok(buf)
                })
                .collect::<Result<_, CodegenError>>()?;
            let plain_dims = if tiled.is_some() { n_dims - 2 } else { n_dims };
            for d in 0..plain_dims {
                let (lo, hi) = bounds(d);
                let l = open_loop(ctx, &b, body_fn, lo, hi, 1, &format!("i{d}"))?;
                ivs.push(l.iv);
                loops.push(l);
            }
            if let Some(t) = tiled {
                let (da, db) = (n_dims - 2, n_dims - 1);
                let (lo_a, hi_a) = bounds(da);
                let (lo_b, hi_b) = bounds(db);
                let tv = i64t.const_int(t as u64, false);
                let min = |x: IntValue<'ctx>, y: IntValue<'ctx>| -> Result<IntValue<'ctx>, CodegenError> {
                    let lt = e(b.build_int_compare(IntPredicate::SLT, x, y, ""))?;
                    Ok(e(b.build_select(lt, x, y, ""))?.into_int_value())
                };
                // Two levels: TILE_BLOCK x TILE_BLOCK blocks of T x T tiles, so the strided side of a
                // transpose reads several cache lines per page it visits (fewer TLB misses).
                let blk = TILE_BLOCK.max(t);
                let bv = i64t.const_int(blk as u64, false);
                let a_outer = open_loop(ctx, &b, body_fn, lo_a, hi_a, blk, &format!("i{da}_block"))?;
                let b_outer = open_loop(ctx, &b, body_fn, lo_b, hi_b, blk, &format!("i{db}_block"))?;
                let hi_a = min(e(b.build_int_nsw_add(a_outer.iv, bv, ""))?, hi_a)?;
                let hi_b = min(e(b.build_int_nsw_add(b_outer.iv, bv, ""))?, hi_b)?;
                let (lo_a, lo_b) = (a_outer.iv, b_outer.iv);
                loops.push(a_outer);
                loops.push(b_outer);
                let a_blk = open_loop(ctx, &b, body_fn, lo_a, hi_a, t, &format!("i{da}_blk"))?;
                let b_blk = open_loop(ctx, &b, body_fn, lo_b, hi_b, t, &format!("i{db}_blk"))?;
                let a_end = min(e(b.build_int_nsw_add(a_blk.iv, tv, ""))?, hi_a)?;
                let b_end = min(e(b.build_int_nsw_add(b_blk.iv, tv, ""))?, hi_b)?;
                let (a0, b0) = (a_blk.iv, b_blk.iv);
                loops.push(a_blk);
                loops.push(b_blk);
                if transposed.is_empty() {
                    self.emit_tile_loops(&b, body_fn, kernel, &ptrs, &ivs, (a0, a_end), (b0, b_end), &[])?;
                } else {
                    let a_len = e(b.build_int_nsw_sub(a_end, a0, ""))?;
                    let b_len = e(b.build_int_nsw_sub(b_end, b0, ""))?;
                    let a_full = e(b.build_int_compare(IntPredicate::EQ, a_len, tv, ""))?;
                    let b_full = e(b.build_int_compare(IntPredicate::EQ, b_len, tv, ""))?;
                    let full = e(b.build_and(a_full, b_full, ""))?;
                    let fast = ctx.append_basic_block(body_fn, "tile_full");
                    let slow = ctx.append_basic_block(body_fn, "tile_edge");
                    let join = ctx.append_basic_block(body_fn, "tile_done");
                    e(b.build_conditional_branch(full, fast, slow))?;
                    b.position_at_end(fast);
                    let mut staged = Vec::new();
                    for (&expr, &buffer) in transposed.iter().zip(&tile_buffers) {
                        let Expr::Load { arg, index } = &kernel.exprs[expr] else { unreachable!() };
                        self.emit_transpose_tile(&b, ptrs[*arg as usize], index, &ivs, a0, b0, buffer)?;
                        staged.push(StagedLoad { expr, buffer, a_blk: a0, b_blk: b0 });
                    }
                    // Constant trip counts (T) let LLVM turn the inner loop into whole vectors.
                    let a_hi = e(b.build_int_nsw_add(a0, tv, ""))?;
                    let b_hi = e(b.build_int_nsw_add(b0, tv, ""))?;
                    self.emit_tile_loops(&b, body_fn, kernel, &ptrs, &ivs, (a0, a_hi), (b0, b_hi), &staged)?;
                    e(b.build_unconditional_branch(join))?;
                    b.position_at_end(slow);
                    self.emit_tile_loops(&b, body_fn, kernel, &ptrs, &ivs, (a0, a_end), (b0, b_end), &[])?;
                    e(b.build_unconditional_branch(join))?;
                    b.position_at_end(join);
                }
            } else {
                self.emit_body(&b, kernel, &ptrs, &ivs, &[])?;
            }

            // Close the loops innermost first: body -> latch -> header; exit -> outer latch.
            for l in loops.iter().rev() {
                close_loop(ctx, &b, l)?;
            }
        }
        e(b.build_return(None))?;

        // The entry wrapper with the uniform signature.
        let entry_fn = self.module.add_function(
            &kernel.name,
            ctx.void_type().fn_type(&[ptrt.into(), i64t.into(), i64t.into()], false),
            Some(Linkage::External),
        );
        self.add_target_attrs(entry_fn);
        let bb = ctx.append_basic_block(entry_fn, "entry");
        b.position_at_end(bb);
        let args_ptr = entry_fn.get_nth_param(0).unwrap().into_pointer_value();
        let mut call_args: Vec<BasicMetadataValueEnum> = Vec::new();
        for i in 0..n_args {
            let slot =
                unsafe { e(b.build_in_bounds_gep(ptrt, args_ptr, &[i64t.const_int(i as u64, false)], ""))? };
            call_args.push(e(b.build_load(ptrt, slot, &format!("a{i}")))?.into());
        }
        call_args.push(entry_fn.get_nth_param(1).unwrap().into());
        call_args.push(entry_fn.get_nth_param(2).unwrap().into());
        e(b.build_call(body_fn, &call_args, ""))?;
        e(b.build_return(None))?;
        Ok(entry_fn)
    }

    /// Emits the loop nest of a reduction kernel (see `kernel.rs`, "Reductions"): the outer loops
    /// over `ranges` (dim 0 over `[start, end)`), and inside every point one loop nest over
    /// `reduction_ranges` per phase. Expressions that do not move with the reduction variables are
    /// computed once per point, before the first loop that needs them; accumulators live in stack
    /// slots that `mem2reg` turns into loop-carried values, and the accumulation carries the
    /// `reassoc` flag so the loop vectorizer may keep per-lane partial results.
    fn emit_reduction_nest(
        &mut self,
        b: &Builder<'ctx>,
        f: FunctionValue<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
    ) -> Result<(), CodegenError> {
        use crate::kernel::ReduceOp;
        let reordered = reduction_memory_order(kernel);
        let kernel = reordered.as_ref().unwrap_or(kernel);
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let f32t = ctx.f32_type();
        let n_outer = kernel.ranges.len();
        let n_red = kernel.reduction_ranges.len();
        let inner = kernel.inner_exprs();
        let phase = kernel.phases();
        let n = kernel.exprs.len();
        // Loop number of every inner store: the phase of its value.
        let store_loop: Vec<Option<usize>> = kernel
            .stores
            .iter()
            .map(|st| {
                let moves = st.index.strides[n_outer..].iter().any(|x| *x != 0);
                moves.then_some(phase[st.value.0 as usize])
            })
            .collect();
        let mut n_loops = 0;
        for ex in &kernel.exprs {
            if let Expr::Reduce(_, v) = ex {
                n_loops = n_loops.max(phase[v.0 as usize] + 1);
            }
        }
        for l in store_loop.iter().flatten() {
            n_loops = n_loops.max(l + 1);
        }
        if let Some(j) = column_dim(kernel, &inner, n_loops, &store_loop) {
            return self.emit_column_reduction(b, f, kernel, ptrs, start, end, j, &inner, &store_loop);
        }
        // Accumulator slots, in the entry block.
        let mut acc: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        // Note [pairwise sums]: a sum over more than SUM_BLOCK elements accumulates each pass of
        // the innermost reduction loop (split into blocks of at most SUM_BLOCK) in a local
        // accumulator, then pushes that block sum into a binary-counter stack that adds blocks
        // pairwise (like torch's cascade sum), so the rounding error grows with the log of the
        // number of blocks instead of linearly with the number of elements.
        let red_numel_all: i64 = kernel.reduction_ranges.iter().product();
        let pairwise = red_numel_all > SUM_BLOCK;
        // Note [ATen sum order]: which ordered sums get ATen's partial sums (slot arrays).
        let w = ATEN_VECTOR_WIDTH.load(std::sync::atomic::Ordering::Relaxed);
        // Rows of at most ATEN_ORDER_MAX elements only: the slotted sum is scalar code.
        let aten_n = Some(red_numel_all).filter(|&r| w > 0 && r > 0 && r <= ATEN_ORDER_MAX && r < 64 * w);
        let mut aten_slots: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        let mut local: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        let mut levels: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        let count_slot = if pairwise { Some(e(b.build_alloca(i64t, "blocks"))?) } else { None };
        let levels_ty = f32t.array_type(PAIRWISE_LEVELS as u32);
        let mut nan_acc: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        // The accumulator type of each reduction: f32, or f64 (Note [float64 sums] in kernel.rs),
        // which takes neither ATen's slot order nor pairwise blocks.
        let acc_ty: Vec<inkwell::types::FloatType<'ctx>> = (0..n)
            .map(|i| match kernel.dtype_of(crate::kernel::ExprId(i as u32)) {
                DType::F64 => ctx.f64_type(),
                _ => f32t,
            })
            .collect();
        for (i, ex) in kernel.exprs.iter().enumerate() {
            if let Expr::Reduce(op, v) = ex {
                let wide = acc_ty[i] != f32t;
                acc[i] = Some(e(b.build_alloca(acc_ty[i], &format!("acc{i}")))?);
                if wide {
                    continue;
                }
                if *op == ReduceOp::OrderedSum && aten_n.is_some() && !pairwise && contiguous_in_reduction(kernel, *v) {
                    // 4 W lanes and the tail (index 4 W).
                    let ty = f32t.array_type((4 * w + 1) as u32);
                    aten_slots[i] = Some(e(b.build_alloca(ty, &format!("aten{i}")))?);
                }
                if !op.is_sum() {
                    nan_acc[i] = Some(e(b.build_alloca(ctx.i8_type(), &format!("nan{i}")))?);
                }
                if pairwise && op.is_sum() {
                    local[i] = Some(e(b.build_alloca(f32t, &format!("block{i}")))?);
                    levels[i] = Some(e(b.build_alloca(levels_ty, &format!("levels{i}")))?);
                }
            }
        }
        let mut loops: Vec<OpenLoop<'ctx>> = Vec::new();
        let mut outer_ivs: Vec<IntValue<'ctx>> = Vec::new();
        for d in 0..n_outer {
            let (lo, hi) = if d == 0 {
                (start, end)
            } else {
                (i64t.const_zero(), i64t.const_int(kernel.ranges[d] as u64, false))
            };
            let l = open_loop(ctx, b, f, lo, hi, 1, &format!("i{d}"))?;
            outer_ivs.push(l.iv);
            loops.push(l);
        }
        if n_outer == 0 {
            // A full reduction to one value: the single point is index 0 of an implicit dim.
            let l = open_loop(ctx, b, f, start, end, 1, "i0")?;
            loops.push(l);
        }
        // Outer-level values; reduction variables read as 0 there (outer exprs have stride 0 on them).
        let mut outer_vals: Vec<Option<BasicValueEnum<'ctx>>> = vec![None; n];
        let mut padded = outer_ivs.clone();
        padded.extend(std::iter::repeat(i64t.const_zero()).take(n_red));
        let emit_outer = |this: &mut Self, outer_vals: &mut Vec<Option<BasicValueEnum<'ctx>>>, upto: usize| -> Result<(), CodegenError> {
            for (i, ex) in kernel.exprs.iter().enumerate() {
                if inner[i] || outer_vals[i].is_some() || matches!(ex, Expr::Reduce(..)) || phase[i] > upto {
                    continue;
                }
                let snapshot = outer_vals.clone();
                let v = this.emit_expr(b, kernel, ptrs, &padded, ex, &|id| {
                    snapshot[id.0 as usize].expect("outer operand emitted before its user")
                })?;
                outer_vals[i] = Some(v);
            }
            Ok(())
        };
        // Plan every loop's work first. Note [row cache]: an expensive inner value (it calls a
        // transcendental: softmax's exp(x - max)) that a later loop needs again is stored, in the
        // loop that first computes it, into a stack row indexed by the reduction position, and
        // loaded from there later instead of being recomputed. Only rows of at most
        // ROW_CACHE_MAX floats are cached (they live on the stack, one per cached value).
        let red_numel: i64 = kernel.reduction_ranges.iter().product();
        let expensive = expensive_exprs(kernel, &inner);
        let mut computed_in: Vec<Option<usize>> = vec![None; n];
        let mut cached = vec![false; n];
        let mut plans: Vec<(Vec<usize>, Vec<bool>)> = Vec::new();
        for k in 0..n_loops {
            let reduces: Vec<usize> = (0..n)
                .filter(|&i| matches!(kernel.exprs[i], Expr::Reduce(_, v) if phase[v.0 as usize] == k))
                .collect();
            let mut needed = vec![false; n];
            let mut stack: Vec<usize> = reduces
                .iter()
                .map(|&i| match kernel.exprs[i] {
                    Expr::Reduce(_, v) => v.0 as usize,
                    _ => unreachable!(),
                })
                .collect();
            for (si, st) in kernel.stores.iter().enumerate() {
                if store_loop[si] == Some(k) {
                    stack.push(st.value.0 as usize);
                }
            }
            while let Some(i) = stack.pop() {
                if !inner[i] || needed[i] {
                    continue;
                }
                if computed_in[i].is_some() && expensive[i] && red_numel <= ROW_CACHE_MAX {
                    cached[i] = true;
                    needed[i] = true;
                    continue;
                }
                needed[i] = true;
                match &kernel.exprs[i] {
                    Expr::Unary(_, a) | Expr::Cast(_, a) | Expr::MaskedLoad { mask: a, .. } | Expr::IndirectLoad { row: a, .. } => {
                        stack.push(a.0 as usize)
                    }
                    Expr::Binary(_, a, c) | Expr::Compare(_, a, c) => stack.extend([a.0 as usize, c.0 as usize]),
                    Expr::Select(c, a, d) => stack.extend([c.0 as usize, a.0 as usize, d.0 as usize]),
                    _ => {}
                }
            }
            for i in 0..n {
                if needed[i] && computed_in[i].is_none() {
                    computed_in[i] = Some(k);
                }
            }
            plans.push((reduces, needed));
        }
        // One stack row per cached value, in the entry block (allocas must precede the loops).
        let mut rows: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        if cached.iter().any(|c| *c) {
            let here = b.get_insert_block().ok_or_else(|| bad("builder not positioned"))?;
            let entry = f.get_first_basic_block().ok_or_else(|| bad("no entry block"))?;
            match entry.get_first_instruction() {
                Some(first) => b.position_before(&first),
                None => b.position_at_end(entry),
            }
            for i in 0..n {
                if cached[i] {
                    let ty = elem_llvm_type(ctx, kernel.dtype_of(crate::kernel::ExprId(i as u32)));
                    let row = e(b.build_array_alloca(ty, i64t.const_int(red_numel as u64, false), &format!("row{i}")))?;
                    rows[i] = Some(row);
                }
            }
            b.position_at_end(here);
        }
        for (k, (reduces, needed)) in plans.into_iter().enumerate() {
            emit_outer(self, &mut outer_vals, k)?;
            for &r in &reduces {
                let Expr::Reduce(op, _) = kernel.exprs[r] else { unreachable!() };
                e(b.build_store(acc[r].unwrap(), acc_ty[r].const_float(op.identity() as f64)))?;
                if let Some(arr) = aten_slots[r] {
                    for q in 0..(4 * w + 1) as u64 {
                        let ptr = unsafe { e(b.build_in_bounds_gep(f32t, arr, &[i64t.const_int(q, false)], ""))? };
                        e(b.build_store(ptr, f32t.const_zero()))?;
                    }
                }
                if let Some(slot) = nan_acc[r] {
                    e(b.build_store(slot, ctx.i8_type().const_zero()))?;
                }
            }
            let blocked = reduces.iter().any(|&r| local[r].is_some());
            let count_slot = count_slot.filter(|_| blocked);
            if let Some(slot) = count_slot {
                e(b.build_store(slot, i64t.const_zero()))?;
            }
            let mut red_loops = Vec::new();
            let mut ivs = outer_ivs.clone();
            let last = kernel.reduction_ranges.len().saturating_sub(1);
            for (j, &r) in kernel.reduction_ranges.iter().enumerate() {
                let hi = i64t.const_int(r as u64, false);
                if blocked && j == last {
                    // Blocks of the innermost loop, each summed locally then pushed pairwise.
                    let blk = open_loop(ctx, b, f, i64t.const_zero(), hi, SUM_BLOCK, &format!("r{j}_{k}_block"))?;
                    let end = e(b.build_int_nsw_add(blk.iv, i64t.const_int(SUM_BLOCK as u64, false), ""))?;
                    let lt = e(b.build_int_compare(IntPredicate::SLT, end, hi, ""))?;
                    let end = e(b.build_select(lt, end, hi, ""))?.into_int_value();
                    for &rr in &reduces {
                        if let Some(slot) = local[rr] {
                            e(b.build_store(slot, f32t.const_zero()))?;
                        }
                    }
                    let lo = blk.iv;
                    red_loops.push(blk);
                    let l = open_loop(ctx, b, f, lo, end, 1, &format!("r{j}_{k}"))?;
                    ivs.push(l.iv);
                    red_loops.push(l);
                } else {
                    let l = open_loop(ctx, b, f, i64t.const_zero(), hi, 1, &format!("r{j}_{k}"))?;
                    ivs.push(l.iv);
                    red_loops.push(l);
                }
            }
            let mut vals = outer_vals.clone();
            // Linear position in the reduction space, for the row cache.
            let mut rpos = i64t.const_zero();
            if rows.iter().any(|r| r.is_some()) {
                for (j, &r) in kernel.reduction_ranges.iter().enumerate() {
                    let scaled = e(b.build_int_nsw_mul(rpos, i64t.const_int(r as u64, false), ""))?;
                    rpos = e(b.build_int_nsw_add(scaled, ivs[n_outer + j], ""))?;
                }
            }
            for i in 0..n {
                if !needed[i] {
                    continue;
                }
                let ty = elem_llvm_type(ctx, kernel.dtype_of(crate::kernel::ExprId(i as u32)));
                if let (Some(row), true) = (rows[i], computed_in[i] != Some(k)) {
                    let ptr = unsafe { e(b.build_in_bounds_gep(ty, row, &[rpos], ""))? };
                    vals[i] = Some(e(b.build_load(ty, ptr, ""))?);
                    continue;
                }
                let snapshot = &vals;
                let v = self.emit_expr(b, kernel, ptrs, &ivs, &kernel.exprs[i], &|id| {
                    snapshot[id.0 as usize].expect("operand emitted before its user")
                })?;
                if let Some(row) = rows[i] {
                    let ptr = unsafe { e(b.build_in_bounds_gep(ty, row, &[rpos], ""))? };
                    e(b.build_store(ptr, v))?;
                }
                vals[i] = Some(v);
            }
            for &r in &reduces {
                let Expr::Reduce(op, v) = kernel.exprs[r] else { unreachable!() };
                let slot = local[r].unwrap_or(acc[r].unwrap());
                let cur = e(b.build_load(acc_ty[r], slot, ""))?.into_float_value();
                let x = vals[v.0 as usize].ok_or_else(|| bad("reduced value not emitted"))?.into_float_value();
                if let (Some(arr), Some(rn)) = (aten_slots[r], aten_n) {
                    // Note [ATen sum order]: add x into the partial sum of this position.
                    let mut pos = i64t.const_zero();
                    for (j, &rr) in kernel.reduction_ranges.iter().enumerate() {
                        let scaled = e(b.build_int_nsw_mul(pos, i64t.const_int(rr as u64, false), ""))?;
                        pos = e(b.build_int_nsw_add(scaled, ivs[n_outer + j], ""))?;
                    }
                    let slot = aten_slot_index(b, i64t, pos, rn, w)?;
                    let ptr = unsafe { e(b.build_in_bounds_gep(f32t, arr, &[slot], ""))? };
                    let part = e(b.build_load(f32t, ptr, ""))?.into_float_value();
                    e(b.build_store(ptr, e(b.build_float_add(part, x, ""))?))?;
                    continue;
                }
                let next = match op {
                    ReduceOp::Sum | ReduceOp::OrderedSum => {
                        let sum = e(b.build_float_add(cur, x, ""))?;
                        if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&sum) {
                            let _ = inst.set_fast_math_flags(inkwell::values::FastMathFlags::AllowReassoc);
                        }
                        sum
                    }
                    ReduceOp::Max | ReduceOp::Min => {
                        let pred = if op == ReduceOp::Max { FloatPredicate::OGT } else { FloatPredicate::OLT };
                        let better = e(b.build_float_compare(pred, x, cur, ""))?;
                        let fmf = inkwell::values::FastMathFlags::NoNaNs | inkwell::values::FastMathFlags::NoSignedZeros;
                        if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&better) {
                            let _ = inst.set_fast_math_flags(fmf);
                        }
                        let m = e(b.build_select(better, x, cur, ""))?;
                        if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&m) {
                            let _ = inst.set_fast_math_flags(fmf);
                        }
                        let nan_slot = nan_acc[r].ok_or_else(|| bad("max/min without a NaN accumulator"))?;
                        let seen = e(b.build_load(ctx.i8_type(), nan_slot, ""))?.into_int_value();
                        let is_nan = e(b.build_float_compare(FloatPredicate::UNO, x, x, ""))?;
                        let z = e(b.build_int_z_extend(is_nan, ctx.i8_type(), ""))?;
                        e(b.build_store(nan_slot, e(b.build_or(seen, z, ""))?))?;
                        m.into_float_value()
                    }
                };
                e(b.build_store(slot, next))?;
            }
            for (si, st) in kernel.stores.iter().enumerate() {
                if store_loop[si] == Some(k) {
                    let value = vals[st.value.0 as usize].ok_or_else(|| bad("stored value not emitted"))?;
                    self.emit_store(b, kernel, ptrs, &ivs, st, value, &|_| Err(bad("a scatter store in a reduction kernel")))?;
                }
            }
            for (li, l) in red_loops.iter().enumerate().rev() {
                close_loop(ctx, b, l)?;
                if let (Some(count_slot), true) = (count_slot, li == red_loops.len() - 1) {
                    // One block done: push its local sums pairwise.
                    let cnt = e(b.build_load(i64t, count_slot, ""))?.into_int_value();
                    let cnt1 = e(b.build_int_add(cnt, i64t.const_int(1, false), ""))?;
                    e(b.build_store(count_slot, cnt1))?;
                    for &r in &reduces {
                        if let (Some(slot), Some(stack)) = (local[r], levels[r]) {
                            let sum = e(b.build_load(f32t, slot, ""))?.into_float_value();
                            self.emit_pairwise_push(b, f, stack, levels_ty, sum, cnt1)?;
                        }
                    }
                }
            }
            for &r in &reduces {
                let v = match (levels[r], count_slot) {
                    (Some(stack), Some(count_slot)) => {
                        // Total: the stack levels whose bit is set in the block count, low first.
                        let cnt = e(b.build_load(i64t, count_slot, ""))?.into_int_value();
                        let mut total = f32t.const_zero();
                        for level in 0..PAIRWISE_LEVELS {
                            let ptr = unsafe {
                                e(b.build_in_bounds_gep(levels_ty, stack, &[i64t.const_zero(), i64t.const_int(level, false)], ""))?
                            };
                            let part = e(b.build_load(f32t, ptr, ""))?.into_float_value();
                            let bit = e(b.build_right_shift(cnt, i64t.const_int(level, false), false, ""))?;
                            let bit = e(b.build_and(bit, i64t.const_int(1, false), ""))?;
                            let set = e(b.build_int_compare(IntPredicate::NE, bit, i64t.const_zero(), ""))?;
                            let add = e(b.build_float_add(total, part, ""))?;
                            total = e(b.build_select(set, add, total, ""))?.into_float_value();
                        }
                        total.into()
                    }
                    _ => match (aten_slots[r], aten_n) {
                        (Some(arr), Some(rn)) => aten_combine(b, f32t, i64t, arr, rn, w)?.into(),
                        _ => e(b.build_load(acc_ty[r], acc[r].unwrap(), ""))?,
                    },
                };
                // Note [nan-propagating max]: the max/min above is a plain compare-and-select
                // (vmaxps once vectorized); a NaN anywhere in the loop is tracked apart and
                // makes the result NaN, as torch.amax/amin do.
                let v = match nan_acc[r] {
                    Some(slot) => {
                        let seen = e(b.build_load(ctx.i8_type(), slot, ""))?.into_int_value();
                        let any = e(b.build_int_compare(IntPredicate::NE, seen, ctx.i8_type().const_zero(), ""))?;
                        e(b.build_select(any, f32t.const_float(f64::NAN), v.into_float_value(), ""))?
                    }
                    None => v,
                };
                outer_vals[r] = Some(v);
            }
        }
        emit_outer(self, &mut outer_vals, usize::MAX)?;
        for (si, st) in kernel.stores.iter().enumerate() {
            if store_loop[si].is_none() {
                let value = outer_vals[st.value.0 as usize].ok_or_else(|| bad("stored value not emitted"))?;
                self.emit_store(b, kernel, ptrs, &padded, st, value, &|_| Err(bad("a scatter store in a reduction kernel")))?;
            }
        }
        for l in loops.iter().rev() {
            close_loop(ctx, b, l)?;
        }
        Ok(())
    }

    /// Note [column reductions]: a one-loop reduction whose loads are unit-stride along the last
    /// non-trivial outer dim `j` and strided along the reduction (`x.sum(0)` of a row-major
    /// matrix) runs with `j` innermost instead: for a block of up to COLUMN_BLOCK points along
    /// `j`, an array of accumulators is updated for every reduction step, so the inner loop
    /// reads memory contiguously and vectorizes across the points; then every point's outer
    /// expressions and stores run from its accumulator. Each point adds its values in reduction
    /// order, as torch's column reductions do; columns longer than SUM_BLOCK are summed in blocks
    /// whose sums are then added (see the comment at `blocked`).
    #[allow(clippy::too_many_arguments)]
    fn emit_column_reduction(
        &mut self,
        b: &Builder<'ctx>,
        f: FunctionValue<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        j: usize,
        inner: &[bool],
        store_loop: &[Option<usize>],
    ) -> Result<(), CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let f32t = ctx.f32_type();
        let n = kernel.exprs.len();
        let n_outer = kernel.ranges.len();
        let arr_ty = f32t.array_type(COLUMN_BLOCK as u32);
        let reduces: Vec<usize> = (0..n).filter(|&i| matches!(kernel.exprs[i], Expr::Reduce(..))).collect();
        let mut arrs: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        for &r in &reduces {
            arrs[r] = Some(e(b.build_alloca(arr_ty, &format!("column{r}")))?);
        }
        // Long column sums are blocked: the outermost reduction loop runs in blocks of about
        // SUM_BLOCK values per point, each summed into `arrs` from zero and then added into
        // `totals` (a two-level sum: float32 error grows with blocks + block length, not with
        // the column's length; 2**25 ones sum to 2**25, not 2**24).
        let red_numel_all: i64 = kernel.reduction_ranges.iter().product();
        let inner_numel: i64 = kernel.reduction_ranges.iter().skip(1).product();
        let blocked = red_numel_all > SUM_BLOCK
            && reduces.iter().any(|&r| matches!(kernel.exprs[r], Expr::Reduce(op, _) if op.is_sum()));
        let outer_block = (SUM_BLOCK / inner_numel.max(1)).max(1);
        let mut totals: Vec<Option<PointerValue<'ctx>>> = vec![None; n];
        if blocked {
            for &r in &reduces {
                if matches!(kernel.exprs[r], Expr::Reduce(op, _) if op.is_sum()) {
                    totals[r] = Some(e(b.build_alloca(arr_ty, &format!("column_total{r}")))?);
                }
            }
        }
        let mut loops: Vec<OpenLoop<'ctx>> = Vec::new();
        let mut outer_ivs: Vec<Option<IntValue<'ctx>>> = vec![None; n_outer];
        for d in 0..n_outer {
            if d == j {
                continue;
            }
            let (lo, hi) = if d == 0 {
                (start, end)
            } else {
                (i64t.const_zero(), i64t.const_int(kernel.ranges[d] as u64, false))
            };
            let l = open_loop(ctx, b, f, lo, hi, 1, &format!("i{d}"))?;
            outer_ivs[d] = Some(l.iv);
            loops.push(l);
        }
        let (j_lo, j_hi) = if j == 0 { (start, end) } else { (i64t.const_zero(), i64t.const_int(kernel.ranges[j] as u64, false)) };
        let blk = open_loop(ctx, b, f, j_lo, j_hi, COLUMN_BLOCK, "j_block")?;
        let jb = blk.iv;
        let jend = e(b.build_int_nsw_add(jb, i64t.const_int(COLUMN_BLOCK as u64, false), ""))?;
        let lt = e(b.build_int_compare(IntPredicate::SLT, jend, j_hi, ""))?;
        let jend = e(b.build_select(lt, jend, j_hi, ""))?.into_int_value();
        let slot = |b: &Builder<'ctx>, arr: PointerValue<'ctx>, m: IntValue<'ctx>| -> Result<PointerValue<'ctx>, CodegenError> {
            let off = e(b.build_int_nsw_sub(m, jb, ""))?;
            Ok(unsafe { e(b.build_in_bounds_gep(arr_ty, arr, &[i64t.const_zero(), off], ""))? })
        };
        let ivs_at = |m: IntValue<'ctx>, red: &[IntValue<'ctx>]| -> Vec<IntValue<'ctx>> {
            let mut v: Vec<IntValue<'ctx>> = (0..n_outer).map(|d| if d == j { m } else { outer_ivs[d].unwrap() }).collect();
            v.extend_from_slice(red);
            v
        };
        // 1. Identities.
        let init = open_loop(ctx, b, f, jb, jend, 1, "j_init")?;
        for &r in &reduces {
            let Expr::Reduce(op, _) = kernel.exprs[r] else { unreachable!() };
            e(b.build_store(slot(b, arrs[r].unwrap(), init.iv)?, f32t.const_float(op.identity() as f64)))?;
            if let Some(t) = totals[r] {
                e(b.build_store(slot(b, t, init.iv)?, f32t.const_zero()))?;
            }
        }
        close_loop(ctx, b, &init)?;
        // 2. Reduction steps, points innermost.
        let mut red_loops = Vec::new();
        let mut rivs = Vec::new();
        let mut block_loop = None;
        for (k, &r) in kernel.reduction_ranges.iter().enumerate() {
            let hi = i64t.const_int(r as u64, false);
            let l = if blocked && k == 0 {
                let bl = open_loop(ctx, b, f, i64t.const_zero(), hi, outer_block, "r0_block")?;
                let end = e(b.build_int_nsw_add(bl.iv, i64t.const_int(outer_block as u64, false), ""))?;
                let lt = e(b.build_int_compare(IntPredicate::SLT, end, hi, ""))?;
                let end = e(b.build_select(lt, end, hi, ""))?.into_int_value();
                let lo = bl.iv;
                block_loop = Some(bl);
                open_loop(ctx, b, f, lo, end, 1, "r0")?
            } else {
                open_loop(ctx, b, f, i64t.const_zero(), hi, 1, &format!("r{k}"))?
            };
            rivs.push(l.iv);
            red_loops.push(l);
        }
        let ml = open_loop(ctx, b, f, jb, jend, 1, "j")?;
        let ivs = ivs_at(ml.iv, &rivs);
        let mut vals: Vec<Option<BasicValueEnum<'ctx>>> = vec![None; n];
        // What the accumulators and the stores inside the reduction loop read.
        let mut feeds = feeds_reduce(kernel);
        let inner_stores: Vec<usize> = (0..kernel.stores.len()).filter(|&si| store_loop[si].is_some()).collect();
        for &si in &inner_stores {
            mark_operands(kernel, kernel.stores[si].value.0 as usize, &mut feeds);
        }
        for (i, ex) in kernel.exprs.iter().enumerate() {
            if matches!(ex, Expr::Reduce(..)) || !feeds[i] {
                continue;
            }
            let snapshot = &vals;
            vals[i] = Some(self.emit_expr(b, kernel, ptrs, &ivs, ex, &|id| snapshot[id.0 as usize].expect("operand emitted"))?);
        }
        for &r in &reduces {
            let Expr::Reduce(op, v) = kernel.exprs[r] else { unreachable!() };
            let p = slot(b, arrs[r].unwrap(), ml.iv)?;
            let cur = e(b.build_load(f32t, p, ""))?.into_float_value();
            let x = vals[v.0 as usize].ok_or_else(|| bad("reduced value not emitted"))?.into_float_value();
            let next = match op {
                crate::kernel::ReduceOp::Sum | crate::kernel::ReduceOp::OrderedSum => e(b.build_float_add(cur, x, ""))?,
                crate::kernel::ReduceOp::Max => self.call_intrinsic2(b, "llvm.maximum", cur, x)?,
                crate::kernel::ReduceOp::Min => self.call_intrinsic2(b, "llvm.minimum", cur, x)?,
            };
            e(b.build_store(p, next))?;
        }
        for &si in &inner_stores {
            let st = &kernel.stores[si];
            let value = vals[st.value.0 as usize].ok_or_else(|| bad("stored value not emitted"))?;
            self.emit_store(b, kernel, ptrs, &ivs, st, value, &|_| Err(bad("a scatter store in a reduction kernel")))?;
        }
        close_loop(ctx, b, &ml)?;
        for l in red_loops.iter().rev() {
            close_loop(ctx, b, l)?;
        }
        if let Some(bl) = block_loop {
            // One block done: add each point's block sum into its total and restart the block.
            let al = open_loop(ctx, b, f, jb, jend, 1, "j_total")?;
            for &r in &reduces {
                if let Some(t) = totals[r] {
                    let pb = slot(b, arrs[r].unwrap(), al.iv)?;
                    let pt = slot(b, t, al.iv)?;
                    let part = e(b.build_load(f32t, pb, ""))?.into_float_value();
                    let cur = e(b.build_load(f32t, pt, ""))?.into_float_value();
                    e(b.build_store(pt, e(b.build_float_add(cur, part, ""))?))?;
                    e(b.build_store(pb, f32t.const_zero()))?;
                }
            }
            close_loop(ctx, b, &al)?;
            close_loop(ctx, b, &bl)?;
        }
        // 3. Every point's outer expressions and stores.
        let fl = open_loop(ctx, b, f, jb, jend, 1, "j_out")?;
        let zeros: Vec<IntValue<'ctx>> = kernel.reduction_ranges.iter().map(|_| i64t.const_zero()).collect();
        let ivs = ivs_at(fl.iv, &zeros);
        let mut vals: Vec<Option<BasicValueEnum<'ctx>>> = vec![None; n];
        for (i, ex) in kernel.exprs.iter().enumerate() {
            if let Expr::Reduce(..) = ex {
                let arr = totals[i].or(arrs[i]).unwrap();
                vals[i] = Some(e(b.build_load(f32t, slot(b, arr, fl.iv)?, ""))?);
                continue;
            }
            if inner[i] {
                continue;
            }
            let snapshot = &vals;
            vals[i] = Some(self.emit_expr(b, kernel, ptrs, &ivs, ex, &|id| snapshot[id.0 as usize].expect("operand emitted"))?);
        }
        for (si, st) in kernel.stores.iter().enumerate() {
            if store_loop[si].is_some() {
                continue;
            }
            let value = vals[st.value.0 as usize].ok_or_else(|| bad("stored value not emitted"))?;
            self.emit_store(b, kernel, ptrs, &ivs, st, value, &|_| Err(bad("a scatter store in a reduction kernel")))?;
        }
        close_loop(ctx, b, &fl)?;
        close_loop(ctx, b, &blk)?;
        for l in loops.iter().rev() {
            close_loop(ctx, b, l)?;
        }
        Ok(())
    }

    /// Pushes block sum `sum` (the `count`-th block, from 1) into the pairwise stack: while the
    /// count's low bits are 1, the pending partial of that level is added and carried up; the
    /// result lands on the first level whose bit is 0 (Note [pairwise sums]).
    fn emit_pairwise_push(
        &self,
        b: &Builder<'ctx>,
        f: FunctionValue<'ctx>,
        stack: PointerValue<'ctx>,
        levels_ty: inkwell::types::ArrayType<'ctx>,
        sum: FloatValue<'ctx>,
        count: IntValue<'ctx>,
    ) -> Result<(), CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let f32t = ctx.f32_type();
        let pre = b.get_insert_block().ok_or_else(|| bad("builder not positioned"))?;
        let head = ctx.append_basic_block(f, "carry");
        let body = ctx.append_basic_block(f, "carry_add");
        let done = ctx.append_basic_block(f, "carry_done");
        e(b.build_unconditional_branch(head))?;
        b.position_at_end(head);
        let level = e(b.build_phi(i64t, "level"))?;
        let c = e(b.build_phi(i64t, "c"))?;
        let v = e(b.build_phi(f32t, "v"))?;
        level.add_incoming(&[(&i64t.const_zero(), pre)]);
        c.add_incoming(&[(&count, pre)]);
        v.add_incoming(&[(&sum, pre)]);
        let (lv, cv, vv) = (level.as_basic_value().into_int_value(), c.as_basic_value().into_int_value(), v.as_basic_value().into_float_value());
        let low = e(b.build_and(cv, i64t.const_int(1, false), ""))?;
        let even = e(b.build_int_compare(IntPredicate::EQ, low, i64t.const_zero(), ""))?;
        let room = e(b.build_int_compare(IntPredicate::ULT, lv, i64t.const_int(PAIRWISE_LEVELS - 1, false), ""))?;
        let carry = e(b.build_and(even, room, ""))?;
        e(b.build_conditional_branch(carry, body, done))?;
        b.position_at_end(body);
        let ptr = unsafe { e(b.build_in_bounds_gep(levels_ty, stack, &[i64t.const_zero(), lv], ""))? };
        let pending = e(b.build_load(f32t, ptr, ""))?.into_float_value();
        let nv = e(b.build_float_add(pending, vv, ""))?;
        let nl = e(b.build_int_add(lv, i64t.const_int(1, false), ""))?;
        let nc = e(b.build_right_shift(cv, i64t.const_int(1, false), false, ""))?;
        level.add_incoming(&[(&nl, body)]);
        c.add_incoming(&[(&nc, body)]);
        v.add_incoming(&[(&nv, body)]);
        e(b.build_unconditional_branch(head))?;
        b.position_at_end(done);
        let ptr = unsafe { e(b.build_in_bounds_gep(levels_ty, stack, &[i64t.const_zero(), lv], ""))? };
        e(b.build_store(ptr, vv))?;
        Ok(())
    }

    /// Stores `value` (of the argument's dtype) at `st.index` evaluated at `ivs`; a scatter store
    /// (Note [scatter stores] in kernel.rs) adds it at the row `vals_row` gives.
    #[allow(clippy::too_many_arguments)]
    fn emit_store(
        &self,
        b: &Builder<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        ivs: &[IntValue<'ctx>],
        st: &crate::kernel::Store,
        value: BasicValueEnum<'ctx>,
        vals_row: &dyn Fn(crate::kernel::ExprId) -> Result<BasicValueEnum<'ctx>, CodegenError>,
    ) -> Result<(), CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let dt = kernel.args[st.arg as usize].dtype;
        let mut off = i64t.const_int(st.index.offset as u64, true);
        for (d, &s) in st.index.strides.iter().enumerate() {
            if s != 0 {
                let term = e(b.build_int_nsw_mul(ivs[d], i64t.const_int(s as u64, true), ""))?;
                off = e(b.build_int_nsw_add(off, term, ""))?;
            }
        }
        let ty = storage_type(ctx, dt);
        let mut value = value;
        if let Some(sc) = &st.scatter {
            // Note [scatter stores]: `out[off + row * stride] += value`; a row outside
            // [0, size) adds +0.0 to row 0 (one unsigned compare and two selects, no branch).
            let r = vals_row(sc.row)?.into_int_value();
            let r = if r.get_type().get_bit_width() < 64 { e(b.build_int_s_extend(r, i64t, ""))? } else { r };
            let ok = e(b.build_int_compare(IntPredicate::ULT, r, i64t.const_int(sc.size as u64, false), ""))?;
            let r = e(b.build_select(ok, r, i64t.const_zero(), ""))?.into_int_value();
            let term = e(b.build_int_nsw_mul(r, i64t.const_int(sc.stride as u64, true), ""))?;
            off = e(b.build_int_nsw_add(off, term, ""))?;
            let v = value.into_float_value();
            let v = e(b.build_select(ok, v, v.get_type().const_zero(), ""))?.into_float_value();
            let ptr = unsafe { e(b.build_in_bounds_gep(ty, ptrs[st.arg as usize], &[off], ""))? };
            let old = e(b.build_load(ty, ptr, ""))?;
            if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&old) {
                let _ = inst.set_alignment(dt.size_bytes() as u32);
            }
            let old = match dt {
                DType::BF16 => ext_bf16(ctx, b, old.into_float_value())?,
                DType::F16 => e(b.build_float_ext(old.into_float_value(), v.get_type(), ""))?,
                _ => old.into_float_value(),
            };
            value = e(b.build_float_add(old, v, ""))?.into();
        }
        let value: BasicValueEnum<'ctx> = match dt {
            DType::F32 | DType::F64 | DType::I64 | DType::I32 => value,
            // fptrunc rounds to nearest even, as torch's float -> bfloat16/half conversions do.
            DType::BF16 => trunc_to_bf16(ctx, b, value.into_float_value())?.into(),
            DType::F16 => e(b.build_float_trunc(value.into_float_value(), ty.into_float_type(), ""))?.into(),
            DType::Bool => e(b.build_int_z_extend(value.into_int_value(), ctx.i8_type(), ""))?.into(),
        };
        let ptr = unsafe { e(b.build_in_bounds_gep(ty, ptrs[st.arg as usize], &[off], ""))? };
        let s = e(b.build_store(ptr, value))?;
        s.set_alignment(dt.size_bytes() as u32).map_err(|err| bad(err.to_string()))?;
        Ok(())
    }

    fn call_intrinsic2(
        &self,
        b: &Builder<'ctx>,
        name: &str,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, CodegenError> {
        let ty: BasicTypeEnum = x.get_type().into();
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, &[ty]))
            .ok_or_else(|| bad(format!("missing intrinsic {name}")))?;
        let call = b.build_call(decl, &[x.into(), y.into()], "").map_err(|e| bad(e.to_string()))?;
        call.try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| bad(format!("intrinsic {name} returned void")))
    }

    /// Opens the in-tile loops over `a` in `a_range` and `b` in `b_range`, emits the body and closes
    /// them, leaving the builder after the tile.
    #[allow(clippy::too_many_arguments)]
    fn emit_tile_loops(
        &mut self,
        b: &Builder<'ctx>,
        f: FunctionValue<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        outer_ivs: &[IntValue<'ctx>],
        a_range: (IntValue<'ctx>, IntValue<'ctx>),
        b_range: (IntValue<'ctx>, IntValue<'ctx>),
        staged: &[StagedLoad<'ctx>],
    ) -> Result<(), CodegenError> {
        let n = kernel.ranges.len();
        let a_in = open_loop(self.ctx, b, f, a_range.0, a_range.1, 1, &format!("i{}", n - 2))?;
        let b_in = open_loop(self.ctx, b, f, b_range.0, b_range.1, 1, &format!("i{}", n - 1))?;
        let mut ivs = outer_ivs.to_vec();
        ivs.push(a_in.iv);
        ivs.push(b_in.iv);
        self.emit_body(b, kernel, ptrs, &ivs, staged)?;
        // A full tile has a known trip count of T: keep the inner loop a loop so LoopVectorize
        // widens it along `b` (unrolled, it would vectorize along `a` with gathers and scatters).
        let hints: &[&str] = if staged.is_empty() { &[] } else { &["llvm.loop.unroll.disable"] };
        close_loop_with_hints(self.ctx, b, &b_in, hints)?;
        close_loop_with_hints(self.ctx, b, &a_in, hints)?;
        Ok(())
    }

    /// Emits every expression and store of `kernel` at loop variables `ivs` (one per dim), at the
    /// builder's position. Loads listed in `staged` read their tile buffer instead of memory.
    fn emit_body(
        &mut self,
        b: &Builder<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        ivs: &[IntValue<'ctx>],
        staged: &[StagedLoad<'ctx>],
    ) -> Result<(), CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let f32t = ctx.f32_type();
        let mut vals: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(kernel.exprs.len());
        for (i, expr) in kernel.exprs.iter().enumerate() {
            let v = match expr {
                Expr::Load { .. } if staged.iter().any(|st| st.expr == i) => {
                    // Read the transposed tile from its stack buffer: buf[(a - a_blk) * T + (b - b_blk)].
                    let st = staged.iter().find(|st| st.expr == i).unwrap();
                    let n = ivs.len();
                    let ra = e(b.build_int_nsw_sub(ivs[n - 2], st.a_blk, ""))?;
                    let rb = e(b.build_int_nsw_sub(ivs[n - 1], st.b_blk, ""))?;
                    let ra = e(b.build_int_nsw_mul(ra, i64t.const_int(TRANSPOSE_TILE as u64, false), ""))?;
                    let off = e(b.build_int_nsw_add(ra, rb, ""))?;
                    let ptr = unsafe { e(b.build_in_bounds_gep(f32t, st.buffer, &[off], ""))? };
                    e(b.build_load(f32t, ptr, ""))?
                }
                _ => self.emit_expr(b, kernel, ptrs, ivs, expr, &|id| vals[id.0 as usize])?,
            };
            vals.push(v);
        }
        for store in &kernel.stores {
            self.emit_store(b, kernel, ptrs, ivs, store, vals[store.value.0 as usize], &|id| Ok(vals[id.0 as usize]))?;
        }

        Ok(())
    }

    /// Emits one expression at the builder's position; operands come from `get`, loop variables
    /// from `ivs` (one per index dim).
    fn emit_expr(
        &mut self,
        b: &Builder<'ctx>,
        kernel: &Kernel,
        ptrs: &[PointerValue<'ctx>],
        ivs: &[IntValue<'ctx>],
        expr: &Expr,
        get: &dyn Fn(crate::kernel::ExprId) -> BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let f32t = ctx.f32_type();
        let boolt = ctx.bool_type();
        let elem_type = |dt: DType| storage_type(ctx, dt);
        let linear = |b: &Builder<'ctx>, index: &Index| -> Result<IntValue<'ctx>, CodegenError> {
            let mut acc = i64t.const_int(index.offset as u64, true);
            for (d, &s) in index.strides.iter().enumerate() {
                if s == 0 {
                    continue;
                }
                let term = e(b.build_int_nsw_mul(ivs[d], i64t.const_int(s as u64, true), ""))?;
                acc = e(b.build_int_nsw_add(acc, term, ""))?;
            }
            Ok(acc)
        };
        let fv = |id: &crate::kernel::ExprId| get(*id).into_float_value();
        let iv = |id: &crate::kernel::ExprId| get(*id).into_int_value();
        // Element `off` of argument `arg`, loaded at its alignment and widened to its value type
        // (half types to f32, bytes to i1).
        let load_elem = |arg: u32, off: IntValue<'ctx>| -> Result<BasicValueEnum<'ctx>, CodegenError> {
            let dt = kernel.args[arg as usize].dtype;
            let ptr = unsafe { e(b.build_in_bounds_gep(elem_type(dt), ptrs[arg as usize], &[off], ""))? };
            let raw = e(b.build_load(elem_type(dt), ptr, ""))?;
            if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&raw) {
                let _ = inst.set_alignment(dt.size_bytes() as u32);
            }
            Ok(match dt {
                DType::F32 | DType::F64 | DType::I64 | DType::I32 => raw,
                DType::BF16 => ext_bf16(ctx, b, raw.into_float_value())?.into(),
                DType::F16 => e(b.build_float_ext(raw.into_float_value(), f32t, ""))?.into(),
                DType::Bool => e(b.build_int_compare(IntPredicate::NE, raw.into_int_value(), ctx.i8_type().const_zero(), ""))?.into(),
            })
        };
    let v: BasicValueEnum<'ctx> = match expr {
            Expr::Load { arg, index } => load_elem(*arg, linear(b, index)?)?,
            Expr::IndirectLoad { arg, index, row, stride, size } => {
                // Note [indirect loads]: a row outside [0, size) reads row 0 (one unsigned
                // compare and a select), so the address stays inside the tensor.
                let r = iv(row);
                let r = if r.get_type().get_bit_width() < 64 { e(b.build_int_s_extend(r, i64t, ""))? } else { r };
                let ok = e(b.build_int_compare(IntPredicate::ULT, r, i64t.const_int(*size as u64, false), ""))?;
                let r = e(b.build_select(ok, r, i64t.const_zero(), ""))?.into_int_value();
                let term = e(b.build_int_nsw_mul(r, i64t.const_int(*stride as u64, true), ""))?;
                load_elem(*arg, e(b.build_int_nsw_add(linear(b, index)?, term, ""))?)?
            }
            Expr::InRange { index, size } => {
                // One unsigned compare: a negative coordinate is a huge unsigned one.
                let c = linear(b, index)?;
                e(b.build_int_compare(IntPredicate::ULT, c, i64t.const_int(*size as u64, false), ""))?.into()
            }
            Expr::MaskedLoad { arg, index, mask } => {
                // Note [masked loads]: element 0 is read where the mask is off (its address is
                // valid whenever the kernel runs: the window has a position inside the tensor),
                // and the value selected away, so the loop stays branch-free (vectorizable).
                let m = iv(mask);
                let off = e(b.build_select(m, linear(b, index)?, i64t.const_zero(), ""))?.into_int_value();
                let v = load_elem(*arg, off)?;
                let zero: BasicValueEnum<'ctx> = match v {
                    BasicValueEnum::FloatValue(f) => f.get_type().const_zero().into(),
                    BasicValueEnum::IntValue(i) => i.get_type().const_zero().into(),
                    other => return Err(bad(format!("masked load of {other:?}"))),
                };
                e(b.build_select(m, v, zero, ""))?
            }
            Expr::ConstF32(bits) => f32t.const_float(f32::from_bits(*bits) as f64).into(),
            Expr::ConstF64(bits) => ctx.f64_type().const_float(f64::from_bits(*bits)).into(),
            Expr::ConstInt(dt, v) => elem_llvm_type(ctx, *dt).into_int_type().const_int(*v as u64, true).into(),
            Expr::ConstBool(v) => boolt.const_int(*v as u64, false).into(),
            Expr::Unary(op @ (UnaryOp::Neg | UnaryOp::Abs), a) if kernel.dtype_of(*a).is_int() => {
                // Wrapping negation (torch: abs(INT64_MIN) stays INT64_MIN).
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
                UnaryOp::Abs => self.call_intrinsic(b, "llvm.fabs", fv(a))?.into(),
                UnaryOp::Sqrt => self.call_intrinsic(b, "llvm.sqrt", fv(a))?.into(),
                UnaryOp::Floor => self.call_intrinsic(b, "llvm.floor", fv(a))?.into(),
                UnaryOp::Ceil => self.call_intrinsic(b, "llvm.ceil", fv(a))?.into(),
                UnaryOp::Tanh => self.call_unary_math(b, "tanhf", "tanh", fv(a))?.into(),
                UnaryOp::Exp => self.call_unary_math(b, "expf", "exp", fv(a))?.into(),
                UnaryOp::Log => self.call_unary_math(b, "logf", "log", fv(a))?.into(),
                UnaryOp::Sin => self.call_unary_math(b, "sinf", "sin", fv(a))?.into(),
                UnaryOp::Cos => self.call_unary_math(b, "cosf", "cos", fv(a))?.into(),
                UnaryOp::Erf => self.call_unary_math(b, "erff", "erf", fv(a))?.into(),
                UnaryOp::Log1p => self.call_unary_math(b, "log1pf", "log1p", fv(a))?.into(),
                UnaryOp::Expm1 => self.call_unary_math(b, "expm1f", "expm1", fv(a))?.into(),
                UnaryOp::Not => e(b.build_xor(iv(a), boolt.const_int(1, false), ""))?.into(),
                UnaryOp::RoundBF16 | UnaryOp::RoundF16 => {
                    if *op == UnaryOp::RoundBF16 {
                        ext_bf16(ctx, b, trunc_to_bf16(ctx, b, fv(a))?)?.into()
                    } else {
                        let t = e(b.build_float_trunc(fv(a), ctx.f16_type(), ""))?;
                        e(b.build_float_ext(t, f32t, ""))?.into()
                    }
                }
                UnaryOp::Relu | UnaryOp::Sigmoid | UnaryOp::Reciprocal | UnaryOp::Rsqrt => {
                    return Err(bad(format!("{op:?} must be legalized before emission")))
                }
            },
            Expr::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), x, y) if kernel.dtype_of(*x).is_int() => {
                // Plain (wrapping) integer arithmetic: no nsw, overflow is defined as in torch.
                match op {
                    BinaryOp::Add => e(b.build_int_add(iv(x), iv(y), ""))?.into(),
                    BinaryOp::Sub => e(b.build_int_sub(iv(x), iv(y), ""))?.into(),
                    _ => e(b.build_int_mul(iv(x), iv(y), ""))?.into(),
                }
            }
            Expr::Binary(op, x, y) => match op {
                BinaryOp::Add => e(b.build_float_add(fv(x), fv(y), ""))?.into(),
                BinaryOp::Sub => e(b.build_float_sub(fv(x), fv(y), ""))?.into(),
                BinaryOp::Mul => e(b.build_float_mul(fv(x), fv(y), ""))?.into(),
                BinaryOp::Div => e(b.build_float_div(fv(x), fv(y), ""))?.into(),
                BinaryOp::Pow => self.call_math(b, "powf", &[fv(x), fv(y)])?.into(),
                BinaryOp::And => e(b.build_and(iv(x), iv(y), ""))?.into(),
                BinaryOp::Or => e(b.build_or(iv(x), iv(y), ""))?.into(),
                BinaryOp::Maximum | BinaryOp::Minimum => {
                    return Err(bad(format!("{op:?} must be legalized before emission")))
                }
            },
            Expr::Compare(op, x, y) if kernel.dtype_of(*x).is_int() => {
                build_compare(b, *op, true, get(*x), get(*y))?
            }
            Expr::Compare(op, x, y) => {
                build_compare(b, *op, false, get(*x), get(*y))?
            }
            Expr::Select(c, x, y) => e(b.build_select(iv(c), get(*x), get(*y), ""))?,
            Expr::Cast(to, a) => {
                let from = kernel.dtype_of(*a);
                let to_ty = elem_llvm_type(ctx, *to);
                let (from, to) = (from.value_type(), to.value_type());
                build_cast(b, from, to, to_ty, get(*a), false)?
            }
            Expr::Reduce(..) => return Err(bad("a Reduce is emitted by the reduction loop, not as an expression")),
        };
        Ok(v)
    }

    /// Loads the TxT tile of the transposed load `index` at (a_blk, b_blk) as T rows along `a`,
    /// transposes it in registers (shufflevector butterflies) and stores rows along `b` into
    /// `buffer` (T*T floats).
    #[allow(clippy::too_many_arguments)]
    fn emit_transpose_tile(
        &self,
        b: &Builder<'ctx>,
        base_ptr: PointerValue<'ctx>,
        index: &Index,
        outer_ivs: &[IntValue<'ctx>],
        a_blk: IntValue<'ctx>,
        b_blk: IntValue<'ctx>,
        buffer: PointerValue<'ctx>,
    ) -> Result<(), CodegenError> {
        let ctx = self.ctx;
        let i64t = ctx.i64_type();
        let i32t = ctx.i32_type();
        let f32t = ctx.f32_type();
        let t = TRANSPOSE_TILE as u32;
        let vt = f32t.vec_type(t);
        let n = index.strides.len();
        let (sa, sb) = (index.strides[n - 2], index.strides[n - 1]);
        debug_assert_eq!(sa, 1);
        let mut base = i64t.const_int(index.offset as u64, true);
        for (d, iv) in outer_ivs.iter().enumerate() {
            if index.strides[d] != 0 {
                let term = e(b.build_int_nsw_mul(*iv, i64t.const_int(index.strides[d] as u64, true), ""))?;
                base = e(b.build_int_nsw_add(base, term, ""))?;
            }
        }
        base = e(b.build_int_nsw_add(base, a_blk, ""))?;
        let bterm = e(b.build_int_nsw_mul(b_blk, i64t.const_int(sb as u64, true), ""))?;
        base = e(b.build_int_nsw_add(base, bterm, ""))?;
        // rows[k][j] = x[a_blk + j, b_blk + k]
        let mut rows: Vec<inkwell::values::VectorValue<'ctx>> = Vec::new();
        for k in 0..t as i64 {
            let off = e(b.build_int_nsw_add(base, i64t.const_int((k * sb) as u64, true), ""))?;
            let ptr = unsafe { e(b.build_in_bounds_gep(f32t, base_ptr, &[off], ""))? };
            let v = e(b.build_load(vt, ptr, ""))?;
            if let Some(inst) = inkwell::values::BasicValue::as_instruction_value(&v) {
                let _ = inst.set_alignment(4);
            }
            rows.push(v.into_vector_value());
        }
        // Each stage swaps bit `d` of the row index with bit `d` of the column index.
        let mut d = t / 2;
        while d >= 1 {
            let lo: Vec<_> = (0..t).map(|c| i32t.const_int(if c & d == 0 { c } else { t + c - d } as u64, false)).collect();
            let hi: Vec<_> = (0..t).map(|c| i32t.const_int(if c & d != 0 { t + c } else { c + d } as u64, false)).collect();
            let (lo, hi) = (inkwell::types::VectorType::const_vector(&lo), inkwell::types::VectorType::const_vector(&hi));
            for i in 0..t as usize {
                if i & d as usize != 0 {
                    continue;
                }
                let (x, y) = (rows[i], rows[i + d as usize]);
                rows[i] = e(b.build_shuffle_vector(x, y, lo, ""))?;
                rows[i + d as usize] = e(b.build_shuffle_vector(x, y, hi, ""))?;
            }
            d /= 2;
        }
        for (j, row) in rows.iter().enumerate() {
            let ptr = unsafe { e(b.build_in_bounds_gep(f32t, buffer, &[i64t.const_int(j as u64 * t as u64, false)], ""))? };
            let st = e(b.build_store(ptr, *row))?;
            st.set_alignment(4).map_err(|err| bad(err.to_string()))?;
        }
        let _ = sa;
        Ok(())
    }

    /// Adds `llvm.compiler.used` so the libmvec declarations survive until the vectorizer runs.
    pub fn finish(self) {
        if self.used.is_empty() {
            return;
        }
        let ptrt = self.ctx.ptr_type(AddressSpace::default());
        let arr = ptrt.const_array(&self.used);
        let g = self.module.add_global(arr.get_type(), None, "llvm.compiler.used");
        g.set_linkage(Linkage::Appending);
        g.set_section(Some("llvm.metadata"));
        g.set_initializer(&arr);
    }
}

/// Note [reduction memory order]: ATen reduces a tensor in its memory order, whatever its
/// logical order: TensorIterator's `reorder_dimensions` sorts the dims by the operands' strides
/// (the output's are 0 along reduced dims, so the input's decide) and coalesces the dense ones,
/// so `x.sum()` of a transposed `x` (or of `x.t() - m`, which eager materializes in `x.t()`'s
/// layout) is the sum of one contiguous row of storage. A kernel whose ordered sum walks its
/// reduction dims in another order than its summed operand's memory order would add the same
/// numbers in another order: fuzzer seed 1500000, program 6695, took the other branch of
/// `if x.sum() > 0` on a sum that is 0 up to rounding. Sums, max and min over the reduction
/// dims do not depend on the dims' order otherwise, so reordering them changes nothing else.
///
/// The kernel with its reduction dims reordered (descending strides of the first load, under an
/// ordered sum, that moves along every reduction dim of size > 1) when that makes some ordered
/// sum walk its operand row-major (`contiguous_in_reduction`) and none that did stops; `None`
/// when it is already in that order or no reordering helps.
fn reduction_memory_order(kernel: &Kernel) -> Option<Kernel> {
    use crate::kernel::ReduceOp;
    let n_outer = kernel.ranges.len();
    let n_red = kernel.reduction_ranges.len();
    if kernel.reduction_ranges.iter().filter(|r| **r > 1).count() < 2 {
        return None;
    }
    let sums: Vec<crate::kernel::ExprId> = kernel
        .exprs
        .iter()
        .filter_map(|ex| match ex {
            Expr::Reduce(ReduceOp::OrderedSum, v) => Some(*v),
            _ => None,
        })
        .collect();
    let before: Vec<bool> = sums.iter().map(|v| contiguous_in_reduction(kernel, *v)).collect();
    let first = sums.iter().zip(&before).find(|(_, c)| !**c).map(|(v, _)| *v)?;
    // The first full load under that sum: it decides the order.
    let mut stack = vec![first.0 as usize];
    let mut seen = vec![false; kernel.exprs.len()];
    let mut key: Option<Vec<i64>> = None;
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        match &kernel.exprs[i] {
            Expr::Load { index, .. } => {
                let red = &index.strides[n_outer..];
                if red.iter().zip(&kernel.reduction_ranges).all(|(s, r)| *s != 0 || *r == 1) {
                    key = Some(red.iter().map(|s| s.abs()).collect());
                    break;
                }
            }
            Expr::Unary(_, a) | Expr::Cast(_, a) => stack.push(a.0 as usize),
            Expr::Binary(_, a, c) | Expr::Compare(_, a, c) => stack.extend([c.0 as usize, a.0 as usize]),
            Expr::Select(c, a, d) => stack.extend([d.0 as usize, a.0 as usize, c.0 as usize]),
            _ => {}
        }
    }
    let key = key?;
    // Stable: dims of size 1 and equal strides keep their order.
    let mut perm: Vec<usize> = (0..n_red).collect();
    perm.sort_by(|&a, &b| {
        let ka = if kernel.reduction_ranges[a] == 1 { i64::MAX } else { key[a] };
        let kb = if kernel.reduction_ranges[b] == 1 { i64::MAX } else { key[b] };
        kb.cmp(&ka)
    });
    if perm.iter().enumerate().all(|(i, &d)| i == d) {
        return None;
    }
    let permute = |index: &Index| {
        let mut strides = index.strides[..n_outer].to_vec();
        strides.extend(perm.iter().map(|&d| index.strides[n_outer + d]));
        Index { offset: index.offset, strides }
    };
    let mut out = kernel.clone();
    out.reduction_ranges = perm.iter().map(|&d| kernel.reduction_ranges[d]).collect();
    for index in out.expr_indices_mut() {
        *index = permute(index);
    }
    for st in out.stores.iter_mut() {
        st.index = permute(&st.index);
    }
    let after: Vec<bool> = sums.iter().map(|v| contiguous_in_reduction(&out, *v)).collect();
    let keeps = before.iter().zip(&after).all(|(b, a)| !*b || *a);
    let gains = before.iter().zip(&after).any(|(b, a)| !*b && *a);
    (keeps && gains).then_some(out)
}

/// True when every load feeding `v` walks the reduction space in row-major order with unit
/// element stride, or not at all, or only along some reduced dims with the row-major stride
/// there (a broadcast operand: `x - x.mean(0)` summed over both dims reads the mean at
/// `[0, i1]`, or along one reduced dim only, at any stride), and at least one load walks it all: the summed values are one contiguous row,
/// which ATen's inner sum paths see after TensorIterator coalesces the reduced dims (eager
/// materializes such an expression at its full operands' row-major layout; broadcast operands
/// do not decide the layout). Masked and gathered loads count as full rows: they stand for the
/// fresh results of `pad` and `embedding`, which eager materializes row-major (fuzzer seed
/// 800031: a `cat` summed with `.item()` printed other digits than eager's).
fn contiguous_in_reduction(kernel: &Kernel, v: crate::kernel::ExprId) -> bool {
    let n_outer = kernel.ranges.len();
    let mut want = vec![0i64; kernel.reduction_ranges.len()];
    let mut acc = 1;
    for j in (0..want.len()).rev() {
        want[j] = acc;
        acc *= kernel.reduction_ranges[j];
    }
    let mut stack = vec![v.0 as usize];
    let mut seen = vec![false; kernel.exprs.len()];
    let (mut full, mut moving) = (false, false);
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        match &kernel.exprs[i] {
            // A masked or gathered load stands for the fresh result of `pad`, `embedding` or
            // `gather`, which eager materializes row-major over the whole space: a full row,
            // whatever the strides of the tensor read (its mask and row are coordinates and
            // indices, not summed values). A range check reads no memory.
            Expr::MaskedLoad { index, .. } | Expr::IndirectLoad { index, .. } => {
                let moves = index.strides[n_outer..].iter().any(|s| *s != 0);
                full |= moves;
                moving |= moves;
            }
            Expr::InRange { .. } => {}
            Expr::Load { index, .. } => {
                let red = &index.strides[n_outer..];
                // Row-major unit strides; a size-1 reduction dim may have any stride.
                let row_major = red
                    .iter()
                    .zip(&want)
                    .zip(&kernel.reduction_ranges)
                    .all(|((s, w), r)| s == w || *r == 1);
                let broadcast = red.iter().zip(&want).zip(&kernel.reduction_ranges).all(|((s, w), r)| *s == 0 || s == w || *r == 1);
                // An operand that moves along one reduced dim only (a keepdim statistic of the
                // other dims, `x - x.logsumexp(1, keepdim=True)` read at `[i0, 0]`) never
                // decides eager's layout, whatever its stride there: TensorIterator's
                // `reorder_dimensions` skips an operand's zero strides when it orders two dims.
                let moving_dims = red.iter().zip(&kernel.reduction_ranges).filter(|(s, r)| **s != 0 && **r > 1).count();
                let one_dim = moving_dims <= 1 && kernel.reduction_ranges.iter().filter(|r| **r > 1).count() > 1;
                if !broadcast && !one_dim {
                    return false;
                }
                full |= row_major;
                moving |= red.iter().any(|s| *s != 0);
            }
            Expr::Unary(_, a) | Expr::Cast(_, a) => stack.push(a.0 as usize),
            Expr::Binary(_, a, c) | Expr::Compare(_, a, c) => stack.extend([a.0 as usize, c.0 as usize]),
            Expr::Select(c, a, d) => stack.extend([c.0 as usize, a.0 as usize, d.0 as usize]),
            Expr::Reduce(..) => return false,
            _ => {}
        }
    }
    full || !moving
}

/// The partial sum (index into the 4 W + 1 slots) that reduction position `pos` of a row of `n`
/// elements adds into (Note [ATen sum order]); slot 4 W is the tail.
fn aten_slot_index<'ctx>(
    b: &Builder<'ctx>,
    i64t: inkwell::types::IntType<'ctx>,
    pos: IntValue<'ctx>,
    n: i64,
    w: i64,
) -> Result<IntValue<'ctx>, CodegenError> {
    let c = |v: i64| i64t.const_int(v as u64, true);
    if n < w {
        // row_sum over scalars: 4 ILP partials for the first 4 * (n / 4) elements, then slot 0.
        let ilp_end = 4 * (n / 4);
        let k = e(b.build_int_unsigned_rem(pos, c(4), ""))?;
        let in_ilp = e(b.build_int_compare(IntPredicate::ULT, pos, c(ilp_end), ""))?;
        return Ok(e(b.build_select(in_ilp, k, c(0), ""))?.into_int_value());
    }
    let nv = n / w;
    let ilp_end = 4 * w * (nv / 4);
    let lane = e(b.build_int_unsigned_rem(pos, c(w), ""))?;
    let vec = e(b.build_int_unsigned_div(pos, c(w), ""))?;
    let k = e(b.build_int_unsigned_rem(vec, c(4), ""))?;
    let ilp_slot = e(b.build_int_add(e(b.build_int_mul(k, c(w), ""))?, lane, ""))?;
    let in_ilp = e(b.build_int_compare(IntPredicate::ULT, pos, c(ilp_end), ""))?;
    let in_vecs = e(b.build_int_compare(IntPredicate::ULT, pos, c(nv * w), ""))?;
    let vec_slot = e(b.build_select(in_vecs, lane, c(4 * w), ""))?.into_int_value();
    Ok(e(b.build_select(in_ilp, ilp_slot, vec_slot, ""))?.into_int_value())
}

/// The sum of a row from its partial sums, combined in ATen's order (Note [ATen sum order]).
fn aten_combine<'ctx>(
    b: &Builder<'ctx>,
    f32t: inkwell::types::FloatType<'ctx>,
    i64t: inkwell::types::IntType<'ctx>,
    arr: PointerValue<'ctx>,
    n: i64,
    w: i64,
) -> Result<FloatValue<'ctx>, CodegenError> {
    let get = |q: i64| -> Result<FloatValue<'ctx>, CodegenError> {
        let ptr = unsafe { e(b.build_in_bounds_gep(f32t, arr, &[i64t.const_int(q as u64, false)], ""))? };
        Ok(e(b.build_load(f32t, ptr, ""))?.into_float_value())
    };
    if n < w {
        let mut s = get(0)?;
        for k in 1..4 {
            s = e(b.build_float_add(s, get(k)?, ""))?;
        }
        return Ok(s);
    }
    let mut total = get(4 * w)?;
    for l in 0..w {
        let mut p = get(l)?;
        for k in 1..4 {
            p = e(b.build_float_add(p, get(k * w + l)?, ""))?;
        }
        total = e(b.build_float_add(total, p, ""))?;
    }
    Ok(total)
}
