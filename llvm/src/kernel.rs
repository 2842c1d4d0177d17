//! Kernel IR: one loop nest over a static N-d index space with strided loads, an expression
//! DAG of scalar ops, and strided stores; optionally with reduction loops inside each point.
//!
//! Reductions (PyTorch: `ir.Reduction`, codegen'd as a looped reduction): a kernel with
//! `reduction_ranges` runs, for every point of `ranges`, one or more loops over the reduction
//! space. Indices then carry one stride per range followed by one per reduction range.
//! `Expr::Reduce(op, v)` accumulates `v` over a whole reduction loop; its value is known after
//! that loop, so an expression that reads it (softmax's `exp(x - max)`) runs in a later loop.
//! Loop numbers follow from the data: an expression's *phase* is the number of reductions it
//! waits for (the maximum over its operands, plus one through a `Reduce`); the kernel runs as many
//! reduction loops as the deepest phase needs. Summation order: each loop accumulates in index
//! order per vector lane; the vectorizer may keep several partial sums (reassociation is allowed
//! on the accumulation only), combined at the end of the loop, so results differ from a strictly
//! sequential sum by float rounding, as torch's own vectorized sums do.
//!
//! Invariants (checked by [`Kernel::verify`]):
//! - `ranges` are the loop trip counts, outermost first; every `Index` has one stride per range.
//! - Strides and offsets are in *elements* of the argument's dtype; a stride of 0 broadcasts.
//! - `exprs` is an arena in definition order: an `Expr` only refers to earlier `ExprId`s, so a
//!   single forward walk emits everything (no cycles by construction).
//! - Loads read only `KernelArg`s with `is_output == false`; stores write only outputs.
//! - Value types are `F32`, `F64`, `I64`, `I32` and `Bool`; bools live in memory as one byte (0 or
//!   1), like torch.bool. Arithmetic takes operands of one dtype and gives that dtype (integer
//!   arithmetic wraps, as torch's does); transcendental ops, `Pow`, `Div` and reductions are
//!   F32 only (F64 gets the exact ones: abs, sqrt, floor, ceil, division, and sums: Note
//!   [float64 sums]); see [`Kernel::verify`].
//!
//! Note [float64 sums]: a `Sum`/`OrderedSum` of an F64 operand accumulates in F64 and has dtype
//! F64 (max/min stay F32). ATen's CPU `var`/`std` of a float32 tensor accumulate in float64
//! (`WelfordOps<float, double, ...>` in ReduceOpsKernel.cpp), and only a float64 accumulation
//! gives their last bit (inductor's Note [float64 variance]). The CPU emitter runs such sums in
//! its plain row loop (no ATen slot order, no pairwise blocks, no column form: a float64
//! accumulator's rounding is far below float32's last bit anyway); the NVPTX emitter refuses
//! them.

use std::fmt;

/// Element type of a kernel value or buffer argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE-754 binary32 (torch.float32).
    F32,
    /// Truth value; one byte in memory (torch.bool), `i1` in registers.
    Bool,
    /// bfloat16 (torch.bfloat16): storage only; loads give F32, stores round F32 to nearest even.
    BF16,
    /// IEEE-754 binary16 (torch.float16): storage only, like `BF16`.
    F16,
    /// IEEE-754 binary64 (torch.float64).
    F64,
    /// Two's-complement 64-bit integer (torch.int64); arithmetic wraps.
    I64,
    /// Two's-complement 32-bit integer (torch.int32); arithmetic wraps.
    I32,
}

impl DType {
    /// Size of one element in memory, in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::Bool => 1,
            DType::BF16 | DType::F16 => 2,
            DType::F64 | DType::I64 => 8,
            DType::I32 => 4,
        }
    }

    /// True for the floating types values are computed in (F32, F64).
    pub fn is_float_value(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// True for the integer types (I64, I32).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32)
    }

    /// The dtype a loaded element has in registers (half-precision storage computes in F32,
    /// as torch's CPU kernels do).
    pub fn value_type(self) -> DType {
        match self {
            DType::BF16 | DType::F16 => DType::F32,
            other => other,
        }
    }
}

