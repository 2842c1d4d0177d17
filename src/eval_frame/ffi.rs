//! Private CPython frame structures and the unsafe code that reads them, one module per version.
//!
//! Invariant: this is the only file that knows the layout of `_PyInterpreterFrame` (and, for
//! 3.12, of `PyThreadState`'s data stack); everything else goes through the accessors below,
//! which have the same signatures on every version:
//!
//! * `code`, `func`, `globals`, `builtins`, `local`, `locals_ptr`: a frame's fields.
//! * `can_take_over(tstate, frame)`: whether the hook may answer for this frame without
//!   evaluating it (and then `finish_taken_over` must be called).
//! * `finish_taken_over(tstate, frame)`: what the hook must do after answering for a frame
//!   itself. On 3.11 nothing: the caller of the eval function clears and pops the frame
//!   (`_PyEvalFrameClearAndPop` in `_PyEval_Vector`). On 3.12 the default eval function does
//!   that on its way out, so a hook that does not call it must clear and pop the frame itself.
//! * `get_extra`, `set_extra`, `request_extra_index`: per-code-object slots (renamed
//!   `PyUnstable_Code_*Extra` in 3.12).
//! * `current_frame_slot(tstate)`: where the thread keeps its innermost running frame
//!   (`call_resume` links a resume function's frame past the frame calling it).
//!
//! Layouts come from each version's `Include/internal/pycore_frame.h` and
//! `Include/cpython/pystate.h`; the offsets asserted below were measured with `offsetof` against
//! the installed headers of CPython 3.11.7, 3.12.1 and 3.13.0. 3.13 keeps 3.12's layouts at the
//! same offsets (it renames `f_code` to `f_executable` and `prev_instr` to `instr_ptr`, and
//! clears and pops a frame the same way in `clear_thread_frame`), so one module serves both.

use pyo3::ffi;
use std::os::raw::c_int;

pub use version::*;

#[cfg(Py_3_14)]
compile_error!("dynamo supports CPython 3.11 to 3.13; CPython 3.14's frame layout (tagged stack references) is not modelled yet");

/// The eval-frame function signature CPython calls (PEP 523, 3.11/3.12 form).
pub type EvalFrameFn =
    unsafe extern "C" fn(*mut ffi::PyThreadState, *mut InterpreterFrame, c_int) -> *mut ffi::PyObject;

