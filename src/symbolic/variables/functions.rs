//! Functions: user functions and closures defined in or read by the frame, inlined by a child
//! translator (torch's `UserFunctionVariable`, `NestedUserFunctionVariable`,
//! InliningInstructionTranslator), and `functools.partial` objects.
//!
//! `functools.partial` objects as trackers (torch's `FunctoolsPartialVariable`).
//!
//! A partial is its function, its positional arguments and its keyword dict
//! (Modules/_functoolsmodule.c, `partial_call`: `func(*args, *call_args, **{**keywords,
//! **call_kwargs})`). One built in the frame is flattened as CPython flattens a partial of an
//! exact partial (`partial_new`); one from the frame keeps its real object for identity and is
//! guarded by TYPE_MATCH, with its function, arguments and keywords read through their sources
//! (`p.func`, `p.args`, `p.keywords`), each guarded there. A partial whose instance `__dict__`
//! is not empty stays an opaque object.

use crate::guards::GuardKind;
use crate::source::{ItemKey, Source};
use crate::symbolic::builder::is_literal;
use crate::symbolic::code_info::{code_info, flags, CodeInfo};
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::side_effects::CellTarget;
use crate::symbolic::variables::{type_name, VariableTracker, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::{InstructionTranslator, GlobalsInfo, MAX_INLINE_DEPTH};
use crate::symbolic::variables::lists::make_tuple;
use crate::symbolic::variables::dicts::new_dict;
use crate::symbolic::variables::user_defined::real_object;
use crate::symbolic::variables::iter::{resume_generator, IterKind, GeneratorFrame, IteratorState};

/// A function defined while tracing (MAKE_FUNCTION): code, globals, defaults, closure cells.
pub struct NestedFunction {
    pub code: Py<PyAny>,
    /// The globals of the code that made it (its `__globals__`, with their source and trust):
    /// a call reads these, whoever calls it (Note [globals of functions made in the trace]).
    pub g: Rc<crate::symbolic::translator::GlobalsInfo>,
    pub defaults: Vec<VariableTracker>,
    pub kwdefaults: Vec<(String, VariableTracker)>,
    pub closure: Vec<VariableTracker>,
    pub qualname: String,
    /// MAKE_FUNCTION was given annotations (kept as the `__annotations__` entry of `attrs`).
    pub annotated: bool,
    /// Attributes written in the trace (Note [attributes of functions made in the frame]):
    /// `__name__`, `__qualname__`, `__module__`, `__doc__`, `__annotations__`, and `__dict__`
    /// (a dict tracker holding every other name, `__wrapped__` among them).
    pub attrs: RefCell<Vec<(String, VariableTracker)>>,
}

// Note [attributes of functions made in the frame]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A function made by MAKE_FUNCTION in the trace is private to it, so writing its attributes is
// no side effect: `functools.wraps(f)(inner)` (`update_wrapper`, traced) sets `__module__`,
// `__name__`, `__qualname__`, `__doc__`, `__annotations__` and updates `__dict__`, then sets
// `__wrapped__`. The writes live in `NestedFunction::attrs` as CPython keeps them
// (Objects/funcobject.c): the named slots by name (`__name__`/`__qualname__` only to a str,
// else eager's TypeError is left to Python), any other name in the function's `__dict__`, a
// dict tracker made on first use (as `__annotations__` is, empty, for a function made
// without annotations). Reads see them first. A rebuilt function gets them back through
// `dynamo._polyfills.function_with_attrs` after MAKE_FUNCTION. Writes of `__code__`,
// `__defaults__`, `__kwdefaults__` or `__dict__` itself stay breaks.
impl NestedFunction {
    /// The attribute `name` the trace wrote, if any.
    pub fn attr(&self, name: &str) -> Option<VariableTracker> {
        self.attrs.borrow().iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// Sets the attribute `name` (a named slot or `__dict__`).
    pub fn set_attr(&self, name: &str, v: VariableTracker) {
        let mut attrs = self.attrs.borrow_mut();
        match attrs.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = v,
            None => attrs.push((name.to_string(), v)),
        }
    }

    /// The function's `__dict__` tracker, made empty on first use.
    pub fn dict(&self) -> VariableTracker {
        if let Some(d) = self.attr("__dict__") {
            return d;
        }
        let d = crate::symbolic::variables::dicts::new_dict(vec![]);
        self.set_attr("__dict__", d.clone());
        d
    }
}

/// The tracked state of one `functools.partial`.
pub struct PartialFunction {
    pub func: VT,
    pub args: Vec<VT>,
    /// A dict tracker (or a constant dict): `p.keywords`, read at each call.
    pub keywords: VT,
    /// The real object, for a partial reached from the frame.
    pub obj: Option<Py<PyAny>>,
    pub source: Option<Arc<Source>>,
}

/// `functools.partial`, the type.
pub fn partial_type(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("functools")?.getattr("partial")
}

/// Whether `value` is an exact `functools.partial` with an empty instance dict.
pub fn is_plain_partial(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !value.get_type().is(&partial_type(py)?) {
        return Ok(false);
    }
    let d = value.getattr("__dict__")?;
    Ok(d.len()? == 0)
}

/// Wraps a partial from the frame reached through `source` (see the module doc for guards).
pub fn wrap_partial(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<VT> {
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
    og.add_guard(Some(source.attr("__dict__")), GuardKind::LenMatch(0));
    let func = crate::symbolic::builder::wrap(py, og, &value.getattr("func")?, source.attr("func"))?;
    let args = match crate::symbolic::builder::wrap(py, og, &value.getattr("args")?, source.attr("args"))? {
        VT::Tuple(items) => items.as_ref().clone(),
        VT::Constant(c) => c.bind(py).try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<Vec<_>>>()?,
        other => graph_break!(UntracedValue, "partial args wrapped as {}", other.describe(py)),
    };
    let keywords = crate::symbolic::builder::wrap(py, og, &value.getattr("keywords")?, source.attr("keywords"))?;
    if !matches!(keywords, VT::Dict(_)) {
        graph_break!(UntracedValue, "partial keywords with keys that are not strings");
    }
    Ok(VT::Partial(Rc::new(PartialFunction { func, args, keywords, obj: Some(value.clone().unbind()), source: Some(source) })))
}

/// The (name, value) pairs of a partial's keyword dict, in order.
pub fn keyword_items(py: Python<'_>, keywords: &VT) -> VResult<Vec<(String, VT)>> {
    match keywords {
        VT::Dict(d) => d.borrow().items.iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v.clone()))).collect(),
        VT::Constant(c) => {
            let d = c.bind(py).cast::<PyDict>().map_err(|e| crate::symbolic::Unsupported::new(e.to_string()))?.clone();
            d.iter().map(|(k, v)| Ok((k.extract::<String>()?, VT::constant(v.unbind())))).collect()
        }
        other => graph_break!(UntracedValue, "partial keywords are {}", other.describe(py)),
    }
}

