//! Layout optimization: convolution networks run in channels-last (NHWC) memory order.
//!
//! PyTorch's CPU convolutions (oneDNN) are much faster on channels-last tensors, and so are
//! cuDNN's on the GPU (its tensor-core kernels work in NHWC; an NCHW call transposes around
//! them); the pointwise ops between them (batch norm, activations, residual adds) cost the same
//! in either order (the GPU path iterates them in memory order, nvptx's Note [memory order]).
//! torch.compile's inductor makes the same choice whenever the graph has a convolution
//! (`GraphLowering.decide_layout_opt`). This pass, run on the functionalized [`FxGraph`] before
//! lowering, on graphs for either target ("CPU" below means the compile target, Note [compile
//! target] in cuda.rs):
//!
//! 1. gives every 2-d convolution (`torch.conv2d` on 4-d float32 CPU tensors) a channels-last
//!    input (weights stay as they are: see the comment in [`rewrite`]), inserting `x.contiguous(memory_format=torch.channels_last)` nodes where
//!    the value is not channels-last already (the lowering makes such a node a copy kernel, into
//!    which the pointwise ops producing `x` are fused, so usually no extra pass over memory);
//! 2. recomputes the metadata (sizes, strides, dtype) of every node downstream of a changed
//!    layout by running its op on `meta` tensors of the new layouts, so pointwise results follow
//!    their operands' order as TensorIterator does, and every fallback's checked metadata is what
//!    torch will produce at run time;
//! 3. gives back each graph output whose layout changed its eager layout (contiguous, or
//!    channels-last where eager's convolution returns that: Note [eager conv layouts]) with a
//!    `contiguous()` node, so callers see eager's strides.
//!
//! Any failure (an op that does not run on meta tensors, an output whose eager layout is neither
//! contiguous nor channels-last, a call_module) leaves the graph as it was: the pass is an optimization only.
//! On the CPU the pass converts only when the convolutions' inputs hold at least as many
//! elements as their weights (Note [weight reorders]). `DYNAMO_LAYOUT_OPT=0` turns it off.

use std::collections::{HashMap, HashSet};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::fx_import::{set_users, tensor_meta_ext, FxArg, FxGraph, FxNode, FxOp, TensorMeta};
use super::ir::{DType, Layout};

/// Call targets (as the importer prints them) of the 2-d convolutions the pass converts.
const CONV2D_TARGETS: &[&str] = &["torch.conv2d", "torch.nn.functional.conv2d"];

/// Channels-last strides of an NCHW tensor of `sizes` (PyTorch: `get_channels_last_strides_2d`):
/// C fastest, then W, H, N.
pub fn channels_last_strides(sizes: &[i64]) -> Vec<i64> {
    let (c, h, w) = (sizes[1].max(1), sizes[2].max(1), sizes[3].max(1));
    vec![c * h * w, 1, w * c, c]
}

/// True when `l` is a 4-d float32 CPU layout in channels-last order (size-1 dims ignored).
fn is_channels_last(l: &Layout) -> bool {
    l.sizes.len() == 4 && {
        let want = channels_last_strides(&l.sizes);
        l.sizes.iter().zip(l.strides.iter().zip(&want)).all(|(&s, (&a, &b))| s == 1 || a == b)
    }
}

fn conv_operands(g: &FxGraph, n: &FxNode) -> Option<(usize, usize)> {
    if !matches!(n.op, FxOp::CallFunction { .. }) || !CONV2D_TARGETS.contains(&n.target_name.as_str()) {
        return None;
    }
    let (Some(FxArg::Node(x)), Some(FxArg::Node(w))) = (n.args.first(), n.args.get(1)) else { return None };
    let ok = |i: usize| {
        g.nodes[i].meta.as_ref().is_some_and(|m| m.layout.sizes.len() == 4 && m.layout.dtype == DType::F32 && m.layout.cpu)
    };
    (ok(*x) && ok(*w)).then_some((*x, *w))
}

/// True for a batch norm in training mode (`F.batch_norm(..., training=True)` or
/// `torch.batch_norm(..., True, ...)`: argument 5 in both signatures).
fn is_training_batch_norm(n: &FxNode) -> bool {
    if !matches!(n.target_name.as_str(), "torch.nn.functional.batch_norm" | "torch.batch_norm" | "torch.native_batch_norm") {
        return false;
    }
    let flag = n.kwargs.iter().find(|(k, _)| k == "training").map(|(_, a)| a).or(n.args.get(5));
    !matches!(flag, Some(FxArg::Bool(false)) | None)
}

