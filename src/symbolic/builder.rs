//! `VariableBuilder`: turns a real Python value reached through a `Source` into a
//! `VariableTracker`, installing the guards that make that view of it valid.
//!
//! What each kind of value is guarded on:
//! - tensors: TENSOR_MATCH, and they become graph inputs (placeholders);
//! - nn.Module instances: TYPE_MATCH, their attributes guarded as read (Note [modules guarded by type]);
//! - functions, modules, classes, builtins: ID_MATCH (closures by code: Note [closure guards]);
//! - literals (None, bool, int, float, str, tuples of literals, dtypes, devices, sizes): CONSTANT_MATCH;
//! - tuples and lists of other values: TYPE_MATCH + LENGTH_CHECK, items wrapped with `[i]` sources.

use crate::guards::GuardKind;
use crate::source::{ItemKey, Source};
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::variables::{type_name, DictState, ListState, VT};
use crate::symbolic::VResult;
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Note [append-only lists]: `value`, an exact `list` reached through `source` by code that only
/// appends to it (an argument slot in `CodeInfo::append_only_slots`, a global name in
/// `CodeInfo::append_only_globals`), wrapped without reading its length or items: a TYPE_MATCH
/// guard only. The list's tracker when one exists is returned as it is (an append-only site
/// does not read what another path wrapped).
pub(crate) fn wrap_append_only_list(og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VT {
    if let Some((_, state)) = og.lists_by_ptr.get(&(value.as_ptr() as usize)) {
        return VT::List(state.clone());
    }
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
    let state = Rc::new(RefCell::new(ListState { entry_len: 0, items: vec![], source: Some(source.clone()), append_only: true, deque: None, owner: None, subclass_storage: false }));
    og.lists_by_ptr.insert(value.as_ptr() as usize, (source, state.clone()));
    VT::List(state)
}

/// Whether `source` names a slot of the converted frame that its code only appends to
/// (`CodeInfo::append_only_slots`): an argument, a free variable, or the contents of a cell a
/// resume function receives.
fn append_only_source(og: &OutputGraph, source: &Source) -> bool {
    match source {
        Source::Local { idx, .. } | Source::Closure { slot: idx, .. } => og.append_only_slots.contains(idx),
        Source::Attr { base, attr } if attr == "cell_contents" => matches!(base.as_ref(), Source::Local { idx, .. } if og.append_only_slots.contains(idx)),
        _ => false,
    }
}

/// Note [append-only lists]: a list first wrapped as one the frame only appends to, reached
/// again another way (another argument that is the same list, an iterator over it), may now
/// have its items read: wrap them as a plain list from the frame would be (LENGTH_CHECK, each
/// item through `[i]`), in the same tracker, ahead of what the trace appended so far. `value` is
/// the list itself (the trace has not changed it: writes are replayed after the graph).
fn realize_append_only(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, state: &Rc<RefCell<ListState>>) -> VResult<()> {
    let source = {
        let mut st = state.borrow_mut();
        if !st.append_only {
            return Ok(());
        }
        st.append_only = false;
        st.source.clone().expect("an append-only list comes from the frame")
    };
    let l = value.cast::<PyList>().map_err(|e| crate::symbolic::Unsupported::new(e.to_string()))?;
    og.add_guard(Some(source.clone()), GuardKind::LenMatch(l.len()));
    let entry = l.iter().enumerate().map(|(i, item)| wrap(py, og, &item, source.item(ItemKey::Int(i as i64)))).collect::<VResult<Vec<_>>>()?;
    let mut st = state.borrow_mut();
    st.entry_len = entry.len();
    let appended = std::mem::replace(&mut st.items, entry);
    st.items.extend(appended);
    Ok(())
}

/// Is `v` an immutable literal we treat as a constant (None, bool, int, float, complex, str,
/// bytes, Ellipsis, slice of literals, torch.dtype/device/Size/layout/memory_format, or a tuple
/// of literals)?
/// A tuple or frozenset nested more than `MAX_LITERAL_DEPTH` levels deep is not a literal (Note
/// [deep values] in convert_frame.rs): the checks and guards that walk a literal recurse once
/// per level, and a 30 000-deep `t = (t, 1)` exhausted the C stack.
pub fn is_literal(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    is_literal_within(py, v, 0)
}

const MAX_LITERAL_DEPTH: usize = 64;

fn is_literal_within(py: Python<'_>, v: &Bound<'_, PyAny>, depth: usize) -> bool {
    if v.is_none() || v.is_exact_instance_of::<PyBool>() || v.is_exact_instance_of::<PyInt>() || v.is_exact_instance_of::<PyFloat>() || v.is_exact_instance_of::<PyString>() {
        return true;
    }
    if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyString>() {
        return is_fixed_subclass_instance(py, v);
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return depth < MAX_LITERAL_DEPTH && t.iter().all(|i| is_literal_within(py, &i, depth + 1)) && (t.is_exact_instance_of::<PyTuple>() || is_fixed_subclass_instance(py, v));
    }
    let tn = type_name(v);
    let module = v.get_type().module().map(|m| m.to_string()).unwrap_or_default();
    if tn == "frozenset" {
        return depth < MAX_LITERAL_DEPTH && v.try_iter().map(|it| it.flatten().all(|i| is_literal_within(py, &i, depth + 1))).unwrap_or(false);
    }
    if module == "operator" && matches!(tn.as_str(), "itemgetter" | "attrgetter" | "methodcaller") {
        return operator_getter_parts(py, v).map(|(_, args, kw)| is_literal(py, &args) && is_literal(py, &kw)).unwrap_or(false);
    }
    matches!(tn.as_str(), "ellipsis" | "complex" | "bytes" | "slice" | "NotImplementedType")
        || is_numpy_number(v)
        || (module == "torch" && matches!(tn.as_str(), "dtype" | "device" | "Size" | "layout" | "memory_format" | "finfo" | "iinfo"))
        || is_type_expression(v, &module, &tn)
}

/// Note [numpy scalars]: a numpy integer or float scalar (`np.int64(8)`, `np.float32(2.5)`:
/// immutable C objects of numpy's own types) is a literal: arithmetic on it runs at trace time
/// on the real objects, so results keep numpy's types and overflow rules, and its CONSTANT_MATCH
/// guard compares type and bytes (`guards::same_constant`). Passed to a graph op it is its
/// Python number (`OutputGraph::to_arg`), which torch treats the same way (a wrapped scalar).
/// `np.bool_` is left out: torch promotes it unlike a Python bool (an int32 tensor times
/// `np.bool_(True)` is float32). `np.float64` is a `float` subclass, a literal already.
pub fn is_numpy_number(v: &Bound<'_, PyAny>) -> bool {
    let ty = v.get_type();
    if !ty.module().is_ok_and(|m| m.to_string() == "numpy") {
        return false;
    }
    ty.name().is_ok_and(|n| {
        let n = n.to_string();
        matches!(n.as_str(), "int8" | "int16" | "int32" | "int64" | "uint8" | "uint16" | "uint32" | "uint64" | "float16" | "float32" | "longlong" | "ulonglong" | "longdouble")
    })
}

/// Note [subclasses of literal types]: an instance of a subclass of int, float, str or tuple is
/// a literal (a constant whose methods and operators the trace runs at compile time) only when
/// nothing but C code and the `enum` / `collections.namedtuple` machinery defines its
/// behaviour: a C type (`torch.Size`, a struct sequence), an enum member (`IntEnum`,
/// `StrEnum`, `IntFlag`) or a `namedtuple` class without methods of their own, and without
/// instance attributes. A class that defines a method, property or other Python descriptor
/// (`class RInt(int): def scale(self): ...`, a namedtuple subclass with a method, an
/// `IntEnum` with a method) gives objects whose calls read state and have effects at run time,
/// so they are not folded: such an object is wrapped as any user object (an enum member by
/// identity) and its methods are inlined or run as Python.
///
/// Whether `v` (an instance of a subclass of a literal type) is such a fixed object.
fn is_fixed_subclass_instance(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    (|| -> PyResult<bool> {
        let ty = v.get_type();
        // A static C type (`torch.Size`, `sys.version_info`'s) has C methods only and no
        // instance dict; nothing can be added to it.
        // SAFETY: `ty` is a live type object; `tp_flags` is a field it owns.
        if unsafe { (*ty.as_type_ptr()).tp_flags } & pyo3::ffi::Py_TPFLAGS_HEAPTYPE == 0 {
            return Ok(true);
        }
        // Instance attributes are not guarded by a constant's guard (enum members keep their
        // `_value_` / `_name_` there, set once by the enum machinery).
        // (Any enum member: the enum machinery made it, whatever hooks its class adds.)
        let is_enum = py.import("enum").and_then(|m| m.getattr("EnumMeta")).is_ok_and(|meta| ty.get_type().is_subclass(&meta).unwrap_or(false));
        if !is_enum {
            if let Ok(d) = v.getattr("__dict__") {
                if d.len()? != 0 {
                    return Ok(false);
                }
            }
        }
        let function_type = py.get_type::<pyo3::types::PyFunction>();
        let machinery = |f: &Bound<'_, PyAny>| -> bool {
            let module = f.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            module == "enum" || module == "collections" || module.starts_with("namedtuple_")
        };
        for cls in ty.getattr("__mro__")?.cast_into::<PyTuple>().map_err(PyErr::from)?.iter() {
            let module = cls.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
            if module == "builtins" || module == "enum" {
                continue;
            }
            let d = cls.getattr("__dict__")?;
            for pair in d.call_method0("items")?.try_iter()? {
                let (name, item): (String, Bound<'_, PyAny>) = pair?.extract()?;
                // Hooks the enum machinery calls on the class, never on a member's value
                // (transformers' `ExplicitEnum._missing_` raises for an unknown value).
                if matches!(name.as_str(), "_missing_" | "_generate_next_value_" | "__init_subclass__" | "__class_getitem__") {
                    continue;
                }
                let inner = match type_name(&item).as_str() {
                    "classmethod" | "staticmethod" => item.getattr("__func__")?,
                    // A C type holding Python getters.
                    "property" => {
                        let getter = item.getattr("fget")?;
                        if getter.is_none() { item.getattr("fset")? } else { getter }
                    }
                    _ => item.clone(),
                };
                let item_type = inner.get_type();
                let python_descriptor = item_type.is_subclass(&function_type)?
                    || ((item_type.hasattr("__get__")? || item_type.hasattr("__set__")?) && item_type.getattr("__flags__")?.extract::<u64>()? & (1 << 9) != 0);
                if python_descriptor && !machinery(&inner) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    })()
    .unwrap_or(false)
}

/// `(kind, args, kwarg_pairs)` of an `operator.itemgetter` / `attrgetter` / `methodcaller`
/// (`dynamo._polyfills.operator_getter_parts`): immutable once made, so one whose arguments
/// are literals is a literal itself, and calling it is traced as its Python equivalent.
pub fn operator_getter_parts<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<(String, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let parts = py.import("dynamo._polyfills")?.getattr("operator_getter_parts")?.call1((v,))?;
    Ok((parts.get_item(0)?.extract()?, parts.get_item(1)?, parts.get_item(2)?))
}

/// Whether `v` is a type expression (`int | None`, `list[int]`, `typing.Optional[int]`,
/// `typing.Literal["a"]`, the special forms `typing.Union` / `typing.Literal`, whose class is
/// `_LiteralSpecialForm` up to 3.12 and `_TypedCacheSpecialForm` on 3.13): immutable
/// objects compared by their contents, read by huggingface_hub's strict dataclass validators
/// through `typing.get_origin` / `get_args`.
fn is_type_expression(v: &Bound<'_, PyAny>, module: &str, tn: &str) -> bool {
    let alias = match module {
        "types" => matches!(tn, "UnionType" | "GenericAlias"),
        "typing" => matches!(tn, "_GenericAlias" | "_UnionGenericAlias" | "_LiteralGenericAlias" | "_SpecialGenericAlias" | "_CallableGenericAlias" | "_CallableType" | "_TupleType" | "_AnnotatedAlias" | "_SpecialForm" | "_LiteralSpecialForm" | "_TypedCacheSpecialForm"),
        _ => false,
    };
    // Exactly those classes (a subclass could add state), and hashable (a `Literal` of a list
    // is not).
    alias && v.get_type().getattr("__module__").map(|m| m.to_string() == module).unwrap_or(false) && v.hash().is_ok()
}

/// Is `f` a callable whose calls belong in the graph (torch.*, torch.nn.functional.*, ...)?
pub fn is_torch_callable(f: &Bound<'_, PyAny>) -> bool {
    let module = f.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    let tn = type_name(f);
    if tn == "function" {
        // `dynamo.allow_in_graph(fn)`: the user asked for one graph node.
        if f.getattr("_dynamo_allow_in_graph").is_ok_and(|v| v.is_truthy().unwrap_or(false)) {
            return true;
        }
        // The methods and helpers of `torch.distributions` are Python over tensors, inlined
        // (Note [torch.distributions as user objects] in `variables/user_defined.rs`).
        return (module == "torch" || module.starts_with("torch."))
            && !module.starts_with("torch.nn.modules")
            && !module.starts_with("torch._dynamo")
            && !module.starts_with("torch.distributions")
            && !is_inlined_torch_function(f, &module)
            && closure_is_stateless(f)
            && !is_contextmanager_factory(f);
    }
    // `torch.ops.ns.op` and `torch.ops.ns.op.overload` (aten's, or a `torch.library` custom
    // op's): one graph node, whose output the op's fake (meta) kernel gives.
    if matches!(tn.as_str(), "OpOverloadPacket" | "OpOverload") && f.get_type().module().is_ok_and(|m| m.to_string() == "torch._ops") {
        return true;
    }
    if tn == "builtin_function_or_method" {
        if module == "torch" || module.starts_with("torch.") {
            return true;
        }
        if let Ok(s) = f.getattr("__self__") {
            let sm = s.getattr("__name__").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
            return sm == "torch" || sm.starts_with("torch.") || type_name(&s).starts_with("_VariableFunctions");
        }
    }
    false
}

/// Note [torch functions traced through]: a Python function of torch is a graph leaf (one
/// node, run by torch), except the compositions named here, whose bodies are traced like user
/// code so that their ops become nodes of their own. `F.multi_head_attention_forward`
/// (nn.MultiheadAttention's training path and any inference path off its fast path) is in-
/// and out-projections around `scaled_dot_product_attention`: as one leaf it had no derivative
/// rule (its backward ran torch's autograd on a recomputation, Note [torch's derivative for
/// rule-less ops]) and nothing fused across it, so ViT and Swin training ran slower than eager.
/// Traced through, its linears and attention get the rules and kernels they have everywhere
/// else, as torch._dynamo does with all of `torch.nn.functional`; its projection helpers too.
const INLINED_TORCH_FUNCTIONS: &[(&str, &str)] = &[
    ("torch.nn.functional", "multi_head_attention_forward"),
    ("torch.nn.functional", "_in_projection_packed"),
    ("torch.nn.functional", "_in_projection"),
];

/// Whether torch function `f` of module `module` is one of Note [torch functions traced through].
fn is_inlined_torch_function(f: &Bound<'_, PyAny>, module: &str) -> bool {
    let Ok(name) = f.getattr("__qualname__").and_then(|n| n.extract::<String>()) else { return false };
    INLINED_TORCH_FUNCTIONS.iter().any(|(m, n)| *m == module && *n == name)
}

/// Is `f` a function made by `@contextlib.contextmanager` (contextlib's `helper` wrapping a
/// generator function)? Each call makes a new `_GeneratorContextManager`, which can be entered
/// only once, so the call is not a torch op whose result may be kept as a constant: it is
/// inlined as Python like a user's `@contextmanager` (`torch.random.fork_rng`,
/// `torch.nn.utils.parametrize.cached`, `torch.backends.cudnn.flags`).
fn is_contextmanager_factory(f: &Bound<'_, PyAny>) -> bool {
    if f.getattr("__wrapped__").is_err() {
        return false;
    }
    let Ok(code) = f.getattr("__code__") else { return false };
    let name = code.getattr("co_name").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
    let file = code.getattr("co_filename").ok().and_then(|n| n.extract::<String>().ok()).unwrap_or_default();
    name == "helper" && std::path::Path::new(&file).file_name().is_some_and(|b| b == "contextlib.py")
}

/// Is `k` a dict key whose equality and hash are its identity: a class whose metaclass keeps
/// `type`'s `__eq__`/`__hash__` (object's: a class is equal only to itself), a plain function
/// or a builtin function (`copy._deepcopy_dispatch`, huggingface_hub's `_BASIC_TYPE_VALIDATORS`
/// and `copyreg.dispatch_table` are keyed by classes)?
pub fn is_identity_key(py: Python<'_>, k: &Bound<'_, PyAny>) -> bool {
    if let Ok(cls) = k.cast::<pyo3::types::PyType>() {
        let meta = cls.get_type();
        let type_type = py.get_type::<pyo3::types::PyType>();
        let same = |name: &str| match (meta.getattr(name), type_type.getattr(name)) {
            (Ok(a), Ok(b)) => a.is(&b),
            _ => false,
        };
        return same("__eq__") && same("__hash__");
    }
    matches!(type_name(k).as_str(), "function" | "builtin_function_or_method")
}

/// Whether a dict from the frame with key `k` can be wrapped item by item (`wrap_dict_storage`):
/// an exact str or int, a hashable literal, or an identity key.
/// Note [module namespaces are not dict trackers]: the globals of a module (`globals()` handed
/// on at a break or as an argument, `mod.__dict__`, `vars(mod)`) are the dict that LOAD_GLOBAL,
/// STORE_GLOBAL and module attribute reads and writes reach through their own sources. A dict
/// tracker of it would hold writes (`globals()["G"] = 7`) that those reads do not see (`G`
/// still answered 0), so such a dict stays an opaque object: item writes on it are a graph
/// break and run for real.
///
/// Whether `d` is a module's namespace: it holds `__builtins__` (every module and frame globals
/// that ran code), or it is the `__dict__` of the module in `sys.modules` it names.
pub fn is_module_namespace(py: Python<'_>, d: &Bound<'_, PyDict>) -> bool {
    if d.contains("__builtins__").unwrap_or(false) {
        return true;
    }
    let Ok(Some(name)) = d.get_item("__name__") else { return false };
    let module = py.import("sys").and_then(|sys| sys.getattr("modules")).and_then(|m| m.get_item(name));
    match module.and_then(|m| m.getattr("__dict__")) {
        Ok(md) => md.is(d),
        Err(_) => false,
    }
}

pub fn is_source_key(py: Python<'_>, k: &Bound<'_, PyAny>) -> bool {
    k.is_exact_instance_of::<PyString>() || k.is_exact_instance_of::<PyInt>() || (is_literal(py, k) && k.hash().is_ok()) || is_identity_key(py, k) || is_plain_enum_member(py, k) || is_tensor_key(k)
}

/// Whether `k` is a tensor that hashes and compares as a dict key by identity (Note [tensor
/// dict keys] in `variables/dicts.rs`): its class keeps `torch.Tensor`'s `__hash__` (`id`) and
/// `__eq__` (a dict compares hashes first, so the elementwise `==` never runs for two distinct
/// live tensors). A subclass that defines either is not.
pub fn is_tensor_key(k: &Bound<'_, PyAny>) -> bool {
    static TENSOR: pyo3::sync::PyOnceLock<Option<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>> = pyo3::sync::PyOnceLock::new();
    let py = k.py();
    let Some((tensor, hash, eq)) = TENSOR
        .get_or_init(py, || {
            let t = py.import("torch").ok()?.getattr("Tensor").ok()?;
            Some((t.clone().unbind(), t.getattr("__hash__").ok()?.unbind(), t.getattr("__eq__").ok()?.unbind()))
        })
        .as_ref()
    else {
        return false;
    };
    let ty = k.get_type();
    ty.is_subclass(tensor.bind(py)).unwrap_or(false)
        && ty.getattr("__hash__").is_ok_and(|h| h.is(hash.bind(py)))
        && ty.getattr("__eq__").is_ok_and(|e| e.is(eq.bind(py)))
}

/// Note [enum members]: a member of an `enum.Enum` class (`Color.RED`, an `IntEnum`'s,
/// a `Flag`'s) is a fixed object: the class makes its members once, and the members'
/// `__hash__`, `__eq__`, `__str__`, `__repr__` and `__format__` are the `enum` module's own or
/// its mixed-in builtin type's (`int`, `str`), which read nothing but the member. Such a
/// member from the frame is identity-guarded where it is wrapped (one compile per member, as
/// torch's ID_MATCH on enum members gives) and is then used by its real object: a dict key
/// (a dict of the frame keyed by members is wrapped item by item), a set member, and the
/// argument of those methods, folded (`str(m)`, `f"{m}"`, `hash(m)`, `int(m)`). Calling
/// the class with a value (`Color(2)`, whose `_missing_` is the `enum` module's) or indexing
/// it by name (`Color["RED"]`) and iterating it give its canonical members, each read as an
/// attribute of the class's source. A class that defines any of those methods itself keeps
/// its members opaque (its own code runs in Python).
///
/// Whether `v` is a member of an enum class that keeps the `enum` module's (or a builtin
/// mixin's) `__hash__`, `__eq__`, `__str__`, `__repr__` and `__format__`: a canonical member,
/// or a `Flag`'s pseudo-member (Note [flag pseudo-members]).
pub fn is_plain_enum_member(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    let ty = v.get_type();
    is_plain_enum_class(py, ty.as_any())
        && ((|| -> PyResult<bool> { Ok(v.is(&ty.getattr(v.getattr("_name_")?.extract::<String>()?.as_str())?)) })().unwrap_or(false) || is_flag_pseudo_member(v))
}

/// Note [flag pseudo-members]: combining members of a `Flag` (`F.A | F.B`, `~F.A`, `F.A & F.C`,
/// `F(3)`) gives a pseudo-member, made once by `Flag._missing_` and kept in the class's
/// `_value2member_map_` under its value (3.11 to 3.13 alike), so later combinations to that value
/// give the same object. Such a member is as fixed as a canonical one and is used the same way
/// (Note [enum members]), read as `cls._value2member_map_[value]` through the class's source.
///
/// Whether `v` is the object its class's `_value2member_map_` holds under `v`'s int value.
pub fn is_flag_pseudo_member(v: &Bound<'_, PyAny>) -> bool {
    (|| -> PyResult<bool> {
        let value = v.getattr("_value_")?;
        if !value.is_exact_instance_of::<PyInt>() {
            return Ok(false);
        }
        let map = v.get_type().getattr("_value2member_map_")?;
        Ok(map.cast::<PyDict>().ok().and_then(|m| m.get_item(&value).ok().flatten()).is_some_and(|m| m.is(v)))
    })()
    .unwrap_or(false)
}

/// Whether `cls` is an enum class (its metaclass derives from `enum.EnumType`) whose members
/// are plain (`is_plain_enum_member`), with the `enum` module's `_missing_` and its
/// metaclass's `__call__`, `__getitem__` and `__iter__` (Note [enum members]).
pub fn is_plain_enum_class(py: Python<'_>, cls: &Bound<'_, PyAny>) -> bool {
    (|| -> PyResult<bool> {
        let enum_mod = py.import("enum")?;
        let enum_type = enum_mod.getattr("EnumMeta")?;
        let Ok(cls_t) = cls.cast::<pyo3::types::PyType>() else { return Ok(false) };
        let meta = cls_t.get_type();
        if !meta.is_subclass(&enum_type)? {
            return Ok(false);
        }
        for name in ["__call__", "__getitem__", "__iter__"] {
            if !meta.getattr(name)?.is(&enum_type.getattr(name)?) {
                return Ok(false);
            }
        }
        for name in ["__hash__", "__eq__", "__str__", "__repr__", "__format__", "_missing_"] {
            let f = cls_t.getattr(name)?;
            let f = f.getattr("__func__").unwrap_or(f);
            if type_name(&f) == "function" && f.getattr("__module__")?.extract::<String>()? != "enum" {
                return Ok(false);
            }
        }
        Ok(true)
    })()
    .unwrap_or(false)
}

/// The items of dict `d` (an exact dict, or the dict storage of a `dict` / `OrderedDict`
/// subclass instance: Note [dict subclass storage]) as a dict tracker: keys must be exact strs
/// or ints, hashable literals (None, floats, tuples of literals) or identity keys
/// (`is_identity_key`: classes, functions); each value is wrapped from `source[key]` (from
/// `dict.__getitem__(source, key)` for a subclass, past its own `__getitem__`); guards on the
/// key list (equal keys of the same types, in order: the storage's, or the linked list's of an
/// `OrderedDict`, read through the base class's C `keys`) and, for an exact dict, the length.
/// The caller guards the type.
///
/// With `register`, the tracker is recorded as the one of `d` (`OutputGraph::dicts_by_ptr`)
/// before the values are wrapped, so a dict that contains itself reaches its own tracker.
pub fn wrap_dict_storage(py: Python<'_>, og: &mut OutputGraph, d: &Bound<'_, PyDict>, source: &Arc<Source>, register: bool) -> VResult<Rc<RefCell<DictState>>> {
    let exact = d.get_type().is(py.get_type::<PyDict>());
    if !exact {
        // One storage tracker per subclass instance, so that a write through one path is read
        // through every other (Note [dict subclass objects from outside the frame]).
        if let Some((first, state)) = og.dict_storages_by_ptr.get(&(d.as_ptr() as usize)).cloned() {
            if first != *source {
                og.add_guard(Some(source.clone()), GuardKind::AliasOf(first));
            }
            return Ok(state);
        }
    }
    let keys_list = if exact { pyo3::types::PyDictMethods::keys(d) } else { storage_keys(py, d)? };
    if !keys_list.iter().all(|k| is_source_key(py, &k)) {
        crate::graph_break!(UntracedValue, "dict at {source} has keys other than strs, ints, hashable literals, classes, functions and tensors");
    }
    og.add_guard(Some(source.clone()), GuardKind::DictKeys(keys_list.clone().into_any().unbind()));
    let state = Rc::new(RefCell::new(DictState::new(vec![], Some(source.clone()))));
    if register {
        og.dicts_by_ptr.insert(d.as_ptr() as usize, (source.clone(), state.clone()));
    } else if !exact {
        og.dict_storages_by_ptr.insert(d.as_ptr() as usize, (source.clone(), state.clone()));
    }
    let mut items = Vec::new();
    for (index, k) in keys_list.iter().enumerate() {
        if is_tensor_key(&k) {
            // Note [tensor dict keys]: the key is wrapped as a tensor from its place among the
            // keys (DICT_KEYS pins its identity), and the tracker holds its `TracedKey`.
            let key_vt = wrap(py, og, &k, Arc::new(Source::DictKey { base: source.clone(), index }))?;
            let VT::Tensor(_) = &key_vt else {
                crate::graph_break!(UntracedValue, "tensor key of the dict at {source} is not a graph input");
            };
            let traced = og.traced_key(py, &key_vt)?;
            let v = pyo3::types::PyDictMethods::get_item(d, &k)?.expect("key present");
            let key_object = ItemKey::Object(crate::source::KeyObject::new(&k));
            let item_source = if exact { source.item(key_object) } else { source.dict_item(key_object) };
            items.push((traced, wrap(py, og, &v, item_source)?));
            continue;
        }
        let item_key = if k.is_exact_instance_of::<PyString>() {
            ItemKey::Str(k.extract::<String>()?)
        } else if k.is_exact_instance_of::<pyo3::types::PyInt>() {
            match k.extract::<i64>() {
                Ok(i) => ItemKey::Int(i),
                Err(_) => ItemKey::Object(crate::source::KeyObject::new(&k)),
            }
        } else {
            ItemKey::Object(crate::source::KeyObject::new(&k))
        };
        let v = pyo3::types::PyDictMethods::get_item(d, &k)?.expect("key present");
        let item_source = if exact { source.item(item_key) } else { source.dict_item(item_key) };
        items.push((k.unbind(), wrap(py, og, &v, item_source)?));
    }
    if exact {
        // (DICT_KEYS of a subclass pins the length too; `len()` could run its own `__len__`.)
        og.add_guard(Some(source.clone()), GuardKind::LenMatch(items.len()));
    }
    state.borrow_mut().items = items;
    Ok(state)
}

/// The most members a set from outside the frame may have to be traced: its guard compares
/// every member on every call.
const MAX_SET_MEMBERS: usize = 256;

/// Note [sets from outside the frame]: an exact `set` argument, global or attribute whose
/// members are literals (`is_literal`: ints, strs, floats, tuples of them, ...) and at most
/// `MAX_SET_MEMBERS` is a set tracker over a private copy (`set.copy()`, which walks the set
/// as `set(s)` does, Objects/setobject.c `set_merge`), as torch's `SetVariable` of a source:
/// `x in s`, `len(s)`, iterating it, comparing it and the operations that make new sets
/// (`s | t`, `s.union(t)`, `set(s)`) run on the copy. Guards: the type, and the members in
/// iteration order with their types (SET_MEMBERS), so what the trace read of the order (a
/// loop, `list(s)`, `str(s)`) holds on every call that reuses the graph. The copy is taken
/// only if it iterates in the same order as the set (members whose hashes collide may land
/// elsewhere in a table of another size); otherwise the set stays opaque. Where the set itself
/// is needed after the graph (returned, stored, passed to a call that runs in Python) it is
/// loaded from its source, so its identity is kept. The trace does not write to such a set:
/// `add`, `discard`, `update`, `|=`, `pop`, ... on it are a graph break (`set_write` in
/// `variables/dicts.rs`), and run on the real set as ordinary Python.
///
/// The tracker of the set `value` at `source`, or `None` when it is not traced this way.
fn wrap_set(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
    let key = value.as_ptr() as usize;
    if let Some((first, set)) = og.sets_by_ptr.get(&key).cloned() {
        // One set reached two ways is one tracker.
        if first != *source {
            og.add_guard(Some(source.clone()), GuardKind::AliasOf(first));
        }
        return Ok(Some(VT::Set(set)));
    }
    let members: Vec<Bound<'_, PyAny>> = value.try_iter()?.collect::<PyResult<_>>()?;
    if members.len() > MAX_SET_MEMBERS || !members.iter().all(|m| is_literal(py, m)) {
        return Ok(None);
    }
    let copy = py.get_type::<pyo3::types::PySet>().getattr("copy")?.call1((value,))?;
    let again: Vec<Bound<'_, PyAny>> = copy.try_iter()?.collect::<PyResult<_>>()?;
    if again.len() != members.len() || !again.iter().zip(&members).all(|(a, b)| a.is(b)) {
        return Ok(None);
    }
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
    og.add_guard(Some(source.clone()), GuardKind::SetMembers(PyTuple::new(py, &members)?.unbind()));
    let set = Rc::new(RefCell::new(copy.unbind()));
    og.sets_by_ptr.insert(key, (source.clone(), set.clone()));
    og.set_sources.insert(Rc::as_ptr(&set) as usize, source.clone());
    Ok(Some(VT::Set(set)))
}

/// The keys of the storage of `d` (a dict subclass instance) in iteration order, read through
/// the base class's C method (`OrderedDict.keys` for an OrderedDict, whose order is its linked
/// list's, else `dict.keys`), so no method the subclass overrides runs.
pub fn storage_keys<'py>(py: Python<'py>, d: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyList>> {
    let base = match ordered_dict_type(py) {
        Some(od) if d.is_instance(od.bind(py))? => od.bind(py).clone(),
        _ => py.get_type::<PyDict>().into_any(),
    };
    let keys = base.getattr("keys")?.call1((d,))?;
    PyList::new(py, keys.try_iter()?.collect::<PyResult<Vec<_>>>()?)
}

/// `collections.OrderedDict`, looked up once (guards ask for it on every check of a dict
/// subclass's keys); `None` if it cannot be imported. A `PyOnceLock`: the import may let
/// another thread run (Note [once-only inits that call Python] in src/inductor/mod.rs).
pub fn ordered_dict_type(py: Python<'_>) -> Option<&'static Py<PyAny>> {
    static OD: pyo3::sync::PyOnceLock<Option<Py<PyAny>>> = pyo3::sync::PyOnceLock::new();
    OD.get_or_init(py, || py.import("collections").and_then(|m| m.getattr("OrderedDict")).ok().map(|t| t.unbind())).as_ref()
}

/// Whether a function's closure cells hold only code-like values (literals, functions, classes,
/// modules). A graph op is run on fake tensors to propagate shapes, so a torch function that
/// closes over live state (the optimizer behind the weak reference in
/// `torch/optim/lr_scheduler.py`'s counting `step` wrapper, a tensor) would run its real side
/// effects at trace time, on fake values; such a function is inlined instead (or breaks).
fn closure_is_stateless(f: &Bound<'_, PyAny>) -> bool {
    let Ok(closure) = f.getattr("__closure__") else { return false };
    if closure.is_none() {
        return true;
    }
    let Ok(cells) = closure.cast_into::<PyTuple>() else { return false };
    cells.iter().all(|cell| match cell.getattr("cell_contents") {
        Ok(v) => {
            let py = v.py();
            is_literal(py, &v)
                || v.is_instance_of::<pyo3::types::PyType>()
                || v.is_instance_of::<pyo3::types::PyModule>()
                || matches!(type_name(&v).as_str(), "function" | "builtin_function_or_method")
        }
        Err(_) => false,
    })
}

/// Wraps `value` (reached through `source`) and installs its guards.
pub fn wrap(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<VT> {
    // Containers are wrapped eagerly, item by item: refuse cycles and very deep nesting.
    let is_container = value.is_instance_of::<PyList>() || value.is_instance_of::<PyDict>() || value.is_instance_of::<PyTuple>();
    if is_container {
        let key = value.as_ptr() as usize;
        if og.wrapping.contains(&key) && (og.lists_by_ptr.contains_key(&key) || og.dicts_by_ptr.contains_key(&key)) {
            // A list or dict that contains itself: its tracker is registered before its items
            // are wrapped, so the inner reach is that tracker (guarded as an alias).
            return wrap_inner(py, og, value, source);
        }
        if og.wrapping.contains(&key) || og.wrapping.len() >= 32 {
            graph_break!(UnrollLimit, "container at {source} refers to itself or nests too deeply");
        }
        og.wrapping.push(key);
        let r = wrap_inner(py, og, value, source);
        og.wrapping.pop();
        return r;
    }
    wrap_inner(py, og, value, source)
}

/// A `tuple` or `torch.Size` of ints (a shape passed as an argument; a plain tuple may also hold
/// floats) whose items changed since
/// an earlier compile of the frame: those items become symbolic inputs at `source[i]`, as
/// torch.compile's automatic dynamic does for ints in tuples (Note [symbolic sizes]). The
/// sequence keeps its type (`torch.Size` stays a `torch.Size`) and is guarded by type and
/// length, the static items by value. `None` when no item is dynamic (every item's value is
/// remembered for the next compile); the caller then guards the whole sequence CONSTANT_MATCH.
fn wrap_int_sequence(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
    let ty = value.get_type();
    let is_size = ty.is(og.handles.size_type.bind(py));
    if !(ty.is(py.get_type::<PyTuple>()) || is_size) {
        return Ok(None);
    }
    let t = value.cast::<PyTuple>().map_err(PyErr::from)?;
    let int_type = py.get_type::<pyo3::types::PyInt>();
    let float_type = py.get_type::<pyo3::types::PyFloat>();
    // A plain tuple may hold floats too (`return loss.item(), acc.item()` from a function that
    // broke the graph reaches its caller's resume function as such a tuple on the stack).
    let number = |i: &Bound<'_, PyAny>| i.get_type().is(&int_type) || (!is_size && i.get_type().is(&float_type));
    if t.is_empty() || t.len() > 16 || !t.iter().all(|i| number(&i)) {
        return Ok(None);
    }
    let mut items = Vec::with_capacity(t.len());
    for (i, item) in t.iter().enumerate() {
        items.push(og.add_number_input(py, &item, &source.item(ItemKey::Int(i as i64)))?);
    }
    if items.iter().all(|i| i.is_none()) {
        return Ok(None);
    }
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.into_any().unbind()));
    og.add_guard(Some(source.clone()), GuardKind::LenMatch(t.len()));
    let mut vts = Vec::with_capacity(items.len());
    for (i, (item, vt)) in t.iter().zip(items).enumerate() {
        vts.push(match vt {
            Some(v) => v,
            None => {
                og.add_guard(Some(source.item(ItemKey::Int(i as i64))), GuardKind::ConstantMatch(item.clone().unbind()));
                VT::constant(item.unbind())
            }
        });
    }
    if is_size {
        let size_type = og.handles.size_type.clone_ref(py);
        return crate::symbolic::variables::tensor::make_size(py, size_type.bind(py), vts).map(Some);
    }
    Ok(Some(VT::Tuple(og.sourced_tuple_items(vts, source))))
}

fn wrap_inner(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<VT> {
    if og.is_tensor(py, value) {
        return Ok(VT::Tensor(og.add_input(py, value, source)?));
    }
    if value.get_type().is(py.get_type::<pyo3::types::PyInt>()) || value.get_type().is(py.get_type::<pyo3::types::PyFloat>()) {
        if let Some(v) = og.add_number_input(py, value, &source)? {
            return Ok(v);
        }
    }
    if let Some(v) = wrap_int_sequence(py, og, value, &source)? {
        return Ok(v);
    }
    if is_literal(py, value) {
        let kind = if value.is_none() || value.is_instance_of::<PyBool>() {
            GuardKind::id_match(value.clone().unbind())
        } else {
            GuardKind::ConstantMatch(value.clone().unbind())
        };
        og.add_guard(Some(source.clone()), kind);
        return Ok(og.sourced_constant(py, value, &source));
    }
    if value.get_type().is_subclass(og.handles.module_type.bind(py))? {
        // Note [modules guarded by type]: as torch's `UnspecializedNNModuleVariable`
        // (torch/_dynamo/variables/builder.py, `wrap_module`), a module is guarded by its type,
        // and everything the trace reads from it is read through its source and guarded there:
        // parameters and buffers are graph inputs (TENSOR_MATCH), plain attributes are
        // constants (CONSTANT_MATCH / ID_MATCH), children are modules again, the child tables
        // iterated or counted are guarded by their keys (`guard_module_children`), hooks by
        // their key lists and an instance-level `forward` or `_call_impl` by NoInstanceAttr.
        // So the twelve layers of a transformer share one compiled `forward` (and one compiled
        // resume function when it breaks) instead of one per instance, which also ran out the
        // recompile limit. A use that depends on the module's identity (`is`, `id()`, a write
        // to it, a hook registered on it, the contents of a `ParameterList`) pins it with an
        // ID_MATCH (`InstructionTranslator::pin_identity`), as for closures.
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        og.unpinned_objects.insert(value.as_ptr() as usize);
        return Ok(VT::Module { obj: Rc::new(value.clone().unbind()), source: Some(source) });
    }
    if let Some(v) = wrap_grad_mode_ctx(py, og, value, &source)? {
        return Ok(v);
    }
    if let Some(v) = wrap_autocast_exit(py, og, value, &source)? {
        return Ok(v);
    }
    if crate::symbolic::variables::ctx_manager::is_torch_autocast_class(py, value.get_type().as_any())? {
        // An autocast object from outside the frame (`with self.amp:`, the instance a
        // `@torch.autocast(...)` decorator closes over): the object, and the fields its
        // `__enter__` reads, guarded.
        og.add_guard(Some(source.clone()), GuardKind::id_match(value.clone().unbind()));
        for field in ["device", "_enabled", "_cache_enabled"] {
            og.add_guard(Some(source.attr(field)), GuardKind::ConstantMatch(value.getattr(field)?.unbind()));
        }
        og.add_guard(Some(source.attr("fast_dtype")), GuardKind::id_match(value.getattr("fast_dtype")?.unbind()));
        return Ok(VT::AutocastCtx(Rc::new(crate::symbolic::variables::ctx_manager::AutocastMode::of(value)?)));
    }
    if let Some(v) = wrap_inference_mode(py, og, value, &source)? {
        return Ok(v);
    }
    if let Ok(exit) = value.cast::<crate::py::GradModeRestore>() {
        // The `__exit__` of a grad-mode block cut by a break, passed to the resume function:
        // calling it switches grad mode back (a `_set_grad_enabled` node), as it does for real.
        let restore = exit.get().restore;
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        og.add_guard(Some(source.attr("restore")), GuardKind::id_match(pyo3::types::PyBool::new(py, restore).to_owned().into_any().unbind()));
        return Ok(VT::GradModeExit { restore });
    }
    let tn = type_name(value);
    let id_guard = |og: &mut OutputGraph| og.add_guard(Some(source.clone()), GuardKind::id_match(value.clone().unbind()));
    match tn.as_str() {
        "function" => {
            // Note [torch.compile inside a region]: a function torch.compile wrapped
            // (`_TorchDynamoContext`'s `compile_wrapper`, holding `_torchdynamo_orig_callable`)
            // is traced as the function it wraps, as torch.compile treats a nested one: called as
            // it is, torch's frame hook would take over the frames our hook had transformed and
            // fail on their code (InternalTorchDynamoError). `torch._dynamo.disable` wrappers
            // (`_torchdynamo_disable`) keep their own handling.
            if value.hasattr("_torchdynamo_orig_callable")?
                && !value.hasattr("_torchdynamo_disable")?
                && value
                    .getattr("__code__")
                    .and_then(|c| c.getattr("co_filename"))
                    .is_ok_and(|f| f.extract::<String>().is_ok_and(|f| f.replace('\\', "/").ends_with("torch/_dynamo/eval_frame.py")))
            {
                id_guard(og);
                let inner = value.getattr("_torchdynamo_orig_callable")?;
                return wrap_inner(py, og, &inner, source.generic_attr("_torchdynamo_orig_callable"));
            }
            if is_torch_callable(value) {
                id_guard(og);
                return Ok(VT::TorchFunction(Rc::new(value.clone().unbind())));
            }
            // Note [closure guards]: a closure is often made afresh on every call (transformers
            // builds `mask_function = and_masks(...)` per forward), so guarding its identity
            // would recompile every call. A closure is guarded by its type, its code object and
            // its globals dict instead; everything the trace reads from it (defaults, closure
            // cells, globals) is read through its source and guarded there. The first use that
            // depends on its identity (`is`, `__name__`) pins it with an ID_MATCH
            // (`InstructionTranslator::pin_identity`). Bound methods' functions keep ID_MATCH.
            let is_method_func = matches!(source.as_ref(), Source::Attr { attr, .. } if attr == "__func__");
            if !value.getattr("__closure__")?.is_none() && !is_method_func {
                og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
                og.add_guard(Some(source.attr("__code__")), GuardKind::id_match(value.getattr("__code__")?.unbind()));
                og.add_guard(Some(source.attr("__globals__")), GuardKind::id_match(value.getattr("__globals__")?.unbind()));
                og.unpinned_objects.insert(value.as_ptr() as usize);
            } else {
                id_guard(og);
            }
            return Ok(VT::Function { obj: Rc::new(value.clone().unbind()), source: Some(source) });
        }
        // Note [lock blocks] (variables/hooks.rs): the `__exit__` of a lock block a resume
        // function received on its stack, called when the block ends.
        "builtin_function_or_method"
            if value.getattr("__name__").is_ok_and(|n| n.extract::<String>().is_ok_and(|n| n == "__exit__"))
                && value.getattr("__self__").is_ok_and(|s| crate::symbolic::variables::hooks::is_lock(py, &s)) =>
        {
            let lock = value.getattr("__self__")?;
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
            og.add_guard(Some(source.attr("__name__")), GuardKind::ConstantMatch(value.getattr("__name__")?.unbind()));
            og.add_guard(Some(source.attr("__self__")), GuardKind::TypeMatch(lock.get_type().into_any().unbind()));
            return Ok(VT::LockExit { lock: Box::new(VT::Opaque { obj: Rc::new(lock.unbind()), source: source.attr("__self__") }) });
        }
        "builtin_function_or_method" if value.getattr("__self__").map(|s| !s.is_none() && type_name(&s) != "module").unwrap_or(false) && !is_torch_callable(value) => {
            // A C method bound to some object (`lst.append`): only its type is known.
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
            return Ok(VT::Opaque { obj: Rc::new(value.clone().unbind()), source });
        }
        "builtin_function_or_method" | "method_descriptor" | "wrapper_descriptor" | "method-wrapper" | "_lru_cache_wrapper" => {
            id_guard(og);
            if is_torch_callable(value) {
                return Ok(VT::TorchFunction(Rc::new(value.clone().unbind())));
            }
            return Ok(VT::Builtin(Rc::new(value.clone().unbind())));
        }
        "code" => {
            id_guard(og);
            return Ok(VT::constant(value.clone().unbind()));
        }
        "OpOverloadPacket" | "OpOverload" if is_torch_callable(value) => {
            id_guard(og);
            return Ok(VT::TorchFunction(Rc::new(value.clone().unbind())));
        }
        // A `torch.library.custom_op` function: its operator (`torch.ops.ns.name.default`).
        "CustomOpDef" if value.get_type().module().is_ok_and(|m| m.to_string() == "torch._library.custom_ops") => {
            id_guard(og);
            return Ok(VT::TorchFunction(Rc::new(value.getattr("_opoverload")?.unbind())));
        }
        // Modules, subclasses included (`torch.backends` is a `GenericModule` whose flags are
        // properties, transformers' `_LazyModule`): attributes read through getattr and guarded.
        _ if value.is_instance_of::<pyo3::types::PyModule>() => {
            id_guard(og);
            return Ok(VT::PyModule { obj: Rc::new(value.clone().unbind()), source: Some(source) });
        }
        "method" => {
            // A bound method of some object: inline its function with `self`.
            let func = value.getattr("__func__")?;
            let self_ = value.getattr("__self__")?;
            let self_vt = wrap(py, og, &self_, source.attr("__self__"))?;
            let func_vt = wrap(py, og, &func, source.attr("__func__"))?;
            return Ok(VT::Method { func: Box::new(func_vt), self_: Box::new(self_vt) });
        }
        _ => {}
    }
    let is_seq_iter = matches!(tn.as_str(), "tuple_iterator" | "list_iterator" | "range_iterator" | "dict_keyiterator" | "dict_valueiterator" | "dict_itemiterator");
    if is_seq_iter {
        // Note [iterators from outside the frame] (side_effects): one tracker per iterator.
        if let Some((first, state)) = og.side_effects.external_iter(value.as_ptr() as usize) {
            if first != source {
                og.add_guard(Some(source), GuardKind::AliasOf(first));
            }
            return Ok(VT::Iterator(state));
        }
    }
    // Records a wrapped outside iterator, so that its steps are replayed after the graph.
    let external = |og: &mut OutputGraph, source: &Arc<Source>, it: crate::symbolic::variables::IteratorState| -> VT {
        let start = it.pos;
        let state = Rc::new(RefCell::new(it));
        og.side_effects.external_iters.push(crate::symbolic::side_effects::ExternalIter {
            ptr: value.as_ptr() as usize,
            obj: value.clone().unbind(),
            source: source.clone(),
            state: state.clone(),
            start,
            literal_items: false,
        });
        VT::Iterator(state)
    };
    // An iterator whose items are read only as the trace takes them (`IterKind::Peek`):
    // guarded by its type, its items kept as lazy constants.
    let peek = |og: &mut OutputGraph, items: Vec<Py<PyAny>>| -> VT {
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        let v = external(og, &source, crate::symbolic::variables::IteratorState::of(crate::symbolic::variables::IterKind::Peek { items, base: source.clone() }));
        if let Some(e) = og.side_effects.external_iters.last_mut() {
            e.literal_items = true;
        }
        v
    };
    if tn == "list_iterator" {
        // An iterator over a list the frame also received (a loop continued in a resume
        // function): it reads that list live, as CPython's does.
        let (seq, pos) = crate::guards::iterator_state(value)?;
        let seq_ptr = seq.as_ptr() as usize;
        if pos != usize::MAX && !og.lists_by_ptr.contains_key(&seq_ptr) && og.frame_arg_ptrs.contains(&seq_ptr) && seq.is_instance_of::<PyList>() {
            // The list is also an argument of the frame (a loop continued in a resume function
            // receives both): wrapped through the iterator now, live, and aliased there.
            wrap(py, og, &seq, Arc::new(Source::IterSeq { base: source.clone() }))?;
        }
        if pos != usize::MAX && !og.lists_by_ptr.contains_key(&seq_ptr) && seq.is_instance_of::<PyList>() {
            // Note [items of iterators from outside the frame]: the list is not otherwise
            // reachable (not an argument, not reached yet), so only the items the trace takes
            // are read (a `Peek` iterator, or lazy constants below). Registered as a list whose
            // items the frame does not read: reaching it again through another path is a graph
            // break (that path could mutate or read it behind the iterator's back).
            if og.peeked_lists.contains_key(&seq_ptr) {
                graph_break!(UntracedValue, "a second iterator over a list read through an iterator passed in ({source})");
            }
            og.peeked_lists.insert(seq_ptr, source.clone());
            let rest = crate::guards::iterator_remaining(value)?;
            if !rest.iter().all(|i| is_literal(py, &i)) && rest.len() <= 10_000 {
                return Ok(peek(og, rest.iter().map(|i| i.unbind()).collect()));
            }
        } else if let Some((seq_source, list)) = og.lists_by_ptr.get(&(seq.as_ptr() as usize)).cloned() {
            realize_append_only(py, og, &seq, &list)?;
            if pos != usize::MAX {
                og.add_guard(Some(source.clone()), GuardKind::IteratorOver { seq: seq_source, pos });
                let mut it = crate::symbolic::variables::IteratorState::over_list(list);
                it.pos = pos;
                return Ok(external(og, &source, it));
            }
        }
    }
    let dict_view = match tn.as_str() {
        "dict_keyiterator" => Some(crate::symbolic::variables::DictView::Keys),
        "dict_valueiterator" => Some(crate::symbolic::variables::DictView::Values),
        "dict_itemiterator" => Some(crate::symbolic::variables::DictView::Items),
        _ => None,
    };
    if let Some((view, Ok((d, remaining)))) = dict_view.map(|v| (v, crate::guards::dict_iter_state(value))) {
        // A loop over a dict continued in a resume function: a live iterator over the dict's
        // tracker (the dict is wrapped already, as a local of the same frame), `pos` items in,
        // when the items it has left are the tracker's from `pos` on.
        if let Some((dict_source, tracker)) = og.dicts_by_ptr.get(&(d.as_ptr() as usize)).cloned() {
            let n = tracker.borrow().items.len();
            if remaining <= n {
                let pos = n - remaining;
                let rest = value.call_method0("__reduce__")?.get_item(1)?.get_item(0)?;
                let mut same = rest.len()? == remaining;
                for (i, r) in rest.try_iter()?.enumerate() {
                    let r = r?;
                    let key = tracker.borrow().items[pos + i].0.clone_ref(py);
                    let key = key.bind(py);
                    same &= match view {
                        crate::symbolic::variables::DictView::Keys => r.eq(key)?,
                        crate::symbolic::variables::DictView::Values => d.get_item(key)?.is(&r),
                        crate::symbolic::variables::DictView::Items => r.get_item(0)?.eq(key)? && d.get_item(key)?.is(&r.get_item(1)?),
                    };
                }
                if same {
                    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
                    og.add_guard(Some(source.clone()), GuardKind::DictIterOver { dict: dict_source, remaining });
                    let mut it = crate::symbolic::variables::IteratorState::over_dict(tracker, view, false);
                    it.pos = pos;
                    return Ok(external(og, &source, it));
                }
            }
        }
    }
    if matches!(tn.as_str(), "tuple_iterator" | "list_iterator" | "range_iterator") {
        // Note [items of iterators from outside the frame]: a loop over a range or tuple whose
        // body breaks the graph continues in a resume function that receives the iterator, one
        // item further at each iteration. Its items are lazy constants (Note [lazy constants]),
        // each read through `Source::IterItem` and guarded only when the trace uses its value;
        // the iterator itself is guarded by its type and by how many items the trace took from
        // it (`ITERATOR_LEN`, added in `OutputGraph::add_iterator_guards`). A loop variable that
        // is only passed along then costs no recompile per iteration.
        let rest = crate::guards::iterator_remaining(value)?;
        if tn == "tuple_iterator" && !rest.iter().all(|i| is_literal(py, &i)) && rest.len() <= 10_000 {
            // A tuple cannot change: its items are read only as the trace takes them (`Peek`).
            return Ok(peek(og, rest.iter().map(|i| i.unbind()).collect()));
        }
        if !rest.iter().all(|i| is_literal(py, &i)) || rest.len() > 10_000 {
            graph_break!(UntracedValue, "iterator over non-literal items ({source})");
        }
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        // The next item, the one the resume function's FOR_ITER takes, is an automatic-dynamic
        // number like an argument (`add_number_input`): a body that uses the loop variable
        // (`X[i]`, `i * 2`) would otherwise pin its value, one compile per iteration until the
        // cache limit. Its value is remembered at the first compile; from the second on, it is
        // a symbolic input.
        let mut items = Vec::with_capacity(rest.len());
        for (k, i) in rest.iter().enumerate() {
            let item_source = Arc::new(Source::IterItem { base: source.clone(), index: k });
            let number = i.get_type().is(py.get_type::<pyo3::types::PyInt>()) || i.get_type().is(py.get_type::<pyo3::types::PyFloat>());
            let dynamic = if k == 0 && number { og.add_number_input(py, &i, &item_source)? } else { None };
            items.push(dynamic.unwrap_or_else(|| og.lazy_argument(&i, item_source)));
        }
        let v = external(og, &source, crate::symbolic::variables::IteratorState::over(items));
        if let Some(e) = og.side_effects.external_iters.last_mut() {
            e.literal_items = true;
        }
        return Ok(v);
    }
    if value.is_instance_of::<pyo3::types::PyType>() {
        id_guard(og);
        og.class_sources.entry(value.as_ptr() as usize).or_insert(source.clone());
        return Ok(VT::Class(Rc::new(value.clone().unbind())));
    }
    if let Ok(t) = value.cast::<PyTuple>() {
        let named = crate::symbolic::variables::is_named_tuple_class(py, t.get_type().as_any())?;
        if t.get_type().is(py.get_type::<PyTuple>()) || named {
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(t.get_type().into_any().unbind()));
            og.add_guard(Some(source.clone()), GuardKind::LenMatch(t.len()));
            let items = t
                .iter()
                .enumerate()
                .map(|(i, item)| wrap(py, og, &item, source.item(ItemKey::Int(i as i64))))
                .collect::<VResult<Vec<_>>>()?;
            let items = og.sourced_tuple_items(items, &source);
            if named {
                // Its class (TYPE_MATCH-guarded just above) is reached as `source.__class__`,
                // where the class's own methods and properties are read.
                og.class_sources.entry(t.get_type().as_ptr() as usize).or_insert_with(|| source.generic_attr("__class__"));
                return Ok(VT::NamedTuple { cls: Rc::new(t.get_type().into_any().unbind()), items });
            }
            return Ok(VT::Tuple(items));
        }
    }
    if let Some(first) = og.peeked_lists.get(&(value.as_ptr() as usize)) {
        // Note [items of iterators from outside the frame]: its iterator reads it behind any
        // tracker this path would make.
        graph_break!(UntracedValue, "a list read through the iterator {first} passed in, reached again as {source}");
    }
    if let Some((first, state)) = og.lists_by_ptr.get(&(value.as_ptr() as usize)).cloned().filter(|(_, st)| !st.borrow().subclass_storage) {
        // One tracker per list object, so that a mutation through one path is seen through the
        // other; the guard keeps the two paths one object.
        realize_append_only(py, og, value, &state)?;
        if first != source {
            og.add_guard(Some(source), GuardKind::AliasOf(first));
        }
        if state.borrow().deque.is_some() {
            return Ok(VT::Deque(state));
        }
        return Ok(VT::List(state));
    }
    if let Some((first, state)) = og.dicts_by_ptr.get(&(value.as_ptr() as usize)).cloned() {
        if first != source {
            og.add_guard(Some(source), GuardKind::AliasOf(first));
        }
        return Ok(VT::Dict(state));
    }
    if let Ok(l) = value.cast::<PyList>() {
        if l.get_type().is(py.get_type::<PyList>()) {
            if append_only_source(og, &source) {
                return Ok(wrap_append_only_list(og, value, source));
            }
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(l.get_type().into_any().unbind()));
            og.add_guard(Some(source.clone()), GuardKind::LenMatch(l.len()));
            // Registered before its items are wrapped: an item that is the list itself is this
            // tracker.
            let state = Rc::new(RefCell::new(ListState { entry_len: 0, items: vec![], source: Some(source.clone()), append_only: false, deque: None, owner: None, subclass_storage: false }));
            og.lists_by_ptr.insert(value.as_ptr() as usize, (source.clone(), state.clone()));
            let items = l
                .iter()
                .enumerate()
                .map(|(i, item)| wrap(py, og, &item, source.item(ItemKey::Int(i as i64))))
                .collect::<VResult<Vec<_>>>()?;
            let mut st = state.borrow_mut();
            st.entry_len = items.len();
            st.items = items;
            drop(st);
            return Ok(VT::List(state));
        }
    }
    if value.get_type().is(py.import("collections")?.getattr("deque")?) {
        // Note [deques]: item by item, as a list, with its maxlen guarded too.
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
        let n = value.len()?;
        og.add_guard(Some(source.clone()), GuardKind::LenMatch(n));
        let maxlen = value.getattr("maxlen")?;
        og.add_guard(Some(source.attr("maxlen")), GuardKind::ConstantMatch(maxlen.clone().unbind()));
        let info = crate::symbolic::variables::deque::DequeInfo { maxlen: maxlen.extract::<Option<usize>>()?, state: 0 };
        let state = Rc::new(RefCell::new(ListState { entry_len: 0, items: vec![], source: Some(source.clone()), append_only: false, deque: Some(info), owner: None, subclass_storage: false }));
        og.lists_by_ptr.insert(value.as_ptr() as usize, (source.clone(), state.clone()));
        let items = value
            .try_iter()?
            .enumerate()
            .map(|(i, item)| wrap(py, og, &item?, source.item(ItemKey::Int(i as i64))))
            .collect::<VResult<Vec<_>>>()?;
        let mut st = state.borrow_mut();
        st.entry_len = items.len();
        st.items = items;
        drop(st);
        return Ok(VT::Deque(state));
    }
    if value.is_exact_instance_of::<pyo3::types::PySet>() {
        if let Some(set) = wrap_set(py, og, value, &source)? {
            return Ok(set);
        }
    }
    if let Ok(d) = value.cast::<PyDict>() {
        // Keys `is_source_key` accepts: each value is reached as `d[key]`. Not a module's
        // namespace (Note [module namespaces are not dict trackers]).
        if d.get_type().is(py.get_type::<PyDict>()) && !is_module_namespace(py, d) && d.keys().iter().all(|k| is_source_key(py, &k)) {
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(d.get_type().into_any().unbind()));
            let state = wrap_dict_storage(py, og, d, &source, true)?;
            return Ok(VT::Dict(state));
        }
    }
    if crate::symbolic::variables::functions::is_plain_partial(py, value)? {
        return crate::symbolic::variables::functions::wrap_partial(py, og, value, source);
    }
    let key = value.as_ptr() as usize;
    if let Some((first, _)) = og.opaque_by_ptr.get(&key).cloned() {
        // One object reached two ways: keep them one object (writes key on the object).
        if first != source {
            og.add_guard(Some(source.clone()), GuardKind::AliasOf(first));
        }
    } else {
        og.opaque_by_ptr.insert(key, (source.clone(), value.get_type().as_ptr() as usize));
    }
    if is_plain_enum_member(py, value) {
        // Note [enum members]: used by its real object, so pinned by identity.
        og.add_guard(Some(source.clone()), GuardKind::id_match(value.clone().unbind()));
    } else {
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(value.get_type().into_any().unbind()));
    }
    Ok(VT::Opaque { obj: Rc::new(value.clone().unbind()), source })
}

