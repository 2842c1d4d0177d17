//! Derivative rules: for one forward node and the gradient of its value, the backward nodes that
//! compute the gradients of its tensor arguments.
//!
//! The formulas are those of PyTorch's `tools/autograd/derivatives.yaml` (the `self:`/`other:`
//! entries of each op), written for our graph: pointwise ones as torch pointwise calls (so the
//! inductor fuses them into the backward's kernels), the rest through torch's own backward
//! kernels (`aten.convolution_backward`, `aten.embedding_dense_backward`, ...) as extern calls.
//! Broadcast operands receive `sum_to(grad, operand sizes)` (derivatives.yaml's
//! `handle_r_to_c` / `at::sum_to`).
//!
//! Invariant: a rule either returns a gradient for every tensor argument that requires grad, or
//! fails with [`JointError::NoRule`] (arguments outside the supported subset are never guessed).

use super::joint::{arg, ints, node, op_key, Builder, Grad, JointError};
use crate::inductor::fx_import::{FxArg, FxOp, TensorMeta};
use crate::inductor::ir::{DType, Layout};

type Out = Vec<(usize, Grad)>;

fn no_rule(b: &Builder<'_>, i: usize, why: &str) -> JointError {
    let n = &b.g.nodes[i];
    if why.is_empty() {
        JointError::NoRule(n.target_name.clone())
    } else {
        JointError::NoRule(format!("{} ({why})", n.target_name))
    }
}

fn num(a: Option<&FxArg>) -> Option<f64> {
    match a {
        Some(FxArg::Int(v)) => Some(*v as f64),
        Some(FxArg::Float(v)) => Some(*v),
        _ => None,
    }
}

