//! CPython 3.13's `co_code` (3.13 `Lib/opcode.py`, `Include/opcode_ids.h`, `Python/bytecodes.c`)
//! and its mapping to and from the instruction model (3.11's opcodes and meanings plus the
//! additions, see `opcode.rs`).
//!
//! 3.13 renumbered every opcode (the model keeps 3.11's numbers; the mapping goes by name) and
//! added superinstructions and split a few opcodes. Lifting (decode) and lowering (assemble) are
//! inverse, so unchanged code round-trips byte for byte:
//!
//! | 3.13 `co_code` | model |
//! |---|---|
//! | `CALL n` | `PRECALL n`, `CALL n` (as for 3.12) |
//! | `CALL_KW n` (keyword names in a tuple on the stack) | `CALL_KW n` (an addition: 3.11's `KW_NAMES` kept the names out of the stack) |
//! | `LOAD_ATTR (i << 1) \| 1` / `LOAD_ATTR i << 1` | `LOAD_METHOD i` / `LOAD_ATTR i` (as for 3.12) |
//! | `COMPARE_OP (c << 5) \| 16 \| mask` | `COMPARE_OP c`, `TO_BOOL` (bit 16 converts the result to `bool`) |
//! | `COMPARE_OP (c << 5) \| mask` | `COMPARE_OP c` |
//! | `TO_BOOL` | `TO_BOOL` (an addition); 3.13's `POP_JUMP_IF_{TRUE,FALSE}` and `UNARY_NOT` need an exact `bool`, so lowering puts one before those of code generated for 3.11 habits unless the value is known to be a `bool` |
//! | `LOAD_FAST_LOAD_FAST (a << 4) \| b` | `LOAD_FAST a`, `LOAD_FAST b` |
//! | `STORE_FAST_LOAD_FAST (a << 4) \| b` | `STORE_FAST a`, `LOAD_FAST b` |
//! | `STORE_FAST_STORE_FAST (a << 4) \| b` | `STORE_FAST a`, `STORE_FAST b` |
//! | `MAKE_FUNCTION`, then `SET_FUNCTION_ATTRIBUTE f` per attribute | `MAKE_FUNCTION` with the flags or-ed (3.11) |
//! | `FORMAT_SIMPLE` / `FORMAT_WITH_SPEC` | `FORMAT_VALUE 0` / `FORMAT_VALUE 4` |
//! | `LOAD_FAST i` of a cell for a closure tuple (before `BUILD_TUPLE`, code, `MAKE_FUNCTION`) | `LOAD_CLOSURE i` (3.13 lowers that pseudo-instruction to `LOAD_FAST` after forming superinstructions) |
//! | `CONVERT_VALUE c` | `CONVERT_VALUE c` (an addition: 3.13 converts before the spec is evaluated) |
//! | `END_FOR`, `POP_TOP` (`END_FOR` pops one value in 3.13) | `END_FOR` (pops two, as in 3.12) |
//! | `FOR_ITER` to `END_FOR` (exhaustion skips `END_FOR` and `POP_TOP`) | `FOR_ITER` to the instruction after them (3.11's meaning) |
//! | `POP_JUMP_IF_*` (forward only) | `POP_JUMP_FORWARD_IF_*` (as for 3.12) |
//! | `CALL_INTRINSIC_1 5` / `6`, `CALL_INTRINSIC_2 1` | `UNARY_POSITIVE` / `LIST_TO_TUPLE`, `PREP_RERAISE_STAR` |
//!
//! Stack layouts the model keeps as 3.13 has them (a graph break rebuilds the real stack):
//! a call's NULL comes after the callable (`[callable, NULL, args...]`, see
//! [`PyVersion::null_after_callable`]), so `LOAD_GLOBAL` with the NULL bit, `LOAD_METHOD` of a
//! non-method and `LOAD_SUPER_ATTR` with the method bit push the NULL second.
//!
//! Lowering fuses `LOAD_FAST`/`STORE_FAST` pairs into superinstructions where 3.13's
//! `insert_superinstructions` (`Python/flowgraph.c`) would: both opargs below 16, the second
//! instruction not a jump target, under the same handler, and on the same line.

use super::assemble::AssembleError;
use super::decode::DecodeError;
use super::instruction::{InstId, Instruction};
use super::opcode::{self, op};
use super::rewrite::expand;
use super::{JumpDir, PyVersion};