/// The `__exit__` of an autocast block cut by a break (`dynamo._amp.AutocastExit`), passed to
/// the resume function: calling it leaves the block (an `exit_autocast` node), as it does for
/// real. Guarded on its type and on each saved field.
fn wrap_autocast_exit(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
    if type_name(value) != "AutocastExit" {
        return Ok(None);
    }
    let cls = py.import("dynamo._amp")?.getattr("AutocastExit")?;
    if !value.get_type().is(&cls) {
        return Ok(None);
    }
    og.add_guard(Some(source.clone()), GuardKind::TypeMatch(cls.unbind()));
    let active = value.getattr("active")?;
    og.add_guard(Some(source.attr("active")), GuardKind::ConstantMatch(active.clone().unbind()));
    let device = value.getattr("device_type")?;
    let enabled = value.getattr("prev_enabled")?;
    let dtype = value.getattr("prev_dtype")?;
    let cache = value.getattr("prev_cache_enabled")?;
    og.add_guard(Some(source.attr("device_type")), GuardKind::ConstantMatch(device.clone().unbind()));
    og.add_guard(Some(source.attr("prev_enabled")), GuardKind::ConstantMatch(enabled.clone().unbind()));
    og.add_guard(Some(source.attr("prev_dtype")), GuardKind::id_match(dtype.clone().unbind()));
    og.add_guard(Some(source.attr("prev_cache_enabled")), GuardKind::ConstantMatch(cache.clone().unbind()));
    Ok(Some(VT::AutocastExit(std::rc::Rc::new(crate::symbolic::variables::ctx_manager::AutocastRestore {
        active: active.is_truthy()?,
        device: device.extract()?,
        enabled: enabled.is_truthy()?,
        dtype: dtype.unbind(),
        cache: cache.is_truthy()?,
    }))))
}

