//! Process-wide counters readable from Python (`dynamo.counters()`).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// The counters, one static each.
        #[allow(non_upper_case_globals)]
        pub mod c {
            use super::AtomicU64;
            $(#[doc = $doc] pub static $name: AtomicU64 = AtomicU64::new(0);)*
        }
        /// (name, value) of every counter.
        pub fn snapshot() -> Vec<(&'static str, u64)> {
            vec![$((stringify!($name), c::$name.load(Ordering::Relaxed))),*]
        }
        /// Sets every counter to zero.
        pub fn reset() {
            $(c::$name.store(0, Ordering::Relaxed);)*
        }
    };
}

counters! {
    frames_seen: "frames that reached the hook while a callback was set",
    cache_hits: "frames that ran cached transformed code",
    cache_misses: "frames whose guards all failed (or that had no entry)",
    compiles: "frames converted successfully (first compiles and recompiles)",
    recompiles: "conversions of a code object that already had an entry",
    graphs: "graphs handed to a backend",
    eager_fallbacks: "frames that could not be converted and ran eagerly",
    graph_breaks: "frames converted with a graph break (graph, unsupported instruction, resume function)",
    cache_limit_hits: "code objects that reached config.cache_size_limit",
    graph_failures: "compiled graphs that raised at run time (the frame then reran as ordinary Python)",
    aot_graphs: "graphs AOTAutograd differentiated (joint graph built, forward and backward graphs exported)",
    aot_eager_graphs: "graphs with inputs requiring grad that AOTAutograd left to torch's autograd (reason on aot::partition)",
    aot_graph_splits: "segment boundaries AOTAutograd put around ops without a derivative rule (each op runs through torch's autograd; logged on aot::partition)",
    aot_backward_graphs: "backward graphs compiled by a backend (on their first backward call)",
    aot_kernelless_graphs: "differentiated graphs whose inductor-compiled forward has no kernel of ours, run through torch's autograd instead (Note [forward without kernels] in aot.py)",
    compile_errors: "conversions that failed inside the compiler (a bug: bytecode emission, an fx graph that is not valid Python, a panic); the frame ran eagerly",
}

/// Adds one to a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
