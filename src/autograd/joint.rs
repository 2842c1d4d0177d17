//! The joint forward+backward graph (AOTAutograd's "joint graph"): the imported, functionalized
//! forward graph followed by tangent placeholders and the backward nodes that reverse-mode
//! differentiation appends, one derivative rule per forward node ([`super::rules`]).
//!
//! Invariants:
//! - Nodes `[0, n_fwd)` are the forward graph exactly as imported and functionalized; tangents
//!   follow (one placeholder per differentiable output), then backward nodes. Every `FxArg::Node`
//!   still refers to an earlier node, so the joint graph is topologically ordered.
//! - Backward nodes call torch functions, tensor methods or `torch.ops.aten` overloads (side-table
//!   entries resolved by path); they never mutate anything.
//! - A forward node that receives a gradient and has no rule makes the whole build fail with
//!   [`JointError::NoRule`] naming the op: the caller runs the graph eagerly (it never guesses).

use std::collections::HashMap;
use std::fmt::Write as _;

use pyo3::prelude::*;

use crate::inductor::fx_import::{FxArg, FxGraph, FxNode, FxOp};

/// Why no joint graph was built.
#[derive(Debug, thiserror::Error)]
pub enum JointError {
    /// A node on a differentiable path has no derivative rule (or its arguments are outside the
    /// rule's supported subset).
    #[error("no derivative rule for {0}")]
    NoRule(String),
    /// Something else the AOT path does not handle (aliasing outputs, mutated inputs that
    /// require grad, ...).
    #[error("{0}")]
    Unsupported(String),
    #[error("python error while building the joint graph: {0}")]
    Python(#[from] PyErr),
}

/// A forward graph with its backward appended.
pub struct JointGraph {
    pub g: FxGraph,
    /// Number of forward nodes (the output node included).
    pub n_fwd: usize,
    /// The forward graph's inputs: placeholders in position order, then `get_attr` nodes (passed
    /// as extra inputs by the runtime).
    pub inputs: Vec<usize>,
    /// Whether each input requires grad.
    pub input_requires_grad: Vec<bool>,
    /// The forward graph's results (the items of the output tuple).
    pub outputs: Vec<FxArg>,
    /// Per output: its tangent placeholder when the output is a differentiable tensor.
    pub tangents: Vec<Option<usize>>,
    /// Per input: the node holding its gradient (None: no gradient, eager leaves `.grad` alone).
    pub input_grads: Vec<Option<usize>>,
    /// Whether each forward node requires grad.
    pub requires_grad: Vec<bool>,
    /// Backward-region nodes that rules made as forward values (Note [forward-side statistics]
    /// in partition.rs): they read only forward values and each other, and carry meta.
    pub forward_side: Vec<usize>,
}

/// Emits backward nodes into the joint graph. Rules use it to call torch.
pub struct Builder<'py> {
    pub py: Python<'py>,
    pub g: FxGraph,
    targets: HashMap<&'static str, usize>,
    pub requires_grad: Vec<bool>,
    /// See [`JointGraph::forward_side`].
    pub forward_side: Vec<usize>,
}

/// `FxArg::Node(i)`.
pub fn node(i: usize) -> FxArg {
    FxArg::Node(i)
}

/// A list of ints as an fx argument.
pub fn ints(v: &[i64]) -> FxArg {
    FxArg::List(v.iter().map(|&x| FxArg::Int(x)).collect())
}

/// Resolves a dotted path (`torch.ops.aten.convolution_backward.default`,
/// `dynamo.aot.getitem_backward`) to a Python object: the longest importable module prefix,
/// then attributes.
pub fn resolve<'py>(py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut last_err = None;
    for k in (1..parts.len()).rev() {
        match py.import(parts[..k].join(".").as_str()) {
            Ok(m) => {
                let mut obj = m.into_any();
                for p in &parts[k..] {
                    obj = obj.getattr(*p)?;
                }
                return Ok(obj);
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("cannot resolve {path}"))))
}

impl<'py> Builder<'py> {
    fn side(&mut self, path: &'static str) -> PyResult<usize> {
        if let Some(&i) = self.targets.get(path) {
            return Ok(i);
        }
        let obj = resolve(self.py, path)?;
        self.g.side_table.push(obj.unbind());
        let i = self.g.side_table.len() - 1;
        self.targets.insert(path, i);
        Ok(i)
    }

