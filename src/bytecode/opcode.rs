//! The version-neutral opcode set of the instruction model: numbers, names and jump classes.
//!
//! Every [`Instruction`](super::Instruction) carries one of these opcodes, whatever CPython the
//! code came from. The set is CPython 3.11's (`Lib/opcode.py`, same numbers and same meaning)
//! plus the opcodes that later versions added and that have no 3.11 equivalent
//! (`LOAD_FAST_CHECK`, `RETURN_CONST`, `BINARY_SLICE`, ...), placed on numbers 3.11 leaves free.
//! Where a later version changed the meaning of an opcode that 3.11 also has (3.12's `CALL`
//! without `PRECALL`, `LOAD_ATTR` with the method bit, `COMPARE_OP`'s mask bits, `FOR_ITER`
//! jumping to `END_FOR`), the per-version module (`v312.rs`) translates to and from the 3.11
//! meaning at decode and assemble time, so consumers see one model. What each version really
//! writes in `co_code` (its numbers, inline `CACHE` counts, jump directions) lives only in
//! `v311.rs` / `v312.rs`.

/// First opcode that uses its oparg (CPython 3.11 `Lib/opcode.py`, `HAVE_ARGUMENT`); the
/// additions keep the rule (those with an oparg are numbered from 90 up).
pub const HAVE_ARGUMENT: u8 = 90;

macro_rules! opcodes {
    ($($name:ident = $num:literal,)*) => {
        /// Opcode numbers of the instruction model, spelled as in `dis.opmap`: 3.11's numbers,
        /// then the later additions on numbers 3.11 does not use.
        pub mod op {
            $(#[doc = concat!("`", stringify!($name), "` (", stringify!($num), ")")]
              pub const $name: u8 = $num;)*
        }

        /// Every opcode of the model as `(number, name)`, in numeric order.
        pub const ALL: &[(u8, &str)] = &[$(($num, stringify!($name)),)*];
    };
}

