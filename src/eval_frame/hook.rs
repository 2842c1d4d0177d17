//! The eval-frame callback and the thread-local callback state.
//!
//! Life of a frame while the thread has a callback (torch's `set_eval_frame` protocol: `None`
//! = off, `False` = run cached code only, a backend callable = compile):
//! 1. throw-ins, and code marked `Skip` (generators, coroutines, library files, transformed code,
//!    frames that failed to convert) run through `_PyEval_EvalFrameDefault`;
//! 2. each `CacheEntry` of the code object whose backend matches has its guards checked; the
//!    first that holds runs (its transformed code is called with the frame's argument slots);
//! 3. on a miss the frame is converted (with the callback cleared so the compiler's own Python
//!    does not recurse), up to `config.cache_size_limit` entries, then it runs eagerly with one
//!    warning naming the failing guard.
//!
//! The callback never unwinds into CPython: conversion runs inside `catch_unwind`, and any
//! failure falls back to the original frame (unless `config.suppress_errors` is off).

use super::cache::{get_extra, set_extra, CacheEntry, ExtraState, FrameStatus};
use super::ffi::{self, InterpreterFrame};
use crate::counters::{bump, c};
use crate::guards::FrameRefs;
use crate::symbolic::code_info::flags;
use crate::symbolic::convert_frame::{convert, ConvertError, FrameInput};
use parking_lot::Mutex;
use pyo3::ffi as pyffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

pyo3::create_exception!(
    dynamo,
    Unsupported,
    pyo3::exceptions::PyRuntimeError,
    "Raised in `optimize(..., nopython=True)` at the first graph break or untraceable frame."
);

thread_local! {
    /// Owned reference to this thread's callback (null when off).
    static CALLBACK: Cell<*mut pyffi::PyObject> = const { Cell::new(std::ptr::null_mut()) };
    /// The C stack address at this thread's first hooked frame (Note [deep recursion]).
    static STACK_TOP: Cell<usize> = const { Cell::new(0) };
    /// How many frames this thread is evaluating through the hook, nested (Note [deep recursion]).
    static HOOK_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The argument tuple of the resume call in flight on this thread, owned by `call_resume`
    /// (Note [resume call lifetimes]); null otherwise.
    /// With the code object of the function called, so that only its frame is matched.
    static RESUME_ARGS: Cell<(*mut pyffi::PyObject, *mut pyffi::PyObject)> = const { Cell::new((std::ptr::null_mut(), std::ptr::null_mut())) };
    /// A frame the hook answers for, how many argument slots it passed to the transformed code
    /// in flight, and that code object (`run_entry`, Note [resume call lifetimes]); null otherwise.
    static TAKEN_OVER: Cell<(*mut InterpreterFrame, usize, *mut pyffi::PyObject)> = const { Cell::new((std::ptr::null_mut(), 0, std::ptr::null_mut())) };
}

/// Note [resume call lifetimes]: in eager, the code after a graph break runs in the one frame
/// that holds its locals, so `del x`, or a rebinding of `x`, frees the object then (a weak
/// reference to it dies, a `WeakKeyDictionary` entry goes, a `__del__` runs, its tensor's
/// memory returns to the allocator). Here that code runs in a resume function called by the
/// transformed frame, and a caller keeps its own references to a call's arguments until the
/// call returns (`_PyEval_Vector` increfs them into the new frame). So the transformed frame
/// clears its locals and temporaries before the call and hands the arguments over in a list;
/// `call_resume` turns the list into a tuple of its own and empties the list, and when the hook
/// is entered for the resume function's frame, which then holds references of its own, the
/// tuple's items are replaced with `None` (`release_resume_args`). The same holds for every frame
/// the hook answers for (the user's function called with a temporary, `f(P())`, and each resume
/// function): `run_entry` calls the transformed code with the frame's argument slots, and once
/// that code's frame holds them the slots of the frame taken over, which never runs, are
/// emptied (`release_taken_over`). The transformed code's frame is left with the only references,
/// as the original frame had. (torch's Dynamo calls resume
/// functions with the values on the caller's stack: they live until the rest of the function
/// returns.)
///
/// What travels (`convert_frame::convert_break`): live locals, and dead ones that hold a user
/// object (they die at a later rebinding, `del` or return, as in eager; dead tensors do not
/// travel, as in torch's Dynamo). A local the trace deleted or rebound lets go of its old value
/// before the breaking instruction runs; a dead argument the trace left alone stays in the
/// transformed frame until it returns. Inside one trace a `del` cannot run finalizers, so `del`
/// of a user object, and rebinding a local that holds an object whose class defines `__del__`,
/// are graph breaks at that instruction (`__del__` and weak-reference callbacks then run where
/// eager runs them); so are the other instructions that may free such an object, or one that
/// weak references point to (Note [observable frees] in src/symbolic/translator.rs). Left as
/// torch's Dynamo has it: rebinding a local that holds a user object without `__del__` or weak
/// references inside a trace frees it at the next break or the return, and objects built by
/// the trace that never leave it are never built. A call that the transformed code makes as
/// the breaking instruction still holds its arguments on the caller's stack until it returns
/// (CPython evaluates every call through the hook then, `_PyEval_Vector`): a helper that
/// rebinds the argument it got as the only reference (`helper(x, P())`) frees it at its return.
///
/// `_C.call_resume(f, args)`: calls `f(*args)` (`args` a list, emptied first) as above.
///
/// Errors: whatever `f` raises.
#[pyfunction]
pub fn call_resume(py: Python<'_>, f: &Bound<'_, PyAny>, args: &Bound<'_, pyo3::types::PyList>) -> PyResult<Py<PyAny>> {
    let tuple = args.to_tuple();
    args.call_method0("clear")?;
    // SAFETY: the GIL is held; NULL (not a Python function) matches no frame.
    let code = unsafe { if pyffi::PyFunction_Check(f.as_ptr()) != 0 { pyffi::PyFunction_GetCode(f.as_ptr()) } else { std::ptr::null_mut() } };
    let previous = RESUME_ARGS.with(|p| p.replace((tuple.as_ptr(), code)));
    // SAFETY: the GIL is held; called from the transformed frame.
    let unlinked = unsafe { UnlinkedCaller::new(py) };
    // SAFETY: `f` and `tuple` are live objects; the GIL is held.
    let result = unsafe { pyffi::PyObject_Call(f.as_ptr(), tuple.as_ptr(), std::ptr::null_mut()) };
    drop(unlinked);
    RESUME_ARGS.with(|p| p.set(previous));
    drop(tuple);
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, result) }.map(Bound::unbind)
}

/// `_C.call_with_hook(callback, f, args, kwargs)`: calls `f(*args, **kwargs)` with this
/// thread's hook callback set to `callback` (None: off), restoring the previous one after: the
/// body of the wrapper `optimize(backend)(fn)` returns. The wrapper's own frame is out of the
/// frame chain meanwhile, so `f`'s frame links to the wrapper's caller, as when the user calls
/// `fn` (Note [resume frames link to the caller]): `warnings.warn(..., stacklevel=2)` in `fn`
/// names the caller's line.
///
/// Errors: whatever `f` raises.
#[pyfunction]
#[pyo3(signature = (callback, f, args, kwargs=None))]
pub fn call_with_hook(py: Python<'_>, callback: &Bound<'_, PyAny>, f: &Bound<'_, PyAny>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
    crate::logging::init();
    let previous = set_eval_frame(py, callback);
    // SAFETY: the GIL is held; called from the wrapper's frame.
    let unlinked = unsafe { UnlinkedCaller::new(py) };
    let kwargs = kwargs.map_or(std::ptr::null_mut(), |k| k.as_ptr());
    // SAFETY: `f`, `args` and `kwargs` (or NULL) are live objects; the GIL is held.
    let result = unsafe { pyffi::PyObject_Call(f.as_ptr(), args.as_ptr(), kwargs) };
    drop(unlinked);
    let _ = set_eval_frame(py, previous.bind(py));
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, result) }.map(Bound::unbind)
}

