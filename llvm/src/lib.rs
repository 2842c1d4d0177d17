//! `dynamo-llvm`: kernel IR -> LLVM IR (through inkwell) -> machine code in process (ORC LLJIT).
//!
//! Invariant: this crate knows nothing about graphs, tensors as Python objects, or Python; its only
//! client is `dynamo::inductor::codegen`.
