//! `KernelBuilder`: the only way clients make a [`Kernel`].
//!
//! Invariants: expressions are hash-consed (building the same `Expr` twice returns the same
//! `ExprId`), so common subexpressions are shared and equality of ids is equality of values;
//! ids are handed out in definition order, which keeps the arena topologically sorted.

use std::collections::HashMap;

use crate::kernel::{BinaryOp, CmpOp, DType, Expr, ExprId, Index, Kernel, KernelArg, ReduceOp, ScatterRow, Store, UnaryOp};

/// Incrementally builds a [`Kernel`] over a fixed iteration space.
pub struct KernelBuilder {
    kernel: Kernel,
    interned: HashMap<Expr, ExprId>,
}

impl KernelBuilder {
    /// Starts a kernel named `name` (a symbol: `[A-Za-z0-9_]`) looping over `ranges`.
    pub fn new(name: impl Into<String>, ranges: Vec<i64>) -> Self {
        KernelBuilder {
            kernel: Kernel {
                name: name.into(),
                ranges,
                reduction_ranges: Vec::new(),
                args: Vec::new(),
                exprs: Vec::new(),
                stores: Vec::new(),
                tile: None,
            },
            interned: HashMap::new(),
        }
    }

    /// Starts a reduction kernel: `ranges` as in [`KernelBuilder::new`], and reduction loops over
    /// `reduction_ranges` inside every point; indices take a stride per range of both lists.
    pub fn new_reduction(name: impl Into<String>, ranges: Vec<i64>, reduction_ranges: Vec<i64>) -> Self {
        let mut b = KernelBuilder::new(name, ranges);
        b.kernel.reduction_ranges = reduction_ranges;
        b
    }

    /// `op` of `value` over the reduction loop (F32).
    pub fn reduce(&mut self, op: ReduceOp, value: ExprId) -> ExprId {
        self.intern(Expr::Reduce(op, value))
    }

    /// Number of loop variables an index has strides for (ranges, then reduction ranges).
    pub fn n_dims(&self) -> usize {
        self.kernel.n_index_dims()
    }

    /// Adds a read-only pointer argument; returns its position in the argument list.
    pub fn input(&mut self, name: impl Into<String>, dtype: DType) -> u32 {
        self.kernel.args.push(KernelArg { name: name.into(), dtype, is_output: false });
        (self.kernel.args.len() - 1) as u32
    }

    /// Adds a written pointer argument; returns its position in the argument list.
    pub fn output(&mut self, name: impl Into<String>, dtype: DType) -> u32 {
        self.kernel.args.push(KernelArg { name: name.into(), dtype, is_output: true });
        (self.kernel.args.len() - 1) as u32
    }

    fn intern(&mut self, expr: Expr) -> ExprId {
        if let Some(id) = self.interned.get(&expr) {
            return *id;
        }
        let id = ExprId(self.kernel.exprs.len() as u32);
        self.kernel.exprs.push(expr.clone());
        self.interned.insert(expr, id);
        id
    }

    /// Result dtype of an expression built so far.
    pub fn dtype_of(&self, id: ExprId) -> DType {
        self.kernel.dtype_of(id)
    }

    pub fn load(&mut self, arg: u32, index: Index) -> ExprId {
        self.intern(Expr::Load { arg, index })
    }

    /// Bool `0 <= index < size` over the loop variables (Note [masked loads] in kernel.rs).
    pub fn in_range(&mut self, index: Index, size: i64) -> ExprId {
        self.intern(Expr::InRange { index, size })
    }

    /// Element `index` of `arg` where `mask` holds, zero elsewhere (nothing read there).
    pub fn masked_load(&mut self, arg: u32, index: Index, mask: ExprId) -> ExprId {
        self.intern(Expr::MaskedLoad { arg, index, mask })
    }

    /// Element `index + row * stride` of `arg`, `row` an integer value in `[0, size)` (row 0
    /// when it is not; Note [indirect loads] in kernel.rs).
    pub fn indirect_load(&mut self, arg: u32, index: Index, row: ExprId, stride: i64, size: i64) -> ExprId {
        self.intern(Expr::IndirectLoad { arg, index, row, stride, size })
    }

    /// Trip counts of the loops built so far (ranges, then reduction ranges).
    pub fn all_ranges(&self) -> Vec<i64> {
        self.kernel.ranges.iter().chain(&self.kernel.reduction_ranges).copied().collect()
    }

    pub fn const_f32(&mut self, value: f32) -> ExprId {
        self.intern(Expr::ConstF32(value.to_bits()))
    }

    pub fn const_f64(&mut self, value: f64) -> ExprId {
        self.intern(Expr::ConstF64(value.to_bits()))
    }

    /// An integer constant of dtype `I64` or `I32`.
    pub fn const_int(&mut self, dtype: DType, value: i64) -> ExprId {
        self.intern(Expr::ConstInt(dtype, value))
    }

    /// `value` as a constant of value dtype `dtype` (rounded for F32, truncated toward zero for
    /// the integer types, `value != 0` for Bool).
    pub fn const_of(&mut self, dtype: DType, value: f64) -> ExprId {
        match dtype.value_type() {
            DType::F64 => self.const_f64(value),
            DType::I64 | DType::I32 => self.const_int(dtype, value as i64),
            DType::Bool => self.const_bool(value != 0.0),
            _ => self.const_f32(value as f32),
        }
    }

    pub fn const_bool(&mut self, value: bool) -> ExprId {
        self.intern(Expr::ConstBool(value))
    }

    pub fn unary(&mut self, op: UnaryOp, a: ExprId) -> ExprId {
        self.intern(Expr::Unary(op, a))
    }

    pub fn binary(&mut self, op: BinaryOp, a: ExprId, b: ExprId) -> ExprId {
        self.intern(Expr::Binary(op, a, b))
    }

    pub fn compare(&mut self, op: CmpOp, a: ExprId, b: ExprId) -> ExprId {
        self.intern(Expr::Compare(op, a, b))
    }

    pub fn select(&mut self, cond: ExprId, a: ExprId, b: ExprId) -> ExprId {
        self.intern(Expr::Select(cond, a, b))
    }

    /// Converts to `to`; a no-op (returns `a`) when `a` already has that dtype.
    pub fn cast(&mut self, to: DType, a: ExprId) -> ExprId {
        if self.dtype_of(a) == to {
            return a;
        }
        self.intern(Expr::Cast(to, a))
    }

    pub fn store(&mut self, arg: u32, index: Index, value: ExprId) {
        self.kernel.stores.push(Store { arg, index, value, scatter: None });
    }

    /// `out[index + row * stride] += value` (Note [scatter stores]); `out` is zero-filled
    /// (`numel` elements) first, and a row outside `[0, size)` adds nothing.
    pub fn scatter_add(&mut self, arg: u32, index: Index, value: ExprId, row: ExprId, stride: i64, size: i64, numel: i64) {
        self.kernel.stores.push(Store { arg, index, value, scatter: Some(ScatterRow { row, stride, size, numel }) });
    }

    /// True when `id` is the F32 constant `value` (bitwise).
    pub fn is_const_f32(&self, id: ExprId, value: f32) -> bool {
        self.kernel.exprs[id.0 as usize] == Expr::ConstF32(value.to_bits())
    }

    /// Finishes without verifying; for passes whose input was already verified.
    pub(crate) fn into_kernel_unchecked(self) -> Kernel {
        self.kernel
    }

    /// Finishes the kernel, running the verifier.
    pub fn finish(self) -> Result<Kernel, Vec<String>> {
        self.kernel.verify()?;
        Ok(self.kernel)
    }
}