fn int_list(a: Option<&FxArg>, n: usize, default: i64) -> Option<Vec<i64>> {
    match a {
        None | Some(FxArg::None) => Some(vec![default; n]),
        Some(FxArg::Int(v)) => Some(vec![*v; n]),
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => {
            let v: Option<Vec<i64>> = items.iter().map(|x| if let FxArg::Int(k) = x { Some(*k) } else { None }).collect();
            let v = v?;
            if v.len() == 1 {
                Some(vec![v[0]; n])
            } else if v.len() == n {
                Some(v)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Normalized reduction dims (`dim` as int, list, or None for all) for a rank-`rank` input. A
/// 0-d input accepts dims -1 and 0 and has none to reduce (empty); any other out-of-range dim
/// is `None` (no rule).
fn reduce_dims(a: Option<&FxArg>, rank: usize) -> Option<Vec<i64>> {
    let dims = reduce_dims_unchecked(a, rank)?;
    if rank == 0 {
        return dims.iter().all(|&d| d == 0).then(Vec::new);
    }
    dims.iter().all(|&d| (0..rank as i64).contains(&d)).then_some(dims)
}

fn reduce_dims_unchecked(a: Option<&FxArg>, rank: usize) -> Option<Vec<i64>> {
    let norm = |d: i64| if d < 0 { d + rank.max(1) as i64 } else { d };
    match a {
        None | Some(FxArg::None) => Some((0..rank as i64).collect()),
        Some(FxArg::Int(d)) => Some(vec![norm(*d)]),
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => {
            let mut v: Vec<i64> = items.iter().map(|x| if let FxArg::Int(k) = x { Some(norm(*k)) } else { None }).collect::<Option<_>>()?;
            v.sort_unstable();
            if v.is_empty() {
                v = (0..rank as i64).collect();
            }
            Some(v)
        }
        _ => None,
    }
}

fn bool_arg(a: Option<&FxArg>, default: bool) -> Option<bool> {
    match a {
        None => Some(default),
        Some(FxArg::Bool(v)) => Some(*v),
        _ => None,
    }
}

/// Grad of a reduced value expanded back to the input: reshape to the keepdim shape, expand.
fn expand_back(b: &mut Builder<'_>, g: usize, in_sizes: &[i64], dims: &[i64], keepdim: bool) -> usize {
    let g = if keepdim {
        g
    } else {
        let kept: Vec<i64> = in_sizes.iter().enumerate().map(|(d, &s)| if dims.contains(&(d as i64)) { 1 } else { s }).collect();
        b.reshape(g, &kept)
    };
    b.expand(g, in_sizes)
}

/// Applies the rule of node `i` to `grad`, the gradient of its value.
pub fn apply(b: &mut Builder<'_>, i: usize, grad: Grad) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let key = op_key(&n).ok_or_else(|| no_rule(b, i, ""))?;
    if key == "getitem" {
        return getitem(b, i, grad);
    }
    if key == "split" || key == "chunk" {
        return split(b, i, grad, key);
    }
    if key == "sdpa_flash_cpu" || key == "sdpa_efficient" {
        return sdpa_fused(b, i, grad, key == "sdpa_efficient");
    }
    let Grad::Tensor(g) = grad else { return Err(no_rule(b, i, "tuple gradient")) };
    let out_sizes = b.sizes(i)?;
    let a0 = n.args.first().cloned().unwrap_or(FxArg::None);
    // The first tensor argument (self/input) and its sizes.
    let x = match &a0 {
        FxArg::Node(j) => Some(*j),
        _ => None,
    };
    let x_sizes = match x {
        Some(j) => b.g.nodes[j].meta.as_ref().map(|m| m.layout.sizes.clone()),
        None => None,
    };
    let mut out: Out = Vec::new();
    macro_rules! give {
        ($j:expr, $g:expr) => {
            out.push(($j, Grad::Tensor($g)))
        };
    }
    // Unary pointwise ops: gradient of self only.
    let unary = |b: &mut Builder<'_>, out: &mut Out, f: &dyn Fn(&mut Builder<'_>) -> pyo3::PyResult<usize>| -> Result<(), JointError> {
        if let Some(j) = x {
            if b.requires_grad[j] {
                let gx = f(b)?;
                out.push((j, Grad::Tensor(gx)));
            }
        }
        Ok(())
    };
    let xa = a0.clone();
    let o = node(i);
    let gn = node(g);
    match key {
        // derivatives.yaml: add.Tensor: self: grad, other: maybe_multiply(grad, alpha).
        "add" | "radd" | "sub" | "rsub" => {
            let alpha = match arg(&n, 2, "alpha") {
                None => 1.0,
                a => num(a).ok_or_else(|| no_rule(b, i, "alpha"))?,
            };
            let (s_self, s_other) = match key {
                "add" | "radd" => (1.0, alpha),
                "sub" => (1.0, -alpha),
                // rsub(self, other) = other - alpha * self.
                _ => (-alpha, 1.0),
            };
            for (pos, scale) in [(0usize, s_self), (1usize, s_other)] {
                if let Some(FxArg::Node(j)) = n.args.get(pos).cloned().or_else(|| arg(&n, pos, "other").cloned()) {
                    if !b.requires_grad[j] {
                        continue;
                    }
                    let gj = if scale == 1.0 {
                        g
                    } else if scale == -1.0 {
                        b.neg(gn.clone())?
                    } else {
                        b.mul(gn.clone(), FxArg::Float(scale))?
                    };
                    let to = b.sizes(j)?;
                    let gj = b.sum_to(gj, &out_sizes, &to)?;
                    give!(j, gj);
                }
            }
        }
        // mul.Tensor: self: grad * other, other: grad * self.
        "mul" => {
            let other = arg(&n, 1, "other").cloned().unwrap_or(FxArg::None);
            for (pos, this, that) in [(0usize, &xa, &other), (1usize, &other, &xa)] {
                let _ = pos;
                if let FxArg::Node(j) = this {
                    if !b.requires_grad[*j] {
                        continue;
                    }
                    let gj = b.mul(gn.clone(), that.clone())?;
                    let to = b.sizes(*j)?;
                    let gj = b.sum_to(gj, &out_sizes, &to)?;
                    give!(*j, gj);
                }
            }
        }
        // div.Tensor: self: grad / other, other: -grad * self / (other * other) = -grad * result / other.
        "div" => {
            if arg(&n, 2, "rounding_mode").is_some_and(|a| !matches!(a, FxArg::None)) {
                return Err(no_rule(b, i, "rounding_mode"));
            }
            let other = arg(&n, 1, "other").cloned().unwrap_or(FxArg::None);
            if let Some(j) = x {
                if b.requires_grad[j] {
                    let gj = b.div(gn.clone(), other.clone())?;
                    let to = b.sizes(j)?;
                    let gj = b.sum_to(gj, &out_sizes, &to)?;
                    give!(j, gj);
                }
            }
            if let FxArg::Node(j) = other {
                if b.requires_grad[j] {
                    let t = b.mul(gn.clone(), o.clone())?;
                    let t = b.div(node(t), node(j))?;
                    let t = b.neg(node(t))?;
                    let to = b.sizes(j)?;
                    let gj = b.sum_to(t, &out_sizes, &to)?;
                    give!(j, gj);
                }
            }
        }
        // rdiv(self, other) = other / self: self: -grad * result / self.
        "rdiv" => unary(b, &mut out, &|b| {
            let t = b.mul(gn.clone(), o.clone())?;
            let t = b.div(node(t), xa.clone())?;
            b.neg(node(t))
        })?,
        "neg" => unary(b, &mut out, &|b| b.neg(gn.clone()))?,
        // abs: grad * self.sgn() (`sign` for a real tensor; `z / |z|` for a complex one, where
        // `sign` raises).
        "abs" => unary(b, &mut out, &|b| {
            let s = b.call("torch.sgn", vec![xa.clone()], vec![])?;
            b.mul(gn.clone(), node(s))
        })?,
        "pos" | "contiguous" | "clone" => unary(b, &mut out, &|_| Ok(g))?,
        // pow.Tensor_Scalar: self: grad * exponent * self.pow(exponent - 1).
        // pow(self, exponent): exponent * self^(exponent - 1) * grad, and zeros for exponent 0
        // (derivatives.yaml's pow_backward: `exponent == 0.0 ? zeros_like(self)`, where the
        // formula gives 0 * inf = NaN at self == 0, and -0 elsewhere).
        "pow" => {
            let e = num(arg(&n, 1, "exponent")).ok_or_else(|| no_rule(b, i, "tensor exponent"))?;
            if e == 0.0 {
                unary(b, &mut out, &|b| b.call("torch.zeros_like", vec![xa.clone()], vec![]))?
            } else {
            unary(b, &mut out, &|b| {
                let p = b.call("torch.pow", vec![xa.clone(), FxArg::Float(e - 1.0)], vec![])?;
                let t = b.mul(node(p), FxArg::Float(e))?;
                b.mul(gn.clone(), node(t))
            })?
            }
        }
        "square" => unary(b, &mut out, &|b| {
            let t = b.mul(xa.clone(), FxArg::Float(2.0))?;
            b.mul(gn.clone(), node(t))
        })?,
        // sqrt: grad / (2 * result).
        "sqrt" => unary(b, &mut out, &|b| {
            let t = b.mul(o.clone(), FxArg::Float(2.0))?;
            b.div(gn.clone(), node(t))
        })?,
        // rsqrt: -0.5 * grad * result^3.
        "rsqrt" => unary(b, &mut out, &|b| {
            let t = b.call("torch.pow", vec![o.clone(), FxArg::Float(3.0)], vec![])?;
            let t = b.mul(node(t), FxArg::Float(-0.5))?;
            b.mul(gn.clone(), node(t))
        })?,
        // exp: grad * result.
        "exp" => unary(b, &mut out, &|b| b.mul(gn.clone(), o.clone()))?,
        // expm1: grad * (result + 1).
        "expm1" => unary(b, &mut out, &|b| {
            let t = b.add(o.clone(), FxArg::Float(1.0))?;
            b.mul(gn.clone(), node(t))
        })?,
        // log: grad / self.
        "log" => unary(b, &mut out, &|b| b.div(gn.clone(), xa.clone()))?,
        // log1p: grad / (self + 1).
        "log1p" => unary(b, &mut out, &|b| {
            let t = b.add(xa.clone(), FxArg::Float(1.0))?;
            b.div(gn.clone(), node(t))
        })?,
        "reciprocal" => unary(b, &mut out, &|b| {
            // -grad * result * result.
            let t = b.mul(o.clone(), o.clone())?;
            let t = b.mul(gn.clone(), node(t))?;
            b.neg(node(t))
        })?,
        // sin: grad * self.cos(); cos: grad * -self.sin().
        "sin" => unary(b, &mut out, &|b| {
            let c = b.call("torch.cos", vec![xa.clone()], vec![])?;
            b.mul(gn.clone(), node(c))
        })?,
        "cos" => unary(b, &mut out, &|b| {
            let s = b.call("torch.sin", vec![xa.clone()], vec![])?;
            let t = b.mul(gn.clone(), node(s))?;
            b.neg(node(t))
        })?,
        // tanh: tanh_backward(grad, result) = grad * (1 - result^2).
        "tanh" => unary(b, &mut out, &|b| {
            let sq = b.mul(o.clone(), o.clone())?;
            let t = b.call("torch.rsub", vec![node(sq), FxArg::Float(1.0)], vec![])?;
            b.mul(gn.clone(), node(t))
        })?,
        // sigmoid: sigmoid_backward(grad, result) = grad * result * (1 - result).
        "sigmoid" => unary(b, &mut out, &|b| {
            let t = b.call("torch.rsub", vec![o.clone(), FxArg::Float(1.0)], vec![])?;
            let t = b.mul(o.clone(), node(t))?;
            b.mul(gn.clone(), node(t))
        })?,
        // relu: threshold_backward(grad, result, 0) = 0 where result <= 0, else grad (ATen's
        // `threshold_backward`, aten/src/ATen/native/Activation.cpp: a NaN result passes the
        // gradient on).
        "relu" => unary(b, &mut out, &|b| {
            let c = b.call("torch.le", vec![o.clone(), FxArg::Float(0.0)], vec![])?;
            b.call("torch.where", vec![node(c), FxArg::Float(0.0), gn.clone()], vec![])
        })?,
        // leaky_relu: leaky_relu_backward(grad, self, slope) = grad where self > 0, else grad * slope.
        "leaky_relu" => {
            let slope = match arg(&n, 1, "negative_slope") {
                None => 0.01,
                a => num(a).ok_or_else(|| no_rule(b, i, "slope"))?,
            };
            unary(b, &mut out, &|b| {
                let c = b.call("torch.gt", vec![xa.clone(), FxArg::Float(0.0)], vec![])?;
                let s = b.mul(gn.clone(), FxArg::Float(slope))?;
                b.call("torch.where", vec![node(c), gn.clone(), node(s)], vec![])
            })?
        }
        // silu: grad * sigmoid(self) * (1 + self * (1 - sigmoid(self))).
        "silu" => unary(b, &mut out, &|b| {
            let s = b.call("torch.sigmoid", vec![xa.clone()], vec![])?;
            let one_minus = b.call("torch.rsub", vec![node(s), FxArg::Float(1.0)], vec![])?;
            let t = b.mul(xa.clone(), node(one_minus))?;
            let t = b.add(node(t), FxArg::Float(1.0))?;
            let t = b.mul(node(s), node(t))?;
            b.mul(gn.clone(), node(t))
        })?,
        // gelu: gelu_backward(grad, self, approximate), torch's kernel as an extern call.
        "gelu" => {
            let approx = match arg(&n, 1, "approximate") {
                None => FxArg::Str("none".into()),
                Some(FxArg::Str(s)) => FxArg::Str(s.clone()),
                _ => return Err(no_rule(b, i, "approximate")),
            };
            // float32/float64: the derivative written as pointwise ops (torch's GeluBackward
            // formulas), which the inductor fuses into the backward's kernels (torch's
            // gelu_backward kernel cost ~80 us per call on a 4x32x128 input, several times the
            // fused loop). Other dtypes keep the extern call (it computes half types in float32).
            let decompose = matches!(x.and_then(|j| b.g.nodes[j].meta.as_ref()).map(|m| m.layout.dtype), Some(DType::F32 | DType::F64));
            let tanh = matches!(&approx, FxArg::Str(s) if s == "tanh");
            unary(b, &mut out, &|b| {
                if !decompose {
                    return b.call("torch.ops.aten.gelu_backward.default", vec![gn.clone(), xa.clone()], vec![("approximate", approx.clone())]);
                }
                gelu_backward(b, gn.clone(), xa.clone(), tanh)
            })?
        }
        "detach" => {}
        // Views: the gradient is viewed back to the input's sizes.
        "view" | "reshape" | "flatten" | "unflatten" | "unsqueeze" | "squeeze" => {
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            unary(b, &mut out, &|b| Ok(b.reshape(g, &xs)))?
        }
        "transpose" => {
            let (Some(FxArg::Int(d0)), Some(FxArg::Int(d1))) = (arg(&n, 1, "dim0"), arg(&n, 2, "dim1")) else {
                return Err(no_rule(b, i, "dims"));
            };
            let (d0, d1) = (*d0, *d1);
            unary(b, &mut out, &|b| Ok(b.method("transpose", vec![gn.clone(), FxArg::Int(d0), FxArg::Int(d1)], vec![])))?
        }
        "t" => unary(b, &mut out, &|b| Ok(b.method("t", vec![gn.clone()], vec![])))?,
        "permute" => {
            let dims: Vec<i64> = match (n.args.get(1), n.args.len()) {
                (Some(FxArg::Tuple(v)) | Some(FxArg::List(v)), 2) => v.iter().map(|a| if let FxArg::Int(k) = a { Some(*k) } else { None }).collect::<Option<_>>(),
                _ => n.args[1..].iter().map(|a| if let FxArg::Int(k) = a { Some(*k) } else { None }).collect::<Option<_>>(),
            }
            .or_else(|| match arg(&n, 99, "dims") {
                Some(FxArg::Tuple(v)) | Some(FxArg::List(v)) => v.iter().map(|a| if let FxArg::Int(k) = a { Some(*k) } else { None }).collect(),
                _ => None,
            })
            .ok_or_else(|| no_rule(b, i, "dims"))?;
            let rank = dims.len() as i64;
            let mut inverse = vec![0i64; dims.len()];
            for (k, &d) in dims.iter().enumerate() {
                let d = if d < 0 { d + rank } else { d };
                inverse[d as usize] = k as i64;
            }
            unary(b, &mut out, &|b| Ok(b.method("permute", vec![gn.clone(), ints(&inverse)], vec![])))?
        }
        "expand" => {
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            unary(b, &mut out, &|b| b.sum_to(g, &out_sizes, &xs))?
        }
        "to" | "float" => {
            let same = x.and_then(|j| b.g.nodes[j].meta.as_ref()).is_some_and(|m| {
                b.g.nodes[i].meta.as_ref().is_some_and(|mo| mo.layout.dtype == m.layout.dtype && mo.layout.dtype != crate::inductor::ir::DType::Other)
            });
            if !same {
                return Err(no_rule(b, i, "dtype conversion"));
            }
            unary(b, &mut out, &|_| Ok(g))?
        }
        "dropout" => {
            let p = num(arg(&n, 1, "p")).unwrap_or(0.5);
            let training = bool_arg(arg(&n, 2, "training"), true).ok_or_else(|| no_rule(b, i, "training"))?;
            if training && p != 0.0 {
                return Err(no_rule(b, i, "dropout in training mode"));
            }
            unary(b, &mut out, &|_| Ok(g))?
        }
        // sum: grad expanded to self's sizes (derivatives.yaml: sum_backward).
        "sum" | "mean" => {
            if arg(&n, 3, "dtype").is_some_and(|a| !matches!(a, FxArg::None)) {
                return Err(no_rule(b, i, "dtype"));
            }
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let dims = reduce_dims(arg(&n, 1, "dim"), xs.len()).ok_or_else(|| no_rule(b, i, "dim"))?;
            let keepdim = bool_arg(arg(&n, 2, "keepdim"), false).ok_or_else(|| no_rule(b, i, "keepdim"))?;
            let count: i64 = dims.iter().map(|&d| xs[d as usize]).product();
            unary(b, &mut out, &|b| {
                let e = expand_back(b, g, &xs, &dims, keepdim);
                if key == "mean" {
                    b.div(node(e), FxArg::Float(count as f64))
                } else {
                    Ok(e)
                }
            })?
        }
        // softmax: _softmax_backward_data = result * (grad - sum(grad * result, dim, keepdim)).
        "softmax" | "log_softmax" => {
            if arg(&n, 3, "dtype").is_some_and(|a| !matches!(a, FxArg::None)) || n.kwargs.iter().any(|(k, v)| k == "dtype" && !matches!(v, FxArg::None)) {
                return Err(no_rule(b, i, "dtype"));
            }
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let Some(FxArg::Int(d)) = arg(&n, 1, "dim") else { return Err(no_rule(b, i, "dim")) };
            let d = if *d < 0 { *d + xs.len() as i64 } else { *d };
            let dtype = b.g.nodes[i].meta.as_ref().map(|m| m.layout.dtype);
            unary(b, &mut out, &|b| softmax_backward(b, g, i, d, key == "log_softmax", dtype))?
        }
        // round, sign, trunc, floor, ceil: piecewise constant, so a zero gradient
        // (derivatives.yaml: zeros_like(grad)).
        "step" | "floor" | "ceil" => unary(b, &mut out, &|b| b.call("torch.zeros_like", vec![gn.clone()], vec![]))?,
        // `x.T` reverses the dims, `x.mT` swaps the last two: the gradient goes back the same way.
        "T" => unary(b, &mut out, &|b| b.call("builtins.getattr", vec![gn.clone(), FxArg::Str("T".into())], vec![]))?,
        "mT" => unary(b, &mut out, &|b| Ok(b.mt(gn.clone())))?,
        // where(condition, self, other): self: where(condition, grad, 0), other: where(condition,
        // 0, grad), each summed to its operand's sizes.
        "where" => {
            let cond = arg(&n, 0, "condition").cloned().ok_or_else(|| no_rule(b, i, "condition"))?;
            for (pos, name, taken) in [(1usize, "input", true), (2usize, "other", false)] {
                if let Some(FxArg::Node(j)) = arg(&n, pos, name).cloned() {
                    if !b.requires_grad[j] {
                        continue;
                    }
                    let (t, f) = if taken { (gn.clone(), FxArg::Float(0.0)) } else { (FxArg::Float(0.0), gn.clone()) };
                    let gj = b.call("torch.where", vec![cond.clone(), t, f], vec![])?;
                    let to = b.sizes(j)?;
                    let gj = b.sum_to(gj, &out_sizes, &to)?;
                    give!(j, gj);
                }
            }
        }
        // masked_fill(self, mask, value): self: grad.masked_fill(mask, 0).
        "masked_fill" => {
            if b.wants(arg(&n, 2, "value").unwrap_or(&FxArg::None)) {
                return Err(no_rule(b, i, "a fill value that requires grad"));
            }
            let mask = arg(&n, 1, "mask").cloned().ok_or_else(|| no_rule(b, i, "mask"))?;
            unary(b, &mut out, &|b| b.call("torch.where", vec![mask.clone(), FxArg::Float(0.0), gn.clone()], vec![]))?
        }
        // clamp(self, min, max) with number bounds: where(self inside the bounds, grad, 0), the
        // bounds themselves included or not as this torch's derivative does (Note [clamp at its
        // bounds]); hardtanh_backward zeroes the bounds (self <= min_val or self >= max_val).
        "clamp" | "clamp_min" | "clamp_max" | "hardtanh" => {
            let bound = |pos: usize, name: &str| -> Result<Option<f64>, JointError> {
                match arg(&n, pos, name) {
                    None | Some(FxArg::None) => Ok(None),
                    a => num(a).map(Some).ok_or_else(|| no_rule(b, i, "tensor bounds")),
                }
            };
            let at_bound = clamp_passes_bounds(b.py);
            let (lo, hi, strict) = match key {
                "clamp" => (bound(1, "min")?, bound(2, "max")?, !at_bound),
                "clamp_min" => (bound(1, "min")?, None, !at_bound),
                "clamp_max" => (None, bound(1, "max")?, !at_bound),
                _ => (Some(bound(1, "min_val")?.unwrap_or(-1.0)), Some(bound(2, "max_val")?.unwrap_or(1.0)), true),
            };
            if key == "hardtanh" {
                // hardtanh_backward: 0 where self <= min_val or self >= max_val, else grad
                // (aten/src/ATen/native/Activation.cpp), so a NaN passes the gradient on.
                let (lo, hi) = (lo.unwrap_or(-1.0), hi.unwrap_or(1.0));
                unary(b, &mut out, &|b| {
                    let below = b.call("torch.le", vec![xa.clone(), FxArg::Float(lo)], vec![])?;
                    let above = b.call("torch.ge", vec![xa.clone(), FxArg::Float(hi)], vec![])?;
                    let outside = b.call("torch.logical_or", vec![node(below), node(above)], vec![])?;
                    b.call("torch.where", vec![node(outside), FxArg::Float(0.0), gn.clone()], vec![])
                })?
            } else {
            unary(b, &mut out, &|b| {
                let mut keep: Option<usize> = None;
                for (v, op) in [(lo, if strict { "torch.gt" } else { "torch.ge" }), (hi, if strict { "torch.lt" } else { "torch.le" })] {
                    if let Some(v) = v {
                        let c = b.call(op, vec![xa.clone(), FxArg::Float(v)], vec![])?;
                        keep = Some(match keep {
                            None => c,
                            Some(k) => b.call("torch.logical_and", vec![node(k), node(c)], vec![])?,
                        });
                    }
                }
                match keep {
                    Some(k) => b.call("torch.where", vec![node(k), gn.clone(), FxArg::Float(0.0)], vec![]),
                    None => Ok(g),
                }
            })?
            }
        }
        // erf: 2 / sqrt(pi) * exp(-self^2) * grad.
        "erf" => unary(b, &mut out, &|b| {
            let sq = b.mul(xa.clone(), xa.clone())?;
            let negsq = b.neg(node(sq))?;
            let e = b.call("torch.exp", vec![node(negsq)], vec![])?;
            let t = b.mul(node(e), FxArg::Float(2.0 / std::f64::consts::PI.sqrt()))?;
            b.mul(node(t), gn.clone())
        })?,
        // minimum/maximum(self, other): where(self == other, grad / 2, grad), zeroed where the
        // other operand won (derivatives.yaml), each summed to its operand's sizes.
        "minimum" | "maximum" => {
            let other = arg(&n, 1, "other").cloned().ok_or_else(|| no_rule(b, i, "other"))?;
            if !matches!(other, FxArg::Node(_)) {
                return Err(no_rule(b, i, "scalar other"));
            }
            let (lose_self, lose_other) = if key == "minimum" { ("torch.gt", "torch.lt") } else { ("torch.lt", "torch.gt") };
            let mut shared: Option<usize> = None;
            for (operand, lose) in [(xa.clone(), lose_self), (other.clone(), lose_other)] {
                let FxArg::Node(j) = operand else { continue };
                if !b.requires_grad[j] {
                    continue;
                }
                let half = match shared {
                    Some(h) => h,
                    None => {
                        let eq = b.call("torch.eq", vec![xa.clone(), other.clone()], vec![])?;
                        let h = b.div(gn.clone(), FxArg::Float(2.0))?;
                        let h = b.call("torch.where", vec![node(eq), node(h), gn.clone()], vec![])?;
                        shared = Some(h);
                        h
                    }
                };
                let lost = b.call(lose, vec![xa.clone(), other.clone()], vec![])?;
                let gj = b.call("torch.where", vec![node(lost), FxArg::Float(0.0), node(half)], vec![])?;
                let to = b.sizes(j)?;
                let gj = b.sum_to(gj, &out_sizes, &to)?;
                give!(j, gj);
            }
        }
        // stack(tensors, dim): tensor k: grad.select(dim, k).
        "stack" => {
            let Some(FxArg::List(items) | FxArg::Tuple(items)) = arg(&n, 0, "tensors").cloned() else {
                return Err(no_rule(b, i, "tensors"));
            };
            let rank = out_sizes.len() as i64;
            let dim = match arg(&n, 1, "dim") {
                None => 0,
                Some(FxArg::Int(d)) => if *d < 0 { d + rank } else { *d },
                _ => return Err(no_rule(b, i, "dim")),
            };
            for (k, t) in items.iter().enumerate() {
                if let FxArg::Node(j) = t {
                    if b.requires_grad[*j] {
                        let gj = b.call("torch.select", vec![gn.clone(), FxArg::Int(dim), FxArg::Int(k as i64)], vec![])?;
                        give!(*j, gj);
                    }
                }
            }
        }
        // index_select(self, dim, index): zeros(self).index_add(dim, index, grad);
        // gather(self, dim, index): zeros(self).scatter_add(dim, index, grad).
        "index_select" | "gather" => {
            let dim = arg(&n, 1, "dim").cloned().ok_or_else(|| no_rule(b, i, "dim"))?;
            let index = arg(&n, 2, "index").cloned().ok_or_else(|| no_rule(b, i, "index"))?;
            if !matches!(dim, FxArg::Int(_)) || (key == "gather" && bool_arg(arg(&n, 3, "sparse_grad"), false) != Some(false)) {
                return Err(no_rule(b, i, "arguments"));
            }
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let add = if key == "gather" { "torch.scatter_add" } else { "torch.index_add" };
            unary(b, &mut out, &|b| {
                let z = b.method("new_zeros", vec![gn.clone(), ints(&xs)], vec![]);
                b.call(add, vec![node(z), dim.clone(), index.clone(), gn.clone()], vec![])
            })?
        }
        // cumsum(self, dim): grad.flip(dim).cumsum(dim).flip(dim) (cumsum_backward).
        "cumsum" => {
            if arg(&n, 2, "dtype").is_some_and(|a| !matches!(a, FxArg::None)) {
                return Err(no_rule(b, i, "dtype"));
            }
            let dim = match arg(&n, 1, "dim") {
                Some(FxArg::Int(d)) => *d,
                _ => return Err(no_rule(b, i, "dim")),
            };
            unary(b, &mut out, &|b| {
                let f = b.call("torch.flip", vec![gn.clone(), ints(&[dim])], vec![])?;
                let c = b.call("torch.cumsum", vec![node(f), FxArg::Int(dim)], vec![])?;
                b.call("torch.flip", vec![node(c), ints(&[dim])], vec![])
            })?
        }
        // flip(self, dims): grad.flip(dims); roll(self, shifts, dims): grad.roll(-shifts, dims);
        // tril/triu(self, diagonal): grad.tril/triu(diagonal).
        "flip" => {
            let dims: Vec<i64> = match (n.args.get(1), n.kwargs.iter().find(|(k, _)| k == "dims").map(|(_, v)| v)) {
                (Some(FxArg::List(v) | FxArg::Tuple(v)), _) | (None, Some(FxArg::List(v) | FxArg::Tuple(v))) => {
                    v.iter().map(|a| if let FxArg::Int(d) = a { Some(*d) } else { None }).collect::<Option<_>>().ok_or_else(|| no_rule(b, i, "dims"))?
                }
                (Some(FxArg::Int(_)), _) => n.args[1..].iter().map(|a| if let FxArg::Int(d) = a { Some(*d) } else { None }).collect::<Option<_>>().ok_or_else(|| no_rule(b, i, "dims"))?,
                _ => return Err(no_rule(b, i, "dims")),
            };
            unary(b, &mut out, &|b| b.call("torch.flip", vec![gn.clone(), ints(&dims)], vec![]))?
        }
        "roll" => {
            let list = |a: Option<&FxArg>| -> Option<Vec<i64>> {
                match a {
                    Some(FxArg::Int(d)) => Some(vec![*d]),
                    Some(FxArg::List(v) | FxArg::Tuple(v)) => v.iter().map(|a| if let FxArg::Int(d) = a { Some(*d) } else { None }).collect(),
                    _ => None,
                }
            };
            let shifts = list(arg(&n, 1, "shifts")).ok_or_else(|| no_rule(b, i, "shifts"))?;
            let dims = list(arg(&n, 2, "dims")).ok_or_else(|| no_rule(b, i, "dims"))?;
            let back: Vec<i64> = shifts.iter().map(|s| -s).collect();
            unary(b, &mut out, &|b| b.call("torch.roll", vec![gn.clone(), ints(&back), ints(&dims)], vec![]))?
        }
        "tril" | "triu" => {
            let diagonal = match arg(&n, 1, "diagonal") {
                None => 0,
                Some(FxArg::Int(d)) => *d,
                _ => return Err(no_rule(b, i, "diagonal")),
            };
            let f = if key == "tril" { "torch.tril" } else { "torch.triu" };
            unary(b, &mut out, &|b| b.call(f, vec![gn.clone(), FxArg::Int(diagonal)], vec![]))?
        }
        // amax/amin(self, dim, keepdim): the gradient split evenly among the elements equal to
        // the result (scale_grad_by_count(restore_reduced_dims(grad), result == self, dim));
        // logsumexp(self, dim, keepdim): grad * exp(self - result). Both restore the reduced dims.
        "amax" | "amin" | "logsumexp" => {
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let dims = reduce_dims(arg(&n, 1, "dim"), xs.len()).ok_or_else(|| no_rule(b, i, "dim"))?;
            let keepdim = bool_arg(arg(&n, 2, "keepdim"), false).ok_or_else(|| no_rule(b, i, "keepdim"))?;
            unary(b, &mut out, &|b| {
                let ge = expand_back(b, g, &xs, &dims, keepdim);
                let re = expand_back(b, i, &xs, &dims, keepdim);
                if key == "logsumexp" {
                    let d = b.sub(xa.clone(), node(re))?;
                    let e = b.call("torch.exp", vec![node(d)], vec![])?;
                    return b.mul(node(ge), node(e));
                }
                let mask = b.call("torch.eq", vec![node(re), xa.clone()], vec![])?;
                let count = b.sum_dims(mask, &dims, true)?;
                let t = b.div(node(ge), node(count))?;
                b.mul(node(t), node(mask))
            })?
        }
        // pad(input, pad, mode="constant"): the gradient is the unpadded window of grad.
        "pad" => {
            if !matches!(arg(&n, 2, "mode"), None | Some(FxArg::Str(_))) || matches!(arg(&n, 2, "mode"), Some(FxArg::Str(m)) if m != "constant") {
                return Err(no_rule(b, i, "mode"));
            }
            let pads = match arg(&n, 1, "pad") {
                Some(FxArg::List(v) | FxArg::Tuple(v)) => v.iter().map(|a| if let FxArg::Int(d) = a { Some(*d) } else { None }).collect::<Option<Vec<i64>>>(),
                _ => None,
            }
            .ok_or_else(|| no_rule(b, i, "pad"))?;
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            if pads.len() % 2 != 0 || pads.len() / 2 > xs.len() || pads.iter().any(|&p| p < 0) {
                return Err(no_rule(b, i, "negative or odd padding"));
            }
            unary(b, &mut out, &|b| {
                let mut t = g;
                for k in 0..pads.len() / 2 {
                    let d = xs.len() - 1 - k;
                    if pads[2 * k] != 0 || pads[2 * k + 1] != 0 {
                        t = b.call("torch.narrow", vec![node(t), FxArg::Int(d as i64), FxArg::Int(pads[2 * k]), FxArg::Int(xs[d])], vec![])?;
                    }
                }
                Ok(t)
            })?
        }
        "layer_norm" => return layer_norm(b, i, g),
        "weight_norm" => return weight_norm(b, i, g),
        "batch_norm" => return batch_norm(b, i, g),
        "adaptive_avg_pool2d" => unary(b, &mut out, &|b| {
            b.call("torch.ops.aten._adaptive_avg_pool2d_backward.default", vec![gn.clone(), xa.clone()], vec![])
        })?,
        "linear" => {
            // out = x @ w.T + b: x: grad @ w; w: grad.T @ x (batch dims flattened); b: grad summed.
            let w = arg(&n, 1, "weight").cloned().unwrap_or(FxArg::None);
            let bias = arg(&n, 2, "bias").cloned().unwrap_or(FxArg::None);
            let FxArg::Node(wj) = w else { return Err(no_rule(b, i, "weight")) };
            let ws = b.sizes(wj)?;
            if ws.len() != 2 {
                return Err(no_rule(b, i, "weight rank"));
            }
            // Batch dims flattened into one: `g2` (a view when the gradient is contiguous) is
            // what both mm's read; torch.matmul would fold the same way per call.
            let g2 = if out_sizes.len() == 2 { g } else { b.reshape(g, &[-1, ws[0]]) };
            if let Some(j) = x {
                if b.requires_grad[j] {
                    let gx2 = b.call("torch.mm", vec![node(g2), node(wj)], vec![])?;
                    let gx = if out_sizes.len() == 2 {
                        gx2
                    } else {
                        let xs = b.sizes(j)?;
                        b.reshape(gx2, &xs)
                    };
                    give!(j, gx);
                }
            }
            if b.requires_grad[wj] {
                let x2 = b.method("reshape", vec![xa.clone(), ints(&[-1, ws[1]])], vec![]);
                let g2t = b.method("t", vec![node(g2)], vec![]);
                let gw = b.call("torch.mm", vec![node(g2t), node(x2)], vec![])?;
                give!(wj, gw);
            }
            if let FxArg::Node(bj) = bias {
                if b.requires_grad[bj] {
                    let bs = b.sizes(bj)?;
                    let gb = b.sum_to(g, &out_sizes, &bs)?;
                    give!(bj, gb);
                }
            }
        }
        "matmul" | "mm" | "bmm" => {
            // mm: self: grad @ other.T, other: self.T @ grad; batch dims broadcast back by sum_to.
            let other = arg(&n, 1, "other").or_else(|| arg(&n, 1, "mat2")).cloned().unwrap_or(FxArg::None);
            let FxArg::Node(oj) = other else { return Err(no_rule(b, i, "operand")) };
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let os = b.sizes(oj)?;
            if xs.len() < 2 || os.len() < 2 {
                return Err(no_rule(b, i, "1-d operand"));
            }
            if let Some(j) = x {
                if b.requires_grad[j] {
                    let ot = b.mt(node(oj));
                    let gx = b.matmul(gn.clone(), node(ot))?;
                    let mut full = out_sizes.clone();
                    let k = full.len();
                    full[k - 1] = xs[xs.len() - 1];
                    let gx = b.sum_to(gx, &full, &xs)?;
                    give!(j, gx);
                }
            }
            if b.requires_grad[oj] {
                let xt = b.mt(xa.clone());
                let go = b.matmul(node(xt), gn.clone())?;
                let mut full = out_sizes.clone();
                let k = full.len();
                full[k - 2] = os[os.len() - 2];
                let go = b.sum_to(go, &full, &os)?;
                give!(oj, go);
            }
        }
        "mv" | "dot" | "vdot" => {
            // derivatives.yaml, real dtypes (conj is the identity): mv: self: grad.ger(vec),
            // vec: self.t().mv(grad); dot/vdot: self: grad * other, other: grad * self (spectral
            // norm's sigma = vdot(u, mv(W, v))).
            let other = arg(&n, 1, if key == "mv" { "vec" } else { "other" }).or_else(|| arg(&n, 1, "tensor")).cloned().unwrap_or(FxArg::None);
            let (Some(j), FxArg::Node(oj)) = (x, other) else { return Err(no_rule(b, i, "operands")) };
            let real = |k: usize| b.g.nodes[k].meta.as_ref().is_some_and(|m| m.layout.dtype.is_float());
            if !real(j) || !real(oj) || !real(i) {
                return Err(no_rule(b, i, "a complex or integer operand"));
            }
            if b.requires_grad[j] {
                let gx = if key == "mv" { b.call("torch.outer", vec![gn.clone(), node(oj)], vec![])? } else { b.mul(gn.clone(), node(oj))? };
                give!(j, gx);
            }
            if b.requires_grad[oj] {
                let go = if key == "mv" {
                    let xt = b.method("t", vec![node(j)], vec![]);
                    b.call("torch.mv", vec![node(xt), gn.clone()], vec![])?
                } else {
                    b.mul(gn.clone(), node(j))?
                };
                give!(oj, go);
            }
        }
        "addmm" => {
            // addmm(bias, m1, m2) with beta = alpha = 1.
            if n.kwargs.iter().any(|(k, _)| k == "beta" || k == "alpha") {
                return Err(no_rule(b, i, "beta/alpha"));
            }
            let (Some(m1), Some(m2)) = (n.args.get(1).cloned(), n.args.get(2).cloned()) else { return Err(no_rule(b, i, "operands")) };
            if let Some(j) = x {
                if b.requires_grad[j] {
                    let to = b.sizes(j)?;
                    let gb = b.sum_to(g, &out_sizes, &to)?;
                    give!(j, gb);
                }
            }
            if let FxArg::Node(j) = m1 {
                if b.requires_grad[j] {
                    let t = b.mt(m2.clone());
                    let gj = b.matmul(gn.clone(), node(t))?;
                    give!(j, gj);
                }
            }
            if let FxArg::Node(j) = m2 {
                if b.requires_grad[j] {
                    let t = b.mt(m1.clone());
                    let gj = b.matmul(node(t), gn.clone())?;
                    give!(j, gj);
                }
            }
        }
        // cat: each input receives the slice of grad it was copied to (`narrow`).
        "cat" => {
            let items = match &a0 {
                FxArg::List(v) | FxArg::Tuple(v) => v.clone(),
                _ => return Err(no_rule(b, i, "tensors")),
            };
            let rank = out_sizes.len() as i64;
            let dim = match arg(&n, 1, "dim") {
                None => 0,
                Some(FxArg::Int(d)) => if *d < 0 { d + rank } else { *d },
                _ => return Err(no_rule(b, i, "dim")),
            };
            let mut offset = 0;
            for item in items {
                let FxArg::Node(j) = item else { return Err(no_rule(b, i, "non-tensor item")) };
                let js = b.sizes(j)?;
                if js.len() as i64 != rank {
                    // torch.cat skips empty 1-d tensors of another rank.
                    if js == [0] {
                        continue;
                    }
                    return Err(no_rule(b, i, "rank"));
                }
                let len = js[dim as usize];
                if b.requires_grad[j] {
                    let gj = b.call("torch.narrow", vec![gn.clone(), FxArg::Int(dim), FxArg::Int(offset), FxArg::Int(len)], vec![])?;
                    give!(j, gj);
                }
                offset += len;
            }
        }
        "sdpa" => return sdpa(b, i, g),
        // Note [attention dropout as a product]: the attention math on given noise, its
        // gradients written out by `dynamo._functional.sdpa_math_backward` (no rerun under
        // autograd); a mask that requires grad is left to torch's derivative.
        "sdpa_math" => {
            let mask = n.args.get(3).cloned().unwrap_or(FxArg::None);
            let mask_grad = float_mask_wanting_grad(b, &mask);
            if (b.wants(&mask) && !mask_grad) || b.wants(&n.args.get(4).cloned().unwrap_or(FxArg::None)) {
                return Err(no_rule(b, i, "bool mask or noise requires grad"));
            }
            let mut args = vec![gn.clone()];
            args.extend(n.args.iter().cloned());
            let kwargs = if mask_grad { vec![("mask_grad", FxArg::Bool(true))] } else { vec![] };
            let call = b.call("dynamo._functional.sdpa_math_backward", args, kwargs)?;
            for pos in 0..3 {
                if let Some(FxArg::Node(j)) = n.args.get(pos) {
                    if b.requires_grad[*j] {
                        let gj = b.getitem(call, pos as i64)?;
                        give!(*j, gj);
                    }
                }
            }
            if let (true, FxArg::Node(j)) = (mask_grad, mask) {
                let gm = b.getitem(call, 3)?;
                give!(j, gm);
            }
        }
        "conv2d" | "conv1d" => return convolution(b, i, g, if key == "conv2d" { 2 } else { 1 }),
        "embedding" => {
            // embedding: weight: embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq).
            let w = arg(&n, 1, "weight").cloned().unwrap_or(FxArg::None);
            let FxArg::Node(wj) = w else { return Err(no_rule(b, i, "weight")) };
            // F.embedding wraps a negative padding_idx (-1 is the last row); None is no padding,
            // which embedding_dense_backward spells -1.
            let padding = match arg(&n, 2, "padding_idx") {
                None | Some(FxArg::None) => None,
                Some(FxArg::Int(p)) => Some(*p),
                _ => return Err(no_rule(b, i, "padding_idx")),
            };
            if !matches!(arg(&n, 3, "max_norm"), None | Some(FxArg::None)) {
                return Err(no_rule(b, i, "max_norm"));
            }
            let scale = bool_arg(arg(&n, 5, "scale_grad_by_freq"), false).ok_or_else(|| no_rule(b, i, "scale_grad_by_freq"))?;
            if bool_arg(arg(&n, 6, "sparse"), false) != Some(false) {
                return Err(no_rule(b, i, "sparse"));
            }
            let ws = b.sizes(wj)?;
            let padding = match padding {
                None => -1,
                Some(p) if p < 0 => p + ws[0],
                Some(p) => p,
            };
            if b.requires_grad[wj] {
                let gw = b.call(
                    "torch.ops.aten.embedding_dense_backward.default",
                    vec![gn.clone(), xa.clone(), FxArg::Int(ws[0]), FxArg::Int(padding), FxArg::Bool(scale)],
                    vec![],
                )?;
                give!(wj, gw);
            }
        }
        "mse_loss" => {
            // mse_loss_backward: self: grad * 2 * (self - target) (/ numel for mean); target: the negation.
            if !matches!(arg(&n, 2, "size_average"), None | Some(FxArg::None)) || !matches!(arg(&n, 3, "reduce"), None | Some(FxArg::None)) {
                return Err(no_rule(b, i, "legacy reduction arguments"));
            }
            let reduction = match arg(&n, 4, "reduction") {
                None => "mean".to_string(),
                Some(FxArg::Str(s)) => s.clone(),
                _ => return Err(no_rule(b, i, "reduction")),
            };
            let t = arg(&n, 1, "target").cloned().unwrap_or(FxArg::None);
            let xs = x_sizes.clone().ok_or_else(|| no_rule(b, i, "input shape"))?;
            let FxArg::Node(tj) = t else { return Err(no_rule(b, i, "target")) };
            let ts = b.sizes(tj)?;
            if ts != xs {
                return Err(no_rule(b, i, "broadcast target"));
            }
            let numel: i64 = xs.iter().product();
            let scale = match reduction.as_str() {
                "mean" => 2.0 / numel as f64,
                "sum" | "none" => 2.0,
                _ => return Err(no_rule(b, i, "reduction")),
            };
            let d = b.sub(xa.clone(), node(tj))?;
            let d = b.mul(node(d), FxArg::Float(scale))?;
            let gx = b.mul(node(d), gn.clone())?;
            if let Some(j) = x {
                if b.requires_grad[j] {
                    give!(j, gx);
                }
            }
            if b.requires_grad[tj] {
                let gt = b.neg(node(gx))?;
                give!(tj, gt);
            }
        }
        "cross_entropy" | "nll_loss" => return nll_family(b, i, g, key == "cross_entropy"),
        "max_pool2d" => {
            let k = int_list(arg(&n, 1, "kernel_size"), 2, 1).ok_or_else(|| no_rule(b, i, "kernel_size"))?;
            let s = match arg(&n, 2, "stride") {
                None | Some(FxArg::None) => k.clone(),
                a => int_list(a, 2, 1).ok_or_else(|| no_rule(b, i, "stride"))?,
            };
            let p = int_list(arg(&n, 3, "padding"), 2, 0).ok_or_else(|| no_rule(b, i, "padding"))?;
            let d = int_list(arg(&n, 4, "dilation"), 2, 1).ok_or_else(|| no_rule(b, i, "dilation"))?;
            let ceil = bool_arg(arg(&n, 5, "ceil_mode"), false).ok_or_else(|| no_rule(b, i, "ceil_mode"))?;
            if bool_arg(arg(&n, 6, "return_indices"), false) != Some(false) {
                return Err(no_rule(b, i, "return_indices"));
            }
            // max_pool2d_with_indices_backward needs the argmax indices: recomputed here.
            unary(b, &mut out, &|b| {
                let fw = b.call(
                    "torch.ops.aten.max_pool2d_with_indices.default",
                    vec![xa.clone(), ints(&k), ints(&s), ints(&p), ints(&d), FxArg::Bool(ceil)],
                    vec![],
                )?;
                let idx = b.getitem(fw, 1)?;
                b.call(
                    "torch.ops.aten.max_pool2d_with_indices_backward.default",
                    vec![gn.clone(), xa.clone(), ints(&k), ints(&s), ints(&p), ints(&d), FxArg::Bool(ceil), node(idx)],
                    vec![],
                )
            })?
        }
        _ => return Err(no_rule(b, i, "")),
    }
    Ok(out)
}

/// softmax / log_softmax backward along `dim` (derivatives.yaml: `_softmax_backward_data`,
/// `_log_softmax_backward_data`): softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g),
/// in that order of operations (ATen's `_vec_host_softmax_backward_lastdim`), so the inductor
/// fuses it with the loss head around it (a cross-entropy's one-hot gradient, the log_softmax
/// recomputed from the logits). It rounds apart from eager's kernel in the last bit (eager's
/// `exp` is Sleef's and its row sum another order): Note [log_softmax gradient]. log_softmax of
/// a float16/bfloat16 tensor (`dtype`, the forward input's) calls torch's kernel
/// (`aten._log_softmax_backward_data`), which computes in float32 and rounds once, where these
/// ops would round after each.
/// Note [clamp at its bounds]: whether torch's derivative of `clamp` with number bounds passes
/// the gradient at an input equal to a bound. It did (`self >= min & self <= max`) up to torch
/// 2.11; torch 2.15 gives 0 there. Asked of torch once per process (`x.clamp(min=0)` at x = 0),
/// so the joint graph's mask is the one this torch's eager backward uses.
fn clamp_passes_bounds(py: pyo3::Python<'_>) -> bool {
    static PASSES: pyo3::sync::PyOnceLock<bool> = pyo3::sync::PyOnceLock::new();
    *PASSES.get_or_init(py, || {
        use pyo3::prelude::*;
        let probe = || -> PyResult<bool> { py.import("dynamo._functional")?.call_method0("clamp_passes_bounds")?.extract() };
        probe().unwrap_or(true)
    })
}

fn softmax_backward(b: &mut Builder<'_>, g: usize, y: usize, dim: i64, log: bool, dtype: Option<DType>) -> pyo3::PyResult<usize> {
    let torch_dtype = match dtype {
        Some(DType::F16) => Some("torch.float16"),
        Some(DType::BF16) => Some("torch.bfloat16"),
        _ => None,
    };
    if let (true, Some(path)) = (log, torch_dtype) {
        let dt = b.object(path)?;
        return b.call("torch.ops.aten._log_softmax_backward_data.default", vec![node(g), node(y), FxArg::Int(dim), dt], vec![]);
    }
    if log {
        let s = b.sum_dims(g, &[dim], true)?;
        let e = b.call("torch.exp", vec![node(y)], vec![])?;
        let t = b.mul(node(e), node(s))?;
        b.sub(node(g), node(t))
    } else {
        let gy = b.mul(node(g), node(y))?;
        let s = b.sum_dims(gy, &[dim], true)?;
        let t = b.mul(node(y), node(s))?;
        b.sub(node(gy), node(t))
    }
}

/// The index tensors of `x[idx]` when `idx` is one integer or bool tensor node, or a tuple of
/// only such nodes, none requiring grad (advanced indexing without slices); None otherwise.
fn tensor_indices(b: &Builder<'_>, idx: &FxArg) -> Option<Vec<FxArg>> {
    let index_tensor = |a: &FxArg| match a {
        FxArg::Node(j) if !b.requires_grad[*j] => {
            b.g.nodes[*j].meta.as_ref().is_some_and(|m| m.layout.dtype == DType::Bool || m.layout.dtype.is_int())
        }
        _ => false,
    };
    match idx {
        FxArg::Node(_) if index_tensor(idx) => Some(vec![idx.clone()]),
        FxArg::Tuple(items) if !items.is_empty() && items.iter().all(index_tensor) => Some(items.clone()),
        _ => None,
    }
}

/// `getitem(tuple_node, k)`: the gradient goes to element `k` of the tuple's gradient.
fn getitem(b: &mut Builder<'_>, i: usize, grad: Grad) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Grad::Tensor(g) = grad else { return Err(no_rule(b, i, "tuple gradient")) };
    let Some(FxArg::Node(src)) = n.args.first() else { return Err(no_rule(b, i, "indexing a non-node")) };
    if !super::joint::structured(&b.g, *src) {
        // Basic indexing of a tensor (ints, slices, None, ...): the gradient is scattered into
        // zeros of the input's sizes (derivatives.yaml: `select_backward`/`slice_backward`
        // composed; here one helper does `zeros[idx] = grad`). Advanced (tensor) indices have
        // no rule.
        fn basic(a: &FxArg) -> bool {
            match a {
                FxArg::Int(_) | FxArg::Slice { .. } | FxArg::None | FxArg::Ellipsis => true,
                FxArg::Tuple(items) => items.iter().all(|x| matches!(x, FxArg::Int(_) | FxArg::Slice { .. } | FxArg::None | FxArg::Ellipsis)),
                _ => false,
            }
        }
        let idx = n.args.get(1).cloned().unwrap_or(FxArg::None);
        if n.args.len() == 2 && !basic(&idx) {
            if let Some(indices) = tensor_indices(b, &idx) {
                // Advanced indexing by tensors only (`table[index]`, swin's relative position
                // bias; `x[rows, cols]`): derivatives.yaml's `index_backward`, the gradient
                // accumulated into zeros at the indexed positions (repeated indices add up).
                let xs = b.sizes(*src)?;
                let gx = b.call("dynamo.aot.index_backward", vec![node(g), ints(&xs), FxArg::Tuple(indices)], vec![])?;
                return Ok(vec![(*src, Grad::Tensor(gx))]);
            }
        }
        if n.args.len() != 2 || !basic(&idx) {
            return Err(no_rule(b, i, "advanced indexing"));
        }
        let xs = b.sizes(*src)?;
        let gx = b.call("dynamo.aot.getitem_backward", vec![node(g), ints(&xs), idx], vec![])?;
        return Ok(vec![(*src, Grad::Tensor(gx))]);
    }
    let Some(FxArg::Int(k)) = n.args.get(1) else { return Err(no_rule(b, i, "tuple index")) };
    let k = *k as usize;
    let mut v = vec![None; k + 1];
    v[k] = Some(g);
    Ok(vec![(*src, Grad::Tuple(v))])
}

/// split / chunk: the pieces' gradients concatenated along `dim` (zeros for unused pieces).
fn split(b: &mut Builder<'_>, i: usize, grad: Grad, key: &str) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Grad::Tuple(parts) = grad else { return Err(no_rule(b, i, "tensor gradient of a tuple")) };
    let Some(FxArg::Node(x)) = n.args.first() else { return Err(no_rule(b, i, "input")) };
    let x = *x;
    let xs = b.sizes(x)?;
    let rank = xs.len() as i64;
    let dim = match arg(&n, 2, "dim") {
        None => 0,
        Some(FxArg::Int(d)) => {
            if *d < 0 {
                d + rank
            } else {
                *d
            }
        }
        _ => return Err(no_rule(b, i, "dim")),
    };
    let total = xs[dim as usize];
    let sizes: Vec<i64> = match (key, arg(&n, 1, if key == "split" { "split_size_or_sections" } else { "chunks" })) {
        ("split", Some(FxArg::Int(s))) => {
            let s = *s;
            (0..total).step_by(s.max(1) as usize).map(|start| s.min(total - start)).collect()
        }
        ("split", Some(FxArg::List(v)) | Some(FxArg::Tuple(v))) => v.iter().map(|a| if let FxArg::Int(k) = a { Some(*k) } else { None }).collect::<Option<_>>().ok_or_else(|| no_rule(b, i, "sections"))?,
        ("chunk", Some(FxArg::Int(c))) => {
            let c = (*c).max(1);
            let s = (total + c - 1) / c;
            (0..total).step_by(s.max(1) as usize).map(|start| s.min(total - start)).collect()
        }
        _ => return Err(no_rule(b, i, "sizes")),
    };
    let mut pieces = Vec::new();
    for (k, &s) in sizes.iter().enumerate() {
        let p = match parts.get(k).copied().flatten() {
            Some(p) => p,
            None => {
                let mut shape = xs.clone();
                shape[dim as usize] = s;
                b.method("new_zeros", vec![node(x), ints(&shape)], vec![])
            }
        };
        pieces.push(node(p));
    }
    let gx = b.call("torch.cat", vec![FxArg::List(pieces), FxArg::Int(dim)], vec![])?;
    Ok(vec![(x, Grad::Tensor(gx))])
}

/// gelu's derivative times `g` as pointwise ops (torch's `GeluBackward` CPU kernel formulas):
/// exact: `g * (cdf + x * pdf)` with `cdf = 0.5 * (1 + erf(x / sqrt(2)))`,
/// `pdf = exp(-x^2 / 2) / sqrt(2 pi)`; tanh: with `u = sqrt(2/pi) * (x + 0.044715 x^3)`,
/// `g * (0.5 * (1 + tanh u) + 0.5 x * (1 - tanh(u)^2) * sqrt(2/pi) * (1 + 3 * 0.044715 x^2))`.
fn gelu_backward(b: &mut Builder<'_>, g: FxArg, x: FxArg, tanh: bool) -> pyo3::PyResult<usize> {
    let f = FxArg::Float;
    if !tanh {
        let t = b.mul(x.clone(), f(std::f64::consts::FRAC_1_SQRT_2))?;
        let e = b.call("torch.erf", vec![node(t)], vec![])?;
        let e = b.add(node(e), f(1.0))?;
        let cdf = b.mul(node(e), f(0.5))?;
        let x2 = b.mul(x.clone(), x.clone())?;
        let t = b.mul(node(x2), f(-0.5))?;
        let t = b.call("torch.exp", vec![node(t)], vec![])?;
        let pdf = b.mul(node(t), f(1.0 / (2.0 * std::f64::consts::PI).sqrt()))?;
        let xp = b.mul(x, node(pdf))?;
        let d = b.add(node(cdf), node(xp))?;
        return b.mul(g, node(d));
    }
    let beta = (2.0 / std::f64::consts::PI).sqrt();
    let kappa = 0.044715;
    let x2 = b.mul(x.clone(), x.clone())?;
    let x3 = b.mul(node(x2), x.clone())?;
    let inner = b.mul(node(x3), f(kappa))?;
    let inner = b.add(x.clone(), node(inner))?;
    let inner = b.mul(node(inner), f(beta))?;
    let th = b.call("torch.tanh", vec![node(inner)], vec![])?;
    let right = b.add(node(th), f(1.0))?;
    let left_d = b.mul(node(right), f(0.5))?;
    let th2 = b.mul(node(th), node(th))?;
    let sech2 = b.call("torch.rsub", vec![node(th2), f(1.0)], vec![])?;
    let poly = b.mul(node(x2), f(3.0 * kappa))?;
    let poly = b.add(node(poly), f(1.0))?;
    let left = b.mul(x, f(0.5))?;
    let r = b.mul(node(left), node(sech2))?;
    let r = b.mul(node(r), f(beta))?;
    let r = b.mul(node(r), node(poly))?;
    let d = b.add(node(left_d), node(r))?;
    b.mul(g, node(d))
}

/// scaled_dot_product_attention without dropout (derivatives.yaml: the math attention's
/// backward): recomputes p = softmax(q k^T * scale + mask) and returns
/// gq = (p * (g v^T - rowsum(p * g v^T))) k * scale, gk likewise with q, gv = p^T g
/// (`dynamo.aot.sdpa_backward`, an extern call). q, k, v must share their batch sizes, but for
/// `enable_gqa`'s key/value heads (a divisor of the query heads, dim -3); a float mask that
/// requires grad (T5's learned position bias) gets the scores' gradient summed to its shape.
fn sdpa(b: &mut Builder<'_>, i: usize, g: usize) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let tensor = |a: Option<&FxArg>| match a {
        Some(FxArg::Node(j)) => Some(*j),
        _ => None,
    };
    let (Some(q), Some(k), Some(v)) = (tensor(arg(&n, 0, "query")), tensor(arg(&n, 1, "key")), tensor(arg(&n, 2, "value"))) else {
        return Err(no_rule(b, i, "q, k, v"));
    };
    let mask = arg(&n, 3, "attn_mask").cloned().unwrap_or(FxArg::None);
    let mask_grad = float_mask_wanting_grad(b, &mask);
    if matches!(mask, FxArg::Node(j) if b.requires_grad[j] && !mask_grad) || !matches!(mask, FxArg::Node(_) | FxArg::None) {
        return Err(no_rule(b, i, "attn_mask"));
    }
    if arg(&n, 4, "dropout_p").is_some_and(|a| num(Some(a)) != Some(0.0)) {
        return Err(no_rule(b, i, "dropout"));
    }
    let causal = bool_arg(arg(&n, 5, "is_causal"), false).ok_or_else(|| no_rule(b, i, "is_causal"))?;
    let scale = match arg(&n, 6, "scale") {
        None | Some(FxArg::None) => FxArg::None,
        a => FxArg::Float(num(a).ok_or_else(|| no_rule(b, i, "scale"))?),
    };
    let gqa = bool_arg(arg(&n, 7, "enable_gqa"), false).ok_or_else(|| no_rule(b, i, "enable_gqa"))?;
    let (qs, ks, vs) = (b.sizes(q)?, b.sizes(k)?, b.sizes(v)?);
    let batch = |s: &[i64]| s[..s.len().saturating_sub(2)].to_vec();
    if qs.len() < 2 || ks.len() != qs.len() || vs.len() != qs.len() || batch(&ks) != batch(&vs) {
        return Err(no_rule(b, i, "broadcast batch dims"));
    }
    if batch(&qs) != batch(&ks) {
        // enable_gqa: the same leading dims, key/value heads dividing the query heads.
        let r = qs.len();
        let grouped = gqa && r >= 3 && qs[..r - 3] == ks[..r - 3] && ks[r - 3] > 0 && qs[r - 3] % ks[r - 3] == 0;
        if !grouped {
            return Err(no_rule(b, i, "broadcast batch dims"));
        }
    }
    let mask_node = if let FxArg::Node(j) = mask { Some(j) } else { None };
    let res = b.call(
        "dynamo.aot.sdpa_backward",
        vec![node(g), node(q), node(k), node(v), mask, FxArg::Bool(causal), scale, FxArg::Bool(gqa), FxArg::Bool(mask_grad)],
        vec![],
    )?;
    let mut out = Vec::new();
    for (pos, j) in [q, k, v].into_iter().enumerate() {
        if b.requires_grad[j] {
            let gj = b.getitem(res, pos as i64)?;
            out.push((j, Grad::Tensor(gj)));
        }
    }
    if let (true, Some(j)) = (mask_grad, mask_node) {
        let gm = b.getitem(res, 3)?;
        out.push((j, Grad::Tensor(gm)));
    }
    Ok(out)
}

/// Whether attention mask argument `mask` is a float tensor node that requires grad (its
/// gradient is the scores' gradient summed to its shape: `dynamo._functional.mask_gradient`).
/// A bool mask has no gradient.
fn float_mask_wanting_grad(b: &Builder<'_>, mask: &FxArg) -> bool {
    let FxArg::Node(j) = mask else { return false };
    b.requires_grad[*j] && matches!(b.g.nodes[*j].meta.as_ref().map(|m| m.layout.dtype), Some(DType::F32 | DType::F64 | DType::F16 | DType::BF16))
}

/// The fused attention forms of Note [flash attention] (python/dynamo/aot.py), whose backward
/// is torch's fused kernel reading statistics the forward returned (derivatives.yaml):
/// - `aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *,
///   attn_mask, scale) -> (output, logsumexp)`, backward
///   `_scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, output, logsumexp,
///   dropout_p, is_causal, *, attn_mask, scale)`;
/// - `dynamo._functional.sdpa_efficient(q, k, v, attn_bias, is_causal, scale) -> (output,
///   logsumexp)` (CUDA's memory-efficient kernel without dropout), backward
///   `dynamo._functional.sdpa_efficient_backward(grad, q, k, v, attn_bias, output, logsumexp,
///   is_causal, scale, needs)`, where `needs` says which of q, k, v need a gradient.
/// The forward graph reads every statistic with `getitem(node, j)`. Only the output is
/// differentiable (the statistics are not in eager either); dropout and masks that need a
/// gradient have no rule here.
fn sdpa_fused(b: &mut Builder<'_>, i: usize, grad: Grad, efficient: bool) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Grad::Tuple(parts) = grad else { return Err(no_rule(b, i, "tensor gradient of a tuple")) };
    if parts.iter().skip(1).any(|p| p.is_some()) {
        return Err(no_rule(b, i, "gradient of logsumexp"));
    }
    let Some(Some(g)) = parts.first().copied() else { return Ok(Vec::new()) };
    let tensor = |a: Option<&FxArg>| match a {
        Some(FxArg::Node(j)) => Some(*j),
        _ => None,
    };
    let (Some(q), Some(k), Some(v)) = (tensor(arg(&n, 0, "query")), tensor(arg(&n, 1, "key")), tensor(arg(&n, 2, "value"))) else {
        return Err(no_rule(b, i, "q, k, v"));
    };
    // Positions of is_causal, the mask and the scale in the two signatures; the efficient form
    // has no dropout argument.
    let (p_causal, mask, p_scale) = if efficient {
        (4, arg(&n, 3, "attn_bias").cloned().unwrap_or(FxArg::None), 5)
    } else {
        if arg(&n, 3, "dropout_p").is_some_and(|a| num(Some(a)) != Some(0.0)) {
            return Err(no_rule(b, i, "dropout"));
        }
        (4, arg(&n, 5, "attn_mask").cloned().unwrap_or(FxArg::None), 6)
    };
    let causal = bool_arg(arg(&n, p_causal, "is_causal"), false).ok_or_else(|| no_rule(b, i, "is_causal"))?;
    if matches!(mask, FxArg::Node(j) if b.requires_grad[j]) || !matches!(mask, FxArg::Node(_) | FxArg::None) {
        return Err(no_rule(b, i, "attn_mask"));
    }
    let scale = match arg(&n, p_scale, "scale") {
        None | Some(FxArg::None) => FxArg::None,
        a => FxArg::Float(num(a).ok_or_else(|| no_rule(b, i, "scale"))?),
    };
    let item = |b: &Builder<'_>, want: i64| {
        (0..b.g.nodes.len()).find(|&j| {
            let m = &b.g.nodes[j];
            m.canonical == Some("getitem") && matches!(m.args.as_slice(), [FxArg::Node(src), FxArg::Int(x)] if *src == i && *x == want)
        })
    };
    let (Some(out), Some(lse)) = (item(b, 0), item(b, 1)) else {
        return Err(no_rule(b, i, "output and logsumexp not read by getitem"));
    };
    let res = if efficient {
        let needs = FxArg::List([q, k, v].map(|j| FxArg::Bool(b.requires_grad[j])).to_vec());
        let args = vec![node(g), node(q), node(k), node(v), mask, node(out), node(lse), FxArg::Bool(causal), scale, needs];
        b.call("dynamo._functional.sdpa_efficient_backward", args, vec![])?
    } else {
        b.call(
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
            vec![node(g), node(q), node(k), node(v), node(out), node(lse), FxArg::Float(0.0), FxArg::Bool(causal)],
            vec![("attn_mask", mask), ("scale", scale)],
        )?
    };
    let mut grads = Vec::new();
    for (pos, j) in [q, k, v].into_iter().enumerate() {
        if b.requires_grad[j] {
            let gj = b.getitem(res, pos as i64)?;
            grads.push((j, Grad::Tensor(gj)));
        }
    }
    Ok(grads)
}

/// layer_norm (derivatives.yaml: `native_layer_norm_backward`), recomputing mean and rstd:
/// xhat = (x - mean) * rstd; gxhat = g * w;
/// gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) over the normalized dims;
/// gw = sum(g * xhat), gb = sum(g) over the leading dims.
/// The meta of a fresh contiguous tensor of `sizes` with `like`'s dtype and device: what a
/// forward-side statistic (Note [forward-side statistics] in partition.rs) computed from a
/// tensor of layout `like` holds.
fn contiguous_meta(like: &Layout, sizes: &[i64]) -> TensorMeta {
    TensorMeta {
        layout: Layout { sizes: sizes.to_vec(), strides: Layout::contiguous_strides(sizes), dtype: like.dtype, cpu: like.cpu },
        requires_grad: false,
    }
}

/// `torch._weight_norm(v, g, dim)`, `w = v * (g / n)` with `n` the 2-norm of `v` over every
/// dim but `dim` (all dims for -1), kept as size 1. derivatives.yaml's
/// `_weight_norm_interface_backward`, as ATen's CPU kernel computes it: with
/// `s = sum(grad * v)` over the same dims, `grad_g = s / n` and
/// `grad_v = (g / n) * (grad - v * (s / n^2))`. The norm is a forward value (Note
/// [forward-side statistics] in partition.rs): the forward's weight-norm kernel computes it too.
fn weight_norm(b: &mut Builder<'_>, i: usize, grad: usize) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let (Some(FxArg::Node(v)), Some(FxArg::Node(gj))) = (arg(&n, 0, "v"), arg(&n, 1, "g")) else {
        return Err(no_rule(b, i, "v and g"));
    };
    let (v, gj) = (*v, *gj);
    let vs = b.sizes(v)?;
    let rank = vs.len() as i64;
    let dims: Vec<i64> = match arg(&n, 2, "dim") {
        None => (1..rank).collect(),
        Some(FxArg::Int(-1)) => (0..rank).collect(),
        Some(FxArg::Int(d)) if (-rank..rank).contains(d) => {
            let keep = d.rem_euclid(rank);
            (0..rank).filter(|&k| k != keep).collect()
        }
        _ => return Err(no_rule(b, i, "dim")),
    };
    let layout = b.g.nodes[v].meta.as_ref().map(|m| m.layout.clone()).ok_or_else(|| no_rule(b, i, "v layout"))?;
    let stat_sizes: Vec<i64> = vs.iter().enumerate().map(|(d, &s)| if dims.contains(&(d as i64)) { 1 } else { s }).collect();
    let (full, stat) = (contiguous_meta(&layout, &vs), contiguous_meta(&layout, &stat_sizes));
    let sq = b.forward_call("torch.mul", "mul", vec![node(v), node(v)], full)?;
    let ss = b.forward_call("torch.ops.aten.sum.dim_IntList", "sum_unordered", vec![node(sq), ints(&dims), FxArg::Bool(true)], stat.clone())?;
    let norm = b.forward_call("torch.sqrt", "sqrt", vec![node(ss)], stat)?;
    let p = b.mul(node(grad), node(v))?;
    let s = b.sum_dims(p, &dims, true)?;
    let mut out = Vec::new();
    if b.requires_grad[v] {
        let scale = b.div(node(gj), node(norm))?;
        let t = b.div(node(s), node(ss))?;
        let vt = b.mul(node(v), node(t))?;
        let d = b.sub(node(grad), node(vt))?;
        let gv = b.mul(node(scale), node(d))?;
        out.push((v, Grad::Tensor(gv)));
    }
    if b.requires_grad[gj] {
        let gg = b.div(node(s), node(norm))?;
        let gs = b.sizes(gj)?;
        let gg = b.sum_to(gg, &stat_sizes, &gs)?;
        out.push((gj, Grad::Tensor(gg)));
    }
    Ok(out)
}

