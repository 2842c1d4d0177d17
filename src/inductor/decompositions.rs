//! Decompositions: composite torch ops written once as rules over a small core (Pointwise bodies,
//! `Reduction`s and views), through the [`Lowerer`] builder (PyTorch: `torch/_decomp` and
//! `torch/_inductor/decomposition.py`, plus the view lowerings of `torch/_inductor/lowering.py`).
//!
//! Every rule reads its arguments by parameter name ([`bind`]), refuses what it does not model
//! with a reason (the node then runs as a FallbackKernel), and produces exactly the sizes and dtype
//! torch's meta says (`lowering::validate` checks).
//!
//! Views are unrealized Pointwise buffers whose body loads the base at a remapped index: affine
//! for permute/transpose/expand/squeeze/unsqueeze/slicing and for reshapes that only split dims
//! or add/remove size-1 dims; a reshape that merges dims of size > 1 would need division and is
//! refused (torch then makes the view, for free, on the real tensor). A view whose value leaves
//! the graph or feeds an op we do not lower is refused too, so that torch's aliasing is kept and
//! no copy is made.

use super::fx_import::{FxArg, FxNode, FxOp};
use super::ir::{Affine, BinaryOp, CmpOp, DType, OpsHandler, OpsValue, Reduction, ReductionType, UnaryOp};
use super::lowering::{load_broadcast, round_to_half, LoweringError, Lowerer, TensorRef};

type Decomposition = fn(&mut Lowerer<'_>) -> Result<TensorRef, LoweringError>;

// Note [backward sum order]: a `sum`/`mean` node is lowered as an `OrderedSum` (ATen's order of
// partial sums, Note [ATen sum order] in llvm/src/emit.rs) so that `.item()` of a user's sum
// prints as in eager. Rows of up to 64 elements get that order from scalar code (a stack slot
// per partial sum), 4-8x slower than the vectorized sum: tiny BERT's backward spent ~100 µs a
// step in such rows (layer-norm and softmax gradients over hidden size 64). The sums of a
// backward graph come from derivative rules (`sum_to`, the layer-norm and softmax gradients, the
// forward's statistics recomputed), which eager computes in its own fused kernels (layer-norm
// and softmax backward, column sums), not in ATen's sum order, so ordering them buys no
// agreement with eager. `inductor_compile(..., aten_sum_order=False)` (what the AOTAutograd
// backward compiler passes) lowers them as plain vectorized sums.
thread_local! {
    static ATEN_SUM_ORDER: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// While alive, `sum`/`mean` nodes lowered on this thread are `OrderedSum`s only when `on`
/// (Note [backward sum order]); the previous setting comes back on drop.
pub struct SumOrderGuard(bool);

impl SumOrderGuard {
    /// Sets whether this thread's lowerings sum in ATen's order; returns the guard that restores
    /// the previous setting.
    pub fn set(on: bool) -> SumOrderGuard {
        SumOrderGuard(ATEN_SUM_ORDER.with(|c| c.replace(on)))
    }
}

impl Drop for SumOrderGuard {
    fn drop(&mut self) {
        ATEN_SUM_ORDER.with(|c| c.set(self.0));
    }
}

/// The decomposition table: canonical op name -> rule.
pub fn lookup(canonical: &str) -> Option<Decomposition> {
    Some(match canonical {
        "batch_norm" => batch_norm,
        "layer_norm" => layer_norm,
        "softmax" => softmax,
        "log_softmax" => log_softmax,
        "sum" | "sum_unordered" => sum,
        "mean" | "mean_unordered" => mean,
        "amax" => amax,
        "amin" => amin,
        "var" => var,
        "std" => std,
        "rms_norm" => rms_norm,
        "adaptive_avg_pool2d" => adaptive_avg_pool2d,
        "max_pool2d" => max_pool2d,
        "hardswish" => hardswish,
        "hardsigmoid" => hardsigmoid,
        "hardtanh" => hardtanh,
        "relu6" => relu6,
        "dropout" => dropout,
        "embedding" => embedding,
        "embedding_dense_backward" => embedding_dense_backward,
        "gather" => gather,
        "cross_entropy" => cross_entropy,
        "pad" => pad,
        "cat" => cat,
        "flatten" => flatten,
        "unflatten" => unflatten,
        "view" | "reshape" => reshape,
        "transpose" => transpose,
        "t" => t,
        "permute" => permute,
        "unsqueeze" => unsqueeze,
        "squeeze" => squeeze,
        "expand" => expand,
        "contiguous" => contiguous,
        "clone" => clone,
        "weight_norm" => weight_norm,
        "getitem" => getitem,
        "to" | "float" | "half" | "bfloat16" | "double" | "long" | "int" | "bool" => convert,
        _ => return None,
    })
}

/// True for the ops lowered as views (their value may alias their input in torch).
pub fn is_view_op(canonical: &str) -> bool {
    matches!(
        canonical,
        "view" | "reshape" | "flatten" | "unflatten" | "transpose" | "t" | "permute" | "unsqueeze" | "squeeze" | "expand"
            | "contiguous" | "getitem" | "dropout" | "to" | "float" | "half" | "bfloat16" | "double" | "long" | "int" | "bool"
    )
}

/// True for decomposed ops whose value is always a new tensor (never a view of an argument);
/// functionalization's alias analysis relies on it.
pub fn returns_fresh(canonical: &str) -> bool {
    matches!(
        canonical,
        "batch_norm"
            | "embedding"
            | "embedding_dense_backward"
            | "gather"
            | "cross_entropy"
            | "pad"
            | "cat"
            | "layer_norm"
            | "softmax"
            | "log_softmax"
            | "sum"
            | "mean"
            | "sum_unordered"
            | "mean_unordered"
            | "amax"
            | "amin"
            | "var"
            | "std"
            | "rms_norm"
            | "adaptive_avg_pool2d"
            | "max_pool2d"
            | "hardswish"
            | "hardsigmoid"
            | "hardtanh"
            | "relu6"
            | "clone"
            | "weight_norm"
    )
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, LoweringError> {
    Err(LoweringError::Unsupported(what.into()))
}

/// Binds the node's positional and keyword arguments to `params` (in signature order; for
/// methods the first is `self`). Unknown keywords are refused.
pub fn bind<'n>(node: &'n FxNode, params: &[&str]) -> Result<Vec<Option<&'n FxArg>>, LoweringError> {
    let mut out: Vec<Option<&FxArg>> = vec![None; params.len()];
    if node.args.len() > params.len() {
        return unsupported(format!("{} positional arguments", node.args.len()));
    }
    for (i, a) in node.args.iter().enumerate() {
        out[i] = Some(a);
    }
    for (k, v) in &node.kwargs {
        match params.iter().position(|p| p == k) {
            Some(i) if out[i].is_none() => out[i] = Some(v),
            _ => return unsupported(format!("keyword argument {k}")),
        }
    }
    Ok(out)
}

fn number(a: Option<&FxArg>, default: f64) -> Result<f64, LoweringError> {
    match a {
        None | Some(FxArg::None) => Ok(default),
        Some(FxArg::Float(v)) => Ok(*v),
        Some(FxArg::Int(v)) => Ok(*v as f64),
        Some(other) => unsupported(format!("expected a number, got {other:?}")),
    }
}

fn boolean(a: Option<&FxArg>, default: bool) -> Result<bool, LoweringError> {
    match a {
        None => Ok(default),
        Some(FxArg::Bool(b)) => Ok(*b),
        Some(other) => unsupported(format!("expected a bool, got {other:?}")),
    }
}

fn int(a: &FxArg) -> Result<i64, LoweringError> {
    match a {
        FxArg::Int(v) => Ok(*v),
        other => unsupported(format!("expected an int, got {other:?}")),
    }
}

/// A list of ints given as one tuple/list argument or as the remaining positional arguments
/// (`x.view(2, 3)` and `x.view((2, 3))`).
fn int_list(args: &[FxArg]) -> Result<Vec<i64>, LoweringError> {
    match args {
        [FxArg::Tuple(items)] | [FxArg::List(items)] => items.iter().map(int).collect(),
        _ => args.iter().map(int).collect(),
    }
}

/// Normalizes a possibly negative dim for a tensor of `ndim` dims (`ndim` 0 accepts -1 and 0).
fn wrap_dim(d: i64, ndim: usize) -> Result<usize, LoweringError> {
    let n = ndim.max(1) as i64;
    let w = if d < 0 { d + n } else { d };
    if w < 0 || w >= n {
        return unsupported(format!("dim {d} out of range for {ndim} dims"));
    }
    Ok(w as usize)
}

/// The reduced dims named by a `dim` argument (None: all), sorted and deduplicated. A 0-d
/// tensor accepts dims -1 and 0 (ATen's `maybe_wrap_dim` wraps scalars as one dim) and has none
/// to reduce: empty.
fn reduce_dims(dim: Option<&FxArg>, ndim: usize) -> Result<Vec<usize>, LoweringError> {
    let mut dims = match dim {
        None | Some(FxArg::None) => (0..ndim).collect(),
        Some(FxArg::Int(d)) => vec![wrap_dim(*d, ndim)?],
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) if items.is_empty() => (0..ndim).collect(),
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => {
            items.iter().map(|a| int(a).and_then(|d| wrap_dim(d, ndim))).collect::<Result<_, _>>()?
        }
        Some(other) => return unsupported(format!("dim {other:?}")),
    };
    if ndim == 0 {
        return Ok(Vec::new());
    }
    dims.sort_unstable();
    dims.dedup();
    Ok(dims)
}

/// A floating input (float32, or bfloat16/float16 computed in float32); the decomposition's
/// result has its dtype, as torch's ops do.
fn float_input(lw: &Lowerer<'_>, a: Option<&FxArg>) -> Result<TensorRef, LoweringError> {
    let t = lw.tensor(a.ok_or_else(|| LoweringError::Unsupported("missing input".into()))?)?;
    if !t.dtype.is_float() {
        return unsupported("input is not a floating tensor");
    }
    Ok(t)
}

/// `sum(x * x)` over `dims`, kept as size-1 dims, in float32 (rms_norm's and weight_norm's sum
/// of squares).
fn sum_of_squares(lw: &mut Lowerer<'_>, x: &TensorRef, dims: Vec<usize>) -> TensorRef {
    let xc = x.clone();
    let sq = lw.pointwise(&x.sizes, DType::F32, move |h, idx| {
        let v = h.load(xc.buf, idx);
        h.binary(BinaryOp::Mul, v, v)
    });
    reduce(lw, &sq, dims, true, ReductionType::Sum, DType::F32)
}

/// `op` of `x` over `dims`, as a realized Reduction accumulated in float32; `dtype` is the
/// buffer's dtype (float32 for intermediates, the input's dtype when the reduction is the op's
/// result). Strided reductions are handled in codegen (Note [column reductions], llvm/emit.rs).
fn reduce(lw: &mut Lowerer<'_>, x: &TensorRef, dims: Vec<usize>, keepdim: bool, op: ReductionType, dtype: DType) -> TensorRef {
    let xc = x.clone();
    lw.reduction(dtype, Reduction {
        input_sizes: x.sizes.clone(),
        reduced: dims,
        keepdim,
        op,
        inner_fn: std::rc::Rc::new(move |h: &mut dyn OpsHandler, idx: &[Affine]| h.load(xc.buf, idx)),
    })
}