/// `sys.modules[name].__dict__` as the source of a function's globals, where `name` is the
/// globals' own `__name__` and that module's dict is those globals (Note [globals of functions
/// without a source]).
fn module_globals_source(py: Python<'_>, globals: &Bound<'_, PyDict>) -> Option<Arc<Source>> {
    // Note [globals of functions without a source]: a function the trace reaches by a path it
    // cannot repeat (the `__wrapped__` of an lru_cache wrapper, a function kept in a container
    // made in the trace) still reads its own module's globals, and each read needs a guard. A
    // function's `__globals__` is read-only; for a function defined in a module it is the dict
    // of the module its globals name in `__name__` (not `f.__module__`, which
    // `functools.wraps` copies from the wrapped function). `Source::Module` resolves
    // `sys.modules[name]` once, when guards are built, and keeps that module object, so
    // `sys.modules[name].__dict__[k]` reads the same dict the function reads on every later
    // call. torch's inliner reaches other modules' globals the same way (an import source of
    // `f_globals["__name__"]`). Functions made by `exec` into a fresh dict fail the identity
    // test and keep their break.
    let name: String = globals.get_item("__name__").ok()??.extract().ok()?;
    let m = crate::source::imported_module(py, &name)?;
    let d = m.bind(py).getattr("__dict__").ok()?;
    d.is(globals).then(|| Arc::new(Source::Module { name }).attr("__dict__"))
}

impl<'a> InstructionTranslator<'a> {
    /// A call of a `functools.lru_cache` / `functools.cache` wrapper (Note [lru_cache'd calls]).
    pub(crate) fn call_lru_cached(&mut self, py: Python<'_>, wrapper: &Bound<'_, PyAny>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        // Note [lru_cache'd calls]: eager calls the wrapped function on a cache miss only and
        // returns the cached object on a hit. Tracing through `__wrapped__` on every call is
        // exact when nothing can tell the two apart: every argument is a constant, the call
        // adds no graph node and records no write outside the trace (a hit would skip them),
        // and its result is a constant (a hit returns the same object; an immutable literal
        // cannot be told from an equal one). Anything else is a graph break, so the wrapper
        // runs in Python with its cache. The cache's own state (its entries, LRU order and
        // `cache_info()` counts) is eager's too: the wrapper itself is called again after the
        // graph with the same constant arguments (a replayed call, its result dropped), so each
        // run hits or misses where eager would. (torch's tracing ignores the cache instead.) Left
        // different: a body whose value changed while an older one stays cached (it reads a
        // global that was rebound) folds the new value, where eager returns the cached one.
        let name = crate::symbolic::variables::qualname(wrapper);
        let literal_args = args.iter().chain(kwargs.iter().map(|(_, v)| v)).all(|a| matches!(a, VT::Constant(_)));
        let wrapped = wrapper.getattr("__wrapped__").ok().filter(|f| type_name(f) == "function");
        let Some(wrapped) = wrapped.filter(|_| literal_args) else {
            graph_break!(UnsupportedCall, "call of the lru_cache'd function {name} with arguments that are not all constants (the cache would hold them)");
        };
        let nodes = self.og.graph.nodes.len();
        let calls_before = self.og.side_effects.logger_calls.len();
        let writes = (self.og.side_effects.writes, self.og.side_effects.iter_steps());
        let func = VT::Function { obj: Rc::new(wrapped.unbind()), source: None };
        let (args_for_replay, kwargs_for_replay) = (args.clone(), kwargs.clone());
        let r = self.call(py, &func, args, kwargs)?;
        // Calls of other cached functions inside the body are not replayed on their own: the
        // replayed outer call makes them, on a miss only, as eager does. Any other replayed call
        // (a logging call) makes the body impure.
        let inner_calls_cached = self.og.side_effects.logger_calls[calls_before..].iter().all(|c| matches!(c.callee, crate::pycodegen::Callee::Object(_)));
        if inner_calls_cached {
            self.og.side_effects.logger_calls.truncate(calls_before);
        }
        let pure = inner_calls_cached && self.og.graph.nodes.len() == nodes && (self.og.side_effects.writes, self.og.side_effects.iter_steps()) == writes;
        if !pure || !matches!(r, VT::Constant(_)) || !is_literal(py, r.as_constant(py).as_ref().expect("a constant")) {
            graph_break!(UnsupportedCall, "call of the lru_cache'd function {name}: it computes on tensors, writes outside the trace or gives a value that is not a constant, which its cache would make observable");
        }
        let consts = |vs: Vec<&VT>| vs.into_iter().map(|v| v.as_constant(py).expect("a constant")).collect::<Vec<_>>();
        let call_args = pyo3::types::PyTuple::new(py, consts(args_for_replay.iter().collect()))?.into_any().unbind();
        let call_kwargs = if kwargs_for_replay.is_empty() {
            None
        } else {
            let d = pyo3::types::PyDict::new(py);
            for (k, v) in &kwargs_for_replay {
                d.set_item(k, v.as_constant(py).expect("a constant"))?;
            }
            Some(d.into_any().unbind())
        };
        self.og.side_effects.logger_calls.push(crate::symbolic::side_effects::LoggerCall {
            callee: crate::pycodegen::Callee::Object(wrapper.clone().unbind()),
            args: call_args,
            lazy_args: None,
            kwargs: call_kwargs,
            writes_before: self.og.side_effects.writes,
            at: self.og.top_ip,
            reorderable: true,
        });
        Ok(r)
    }

