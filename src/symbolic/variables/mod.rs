//! `VariableTracker`: the symbolic value of every stack slot and local during tracing.
//!
//! A closed enum. Immutable Python values are `Constant`s (operations on them are folded by
//! running the real operation); tensors are graph nodes carrying a fake example value; containers
//! built during tracing hold trackers. Trackers that came from the frame carry the `Source` they
//! were read from (which is also what guards were installed on).
//!
//! The enum and its common helpers live here; each family's state types and the translator's
//! methods for that family live in one file per family (the layout of torch/_dynamo/variables/),
//! re-exported here so that `variables::ListState` and the like keep one path.

pub mod arity;
pub mod builtin;
pub mod constant;
pub mod ctx_manager;
pub mod deque;
pub mod descriptors;
pub mod dicts;
pub mod exceptions;
pub mod functions;
pub mod hooks;
pub mod iter;
pub mod lists;
pub mod nn_module;
pub mod tensor;
pub mod tensor_subclass;
pub mod user_defined;

use crate::source::Source;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub use self::tensor::{TensorVariable, SymNodeVariable, specialize_sym, is_sym};
pub use self::dicts::{DictView, DictState};
pub use self::iter::{IterKind, IterRequest, GeneratorFrame, IterError, ResumeGenerator, IteratorState, borrow_iter};
pub use self::lists::{ListState, is_named_tuple_class, namedtuple_constructor, named_tuple_field, tuple_of};
pub use self::functions::{NestedFunction};

