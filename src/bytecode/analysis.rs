//! Analyses over decoded instructions: stack effects, stack depths, and a text disassembly.
//!
//! Stack effects follow 3.11 `stack_effect` in `Python/compile.c` (exposed as
//! `dis.stack_effect`); the unit test `stack_effect_matches_dis` checks them against `dis`
//! through `test_data/opcodes_311.json`. Depths are found by abstract interpretation over the
//! control-flow graph, as `stackdepth` in 3.11 `compile.c` does, except that exception handlers
//! are entered from the exception table (CPython reaches them through the `SETUP_*`
//! pseudo-instructions, which no longer exist in `co_code`).

use std::fmt::Write;

use super::assemble::AssembleError;
use super::instruction::{InstId, Instruction};
use super::opcode::{self, op};
use super::PyVersion;

/// Net stack effect of one instruction of the model, as 3.11 `dis.stack_effect(opcode, arg,
/// jump=jump)` (the additions as 3.12's `dis.stack_effect`): `jump` selects the taken branch of
/// a jump (ignored by other opcodes). [`stack_effect_in`] gives the one opcode whose effect
/// depends on the version.
pub fn stack_effect(opcode: u8, arg: u32, jump: bool) -> Result<i32, AssembleError> {
    use op::*;
    if !opcode::is_valid(opcode) {
        return Err(AssembleError::UnknownOpcode { opcode });
    }
    let oparg = arg as i64;
    let effect: i64 = match opcode {
        CACHE | NOP | EXTENDED_ARG | RESUME | UNARY_POSITIVE | UNARY_NEGATIVE | UNARY_NOT
        | UNARY_INVERT => 0,
        GET_AITER | GET_ITER | GET_YIELD_FROM_ITER | GET_AWAITABLE | RETURN_GENERATOR
        | LIST_TO_TUPLE => 0,
        SETUP_ANNOTATIONS | YIELD_VALUE | ASYNC_GEN_WRAP | DELETE_NAME | DELETE_GLOBAL
        | DELETE_FAST => 0,
        DELETE_DEREF | MAKE_CELL | COPY_FREE_VARS | SWAP | LOAD_ATTR | KW_NAMES => 0,
        CHECK_EXC_MATCH | CHECK_EG_MATCH => 0,
        JUMP_FORWARD | JUMP_BACKWARD | JUMP_BACKWARD_NO_INTERRUPT => 0,
        POP_TOP | RETURN_VALUE | IMPORT_STAR | POP_EXCEPT | PRINT_EXPR | PREP_RERAISE_STAR => -1,
        STORE_NAME | STORE_FAST | STORE_GLOBAL | STORE_DEREF | DELETE_ATTR | RERAISE => -1,
        BINARY_SUBSCR | BINARY_OP | COMPARE_OP | IS_OP | CONTAINS_OP | IMPORT_NAME | CALL => -1,
        LIST_APPEND | SET_ADD | LIST_EXTEND | SET_UPDATE | DICT_MERGE | DICT_UPDATE => -1,
        POP_JUMP_FORWARD_IF_FALSE | POP_JUMP_FORWARD_IF_TRUE | POP_JUMP_FORWARD_IF_NONE => -1,
        POP_JUMP_FORWARD_IF_NOT_NONE | POP_JUMP_BACKWARD_IF_FALSE | POP_JUMP_BACKWARD_IF_TRUE => -1,
        POP_JUMP_BACKWARD_IF_NONE | POP_JUMP_BACKWARD_IF_NOT_NONE => -1,
        PUSH_NULL | GET_LEN | MATCH_MAPPING | MATCH_SEQUENCE | MATCH_KEYS | PUSH_EXC_INFO => 1,
        WITH_EXCEPT_START | GET_ANEXT | BEFORE_ASYNC_WITH | BEFORE_WITH | LOAD_BUILD_CLASS => 1,
        LOAD_ASSERTION_ERROR | LOAD_CONST | LOAD_NAME | IMPORT_FROM | COPY | LOAD_FAST => 1,
        LOAD_CLOSURE | LOAD_DEREF | LOAD_CLASSDEREF | LOAD_METHOD => 1,
        END_ASYNC_FOR | DELETE_SUBSCR | STORE_ATTR | MAP_ADD | MATCH_CLASS => -2,
        STORE_SUBSCR => -3,
        // Opcodes added by 3.12 (3.12 `Python/bytecodes.c` stack comments).
        RETURN_CONST | CALL_INTRINSIC_1 | LOAD_FROM_DICT_OR_GLOBALS | LOAD_FROM_DICT_OR_DEREF => 0,
        LOAD_FAST_CHECK | LOAD_FAST_AND_CLEAR | LOAD_LOCALS => 1,
        INTERPRETER_EXIT | END_SEND | CLEANUP_THROW | CALL_INTRINSIC_2 => -1,
        END_FOR | BINARY_SLICE => -2,
        // Opcodes added by 3.13 (3.13 `Python/bytecodes.c` stack comments): `TO_BOOL` and
        // `CONVERT_VALUE` replace the value on top; `CALL_KW` pops the callable, `self` or
        // NULL, the arguments and the tuple of keyword names, and pushes the result.
        TO_BOOL | CONVERT_VALUE => 0,
        CALL_KW => -2 - oparg,
        STORE_SLICE => -4,
        // Pops `super`, the class and `self`; pushes the attribute, or the method and `self`.
        LOAD_SUPER_ATTR => -2 + (oparg & 1),
        UNPACK_SEQUENCE => oparg - 1,
        UNPACK_EX => (oparg & 0xff) + (oparg >> 8),
        FOR_ITER => {
            if jump {
                -1
            } else {
                1
            }
        }
        SEND => {
            if jump {
                -1
            } else {
                0
            }
        }
        JUMP_IF_FALSE_OR_POP | JUMP_IF_TRUE_OR_POP => {
            if jump {
                0
            } else {
                -1
            }
        }
        BUILD_TUPLE | BUILD_LIST | BUILD_SET | BUILD_STRING => 1 - oparg,
        BUILD_MAP => 1 - 2 * oparg,
        BUILD_CONST_KEY_MAP | PRECALL | RAISE_VARARGS => -oparg,
        LOAD_GLOBAL => (oparg & 1) + 1,
        // Pops the code object and one value per flag bit (defaults, kwdefaults,
        // annotations, closure), pushes the function.
        MAKE_FUNCTION => -i64::from((arg & 0x0f).count_ones()),
        BUILD_SLICE => {
            if oparg == 3 {
                -2
            } else {
                -1
            }
        }
        CALL_FUNCTION_EX => -2 - (oparg & 1),
        // A format spec (bit 0x04, `FVS_HAVE_SPEC`) is popped along with the value.
        FORMAT_VALUE => {
            if oparg & 0x04 != 0 {
                -1
            } else {
                0
            }
        }
        _ => return Err(AssembleError::UnknownOpcode { opcode }),
    };
    Ok(effect as i32)
}