/// Index of an expression in [`Kernel::exprs`]; printed as `%3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

impl fmt::Display for ExprId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Affine element offset `offset + sum(strides[d] * i_d)` over the kernel's loop variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Index {
    /// Constant element offset.
    pub offset: i64,
    /// One stride (in elements) per kernel range; 0 means the loop variable is ignored (broadcast).
    pub strides: Vec<i64>,
}

/// Unary scalar ops; semantics follow the torch op of the same name on float32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    /// `max(x, 0)` with NaN propagated (torch.relu(nan) is nan); legalized to compare + select.
    Relu,
    /// `1 / (1 + exp(-x))`; legalized.
    Sigmoid,
    Tanh,
    Exp,
    Log,
    Sqrt,
    Sin,
    Cos,
    /// `1 / x`; legalized.
    Reciprocal,
    Floor,
    Ceil,
    /// Logical not of a bool.
    Not,
    /// Gauss error function (torch.erf).
    Erf,
    /// `log(1 + x)`, accurate near 0 (torch.log1p).
    Log1p,
    /// `exp(x) - 1`, accurate near 0 (torch.expm1).
    Expm1,
    /// `1 / sqrt(x)`; legalized.
    Rsqrt,
    /// `x` rounded to the nearest bfloat16 (ties to even), kept as F32: what torch does after
    /// every op on bfloat16 tensors.
    RoundBF16,
    /// `x` rounded to the nearest float16, kept as F32.
    RoundF16,
}

/// Binary scalar ops. Arithmetic ops take and give F32; `And`/`Or` take and give Bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// IEEE division: x/0 is ±inf, 0/0 is nan (torch.div true division).
    Div,
    /// NaN-propagating max (torch.maximum); legalized to compare + select.
    Maximum,
    /// NaN-propagating min (torch.minimum); legalized to compare + select.
    Minimum,
    Pow,
    And,
    Or,
}

/// Comparisons of two F32 values giving Bool; `Ne` is true when either side is NaN (like torch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions over the reduction loop; `Max`/`Min` propagate NaN (torch.amax/amin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// A sum that `torch.sum`/`torch.mean` compute: emitted in ATen's accumulation order where
    /// the emitter reproduces it (Note [ATen sum order] in emit.rs), as `Sum` elsewhere.
    OrderedSum,
    Max,
    Min,
}

impl ReduceOp {
    /// True for both sums.
    pub fn is_sum(self) -> bool {
        matches!(self, ReduceOp::Sum | ReduceOp::OrderedSum)
    }

    /// The value a reduction over zero elements gives (sum: 0, max: -inf, min: +inf).
    pub fn identity(self) -> f32 {
        match self {
            ReduceOp::Sum | ReduceOp::OrderedSum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
            ReduceOp::Min => f32::INFINITY,
        }
    }
}

