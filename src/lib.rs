//! The extension module `dynamo._C`: only `#[pymodule]` registration lives here; each pipeline
//! stage is its own module (see docs/ARCHITECTURE.md).

pub mod bytecode;
pub mod inductor;

use pyo3::prelude::*;

#[pymodule]
#[allow(non_snake_case)]
fn _C(m: &Bound<'_, PyModule>) -> PyResult<()> {
    inductor::register(m)?;
    Ok(())
}
