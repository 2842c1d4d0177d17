//! `co_code` + `co_exceptiontable` + `co_linetable` -> `Vec<Instruction>`.
//!
//! Two steps: the version's `co_code` is read into instructions with that version's numbers
//! (this file, shared by all versions: both tables have had the same format since 3.11), then
//! the version module lifts them into the instruction model (`v311::lift`, `v312::lift`).
//!
//! Reading folds `EXTENDED_ARG` prefixes into the oparg (3.11 `Lib/dis.py`,
//! `_unpack_opargs`), skips the inline `CACHE` units each opcode owns
//! (`dis._inline_cache_entries`), resolves relative jumps to instruction indices, and attaches
//! to every instruction its source positions and innermost exception handler.
//!
//! Offsets inside the tables and jump targets point at the first code unit of an instruction,
//! which is its first `EXTENDED_ARG` prefix when it has one (3.11 `compile.c` places jump
//! targets and table boundaries at block starts, and blocks start with the prefixes).

use thiserror::Error;

use super::exception_table;
use super::instruction::{ExnTarget, InstId, Instruction, Positions};
use super::line_table;
use super::opcode::op;
use super::{v311, v312, v313, CodeBytes, JumpDir, PyVersion};

/// Why `co_code` or one of its tables could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("expected co_code of even length, found {len} bytes")]
    OddLength { len: usize },
    #[error("expected a {version} opcode at byte {offset}, found {opcode}")]
    UnknownOpcode { offset: u32, opcode: u8, version: PyVersion },
    #[error("expected {expected} at byte {offset}, found {found}")]
    Unexpected { offset: u32, expected: &'static str, found: &'static str },
    #[error("expected FOR_ITER at byte {offset} to jump to an END_FOR")]
    ForIterWithoutEndFor { offset: u32 },
    #[error("expected {expected} CACHE units after {name} at byte {offset}, found {found}")]
    MissingCache {
        offset: u32,
        name: &'static str,
        expected: u8,
        found: String,
    },
    #[error("expected an instruction after EXTENDED_ARG at byte {offset}, found end of code")]
    DanglingExtendedArg { offset: u32 },
    #[error(
        "expected {name} at byte {offset} to jump to an instruction start, found byte {target}"
    )]
    BadJumpTarget {
        offset: u32,
        name: &'static str,
        target: i64,
    },
    #[error(
        "expected exception handler at byte {target} to be an instruction start, found none there"
    )]
    BadHandler { target: u32 },
    #[error("malformed co_exceptiontable at byte {pos}: {reason}")]
    ExceptionTable { pos: usize, reason: String },
    #[error("malformed co_linetable at byte {pos}: {reason}")]
    LineTable { pos: usize, reason: String },
}

/// Decodes a code object's raw pieces into instructions (see the module doc). Jump `arg`s keep
/// the decoded value; `target` holds the resolved instruction.
pub fn decode(code: &CodeBytes) -> Result<Vec<Instruction>, DecodeError> {
    let raw = read(code)?;
    match code.version {
        PyVersion::V311 => v311::lift(raw),
        PyVersion::V312 => v312::lift(raw),
        PyVersion::V313 => v313::lift(raw),
    }
}

/// An instruction as read from `co_code`, before jump resolution: code-unit positions of its
/// first prefix (`start`), of the opcode itself (`op_unit`) and one past its last `CACHE`.
struct RawInst {
    start: u32,
    op_unit: u32,
    next: u32,
    opcode: u8,
    arg: u32,
}