/// Every opcode of 3.13's `dis.opmap` that can appear in `co_code` (no pseudo-instructions, no
/// `INSTRUMENTED_*`, no `ENTER_EXECUTOR`: `co_code` is returned de-instrumented and without
/// executors), as `(number, name)`.
pub const ALL: &[(u8, &str)] = &[
    (0, "CACHE"),
    (1, "BEFORE_ASYNC_WITH"),
    (2, "BEFORE_WITH"),
    (4, "BINARY_SLICE"),
    (5, "BINARY_SUBSCR"),
    (6, "CHECK_EG_MATCH"),
    (7, "CHECK_EXC_MATCH"),
    (8, "CLEANUP_THROW"),
    (9, "DELETE_SUBSCR"),
    (10, "END_ASYNC_FOR"),
    (11, "END_FOR"),
    (12, "END_SEND"),
    (13, "EXIT_INIT_CHECK"),
    (14, "FORMAT_SIMPLE"),
    (15, "FORMAT_WITH_SPEC"),
    (16, "GET_AITER"),
    (17, "RESERVED"),
    (18, "GET_ANEXT"),
    (19, "GET_ITER"),
    (20, "GET_LEN"),
    (21, "GET_YIELD_FROM_ITER"),
    (22, "INTERPRETER_EXIT"),
    (23, "LOAD_ASSERTION_ERROR"),
    (24, "LOAD_BUILD_CLASS"),
    (25, "LOAD_LOCALS"),
    (26, "MAKE_FUNCTION"),
    (27, "MATCH_KEYS"),
    (28, "MATCH_MAPPING"),
    (29, "MATCH_SEQUENCE"),
    (30, "NOP"),
    (31, "POP_EXCEPT"),
    (32, "POP_TOP"),
    (33, "PUSH_EXC_INFO"),
    (34, "PUSH_NULL"),
    (35, "RETURN_GENERATOR"),
    (36, "RETURN_VALUE"),
    (37, "SETUP_ANNOTATIONS"),
    (38, "STORE_SLICE"),
    (39, "STORE_SUBSCR"),
    (40, "TO_BOOL"),
    (41, "UNARY_INVERT"),
    (42, "UNARY_NEGATIVE"),
    (43, "UNARY_NOT"),
    (44, "WITH_EXCEPT_START"),
    (45, "BINARY_OP"),
    (46, "BUILD_CONST_KEY_MAP"),
    (47, "BUILD_LIST"),
    (48, "BUILD_MAP"),
    (49, "BUILD_SET"),
    (50, "BUILD_SLICE"),
    (51, "BUILD_STRING"),
    (52, "BUILD_TUPLE"),
    (53, "CALL"),
    (54, "CALL_FUNCTION_EX"),
    (55, "CALL_INTRINSIC_1"),
    (56, "CALL_INTRINSIC_2"),
    (57, "CALL_KW"),
    (58, "COMPARE_OP"),
    (59, "CONTAINS_OP"),
    (60, "CONVERT_VALUE"),
    (61, "COPY"),
    (62, "COPY_FREE_VARS"),
    (63, "DELETE_ATTR"),
    (64, "DELETE_DEREF"),
    (65, "DELETE_FAST"),
    (66, "DELETE_GLOBAL"),
    (67, "DELETE_NAME"),
    (68, "DICT_MERGE"),
    (69, "DICT_UPDATE"),
    (71, "EXTENDED_ARG"),
    (72, "FOR_ITER"),
    (73, "GET_AWAITABLE"),
    (74, "IMPORT_FROM"),
    (75, "IMPORT_NAME"),
    (76, "IS_OP"),
    (77, "JUMP_BACKWARD"),
    (78, "JUMP_BACKWARD_NO_INTERRUPT"),
    (79, "JUMP_FORWARD"),
    (80, "LIST_APPEND"),
    (81, "LIST_EXTEND"),
    (82, "LOAD_ATTR"),
    (83, "LOAD_CONST"),
    (84, "LOAD_DEREF"),
    (85, "LOAD_FAST"),
    (86, "LOAD_FAST_AND_CLEAR"),
    (87, "LOAD_FAST_CHECK"),
    (88, "LOAD_FAST_LOAD_FAST"),
    (89, "LOAD_FROM_DICT_OR_DEREF"),
    (90, "LOAD_FROM_DICT_OR_GLOBALS"),
    (91, "LOAD_GLOBAL"),
    (92, "LOAD_NAME"),
    (93, "LOAD_SUPER_ATTR"),
    (94, "MAKE_CELL"),
    (95, "MAP_ADD"),
    (96, "MATCH_CLASS"),
    (97, "POP_JUMP_IF_FALSE"),
    (98, "POP_JUMP_IF_NONE"),
    (99, "POP_JUMP_IF_NOT_NONE"),
    (100, "POP_JUMP_IF_TRUE"),
    (101, "RAISE_VARARGS"),
    (102, "RERAISE"),
    (103, "RETURN_CONST"),
    (104, "SEND"),
    (105, "SET_ADD"),
    (106, "SET_FUNCTION_ATTRIBUTE"),
    (107, "SET_UPDATE"),
    (108, "STORE_ATTR"),
    (109, "STORE_DEREF"),
    (110, "STORE_FAST"),
    (111, "STORE_FAST_LOAD_FAST"),
    (112, "STORE_FAST_STORE_FAST"),
    (113, "STORE_GLOBAL"),
    (114, "STORE_NAME"),
    (115, "SWAP"),
    (116, "UNPACK_EX"),
    (117, "UNPACK_SEQUENCE"),
    (118, "YIELD_VALUE"),
    (149, "RESUME"),
];