    /// `inspect.signature(f)` of a function or bound method whose function object the trace
    /// pins (an ID or code guard): computed now, on the real function, as a constant. A
    /// `Signature` is immutable (`replace` makes a new one), so a constant is exact; what it
    /// depends on beyond the code (defaults, annotations) is read once, as torch's
    /// `InspectSignatureVariable` does. Tracing inspect's own code instead runs into `id()` and
    /// unwrap loops (transformers' `apply_chunking_to_forward` asks it in every BERT layer).
    /// `None`: not this call, trace it as usual.
    pub(crate) fn inspect_signature(&mut self, py: Python<'_>, f: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        // Checked on every traced call: compare against the function looked up once.
        static SIGNATURE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        let signature = SIGNATURE.get_or_try_init(py, || py.import("inspect")?.getattr("signature").map(Bound::unbind))?.bind(py);
        if !f.is(signature) || args.len() != 1 || !kwargs.is_empty() {
            return Ok(None);
        }
        let target = match &args[0] {
            VT::Function { obj, .. } => obj.bind(py).clone(),
            VT::Method { func, self_ } => {
                let (VT::Function { obj, .. }, Some(this)) = (func.as_ref(), real_object(self_)) else { return Ok(None) };
                py.import("types")?.getattr("MethodType")?.call1((obj.bind(py), this.bind(py)))?
            }
            _ => return Ok(None),
        };
        self.pin_identity(&args[0]);
        match signature.call1((target,)) {
            Ok(sig) => Ok(Some(VT::constant(sig.unbind()))),
            Err(_) => Ok(None),
        }
    }

