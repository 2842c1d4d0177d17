//! Import of a `torch.fx.GraphModule` into plain Rust data ([`FxGraph`]), with a `TensorMeta` per
//! tensor-valued node.
//!
//! Invariants:
//! - Nodes keep fx order (topological); `FxArg::Node(i)` always refers to an earlier node.
//! - The only Python objects kept are in `side_table` (call targets, get_attr values, constants
//!   that have no Rust form); the IR refers to them by index.
//! - Meta comes from `node.meta["example_value"]` (set by dynamo) or `node.meta["val"]`; when some
//!   node has neither, `FakeTensorProp` is run on the example inputs first. Placeholder meta is read
//!   from the example inputs themselves. Symbolic sizes make a node's meta `None`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::intern;

use super::ir::{DType, Layout};

/// Metadata of one tensor value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    pub layout: Layout,
    pub requires_grad: bool,
}

/// A node argument, decoded. `Py` holds a side-table index for anything else (dtype, slice...).
#[derive(Clone, Debug)]
pub enum FxArg {
    Node(usize),
    Int(i64),
    Float(f64),
    Bool(bool),
    None,
    Tuple(Vec<FxArg>),
    List(Vec<FxArg>),
    /// A Python `str` (for example `approximate="tanh"`).
    Str(String),
    /// A `slice` with int or None bounds; `py` is the side-table entry of the slice object.
    Slice { start: Option<i64>, stop: Option<i64>, step: Option<i64>, py: usize },
    /// `...`
    Ellipsis,
    /// A `torch.dtype`; `py` is the side-table entry of the dtype object.
    Dtype { dtype: DType, py: usize },
    Py(usize),
}

impl FxArg {
    /// Calls `f` on every node this argument mentions.
    pub fn for_each_node(&self, f: &mut impl FnMut(usize)) {
        match self {
            FxArg::Node(i) => f(*i),
            FxArg::Tuple(items) | FxArg::List(items) => items.iter().for_each(|a| a.for_each_node(f)),
            _ => {}
        }
    }
}

/// What an fx node does.
#[derive(Clone, Debug)]
pub enum FxOp {
    /// Graph input number `position`.
    Placeholder { position: usize },
    /// `target(*args, **kwargs)`; `target` is a side-table index.
    CallFunction { target: usize },
    /// `args[0].<name>(*args[1:], **kwargs)`.
    CallMethod { name: String },
    /// A module attribute; its value is side-table entry `value`.
    GetAttr { value: usize },
    /// Calls a submodule; run as a fallback.
    CallModule { target: usize },
    Output,
}

/// One imported fx node.
#[derive(Clone, Debug)]
pub struct FxNode {
    pub name: String,
    pub op: FxOp,
    /// Canonical op name for the lowering table (`"add"`, `"sin"`, ...), when recognized.
    pub canonical: Option<&'static str>,
    /// The target as torch.fx prints it (`torch.matmul`, `view`, `lin`), for plans and logs.
    pub target_name: String,
    pub args: Vec<FxArg>,
    pub kwargs: Vec<(String, FxArg)>,
    /// Meta of the node's value when it is a tensor with static sizes.
    pub meta: Option<TensorMeta>,
    /// Indices of nodes that use this one.
    pub users: Vec<usize>,
    /// The node was an in-place op on its first argument and now holds its functional form
    /// (see [`super::functionalize`]); its value is the new value of that argument.
    pub inplace: bool,
    /// fx `meta["recompute"]` was set: the node comes from an activation-checkpointed region
    /// (Note [activation checkpointing] in src/autograd/partition.rs).
    pub recompute: bool,
}

/// Recomputes every node's `users` from the arguments of the nodes after it.
pub fn set_users(nodes: &mut [FxNode]) {
    for node in nodes.iter_mut() {
        node.users.clear();
    }
    for i in 0..nodes.len() {
        let mut used = Vec::new();
        for a in nodes[i].args.iter().chain(nodes[i].kwargs.iter().map(|(_, a)| a)) {
            a.for_each_node(&mut |j| used.push(j));
        }
        used.sort_unstable();
        used.dedup();
        for j in used {
            nodes[j].users.push(i);
        }
    }
}

/// The imported graph.
pub struct FxGraph {
    pub nodes: Vec<FxNode>,
    pub side_table: Vec<Py<PyAny>>,
    /// Index of the `output` node.
    pub output: usize,
    /// Mutated inputs to write back after the graph (set by [`super::functionalize`]).
    pub writebacks: Vec<super::functionalize::Writeback>,
}

/// Why import failed; the graph then runs through `gm.forward`.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("unsupported fx graph: {0}")]
    Unsupported(String),
    #[error("python error during import: {0}")]
    Python(#[from] PyErr),
}

/// Table of call_function targets we lower: (module, attribute) -> canonical name.
const FUNCTION_TARGETS: &[(&str, &str, &str)] = &[
    ("operator", "add", "add"),
    ("operator", "sub", "sub"),
    ("operator", "mul", "mul"),
    ("operator", "truediv", "div"),
    ("operator", "neg", "neg"),
    ("operator", "pos", "pos"),
    ("operator", "abs", "abs"),
    ("operator", "pow", "pow"),
    ("operator", "gt", "gt"),
    ("operator", "lt", "lt"),
    ("operator", "ge", "ge"),
    ("operator", "le", "le"),
    ("operator", "eq", "eq"),
    ("operator", "ne", "ne"),
    ("operator", "and_", "bitwise_and"),
    ("operator", "or_", "bitwise_or"),
    ("operator", "invert", "bitwise_not"),
    ("torch", "add", "add"),
    ("torch", "sub", "sub"),
    ("torch", "subtract", "sub"),
    ("torch", "mul", "mul"),
    ("torch", "multiply", "mul"),
    ("torch", "div", "div"),
    ("torch", "divide", "div"),
    ("torch", "true_divide", "div"),
    ("torch", "neg", "neg"),
    ("torch", "negative", "neg"),
    ("torch", "abs", "abs"),
    ("torch", "relu", "relu"),
    ("torch.nn.functional", "relu", "relu"),
    ("torch", "sigmoid", "sigmoid"),
    ("torch.nn.functional", "sigmoid", "sigmoid"),
    ("torch", "tanh", "tanh"),
    ("torch.nn.functional", "tanh", "tanh"),
    ("torch", "exp", "exp"),
    ("torch", "log", "log"),
    ("torch", "sqrt", "sqrt"),
    ("torch", "sin", "sin"),
    ("torch", "cos", "cos"),
    ("torch", "reciprocal", "reciprocal"),
    ("torch", "floor", "floor"),
    ("torch", "ceil", "ceil"),
    ("torch", "where", "where"),
    ("torch", "maximum", "maximum"),
    ("torch", "minimum", "minimum"),
    ("torch", "pow", "pow"),
    ("torch", "square", "square"),
    ("torch", "gt", "gt"),
    ("torch", "lt", "lt"),
    ("torch", "ge", "ge"),
    ("torch", "le", "le"),
    ("torch", "eq", "eq"),
    ("torch", "ne", "ne"),
    ("torch", "greater", "gt"),
    ("torch", "less", "lt"),
    ("torch", "logical_not", "logical_not"),
    ("torch", "logical_and", "logical_and"),
    ("torch", "logical_or", "logical_or"),
    ("torch", "erf", "erf"),
    ("torch.special", "erf", "erf"),
    ("torch", "log1p", "log1p"),
    ("torch", "expm1", "expm1"),
    ("torch", "rsqrt", "rsqrt"),
    ("torch", "clamp", "clamp"),
    ("torch", "clip", "clamp"),
    ("torch", "clamp_min", "clamp_min"),
    ("torch", "clamp_max", "clamp_max"),
    ("torch", "rsub", "rsub"),
    ("torch.nn.functional", "silu", "silu"),
    ("torch.nn.functional", "gelu", "gelu"),
    ("torch.nn.functional", "leaky_relu", "leaky_relu"),
    ("torch.nn.functional", "batch_norm", "batch_norm"),
    ("torch.nn.functional", "layer_norm", "layer_norm"),
    ("torch.nn.functional", "embedding", "embedding"),
    ("torch.ops.aten.embedding_dense_backward", "default", "embedding_dense_backward"),
    // Sums made by derivative rules (Note [forward-side statistics] in src/autograd/partition.rs).
    ("torch.ops.aten.sum", "dim_IntList", "sum_unordered"),
    ("torch.ops.aten.mean", "dim", "mean_unordered"),
    ("torch", "gather", "gather"),
    ("torch.Tensor", "gather", "gather"),
    ("torch.nn.functional", "cross_entropy", "cross_entropy"),
    ("torch.nn.functional", "pad", "pad"),
    ("torch", "cat", "cat"),
    ("torch", "concat", "cat"),
    ("torch", "concatenate", "cat"),
    ("torch.nn.functional", "softmax", "softmax"),
    ("torch", "softmax", "softmax"),
    ("torch.nn.functional", "log_softmax", "log_softmax"),
    ("torch", "log_softmax", "log_softmax"),
    ("torch", "sum", "sum"),
    ("torch", "mean", "mean"),
    ("torch", "amax", "amax"),
    ("torch", "amin", "amin"),
    ("torch", "var", "var"),
    ("torch", "std", "std"),
    ("torch.nn.functional", "rms_norm", "rms_norm"),
    ("torch.nn.functional", "adaptive_avg_pool2d", "adaptive_avg_pool2d"),
    ("torch.nn.functional", "max_pool2d", "max_pool2d"),
    ("torch", "max_pool2d", "max_pool2d"),
    ("torch.nn.functional", "hardswish", "hardswish"),
    ("torch.nn.functional", "hardsigmoid", "hardsigmoid"),
    ("torch.nn.functional", "hardtanh", "hardtanh"),
    ("torch.nn.functional", "relu6", "relu6"),
    ("torch.nn.functional", "dropout", "dropout"),
    ("torch", "flatten", "flatten"),
    ("torch", "unflatten", "unflatten"),
    ("torch", "reshape", "reshape"),
    ("torch", "transpose", "transpose"),
    ("torch", "permute", "permute"),
    ("torch", "unsqueeze", "unsqueeze"),
    ("torch", "squeeze", "squeeze"),
    ("torch", "t", "t"),
    ("torch", "clone", "clone"),
    ("torch", "_weight_norm", "weight_norm"),
    ("operator", "getitem", "getitem"),
    ("torch.Tensor", "add", "add"),
    ("torch.Tensor", "sub", "sub"),
    ("torch.Tensor", "mul", "mul"),
    ("torch.Tensor", "div", "div"),
    ("torch.Tensor", "neg", "neg"),
    ("torch.Tensor", "relu", "relu"),
    ("torch.Tensor", "sigmoid", "sigmoid"),
    ("torch.Tensor", "tanh", "tanh"),
    ("torch.Tensor", "exp", "exp"),
    ("torch.Tensor", "sin", "sin"),
    ("torch.Tensor", "cos", "cos"),
];

