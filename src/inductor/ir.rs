//! Inductor IR: buffers produced by a graph, each an input, a constant, a `Pointwise` loop body,
//! or a `FallbackKernel` (an eager call into torch).
//!
//! Invariants:
//! - Buffers are indexed by `BufferId` in graph (topological) order; a buffer only reads buffers
//!   with smaller ids.
//! - A `Pointwise` has static `ranges` (its output sizes) and an inner function written against
//!   [`OpsHandler`]; it can be evaluated any number of times under different handlers (dependency
//!   extraction, pretty printing, kernel building) and is pure.
//! - `realized == false` Pointwise buffers never exist as tensors: readers inline them.
//! - No Python object lives here; fallbacks refer to entries of the import side table by index.

use std::fmt;
use std::rc::Rc;

/// Index of a buffer in [`GraphIr::buffers`]; printed `buf<n>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

impl fmt::Display for BufferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buf{}", self.0)
    }
}

/// Element types the compiler distinguishes; everything else is `Other` (fallback only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// torch.float32
    F32,
    /// torch.bool
    Bool,
    /// torch.bfloat16: stored as such, computed in float32 (as torch's CPU kernels do).
    BF16,
    /// torch.float16: stored as such, computed in float32.
    F16,
    /// torch.float64: pointwise arithmetic, comparisons and casts only (decompositions and
    /// reductions compute in float32 and refuse it).
    F64,
    /// torch.int64: pointwise integer arithmetic (wrapping), comparisons and casts only.
    I64,
    /// torch.int32: like `I64`.
    I32,
    /// Any other torch dtype; kernels never read or write these.
    Other,
}

impl DType {
    /// The dtype of a `torch.dtype` object (`Other` for every dtype kernels do not model).
    pub fn from_torch(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<DType> {
        use pyo3::prelude::*;
        let torch = obj.py().import(pyo3::intern!(obj.py(), "torch"))?;
        for (name, d) in [
            ("float32", DType::F32),
            ("bool", DType::Bool),
            ("bfloat16", DType::BF16),
            ("float16", DType::F16),
            ("float64", DType::F64),
            ("int64", DType::I64),
            ("int32", DType::I32),
        ] {
            if obj.is(&torch.getattr(name)?) {
                return Ok(d);
            }
        }
        Ok(DType::Other)
    }

    /// The `torch` attribute naming this dtype (`None` for `Other`).
    pub fn torch_name(self) -> Option<&'static str> {
        match self {
            DType::F32 => Some("float32"),
            DType::Bool => Some("bool"),
            DType::BF16 => Some("bfloat16"),
            DType::F16 => Some("float16"),
            DType::F64 => Some("float64"),
            DType::I64 => Some("int64"),
            DType::I32 => Some("int32"),
            DType::Other => None,
        }
    }

