//! Codegen: each scheduled kernel group -> one `dynamo_llvm::Kernel`, all JIT-compiled in one
//! module. This file is the only client of `dynamo-llvm`.
//!
//! Invariants:
//! - Inside a group, every Pointwise that is unrealized or a group member is inlined (memoized
//!   per buffer and index, and hash-consed by `KernelBuilder`, so shared values are computed once
//!   per point); everything else is loaded from its buffer with its layout's strides.
//! - Each member is stored once, at its layout's strides, in its own dtype, when something outside
//!   the kernel needs it (graph output, fallback argument, another kernel's load).
//! - Kernel argument `i` of kernel `k` is `KernelPlan::args[i]` (buffer, is_output).

use std::collections::{BTreeSet, HashMap, HashSet};

use dynamo_llvm as llvm;

use super::ir::{Affine, BinaryOp, BufferId, BufferKind, CmpOp, DType, GraphIr, OpsHandler, OpsValue, ReductionType, UnaryOp};
use super::scheduler::{drop_unit_vars, member_index, reduction_identity_index, KernelGroup, Schedule};

/// One compiled kernel, as the runtime needs it.
#[derive(Clone, Debug)]
pub struct KernelPlan {
    pub name: String,
    /// Buffers bound to the kernel's pointer arguments, in order; `true` marks outputs.
    pub args: Vec<(BufferId, bool)>,
    /// Kernel IR dump (before legalization).
    pub kernel_ir: String,
}

/// Kernels and the JIT module holding their code.
pub struct CodegenResult {
    pub jit: llvm::JitModule,
    pub kernels: Vec<KernelPlan>,
}

/// The kernel IR element type that stores `d`.
pub(crate) fn kernel_dtype(d: DType) -> llvm::DType {
    match d {
        DType::Bool => llvm::DType::Bool,
        DType::BF16 => llvm::DType::BF16,
        DType::F16 => llvm::DType::F16,
        DType::F64 => llvm::DType::F64,
        DType::I64 => llvm::DType::I64,
        DType::I32 => llvm::DType::I32,
        _ => llvm::DType::F32,
    }
}

/// The `OpsHandler` that builds kernel IR; `OpsValue(n)` is `ExprId(n)`.
struct KernelOps<'a> {
    ir: &'a GraphIr,
    members: HashSet<BufferId>,
    kb: llvm::KernelBuilder,
    input_args: HashMap<BufferId, u32>,
    args: Vec<(BufferId, bool)>,
    /// Values by buffer, index and the mask active when they were read (Note [masked loads]).
    memo: HashMap<(BufferId, Vec<Affine>, Option<OpsValue>), OpsValue>,
    /// The mask of [`OpsHandler::set_mask`]: loads that may leave their buffer read through it.
    mask: Option<OpsValue>,
    op_names: BTreeSet<&'static str>,
    error: Option<String>,
    /// For a reduction group: input dim -> kernel loop variable (outer dims keep their number;
    /// reduced dims map to the reduction variables after them).
    space_vars: Option<Vec<usize>>,
}

impl KernelOps<'_> {
    /// The kernel argument reading buffer `buf` (of `dtype`) from memory, added on first use.
    fn input_arg(&mut self, buf: BufferId, dtype: DType) -> u32 {
        if let Some(a) = self.input_args.get(&buf) {
            return *a;
        }
        let a = self.kb.input(buf.to_string(), kernel_dtype(dtype));
        self.input_args.insert(buf, a);
        self.args.push((buf, false));
        a
    }
}

/// The element offset `sum(index[d] * strides[d])` over the kernel's `n_vars` loop variables,
/// leaving out dim `skip` (an indirect load's data-dependent dim).
fn flat_index(index: &[Affine], strides: &[i64], skip: Option<usize>, n_vars: usize) -> llvm::Index {
    let mut flat = Affine::constant(0, n_vars);
    for (d, a) in index.iter().enumerate() {
        if Some(d) != skip {
            flat = a.scaled_add(strides[d], &flat);
        }
    }
    llvm::Index { offset: flat.offset, strides: flat.coeffs }
}

fn ev(id: llvm::ExprId) -> OpsValue {
    OpsValue(id.0)
}
fn ex(v: OpsValue) -> llvm::ExprId {
    llvm::ExprId(v.0)
}

