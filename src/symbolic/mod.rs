//! Symbolic execution of a frame's bytecode (TorchDynamo's InstructionTranslator).
//!
//! `convert_frame::convert` is the entry: it decodes the frame's code (`code_info`), wraps the
//! frame's arguments into `VariableTracker`s with `Source`s and guards (`builder`), interprets the
//! instructions (`translator`), records tensor operations into the `OutputGraph` (shape
//! propagation on fake tensors, export to `torch.fx`), then asks `pycodegen` for the transformed
//! code. Anything not modelled is an `Unsupported` with a reason: the frame then runs eagerly.

pub mod builder;
pub mod code_info;
pub mod convert_frame;
pub mod graph_break;
pub mod object_protocol;
pub mod output_graph;
pub mod side_effects;
pub mod translator;
pub mod variables;

use graph_break::GraphBreakKind;
use pyo3::prelude::*;
use std::fmt;

/// Why symbolic execution stopped: the construct is not modelled (yet). The frame falls back to
/// eager execution with this reason in the log.
#[derive(Debug, Clone)]
pub struct Unsupported {
    pub kind: GraphBreakKind,
    pub reason: String,
    /// The instruction of the frame being converted (not of an inlined callee) at which this
    /// happened, with how many times tracing had reached it: where a graph break can go.
    pub break_at: Option<(usize, usize)>,
    /// Set when the traced code itself raises this builtin exception here (an `AttributeError`
    /// of a lookup that is guarded to fail): a caller that catches it the way CPython does
    /// (`getattr(o, name, default)`, `hasattr`) answers inside the trace; anywhere else it is a
    /// graph break and the instruction raises for real in Python. Cleared when the exception
    /// would cross an exception-table entry (a `try` or `with` block the trace does not model).
    pub raised: Option<&'static str>,
    /// The exception object itself when the traced code built it (`raise IndexError(msg)`);
    /// made from `raised` and the reason when a handler needs it.
    pub exc_value: Option<std::sync::Arc<Py<PyAny>>>,
}

impl Unsupported {
    /// An internal inconsistency (`GB0025 internal_inconsistency`): a state valid bytecode does
    /// not produce (a stack underflow, a CPython object of an unexpected type). Reasons the
    /// traced code can reach take a named kind through `Unsupported::of` / `graph_break!`.
    pub fn new(reason: impl Into<String>) -> Self {
        Unsupported { kind: GraphBreakKind::InternalInconsistency, reason: reason.into(), break_at: None, raised: None, exc_value: None }
    }

    pub fn of(kind: GraphBreakKind, reason: impl Into<String>) -> Self {
        Unsupported { kind, reason: reason.into(), break_at: None, raised: None, exc_value: None }
    }

    /// The traced code raises the builtin exception `exc` (e.g. `"AttributeError"`): kind
    /// `RaisesException`, catchable by the callers that model CPython's handling of it.
    pub fn raise(exc: &'static str, reason: impl Into<String>) -> Self {
        Unsupported { kind: GraphBreakKind::RaisesException, reason: format!("{exc}: {}", reason.into()), break_at: None, raised: Some(exc), exc_value: None }
    }

    /// The traced code raises a new instance of the builtin exception class named `exc` (one
    /// of `TRACED_EXCEPTIONS`) made from the one argument `arg`, as the C code eager runs makes
    /// it (`KeyError(key)` for a missing key, `IndexError("pop from empty list")`).
    pub fn raise_new(py: Python<'_>, exc: &'static str, arg: &Bound<'_, PyAny>) -> Self {
        let made = py.import("builtins").and_then(|b| b.getattr(exc)).and_then(|c| c.call1((arg,)));
        match made {
            Ok(value) => {
                let msg = value.str().map(|s| s.to_string()).unwrap_or_default();
                Unsupported::raise_value(exc, value.unbind(), msg)
            }
            Err(e) => Unsupported::from(e),
        }
    }

    /// The traced code raises `value`, an instance of the builtin exception class named `exc`.
    pub fn raise_value(exc: &'static str, value: Py<PyAny>, reason: impl Into<String>) -> Self {
        Unsupported { exc_value: Some(std::sync::Arc::new(value)), ..Unsupported::raise(exc, reason) }
    }

