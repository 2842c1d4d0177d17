//! Functionalization of the imported graph: in-place ops become their out-of-place forms, later
//! readers see the new value, and mutated graph inputs are written back after the call
//! (PyTorch: `torch/_subclasses/functional_tensor.py` and AOTAutograd's input-mutation epilogue,
//! `ViewAndMutationMeta`).
//!
//! The importer ([`super::fx_import`]) has already replaced every recognized in-place node by its
//! functional equivalent (`x.add_(y)` -> `x.add(y)`, `F.relu(x, inplace=True)` ->
//! `F.relu(x, inplace=False)`, `operator.iadd` -> `operator.add`) and marked it `inplace`: the node
//! computes the new value of its first argument. This pass decides whether renaming is sound and
//! does it:
//!
//! - Alias classes: a node may alias its tensor arguments unless it is known to return a fresh
//!   tensor ([`returns_fresh`]); an in-place node aliases its first argument. Classes are the
//!   connected components of those edges (union-find).
//! - A class is functionalizable when it holds one *root* (a graph input, a constant, or a fresh
//!   value) and otherwise only in-place nodes whose first argument is in the class: no view, no
//!   second name for the storage. Then every reader after the k-th mutation reads the k-th new
//!   value. A class with any other member (a view of a mutated tensor, an op that may return its
//!   input) is refused and the graph runs through torch, as eager would run it.
//! - Mutated roots that are graph inputs or constants (buffers such as running statistics) get a
//!   [`Writeback`]: after the graph, `root.copy_(final)`. Outputs that name a mutated input return
//!   the input itself, so `return x.add_(1)` keeps eager's identity (`out is x`).
//!
//! Invariants after the pass: no node is `inplace`-marked with a reader of an older version; `args`
//! only refer to earlier nodes; the output refers to roots of written-back inputs, never to their
//! intermediate versions.

use super::fx_import::{FxArg, FxGraph, FxOp};

/// `dst.copy_(src)` after the graph: graph input or constant node `dst` receives the final value
/// computed by node `src`, written by `bumps` in-place ops in the graph.
///
/// Note [version counter of written-back inputs]: eager bumps a tensor's `_version` once per
/// in-place op on it (`torch/csrc/autograd/VariableTypeManual.cpp`, `increment_version`), so
/// `x.add_(1); x.mul_(2)` leaves it 2 higher; the one `copy_` of the writeback bumps it once.
/// After the copy the runtime adds the other `bumps - 1` with
/// `torch._C._autograd._unsafe_set_version_counter`, as AOTAutograd's epilogue does for the
/// mutations it replays, so `x._version` (read in the frame or after it) is eager's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writeback {
    pub dst: usize,
    pub src: usize,
    pub bumps: usize,
}

/// Call targets (qualified names as the importer prints them) that always return a new tensor,
/// never one of their arguments or a view of one. Pointwise ops of the lowering table count too
/// (see [`returns_fresh`]).
const FRESH_FUNCTIONS: &[&str] = &[
    "torch.conv1d",
    "torch.conv2d",
    "torch.conv3d",
    "torch.nn.functional.conv1d",
    "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d",
    "torch._C._nn.linear",
    "torch.nn.functional.linear",
    "torch.matmul",
    "torch.mm",
    "torch.bmm",
    "torch.addmm",
    "torch.baddbmm",
    // Matrix-vector and vector products (spectral_norm's power iteration).
    "torch.mv",
    "torch.addmv",
    "torch.dot",
    "torch.vdot",
    "torch.inner",
    "torch.outer",
    "torch.nn.functional.normalize",
    "_operator.matmul",
    "torch.nn.functional.batch_norm",
    "torch.batch_norm",
    "torch.nn.functional.layer_norm",
    "torch.layer_norm",
    "torch.nn.functional.group_norm",
    "torch.nn.functional.softmax",
    "torch.softmax",
    "torch.nn.functional.log_softmax",
    "torch.log_softmax",
    "torch._C._nn.gelu",
    "torch.nn.functional.gelu",
    "torch.nn.functional.max_pool2d",
    "torch.max_pool2d",
    "torch._C._nn.adaptive_avg_pool2d",
    "torch.nn.functional.adaptive_avg_pool2d",
    "torch._C._nn.avg_pool2d",
    "torch.nn.functional.avg_pool2d",
    "torch.nn.functional.embedding",
    "torch.cat",
    "torch.concat",
    "torch.stack",
    "torch.clone",
    "torch.sum",
    "torch.mean",
    "torch.amax",
    "torch.amin",
    "torch.zeros",
    "torch.ones",
    "torch.full",
    "torch.empty",
    "torch.randn",
    "torch.rand",
    "torch.arange",
    "torch.zeros_like",
    "torch.ones_like",
    "torch.full_like",
    "torch.empty_like",
    "torch.rand_like",
    "torch.randn_like",
    "torch.randint_like",
    "torch.randint",
    "torch.empty_strided",
    "torch.tensor",
    "dynamo._functional.method_on_copy",
    "dynamo._functional.setitem_on_copy",
    "dynamo._functional.out_on_copy",
    "dynamo._functional.dropout_noise",
    "torch.nn.functional.hardswish",
    "torch.nn.functional.hardsigmoid",
    "torch._C._nn.hardswish",
    "torch._C._nn.hardsigmoid",
    "torch.nn.functional.hardtanh",
    "torch._C._nn.hardtanh",
    "torch.nn.functional.relu6",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
];

