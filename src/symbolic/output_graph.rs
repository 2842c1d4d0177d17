//! `OutputGraph`: the graph being captured, its inputs and guards, and the Python side table.
//!
//! Shapes come from PyTorch itself: every recorded call is first run on the fake example values of
//! its arguments inside one `FakeTensorMode` (torch's own shape functions), so capture works for
//! any op. `to_fx` exports the graph as a `torch.fx.GraphModule` for the backend.
//!
//! Note [symbolic sizes]: an input dimension is *dynamic* when the frame's earlier compiles saw
//! it with another size (automatic dynamic, as torch's `automatic_dynamic_shapes`; by default
//! every dimension of such a tensor, Note [whole-tensor automatic dynamic]), when the
//! user marked it (`dynamo.mark_dynamic`, torch's `_dynamo_dynamic_indices`), or when the
//! frame was optimized with `dynamic=True`. The fake mode then gets a `ShapeEnv` and such an
//! input's fake has `torch.SymInt` sizes (`python/dynamo/_shapes.py`); torch's meta functions
//! propagate them, and every decision taken on them is a guard in the `ShapeEnv`. Sizes the
//! trace reads (`x.size(0)`, `x.shape`) are graph nodes (`SymNum` trackers); arithmetic on them
//! records `operator.*` nodes; builtins and `math` functions with a SymInt-aware form stay
//! symbolic too (`max` -> `torch.sym_max`, `float` -> `torch.sym_float`, `math.sqrt` ->
//! `torch._sym_sqrt`, `torch.tensor(n)` -> `torch.scalar_tensor`, `torch.Size.numel` -> `mul`),
//! and comparisons (`==`, `in`, `x.shape == (3, 3)`) guard the relation they decide. Other
//! Python-level uses of their value (`range`, a list index, `str`) specialize them, which the
//! `ShapeEnv` records as a guard. Ints inside a tuple or `torch.Size` argument are automatic
//! dynamic item by item, like plain int arguments. At the end the
//! `ShapeEnv`'s facts become one `SHAPE_RELATIONS` guard checked in Rust (`shape_guard`).
//! Only contiguous inputs get dynamic dimensions (their strides are then products of sizes,
//! checked as "contiguous" by `TENSOR_MATCH`); 0 and 1 stay static, as in torch. A float
//! input that is not finite or is -0.0 stays a constant (sympy's symbols are finite reals and
//! cannot tell -0.0 from 0.0), and `SHAPE_RELATIONS` fails for those values of a float symbol.
//!
//! Note [float inputs]: a float argument is a symbolic graph input (torch's `specialize_float =
//! False`), but the `ShapeEnv`'s sympy algebra is not Python's IEEE double arithmetic: it
//! re-associates (`(f + 1e-17) - f` is the number `1e-17` there, `0.0` in Python) and decides
//! comparisons on the simplified expression. So arithmetic on a float-derived value stays a
//! graph node (one `operator.*` call per Python operation, computed in order on Python floats
//! when the graph runs) and is never folded into a constant, even when sympy finds it one
//! (`_shapes.sym_constant` marks such values float-derived); and any read of a float-derived
//! value's value (a comparison, a branch, `int()`, `round()`) marks the `ShapeEnv`
//! (`_shapes.note_value_use`), whose guard export then refuses it: the frame is converted again
//! with its floats as constants (CONSTANT_MATCH guards, Python's own arithmetic), as torch
//! specializes a float that a guard reads.

use crate::graph::{Arg, Graph, NodeId, Op, PyRef, TensorMeta};
use crate::guards::{Guard, GuardKind};
use crate::source::Source;
use crate::symbolic::variables::{qualname, type_name, TensorVariable, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// Python objects the tracer consults, looked up once per conversion.
pub struct Handles {
    pub torch: Py<PyAny>,
    pub tensor_type: Py<PyAny>,
    pub parameter_type: Py<PyAny>,
    pub module_type: Py<PyAny>,
    pub module_call: Py<PyAny>,
    /// `nn.Module._call_impl`, which `nn.Module.__call__` runs.
    pub module_call_impl: Py<PyAny>,
    pub size_type: Py<PyAny>,
    pub getitem: Py<PyAny>,
    pub getattr: Py<PyAny>,
    pub operator: Py<PyAny>,
    pub builtins: Py<PyAny>,
    /// `torch._assert`.
    pub torch_assert: Py<PyAny>,
}

impl Handles {
    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let torch = py.import("torch")?;
        let operator = py.import("operator")?;
        let builtins = py.import("builtins")?;
        let nn = py.import("torch.nn")?;
        Ok(Handles {
            tensor_type: torch.getattr("Tensor")?.unbind(),
            parameter_type: nn.getattr("Parameter")?.unbind(),
            module_type: nn.getattr("Module")?.unbind(),
            module_call: nn.getattr("Module")?.getattr("__call__")?.unbind(),
            module_call_impl: nn.getattr("Module")?.getattr("_call_impl")?.unbind(),
            size_type: torch.getattr("Size")?.unbind(),
            torch_assert: torch.getattr("_assert")?.unbind(),
            getitem: operator.getattr("getitem")?.unbind(),
            getattr: builtins.getattr("getattr")?.unbind(),
            torch: torch.into_any().unbind(),
            operator: operator.into_any().unbind(),
            builtins: builtins.into_any().unbind(),
        })
    }
}

/// A module made during tracing (`OutputGraph::derived_modules`). Nothing outside the trace
/// holds it, so what it holds is read without guards.
pub struct DerivedModule {
    /// The module (kept alive while its address is a key).
    pub obj: Py<PyAny>,
    /// The source of each child by its key in `obj` (a slice's children are the sliced
    /// container's).
    pub children: Vec<(String, Arc<Source>)>,
    /// A callable without arguments that makes an equal module, for a module that outlives the
    /// graph (`functools.partial(cls, *args, **kwargs)` of its construction); `None`: refused.
    pub remake: Option<Py<PyAny>>,
    /// Instance attributes that hold a symbolic int the constructor was given, with its
    /// tracker (Note [symbolic module arguments] in `variables/nn_module.rs`).
    pub sym_attrs: Vec<(String, crate::symbolic::variables::VariableTracker)>,
}

/// The graph under construction for one frame.
pub struct OutputGraph {
    pub graph: Graph,
    /// Side table for `PyRef`s (targets and non-literal constants).
    pub objects: Vec<Py<PyAny>>,
    /// Graph inputs in placeholder order: (source, real value).
    pub inputs: Vec<(Arc<Source>, Py<PyAny>)>,
    /// Input dedupe by object identity (one placeholder per tensor object).
    input_by_ptr: HashMap<usize, Rc<TensorVariable>>,
    /// Guards collected while wrapping values, deduplicated by their text.
    pub guards: Vec<Guard>,
    guard_keys: std::collections::HashSet<String>,
    /// Torch module dicts and classes the trace read attributes from without a guard each, by
    /// address (Note [attribute version guards]); they become guards in `add_version_guards`.
    attr_versions: Vec<(usize, crate::guards::VersionGuard)>,
    pub fake_mode: Py<PyAny>,
    pub handles: Handles,
    /// Lists wrapped from the frame, by object address: an iterator over one of them (a `for`
    /// loop continued in a resume function) links to the same tracker.
    /// Argument slots of the traced frame that it only appends to
    /// (`CodeInfo::append_only_slots`, Note [append-only lists]).
    pub append_only_slots: Vec<u32>,
    /// Every generator made by calling a generator function in the trace (a frame of its own,
    /// stepped lazily), for `check_dropped_generators`.
    pub generators: Vec<Rc<std::cell::RefCell<crate::symbolic::variables::IteratorState>>>,
    /// Addresses of the frame's argument values: a list among them is not read through an
    /// iterator over it alone (Note [items of iterators from outside the frame]).
    pub frame_arg_ptrs: std::collections::HashSet<usize>,
    /// Whether the converted frame (depth 0) called `locals()` / `vars()`: its dict is the
    /// frame's own, so a break after it runs the frame eagerly (Note [locals() in a trace]).
    pub frame_locals_taken: bool,
    /// The call sites of the functions being inlined, outermost first: the caller's code and the
    /// index of its call instruction, or None for a generator's step (whose caller, CPython's
    /// `f_back`, the trace does not follow). What a logging call's record names as its caller
    /// at a `stacklevel` above 1 (Note [logger calls]).
    pub inline_sites: Vec<Option<(Arc<crate::symbolic::code_info::CodeInfo>, usize)>>,
    /// Lists read only through a `Peek` iterator passed in (Note [items of iterators from
    /// outside the frame]), by address, with the iterator's source: reached another way, a
    /// graph break.
    pub peeked_lists: HashMap<usize, Arc<Source>>,
    pub lists_by_ptr: HashMap<usize, (Arc<Source>, Rc<std::cell::RefCell<crate::symbolic::variables::ListState>>)>,
    /// Dicts wrapped from the frame, by object address (one tracker per dict object).
    pub dicts_by_ptr: HashMap<usize, (Arc<Source>, Rc<std::cell::RefCell<crate::symbolic::variables::DictState>>)>,
    /// The dict storages of instances of `dict` subclasses from outside the frame, by object
    /// address (one tracker per object: Note [dict subclass objects from outside the frame] in
    /// `variables/user_defined.rs`).
    pub dict_storages_by_ptr: HashMap<usize, (Arc<Source>, Rc<std::cell::RefCell<crate::symbolic::variables::DictState>>)>,
    /// User objects wrapped as `Opaque`, by address: (first source, type address).
    pub opaque_by_ptr: HashMap<usize, (Arc<Source>, usize)>,
    /// Sets wrapped from the frame, by the real set's address: (first source, tracker) (Note
    /// [sets from outside the frame] in `builder.rs`).
    pub sets_by_ptr: HashMap<usize, (Arc<Source>, Rc<std::cell::RefCell<Py<PyAny>>>)>,
    /// The source of each set tracker wrapped from the frame, by the tracker's `Rc` address:
    /// such a tracker holds a private copy and is read-only in the trace.
    pub set_sources: HashMap<usize, Arc<Source>>,
    /// Trackers of the identity-hashed objects from the frame (modules, classes, functions)
    /// that a traced set holds, by address: iterating the set gives them back.
    pub set_members: HashMap<usize, crate::symbolic::variables::VariableTracker>,
    /// The `TracedKey` standing for each graph value used as a key of a dict tracker (Note
    /// [tensor dict keys] in `variables/dicts.rs`): one per value, so that `d[x]` finds what
    /// `d[x] = v` stored.
    pub traced_keys: HashMap<NodeId, Py<PyAny>>,
    /// Sources of user classes wrapped from the frame, by address (their attributes are read
    /// and written through them).
    pub class_sources: HashMap<usize, Arc<Source>>,
    /// Note [tuples from outside the frame]: the source of each `tuple` (or namedtuple /
    /// structseq) wrapped from the frame's inputs, by the address of its items' `Rc` (held
    /// here, so the address is not reused). Tuples are immutable and a tracker is never
    /// changed in place, so a tracker holding these very items is that object: it leaves the
    /// graph by reloading it from its source, keeping its identity (`f(t) is t`,
    /// `lst.append(t); lst[-1] is t`, an `is DEFAULT` sentinel), not as a new tuple.
    pub tuple_sources: HashMap<usize, (Arc<Source>, Rc<Vec<crate::symbolic::variables::VariableTracker>>)>,
    /// Note [constants keep their identity]: the source of each constant wrapped from the
    /// frame's inputs (a str, a float, a tuple of literals, a frozenset, ...), by the address
    /// of its tracker's `Rc` (held here, so the address is not reused).
    pub constant_sources: HashMap<usize, (Arc<Source>, Rc<Py<PyAny>>)>,
    /// Constant tuples BUILD_TUPLE folded from items of which some are such sourced
    /// constants, with those items, by the address of the tuple tracker's `Rc`.
    pub folded_tuples: HashMap<usize, (Rc<Py<PyAny>>, Rc<Vec<VT>>)>,
    /// Modules made during tracing (a `ModuleList` slice, a parameterless `torch.nn` module such
    /// as `CrossEntropyLoss()`), by address; they have no source.
    pub derived_modules: HashMap<usize, DerivedModule>,
    /// User modules whose `__init__` the trace is running (Note [modules built in the frame]
    /// in `variables/nn_module.rs`), by address: writes to them happen for real.
    pub modules_in_init: std::collections::HashSet<usize>,
    /// Classes `collections.namedtuple(...)` made at trace time (kept alive), by address: a
    /// new class on every eager call, so neither they nor their instances outlive the graph
    /// (Note [namedtuple classes made in the frame] in `variables/functions.rs`).
    pub frame_classes: HashMap<usize, (Py<PyAny>, (usize, usize))>,
    /// Cell trackers by the address of the real cell object: every closure that shares a cell
    /// shares its tracker, so a `nonlocal` write is seen by the other functions.
    pub cells_by_ptr: HashMap<usize, Rc<std::cell::RefCell<Option<crate::symbolic::variables::VariableTracker>>>>,
    /// Free variables of the converted frame holding a dict or list not read yet, by cell
    /// tracker address (Note [free variables wrapped when read] in `convert_frame.rs`).
    pub unread_free_vars: std::collections::HashSet<usize>,
    /// Where the real cell behind a cell tracker of a function from outside the frame is
    /// reached (`f.__closure__[i]`), by tracker address: a function made in the frame that
    /// closes over it and escapes is rebuilt over that very cell (Note [cells of inlined calls]
    /// in convert_frame.rs).
    pub cell_sources: HashMap<usize, Arc<Source>>,
    /// Exception objects the trace raised and handed to an `except` clause (kept alive): one
    /// that outlives the graph is refused (eager's carries a traceback).
    pub raised_exceptions: Vec<Py<PyAny>>,
    /// Exception objects of the user's classes made in the trace, whose `__init__` the trace
    /// ran on them (Note [user exception objects] in `variables/exceptions.rs`).
    pub fresh_exceptions: Vec<Py<PyAny>>,
    /// Depths of the `__next__` frames of user iterators being stepped (Note [user iterators]
    /// in variables/iter.rs): a StopIteration raised in one of them is a value of the trace.
    pub next_frames: Vec<usize>,
    /// The `value` of the StopIteration that just ended a user iterator's step (Note [user
    /// iterators]), taken by `step_iter`.
    pub user_stop_value: Option<crate::symbolic::variables::VT>,
    /// The `parameters` mappings of `inspect.Signature` constants the trace read (kept alive):
    /// read-only views of a mapping nothing changes, whose key, value and item views are
    /// folded (Note [signature parameters]).
    pub frozen_mappings: Vec<Py<PyAny>>,
    /// For each of `raised_exceptions`, the `(ip, visit)` of the converted frame's instruction
    /// running when it was raised (the raise itself, or the call that raised it in an inlined
    /// function): where to break instead when the exception outlives the graph.
    pub raise_points: Vec<(usize, usize)>,
    /// The `(ip, visit)` of the converted frame's instruction being traced.
    pub top_ip: (usize, usize),
    /// The user code instruction being traced, innermost (not torch's own code): where a
    /// warning a torch call issues is reported (Note [warnings of traced calls]).
    pub user_loc: Option<(Arc<crate::symbolic::code_info::CodeInfo>, usize, Py<PyAny>)>,
    /// Warnings the torch calls issued while traced on fake tensors: (message, category,
    /// filename, line, the user module's globals). The graph issues them at each call instead.
    pub trace_warnings: Vec<(Py<PyAny>, Py<PyAny>, String, u32, Py<PyAny>)>,
    /// A private `random.Random` whose state is the one the frame has left Python's global
    /// generator in, once the frame seeded it with a literal (Note [Python random seeded in the
    /// frame] in `object_protocol.rs`); `None` before that.
    pub py_random: Option<Py<PyAny>>,
    /// Containers being wrapped (addresses), innermost last: `builder::wrap` refuses cycles.
    pub wrapping: Vec<usize>,
    /// Closures guarded by their code rather than their identity (Note [closure guards] in
    /// builder.rs) and modules guarded by their type (Note [modules guarded by type]), by
    /// address: the first use of their identity pins them with an ID_MATCH.
    pub unpinned_objects: std::collections::HashSet<usize>,
    /// Writes outside the frame, replayed after the graph.
    pub side_effects: crate::symbolic::side_effects::SideEffects,
    /// Fake example value of every tensor node (becomes fx `meta["example_value"]`).
    pub fakes: HashMap<NodeId, Py<PyAny>>,
    name_counts: HashMap<String, usize>,
    /// Dynamic-shape policy of this conversion (Note [symbolic sizes]).
    pub dynamic: DynamicPolicy,
    /// Whether the default device guard (`torch.get_default_device()`) is installed: once a
    /// tensor factory is traced.
    pub default_device_guarded: bool,
    /// The fake mode's `ShapeEnv`, once an input has a dynamic dimension.
    pub shape_env: Option<Py<PyAny>>,
    /// Sources of the inputs with dynamic dimensions, in the order their fakes were made (the
    /// `ShapeEnv` names the k-th one `__dynamo_dyn{k}`).
    pub dynamic_inputs: Vec<Arc<Source>>,
    /// Nodes that compute symbolic numbers (sizes, arithmetic on them): pure, dropped from the
    /// graph when nothing uses them (a size read only to be specialized).
    pub sym_nodes: std::collections::HashSet<NodeId>,
    /// Nodes of a trace made only to check code that the graph then calls as one op (the
    /// forward of a custom `autograd.Function`, Note [custom autograd.Function]): dropped with
    /// the unused symbolic-number nodes, since nothing uses them.
    pub speculated_nodes: std::collections::HashSet<NodeId>,
    /// The graph calls user Python (a custom `autograd.Function`'s `apply`): it runs with the
    /// frame hook off, whatever the backend.
    pub calls_user_python: bool,
    /// Python ints and floats that are symbolic graph inputs, by `"int <source>"` /
    /// `"float <source>"`.
    int_inputs: HashMap<String, Rc<crate::symbolic::variables::SymNodeVariable>>,
    /// Sizes each tensor input had, by source text, with `None` for a dynamic dimension: what
    /// the next compile of this frame compares against (automatic dynamic).
    pub dim_state: DimState,
    /// Ints and strs the frame received that the trace has not used yet, and strings formatted
    /// from them, by the address of their `VT::Constant` (Note [lazy constants]).
    pub lazy_constants: HashMap<usize, LazyConstant>,
    /// The lazy constant standing for a symbolic number input where it is formatted, by the
    /// address of its `SymNodeVariable` (Note [formatting symbolic inputs]).
    pub sym_text_inputs: HashMap<usize, VT>,
    /// `id()` of objects that have no address while tracing, by the address of their tracker's
    /// state (Note [ids of traced objects]): the `dynamo._polyfills.FakeId` standing for the id,
    /// and the tracker (kept alive so that its address is not reused in this trace).
    pub fake_ids: HashMap<usize, (Py<PyAny>, crate::symbolic::variables::VariableTracker)>,
    /// Tensor nodes that are instances of a `torch.Tensor` subclass, with the class (Note
    /// [tensor subclasses] in `variables/tensor_subclass.rs`).
    pub tensor_subclasses: HashMap<NodeId, Py<PyAny>>,
    /// Python attributes the trace set on subclass tensors it made, in write order.
    pub tensor_attrs: HashMap<NodeId, Vec<(String, crate::symbolic::variables::VariableTracker)>>,
    /// Depth of `DisableTorchFunctionSubclass` regions (explicit ones and the op that
    /// `Tensor.__torch_function__` runs): while nonzero, subclass tensors dispatch nothing.
    pub torch_function_disabled: usize,
    /// Depth of `DisableTorchFunction` regions among them (torch function modes off too).
    pub torch_function_all_disabled: usize,
    /// What the trace guarded and recorded of autocast blocks (Note [autocast blocks] in
    /// `python/dynamo/_amp.py`).
    pub autocast: crate::symbolic::variables::ctx_manager::AutocastTrace,
    /// Set for the next inlined call of a generator function: its generator stays lazy even
    /// for torch's own code (a `@contextmanager` body runs in steps, Note [generator context
    /// managers]).
    pub lazy_generator_call: bool,
    /// The generators of `@contextmanager` managers (by `IteratorState` address), with the
    /// instruction that made each manager (Note [generator context managers]).
    pub generator_ctx_made_at: HashMap<usize, (usize, usize)>,
    /// Every generator the trace made (by `IteratorState` address), with the instruction of
    /// the converted frame that made it: where the frame breaks instead when the generator
    /// cannot live past the graph (Note [breaking where a generator was made]).
    pub generator_made_at: HashMap<usize, (usize, usize)>,
    /// Set when the graph must run through torch's autograd (Note [autograd introspection at
    /// a break] in `convert_frame.rs`): the reason, given to the backend as
    /// `gm.meta["dynamo_eager_autograd"]`.
    pub eager_autograd: Option<String>,
}

