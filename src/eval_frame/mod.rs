//! The PEP 523 frame hook, the per-code-object cache, and running transformed code.
//!
//! `hook::set_eval_frame` installs `hook::eval_frame` as the interpreter's frame evaluator the
//! first time a callback is set; while the current thread has no callback the hook only forwards
//! to `_PyEval_EvalFrameDefault`. See `hook.rs` for the life of a frame.

pub mod cache;
pub mod ffi;
pub mod hook;
