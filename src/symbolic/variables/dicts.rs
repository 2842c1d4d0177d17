//! Dicts, dict views and sets (torch's `ConstDictVariable`, `DictView`, `SetVariable`).

use crate::source::Source;
use crate::symbolic::variables::{type_name, VariableTracker, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::constant::const_bool;

/// Which view of a dict: `d.keys()`, `d.values()` or `d.items()` (also what an iterator over
/// the dict yields; iterating the dict itself walks its keys).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DictView {
    Keys,
    Values,
    Items,
}

impl DictView {
    /// The method of `dict` that makes this view (`dict.keys`, ...).
    pub fn method(self) -> &'static str {
        match self {
            DictView::Keys => "keys",
            DictView::Values => "values",
            DictView::Items => "items",
        }
    }
}

/// Note [set order]: a set built in the trace is a private real `set` whose members are
/// literals (or stand-ins for identity-hashed objects, `set_members_of`), and every operation
/// on it is the real C operation CPython runs for the same code: `BUILD_SET` adds one by one,
/// `SET_UPDATE`, `set(x)` and `s.update(x)` are `set.update` of the real argument (a
/// frozenset constant or another set is merged slot by slot, `set_merge`, not added in its
/// iteration order), the other methods run on the real set (`set_method`), its iterator is a
/// real `set_iterator` (`IterKind::Set`). So its table, and with it the iteration order of
/// str members (whose hashes are randomized per process), is eager's. A set that outlives the
/// graph is rebuilt as `set(c)` of a constant tuple of its members in order or of
/// `frozenset(s)`, whichever is checked at compile time to iterate in the same order with a
/// table of the same size (same process, same hashes); one neither reproduces is a graph
/// break (`rebuild_of` in `convert_frame.rs`). Same order and size is not a proof of the same
/// slots: a set whose members collided may still place a later insertion differently.
///
/// The methods of `set` run on the real set by `set_method`.
pub const SET_REAL_METHODS: [&str; 13] = ["update", "copy", "pop", "difference_update", "intersection_update", "symmetric_difference_update", "union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint"];

/// Note [tensor dict keys]: a tensor hashes and compares by identity (`Tensor.__hash__` is
/// `id`, and a dict compares hashes before it calls `__eq__`, so a tensor's elementwise `==`
/// never runs for a lookup: `lookdict`, Objects/dictobject.c). A dict built in the trace may
/// therefore be keyed by tensors (`{x: 1}`, `d[h] = ...`, `x in d`), as torch's
/// `ConstDictVariable` keys by `HashableTracker`s. The key a dict tracker holds for a tensor
/// is a `TracedKey`: one private object per graph value (`OutputGraph::traced_keys`), hashed
/// and compared by identity as the tensor is, that carries the tensor's tracker. Everything
/// that turns a key back into a value (iteration, `keys()`, `items()`, `popitem()`, a set of
/// the keys) takes the tracker (`key_tracker`); a dict that outlives the graph is rebuilt as
/// `dict(pairs)` with the real tensors (`convert_frame::dict_rebuild`); code that needs a real
/// dict of the keys (printing one, folding a call on it) refuses a traced key. Two distinct
/// tensor inputs used as keys are guarded to stay distinct (NO_ALIAS), since the trace decided
/// that one is not the other's key.
#[pyclass(unsendable, module = "dynamo._C")]
pub struct TracedKey {
    /// The tensor's tracker.
    pub value: VT,
}

/// Whether `k` is a dict key standing for a traced value (Note [tensor dict keys]).
pub(crate) fn is_traced_key(k: &Bound<'_, PyAny>) -> bool {
    k.is_instance_of::<TracedKey>()
}

/// The tracker of dict key `k`: the value a `TracedKey` stands for, any other key as the
/// constant it is (Note [tensor dict keys]).
pub(crate) fn key_tracker(py: Python<'_>, k: &Py<PyAny>) -> VT {
    match k.bind(py).cast::<TracedKey>() {
        Ok(t) => t.borrow().value.clone(),
        Err(_) => VT::constant(k.clone_ref(py)),
    }
}

