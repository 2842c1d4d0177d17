//! Lowering: imported fx nodes -> inductor IR buffers, one lowering per op in a table.
//!
//! Invariants:
//! - Lowerings are pure: they map operands to a `Pointwise` (or refuse with a reason); buffers are
//!   allocated only by [`lower`] after a lowering succeeded.
//! - The registrar ([`make_pointwise`]) does broadcasting and type promotion for every pointwise
//!   op, and validates the result against the node's meta (sizes and dtype torch computed); any
//!   disagreement becomes a fallback, never a guess.
//! - Pointwise ops compute in float32 (and the half types through it), float64, int64/int32 and
//!   bool as Note [pointwise dtypes] allows; decompositions and reductions in float32 only; CPU
//!   tensors with static sizes only.

use std::collections::HashSet;
use std::rc::Rc;

use super::fx_import::{FxArg, FxGraph, FxNode, FxOp};
use super::ir::{
    Affine, BinaryOp, Buffer, BufferId, BufferKind, CmpOp, DType, FallbackKernel, GraphIr, InnerFn, Layout, OpsHandler,
    OpsValue, Pointwise, Reduction, UnaryOp,
};

/// Above this many inlined scalar ops a pointwise producer is realized instead of inlined.
pub const MAX_INLINE_OPS: usize = 256;

/// Note [reused chains]: an unrealized pointwise buffer is recomputed by every reader it is
/// inlined into, with every tensor it reads through its own inlined producers. A residual
/// stream (`h = h + attn(ln(h))`, `h = h + mlp(ln(h))` per transformer layer) is such a chain:
/// each `h` has two readers (the next LayerNorm, the next residual add), so unrealized, the
/// LayerNorm of layer L read every earlier layer's output again (2L + 2 tensors; measured on the
/// H200: GPT-2's LayerNorm kernels took 41 us at the first layer up to 86 us at the last, for a
/// [4096, 768] input). As Inductor does (its `realize_reads_threshold`), a buffer with two or more
/// readers that reads more than this many tensors is realized when a pointwise reader is
/// lowered; its readers then read it once, and its own kernel (often the LayerNorm's, as a
/// store of a member) writes it. On the GPU target only: the CPU path keeps its kernels.
pub const MAX_REUSED_READS: usize = 3;

/// Why a node was not lowered (it then runs as a fallback).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoweringError {
    #[error("no lowering for {0}")]
    NoLowering(String),
    #[error("{0}")]
    Unsupported(String),
}

/// One operand of a pointwise op: a tensor buffer or a Python scalar.
#[derive(Clone, Debug)]
pub enum Operand {
    Tensor { buf: BufferId, sizes: Vec<i64>, dtype: DType },
    Scalar { value: f64, dtype: DType },
}

/// The compute an op does on already-promoted values.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Where,
    /// `+x`: identity (still realized as a copy when it is an output).
    Pos,
    /// `x * x`.
    Square,
    /// Reversed binary (`__rsub__(x, y)` is `y - x`).
    Reversed(BinaryOp),
    /// `reciprocal(operand t) * the other operand`, in the tensor's dtype in between: Python's
    /// `number / tensor` (Note [reciprocal division]).
    RecipMul(usize),
    /// `x op (y * alpha)` (torch.add/sub with `alpha=`).
    Alpha(BinaryOp, f64),
    /// `x * sigmoid(x)` (F.silu).
    Silu,
    /// F.gelu; `true` for `approximate="tanh"`.
    Gelu(bool),
    /// `x > 0 ? x : x * slope` (F.leaky_relu).
    LeakyRelu(f64),
    /// torch.clamp: `min(max(x, lo), hi)`, NaN-propagating; operands are x, then the bounds given
    /// (signed zeros as ATen: Note [clamp signed zeros]).
    Clamp { lo: bool, hi: bool },
}

/// The lowering table: canonical op name -> (number of tensor/scalar operands, rule). Ops whose
/// operands depend on keywords (clamp, leaky_relu, gelu) are finished in [`decode`].
fn lowering_table(name: &str) -> Option<(usize, Rule)> {
    use BinaryOp as B;
    use CmpOp as C;
    use UnaryOp as U;
    Some(match name {
        "neg" => (1, Rule::Unary(U::Neg)),
        "abs" => (1, Rule::Unary(U::Abs)),
        "relu" => (1, Rule::Unary(U::Relu)),
        "sigmoid" => (1, Rule::Unary(U::Sigmoid)),
        "tanh" => (1, Rule::Unary(U::Tanh)),
        "exp" => (1, Rule::Unary(U::Exp)),
        "expm1" => (1, Rule::Unary(U::Expm1)),
        "log" => (1, Rule::Unary(U::Log)),
        "log1p" => (1, Rule::Unary(U::Log1p)),
        "sqrt" => (1, Rule::Unary(U::Sqrt)),
        "rsqrt" => (1, Rule::Unary(U::Rsqrt)),
        "sin" => (1, Rule::Unary(U::Sin)),
        "cos" => (1, Rule::Unary(U::Cos)),
        "erf" => (1, Rule::Unary(U::Erf)),
        "reciprocal" => (1, Rule::Unary(U::Reciprocal)),
        "floor" => (1, Rule::Unary(U::Floor)),
        "ceil" => (1, Rule::Unary(U::Ceil)),
        "logical_not" => (1, Rule::Unary(U::LogicalNot)),
        // `&`, `|`, `~` are logical only on bool tensors; `bool_only` refuses other dtypes.
        "bitwise_not" => (1, Rule::Unary(U::LogicalNot)),
        "bitwise_and" => (2, Rule::Binary(B::LogicalAnd)),
        "bitwise_or" => (2, Rule::Binary(B::LogicalOr)),
        "pos" => (1, Rule::Pos),
        "square" => (1, Rule::Square),
        "silu" => (1, Rule::Silu),
        "gelu" => (1, Rule::Gelu(false)),
        "leaky_relu" => (1, Rule::LeakyRelu(0.01)),
        "clamp" => (3, Rule::Clamp { lo: true, hi: true }),
        "clamp_min" => (2, Rule::Clamp { lo: true, hi: false }),
        "clamp_max" => (2, Rule::Clamp { lo: false, hi: true }),
        "add" | "radd" => (2, Rule::Binary(B::Add)),
        "sub" => (2, Rule::Binary(B::Sub)),
        "rsub" => (2, Rule::Reversed(B::Sub)),
        "mul" => (2, Rule::Binary(B::Mul)),
        "div" => (2, Rule::Binary(B::Div)),
        "rdiv" => (2, Rule::Reversed(B::Div)),
        "maximum" => (2, Rule::Binary(B::Maximum)),
        "minimum" => (2, Rule::Binary(B::Minimum)),
        "pow" => (2, Rule::Binary(B::Pow)),
        "logical_and" => (2, Rule::Binary(B::LogicalAnd)),
        "logical_or" => (2, Rule::Binary(B::LogicalOr)),
        "eq" => (2, Rule::Compare(C::Eq)),
        "ne" => (2, Rule::Compare(C::Ne)),
        "lt" => (2, Rule::Compare(C::Lt)),
        "le" => (2, Rule::Compare(C::Le)),
        "gt" => (2, Rule::Compare(C::Gt)),
        "ge" => (2, Rule::Compare(C::Ge)),
        "where" => (3, Rule::Where),
        _ => return None,
    })
}

/// True for ops the pointwise table lowers (`torch.add`, `relu`, ...).
pub fn is_pointwise_op(canonical: &str) -> bool {
    lowering_table(canonical).is_some()
}

/// True for ops that are only logical (and only lowered) when every operand is bool.
fn bool_only(node: &FxNode) -> bool {
    node.canonical.is_some_and(|c| c.starts_with("bitwise_"))
}

fn number(a: &FxArg) -> Option<f64> {
    match a {
        FxArg::Int(v) => Some(*v as f64),
        FxArg::Float(v) => Some(*v),
        _ => None,
    }
}