fn layer_norm(b: &mut Builder<'_>, i: usize, g: usize) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Some(FxArg::Node(x)) = n.args.first() else { return Err(no_rule(b, i, "input")) };
    let x = *x;
    let xs = b.sizes(x)?;
    let k = match arg(&n, 1, "normalized_shape") {
        Some(FxArg::Tuple(v)) | Some(FxArg::List(v)) => v.len(),
        Some(FxArg::Int(_)) => 1,
        _ => return Err(no_rule(b, i, "normalized_shape")),
    };
    let w = arg(&n, 2, "weight").cloned().unwrap_or(FxArg::None);
    let bias = arg(&n, 3, "bias").cloned().unwrap_or(FxArg::None);
    let eps = match arg(&n, 4, "eps") {
        None => 1e-5,
        a => num(a).ok_or_else(|| no_rule(b, i, "eps"))?,
    };
    let rank = xs.len();
    let dims: Vec<i64> = ((rank - k) as i64..rank as i64).collect();
    // The statistics are forward values (Note [forward-side statistics] in partition.rs): the
    // forward's layer-norm kernel computes them too, and the backward reads them.
    let layout = b.g.nodes[x].meta.as_ref().map(|m| m.layout.clone()).ok_or_else(|| no_rule(b, i, "input layout"))?;
    let stat_sizes: Vec<i64> = xs.iter().enumerate().map(|(d, &s)| if d >= rank - k { 1 } else { s }).collect();
    let (full, stat) = (contiguous_meta(&layout, &xs), contiguous_meta(&layout, &stat_sizes));
    let mean_of = |b: &mut Builder<'_>, v: usize| {
        b.forward_call("torch.ops.aten.mean.dim", "mean_unordered", vec![node(v), ints(&dims), FxArg::Bool(true)], stat.clone())
    };
    let mean = mean_of(b, x)?;
    let xc = b.forward_call("torch.sub", "sub", vec![node(x), node(mean)], full.clone())?;
    let sq = b.forward_call("torch.mul", "mul", vec![node(xc), node(xc)], full.clone())?;
    let var = mean_of(b, sq)?;
    let ve = b.forward_call("torch.add", "add", vec![node(var), FxArg::Float(eps)], stat.clone())?;
    let rstd = b.forward_call("torch.rsqrt", "rsqrt", vec![node(ve)], stat.clone())?;
    let xhat = b.mul(node(xc), node(rstd))?;
    let mut out = Vec::new();
    if b.requires_grad[x] {
        let gxhat = match &w {
            FxArg::Node(_) => b.mul(node(g), w.clone())?,
            _ => g,
        };
        let m1 = b.call("torch.mean", vec![node(gxhat), ints(&dims), FxArg::Bool(true)], vec![])?;
        let p = b.mul(node(gxhat), node(xhat))?;
        let m2 = b.call("torch.mean", vec![node(p), ints(&dims), FxArg::Bool(true)], vec![])?;
        let t = b.mul(node(xhat), node(m2))?;
        let d = b.sub(node(gxhat), node(m1))?;
        let d = b.sub(node(d), node(t))?;
        let gx = b.mul(node(d), node(rstd))?;
        out.push((x, Grad::Tensor(gx)));
    }
    if let FxArg::Node(wj) = w {
        if b.requires_grad[wj] {
            let gw = b.mul(node(g), node(xhat))?;
            let ws = b.sizes(wj)?;
            let gw = b.sum_to(gw, &xs, &ws)?;
            out.push((wj, Grad::Tensor(gw)));
        }
    }
    if let FxArg::Node(bj) = bias {
        if b.requires_grad[bj] {
            let bs = b.sizes(bj)?;
            let gb = b.sum_to(g, &xs, &bs)?;
            out.push((bj, Grad::Tensor(gb)));
        }
    }
    Ok(out)
}

