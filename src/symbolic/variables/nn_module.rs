//! `torch.nn.Module`s (torch's `NNModuleVariable`): attribute and child lookup, slicing of
//! containers, construction in the frame, and calls (inlining `forward`).

use crate::source::Source;
use crate::symbolic::builder::wrap;
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::VResult;
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::user_defined::{static_type_lookup, class_attr_source};

impl<'a> InstructionTranslator<'a> {
    /// Whether `c` is one of torch's own `nn.Module` classes (`torch.nn.modules.*`).
    pub(crate) fn is_torch_nn_class(&mut self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        let Ok(t) = c.cast::<pyo3::types::PyType>() else { return Ok(false) };
        Ok(module.starts_with("torch.nn.modules.") && t.is_subclass(self.og.handles.module_type.bind(py))?)
    }

    /// `cls(*args, **kwargs)` for a torch `nn.Module` class with literal arguments that makes a
    /// module without parameters, tensor buffers or children (a loss, an activation,
    /// `Dropout(p)`): built for real now, under `torch.random.fork_rng` so that the construction
    /// leaves the random state as it found it, and used as a module without a source (a
    /// `DerivedModule` that a rebuild makes again from the same arguments). Anything else is
    /// left to Python (a graph break), before any construction.
    pub(crate) fn construct_module(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        let qual = crate::symbolic::variables::qualname(cls);
        if let Some(seq) = self.construct_sequential_of_derived(py, cls, args, kwargs)? {
            return Ok(seq);
        }
        // Note [symbolic module arguments]: a symbolic int argument (HF question answering's
        // `nn.CrossEntropyLoss(ignore_index=start_logits.size(1))` once the length is dynamic)
        // is given to the constructor as a `dynamo._shapes.SymArgument`, an int of its current
        // value that records any use of it. A constructor that only stores it (`self.ignore_index
        // = ignore_index`) gives a module whose attribute holding it stands for the symbolic int
        // in the trace (`DerivedModule::sym_attrs`), so `forward` passes the size to the graph op
        // as torch does. One that used the value, or put it elsewhere, is a break as before;
        // such a module is not made again after the graph (it has no remake).
        let shapes = py.import("dynamo._shapes")?;
        let mut spies: Vec<(Bound<'_, PyAny>, VT)> = Vec::new();
        let mut spy_of = |v: &VT| -> VResult<VT> {
            if let VT::SymNum(s) = v {
                let fake = s.fake.bind(py);
                if type_name(fake) == "SymInt" && !crate::symbolic::variables::tensor::float_derived(fake)? {
                    let hint = shapes.call_method1("sym_hint", (fake,))?;
                    let spy = shapes.getattr("SymArgument")?.call1((hint,))?;
                    spies.push((spy.clone(), v.clone()));
                    return Ok(VT::constant(spy.unbind()));
                }
            }
            Ok(v.clone())
        };
        let args: Vec<VT> = args.iter().map(&mut spy_of).collect::<VResult<_>>()?;
        let kwargs: Vec<(String, VT)> = kwargs.iter().map(|(k, v)| Ok((k.clone(), spy_of(v)?))).collect::<VResult<_>>()?;
        let (vals, kw) = self.literal_call_args(py, &args, &kwargs, &format!("constructing {qual}"))?;
        let vals = PyTuple::new(py, vals)?;
        let fork = py.import("torch.random")?.getattr("fork_rng")?;
        let fork_kw = PyDict::new(py);
        fork_kw.set_item("devices", PyList::empty(py))?;
        let ctx = fork.call((), Some(&fork_kw))?;
        // The constructor's warnings (`nn.LSTM(dropout=0.2)` with one layer) are held back: a
        // module with parameters is built again by Python after the break, which warns as
        // eager does; one kept in the trace warns when the graph runs (Note [warnings of
        // traced calls]). Before, the warning came twice.
        let catcher = py.import("dynamo.eval_frame")?.getattr("_RecordTraceWarnings")?.call0()?;
        let caught = catcher.call_method0("__enter__")?;
        ctx.call_method0("__enter__")?;
        let made = cls.call(&vals, Some(&kw));
        ctx.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        catcher.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        let m = made?;
        let empty = |what: &str| -> PyResult<bool> { Ok(m.call_method0(what)?.try_iter()?.next().is_none()) };
        if !(empty("parameters")? && empty("buffers")? && empty("children")?) {
            graph_break!(UnsupportedCall, "constructing {qual}, which has parameters, buffers or submodules");
        }
        let mut sym_attrs = Vec::new();
        for (spy, tracker) in &spies {
            let users = shapes.call_method1("sym_argument_users", (&m, spy))?;
            if users.is_none() {
                graph_break!(UnsupportedCall, "constructing {qual} with a symbolic int argument whose value the constructor uses");
            }
            for name in users.try_iter()? {
                sym_attrs.push((name?.extract::<String>()?, tracker.clone()));
            }
        }
        self.og.keep_trace_warnings(py, &caught)?;
        if !spies.is_empty() {
            self.og.derived_modules.insert(m.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: m.clone().unbind(), children: vec![], remake: None, sym_attrs });
            return Ok(VT::Module { obj: Rc::new(m.unbind()), source: None });
        }
        let partial = crate::symbolic::variables::functions::partial_type(py)?;
        let mut all = vec![cls.clone()];
        all.extend(vals.iter());
        let remake = partial.call(PyTuple::new(py, all)?, Some(&kw))?;
        self.og.derived_modules.insert(m.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: m.clone().unbind(), children: vec![], remake: Some(remake.unbind()), sym_attrs: vec![] });
        Ok(VT::Module { obj: Rc::new(m.unbind()), source: None })
    }

    /// Note [Sequential of modules made in the trace]: `nn.Sequential(nn.ReLU(), nn.Tanh())`
    /// in the frame. Each argument is a parameterless module the trace built
    /// (`construct_module`, a `DerivedModule` with a remake), so `Sequential`'s constructor,
    /// which only registers its arguments as children under "0", "1", ... (no parameters, no
    /// random draws), is run for real on them, and the container is one more derived module:
    /// nothing outside the trace holds it, its children are read without guards. It has no
    /// remake: one that outlives the graph is refused (`UnreconstructableValue`), since making
    /// it again would make children other than those the frame may also hand out. `None`
    /// when `cls` is not exactly `nn.Sequential` or an argument is anything else (then the
    /// literal-argument path decides).
    fn construct_sequential_of_derived(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !cls.is(py.import("torch.nn")?.getattr("Sequential")?) || !kwargs.is_empty() || args.is_empty() {
            return Ok(None);
        }
        let mut children = Vec::with_capacity(args.len());
        for a in args {
            match a {
                VT::Module { obj, source: None } if self.og.derived_modules.get(&(obj.as_ptr() as usize)).is_some_and(|d| d.remake.is_some()) => children.push(obj.bind(py).clone()),
                _ => return Ok(None),
            }
        }
        let m = cls.call1(PyTuple::new(py, children)?)?;
        self.og.derived_modules.insert(m.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: m.clone().unbind(), children: vec![], remake: None, sym_attrs: vec![] });
        Ok(Some(VT::Module { obj: Rc::new(m.unbind()), source: None }))
    }

    /// `m[a:b]` on a `ModuleList` or `Sequential` (their own `__getitem__`): the container their
    /// `__getitem__` makes (`self.__class__(...)` over the selected children, built for real:
    /// the constructor only registers the children), as a module without a source whose
    /// children are read through their sources in `m` (`OutputGraph::derived_modules`). The
    /// children are identity-guarded as they are read, so a call that slices afresh reuses the
    /// compiled code (the new container itself is never guarded).
    pub(crate) fn module_slice(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>, idx: &Bound<'_, PyAny>) -> VResult<VT> {
        let nn = py.import("torch.nn")?;
        let own = ["ModuleList", "Sequential"].iter().any(|c| {
            let f = nn.getattr(*c).and_then(|c| c.getattr("__getitem__"));
            f.map(|f| m.get_type().getattr("__getitem__").map(|g| g.is(&f)).unwrap_or(false)).unwrap_or(false)
        });
        if !own {
            graph_break!(UnsupportedOperation, "slicing {}", type_name(m));
        }
        self.guard_module_children(py, m, source)?;
        let sub = m.get_item(idx)?;
        let parent = m.getattr("_modules")?;
        let parent_keys: Vec<String> = parent.call_method0("keys")?.try_iter()?.map(|k| k?.extract::<String>()).collect::<PyResult<_>>()?;
        let mut children = Vec::new();
        for item in sub.getattr("_modules")?.call_method0("items")?.try_iter()? {
            let (k, c): (String, Bound<'_, PyAny>) = item?.extract()?;
            let Some(pk) = parent_keys.iter().find(|pk| parent.get_item(pk.as_str()).map(|p| p.is(&c)).unwrap_or(false)) else {
                graph_break!(NnModule, "a slice of {} holds a module that is not its child", type_name(m));
            };
            let Some(src) = self.module_child_source(py, m, source, pk) else {
                graph_break!(MissingSource, "slicing a module without a source");
            };
            children.push((k, src));
        }
        self.og.derived_modules.insert(sub.as_ptr() as usize, crate::symbolic::output_graph::DerivedModule { obj: sub.clone().unbind(), children, remake: None, sym_attrs: vec![] });
        Ok(VT::Module { obj: Rc::new(sub.unbind()), source: None })
    }

    /// Guards the names and order of `m`'s children (`DICT_KEYS` on `source._modules`) when
    /// the trace depends on them: iterating a `ModuleList`/`Sequential`/`ModuleDict` or taking
    /// its `len()`. Without it, `layers.append(...)` after a compile kept the old graph (the
    /// container is the same object, so its `ID_MATCH` still holds). A container made during
    /// tracing (no source) needs no guard: its children are fixed by the trace.
    pub(crate) fn guard_module_children(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>) -> VResult<()> {
        if let Some(s) = source {
            if self.og.derived_modules.contains_key(&(m.as_ptr() as usize)) {
                return Ok(());
            }
            let keys = PyList::new(py, m.getattr("_modules")?.call_method0("keys")?.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            self.og.add_guard(Some(s.attr("_modules")), crate::guards::GuardKind::DictKeys(keys.into_any().unbind()));
        }
        Ok(())
    }

    /// Guards what `len(m)`, `bool(m)` and iteration read of module `v`: for torch's
    /// `ModuleList`, `Sequential` and `ModuleDict` the keys of `_modules`; for any other class
    /// (a `ParameterList`, a user `__len__`) the instance itself (Note [modules guarded by
    /// type] in `builder.rs`).
    pub(crate) fn guard_module_contents(&mut self, py: Python<'_>, v: &VT) -> VResult<()> {
        let VT::Module { obj, source } = v else { return Ok(()) };
        let m = obj.bind(py);
        if reads_module_table(py, m, "__len__")? {
            self.guard_module_children(py, m, source)
        } else {
            self.pin_identity(v);
            Ok(())
        }
    }

    /// A child without a source of a container the trace built, when the child is itself a
    /// module the trace built (Note [Sequential of modules made in the trace]): the module as
    /// it is, unguarded. `None` for any other object.
    pub(crate) fn derived_child(&self, child: &Bound<'_, PyAny>) -> Option<VT> {
        self.og.derived_modules.contains_key(&(child.as_ptr() as usize)).then(|| VT::Module { obj: Rc::new(child.clone().unbind()), source: None })
    }

    /// The source of child `key` of module `m`: `source.key`, or for a container made during
    /// tracing (`module_slice`) the child's source in the container it was sliced from.
    pub(crate) fn module_child_source(&self, _py: Python<'_>, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>, key: &str) -> Option<Arc<Source>> {
        match source {
            Some(s) => Some(s.attr(key)),
            None => self.og.derived_modules.get(&(m.as_ptr() as usize)).and_then(|d| d.children.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())),
        }
    }

    /// `m.name` for a module: the class and the instance dict, then `nn.Module.__getattr__`'s
    /// `_parameters`, `_buffers`, `_modules` (Note [module attribute precedence]).
    pub(crate) fn module_getattr(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, source: Option<Arc<Source>>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&m.clone().unbind(), name) {
            return Ok(v);
        }
        // Note [symbolic module arguments].
        if let Some(v) = self.og.derived_modules.get(&(m.as_ptr() as usize)).and_then(|d| d.sym_attrs.iter().find(|(k, _)| k == name)).map(|(_, v)| v.clone()) {
            return Ok(v);
        }
        // `M.factor = 10` recorded in the trace (replayed after the graph): the real class still
        // holds the old value, so a read through an instance runs after the replay, as for user
        // objects (`user_object_getattr`).
        if self.class_write_pending(py, m.get_type().as_any(), name)? {
            graph_break!(UntracedValue, "attribute '{name}' of module {} after a write to its class", type_name(m));
        }
        // Note [hooks registered in the trace] (variables/hooks.rs).
        if source.is_some() && self.is_modelled_hook_method(py, m, name)? {
            return Ok(VT::ContainerMethod { container: Box::new(VT::Module { obj: Rc::new(m.clone().unbind()), source }), name: name.to_string() });
        }
        if crate::symbolic::variables::hooks::HOOK_DICTS.contains(&name) && self.has_pending_hooks(m.as_ptr() as usize) {
            graph_break!(UntracedValue, "{name} of a module with a hook registered in the frame");
        }
        let src = source.as_ref().map(|s| s.attr(name));
        let d = m.getattr("__dict__")?;
        // Note [a module's __dict__ and its attributes]: attribute writes are pending attribute
        // writes (`side_effects.attrs`), `m.__dict__` is a dict tracker of the real instance
        // dict; neither sees the other's pending writes. Reading the dict after an attribute
        // write, or an attribute after a write through the dict, is a break, so the read
        // happens after the replay.
        if name == "__dict__" && self.og.side_effects.attrs.iter().any(|w| w.ptr == m.as_ptr() as usize) {
            graph_break!(UntracedValue, "__dict__ of a module after an attribute write");
        }
        // Note [buffer writes in forward] (object_protocol.rs): the real `_buffers` table still
        // holds the old tensor until the replay.
        if name == "_buffers" {
            let buffers = d.get_item("_buffers").ok();
            let pending = self.og.side_effects.attrs.iter().any(|w| w.ptr == m.as_ptr() as usize && buffers.as_ref().is_some_and(|b| b.contains(w.name.as_str()).unwrap_or(true)));
            if pending {
                graph_break!(UntracedValue, "_buffers of a module after a write to one of its buffers");
            }
        }
        if let Some((_, tracked)) = self.og.dicts_by_ptr.get(&(d.as_ptr() as usize)) {
            if self.og.side_effects.dicts.iter().any(|w| Rc::ptr_eq(w, tracked)) {
                graph_break!(UntracedValue, "attribute '{name}' of a module after a write through its __dict__");
            }
        }
        // Note [module attribute precedence]: `m.name` is `object.__getattribute__` first: a
        // class attribute (a method, a property, a staticmethod, a module set on the class) or
        // an instance-dict entry wins, and `nn.Module.__getattr__` reads `_parameters`,
        // `_buffers`, `_modules` only when neither exists (Objects/object.c
        // `_PyObject_GenericGetAttrWithDict`; torch/nn/modules/module.py). A class with its own
        // `__getattr__` or `__getattribute__` answers for itself. So a submodule `activation`
        // shadowed by a method `activation` calls the method, as in eager (audit 50, K1). The
        // class lookup is recorded with the class's version guard.
        let cls = m.get_type();
        let by_tables = module_lookup_is_torchs(py, &cls)?
            && static_type_lookup(&cls, name)?.is_none()
            && !d.cast::<PyDict>().is_ok_and(|d| d.contains(name).unwrap_or(true));
        let tables: &[&str] = if by_tables { &["_parameters", "_buffers", "_modules"] } else { &[] };
        for &table in tables {
            if let Some(t) = d.get_item(table).ok() {
                // Note [module tables written in the trace]: `m.half()`/`m.to(...)` (`_apply`),
                // `register_buffer` and `add_module` write `m._buffers[k]` etc. through a dict
                // tracker of the real table, replayed after the graph; `m.k` read later in the
                // trace answers from that tracker, not from the real table that still holds the
                // old tensor (a float32 buffer after `.half()`).
                if let Some((_, tracked)) = self.og.dicts_by_ptr.get(&(t.as_ptr() as usize)) {
                    if self.og.side_effects.dicts.iter().any(|w| Rc::ptr_eq(w, tracked)) {
                        let tracked = tracked.clone();
                        let found = tracked.borrow().items.iter().find(|(k, _)| k.bind(py).extract::<&str>().is_ok_and(|k| k == name)).map(|(_, v)| v.clone());
                        match found {
                            Some(v) => return Ok(v),
                            None if t.cast::<PyDict>().is_ok_and(|t| t.contains(name).unwrap_or(true)) => {
                                graph_break!(UntracedValue, "attribute '{name}' of a module after it was removed from its {table} in the trace")
                            }
                            None => continue,
                        }
                    }
                }
                if let Ok(Some(v)) = t.cast::<PyDict>().map(|t| t.get_item(name)).unwrap_or(Ok(None)) {
                    return match (src, table) {
                        (Some(s), _) => wrap(py, self.og, &v, s),
                        (None, "_modules") => match self.module_child_source(py, m, &source, name) {
                            Some(s) => wrap(py, self.og, &v, s),
                            // Note [Sequential of modules made in the trace].
                            None if self.derived_child(&v).is_some() => Ok(self.derived_child(&v).expect("checked")),
                            None => graph_break!(MissingSource, "module attribute without a source"),
                        },
                        (None, _) if self.og.derived_modules.contains_key(&(m.as_ptr() as usize)) => self.wrap_unguarded(py, &v),
                        (None, _) => graph_break!(MissingSource, "module attribute without a source"),
                    };
                }
            }
        }
        let in_instance = d.cast::<PyDict>().ok().and_then(|d| d.get_item(name).ok().flatten());
        if in_instance.is_none() {
            // The raw class attribute decides the binding (`type(m).__mro__[k].__dict__[name]`):
            // a staticmethod gives its function unbound, a classmethod binds the class
            // (Objects/funcobject.c, `sm_descr_get` / `cm_descr_get`). Reading it through
            // `getattr(cls, name)` would make a staticmethod look like a plain function.
            if let Some((_, raw)) = static_type_lookup(&cls, name)? {
                match type_name(&raw).as_str() {
                    "staticmethod" => {
                        let f = raw.getattr("__func__")?;
                        return Ok(VT::Function { obj: Rc::new(f.unbind()), source: src });
                    }
                    "classmethod" => {
                        let f = raw.getattr("__func__")?;
                        let func = VT::Function { obj: Rc::new(f.unbind()), source: src.as_ref().map(|s| s.attr("__func__")) };
                        return Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(cls.clone().into_any().unbind()))) });
                    }
                    _ => {}
                }
            }
            if let Ok(class_attr) = cls.getattr(name) {
                if type_name(&class_attr) == "function" {
                    let func_src = src.as_ref().map(|s| s.attr("__func__"));
                    let func = VT::Function { obj: Rc::new(class_attr.unbind()), source: func_src };
                    let self_vt = VT::Module { obj: Rc::new(m.clone().unbind()), source };
                    return Ok(VT::Method { func: Box::new(func), self_: Box::new(self_vt) });
                }
                if type_name(&class_attr) == "property" {
                    let fget = class_attr.getattr("fget")?;
                    // Sourced as `type(m).__mro__[k].__dict__[name].fget` when the module is, so
                    // that a getter from another module's globals (transformers'
                    // `PreTrainedModel.loss_function`) reads them through `fget.__globals__`.
                    let func = match (&source, static_type_lookup(&cls, name)?) {
                        (Some(s), Some((k, raw))) if raw.is(&class_attr) && type_name(&fget) == "function" => {
                            let fget_src = class_attr_source(s, k, name).attr("fget");
                            match wrap(py, self.og, &fget, fget_src.clone())? {
                                // A getter defined in torch (the property that
                                // `torch.nn.utils.parametrize` puts on a parametrized module's
                                // class, `get_parametrized`) is Python code over the module, not a
                                // tensor op: inlined, never a graph node taking the module.
                                VT::TorchFunction(f) => VT::Function { obj: f, source: Some(fget_src) },
                                other => other,
                            }
                        }
                        _ => VT::Function { obj: Rc::new(fget.unbind()), source: None },
                    };
                    let self_vt = VT::Module { obj: Rc::new(m.clone().unbind()), source };
                    return self.call(py, &func, vec![self_vt], vec![]);
                }
            }
        }
        let v = match m.getattr(name) {
            Ok(v) => v,
            // Note [missing module attributes]: `nn.Module.__getattr__` raises AttributeError
            // for a name found in none of `_parameters`, `_buffers`, `_modules` (register_buffer's
            // `hasattr(self, name)` in a module's `__init__`). With the class's lookup torch's
            // own, that is the trace's AttributeError, which `hasattr`/`getattr(m, n, d)` and
            // `except AttributeError` catch as in eager; a module from the frame is guarded to
            // still lack the name.
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) && module_lookup_is_torchs(py, &cls)? => {
                if let Some(s) = &source {
                    self.og.add_guard(Some(s.clone()), crate::guards::GuardKind::NoAttr(name.to_string()));
                }
                let msg = e.value(py).str().map(|m| m.to_string()).unwrap_or_default();
                return Err(crate::symbolic::Unsupported::attribute_error(py, name, msg));
            }
            Err(e) => return Err(e.into()),
        };
        match src {
            Some(s) => wrap(py, self.og, &v, s),
            // A method of the module bound to it in `__init__` (`self.act = self._gelu_python`,
            // Note [modules built in the frame]): the class's function with the module as self.
            None if self.og.derived_modules.contains_key(&(m.as_ptr() as usize))
                && type_name(&v) == "method"
                && v.getattr("__self__").is_ok_and(|s| s.is(m)) =>
            {
                let f = v.getattr("__func__")?;
                let fname: String = f.getattr("__name__")?.extract()?;
                let func = match self.class_attr_path(py, &cls, &fname)? {
                    Some(s) if static_type_lookup(&cls, &fname)?.is_some_and(|(_, g)| g.is(&f)) => wrap(py, self.og, &f, s)?,
                    _ => VT::Function { obj: Rc::new(f.unbind()), source: None },
                };
                Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Module { obj: Rc::new(m.clone().unbind()), source: None }) })
            }
            // A module made in the trace: nothing else holds it, its attributes are as made.
            None if self.og.derived_modules.contains_key(&(m.as_ptr() as usize)) => self.wrap_unguarded(py, &v),
            None => graph_break!(MissingSource, "module attribute without a source"),
        }
    }

    /// Runs module `func` (a `VT::Module`) as `nn.Module.__call__` does (`Module._call_impl`,
    /// torch/nn/modules/module.py): the global and per-module forward-pre hooks, `forward`
    /// (the class's; guarded), then the global and per-module forward hooks, as Note [module
    /// hooks] says. Backward hooks (`register_full_backward_hook`, `register_backward_hook`,
    /// global or per module) are a graph break (GB0013) naming them.
    pub(crate) fn call_module(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let VT::Module { obj, source } = func else { graph_break!(NnModule, "call_module of {}", func.describe(py)) };
        let m = obj.bind(py);
        // `nn.Module.__call__` runs `self._call_impl`: looked up on the class here (so a class
        // patched after the compile recompiles, Note [class lookups are versioned]); one set on
        // the instance, or another on the class, is not traced.
        let impl_fn = self.og.handles.module_call_impl.bind(py);
        let standard_impl = crate::symbolic::variables::user_defined::static_type_lookup(&m.get_type(), "_call_impl")?.is_some_and(|(_, f)| f.is(impl_fn));
        let instance_impl = m.getattr("__dict__").and_then(|d| d.contains("_call_impl")).unwrap_or(true);
        if !standard_impl || instance_impl {
            graph_break!(NnModule, "module {} is called through another _call_impl than nn.Module's", type_name(m));
        }
        if let Some(s) = source {
            self.og.add_guard(Some(s.clone()), crate::guards::GuardKind::NoInstanceAttr("_call_impl".into()));
        }
        for hooks in ["_backward_hooks", "_backward_pre_hooks"] {
            if let Ok(h) = m.getattr(hooks) {
                if h.len().unwrap_or(0) > 0 {
                    graph_break!(NnModule, "module {} has {hooks} (backward hooks are not traced)", type_name(m));
                }
            }
        }
        let gh = py.import("torch.nn.modules.module")?;
        for hooks in ["_global_backward_hooks", "_global_backward_pre_hooks"] {
            if let Ok(h) = gh.getattr(hooks) {
                if h.len().unwrap_or(0) > 0 {
                    graph_break!(NnModule, "global module {hooks} are registered (backward hooks are not traced)");
                }
            }
        }
        let global_hooks = Arc::new(crate::source::Source::Module { name: "torch.nn.modules.module".into() });
        let pre = self.module_hooks(py, &gh, &global_hooks, "_global_forward_pre_hooks", m, source, "_forward_pre_hooks")?;
        let post = self.module_hooks(py, &gh, &global_hooks, "_global_forward_hooks", m, source, "_forward_hooks")?;
        // Hooks and an instance-level `forward` change what calling the module does: guard
        // that the backward hooks stay absent (global ones registered after compiling too).
        for hooks in ["_global_backward_hooks", "_global_backward_pre_hooks"] {
            self.og.add_guard(Some(global_hooks.attr(hooks)), crate::guards::GuardKind::LenMatch(0));
        }
        if let Some(s) = source {
            for hooks in ["_backward_hooks", "_backward_pre_hooks"] {
                if m.getattr(hooks).is_ok() {
                    self.og.add_guard(Some(s.attr(hooks)), crate::guards::GuardKind::LenMatch(0));
                }
            }
            self.og.add_guard(Some(s.clone()), crate::guards::GuardKind::NoInstanceAttr("forward".into()));
        }
        if pre.is_empty() && post.is_empty() {
            return self.call_module_forward(py, func, args, kwargs);
        }
        // Note [module hooks]
        // ~~~~~~~~~~~~~~~~~~~~
        // A module with forward or forward-pre hooks is traced as `_call_impl` runs it, not
        // broken on (a break there broke every enclosing frame too, so a resnet with one
        // hooked conv compiled per block and hit the cache size limit). Step by step: each
        // pre-hook `hook(m, args)` (or `hook(m, args, kwargs)` when registered with_kwargs)
        // in global-then-module registration order, a non-None result replacing `args` (a
        // non-tuple wrapped in one) or `(args, kwargs)`; then `forward`; then each forward
        // hook `hook(m, args[, kwargs], result)`, a non-None result replacing `result`. The
        // hooks are inlined like any call, so a closure appending to a list is a side effect
        // replayed after the graph, in order. `args` is the one tuple every hook sees and
        // `kwargs` the one dict (a with_kwargs hook may change it in place before `forward`
        // reads it). Guards (`module_hooks`): the key lists of the four dicts and each hook's
        // identity. `always_call` hooks are not run specially: torch's `_call_impl` skips
        // that path when compiling too, and a compiled graph that raises reruns its frame as
        // ordinary Python, where `_call_impl` runs them.
        let mut args_vt = VT::Tuple(Rc::new(args));
        let mut kwargs_vt = crate::symbolic::variables::dicts::new_dict(kwargs.into_iter().map(|(k, v)| (pyo3::types::PyString::new(py, &k).into_any().unbind(), v)).collect());
        for (hook, with_kwargs) in pre {
            if with_kwargs {
                let r = self.call(py, &hook, vec![func.clone(), args_vt.clone(), kwargs_vt.clone()], vec![])?;
                if r.as_constant(py).map(|c| c.is_none()).unwrap_or(false) {
                    continue;
                }
                let pair = match &r {
                    VT::Tuple(items) if items.len() == 2 => items.clone(),
                    _ => graph_break!(NnModule, "forward pre-hook with kwargs of {} returned {}, not None or (args, kwargs)", type_name(m), r.describe(py)),
                };
                args_vt = self.hook_args(py, &pair[0])?;
                kwargs_vt = pair[1].clone();
            } else {
                let r = self.call(py, &hook, vec![func.clone(), args_vt.clone()], vec![])?;
                if r.as_constant(py).map(|c| c.is_none()).unwrap_or(false) {
                    continue;
                }
                args_vt = match &r {
                    VT::Tuple(_) | VT::NamedTuple { .. } => r.clone(),
                    VT::Constant(c) if c.bind(py).is_instance_of::<PyTuple>() => r.clone(),
                    _ => VT::Tuple(Rc::new(vec![r.clone()])),
                };
            }
        }
        let call_args = self.unpack(py, &args_vt)?;
        let call_kwargs = self.dict_items(py, &kwargs_vt)?;
        let mut result = self.call_module_forward(py, func, call_args, call_kwargs)?;
        for (hook, with_kwargs) in post {
            let mut hook_args = vec![func.clone(), args_vt.clone()];
            if with_kwargs {
                hook_args.push(kwargs_vt.clone());
            }
            hook_args.push(result.clone());
            let r = self.call(py, &hook, hook_args, vec![])?;
            if !r.as_constant(py).map(|c| c.is_none()).unwrap_or(false) {
                result = r;
            }
        }
        Ok(result)
    }

    /// The `args` a with-kwargs forward pre-hook's `(args, kwargs)` gives: kept as the hook
    /// returned it when it is a tuple (`*args` unpacks it later), else the tuple of its items.
    fn hook_args(&mut self, py: Python<'_>, v: &VT) -> VResult<VT> {
        match v {
            VT::Tuple(_) | VT::NamedTuple { .. } => Ok(v.clone()),
            _ => Ok(VT::Tuple(Rc::new(self.unpack(py, v)?))),
        }
    }

    /// The hooks `_call_impl` runs for one kind (`local` = `"_forward_pre_hooks"` or
    /// `"_forward_hooks"`): the global dict's then the module's, in registration order, each
    /// as (hook, with_kwargs). Guards the key lists of both dicts (DICT_KEYS, or LENGTH_CHECK 0
    /// when empty) so that registering or removing a hook (`RemovableHandle.remove()`)
    /// recompiles, and each hook by its source `dict[hook_id]` (wrapping a function guards its
    /// identity). Hook ids come from one process-wide counter and are never reused, so the
    /// `*_with_kwargs` membership of an id cannot change while the id is in the guarded keys.
    /// A module without a source (made in the frame) that has hooks is a graph break.
    #[allow(clippy::too_many_arguments)]
    fn module_hooks(&mut self, py: Python<'_>, gh: &Bound<'_, PyModule>, global_src: &Arc<Source>, global: &str, m: &Bound<'_, PyAny>, source: &Option<Arc<Source>>, local: &str) -> VResult<Vec<(VT, bool)>> {
        // Global pre-hooks have no with_kwargs form; `_call_impl` asks only the module's dict.
        let global_kw = if local == "_forward_hooks" { Some("_global_forward_hooks_with_kwargs") } else { None };
        let local_kw = if local == "_forward_hooks" { "_forward_hooks_with_kwargs" } else { "_forward_pre_hooks_with_kwargs" };
        let mut out = Vec::new();
        let gdict = gh.getattr(global)?;
        let gsrc = global_src.attr(global);
        self.guard_hook_keys(py, &gdict, &gsrc)?;
        let m_kw = m.getattr(local_kw).ok();
        let g_kw = global_kw.and_then(|n| gh.getattr(n).ok());
        let is_kw = |hid: &Bound<'_, PyAny>| -> bool {
            m_kw.as_ref().map(|d| d.contains(hid).unwrap_or(false)).unwrap_or(false)
                || g_kw.as_ref().map(|d| d.contains(hid).unwrap_or(false)).unwrap_or(false)
        };
        // Each hook of dict `d` (at `src`), in order, sourced as `src[hook_id]`.
        let push_hooks = |this: &mut Self, d: &Bound<'_, PyAny>, src: &Arc<Source>, out: &mut Vec<(VT, bool)>| -> VResult<()> {
            for item in d.call_method0("items")?.try_iter()? {
                let (hid, hook): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
                let key = hid.extract::<i64>().map(crate::source::ItemKey::Int).unwrap_or_else(|_| crate::source::ItemKey::Object(crate::source::KeyObject::new(&hid)));
                let h = wrap(py, this.og, &hook, src.item(key))?;
                out.push((h, is_kw(&hid)));
            }
            Ok(())
        };
        push_hooks(self, &gdict, &gsrc, &mut out)?;
        let Ok(ldict) = m.getattr(local) else { return Ok(out) };
        match source {
            Some(s) => {
                let lsrc = s.attr(local);
                self.guard_hook_keys(py, &ldict, &lsrc)?;
                // Note [hooks registered in the trace]: pending ones around the real ones, a
                // `prepend` one before everything registered earlier.
                let pending = self.pending_module_hooks(m.as_ptr() as usize, local == "_forward_pre_hooks");
                let mut own = Vec::new();
                push_hooks(self, &ldict, &lsrc, &mut own)?;
                for (hook, with_kwargs, prepend) in pending {
                    if prepend {
                        own.insert(0, (hook, with_kwargs));
                    } else {
                        own.push((hook, with_kwargs));
                    }
                }
                out.extend(own);
            }
            None if ldict.len().unwrap_or(0) > 0 => graph_break!(NnModule, "module {} made in the frame has {local}", type_name(m)),
            None => {}
        }
        Ok(out)
    }

    /// Guards the keys of hook dict `d` at `src`: LENGTH_CHECK 0 when it is empty (the common
    /// case, cheaper), else DICT_KEYS with its ids in order.
    fn guard_hook_keys(&mut self, py: Python<'_>, d: &Bound<'_, PyAny>, src: &Arc<Source>) -> VResult<()> {
        if d.len()? == 0 {
            self.og.add_guard(Some(src.clone()), crate::guards::GuardKind::LenMatch(0));
        } else {
            let keys = PyList::new(py, d.call_method0("keys")?.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            self.og.add_guard(Some(src.clone()), crate::guards::GuardKind::DictKeys(keys.into_any().unbind()));
        }
        Ok(())
    }

    /// `forward(*args, **kwargs)` of module `func`, inlined: the class's `forward` (an
    /// instance-level `forward` or a non-function one is a graph break), guarded by identity.
    fn call_module_forward(&mut self, py: Python<'_>, func: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let VT::Module { obj, source } = func else { graph_break!(NnModule, "call_module of {}", func.describe(py)) };
        let m = obj.bind(py);
        let cls = m.get_type();
        if m.getattr("__dict__")?.contains("forward")? {
            graph_break!(NnModule, "module {} has an instance-level forward", type_name(m));
        }
        let fwd = cls.getattr("forward")?;
        if type_name(&fwd) != "function" {
            graph_break!(NnModule, "module {} forward is not a Python function", type_name(m));
        }
        // Guarded by identity through its source: a `forward` patched on
        // the class after compiling (`mock.patch.object(Attention, "forward", ...)`) then
        // recompiles instead of running the old one.
        // A `@staticmethod` forward is called without the module (`self.forward(*args)` in
        // `Module._call_impl` binds nothing): audit 51, P6.
        let is_static = static_type_lookup(&cls, "forward")?.is_some_and(|(_, raw)| type_name(&raw) == "staticmethod");
        let fwd_source = match source {
            Some(s) if is_static => Some(s.attr("forward")),
            Some(s) => Some(s.attr("forward").attr("__func__")),
            // A module built in the frame: through its class (Note [modules built in the frame]),
            // whose dict holds the staticmethod object itself.
            None if is_static => self.class_attr_path(py, &cls, "forward")?.map(|s| s.attr("__func__")),
            None => self.class_attr_path(py, &cls, "forward")?,
        };
        if let Some(fs) = &fwd_source {
            self.og.add_guard(Some(fs.clone()), crate::guards::GuardKind::id_match(fwd.clone().unbind()));
        }
        let f = VT::Function { obj: Rc::new(fwd.unbind()), source: fwd_source };
        let mut all = if is_static { vec![] } else { vec![func.clone()] };
        all.extend(args);
        // A `forward` decorated with `@torch.no_grad()` (transformers' sinusoidal position
        // embeddings): its body under the grad mode, as for any decorated function.
        if let Some(r) = self.grad_mode_decorated_call(py, &f, &all, &kwargs)? {
            return r;
        }
        self.inline_call(py, &f, all, kwargs)
    }
}