// Note [ids of traced objects]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `id(o)` is used by library code as an identity key: `copy.deepcopy`'s memo (`memo[id(x)]`,
// `_keep_alive`'s `memo[id(memo)]`), caches keyed by object. For an object that exists outside
// the frame and is reached through a source (a config, a module, a function), the trace uses
// its real id, pinned by an ID_MATCH guard on that source, as torch does. An object the trace
// built (a list, a dict, a user object) has no address until it is rebuilt, and a constant has
// no source that would pin its identity: its id is a `FakeId`, one per tracker (the same
// tracker always gives the same one), hashed and compared by identity, so it works as a dict key
// and in `==`/`is` exactly as distinct ids do. Its value is unknown: formatting, arithmetic or
// ordering it raises in the trace (a graph break: the instruction runs in Python with the real
// id), and a FakeId that would outlive the graph (returned, stored outside the frame, live at a
// break) is refused when the result is rebuilt (`convert_frame::rebuild_of`). Two constants
// that are one object while tracing (an interned string read twice) are assumed to be one
// object at run time: only identity-keyed lookups of immutable values see the difference.

// Note [lazy constants]
// ~~~~~~~~~~~~~~~~~~~~~
// An int or str argument of the converted frame (`epoch` of a training function, the step
// counter a loop body receives) is often only passed along: to a resume function across a
// graph break, into a `print` or a log line. Guarding it by value at frame entry would
// recompile the frame for every new value (every epoch) although nothing the trace did
// depended on it. Such an argument is wrapped as a constant whose CONSTANT_MATCH guard is
// installed only when the trace uses its value (`OutputGraph::realize`): any instruction that
// pops it, except the ones that only move values (STORE_FAST, POP_TOP, COPY, SWAP), and a
// peek that tests its truth. A value still unused at a graph break is rebuilt from its source,
// not from the constant. Formatting one into a string (FORMAT_VALUE, BUILD_STRING: an
// f-string passed to `print`) does not use it either: the string is a lazy constant too, whose
// rebuild redoes the formatting at run time (`format`, `str.join`) from the arguments' sources;
// using the string realizes every argument it was made from. This is torch's
// LazyVariableTracker restricted to the kinds whose value guards cost recompiles.

impl Drop for OutputGraph {
    /// The trace's fake-tensor mode forgets the real tensors it converted
    /// (`dynamo._shapes.forget_real_tensors`): compiled graphs keep the mode alive through their
    /// fake tensors, and its weak references to the frame's tensors would refuse
    /// `torch.utils.swap_tensors` on them.
    fn drop(&mut self) {
        Python::attach(|py| {
            if let Ok(m) = py.import("dynamo._shapes") {
                let _ = m.call_method1("forget_real_tensors", (self.fake_mode.bind(py),));
            }
        });
    }
}

/// How a lazy constant is made again at run time (Note [lazy constants]).
pub enum LazyRecipe {
    /// The argument itself, reloaded from where the frame got it.
    Source(Arc<Source>),
    Const(Py<PyAny>),
    /// `func(*args)`.
    Call(Py<PyAny>, Vec<LazyRecipe>),
    Tuple(Vec<LazyRecipe>),
    /// A symbolic int the graph computes (Note [formatting symbolic sizes]): an output of the
    /// graph.
    Graph(NodeId),
}

impl LazyRecipe {
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> LazyRecipe {
        match self {
            LazyRecipe::Source(s) => LazyRecipe::Source(s.clone()),
            LazyRecipe::Const(c) => LazyRecipe::Const(c.clone_ref(py)),
            LazyRecipe::Call(f, args) => LazyRecipe::Call(f.clone_ref(py), args.iter().map(|a| a.clone_ref(py)).collect()),
            LazyRecipe::Tuple(items) => LazyRecipe::Tuple(items.iter().map(|a| a.clone_ref(py)).collect()),
            LazyRecipe::Graph(n) => LazyRecipe::Graph(*n),
        }
    }

    /// The rebuild that makes the value at run time; `output_of` gives the index among the
    /// graph's outputs of a node the recipe reads (adding it as an output).
    pub fn rebuild(&self, py: Python<'_>, output_of: &mut dyn FnMut(NodeId) -> usize) -> crate::pycodegen::Rebuild {
        use crate::pycodegen::Rebuild;
        match self {
            LazyRecipe::Source(s) => Rebuild::Source(s.clone()),
            LazyRecipe::Const(c) => Rebuild::Const(c.clone_ref(py)),
            LazyRecipe::Call(f, args) => Rebuild::Call { func: f.clone_ref(py), args: args.iter().map(|a| a.rebuild(py, output_of)).collect() },
            LazyRecipe::Tuple(items) => Rebuild::Tuple(items.iter().map(|a| a.rebuild(py, output_of)).collect()),
            LazyRecipe::Graph(n) => Rebuild::GraphOutput(output_of(*n)),
        }
    }
}

// Note [constants keep their identity]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A str, float, big int, bytes, tuple of literals or frozenset from the frame's inputs is a
// constant to the trace, guarded by value. Rebuilt as that constant, a value the frame returns
// or stores would be the object of the compile that made the code: `f(s) is s` fails on
// every later call with an equal but distinct `s`, and an identity-keyed lookup (`is`, a
// `WeakKeyDictionary`, `id()`) sees another object. As torch's codegen does for any value with
// a source, such a constant leaves the graph by reloading it from where the frame got it.
// The reload runs where every rebuild does, before the frame's writes are replayed, so a
// source the frame writes later still gives the object read. A value CPython shares between
// equal instances (None, bools, the small ints, the empty tuple and str) needs no reload.

/// Whether every object equal to `v` is `v` itself in CPython (None, bools, the ints of
/// `_PY_NSMALLNEGINTS..=_PY_NSMALLPOSINTS` in `pycore_runtime_init.h`, `()`, `''`), so that
/// rebuilding it as a constant keeps its identity.
fn identity_is_value(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    use pyo3::types::{PyBool, PyInt};
    if v.is_none() || v.is_instance_of::<PyBool>() {
        return true;
    }
    if v.get_type().is(py.get_type::<PyInt>()) {
        return v.extract::<i64>().is_ok_and(|i| (-5..=256).contains(&i));
    }
    if v.get_type().is(py.get_type::<PyTuple>()) || v.get_type().is(py.get_type::<PyString>()) {
        return v.len().is_ok_and(|n| n == 0);
    }
    false
}

/// Tensor methods that return the tensor itself when they have nothing to convert (Note
/// [conversions that return their input]).
const ALIASING_CONVERSIONS: &[&str] = &[
    "contiguous", "to", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char", "cpu", "cuda", "type", "type_as",
];

/// A constant whose guards wait for its first use (Note [lazy constants]).
pub struct LazyConstant {
    /// The tracker's value, kept alive so its address is not reused while the entry exists.
    value: Rc<Py<PyAny>>,
    recipe: LazyRecipe,
    /// Addresses of the argument entries this value was made from (itself for an argument).
    bases: Vec<usize>,
    /// For an argument: where it came from (guarded CONSTANT_MATCH there once used).
    source: Option<Arc<Source>>,
    /// For a symbolic int the graph computes: its fake `SymInt`, specialized (a guard in the
    /// `ShapeEnv`) once used (Note [formatting symbolic sizes]).
    sym: Option<Py<PyAny>>,
    /// Used by the trace: guarded, rebuilt as the constant it is. Entries are never removed
    /// (their kept values keep the addresses unique).
    realized: bool,
}

/// Per code object: the sizes its compiles saw for each tensor input, by source text (`None`:
/// the dimension is already dynamic). Kept in the code's `ExtraState` between compiles.
pub type DimState = HashMap<String, Vec<Option<i64>>>;

/// Whether tensor `value` at `source` is state of an object rather than data passed in: a
/// parameter, or a tensor read as an attribute (a module's buffer, an object's tensor). With
/// `dynamic=True` such tensors keep static sizes until they change (torch's
/// `force_parameter_static_shapes` and `force_nn_module_property_static_shapes`; Note
/// [dynamic=True and object state]).
fn is_object_state(value: &Bound<'_, PyAny>, source: &Source, parameter_type: &Bound<'_, PyAny>) -> bool {
    let parameter = value.is_instance(parameter_type).unwrap_or(false);
    let attribute = match source {
        Source::Attr { .. } | Source::GenericAttr { .. } => true,
        Source::GetItem { base, .. } => matches!(base.as_ref(), Source::Attr { attr, .. } | Source::GenericAttr { attr, .. } if attr == "_parameters" || attr == "_buffers"),
        _ => false,
    };
    parameter || attribute
}

/// How a conversion decides which input dimensions are dynamic (Note [symbolic sizes]).
#[derive(Clone, Debug, Default)]
pub struct DynamicPolicy {
    /// `optimize(dynamic=...)`: `Some(false)` never, `Some(true)` every dimension of every
    /// tensor passed in (object state, [`is_object_state`], only once it changed), `None`
    /// automatic (a dimension that changed since an earlier compile).
    pub mode: Option<bool>,
    /// What earlier compiles of this frame saw, if any.
    pub previous: Option<DimState>,
}

impl OutputGraph {
    /// The items of a tuple wrapped from `source`, recorded as that tuple's (Note [tuples from
    /// outside the frame]).
    pub fn sourced_tuple_items(&mut self, items: Vec<VT>, source: &Arc<Source>) -> Rc<Vec<VT>> {
        let items = Rc::new(items);
        self.tuple_sources.insert(Rc::as_ptr(&items) as usize, (source.clone(), items.clone()));
        items
    }