extern "C" {
    /// Exported by libpython (`Python/ceval.c`); not declared by pyo3-ffi.
    pub fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut InterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
    pub fn _PyInterpreterState_SetEvalFrameFunc(interp: *mut ffi::PyInterpreterState, f: EvalFrameFn);
    /// The interpreter's current PEP 523 function (`Python/pystate.c`, 3.9+).
    pub fn _PyInterpreterState_GetEvalFrameFunc(interp: *mut ffi::PyInterpreterState) -> EvalFrameFn;
    pub fn PyFunction_SetClosure(func: *mut ffi::PyObject, closure: *mut ffi::PyObject) -> c_int;
    /// Exported by libpython (`Objects/typeobject.c`, 3.11 and 3.12); skipped by pyo3-ffi as private.
    fn _PyType_Lookup(tp: *mut ffi::PyTypeObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// The attribute `name` of type `tp` along its MRO (class dicts only, no descriptor call), as
/// the generic attribute lookup finds it: a borrowed pointer, or NULL when absent. Sets no
/// exception (CPython's method cache makes it a few loads on a hit).
///
/// # Safety
/// `tp` is a live, ready type and `name` a str; the GIL is held.
pub unsafe fn type_lookup(tp: *mut ffi::PyTypeObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject {
    _PyType_Lookup(tp, name)
}

/// Offset of `func_closure` in `PyFunctionObject` (Include/cpython/funcobject.h, 3.11 and 3.12:
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

/// Borrowed code object of the frame.
///
/// # Safety
/// `frame` must be a live frame.
pub unsafe fn code(frame: *mut InterpreterFrame) -> *mut ffi::PyObject {
    (*frame).f_code
}

/// Borrowed globals dict of the frame.
///
/// # Safety
/// `frame` must be a live frame.
pub unsafe fn globals(frame: *mut InterpreterFrame) -> *mut ffi::PyObject {
    (*frame).f_globals
}

/// Borrowed builtins dict of the frame.
///
/// # Safety
/// `frame` must be a live frame.
pub unsafe fn builtins(frame: *mut InterpreterFrame) -> *mut ffi::PyObject {
    (*frame).f_builtins
}

#[cfg(all(Py_3_11, not(Py_3_12)))]
mod version {
    use pyo3::ffi;
    use std::os::raw::c_int;

    /// CPython 3.11 `_PyInterpreterFrame` (Include/internal/pycore_frame.h).
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

    const _: () = {
        assert!(std::mem::size_of::<InterpreterFrame>() == 80);
        assert!(std::mem::offset_of!(InterpreterFrame, f_code) == 32);
        assert!(std::mem::offset_of!(InterpreterFrame, localsplus) == 72);
    };

    extern "C" {
        fn _PyCode_GetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut *mut std::ffi::c_void) -> c_int;
        fn _PyCode_SetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut std::ffi::c_void) -> c_int;
        fn _PyEval_RequestCodeExtraIndex(free: Option<unsafe extern "C" fn(*mut std::ffi::c_void)>) -> ffi::Py_ssize_t;
    }

    /// Borrowed function object of the frame (NULL for frames without one).
    ///
    /// # Safety
    /// `frame` must be a live frame.
    pub unsafe fn func(frame: *mut InterpreterFrame) -> *mut ffi::PyObject {
        (*frame).f_func
    }

    /// 3.11: the hook may always answer for a frame itself.
    ///
    /// # Safety
    /// Pointers from the eval-frame callback.
    pub unsafe fn can_take_over(_tstate: *mut ffi::PyThreadState, _frame: *mut InterpreterFrame) -> bool {
        true
    }

    /// 3.11: nothing to do, `_PyEval_Vector` clears and pops the frame after the hook returns.
    ///
    /// # Safety
    /// Pointers from the eval-frame callback.
    pub unsafe fn finish_taken_over(_tstate: *mut ffi::PyThreadState, _frame: *mut InterpreterFrame) {}

    /// `_PyCode_GetExtra`.
    ///
    /// # Safety
    /// `code` must be a live code object; the GIL must be held.
    pub unsafe fn get_extra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut *mut std::ffi::c_void) -> c_int {
        _PyCode_GetExtra(code, index, extra)
    }

    /// `_PyCode_SetExtra`.
    ///
    /// # Safety
    /// `code` must be a live code object; the GIL must be held.
    pub unsafe fn set_extra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut std::ffi::c_void) -> c_int {
        _PyCode_SetExtra(code, index, extra)
    }

    /// `_PyEval_RequestCodeExtraIndex`.
    ///
    /// # Safety
    /// The GIL must be held.
    pub unsafe fn request_extra_index(free: Option<unsafe extern "C" fn(*mut std::ffi::c_void)>) -> ffi::Py_ssize_t {
        _PyEval_RequestCodeExtraIndex(free)
    }

    /// Offsets in 3.11 `PyThreadState` of `interp` and `cframe`, and in `_PyCFrame` of
    /// `current_frame` (Include/cpython/pystate.h).
    const TSTATE_INTERP: usize = 16;
    const TSTATE_CFRAME: usize = 56;
    const CFRAME_CURRENT_FRAME: usize = 8;

    /// Where the thread keeps its innermost running frame (`tstate->cframe->current_frame`),
    /// whose `previous` chain is the Python stack (`sys._getframe`, `f_back`); null when the
    /// `PyThreadState` does not look as expected (`interp` elsewhere, no `cframe`).
    ///
    /// # Safety
    /// `tstate` is this thread's state; the GIL is held.
    pub unsafe fn current_frame_slot(tstate: *mut ffi::PyThreadState) -> *mut *mut InterpreterFrame {
        let base = tstate as *mut u8;
        if *(base.add(TSTATE_INTERP) as *mut *mut ffi::PyInterpreterState) != ffi::PyInterpreterState_Get() {
            return std::ptr::null_mut();
        }
        let cframe = *(base.add(TSTATE_CFRAME) as *mut *mut u8);
        if cframe.is_null() {
            return std::ptr::null_mut();
        }
        cframe.add(CFRAME_CURRENT_FRAME) as *mut *mut InterpreterFrame
    }

    /// The frame `frame` links to (3.11 has no shim frames between Python frames).
    ///
    /// # Safety
    /// `frame` is a live frame of this thread.
    pub unsafe fn caller_frame(frame: *mut InterpreterFrame) -> *mut InterpreterFrame {
        (*frame).previous
    }
}

