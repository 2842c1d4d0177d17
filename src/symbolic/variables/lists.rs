//! Lists, tuples, named tuples and structseqs (torch's `ListVariable`, `TupleVariable`,
//! `NamedTupleVariable`), and the methods of the builtin containers (`list`, `tuple`, `dict`,
//! `set`: `call_container_method`).

use crate::source::Source;
use crate::symbolic::variables::{type_name, VariableTracker, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::constant::const_bool;
use crate::symbolic::variables::dicts::{dict_set, DictView};

// Note [append-only lists]: an evaluation loop collects per-batch results in a list it only
// appends to (`outs.append(model(x))`, `losses.append(loss.item())`). When the loop runs over a
// DataLoader, its body is a function of its own that receives the list, and wrapping the list
// the usual way (a LENGTH_CHECK guard and every item wrapped, a TENSOR_MATCH per tensor) makes
// every batch fail the guard of the previous one: one recompile per batch until
// `cache_size_limit`. A list that reaches the frame as an argument which the code names only
// as `LOAD_FAST x; LOAD_METHOD append` (`CodeInfo::append_only_slots`) cannot have its length
// or items observed by the frame, so it is wrapped without reading them: the tracker holds what
// the trace appended, and the replay after the graph is `list.extend(target, appended)`. The
// TYPE_MATCH guard stays (`append` must be `list.append`). Reached again another way (a second
// argument that is the same list, an iterator over it), the other path may read its items: the
// tracker is then filled as a plain list from the frame would be (`builder::realize_append_only`:
// LENGTH_CHECK, the entry items ahead of the appended ones) and replayed as `target[:] = items`.
// A module-level list that a function (typically a forward hook: `acts.append(out)`) names only
// as `LOAD_GLOBAL acts; LOAD_METHOD append`, and never stores or deletes
// (`CodeInfo::append_only_globals`), is wrapped the same way at that `LOAD_GLOBAL`; without it
// every call grew the list past the length guard of the previous one and recompiled.

/// A mutable list created or read during tracing.
pub struct ListState {
    pub items: Vec<VariableTracker>,
    /// Set when the list came from the frame (it has a source): mutating it is a side effect.
    pub source: Option<Arc<Source>>,
    /// Its length when the frame started (for a list from the frame).
    pub entry_len: usize,
    /// Note [append-only lists]: a list from the frame that the frame only appends to. Its
    /// items at entry are not read (no length guard, nothing wrapped): `items` holds only what
    /// the trace appended, and the replay is `list.extend(target, items)`.
    pub append_only: bool,
    /// Set for a `collections.deque` (`VT::Deque`): its `maxlen` and mutation state.
    pub deque: Option<crate::symbolic::variables::deque::DequeInfo>,
    /// Set for the list storage of a `list` subclass object built in the frame (Note [list
    /// subclass objects] in `user_defined.rs`): the object whose storage this is. The storage is
    /// never rebuilt as a plain list; an iterator over it is rebuilt over the object.
    pub owner: Option<std::rc::Weak<crate::symbolic::variables::user_defined::UserObject>>,
    /// Set for the list storage of an instance of a `list` subclass from outside the frame
    /// (Note [list subclass objects from outside the frame] in `user_defined.rs`): `source`
    /// is the object itself, and its new contents are replayed past the subclass, by
    /// `list.__setitem__(obj, slice(None), items)`.
    pub subclass_storage: bool,
}

/// Whether `cls` is a tuple subclass with named fields whose instances behave exactly as tuples
/// apart from their type and field attributes: a structseq (`torch.return_types.max`, with no
/// fields outside the tuple) or a `collections.namedtuple` class that overrides none of the
/// tuple protocol. Instances are tracked as `NamedTuple`.
pub fn is_named_tuple_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(ty) = cls.cast::<pyo3::types::PyType>() else { return Ok(false) };
    let tuple = py.get_type::<pyo3::types::PyTuple>();
    if ty.is(&tuple) || !ty.is_subclass(&tuple)? {
        return Ok(false);
    }
    // Instances without a `__dict__` only: the tracker holds the items and nothing else.
    if ty.getattr("__dictoffset__")?.extract::<isize>()? != 0 {
        return Ok(false);
    }
    let structseq = ty.hasattr("n_sequence_fields")?;
    if structseq {
        let n: usize = ty.getattr("n_fields")?.extract()?;
        let m: usize = ty.getattr("n_sequence_fields")?.extract()?;
        if n != m {
            return Ok(false);
        }
    } else if !(ty.hasattr("_fields")? && ty.hasattr("_make")?) {
        return Ok(false);
    }
    for name in ["__getitem__", "__iter__", "__len__", "__contains__", "__add__", "__eq__", "__ne__", "__hash__", "__getattribute__", "__bool__"] {
        let mine = ty.getattr(name).ok();
        let base = tuple.getattr(name).ok();
        match (mine, base) {
            (Some(a), Some(b)) if a.is(&b) => {}
            (None, None) => {}
            _ => return Ok(false),
        }
    }
    Ok(!ty.hasattr("__getattr__")?)
}