/// batch_norm (derivatives.yaml: `native_batch_norm_backward`, torch's kernel as an extern call).
/// In training mode the batch statistics (save_mean, save_invstd) are recomputed in the backward
/// by torch's `native_batch_norm` (a second forward kernel; saving them from the forward would
/// need the forward node rewritten into `native_batch_norm`); in eval mode the running
/// statistics are used.
fn batch_norm(b: &mut Builder<'_>, i: usize, g: usize) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Some(FxArg::Node(x)) = n.args.first() else { return Err(no_rule(b, i, "input")) };
    let x = *x;
    b.sizes(x)?; // static sizes only, as the other rules
    let rm = arg(&n, 1, "running_mean").cloned().unwrap_or(FxArg::None);
    let rv = arg(&n, 2, "running_var").cloned().unwrap_or(FxArg::None);
    let w = arg(&n, 3, "weight").cloned().unwrap_or(FxArg::None);
    let bias = arg(&n, 4, "bias").cloned().unwrap_or(FxArg::None);
    let training = bool_arg(arg(&n, 5, "training"), false).ok_or_else(|| no_rule(b, i, "training"))?;
    let eps = match arg(&n, 7, "eps") {
        None => 1e-5,
        a => num(a).ok_or_else(|| no_rule(b, i, "eps"))?,
    };
    let wants_w = matches!(w, FxArg::Node(j) if b.requires_grad[j]);
    let wants_b = matches!(bias, FxArg::Node(j) if b.requires_grad[j]);
    let wants_x = b.requires_grad[x];
    let (save_mean, save_invstd, rm_arg, rv_arg) = if training {
        // The batch statistics exactly as the forward kernel computed them: torch's kernel
        // again, without running statistics (so nothing is updated twice). Recomputing mean and
        // variance with other ops differs in the last bits, which batch norms over few
        // elements (resnet18's last stages at small batch) amplify past 1e-4.
        let stats = b.call(
            "torch.ops.aten.native_batch_norm.default",
            vec![node(x), w.clone(), bias.clone(), FxArg::None, FxArg::None, FxArg::Bool(true), FxArg::Float(0.0), FxArg::Float(eps)],
            vec![],
        )?;
        let mean = b.getitem(stats, 1)?;
        let invstd = b.getitem(stats, 2)?;
        (node(mean), node(invstd), FxArg::None, FxArg::None)
    } else {
        if matches!(rm, FxArg::None) || matches!(rv, FxArg::None) {
            return Err(no_rule(b, i, "eval mode without running statistics"));
        }
        (FxArg::None, FxArg::None, rm.clone(), rv.clone())
    };
    let res = b.call(
        "torch.ops.aten.native_batch_norm_backward.default",
        vec![
            node(g),
            node(x),
            w.clone(),
            rm_arg,
            rv_arg,
            save_mean,
            save_invstd,
            FxArg::Bool(training),
            FxArg::Float(eps),
            FxArg::List(vec![FxArg::Bool(wants_x), FxArg::Bool(wants_w), FxArg::Bool(wants_b)]),
        ],
        vec![],
    )?;
    let mut out = Vec::new();
    if wants_x {
        let gx = b.getitem(res, 0)?;
        out.push((x, Grad::Tensor(gx)));
    }
    if let (FxArg::Node(j), true) = (&w, wants_w) {
        let gw = b.getitem(res, 1)?;
        out.push((*j, Grad::Tensor(gw)));
    }
    if let (FxArg::Node(j), true) = (&bias, wants_b) {
        let gb = b.getitem(res, 2)?;
        out.push((*j, Grad::Tensor(gb)));
    }
    Ok(out)
}