/// Syntactic decoding of a node into its rule and operand arguments (in rule order), folding the
/// keywords we understand; no IR is touched, so meta inference and lowering share it.
fn decode(node: &FxNode) -> Result<(Rule, Vec<&FxArg>), LoweringError> {
    let canonical = node.canonical.ok_or_else(|| LoweringError::NoLowering(node.target_name.clone()))?;
    let (n_operands, mut rule) =
        lowering_table(canonical).ok_or_else(|| LoweringError::NoLowering(node.target_name.clone()))?;
    let unsupported = |what: String| Err(LoweringError::Unsupported(what));
    let mut args: Vec<&FxArg> = node.args.iter().collect();
    // Trailing positional flags/parameters of the F.* activations.
    match canonical {
        "relu" | "silu" | "sigmoid" | "tanh" if args.len() == 2 => {
            if !matches!(args[1], FxArg::Bool(false)) {
                return unsupported(format!("{canonical} with argument {:?}", args[1]));
            }
            args.pop();
        }
        "leaky_relu" if args.len() >= 2 => {
            if args.len() == 3 && !matches!(args[2], FxArg::Bool(false)) {
                return unsupported("leaky_relu in place".into());
            }
            rule = Rule::LeakyRelu(number(args[1]).ok_or_else(|| LoweringError::Unsupported("slope".into()))?);
            args.truncate(1);
        }
        _ => {}
    }
    // clamp's bounds are optional and may come by keyword; None drops a bound.
    let mut clamp_bounds: Vec<(&str, &FxArg)> = Vec::new();
    if canonical == "clamp" {
        for (i, a) in args.iter().enumerate().skip(1) {
            clamp_bounds.push((if i == 1 { "min" } else { "max" }, a));
        }
        args.truncate(1);
    }
    for (k, v) in &node.kwargs {
        match (k.as_str(), v) {
            // An integer alpha past 2**53 has no exact float64 (`Rule::Alpha` holds one); torch
            // multiplies int64 operands by it exactly.
            ("alpha", FxArg::Int(v)) if v.unsigned_abs() > 1 << 53 => return unsupported(format!("alpha={v} (beyond float64's exact integers)")),
            ("alpha", a) if matches!(canonical, "add" | "sub") => match (number(a), rule) {
                (Some(alpha), Rule::Binary(op)) => rule = Rule::Alpha(op, alpha),
                _ => return unsupported(format!("alpha={a:?}")),
            },
            ("inplace", FxArg::Bool(false)) => {}
            ("rounding_mode", FxArg::None) => {}
            ("approximate", FxArg::Str(mode)) if canonical == "gelu" => match mode.as_str() {
                "none" => rule = Rule::Gelu(false),
                "tanh" => rule = Rule::Gelu(true),
                other => return unsupported(format!("gelu approximate={other}")),
            },
            ("negative_slope", a) if canonical == "leaky_relu" => {
                rule = Rule::LeakyRelu(number(a).ok_or_else(|| LoweringError::Unsupported("slope".into()))?)
            }
            ("min" | "max", a) if canonical == "clamp" => clamp_bounds.push((k.as_str(), a)),
            ("other" | "exponent" | "input" | "min" | "max", _) => args.push(v),
            _ => return unsupported(format!("keyword argument {k}={v:?}")),
        }
    }
    if canonical == "clamp" {
        let lo = clamp_bounds.iter().find(|(k, a)| *k == "min" && !matches!(a, FxArg::None));
        let hi = clamp_bounds.iter().find(|(k, a)| *k == "max" && !matches!(a, FxArg::None));
        if lo.is_none() && hi.is_none() {
            return unsupported("clamp without bounds".into());
        }
        args.extend(lo.map(|(_, a)| *a));
        args.extend(hi.map(|(_, a)| *a));
        rule = Rule::Clamp { lo: lo.is_some(), hi: hi.is_some() };
        return Ok((rule, args));
    }
    // `x.where(cond, y)` style and `torch.where(cond)` are not what we lower.
    if args.len() != n_operands {
        return unsupported(format!("{canonical} with {} operands (expected {n_operands})", args.len()));
    }
    Ok((rule, args))
}

/// Broadcast `shapes` (numpy rules, as torch.broadcast_shapes); `None` if incompatible.
pub fn broadcast_shapes(shapes: &[&[i64]]) -> Option<Vec<i64>> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1i64; ndim];
    for s in shapes {
        for (k, &size) in s.iter().enumerate() {
            let d = ndim - s.len() + k;
            if size == out[d] || size == 1 {
                continue;
            }
            if out[d] == 1 {
                out[d] = size;
            } else {
                return None;
            }
        }
    }
    Some(out)
}

/// Note [pointwise dtypes]: float32 (and the half types, computed in float32) takes every rule;
/// float64 the exact ones (no transcendental function: kernels have no float64 libm); integers
/// the ones torch defines for them that cannot divide (wrapping arithmetic, max/min, abs, clamp,
/// relu, floor/ceil as copies); bool only the logical ops, `where` and copies. Anything else is a
/// fallback.
fn computes_in(rule: Rule, compute: DType) -> bool {
    use BinaryOp as B;
    use UnaryOp as U;
    let exact_float = |r: Rule| match r {
        Rule::Unary(op) => matches!(op, U::Neg | U::Abs | U::Relu | U::Sqrt | U::Floor | U::Ceil | U::Reciprocal | U::Rsqrt),
        Rule::Binary(op) | Rule::Reversed(op) | Rule::Alpha(op, _) => !matches!(op, B::Pow),
        Rule::Silu | Rule::Gelu(_) => false,
        _ => true,
    };
    match compute {
        DType::F32 => true,
        DType::F64 => exact_float(rule),
        DType::I64 | DType::I32 => match rule {
            Rule::Unary(op) => matches!(op, U::Neg | U::Abs | U::Relu | U::Floor | U::Ceil),
            Rule::Binary(op) | Rule::Reversed(op) | Rule::Alpha(op, _) => {
                matches!(op, B::Add | B::Sub | B::Mul | B::Maximum | B::Minimum)
            }
            Rule::Compare(_) | Rule::Where | Rule::Pos | Rule::Square | Rule::Clamp { .. } => true,
            _ => false,
        },
        DType::Bool => matches!(
            rule,
            Rule::Unary(U::LogicalNot) | Rule::Binary(B::LogicalAnd | B::LogicalOr) | Rule::Where | Rule::Pos
        ),
        _ => false,
    }
}