/// For a large `x` whose values are read with `dim` strided in memory (some other dim of size
/// > 1 is more contiguous), a realized copy of `x` with its dims permuted to `order` (the other
/// dims in their memory order, then `dim` last), and `order`; `None` otherwise.
fn transposed_copy(lw: &mut Lowerer<'_>, x: &TensorRef, dim: usize) -> Option<(TensorRef, Vec<usize>)> {
    let n = x.sizes.len();
    if x.sizes.iter().product::<i64>() < 1 << 16 || x.sizes[dim] == 1 {
        return None;
    }
    let idx: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
    let mut h = super::scheduler::IndexedReads { ir: lw.ir, loads: Vec::new() };
    h.load(x.buf, &idx);
    let (buf, index) = h.loads.first()?;
    let layout = lw.ir.buffer(*buf).layout.as_ref()?;
    let mut st = vec![0i64; n];
    for (k, a) in index.iter().enumerate() {
        for (v, c) in a.coeffs.iter().enumerate() {
            st[v] += c * layout.strides[k];
        }
    }
    let other_min = (0..n).filter(|&d| d != dim && x.sizes[d] > 1).map(|d| st[d].abs()).min()?;
    if st[dim].abs() <= other_min {
        return None;
    }
    let mut order: Vec<usize> = (0..n).filter(|&d| d != dim).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(st[d].abs()));
    order.push(dim);
    let psizes: Vec<i64> = order.iter().map(|&d| x.sizes[d]).collect();
    let (xc, oc) = (x.clone(), order.clone());
    let copy = lw.pointwise(&psizes, x.dtype, move |h, idx| {
        let mut bi = idx.to_vec();
        for (k, &d) in oc.iter().enumerate() {
            bi[d] = idx[k].clone();
        }
        h.load(xc.buf, &bi)
    });
    lw.realize(&copy);
    Some((copy, order))
}

/// The mean of `x` over `dims` (kept as size 1) and the sum of squared deviations from it
/// (kept as `keepdim` says), both float32: the two passes of a numerically stable variance.
fn mean_and_squared_deviations(lw: &mut Lowerer<'_>, x: &TensorRef, dims: Vec<usize>, keepdim: bool) -> (TensorRef, TensorRef) {
    let n: i64 = dims.iter().map(|&d| x.sizes[d]).product();
    let s = reduce(lw, x, dims.clone(), true, ReductionType::Sum, DType::F32);
    let mean = divide_by_count(lw, &s, n, DType::F32);
    let (xc, mc) = (x.clone(), mean.clone());
    let dev2 = lw.pointwise(&x.sizes, DType::F32, move |h, idx| {
        let v = load_broadcast(h, &xc, idx);
        let m = load_broadcast(h, &mc, idx);
        let d = h.binary(BinaryOp::Sub, v, m);
        h.binary(BinaryOp::Mul, d, d)
    });
    let ss = reduce(lw, &dev2, dims, keepdim, ReductionType::Sum, DType::F32);
    (mean, ss)
}

/// The `normalized_shape` of layer_norm/rms_norm: the trailing sizes of `x` it names.
fn normalized_shape(arg: Option<&FxArg>, x: &TensorRef) -> Result<Vec<i64>, LoweringError> {
    let shape = match arg {
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => items.iter().map(int).collect::<Result<Vec<_>, _>>()?,
        Some(FxArg::Int(v)) => vec![*v],
        _ => return unsupported("normalized_shape"),
    };
    let nd = x.sizes.len();
    if shape.is_empty() || shape.len() > nd || x.sizes[nd - shape.len()..] != shape[..] {
        return unsupported("normalized_shape does not match the input");
    }
    Ok(shape)
}

/// An optional weight or bias of a norm: `None`, or a tensor of sizes `shape` and dtype `dtype`.
fn norm_param(lw: &Lowerer<'_>, arg: Option<&FxArg>, shape: &[i64], dtype: DType) -> Result<Option<TensorRef>, LoweringError> {
    match arg {
        None | Some(FxArg::None) => Ok(None),
        Some(t) => {
            let t = lw.tensor(t)?;
            if t.sizes != shape || t.dtype != dtype {
                return unsupported("weight/bias shape or dtype");
            }
            Ok(Some(t))
        }
    }
}

/// `t / n` as an unrealized Pointwise of dtype `dtype`: a mean from a sum. ATen's CPU mean is
/// `sum(...).div_(n)` (`mean_out` in ReduceOps.cpp), a division: multiplying by `1/n` instead
/// differs from eager in the last bit for about a third of the values.
fn divide_by_count(lw: &mut Lowerer<'_>, t: &TensorRef, n: i64, dtype: DType) -> TensorRef {
    let tc = t.clone();
    lw.pointwise(&t.sizes, dtype, move |h, idx| {
        let v = load_broadcast(h, &tc, idx);
        let c = h.constant(n as f64, DType::F32);
        h.binary(BinaryOp::Div, v, c)
    })
}

// ---- reductions -----------------------------------------------------------------------------

fn reduction_op(lw: &mut Lowerer<'_>, op: ReductionType, mean: bool) -> Result<TensorRef, LoweringError> {
    let node = lw.fx_node();
    let is_sum_like = matches!(node.canonical, Some("sum" | "mean" | "sum_unordered" | "mean_unordered"));
    // `aten.sum.dim_IntList`/`aten.mean.dim` made by derivative rules: plain vectorized sums
    // (Note [forward-side statistics] in src/autograd/partition.rs).
    let unordered = matches!(node.canonical, Some("sum_unordered" | "mean_unordered"));
    let params: &[&str] = if is_sum_like { &["input", "dim", "keepdim", "dtype"] } else { &["input", "dim", "keepdim"] };
    let a = bind(node, params)?;
    if is_sum_like && !matches!(a.get(3).copied().flatten(), None | Some(FxArg::None)) {
        return unsupported("dtype=");
    }
    let x = float_input(lw, a[0])?;
    let dims = reduce_dims(a[1], x.sizes.len())?;
    let keepdim = boolean(a[2], false)?;
    if x.sizes.is_empty() {
        return unsupported("reduction of a 0-d tensor");
    }
    let n: i64 = dims.iter().map(|&d| x.sizes[d]).product();
    // torch.sum/mean themselves: summed in ATen's order where kernels can (Note [ATen sum order]),
    // except in backward graphs (Note [backward sum order]).
    let op = if op == ReductionType::Sum && !unordered && ATEN_SUM_ORDER.with(|c| c.get()) { ReductionType::OrderedSum } else { op };
    Ok(if mean {
        let r = reduce(lw, &x, dims, keepdim, op, DType::F32);
        divide_by_count(lw, &r, n, x.dtype)
    } else {
        reduce(lw, &x, dims, keepdim, op, x.dtype)
    })
}

fn sum(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    reduction_op(lw, ReductionType::Sum, false)
}

fn mean(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    reduction_op(lw, ReductionType::Sum, true)
}

fn amax(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    reduction_op(lw, ReductionType::Max, false)
}

fn amin(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    reduction_op(lw, ReductionType::Min, false)
}

/// var/std(x, dim, *, correction=1 | unbiased=True, keepdim=False): the sum of squared
/// deviations from the mean (two passes), divided by `n - correction`; std takes its square root.
///
/// Note [variance without overflow]: ATen's CPU var/std accumulate in double for every floating
/// dtype (`std_var_kernel_impl` in aten/src/ATen/native/cpu/ReduceOpsKernel.cpp runs
/// `WelfordOps<scalar_t, double, ...>`; the full reduction `std_var_all_cpu` in ReduceOps.cpp
/// sums in double too) and round once at the end. So a float32 tensor whose variance exceeds
/// float32's range but whose std does not (values near 1e20) has a finite std in eager, and one
/// of tiny values (1e-25) a nonzero std, where squares summed in float32 overflow to inf or
/// underflow to 0. Our kernels reduce in float32, so the lowering scales instead, as LAPACK's
/// `nrm2` does (on the GPU target; the CPU target accumulates in float64 instead, Note [float64
/// variance]): the first pass (one fused loop) also takes `a = max|x|` and the sum of
/// `x * 2^-64` (exact); the mean is `sum / n`, or where that sum overflowed, the scaled sum's
/// mean times `2^64` (not for a full reduction of a float32/float64 tensor: eager's
/// `std_var_all_cpu` takes its mean as `self.mean()`, in that dtype, which overflows there). The deviations are divided by `s = a` when `a` is so large that `n`
/// squares of `2a` could overflow, or so small (below 1e-10) that squares could underflow, and
/// by `s = 1` otherwise (every result then bitwise as before); `ss = sum(((x - m) / s)^2)`,
/// `var = ss / (n - correction) * s * s`, `std = sqrt(ss / (n - correction)) * s`. Results
/// agree with eager's to float32 rounding, and are inf only where eager's (rounded) are.
/// (layer_norm's statistics stay unscaled: ATen's `RowwiseMoments` accumulates in
/// `opmath_type<float>`, float, so eager overflows there as well.)
fn variance(lw: &mut Lowerer<'_>, sqrt: bool) -> Result<TensorRef, LoweringError> {
    let node = lw.fx_node();
    // torch.var(input, dim=None, *, correction=1, keepdim=False); the old `unbiased` spelling too.
    let a = bind(node, &["input", "dim", "unbiased", "keepdim", "correction"])?;
    let x = float_input(lw, a[0])?;
    if x.sizes.is_empty() {
        return unsupported("variance of a 0-d tensor");
    }
    let dims = match a[1] {
        // torch.var(x, True): the positional `unbiased` form.
        Some(FxArg::Bool(_)) => return unsupported("positional unbiased"),
        other => reduce_dims(other, x.sizes.len())?,
    };
    let correction = match (a[2], a[4]) {
        (None, None) => 1.0,
        (Some(FxArg::Bool(u)), None) => {
            if *u {
                1.0
            } else {
                0.0
            }
        }
        (None, Some(c)) => number(Some(c), 1.0)?,
        _ => return unsupported("unbiased= with correction="),
    };
    let keepdim = boolean(a[3], false)?;
    let n: i64 = dims.iter().map(|&d| x.sizes[d]).product();
    if n as f64 - correction <= 0.0 || x.sizes.contains(&0) {
        // Eager warns "degrees of freedom is <= 0" (then gives inf/NaN; an empty input counts
        // too, its reduction factor being 0/0): its kernel does both.
        return unsupported("degrees of freedom <= 0 (torch warns)");
    }
    if super::cuda::target() == super::cuda::Target::Cpu {
        return Ok(variance_f64(lw, &x, &dims, keepdim, n, correction, sqrt));
    }
    let f32_ = DType::F32;
    let reduce_with = |lw: &mut Lowerer<'_>, op: ReductionType, keep: bool, body: fn(&mut dyn OpsHandler, OpsValue) -> OpsValue| {
        let xc = x.clone();
        lw.reduction(f32_, Reduction {
            input_sizes: x.sizes.clone(),
            reduced: dims.clone(),
            keepdim: keep,
            op,
            inner_fn: std::rc::Rc::new(move |h: &mut dyn OpsHandler, idx: &[Affine]| {
                let v = h.load(xc.buf, idx);
                body(h, v)
            }),
        })
    };
    let sum = reduce_with(lw, ReductionType::Sum, true, |_, v| v);
    // A full reduction of a float32/float64 tensor takes eager's `std_var_all_cpu`, whose mean
    // is `self.mean()` in the tensor's dtype: that one overflows in eager too.
    let full_float = dims.len() == x.sizes.len() && matches!(x.dtype, DType::F32 | DType::F64);
    let sum_scaled = (!full_float).then(|| {
        reduce_with(lw, ReductionType::Sum, true, |h, v| {
            let c = h.constant(2f64.powi(-64), DType::F32);
            h.binary(BinaryOp::Mul, v, c)
        })
    });
    // The scale has the result's sizes (kept dims or not), so the last kernel reads it at its
    // own index; the deviations read it with the reduced dims dropped or at 0.
    let amax = reduce_with(lw, ReductionType::Max, keepdim, |h, v| h.unary(UnaryOp::Abs, v));
    let (hi, lo) = ((f32::MAX as f64 / (4.0 * n.max(1) as f64)).sqrt(), 1e-10);
    let (sc, ssc_, ac) = (sum.clone(), sum_scaled.clone(), amax.clone());
    // The mean, and the scale `s` of the deviations (one value per reduced row, keepdim).
    let mean = lw.pointwise(&sum.sizes.clone(), f32_, move |h, idx| {
        let s = h.load(sc.buf, idx);
        let nn = h.constant(n as f64, DType::F32);
        let plain = h.binary(BinaryOp::Div, s, nn);
        let Some(ssc_) = &ssc_ else { return plain };
        let ss = h.load(ssc_.buf, idx);
        let q = h.binary(BinaryOp::Div, ss, nn);
        let up = h.constant(2f64.powi(64), DType::F32);
        let scaled = h.binary(BinaryOp::Mul, q, up);
        let abs = h.unary(UnaryOp::Abs, s);
        let inf = h.constant(f64::INFINITY, DType::F32);
        let finite = h.compare(CmpOp::Lt, abs, inf);
        h.where_(finite, plain, scaled)
    });
    let scale = lw.pointwise(&amax.sizes.clone(), f32_, move |h, idx| {
        let a = h.load(ac.buf, idx);
        let hi_c = h.constant(hi, DType::F32);
        let lo_c = h.constant(lo, DType::F32);
        let zero = h.constant(0.0, DType::F32);
        let big = h.compare(CmpOp::Gt, a, hi_c);
        let small = h.compare(CmpOp::Lt, a, lo_c);
        let nonzero = h.compare(CmpOp::Gt, a, zero);
        let tiny = h.binary(BinaryOp::LogicalAnd, small, nonzero);
        let scaled = h.binary(BinaryOp::LogicalOr, big, tiny);
        let one = h.constant(1.0, DType::F32);
        h.where_(scaled, a, one)
    });
    let (xc, mc, sc, rdims) = (x.clone(), mean, scale.clone(), dims.clone());
    let dev2 = lw.pointwise(&x.sizes, f32_, move |h, idx| {
        let v = load_broadcast(h, &xc, idx);
        let m = load_broadcast(h, &mc, idx);
        let n_vars = idx.first().map_or(0, |a| a.coeffs.len());
        let sidx: Vec<Affine> = idx
            .iter()
            .enumerate()
            .filter(|(d, _)| keepdim || !rdims.contains(d))
            .map(|(d, a)| if rdims.contains(&d) { Affine::constant(0, n_vars) } else { a.clone() })
            .collect();
        let s = h.load(sc.buf, &sidx);
        let d = h.binary(BinaryOp::Sub, v, m);
        let d = h.binary(BinaryOp::Div, d, s);
        h.binary(BinaryOp::Mul, d, d)
    });
    let ss = reduce(lw, &dev2, dims.clone(), keepdim, ReductionType::Sum, f32_);
    let out_dtype = x.dtype;
    // n - correction <= 0 gives inf/nan, as torch does (0/0 for n == correction... x/0 above).
    let denom = n as f64 - correction;
    let (ssc, sc) = (ss.clone(), scale);
    Ok(lw.pointwise(&ss.sizes.clone(), out_dtype, move |h, idx| {
        let v = h.load(ssc.buf, idx);
        let s = h.load(sc.buf, idx);
        let d = h.constant(denom.max(0.0), DType::F32);
        let q = h.binary(BinaryOp::Div, v, d);
        if sqrt {
            let r = h.unary(UnaryOp::Sqrt, q);
            h.binary(BinaryOp::Mul, r, s)
        } else {
            let r = h.binary(BinaryOp::Mul, q, s);
            h.binary(BinaryOp::Mul, r, s)
        }
    }))
}