    fn push(&mut self, op: FxOp, name: &str, args: Vec<FxArg>, kwargs: Vec<(&str, FxArg)>) -> usize {
        let idx = self.g.nodes.len();
        self.g.nodes.push(FxNode {
            name: format!("bw{idx}"),
            op,
            canonical: None,
            target_name: name.to_string(),
            args,
            kwargs: kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            meta: None,
            users: Vec::new(),
            inplace: false,
            recompute: false,
        });
        self.requires_grad.push(false);
        idx
    }

    /// A Python object by dotted path (`torch.float32`) as a constant argument.
    pub fn object(&mut self, path: &'static str) -> PyResult<FxArg> {
        Ok(FxArg::Py(self.side(path)?))
    }

    /// Appends `path(*args, **kwargs)` (a torch function or an aten overload).
    pub fn call(&mut self, path: &'static str, args: Vec<FxArg>, kwargs: Vec<(&str, FxArg)>) -> PyResult<usize> {
        let target = self.side(path)?;
        Ok(self.push(FxOp::CallFunction { target }, path, args, kwargs))
    }

    /// Appends `args[0].name(*args[1:], **kwargs)`.
    pub fn method(&mut self, name: &str, args: Vec<FxArg>, kwargs: Vec<(&str, FxArg)>) -> usize {
        self.push(FxOp::CallMethod { name: name.to_string() }, name, args, kwargs)
    }

    /// Appends `path(*args)`, a value of the forward (Note [forward-side statistics] in
    /// partition.rs): every node `args` names is a forward value or another forward-side node,
    /// `canonical` is the op's name in the lowering table (so the partitioner knows what it may
    /// recompute) and `meta` its value's layout.
    pub fn forward_call(
        &mut self,
        path: &'static str,
        canonical: &'static str,
        args: Vec<FxArg>,
        meta: crate::inductor::fx_import::TensorMeta,
    ) -> PyResult<usize> {
        let i = self.call(path, args, vec![])?;
        self.g.nodes[i].canonical = Some(canonical);
        self.g.nodes[i].meta = Some(meta);
        self.forward_side.push(i);
        Ok(i)
    }

    /// `operator.getitem(x, i)` for multi-output aten ops.
    pub fn getitem(&mut self, x: usize, i: i64) -> PyResult<usize> {
        self.call("operator.getitem", vec![node(x), FxArg::Int(i)], vec![])
    }

    pub fn mul(&mut self, a: FxArg, b: FxArg) -> PyResult<usize> {
        self.call("torch.mul", vec![a, b], vec![])
    }
    pub fn add(&mut self, a: FxArg, b: FxArg) -> PyResult<usize> {
        self.call("torch.add", vec![a, b], vec![])
    }
    pub fn sub(&mut self, a: FxArg, b: FxArg) -> PyResult<usize> {
        self.call("torch.sub", vec![a, b], vec![])
    }
    pub fn div(&mut self, a: FxArg, b: FxArg) -> PyResult<usize> {
        self.call("torch.div", vec![a, b], vec![])
    }
    pub fn neg(&mut self, a: FxArg) -> PyResult<usize> {
        self.call("torch.neg", vec![a], vec![])
    }
    pub fn matmul(&mut self, a: FxArg, b: FxArg) -> PyResult<usize> {
        self.call("torch.matmul", vec![a, b], vec![])
    }
    /// `x.transpose(-2, -1)` (the matrix transpose of a batch).
    pub fn mt(&mut self, x: FxArg) -> usize {
        self.method("transpose", vec![x, FxArg::Int(-2), FxArg::Int(-1)], vec![])
    }
    pub fn reshape(&mut self, x: usize, shape: &[i64]) -> usize {
        self.method("reshape", vec![node(x), ints(shape)], vec![])
    }
    pub fn expand(&mut self, x: usize, shape: &[i64]) -> usize {
        self.method("expand", vec![node(x), ints(shape)], vec![])
    }
    /// `torch.sum(x, dims, keepdim)`.
    pub fn sum_dims(&mut self, x: usize, dims: &[i64], keepdim: bool) -> PyResult<usize> {
        self.call("torch.sum", vec![node(x), ints(dims), FxArg::Bool(keepdim)], vec![])
    }