/// The registrar: broadcasts operands to `out.sizes`, promotes them to `compute` dtype, applies
/// `rule`, and checks the result dtype against `out.dtype`.
fn make_pointwise(
    rule: Rule,
    operands: Vec<Operand>,
    out: &Layout,
    n_ops: usize,
) -> Result<Pointwise, LoweringError> {
    let tensor_sizes: Vec<&[i64]> = operands
        .iter()
        .filter_map(|o| match o {
            Operand::Tensor { sizes, .. } => Some(sizes.as_slice()),
            _ => None,
        })
        .collect();
    if tensor_sizes.is_empty() {
        return Err(LoweringError::Unsupported("no tensor operand".into()));
    }
    let sizes = broadcast_shapes(&tensor_sizes)
        .ok_or_else(|| LoweringError::Unsupported("operands do not broadcast".into()))?;
    if sizes != out.sizes {
        return Err(LoweringError::Unsupported(format!(
            "broadcast sizes {sizes:?} differ from meta sizes {:?}",
            out.sizes
        )));
    }
    // Type promotion (torch's `result_type`: Note [pointwise dtypes]): `common` is what the
    // operands promote to; arithmetic computes in the result dtype (float32 for the half types),
    // comparisons in `common`.
    let mut typed: Vec<(DType, u8)> = Vec::new();
    for (i, o) in operands.iter().enumerate() {
        if matches!(rule, Rule::Where) && i == 0 {
            continue; // the condition does not take part in promotion
        }
        typed.push(match o {
            Operand::Tensor { sizes, dtype, .. } => (*dtype, if sizes.is_empty() { 1 } else { 0 }),
            Operand::Scalar { dtype, .. } => (*dtype, 2),
        });
    }
    let common = DType::result_type(&typed)
        .ok_or_else(|| LoweringError::Unsupported("operand dtype is not modelled".into()))?;
    // Ops whose result is floating whatever their operands (integers promote to the default
    // dtype, float32, as torch's `promote_integer_inputs_to_float` ops do).
    let to_float = |d: DType| if d == DType::Bool || d.is_int() { DType::F32 } else { d };
    let (compute, result) = match rule {
        // Bools compare as 0/1 integers.
        Rule::Compare(_) => (if common == DType::Bool { DType::I32 } else { common.compute() }, DType::Bool),
        Rule::Unary(UnaryOp::LogicalNot) | Rule::Binary(BinaryOp::LogicalAnd | BinaryOp::LogicalOr) => {
            (DType::Bool, DType::Bool)
        }
        Rule::Where | Rule::Pos => (common.compute(), common),
        Rule::Unary(UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Floor | UnaryOp::Ceil)
        | Rule::Square
        | Rule::Clamp { .. }
        | Rule::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Pow)
        | Rule::Reversed(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Pow)
        | Rule::Alpha(..) => (common.compute(), common),
        _ => (to_float(common).compute(), to_float(common)),
    };
    if result != out.dtype || out.dtype == DType::Other {
        return Err(LoweringError::Unsupported(format!(
            "result dtype {:?} (meta) is not the {:?} this lowering computes",
            out.dtype, result
        )));
    }
    if !computes_in(rule, compute) {
        return Err(LoweringError::Unsupported(format!("{rule:?} is not lowered for {compute:?} values")));
    }
    if let Rule::Where = rule {
        match &operands[0] {
            Operand::Tensor { dtype: DType::Bool, .. } | Operand::Scalar { dtype: DType::Bool, .. } => {}
            _ => return Err(LoweringError::Unsupported("where condition is not bool".into())),
        }
    }
    let ndim = sizes.len();
    let out_sizes = sizes.clone();
    // Note [half scalars] describes ATen's CPU kernels; its CUDA kernels read a Python number
    // in float32 (`opmath` scalars), so the GPU target keeps it unrounded.
    let cpu = super::cuda::target() == super::cuda::Target::Cpu;
    let inner_fn: InnerFn = Rc::new(move |h: &mut dyn OpsHandler, index: &[Affine]| -> OpsValue {
        let mut vals: Vec<OpsValue> = Vec::with_capacity(operands.len());
        for (i, o) in operands.iter().enumerate() {
            let want = match rule {
                Rule::Where if i == 0 => DType::Bool,
                _ => compute,
            };
            let (v, have) = match o {
                Operand::Tensor { buf, sizes, dtype: stored } => {
                    // Half-precision elements load as float32 values.
                    let dtype = &stored.compute();
                    let n_vars = index.first().map(|a| a.coeffs.len()).unwrap_or(0);
                    let idx: Vec<Affine> = sizes
                        .iter()
                        .enumerate()
                        .map(|(k, &s)| {
                            let d = ndim - sizes.len() + k;
                            if s == 1 && out_sizes[d] != 1 {
                                Affine::constant(0, n_vars)
                            } else {
                                index[d].clone()
                            }
                        })
                        .collect();
                    let v = h.load(*buf, &idx);
                    // Note [half promotion]: an operand of another dtype meeting a half type is
                    // cast to it before the op (TensorIterator's common dtype), so an integer
                    // tensor's 257 is bfloat16's 256 and 70000 is float16's inf: converted to
                    // float32 then rounded, as c10's Half and BFloat16 convert from integers.
                    // A 0-d operand is a CPU scalar that ATen reads unrounded where it reads
                    // Python numbers so (Note [half scalars]; every op on the GPU).
                    let zero_d = sizes.is_empty();
                    if *stored != common && common.is_half() && want == DType::F32 && !(zero_d && (!cpu || keeps_zero_d(rule, i))) {
                        let v = if *dtype == want { v } else { h.to_dtype(v, want) };
                        (round_to_half(h, v, common), want)
                    } else {
                        (v, *dtype)
                    }
                }
                // Scalars are made in the compute dtype directly (exact for integers). Operands
                // of a half type round them to it first (Note [half scalars]).
                Operand::Scalar { value, .. } => {
                    let c = h.constant(*value, want);
                    let rounds = cpu && want == DType::F32 && !keeps_scalar(rule, i);
                    (if rounds { round_to_half(h, c, common) } else { c }, want)
                }
            };
            vals.push(if have == want { v } else { h.to_dtype(v, want) });
        }
        match rule {
            // torch.floor/ceil of an integer tensor is a copy.
            Rule::Unary(UnaryOp::Floor | UnaryOp::Ceil) if compute.is_int() => vals[0],
            Rule::Unary(op) => h.unary(op, vals[0]),
            // Note [bfloat16 integer powers]: ATen's CPU `pow` of a bfloat16 tensor by 3 or -2
            // (`pow_tensor_scalar_optimized_kernel`) multiplies in bfloat16, rounding `x * x`
            // before the last step (8.5 ** 3 is 612 there, 614.125 in one rounding); float16
            // and the other exponents compute in float32 and round once.
            Rule::Binary(BinaryOp::Pow) if cpu && result == DType::BF16 && matches!(operands.get(1), Some(Operand::Scalar { value, .. }) if *value == 3.0 || *value == -2.0) => {
                let Some(Operand::Scalar { value, .. }) = operands.get(1) else { unreachable!("matched above") };
                let square = h.binary(BinaryOp::Mul, vals[0], vals[0]);
                let square = h.to_dtype(square, DType::BF16);
                if *value == 3.0 {
                    h.binary(BinaryOp::Mul, square, vals[0])
                } else {
                    h.unary(UnaryOp::Reciprocal, square)
                }
            }
            Rule::Binary(op) => h.binary(op, vals[0], vals[1]),
            Rule::Reversed(op) => h.binary(op, vals[1], vals[0]),
            Rule::RecipMul(t) => {
                let r = h.unary(UnaryOp::Reciprocal, vals[t]);
                let r = round_to_half(h, r, result);
                h.binary(BinaryOp::Mul, r, vals[1 - t])
            }
            Rule::Compare(op) => h.compare(op, vals[0], vals[1]),
            Rule::Where => h.where_(vals[0], vals[1], vals[2]),
            Rule::Pos => vals[0],
            Rule::Square => h.binary(BinaryOp::Mul, vals[0], vals[0]),
            Rule::Alpha(op, alpha) => {
                let a = h.constant(alpha, compute);
                let scaled = h.binary(BinaryOp::Mul, vals[1], a);
                h.binary(op, vals[0], scaled)
            }
            // silu(x) = x / (1 + exp(-x)), torch's CPU formula (one rounding fewer than
            // x * sigmoid(x), which differed from eager in 23% of elements against 4%).
            Rule::Silu => {
                let one = h.constant(1.0, DType::F32);
                let neg = h.unary(UnaryOp::Neg, vals[0]);
                let e = h.unary(UnaryOp::Exp, neg);
                let den = h.binary(BinaryOp::Add, one, e);
                h.binary(BinaryOp::Div, vals[0], den)
            }
            // gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2)))   (torch's CPU formula)
            Rule::Gelu(false) => {
                let x = vals[0];
                let c = h.constant(std::f64::consts::FRAC_1_SQRT_2, DType::F32);
                let half = h.constant(0.5, DType::F32);
                let one = h.constant(1.0, DType::F32);
                let e = h.binary(BinaryOp::Mul, x, c);
                let e = h.unary(UnaryOp::Erf, e);
                let e = h.binary(BinaryOp::Add, one, e);
                let xh = h.binary(BinaryOp::Mul, x, half);
                h.binary(BinaryOp::Mul, xh, e)
            }
            // gelu_tanh(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
            Rule::Gelu(true) => {
                let x = vals[0];
                let beta = h.constant((2.0 / std::f64::consts::PI).sqrt(), DType::F32);
                let kappa = h.constant(0.044715, DType::F32);
                let half = h.constant(0.5, DType::F32);
                let one = h.constant(1.0, DType::F32);
                let x2 = h.binary(BinaryOp::Mul, x, x);
                let x3 = h.binary(BinaryOp::Mul, x2, x);
                let inner = h.binary(BinaryOp::Mul, kappa, x3);
                let inner = h.binary(BinaryOp::Add, x, inner);
                let inner = h.binary(BinaryOp::Mul, beta, inner);
                let t = h.unary(UnaryOp::Tanh, inner);
                let t = h.binary(BinaryOp::Add, one, t);
                let hx = h.binary(BinaryOp::Mul, half, x);
                h.binary(BinaryOp::Mul, hx, t)
            }
            Rule::LeakyRelu(slope) => {
                let zero = h.constant(0.0, compute);
                let pos = h.compare(CmpOp::Gt, vals[0], zero);
                let s = h.constant(slope, compute);
                let neg = h.binary(BinaryOp::Mul, vals[0], s);
                h.where_(pos, vals[0], neg)
            }
            // Note [clamp signed zeros]: ATen's clamp with a scalar bound keeps x unless it is
            // strictly beyond the bound (x < lo gives lo, x > hi gives hi), so clamp(-0.0, min=0)
            // is -0.0; x = NaN stays NaN, and a NaN scalar bound makes every element NaN. With a
            // tensor bound ATen's vectorized kernel returns the bound when x equals it
            // (clamp(-0.0, min=tensor(0.0)) is 0.0) and propagates NaN from either side, which is
            // what `Maximum`/`Minimum` do (Note in llvm/src/legalize.rs).
            Rule::Clamp { lo, hi } => {
                let mut v = vals[0];
                let mut next = 1;
                for (present, is_lo) in [(lo, true), (hi, false)] {
                    if !present {
                        continue;
                    }
                    let bound = vals[next];
                    v = match operands[next] {
                        Operand::Scalar { value, .. } => clamp_to_scalar(h, v, bound, value, is_lo),
                        Operand::Tensor { .. } => {
                            h.binary(if is_lo { BinaryOp::Maximum } else { BinaryOp::Minimum }, v, bound)
                        }
                    };
                    next += 1;
                }
                v
            }
        }
    });
    // Every op on half-precision tensors rounds its result to that precision, as torch does per op
    // (a fused chain must not keep float32 intermediates that eager would have rounded).
    let inner_fn: InnerFn = if matches!(result, DType::BF16 | DType::F16) {
        Rc::new(move |h: &mut dyn OpsHandler, index: &[Affine]| {
            let v = inner_fn(h, index);
            h.to_dtype(v, result)
        })
    } else {
        inner_fn
    };
    Ok(Pointwise { ranges: sizes, dtype: result, inner_fn, n_ops, n_reads: 1, realized: false })
}