/// Note [float64 variance]: on the CPU target, var/std of `x` (float32, bfloat16 or float16)
/// over `dims` accumulate in float64, as ATen's CPU kernels do (Note [variance without
/// overflow] above), and round once to `x`'s dtype at the end:
/// - the mean is a float64 sum over `n`; except for a full reduction of a float32 tensor, where
///   eager's `std_var_all_cpu` takes `self.mean()` in float32 (a sum in ATen's order, then the
///   division) and widens it;
/// - the squared deviations from it are summed in float64, divided by `n - correction` (x/0
///   gives inf or NaN as in eager) and, for std, square-rooted, all in float64.
///
/// A float64 two-pass and eager's float64 Welford differ by float64 rounding, far below
/// float32's last bit: over 3,000 random rows of 2-300 values at magnitudes 1e-3..1e3, every
/// result matched eager bitwise, where a float32 two-pass differed in 53% of rows. float32's
/// largest square is far inside float64's range, so no scaling is needed. The kernels'
/// float64 sums are Note [float64 sums] in llvm/src/kernel.rs.
fn variance_f64(lw: &mut Lowerer<'_>, x: &TensorRef, dims: &[usize], keepdim: bool, n: i64, correction: f64, sqrt: bool) -> TensorRef {
    let f64_ = DType::F64;
    let xc = x.clone();
    let wide = lw.pointwise(&x.sizes, f64_, move |h, idx| {
        let v = h.load(xc.buf, idx);
        h.to_dtype(v, DType::F64)
    });
    let full_float32 = dims.len() == x.sizes.len() && x.dtype == DType::F32;
    let mean = if full_float32 {
        let sum = reduce(lw, x, dims.to_vec(), true, ReductionType::OrderedSum, DType::F32);
        let sc = sum.clone();
        lw.pointwise(&sum.sizes, f64_, move |h, idx| {
            let s = h.load(sc.buf, idx);
            let nn = h.constant(n as f64, DType::F32);
            let m = h.binary(BinaryOp::Div, s, nn);
            h.to_dtype(m, DType::F64)
        })
    } else {
        let sum = reduce(lw, &wide, dims.to_vec(), true, ReductionType::Sum, f64_);
        let sc = sum.clone();
        lw.pointwise(&sum.sizes, f64_, move |h, idx| {
            let s = h.load(sc.buf, idx);
            let nn = h.constant(n as f64, DType::F64);
            h.binary(BinaryOp::Div, s, nn)
        })
    };
    let (wc, mc) = (wide.clone(), mean);
    let dev2 = lw.pointwise(&x.sizes, f64_, move |h, idx| {
        let v = h.load(wc.buf, idx);
        let m = load_broadcast(h, &mc, idx);
        let d = h.binary(BinaryOp::Sub, v, m);
        h.binary(BinaryOp::Mul, d, d)
    });
    let ss = reduce(lw, &dev2, dims.to_vec(), keepdim, ReductionType::Sum, f64_);
    let denom = (n as f64 - correction).max(0.0);
    let out_dtype = x.dtype;
    let ssc = ss.clone();
    lw.pointwise(&ss.sizes, out_dtype, move |h, idx| {
        let v = h.load(ssc.buf, idx);
        let d = h.constant(denom, DType::F64);
        let mut q = h.binary(BinaryOp::Div, v, d);
        if sqrt {
            q = h.unary(UnaryOp::Sqrt, q);
        }
        h.to_dtype(q, out_dtype)
    })
}

fn var(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    variance(lw, false)
}

fn std(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    variance(lw, true)
}

/// F.rms_norm(x, normalized_shape, weight=None, eps=None): `x * rsqrt(mean(x^2) + eps) * weight`,
/// with eps defaulting to float32's machine epsilon as in torch.
fn rms_norm(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "normalized_shape", "weight", "eps"])?;
    let x = float_input(lw, a[0])?;
    let shape = normalized_shape(a[1], &x)?;
    let nd = x.sizes.len();
    let weight = norm_param(lw, a[2], &shape, x.dtype)?;
    let eps = number(a[3], f32::EPSILON as f64)?;
    let dims: Vec<usize> = (nd - shape.len()..nd).collect();
    let n: i64 = shape.iter().product();
    let ss = sum_of_squares(lw, &x, dims);
    let out_dtype = x.dtype;
    Ok(lw.pointwise(&x.sizes.clone(), out_dtype, move |h, idx| {
        let v = h.load(x.buf, idx);
        let total = load_broadcast(h, &ss, idx);
        let inv_n = h.constant(1.0 / n as f64, DType::F32);
        let ms = h.binary(BinaryOp::Mul, total, inv_n);
        let e = h.constant(eps, DType::F32);
        let r = h.binary(BinaryOp::Add, ms, e);
        let r = h.unary(UnaryOp::Rsqrt, r);
        let mut y = h.binary(BinaryOp::Mul, v, r);
        if let Some(w) = &weight {
            let wv = load_broadcast(h, w, idx);
            y = h.binary(BinaryOp::Mul, y, wv);
        }
        y
    }))
}

/// `F.adaptive_avg_pool2d(x, 1)`: the mean over the last two dims, kept as size 1.
fn adaptive_avg_pool2d(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "output_size"])?;
    let x = float_input(lw, a[0])?;
    let ones = match a[1] {
        Some(FxArg::Int(1)) => true,
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => items.iter().all(|v| matches!(v, FxArg::Int(1))),
        _ => false,
    };
    let nd = x.sizes.len();
    if !ones || nd < 3 {
        return unsupported("adaptive_avg_pool2d to a size other than 1x1");
    }
    let n = x.sizes[nd - 2] * x.sizes[nd - 1];
    let r = reduce(lw, &x, vec![nd - 2, nd - 1], true, ReductionType::Sum, DType::F32);
    Ok(divide_by_count(lw, &r, n, x.dtype))
}

/// Two ints of a pooling argument: an int (both dims), a one- or two-int tuple/list, or
/// `default` for None or an empty list (max_pool2d's stride).
fn int_pair(a: Option<&FxArg>, default: Option<[i64; 2]>) -> Result<[i64; 2], LoweringError> {
    match a {
        None | Some(FxArg::None) => default.ok_or_else(|| LoweringError::Unsupported("missing window size".into())),
        Some(FxArg::Int(v)) => Ok([*v, *v]),
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => match items.as_slice() {
            [] => default.ok_or_else(|| LoweringError::Unsupported("empty window size".into())),
            [v] => Ok([int(v)?, int(v)?]),
            [a, b] => Ok([int(a)?, int(b)?]),
            _ => unsupported("window argument of more than 2 ints"),
        },
        Some(other) => unsupported(format!("window argument {other:?}")),
    }
}