/// The symbolic value of a Python object.
#[derive(Clone)]
pub enum VariableTracker {
    /// CPython's NULL stack marker (PUSH_NULL, LOAD_GLOBAL with the push-null bit).
    Null,
    /// The NULL that LOAD_METHOD (3.12/3.13: LOAD_ATTR with the method bit) pushes with a
    /// method: its pair is always consumed by CALL, never by CALL_FUNCTION_EX, which needs a
    /// real NULL below one callable (Note [methods of builtin types at a break]).
    MethodNull,
    /// An immutable Python value (None, bool, int, float, str, tuple of such, dtype, device,
    /// torch.Size, slice, ...). Operations on constants are folded by running them.
    Constant(Rc<Py<PyAny>>),
    Tensor(Rc<TensorVariable>),
    /// A symbolic size or a number computed from one (see `SymNodeVariable`).
    SymNum(Rc<SymNodeVariable>),
    Tuple(Rc<Vec<VariableTracker>>),
    /// An instance of a tuple subclass with named fields: a `torch.return_types.*` structseq
    /// (what `max(dim)`, `sort`, `topk`, ... return) or a `collections.namedtuple` class. It
    /// behaves as a tuple and comes back out of the graph as `cls`.
    NamedTuple { cls: Rc<Py<PyAny>>, items: Rc<Vec<VariableTracker>> },
    List(Rc<RefCell<ListState>>),
    /// A `collections.deque` (Note [deques] in `variables/deque.rs`): a list state whose
    /// `deque` holds its `maxlen`.
    Deque(Rc<RefCell<ListState>>),
    Dict(Rc<RefCell<DictState>>),
    /// `d.keys()`, `d.values()` or `d.items()`: a live view of a dict tracker. `ordered`: a
    /// view of an `OrderedDict`'s storage (`odict_keys` and siblings, whose iterators are
    /// `odict_iterator`s; not rebuilt).
    DictView { dict: Rc<RefCell<DictState>>, view: DictView, ordered: bool },
    /// An `nn.Module` instance reached from the frame (identity-guarded).
    Module { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A user Python function: calls are inlined.
    Function { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A function created during tracing (MAKE_FUNCTION); calls are inlined.
    NestedFunction(Rc<NestedFunction>),
    /// A bound method: `func` is inlined with `self_` as its first argument.
    Method { func: Box<VariableTracker>, self_: Box<VariableTracker> },
    /// A `torch.*` / `torch.nn.functional.*` callable: calls become graph nodes.
    TorchFunction(Rc<Py<PyAny>>),
    /// A method of a tensor, not yet called (`x.add`): calls become `call_method` nodes.
    TensorMethod { tensor: Rc<TensorVariable>, name: String },
    /// A Python builtin we model (len, isinstance, range, ...), or a type used as a value.
    Builtin(Rc<Py<PyAny>>),
    /// A class (a `type`): used in isinstance checks, or called when constructing constants.
    Class(Rc<Py<PyAny>>),
    /// A Python module object (torch, math, torch.nn.functional, ...).
    PyModule { obj: Rc<Py<PyAny>>, source: Option<Arc<Source>> },
    /// A method of a list or dict tracker (`xs.append`, `d.items`), not yet called.
    ContainerMethod { container: Box<VariableTracker>, name: String },
    Iterator(Rc<RefCell<IteratorState>>),
    /// A value from the frame that tracing does not model (a user object, a set, a generator,
    /// ...). It may be stored, passed around and returned; any other use is unsupported and
    /// becomes a graph break. Guarded by TYPE_MATCH only, since nothing else about it was read.
    Opaque { obj: Rc<Py<PyAny>>, source: Arc<Source> },
    /// An instance of a plain Python class (a dataclass included) created during tracing
    /// (see `variables/user_defined.rs`): its attributes live in the tracker.
    UserObject(Rc<crate::symbolic::variables::user_defined::UserObject>),
    /// A `functools.partial` (see `variables/functions.rs`): calls are the call of its function.
    Partial(Rc<crate::symbolic::variables::functions::PartialFunction>),
    /// A set built during tracing whose members are literals, kept as a private real `set`
    /// (it cannot be seen outside the frame until it is rebuilt).
    Set(Rc<RefCell<Py<PyAny>>>),
    /// `torch.no_grad()`, `torch.enable_grad()` or `torch.set_grad_enabled(flag)`: a grad-mode
    /// context manager. `set_on_create` is true for set_grad_enabled, which switches the mode
    /// when it is constructed (torch/autograd/grad_mode.py); `prev` is the mode before that.
    /// `source`: where a real object from outside the frame is reached (it may have been
    /// entered already, holding the `prev` its `__exit__` restores: rebuilt as itself).
    GradModeCtx { enabled: bool, set_on_create: bool, prev: bool, source: Option<std::sync::Arc<crate::source::Source>> },
    /// The `__exit__` of a grad-mode context pushed by BEFORE_WITH: restores `restore`.
    GradModeExit { restore: bool },
    /// `torch.inference_mode(mode)` (Note [inference-mode blocks] in `python/dynamo/_amp.py`).
    InferenceModeCtx { mode: bool },
    /// The `__exit__` of an inference-mode block pushed by BEFORE_WITH: leaves the block.
    InferenceModeExit,
    /// `torch.autocast(...)` (or a subclass: `torch.cpu.amp.autocast`) built in the frame, and
    /// the value a `with ... as` block over it binds (Note [autocast blocks]).
    AutocastCtx(Rc<crate::symbolic::variables::ctx_manager::AutocastMode>),
    /// The `__exit__` of an autocast block pushed by BEFORE_WITH: leaves the block, putting back
    /// the state from before it.
    AutocastExit(Rc<crate::symbolic::variables::ctx_manager::AutocastRestore>),
    /// A `@contextlib.contextmanager` manager made in the frame: its generator, and whether it
    /// was entered (Note [generator context managers]).
    GeneratorCtx(Rc<RefCell<crate::symbolic::variables::ctx_manager::GeneratorCtx>>),
    /// The `__exit__` of a generator context manager's block: steps its generator to its end.
    GeneratorCtxExit(Rc<RefCell<crate::symbolic::variables::ctx_manager::GeneratorCtx>>),
    /// `torch._C.DisableTorchFunctionSubclass()` (or `DisableTorchFunction()`), and once
    /// entered its `__exit__` (Note [tensor subclasses] in `tensor_subclass.rs`). `all`:
    /// `DisableTorchFunction`, which also disables torch function modes.
    TorchFunctionCtx { entered: bool, all: bool },
    /// A local that is a cell (MAKE_CELL / COPY_FREE_VARS): the tracker it currently holds.
    Cell(Rc<RefCell<Option<VariableTracker>>>),
    /// `super(cls, obj)`: attribute lookups walk `type(obj).__mro__` after `cls`
    /// (Objects/typeobject.c, `super_getattro`).
    Super { cls: Rc<Py<PyAny>>, obj: Box<VariableTracker> },
    /// `object.__getattribute__` / `object.__setattr__` bound to `obj` (reached through
    /// `super()`): the generic attribute protocol, bypassing the class's override.
    GenericAttr { obj: Box<VariableTracker>, set: bool },
    /// A logging method (`warning`, transformers' `warning_once`, ...) of a `logging.Logger`
    /// reached through a source: calling it with constant arguments is replayed after the
    /// graph (`SideEffects::logger_calls`) instead of run while tracing.
    LoggerMethod { logger: Box<VariableTracker>, name: String },
    /// The `__exit__` of a `with` block over a `threading.Lock`/`RLock` reached through a
    /// source (the `Opaque` lock): calling it records the `release()` replayed after the graph
    /// (Note [lock blocks] in `variables/hooks.rs`).
    LockExit { lock: Box<VariableTracker> },
    /// The `RemovableHandle` of a forward (pre-)hook registered in the trace on a module
    /// reached through a source: the registration, replayed after the graph, and whether the
    /// trace removed it (Note [hooks registered in the trace] in `variables/hooks.rs`).
    HookHandle(Rc<RefCell<hooks::HookRegistration>>),
    /// `globals()` of the code being interpreted: its namespace, read and written as its
    /// global names are (Note [globals() in a trace] in `variables/builtin.rs`).
    Globals(Rc<crate::symbolic::translator::GlobalsInfo>),
}

pub type VT = VariableTracker;

impl VariableTracker {
    pub fn constant(obj: Py<PyAny>) -> VT {
        VT::Constant(Rc::new(obj))
    }

    pub fn none(py: Python<'_>) -> VT {
        VT::constant(py.None())
    }

    /// A short description for error messages and logs.
    pub fn describe(&self, py: Python<'_>) -> String {
        match self {
            VT::Null | VT::MethodNull => "NULL".into(),
            // A user's exception class may define `__repr__` in Python: not run for a message.
            VT::Constant(c) if exceptions::user_exception_type(c.bind(py)).is_some() => format!("constant {}{}", type_name(c.bind(py)), exceptions::exception_text(c.bind(py))),
            VT::Constant(c) => format!("constant {}", c.bind(py).repr().map(|r| r.to_string()).unwrap_or_default()),
            VT::Tensor(t) => format!("tensor {}", t.node),
            VT::SymNum(s) => format!("symbolic number {} = {}", s.node, s.fake.bind(py).str().map(|r| r.to_string()).unwrap_or_default()),
            VT::Tuple(_) => "tuple".into(),
            VT::NamedTuple { cls, .. } => qualname(cls.bind(py)),
            VT::DictView { view, .. } => format!("dict_{}", view.method()),
            VT::List(_) => "list".into(),
            VT::Deque(_) => "deque".into(),
            VT::Dict(_) => "dict".into(),
            VT::Module { obj, .. } => format!("module {}", type_name(obj.bind(py))),
            VT::Function { obj, .. } => format!("function {}", qualname(obj.bind(py))),
            VT::NestedFunction(f) => format!("function {}", f.qualname),
            VT::Method { func, .. } => format!("method {}", func.describe(py)),
            VT::TorchFunction(f) => format!("torch function {}", qualname(f.bind(py))),
            VT::TensorMethod { name, .. } => format!("Tensor.{name}"),
            VT::Builtin(b) => format!("builtin {}", qualname(b.bind(py))),
            VT::Class(c) => format!("class {}", qualname(c.bind(py))),
            VT::PyModule { obj, .. } => format!("module {}", qualname(obj.bind(py))),
            VT::ContainerMethod { name, .. } => format!("container method {name}"),
            VT::Iterator(_) => "iterator".into(),
            VT::GradModeCtx { enabled, .. } => format!("grad mode context ({enabled})"),
            VT::GradModeExit { .. } => "grad mode context exit".into(),
            VT::InferenceModeCtx { mode } => format!("inference mode context ({mode})"),
            VT::InferenceModeExit => "inference mode context exit".into(),
            VT::GeneratorCtx(_) => "generator context manager".into(),
            VT::GeneratorCtxExit(_) => "generator context manager exit".into(),
            VT::AutocastCtx(m) => format!("autocast context ({:?})", m.device),
            VT::AutocastExit(r) => format!("autocast context exit ({:?})", r.device),
            VT::TorchFunctionCtx { entered, all } => format!("DisableTorchFunction{}{}", if *all { "" } else { "Subclass" }, if *entered { " exit" } else { "" }),
            VT::Set(s) => type_name(s.borrow().bind(py)),
            VT::Partial(p) => format!("functools.partial of {}", p.func.describe(py)),
            VT::UserObject(o) => format!("{} object built in the frame", qualname(o.cls.bind(py))),
            VT::Opaque { obj, .. } => format!("{} object", type_name(obj.bind(py))),
            VT::Cell(_) => "cell".into(),
            VT::Super { cls, .. } => format!("super({})", qualname(cls.bind(py))),
            VT::GenericAttr { set, .. } => (if *set { "object.__setattr__" } else { "object.__getattribute__" }).into(),
            VT::LoggerMethod { name, .. } => format!("Logger.{name}"),
            VT::LockExit { lock } => format!("{}.__exit__", lock.describe(py)),
            VT::HookHandle(_) => "RemovableHandle of a hook registered in the frame".into(),
            VT::Globals(_) => "globals()".into(),
        }
    }

    /// The Python value of a constant, if this is one. A symbolic number is specialized to its
    /// example value: `int(sym)` / `float(sym)` records the guard `sym == value` in the
    /// `ShapeEnv`, so the code that reads the value stays valid exactly while the guard holds.
    pub fn as_constant<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match self {
            VT::Constant(c) => Some(c.bind(py).clone()),
            VT::SymNum(s) => specialize_sym(s.fake.bind(py)).ok(),
            _ => None,
        }
    }

    /// The Python object this tracker stands for as a dict key or in an identity test: a
    /// constant's value, or a class or builtin (hashed and compared by identity,
    /// `builder::is_identity_key`; classes and builtins are identity-guarded where they come
    /// from). `None` for everything else (mutable or untracked values).
    pub fn as_key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match self {
            // A torch function or Python function too (`HANDLED_FUNCTIONS[func]` in a
            // `__torch_function__`): hashed and compared by identity, which its wrap guards.
            VT::Class(c) | VT::Builtin(c) | VT::TorchFunction(c) | VT::Function { obj: c, .. } => {
                let b = c.bind(py);
                crate::symbolic::builder::is_identity_key(py, b).then(|| b.clone())
            }
            _ => self.as_constant(py).or_else(|| self.as_enum_member(py)),
        }
    }