    /// `functools.partial(func, *args, **kwargs)` built in the frame. A partial of a partial is
    /// flattened as `partial_new` does (Modules/_functoolsmodule.c) when the inner one is exact
    /// and has no instance dict (always so for a `Partial` tracker).
    pub(crate) fn make_partial(&mut self, py: Python<'_>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let Some(func) = args.first().cloned() else {
            graph_break!(UnsupportedCall, "functools.partial() without a function (TypeError)");
        };
        if self.is_callable(py, &func)? != Some(true) {
            graph_break!(UnsupportedCall, "functools.partial() of {} (TypeError unless callable)", func.describe(py));
        }
        let (func, mut all, mut kw) = match &func {
            VT::Partial(inner) => (inner.func.clone(), inner.args.clone(), crate::symbolic::variables::functions::keyword_items(py, &inner.keywords)?),
            other => (other.clone(), vec![], vec![]),
        };
        all.extend(args.into_iter().skip(1));
        for (k, v) in kwargs {
            match kw.iter_mut().find(|(n, _)| *n == k) {
                Some(slot) => slot.1 = v,
                None => kw.push((k, v)),
            }
        }
        let keywords = new_dict(kw.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v)).collect());
        Ok(VT::Partial(Rc::new(crate::symbolic::variables::functions::PartialFunction { func, args: all, keywords, obj: None, source: None })))
    }

    /// `callable(v)` (Objects/object.c, `PyCallable_Check`: the type has `tp_call`), when
    /// tracing knows the answer without running anything.
    pub(crate) fn is_callable(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<bool>> {
        Ok(Some(match v {
            VT::Function { .. } | VT::NestedFunction(_) | VT::Method { .. } | VT::TorchFunction(_) | VT::TensorMethod { .. } | VT::Builtin(_) | VT::Class(_)
            | VT::ContainerMethod { .. } | VT::Partial(_) | VT::GenericAttr { .. } | VT::GradModeExit { .. } | VT::LoggerMethod { .. } | VT::LockExit { .. } | VT::InferenceModeExit
            | VT::AutocastCtx(_) | VT::AutocastExit(_) | VT::GeneratorCtx(_) | VT::GeneratorCtxExit(_) => true,
            VT::Tensor(_) | VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) | VT::Deque(_) | VT::Dict(_) | VT::DictView { .. } | VT::Set(_) | VT::Iterator(_) | VT::PyModule { .. } | VT::Cell(_)
            | VT::GradModeCtx { .. } | VT::InferenceModeCtx { .. } => false,
            VT::Constant(c) => c.bind(py).is_callable(),
            // `PyCallable_Check` reads the type's `tp_call` slot, which a `__call__` in the
            // class dict of some class of the type's MRO fills: a lookup through the type
            // (`hasattr(cls, "__call__")`) would also find the metaclass's `type.__call__` and
            // answer True for every object. The class is guarded by TYPE_MATCH or ID_MATCH.
            VT::Module { obj, .. } | VT::Opaque { obj, .. } => obj.bind(py).is_callable(),
            VT::UserObject(o) => crate::symbolic::variables::user_defined::static_type_lookup(o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?, "__call__")?.is_some(),
            _ => return Ok(None),
        }))
    }

    /// A call of a function marked `_dynamo_marked_constant` (`torch._dynamo.assume_constant_result`,
    /// transformers' `_make_compile_constant`) with constant arguments: run now, its literal
    /// result a constant of the graph. `None`: not such a call, trace it as usual.
    fn marked_constant_call(&mut self, py: Python<'_>, func: &VT, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        // Note [functions marked constant]: `assume_constant_result` is the caller's promise
        // that the function's answer is fixed for the life of the process (an install probe, a
        // version test). torch runs such a function at trace time and keeps its result as a
        // constant without guarding what the body read (`invoke_and_store_as_constant`); tracing
        // the body instead meets what the promise is there to hide (transformers'
        // `is_torch_greater_or_equal` walks `importlib.util.find_spec` and `packaging`). Only
        // constant arguments and literal results are taken; anything else, or an exception at
        // trace time, is traced as an ordinary call so eager's behaviour is kept.
        let VT::Function { obj, .. } = func else { return Ok(None) };
        let f = obj.bind(py);
        let marked = f.getattr("__dict__").ok().and_then(|d| d.get_item("_dynamo_marked_constant").ok()).is_some_and(|m| m.is_truthy().unwrap_or(false));
        if !marked || !args.iter().chain(kwargs.iter().map(|(_, v)| v)).all(|a| matches!(a, VT::Constant(_))) {
            return Ok(None);
        }
        let call_args = PyTuple::new(py, args.iter().map(|a| a.as_constant(py).expect("a constant")))?;
        let call_kwargs = PyDict::new(py);
        for (k, v) in kwargs {
            call_kwargs.set_item(k, v.as_constant(py).expect("a constant"))?;
        }
        match f.call(call_args, Some(&call_kwargs)) {
            Ok(r) if is_literal(py, &r) => Ok(Some(VT::constant(r.unbind()))),
            _ => Ok(None),
        }
    }

    /// Inlines a user function: binds arguments to the callee's locals and interprets its code
    /// with the same output graph.
    pub(crate) fn inline_call(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if self.depth >= MAX_INLINE_DEPTH {
            graph_break!(UnrollLimit, "inlining depth limit reached");
        }
        if let Some(r) = self.module_base_init(py, func, &args, &kwargs)? {
            return Ok(r);
        }
        if let Some(r) = self.recursive_repr_call(py, func, &args, &kwargs)? {
            return Ok(r);
        }
        if let Some(r) = self.namedtuple_call(py, func, &args, &kwargs)? {
            return Ok(r);
        }
        if let Some(r) = self.marked_constant_call(py, func, &args, &kwargs)? {
            return Ok(r);
        }
        let (code_obj, globals, defaults, kwdefaults, closure, external, fn_source, qualname) = match func {
            VT::Function { obj, source } => {
                let f = obj.bind(py);
                let code = f.getattr("__code__")?;
                // The function's own `__qualname__` (dataclasses and `functools.wraps` set it
                // apart from the code's) names it in binding errors.
                let qualname = f.getattr("__qualname__").ok().and_then(|q| q.extract::<String>().ok());
                let globals = f.getattr("__globals__")?.cast_into::<PyDict>().map_err(|e| Unsupported::new(e.to_string()))?;
                let module = f.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
                let trusted = module.starts_with("torch.") || module == "torch";
                // What is inlined is the function's code: a later `f.__code__ = ...` must miss the
                // cache, as torch's guards on an inlined function's code do (a closure's code is
                // guarded when it is wrapped, Note [closure guards]).
                if let (Some(src), false, true) = (source, trusted, f.getattr("__closure__")?.is_none()) {
                    self.og.add_guard(Some(src.attr("__code__")), crate::guards::GuardKind::id_match(code.clone().unbind()));
                }
                let defaults = match f.getattr("__defaults__")? {
                    d if d.is_none() => vec![],
                    d => {
                        let d = d.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
                        let mut out = Vec::new();
                        for (i, v) in d.iter().enumerate() {
                            let src = if trusted { None } else { source.as_ref().map(|s| s.attr("__defaults__").item(ItemKey::Int(i as i64))) };
                            out.push(if src.is_none() && is_literal(py, &v) { VT::constant(v.unbind()) } else { self.wrap_from(py, &v, src)? });
                        }
                        out
                    }
                };
                let mut kwdefaults = Vec::new();
                let kd = f.getattr("__kwdefaults__")?;
                if let Some((_, tracked)) = self.og.dicts_by_ptr.get(&(kd.as_ptr() as usize)).cloned() {
                    // The trace reached the real `__kwdefaults__` dict already (`f.__kwdefaults__
                    // ["k"] = 5`): its tracker holds what the call binds, writes pending included;
                    // the real dict would still answer the old defaults.
                    for (k, v) in tracked.borrow().items.iter() {
                        let key: String = k.bind(py).extract()?;
                        kwdefaults.push((key, v.clone()));
                    }
                } else if let Ok(kd) = kd.cast_into::<PyDict>() {
                    for (k, v) in kd.iter() {
                        let key: String = k.extract()?;
                        let src = if trusted { None } else { source.as_ref().map(|s| s.attr("__kwdefaults__").item(ItemKey::Str(key.clone()))) };
                        kwdefaults.push((key, if src.is_none() && is_literal(py, &v) { VT::constant(v.unbind()) } else { self.wrap_from(py, &v, src)? }));
                    }
                }
                let mut closure = Vec::new();
                if let Ok(cl) = f.getattr("__closure__")?.cast_into::<PyTuple>() {
                    for (i, cell) in cl.iter().enumerate() {
                        if let Some(rc) = self.og.cells_by_ptr.get(&(cell.as_ptr() as usize)) {
                            closure.push(VT::Cell(rc.clone()));
                            continue;
                        }
                        let contents = match cell.getattr("cell_contents") {
                            Ok(c) => c,
                            Err(_) => graph_break!(RaisesException, "empty closure cell"),
                        };
                        let cell_src = source.as_ref().map(|s| s.attr("__closure__").item(ItemKey::Int(i as i64)));
                        let src = cell_src.as_ref().map(|c| c.attr("cell_contents"));
                        if src.is_none() && !trusted {
                            graph_break!(MissingSource, "closure of a function without a source");
                        }
                        let v = self.wrap_from(py, &contents, if trusted { None } else { src })?;
                        let rc = Rc::new(RefCell::new(Some(v)));
                        self.og.cells_by_ptr.insert(cell.as_ptr() as usize, rc.clone());
                        if let (Some(c), false) = (cell_src, trusted) {
                            self.og.cell_sources.insert(Rc::as_ptr(&rc) as *const () as usize, c);
                        }
                        closure.push(VT::Cell(rc));
                    }
                }
                let same_globals = globals.is(self.g.globals.bind(py)) && self.g.source.is_none();
                let gsource = if same_globals || trusted { None } else {
                    match (source, module_globals_source(py, &globals)) {
                        (Some(s), _) => Some(s.attr("__globals__")),
                        (None, Some(s)) => Some(s),
                        (None, None) => graph_break!(MissingSource, "function {} from other globals without a source", crate::symbolic::variables::qualname(f)),
                    }
                };
                let g = if same_globals && !trusted {
                    self.g.clone()
                } else {
                    Rc::new(GlobalsInfo { globals: globals.unbind(), builtins: self.g.builtins.clone_ref(py), source: gsource, trusted })
                };
                (code.unbind(), g, defaults, kwdefaults, closure, true, source.clone(), qualname)
            }
            VT::NestedFunction(nf) => {
                // Note [globals of functions made in the trace]: a function's globals are those
                // of the frame that ran its MAKE_FUNCTION (`func_globals`, Objects/funcobject.c),
                // not the caller's: a lambda made in the frame and called by an inlined helper
                // of another module reads the frame's module.
                let g = nf.g.clone();
                (nf.code.clone_ref(py), g, nf.defaults.clone(), nf.kwdefaults.clone(), nf.closure.clone(), false, None, Some(nf.qualname.clone()))
            }
            _ => unreachable!(),
        };
        let ci = code_info(code_obj.bind(py))?;
        if ci.flags & (flags::CO_COROUTINE | flags::CO_ASYNC_GENERATOR | flags::CO_ITERABLE_COROUTINE) != 0 {
            graph_break!(UnsupportedCall, "inlining coroutine {}", ci.name);
        }
        let is_generator = ci.flags & flags::CO_GENERATOR != 0;
        let lazy_generator = std::mem::take(&mut self.og.lazy_generator_call);
        let locals = bind_args(py, &ci, qualname.as_deref(), args, kwargs, &defaults, &kwdefaults)?;
        // Closure cells of a function from outside the frame are reached as
        // `fn.__closure__[i]` (writes replay through `cell_contents`).
        let external_cells: Vec<(usize, CellTarget)> = if external {
            closure
                .iter()
                .enumerate()
                .filter_map(|(i, c)| match c {
                    VT::Cell(rc) => Some((
                        Rc::as_ptr(rc) as usize,
                        match &fn_source {
                            Some(s) => CellTarget::Object(s.attr("__closure__").item(ItemKey::Int(i as i64))),
                            None => CellTarget::Unknown,
                        },
                    )),
                    _ => None,
                })
                .collect()
        } else {
            vec![]
        };
        if is_generator {
            // Nothing of the body runs before the first step (CPython's generator frame starts
            // suspended at RETURN_GENERATOR).
            let mut cells: HashMap<usize, CellTarget> = external_cells.into_iter().collect();
            cells.extend(self.external_cells.iter().map(|(k, v)| (*k, v.clone())));
            let trusted = globals.trusted && !lazy_generator;
            let mut frame = GeneratorFrame { code: ci, g: globals, stack: Vec::new(), locals, closure, external_cells: cells, ip: 0, returned: None, sent: None, thrown: None };
            if trusted {
                // torch's own generators (nn.Module.parameters, named_children, ...) only walk
                // the module tree: they run to the end here, so a loop over them is a fixed
                // sequence that can cross a graph break (Note [loop iterators as snapshots]).
                let mut items = Vec::new();
                while let Some(v) = resume_generator(py, self.og, self.depth + 1, &mut frame)? {
                    items.push(v);
                    if items.len() > 100_000 {
                        graph_break!(UnrollLimit, "generator too long to unroll");
                    }
                }
                let mut state = IteratorState::over(items);
                // What `yield from` over it evaluates to once exhausted.
                state.returned = frame.returned.take();
                return Ok(VT::Iterator(Rc::new(RefCell::new(state))));
            }
            let state = Rc::new(RefCell::new(IteratorState::of(IterKind::Generator(Some(Box::new(frame))))));
            self.og.generators.push(state.clone());
            self.og.generator_made_at.insert(Rc::as_ptr(&state) as usize, self.og.top_ip);
            return Ok(VT::Iterator(state));
        }
        self.og.inline_sites.push(Some((self.code.clone(), self.ip)));
        let mut child = InstructionTranslator::new(ci, globals, locals, closure, self.og, self.depth + 1);
        child.external_cells.extend(external_cells);
        child.external_cells.extend(self.external_cells.iter().map(|(k, v)| (*k, v.clone())));
        let r = child.run(py);
        self.og.inline_sites.pop();
        r
    }
}