/// The field names and defaults of a `collections.namedtuple` class whose instances are made by
/// the `__new__` that namedtuple generated (not overridden, no `__init__`), if `cls` is one.
pub fn namedtuple_constructor<'py>(py: Python<'py>, cls: &Bound<'py, PyAny>) -> PyResult<Option<(Vec<String>, Bound<'py, PyDict>)>> {
    if !is_named_tuple_class(py, cls)? || cls.hasattr("n_sequence_fields")? {
        return Ok(None);
    }
    let new = cls.getattr("__new__")?;
    let generated = new
        .getattr("__globals__")
        .and_then(|g| g.get_item("__name__"))
        .and_then(|n| n.extract::<String>())
        .map(|n| n.starts_with("namedtuple_"))
        .unwrap_or(false);
    let object_init = py.get_type::<PyAny>().getattr("__init__")?;
    if !generated || !cls.getattr("__init__")?.is(&object_init) {
        return Ok(None);
    }
    let fields: Vec<String> = cls.getattr("_fields")?.extract()?;
    let defaults = cls.getattr("_field_defaults")?.cast_into::<PyDict>()?;
    Ok(Some((fields, defaults)))
}

/// Whether `cls.name` is the `_replace`, `_asdict` or `_make` that `collections.namedtuple`
/// generated for a namedtuple class (`namedtuple_constructor`), not one a subclass overrides:
/// its code object is the one every generated class shares.
pub fn namedtuple_method(py: Python<'_>, cls: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    if !matches!(name, "_replace" | "_asdict" | "_make") || namedtuple_constructor(py, cls)?.is_none() {
        return Ok(false);
    }
    fn code_of<'py>(c: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let f = c.getattr(name)?;
        // `_make` is a classmethod: bound to the class here.
        let f = if f.hasattr("__func__")? { f.getattr("__func__")? } else { f };
        f.getattr("__code__")
    }
    let reference = py.import("collections")?.getattr("namedtuple")?.call1(("_Reference", "a"))?;
    Ok(code_of(cls, name)?.is(&code_of(&reference, name)?))
}

