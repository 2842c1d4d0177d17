//! Private CPython frame structures and the unsafe code that reads them.
//!
//! Invariant: this is the only file that knows the layout of `_PyInterpreterFrame`; everything
//! else goes through the safe-ish accessors below. The layout is the one in CPython 3.11's
//! `Include/internal/pycore_frame.h` (size 80, `f_code` at offset 32, `localsplus` at 72).

use pyo3::ffi;
use std::os::raw::c_int;

/// CPython 3.11 `_PyInterpreterFrame` (Include/internal/pycore_frame.h).
#[cfg(all(Py_3_11, not(Py_3_12)))]
#[repr(C)]
pub struct InterpreterFrame {
    pub f_func: *mut ffi::PyObject,
    pub f_globals: *mut ffi::PyObject,
    pub f_builtins: *mut ffi::PyObject,
    pub f_locals: *mut ffi::PyObject,
    pub f_code: *mut ffi::PyObject,
    pub frame_obj: *mut ffi::PyObject,
    pub previous: *mut InterpreterFrame,
    pub prev_instr: *mut u16,
    pub stacktop: c_int,
    pub is_entry: bool,
    pub owner: std::os::raw::c_char,
    pub localsplus: [*mut ffi::PyObject; 1],
}

#[cfg(all(Py_3_11, not(Py_3_12)))]
const _: () = {
    assert!(std::mem::size_of::<InterpreterFrame>() == 80);
    assert!(std::mem::offset_of!(InterpreterFrame, f_code) == 32);
    assert!(std::mem::offset_of!(InterpreterFrame, localsplus) == 72);
};

/// The eval-frame function signature CPython calls (PEP 523, 3.11 form).
pub type EvalFrameFn =
    unsafe extern "C" fn(*mut ffi::PyThreadState, *mut InterpreterFrame, c_int) -> *mut ffi::PyObject;

extern "C" {
    /// Exported by libpython 3.11 (`Python/ceval.c`); not declared by pyo3-ffi.
    pub fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut InterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
    pub fn _PyInterpreterState_SetEvalFrameFunc(interp: *mut ffi::PyInterpreterState, f: EvalFrameFn);
    pub fn _PyCode_GetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut *mut std::ffi::c_void) -> c_int;
    pub fn _PyCode_SetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut std::ffi::c_void) -> c_int;
    pub fn _PyEval_RequestCodeExtraIndex(free: Option<unsafe extern "C" fn(*mut std::ffi::c_void)>) -> ffi::Py_ssize_t;
    pub fn PyFunction_SetClosure(func: *mut ffi::PyObject, closure: *mut ffi::PyObject) -> c_int;
}

/// Offset of `func_closure` in `PyFunctionObject` (Include/cpython/funcobject.h, 3.11:
/// ob_refcnt, ob_type, then the COMMON_FIELDS globals, builtins, name, qualname, code, defaults,
/// kwdefaults, closure).
const FUNC_CLOSURE_OFFSET: usize = 16 + 7 * 8;

/// Borrowed `func_closure` of a function object (a tuple of cells or NULL).
///
/// # Safety
/// `func` must point to a live `PyFunctionObject`.
pub unsafe fn function_closure(func: *mut ffi::PyObject) -> *mut ffi::PyObject {
    *((func as *mut u8).add(FUNC_CLOSURE_OFFSET) as *mut *mut ffi::PyObject)
}

/// Borrowed pointer to the `i`-th fast-locals slot (`localsplus[i]`); at frame entry this holds
/// the bound arguments.
///
/// # Safety
/// `frame` must be a live frame and `i < co_nlocalsplus`.
pub unsafe fn local(frame: *mut InterpreterFrame, i: usize) -> *mut ffi::PyObject {
    *(*frame).localsplus.as_ptr().add(i)
}

/// Pointer to the arguments array of the frame.
///
/// # Safety
/// `frame` must be a live frame.
pub unsafe fn locals_ptr(frame: *mut InterpreterFrame) -> *const *mut ffi::PyObject {
    (*frame).localsplus.as_ptr()
}