/// Binds call arguments to a code object's parameter slots (CPython's `initialize_locals` in
/// Python/ceval.c: positional, keyword-only, `*args`, `**kwargs`). A positional-only parameter
/// is never bound by keyword: with `**kwargs` the keyword goes there, else the call fails. A call
/// that does not bind raises CPython's own `TypeError` in the trace (Note [argument binding
/// errors] in python/dynamo/_binding.py), so a `try` around it takes its handler; the message
/// names the function by `qualname`, its `__qualname__` (the code's when `None`), as
/// `initialize_locals` names it by `func_qualname`.
pub(crate) fn bind_args(py: Python<'_>, ci: &CodeInfo, qualname: Option<&str>, args: Vec<VT>, kwargs: Vec<(String, VT)>, defaults: &[VT], kwdefaults: &[(String, VT)]) -> VResult<Vec<Option<VT>>> {
    let n_args = args.len();
    let kwnames: Vec<String> = kwargs.iter().map(|(k, _)| k.clone()).collect();
    let fail = || binding_error(py, ci, qualname, n_args, &kwnames, defaults.len(), kwdefaults);
    let mut locals: Vec<Option<VT>> = vec![None; ci.localsplus.len()];
    let nargs = ci.argcount;
    let posonly = ci.posonlyargcount.min(nargs);
    let has_varargs = ci.flags & flags::CO_VARARGS != 0;
    let has_varkw = ci.flags & flags::CO_VARKEYWORDS != 0;
    let mut extra = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        if i < nargs {
            locals[i] = Some(a);
        } else {
            extra.push(a);
        }
    }
    let mut extra_kw = Vec::new();
    for (k, v) in kwargs {
        match ci.varnames[posonly..nargs + ci.kwonlyargcount].iter().position(|n| *n == k) {
            Some(i) => {
                if locals[posonly + i].is_some() {
                    return Err(fail());
                }
                locals[posonly + i] = Some(v);
            }
            None if has_varkw => extra_kw.push((PyString::new(py, &k).into_any().unbind(), v)),
            None => return Err(fail()),
        }
    }
    if !extra.is_empty() && !has_varargs {
        return Err(fail());
    }
    let first_default = nargs.saturating_sub(defaults.len());
    for i in 0..nargs {
        if locals[i].is_none() {
            if i >= first_default {
                locals[i] = Some(defaults[i - first_default].clone());
            } else {
                return Err(fail());
            }
        }
    }
    for i in nargs..nargs + ci.kwonlyargcount {
        if locals[i].is_none() {
            match kwdefaults.iter().find(|(k, _)| *k == ci.varnames[i]) {
                Some((_, v)) => locals[i] = Some(v.clone()),
                None => return Err(fail()),
            }
        }
    }
    let mut slot = nargs + ci.kwonlyargcount;
    if has_varargs {
        locals[slot] = Some(make_tuple(py, extra)?);
        slot += 1;
    }
    if has_varkw {
        locals[slot] = Some(new_dict(extra_kw));
    }
    Ok(locals)
}