    /// Constant `value` wrapped from `source`, recorded as coming from there when its identity
    /// can differ from an equal value's (Note [constants keep their identity]).
    pub fn sourced_constant(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VT {
        let rc = Rc::new(value.clone().unbind());
        if !identity_is_value(py, value) {
            self.constant_sources.insert(Rc::as_ptr(&rc) as usize, (source.clone(), rc.clone()));
        }
        VT::Constant(rc)
    }

    /// Where the very object behind constant tracker `c` is reached, when it was wrapped from
    /// the frame's inputs (Note [constants keep their identity]).
    pub fn constant_source(&self, c: &Rc<Py<PyAny>>) -> Option<&Arc<Source>> {
        self.constant_sources.get(&(Rc::as_ptr(c) as usize)).filter(|(_, held)| Rc::ptr_eq(held, c)).map(|(s, _)| s)
    }

    /// The tuple of `items` (BUILD_TUPLE): a constant when every item is one, remembering its
    /// items when one of them must keep its identity (Note [constants keep their identity]).
    pub fn build_tuple(&mut self, py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
        let keeps_identity = |v: &VT| matches!(v, VT::Constant(c) if self.constant_source(c).is_some() || self.folded_tuple_items(c).is_some());
        let remember = items.iter().all(|i| matches!(i, VT::Constant(_))) && items.iter().any(keeps_identity);
        if !remember {
            return crate::symbolic::variables::lists::make_tuple(py, items);
        }
        let t = crate::symbolic::variables::lists::make_tuple(py, items.clone())?;
        if let VT::Constant(c) = &t {
            self.folded_tuples.insert(Rc::as_ptr(c) as usize, (c.clone(), Rc::new(items)));
        }
        Ok(t)
    }

    /// BUILD_TUPLE of constants, one of them a lazy constant not used yet: a tuple that is a
    /// lazy constant made from the same arguments (Note [lazy constants]), so that `'%d %d' %
    /// (i, j)` stays lazy; using the tuple uses its items. Its items keep their identity as
    /// `build_tuple`'s do.
    pub fn build_lazy_tuple(&mut self, py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
        let mut recipes = Vec::with_capacity(items.len());
        let mut bases = Vec::new();
        let mut values = Vec::with_capacity(items.len());
        for i in &items {
            let (Some(v), Some((r, b))) = (i.as_constant(py), self.lazy_recipe(py, i)) else { return self.build_tuple(py, items) };
            values.push(v);
            recipes.push(r);
            bases.extend(b);
        }
        let t = self.lazy_derived(PyTuple::new(py, values)?.into_any().unbind(), LazyRecipe::Tuple(recipes), bases);
        if let VT::Constant(c) = &t {
            self.folded_tuples.insert(Rc::as_ptr(c) as usize, (c.clone(), Rc::new(items)));
        }
        Ok(t)
    }

    /// The items of constant tuple `c` as trackers that keep their identity: the items
    /// BUILD_TUPLE folded it from, or, for an exact tuple wrapped from the frame's inputs,
    /// each item reached at its index there. `None` for any other constant (Note [constants
    /// keep their identity]).
    pub fn constant_tuple_items(&mut self, py: Python<'_>, c: &Rc<Py<PyAny>>) -> Option<Vec<VT>> {
        if let Some((held, items)) = self.folded_tuples.get(&(Rc::as_ptr(c) as usize)) {
            if Rc::ptr_eq(held, c) {
                return Some(items.as_ref().clone());
            }
        }
        let source = self.constant_source(c)?.clone();
        let t = c.bind(py).cast::<PyTuple>().ok().filter(|t| t.get_type().is(py.get_type::<PyTuple>()))?.clone();
        Some(t.iter().enumerate().map(|(i, item)| self.sourced_constant(py, &item, &source.item(crate::source::ItemKey::Int(i as i64)))).collect())
    }

    /// The items BUILD_TUPLE folded constant `c` from, when it remembered them.
    pub fn folded_tuple_items(&self, c: &Rc<Py<PyAny>>) -> Option<Rc<Vec<VT>>> {
        self.folded_tuples.get(&(Rc::as_ptr(c) as usize)).filter(|(held, _)| Rc::ptr_eq(held, c)).map(|(_, items)| items.clone())
    }

    /// The source of the tuple whose items are `items`, when it was wrapped from the frame's
    /// inputs (Note [tuples from outside the frame]).
    pub fn tuple_source(&self, items: &Rc<Vec<VT>>) -> Option<&Arc<Source>> {
        self.tuple_sources.get(&(Rc::as_ptr(items) as usize)).filter(|(_, held)| Rc::ptr_eq(held, items)).map(|(s, _)| s)
    }

    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let fake_mod = py.import("torch._subclasses.fake_tensor")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("allow_non_fake_inputs", true)?;
        let fake_mode = fake_mod.getattr("FakeTensorMode")?.call((), Some(&kwargs))?.unbind();
        Ok(OutputGraph {
            graph: Graph::default(),
            objects: Vec::new(),
            inputs: Vec::new(),
            input_by_ptr: HashMap::new(),
            guards: Vec::new(),
            guard_keys: Default::default(),
            attr_versions: Vec::new(),
            fake_mode,
            handles: Handles::new(py)?,
            fakes: HashMap::new(),
            append_only_slots: Vec::new(),
            generators: Vec::new(),
            frame_arg_ptrs: Default::default(),
            frame_locals_taken: false,
            inline_sites: Vec::new(),
            peeked_lists: HashMap::new(),
            lists_by_ptr: HashMap::new(),
            dicts_by_ptr: HashMap::new(),
            dict_storages_by_ptr: HashMap::new(),
            side_effects: Default::default(),
            wrapping: Vec::new(),
            unpinned_objects: std::collections::HashSet::new(),
            opaque_by_ptr: HashMap::new(),
            sets_by_ptr: HashMap::new(),
            set_sources: HashMap::new(),
            set_members: HashMap::new(),
            traced_keys: HashMap::new(),
            cells_by_ptr: HashMap::new(),
            cell_sources: HashMap::new(),
            raised_exceptions: Vec::new(),
            fresh_exceptions: Vec::new(),
            next_frames: Vec::new(),
            user_stop_value: None,
            frozen_mappings: Vec::new(),
            raise_points: Vec::new(),
            top_ip: (0, 0),
            user_loc: None,
            trace_warnings: Vec::new(),
            py_random: None,
            class_sources: HashMap::new(),
            tuple_sources: HashMap::new(),
            constant_sources: HashMap::new(),
            folded_tuples: HashMap::new(),
            derived_modules: HashMap::new(),
            unread_free_vars: std::collections::HashSet::new(),
            eager_autograd: None,
            modules_in_init: std::collections::HashSet::new(),
            frame_classes: HashMap::new(),
            name_counts: HashMap::new(),
            dynamic: DynamicPolicy::default(),
            default_device_guarded: false,
            shape_env: None,
            dynamic_inputs: Vec::new(),
            dim_state: HashMap::new(),
            sym_nodes: Default::default(),
            speculated_nodes: Default::default(),
            calls_user_python: false,
            int_inputs: HashMap::new(),
            lazy_constants: HashMap::new(),
            sym_text_inputs: HashMap::new(),
            fake_ids: HashMap::new(),
            tensor_subclasses: HashMap::new(),
            tensor_attrs: HashMap::new(),
            torch_function_disabled: 0,
            torch_function_all_disabled: 0,
            autocast: Default::default(),
            lazy_generator_call: false,
            generator_ctx_made_at: HashMap::new(),
            generator_made_at: HashMap::new(),
        })
    }

    /// The `TracedKey` standing for tensor tracker `v` as a dict key, one per graph value (Note
    /// [tensor dict keys] in `variables/dicts.rs`). A tensor from outside the frame made a key
    /// is guarded to stay a distinct object from the others made keys (NO_ALIAS): the trace
    /// took their keys to differ. Two keys of dicts from outside are pinned by DICT_KEYS.
    pub fn traced_key(&mut self, py: Python<'_>, v: &VT) -> PyResult<Py<PyAny>> {
        use crate::symbolic::variables::dicts::TracedKey;
        let VT::Tensor(t) = v else { unreachable!("traced keys stand for tensors") };
        if let Some(k) = self.traced_keys.get(&t.node) {
            return Ok(k.clone_ref(py));
        }
        if let Some(s) = &t.source {
            // Keys read from a dict's keys are fixed objects (its DICT_KEYS guard pins them):
            // two such never alias.
            let pinned = |s: &Source| matches!(s, Source::DictKey { .. });
            let others: Vec<Arc<Source>> = self
                .traced_keys
                .values()
                .filter_map(|k| match &k.bind(py).cast::<TracedKey>().ok()?.borrow().value {
                    VT::Tensor(o) => o.source.clone(),
                    _ => None,
                })
                .filter(|o| !(pinned(o) && pinned(s)))
                .collect();
            for o in others {
                self.add_guard(Some(s.clone()), GuardKind::NotAliasOf(o));
            }
        }
        let key = Py::new(py, TracedKey { value: v.clone() })?.into_any();
        self.traced_keys.insert(t.node, key.clone_ref(py));
        Ok(key)
    }

    /// The `FakeId` for `id()` of the object tracked at address `key` (Note [ids of traced
    /// objects]); `keep` is its tracker, held so the address stays this object's.
    pub fn fake_id(&mut self, py: Python<'_>, key: usize, keep: &crate::symbolic::variables::VariableTracker) -> PyResult<Py<PyAny>> {
        if let Some((f, _)) = self.fake_ids.get(&key) {
            return Ok(f.clone_ref(py));
        }
        let n = self.fake_ids.len();
        let f = py.import("dynamo._polyfills")?.getattr("FakeId")?.call1((n,))?.unbind();
        self.fake_ids.insert(key, (f.clone_ref(py), keep.clone()));
        Ok(f)
    }

    /// The dimensions of input `value` (at `source`, of `sizes`) to make symbolic: marked by
    /// `dynamo.mark_dynamic`, all with `dynamic=True`, or (automatic) those whose size differs
    /// from an earlier compile's or was dynamic there. Empty for `dynamic=False`.
    fn dynamic_dims(&self, value: &Bound<'_, PyAny>, source: &Source, sizes: &[i64]) -> PyResult<Vec<usize>> {
        if self.dynamic.mode == Some(false) {
            return Ok(vec![]);
        }
        let mut dims: Vec<usize> = Vec::new();
        if self.dynamic.mode == Some(true) && !is_object_state(value, source, self.handles.parameter_type.bind(value.py())) {
            dims.extend(0..sizes.len());
        }
        if let Ok(marked) = value.getattr("_dynamo_dynamic_indices") {
            for d in marked.try_iter()? {
                let d: usize = d?.extract()?;
                if d < sizes.len() && !dims.contains(&d) {
                    dims.push(d);
                }
            }
        }
        if let Some(prev) = self.dynamic.previous.as_ref().and_then(|p| p.get(&source.to_string())) {
            if prev.len() == sizes.len() {
                let changed: Vec<usize> = (0..sizes.len()).filter(|&d| prev[d].map_or(true, |p| p != sizes[d])).collect();
                // Note [whole-tensor automatic dynamic]: a tensor one of whose sizes changed has
                // every dimension made symbolic, not only the changed ones, so a model fed
                // (batch, length) pairs that vary in both compiles twice, not once per newly
                // varying dimension. Our backends specialize kernels per concrete shape
                // (`_shapes.static_graph`), so a dimension that never varies costs no speed; it
                // costs a few more relation guards, which the ShapeEnv mostly turns into
                // replacements (`s2 == 64` from a matmul with a weight). Sizes 0 and 1 stay
                // static (torch's 0/1 specialization, in `_shapes.symbolic_fake`).
                // Only for tensors of at most two dimensions (token ids, masks): an image batch
                // (N, C, H, W) whose batch changed would get symbolic channels and spatial
                // sizes too, and the ShapeEnv's proofs about window-partition reshapes over
                // them (MaxVit, Swin) took minutes where one symbolic batch takes a second
                // (audit 50, M2); such tensors follow torch's per-dimension rule.
                let whole = !changed.is_empty() && sizes.len() <= 2 && crate::config::automatic_dynamic_whole_tensor();
                for d in if whole { (0..sizes.len()).collect() } else { changed } {
                    if !dims.contains(&d) {
                        dims.push(d);
                    }
                }
            }
        }
        if let Ok(fixed) = value.getattr("_dynamo_static_indices") {
            for d in fixed.try_iter()? {
                let d: usize = d?.extract()?;
                dims.retain(|&x| x != d);
            }
        }
        dims.sort_unstable();
        Ok(dims)
    }

    /// Gives the fake mode a `ShapeEnv` on first use (Note [symbolic sizes]).
    fn ensure_shape_env(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.shape_env.is_none() {
            let env = py.import("dynamo._shapes")?.call_method1("attach_shape_env", (self.fake_mode.bind(py),))?;
            self.shape_env = Some(env.unbind());
        }
        Ok(())
    }

