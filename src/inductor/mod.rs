//! TorchInductor: fx graph -> lowering -> Scheduler (fusion) -> LLVM kernels + ExternKernel fallbacks.
use pyo3::prelude::*;

/// Registers the inductor entry points on `dynamo._C`.
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
