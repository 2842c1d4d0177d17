//! User-defined classes and objects (torch's `UserDefinedClassVariable`,
//! `UserDefinedObjectVariable`): generic attribute lookup on real objects, `super()`, and
//! objects of plain classes built in the frame.
//!
//! Objects of plain Python classes created inside the traced frame (torch's
//! `UserDefinedObjectVariable` for a new object, with new-object side effects).
//!
//! `cls(*args)` for a class that `is_plain_class` accepts makes a `UserObject`: no real object
//! exists while tracing; `__init__` (a dataclass's generated one included) is inlined with the
//! tracker as `self`, and attribute writes land in `attrs`. Nothing needs replaying for an
//! object that dies inside the frame; one that outlives the graph (returned, stored into an
//! object from the frame, live at a break) is rebuilt once by `dynamo._C.new_object(cls,
//! attrs, items)`, which writes the instance dict past the class's `__setattr__` (and the dict
//! storage past its `__setitem__`). Attribute lookup follows `object.__getattribute__`
//! (Objects/object.c, `_PyObject_GenericGetAttrWithDict`): data descriptors on the class, then
//! the instance attributes, then the class attribute.
//!
//! Note [dict subclass objects]: an instance of a subclass of `dict` or `collections.OrderedDict`
//! (transformers' `ModelOutput`: an `OrderedDict` and a dataclass at once) has two stores, the
//! instance `__dict__` and the dict storage that `dict`'s C methods read. The tracker keeps both
//! as dict trackers: `attrs` (also what `o.__dict__` gives, so writes through it are attribute
//! writes) and `storage`. The class's own Python methods (`__setitem__`, `__getitem__`,
//! `__setattr__`, ...) are inlined as for any object; where the class's slot is `dict`'s or
//! `OrderedDict`'s C function (`type(o).keys`, `super().__setitem__`, `len(o)`, `k in o`,
//! `iter(o)`), the operation acts on `storage` (`storage_method`). Only the methods whose
//! `OrderedDict` version touches nothing but the storage are mapped: `OrderedDict.update` and
//! `setdefault` call the subclass's `__setitem__` back and are left to Python (a graph break).
//!
//! Note [list subclass objects]: an instance of a subclass of `list` built in the frame
//! (transformers' `LogitsProcessorList()` and `StoppingCriteriaList()` in `generate()`) is a
//! `UserObject` whose `list` field is a list tracker holding the items that `list`'s C code
//! reads, beside `attrs`. As for a dict subclass, the class's Python methods are inlined; where
//! the class's attribute or slot is `list`'s own C method (`o.append(p)`, `len(o)`, `o[i]`,
//! `iter(o)`, `x in o`, `list.append(o, p)`), the operation acts on the storage (`storage_method`,
//! `LIST_STORAGE_METHODS`: list's C methods never call back into a subclass). Methods whose result
//! is the object itself (`__iadd__`, `__imul__`) and the comparisons and operators are not mapped
//! (left to Python). `list.__init__` (no keywords, at most one iterable) clears the storage and
//! extends it, as `list___init___impl` does; `list.__new__(cls)` makes an empty one. The storage
//! knows its object (`ListState::owner`): it is never rebuilt on its own; the object is rebuilt by
//! `dynamo._C.new_object` from `list.__new__(cls)` and `list.extend`, past the subclass, and an
//! iterator over the storage is rebuilt as an iterator over the object (whose `__iter__` is
//! `list`'s, else the storage was not used).
//!
//! Note [list subclass objects from outside the frame]: an instance of a `list` subclass passed
//! in (`class L(list)`, transformers' `LogitsProcessorList`) stays a `VT::Opaque` (its type,
//! identity and attributes are the real object's), and its list storage is a list tracker whose
//! source is the object itself (`ListState::subclass_storage`), made once per object
//! (`opaque_list_state`, kept in `OutputGraph::lists_by_ptr`, so two paths to the object share
//! it) when the class keeps list's `__len__` and `__getitem__` (the guards and input loads read
//! the object through them: TYPE_MATCH, LENGTH_CHECK, `o[i]`). As torch's
//! `UserDefinedListVariable` with its `_list_vt`: where the class's attribute or slot is list's
//! own C method (`o.append(p)`, `o[i] = v`, `del o[i]`, `len(o)`, `x in o`, `iter(o)`,
//! `list.append(o, p)`, `super().append(p)`; `LIST_STORAGE_METHODS`), the operation acts on the
//! storage; a method or slot the class overrides in Python is inlined (so its `super()` call
//! reaches the storage); `o += [x]` is `list_inplace_concat` on the storage when neither
//! `__iadd__` nor `__add__` is overridden, giving the object itself. A write is a side effect
//! replayed after the graph as `list.__setitem__(o, slice(None), items)`, past any
//! `__setitem__` the subclass defines (`SideEffect::ListStorageContents`).
//!
//! Note [dict subclass objects from outside the frame]: the same for an instance of a `dict`
//! subclass passed in. Its storage tracker (Note [dict subclass storage]) is made once per
//! object (`OutputGraph::dict_storages_by_ptr`), so reads after a write see it; unless the
//! object is an `OrderedDict` (whose linked list `dict`'s C methods do not keep), `dict`'s own
//! writing methods and slots (`o[k] = v`, `del o[k]`, `pop`, `popitem`, `clear`, `setdefault`,
//! `update`, none of which calls back into the subclass) act on the storage, a `__setitem__` or
//! `__delitem__` the class defines in Python is inlined, and the new contents are replayed by
//! `dynamo._C.replace_dict_storage` through `PyDict_Clear`/`PyDict_SetItem`, past the subclass
//! (`SideEffect::DictStorageContents`).

use crate::guards::GuardKind;
use crate::source::{ItemKey, Source};
use crate::symbolic::builder::wrap;
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::{InstructionTranslator, LOGGER_METHODS};
use crate::symbolic::variables::dicts::{dict_set, DictState};

/// The tracked state of a user object built in the frame.
pub struct UserObject {
    pub cls: Py<PyAny>,
    /// Where the class was read from (its attributes are read and guarded through it).
    pub cls_source: Arc<Source>,
    /// The instance `__dict__`, in insertion order; `o.__dict__` is this very tracker.
    pub attrs: Rc<RefCell<DictState>>,
    /// For an instance of a `dict` / `OrderedDict` subclass: the dict storage (Note [dict
    /// subclass objects]); `None` for other classes.
    pub storage: Option<Rc<RefCell<DictState>>>,
    /// For an instance of a `list` subclass: the list storage (Note [list subclass objects]);
    /// `None` for other classes.
    pub list: Option<Rc<RefCell<crate::symbolic::variables::lists::ListState>>>,
}

/// The methods of `dict` and `collections.OrderedDict` that act on an instance's storage alone
/// (no call back into the subclass: `OrderedDict.update`/`setdefault`/`pop` go through the
/// subclass's `__getitem__`/`__setitem__`, `copy` calls the class, so they are not here).
/// `dict_subscript` calls a subclass's `__missing__`: its `__getitem__` is not mapped to the
/// storage for such a class (`InstructionTranslator::getitem` inlines `__missing__`).
pub const STORAGE_METHODS: [&str; 10] = ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__", "get", "keys", "values", "items"];

/// The methods of `dict` itself (not `OrderedDict`'s) that also act on the storage alone:
/// `dict.pop(o, k)` and friends never call back into the subclass (Objects/dictobject.c).
pub const DICT_STORAGE_METHODS: [&str; 5] = ["pop", "popitem", "clear", "setdefault", "update"];

/// The methods of `list` that act on the storage of a list subclass instance alone (Note [list
/// subclass objects]): list's C methods read and write `ob_item` without calling back into the
/// subclass, and none of these returns the object itself (`__iadd__` does: not here). A slice
/// read (`__getitem__`) and `copy` give a plain list, as for the storage.
pub const LIST_STORAGE_METHODS: [&str; 17] = ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__", "append", "extend", "insert", "pop", "remove", "index", "count", "clear", "reverse", "sort", "copy"];

impl UserObject {
    /// A new object of `cls` with no attributes (and an empty dict storage when `dict_base`).
    pub fn new(cls: Py<PyAny>, cls_source: Arc<Source>, dict_base: bool) -> Rc<Self> {
        let empty = || Rc::new(RefCell::new(DictState::new(Vec::new(), None)));
        Rc::new_cyclic(|me| {
            let attrs = empty();
            attrs.borrow_mut().instance_of = Some(me.clone());
            UserObject { cls, cls_source, attrs, storage: dict_base.then(empty), list: None }
        })
    }

    /// A new object of `cls`, a `list` subclass, with no attributes and an empty list storage
    /// that knows its object (Note [list subclass objects]).
    pub fn new_list(cls: Py<PyAny>, cls_source: Arc<Source>) -> Rc<Self> {
        let empty = Rc::new(RefCell::new(DictState::new(Vec::new(), None)));
        Rc::new_cyclic(|me| {
            empty.borrow_mut().instance_of = Some(me.clone());
            let list = crate::symbolic::variables::lists::ListState { items: vec![], source: None, entry_len: 0, append_only: false, deque: None, owner: Some(me.clone()), subclass_storage: false };
            UserObject { cls, cls_source, attrs: empty, storage: None, list: Some(Rc::new(RefCell::new(list))) }
        })
    }

    /// The instance attribute `name`, if set.
    pub fn get(&self, py: Python<'_>, name: &str) -> Option<VT> {
        self.attrs.borrow().items.iter().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)).map(|(_, v)| v.clone())
    }

    /// Sets the instance attribute `name` (a new key bumps the dict's version, as an insertion
    /// into a real `__dict__` invalidates its iterators).
    pub fn set(&self, py: Python<'_>, name: &str, v: VT) {
        let mut attrs = self.attrs.borrow_mut();
        match attrs.items.iter_mut().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)) {
            Some(slot) => slot.1 = v,
            None => {
                attrs.items.push((PyString::new(py, name).into_any().unbind(), v));
                attrs.version += 1;
            }
        }
    }

    /// Removes the instance attribute `name` (`del o.name` through `object.__delattr__`);
    /// false when the instance has none (CPython then raises AttributeError). A deletion bumps
    /// the dict's version, as it invalidates iterators over a real `__dict__`.
    pub fn remove(&self, py: Python<'_>, name: &str) -> bool {
        let mut attrs = self.attrs.borrow_mut();
        match attrs.items.iter().position(|(k, _)| k.bind(py).eq(name).unwrap_or(false)) {
            Some(i) => {
                attrs.items.remove(i);
                attrs.version += 1;
                true
            }
            None => false,
        }
    }

    /// The source of the class attribute `name` found at `cls.__mro__[k]`:
    /// `cls.__mro__[k].__dict__[name]` (read without running descriptors).
    pub fn class_attr_source(&self, k: usize, name: &str) -> Arc<Source> {
        self.cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()))
    }

    /// The storage as a dict tracker when `method` (found on the class's MRO, or through
    /// `super()`) is `dict`'s or `OrderedDict`'s own C method named `name` in
    /// `STORAGE_METHODS`: calling it on the object is calling it on the storage.
    pub fn storage_method(&self, py: Python<'_>, method: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<VT>> {
        if !matches!(crate::symbolic::variables::type_name(method).as_str(), "method_descriptor" | "wrapper_descriptor") {
            return Ok(None);
        }
        let Ok(owner) = method.getattr("__objclass__") else { return Ok(None) };
        if let Some(list) = &self.list {
            // Note [list subclass objects].
            let own = owner.is(py.get_type::<pyo3::types::PyList>()) && LIST_STORAGE_METHODS.contains(&name);
            return Ok(own.then(|| VT::List(list.clone())));
        }
        let Some(storage) = &self.storage else { return Ok(None) };
        // `dict.__getitem__` of a class with `__missing__` calls it for a missing key
        // (`dict_subscript`): not the storage's subscript alone.
        if name == "__getitem__" && self.cls.bind(py).hasattr("__missing__")? {
            return Ok(None);
        }
        if DICT_STORAGE_METHODS.contains(&name) && owner.is(py.get_type::<PyDict>()) {
            return Ok(Some(VT::Dict(storage.clone())));
        }
        if !STORAGE_METHODS.contains(&name) {
            return Ok(None);
        }
        Ok(dict_base_type(py, &owner)?.then(|| VT::Dict(storage.clone())))
    }

    /// Whether this is an instance of exactly `collections.OrderedDict` (not a subclass), whose
    /// item order is its storage's order (`dynamo._polyfills.ODICT_METHODS`).
    pub fn is_exact_ordered_dict(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.storage.is_some() && self.cls.bind(py).is(py.import("collections")?.getattr("OrderedDict")?))
    }

    /// The storage when the class's own slot `name` (what the syntax reaches: `len(o)`,
    /// `o[k]`, `k in o`, `iter(o)`) is the builtin one rather than Python code.
    pub fn storage_slot(&self, py: Python<'_>, name: &str) -> PyResult<Option<VT>> {
        if self.storage.is_none() && self.list.is_none() {
            return Ok(None);
        }
        let ty = self.cls.bind(py).cast::<PyType>()?.clone();
        for base in ty.getattr("__mro__")?.try_iter()? {
            let d = base?.getattr("__dict__")?;
            if d.contains(name)? {
                return self.storage_method(py, &d.get_item(name)?, name);
            }
        }
        Ok(None)
    }

    /// Whether attribute `key` holds the very object stored under the same key in the dict
    /// storage (`ModelOutput.__setitem__` writes both): rebuilt once and set twice
    /// (`dynamo._C.new_object`'s `from_items`), since a value reached twice would otherwise be
    /// rebuilt as two copies.
    pub fn attr_aliases_storage(&self, py: Python<'_>, key: &Bound<'_, PyAny>, v: &VT) -> bool {
        let Some(storage) = &self.storage else { return false };
        let st = storage.borrow();
        st.items.iter().any(|(k, sv)| k.bind(py).eq(key).unwrap_or(false) && same_object(py, sv, v))
    }
}

/// Whether two trackers stand for the same Python object (mutable kinds by identity of their
/// state; tensors by graph node; modules and constants by identity).
pub fn same_object(py: Python<'_>, a: &VT, b: &VT) -> bool {
    match (a, b) {
        (VT::List(x), VT::List(y)) | (VT::Deque(x), VT::Deque(y)) => Rc::ptr_eq(x, y),
        (VT::Dict(x), VT::Dict(y)) => Rc::ptr_eq(x, y),
        (VT::Set(x), VT::Set(y)) => Rc::ptr_eq(x, y),
        (VT::Iterator(x), VT::Iterator(y)) => Rc::ptr_eq(x, y),
        (VT::UserObject(x), VT::UserObject(y)) => Rc::ptr_eq(x, y),
        (VT::Partial(x), VT::Partial(y)) => Rc::ptr_eq(x, y),
        (VT::Tuple(x), VT::Tuple(y)) => Rc::ptr_eq(x, y),
        (VT::Tensor(x), VT::Tensor(y)) => x.node == y.node,
        (VT::Module { obj: x, .. }, VT::Module { obj: y, .. }) => x.bind(py).is(y.bind(py)),
        (VT::Constant(x), VT::Constant(y)) => x.bind(py).is(y.bind(py)),
        _ => false,
    }
}