impl OpsHandler for KernelOps<'_> {
    fn in_range(&mut self, index: &Affine, size: i64) -> OpsValue {
        ev(self.kb.in_range(llvm::Index { offset: index.offset, strides: index.coeffs.clone() }, size))
    }

    fn set_mask(&mut self, mask: Option<OpsValue>) -> Option<OpsValue> {
        std::mem::replace(&mut self.mask, mask)
    }

    fn load(&mut self, buf: BufferId, index: &[Affine]) -> OpsValue {
        let key = (buf, index.to_vec(), self.mask);
        if let Some(v) = self.memo.get(&key) {
            return *v;
        }
        let b = self.ir.buffer(buf);
        let v = match &b.kind {
            BufferKind::Pointwise(pw) if !pw.realized || self.members.contains(&buf) => {
                let inner = pw.inner_fn.clone();
                inner(self, index)
            }
            BufferKind::Reduction(r) if self.members.contains(&buf) => {
                // The accumulated value at this kernel's own point; see scheduler::reduction_reads_ok.
                let Some(vars) = self.space_vars.clone() else {
                    self.error = Some(format!("{buf} is a reduction inside a pointwise kernel"));
                    return ev(self.kb.const_f32(0.0));
                };
                let n_vars = self.kb.n_dims();
                let own: Vec<Affine> = reduction_identity_index(r, r.input_sizes.len())
                    .iter()
                    .map(|a| remap_vars(a, &vars, n_vars))
                    .collect();
                let var_ranges: Vec<i64> = {
                    let mut v = vec![1i64; n_vars];
                    for (d, &var) in vars.iter().enumerate() {
                        v[var] = r.input_sizes[d];
                    }
                    v
                };
                if own != drop_unit_vars(index, &var_ranges) {
                    self.error = Some(format!("{buf} read at another point than its own"));
                    return ev(self.kb.const_f32(0.0));
                }
                let full: Vec<Affine> = (0..r.input_sizes.len()).map(|d| Affine::var(vars[d], n_vars)).collect();
                let inner = r.inner_fn.clone();
                let v = inner(self, &full);
                // Note [float64 sums] (llvm/src/kernel.rs): a float64 sum buffer accumulates
                // in float64; every other reduction in float32.
                let wide = r.op.is_sum() && b.layout.as_ref().is_some_and(|l| l.dtype == DType::F64);
                let v = self.to_dtype(v, if wide { DType::F64 } else { DType::F32 });
                let op = match r.op {
                    ReductionType::Sum => llvm::ReduceOp::Sum,
                    ReductionType::OrderedSum => llvm::ReduceOp::OrderedSum,
                    ReductionType::Max => llvm::ReduceOp::Max,
                    ReductionType::Min => llvm::ReduceOp::Min,
                };
                self.op_names.insert(match r.op {
                    ReductionType::Sum | ReductionType::OrderedSum => "sum",
                    ReductionType::Max => "amax",
                    ReductionType::Min => "amin",
                });
                let acc = ev(self.kb.reduce(op, ex(v)));
                // The buffer holds the result in its own dtype: a fused reader of a bfloat16 or
                // float16 reduction sees the accumulator rounded once, as eager's reader sees
                // the stored half value (not the float32 sum).
                match b.layout.as_ref().map(|l| l.dtype) {
                    Some(d) if d.is_half() => self.to_dtype(acc, d),
                    _ => acc,
                }
            }
            _ => {
                let Some(layout) = b.layout.as_ref() else {
                    self.error = Some(format!("{buf} has no layout"));
                    return ev(self.kb.const_f32(0.0));
                };
                let arg = self.input_arg(buf, layout.dtype);
                let flat = flat_index(index, &layout.strides, None, self.kb.n_dims());
                // Note [masked loads]: under a mask, a load whose index may leave the buffer
                // (a window position past the edge) reads through the mask; loads that stay
                // inside (a batch norm's per-channel factors) are plain and shared.
                let ranges = self.kb.all_ranges();
                let may_leave = index.iter().zip(&layout.sizes).any(|(a, &size)| {
                    let (mut lo, mut hi) = (a.offset, a.offset);
                    for (c, r) in a.coeffs.iter().zip(&ranges) {
                        let end = c * (r - 1).max(0);
                        lo += end.min(0);
                        hi += end.max(0);
                    }
                    lo < 0 || hi >= size
                });
                match self.mask {
                    Some(m) if may_leave => ev(self.kb.masked_load(arg, flat, ex(m))),
                    _ => ev(self.kb.load(arg, flat)),
                }
            }
        };
        self.memo.insert(key, v);
        v
    }

    fn load_indirect(&mut self, buf: BufferId, index: &[Affine], dim: usize, row: OpsValue) -> OpsValue {
        let b = self.ir.buffer(buf);
        let inlined = self.members.contains(&buf) || matches!(&b.kind, BufferKind::Pointwise(pw) if !pw.realized);
        let (Some(layout), false) = (b.layout.as_ref(), inlined) else {
            self.error = Some(format!("{buf} is read at data-dependent rows but is not in memory"));
            return ev(self.kb.const_f32(0.0));
        };
        let arg = self.input_arg(buf, layout.dtype);
        let flat = flat_index(index, &layout.strides, Some(dim), self.kb.n_dims());
        ev(self.kb.indirect_load(arg, flat, ex(row), layout.strides[dim], layout.sizes[dim]))
    }

    fn constant(&mut self, value: f64, dtype: DType) -> OpsValue {
        ev(self.kb.const_of(kernel_dtype(dtype.compute()), value))
    }

    fn unary(&mut self, op: UnaryOp, a: OpsValue) -> OpsValue {
        use llvm::UnaryOp as L;
        let (lop, name) = match op {
            UnaryOp::Neg => (L::Neg, "neg"),
            UnaryOp::Abs => (L::Abs, "abs"),
            UnaryOp::Relu => (L::Relu, "relu"),
            UnaryOp::Sigmoid => (L::Sigmoid, "sigmoid"),
            UnaryOp::Tanh => (L::Tanh, "tanh"),
            UnaryOp::Exp => (L::Exp, "exp"),
            UnaryOp::Log => (L::Log, "log"),
            UnaryOp::Sqrt => (L::Sqrt, "sqrt"),
            UnaryOp::Sin => (L::Sin, "sin"),
            UnaryOp::Cos => (L::Cos, "cos"),
            UnaryOp::Reciprocal => (L::Reciprocal, "reciprocal"),
            UnaryOp::Floor => (L::Floor, "floor"),
            UnaryOp::Ceil => (L::Ceil, "ceil"),
            UnaryOp::LogicalNot => (L::Not, "logical_not"),
            UnaryOp::Erf => (L::Erf, "erf"),
            UnaryOp::Log1p => (L::Log1p, "log1p"),
            UnaryOp::Expm1 => (L::Expm1, "expm1"),
            UnaryOp::Rsqrt => (L::Rsqrt, "rsqrt"),
            UnaryOp::RoundBF16 => (L::RoundBF16, "to_bf16"),
            UnaryOp::RoundF16 => (L::RoundF16, "to_f16"),
        };
        self.op_names.insert(name);
        ev(self.kb.unary(lop, ex(a)))
    }

    fn binary(&mut self, op: BinaryOp, a: OpsValue, b: OpsValue) -> OpsValue {
        use llvm::BinaryOp as L;
        let (lop, name) = match op {
            BinaryOp::Add => (L::Add, "add"),
            BinaryOp::Sub => (L::Sub, "sub"),
            BinaryOp::Mul => (L::Mul, "mul"),
            BinaryOp::Div => (L::Div, "div"),
            BinaryOp::Maximum => (L::Maximum, "maximum"),
            BinaryOp::Minimum => (L::Minimum, "minimum"),
            BinaryOp::Pow => (L::Pow, "pow"),
            BinaryOp::LogicalAnd => (L::And, "logical_and"),
            BinaryOp::LogicalOr => (L::Or, "logical_or"),
        };
        self.op_names.insert(name);
        ev(self.kb.binary(lop, ex(a), ex(b)))
    }

    fn compare(&mut self, op: CmpOp, a: OpsValue, b: OpsValue) -> OpsValue {
        use llvm::CmpOp as L;
        let (lop, name) = match op {
            CmpOp::Eq => (L::Eq, "eq"),
            CmpOp::Ne => (L::Ne, "ne"),
            CmpOp::Lt => (L::Lt, "lt"),
            CmpOp::Le => (L::Le, "le"),
            CmpOp::Gt => (L::Gt, "gt"),
            CmpOp::Ge => (L::Ge, "ge"),
        };
        self.op_names.insert(name);
        ev(self.kb.compare(lop, ex(a), ex(b)))
    }

    fn where_(&mut self, cond: OpsValue, a: OpsValue, b: OpsValue) -> OpsValue {
        self.op_names.insert("where");
        ev(self.kb.select(ex(cond), ex(a), ex(b)))
    }

    fn to_dtype(&mut self, a: OpsValue, dtype: DType) -> OpsValue {
        // Half-precision values live in float32 registers, rounded to the half type's precision
        // wherever torch would hold them in that type.
        let v = self.kb.cast(kernel_dtype(dtype.compute()), ex(a));
        ev(match dtype {
            DType::BF16 => self.kb.unary(llvm::UnaryOp::RoundBF16, v),
            DType::F16 => self.kb.unary(llvm::UnaryOp::RoundF16, v),
            _ => v,
        })
    }
}