/// `EXTENDED_ARG` in 3.13 (the prefix `decode`/`assemble` fold and write).
pub const EXTENDED_ARG: u8 = 71;

/// 3.13 opcode numbers this module treats specially.
mod real {
    pub const CACHE: u8 = 0;
    pub const END_FOR: u8 = 11;
    pub const FORMAT_SIMPLE: u8 = 14;
    pub const FORMAT_WITH_SPEC: u8 = 15;
    pub const MAKE_FUNCTION: u8 = 26;
    pub const BUILD_TUPLE: u8 = 52;
    pub const LOAD_CONST: u8 = 83;
    pub const POP_TOP: u8 = 32;
    pub const TO_BOOL: u8 = 40;
    pub const CALL: u8 = 53;
    pub const CALL_INTRINSIC_1: u8 = 55;
    pub const CALL_INTRINSIC_2: u8 = 56;
    pub const CALL_KW: u8 = 57;
    pub const COMPARE_OP: u8 = 58;
    pub const CONVERT_VALUE: u8 = 60;
    pub const FOR_ITER: u8 = 72;
    pub const JUMP_BACKWARD: u8 = 77;
    pub const JUMP_BACKWARD_NO_INTERRUPT: u8 = 78;
    pub const JUMP_FORWARD: u8 = 79;
    pub const LOAD_ATTR: u8 = 82;
    pub const LOAD_FAST: u8 = 85;
    pub const LOAD_FAST_LOAD_FAST: u8 = 88;
    pub const POP_JUMP_IF_FALSE: u8 = 97;
    pub const POP_JUMP_IF_NONE: u8 = 98;
    pub const POP_JUMP_IF_NOT_NONE: u8 = 99;
    pub const POP_JUMP_IF_TRUE: u8 = 100;
    pub const SEND: u8 = 104;
    pub const SET_FUNCTION_ATTRIBUTE: u8 = 106;
    pub const STORE_FAST_LOAD_FAST: u8 = 111;
    pub const STORE_FAST_STORE_FAST: u8 = 112;
}

/// `INTRINSIC_UNARY_POSITIVE` and `INTRINSIC_LIST_TO_TUPLE` of `CALL_INTRINSIC_1`,
/// `INTRINSIC_PREP_RERAISE_STAR` of `CALL_INTRINSIC_2` (3.13 `Include/internal/pycore_intrinsics.h`,
/// unchanged since 3.12).
const INTRINSIC_UNARY_POSITIVE: u32 = 5;
const INTRINSIC_LIST_TO_TUPLE: u32 = 6;
const INTRINSIC_PREP_RERAISE_STAR: u32 = 1;

/// The mask bits 3.13 `compile.c` puts in the low nibble of `COMPARE_OP`'s oparg for each
/// comparison (`<`, `<=`, `==`, `!=`, `>`, `>=`): unordered 1, less 2, greater 4, equal 8. Bit 16
/// says the result is converted to `bool`; the comparison is `oparg >> 5`.
const COMPARE_MASKS: [u32; 6] = [2, 2 | 8, 8, 1 | 2 | 4, 4, 4 | 8];
const COMPARE_TO_BOOL: u32 = 16;