/// [`stack_effect`] for code of `version`: 3.12's and 3.13's `SEND` keep the receiver on the
/// stack when they jump (to `END_SEND`, which pops it), where 3.11's pops it.
pub fn stack_effect_in(version: PyVersion, opcode: u8, arg: u32, jump: bool) -> Result<i32, AssembleError> {
    match (version, opcode) {
        (PyVersion::V312 | PyVersion::V313, op::SEND) => Ok(0),
        _ => stack_effect(opcode, arg, jump),
    }
}

/// [`stack_depths_in`] for the version this build runs on.
pub fn stack_depths(insts: &[Instruction]) -> Result<Vec<Option<u32>>, AssembleError> {
    stack_depths_in(insts, PyVersion::CURRENT)
}

/// [`stack_depth_in`] for the version this build runs on.
pub fn stack_depth(insts: &[Instruction]) -> Result<u32, AssembleError> {
    stack_depth_in(insts, PyVersion::CURRENT)
}

/// Stack depth at the entry of each instruction (`None` where unreachable), found by walking
/// fall-through edges, jump edges and exception-table edges from instruction 0. A handler is
/// entered with `exn.depth + 1` values, plus one for `lasti`
/// (CPython's `Objects/exception_handling_notes.txt`).
pub fn stack_depths_in(insts: &[Instruction], version: PyVersion) -> Result<Vec<Option<u32>>, AssembleError> {
    Ok(walk(insts, version)?.0)
}