/// Which item of a `NamedTuple` of class `cls` the attribute `name` reads, if it is a field
/// (a namedtuple's `_tuplegetter`, a structseq's member).
pub fn named_tuple_field(cls: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<usize>> {
    for base in cls.getattr("__mro__")?.try_iter()? {
        let d = base?.getattr("__dict__")?;
        if !d.contains(name)? {
            continue;
        }
        let attr = d.get_item(name)?;
        return Ok(match type_name(&attr).as_str() {
            "_tuplegetter" => Some(attr.call_method0("__reduce__")?.get_item(1)?.get_item(0)?.extract()?),
            "member_descriptor" if cls.hasattr("n_sequence_fields")? => {
                let names: Vec<String> = cls.getattr("__match_args__")?.extract()?;
                names.iter().position(|n| n == name)
            }
            _ => None,
        });
    }
    Ok(None)
}

/// A tuple tracker; a tuple of constants folds into one constant tuple.
pub fn tuple_of(py: Python<'_>, items: Vec<VariableTracker>) -> VariableTracker {
    if let Some(vals) = items.iter().map(|i| i.as_constant(py)).collect::<Option<Vec<_>>>() {
        if let Ok(t) = pyo3::types::PyTuple::new(py, vals) {
            return VariableTracker::constant(t.into_any().unbind());
        }
    }
    VariableTracker::Tuple(Rc::new(items))
}

impl<'a> InstructionTranslator<'a> {
    /// ("list" or "tuple", items) of a list or tuple tracker or a constant tuple.
    pub(crate) fn sequence_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<(&'static str, Vec<VT>)>> {
        Ok(match v {
            VT::List(l) => Some(("list", l.borrow().items.clone())),
            VT::Tuple(items) | VT::NamedTuple { items, .. } => Some(("tuple", items.as_ref().clone())),
            VT::Constant(c) if c.bind(py).is_instance_of::<PyTuple>() => {
                if let Some(items) = self.og.constant_tuple_items(py, c) {
                    return Ok(Some(("tuple", items)));
                }
                Some(("tuple", c.bind(py).try_iter()?.map(|i| Ok(VT::constant(i?.unbind()))).collect::<VResult<Vec<_>>>()?))
            }
            _ => None,
        })
    }

    /// The methods `collections.namedtuple` generates (Lib/collections/__init__.py):
    /// `_replace(**kwds)` (the fields in order, each from `kwds` when named there; a name that is
    /// not a field raises ValueError), `_asdict()` (a dict of fields to items) and
    /// `_make(iterable)` (a new instance of the same class; a wrong count raises TypeError).
    fn namedtuple_method_call(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, items: &Rc<Vec<VT>>, name: &str, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let fields: Vec<String> = cls.bind(py).getattr("_fields")?.extract()?;
        match (name, args.len()) {
            ("_replace", 0) => {
                let mut out = items.as_ref().clone();
                for (k, v) in &kwargs {
                    match fields.iter().position(|f| f == k) {
                        Some(i) if i < out.len() => out[i] = v.clone(),
                        _ => graph_break!(ArgumentMismatch, "_replace() got unexpected field names (ValueError)"),
                    }
                }
                Ok(VT::NamedTuple { cls: cls.clone(), items: Rc::new(out) })
            }
            ("_asdict", 0) if kwargs.is_empty() => {
                let pairs = fields.iter().zip(items.iter()).map(|(f, v)| (PyString::new(py, f).into_any().unbind(), v.clone())).collect();
                Ok(crate::symbolic::variables::dicts::new_dict(pairs))
            }
            ("_make", 1) if kwargs.is_empty() => {
                let made = self.iter_items(py, &args[0])?;
                if made.len() != fields.len() {
                    graph_break!(ArgumentMismatch, "_make() expected {} arguments, got {} (TypeError)", fields.len(), made.len());
                }
                Ok(VT::NamedTuple { cls: cls.clone(), items: Rc::new(made) })
            }
            _ => graph_break!(ArgumentMismatch, "{}.{name}() with {} positional arguments (TypeError)", crate::symbolic::variables::qualname(cls.bind(py)), args.len()),
        }
    }

    pub(crate) fn call_container_method(&mut self, py: Python<'_>, container: &VT, name: &str, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        // Note [hooks registered in the trace] (variables/hooks.rs).
        match container {
            VT::Module { .. } => return self.register_module_hook(py, container, name, args, kwargs),
            VT::HookHandle(h) => {
                let h = h.clone();
                return self.hook_handle_method(py, &h, name, &args, &kwargs);
            }
            VT::Globals(g) => {
                let g = g.clone();
                return match (name, args.len(), kwargs.is_empty()) {
                    ("__getitem__", 1, true) => self.globals_item(py, &g, &args[0], None),
                    ("get", 1 | 2, true) => self.globals_item(py, &g, &args[0], Some(args.get(1).cloned().unwrap_or_else(|| VT::none(py)))),
                    ("__setitem__", 2, true) => {
                        self.setitem(py, container, args[0].clone(), args[1].clone())?;
                        Ok(VT::none(py))
                    }
                    _ => graph_break!(UnsupportedOperation, "globals().{name} with {} arguments", args.len()),
                };
            }
            _ => {}
        }
        // Note [call arity] (variables/arity.rs): a call the real method refuses raises there.
        let kind = match container {
            VT::List(_) => Some(super::arity::Container::List),
            VT::Tuple(_) | VT::NamedTuple { .. } => Some(super::arity::Container::Tuple),
            VT::Dict(_) => Some(super::arity::Container::Dict),
            VT::Set(_) => Some(super::arity::Container::Set),
            _ => None,
        };
        if let Some(kind) = kind {
            let keywords: Vec<&str> = kwargs.iter().map(|(k, _)| k.as_str()).collect();
            if let Err(why) = super::arity::check_method(kind, name, args.len(), &keywords) {
                graph_break!(ArgumentMismatch, "{why}");
            }
        }
        // Note [observable frees] (translator.rs): emptying a container may free its items.
        if matches!(name, "clear" | "remove") && matches!(container, VT::List(_) | VT::Dict(_) | VT::Deque(_)) {
            let observable = match container {
                VT::Deque(l) => l.borrow().items.iter().any(|i| crate::symbolic::translator::lifetime_observable(py, i)),
                _ => crate::symbolic::translator::lifetime_observable(py, container),
            };
            if observable {
                graph_break!(ObjectLifetime, "{}.{name}() may free an object whose free is observable (Note [observable frees])", container.describe(py));
            }
        }
        if let (VT::Iterator(it), true) = (container, kwargs.is_empty()) {
            // Note [generator send and close] (variables/iter.rs).
            if let Some(r) = self.generator_method(py, it, name, &args)? {
                return Ok(r);
            }
        }
        if let (VT::DictView { .. }, "isdisjoint") = (container, name) {
            // Note [dict view set operations]: the real `dictviews_isdisjoint`.
            if args.len() != 1 || !kwargs.is_empty() {
                graph_break!(ArgumentMismatch, "isdisjoint() takes exactly one argument ({} given)", args.len() + kwargs.len());
            }
            let (Some(view), Some(other)) = (self.view_operand(py, container)?, self.view_operand(py, &args[0])?) else {
                graph_break!(UnsupportedOperation, "isdisjoint of {} with {}", container.describe(py), args[0].describe(py));
            };
            return Ok(VT::constant(view.call_method1("isdisjoint", (other,))?.unbind()));
        }
        // Note [class dict proxies] (user_defined.rs).
        if let (VT::Opaque { obj, source }, true) = (container, kwargs.is_empty()) {
            if crate::symbolic::variables::user_defined::is_mappingproxy(py, obj.bind(py)) {
                let (obj, source) = (obj.clone(), source.clone());
                let found = match (name, args.as_slice()) {
                    ("get", [k] | [k, _]) | ("__getitem__" | "__contains__", [k]) => self.mappingproxy_lookup(py, obj.bind(py), &source, k)?,
                    _ => graph_break!(ArgumentMismatch, "mappingproxy.{name}() with {} arguments", args.len()),
                };
                return match (name, found) {
                    ("__contains__", f) => Ok(const_bool(py, f.is_some())),
                    (_, Some(v)) => Ok(v),
                    ("get", None) => Ok(args.get(1).cloned().unwrap_or_else(|| VT::none(py))),
                    (_, None) => Err(Unsupported::raise_new(py, "KeyError", args[0].as_constant(py).expect("a str key").as_any())),
                };
            }
        }
        if let (VT::Deque(l), false) = (container, name.starts_with("__")) {
            return self.call_deque_method(py, l, name, args, kwargs);
        }
        if let (VT::NamedTuple { cls, items }, "_replace" | "_asdict" | "_make") = (container, name) {
            return self.namedtuple_method_call(py, cls, items, name, args, kwargs);
        }
        if let (VT::NamedTuple { items, .. }, "numel") = (container, name) {
            // `torch.Size.numel()` (torch/csrc/Size.cpp: the product of the sizes, 1 when empty)
            // over symbolic sizes: `mul` nodes, so the count stays symbolic.
            if !args.is_empty() || !kwargs.is_empty() {
                graph_break!(ArgumentMismatch, "torch.Size.numel() takes no arguments");
            }
            let Some(first) = items.first() else {
                return Ok(VT::constant(1i64.into_pyobject(py)?.into_any().unbind()));
            };
            let mut acc = first.clone();
            for i in items.iter().skip(1) {
                acc = self.operator(py, "mul", vec![acc, i.clone()])?;
            }
            return Ok(acc);
        }
        // The special methods behind the syntax, called by name (`a.__setitem__(0, v)` is
        // `a[0] = v`): the same slots CPython's opcodes reach (Objects/listobject.c,
        // Objects/dictobject.c), so they share the opcode's implementation here.
        if kwargs.is_empty() && name.starts_with("__") {
            match (container, name, args.len()) {
                (_, "__setitem__", 2) => {
                    self.setitem(py, container, args[0].clone(), args[1].clone())?;
                    return Ok(VT::none(py));
                }
                (_, "__delitem__", 1) => {
                    self.delitem(py, container, args[0].clone())?;
                    return Ok(VT::none(py));
                }
                (VT::List(_) | VT::Dict(_) | VT::Deque(_), "__getitem__", 1) => return self.getitem(py, container, &args[0]),
                // `deque.__iadd__` (`deque_inplace_concat`) extends in place and returns the deque.
                (VT::Deque(_), "__iadd__", 1) => {
                    let VT::Deque(l) = container else { unreachable!() };
                    self.call_deque_method(py, l, "extend", args, vec![])?;
                    return Ok(container.clone());
                }
                (_, "__contains__", 1) => {
                    let found = self.contains(py, container, &args[0])?;
                    return Ok(const_bool(py, found));
                }
                (_, "__len__", 0) => {
                    let len = self.og.handles.builtins.bind(py).getattr("len")?;
                    return self.call_builtin(py, &len, vec![container.clone()], vec![]);
                }
                (_, "__iter__", 0) => return Ok(VT::Iterator(self.make_iter(py, container)?)),
                // `list.__iadd__` extends in place and returns the list itself; `dict.__ior__`
                // updates in place and returns the dict; `set.__ior__` and friends likewise.
                (VT::List(_), "__iadd__", 1) => {
                    self.call_container_method(py, container, "extend", args, vec![])?;
                    return Ok(container.clone());
                }
                (VT::Dict(_), "__ior__", 1) => {
                    if !matches!(&args[0], VT::Dict(_)) && args[0].as_constant(py).map(|c| !c.is_instance_of::<PyDict>()).unwrap_or(true) {
                        graph_break!(UnsupportedCall, "dict.__ior__ with {}", args[0].describe(py));
                    }
                    self.call_container_method(py, container, "update", args, vec![])?;
                    return Ok(container.clone());
                }
                (VT::Set(_), "__ior__" | "__iand__" | "__isub__" | "__ixor__", 1) => {
                    let op = &name[2..name.len() - 2];
                    return self.binary(py, op, container.clone(), args[0].clone());
                }
                _ => graph_break!(UnsupportedCall, "{}.{name}() is not modelled", container.describe(py)),
            }
        }
        if let (VT::List(l), "sort") = (container, name) {
            // `list.sort(key=..., reverse=...)`: the order `sorted` gives, written in place.
            if !args.is_empty() || kwargs.iter().any(|(k, _)| k != "key" && k != "reverse") {
                graph_break!(ArgumentMismatch, "list.sort() takes only the keyword arguments key and reverse (TypeError)");
            }
            // Note [list modified during sort]: `list_sort_impl` (Objects/listobject.c) takes
            // the items out and leaves the list empty (`ob_item = NULL`, `allocated = -1`)
            // while the keys are computed and compared, so a key function sees `[]`. Afterwards
            // the sorted items go back, whatever the key calls wrote is dropped, and if the list
            // was resized meanwhile (`allocated != -1 || ob_item != NULL`) it raises
            // `ValueError('list modified during sort')`, the list sorted all the same. A key
            // call that raises leaves the items in their old order; a comparison that raises
            // leaves them as the sort had permuted them (Note [traced sorts]). Here the items are moved
            // out into a `Vec` of capacity 0: any write that grew the list since (an append,
            // even one popped again) leaves capacity behind, as CPython's allocation does.
            if l.borrow().source.is_some() {
                self.og.side_effects.mutate_list(l);
            }
            let saved = std::mem::take(&mut l.borrow_mut().items);
            let sorted = self.sorted_items(py, saved.clone(), &kwargs);
            let modified = l.borrow().items.capacity() != 0;
            let (items, failed) = match sorted {
                Ok(v) => v,
                Err(e) => {
                    l.borrow_mut().items = saved;
                    return Err(e);
                }
            };
            // A comparison that raised leaves the items as the sort had permuted them.
            l.borrow_mut().items = items;
            if let Some(e) = failed {
                return Err(e);
            }
            if modified {
                let exc = py.get_type::<pyo3::exceptions::PyValueError>().call1(("list modified during sort",))?;
                return Err(Unsupported::raise_value("ValueError", exc.unbind(), "list modified during sort").into());
            }
            return Ok(VT::none(py));
        }
        if !kwargs.is_empty() && !matches!((container, name), (VT::Dict(_), "update")) {
            graph_break!(UnsupportedOperation, "{}.{name}() with keyword arguments", container.describe(py));
        }
        match (container, name) {
            (VT::List(l), "append" | "extend" | "insert" | "pop" | "clear" | "reverse") => {
                if l.borrow().source.is_some() {
                    self.og.side_effects.mutate_list(l);
                }
                let mut extend_items = None;
                if name == "extend" {
                    // Note [items taken one at a time]: a lazy iterable is stepped, each item
                    // appended before the next is taken.
                    if let Some(it) = self.lazy_iter(py, &args[0])? {
                        self.length_hint_effects(py, &args[0])?;
                        self.for_each_step(py, &it, |_, _, v| {
                            l.borrow_mut().items.push(v);
                            Ok(true)
                        })?;
                        return Ok(VT::none(py));
                    }
                    extend_items = Some(self.iter_items_sized(py, &args[0])?);
                }
                let mut l = l.borrow_mut();
                match name {
                    "append" => l.items.push(args[0].clone()),
                    "extend" => l.items.extend(extend_items.unwrap()),
                    "clear" => l.items.clear(),
                    "reverse" => l.items.reverse(),
                    "insert" => {
                        let k: i64 = args[0].as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "insert index"))?.extract()?;
                        let n = l.items.len() as i64;
                        let k = if k < 0 { (k + n).max(0) } else { k.min(n) };
                        l.items.insert(k as usize, args[1].clone());
                    }
                    _ => {
                        let k: i64 = match args.first() {
                            Some(a) => a.as_constant(py).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "pop index"))?.extract()?,
                            None => -1,
                        };
                        let n = l.items.len() as i64;
                        let k = if k < 0 { k + n } else { k };
                        // `list_pop_impl`'s IndexErrors, raised in the trace.
                        if n == 0 {
                            return Err(Unsupported::raise_new(py, "IndexError", PyString::new(py, "pop from empty list").as_any()));
                        }
                        if k < 0 || k >= n {
                            return Err(Unsupported::raise_new(py, "IndexError", PyString::new(py, "pop index out of range").as_any()));
                        }
                        return Ok(l.items.remove(k as usize));
                    }
                }
                Ok(VT::none(py))
            }
            // `list.remove(x)` (Objects/listobject.c, `list_remove`): the first item that is
            // `x` or equals it (`PyObject_RichCompareBool`: Note [identity before equality]) goes;
            // none is eager's ValueError, raised in the trace. Observable frees were refused
            // above.
            (VT::List(l), "remove") => {
                let items = l.borrow().items.clone();
                for (i, item) in items.iter().enumerate() {
                    if self.is_same(py, item, &args[0])? || self.equal(py, item, &args[0])? {
                        if l.borrow().items.len() != items.len() {
                            graph_break!(UnsupportedOperation, "list.remove() whose comparisons resized the list");
                        }
                        if l.borrow().source.is_some() {
                            self.og.side_effects.mutate_list(l);
                        }
                        l.borrow_mut().items.remove(i);
                        return Ok(VT::none(py));
                    }
                }
                Err(Unsupported::raise_new(py, "ValueError", PyString::new(py, "list.remove(x): x not in list").as_any()))
            }
            (VT::List(l), "index" | "count") => {
                let items = l.borrow().items.clone();
                let consts: Option<Vec<_>> = items.iter().map(|i| i.as_constant(py)).collect();
                // `index(x, start, stop)`: every argument, as the real method takes them.
                let x: Option<Vec<_>> = args.iter().map(|a| a.as_constant(py)).collect();
                match (consts, x) {
                    // Note [errors of folded operations]: `index`'s ValueError is eager's.
                    (Some(c), Some(x)) => Ok(VT::constant(PyList::new(py, c)?.call_method1(name, PyTuple::new(py, x)?).map_err(|e| Unsupported::folded(py, e))?.unbind())),
                    _ => self.list_index_or_count(py, l, name, &args),
                }
            }
            (VT::Set(set), "add" | "discard" | "remove" | "clear") => {
                self.set_write(set, &format!("set.{name}()"))?;
                let items = match name {
                    "clear" => vec![],
                    _ => args.clone(),
                };
                let consts = self.set_members_of(py, &items)?;
                let set = set.borrow();
                let set = set.bind(py);
                match name {
                    "clear" => {
                        set.call_method0("clear")?;
                    }
                    _ => {
                        // Note [errors of folded operations]: `remove`'s KeyError names the
                        // member, so only a literal one is eager's own (not a tensor's fake).
                        let literal = crate::symbolic::builder::is_literal(py, &consts[0]);
                        set.call_method1(name, (consts[0].clone(),)).map_err(|e| if literal { Unsupported::folded(py, e) } else { Unsupported::from(e) })?;
                    }
                }
                Ok(VT::none(py))
            }
            (VT::Set(set), _) if crate::symbolic::variables::dicts::SET_REAL_METHODS.contains(&name) && kwargs.is_empty() => self.set_method(py, set, name, &args),
            // `odict_keys` and friends: OrderedDict's own views of its storage
            // (`UserObject` attribute lookup names them so).
            (VT::Dict(d), "items" | "keys" | "values" | "odict_items" | "odict_keys" | "odict_values") if args.is_empty() => {
                let view = match name.trim_start_matches("odict_") {
                    "items" => DictView::Items,
                    "keys" => DictView::Keys,
                    _ => DictView::Values,
                };
                Ok(VT::DictView { dict: d.clone(), view, ordered: name.starts_with("odict_") })
            }
            (VT::Dict(d), "update" | "pop" | "setdefault" | "clear") => {
                // Note [items taken one at a time]: `d.update(pairs)` with a lazy iterable of
                // pairs (it has no `keys`, so `PyDict_MergeFromSeq2`) writes each pair before
                // taking the next; the keywords follow (`dict_update_common`).
                if let (true, [VT::Iterator(it)]) = (name == "update", args.as_slice()) {
                    if d.borrow().source.is_some() {
                        self.og.side_effects.mutate_dict(d);
                    }
                    self.for_each_step(py, it, |tx, py, pair| {
                        let (k, v) = tx.pair_item(py, &pair)?;
                        dict_set(py, &mut d.borrow_mut(), k, v)?;
                        Ok(true)
                    })?;
                    for (k, v) in kwargs {
                        dict_set(py, &mut d.borrow_mut(), PyString::new(py, &k).into_any().unbind(), v)?;
                    }
                    return Ok(VT::none(py));
                }
                let mut new_items: Vec<(Py<PyAny>, VT)> = match (name, args.first()) {
                    ("update", Some(other)) if args.len() == 1 => self.mapping_items(py, other)?,
                    ("update", None) => vec![],
                    ("update", _) => graph_break!(ArgumentMismatch, "dict.update() with {} arguments", args.len()),
                    _ => vec![],
                };
                for (k, v) in kwargs {
                    new_items.push((PyString::new(py, &k).into_any().unbind(), v));
                }
                let key = match name {
                    "pop" | "setdefault" => match args.first() {
                        Some(a) => Some(self.dict_key(py, a)?),
                        None => graph_break!(ArgumentMismatch, "dict.{name}() without a key"),
                    },
                    _ => None,
                };
                let result = {
                    let mut st = d.borrow_mut();
                    let pos = match &key {
                        Some(k) => crate::symbolic::variables::dicts::key_position(py, &st, k)?,
                        None => None,
                    };
                    match name {
                        "update" => {
                            for (k, v) in new_items {
                                dict_set(py, &mut st, k, v)?;
                            }
                            VT::none(py)
                        }
                        "clear" => {
                            if !st.items.is_empty() {
                                st.key_changed(py, crate::symbolic::variables::dicts::KEY_CLEAR, None);
                            }
                            st.items.clear();
                            VT::none(py)
                        }
                        "pop" => match (pos, args.get(1)) {
                            (Some(i), _) => {
                                let (k, v) = st.items.remove(i);
                                st.key_changed(py, crate::symbolic::variables::dicts::KEY_DELETE, Some(&k));
                                v
                            }
                            (None, Some(default)) => default.clone(),
                            // `_PyDict_Pop_KnownHash`: `KeyError(key)`, raised in the trace.
                            (None, None) => return Err(crate::symbolic::variables::dicts::key_error(py, key.as_ref().expect("pop key"))),
                        },
                        _ => match pos {
                            Some(i) => st.items[i].1.clone(),
                            None => {
                                let v = args.get(1).cloned().unwrap_or_else(|| VT::none(py));
                                let k = key.clone().expect("setdefault key").unbind();
                                st.key_changed(py, crate::symbolic::variables::dicts::KEY_INSERT, Some(&k));
                                st.items.push((k, v.clone()));
                                v
                            }
                        },
                    }
                };
                if d.borrow().source.is_some() {
                    self.og.side_effects.mutate_dict(d);
                }
                Ok(result)
            }
            // `dict.popitem()`: the last item, removed (Objects/dictobject.c, `dict_popitem_impl`;
            // LIFO since 3.7). Modelled rather than a break: a `Counter` built in the frame
            // reaches it through its storage, which a break would rebuild as a separate plain
            // dict (breaker5 23: the item stayed in the Counter).
            // `list.copy()` (Objects/listobject.c, `list_copy_impl`: `list[:]`): a new list of
            // the same items (torchvision's Swin copies its shift sizes in every block).
            (VT::List(l), "copy") if args.is_empty() && l.borrow().deque.is_none() => {
                debug_assert!(!l.borrow().append_only, "an append-only list is only appended to");
                let items = l.borrow().items.clone();
                Ok(new_list(items))
            }
            // `dict.copy()` (Objects/dictobject.c, `PyDict_Copy`): a new dict holding the same
            // key and value objects in the same order (transformers' `generate` validates
            // `model_kwargs.copy()`). A `VT::Dict` is an exact dict; the subclasses whose `copy`
            // is their own (OrderedDict, defaultdict, Counter) are user objects with storage.
            (VT::Dict(d), "copy") if args.is_empty() => {
                let items = d.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect();
                Ok(crate::symbolic::variables::dicts::new_dict(items))
            }
            (VT::Dict(d), "popitem") if args.is_empty() => {
                let item = {
                    let mut st = d.borrow_mut();
                    let item = st.items.pop();
                    if let Some((k, _)) = &item {
                        st.key_changed(py, crate::symbolic::variables::dicts::KEY_DELETE, Some(k));
                    }
                    item
                };
                let Some((k, v)) = item else {
                    return Err(Unsupported::raise_new(py, "KeyError", PyString::new(py, "popitem(): dictionary is empty").as_any()));
                };
                if d.borrow().source.is_some() {
                    self.og.side_effects.mutate_dict(d);
                }
                Ok(VT::Tuple(Rc::new(vec![crate::symbolic::variables::dicts::key_tracker(py, &k), v])))
            }
            (VT::Dict(d), "get") => {
                let Some(k) = args.first() else { graph_break!(ArgumentMismatch, "dict.get() without a key") };
                let k = self.dict_key(py, k)?;
                for (key, v) in &d.borrow().items {
                    if crate::symbolic::variables::same_key(key.bind(py), &k)? {
                        return Ok(v.clone());
                    }
                }
                Ok(args.get(1).cloned().unwrap_or_else(|| VT::none(py)))
            }
            _ => graph_break!(UnsupportedOperation, "{}.{name}()", container.describe(py)),
        }
    }
}

