//! `Vec<Instruction>` -> `co_code`, `co_exceptiontable`, `co_linetable`, `co_stacksize`.
//!
//! The version module first lowers the instruction model to that version's instructions
//! (`v311::lower`, `v312::lower`); `co_stacksize` is computed on the model. The rest is shared
//! by all versions and is the inverse of `decode.rs`, following the steps of 3.11 `Python/compile.c` (`assemble`):
//! jump opargs are recomputed from `target` and instruction sizes (with `EXTENDED_ARG`
//! prefixes) are iterated to a fixed point (`assemble_jump_offsets`); the code is written with
//! zeroed inline `CACHE` units (`write_instr`); the exception table is written from runs of equal
//! handlers (`assemble_exception_table`); the location table gets entries per instruction
//! (`assemble_emit_location`). For code that decode produced and nobody changed, every byte
//! equals CPython's.

use thiserror::Error;

use super::analysis;
use super::exception_table::{self, ExceptionTableEntry};
use super::instruction::{InstId, Instruction};
use super::line_table::LineTableWriter;
use super::opcode::op;
use super::{v311, v312, v313, JumpDir, PyVersion};

/// The raw pieces of a code object built by [`assemble`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    /// `co_code`, with zeroed inline `CACHE` units.
    pub code: Vec<u8>,
    /// `co_exceptiontable`.
    pub exceptiontable: Vec<u8>,
    /// `co_linetable`.
    pub linetable: Vec<u8>,
    /// `co_stacksize`.
    pub stacksize: u32,
    /// Byte offset of each instruction's opcode (after its `EXTENDED_ARG` prefixes) in `code`,
    /// indexed like the input; what `Instruction::offset` would be after decoding `code`.
    pub offsets: Vec<u32>,
}