    /// The real member of an enum class this tracker stands for, identity-guarded where it was
    /// wrapped (Note [enum members] in `builder.rs`); `None` for anything else.
    pub fn as_enum_member<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match self {
            VT::Opaque { obj, .. } if crate::symbolic::builder::is_plain_enum_member(py, obj.bind(py)) => Some(obj.bind(py).clone()),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, VT::Null | VT::MethodNull)
    }
}


pub fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

pub fn qualname(o: &Bound<'_, PyAny>) -> String {
    // Read past any `__getattr__` (a module's PEP 562 hook would be user code run for a name).
    crate::guards::generic_getattr(o, "__qualname__")
        .or_else(|| crate::guards::generic_getattr(o, "__name__"))
        .and_then(|n| n.extract::<String>().ok())
        .unwrap_or_else(|| type_name(o))
}

/// Note [identity before equality]: `PyObject_RichCompareBool(a, b, Py_EQ)` (Objects/object.c)
/// answers true for identical objects before asking `__eq__`, and that, not `a == b`, is what
/// dict lookups (`d[k]`, `k in d`, `d[k] = v` finding the slot), `in` over sequences,
/// `list.count`/`index`/`remove` and list, tuple and dict comparisons decide with. It differs from
/// `==` only for objects unequal to themselves: a NaN key finds itself (`d[nan] = 1; d[nan] = 2`
/// leaves one item, `nan in [nan]` and `[nan] == [nan]` are true). The operator `==` itself on two
/// constants is folded by the real operation and keeps `nan == nan` false.
///
/// The identity-then-equality comparison of two constants (dict keys, items of trackers).
pub fn same_or_equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(a.is(b) || a.eq(b)?)
}