/// Runs the pass on `g` (see the module docs). Returns how many convolutions now run
/// channels-last (0: the graph is unchanged), or why the graph was left as it was.
pub fn optimize(py: Python<'_>, g: &mut FxGraph) -> Result<usize, String> {
    if std::env::var_os("DYNAMO_LAYOUT_OPT").is_some_and(|v| v == "0") {
        return Ok(0);
    }
    let n_convs = g.nodes.iter().filter(|n| conv_operands(g, n).is_some()).count();
    if n_convs == 0 {
        if g.nodes.iter().any(|n| bn_meta_differs_from_eager(g, n) || iterator_meta_differs_from_eager(g, n)) {
            *g = rewrite(py, g, false).map_err(|e| e.to_string())?;
        }
        return Ok(0);
    }
    // Note [one GPU convolution]: a graph with a single convolution pays two layout changes
    // over a whole activation for its NHWC convolution (the input to channels-last, the result
    // back to eager's NCHW). With one thread per point one side of each change was uncoalesced,
    // and as traced was faster (conv + batch norm + ReLU on 32x64x112x112 on an H200: 0.47 ms
    // channels-last against 0.34 ms, where cuDNN transposes around its own NHWC kernel). The GPU
    // kernels now change layouts through shared-memory tiles (nvptx's Note [tiled transposes]),
    // with the batch norm and ReLU fused into the change back, so one convolution converts too.

    // Note [eager conv layouts]: the traced graph's metas come from torch's meta functions,
    // which answer contiguous for a convolution whose weight (not input) is channels-last, while
    // eager's CPU kernel returns channels-last there (Note [conv output layout]). Outputs must
    // keep eager's strides, so first give the traced graph the layouts eager produces (no
    // conversion, only that correction and what follows from it downstream), then convert.
    let eager = if g.nodes.iter().any(|n| conv_meta_differs_from_eager(g, n) || bn_meta_differs_from_eager(g, n) || iterator_meta_differs_from_eager(g, n)) {
        Some(rewrite(py, g, false).map_err(|e| e.to_string())?)
    } else {
        None
    };
    if let Some(n) = g.nodes.iter().find(|n| is_training_batch_norm(n)) {
        // Note [batch statistics]: torch's channels-last batch norm sums in another order than
        // its contiguous kernel, and batch statistics over few values per channel (a [2, 512, 1, 1]
        // activation) amplify that difference far beyond float tolerance (2% on resnet18's conv1
        // weight gradient at batch 2). Training-mode graphs keep the traced layout, with eager's
        // corrections (a conv-bn-relu on a channels-last input returned contiguous otherwise).
        let why = format!("{} normalizes with batch statistics", n.name);
        if let Some(corrected) = eager {
            *g = corrected;
        }
        return Err(why);
    }
    if super::cuda::target() == super::cuda::Target::Cpu && !activations_outweigh_weights(g) {
        // Note [weight reorders]: for a channels-last input oneDNN reorders each (contiguous)
        // weight on every call (`aten::contiguous` inside the convolution: 17 copies and 8.8 ms
        // of resnet18's 55 ms call at batch 2), a pass over every weight that the faster NHWC
        // convolution pays back only when the activations are large against the weights. resnet18
        // eval on a 2-core CPU, eager / dynamo with the pass vs without it
        // (`DYNAMO_LAYOUT_OPT=0`): batch 2 0.84-0.96x vs 1.18-1.19x (activations 0.3x the
        // weights' elements), batch 4 1.11-1.12x vs 1.12-1.26x (0.6x), batch 8 1.39x vs 1.28x
        // (1.2x), batch 32 1.39x vs 1.18x. So the pass converts only when the convolutions'
        // inputs hold at least as many elements as their weights; otherwise the graph keeps
        // its traced layouts (with eager's corrections).
        if let Some(corrected) = eager {
            *g = corrected;
        }
        return Ok(0);
    }
    let new = rewrite(py, eager.as_ref().unwrap_or(g), true).map_err(|e| e.to_string())?;
    *g = new;
    Ok(n_convs)
}

/// Note [weight reorders]: whether the 2-d convolutions of `g` read at least as many input
/// elements (per call, summed over the convolutions) as their weights hold.
fn activations_outweigh_weights(g: &FxGraph) -> bool {
    let numel = |i: usize| g.nodes[i].meta.as_ref().map_or(0i64, |m| m.layout.sizes.iter().product::<i64>());
    let (mut act, mut wt) = (0i64, 0i64);
    for n in &g.nodes {
        if let Some((x, w)) = conv_operands(g, n) {
            act += numel(x);
            wt += numel(w);
        }
    }
    act >= wt
}