    /// True for the floating dtypes computed in float32 (float32 and the half-precision storage
    /// types): what decompositions and reductions accept. float64 is not one of them.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::BF16 | DType::F16)
    }

    /// True for the half-precision storage types (bfloat16, float16), computed in float32.
    pub fn is_half(self) -> bool {
        matches!(self, DType::BF16 | DType::F16)
    }

    /// Whether torch converts the Python number `v` to this dtype without an overflow error
    /// (c10's `checked_convert`: a finite value beyond the dtype's range raises; inf and NaN
    /// convert to floating dtypes). Integers: within the dtype's range.
    pub fn holds_scalar(self, v: f64) -> bool {
        let within = |max: f64| !v.is_finite() || v.abs() <= max;
        match self {
            DType::F16 => within(65504.0),
            DType::BF16 => within(3.3895313892515355e38),
            DType::F32 => within(f32::MAX as f64),
            DType::I32 => v >= i32::MIN as f64 && v <= i32::MAX as f64,
            DType::I64 => v >= -(2f64.powi(63)) && v < 2f64.powi(63),
            _ => true,
        }
    }

    /// True for the integer dtypes (int64, int32).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32)
    }

    /// torch's category of a dtype for type promotion: 0 bool, 1 integer, 2 floating.
    fn category(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::I64 | DType::I32 => 1,
            _ => 2,
        }
    }

    /// torch.promote_types over the modelled dtypes (c10's `promoteTypes` table): bool < int32 <
    /// int64 < float16/bfloat16 < float32 < float64; float16 with bfloat16 gives float32.
    /// `None` when either is `Other`.
    pub fn promote(a: DType, b: DType) -> Option<DType> {
        use DType::*;
        let rank = |d: DType| match d {
            Bool => Some(0),
            I32 => Some(1),
            I64 => Some(2),
            F16 | BF16 => Some(3),
            F32 => Some(4),
            F64 => Some(5),
            Other => None,
        };
        let (ra, rb) = (rank(a)?, rank(b)?);
        Some(if a == b {
            a
        } else if ra == 3 && rb == 3 {
            F32
        } else if ra >= rb {
            a
        } else {
            b
        })
    }

    /// torch's `result_type` (ATen `ResultTypeState`): `operands` are (dtype, tier) with tier 0
    /// for tensors of one or more dims, 1 for zero-dim tensors, 2 for Python scalars (a Python
    /// float counts as float32, the default dtype; an int as int64). A lower tier only wins
    /// through a higher category (an int tensor plus a float scalar is float32). `None` when a
    /// dtype is `Other` or there are no operands.
    pub fn result_type(operands: &[(DType, u8)]) -> Option<DType> {
        let mut tiers: [Option<DType>; 3] = [None; 3];
        for &(d, tier) in operands {
            let slot = &mut tiers[tier.min(2) as usize];
            *slot = Some(match *slot {
                None => d,
                Some(cur) => DType::promote(cur, d)?,
            });
            if d == DType::Other {
                return None;
            }
        }
        // combine_categories(higher, lower) of c10/core/ScalarType.h.
        let combine = |higher: Option<DType>, lower: Option<DType>| -> Option<Option<DType>> {
            Some(match (higher, lower) {
                (None, l) => l,
                (h, None) => h,
                (Some(h), Some(l)) => {
                    if h.category() == 2 {
                        Some(h)
                    } else if h == DType::Bool || l.category() == 2 {
                        Some(DType::promote(h, l)?)
                    } else {
                        Some(h)
                    }
                }
            })
        };
        let low = combine(tiers[1], tiers[2])?;
        combine(tiers[0], low)?
    }

    /// The dtype values of this dtype are computed in: float32 for the half-precision types.
    pub fn compute(self) -> DType {
        match self {
            DType::BF16 | DType::F16 => DType::F32,
            other => other,
        }
    }

    /// torch's result dtype for a pointwise op over tensors of these floating dtypes (scalars do
    /// not promote): float32 wins; one half type alone stays; bfloat16 with float16 gives float32.
    pub fn promote_floats(dtypes: &[DType]) -> Option<DType> {
        let floats: Vec<DType> = dtypes.iter().copied().filter(|d| d.is_float()).collect();
        let first = *floats.first()?;
        if floats.iter().all(|d| *d == first) {
            Some(first)
        } else {
            Some(DType::F32)
        }
    }
}

/// Sizes and strides (in elements) of a dense CPU tensor, as torch reports them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
    pub dtype: DType,
    /// True when the tensor lives on the CPU device.
    pub cpu: bool,
}

impl Layout {
    pub fn numel(&self) -> i64 {
        self.sizes.iter().product()
    }

    /// Row-major strides for `sizes`.
    pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
        let mut strides = vec![0; sizes.len()];
        let mut acc = 1;
        for d in (0..sizes.len()).rev() {
            strides[d] = acc;
            acc *= sizes[d].max(1);
        }
        strides
    }

    /// True when every element has exactly one address and the addresses fill a range without
    /// holes (some permutation of a contiguous layout).
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        let mut dims: Vec<usize> = (0..self.sizes.len()).filter(|&d| self.sizes[d] != 1).collect();
        dims.sort_by_key(|&d| self.strides[d]);
        let mut expected = 1;
        for d in dims {
            if self.strides[d] != expected {
                return false;
            }
            expected *= self.sizes[d];
        }
        true
    }
}

/// An affine function of the kernel loop variables: `offset + sum(coeffs[v] * i_v)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    pub offset: i64,
    pub coeffs: Vec<i64>,
}

impl Affine {
    /// The constant `c` over `n_vars` loop variables.
    pub fn constant(c: i64, n_vars: usize) -> Affine {
        Affine { offset: c, coeffs: vec![0; n_vars] }
    }

