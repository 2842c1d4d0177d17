//! The 3.11 `co_exceptiontable` format: parse it into entries and write entries back.
//!
//! Format (CPython's `Objects/exception_handling_notes.txt`, written by `assemble_exception_table`
//! in 3.11 `Python/compile.c`): a sequence of entries, each four unsigned varints
//! `start, length, target, depth << 1 | lasti`, all offsets in 2-byte code units. A varint is
//! big-endian 6-bit chunks; bit 0x40 marks "more chunks follow" and bit 0x80 is set on the first
//! byte of each entry only. Entries are sorted and do not overlap: nesting is flattened by the
//! compiler, so the entry covering an instruction is its innermost handler.

use super::decode::DecodeError;

/// One row of `co_exceptiontable`, in code units (cf. `_ExceptionTableEntry` in 3.11
/// `Lib/dis.py`, which reports the same row in bytes with an inclusive end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExceptionTableEntry {
    /// First code unit covered.
    pub start: u32,
    /// One past the last code unit covered.
    pub end: u32,
    /// Code unit of the handler.
    pub target: u32,
    /// Stack depth the handler sees before `lasti` and the exception are pushed.
    pub depth: u32,
    /// Whether the offset of the raising instruction is pushed before the exception.
    pub lasti: bool,
}

const START_MARKER: u8 = 0x80;
const CONTINUATION: u8 = 0x40;
const CHUNK_MASK: u8 = 0x3f;

/// Parses a 3.11 `co_exceptiontable` (format above; reader: `_parse_exception_table` in
/// 3.11 `Lib/dis.py`).
pub fn parse(bytes: &[u8]) -> Result<Vec<ExceptionTableEntry>, DecodeError> {
    let mut reader = Reader { bytes, pos: 0 };
    let mut entries = Vec::new();
    while reader.pos < bytes.len() {
        let entry_pos = reader.pos;
        if bytes[entry_pos] & START_MARKER == 0 {
            return Err(DecodeError::ExceptionTable {
                pos: entry_pos,
                reason: format!(
                    "expected an entry start byte (0x80 set), found {:#04x}",
                    bytes[entry_pos]
                ),
            });
        }
        let start = reader.varint()?;
        let length = reader.varint()?;
        let target = reader.varint()?;
        let depth_lasti = reader.varint()?;
        entries.push(ExceptionTableEntry {
            start,
            end: start + length,
            target,
            depth: depth_lasti >> 1,
            lasti: depth_lasti & 1 == 1,
        });
    }
    Ok(entries)
}

/// Writes entries in the 3.11 `co_exceptiontable` format (inverse of [`parse`]).
pub fn write(entries: &[ExceptionTableEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        write_varint(&mut out, entry.start, START_MARKER);
        write_varint(&mut out, entry.end - entry.start, 0);
        write_varint(&mut out, entry.target, 0);
        write_varint(&mut out, (entry.depth << 1) | entry.lasti as u32, 0);
    }
    out
}

fn write_varint(out: &mut Vec<u8>, value: u32, mut marker: u8) {
    let n_chunks = (1..6).find(|&n| value >> (6 * n) == 0).unwrap_or(6);
    for chunk_idx in (0..n_chunks).rev() {
        let mut byte = ((value >> (6 * chunk_idx)) as u8) & CHUNK_MASK;
        if chunk_idx > 0 {
            byte |= CONTINUATION;
        }
        out.push(byte | marker);
        marker = 0;
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        loop {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err(DecodeError::ExceptionTable {
                    pos: self.pos,
                    reason: "expected a varint byte, found end of table".to_string(),
                });
            };
            self.pos += 1;
            value = (value << 6) | u32::from(byte & CHUNK_MASK);
            if byte & CONTINUATION == 0 {
                return Ok(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(entries: &[ExceptionTableEntry], expect_hex: &str) {
        let bytes = write(entries);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expect_hex);
        assert_eq!(parse(&bytes).unwrap(), entries);
    }

    #[test]
    fn small_and_large_values() {
        let e = |start, end, target, depth, lasti| ExceptionTableEntry {
            start,
            end,
            target,
            depth,
            lasti,
        };
        check(&[e(2, 5, 10, 1, false)], "82030a02");
        check(&[e(2, 5, 10, 1, true)], "82030a03");
        // 70 = 1*64 + 6 needs two chunks.
        check(&[e(70, 71, 200, 0, false)], "c10601430800");
    }
}
