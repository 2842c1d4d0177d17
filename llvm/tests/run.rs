//! Run tests: build a `Kernel`, JIT it, run it on host buffers and compare with a Rust reference.

use dynamo_llvm::{BinaryOp, CmpOp, DType, Index, JitModule, KernelBuilder, UnaryOp};

fn idx(offset: i64, strides: &[i64]) -> Index {
    Index { offset, strides: strides.to_vec() }
}

/// JITs a one-input, one-output unary kernel over a contiguous 1-d range and checks it elementwise.
fn check_unary(op: UnaryOp, input: &[f32], reference: impl Fn(f32) -> f32, tol: f32) {
    let n = input.len() as i64;
    let mut b = KernelBuilder::new(format!("{}unary", dynamo_llvm::unique_kernel_prefix()), vec![n]);
    let x_arg = b.input("x", DType::F32);
    let out_arg = b.output("out", DType::F32);
    let x = b.load(x_arg, idx(0, &[1]));
    let y = b.unary(op, x);
    b.store(out_arg, idx(0, &[1]), y);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let mut out = vec![0f32; input.len()];
    unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for (i, (&x, &got)) in input.iter().zip(&out).enumerate() {
        let want = reference(x);
        let same = (want.is_nan() && got.is_nan()) || want == got || (want - got).abs() <= tol * want.abs().max(1.0);
        assert!(same, "{op:?}({x}) at {i}: want {want}, got {got}");
    }
}

fn sample() -> Vec<f32> {
    let mut v: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.0123).collect();
    v.extend([0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, 88.0, -88.0]);
    v
}

#[test]
fn unary_ops_match_reference() {
    let s = sample();
    check_unary(UnaryOp::Neg, &s, |x| -x, 0.0);
    check_unary(UnaryOp::Abs, &s, f32::abs, 0.0);
    check_unary(UnaryOp::Relu, &s, |x| if x < 0.0 { 0.0 } else { x }, 0.0);
    check_unary(UnaryOp::Sqrt, &s, f32::sqrt, 0.0);
    check_unary(UnaryOp::Sin, &s, f32::sin, 1e-6);
    check_unary(UnaryOp::Cos, &s, f32::cos, 1e-6);
    check_unary(UnaryOp::Exp, &s, f32::exp, 1e-6);
    check_unary(UnaryOp::Log, &s, f32::ln, 1e-6);
    check_unary(UnaryOp::Tanh, &s, f32::tanh, 1e-6);
    check_unary(UnaryOp::Sigmoid, &s, |x| 1.0 / (1.0 + (-x).exp()), 1e-6);
    check_unary(UnaryOp::Reciprocal, &s, |x| 1.0 / x, 0.0);
    check_unary(UnaryOp::Floor, &s, f32::floor, 0.0);
}

#[test]
fn relu_propagates_nan() {
    check_unary(UnaryOp::Relu, &[f32::NAN, -1.0, 2.0], |x| if x.is_nan() { x } else { x.max(0.0) }, 0.0);
}