    /// The loop variable `var` itself.
    pub fn var(var: usize, n_vars: usize) -> Affine {
        let mut coeffs = vec![0; n_vars];
        coeffs[var] = 1;
        Affine { offset: 0, coeffs }
    }

    /// `self * k + other` (used to flatten a multi-dim index with strides).
    pub fn scaled_add(&self, k: i64, other: &Affine) -> Affine {
        Affine {
            offset: self.offset * k + other.offset,
            coeffs: self.coeffs.iter().zip(&other.coeffs).map(|(a, b)| a * k + b).collect(),
        }
    }
}

/// Pointwise unary ops, named after the torch op they implement (float32 semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Relu,
    Sigmoid,
    Tanh,
    Exp,
    Log,
    Sqrt,
    Sin,
    Cos,
    Reciprocal,
    Floor,
    Ceil,
    LogicalNot,
    Erf,
    Log1p,
    Expm1,
    Rsqrt,
    /// Rounds a float32 value to bfloat16 precision (the value a bfloat16 tensor would hold).
    RoundBF16,
    /// Rounds a float32 value to float16 precision.
    RoundF16,
}

/// Pointwise binary ops (torch.add, torch.sub, ... on float32; logical_and/or on bool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Pow,
    LogicalAnd,
    LogicalOr,
}

/// Comparisons (torch.eq/ne/lt/le/gt/ge) of float32 values, giving bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Opaque value handle of an [`OpsHandler`]; its meaning belongs to the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpsValue(pub u32);

/// The define-by-run interface Pointwise bodies are written against (PyTorch: `OpsHandler` in
/// `torch/_inductor/ops_handler.py`, installed through `virtualized.py`).
pub trait OpsHandler {
    /// Element `index` (one affine entry per dimension of `buf`) of buffer `buf`.
    fn load(&mut self, buf: BufferId, index: &[Affine]) -> OpsValue;
    /// A constant of dtype `dtype` (F32 or Bool).
    fn constant(&mut self, value: f64, dtype: DType) -> OpsValue;
    fn unary(&mut self, op: UnaryOp, a: OpsValue) -> OpsValue;
    fn binary(&mut self, op: BinaryOp, a: OpsValue, b: OpsValue) -> OpsValue;
    fn compare(&mut self, op: CmpOp, a: OpsValue, b: OpsValue) -> OpsValue;
    /// torch.where(cond, a, b).
    fn where_(&mut self, cond: OpsValue, a: OpsValue, b: OpsValue) -> OpsValue;
    /// Converts to `dtype` (bool -> 0.0/1.0, float -> `x != 0`); identity if already `dtype`.
    fn to_dtype(&mut self, a: OpsValue, dtype: DType) -> OpsValue;
    /// Bool `0 <= index < size` for a coordinate `index` (affine in the loop variables): whether
    /// a window position lies inside its tensor (Note [masked loads] in llvm/src/kernel.rs).
    /// Handlers that only collect reads answer true.
    fn in_range(&mut self, index: &Affine, size: i64) -> OpsValue {
        let _ = (index, size);
        self.constant(1.0, DType::Bool)
    }
    /// Element of `buf` at `index` with the entry of dim `dim` replaced by the integer value
    /// `row` (a gather along `dim`: `F.embedding`'s rows). `buf` is a buffer in memory (an
    /// input, a constant or a fallback's result), never inlined; a `row` outside the dim reads
    /// row 0 (Note [indirect loads] in llvm/src/kernel.rs: the lowering checks the indices).
    fn load_indirect(&mut self, buf: BufferId, index: &[Affine], dim: usize, row: OpsValue) -> OpsValue;
    /// Sets the Bool mask under which the following loads happen (`None`: none) and returns the
    /// previous one. Loads whose index may leave their buffer read nothing where the mask is
    /// false (their value there is meaningless, and the caller selects it away); the others
    /// ignore it. Handlers that only collect reads ignore masks.
    fn set_mask(&mut self, mask: Option<OpsValue>) -> Option<OpsValue> {
        let _ = mask;
        None
    }
}

/// Body of a Pointwise: given the handler and one index per output dimension, the value there.
pub type InnerFn = Rc<dyn Fn(&mut dyn OpsHandler, &[Affine]) -> OpsValue>;