    /// The fake of input `value` with symbolic sizes at `dims` (attaching a `ShapeEnv` to the
    /// fake mode on first use), and the dimensions that really are symbolic (0/1 stay static).
    fn symbolic_fake<'py>(&mut self, py: Python<'py>, value: &Bound<'py, PyAny>, dims: &[usize], source: &Arc<Source>) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
        let shapes = py.import("dynamo._shapes")?;
        self.ensure_shape_env(py)?;
        let k = self.dynamic_inputs.len();
        let fake = shapes.call_method1("symbolic_fake", (self.fake_mode.bind(py), value, dims.to_vec(), k))?;
        self.dynamic_inputs.push(source.clone());
        let sizes = fake.call_method0("size")?;
        let mut symbolic = Vec::new();
        for (d, s) in sizes.try_iter()?.enumerate() {
            if crate::symbolic::variables::is_sym(&s?) {
                symbolic.push(d);
            }
        }
        Ok((fake, symbolic))
    }

    /// A Python int or float at `source` as a symbolic graph input (automatic dynamic numbers,
    /// Note [symbolic sizes]) when it changed since an earlier compile of the frame (or with
    /// `dynamic=True`); `None` when it stays a constant (the caller guards it CONSTANT_MATCH).
    /// Int 0 and 1 stay constants, as torch specializes them. The input is guarded by type; an
    /// int's value is a symbol of the `SHAPE_RELATIONS` guard (a float may not be used by any
    /// relation: a branch on it makes the conversion fall back to static values).
    pub fn add_number_input(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
        let is_float = value.is_instance_of::<pyo3::types::PyFloat>();
        // Floats are remembered by their bits (a NaN equals itself, -0.0 differs from 0.0).
        let v: i64 = if is_float { value.extract::<f64>()?.to_bits() as i64 } else {
            match value.extract::<i64>() {
                Ok(v) => v,
                Err(_) => return Ok(None),
            }
        };
        let key = format!("{} {source}", if is_float { "float" } else { "int" });
        if let Some(t) = self.int_inputs.get(&key) {
            return Ok(Some(VT::SymNum(t.clone())));
        }
        let changed = self.dynamic.previous.as_ref().and_then(|p| p.get(&key)).map(|p| p.first() != Some(&Some(v)));
        // A float argument of the frame is an input from the first compile, as torch's
        // `specialize_float = False`; floats read from objects (`self.eps`) and ints are
        // symbolic once they changed (torch's unspecialized ints: 0 and 1 not special).
        let frame_argument = matches!(source.as_ref(), Source::Local { .. });
        // A float that is not finite or is -0.0 stays a constant, as torch specializes
        // non-finite floats: sympy's symbols are finite reals (`s0 == oo` and `s0 != s0` fold to
        // False) and no expression tells -0.0 from 0.0 (`str`, `math.copysign`).
        let faithful = !is_float || crate::guards::shapes::is_faithful_float(f64::from_bits(v as u64));
        // Note [dynamic=True and object state]: with `dynamic=True` a number read from an
        // object (a module's `padding`, `eps`, `num_heads`) stays a constant until it changes,
        // as torch keeps ints of nn.Modules specialized (`allow_unspec_int_on_nn_module`);
        // symbolic ones made every layer's sizes a longer expression (a conv stack's output
        // size summed every kernel size and padding), and torch's ShapeEnv slowed with their
        // length: resnet18's first call took 111 s.
        let dynamic = faithful
            && match self.dynamic.mode {
                Some(false) => false,
                Some(true) => frame_argument || changed == Some(true),
                None => changed.unwrap_or(is_float && frame_argument),
            };
        if !dynamic {
            self.dim_state.insert(key, vec![Some(v)]);
            return Ok(None);
        }
        let shapes = py.import("dynamo._shapes")?;
        self.ensure_shape_env(py)?;
        let k = self.dynamic_inputs.len();
        let make = if is_float { "symbolic_float" } else { "symbolic_int" };
        let sym = shapes.call_method1(make, (self.shape_env.as_ref().unwrap().bind(py), value, k))?;
        self.dynamic_inputs.push(source.clone());
        self.dim_state.insert(key.clone(), vec![None]);
        self.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        let name = self.fresh_name(&placeholder_name(source));
        let node = self.graph.add(name, Op::Placeholder { source: source.to_string() }, vec![], vec![], None);
        self.fakes.insert(node, sym.clone().unbind());
        self.inputs.push((source.clone(), value.clone().unbind()));
        let t = Rc::new(crate::symbolic::variables::SymNodeVariable { node, fake: sym.unbind(), source: Some(source.clone()) });
        self.int_inputs.insert(key, t.clone());
        Ok(Some(VT::SymNum(t)))
    }

    /// Argument `value` (an exact int or str at `source`) as a constant whose CONSTANT_MATCH guard
    /// waits for its first use (Note [lazy constants]).
    pub fn lazy_argument(&mut self, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VT {
        let rc = Rc::new(value.clone().unbind());
        let key = Rc::as_ptr(&rc) as usize;
        if !identity_is_value(value.py(), value) {
            // Once used (guarded), still rebuilt as that very object (Note [constants keep
            // their identity]).
            self.constant_sources.insert(key, (source.clone(), rc.clone()));
        }
        self.lazy_constants.insert(key, LazyConstant { value: rc.clone(), recipe: LazyRecipe::Source(source.clone()), bases: vec![key], source: Some(source), sym: None, realized: false });
        VT::Constant(rc)
    }

    /// Note [formatting symbolic inputs]: a float argument of the frame is a symbolic input
    /// from its first compile, and an int one once it changed (`add_number_input`). Formatting
    /// one into a string (`f"lr={lr}"`, `"step %d" % i`, `"{}".format(lr)`) read its value,
    /// a guard on it: a training step logging its learning rate or step recompiled at every
    /// step, and ran eagerly for good after eight. Where it is formatted, such an input stands
    /// for a lazy constant of its value and source instead (Note [lazy constants]): the string
    /// is made again at run time from the argument, and only a use of the string guards the
    /// argument's value. The graph keeps the symbolic input. `None` for anything else.
    pub fn lazy_text_of(&mut self, py: Python<'_>, v: &VT) -> Option<VT> {
        let s = match v {
            VT::SymNum(s) => s,
            VT::Tuple(items) => return self.lazy_sizes_text(py, items, None),
            VT::NamedTuple { cls, items } if cls.bind(py).is(self.handles.size_type.bind(py)) => return self.lazy_sizes_text(py, items, Some(cls.clone_ref(py))),
            _ => return None,
        };
        let Some(source) = s.source.as_ref() else { return self.lazy_computed_sym(py, s) };
        let key = Rc::as_ptr(s) as usize;
        if let Some(c) = self.sym_text_inputs.get(&key) {
            return Some(c.clone());
        }
        let value = self.inputs.iter().find(|(so, _)| so == source)?.1.clone_ref(py);
        let value = value.bind(py);
        if !(value.is_exact_instance_of::<pyo3::types::PyFloat>() || value.is_exact_instance_of::<pyo3::types::PyInt>()) {
            return None;
        }
        let c = self.lazy_argument(value, source.clone());
        self.sym_text_inputs.insert(key, c.clone());
        Some(c)
    }

    /// Note [formatting symbolic sizes]: an int the graph computes from dynamic sizes (a
    /// symbolic dimension of an intermediate, `b * t`, `n // heads`) formatted into a string
    /// (torchvision's `f"... got {input.shape}"` passed to `torch._assert`, a shape in a log
    /// line) would specialize it: a guard per size, the frame compiled again for every batch
    /// size. Formatted, it stands for a lazy constant of its current value whose run-time
    /// recipe is the graph's own output of that int, and whose use specializes it
    /// (`LazyConstant::sym`). Float-derived values keep their own path (Note [float inputs]).
    fn lazy_computed_sym(&mut self, py: Python<'_>, s: &Rc<crate::symbolic::variables::SymNodeVariable>) -> Option<VT> {
        let key = Rc::as_ptr(s) as usize;
        if let Some(c) = self.sym_text_inputs.get(&key) {
            return Some(c.clone());
        }
        let fake = s.fake.bind(py);
        if crate::symbolic::variables::type_name(fake) != "SymInt" || crate::symbolic::variables::tensor::float_derived(fake).unwrap_or(true) {
            return None;
        }
        let hint = py.import("dynamo._shapes").ok()?.call_method1("sym_hint", (fake,)).ok()?;
        let rc = Rc::new(hint.unbind());
        let k = Rc::as_ptr(&rc) as usize;
        self.lazy_constants.insert(k, LazyConstant { value: rc.clone(), recipe: LazyRecipe::Graph(s.node), bases: vec![k], source: None, sym: Some(s.fake.clone_ref(py)), realized: false });
        let c = VT::Constant(rc);
        self.sym_text_inputs.insert(key, c.clone());
        Some(c)
    }

    /// A tuple or `torch.Size` (`cls`) of ints with symbolic items, formatted: a lazy constant
    /// made from its items' (Note [formatting symbolic sizes]); `None` when no item is
    /// symbolic or an item is something else.
    fn lazy_sizes_text(&mut self, py: Python<'_>, items: &[VT], cls: Option<Py<PyAny>>) -> Option<VT> {
        if !items.iter().any(|i| matches!(i, VT::SymNum(_))) {
            return None;
        }
        let mut texts = Vec::with_capacity(items.len());
        for i in items {
            texts.push(match i {
                VT::SymNum(_) => self.lazy_text_of(py, i)?,
                VT::Constant(c) if c.bind(py).is_exact_instance_of::<pyo3::types::PyInt>() => i.clone(),
                _ => return None,
            });
        }
        let tuple = self.build_lazy_tuple(py, texts).ok()?;
        let Some(cls) = cls else { return Some(tuple) };
        let (recipe, bases) = self.lazy_recipe(py, &tuple)?;
        let value = cls.bind(py).call1((tuple.as_constant(py)?,)).ok()?.unbind();
        Some(self.lazy_derived(value, LazyRecipe::Call(cls, vec![recipe]), bases))
    }

    /// The run-time recipe of `v` when it is a lazy constant, with the argument entries it
    /// depends on; a plain constant is its own recipe; `None` for anything else.
    pub fn lazy_recipe(&self, py: Python<'_>, v: &VT) -> Option<(LazyRecipe, Vec<usize>)> {
        let VT::Constant(c) = v else { return None };
        match self.lazy_constants.get(&(Rc::as_ptr(c) as usize)) {
            Some(l) if !l.realized => Some((l.recipe.clone_ref(py), l.bases.clone())),
            _ => Some((LazyRecipe::Const(c.clone_ref(py)), vec![])),
        }
    }

    /// Records `value` (just computed by the trace) as a lazy constant made by `recipe` from the
    /// arguments `bases`; a value made from no lazy argument is an ordinary constant.
    pub fn lazy_derived(&mut self, value: Py<PyAny>, recipe: LazyRecipe, mut bases: Vec<usize>) -> VT {
        let rc = Rc::new(value);
        bases.retain(|b| self.lazy_constants.get(b).is_some_and(|e| !e.realized));
        if !bases.is_empty() {
            bases.sort_unstable();
            bases.dedup();
            self.lazy_constants.insert(Rc::as_ptr(&rc) as usize, LazyConstant { value: rc.clone(), recipe, bases, source: None, sym: None, realized: false });
        }
        VT::Constant(rc)
    }

    /// The trace uses the value of `v`: a lazy constant gets the guards of the arguments it
    /// was made from (Note [lazy constants]). Anything else: nothing to do.
    pub fn realize(&mut self, v: &VT) {
        if self.lazy_constants.is_empty() {
            return;
        }
        let VT::Constant(c) = v else { return };
        let key = Rc::as_ptr(c) as usize;
        let bases = match self.lazy_constants.get_mut(&key) {
            Some(e) if !e.realized => {
                e.realized = true;
                e.bases.clone()
            }
            _ => return,
        };
        for b in bases {
            let Some(base) = self.lazy_constants.get_mut(&b) else { continue };
            base.realized = true;
            let guard = base.source.clone().map(|s| (s, Python::attach(|py| base.value.clone_ref(py))));
            if let Some(sym) = &base.sym {
                // The value the trace used holds only while the sizes give it: `int(sym)`
                // records that guard in the ShapeEnv.
                Python::attach(|py| {
                    let _ = crate::symbolic::variables::tensor::specialize_sym(sym.bind(py));
                });
            }
            if let Some((source, value)) = guard {
                self.add_guard(Some(source), GuardKind::ConstantMatch(value));
            }
        }
    }

    /// The rebuild of `v` when it is a lazy constant not used by the trace.
    pub fn lazy_rebuild(&self, py: Python<'_>, v: &VT, output_of: &mut dyn FnMut(NodeId) -> usize) -> Option<crate::pycodegen::Rebuild> {
        if self.lazy_constants.is_empty() {
            return None;
        }
        let VT::Constant(c) = v else { return None };
        self.lazy_constants.get(&(Rc::as_ptr(c) as usize)).filter(|l| !l.realized).map(|l| l.recipe.rebuild(py, output_of))
    }

    /// The `SHAPE_RELATIONS` guard over the dynamic inputs' sizes (Note [symbolic sizes]), or
    /// `None` when no input is dynamic. An expression outside the evaluator's language is an
    /// `Unsupported` (the frame is then converted again with static shapes).
    pub fn shape_guard(&self, py: Python<'_>) -> VResult<Option<Guard>> {
        let Some(env) = &self.shape_env else { return Ok(None) };
        let shapes = py.import("dynamo._shapes")?;
        let exported = match shapes.call_method1("export_guards", (env.bind(py),)) {
            Ok(e) => e,
            Err(e) => {
                return Err(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DynamicShapeGuard, format!(
                    "symbolic shape guard not modelled: {}",
                    e.value(py).str().map(|r| r.to_string()).unwrap_or_default()
                )))
            }
        };
        let (bindings, relations): (Vec<(usize, i64)>, Vec<Bound<'_, PyAny>>) = exported.extract()?;
        // dim >= 0: a size; -1: an int input's value; -2: a float input's value.
        let sources = bindings.iter().map(|&(k, d)| (self.dynamic_inputs[k].clone(), usize::try_from(d).ok())).collect();
        let floats = bindings.iter().map(|&(_, d)| d == -2).collect();
        let rels = relations.iter().map(crate::guards::shapes::SymExpr::from_py).collect::<PyResult<Vec<_>>>()?;
        Ok(Some(Guard { source: None, kind: GuardKind::ShapeRelations(crate::guards::shapes::ShapeGuard::new(sources, rels, floats)) }))
    }

    /// Guards that every object this trace mutates (a list, a dict, an object or class with
    /// attribute writes) is still distinct from each other object of its kind that the trace
    /// saw as a separate object: the trace gave each its own tracker, which is only right while
    /// they are not one object (aliasing the other way is covered by `AliasOf`).
    pub fn add_alias_guards(&mut self) {
        let mut guards = Vec::new();
        let mut pairwise = |mutated: &[Arc<Source>], all: &[Arc<Source>]| {
            for m in mutated {
                for o in all {
                    if o != m {
                        guards.push((m.clone(), o.clone()));
                    }
                }
            }
        };
        let se = &self.side_effects;
        let sources_of_lists: Vec<Arc<Source>> = self.lists_by_ptr.values().map(|(s, _)| s.clone()).collect();
        let mutated_lists: Vec<Arc<Source>> = se.lists.iter().filter_map(|l| l.borrow().source.clone()).collect();
        pairwise(&mutated_lists, &sources_of_lists);
        let sources_of_dicts: Vec<Arc<Source>> = self.dicts_by_ptr.values().chain(self.dict_storages_by_ptr.values()).map(|(s, _)| s.clone()).collect();
        let mutated_dicts: Vec<Arc<Source>> = se.dicts.iter().filter_map(|d| d.borrow().source.clone()).collect();
        pairwise(&mutated_dicts, &sources_of_dicts);
        // Two outside iterators stepped as two trackers must stay two objects.
        let sources_of_iters: Vec<Arc<Source>> = se.external_iters.iter().map(|e| e.source.clone()).collect();
        let stepped_iters: Vec<Arc<Source>> = se.external_iters.iter().filter(|e| e.steps() > 0).map(|e| e.source.clone()).collect();
        pairwise(&stepped_iters, &sources_of_iters);
        for w in &se.attrs {
            if let Some((_, ty)) = self.opaque_by_ptr.get(&w.ptr) {
                let same_type: Vec<Arc<Source>> = self.opaque_by_ptr.values().filter(|(_, t)| t == ty).map(|(s, _)| s.clone()).collect();
                pairwise(std::slice::from_ref(&w.source), &same_type);
            }
        }
        for (m, o) in guards {
            self.add_guard(Some(m), GuardKind::NotAliasOf(o));
        }
    }

    /// Records that the trace read `name` from `holder` without a guard of its own: a torch
    /// module's dict or an inlined torch function's globals (a dict), or a torch class (Note
    /// [attribute version guards]). Classes whose dict cannot change are skipped.
    pub fn read_unguarded_attr(&mut self, py: Python<'_>, holder: &Bound<'_, PyAny>, name: &str) {
        let is_type = match holder.cast::<pyo3::types::PyType>() {
            Ok(t) => {
                // SAFETY: `t` is a live type object.
                let flags = unsafe { pyo3::ffi::PyType_GetFlags(t.as_ptr() as *mut pyo3::ffi::PyTypeObject) };
                if flags & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE != 0 {
                    return;
                }
                true
            }
            Err(_) if holder.is_instance_of::<pyo3::types::PyDict>() => false,
            Err(_) => return,
        };
        let key = holder.as_ptr() as usize;
        let i = match self.attr_versions.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.attr_versions.push((key, crate::guards::VersionGuard::new(holder.clone().unbind(), is_type)));
                self.attr_versions.len() - 1
            }
        };
        self.attr_versions[i].1.read(py, name);
    }

    /// The `ITERATOR_LEN` guard of each literal iterator passed in (Note [items of iterators
    /// from outside the frame] in `builder.rs`): the trace took `k` items from it, and saw it
    /// end right after them when it did.
    pub fn add_iterator_guards(&mut self) {
        let guards: Vec<(Arc<Source>, Py<PyAny>, usize, bool)> = self
            .side_effects
            .external_iters
            .iter()
            .filter(|e| e.literal_items)
            .map(|e| {
                let st = e.state.borrow();
                (e.source.clone(), Python::attach(|py| e.obj.bind(py).get_type().into_any().unbind()), st.pos.saturating_sub(e.start), st.exhausted)
            })
            .collect();
        for (source, ty, n, exact) in guards {
            if n > 0 || exact {
                self.add_guard(Some(source), GuardKind::IteratorLen { ty, n, exact });
            }
        }
    }

    /// Turns the reads `read_unguarded_attr` recorded into ATTR_VERSION guards.
    pub fn add_version_guards(&mut self) {
        // Note [class lookups are versioned] (variables/user_defined.rs).
        Python::attach(|py| {
            for (ty, name) in crate::symbolic::variables::user_defined::take_class_lookups() {
                self.read_unguarded_attr(py, ty.bind(py), &name);
            }
        });
        for (_, vg) in std::mem::take(&mut self.attr_versions) {
            self.guards.push(Guard { source: None, kind: GuardKind::AttrVersion(vg) });
        }
    }

    /// Adds a guard unless an identical one exists.
    pub fn add_guard(&mut self, source: Option<Arc<Source>>, kind: GuardKind) {
        let g = Guard { source, kind };
        let extra = match &g.kind {
            GuardKind::AliasOf(o) | GuardKind::NotAliasOf(o) => o.to_string(),
            // One guard per attribute name: these kinds are about a name, not the value.
            GuardKind::NoInstanceAttr(n) | GuardKind::NoAttr(n) => n.clone(),
            GuardKind::TensorQuery { name, .. } => name.to_string(),
            GuardKind::GlobalQuery { func, args, .. } => Python::attach(|py| format!("{}{}", func.as_ptr() as usize, args.bind(py).repr().map(|r| r.to_string()).unwrap_or_default())),
            _ => String::new(),
        };
        // Keyed on the source itself (slot indices included), not its printed name.
        let key = format!("{}|{:?}|{extra}", g.kind.name(), g.source);
        if self.guard_keys.insert(key) {
            self.guards.push(g);
        }
    }

    fn fresh_name(&mut self, base: &str) -> String {
        let base: String = base.chars().map(|c| if c.is_alphanumeric() { c } else { '_' }).collect();
        let base = if base.starts_with(|c: char| c.is_ascii_digit()) { format!("_{base}") } else { base };
        let n = self.name_counts.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}_{}", *n - 1)
        }
    }

    pub fn intern(&mut self, obj: Py<PyAny>) -> PyRef {
        self.objects.push(obj);
        PyRef(self.objects.len() as u32 - 1)
    }

    /// Registers a real tensor reached through `source` as a graph input (placeholder),
    /// guarding it with TENSOR_MATCH. The same tensor object always maps to one placeholder.
    pub fn add_input(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<Rc<TensorVariable>> {
        let key = value.as_ptr() as usize;
        if let Some(t) = self.input_by_ptr.get(&key).cloned() {
            // One placeholder for both: only valid while both sources are the same object.
            if let Some(first) = &t.source {
                if first.as_ref() != source.as_ref() {
                    self.add_guard(Some(source), GuardKind::AliasOf(first.clone()));
                }
            }
            return Ok(t);
        }
        let ty = value.get_type();
        let subclass = match crate::symbolic::variables::tensor_subclass::input_subclass(py, &ty)? {
            Ok(s) => s,
            Err(why) => return Err(crate::symbolic::variables::tensor_subclass::unsupported_input(why)),
        };
        // Metadata is read through a plain alias: the subclass's `__torch_function__` sees none
        // of the tracer's reads (Note [tensor subclasses]).
        let real = value.clone();
        let plain_alias = if subclass { Some(py.import("dynamo._subclass")?.call_method1("plain", (value,))?) } else { None };
        let value = plain_alias.as_ref().unwrap_or(&real);
        if value.getattr("layout")?.to_string() != "torch.strided" {
            graph_break!(TensorSubclass, "non-strided tensor input {source}");
        }
        let sizes: Vec<i64> = value.call_method0("size")?.extract()?;
        let strides: Vec<i64> = value.call_method0("stride")?.extract()?;
        let mut dims = self.dynamic_dims(value, &source, &sizes)?;
        if !dims.is_empty() && strides != crate::guards::contiguous_strides(&sizes) {
            // Only contiguous inputs get symbolic sizes (their strides follow from the sizes).
            dims.clear();
        }
        let (fake, dynamic_dims) = if dims.is_empty() {
            (self.fake_mode.bind(py).call_method1("from_tensor", (value,))?, vec![])
        } else {
            self.symbolic_fake(py, value, &dims, &source)?
        };
        let state = sizes.iter().enumerate().map(|(d, &s)| (!dynamic_dims.contains(&d)).then_some(s)).collect();
        self.dim_state.insert(source.to_string(), state);
        let spec = crate::guards::TensorSpec {
            ty: ty.clone().into_any().unbind(),
            dtype: value.getattr("dtype")?.unbind(),
            device: value.call_method0("get_device")?.extract()?,
            device_type: value.getattr("device")?.getattr("type")?.extract()?,
            requires_grad: value.getattr("requires_grad")?.extract()?,
            inference: value.call_method0("is_inference")?.extract()?,
            lazy_value: crate::inductor::fx_import::is_lazy_value(py, value)?,
            sizes,
            strides,
            dynamic_dims,
            read_plain: subclass,
        };
        self.add_guard(Some(source.clone()), GuardKind::TensorMatch(spec));
        let meta = tensor_meta(&fake)?;
        let name = self.fresh_name(&placeholder_name(&source));
        let node = self.graph.add(name, Op::Placeholder { source: source.to_string() }, vec![], vec![], Some(meta));
        self.fakes.insert(node, fake.clone().unbind());
        self.inputs.push((source.clone(), real.clone().unbind()));
        if subclass {
            self.tensor_subclasses.insert(node, ty.clone().into_any().unbind());
            // Its class's functions (`__torch_function__`, methods) are read through the input.
            self.class_sources.entry(ty.as_ptr() as usize).or_insert_with(|| source.generic_attr("__class__"));
        }
        let weakly_referenced = crate::symbolic::translator::has_user_weakrefs(py, &real);
        let tv = Rc::new(TensorVariable { node, fake: fake.unbind(), source: Some(source), weakly_referenced });
        self.input_by_ptr.insert(key, tv.clone());
        Ok(tv)
    }

    /// Converts a tracker into a graph argument plus its fake value (for shape propagation).
    pub fn to_arg<'py>(&mut self, py: Python<'py>, vt: &VT) -> VResult<(Arg, Bound<'py, PyAny>)> {
        Ok(match vt {
            VT::Tensor(t) => (Arg::Node(t.node), t.fake.bind(py).clone()),
            VT::SymNum(s) => (Arg::Node(s.node), s.fake.bind(py).clone()),
            VT::Constant(c) => {
                let mut b = c.bind(py).clone();
                if crate::symbolic::builder::is_numpy_number(&b) {
                    // Note [numpy scalars] (builder.rs): the op gets the Python number.
                    b = b.call_method0("item")?;
                }
                let repr = b.repr().map(|r| r.to_string()).unwrap_or_default();
                (Arg::Const(self.intern(b.clone().unbind()), repr), b)
            }
            VT::Tuple(items) | VT::NamedTuple { items, .. } => {
                let (args, fakes) = self.to_args(py, items)?;
                (Arg::Tuple(args), PyTuple::new(py, fakes)?.into_any())
            }
            VT::List(l) => {
                let items = l.borrow().items.clone();
                let (args, fakes) = self.to_args(py, &items)?;
                (Arg::List(args), PyList::new(py, fakes)?.into_any())
            }
            VT::Class(c) | VT::TorchFunction(c) | VT::Builtin(c) => {
                let b = c.bind(py).clone();
                (Arg::Const(self.intern(b.clone().unbind()), qualname(&b)), b)
            }
            other => graph_break!(UnsupportedOpResult, "cannot pass {} to a graph op", other.describe(py)),
        })
    }

    fn to_args<'py>(&mut self, py: Python<'py>, items: &[VT]) -> VResult<(Vec<Arg>, Vec<Bound<'py, PyAny>>)> {
        let mut args = Vec::with_capacity(items.len());
        let mut fakes = Vec::with_capacity(items.len());
        for it in items {
            let (a, f) = self.to_arg(py, it)?;
            args.push(a);
            fakes.push(f);
        }
        Ok((args, fakes))
    }

    /// Runs `f` with the fake mode active.
    /// With symbolic sizes, torch's Python dispatcher is on as well (as torch's Dynamo traces):
    /// ops whose C++ meta kernel would specialize every size (`constant_pad_nd`, `upsample_*`)
    /// then use their Python decompositions, which keep sizes symbolic.
    pub fn with_fake<'py, T>(&self, py: Python<'py>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        let mode = self.fake_mode.bind(py);
        let dispatcher = match self.shape_env {
            Some(_) => Some(py.import("torch._dispatch.python")?.call_method0("enable_python_dispatcher")?),
            None => None,
        };
        if let Some(d) = &dispatcher {
            d.call_method0("__enter__")?;
        }
        mode.call_method0("__enter__")?;
        let res = f();
        mode.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        if let Some(d) = &dispatcher {
            d.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        }
        res
    }

    /// Records `target(*args, **kwargs)` (a call_function node) or, with `method`, the call of
    /// that tensor method on `args[0]`. Returns the result's tracker: tensors become nodes,
    /// tuples of tensors become `getitem` nodes, non-tensor results (sizes, dtypes, ...) are
    /// constants (shapes are static).
    pub fn call(&mut self, py: Python<'_>, target: Option<&Bound<'_, PyAny>>, method: Option<&str>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        crate::symbolic::convert_frame::check_compile_budget(self.shape_env.is_some())?;
        let (arg_list, fakes) = self.to_args(py, args)?;
        let fake_kwargs = PyDict::new(py);
        let mut kw_args = Vec::with_capacity(kwargs.len());
        for (k, v) in kwargs {
            let (a, f) = self.to_arg(py, v)?;
            fake_kwargs.set_item(k, f)?;
            kw_args.push((k.clone(), a));
        }
        let fake_args = PyTuple::new(py, &fakes)?;
        let mutates = match (target, method) {
            (_, Some(m)) => crate::graph::is_inplace_op(m, true),
            (Some(t), None) => crate::graph::is_inplace_op(&qualname_full(t), false),
            _ => false,
        };
        // An in-place write into a tensor whose elements share memory (an expanded view) raises
        // in eager PyTorch ("unsupported operation: more than one element of the written-to
        // tensor refers to a single memory location"), but not on fake tensors. Break, so that
        // the write runs for real, after the graph and the side effects before it.
        let written = if mutates { fakes.first().cloned() } else { fake_kwargs.get_item("out")? };
        if let Some(w) = written.filter(|w| self.is_tensor(py, w)) {
            let overlap: i64 = self.handles.torch.bind(py).call_method1("_debug_has_internal_overlap", (&w,))?.extract()?;
            if overlap == 1 {
                let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
                return Err(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!(
                    "{what} writes into a tensor whose elements overlap in memory (eager raises RuntimeError)"
                )));
            }
            // The same for a written tensor that partly overlaps another operand (`x.t().add_(x)`:
            // "some elements of the input tensor and the written-to tensor refer to a single
            // memory location"): same storage, intersecting element ranges, not the same view.
            // Note [setitem writes a view]: `y[idx] = v` with a basic index (ints, slices, None,
            // Ellipsis) is `y[idx].copy_(v)` (torch/csrc/autograd/python_variable_indexing.cpp,
            // `THPVariable_setitem`), whose overlap check is between that view and `v`: the
            // augmented `y[1:3] += 1` writes back the very view it read (a full overlap, no
            // error), which the whole of `y` would partly overlap.
            let setitem_fn = self.handles.operator.bind(py).getattr("setitem")?;
            let setitem = target.is_some_and(|t| t.is(&setitem_fn));
            let (w, others): (Bound<'_, PyAny>, Vec<Bound<'_, PyAny>>) = match (setitem, fakes.get(1), fakes.get(2)) {
                (true, Some(idx), Some(v)) if basic_index(py, idx)? => {
                    let dest = self.with_fake(py, || w.get_item(idx))?;
                    (dest, vec![v.clone()])
                }
                _ => (w.clone(), fakes.iter().skip(if mutates { 1 } else { 0 }).cloned().collect()),
            };
            for other in &others {
                if self.is_tensor(py, other) && !other.is(&w) && partly_overlaps(&w, other).unwrap_or(true) {
                    let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
                    return Err(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, format!(
                        "{what} writes into a tensor that partly overlaps an operand (eager raises RuntimeError)"
                    )));
                }
            }
        }
        // Matrix products of two different dtypes raise in eager PyTorch ("expected m1 and m2 to
        // have the same dtype", "expected scalar type ...") but not on fake tensors, whose meta
        // functions only promote: the graph would raise at run time, after the trace had
        // decided the side effects around it. Break, so the product runs for real.
        let product = match (target, method) {
            (_, Some(m)) => MATRIX_PRODUCTS.contains(&m),
            (Some(t), None) => MATRIX_PRODUCTS.contains(&qualname_full(t).as_str()),
            _ => false,
        };
        if product && fakes.len() >= 2 && self.is_tensor(py, &fakes[0]) && self.is_tensor(py, &fakes[1]) {
            let (a, b) = (fakes[0].getattr(pyo3::intern!(py, "dtype"))?, fakes[1].getattr(pyo3::intern!(py, "dtype"))?);
            // Under autocast for the operands' device, eager casts both operands first (the
            // fake call below runs under the same autocast state), so mixed dtypes do not raise.
            let device_type = fakes[0].getattr(pyo3::intern!(py, "device"))?.getattr(pyo3::intern!(py, "type"))?;
            let autocast = self.handles.torch.bind(py).call_method1("is_autocast_enabled", (device_type,))?.is_truthy()?;
            if !autocast && !a.eq(&b)? {
                let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
                return Err(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::FakeTensorError, format!(
                    "{what} of {a} and {b} tensors (eager raises RuntimeError; fake tensors do not)"
                )));
            }
        }
        // Note [warnings of traced calls]: a torch call that warns (softmax without `dim`,
        // `torch.tensor(tensor)`) warns here on fake tensors, from dynamo's own frames, and may
        // warn again when the graph runs, from the backend's code. Eager warns once per call at
        // the user's line. So the warnings are caught here and kept with the user's location;
        // the graph then runs with the same warnings caught and issues these at that location
        // (`dynamo.eval_frame._issue_warnings_at`), through the user's filters and registry.
        let catcher = py.import("dynamo.eval_frame")?.getattr("_RecordTraceWarnings")?.call0()?;
        let caught = catcher.call_method0("__enter__")?;
        let result = self.with_fake(py, || match (target, method) {
            (Some(t), _) => t.call(fake_args.clone(), Some(&fake_kwargs)),
            (None, Some(m)) => {
                let recv = fakes[0].clone();
                let rest = PyTuple::new(py, &fakes[1..])?;
                recv.call_method(m, rest, Some(&fake_kwargs))
            }
            _ => unreachable!(),
        });
        catcher.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        self.keep_trace_warnings(py, &caught)?;
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                // Note [interrupts during a conversion] (symbolic/mod.rs).
                crate::symbolic::note_interrupt(py, &e);
                let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
                if let Some(kind) = data_dependent_kind(py, &e) {
                    // Nothing is wrong with the call: fake tensors carry no data, and this op's
                    // output (its shape, or a Python value) is computed from the data.
                    let op = e.value(py).getattr(pyo3::intern!(py, "func")).and_then(|f| f.str()).map(|s| s.to_string()).unwrap_or_default();
                    let detail = match kind {
                        crate::symbolic::graph_break::GraphBreakKind::DataDependentOutputShape => "gives a tensor whose shape depends on the input's data",
                        _ => "gives a Python value computed from the input's data",
                    };
                    return Err(Unsupported::of(kind, format!("{what} {detail} ({op})")));
                }
                // An index out of a static size (`x[10]` of a 4-row tensor): the fake tensor's
                // bounds check is eager's, with eager's IndexError and message, so the trace
                // raises it and a `try` around the subscript takes its handler (Note [errors of
                // folded operations]). With symbolic sizes the check would depend on them.
                let getitem = method == Some("__getitem__") || target.is_some_and(|t| qualname_full(t) == "_operator.getitem");
                if getitem && self.shape_env.is_none() && e.is_instance_of::<pyo3::exceptions::PyIndexError>(py) && e.get_type(py).is(py.get_type::<pyo3::exceptions::PyIndexError>()) {
                    // A fresh IndexError with the message: the fake's carries a traceback
                    // through the fake mode's frames, whose fake tensors live as long as it does
                    // (dropped after the first run, they cleared the real IndexError then:
                    // SystemError "attempted to fetch exception but none was set").
                    let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
                    return Err(Unsupported::raise_new(py, "IndexError", pyo3::types::PyString::new(py, &msg).as_any()));
                }
                return Err(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::FakeTensorError, format!(
                    "{what} failed on fake tensors: {}",
                    e.value(py).repr().map(|r| r.to_string()).unwrap_or_default()
                )));
            }
        };
        // Note [conversions that return their input]: `x.contiguous()` of a contiguous tensor,
        // `x.to(x.dtype)`, `x.float()` of a float tensor, `x.cpu()` on the CPU,
        // `torch.as_tensor(x)`: these return `x` itself in eager (`to_will_alias` in
        // aten/src/ATen/native/TensorConversions.cpp, `contiguous` in TensorProperties.cpp), and
        // code tests it (`y = x.float(); if y is x: y = y.clone()` before an in-place op). Their
        // fake call answers the same way, with the very fake tensor it was given: the result is
        // that input's tracker, and no node is made. (A call that writes, or writes into `out=`
        // or `inplace=True`, also returns its input, but stays a node.)
        let writes = mutates || kwargs.iter().any(|(k, v)| k == "out" || (k == "inplace" && v.as_constant(py).is_some_and(|c| c.is_truthy().unwrap_or(true))));
        // Only the conversions: other calls that return an input (`F.hardswish(x, True)`,
        // in place through a positional flag) must stay nodes.
        let conversion = match (target, method) {
            (_, Some(m)) => ALIASING_CONVERSIONS.contains(&m),
            (Some(t), None) => matches!(qualname_full(t).as_str(), "torch.as_tensor" | "torch.asarray" | "torch.Tensor.contiguous" | "torch.Tensor.to" | "torch.Tensor.float" | "torch.Tensor.type_as"),
            _ => false,
        };
        if conversion && !writes && self.is_tensor(py, &result) {
            for a in args.iter().chain(kwargs.iter().map(|(_, v)| v)) {
                if let VT::Tensor(t) = a {
                    if t.fake.bind(py).is(&result) {
                        return Ok(a.clone());
                    }
                }
            }
        }
        let symbolic = self.shape_env.is_some() && contains_sym(&result);
        // Note [values computed from fake tensors]: a call given a fake tensor that answers with
        // something else than a tensor answers from the fake: right for static metadata (sizes,
        // strides, dtype, device, flags), wrong for anything that reads the values or the object
        // (`'%s' % y` and `y.__repr__()` give 'FakeTensor(...)', an iterator hands fakes out,
        // `__reduce_ex__` names FakeTensor's rebuild). Only metadata-typed answers are kept;
        // the others run as ordinary Python.
        // Ints that read the object or its values are not metadata either (`y.__hash__()` is
        // the fake's id).
        let reads_object = matches!(method, Some("__hash__" | "data_ptr" | "__int__" | "__index__" | "__float__" | "__bool__" | "__complex__" | "item" | "tolist"))
            || target.is_some_and(|t| matches!(qualname(t).as_str(), "hash" | "id"));
        if !self.contains_tensor(py, &result) && !symbolic && fakes.iter().any(|f| self.is_tensor(py, f)) && (reads_object || !is_metadata_value(py, &result, method)) {
            let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
            crate::graph_break!(UntracedValue, "{what} gives a {} computed from a tensor", crate::symbolic::variables::type_name(&result));
        }
        // Note [calls made for their effects]: a call given tensors that answers None
        // (`torch.distributed.all_reduce(t)`, `nn.utils.vector_to_parameters(v, params)`,
        // `torch.autograd.graph.increment_version(t)`, `torch.testing.assert_close(a, b)`) is
        // made for what it does to its arguments or to the world, which its fake call does
        // not show: folded to its None, its effect was lost (an unreduced metric, parameters
        // never written, an assertion never checked). It runs for real at a break instead.
        if result.is_none() && !mutates && !symbolic && fakes.iter().any(|f| self.contains_tensor(py, f)) {
            let what = method.map(|m| format!("Tensor.{m}")).unwrap_or_else(|| qualname(target.unwrap()));
            crate::graph_break!(SideEffect, "{what} answers None for tensor arguments: it runs for its effects, which the trace does not model");
        }
        if !self.contains_tensor(py, &result) && !mutates && !symbolic {
            // Static metadata (x.dim(), x.size(), x.is_contiguous()) or a pure function of
            // constants; a query of global state is guarded on its answer.
            if let Some(t) = target {
                if fakes.iter().all(|f| !self.is_tensor(py, f)) && is_global_state_query(t) {
                    if !(result.is_none() || crate::symbolic::builder::is_literal(py, &result) || result.get_type().is(self.handles.torch.bind(py).getattr("dtype")?)) {
                        crate::graph_break!(UntracedValue, "{}() gives a {} (only literal answers of global state queries are guarded)", qualname(t), crate::symbolic::variables::type_name(&result));
                    }
                    if !fake_kwargs.is_empty() {
                        crate::graph_break!(UntracedValue, "{}() with keyword arguments reads global state", qualname(t));
                    }
                    // A query that warns (a deprecated one) is guarded through
                    // `_polyfills.quiet_query`: the guard's call would show the warning again.
                    let polyfills = py.import("dynamo._polyfills")?;
                    let call: Vec<Bound<'_, PyAny>> = std::iter::once(t.clone()).chain(fake_args.iter()).collect();
                    let (func, args) = if polyfills.getattr("warns")?.call1(PyTuple::new(py, &call)?)?.is_truthy()? {
                        (polyfills.getattr("quiet_query")?, PyTuple::new(py, &call)?)
                    } else {
                        (t.clone(), fake_args.clone())
                    };
                    self.add_guard(None, GuardKind::GlobalQuery { func: func.unbind(), args: args.unbind(), expected: result.clone().unbind() });
                }
            }
            return Ok(VT::constant(result.unbind()));
        }
        // A torch function called without tensor arguments that makes tensors (a factory:
        // `torch.ones(2)`, `torch.arange(n)`) puts them on the default device
        // (`torch.set_default_device`, `with torch.device(...)`): the graph is guarded on it.
        if target.is_some() && !self.default_device_guarded && fakes.iter().all(|f| !self.is_tensor(py, f)) {
            let get = self.handles.torch.bind(py).getattr("get_default_device")?;
            let now = get.call0()?;
            self.default_device_guarded = true;
            self.add_guard(None, GuardKind::GlobalQuery { func: get.unbind(), args: PyTuple::empty(py).unbind(), expected: now.unbind() });
        }
        let (op, base) = match (target, method) {
            (Some(t), _) => {
                let name = qualname_full(t);
                let base = name.rsplit('.').next().unwrap_or("call").to_string();
                (Op::CallFunction { target: self.intern(t.clone().unbind()), name }, base)
            }
            (None, Some(m)) => (Op::CallMethod { method: m.to_string() }, m.to_string()),
            _ => unreachable!(),
        };
        if symbolic && !self.contains_tensor(py, &result) && !mutates {
            return self.sym_result(py, op, &base, arg_list, kw_args, &result);
        }
        let name = self.fresh_name(&base);
        if !self.contains_tensor(py, &result) {
            // A mutation whose result is not a tensor (`x[i] = v`): keep the node for its effect.
            self.graph.add(name, op, arg_list, kw_args, None);
            return Ok(VT::constant(result.unbind()));
        }
        if self.is_tensor(py, &result) {
            let meta = tensor_meta(&result)?;
            let node = self.graph.add(name, op, arg_list, kw_args, Some(meta));
            self.fakes.insert(node, result.clone().unbind());
            // An in-place op returns its written argument itself (`x.add_(1) is x`, `x += 1`
            // keeps `x`'s identity, `out=` returns `out`): the caller sees that tracker, so
            // identity and later reads agree with eager. The node stays for its effect.
            // `F.relu(x, inplace=True)` returns `x` too.
            let written = if mutates { args.first() } else { kwargs.iter().find(|(k, _)| k == "out").map(|(_, v)| v) };
            // Any other call that answers with one of its inputs (an in-place flag passed by
            // position, `F.hardswish(x, True)`; `F.dropout(x, training=False)`) returns it too.
            let written = written.or_else(|| args.iter().chain(kwargs.iter().map(|(_, v)| v)).find(|a| matches!(a, VT::Tensor(t) if t.fake.bind(py).is(&result))));
            if let Some(VT::Tensor(w)) = written {
                if w.fake.bind(py).is(&result) {
                    return Ok(VT::Tensor(w.clone()));
                }
            }
            return Ok(VT::Tensor(Rc::new(TensorVariable { node, fake: result.unbind(), source: None, weakly_referenced: false })));
        }
        if let Ok(t) = result.cast::<PyTuple>() {
            let node = self.graph.add(name, op, arg_list, kw_args, None);
            // A multi-output `out=` (`torch.sort(x, out=(v, i))`, `frexp`, `max(dim)`) returns
            // the `out` tensors themselves: their trackers, so `vals is v` holds (audit 50, K13).
            let outs: Vec<Rc<TensorVariable>> = match kwargs.iter().find(|(k, _)| k == "out").map(|(_, v)| v) {
                Some(VT::Tuple(items)) => items.iter().filter_map(|v| if let VT::Tensor(t) = v { Some(t.clone()) } else { None }).collect(),
                Some(VT::List(l)) => l.borrow().items.iter().filter_map(|v| if let VT::Tensor(t) = v { Some(t.clone()) } else { None }).collect(),
                _ => vec![],
            };
            let mut items = Vec::with_capacity(t.len());
            for (i, item) in t.iter().enumerate() {
                if let Some(w) = outs.iter().find(|w| w.fake.bind(py).is(&item)) {
                    items.push(VT::Tensor(w.clone()));
                    continue;
                }
                if self.is_tensor(py, &item) {
                    let meta = tensor_meta(&item)?;
                    let idx = (i as i64).into_pyobject(py)?.into_any().unbind();
                    let getitem = self.handles.getitem.clone_ref(py);
                    let target = self.intern(getitem);
                    let idx_ref = self.intern(idx);
                    let nm = self.fresh_name("getitem");
                    let n = self.graph.add(
                        nm,
                        Op::CallFunction { target, name: "operator.getitem".into() },
                        vec![Arg::Node(node), Arg::Const(idx_ref, i.to_string())],
                        vec![],
                        Some(meta),
                    );
                    self.fakes.insert(n, item.clone().unbind());
                    items.push(VT::Tensor(Rc::new(TensorVariable { node: n, fake: item.unbind(), source: None, weakly_referenced: false })));
                } else if !self.contains_tensor(py, &item) {
                    items.push(VT::constant(item.unbind()));
                } else {
                    graph_break!(UnsupportedOpResult, "nested tensor containers in op results");
                }
            }
            // `torch.return_types.*` (max(dim), sort, topk, ...) keep their type.
            let ty = result.get_type();
            if !ty.is(py.get_type::<PyTuple>()) {
                if !crate::symbolic::variables::is_named_tuple_class(py, ty.as_any())? {
                    graph_break!(UnsupportedOpResult, "op result of type {}", qualname(ty.as_any()));
                }
                return Ok(VT::NamedTuple { cls: Rc::new(ty.into_any().unbind()), items: Rc::new(items) });
            }
            return Ok(VT::Tuple(Rc::new(items)));
        }
        // An in-place foreach op (`torch._foreach_add_(xs, 1)`) returns the very list it wrote
        // (`r is xs` in eager): the caller's list tracker, identity kept; the node stays for
        // its effect.
        if mutates && result.is_instance_of::<PyList>() {
            if let (Some(first), Some(written @ VT::List(_))) = (fakes.first(), args.first()) {
                if result.is(first) {
                    self.graph.add(name, op, arg_list, kw_args, None);
                    return Ok(written.clone());
                }
            }
        }
        graph_break!(UnsupportedOpResult, "op result of type {} holds tensors", crate::symbolic::variables::type_name(&result))
    }

    /// The tracker of a non-tensor result holding symbolic numbers (`x.size()`, `x.size(0)`,
    /// `s * 2`, `x.numel()`): a node for the call, `getitem` nodes for the symbolic items of a
    /// tuple or `torch.Size`; numbers known to be constant stay constants.
    fn sym_result(&mut self, py: Python<'_>, op: Op, base: &str, args: Vec<Arg>, kwargs: Vec<(String, Arg)>, result: &Bound<'_, PyAny>) -> VResult<VT> {
        let shapes = py.import("dynamo._shapes")?;
        // The operands' example values: a result computed from a float input is never folded
        // (Note [float inputs]).
        // Float constants too (Note [float constants with symbolic ints] in
        // `variables/tensor.rs`).
        fn collect(a: &Arg, fakes: &HashMap<NodeId, Py<PyAny>>, objects: &[Py<PyAny>], py: Python<'_>, out: &mut Vec<Py<PyAny>>) {
            match a {
                Arg::Node(n) => out.extend(fakes.get(n).map(|f| f.clone_ref(py))),
                Arg::Tuple(items) | Arg::List(items) => items.iter().for_each(|i| collect(i, fakes, objects, py, out)),
                Arg::Const(r, _) => out.extend(objects.get(r.0 as usize).filter(|o| o.bind(py).is_exact_instance_of::<pyo3::types::PyFloat>()).map(|o| o.clone_ref(py))),
            }
        }
        let mut operand_fakes = Vec::new();
        args.iter().chain(kwargs.iter().map(|(_, a)| a)).for_each(|a| collect(a, &self.fakes, &self.objects, py, &mut operand_fakes));
        let operands = PyTuple::new(py, operand_fakes)?;
        let constant = |v: &Bound<'_, PyAny>| -> PyResult<Option<Py<PyAny>>> {
            if !crate::symbolic::variables::is_sym(v) {
                return Ok(Some(v.clone().unbind()));
            }
            let c = shapes.call_method1("sym_constant", (v, &operands))?;
            Ok((!c.is_none()).then(|| c.unbind()))
        };
        // A slice with symbolic bounds (`x[:n]`): a graph value, indexing tensors only.
        let is_slice = result.is_instance_of::<pyo3::types::PySlice>();
        if crate::symbolic::variables::is_sym(result) || is_slice {
            if let Some(c) = if is_slice { None } else { constant(result)? } {
                return Ok(VT::constant(c));
            }
            let name = self.fresh_name(base);
            let node = self.graph.add(name, op, args, kwargs, None);
            self.sym_nodes.insert(node);
            self.fakes.insert(node, result.clone().unbind());
            return Ok(VT::SymNum(Rc::new(crate::symbolic::variables::SymNodeVariable { node, fake: result.clone().unbind(), source: None })));
        }
        let Ok(t) = result.cast::<PyTuple>() else {
            graph_break!(UnsupportedOpResult, "symbolic result of type {}", type_name(result));
        };
        let name = self.fresh_name(base);
        let node = self.graph.add(name, op, args, kwargs, None);
        self.sym_nodes.insert(node);
        let mut items = Vec::with_capacity(t.len());
        for (i, item) in t.iter().enumerate() {
            if let Some(c) = constant(&item)? {
                items.push(VT::constant(c));
                continue;
            }
            if !crate::symbolic::variables::is_sym(&item) {
                graph_break!(UnsupportedOpResult, "symbolic result holding {}", type_name(&item));
            }
            let getitem = self.handles.getitem.clone_ref(py);
            let target = self.intern(getitem);
            let idx_ref = self.intern((i as i64).into_pyobject(py)?.into_any().unbind());
            let nm = self.fresh_name("getitem");
            let n = self.graph.add(nm, Op::CallFunction { target, name: "operator.getitem".into() }, vec![Arg::Node(node), Arg::Const(idx_ref, i.to_string())], vec![], None);
            self.sym_nodes.insert(n);
            self.fakes.insert(n, item.clone().unbind());
            items.push(VT::SymNum(Rc::new(crate::symbolic::variables::SymNodeVariable { node: n, fake: item.unbind(), source: None })));
        }
        let ty = result.get_type();
        if ty.is(py.get_type::<PyTuple>()) {
            return Ok(VT::Tuple(Rc::new(items)));
        }
        if ty.is(self.handles.size_type.bind(py)) {
            return Ok(VT::NamedTuple { cls: Rc::new(ty.into_any().unbind()), items: Rc::new(items) });
        }
        graph_break!(UnsupportedOpResult, "symbolic result of type {}", qualname(ty.as_any()))
    }

    /// Drops the symbolic-number nodes and the speculated nodes nothing uses (Note [symbolic
    /// sizes], Note [custom autograd.Function]); call once the graph's outputs are set, before
    /// export.
    pub fn remove_unused_sym_nodes(&mut self) {
        if self.sym_nodes.is_empty() && self.speculated_nodes.is_empty() {
            return;
        }
        let sym_nodes = std::mem::take(&mut self.sym_nodes);
        let speculated = std::mem::take(&mut self.speculated_nodes);
        let map = self.graph.remove_unused(|n| sym_nodes.contains(&n.id) || speculated.contains(&n.id));
        self.renumber_node_tables(&map);
    }

    /// After nodes were removed from the graph (`map`: each old node's new id, `None` when
    /// removed), the tables keyed by node follow: fakes, tensor subclasses, tensor attributes.
    fn renumber_node_tables(&mut self, map: &[Option<NodeId>]) {
        fn renumber<V>(table: &mut HashMap<NodeId, V>, map: &[Option<NodeId>]) {
            *table = std::mem::take(table).into_iter().filter_map(|(k, v)| map[k.0 as usize].map(|n| (n, v))).collect();
        }
        renumber(&mut self.fakes, map);
        renumber(&mut self.tensor_subclasses, map);
        renumber(&mut self.tensor_attrs, map);
    }

    /// Note [unused tensor inputs]: a tensor the frame holds when the trace starts (a resume
    /// function's live local, the previous iteration's `loss`) is a placeholder from its first
    /// read, also when the graph then never uses it. torch's dynamo drops such graph arguments
    /// (`remove_unused_graphargs`), and so must we: an AOT graph's `autograd.Function` takes
    /// every input that requires grad as an edge, so the next backward walked into the old
    /// autograd graph behind it ("Trying to backward through the graph a second time" at the
    /// second batch of a training loop that returns its loss; hooks called and custom backwards
    /// run with zeros there; every iteration's graph kept alive). Static plain tensors only: a
    /// tensor with symbolic sizes binds their symbols, and subclass inputs are positions the
    /// compiled callable's wrapper knows. Their guards stay.
    pub fn remove_unused_tensor_inputs(&mut self, py: Python<'_>) {
        let mut droppable = std::collections::HashSet::new();
        let mut position = 0;
        for n in &self.graph.nodes {
            if !matches!(n.op, Op::Placeholder { .. }) {
                continue;
            }
            let plain_static = self.inputs.get(position).is_some_and(|(src, v)| {
                let v = v.bind(py);
                (v.get_type().is(self.handles.tensor_type.bind(py)) || v.get_type().is(self.handles.parameter_type.bind(py)))
                    && !self.dynamic_inputs.iter().any(|d| Arc::ptr_eq(d, src))
                    && self.dim_state.get(&src.to_string()).is_none_or(|dims| dims.iter().all(Option::is_some))
            });
            if plain_static && !self.tensor_subclasses.contains_key(&n.id) {
                droppable.insert(n.id);
            }
            position += 1;
        }
        if droppable.is_empty() {
            return;
        }
        let placeholders: Vec<NodeId> = self.graph.placeholders().map(|n| n.id).collect();
        let map = self.graph.remove_unused_placeholders(|n| droppable.contains(&n.id));
        if placeholders.iter().all(|p| map[p.0 as usize].is_some()) {
            return;
        }
        let inputs = std::mem::take(&mut self.inputs);
        self.inputs = inputs.into_iter().zip(&placeholders).filter(|(_, p)| map[p.0 as usize].is_some()).map(|(i, _)| i).collect();
        self.renumber_node_tables(&map);
        // Node numbers in `input_by_ptr` may already be stale (`remove_unused_sym_nodes` ran
        // before without renumbering it; nothing reads the table once the graph is final): an
        // index past the graph's end panicked here (HF `generate`'s resume functions).
        self.input_by_ptr.retain(|_, tv| map.get(tv.node.0 as usize).is_some_and(Option::is_some));
    }

    /// Records `target(*args)` for its effect on global state (its result is not a tensor),
    /// e.g. `torch._C._set_grad_enabled(False)` so that the graph reproduces a grad-mode switch.
    pub fn record_effect(&mut self, py: Python<'_>, target: &Bound<'_, PyAny>, args: &[VT]) -> VResult<()> {
        let (arg_list, _) = self.to_args(py, args)?;
        let name = qualname_full(target);
        let base = name.rsplit('.').next().unwrap_or("call").to_string();
        let node_name = self.fresh_name(&base);
        let op = Op::CallFunction { target: self.intern(target.clone().unbind()), name };
        self.graph.add(node_name, op, arg_list, vec![], None);
        Ok(())
    }

    pub fn is_tensor(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
        // By type: isinstance() would read `__class__` through a user `__getattribute__`.
        v.get_type().is_subclass(self.handles.tensor_type.bind(py)).unwrap_or(false)
    }

    fn contains_tensor(&self, py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
        if self.is_tensor(py, v) {
            return true;
        }
        if let Ok(t) = v.cast::<PyTuple>() {
            return t.iter().any(|i| self.contains_tensor(py, &i));
        }
        if let Ok(l) = v.cast::<PyList>() {
            return l.iter().any(|i| self.contains_tensor(py, &i));
        }
        false
    }

    // Note [warnings raised while a graph runs]: Note [warnings of traced calls] covers the
    // warnings a torch call gives on fake tensors. A warning only the real kernel gives (one
    // that reads the data or the memory layout of real tensors: `torch.searchsorted` with a
    // non-contiguous `values`, "input value tensor is non-contiguous") is not seen at trace
    // time, so its graph is not wrapped, and C++'s `TORCH_WARN` names the innermost Python
    // frame: eager names the user's line; the `eager` backend names the fx code
    // (`<eval_with_key>.0`, line 9); our own kernels, run from Rust, name the transformed
    // frame at the graph's call, whose line is the function's `def` line (measured on
    // `def a(x): y = x + 1; return torch.searchsorted(torch.arange(10.0), y.t())`).
    // Finding (not fixed): wrapping every graph in `_RecordWarnings` to re-issue at the node's
    // user line costs about 0.6 us per call on a 2.7 us cache hit (`bench_slice.py --only a`),
    // and changes what an "error" filter sees, so it was not done. Designs that cost nothing
    // when no warning is raised: for fx-backed graphs, give the GraphModule's forward code the
    // user's `co_filename` and a line table mapping each node's statement to its user line
    // (`node.meta` already knows the instruction), so a warning with stacklevel 1 names the
    // user's line (its registry stays the fx module's globals); for our kernels, set the
    // line of the instruction that calls the graph to the line of the graph's only node that
    // may warn at run time (fallback kernels), exact when there is at most one.
    // A second finding (not fixed): a warning a torch call gives at trace time from a Python
    // frame of torch's own (`torch.stft` without a window warns from `torch/functional.py`'s
    // call of `_VF.stft`, line 680 in torch 2.15) is named there eagerly, but this note's
    // machinery issues it at the user's line.

    /// `fake.<name>` of a tensor attribute read while tracing (`x.T`, `x.mT`), with the
    /// warnings it gives kept as a traced call's are (Note [warnings of traced calls]): a
    /// `TORCH_WARN_ONCE` fires on this first read, which must not reach the user from the
    /// tracer's frames. Returns the value and how many warnings were kept.
    pub fn fake_getattr<'py>(&mut self, py: Python<'py>, fake: &Bound<'py, PyAny>, name: &str) -> PyResult<(Bound<'py, PyAny>, usize)> {
        let catcher = py.import("dynamo.eval_frame")?.getattr("_RecordTraceWarnings")?.call0()?;
        let caught = catcher.call_method0("__enter__")?;
        let v = fake.getattr(name);
        catcher.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        let before = self.trace_warnings.len();
        self.keep_trace_warnings(py, &caught)?;
        Ok((v?, self.trace_warnings.len() - before))
    }

    /// Keeps the warnings `caught` (a `_RecordWarnings` list) that a call made while tracing, to
    /// be issued at the user's current line when the graph runs (Note [warnings of traced
    /// calls]).
    pub fn keep_trace_warnings(&mut self, py: Python<'_>, caught: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Some((code, ip, globals)) = &self.user_loc {
            let line = code.line_of(*ip);
            for w in caught.try_iter()? {
                let w = w?;
                self.trace_warnings.push((w.getattr("message")?.unbind(), w.getattr("category")?.unbind(), code.filename.clone(), line, globals.clone_ref(py)));
            }
        }
        Ok(())
    }

    /// Exports the graph as a `torch.fx.GraphModule` whose nodes carry `meta["example_value"]`.
    pub fn to_fx<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let fx = py.import("torch.fx")?;
        let g = fx.getattr("Graph")?.call0()?;
        // Note [constants fx cannot write] (src/autograd/export.rs): a constant torch.fx would
        // write as its repr is read from an attribute of the root instead.
        let root = py.import("torch.nn")?.getattr("Module")?.call0()?;
        let gr = (g.clone(), root.clone());
        let mut fx_nodes: Vec<Bound<'py, PyAny>> = Vec::with_capacity(self.graph.nodes.len());
        for n in &self.graph.nodes {
            let node = match &n.op {
                Op::Placeholder { .. } => g.call_method1("placeholder", (&n.name,))?,
                Op::CallFunction { target, .. } => {
                    let args = self.args_to_py(py, &n.args, &fx_nodes, &gr)?;
                    let kwargs = self.kwargs_to_py(py, &n.kwargs, &fx_nodes, &gr)?;
                    let target = self.objects[target.0 as usize].bind(py);
                    let (target, args) = negative_pow_base(py, &g, target, args)?;
                    g.call_method1("call_function", (target, args, kwargs))?
                }
                Op::CallMethod { method } => {
                    let args = self.args_to_py(py, &n.args, &fx_nodes, &gr)?;
                    let kwargs = self.kwargs_to_py(py, &n.kwargs, &fx_nodes, &gr)?;
                    g.call_method1("call_method", (method, args, kwargs))?
                }
            };
            if !matches!(n.op, Op::Placeholder { .. }) {
                node.setattr("name", &n.name).ok();
            }
            if let Some(f) = self.fakes.get(&n.id) {
                node.getattr("meta")?.set_item("example_value", f.bind(py))?;
            }
            if n.recompute {
                node.getattr("meta")?.set_item("recompute", true)?;
            }
            fx_nodes.push(node);
        }
        let outs = self.args_to_py(py, &self.graph.outputs, &fx_nodes, &gr)?;
        g.call_method1("output", (outs,))?;
        // Note [lazy graph modules]: the code is written when the backend first needs it.
        crate::autograd::export::graph_module_class(py)?.call1((root, g))
    }

    /// `gr`: the fx graph being built and its root module (Note [constants fx cannot write]).
    fn args_to_py<'py>(&self, py: Python<'py>, args: &[Arg], nodes: &[Bound<'py, PyAny>], gr: &(Bound<'py, PyAny>, Bound<'py, PyAny>)) -> PyResult<Bound<'py, PyTuple>> {
        let items: PyResult<Vec<_>> = args.iter().map(|a| self.arg_to_py(py, a, nodes, gr)).collect();
        PyTuple::new(py, items?)
    }

    fn kwargs_to_py<'py>(&self, py: Python<'py>, kwargs: &[(String, Arg)], nodes: &[Bound<'py, PyAny>], gr: &(Bound<'py, PyAny>, Bound<'py, PyAny>)) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in kwargs {
            d.set_item(k, self.arg_to_py(py, v, nodes, gr)?)?;
        }
        Ok(d)
    }

    fn arg_to_py<'py>(&self, py: Python<'py>, a: &Arg, nodes: &[Bound<'py, PyAny>], gr: &(Bound<'py, PyAny>, Bound<'py, PyAny>)) -> PyResult<Bound<'py, PyAny>> {
        Ok(match a {
            Arg::Node(n) => nodes[n.0 as usize].clone(),
            Arg::Const(r, _) => crate::autograd::export::fx_constant(&gr.0, &gr.1, python_type_as_dtype(py, self.objects[r.0 as usize].bind(py))?)?,
            Arg::Tuple(items) => self.args_to_py(py, items, nodes, gr)?.into_any(),
            Arg::List(items) => PyList::new(py, self.args_to_py(py, items, nodes, gr)?)?.into_any(),
        })
    }
}