/// Whether `t` is `dict`, `collections.OrderedDict` or `collections.defaultdict` (the builtin
/// bases a tracked object may have; Note [defaultdict objects]).
pub fn dict_base_type(py: Python<'_>, t: &Bound<'_, PyAny>) -> PyResult<bool> {
    let collections = py.import("collections")?;
    Ok(t.is(py.get_type::<PyDict>()) || t.is(collections.getattr("OrderedDict")?) || t.is(collections.getattr("defaultdict")?))
}

/// Whether `cls` is `collections.defaultdict` or a subclass of it.
pub fn is_defaultdict_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let dd = py.import("collections")?.getattr("defaultdict")?;
    Ok(cls.cast::<PyType>().map(|t| t.is_subclass(&dd).unwrap_or(false)).unwrap_or(false))
}

/// Whether class attribute `ca` is one of `collections.defaultdict`'s own members: its
/// `default_factory` slot (a `member_descriptor`) or one of its C methods (`name` on the class
/// `defaultdict` itself, not overridden).
pub fn is_defaultdict_own(py: Python<'_>, ca: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    let dd = py.import("collections")?.getattr("defaultdict")?;
    Ok(dd.getattr("__dict__")?.get_item(name).map(|own| own.is(ca)).unwrap_or(false))
}

// Note [defaultdict objects]: `collections.defaultdict` (Modules/_collectionsmodule.c) is a C
// subclass of `dict` with one slot, `default_factory`, and a `__missing__` that `dict_subscript`
// calls for a missing key. One built in the frame is a `UserObject` with a dict storage like any
// dict subclass (Note [dict subclass objects]); its factory is kept as the attribute
// `default_factory` (rebuilt through `object.__setattr__`, which sets the slot). What the C type
// defines is modelled after its C code: `defaultdict(factory, *args, **kwargs)` (`defdict_init`:
// the first positional argument is the factory, callable or None, else TypeError; the rest go
// to `dict.__init__`; a `default_factory=` keyword is an item), `__missing__` (`defdict_missing`)
// and `copy`/`__copy__` (`defdict_copy`) are the `dynamo._polyfills` versions, traced. The
// instance dict of a Python subclass does not hold the factory, so its `__dict__` is a break.

/// Whether `ca`, a `method_descriptor` found on the class of `o`, is a method of one of the
/// builtin bases `list`, `dict`, `set` that `o` is an instance of (Note [C methods of objects
/// from the frame]).
fn builtin_base_method(py: Python<'_>, o: &Bound<'_, PyAny>, ca: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(owner) = ca.getattr("__objclass__") else { return Ok(false) };
    let bases = [py.get_type::<pyo3::types::PyList>(), py.get_type::<PyDict>(), py.get_type::<pyo3::types::PySet>()];
    Ok(bases.iter().any(|b| owner.is(b)) && o.is_instance(&owner)?)
}