/// Why a list of instructions cannot be assembled (or analysed).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AssembleError {
    #[error("expected a {version} opcode other than CACHE and EXTENDED_ARG at {inst}, found {opcode}")]
    InvalidOpcode { inst: InstId, opcode: u8, version: PyVersion },
    #[error("expected an opcode of the instruction model, found {opcode}")]
    UnknownOpcode { opcode: u8 },
    #[error("expected an opcode CPython {version} has at {inst}, found {name}")]
    NotInVersion { inst: InstId, name: &'static str, version: PyVersion },
    #[error("expected the exit of FOR_ITER at {inst} to follow END_FOR or an instruction that does not fall through")]
    ForIterExit { inst: InstId },
    #[error("expected a jump target for {name} at {inst}, found none")]
    MissingTarget { inst: InstId, name: &'static str },
    #[error("expected no jump target for {name} at {inst}, found {target}")]
    UnexpectedTarget {
        inst: InstId,
        name: &'static str,
        target: InstId,
    },
    #[error("expected the jump target of {inst} to be below i{len}, found {target}")]
    TargetOutOfRange {
        inst: InstId,
        target: InstId,
        len: usize,
    },
    #[error("expected the exception handler of {inst} to be below i{len}, found {handler}")]
    HandlerOutOfRange {
        inst: InstId,
        handler: InstId,
        len: usize,
    },
    #[error("expected a {expected} target for {name} at {inst}, found {target}")]
    WrongDirection {
        inst: InstId,
        name: &'static str,
        expected: &'static str,
        target: InstId,
    },
    #[error("expected a non-negative stack depth after {inst} ({name}), found {depth}")]
    NegativeStackDepth {
        inst: InstId,
        name: &'static str,
        depth: i64,
    },
    #[error("expected stack depth {expected} at {inst} (reached earlier), found {found}")]
    InconsistentStackDepth {
        inst: InstId,
        expected: u32,
        found: u32,
    },
    #[error("expected {inst} ({name}) to end the code with a return, raise or jump, found it falls off the end")]
    FallsOffEnd { inst: InstId, name: &'static str },
}

/// Assembles instructions into a code object's raw pieces (see the module doc).
///
/// A jump whose `target` lies on the other side of its opcode's direction is written with its
/// twin opcode (`JUMP_FORWARD` <-> `JUMP_BACKWARD`, `POP_JUMP_FORWARD_IF_*` <->
/// `POP_JUMP_BACKWARD_IF_*`), as 3.11 `compile.c` (`normalize_jumps`) does; jumps without a twin
/// (`FOR_ITER`, `SEND`, `JUMP_IF_*_OR_POP`, `JUMP_BACKWARD_NO_INTERRUPT`) must already point the
/// right way. A target at or before the jump itself is backward.
pub fn assemble(
    insts: &[Instruction],
    firstlineno: u32,
    version: PyVersion,
) -> Result<Assembled, AssembleError> {
    let (real, first) = match version {
        PyVersion::V311 => v311::lower(insts)?,
        PyVersion::V312 => v312::lower(insts)?,
        PyVersion::V313 => v313::lower(insts)?,
    };
    let mut out = encode(&real, firstlineno, version)?;
    out.offsets = first[..insts.len()]
        .iter()
        .map(|&f| out.offsets.get(f as usize).copied().unwrap_or(out.code.len() as u32))
        .collect();
    out.stacksize = analysis::stack_depth_in(insts, version)?;
    Ok(out)
}

/// Number of `EXTENDED_ARG` prefixes needed for `arg` (`instr_size` in 3.11 `compile.c`).
pub fn extended_args(arg: u32) -> u32 {
    match arg {
        0..=0xff => 0,
        0x100..=0xffff => 1,
        0x1_0000..=0xff_ffff => 2,
        _ => 3,
    }
}

/// Code units taken by an instruction with this opcode and oparg, prefixes and caches included.
pub fn instruction_units(opcode: u8, arg: u32, version: PyVersion) -> u32 {
    extended_args(arg) + 1 + u32::from(version.cache_entries(opcode))
}

/// Writes a version's own instructions (`insts` hold its opcode numbers); `stacksize` is left 0
/// and `offsets` index `insts`.
fn encode(insts: &[Instruction], firstlineno: u32, version: PyVersion) -> Result<Assembled, AssembleError> {
    let opcodes = check_and_orient(insts, version)?;
    let (args, units) = resolve_jumps(insts, &opcodes, version);

    let mut code = Vec::with_capacity(units.last().copied().unwrap_or(0) as usize * 2);
    let mut offsets = Vec::with_capacity(insts.len());
    for (&opcode, &arg) in opcodes.iter().zip(&args) {
        for shift in (1..=extended_args(arg)).rev() {
            code.extend([version.extended_arg(), (arg >> (8 * shift)) as u8]);
        }
        offsets.push(code.len() as u32);
        code.extend([opcode, arg as u8]);
        code.resize(code.len() + 2 * version.cache_entries(opcode) as usize, 0);
    }

    let mut entries: Vec<ExceptionTableEntry> = Vec::new();
    let mut lines = LineTableWriter::new(firstlineno);
    // 3.11 writes location entries per instruction; 3.12 merges runs of instructions with the
    // same location first (`assemble_location_info` in 3.12 `compile.c`).
    let merge_runs = version != PyVersion::V311;
    let mut run: Option<(crate::bytecode::Positions, u32)> = None;
    for (idx, inst) in insts.iter().enumerate() {
        let (start, end) = (units[idx], units[idx + 1]);
        if merge_runs {
            match &mut run {
                Some((pos, n)) if *pos == inst.positions => *n += end - start,
                _ => {
                    if let Some((pos, n)) = run.take() {
                        lines.push(&pos, n);
                    }
                    run = Some((inst.positions, end - start));
                }
            }
        } else {
            lines.push(&inst.positions, end - start);
        }
        let Some(exn) = inst.exn else { continue };
        let target = units[exn.handler.index()];
        match entries.last_mut() {
            Some(last)
                if last.end == start
                    && (last.target, last.depth, last.lasti) == (target, exn.depth, exn.lasti) =>
            {
                last.end = end;
            }
            _ => entries.push(ExceptionTableEntry {
                start,
                end,
                target,
                depth: exn.depth,
                lasti: exn.lasti,
            }),
        }
    }

    if let Some((pos, n)) = run {
        lines.push(&pos, n);
    }
    Ok(Assembled {
        code,
        exceptiontable: exception_table::write(&entries),
        linetable: lines.finish(),
        stacksize: 0,
        offsets,
    })
}

/// Validates opcodes, targets and handlers, and returns the opcode each instruction is written
/// with (jumps flipped to match their target's direction).
fn check_and_orient(insts: &[Instruction], version: PyVersion) -> Result<Vec<u8>, AssembleError> {
    let len = insts.len();
    insts
        .iter()
        .enumerate()
        .map(|(idx, inst)| {
            let id = InstId(idx as u32);
            let name = version.real_name(inst.opcode);
            if !version.is_real(inst.opcode)
                || inst.opcode == op::CACHE
                || inst.opcode == version.extended_arg()
            {
                return Err(AssembleError::InvalidOpcode {
                    inst: id,
                    opcode: inst.opcode,
                    version,
                });
            }
            if let Some(exn) = inst.exn {
                if exn.handler.index() >= len {
                    return Err(AssembleError::HandlerOutOfRange {
                        inst: id,
                        handler: exn.handler,
                        len,
                    });
                }
            }
            let Some(dir) = version.jump_dir(inst.opcode) else {
                return match inst.target {
                    Some(target) => Err(AssembleError::UnexpectedTarget {
                        inst: id,
                        name,
                        target,
                    }),
                    None => Ok(inst.opcode),
                };
            };
            let target = inst
                .target
                .ok_or(AssembleError::MissingTarget { inst: id, name })?;
            if target.index() >= len {
                return Err(AssembleError::TargetOutOfRange {
                    inst: id,
                    target,
                    len,
                });
            }
            let backward = target.index() <= idx;
            if backward == (dir == JumpDir::Backward) {
                return Ok(inst.opcode);
            }
            version.flip(inst.opcode).ok_or(AssembleError::WrongDirection {
                inst: id,
                name,
                expected: if backward { "forward" } else { "backward" },
                target,
            })
        })
        .collect()
}

/// Computes every oparg and the code-unit start of each instruction (plus the total at the
/// end). Jump opargs start at 0 and only grow, so iterating to a fixed point finds the same
/// smallest sizes as 3.11 `assemble_jump_offsets`.
fn resolve_jumps(insts: &[Instruction], opcodes: &[u8], version: PyVersion) -> (Vec<u32>, Vec<u32>) {
    let mut args: Vec<u32> = insts
        .iter()
        .map(|inst| if inst.target.is_some() { 0 } else { inst.arg })
        .collect();
    loop {
        let mut units = Vec::with_capacity(insts.len() + 1);
        let mut total = 0;
        units.push(0);
        for (&opcode, &arg) in opcodes.iter().zip(&args) {
            total += instruction_units(opcode, arg, version);
            units.push(total);
        }
        let mut changed = false;
        for (idx, inst) in insts.iter().enumerate() {
            let Some(target) = inst.target else { continue };
            let next = units[idx + 1];
            let dest = units[target.index()];
            let arg = dest.abs_diff(next);
            changed |= extended_args(arg) != extended_args(args[idx]);
            args[idx] = arg;
        }
        if !changed {
            return (args, units);
        }
    }
}