/// Note [Python types as dtypes]: torch takes the Python types `int`, `float`, `bool` and
/// `complex` wherever it takes a dtype (`x.to(int)`, `torch.zeros(2, dtype=float)`; the argument
/// parser maps them to int64, float64, bool and complex128: torch/csrc/utils/python_arg_parser.cpp,
/// `THPDtype`/`PyObject_IsType` of the builtin types), and no other argument of a torch function
/// takes a type. fx prints a type argument as its repr (`<class 'int'>`), which is not Python: the
/// graph module would not compile. The export writes the dtype they stand for instead; any other
/// object is passed as it is.
/// Note [negative powers bases in fx code]: torch.fx prints `operator.pow(-2.0, x)` as
/// `-2.0 ** x`, which Python reads as `-(2.0 ** x)`: a graph run through its generated code
/// (the eager backend, any backend calling `gm.forward`) computed `(-1) ** x` as -1 everywhere.
/// A pow whose base is a negative number (or -0.0, -inf) is exported as `torch.pow(base, x)`
/// when `x` is a tensor (what `Tensor.__rpow__` calls), and otherwise with the base made by a
/// node of its own (`neg = -2; pow_1 = neg ** n`).
fn negative_pow_base<'py>(py: Python<'py>, g: &Bound<'py, PyAny>, target: &Bound<'py, PyAny>, args: Bound<'py, PyTuple>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let operator = py.import("operator")?;
    if args.len() != 2 || !target.is(&operator.getattr("pow")?) {
        return Ok((target.clone(), args));
    }
    let base = args.get_item(0)?;
    let negative = if base.is_instance_of::<pyo3::types::PyBool>() {
        false
    } else if base.is_instance_of::<pyo3::types::PyFloat>() {
        base.extract::<f64>()?.is_sign_negative()
    } else if base.is_instance_of::<pyo3::types::PyInt>() {
        base.lt(0)?
    } else {
        false
    };
    if !negative {
        return Ok((target.clone(), args));
    }
    let exponent = args.get_item(1)?;
    let tensor_exponent = exponent
        .getattr("meta")
        .and_then(|m| m.call_method1("get", ("example_value",)))
        .and_then(|v| v.is_instance(&py.import("torch")?.getattr("Tensor")?))
        .unwrap_or(false);
    if tensor_exponent {
        return Ok((py.import("torch")?.getattr("pow")?, args));
    }
    let magnitude = operator.getattr("neg")?.call1((&base,))?;
    let neg = g.call_method1("call_function", (operator.getattr("neg")?, (magnitude,)))?;
    neg.getattr("meta")?.set_item("example_value", &base)?;
    Ok((target.clone(), PyTuple::new(py, [neg, exponent])?))
}

