//! The captured graph: placeholders, calls and one output, in torch.fx's shape.
//!
//! Invariant: the graph holds no Python objects. Call targets and non-literal constants are
//! `PyRef`s, indices into a side table that the owner (`symbolic::output_graph::OutputGraph`)
//! keeps; the graph keeps their printable names. `Display` prints the fx-like text used in logs
//! (`DYNAMO_LOGS=graph`) and snapshots.

use std::fmt;

/// A node of the graph (`n3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Index of a Python object in the owner's side table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PyRef(pub u32);

/// An argument of a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Node(NodeId),
    /// A constant kept in the side table, with its repr for printing.
    Const(PyRef, String),
    Tuple(Vec<Arg>),
    List(Vec<Arg>),
}

/// What a node does (fx opcodes).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A graph input; `source` is the eval-able name of where the frame gets it.
    Placeholder { source: String },
    /// `target(*args, **kwargs)`; `name` is the target's qualified name.
    CallFunction { target: PyRef, name: String },
    /// `args[0].method(*args[1:], **kwargs)`.
    CallMethod { method: String },
}

/// Static tensor metadata from shape propagation (fake tensors).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMeta {
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
    pub dtype: String,
    pub device: String,
    pub requires_grad: bool,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub id: NodeId,
    pub name: String,
    pub op: Op,
    pub args: Vec<Arg>,
    pub kwargs: Vec<(String, Arg)>,
    pub meta: Option<TensorMeta>,
    /// Made inside an activation-checkpointed region (`torch.utils.checkpoint.checkpoint`):
    /// exported as fx `meta["recompute"]`, so the partitioner recomputes the value in the
    /// backward instead of saving it (Note [activation checkpointing] in src/autograd/partition.rs).
    pub recompute: bool,
}

/// A captured graph: nodes in execution order and the list of output values.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub outputs: Vec<Arg>,
    /// Depth of the activation-checkpointed regions being traced: nodes added while it is
    /// non-zero are marked `recompute`.
    pub checkpoint_depth: u32,
}

