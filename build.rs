//! Build script: exposes `cfg(Py_3_11)` / `cfg(Py_3_12)` for the interpreter pyo3 builds against.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
    // Unit tests link libpython (no extension-module feature): add its rpath so they run.
    pyo3_build_config::add_libpython_rpath_link_args();
}