/// Note [window reductions]: `F.max_pool2d` / `torch.max_pool2d` without indices, over the last
/// two dims of a 3-d or 4-d floating tensor, as a pointwise op over the output whose body folds
/// the kernel_size[0] x kernel_size[1] window positions (unrolled): position (kh, kw) of output
/// (oh, ow) reads input (oh * stride - padding + kh * dilation, ...). Positions that may fall
/// outside the input (padding, ceil_mode's last window) are read under a range check (Note
/// [masked loads] in llvm/src/kernel.rs) and count as -inf. The fold is ATen's: start at -inf,
/// take a value when it is greater than the current one or NaN, so a NaN in the window gives
/// NaN and equal values (-0.0 and 0.0) keep the first in window order. Fused like any
/// pointwise op: a batch norm + ReLU before it is computed at each window position instead of
/// being written and read back. The indices (`return_indices=True`, and training graphs'
/// `max_pool2d_with_indices`) stay torch's.
fn max_pool2d(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"])?;
    if boolean(a[6], false)? {
        return unsupported("max_pool2d with indices");
    }
    let x = float_input(lw, a[0])?;
    let nd = x.sizes.len();
    if nd != 3 && nd != 4 {
        return unsupported("max_pool2d of other than 3 or 4 dims");
    }
    let k = int_pair(a[1], None)?;
    let s = int_pair(a[2], Some(k))?;
    let p = int_pair(a[3], Some([0, 0]))?;
    let d = int_pair(a[4], Some([1, 1]))?;
    let ceil = boolean(a[5], false)?;
    let mut out = x.sizes.clone();
    for i in 0..2 {
        // torch raises for these (eager's error is the one users see).
        if k[i] <= 0 || s[i] <= 0 || d[i] <= 0 || p[i] < 0 || p[i] > k[i] / 2 {
            return unsupported("max_pool2d window arguments torch refuses");
        }
        let size = x.sizes[nd - 2 + i];
        let span = size + 2 * p[i] - d[i] * (k[i] - 1) - 1;
        if span < 0 {
            return unsupported("max_pool2d window larger than the input");
        }
        // ATen's pooling_output_shape.
        let mut o = if ceil { (span + s[i] - 1) / s[i] + 1 } else { span / s[i] + 1 };
        if ceil && (o - 1) * s[i] >= size + p[i] {
            o -= 1;
        }
        out[nd - 2 + i] = o;
    }
    if meta_sizes(lw)? != out {
        return unsupported("max_pool2d output size differs from torch's");
    }
    let (h_in, w_in) = (x.sizes[nd - 2], x.sizes[nd - 1]);
    let (oh_n, ow_n) = (out[nd - 2], out[nd - 1]);
    let dtype = x.dtype;
    Ok(lw.pointwise(&out, dtype, move |h, idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        // Coordinate `o * stride + offset` of one window dim, and whether it can leave the input.
        let coord = |o: &Affine, stride: i64, offset: i64, o_n: i64, size: i64| -> (Affine, bool) {
            let c = o.scaled_add(stride, &Affine::constant(offset, n_vars));
            let leaves = offset < 0 || (o_n - 1) * stride + offset >= size;
            (c, leaves)
        };
        let neg_inf = h.constant(f64::NEG_INFINITY, DType::F32);
        let mut acc = neg_inf;
        for kh in 0..k[0] {
            let (hc, h_leaves) = coord(&idx[nd - 2], s[0], kh * d[0] - p[0], oh_n, h_in);
            for kw in 0..k[1] {
                let (wc, w_leaves) = coord(&idx[nd - 1], s[1], kw * d[1] - p[1], ow_n, w_in);
                let mut mask: Option<OpsValue> = None;
                for (leaves, c, size) in [(h_leaves, &hc, h_in), (w_leaves, &wc, w_in)] {
                    if leaves {
                        let r = h.in_range(c, size);
                        mask = Some(match mask {
                            Some(m) => h.binary(BinaryOp::LogicalAnd, m, r),
                            None => r,
                        });
                    }
                }
                let mut at: Vec<Affine> = idx[..nd - 2].to_vec();
                at.push(hc.clone());
                at.push(wc);
                let v = match mask {
                    Some(m) => {
                        let v = load_masked(h, x.buf, &at, m);
                        let v = h.to_dtype(v, DType::F32);
                        h.where_(m, v, neg_inf)
                    }
                    None => {
                        let v = h.load(x.buf, &at);
                        h.to_dtype(v, DType::F32)
                    }
                };
                let gt = h.compare(CmpOp::Gt, v, acc);
                let nan = h.compare(CmpOp::Ne, v, v);
                let take = h.binary(BinaryOp::LogicalOr, gt, nan);
                acc = h.where_(take, v, acc);
            }
        }
        acc
    }))
}

/// softmax(x, dim) = exp(x - amax(x)) * (1 / sum(exp(x - amax(x))))   (torch's max-shifted
/// form, one reciprocal per row as torch's CPU kernel does); log_softmax(x) = (x - amax(x)) -
/// log(sum(exp(x - amax(x)))). Note [strided softmax]: the three passes run along `dim`; when
/// `dim` is strided in memory and the tensor is large, the input is first copied with `dim`
/// innermost (a tiled transpose kernel), the softmax runs on that copy into a buffer of the same
/// layout, and a second tiled kernel writes the result in torch's layout.
fn softmax_like(lw: &mut Lowerer<'_>, log: bool) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "dim", "_stacklevel", "dtype"])?;
    if !matches!(a[3], None | Some(FxArg::None)) {
        return unsupported("dtype=");
    }
    let x = float_input(lw, a[0])?;
    let dim = match a[1] {
        Some(FxArg::Int(d)) => wrap_dim(*d, x.sizes.len())?,
        _ => return unsupported("softmax without an int dim"),
    };
    if x.sizes.is_empty() {
        return unsupported("softmax of a 0-d tensor");
    }
    match transposed_copy(lw, &x, dim) {
        Some((copy, order)) => {
            let r = softmax_core(lw, &copy, copy.sizes.len() - 1, log);
            lw.realize(&r);
            // Back to x's dim order: copy dim k holds x's dim order[k].
            let sizes = x.sizes.clone();
            Ok(lw.pointwise(&sizes, x.dtype, move |h, idx| {
                let mut pi = vec![idx[0].clone(); idx.len()];
                for (k, &d) in order.iter().enumerate() {
                    pi[k] = idx[d].clone();
                }
                h.load(r.buf, &pi)
            }))
        }
        None => Ok(softmax_core(lw, &x, dim, log)),
    }
}

/// The row statistics of a softmax of `x` along `dim` (kept dims, float32): the max `m` and
/// `s = sum(exp(x - m))`. A row that is all -inf has max -inf; torch gives NaN there, and so
/// does exp(-inf - -inf).
fn softmax_stats(lw: &mut Lowerer<'_>, x: &TensorRef, dim: usize) -> (TensorRef, TensorRef) {
    let m = reduce(lw, x, vec![dim], true, ReductionType::Max, DType::F32);
    let (xc, mc) = (x.clone(), m.clone());
    let e = lw.pointwise(&x.sizes, DType::F32, move |h, idx| {
        let v = load_broadcast(h, &xc, idx);
        let mx = load_broadcast(h, &mc, idx);
        let d = h.binary(BinaryOp::Sub, v, mx);
        h.unary(UnaryOp::Exp, d)
    });
    let s = reduce(lw, &e, vec![dim], true, ReductionType::Sum, DType::F32);
    (m, s)
}

/// The softmax (or log_softmax) of `x` along `dim`, as reductions and an epilogue of `x`'s dtype.
fn softmax_core(lw: &mut Lowerer<'_>, x: &TensorRef, dim: usize, log: bool) -> TensorRef {
    let (m, s) = softmax_stats(lw, x, dim);
    let xc = x.clone();
    lw.pointwise(&x.sizes, x.dtype, move |h, idx| {
        let v = load_broadcast(h, &xc, idx);
        let mx = load_broadcast(h, &m, idx);
        let d = h.binary(BinaryOp::Sub, v, mx);
        let total = load_broadcast(h, &s, idx);
        if log {
            let l = h.unary(UnaryOp::Log, total);
            h.binary(BinaryOp::Sub, d, l)
        } else {
            let e = h.unary(UnaryOp::Exp, d);
            let inv = h.unary(UnaryOp::Reciprocal, total);
            h.binary(BinaryOp::Mul, e, inv)
        }
    })
}

fn softmax(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    softmax_like(lw, false)
}

fn log_softmax(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    softmax_like(lw, true)
}

/// layer_norm over the last `len(normalized_shape)` dims: mean, then the biased variance as the
/// mean of squared deviations (two passes, as numerically stable as torch's Welford here), then
/// `(x - mean) * rsqrt(var + eps) * weight + bias`.
fn layer_norm(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"])?;
    let x = float_input(lw, a[0])?;
    let shape = normalized_shape(a[1], &x)?;
    let nd = x.sizes.len();
    let weight = norm_param(lw, a[2], &shape, x.dtype)?;
    let bias = norm_param(lw, a[3], &shape, x.dtype)?;
    let eps = number(a[4], 1e-5)?;
    let dims: Vec<usize> = (nd - shape.len()..nd).collect();
    let n: i64 = shape.iter().product();
    let (mean, ss) = mean_and_squared_deviations(lw, &x, dims, true);
    let out_dtype = x.dtype;
    Ok(lw.pointwise(&x.sizes.clone(), out_dtype, move |h, idx| {
        let v = load_broadcast(h, &x, idx);
        let m = load_broadcast(h, &mean, idx);
        let var_sum = load_broadcast(h, &ss, idx);
        let inv_n = h.constant(1.0 / n as f64, DType::F32);
        let var = h.binary(BinaryOp::Mul, var_sum, inv_n);
        let e = h.constant(eps, DType::F32);
        let ve = h.binary(BinaryOp::Add, var, e);
        let r = h.unary(UnaryOp::Rsqrt, ve);
        let d = h.binary(BinaryOp::Sub, v, m);
        let mut y = h.binary(BinaryOp::Mul, d, r);
        if let Some(w) = &weight {
            let wv = load_broadcast(h, w, idx);
            y = h.binary(BinaryOp::Mul, y, wv);
        }
        if let Some(b) = &bias {
            let bv = load_broadcast(h, b, idx);
            y = h.binary(BinaryOp::Add, y, bv);
        }
        y
    }))
}

// ---- normalization and activations ------------------------------------------------------------

/// Loads a per-channel vector `t` (sizes `[C]`) at the channel (dim 1) of `idx`.
fn load_channel(h: &mut dyn OpsHandler, t: &TensorRef, idx: &[Affine]) -> OpsValue {
    h.load(t.buf, &idx[1..2])
}

/// F.batch_norm in inference (`training=False`): with `alpha = weight / sqrt(var + eps)` and
/// `beta = bias - mean * alpha` per channel (dim 1), `y = x * alpha + beta` (torch's CPU kernel
/// computes the same two per-channel factors). Training mode updates running statistics and runs
/// through torch.
fn batch_norm(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"])?;
    if boolean(a[5], false)? {
        return unsupported("batch_norm in training mode");
    }
    let x = float_input(lw, a[0])?;
    if x.sizes.len() < 2 {
        return unsupported("batch_norm of fewer than 2 dims");
    }
    let c = x.sizes[1];
    let channel = |lw: &Lowerer<'_>, arg: Option<&FxArg>| -> Result<Option<TensorRef>, LoweringError> {
        match arg {
            None | Some(FxArg::None) => Ok(None),
            Some(t) => {
                let t = lw.tensor(t)?;
                if t.sizes != [c] || !t.dtype.is_float() {
                    return unsupported("per-channel tensor of the wrong shape");
                }
                Ok(Some(t))
            }
        }
    };
    let (Some(rm), Some(rv)) = (channel(lw, a[1])?, channel(lw, a[2])?) else {
        return unsupported("batch_norm without running statistics");
    };
    let weight = channel(lw, a[3])?;
    let bias = channel(lw, a[4])?;
    let eps = number(a[7], 1e-5)?;
    let out_dtype = x.dtype;
    Ok(lw.pointwise(&x.sizes.clone(), out_dtype, move |h, idx| {
        let v = h.load(x.buf, idx);
        let var = load_channel(h, &rv, idx);
        let e = h.constant(eps, DType::F32);
        let ve = h.binary(BinaryOp::Add, var, e);
        let sd = h.unary(UnaryOp::Sqrt, ve);
        let one = h.constant(1.0, DType::F32);
        let inv = h.binary(BinaryOp::Div, one, sd);
        let alpha = match &weight {
            Some(w) => {
                let wv = load_channel(h, w, idx);
                h.binary(BinaryOp::Mul, wv, inv)
            }
            None => inv,
        };
        let mean = load_channel(h, &rm, idx);
        let ma = h.binary(BinaryOp::Mul, mean, alpha);
        let beta = match &bias {
            Some(b) => {
                let bv = load_channel(h, b, idx);
                h.binary(BinaryOp::Sub, bv, ma)
            }
            None => {
                let zero = h.constant(0.0, DType::F32);
                h.binary(BinaryOp::Sub, zero, ma)
            }
        };
        let xa = h.binary(BinaryOp::Mul, v, alpha);
        h.binary(BinaryOp::Add, xa, beta)
    }))
}