/// Whether attribute lookup on instances of module class `cls` is torch's own: `object`'s
/// `__getattribute__` and `nn.Module.__getattr__` (Note [missing module attributes]).
fn module_lookup_is_torchs(py: Python<'_>, cls: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    let module = py.import("torch.nn")?.getattr("Module")?;
    Ok(cls.getattr("__getattribute__")?.is(py.get_type::<PyAny>().getattr("__getattribute__")?) && cls.getattr("__getattr__")?.is(module.getattr("__getattr__")?))
}

// Note [modules built in the frame]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `Act()` for a user subclass of `nn.Module` inside `forward` (transformers' `ACT2FN[name]`
// makes a new `GELUActivation()` on every call): the object is made for real by
// `object.__new__(cls)` (nothing of the user's runs: the class has no `__new__` of its own and
// its metaclass is `type`) and is private to the trace, a derived module without a source. Its
// `__init__` is inlined like any call, so whatever it does outside the object (a global
// counter, a print) is recorded or breaks as anywhere else. On the object itself:
// `nn.Module.__init__` runs for real with its literal arguments (`module_base_init`), and an
// attribute write while `__init__` runs goes through the real `nn.Module.__setattr__` with the
// real value (`module_init_setattr`): a literal, a function, a class, a torch function or
// another module (one from outside the frame then becomes a child read through its source).
// A tensor, or any value the trace built, is a break (a parameter or buffer made in `forward`
// is not modelled). After `__init__`, the module is read and called like a module built by
// `construct_module`: its attributes as made, no guards. If it outlives the graph it is made
// again by `cls(*args, **kwargs)`, only when its arguments are literals and its `__init__`
// wrote nothing outside the object (else GB0014): the call then does what the traced one did.
// Writes to it after `__init__` are breaks, as for any module without a source.