/// Method names that always return a new tensor (besides the lowering table's pointwise ops).
const FRESH_METHODS: &[&str] = &[
    "clone", "sum", "mean", "amax", "amin", "softmax", "log_softmax", "matmul", "__matmul__", "mv", "dot", "vdot", "outer",
    // Factories on a tensor: only its dtype and device are read.
    "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "new_empty_strided",
];

/// True when node `i`'s value is never one of its arguments or a view of one.
pub fn returns_fresh(g: &FxGraph, i: usize) -> bool {
    let n = &g.nodes[i];
    match &n.op {
        // `+x` (torch.positive) returns its argument itself; views alias it.
        FxOp::CallFunction { .. } | FxOp::CallMethod { .. }
            if n.canonical.is_some_and(|c| {
                (super::lowering::is_pointwise_op(c) && c != "pos") || super::decompositions::returns_fresh(c)
            }) =>
        {
            true
        }
        FxOp::CallFunction { .. } => FRESH_FUNCTIONS.contains(&n.target_name.as_str()),
        FxOp::CallMethod { name } => FRESH_METHODS.contains(&name.as_str()),
        _ => false,
    }
}

/// Methods whose value is a Python number, bool or size tuple: they alias nothing.
const VALUE_METHODS: &[&str] = &["size", "dim", "numel", "stride", "item", "tolist", "is_contiguous", "nelement", "ndimension"];

