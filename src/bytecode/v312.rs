//! CPython 3.12's `co_code` (3.12 `Lib/opcode.py`, `Python/bytecodes.c`) and its mapping to and
//! from the instruction model (3.11's opcodes and meanings plus the additions, see `opcode.rs`).
//!
//! Lifting (decode) and lowering (assemble) are inverse, so unchanged code round-trips byte for
//! byte:
//!
//! | 3.12 `co_code` | model |
//! |---|---|
//! | `CALL n` | `PRECALL n`, `CALL n` (3.12 folded `PRECALL` into `CALL`; same stack layout) |
//! | `LOAD_ATTR (i << 1) \| 1` | `LOAD_METHOD i` (the method bit) |
//! | `LOAD_ATTR i << 1` | `LOAD_ATTR i` |
//! | `COMPARE_OP (c << 4) \| mask` | `COMPARE_OP c` (the mask is a function of `c`, as `compile.c` writes it) |
//! | `POP_JUMP_IF_{FALSE,TRUE,NONE,NOT_NONE}` (forward only) | `POP_JUMP_FORWARD_IF_*`; a backward one in the model is lowered to the negated forward jump over a `JUMP_BACKWARD` |
//! | `FOR_ITER` to `END_FOR` (which exhaustion skips) | `FOR_ITER` to the instruction after the `END_FOR` (3.11's meaning: pop the iterator, jump) |
//! | `CALL_INTRINSIC_1 5` / `6`, `CALL_INTRINSIC_2 1` | `UNARY_POSITIVE` / `LIST_TO_TUPLE`, `PREP_RERAISE_STAR` |
//! | `YIELD_VALUE` (150), `LOAD_LOCALS` (87), `CALL_INTRINSIC_*` (173, 174), `LOAD_FROM_DICT_OR_*` (175, 176) | the model's numbers for them (86, 56, 177, 178, 179, 180) |
//!
//! Everything else keeps its number and meaning. A `FOR_ITER` of the model whose exit is not
//! preceded by `END_FOR` (code generated for 3.11 habits) gets one inserted after the
//! instruction before the exit, which must not fall through.

use super::assemble::AssembleError;
use super::decode::DecodeError;
use super::instruction::{InstId, Instruction};
use super::opcode::{self, op};
use super::rewrite::expand;
use super::{JumpDir, PyVersion};