/// `v` (a float32 value) rounded to `dtype`'s precision when `dtype` is a half type, as torch
/// holds a value of that type; `v` itself otherwise.
pub(crate) fn round_to_half(h: &mut dyn OpsHandler, v: OpsValue, dtype: DType) -> OpsValue {
    if dtype.is_half() {
        h.to_dtype(v, dtype)
    } else {
        v
    }
}

/// Note [half scalars]: torch converts a Python number meeting tensors of a half type (float16,
/// bfloat16) to that type before the op, so `x.half() - 65520.0` subtracts inf and
/// `x.half() ** 1.0004` raises to the power 1; except where ATen's CPU kernel reads the
/// original number in float32 (`iter.original_scalar_value<opmath_t>` in `mul_kernel` and the
/// true-division kernel, for the number as the second operand): `x.half() * 1.0004` keeps
/// 1.0004 (measured: 1000 * 1.0004 gives 1000.5 in float16, 1000 / 1.0004 gives 999.5, while
/// 1 - 1.0004, 1.0004 - 1, 1.0004 / 1, 1 < 1.0004 and 1000 ** 1.0004 see 1.0). `i`: the
/// operand's position in the fx call; a product keeps its number in either position (Python's
/// `2.5 * x` is `x.__rmul__(2.5)`, the number second).
/// `keeps_scalar` for a 0-d tensor operand: ATen reads the original value only of a CPU scalar
/// in the op's second position (`iter.is_cpu_scalar(2)` in `mul_kernel` and the true division
/// kernel), and a 0-d tensor keeps its position in the call (`s * x` is `mul(s, x)`, where a
/// Python number's `2.5 * x` is `x.__rmul__(2.5)`), so `s * x_half` rounds `s` to the half
/// type and `x_half * s` does not.
fn keeps_zero_d(rule: Rule, i: usize) -> bool {
    match rule {
        Rule::Binary(BinaryOp::Mul | BinaryOp::Div) => i == 1,
        Rule::Reversed(BinaryOp::Mul | BinaryOp::Div) => i == 0,
        Rule::RecipMul(_) => true,
        _ => false,
    }
}

fn keeps_scalar(rule: Rule, i: usize) -> bool {
    match rule {
        Rule::Binary(BinaryOp::Mul) | Rule::Reversed(BinaryOp::Mul) | Rule::RecipMul(_) => true,
        Rule::Binary(BinaryOp::Div) => i == 1,
        Rule::Reversed(BinaryOp::Div) => i == 0,
        _ => false,
    }
}

/// `v` clamped to the scalar bound `bound` (whose value is `value`) from below (`lower`) or above,
/// as ATen's scalar-bound clamp does (Note [clamp signed zeros]): `bound` only when `v` is strictly
/// beyond it, so equal values, -0.0 against 0.0 included, keep `v`'s bits; NaN `v` stays NaN; a
/// NaN bound gives NaN.
pub(crate) fn clamp_to_scalar(h: &mut dyn OpsHandler, v: OpsValue, bound: OpsValue, value: f64, lower: bool) -> OpsValue {
    if value.is_nan() {
        return bound;
    }
    let beyond = h.compare(if lower { CmpOp::Lt } else { CmpOp::Gt }, v, bound);
    h.where_(beyond, bound, v)
}

/// Maps decoded operand arguments to IR operands (buffers with static CPU layouts, scalars).
fn operands(args: &[&FxArg], ir: &GraphIr) -> Result<Vec<Operand>, LoweringError> {
    let mut operands = Vec::new();
    for a in args {
        operands.push(match a {
            FxArg::Node(j) => {
                let buf = ir.node_buffer[*j].ok_or_else(|| LoweringError::Unsupported("operand has no value".into()))?;
                let layout = ir
                    .buffer(buf)
                    .layout
                    .as_ref()
                    .ok_or_else(|| LoweringError::Unsupported(format!("operand {buf} is not a static tensor")))?;
                if !layout.cpu {
                    return Err(LoweringError::Unsupported(format!("operand {buf} is not on the cpu")));
                }
                Operand::Tensor { buf, sizes: layout.sizes.clone(), dtype: layout.dtype }
            }
            FxArg::Float(v) => Operand::Scalar { value: *v, dtype: DType::F32 },
            // Python ints are int64 scalars; beyond 2**53 the f64 value would not be exact.
            FxArg::Int(v) if v.unsigned_abs() <= 1 << 53 => Operand::Scalar { value: *v as f64, dtype: DType::I64 },
            FxArg::Bool(v) => Operand::Scalar { value: *v as u8 as f64, dtype: DType::Bool },
            other => return Err(LoweringError::Unsupported(format!("operand {other:?}"))),
        });
    }
    Ok(operands)
}