/// out[i, j] = sin(x[j, i]) + cos(y[j]) * 2 over a 37x53 space: transposed load, broadcast load.
#[test]
fn fused_strided_broadcast_kernel() {
    let (m, n) = (37i64, 53i64);
    let x: Vec<f32> = (0..m * n).map(|i| (i as f32) * 0.01).collect(); // stored as [n, m]
    let y: Vec<f32> = (0..n).map(|i| (i as f32) * -0.3).collect();
    let mut b = KernelBuilder::new(format!("{}fused", dynamo_llvm::unique_kernel_prefix()), vec![m, n]);
    let xa = b.input("x", DType::F32);
    let ya = b.input("y", DType::F32);
    let oa = b.output("out", DType::F32);
    let lx = b.load(xa, idx(0, &[1, m]));
    let ly = b.load(ya, idx(0, &[0, 1]));
    let s = b.unary(UnaryOp::Sin, lx);
    let c = b.unary(UnaryOp::Cos, ly);
    let two = b.const_f32(2.0);
    let c2 = b.binary(BinaryOp::Mul, c, two);
    let r = b.binary(BinaryOp::Add, s, c2);
    b.store(oa, idx(0, &[n, 1]), r);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let mut out = vec![0f32; (m * n) as usize];
    unsafe { jm.run(0, &[x.as_ptr() as *mut u8, y.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for i in 0..m {
        for j in 0..n {
            let want = x[(j * m + i) as usize].sin() + y[j as usize].cos() * 2.0;
            let got = out[(i * n + j) as usize];
            assert!((want - got).abs() <= 1e-6, "({i},{j}): want {want} got {got}");
        }
    }
}

/// where(x > y, x, y * 0.5) with a bool side output, over 300k points (runs multi-threaded).
#[test]
fn where_compare_bool_output_parallel() {
    let n = 300_000i64;
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 - 500.0).collect();
    let y: Vec<f32> = (0..n).map(|i| ((i * 104729) % 1000) as f32 - 500.0).collect();
    let mut b = KernelBuilder::new(format!("{}where", dynamo_llvm::unique_kernel_prefix()), vec![n]);
    let xa = b.input("x", DType::F32);
    let ya = b.input("y", DType::F32);
    let oa = b.output("out", DType::F32);
    let ma = b.output("mask", DType::Bool);
    let lx = b.load(xa, idx(0, &[1]));
    let ly = b.load(ya, idx(0, &[1]));
    let gt = b.compare(CmpOp::Gt, lx, ly);
    let half = b.const_f32(0.5);
    let yh = b.binary(BinaryOp::Mul, ly, half);
    let r = b.select(gt, lx, yh);
    b.store(oa, idx(0, &[1]), r);
    b.store(ma, idx(0, &[1]), gt);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let mut out = vec![0f32; n as usize];
    let mut mask = vec![7u8; n as usize];
    unsafe {
        jm.run(
            0,
            &[x.as_ptr() as *mut u8, y.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8, mask.as_mut_ptr()],
        )
    };
    for i in 0..n as usize {
        let want = if x[i] > y[i] { x[i] } else { y[i] * 0.5 };
        assert_eq!(out[i], want, "at {i}");
        assert_eq!(mask[i], (x[i] > y[i]) as u8, "mask at {i}");
    }
}

#[test]
fn sin_vectorizes_through_libmvec() {
    let mut b = KernelBuilder::new(format!("{}vec", dynamo_llvm::unique_kernel_prefix()), vec![4096]);
    let xa = b.input("x", DType::F32);
    let oa = b.output("out", DType::F32);
    let lx = b.load(xa, idx(0, &[1]));
    let s = b.unary(UnaryOp::Sin, lx);
    b.store(oa, idx(0, &[1]), s);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    eprintln!("{:?}", jm.times);
    if !dynamo_llvm::host_target_info().vector_isas.is_empty() {
        assert!(jm.llvm_ir.contains("_ZGV"), "no vector sin call in:\n{}", jm.llvm_ir);
    }
}

/// out = x.T + 1 over 701x517 (tiled, ragged blocks, split across threads), exact.
#[test]
fn tiled_transpose_parallel() {
    let (m, n) = (701i64, 517i64);
    let x: Vec<f32> = (0..m * n).map(|i| i as f32).collect(); // stored as [n, m]
    let mut b = KernelBuilder::new(format!("{}tiled", dynamo_llvm::unique_kernel_prefix()), vec![m, n]);
    let xa = b.input("x", DType::F32);
    let oa = b.output("out", DType::F32);
    let lx = b.load(xa, idx(0, &[1, m]));
    let one = b.const_f32(1.0);
    let r = b.binary(BinaryOp::Add, lx, one);
    b.store(oa, idx(0, &[n, 1]), r);
    let kernel = b.finish().unwrap();
    assert_eq!(dynamo_llvm::legalize::legalize(&kernel).tile, Some(dynamo_llvm::legalize::TILE));
    let jm = JitModule::compile(&[kernel]).unwrap();
    let mut out = vec![0f32; (m * n) as usize];
    unsafe { jm.run(0, &[x.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for i in 0..m {
        for j in 0..n {
            assert_eq!(out[(i * n + j) as usize], x[(j * m + i) as usize] + 1.0, "({i},{j})");
        }
    }
}

/// Softmax over rows of a [rows, cols] matrix as one reduction kernel with three phases:
/// max, sum of exp(x - max), then the normalized store; plus a NaN row and an empty reduction.
#[test]
fn softmax_reduction_kernel_matches_reference() {
    use dynamo_llvm::ReduceOp;
    for &(rows, cols) in &[(5i64, 37i64), (3, 1), (2, 300), (70000, 3)] {
        let mut b = KernelBuilder::new_reduction(format!("{}softmax", dynamo_llvm::unique_kernel_prefix()), vec![rows], vec![cols]);
        let x_arg = b.input("x", DType::F32);
        let out_arg = b.output("out", DType::F32);
        let x = b.load(x_arg, idx(0, &[cols, 1]));
        let m = b.reduce(ReduceOp::Max, x);
        let shifted = b.binary(BinaryOp::Sub, x, m);
        let ex = b.unary(UnaryOp::Exp, shifted);
        let s = b.reduce(ReduceOp::Sum, ex);
        let y = b.binary(BinaryOp::Div, ex, s);
        b.store(out_arg, idx(0, &[cols, 1]), y);
        let kernel = b.finish().unwrap();
        assert_eq!(kernel.phases().iter().max(), Some(&2));
        let jm = JitModule::compile(&[kernel]).unwrap();
        let mut input: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 * 0.01 - 5.0).collect();
        input[0] = f32::NAN; // row 0 is all NaN in torch
        let mut out = vec![0f32; input.len()];
        unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
        for r in 0..rows as usize {
            let row = &input[r * cols as usize..(r + 1) * cols as usize];
            let mx = row.iter().fold(f32::NEG_INFINITY, |a, &v| if v.is_nan() || a.is_nan() { f32::NAN } else { a.max(v) });
            let sum: f64 = row.iter().map(|&v| ((v - mx) as f64).exp()).sum();
            for c in 0..cols as usize {
                let want = (((row[c] - mx) as f64).exp() / sum) as f32;
                let got = out[r * cols as usize + c];
                assert!(
                    (want.is_nan() && got.is_nan()) || (want - got).abs() <= 1e-6 * want.abs().max(1e-6) + 1e-7,
                    "softmax {rows}x{cols} at ({r}, {c}): want {want}, got {got}"
                );
            }
        }
    }
}

/// Sum and mean over the last two dims of a [2, 3, 4, 5] tensor (keepdim), stored at the outer
/// index; a zero-size reduction gives the identity.
#[test]
fn multi_dim_sum_reduction() {
    use dynamo_llvm::ReduceOp;
    let mut b = KernelBuilder::new_reduction(format!("{}sum", dynamo_llvm::unique_kernel_prefix()), vec![2, 3], vec![4, 5]);
    let x_arg = b.input("x", DType::F32);
    let out_arg = b.output("out", DType::F32);
    let x = b.load(x_arg, idx(0, &[60, 20, 5, 1]));
    let s = b.reduce(ReduceOp::Sum, x);
    b.store(out_arg, idx(0, &[3, 1, 0, 0]), s);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let input: Vec<f32> = (0..120).map(|i| i as f32).collect();
    let mut out = vec![0f32; 6];
    unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for (o, got) in out.iter().enumerate() {
        let want: f32 = (0..20).map(|k| (o * 20 + k) as f32).sum();
        assert_eq!(*got, want);
    }
    let mut b = KernelBuilder::new_reduction(format!("{}sum0", dynamo_llvm::unique_kernel_prefix()), vec![3], vec![0]);
    let x_arg = b.input("x", DType::F32);
    let out_arg = b.output("out", DType::F32);
    let x = b.load(x_arg, idx(0, &[0, 1]));
    let s = b.reduce(ReduceOp::Max, x);
    b.store(out_arg, idx(0, &[1, 0]), s);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let mut out = vec![0f32; 3];
    unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    assert!(out.iter().all(|v| *v == f32::NEG_INFINITY));
}

/// A column sum over dim 0 of a row-major [n, c] matrix with pointwise work over the same
/// [n, c] space stored inside the reduction loop (a layer norm's weight gradient beside its
/// input gradient): sum[j] = sum_i x[i, j] * r[i], y[i, j] = x[i, j] * r[i] + 1. Runs the column
/// schedule (Note [column reductions] in emit.rs); c spans two column blocks, and the long case
/// takes the blocked two-level sum.
#[test]
fn column_sum_with_inner_store() {
    use dynamo_llvm::ReduceOp;
    for (n, c) in [(70i64, 300i64), (5000, 3)] {
        let mut b = KernelBuilder::new_reduction(format!("{}colsum", dynamo_llvm::unique_kernel_prefix()), vec![c], vec![n]);
        let x_arg = b.input("x", DType::F32);
        let r_arg = b.input("r", DType::F32);
        let sum_arg = b.output("sum", DType::F32);
        let y_arg = b.output("y", DType::F32);
        let x = b.load(x_arg, idx(0, &[1, c]));
        let r = b.load(r_arg, idx(0, &[0, 1]));
        let xr = b.binary(BinaryOp::Mul, x, r);
        let s = b.reduce(ReduceOp::Sum, xr);
        b.store(sum_arg, idx(0, &[1, 0]), s);
        let one = b.const_f32(1.0);
        let y = b.binary(BinaryOp::Add, xr, one);
        b.store(y_arg, idx(0, &[1, c]), y);
        let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
        let xs: Vec<f32> = (0..n * c).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
        let rs: Vec<f32> = (0..n).map(|i| ((i * 13 % 17) as f32 - 8.0) * 0.1).collect();
        let mut sum = vec![0f32; c as usize];
        let mut ys = vec![0f32; (n * c) as usize];
        let ptrs = [xs.as_ptr() as *mut u8, rs.as_ptr() as *mut u8, sum.as_mut_ptr() as *mut u8, ys.as_mut_ptr() as *mut u8];
        unsafe { jm.run(0, &ptrs) };
        for j in 0..c as usize {
            let terms: Vec<f64> = (0..n as usize).map(|i| (xs[i * c as usize + j] * rs[i]) as f64).collect();
            let want: f64 = terms.iter().sum();
            let scale: f64 = terms.iter().map(|t| t.abs()).sum();
            assert!((sum[j] as f64 - want).abs() <= 1e-4 * scale + 1e-6, "n {n} c {c} column {j}: want {want}, got {}", sum[j]);
        }
        for i in 0..n as usize {
            for j in 0..c as usize {
                let k = i * c as usize + j;
                assert_eq!(ys[k], xs[k] * rs[i] + 1.0, "n {n} c {c} at ({i}, {j})");
            }
        }
    }
}

/// bfloat16 and float16 buffers: loads widen to f32, the math runs in f32, stores round to
/// nearest even (the reference rounds the same way through the bit patterns).
#[test]
fn half_precision_storage_rounds_to_nearest_even() {
    fn f32_to_bf16(x: f32) -> u16 {
        let b = x.to_bits();
        if x.is_nan() {
            return ((b >> 16) as u16) | 0x40;
        }
        let round = 0x7fff + ((b >> 16) & 1);
        ((b + round) >> 16) as u16
    }
    fn bf16_to_f32(h: u16) -> f32 {
        f32::from_bits((h as u32) << 16)
    }
    let input: Vec<u16> = (0..1000).map(|i| f32_to_bf16((i as f32 - 500.0) * 0.37)).collect();
    let mut b = KernelBuilder::new(format!("{}bf16", dynamo_llvm::unique_kernel_prefix()), vec![1000]);
    let x_arg = b.input("x", DType::BF16);
    let out_arg = b.output("out", DType::BF16);
    let x = b.load(x_arg, idx(0, &[1]));
    let k = b.const_f32(1.7);
    let y = b.binary(BinaryOp::Mul, x, k);
    b.store(out_arg, idx(0, &[1]), y);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let mut out = vec![0u16; 1000];
    unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for (i, (&xi, &got)) in input.iter().zip(&out).enumerate() {
        let want = f32_to_bf16(bf16_to_f32(xi) * 1.7);
        assert_eq!(got, want, "bf16 at {i}: {} * 1.7", bf16_to_f32(xi));
    }
    // float16: compare through f32 with half's precision.
    let mut b = KernelBuilder::new(format!("{}f16", dynamo_llvm::unique_kernel_prefix()), vec![4]);
    let x_arg = b.input("x", DType::F32);
    let out_arg = b.output("out", DType::F16);
    let x = b.load(x_arg, idx(0, &[1]));
    b.store(out_arg, idx(0, &[1]), x);
    let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
    let src = [1.0f32, -2.5, 65504.0, 1.0 / 3.0];
    let mut out = vec![0u16; 4];
    unsafe { jm.run(0, &[src.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    assert_eq!(out, vec![0x3c00, 0xc100, 0x7bff, 0x3555]);
}

/// Note [masked loads]: a 1-d max-pool (window 3, stride 2, padding 1) over each row of a 3x11
/// input: the window positions past either edge read through `masked_load` under `in_range`
/// and count as -inf. The input is negative (a masked-off position read as 0 would win) except
/// element 0, which is large (the address read where the mask is off must not leak in), and
/// holds a NaN (the fold keeps it).
#[test]
fn masked_window_max() {
    let (rows, len, out_len) = (3i64, 11i64, 6i64);
    let mut x: Vec<f32> = (0..rows * len).map(|i| -1.0 - ((i * 37) % 17) as f32).collect();
    x[0] = 1000.0;
    x[(len + 4) as usize] = f32::NAN;
    let mut b = KernelBuilder::new(format!("{}pool", dynamo_llvm::unique_kernel_prefix()), vec![rows, out_len]);
    let xa = b.input("x", DType::F32);
    let oa = b.output("out", DType::F32);
    let neg_inf = b.const_f32(f32::NEG_INFINITY);
    let mut acc = neg_inf;
    for k in 0..3 {
        let m = b.in_range(idx(k - 1, &[0, 2]), len);
        let v = b.masked_load(xa, idx(k - 1, &[len, 2]), m);
        let v = b.select(m, v, neg_inf);
        let gt = b.compare(CmpOp::Gt, v, acc);
        let nan = b.compare(CmpOp::Ne, v, v);
        let take = b.binary(BinaryOp::Or, gt, nan);
        acc = b.select(take, v, acc);
    }
    b.store(oa, idx(0, &[out_len, 1]), acc);
    let kernel = b.finish().unwrap();
    assert!(kernel.to_string().contains("masked_load"), "{kernel}");
    let jm = JitModule::compile(&[kernel]).unwrap();
    let mut out = vec![0f32; (rows * out_len) as usize];
    unsafe { jm.run(0, &[x.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    for r in 0..rows {
        for o in 0..out_len {
            let mut want = f32::NEG_INFINITY;
            for k in 0..3 {
                let p = o * 2 - 1 + k;
                if (0..len).contains(&p) {
                    let v = x[(r * len + p) as usize];
                    if v > want || v.is_nan() {
                        want = v;
                    }
                }
            }
            let got = out[(r * out_len + o) as usize];
            assert!(got == want || (got.is_nan() && want.is_nan()), "row {r} out {o}: want {want}, got {got}");
        }
    }
}

/// Note [float64 sums] (kernel.rs): a Sum of float64 values accumulates in float64 and has dtype
/// F64, in a row reduction (long enough that float32 sums would take pairwise blocks) and in a
/// column-shaped one (strided along the reduction, which must take the row loop); the sums of
/// squares of float32 inputs widened to float64 match a float64 reference exactly (each term
/// and each partial sum of these integers is exact in float64, so any order gives the same
/// bits), where a float32 accumulation would round. Max stays float32-only.
#[test]
fn float64_sums() {
    use dynamo_llvm::ReduceOp;
    for (rows, cols, column) in [(3i64, 9000i64, false), (4000, 5, true)] {
        let (ranges, red, x_strides) = if column { (vec![cols], vec![rows], vec![1, cols]) } else { (vec![rows], vec![cols], vec![cols, 1]) };
        let mut b = KernelBuilder::new_reduction(format!("{}sum64", dynamo_llvm::unique_kernel_prefix()), ranges.clone(), red);
        let x_arg = b.input("x", DType::F32);
        let out_arg = b.output("out", DType::F64);
        let x = b.load(x_arg, idx(0, &x_strides));
        let w = b.cast(DType::F64, x);
        let sq = b.binary(BinaryOp::Mul, w, w);
        let s = b.reduce(ReduceOp::Sum, sq);
        assert_eq!(b.dtype_of(s), DType::F64);
        b.store(out_arg, idx(0, &[1, 0]), s);
        let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
        // Integers up to 2^12: squares up to 2^24, sums up to 2^24 * 9000 < 2^53 (exact in f64,
        // not in f32).
        let xs: Vec<f32> = (0..rows * cols).map(|i| ((i * 2654435761) % 4096) as f32).collect();
        let mut out = vec![0f64; ranges[0] as usize];
        unsafe { jm.run(0, &[xs.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
        for (o, got) in out.iter().enumerate() {
            let want: f64 = if column {
                (0..rows as usize).map(|i| (xs[i * cols as usize + o] as f64).powi(2)).sum()
            } else {
                (0..cols as usize).map(|k| (xs[o * cols as usize + k] as f64).powi(2)).sum()
            };
            assert_eq!(*got, want, "{} sum {o}", if column { "column" } else { "row" });
        }
    }
    let mut b = KernelBuilder::new_reduction(format!("{}max64", dynamo_llvm::unique_kernel_prefix()), vec![2], vec![3]);
    let x_arg = b.input("x", DType::F64);
    let out_arg = b.output("out", DType::F32);
    let x = b.load(x_arg, idx(0, &[3, 1]));
    let m = b.reduce(ReduceOp::Max, x);
    b.store(out_arg, idx(0, &[1, 0]), m);
    assert!(b.finish().is_err(), "a float64 max must be refused");
}

/// Note [scatter stores] (kernel.rs): `out[idx[n], j] += g[n, j]` over a zero-filled output,
/// big enough that a plain kernel would run split across threads. Each row adds its values in
/// token order, so the result equals a sequential f32 reference bit for bit; rows never named
/// stay 0, and a row outside [0, rows) (here -1 and `rows`) adds nothing. The output starts
/// filled with garbage to show the kernel zeroes it.
#[test]
fn scatter_add_rows() {
    let (tokens, dim, rows) = (3000i64, 40i64, 37i64);
    let mut b = KernelBuilder::new(format!("{}scatter", dynamo_llvm::unique_kernel_prefix()), vec![tokens, dim]);
    let g_arg = b.input("g", DType::F32);
    let i_arg = b.input("idx", DType::I64);
    let out_arg = b.output("out", DType::F32);
    let v = b.load(g_arg, idx(0, &[dim, 1]));
    let row = b.load(i_arg, idx(0, &[1, 0]));
    b.scatter_add(out_arg, idx(0, &[0, 1]), v, row, dim, rows, rows * dim);
    let kernel = b.finish().unwrap();
    assert!(kernel.has_scatter() && kernel.to_string().contains("scatter_add"), "{kernel}");
    let jm = JitModule::compile(&[kernel]).unwrap();
    let g: Vec<f32> = (0..tokens * dim).map(|i| (((i * 2654435761) % 1000) as f32 - 500.0) * 1.37e-3).collect();
    // Rows 0..rows-5 only (the last five stay 0), and some out of range.
    let ix: Vec<i64> = (0..tokens).map(|n| if n % 97 == 5 { -1 } else if n % 89 == 3 { rows } else { (n * 7919) % (rows - 5) }).collect();
    let mut out = vec![f32::NAN; (rows * dim) as usize];
    unsafe { jm.run(0, &[g.as_ptr() as *mut u8, ix.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
    let mut want = vec![0f32; (rows * dim) as usize];
    for n in 0..tokens as usize {
        let r = ix[n];
        if (0..rows).contains(&r) {
            for j in 0..dim as usize {
                want[r as usize * dim as usize + j] += g[n * dim as usize + j];
            }
        }
    }
    for (k, (got, w)) in out.iter().zip(&want).enumerate() {
        assert_eq!(got.to_bits(), w.to_bits(), "element {k}: want {w}, got {got}");
    }
    // A scatter store cannot share its output with plain stores.
    let mut b = KernelBuilder::new("mixed", vec![4]);
    let x = b.input("x", DType::F32);
    let o = b.output("o", DType::F32);
    let v = b.load(x, idx(0, &[1]));
    let zero = b.const_int(DType::I64, 0);
    b.scatter_add(o, idx(0, &[0]), v, zero, 1, 1, 1);
    b.store(o, idx(0, &[1]), v);
    assert!(b.finish().is_err());
}

/// Note [kernel disk cache]: equal kernels get one link symbol. A stress test of threads that
/// compile, run and drop the same kernel at once (one thread's module unloaded while another
/// loads or runs the symbol): every compile succeeds and every run computes the right values.
#[test]
fn equal_kernels_compiled_and_dropped_on_many_threads() {
    let build = |name: String| {
        let mut b = KernelBuilder::new(name, vec![64]);
        let x_arg = b.input("x", DType::F32);
        let out_arg = b.output("out", DType::F32);
        let x = b.load(x_arg, idx(0, &[1]));
        let c = b.const_f32(3.0);
        let y = b.binary(BinaryOp::Mul, x, c);
        b.store(out_arg, idx(0, &[1]), y);
        b.finish().unwrap()
    };
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                let input: Vec<f32> = (0..64).map(|i| i as f32 + t as f32).collect();
                for _ in 0..25 {
                    let jm = JitModule::compile(&[build(format!("{}same", dynamo_llvm::unique_kernel_prefix()))]).unwrap();
                    let mut out = vec![0f32; 64];
                    unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
                    assert!(out.iter().zip(&input).all(|(o, x)| *o == x * 3.0));
                }
            });
        }
    });
}

/// Note [one routine per math function]: out = f(xr) where xr repeats each of 1000 values 37
/// times, over [1000, 37] from rows of 40 (columns 0..32 of a row run in the vector body, 32..37 in
/// the remainder) and over [37000]; each element must equal its row's first, bit for bit, and the
/// kernels must not call libm's scalar function.
#[test]
fn math_functions_take_one_routine_in_body_and_remainder() {
    let (m, n) = (1000i64, 37i64);
    let x: Vec<f32> = (0..m).map(|i| (i as f32 - 500.0) * 0.01731 + 0.25).collect();
    let ops: &[(&str, Option<UnaryOp>)] = &[
        ("exp", Some(UnaryOp::Exp)),
        ("tanh", Some(UnaryOp::Tanh)),
        ("erf", Some(UnaryOp::Erf)),
        ("sin", Some(UnaryOp::Sin)),
        ("log", Some(UnaryOp::Log)),
        ("expm1", Some(UnaryOp::Expm1)),
        ("log1p", Some(UnaryOp::Log1p)),
        ("sigmoid", Some(UnaryOp::Sigmoid)),
        ("pow", None),
    ];
    for &(name, op) in ops {
        for flat in [false, true] {
            let ranges = if flat { vec![m * n] } else { vec![m, n] };
            let mut b = KernelBuilder::new(format!("{}routine", dynamo_llvm::unique_kernel_prefix()), ranges);
            let xa = b.input("x", DType::F32);
            let oa = b.output("out", DType::F32);
            let lx = if flat { b.load(xa, idx(0, &[1])) } else { b.load(xa, idx(0, &[n + 3, 1])) };
            let y = match op {
                Some(op) => b.unary(op, lx),
                None => {
                    let e = b.const_f32(1.37);
                    b.binary(BinaryOp::Pow, lx, e)
                }
            };
            let out_strides = if flat { vec![1] } else { vec![n, 1] };
            b.store(oa, idx(0, &out_strides), y);
            let jm = JitModule::compile(&[b.finish().unwrap()]).unwrap();
            // Rows padded to n + 3 elements in the 2-d case, so the loops do not collapse.
            let row = if flat { n } else { n + 3 } as usize;
            let input: Vec<f32> = x.iter().flat_map(|&v| std::iter::repeat(v).take(row)).collect();
            let mut out = vec![0f32; (m * n) as usize];
            unsafe { jm.run(0, &[input.as_ptr() as *mut u8, out.as_mut_ptr() as *mut u8]) };
            for i in 0..m as usize {
                let row = &out[i * n as usize..(i + 1) * n as usize];
                for (j, v) in row.iter().enumerate() {
                    assert!(
                        v.to_bits() == row[0].to_bits(),
                        "{name} (flat {flat}) of {}: column {j} gives {v:e}, column 0 {:e}",
                        x[i],
                        row[0]
                    );
                }
            }
            if !dynamo_llvm::host_target_info().vector_isas.is_empty() {
                for libm in [format!("@{name}f("), format!("@{name}(")] {
                    assert!(!jm.llvm_ir.contains(&libm), "{name}: a call of libm's {libm} in:\n{}", jm.llvm_ir);
                }
            }
        }
    }
}
