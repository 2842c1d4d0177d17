//! `dynamo-llvm`: kernel IR -> LLVM IR (through inkwell) -> machine code in process (ORC LLJIT).
//!
//! Pipeline: [`KernelBuilder`] makes a [`Kernel`]; [`legalize`](legalize::legalize) rewrites ops the
//! emitter lacks and flattens the loop nest; [`emit`] writes LLVM IR; [`JitModule`] optimizes at O3
//! for the host CPU, links through LLJIT and runs kernels (multi-threaded when large).
//!
//! Invariant: this crate knows nothing about graphs, tensors as Python objects, or Python; its only
//! client is `dynamo::inductor::codegen`.

pub mod builder;
pub mod emit;
pub mod jit;
pub mod kernel;
pub mod legalize;
pub mod nvptx;

pub use builder::KernelBuilder;
pub use jit::{emit_ir, host_target_info, unique_kernel_prefix, CompileTimes, JitModule};
pub use kernel::{BinaryOp, CmpOp, DType, Expr, ExprId, Index, Kernel, KernelArg, ReduceOp, ScatterRow, Store, UnaryOp};

/// Errors of this crate's boundary.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// The kernel broke an invariant of `kernel.rs` (or LLVM's verifier rejected the module).
    #[error("kernel verification failed: {0}")]
    Verify(String),
    /// Building IR failed (an inkwell builder error or an unlegalized op).
    #[error("llvm emission failed: {0}")]
    Emit(String),
    /// Optimizing, compiling or linking through LLJIT failed.
    #[error("llvm jit failed: {0}")]
    Jit(String),
}