/// torch.clamp(x, lo, hi) with scalar bounds, signed zeros and NaN as ATen (Note [clamp signed zeros]).
fn clamp_value(h: &mut dyn OpsHandler, x: OpsValue, lo: f64, hi: f64) -> OpsValue {
    let l = h.constant(lo, DType::F32);
    let u = h.constant(hi, DType::F32);
    let v = crate::inductor::lowering::clamp_to_scalar(h, x, l, lo, true);
    crate::inductor::lowering::clamp_to_scalar(h, v, u, hi, false)
}

/// A unary activation `f(x)` over a float32 input given as `input` (first argument).
fn activation(
    lw: &mut Lowerer<'_>,
    params: &[&str],
    f: impl Fn(&mut dyn OpsHandler, OpsValue, &[f64]) -> OpsValue + 'static,
    defaults: &[f64],
) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), params)?;
    let x = float_input(lw, a[0])?;
    // Trailing parameters: numbers (with defaults) and the `inplace` flag, which must be off
    // (functionalization turned it off for in-place forms).
    let mut nums = Vec::new();
    for (k, p) in params.iter().enumerate().skip(1) {
        if *p == "inplace" {
            if boolean(a[k], false)? {
                return unsupported("inplace=True");
            }
        } else {
            nums.push(number(a[k], defaults[nums.len()])?);
        }
    }
    let out_dtype = x.dtype;
    Ok(lw.pointwise(&x.sizes.clone(), out_dtype, move |h, idx| {
        let v = h.load(x.buf, idx);
        f(h, v, &nums)
    }))
}

/// clamp(x + 3, 0, 6): the factor of hardsigmoid and hardswish before their division by 6.
fn shifted_relu6(h: &mut dyn OpsHandler, x: OpsValue) -> OpsValue {
    let three = h.constant(3.0, DType::F32);
    let s = h.binary(BinaryOp::Add, x, three);
    clamp_value(h, s, 0.0, 6.0)
}

/// clamp(x + 3, 0, 6) / 6: hardsigmoid's value.
fn hardsigmoid_value(h: &mut dyn OpsHandler, x: OpsValue) -> OpsValue {
    let c = shifted_relu6(h, x);
    let six = h.constant(6.0, DType::F32);
    h.binary(BinaryOp::Div, c, six)
}

/// hardswish(x) = x * clamp(x + 3, 0, 6) / 6, multiplied before dividing as ATen's kernel does
/// (aten/src/ATen/native/cpu/Activation.cpp, `hardswish_kernel`): `x * 6` overflows to inf for
/// x above FLT_MAX / 6 there, and so it does here (audit 53, U2: `x * (c / 6)` stayed finite).
fn hardswish(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    activation(
        lw,
        &["input", "inplace"],
        |h, x, _| {
            let c = shifted_relu6(h, x);
            let m = h.binary(BinaryOp::Mul, x, c);
            let six = h.constant(6.0, DType::F32);
            h.binary(BinaryOp::Div, m, six)
        },
        &[],
    )
}

/// hardsigmoid(x) = clamp(x + 3, 0, 6) / 6.
fn hardsigmoid(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    activation(lw, &["input", "inplace"], |h, x, _| hardsigmoid_value(h, x), &[])
}

/// hardtanh(x, min_val=-1, max_val=1) = clamp(x, min_val, max_val).
fn hardtanh(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    activation(lw, &["input", "min_val", "max_val", "inplace"], |h, x, p| clamp_value(h, x, p[0], p[1]), &[-1.0, 1.0])
}

/// relu6(x) = clamp(x, 0, 6).
fn relu6(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    activation(lw, &["input", "inplace"], |h, x, _| clamp_value(h, x, 0.0, 6.0), &[])
}

/// F.dropout with `training=False` (or `p=0`) is the identity: a view of its input.
fn dropout(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "p", "training", "inplace"])?;
    let p = number(a[1], 0.5)?;
    if boolean(a[2], true)? && p != 0.0 {
        return unsupported("dropout in training mode");
    }
    if boolean(a[3], false)? {
        return unsupported("inplace=True");
    }
    let x = lw.tensor_any_dtype(a[0].ok_or_else(|| LoweringError::Unsupported("missing input".into()))?)?;
    let sizes = x.sizes.clone();
    view(lw, &x, &sizes, |idx| idx.to_vec())
}

/// `x.to(dtype)`, `x.type(dtype)`, `x.float()`, `x.half()`, `x.bfloat16()`, `x.double()`,
/// `x.long()`, `x.int()`, `x.bool()` between float32, bfloat16, float16, float64, int64, int32
/// and bool: a pointwise cast (to bool is `x != 0`, from bool 0/1, float -> int truncates toward
/// zero, int -> float rounds to nearest). A conversion to the dtype `x` already has returns `x` itself in torch, so it is a view.
/// Device moves, `copy=True` and other keywords run through torch.
fn convert(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let node = lw.fx_node();
    let x = match node.args.first() {
        Some(a) => lw.tensor_any_dtype(a)?,
        None => return unsupported("conversion without self"),
    };
    let target = match node.canonical {
        Some("float") => DType::F32,
        Some("half") => DType::F16,
        Some("bfloat16") => DType::BF16,
        Some("double") => DType::F64,
        Some("long") => DType::I64,
        Some("int") => DType::I32,
        Some("bool") => DType::Bool,
        _ => {
            let a = bind(node, &["self", "dtype"])?;
            match a[1] {
                Some(FxArg::Dtype { dtype, .. }) if *dtype != DType::Other => *dtype,
                _ => return unsupported("conversion other than to a float/bool dtype"),
            }
        }
    };
    if node.canonical != Some("to") && node.canonical != Some("type") && node.args.len() != 1 {
        return unsupported("arguments to a conversion method");
    }
    let sizes = x.sizes.clone();
    if target == x.dtype {
        return view(lw, &x, &sizes, |idx| idx.to_vec());
    }
    Ok(lw.pointwise(&sizes, target, move |h, idx| {
        let v = h.load(x.buf, idx);
        h.to_dtype(v, target)
    }))
}

// ---- views ----------------------------------------------------------------------------------

/// A view of `base` with `sizes`: an unrealized Pointwise loading `base` at `map(index)`.
/// Refused when the value leaves the graph or feeds an op we do not lower (see the module docs).
fn view(
    lw: &mut Lowerer<'_>,
    base: &TensorRef,
    sizes: &[i64],
    map: impl Fn(&[Affine]) -> Vec<Affine> + 'static,
) -> Result<TensorRef, LoweringError> {
    // Follow the value through further views: a view of a view that leaves the graph must be
    // made by torch at every step, or the last one would view a copy.
    let g = lw.g;
    let mut stack: Vec<usize> = g.nodes[lw.node].users.clone();
    let mut seen = std::collections::HashSet::new();
    while let Some(u) = stack.pop() {
        if !seen.insert(u) {
            continue;
        }
        let user = &g.nodes[u];
        let lowered_op = match user.canonical {
            Some(c) => super::lowering::is_pointwise_op(c) || lookup(c).is_some(),
            None => false,
        };
        if matches!(user.op, FxOp::Output) || !lowered_op {
            return unsupported(format!("view read by {} (torch makes it without a copy)", user.name));
        }
        // A `contiguous` that copies (its input's strides differ; Note [reshape copies] makes
        // such nodes) ends the chain: its value is a new tensor.
        let copies = user.canonical == Some("contiguous")
            && match (user.args.first(), user.meta.as_ref()) {
                (Some(FxArg::Node(x)), Some(m)) => g.nodes[*x].meta.as_ref().is_some_and(|xm| {
                    xm.layout.sizes.iter().zip(xm.layout.strides.iter().zip(&m.layout.strides)).any(|(&n, (a, b))| n != 1 && a != b)
                }),
                _ => false,
            };
        if user.canonical.is_some_and(is_view_op) && !copies {
            stack.extend(user.users.iter().copied());
        }
    }
    let b = base.clone();
    Ok(lw.pointwise(sizes, base.dtype, move |h, idx| {
        let bidx = map(idx);
        h.load(b.buf, &bidx)
    }))
}

fn self_tensor(lw: &Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = lw.fx_node().args.first().ok_or_else(|| LoweringError::Unsupported("missing self".into()))?;
    // Views and copies move values without computing: any modelled dtype.
    lw.tensor_any_dtype(a)
}

/// The meta sizes torch computed for the node (views are checked against them).
fn meta_sizes(lw: &Lowerer<'_>) -> Result<Vec<i64>, LoweringError> {
    Ok(lw.fx_node().meta.as_ref().ok_or_else(|| LoweringError::Unsupported("no meta".into()))?.layout.sizes.clone())
}

/// Index map of a reshape from `from` to `to` (same numel) when it is affine. Size-1 dims are
/// set aside (they always index 0); the other dims are matched in groups of equal products. A
/// group with one base dim is the identity or a split (affine); a group merging several base
/// dims would need division, so `None`. Result: per group, the base dim and the output dims.
fn reshape_map(from: &[i64], to: &[i64]) -> Option<Vec<(usize, Vec<usize>)>> {
    let fi: Vec<usize> = (0..from.len()).filter(|&d| from[d] != 1).collect();
    let tj: Vec<usize> = (0..to.len()).filter(|&d| to[d] != 1).collect();
    let (mut i, mut j) = (0usize, 0usize);
    let mut groups = Vec::new();
    while i < fi.len() && j < tj.len() {
        let (mut gi, mut gj) = (vec![fi[i]], vec![tj[j]]);
        let (mut pi, mut pj) = (from[fi[i]], to[tj[j]]);
        i += 1;
        j += 1;
        while pi != pj {
            if pi < pj {
                if i >= fi.len() {
                    return None;
                }
                pi *= from[fi[i]];
                gi.push(fi[i]);
                i += 1;
            } else {
                if j >= tj.len() {
                    return None;
                }
                pj *= to[tj[j]];
                gj.push(tj[j]);
                j += 1;
            }
        }
        if gi.len() > 1 {
            return None;
        }
        groups.push((gi[0], gj));
    }
    (i == fi.len() && j == tj.len()).then_some(groups)
}

fn reshape_to(lw: &mut Lowerer<'_>, x: &TensorRef, to: Vec<i64>) -> Result<TensorRef, LoweringError> {
    let numel: i64 = x.sizes.iter().product();
    if numel == 0 || to.iter().product::<i64>() != numel {
        return unsupported("empty or mismatched reshape");
    }
    let groups = reshape_map(&x.sizes, &to).ok_or_else(|| LoweringError::Unsupported("reshape merges dims".into()))?;
    let from = x.sizes.clone();
    let to2 = to.clone();
    view(lw, x, &to, move |idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        let mut out = vec![Affine::constant(0, n_vars); from.len()];
        for (bd, gj) in &groups {
            // Row-major combination of the group's output indices (Horner form).
            let mut acc = Affine::constant(0, n_vars);
            for &d in gj {
                acc = acc.scaled_add(to2[d], &idx[d]);
            }
            out[*bd] = acc;
        }
        out
    })
}