/// A loop over `ranges` computing one element per point (PyTorch: `ir.Pointwise`).
#[derive(Clone)]
pub struct Pointwise {
    pub ranges: Vec<i64>,
    pub dtype: DType,
    pub inner_fn: InnerFn,
    /// Estimated scalar ops per point when every unrealized producer is inlined.
    pub n_ops: usize,
    /// Estimated tensors read per point when every unrealized producer is inlined (Note
    /// [reused chains] in `lowering.rs`).
    pub n_reads: usize,
    /// Whether the value is materialized into a tensor (graph output, fallback input, or large).
    pub realized: bool,
}

/// An op torch runs for us (PyTorch: `ir.FallbackKernel`/`ExternKernel`): the fx node `node`
/// (an index into the imported graph), and why it was not lowered.
#[derive(Clone, Debug)]
pub struct FallbackKernel {
    pub node: usize,
    pub reason: String,
}

/// How a [`Reduction`] combines values (PyTorch: `reduction_type` of `ir.Reduction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReductionType {
    Sum,
    /// `torch.sum`/`torch.mean` themselves: a sum that code generation adds in ATen's order where
    /// it can (Note [ATen sum order] in llvm/src/emit.rs), so `.item()` of it prints as in eager.
    OrderedSum,
    /// NaN-propagating maximum (torch.amax).
    Max,
    /// NaN-propagating minimum (torch.amin).
    Min,
}

impl ReductionType {
    /// True for both sums.
    pub fn is_sum(self) -> bool {
        matches!(self, ReductionType::Sum | ReductionType::OrderedSum)
    }
}

/// A reduction of `inner_fn` over dims `reduced` of the space `input_sizes` (PyTorch:
/// `ir.Reduction`). `inner_fn` receives one index per dim of `input_sizes`; the output has
/// `input_sizes` with the reduced dims set to 1 (`keepdim`) or removed. Always realized: readers
/// load it from memory, or, inside its own fused kernel, use the accumulated value.
#[derive(Clone)]
pub struct Reduction {
    pub input_sizes: Vec<i64>,
    /// Reduced dims of `input_sizes`, ascending.
    pub reduced: Vec<usize>,
    pub keepdim: bool,
    pub op: ReductionType,
    pub inner_fn: InnerFn,
}

impl Reduction {
    /// Trip counts of the reduction loops (the reduced dims' sizes, in order).
    pub fn reduction_ranges(&self) -> Vec<i64> {
        self.reduced.iter().map(|&d| self.input_sizes[d]).collect()
    }

    /// `input_sizes` with the reduced dims set to 1: the outer iteration space of its kernel.
    pub fn outer_ranges(&self) -> Vec<i64> {
        (0..self.input_sizes.len()).map(|d| if self.reduced.contains(&d) { 1 } else { self.input_sizes[d] }).collect()
    }

    /// For each output dim, the dim of `input_sizes` it stands for.
    pub fn out_dims(&self) -> Vec<usize> {
        (0..self.input_sizes.len()).filter(|d| self.keepdim || !self.reduced.contains(d)).collect()
    }
}

/// `out[row(p), p[lead..]...] += value(p)` for every point `p` of `ranges`, into a zero-filled
/// contiguous output of sizes `[rows] + ranges[lead..]` (PyTorch: `ir.Scatter` with
/// `scatter_mode="atomic_add"` over a zeroed buffer; here `embedding_dense_backward`). Rows are
/// added in iteration order; a row outside `[0, rows)` adds nothing (Note [scatter stores] in
/// llvm/src/kernel.rs). Always realized, always its own kernel: its producers are inlined into
/// it, its readers load it from memory.
#[derive(Clone)]
pub struct Scatter {
    /// The iteration space: the scattered dims first, then the output's dims after its first.
    pub ranges: Vec<i64>,
    /// How many leading dims of `ranges` the row stands for.
    pub lead: usize,
    /// Size of the output's first dim.
    pub rows: i64,
    /// The (integer) row at a point.
    pub row_fn: InnerFn,
    /// The value added at a point.
    pub inner_fn: InnerFn,
}

/// What produces a buffer.
#[derive(Clone)]
pub enum BufferKind {
    /// Graph input number `position`.
    Input { position: usize },
    /// A `get_attr` value (side-table entry), read at run time.
    Constant { node: usize },
    Pointwise(Pointwise),
    Reduction(Reduction),
    Scatter(Scatter),
    Fallback(FallbackKernel),
}