/// conv1d / conv2d (derivatives.yaml: `convolution_backward`, torch's kernel as an extern call).
fn convolution(b: &mut Builder<'_>, i: usize, g: usize, spatial: usize) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Some(FxArg::Node(x)) = n.args.first() else { return Err(no_rule(b, i, "input")) };
    let x = *x;
    let w = arg(&n, 1, "weight").cloned().unwrap_or(FxArg::None);
    let FxArg::Node(wj) = w else { return Err(no_rule(b, i, "weight")) };
    let bias = arg(&n, 2, "bias").cloned().unwrap_or(FxArg::None);
    let stride = int_list(arg(&n, 3, "stride"), spatial, 1).ok_or_else(|| no_rule(b, i, "stride"))?;
    let padding = int_list(arg(&n, 4, "padding"), spatial, 0).ok_or_else(|| no_rule(b, i, "padding"))?;
    let dilation = int_list(arg(&n, 5, "dilation"), spatial, 1).ok_or_else(|| no_rule(b, i, "dilation"))?;
    let groups = match arg(&n, 6, "groups") {
        None => 1,
        Some(FxArg::Int(k)) => *k,
        _ => return Err(no_rule(b, i, "groups")),
    };
    let ws = b.sizes(wj)?;
    let wants_b = matches!(bias, FxArg::Node(j) if b.requires_grad[j]);
    let bias_sizes = if matches!(bias, FxArg::Node(_)) { ints(&[ws[0]]) } else { FxArg::None };
    let mask = FxArg::List(vec![FxArg::Bool(b.requires_grad[x]), FxArg::Bool(b.requires_grad[wj]), FxArg::Bool(wants_b)]);
    let res = b.call(
        "torch.ops.aten.convolution_backward.default",
        vec![
            node(g),
            node(x),
            node(wj),
            bias_sizes,
            ints(&stride),
            ints(&padding),
            ints(&dilation),
            FxArg::Bool(false),
            ints(&vec![0; spatial]),
            FxArg::Int(groups),
            mask,
        ],
        vec![],
    )?;
    let mut out = Vec::new();
    if b.requires_grad[x] {
        let gx = b.getitem(res, 0)?;
        out.push((x, Grad::Tensor(gx)));
    }
    if b.requires_grad[wj] {
        let gw = b.getitem(res, 1)?;
        out.push((wj, Grad::Tensor(gw)));
    }
    if let (FxArg::Node(j), true) = (&bias, wants_b) {
        let gb = b.getitem(res, 2)?;
        out.push((*j, Grad::Tensor(gb)));
    }
    Ok(out)
}