/// Whether the class of `o` defines `__getitem__`, `__setitem__` or `__delitem__` in Python
/// (found before `dict`'s and `OrderedDict`'s own slots in its MRO).
fn item_slots_overridden(py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<bool> {
    for name in ["__getitem__", "__setitem__", "__delitem__"] {
        if let Some((_, f)) = static_type_lookup(&o.get_type(), name)? {
            if !matches!(type_name(&f).as_str(), "wrapper_descriptor" | "method_descriptor") {
                return Ok(true);
            }
        }
    }
    let _ = py;
    Ok(false)
}

/// Whether `o` is an instance of a subclass of `dict` whose storage the trace may write (Note
/// [dict subclass objects from outside the frame]), an `OrderedDict` included (Note
/// [OrderedDict objects from outside the frame]).
pub(crate) fn dict_storage_writable(py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<bool> {
    let dict_type = py.get_type::<PyDict>();
    Ok(o.is_instance_of::<PyDict>() && !o.get_type().is(&dict_type))
}

/// Whether instances of `cls` have a list storage (`cls` subclasses `list`; Note [list subclass
/// objects]).
pub fn has_list_base(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(cls.cast::<PyType>().map(|t| t.is_subclass(&py.get_type::<pyo3::types::PyList>()).unwrap_or(false)).unwrap_or(false))
}

/// Whether instances of `cls` have a dict storage (`cls` subclasses `dict`).
pub fn has_dict_base(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(cls.cast::<PyType>().map(|t| t.is_subclass(&py.get_type::<PyDict>()).unwrap_or(false)).unwrap_or(false))
}

/// Whether instances of `cls` can be tracked as `UserObject`s: a plain metaclass (see
/// `plain_metaclass`) and, for an ABC, no abstract method left; every class of the MRO but
/// `object` a Python class (heap type) with an instance `__dict__` or `__slots__` (Note [slotted
/// objects]; a dict subclass at most empty ones, as the `collections.abc` mixins declare), or one of the builtin bases `dict` and
/// `collections.OrderedDict` (Note [dict subclass objects]) or `list` (Note [list subclass
/// objects]); the base's `__new__`; the base's
/// `__getattribute__` (`object`'s, or `dict`'s for a dict subclass, both generic) or a Python
/// function (inlined on reads); no
/// `__getattr__`, `__del__` or (for a dict subclass) `__missing__`; and `__init__` either the
/// base's or a Python function. (A Python `__setattr__`, as a frozen dataclass has, is inlined
/// on writes.)
pub fn is_plain_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    let Ok(ty) = cls.cast::<PyType>() else { return Ok(false) };
    let object = py.get_type::<PyAny>();
    if !plain_metaclass(py, &ty.get_type())? {
        return Ok(false);
    }
    // Note [object sentinels]: `object()` itself (`missing = object()`, then `v is missing`) is
    // an object with no instance dict and no slots: a tracker with no attributes, compared by
    // identity, whose attribute writes are refused as for any object without `__dict__`
    // (`user_object_setattr`) and which is rebuilt, if it outlives the graph, by
    // `object.__new__(object)`, a fresh object as eager's call makes.
    if ty.is(&object) {
        return Ok(true);
    }
    // An ABC with an abstract method left cannot be instantiated (`object.__new__` raises).
    if ty.get_type().is_subclass(&py.import("abc")?.getattr("ABCMeta")?)? && ty.getattr("__abstractmethods__")?.len()? != 0 {
        return Ok(false);
    }
    let dictoffset: isize = ty.getattr("__dictoffset__")?.extract()?;
    let defaultdict = py.import("collections")?.getattr("defaultdict")?;
    let dict_sub = has_dict_base(py, cls)?;
    // Note [list subclass objects]: `list` is a builtin base like `dict`, with its own `__new__`
    // and generic `__getattribute__` slot wrappers.
    let list_sub = has_list_base(py, cls)?;
    let list_type = py.get_type::<pyo3::types::PyList>();
    // Note [slotted objects]: a class whose instances keep their attributes in `__slots__`
    // (no instance dict, or one beside the slots) is tracked too: its slots are attributes of
    // the tracker like the dict's (`member_get`/`member_set` read and write the slot,
    // Objects/descrobject.c), and the rebuild's `object.__setattr__` fills them. Not for dict
    // subclasses, whose storage is modelled separately.
    if dictoffset == 0 && !ty.is(&defaultdict) && (dict_sub || list_sub || !has_slots(cls)?) {
        return Ok(false);
    }
    const HEAPTYPE: u64 = 1 << 9;
    for base in ty.getattr("__mro__")?.try_iter()? {
        let base = base?;
        if base.is(&object) || dict_base_type(py, &base)? || (list_sub && base.is(&list_type)) {
            continue;
        }
        let flags: u64 = base.getattr("__flags__")?.extract()?;
        let d = base.getattr("__dict__")?;
        let slots_ok = match d.get_item("__slots__") {
            Ok(slots) if dict_sub || list_sub => slots.len().map(|n| n == 0).unwrap_or(false) && !slots.is_instance_of::<pyo3::types::PyString>(),
            // Strings or an iterable of strings (`type_new` checks the names).
            Ok(_) => true,
            Err(_) => true,
        };
        if flags & HEAPTYPE == 0 || !plain_metaclass(py, &base.get_type())? || !slots_ok {
            return Ok(false);
        }
        // contextlib's generator-driven managers (`@contextmanager`) are their own trackers
        // (Note [generator context managers] in `ctx_manager.rs`); its exit stacks run
        // callbacks and its redirections swap process state. Only its plain managers (and
        // their abstract bases) are tracked objects.
        let module = base.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "contextlib" {
            let name = base.getattr("__name__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            if !["nullcontext", "suppress", "closing", "AbstractContextManager", "AbstractAsyncContextManager"].contains(&name.as_str()) {
                return Ok(false);
            }
        }
    }
    // `dict` has its own slot wrappers for `__new__` and (the generic) `__getattribute__`.
    let base = if dict_sub {
        py.get_type::<PyDict>().into_any()
    } else if list_sub {
        list_type.clone().into_any()
    } else {
        object.clone().into_any()
    };
    // A Python `__getattribute__` (transformers' `PreTrainedConfig` alias map) is inlined on
    // reads, its `super().__getattribute__` reaching the generic lookup.
    let getattribute = ty.getattr("__getattribute__")?;
    let python_getattribute = crate::symbolic::variables::type_name(&getattribute) == "function";
    // `defaultdict` sets its own `tp_getattro`, the generic one (a slot wrapper of its own).
    let generic_getattribute = getattribute.is(base.getattr("__getattribute__")?) || getattribute.is(defaultdict.getattr("__getattribute__")?);
    // Note [user __new__]: a Python `__new__` on a plain object class (singletons, classes
    // that set fields before `__init__`) is inlined by `construct_user_object`.
    let own_new = !ty.getattr("__new__")?.is(base.getattr("__new__")?);
    if (own_new && (dict_sub || list_sub || python_new(&ty)?.is_none())) || !(generic_getattribute || python_getattribute) {
        return Ok(false);
    }
    // A dict subclass's `__missing__` (`collections.Counter`'s) is inlined when it is Python
    // code (`dict_subscript` calls it for a missing key; `InstructionTranslator::getitem`).
    let missing_ok = !dict_sub || match ty.getattr("__missing__") {
        Ok(m) => crate::symbolic::variables::type_name(&m) == "function" || m.is(defaultdict.getattr("__missing__")?),
        Err(_) => true,
    };
    if ty.hasattr("__getattr__")? || ty.hasattr("__del__")? || !missing_ok {
        return Ok(false);
    }
    let init = ty.getattr("__init__")?;
    let setattr = ty.getattr("__setattr__")?;
    let is_function = |f: &Bound<'_, PyAny>| crate::symbolic::variables::type_name(f) == "function";
    let builtin_init = init.is(object.getattr("__init__")?)
        || (dict_sub && init.getattr("__objclass__").map(|o| dict_base_type(py, &o).unwrap_or(false)).unwrap_or(false))
        || (list_sub && init.is(list_type.getattr("__init__")?));
    Ok((builtin_init || is_function(&init)) && (setattr.is(object.getattr("__setattr__")?) || is_function(&setattr)))
}

/// Whether metaclass `meta` leaves instance creation, attribute lookup and `isinstance` to
/// `type`: `type` itself, `abc.ABCMeta` (its `isinstance` only consults registrations, which do
/// not change what an instance is), or a Python subclass of `type` that overrides none of
/// `__call__`, `__getattribute__`, `__getattr__`, `__instancecheck__` and `__subclasscheck__`
/// (transformers' `_BCCacheNameMeta` overrides only `__setattr__`, which runs on writes to the
/// class, and those are graph breaks for any metaclass but `type`).
pub fn plain_metaclass(py: Python<'_>, meta: &Bound<'_, PyType>) -> PyResult<bool> {
    let type_type = py.get_type::<PyType>();
    let abc_meta = py.import("abc")?.getattr("ABCMeta")?;
    if meta.is(&type_type) || meta.is(&abc_meta) {
        return Ok(true);
    }
    if !meta.is_subclass(&type_type)? || meta.is_subclass(&abc_meta)? {
        return Ok(false);
    }
    for name in ["__call__", "__getattribute__", "__instancecheck__", "__subclasscheck__"] {
        if !meta.getattr(name)?.is(type_type.getattr(name)?) {
            return Ok(false);
        }
    }
    Ok(!meta.hasattr("__getattr__")?)
}

/// Whether `obj` is a `types.MappingProxyType` (what `cls.__dict__` gives).
pub(crate) fn is_mappingproxy(py: Python<'_>, obj: &Bound<'_, PyAny>) -> bool {
    py.import("types").and_then(|t| t.getattr("MappingProxyType")).is_ok_and(|t| obj.get_type().is(&t))
}

impl<'a> InstructionTranslator<'a> {
    /// Note [class dict proxies]: `cls.__dict__` (a `type(o).__dict__` too) is a read-only
    /// `mappingproxy` over the class's own namespace, wrapped with its source
    /// (`cls.__dict__`). Looking a string key up in it (`d.get(k, default)`, `k in d`, `d[k]`)
    /// reads the real namespace at trace time: the answer to "is `k` there" is guarded as a
    /// query of the same proxy (a live view of that class's dict, the class itself fixed by the
    /// guards on its source), and a value found is wrapped from `cls.__dict__[k]` with the
    /// guards its kind takes. A missing key is eager's KeyError for `d[k]`. Other uses of the
    /// proxy (iteration, `keys()`, `len`) stay breaks, and so does a lookup of a name the trace
    /// wrote on a class (pending until the graph has run, so not in the real namespace yet).
    ///
    /// The lookup of key `key` in the proxy `obj` reached through `source`: `Some(value)` when
    /// present; `None` when absent.
    pub(crate) fn mappingproxy_lookup(&mut self, py: Python<'_>, obj: &Bound<'_, PyAny>, source: &Arc<Source>, key: &VT) -> VResult<Option<VT>> {
        let Some(k) = key.as_constant(py).filter(|k| k.is_exact_instance_of::<PyString>()) else {
            graph_break!(UnsupportedOperation, "lookup of {} in a class's __dict__", key.describe(py));
        };
        let name: String = k.extract()?;
        // The real namespace does not hold this trace's pending class writes yet: a lookup of a
        // name some class was given in the trace is left to Python.
        if self.og.side_effects.attrs.iter().any(|w| w.name == name && w.obj.bind(py).is_instance_of::<PyType>()) {
            graph_break!(UntracedValue, "lookup of '{name}' in a class's __dict__ after a write of that class attribute");
        }
        let found = obj.contains(&k)?;
        let contains = py.import("operator")?.getattr("contains")?;
        let args = pyo3::types::PyTuple::new(py, [obj.clone(), k.clone()])?;
        self.og.add_guard(None, GuardKind::GlobalQuery { func: contains.unbind(), args: args.unbind(), expected: pyo3::types::PyBool::new(py, found).to_owned().into_any().unbind() });
        if !found {
            return Ok(None);
        }
        let value = obj.get_item(&k)?;
        Ok(Some(wrap(py, self.og, &value, source.item(ItemKey::Str(name)))?))
    }

    /// `obj.name` on a user object reached through `source`: a pending write of this trace, else
    /// the class's own `__getattribute__` when it is a Python function (inlined, e.g.
    /// transformers' `PretrainedConfig` alias map), else `generic_getattr`.
    pub(crate) fn user_getattr(&mut self, py: Python<'_>, vt: &VT, obj: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&obj.clone().unbind(), name) {
            return Ok(v);
        }
        let ty = obj.get_type();
        // Note [class dict proxies]: `cls.__dict__.get`, read as a method of the proxy.
        if is_mappingproxy(py, obj) && matches!(name, "get" | "__contains__" | "__getitem__") {
            return Ok(VT::ContainerMethod { container: Box::new(vt.clone()), name: name.to_string() });
        }
        if !has_generic_getattribute(py, &ty)? {
            // Note [__getattr__ after an AttributeError]: the class's `__getattr__` answers an
            // AttributeError of its `__getattribute__`.
            match self.call_attr_hook(py, vt, &ty, source, "__getattribute__", name) {
                Ok(Some(v)) => return Ok(v),
                Err(e) if e.is_raised("AttributeError") => {
                    return match self.call_attr_hook(py, vt, &ty, source, "__getattr__", name)? {
                        Some(v) => Ok(v),
                        None if static_type_lookup(&ty, "__getattr__")?.is_some() => graph_break!(UntracedValue, "attribute '{name}' of {} (a C __getattr__ after __getattribute__ raised)", vt.describe(py)),
                        None => Err(e),
                    };
                }
                Err(e) => return Err(e),
                Ok(None) => {}
            }
            graph_break!(UntracedValue, "attribute '{name}' of {} (custom __getattribute__)", vt.describe(py));
        }
        self.generic_getattr(py, vt, obj, source, name)
    }

    /// `hook(obj, name)` inlined, where `hook` (`__getattribute__` or `__getattr__`) is a Python
    /// function on `ty`; `None` when the type has no such Python function.
    pub(crate) fn call_attr_hook(&mut self, py: Python<'_>, vt: &VT, ty: &Bound<'_, pyo3::types::PyType>, source: &Arc<Source>, hook: &str, name: &str) -> VResult<Option<VT>> {
        match static_type_lookup(ty, hook)? {
            Some((k, f)) if type_name(&f) == "function" => {
                let func = wrap(py, self.og, &f, class_attr_source(source, k, hook))?;
                let key = VT::constant(PyString::new(py, name).into_any().unbind());
                self.call(py, &func, vec![vt.clone(), key], vec![]).map(Some)
            }
            // `__getattr__ = dict.get` (or `dict.__getitem__`) on a dict subclass, the "dotdict"
            // of many configs (audit 52, Q3): the lookup of the name in the object's dict
            // storage, read as `o.get(name)` is (guarded through `Source::DictItem`).
            Some((_, f)) if hook == "__getattr__" && type_name(&f) == "method_descriptor" => {
                let VT::Opaque { obj, .. } = vt else { return Ok(None) };
                let fname: String = f.getattr("__name__")?.extract()?;
                if !matches!(fname.as_str(), "get" | "__getitem__") {
                    return Ok(None);
                }
                let obj = obj.bind(py).clone();
                match self.dict_storage_method(py, &obj, source, &f, &fname)? {
                    Some(method) => {
                        let key = VT::constant(PyString::new(py, name).into_any().unbind());
                        self.call(py, &method, vec![key], vec![]).map(Some)
                    }
                    None => Ok(None),
                }
            }
            _ => Ok(None),
        }
    }

    /// `object.__getattribute__(obj, name)` (Objects/object.c, `_PyObject_GenericGetAttrWithDict`):
    /// a data descriptor on the type (a Python `property` is inlined), then the instance
    /// `__dict__`, then the type's attribute (functions bind `self`, classmethods the class),
    /// then a Python `__getattr__` (inlined). Class attributes are sourced as
    /// `type(obj).__mro__[k].__dict__[name]`. Anything else is a graph break.
    pub(crate) fn generic_getattr(&mut self, py: Python<'_>, vt: &VT, obj: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str) -> VResult<VT> {
        if let Some(v) = self.og.side_effects.attr(&obj.clone().unbind(), name) {
            return Ok(v);
        }
        // Note [logger calls]: a logging method of a `logging.Logger` (transformers'
        // `logger.warning_once` in `PreTrainedModel.loss_function` among them) is not traced:
        // its call is replayed after the graph, so the log comes out as in eager and the graph
        // does not break. The lookup happens again at replay (guarded: the logger's type). The
        // record a standard method makes names the frame that called it (`findCaller`): the
        // replay tells it the traced call's site (`logging_call_site`), so a subclass that
        // overrides the method or `findCaller` is not replayed.
        if LOGGER_METHODS.contains(&name) && matches!(vt, VT::Opaque { .. }) && obj.is_instance(&py.import("logging")?.getattr("Logger")?)? && logger_method_is_standard(py, obj, name)? {
            self.og.add_guard(Some(source.clone()), GuardKind::TypeMatch(obj.get_type().into_any().unbind()));
            return Ok(VT::LoggerMethod { logger: Box::new(vt.clone()), name: name.to_string() });
        }
        let ty = obj.get_type();
        for base in ty.getattr("__mro__")?.try_iter()? {
            if self.og.side_effects.attr(&base?.unbind(), name).is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} after a write to its class", vt.describe(py));
            }
        }
        let class_attr = static_type_lookup(&ty, name)?;
        if name == "__dict__" && crate::guards::generic_getattr(obj, "__dict__").map(|d| d.is_exact_instance_of::<PyDict>()).unwrap_or(false) {
            // The instance dict as a dict tracker (its writes replay as dict mutations); pending
            // attribute writes would be invisible through it.
            if self.og.side_effects.attrs.iter().any(|w| w.ptr == obj.as_ptr() as usize) {
                graph_break!(UntracedValue, "__dict__ of {} after an attribute write", vt.describe(py));
            }
            let src = if has_generic_getattribute(py, &ty)? { source.attr("__dict__") } else { source.generic_attr("__dict__") };
            let d = crate::guards::generic_getattr(obj, "__dict__").expect("checked above");
            return wrap(py, self.og, &d, src);
        }
        let tracked = self.tracked_instance_dict(obj);
        if let Some((k, _)) = &class_attr {
            self.guard_mro_prefix(source, *k, name);
        }
        if let Some((k, ca)) = &class_attr {
            if name == "__class__" && ca.is(py.get_type::<PyAny>().getattr("__dict__")?.get_item("__class__")?) {
                // `object.__class__`'s getter: the type, TYPE_MATCH-guarded (`type_of`).
                let ty = self.type_of(py, vt)?.expect("a real object has a type");
                return Ok(VT::Class(std::rc::Rc::new(ty)));
            }
            if is_data_descriptor(ca)? {
                if type_name(ca) == "property" {
                    let fget = ca.getattr("fget")?;
                    if type_name(&fget) == "function" {
                        let func = wrap(py, self.og, &fget, class_attr_source(source, *k, name).attr("fget"))?;
                        // Note [__getattr__ after an AttributeError]: `slot_tp_getattr_hook`
                        // (Objects/typeobject.c) calls `__getattr__` when the generic lookup
                        // raises AttributeError, a getter's own included.
                        return match self.call(py, &func, vec![vt.clone()], vec![]) {
                            Err(e) if e.is_raised("AttributeError") => match self.call_attr_hook(py, vt, &ty, source, "__getattr__", name)? {
                                Some(v) => Ok(v),
                                None if static_type_lookup(&ty, "__getattr__")?.is_some() => graph_break!(UntracedValue, "attribute '{name}' of {} (a C __getattr__ after the getter raised)", vt.describe(py)),
                                None => Err(e),
                            },
                            other => other,
                        };
                    }
                }
                // Note [data descriptors with a Python __get__]: a subclass of `property`
                // overriding `__get__` (transformers' `classproperty`, whose `__get__` calls
                // `self.fget(owner_cls)`) or any other data descriptor whose type's `__get__` is
                // a Python function: `_PyObject_GenericGetAttrWithDict` calls
                // `type(d).__get__(d, obj, type(obj))` before looking at the instance dict, so
                // that call is inlined here, read through the class's source.
                if type_name(ca) != "property" {
                    let owner = wrap(py, self.og, ty.as_any(), source.generic_attr("__class__"))?;
                    if let Some(v) = self.nondata_descriptor_get(py, vt, ca, class_attr_source(source, *k, name), owner)? {
                        return Ok(v);
                    }
                }
                if type_name(ca) == "member_descriptor" {
                    // A `__slots__` entry (Objects/descrobject.c, `member_get`): the value
                    // stored in the instance's slot, reached as `obj.name` (a dataclass
                    // `Field`'s `name`, `type`, `_field_type`). An empty slot raises.
                    let src = if has_generic_getattribute(py, &ty)? { source.attr(name) } else { source.generic_attr(name) };
                    return match ca.call_method1("__get__", (obj, &ty)) {
                        Ok(v) => wrap(py, self.og, &v, src),
                        // Note [__getattr__ after an AttributeError]: an empty slot falls back to
                        // the class's `__getattr__`, and a guard could not tell the slot empty
                        // without calling that user code: left to Python.
                        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) && static_type_lookup(&ty, "__getattr__")?.is_some() => {
                            graph_break!(UntracedValue, "empty slot '{name}' of {} (its class's __getattr__ answers)", vt.describe(py))
                        }
                        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) && has_generic_getattribute(py, &ty)? => {
                            self.og.add_guard(Some(source.clone()), GuardKind::NoAttr(name.to_string()));
                            let msg = e.value(py).str().map(|m| m.to_string()).unwrap_or_else(|_| crate::symbolic::variables::empty_slot_message(obj.get_type().as_any(), name));
                            Err(Unsupported::attribute_error(py, name, msg))
                        }
                        Err(e) => Err(e.into()),
                    };
                }
                if name == "args" && type_name(ca) == "getset_descriptor" && ca.getattr("__objclass__").is_ok_and(|c| c.is(py.get_type::<pyo3::exceptions::PyBaseException>())) {
                    // An exception object's `args` (Objects/exceptions.c, `BaseException_get_args`:
                    // the tuple it holds), guarded as any attribute read through its source.
                    return wrap(py, self.og, &obj.getattr(name)?, source.attr(name));
                }
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca));
            }
        }
        if let Some(d) = &tracked {
            // `obj.__dict__` is a tracker of this trace: it holds the current instance attributes.
            let found = d.borrow().items.iter().find(|(k, _)| k.bind(py).eq(name).unwrap_or(false)).map(|(_, v)| v.clone());
            if let Some(v) = found {
                return Ok(v);
            }
        } else {
            let in_instance = crate::guards::generic_getattr(obj, "__dict__").and_then(|d| d.cast::<PyDict>().ok().and_then(|d| d.get_item(name).ok().flatten()));
            if let Some(v) = in_instance {
                let src = if has_generic_getattribute(py, &ty)? { source.attr(name) } else { source.generic_attr(name) };
                return wrap(py, self.og, &v, src);
            }
        }
        let Some((k, ca)) = class_attr else {
            // A `__getattr__` answers only while the instance lacks the name (`o.k = 5` after
            // the compile shadows it).
            if tracked.is_none() && static_type_lookup(&ty, "__getattr__")?.is_some() {
                self.og.add_guard(Some(source.clone()), GuardKind::NoInstanceAttr(name.to_string()));
            }
            if let Some(v) = self.call_attr_hook(py, vt, &ty, source, "__getattr__", name)? {
                return Ok(v);
            }
            if static_type_lookup(&ty, "__getattr__")?.is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} (computed by __getattr__)", vt.describe(py));
            }
            // Not on the instance (its dict is this trace's tracker, or the real one lacks the
            // name, guarded so), nor on the class (type-guarded), and no `__getattr__`: the
            // lookup raises, as `_PyObject_GenericGetAttrWithDict` does.
            if tracked.is_none() {
                self.og.add_guard(Some(source.clone()), GuardKind::NoInstanceAttr(name.to_string()));
            }
            // The class (and its bases) may gain the name later (`A.k = 6`): its lookup above
            // is part of the class's version guard (Note [class lookups are versioned]).
            return Err(Unsupported::attribute_error(py, name, crate::symbolic::variables::no_attribute_message(obj.get_type().as_any(), name)));
        };
        // The instance may gain an attribute of that name later: guard that it has none. Not
        // where its dict is this trace's tracker: the tracker's DICT_KEYS guard fixed the keys at
        // entry, and the name is absent now because the frame removed it (`del vars(o)['k']`), so
        // the guard on the entry state would contradict DICT_KEYS and fail at every call (audit
        // 53, T5).
        if tracked.is_none() {
            self.og.add_guard(Some(source.clone()), GuardKind::NoInstanceAttr(name.to_string()));
        }
        self.bind_class_attr(py, vt, &ty, source, k, &ca, name)
    }

    /// Note [shadowed class attributes]: a class attribute found at `type(obj).__mro__[k]` is
    /// guarded there (`class_attr_source`), which a class earlier in the MRO defining the same
    /// name later would not fail: `Sub.k = 50` after a compile that read `Base.k` through an
    /// instance, or a method added to a dict subclass that dict's C method used to answer.
    /// Each class before it is guarded not to hold the name in its `__dict__`.
    pub(crate) fn guard_mro_prefix(&mut self, source: &Arc<Source>, k: usize, name: &str) {
        for j in 0..k {
            let cls = source.generic_attr("__class__").attr("__mro__").item(ItemKey::Int(j as i64));
            self.og.add_guard(Some(cls), GuardKind::NoInstanceAttr(name.to_string()));
        }
    }

    /// The dict tracker of `obj.__dict__`, if this trace read the instance dict (attribute reads
    /// and writes then go through it).
    pub(crate) fn tracked_instance_dict(&self, obj: &Bound<'_, PyAny>) -> Option<Rc<RefCell<DictState>>> {
        let d = crate::guards::generic_getattr(obj, "__dict__")?;
        if d.is(obj) {
            // Note [objects that are their own __dict__].
            return self.og.dict_storages_by_ptr.get(&(d.as_ptr() as usize)).map(|(_, st)| st.clone());
        }
        self.og.dicts_by_ptr.get(&(d.as_ptr() as usize)).map(|(_, st)| st.clone())
    }

    /// The value of class attribute `ca` (found at `type(obj).__mro__[k]`) looked up through an
    /// instance `vt`: functions bind it, classmethods bind the class, staticmethods unwrap.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bind_class_attr(&mut self, py: Python<'_>, vt: &VT, ty: &Bound<'_, pyo3::types::PyType>, source: &Arc<Source>, k: usize, ca: &Bound<'_, PyAny>, name: &str) -> VResult<VT> {
        let ca_src = class_attr_source(source, k, name);
        match type_name(ca).as_str() {
            "function" => {
                let func = wrap(py, self.og, ca, ca_src)?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(vt.clone()) })
            }
            "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, ca_src.attr("__func__")),
            "classmethod" => {
                let func = wrap(py, self.og, &ca.getattr("__func__")?, ca_src.attr("__func__"))?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(ty.clone().into_any().unbind()))) })
            }
            // `o.__setattr__` / `o.__getattribute__` inherited from `object`: the generic
            // attribute protocol bound to `o` (`o.__setattr__(n, v)` is `o.n = v`).
            "wrapper_descriptor" if matches!(vt, VT::Opaque { .. }) && (ca.is(py.get_type::<PyAny>().getattr("__setattr__")?) || ca.is(py.get_type::<PyAny>().getattr("__getattribute__")?)) => {
                Ok(VT::GenericAttr { obj: Box::new(vt.clone()), set: name == "__setattr__" })
            }
            // `d.get(k)` on a dict subclass that does not override `get`: dict's method on the
            // instance's storage (see `dict_storage_method`).
            "method_descriptor" if matches!(vt, VT::Opaque { .. }) => {
                if let Some(m) = self.polyfill_method(py, vt, ty, ca)? {
                    return Ok(m);
                }
                if let Some(m) = self.opaque_list_method(py, vt, ca, name)? {
                    return Ok(m);
                }
                let VT::Opaque { obj, .. } = vt else { unreachable!() };
                let o = obj.bind(py).clone();
                match self.dict_storage_method(py, &o, source, ca, name)? {
                    Some(m) => Ok(m),
                    // Note [C methods of objects from the frame]: `o.add` on an instance of a
                    // set subclass from outside the frame, or `o.append` on a list subclass
                    // whose storage is not modelled (its own `__len__`; Note [list subclass
                    // objects from outside the frame]): the C method of a builtin base found
                    // on the class (the instance dict was found not to shadow it, and is
                    // guarded so), bound lazily. Its call is not traced, so the break comes at
                    // the CALL, where the pair goes back on the
                    // stack as LOAD_METHOD's `[descriptor, self]` (Note [methods of builtin
                    // types at a break]) and Python makes the very call eager makes: one break
                    // per call instead of one at the lookup and another at the call.
                    None if builtin_base_method(py, &o, ca)? => Ok(VT::Method { func: Box::new(VT::Builtin(Rc::new(ca.clone().unbind()))), self_: Box::new(vt.clone()) }),
                    None => graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca)),
                }
            }
            // Other descriptors: a Python `__get__` (and `functools.cached_property`'s) is traced
            // (Note [non-data descriptors]); C ones (C methods, partialmethod...) bind in ways not
            // modelled: the read runs in Python.
            _ if ca.get_type().hasattr("__get__")? && !ca.is_instance_of::<pyo3::types::PyType>() => {
                let owner = wrap(py, self.og, ty.as_any(), source.generic_attr("__class__"))?;
                match self.nondata_descriptor_get(py, vt, ca, ca_src.clone(), owner)? {
                    Some(v) => Ok(v),
                    None => graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca)),
                }
            }
            _ => wrap(py, self.og, ca, ca_src),
        }
    }

    /// Note [dict subclass storage]: a read-only C method of `dict` or `collections.OrderedDict`
    /// (`ca`, found on the MRO of an instance `o` from outside the frame, reached through
    /// `source`: `o.items()` of a transformers `ModelOutput`, `od.keys()` of a state dict,
    /// `super().get(k)` in a subclass that overrides `get`) bound to the instance's dict
    /// storage, as torch's `UserDefinedDictVariable` reads its `_dict_vt`. The storage is wrapped
    /// item by item (`wrap_dict_storage`) with guards and input loads that read the storage
    /// itself: its keys through the base class's C `keys` (an OrderedDict's in its linked
    /// list's order), its values through `dict.__getitem__` (`Source::DictItem`), so no method
    /// the subclass overrides runs in a guard. `OrderedDict.keys/values/items` give the
    /// `odict_*` view types (Note [iterator types]). Writing methods of `dict` itself are offered
    /// on an instance of a subclass of `dict` that is no `OrderedDict` (Note [dict subclass
    /// objects from outside the frame]); not `copy` (`OrderedDict.copy` calls the class), nor
    /// `__getitem__` of a class with `__missing__`: `None`.
    pub(crate) fn dict_storage_method(&mut self, py: Python<'_>, o: &Bound<'_, PyAny>, source: &Arc<Source>, ca: &Bound<'_, PyAny>, name: &str) -> VResult<Option<VT>> {
        const READS: [&str; 8] = ["get", "__getitem__", "__contains__", "keys", "values", "items", "__len__", "copy"];
        const WRITES: [&str; 7] = ["__setitem__", "__delitem__", "pop", "popitem", "clear", "setdefault", "update"];
        let dict_type = py.get_type::<PyDict>();
        let odict_type = py.import("collections")?.getattr("OrderedDict")?;
        let Ok(owner) = ca.getattr("__objclass__") else { return Ok(None) };
        let from_odict = owner.is(&odict_type);
        // Note [OrderedDict objects from outside the frame]: the storage tracker of an
        // OrderedDict holds its items in linked-list order, so OrderedDict's own `__setitem__`,
        // `__delitem__`, `pop`, `setdefault` and `clear` are dict's on that tracker, and
        // `popitem(last=)`, `move_to_end` and `update` are the Python versions of
        // `dynamo._polyfills.ODICT_METHODS` over it. The replay keeps the linked list
        // (`dynamo._C.replace_dict_storage`).
        const ODICT_AS_DICT: [&str; 5] = ["__setitem__", "__delitem__", "pop", "setdefault", "clear"];
        const ODICT_POLYFILLS: [&str; 3] = ["popitem", "move_to_end", "update"];
        // OrderedDict's `pop`, `popitem`, `setdefault` and `update` reach a subclass's own
        // `__getitem__`/`__setitem__`/`__delitem__` (`PyObject_SetItem` and friends for a
        // non-exact OrderedDict, Objects/odictobject.c): with such an override they run in
        // Python (transformers' `ModelOutput.__setitem__` also sets the attribute).
        if from_odict && matches!(name, "pop" | "popitem" | "setdefault" | "update") && item_slots_overridden(py, o)? {
            return Ok(None);
        }
        if from_odict && ODICT_POLYFILLS.contains(&name) && dict_storage_writable(py, o)? {
            let Ok(d) = o.cast::<PyDict>() else { return Ok(None) };
            let state = crate::symbolic::builder::wrap_dict_storage(py, self.og, d, source, false)?;
            return self.polyfill_table_method(py, &VT::Dict(state), "ODICT_METHODS", name).map(Some);
        }
        let write = dict_storage_writable(py, o)? && ((WRITES.contains(&name) && owner.is(&dict_type)) || (from_odict && ODICT_AS_DICT.contains(&name)));
        if !(READS.contains(&name) || write) || !(owner.is(&dict_type) || from_odict) {
            return Ok(None);
        }
        let Ok(d) = o.cast::<PyDict>() else { return Ok(None) };
        let exact = d.get_type().is(&dict_type);
        if !exact && (name == "copy" || (name == "__getitem__" && o.get_type().hasattr("__missing__")?)) {
            return Ok(None);
        }
        let state = crate::symbolic::builder::wrap_dict_storage(py, self.og, d, source, false)?;
        let name = if from_odict && matches!(name, "keys" | "values" | "items") { format!("odict_{name}") } else { name.to_string() };
        Ok(Some(VT::ContainerMethod { container: Box::new(VT::Dict(state)), name }))
    }

    /// The dict storage of `o` (an instance of a dict or OrderedDict subclass from outside the
    /// frame, reached through `source`) when `slot`, the type's `name` found at
    /// `type(o).__mro__[k]`, is dict's or OrderedDict's C method: what the syntax (`k in o`,
    /// `o[k]`, `iter(o)`) does is then a read of the storage (Note [dict subclass storage]).
    /// Guards the classes before `k` (Note [shadowed class attributes]).
    pub(crate) fn slot_storage(&mut self, py: Python<'_>, o: &Bound<'_, PyAny>, source: &Arc<Source>, k: usize, slot: &Bound<'_, PyAny>, name: &str) -> VResult<Option<Rc<RefCell<DictState>>>> {
        let Ok(d) = o.cast::<PyDict>() else { return Ok(None) };
        let Ok(owner) = slot.getattr("__objclass__") else { return Ok(None) };
        if !owner.is(py.get_type::<PyDict>()) && !owner.is(py.import("collections")?.getattr("OrderedDict")?) {
            return Ok(None);
        }
        self.guard_mro_prefix(source, k, name);
        Ok(Some(crate::symbolic::builder::wrap_dict_storage(py, self.og, d, source, false)?))
    }

    /// The storage of `v` (an instance of a `dict` subclass from outside the frame whose
    /// storage the trace may write) when the class's `name` is `dict`'s own slot (Note [dict
    /// subclass objects from outside the frame]); `None` for anything else.
    pub(crate) fn opaque_dict_slot(&mut self, py: Python<'_>, v: &VT, name: &str) -> VResult<Option<VT>> {
        let VT::Opaque { obj, source } = v else { return Ok(None) };
        let o = obj.bind(py).clone();
        let Some((k, f)) = static_type_lookup(&o.get_type(), name)? else { return Ok(None) };
        // OrderedDict's own item assignment and deletion too (Note [OrderedDict objects from
        // outside the frame]).
        let odict = py.import("collections")?.getattr("OrderedDict")?;
        let owner_ok = f.getattr("__objclass__").is_ok_and(|c| c.is(py.get_type::<PyDict>()) || (matches!(name, "__setitem__" | "__delitem__") && c.is(&odict)));
        if !owner_ok {
            return Ok(None);
        }
        let source = source.clone();
        Ok(self.slot_storage(py, &o, &source, k, &f, name)?.map(VT::Dict))
    }

    /// For `iter(o)` of a dict or OrderedDict subclass instance `o` from outside the frame
    /// (`VT::Opaque`) whose class's `__iter__` is dict's or OrderedDict's C method: its storage
    /// (Note [dict subclass storage]) and whether the iterator walks an OrderedDict's linked
    /// list (an `odict_iterator`). `None` for anything else.
    pub(crate) fn opaque_dict_iter_storage(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<(Rc<RefCell<DictState>>, bool)>> {
        let VT::Opaque { obj, source } = v else { return Ok(None) };
        let o = obj.bind(py).clone();
        let Some((k, iter)) = static_type_lookup(&o.get_type(), "__iter__")? else { return Ok(None) };
        let ordered = iter.is(py.import("collections")?.getattr("OrderedDict")?.getattr("__iter__")?);
        Ok(self.slot_storage(py, &o, source, k, &iter, "__iter__")?.map(|state| (state, ordered)))
    }

    /// The items of a `list` subclass instance from outside the frame whose `__iter__`,
    /// `__len__` and `__getitem__` are list's own, as a list tracker to iterate (Note [list
    /// subclass iteration]); `None` for anything else.
    pub(crate) fn opaque_list_storage(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Rc<RefCell<crate::symbolic::variables::lists::ListState>>>> {
        // Note [list subclass iteration]: transformers' `LogitsProcessorList` and
        // `StoppingCriteriaList` subclass `list` for a `__call__` that walks `self`. Walking
        // such an object is `list_iter` over its storage when the class keeps list's
        // `__iter__`: the storage tracker of the object (Note [list subclass objects from
        // outside the frame]), so a walk after a write sees the write.
        let VT::Opaque { obj, .. } = v else { return Ok(None) };
        let ty = obj.bind(py).get_type();
        match static_type_lookup(&ty, "__iter__")? {
            Some((_, f)) if f.is(py.get_type::<pyo3::types::PyList>().getattr("__iter__")?) => {}
            _ => return Ok(None),
        }
        self.opaque_list_state(py, v)
    }

    /// The list storage of `v`, an instance of a `list` subclass from outside the frame
    /// (`VT::Opaque`) whose class keeps list's `__len__` and `__getitem__`: one tracker per
    /// object, shared by every path that reaches it (Note [list subclass objects from outside
    /// the frame]); `None` for anything else.
    pub(crate) fn opaque_list_state(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Rc<RefCell<crate::symbolic::variables::lists::ListState>>>> {
        let VT::Opaque { obj, source } = v else { return Ok(None) };
        let o = obj.bind(py).clone();
        let list_type = py.get_type::<pyo3::types::PyList>();
        if !o.is_instance_of::<pyo3::types::PyList>() || o.get_type().is(&list_type) {
            return Ok(None);
        }
        let ptr = o.as_ptr() as usize;
        if let Some((first, state)) = self.og.lists_by_ptr.get(&ptr).cloned() {
            if first != *source {
                self.og.add_guard(Some(source.clone()), GuardKind::AliasOf(first));
            }
            return Ok(Some(state));
        }
        let ty = o.get_type();
        for slot in ["__len__", "__getitem__"] {
            match static_type_lookup(&ty, slot)? {
                Some((_, f)) if f.is(list_type.getattr(slot)?) => {}
                _ => return Ok(None),
            }
        }
        let l = o.cast::<pyo3::types::PyList>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        self.og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.clone().into_any().unbind()));
        self.og.add_guard(Some(source.clone()), GuardKind::LenMatch(l.len()));
        // Registered before its items are wrapped: an item that is the object itself is the
        // object again.
        let state = Rc::new(RefCell::new(crate::symbolic::variables::lists::ListState { items: vec![], source: Some(source.clone()), entry_len: 0, append_only: false, deque: None, owner: None, subclass_storage: true }));
        self.og.lists_by_ptr.insert(ptr, (source.clone(), state.clone()));
        let items = l.iter().enumerate().map(|(i, item)| wrap(py, self.og, &item, source.item(crate::source::ItemKey::Int(i as i64)))).collect::<VResult<Vec<_>>>()?;
        let mut st = state.borrow_mut();
        st.entry_len = items.len();
        st.items = items;
        drop(st);
        Ok(Some(state))
    }

    /// `ca`, list's own C method `name` found for `v` (an instance of a `list` subclass from
    /// outside the frame) on its class or through `super()`, as the storage's method (Note
    /// [list subclass objects from outside the frame]); `None` for anything else.
    pub(crate) fn opaque_list_method(&mut self, py: Python<'_>, v: &VT, ca: &Bound<'_, PyAny>, name: &str) -> VResult<Option<VT>> {
        if !crate::symbolic::object_protocol::obj_is_list_subclass(py, v) || !LIST_STORAGE_METHODS.contains(&name) {
            return Ok(None);
        }
        if !ca.getattr("__objclass__").is_ok_and(|c| c.is(py.get_type::<pyo3::types::PyList>())) {
            return Ok(None);
        }
        let Some(state) = self.opaque_list_state(py, v)? else { return Ok(None) };
        Ok(Some(VT::ContainerMethod { container: Box::new(VT::List(state)), name: name.to_string() }))
    }

    /// The storage of `v` (an instance of a `list` subclass from outside the frame) as a list
    /// tracker when the class's `name`, found on its MRO, is list's own C method in
    /// `LIST_STORAGE_METHODS` (`o.append`, `o[i] = v`, `len(o)`, `super().pop()`): calling it on
    /// the object is calling it on the storage (Note [list subclass objects from outside the
    /// frame]).
    pub(crate) fn opaque_list_slot(&mut self, py: Python<'_>, v: &VT, name: &str) -> VResult<Option<VT>> {
        let VT::Opaque { obj, source } = v else { return Ok(None) };
        if !LIST_STORAGE_METHODS.contains(&name) || !obj.bind(py).is_instance_of::<pyo3::types::PyList>() {
            return Ok(None);
        }
        let ty = obj.bind(py).get_type();
        let Some((k, f)) = static_type_lookup(&ty, name)? else { return Ok(None) };
        if !f.getattr("__objclass__").is_ok_and(|c| c.is(py.get_type::<pyo3::types::PyList>())) {
            return Ok(None);
        }
        let source = source.clone();
        let Some(state) = self.opaque_list_state(py, v)? else { return Ok(None) };
        self.guard_mro_prefix(&source, k, name);
        Ok(Some(VT::List(state)))
    }

    /// `super(cls, obj).name`: the first class after `cls` in `type(obj).__mro__` that defines
    /// `name` (Objects/typeobject.c, `super_getattro`).
    pub(crate) fn super_getattr(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, inner: &VT, name: &str) -> VResult<VT> {
        if let VT::Class(klass) = inner {
            if let Some(v) = self.tensor_class_super_getattr(py, cls, klass.bind(py), name)? {
                return Ok(v);
            }
            // Note [user __new__]: `super().__new__` in a `__new__` reaching `object.__new__`,
            // a builtin called with the class (`object.__new__(cls)`, `call_builtin`).
            if name == "__new__" {
                let mro = klass.bind(py).getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
                if let Some(start) = mro.iter().position(|c| c.is(cls)) {
                    let object_new = py.get_type::<PyAny>().getattr("__new__")?;
                    for k in start + 1..mro.len() {
                        let d = mro.get_item(k)?.getattr("__dict__")?;
                        if d.contains("__new__")? {
                            if d.get_item("__new__")?.is(&object_new) {
                                return Ok(VT::Builtin(Rc::new(object_new.unbind())));
                            }
                            break;
                        }
                    }
                }
            }
        }
        if let VT::UserObject(uo) = inner {
            // The same walk over the new object's class; its attributes are sourced through
            // the class (`cls.__mro__[k].__dict__[name]`).
            let ty = uo.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
            let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
            let Some(start) = mro.iter().position(|c| c.is(cls)) else {
                graph_break!(SuperCall, "super(): {} is not in the MRO of {}", crate::symbolic::variables::qualname(cls), inner.describe(py));
            };
            let object_type = py.get_type::<PyAny>();
            for k in start + 1..mro.len() {
                let d = mro.get_item(k)?.getattr("__dict__")?;
                if !d.contains(name)? {
                    continue;
                }
                let ca = d.get_item(name)?;
                let src = uo.class_attr_source(k, name);
                for (slot, set) in [("__getattribute__", false), ("__setattr__", true)] {
                    if ca.is(object_type.getattr(slot)?) {
                        return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set });
                    }
                }
                if ca.is(object_type.getattr("__delattr__")?) {
                    // `super().__delattr__(name)`: the generic deletion (`call_builtin`).
                    return Ok(VT::Method { func: Box::new(VT::Builtin(Rc::new(ca.unbind()))), self_: Box::new(inner.clone()) });
                }
                let builtin_init = ca.is(object_type.getattr("__init__")?)
                    || (name == "__init__" && uo.storage.is_some() && ca.getattr("__objclass__").map(|c| crate::symbolic::variables::user_defined::dict_base_type(py, &c).unwrap_or(false)).unwrap_or(false))
                    || (name == "__init__" && uo.list.is_some() && ca.is(py.get_type::<pyo3::types::PyList>().getattr("__init__")?));
                if builtin_init {
                    // `super().__init__()` reaching `object.__init__` (or the dict base's, with
                    // no arguments): nothing to do; `list.__init__(items)` fills the list
                    // storage (`call_unbound_descriptor`).
                    return Ok(VT::Method { func: Box::new(VT::Builtin(Rc::new(ca.unbind()))), self_: Box::new(inner.clone()) });
                }
                if let Some(storage) = uo.storage_method(py, &ca, name)? {
                    // `super().__setitem__(k, v)` in a dict subclass: the storage's own method.
                    return Ok(VT::ContainerMethod { container: Box::new(storage), name: name.to_string() });
                }
                return match type_name(&ca).as_str() {
                    "function" => Ok(VT::Method { func: Box::new(wrap(py, self.og, &ca, src)?), self_: Box::new(inner.clone()) }),
                    "property" => {
                        let fget = wrap(py, self.og, &ca.getattr("fget")?, src.attr("fget"))?;
                        self.call(py, &fget, vec![inner.clone()], vec![])
                    }
                    "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__")),
                    "classmethod" => Ok(VT::Method { func: Box::new(wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__"))?), self_: Box::new(VT::Class(Rc::new(uo.cls.clone_ref(py)))) }),
                    other => graph_break!(SuperCall, "super().{name} is a {other}"),
                };
            }
            graph_break!(SuperCall, "super().{name} not found")
        }
        if let VT::Module { obj, source: None } = inner {
            // A module built in the frame (Note [modules built in the frame] in
            // `nn_module.rs`): `super().__init__()` and other methods of its bases, found on
            // the MRO after `cls`, sourced through its class when the class has a source.
            let o = obj.bind(py).clone();
            if !self.og.derived_modules.contains_key(&(o.as_ptr() as usize)) {
                graph_break!(SuperCall, "super() over {}", inner.describe(py));
            }
            let ty = o.get_type();
            let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
            let Some(start) = mro.iter().position(|c| c.is(cls)) else {
                graph_break!(SuperCall, "super(): {} is not in the MRO of {}", crate::symbolic::variables::qualname(cls), type_name(&o));
            };
            for k in start + 1..mro.len() {
                let d = mro.get_item(k)?.getattr("__dict__")?;
                if !d.contains(name)? {
                    continue;
                }
                let ca = d.get_item(name)?;
                if type_name(&ca) != "function" {
                    graph_break!(SuperCall, "super().{name} of a module built in the frame is a {}", type_name(&ca));
                }
                let base = mro.get_item(k)?.cast_into::<PyType>().map_err(|e| Unsupported::new(e.to_string()))?;
                // torch's own (`nn.Module.__init__`) is inlined as trusted code, never wrapped
                // as a torch function (a graph op).
                let module = ca.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
                let trusted = module == "torch" || module.starts_with("torch.");
                let func = match (trusted, self.class_attr_path(py, &base, name)?) {
                    (false, Some(s)) => wrap(py, self.og, &ca, s)?,
                    _ => VT::Function { obj: Rc::new(ca.unbind()), source: None },
                };
                return Ok(VT::Method { func: Box::new(func), self_: Box::new(inner.clone()) });
            }
            graph_break!(SuperCall, "super().{name} not found");
        }
        if let VT::Constant(c) = inner {
            // Note [user exception objects] (variables/exceptions.rs).
            if let Some(v) = self.exception_super_attr(py, c, cls, name)? {
                return Ok(v);
            }
        }
        let (o, source) = match inner {
            VT::Opaque { obj, source } => (obj.bind(py).clone(), source.clone()),
            VT::Module { obj, source: Some(source) } => (obj.bind(py).clone(), source.clone()),
            other => graph_break!(SuperCall, "super() over {}", other.describe(py)),
        };
        let ty = o.get_type();
        let mro = ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?;
        let Some(start) = mro.iter().position(|c| c.is(cls)) else {
            graph_break!(SuperCall, "super(): {} is not in the MRO of {}", crate::symbolic::variables::qualname(cls), type_name(&o));
        };
        let object_type = py.get_type::<pyo3::types::PyAny>();
        for k in start + 1..mro.len() {
            let d = mro.get_item(k)?.getattr("__dict__")?;
            if !d.contains(name)? {
                continue;
            }
            let ca = d.get_item(name)?;
            if ca.is(object_type.getattr("__getattribute__")?) {
                return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set: false });
            }
            if ca.is(object_type.getattr("__setattr__")?) {
                return Ok(VT::GenericAttr { obj: Box::new(inner.clone()), set: true });
            }
            if type_name(&ca) == "property" {
                let fget = ca.getattr("fget")?;
                let func = wrap(py, self.og, &fget, class_attr_source(&source, k, name).attr("fget"))?;
                return self.call(py, &func, vec![inner.clone()], vec![]);
            }
            if matches!(type_name(&ca).as_str(), "function" | "staticmethod" | "classmethod") {
                return self.bind_class_attr(py, inner, &ty, &source, k, &ca, name);
            }
            if let Some(m) = self.dict_storage_method(py, &o, &source, &ca, name)? {
                return Ok(m);
            }
            // `super().append(v)` in a list subclass that overrides `append`.
            if let Some(m) = self.opaque_list_method(py, inner, &ca, name)? {
                return Ok(m);
            }
            graph_break!(SuperCall, "super().{name} is a {}", type_name(&ca));
        }
        graph_break!(SuperCall, "super().{name} not found")
    }

    /// `super()` (zero arguments: the `__class__` cell and the first argument, as
    /// Objects/typeobject.c `super_init_without_args` finds them) or `super(cls, obj)`.
    pub(crate) fn make_super(&mut self, args: &[VT]) -> VResult<VT> {
        let unwrap_cell = |v: Option<VT>| match v {
            Some(VT::Cell(c)) => c.borrow().clone(),
            other => other,
        };
        let (cls, obj) = match args.len() {
            0 => {
                let Some(slot) = self.code.localsplus.iter().position(|n| n == "__class__") else {
                    graph_break!(SuperCall, "super() without a __class__ cell");
                };
                (unwrap_cell(self.locals[slot].clone()), unwrap_cell(self.locals.first().cloned().flatten()))
            }
            2 => (Some(args[0].clone()), Some(args[1].clone())),
            n => graph_break!(SuperCall, "super() with {n} arguments"),
        };
        match (cls, obj) {
            (Some(VT::Class(c)), Some(obj)) => Ok(VT::Super { cls: c, obj: Box::new(obj) }),
            _ => graph_break!(SuperCall, "super() arguments are not a class and an object"),
        }
    }

    /// Records `obj.name = v` on a user object: through the tracker of its instance dict when
    /// the trace read `obj.__dict__` (so both views agree), else as a pending attribute write
    /// (`generic`: replayed through `object.__setattr__`).
    pub(crate) fn record_attr_write(&mut self, py: Python<'_>, o: &Bound<'_, PyAny>, source: &Arc<Source>, name: &str, v: VT, generic: bool) -> VResult<()> {
        // Note [objects that are their own __dict__]: the AttrDict / EasyDict pattern, a dict
        // subclass whose `__init__` sets `self.__dict__ = self`. `o.k = v` then stores into the
        // dict storage itself (`PyObject_GenericSetAttr` writes `o.__dict__`), so a later `o['k']`,
        // `len(o)` or `dict(o)` in the frame sees it: the write goes to the storage tracker,
        // which item reads and attribute reads (`tracked_instance_dict`) share, and whose replay
        // writes the object (audit 53, T11: `a.lr = a.lr * 10; x * a['lr']` read the old value).
        if let Ok(d) = o.cast::<PyDict>() {
            if !d.get_type().is(py.get_type::<PyDict>()) && crate::guards::generic_getattr(o, "__dict__").is_some_and(|x| x.is(o)) {
                crate::symbolic::builder::wrap_dict_storage(py, self.og, d, source, false)?;
            }
        }
        // Note [shared instance dicts]: an instance dict that something besides its object
        // holds (the Borg pattern's class-level dict that every instance's `__dict__` is, a
        // global alias `GD = obj.__dict__`, another object given the same `__dict__`) is seen
        // through those paths too: the write goes to the tracker of that dict (by identity,
        // `dicts_by_ptr`), which every path to it shares (audit 53, T11b). An unshared one (the
        // object holds the only reference, besides ours) keeps the cheaper replayed write.
        if self.tracked_instance_dict(o).is_none() {
            if let Some(d) = crate::guards::generic_getattr(o, "__dict__") {
                // SAFETY: `d` is a live reference held for the call.
                let holders = unsafe { pyo3::ffi::Py_REFCNT(d.as_ptr()) };
                if let (Ok(dict), true) = (d.cast::<PyDict>(), holders > 2) {
                    if dict.is_exact_instance_of::<PyDict>() {
                        let ty = o.get_type();
                        let src = if has_generic_getattribute(py, &ty)? { source.attr("__dict__") } else { source.generic_attr("__dict__") };
                        crate::symbolic::builder::wrap_dict_storage(py, self.og, dict, &src, true)?;
                    }
                }
            }
        }
        if let Some(d) = self.tracked_instance_dict(o) {
            dict_set(py, &mut d.borrow_mut(), PyString::new(py, name).into_any().unbind(), v)?;
            self.og.side_effects.mutate_dict(&d);
            return Ok(());
        }
        let obj = o.clone().unbind();
        self.og.side_effects.store_attr(py, &obj, source.clone(), name, v);
        if generic {
            self.og.side_effects.mark_generic(&obj, name);
        }
        Ok(())
    }

    /// Whether calling class `c` makes a tracked `UserObject`: a plain Python class
    /// (`is_plain_class`) outside torch, reached through a source. Note [torch.distributions
    /// as user objects]: the distributions of `torch.distributions` (`Normal`, `Categorical`,
    /// `Bernoulli`, ...) are plain Python classes over tensors, whose methods are tensor math
    /// (torch/distributions/*.py): they are tracked as a user's classes are, so a
    /// `log_prob`/`entropy`/`rsample` is inlined into the graph. Argument validation
    /// (`validate_args`, on by default under `__debug__`) branches on tensor values: that
    /// check runs as Python where it is reached, as eager runs it.
    ///
    /// Note [collections classes read without a source]: torch's own code reads
    /// `OrderedDict`/`defaultdict` from its module globals unguarded (Note [attribute version
    /// guards]), so the class has no source of its own (`nn.Module.state_dict` makes
    /// `destination = OrderedDict()` and sets `destination._metadata`). Those two are the
    /// standard library's classes, which the trace models exactly (Note [dict subclass
    /// objects], Note [defaultdict objects]); their source is `sys.modules['collections']`'s
    /// attribute, as a user's `collections.OrderedDict` would be.
    pub(crate) fn is_trackable_class(&mut self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        let key = c.as_ptr() as usize;
        if !self.og.class_sources.contains_key(&key) {
            let collections = py.import("collections")?;
            for name in ["OrderedDict", "defaultdict"] {
                if c.is(collections.getattr(name)?) {
                    let source = std::sync::Arc::new(crate::source::Source::Module { name: "collections".into() }).attr(name);
                    self.og.class_sources.insert(key, source);
                }
            }
        }
        let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if (module == "torch" || module.starts_with("torch.")) && !module.starts_with("torch.distributions.") {
            return Ok(false);
        }
        Ok(self.og.class_sources.contains_key(&(c.as_ptr() as usize)) && crate::symbolic::variables::user_defined::is_plain_class(py, c)?)
    }

    /// `cls(*args, **kwargs)` for a trackable class: `object.__new__` gives a fresh tracker, then
    /// `__init__` is inlined on it (`type_call` in Objects/typeobject.c); `__init__` must return
    /// None (else TypeError, left to Python).
    pub(crate) fn construct_user_object(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let cls_source = self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned().expect("trackable classes have a source");
        // Note [user __new__]: `type_call` (Objects/typeobject.c) calls `cls.__new__(cls, *args,
        // **kwargs)`, then `__init__` on the result only when it is an instance of `cls`. The
        // Python `__new__` is inlined; its `super().__new__(cls)` / `object.__new__(cls)` is a
        // fresh tracker (`new_user_object`).
        let ty = cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        if let Some((k, new_fn)) = crate::symbolic::variables::user_defined::python_new(&ty)? {
            let new_source = cls_source.attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str("__new__".into())).attr("__func__");
            let func = wrap(py, self.og, &new_fn, new_source)?;
            let mut all = vec![VT::Class(cls.clone())];
            all.extend(args.iter().cloned());
            let made = self.call(py, &func, all, kwargs.clone())?;
            // The type of what `__new__` returned: `__init__` runs only on an instance of `cls`.
            let made_ty = match &made {
                VT::UserObject(o) => o.cls.bind(py).clone(),
                VT::Opaque { obj, .. } => obj.bind(py).get_type().into_any(),
                VT::Tensor(_) | VT::SymNum(_) => return Ok(made),
                other => match other.as_constant(py) {
                    Some(c) => c.get_type().into_any(),
                    None => graph_break!(UnsupportedCall, "{}.__new__ returned {}", crate::symbolic::variables::qualname(cls.bind(py)), made.describe(py)),
                },
            };
            let made_ty = made_ty.cast_into::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?;
            if !made_ty.is_subclass(&ty)? {
                return Ok(made);
            }
            let (k, init) = static_type_lookup(&made_ty, "__init__")?.expect("object defines __init__");
            if init.is(py.get_type::<PyAny>().getattr("__init__")?) {
                return Ok(made);
            }
            let VT::UserObject(o) = &made else {
                graph_break!(UnsupportedCall, "{}.__new__ returned {}, whose __init__ would run", crate::symbolic::variables::qualname(cls.bind(py)), made.describe(py));
            };
            if type_name(&init) != "function" {
                graph_break!(UnsupportedCall, "{}() with a __new__ and a builtin __init__", crate::symbolic::variables::qualname(cls.bind(py)));
            }
            let func = wrap(py, self.og, &init, o.class_attr_source(k, "__init__"))?;
            self.call_python_init(py, cls, &func, &made, args, kwargs)?;
            return Ok(made);
        }
        self.new_user_object(py, cls, args, kwargs)
    }

    /// Note [namespace objects]: `types.SimpleNamespace(**kwargs)` (Objects/namespaceobject.c:
    /// `namespace_new` makes an object with an empty instance dict, `namespace_init` sets each
    /// keyword as an attribute, in order) made in the frame is a user object of that class: its
    /// attributes live in the tracker, its `__getattribute__`/`__setattr__` are the generic ones
    /// (`has_generic_getattribute`, `has_generic_setattr`), and it is rebuilt by
    /// `SimpleNamespace.__new__` and `object.__setattr__` (`dynamo._C.new_object`) if it outlives
    /// the graph. Its C `__eq__`, `__repr__` and ordering slots are not object's, so a comparison
    /// or a repr of the tracker is a graph break (`user_object_rich_eq`), never the identity or
    /// text of a plain object. Positional arguments (TypeError before 3.13, a mapping since) are
    /// left to Python. `cls` is `types.SimpleNamespace` itself, reached through a source.
    pub(crate) fn construct_namespace(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if !args.is_empty() {
            graph_break!(UnsupportedCall, "types.SimpleNamespace() with {} positional arguments", args.len());
        }
        let cls_source = self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned().expect("checked by the caller");
        let obj = crate::symbolic::variables::user_defined::UserObject::new(cls.clone_ref(py), cls_source, false);
        for (k, v) in kwargs {
            obj.set(py, &k, v);
        }
        Ok(VT::UserObject(obj))
    }

    /// `object.__new__(cls)` (or the dict or list base's) for a trackable class: a new tracker,
    /// with no `__init__` run.
    fn fresh_user_object(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>) -> VResult<VT> {
        let cls_source = self.og.class_sources.get(&(cls.as_ptr() as usize)).cloned().expect("trackable classes have a source");
        let dict_base = crate::symbolic::variables::user_defined::has_dict_base(py, cls.bind(py))?;
        let obj = if crate::symbolic::variables::user_defined::has_list_base(py, cls.bind(py))? {
            crate::symbolic::variables::user_defined::UserObject::new_list(cls.clone_ref(py), cls_source)
        } else {
            crate::symbolic::variables::user_defined::UserObject::new(cls.clone_ref(py), cls_source, dict_base)
        };
        Ok(VT::UserObject(obj))
    }

    /// `object.__new__(cls)` then `__init__` for a trackable class without a Python `__new__`
    /// (`construct_user_object`).
    fn new_user_object(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let dict_base = crate::symbolic::variables::user_defined::has_dict_base(py, cls.bind(py))?;
        let vt = self.fresh_user_object(py, cls)?;
        let VT::UserObject(obj) = &vt else { unreachable!("fresh_user_object makes a UserObject") };
        let obj = obj.clone();
        let ty = cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        let (k, init) = static_type_lookup(&ty, "__init__")?.expect("object defines __init__");
        if obj.list.is_some() && init.is(py.get_type::<pyo3::types::PyList>().getattr("__init__")?) {
            self.list_object_init(py, &vt, args, kwargs)?;
            return Ok(vt);
        }
        if crate::symbolic::variables::user_defined::is_defaultdict_own(py, &init, "__init__")? {
            self.defaultdict_init(py, &vt, args, kwargs)?;
            return Ok(vt);
        }
        // `dict.__init__` / `OrderedDict.__init__` without arguments leave the storage empty;
        // with arguments they insert (OrderedDict's through the subclass's `__setitem__`).
        if init.is(py.get_type::<PyAny>().getattr("__init__")?) || type_name(&init) != "function" {
            if dict_base && args.len() <= 1 {
                // `dict.__init__(o, other, **kw)` merges into the storage without calling the
                // subclass back (Objects/dictobject.c, `dict_update_common`);
                // `OrderedDict.__init__` stores each item through `o[k] = v`
                // (Objects/odictobject.c, `mutablemapping_update`), a subclass's
                // `__setitem__` included. Items of `other` first, then the keywords.
                let pairs = match args.first() {
                    Some(a) => self.mapping_items(py, a)?,
                    None => vec![],
                };
                let kw = kwargs.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v));
                let via_setitem = !init.is(py.get_type::<PyDict>().getattr("__init__")?);
                for (k, v) in pairs.into_iter().chain(kw) {
                    if via_setitem {
                        self.setitem(py, &vt, crate::symbolic::variables::dicts::key_tracker(py, &k), v)?;
                    } else {
                        let storage = obj.storage.as_ref().expect("an object of a dict subclass has a storage");
                        dict_set(py, &mut storage.borrow_mut(), k, v)?;
                    }
                }
                return Ok(vt);
            }
            if !args.is_empty() || !kwargs.is_empty() {
                let why = if dict_base { "arguments for the dict base's __init__" } else { "takes no arguments (TypeError)" };
                graph_break!(UnsupportedCall, "{}(): {why}", crate::symbolic::variables::qualname(cls.bind(py)));
            }
            return Ok(vt);
        }
        let func = wrap(py, self.og, &init, obj.class_attr_source(k, "__init__"))?;
        self.call_python_init(py, cls, &func, &vt, args, kwargs)?;
        Ok(vt)
    }

    /// `init(obj, *args, **kwargs)`, inlined, for a new object of `cls`; `__init__` must return
    /// None (else `type_call`'s TypeError, left to Python).
    fn call_python_init(&mut self, py: Python<'_>, cls: &Rc<Py<PyAny>>, init: &VT, obj: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<()> {
        let mut all = vec![obj.clone()];
        all.extend(args);
        let r = self.call(py, init, all, kwargs)?;
        if !r.as_constant(py).map(|c| c.is_none()).unwrap_or(false) {
            graph_break!(UnsupportedCall, "__init__ of {} returned {} (TypeError)", crate::symbolic::variables::qualname(cls.bind(py)), r.describe(py));
        }
        Ok(())
    }

    /// `list.__init__(o, *args, **kwargs)` on a new object `vt` of a list subclass (Note [list
    /// subclass objects]; `list___init___impl`, Objects/listobject.c): the storage is cleared,
    /// then extended with the items of the one optional iterable. Keywords or more than one
    /// argument (eager's TypeError) are left to Python.
    pub(crate) fn list_object_init(&mut self, py: Python<'_>, vt: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<()> {
        let list = match vt {
            VT::UserObject(o) => o.list.clone(),
            _ => None,
        };
        let Some(list) = list else { graph_break!(UnsupportedCall, "list.__init__ of {}", vt.describe(py)) };
        if !kwargs.is_empty() || args.len() > 1 {
            graph_break!(UnsupportedCall, "list.__init__ with keywords or {} arguments (TypeError)", args.len());
        }
        list.borrow_mut().items.clear();
        if let Some(iterable) = args.first() {
            let items = self.iter_items(py, iterable)?;
            list.borrow_mut().items.extend(items);
        }
        Ok(())
    }

    /// `defaultdict.__init__(o, *args, **kwargs)` on a new object `vt` of a defaultdict class
    /// (`defdict_init`, Modules/_collectionsmodule.c; Note [defaultdict objects]): the first
    /// positional argument, if any, becomes `default_factory` (TypeError "first argument must
    /// be callable or None" otherwise; None without one), and the rest are `dict.__init__`'s
    /// (at most one mapping or iterable of pairs, then the keywords, merged into the storage
    /// without calling the class back). Errors: the TypeErrors above, raised in the trace; a
    /// graph break when callability or the pairs cannot be decided while tracing.
    pub(crate) fn defaultdict_init(&mut self, py: Python<'_>, vt: &VT, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<()> {
        let VT::UserObject(obj) = vt else { graph_break!(UnsupportedCall, "defaultdict.__init__ of {}", vt.describe(py)) };
        let mut args = args.into_iter();
        let factory = match args.next() {
            Some(f) => {
                let none = f.as_constant(py).map(|c| c.is_none()).unwrap_or(false);
                match (none, self.is_callable(py, &f)?) {
                    (true, _) | (false, Some(true)) => f,
                    (false, Some(false)) => return Err(Unsupported::raise("TypeError", "first argument must be callable or None".to_string())),
                    (false, None) => graph_break!(UnsupportedCall, "defaultdict(): whether {} is callable", f.describe(py)),
                }
            }
            None => VT::none(py),
        };
        obj.set(py, "default_factory", factory);
        let rest: Vec<VT> = args.collect();
        if rest.len() > 1 {
            return Err(Unsupported::raise("TypeError", format!("dict expected at most 1 argument, got {}", rest.len())));
        }
        let pairs = match rest.first() {
            Some(a) => self.mapping_items(py, a)?,
            None => vec![],
        };
        let storage = obj.storage.as_ref().expect("an object of a dict subclass has a storage").clone();
        let kw = kwargs.into_iter().map(|(k, v)| (PyString::new(py, &k).into_any().unbind(), v));
        for (k, v) in pairs.into_iter().chain(kw) {
            dict_set(py, &mut storage.borrow_mut(), k, v)?;
        }
        Ok(())
    }

    /// The special method `name` of a user object (new in the frame, or reached through a
    /// source) bound to it, when its class defines it as a Python function: CPython calls the
    /// type's slot, never an instance attribute (`_PyType_Lookup`), so `len(o)`, `o[i]` inline
    /// `type(o).__len__(o)`, `type(o).__getitem__(o, i)`. `None` when the class has no Python
    /// function of that name.
    pub(crate) fn python_dunder(&mut self, py: Python<'_>, obj: &VT, name: &str) -> VResult<Option<VT>> {
        let (ty, src) = match obj {
            VT::UserObject(o) => {
                let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                match static_type_lookup(&ty, name)? {
                    Some((k, f)) if type_name(&f) == "function" => (f, o.class_attr_source(k, name)),
                    _ => return Ok(None),
                }
            }
            VT::Opaque { obj: o, source } => {
                let ty = o.bind(py).get_type();
                match static_type_lookup(&ty, name)? {
                    Some((k, f)) if type_name(&f) == "function" => (f, class_attr_source(source, k, name)),
                    _ => return Ok(None),
                }
            }
            // Note [user exception objects] (variables/exceptions.rs).
            VT::Constant(c) => return self.user_exception_dunder(py, c, name),
            _ => return Ok(None),
        };
        let func = wrap(py, self.og, &ty, src)?;
        Ok(Some(VT::Method { func: Box::new(func), self_: Box::new(obj.clone()) }))
    }

    /// `o.name` on a new user object: the class's Python `__getattribute__` inlined when it
    /// has one (`slot_tp_getattr_hook`, Objects/typeobject.c; `is_plain_class` refuses a
    /// `__getattr__` beside it), else the generic lookup.
    pub(crate) fn user_object_getattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::variables::user_defined::UserObject>, name: &str) -> VResult<VT> {
        if name != "__class__" {
            let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
            if let Some((k, ga)) = static_type_lookup(&ty, "__getattribute__")? {
                if type_name(&ga) == "function" {
                    let func = wrap(py, self.og, &ga, o.class_attr_source(k, "__getattribute__"))?;
                    let key = VT::constant(PyString::new(py, name).into_any().unbind());
                    return self.call(py, &func, vec![vt.clone(), key], vec![]);
                }
            }
        }
        self.user_object_generic_getattr(py, vt, o, name)
    }

    /// `object.__getattribute__(o, name)` on a new user object (the lookup order is in the
    /// module docs).
    pub(crate) fn user_object_generic_getattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::variables::user_defined::UserObject>, name: &str) -> VResult<VT> {
        if name == "__class__" {
            return Ok(VT::Class(Rc::new(o.cls.clone_ref(py))));
        }
        let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        for base in ty.getattr("__mro__")?.try_iter()? {
            if self.og.side_effects.attr(&base?.unbind(), name).is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} after a write to its class", vt.describe(py));
            }
        }
        let class_attr = static_type_lookup(&ty, name)?;
        if let Some((k, ca)) = &class_attr {
            if name == "default_factory" && crate::symbolic::variables::user_defined::is_defaultdict_own(py, ca, name)? {
                // The slot (Note [defaultdict objects]): set by `defaultdict_init`.
                return Ok(o.get(py, name).unwrap_or_else(|| VT::none(py)));
            }
            if name == "__dict__" && o.get(py, "default_factory").is_some() && crate::symbolic::variables::user_defined::is_defaultdict_class(py, o.cls.bind(py))? {
                graph_break!(UntracedValue, "__dict__ of {} (its factory is kept beside the attributes: Note [defaultdict objects])", vt.describe(py));
            }
            if name == "__dict__" && type_name(ca) == "getset_descriptor" && has_slots(o.cls.bind(py))? {
                // Note [slotted objects]: the tracker holds the slots beside the dict's items.
                graph_break!(UntracedValue, "__dict__ of {} (an object with __slots__ and a __dict__)", vt.describe(py));
            }
            if name == "__dict__" && (type_name(ca) == "getset_descriptor" || is_namespace_type(py, ca.getattr("__objclass__").as_ref().unwrap_or(ca))?) {
                // The instance dict's own getter (`subtype_dict`, or OrderedDict's; for a
                // namespace, the `__dict__` member of `_PyNamespace_Type`, Note [namespace
                // objects]): the tracker that holds the attributes, so writes through it are
                // attribute writes.
                return Ok(VT::Dict(o.attrs.clone()));
            }
            if is_class_slot(o.cls.bind(py), ca) {
                // Note [slotted objects]: the slot's value is the tracker's attribute; an empty
                // slot raises as `member_get` does (the class is guarded, so its slots are fixed).
                return match o.get(py, name) {
                    Some(v) => Ok(v),
                    None => Err(Unsupported::attribute_error(py, name, crate::symbolic::variables::empty_slot_message(o.cls.bind(py), name))),
                };
            }
            if is_data_descriptor(ca)? {
                if type_name(ca) == "property" {
                    let fget = ca.getattr("fget")?;
                    if type_name(&fget) == "function" {
                        let func = wrap(py, self.og, &fget, o.class_attr_source(*k, name).attr("fget"))?;
                        return self.call(py, &func, vec![vt.clone()], vec![]);
                    }
                } else {
                    // Note [data descriptors with a Python __get__].
                    let owner = VT::Class(Rc::new(o.cls.clone_ref(py)));
                    if let Some(v) = self.nondata_descriptor_get(py, vt, ca, o.class_attr_source(*k, name), owner)? {
                        return Ok(v);
                    }
                }
                graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(ca));
            }
        }
        if let Some(v) = o.get(py, name) {
            return Ok(v);
        }
        let Some((k, ca)) = class_attr else {
            if static_type_lookup(&ty, "__getattr__")?.is_some() {
                graph_break!(UntracedValue, "attribute '{name}' of {} (computed by __getattr__)", vt.describe(py));
            }
            // Every instance attribute of a new object is in its tracker; the class is reached
            // through its source, guarded to keep lacking the name: the lookup raises.
            self.og.add_guard(Some(o.cls_source.clone()), GuardKind::NoAttr(name.to_string()));
            return Err(Unsupported::attribute_error(py, name, crate::symbolic::variables::no_attribute_message(o.cls.bind(py), name)));
        };
        let src = o.class_attr_source(k, name);
        let object_type = py.get_type::<PyAny>();
        match type_name(&ca).as_str() {
            "function" => {
                let func = wrap(py, self.og, &ca, src)?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(vt.clone()) })
            }
            "staticmethod" => wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__")),
            "classmethod" => {
                let func = wrap(py, self.og, &ca.getattr("__func__")?, src.attr("__func__"))?;
                Ok(VT::Method { func: Box::new(func), self_: Box::new(VT::Class(Rc::new(o.cls.clone_ref(py)))) })
            }
            "wrapper_descriptor" if ca.is(object_type.getattr("__setattr__")?) || ca.is(object_type.getattr("__getattribute__")?) => {
                Ok(VT::GenericAttr { obj: Box::new(vt.clone()), set: name == "__setattr__" })
            }
            "method_descriptor" if self.polyfill_method(py, vt, &ty, &ca)?.is_some() => Ok(self.polyfill_method(py, vt, &ty, &ca)?.expect("checked")),
            // `dd.copy()` / `dd.__missing__(k)` of a defaultdict built in the frame: the
            // Python versions of its C methods (Note [defaultdict objects]).
            "method_descriptor" if crate::symbolic::variables::user_defined::is_defaultdict_own(py, &ca, name)? && py.import("dynamo._polyfills")?.getattr("DEFAULTDICT_METHODS")?.contains(name)? => {
                self.polyfill_table_method(py, vt, "DEFAULTDICT_METHODS", name)
            }
            // `od.move_to_end(k)` and the other methods of an OrderedDict built in the frame:
            // their Python versions over the storage, traced.
            "method_descriptor" if o.is_exact_ordered_dict(py)? && py.import("dynamo._polyfills")?.getattr("ODICT_METHODS")?.contains(name)? => {
                self.polyfill_table_method(py, vt, "ODICT_METHODS", name)
            }
            // `o.keys` on a dict subclass that does not override it: dict's method on the
            // storage (Note [dict subclass objects]).
            "method_descriptor" | "wrapper_descriptor" if o.storage_method(py, &ca, name)?.is_some() => {
                let storage = o.storage_method(py, &ca, name)?.expect("checked");
                if matches!(name, "keys" | "values" | "items") && ca.getattr("__objclass__")?.is(py.import("collections")?.getattr("OrderedDict")?) {
                    // Note [iterator types]: `OrderedDict.keys` makes an `odict_keys`.
                    return Ok(VT::ContainerMethod { container: Box::new(storage), name: format!("odict_{name}") });
                }
                Ok(VT::ContainerMethod { container: Box::new(storage), name: name.to_string() })
            }
            // Note [non-data descriptors].
            _ if ca.get_type().hasattr("__get__")? && !ca.is_instance_of::<pyo3::types::PyType>() => {
                let owner = VT::Class(Rc::new(o.cls.clone_ref(py)));
                match self.nondata_descriptor_get(py, vt, &ca, src.clone(), owner)? {
                    Some(v) => Ok(v),
                    None => graph_break!(UntracedValue, "attribute '{name}' of {} (a {} on its class)", vt.describe(py), type_name(&ca)),
                }
            }
            _ => wrap(py, self.og, &ca, src),
        }
    }

    /// `table[name]` of `dynamo._polyfills` (`ODICT_METHODS`, `DEFAULTDICT_METHODS`: Python
    /// versions of a builtin type's C methods) bound to `vt`, sourced as the module's function.
    /// Errors: KeyError when `name` is not in the table (callers check first).
    fn polyfill_table_method(&mut self, py: Python<'_>, vt: &VT, table: &str, name: &str) -> VResult<VT> {
        let f = py.import("dynamo._polyfills")?.getattr(table)?.get_item(name)?;
        let fname: String = f.getattr("__name__")?.extract()?;
        let func = wrap(py, self.og, &f, Arc::new(Source::Module { name: "dynamo._polyfills".into() }).attr(&fname))?;
        Ok(VT::Method { func: Box::new(func), self_: Box::new(vt.clone()) })
    }

    /// `o.name = v` on a new user object: the class's Python `__setattr__` is inlined (a frozen
    /// dataclass's raises, which is left to Python); a data descriptor on the class is not
    /// modelled; otherwise the attribute lands in the tracker. `generic`: `object.__setattr__`.
    pub(crate) fn user_object_setattr(&mut self, py: Python<'_>, vt: &VT, o: &Rc<crate::symbolic::variables::user_defined::UserObject>, name: &str, v: VT, generic: bool) -> VResult<()> {
        let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
        if let Some((_, ca)) = static_type_lookup(&ty, name)? {
            if name == "default_factory" && has_generic_setattr(py, &ty)? && crate::symbolic::variables::user_defined::is_defaultdict_own(py, &ca, name)? {
                // The slot takes any value (`member_set`, T_OBJECT; Note [defaultdict objects]).
                o.set(py, name, v);
                return Ok(());
            }
            let slot = is_class_slot(o.cls.bind(py), &ca);
            if slot && (generic || has_generic_setattr(py, &ty)?) {
                // Note [slotted objects]: `member_set` stores any value.
                o.set(py, name, v);
                return Ok(());
            }
            // A slot behind a Python `__setattr__` is reached through it, below.
            if !slot && is_data_descriptor(&ca)? {
                graph_break!(SideEffect, "attribute write {}.{name} (a {} on its class)", vt.describe(py), type_name(&ca));
            }
        }
        if (generic || has_generic_setattr(py, &ty)?) && ty.getattr("__dictoffset__")?.extract::<isize>()? == 0 && !has_dict_base(py, ty.as_any())? && o.storage.is_none() {
            // No instance dict and no slot of that name: `PyObject_GenericSetAttr` raises
            // AttributeError (whose message differs between CPython versions): Python raises it.
            graph_break!(SideEffect, "attribute write {}.{name}: not a slot of an object without __dict__ (AttributeError)", vt.describe(py));
        }
        if !generic {
            let (k, setattr) = static_type_lookup(&ty, "__setattr__")?.expect("object defines __setattr__");
            if !has_generic_setattr(py, &ty)? {
                let func = wrap(py, self.og, &setattr, o.class_attr_source(k, "__setattr__"))?;
                let key = VT::constant(PyString::new(py, name).into_any().unbind());
                self.call(py, &func, vec![vt.clone(), key, v], vec![])?;
                return Ok(());
            }
        }
        o.set(py, name, v);
        Ok(())
    }

    /// `a == b` where one side is a new user object, as a truth value (what a container's
    /// comparison of its items, `PyObject_RichCompareBool`, takes): [`Self::user_object_rich_eq`]
    /// tested for truth.
    pub(crate) fn user_object_eq(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<bool> {
        if let Some(r) = self.ordered_dict_eq(py, a, b)? {
            return Ok(r);
        }
        let r = self.user_object_rich_eq(py, a, b, "__eq__")?;
        self.truth(py, &r)
    }

    // Note [rich comparison results]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // `a == b` is `PyObject_RichCompare`: whatever the deciding `__eq__` returns, not a bool
    // (numpy-style classes return arrays, DSLs return expression objects, a sloppy `__eq__`
    // returns `0` or a string). Only a container comparing its items, `in`, and a branch test
    // the result for truth. The trace returned `truth(__eq__(...))` for every `==` with a user
    // object (`K(1) == K(1)` was True where eager gives "yes"), and broke on `!=` of a class
    // defining `__ne__`; COMPARE_OP now keeps the method's value, and `!=` runs a Python
    // `__ne__` or, for `object.__ne__`, negates the truth of `__eq__`.

    /// `a == b` or `a != b` (COMPARE_OP) where one side is a new user object: the value the
    /// deciding method returned, whatever its type (a Python `__eq__` may return a string, a
    /// tensor, NotImplemented's replacement), as `PyObject_RichCompare` gives it. `!=` of a
    /// class keeping `object.__ne__` is the negated truth of its `__eq__` (Objects/typeobject.c,
    /// `object_richcompare`).
    pub(crate) fn user_object_compare_eq(&mut self, py: Python<'_>, name: &str, a: &VT, b: &VT) -> VResult<VT> {
        if let Some(r) = self.ordered_dict_eq(py, a, b)? {
            return Ok(crate::symbolic::variables::constant::const_bool(py, r == (name == "eq")));
        }
        if name == "eq" {
            return self.user_object_rich_eq(py, a, b, "__eq__");
        }
        let object_ne = py.get_type::<PyAny>().getattr("__ne__")?;
        let mut own_ne = false;
        for v in [a, b] {
            if let Some(ty) = self.type_of(py, v)? {
                own_ne |= !ty.bind(py).getattr("__ne__")?.is(&object_ne);
            }
        }
        if own_ne {
            return self.user_object_rich_eq(py, a, b, "__ne__");
        }
        let r = self.user_object_rich_eq(py, a, b, "__eq__")?;
        let t = self.truth(py, &r)?;
        Ok(crate::symbolic::variables::constant::const_bool(py, !t))
    }

    // Note [Python comparisons of objects passed in]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // `a == b`, `a in lst`, `lst.index(a)` where `a` (or an item) is an object from outside the
    // frame whose class defines `__eq__` in Python: the same rich comparison as for an object
    // built in the frame, the method inlined through its class's source (`type(a).__mro__[k]
    // .__dict__['__eq__']`, ID_MATCH), what it reads of the object read through the object's
    // source. Before, each such comparison was a break and a recompile (audit 52, S2).

    /// Whether `v` is an object from outside the frame whose class's `__eq__` is a Python
    /// function (Note [Python comparisons of objects passed in]).
    pub(crate) fn python_eq_object(&mut self, py: Python<'_>, v: &VT) -> VResult<bool> {
        let VT::Opaque { obj, .. } = v else { return Ok(false) };
        Ok(static_type_lookup(&obj.bind(py).get_type(), "__eq__")?.is_some_and(|(_, f)| type_name(&f) == "function"))
    }

    /// `a == b` (`dunder` `__eq__`) or `a != b` (`__ne__`) where one side is a new user
    /// object: the rich comparison protocol (Objects/object.c, `do_richcompare`): the
    /// reflected method first when the right operand's type is a proper subclass overriding
    /// it, a Python method inlined, `NotImplemented` passing to the other side, identity when
    /// neither decides. A literal on the other side answers NotImplemented
    /// (`defers_to_python_classes`). Returns the deciding method's value as it is.
    fn user_object_rich_eq(&mut self, py: Python<'_>, a: &VT, b: &VT, dunder: &str) -> VResult<VT> {
        let is_eq = dunder == "__eq__";
        let identity = |this: &mut Self| -> VResult<VT> {
            let same = this.is_same(py, a, b)?;
            Ok(crate::symbolic::variables::constant::const_bool(py, same == is_eq))
        };
        let object_method = py.get_type::<PyAny>().getattr(dunder)?;
        let method_of = |this: &mut Self, v: &VT| -> VResult<Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>> {
            let Some(ty) = this.type_of(py, v)? else { return Ok(None) };
            let ty = ty.bind(py).clone();
            let f = ty.getattr(dunder)?;
            Ok(Some((ty, f)))
        };
        let (ma, mb) = (method_of(self, a)?, method_of(self, b)?);
        let order: Vec<(&VT, &VT, Bound<'_, PyAny>)> = match (ma, mb) {
            (Some((ta, fa)), Some((tb, fb))) => {
                let tb_sub = tb.cast::<pyo3::types::PyType>().ok().map(|t| !t.is(&ta) && t.is_subclass(&ta).unwrap_or(false)).unwrap_or(false);
                if tb_sub && !fb.is(&fa) { vec![(b, a, fb), (a, b, fa)] } else { vec![(a, b, fa), (b, a, fb)] }
            }
            (ma, mb) => {
                // A constant or a container on the other side: a literal's method answers
                // NotImplemented for an object of a Python class; the object's own decides (or
                // identity). Any other kind is not modelled.
                let (obj, other, m) = if matches!(a, VT::UserObject(_) | VT::Opaque { .. }) { (a, b, ma) } else { (b, a, mb) };
                let literal_other = other.as_constant(py).is_some_and(|c| crate::symbolic::object_protocol::object_protocol_defers(&c));
                match (literal_other, m) {
                    (true, Some((_, f))) => vec![(obj, other, f)],
                    _ => graph_break!(UntracedValue, "{} of {} and {}", if is_eq { "==" } else { "!=" }, a.describe(py), b.describe(py)),
                }
            }
        };
        for (x, y, f) in order {
            if f.is(&object_method) {
                continue;
            }
            if type_name(&f) != "function" {
                graph_break!(UntracedValue, "{} of {} and {} (a {} {dunder})", if is_eq { "==" } else { "!=" }, a.describe(py), b.describe(py), type_name(&f));
            }
            let func = match x {
                VT::UserObject(o) => {
                    let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                    let (k, _) = static_type_lookup(&ty, dunder)?.expect("found above");
                    wrap(py, self.og, &f, o.class_attr_source(k, dunder))?
                }
                VT::Opaque { obj, source } => {
                    let ty = obj.bind(py).get_type();
                    let (k, _) = static_type_lookup(&ty, dunder)?.expect("found above");
                    self.guard_mro_prefix(source, k, dunder);
                    wrap(py, self.og, &f, class_attr_source(source, k, dunder))?
                }
                _ => graph_break!(UntracedValue, "{} of {} and {} (the other side's {dunder})", if is_eq { "==" } else { "!=" }, a.describe(py), b.describe(py)),
            };
            let r = self.call(py, &func, vec![x.clone(), y.clone()], vec![])?;
            if let Some(c) = r.as_constant(py) {
                if c.is(&py.NotImplemented()) {
                    continue;
                }
            }
            return Ok(r);
        }
        identity(self)
    }
}