/// Note [resume frames link to the caller]: eager runs the code after a graph break in the
/// user's frame, whose caller is the frame that called the function. Here it runs in a resume
/// function that the transformed frame calls, one Python frame more: `sys._getframe(1)`,
/// `f_back`, `inspect.stack()`, `warnings.warn(..., stacklevel=2)` and a logging call's
/// `stacklevel` would name the transformed frame (the function itself) where eager names its
/// caller. So `call_resume` takes the transformed frame out of the thread's frame chain while
/// the resume function runs: it sets the thread's current frame to the frame before the
/// transformed one, so the resume frame links to the caller (CPython's eval loop links a new
/// frame to the current one on entry and sets the current one back to that link on exit), and
/// puts the transformed frame back when the call returns. "Before" skips 3.12/3.13's shim entry
/// frame (`ffi::caller_frame`): CPython never has two shims in a row, and 3.13 crashed when the
/// resume frame's own shim followed it. The transformed frame is suspended in the call
/// meanwhile; nothing reads it. An exception from the resume function still passes through it
/// on the way out, once it is current again (its traceback entry is dropped:
/// `PyCodegen::drop_own_traceback_entry`).
struct UnlinkedCaller {
    /// This thread's current-frame field, or null when nothing was changed.
    slot: *mut *mut InterpreterFrame,
    /// The frame to put back.
    me: *mut InterpreterFrame,
}

impl UnlinkedCaller {
    /// Takes the current frame out of the chain (nothing, when the thread state does not look
    /// as expected); dropping the guard puts it back.
    ///
    /// # Safety
    /// The GIL is held; called from a C function the current frame calls, and dropped once that
    /// call has returned, before control goes back to the frame.
    unsafe fn new(_py: Python<'_>) -> Self {
        let none = UnlinkedCaller { slot: std::ptr::null_mut(), me: std::ptr::null_mut() };
        let slot = ffi::current_frame_slot(pyffi::PyThreadState_Get());
        if slot.is_null() {
            return none;
        }
        let me = *slot;
        if me.is_null() || pyffi::PyCode_Check(ffi::code(me)) == 0 {
            return none;
        }
        let caller = ffi::caller_frame(me);
        if caller.is_null() {
            return none;
        }
        *slot = caller;
        UnlinkedCaller { slot, me }
    }
}

impl Drop for UnlinkedCaller {
    fn drop(&mut self) {
        if !self.slot.is_null() {
            // SAFETY: `new`'s contract: the call made meanwhile has returned (its frames have
            // set the current frame back to `caller`), the GIL is held.
            unsafe { *self.slot = self.me };
        }
    }
}

/// Empties the first `n` slots of `taken_over`, a frame the hook answers for, when `frame` is the
/// transformed code's frame `run_entry` made for it (its code is `code`) and holds the same
/// objects in its first `n` slots (Note [resume call lifetimes]). `taken_over` never runs; CPython clears it later and
/// skips empty slots.
///
/// # Safety
/// Both are live frames of this thread; the GIL is held.
unsafe fn release_taken_over(frame: *mut InterpreterFrame, taken_over: *mut InterpreterFrame, n: usize, code: *mut pyffi::PyObject) {
    if ffi::code(frame) != code {
        return;
    }
    for i in 0..n {
        if ffi::local(frame, i) != ffi::local(taken_over, i) {
            return;
        }
    }
    for i in 0..n {
        let slot = (*taken_over).localsplus.as_mut_ptr().add(i);
        let old = *slot;
        *slot = std::ptr::null_mut();
        pyffi::Py_XDECREF(old);
    }
}

/// Replaces the items of `args`, `call_resume`'s tuple, with `None` when `frame` is the frame
/// made for that call: its code is `code` and its first argument slots hold exactly the tuple's
/// items (Note [resume call lifetimes]). The frame holds references of its own, so nothing is freed here.
///
/// # Safety
/// `frame` is the frame the hook was entered for and `args` a live tuple; the GIL is held.
unsafe fn release_resume_args(frame: *mut InterpreterFrame, args: *mut pyffi::PyObject, code: *mut pyffi::PyObject) {
    if code.is_null() || ffi::code(frame) != code {
        return;
    }
    let n = pyffi::PyTuple_GET_SIZE(args);
    for i in 0..n {
        if ffi::local(frame, i as usize) != pyffi::PyTuple_GET_ITEM(args, i) {
            return;
        }
    }
    for i in 0..n {
        let old = pyffi::PyTuple_GET_ITEM(args, i);
        pyffi::Py_INCREF(pyffi::Py_None());
        pyffi::PyTuple_SET_ITEM(args, i, pyffi::Py_None());
        pyffi::Py_DECREF(old);
    }
}

/// Most frames evaluated through the hook inside one another before the hook is taken off for
/// the frames under them (Note [deep recursion]). CPython 3.12 counts each such C-level call
/// against its fixed C recursion limit, and raised `RecursionError` near 750 nested Python
/// calls where eager, whose Python-to-Python calls stay in one C frame, goes on.
const DEEP_FRAMES: u32 = 200;

/// Note [deep recursion]: with a PEP 523 hook installed, CPython evaluates every Python call
/// through the hook, a C call per Python frame (without one, 3.11+ runs Python-to-Python calls
/// inside one C frame). A program that raises the recursion limit and recurses thousands of
/// frames deep (a tree walker) then overflows the C stack (3.11) or meets 3.12's C recursion
/// limit, where eager Python returns. Past `DEEP_FRAMES` nested hooked frames or
/// `DEEP_STACK_BYTES` of C stack below the first hooked frame, a frame runs with the hook taken
/// off the interpreter, so the calls under it are plain Python calls again, run eagerly (what
/// they would do anyway, uncompiled); the hook is put back when that frame returns. Other
/// threads run uncompiled meanwhile, which changes no result.
const DEEP_STACK_BYTES: usize = 3 << 20;

/// Whether this thread's C stack is `DEEP_STACK_BYTES` below its first hooked frame.
fn stack_is_deep() -> bool {
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    STACK_TOP.with(|t| {
        let top = t.get();
        if top == 0 || here > top {
            t.set(here);
            return false;
        }
        top - here > DEEP_STACK_BYTES
    })
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Filename prefixes: (prefix, skip). The longest matching prefix decides whether a file's
/// frames are compiled: torch, dynamo and the standard library are skipped, while third-party
/// packages installed beneath the standard library folder (site-packages) are kept.
fn file_rules() -> &'static Mutex<Vec<(String, bool)>> {
    static P: OnceLock<Mutex<Vec<(String, bool)>>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(Vec::new()))
}