    /// Sums `g` (with sizes `from`, the broadcast result) down to `to`, the sizes of an operand
    /// that was broadcast: leading dims and dims of size 1 in `to` are summed (the reverse of
    /// broadcasting; derivatives.yaml's `handle_r_to_c`/`sum_to` in `at::sum_to`).
    pub fn sum_to(&mut self, g: usize, from: &[i64], to: &[i64]) -> PyResult<usize> {
        if from == to {
            return Ok(g);
        }
        let lead = from.len().saturating_sub(to.len());
        let mut dims: Vec<i64> = (0..lead as i64).collect();
        for (k, &s) in to.iter().enumerate() {
            if s == 1 && from.get(lead + k).is_some_and(|&f| f != 1) {
                dims.push((lead + k) as i64);
            }
        }
        if dims.len() == lead && lead > 0 {
            // Only the leading (broadcast) dims: summed away without keepdim, so the result
            // has `to`'s sizes and needs no reshape (a bias gradient: one kernel, not a kernel
            // and a view fallback).
            return self.sum_dims(g, &dims, false);
        }
        let s = if dims.is_empty() { g } else { self.sum_dims(g, &dims, true)? };
        Ok(if lead > 0 || to.len() != from.len() { self.reshape(s, to) } else { s })
    }

    /// Sizes of node `i`'s tensor value.
    pub fn sizes(&self, i: usize) -> Result<Vec<i64>, JointError> {
        self.g.nodes[i]
            .meta
            .as_ref()
            .map(|m| m.layout.sizes.clone())
            .ok_or_else(|| JointError::NoRule(format!("{} (no static shape)", self.g.nodes[i].name)))
    }

    /// True when `a` is a node whose value requires grad.
    pub fn wants(&self, a: &FxArg) -> bool {
        matches!(a, FxArg::Node(j) if self.requires_grad[*j])
    }
}

/// Positional argument `pos` or keyword `name` of `n`.
pub fn arg<'a>(n: &'a FxNode, pos: usize, name: &str) -> Option<&'a FxArg> {
    n.args.get(pos).or_else(|| n.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v))
}

/// The rule name of a node: its canonical lowering name, or the name of a family the rules
/// know (`linear`, `matmul`, `conv2d`, ...), or None.
pub fn op_key(n: &FxNode) -> Option<&'static str> {
    if let Some(c) = n.canonical {
        return Some(c);
    }
    let key = match &n.op {
        FxOp::CallFunction { .. } => match n.target_name.as_str() {
            "torch._C._nn.linear" | "torch.nn.functional.linear" => "linear",
            "torch.matmul" | "_operator.matmul" => "matmul",
            "torch.mm" => "mm",
            "torch.bmm" => "bmm",
            "torch.mv" => "mv",
            "torch.dot" => "dot",
            "torch.vdot" => "vdot",
            "torch.addmm" => "addmm",
            "torch.conv2d" | "torch.nn.functional.conv2d" => "conv2d",
            "torch.conv1d" | "torch.nn.functional.conv1d" => "conv1d",
            "torch.nn.functional.embedding" => "embedding",
            "torch.nn.functional.cross_entropy" => "cross_entropy",
            "torch.nn.functional.nll_loss" => "nll_loss",
            "torch.nn.functional.mse_loss" => "mse_loss",
            "torch.nn.functional.max_pool2d" | "torch.max_pool2d" => "max_pool2d",
            "torch.split" => "split",
            "torch._C._nn.scaled_dot_product_attention" | "torch.nn.functional.scaled_dot_product_attention" => "sdpa",
            "torch._ops.aten._scaled_dot_product_flash_attention_for_cpu.default" => "sdpa_flash_cpu",
            "dynamo._functional.sdpa_efficient" => "sdpa_efficient",
            "torch.cat" | "torch.concat" | "torch.concatenate" => "cat",
            "torch.chunk" => "chunk",
            "torch._C._nn.gelu" | "torch.nn.functional.gelu" => "gelu",
            "torch.stack" => "stack",
            "torch.index_select" => "index_select",
            "torch.cumsum" => "cumsum",
            "torch.flip" => "flip",
            "torch.roll" => "roll",
            "torch.tril" => "tril",
            "torch.triu" => "triu",
            "torch.logsumexp" => "logsumexp",
            "torch.masked_fill" => "masked_fill",
            "torch.round" | "torch.sign" | "torch.trunc" => "step",
            "dynamo._functional.sdpa_math" => "sdpa_math",
            // `x.T` / `x.mT` (attribute reads recorded as getattr calls).
            "builtins.getattr" => match n.args.get(1) {
                Some(FxArg::Str(a)) if a == "T" => "T",
                Some(FxArg::Str(a)) if a == "mT" => "mT",
                _ => return None,
            },
            _ => return None,
        },
        FxOp::CallMethod { name } => match name.as_str() {
            "matmul" | "__matmul__" => "matmul",
            "mm" => "mm",
            "bmm" => "bmm",
            "mv" => "mv",
            "dot" => "dot",
            "vdot" => "vdot",
            "split" => "split",
            "chunk" => "chunk",
            "detach" => "detach",
            "masked_fill" => "masked_fill",
            "index_select" => "index_select",
            "cumsum" => "cumsum",
            "flip" => "flip",
            "roll" => "roll",
            "tril" => "tril",
            "triu" => "triu",
            "logsumexp" => "logsumexp",
            "round" | "sign" | "trunc" => "step",
            _ => return None,
        },
        _ => return None,
    };
    Some(key)
}

