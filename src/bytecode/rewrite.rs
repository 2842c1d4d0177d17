//! One-to-many rewriting of an instruction list that keeps jumps and handlers pointing at the
//! same places: the tool the per-version modules use to lift real code into the instruction
//! model (3.12's `CALL` becomes `PRECALL` + `CALL`) and to lower it back (`PRECALL` disappears).

use super::instruction::{InstId, Instruction};

/// Replaces each instruction `i` of `insts` by `f(i, &insts[i])` (possibly none, possibly
/// several). The replacements' `target`s and exception handlers are given in the *input*
/// numbering; a reference to input instruction `j` is redirected to the first replacement of
/// `j`, or, when `j` was replaced by nothing, to the first replacement of the next instruction
/// that has one. Returns the new list and `first`, where `first[j]` is the new index of input `j`
/// (`first[len]` is the new length).
pub fn expand<E>(
    insts: &[Instruction],
    mut f: impl FnMut(usize, &Instruction) -> Result<Vec<Instruction>, E>,
) -> Result<(Vec<Instruction>, Vec<u32>), E> {
    let mut out: Vec<Instruction> = Vec::with_capacity(insts.len() + insts.len() / 8);
    let mut first = Vec::with_capacity(insts.len() + 1);
    for (idx, inst) in insts.iter().enumerate() {
        first.push(out.len() as u32);
        out.extend(f(idx, inst)?);
    }
    first.push(out.len() as u32);
    // An out-of-range reference stays out of range (by as much), for the caller's error.
    let n_in = insts.len();
    let n_out = out.len() as u32;
    let remap = |id: InstId| match first.get(id.index()) {
        Some(&f) => InstId(f),
        None => InstId(n_out + (id.index() - n_in) as u32),
    };
    for inst in &mut out {
        inst.target = inst.target.map(remap);
        if let Some(exn) = &mut inst.exn {
            exn.handler = remap(exn.handler);
        }
    }
    Ok((out, first))
}