/// cross_entropy (= nll_loss(log_softmax(x, 1))) and nll_loss with class-index targets
/// (derivatives.yaml: `nll_loss_backward`, `_log_softmax_backward_data`), written as pointwise
/// ops and reductions (Note [nll_loss gradient]); the total weight of "mean" is the number of
/// targets other than `ignore_index`.
fn nll_family(b: &mut Builder<'_>, i: usize, g: usize, with_log_softmax: bool) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let Some(FxArg::Node(x)) = n.args.first() else { return Err(no_rule(b, i, "input")) };
    let x = *x;
    if !b.requires_grad[x] {
        return Ok(Vec::new());
    }
    let Some(FxArg::Node(t)) = arg(&n, 1, "target").cloned() else { return Err(no_rule(b, i, "target")) };
    let xs = b.sizes(x)?;
    let ts = b.sizes(t)?;
    if b.requires_grad[t] || ts.len() + 1 != xs.len() || !(1..=2).contains(&xs.len()) {
        return Err(no_rule(b, i, "class-probability targets or spatial inputs"));
    }
    if !matches!(arg(&n, 2, "weight"), None | Some(FxArg::None))
        || !matches!(arg(&n, 3, "size_average"), None | Some(FxArg::None))
        || !matches!(arg(&n, 5, "reduce"), None | Some(FxArg::None))
    {
        return Err(no_rule(b, i, "weight or legacy reduction arguments"));
    }
    let ignore = match arg(&n, 4, "ignore_index") {
        None => -100,
        Some(FxArg::Int(k)) => *k,
        _ => return Err(no_rule(b, i, "ignore_index")),
    };
    let reduction = match arg(&n, 6, "reduction") {
        None => 1,
        Some(FxArg::Str(s)) if s == "mean" => 1,
        Some(FxArg::Str(s)) if s == "sum" => 2,
        Some(FxArg::Str(s)) if s == "none" => 0,
        _ => return Err(no_rule(b, i, "reduction")),
    };
    if with_log_softmax {
        if !matches!(arg(&n, 7, "label_smoothing"), None) && num(arg(&n, 7, "label_smoothing")) != Some(0.0) {
            return Err(no_rule(b, i, "label_smoothing"));
        }
    }
    let class_dim = if xs.len() == 2 { 1 } else { 0 };
    let classes = xs[class_dim as usize];
    // Note [nll_loss gradient]: nll_loss's gradient is written as pointwise ops and one
    // reduction that the inductor fuses (ATen's `nll_loss_backward` would be a fallback, plus
    // `nll_loss_forward` run again for the total weight). With `w[i]` the gradient reaching
    // row i (`grad / total_weight` for "mean", `grad` for "sum", `grad[i]` for "none"; 0 for
    // rows whose target is `ignore_index`) and `onehot[i, j] = (j == target[i])`:
    //   nll_loss: d/dx[i, j] = -w[i] * onehot[i, j]
    // computed as ATen does (`-(grad / total_weight)`), so its bits are eager's.
    // Note [log_softmax gradient]: for cross_entropy the log_softmax gradient of float32 logits
    // is written as pointwise ops too (`softmax_backward`), one kernel with the one-hot gradient
    // and the log_softmax it reads. It used to stay ATen's `_log_softmax_backward_data`, for its
    // bits: ops round apart from it in the last bit, and AdamW's first step
    // `m / (sqrt(v) + eps)` turns such differences in a near-zero gradient into up to 2 lr in
    // the parameter. pytests/autograd/test_training.py bounds those elements by that (the
    // others stay within 1e-4), and the 100-step loss curves of the MLP and resnet18 still
    // track eager's within 1e-4. In tiny BERT's backward the ATen call took 19-26 us a step,
    // its fused kernel about 11.
    // The class iota is `new_ones(C).cumsum(0) - 1` of the target, which constant folding
    // turns into a constant of the target's device.
    let valid = b.call("torch.ne", vec![node(t), FxArg::Int(ignore)], vec![])?;
    let per_row = if reduction == 1 {
        // Counted in the gradient's dtype, as ATen's total weight (a float sum is a kernel
        // reduction; the 1 is a 0-d constant after folding).
        let one = b.method("new_ones", vec![node(g), ints(&[])], vec![]);
        let counted = b.call("torch.where", vec![node(valid), node(one), FxArg::Float(0.0)], vec![])?;
        let total = b.call("torch.sum", vec![node(counted)], vec![])?;
        b.div(node(g), node(total))?
    } else {
        g
    };
    // `-w`, with ignored rows +0.0 as ATen's zero-filled gradient.
    let neg_row = b.neg(node(per_row))?;
    let nw = b.call("torch.where", vec![node(valid), node(neg_row), FxArg::Float(0.0)], vec![])?;
    let nw = b.method("unsqueeze", vec![node(nw), FxArg::Int(-1)], vec![]);
    let ones = b.method("new_ones", vec![node(t), ints(&[classes])], vec![]);
    let iota1 = b.method("cumsum", vec![node(ones), FxArg::Int(0)], vec![]);
    let iota = b.sub(node(iota1), FxArg::Int(1))?;
    let tcol = b.method("unsqueeze", vec![node(t), FxArg::Int(-1)], vec![]);
    let onehot = b.call("torch.eq", vec![node(iota), node(tcol)], vec![])?;
    let gl = b.call("torch.where", vec![node(onehot), node(nw), FxArg::Float(0.0)], vec![])?;
    let gx = if with_log_softmax {
        let dtype = b.g.nodes[x].meta.as_ref().map(|m| m.layout.dtype);
        let logp = match b.g.nodes[x].meta.as_ref().map(|m| m.layout.clone()) {
            // Note [forward-side statistics] (partition.rs): the row max and the sum of
            // exp(x - max) are forward values, the same sums the forward's cross-entropy kernel
            // makes, so it stores them and the backward does not reduce the logits again;
            // log_softmax = (x - max) - log(sum), in ATen's order of operations.
            Some(layout) if matches!(dtype, Some(DType::F32 | DType::F64)) => {
                let mut stat_sizes = xs.clone();
                stat_sizes[class_dim as usize] = 1;
                let (full, stat) = (contiguous_meta(&layout, &xs), contiguous_meta(&layout, &stat_sizes));
                let dims = ints(&[class_dim]);
                let m = b.forward_call("torch.amax", "amax", vec![node(x), dims.clone(), FxArg::Bool(true)], stat.clone())?;
                let xm = b.forward_call("torch.sub", "sub", vec![node(x), node(m)], full.clone())?;
                let e = b.forward_call("torch.exp", "exp", vec![node(xm)], full)?;
                let s = b.forward_call("torch.ops.aten.sum.dim_IntList", "sum_unordered", vec![node(e), dims, FxArg::Bool(true)], stat)?;
                let shifted = b.sub(node(x), node(m))?;
                let ls = b.call("torch.log", vec![node(s)], vec![])?;
                b.sub(node(shifted), node(ls))?
            }
            _ => b.call("torch.log_softmax", vec![node(x), FxArg::Int(class_dim)], vec![])?,
        };
        softmax_backward(b, gl, logp, class_dim, true, dtype)?
    } else {
        gl
    };
    let _ = FxOp::Output;
    Ok(vec![(x, Grad::Tensor(gx))])
}