/// Ops whose value is a tuple of tensors (read through `getitem`).
pub fn returns_tuple(key: Option<&str>) -> bool {
    matches!(key, Some("split" | "chunk"))
}

/// True when node `i` is a call whose value is not a tensor with static meta: a tuple (split,
/// `max(dim)`'s return type, ...) or another structure. Its gradient, if any, is per element
/// ([`Grad::Tuple`]).
pub fn structured(g: &FxGraph, i: usize) -> bool {
    let n = &g.nodes[i];
    n.meta.is_none() && matches!(n.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. })
}

/// Gradient of one node: a tensor node, or per-element gradients of a tuple value.
#[derive(Clone, Debug)]
pub enum Grad {
    Tensor(usize),
    Tuple(Vec<Option<usize>>),
}

/// Builds the joint graph of `g` (imported and functionalized; `writeback_dsts` are its mutated
/// inputs). Fails with the reason when the graph cannot be differentiated.
pub fn build_joint(py: Python<'_>, g: FxGraph) -> Result<JointGraph, JointError> {
    build(py, g, None)
}

/// The nodes of `g` that need a derivative rule and have none, with the reason (node name,
/// reason), in graph order. Such a node passes a stand-in gradient to its inputs so that every
/// gap upstream of it is found too. Other failures (aliasing outputs, mutated inputs requiring
/// grad) are returned as errors: splitting does not cure them.
pub fn rule_gaps(py: Python<'_>, g: FxGraph) -> Result<Vec<(String, String)>, JointError> {
    let mut gaps = Vec::new();
    build(py, g, Some(&mut gaps))?;
    gaps.reverse();
    Ok(gaps)
}