/// Whether two dict keys are the same key, as `lookdict` (Objects/dictobject.c) decides: the
/// same object, or equal hashes and then `==` (never asked for keys whose hashes differ: a
/// `FakeId` or a `TracedKey` meets other keys only by hash).
pub fn same_key(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
    if a.is(b) {
        return Ok(true);
    }
    Ok(a.hash()? == b.hash()? && a.eq(b)?)
}

/// Note [type names in messages]: CPython's messages name a type by its C `tp_name`
/// (`"'%.100s' object has no attribute '%U'"`, Objects/object.c): for a class statement that is
/// its `__name__`, never its `__qualname__` (`'Inner'`, not `'Outer.Inner'`); for a C type it is
/// the dotted name it was defined with (`'collections.OrderedDict'`, `'torch._C.Generator'`),
/// where `__name__` drops the module.
///
/// The `tp_name` of type `ty` (for a non-type, `type_name` of it).
pub fn tp_name(ty: &Bound<'_, PyAny>) -> String {
    match ty.cast::<pyo3::types::PyType>() {
        // SAFETY: `ty` is a live type object; `tp_name` is a NUL-terminated string it owns.
        Ok(t) => unsafe { std::ffi::CStr::from_ptr((*t.as_type_ptr()).tp_name) }.to_string_lossy().into_owned(),
        Err(_) => type_name(ty),
    }
}