/// call_method names we lower -> canonical name.
const METHOD_TARGETS: &[(&str, &str)] = &[
    ("add", "add"),
    ("__add__", "add"),
    ("__radd__", "radd"),
    ("sub", "sub"),
    ("__sub__", "sub"),
    ("__rsub__", "rsub"),
    ("mul", "mul"),
    ("__mul__", "mul"),
    ("__rmul__", "mul"),
    ("div", "div"),
    ("__truediv__", "div"),
    ("__rtruediv__", "rdiv"),
    ("neg", "neg"),
    ("__neg__", "neg"),
    ("abs", "abs"),
    ("relu", "relu"),
    ("sigmoid", "sigmoid"),
    ("tanh", "tanh"),
    ("exp", "exp"),
    ("log", "log"),
    ("sqrt", "sqrt"),
    ("sin", "sin"),
    ("cos", "cos"),
    ("reciprocal", "reciprocal"),
    ("floor", "floor"),
    ("ceil", "ceil"),
    ("maximum", "maximum"),
    ("minimum", "minimum"),
    ("pow", "pow"),
    ("__pow__", "pow"),
    ("square", "square"),
    ("gt", "gt"),
    ("lt", "lt"),
    ("ge", "ge"),
    ("le", "le"),
    ("eq", "eq"),
    ("ne", "ne"),
    ("__gt__", "gt"),
    ("__lt__", "lt"),
    ("__ge__", "ge"),
    ("__le__", "le"),
    ("__eq__", "eq"),
    ("__ne__", "ne"),
    ("logical_not", "logical_not"),
    ("logical_and", "logical_and"),
    ("logical_or", "logical_or"),
    ("erf", "erf"),
    ("log1p", "log1p"),
    ("expm1", "expm1"),
    ("rsqrt", "rsqrt"),
    ("clamp", "clamp"),
    ("clip", "clamp"),
    ("clamp_min", "clamp_min"),
    ("clamp_max", "clamp_max"),
    ("__and__", "bitwise_and"),
    ("__or__", "bitwise_or"),
    ("__invert__", "bitwise_not"),
    ("softmax", "softmax"),
    ("log_softmax", "log_softmax"),
    ("sum", "sum"),
    ("mean", "mean"),
    ("amax", "amax"),
    ("amin", "amin"),
    ("var", "var"),
    ("std", "std"),
    ("view", "view"),
    ("reshape", "reshape"),
    ("flatten", "flatten"),
    ("unflatten", "unflatten"),
    ("transpose", "transpose"),
    ("permute", "permute"),
    ("unsqueeze", "unsqueeze"),
    ("squeeze", "squeeze"),
    ("t", "t"),
    ("expand", "expand"),
    ("contiguous", "contiguous"),
    ("clone", "clone"),
    ("gather", "gather"),
    ("__getitem__", "getitem"),
    ("to", "to"),
    ("type", "to"),
    ("float", "float"),
    ("half", "half"),
    ("bfloat16", "bfloat16"),
    ("double", "double"),
    ("long", "long"),
    ("int", "int"),
    ("bool", "bool"),
];

