//! Runtime configuration shared by the hook and the compiler (`dynamo.config` in Python).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Compiled versions kept per code object before the frame runs eagerly (torch's default: 8).
pub static CACHE_SIZE_LIMIT: AtomicUsize = AtomicUsize::new(8);
/// Compiled versions kept per code object whatever objects they were compiled for (torch's
/// `accumulated_cache_size_limit`, default 256; Note [recompile limit per object] in
/// src/eval_frame/hook.rs).
pub static ACCUMULATED_CACHE_SIZE_LIMIT: AtomicUsize = AtomicUsize::new(256);
/// When true, a compiler or backend failure runs the frame eagerly with a logged error; when
/// false the error reaches the user.
pub static SUPPRESS_ERRORS: AtomicBool = AtomicBool::new(true);

/// Dynamic shapes (Note [symbolic sizes] in src/symbolic/output_graph.rs): 0 static only
/// (`automatic_dynamic_shapes = False`), 1 automatic (torch's default: a dimension that changed
/// between compiles becomes symbolic), 2 every dimension symbolic from the first compile
/// (`dynamic=True`).
pub static DYNAMIC_SHAPES: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// Automatic dynamic by tensor rather than by dimension (`dynamo.config.automatic_dynamic_whole_tensor`,
/// default true; Note [whole-tensor automatic dynamic] in src/symbolic/output_graph.rs): when any
/// dimension of a tensor input changed since an earlier compile, every dimension of it becomes
/// symbolic on the recompile (sizes 0 and 1 still specialize). False: only the dimensions that
/// changed, as torch's `automatic_dynamic_shapes`.
pub static AUTOMATIC_DYNAMIC_WHOLE_TENSOR: AtomicBool = AtomicBool::new(true);

/// The time a compile with symbolic sizes may take, in milliseconds
/// (`dynamo.config.dynamic_compile_budget_s`, default 30 s; Note [dynamic compile budget] in
/// src/symbolic/convert_frame.rs): past it, the frame is compiled again with static sizes.
pub static DYNAMIC_COMPILE_BUDGET_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(30_000);

pub fn dynamic_compile_budget() -> std::time::Duration {
    std::time::Duration::from_millis(DYNAMIC_COMPILE_BUDGET_MS.load(Ordering::Relaxed))
}

pub fn automatic_dynamic_whole_tensor() -> bool {
    AUTOMATIC_DYNAMIC_WHOLE_TENSOR.load(Ordering::Relaxed)
}

pub fn dynamic_shapes() -> u8 {
    DYNAMIC_SHAPES.load(Ordering::Relaxed)
}

pub fn cache_size_limit() -> usize {
    CACHE_SIZE_LIMIT.load(Ordering::Relaxed)
}

pub fn accumulated_cache_size_limit() -> usize {
    ACCUMULATED_CACHE_SIZE_LIMIT.load(Ordering::Relaxed)
}

pub fn suppress_errors() -> bool {
    SUPPRESS_ERRORS.load(Ordering::Relaxed)
}