/// Every opcode of 3.12's `dis.opmap` that can appear in `co_code` (no pseudo-instructions, no
/// `INSTRUMENTED_*`: `co_code` is returned de-instrumented), as `(number, name)`.
pub const ALL: &[(u8, &str)] = &[
    (0, "CACHE"),
    (1, "POP_TOP"),
    (2, "PUSH_NULL"),
    (3, "INTERPRETER_EXIT"),
    (4, "END_FOR"),
    (5, "END_SEND"),
    (9, "NOP"),
    (11, "UNARY_NEGATIVE"),
    (12, "UNARY_NOT"),
    (15, "UNARY_INVERT"),
    (17, "RESERVED"),
    (25, "BINARY_SUBSCR"),
    (26, "BINARY_SLICE"),
    (27, "STORE_SLICE"),
    (30, "GET_LEN"),
    (31, "MATCH_MAPPING"),
    (32, "MATCH_SEQUENCE"),
    (33, "MATCH_KEYS"),
    (35, "PUSH_EXC_INFO"),
    (36, "CHECK_EXC_MATCH"),
    (37, "CHECK_EG_MATCH"),
    (49, "WITH_EXCEPT_START"),
    (50, "GET_AITER"),
    (51, "GET_ANEXT"),
    (52, "BEFORE_ASYNC_WITH"),
    (53, "BEFORE_WITH"),
    (54, "END_ASYNC_FOR"),
    (55, "CLEANUP_THROW"),
    (60, "STORE_SUBSCR"),
    (61, "DELETE_SUBSCR"),
    (68, "GET_ITER"),
    (69, "GET_YIELD_FROM_ITER"),
    (71, "LOAD_BUILD_CLASS"),
    (74, "LOAD_ASSERTION_ERROR"),
    (75, "RETURN_GENERATOR"),
    (83, "RETURN_VALUE"),
    (85, "SETUP_ANNOTATIONS"),
    (87, "LOAD_LOCALS"),
    (89, "POP_EXCEPT"),
    (90, "STORE_NAME"),
    (91, "DELETE_NAME"),
    (92, "UNPACK_SEQUENCE"),
    (93, "FOR_ITER"),
    (94, "UNPACK_EX"),
    (95, "STORE_ATTR"),
    (96, "DELETE_ATTR"),
    (97, "STORE_GLOBAL"),
    (98, "DELETE_GLOBAL"),
    (99, "SWAP"),
    (100, "LOAD_CONST"),
    (101, "LOAD_NAME"),
    (102, "BUILD_TUPLE"),
    (103, "BUILD_LIST"),
    (104, "BUILD_SET"),
    (105, "BUILD_MAP"),
    (106, "LOAD_ATTR"),
    (107, "COMPARE_OP"),
    (108, "IMPORT_NAME"),
    (109, "IMPORT_FROM"),
    (110, "JUMP_FORWARD"),
    (114, "POP_JUMP_IF_FALSE"),
    (115, "POP_JUMP_IF_TRUE"),
    (116, "LOAD_GLOBAL"),
    (117, "IS_OP"),
    (118, "CONTAINS_OP"),
    (119, "RERAISE"),
    (120, "COPY"),
    (121, "RETURN_CONST"),
    (122, "BINARY_OP"),
    (123, "SEND"),
    (124, "LOAD_FAST"),
    (125, "STORE_FAST"),
    (126, "DELETE_FAST"),
    (127, "LOAD_FAST_CHECK"),
    (128, "POP_JUMP_IF_NOT_NONE"),
    (129, "POP_JUMP_IF_NONE"),
    (130, "RAISE_VARARGS"),
    (131, "GET_AWAITABLE"),
    (132, "MAKE_FUNCTION"),
    (133, "BUILD_SLICE"),
    (134, "JUMP_BACKWARD_NO_INTERRUPT"),
    (135, "MAKE_CELL"),
    (136, "LOAD_CLOSURE"),
    (137, "LOAD_DEREF"),
    (138, "STORE_DEREF"),
    (139, "DELETE_DEREF"),
    (140, "JUMP_BACKWARD"),
    (141, "LOAD_SUPER_ATTR"),
    (142, "CALL_FUNCTION_EX"),
    (143, "LOAD_FAST_AND_CLEAR"),
    (144, "EXTENDED_ARG"),
    (145, "LIST_APPEND"),
    (146, "SET_ADD"),
    (147, "MAP_ADD"),
    (149, "COPY_FREE_VARS"),
    (150, "YIELD_VALUE"),
    (151, "RESUME"),
    (152, "MATCH_CLASS"),
    (155, "FORMAT_VALUE"),
    (156, "BUILD_CONST_KEY_MAP"),
    (157, "BUILD_STRING"),
    (162, "LIST_EXTEND"),
    (163, "SET_UPDATE"),
    (164, "DICT_MERGE"),
    (165, "DICT_UPDATE"),
    (171, "CALL"),
    (172, "KW_NAMES"),
    (173, "CALL_INTRINSIC_1"),
    (174, "CALL_INTRINSIC_2"),
    (175, "LOAD_FROM_DICT_OR_GLOBALS"),
    (176, "LOAD_FROM_DICT_OR_DEREF"),
];

/// 3.12 numbers of the opcodes whose number in the model differs: `(3.12, model)`.
const RENUMBERED: &[(u8, u8)] = &[
    (87, op::LOAD_LOCALS),
    (150, op::YIELD_VALUE),
    (173, op::CALL_INTRINSIC_1),
    (174, op::CALL_INTRINSIC_2),
    (175, op::LOAD_FROM_DICT_OR_GLOBALS),
    (176, op::LOAD_FROM_DICT_OR_DEREF),
];