/// One node of the expression DAG.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Load element `index` of argument `arg`.
    Load { arg: u32, index: Index },
    /// F32 constant, stored as its bit pattern so `Expr` can be hashed.
    ConstF32(u32),
    /// F64 constant, stored as its bit pattern.
    ConstF64(u64),
    /// Integer constant of dtype `I64` or `I32` (the value fits that dtype).
    ConstInt(DType, i64),
    ConstBool(bool),
    Unary(UnaryOp, ExprId),
    Binary(BinaryOp, ExprId, ExprId),
    Compare(CmpOp, ExprId, ExprId),
    /// `cond ? a : b` (torch.where); `cond` is Bool, `a` and `b` share a dtype.
    Select(ExprId, ExprId, ExprId),
    /// Value conversion: Bool -> F32 gives 0.0/1.0; F32 -> Bool is `x != 0`.
    Cast(DType, ExprId),
    /// Reduction of the operand over the kernel's reduction loop (see the module docs): F32,
    /// or F64 for a sum of an F64 operand (Note [float64 sums]).
    Reduce(ReduceOp, ExprId),
    /// Bool: `0 <= index < size`, with `index` the affine function of the loop variables (its
    /// `offset + sum(strides[d] * i_d)`; a coordinate, not an address). Window reductions
    /// (max_pool2d's padding) use it for the positions of a window that fall outside the input.
    InRange { index: Index, size: i64 },
    /// Element `index` of input `arg` where the Bool `mask` holds; elsewhere nothing is read
    /// and the value is zero of the element's value type (the address may be out of bounds
    /// there). Note [masked loads]: a kernel reading a window around each point reads its
    /// producers through these wherever the window may leave the tensor.
    MaskedLoad { arg: u32, index: Index, mask: ExprId },
    /// Element `index + row * stride` of input `arg`, `row` an integer value (I64 or I32): a
    /// gather along one dim of the argument (`F.embedding`'s rows, `torch.gather`'s index).
    /// Note [indirect loads]: a `row` outside `[0, size)` reads row 0 instead, so no address
    /// leaves the tensor whatever the data; the graph checks its indices separately and runs
    /// eagerly (raising eager's IndexError) when one is out of range.
    IndirectLoad { arg: u32, index: Index, row: ExprId, stride: i64, size: i64 },
}

/// Write `value` to element `index` of output argument `arg`; with `scatter`, add it to the
/// element at a data-dependent row instead (Note [scatter stores]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    pub arg: u32,
    pub index: Index,
    pub value: ExprId,
    pub scatter: Option<ScatterRow>,
}

/// Note [scatter stores]: a store `out[index + row * stride] += value`, `row` an integer value
/// (I64 or I32) computed in the kernel: the accumulation of a gradient into the rows an index
/// tensor names (`embedding_dense_backward`: `grad_weight[indices[n], j] += grad[n, j]`).
/// - The output argument is zero-filled (`numel` elements) before the loop nest, and every
///   store to it is a scatter store.
/// - A `row` outside `[0, size)` adds nothing (padding_idx rows are given row -1): the emitter
///   adds `+0.0` to row 0 instead, which leaves every value bitwise unchanged (an accumulator
///   that starts at `+0.0` never becomes `-0.0`: `x + y` is `-0.0` only when both are).
/// - A kernel with scatter stores runs as one call over its whole outer range (never split
///   across threads, `Kernel::has_scatter`), its loops in order, so each output element adds its
///   values in iteration order: ATen's `embedding_dense_backward_cpu` adds the rows of each
///   index in token order, and so gives the same bits.
/// - Pointwise kernels only (no reduction loops); the NVPTX emitter refuses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScatterRow {
    /// The integer row.
    pub row: ExprId,
    /// Elements between rows of the output.
    pub stride: i64,
    /// Rows of the output.
    pub size: i64,
    /// Elements of the output, zero-filled before the loops.
    pub numel: i64,
}

/// A pointer argument of the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelArg {
    /// Name for dumps (for example the inductor buffer name `buf3`).
    pub name: String,
    pub dtype: DType,
    /// True for buffers the kernel writes; these never alias any other argument.
    pub is_output: bool,
}

/// A pointwise kernel: `for i in ranges: stores(exprs(loads))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// Symbol name, unique within a JIT module.
    pub name: String,
    /// Loop trip counts, outermost first.
    pub ranges: Vec<i64>,
    /// Trip counts of the reduction loops run inside every point (empty: a pointwise kernel).
    pub reduction_ranges: Vec<i64>,
    pub args: Vec<KernelArg>,
    pub exprs: Vec<Expr>,
    pub stores: Vec<Store>,
    /// When set (by `legalize`), the two innermost loops are blocked by this many iterations
    /// each, so accesses that are unit-stride in different dims (transposes) share cache lines.
    pub tile: Option<i64>,
}

impl Kernel {
    /// Number of points in the iteration space.
    pub fn numel(&self) -> i64 {
        self.ranges.iter().product()
    }

