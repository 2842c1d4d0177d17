//! `Source`: where a value the compiled frame depends on comes from, as plain data.
//!
//! Invariant: a `Source` is a value type. Emitting bytecode that loads it
//! (`pycodegen::emit_source_load`) and fetching it when guards run (`guards::GuardManager`) both
//! match on this enum elsewhere. The `Display` form is an eval-able name in torch's spelling
//! (`L['self'].fc.weight`, `G['torch']`, `L['xs'][0]`), reused in guard dumps, logs and errors.

use std::fmt;
use std::sync::Arc;

/// A constant subscript key, as used by `GetItem`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ItemKey {
    Int(i64),
    Str(String),
    /// Any other hashable key whose equality is its identity or its value (a class: dicts
    /// keyed by types such as `copy._deepcopy_dispatch`; `None`, a float, a tuple of literals):
    /// the key object itself is kept and loaded as a constant.
    Object(KeyObject),
}

impl ItemKey {
    /// The key as a Python object (an int, a str, or the kept key object).
    pub fn to_object(&self, py: pyo3::Python<'_>) -> pyo3::Py<pyo3::PyAny> {
        use pyo3::IntoPyObject;
        match self {
            ItemKey::Int(i) => i.into_pyobject(py).expect("int").into_any().unbind(),
            ItemKey::Str(s) => pyo3::types::PyString::new(py, s).into_any().unbind(),
            ItemKey::Object(k) => k.obj.clone_ref(py),
        }
    }
}

/// A dict key object held by a source. Two `KeyObject`s are the same key when they are the
/// same object (the source stays a value type; equal-valued distinct objects only make two
/// sources that load the same item).
#[derive(Clone)]
pub struct KeyObject {
    pub obj: Arc<pyo3::Py<pyo3::PyAny>>,
    /// `repr(obj)`, for `Display` and `Debug` without the GIL.
    pub repr: String,
}

impl KeyObject {
    /// Keeps `obj` as a key.
    pub fn new(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> Self {
        use pyo3::prelude::*;
        let repr = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "<key>".to_string());
        KeyObject { obj: Arc::new(obj.clone().unbind()), repr }
    }
}

impl PartialEq for KeyObject {
    fn eq(&self, other: &Self) -> bool {
        self.obj.as_ptr() == other.obj.as_ptr()
    }
}

impl Eq for KeyObject {}

impl std::hash::Hash for KeyObject {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.obj.as_ptr() as usize).hash(state)
    }
}

impl fmt::Debug for KeyObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.repr)
    }
}

/// Provenance of a value: how to reach it again from the frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A fast local at frame entry (an argument), by name and `localsplus` index.
    Local { name: String, idx: u32 },
    /// A free variable of the frame's function: `func.__closure__[idx].cell_contents`.
    /// `slot` is its `localsplus` index, for `LOAD_DEREF` in 3.11.
    Closure { name: String, idx: u32, slot: u32 },
    /// `f_globals[name]`, falling back to `f_builtins[name]`.
    Global { name: String },
    /// `getattr(base, attr)`.
    Attr { base: Arc<Source>, attr: String },
    /// `base[key]`.
    GetItem { base: Arc<Source>, key: ItemKey },
    /// The sequence a list or tuple iterator walks: `base.__reduce__()[1][0]`.
    IterSeq { base: Arc<Source> },
    /// The item `index` places ahead in the tuple, list or range iterator `base`, read without
    /// consuming it (`dynamo._polyfills.iter_peek(base, index)`; Note [items of iterators from
    /// outside the frame] in `builder.rs`).
    IterItem { base: Arc<Source>, index: usize },
    /// An imported module: `sys.modules[name]` (a function's `import` statement).
    Module { name: String },
    /// `object.__getattribute__(base, attr)`: the generic attribute lookup, bypassing a class's
    /// own `__getattribute__` (which reloading through it would run, possibly recursing into
    /// the very frame being compiled).
    GenericAttr { base: Arc<Source>, attr: String },
    /// `base()`, where `base` is exactly a `weakref.ref`: its referent, or None once it is dead
    /// (Note [calling a weak reference] in src/symbolic/object_protocol.rs).
    WeakRefCall { base: Arc<Source> },
    /// `dict.__getitem__(base, key)`: an item of the dict storage of a `dict` or `OrderedDict`
    /// subclass instance, read past the class's own `__getitem__` (transformers' `ModelOutput`
    /// builds a dict of its items on each `o[k]`; a guard or an input load must run no user
    /// code). Note [dict subclass storage] in src/symbolic/variables/user_defined.rs.
    DictItem { base: Arc<Source>, key: ItemKey },
    /// Key `index` of dict `base` in its iteration order (`dynamo._polyfills.dict_key_at(base,
    /// index)`): a tensor key of a dict from outside the frame (Note [tensor dict keys] in
    /// src/symbolic/variables/dicts.rs), whose identity the dict's DICT_KEYS guard pins.
    DictKey { base: Arc<Source>, index: usize },
}