fn python_type_as_dtype<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let Ok(ty) = obj.cast::<pyo3::types::PyType>() else { return Ok(obj.clone()) };
    let name = if ty.is(py.get_type::<pyo3::types::PyBool>()) {
        "bool"
    } else if ty.is(py.get_type::<pyo3::types::PyInt>()) {
        "int64"
    } else if ty.is(py.get_type::<pyo3::types::PyFloat>()) {
        "float64"
    } else if ty.is(py.get_type::<pyo3::types::PyComplex>()) {
        "complex128"
    } else {
        return Ok(obj.clone());
    };
    py.import("torch")?.getattr(name)
}

/// `module.qualname` of a callable, for node names and dumps.
/// Matrix products whose operands must share a dtype in eager PyTorch (ATen's `mm`/`bmm`/`mv`/
/// `dot` checks; `linear` goes through `addmm`), as methods and as `qualname_full` names.
const MATRIX_PRODUCTS: &[&str] = &[
    "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "dot",
    "torch.matmul", "torch.mm", "torch.bmm", "torch.mv", "torch.dot", "_operator.matmul", "operator.matmul",
    "torch._C._nn.linear", "torch.nn.functional.linear",
];

pub fn qualname_full(t: &Bound<'_, PyAny>) -> String {
    let module = t.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    let q = if type_name(t) == "builtin_function_or_method" {
        t.getattr("__name__").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_else(|| qualname(t))
    } else {
        qualname(t)
    };
    if module.is_empty() || module == "builtins" {
        q
    } else {
        format!("{module}.{q}")
    }
}

