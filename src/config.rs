//! Runtime configuration shared by the hook and the compiler (`dynamo.config` in Python).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Compiled versions kept per code object before the frame runs eagerly (torch's default: 8).
pub static CACHE_SIZE_LIMIT: AtomicUsize = AtomicUsize::new(8);
/// When true, a compiler or backend failure runs the frame eagerly with a logged error; when
/// false the error reaches the user.
pub static SUPPRESS_ERRORS: AtomicBool = AtomicBool::new(true);

pub fn cache_size_limit() -> usize {
    CACHE_SIZE_LIMIT.load(Ordering::Relaxed)
}

pub fn suppress_errors() -> bool {
    SUPPRESS_ERRORS.load(Ordering::Relaxed)
}