/// True when an operand of `n` (a CPU convolution of [`conv_operands`]) suggests channels-last
/// (ATen's `suggest_memory_format`: channels-last strides that are not also contiguous).
fn suggests_channels_last(m: Option<&TensorMeta>) -> bool {
    m.is_some_and(|mm| is_channels_last(&mm.layout) && mm.layout.strides != Layout::contiguous_strides(&mm.layout.sizes))
}

/// True when convolution `n`'s traced meta is contiguous but eager's CPU kernel returns
/// channels-last (an operand suggests channels-last: Note [conv output layout]).
fn conv_meta_differs_from_eager(g: &FxGraph, n: &FxNode) -> bool {
    let Some((x, w)) = conv_operands(g, n) else { return false };
    let out_cl = n.meta.as_ref().is_some_and(|m| m.layout.sizes.len() == 4 && is_channels_last(&m.layout));
    !out_cl && (suggests_channels_last(g.nodes[x].meta.as_ref()) || suggests_channels_last(g.nodes[w].meta.as_ref()))
}

/// The strides eager's CPU batch norm gives its result for an input of layout `x`
/// (aten/src/ATen/native/Normalization.cpp: `empty_like(input, input.suggest_memory_format())`):
/// channels-last for a channels-last 4-d input, else contiguous, whatever the input's strides.
/// torch's meta function keeps the input's strides instead (a transposed input's).
fn eager_batch_norm_strides(x: &Layout) -> Vec<i64> {
    if x.sizes.len() == 4 && is_channels_last(x) && x.strides != Layout::contiguous_strides(&x.sizes) {
        channels_last_strides(&x.sizes)
    } else {
        Layout::contiguous_strides(&x.sizes)
    }
}

/// Note [TensorIterator metas]: ops ATen computes with a TensorIterator, whose result is laid
/// out in the operands' memory order (`lowering::pointwise_output_strides`), but whose meta
/// functions answer contiguous: `copysign(x_channels_last, y)` is channels-last in eager and
/// contiguous on meta tensors (torch 2.x: `copysign`, `xlogy`, `special.xlog1py`,
/// `floor_divide`, each checked against its meta over mixed layouts). By final name component:
/// functions and methods alike; `__rfloordiv__` takes its operands in the other order.
const ITERATOR_OPS_WITH_CONTIGUOUS_METAS: &[&str] =
    &["copysign", "xlogy", "special_xlogy", "special_xlog1py", "xlog1py", "floor_divide", "floordiv", "__floordiv__", "__rfloordiv__"];

/// The strides eager gives node `n`'s result when it is one of
/// [`ITERATOR_OPS_WITH_CONTIGUOUS_METAS`] over tensors whose (new) metas `meta_of` gives, and
/// they differ from `meta`'s (its own) (size-1 dims ignored); None otherwise.
fn eager_iterator_strides<'a>(n: &FxNode, meta: Option<&TensorMeta>, meta_of: &dyn Fn(usize) -> Option<&'a TensorMeta>) -> Option<Vec<i64>> {
    let name = match &n.op {
        FxOp::CallMethod { name } => name.as_str(),
        FxOp::CallFunction { .. } => n.target_name.rsplit('.').next().unwrap_or(""),
        _ => return None,
    };
    if !ITERATOR_OPS_WITH_CONTIGUOUS_METAS.contains(&name) || !n.kwargs.is_empty() {
        return None;
    }
    let m = meta?;
    let mut layouts = Vec::new();
    for a in n.args.iter().take(2) {
        if let FxArg::Node(j) = a {
            let l = &meta_of(*j)?.layout;
            if l.sizes.len() > m.layout.sizes.len() {
                return None;
            }
            layouts.push(l);
        }
    }
    if name == "__rfloordiv__" {
        layouts.reverse();
    }
    if layouts.is_empty() {
        return None;
    }
    let want = super::lowering::pointwise_output_strides(&m.layout.sizes, &layouts);
    let differs = m.layout.sizes.iter().zip(m.layout.strides.iter().zip(&want)).any(|(&size, (a, b))| size != 1 && a != b);
    differs.then_some(want)
}

/// True when node `n` of `g` is a TensorIterator op whose traced meta has other strides than
/// eager gives it (Note [TensorIterator metas]).
fn iterator_meta_differs_from_eager(g: &FxGraph, n: &FxNode) -> bool {
    eager_iterator_strides(n, n.meta.as_ref(), &|j| g.nodes[j].meta.as_ref()).is_some()
}