impl<'a> InstructionTranslator<'a> {
    /// `==` with an `OrderedDict` built in the frame on one side (Objects/odictobject.c,
    /// `odict_richcompare`): against another `OrderedDict` the dicts must be equal and their keys
    /// in the same order; against a plain dict it is dict equality, order ignored (the reflected
    /// call lands in the same function, so both operand orders agree). A dict subclass object
    /// that keeps `dict.__eq__` (a defaultdict) compares its storage as a dict, order ignored.
    /// `None` when neither side is such an object or the other side is a kind not modelled here.
    fn ordered_dict_eq(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<Option<bool>> {
        // An exact OrderedDict (`odict_richcompare`), or a dict subclass object that keeps
        // `dict.__eq__` (a defaultdict: `dict_richcompare` on the storage, order ignored).
        let dict_eq = py.get_type::<pyo3::types::PyDict>().getattr("__eq__")?;
        let od_storage = |v: &VT| -> PyResult<Option<(Rc<RefCell<DictState>>, bool)>> {
            Ok(match v {
                VT::UserObject(o) if o.is_exact_ordered_dict(py)? => o.storage.clone().map(|s| (s, true)),
                VT::UserObject(o) if o.storage.is_some() && o.cls.bind(py).getattr("__eq__")?.is(&dict_eq) => o.storage.clone().map(|s| (s, false)),
                _ => None,
            })
        };
        let (sa, sb) = (od_storage(a)?, od_storage(b)?);
        let both_ordered = matches!((&sa, &sb), (Some((_, true)), Some((_, true))));
        let (sa, sb) = (sa.map(|(s, _)| s), sb.map(|(s, _)| s));
        let plain = |v: &VT| -> Option<VT> {
            match v {
                VT::Dict(_) => Some(v.clone()),
                VT::Constant(c) if c.bind(py).get_type().is(py.get_type::<pyo3::types::PyDict>()) => Some(v.clone()),
                _ => None,
            }
        };
        let (x, y, ordered) = match (&sa, &sb) {
            (Some(x), Some(y)) => (VT::Dict(x.clone()), VT::Dict(y.clone()), both_ordered),
            (Some(x), None) => match plain(b) {
                Some(y) => (VT::Dict(x.clone()), y, false),
                None => return Ok(None),
            },
            (None, Some(y)) => match plain(a) {
                Some(x) => (x, VT::Dict(y.clone()), false),
                None => return Ok(None),
            },
            (None, None) => return Ok(None),
        };
        if !self.equal(py, &x, &y)? {
            return Ok(Some(false));
        }
        if ordered {
            let (VT::Dict(x), VT::Dict(y)) = (&x, &y) else { unreachable!("both storages") };
            let kx: Vec<Py<PyAny>> = x.borrow().items.iter().map(|(k, _)| k.clone_ref(py)).collect();
            let ky: Vec<Py<PyAny>> = y.borrow().items.iter().map(|(k, _)| k.clone_ref(py)).collect();
            for (p, q) in kx.iter().zip(ky.iter()) {
                if !p.bind(py).eq(q.bind(py))? {
                    return Ok(Some(false));
                }
            }
        }
        Ok(Some(true))
    }
}

/// The attribute `name` as the type `ty` defines it (first hit along `__mro__`, without running
/// descriptors), like `inspect.getattr_static` on a type.
pub(crate) fn static_type_lookup<'py>(ty: &Bound<'py, pyo3::types::PyType>, name: &str) -> PyResult<Option<(usize, Bound<'py, PyAny>)>> {
    record_class_lookup(ty, name);
    for (k, base) in ty.getattr("__mro__")?.try_iter()?.enumerate() {
        let d = base?.getattr("__dict__")?;
        if d.contains(name)? {
            return Ok(Some((k, d.get_item(name)?)));
        }
    }
    Ok(None)
}