/// 3.12 opcode numbers.
mod real {
    pub const CACHE: u8 = 0;
    pub const END_FOR: u8 = 4;
    pub const LOAD_ATTR: u8 = 106;
    pub const COMPARE_OP: u8 = 107;
    pub const JUMP_FORWARD: u8 = 110;
    pub const POP_JUMP_IF_FALSE: u8 = 114;
    pub const POP_JUMP_IF_TRUE: u8 = 115;
    pub const POP_JUMP_IF_NOT_NONE: u8 = 128;
    pub const POP_JUMP_IF_NONE: u8 = 129;
    pub const FOR_ITER: u8 = 93;
    pub const SEND: u8 = 123;
    pub const JUMP_BACKWARD_NO_INTERRUPT: u8 = 134;
    pub const JUMP_BACKWARD: u8 = 140;
    pub const CALL: u8 = 171;
    pub const CALL_INTRINSIC_1: u8 = 173;
    pub const CALL_INTRINSIC_2: u8 = 174;
}

/// `INTRINSIC_UNARY_POSITIVE` and `INTRINSIC_LIST_TO_TUPLE` of `CALL_INTRINSIC_1`,
/// `INTRINSIC_PREP_RERAISE_STAR` of `CALL_INTRINSIC_2` (3.12 `Include/internal/pycore_intrinsics.h`).
const INTRINSIC_UNARY_POSITIVE: u32 = 5;
const INTRINSIC_LIST_TO_TUPLE: u32 = 6;
const INTRINSIC_PREP_RERAISE_STAR: u32 = 1;

/// The mask bits 3.12 `compile.c` puts in the low nibble of `COMPARE_OP`'s oparg for each
/// comparison (`<`, `<=`, `==`, `!=`, `>`, `>=`): unordered 1, less 2, greater 4, equal 8.
const COMPARE_MASKS: [u32; 6] = [2, 2 | 8, 8, 1 | 2 | 4, 4, 4 | 8];

const NAMES: [Option<&str>; 256] = super::opcode::name_table(ALL);

/// Whether `real` can appear in 3.12's `co_code` (`CACHE` included).
pub fn is_real(real: u8) -> bool {
    NAMES[real as usize].is_some()
}

/// `dis.opname[real]` in 3.12.
pub fn name(real: u8) -> &'static str {
    NAMES[real as usize].unwrap_or("<unknown>")
}

/// Number of inline CACHE code units after `real` (3.12 `dis._inline_cache_entries`).
pub fn cache_entries(real: u8) -> u8 {
    match real {
        25 | 60 | 92 | 93 | 107 | 122 | 123 | 141 => 1, // BINARY_SUBSCR, STORE_SUBSCR, UNPACK_SEQUENCE, FOR_ITER, COMPARE_OP, BINARY_OP, SEND, LOAD_SUPER_ATTR
        real::CALL => 3,
        95 | 116 => 4, // STORE_ATTR, LOAD_GLOBAL
        real::LOAD_ATTR => 9,
        _ => 0,
    }
}

/// The direction of a relative jump (3.12 `dis.hasjrel`; only `JUMP_BACKWARD*` go backward).
pub fn jump_dir(real: u8) -> Option<JumpDir> {
    use real::*;
    match real {
        FOR_ITER | JUMP_FORWARD | POP_JUMP_IF_FALSE | POP_JUMP_IF_TRUE | POP_JUMP_IF_NOT_NONE
        | POP_JUMP_IF_NONE | SEND => Some(JumpDir::Forward),
        JUMP_BACKWARD | JUMP_BACKWARD_NO_INTERRUPT => Some(JumpDir::Backward),
        _ => None,
    }
}

/// `JUMP_FORWARD` <-> `JUMP_BACKWARD`, the only jumps 3.12 has in both directions.
pub fn flip(real: u8) -> Option<u8> {
    match real {
        real::JUMP_FORWARD => Some(real::JUMP_BACKWARD),
        real::JUMP_BACKWARD => Some(real::JUMP_FORWARD),
        _ => None,
    }
}

