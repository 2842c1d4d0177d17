//! `DYNAMO_DEBUG_DIR`: per compiled frame, readable dumps of every stage (torch's
//! `TORCH_COMPILE_DEBUG`). The files are written by `python/dynamo/_debug.py`; this module only
//! says whether dumping is on (read once, so the cost is one atomic load per conversion when the
//! variable is unset) and hands a converted frame's artifacts to the Python side.

use pyo3::prelude::*;
use std::sync::OnceLock;

/// True when `DYNAMO_DEBUG_DIR` was set (and not empty) the first time it was asked.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("DYNAMO_DEBUG_DIR").is_some_and(|v| !v.is_empty()))
}

/// What the hook knows about one conversion of a frame.
pub struct FrameDump<'a, 'py> {
    /// The frame's code object.
    pub code: &'a Bound<'py, PyAny>,
    /// The transformed code, when conversion succeeded.
    pub transformed: Option<&'a Bound<'py, PyAny>>,
    /// The `torch.fx.GraphModule` handed to the backend, when a graph was captured.
    pub graph_module: Option<&'a Bound<'py, PyAny>>,
    /// The captured graph in dynamo's own notation (`n0 = torch.sin(n1)`), "" when none.
    pub graph_text: &'a str,
    /// The guards of the new cache entry, one a line.
    pub guards: &'a str,
    /// Why the graph ended early (a graph break), if it did.
    pub graph_break: Option<&'a str>,
    /// Why the frame runs eagerly (conversion failed), if it does.
    pub failure: Option<&'a str>,
}

/// Calls `dynamo._debug.dump_frame` with the frame's artifacts (the backend's were queued by
/// the Python side while it compiled). A failure to write is logged, never raised: dumps must
/// not change what the program does. The caller runs this with the frame hook off.
pub fn dump_frame(py: Python<'_>, d: &FrameDump<'_, '_>) {
    let r = py.import("dynamo._debug").and_then(|m| {
        m.call_method1("dump_frame", (d.code, d.transformed, d.graph_module, d.graph_text, d.guards, d.graph_break, d.failure))
    });
    if let Err(e) = r {
        tracing::warn!(target: "dynamo::graph_breaks", "DYNAMO_DEBUG_DIR: writing the dump failed: {e}");
    }
}