/// The `KeyError(key)` a failed lookup of key `k` raises in the trace (`dict_subscript`,
/// `_PyDict_Pop_KnownHash`, `dict_ass_sub`); a graph break for a traced key, whose exception
/// would have to carry the real tensor.
pub(crate) fn key_error(py: Python<'_>, k: &Bound<'_, PyAny>) -> Unsupported {
    if is_traced_key(k) {
        return Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "KeyError of a tensor key");
    }
    Unsupported::raise_new(py, "KeyError", k)
}

/// Note [frozensets of traced values]: a frozenset whose members are not all literals
/// (`frozenset([x, y])` of tensors) is a `VT::Set` as a set is, holding a real frozenset of the
/// same stand-ins (Note [set order]); its type, methods and operators are the real frozenset's
/// (no `add`; `fs |= t` makes a new frozenset; `fs | s` is a frozenset, `s | fs` a set), and it
/// is rebuilt as `frozenset((...))` of its members. A frozenset of literals stays a constant.
/// Hashing one, or using it as a dict key or set member, is not modelled (its hash would be the
/// stand-ins').
///
/// The tracker of the real set or frozenset `r` a set operation made: a constant for a
/// frozenset of literals, else a set tracker over it.
pub(crate) fn set_tracker(py: Python<'_>, r: Bound<'_, PyAny>) -> VT {
    let literal = r.is_instance_of::<pyo3::types::PyFrozenSet>()
        && r.try_iter().map(|it| it.flatten().all(|m| crate::symbolic::builder::is_literal(py, &m) || crate::symbolic::builder::is_plain_enum_member(py, &m))).unwrap_or(false);
    if literal {
        VT::constant(r.unbind())
    } else {
        VT::Set(Rc::new(RefCell::new(r.unbind())))
    }
}

/// A dict with constant keys (insertion ordered); a tensor key is a `TracedKey` (Note
/// [tensor dict keys]).
pub struct DictState {
    pub items: Vec<(Py<PyAny>, VariableTracker)>,
    pub source: Option<Arc<Source>>,
    /// Bumped by every insertion of a new key and every deletion (not by value updates): a dict
    /// iterator compares it with the version it started at.
    pub version: u64,
    /// For a dict from outside the frame, the trace's changes of its keys in order, for the
    /// replay (Note [dict rewrites keep the layout] in src/py/mod.rs): `(KEY_INSERT, k)`,
    /// `(KEY_DELETE, k)`, `(KEY_CLEAR, None)`. `None` once it grew past `MAX_KEY_OPS`.
    pub key_ops: Option<Vec<(u8, Py<PyAny>)>>,
    /// For the instance `__dict__` of a user object built in the frame, that object: the dict
    /// is rebuilt as its `__dict__`, never as a dict of its own (Note [instance dicts of new
    /// objects] in `convert_frame.rs`).
    pub instance_of: Option<std::rc::Weak<crate::symbolic::variables::user_defined::UserObject>>,
}

pub const KEY_INSERT: u8 = 0;
pub const KEY_DELETE: u8 = 1;
pub const KEY_CLEAR: u8 = 2;
const MAX_KEY_OPS: usize = 10_000;

impl DictState {
    /// A dict tracker of `items`; `source` when it stands for a dict from outside the frame.
    pub fn new(items: Vec<(Py<PyAny>, VariableTracker)>, source: Option<Arc<Source>>) -> Self {
        DictState { items, source, version: 0, key_ops: Some(Vec::new()), instance_of: None }
    }

    /// Records a change of the keys (`KEY_*`) of a dict from outside the frame, and bumps
    /// `version`.
    pub fn key_changed(&mut self, py: Python<'_>, op: u8, key: Option<&Py<PyAny>>) {
        self.version += 1;
        if self.source.is_none() {
            return;
        }
        if let Some(ops) = &mut self.key_ops {
            if ops.len() >= MAX_KEY_OPS {
                self.key_ops = None;
                return;
            }
            ops.push((op, key.map(|k| k.clone_ref(py)).unwrap_or_else(|| py.None())));
        }
    }
}