fn build(py: Python<'_>, g: FxGraph, mut gaps: Option<&mut Vec<(String, String)>>) -> Result<JointGraph, JointError> {
    let n_fwd = g.nodes.len();
    // Which forward nodes require grad: tensor meta says so (it records no_grad regions and
    // detach as eager does); tuple-valued nodes follow their tensor arguments.
    let mut requires_grad = vec![false; n_fwd];
    for i in 0..n_fwd {
        let n = &g.nodes[i];
        requires_grad[i] = match (&n.meta, &n.op) {
            (Some(m), _) => m.requires_grad && m.layout.dtype != crate::inductor::ir::DType::Bool,
            // A structured value (a tuple of tensors...) may hold tensors that require grad
            // whenever one of its tensor arguments does.
            (None, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. }) => {
                let mut any = false;
                for a in n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)) {
                    a.for_each_node(&mut |j| any |= requires_grad[j]);
                }
                any
            }
            _ => false,
        };
    }
    // A call whose value requires grad while none of its arguments does makes a new leaf
    // (`torch.ones(3, requires_grad=True)`, `torch.tensor(v, requires_grad=True)`): the value
    // the user holds must be that leaf, whose `.grad` backward fills, not an output of the
    // compiled function's autograd node. Such a graph runs through torch's autograd.
    for i in 0..n_fwd {
        let n = &g.nodes[i];
        if !requires_grad[i] || !matches!(n.op, FxOp::CallFunction { .. } | FxOp::CallMethod { .. } | FxOp::CallModule { .. }) {
            continue;
        }
        let mut from_args = false;
        for a in n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)) {
            a.for_each_node(&mut |j| from_args |= requires_grad[j]);
        }
        if !from_args {
            return Err(JointError::Unsupported(format!("{} makes a new leaf tensor that requires grad", n.name)));
        }
    }
    // Note [complex gradients]: the derivative rules are written for real tensors. For complex
    // ones eager's formulas conjugate (`mul`: grad * other.conj()) and take the real part of a
    // gradient flowing into a real input (`handle_r_to_c`); the rules do neither, so a complex
    // value that requires grad (the only kind of `DType::Other` that can: the other dtypes
    // kernels do not model are integers and float8) sends the graph through torch's autograd.
    if let Some(i) = (0..n_fwd).find(|&i| requires_grad[i] && g.nodes[i].meta.as_ref().is_some_and(|m| m.layout.dtype == crate::inductor::ir::DType::Other)) {
        return Err(JointError::Unsupported(format!("{} is complex and requires grad (Note [complex gradients])", g.nodes[i].name)));
    }
    let mut inputs: Vec<usize> = Vec::new();
    let mut placeholders: Vec<(usize, usize)> = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match n.op {
            FxOp::Placeholder { position } => Some((position, i)),
            _ => None,
        })
        .collect();
    placeholders.sort();
    inputs.extend(placeholders.iter().map(|(_, i)| *i));
    inputs.extend(g.nodes.iter().enumerate().filter(|(_, n)| matches!(n.op, FxOp::GetAttr { .. })).map(|(i, _)| i));
    for wb in &g.writebacks {
        if requires_grad[wb.dst] {
            return Err(JointError::Unsupported(format!("input {} requires grad and is mutated", g.nodes[wb.dst].name)));
        }
        // `x.add_(p)` with `p` requiring grad makes `x` itself require grad in eager (it gets
        // the in-place op's grad_fn, and later uses of `x` differentiate into `p`); a value
        // copied in by the Function's forward would not (found by the fuzzer: x.requires_grad
        // stayed False). Such graphs run through torch's autograd.
        if requires_grad[wb.src] {
            return Err(JointError::Unsupported(format!(
                "input {} is overwritten with a value that requires grad",
                g.nodes[wb.dst].name
            )));
        }
    }
    let outputs: Vec<FxArg> = match g.nodes[g.output].args.first() {
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => Vec::new(),
    };
    // Outputs that alias an input through view ops python/dynamo/aot.py can run again are
    // no longer outputs here (Note [view outputs]); what is left (a view step with a tensor
    // argument, `detach`, a copying `reshape` this conservative walk cannot tell apart) runs
    // through torch's autograd.
    for o in &outputs {
        if let FxArg::Node(mut j) = o {
            loop {
                let n = &g.nodes[j];
                if matches!(n.op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. }) {
                    if n.meta.is_some() {
                        return Err(JointError::Unsupported(format!("output aliases input {}", n.name)));
                    }
                    break;
                }
                let viewish = matches!(
                    op_key(n).unwrap_or(n.target_name.as_str()),
                    "view" | "reshape" | "flatten" | "unflatten" | "transpose" | "t" | "permute" | "unsqueeze" | "squeeze"
                        | "expand" | "contiguous" | "getitem" | "split" | "chunk" | "detach" | "to" | "float" | "pos"
                );
                match n.args.first() {
                    Some(FxArg::Node(k)) if viewish => j = *k,
                    _ => break,
                }
            }
        }
    }
    // A structure holding tensors that require grad cannot leave through the
    // autograd.Function: its tensors would lose their history.
    for o in &outputs {
        if let FxArg::Node(j) = o {
            if requires_grad[*j] && structured(&g, *j) {
                return Err(JointError::Unsupported(format!("output {} is a structure holding tensors that require grad", g.nodes[*j].name)));
            }
        }
    }
    let mut b = Builder { py, g, targets: HashMap::new(), requires_grad, forward_side: Vec::new() };
    // Tangent placeholders, one per differentiable output.
    let mut tangents = Vec::new();
    let mut grads: HashMap<usize, Grad> = HashMap::new();
    let mut seen_output: HashMap<usize, usize> = HashMap::new();
    for (k, o) in outputs.iter().enumerate() {
        match o {
            FxArg::Node(j) if b.requires_grad[*j] && b.g.nodes[*j].meta.is_some() => {
                let t = b.push(FxOp::Placeholder { position: usize::MAX }, "tangent", vec![], vec![]);
                b.g.nodes[t].name = format!("tangent_{k}");
                b.g.nodes[t].meta = b.g.nodes[*j].meta.clone();
                tangents.push(Some(t));
                // The same value returned twice receives the sum of both tangents.
                let _ = seen_output.insert(*j, t);
                accumulate(&mut b, &mut grads, *j, Grad::Tensor(t))?;
            }
            _ => tangents.push(None),
        }
    }
    let untracked_writes = untracked_inplace_writes(&b.g, &b.requires_grad);
    for i in (0..n_fwd).rev() {
        let Some(grad) = grads.remove(&i) else { continue };
        let n = &b.g.nodes[i];
        if matches!(n.op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. }) {
            grads.insert(i, grad);
            continue;
        }
        if untracked_writes[i] {
            // Note [in-place writes under no_grad]: the written tensor keeps its history.
            if let (Some(FxArg::Node(base)), Grad::Tensor(_)) = (n.args.first(), &grad) {
                let base = *base;
                if b.requires_grad[base] {
                    accumulate(&mut b, &mut grads, base, grad)?;
                }
                continue;
            }
        }
        let stand_in = match &grad {
            Grad::Tensor(t) => *t,
            Grad::Tuple(v) => v.iter().flatten().copied().next().unwrap_or(i),
        };
        let applied = match super::rules::apply(&mut b, i, grad.clone()) {
            // Note [torch's derivative for rule-less ops] in rules.rs.
            Err(JointError::NoRule(_)) => super::rules::torch_vjp(&mut b, i, grad),
            other => other,
        };
        let contributions = match (applied, gaps.as_deref_mut()) {
            (Ok(c), _) => c,
            (Err(JointError::NoRule(reason)), Some(gaps)) => {
                gaps.push((b.g.nodes[i].name.clone(), reason));
                let mut c = Vec::new();
                for a in b.g.nodes[i].args.clone().iter().chain(b.g.nodes[i].kwargs.clone().iter().map(|(_, a)| a)) {
                    a.for_each_node(&mut |j| {
                        let tuple = structured(&b.g, j);
                        c.push((j, if tuple { Grad::Tuple(vec![Some(stand_in)]) } else { Grad::Tensor(stand_in) }));
                    });
                }
                c
            }
            (Err(e), _) => return Err(e),
        };
        for (j, gj) in contributions {
            if b.requires_grad[j] {
                accumulate(&mut b, &mut grads, j, gj)?;
            }
        }
    }
    let input_grads = inputs
        .iter()
        .map(|i| match grads.get(i) {
            Some(Grad::Tensor(t)) => Some(*t),
            _ => None,
        })
        .collect();
    let input_requires_grad = inputs.iter().map(|&i| b.requires_grad[i]).collect();
    let requires_grad = b.requires_grad.clone();
    let forward_side = b.forward_side.clone();
    let mut g = b.g;
    crate::inductor::fx_import::set_users(&mut g.nodes);
    Ok(JointGraph { g, n_fwd, inputs, input_requires_grad, outputs, tangents, input_grads, requires_grad, forward_side })
}