/// Maximum stack depth (`co_stacksize`), counting the depth just after each instruction on
/// both of its branches, as 3.11 `compile.c` (`stackdepth`) does.
pub fn stack_depth_in(insts: &[Instruction], version: PyVersion) -> Result<u32, AssembleError> {
    Ok(walk(insts, version)?.1)
}

fn walk(insts: &[Instruction], version: PyVersion) -> Result<(Vec<Option<u32>>, u32), AssembleError> {
    let mut depths: Vec<Option<u32>> = vec![None; insts.len()];
    let mut max_depth = 0u32;
    // Depths reached inside an instruction that CPython counts (3.13's RETURN_CONST).
    let mut peak = 0i64;
    let mut worklist: Vec<usize> = Vec::new();

    let mut visit = |depths: &mut Vec<Option<u32>>,
                     worklist: &mut Vec<usize>,
                     from: usize,
                     to: usize,
                     depth: i64| {
        let inst = &insts[from];
        let depth = u32::try_from(depth).map_err(|_| AssembleError::NegativeStackDepth {
            inst: InstId(from as u32),
            name: inst.name(),
            depth,
        })?;
        max_depth = max_depth.max(depth);
        let Some(slot) = depths.get_mut(to) else {
            return Err(AssembleError::FallsOffEnd {
                inst: InstId(from as u32),
                name: inst.name(),
            });
        };
        match *slot {
            None => {
                *slot = Some(depth);
                worklist.push(to);
                Ok(())
            }
            Some(expected) if expected == depth => Ok(()),
            Some(expected) => Err(AssembleError::InconsistentStackDepth {
                inst: InstId(to as u32),
                expected,
                found: depth,
            }),
        }
    };

    if insts.is_empty() {
        return Ok((depths, 0));
    }
    depths[0] = Some(0);
    worklist.push(0);
    while let Some(idx) = worklist.pop() {
        let inst = &insts[idx];
        let depth = i64::from(depths[idx].expect("queued instructions have a depth"));
        if let Some(exn) = inst.exn {
            let handler_depth = i64::from(exn.depth) + 1 + i64::from(exn.lasti);
            visit(
                &mut depths,
                &mut worklist,
                idx,
                exn.handler.index(),
                handler_depth,
            )?;
        }
        if let Some(target) = inst.target {
            let effect = stack_effect_in(version, inst.opcode, inst.arg, true)?;
            visit(
                &mut depths,
                &mut worklist,
                idx,
                target.index(),
                depth + i64::from(effect),
            )?;
        }
        let mut effect = i64::from(stack_effect_in(version, inst.opcode, inst.arg, false)?);
        if inst.opcode == op::RETURN_GENERATOR {
            // Note [generator entry depth]: `dis.stack_effect` says 0, but the frame is resumed
            // after RETURN_GENERATOR with the first sent value (None) on the stack, which the
            // following POP_TOP discards. 3.11 `compile.c` (`stackdepth`) models this by starting
            // generator code at depth 1; counting it here gives the same maximum without the
            // code flags.
            effect += 1;
        }
        if version == PyVersion::V313 && inst.opcode == op::RETURN_CONST {
            // 3.13 makes RETURN_CONST out of LOAD_CONST + RETURN_VALUE after computing
            // `co_stacksize` (`Python/flowgraph.c`), so the constant's slot is counted.
            peak = peak.max(depth + 1);
        }
        if opcode::is_terminator(inst.opcode) {
            // Nothing follows, but CPython still counts the depth after the instruction.
            if depth + effect < 0 {
                return Err(AssembleError::NegativeStackDepth {
                    inst: InstId(idx as u32),
                    name: inst.name(),
                    depth: depth + effect,
                });
            }
            continue;
        }
        visit(&mut depths, &mut worklist, idx, idx + 1, depth + effect)?;
    }
    Ok((depths, max_depth.max(peak as u32)))
}