// Note [class lookups are versioned]: what the trace finds along a class's MRO (a method, a
// dunder, or its absence: "no `__neg__`, so the operator raises", "no `__str__`, so `str()` is
// the `__repr__`") decides what the graph and the transformed code do. A class reached through
// a source is identity-guarded, but its contents can change after the compile (`A.__neg__ =
// ...`, `Base.k = 6`, a method monkeypatched on the class). Every lookup `static_type_lookup`
// makes on a class whose dict can change is therefore recorded while tracing, and becomes part
// of the class's ATTR_VERSION guard (Note [attribute version guards] in `src/guards/mod.rs`):
// one load of the class's version tag while nothing changed, the names looked up again when
// something did, a recompile only when one of them now holds another object or appeared.
thread_local! {
    static CLASS_LOOKUPS: RefCell<(Vec<(Py<PyAny>, String)>, std::collections::HashSet<(usize, String)>)> = RefCell::new((Vec::new(), std::collections::HashSet::new()));
}

fn record_class_lookup(ty: &Bound<'_, pyo3::types::PyType>, name: &str) {
    // SAFETY: `ty` is a live type object.
    let flags = unsafe { pyo3::ffi::PyType_GetFlags(ty.as_ptr() as *mut pyo3::ffi::PyTypeObject) };
    if flags & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE != 0 {
        return;
    }
    CLASS_LOOKUPS.with(|l| {
        let mut l = l.borrow_mut();
        if l.1.insert((ty.as_ptr() as usize, name.to_string())) {
            l.0.push((ty.clone().into_any().unbind(), name.to_string()));
        }
    });
}