/// Resolved identity table: object id -> canonical name, built on first use.
fn function_table(py: Python<'_>) -> PyResult<&'static Vec<(usize, &'static str)>> {
    static TABLE: pyo3::sync::PyOnceLock<Vec<(usize, &'static str)>> = pyo3::sync::PyOnceLock::new();
    TABLE.get_or_try_init(py, || {
        let mut out = Vec::new();
        for (path, attr, canonical) in FUNCTION_TARGETS {
            // `path` is a module (`torch.nn.functional`) or a module attribute (`torch.Tensor`);
            // entries this torch lacks are skipped.
            let obj = match py.import(*path) {
                Ok(m) => m.into_any(),
                Err(_) => {
                    let (module, rest) = path.split_once('.').unwrap_or((path, ""));
                    let Ok(mut obj) = py.import(module).map(|m| m.into_any()) else { continue };
                    let mut ok = true;
                    for part in rest.split('.').filter(|p| !p.is_empty()) {
                        match obj.getattr(part) {
                            Ok(next) => obj = next,
                            Err(_) => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    if !ok {
                        continue;
                    }
                    obj
                }
            };
            if let Ok(obj) = obj.getattr(*attr) {
                // Keep the object alive forever so its id stays valid.
                let ptr = obj.as_ptr() as usize;
                std::mem::forget(obj.unbind());
                out.push((ptr, *canonical));
            }
        }
        Ok(out)
    })
}

/// Canonical name of a call_function target, by identity.
pub fn canonical_function(py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let ptr = target.as_ptr() as usize;
    Ok(function_table(py)?.iter().find(|(p, _)| *p == ptr).map(|(_, c)| *c))
}

/// Canonical name of a call_method name.
pub fn canonical_method(name: &str) -> Option<&'static str> {
    METHOD_TARGETS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// True for ops that mutate an argument in place (trailing `_`, `operator.i*`, `setitem`).
fn looks_mutating(py: Python<'_>, op: &str, target: &Bound<'_, PyAny>) -> PyResult<bool> {
    let name: String = if op == "call_method" {
        target.extract()?
    } else {
        match target.getattr(intern!(py, "__name__")) {
            Ok(n) => n.extract().unwrap_or_default(),
            Err(_) => String::new(),
        }
    };
    let inplace_operator = op == "call_function"
        && target
            .getattr(intern!(py, "__module__"))
            .ok()
            .and_then(|m| m.extract::<String>().ok())
            .is_some_and(|m| m == "_operator" || m == "operator")
        && name.starts_with('i')
        && matches!(
            name.as_str(),
            "iadd" | "isub" | "imul" | "itruediv" | "ifloordiv" | "imod" | "ipow" | "iand" | "ior" | "ixor"
                | "ilshift" | "irshift" | "imatmul"
        );
    // operator.and_/or_/not_/xor_/is_ only look like in-place methods.
    let trailing_underscore = name.ends_with('_')
        && !name.ends_with("__")
        && !matches!(name.as_str(), "and_" | "or_" | "not_" | "xor_" | "is_" | "concat_");
    // In-place dunders called as methods (`a.__iadd__(b)`, `a.__imatmul__(b)`): `__i<op>__`.
    let inplace_dunder = op == "call_method"
        && name.starts_with("__i")
        && name.ends_with("__")
        && matches!(
            &name[3..name.len() - 2],
            "add" | "sub" | "mul" | "truediv" | "floordiv" | "mod" | "pow" | "and" | "or" | "xor" | "lshift" | "rshift"
                | "matmul"
        );
    Ok(trailing_underscore || inplace_operator || inplace_dunder || name == "setitem" || name == "__setitem__")
}

/// What an fx node becomes under functionalization.
enum FunctionalForm<'py> {
    /// The node does not mutate its arguments.
    NotInPlace,
    /// Same target; its `inplace` flag was turned off in `args`/`kwargs`.
    Same,
    /// The functional target replacing it (a method name as a `str`, or a callable).
    Target(Bound<'py, PyAny>),
    /// The in-place op runs on a copy of its first argument (Note [in-place ops on a copy]): the
    /// node becomes a call of `dynamo._functional.<helper>`, with the method's name inserted as
    /// its second argument when `method` is set.
    OnCopy { helper: &'static str, method: Option<String> },
    /// A function called with `out=` a tensor node (Note [out= on a copy]): the node becomes
    /// `dynamo._functional.out_on_copy(out, fn, *args, **kwargs)`, `out` its first argument.
    OutOnCopy,
    /// It mutates, and we know no functional form (`out=`, `resize_` ...).
    Unknown(String),
}

/// In-place methods that change a tensor's values but never its shape, dtype or strides, and
/// whose functional form is the method run on a copy (Note [in-place ops on a copy]). Methods
/// that change a view (`transpose_`, `squeeze_`, `as_strided_`), storage (`resize_`, `set_`) or
/// autograd state (`requires_grad_`, `detach_`) are not here.
const ON_COPY_METHODS: &[&str] = &[
    "copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "exponential_", "random_", "geometric_",
    "cauchy_", "log_normal_", "index_add_", "index_copy_", "index_fill_", "index_put_", "masked_fill_",
    "masked_scatter_", "scatter_", "scatter_add_", "scatter_reduce_", "put_", "fill_diagonal_", "tril_",
    "triu_", "renorm_", "addmm_", "addmv_", "addr_", "baddbmm_", "addbmm_", "cumsum_", "cumprod_", "lerp_",
    "addcmul_", "addcdiv_", "clamp_min_", "clamp_max_", "nan_to_num_",
];

// Note [in-place ops on a copy]: an in-place op whose out-of-place form the lowering does not
// know (`new_empty(...).bernoulli_(p)` in timm's DropPath, `shifted[..., 1:] = ids[..., :-1]`
// in T5's and BART's `_shift_right`, `index_add_`, `fill_`) made the importer refuse the whole
// graph, so a training step ran through torch with no kernel. Such a node now becomes
// `dynamo._functional.method_on_copy(x, "bernoulli_", p)` or `setitem_on_copy(x, index, v)`:
// torch's own in-place op on a clone of `x`, whose result is the new version of `x` for the
// functionalization pass (src/inductor/functionalize.rs keeps refusing graphs where a view or
// a second name could see the write). Eager's kernel, checks and random draws are kept, so the
// node is not probed (Note [eager's dtype checks]); it runs as a torch fallback node, and in a
// training graph it has no derivative rule (the joint graph splits around it when it needs a
// gradient). Its meta is that of `x` (a `setitem` node records None), requiring grad when the
// written value does.

// Note [out= on a copy]: `f(*args, out=t)` writes `t` (spectral_norm's power iteration runs
// `F.normalize(torch.mv(W, v), dim=0, out=u)` on its buffers under no_grad), and the importer
// refused the whole graph, so a training step of a spectral-normed layer ran through torch with
// no kernel. Such a node becomes `dynamo._functional.out_on_copy(t, f, *args, **kwargs)`:
// `f(*args, **kwargs, out=c)` on a clone `c` of `t`, whose result is the new value of `t`, as
// for the in-place methods of Note [in-place ops on a copy] (functionalization renames later
// readers and writes a graph input back). torch's own out= overload runs, so its casts, resize
// and checks are eager's. The node's meta is its example value, which is `t` itself.

/// Positional index of the `inplace` flag of `torch.nn.functional` activations.
const INPLACE_POSITION: &[(&str, usize)] = &[
    ("relu", 1),
    ("relu6", 1),
    ("silu", 1),
    ("hardswish", 1),
    ("hardsigmoid", 1),
    ("mish", 1),
    ("leaky_relu", 2),
    ("elu", 2),
    ("celu", 2),
    ("selu", 1),
    ("hardtanh", 3),
    ("threshold", 3),
    ("dropout", 3),
];

/// In-place operator functions and their out-of-place twins (`x += y` on a tensor).
const INPLACE_OPERATORS: &[(&str, &str)] =
    &[("iadd", "add"), ("isub", "sub"), ("imul", "mul"), ("itruediv", "truediv"), ("ipow", "pow"), ("iand", "and_"), ("ior", "or_")];

/// Recognizes an in-place node and rewrites it to its functional form (PyTorch's convention: `op_`
/// mutates its first argument and returns it; `op` computes the same value into a new tensor).
/// Only forms whose functional twin is a op we know are accepted; others are `Unknown`.
fn functional_form<'py>(
    py: Python<'py>,
    op: &str,
    target: &Bound<'py, PyAny>,
    args: &mut [FxArg],
    kwargs: &mut [(String, FxArg)],
) -> PyResult<FunctionalForm<'py>> {
    if let Some((_, out)) = kwargs.iter().find(|(k, _)| k == "out") {
        // Note [out= on a copy]: one tensor written; a tuple of them (`torch.max(x, 0, out=(a,
        // b))`) or a method is refused.
        if op == "call_function" && matches!(out, FxArg::Node(_)) {
            return Ok(FunctionalForm::OutOnCopy);
        }
        return Ok(FunctionalForm::Unknown("out=".into()));
    }
    // `inplace=True` flags (keyword or positional) of F.* activations: same function, flag off.
    let mut flagged = false;
    for (k, v) in kwargs.iter_mut() {
        if k == "inplace" && !matches!(v, FxArg::Bool(false)) {
            if !matches!(v, FxArg::Bool(true)) {
                return Ok(FunctionalForm::Unknown(format!("inplace={v:?}")));
            }
            *v = FxArg::Bool(false);
            flagged = true;
        }
    }
    if op == "call_function" {
        let qualified = qualified_name(py, target);
        if let Some(fname) = qualified.strip_prefix("torch.nn.functional.") {
            if let Some((_, pos)) = INPLACE_POSITION.iter().find(|(f, _)| *f == fname) {
                if let Some(a) = args.get_mut(*pos) {
                    match a {
                        FxArg::Bool(true) => {
                            *a = FxArg::Bool(false);
                            flagged = true;
                        }
                        FxArg::Bool(false) => {}
                        other => return Ok(FunctionalForm::Unknown(format!("inplace={other:?}"))),
                    }
                }
            }
        }
    }
    if flagged {
        return Ok(FunctionalForm::Same);
    }
    if !looks_mutating(py, op, target)? {
        return Ok(FunctionalForm::NotInPlace);
    }
    let on_copy_target = matches!(args.first(), Some(FxArg::Node(_)));
    if op == "call_method" {
        let name: String = target.extract()?;
        if name == "__setitem__" && on_copy_target {
            return Ok(FunctionalForm::OnCopy { helper: "setitem_on_copy", method: None });
        }
        let base = match name.as_str() {
            "__iadd__" => "add",
            "__isub__" => "sub",
            "__imul__" => "mul",
            "__itruediv__" => "div",
            n if n.ends_with('_') && !n.ends_with("__") => &n[..n.len() - 1],
            _ => return Ok(FunctionalForm::Unknown(name)),
        };
        // Only value-changing ops: `transpose_`/`squeeze_` change a tensor's view, not its values.
        return Ok(match canonical_method(base) {
            Some(c) if super::lowering::is_pointwise_op(c) => FunctionalForm::Target(pyo3::types::PyString::new(py, base).into_any()),
            _ if on_copy_target && ON_COPY_METHODS.contains(&name.as_str()) => {
                FunctionalForm::OnCopy { helper: "method_on_copy", method: Some(name) }
            }
            _ => FunctionalForm::Unknown(name),
        });
    }
    let qualified = qualified_name(py, target);
    if qualified == "_operator.setitem" && on_copy_target && args.len() == 3 {
        return Ok(FunctionalForm::OnCopy { helper: "setitem_on_copy", method: None });
    }
    if let Some(name) = qualified.strip_prefix("_operator.") {
        if let Some((_, twin)) = INPLACE_OPERATORS.iter().find(|(i, _)| *i == name) {
            // Only a tensor is mutated in place; `n += 1` on a Python number rebinds.
            if matches!(args.first(), Some(FxArg::Node(_))) {
                return Ok(FunctionalForm::Target(py.import("operator")?.getattr(*twin)?));
            }
        }
        return Ok(FunctionalForm::Unknown(qualified));
    }
    // torch.relu_, torch.nn.functional.relu_ ...: the function without the trailing underscore.
    if let Some((module, name)) = qualified.rsplit_once('.') {
        if let Some(base) = name.strip_suffix('_') {
            if let Ok(twin) = py.import(module).and_then(|m| m.getattr(base)) {
                if canonical_function(py, &twin)?.is_some_and(super::lowering::is_pointwise_op) {
                    return Ok(FunctionalForm::Target(twin));
                }
            }
        }
    }
    Ok(FunctionalForm::Unknown(qualified))
}

/// Note [tensors whose memory is not their value]: a tensor with the negative bit (`z.conj().imag`,
/// `torch._neg_view(t)`) or the conjugate bit holds the value's negation or conjugate in its
/// memory, resolved by torch's kernels as they read it; a ZeroTensor
/// (`torch._efficientzerotensor`, made by some derivative formulas) has no memory at all.
/// Generated kernels read memory, so they gave `z.conj().imag * 2` the wrong sign and crashed
/// on a ZeroTensor. Such a tensor counts as off the target device: every op reading it runs on
/// torch's kernels (a fallback), and what those return is a plain tensor again. An input that
/// has one of these where the compile's had none fails dynamo's TENSOR_MATCH guard (the bits
/// are dispatch keys, which torch's fast `TensorGuards` compare; the slow check reads them,
/// `TensorSpec::lazy_value`), and the runtime's own input check (a graph called without
/// dynamo's guards) sends a negative-bit input to `gm.forward`; a ZeroTensor that a kernel
/// would read shows as a null data pointer, which raises and reruns the call eagerly (Note
/// [errors rerun eagerly] in wrapper.rs).
pub(crate) fn is_lazy_value(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(v.call_method0(intern!(py, "is_neg"))?.is_truthy()?
        || v.call_method0(intern!(py, "is_conj"))?.is_truthy()?
        || v.call_method0(intern!(py, "_is_zerotensor"))?.is_truthy()?)
}

/// Reads a tensor's metadata; `None` if `v` is not a tensor or has symbolic sizes.
pub fn tensor_meta(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Option<TensorMeta>> {
    tensor_meta_ext(py, v, false)
}

/// As [`tensor_meta`]; with `meta_is_cpu`, tensors on the `meta` device count as CPU tensors
/// (they stand for CPU values during meta propagation).
pub(crate) fn tensor_meta_ext(py: Python<'_>, v: &Bound<'_, PyAny>, meta_is_cpu: bool) -> PyResult<Option<TensorMeta>> {
    let torch = py.import(intern!(py, "torch"))?;
    if !v.is_instance(&torch.getattr(intern!(py, "Tensor"))?)? {
        return Ok(None);
    }
    let sizes: Result<Vec<i64>, _> = v.getattr(intern!(py, "shape"))?.extract();
    let strides: Result<Vec<i64>, _> = v.call_method0(intern!(py, "stride"))?.extract();
    let (Ok(sizes), Ok(strides)) = (sizes, strides) else { return Ok(None) };
    let dtype = DType::from_torch(&v.getattr(intern!(py, "dtype"))?)?;
    let device = v.getattr(intern!(py, "device"))?;
    let device_type: String = device.getattr(intern!(py, "type"))?.extract()?;
    let requires_grad: bool = v.getattr(intern!(py, "requires_grad"))?.extract()?;
    // `cpu`: on the compile's target device (Note [compile target] in cuda.rs), and plain
    // memory (Note [tensors whose memory is not their value]).
    let cpu = (super::cuda::on_target(py, &device)? || (meta_is_cpu && device_type == "meta")) && !is_lazy_value(py, v)?;
    Ok(Some(TensorMeta { layout: Layout { sizes, strides, dtype, cpu }, requires_grad }))
}

struct Importer<'py> {
    fx_node_type: Bound<'py, PyAny>,
    dtype_type: Bound<'py, PyAny>,
    slice_type: Bound<'py, PyAny>,
    names: Vec<Bound<'py, PyAny>>,
    side_table: Vec<Py<PyAny>>,
    /// `get_attr` nodes of constants (Note [constants fx cannot write] in
    /// src/autograd/export.rs): the node, and the constant its readers get.
    constants: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
}

impl<'py> Importer<'py> {
    fn side(&mut self, obj: &Bound<'py, PyAny>) -> usize {
        self.side_table.push(obj.clone().unbind());
        self.side_table.len() - 1
    }

    fn node_index(&self, node: &Bound<'py, PyAny>) -> Option<usize> {
        self.names.iter().position(|n| n.is(node))
    }

    fn arg(&mut self, a: &Bound<'py, PyAny>) -> Result<FxArg, ImportError> {
        if a.is_instance(&self.fx_node_type)? {
            if let Some(c) = self.constants.iter().find(|(n, _)| n.is(a)).map(|(_, c)| c.clone()) {
                return self.arg(&c);
            }
            return self
                .node_index(a)
                .map(FxArg::Node)
                .ok_or_else(|| ImportError::Unsupported("argument refers to an unknown node".into()));
        }
        if a.is_none() {
            return Ok(FxArg::None);
        }
        if let Ok(b) = a.cast::<pyo3::types::PyBool>() {
            return Ok(FxArg::Bool(b.is_true()));
        }
        if a.is_exact_instance_of::<pyo3::types::PyInt>() {
            if let Ok(i) = a.extract::<i64>() {
                return Ok(FxArg::Int(i));
            }
        }
        if a.is_exact_instance_of::<pyo3::types::PyString>() {
            return Ok(FxArg::Str(a.extract::<String>()?));
        }
        if a.is_exact_instance_of::<pyo3::types::PyFloat>() {
            return Ok(FxArg::Float(a.extract::<f64>()?));
        }
        if let Ok(t) = a.cast::<PyTuple>() {
            if a.is_exact_instance_of::<PyTuple>() {
                let items = t.iter().map(|x| self.arg(&x)).collect::<Result<_, _>>()?;
                return Ok(FxArg::Tuple(items));
            }
        }
        if let Ok(l) = a.cast::<PyList>() {
            let items = l.iter().map(|x| self.arg(&x)).collect::<Result<_, _>>()?;
            return Ok(FxArg::List(items));
        }
        if a.is_instance(&self.slice_type)? {
            let mut bounds = [None; 3];
            let mut all_ints = true;
            for (k, field) in ["start", "stop", "step"].into_iter().enumerate() {
                let v = a.getattr(field)?;
                if v.is_instance(&self.fx_node_type)? {
                    return Err(ImportError::Unsupported("slice bound computed in the graph".into()));
                }
                if v.is_exact_instance_of::<pyo3::types::PyInt>() {
                    bounds[k] = v.extract::<i64>().ok();
                    all_ints &= bounds[k].is_some();
                } else if !v.is_none() {
                    all_ints = false;
                }
            }
            if all_ints {
                let [start, stop, step] = bounds;
                return Ok(FxArg::Slice { start, stop, step, py: self.side(a) });
            }
        }
        if a.is(&a.py().Ellipsis()) {
            return Ok(FxArg::Ellipsis);
        }
        if a.is_instance(&self.dtype_type)? {
            let dtype = DType::from_torch(a)?;
            return Ok(FxArg::Dtype { dtype, py: self.side(a) });
        }
        if a.cast::<PyDict>().is_ok() {
            return Err(ImportError::Unsupported("dict argument".into()));
        }
        Ok(FxArg::Py(self.side(a)))
    }
}

/// Replaces fx nodes inside `a` (tuples, lists, dicts) by their values in `env`, and, when
/// `meta` is given (`torch.device("meta")`), devices of the compile target by it (Note [meta
/// propagation on the GPU]).
fn substitute<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    env: &std::collections::HashMap<usize, Bound<'py, PyAny>>,
    meta: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(v) = env.get(&(a.as_ptr() as usize)) {
        return Ok(v.clone());
    }
    // FX keeps list arguments as `immutable_list` (a list subclass): subclasses are walked too.
    // A container whose items are all unchanged is passed as it is (a `torch.Size` stays one);
    // otherwise it becomes a plain tuple or list of the substituted items.
    let tuple = a.is_instance_of::<PyTuple>();
    if tuple || a.is_instance_of::<PyList>() {
        let old: Vec<Bound<'py, PyAny>> = a.try_iter()?.collect::<PyResult<_>>()?;
        let items: Vec<_> = old.iter().map(|x| substitute(py, x, env, meta)).collect::<PyResult<_>>()?;
        if old.iter().zip(&items).all(|(o, n)| o.is(n)) {
            return Ok(a.clone());
        }
        return Ok(if tuple { PyTuple::new(py, items)?.into_any() } else { PyList::new(py, items)?.into_any() });
    }
    if let Ok(d) = a.cast::<PyDict>() {
        let out = PyDict::new(py);
        for (k, v) in d.iter() {
            out.set_item(k, substitute(py, &v, env, meta)?)?;
        }
        return Ok(out.into_any());
    }
    if let Some(meta) = meta {
        if a.is_instance(&meta.get_type())? && super::cuda::on_target(py, a)? {
            return Ok(meta.clone());
        }
    }
    Ok(a.clone())
}

/// Call targets (substrings of their qualified names) whose output layout depends on the device
/// (Note [meta propagation on the GPU]).
const DEVICE_LAYOUT_OPS: &[&str] = &["conv", "scaled_dot_product", "_attention"];

/// Runs the graph on `meta` tensors standing for the example inputs, giving every node a value
/// whose sizes/strides/dtype are what eager would produce. Much cheaper than FakeTensorProp (no
/// FakeTensorMode); any failure makes the caller use FakeTensorProp.
///
/// Note [meta propagation on the GPU]: inputs on a CUDA compile target are stood for by meta
/// tensors too, and `torch.device` arguments naming the target (CPU or GPU) become `meta` (so
/// `x.to(device)` and factories with `device=` stay on meta). What eager would put elsewhere (a factory without
/// a device makes a CPU tensor) keeps its real device, so its meta says "not on the target".
/// Ops whose output layout on CUDA differs from their meta kernel's ([`DEVICE_LAYOUT_OPS`]:
/// attention returns its output in the layout of the kernel torch picks, convolutions follow
/// cuDNN's choice of memory format) run on fake tensors of the target device instead
/// (`dynamo.utils.call_on_device`); a meta output layout that is not eager's would make the
/// graph's plan disagree with what the fallback returns at run time. AOTAutograd's forward and
/// backward graphs (src/autograd) carry no meta, and FakeTensorProp cost GPT-2's training step
/// about a second of its compile (its 1600-node backward graph: 0.84 s of import).
fn meta_propagate<'py>(
    py: Python<'py>,
    gm: &Bound<'py, PyAny>,
    nodes: &[Bound<'py, PyAny>],
    examples: &[Bound<'py, PyAny>],
) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
    let torch = py.import(intern!(py, "torch"))?;
    let tensor_type = torch.getattr(intern!(py, "Tensor"))?;
    let empty_strided = torch.getattr(intern!(py, "empty_strided"))?;
    let gpu = matches!(super::cuda::target(), super::cuda::Target::Cuda(_));
    let meta_device = Some(torch.getattr(intern!(py, "device"))?.call1(("meta",))?);
    let mut env: std::collections::HashMap<usize, Bound<'py, PyAny>> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(nodes.len());
    let mut position = 0;
    for n in nodes {
        let op: String = n.getattr(intern!(py, "op"))?.extract()?;
        let target = n.getattr(intern!(py, "target"))?;
        let value = match op.as_str() {
            "placeholder" => {
                let ex = examples
                    .get(position)
                    .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("missing example input"))?;
                position += 1;
                if ex.is_instance(&tensor_type)? {
                    let device = ex.getattr(intern!(py, "device"))?;
                    let device_type: String = device.getattr(intern!(py, "type"))?.extract()?;
                    if device_type != "cpu" && !(gpu && super::cuda::on_target(py, &device)?) {
                        return Err(pyo3::exceptions::PyValueError::new_err("input on another device"));
                    }
                    let kw = PyDict::new(py);
                    kw.set_item("dtype", ex.getattr(intern!(py, "dtype"))?)?;
                    kw.set_item("device", "meta")?;
                    let shape = ex.getattr(intern!(py, "shape"))?;
                    let stride = ex.call_method0(intern!(py, "stride"))?;
                    empty_strided.call((shape, stride), Some(&kw))?
                } else {
                    ex.clone()
                }
            }
            "call_function" | "call_method" => {
                let on_device = gpu && {
                    let name = if op == "call_function" { qualified_name(py, &target) } else { target.to_string() };
                    DEVICE_LAYOUT_OPS.iter().any(|w| name.contains(w))
                };
                if on_device && op != "call_function" {
                    return Err(pyo3::exceptions::PyValueError::new_err("a method whose layout depends on the device"));
                }
                let args = substitute(py, &n.getattr(intern!(py, "args"))?, &env, meta_device.as_ref())?;
                let args = args.cast_into::<PyTuple>().map_err(PyErr::from)?;
                let kwargs = substitute(py, &n.getattr(intern!(py, "kwargs"))?, &env, meta_device.as_ref())?;
                let kwargs = kwargs.cast_into::<PyDict>().map_err(PyErr::from)?;
                let called = if on_device {
                    let super::cuda::Target::Cuda(idx) = super::cuda::target() else { unreachable!() };
                    let device = torch.getattr(intern!(py, "device"))?.call1(("cuda", idx))?;
                    py.import(intern!(py, "dynamo.utils"))?.getattr(intern!(py, "call_on_device"))?.call1((&target, args, kwargs, device))
                } else if op == "call_function" {
                    target.call(args, Some(&kwargs))
                } else {
                    let name: String = target.extract()?;
                    let (this, rest) = match args.len() {
                        0 => return Err(pyo3::exceptions::PyValueError::new_err("method call without self")),
                        _ => (args.get_item(0)?, args.get_slice(1, args.len())),
                    };
                    this.getattr(name.as_str()).and_then(|m| m.call(rest, Some(&kwargs)))
                };
                called.map_err(|e| {
                    let name = n.getattr(intern!(py, "name")).map(|s| s.to_string()).unwrap_or_default();
                    pyo3::exceptions::PyValueError::new_err(format!("node {name}: {e}"))
                })?
            }
            "output" => py.None().into_bound(py),
            _ => return Err(pyo3::exceptions::PyValueError::new_err(format!("{op} needs real values"))),
        };
        let _ = gm;
        env.insert(n.as_ptr() as usize, value.clone());
        out.push(if op == "output" { None } else { Some(value) });
    }
    Ok(out)
}

/// `module.name` of a callable (`torch.matmul`, `_operator.add`), or its repr.
fn qualified_name(py: Python<'_>, target: &Bound<'_, PyAny>) -> String {
    let name = target.getattr(intern!(py, "__name__")).and_then(|n| n.extract::<String>());
    let module = target.getattr(intern!(py, "__module__")).and_then(|m| m.extract::<String>());
    match (module, name) {
        (Ok(m), Ok(n)) => format!("{m}.{n}"),
        (Err(_), Ok(n)) => n,
        _ => target.repr().map(|r| r.to_string()).unwrap_or_default(),
    }
}

/// Fetches `gm.<a.b.c>`.
fn get_attr_path<'py>(gm: &Bound<'py, PyAny>, path: &str) -> PyResult<Bound<'py, PyAny>> {
    let mut obj = gm.clone();
    for part in path.split('.') {
        obj = obj.getattr(part)?;
    }
    Ok(obj)
}

