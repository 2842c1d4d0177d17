//! Tensors of `torch.Tensor` subclasses with a Python `__torch_function__` (torch's
//! `TensorWithTFOverrideVariable`, torch/_dynamo/variables/torch_function.py).
//!
//! Note [tensor subclasses]: such a tensor is an ordinary `TensorVariable` whose node is listed
//! in `OutputGraph::tensor_subclasses` with its Python class. The graph itself only holds plain
//! tensors; what the subclass changes is how the trace gets there. A torch function, a `Tensor`
//! method, an operator, `[]` or a `Tensor` property applied to arguments among which such a
//! tensor appears is dispatched as `torch.overrides` does in eager: the overloaded argument
//! types, each subclass before its base classes and otherwise in argument order, are tried in
//! turn, and the first `cls.__torch_function__(func, types, args, kwargs)` that does not return
//! `NotImplemented` gives the result (all of them declining is eager's `TypeError`, left to a
//! break). A Python `__torch_function__` is inlined like any method: what it logs, counts or
//! changes is traced. `func` is the very object eager passes (`torch.add`, `Tensor.add` for
//! `x.add(..)` and `x + ..`, `Tensor.__rsub__` for `1 - x`, a getset's `__get__` for `x.shape`),
//! found by running the real callable once on probe tensors whose own
//! `__torch_function__` records what it receives (`dynamo._subclass.run_probe`).
//!
//! `Tensor.__torch_function__` (reached by `super().__torch_function__(...)` or inherited) is
//! modelled here: with subclass dispatch off it runs `func(*args, **kwargs)` (the op goes into
//! the graph) and marks the tensors of the result as `cls` (torch's `_convert`): a tensor the
//! call made is marked in place, any other gets an alias node first (eager's `as_subclass` makes
//! a new object). `torch._C._disabled_torch_function_impl` runs `func` the same way without the
//! marking, and `with torch._C.DisableTorchFunctionSubclass():` switches dispatch off for its
//! body (`OutputGraph::torch_function_disabled`). `x.as_subclass(cls)` is an alias node marked
//! `cls`.
//!
//! A marked tensor that outlives the graph is made an instance of its class again after the
//! graph (`dynamo._subclass.rewrap`, with the attributes the trace set on it); a subclass input
//! is handed to the compiled graph as a plain alias (`dynamo._subclass.PlainInputs`), so the
//! graph never calls the subclass back. Its class is pinned by TENSOR_MATCH, which reads the
//! input's metadata through a plain alias too, so guards never run user code.
//!
//! Not modelled (a GB0015 break, the frame or the op runs eagerly): `__torch_dispatch__`
//! subclasses (wrapper subclasses made by `_make_wrapper_subclass` among them), a
//! `__torch_function__` that is not a Python classmethod, non-strided layouts, torch function
//! modes, and the queries of a subclass input that TENSOR_QUERY would guard by calling it.

use crate::graph::NodeId;
use crate::symbolic::graph_break::GraphBreakKind;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::{qualname, type_name, TensorVariable, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use std::rc::Rc;
use std::sync::Arc;
use crate::source::{ItemKey, Source};

/// Whether a tensor of exact type `ty` can be a graph input, and whether it must be marked as a
/// subclass: `Ok(false)` for `torch.Tensor` and `nn.Parameter`, `Ok(true)` for a subclass whose
/// `__torch_function__` is a Python classmethod, torch's default or switched off, and which
/// has no `__torch_dispatch__` of its own; `Err(reason)` otherwise.
pub fn input_subclass(py: Python<'_>, ty: &Bound<'_, PyType>) -> PyResult<Result<bool, String>> {
    let torch = py.import("torch")?;
    let tensor = torch.getattr("Tensor")?;
    if ty.is(&tensor) || ty.is(&torch.getattr("nn")?.getattr("Parameter")?) {
        return Ok(Ok(false));
    }
    Ok(supported_class(py, ty.as_any())?.map(|_| true))
}

/// Why tensors of class `cls` (a `torch.Tensor` subclass) cannot be traced, if they cannot.
fn supported_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<Result<(), String>> {
    let torch = py.import("torch")?;
    let c = torch.getattr("_C")?;
    let name = qualname(cls);
    if !cls.getattr("__torch_dispatch__")?.is(&c.getattr("_disabled_torch_dispatch_impl")?) {
        return Ok(Err(format!("tensor subclass {name} defines __torch_dispatch__")));
    }
    if !cls.get_type().is(&c.getattr("_TensorMeta")?) && !cls.get_type().is(&torch.getattr("nn")?.getattr("parameter")?.getattr("_ParameterMeta")?) {
        return Ok(Err(format!("tensor subclass {name} has metaclass {}", qualname(&cls.get_type().into_any()))));
    }
    let tf = cls.getattr("__torch_function__")?;
    if tf.is(&c.getattr("_disabled_torch_function_impl")?) {
        return Ok(Ok(()));
    }
    let is_python_classmethod = type_name(&tf) == "method"
        && tf.getattr("__self__").map(|s| s.is(cls)).unwrap_or(false)
        && tf.getattr("__func__").map(|f| type_name(&f) == "function").unwrap_or(false);
    if !is_python_classmethod {
        return Ok(Err(format!("tensor subclass {name}: __torch_function__ is a {} (only a classmethod is traced)", type_name(&tf))));
    }
    Ok(Ok(()))
}

/// `Tensor.__torch_function__`'s function (the classmethod's `__func__`).
fn default_tf_func<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    py.import("torch")?.getattr("Tensor")?.getattr("__dict__")?.get_item("__torch_function__")?.getattr("__func__")
}