impl<'a> InstructionTranslator<'a> {
    /// The object that stands for `v` as a key of a dict tracker: a constant, an
    /// identity-guarded class, builtin or enum member as itself (`VariableTracker::as_key`), a
    /// tensor as its `TracedKey` (Note [tensor dict keys]). A graph break for anything else.
    pub(crate) fn dict_key<'py>(&mut self, py: Python<'py>, v: &VT) -> VResult<Bound<'py, PyAny>> {
        if let Some(k) = v.as_key(py) {
            return Ok(k);
        }
        if !matches!(v, VT::Tensor(_)) {
            graph_break!(UnsupportedOperation, "dict key is not a constant");
        }
        Ok(self.og.traced_key(py, v)?.into_bound(py))
    }

    /// The (key, value) pairs `dict(v)` / `d.update(v)` take from `v`: a dict, a view of its
    /// items, or an iterable of pairs; keys as `dict_key` makes them (constants, tensors).
    pub(crate) fn mapping_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<(Py<PyAny>, VT)>> {
        if let VT::Dict(d) = v {
            return Ok(d.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect());
        }
        if let VT::UserObject(o) = v {
            if let Some(storage) = &o.storage {
                // `dict_merge` (Objects/dictobject.c) copies the storage of a dict whose
                // `tp_iter` is dict's own; any other (an OrderedDict subclass) is read through
                // `b.keys()` and `b[key]` below, the subclass's methods included.
                let dict_iter = py.get_type::<PyDict>().getattr("__iter__")?;
                if o.cls.bind(py).getattr("__iter__")?.is(&dict_iter) {
                    return self.mapping_items(py, &VT::Dict(storage.clone()));
                }
            }
        }
        if let VT::Opaque { obj, source } = v {
            // The same fast path for a dict subclass from outside the frame: its raw storage,
            // whatever its `keys()` or `__getitem__` say (audit 52, Q2: `dict(d)` of a subclass
            // overriding `keys` gave that order, one overriding `__getitem__` its values).
            let o = obj.bind(py);
            if o.cast::<PyDict>().is_ok() {
                let dict_iter = py.get_type::<PyDict>().getattr("__iter__")?;
                if let Some((k, slot)) = crate::symbolic::variables::user_defined::static_type_lookup(&o.get_type(), "__iter__")? {
                    if slot.is(&dict_iter) {
                        if let Some(storage) = self.slot_storage(py, o, source, k, &slot, "__iter__")? {
                            return self.mapping_items(py, &VT::Dict(storage));
                        }
                    }
                }
            }
        }
        if let VT::Constant(c) = v {
            if let Ok(d) = c.bind(py).cast::<PyDict>() {
                return Ok(d.iter().map(|(k, v)| (k.unbind(), VT::constant(v.unbind()))).collect());
            }
        }
        // `dict_update_arg` (Objects/dictobject.c): an argument with a `keys` attribute is a
        // mapping, read as `PyDict_Merge` reads one: `keys()`, then `b[key]` for each (an
        // OrderedDict, defaultdict or Counter passed in, a user Mapping); anything else is an
        // iterable of pairs. (Read as pairs, an OrderedDict with the keys "zz" and "yy" became
        // {"z": "z", "y": "y"}.)
        // (Views, lists, tuples, iterators and generators have no `keys`: pairs.)
        let maybe_mapping = matches!(v, VT::UserObject(_) | VT::Opaque { .. } | VT::Module { .. } | VT::Constant(_));
        let hasattr = py.import("builtins")?.getattr("hasattr")?;
        let has_keys = maybe_mapping && self.call_builtin(py, &hasattr, vec![v.clone(), VT::constant(pyo3::types::PyString::new(py, "keys").into_any().unbind())], vec![])?
            .as_constant(py)
            .ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "hasattr(mapping, 'keys') is not a constant"))?
            .is_truthy()?;
        if has_keys {
            let keys = self.getattr(py, v, "keys")?;
            let keys = self.call(py, &keys, vec![], vec![])?;
            let mut out = Vec::new();
            for k in self.iter_items(py, &keys)? {
                let key = self.dict_key(py, &k)?.unbind();
                let val = self.getitem(py, v, &k)?;
                out.push((key, val));
            }
            return Ok(out);
        }
        let mut out = Vec::new();
        for pair in self.iter_items(py, v)? {
            out.push(self.pair_item(py, &pair)?);
        }
        Ok(out)
    }

    /// One item of the iterable of pairs that `dict(pairs)` and `d.update(pairs)` take
    /// (`PyDict_MergeFromSeq2`): a key and a value, the key a hashable constant or a tensor.
    pub(crate) fn pair_item(&mut self, py: Python<'_>, pair: &VT) -> VResult<(Py<PyAny>, VT)> {
        let kv = self.unpack(py, pair)?;
        if kv.len() != 2 {
            graph_break!(UnsupportedOperation, "dict() from an item of length {}", kv.len());
        }
        let k = self.dict_key(py, &kv[0])?;
        if k.hash().is_err() {
            graph_break!(UnsupportedOperation, "unhashable dict key");
        }
        Ok((k.unbind(), kv[1].clone()))
    }

    /// The real objects a traced set holds for `items`: literals, and objects from the frame
    /// whose identity is guarded and whose type hashes and compares by identity (`object`'s
    /// `__hash__` and `__eq__`: a module in `named_children`'s `memo`), so that membership
    /// runs no user code. Anything else is not modelled.
    pub(crate) fn set_members_of<'py>(&mut self, py: Python<'py>, items: &[VT]) -> VResult<Vec<Bound<'py, PyAny>>> {
        let object_type = py.get_type::<PyAny>();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if let Some(c) = item.as_constant(py) {
                out.push(c);
                continue;
            }
            self.pin_identity(item);
            if let Some(m) = item.as_enum_member(py) {
                // Note [enum members]: its real object, hashed by the enum module's code.
                self.og.set_members.insert(m.as_ptr() as usize, item.clone());
                out.push(m);
                continue;
            }
            if let VT::Tensor(t) = item {
                // A tensor hashes by identity (`Tensor.__hash__` is `id`), and each graph value
                // has its own fake tensor: the fake stands for it in the set.
                let fake = t.fake.bind(py).clone();
                self.og.set_members.insert(fake.as_ptr() as usize, item.clone());
                out.push(fake);
                continue;
            }
            let obj = match item {
                VT::Module { obj, .. } | VT::Class(obj) | VT::Builtin(obj) | VT::TorchFunction(obj) => obj.bind(py).clone(),
                VT::Function { obj, source: Some(_) } => obj.bind(py).clone(),
                other => graph_break!(UnsupportedOperation, "set member {} is not a literal or an identity-guarded object", other.describe(py)),
            };
            let ty = obj.get_type();
            if !(ty.getattr("__hash__")?.is(object_type.getattr("__hash__")?) && ty.getattr("__eq__")?.is(object_type.getattr("__eq__")?)) {
                graph_break!(UnsupportedOperation, "set member {} hashes or compares with its own methods", item.describe(py));
            }
            self.og.set_members.insert(obj.as_ptr() as usize, item.clone());
            out.push(obj);
        }
        Ok(out)
    }

    /// A private set of literal members.
    pub(crate) fn new_set(&mut self, py: Python<'_>, items: &[VT]) -> VResult<VT> {
        let consts = self.set_members_of(py, items)?;
        let set = pyo3::types::PySet::new(py, consts)?;
        Ok(VT::Set(Rc::new(RefCell::new(set.into_any().unbind()))))
    }

    /// The real object CPython's set methods would see for argument `arg` (Note [set order]):
    /// a traced set's real set, a constant itself, a dict tracker as a real dict of its keys
    /// (`set_update_internal` and the others take a dict's own path), anything else as a real
    /// list of its members in iteration order (what those methods do with an iterable).
    pub(crate) fn real_set_arg<'py>(&mut self, py: Python<'py>, arg: &VT) -> VResult<Bound<'py, PyAny>> {
        Ok(match arg {
            VT::Set(s) => s.borrow().bind(py).clone(),
            VT::Constant(c) => {
                let items = self.iter_items(py, arg)?;
                self.set_members_of(py, &items)?;
                c.bind(py).clone()
            }
            VT::Dict(d) => {
                let keys: Vec<VT> = d.borrow().items.iter().map(|(k, _)| key_tracker(py, k)).collect();
                let real = PyDict::new(py);
                for k in self.set_members_of(py, &keys)? {
                    real.set_item(k, py.None())?;
                }
                real.into_any()
            }
            other => {
                let items = self.iter_items(py, other)?;
                pyo3::types::PyList::new(py, self.set_members_of(py, &items)?)?.into_any()
            }
        })
    }

    /// `s.name(*args)` for a set built in the trace, run by the real method on its real set
    /// (Note [set order]): new sets are new trackers, frozensets, bools and None constants,
    /// `pop()`'s member its tracker. An exception of the real method (`KeyError` of `pop()`
    /// on an empty set) is raised in the trace (Note [errors of folded operations]).
    /// Before the write `what` to set tracker `set`: a graph break when the set is from outside
    /// the frame (Note [sets from outside the frame] in `builder.rs`: such a tracker is a
    /// read-only copy), so the write runs on the real set as ordinary Python.
    pub(crate) fn set_write(&self, set: &Rc<RefCell<Py<PyAny>>>, what: &str) -> VResult<()> {
        if let Some(source) = self.og.set_sources.get(&(Rc::as_ptr(set) as usize)) {
            graph_break!(SideEffect, "{what} on the set at {source}, from outside the frame");
        }
        Ok(())
    }

    pub(crate) fn set_method(&mut self, py: Python<'_>, set: &Rc<RefCell<Py<PyAny>>>, name: &str, args: &[VT]) -> VResult<VT> {
        if matches!(name, "update" | "difference_update" | "intersection_update" | "symmetric_difference_update" | "pop") {
            self.set_write(set, &format!("set.{name}()"))?;
        }
        let steps_items = match name {
            "update" | "difference_update" => true,
            "isdisjoint" | "issuperset" => args.len() == 1,
            _ => false,
        };
        if steps_items {
            let mut iters = Vec::with_capacity(args.len());
            for a in args {
                iters.push(self.lazy_iter(py, a)?);
            }
            if iters.iter().any(Option::is_some) {
                return self.set_method_stepped(py, set, name, args, iters);
            }
        }
        let real_args = args.iter().map(|a| self.real_set_arg(py, a)).collect::<VResult<Vec<_>>>()?;
        let real = set.borrow().clone_ref(py);
        // Note [errors of folded operations]: `KeyError` of `remove`/`pop`, a `TypeError` of an
        // unhashable member.
        let r = real.bind(py).call_method1(name, pyo3::types::PyTuple::new(py, real_args)?).map_err(|e| Unsupported::folded(py, e))?;
        if name == "pop" {
            return self.set_member(py, r);
        }
        Ok(match type_name(&r).as_str() {
            "set" | "frozenset" => set_tracker(py, r),
            _ => VT::constant(r.unbind()),
        })
    }

    /// `s.update(*its)`, `s.difference_update(*its)`, `s.isdisjoint(it)`, `s.issuperset(it)`
    /// where some iterable is lazy (Note [items taken one at a time]): the iterables in order,
    /// a lazy one stepped with each member added (`set_update_internal`) or discarded
    /// (`set_difference_update_internal`) before the next is taken, or tested
    /// (`set_isdisjoint`, `set_issuperset`) until one decides the answer, the rest left in
    /// the iterator; the others through the real method, as `set_method` runs them.
    fn set_method_stepped(&mut self, py: Python<'_>, set: &Rc<RefCell<Py<PyAny>>>, name: &str, args: &[VT], iters: Vec<Option<Rc<RefCell<crate::symbolic::variables::IteratorState>>>>) -> VResult<VT> {
        let real = set.borrow().clone_ref(py);
        for (arg, it) in args.iter().zip(iters) {
            let Some(it) = it else {
                let real_arg = self.real_set_arg(py, arg)?;
                let r = match real.bind(py).call_method1(name, (real_arg,)) {
                    Ok(r) => r,
                    Err(e) => graph_break!(RaisesException, "set.{name}() raises {}", e),
                };
                if matches!(name, "isdisjoint" | "issuperset") {
                    return Ok(VT::constant(r.unbind()));
                }
                continue;
            };
            let mut answer = true;
            self.for_each_step(py, &it, |tx, py, item| {
                let member = tx.set_members_of(py, std::slice::from_ref(&item))?.remove(0);
                let real = real.bind(py);
                match name {
                    "update" => {
                        real.call_method1("add", (member,))?;
                    }
                    "difference_update" => {
                        real.call_method1("discard", (member,))?;
                    }
                    "isdisjoint" if real.contains(&member)? => answer = false,
                    "issuperset" if !real.contains(&member)? => answer = false,
                    _ => {}
                }
                Ok(answer)
            })?;
            if matches!(name, "isdisjoint" | "issuperset") {
                return Ok(const_bool(py, answer));
            }
        }
        Ok(VT::none(py))
    }

    /// Note [dict view set operations]: `d.keys()` and `d.items()` are set-like: `&`, `|`, `-`,
    /// `^` (Objects/dictobject.c, `_PyDictView_Intersect`, `dictviews_or`, `dictviews_sub`,
    /// `dictviews_xor`), the comparisons (`dictview_richcompare`) and `isdisjoint`
    /// (`dictviews_isdisjoint`) build a new `set` or a bool from the view's iteration order and
    /// from membership tests on its dict, with the view on either side. They run as the real C
    /// code on real stand-ins: a view of a dict tracker whose keys (and, for `items()`, values)
    /// are literals is made real as the same view of a new dict holding the same keys in the
    /// same order (its values None for a keys view, which never reads them); the other operand
    /// as the real object those functions would see (`view_operand`). The result is a new set
    /// tracker (Note [set order]): its table and iteration order are eager's. `dict_values` has
    /// no set operations and compares by identity: it is never made real.
    ///
    /// The real stand-in of `v` for a dict view operation, or `None` when `v` is not one this
    /// models: a keys or items view as above, a traced set's own real set, a constant, a dict
    /// tracker as a dict of its literal keys (these operations read only a dict operand's
    /// keys), a list or tuple of literals. Lazy iterables are not made real (the C code would
    /// consume them while the trace's copy could not interleave with their producers).
    pub(crate) fn view_operand<'py>(&mut self, py: Python<'py>, v: &VT) -> VResult<Option<Bound<'py, PyAny>>> {
        use crate::symbolic::builder::is_literal;
        let literal_keys = |d: &DictState, with_values: bool| -> VResult<Option<Bound<'py, PyDict>>> {
            let real = PyDict::new(py);
            for (k, val) in &d.items {
                if !is_literal(py, k.bind(py)) {
                    return Ok(None);
                }
                let val = match (with_values, val) {
                    (false, _) => py.None().into_bound(py),
                    (true, VT::Constant(c)) if is_literal(py, c.bind(py)) => c.bind(py).clone(),
                    (true, _) => return Ok(None),
                };
                real.set_item(k.bind(py), val)?;
            }
            Ok(Some(real))
        };
        Ok(match v {
            VT::DictView { dict, view: view @ (DictView::Keys | DictView::Items), .. } => {
                match literal_keys(&dict.borrow(), *view == DictView::Items)? {
                    Some(real) => Some(real.call_method0(view.method())?),
                    None => None,
                }
            }
            VT::Set(s) => Some(s.borrow().bind(py).clone()),
            VT::Constant(c) => Some(c.bind(py).clone()),
            VT::Dict(d) => literal_keys(&d.borrow(), false)?.map(|d| d.into_any()),
            VT::List(l) => match literal_items(py, &l.borrow().items) {
                Some(items) => Some(pyo3::types::PyList::new(py, items)?.into_any()),
                None => None,
            },
            VT::Tuple(items) => match literal_items(py, items) {
                Some(items) => Some(pyo3::types::PyTuple::new(py, items)?.into_any()),
                None => None,
            },
            _ => None,
        })
    }

    /// `a op b` (`operator.<name>`: `and_`, `or_`, `sub`, `xor`, their in-place forms, or a
    /// comparison) where an operand is a keys or items view (Note [dict view set operations]):
    /// the real operation on the real stand-ins. `None` when an operand is not made real (the
    /// caller goes on as before). A new set is a new set tracker; an operand's own real set
    /// (a set's in-place operator) is that operand; a bool, its constant.
    pub(crate) fn dict_view_operator(&mut self, py: Python<'_>, name: &str, a: &VT, b: &VT) -> VResult<Option<VT>> {
        let is_view = |v: &VT| matches!(v, VT::DictView { view: DictView::Keys | DictView::Items, .. });
        if !(is_view(a) || is_view(b)) {
            return Ok(None);
        }
        let (Some(ra), Some(rb)) = (self.view_operand(py, a)?, self.view_operand(py, b)?) else { return Ok(None) };
        let f = self.og.handles.operator.bind(py).getattr(name)?;
        let r = f.call1((&ra, &rb))?;
        if let VT::Set(s) = a {
            if r.is(s.borrow().bind(py)) {
                return Ok(Some(a.clone()));
            }
        }
        Ok(Some(match type_name(&r).as_str() {
            "set" => VT::Set(Rc::new(RefCell::new(r.unbind()))),
            "bool" => VT::constant(r.unbind()),
            other => graph_break!(UnsupportedOperation, "dict view operation {name} gave a {other}"),
        }))
    }

    pub(crate) fn dict_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<(String, VT)>> {
        match v {
            VT::Dict(d) => d.borrow().items.iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v.clone()))).collect(),
            VT::Constant(c) => {
                let d = c.bind(py).cast::<PyDict>().map_err(|e| Unsupported::new(e.to_string()))?.clone();
                d.iter().map(|(k, v)| Ok((k.extract::<String>()?, VT::constant(v.unbind())))).collect()
            }
            // `f(**o)` for a dict subclass object merges it as `dict(o)` does.
            VT::UserObject(o) if o.storage.is_some() => self.mapping_items(py, v)?.into_iter().map(|(k, v)| Ok((k.bind(py).extract::<String>()?, v))).collect(),
            _ => graph_break!(UnsupportedOperation, "** of {}", v.describe(py)),
        }
    }
}