/// Text listing in the spirit of `dis.dis` (3.11 `Lib/dis.py`), for snapshots and logs: line
/// number where it changes, `>>` on jump targets, instruction index, original byte offset (`-`
/// for new instructions), opname, oparg, jump target and exception handler.
pub fn disassemble(insts: &[Instruction]) -> String {
    disassemble_with(insts, |_| None)
}

/// [`disassemble`] with an `argrepr` callback: callers holding the code object can render
/// names and constants (e.g. `LOAD_FAST 0 (x)`).
pub fn disassemble_with(
    insts: &[Instruction],
    argrepr: impl Fn(&Instruction) -> Option<String>,
) -> String {
    let mut is_target = vec![false; insts.len()];
    for inst in insts {
        for id in inst
            .target
            .into_iter()
            .chain(inst.exn.map(|exn| exn.handler))
        {
            if let Some(flag) = is_target.get_mut(id.index()) {
                *flag = true;
            }
        }
    }
    let mut out = String::new();
    let mut last_line = None;
    for (idx, inst) in insts.iter().enumerate() {
        let line_col = match inst.positions.line {
            Some(line) if Some(line) != last_line => {
                if idx > 0 {
                    out.push('\n');
                }
                last_line = Some(line);
                line.to_string()
            }
            _ => String::new(),
        };
        let marker = if is_target[idx] { ">>" } else { "" };
        let offset = inst
            .offset
            .map_or("-".to_string(), |offset| offset.to_string());
        let mut text = format!(
            "{line_col:>4} {marker:>2} {:>5} {offset:>5} {:<28}",
            InstId(idx as u32).to_string(),
            inst.name()
        );
        if opcode::has_arg(inst.opcode) {
            let _ = write!(text, " {:<4}", inst.arg);
        }
        if let Some(target) = inst.target {
            let _ = write!(text, " (to {target})");
        } else if let Some(repr) = argrepr(inst) {
            let _ = write!(text, " ({repr})");
        }
        if let Some(exn) = inst.exn {
            let lasti = if exn.lasti { " lasti" } else { "" };
            let _ = write!(text, " [exc {} depth {}{lasti}]", exn.handler, exn.depth);
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// Fast locals that may be read before being written again, at the entry of each instruction
/// (backward liveness over the control-flow graph, exception handlers included as successors of
/// the instructions they cover). `LOAD_FAST i` and `DELETE_FAST i` read slot `i`; `STORE_FAST i`
/// writes it. Slots `>= n_locals` (cells, free variables) are not tracked. Graph breaks use this to
/// pass only live locals to resume functions.
pub fn live_locals(insts: &[Instruction], n_locals: usize) -> Vec<Vec<bool>> {
    let n = insts.len();
    let mut live: Vec<Vec<bool>> = vec![vec![false; n_locals]; n];
    let successors = |i: usize| -> Vec<usize> {
        let inst = &insts[i];
        let mut out = Vec::new();
        if !opcode::is_terminator(inst.opcode) && i + 1 < n {
            out.push(i + 1);
        }
        if let Some(t) = inst.target {
            out.push(t.index());
        }
        out
    };
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..n).rev() {
            let mut set = vec![false; n_locals];
            for s in successors(i) {
                for (k, l) in live[s].iter().enumerate() {
                    set[k] |= *l;
                }
            }
            let inst = &insts[i];
            let slot = inst.arg as usize;
            match inst.opcode {
                op::STORE_FAST if slot < n_locals => set[slot] = false,
                // `del x` reads the slot: it raises UnboundLocalError when `x` is unbound, and the
                // object lives until then (Note [resume call lifetimes] in src/eval_frame/hook.rs).
                op::DELETE_FAST if slot < n_locals => set[slot] = true,
                opc if opcode::is_load_fast(opc) && slot < n_locals => set[slot] = true,
                _ => {}
            }
            // An exception leaves an instruction before its own write: what the handler reads is
            // live at entry whatever this instruction stores (`try: y = y[100]` keeps the old
            // `y` live for `except IndexError: y = y + 1`).
            if let Some(e) = inst.exn {
                for (k, l) in live[e.handler.index()].iter().enumerate() {
                    set[k] |= *l;
                }
            }
            if set != live[i] {
                live[i] = set;
                changed = true;
            }
        }
    }
    live
}

#[cfg(test)]
mod liveness_tests {
    use super::*;
    use crate::bytecode::instruction::ExnTarget;

    #[test]
    fn del_reads_its_local() {
        // x = 1; print(); del x   (slot 0: x): `del x` raises when `x` is unbound, so `x` is
        // live up to it.
        let insts = vec![
            Instruction::new(op::LOAD_CONST, 0),
            Instruction::new(op::STORE_FAST, 0),
            Instruction::new(op::NOP, 0),
            Instruction::new(op::DELETE_FAST, 0),
            Instruction::new(op::LOAD_CONST, 0),
            Instruction::new(op::RETURN_VALUE, 0),
        ];
        let live = live_locals(&insts, 1);
        assert_eq!(live[2], vec![true]);
        assert_eq!(live[4], vec![false]);
    }

    #[test]
    fn dead_after_last_read() {
        // x = 1; y = x; return y   (slot 0: x, slot 1: y)
        let insts = vec![
            Instruction::new(op::LOAD_CONST, 0),
            Instruction::new(op::STORE_FAST, 0),
            Instruction::new(op::LOAD_FAST, 0),
            Instruction::new(op::STORE_FAST, 1),
            Instruction::new(op::LOAD_FAST, 1),
            Instruction::new(op::RETURN_VALUE, 0),
        ];
        let live = live_locals(&insts, 2);
        assert_eq!(live[2], vec![true, false]);
        assert_eq!(live[3], vec![false, false]);
        assert_eq!(live[4], vec![false, true]);
    }

    #[test]
    fn loops_keep_values_live() {
        // 0: LOAD_FAST 0; 1: POP_JUMP_BACKWARD_IF_TRUE -> 0; 2: LOAD_FAST 1; 3: RETURN_VALUE
        let mut j = Instruction::new(op::POP_JUMP_BACKWARD_IF_TRUE, 0);
        j.target = Some(InstId(0));
        let insts = vec![Instruction::new(op::LOAD_FAST, 0), j, Instruction::new(op::LOAD_FAST, 1), Instruction::new(op::RETURN_VALUE, 0)];
        let live = live_locals(&insts, 2);
        assert_eq!(live[1], vec![true, true]);
    }

    #[test]
    fn handler_reads_survive_a_covered_store() {
        // try: y = x[0] (0-3, covered) except: return y (4-5)   (slot 0: x, slot 1: y)
        // The store at 3 does not happen when 2 raises, so the old `y` is live at 2 and at 3.
        let exn = Some(ExnTarget { handler: InstId(4), depth: 0, lasti: false });
        let mut covered = vec![
            Instruction::new(op::LOAD_FAST, 0),
            Instruction::new(op::LOAD_CONST, 0),
            Instruction::new(op::BINARY_SUBSCR, 0),
            Instruction::new(op::STORE_FAST, 1),
        ];
        for i in &mut covered {
            i.exn = exn;
        }
        let mut insts = covered;
        insts.extend([Instruction::new(op::LOAD_FAST, 1), Instruction::new(op::RETURN_VALUE, 0)]);
        let live = live_locals(&insts, 2);
        assert_eq!(live[2], vec![false, true]);
        assert_eq!(live[3], vec![false, true]);
    }
}