impl<'a> InstructionTranslator<'a> {
    /// `list.index(x[, start[, stop]])` / `list.count(x)` over items that are not all constants
    /// (Objects/listobject.c, `list_index_impl`, `list_count`): each item in range is compared
    /// with `x` by identity, then equality (Note [identity before equality]), in order. A
    /// missing `x` is eager's ValueError when its text is known (a constant `x`: the message
    /// the real method gives), a break otherwise; comparisons that resize the list are a break.
    fn list_index_or_count(&mut self, py: Python<'_>, l: &Rc<RefCell<ListState>>, name: &str, args: &[VT]) -> VResult<VT> {
        let items = l.borrow().items.clone();
        let n = items.len() as i64;
        let bound = |i: usize, default: i64| -> VResult<i64> {
            let Some(a) = args.get(i) else { return Ok(default) };
            let Some(v) = a.as_constant(py).and_then(|c| c.extract::<i64>().ok()) else {
                graph_break!(UnsupportedOperation, "list.{name} with a bound that is not an int constant");
            };
            Ok(if v < 0 { (v + n).max(0) } else { v.min(n) })
        };
        let (start, stop) = (bound(1, 0)?, bound(2, n)?);
        let mut count = 0i64;
        for i in start..stop.max(start) {
            let item = &items[i as usize];
            let hit = self.is_same(py, item, &args[0])? || self.equal(py, item, &args[0])?;
            if l.borrow().items.len() != items.len() {
                graph_break!(UnsupportedOperation, "list.{name}() whose comparisons resized the list");
            }
            if hit {
                if name == "index" {
                    return Ok(VT::constant(i.into_pyobject(py)?.into_any().unbind()));
                }
                count += 1;
            }
        }
        if name == "count" {
            return Ok(VT::constant(count.into_pyobject(py)?.into_any().unbind()));
        }
        match args[0].as_constant(py) {
            Some(c) => match PyList::empty(py).call_method1("index", (c,)) {
                Err(e) => Err(Unsupported::folded(py, e)),
                Ok(_) => graph_break!(InternalInconsistency, "index() of an empty list found an item"),
            },
            None => graph_break!(RaisesException, "list.index() of {}: not in list (ValueError)", args[0].describe(py)),
        }
    }
}