impl<'a> InstructionTranslator<'a> {
    /// Whether calling class `c` builds a user `nn.Module` the trace can build itself (Note
    /// [modules built in the frame]): a subclass of `nn.Module` outside torch, with metaclass
    /// `type`, `object.__new__` and a Python `__init__`.
    pub(crate) fn is_user_module_class(&mut self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        let Ok(t) = c.cast::<pyo3::types::PyType>() else { return Ok(false) };
        if !t.is_subclass(self.og.handles.module_type.bind(py))? || !t.get_type().is(py.get_type::<pyo3::types::PyType>()) {
            return Ok(false);
        }
        let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "torch" || module.starts_with("torch.") {
            return Ok(false);
        }
        let object_type = py.get_type::<pyo3::types::PyAny>();
        if !t.getattr("__new__")?.is(object_type.getattr("__new__")?) {
            return Ok(false);
        }
        Ok(static_type_lookup(t, "__init__")?.is_some_and(|(_, f)| type_name(&f) == "function"))
    }

    /// The source of `ty.__mro__[k].__dict__[name]`, the class attribute `name` of class `ty`
    /// (found at `k`): through the class's own source when the trace reached it by one, else
    /// through its name (`sys.modules[ty.__module__].<qualname>`, checked to give `ty`). A
    /// function read through it is guarded by identity as any other.
    pub(crate) fn class_attr_path(&mut self, py: Python<'_>, ty: &Bound<'_, pyo3::types::PyType>, name: &str) -> VResult<Option<Arc<Source>>> {
        let Some((k, _)) = static_type_lookup(ty, name)? else { return Ok(None) };
        let cls_source = match self.og.class_sources.get(&(ty.as_ptr() as usize)).cloned() {
            Some(s) => s,
            None => {
                let module: String = ty.getattr("__module__")?.extract()?;
                let qualname: String = ty.getattr("__qualname__")?.extract()?;
                if qualname.contains('<') {
                    return Ok(None);
                }
                let Ok(mut obj) = py.import("sys")?.getattr("modules")?.get_item(&module) else { return Ok(None) };
                let mut s = Arc::new(Source::Module { name: module });
                for part in qualname.split('.') {
                    let Ok(next) = obj.getattr(part) else { return Ok(None) };
                    obj = next;
                    s = s.attr(part);
                }
                if !obj.is(ty) {
                    return Ok(None);
                }
                s
            }
        };
        Ok(Some(cls_source.attr("__mro__").item(crate::source::ItemKey::Int(k as i64)).attr("__dict__").item(crate::source::ItemKey::Str(name.to_string()))))
    }