/// Imports `gm` given the example inputs it will be called with.
pub fn import_graph(
    py: Python<'_>,
    gm: &Bound<'_, PyAny>,
    example_inputs: &Bound<'_, PyAny>,
) -> Result<FxGraph, ImportError> {
    let graph = gm.getattr(intern!(py, "graph"))?;
    let nodes: Vec<Bound<'_, PyAny>> = graph.getattr(intern!(py, "nodes"))?.try_iter()?.collect::<PyResult<_>>()?;
    let examples: Vec<Bound<'_, PyAny>> = example_inputs.try_iter()?.collect::<PyResult<_>>()?;

    // Make sure every call node has a value in meta; otherwise propagate fake tensors.
    fn meta_value<'py>(py: Python<'py>, n: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let meta = n.getattr(intern!(py, "meta"))?;
        let meta = meta.cast::<PyDict>()?;
        if let Some(v) = meta.get_item(intern!(py, "example_value"))? {
            return Ok(Some(v));
        }
        meta.get_item(intern!(py, "val"))
    }
    let mut imp = Importer {
        fx_node_type: py.import("torch.fx")?.getattr("Node")?,
        dtype_type: py.import("torch")?.getattr("dtype")?,
        slice_type: py.get_type::<pyo3::types::PySlice>().into_any(),
        names: Vec::new(),
        side_table: Vec::new(),
        constants: Vec::new(),
    };
    let mut out_nodes: Vec<FxNode> = Vec::new();
    let torch_tensor = py.import("torch")?.getattr("Tensor")?;
    let nn_module = py.import("torch.nn")?.getattr("Module")?;
    let mut n_placeholders = 0usize;
    let mut output = None;
    let mut missing: Vec<usize> = Vec::new();
    for (node_idx, n) in nodes.iter().enumerate() {
        let node_meta = |py: Python<'_>| -> PyResult<Option<TensorMeta>> {
            match meta_value(py, n)? {
                Some(v) => tensor_meta(py, &v),
                None => Ok(None),
            }
        };
        let has_meta = meta_value(py, n)?.is_some();
        let recompute = match n.getattr(intern!(py, "meta"))?.cast::<PyDict>().map_err(PyErr::from)?.get_item(intern!(py, "recompute"))? {
            // torch's own tag is a `CheckpointPolicy` (MUST_/PREFER_RECOMPUTE, MUST_/PREFER_SAVE).
            Some(v) => v.is_truthy()? && !v.str()?.to_string().contains("SAVE"),
            None => false,
        };
        let mut op: String = n.getattr(intern!(py, "op"))?.extract()?;
        let name: String = n.getattr(intern!(py, "name"))?.extract()?;
        let target = n.getattr(intern!(py, "target"))?;
        let args: Vec<FxArg> = n
            .getattr(intern!(py, "args"))?
            .try_iter()?
            .map(|a| imp.arg(&a?))
            .collect::<Result<_, _>>()?;
        let kw = n.getattr(intern!(py, "kwargs"))?;
        let kw = kw.cast::<PyDict>().map_err(|e| ImportError::Unsupported(e.to_string()))?;
        let mut kwargs = Vec::new();
        for (k, v) in kw.iter() {
            kwargs.push((k.extract::<String>()?, imp.arg(&v)?));
        }
        let mut args = args;
        let mut target = target;
        let mut inplace = false;
        let mut on_copy = false;
        if matches!(op.as_str(), "call_function" | "call_method") {
            match functional_form(py, &op, &target, &mut args, &mut kwargs)? {
                FunctionalForm::NotInPlace => {}
                FunctionalForm::Same => inplace = true,
                FunctionalForm::Target(t) => {
                    target = t;
                    inplace = true;
                }
                FunctionalForm::OnCopy { helper, method } => {
                    // Note [in-place ops on a copy].
                    target = py.import(intern!(py, "dynamo._functional"))?.getattr(helper)?;
                    if let Some(m) = method {
                        args.insert(1, FxArg::Str(m));
                    }
                    op = "call_function".into();
                    inplace = true;
                    on_copy = true;
                }
                FunctionalForm::OutOnCopy => {
                    // Note [out= on a copy].
                    let position = kwargs.iter().position(|(k, _)| k == "out").expect("OutOnCopy has an out= keyword");
                    let (_, out) = kwargs.remove(position);
                    args.insert(0, FxArg::Py(imp.side(&target)));
                    args.insert(0, out);
                    target = py.import(intern!(py, "dynamo._functional"))?.getattr(intern!(py, "out_on_copy"))?;
                    inplace = true;
                    on_copy = true;
                }
                FunctionalForm::Unknown(what) => {
                    return Err(ImportError::Unsupported(format!("node {name} mutates its inputs ({what})")));
                }
            }
        }
        if op == "call_module" {
            let module = get_attr_path(gm, &target.extract::<String>()?)?;
            if let Ok(flag) = module.getattr(intern!(py, "inplace")) {
                if flag.is_truthy().unwrap_or(true) {
                    return Err(ImportError::Unsupported(format!("module {name} works in place")));
                }
            }
            // Note [grad inputs] in mod.rs: parameters are inputs too.
            for p in module.call_method0(intern!(py, "parameters"))?.try_iter()? {
                if p?.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
                    return Err(ImportError::Unsupported(format!("module {name} has parameters; one requires grad")));
                }
            }
        }
        let (fx_op, canonical, meta) = match op.as_str() {
            "placeholder" => {
                let position = n_placeholders;
                n_placeholders += 1;
                let meta = match examples.get(position) {
                    Some(v) => tensor_meta(py, v)?,
                    None => return Err(ImportError::Unsupported("fewer example inputs than placeholders".into())),
                };
                (FxOp::Placeholder { position }, None, meta)
            }
            "call_function" => {
                let canonical = canonical_function(py, &target)?;
                let meta = node_meta(py)?;
                (FxOp::CallFunction { target: imp.side(&target) }, canonical, meta)
            }
            "call_method" => {
                let mname: String = target.extract()?;
                let canonical = canonical_method(&mname);
                let meta = node_meta(py)?;
                (FxOp::CallMethod { name: mname }, canonical, meta)
            }
            "call_module" => {
                let path: String = target.extract()?;
                let module = get_attr_path(gm, &path)?;
                let meta = node_meta(py)?;
                (FxOp::CallModule { target: imp.side(&module) }, None, meta)
            }
            "get_attr" => {
                let path: String = target.extract()?;
                let value = get_attr_path(gm, &path)?;
                if !value.is_instance(&torch_tensor)? && !value.is_instance(&nn_module)? {
                    // A constant torch.fx could not write as Python (Note [constants fx cannot
                    // write] in src/autograd/export.rs): its readers take the value itself.
                    // The node stays (node indices are the fx graph's), unread.
                    imp.constants.push((n.clone(), value.clone()));
                }
                let meta = tensor_meta(py, &value)?;
                (FxOp::GetAttr { value: imp.side(&value) }, None, meta)
            }
            "output" => {
                output = Some(out_nodes.len());
                (FxOp::Output, None, None)
            }
            other => return Err(ImportError::Unsupported(format!("fx op {other}"))),
        };
        // Note [in-place ops on a copy]: the written tensor's meta (a `setitem` node has None).
        let meta = match (meta, on_copy, args.first()) {
            // The written tensor as it is now: the last in-place node on it, whose meta has what
            // earlier writes gave it (`x.add_(p)` with `p` requiring grad makes `x` require grad).
            (None, true, Some(FxArg::Node(x))) => out_nodes
                .iter()
                .rev()
                .find(|k| k.inplace && matches!(k.args.first(), Some(FxArg::Node(r)) if r == x))
                .unwrap_or(&out_nodes[*x])
                .meta
                .clone()
                .map(|mut m| {
                let mut value_requires_grad = false;
                if let Some(v) = args.get(2) {
                    v.for_each_node(&mut |k| value_requires_grad |= out_nodes[k].meta.as_ref().is_some_and(|m| m.requires_grad));
                }
                m.requires_grad |= value_requires_grad;
                m
            }),
            (meta, ..) => meta,
        };
        let has_meta = has_meta || meta.is_some();
        if !has_meta && matches!(op.as_str(), "call_function" | "call_method" | "call_module") && !is_container(py, n)? {
            missing.push(node_idx);
        }
        imp.names.push(n.clone());
        let target_name = match op.as_str() {
            "call_function" => qualified_name(py, &target),
            _ => target.str().map(|s| s.to_string()).unwrap_or_default(),
        };
        out_nodes.push(FxNode { name, op: fx_op, canonical, target_name, args, kwargs, meta, users: Vec::new(), inplace, recompute });
    }
    if n_placeholders != examples.len() {
        return Err(ImportError::Unsupported(format!(
            "{} placeholders but {} example inputs",
            n_placeholders,
            examples.len()
        )));
    }
    let output = output.ok_or_else(|| ImportError::Unsupported("graph has no output node".into()))?;
    set_users(&mut out_nodes);
    if !missing.is_empty() {
        fill_missing_meta(py, gm, &nodes, &examples, &mut out_nodes, &missing)?;
    }
    probe_eager_checks(py, gm, &nodes, &examples, &out_nodes)?;
    let mut g = FxGraph { nodes: out_nodes, side_table: imp.side_table, output, writebacks: Vec::new() };
    dropout_as_product(py, &mut g)?;
    attention_dropout_as_product(py, &mut g)?;
    Ok(g)
}