/// CPython's `AttributeError` message for a missing attribute `name` of an instance of `ty`
/// (`PyObject_GenericGetAttr`, Note [type names in messages]).
pub fn no_attribute_message(ty: &Bound<'_, PyAny>, name: &str) -> String {
    let shown: String = tp_name(ty).chars().take(100).collect();
    format!("'{shown}' object has no attribute '{name}'")
}

/// The AttributeError message of an empty `__slots__` member of an instance of `ty`
/// (Python/structmember.c, `PyMember_GetOne`): the type's `tp_name` up to CPython 3.12; from
/// 3.13 its fully qualified name (`%T`: `module.qualname`, without `builtins` or `__main__`).
pub fn empty_slot_message(ty: &Bound<'_, PyAny>, name: &str) -> String {
    let py = ty.py();
    if py.version_info() < (3, 13) {
        return no_attribute_message(ty, name);
    }
    let text = |a: &str| ty.getattr(a).ok().and_then(|v| v.extract::<String>().ok()).unwrap_or_default();
    let (module, qualname) = (text("__module__"), text("__qualname__"));
    let shown = if module.is_empty() || module == "builtins" || module == "__main__" { qualname } else { format!("{module}.{qualname}") };
    format!("'{shown}' object has no attribute '{name}'")
}

/// Whether `obj`'s class is torch's own: defined in the module `torch` or one of its
/// submodules (not `torchvision` or `torchaudio`, whose classes are user code to the trace).
/// A class without a module counts as torch's (left to Python).
pub(crate) fn class_is_torchs(obj: &Bound<'_, PyAny>) -> bool {
    obj.get_type().module().map(|m| {
        let m = m.to_string();
        m == "torch" || m.starts_with("torch.")
    }).unwrap_or(true)
}