impl Graph {
    /// Appends a node and returns its id.
    pub fn add(&mut self, name: String, op: Op, args: Vec<Arg>, kwargs: Vec<(String, Arg)>, meta: Option<TensorMeta>) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        let recompute = self.checkpoint_depth > 0 && !matches!(op, Op::Placeholder { .. });
        self.nodes.push(Node { id, name, op, args, kwargs, meta, recompute });
        id
    }

    /// Removes the nodes for which `pure` holds that nothing uses (no later node, no output),
    /// in one reverse pass (users come after their inputs), and renumbers the rest. Returns the
    /// new id of each old node (`None`: removed).
    pub fn remove_unused(&mut self, pure: impl Fn(&Node) -> bool) -> Vec<Option<NodeId>> {
        let mut used = vec![false; self.nodes.len()];
        self.outputs.iter().for_each(|a| mark_used(a, &mut used));
        let mut keep = vec![true; self.nodes.len()];
        for i in (0..self.nodes.len()).rev() {
            let n = &self.nodes[i];
            if !used[i] && !matches!(n.op, Op::Placeholder { .. }) && pure(n) {
                keep[i] = false;
                continue;
            }
            n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)).for_each(|a| mark_used(a, &mut used));
        }
        self.keep_nodes(&keep)
    }

    /// Removes the placeholders `drop` names (by id) when nothing uses them (no node, no
    /// output), and renumbers the rest. Returns the new id of each old node (`None`: removed).
    pub fn remove_unused_placeholders(&mut self, drop: impl Fn(&Node) -> bool) -> Vec<Option<NodeId>> {
        let mut used = vec![false; self.nodes.len()];
        for n in &self.nodes {
            n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)).for_each(|a| mark_used(a, &mut used));
        }
        self.outputs.iter().for_each(|a| mark_used(a, &mut used));
        let keep: Vec<bool> = self.nodes.iter().map(|n| used[n.id.0 as usize] || !matches!(n.op, Op::Placeholder { .. }) || !drop(n)).collect();
        self.keep_nodes(&keep)
    }

    /// Keeps the nodes with `keep[id]` (none of the others may be used), renumbered.
    fn keep_nodes(&mut self, keep: &[bool]) -> Vec<Option<NodeId>> {
        let mut map = Vec::with_capacity(self.nodes.len());
        let mut next = 0u32;
        for &k in keep {
            map.push(k.then(|| {
                next += 1;
                NodeId(next - 1)
            }));
        }
        fn remap(a: &mut Arg, map: &[Option<NodeId>]) {
            match a {
                Arg::Node(n) => *n = map[n.0 as usize].expect("a used node is kept"),
                Arg::Tuple(xs) | Arg::List(xs) => xs.iter_mut().for_each(|x| remap(x, map)),
                Arg::Const(..) => {}
            }
        }
        let nodes = std::mem::take(&mut self.nodes);
        for (mut n, k) in nodes.into_iter().zip(keep) {
            if !k {
                continue;
            }
            n.id = map[n.id.0 as usize].unwrap();
            n.args.iter_mut().for_each(|a| remap(a, &map));
            n.kwargs.iter_mut().for_each(|(_, a)| remap(a, &map));
            self.nodes.push(n);
        }
        self.outputs.iter_mut().for_each(|a| remap(a, &map));
        map
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// Number of call nodes (what `explain` reports as ops).
    pub fn n_ops(&self) -> usize {
        self.nodes.iter().filter(|n| !matches!(n.op, Op::Placeholder { .. })).count()
    }

    pub fn placeholders(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| matches!(n.op, Op::Placeholder { .. }))
    }

    /// Whether running the graph can change one of its inputs: a node that writes an argument
    /// (`Node::written_args`) which is an input or a view of one (through view-like ops, which
    /// share storage per PyTorch's view semantics). A graph that cannot is safe to run again from
    /// its inputs.
    pub fn mutates_inputs(&self) -> bool {
        !self.mutated_inputs().is_empty()
    }

    /// The inputs (by placeholder position) that running the graph may write, as
    /// `mutates_inputs` decides, in placeholder order.
    pub fn mutated_inputs(&self) -> Vec<usize> {
        // For each node: the placeholder position it is (a view of), if any.
        let mut input_of: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut n_placeholders = 0;
        let mut mutated = Vec::new();
        for n in &self.nodes {
            let op_name = match &n.op {
                Op::Placeholder { .. } => {
                    input_of[n.id.0 as usize] = Some(n_placeholders);
                    n_placeholders += 1;
                    continue;
                }
                Op::CallFunction { name, .. } => name.rsplit('.').next().unwrap_or(name).to_string(),
                Op::CallMethod { method } => method.clone(),
            };
            let mut written = Vec::new();
            n.written_args(&mut written);
            for w in written {
                if let Some(i) = input_of[w.0 as usize] {
                    if !mutated.contains(&i) {
                        mutated.push(i);
                    }
                }
            }
            if let Some(Arg::Node(a)) = n.args.first() {
                if input_of[a.0 as usize].is_some() && VIEW_OPS.contains(&op_name.as_str()) {
                    input_of[n.id.0 as usize] = input_of[a.0 as usize];
                }
            }
        }
        mutated.sort_unstable();
        mutated
    }

    /// Whether the graph draws from a random number generator (`torch.rand*`, dropout,
    /// `bernoulli`, `multinomial`, `normal`, the in-place samplers `uniform_`/`normal_`/...,
    /// `rrelu`): a rerun after a failure must start from the generator's state at the call.
    pub fn uses_rng(&self) -> bool {
        self.nodes.iter().any(|n| {
            let name = match &n.op {
                Op::Placeholder { .. } => return false,
                Op::CallFunction { name, .. } => name.rsplit('.').next().unwrap_or(name),
                Op::CallMethod { method } => method.as_str(),
            };
            let name = name.trim_end_matches('_');
            RANDOM_OPS.contains(&name) || name.starts_with("rand") || name.ends_with("dropout") || name.starts_with("dropout")
        })
    }

    /// Whether an op of the graph may raise depending on the values in its tensors (not their
    /// shapes, which tracing checked): an index out of range (embedding, gather, indexing with a
    /// tensor, `nll_loss` targets), an integer division by zero, a singular or non-positive-
    /// definite matrix in linear algebra, invalid probabilities (multinomial, bernoulli,
    /// binary_cross_entropy), `torch._assert`. Ops outside these families of ATen's
    /// `native_functions.yaml` only compute; a `true` may be a false alarm.
    pub fn may_raise_on_values(&self) -> bool {
        self.nodes.iter().any(|n| {
            let name = match &n.op {
                Op::Placeholder { .. } => return false,
                Op::CallFunction { name, .. } => name.rsplit('.').next().unwrap_or(name),
                Op::CallMethod { method } => method.as_str(),
            };
            let name = name.trim_start_matches("__").trim_end_matches("__").trim_end_matches('_');
            let integer_result = n.meta.as_ref().is_some_and(|m| m.dtype.contains("int") || m.dtype.contains("uint"));
            RAISES_ON_VALUES.contains(&name)
                || ["index", "scatter", "linalg", "_linalg", "embedding", "cholesky", "lu_", "sparse"].iter().any(|p| name.starts_with(p))
                || (integer_result && RAISES_ON_ZERO_DIVISOR.contains(&name))
        })
    }
}