/// The error of a call of `ci` with `n_args` positional arguments and keywords `kwnames` that
/// does not bind: CPython's own `TypeError`, raised in the trace (`dynamo._binding`). Should the
/// stub bind after all, the call is a graph break and runs as ordinary Python.
///
/// A `dynamo._polyfills` function stands in for a C function whose own error differs (eager's
/// `OrderedDict.clear(1)` says "OrderedDict.clear() takes no arguments (1 given)"): a call of one
/// that does not bind is a graph break, so the C function runs and raises eager's error.
fn binding_error(py: Python<'_>, ci: &CodeInfo, qualname: Option<&str>, n_args: usize, kwnames: &[String], n_defaults: usize, kwdefaults: &[(String, VT)]) -> Unsupported {
    let polyfill = std::path::Path::new(&ci.filename).file_name().is_some_and(|f| f == "_polyfills.py");
    if polyfill {
        return Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::ArgumentMismatch, format!("{}() called with arguments that do not bind (it stands in for a C function)", ci.name));
    }
    let kwdefault_names: Vec<&str> = kwdefaults.iter().map(|(k, _)| k.as_str()).collect();
    let exc = py
        .import("dynamo._binding")
        .and_then(|m| m.getattr("binding_error")?.call1((ci.code.bind(py), n_args, kwnames.to_vec(), n_defaults, kwdefault_names, qualname)));
    match exc {
        Ok(e) if !e.is_none() => {
            let msg = e.str().map(|s| s.to_string()).unwrap_or_default();
            Unsupported::raise_value("TypeError", e.unbind(), msg)
        }
        _ => Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::ArgumentMismatch, format!("{}() called with arguments that do not bind", ci.name)),
    }
}

// Note [recursive repr wrappers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A dataclass's `__repr__` (and any `reprlib.recursive_repr` function) is a wrapper that keys
// the object by `(id(self), _thread.get_ident())` in a set closed over, `repr_running`, answers
// `'...'` when the key is there (a repr reaching its own object) and else adds it, calls the
// user's function and discards it. Traced as written it breaks on `get_ident()` (and writes a
// set from outside). When the set is empty (guarded: LENGTH_CHECK 0 through the wrapper's
// closure), no repr is running on any thread, so the wrapper's answer is the user function's:
// that is inlined instead; the set is left as the wrapper leaves it, empty. An object that
// reaches itself then recurses in the trace until the inlining limit (a break), where Python
// answers `'...'`.
impl<'a> InstructionTranslator<'a> {
    pub(crate) fn recursive_repr_call(&mut self, py: Python<'_>, func: &VT, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let VT::Function { obj, source: Some(src) } = func else { return Ok(None) };
        if args.len() != 1 || !kwargs.is_empty() {
            return Ok(None);
        }
        let f = obj.bind(py);
        let Ok(code) = f.getattr("__code__") else { return Ok(None) };
        // Cheap test first: every inlined one-argument call passes here.
        if !code.getattr("co_name")?.eq("wrapper")? || !code.getattr("co_freevars")?.contains("repr_running")? {
            return Ok(None);
        }
        let identity = py.eval(c"lambda self: None", None, None)?;
        let mut known = Vec::new();
        if let Ok(dc) = py.import("dataclasses")?.getattr("_recursive_repr") {
            known.push(dc.call1((&identity,))?.getattr("__code__")?);
        }
        known.push(py.import("reprlib")?.getattr("recursive_repr")?.call0()?.call1((&identity,))?.getattr("__code__")?);
        if !known.iter().any(|k| k.is(&code)) {
            return Ok(None);
        }
        let freevars: Vec<String> = code.getattr("co_freevars")?.extract()?;
        let (Some(running), Some(user)) = (freevars.iter().position(|n| n == "repr_running"), freevars.iter().position(|n| n == "user_function")) else {
            return Ok(None);
        };
        let closure = f.getattr("__closure__")?;
        let cell = |i: usize| -> PyResult<Bound<'_, PyAny>> { closure.get_item(i)?.getattr("cell_contents") };
        let cell_source = |i: usize| src.attr("__closure__").item(ItemKey::Int(i as i64)).attr("cell_contents");
        let set = cell(running)?;
        if !set.is_exact_instance_of::<pyo3::types::PySet>() || set.len()? != 0 {
            return Ok(None);
        }
        self.og.add_guard(Some(cell_source(running)), GuardKind::LenMatch(0));
        let user_fn = crate::symbolic::builder::wrap(py, self.og, &cell(user)?, cell_source(user))?;
        self.call(py, &user_fn, args.to_vec(), vec![]).map(Some)
    }
}

// Note [namedtuple classes made in the frame]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `collections.namedtuple(name, fields, ...)` called in the trace with literal arguments makes
// its class for real at trace time (it runs no user code; `module`, which it would read off its
// caller's frame, is given explicitly: the `__name__` of the code calling it). The class is
// then used like any namedtuple class: instances are `VT::NamedTuple`s, fields and methods
// traced. Eager makes a new class on every call, so the class and its instances never outlive
// the graph (`OutputGraph::frame_classes`): the trace-time class would otherwise be the same
// object on every call. A rebuild of one moves the break back to the `namedtuple` call (Note
// [breaking where a failure points] in `convert_frame.rs`), which then runs in Python.
impl<'a> InstructionTranslator<'a> {
    pub(crate) fn namedtuple_call(&mut self, py: Python<'_>, func: &VT, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let VT::Function { obj, .. } = func else { return Ok(None) };
        let namedtuple = py.import("collections")?.getattr("namedtuple")?;
        if !obj.bind(py).is(&namedtuple) {
            return Ok(None);
        }
        let (vals, kw) = self.literal_call_args(py, args, kwargs, "collections.namedtuple")?;
        if !kw.contains("module")? {
            let module = self.g.globals.bind(py).get_item("__name__")?.map(|m| m.unbind()).unwrap_or_else(|| PyString::new(py, "__main__").into_any().unbind());
            kw.set_item("module", module)?;
        }
        let cls = namedtuple.call(PyTuple::new(py, vals)?, Some(&kw)).map_err(|e| Unsupported::folded(py, e))?;
        self.og.frame_classes.insert(cls.as_ptr() as usize, (cls.clone().unbind(), self.og.top_ip));
        Ok(Some(VT::Class(Rc::new(cls.unbind()))))
    }
}