/// An inference-mode block's `__exit__` cut by a break (`dynamo._amp.InferenceModeExit`, which
/// holds nothing: guarded on its type), or a `torch.inference_mode(mode)` object from outside
/// the frame (guarded on its type and its `mode`, which its `__enter__` reads): Note
/// [inference-mode blocks] in `python/dynamo/_amp.py`.
fn wrap_inference_mode(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
    let ty = value.get_type();
    let tn = type_name(value);
    if tn == "InferenceModeExit" && ty.is(&py.import("dynamo._amp")?.getattr("InferenceModeExit")?) {
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.into_any().unbind()));
        return Ok(Some(VT::InferenceModeExit));
    }
    if tn == "inference_mode" && ty.is(&og.handles.torch.bind(py).getattr("inference_mode")?) {
        let Ok(mode) = value.getattr("mode") else { return Ok(None) };
        if !mode.is_instance_of::<PyBool>() {
            return Ok(None);
        }
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.into_any().unbind()));
        og.add_guard(Some(source.attr("mode")), GuardKind::id_match(mode.clone().unbind()));
        return Ok(Some(VT::InferenceModeCtx { mode: mode.is_truthy()? }));
    }
    Ok(None)
}

/// A grad-mode context object from outside the frame (one a resume function receives, made
/// before the break): `torch.no_grad()` / `torch.enable_grad()` by type (their `__enter__`
/// switches to a fixed mode), `torch.set_grad_enabled(mode)` by type and its `mode` and `prev`
/// (its `__enter__` switches to `mode`, its `__exit__` back to `prev`).
fn wrap_grad_mode_ctx(py: Python<'_>, og: &mut OutputGraph, value: &Bound<'_, PyAny>, source: &Arc<Source>) -> VResult<Option<VT>> {
    let torch = og.handles.torch.bind(py).clone();
    let ty = value.get_type();
    let grad_now: bool = torch.call_method0("is_grad_enabled")?.extract()?;
    for (name, enabled) in [("no_grad", false), ("enable_grad", true)] {
        if ty.is(&torch.getattr(name)?) {
            og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.into_any().unbind()));
            return Ok(Some(VT::GradModeCtx { enabled, set_on_create: false, prev: grad_now, source: Some(source.clone()) }));
        }
    }
    if ty.is(&torch.getattr("set_grad_enabled")?) {
        let (Ok(mode), Ok(prev)) = (value.getattr("mode").and_then(|m| m.extract::<bool>()), value.getattr("prev").and_then(|m| m.extract::<bool>())) else { return Ok(None) };
        og.add_guard(Some(source.clone()), GuardKind::TypeMatch(ty.into_any().unbind()));
        og.add_guard(Some(source.attr("mode")), GuardKind::id_match(PyBool::new(py, mode).to_owned().into_any().unbind()));
        og.add_guard(Some(source.attr("prev")), GuardKind::id_match(PyBool::new(py, prev).to_owned().into_any().unbind()));
        return Ok(Some(VT::GradModeCtx { enabled: mode, set_on_create: true, prev, source: Some(source.clone()) }));
    }
    Ok(None)
}