/// Forgets the class lookups recorded so far: called when a trace starts.
pub(crate) fn clear_class_lookups() {
    CLASS_LOOKUPS.with(|l| {
        let mut l = l.borrow_mut();
        l.0.clear();
        l.1.clear();
    });
}

/// The class lookups recorded since the trace started, as (class, name), first-seen order.
pub(crate) fn take_class_lookups() -> Vec<(Py<PyAny>, String)> {
    CLASS_LOOKUPS.with(|l| {
        let mut l = l.borrow_mut();
        l.1.clear();
        std::mem::take(&mut l.0)
    })
}

/// The Python function of a class's own `__new__` (a `staticmethod` in a class dict of its MRO
/// before `object`), with its MRO index; `None` when `__new__` is `object`'s or not Python
/// code (Note [user __new__]).
pub(crate) fn python_new<'py>(ty: &Bound<'py, pyo3::types::PyType>) -> PyResult<Option<(usize, Bound<'py, PyAny>)>> {
    match static_type_lookup(ty, "__new__")? {
        Some((k, raw)) if type_name(&raw) == "staticmethod" => {
            let f = raw.getattr("__func__")?;
            Ok((type_name(&f) == "function").then_some((k, f)))
        }
        _ => Ok(None),
    }
}

/// Whether instances of `ty` look attributes up generically: `__getattribute__` is
/// `object`'s, or a builtin base's slot wrapper that is generic too (dict, list, OrderedDict,
/// and int, float, str, bytes, complex, whose `tp_getattro` is `PyObject_GenericGetAttr`:
/// Objects/longobject.c, floatobject.c, unicodeobject.c, bytesobject.c, complexobject.c;
/// `property` sets `tp_getattro` to `PyObject_GenericGetAttr` itself, Objects/descrobject.c, so
/// a Python subclass of it reads `self.fget` as any object does).
pub(crate) fn has_generic_getattribute(py: Python<'_>, ty: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    record_class_lookup(ty, "__getattribute__");
    let getattribute = ty.getattr("__getattribute__")?;
    if getattribute.is(py.get_type::<pyo3::types::PyAny>().getattr("__getattribute__")?) {
        return Ok(true);
    }
    // `types.SimpleNamespace`'s slot is `PyObject_GenericGetAttr` (Objects/namespaceobject.c),
    // wrapped for its own type (audit 51, O9: configs read as `cfg.scale` broke).
    let namespace = py.import("types")?.getattr("SimpleNamespace")?;
    if type_name(&getattribute) == "wrapper_descriptor" && getattribute.getattr("__objclass__").is_ok_and(|c| c.is(&namespace)) {
        return Ok(true);
    }
    Ok(type_name(&getattribute) == "wrapper_descriptor"
        && getattribute
            .getattr("__objclass__")
            .and_then(|c| c.getattr("__name__"))
            .map(|n| ["dict", "list", "tuple", "set", "OrderedDict", "defaultdict", "property", "int", "float", "str", "bytes", "complex", "BaseException"].contains(&n.to_string().as_str()))
            .unwrap_or(false))
}