/// Note [reciprocal division]: Python's `number / tensor` is `Tensor.__rtruediv__`, which torch
/// defines as `tensor.reciprocal() * number` (torch/_tensor.py): two roundings, the reciprocal's
/// in the tensor's dtype, where one division rounds once (`3.7 / x` of float32 randn differed
/// from eager in 26% of elements). Both spellings, `x.__rtruediv__(s)` and `operator.truediv(s,
/// x)` (how a trace records `s / x`), take that form; `torch.div(s, x)` stays one division.
fn reciprocal_form(node: &FxNode, rule: Rule, operands: &[Operand]) -> Rule {
    let scalar = |i: usize| matches!(operands.get(i), Some(Operand::Scalar { .. }));
    let tensor = |i: usize| matches!(operands.get(i), Some(Operand::Tensor { .. }));
    match rule {
        Rule::Reversed(BinaryOp::Div) if tensor(0) && scalar(1) => Rule::RecipMul(0),
        Rule::Binary(BinaryOp::Div) if scalar(0) && tensor(1) && node.target_name.ends_with("operator.truediv") => Rule::RecipMul(1),
        _ => rule,
    }
}

fn lower_pointwise(g: &FxGraph, node: &FxNode, ir: &mut GraphIr) -> Result<Pointwise, LoweringError> {
    let (rule, args) = decode(node)?;
    let meta = node.meta.as_ref().ok_or_else(|| LoweringError::Unsupported("no static tensor meta".into()))?;
    if !meta.layout.cpu {
        return Err(LoweringError::Unsupported("result is not on the cpu".into()));
    }
    let operands = operands(&args, ir)?;
    let rule = reciprocal_form(node, rule, &operands);
    if bool_only(node)
        && operands.iter().any(|o| !matches!(o, Operand::Tensor { dtype: DType::Bool, .. } | Operand::Scalar { dtype: DType::Bool, .. }))
    {
        return Err(LoweringError::Unsupported("bitwise op on non-bool operands".into()));
    }
    // Realize producers that grew too large to inline, or that several readers would recompute
    // from many tensors (Note [reused chains]); count ops and reads for the rest.
    let gpu = super::cuda::target() != super::cuda::Target::Cpu;
    let mut n_ops = 1;
    let mut n_reads = 0;
    for o in &operands {
        if let Operand::Tensor { buf, .. } = o {
            let readers = g.nodes.get(ir.buffers[buf.0 as usize].node).map_or(0, |n| n.users.len());
            if let BufferKind::Pointwise(pw) = &mut ir.buffers[buf.0 as usize].kind {
                if !pw.realized && pw.n_ops > MAX_INLINE_OPS {
                    pw.realized = true;
                    tracing::debug!(target: "inductor::lowering", "realize {buf}: {} inlined ops", pw.n_ops);
                }
                if gpu && !pw.realized && readers >= 2 && pw.n_reads > MAX_REUSED_READS {
                    pw.realized = true;
                    tracing::debug!(target: "inductor::lowering", "realize {buf}: {readers} readers, {} tensors read", pw.n_reads);
                }
                if !pw.realized {
                    n_ops += pw.n_ops;
                    n_reads += pw.n_reads;
                    continue;
                }
            }
            n_reads += 1;
        }
    }
    let mut pw = make_pointwise(rule, operands, &meta.layout, n_ops)?;
    pw.n_reads = n_reads;
    Ok(pw)
}

/// One-line description of a node for logs and plans: `call_function sin` etc.
pub fn describe(node: &FxNode) -> String {
    match &node.op {
        FxOp::CallFunction { .. } => format!("call_function {} ({})", node.target_name, node.name),
        FxOp::CallMethod { name } => format!("call_method {name} ({})", node.name),
        FxOp::CallModule { .. } => format!("call_module {} ({})", node.target_name, node.name),
        other => format!("{other:?} ({})", node.name),
    }
}

/// A lowered tensor value: the buffer holding it, its sizes and dtype.
#[derive(Clone, Debug)]
pub struct TensorRef {
    pub buf: BufferId,
    pub sizes: Vec<i64>,
    pub dtype: DType,
}

/// What decompositions build with (PyTorch: the `TensorBox` helpers lowerings call): pushes the
/// buffers one fx node lowers to. [`lower`] rolls every pushed buffer back when the lowering
/// fails, so a decomposition may push intermediates before it discovers it cannot finish.
pub struct Lowerer<'a> {
    pub g: &'a FxGraph,
    pub ir: &'a mut GraphIr,
    /// The fx node being lowered.
    pub node: usize,
    n_pushed: usize,
}