/// x.view(*shape) / x.reshape(*shape) / torch.reshape(x, shape); `-1` is inferred.
fn reshape(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let node = lw.fx_node();
    if !node.kwargs.is_empty() {
        return unsupported("keyword arguments");
    }
    let mut shape = int_list(&node.args[1..])?;
    let numel: i64 = x.sizes.iter().product();
    infer_minus_one(&mut shape, numel, "reshape")?;
    reshape_to(lw, &x, shape)
}

/// Replaces the `-1` in `sizes` (if any) by what makes their product `total` (torch's
/// `infer_size`). A `-1` beside a zero size is refused (`op` names the caller).
fn infer_minus_one(sizes: &mut [i64], total: i64, op: &str) -> Result<(), LoweringError> {
    if let Some(p) = sizes.iter().position(|&s| s == -1) {
        let rest: i64 = sizes.iter().enumerate().filter(|(k, _)| *k != p).map(|(_, s)| *s).product();
        if rest == 0 {
            return unsupported(format!("{op} with -1 and a zero size"));
        }
        sizes[p] = total / rest;
    }
    Ok(())
}

/// torch.flatten(x, start_dim=0, end_dim=-1).
fn flatten(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "start_dim", "end_dim"])?;
    let x = lw.tensor_any_dtype(a[0].ok_or_else(|| LoweringError::Unsupported("missing input".into()))?)?;
    let nd = x.sizes.len();
    if nd == 0 {
        return unsupported("flatten of a 0-d tensor");
    }
    let s = wrap_dim(a[1].map(int).transpose()?.unwrap_or(0), nd)?;
    let e = wrap_dim(a[2].map(int).transpose()?.unwrap_or(-1), nd)?;
    if s > e {
        return unsupported("start_dim after end_dim");
    }
    let mut to: Vec<i64> = x.sizes[..s].to_vec();
    to.push(x.sizes[s..=e].iter().product());
    to.extend_from_slice(&x.sizes[e + 1..]);
    reshape_to(lw, &x, to)
}

/// x.unflatten(dim, sizes) / torch.unflatten(x, dim, sizes): dim `dim` split into `sizes` (one
/// of them may be -1, inferred), always a view of `x` (PyTorch's `unflatten` is a `view`).
fn unflatten(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "dim", "sizes"])?;
    let x = lw.tensor_any_dtype(a[0].ok_or_else(|| LoweringError::Unsupported("missing input".into()))?)?;
    let nd = x.sizes.len();
    if nd == 0 {
        return unsupported("unflatten of a 0-d tensor");
    }
    let (Some(dim), Some(sizes)) = (a[1], a[2]) else { return unsupported("unflatten arguments") };
    let d = wrap_dim(int(dim)?, nd)?;
    let mut split = int_list(std::slice::from_ref(sizes))?;
    infer_minus_one(&mut split, x.sizes[d], "unflatten")?;
    if split.iter().product::<i64>() != x.sizes[d] {
        return unsupported("unflatten sizes that do not multiply to the dim's size");
    }
    let mut to: Vec<i64> = x.sizes[..d].to_vec();
    to.extend_from_slice(&split);
    to.extend_from_slice(&x.sizes[d + 1..]);
    reshape_to(lw, &x, to)
}

/// A permutation of dims: out dim k reads base dim `perm[k]`.
fn permute_by(lw: &mut Lowerer<'_>, x: &TensorRef, perm: Vec<usize>) -> Result<TensorRef, LoweringError> {
    let sizes: Vec<i64> = perm.iter().map(|&p| x.sizes[p]).collect();
    view(lw, x, &sizes, move |idx| {
        let mut out = idx.to_vec();
        for (k, &p) in perm.iter().enumerate() {
            out[p] = idx[k].clone();
        }
        out
    })
}

fn transpose(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let node = lw.fx_node();
    let a = bind(node, &["input", "dim0", "dim1"])?;
    let nd = x.sizes.len();
    let (Some(d0), Some(d1)) = (a[1], a[2]) else { return unsupported("transpose dims") };
    let (d0, d1) = (wrap_dim(int(d0)?, nd)?, wrap_dim(int(d1)?, nd)?);
    if nd == 0 {
        // A 0-d tensor's transpose(0, -1) is itself.
        return permute_by(lw, &x, Vec::new());
    }
    let mut perm: Vec<usize> = (0..nd).collect();
    perm.swap(d0, d1);
    permute_by(lw, &x, perm)
}

fn t(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    match x.sizes.len() {
        0 | 1 => {
            let sizes = x.sizes.clone();
            view(lw, &x, &sizes, |idx| idx.to_vec())
        }
        2 => permute_by(lw, &x, vec![1, 0]),
        _ => unsupported("t() of more than 2 dims"),
    }
}

fn permute(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let node = lw.fx_node();
    let dims = match node.kwargs.iter().find(|(k, _)| k == "dims") {
        Some((_, v)) => int_list(std::slice::from_ref(v))?,
        None => int_list(&node.args[1..])?,
    };
    let nd = x.sizes.len();
    let perm: Vec<usize> = dims.iter().map(|&d| wrap_dim(d, nd)).collect::<Result<_, _>>()?;
    let mut seen = perm.clone();
    seen.sort_unstable();
    if seen != (0..nd).collect::<Vec<_>>() {
        return unsupported("not a permutation");
    }
    permute_by(lw, &x, perm)
}

fn unsqueeze(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let a = bind(lw.fx_node(), &["input", "dim"])?;
    let d = wrap_dim(int(a[1].ok_or_else(|| LoweringError::Unsupported("dim".into()))?)?, x.sizes.len() + 1)?;
    let mut sizes = x.sizes.clone();
    sizes.insert(d, 1);
    view(lw, &x, &sizes, move |idx| {
        let mut out = idx.to_vec();
        out.remove(d);
        out
    })
}

fn squeeze(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let a = bind(lw.fx_node(), &["input", "dim"])?;
    let nd = x.sizes.len();
    let dims: Vec<usize> = match a[1] {
        None | Some(FxArg::None) => (0..nd).filter(|&d| x.sizes[d] == 1).collect(),
        Some(other) => reduce_dims(Some(other), nd)?.into_iter().filter(|&d| x.sizes[d] == 1).collect(),
    };
    let sizes: Vec<i64> = (0..nd).filter(|d| !dims.contains(d)).map(|d| x.sizes[d]).collect();
    view(lw, &x, &sizes, move |idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        let mut out = Vec::with_capacity(nd);
        let mut k = 0;
        for d in 0..nd {
            if dims.contains(&d) {
                out.push(Affine::constant(0, n_vars));
            } else {
                out.push(idx[k].clone());
                k += 1;
            }
        }
        out
    })
}

fn expand(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let sizes = meta_sizes(lw)?;
    if sizes.len() < x.sizes.len() {
        return unsupported("expand to fewer dims");
    }
    let xs = x.clone();
    let nd = sizes.len();
    view(lw, &x, &sizes, move |idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        xs.sizes
            .iter()
            .enumerate()
            .map(|(k, &s)| if s == 1 { Affine::constant(0, n_vars) } else { idx[nd - xs.sizes.len() + k].clone() })
            .collect()
    })
}

/// x.contiguous() and x.contiguous(memory_format=...): the same values. When `x` is already laid
/// out as the result must be, torch returns `x` itself, so this is a view (made by torch where
/// the alias matters); otherwise torch makes a new tensor in the node's meta layout, so this is a
/// copy, into which the ops producing `x` fuse (the layout pass in `layout.rs` inserts these).
fn contiguous(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let x = self_tensor(lw)?;
    let node = lw.fx_node();
    if node.args.len() != 1 || node.kwargs.iter().any(|(k, _)| k != "memory_format") {
        return unsupported("contiguous arguments");
    }
    let target = node.meta.as_ref().map(|m| m.layout.strides.clone());
    let source = lw.ir.buffers[x.buf.0 as usize].layout.as_ref().map(|l| l.strides.clone());
    let sizes = x.sizes.clone();
    let is_copy = match (&target, &source) {
        (Some(t), Some(s)) => sizes.iter().zip(t.iter().zip(s)).any(|(&n, (a, b))| n != 1 && a != b),
        _ => false,
    };
    if !is_copy {
        if !node.kwargs.is_empty() {
            return unsupported("memory_format= on a value already in that layout");
        }
        return view(lw, &x, &sizes, |idx| idx.to_vec());
    }
    let b = x.clone();
    Ok(lw.pointwise(&sizes, x.dtype, move |h, idx| h.load(b.buf, idx)))
}

/// `x.clone()` / `torch.clone(x)`, with any `memory_format`: a copy kernel into a new buffer
/// laid out as torch's meta says (`preserve_format` keeps a dense input's strides,
/// `contiguous_format` makes it contiguous), any modelled dtype. spectral_norm's
/// parametrization clones its `u`/`v` buffers on every call; the copy fuses with its readers.
fn clone(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "memory_format"])?;
    let x = lw.tensor_any_dtype(a[0].ok_or_else(|| LoweringError::Unsupported("missing input".into()))?)?;
    let b = x.clone();
    Ok(lw.pointwise(&x.sizes, x.dtype, move |h, idx| h.load(b.buf, idx)))
}

/// `torch._weight_norm(v, g, dim=0)` (what `nn.utils.parametrizations.weight_norm` calls):
/// `v * (g / ||v||)`, the 2-norm over every dim but `dim` kept as size 1 (ATen's
/// `norm_except_dim`; `dim == -1` is the norm of the whole tensor, not of the last dim), `g`
/// broadcast against it. One reduction kernel whose epilogue writes the weight, in the order of
/// ATen's CPU kernel (`weight_norm_first_dim_kernel`: `v * (g / norm)`, float32 sums).
fn weight_norm(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["v", "g", "dim"])?;
    let v = float_input(lw, a[0])?;
    let g = float_input(lw, a[1])?;
    let nd = v.sizes.len();
    let dims: Vec<usize> = match a[2] {
        None => (1..nd).collect(),
        Some(FxArg::Int(-1)) => (0..nd).collect(),
        Some(FxArg::Int(d)) => {
            let keep = wrap_dim(*d, nd)?;
            (0..nd).filter(|&k| k != keep).collect()
        }
        Some(other) => return unsupported(format!("dim {other:?}")),
    };
    // `g` holds one value per kept index (size 1 on the reduced dims), or fewer dims.
    let g_ok = g.sizes.len() <= nd
        && g.sizes.iter().enumerate().all(|(k, &s)| {
            let d = nd - g.sizes.len() + k;
            s == 1 || (s == v.sizes[d] && !dims.contains(&d))
        });
    if !g_ok || dims.is_empty() {
        return unsupported(format!("g of sizes {:?} for v of sizes {:?}", g.sizes, v.sizes));
    }
    let ss = sum_of_squares(lw, &v, dims);
    let out_dtype = v.dtype;
    Ok(lw.pointwise(&v.sizes.clone(), out_dtype, move |h, idx| {
        let x = h.load(v.buf, idx);
        let total = load_broadcast(h, &ss, idx);
        let norm = h.unary(UnaryOp::Sqrt, total);
        let gv = load_broadcast(h, &g, idx);
        let scale = h.binary(BinaryOp::Div, gv, norm);
        h.binary(BinaryOp::Mul, x, scale)
    }))
}