/// Note [attention dropout as a product]: `F.scaled_dot_product_attention(q, k, v, mask,
/// dropout_p=p)` with `0 < p < 1` on CPU tensors (transformers passes the attention dropout
/// this way in training) has no derivative rule and cannot run twice (its dropout draws), so it
/// split every attention block's training graph. Eager computes it by ATen's math path there:
/// the weights `softmax(q k^T * scale + mask)` times `at::dropout`'s noise, `@ v`. It becomes two
/// nodes: `noise = dynamo._functional.sdpa_dropout_noise(q, k, p)`, drawn as `at::dropout` draws
/// (the random stream and the values stay eager's, bit for bit), and
/// `dynamo._functional.sdpa_math(q, k, v, mask, noise, is_causal, scale, enable_gqa)`, the math
/// path with that noise: deterministic, so its backward is torch's derivative run again on the
/// same noise (Note [torch's derivative for rule-less ops] in src/autograd/rules.rs). On CUDA
/// eager's fused kernels draw differently; those nodes stay as they were.
fn attention_dropout_as_product(py: Python<'_>, g: &mut FxGraph) -> PyResult<()> {
    let candidate = |g: &FxGraph, i: usize| -> Option<Vec<FxArg>> {
        let n = &g.nodes[i];
        let sdpa = matches!(
            n.target_name.as_str(),
            "torch._C._nn.scaled_dot_product_attention" | "torch.nn.functional.scaled_dot_product_attention"
        );
        if !sdpa || !matches!(n.op, FxOp::CallFunction { .. }) || n.meta.is_none() {
            return None;
        }
        let a = super::decompositions::bind(n, &["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]).ok()?;
        let Some(FxArg::Float(p)) = a[4] else { return None };
        let flag = |x: Option<&FxArg>| match x {
            None => Some(false),
            Some(FxArg::Bool(v)) => Some(*v),
            _ => None,
        };
        let (causal, gqa) = (flag(a[5])?, flag(a[7])?);
        let scale = match a[6] {
            None | Some(FxArg::None) => FxArg::None,
            Some(FxArg::Float(v)) => FxArg::Float(*v),
            _ => return None,
        };
        let mask = match a[3] {
            None | Some(FxArg::None) => FxArg::None,
            Some(FxArg::Node(m)) => FxArg::Node(*m),
            _ => return None,
        };
        let cpu_float = |x: Option<&FxArg>| match x {
            Some(FxArg::Node(j)) => g.nodes[*j].meta.as_ref().is_some_and(|m| m.layout.cpu && matches!(m.layout.dtype, DType::F32 | DType::F64)),
            _ => false,
        };
        if !(*p > 0.0 && *p < 1.0) || !(cpu_float(a[0]) && cpu_float(a[1]) && cpu_float(a[2])) {
            return None;
        }
        Some(vec![a[0]?.clone(), a[1]?.clone(), a[2]?.clone(), mask, FxArg::Float(*p), FxArg::Bool(causal), scale, FxArg::Bool(gqa)])
    };
    let plan: Vec<Option<Vec<FxArg>>> = (0..g.nodes.len()).map(|i| candidate(g, i)).collect();
    if plan.iter().all(Option::is_none) {
        return Ok(());
    }
    let helpers = py.import(intern!(py, "dynamo._functional"))?;
    g.side_table.push(helpers.getattr(intern!(py, "sdpa_dropout_noise"))?.unbind());
    let noise_target = g.side_table.len() - 1;
    g.side_table.push(helpers.getattr(intern!(py, "sdpa_math"))?.unbind());
    let math_target = g.side_table.len() - 1;
    let planned: Vec<bool> = plan.iter().map(Option::is_some).collect();
    rebuild_nodes(g, &planned, |nodes, n, i, new_index| {
        let Some(args) = &plan[i] else { return };
        let mut args = args.clone();
        args.iter_mut().for_each(|a| remap_nodes(a, new_index));
        let (FxArg::Node(q), FxArg::Node(k)) = (&args[0], &args[1]) else { unreachable!("candidate binds nodes") };
        let (qm, km) = (nodes[*q].meta.clone(), nodes[*k].meta.clone());
        let noise_meta = qm.zip(km).map(|(qm, km)| {
            let mut sizes = qm.layout.sizes.clone();
            let s = km.layout.sizes[km.layout.sizes.len() - 2];
            *sizes.last_mut().expect("query has dims") = s;
            let strides = Layout::contiguous_strides(&sizes);
            TensorMeta { layout: Layout { sizes, strides, dtype: qm.layout.dtype, cpu: true }, requires_grad: false }
        });
        nodes.push(FxNode {
            name: format!("{}_noise", n.name),
            op: FxOp::CallFunction { target: noise_target },
            canonical: None,
            target_name: "dynamo._functional.sdpa_dropout_noise".into(),
            args: vec![args[0].clone(), args[1].clone(), args[4].clone()],
            kwargs: Vec::new(),
            meta: noise_meta,
            users: Vec::new(),
            inplace: false,
            recompute: n.recompute,
        });
        args[4] = FxArg::Node(nodes.len() - 1);
        nodes.push(FxNode {
            op: FxOp::CallFunction { target: math_target },
            canonical: None,
            target_name: "dynamo._functional.sdpa_math".into(),
            args,
            kwargs: Vec::new(),
            ..n
        });
    });
    Ok(())
}

/// Note [dropout as a product]: training-mode dropout had neither a lowering nor a derivative
/// rule, so every transformer block of a training step split its joint graph around each
/// dropout (the op ran through torch's autograd between two compiled segments). `F.dropout(x,
/// p, training=True)` with a literal `0 < p < 1` on a float tensor is now two nodes: `noise =
/// dynamo._functional.dropout_noise(x, p, strides)`, a torch call drawing the scaled keep-mask as
/// eager draws it, in the memory order of eager's `x` (so the random stream and the values are
/// eager's), and `x * noise`, a pointwise op
/// that fuses into its neighbours and differentiates as a product (the backward reads the saved
/// noise, as eager's `MulBackward0` does). `inplace=True` keeps its functionalized meaning: the
/// product is the new value of `x`. `training=False`, `p` of 0 or 1 and anything else are left
/// as they were.
fn dropout_as_product(py: Python<'_>, g: &mut FxGraph) -> PyResult<()> {
    // On CUDA eager's fused kernel scales in float32 before rounding; a half-precision noise
    // tensor would round the scale first, so those stay as they were there.
    let float = |m: &Option<TensorMeta>| {
        m.as_ref().is_some_and(|m| match m.layout.dtype {
            DType::F32 | DType::F64 => true,
            DType::BF16 | DType::F16 => m.layout.cpu,
            _ => false,
        })
    };
    let candidate = |g: &FxGraph, i: usize| -> Option<(usize, f64)> {
        let n = &g.nodes[i];
        if n.canonical != Some("dropout") || !matches!(n.op, FxOp::CallFunction { .. }) || n.target_name != "torch.nn.functional.dropout" {
            return None;
        }
        let a = super::decompositions::bind(n, &["input", "p", "training", "inplace"]).ok()?;
        let p = match a[1] {
            None => 0.5,
            Some(FxArg::Float(p)) => *p,
            Some(_) => return None,
        };
        let training = match a[2] {
            None | Some(FxArg::Bool(true)) => true,
            _ => false,
        };
        let not_inplace = matches!(a[3], None | Some(FxArg::Bool(false)));
        match a[0] {
            Some(FxArg::Node(x)) if training && not_inplace && p > 0.0 && p < 1.0 && float(&g.nodes[*x].meta) && float(&n.meta) => Some((*x, p)),
            _ => None,
        }
    };
    let plan: Vec<Option<(usize, f64)>> = (0..g.nodes.len()).map(|i| candidate(g, i)).collect();
    if plan.iter().all(Option::is_none) {
        return Ok(());
    }
    let noise_fn = py.import(intern!(py, "dynamo._functional"))?.getattr(intern!(py, "dropout_noise"))?;
    let mul_fn = py.import(intern!(py, "torch"))?.getattr(intern!(py, "mul"))?;
    g.side_table.push(noise_fn.unbind());
    let noise_target = g.side_table.len() - 1;
    g.side_table.push(mul_fn.unbind());
    let mul_target = g.side_table.len() - 1;
    let planned: Vec<bool> = plan.iter().map(Option::is_some).collect();
    rebuild_nodes(g, &planned, |nodes, n, i, new_index| {
        let Some((x, p)) = plan[i] else { return };
        let x = new_index[x];
        let mut noise_meta = nodes[x].meta.clone();
        if let Some(m) = noise_meta.as_mut() {
            m.requires_grad = false;
            // Note [dropout noise layout]: the noise is `empty_like(x)`, which keeps `x`'s
            // strides only when they are non-overlapping and dense; an expanded (stride-0) or
            // sliced `x` gets a contiguous noise. Its meta said `x`'s strides, the runtime's
            // layout check of the fallback's result failed, and the graph ran again through
            // torch (Note [errors rerun eagerly]), drawing a second mask: another mask than
            // eager's and a shifted random stream for everything after.
            if !m.layout.is_non_overlapping_and_dense() {
                m.layout.strides = crate::inductor::ir::Layout::contiguous_strides(&m.layout.sizes);
            }
        }
        nodes.push(FxNode {
            name: format!("{}_noise", n.name),
            op: FxOp::CallFunction { target: noise_target },
            canonical: None,
            target_name: "dynamo._functional.dropout_noise".into(),
            // Eager's strides of `x` (its example value's): the mask is drawn in eager's memory
            // order even where the compiled graph lays `x` out otherwise (a convolution's output
            // kept channels-last).
            args: vec![
                FxArg::Node(x),
                FxArg::Float(p),
                match &nodes[x].meta {
                    Some(m) => FxArg::Tuple(m.layout.strides.iter().map(|&s| FxArg::Int(s)).collect()),
                    None => FxArg::None,
                },
            ],
            kwargs: Vec::new(),
            meta: noise_meta,
            users: Vec::new(),
            inplace: false,
            recompute: n.recompute,
        });
        let noise = nodes.len() - 1;
        nodes.push(FxNode {
            op: FxOp::CallFunction { target: mul_target },
            canonical: Some("mul"),
            target_name: "torch.mul".into(),
            args: vec![FxArg::Node(x), FxArg::Node(noise)],
            kwargs: Vec::new(),
            ..n
        });
    });
    Ok(())
}

/// Rebuilds `g`'s nodes in order with their arguments renumbered: node `i` with `planned[i]` is
/// replaced by what `expand(nodes, node, i, new_index)` pushes (its last push takes the node's
/// place for later readers; `new_index` maps old node numbers to new ones so far), every other
/// node is kept. Users are recomputed.
fn rebuild_nodes(g: &mut FxGraph, planned: &[bool], mut expand: impl FnMut(&mut Vec<FxNode>, FxNode, usize, &[usize])) {
    let old = std::mem::take(&mut g.nodes);
    let mut new_index = vec![0usize; old.len()];
    let mut nodes: Vec<FxNode> = Vec::with_capacity(old.len() + 2 * planned.iter().filter(|p| **p).count());
    for (i, mut n) in old.into_iter().enumerate() {
        n.args.iter_mut().for_each(|a| remap_nodes(a, &new_index));
        n.kwargs.iter_mut().for_each(|(_, a)| remap_nodes(a, &new_index));
        if planned[i] {
            expand(&mut nodes, n, i, &new_index);
        } else {
            nodes.push(n);
        }
        new_index[i] = nodes.len() - 1;
    }
    g.output = new_index[g.output];
    g.nodes = nodes;
    set_users(&mut g.nodes);
}

fn remap_nodes(a: &mut FxArg, new_index: &[usize]) {
    match a {
        FxArg::Node(j) => *j = new_index[*j],
        FxArg::Tuple(items) | FxArg::List(items) => items.iter_mut().for_each(|x| remap_nodes(x, new_index)),
        _ => {}
    }
}

/// Note [eager's dtype checks]: torch's CPU kernels check what meta tensors and fake tensors
/// do not: an in-place op's result type must cast to the written tensor's dtype
/// (`int64.mul_(1.5)`, `float.add_(1j)`: torch.can_cast), a float `alpha` is refused on integral
/// tensors, and `-` refuses a bool operand (`True - x`, `b - 2`, `x.sub_(b)`). Our lowering
/// functionalizes `x.op_(y)` into `op(x, y)` plus a write back and infers the result dtype by
/// promotion, so those errors would be lost (the caller's tensor silently written). Every
/// in-place and pointwise node therefore runs once, at import, on real tensors of ones (no
/// integer division by zero) of its
/// arguments' dtypes and devices with every size clipped to at most 1 (so a probe costs a few
/// microseconds whatever the inputs' sizes); if torch refuses it, the whole graph runs through
/// `gm.forward`, where the user sees eager's own exception. A node whose arguments' values are
/// unknown is not probed.
///
/// Note [probes on the CPU]: the probes of a graph compiled for a CUDA device run on CPU tensors
/// in place of the target's. On the GPU each probe launched a real kernel, and the first launch
/// of each of torch's kernels in a process loads its module (lazy loading): the first compile
/// of the bench_gpu pointwise chain spent 28-50 ms of its import there (0.4 ms when compiled
/// again; H200), about half of its cold compile. The checks probed are made by the op before
/// its kernel runs and do not depend on the device; mixing devices in one op is not probed
/// either way (a value off the target is a torch fallback at run time, which raises eager's
/// error). An op that CPU kernels lack for a dtype that CUDA has would be refused here and
/// the graph would run through `gm.forward`: slower, never wrong.
fn probe_eager_checks(
    py: Python<'_>,
    gm: &Bound<'_, PyAny>,
    nodes: &[Bound<'_, PyAny>],
    examples: &[Bound<'_, PyAny>],
    out_nodes: &[FxNode],
) -> Result<(), ImportError> {
    // Note [in-place ops on a copy]: those run torch's own op, checks included.
    let wanted = |i: usize| {
        (out_nodes[i].inplace && !out_nodes[i].target_name.starts_with("dynamo._functional."))
            || out_nodes[i].canonical.is_some_and(super::lowering::is_pointwise_op)
    };
    if !(0..out_nodes.len()).any(wanted) {
        return Ok(());
    }
    let torch = py.import(intern!(py, "torch"))?;
    let tensor_type = torch.getattr(intern!(py, "Tensor"))?;
    let ones = torch.getattr(intern!(py, "ones"))?;
    // A tensor of `v`'s dtype and device whose sizes are clipped to 1 (0 stays 0; a symbolic
    // size counts as 1).
    let tiny = |v: &Bound<'_, PyAny>| -> PyResult<Option<Bound<'_, PyAny>>> {
        if !v.is_instance(&tensor_type)? {
            return Ok(None);
        }
        let mut sizes = Vec::new();
        for s in v.getattr(intern!(py, "shape"))?.try_iter()? {
            sizes.push(s?.extract::<i64>().map(|s| s.min(1)).unwrap_or(1));
        }
        let kw = PyDict::new(py);
        kw.set_item("dtype", v.getattr(intern!(py, "dtype"))?)?;
        // Note [probes on the CPU]: a value on the GPU target is probed with a CPU tensor.
        let device = v.getattr(intern!(py, "device"))?;
        if device.getattr(intern!(py, "type"))?.extract::<String>()? == "cuda" && super::cuda::on_target(py, &device)? {
            kw.set_item("device", "cpu")?;
        } else {
            kw.set_item("device", device)?;
        }
        Ok(Some(ones.call((PyTuple::new(py, sizes)?,), Some(&kw))?))
    };
    let mut env: std::collections::HashMap<usize, Bound<'_, PyAny>> = std::collections::HashMap::new();
    let mut position = 0usize;
    let result = keeping_global_state(py, || -> Result<(), ImportError> {
        for (i, n) in nodes.iter().enumerate() {
            let op: String = n.getattr(intern!(py, "op"))?.extract()?;
            let target = n.getattr(intern!(py, "target"))?;
            let known: Option<Bound<'_, PyAny>> = match op.as_str() {
                "placeholder" => {
                    position += 1;
                    examples.get(position - 1).cloned()
                }
                "get_attr" => Some(get_attr_path(gm, &target.extract::<String>()?)?),
                _ => {
                    let meta = n.getattr(intern!(py, "meta"))?;
                    let meta = meta.cast::<PyDict>().map_err(PyErr::from)?;
                    match meta.get_item(intern!(py, "example_value"))? {
                        Some(v) => Some(v),
                        None => meta.get_item(intern!(py, "val"))?,
                    }
                }
            };
            let known = match known {
                Some(v) if v.is_instance(&tensor_type)? => tiny(&v)?,
                Some(v) if v.is_none() || v.is_instance_of::<pyo3::types::PyInt>() || v.is_instance_of::<pyo3::types::PyFloat>() || v.is_instance_of::<pyo3::types::PyBool>() => Some(v),
                _ => None,
            };
            if let Some(v) = known {
                env.insert(n.as_ptr() as usize, v);
            }
            if !matches!(op.as_str(), "call_function" | "call_method") || !wanted(i) {
                continue;
            }
            let mut all_known = true;
            for a in n.getattr(intern!(py, "all_input_nodes"))?.try_iter()? {
                all_known &= env.contains_key(&(a?.as_ptr() as usize));
            }
            if !all_known {
                continue;
            }
            let args = substitute(py, &n.getattr(intern!(py, "args"))?, &env, None)?;
            let args = args.cast_into::<PyTuple>().map_err(PyErr::from)?;
            let kwargs = substitute(py, &n.getattr(intern!(py, "kwargs"))?, &env, None)?;
            let kwargs = kwargs.cast_into::<PyDict>().map_err(PyErr::from)?;
            let called = if op == "call_function" {
                target.call(args, Some(&kwargs))
            } else if args.is_empty() {
                continue;
            } else {
                let name: String = target.extract()?;
                args.get_item(0)?
                    .getattr(name.as_str())
                    .and_then(|m| m.call(args.get_slice(1, args.len()), Some(&kwargs)))
            };
            if let Err(e) = called {
                let name: String = n.getattr(intern!(py, "name"))?.extract()?;
                return Err(ImportError::Unsupported(format!("node {name} is refused by torch: {e}")));
            }
        }
        Ok(())
    })?;
    result
}

/// Note [propagation leaves no trace]: running the graph on meta (or fake) tensors calls the
/// nodes without tensor arguments for real: a factory like `torch.randn(2, 4)` draws from the
/// global generator, and `_set_grad_enabled` nodes switch grad mode. Compiling must not change
/// what the program computes (the plugin's `--dynamo-compare` found the random numbers after a
/// compile shifted), so `f` runs with torch's CPU generator state and grad mode restored after.
fn keeping_global_state<T>(py: Python<'_>, f: impl FnOnce() -> T) -> PyResult<T> {
    let torch = py.import(intern!(py, "torch"))?;
    let rng = torch.call_method0(intern!(py, "get_rng_state"))?;
    let grad = torch.call_method0(intern!(py, "is_grad_enabled"))?;
    let out = f();
    torch.call_method1(intern!(py, "set_rng_state"), (rng,))?;
    torch.getattr(intern!(py, "_C"))?.call_method1(intern!(py, "_set_grad_enabled"), (grad,))?;
    Ok(out)
}

/// True when every user of `n` is `operator.getitem` and `n` has at least one user: `n` gives a
/// tuple or list (`split`, `chunk`, `unbind`), which has no tensor meta of its own, and its items
/// carry theirs (dynamo records example values on the getitem nodes only). Such a node is not
/// missing meta, so it does not send the whole graph through meta propagation.
fn is_container(py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<bool> {
    let getitem = py.import(intern!(py, "operator"))?.getattr(intern!(py, "getitem"))?;
    let users = n.getattr(intern!(py, "users"))?;
    if users.len()? == 0 {
        return Ok(false);
    }
    for u in users.try_iter()? {
        let u = u?;
        let op: String = u.getattr(intern!(py, "op"))?.extract()?;
        if op != "call_function" || !u.getattr(intern!(py, "target"))?.is(&getitem) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Gives every call node without `meta` its value's metadata: first by inference for the
/// pointwise ops we lower (no torch calls), else by running the graph on meta tensors, else by
/// FakeTensorProp.
fn fill_missing_meta(
    py: Python<'_>,
    gm: &Bound<'_, PyAny>,
    nodes: &[Bound<'_, PyAny>],
    examples: &[Bound<'_, PyAny>],
    out_nodes: &mut [FxNode],
    missing: &[usize],
) -> Result<(), ImportError> {
    let mut inferred_all = true;
    for &i in missing {
        match super::lowering::infer_meta(out_nodes, i) {
            Some(meta) => out_nodes[i].meta = Some(meta),
            None => {
                inferred_all = false;
                break;
            }
        }
    }
    if inferred_all {
        return Ok(());
    }
    // `DYNAMO_META_PROPAGATION=0` goes straight to FakeTensorProp (for comparisons).
    let propagated = if std::env::var_os("DYNAMO_META_PROPAGATION").is_some_and(|v| v == "0") {
        Err(pyo3::exceptions::PyValueError::new_err("meta propagation switched off"))
    } else {
        keeping_global_state(py, || meta_propagate(py, gm, nodes, examples))?
    };
    match propagated {
        Ok(values) => {
            for &i in missing {
                out_nodes[i].meta = match &values[i] {
                    Some(v) => tensor_meta_ext(py, v, true)?,
                    None => None,
                };
            }
            return Ok(());
        }
        Err(e) => tracing::debug!(target: "inductor::lowering", "meta propagation failed ({e}); using FakeTensorProp"),
    }
    let fake_mod = py.import("torch._subclasses.fake_tensor")?;
    let prop_mod = py.import("torch.fx.passes.fake_tensor_prop")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("allow_non_fake_inputs", true)?;
    let mode = fake_mod.getattr("FakeTensorMode")?.call((), Some(&kwargs))?;
    let prop = prop_mod.getattr("FakeTensorProp")?.call1((gm, mode))?;
    let examples_t = PyTuple::new(py, examples)?;
    keeping_global_state(py, || prop.call_method1("propagate", examples_t))?
        .map_err(|e| ImportError::Unsupported(format!("fake tensor propagation failed: {e}")))?;
    for &i in missing {
        let meta = nodes[i].getattr(intern!(py, "meta"))?;
        out_nodes[i].meta = match meta.cast::<PyDict>().ok().and_then(|d| d.get_item("val").ok().flatten()) {
            Some(v) => tensor_meta(py, &v)?,
            None => None,
        };
    }
    Ok(())
}