/// Code objects compiled even though their file is skipped (the `forward` of a module passed to
/// `optimize`, which may be torch's own, e.g. `nn.Sequential.forward`). Survives `reset()`.
fn forced() -> &'static Mutex<Vec<Py<PyAny>>> {
    static F: OnceLock<Mutex<Vec<Py<PyAny>>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(Vec::new()))
}

/// Marks `code` to be compiled whatever file it is in.
pub fn force_compile(code: &Bound<'_, PyAny>) {
    let mut f = forced().lock();
    if !f.iter().any(|c| c.as_ptr() == code.as_ptr()) {
        f.push(code.clone().unbind());
    }
}

/// Sets the folders whose frames are skipped and the (more specific) folders kept anyway.
pub fn set_skip_prefixes(skip: Vec<String>, keep: Vec<String>) {
    let mut rules: Vec<(String, bool)> = skip.into_iter().map(|p| (p, true)).collect();
    rules.extend(keep.into_iter().map(|p| (p, false)));
    *file_rules().lock() = rules;
}

fn skipped_file(filename: &str) -> bool {
    file_rules()
        .lock()
        .iter()
        .filter(|(p, _)| filename.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, skip)| *skip)
        .unwrap_or(false)
}

/// Sets this thread's callback and returns the previous one (`None` when off). Installs the
/// hook on first use.
pub fn set_eval_frame(py: Python<'_>, callback: &Bound<'_, PyAny>) -> Py<PyAny> {
    let was_on = CALLBACK.with(|cb| !cb.get().is_null());
    if !was_on && !callback.is_none() {
        foreign_hook_switch(py, true);
    }
    if !INSTALLED.swap(true, Ordering::SeqCst) {
        unsafe {
            let interp = pyffi::PyInterpreterState_Get();
            ffi::_PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
        }
    }
    let new = if callback.is_none() { std::ptr::null_mut() } else { callback.clone().into_ptr() };
    let old = CALLBACK.with(|cb| cb.replace(new));
    if !old.is_null() && new.is_null() {
        foreign_hook_switch(py, false);
    }
    if old.is_null() {
        py.None()
    } else {
        unsafe { Bound::from_owned_ptr(py, old).unbind() }
    }
}

// Note [torch's hook inside a region]: torch.compile installs its own PEP 523 function over
// ours while its callback is set (torch/csrc/dynamo/eval_frame.c) and evaluates every frame
// through it first. A dynamo region entered under torch.compile (a function wrapped by
// `optimize` that a torch.compile'd function calls, after torch's trace broke at the wrapper)
// then had both hooks on its frames: torch's Dynamo took over the frames our hook had
// transformed and failed on their generated code (InternalTorchDynamoError "unhashable type:
// 'slice'"). Inside a region only our hook runs: when this thread's callback goes from off to
// on while another PEP 523 function is installed, torch's callback is switched off
// (`torch._C._dynamo.eval_frame.set_eval_frame(None)`, which hands the interpreter back to
// ours) and kept on a stack; when ours goes off again, torch's is set back. The switches nest
// as our on/off transitions do (a `disable` inside a region gives torch its frames back for
// that stretch). Without torch.compile running, the cost is one comparison per region entry.
// The wrapper `optimize` returns also carries `_torchdynamo_inline`, so a torch.compile trace
// that reaches it inlines the user's function instead of breaking (torch's nesting rule: the
// outer compile takes the inner function's frames).
//
// Note [torch's region inside ours]: the other way round, code that runs as ordinary Python
// inside our region may call torch.compile itself (the eager implementations of torch's
// higher-order operators, `associative_scan` and `cond`, compile their function at a graph break
// of ours). torch then installs its PEP 523 function over ours and hands the frames it does not
// take to the function it replaced, ours. Our hook converted such a frame (a user's combine
// function) and ran the transformed code as a new frame, which torch's hook then took and traced:
// torch's Dynamo failed on our generated code (InternalTorchDynamoError, "cannot access local
// variable '__shared0'"), where eager runs. So while another PEP 523 function is installed over
// ours, ours passes every frame to the default evaluation: the region inside is torch's. The
// check is one load and one comparison per hooked frame.

// Note [a stale foreign hook]: torch keeps its PEP 523 function installed while it counts a
// thread as running its Dynamo. A torch.compile'd call whose compile raised (inside one of our
// regions, or not) leaves that count behind: torch's function stays over ours for the rest of
// the process with its callback off, and runs every frame the default way. Ours saw no frame
// again, and nothing compiled after it (CPython 3.13.0's "guards may run slower" warning, an
// error under pytest, failed 232 later tests so). Nor can ours simply go back over it for good:
// the same state, torch's function installed and its callback off, is also the live one while
// torch runs a frame it skips (a region entered under torch.compile, Note [torch's hook inside
// a region]), and torch does not put its function back when its callback comes on again inside
// that frame. So on region entry, after torch's callback is switched off, a foreign function
// still installed is replaced by ours until the region ends, then put back: inside our regions
// only ours runs, and outside them the interpreter is as torch left it.

/// One region entry's foreign state (Note [torch's hook inside a region], Note [a stale foreign
/// hook]): torch's callback switched off (`None` where none was on), and the foreign PEP 523
/// function replaced by ours for the region (`None` where ours was already installed).
struct SuspendedForeign {
    callback: Option<Py<PyAny>>,
    replaced: Option<ffi::EvalFrameFn>,
}