    /// `cls(*args, **kwargs)` for a user module class (Note [modules built in the frame]).
    pub(crate) fn construct_user_module(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let ty = cls.cast::<pyo3::types::PyType>().map_err(PyErr::from)?.clone();
        let (k, init) = static_type_lookup(&ty, "__init__")?.expect("checked by is_user_module_class");
        let _ = k;
        let init_vt = match self.class_attr_path(py, &ty, "__init__")? {
            Some(s) => wrap(py, self.og, &init, s)?,
            None => VT::Function { obj: Rc::new(init.unbind()), source: None },
        };
        // The arguments a remake would pass, when all are literals.
        let literal_args = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>();
        let literal_kwargs = kwargs.iter().map(|(k, a)| self.literal_value(py, a).map(|v| (k.clone(), v))).collect::<Option<Vec<_>>>();
        let obj = py.get_type::<pyo3::types::PyAny>().call_method1("__new__", (cls,))?;
        let ptr = obj.as_ptr() as usize;
        self.og.derived_modules.insert(ptr, crate::symbolic::output_graph::DerivedModule { obj: obj.clone().unbind(), children: vec![], remake: None, sym_attrs: vec![] });
        let vt = VT::Module { obj: Rc::new(obj.unbind()), source: None };
        let writes_before = self.og.side_effects.writes;
        let calls_before = self.og.side_effects.logger_calls.len();
        self.og.modules_in_init.insert(ptr);
        let mut all = vec![vt.clone()];
        all.extend(args);
        let r = self.call(py, &init_vt, all, kwargs);
        self.og.modules_in_init.remove(&ptr);
        let r = r?;
        if !r.as_constant(py).is_some_and(|c| c.is_none()) {
            graph_break!(RaisesException, "__init__() of {} returned {} (TypeError: __init__() should return None)", type_name(cls), r.describe(py));
        }
        let pure = self.og.side_effects.writes == writes_before && self.og.side_effects.logger_calls.len() == calls_before;
        if let (true, Some(vals), Some(kw)) = (pure, literal_args, literal_kwargs) {
            let d = PyDict::new(py);
            for (k, v) in kw {
                d.set_item(k, v)?;
            }
            let mut all = vec![cls.clone()];
            all.extend(vals);
            let remake = crate::symbolic::variables::functions::partial_type(py)?.call(PyTuple::new(py, all)?, Some(&d))?;
            if let Some(dm) = self.og.derived_modules.get_mut(&ptr) {
                dm.remake = Some(remake.unbind());
            }
        }
        Ok(vt)
    }

