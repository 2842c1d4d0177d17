//! CPython bytecode decode/assemble, pure Rust (no pyo3): bytes + [`PyVersion`] in,
//! [`Instruction`]s out, and back.
//!
//! One instruction model serves every CPython version (`opcode.rs`: 3.11's opcodes and
//! meanings plus the opcodes later versions added); `v311.rs` and `v312.rs` are the only files
//! that know a version's `co_code` (numbers, inline caches, jump directions, and the opcodes
//! whose meaning changed), translating at decode (lift) and assemble (lower) time.
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
pub mod rewrite;
pub mod v311;
pub mod v312;
pub mod v313;

#[cfg(test)]
mod tests;

pub use analysis::{disassemble, disassemble_with, live_locals, stack_depth, stack_depth_in, stack_depths, stack_depths_in, stack_effect, stack_effect_in};
pub use assemble::{assemble, AssembleError, Assembled};
pub use decode::{decode, DecodeError};
pub use exception_table::ExceptionTableEntry;
pub use instruction::{ExnTarget, InstId, Instruction, Positions};

/// CPython minor version whose bytecode format is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PyVersion {
    /// CPython 3.11 (`Lib/opcode.py`, `Objects/locations.md` and
    /// `Objects/exception_handling_notes.txt` of the 3.11 branch).
    V311,
    /// CPython 3.12 (same table formats as 3.11; opcodes in `v312.rs`).
    V312,
    /// CPython 3.13 (same table formats; new numbering and superinstructions, see `v313.rs`).
    V313,
}

/// Which way a relative jump counts its oparg from the next instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JumpDir {
    Forward,
    Backward,
}

impl PyVersion {
    /// The version this build of the extension runs on (pyo3's `Py_3_12`/`Py_3_13` cfgs).
    #[cfg(not(Py_3_12))]
    pub const CURRENT: PyVersion = PyVersion::V311;
    /// The version this build of the extension runs on (pyo3's `Py_3_12`/`Py_3_13` cfgs).
    #[cfg(all(Py_3_12, not(Py_3_13)))]
    pub const CURRENT: PyVersion = PyVersion::V312;
    /// The version this build of the extension runs on (pyo3's `Py_3_12`/`Py_3_13` cfgs).
    #[cfg(Py_3_13)]
    pub const CURRENT: PyVersion = PyVersion::V313;

    /// `EXTENDED_ARG`'s number in this version's `co_code` (144 up to 3.12, 71 in 3.13).
    pub fn extended_arg(self) -> u8 {
        match self {
            PyVersion::V311 | PyVersion::V312 => opcode::op::EXTENDED_ARG,
            PyVersion::V313 => v313::EXTENDED_ARG,
        }
    }

    /// Where a call's NULL marker sits relative to the callable on this version's value stack.
    /// 3.11 and 3.12 lay a call out as `[NULL, callable, args...]` (or `[method, self, args...]`):
    /// `PUSH_NULL` comes before the callable and `LOAD_GLOBAL`/`LOAD_METHOD`/`LOAD_SUPER_ATTR`
    /// push the NULL first. 3.13 lays it out as `[callable, NULL, args...]` (3.13
    /// `Python/bytecodes.c`, `CALL`: `callable, self_or_null, args[oparg]`), so the NULL comes
    /// after the callable. The method form `[method, self, args...]` is the same on all three.
    /// The instruction model keeps each version's order (a graph break rebuilds the stack the
    /// real code expects), so the translator and the code generator ask here.
    pub fn null_after_callable(self) -> bool {
        self == PyVersion::V313
    }

    /// Whether `real` is an opcode of this version's `co_code` (`CACHE` included).
    pub fn is_real(self, real: u8) -> bool {
        match self {
            PyVersion::V311 => v311::is_real(real),
            PyVersion::V312 => v312::is_real(real),
            PyVersion::V313 => v313::is_real(real),
        }
    }

    /// This version's `dis.opname[real]`.
    pub fn real_name(self, real: u8) -> &'static str {
        match self {
            PyVersion::V311 => v311::name(real),
            PyVersion::V312 => v312::name(real),
            PyVersion::V313 => v313::name(real),
        }
    }

    /// Inline `CACHE` units after `real` in this version's `co_code`.
    pub fn cache_entries(self, real: u8) -> u8 {
        match self {
            PyVersion::V311 => v311::cache_entries(real),
            PyVersion::V312 => v312::cache_entries(real),
            PyVersion::V313 => v313::cache_entries(real),
        }
    }

    /// Direction of `real` if it is a relative jump in this version.
    pub fn jump_dir(self, real: u8) -> Option<JumpDir> {
        match self {
            PyVersion::V311 => v311::jump_dir(real),
            PyVersion::V312 => v312::jump_dir(real),
            PyVersion::V313 => v313::jump_dir(real),
        }
    }

    /// The twin of jump `real` that points the other way, if this version has one.
    pub fn flip(self, real: u8) -> Option<u8> {
        match self {
            PyVersion::V311 => v311::flip(real),
            PyVersion::V312 => v312::flip(real),
            PyVersion::V313 => v313::flip(real),
        }
    }
}

impl std::fmt::Display for PyVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PyVersion::V311 => "3.11",
            PyVersion::V312 => "3.12",
            PyVersion::V313 => "3.13",
        })
    }
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