/// Note [in-place writes under no_grad]: an in-place op run while grad mode is off on a tensor
/// that requires grad (`with torch.no_grad(): y.mul_(3)`, a value fix-up that must not touch the
/// gradient) changes the tensor's values, not its autograd history: eager's backward passes
/// the gradient of the written tensor straight to its history (its `grad_fn` stays what it
/// was). The functionalized node (`mul(y, 3)`, `inplace`) is the tensor's new value and
/// requires grad (its fake says so), so its gradient goes unchanged to the value it
/// overwrote, its first argument, and nothing to its other arguments. Grad mode is followed
/// through the graph's `_set_grad_enabled` nodes (on at entry: the joint graph is built only
/// when some region differentiates).
fn untracked_inplace_writes(g: &FxGraph, requires_grad: &[bool]) -> Vec<bool> {
    let mut grad_on = true;
    let mut out = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if n.target_name.ends_with("_set_grad_enabled") {
            if let Some(FxArg::Bool(flag)) = n.args.first() {
                grad_on = *flag;
            }
            continue;
        }
        out[i] = n.inplace && !grad_on && requires_grad.get(i).copied().unwrap_or(false);
    }
    out
}

/// Adds `gj` to the gradient of node `j` (`torch.add` when it already has one).
fn accumulate(b: &mut Builder<'_>, grads: &mut HashMap<usize, Grad>, j: usize, gj: Grad) -> Result<(), JointError> {
    let merged = match (grads.remove(&j), gj) {
        (None, g) => g,
        (Some(Grad::Tensor(a)), Grad::Tensor(c)) => Grad::Tensor(b.add(node(a), node(c))?),
        (Some(Grad::Tuple(mut a)), Grad::Tuple(c)) => {
            if a.len() < c.len() {
                a.resize(c.len(), None);
            }
            for (k, ck) in c.into_iter().enumerate() {
                a[k] = match (a[k], ck) {
                    (Some(x), Some(y)) => Some(b.add(node(x), node(y))?),
                    (x, y) => x.or(y),
                };
            }
            Grad::Tuple(a)
        }
        _ => return Err(JointError::Unsupported(format!("mixed tensor and tuple gradients for {}", b.g.nodes[j].name))),
    };
    grads.insert(j, merged);
    Ok(())
}

