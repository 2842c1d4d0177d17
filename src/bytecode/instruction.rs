//! The instruction model shared by decode, assemble and every bytecode consumer.
//!
//! An [`Instruction`] is one real opcode: `EXTENDED_ARG` prefixes are folded into `arg` and
//! inline `CACHE` units are implied by the opcode. Jumps point at instructions ([`InstId`]),
//! never at byte offsets; offsets, `EXTENDED_ARG` widths, the line table and the exception
//! table are computed only in `assemble.rs`.

use std::fmt;

use super::opcode;

/// Index of an instruction in a `Vec<Instruction>`. Displays as `i12`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstId(pub u32);

impl InstId {
    /// The index as a `usize`, for slicing.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for InstId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{}", self.0)
    }
}

/// Source span of an instruction, as `code.co_positions()` reports it
/// (PEP 657; encoding in CPython's `Objects/locations.md`). `None` is CPython's `-1` / missing.
/// Columns are 0-based UTF-8 byte offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Positions {
    pub line: Option<u32>,
    pub end_line: Option<u32>,
    pub col: Option<u32>,
    pub end_col: Option<u32>,
}

impl Positions {
    /// A position that only knows its line (`Objects/locations.md`, "no column info" form).
    pub fn line(line: u32) -> Self {
        Positions {
            line: Some(line),
            end_line: Some(line),
            col: None,
            end_col: None,
        }
    }
}

/// The innermost exception-table entry covering an instruction
/// (CPython's `Objects/exception_handling_notes.txt`): on an exception, the value stack is
/// popped to `depth`, the offset of the raising instruction is pushed if `lasti`, then the
/// exception is pushed and control goes to `handler`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExnTarget {
    pub handler: InstId,
    pub depth: u32,
    pub lasti: bool,
}

/// One instruction of the version-neutral model (cf. `dis.Instruction` in `Lib/dis.py`, and `Instruction`
/// in pytorch's `torch/_dynamo/bytecode_transformation.py`).
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// Base (non-specialized) opcode of the model (`opcode.rs`: 3.11 numbering plus later
    /// additions); never `EXTENDED_ARG` or `CACHE`.
    pub opcode: u8,
    /// Full oparg with `EXTENDED_ARG` folded in. For jumps, [`decode`](super::decode()) fills it
    /// but [`assemble`](super::assemble()) recomputes it from `target`.
    pub arg: u32,
    /// Jump target for every relative jump opcode; `None` for the rest.
    pub target: Option<InstId>,
    /// Byte offset of the opcode itself (after its `EXTENDED_ARG` prefixes, like
    /// `dis.Instruction.offset`) in the decoded `co_code`; `None` for new instructions.
    pub offset: Option<u32>,
    /// Source span from `co_linetable`.
    pub positions: Positions,
    /// Exception handler covering this instruction, from `co_exceptiontable`.
    pub exn: Option<ExnTarget>,
}

impl Instruction {
    /// A non-jump instruction with default positions and no exception handler.
    pub fn new(opcode: u8, arg: u32) -> Self {
        Instruction {
            opcode,
            arg,
            target: None,
            offset: None,
            positions: Positions::default(),
            exn: None,
        }
    }

    /// A jump to `target`; its `arg` is computed by [`assemble`](super::assemble()).
    pub fn jump(opcode: u8, target: InstId) -> Self {
        Instruction {
            target: Some(target),
            ..Instruction::new(opcode, 0)
        }
    }

    /// Builder-style: the same instruction with `positions`.
    pub fn with_positions(mut self, positions: Positions) -> Self {
        self.positions = positions;
        self
    }

    /// Builder-style: the same instruction covered by the exception handler `exn`.
    pub fn with_exn(mut self, exn: Option<ExnTarget>) -> Self {
        self.exn = exn;
        self
    }

    /// CPython spelling of the opcode (`dis.opname`).
    pub fn name(&self) -> &'static str {
        opcode::name(self.opcode)
    }

    /// Whether this is a jump of the model (3.11 `dis.hasjrel`).
    pub fn is_jump(&self) -> bool {
        opcode::has_jump(self.opcode)
    }
}