impl Node {
    /// Pushes the nodes this call writes into, per the op's semantics: the first argument of an
    /// in-place op (`is_inplace_op`, `inplace=True`; every tensor of a list for `_foreach_*_`),
    /// the `out=` tensors, and the running statistics that `batch_norm` / `instance_norm` update
    /// in training (`F.batch_norm(input, running_mean, running_var, weight, bias, training, ...)`,
    /// `torch.batch_norm(input, weight, bias, running_mean, running_var, training, ...)`, and the
    /// same layouts for `instance_norm` with `use_input_stats`). A flag that is not a constant
    /// counts as set.
    pub fn written_args(&self, out: &mut Vec<NodeId>) {
        fn nodes_of(a: &Arg, out: &mut Vec<NodeId>) {
            match a {
                Arg::Node(n) => out.push(*n),
                Arg::Tuple(items) | Arg::List(items) => items.iter().for_each(|i| nodes_of(i, out)),
                Arg::Const(..) => {}
            }
        }
        let (full_name, is_method) = match &self.op {
            Op::Placeholder { .. } => return,
            Op::CallFunction { name, .. } => (name.as_str(), false),
            Op::CallMethod { method } => (method.as_str(), true),
        };
        let kwarg = |k: &str| self.kwargs.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let inplace_kw = matches!(kwarg("inplace"), Some(Arg::Const(_, r)) if r == "True") || matches!(kwarg("inplace"), Some(Arg::Node(_)));
        if is_inplace_op(full_name, is_method) || inplace_kw {
            if let Some(a) = self.args.first() {
                nodes_of(a, out);
            }
        }
        if let Some(o) = kwarg("out") {
            nodes_of(o, out);
        }
        let last = full_name.rsplit('.').next().unwrap_or(full_name);
        if !is_method && matches!(last, "batch_norm" | "instance_norm") {
            let functional = full_name.contains("functional");
            let (mean, var, flag) = if functional { (1, 2, 5) } else { (3, 4, 5) };
            let flag_name = if last == "batch_norm" { "training" } else { "use_input_stats" };
            let set = match self.args.get(flag).or_else(|| kwarg(flag_name)) {
                Some(Arg::Const(_, r)) => r == "True",
                Some(_) => true,
                // F.batch_norm trains only when asked; F.instance_norm uses input stats by default.
                None => last == "instance_norm",
            };
            if set {
                let names = ["running_mean", "running_var"];
                for (pos, name) in [mean, var].into_iter().zip(names) {
                    if let Some(a) = self.args.get(pos).or_else(|| kwarg(name)) {
                        nodes_of(a, out);
                    }
                }
            }
        }
    }
}

/// Random ops (by last name component, without a trailing `_`) besides `rand*` and `*dropout*`:
/// see `Graph::uses_rng`.
const RANDOM_OPS: [&str; 12] =
    ["bernoulli", "multinomial", "normal", "poisson", "uniform", "exponential", "geometric", "log_normal", "cauchy", "random", "rrelu", "binomial"];