// Note [custom autograd.Function]: `Cls.apply(*args)` of a user subclass of
// `torch.autograd.Function` is one graph op calling the real `Cls.apply`, so the user's
// `forward` makes the value and the user's `backward` (through torch's autograd, with torch's
// own `ctx`) the gradient, exactly as in eager: `needs_input_grad`, `saved_tensors`,
// non-tensor `ctx` attributes, `mark_non_differentiable`, `set_materialize_grads`,
// `once_differentiable`, non-tensor outputs and grad mode are all torch's. The op's shapes come
// from running `apply` on fake tensors, and in a training graph it keeps a segment of its own
// that runs through torch's autograd (`torch_vjp` in src/autograd/rules.rs refuses it: running
// the forward a second time in the backward would run its Python twice).
//
// Running the forward (at trace time on fakes, at run time inside the graph) is exact only if
// nothing outside the graph sees it run: so the forward (and `setup_context`) is first traced
// as ordinary inlined code with a stand-in `ctx` (`dynamo._polyfills.AutogradFunctionCtx`),
// as a check. It must record no write outside the trace (attribute, global, list or dict of
// the frame, cell, logging call, iterator step, hook, tensor attribute), write no tensor in
// place (`mark_dirty`, an in-place op, a batch norm's running statistics), and return a
// tensor or a tuple of tensors and constants. Anything it cannot trace, and any exception it
// raises in the trace, is a graph break at the `apply`, which then runs in Python (a reason
// saying so is logged). The nodes of the check are dropped from the graph when the graph is
// exported (`OutputGraph::speculated_nodes`); its guards stay (the forward read what they
// guard). Arguments are tensors, constants, symbolic numbers and tuples of those: a mutable
// argument could be changed by the check itself.

/// The class of `obj` when `obj` is the `apply` of a subclass of `torch.autograd.Function`
/// defined outside torch (`Cls.apply`, a C classmethod bound to `Cls`; Note [custom
/// autograd.Function]); `None` for anything else.
pub fn autograd_function_of_apply<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    if type_name(obj) != "builtin_function_or_method" {
        return Ok(None);
    }
    let (Ok(cls), Ok(name)) = (obj.getattr("__self__"), obj.getattr("__name__")) else { return Ok(None) };
    if name.extract::<String>().ok().as_deref() != Some("apply") || !cls.is_instance_of::<pyo3::types::PyType>() {
        return Ok(None);
    }
    let function = py.import("torch.autograd")?.getattr("Function")?;
    let cls_t = cls.cast::<pyo3::types::PyType>()?;
    if cls.is(&function) || !cls_t.is_subclass(&function)? {
        return Ok(None);
    }
    let module = cls.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    if module == "torch" || module.starts_with("torch.") {
        return Ok(None);
    }
    Ok(Some(cls))
}