/// `x[i]`, `x[a:b:c]`, `x[None]`, `x[..., k]` and tuples of those (basic indexing: a view).
/// F.embedding: `out[i..., d] = weight[input[i...], d]`, each element an indirect load of the
/// weight's row (Note [indirect loads] in llvm/src/kernel.rs), so the lookups fuse with what
/// reads them (BERT's three embeddings, their sum and the LayerNorm are one kernel). The weight
/// must be in memory (a parameter, a constant or a fallback's result); `max_norm` (which
/// renormalizes the weight in place) runs through torch; `padding_idx`, `scale_grad_by_freq`
/// and `sparse` change only the backward. An index outside `[0, num_embeddings)` makes the
/// graph run eagerly, where torch raises its IndexError (Note [index checks]). Not on the GPU
/// target yet (nvptx.rs has no indirect loads).
fn embedding(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"])?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("embedding on the GPU target");
    }
    if !matches!(a[3], None | Some(FxArg::None)) {
        return unsupported("embedding with max_norm (renormalizes the weight in place)");
    }
    let (Some(input), Some(weight)) = (a[0], a[1]) else { return unsupported("embedding arguments") };
    let idx = lw.tensor_any_dtype(input)?;
    let w = lw.tensor_any_dtype(weight)?;
    if !idx.dtype.is_int() {
        return unsupported("embedding indices that are not int64/int32");
    }
    if w.sizes.len() != 2 || w.dtype == DType::Bool {
        return unsupported("embedding weight that is not a 2-D number tensor");
    }
    if !lw.in_memory(&w) {
        return unsupported("embedding weight computed in the graph");
    }
    let (rows, dim) = (w.sizes[0], w.sizes[1]);
    if rows < 1 || idx.sizes.is_empty() {
        return unsupported("embedding of an empty weight or of a 0-d index");
    }
    if idx.sizes.iter().product::<i64>() > 0 {
        lw.check_indices(&idx, rows, None);
    }
    let mut sizes = idx.sizes.clone();
    sizes.push(dim);
    let n = idx.sizes.len();
    let (ic, wbuf) = (idx.clone(), w.buf);
    Ok(lw.pointwise(&sizes, w.dtype, move |h, at| {
        let row = load_broadcast(h, &ic, &at[..n]);
        let n_vars = at[n].coeffs.len();
        h.load_indirect(wbuf, &[Affine::constant(0, n_vars), at[n].clone()], 0, row)
    }))
}

/// `aten.embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
/// scale_grad_by_freq)`: the weight gradient of F.embedding, `[num_weights, D]` with
/// `gw[indices[n], :] += grad_output[n, :]` over the tokens `n` in order, skipping tokens whose
/// index is `padding_idx` (derivatives.yaml: `embedding_backward`). A Scatter (Note [scatter
/// stores] in llvm/src/kernel.rs), so the gradient's producer (BERT's layer-norm backward) is
/// computed inside it: each row adds its tokens in order, as ATen's
/// `embedding_dense_backward_cpu` does, which gives eager's bits. An index outside
/// `[0, num_weights)` adds nothing there too (the forward has raised for it already).
/// `scale_grad_by_freq` (divides by each index's count) runs through torch, as does an empty
/// index tensor; CPU target only.
fn embedding_dense_backward(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["grad_output", "indices", "num_weights", "padding_idx", "scale_grad_by_freq"])?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("embedding_dense_backward on the GPU target");
    }
    if boolean(a[4], false)? {
        return unsupported("embedding_dense_backward with scale_grad_by_freq");
    }
    let (Some(grad), Some(indices), Some(FxArg::Int(rows)), Some(FxArg::Int(padding))) = (a[0], a[1], a[2], a[3]) else {
        return unsupported("embedding_dense_backward arguments");
    };
    let (rows, padding) = (*rows, *padding);
    let g = lw.tensor_any_dtype(grad)?;
    let idx = lw.tensor_any_dtype(indices)?;
    if !(g.dtype.is_float() || g.dtype == DType::F64) {
        return unsupported("embedding_dense_backward of a gradient that is not floating");
    }
    if !matches!(idx.dtype, DType::I64 | DType::I32) {
        return unsupported("embedding_dense_backward indices that are not int64/int32");
    }
    let n = idx.sizes.len();
    if rows < 1 || g.sizes.len() != n + 1 || g.sizes[..n] != idx.sizes[..] || idx.sizes.iter().product::<i64>() == 0 {
        return unsupported("embedding_dense_backward of an empty or mismatched index");
    }
    let (ic, gc, dt) = (idx.clone(), g.clone(), idx.dtype);
    Ok(lw.scatter(
        g.dtype,
        &g.sizes,
        n,
        rows,
        move |h, at| {
            let row = load_broadcast(h, &ic, &at[..n]);
            // The padding row's tokens add nothing: their row becomes -1.
            let pad = h.constant(padding as f64, dt);
            let is_pad = h.compare(CmpOp::Eq, row, pad);
            let none = h.constant(-1.0, dt);
            h.where_(is_pad, none, row)
        },
        move |h, at| load_broadcast(h, &gc, at),
    ))
}

/// `torch.gather(input, dim, index)`: `out[p] = input[p with dim replaced by index[p]]`, of
/// index's sizes, each element an indirect load (Note [indirect loads]) of the input, which must
/// be in memory or a view of a tensor in memory (BERT's `gather` of its expanded `token_type_ids`
/// buffer, Note [views of memory] in lowering.rs). int64 or int32 indices; an index outside `[0, input.size(dim))` runs the graph eagerly, where torch raises (Note
/// [index checks]). `sparse_grad` changes only the backward. CPU target only.
fn gather(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "dim", "index", "sparse_grad"])?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("gather on the GPU target");
    }
    let (Some(input), Some(FxArg::Int(dim)), Some(index)) = (a[0], a[1], a[2]) else {
        return unsupported("gather arguments");
    };
    let x = lw.tensor_any_dtype(input)?;
    let idx = lw.tensor_any_dtype(index)?;
    let nd = x.sizes.len();
    if !matches!(idx.dtype, DType::I64 | DType::I32) || nd == 0 || idx.sizes.len() != nd {
        return unsupported("gather other than an int64/int32 index with the input's number of dims");
    }
    let d = if *dim < 0 { *dim + nd as i64 } else { *dim };
    if !(0..nd as i64).contains(&d) {
        return unsupported("gather dim out of range");
    }
    let d = d as usize;
    if (0..nd).any(|k| k != d && idx.sizes[k] > x.sizes[k]) || x.sizes[d] == 0 {
        return unsupported("gather index larger than the input");
    }
    let Some(source) = lw.memory_view(&x, d) else {
        return unsupported("gather of a tensor computed in the graph");
    };
    if idx.sizes.iter().product::<i64>() > 0 {
        lw.check_indices(&idx, x.sizes[d], None);
    }
    let ic = idx.clone();
    Ok(lw.pointwise(&idx.sizes, x.dtype, move |h, at| {
        let row = load_broadcast(h, &ic, at);
        source.load_indirect(h, at, row)
    }))
}

/// F.cross_entropy of logits `x` [N, C] with class-index targets `t` [N] (no weight, no label
/// smoothing): `log_softmax` then `nll_loss`, with the target's log-probability read by an
/// indirect load of the logits (Note [indirect loads]):
/// `loss[i] = -(x[i, t[i]] - max_i - log(sum_j exp(x[i, j] - max_i)))`, 0 where `t[i]` is
/// `ignore_index`; "mean" divides the sum by the number of rows not ignored (NaN when all are,
/// as eager), "sum" sums, "none" returns the rows. The logits must be in memory (a linear's
/// result); a target outside `[0, C)` other than `ignore_index` runs the graph eagerly, where
/// torch raises (Note [index checks]).
fn cross_entropy(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(
        lw.fx_node(),
        &["input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"],
    )?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("cross_entropy on the GPU target");
    }
    if [a[2], a[3], a[5]].iter().any(|v| !matches!(v, None | Some(FxArg::None))) {
        return unsupported("cross_entropy with weight or legacy reduction arguments");
    }
    if number(a[7], 0.0)? != 0.0 {
        return unsupported("cross_entropy with label smoothing");
    }
    let ignore = match a[4] {
        None => -100,
        Some(FxArg::Int(k)) => *k,
        _ => return unsupported("ignore_index"),
    };
    let reduction = match a[6] {
        None => "mean",
        Some(FxArg::Str(r)) if matches!(r.as_str(), "mean" | "sum" | "none") => r.as_str(),
        _ => return unsupported("reduction"),
    };
    let (Some(input), Some(target)) = (a[0], a[1]) else { return unsupported("cross_entropy arguments") };
    let x = float_input(lw, Some(input))?;
    let t = lw.tensor_any_dtype(target)?;
    // int64 targets only: nll_loss refuses others ("expected scalar type Long"), and the
    // fallback raises that error as eager does.
    if x.sizes.len() != 2 || t.sizes.len() != 1 || t.sizes[0] != x.sizes[0] || t.dtype != DType::I64 {
        return unsupported("cross_entropy other than [N, C] logits with [N] int64 class indices");
    }
    if !lw.in_memory(&x) {
        return unsupported("cross_entropy of logits computed in the graph");
    }
    let (n, classes) = (x.sizes[0], x.sizes[1]);
    if n == 0 || classes == 0 {
        return unsupported("cross_entropy of an empty batch");
    }
    let reduction = reduction.to_string();
    lw.check_indices(&t, classes, Some(ignore));
    let (m, s) = softmax_stats(lw, &x, 1);
    let (xb, tc, tdt) = (x.buf, t.clone(), t.dtype);
    let loss = lw.pointwise(&[n], DType::F32, move |h, idx| {
        let n_vars = idx[0].coeffs.len();
        let row = [idx[0].clone(), Affine::constant(0, n_vars)];
        let ti = load_broadcast(h, &tc, idx);
        let picked = h.load_indirect(xb, &row, 1, ti);
        let picked = h.to_dtype(picked, DType::F32);
        let mx = h.load(m.buf, &row);
        let total = h.load(s.buf, &row);
        let l = h.unary(UnaryOp::Log, total);
        let shifted = h.binary(BinaryOp::Sub, picked, mx);
        let logp = h.binary(BinaryOp::Sub, shifted, l);
        let neg = h.unary(UnaryOp::Neg, logp);
        let ig = h.constant(ignore as f64, tdt);
        let valid = h.compare(CmpOp::Ne, ti, ig);
        let zero = h.constant(0.0, DType::F32);
        h.where_(valid, neg, zero)
    });
    let out_dtype = x.dtype;
    match reduction.as_str() {
        "none" => {
            let lc = loss.clone();
            Ok(lw.pointwise(&[n], out_dtype, move |h, idx| {
                let v = h.load(lc.buf, idx);
                h.to_dtype(v, out_dtype)
            }))
        }
        "sum" => {
            let total = reduce(lw, &loss, vec![0], false, ReductionType::Sum, DType::F32);
            Ok(lw.pointwise(&[], out_dtype, move |h, idx| {
                let v = h.load(total.buf, idx);
                h.to_dtype(v, out_dtype)
            }))
        }
        _ => {
            let total = reduce(lw, &loss, vec![0], false, ReductionType::Sum, DType::F32);
            let tc2 = t.clone();
            let counted = lw.pointwise(&[n], DType::F32, move |h, idx| {
                let ti = load_broadcast(h, &tc2, idx);
                let ig = h.constant(ignore as f64, tdt);
                let valid = h.compare(CmpOp::Ne, ti, ig);
                let one = h.constant(1.0, DType::F32);
                let zero = h.constant(0.0, DType::F32);
                h.where_(valid, one, zero)
            });
            let count = reduce(lw, &counted, vec![0], false, ReductionType::Sum, DType::F32);
            Ok(lw.pointwise(&[], out_dtype, move |h, idx| {
                let v = h.load(total.buf, idx);
                let c = h.load(count.buf, idx);
                let r = h.binary(BinaryOp::Div, v, c);
                h.to_dtype(r, out_dtype)
            }))
        }
    }
}