/// The version's instructions with their own opcode numbers, jumps resolved, tables attached.
fn read(code: &CodeBytes) -> Result<Vec<Instruction>, DecodeError> {
    let version = code.version;
    let raw = read_units(code.code, version)?;
    let n_units = (code.code.len() / 2) as u32;

    // Code unit -> instruction starting there (prefix start and opcode unit both map).
    let mut unit_to_inst: Vec<Option<InstId>> = vec![None; n_units as usize + 1];
    for (idx, inst) in raw.iter().enumerate() {
        let id = InstId(idx as u32);
        unit_to_inst[inst.start as usize] = Some(id);
        unit_to_inst[inst.op_unit as usize] = Some(id);
    }
    let inst_at = |unit: i64| -> Option<InstId> {
        usize::try_from(unit)
            .ok()
            .and_then(|unit| unit_to_inst.get(unit).copied().flatten())
    };

    let mut insts = Vec::with_capacity(raw.len());
    for inst in &raw {
        let target = if let Some(dir) = version.jump_dir(inst.opcode) {
            let delta = i64::from(inst.arg);
            let unit = match dir {
                JumpDir::Backward => i64::from(inst.next) - delta,
                JumpDir::Forward => i64::from(inst.next) + delta,
            };
            Some(inst_at(unit).ok_or(DecodeError::BadJumpTarget {
                offset: inst.op_unit * 2,
                name: version.real_name(inst.opcode),
                target: unit * 2,
            })?)
        } else {
            None
        };
        insts.push(Instruction {
            opcode: inst.opcode,
            arg: inst.arg,
            target,
            offset: Some(inst.op_unit * 2),
            positions: Positions::default(),
            exn: None,
        });
    }

    // Exception table: every instruction starting inside [start, end) gets the entry.
    for entry in exception_table::parse(code.exceptiontable)? {
        let handler = inst_at(i64::from(entry.target)).ok_or(DecodeError::BadHandler {
            target: entry.target * 2,
        })?;
        let exn = ExnTarget {
            handler,
            depth: entry.depth,
            lasti: entry.lasti,
        };
        let first = raw.partition_point(|raw_inst| raw_inst.start < entry.start);
        for (inst, raw_inst) in insts[first..].iter_mut().zip(&raw[first..]) {
            if raw_inst.start >= entry.end {
                break;
            }
            inst.exn = Some(exn);
        }
    }

    // Line table: an instruction takes the positions of the span covering its first unit.
    let spans = line_table::parse(code.linetable, code.firstlineno)?;
    let mut span_iter = spans.iter();
    let mut span_end = 0u32;
    let mut current = Positions::default();
    for (inst, raw_inst) in insts.iter_mut().zip(&raw) {
        while span_end <= raw_inst.start {
            match span_iter.next() {
                Some((units, positions)) => {
                    span_end += units;
                    current = *positions;
                }
                None => {
                    current = Positions::default();
                    break;
                }
            }
        }
        inst.positions = current;
    }
    Ok(insts)
}

/// Splits `co_code` into instructions, folding `EXTENDED_ARG` and checking `CACHE` units.
fn read_units(code: &[u8], version: PyVersion) -> Result<Vec<RawInst>, DecodeError> {
    if !code.len().is_multiple_of(2) {
        return Err(DecodeError::OddLength { len: code.len() });
    }
    let units: Vec<(u8, u8)> = code
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1]))
        .collect();
    let mut insts = Vec::new();
    let mut unit = 0usize;
    while unit < units.len() {
        let start = unit as u32;
        let mut arg: u32 = 0;
        while units[unit].0 == version.extended_arg() {
            arg = (arg << 8) | u32::from(units[unit].1);
            unit += 1;
            if unit == units.len() {
                return Err(DecodeError::DanglingExtendedArg {
                    offset: (unit as u32 - 1) * 2,
                });
            }
        }
        let (opcode, low) = units[unit];
        if !version.is_real(opcode) || opcode == op::CACHE {
            return Err(DecodeError::UnknownOpcode {
                offset: unit as u32 * 2,
                opcode,
                version,
            });
        }
        arg = (arg << 8) | u32::from(low);
        let op_unit = unit as u32;
        let n_caches = version.cache_entries(opcode);
        let caches =
            &units[(unit + 1).min(units.len())..(unit + 1 + n_caches as usize).min(units.len())];
        if caches.len() != n_caches as usize
            || caches.iter().any(|&(cache_op, _)| cache_op != op::CACHE)
        {
            let found = if caches.len() != n_caches as usize {
                format!("{} before the end of code", caches.len())
            } else {
                "a non-CACHE unit".to_string()
            };
            return Err(DecodeError::MissingCache {
                offset: op_unit * 2,
                name: version.real_name(opcode),
                expected: n_caches,
                found,
            });
        }
        unit += 1 + n_caches as usize;
        insts.push(RawInst {
            start,
            op_unit,
            next: unit as u32,
            opcode,
            arg,
        });
    }
    Ok(insts)
}