pub fn make_tuple(py: Python<'_>, items: Vec<VT>) -> VResult<VT> {
    if items.iter().all(|i| matches!(i, VT::Constant(_))) {
        let vals: Vec<_> = items.iter().map(|i| i.as_constant(py).unwrap()).collect();
        return Ok(VT::constant(PyTuple::new(py, vals)?.into_any().unbind()));
    }
    Ok(VT::Tuple(Rc::new(items)))
}

pub fn new_list(items: Vec<VT>) -> VT {
    VT::List(Rc::new(RefCell::new(ListState { entry_len: items.len(), items, source: None, append_only: false, deque: None, owner: None, subclass_storage: false })))
}

pub(crate) fn is_seq(v: &VT) -> bool {
    matches!(v, VT::Tuple(_) | VT::NamedTuple { .. })
}

/// The count of a sequence repetition: an int constant (a bool counts as 0 or 1, as in
/// CPython), or a symbolic int, specialized to its value (a guard on it); `None` for anything
/// else (a float raises TypeError there, left to the operator).
pub(crate) fn repeat_count(py: Python<'_>, v: &VT) -> Option<i64> {
    if let VT::SymNum(s) = v {
        if type_name(s.fake.bind(py)) != "SymInt" {
            return None;
        }
    }
    let c = match v {
        VT::Constant(_) | VT::SymNum(_) => v.as_constant(py)?,
        _ => return None,
    };
    if c.is_instance_of::<pyo3::types::PyInt>() {
        c.extract::<i64>().ok()
    } else {
        None
    }
}