// Note [torch's derivative for rule-less ops]: a forward op on a differentiable path that has
// no rule here (softplus, var, norm, select, topk, avg_pool2d, group_norm, interpolate, a loss,
// `autograd.Function.apply`, ... : 80 of 90 ops of a sweep) used to split the training graph:
// the op ran through torch's autograd between two compiled segments, each a separate
// `autograd.Function` with its own saved tensors, and nothing fused across the cut. Instead its
// backward becomes one call of `dynamo._functional.vjp_call`, which runs the op again on
// detached copies of its differentiable arguments under `enable_grad` and returns
// `torch.autograd.grad` of it: torch's own derivative formula (derivatives.yaml, or the
// Function's `backward`), so the values are eager's. The op's arguments are saved for the
// backward, as eager saves them for most ops; the cost is the op computed twice and one
// Python-level autograd call per backward. Not for ops whose second run would differ from the
// first: in-place methods (functionalization has already turned the ones it can into copies),
// ops that draw random numbers (dropout variants, `rrelu`, `bernoulli`, `multinomial`, `rand*`,
// `normal`, `gumbel_softmax`: their noise would be drawn again) or take a `generator`, or
// whose second run would write state again ([`writes_state`]); nor for a differentiable
// argument that is a structure (a split's tuple): those keep the split.
const RANDOM_OPS: &[&str] = &[
    "rrelu", "bernoulli", "multinomial", "normal", "poisson", "gumbel_softmax", "uniform", "exponential", "geometric",
    "cauchy", "log_normal",
];

/// Whether the op named by the dotted path `target` draws random numbers (Note [torch's
/// derivative for rule-less ops]): its last component, without a trailing `_`, is a dropout, a
/// `rand*` or one of [`RANDOM_OPS`] (`normalize` is not `normal`).
pub(crate) fn draws_random(target: &str) -> bool {
    let last = target.rsplit('.').next().unwrap_or(target).trim_end_matches('_').to_ascii_lowercase();
    last.contains("dropout") || last.starts_with("rand") || RANDOM_OPS.contains(&last.as_str())
}

/// Whether running node `n` again could draw other random numbers or write state a second time
/// (Note [torch's derivative for rule-less ops]): attention and recurrent ops (their dropout),
/// batch norm (running statistics), instance norm given running statistics, embedding with
/// `max_norm` (renormalizes the weight in place).
fn writes_state(n: &crate::inductor::fx_import::FxNode) -> bool {
    let last = n.target_name.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    let given = |pos: usize, name: &str| arg(n, pos, name).is_some_and(|a| !matches!(a, FxArg::None));
    // Note [attention without dropout]: attention draws random numbers only for its dropout;
    // with a literal `dropout_p` of 0 (torchvision's ViT, `nn.MultiheadAttention(dropout=0.0)`)
    // a second run gives the same values, so it takes torch's derivative like any rule-less op
    // instead of splitting the training graph around it.
    if last.contains("attention") {
        let position = if last.contains("multi_head") { 10 } else { 4 };
        return match arg(n, position, "dropout_p") {
            None if !last.contains("multi_head") => false,
            Some(FxArg::Float(p)) => *p != 0.0,
            Some(FxArg::Int(p)) => *p != 0,
            _ => true,
        };
    }
    ["lstm", "gru", "rnn", "batch_norm"].iter().any(|k| last.contains(k))
        || (last.contains("instance_norm") && given(1, "running_mean"))
        || (last.contains("embedding") && given(3, "max_norm"))
}