impl<'a> InstructionTranslator<'a> {
    /// `Cls.apply(*args, **kwargs)` of a user `torch.autograd.Function` (`apply` the real bound
    /// method, reached through `source`): one graph op after a trace of the forward that checks
    /// it has no effect outside the graph (Note [custom autograd.Function]).
    pub(crate) fn autograd_function_apply(&mut self, py: Python<'_>, apply: &Bound<'_, PyAny>, source: &Arc<Source>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let cls = apply.getattr("__self__")?;
        let name = crate::symbolic::variables::qualname(&cls);
        if !kwargs.is_empty() {
            graph_break!(UnsupportedCall, "{name}.apply with keyword arguments runs in Python");
        }
        // The trace reads the class's forward: pin the class (the bound method is new on each
        // lookup, its `__self__` is the class).
        let cls_source = source.attr("__self__");
        self.og.add_guard(Some(cls_source.clone()), GuardKind::id_match(cls.clone().unbind()));
        let forward = cls.getattr("forward")?;
        if type_name(&forward) != "function" {
            graph_break!(UnsupportedCall, "{name}.apply: its forward is a {}, not a Python function", type_name(&forward));
        }
        let setup_context = cls.getattr("setup_context")?;
        let separate_setup: bool = py.import("torch.autograd.function")?.getattr("_is_setup_context_defined")?.call1((&setup_context,))?.is_truthy()?;
        fn plain(py: Python<'_>, v: &VT) -> bool {
            match v {
                VT::Tensor(_) | VT::SymNum(_) => true,
                VT::Constant(c) => is_literal(py, c.bind(py)),
                VT::Tuple(items) => items.iter().all(|i| plain(py, i)),
                _ => false,
            }
        }
        if let Some(a) = args.iter().find(|a| !plain(py, a)) {
            graph_break!(UnsupportedCall, "{name}.apply with an argument that is a {} (only tensors, numbers, literals and tuples of them are traced)", a.describe(py));
        }
        // Eager's `ctx.needs_input_grad`: a tensor argument that requires grad, whatever the
        // grad mode (torch/csrc/autograd/python_function.cpp, `unpack_input`).
        let mut needs = Vec::with_capacity(args.len());
        for a in &args {
            needs.push(match a {
                VT::Tensor(t) => t.fake.bind(py).getattr("requires_grad")?.is_truthy()?,
                _ => false,
            });
        }
        let needs = PyTuple::new(py, needs)?.into_any().unbind();
        let og = &mut *self.og;
        let marks = (og.graph.nodes.len(), og.side_effects.writes, og.side_effects.iter_steps(), og.side_effects.logger_calls.len(), og.side_effects.hooks.len(), og.tensor_attrs.len(), og.trace_warnings.len());
        let checked = self.check_autograd_function_forward(py, &name, &forward, &setup_context, separate_setup, &cls_source, needs, &args);
        let out = match checked {
            Ok(out) => out,
            Err(mut e) => {
                // An exception in the check (possibly of the stand-in `ctx`) is not caught in
                // the trace: the apply raises, or not, for real in Python.
                e.raised = None;
                e.exc_value = None;
                e.reason = format!("{name}.apply runs in Python: its forward was not traced ({})", e.reason);
                return Err(e);
            }
        };
        let og = &mut *self.og;
        let now = (og.graph.nodes.len(), og.side_effects.writes, og.side_effects.iter_steps(), og.side_effects.logger_calls.len(), og.side_effects.hooks.len(), og.tensor_attrs.len(), og.trace_warnings.len());
        if (now.1, now.2, now.3, now.4, now.5) != (marks.1, marks.2, marks.3, marks.4, marks.5) {
            graph_break!(SideEffect, "{name}.apply runs in Python: its forward writes outside the graph");
        }
        // Note [writes in a traced autograd.Function forward]: the graph calls the Function
        // itself (its forward runs for real), so the graph must know every tensor from outside
        // the forward it writes. A write into a tensor the forward made (`output += bias`
        // on the fresh result of a matmul: audit 51, P10) stays inside the Function; a write
        // into an argument, a tensor from outside, or a view of one is refused.
        const MORE_VIEWS: [&str; 18] = ["unfold", "view_as_real", "view_as_complex", "real", "imag", "alias", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit", "indices", "values", "swapdims", "moveaxis", "adjoint", "as_strided_", "set_"];
        let mut speculated = Vec::new();
        let mut outer_alias = std::collections::HashSet::new();
        for n in &og.graph.nodes[marks.0..] {
            let what = match &n.op {
                crate::graph::Op::Placeholder { .. } => continue,
                crate::graph::Op::CallMethod { method } => method.as_str(),
                crate::graph::Op::CallFunction { name, .. } => name.as_str(),
            };
            let outer = |id: crate::graph::NodeId| (id.0 as usize) < marks.0 || matches!(og.graph.nodes[id.0 as usize].op, crate::graph::Op::Placeholder { .. }) || outer_alias.contains(&id.0);
            let last = what.rsplit('.').next().unwrap_or(what);
            let mut written = Vec::new();
            n.written_args(&mut written);
            if last.contains("setitem") {
                if let Some(crate::graph::Arg::Node(a)) = n.args.first() {
                    written.push(*a);
                }
            }
            if written.iter().any(|w| outer(*w)) || ["batch_norm", "instance_norm", "embedding"].iter().any(|k| last.contains(k)) {
                graph_break!(SideEffect, "{name}.apply runs in Python: its forward writes a tensor from outside it in place ({what})");
            }
            if let Some(crate::graph::Arg::Node(a)) = n.args.first() {
                if outer(*a) && (crate::graph::VIEW_OPS.contains(&last) || MORE_VIEWS.contains(&last)) {
                    outer_alias.insert(n.id.0);
                }
            }
            speculated.push(n.id);
        }
        og.trace_warnings.truncate(marks.6);
        let shape_ok = match &out {
            VT::Tensor(_) => true,
            VT::Tuple(items) => items.iter().all(|i| matches!(i, VT::Tensor(_)) || matches!(i, VT::Constant(c) if is_literal(py, c.bind(py)))),
            _ => false,
        };
        if !shape_ok {
            graph_break!(UnsupportedOpResult, "{name}.apply runs in Python: its forward returns a {} (only a tensor or a tuple of tensors and literals is traced)", out.describe(py));
        }
        og.speculated_nodes.extend(speculated);
        let target = py.import("dynamo._functional")?.getattr("autograd_function_apply")?.call1((&cls,))?;
        og.calls_user_python = true;
        let result = og.call(py, Some(&target), None, &args, &[])?;
        let same_kind = match (&out, &result) {
            (VT::Tensor(_), VT::Tensor(_)) => true,
            (VT::Tuple(a), VT::Tuple(b)) => a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| matches!(x, VT::Tensor(_)) == matches!(y, VT::Tensor(_))),
            _ => false,
        };
        if !same_kind {
            graph_break!(UnsupportedOpResult, "{name}.apply gave {} where its traced forward gave {}", result.describe(py), out.describe(py));
        }
        Ok(result)
    }

    /// The trace of `forward` (and `setup_context` when the class defines one) with a stand-in
    /// `ctx` whose `needs_input_grad` is `needs`: the forward's value, checked by the caller
    /// (Note [custom autograd.Function]).
    #[allow(clippy::too_many_arguments)]
    fn check_autograd_function_forward(&mut self, py: Python<'_>, name: &str, forward: &Bound<'_, PyAny>, setup_context: &Bound<'_, PyAny>, separate_setup: bool, cls_source: &Arc<Source>, needs: Py<PyAny>, args: &[VT]) -> VResult<VT> {
        let polyfills = Arc::new(Source::Module { name: "dynamo._polyfills".into() });
        let ctx_cls = py.import("dynamo._polyfills")?.getattr("AutogradFunctionCtx")?;
        let ctx_cls = crate::symbolic::builder::wrap(py, self.og, &ctx_cls, polyfills.attr("AutogradFunctionCtx"))?;
        let ctx = self.call(py, &ctx_cls, vec![VT::constant(needs)], vec![])?;
        let forward_vt = crate::symbolic::builder::wrap(py, self.og, forward, cls_source.attr("forward"))?;
        let out = if separate_setup {
            let out = self.call(py, &forward_vt, args.to_vec(), vec![])?;
            let setup = crate::symbolic::builder::wrap(py, self.og, setup_context, cls_source.attr("setup_context"))?;
            let r = self.call(py, &setup, vec![ctx.clone(), VT::Tuple(Rc::new(args.to_vec())), out.clone()], vec![])?;
            if !r.as_constant(py).is_some_and(|c| c.is_none()) {
                graph_break!(UnsupportedCall, "{name}.setup_context returned {}", r.describe(py));
            }
            out
        } else {
            let mut all = vec![ctx.clone()];
            all.extend(args.iter().cloned());
            self.call(py, &forward_vt, all, vec![])?
        };
        let VT::UserObject(o) = &ctx else { graph_break!(UnsupportedCall, "{name}: the stand-in ctx is a {}", ctx.describe(py)) };
        if !o.get(py, "dynamo_marked_dirty").and_then(|v| v.as_constant(py)).is_some_and(|c| c.is(&pyo3::types::PyBool::new(py, false).to_owned().into_any())) {
            graph_break!(SideEffect, "{name}.apply runs in Python: its forward calls ctx.mark_dirty (an in-place write of an input)");
        }
        Ok(out)
    }
}