    /// Number of loop variables an `Index` has strides for (ranges, then reduction ranges).
    pub fn n_index_dims(&self) -> usize {
        self.ranges.len() + self.reduction_ranges.len()
    }

    /// Every affine index the kernel's expressions hold (loads, masked loads, range checks), in
    /// expression order; passes that permute, drop or merge loop dims apply the same change to
    /// these and to the stores' indices.
    pub fn expr_indices_mut(&mut self) -> Vec<&mut Index> {
        let mut out = Vec::new();
        for e in self.exprs.iter_mut() {
            match e {
                Expr::Load { index, .. }
                | Expr::MaskedLoad { index, .. }
                | Expr::InRange { index, .. }
                | Expr::IndirectLoad { index, .. } => out.push(index),
                _ => {}
            }
        }
        out
    }

    /// True when some expression is an `InRange`, a `MaskedLoad` (Note [masked loads]) or an
    /// `IndirectLoad` (Note [indirect loads]): loads whose addresses are not one affine function
    /// of the loop variables, which tiled and column kernels do not stage.
    pub fn has_masks(&self) -> bool {
        self.exprs.iter().any(|e| matches!(e, Expr::InRange { .. } | Expr::MaskedLoad { .. } | Expr::IndirectLoad { .. }))
    }

    /// True when some store is a scatter store (Note [scatter stores]): the kernel then runs as
    /// one call, never split across threads.
    pub fn has_scatter(&self) -> bool {
        self.stores.iter().any(|s| s.scatter.is_some())
    }

    /// Per expression: whether its value varies along the reduction loop (it reads a load that
    /// moves with a reduction variable, other than through a `Reduce`).
    pub fn inner_exprs(&self) -> Vec<bool> {
        let n_outer = self.ranges.len();
        let mut inner = vec![false; self.exprs.len()];
        for (i, e) in self.exprs.iter().enumerate() {
            inner[i] = match e {
                Expr::Load { index, .. } | Expr::InRange { index, .. } => index.strides[n_outer..].iter().any(|s| *s != 0),
                Expr::MaskedLoad { index, mask: a, .. } | Expr::IndirectLoad { index, row: a, .. } => {
                    index.strides[n_outer..].iter().any(|s| *s != 0) || inner[a.0 as usize]
                }
                Expr::ConstF32(_) | Expr::ConstF64(_) | Expr::ConstInt(..) | Expr::ConstBool(_) | Expr::Reduce(..) => false,
                Expr::Unary(_, a) | Expr::Cast(_, a) => inner[a.0 as usize],
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => inner[a.0 as usize] || inner[b.0 as usize],
                Expr::Select(c, a, b) => inner[c.0 as usize] || inner[a.0 as usize] || inner[b.0 as usize],
            };
        }
        inner
    }

    /// Per expression: its phase, the number of reduction loops that must finish before it can be
    /// computed (see the module docs).
    pub fn phases(&self) -> Vec<usize> {
        let mut phase = vec![0usize; self.exprs.len()];
        for (i, e) in self.exprs.iter().enumerate() {
            let p = |id: &ExprId| phase[id.0 as usize];
            phase[i] = match e {
                Expr::Load { .. } | Expr::InRange { .. } | Expr::ConstF32(_) | Expr::ConstF64(_) | Expr::ConstInt(..) | Expr::ConstBool(_) => 0,
                Expr::Unary(_, a) | Expr::Cast(_, a) | Expr::MaskedLoad { mask: a, .. } | Expr::IndirectLoad { row: a, .. } => p(a),
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => p(a).max(p(b)),
                Expr::Select(c, a, b) => p(c).max(p(a)).max(p(b)),
                Expr::Reduce(_, a) => p(a) + 1,
            };
        }
        phase
    }