/// Whether node `i` is a view op (by name) whose value leaves the graph, itself or through
/// further view steps: such an output must be eager's view (its `_base`, its in-place errors), so
/// the op keeps its own segment, where torch makes the view.
fn view_of_output(b: &Builder<'_>, i: usize) -> bool {
    const VIEW_OPS: &[&str] = &[
        "expand_as", "view_as", "reshape_as", "narrow", "select", "movedim", "moveaxis", "diagonal", "unfold", "as_strided",
        "unflatten", "swapaxes", "swapdims", "unbind", "split_with_sizes", "view", "reshape", "flatten", "transpose", "t",
        "permute", "unsqueeze", "squeeze", "expand", "getitem", "T", "mT", "H", "mH", "real", "imag", "detach",
    ];
    let name = |j: usize| {
        let n = &b.g.nodes[j];
        let key = op_key(n).unwrap_or_else(|| n.target_name.rsplit('.').next().unwrap_or(""));
        // Indexing with a tensor (advanced indexing) copies.
        let mut tensor_index = false;
        if key == "getitem" {
            n.args.iter().skip(1).for_each(|a| a.for_each_node(&mut |_| tensor_index = true));
        }
        if tensor_index { String::new() } else { key.to_string() }
    };
    if !VIEW_OPS.contains(&name(i).as_str()) {
        return false;
    }
    let outputs: Vec<FxArg> = match b.g.nodes[b.g.output].args.first() {
        Some(FxArg::Tuple(items)) | Some(FxArg::List(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => Vec::new(),
    };
    outputs.iter().any(|o| {
        let FxArg::Node(mut j) = o else { return false };
        loop {
            if j == i {
                return true;
            }
            match b.g.nodes[j].args.first() {
                Some(FxArg::Node(k)) if VIEW_OPS.contains(&name(j).as_str()) => j = *k,
                _ => return false,
            }
        }
    })
}

/// The backward of rule-less node `i` through torch's autograd (Note [torch's derivative for
/// rule-less ops]): one `dynamo._functional.vjp_call` node and a `getitem` per differentiable
/// argument. Fails with [`JointError::NoRule`] for the ops the Note excludes.
pub fn torch_vjp(b: &mut Builder<'_>, i: usize, grad: Grad) -> Result<Out, JointError> {
    let n = b.g.nodes[i].clone();
    let (fn_arg, method) = match &n.op {
        // By dotted path (a function object in the arguments would not print as Python): only
        // when the path names the very object the node calls.
        FxOp::CallFunction { target } => {
            // A custom autograd.Function's apply keeps its own segment: a second run would run
            // its Python forward twice (Note [custom autograd.Function] in
            // src/symbolic/variables/functions.rs).
            if pyo3::types::PyAnyMethods::hasattr(b.g.side_table[*target].bind(b.py), "dynamo_autograd_function").unwrap_or(false) {
                return Err(no_rule(b, i, "a custom autograd.Function runs its forward once, through torch's autograd"));
            }
            let same = super::joint::resolve(b.py, &n.target_name).is_ok_and(|o| o.as_ptr() == b.g.side_table[*target].bind(b.py).as_ptr());
            if !same {
                return Err(no_rule(b, i, "its function has no importable path"));
            }
            (FxArg::Str(n.target_name.clone()), FxArg::None)
        }
        FxOp::CallMethod { name } if !name.ends_with('_') || name.starts_with("__") => (FxArg::None, FxArg::Str(name.clone())),
        _ => return Err(no_rule(b, i, "")),
    };
    let on_copy_method = match (n.target_name.ends_with("method_on_copy"), n.args.get(1)) {
        (true, Some(FxArg::Str(m))) => m.as_str(),
        _ => "",
    };
    if n.inplace
        || draws_random(&n.target_name)
        || draws_random(on_copy_method)
        || n.kwargs.iter().any(|(k, _)| k == "generator")
        || writes_state(&n)
    {
        return Err(no_rule(b, i, "its second run would differ"));
    }
    if view_of_output(b, i) {
        return Err(no_rule(b, i, "a view op whose value is returned"));
    }
    // Slot k for each distinct differentiable tensor argument, in order of first appearance.
    let mut wanted: Vec<usize> = Vec::new();
    fn slots_of(a: &FxArg, b: &Builder<'_>, wanted: &mut Vec<usize>, structured: &mut bool) -> FxArg {
        match a {
            FxArg::Node(j) if b.requires_grad[*j] => {
                if b.g.nodes[*j].meta.is_none() {
                    *structured = true;
                    return FxArg::None;
                }
                let k = wanted.iter().position(|w| w == j).unwrap_or_else(|| {
                    wanted.push(*j);
                    wanted.len() - 1
                });
                FxArg::Int(k as i64)
            }
            FxArg::Tuple(items) => FxArg::Tuple(items.iter().map(|x| slots_of(x, b, wanted, structured)).collect()),
            FxArg::List(items) => FxArg::List(items.iter().map(|x| slots_of(x, b, wanted, structured)).collect()),
            _ => FxArg::None,
        }
    }
    let mut structured = false;
    let slots: Vec<FxArg> = n.args.iter().map(|a| slots_of(a, b, &mut wanted, &mut structured)).collect();
    let kw_slots: Vec<FxArg> = n.kwargs.iter().map(|(_, a)| slots_of(a, b, &mut wanted, &mut structured)).collect();
    if structured {
        return Err(no_rule(b, i, "a differentiable argument is a structure"));
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let present = match &grad {
        Grad::Tensor(_) => FxArg::Bool(true),
        Grad::Tuple(v) => FxArg::Tuple(v.iter().map(|o| FxArg::Bool(o.is_some())).collect()),
    };
    let op_args = [fn_arg.clone(), method.clone(), FxArg::Tuple(n.args.clone()), FxArg::Tuple(n.kwargs.iter().map(|(k, _)| FxArg::Str(k.clone())).collect()),
        FxArg::Tuple(n.kwargs.iter().map(|(_, v)| v.clone()).collect()), FxArg::Tuple(slots.clone()), FxArg::Tuple(kw_slots.clone())];
    let (undefined, value_free) = undefined_derivatives(b, &op_args, &present, wanted.len());
    if undefined.iter().all(|&u| u) {
        return Ok(Vec::new());
    }
    // Note [value-free backward].
    let mut op_call_args = n.args.clone();
    let mut op_kw_values: Vec<FxArg> = n.kwargs.iter().map(|(_, v)| v.clone()).collect();
    if value_free {
        if let Some(map) = stand_ins(b, op_call_args.iter().chain(op_kw_values.iter()))? {
            let swap = |a: &FxArg| swap_nodes(a, &map);
            op_call_args = op_call_args.iter().map(swap).collect();
            op_kw_values = op_kw_values.iter().map(swap).collect();
        }
    }
    let grads = match grad {
        Grad::Tensor(g) => node(g),
        Grad::Tuple(v) => FxArg::Tuple(v.into_iter().map(|o| o.map(node).unwrap_or(FxArg::None)).collect()),
    };
    let call = b.call(
        "dynamo._functional.vjp_call",
        vec![
            fn_arg,
            method,
            FxArg::Tuple(op_call_args),
            FxArg::Tuple(n.kwargs.iter().map(|(k, _)| FxArg::Str(k.clone())).collect()),
            FxArg::Tuple(op_kw_values),
            FxArg::Tuple(slots),
            FxArg::Tuple(kw_slots),
            grads,
            FxArg::Int(wanted.len() as i64),
        ],
        vec![],
    )?;
    let mut out: Out = Vec::new();
    for (k, j) in wanted.into_iter().enumerate() {
        if undefined[k] {
            continue;
        }
        let gk = b.getitem(call, k as i64)?;
        out.push((j, Grad::Tensor(gk)));
    }
    Ok(out)
}

// Note [value-free backward]: `vjp_call` runs the op again on its arguments, so the joint graph
// made the backward read every tensor argument of the op, and the partitioner saved them: a
// graph input or output among them was then checked by autograd's version counter at
// `ctx.saved_tensors`, where eager saved nothing. `v = x * 2; y = v.clone()` compiled, then
// `v.add_(1)` after a graph break and `y.sum().backward()` raised "one of the variables needed
// for gradient computation has been modified by an inplace operation" (eager: fine; HF Longformer
// could not train). Which tensors an op's backward reads is torch's knowledge, so the compile-time
// probe on meta tensors (`dynamo._functional.vjp_probe`) also says whether eager's autograd
// saves any tensor for the op (clone, contiguous, slicing, as_strided, expand, sum save none):
// then its gradients depend only on the arguments' layouts, and the backward runs the op on
// zero-filled stand-ins of the same sizes, strides and dtype (`dynamo._functional.stand_in`,
// made in the backward from constants), so nothing of the forward is saved for it, as in eager.
// Only for CPU tensors with a static layout; others keep the real arguments.

/// For the tensor nodes `args` mention, a stand-in node each (`dynamo._functional.stand_in`,
/// Note [value-free backward]) as `(forward node, stand-in node)` pairs; None when one of them
/// has no static CPU layout with a named dtype.
fn stand_ins<'a>(b: &mut Builder<'_>, args: impl Iterator<Item = &'a FxArg>) -> Result<Option<Vec<(usize, usize)>>, JointError> {
    let mut nodes = Vec::new();
    for a in args {
        a.for_each_node(&mut |j| {
            if !nodes.contains(&j) {
                nodes.push(j)
            }
        });
    }
    let mut layouts = Vec::new();
    for &j in &nodes {
        let Some(m) = &b.g.nodes[j].meta else { return Ok(None) };
        let l = &m.layout;
        let Some(dtype) = l.dtype.torch_name() else { return Ok(None) };
        if !l.cpu || l.sizes.len() != l.strides.len() {
            return Ok(None);
        }
        layouts.push((j, l.sizes.clone(), l.strides.clone(), dtype));
    }
    let mut map = Vec::new();
    for (j, sizes, strides, dtype) in layouts {
        let s = b.call("dynamo._functional.stand_in", vec![ints(&sizes), ints(&strides), FxArg::Str(dtype.to_string())], vec![])?;
        map.push((j, s));
    }
    Ok(Some(map))
}

/// `a` with each node of `map`'s first column replaced by its second.
fn swap_nodes(a: &FxArg, map: &[(usize, usize)]) -> FxArg {
    match a {
        FxArg::Node(j) => FxArg::Node(map.iter().find(|(f, _)| f == j).map_or(*j, |(_, s)| *s)),
        FxArg::Tuple(items) => FxArg::Tuple(items.iter().map(|x| swap_nodes(x, map)).collect()),
        FxArg::List(items) => FxArg::List(items.iter().map(|x| swap_nodes(x, map)).collect()),
        other => other.clone(),
    }
}

// Note [undefined derivatives]: torch's autograd leaves some derivatives undefined rather than
// zero: `linalg_vector_norm(x, ord=0)` (piecewise constant) gives its input no gradient at all,
// and the engine passes nothing on from such an edge. A leaf reached only through one keeps
// `.grad` None in eager, and optimizers skip a None gradient where they step a zero one (AdamW's
// weight decay, momentum). `vjp_call` fills a missing gradient with zeros (the backward graph's
// values are tensors), so which of its gradients torch leaves undefined is asked at compile time
// on meta tensors (`dynamo._functional.vjp_undefined`), and those edges give no gradient in the
// joint graph: an input whose every edge is such gets None, as in eager. A probe that fails
// (an op without a meta kernel, symbolic sizes) leaves every gradient defined, as before. A
// custom `autograd.Function` returning None keeps its own segment (Note [custom
// autograd.Function]), whose missing gradients stay None across segments (Note [gradients of
// unused outputs] in python/dynamo/aot.py).

/// For rule-less node arguments `op_args` (the first seven arguments of `vjp_call`: function,
/// method, args, keyword names and values, slots, keyword slots) and `present` (which of the
/// op's values get a gradient: a bool or a tuple of bools), which of the `n_wanted` gradients
/// torch's autograd leaves undefined (Note [undefined derivatives]); all false when the probe
/// cannot run. The second value: whether eager's autograd saves no tensor for the op (Note
/// [value-free backward]); false when the probe cannot run.
fn undefined_derivatives(b: &Builder<'_>, op_args: &[FxArg], present: &FxArg, n_wanted: usize) -> (Vec<bool>, bool) {
    use pyo3::prelude::*;
    let py = b.py;
    let probe = || -> PyResult<Vec<bool>> {
        let values = std::collections::HashMap::new();
        let conv = |a: &FxArg| crate::inductor::layout::arg_to_py(py, a, &b.g.nodes, &b.g.side_table, &values);
        let mut call_args = op_args.iter().map(conv).collect::<PyResult<Vec<_>>>()?;
        call_args.push(conv(present)?);
        call_args.push(n_wanted.into_pyobject(py)?.into_any());
        py.import("dynamo._functional")?.getattr("vjp_probe")?.call1(pyo3::types::PyTuple::new(py, call_args)?)?.extract()
    };
    // Asked once per distinct op, constant arguments and tensor layouts in the process (about
    // 2 ms a probe; a model repeats its layers).
    static ASKED: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashMap<String, Vec<bool>>>> = std::sync::LazyLock::new(Default::default);
    let mut key: Result<String, ()> = Ok(String::new());
    for a in op_args.iter().chain(std::iter::once(present)) {
        probe_key(b, a, &mut key);
        if let Ok(k) = &mut key {
            k.push('|');
        }
    }
    let split = |mut v: Vec<bool>| {
        let free = v.pop().unwrap_or(false);
        (v, free)
    };
    if let Some(v) = key.as_ref().ok().and_then(|k: &String| ASKED.lock().get(k).cloned()) {
        return split(v);
    }
    let v = match probe() {
        Ok(v) if v.len() == n_wanted + 1 => v,
        _ => vec![false; n_wanted + 1],
    };
    if let Ok(k) = key {
        ASKED.lock().insert(k, v.clone());
    }
    split(v)
}

/// Appends to `key` what the answer of [`undefined_derivatives`] depends on in `a`: constants
/// as written, a node as its layout (sizes, strides, dtype, device), a Python object by its
/// `repr`. `Err` (no caching) for a node without a static layout or a failing `repr`.
fn probe_key(b: &Builder<'_>, a: &FxArg, key: &mut Result<String, ()>) {
    use pyo3::prelude::*;
    use std::fmt::Write;
    let Ok(k) = key else { return };
    match a {
        FxArg::Node(j) => match &b.g.nodes[*j].meta {
            Some(m) => {
                let l = &m.layout;
                let _ = write!(k, "T{:?}{:?}{:?}{}", l.sizes, l.strides, l.dtype, l.cpu);
            }
            None => *key = Err(()),
        },
        FxArg::Tuple(items) | FxArg::List(items) => {
            k.push(if matches!(a, FxArg::Tuple(_)) { '(' } else { '[' });
            for x in items {
                probe_key(b, x, key);
                if let Ok(k) = key {
                    k.push(',');
                }
            }
            if let Ok(k) = key {
                k.push(')');
            }
        }
        FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } | FxArg::Py(i) => match b.g.side_table[*i].bind(b.py).repr() {
            Ok(r) => {
                let _ = write!(k, "P{}", r.to_string_lossy());
            }
            Err(_) => *key = Err(()),
        },
        other => {
            let _ = write!(k, "{other:?}");
        }
    }
}