opcodes! {
    CACHE = 0,
    POP_TOP = 1,
    PUSH_NULL = 2,
    INTERPRETER_EXIT = 3,
    END_FOR = 4,
    END_SEND = 5,
    NOP = 9,
    UNARY_POSITIVE = 10,
    UNARY_NEGATIVE = 11,
    UNARY_NOT = 12,
    UNARY_INVERT = 15,
    BINARY_SUBSCR = 25,
    BINARY_SLICE = 26,
    STORE_SLICE = 27,
    TO_BOOL = 38,
    GET_LEN = 30,
    MATCH_MAPPING = 31,
    MATCH_SEQUENCE = 32,
    MATCH_KEYS = 33,
    PUSH_EXC_INFO = 35,
    CHECK_EXC_MATCH = 36,
    CHECK_EG_MATCH = 37,
    WITH_EXCEPT_START = 49,
    GET_AITER = 50,
    GET_ANEXT = 51,
    BEFORE_ASYNC_WITH = 52,
    BEFORE_WITH = 53,
    END_ASYNC_FOR = 54,
    CLEANUP_THROW = 55,
    LOAD_LOCALS = 56,
    STORE_SUBSCR = 60,
    DELETE_SUBSCR = 61,
    GET_ITER = 68,
    GET_YIELD_FROM_ITER = 69,
    PRINT_EXPR = 70,
    LOAD_BUILD_CLASS = 71,
    LOAD_ASSERTION_ERROR = 74,
    RETURN_GENERATOR = 75,
    LIST_TO_TUPLE = 82,
    RETURN_VALUE = 83,
    IMPORT_STAR = 84,
    SETUP_ANNOTATIONS = 85,
    YIELD_VALUE = 86,
    ASYNC_GEN_WRAP = 87,
    PREP_RERAISE_STAR = 88,
    POP_EXCEPT = 89,
    STORE_NAME = 90,
    DELETE_NAME = 91,
    UNPACK_SEQUENCE = 92,
    FOR_ITER = 93,
    UNPACK_EX = 94,
    STORE_ATTR = 95,
    DELETE_ATTR = 96,
    STORE_GLOBAL = 97,
    DELETE_GLOBAL = 98,
    SWAP = 99,
    LOAD_CONST = 100,
    LOAD_NAME = 101,
    BUILD_TUPLE = 102,
    BUILD_LIST = 103,
    BUILD_SET = 104,
    BUILD_MAP = 105,
    LOAD_ATTR = 106,
    COMPARE_OP = 107,
    IMPORT_NAME = 108,
    IMPORT_FROM = 109,
    JUMP_FORWARD = 110,
    JUMP_IF_FALSE_OR_POP = 111,
    JUMP_IF_TRUE_OR_POP = 112,
    POP_JUMP_FORWARD_IF_FALSE = 114,
    POP_JUMP_FORWARD_IF_TRUE = 115,
    LOAD_GLOBAL = 116,
    IS_OP = 117,
    CONTAINS_OP = 118,
    RERAISE = 119,
    COPY = 120,
    RETURN_CONST = 121,
    BINARY_OP = 122,
    SEND = 123,
    LOAD_FAST = 124,
    STORE_FAST = 125,
    DELETE_FAST = 126,
    LOAD_FAST_CHECK = 127,
    POP_JUMP_FORWARD_IF_NOT_NONE = 128,
    POP_JUMP_FORWARD_IF_NONE = 129,
    RAISE_VARARGS = 130,
    GET_AWAITABLE = 131,
    MAKE_FUNCTION = 132,
    BUILD_SLICE = 133,
    JUMP_BACKWARD_NO_INTERRUPT = 134,
    MAKE_CELL = 135,
    LOAD_CLOSURE = 136,
    LOAD_DEREF = 137,
    STORE_DEREF = 138,
    DELETE_DEREF = 139,
    JUMP_BACKWARD = 140,
    LOAD_SUPER_ATTR = 141,
    CALL_FUNCTION_EX = 142,
    LOAD_FAST_AND_CLEAR = 143,
    EXTENDED_ARG = 144,
    LIST_APPEND = 145,
    SET_ADD = 146,
    MAP_ADD = 147,
    LOAD_CLASSDEREF = 148,
    COPY_FREE_VARS = 149,
    RESUME = 151,
    MATCH_CLASS = 152,
    FORMAT_VALUE = 155,
    BUILD_CONST_KEY_MAP = 156,
    BUILD_STRING = 157,
    LOAD_METHOD = 160,
    LIST_EXTEND = 162,
    SET_UPDATE = 163,
    DICT_MERGE = 164,
    DICT_UPDATE = 165,
    PRECALL = 166,
    CALL = 171,
    KW_NAMES = 172,
    POP_JUMP_BACKWARD_IF_NOT_NONE = 173,
    POP_JUMP_BACKWARD_IF_NONE = 174,
    POP_JUMP_BACKWARD_IF_FALSE = 175,
    POP_JUMP_BACKWARD_IF_TRUE = 176,
    CALL_INTRINSIC_1 = 177,
    CALL_INTRINSIC_2 = 178,
    LOAD_FROM_DICT_OR_GLOBALS = 179,
    LOAD_FROM_DICT_OR_DEREF = 180,
    CONVERT_VALUE = 181,
    CALL_KW = 182,
}