/// True when node `i` gives a plain Python value (sizes, numbers), which cannot alias storage.
fn returns_python_value(g: &FxGraph, i: usize) -> bool {
    matches!(&g.nodes[i].op, FxOp::CallMethod { name } if VALUE_METHODS.contains(&name.as_str()))
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Functionalizes `g` in place (see the module docs). `Ok` gives the writebacks to run after the
/// graph; `Err` names why the graph's mutations cannot be expressed functionally.
pub fn functionalize(g: &mut FxGraph) -> Result<Vec<Writeback>, String> {
    if !g.nodes.iter().any(|n| n.inplace) {
        return Ok(Vec::new());
    }
    let n = g.nodes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for i in 0..n {
        if matches!(g.nodes[i].op, FxOp::Output) {
            continue;
        }
        let linked: Vec<usize> = if g.nodes[i].inplace {
            match g.nodes[i].args.first() {
                Some(FxArg::Node(j)) => vec![*j],
                _ => return Err(format!("in-place node {} has no tensor to mutate", g.nodes[i].name)),
            }
        } else if returns_fresh(g, i) {
            Vec::new()
        } else {
            let mut v = Vec::new();
            for a in g.nodes[i].args.iter().chain(g.nodes[i].kwargs.iter().map(|(_, a)| a)) {
                a.for_each_node(&mut |j| v.push(j));
            }
            v
        };
        if returns_python_value(g, i) {
            continue;
        }
        for j in linked {
            let (a, b) = (find(&mut parent, i), find(&mut parent, j));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    // Classes that contain a mutation must be a root plus a chain of in-place nodes.
    let mut mutated_class = vec![false; n];
    for i in 0..n {
        if g.nodes[i].inplace {
            let c = find(&mut parent, i);
            mutated_class[c] = true;
        }
    }
    // The last mutation of each class: an alias made after it (a view of the final value) reads
    // the renamed value and sees everything eager would.
    let mut last_mutation: Vec<usize> = vec![0; n];
    for i in 0..n {
        if g.nodes[i].inplace {
            let c = find(&mut parent, i);
            last_mutation[c] = i;
        }
    }
    let mut root_of_class: Vec<Option<usize>> = vec![None; n];
    // Versions of a mutated tensor: its root and the in-place nodes on it (readers of any version
    // read the latest one); other members are aliases made after the last mutation.
    let mut is_version = vec![false; n];
    for i in 0..n {
        let c = find(&mut parent, i);
        if !mutated_class[c] {
            continue;
        }
        if g.nodes[i].inplace {
            is_version[i] = true;
            continue;
        }
        if let Some(other) = root_of_class[c] {
            // An alias of an intermediate made after its last mutation is fine; an alias of a
            // mutated graph input must stay an alias of the input object itself, which the
            // renamed graph cannot give.
            let root_is_input = matches!(g.nodes[other].op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. });
            if i > last_mutation[c] && !root_is_input {
                continue;
            }
            return Err(format!(
                "{} and {} may share a storage that an in-place op mutates (a view or an alias)",
                g.nodes[other].name, g.nodes[i].name
            ));
        }
        root_of_class[c] = Some(i);
        is_version[i] = true;
    }
    // Rename: every read of a mutated class sees its latest version at that point.
    let mut latest: Vec<Option<usize>> = vec![None; n];
    let output = g.output;
    let is_root_input: Vec<bool> =
        g.nodes.iter().map(|k| matches!(k.op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. })).collect();
    for i in 0..n {
        let is_output = i == output;
        let mut args = std::mem::take(&mut g.nodes[i].args);
        let mut kwargs = std::mem::take(&mut g.nodes[i].kwargs);
        let mut rename = |j: usize| -> usize {
            if !is_version[j] {
                return j;
            }
            let c = find(&mut parent, j);
            match latest[c] {
                Some(v) if is_output => match root_of_class[c] {
                    Some(root) if is_root_input[root] => root,
                    _ => v,
                },
                Some(v) => v,
                None => j,
            }
        };
        for a in args.iter_mut() {
            remap_arg(a, &mut rename);
        }
        for (_, a) in kwargs.iter_mut() {
            remap_arg(a, &mut rename);
        }
        g.nodes[i].args = args;
        g.nodes[i].kwargs = kwargs;
        if g.nodes[i].inplace {
            let c = find(&mut parent, i);
            latest[c] = Some(i);
        }
    }
    let mut bumps = vec![0usize; n];
    for i in 0..n {
        if g.nodes[i].inplace {
            bumps[find(&mut parent, i)] += 1;
        }
    }
    let mut writebacks = Vec::new();
    for c in 0..n {
        if let (Some(root), Some(last)) = (root_of_class[c], latest[c]) {
            if matches!(g.nodes[root].op, FxOp::Placeholder { .. } | FxOp::GetAttr { .. }) {
                writebacks.push(Writeback { dst: root, src: last, bumps: bumps[c] });
            }
        }
    }
    super::fx_import::set_users(&mut g.nodes);
    Ok(writebacks)
}

fn remap_arg(a: &mut FxArg, f: &mut impl FnMut(usize) -> usize) {
    match a {
        FxArg::Node(j) => *j = f(*j),
        FxArg::Tuple(items) | FxArg::List(items) => items.iter_mut().for_each(|x| remap_arg(x, f)),
        _ => {}
    }
}

/// True when one of the `mutated` inputs (positions in `inputs`) shares storage with another
/// tensor input (`f(a, a.detach())` mutating the second, `x.data.mul_(2)` after a break): eager
/// sees the write through both names, while a functionalized graph reads every input before
/// its write-backs, so such a call must run through torch. Used by the inductor runtime and the
/// AOTAutograd runtime on every call of a graph that writes back into an input (none otherwise).
pub fn mutated_input_shares_storage(
    py: pyo3::Python<'_>,
    inputs: &[pyo3::Bound<'_, pyo3::PyAny>],
    mutated: impl IntoIterator<Item = usize>,
    tensor_type: &pyo3::Bound<'_, pyo3::PyAny>,
) -> pyo3::PyResult<bool> {
    use pyo3::prelude::*;
    let storage_ptr = |t: &Bound<'_, PyAny>| -> PyResult<usize> {
        t.call_method0(pyo3::intern!(py, "untyped_storage"))?
            .call_method0(pyo3::intern!(py, "data_ptr"))?
            .extract()
    };
    for pos in mutated {
        let Some(m) = inputs.get(pos) else { continue };
        if !m.is_instance(tensor_type)? {
            continue;
        }
        let p = storage_ptr(m)?;
        for (other, v) in inputs.iter().enumerate() {
            if other != pos && v.is_instance(tensor_type)? && storage_ptr(v)? == p {
                return Ok(true);
            }
        }
    }
    Ok(false)
}