/// A value of the graph with a tensor layout (PyTorch: `ir.Buffer`/`ComputedBuffer`).
#[derive(Clone)]
pub struct Buffer {
    pub id: BufferId,
    /// Name of the fx node that produced it (for dumps).
    pub name: String,
    /// Index of the producing fx node.
    pub node: usize,
    /// `None` when the value is not a tensor (a fallback returning a tuple, a Python number...).
    pub layout: Option<Layout>,
    pub kind: BufferKind,
}

/// The lowered graph: buffers in topological order plus the fx-node -> buffer map.
#[derive(Clone, Default)]
pub struct GraphIr {
    pub buffers: Vec<Buffer>,
    /// For each fx node, the buffer holding its value (None for `output`).
    pub node_buffer: Vec<Option<BufferId>>,
    /// Buffers that must exist as tensors: graph outputs and fallback arguments. Other realized
    /// Pointwise buffers are stored only when a kernel outside their group loads them.
    pub must_store: std::collections::HashSet<BufferId>,
    /// Note [index checks]: 0-d float32 reductions that are nonzero when some index read
    /// through `OpsHandler::load_indirect` is out of range; the runtime reads them after the
    /// kernels and, for a nonzero one, runs the graph eagerly so torch raises its own error.
    pub index_checks: Vec<BufferId>,
    /// Note [fallbacks that write their inputs] (lowering.rs): each such fallback and the
    /// buffers it writes in place.
    pub fallback_writes: Vec<(BufferId, Vec<BufferId>)>,
}

impl GraphIr {
    pub fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.0 as usize]
    }

    pub fn pointwise(&self, id: BufferId) -> Option<&Pointwise> {
        match &self.buffer(id).kind {
            BufferKind::Pointwise(pw) => Some(pw),
            _ => None,
        }
    }

    pub fn reduction(&self, id: BufferId) -> Option<&Reduction> {
        match &self.buffer(id).kind {
            BufferKind::Reduction(r) => Some(r),
            _ => None,
        }
    }

    /// Buffers read by `id`'s body (pointwise or reduction), in first-read order; empty for
    /// inputs, constants and fallbacks.
    pub fn body_reads(&self, id: BufferId) -> Vec<BufferId> {
        let mut h = ReadsHandler::default();
        match &self.buffer(id).kind {
            BufferKind::Pointwise(pw) => {
                let n = pw.ranges.len();
                let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
                (pw.inner_fn)(&mut h, &index);
            }
            BufferKind::Reduction(r) => {
                let n = r.input_sizes.len();
                let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
                (r.inner_fn)(&mut h, &index);
            }
            BufferKind::Scatter(sc) => {
                let n = sc.ranges.len();
                let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
                (sc.row_fn)(&mut h, &index);
                (sc.inner_fn)(&mut h, &index);
            }
            _ => {}
        }
        h.reads
    }
}

/// Handler recording which buffers a body loads (PyTorch: `dependencies.py`'s read extraction).
#[derive(Default)]
pub struct ReadsHandler {
    pub reads: Vec<BufferId>,
}