impl Source {
    /// `getattr(self, attr)` as a new source.
    pub fn attr(self: &Arc<Self>, attr: &str) -> Arc<Source> {
        Arc::new(Source::Attr { base: self.clone(), attr: attr.to_string() })
    }

    /// `object.__getattribute__(self, attr)` as a new source.
    pub fn generic_attr(self: &Arc<Self>, attr: &str) -> Arc<Source> {
        Arc::new(Source::GenericAttr { base: self.clone(), attr: attr.to_string() })
    }

    /// `self[key]` as a new source.
    pub fn item(self: &Arc<Self>, key: ItemKey) -> Arc<Source> {
        Arc::new(Source::GetItem { base: self.clone(), key })
    }

    /// `dict.__getitem__(self, key)` as a new source (Source::DictItem).
    pub fn dict_item(self: &Arc<Self>, key: ItemKey) -> Arc<Source> {
        Arc::new(Source::DictItem { base: self.clone(), key })
    }

    /// The innermost base of the chain (a local, closure cell or global).
    pub fn root(&self) -> &Source {
        match self {
            Source::Attr { base, .. } | Source::GetItem { base, .. } | Source::IterSeq { base } | Source::IterItem { base, .. } | Source::GenericAttr { base, .. } | Source::WeakRefCall { base } | Source::DictItem { base, .. } | Source::DictKey { base, .. } => base.root(),
            other => other,
        }
    }
}

/// `sys.modules[name]`, if that module is imported.
pub fn imported_module(py: pyo3::Python<'_>, name: &str) -> Option<pyo3::Py<pyo3::PyAny>> {
    use pyo3::prelude::*;
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    modules.get_item(name).ok().map(|m| m.unbind())
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Local { name, .. } => write!(f, "L['{name}']"),
            Source::Closure { name, .. } => write!(f, "L['{name}']"),
            Source::Global { name } => write!(f, "G['{name}']"),
            Source::Attr { base, attr } => {
                if attr.chars().all(|c| c.is_alphanumeric() || c == '_') && !attr.starts_with(|c: char| c.is_ascii_digit()) {
                    write!(f, "{base}.{attr}")
                } else {
                    write!(f, "getattr({base}, '{attr}')")
                }
            }
            Source::GetItem { base, key: ItemKey::Int(i) } => write!(f, "{base}[{i}]"),
            Source::GetItem { base, key: ItemKey::Str(s) } => write!(f, "{base}['{s}']"),
            Source::GetItem { base, key: ItemKey::Object(k) } => write!(f, "{base}[{}]", k.repr),
            Source::IterSeq { base } => write!(f, "{base}.__reduce__()[1][0]"),
            Source::IterItem { base, index } => write!(f, "iter_peek({base}, {index})"),
            Source::Module { name } => write!(f, "sys.modules['{name}']"),
            Source::GenericAttr { base, attr } => write!(f, "object.__getattribute__({base}, '{attr}')"),
            Source::WeakRefCall { base } => write!(f, "{base}()"),
            Source::DictItem { base, key: ItemKey::Int(i) } => write!(f, "dict.__getitem__({base}, {i})"),
            Source::DictItem { base, key: ItemKey::Str(s) } => write!(f, "dict.__getitem__({base}, '{s}')"),
            Source::DictItem { base, key: ItemKey::Object(k) } => write!(f, "dict.__getitem__({base}, {})", k.repr),
            Source::DictKey { base, index } => write!(f, "list({base}.keys())[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_torch_spelling() {
        let s = Arc::new(Source::Local { name: "self".into(), idx: 0 });
        assert_eq!(s.attr("fc").attr("weight").to_string(), "L['self'].fc.weight");
        assert_eq!(s.attr("layer1").attr("0").to_string(), "getattr(L['self'].layer1, '0')");
        let g = Arc::new(Source::Global { name: "xs".into() });
        assert_eq!(g.item(ItemKey::Int(2)).to_string(), "G['xs'][2]");
        assert_eq!(g.item(ItemKey::Str("k".into())).to_string(), "G['xs']['k']");
    }
}
