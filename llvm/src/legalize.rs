//! Legalization: rewrites a [`Kernel`] into the subset that `emit` handles directly, and
//! simplifies its loop nest.
//!
//! Invariants: the result computes the same values at the same addresses as the input (bitwise,
//! NaN payloads aside); after `legalize`, no `Relu`, `Sigmoid`, `Reciprocal`, `Rsqrt`, `Maximum` or
//! `Minimum` remains, no range is 1 unless the kernel is a single point, and the stores' loop
//! order is outermost-largest-stride first (except that a transposed access may move one dim
//! next to the innermost and set `tile`).

use crate::builder::KernelBuilder;
use crate::kernel::{BinaryOp, CmpOp, Expr, ExprId, Index, Kernel, UnaryOp};

/// Op rewrites, in order; each arm states the identity it encodes.
fn rewrite(b: &mut KernelBuilder, expr: &Expr) -> ExprId {
    match *expr {
        // relu(x) -> x < 0 ? 0 : x   (NaN fails the compare and passes through, as in torch)
        Expr::Unary(UnaryOp::Relu, x) => {
            let zero = b.const_of(b.dtype_of(x), 0.0);
            let neg = b.compare(CmpOp::Lt, x, zero);
            b.select(neg, zero, x)
        }
        // sigmoid(x) -> 1 / (1 + exp(-x))   (torch's CPU formula)
        Expr::Unary(UnaryOp::Sigmoid, x) => {
            let one = b.const_f32(1.0);
            let neg = b.unary(UnaryOp::Neg, x);
            let e = b.unary(UnaryOp::Exp, neg);
            let den = b.binary(BinaryOp::Add, one, e);
            b.binary(BinaryOp::Div, one, den)
        }
        // rsqrt(x) -> 1 / sqrt(x)
        Expr::Unary(UnaryOp::Rsqrt, x) => {
            let one = b.const_of(b.dtype_of(x), 1.0);
            let s = b.unary(UnaryOp::Sqrt, x);
            b.binary(BinaryOp::Div, one, s)
        }
        // reciprocal(x) -> 1 / x
        Expr::Unary(UnaryOp::Reciprocal, x) => {
            let one = b.const_of(b.dtype_of(x), 1.0);
            b.binary(BinaryOp::Div, one, x)
        }
        // Integers have no NaN: maximum(a, b) -> a > b ? a : b, minimum(a, b) -> a < b ? a : b.
        Expr::Binary(op @ (BinaryOp::Maximum | BinaryOp::Minimum), x, y) if b.dtype_of(x).is_int() => {
            let c = b.compare(if op == BinaryOp::Maximum { CmpOp::Gt } else { CmpOp::Lt }, x, y);
            b.select(c, x, y)
        }
        // maximum(a, b) -> a != a ? a : (a > b ? a : b)   (NaN in either operand propagates)
        // When a == b (-0.0 against 0.0) this gives b, as ATen's vectorized maximum/minimum (the
        // x86 max/min instructions return their second operand on ties); ATen's scalar loop, which
        // only small tensors and the tails of large ones take, returns a instead.
        Expr::Binary(BinaryOp::Maximum, x, y) => {
            let x_nan = b.compare(CmpOp::Ne, x, x);
            let gt = b.compare(CmpOp::Gt, x, y);
            let pick = b.select(gt, x, y);
            b.select(x_nan, x, pick)
        }
        // minimum(a, b) -> a != a ? a : (a < b ? a : b)
        Expr::Binary(BinaryOp::Minimum, x, y) => {
            let x_nan = b.compare(CmpOp::Ne, x, x);
            let lt = b.compare(CmpOp::Lt, x, y);
            let pick = b.select(lt, x, y);
            b.select(x_nan, x, pick)
        }
        // pow(x, 2) -> x * x   (exact, and what torch does for a scalar exponent of 2)
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, 2.0) => b.binary(BinaryOp::Mul, x, x),
        // pow(x, 1) -> x
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, 1.0) => x,
        // pow(x, 0.5) -> sqrt(x)   (torch's pow_tensor_scalar does the same)
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, 0.5) => b.unary(UnaryOp::Sqrt, x),
        // The other exponents ATen's pow_tensor_scalar kernel special-cases
        // (aten/src/ATen/native/cpu/PowKernel.cpp), computed in the same order, so 3, -1 and -2
        // match eager bit for bit (-0.5 within an ulp); a vector powf call costs 20x more (the
        // tanh form of GELU has x ** 3).
        // pow(x, 3) -> (x * x) * x
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, 3.0) => {
            let sq = b.binary(BinaryOp::Mul, x, x);
            b.binary(BinaryOp::Mul, sq, x)
        }
        // pow(x, -0.5) -> 1 / sqrt(x)
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, -0.5) => {
            let one = b.const_f32(1.0);
            let s = b.unary(UnaryOp::Sqrt, x);
            b.binary(BinaryOp::Div, one, s)
        }
        // pow(x, -1) -> 1 / x
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, -1.0) => {
            let one = b.const_f32(1.0);
            b.binary(BinaryOp::Div, one, x)
        }
        // pow(x, -2) -> 1 / (x * x)
        Expr::Binary(BinaryOp::Pow, x, y) if b.is_const_f32(y, -2.0) => {
            let one = b.const_f32(1.0);
            let sq = b.binary(BinaryOp::Mul, x, x);
            b.binary(BinaryOp::Div, one, sq)
        }
        Expr::Load { arg, ref index } => b.load(arg, index.clone()),
        Expr::InRange { ref index, size } => b.in_range(index.clone(), size),
        Expr::MaskedLoad { arg, ref index, mask } => b.masked_load(arg, index.clone(), mask),
        Expr::IndirectLoad { arg, ref index, row, stride, size } => b.indirect_load(arg, index.clone(), row, stride, size),
        Expr::ConstF32(bits) => b.const_f32(f32::from_bits(bits)),
        Expr::ConstF64(bits) => b.const_f64(f64::from_bits(bits)),
        Expr::ConstInt(dt, v) => b.const_int(dt, v),
        Expr::ConstBool(v) => b.const_bool(v),
        Expr::Unary(op, a) => b.unary(op, a),
        Expr::Binary(op, x, y) => b.binary(op, x, y),
        Expr::Compare(op, x, y) => b.compare(op, x, y),
        Expr::Select(c, x, y) => b.select(c, x, y),
        Expr::Cast(to, a) => b.cast(to, a),
        Expr::Reduce(op, a) => b.reduce(op, a),
    }
}