/// Ops (by last name component, without `__` or a trailing `_`) that may raise on tensor values:
/// see `Graph::may_raise_on_values`.
const RAISES_ON_VALUES: [&str; 50] = [
    "getitem", "setitem", "gather", "take", "take_along_dim", "put", "one_hot", "nll_loss", "nll_loss2d", "cross_entropy",
    "multinomial", "bincount", "repeat_interleave", "inverse", "solve", "lu", "det", "logdet", "slogdet", "pinverse", "svd",
    "eig", "eigh", "lstsq", "qr", "triangular_solve", "matrix_rank", "_assert", "_assert_async", "bernoulli", "poisson",
    "multi_margin_loss", "multilabel_margin_loss", "ctc_loss", "histc", "histogram", "searchsorted", "bucketize", "nonzero",
    "binary_cross_entropy", "masked_scatter", "narrow",
    // Distribution parameters checked per element (a negative `std`, a probability out of
    // [0, 1]), indices of an unpooling, lengths of a segment reduction, `mvlgamma`'s domain
    // (aten/src/ATen/native/Distributions.cpp, MaxUnpooling.cpp, SegmentReduce.cpp,
    // UnaryOps.cpp `mvlgamma_check`).
    "normal", "binomial", "max_unpool1d", "max_unpool2d", "max_unpool3d", "segment_reduce", "histogramdd", "mvlgamma",
];

/// Integer divisions (by last name component) that raise `ZeroDivisionError` / `RuntimeError`
/// on a zero divisor, the in-place operator functions included (`_operator.ifloordiv` of
/// `z //= y`, `imod`).
const RAISES_ON_ZERO_DIVISOR: [&str; 12] =
    ["div", "divide", "floor_divide", "floordiv", "remainder", "mod", "fmod", "true_divide", "ifloordiv", "imod", "itruediv", "idiv"];

/// Whether a call writes into its first argument: a `foo_` method or function, `setitem` /
/// `__setitem__` / `__delitem__`, an in-place operator function (`_operator.iadd`, ...) or an
/// in-place dunder called as a method (`x.__iadd__(y)`, Python's data model "augmented
/// arithmetic assignments"). `name` is a method name for a call_method node and the full
/// `module.qualname` of the target for a call_function node.
/// Marks every node `a` mentions in `used`.
fn mark_used(a: &Arg, used: &mut [bool]) {
    match a {
        Arg::Node(n) => used[n.0 as usize] = true,
        Arg::Tuple(xs) | Arg::List(xs) => xs.iter().for_each(|x| mark_used(x, used)),
        Arg::Const(..) => {}
    }
}