/// The input node of `n` when it is a CPU batch norm (`F.batch_norm`, `torch.batch_norm`) of an
/// input of 2 to 4 dims.
fn batch_norm_input(g: &FxGraph, n: &FxNode) -> Option<usize> {
    if !matches!(n.op, FxOp::CallFunction { .. }) || !matches!(n.target_name.as_str(), "torch.nn.functional.batch_norm" | "torch.batch_norm") {
        return None;
    }
    let Some(FxArg::Node(x)) = n.args.first() else { return None };
    let ok = g.nodes[*x].meta.as_ref().is_some_and(|m| (2..=4).contains(&m.layout.sizes.len()) && m.layout.cpu);
    ok.then_some(*x)
}

/// True when batch norm `n`'s traced meta has other strides than eager's CPU kernel gives
/// ([`eager_batch_norm_strides`]; size-1 dims ignored): its result then fails the plan's layout
/// check at run time (wrapper.rs's Note [fallback layouts]) and the graph's later values take
/// the meta's strides where eager's are contiguous.
fn bn_meta_differs_from_eager(g: &FxGraph, n: &FxNode) -> bool {
    let Some(x) = batch_norm_input(g, n) else { return false };
    let (Some(xm), Some(m)) = (g.nodes[x].meta.as_ref(), n.meta.as_ref()) else { return false };
    let want = eager_batch_norm_strides(&xm.layout);
    m.layout.sizes.iter().zip(m.layout.strides.iter().zip(&want)).any(|(&size, (a, b))| size != 1 && a != b)
}