thread_local! {
    /// Region entries' foreign state, innermost last.
    static SUSPENDED_FOREIGN: std::cell::RefCell<Vec<SuspendedForeign>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `torch._C._dynamo.eval_frame.set_eval_frame`, when torch has it.
fn torch_set_eval_frame(py: Python<'_>) -> Option<&Py<PyAny>> {
    static F: pyo3::sync::PyOnceLock<Option<Py<PyAny>>> = pyo3::sync::PyOnceLock::new();
    F.get_or_init(py, || {
        py.import("torch")
            .and_then(|t| t.getattr("_C")?.getattr("_dynamo")?.getattr("eval_frame")?.getattr("set_eval_frame"))
            .ok()
            .map(Bound::unbind)
    })
    .as_ref()
}

/// The interpreter's PEP 523 function when it is neither ours nor CPython's default.
fn foreign_eval_frame() -> Option<ffi::EvalFrameFn> {
    // SAFETY: the GIL is held (every caller holds it); reading the interpreter's eval-frame function.
    let current = unsafe { ffi::_PyInterpreterState_GetEvalFrameFunc(pyffi::PyInterpreterState_Get()) };
    let at = current as usize;
    (at != eval_frame as *const () as usize && at != ffi::_PyEval_EvalFrameDefault as *const () as usize).then_some(current)
}

/// This thread's callback went on (`on`) or off: switches torch's frame hook off for the region
/// or back on after it (Note [torch's hook inside a region], Note [a stale foreign hook]).
fn foreign_hook_switch(py: Python<'_>, on: bool) {
    // The hook goes off on a frame's way out, also while its exception is pending: torch's
    // functions (and a first import of torch) run with the exception put aside, then it is set
    // again (a pending exception cleared there reached the caller as SystemError "attempted to
    // fetch exception but none was set").
    let pending = PyErr::take(py);
    foreign_hook_switch_inner(py, on);
    if let Some(e) = pending {
        e.restore(py);
    }
}

fn foreign_hook_switch_inner(py: Python<'_>, on: bool) {
    if on {
        let mut entry = SuspendedForeign { callback: None, replaced: None };
        if foreign_eval_frame().is_some() {
            if let Some(set) = torch_set_eval_frame(py) {
                match set.bind(py).call1((py.None(),)) {
                    Ok(prev) if !prev.is_none() => entry.callback = Some(prev.unbind()),
                    Ok(_) => {}
                    Err(e) => tracing::debug!("switching torch's frame hook off failed: {e}"),
                }
            }
            // Still installed: a stale one, or torch's while it runs a frame it skips.
            if let Some(f) = foreign_eval_frame() {
                entry.replaced = Some(f);
                // SAFETY: the GIL is held; the interpreter's eval-frame function is set.
                unsafe { ffi::_PyInterpreterState_SetEvalFrameFunc(pyffi::PyInterpreterState_Get(), eval_frame) };
            }
        }
        SUSPENDED_FOREIGN.with(|s| s.borrow_mut().push(entry));
    } else if let Some(entry) = SUSPENDED_FOREIGN.with(|s| s.borrow_mut().pop()) {
        if let Some(f) = entry.replaced {
            // Put back only over ours: a function installed over ours during the region is
            // torch's again, whose own bookkeeping already counts it.
            if foreign_eval_frame().is_none() {
                // SAFETY: the GIL is held; `f` was the interpreter's function at region entry.
                unsafe { ffi::_PyInterpreterState_SetEvalFrameFunc(pyffi::PyInterpreterState_Get(), f) };
            }
        }
        if let Some(prev) = entry.callback {
            if let Some(set) = torch_set_eval_frame(py) {
                if let Err(e) = set.bind(py).call1((prev,)) {
                    tracing::debug!("switching torch's frame hook back on failed: {e}");
                }
            }
        }
    }
}

/// Calls the wrapped callable with this thread's hook off: what a backend returns runs as
/// compiled code, never traced again (torch runs compiled graphs the same way).
#[pyclass(frozen)]
pub struct RunWithoutHook {
    inner: Py<PyAny>,
}

impl RunWithoutHook {
    pub fn new(inner: Py<PyAny>) -> Self {
        RunWithoutHook { inner }
    }
}

#[pymethods]
impl RunWithoutHook {
    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let saved = CALLBACK.with(|c| c.replace(std::ptr::null_mut()));
        let r = self.inner.call1(py, args);
        CALLBACK.with(|c| c.set(saved));
        r
    }
}

/// Note [torch's disable]: `torch.compiler.disable` (`torch._dynamo.disable`) wraps a function in
/// torch's `DisableContext._fn`, which turns torch's own frame hook off around the call. Ours
/// is another hook, so the wrapper's code (one code object for every such wrapper) is marked
/// here to run with our hook off until it returns: the function and everything it calls run
/// as ordinary Python, as under torch.compile (`is_compiling()` is False inside), and a trace
/// that meets such a call breaks there.
pub fn mark_skip_recursive(py: Python<'_>, code: &Bound<'_, PyAny>) {
    mark_status(py, code, FrameStatus::SkipRecursive);
}

/// Sets the status of `code`, classifying it first if the hook has not seen it.
fn mark_status(py: Python<'_>, code: &Bound<'_, PyAny>, status: FrameStatus) {
    unsafe {
        let st = get_extra(code.as_ptr());
        if st.is_null() {
            set_extra(py, code.as_ptr(), ExtraState { status, n_arg_slots: 0, entries: vec![], warned_limit: false, n_graphless: 0, n_with_ops: 0, dim_state: None, static_only: false });
        } else {
            (*st).status = status;
        }
    }
}

/// Marks `code` so that its frames always run eagerly (`dynamo.disable`, transformed code).
pub fn mark_skip(py: Python<'_>, code: &Bound<'_, PyAny>) {
    mark_status(py, code, FrameStatus::Skip);
}

/// Note [code without a file]: code compiled from a string (`python -c`, `exec`, `eval`,
/// `<stdin>`, notebook cells) is the user's and is compiled, as torch.compile compiles it. The
/// exceptions are code the interpreter or a library generates: frozen standard-library modules
/// (`<frozen importlib._bootstrap>`), torch.fx's generated `forward`s (`<eval_with_key>.N`,
/// torch's own graphs), and the `__new__` lambdas `collections.namedtuple` builds with `eval`
/// (file `<string>`, whose only name is `_tuple_new`; torch skips them too), and the methods
/// `dataclasses` generates.
fn generated_by_library(code: &Bound<'_, PyAny>, filename: &str) -> bool {
    if !filename.starts_with('<') {
        return false;
    }
    if filename.starts_with("<frozen ") || filename.starts_with("<eval_with_key>") {
        return true;
    }
    filename == "<string>"
        && (code
            .getattr("co_names")
            .and_then(|n| n.extract::<Vec<String>>())
            .is_ok_and(|n| n.len() == 1 && n[0] == "_tuple_new")
            // The methods `dataclasses` generates (`__init__`, `__eq__`, ...; qualname
            // `__create_fn__.<locals>.__eq__`): inlined where a traced frame calls them, never
            // worth a frame of their own.
            || code
                .getattr("co_qualname")
                .and_then(|n| n.extract::<String>())
                .is_ok_and(|n| n.starts_with("__create_fn__.<locals>.")))
}