/// torch's placeholder naming: `L['self'].fc.weight` -> `L_self_fc_weight`.
fn placeholder_name(source: &Source) -> String {
    let s = source.to_string();
    let mut out = String::new();
    let mut last_us = false;
    for c in s.chars() {
        if c.is_alphanumeric() {
            out.push(c);
            last_us = false;
        } else if !last_us {
            out.push('_');
            last_us = true;
        }
    }
    out.trim_end_matches('_').to_string()
}

/// Whether `v` is, or is a tuple/list holding, a `torch.SymInt`/`SymFloat`/`SymBool`.
fn contains_sym(v: &Bound<'_, PyAny>) -> bool {
    if crate::symbolic::variables::is_sym(v) {
        return true;
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t.iter().any(|i| contains_sym(&i));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return l.iter().any(|i| contains_sym(&i));
    }
    if let Ok(s) = v.cast::<pyo3::types::PySlice>() {
        return ["start", "stop", "step"].iter().any(|a| s.getattr(*a).map(|b| contains_sym(&b)).unwrap_or(false));
    }
    false
}

/// Note [global state queries]: a torch function whose name asks for global state
/// (`get_*`, `is_*`, `are_*`, `_get_*`, `_is_*`: `torch.is_autocast_enabled`,
/// `torch._C._get_deterministic_algorithms`, `torch.get_num_threads`,
/// `torch.get_float32_matmul_precision`, `torch.is_anomaly_enabled`, ...; a Python one such as
/// `torch.are_deterministic_algorithms_enabled` is called whole, as torch functions are), called
/// on constants only, is folded into its answer and guarded on it (GLOBAL_STATE, torch's global-state guard),
/// so the guard costs only in frames that ask. A pure function of its constant arguments passes
/// the guard every time. A query that warns when called (a deprecated one) is guarded through
/// `dynamo._polyfills.quiet_query`, so the guard does not show its warning a second time. Grad mode and inference mode are modelled by the trace itself (the
/// trace switches the real mode, `set_grad_enabled` and `enter_inference_mode` in
/// variables/ctx_manager.rs) and guarded at frame entry, so their queries are left out.
fn is_global_state_query(t: &Bound<'_, PyAny>) -> bool {
    if !matches!(crate::symbolic::variables::type_name(t).as_str(), "builtin_function_or_method" | "function") {
        return false;
    }
    let Ok(name) = t.getattr("__name__").and_then(|n| n.extract::<String>()) else { return false };
    let module = t.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    let torch_owned = module.is_empty() || module == "torch" || module.starts_with("torch.");
    let asks = ["get_", "is_", "are_", "_get_", "_is_", "_are_"].iter().any(|p| name.starts_with(p));
    torch_owned && asks && !matches!(name.as_str(), "is_grad_enabled" | "_is_grad_enabled" | "is_inference_mode_enabled" | "_is_inference_mode_enabled" | "get_default_dtype")
}