/// Builds the rewritten graph; an `Err` leaves the caller's graph untouched. With `convert`
/// false nothing is converted: only convolutions whose traced meta differs from eager's
/// ([`conv_meta_differs_from_eager`]) and the nodes downstream of them get eager's layouts, and
/// outputs are left as they come (Note [eager conv layouts]).
fn rewrite(py: Python<'_>, g: &FxGraph, convert_inputs: bool) -> PyResult<FxGraph> {
    let torch = py.import(intern!(py, "torch"))?;
    let mut side_table: Vec<Py<PyAny>> = g.side_table.iter().map(|o| o.clone_ref(py)).collect();
    let channels_last = side_table.len();
    side_table.push(torch.getattr(intern!(py, "channels_last"))?.unbind());
    let mut nodes: Vec<FxNode> = Vec::with_capacity(g.nodes.len() + 8);
    // Old node index -> new node index.
    let mut remap: Vec<usize> = Vec::with_capacity(g.nodes.len());
    // New node index -> its value on meta tensors, for nodes recomputed by the pass.
    let mut values: HashMap<usize, Bound<'_, PyAny>> = HashMap::new();
    // New node indices whose layout differs from the original graph's.
    let mut changed: Vec<bool> = Vec::new();
    let mut output = 0;
    let err = |m: String| pyo3::exceptions::PyValueError::new_err(m);

    let convert = |nodes: &mut Vec<FxNode>, changed: &mut Vec<bool>, src: usize, fmt: Option<usize>| -> usize {
        let m = nodes[src].meta.clone().expect("conv operand has meta");
        let strides = match fmt {
            Some(_) => channels_last_strides(&m.layout.sizes),
            None => Layout::contiguous_strides(&m.layout.sizes),
        };
        let meta = TensorMeta { layout: Layout { strides, ..m.layout.clone() }, requires_grad: m.requires_grad };
        let suffix = if fmt.is_some() { "channels_last" } else { "contiguous" };
        let kwargs = fmt.map(|f| vec![("memory_format".to_string(), FxArg::Py(f))]).unwrap_or_default();
        nodes.push(contiguous_node(format!("{}_{suffix}", nodes[src].name), src, kwargs, meta, false));
        changed.push(true);
        nodes.len() - 1
    };

    for n in &g.nodes {
        let mut node = n.clone();
        node.args = n.args.iter().map(|a| map_arg(a, &remap)).collect();
        node.kwargs = n.kwargs.iter().map(|(k, a)| (k.clone(), map_arg(a, &remap))).collect();
        if let (true, Some((x, _w))) = (convert_inputs, conv_operands(g, n)) {
            // Only the input is converted: a channels-last input alone makes oneDNN run (and
            // return) channels-last (Note [conv output layout]), and it reorders the weight into
            // its own blocked format on every call whatever the weight's order, so a
            // channels-last copy of the weight would be one more pass (and kernel) for nothing.
            let src = remap[x];
            let l = &nodes[src].meta.as_ref().expect("conv operand has meta").layout;
            if !is_channels_last(l) {
                let c = convert(&mut nodes, &mut changed, src, Some(channels_last));
                node.args[0] = FxArg::Node(c);
            }
        }
        // Graph outputs, and the tensors a random op draws over, keep the original graph's
        // layouts (eager's strides).
        let fix = |a: &FxArg, nodes: &mut Vec<FxNode>, changed: &mut Vec<bool>| -> PyResult<FxArg> {
            fn walk(
                a: &FxArg,
                f: &mut dyn FnMut(usize) -> PyResult<usize>,
            ) -> PyResult<FxArg> {
                Ok(match a {
                    FxArg::Node(i) => FxArg::Node(f(*i)?),
                    FxArg::Tuple(items) => FxArg::Tuple(items.iter().map(|x| walk(x, f)).collect::<PyResult<_>>()?),
                    FxArg::List(items) => FxArg::List(items.iter().map(|x| walk(x, f)).collect::<PyResult<_>>()?),
                    other => other.clone(),
                })
            }
            walk(a, &mut |i| {
                if !changed[i] {
                    return Ok(i);
                }
                let orig = old_meta_of(g, &remap, i);
                match orig {
                    Some(o) if o.layout.strides == Layout::contiguous_strides(&o.layout.sizes) => {
                        Ok(convert(nodes, changed, i, None))
                    }
                    Some(o) if o.layout.sizes.len() == 4 && is_channels_last(&o.layout) => {
                        Ok(convert(nodes, changed, i, Some(channels_last)))
                    }
                    _ => Err(err(format!("{} (an output or a random op's operand) had a layout other than contiguous or channels-last", nodes[i].name))),
                }
            })
        };
        if convert_inputs && draws_random_node(n) {
            // Note [random draws in eager's order]: a random op fills its result in memory
            // order (`bernoulli_`, `rand_like`, dropout's mask), so over a value this pass
            // made channels-last it would put eager's draws at other elements (dropout after a
            // convolution zeroed other activations than eager's with the same seed). It reads
            // the value in its eager layout.
            node.args = node.args.iter().map(|a| fix(a, &mut nodes, &mut changed)).collect::<PyResult<_>>()?;
            let mut kwargs = Vec::with_capacity(node.kwargs.len());
            for (k, a) in &node.kwargs {
                kwargs.push((k.clone(), fix(a, &mut nodes, &mut changed)?));
            }
            node.kwargs = kwargs;
        }
        if matches!(node.op, FxOp::Output) {
            if convert_inputs {
                let mut args = Vec::with_capacity(node.args.len());
                for a in &node.args {
                    args.push(fix(a, &mut nodes, &mut changed)?);
                }
                node.args = args;
            }
            output = nodes.len();
            remap.push(nodes.len());
            nodes.push(node);
            changed.push(false);
            continue;
        }
        // Recompute the metadata of a call whose tensor arguments changed layout.
        let mut needs = !convert_inputs && (conv_meta_differs_from_eager(g, n) || bn_meta_differs_from_eager(g, n) || iterator_meta_differs_from_eager(g, n));
        for a in node.args.iter().chain(node.kwargs.iter().map(|(_, a)| a)) {
            a.for_each_node(&mut |j| needs |= changed[j]);
        }
        let mut is_changed = false;
        if needs {
            if matches!(node.op, FxOp::CallModule { .. }) {
                return Err(err(format!("call_module {} reads a converted value", node.name)));
            }
            let v = run_on_meta(py, &node, &nodes, &side_table, &values)?;
            let mut meta = tensor_meta_ext(py, &v, true)?;
            if let (Some(m), true) = (meta.as_mut(), conv_operands(g, n).is_some()) {
                // Note [conv output layout]: torch's meta function for convolution answers
                // contiguous, but the CPU kernel (oneDNN) returns channels-last whenever its input
                // or weight is channels-last by `suggest_memory_format` (ATen:
                // `mkldnn_conv_use_channels_last`). Ambiguous layouts (size-1 H and W) are
                // contiguous there; the run-time check ignores size-1 dims anyway.
                let suggests_cl = |i: usize| suggests_channels_last(nodes[i].meta.as_ref());
                let operand = |k: usize| match node.args.get(k) {
                    Some(FxArg::Node(i)) => suggests_cl(*i),
                    _ => false,
                };
                if m.layout.sizes.len() == 4 && (operand(0) || operand(1)) {
                    m.layout.strides = channels_last_strides(&m.layout.sizes);
                    values.insert(nodes.len(), meta_tensor(py, &m.layout)?);
                }
            }
            if let (Some(m), Some(x)) = (meta.as_mut(), batch_norm_input(g, n)) {
                // Eager's layout of a CPU batch norm's result, not the meta's.
                let xl = &nodes[remap[x]].meta.as_ref().expect("batch norm input has meta").layout;
                let want = eager_batch_norm_strides(xl);
                if m.layout.strides != want {
                    m.layout.strides = want;
                    values.insert(nodes.len(), meta_tensor(py, &m.layout)?);
                }
            }
            if let Some(m) = meta.as_mut() {
                // Note [TensorIterator metas]: eager's layout, from the operands' new metas.
                if let Some(want) = eager_iterator_strides(&node, Some(m), &|j| nodes[j].meta.as_ref()) {
                    m.layout.strides = want;
                    values.insert(nodes.len(), meta_tensor(py, &m.layout)?);
                }
            }
            let meta = meta.map(|m| TensorMeta { requires_grad: n.meta.as_ref().is_some_and(|o| o.requires_grad), ..m });
            is_changed = meta.as_ref().map(|m| &m.layout) != n.meta.as_ref().map(|m| &m.layout) || meta.is_none();
            node.meta = meta;
            values.entry(nodes.len()).or_insert(v);
        }
        remap.push(nodes.len());
        nodes.push(node);
        changed.push(is_changed);
    }
    let writebacks = g
        .writebacks
        .iter()
        .map(|w| super::functionalize::Writeback { dst: remap[w.dst], src: remap[w.src], bumps: w.bumps })
        .collect();
    set_users(&mut nodes);
    Ok(FxGraph { nodes, side_table, output, writebacks })
}

