//! The 3.11 `co_linetable` (location table): parse it into spans and write it back.
//!
//! Format (CPython's `Objects/locations.md`; writer: `write_location_info_entry` in 3.11
//! `Python/compile.c`). Each entry starts with a byte `1cccclll`: `cccc` is the form code and
//! `lll + 1` the number of code units covered (1 to 8). Forms:
//!
//! | code  | form                | payload                                                        |
//! |-------|---------------------|----------------------------------------------------------------|
//! | 0-9   | short               | one byte: column = code*8 + high 3 bits, end column = column + low 4 bits; same line |
//! | 10-12 | one line            | line delta = code - 10; column byte; end column byte         |
//! | 13    | no column           | signed varint line delta                                       |
//! | 14    | long                | signed line delta, end-line delta, column + 1, end column + 1 (0 = none) |
//! | 15    | no location         | nothing; the line is not updated                               |
//!
//! Varints are little-endian 6-bit chunks with 0x40 as "more follows"; a signed varint stores
//! `|x| << 1 | sign`. Line deltas are relative to the previous entry that had a line, starting
//! from `co_firstlineno`. 3.11 writes one entry (or several, for more than 8 units) per
//! instruction, covering its `EXTENDED_ARG` prefixes and `CACHE` units; it does not merge
//! neighbouring instructions with equal positions (3.12 does).

use super::decode::DecodeError;
use super::instruction::Positions;

const CODE_NO_COLUMN: u8 = 13;
const CODE_LONG: u8 = 14;
const CODE_NONE: u8 = 15;
const MAX_UNITS_PER_ENTRY: u32 = 8;

/// Parses a 3.11 `co_linetable` into `(units covered, positions)` spans, in code order
/// (what `code.co_positions()` iterates, per entry instead of per unit).
pub fn parse(bytes: &[u8], firstlineno: u32) -> Result<Vec<(u32, Positions)>, DecodeError> {
    let mut reader = Reader { bytes, pos: 0 };
    let mut line = i64::from(firstlineno);
    let mut spans = Vec::new();
    while reader.pos < bytes.len() {
        let entry_pos = reader.pos;
        let first = reader.byte()?;
        if first & 0x80 == 0 {
            return Err(DecodeError::LineTable {
                pos: entry_pos,
                reason: format!("expected an entry start byte (0x80 set), found {first:#04x}"),
            });
        }
        let code = (first >> 3) & 0x0f;
        let units = u32::from(first & 0x07) + 1;
        let positions = match code {
            CODE_NONE => Positions::default(),
            CODE_NO_COLUMN => {
                line += reader.svarint()?;
                let line = to_line(line, entry_pos)?;
                Positions::line(line)
            }
            CODE_LONG => {
                line += reader.svarint()?;
                let start = to_line(line, entry_pos)?;
                let end_line = start + reader.varint()?;
                let col = reader.varint()?.checked_sub(1);
                let end_col = reader.varint()?.checked_sub(1);
                Positions {
                    line: Some(start),
                    end_line: Some(end_line),
                    col,
                    end_col,
                }
            }
            10..=12 => {
                line += i64::from(code - 10);
                let line = to_line(line, entry_pos)?;
                let col = u32::from(reader.byte()?);
                let end_col = u32::from(reader.byte()?);
                Positions {
                    line: Some(line),
                    end_line: Some(line),
                    col: Some(col),
                    end_col: Some(end_col),
                }
            }
            _ => {
                let second = reader.byte()?;
                let col = u32::from(code) * 8 + u32::from((second >> 4) & 0x07);
                let end_col = col + u32::from(second & 0x0f);
                let line = to_line(line, entry_pos)?;
                Positions {
                    line: Some(line),
                    end_line: Some(line),
                    col: Some(col),
                    end_col: Some(end_col),
                }
            }
        };
        spans.push((units, positions));
    }
    Ok(spans)
}

fn to_line(line: i64, pos: usize) -> Result<u32, DecodeError> {
    u32::try_from(line).map_err(|_| DecodeError::LineTable {
        pos,
        reason: format!("expected a non-negative line number, found {line}"),
    })
}

/// Incremental writer of a 3.11 `co_linetable`, one instruction at a time.
#[derive(Debug)]
pub struct LineTableWriter {
    out: Vec<u8>,
    prev_line: i64,
}

impl LineTableWriter {
    /// A writer whose first line delta is relative to `firstlineno` (`co_firstlineno`).
    pub fn new(firstlineno: u32) -> Self {
        LineTableWriter {
            out: Vec::new(),
            prev_line: i64::from(firstlineno),
        }
    }

