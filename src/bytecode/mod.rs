//! Bytecode decode/assemble (pure Rust, no pyo3).