fn to_model(real: u8) -> u8 {
    RENUMBERED
        .iter()
        .find(|(r, _)| *r == real)
        .map_or(real, |&(_, m)| m)
}

fn to_real(model: u8) -> u8 {
    RENUMBERED
        .iter()
        .find(|(_, m)| *m == model)
        .map_or(model, |&(r, _)| r)
}

/// 3.12 instructions (real numbers, targets resolved) as the model sees them (module doc).
pub fn lift(raw: Vec<Instruction>) -> Result<Vec<Instruction>, DecodeError> {
    let (out, _) = expand(&raw, |idx, inst| {
        let mut m = inst.clone();
        m.opcode = to_model(inst.opcode);
        match inst.opcode {
            real::CALL => {
                let precall = Instruction {
                    opcode: op::PRECALL,
                    target: None,
                    ..inst.clone()
                };
                return Ok(vec![precall, m]);
            }
            real::LOAD_ATTR => {
                m.opcode = if inst.arg & 1 == 1 {
                    op::LOAD_METHOD
                } else {
                    op::LOAD_ATTR
                };
                m.arg = inst.arg >> 1;
            }
            real::COMPARE_OP => m.arg = inst.arg >> 4,
            real::FOR_ITER => {
                let end_for = inst.target.expect("FOR_ITER has a target");
                if raw.get(end_for.index()).map(|i| i.opcode) != Some(real::END_FOR) {
                    return Err(DecodeError::ForIterWithoutEndFor {
                        offset: inst.offset.unwrap_or(0),
                    });
                }
                m.target = Some(InstId(end_for.0 + 1));
            }
            real::CALL_INTRINSIC_1 if inst.arg == INTRINSIC_UNARY_POSITIVE => {
                m = Instruction {
                    opcode: op::UNARY_POSITIVE,
                    arg: 0,
                    ..inst.clone()
                };
            }
            real::CALL_INTRINSIC_1 if inst.arg == INTRINSIC_LIST_TO_TUPLE => {
                m = Instruction {
                    opcode: op::LIST_TO_TUPLE,
                    arg: 0,
                    ..inst.clone()
                };
            }
            real::CALL_INTRINSIC_2 if inst.arg == INTRINSIC_PREP_RERAISE_STAR => {
                m = Instruction {
                    opcode: op::PREP_RERAISE_STAR,
                    arg: 0,
                    ..inst.clone()
                };
            }
            _ => {}
        }
        let _ = idx;
        Ok(vec![m])
    })?;
    Ok(out)
}