/// Whether `cls`'s `__torch_function__` is switched off (`_disabled_torch_function_impl`, as
/// `nn.Parameter`'s): its tensors take part in no dispatch.
fn tf_disabled(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(cls.getattr("__torch_function__")?.is(&py.import("torch")?.getattr("_C")?.getattr("_disabled_torch_function_impl")?))
}

/// `torch.Tensor.<name>` is `f` (a method, slot or Python function of the class).
fn tensor_attr_name(py: Python<'_>, f: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let Ok(name) = f.getattr("__name__").and_then(|n| n.extract::<String>()) else { return Ok(None) };
    let tensor = py.import("torch")?.getattr("Tensor")?;
    Ok(match tensor.getattr(name.as_str()) {
        Ok(a) if a.is(f) => Some(name),
        _ => None,
    })
}

/// The getset descriptor of `torch.Tensor` whose `__get__` is `f` (`x.shape`'s `func`).
fn getset_name(py: Python<'_>, f: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if type_name(f) != "method-wrapper" || f.getattr("__name__")?.extract::<String>()? != "__get__" {
        return Ok(None);
    }
    let d = f.getattr("__self__")?;
    if type_name(&d) != "getset_descriptor" {
        return Ok(None);
    }
    let owner = d.getattr("__objclass__")?;
    let base = py.import("torch")?.getattr("_C")?.getattr("TensorBase")?;
    if !owner.is(&base) && !owner.is(&py.import("torch")?.getattr("Tensor")?) {
        return Ok(None);
    }
    Ok(Some(d.getattr("__name__")?.extract()?))
}

/// Python r-operators of `torch.Tensor` (torch/_tensor.py) and the `operator` function each is
/// with its operands swapped.
const REFLECTED: &[(&str, &str)] = &[
    ("__rsub__", "sub"),
    ("__rdiv__", "truediv"),
    ("__rtruediv__", "truediv"),
    ("__rpow__", "pow"),
    ("__rfloordiv__", "floordiv"),
    ("__rmod__", "mod"),
    ("__rmatmul__", "matmul"),
    ("__rlshift__", "lshift"),
    ("__rrshift__", "rshift"),
    ("__rand__", "and_"),
    ("__ror__", "or_"),
    ("__rxor__", "xor"),
];