/// `buf` at `at`, read only where `mask` (and the handler's current mask) holds: Note [masked
/// loads] in llvm/src/kernel.rs. The value elsewhere is meaningless; callers select it away.
fn load_masked(h: &mut dyn OpsHandler, buf: super::ir::BufferId, at: &[Affine], mask: OpsValue) -> OpsValue {
    let outer = h.set_mask(None);
    let all = match outer {
        Some(o) => h.binary(BinaryOp::LogicalAnd, o, mask),
        None => mask,
    };
    h.set_mask(Some(all));
    let v = h.load(buf, at);
    h.set_mask(outer);
    v
}

/// torch.cat(tensors, dim): each output element is a load of the input whose segment of `dim`
/// holds it, at its coordinate minus the segment's start (masked loads, Note [masked loads]),
/// selected by comparisons of the coordinate. Inputs of shape `[0]` are skipped, as torch's
/// legacy rule does (transformers' empty key/value cache). All inputs share the output's dtype
/// (torch would promote otherwise) and sizes outside `dim`.
fn cat(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["tensors", "dim"])?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("cat on the GPU target (not measured there yet)");
    }
    let items = match a[0] {
        Some(FxArg::List(items)) | Some(FxArg::Tuple(items)) => items.clone(),
        _ => return unsupported("cat of something other than a list of tensors"),
    };
    let out_sizes = meta_sizes(lw)?;
    let out_dtype = lw.fx_node().meta.as_ref().map(|m| m.layout.dtype).ok_or_else(|| LoweringError::Unsupported("no meta".into()))?;
    let nd = out_sizes.len();
    if nd == 0 {
        return unsupported("cat to a 0-d result");
    }
    let dim = wrap_dim(match a[1] {
        None => 0,
        Some(FxArg::Int(d)) => *d,
        _ => return unsupported("cat dim"),
    }, nd)?;
    let mut parts: Vec<(TensorRef, i64)> = Vec::new();
    let mut start = 0i64;
    for it in &items {
        let t = lw.tensor_any_dtype(it)?;
        if t.sizes == [0] && nd > 1 {
            continue;
        }
        if t.dtype != out_dtype || t.sizes.len() != nd || (0..nd).any(|d| d != dim && t.sizes[d] != out_sizes[d]) {
            return unsupported("cat of tensors of other dtypes or sizes");
        }
        if t.sizes[dim] > 0 {
            parts.push((t.clone(), start));
        }
        start += t.sizes[dim];
    }
    if start != out_sizes[dim] || parts.is_empty() {
        return unsupported("cat sizes that do not add up");
    }
    // Along the innermost dim every element would load (masked) from every part, and the
    // vectorized loop cannot tell its lanes share a part: GPT-2's backward `cat` of three
    // [4, 32, 64] gradients took 12 us as a kernel against torch's 8.
    if parts.len() > 1 && out_sizes[dim + 1..].iter().all(|&n| n == 1) {
        return unsupported("cat of several tensors along the innermost dim");
    }
    Ok(lw.pointwise(&out_sizes.clone(), out_dtype, move |h, idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        let load_part = |h: &mut dyn OpsHandler, t: &TensorRef, s: i64, masked: bool| -> OpsValue {
            let mut at = idx.to_vec();
            at[dim] = idx[dim].scaled_add(1, &Affine::constant(-s, n_vars));
            if !masked {
                return h.load(t.buf, &at);
            }
            let inside = h.in_range(&at[dim], t.sizes[dim]);
            load_masked(h, t.buf, &at, inside)
        };
        let single = parts.len() == 1;
        // From the last segment back: where(coordinate inside part k, part k, later parts).
        let (last, last_start) = parts.last().expect("checked non-empty");
        let mut v = load_part(h, last, *last_start, !single);
        for (t, s) in parts.iter().rev().skip(1) {
            let inside = h.in_range(&idx[dim].scaled_add(1, &Affine::constant(-s, n_vars)), t.sizes[dim]);
            let here = load_part(h, t, *s, true);
            v = h.where_(inside, here, v);
        }
        v
    }))
}

/// F.pad in "constant" mode (ATen `constant_pad_nd`): `pad` gives (before, after) counts for
/// the last dims, last dim first; negative counts crop. Each output element is the input at
/// its coordinate minus the leading pad where that lies inside the input (a masked load, Note
/// [masked loads] in llvm/src/kernel.rs), else `value` (0 by default). Integer tensors take
/// integral values only (torch would cast the fill); other modes run through torch.
fn pad(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let a = bind(lw.fx_node(), &["input", "pad", "mode", "value"])?;
    if super::cuda::target() != super::cuda::Target::Cpu {
        return unsupported("pad on the GPU target (not measured there yet)");
    }
    if !matches!(a[2], None | Some(FxArg::None)) && !matches!(a[2], Some(FxArg::Str(m)) if m == "constant") {
        return unsupported("pad mode other than constant");
    }
    let x = lw.tensor_any_dtype(a[0].ok_or_else(|| LoweringError::Unsupported("pad without input".into()))?)?;
    let counts = match a[1] {
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => items.iter().map(int).collect::<Result<Vec<i64>, _>>()?,
        _ => return unsupported("pad counts that are not a list of ints"),
    };
    let nd = x.sizes.len();
    if counts.len() % 2 != 0 || counts.len() / 2 > nd {
        return unsupported("pad counts of odd length or longer than the input's dims");
    }
    let value = number(a[3], 0.0)?;
    if x.dtype == DType::Bool || (x.dtype.is_int() && value.fract() != 0.0) {
        return unsupported("pad value that torch would cast");
    }
    if !x.dtype.holds_scalar(value) {
        // torch raises "value cannot be converted to type ... without overflow".
        return unsupported("pad value out of the tensor dtype's range");
    }
    // (dim, leading count) per padded dim; output sizes.
    let mut out = x.sizes.clone();
    let mut lead = vec![0i64; nd];
    for (k, pair) in counts.chunks(2).enumerate() {
        let d = nd - 1 - k;
        lead[d] = pair[0];
        out[d] = x.sizes[d] + pair[0] + pair[1];
        if out[d] < 0 {
            return unsupported("pad that leaves a negative size");
        }
    }
    let (sizes, dtype) = (x.sizes.clone(), x.dtype);
    Ok(lw.pointwise(&out.clone(), dtype, move |h, idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        let mut mask: Option<OpsValue> = None;
        let mut at = Vec::with_capacity(nd);
        for d in 0..nd {
            let c = idx[d].scaled_add(1, &Affine::constant(-lead[d], n_vars));
            // The coordinate leaves the input only where this dim is padded.
            if lead[d] > 0 || out[d] - lead[d] > sizes[d] {
                let r = h.in_range(&c, sizes[d]);
                mask = Some(match mask {
                    Some(m) => h.binary(BinaryOp::LogicalAnd, m, r),
                    None => r,
                });
            }
            at.push(c);
        }
        // The fill value in the tensor's dtype, as torch converts it (half types round).
        let fill = h.constant(value, dtype);
        let fill = round_to_half(h, fill, dtype);
        match mask {
            Some(m) => {
                let v = load_masked(h, x.buf, &at, m);
                h.where_(m, v, fill)
            }
            None => h.load(x.buf, &at),
        }
    }))
}

fn getitem(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let node = lw.fx_node();
    let (Some(base), Some(index)) = (node.args.first(), node.args.get(1)) else { return unsupported("getitem arguments") };
    let x = lw.tensor_any_dtype(base)?;
    let items: Vec<FxArg> = match index {
        FxArg::Tuple(items) => items.clone(),
        other => vec![other.clone()],
    };
    enum Item {
        /// Keep the dim: start, step, length.
        Slice(i64, i64, i64),
        /// Drop the dim: the index.
        Int(i64),
        /// New size-1 dim.
        NewAxis,
    }
    let nd = x.sizes.len();
    let n_consuming = items.iter().filter(|a| !matches!(a, FxArg::None | FxArg::Ellipsis)).count();
    if n_consuming > nd || items.iter().filter(|a| matches!(a, FxArg::Ellipsis)).count() > 1 {
        return unsupported("too many indices");
    }
    let mut plan: Vec<Item> = Vec::new();
    let mut d = 0usize;
    for a in &items {
        match a {
            FxArg::Ellipsis => {
                for _ in 0..nd - n_consuming {
                    plan.push(Item::Slice(0, 1, x.sizes[d]));
                    d += 1;
                }
            }
            FxArg::None => plan.push(Item::NewAxis),
            FxArg::Int(i) => {
                let s = x.sizes[d];
                let k = if *i < 0 { i + s } else { *i };
                if k < 0 || k >= s {
                    return unsupported("index out of range (torch raises)");
                }
                plan.push(Item::Int(k));
                d += 1;
            }
            FxArg::Slice { start, stop, step, .. } => {
                let s = x.sizes[d];
                let step = step.unwrap_or(1);
                if step <= 0 {
                    return unsupported("slice step <= 0");
                }
                let clampi = |v: i64| if v < 0 { (v + s).max(0) } else { v.min(s) };
                let lo = start.map(clampi).unwrap_or(0);
                let hi = stop.map(clampi).unwrap_or(s);
                let len = if hi > lo { (hi - lo + step - 1) / step } else { 0 };
                plan.push(Item::Slice(lo, step, len));
                d += 1;
            }
            _ => return unsupported("advanced indexing"),
        }
    }
    while d < nd {
        plan.push(Item::Slice(0, 1, x.sizes[d]));
        d += 1;
    }
    let mut sizes = Vec::new();
    for p in &plan {
        match p {
            Item::Slice(_, _, len) => sizes.push(*len),
            Item::NewAxis => sizes.push(1),
            Item::Int(_) => {}
        }
    }
    if sizes.contains(&0) {
        return unsupported("empty slice");
    }
    let plan: Vec<(u8, i64, i64)> = plan
        .iter()
        .map(|p| match p {
            Item::Slice(lo, st, _) => (0, *lo, *st),
            Item::Int(k) => (1, *k, 0),
            Item::NewAxis => (2, 0, 0),
        })
        .collect();
    view(lw, &x, &sizes, move |idx| {
        let n_vars = idx.first().map(|a| a.coeffs.len()).unwrap_or(0);
        let mut out = Vec::new();
        let mut k = 0;
        for &(kind, a, b) in &plan {
            match kind {
                0 => {
                    let mut v = idx[k].clone();
                    v = v.scaled_add(b, &Affine::constant(a, n_vars));
                    out.push(v);
                    k += 1;
                }
                1 => out.push(Affine::constant(a, n_vars)),
                _ => k += 1,
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::reshape_map;

    #[test]
    fn reshape_groups() {
        // split [6] -> [2, 3]: affine.
        assert!(reshape_map(&[6], &[2, 3]).is_some());
        // merge [2, 3] -> [6]: needs division.
        assert!(reshape_map(&[2, 3], &[6]).is_none());
        // size-1 dims come and go.
        assert!(reshape_map(&[4, 1, 1], &[4]).is_some());
        assert!(reshape_map(&[4], &[1, 4, 1]).is_some());
        assert!(reshape_map(&[2, 512, 1, 1], &[2, 512]).is_some());
        // split of the last dim into heads.
        assert!(reshape_map(&[2, 8, 64], &[2, 8, 4, 16]).is_some());
        assert!(reshape_map(&[2, 8, 4, 16], &[2, 8, 64]).is_none());
    }
}
