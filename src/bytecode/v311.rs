//! CPython 3.11's `co_code`: which opcodes exist, their inline `CACHE` counts and jump
//! directions (3.11 `Lib/opcode.py`), and the (trivial) mapping to and from the instruction
//! model, whose opcodes are 3.11's.

use super::assemble::AssembleError;
use super::decode::DecodeError;
use super::instruction::{InstId, Instruction};
use super::opcode::{self, op};
use super::rewrite::expand;
use super::{JumpDir, PyVersion};

/// Whether `real` is an opcode of 3.11's `dis.opmap`.
pub fn is_real(real: u8) -> bool {
    opcode::is_valid(real) && !opcode::is_addition(real)
}

/// `dis.opname[real]` in 3.11.
pub fn name(real: u8) -> &'static str {
    if is_real(real) {
        opcode::name(real)
    } else {
        "<unknown>"
    }
}

/// Number of inline CACHE code units that follow `real` in `co_code`
/// (3.11 `dis._inline_cache_entries`, from the `_cache_format` table in `Lib/opcode.py`).
pub fn cache_entries(real: u8) -> u8 {
    use op::*;
    match real {
        BINARY_SUBSCR => 4,
        STORE_SUBSCR => 1,
        UNPACK_SEQUENCE => 1,
        STORE_ATTR => 4,
        LOAD_ATTR => 4,
        COMPARE_OP => 2,
        LOAD_GLOBAL => 5,
        BINARY_OP => 1,
        LOAD_METHOD => 10,
        PRECALL => 1,
        CALL => 4,
        _ => 0,
    }
}

/// The direction of a relative jump (`dis.hasjrel`; 3.11 negates the oparg of the opcodes whose
/// name contains `JUMP_BACKWARD`), `None` for other opcodes.
pub fn jump_dir(real: u8) -> Option<JumpDir> {
    if opcode::is_forward_jump(real) {
        Some(JumpDir::Forward)
    } else if opcode::is_backward_jump(real) {
        Some(JumpDir::Backward)
    } else {
        None
    }
}

/// The same jump pointing the other way (`JUMP_FORWARD` <-> `JUMP_BACKWARD`,
/// `POP_JUMP_FORWARD_IF_*` <-> `POP_JUMP_BACKWARD_IF_*`).
pub fn flip(real: u8) -> Option<u8> {
    opcode::flip_jump_direction(real)
}

/// 3.11 code in the model: the model's opcodes are 3.11's, so nothing changes.
pub fn lift(raw: Vec<Instruction>) -> Result<Vec<Instruction>, DecodeError> {
    Ok(raw)
}

/// The model as 3.11 code: `END_FOR` markers (which 3.11 loops do without) are dropped;
/// other opcodes 3.11 does not have are refused.
pub fn lower(insts: &[Instruction]) -> Result<(Vec<Instruction>, Vec<u32>), AssembleError> {
    expand(insts, |idx, inst| {
        if inst.opcode == op::END_FOR {
            return Ok(vec![]);
        }
        if opcode::is_addition(inst.opcode) {
            return Err(AssembleError::NotInVersion {
                inst: InstId(idx as u32),
                name: inst.name(),
                version: PyVersion::V311,
            });
        }
        Ok(vec![inst.clone()])
    })
}