#[cfg(Py_3_12)]
mod version {
    use pyo3::ffi;
    use std::os::raw::c_int;

    /// CPython 3.12 and 3.13 `_PyInterpreterFrame` (Include/internal/pycore_frame.h). 3.13
    /// calls the first field `f_executable` (a code object for every frame the hook sees) and
    /// `prev_instr` `instr_ptr`.
    #[repr(C)]
    pub struct InterpreterFrame {
        pub f_code: *mut ffi::PyObject,
        pub previous: *mut InterpreterFrame,
        pub f_funcobj: *mut ffi::PyObject,
        pub f_globals: *mut ffi::PyObject,
        pub f_builtins: *mut ffi::PyObject,
        pub f_locals: *mut ffi::PyObject,
        pub frame_obj: *mut ffi::PyObject,
        pub prev_instr: *mut u16,
        pub stacktop: c_int,
        pub return_offset: u16,
        pub owner: std::os::raw::c_char,
        pub localsplus: [*mut ffi::PyObject; 1],
    }

    const _: () = {
        assert!(std::mem::size_of::<InterpreterFrame>() == 80);
        assert!(std::mem::offset_of!(InterpreterFrame, f_code) == 0);
        assert!(std::mem::offset_of!(InterpreterFrame, frame_obj) == 48);
        assert!(std::mem::offset_of!(InterpreterFrame, stacktop) == 64);
        assert!(std::mem::offset_of!(InterpreterFrame, owner) == 70);
        assert!(std::mem::offset_of!(InterpreterFrame, localsplus) == 72);
    };

    /// `FRAME_OWNED_BY_THREAD` (Include/internal/pycore_frame.h): a frame on the thread's data
    /// stack, pushed by `_PyEval_Vector` for a call.
    const FRAME_OWNED_BY_THREAD: std::os::raw::c_char = 0;

    /// 3.12 `_PyStackChunk` (Include/cpython/pystate.h): a block of the thread's data stack.
    #[repr(C)]
    struct StackChunk {
        previous: *mut StackChunk,
        size: usize,
        top: usize,
        data: [*mut ffi::PyObject; 1],
    }

    /// Offsets in 3.12 and 3.13 `PyThreadState` (`struct _ts`, Include/cpython/pystate.h) of `interp`,
    /// `datastack_chunk`, `datastack_top` and `datastack_limit`.
    const TSTATE_INTERP: usize = 16;
    const TSTATE_DATASTACK_CHUNK: usize = 232;
    const TSTATE_DATASTACK_TOP: usize = 240;
    const TSTATE_DATASTACK_LIMIT: usize = 248;