pub fn new_dict(items: Vec<(Py<PyAny>, VT)>) -> VT {
    VT::Dict(Rc::new(RefCell::new(DictState::new(items, None))))
}

/// A new dict tracker holding `pairs` inserted in order, as `PyDict_SetItem` inserts them (a
/// dict display, `_PyDict_FromItems`; `dict(mapping, **kw)`): a key equal to an earlier one
/// (`1` and `1.0`, `x.shape` and `(3,)`) keeps the earlier key object and takes the later value.
pub(crate) fn dict_from_pairs(py: Python<'_>, pairs: impl IntoIterator<Item = (Py<PyAny>, VT)>) -> VResult<VT> {
    let mut st = DictState::new(Vec::new(), None);
    for (k, v) in pairs {
        dict_set(py, &mut st, k, v)?;
    }
    Ok(new_dict(st.items))
}

/// The position of key `k` among a dict tracker's items (`lookdict`: `same_key`), if present.
pub(crate) fn key_position(py: Python<'_>, d: &DictState, k: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    for (i, (key, _)) in d.items.iter().enumerate() {
        if crate::symbolic::variables::same_key(key.bind(py), k)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

pub(crate) fn dict_set(py: Python<'_>, d: &mut DictState, k: Py<PyAny>, v: VT) -> VResult<()> {
    for (key, val) in d.items.iter_mut() {
        if crate::symbolic::variables::same_key(key.bind(py), k.bind(py))? {
            *val = v;
            return Ok(());
        }
    }
    d.key_changed(py, KEY_INSERT, Some(&k));
    d.items.push((k, v));
    Ok(())
}

/// The values of `items` when every one is a literal constant.
fn literal_items<'py>(py: Python<'py>, items: &[VT]) -> Option<Vec<Bound<'py, PyAny>>> {
    items
        .iter()
        .map(|i| match i {
            VT::Constant(c) if crate::symbolic::builder::is_literal(py, c.bind(py)) => Some(c.bind(py).clone()),
            _ => None,
        })
        .collect()
}