/// The example values of a (fake) tensor's sizes and strides, without guarding on symbolic
/// ones (a `SymInt`'s hint; `int()` on it would specialize it).
fn size_hints(t: &Bound<'_, PyAny>) -> PyResult<(Vec<i64>, Vec<i64>)> {
    let sizes = t.call_method0("size")?;
    if !contains_sym(&sizes) && !contains_sym(&t.call_method0("stride")?) {
        return Ok((sizes.extract()?, t.call_method0("stride")?.extract()?));
    }
    t.py().import("dynamo._shapes")?.call_method1("size_hints", (t,))?.extract()
}

/// Static metadata of a (fake) tensor (example values for symbolic sizes).
pub fn tensor_meta(t: &Bound<'_, PyAny>) -> PyResult<TensorMeta> {
    let (sizes, strides) = size_hints(t)?;
    Ok(TensorMeta {
        sizes,
        strides,
        dtype: t.getattr("dtype")?.to_string(),
        device: t.getattr("device")?.to_string(),
        requires_grad: t.getattr("requires_grad")?.extract()?,
    })
}

/// Whether some permutation of `t`'s dims is contiguous (c10's `is_non_overlapping_and_dense`):
/// the dims of size above 1, ordered by stride, have strides 1, size0, size0 * size1, ...
fn non_overlapping_and_dense(t: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (sizes, strides) = size_hints(t)?;
    if sizes.iter().product::<i64>() < 2 {
        return Ok(true);
    }
    let mut dims: Vec<(i64, i64)> = sizes.into_iter().zip(strides).filter(|&(size, _)| size != 1).collect();
    dims.sort_by_key(|&(size, stride)| (stride, size));
    let mut expected = 1;
    for (size, stride) in dims {
        if stride != expected {
            return Ok(false);
        }
        expected *= size;
    }
    Ok(true)
}

/// Whether `idx` (a fake index operand of `y[idx] = v`) is a basic index: an int, a slice, None,
/// Ellipsis, or a tuple of those (no tensor, list or bool: those index by copy, `index_put_`).
fn basic_index(py: Python<'_>, idx: &Bound<'_, PyAny>) -> PyResult<bool> {
    let one = |i: &Bound<'_, PyAny>| -> bool {
        i.is_none() || i.is(&py.Ellipsis()) || i.is_instance_of::<pyo3::types::PySlice>() || i.is_exact_instance_of::<pyo3::types::PyInt>() || crate::symbolic::variables::is_sym(i)
    };
    if let Ok(t) = idx.cast::<PyTuple>() {
        return Ok(t.iter().all(|i| one(&i)));
    }
    Ok(one(idx))
}

/// True when tensors `a` and `b` share a storage, are not the same view of it, and their element
/// ranges in it intersect: PyTorch's `MemOverlapStatus::Partial` (aten/src/ATen/MemoryOverlap.cpp,
/// `get_overlap_status`), which eager's copy and in-place ops raise on. As there, only tensors
/// that are both non-overlapping and dense are compared at all: a strided view (`y[:, 0]` of a
/// matrix, which `y[:, 0] += 3` writes back into `y`) is `TooHard`, and eager does not raise.
fn partly_overlaps(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    let key = |t: &Bound<'_, PyAny>| -> PyResult<usize> { t.call_method0("untyped_storage")?.getattr("_cdata")?.extract() };
    if key(a)? != key(b)? {
        return Ok(false);
    }
    if !non_overlapping_and_dense(a)? || !non_overlapping_and_dense(b)? {
        return Ok(false);
    }
    let layout = |t: &Bound<'_, PyAny>| -> PyResult<(i64, Vec<i64>, Vec<i64>)> {
        let off = t.call_method0("storage_offset")?;
        let off = if crate::symbolic::variables::is_sym(&off) { t.py().import("dynamo._shapes")?.call_method1("sym_hint", (off,))?.extract()? } else { off.extract()? };
        let (sizes, strides) = size_hints(t)?;
        Ok((off, sizes, strides))
    };
    let (la, lb) = (layout(a)?, layout(b)?);
    if la == lb {
        return Ok(false);
    }
    let range = |(off, sizes, strides): &(i64, Vec<i64>, Vec<i64>)| -> Option<(i64, i64)> {
        if sizes.contains(&0) {
            return None;
        }
        let extent: i64 = sizes.iter().zip(strides).map(|(s, st)| (s - 1) * st.abs()).sum();
        Some((*off, off + extent))
    };
    Ok(match (range(&la), range(&lb)) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
        _ => false,
    })
}

/// The graph-break kind of a fake-tensor error that only says the op needs real data: a
/// `DynamicOutputShapeException` (`x[mask]`, `nonzero`, `unique`, `masked_select`,
/// `repeat_interleave` with tensor repeats, one-argument `where`: the output's shape is
/// computed from the values) gives `DataDependentOutputShape`; a `DataDependentOutputException`
/// (`torch.equal`: a Python value computed from the values) gives `DataDependentValue`. Other
/// errors (`None`) are `FakeTensorError`.
fn data_dependent_kind(py: Python<'_>, e: &PyErr) -> Option<crate::symbolic::graph_break::GraphBreakKind> {
    use crate::symbolic::graph_break::GraphBreakKind;
    let m = py.import("torch._subclasses.fake_tensor").ok()?;
    let is = |name: &str| m.getattr(name).ok().and_then(|t| t.cast_into::<pyo3::types::PyType>().ok()).is_some_and(|t| e.is_instance(py, &t));
    if is("DynamicOutputShapeException") {
        Some(GraphBreakKind::DataDependentOutputShape)
    } else if is("DataDependentOutputException") {
        Some(GraphBreakKind::DataDependentValue)
    } else {
        None
    }
}

/// Whether `v`, the answer of a call given a fake tensor, is static metadata that the fake
/// answers as the real tensor would (Note [values computed from fake tensors]): `None`, a bool,
/// int or float, a `torch.Size`, dtype, device, layout or memory format, tuples and lists of
/// those, and the string `Tensor.type()` gives (the type's name, e.g. 'torch.FloatTensor').
fn is_metadata_value(py: Python<'_>, v: &Bound<'_, PyAny>, method: Option<&str>) -> bool {
    if v.is_none() || v.is_instance_of::<pyo3::types::PyBool>() || v.is_instance_of::<pyo3::types::PyInt>() || v.is_instance_of::<pyo3::types::PyFloat>() {
        return true;
    }
    if v.is_instance_of::<PyString>() {
        return method == Some("type");
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t.iter().all(|i| is_metadata_value(py, &i, None));
    }
    if let Ok(l) = v.cast::<pyo3::types::PyList>() {
        return l.iter().all(|i| is_metadata_value(py, &i, None));
    }
    matches!(crate::symbolic::variables::type_name(v).as_str(), "dtype" | "device" | "layout" | "memory_format" | "Size" | "finfo" | "iinfo")
}