/// Remaps operand ids of `expr` through `map` (old id -> new id).
fn remap(expr: &Expr, map: &[ExprId]) -> Expr {
    let m = |id: ExprId| map[id.0 as usize];
    match expr.clone() {
        Expr::Unary(op, a) => Expr::Unary(op, m(a)),
        Expr::Binary(op, a, b) => Expr::Binary(op, m(a), m(b)),
        Expr::Compare(op, a, b) => Expr::Compare(op, m(a), m(b)),
        Expr::Select(c, a, b) => Expr::Select(m(c), m(a), m(b)),
        Expr::Cast(to, a) => Expr::Cast(to, m(a)),
        Expr::Reduce(op, a) => Expr::Reduce(op, m(a)),
        Expr::MaskedLoad { arg, index, mask } => Expr::MaskedLoad { arg, index, mask: m(mask) },
        Expr::IndirectLoad { arg, index, row, stride, size } => Expr::IndirectLoad { arg, index, row: m(row), stride, size },
        other => other,
    }
}

/// Drops unit dimensions, orders loops by the first store's strides (largest outermost) and
/// merges adjacent dimensions that are contiguous for every load and store (like TensorIterator's
/// dimension coalescing), so a dense kernel becomes one flat loop.
pub fn simplify_loops(kernel: &Kernel) -> Kernel {
    let mut k = kernel.clone();
    if k.numel() == 0 {
        return k;
    }
    let n_stores = k.stores.len();
    // Window kernels (Note [masked loads]) are not tiled: the tile staging reads plain loads.
    let masked = k.has_masks();
    let scatter = k.has_scatter();
    let mut ranges = k.ranges.clone();
    let mut indices: Vec<&mut Index> = Vec::new();
    for e in k.exprs.iter_mut() {
        if let Expr::Load { index, .. } | Expr::MaskedLoad { index, .. } | Expr::InRange { index, .. } | Expr::IndirectLoad { index, .. } = e {
            indices.push(index);
        }
    }
    for s in k.stores.iter_mut() {
        indices.push(&mut s.index);
    }
    // 1. Drop unit dimensions.
    let keep: Vec<usize> = (0..ranges.len()).filter(|&d| ranges[d] != 1).collect();
    ranges = keep.iter().map(|&d| ranges[d]).collect();
    for idx in indices.iter_mut() {
        idx.strides = keep.iter().map(|&d| idx.strides[d]).collect();
    }
    // 2. Order loops by the first store's strides, largest outermost (stable). A scatter store's
    //    index leaves out its data-dependent row, so its loops keep the lowering's order (the
    //    scattered dims outermost, Note [scatter stores]).
    if n_stores > 0 && !scatter {
        let first_store = indices.len() - n_stores;
        let key: Vec<i64> = indices[first_store].strides.iter().map(|s| s.abs()).collect();
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by(|&a, &b| key[b].cmp(&key[a]));
        ranges = order.iter().map(|&d| ranges[d]).collect();
        for idx in indices.iter_mut() {
            idx.strides = order.iter().map(|&d| idx.strides[d]).collect();
        }
    }
    // 3. Coalesce, innermost pairs first.
    let mut d = ranges.len();
    while d >= 2 {
        let (outer, inner) = (d - 2, d - 1);
        if indices.iter().all(|idx| idx.strides[outer] == idx.strides[inner] * ranges[inner]) {
            ranges[outer] *= ranges[inner];
            ranges.remove(inner);
            for idx in indices.iter_mut() {
                idx.strides.remove(outer);
            }
        }
        d -= 1;
    }
    if ranges.is_empty() {
        ranges.push(1);
        for idx in indices.iter_mut() {
            idx.strides.push(0);
        }
    }
    // 4. Tiling: when some load is unit-stride along a dim `a` other than the innermost `b` and
    //    strided along `b` (a transpose), move `a` next to `b` and block both.
    let n = ranges.len();
    if n >= 2 && !masked && !scatter {
        let b = n - 1;
        let transposed_dim = indices.iter().find_map(|idx| {
            if idx.strides[b] == 0 || idx.strides[b] == 1 {
                return None;
            }
            (0..b).find(|&a| idx.strides[a] == 1)
        });
        if let Some(a) = transposed_dim {
            if ranges[a] >= TILE && ranges[b] >= TILE {
                let mut order: Vec<usize> = (0..n).filter(|&d| d != a && d != b).collect();
                order.push(a);
                order.push(b);
                ranges = order.iter().map(|&d| ranges[d]).collect();
                for idx in indices.iter_mut() {
                    idx.strides = order.iter().map(|&d| idx.strides[d]).collect();
                }
                k.tile = Some(TILE);
            }
        }
    }
    k.ranges = ranges;
    k
}