/// Note [built-in module entry points]: torch's files are skipped as frame entry points, so in
/// a `with dynamo.optimize(...)` block a model made only of torch's own modules
/// (`nn.Sequential(nn.Linear(..), nn.ReLU(), ..)`) compiled nothing: the block's own frame was
/// already running, and every frame its `model(x)` entered (`_wrapped_call_impl`, `_call_impl`,
/// `Sequential.forward`, `Linear.forward`) is torch's. `optimize(model)` compiles such a
/// `forward` by naming it (`force_compile`); in a block, the `forward` of a class of
/// `torch.nn.modules` entered with the hook on is an entry point in the same way: its frame is
/// compiled, and the submodules it calls are inlined into its graph. Classes elsewhere in torch
/// (`torch.nn.parallel`, `torch.distributed`, torch.fx's generated modules) stay skipped.
///
/// Whether `frame`, whose code `code` is seen for the first time, is the `forward` of a class
/// defined in `torch.nn.modules`, called on a module (its first argument).
unsafe fn builtin_module_forward(py: Python<'_>, code: &Bound<'_, PyAny>, frame: *mut InterpreterFrame) -> bool {
    let named_forward = code.getattr("co_name").and_then(|n| n.extract::<String>()).is_ok_and(|n| n == "forward");
    let takes_self = code.getattr("co_argcount").and_then(|n| n.extract::<usize>()).is_ok_and(|n| n >= 1);
    let in_skipped_file = code.getattr("co_filename").and_then(|f| f.extract::<String>()).is_ok_and(|f| skipped_file(&f));
    if !(named_forward && takes_self && in_skipped_file) {
        return false;
    }
    let this = ffi::local(frame, 0);
    if this.is_null() {
        return false;
    }
    let this = Bound::from_borrowed_ptr(py, this);
    let Ok(module_type) = py.import("torch.nn").and_then(|m| m.getattr("Module")) else { return false };
    if !this.is_instance(&module_type).unwrap_or(false) {
        return false;
    }
    // The class whose `forward` this code is: the first in the MRO defining it.
    let Ok(mro) = this.get_type().getattr("__mro__").and_then(|m| m.extract::<Vec<Bound<'_, PyAny>>>()) else { return false };
    for cls in mro {
        let Ok(f) = cls.getattr("__dict__").and_then(|d| d.get_item("forward")) else { continue };
        if !f.getattr("__code__").is_ok_and(|c| c.is(code)) {
            continue;
        }
        return cls.getattr("__module__").and_then(|m| m.extract::<String>()).is_ok_and(|m| m.starts_with("torch.nn.modules."));
    }
    false
}

/// Classifies a code object seen for the first time.
fn classify(py: Python<'_>, code: &Bound<'_, PyAny>) -> PyResult<ExtraState> {
    let co_flags: u32 = code.getattr("co_flags")?.extract()?;
    let argcount: usize = code.getattr("co_argcount")?.extract()?;
    let kwonly: usize = code.getattr("co_kwonlyargcount")?.extract()?;
    let n_arg_slots = argcount + kwonly + usize::from(co_flags & flags::CO_VARARGS != 0) + usize::from(co_flags & flags::CO_VARKEYWORDS != 0);
    let filename: String = code.getattr("co_filename")?.extract()?;
    let name: String = code.getattr("co_name")?.extract()?;
    let generator = flags::CO_GENERATOR | flags::CO_COROUTINE | flags::CO_ASYNC_GENERATOR | flags::CO_ITERABLE_COROUTINE;
    let is_forced = forced().lock().iter().any(|c| c.as_ptr() == code.as_ptr());
    let skip = co_flags & generator != 0
        || co_flags & flags::CO_OPTIMIZED == 0
        || generated_by_library(code, &filename)
        || name.starts_with("__compiled_fn")
        // A mode's or subclass's handler, entered by torch's dispatch with the arguments of one
        // call (Note [user modes]); inside a traced frame the handler is inlined instead.
        || name == "__torch_function__"
        || name == "__torch_dispatch__"
        || (!is_forced && skipped_file(&filename));
    let _ = py;
    Ok(ExtraState { status: if skip { FrameStatus::Skip } else { FrameStatus::Compile }, n_arg_slots, entries: vec![], warned_limit: false, n_graphless: 0, n_with_ops: 0, dim_state: None, static_only: false })
}

unsafe fn default_eval(tstate: *mut pyffi::PyThreadState, frame: *mut InterpreterFrame, throwflag: c_int) -> *mut pyffi::PyObject {
    ffi::_PyEval_EvalFrameDefault(tstate, frame, throwflag)
}

/// What [`eval_frame_inner`] decided for a frame.
enum Outcome {
    /// Evaluate the frame normally (`_PyEval_EvalFrameDefault`).
    Default,
    /// Evaluate the frame normally with the hook off until it returns (Note [torch's disable]).
    Unhooked,
    /// The hook answered for the frame: its result, or NULL with an exception set.
    Done(*mut pyffi::PyObject),
}

/// The PEP 523 frame evaluator. A frame the hook answers for itself (a cached or freshly
/// converted replacement ran, or an error is raised) is finished as the running CPython
/// requires (`ffi::finish_taken_over`: nothing on 3.11, clear and pop on 3.12).
unsafe extern "C" fn eval_frame(tstate: *mut pyffi::PyThreadState, frame: *mut InterpreterFrame, throwflag: c_int) -> *mut pyffi::PyObject {
    let (resume_args, resume_code) = RESUME_ARGS.with(|p| p.replace((std::ptr::null_mut(), std::ptr::null_mut())));
    if !resume_args.is_null() {
        release_resume_args(frame, resume_args, resume_code);
    }
    let (taken_over, n_args, code) = TAKEN_OVER.with(|p| p.replace((std::ptr::null_mut(), 0, std::ptr::null_mut())));
    if !taken_over.is_null() {
        release_taken_over(frame, taken_over, n_args, code);
    }
    let depth = HOOK_DEPTH.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v
    });
    let result = if depth >= DEEP_FRAMES || stack_is_deep() {
        // Note [deep recursion].
        let interp = pyffi::PyInterpreterState_Get();
        ffi::_PyInterpreterState_SetEvalFrameFunc(interp, ffi::_PyEval_EvalFrameDefault);
        let result = default_eval(tstate, frame, throwflag);
        ffi::_PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
        result
    } else {
        let cb = CALLBACK.with(|c| c.get());
        // Note [torch's region inside ours]: called as another hook's previous function.
        let chained = !cb.is_null() && ffi::_PyInterpreterState_GetEvalFrameFunc(pyffi::PyInterpreterState_Get()) as usize != eval_frame as *const () as usize;
        if cb.is_null() || throwflag != 0 || chained || !ffi::can_take_over(tstate, frame) {
            default_eval(tstate, frame, throwflag)
        } else {
            match eval_frame_inner(frame, cb) {
                Outcome::Default => default_eval(tstate, frame, throwflag),
                Outcome::Unhooked => {
                    let saved = CALLBACK.with(|c| c.replace(std::ptr::null_mut()));
                    let result = default_eval(tstate, frame, throwflag);
                    CALLBACK.with(|c| c.set(saved));
                    result
                }
                Outcome::Done(result) => {
                    ffi::finish_taken_over(tstate, frame);
                    result
                }
            }
        }
    };
    HOOK_DEPTH.with(|d| d.set(depth));
    result
}

/// Note [user modes]: a `TorchFunctionMode` or `TorchDispatchMode` the user made active (an
/// op logger, `FlopCounterMode`) sees every torch call made while it is on. Compiled code makes
/// other calls than eager (tracing's fake-tensor runs, guard reads, fused kernels the mode never
/// sees), so while such a mode is on, frames run as ordinary Python and the mode sees exactly
/// eager's calls. torch's own `DeviceContext` (`torch.set_default_device`, `with
/// torch.device(...)`) is not such a mode: it only fills in the device of factory calls, which
/// the trace models.
fn user_mode_active(py: Python<'_>) -> bool {
    static FNS: pyo3::sync::PyOnceLock<Option<(Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>)>> = pyo3::sync::PyOnceLock::new();
    let Some((tf_on, tf_stack, dispatch_len, device_ctx)) = FNS
        .get_or_init(py, || {
            let c = py.import("torch._C").ok()?;
            let stack = py.import("torch.overrides").ok()?.getattr("_get_current_function_mode_stack").ok()?;
            let device_ctx = py.import("torch.utils._device").ok()?.getattr("DeviceContext").ok()?;
            Some((c.getattr("_is_torch_function_mode_enabled").ok()?.unbind(), stack.unbind(), c.getattr("_len_torch_dispatch_stack").ok()?.unbind(), device_ctx.unbind()))
        })
        .as_ref()
    else {
        return false;
    };
    if dispatch_len.bind(py).call0().and_then(|n| n.extract::<usize>()).is_ok_and(|n| n > 0) {
        return true;
    }
    if !tf_on.bind(py).call0().is_ok_and(|b| b.is_truthy().unwrap_or(false)) {
        return false;
    }
    match tf_stack.bind(py).call0().and_then(|s| s.try_iter().map(|it| it.flatten().collect::<Vec<_>>())) {
        Ok(modes) => modes.iter().any(|m| !m.is_instance(device_ctx.bind(py)).unwrap_or(false)),
        Err(_) => true,
    }
}