/// Whether `cls` is exactly `types.SimpleNamespace` (Note [namespace objects]).
pub(crate) fn is_namespace_type(py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(cls.is(py.import("types")?.getattr("SimpleNamespace")?))
}

/// Whether `ty.__setattr__` is the generic one: object's, or the wrapper of the same
/// `PyObject_GenericSetAttr` that BaseException (Objects/exceptions.c) and
/// `types.SimpleNamespace` (Objects/namespaceobject.c) set on their types, so that every class
/// derived from them sees that wrapper.
pub(crate) fn has_generic_setattr(py: Python<'_>, ty: &Bound<'_, pyo3::types::PyType>) -> PyResult<bool> {
    let own = ty.getattr("__setattr__")?;
    if own.is(py.get_type::<PyAny>().getattr("__setattr__")?) || own.is(py.get_type::<pyo3::exceptions::PyBaseException>().getattr("__setattr__")?) {
        return Ok(true);
    }
    Ok(own.is(py.import("types")?.getattr("SimpleNamespace")?.getattr("__setattr__")?))
}

/// Whether `f`, a class's `__delattr__`, is the generic deletion: object's, or the wrapper of
/// the same `PyObject_GenericSetAttr` slot that BaseException and `types.SimpleNamespace` set on
/// their types (a `tp_setattro` serves both `__setattr__` and `__delattr__`).
pub(crate) fn is_generic_delattr(py: Python<'_>, f: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(f.is(py.get_type::<PyAny>().getattr("__delattr__")?)
        || f.is(py.get_type::<pyo3::exceptions::PyBaseException>().getattr("__delattr__")?)
        || f.is(py.import("types")?.getattr("SimpleNamespace")?.getattr("__delattr__")?))
}