/// Opcode number -> name table of a `(number, name)` list (evaluated at compile time).
pub(crate) const fn name_table(all: &[(u8, &'static str)]) -> [Option<&'static str>; 256] {
    let mut table = [None; 256];
    let mut idx = 0;
    while idx < all.len() {
        table[all[idx].0 as usize] = Some(all[idx].1);
        idx += 1;
    }
    table
}

const NAMES: [Option<&str>; 256] = name_table(ALL);

/// Whether `op` is an opcode of the model (3.11's set plus the additions).
pub fn is_valid(op: u8) -> bool {
    NAMES[op as usize].is_some()
}

/// CPython spelling of `op` (`dis.opname`), or `"<unknown>"` for numbers the model does not use.
pub fn name(op: u8) -> &'static str {
    NAMES[op as usize].unwrap_or("<unknown>")
}

/// Opcode number for a CPython opcode name (`dis.opmap[name]`).
pub fn from_name(name: &str) -> Option<u8> {
    ALL.iter().find(|(_, n)| *n == name).map(|(op, _)| *op)
}

/// Whether `op` uses its oparg (`op >= HAVE_ARGUMENT`, as `dis` decides it in 3.11).
pub fn has_arg(op: u8) -> bool {
    op >= HAVE_ARGUMENT
}

/// Whether `op` is a relative jump (`dis.hasjrel` in 3.11; 3.11 has no absolute jumps).
pub fn has_jump(op: u8) -> bool {
    is_forward_jump(op) || is_backward_jump(op)
}

/// Relative jumps whose target is `next_instr + oparg` (the forward half of 3.11 `dis.hasjrel`).
pub fn is_forward_jump(op: u8) -> bool {
    use op::*;
    matches!(
        op,
        FOR_ITER
            | JUMP_FORWARD
            | JUMP_IF_FALSE_OR_POP
            | JUMP_IF_TRUE_OR_POP
            | POP_JUMP_FORWARD_IF_FALSE
            | POP_JUMP_FORWARD_IF_TRUE
            | SEND
            | POP_JUMP_FORWARD_IF_NOT_NONE
            | POP_JUMP_FORWARD_IF_NONE
    )
}

/// Relative jumps whose target is `next_instr - oparg` (3.11 `Lib/dis.py` negates the
/// argument of opcodes whose name contains `JUMP_BACKWARD`).
pub fn is_backward_jump(op: u8) -> bool {
    use op::*;
    matches!(
        op,
        JUMP_BACKWARD
            | JUMP_BACKWARD_NO_INTERRUPT
            | POP_JUMP_BACKWARD_IF_NOT_NONE
            | POP_JUMP_BACKWARD_IF_NONE
            | POP_JUMP_BACKWARD_IF_FALSE
            | POP_JUMP_BACKWARD_IF_TRUE
    )
}

/// Jumps that always transfer control (`JUMP_FORWARD`, `JUMP_BACKWARD`,
/// `JUMP_BACKWARD_NO_INTERRUPT`; the `IS_UNCONDITIONAL_JUMP_OPCODE` set of 3.11 `compile.c`
/// after pseudo-instructions are lowered).
pub fn is_unconditional_jump(op: u8) -> bool {
    use op::*;
    matches!(
        op,
        JUMP_FORWARD | JUMP_BACKWARD | JUMP_BACKWARD_NO_INTERRUPT
    )
}

/// Instructions after which control never falls through to the next one: scope exits
/// (`RETURN_VALUE`, `RETURN_CONST`, `RAISE_VARARGS`, `RERAISE`; `IS_SCOPE_EXIT_OPCODE` in
/// 3.11/3.12 `compile.c`)
/// and unconditional jumps.
pub fn is_terminator(op: u8) -> bool {
    use op::*;
    matches!(op, RETURN_VALUE | RETURN_CONST | RAISE_VARARGS | RERAISE) || is_unconditional_jump(op)
}

/// The same jump pointing the other way, for jumps that have a twin in 3.11
/// (`POP_JUMP_FORWARD_IF_TRUE` <-> `POP_JUMP_BACKWARD_IF_TRUE`, `JUMP_FORWARD` <->
/// `JUMP_BACKWARD`, ...). 3.11 `compile.c` (`normalize_jumps`) picks the direction the same way.
pub fn flip_jump_direction(op: u8) -> Option<u8> {
    use op::*;
    let pairs = [
        (JUMP_FORWARD, JUMP_BACKWARD),
        (POP_JUMP_FORWARD_IF_FALSE, POP_JUMP_BACKWARD_IF_FALSE),
        (POP_JUMP_FORWARD_IF_TRUE, POP_JUMP_BACKWARD_IF_TRUE),
        (POP_JUMP_FORWARD_IF_NONE, POP_JUMP_BACKWARD_IF_NONE),
        (POP_JUMP_FORWARD_IF_NOT_NONE, POP_JUMP_BACKWARD_IF_NOT_NONE),
    ];
    pairs.iter().find_map(|&(fwd, bwd)| {
        if op == fwd {
            Some(bwd)
        } else if op == bwd {
            Some(fwd)
        } else {
            None
        }
    })
}

/// Opcodes of the model that CPython 3.11 does not have (added by 3.12 and 3.13).
pub fn is_addition(op: u8) -> bool {
    use op::*;
    matches!(
        op,
        INTERPRETER_EXIT
            | END_FOR
            | END_SEND
            | BINARY_SLICE
            | STORE_SLICE
            | CLEANUP_THROW
            | LOAD_LOCALS
            | RETURN_CONST
            | LOAD_FAST_CHECK
            | LOAD_SUPER_ATTR
            | LOAD_FAST_AND_CLEAR
            | CALL_INTRINSIC_1
            | CALL_INTRINSIC_2
            | LOAD_FROM_DICT_OR_GLOBALS
            | LOAD_FROM_DICT_OR_DEREF
            | TO_BOOL
            | CONVERT_VALUE
            | CALL_KW
    )
}

/// Whether `op` reads or writes a fast-locals slot of `localsplus` by index (`LOAD_FAST` and
/// its 3.12 variants, `STORE_FAST`, `DELETE_FAST`).
pub fn is_load_fast(op: u8) -> bool {
    matches!(op, op::LOAD_FAST | op::LOAD_FAST_CHECK | op::LOAD_FAST_AND_CLEAR)
}
