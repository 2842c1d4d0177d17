//! Per-code-object state (`ExtraState`) kept in the code object's extra slot
//! (`_PyCode_SetExtra`), and the `CacheEntry`s it holds.
//!
//! Invariant: only touched with the GIL held. Every code object that received an extra is
//! recorded in a registry so that `reset()` can drop all of them.

use super::ffi;
use crate::guards::GuardManager;
use parking_lot::Mutex;
use pyo3::ffi as pyffi;
use pyo3::prelude::*;
use std::sync::OnceLock;

/// What the hook does with a code object before looking at guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameStatus {
    /// Run the original code, never try to compile (library code, generators, failed frames,
    /// transformed code, `disable`d functions).
    Skip,
    /// Run the original code with the hook off until it returns: nothing it calls is compiled
    /// either (torch's `torch.compiler.disable` wrapper, Note [torch's disable]).
    SkipRecursive,
    /// Look up the cache and compile on a miss.
    Compile,
}

/// A compiled version of a frame, valid while its guards hold.
pub struct CacheEntry {
    pub guards: GuardManager,
    /// The transformed code object.
    pub code: Py<PyAny>,
    /// The callback (backend) it was compiled for.
    pub backend: usize,
    /// The globals dict the transformed function is built with.
    pub globals: usize,
    /// A function object for `code`, reused when the frame has no closure.
    pub func: Option<Py<PyAny>>,
    pub graph_text: String,
}

/// State attached to one code object.
pub struct ExtraState {
    pub status: FrameStatus,
    /// Number of argument slots (positional, keyword-only, *args, **kwargs).
    pub n_arg_slots: usize,
    pub entries: Vec<CacheEntry>,
    /// Set once the recompile limit warning was issued for this code.
    pub warned_limit: bool,
    /// Conversions of this code that captured no graph ops (see Note [graphless frames]).
    pub n_graphless: usize,
    /// Conversions of this code that captured at least one op.
    pub n_with_ops: usize,
    /// The input sizes earlier conversions saw (automatic dynamic; Note [symbolic sizes]).
    pub dim_state: Option<crate::symbolic::output_graph::DimState>,
    /// A compile with symbolic sizes ran past its budget: compile this code with static sizes
    /// from now on (Note [dynamic compile budget] in src/symbolic/convert_frame.rs).
    pub static_only: bool,
}

fn extra_index() -> pyffi::Py_ssize_t {
    static IDX: OnceLock<pyffi::Py_ssize_t> = OnceLock::new();
    *IDX.get_or_init(|| unsafe { ffi::request_extra_index(Some(free_extra)) })
}

unsafe extern "C" fn free_extra(p: *mut std::ffi::c_void) {
    if !p.is_null() {
        drop(Box::from_raw(p as *mut ExtraState));
    }
}

fn registry() -> &'static Mutex<Vec<Py<PyAny>>> {
    static REG: OnceLock<Mutex<Vec<Py<PyAny>>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Vec::new()))
}

/// The extra state of `code`, or null.
///
/// # Safety
/// GIL held; `code` is a live code object.
pub unsafe fn get_extra(code: *mut pyffi::PyObject) -> *mut ExtraState {
    let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
    if ffi::get_extra(code, extra_index(), &mut p) != 0 {
        pyffi::PyErr_Clear();
        return std::ptr::null_mut();
    }
    p as *mut ExtraState
}

/// Attaches `state` to `code`. An older state is freed by CPython itself: `_PyCode_SetExtra`
/// calls the index's free function on the value it replaces (Objects/codeobject.c).
///
/// # Safety
/// GIL held; `code` is a live code object.
pub unsafe fn set_extra(py: Python<'_>, code: *mut pyffi::PyObject, state: ExtraState) -> *mut ExtraState {
    let p = Box::into_raw(Box::new(state));
    let old = get_extra(code);
    if ffi::set_extra(code, extra_index(), p as *mut _) != 0 {
        pyffi::PyErr_Clear();
        drop(Box::from_raw(p));
        return std::ptr::null_mut();
    }
    if old.is_null() {
        registry().lock().push(Bound::from_borrowed_ptr(py, code).unbind());
    }
    p
}

/// Drops every cache entry and classification (`dynamo.reset()`).
pub fn reset_all(py: Python<'_>) {
    let codes: Vec<Py<PyAny>> = std::mem::take(&mut *registry().lock());
    for c in codes {
        unsafe {
            // Frees the old state through `free_extra`.
            if ffi::set_extra(c.as_ptr(), extra_index(), std::ptr::null_mut()) != 0 {
                pyffi::PyErr_Clear();
            }
        }
        drop(c.into_bound(py));
    }
}