impl Lowerer<'_> {
    /// The node being lowered.
    pub fn fx_node(&self) -> &FxNode {
        &self.g.nodes[self.node]
    }

    /// The buffer and static CPU layout of the tensor an argument names.
    fn tensor_layout(&self, a: &FxArg) -> Result<(BufferId, &Layout), LoweringError> {
        let FxArg::Node(j) = a else {
            return Err(LoweringError::Unsupported(format!("expected a tensor, got {a:?}")));
        };
        let buf = self.ir.node_buffer[*j].ok_or_else(|| LoweringError::Unsupported("operand has no value".into()))?;
        let layout = self
            .ir
            .buffer(buf)
            .layout
            .as_ref()
            .ok_or_else(|| LoweringError::Unsupported(format!("operand {buf} is not a static tensor")))?;
        if !layout.cpu {
            return Err(LoweringError::Unsupported(format!("operand {buf} is not on the cpu")));
        }
        Ok((buf, layout))
    }

    /// The tensor an argument names: a node with a static CPU float32 (or half, computed in
    /// float32) or bool layout, what decompositions that compute accept.
    pub fn tensor(&self, a: &FxArg) -> Result<TensorRef, LoweringError> {
        let (buf, layout) = self.tensor_layout(a)?;
        if !(layout.dtype.is_float() || layout.dtype == DType::Bool) {
            return Err(LoweringError::Unsupported(format!("operand {buf} is not a cpu float32/bool tensor")));
        }
        Ok(TensorRef { buf, sizes: layout.sizes.clone(), dtype: layout.dtype })
    }

    /// Like [`Lowerer::tensor`], but any modelled dtype (float64 and the integers too), for
    /// decompositions that only move or convert values.
    pub fn tensor_any_dtype(&self, a: &FxArg) -> Result<TensorRef, LoweringError> {
        let (buf, layout) = self.tensor_layout(a)?;
        if layout.dtype == DType::Other {
            return Err(LoweringError::Unsupported(format!("operand {buf} is not of a modelled dtype")));
        }
        Ok(TensorRef { buf, sizes: layout.sizes.clone(), dtype: layout.dtype })
    }

    fn push(&mut self, kind: BufferKind, sizes: &[i64], dtype: DType) -> TensorRef {
        let id = BufferId(self.ir.buffers.len() as u32);
        let name = format!("{}_{}", self.g.nodes[self.node].name, self.n_pushed);
        self.n_pushed += 1;
        let layout = Layout { sizes: sizes.to_vec(), strides: Layout::contiguous_strides(sizes), dtype, cpu: true };
        self.ir.buffers.push(Buffer { id, name, node: self.node, layout: Some(layout), kind });
        TensorRef { buf: id, sizes: sizes.to_vec(), dtype }
    }

    /// An unrealized Pointwise over `sizes` computing `f` (inlined into its readers).
    pub fn pointwise(
        &mut self,
        sizes: &[i64],
        dtype: DType,
        f: impl Fn(&mut dyn OpsHandler, &[Affine]) -> OpsValue + 'static,
    ) -> TensorRef {
        let n_ops = 8;
        let pw = Pointwise { ranges: sizes.to_vec(), dtype, inner_fn: Rc::new(f), n_ops, n_reads: 1, realized: false };
        self.push(BufferKind::Pointwise(pw), sizes, dtype)
    }

    /// A Reduction (accumulated in float32; stored as `dtype`), realized.
    pub fn reduction(&mut self, dtype: DType, r: Reduction) -> TensorRef {
        let sizes: Vec<i64> = r.out_dims().iter().map(|&d| if r.reduced.contains(&d) { 1 } else { r.input_sizes[d] }).collect();
        self.push(BufferKind::Reduction(r), &sizes, dtype)
    }

    /// A Scatter (`ir::Scatter`: `out[row(p), p[lead..]] += value(p)` over a zeroed output of
    /// sizes `[rows] + ranges[lead..]`), realized as its own kernel.
    pub fn scatter(
        &mut self,
        dtype: DType,
        ranges: &[i64],
        lead: usize,
        rows: i64,
        row_fn: impl Fn(&mut dyn OpsHandler, &[Affine]) -> OpsValue + 'static,
        value_fn: impl Fn(&mut dyn OpsHandler, &[Affine]) -> OpsValue + 'static,
    ) -> TensorRef {
        let mut sizes = vec![rows];
        sizes.extend_from_slice(&ranges[lead..]);
        let sc = super::ir::Scatter { ranges: ranges.to_vec(), lead, rows, row_fn: Rc::new(row_fn), inner_fn: Rc::new(value_fn) };
        self.push(BufferKind::Scatter(sc), &sizes, dtype)
    }

    /// Note [views of memory]: `t` as an affine view of a tensor in memory (an input, a constant
    /// or a fallback's result; see [`Lowerer::in_memory`]), when it is one: the tensor itself, or
    /// an unrealized chain of view bodies (getitem, expand, transpose, ...: each exactly one
    /// load at an affine index) over it. Gathering along `dim` needs that dim to be one dim of
    /// the base, read at unit coefficient and offset 0, that no other base dim follows.
    pub fn memory_view(&self, t: &TensorRef, dim: usize) -> Option<MemoryView> {
        let n = t.sizes.len();
        let at: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
        let mut probe = ViewProbe { ir: self.ir, load: None, impure: false };
        let v = probe.load(t.buf, &at);
        let (base, map) = probe.load.filter(|_| !probe.impure && v == OpsValue(1))?;
        if !self.buffer_in_memory(base) {
            return None;
        }
        let unit = Affine::var(dim, n);
        let base_dim = map.iter().position(|a| *a == unit)?;
        if map.iter().enumerate().any(|(k, a)| k != base_dim && a.coeffs[dim] != 0) {
            return None;
        }
        Some(MemoryView { base, map, base_dim })
    }

    /// True when `t` is a tensor in memory at run time that kernels never compute: a graph
    /// input, a constant or a fallback's result (what `OpsHandler::load_indirect` may read).
    pub fn in_memory(&self, t: &TensorRef) -> bool {
        self.buffer_in_memory(t.buf)
    }

    fn buffer_in_memory(&self, id: BufferId) -> bool {
        let b = self.ir.buffer(id);
        matches!(b.kind, BufferKind::Input { .. } | BufferKind::Constant { .. } | BufferKind::Fallback(_)) && b.layout.is_some()
    }

    /// Registers Note [index checks] for integer `index` read as rows `[0, size)` (or equal to
    /// `also`: nll_loss's `ignore_index`): a realized 0-d reduction, nonzero when some element
    /// is out of range.
    pub fn check_indices(&mut self, index: &TensorRef, size: i64, also: Option<i64>) {
        let (ic, dt) = (index.clone(), index.dtype);
        let bad = self.pointwise(&index.sizes, DType::F32, move |h, idx| {
            let v = load_broadcast(h, &ic, idx);
            let lo = h.constant(0.0, dt);
            let hi = h.constant(size as f64, dt);
            let ge = h.compare(CmpOp::Ge, v, lo);
            let lt = h.compare(CmpOp::Lt, v, hi);
            let mut ok = h.binary(BinaryOp::LogicalAnd, ge, lt);
            if let Some(extra) = also {
                let e = h.constant(extra as f64, dt);
                let eq = h.compare(CmpOp::Eq, v, e);
                ok = h.binary(BinaryOp::LogicalOr, ok, eq);
            }
            let zero = h.constant(0.0, DType::F32);
            let one = h.constant(1.0, DType::F32);
            h.where_(ok, zero, one)
        });
        let n = index.sizes.len();
        let r = self.reduction(
            DType::F32,
            Reduction {
                input_sizes: index.sizes.clone(),
                reduced: (0..n).collect(),
                keepdim: false,
                op: super::ir::ReductionType::Max,
                inner_fn: Rc::new(move |h: &mut dyn OpsHandler, idx: &[Affine]| h.load(bad.buf, idx)),
            },
        );
        self.ir.index_checks.push(r.buf);
    }

    /// Marks `t`'s buffer realized when it is a Pointwise (it will be computed into memory).
    pub fn realize(&mut self, t: &TensorRef) {
        if let BufferKind::Pointwise(pw) = &mut self.ir.buffers[t.buf.0 as usize].kind {
            pw.realized = true;
        }
    }
}

/// A view of a tensor in memory, gathered along one dim (Note [views of memory]).
#[derive(Clone, Debug)]
pub struct MemoryView {
    /// The tensor in memory.
    pub base: BufferId,
    /// For each dim of the base, its coordinate as an affine function of the view's.
    pub map: Vec<Affine>,
    /// The base dim the gathered view dim is.
    pub base_dim: usize,
}

impl MemoryView {
    /// The view's element at `at` (one affine entry per view dim, over the loop variables) with
    /// the gathered dim's entry replaced by the integer value `row`.
    pub fn load_indirect(&self, h: &mut dyn OpsHandler, at: &[Affine], row: OpsValue) -> OpsValue {
        let n_vars = at.first().map_or(0, |a| a.coeffs.len());
        let index: Vec<Affine> = self
            .map
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let mut out = Affine::constant(if k == self.base_dim { 0 } else { m.offset }, n_vars);
                if k != self.base_dim {
                    for (v, &c) in m.coeffs.iter().enumerate() {
                        if c != 0 {
                            out = at[v].scaled_add(c, &out);
                        }
                    }
                }
                out
            })
            .collect();
        h.load_indirect(self.base, &index, self.base_dim, row)
    }
}

/// Follows unrealized pointwise bodies down to their one load (Note [views of memory]); any
/// other op, or a second load, makes the body impure.
struct ViewProbe<'a> {
    ir: &'a GraphIr,
    load: Option<(BufferId, Vec<Affine>)>,
    impure: bool,
}

impl OpsHandler for ViewProbe<'_> {
    fn load(&mut self, buf: BufferId, index: &[Affine]) -> OpsValue {
        if let BufferKind::Pointwise(pw) = &self.ir.buffer(buf).kind {
            if !pw.realized {
                let f = pw.inner_fn.clone();
                return f(self, index);
            }
        }
        self.impure |= self.load.is_some();
        self.load = Some((buf, index.to_vec()));
        OpsValue(1)
    }
    fn load_indirect(&mut self, _b: BufferId, _i: &[Affine], _d: usize, _r: OpsValue) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn constant(&mut self, _v: f64, _d: DType) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn unary(&mut self, _op: UnaryOp, _a: OpsValue) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn binary(&mut self, _op: BinaryOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn compare(&mut self, _op: CmpOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn where_(&mut self, _c: OpsValue, _a: OpsValue, _b: OpsValue) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn to_dtype(&mut self, a: OpsValue, _d: DType) -> OpsValue {
        self.impure = true;
        a
    }
    fn in_range(&mut self, _index: &Affine, _size: i64) -> OpsValue {
        self.impure = true;
        OpsValue(0)
    }
    fn set_mask(&mut self, _mask: Option<OpsValue>) -> Option<OpsValue> {
        self.impure = true;
        None
    }
}

/// Loads `t` at `index` (one entry per output dim of a space of `out_ndim` dims), broadcasting
/// it from the right as torch does: size-1 dims of `t` read index 0.
pub fn load_broadcast(h: &mut dyn OpsHandler, t: &TensorRef, index: &[Affine]) -> OpsValue {
    let ndim = index.len();
    let n_vars = index.first().map(|a| a.coeffs.len()).unwrap_or(0);
    let idx: Vec<Affine> = t
        .sizes
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let d = ndim - t.sizes.len() + k;
            if s == 1 {
                Affine::constant(0, n_vars)
            } else {
                index[d].clone()
            }
        })
        .collect();
    h.load(t.buf, &idx)
}

