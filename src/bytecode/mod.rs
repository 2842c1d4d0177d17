//! CPython bytecode decode/assemble, pure Rust (no pyo3): bytes + [`PyVersion`] in,
//! [`Instruction`]s out, and back.
//!
//! Pipeline: [`decode()`] turns `co_code`, `co_exceptiontable` and `co_linetable` into
//! instructions whose jumps and handlers point at instructions; transformations edit the
//! `Vec<Instruction>`; [`assemble()`] recomputes offsets, `EXTENDED_ARG`s, both tables and
//! `co_stacksize`. See `README.md` in this folder.

pub mod analysis;
pub mod assemble;
pub mod decode;
pub mod exception_table;
pub mod instruction;
pub mod line_table;
pub mod opcode;

#[cfg(test)]
mod tests;

pub use analysis::{disassemble, disassemble_with, live_locals, stack_depth, stack_depths, stack_effect};
pub use assemble::{assemble, AssembleError, Assembled};
pub use decode::{decode, DecodeError};
pub use exception_table::ExceptionTableEntry;
pub use instruction::{ExnTarget, InstId, Instruction, Positions};

/// CPython minor version whose bytecode format is meant. Only 3.11 today.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PyVersion {
    /// CPython 3.11 (`Lib/opcode.py`, `Objects/locations.md` and
    /// `Objects/exception_handling_notes.txt` of the 3.11 branch).
    V311,
}

/// Raw pieces of a code object, as Python exposes them (`code.co_code`, ...).
#[derive(Clone, Copy, Debug)]
pub struct CodeBytes<'a> {
    /// `co_code`: de-specialized, with inline `CACHE` units.
    pub code: &'a [u8],
    /// `co_exceptiontable`.
    pub exceptiontable: &'a [u8],
    /// `co_linetable`.
    pub linetable: &'a [u8],
    /// `co_firstlineno`: the line the location table's first delta is relative to.
    pub firstlineno: u32,
    /// Which CPython produced the bytes.
    pub version: PyVersion,
}
