//! Builtin functions (torch's `BuiltinVariable`): `len`, `isinstance`, `getattr`, `min`/`max`,
//! ... called on trackers, environment queries (`torch.compiler.is_compiling`), and unbound
//! descriptors of builtin types (`dict.__getitem__(d, k)`).

use crate::guards::GuardKind;
use crate::symbolic::builder::is_literal;
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::rc::Rc;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::constant::{constants_of, const_bool};
use crate::symbolic::variables::lists::{make_tuple, new_list};
use crate::symbolic::variables::dicts::new_dict;
use crate::symbolic::variables::iter::{IterKind, IteratorState};
use crate::symbolic::variables::user_defined::static_type_lookup;

impl<'a> InstructionTranslator<'a> {
    /// A torch query about the runtime environment (`torch.cuda.is_available()`,
    /// `torch.backends.mps.is_built()`, `torch.cuda.is_current_stream_capturing()`, ...) with
    /// constant arguments: run for real and folded when it returns a literal. A query that
    /// raises is a graph break, so the user sees the error from their own line.
    pub(crate) fn environment_query(&mut self, py: Python<'_>, f: &Bound<'_, PyAny>, name: &str, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if name == "torch.utils._python_dispatch._get_current_dispatch_mode_stack" && args.is_empty() && kwargs.is_empty() {
            // The user's dispatch modes (nn.MultiheadAttention's fast-path check reads them
            // through `_is_make_fx_tracing`): with none, a fresh empty list as the query makes,
            // guarded empty; any mode is left to Python.
            let now = f.call0()?;
            if now.cast::<PyList>().is_ok_and(|l| l.is_empty()) && now.get_type().is(py.get_type::<PyList>()) {
                self.og.add_guard(None, crate::guards::GuardKind::GlobalQuery { func: f.clone().unbind(), args: PyTuple::empty(py).unbind(), expected: now.unbind() });
                return Ok(Some(crate::symbolic::variables::lists::new_list(vec![])));
            }
            return Ok(None);
        }
        let module_ok = ["torch.cuda.", "torch.backends.", "torch.xpu.", "torch.mps.", "torch.distributed.", "torch.jit.", "torch.version."].iter().any(|m| name.starts_with(m));
        let last = name.rsplit('.').next().unwrap_or("");
        if !module_ok || !(last.starts_with("is_") || last.starts_with("get_") || last.starts_with("has_") || last == "device_count") {
            return Ok(None);
        }
        let Some(vals) = constants_of(py, args) else { return Ok(None) };
        let kw = PyDict::new(py);
        for (k, v) in kwargs {
            match v.as_constant(py) {
                Some(c) => kw.set_item(k, c)?,
                None => return Ok(None),
            }
        }
        match f.call(PyTuple::new(py, vals)?, Some(&kw)) {
            Ok(r) if is_literal(py, &r) => Ok(Some(VT::constant(r.unbind()))),
            Ok(_) => Ok(None),
            Err(e) => graph_break!(UnsupportedCall, "call to {name} raised {e}"),
        }
    }

    /// Canonical member `member` of the plain enum class `cls`, as the tracker of `cls.<name>`
    /// read through the class's source, identity-guarded (Note [enum members] in
    /// `builder.rs`), or a `Flag`'s pseudo-member as `cls._value2member_map_[value]` (Note
    /// [flag pseudo-members]). A class without a source is not modelled.
    pub(crate) fn enum_member(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, member: Bound<'_, PyAny>) -> VResult<VT> {
        if !member.get_type().is(cls) || !crate::symbolic::builder::is_plain_enum_member(py, &member) {
            graph_break!(UnsupportedCall, "enum class {} gave {}, not one of its members", crate::symbolic::variables::qualname(cls), type_name(&member));
        }
        let Some(source) = self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned() else {
            graph_break!(MissingSource, "a member of enum class {} that has no source", crate::symbolic::variables::qualname(cls));
        };
        // A canonical member is a class attribute; a Flag's pseudo-member (Note [flag
        // pseudo-members]) is found by its value.
        let name: Option<String> = member.getattr("_name_")?.extract().ok();
        let canonical = match &name {
            Some(n) => cls.getattr(n.as_str()).is_ok_and(|m| m.is(&member)),
            None => false,
        };
        let member_source = match name {
            Some(n) if canonical => source.attr(&n),
            _ => source.attr("_value2member_map_").item(crate::source::ItemKey::Int(member.getattr("_value_")?.extract()?)),
        };
        crate::symbolic::builder::wrap(py, self.og, &member, member_source)
    }