    /// Appends `units` code units located at `positions`, split into entries of at most 8 units
    /// (3.11 `assemble_emit_location`). A `positions.end_line` before `positions.line` is
    /// written as `line`, because the format cannot express it.
    pub fn push(&mut self, positions: &Positions, mut units: u32) {
        while units > MAX_UNITS_PER_ENTRY {
            self.entry(positions, MAX_UNITS_PER_ENTRY);
            units -= MAX_UNITS_PER_ENTRY;
        }
        if units > 0 {
            self.entry(positions, units);
        }
    }

    /// The table written so far.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }

    /// One entry of 1..=8 units, choosing the form the way 3.11 `write_location_info_entry` does
    /// so that unchanged code reproduces CPython's bytes.
    fn entry(&mut self, positions: &Positions, units: u32) {
        let header = |code: u8| 0x80 | (code << 3) | (units - 1) as u8;
        let Some(line) = positions.line else {
            self.out.push(header(CODE_NONE));
            return;
        };
        let line = i64::from(line);
        let delta = line - self.prev_line;
        let end_line = positions
            .end_line
            .map_or(line, |end| i64::from(end).max(line));
        match (positions.col, positions.end_col) {
            (Some(col), Some(end_col)) if end_line == line => {
                if delta == 0 && col < 80 && end_col >= col && end_col - col < 16 {
                    self.out.push(header((col / 8) as u8));
                    self.out.push((((col % 8) << 4) | (end_col - col)) as u8);
                    return;
                }
                if (0..3).contains(&delta) && col < 128 && end_col < 128 {
                    self.out.push(header(10 + delta as u8));
                    self.out.push(col as u8);
                    self.out.push(end_col as u8);
                    self.prev_line = line;
                    return;
                }
            }
            (Some(_), Some(_)) => {}
            _ if end_line == line => {
                self.out.push(header(CODE_NO_COLUMN));
                self.svarint(delta);
                self.prev_line = line;
                return;
            }
            _ => {}
        }
        self.out.push(header(CODE_LONG));
        self.svarint(delta);
        self.varint((end_line - line) as u32);
        self.varint(positions.col.map_or(0, |col| col + 1));
        self.varint(positions.end_col.map_or(0, |col| col + 1));
        self.prev_line = line;
    }

    fn varint(&mut self, mut value: u32) {
        while value >= 0x40 {
            self.out.push(0x40 | (value & 0x3f) as u8);
            value >>= 6;
        }
        self.out.push(value as u8);
    }

    fn svarint(&mut self, value: i64) {
        let zigzag = if value < 0 {
            ((-value) << 1) | 1
        } else {
            value << 1
        };
        self.varint(zigzag as u32);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let byte = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| DecodeError::LineTable {
                pos: self.pos,
                reason: "expected another byte, found end of table".to_string(),
            })?;
        self.pos += 1;
        Ok(byte)
    }

    fn varint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        let mut shift = 0;
        loop {
            let byte = self.byte()?;
            value |= u32::from(byte & 0x3f) << shift;
            if byte & 0x40 == 0 {
                return Ok(value);
            }
            shift += 6;
            if shift > 30 {
                return Err(DecodeError::LineTable {
                    pos: self.pos,
                    reason: "expected a varint of at most 32 bits, found a longer one".to_string(),
                });
            }
        }
    }

    fn svarint(&mut self) -> Result<i64, DecodeError> {
        let raw = self.varint()?;
        let magnitude = i64::from(raw >> 1);
        Ok(if raw & 1 == 1 { -magnitude } else { magnitude })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `spans` starting at line 10, checks the hex, and parses it back.
    fn check(spans: &[(u32, Positions)], expect_hex: &str) {
        let mut writer = LineTableWriter::new(10);
        for (units, positions) in spans {
            writer.push(positions, *units);
        }
        let bytes = writer.finish();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expect_hex);
        let parsed = parse(&bytes, 10).unwrap();
        let total: u32 = spans.iter().map(|(units, _)| units).sum();
        assert_eq!(parsed.iter().map(|(units, _)| units).sum::<u32>(), total);
    }

    fn span(line: u32, col: u32, end_col: u32) -> Positions {
        Positions {
            line: Some(line),
            end_line: Some(line),
            col: Some(col),
            end_col: Some(end_col),
        }
    }

    #[test]
    fn forms() {
        // Short form: same line, column 4..9.
        check(&[(1, span(10, 4, 9))], "8045");
        // One-line form: next line.
        check(&[(2, span(11, 4, 90))], "d9045a");
        // No column, line delta -3.
        check(&[(1, Positions::line(7))], "e807");
        // No location.
        check(&[(3, Positions::default())], "fa");
        // Long form: two lines, 9 units split 8 + 1.
        let multi = Positions {
            line: Some(12),
            end_line: Some(13),
            col: Some(0),
            end_col: Some(200),
        };
        check(&[(9, multi)], "f70401014903f00001014903");
    }
}