    /// Result dtype of expression `id` (assumes `verify` passed for earlier ids).
    pub fn dtype_of(&self, id: ExprId) -> DType {
        match &self.exprs[id.0 as usize] {
            Expr::Load { arg, .. } | Expr::MaskedLoad { arg, .. } | Expr::IndirectLoad { arg, .. } => {
                self.args[*arg as usize].dtype.value_type()
            }
            Expr::InRange { .. } => DType::Bool,
            Expr::ConstF32(_) => DType::F32,
            Expr::ConstF64(_) => DType::F64,
            Expr::ConstInt(dt, _) => *dt,
            Expr::ConstBool(_) => DType::Bool,
            Expr::Unary(UnaryOp::Not, _) => DType::Bool,
            Expr::Unary(UnaryOp::RoundBF16 | UnaryOp::RoundF16, _) => DType::F32,
            Expr::Unary(_, a) => self.dtype_of(*a),
            Expr::Binary(BinaryOp::And | BinaryOp::Or, _, _) => DType::Bool,
            Expr::Binary(_, a, _) => self.dtype_of(*a),
            Expr::Compare(..) => DType::Bool,
            Expr::Select(_, a, _) => self.dtype_of(*a),
            Expr::Cast(to, _) => *to,
            Expr::Reduce(op, a) if op.is_sum() && self.dtype_of(*a) == DType::F64 => DType::F64,
            Expr::Reduce(..) => DType::F32,
        }
    }