/// Renders the joint graph, one node per line (`aot::joint_graph` log, `AotPlan.joint`).
pub fn render(j: &JointGraph) -> String {
    let mut s = String::new();
    let fmt_arg = |a: &FxArg| -> String {
        fn go(a: &FxArg, g: &FxGraph) -> String {
            match a {
                FxArg::Node(i) => g.nodes[*i].name.clone(),
                FxArg::Int(v) => v.to_string(),
                FxArg::Float(v) => format!("{v:?}"),
                FxArg::Bool(v) => if *v { "True".into() } else { "False".into() },
                FxArg::None => "None".into(),
                FxArg::Str(v) => format!("{v:?}"),
                FxArg::Tuple(items) => format!("({})", items.iter().map(|x| go(x, g)).collect::<Vec<_>>().join(", ")),
                FxArg::List(items) => format!("[{}]", items.iter().map(|x| go(x, g)).collect::<Vec<_>>().join(", ")),
                FxArg::Ellipsis => "...".into(),
                _ => "<obj>".into(),
            }
        }
        go(a, &j.g)
    };
    for (i, n) in j.g.nodes.iter().enumerate() {
        if i == j.n_fwd {
            let _ = writeln!(s, "# backward");
        }
        let args: Vec<String> = n
            .args
            .iter()
            .map(fmt_arg)
            .chain(n.kwargs.iter().map(|(k, v)| format!("{k}={}", fmt_arg(v))))
            .collect();
        let rg = if j.requires_grad.get(i).copied().unwrap_or(false) { " [rg]" } else { "" };
        let _ = match n.op {
            FxOp::Placeholder { .. } => writeln!(s, "{} = placeholder{rg}", n.name),
            FxOp::GetAttr { .. } => writeln!(s, "{} = get_attr{rg}", n.name),
            FxOp::Output => writeln!(s, "output({})", args.join(", ")),
            _ => writeln!(s, "{} = {}({}){rg}", n.name, n.target_name, args.join(", ")),
        };
    }
    let grads: Vec<String> = j
        .inputs
        .iter()
        .zip(&j.input_grads)
        .map(|(i, g)| format!("{}: {}", j.g.nodes[*i].name, g.map(|g| j.g.nodes[g].name.clone()).unwrap_or_else(|| "None".into())))
        .collect();
    let _ = writeln!(s, "grads({})", grads.join(", "));
    s
}