/// `a` (over a reduction space's input dims) rewritten over kernel variables: input dim `d` is
/// variable `vars[d]` of `n_vars`.
fn remap_vars(a: &Affine, vars: &[usize], n_vars: usize) -> Affine {
    let mut out = Affine::constant(a.offset, n_vars);
    for (d, &c) in a.coeffs.iter().enumerate() {
        out.coeffs[vars[d]] += c;
    }
    out
}

/// The kernel IR of one group. With `stored`, members in it (or in `must_store`) are stored;
/// without, every member is evaluated and nothing is stored (the probe pass that finds which
/// buffers kernels read from memory).
fn build_group(
    ir: &GraphIr,
    grp: &KernelGroup,
    name: &str,
    stored: Option<&HashSet<BufferId>>,
) -> Result<(llvm::Kernel, Vec<(BufferId, bool)>, BTreeSet<&'static str>), String> {
    let (kb, space_vars) = match &grp.reduction {
        None => (llvm::KernelBuilder::new(name, grp.ranges.clone()), None),
        Some(space) => {
            let n_in = space.input_sizes.len();
            let mut vars: Vec<usize> = (0..n_in).collect();
            for (k, &d) in space.reduced.iter().enumerate() {
                vars[d] = n_in + k;
            }
            let red: Vec<i64> = space.reduced.iter().map(|&d| space.input_sizes[d]).collect();
            (llvm::KernelBuilder::new_reduction(name, grp.ranges.clone(), red), Some(vars))
        }
    };
    let mut h = KernelOps {
        ir,
        members: grp.members.iter().copied().collect(),
        kb,
        input_args: HashMap::new(),
        args: Vec::new(),
        memo: HashMap::new(),
        mask: None,
        op_names: BTreeSet::new(),
        error: None,
        space_vars: space_vars.clone(),
    };
    let n_vars = h.kb.n_dims();
    if let [m] = grp.members.as_slice() {
        if let BufferKind::Scatter(sc) = &ir.buffer(*m).kind {
            // Note [scatter stores]: `out[row, i<lead>...] += value` over the group's ranges.
            let layout = ir.buffer(*m).layout.clone().ok_or_else(|| format!("{m} has no layout"))?;
            let idx: Vec<Affine> = (0..n_vars).map(|d| Affine::var(d, n_vars)).collect();
            let row = (sc.row_fn.clone())(&mut h, &idx);
            let v = (sc.inner_fn.clone())(&mut h, &idx);
            h.op_names.insert("scatter_add");
            if let Some(err) = h.error {
                return Err(err);
            }
            if stored.is_none() {
                return Ok((llvm::KernelBuilder::new(name, vec![]).finish().map_err(|e| e.join("; "))?, h.args, h.op_names));
            }
            let v = h.to_dtype(v, layout.dtype.compute());
            let out = h.kb.output(m.to_string(), kernel_dtype(layout.dtype));
            h.args.push((*m, true));
            let strides: Vec<i64> = (0..n_vars).map(|d| if d < sc.lead { 0 } else { layout.strides[1 + d - sc.lead] }).collect();
            let numel: i64 = layout.sizes.iter().product();
            h.kb.scatter_add(out, llvm::Index { offset: 0, strides }, ex(v), ex(row), layout.strides[0], sc.rows, numel);
            let kernel = h.kb.finish().map_err(|errs| errs.join("; "))?;
            return Ok((kernel, h.args, h.op_names));
        }
    }
    for m in &grp.members {
        let wanted = stored.is_none_or(|s| ir.must_store.contains(m) || s.contains(m));
        if !wanted {
            tracing::debug!(target: "inductor::output_code", "{m} is only read inside its kernel; not stored");
            continue;
        }
        let b = ir.buffer(*m);
        let layout = b.layout.clone().ok_or_else(|| format!("{m} has no layout"))?;
        // The member's own index over the kernel variables, and its store index.
        let (index, store_strides, dtype) = match (&b.kind, &space_vars) {
            (BufferKind::Pointwise(pw), None) => {
                let idx: Vec<Affine> = (0..n_vars).map(|d| Affine::var(d, n_vars)).collect();
                (idx, layout.strides.clone(), pw.dtype)
            }
            (BufferKind::Pointwise(pw), Some(vars)) => {
                let space = grp.reduction.as_ref().expect("space_vars only for reduction groups");
                let placement = member_index(space, &pw.ranges).ok_or_else(|| format!("{m} does not fit its kernel"))?;
                let mut idx = Vec::with_capacity(placement.len());
                let mut st = vec![0i64; n_vars];
                for (k, p) in placement.iter().enumerate() {
                    match p {
                        Some(d) => {
                            idx.push(Affine::var(vars[*d], n_vars));
                            st[vars[*d]] += layout.strides[k];
                        }
                        None => idx.push(Affine::constant(0, n_vars)),
                    }
                }
                (idx, st, pw.dtype)
            }
            (BufferKind::Reduction(r), Some(vars)) => {
                let own = reduction_identity_index(r, r.input_sizes.len());
                let idx: Vec<Affine> = own.iter().map(|a| remap_vars(a, vars, n_vars)).collect();
                let mut st = vec![0i64; n_vars];
                for (k, d) in r.out_dims().into_iter().enumerate() {
                    if !r.reduced.contains(&d) {
                        st[vars[d]] += layout.strides[k];
                    }
                }
                (idx, st, layout.dtype)
            }
            _ => return Err(format!("{m} does not fit its kernel")),
        };
        let v = h.load(*m, &index);
        if stored.is_none() {
            continue;
        }
        let v = h.to_dtype(v, dtype);
        let out = h.kb.output(m.to_string(), kernel_dtype(dtype));
        h.args.push((*m, true));
        h.kb.store(out, llvm::Index { offset: 0, strides: store_strides }, ex(v));
    }
    if let Some(err) = h.error {
        return Err(err);
    }
    let kernel = if stored.is_some() { h.kb.finish().map_err(|errs| errs.join("; "))? } else { llvm::KernelBuilder::new(name, vec![]).finish().map_err(|e| e.join("; "))? };
    Ok((kernel, h.args, h.op_names))
}