    /// Checks the invariants in the module docs; collects every error instead of stopping at one.
    pub fn verify(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let n_dims = self.n_index_dims();
        if self.ranges.iter().chain(&self.reduction_ranges).any(|&r| r < 0) {
            errors.push(format!("{}: negative range in {:?}", self.name, self.ranges));
        }
        let check_index = |what: &str, index: &Index, errors: &mut Vec<String>| {
            if index.strides.len() != n_dims {
                errors.push(format!(
                    "{}: {what} has {} strides, expected {n_dims}",
                    self.name,
                    index.strides.len()
                ));
            }
        };
        // A load of expression `i` must read an existing input argument.
        let check_input = |i: usize, arg: u32, errors: &mut Vec<String>| match self.args.get(arg as usize) {
            None => errors.push(format!("{}: load %{i} of missing arg {arg}", self.name)),
            Some(a) if a.is_output => errors.push(format!("{}: load %{i} reads output arg {}", self.name, a.name)),
            _ => {}
        };
        for (i, expr) in self.exprs.iter().enumerate() {
            let earlier = |id: &ExprId| (id.0 as usize) < i;
            let ok_refs = match expr {
                Expr::Load { arg, index } => {
                    check_index(&format!("load %{i}"), index, &mut errors);
                    check_input(i, *arg, &mut errors);
                    true
                }
                Expr::MaskedLoad { arg, index, mask } => {
                    check_index(&format!("masked load %{i}"), index, &mut errors);
                    check_input(i, *arg, &mut errors);
                    earlier(mask)
                }
                Expr::IndirectLoad { arg, index, row, stride, size } => {
                    check_index(&format!("indirect load %{i}"), index, &mut errors);
                    check_input(i, *arg, &mut errors);
                    if *size < 1 || *stride < 0 {
                        errors.push(format!("{}: indirect load %{i} over {size} rows of stride {stride}", self.name));
                    }
                    earlier(row)
                }
                Expr::InRange { index, .. } => {
                    check_index(&format!("in_range %{i}"), index, &mut errors);
                    true
                }
                Expr::ConstF32(_) | Expr::ConstF64(_) | Expr::ConstBool(_) => true,
                Expr::ConstInt(dt, v) => {
                    if !dt.is_int() || (*dt == DType::I32 && i32::try_from(*v).is_err()) {
                        errors.push(format!("{}: %{i} integer constant {v} of dtype {dt:?}", self.name));
                    }
                    true
                }
                Expr::Unary(_, a) | Expr::Cast(_, a) | Expr::Reduce(_, a) => earlier(a),
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => earlier(a) && earlier(b),
                Expr::Select(c, a, b) => earlier(c) && earlier(a) && earlier(b),
            };
            if !ok_refs {
                errors.push(format!("{}: %{i} refers to a later expression: {expr:?}", self.name));
                continue;
            }
            let want = |id: &ExprId, dt: DType, errors: &mut Vec<String>| {
                let got = self.dtype_of(*id);
                if got != dt {
                    errors.push(format!("{}: %{i} expected {dt:?} operand {id}, found {got:?}", self.name));
                }
            };
            // Which value dtypes an op takes (see the module docs).
            let numeric = |d: DType| d.is_float_value() || d.is_int();
            let takes = |id: &ExprId, ok: &dyn Fn(DType) -> bool, what: &str, errors: &mut Vec<String>| {
                let got = self.dtype_of(*id);
                if !ok(got) {
                    errors.push(format!("{}: %{i} expected a {what} operand {id}, found {got:?}", self.name));
                }
            };
            match expr {
                Expr::MaskedLoad { mask, .. } => want(mask, DType::Bool, &mut errors),
                Expr::IndirectLoad { row, .. } => takes(row, &|d| d.is_int(), "integer", &mut errors),
                Expr::Unary(UnaryOp::Not, a) => want(a, DType::Bool, &mut errors),
                Expr::Unary(UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu, a) => takes(a, &numeric, "numeric", &mut errors),
                Expr::Unary(
                    UnaryOp::Sqrt | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Reciprocal | UnaryOp::Rsqrt,
                    a,
                ) => takes(a, &|d| d.is_float_value(), "float", &mut errors),
                Expr::Reduce(op, a) if op.is_sum() => takes(a, &|d| matches!(d, DType::F32 | DType::F64), "F32 or F64", &mut errors),
                Expr::Unary(_, a) | Expr::Reduce(_, a) => want(a, DType::F32, &mut errors),
                Expr::Binary(BinaryOp::And | BinaryOp::Or, a, b) => {
                    want(a, DType::Bool, &mut errors);
                    want(b, DType::Bool, &mut errors);
                }
                Expr::Binary(BinaryOp::Pow, a, b) => {
                    want(a, DType::F32, &mut errors);
                    want(b, DType::F32, &mut errors);
                }
                Expr::Binary(BinaryOp::Div, a, b) => {
                    takes(a, &|d| d.is_float_value(), "float", &mut errors);
                    want(b, self.dtype_of(*a), &mut errors);
                }
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => {
                    takes(a, &numeric, "numeric", &mut errors);
                    want(b, self.dtype_of(*a), &mut errors);
                }
                Expr::Select(c, a, b) => {
                    want(c, DType::Bool, &mut errors);
                    want(b, self.dtype_of(*a), &mut errors);
                }
                _ => {}
            }
        }
        if errors.is_empty() && !self.reduction_ranges.is_empty() {
            let inner = self.inner_exprs();
            let n_outer = self.ranges.len();
            for store in &self.stores {
                let moves = store.index.strides.get(n_outer..).is_some_and(|s| s.iter().any(|x| *x != 0));
                if inner.get(store.value.0 as usize).copied().unwrap_or(false) && !moves {
                    errors.push(format!(
                        "{}: store of {} varies along the reduction loop but its index does not",
                        self.name, store.value
                    ));
                }
            }
        }
        for store in &self.stores {
            if let Some(sc) = &store.scatter {
                if !self.reduction_ranges.is_empty() {
                    errors.push(format!("{}: scatter store in a reduction kernel", self.name));
                }
                if sc.size < 1 || sc.stride < 0 || sc.numel < 1 {
                    errors.push(format!("{}: scatter store over {} rows of stride {} ({} elements)", self.name, sc.size, sc.stride, sc.numel));
                }
                if (sc.row.0 as usize) >= self.exprs.len() || !self.dtype_of(sc.row).is_int() {
                    errors.push(format!("{}: scatter store row {} is not an integer value", self.name, sc.row));
                }
                if (store.value.0 as usize) < self.exprs.len() && !self.dtype_of(store.value).is_float_value() {
                    errors.push(format!("{}: scatter store of a non-float value {}", self.name, store.value));
                }
            }
            if self.stores.iter().any(|o| o.arg == store.arg && o.scatter.is_some() != store.scatter.is_some()) {
                errors.push(format!("{}: arg {} has both scatter and plain stores", self.name, store.arg));
            }
            check_index("store", &store.index, &mut errors);
            match self.args.get(store.arg as usize) {
                None => errors.push(format!("{}: store to missing arg {}", self.name, store.arg)),
                Some(a) if !a.is_output => {
                    errors.push(format!("{}: store to input arg {}", self.name, a.name))
                }
                Some(a) => {
                    if (store.value.0 as usize) >= self.exprs.len() {
                        errors.push(format!("{}: store of missing {}", self.name, store.value));
                    } else if self.dtype_of(store.value) != a.dtype.value_type() {
                        errors.push(format!(
                            "{}: store of {:?} value {} into {:?} arg {}",
                            self.name,
                            self.dtype_of(store.value),
                            store.value,
                            a.dtype,
                            a.name
                        ));
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}", self.offset)?;
        for (d, s) in self.strides.iter().enumerate() {
            if *s != 0 {
                write!(f, " + {s}*i{d}")?;
            }
        }
        write!(f, "]")
    }
}

impl fmt::Display for Kernel {
    /// Text dump used by logs and snapshot tests.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| format!("{}{}: {:?}", if a.is_output { "out " } else { "" }, a.name, a.dtype))
            .collect();
        write!(f, "kernel {}({}) ranges {:?}", self.name, args.join(", "), self.ranges)?;
        if !self.reduction_ranges.is_empty() {
            write!(f, " reduce {:?}", self.reduction_ranges)?;
        }
        match self.tile {
            Some(t) => writeln!(f, " tile {t}")?,
            None => writeln!(f)?,
        }
        for (i, e) in self.exprs.iter().enumerate() {
            let text = match e {
                Expr::Load { arg, index } => format!("load {}{}", self.args[*arg as usize].name, index),
                Expr::ConstF32(bits) => format!("{:?}", f32::from_bits(*bits)),
                Expr::ConstF64(bits) => format!("{:?}f64", f64::from_bits(*bits)),
                Expr::ConstInt(dt, v) => format!("{v}{}", if *dt == DType::I32 { "i32" } else { "i64" }),
                Expr::ConstBool(b) => format!("{b}"),
                Expr::Unary(op, a) => format!("{op:?}({a})"),
                Expr::Binary(op, a, b) => format!("{op:?}({a}, {b})"),
                Expr::Compare(op, a, b) => format!("{op:?}({a}, {b})"),
                Expr::Select(c, a, b) => format!("select({c}, {a}, {b})"),
                Expr::Cast(to, a) => format!("cast<{to:?}>({a})"),
                Expr::Reduce(op, a) => format!("reduce_{}({a})", format!("{op:?}").to_lowercase()),
                Expr::InRange { index, size } => format!("in_range({index}, {size})"),
                Expr::MaskedLoad { arg, index, mask } => {
                    format!("masked_load {}{} if {mask}", self.args[*arg as usize].name, index)
                }
                Expr::IndirectLoad { arg, index, row, stride, size } => {
                    format!("indirect_load {}{} + {row}*{stride} rows {size}", self.args[*arg as usize].name, index)
                }
            };
            writeln!(f, "  %{i} = {text}")?;
        }
        for s in &self.stores {
            match &s.scatter {
                None => writeln!(f, "  store {}{} = {}", self.args[s.arg as usize].name, s.index, s.value)?,
                Some(sc) => writeln!(
                    f,
                    "  scatter_add {}{} + {}*{} rows {} (zeroed {}) += {}",
                    self.args[s.arg as usize].name, s.index, sc.row, sc.stride, sc.size, sc.numel, s.value
                )?,
            }
        }
        Ok(())
    }
}