const NAMES: [Option<&str>; 256] = super::opcode::name_table(ALL);

/// Whether `real` can appear in 3.13's `co_code` (`CACHE` included).
pub fn is_real(real: u8) -> bool {
    NAMES[real as usize].is_some()
}

/// `dis.opname[real]` in 3.13.
pub fn name(real: u8) -> &'static str {
    NAMES[real as usize].unwrap_or("<unknown>")
}

/// Number of inline CACHE code units after `real` (3.13 `dis._inline_cache_entries`).
pub fn cache_entries(real: u8) -> u8 {
    match real {
        // BINARY_OP, UNPACK_SEQUENCE, COMPARE_OP, CONTAINS_OP, BINARY_SUBSCR, FOR_ITER,
        // LOAD_SUPER_ATTR, STORE_SUBSCR, SEND, JUMP_BACKWARD, POP_JUMP_IF_*
        45 | 117 | 58 | 59 | 5 | 72 | 93 | 39 | 104 | 77 | 97 | 98 | 99 | 100 => 1,
        real::CALL | real::TO_BOOL => 3,
        108 | 91 => 4, // STORE_ATTR, LOAD_GLOBAL
        real::LOAD_ATTR => 9,
        _ => 0,
    }
}

/// The direction of a relative jump (3.13 `dis.hasjrel`; only `JUMP_BACKWARD*` go backward).
pub fn jump_dir(real: u8) -> Option<JumpDir> {
    use real::*;
    match real {
        FOR_ITER | JUMP_FORWARD | POP_JUMP_IF_FALSE | POP_JUMP_IF_TRUE | POP_JUMP_IF_NOT_NONE
        | POP_JUMP_IF_NONE | SEND => Some(JumpDir::Forward),
        JUMP_BACKWARD | JUMP_BACKWARD_NO_INTERRUPT => Some(JumpDir::Backward),
        _ => None,
    }
}

/// `JUMP_FORWARD` <-> `JUMP_BACKWARD`, the only jumps 3.13 has in both directions.
pub fn flip(real: u8) -> Option<u8> {
    match real {
        real::JUMP_FORWARD => Some(real::JUMP_BACKWARD),
        real::JUMP_BACKWARD => Some(real::JUMP_FORWARD),
        _ => None,
    }
}

/// The model opcode of a 3.13 opcode that keeps its name and meaning (`None`: no such opcode in
/// the model, the opcode needs the translation of `lift`).
fn to_model(real: u8) -> Option<u8> {
    NAMES[real as usize].and_then(opcode::from_name)
}

/// The 3.13 opcode of a model opcode that keeps its name and meaning.
fn to_real(model: u8) -> Option<u8> {
    let name = opcode::name(model);
    ALL.iter().find(|(_, n)| *n == name).map(|&(r, _)| r)
}

/// Whether the model opcode `model` is lowered to a 3.13 opcode that requires an exact `bool`.
fn wants_bool(model: u8) -> bool {
    use op::*;
    matches!(
        model,
        POP_JUMP_FORWARD_IF_FALSE
            | POP_JUMP_BACKWARD_IF_FALSE
            | POP_JUMP_FORWARD_IF_TRUE
            | POP_JUMP_BACKWARD_IF_TRUE
            | UNARY_NOT
    )
}

/// Whether the model opcode `model` leaves an exact `bool` on top in 3.13 (so no `TO_BOOL` is
/// needed after it; 3.13 `flowgraph.c` drops it there too).
fn makes_bool(model: u8) -> bool {
    use op::*;
    matches!(
        model,
        IS_OP | CONTAINS_OP | TO_BOOL | UNARY_NOT | COMPARE_OP | CHECK_EXC_MATCH | CHECK_EG_MATCH | MATCH_MAPPING | MATCH_SEQUENCE
    )
}

fn unexpected(inst: &Instruction, expected: &'static str, found: u8) -> DecodeError {
    DecodeError::Unexpected {
        offset: inst.offset.unwrap_or(0),
        expected,
        found: name(found),
    }
}