unsafe fn eval_frame_inner(frame: *mut InterpreterFrame, cb: *mut pyffi::PyObject) -> Outcome {
    let code = ffi::code(frame);
    if let Some(st) = get_extra(code).as_ref() {
        match st.status {
            FrameStatus::Skip => return Outcome::Default,
            FrameStatus::SkipRecursive => return Outcome::Unhooked,
            FrameStatus::Compile => {}
        }
    }
    // Note [references dropped in the hook]: PyO3 defers the decref of a `Py` dropped while the
    // thread is not attached in its own count (which `Python::assume_attached` does not raise)
    // to the next time some thread attaches: an object the conversion held (a value read while
    // tracing, a graph input) then outlived its last reference in the frame, and its `__del__`
    // ran at an unrelated later call (`dynamo.optimize`'s `set_eval_frame` on exit). Attached
    // for real, every reference the hook drops goes at once, as eager frees it.
    Python::attach(|py| eval_frame_attached(py, frame, cb))
}

unsafe fn eval_frame_attached(py: Python<'_>, frame: *mut InterpreterFrame, cb: *mut pyffi::PyObject) -> Outcome {
    let code = ffi::code(frame);
    let mut st = get_extra(code);
    if st.is_null() {
        let code_b = Bound::from_borrowed_ptr(py, code);
        if builtin_module_forward(py, &code_b, frame) {
            force_compile(&code_b);
        }
        match classify(py, &code_b) {
            Ok(s) => st = set_extra(py, code, s),
            Err(e) => {
                e.restore(py);
                pyffi::PyErr_Clear();
                return Outcome::Default;
            }
        }
        if st.is_null() || (*st).status == FrameStatus::Skip {
            return Outcome::Default;
        }
    }
    if user_mode_active(py) {
        // Note [user modes] (checked once the frame is known to be one we compile: the check
        // itself runs torch's Python, whose frames are skipped).
        pyffi::PyErr_Clear();
        return Outcome::Default;
    }
    bump(&c::frames_seen);
    let state = &mut *st;
    let run_only = cb == pyffi::Py_False();
    let func = ffi::func(frame);
    let refs = FrameRefs {
        locals: ffi::locals_ptr(frame),
        closure: if func.is_null() { std::ptr::null_mut() } else { ffi::function_closure(func) },
        globals: ffi::globals(frame),
        builtins: ffi::builtins(frame),
    };
    let globals = ffi::globals(frame) as usize;
    for i in 0..state.entries.len() {
        let e = &state.entries[i];
        if (run_only || e.backend == cb as usize) && e.globals == globals && e.guards.check(py, &refs, false).is_ok() {
            bump(&c::cache_hits);
            if i != 0 {
                // Most recently hit first, as torch's cache does.
                let e = state.entries.remove(i);
                state.entries.insert(0, e);
            }
            return Outcome::Done(run_entry(py, &mut state.entries[0], frame, state.n_arg_slots));
        }
    }
    bump(&c::cache_misses);
    if run_only {
        return Outcome::Default;
    }
    let same_backend: Vec<usize> = (0..state.entries.len()).filter(|&i| state.entries[i].backend == cb as usize).collect();
    // Note [recompile limit per object]: as torch's cache_size.py counts, the limit applies to
    // the entries compiled for the objects this frame has in its identity-guarded locals. A
    // module is guarded by its type (Note [modules guarded by type] in
    // `src/symbolic/builder.rs`), but a method whose trace used its module's identity is
    // compiled once per instance, `ID_MATCH` on `L['self']`: before, a 12-layer model reached
    // the limit of 8 at the ninth layer and ran its last four layers eagerly (and every module
    // frame of the same code after them). Past the limit for these objects this call runs eagerly, and the
    // entries of other objects stay in use; past `accumulated_cache_size_limit` entries in all
    // the code runs eagerly from then on.
    // Without identity-guarded arguments the limit is the code's, as before: it runs eagerly
    // from then on (no guard checks on later calls).
    let mut object_specific = false;
    let same_objects = same_backend
        .iter()
        .filter(|&&i| {
            let ids = state.entries[i].guards.id_matched_locals(py);
            object_specific |= !ids.is_empty();
            ids.iter().all(|&(idx, ptr)| {
                // Only arguments are guarded at frame entry; another slot counts as the same.
                (idx as usize) >= state.n_arg_slots || ptr == Some(ffi::local(frame, idx as usize) as usize)
            })
        })
        .count();
    let over_total = same_backend.len() >= crate::config::accumulated_cache_size_limit();
    let limited = over_total || same_objects >= crate::config::cache_size_limit();
    if limited && state.warned_limit {
        if over_total || !object_specific {
            state.status = FrameStatus::Skip;
        }
        return Outcome::Default;
    }
    let failures: Vec<String> = same_backend
        .iter()
        .filter_map(|&i| state.entries[i].guards.check(py, &refs, true).err().flatten())
        .map(|f| f.to_string())
        .collect();
    let failure = (!failures.is_empty()).then(|| failures.join("\n    - "));
    let code_b = Bound::from_borrowed_ptr(py, code);
    let qual = code_b.getattr("co_qualname").map(|q| q.to_string()).unwrap_or_default();
    let filename = code_b.getattr("co_filename").map(|q| q.to_string()).unwrap_or_default();
    let lineno = code_b.getattr("co_firstlineno").map(|q| q.to_string()).unwrap_or_default();
    if limited {
        if !state.warned_limit {
            state.warned_limit = true;
            bump(&c::cache_limit_hits);
            // The newest entry's failure is the last reason (entries are kept newest first);
            // the full list goes to the `recompiles` log, as torch's message points there.
            let why = failures.first().cloned().unwrap_or_default();
            let msg = format!(
                "dynamo: cache_size_limit ({}) reached for function '{qual}' ({filename}:{lineno}); running it eagerly from now on.\n   last reason: {why}\nTo log all recompilation reasons, use DYNAMO_LOGS=\"recompiles\".",
                crate::config::cache_size_limit()
            );
            tracing::warn!(target: "dynamo::recompiles", "{msg}");
            crate::logging::recompile(msg.clone());
            let warning = py.get_type::<pyo3::exceptions::PyUserWarning>();
            if let Ok(cmsg) = std::ffi::CString::new(msg) {
                if let Err(e) = PyErr::warn(py, &warning, &cmsg, user_stacklevel(py)) {
                    // A warnings filter turned the warning into an error: surface it (set
                    // again: returning NULL with no exception set is a SystemError).
                    e.restore(py);
                    return Outcome::Done(std::ptr::null_mut());
                }
            }
        }
        if over_total || !object_specific {
            state.status = FrameStatus::Skip;
        }
        return Outcome::Default;
    }

    // Convert, with the hook off for this thread so the compiler's Python runs normally.
    let saved = CALLBACK.with(|c| c.replace(std::ptr::null_mut()));
    let backend = Bound::from_borrowed_ptr(py, cb);
    let input = FrameInput {
        code: code_b.clone(),
        globals: Bound::from_borrowed_ptr(py, ffi::globals(frame)).cast_into::<PyDict>().unwrap(),
        builtins: Bound::from_borrowed_ptr(py, ffi::builtins(frame)).cast_into::<PyDict>().unwrap(),
        closure: if refs.closure.is_null() { None } else { Bound::from_borrowed_ptr(py, refs.closure).cast_into::<PyTuple>().ok() },
        args: (0..state.n_arg_slots).map(|i| Bound::from_borrowed_ptr(py, ffi::local(frame, i))).collect(),
        grad_enabled: py.import("torch").and_then(|t| t.call_method0("is_grad_enabled")?.extract()).unwrap_or(true),
        dynamic: crate::symbolic::output_graph::DynamicPolicy { mode: if state.static_only { Some(false) } else { dynamic_mode(&backend) }, previous: state.dim_state.clone() },
    };
    let masked = mask_saved_tensor_hooks(py);
    let _ = crate::symbolic::take_interrupt();
    let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| convert(py, &input, &backend)));
    if masked {
        unmask_saved_tensor_hooks(py);
    }
    // Note [interrupts during a conversion]: a KeyboardInterrupt (or another BaseException that
    // is not an Exception) met while converting stops the program as in eager; so does one
    // the backend raised, whatever `config.suppress_errors` says.
    let interrupt = crate::symbolic::take_interrupt().or_else(|| match &converted {
        Ok(Err(ConvertError::Backend(e) | ConvertError::Internal(e))) if !e.is_instance_of::<pyo3::exceptions::PyException>(py) => Some(e.clone_ref(py)),
        _ => None,
    });
    if let Some(e) = interrupt {
        drop(input);
        CALLBACK.with(|c| c.set(saved));
        e.restore(py);
        return Outcome::Done(std::ptr::null_mut());
    }
    drop(input);
    if crate::debug::enabled() {
        // Still with the hook off: the dump's own Python must not be traced.
        dump_conversion(py, &code_b, &converted);
    }
    CALLBACK.with(|c| c.set(saved));
    let st = get_extra(code);
    if st.is_null() {
        return Outcome::Default;
    }
    let state = &mut *st;
    let nopython = backend.getattr("_dynamo_nopython").and_then(|v| v.is_truthy()).unwrap_or(false);
    if nopython {
        let reason = match &converted {
            Ok(Ok(conv)) => conv.graph_break.clone(),
            Ok(Err(ConvertError::Unsupported(u))) => Some(u.to_string()),
            _ => None,
        };
        if let Some(reason) = reason {
            Unsupported::new_err(format!("graph break in {qual} ({filename}:{lineno}) with nopython=True: {reason}")).restore(py);
            return Outcome::Done(std::ptr::null_mut());
        }
    }
    match converted {
        Ok(Ok(conv)) => {
            bump(&c::compiles);
            // Automatic dynamic: remember the sizes (and dynamic dimensions) this compile saw.
            state.static_only |= conv.static_only;
            let seen = state.dim_state.get_or_insert_with(Default::default);
            for (src, dims) in &conv.dim_state {
                seen.insert(src.clone(), dims.clone());
            }
            if conv.graph_module.is_some() {
                bump(&c::graphs);
            }
            if !same_backend.is_empty() {
                bump(&c::recompiles);
                let why = failure.map(|f| f.to_string()).unwrap_or_else(|| "no guard failure recorded".into());
                crate::logging::recompile(format!("Recompiling function {qual} in {filename}:{lineno}\n    triggered by the following guard failure(s):\n    - {why}"));
            }
            if let Some(reason) = &conv.graph_break {
                bump(&c::graph_breaks);
                tracing::info!(target: "dynamo::graph_breaks", "graph break in {qual} ({filename}:{lineno}): {reason}");
                crate::logging::break_reason(format!("{qual}: {reason}"));
            }
            tracing::info!(target: "dynamo::graph", "graph for {qual} ({filename}:{lineno}):\n{}", conv.graph_text);
            tracing::info!(target: "dynamo::guards", "guards for {qual}:\n{}", conv.guards.dump());
            // Note [graphless frames]: a frame converted again and again without ever capturing
            // an op of its own (a helper whose arguments keep changing, e.g. a config
            // `__getattribute__` called with many names) only pays conversions and guards;
            // after the second such conversion it runs eagerly (its resume functions with it),
            // much as torch skips frames that produce no graph.
            // A conversion that made some input symbolic (a recompile for a new size) is not
            // counted: once it holds, later sizes hit it, which is what the rule is for.
            if conv.n_ops == 0 && !conv.symbolic {
                state.n_graphless += 1;
                if state.n_graphless >= 2 && state.n_with_ops == 0 {
                    state.status = FrameStatus::Skip;
                    state.entries.clear();
                    tracing::info!(target: "dynamo::graph_breaks", "running {qual} ({filename}:{lineno}) eagerly from now on: no graph captured in {} conversions", state.n_graphless);
                    return Outcome::Default;
                }
            }
            if conv.n_ops > 0 {
                state.n_with_ops += 1;
            }
            let tcode = conv.code.bind(py);
            if tracing::enabled!(target: "dynamo::bytecode", tracing::Level::INFO) {
                let saved = CALLBACK.with(|c| c.replace(std::ptr::null_mut()));
                let listing = py
                    .import("dis")
                    .and_then(|d| d.getattr("Bytecode")?.call1((tcode,))?.call_method0("dis"))
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                CALLBACK.with(|c| c.set(saved));
                tracing::info!(target: "dynamo::bytecode", "transformed code of {qual}:\n{listing}");
            }
            mark_skip(py, tcode);
            let func = if refs.closure.is_null() { make_function(py, tcode, ffi::globals(frame), std::ptr::null_mut()).ok() } else { None };
            state.entries.insert(
                0,
                CacheEntry { guards: conv.guards, code: conv.code, backend: cb as usize, globals, func, graph_text: conv.graph_text },
            );
            Outcome::Done(run_entry(py, &mut state.entries[0], frame, state.n_arg_slots))
        }
        Ok(Err(ConvertError::Unsupported(u))) => {
            bump(&c::eager_fallbacks);
            tracing::info!(target: "dynamo::graph_breaks", "running {qual} ({filename}:{lineno}) eagerly: {u}");
            crate::logging::break_reason(format!("{qual}: {u}"));
            if state.entries.is_empty() {
                state.status = FrameStatus::Skip;
            }
            Outcome::Default
        }
        Ok(Err(err @ (ConvertError::Backend(_) | ConvertError::Internal(_)))) => {
            bump(&c::eager_fallbacks);
            let e = match err {
                ConvertError::Internal(e) => {
                    bump(&c::compile_errors);
                    e
                }
                ConvertError::Backend(e) => e,
                ConvertError::Unsupported(_) => unreachable!(),
            };
            if !crate::config::suppress_errors() {
                e.restore(py);
                return Outcome::Done(std::ptr::null_mut());
            }
            let tb = e.traceback(py).and_then(|t| t.format().ok()).unwrap_or_default();
            tracing::warn!(target: "dynamo::graph_breaks", "compiling {qual} failed, running it eagerly: {}\n{tb}", e);
            // Always visible (Python logging's last-resort handler prints warnings to stderr).
            let msg = format!("dynamo: compiling {qual} ({filename}:{lineno}) failed, running it eagerly (config.suppress_errors=True): {}: {}", e.get_type(py).name().map(|n| n.to_string()).unwrap_or_default(), e.value(py));
            let _ = py.import("logging").and_then(|l| l.call_method1("getLogger", ("dynamo",))?.call_method1("warning", (msg,)));
            crate::logging::break_reason(format!("{qual}: compile error: {e}"));
            // A compiler error would repeat on every guard miss: this code runs eagerly from now
            // on (its cached entries too).
            state.status = FrameStatus::Skip;
            Outcome::Default
        }
        Err(payload) => {
            bump(&c::eager_fallbacks);
            bump(&c::compile_errors);
            let what = payload.downcast_ref::<&str>().map(|m| m.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into());
            if !crate::config::suppress_errors() {
                // As for any compile error: with `suppress_errors` off the caller sees it.
                pyo3::exceptions::PyRuntimeError::new_err(format!("dynamo: internal compiler panic while converting {qual} ({filename}:{lineno}): {what}")).restore(py);
                return Outcome::Done(std::ptr::null_mut());
            }
            tracing::error!(target: "dynamo::graph_breaks", "internal compiler panic while converting {qual}; running it eagerly: {what}");
            state.status = FrameStatus::Skip;
            Outcome::Default
        }
    }
}