/// The model as 3.12 instructions (real numbers, targets in the returned list), and the index
/// of each model instruction's first 3.12 instruction (module doc).
pub fn lower(insts: &[Instruction]) -> Result<(Vec<Instruction>, Vec<u32>), AssembleError> {
    let not_here = |idx: usize, inst: &Instruction| AssembleError::NotInVersion {
        inst: InstId(idx as u32),
        name: inst.name(),
        version: PyVersion::V312,
    };
    // Exits of FOR_ITER loops that need an END_FOR put in front of them.
    let mut needs_end_for = vec![false; insts.len() + 1];
    for (idx, inst) in insts.iter().enumerate() {
        if inst.opcode != op::FOR_ITER {
            continue;
        }
        let Some(t) = inst.target else { continue };
        let before = t.index().checked_sub(1).and_then(|b| insts.get(b));
        match before {
            Some(b) if b.opcode == op::END_FOR => {}
            Some(b) if opcode::is_terminator(b.opcode) && t.index() > idx => {
                needs_end_for[t.index() - 1] = true;
            }
            _ => {
                return Err(AssembleError::ForIterExit {
                    inst: InstId(idx as u32),
                })
            }
        }
    }
    let (mut out, first) = expand(insts, |idx, inst| {
        let mut r = inst.clone();
        r.opcode = to_real(inst.opcode);
        let mut extra = Vec::new();
        use op::*;
        match inst.opcode {
            PRECALL => return Ok(vec![]),
            LOAD_METHOD => {
                r.opcode = real::LOAD_ATTR;
                r.arg = (inst.arg << 1) | 1;
            }
            LOAD_ATTR => r.arg = inst.arg << 1,
            COMPARE_OP => {
                let mask = COMPARE_MASKS
                    .get(inst.arg as usize)
                    .ok_or_else(|| not_here(idx, inst))?;
                r.arg = (inst.arg << 4) | mask;
            }
            UNARY_POSITIVE => {
                r.opcode = real::CALL_INTRINSIC_1;
                r.arg = INTRINSIC_UNARY_POSITIVE;
            }
            LIST_TO_TUPLE => {
                r.opcode = real::CALL_INTRINSIC_1;
                r.arg = INTRINSIC_LIST_TO_TUPLE;
            }
            PREP_RERAISE_STAR => {
                r.opcode = real::CALL_INTRINSIC_2;
                r.arg = INTRINSIC_PREP_RERAISE_STAR;
            }
            POP_JUMP_FORWARD_IF_FALSE
            | POP_JUMP_BACKWARD_IF_FALSE
            | POP_JUMP_FORWARD_IF_TRUE
            | POP_JUMP_BACKWARD_IF_TRUE
            | POP_JUMP_FORWARD_IF_NONE
            | POP_JUMP_BACKWARD_IF_NONE
            | POP_JUMP_FORWARD_IF_NOT_NONE
            | POP_JUMP_BACKWARD_IF_NOT_NONE => {
                let (when, unless) = match inst.opcode {
                    POP_JUMP_FORWARD_IF_FALSE | POP_JUMP_BACKWARD_IF_FALSE => {
                        (real::POP_JUMP_IF_FALSE, real::POP_JUMP_IF_TRUE)
                    }
                    POP_JUMP_FORWARD_IF_TRUE | POP_JUMP_BACKWARD_IF_TRUE => {
                        (real::POP_JUMP_IF_TRUE, real::POP_JUMP_IF_FALSE)
                    }
                    POP_JUMP_FORWARD_IF_NONE | POP_JUMP_BACKWARD_IF_NONE => {
                        (real::POP_JUMP_IF_NONE, real::POP_JUMP_IF_NOT_NONE)
                    }
                    _ => (real::POP_JUMP_IF_NOT_NONE, real::POP_JUMP_IF_NONE),
                };
                let target = inst.target.ok_or(AssembleError::MissingTarget {
                    inst: InstId(idx as u32),
                    name: inst.name(),
                })?;
                if target.index() > idx {
                    r.opcode = when;
                } else {
                    // 3.12 has no backward conditional jump: skip over an unconditional one.
                    let skip = Instruction {
                        opcode: unless,
                        target: Some(InstId(idx as u32 + 1)),
                        ..inst.clone()
                    };
                    let back = Instruction {
                        opcode: real::JUMP_BACKWARD,
                        arg: 0,
                        ..inst.clone()
                    };
                    return Ok(vec![skip, back]);
                }
            }
            JUMP_IF_FALSE_OR_POP | JUMP_IF_TRUE_OR_POP | PRINT_EXPR | IMPORT_STAR
            | ASYNC_GEN_WRAP | LOAD_CLASSDEREF => return Err(not_here(idx, inst)),
            _ => {
                if !is_real(r.opcode) || r.opcode == real::CACHE {
                    return Err(not_here(idx, inst));
                }
            }
        }
        if needs_end_for[idx] {
            extra.push(Instruction {
                opcode: real::END_FOR,
                arg: 0,
                target: None,
                offset: None,
                ..inst.clone()
            });
        }
        let mut v = vec![r];
        v.extend(extra);
        Ok(v)
    })?;
    // FOR_ITER jumps to the END_FOR just before its exit in the model.
    for idx in 0..out.len() {
        if out[idx].opcode == real::FOR_ITER {
            let t = out[idx].target.expect("FOR_ITER has a target").index();
            debug_assert!(t > 0 && out[t - 1].opcode == real::END_FOR);
            out[idx].target = Some(InstId(t as u32 - 1));
        }
    }
    Ok((out, first))
}