impl<'a> InstructionTranslator<'a> {
    /// The Python class of a tensor tracker that is an instance of a `torch.Tensor` subclass
    /// (Note [tensor subclasses]); `None` for a plain tensor.
    pub(crate) fn tensor_subclass_of<'py>(&self, py: Python<'py>, t: &TensorVariable) -> Option<Bound<'py, PyAny>> {
        self.og.tensor_subclasses.get(&t.node).map(|c| c.bind(py).clone())
    }

    /// The overloaded argument types of a call, in `torch.overrides`' order: each tensor of a
    /// subclass with `__torch_function__` on, in argument order (lists and tuples searched, then
    /// keyword arguments), a type inserted before the first type it derives from. Empty while
    /// subclass dispatch is off.
    fn overloaded_types(&self, py: Python<'_>, args: &[VT], kwargs: &[(String, VT)]) -> PyResult<Vec<Py<PyAny>>> {
        let mut out: Vec<Py<PyAny>> = Vec::new();
        if self.og.torch_function_disabled > 0 || self.og.tensor_subclasses.is_empty() {
            return Ok(out);
        }
        fn visit(me: &InstructionTranslator<'_>, py: Python<'_>, v: &VT, out: &mut Vec<Py<PyAny>>, depth: usize) -> PyResult<()> {
            match v {
                VT::Tensor(t) => {
                    if let Some(cls) = me.tensor_subclass_of(py, t) {
                        if tf_disabled(py, &cls)? || out.iter().any(|c| c.bind(py).is(&cls)) {
                            return Ok(());
                        }
                        let ty = cls.cast::<PyType>()?;
                        let at = out.iter().position(|c| ty.is_subclass(c.bind(py)).unwrap_or(false)).unwrap_or(out.len());
                        out.insert(at, cls.unbind());
                    }
                }
                VT::Tuple(items) | VT::NamedTuple { items, .. } if depth == 0 => {
                    for i in items.iter() {
                        visit(me, py, i, out, depth + 1)?;
                    }
                }
                VT::List(l) if depth == 0 => {
                    let items = l.borrow().items.clone();
                    for i in items.iter() {
                        visit(me, py, i, out, depth + 1)?;
                    }
                }
                _ => {}
            }
            Ok(())
        }
        for a in args.iter().chain(kwargs.iter().map(|(_, v)| v)) {
            visit(self, py, a, &mut out, 0)?;
        }
        Ok(out)
    }

    /// Runs `f` with subclass dispatch off (`DisableTorchFunctionSubclass`), restoring the
    /// previous state whatever `f` returns.
    fn with_tf_disabled<T>(&mut self, f: impl FnOnce(&mut Self) -> VResult<T>) -> VResult<T> {
        self.og.torch_function_disabled += 1;
        let r = f(self);
        self.og.torch_function_disabled -= 1;
        r
    }

    /// Calls `func(*args, **kwargs)` (func: the object eager passes to `__torch_function__`) for
    /// the overloaded `types`: each type's `__torch_function__` in turn until one does not return
    /// `NotImplemented` (torch/csrc/utils/python_arg_parser.cpp, `handle_torch_function_no_python_arg_parser`).
    fn tf_dispatch(&mut self, py: Python<'_>, func: &Bound<'_, PyAny>, types: &[Py<PyAny>], args: Vec<VT>, kwargs: Option<Vec<(String, VT)>>) -> VResult<VT> {
        let func_vt = VT::TorchFunction(Rc::new(func.clone().unbind()));
        let types_vt = VT::Tuple(Rc::new(types.iter().map(|t| VT::Class(Rc::new(t.clone_ref(py)))).collect()));
        let args_vt = VT::Tuple(Rc::new(args));
        // A C function passes `None` when the call had no keyword arguments.
        let kwargs_vt = if let Some(kwargs) = kwargs {
            let mut items = Vec::with_capacity(kwargs.len());
            for (k, v) in kwargs {
                items.push((pyo3::types::PyString::new(py, &k).into_any().unbind(), v));
            }
            crate::symbolic::variables::dicts::new_dict(items)
        } else {
            VT::none(py)
        };
        let default = default_tf_func(py)?;
        let not_implemented = py.NotImplemented();
        for cls in types {
            let cls = cls.bind(py);
            let tf = cls.getattr("__torch_function__")?;
            let tf_func = tf.getattr("__func__")?;
            let r = if tf_func.is(&default) {
                self.default_torch_function(py, cls, &func_vt, &types_vt, &args_vt, &kwargs_vt)?
            } else {
                let f = self.class_function(py, cls, &tf_func, |s| s.attr("__torch_function__").attr("__func__"))?;
                let m = VT::Method { func: Box::new(f), self_: Box::new(VT::Class(Rc::new(cls.clone().unbind()))) };
                self.call(py, &m, vec![func_vt.clone(), types_vt.clone(), args_vt.clone(), kwargs_vt.clone()], vec![])?
            };
            if let VT::Constant(c) = &r {
                if c.bind(py).is(&not_implemented) {
                    continue;
                }
            }
            return Ok(r);
        }
        graph_break!(TensorSubclass, "every __torch_function__ of {} returned NotImplemented (TypeError)", qualname(func))
    }

    /// `torch.Tensor.__torch_function__(cls, func, types, args, kwargs)` (torch/_tensor.py):
    /// `NotImplemented` unless `cls` derives from every type in `types`; else `func` runs with
    /// subclass dispatch off and the tensors of its result become `cls` (unless `func` is one of
    /// `torch._C._get_default_nowrap_functions()`... `get_default_nowrap_functions`).
    fn default_torch_function(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, func: &VT, types: &VT, args: &VT, kwargs: &VT) -> VResult<VT> {
        let ty = cls.cast::<PyType>().map_err(PyErr::from)?;
        for t in self.unpack(py, types)? {
            let ok = match &t {
                VT::Class(c) => ty.is_subclass(c.bind(py))?,
                _ => graph_break!(TensorSubclass, "Tensor.__torch_function__ with types that are not classes"),
            };
            if !ok {
                return Ok(VT::constant(py.NotImplemented()));
            }
        }
        let (r, nowrap) = self.run_disabled(py, func, args, kwargs)?;
        if nowrap {
            return Ok(r);
        }
        self.convert_to_subclass(py, r, cls)
    }

    /// `func(*args, **kwargs)` with subclass dispatch off; also whether `func` is one of the
    /// functions whose result `Tensor.__torch_function__` leaves unconverted.
    fn run_disabled(&mut self, py: Python<'_>, func: &VT, args: &VT, kwargs: &VT) -> VResult<(VT, bool)> {
        let args = self.unpack(py, args)?;
        let kwargs = match kwargs {
            VT::Constant(c) if c.bind(py).is_none() => vec![],
            VT::Dict(d) => {
                let mut out = Vec::new();
                for (k, v) in d.borrow().items.iter() {
                    let Ok(k) = k.bind(py).extract::<String>() else { graph_break!(TensorSubclass, "__torch_function__ kwargs with a non-string key") };
                    out.push((k, v.clone()));
                }
                out
            }
            other => graph_break!(TensorSubclass, "__torch_function__ kwargs of {}", other.describe(py)),
        };
        let nowrap = match func {
            VT::TorchFunction(f) => {
                let set = py.import("torch.overrides")?.call_method0("get_default_nowrap_functions")?;
                set.contains(f.bind(py)).unwrap_or(false)
            }
            _ => false,
        };
        let r = self.with_tf_disabled(|me| me.call(py, func, args, kwargs))?;
        Ok((r, nowrap))
    }

    /// torch's `_convert(ret, cls)`: a tensor not already an instance of `cls` becomes one;
    /// tuples (named ones keep their class) and lists are converted item by item.
    fn convert_to_subclass(&mut self, py: Python<'_>, r: VT, cls: &Bound<'_, PyAny>) -> VResult<VT> {
        let tensor_type = self.og.handles.tensor_type.bind(py).clone();
        if cls.is(&tensor_type) {
            return Ok(r);
        }
        Ok(match r {
            VT::Tensor(t) => {
                let cur = self.tensor_subclass_of(py, &t);
                let already = match &cur {
                    Some(c) => c.cast::<PyType>().map_err(PyErr::from)?.is_subclass(cls)?,
                    None => false,
                };
                if already {
                    VT::Tensor(t)
                } else {
                    VT::Tensor(self.mark_subclass(py, &t, cls)?)
                }
            }
            VT::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items.iter() {
                    out.push(self.convert_to_subclass(py, i.clone(), cls)?);
                }
                VT::Tuple(Rc::new(out))
            }
            VT::NamedTuple { cls: nt, items } => {
                let mut out = Vec::with_capacity(items.len());
                for i in items.iter() {
                    out.push(self.convert_to_subclass(py, i.clone(), cls)?);
                }
                VT::NamedTuple { cls: nt, items: Rc::new(out) }
            }
            VT::List(l) => {
                let items = l.borrow().items.clone();
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.convert_to_subclass(py, i, cls)?);
                }
                crate::symbolic::variables::lists::new_list(out)
            }
            other => other,
        })
    }

    /// `t.as_subclass(cls)` in the graph: a new alias node (`t.view(t.size())`) marked `cls`, or
    /// `t`'s own node marked when the trace made `t` for this very conversion (it has no other
    /// holder: no source, not marked yet, the graph's newest node).
    fn mark_subclass(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, cls: &Bound<'_, PyAny>) -> VResult<Rc<TensorVariable>> {
        let newest = self.og.graph.nodes.last().map(|n| n.id == t.node).unwrap_or(false);
        if t.source.is_none() && newest && !self.og.tensor_subclasses.contains_key(&t.node) {
            self.og.tensor_subclasses.insert(t.node, cls.clone().unbind());
            return Ok(t.clone());
        }
        let alias = self.alias_node(py, t)?;
        self.og.tensor_subclasses.insert(alias.node, cls.clone().unbind());
        Ok(alias)
    }

    /// A new node viewing all of `t` (`t.view(t.size())`): a new tensor object in eager terms.
    fn alias_node(&mut self, py: Python<'_>, t: &Rc<TensorVariable>) -> VResult<Rc<TensorVariable>> {
        let tv = VT::Tensor(t.clone());
        let size = self.og.call(py, None, Some("size"), std::slice::from_ref(&tv), &[])?;
        match self.og.call(py, None, Some("view"), &[tv, size], &[])? {
            VT::Tensor(a) if a.node != t.node => Ok(a),
            _ => graph_break!(TensorSubclass, "as_subclass of a tensor the graph cannot alias"),
        }
    }

    /// Hook at the start of `call`: the calls subclass dispatch changes. `None`: not one of
    /// them, the call proceeds as usual.
    pub(crate) fn torch_function_call(&mut self, py: Python<'_>, func: &VT, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        match func {
            VT::TorchFunctionCtx { entered: true, all } => {
                // `DisableTorchFunctionSubclass.__exit__`.
                self.og.torch_function_disabled = self.og.torch_function_disabled.saturating_sub(1);
                if *all {
                    self.og.torch_function_all_disabled = self.og.torch_function_all_disabled.saturating_sub(1);
                }
                return Ok(Some(VT::constant(false.into_pyobject(py)?.to_owned().into_any().unbind())));
            }
            // The state queries, inside a block the trace entered (it does not switch the real
            // state): `_is_torch_function_enabled()` is False under either manager,
            // `_is_torch_function_all_disabled()` True under `DisableTorchFunction` (torch/csrc/
            // utils/disable_torch_function.cpp). Outside, the real answer, guarded.
            VT::TorchFunction(f) if self.og.torch_function_disabled > 0 && args.is_empty() && kwargs.is_empty() => {
                let tc = py.import("torch")?.getattr("_C")?;
                let f = f.bind(py);
                if f.is(&tc.getattr("_is_torch_function_enabled")?) {
                    return Ok(Some(VT::constant(false.into_pyobject(py)?.to_owned().into_any().unbind())));
                }
                if f.is(&tc.getattr("_is_torch_function_all_disabled")?) && self.og.torch_function_all_disabled > 0 {
                    return Ok(Some(VT::constant(true.into_pyobject(py)?.to_owned().into_any().unbind())));
                }
            }
            // `str(func)` / `repr(func)` of a torch callable (a `func` that `__torch_function__`
            // receives): a fixed string, folded.
            VT::Builtin(b) | VT::Class(b) if matches!(args, [VT::TorchFunction(_) | VT::Builtin(_)]) && kwargs.is_empty() => {
                let b = b.bind(py);
                let builtins = py.import("builtins")?;
                if b.is(&builtins.getattr("str")?) || b.is(&builtins.getattr("repr")?) {
                    let (VT::TorchFunction(f) | VT::Builtin(f)) = &args[0] else { unreachable!() };
                    return Ok(Some(VT::constant(b.call1((f.bind(py),))?.unbind())));
                }
                return Ok(None);
            }
            // `len(x)` / `abs(x)` of a subclass tensor: eager's `Tensor.__len__` / `__abs__`
            // dispatch.
            VT::Builtin(b) if args.len() == 1 && kwargs.is_empty() => {
                let b = b.bind(py).clone();
                let builtins = py.import("builtins")?;
                if b.is(&builtins.getattr("len")?) || b.is(&builtins.getattr("abs")?) {
                    return self.dispatch_call(py, &b, args, kwargs);
                }
                return Ok(None);
            }
            VT::Class(c) => {
                let c = c.bind(py);
                let tc = py.import("torch")?.getattr("_C")?;
                let all = c.is(&tc.getattr("DisableTorchFunction")?);
                if c.is(&tc.getattr("DisableTorchFunctionSubclass")?) || all {
                    if !args.is_empty() || !kwargs.is_empty() {
                        graph_break!(TensorSubclass, "{} with arguments", qualname(c));
                    }
                    return Ok(Some(VT::TorchFunctionCtx { entered: false, all }));
                }
                return Ok(None);
            }
            VT::TorchFunction(_) | VT::TensorMethod { .. } | VT::Function { .. } => {}
            _ => return Ok(None),
        }
        if let VT::TensorMethod { tensor, name } = func {
            let pyfunc = py.import("torch")?.getattr("Tensor")?.getattr(name.as_str())?;
            let mut all = vec![VT::Tensor(tensor.clone())];
            all.extend(args.iter().cloned());
            if name == "as_subclass" {
                // Not dispatched to `__torch_function__` (a plain C method in eager).
                return self.as_subclass(py, tensor, &all[1..], kwargs).map(Some);
            }
            return self.dispatch_call(py, &pyfunc, &all, kwargs);
        }
        let f = match func {
            VT::TorchFunction(f) | VT::Function { obj: f, .. } => f.bind(py).clone(),
            _ => return Ok(None),
        };
        if f.is(&default_tf_func(py)?) {
            // `Tensor.__torch_function__(cls, func, types, args=(), kwargs=None)`, reached
            // through `super()` or called by name.
            let names = ["cls", "func", "types", "args", "kwargs"];
            let mut slots: Vec<Option<VT>> = args.iter().cloned().map(Some).collect();
            slots.resize(5, None);
            for (k, v) in kwargs {
                match names.iter().position(|n| n == k) {
                    Some(i) if slots[i].is_none() => slots[i] = Some(v.clone()),
                    _ => graph_break!(ArgumentMismatch, "Tensor.__torch_function__() got an unexpected argument '{k}' (TypeError)"),
                }
            }
            let args_vt = slots[3].clone().unwrap_or_else(|| VT::Tuple(Rc::new(vec![])));
            let kwargs_vt = slots[4].clone().unwrap_or_else(|| VT::none(py));
            let (Some(VT::Class(cls)), Some(func), Some(types)) = (&slots[0], &slots[1], &slots[2]) else {
                graph_break!(TensorSubclass, "Tensor.__torch_function__ called without a class, func and types");
            };
            let cls = cls.bind(py).clone();
            return self.default_torch_function(py, &cls, func, types, &args_vt, &kwargs_vt).map(Some);
        }
        if !matches!(func, VT::TorchFunction(_)) {
            return Ok(None);
        }
        if f.is(&py.import("torch")?.getattr("_C")?.getattr("_disabled_torch_function_impl")?) {
            // `_disabled_torch_function_impl(func, types, args, kwargs)`: `func` with dispatch
            // off, its result as it is.
            let (Some(func), Some(_types)) = (args.first(), args.get(1)) else {
                graph_break!(TensorSubclass, "_disabled_torch_function_impl called without func and types");
            };
            let a = args.get(2).cloned().unwrap_or_else(|| VT::Tuple(Rc::new(vec![])));
            let k = args.get(3).cloned().unwrap_or_else(|| VT::none(py));
            return self.run_disabled(py, func, &a, &k).map(|(r, _)| Some(r));
        }
        if let (Some(name), Some(VT::Tensor(t))) = (tensor_attr_name(py, &f)?, args.first()) {
            if name == "as_subclass" {
                return self.as_subclass(py, t, &args[1..], kwargs).map(Some);
            }
        }
        if let Some(r) = self.dispatch_call(py, &f, args, kwargs)? {
            return Ok(Some(r));
        }
        // With no dispatch to do, a `func` that is not an ordinary torch function (a method,
        // slot or property of `torch.Tensor`, as `__torch_function__` receives it) runs as the
        // operation it stands for.
        if let Some(name) = getset_name(py, &f)? {
            let [obj] = args else { graph_break!(TensorSubclass, "{name}.__get__ with {} arguments", args.len()) };
            return self.getattr(py, obj, &name).map(Some);
        }
        let Some(name) = tensor_attr_name(py, &f)? else { return Ok(None) };
        if !kwargs.is_empty() && name.starts_with("__") {
            graph_break!(TensorSubclass, "Tensor.{name} with keyword arguments");
        }
        match (name.as_str(), args) {
            ("__getitem__", [obj, idx]) => return self.getitem(py, obj, idx).map(Some),
            ("__len__", [_]) => {
                let len = VT::Builtin(Rc::new(py.import("builtins")?.getattr("len")?.unbind()));
                return self.with_tf_disabled(|me| me.call(py, &len, args.to_vec(), vec![])).map(Some);
            }
            ("__setitem__", [obj, idx, v]) => return self.setitem(py, obj, idx.clone(), v.clone()).map(|_| Some(VT::none(py))),
            _ => {}
        }
        if let Some((_, op)) = REFLECTED.iter().find(|(n, _)| *n == name) {
            let [a, b] = args else { graph_break!(TensorSubclass, "Tensor.{name} with {} arguments", args.len()) };
            return self.operator(py, op, vec![b.clone(), a.clone()]).map(Some);
        }
        if name.starts_with("__") && name.ends_with("__") {
            let base = name.trim_start_matches("__").trim_end_matches("__");
            let op = match base {
                "and" | "or" | "not" => format!("{base}_"),
                "div" => "truediv".into(),
                "idiv" => "itruediv".into(),
                b => b.to_string(),
            };
            if self.og.handles.operator.bind(py).getattr(op.as_str()).is_ok() && !matches!(base, "len" | "contains" | "iter" | "index" | "bool" | "hash" | "format" | "repr") {
                return self.operator(py, &op, args.to_vec()).map(Some);
            }
            graph_break!(TensorSubclass, "Tensor.{name} passed to __torch_function__");
        }
        match args.first() {
            Some(VT::Tensor(t)) => {
                let m = VT::TensorMethod { tensor: t.clone(), name };
                self.call(py, &m, args[1..].to_vec(), kwargs.to_vec()).map(Some)
            }
            _ => graph_break!(TensorSubclass, "Tensor.{name} called on {}", args.first().map(|a| a.describe(py)).unwrap_or_default()),
        }
    }

    /// `t.as_subclass(cls)` with dispatch off (or on a plain tensor): an alias marked `cls`;
    /// `torch.Tensor` gives a plain alias.
    fn as_subclass(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        let cls = match (args, kwargs) {
            ([VT::Class(c)], []) => c.bind(py).clone(),
            ([], [(k, VT::Class(c))]) if k == "cls" => c.bind(py).clone(),
            _ => graph_break!(TensorSubclass, "as_subclass with arguments other than a class"),
        };
        let tensor_type = self.og.handles.tensor_type.bind(py).clone();
        let ty = cls.cast::<PyType>().map_err(PyErr::from)?;
        if !ty.is_subclass(&tensor_type)? {
            graph_break!(TensorSubclass, "as_subclass({}) of a class that is not a Tensor subclass (TypeError)", qualname(&cls));
        }
        let alias = self.alias_node(py, t)?;
        if !cls.is(&tensor_type) {
            if let Err(why) = supported_class(py, &cls)? {
                graph_break!(TensorSubclass, "{why}");
            }
            self.og.tensor_subclasses.insert(alias.node, cls.unbind());
        }
        Ok(VT::Tensor(alias))
    }

    /// Hook at the start of `operator` (and of `[]`, `[]=`): `operator.<name>(*args)` with an
    /// overloaded tensor among `args`, dispatched with the `func` and arguments eager's
    /// `Tensor` slot or Python operator passes.
    pub(crate) fn torch_function_operator(&mut self, py: Python<'_>, name: &str, args: &[VT]) -> VResult<Option<VT>> {
        let op = self.og.handles.operator.bind(py).getattr(name)?;
        self.dispatch_call(py, &op, args, &[])
    }

    /// `callable(*args, **kwargs)` where an overloaded tensor takes part: what eager hands to
    /// `__torch_function__` (`func`, `args`, `kwargs`: a Python-level `Tensor` method passes
    /// its own defaults as keywords, a C function `None`) is read off a run of the real callable
    /// on probe tensors (`dynamo._subclass.run_probe`); then `tf_dispatch`. `None` when no
    /// overloaded tensor takes part.
    fn dispatch_call(&mut self, py: Python<'_>, callable: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let types = self.overloaded_types(py, args, kwargs)?;
        if types.is_empty() {
            return Ok(None);
        }
        let helpers = py.import("dynamo._subclass")?;
        let mut probes: Vec<(Py<PyAny>, VT)> = Vec::new();
        let mut built = Vec::with_capacity(args.len());
        let mut probe_ok = true;
        for a in args {
            match to_probe(py, &helpers, a, &mut probes, 0)? {
                Some(v) => built.push(v),
                None => {
                    probe_ok = false;
                    break;
                }
            }
        }
        let kw = pyo3::types::PyDict::new(py);
        if probe_ok {
            for (k, v) in kwargs {
                match to_probe(py, &helpers, v, &mut probes, 0)? {
                    Some(p) => kw.set_item(k, p)?,
                    None => {
                        probe_ok = false;
                        break;
                    }
                }
            }
        }
        if !probe_ok {
            // Arguments a probe cannot stand for (a symbolic size, a dict): a C function hands
            // its arguments over as they are.
            if matches!(type_name(callable).as_str(), "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor") {
                let kwargs = if kwargs.is_empty() { None } else { Some(kwargs.to_vec()) };
                return self.tf_dispatch(py, callable, &types, args.to_vec(), kwargs).map(Some);
            }
            graph_break!(TensorSubclass, "{} on a subclass tensor with arguments the tracer cannot probe", qualname(callable));
        }
        let seen = helpers.call_method1("run_probe", (callable, PyTuple::new(py, built)?, kw))?;
        if seen.is_none() {
            graph_break!(TensorSubclass, "{} on a subclass tensor does not reach __torch_function__", qualname(callable));
        }
        let (func, pargs, pkwargs): (Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>) = seen.extract()?;
        let mut call_args = Vec::new();
        for a in pargs.try_iter()? {
            call_args.push(from_probe(py, &a?, &probes)?);
        }
        let call_kwargs = if pkwargs.is_none() {
            None
        } else {
            let d = pkwargs.cast::<pyo3::types::PyDict>().map_err(PyErr::from)?;
            let mut out = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                out.push((k.extract::<String>()?, from_probe(py, &v, &probes)?));
            }
            Some(out)
        };
        let types = self.overloaded_types(py, &call_args, call_kwargs.as_deref().unwrap_or(&[]))?;
        self.tf_dispatch(py, &func, &types, call_args, call_kwargs).map(Some)
    }

    /// Hook at the start of `getattr` on a tensor of a subclass: the class's own attributes
    /// (methods bound to the tensor, properties, classmethods, class constants), attributes the
    /// trace set on it or an input's instance attributes (read through its source), `__class__`,
    /// and `torch.Tensor`'s properties, which dispatch to `__torch_function__` as in eager.
    pub(crate) fn torch_function_getattr(&mut self, py: Python<'_>, obj: &VT, t: &Rc<TensorVariable>, name: &str) -> VResult<Option<VT>> {
        let Some(cls) = self.tensor_subclass_of(py, t) else { return Ok(None) };
        if name == "__class__" {
            return Ok(Some(VT::Class(Rc::new(cls.unbind()))));
        }
        if let Some(v) = self.og.tensor_attrs.get(&t.node).and_then(|a| a.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone())) {
            return Ok(Some(v));
        }
        let torch = py.import("torch")?;
        let tensor = torch.getattr("Tensor")?;
        // The class's own attributes, before `torch.Tensor` in its MRO.
        let mro = cls.getattr("__mro__")?.cast_into::<PyTuple>().map_err(PyErr::from)?;
        for (k_index, k) in mro.iter().enumerate() {
            if k.is(&tensor) {
                break;
            }
            let d = k.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            return Ok(Some(match type_name(&ca).as_str() {
                "function" => VT::Method { func: Box::new(self.class_function(py, &cls, &ca, |s| s.attr(name))?), self_: Box::new(obj.clone()) },
                "property" => {
                    let fget = ca.getattr("fget")?;
                    let f = self.class_function(py, &cls, &fget, |s| s.attr("__mro__").item(ItemKey::Int(k_index as i64)).attr("__dict__").item(ItemKey::Str(name.to_string())).attr("fget"))?;
                    self.call(py, &f, vec![obj.clone()], vec![])?
                }
                "classmethod" => VT::Method { func: Box::new(self.class_function(py, &cls, &ca.getattr("__func__")?, |s| s.attr(name).attr("__func__"))?), self_: Box::new(VT::Class(Rc::new(cls.clone().unbind()))) },
                "staticmethod" => self.class_function(py, &cls, &ca.getattr("__func__")?, |s| s.attr(name))?,
                _ if crate::symbolic::builder::is_literal(py, &ca) => VT::constant(ca.unbind()),
                other => graph_break!(TensorSubclass, "attribute {name} of tensor subclass {} is a {other}", qualname(&cls)),
            }));
        }
        // An input's instance attributes, through its source.
        if let Some(src) = &t.source {
            let real = self.og.inputs.iter().find(|(s, _)| s == src).map(|(_, r)| r.clone_ref(py));
            if let Some(real) = real {
                let d = py.import("builtins")?.getattr("object")?.call_method1("__getattribute__", (real.bind(py), "__dict__"))?;
                if let Ok(v) = d.get_item(name) {
                    return crate::symbolic::builder::wrap(py, self.og, &v, src.attr(name)).map(Some);
                }
            }
        }
        if self.og.torch_function_disabled > 0 || tf_disabled(py, &cls)? {
            return Ok(None);
        }
        let descr = match torch.getattr("_C")?.getattr("TensorBase")?.getattr("__dict__")?.get_item(name) {
            Ok(d) => d,
            Err(_) => match tensor.getattr("__dict__")?.get_item(name) {
                // `torch.Tensor`'s own getsets (`__dict__`, `__weakref__`) are CPython's, which
                // never dispatch; the instance dict of a subclass tensor is not modelled.
                Ok(d) if type_name(&d) == "getset_descriptor" => graph_break!(TensorSubclass, "Tensor.{name} of a subclass tensor"),
                Ok(d) => d,
                Err(_) => return Ok(None),
            },
        };
        match type_name(&descr).as_str() {
            "getset_descriptor" => {
                let func = descr.getattr("__get__")?;
                let types = self.overloaded_types(py, std::slice::from_ref(obj), &[])?;
                self.tf_dispatch(py, &func, &types, vec![obj.clone()], None).map(Some)
            }
            "property" => graph_break!(TensorSubclass, "Python property Tensor.{name} of a subclass tensor"),
            _ => Ok(None),
        }
    }

    /// Hook at the start of `store_attr` on a tensor: `t.name = v` on a subclass tensor the
    /// trace made is kept with the tracker (set on the object when it is rebuilt after the
    /// graph); other tensor attribute writes are breaks.
    pub(crate) fn torch_function_store_attr(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, name: &str, v: VT) -> VResult<bool> {
        let Some(cls) = self.tensor_subclass_of(py, t) else { return Ok(false) };
        if t.source.is_some() {
            graph_break!(TensorSubclass, "attribute write to a subclass tensor input");
        }
        let tensor = py.import("torch")?.getattr("Tensor")?;
        if cls.getattr("__setattr__")?.is(&tensor.getattr("__setattr__")?) && tensor.getattr(name).is_err() && crate::symbolic::variables::user_defined::static_type_lookup(cls.cast::<PyType>().map_err(PyErr::from)?, name)?.is_none() {
            self.og.tensor_attrs.entry(t.node).or_default().push((name.to_string(), v));
            return Ok(true);
        }
        graph_break!(TensorSubclass, "attribute {name} of a subclass tensor is a descriptor or the class sets attributes itself")
    }

    /// The tracker of `f`, a function found on tensor class `cls`: guarded through the class's
    /// source (`path` from it) when the class was reached through one (an input's
    /// `type(x)`, a global), so its closure and globals can be read; unguarded otherwise.
    fn class_function(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, f: &Bound<'_, PyAny>, path: impl FnOnce(&Arc<Source>) -> Arc<Source>) -> VResult<VT> {
        match self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned() {
            Some(src) => crate::symbolic::builder::wrap(py, self.og, f, path(&src)),
            None if type_name(f) == "function" => Ok(VT::Function { obj: Rc::new(f.clone().unbind()), source: None }),
            None => self.wrap_unguarded(py, f),
        }
    }

    /// `super(cls, klass).name` inside a classmethod of a tensor subclass (`super()` in
    /// `__torch_function__`): the walk of `klass.__mro__` after `cls`, a classmethod bound to
    /// `klass` (Objects/typeobject.c, `super_getattro`). `None` when `klass` is not a tensor class.
    pub(crate) fn tensor_class_super_getattr(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, klass: &Bound<'_, PyAny>, name: &str) -> VResult<Option<VT>> {
        let tensor_type = self.og.handles.tensor_type.bind(py).clone();
        let Ok(kt) = klass.cast::<PyType>() else { return Ok(None) };
        if !kt.is_subclass(&tensor_type)? {
            return Ok(None);
        }
        let mro = klass.getattr("__mro__")?.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let Some(start) = mro.iter().position(|c| c.is(cls)) else {
            graph_break!(SuperCall, "super(): {} is not in the MRO of {}", qualname(cls), qualname(klass));
        };
        for k in start + 1..mro.len() {
            let d = mro.get_item(k)?.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            let path = |s: &Arc<Source>| s.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()));
            return Ok(Some(match type_name(&ca).as_str() {
                "classmethod" => {
                    let f = ca.getattr("__func__")?;
                    let fv = self.class_function(py, klass, &f, |s| path(s).attr("__func__"))?;
                    VT::Method { func: Box::new(fv), self_: Box::new(VT::Class(Rc::new(klass.clone().unbind()))) }
                }
                "staticmethod" => self.class_function(py, klass, &ca.getattr("__func__")?, |s| path(s).attr("__func__"))?,
                "function" => self.class_function(py, klass, &ca, path)?,
                other => graph_break!(SuperCall, "super().{name} of tensor class {} is a {other}", qualname(klass)),
            }));
        }
        graph_break!(SuperCall, "super().{name} not found on {}", qualname(klass))
    }

    /// `type(t)` / `isinstance` of a tensor the trace marked as a subclass.
    pub(crate) fn torch_function_type_of(&self, py: Python<'_>, t: &TensorVariable) -> Option<Py<PyAny>> {
        if t.source.is_some() {
            return None;
        }
        self.tensor_subclass_of(py, t).map(|c| c.unbind())
    }
}