/// Hands one conversion's artifacts to `DYNAMO_DEBUG_DIR`'s writer (`crate::debug`).
fn dump_conversion(py: Python<'_>, code: &Bound<'_, PyAny>, converted: &std::thread::Result<Result<crate::symbolic::convert_frame::Converted, ConvertError>>) {
    use crate::debug::{dump_frame, FrameDump};
    match converted {
        Ok(Ok(conv)) => {
            let guards = conv.guards.dump();
            let gm = conv.graph_module.as_ref().map(|g| g.bind(py));
            dump_frame(
                py,
                &FrameDump {
                    code,
                    transformed: Some(conv.code.bind(py)),
                    graph_module: gm,
                    graph_text: &conv.graph_text,
                    guards: &guards,
                    graph_break: conv.graph_break.as_deref(),
                    failure: None,
                },
            );
        }
        other => {
            let why = match other {
                Ok(Err(ConvertError::Unsupported(u))) => u.to_string(),
                Ok(Err(ConvertError::Backend(e))) => format!("backend error: {e}"),
                Ok(Err(ConvertError::Internal(e))) => format!("compile error: {e}"),
                _ => "internal compiler panic".to_string(),
            };
            dump_frame(py, &FrameDump { code, transformed: None, graph_module: None, graph_text: "", guards: "", graph_break: None, failure: Some(&why) });
        }
    }
}