    /// Python builtins (and builtin types used as functions) with tracker arguments.
    pub(crate) fn call_builtin(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, mut args: Vec<VT>, mut kwargs: Vec<(String, VT)>) -> VResult<VT> {
        // Note [call arity] (variables/arity.rs): a call the real builtin refuses raises there.
        if let Ok(name) = b.getattr("__name__").and_then(|n| n.extract::<String>()) {
            if self.og.handles.builtins.bind(py).getattr(name.as_str()).is_ok_and(|f| f.is(b)) {
                super::arity::bind_positional_keywords(&name, &mut args, &mut kwargs);
                let keywords: Vec<&str> = kwargs.iter().map(|(k, _)| k.as_str()).collect();
                if let Err(why) = super::arity::check_builtin(&name, args.len(), &keywords) {
                    graph_break!(ArgumentMismatch, "{why}");
                }
                // `sum(xs, start)` refuses a str, bytes or bytearray start (bltinmodule.c,
                // `builtin_sum_impl`).
                let start = args.get(1).or_else(|| kwargs.iter().find(|(k, _)| k == "start").map(|(_, v)| v));
                if name == "sum" && start.and_then(|s| s.as_constant(py)).is_some_and(|c| c.is_instance_of::<pyo3::types::PyString>() || c.is_instance_of::<pyo3::types::PyBytes>() || c.is_instance_of::<pyo3::types::PyByteArray>()) {
                    graph_break!(ArgumentMismatch, "sum() with a string start");
                }
            }
        }
        // Note [enum members]: `Color(2)` (and `Color(Color.RED)`) is the class's canonical member
        // of that value; eager's ValueError for none.
        if args.len() == 1 && kwargs.is_empty() && crate::symbolic::builder::is_plain_enum_class(py, b) {
            if let Some(v) = args[0].as_constant(py).filter(|c| is_literal(py, c)).or_else(|| args[0].as_enum_member(py)) {
                let member = b.call1((v,)).map_err(|e| Unsupported::folded(py, e))?;
                return self.enum_member(py, b, member);
            }
        }
        // A builtin given a symbolic size (`max(3, x.shape[0])`, `int(n)`, `range(t)`) sees its
        // value: specialized, with a guard in the ShapeEnv (Note [symbolic sizes]).
        let specialize = |v: VT| -> VResult<VT> {
            match &v {
                VT::SymNum(_) => Ok(VT::constant(v.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DataDependentValue, "symbolic number without a value"))?.unbind())),
                _ => Ok(v),
            }
        };
        if kwargs.is_empty() && args.iter().any(|a| matches!(a, VT::SymNum(_))) {
            if let Some(r) = self.sym_builtin(py, b, &args)? {
                return Ok(r);
            }
        }
        if type_name(b) == "_lru_cache_wrapper" {
            return self.call_lru_cached(py, b, args, kwargs);
        }
        let functools = py.import("functools")?;
        if b.is(&functools.getattr("reduce")?) && kwargs.is_empty() && (2..=3).contains(&args.len()) {
            return self.functools_reduce(py, &args[0], &args[1], args.get(2).cloned());
        }
        // `math.prod(x.shape[1:])` of symbolic sizes: the product of the items, in order, from
        // `start` (Modules/mathmodule.c, `math_prod_impl`), a symbolic size itself.
        if b.is(&py.import("math")?.getattr("prod")?) && args.len() == 1 && kwargs.iter().all(|(k, _)| k == "start") && matches!(args[0], VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_)) {
            let items = self.iter_items(py, &args[0])?;
            if items.iter().any(|i| matches!(i, VT::SymNum(_))) && items.iter().all(|i| matches!(i, VT::SymNum(_)) || i.as_constant(py).is_some_and(|c| c.is_exact_instance_of::<pyo3::types::PyInt>())) {
                let mut acc = kwargs.first().map(|(_, v)| v.clone()).unwrap_or_else(|| VT::constant(1i64.into_pyobject(py).expect("int").into_any().unbind()));
                for item in items {
                    acc = self.operator(py, "mul", vec![acc, item])?;
                }
                return Ok(acc);
            }
        }
        // `isinstance(n, cls)`, `type(n)`, `callable(n)`, `hasattr(n, name)` read only the type
        // of a symbolic number: asked of a plain number of that type, never specializing it
        // (Note [type-only uses of symbolic numbers] in tensor.rs).
        let type_only = {
            let builtins = self.og.handles.builtins.bind(py);
            let is = |name: &str| builtins.getattr(name).map(|f| f.is(b)).unwrap_or(false);
            kwargs.is_empty() && match args.len() {
                1 => is("type") || is("callable"),
                2 => is("isinstance") || is("hasattr"),
                _ => false,
            }
        };
        let mut args = args;
        // `getattr(n, name, default)` with a name that numbers of `n`'s type lack (ints and
        // floats have no instance attributes): the default, `n` left symbolic.
        if kwargs.is_empty() && args.len() == 3 && builtins_is(py, &self.og.handles.builtins, b, "getattr") {
            if let (VT::SymNum(s), Some(name)) = (&args[0], args[1].as_constant(py).and_then(|n| n.extract::<String>().ok())) {
                let stand_in = crate::symbolic::variables::tensor::type_stand_in(s.fake.bind(py))?;
                if !stand_in.hasattr(name.as_str())? {
                    return Ok(args[2].clone());
                }
            }
        }
        if type_only {
            if let VT::SymNum(s) = &args[0] {
                let stand_in = crate::symbolic::variables::tensor::type_stand_in(s.fake.bind(py))?;
                args[0] = VT::constant(stand_in.unbind());
            }
        }
        let args = args.into_iter().map(specialize).collect::<VResult<Vec<_>>>()?;
        let kwargs = kwargs.into_iter().map(|(k, v)| Ok((k, specialize(v)?))).collect::<VResult<Vec<_>>>()?;
        let builtins = self.og.handles.builtins.bind(py).clone();
        let is = |name: &str| builtins.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let all_const = args.iter().all(|a| matches!(a, VT::Constant(_))) && kwargs.iter().all(|(_, a)| matches!(a, VT::Constant(_)));
        if let Some(r) = self.call_unbound_descriptor(py, b, &args, &kwargs)? {
            return Ok(r);
        }
        if b.is(&crate::symbolic::variables::functions::partial_type(py)?) {
            return self.make_partial(py, args, kwargs);
        }
        if is("callable") && args.len() == 1 && kwargs.is_empty() {
            if let Some(c) = self.is_callable(py, &args[0])? {
                return Ok(const_bool(py, c));
            }
        }
        if b.is(py.get_type::<PyAny>().getattr("__new__")?) && args.len() == 1 && kwargs.is_empty() {
            // `object.__new__(cls)` (what `copyreg.__newobj__` runs for `copy` and `pickle`, and a
            // class's own `__new__`: Note [user __new__] in user_defined.rs): a
            // new object of a trackable class with no attributes and no `__init__` run
            // (Objects/typeobject.c, `object_new`). A dict subclass needs `dict.__new__`
            // (TypeError), left to Python.
            if let VT::Class(c) = &args[0] {
                if self.is_trackable_class(py, c.bind(py))? && !crate::symbolic::variables::user_defined::has_dict_base(py, c.bind(py))? && !crate::symbolic::variables::user_defined::has_list_base(py, c.bind(py))? {
                    let cls_source = self.og.class_sources.get(&(c.as_ptr() as usize)).cloned().expect("trackable classes have a source");
                    return Ok(VT::UserObject(crate::symbolic::variables::user_defined::UserObject::new(c.clone_ref(py), cls_source, false)));
                }
            }
        }
        if b.is(py.get_type::<PyList>().getattr("__new__")?) && args.len() == 1 && kwargs.is_empty() {
            // `list.__new__(cls)` (what `copyreg.__newobj__` runs to copy a list subclass
            // instance): a new object of a trackable list subclass with an empty storage and no
            // `__init__` run (Note [list subclass objects]).
            if let VT::Class(c) = &args[0] {
                if self.is_trackable_class(py, c.bind(py))? && crate::symbolic::variables::user_defined::has_list_base(py, c.bind(py))? {
                    let cls_source = self.og.class_sources.get(&(c.as_ptr() as usize)).cloned().expect("trackable classes have a source");
                    return Ok(VT::UserObject(crate::symbolic::variables::user_defined::UserObject::new_list(c.clone_ref(py), cls_source)));
                }
            }
        }
        if is("delattr") && args.len() == 2 && kwargs.is_empty() {
            // `delattr(o, name)` is `del o.name` (Python/bltinmodule.c, `builtin_delattr` calls
            // `PyObject_SetAttr(o, name, NULL)`, as DELETE_ATTR does).
            let name: String = match args[1].as_constant(py).and_then(|n| n.extract::<String>().ok()) {
                Some(n) => n,
                None => graph_break!(UnsupportedBuiltin, "delattr with a non-constant or non-string name"),
            };
            self.delete_attr(py, &args[0], &name)?;
            return Ok(VT::none(py));
        }
        if b.is(py.get_type::<PyAny>().getattr("__delattr__")?) && args.len() == 2 && kwargs.is_empty() {
            // `object.__delattr__(o, name)` (reached through `super()` in a class's own
            // `__delattr__`): the generic deletion, past the class's override.
            if let (VT::UserObject(o), Some(name)) = (&args[0], args[1].as_constant(py).and_then(|n| n.extract::<String>().ok())) {
                let o = o.clone();
                self.user_object_delattr(py, &args[0], &o, &name, true)?;
                return Ok(VT::none(py));
            }
        }
        if is("setattr") && args.len() == 3 && kwargs.is_empty() {
            // `setattr(o, name, v)` is `o.name = v` (Python/bltinmodule.c, `builtin_setattr`
            // calls `PyObject_SetAttr`, the slot STORE_ATTR uses too).
            let name: String = match args[1].as_constant(py).and_then(|n| n.extract::<String>().ok()) {
                Some(n) => n,
                None => graph_break!(UnsupportedBuiltin, "setattr with a non-constant or non-string name"),
            };
            self.store_attr(py, &args[0], &name, args[2].clone())?;
            return Ok(VT::none(py));
        }
        if is("super") {
            return self.make_super(&args);
        }
        if is("len") {
            if let Some(m) = self.python_dunder(py, &args[0], "__len__")? {
                // `builtin_len` -> `PyObject_Size`: the slot's result must be a non-negative int
                // (else TypeError / ValueError, left to Python).
                let n = self.call(py, &m, vec![], vec![])?;
                return self.length_result(py, &args[0], &n);
            }
            if let VT::UserObject(o) = &args[0] {
                if let Some(storage) = o.storage_slot(py, "__len__")? {
                    return self.call_builtin(py, b, vec![storage], kwargs);
                }
            }
            // Note [list subclass objects from outside the frame] in `user_defined.rs`.
            if let Some(storage) = self.opaque_list_slot(py, &args[0], "__len__")? {
                return self.call_builtin(py, b, vec![storage], kwargs);
            }
            // The size of a dict subclass's storage is its tracker's, which the trace may have
            // written (Note [dict subclass objects from outside the frame]).
            if let VT::Opaque { obj, source } = &args[0] {
                let o = obj.bind(py).clone();
                if o.is_instance_of::<PyDict>() && !o.get_type().is(py.get_type::<PyDict>()) {
                    if let Some((k, slot)) = crate::symbolic::variables::user_defined::static_type_lookup(&o.get_type(), "__len__")? {
                        let source = source.clone();
                        if let Some(storage) = self.slot_storage(py, &o, &source, k, &slot, "__len__")? {
                            return self.call_builtin(py, b, vec![VT::Dict(storage)], kwargs);
                        }
                    }
                }
            }
            return Ok(match &args[0] {
                VT::Tensor(t) if self.og.shape_env.is_some() && t.fake.bind(py).call_method0("dim").and_then(|d| d.extract::<usize>()).unwrap_or(0) > 0 => {
                    // `len(x)` is `x.size(0)`, symbolic for a dynamic first dimension.
                    let zero = VT::constant(0i64.into_pyobject(py)?.into_any().unbind());
                    self.og.call(py, None, Some("size"), &[args[0].clone(), zero], &[])?
                }
                VT::Tensor(t) => VT::constant(t.fake.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Module { obj, .. } => {
                    self.guard_module_contents(py, &args[0])?;
                    VT::constant(obj.bind(py).len()?.into_pyobject(py)?.into_any().unbind())
                }
                VT::Constant(c) => VT::constant(c.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Dict(d) | VT::DictView { dict: d, .. } => VT::constant(d.borrow().items.len().into_pyobject(py)?.into_any().unbind()),
                VT::Deque(l) => VT::constant(l.borrow().items.len().into_pyobject(py)?.into_any().unbind()),
                // Note [enum members]: the number of canonical members, fixed with the class.
                VT::Class(c) if crate::symbolic::builder::is_plain_enum_class(py, c.bind(py)) => VT::constant(c.bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Set(set) => VT::constant(set.borrow().bind(py).len()?.into_pyobject(py)?.into_any().unbind()),
                VT::Opaque { obj, source } if obj.bind(py).is_instance_of::<pyo3::types::PyDict>() && obj.bind(py).get_type().getattr("__len__")?.is(py.get_type::<pyo3::types::PyDict>().getattr("__len__")?) => {
                    // A dict of a type kept as an opaque object (a module's `_forward_hooks`
                    // OrderedDict): `dict.__len__` runs no user code; its type is guarded where
                    // it was wrapped, its size here.
                    let n = obj.bind(py).len()?;
                    self.og.add_guard(Some(source.clone()), GuardKind::LenMatch(n));
                    VT::constant(n.into_pyobject(py)?.into_any().unbind())
                }
                // An iterator has no `__len__` (`PyObject_Size` raises TypeError): `heapq.nsmallest`
                // tries `len(iterable)` to choose its path. Never its items counted (that would
                // drain it).
                VT::Iterator(_) => {
                    let ty = self.class_attribute(py, &args[0])?;
                    let Some(ty) = ty else { graph_break!(UntracedValue, "len() of {}", args[0].describe(py)) };
                    return Err(no_len(py, ty.bind(py))?);
                }
                // An object of a Python class: its `__len__` (a Python one was inlined above), or
                // `PyObject_Size`'s TypeError when its class has none; never its items counted
                // (an iterable without `__len__` has no length).
                VT::UserObject(_) | VT::Opaque { .. } => {
                    // `type(o)` (guarded where the object was wrapped; a tracked object's class).
                    let ty = match &args[0] {
                        VT::UserObject(o) => Some(o.cls.clone_ref(py)),
                        other => self.type_of(py, other)?,
                    };
                    let Some(ty) = ty else { graph_break!(UntracedValue, "len() of {}", args[0].describe(py)) };
                    let ty = ty.bind(py).cast::<pyo3::types::PyType>().map_err(PyErr::from)?.clone();
                    if crate::symbolic::variables::user_defined::static_type_lookup(&ty, "__len__")?.is_some() {
                        graph_break!(UntracedValue, "len() of {} (its __len__ is not Python code)", args[0].describe(py));
                    }
                    return Err(no_len(py, ty.as_any())?);
                }
                other => {
                    let n = self.unpack(py, other)?.len();
                    VT::constant(n.into_pyobject(py)?.into_any().unbind())
                }
            });
        }
        if is("issubclass") && args.len() == 2 && kwargs.is_empty() {
            // Note [user code at class lookups] (descriptors.rs): a metaclass `__subclasscheck__`
            // in Python runs at each call in eager: inlined (Objects/abstract.c,
            // `PyObject_IsSubclass`, calls it for any class whose type is not exactly `type`).
            if let VT::Class(c) = &args[1] {
                if let Ok(ct) = c.bind(py).cast::<pyo3::types::PyType>() {
                    if let Some((_, hook)) = static_type_lookup(&ct.get_type(), "__subclasscheck__")? {
                        if crate::symbolic::variables::descriptors::is_user_code(&hook) {
                            let func = VT::Function { obj: Rc::new(hook.unbind()), source: None };
                            let r = self.call(py, &func, vec![args[1].clone(), args[0].clone()], vec![])?;
                            let b = self.truth(py, &r)?;
                            return Ok(const_bool(py, b));
                        }
                    }
                }
            }
            // Two classes (or a class and a tuple of classes) whose metaclasses keep `type`'s
            // `__subclasscheck__`: the answer is the MRO's (Objects/abstract.c,
            // `PyObject_IsSubclass`), fixed for classes that are identity-guarded where they
            // come from. Other metaclasses (ABCMeta consults its registry) are left to Python.
            let class_of = |v: &VT| -> Option<Bound<'_, PyAny>> {
                match v {
                    VT::Class(c) | VT::Builtin(c) if c.bind(py).is_instance_of::<pyo3::types::PyType>() => Some(c.bind(py).clone()),
                    _ => None,
                }
            };
            let plain = |c: &Bound<'_, PyAny>| -> bool {
                let type_type = py.get_type::<pyo3::types::PyType>();
                c.get_type().getattr("__subclasscheck__").map(|s| s.is(type_type.getattr("__subclasscheck__").expect("type has it"))).unwrap_or(false)
            };
            let targets: Option<Vec<Bound<'_, PyAny>>> = match &args[1] {
                VT::Tuple(items) => items.iter().map(|i| class_of(i)).collect(),
                other => class_of(other).map(|c| vec![c]),
            };
            if let (Some(derived), Some(targets)) = (class_of(&args[0]), targets) {
                if targets.iter().all(|t| plain(t)) {
                    let mut r = false;
                    for t in &targets {
                        r = r || derived.cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(t)?;
                    }
                    return Ok(const_bool(py, r));
                }
            }
        }
        if is("isinstance") {
            let cls = match &args[1] {
                VT::Class(c) => c.bind(py).clone(),
                // A class (its type defines `__instancecheck__`: `type`, typing's aliases), a
                // union (`int | None`, taken as its tuple) or a tuple; anything else raises
                // TypeError in `PyObject_IsInstance` (Objects/abstract.c): left to Python.
                VT::Constant(c) if c.bind(py).is_instance_of::<PyTuple>() || type_name(c.bind(py)) == "UnionType" || defines_instancecheck(&c.bind(py).get_type()) => c.bind(py).clone(),
                VT::Constant(_) => graph_break!(ArgumentMismatch, "isinstance() with a second argument that is not a class"),
                // A tuple of classes, nested tuples too (`PyObject_IsInstance` recurses into them).
                VT::Tuple(items) => {
                    fn classes<'py>(py: Python<'py>, items: &[VT]) -> VResult<Bound<'py, PyAny>> {
                        let cs: VResult<Vec<_>> = items.iter().map(|i| match i {
                            VT::Class(c) => Ok(c.bind(py).clone()),
                            VT::Tuple(inner) => classes(py, inner),
                            _ => graph_break!(UnsupportedOperation, "isinstance with a non-class"),
                        }).collect();
                        Ok(PyTuple::new(py, cs?)?.into_any())
                    }
                    classes(py, items)?
                }
                _ => graph_break!(UnsupportedOperation, "isinstance with {}", args[1].describe(py)),
            };
            // Note [user code at class lookups] (descriptors.rs): a metaclass
            // `__instancecheck__` in Python runs at each call in eager: inlined, after the
            // exact-type answer CPython gives first (Objects/abstract.c, `PyObject_IsInstance`).
            if let (VT::Class(_), Ok(ct)) = (&args[1], cls.cast::<pyo3::types::PyType>()) {
                if let Some((_, hook)) = static_type_lookup(&ct.get_type(), "__instancecheck__")? {
                    if crate::symbolic::variables::descriptors::is_user_code(&hook) {
                        if self.type_of(py, &args[0])?.is_some_and(|t| t.bind(py).is(ct)) {
                            return Ok(const_bool(py, true));
                        }
                        let func = VT::Function { obj: Rc::new(hook.unbind()), source: None };
                        let r = self.call(py, &func, vec![args[1].clone(), args[0].clone()], vec![])?;
                        let b = self.truth(py, &r)?;
                        return Ok(const_bool(py, b));
                    }
                }
            }
            // An object whose class defines `__class__` (a property) answers through it when
            // its type is not a subclass: user code, left to Python.
            if let Some(o) = crate::symbolic::variables::user_defined::real_object(&args[0]) {
                if matches!(&args[0], VT::Opaque { .. }) && class_overrides_class(&o.bind(py).get_type())? {
                    graph_break!(UntracedValue, "isinstance of an object whose class defines __class__");
                }
            }
            if let VT::UserObject(u) = &args[0] {
                if class_overrides_class(u.cls.bind(py).cast::<pyo3::types::PyType>().map_err(PyErr::from)?)? {
                    graph_break!(UntracedValue, "isinstance of an object whose class defines __class__");
                }
            }
            let r = match &args[0] {
                VT::Tensor(t) if self.torch_function_type_of(py, t).is_some() => {
                    let c = self.torch_function_type_of(py, t).expect("checked");
                    c.bind(py).cast::<pyo3::types::PyType>().map_err(PyErr::from)?.is_subclass(&cls)?
                }
                VT::Tensor(t) => {
                    // A graph input answers as the real object it stands for: its type is pinned
                    // by TENSOR_MATCH (an `nn.Parameter`, a subclass), and `Parameter`'s metaclass
                    // `__instancecheck__` reads the object itself. A tensor the graph computed is a
                    // plain `torch.Tensor`: ask a fresh one (a fake tensor is an instance of
                    // `FakeTensor`, which no user class names).
                    let real = t.source.as_ref().and_then(|src| self.og.inputs.iter().find(|(s, _)| s == src).map(|(_, r)| r.bind(py).clone()));
                    match real {
                        Some(r) => r.is_instance(&cls)?,
                        None => {
                            // The legacy tensor types (`torch.FloatTensor`, `torch.cuda.ByteTensor`:
                            // instances of `torch.tensortype`) answer by the tensor's dtype and
                            // device (torch/csrc/tensor/python_tensor.cpp, `Tensor_instancecheck`):
                            // the fake tensor has both. Asking a fresh float32 CPU tensor made
                            // every computed tensor a FloatTensor and never a ByteTensor, so
                            // torchvision's `to_tensor` skipped its `/ 255`.
                            let fake = t.fake.bind(py);
                            let tensor_type = self.og.handles.tensor_type.bind(py).clone();
                            let fresh = tensor_type.call_method1("__new__", (&tensor_type,)).ok();
                            computed_tensor_isinstance(fake, fresh.as_ref(), &cls)?
                        }
                    }
                }
                VT::Constant(c) => c.bind(py).is_instance(&cls)?,
                VT::Module { obj, .. } | VT::Opaque { obj, .. } => obj.bind(py).is_instance(&cls)?,
                VT::Tuple(_) => py.get_type::<PyTuple>().is_subclass(&cls).unwrap_or(false) || cls.is(py.get_type::<PyTuple>()),
                VT::NamedTuple { .. } | VT::DictView { .. } | VT::Partial(_) | VT::UserObject(_) => {
                    let ty = self.type_of(py, &args[0])?.expect("a known type");
                    ty.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?
                }
                VT::List(_) => cls.is(py.get_type::<PyList>()) || py.get_type::<PyList>().is_subclass(&cls).unwrap_or(false),
                VT::Deque(_) => {
                    let dq = py.import("collections")?.getattr("deque")?;
                    dq.cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?
                }
                VT::Dict(_) => cls.is(py.get_type::<PyDict>()) || py.get_type::<PyDict>().is_subclass(&cls).unwrap_or(false),
                VT::Function { obj, .. } | VT::TorchFunction(obj) | VT::Builtin(obj) | VT::Class(obj) => obj.bind(py).is_instance(&cls)?,
                // A bound method (of a module, a user object...) is a `types.MethodType`
                // (Objects/classobject.c), whatever it is bound to.
                VT::Method { .. } => {
                    let method_type = py.import("types")?.getattr("MethodType")?;
                    method_type.cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?
                }
                // Any other kind whose type the trace knows (iterators, sets, ...): objects of
                // CPython's own types, whose `__class__` is their type, so `isinstance` is
                // `issubclass` of it (`__subclasscheck__` of an ABC included).
                other => match self.type_of(py, other)? {
                    Some(ty) => ty.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.is_subclass(&cls)?,
                    None => graph_break!(UnsupportedOperation, "isinstance of {}", other.describe(py)),
                },
            };
            return Ok(const_bool(py, r));
        }
        if is("getattr") || is("hasattr") {
            let name: String = args[1].as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "getattr with a non-constant name"))?.extract()?;
            // Only objects whose attributes cannot change under us (constants, classes, Python
            // modules, static tensor metadata) may answer "missing"; for anything else a lookup
            // we cannot trace is unsupported, never "absent".
            let known_missing = match &args[0] {
                // A pending write to the class or a base (Note [class writes seen through the
                // MRO]) is not in the real class yet: `getattr` below decides.
                VT::Class(o) if self.class_write_pending(py, o.bind(py), &name)? => None,
                VT::Constant(o) => Some(!o.bind(py).hasattr(name.as_str())?),
                // Missing from a class (its bases, its metaclass) or a module: guarded to stay
                // missing (`hasattr(cfg, "FLAG")`, `getattr(K, "k", d)` after `K.k = 6`).
                VT::Class(o) => {
                    let missing = !o.bind(py).hasattr(name.as_str())?;
                    if missing && !is_trusted_namespace(o.bind(py)) {
                        if let Some(src) = self.og.class_sources.get(&(o.as_ptr() as usize)).cloned() {
                            self.og.add_guard(Some(src), GuardKind::NoAttr(name.clone()));
                        }
                    }
                    Some(missing)
                }
                // A global this trace wrote in the module (pending) is not in the real module
                // yet: `getattr` below answers from the write.
                VT::PyModule { obj, .. } if obj.bind(py).getattr("__dict__").ok().is_some_and(|d| self.og.side_effects.global(d.as_ptr() as usize, &name).is_some()) => None,
                // A name the module lacks may be answered by a PEP 562 `__getattr__` (or a module
                // subclass's): user code eager runs at each call, so `getattr` below decides
                // (a break), never a lookup folded here.
                VT::PyModule { obj, .. } if {
                    let m = obj.bind(py);
                    let d = m.getattr("__dict__")?;
                    !d.contains(name.as_str())? && (d.contains("__getattr__")? || static_type_lookup(&m.get_type(), "__getattr__")?.is_some_and(|(_, g)| type_name(&g) == "function"))
                } => None,
                VT::PyModule { obj, source } => {
                    let missing = !obj.bind(py).hasattr(name.as_str())?;
                    if let (true, Some(src)) = (missing && !is_trusted_namespace(obj.bind(py)), source) {
                        self.og.add_guard(Some(src.clone()), GuardKind::NoAttr(name.clone()));
                    }
                    Some(missing)
                }
                // A real tensor can carry instance attributes the fake one lacks: only a class
                // attribute is known present; anything else is not decided here.
                // A tensor made by the graph has no instance attributes; a graph input is asked
                // for real and guarded (`hasattr(t, "jax")` in transformers answers False).
                VT::Tensor(t) => {
                    // The tensor's real class (not the fake's `FakeTensor`), through its MRO.
                    let class_has = match self.type_of(py, &args[0])? {
                        Some(cls) => match cls.bind(py).cast::<pyo3::types::PyType>() {
                            Ok(ty) => static_type_lookup(ty, name.as_str())?.is_some(),
                            Err(_) => t.fake.bind(py).get_type().hasattr(name.as_str())?,
                        },
                        None => t.fake.bind(py).get_type().hasattr(name.as_str())?,
                    };
                    if class_has {
                        Some(false)
                    } else if let (None, Some(cls)) = (&t.source, self.tensor_subclass_of(py, t)) {
                        // A tensor of a `__torch_function__` subclass that the graph made (Note
                        // [tensor subclasses]): the attributes the trace set on it are present
                        // and it has no others, so a name its class lacks is missing (guarded
                        // on the class); a class attribute, or a class with a `__getattr__` of
                        // its own, is asked through `getattr` below.
                        if self.og.tensor_attrs.get(&t.node).is_some_and(|a| a.iter().any(|(k, _)| k == &name)) {
                            Some(false)
                        } else if cls.hasattr(name.as_str())? || cls.hasattr("__getattr__")? {
                            None
                        } else {
                            match self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned() {
                                Some(src) => {
                                    self.og.add_guard(Some(src), GuardKind::NoAttr(name.clone()));
                                    Some(true)
                                }
                                None => None,
                            }
                        }
                    } else {
                        match &t.source {
                            None => Some(true),
                            Some(src) => {
                                let real = self.og.inputs.iter().find(|(s, _)| s == src).map(|(_, v)| v.clone_ref(py));
                                match real {
                                    Some(r) if !r.bind(py).hasattr(name.as_str())? => {
                                        self.og.add_guard(Some(src.clone()), GuardKind::NoAttr(name.clone()));
                                        Some(true)
                                    }
                                    _ => None,
                                }
                            }
                        }
                    }
                }
                VT::Opaque { .. } | VT::Module { .. } => Some(self.attr_absent(py, &args[0], &name)?),
                // A list, tuple, dict, set or deque tracker: no instance attributes, so its type
                // decides (breaker5 28: `hasattr([1], 'zzz')` answered True).
                // An instance sees its type's MRO (`_PyType_Lookup`), not the attributes the
                // type itself has as an instance of `type` (`list.__name__`, `list.__dict__`,
                // `type.__call__`): `hasattr([], '__name__')` is False.
                VT::Set(set) => {
                    let ty = set.borrow().bind(py).get_type();
                    Some(static_type_lookup(&ty, name.as_str())?.is_none())
                }
                VT::List(_) | VT::Tuple(_) | VT::Dict(_) | VT::Deque(_) => match self.type_of(py, &args[0])? {
                    Some(ty) => match ty.bind(py).cast::<pyo3::types::PyType>() {
                        Ok(ty) => Some(static_type_lookup(ty, name.as_str())?.is_none()),
                        Err(_) => None,
                    },
                    None => None,
                },
                // A dict view or an iterator of a builtin type (`dict_items`, `zip`,
                // `list_iterator`, a generator): no instance dict either, so its type decides
                // (`OrderedDict.update(d.items())` asks `hasattr(arg, "keys")`: audit 52, Q1).
                VT::DictView { .. } | VT::Iterator(_) => match self.type_of(py, &args[0])? {
                    Some(ty) => match ty.bind(py).cast::<pyo3::types::PyType>() {
                        Ok(ty) if builtin_type_without_dict(ty)? => Some(static_type_lookup(ty, name.as_str())?.is_none()),
                        _ => None,
                    },
                    None => None,
                },
                // A new object: its instance attributes are all in the tracker; the class is
                // asked (and guarded through its source).
                // (A class with its own `__getattribute__` answers through it, below.)
                VT::UserObject(o) if type_name(&o.cls.bind(py).getattr("__getattribute__")?) == "function" => None,
                VT::UserObject(o) => {
                    if o.get(py, &name).is_some() {
                        Some(false)
                    } else if o.cls.bind(py).hasattr(name.as_str())? || self.class_write_pending(py, o.cls.bind(py), &name)? {
                        None
                    } else {
                        self.og.add_guard(Some(o.cls_source.clone()), GuardKind::NoAttr(name.clone()));
                        Some(true)
                    }
                }
                _ => None,
            };
            if known_missing == Some(true) {
                return match (is("hasattr"), args.get(2)) {
                    (true, _) => Ok(const_bool(py, false)),
                    (false, Some(default)) => Ok(default.clone()),
                    (false, None) => graph_break!(RaisesException, "getattr of a missing attribute '{name}'"),
                };
            }
            // CPython's `builtin_getattr` / `builtin_hasattr`: an AttributeError from the
            // lookup (here one the trace raised, with the guards that keep it raised) gives
            // the default or False; any other error propagates.
            return match (self.getattr(py, &args[0], &name), is("hasattr"), args.get(2)) {
                (Ok(_), true, _) => Ok(const_bool(py, true)),
                (Ok(v), false, _) => Ok(v),
                (Err(e), true, _) if e.is_raised("AttributeError") => Ok(const_bool(py, false)),
                (Err(e), false, Some(default)) if e.is_raised("AttributeError") => Ok(default.clone()),
                (Err(e), _, _) => Err(e),
            };
        }
        if is("range") && all_const {
            let vals: Vec<_> = args.iter().map(|a| a.as_constant(py).unwrap()).collect();
            return Ok(VT::constant(b.call1(PyTuple::new(py, vals)?)?.unbind()));
        }
        // Iterator builtins make lazy iterators over live iterators of their arguments, stepped
        // as CPython steps them (a loop body that mutates the list being walked sees it).
        if is("enumerate") && args.len() <= 2 && kwargs.iter().all(|(k, _)| k == "start") && !args.is_empty() {
            let start = match args.get(1).or(kwargs.first().map(|(_, v)| v)) {
                Some(s) => s.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "enumerate start is not a constant"))?,
                None => 0i64.into_pyobject(py)?.into_any(),
            };
            let count: i64 = start.extract().map_err(|_| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "enumerate start is not a small int"))?;
            let inner = self.make_iter(py, &args[0])?;
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Enumerate { inner, count })))));
        }
        if is("zip") && kwargs.iter().all(|(k, _)| k == "strict") {
            // `strict` is read as `PyObject_IsTrue` (Python/bltinmodule.c, `zip_new`).
            let strict = match kwargs.first() {
                Some((_, v)) => self.truth(py, v)?,
                None => false,
            };
            let inners = args.iter().map(|a| self.make_iter(py, a)).collect::<VResult<Vec<_>>>()?;
            return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Zip(inners, strict))))));
        }
        // `collections._count_elements(mapping, iterable)` (Modules/_collectionsmodule.c), what
        // `Counter.update` calls: its Python version, traced.
        if kwargs.is_empty() && args.len() == 2 && py.import("collections")?.getattr("_count_elements").map(|f| f.is(b)).unwrap_or(false) {
            let f = py.import("dynamo._polyfills")?.getattr("count_elements")?;
            let func = crate::symbolic::builder::wrap(py, self.og, &f, std::sync::Arc::new(crate::source::Source::Module { name: "dynamo._polyfills".into() }).attr("count_elements"))?;
            return self.call(py, &func, args, vec![]);
        }
        // Note [heap functions] (python/dynamo/_polyfills.py): `_heapq`'s C functions, written
        // out in Python comparison for comparison, traced.
        if let Some((name, f)) = builtin_polyfill(py, b)? {
            let func = crate::symbolic::builder::wrap(py, self.og, &f, std::sync::Arc::new(crate::source::Source::Module { name: "dynamo._polyfills".into() }).attr(&name))?;
            return self.call(py, &func, args, kwargs);
        }
        if let Some(t) = self.itertools_tee(py, b, &args, &kwargs)? {
            return Ok(t);
        }
        if let Some(it) = self.lazy_iterator(py, b, &args, &kwargs)? {
            let mut st = IteratorState::of(it);
            if b.is_instance_of::<pyo3::types::PyType>() {
                // Note [iterator types]: `itertools.product` and the others read whole at
                // construction (`Items`) keep their own type: `b` is the class called.
                st.py_type = Some(b.clone().unbind());
            }
            return Ok(VT::Iterator(Rc::new(RefCell::new(st))));
        }
        if is("iter") && args.len() == 1 {
            let it = self.make_iter(py, &args[0])?;
            // Note [user iterators]: the object `__iter__` returned is the iterator.
            if let IterKind::UserNext(obj) = &it.borrow().kind {
                return Ok(obj.clone());
            }
            return Ok(VT::Iterator(it));
        }
        if is("reversed") && args.len() == 1 {
            if let VT::List(l) = &args[0] {
                let index = l.borrow().items.len() as i64 - 1;
                return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::ListReversed { list: l.clone(), index })))));
            }
            if let VT::Tuple(items) | VT::NamedTuple { items, .. } = &args[0] {
                let mut items = items.as_ref().clone();
                items.reverse();
                return Ok(VT::Iterator(Rc::new(RefCell::new(reversed_iterator(py, items)?))));
            }
            // `reversed(self.layers)` of a `ModuleList` / `Sequential` / `ParameterList`: they have
            // no `__reversed__`, so it is the sequence protocol's `reversed` object over their
            // `__len__` and `__getitem__` (audit 51, P22): the children, last first.
            if let VT::Module { obj, .. } = &args[0] {
                let nn = py.import("torch.nn")?;
                let ty = obj.bind(py).get_type();
                if ["ModuleList", "Sequential", "ParameterList"].iter().any(|c| nn.getattr(*c).is_ok_and(|c| ty.is(&c))) {
                    let mut items = self.iter_items(py, &args[0])?;
                    items.reverse();
                    return Ok(VT::Iterator(Rc::new(RefCell::new(reversed_iterator(py, items)?))));
                }
            }
            // `dict.__reversed__` and the views' `__reversed__` (Objects/dictobject.c,
            // `dict___reversed___impl`): a live reverse iterator from the last item.
            let rev = match &args[0] {
                VT::Dict(d) => Some((d.clone(), crate::symbolic::variables::DictView::Keys, false)),
                // `OrderedDict.__reversed__` of one built in the frame: its order is its storage's.
                VT::UserObject(o) if o.is_exact_ordered_dict(py)? => o.storage.clone().map(|d| (d, crate::symbolic::variables::DictView::Keys, true)),
                VT::DictView { dict, view, ordered } => Some((dict.clone(), *view, *ordered)),
                _ => None,
            };
            if let Some((dict, view, ordered)) = rev {
                let (used, version) = {
                    let d = dict.borrow();
                    (d.items.len(), d.version)
                };
                let kind = IterKind::DictReversed { dict, view, used, version, index: used as i64 - 1, ordered };
                return Ok(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(kind)))));
            }
        }
        if is("bool") && args.len() == 1 && kwargs.is_empty() && matches!(args[0], VT::UserObject(_) | VT::Opaque { .. } | VT::List(_) | VT::Deque(_) | VT::Dict(_) | VT::DictView { .. } | VT::Tuple(_) | VT::NamedTuple { .. }) {
            // `bool(v)` is the truth test of `if v:` (`PyObject_IsTrue`).
            let t = self.truth(py, &args[0])?;
            return Ok(const_bool(py, t));
        }
        if is("dict") && args.len() <= 1 {
            let pairs = match args.first() {
                Some(a) => self.mapping_items(py, a)?,
                None => vec![],
            };
            let kw = kwargs.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v));
            return crate::symbolic::variables::dicts::dict_from_pairs(py, pairs.into_iter().chain(kw));
        }
        if is("set") && args.len() <= 1 && kwargs.is_empty() {
            // `set_init` is `set_update_internal` of the argument (Note [set order]).
            let s = self.new_set(py, &[])?;
            if let (Some(a), VT::Set(set)) = (args.first(), &s) {
                self.set_method(py, set, "update", std::slice::from_ref(a))?;
            }
            return Ok(s);
        }
        // `dict.fromkeys(iterable, value=None)` (Objects/dictobject.c, `_PyDict_FromKeys`): a
        // new dict whose keys are the iterable's items in order, each mapped to the one value.
        if type_name(b) == "builtin_function_or_method" && b.eq(py.get_type::<PyDict>().getattr("fromkeys")?).unwrap_or(false) && (1..=2).contains(&args.len()) && kwargs.is_empty() {
            let keys = self.iter_items(py, &args[0])?;
            let value = args.get(1).cloned().unwrap_or_else(|| VT::none(py));
            let mut pairs = Vec::with_capacity(keys.len());
            for k in &keys {
                pairs.push((self.dict_key(py, k)?.unbind(), value.clone()));
            }
            return crate::symbolic::variables::dicts::dict_from_pairs(py, pairs);
        }
        if is("frozenset") && args.len() == 1 && kwargs.is_empty() && self.literal_value(py, &args[0]).is_none() {
            // Note [frozensets of traced values] (variables/dicts.rs): `frozenset_new` is
            // `set_update_internal` of the argument, as `set(x)`, on the same stand-ins.
            let real_arg = self.real_set_arg(py, &args[0])?;
            let r = py.get_type::<pyo3::types::PyFrozenSet>().call1((real_arg,)).map_err(|e| Unsupported::folded(py, e))?;
            return Ok(crate::symbolic::variables::dicts::set_tracker(py, r));
        }
        if is("tuple") && kwargs.is_empty() {
            // Objects/abstract.c (`PySequence_Tuple`): an exact tuple is returned as is.
            if let [t @ VT::Tuple(_)] = args.as_slice() {
                return Ok(t.clone());
            }
            if let [t @ VT::Constant(c)] = args.as_slice() {
                if c.bind(py).get_type().is(py.get_type::<PyTuple>()) {
                    return Ok(t.clone());
                }
            }
        }
        if is("list") || is("tuple") {
            let items = match args.first() {
                Some(a) => self.iter_items_sized(py, a)?,
                None => vec![],
            };
            return if is("list") { Ok(new_list(items)) } else { make_tuple(py, items) };
        }
        if (is("min") || is("max")) && args.len() >= 1 && !all_const {
            return self.min_max(py, is("max"), &args, &kwargs);
        }
        if is("abs") && args.len() == 1 && matches!(args[0], VT::Tensor(_) | VT::UserObject(_) | VT::Opaque { .. }) {
            return self.operator(py, "abs", args);
        }
        if is("type") && args.len() == 1 {
            if let Some(ty) = self.type_of(py, &args[0])? {
                return Ok(VT::Class(Rc::new(ty)));
            }
        }
        if is("next") && (args.len() == 1 || args.len() == 2) {
            if let VT::Iterator(it) = &args[0] {
                let was_exhausted = it.borrow().exhausted;
                let item = self.step_iter(py, it)?;
                return match (item, args.get(1)) {
                    (Some(v), _) => Ok(v),
                    (None, Some(default)) => Ok(default.clone()),
                    (None, None) => {
                        // Note [StopIteration in the trace]: an exhausted `next(it)` inside a
                        // `try` of this very frame raises StopIteration in the trace, so the
                        // handler runs there (`except StopIteration:` is traced). Only there: a
                        // StopIteration leaving a frame changes meaning on the way (PEP 479 makes
                        // it RuntimeError out of a generator; a `for` over an iterator whose
                        // `__next__` let it out ends the loop), so one that no handler of this
                        // frame catches, or that a handler lets go on (RERAISE: StopIteration is
                        // not in TRACED_EXCEPTIONS; 3.12's handler around a generator's body,
                        // CALL_INTRINSIC_1), is a graph break and Python raises it. The
                        // exception is a user iterator's `__next__` frame being stepped, which
                        // ends the step on it (Note [user iterators] in iter.rs).
                        // The step that finishes a generator raises StopIteration(value) of
                        // its return value (`_PyGen_SetStopIterationValue`: no argument for
                        // None); every later step a bare StopIteration.
                        if self.stop_iteration_is_traced() {
                            let returned = if was_exhausted { None } else { it.borrow().returned.clone() };
                            let stop = py.get_type::<pyo3::exceptions::PyStopIteration>();
                            let exc = match returned {
                                None => stop.call0()?,
                                Some(v) => match v.as_constant(py) {
                                    Some(c) if c.is_none() => stop.call0()?,
                                    Some(c) => stop.call1((c,))?,
                                    None => graph_break!(UnsupportedCall, "next() of a finished generator that returned {}", v.describe(py)),
                                },
                            };
                            return Err(Unsupported::raise_value("StopIteration", exc.unbind(), "StopIteration"));
                        }
                        graph_break!(UnsupportedCall, "next() of an exhausted iterator (StopIteration)")
                    }
                };
            }
            // Note [user iterators]: `next(o)` of a user iterator calls its `__next__` traced;
            // the StopIteration it raises gives the default, or is raised on where
            // `stop_iteration_is_traced` (a break otherwise).
            if self.user_next_method(py, &args[0])?.is_some() {
                return match self.user_next_raising(py, &args[0]) {
                    Err(e) if e.raised == Some("StopIteration") => match args.get(1) {
                        Some(default) => Ok(default.clone()),
                        None if self.stop_iteration_is_traced() => Err(e),
                        None => graph_break!(UnsupportedCall, "next() of an exhausted user iterator (StopIteration)"),
                    },
                    r => r,
                };
            }
        }
        if is("id") && args.len() == 1 && kwargs.is_empty() {
            return self.builtin_id(py, &args[0]);
        }
        if is("hash") && args.len() == 1 && kwargs.is_empty() && matches!(args[0], VT::UserObject(_) | VT::Opaque { .. }) {
            if let Some(r) = self.user_hash(py, &args[0])? {
                return Ok(r);
            }
        }
        if is("vars") && args.len() == 1 && kwargs.is_empty() && matches!(args[0], VT::UserObject(_) | VT::Opaque { .. }) {
            // `vars(o)` is `o.__dict__` (Python/bltinmodule.c, `builtin_vars_impl`: an
            // attribute lookup; TypeError when there is none, left to Python).
            return match self.getattr(py, &args[0], "__dict__") {
                Ok(d @ VT::Dict(_)) => Ok(d),
                Ok(other) => graph_break!(UnsupportedBuiltin, "vars() of {} gives {}", args[0].describe(py), other.describe(py)),
                Err(e) if e.is_raised("AttributeError") => graph_break!(UnsupportedBuiltin, "vars() of {} (TypeError)", args[0].describe(py)),
                Err(e) => Err(e),
            };
        }
        // Note [locals() in a trace]: `locals()` (and `vars()`) in a function is a snapshot of
        // its bound locals, cells and free variables by name (Objects/frameobject.c,
        // `_PyFrame_FastToLocalsWithError`): a new dict of the values the trace holds. Every
        // local of a frame that names `locals` stays live (code_info), so after a break the
        // resume function's snapshot is eager's; its internal `__stackN` slots are not listed
        // (Note [hidden stack slots] in pycodegen/resume.rs).
        // `dir()` without arguments is the sorted names of that same snapshot
        // (Objects/object.c, `_dir_locals`: `PyEval_GetLocals()`'s keys, sorted). Run at a
        // break it would list the transformed code's own temporaries (`__graph_out`).
        // On CPython 3.11 and 3.12 the snapshot is the frame's one `f_locals` dict (`PyEval_GetLocals`,
        // `PyFrame_FastToLocalsWithError`): every later `locals()` / `vars()` / `dir()` of the
        // frame writes the bound names into that same dict, deletes the unbound ones from it,
        // and returns it (`l is locals()`); names only `exec` put there stay. So the trace keeps
        // the first dict per frame and updates it in place. A graph break after it in the
        // converted frame would leave the dict behind in the transformed frame while the
        // resume function's frame has a dict of its own (and code run at the break, `exec`
        // or a helper reading `sys._getframe(1).f_locals`, writes the transformed frame's):
        // that frame runs eagerly instead (`convert_break`).
        let dir_of_locals = is("dir");
        if (is("locals") || is("vars") || dir_of_locals) && args.is_empty() && kwargs.is_empty() {
            let mut items = Vec::new();
            for (i, name) in self.code.localsplus.iter().enumerate() {
                if name.starts_with("__stack") {
                    continue;
                }
                let v = match &self.locals[i] {
                    Some(VT::Cell(c)) => c.borrow().clone(),
                    Some(VT::Null | VT::MethodNull) | None => None,
                    Some(v) => Some(v.clone()),
                };
                if let Some(v) = v {
                    if !items.iter().any(|(k, _): &(Py<PyAny>, VT)| k.bind(py).eq(name.as_str()).unwrap_or(false)) {
                        items.push((PyString::new(py, name).into_any().unbind(), v));
                    }
                }
            }
            if let Some(VT::Dict(d)) = &self.locals_dict {
                let mut st = d.borrow_mut();
                for name in self.code.localsplus.iter() {
                    if name.starts_with("__stack") {
                        continue;
                    }
                    let bound = items.iter().find(|(k, _)| k.bind(py).eq(name.as_str()).unwrap_or(false)).map(|(_, v)| v.clone());
                    match bound {
                        Some(v) => crate::symbolic::variables::dicts::dict_set(py, &mut st, PyString::new(py, name).into_any().unbind(), v)?,
                        None => {
                            if let Some(at) = st.items.iter().position(|(k, _)| k.bind(py).eq(name.as_str()).unwrap_or(false)) {
                                let (k, _) = st.items.remove(at);
                                st.key_changed(py, crate::symbolic::variables::dicts::KEY_DELETE, Some(&k));
                            }
                        }
                    }
                }
            }
            if dir_of_locals {
                let mut names: Vec<String> = match &self.locals_dict {
                    Some(VT::Dict(d)) => d.borrow().items.iter().map(|(k, _)| k.bind(py).extract::<String>()).collect::<PyResult<_>>()?,
                    _ => items.iter().map(|(k, _)| k.bind(py).extract::<String>()).collect::<PyResult<_>>()?,
                };
                names.sort();
                return Ok(new_list(names.into_iter().map(|n| VT::constant(PyString::new(py, &n).into_any().unbind())).collect()));
            }
            if let Some(d) = &self.locals_dict {
                return Ok(d.clone());
            }
            let d = new_dict(items);
            // PEP 667 (CPython 3.13): `locals()` in a function is a new snapshot per call.
            if !self.generator && py.version_info() < (3, 13) {
                // A generator's frame is traced a step at a time, each step by a translator of
                // its own: its dict is a snapshot per call, as before.
                self.locals_dict = Some(d.clone());
                if self.depth == 0 {
                    self.og.frame_locals_taken = true;
                }
            }
            return Ok(d);
        }
        // Note [globals() in a trace]: `globals()` is the namespace of the code being
        // interpreted (the frame's, or an inlined function's own module's). It is no dict
        // tracker (Note [module namespaces are not dict trackers] in `builder.rs`) but a view
        // of the global names: `g[name]` and `g.get(name[, default])` read as LOAD_GLOBAL does
        // (a pending write first, then the dict through the name's source, without the builtins
        // fallback), `g[name] = v` is STORE_GLOBAL's recorded write. A missing name (eager's
        // KeyError, or the default, which would need a guard that the name stays absent), any
        // other method and iteration are breaks. Rebuilt as `globals()` of the transformed code
        // (the frame's globals) or through the source an inlined function's globals came by;
        // torch's own namespaces stay breaks.
        if is("globals") && args.is_empty() && kwargs.is_empty() && !self.g.trusted {
            return Ok(VT::Globals(self.g.clone()));
        }
        if is("print") || is("input") || is("open") || is("exec") || is("eval") || is("setattr") || is("delattr") || is("globals") || is("locals") || is("vars") || is("id") || is("super") {
            graph_break!(UnsupportedBuiltin, "call to builtin {}", crate::symbolic::variables::qualname(b));
        }
        // Note [text of user objects].
        if (is("str") || is("repr")) && args.len() == 1 && kwargs.is_empty() {
            if let Some(r) = self.user_text(py, &args[0], if is("str") { "str" } else { "repr" }, None)? {
                return Ok(r);
            }
        }
        if is("format") && (args.len() == 1 || args.len() == 2) && kwargs.is_empty() {
            if let Some(r) = self.user_text(py, &args[0], "format", args.get(1))? {
                return Ok(r);
            }
        }
        if (is("str") || is("repr")) && args.len() == 1 && kwargs.is_empty() {
            // A named tuple of literals (Note [text of named tuples]): the text of its real
            // instance, as eager's.
            if let Some(real) = literal_named_tuple(py, &args[0])? {
                let text = if is("str") { real.str()? } else { real.repr()? };
                return Ok(VT::constant(text.into_any().unbind()));
            }
            // A dict, set or deque of literals built in the trace: its C text over a fresh copy.
            if let Some(real) = matches!(args[0], VT::Dict(_) | VT::Set(_) | VT::Deque(_)).then(|| self.literal_sequence(py, &args[0])).flatten() {
                let text = if is("str") { real.str()? } else { real.repr()? };
                return Ok(VT::constant(text.into_any().unbind()));
            }
            if let VT::Class(c) = &args[0] {
                // `type.__repr__` (Objects/typeobject.c, `type_repr`): `<class 'module.qualname'>`
                // from the (identity-guarded) class, unless its metaclass has its own.
                let meta = c.bind(py).get_type();
                let type_type = py.get_type::<pyo3::types::PyType>();
                if meta.getattr("__repr__")?.is(type_type.getattr("__repr__")?) && meta.getattr("__str__")?.is(type_type.getattr("__str__")?) {
                    return Ok(VT::constant(c.bind(py).repr()?.into_any().unbind()));
                }
            }
        }
        // Pure builtins over literal values, including lists, tuples and sets of literals built
        // during tracing (each passed as a fresh copy, so the call cannot mutate our state).
        // Note [enum members]: a plain member stands for itself (`str(m)`, `hash(m)`, `int(m)`).
        let has_enum_arg = args.iter().any(|a| a.as_enum_member(py).is_some());
        let literal_args: Option<Vec<Bound<'_, PyAny>>> = args.iter().map(|a| self.literal_value(py, a).or_else(|| a.as_enum_member(py))).collect();
        let literal_kwargs: Option<Vec<(String, Bound<'_, PyAny>)>> = kwargs.iter().map(|(k, v)| self.literal_value(py, v).map(|v| (k.clone(), v))).collect();
        if let (Some(vals), Some(kvals)) = (literal_args, literal_kwargs) {
            let pure = ["abs", "min", "max", "round", "int", "float", "complex", "bool", "str", "bytes", "tuple", "frozenset", "sum", "any", "all", "divmod", "pow", "sorted", "reversed", "repr", "ascii", "bin", "oct", "hex", "hash", "type", "slice", "chr", "ord", "format", "len"];
            let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            // `os.fspath` of a str or bytes is the argument itself (Modules/posixmodule.c,
            // `PyOS_FSPath`): `os.path.join` of constant paths folds.
            let fspath = matches!(module.as_str(), "posix" | "nt") && b.getattr("__name__").is_ok_and(|n| n.to_string() == "fspath");
            let is_pure = pure.iter().any(|n| is(n)) || fspath || module == "math" || module == "_operator" || module == "operator" || (module == "torch" && type_name(b) == "type") || is_literal_type_method(py, b);
            if is_pure {
                let kw = PyDict::new(py);
                for (k, v) in kvals {
                    kw.set_item(k, v)?;
                }
                // The builtins named in `pure` only read their arguments: a set built in the trace
                // goes as itself, in its own order (`literal_view`); `operator`'s in-place
                // functions would write, so they keep the copies.
                let vals: Vec<Bound<'_, PyAny>> = if pure.iter().any(|n| is(n)) {
                    args.iter().zip(vals).map(|(a, v)| if matches!(a, VT::Set(_)) { self.literal_view(py, a).unwrap_or(v) } else { v }).collect()
                } else {
                    vals
                };
                // Note [errors of folded operations].
                let r = b.call(PyTuple::new(py, vals.iter())?, Some(&kw)).map_err(|e| Unsupported::folded(py, e))?;
                if is_literal(py, &r) {
                    return Ok(VT::constant(r.unbind()));
                }
                if has_enum_arg {
                    graph_break!(UnsupportedCall, "call to {} with an enum member gave a {}", crate::symbolic::variables::qualname(b), type_name(&r));
                }
                if let Ok(l) = r.cast::<PyList>() {
                    if l.iter().all(|i| is_literal(py, &i)) {
                        return Ok(new_list(l.iter().map(|i| VT::constant(i.unbind())).collect()));
                    }
                }
                let kind = type_name(&r);
                if matches!(kind.as_str(), "list_reverseiterator" | "reversed" | "range_iterator" | "longrange_iterator") {
                    // `reversed()` of a literal sequence or a range: its items, taken now (the
                    // sequence is immutable or a fresh copy), in an iterator of the type
                    // CPython's `reversed()` gives (Note [iterator types]).
                    let n: usize = py.import("operator")?.call_method1("length_hint", (&r,))?.extract()?;
                    if n > 100_000 {
                        graph_break!(UnrollLimit, "reversed() of {n} items is too long to unroll");
                    }
                    let items: Vec<VT> = r.try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<_>>()?;
                    let st = if kind == "reversed" {
                        reversed_iterator(py, items)?
                    } else {
                        let mut st = IteratorState::over(items);
                        st.py_type = Some(r.get_type().into_any().unbind());
                        if kind != "list_reverseiterator" {
                            // `reversed(range)` is `iter()` of the reversed range (Objects/rangeobject.c,
                            // `range_reverse`): rebuilt as `iter_at(range[::-1], pos)`.
                            let step_back = py.import("builtins")?.getattr("slice")?.call1((py.None(), py.None(), -1))?;
                            let rev = vals[0].get_item(step_back)?;
                            st.reiterate = Some(rev.unbind());
                        }
                        st
                    };
                    return Ok(VT::Iterator(Rc::new(RefCell::new(st))));
                }
                return self.wrap_unguarded(py, &r);
            }
        }
        if is("sorted") && args.len() == 1 && kwargs.iter().all(|(k, _)| k == "key" || k == "reverse") {
            return self.sorted(py, &args[0], &kwargs);
        }
        if (is("any") || is("all")) && args.len() == 1 && kwargs.is_empty() {
            // Stops at the first deciding item, as CPython's does (a generator is not run further).
            let want = is("any");
            let it = self.make_iter(py, &args[0])?;
            while let Some(v) = self.step_iter(py, &it)? {
                if self.truth(py, &v)? == want {
                    return Ok(const_bool(py, want));
                }
            }
            return Ok(const_bool(py, !want));
        }
        if is("pow") && args.len() == 2 && kwargs.is_empty() {
            // `pow(a, b)` is `a ** b` (bltinmodule.c, `builtin_pow_impl` calls
            // `PyNumber_Power(a, b, None)`, the operator's own slot).
            return self.binary(py, "pow", args[0].clone(), args[1].clone());
        }
        if is("sum") || is("any") || is("all") {
            let items = self.iter_items(py, &args[0])?;
            if is("sum") {
                // `start` positional or by keyword (bltinmodule.c, `builtin_sum_impl`), 0 if absent.
                let start = args.get(1).cloned().or_else(|| kwargs.iter().find(|(k, _)| k == "start").map(|(_, v)| v.clone()));
                let mut acc = start.unwrap_or_else(|| VT::constant(0i64.into_pyobject(py).unwrap().into_any().unbind()));
                for it in items {
                    acc = self.binary(py, "add", acc, it)?;
                }
                return Ok(acc);
            }
        }
        // operator.* functions from user code (operator.add(x, y)).
        let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "_operator" && args.iter().any(|a| matches!(a, VT::Tensor(_))) {
            return self.og.call(py, Some(b), None, &args, &kwargs);
        }
        if crate::symbolic::translator::makes_weak_reference(py, b) {
            graph_break!(ObjectLifetime, "call to {} with {} (a weak reference: Note [observable frees])", crate::symbolic::variables::qualname(b), describe_arguments(py, &args, &kwargs))
        }
        // Kinds left to Python on purpose, named so that the break says why: an exit stack
        // runs arbitrary callbacks and exits in its own `__exit__` (Lib/contextlib.py: the
        // exception chaining of `_fix_exception_context`, `sys.exc_info()`), and a bytearray is
        // a mutable buffer the trace has no tracker for (its methods, slices and buffer
        // protocol would each need one).
        let qual = crate::symbolic::variables::qualname(b);
        let is_contextlib = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).is_some_and(|m| m == "contextlib");
        if is_contextlib && matches!(qual.as_str(), "ExitStack" | "AsyncExitStack") {
            graph_break!(UnsupportedCall, "contextlib.{qual} is not traced: its callbacks and __exit__ chaining run as Python");
        }
        if b.is(py.get_type::<pyo3::types::PyByteArray>()) {
            graph_break!(UnsupportedCall, "bytearray is not modelled (a mutable byte buffer): its construction and uses run as Python");
        }
        graph_break!(UnsupportedCall, "call to {} with {}", qual, describe_arguments(py, &args, &kwargs))
    }

    /// A method of a builtin type called through the type (`list.__setitem__(a, 0, v)`,
    /// `dict.get(d, k)`, `torch.Tensor.__setitem__(t, i, v)`, `object.__setattr__(o, n, v)`):
    /// the same call as the bound method on the first argument when that argument is of the
    /// descriptor's `__objclass__` (Objects/descrobject.c checks it and raises TypeError
    /// otherwise; a mismatch is left to run in Python). `None`: `b` is not such a descriptor.
    pub(crate) fn call_unbound_descriptor(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !matches!(type_name(b).as_str(), "wrapper_descriptor" | "method_descriptor") || args.is_empty() {
            return Ok(None);
        }
        let Ok(owner) = b.getattr("__objclass__") else { return Ok(None) };
        let name: String = b.getattr("__name__")?.extract()?;
        let rest = args[1..].to_vec();
        let exact = |t: &Bound<'_, pyo3::types::PyType>| owner.is(t);
        let recv = &args[0];
        if let VT::Constant(c) = recv {
            // Note [user exception objects] (variables/exceptions.rs).
            if let Some(r) = self.call_exception_slot(py, c, b, &owner, &rest, kwargs)? {
                return Ok(Some(r));
            }
        }
        if let VT::UserObject(o) = recv {
            // `defaultdict.__copy__(d)` (as `copy.copy` calls it) and its other C methods with
            // a Python version: bound to `d` and traced (Note [defaultdict objects]).
            if name != "__init__" && crate::symbolic::variables::user_defined::is_defaultdict_own(py, b, &name)? && crate::symbolic::variables::user_defined::is_defaultdict_class(py, o.cls.bind(py))? {
                let method = self.user_object_generic_getattr(py, recv, o, &name)?;
                return self.call(py, &method, rest, kwargs.to_vec()).map(Some);
            }
        }
        if name == "__init__" && matches!(recv, VT::UserObject(o) if o.storage.is_some()) && crate::symbolic::variables::user_defined::is_defaultdict_own(py, b, "__init__")? {
            // `super().__init__(list)` in a defaultdict subclass (Note [defaultdict objects]).
            self.defaultdict_init(py, recv, rest, kwargs.to_vec())?;
            return Ok(Some(VT::none(py)));
        }
        if name == "__init__" && matches!(recv, VT::UserObject(o) if o.list.is_some()) && owner.is(py.get_type::<PyList>()) {
            // `super().__init__(items)` in a list subclass (Note [list subclass objects]).
            self.list_object_init(py, recv, rest, kwargs.to_vec())?;
            return Ok(Some(VT::none(py)));
        }
        if name == "__init__" && args.len() == 1 && kwargs.is_empty() {
            // `object.__init__(o)`, or `dict.__init__(o)` with no mapping to insert: no effect.
            let no_op = match recv {
                VT::UserObject(o) => owner.is(py.get_type::<PyAny>()) || (o.storage.is_some() && crate::symbolic::variables::user_defined::dict_base_type(py, &owner)?),
                _ => false,
            };
            if no_op {
                return Ok(Some(VT::none(py)));
            }
        }
        if let VT::UserObject(o) = recv {
            // `dict.__setitem__(o, k, v)` / `OrderedDict.keys(o)` on a dict subclass object:
            // the storage's method (Note [dict subclass objects]).
            if o.cls.bind(py).cast::<pyo3::types::PyType>().map(|t| t.is_subclass(&owner).unwrap_or(false)).unwrap_or(false) {
                if let Some(storage) = o.storage_method(py, b, &name)? {
                    let method = VT::ContainerMethod { container: Box::new(storage), name };
                    return self.call(py, &method, rest, kwargs.to_vec()).map(Some);
                }
            }
        }
        if let VT::Opaque { obj, source } = recv {
            // `dict.__getitem__(o, k)` / `OrderedDict.keys(o)` on a dict subclass instance from
            // outside the frame: a read of its storage (Note [dict subclass storage]).
            let o = obj.bind(py).clone();
            if o.is_instance(&owner)? {
                if let Some(method) = self.dict_storage_method(py, &o, source, b, &name)? {
                    return self.call(py, &method, rest, kwargs.to_vec()).map(Some);
                }
            }
            // `list.append(o, v)` on a list subclass instance: its storage's (Note [list
            // subclass objects from outside the frame] in `user_defined.rs`).
            if let Some(method) = self.opaque_list_method(py, recv, b, &name)? {
                return self.call(py, &method, rest, kwargs.to_vec()).map(Some);
            }
        }
        let matches = match recv {
            VT::List(_) => exact(&py.get_type::<PyList>()),
            VT::Deque(_) => owner.is(&py.import("collections")?.getattr("deque")?) && crate::symbolic::variables::deque::DEQUE_METHODS.contains(&name.as_str()),
            VT::Dict(_) => exact(&py.get_type::<PyDict>()),
            VT::Set(s) => exact(&s.borrow().bind(py).get_type()),
            VT::Tensor(_) => owner.cast::<pyo3::types::PyType>().map(|o| self.og.handles.tensor_type.bind(py).cast::<pyo3::types::PyType>().map(|t| t.is_subclass(o).unwrap_or(false)).unwrap_or(false)).unwrap_or(false),
            VT::Opaque { .. } | VT::UserObject(_) => owner.is(py.get_type::<PyAny>()) && matches!(name.as_str(), "__setattr__" | "__getattribute__"),
            _ => false,
        };
        if !matches {
            return Ok(None);
        }
        let method = match recv {
            VT::List(_) | VT::Dict(_) | VT::Set(_) | VT::Deque(_) => VT::ContainerMethod { container: Box::new(recv.clone()), name },
            VT::Tensor(t) => VT::TensorMethod { tensor: t.clone(), name },
            _ => VT::GenericAttr { obj: Box::new(recv.clone()), set: name == "__setattr__" },
        };
        self.call(py, &method, rest, kwargs.to_vec()).map(Some)
    }

    /// `functools.reduce(function, iterable[, initial])` (Modules/_functoolsmodule.c,
    /// `functools_reduce`): `iter(iterable)`, then `acc = function(acc, item)` for each item,
    /// starting from `initial` or else the first item; each call is traced.
    pub(crate) fn functools_reduce(&mut self, py: Python<'_>, func: &VT, iterable: &VT, initial: Option<VT>) -> VResult<VT> {
        let it = self.make_iter(py, iterable)?;
        let mut acc = initial;
        while let Some(item) = self.step_iter(py, &it)? {
            acc = Some(match acc {
                None => item,
                Some(a) => self.call(py, func, vec![a, item], vec![])?,
            });
        }
        match acc {
            Some(a) => Ok(a),
            None => graph_break!(ArgumentMismatch, "reduce() of empty iterable with no initial value (TypeError)"),
        }
    }

    /// `min(...)` / `max(...)` with `key=` and `default=` (Python/bltinmodule.c, `min_max`): over
    /// the one iterable argument or the positional arguments, an item whose key compares less
    /// (`min`) or greater (`max`) than the best key so far replaces the best, so ties keep the
    /// first. Comparisons are traced (`<` / `>`, then truth): tensor keys make a comparison a
    /// data-dependent branch, a graph break.
    pub(crate) fn min_max(&mut self, py: Python<'_>, max: bool, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        let fname = if max { "max" } else { "min" };
        let mut key = None;
        let mut default = None;
        for (k, v) in kwargs {
            match k.as_str() {
                "key" if !v.as_constant(py).is_some_and(|c| c.is_none()) => key = Some(v.clone()),
                "key" => {}
                "default" if args.len() == 1 => default = Some(v.clone()),
                _ => graph_break!(ArgumentMismatch, "{fname}() got an unexpected keyword argument '{k}' (TypeError)"),
            }
        }
        // Over one iterable, the items are taken one at a time from its live iterator
        // (`PyIter_Next` in `min_max`): a key function that appends to the list being scanned
        // makes the scan see the new items, and one that grows a dict raises eager's error.
        let it = if args.len() == 1 { self.make_iter(py, &args[0])? } else { Rc::new(RefCell::new(IteratorState::over(args.to_vec()))) };
        let mut best: Option<(VT, VT)> = None;
        while let Some(item) = self.step_iter(py, &it)? {
            let k = match &key {
                Some(f) => self.call(py, f, vec![item.clone()], vec![])?,
                None => item.clone(),
            };
            best = Some(match best {
                None => (item, k),
                Some((bi, bk)) => {
                    let c = self.compare(py, if max { "gt" } else { "lt" }, k.clone(), bk.clone())?;
                    if self.truth(py, &c)? {
                        (item, k)
                    } else {
                        (bi, bk)
                    }
                }
            });
        }
        match (best, default) {
            (Some((item, _)), _) => Ok(item),
            (None, Some(d)) => Ok(d),
            // Eager's ValueError, its text from the real function over an empty tuple (it
            // differs between CPython versions), raised in the trace.
            (None, None) => match py.import("builtins")?.getattr(fname)?.call1((PyTuple::empty(py),)) {
                Err(e) => Err(Unsupported::folded(py, e)),
                Ok(_) => graph_break!(InternalInconsistency, "{fname}() of an empty tuple gave a value"),
            },
        }
    }

    /// `sorted(iterable, key=..., reverse=...)` (Objects/listobject.c, `list_sort_impl`): a new
    /// list of the items in the order `sorted_items` gives. A comparison that raises raises
    /// here (the partly sorted items are dropped, as eager drops its new list).
    pub(crate) fn sorted(&mut self, py: Python<'_>, iterable: &VT, kwargs: &[(String, VT)]) -> VResult<VT> {
        let items = self.iter_items_sized(py, iterable)?;
        let (out, failed) = self.sorted_items(py, items, kwargs)?;
        match failed {
            Some(e) => Err(e),
            None => Ok(new_list(out)),
        }
    }

    /// The items of a sort with `key=` and `reverse=` (`list_sort_impl`), and the error of a
    /// comparison that raised, if one did: then the items are in the partly sorted order the
    /// sort left them in, which `list.sort` keeps. The keys are computed first, once per item,
    /// in order, by traced calls (a key call that raises is the `Err`, the items untouched).
    ///
    /// Note [traced sorts]: constant keys are sorted by CPython itself, as
    /// `sorted(range(n), key=keys.__getitem__, reverse=reverse)`: the order of a stable sort
    /// depends only on the keys. Other keys (objects with a Python `__lt__`, tuples holding
    /// them) are compared in the trace: CPython's `list.sort` runs over `SortKey` stand-ins
    /// (`dynamo._polyfills`) whose `<` calls back here and compares the two traced keys as
    /// `do_richcompare` would (a user's `__lt__` inlined, reflected methods, eager's
    /// TypeError), so the comparisons made, their order, and the permutation left by one that
    /// raises are those of the CPython running the trace. A comparison whose answer depends on
    /// tensor values is a graph break.
    pub(crate) fn sorted_items(&mut self, py: Python<'_>, items: Vec<VT>, kwargs: &[(String, VT)]) -> VResult<(Vec<VT>, Option<Unsupported>)> {
        let key = kwargs.iter().find(|(k, _)| k == "key").map(|(_, v)| v.clone()).filter(|v| !v.as_constant(py).is_some_and(|c| c.is_none()));
        let reverse = match kwargs.iter().find(|(k, _)| k == "reverse") {
            Some((_, v)) => match v.as_constant(py) {
                Some(c) => c,
                None => graph_break!(UnsupportedOperation, "sorted() with a non-constant reverse"),
            },
            None => pyo3::types::PyBool::new(py, false).to_owned().into_any(),
        };
        let mut keys = Vec::with_capacity(items.len());
        for item in &items {
            keys.push(match &key {
                Some(f) => self.call(py, f, vec![item.clone()], vec![])?,
                None => item.clone(),
            });
        }
        let literal: Option<Vec<_>> = keys.iter().map(|k| self.literal_value(py, k)).collect();
        let kw = PyDict::new(py);
        kw.set_item("reverse", reverse)?;
        let order: Vec<usize> = if let Some(literal) = literal {
            let keys = PyList::new(py, literal)?;
            kw.set_item("key", keys.getattr("__getitem__")?)?;
            let order = py.import("builtins")?.getattr("sorted")?.call((pyo3::types::PyRange::new(py, 0, items.len() as isize)?,), Some(&kw))?;
            order.try_iter()?.map(|i| i.and_then(|i| i.extract::<usize>())).collect::<PyResult<_>>()?
        } else {
            let (order, failed) = self.traced_sort_order(py, keys, &kw)?;
            let out = order.iter().map(|&i| items[i].clone()).collect();
            return Ok((out, failed));
        };
        Ok((order.into_iter().map(|i| items[i].clone()).collect(), None))
    }

    /// The permutation CPython's `list.sort(**kw)` makes of `keys`, each `<` compared in the
    /// trace (Note [traced sorts]), and the error of the comparison that stopped it, if any.
    fn traced_sort_order(&mut self, py: Python<'_>, keys: Vec<VT>, kw: &Bound<'_, PyDict>) -> VResult<(Vec<usize>, Option<Unsupported>)> {
        // The callback reaches this translator and the keys through their addresses: it is
        // only called from inside `list.sort` below, while `self` is not otherwise used, and
        // dropped with the stand-ins before this returns.
        struct Addrs {
            tx: usize,
            keys: usize,
            failed: usize,
        }
        unsafe impl Send for Addrs {}
        let mut failed: Option<Unsupported> = None;
        let addrs = Addrs { tx: self as *mut Self as *mut () as usize, keys: &keys as *const Vec<VT> as usize, failed: &mut failed as *mut Option<Unsupported> as usize };
        let lt = pyo3::types::PyCFunction::new_closure(py, None, None, move |args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>| -> PyResult<bool> {
            let py = args.py();
            let (i, j): (usize, usize) = args.extract()?;
            // SAFETY: see above; the pointers are live for the whole `list.sort` call.
            let tx = unsafe { &mut *(addrs.tx as *mut InstructionTranslator<'static>) };
            let keys = unsafe { &*(addrs.keys as *const Vec<VT>) };
            let answer = tx.compare(py, "lt", keys[i].clone(), keys[j].clone()).and_then(|c| tx.truth(py, &c));
            answer.map_err(|e| {
                unsafe { *(addrs.failed as *mut Option<Unsupported>) = Some(e) };
                pyo3::exceptions::PyRuntimeError::new_err("a traced comparison stopped the sort")
            })
        })?;
        let stand_in = py.import("dynamo._polyfills")?.getattr("SortKey")?;
        let stand_ins = PyList::new(py, (0..keys.len()).map(|i| stand_in.call1((i, &lt))).collect::<PyResult<Vec<_>>>()?)?;
        let result = stand_ins.call_method("sort", (), Some(kw));
        let order = stand_ins.iter().map(|s| s.getattr("i")?.extract::<usize>()).collect::<PyResult<Vec<_>>>()?;
        drop(stand_ins);
        drop(lt);
        match (result, failed) {
            (Ok(_), _) => Ok((order, None)),
            (Err(_), Some(e)) => Ok((order, Some(e))),
            (Err(e), None) => Err(e.into()),
        }
    }
}

/// Whether a class of `ty`'s MRO other than `object` defines `__class__` (a property that
/// `isinstance` reads: Objects/abstract.c, `object_isinstance`).
pub(crate) fn class_overrides_class(ty: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    for base in ty.mro().iter() {
        if base.is(ty.py().get_type::<PyAny>()) {
            continue;
        }
        if base.getattr("__dict__")?.contains("__class__")? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether a class of `ty`'s MRO defines `__instancecheck__`: the special-method lookup
/// `PyObject_IsInstance` does on the type of its second argument (Objects/abstract.c,
/// `_PyObject_LookupSpecial`), which does not see the metaclass (`int` has none; `type`,
/// `types.UnionType` and typing's aliases do).
fn defines_instancecheck(ty: &Bound<'_, pyo3::types::PyType>) -> bool {
    ty.mro().iter().any(|base| base.getattr("__dict__").and_then(|d| d.contains("__instancecheck__")).unwrap_or(false))
}

/// Whether `b` is the builtin function `name` (`builtins.<name>`).
fn builtins_is(py: Python<'_>, builtins: &Py<PyAny>, b: &Bound<'_, PyAny>, name: &str) -> bool {
    builtins.bind(py).getattr(name).map(|f| f.is(b)).unwrap_or(false)
}

/// The iterator `reversed()` of a tuple or a str gives: a CPython `reversed` object over
/// `items` (already in iteration order), Note [iterator types].
fn reversed_iterator(py: Python<'_>, items: Vec<VT>) -> VResult<IteratorState> {
    let mut st = IteratorState::over(items);
    st.py_type = Some(py.import("builtins")?.getattr("reversed")?.unbind());
    st.reversed = true;
    Ok(st)
}

/// Whether `b` is a method of one of the immutable literal types, reached through the type:
/// a class method (`int.from_bytes`, `float.fromhex`, `str.maketrans`: `__self__` is the type)
/// or an unbound method or slot (`int.__add__`, `str.join`, `float.is_integer`:
/// `__objclass__`). On literal arguments these read nothing else and make new literals, so they
/// fold like the pure builtins (Note [errors of folded operations] for what they raise).
fn is_literal_type_method(py: Python<'_>, b: &Bound<'_, PyAny>) -> bool {
    let owner = b.getattr("__self__").ok().filter(|o| o.is_instance_of::<pyo3::types::PyType>()).or_else(|| b.getattr("__objclass__").ok());
    let Some(owner) = owner else { return false };
    let builtins = py.import("builtins").ok();
    ["int", "float", "complex", "str", "bytes", "bool", "tuple", "frozenset"].iter().any(|n| builtins.as_ref().and_then(|m| m.getattr(*n).ok()).is_some_and(|t| t.is(&owner)))
}

impl<'a> InstructionTranslator<'a> {
    /// `g[name]` / `g.get(name, default)` of `globals()` (Note [globals() in a trace]).
    pub(crate) fn globals_item(&mut self, py: Python<'_>, g: &Rc<crate::symbolic::translator::GlobalsInfo>, idx: &VT, default: Option<VT>) -> VResult<VT> {
        let Some(name) = idx.as_constant(py).filter(|c| matches!(idx, VT::Constant(_)) && c.is_exact_instance_of::<PyString>()) else {
            graph_break!(UnsupportedOperation, "globals()[{}]", idx.describe(py));
        };
        let name: String = name.extract()?;
        if let Some(v) = self.og.side_effects.global(g.globals.as_ptr() as usize, &name) {
            return Ok(v);
        }
        let Some(value) = g.globals.bind(py).get_item(&name)? else {
            match default {
                Some(_) => graph_break!(UnsupportedOperation, "globals().get('{name}') of a missing name"),
                None => graph_break!(RaisesException, "globals()['{name}'] of a missing name (KeyError)"),
            }
        };
        if g.trusted {
            self.og.read_unguarded_attr(py, g.globals.bind(py).as_any(), &name);
            return self.wrap_unguarded(py, &value);
        }
        let source = match &g.source {
            None => std::sync::Arc::new(crate::source::Source::Global { name: name.clone() }),
            Some(s) => s.item(crate::source::ItemKey::Str(name.clone())),
        };
        crate::symbolic::builder::wrap(py, self.og, &value, source)
    }
}

/// Whether `cls` is one of torch's legacy tensor types (`torch.FloatTensor`,
/// `torch.cuda.LongTensor`, `torch.sparse.FloatTensor`): its metaclass is `torch.tensortype`
/// (torch/csrc/tensor/python_tensor.cpp).
fn is_legacy_tensor_type(cls: &Bound<'_, PyAny>) -> bool {
    let meta = cls.get_type();
    meta.qualname().is_ok_and(|q| q == "tensortype")
        && meta.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).as_deref() == Some("torch")
}

/// `isinstance` of a tensor the graph computed (`fake` its fake tensor, `fresh` a new plain
/// `torch.Tensor`) against `cls`, a class or a (nested) tuple of classes: legacy tensor types
/// by the fake's dtype and device, any other class as a plain tensor answers.
fn computed_tensor_isinstance(fake: &Bound<'_, PyAny>, fresh: Option<&Bound<'_, PyAny>>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(items) = cls.cast::<PyTuple>() {
        for c in items.iter() {
            if computed_tensor_isinstance(fake, fresh, &c)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if is_legacy_tensor_type(cls) {
        return fake.is_instance(cls);
    }
    fresh.unwrap_or(fake).is_instance(cls)
}

/// The arguments of a call as a break reason names them: each positional one described, then
/// `name=...` for each keyword; "no arguments" for none (never an empty text after "with").
pub(crate) fn describe_arguments(py: Python<'_>, args: &[VT], kwargs: &[(String, VT)]) -> String {
    let parts: Vec<String> = args.iter().map(|a| a.describe(py)).chain(kwargs.iter().map(|(k, v)| format!("{k}={}", v.describe(py)))).collect();
    if parts.is_empty() {
        "no arguments".to_string()
    } else {
        parts.join(", ")
    }
}

/// Note [text of named tuples]: a named tuple of literals made in the trace whose class keeps
/// the `__repr__` that `collections.namedtuple` generated (`typing.NamedTuple` classes too) and
/// object's `__str__` and `__format__`: its real instance, made with `tuple.__new__` (no user
/// code runs), whose `str`/`repr`/f-string text is eager's. `None` for anything else (a class
/// with its own `__repr__` answers through it).
pub(crate) fn literal_named_tuple<'py>(py: Python<'py>, v: &VT) -> PyResult<Option<Bound<'py, PyAny>>> {
    let VT::NamedTuple { cls, items } = v else { return Ok(None) };
    let cls = cls.bind(py);
    let generated = cls
        .getattr("__repr__")
        .ok()
        .and_then(|f| f.getattr("__code__").ok())
        .and_then(|c| c.getattr("co_filename").ok())
        .and_then(|f| f.extract::<String>().ok())
        .is_some_and(|f| f.replace('\\', "/").ends_with("collections/__init__.py"));
    let object = py.get_type::<PyAny>();
    if !generated || !cls.getattr("__str__")?.is(object.getattr("__str__")?) || !cls.getattr("__format__")?.is(object.getattr("__format__")?) {
        return Ok(None);
    }
    let literals: Option<Vec<_>> = items
        .iter()
        .map(|i| match i {
            VT::Constant(c) if crate::symbolic::builder::is_literal(py, c.bind(py)) => Some(c.bind(py).clone()),
            _ => None,
        })
        .collect();
    let Some(vals) = literals else { return Ok(None) };
    Ok(Some(py.get_type::<PyTuple>().call_method1("__new__", (cls, PyTuple::new(py, vals)?))?))
}

/// The `dynamo._polyfills.BUILTIN_POLYFILLS` stand-in for builtin function `b` (its name there
/// and the function), when `b` is the very function of its module the table names.
fn builtin_polyfill<'py>(py: Python<'py>, b: &Bound<'py, PyAny>) -> PyResult<Option<(String, Bound<'py, PyAny>)>> {
    let Ok(module) = b.getattr("__module__").and_then(|m| m.extract::<String>()) else { return Ok(None) };
    if module != "_heapq" && module != "_functools" {
        return Ok(None);
    }
    let name: String = b.getattr("__name__")?.extract()?;
    let table = py.import("dynamo._polyfills")?.getattr("BUILTIN_POLYFILLS")?;
    let Ok(p) = table.get_item((module.as_str(), name.as_str())) else { return Ok(None) };
    if !py.import(module.as_str())?.getattr(name.as_str()).is_ok_and(|real| real.is(b)) {
        return Ok(None);
    }
    Ok(Some((p.getattr("__name__")?.extract()?, p)))
}

/// `PyObject_Size`'s `TypeError` for an object of type `ty` without `__len__`, raised in the
/// trace; the message names the type's `tp_name` (`itertools.chain`, a user class's name).
fn no_len(py: Python<'_>, ty: &Bound<'_, PyAny>) -> PyResult<Unsupported> {
    let msg = format!("object of type '{}' has no len()", crate::symbolic::variables::tp_name(ty));
    let e = py.get_type::<pyo3::exceptions::PyTypeError>().call1((msg.as_str(),))?;
    Ok(Unsupported::raise_value("TypeError", e.unbind(), msg))
}

/// Whether `o` (a class or a module) is torch's or the interpreter's own, whose attributes the
/// trace reads without guards: `torch`, `torch.*`, `builtins`, `math`, `operator`.
fn is_trusted_namespace(o: &Bound<'_, PyAny>) -> bool {
    let name = if o.is_instance_of::<pyo3::types::PyModule>() { o.getattr("__name__") } else { o.getattr("__module__") };
    let name = name.ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
    name == "torch" || name.starts_with("torch.") || matches!(name.as_str(), "builtins" | "math" | "operator")
}

/// Whether `ty` is a static (C-defined) type whose instances have no `__dict__`
/// (`Py_TPFLAGS_HEAPTYPE` unset, `tp_dictoffset == 0`; Include/object.h): what an instance has
/// as attributes is then exactly what its type's MRO has.
fn builtin_type_without_dict(ty: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    const PY_TPFLAGS_HEAPTYPE: u64 = 1 << 9;
    let flags: u64 = ty.getattr("__flags__")?.extract()?;
    let dictoffset: isize = ty.getattr("__dictoffset__")?.extract()?;
    Ok(flags & PY_TPFLAGS_HEAPTYPE == 0 && dictoffset == 0)
}
