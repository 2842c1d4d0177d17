//! Snapshot of the LLVM IR `emit` produces (before optimization) for one small fused kernel.
//! Accept changes with `cargo insta review` or `INSTA_UPDATE=always cargo test -p dynamo-llvm`.

use dynamo_llvm::{emit_ir, BinaryOp, DType, Index, KernelBuilder, UnaryOp};

#[test]
fn relu_add_broadcast_ir() {
    // out[i, j] = relu(x[i, j] + y[j]) over 4x8, y broadcast along dim 0.
    let mut b = KernelBuilder::new("snapshot_kernel", vec![4, 8]);
    let x = b.input("x", DType::F32);
    let y = b.input("y", DType::F32);
    let out = b.output("out", DType::F32);
    let lx = b.load(x, Index { offset: 0, strides: vec![8, 1] });
    let ly = b.load(y, Index { offset: 0, strides: vec![0, 1] });
    let s = b.binary(BinaryOp::Add, lx, ly);
    let r = b.unary(UnaryOp::Relu, s);
    b.store(out, Index { offset: 0, strides: vec![8, 1] }, r);
    let kernel = b.finish().unwrap();
    let ir = emit_ir(&[kernel.clone()]).unwrap();
    insta::assert_snapshot!("kernel_ir", kernel.to_string());
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[addr]")]}, {
        insta::assert_snapshot!("llvm_ir_unoptimized", ir);
    });
}

#[test]
fn softmax_reduction_ir() {
    // Row softmax over 3x5: max, then sum of exp(x - max), then the normalized store.
    use dynamo_llvm::ReduceOp;
    let mut b = KernelBuilder::new_reduction("snapshot_softmax", vec![3], vec![5]);
    let x = b.input("x", DType::F32);
    let out = b.output("out", DType::F32);
    let lx = b.load(x, Index { offset: 0, strides: vec![5, 1] });
    let m = b.reduce(ReduceOp::Max, lx);
    let d = b.binary(BinaryOp::Sub, lx, m);
    let e = b.unary(UnaryOp::Exp, d);
    let s = b.reduce(ReduceOp::Sum, e);
    let y = b.binary(BinaryOp::Div, e, s);
    b.store(out, Index { offset: 0, strides: vec![5, 1] }, y);
    let kernel = b.finish().unwrap();
    let ir = emit_ir(&[kernel.clone()]).unwrap();
    insta::assert_snapshot!("softmax_kernel_ir", kernel.to_string());
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[addr]")]}, {
        insta::assert_snapshot!("softmax_llvm_ir_unoptimized", ir);
    });
}

#[test]
fn column_sum_with_inner_store_ir() {
    // sum[j] = sum_i x[i, j] over a row-major 4x8 x, and y[i, j] = x[i, j] * 2 stored inside the
    // reduction loop: the column schedule (Note [column reductions]), points innermost.
    use dynamo_llvm::ReduceOp;
    let mut b = KernelBuilder::new_reduction("snapshot_colsum", vec![8], vec![4]);
    let x = b.input("x", DType::F32);
    let sum = b.output("sum", DType::F32);
    let y = b.output("y", DType::F32);
    let lx = b.load(x, Index { offset: 0, strides: vec![1, 8] });
    let s = b.reduce(ReduceOp::Sum, lx);
    b.store(sum, Index { offset: 0, strides: vec![1, 0] }, s);
    let two = b.const_f32(2.0);
    let d = b.binary(BinaryOp::Mul, lx, two);
    b.store(y, Index { offset: 0, strides: vec![1, 8] }, d);
    let kernel = b.finish().unwrap();
    let ir = emit_ir(&[kernel.clone()]).unwrap();
    insta::assert_snapshot!("colsum_kernel_ir", kernel.to_string());
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[addr]")]}, {
        insta::assert_snapshot!("colsum_llvm_ir_unoptimized", ir);
    });
}