unsafe fn make_function(py: Python<'_>, code: &Bound<'_, PyAny>, globals: *mut pyffi::PyObject, closure: *mut pyffi::PyObject) -> PyResult<Py<PyAny>> {
    let f = pyffi::PyFunction_New(code.as_ptr(), globals);
    if f.is_null() {
        return Err(PyErr::fetch(py));
    }
    if !closure.is_null() && ffi::PyFunction_SetClosure(f, closure) != 0 {
        pyffi::Py_DECREF(f);
        return Err(PyErr::fetch(py));
    }
    Ok(Bound::from_owned_ptr(py, f).unbind())
}

/// Calls the entry's transformed code with the frame's argument slots; returns its result.
unsafe fn run_entry(py: Python<'_>, entry: &mut CacheEntry, frame: *mut InterpreterFrame, n_args: usize) -> *mut pyffi::PyObject {
    let func = match &entry.func {
        Some(f) => f.clone_ref(py),
        None => {
            let fobj = ffi::func(frame);
            let closure = if fobj.is_null() { std::ptr::null_mut() } else { ffi::function_closure(fobj) };
            match make_function(py, entry.code.bind(py), ffi::globals(frame), closure) {
                Ok(f) => f,
                Err(e) => {
                    e.restore(py);
                    return std::ptr::null_mut();
                }
            }
        }
    };
    // Note [resume call lifetimes]: the transformed code's frame takes over the references.
    let previous = TAKEN_OVER.with(|p| p.replace((frame, n_args, pyffi::PyFunction_GetCode(func.as_ptr()))));
    let result = pyffi::PyObject_Vectorcall(func.as_ptr(), ffi::locals_ptr(frame), n_args, std::ptr::null_mut());
    TAKEN_OVER.with(|p| p.set(previous));
    result
}

/// The recompile limit state of a code object, for tests: (n entries, status is skip).
pub fn cache_info(code: &Bound<'_, PyAny>) -> (usize, bool) {
    unsafe {
        let st = get_extra(code.as_ptr());
        if st.is_null() {
            (0, false)
        } else {
            ((*st).entries.len(), (*st).status == FrameStatus::Skip)
        }
    }
}

/// Note [compile-time saved tensors]: converting a frame runs torch ops on fake tensors (shape
/// propagation) with grad mode as the frame has it, so autograd "saves" tensors for them. Inside
/// a `torch.utils.checkpoint` region (or any `saved_tensors_hooks`) those saves would reach the
/// user's hooks: the checkpoint then counts more tensors in the forward than in its recomputation
/// and raises `CheckpointError`. While a frame is converted, identity hooks are pushed on top of
/// the user's. Returns whether they were pushed.
fn mask_saved_tensor_hooks(py: Python<'_>) -> bool {
    static IDENTITY: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let res = (|| -> PyResult<bool> {
        let autograd = py.import("torch")?.getattr("_C")?.getattr("_autograd")?;
        if autograd.call_method1("_top_saved_tensors_default_hooks", (false,))?.is_none() {
            return Ok(false);
        }
        let identity = IDENTITY.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.eval(c"lambda t: t", None, None)?.unbind())
        })?;
        autograd.call_method1("_push_saved_tensors_default_hooks", (identity.bind(py), identity.bind(py)))?;
        Ok(true)
    })();
    res.unwrap_or_else(|e| {
        tracing::debug!(target: "dynamo::graph_breaks", "cannot mask saved tensor hooks: {e}");
        false
    })
}

/// Pops the hooks [`mask_saved_tensor_hooks`] pushed.
fn unmask_saved_tensor_hooks(py: Python<'_>) {
    let res = py
        .import("torch")
        .and_then(|t| t.getattr("_C"))
        .and_then(|c| c.getattr("_autograd"))
        .and_then(|a| a.call_method0("_pop_saved_tensors_default_hooks"));
    if let Err(e) = res {
        tracing::error!(target: "dynamo::graph_breaks", "cannot pop the saved tensor hooks pushed for compilation: {e}");
    }
}

/// The backend's `optimize(dynamic=...)` setting (`_dynamo_dynamic`: True, False or None),
/// else `dynamo.config.automatic_dynamic_shapes` (Note [symbolic sizes] in
/// src/symbolic/output_graph.rs): `Some(false)` static, `Some(true)` all dims, `None` automatic.
fn dynamic_mode(backend: &Bound<'_, PyAny>) -> Option<bool> {
    if let Ok(v) = backend.getattr("_dynamo_dynamic") {
        if !v.is_none() {
            return v.is_truthy().ok();
        }
    }
    match crate::config::dynamic_shapes() {
        0 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

/// The `stacklevel` that makes a warning point at the user's code: 1 plus the number of frames
/// on top of the stack that belong to dynamo's own Python package (the `optimize` wrapper between
/// the user's call and the hooked frame). Falls back to 1 when the stack cannot be read.
fn user_stacklevel(py: Python<'_>) -> i32 {
    let walk = || -> PyResult<i32> {
        let pkg = py.import("dynamo")?.getattr("__file__")?.extract::<String>()?;
        let dir = std::path::Path::new(&pkg).parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        let mut level = 1;
        let mut frame = py.import("sys")?.call_method1("_getframe", (0,))?;
        while !frame.is_none() {
            let file: String = frame.getattr("f_code")?.getattr("co_filename")?.extract()?;
            if dir.is_empty() || !file.starts_with(&dir) {
                break;
            }
            level += 1;
            frame = frame.getattr("f_back")?;
        }
        Ok(level)
    };
    walk().unwrap_or(1)
}