    extern "C" {
        fn PyUnstable_Code_GetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut *mut std::ffi::c_void) -> c_int;
        fn PyUnstable_Code_SetExtra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut std::ffi::c_void) -> c_int;
        fn PyUnstable_Eval_RequestCodeExtraIndex(free: Option<unsafe extern "C" fn(*mut std::ffi::c_void)>) -> ffi::Py_ssize_t;
        fn PyObject_GetArenaAllocator(allocator: *mut ArenaAllocator);
    }

    /// `PyObjectArenaAllocator` (Include/cpython/objimpl.h): the allocator of data-stack chunks
    /// (`_PyObject_VirtualAlloc`/`_PyObject_VirtualFree` are not exported; they call it).
    #[repr(C)]
    struct ArenaAllocator {
        ctx: *mut std::ffi::c_void,
        alloc: Option<unsafe extern "C" fn(*mut std::ffi::c_void, usize) -> *mut std::ffi::c_void>,
        free: Option<unsafe extern "C" fn(*mut std::ffi::c_void, *mut std::ffi::c_void, usize)>,
    }

    unsafe fn field<T>(tstate: *mut ffi::PyThreadState, offset: usize) -> *mut T {
        (tstate as *mut u8).add(offset) as *mut T
    }

    /// Borrowed function object of the frame.
    ///
    /// # Safety
    /// `frame` must be a live frame.
    pub unsafe fn func(frame: *mut InterpreterFrame) -> *mut ffi::PyObject {
        (*frame).f_funcobj
    }

    /// Whether the hook may answer for `frame` itself: the frame is a plain call frame on top of
    /// the thread's data stack and has no frame object yet (so no one can observe it and
    /// clearing it is the simple path of `_PyFrame_ClearExceptCode`). The `PyThreadState`
    /// layout is checked on the way (`interp` where expected, the frame inside the current
    /// chunk, below `datastack_top`).
    ///
    /// # Safety
    /// Pointers from the eval-frame callback, GIL held.
    pub unsafe fn can_take_over(tstate: *mut ffi::PyThreadState, frame: *mut InterpreterFrame) -> bool {
        if !(*frame).frame_obj.is_null() || (*frame).owner != FRAME_OWNED_BY_THREAD {
            return false;
        }
        if *field::<*mut ffi::PyInterpreterState>(tstate, TSTATE_INTERP) != ffi::PyInterpreterState_Get() {
            return false;
        }
        let chunk = *field::<*mut StackChunk>(tstate, TSTATE_DATASTACK_CHUNK);
        let top = *field::<*mut *mut ffi::PyObject>(tstate, TSTATE_DATASTACK_TOP);
        let limit = *field::<*mut *mut ffi::PyObject>(tstate, TSTATE_DATASTACK_LIMIT);
        let base = frame as *mut *mut ffi::PyObject;
        !chunk.is_null() && (*chunk).data.as_mut_ptr() <= base && base < top && top <= limit
    }

    /// Clears and pops a frame the hook answered for, as the default eval function would on its
    /// way out (3.12 `clear_thread_frame` in `Python/ceval.c`: `_PyFrame_ClearExceptCode` for a
    /// frame without a frame object, then the code's reference, then `_PyThreadState_PopFrame`).
    ///
    /// # Safety
    /// `can_take_over(tstate, frame)` held when the hook started answering; `frame` is still
    /// the top frame of the data stack (everything pushed since was popped).
    pub unsafe fn finish_taken_over(tstate: *mut ffi::PyThreadState, frame: *mut InterpreterFrame) {
        let f = &mut *frame;
        debug_assert!(f.frame_obj.is_null());
        let n = f.stacktop.max(0) as usize;
        for i in 0..n {
            let v = *f.localsplus.as_ptr().add(i);
            if !v.is_null() {
                ffi::Py_DECREF(v);
            }
        }
        f.stacktop = 0;
        if !f.f_locals.is_null() {
            ffi::Py_DECREF(f.f_locals);
        }
        ffi::Py_DECREF(f.f_funcobj);
        ffi::Py_DECREF(f.f_code);
        pop_frame(tstate, frame);
    }

    /// 3.12 `_PyThreadState_PopFrame` (Python/pystate.c): the data stack's top goes back to the
    /// frame's base; a frame that opened a chunk frees the chunk and makes the previous one
    /// current.
    unsafe fn pop_frame(tstate: *mut ffi::PyThreadState, frame: *mut InterpreterFrame) {
        let chunk_p = field::<*mut StackChunk>(tstate, TSTATE_DATASTACK_CHUNK);
        let top_p = field::<*mut *mut ffi::PyObject>(tstate, TSTATE_DATASTACK_TOP);
        let limit_p = field::<*mut *mut ffi::PyObject>(tstate, TSTATE_DATASTACK_LIMIT);
        let base = frame as *mut *mut ffi::PyObject;
        let chunk = *chunk_p;
        if base == (*chunk).data.as_mut_ptr() {
            let previous = (*chunk).previous;
            // CPython never pops the root chunk (push_chunk guarantees it).
            debug_assert!(!previous.is_null());
            *top_p = (*previous).data.as_mut_ptr().add((*previous).top);
            *chunk_p = previous;
            *limit_p = (previous as *mut u8).add((*previous).size) as *mut *mut ffi::PyObject;
            let mut arena = ArenaAllocator { ctx: std::ptr::null_mut(), alloc: None, free: None };
            PyObject_GetArenaAllocator(&mut arena);
            if let Some(free) = arena.free {
                free(arena.ctx, chunk as *mut std::ffi::c_void, (*chunk).size);
            }
        } else {
            *top_p = base;
        }
    }

    /// `PyUnstable_Code_GetExtra` (3.12's name for `_PyCode_GetExtra`).
    ///
    /// # Safety
    /// `code` must be a live code object; the GIL must be held.
    pub unsafe fn get_extra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut *mut std::ffi::c_void) -> c_int {
        PyUnstable_Code_GetExtra(code, index, extra)
    }

    /// `PyUnstable_Code_SetExtra`.
    ///
    /// # Safety
    /// `code` must be a live code object; the GIL must be held.
    pub unsafe fn set_extra(code: *mut ffi::PyObject, index: ffi::Py_ssize_t, extra: *mut std::ffi::c_void) -> c_int {
        PyUnstable_Code_SetExtra(code, index, extra)
    }

    /// `PyUnstable_Eval_RequestCodeExtraIndex`.
    ///
    /// # Safety
    /// The GIL must be held.
    pub unsafe fn request_extra_index(free: Option<unsafe extern "C" fn(*mut std::ffi::c_void)>) -> ffi::Py_ssize_t {
        PyUnstable_Eval_RequestCodeExtraIndex(free)
    }

    /// Where the thread keeps its innermost running frame, whose `previous` chain is the Python
    /// stack (`sys._getframe`, `f_back`): 3.12 `tstate->cframe->current_frame` (`cframe` at 56,
    /// `current_frame` its first field), 3.13 `tstate->current_frame` (at 72; Include/cpython/
    /// pystate.h). Null when the `PyThreadState` does not look as expected.
    ///
    /// # Safety
    /// `tstate` is this thread's state; the GIL is held.
    pub unsafe fn current_frame_slot(tstate: *mut ffi::PyThreadState) -> *mut *mut InterpreterFrame {
        if *field::<*mut ffi::PyInterpreterState>(tstate, TSTATE_INTERP) != ffi::PyInterpreterState_Get() {
            return std::ptr::null_mut();
        }
        #[cfg(Py_3_13)]
        {
            field::<*mut InterpreterFrame>(tstate, 72)
        }
        #[cfg(not(Py_3_13))]
        {
            let cframe = *field::<*mut *mut InterpreterFrame>(tstate, 56);
            if cframe.is_null() {
                return std::ptr::null_mut();
            }
            cframe
        }
    }

    /// `FRAME_OWNED_BY_CSTACK` (Include/internal/pycore_frame.h): the shim frame each C-level
    /// entry into the eval loop pushes (`entry_frame` in `_PyEval_EvalFrameDefault`).
    const FRAME_OWNED_BY_CSTACK: std::os::raw::c_char = 3;

    /// The first frame before `frame` that is not a shim: CPython never has two shims in a
    /// row (faulthandler and the eval loop's exit assume it), so a frame linked past `frame`
    /// must link to a real one.
    ///
    /// # Safety
    /// `frame` is a live frame of this thread.
    pub unsafe fn caller_frame(frame: *mut InterpreterFrame) -> *mut InterpreterFrame {
        let mut prev = (*frame).previous;
        while !prev.is_null() && (*prev).owner == FRAME_OWNED_BY_CSTACK {
            prev = (*prev).previous;
        }
        prev
    }
}