/// 3.13 instructions (real numbers, targets resolved) as the model sees them (module doc).
pub fn lift(raw: Vec<Instruction>) -> Result<Vec<Instruction>, DecodeError> {
    let next_op = |idx: usize| raw.get(idx + 1).map(|i| i.opcode);
    // Instructions folded into the one before them: SET_FUNCTION_ATTRIBUTE after MAKE_FUNCTION,
    // POP_TOP after END_FOR.
    let mut folded = vec![false; raw.len()];
    let mut make_flags = vec![0u32; raw.len()];
    let mut closure_loads = vec![false; raw.len()];
    for idx in 0..raw.len() {
        match raw[idx].opcode {
            real::MAKE_FUNCTION => {
                let mut j = idx + 1;
                while j < raw.len() && raw[j].opcode == real::SET_FUNCTION_ATTRIBUTE {
                    make_flags[idx] |= raw[j].arg;
                    folded[j] = true;
                    j += 1;
                }
            }
            real::END_FOR => {
                if next_op(idx) != Some(real::POP_TOP) {
                    return Err(unexpected(&raw[idx], "POP_TOP after END_FOR", next_op(idx).unwrap_or(real::CACHE)));
                }
                folded[idx + 1] = true;
            }
            real::BUILD_TUPLE => {
                // The cells of a closure: LOAD_CLOSUREs (3.13 writes them as LOAD_FAST after
                // forming superinstructions, so they stay single), BUILD_TUPLE, the code,
                // MAKE_FUNCTION, SET_FUNCTION_ATTRIBUTE 8 (`compiler_make_closure`).
                let n = raw[idx].arg as usize;
                let makes_closure = raw.get(idx + 1).is_some_and(|i| i.opcode == real::LOAD_CONST)
                    && raw.get(idx + 2).is_some_and(|i| i.opcode == real::MAKE_FUNCTION)
                    && raw.get(idx + 3).is_some_and(|i| i.opcode == real::SET_FUNCTION_ATTRIBUTE && i.arg == 0x08);
                if makes_closure && n <= idx && raw[idx - n..idx].iter().all(|i| i.opcode == real::LOAD_FAST) {
                    closure_loads[idx - n..idx].iter_mut().for_each(|c| *c = true);
                }
            }
            real::SET_FUNCTION_ATTRIBUTE if !folded[idx] => {
                return Err(unexpected(&raw[idx], "SET_FUNCTION_ATTRIBUTE right after MAKE_FUNCTION", real::SET_FUNCTION_ATTRIBUTE));
            }
            _ => {}
        }
    }
    let (out, _) = expand(&raw, |idx, inst| {
        if folded[idx] {
            return Ok(vec![]);
        }
        let with = |opcode: u8, arg: u32| Instruction { opcode, arg, target: None, ..inst.clone() };
        let m = match inst.opcode {
            real::CALL => return Ok(vec![with(op::PRECALL, inst.arg), with(op::CALL, inst.arg)]),
            real::CALL_KW => with(op::CALL_KW, inst.arg),
            real::LOAD_ATTR if inst.arg & 1 == 1 => with(op::LOAD_METHOD, inst.arg >> 1),
            real::LOAD_ATTR => with(op::LOAD_ATTR, inst.arg >> 1),
            real::COMPARE_OP => {
                let cmp = with(op::COMPARE_OP, inst.arg >> 5);
                if inst.arg & COMPARE_TO_BOOL != 0 {
                    return Ok(vec![cmp, with(op::TO_BOOL, 0)]);
                }
                cmp
            }
            real::LOAD_FAST_LOAD_FAST | real::STORE_FAST_LOAD_FAST | real::STORE_FAST_STORE_FAST => {
                let (first, second) = match inst.opcode {
                    real::LOAD_FAST_LOAD_FAST => (op::LOAD_FAST, op::LOAD_FAST),
                    real::STORE_FAST_LOAD_FAST => (op::STORE_FAST, op::LOAD_FAST),
                    _ => (op::STORE_FAST, op::STORE_FAST),
                };
                return Ok(vec![with(first, inst.arg >> 4), with(second, inst.arg & 15)]);
            }
            real::MAKE_FUNCTION => with(op::MAKE_FUNCTION, make_flags[idx]),
            real::LOAD_FAST if closure_loads[idx] => with(op::LOAD_CLOSURE, inst.arg),
            real::FORMAT_SIMPLE => with(op::FORMAT_VALUE, 0),
            real::FORMAT_WITH_SPEC => with(op::FORMAT_VALUE, 0x04),
            real::CONVERT_VALUE => with(op::CONVERT_VALUE, inst.arg),
            real::END_FOR => with(op::END_FOR, 0),
            real::FOR_ITER => {
                let end_for = inst.target.expect("FOR_ITER has a target");
                if raw.get(end_for.index()).map(|i| i.opcode) != Some(real::END_FOR) {
                    return Err(DecodeError::ForIterWithoutEndFor { offset: inst.offset.unwrap_or(0) });
                }
                Instruction { opcode: op::FOR_ITER, target: Some(InstId(end_for.0 + 2)), ..inst.clone() }
            }
            real::POP_JUMP_IF_FALSE | real::POP_JUMP_IF_TRUE | real::POP_JUMP_IF_NONE | real::POP_JUMP_IF_NOT_NONE => {
                let opcode = match inst.opcode {
                    real::POP_JUMP_IF_FALSE => op::POP_JUMP_FORWARD_IF_FALSE,
                    real::POP_JUMP_IF_TRUE => op::POP_JUMP_FORWARD_IF_TRUE,
                    real::POP_JUMP_IF_NONE => op::POP_JUMP_FORWARD_IF_NONE,
                    _ => op::POP_JUMP_FORWARD_IF_NOT_NONE,
                };
                Instruction { opcode, ..inst.clone() }
            }
            real::CALL_INTRINSIC_1 if inst.arg == INTRINSIC_UNARY_POSITIVE => with(op::UNARY_POSITIVE, 0),
            real::CALL_INTRINSIC_1 if inst.arg == INTRINSIC_LIST_TO_TUPLE => with(op::LIST_TO_TUPLE, 0),
            real::CALL_INTRINSIC_2 if inst.arg == INTRINSIC_PREP_RERAISE_STAR => with(op::PREP_RERAISE_STAR, 0),
            other => {
                let opcode = to_model(other).ok_or_else(|| unexpected(inst, "a 3.13 opcode the model has", other))?;
                Instruction { opcode, ..inst.clone() }
            }
        };
        Ok(vec![m])
    })?;
    Ok(out)
}