/// Builds one kernel per group and JIT-compiles them together.
pub fn codegen(ir: &GraphIr, sched: &Schedule) -> Result<CodegenResult, String> {
    let (kernels, plans) = build_kernels(ir, sched)?;
    let jit = llvm::JitModule::compile(&kernels).map_err(|e| e.to_string())?;
    tracing::debug!(
        target: "inductor::output_code",
        "compile times {:?}, {} of {} kernels from the cache, {} from the disk cache",
        jit.times,
        jit.cache_hits,
        kernels.len(),
        jit.disk_hits
    );
    super::counters::KERNEL_CACHE_HITS.fetch_add(jit.cache_hits as u64, std::sync::atomic::Ordering::Relaxed);
    super::counters::KERNEL_DISK_HITS.fetch_add(jit.disk_hits as u64, std::sync::atomic::Ordering::Relaxed);
    tracing::trace!(target: "llvm::ir", "{}", jit.llvm_ir);
    Ok(CodegenResult { jit, kernels: plans })
}

/// The kernel IR of every group, in group order, and the runtime's view of each (shared by the
/// CPU JIT and the GPU path, `cuda.rs`).
pub(super) fn build_kernels(ir: &GraphIr, sched: &Schedule) -> Result<(Vec<llvm::Kernel>, Vec<KernelPlan>), String> {
    // Pass 1: which realized buffers does some kernel load from memory? A member realized only
    // to bound inlining, and read only inside its own group, needs no store.
    let mut loaded: HashSet<BufferId> = HashSet::new();
    for grp in &sched.groups {
        let (_, args, _) = build_group(ir, grp, "probe", None)?;
        loaded.extend(args.iter().map(|(b, _)| *b));
    }
    let prefix = llvm::unique_kernel_prefix();
    let mut kernels = Vec::new();
    let mut plans = Vec::new();
    for (gi, grp) in sched.groups.iter().enumerate() {
        let (mut kernel, args, op_names) = build_group(ir, grp, "pending", Some(&loaded))?;
        let mut ops: Vec<&str> = op_names.iter().copied().collect();
        ops.truncate(6);
        let name = format!("{prefix}fused_{}_{gi}", ops.join("_"));
        kernel.name = name.clone();
        tracing::debug!(target: "inductor::output_code", "{kernel}");
        plans.push(KernelPlan { name, args, kernel_ir: kernel.to_string() });
        kernels.push(kernel);
    }
    Ok((kernels, plans))
}