    /// `nn.Module.__init__(self, *args, **kwargs)` on a module whose `__init__` the trace runs
    /// (`super().__init__()`): run for real on the private object with its literal arguments.
    /// `None` for any other call.
    pub(crate) fn module_base_init(&mut self, py: Python<'_>, func: &VT, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let VT::Function { obj: f, .. } = func else { return Ok(None) };
        let Some(VT::Module { obj: m, source: None }) = args.first() else { return Ok(None) };
        if !self.og.modules_in_init.contains(&(m.as_ptr() as usize)) {
            return Ok(None);
        }
        let base_init = self.og.handles.module_type.bind(py).getattr("__dict__")?.get_item("__init__")?;
        if !f.bind(py).is(&base_init) {
            return Ok(None);
        }
        let (vals, kw) = self.literal_call_args(py, &args[1..], kwargs, "nn.Module.__init__")?;
        let mut all = vec![m.bind(py).clone()];
        all.extend(vals);
        base_init.call(PyTuple::new(py, all)?, Some(&kw))?;
        Ok(Some(VT::none(py)))
    }

    /// `m.name = v` while `m`'s `__init__` runs in the trace (Note [modules built in the
    /// frame]): the real write, through the class's `__setattr__` when it is `nn.Module`'s.
    pub(crate) fn module_init_setattr(&mut self, py: Python<'_>, m: &Rc<Py<PyAny>>, name: &str, v: &VT) -> VResult<()> {
        let m = m.bind(py);
        let module_setattr = self.og.handles.module_type.bind(py).getattr("__setattr__")?;
        if !m.get_type().getattr("__setattr__")?.is(&module_setattr) {
            graph_break!(SideEffect, "attribute write {}.{name} in __init__ (a __setattr__ of its own)", type_name(m));
        }
        let real = match v {
            VT::Constant(c) if is_literal_or_code(py, c.bind(py)) => c.bind(py).clone(),
            VT::Function { obj, .. } | VT::TorchFunction(obj) | VT::Builtin(obj) | VT::Class(obj) => obj.bind(py).clone(),
            VT::Module { obj, source } => {
                let child = obj.bind(py).clone();
                match source {
                    Some(s) => {
                        if let Some(dm) = self.og.derived_modules.get_mut(&(m.as_ptr() as usize)) {
                            dm.children.push((name.to_string(), s.clone()));
                        }
                    }
                    None if self.og.derived_modules.contains_key(&(child.as_ptr() as usize)) => {}
                    None => graph_break!(MissingSource, "module without a source stored in a module built in the frame"),
                }
                child
            }
            VT::Method { func, self_ } if matches!(self_.as_ref(), VT::Module { obj, source: None } if obj.is(m)) => match func.as_ref() {
                // `self.act = self._gelu_python`: a method bound to the module itself.
                VT::Function { obj, .. } => py.import("types")?.getattr("MethodType")?.call1((obj.bind(py), m))?,
                _ => graph_break!(SideEffect, "attribute write {}.{name} = {} in __init__", type_name(m), v.describe(py)),
            },
            _ => graph_break!(SideEffect, "attribute write {}.{name} = {} in __init__ (not a value made outside the trace)", type_name(m), v.describe(py)),
        };
        m.setattr(name, real)?;
        Ok(())
    }
}

/// A literal or a code object: values whose identity no trace depends on.
fn is_literal_or_code(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    crate::symbolic::builder::is_literal(py, v) || type_name(v) == "code"
}

/// Whether `m`'s class method `name` (`__len__`, `__getitem__`) is that of torch's
/// `ModuleList`, `Sequential` or `ModuleDict`, which read only the keys of `_modules`.
pub(crate) fn reads_module_table(py: Python<'_>, m: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    let nn = py.import("torch.nn")?;
    let Ok(own) = m.get_type().getattr(name) else { return Ok(false) };
    Ok(["ModuleList", "Sequential", "ModuleDict"].iter().any(|c| nn.getattr(*c).and_then(|c| c.getattr(name)).is_ok_and(|f| f.is(&own))))
}