/// The model as 3.13 instructions (real numbers, targets in the returned list), and the index
/// of each model instruction's first 3.13 instruction (module doc).
pub fn lower(insts: &[Instruction]) -> Result<(Vec<Instruction>, Vec<u32>), AssembleError> {
    let not_here = |idx: usize, inst: &Instruction| AssembleError::NotInVersion {
        inst: InstId(idx as u32),
        name: inst.name(),
        version: PyVersion::V313,
    };
    let n = insts.len();
    // Instructions something jumps to or unwinds to: a superinstruction or a folded TO_BOOL
    // must not swallow them.
    let mut targeted = vec![false; n + 1];
    for inst in insts {
        if let Some(t) = inst.target {
            targeted[t.index().min(n)] = true;
        }
        if let Some(e) = &inst.exn {
            targeted[e.handler.index().min(n)] = true;
        }
    }
    // Exits of FOR_ITER loops that need an END_FOR, POP_TOP put in front of them.
    let mut needs_end_for = vec![false; n + 1];
    for (idx, inst) in insts.iter().enumerate() {
        if inst.opcode != op::FOR_ITER {
            continue;
        }
        let Some(t) = inst.target else { continue };
        let before = t.index().checked_sub(1).and_then(|b| insts.get(b));
        match before {
            Some(b) if b.opcode == op::END_FOR => {}
            Some(b) if opcode::is_terminator(b.opcode) && t.index() > idx => needs_end_for[t.index() - 1] = true,
            _ => return Err(AssembleError::ForIterExit { inst: InstId(idx as u32) }),
        }
    }
    // Pairs fused into a superinstruction (index of the first), and instructions that disappear
    // into the one before them (the second of a pair, a TO_BOOL folded into COMPARE_OP).
    let fusable = |a: &Instruction, b: &Instruction, b_idx: usize| {
        a.arg < 16
            && b.arg < 16
            && !targeted[b_idx]
            && a.exn == b.exn
            && !matches!((a.positions.line, b.positions.line), (Some(x), Some(y)) if x != y)
    };
    // The stores right after a loop's END_FOR restore what an inlined comprehension saved
    // (PEP 709): 3.13 writes those as STORE_FAST_MAYBE_NULL, which becomes STORE_FAST only after
    // superinstructions are formed, so they and the store of the result stay single.
    let mut restore = vec![false; n];
    for idx in 1..n {
        let after_loop = insts[idx - 1].opcode == op::END_FOR
            || (insts[idx - 1].opcode == op::SWAP && idx >= 2 && insts[idx - 2].opcode == op::END_FOR);
        restore[idx] = insts[idx].opcode == op::STORE_FAST && (after_loop || restore[idx - 1]);
    }
    // The same restores in the comprehension's cleanup handler, just before its RERAISE.
    let mut before_reraise = vec![false; n + 1];
    for idx in (0..n).rev() {
        before_reraise[idx] = insts[idx].opcode == op::STORE_FAST
            && insts.get(idx + 1).is_some_and(|b| b.opcode == op::RERAISE || before_reraise[idx + 1]);
        restore[idx] |= before_reraise[idx];
    }
    let mut fused = vec![None; n];
    let mut gone = vec![false; n];
    let mut idx = 0;
    while idx + 1 < n {
        let (a, b) = (&insts[idx], &insts[idx + 1]);
        let sup = match (a.opcode, b.opcode) {
            (op::LOAD_FAST, op::LOAD_FAST) => Some(real::LOAD_FAST_LOAD_FAST),
            (op::STORE_FAST, op::LOAD_FAST) => Some(real::STORE_FAST_LOAD_FAST),
            (op::STORE_FAST, op::STORE_FAST) => Some(real::STORE_FAST_STORE_FAST),
            _ => None,
        };
        match sup {
            Some(s) if fusable(a, b, idx + 1) && !restore[idx] && !restore[idx + 1] => {
                fused[idx] = Some(s);
                gone[idx + 1] = true;
                idx += 2;
            }
            _ => idx += 1,
        }
    }
    let (mut out, first) = expand(insts, |idx, inst| {
        if gone[idx] {
            return Ok(vec![]);
        }
        let with = |opcode: u8, arg: u32| Instruction { opcode, arg, target: None, ..inst.clone() };
        let mut v: Vec<Instruction> = Vec::with_capacity(2);
        // A bool the 3.13 opcode needs and the value may not be yet.
        // (Code lifted from 3.13 has its TO_BOOLs; this is for code generated for 3.11 habits.)
        if wants_bool(inst.opcode) && !(idx > 0 && makes_bool(insts[idx - 1].opcode)) {
            v.push(with(real::TO_BOOL, 0));
        }
        use op::*;
        match inst.opcode {
            PRECALL => return Ok(vec![]),
            KW_NAMES => return Err(not_here(idx, inst)),
            _ if fused[idx].is_some() => {
                let b = &insts[idx + 1];
                v.push(with(fused[idx].expect("checked"), (inst.arg << 4) | b.arg));
            }
            LOAD_METHOD => v.push(with(real::LOAD_ATTR, (inst.arg << 1) | 1)),
            LOAD_ATTR => v.push(with(real::LOAD_ATTR, inst.arg << 1)),
            LOAD_CLOSURE => v.push(with(real::LOAD_FAST, inst.arg)),
            COMPARE_OP => {
                let mask = COMPARE_MASKS.get(inst.arg as usize).ok_or_else(|| not_here(idx, inst))?;
                // A TO_BOOL right after it is folded in (its own arm emits nothing).
                let to_bool = insts.get(idx + 1).is_some_and(|b| !targeted[idx + 1] && b.opcode == TO_BOOL);
                v.push(with(real::COMPARE_OP, (inst.arg << 5) | if to_bool { COMPARE_TO_BOOL } else { 0 } | mask));
            }
            TO_BOOL => {
                if !(idx > 0 && !targeted[idx] && insts[idx - 1].opcode == COMPARE_OP) {
                    v.push(with(real::TO_BOOL, 0));
                }
            }
            MAKE_FUNCTION => {
                v.push(with(real::MAKE_FUNCTION, 0));
                for flag in [0x08, 0x04, 0x02, 0x01] {
                    if inst.arg & flag != 0 {
                        v.push(with(real::SET_FUNCTION_ATTRIBUTE, flag));
                    }
                }
            }
            FORMAT_VALUE => {
                let conv = inst.arg & 0x03;
                let spec = inst.arg & 0x04 != 0;
                if conv != 0 {
                    if spec {
                        // 3.13 converts before the spec is evaluated: not expressible here.
                        return Err(not_here(idx, inst));
                    }
                    v.push(with(real::CONVERT_VALUE, conv));
                }
                v.push(with(if spec { real::FORMAT_WITH_SPEC } else { real::FORMAT_SIMPLE }, 0));
            }
            CONVERT_VALUE => v.push(with(real::CONVERT_VALUE, inst.arg)),
            CALL_KW => v.push(with(real::CALL_KW, inst.arg)),
            END_FOR => {
                v.push(with(real::END_FOR, 0));
                v.push(with(real::POP_TOP, 0));
            }
            UNARY_POSITIVE => v.push(with(real::CALL_INTRINSIC_1, INTRINSIC_UNARY_POSITIVE)),
            LIST_TO_TUPLE => v.push(with(real::CALL_INTRINSIC_1, INTRINSIC_LIST_TO_TUPLE)),
            PREP_RERAISE_STAR => v.push(with(real::CALL_INTRINSIC_2, INTRINSIC_PREP_RERAISE_STAR)),
            POP_JUMP_FORWARD_IF_FALSE
            | POP_JUMP_BACKWARD_IF_FALSE
            | POP_JUMP_FORWARD_IF_TRUE
            | POP_JUMP_BACKWARD_IF_TRUE
            | POP_JUMP_FORWARD_IF_NONE
            | POP_JUMP_BACKWARD_IF_NONE
            | POP_JUMP_FORWARD_IF_NOT_NONE
            | POP_JUMP_BACKWARD_IF_NOT_NONE => {
                let (when, unless) = match inst.opcode {
                    POP_JUMP_FORWARD_IF_FALSE | POP_JUMP_BACKWARD_IF_FALSE => (real::POP_JUMP_IF_FALSE, real::POP_JUMP_IF_TRUE),
                    POP_JUMP_FORWARD_IF_TRUE | POP_JUMP_BACKWARD_IF_TRUE => (real::POP_JUMP_IF_TRUE, real::POP_JUMP_IF_FALSE),
                    POP_JUMP_FORWARD_IF_NONE | POP_JUMP_BACKWARD_IF_NONE => (real::POP_JUMP_IF_NONE, real::POP_JUMP_IF_NOT_NONE),
                    _ => (real::POP_JUMP_IF_NOT_NONE, real::POP_JUMP_IF_NONE),
                };
                let target = inst.target.ok_or(AssembleError::MissingTarget { inst: InstId(idx as u32), name: inst.name() })?;
                if target.index() > idx {
                    v.push(Instruction { opcode: when, ..inst.clone() });
                } else {
                    // 3.13 has no backward conditional jump: skip over an unconditional one.
                    v.push(Instruction { opcode: unless, target: Some(InstId(idx as u32 + 1)), ..inst.clone() });
                    v.push(Instruction { opcode: real::JUMP_BACKWARD, arg: 0, ..inst.clone() });
                }
            }
            JUMP_IF_FALSE_OR_POP | JUMP_IF_TRUE_OR_POP | PRINT_EXPR | IMPORT_STAR | ASYNC_GEN_WRAP | LOAD_CLASSDEREF => {
                return Err(not_here(idx, inst))
            }
            other => {
                let r = to_real(other).filter(|&r| r != real::CACHE).ok_or_else(|| not_here(idx, inst))?;
                v.push(Instruction { opcode: r, ..inst.clone() });
            }
        }
        if needs_end_for[idx] {
            let mut end = with(real::END_FOR, 0);
            end.offset = None;
            let mut pop = with(real::POP_TOP, 0);
            pop.offset = None;
            v.push(end);
            v.push(pop);
        }
        Ok(v)
    })?;
    // FOR_ITER jumps to the END_FOR (then POP_TOP) just before its exit in the model.
    for idx in 0..out.len() {
        if out[idx].opcode == real::FOR_ITER {
            let t = out[idx].target.expect("FOR_ITER has a target").index();
            debug_assert!(t > 1 && out[t - 2].opcode == real::END_FOR && out[t - 1].opcode == real::POP_TOP);
            out[idx].target = Some(InstId(t as u32 - 2));
        }
    }
    Ok((out, first))
}