/// Block size (iterations per dim) of tiled loops: one 16x16 f32 tile is 16 AVX-512 vectors,
/// transposed in registers by `emit` (Note [transposed tiles]).
pub const TILE: i64 = 16;

/// Rewrites ops the emitter lacks and simplifies the loop nest; see the module invariants.
pub fn legalize(kernel: &Kernel) -> Kernel {
    let mut b = KernelBuilder::new_reduction(kernel.name.clone(), kernel.ranges.clone(), kernel.reduction_ranges.clone());
    for a in &kernel.args {
        if a.is_output {
            b.output(a.name.clone(), a.dtype);
        } else {
            b.input(a.name.clone(), a.dtype);
        }
    }
    let mut map: Vec<ExprId> = Vec::with_capacity(kernel.exprs.len());
    for e in &kernel.exprs {
        let id = rewrite(&mut b, &remap(e, &map));
        map.push(id);
    }
    for s in &kernel.stores {
        match s.scatter {
            None => b.store(s.arg, s.index.clone(), map[s.value.0 as usize]),
            Some(sc) => b.scatter_add(s.arg, s.index.clone(), map[s.value.0 as usize], map[sc.row.0 as usize], sc.stride, sc.size, sc.numel),
        }
    }
    let mut out = b.into_kernel_unchecked();
    out.tile = kernel.tile;
    if !out.reduction_ranges.is_empty() {
        // Reduction kernels keep their loop nest: the phase structure depends on which index
        // dims are reduction dims.
        return out;
    }
    simplify_loops(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KernelBuilder;
    use crate::kernel::DType;

    /// Builds `out = x + 0` with the given load/store strides and returns the simplified loops as
    /// (ranges, load strides, store strides, tile).
    fn check(ranges: &[i64], load: &[i64], store: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>, Option<i64>) {
        let mut b = KernelBuilder::new("t", ranges.to_vec());
        let x = b.input("x", DType::F32);
        let o = b.output("o", DType::F32);
        let l = b.load(x, Index { offset: 0, strides: load.to_vec() });
        b.store(o, Index { offset: 0, strides: store.to_vec() }, l);
        let k = legalize(&b.finish().unwrap());
        let Expr::Load { index, .. } = &k.exprs[0] else { panic!("first expr is the load") };
        (k.ranges.clone(), index.strides.clone(), k.stores[0].index.strides.clone(), k.tile)
    }

    #[test]
    fn contiguous_coalesces_to_one_loop() {
        assert_eq!(check(&[4, 5, 6], &[30, 6, 1], &[30, 6, 1]), (vec![120], vec![1], vec![1], None));
    }

    #[test]
    fn unit_dims_dropped_and_scalar_kept() {
        assert_eq!(check(&[1, 7, 1], &[7, 1, 1], &[7, 1, 1]), (vec![7], vec![1], vec![1], None));
        assert_eq!(check(&[], &[], &[]), (vec![1], vec![0], vec![0], None));
    }

    #[test]
    fn broadcast_blocks_coalescing() {
        assert_eq!(check(&[4, 8], &[0, 1], &[8, 1]), (vec![4, 8], vec![0, 1], vec![8, 1], None));
    }

    #[test]
    fn loops_follow_store_order() {
        // Output stored transposed (strides [1, 4]): the store's unit-stride dim becomes innermost.
        assert_eq!(check(&[4, 8], &[1, 4], &[1, 4]), (vec![32], vec![1], vec![1], None));
    }

    #[test]
    fn transpose_is_tiled() {
        assert_eq!(check(&[64, 64], &[1, 64], &[64, 1]), (vec![64, 64], vec![1, 64], vec![64, 1], Some(TILE)));
        // Too small to tile.
        assert_eq!(check(&[8, 8], &[1, 8], &[8, 1]).3, None);
    }

    #[test]
    fn rewrites_leave_no_composite_ops() {
        let mut b = KernelBuilder::new("t", vec![4]);
        let x = b.input("x", DType::F32);
        let o = b.output("o", DType::F32);
        let l = b.load(x, Index { offset: 0, strides: vec![1] });
        let r = b.unary(UnaryOp::Relu, l);
        let s = b.unary(UnaryOp::Sigmoid, r);
        let m = b.binary(BinaryOp::Maximum, s, l);
        let two = b.const_f32(2.0);
        let p = b.binary(BinaryOp::Pow, m, two);
        b.store(o, Index { offset: 0, strides: vec![1] }, p);
        let k = legalize(&b.finish().unwrap());
        k.verify().unwrap();
        for e in &k.exprs {
            assert!(
                !matches!(
                    e,
                    Expr::Unary(UnaryOp::Relu | UnaryOp::Sigmoid | UnaryOp::Reciprocal, _)
                        | Expr::Binary(BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Pow, _, _)
                ),
                "{e:?} survived legalization:\n{k}"
            );
        }
    }
}