/// Note [half decomposition results]: a decomposition of an op on a half type (softmax,
/// layer_norm, mean, hardswish, batch_norm ...) computes in float32, as ATen's kernels do, and
/// ATen rounds the op's result to the half type. A store into a half buffer rounds it, but a
/// reader that inlines the result (`softmax(x_bf16).float()`, `layer_norm(h) + y`) saw the
/// float32 value. So an unrealized Pointwise that is a decomposition's half-typed result rounds
/// its value itself, as `make_pointwise` does for the pointwise table's ops; its
/// intermediates stay float32.
fn round_half_result(lw: &mut Lowerer<'_>, t: &TensorRef) {
    if !t.dtype.is_half() {
        return;
    }
    let dtype = t.dtype;
    if let Some(Buffer { kind: BufferKind::Pointwise(pw), .. }) = lw.ir.buffers.get_mut(t.buf.0 as usize) {
        if pw.dtype == dtype {
            let f = pw.inner_fn.clone();
            pw.inner_fn = Rc::new(move |h: &mut dyn OpsHandler, index: &[Affine]| {
                let v = f(h, index);
                h.to_dtype(v, dtype)
            });
        }
    }
}

/// Lowers one call node: a decomposition when the op has one, else the pointwise table.
fn lower_call(lw: &mut Lowerer<'_>) -> Result<TensorRef, LoweringError> {
    let node = &lw.g.nodes[lw.node];
    if let Some(decomp) = node.canonical.and_then(super::decompositions::lookup) {
        let t = decomp(lw)?;
        round_half_result(lw, &t);
        return Ok(t);
    }
    let pw = lower_pointwise(lw.g, node, lw.ir)?;
    let dtype = pw.dtype;
    let sizes = pw.ranges.clone();
    Ok(lw.push(BufferKind::Pointwise(pw), &sizes, dtype))
}

/// Lowers every node of `g`; also decides which Pointwise buffers are realized.
pub fn lower(g: &FxGraph) -> GraphIr {
    let mut ir = GraphIr { buffers: Vec::new(), node_buffer: vec![None; g.nodes.len()], must_store: HashSet::new(), index_checks: Vec::new(), fallback_writes: Vec::new() };
    let mut fallback_inputs: HashSet<BufferId> = HashSet::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let layout = node.meta.as_ref().map(|m| m.layout.clone());
        let kind = match &node.op {
            FxOp::Output => {
                // Everything the graph returns or writes back must exist as a tensor.
                for wb in &g.writebacks {
                    if let Some(b) = ir.node_buffer[wb.src] {
                        fallback_inputs.insert(b);
                    }
                }
                for a in &node.args {
                    a.for_each_node(&mut |j| {
                        if let Some(b) = ir.node_buffer[j] {
                            fallback_inputs.insert(b);
                        }
                    });
                }
                continue;
            }
            FxOp::Placeholder { position } => BufferKind::Input { position: *position },
            FxOp::GetAttr { .. } => BufferKind::Constant { node: i },
            FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. } => {
                let start = ir.buffers.len();
                let lowered = {
                    let mut lw = Lowerer { g, ir: &mut ir, node: i, n_pushed: 0 };
                    lower_call(&mut lw).and_then(|t| validate(node, &t).map(|()| t))
                };
                match lowered {
                    Ok(t) => {
                        tracing::debug!(target: "inductor::lowering", "lowered {} ({} buffers)", describe(node), ir.buffers.len() - start);
                        // The node's value: its final buffer, named after the node, with the
                        // strides torch gives it (dense), else contiguous.
                        let b = &mut ir.buffers[t.buf.0 as usize];
                        b.name = node.name.clone();
                        if let Some(mut l) = layout {
                            if !l.is_non_overlapping_and_dense() {
                                l.strides = Layout::contiguous_strides(&l.sizes);
                            }
                            b.layout = Some(l);
                        }
                        ir.node_buffer[i] = Some(t.buf);
                        continue;
                    }
                    Err(err) => {
                        ir.buffers.truncate(start);
                        ir.index_checks.retain(|b| (b.0 as usize) < start);
                        tracing::debug!(target: "inductor::lowering", "fallback for {}: {err}", describe(node));
                        for a in node.args.iter().chain(node.kwargs.iter().map(|(_, a)| a)) {
                            a.for_each_node(&mut |j| {
                                if let Some(b) = ir.node_buffer[j] {
                                    fallback_inputs.insert(b);
                                }
                            });
                        }
                        BufferKind::Fallback(FallbackKernel { node: i, reason: err.to_string() })
                    }
                }
            }
        };
        let id = BufferId(ir.buffers.len() as u32);
        if matches!(kind, BufferKind::Fallback(_)) {
            let written: Vec<BufferId> = written_inputs(node).into_iter().filter_map(|j| ir.node_buffer[j]).collect();
            if !written.is_empty() {
                ir.fallback_writes.push((id, written));
            }
        }
        ir.buffers.push(Buffer { id, name: node.name.clone(), node: i, layout, kind });
        ir.node_buffer[i] = Some(id);
    }
    if !ir.fallback_writes.is_empty() {
        // Note [fallbacks that write their inputs]: what reads a written buffer before the
        // fallback is computed into memory before it.
        for b in 0..ir.buffers.len() {
            if !matches!(ir.buffers[b].kind, BufferKind::Pointwise(_)) {
                continue;
            }
            let reads = ir.body_reads(BufferId(b as u32));
            if ir.fallback_writes.iter().any(|(f, written)| (b as u32) < f.0 && written.iter().any(|w| reads.contains(w))) {
                fallback_inputs.insert(BufferId(b as u32));
            }
        }
    }
    fallback_inputs.extend(ir.index_checks.iter().copied());
    for b in &fallback_inputs {
        if let BufferKind::Pointwise(pw) = &mut ir.buffers[b.0 as usize].kind {
            pw.realized = true;
        }
    }
    ir.must_store = fallback_inputs;
    ir
}

/// Note [fallbacks that write their inputs]: a training-mode `batch_norm` / `instance_norm`
/// with running statistics runs through torch (a fallback) and updates `running_mean` and
/// `running_var` in place, where functionalization sees no in-place op. Kernels that read
/// those buffers must keep eager's order around the update: a read written before the call
/// sees the old statistics and one written after it the new ones. An inductor graph that read
/// `bn.running_mean` before and after a training `bn(x)` fused both reads into one kernel that
/// ran before the update, and an eval-mode `bn` after a training one normalized with the old
/// statistics. So each such fallback records the buffers it writes (`GraphIr::fallback_writes`);
/// Pointwise buffers before it that read them are realized (computed into memory, not inlined
/// into a later kernel), and the scheduler orders every reader of a written buffer before or
/// after the fallback as in the graph (`scheduler::schedule`).
///
/// The nodes node `node` writes in place when it runs through torch (empty for most).
pub fn written_inputs(node: &FxNode) -> Vec<usize> {
    // (target, parameters, the flag that makes it update the statistics)
    const FUNCTIONAL: [&str; 8] = ["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"];
    const ATEN: [&str; 9] = ["input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps", "cudnn_enabled"];
    let params: &[&str] = match node.target_name.as_str() {
        "torch.nn.functional.batch_norm" | "torch.nn.functional.instance_norm" => &FUNCTIONAL,
        "torch.batch_norm" | "torch.instance_norm" => &ATEN,
        _ => return Vec::new(),
    };
    let flag = if node.target_name.ends_with("instance_norm") { "use_input_stats" } else { "training" };
    let mut out: Vec<Option<&FxArg>> = vec![None; params.len()];
    for (i, a) in node.args.iter().enumerate().take(params.len()) {
        out[i] = Some(a);
    }
    for (k, v) in &node.kwargs {
        let k = if k == "use_input_stats" { "training" } else { k.as_str() };
        if let Some(i) = params.iter().position(|p| *p == k) {
            out[i] = Some(v);
        }
    }
    let pos = |name: &str| params.iter().position(|p| *p == name).expect("a parameter");
    // `instance_norm` defaults to using the input's statistics; batch_norm to eval.
    let updates = match out[pos("training")] {
        Some(FxArg::Bool(b)) => *b,
        None => flag == "use_input_stats",
        // Not a constant: assume it may update.
        Some(_) => true,
    };
    if !updates {
        return Vec::new();
    }
    let mut written = Vec::new();
    for name in ["running_mean", "running_var"] {
        if let Some(FxArg::Node(j)) = out[pos(name)] {
            written.push(*j);
        }
    }
    written
}

