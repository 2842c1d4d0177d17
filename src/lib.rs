//! The extension module `dynamo._C`: only `#[pymodule]` registration lives here; each pipeline
//! stage is its own module (see docs/ARCHITECTURE.md).

pub mod autograd;
pub mod bytecode;
pub mod config;
pub mod counters;
pub mod debug;
pub mod eval_frame;
pub mod graph;
pub mod guards;
pub mod inductor;
pub mod logging;
pub mod py;
pub mod pycodegen;
pub mod source;
pub mod symbolic;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "_C")]
fn dynamo_c(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)?;
    inductor::register(m)?;
    autograd::register(m)?;
    Ok(())
}