impl OpsHandler for ReadsHandler {
    fn load(&mut self, buf: BufferId, _index: &[Affine]) -> OpsValue {
        if !self.reads.contains(&buf) {
            self.reads.push(buf);
        }
        OpsValue(0)
    }
    fn load_indirect(&mut self, buf: BufferId, index: &[Affine], _dim: usize, _row: OpsValue) -> OpsValue {
        self.load(buf, index)
    }
    fn constant(&mut self, _value: f64, _dtype: DType) -> OpsValue {
        OpsValue(0)
    }
    fn unary(&mut self, _op: UnaryOp, _a: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn binary(&mut self, _op: BinaryOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn compare(&mut self, _op: CmpOp, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn where_(&mut self, _c: OpsValue, _a: OpsValue, _b: OpsValue) -> OpsValue {
        OpsValue(0)
    }
    fn to_dtype(&mut self, _a: OpsValue, _dtype: DType) -> OpsValue {
        OpsValue(0)
    }
}

/// Handler rendering a body as one line of text, for plans and logs: `add(sin(buf0[i0]), 2.0)`.
#[derive(Default)]
pub struct PrintHandler {
    pub values: Vec<String>,
}

impl PrintHandler {
    fn push(&mut self, s: String) -> OpsValue {
        self.values.push(s);
        OpsValue((self.values.len() - 1) as u32)
    }
    fn get(&self, v: OpsValue) -> &str {
        &self.values[v.0 as usize]
    }

    /// Renders a reduction: `sum[i2, i3](body)` over its input space's loop variables.
    pub fn render_reduction(r: &Reduction) -> String {
        let mut h = PrintHandler::default();
        let n = r.input_sizes.len();
        let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
        let v = (r.inner_fn)(&mut h, &index);
        let dims: Vec<String> = r.reduced.iter().map(|d| format!("i{d}")).collect();
        // An OrderedSum is a sum to the reader (only its accumulation order differs).
        let op = match r.op {
            ReductionType::OrderedSum => "sum".to_string(),
            other => format!("{other:?}").to_lowercase(),
        };
        format!("{op}[{}]({})", dims.join(", "), h.get(v))
    }

    /// Renders a scatter's body: `[row, i<lead>, ...] += value` over loop variables `i0, i1, ...`.
    pub fn render_scatter(sc: &Scatter) -> String {
        let mut h = PrintHandler::default();
        let n = sc.ranges.len();
        let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
        let row = (sc.row_fn)(&mut h, &index);
        let v = (sc.inner_fn)(&mut h, &index);
        let mut at = vec![h.get(row).to_string()];
        at.extend((sc.lead..n).map(|d| format!("i{d}")));
        format!("scatter_add[{}] += {}", at.join(", "), h.get(v))
    }

    /// Renders `pw`'s body over named loop variables `i0, i1, ...`.
    pub fn render(pw: &Pointwise) -> String {
        let mut h = PrintHandler::default();
        let n = pw.ranges.len();
        let index: Vec<Affine> = (0..n).map(|d| Affine::var(d, n)).collect();
        let v = (pw.inner_fn)(&mut h, &index);
        h.get(v).to_string()
    }
}

fn render_affine(a: &Affine) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (v, c) in a.coeffs.iter().enumerate() {
        match *c {
            0 => {}
            1 => parts.push(format!("i{v}")),
            c => parts.push(format!("{c}*i{v}")),
        }
    }
    if a.offset != 0 || parts.is_empty() {
        parts.push(a.offset.to_string());
    }
    parts.join("+")
}

impl OpsHandler for PrintHandler {
    fn load(&mut self, buf: BufferId, index: &[Affine]) -> OpsValue {
        let idx: Vec<String> = index.iter().map(render_affine).collect();
        self.push(format!("{buf}[{}]", idx.join(", ")))
    }
    fn load_indirect(&mut self, buf: BufferId, index: &[Affine], dim: usize, row: OpsValue) -> OpsValue {
        let row = self.get(row).to_string();
        let idx: Vec<String> = index.iter().enumerate().map(|(d, a)| if d == dim { row.clone() } else { render_affine(a) }).collect();
        self.push(format!("{buf}[{}]", idx.join(", ")))
    }
    fn constant(&mut self, value: f64, dtype: DType) -> OpsValue {
        match dtype {
            DType::Bool => self.push(format!("{}", value != 0.0)),
            _ => self.push(format!("{value:?}")),
        }
    }
    fn unary(&mut self, op: UnaryOp, a: OpsValue) -> OpsValue {
        let s = format!("{}({})", format!("{op:?}").to_lowercase(), self.get(a));
        self.push(s)
    }
    fn binary(&mut self, op: BinaryOp, a: OpsValue, b: OpsValue) -> OpsValue {
        let s = format!("{}({}, {})", format!("{op:?}").to_lowercase(), self.get(a), self.get(b));
        self.push(s)
    }
    fn compare(&mut self, op: CmpOp, a: OpsValue, b: OpsValue) -> OpsValue {
        let s = format!("{}({}, {})", format!("{op:?}").to_lowercase(), self.get(a), self.get(b));
        self.push(s)
    }
    fn where_(&mut self, c: OpsValue, a: OpsValue, b: OpsValue) -> OpsValue {
        let s = format!("where({}, {}, {})", self.get(c), self.get(a), self.get(b));
        self.push(s)
    }
    fn to_dtype(&mut self, a: OpsValue, dtype: DType) -> OpsValue {
        let s = format!("to_{dtype:?}({})", self.get(a)).to_string();
        self.push(s)
    }
}