/// Where class attribute `name` of the object at `source` lives when `type(obj).__mro__[k]`
/// defines it: `type(obj).__mro__[k].__dict__[name]` (a `mappingproxy` item, read without
/// running descriptors).
pub(crate) fn class_attr_source(source: &Arc<Source>, k: usize, name: &str) -> Arc<Source> {
    source.generic_attr("__class__").attr("__mro__").item(ItemKey::Int(k as i64)).attr("__dict__").item(ItemKey::Str(name.to_string()))
}

/// The Python object a tracker stands for, when it is a real object from the frame or a code
/// constant (not a value built or computed during tracing).
pub(crate) fn real_object(v: &VT) -> Option<&Py<PyAny>> {
    match v {
        VT::Module { obj, .. } | VT::Function { obj, .. } | VT::Opaque { obj, .. } | VT::PyModule { obj, .. } => Some(obj),
        VT::Class(o) | VT::Builtin(o) | VT::TorchFunction(o) => Some(o),
        _ => None,
    }
}

/// Whether a class of `cls`'s MRO declares non-empty `__slots__` (Note [slotted objects]).
pub(crate) fn has_slots(cls: &Bound<'_, PyAny>) -> PyResult<bool> {
    for base in cls.getattr("__mro__")?.try_iter()? {
        if let Ok(slots) = base?.getattr("__dict__")?.get_item("__slots__") {
            if slots.is_instance_of::<pyo3::types::PyString>() || slots.len().is_ok_and(|n| n > 0) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Whether class attribute `attr` is a `__slots__` entry of instances of `cls`: a
/// `member_descriptor` (Objects/descrobject.c, `PyMemberDescr_Type`) whose `__objclass__` is
/// `cls` or a base of it, so that `member_get`/`member_set` accept them (a descriptor copied onto
/// another class raises TypeError there instead).
pub(crate) fn is_class_slot(cls: &Bound<'_, PyAny>, attr: &Bound<'_, PyAny>) -> bool {
    type_name(attr) == "member_descriptor"
        && attr.getattr("__objclass__").is_ok_and(|c| cls.cast::<PyType>().is_ok_and(|t| t.is_subclass(&c).unwrap_or(false)))
}

/// Whether `attr` is a data descriptor (its type defines `__set__` or `__delete__`), which takes
/// precedence over the instance dict (Descriptor HowTo Guide, Python docs).
pub(crate) fn is_data_descriptor(attr: &Bound<'_, PyAny>) -> PyResult<bool> {
    let t = attr.get_type();
    Ok(t.hasattr("__set__")? || t.hasattr("__delete__")?)
}

/// Whether function `f` is defined in a class body (its `__qualname__` names the class, as
/// `Optimizer.zero_grad`), not at module level or inside another function.
pub(crate) fn is_method_qualname(f: &Bound<'_, PyAny>) -> bool {
    f.getattr("__qualname__")
        .ok()
        .and_then(|q| q.extract::<String>().ok())
        .is_some_and(|q| q.contains('.') && !q.contains("<locals>"))
}

/// Whether `obj.name` (a method of `LOGGER_METHODS`) and `obj.findCaller` are what
/// `logging.Logger` defines, when `name` is one of its own standard methods (Note [logger calls]).
fn logger_method_is_standard(py: Python<'_>, obj: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    if !crate::symbolic::translator::STDLIB_LOGGER_METHODS.contains(&name) {
        return Ok(true);
    }
    let base = py.import("logging")?.getattr("Logger")?;
    let ty = obj.get_type();
    for attr in [name, "findCaller"] {
        if !ty.getattr(attr)?.is(&base.getattr(attr)?) {
            return Ok(false);
        }
    }
    // An instance attribute would shadow either.
    Ok(obj.getattr("__dict__").and_then(|d| Ok(!d.contains(name)? && !d.contains("findCaller")?)).unwrap_or(true))
}