/// The node ids of marked tensors and their classes (for the rebuild after the graph).
pub fn rebuild_class<'py>(py: Python<'py>, og: &crate::symbolic::output_graph::OutputGraph, node: NodeId) -> Option<Bound<'py, PyAny>> {
    og.tensor_subclasses.get(&node).map(|c| c.bind(py).clone())
}

/// `Unsupported` for an input tensor of a class the trace does not model.
pub fn unsupported_input(reason: String) -> Unsupported {
    Unsupported::of(GraphBreakKind::TensorSubclass, reason)
}

/// The probe standing for `v` in a run of the real callable (`dispatch_call`): a fresh probe
/// tensor per tensor (recorded in `probes` with its tracker), lists and tuples of probes, the
/// value of a constant or of a class or torch callable; `None` for anything else.
fn to_probe<'py>(py: Python<'py>, helpers: &Bound<'py, PyAny>, v: &VT, probes: &mut Vec<(Py<PyAny>, VT)>, depth: usize) -> VResult<Option<Bound<'py, PyAny>>> {
    Ok(match v {
        VT::Tensor(_) => {
            let p = helpers.call_method0("new_probe")?;
            probes.push((p.clone().unbind(), v.clone()));
            Some(p)
        }
        VT::Constant(c) => Some(c.bind(py).clone()),
        VT::Class(c) | VT::TorchFunction(c) | VT::Builtin(c) => Some(c.bind(py).clone()),
        VT::Tuple(_) | VT::List(_) if depth < 2 => {
            let items: Vec<VT> = match v {
                VT::Tuple(items) => items.to_vec(),
                VT::List(l) => l.borrow().items.clone(),
                _ => unreachable!(),
            };
            let mut out = Vec::with_capacity(items.len());
            for i in &items {
                match to_probe(py, helpers, i, probes, depth + 1)? {
                    Some(p) => out.push(p),
                    None => return Ok(None),
                }
            }
            let obj = if matches!(v, VT::List(_)) { pyo3::types::PyList::new(py, out)?.into_any() } else { PyTuple::new(py, out)?.into_any() };
            probes.push((obj.clone().unbind(), v.clone()));
            Some(obj)
        }
        _ => None,
    })
}

/// The tracker of what a probe run handed to `__torch_function__`: the original tracker of a
/// probe or of a list or tuple built for the run, a tuple of such, or a constant.
fn from_probe(py: Python<'_>, obj: &Bound<'_, PyAny>, probes: &[(Py<PyAny>, VT)]) -> VResult<VT> {
    if let Some((_, v)) = probes.iter().find(|(p, _)| p.bind(py).is(obj)) {
        return Ok(v.clone());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        if t.get_type().is(py.get_type::<PyTuple>()) {
            let items = t.iter().map(|i| from_probe(py, &i, probes)).collect::<VResult<Vec<_>>>()?;
            return Ok(VT::Tuple(Rc::new(items)));
        }
    }
    if crate::symbolic::builder::is_literal(py, obj) || obj.is_instance_of::<PyType>() {
        return Ok(VT::constant(obj.clone().unbind()));
    }
    if matches!(type_name(obj).as_str(), "dtype" | "device" | "layout" | "memory_format" | "Size") {
        return Ok(VT::constant(obj.clone().unbind()));
    }
    graph_break!(TensorSubclass, "__torch_function__ would receive a {} the tracer did not pass", type_name(obj))
}