/// Whether node `n` draws random numbers over a tensor's elements in memory order (Note [random
/// draws in eager's order]): its function or method draws (`crate::autograd::rules::draws_random`:
/// dropout variants, `rand*_like`, `bernoulli`, `normal`, ...), or it is an in-place random method
/// run on a copy (`method_on_copy(x, "uniform_", ...)`, Note [in-place ops on a copy]).
pub(crate) fn draws_random_node(n: &FxNode) -> bool {
    use crate::autograd::rules::draws_random;
    let on_copy = n.target_name.ends_with("method_on_copy") && matches!(n.args.get(1), Some(FxArg::Str(m)) if draws_random(m));
    let method = matches!(&n.op, FxOp::CallMethod { name } if draws_random(name));
    on_copy || method || (matches!(n.op, FxOp::CallFunction { .. }) && draws_random(&n.target_name))
}

/// The original graph's meta of the value new node `i` holds (None for inserted nodes).
fn old_meta_of<'a>(g: &'a FxGraph, remap: &[usize], i: usize) -> Option<&'a TensorMeta> {
    remap.iter().position(|&r| r == i).and_then(|old| g.nodes[old].meta.as_ref())
}

/// Runs `node`'s op on meta tensors standing for its arguments' (new) layouts.
fn run_on_meta<'py>(
    py: Python<'py>,
    node: &FxNode,
    nodes: &[FxNode],
    side_table: &[Py<PyAny>],
    values: &HashMap<usize, Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let to_py = |a: &FxArg| -> PyResult<Bound<'py, PyAny>> { arg_to_py(py, a, nodes, side_table, values) };
    let args: Vec<Bound<'py, PyAny>> = node.args.iter().map(&to_py).collect::<PyResult<_>>()?;
    let kwargs = PyDict::new(py);
    for (k, a) in &node.kwargs {
        kwargs.set_item(k, to_py(a)?)?;
    }
    match &node.op {
        FxOp::CallFunction { target } => side_table[*target].bind(py).call(PyTuple::new(py, args)?, Some(&kwargs)),
        FxOp::CallMethod { name } => {
            let (this, rest) = args
                .split_first()
                .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("method call without self"))?;
            this.getattr(name.as_str())?.call(PyTuple::new(py, rest)?, Some(&kwargs))
        }
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!("cannot run {} on meta tensors", node.name))),
    }
}

/// An empty tensor on the `meta` device with `layout`'s sizes, strides and dtype.
pub(crate) fn meta_tensor<'py>(py: Python<'py>, layout: &Layout) -> PyResult<Bound<'py, PyAny>> {
    let dtype = layout
        .dtype
        .torch_name()
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("a value of an unmodelled dtype"))?;
    let torch = py.import(intern!(py, "torch"))?;
    let kw = PyDict::new(py);
    kw.set_item("dtype", torch.getattr(dtype)?)?;
    kw.set_item("device", "meta")?;
    torch.getattr(intern!(py, "empty_strided"))?.call((layout.sizes.clone(), layout.strides.clone()), Some(&kw))
}