pub fn is_inplace_op(name: &str, is_method: bool) -> bool {
    const INPLACE_OPERATORS: [&str; 13] =
        ["iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "ilshift", "irshift", "imatmul"];
    let (module, last) = match name.rsplit_once('.') {
        Some((m, l)) if !is_method => (m, l),
        _ => ("", name),
    };
    // `operator.and_`, `or_`, `not_`, `is_` are out-of-place: the underscore only avoids a
    // keyword.
    if (module == "_operator" || module == "operator") && matches!(last, "and_" | "or_" | "not_" | "is_") {
        return false;
    }
    if last.ends_with('_') && !last.ends_with("__") {
        return true;
    }
    if matches!(last, "setitem" | "__setitem__" | "__delitem__") {
        return true;
    }
    if (module == "_operator" || module == "operator") && INPLACE_OPERATORS.contains(&last) {
        return true;
    }
    if is_method && last.len() > 5 && last.starts_with("__i") && last.ends_with("__") {
        return INPLACE_OPERATORS.contains(&&last[2..last.len() - 2]);
    }
    false
}

/// Ops whose result may share storage with their first argument (PyTorch "Tensor Views").
pub const VIEW_OPS: [&str; 27] = [
    "view", "view_as", "reshape", "reshape_as", "getitem", "__getitem__", "transpose", "t", "permute", "squeeze", "unsqueeze",
    "expand", "expand_as", "narrow", "select", "as_strided", "flatten", "unflatten", "split", "chunk", "unbind", "diagonal",
    "detach", "movedim", "swapaxes", "contiguous", "getattr",
];

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Node(n) => write!(f, "{n}"),
            Arg::Const(_, repr) => f.write_str(repr),
            Arg::Tuple(items) => {
                f.write_str("(")?;
                for (i, a) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                if items.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            Arg::List(items) => {
                f.write_str("[")?;
                for (i, a) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for n in &self.nodes {
            let meta = n
                .meta
                .as_ref()
                .map(|m| format!("  # {}{:?}", m.dtype.trim_start_matches("torch."), m.sizes))
                .unwrap_or_default();
            let mut args: Vec<String> = n.args.iter().map(|a| a.to_string()).collect();
            args.extend(n.kwargs.iter().map(|(k, v)| format!("{k}={v}")));
            match &n.op {
                Op::Placeholder { source } => writeln!(f, "{} = placeholder[{source}]{meta}", n.id)?,
                Op::CallFunction { name, .. } => writeln!(f, "{} = {name}({}){meta}", n.id, args.join(", "))?,
                Op::CallMethod { method } => writeln!(f, "{} = call_method[{method}]({}){meta}", n.id, args.join(", "))?,
            }
        }
        let outs: Vec<String> = self.outputs.iter().map(|a| a.to_string()).collect();
        writeln!(f, "return ({})", outs.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::{is_inplace_op, Arg, Graph, NodeId, Op, PyRef};

    fn call(g: &mut Graph, name: &str, args: Vec<Arg>, kwargs: Vec<(&str, Arg)>) -> NodeId {
        let kwargs = kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        g.add(name.rsplit('.').next().unwrap().to_string(), Op::CallFunction { target: PyRef(0), name: name.into() }, args, kwargs, None)
    }

    fn input(g: &mut Graph, name: &str) -> NodeId {
        g.add(name.into(), Op::Placeholder { source: format!("L['{name}']") }, vec![], vec![], None)
    }

    fn flag(v: bool) -> Arg {
        Arg::Const(PyRef(1), if v { "True" } else { "False" }.into())
    }

    #[test]
    fn written_inputs_follow_each_ops_semantics() {
        let mut g = Graph::default();
        let x = input(&mut g, "x");
        let mean = input(&mut g, "mean");
        let var = input(&mut g, "var");
        let out = input(&mut g, "out");
        let a = input(&mut g, "a");
        let b = input(&mut g, "b");
        // F.batch_norm(x, mean, var, training=False) reads its statistics; training=True writes them.
        call(&mut g, "torch.nn.functional.batch_norm", vec![Arg::Node(x), Arg::Node(mean), Arg::Node(var)], vec![("training", flag(false))]);
        assert_eq!(g.mutated_inputs(), Vec::<usize>::new());
        call(&mut g, "torch.nn.functional.batch_norm", vec![Arg::Node(x), Arg::Node(mean), Arg::Node(var)], vec![("training", flag(true))]);
        assert_eq!(g.mutated_inputs(), vec![1, 2]);
        // `out=` writes the out tensor, not the first argument.
        call(&mut g, "torch.add", vec![Arg::Node(x), Arg::Node(x)], vec![("out", Arg::Node(out))]);
        assert_eq!(g.mutated_inputs(), vec![1, 2, 3]);
        // An in-place foreach op writes every tensor of its list.
        call(&mut g, "torch._foreach_add_", vec![Arg::List(vec![Arg::Node(a), Arg::Node(b)]), Arg::Const(PyRef(2), "1.0".into())], vec![]);
        assert_eq!(g.mutated_inputs(), vec![1, 2, 3, 4, 5]);
        assert!(!g.uses_rng());
    }

    #[test]
    fn random_ops_are_found_by_name() {
        for name in ["torch.rand", "torch.randn_like", "torch.nn.functional.dropout", "torch.bernoulli", "torch.Tensor.uniform_", "torch.multinomial"] {
            let mut g = Graph::default();
            let x = input(&mut g, "x");
            call(&mut g, name, vec![Arg::Node(x)], vec![]);
            assert!(g.uses_rng(), "{name}");
        }
        let mut g = Graph::default();
        let x = input(&mut g, "x");
        call(&mut g, "torch.nn.functional.normalize", vec![Arg::Node(x)], vec![]);
        assert!(!g.uses_rng());
    }

    #[test]
    fn inplace_ops_by_name() {
        assert!(is_inplace_op("add_", true));
        assert!(is_inplace_op("torch.relu_", false));
        assert!(is_inplace_op("_operator.iand", false));
        assert!(is_inplace_op("__iadd__", true));
        assert!(!is_inplace_op("__add__", true));
        // operator's keyword-avoiding names are out of place.
        for f in ["_operator.and_", "_operator.or_", "_operator.not_", "_operator.is_"] {
            assert!(!is_inplace_op(f, false), "{f}");
        }
    }
}