/// Checks a lowering's result against the node's meta (what torch computes): same sizes and
/// dtype, on the cpu. A mismatch is a bug in the lowering; it becomes a fallback, never a guess.
fn validate(node: &FxNode, t: &TensorRef) -> Result<(), LoweringError> {
    let meta = node.meta.as_ref().ok_or_else(|| LoweringError::Unsupported("no static tensor meta".into()))?;
    if !meta.layout.cpu {
        return Err(LoweringError::Unsupported("result is not on the cpu".into()));
    }
    if meta.layout.sizes != t.sizes || meta.layout.dtype != t.dtype {
        return Err(LoweringError::Unsupported(format!(
            "lowering gives {:?} {:?}, torch gives {:?} {:?}",
            t.sizes, t.dtype, meta.layout.sizes, meta.layout.dtype
        )));
    }
    Ok(())
}

/// Output strides torch's TensorIterator gives a pointwise result of `sizes` computed from
/// operands with `operand_layouts` (argument order): dimensions are sorted by the operands'
/// strides, ignoring broadcast (stride 0) dimensions, ties broken by size; the output is dense in
/// that order. (PyTorch: `TensorIteratorBase::reorder_dimensions` and `compatible_stride`.)
pub fn pointwise_output_strides(sizes: &[i64], operand_layouts: &[&Layout]) -> Vec<i64> {
    let ndim = sizes.len();
    // Operand strides broadcast to `sizes`: 0 where the operand is broadcast or lacks the dim.
    let strides: Vec<Vec<i64>> = operand_layouts
        .iter()
        .map(|l| {
            let mut st = vec![0i64; ndim];
            for (k, (&sz, &stride)) in l.sizes.iter().zip(&l.strides).enumerate() {
                let d = ndim - l.sizes.len() + k;
                st[d] = if sz == 1 && sizes[d] != 1 { 0 } else { stride };
            }
            st
        })
        .collect();
    let should_swap = |dim0: usize, dim1: usize| -> i32 {
        for st in &strides {
            let (s0, s1) = (st[dim0], st[dim1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            if sizes[dim0] > sizes[dim1] {
                return 1;
            }
        }
        0
    };
    // perm[0] is the fastest-moving dimension.
    let mut perm: Vec<usize> = (0..ndim).rev().collect();
    for i in 1..ndim {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            let c = should_swap(perm[dim0], perm[dim1]);
            if c > 0 {
                perm.swap(dim0, dim1);
                dim1 = dim0;
            } else if c < 0 {
                break;
            }
        }
    }
    let mut out = vec![0i64; ndim];
    let mut next = 1i64;
    for &d in &perm {
        out[d] = next;
        next *= sizes[d];
    }
    out
}

/// Infers the meta of node `i` when it is a pointwise op we lower and its operands' metas are
/// known (dtype promotion restricted to float32/bool; anything else returns `None` so real
/// propagation decides).
pub fn infer_meta(nodes: &[FxNode], i: usize) -> Option<super::fx_import::TensorMeta> {
    let (rule, args) = decode(&nodes[i]).ok()?;
    let mut tensors: Vec<&Layout> = Vec::new();
    let mut dtypes: Vec<(DType, bool)> = Vec::new(); // (dtype, is_tensor)
    for a in &args {
        match a {
            FxArg::Node(j) => {
                let m = nodes[*j].meta.as_ref()?;
                // Only float32-computed and bool tensors: the other dtypes' promotion is left to
                // real propagation.
                if !m.layout.cpu || !(m.layout.dtype.is_float() || m.layout.dtype == DType::Bool) || m.requires_grad {
                    return None;
                }
                tensors.push(&m.layout);
                dtypes.push((m.layout.dtype, true));
            }
            FxArg::Float(_) => dtypes.push((DType::F32, false)),
            FxArg::Bool(_) => dtypes.push((DType::Bool, false)),
            // An int scalar only keeps float32 when a float32 tensor is present.
            FxArg::Int(_) => dtypes.push((DType::Other, false)),
            _ => return None,
        }
    }
    if tensors.is_empty() || (bool_only(&nodes[i]) && dtypes.iter().any(|(d, _)| *d != DType::Bool)) {
        return None;
    }
    let shapes: Vec<&[i64]> = tensors.iter().map(|l| l.sizes.as_slice()).collect();
    let sizes = broadcast_shapes(&shapes)?;
    if sizes.contains(&0) {
        return None;
    }
    let has_f32_tensor = dtypes.iter().any(|(d, t)| *t && *d == DType::F32);
    let dtype = match rule {
        Rule::Compare(_) => DType::Bool,
        Rule::Unary(UnaryOp::LogicalNot) | Rule::Binary(BinaryOp::LogicalAnd | BinaryOp::LogicalOr) => DType::Bool,
        Rule::Where => {
            let branches = &dtypes[1..];
            if dtypes[0].0 != DType::Bool {
                return None;
            }
            if branches.iter().any(|&(d, is_tensor)| is_tensor && d == DType::F32) {
                DType::F32
            } else if branches.iter().all(|&(d, _)| d == DType::Bool) && branches.iter().any(|&(_, t)| t) {
                DType::Bool
            } else {
                return None;
            }
        }
        _ if has_f32_tensor => DType::F32,
        _ => return None,
    };
    let strides = pointwise_output_strides(&sizes, &tensors);
    Some(super::fx_import::TensorMeta { layout: Layout { sizes, strides, dtype, cpu: true }, requires_grad: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(sizes: &[i64], strides: &[i64]) -> Layout {
        Layout { sizes: sizes.to_vec(), strides: strides.to_vec(), dtype: DType::F32, cpu: true }
    }

    #[test]
    fn broadcast_shapes_follow_numpy_rules() {
        assert_eq!(broadcast_shapes(&[&[5, 1, 7], &[6, 1]]), Some(vec![5, 6, 7]));
        assert_eq!(broadcast_shapes(&[&[3], &[]]), Some(vec![3]));
        assert_eq!(broadcast_shapes(&[&[3], &[4]]), None);
    }

    /// Expected values are what eager torch 2.x returns for `a + b` (checked by the pytests too).
    #[test]
    fn output_strides_match_tensor_iterator() {
        let check = |sizes: &[i64], ops: &[Layout], want: &[i64]| {
            let refs: Vec<&Layout> = ops.iter().collect();
            assert_eq!(pointwise_output_strides(sizes, &refs), want, "{sizes:?} {ops:?}");
        };
        check(&[4, 6], &[layout(&[4, 6], &[6, 1])], &[6, 1]);
        // x.t() + 1: follows the transposed input.
        check(&[4, 6], &[layout(&[4, 6], &[1, 4])], &[1, 4]);
        // x.t() + y: the first operand decides.
        check(&[4, 6], &[layout(&[4, 6], &[1, 4]), layout(&[4, 6], &[6, 1])], &[1, 4]);
        // Broadcast operand is ignored along its broadcast dims.
        check(&[4, 6], &[layout(&[6], &[1]), layout(&[4, 6], &[1, 4])], &[1, 4]);
        // permute(2, 0, 1) of a contiguous [4, 5, 6].
        check(&[6, 4, 5], &[layout(&[6, 4, 5], &[1, 30, 6])], &[1, 30, 6]);
        check(&[], &[layout(&[], &[])], &[]);
    }

    #[test]
    fn dense_layouts() {
        assert!(layout(&[4, 6], &[1, 4]).is_non_overlapping_and_dense());
        assert!(layout(&[1, 6], &[99, 1]).is_non_overlapping_and_dense());
        assert!(!layout(&[4, 6], &[0, 1]).is_non_overlapping_and_dense());
        assert!(!layout(&[4, 6], &[12, 2]).is_non_overlapping_and_dense());
    }
}