pub(crate) fn arg_to_py<'py>(
    py: Python<'py>,
    a: &FxArg,
    nodes: &[FxNode],
    side_table: &[Py<PyAny>],
    values: &HashMap<usize, Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let rec = |x: &FxArg| arg_to_py(py, x, nodes, side_table, values);
    Ok(match a {
        FxArg::Node(i) => {
            if let Some(v) = values.get(i) {
                return Ok(v.clone());
            }
            let meta = nodes[*i]
                .meta
                .as_ref()
                .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("{} has no tensor meta", nodes[*i].name)))?;
            meta_tensor(py, &meta.layout)?
        }
        FxArg::Int(v) => v.into_pyobject(py)?.into_any(),
        FxArg::Float(v) => v.into_pyobject(py)?.into_any(),
        FxArg::Bool(v) => pyo3::types::PyBool::new(py, *v).to_owned().into_any(),
        FxArg::None => py.None().into_bound(py),
        FxArg::Str(s) => s.into_pyobject(py)?.into_any(),
        FxArg::Tuple(items) => PyTuple::new(py, items.iter().map(rec).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::List(items) => PyList::new(py, items.iter().map(rec).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        FxArg::Ellipsis => py.Ellipsis().into_bound(py),
        FxArg::Slice { py: i, .. } | FxArg::Dtype { py: i, .. } | FxArg::Py(i) => side_table[*i].bind(py).clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_last_strides_of_nchw() {
        assert_eq!(channels_last_strides(&[2, 3, 4, 5]), vec![60, 1, 15, 3]);
        let l = Layout { sizes: vec![2, 3, 4, 5], strides: vec![60, 1, 15, 3], dtype: DType::F32, cpu: true };
        assert!(is_channels_last(&l));
        let c = Layout { strides: Layout::contiguous_strides(&[2, 3, 4, 5]), ..l.clone() };
        assert!(!is_channels_last(&c));
        // [N, C, 1, 1]: both orders are the same memory; size-1 dims do not count.
        let p = Layout { sizes: vec![2, 8, 1, 1], strides: vec![8, 1, 1, 1], dtype: DType::F32, cpu: true };
        assert!(is_channels_last(&p));
    }
}

/// A `src.contiguous(**kwargs)` node whose value has `meta` (users filled in by `set_users`).
fn contiguous_node(name: String, src: usize, kwargs: Vec<(String, FxArg)>, meta: TensorMeta, recompute: bool) -> FxNode {
    FxNode {
        name,
        op: FxOp::CallMethod { name: "contiguous".into() },
        canonical: Some("contiguous"),
        target_name: "contiguous".into(),
        args: vec![FxArg::Node(src)],
        kwargs,
        meta: Some(meta),
        users: Vec::new(),
        inplace: false,
        recompute,
    }
}

/// `a` with every node index `i` replaced by `remap[i]` (a graph rebuilt with nodes inserted).
fn map_arg(a: &FxArg, remap: &[usize]) -> FxArg {
    match a {
        FxArg::Node(i) => FxArg::Node(remap[*i]),
        FxArg::Tuple(items) => FxArg::Tuple(items.iter().map(|x| map_arg(x, remap)).collect()),
        FxArg::List(items) => FxArg::List(items.iter().map(|x| map_arg(x, remap)).collect()),
        other => other.clone(),
    }
}

/// ATen's `computeStride` (aten/src/ATen/TensorUtils.cpp): the strides of `new_sizes` as a view
/// of a tensor of `sizes` and `strides`, or None when no view exists (`reshape` then copies).
pub fn view_strides(sizes: &[i64], strides: &[i64], new_sizes: &[i64]) -> Option<Vec<i64>> {
    if sizes.is_empty() {
        return Some(vec![1; new_sizes.len()]);
    }
    if sizes.iter().product::<i64>() == 0 {
        return Some(Layout::contiguous_strides(new_sizes));
    }
    let mut out = vec![0i64; new_sizes.len()];
    let mut view_d = new_sizes.len() as i64 - 1;
    let mut chunk_base_stride = *strides.last().expect("non-empty");
    let (mut tensor_numel, mut view_numel) = (1i64, 1i64);
    for tensor_d in (0..sizes.len()).rev() {
        tensor_numel *= sizes[tensor_d];
        if tensor_d == 0 || (sizes[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride) {
            while view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_sizes[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}

/// Note [reshape copies]: `x.reshape(shape)` of a tensor whose strides admit no view of `shape`
/// (the transposed gradients of attention's backward merged back to `[B, S, H * D]`) copies in
/// torch: ~4 µs a call as a fallback, several per layer in a transformer's backward. Such a
/// reshape becomes `x.contiguous().reshape(shape)`: the copy is a kernel (it fuses with what
/// computes `x`), and the reshape of its contiguous result is a view the runtime makes as an
/// alias (Note [alias views]). Only where no one can tell: the reshape's value is not a graph
/// output (torch's copy has no `_base`, a view of the copy would) and torch's meta of it is
/// contiguous, as the copy's view is. Returns how many reshapes were rewritten.
pub fn explicit_reshape_copies(g: &mut FxGraph) -> usize {
    let out_nodes: HashSet<usize> = {
        let mut s = HashSet::new();
        g.nodes[g.output].args.iter().for_each(|a| a.for_each_node(&mut |j| {
            s.insert(j);
        }));
        g.writebacks.iter().for_each(|w| {
            s.insert(w.src);
        });
        s
    };
    let copies: HashSet<usize> = (0..g.nodes.len())
        .filter(|&i| {
            let n = &g.nodes[i];
            let is_reshape = matches!(n.canonical, Some("reshape") | Some("flatten"))
                && matches!(n.op, FxOp::CallMethod { .. } | FxOp::CallFunction { .. });
            let (Some(FxArg::Node(x)), Some(m)) = (n.args.first(), n.meta.as_ref()) else { return false };
            let Some(xm) = g.nodes[*x].meta.as_ref() else { return false };
            is_reshape
                && !out_nodes.contains(&i)
                && !n.inplace
                && m.layout.strides == Layout::contiguous_strides(&m.layout.sizes)
                && xm.layout.sizes.iter().product::<i64>() > 0
                && xm.layout.dtype == m.layout.dtype
                && xm.layout.cpu
                && view_strides(&xm.layout.sizes, &xm.layout.strides, &m.layout.sizes).is_none()
        })
        .collect();
    if copies.is_empty() {
        return 0;
    }
    let mut nodes: Vec<FxNode> = Vec::with_capacity(g.nodes.len() + copies.len());
    let mut remap: Vec<usize> = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        let mut node = n.clone();
        node.args = n.args.iter().map(|a| map_arg(a, &remap)).collect();
        node.kwargs = n.kwargs.iter().map(|(k, a)| (k.clone(), map_arg(a, &remap))).collect();
        if copies.contains(&i) {
            let FxArg::Node(x) = node.args[0] else { unreachable!("checked above") };
            let xm = nodes[x].meta.clone().expect("checked above");
            let meta = TensorMeta { layout: Layout { strides: Layout::contiguous_strides(&xm.layout.sizes), ..xm.layout }, ..xm };
            nodes.push(contiguous_node(format!("{}_copy", nodes[x].name), x, Vec::new(), meta, n.recompute));
            node.args[0] = FxArg::Node(nodes.len() - 1);
        }
        remap.push(nodes.len());
        nodes.push(node);
    }
    g.output = remap[g.output];
    for w in g.writebacks.iter_mut() {
        w.dst = remap[w.dst];
        w.src = remap[w.src];
    }
    set_users(&mut nodes);
    g.nodes = nodes;
    copies.len()
}

#[cfg(test)]
mod reshape_tests {
    use super::view_strides;

    #[test]
    fn view_strides_follow_atens_compute_stride() {
        // Contiguous: any reshape is a view.
        assert_eq!(view_strides(&[4, 32, 64], &[2048, 64, 1], &[128, 64]), Some(vec![64, 1]));
        assert_eq!(view_strides(&[4, 32, 64], &[2048, 64, 1], &[4, 32, 2, 32]), Some(vec![2048, 64, 32, 1]));
        // Attention's [B, H, S, D] transposed to [B, S, H, D], merged to [B, S, H * D]: a copy.
        assert_eq!(view_strides(&[4, 32, 2, 32], &[2048, 32, 1024, 1], &[4, 32, 64]), None);
        // Splitting a dim of a transposed tensor is still a view.
        assert_eq!(view_strides(&[8, 6], &[1, 8], &[2, 4, 6]), Some(vec![4, 1, 8]));
        // Merging the transposed dims is not.
        assert_eq!(view_strides(&[8, 6], &[1, 8], &[48]), None);
        // Size-1 dims come and go freely.
        assert_eq!(view_strides(&[3, 1, 5], &[5, 99, 1], &[3, 5, 1]), Some(vec![5, 1, 1]));
        // A broadcast (stride 0) dim merged with another: a copy.
        assert_eq!(view_strides(&[4, 3], &[0, 1], &[12]), None);
    }
}