    /// The traced code raises CPython's AttributeError for a missing attribute `name` of the
    /// object (real or of the trace), with its `name` set as `PyObject_GenericGetAttr` sets it
    /// (Objects/object.c, `set_attribute_error_context`). Its `obj` stays None: the exception
    /// object is made once, at trace time, while eager's names the object of each call, so a
    /// handler that reads `e.obj` breaks the graph instead (`getattr` of a raised exception).
    pub fn attribute_error(py: pyo3::Python<'_>, name: &str, msg: String) -> Self {
        use pyo3::types::{PyAnyMethods, PyDictMethods};
        let made = (|| -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("name", name)?;
            Ok(py.get_type::<pyo3::exceptions::PyAttributeError>().call((msg.as_str(),), Some(&kw))?.unbind())
        })();
        match made {
            Ok(e) => Unsupported::raise_value("AttributeError", e, msg),
            Err(_) => Unsupported::raise("AttributeError", msg),
        }
    }

    /// Note [errors of folded operations]: an operation on constants is folded by running the
    /// real operation on the same values eager gives it (an operator, a method of a constant, a
    /// pure builtin, a method of a traced set's real set), so an exception it raises is the one
    /// eager raises at that instruction (`1 // 0`, `int("abc")`, `"ab".index("z")`,
    /// `s.remove(5)`, `(1, 2) < (1, "a")`). When it is an exact builtin exception the trace
    /// models (`TRACED_EXCEPTIONS`), it is raised in the trace, so a `try` around the
    /// instruction takes its handler there; anything else stays a `python_error` break and
    /// the instruction raises for real. Only sites that run exactly eager's operation use
    /// this: a Python error of the tracer's own modelling must never become a catchable one.
    ///
    /// The `Unsupported` for the error `e` of a folded operation.
    pub fn folded(py: Python<'_>, e: PyErr) -> Self {
        let ty = e.get_type(py);
        let builtin = ty.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).is_some_and(|m| m == "builtins");
        let name = ty.name().map(|n| n.to_string()).unwrap_or_default();
        match crate::symbolic::translator::TRACED_EXCEPTIONS.iter().find(|n| **n == name) {
            Some(n) if builtin => {
                let value = e.value(py);
                let msg = value.str().map(|s| s.to_string()).unwrap_or_default();
                Unsupported::raise_value(n, value.clone().into_any().unbind(), msg)
            }
            _ => Unsupported::from(e),
        }
    }

    /// Whether this is the builtin exception `exc` raised by the traced code.
    pub fn is_raised(&self, exc: &str) -> bool {
        self.raised == Some(exc)
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind, self.reason)
    }
}

impl From<std::convert::Infallible> for Unsupported {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl From<pyo3::PyErr> for Unsupported {
    fn from(e: pyo3::PyErr) -> Self {
        pyo3::Python::attach(|py| {
            note_interrupt(py, &e);
            Unsupported::of(GraphBreakKind::PythonError, format!("python error during tracing: {}", e.value(py).repr().map(|r| r.to_string()).unwrap_or_default()))
        })
    }
}

// Note [interrupts during a conversion]: an exception that is not an `Exception`
// (KeyboardInterrupt from a Ctrl-C, SystemExit, a user `BaseException`) raised by Python code
// the conversion runs (a fake-tensor op, a backend, a guard's getter) must reach the user as in
// eager, where it would have stopped the program. Turned into a graph break or a compile error
// like any other error, it was lost (audit 50, L1): the frame ran on. Each such error met while
// converting a frame is kept here (the first one), and the frame hook raises it once the
// conversion is over, whatever the conversion made of it.
thread_local! {
    static PENDING_INTERRUPT: std::cell::RefCell<Option<pyo3::PyErr>> = const { std::cell::RefCell::new(None) };
}

/// Keeps `e` for the frame hook when it is not an `Exception` (Note [interrupts during a
/// conversion]).
pub fn note_interrupt(py: pyo3::Python<'_>, e: &pyo3::PyErr) {
    if !e.is_instance_of::<pyo3::exceptions::PyException>(py) {
        PENDING_INTERRUPT.with(|p| {
            let mut p = p.borrow_mut();
            if p.is_none() {
                *p = Some(e.clone_ref(py));
            }
        });
    }
}

/// The interrupt kept during the conversion that just ended, if any (Note [interrupts during a
/// conversion]).
pub fn take_interrupt() -> Option<pyo3::PyErr> {
    PENDING_INTERRUPT.with(|p| p.borrow_mut().take())
}

/// Result of a symbolic step.
pub type VResult<T> = Result<T, Unsupported>;

/// One level of a recursive walk over nested values, counted in the thread-local `key` while
/// it lives (Note [deep values] in convert_frame.rs): a walk that enters a level past its limit
/// stops with a graph break instead of exhausting the C stack.
pub(crate) struct NestingLevel(&'static std::thread::LocalKey<std::cell::Cell<usize>>);

impl NestingLevel {
    /// Enters a level of `key`'s walk; returns it (left when dropped) and the depth now.
    pub(crate) fn enter(key: &'static std::thread::LocalKey<std::cell::Cell<usize>>) -> (NestingLevel, usize) {
        let depth = key.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        (NestingLevel(key), depth)
    }
}

impl Drop for NestingLevel {
    fn drop(&mut self) {
        self.0.with(|c| c.set(c.get() - 1));
    }
}

/// `Err(Unsupported)` of a given `GraphBreakKind` with a formatted reason.
#[macro_export]
macro_rules! graph_break {
    ($kind:ident, $($arg:tt)*) => { return Err($crate::symbolic::Unsupported::of($crate::symbolic::graph_break::GraphBreakKind::$kind, format!($($arg)*)).into()) };
}


