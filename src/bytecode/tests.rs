//! Data-driven tests of the whole module against fixtures written by
//! `ci/extract_code_fixtures.py` from CPython 3.11 itself (see `test_data/`).

use super::opcode::{self, op};

use super::*;

const OPCODES_311: &str = include_str!("test_data/opcodes_311.json");
const CODE_311: &str = include_str!("test_data/code_311.txt");
const SNIPPETS_311: &str = include_str!("test_data/snippets_311.txt");

/// One code object of a fixture file.
struct Fixture {
    name: String,
    firstlineno: u32,
    stacksize: u32,
    code: Vec<u8>,
    exceptiontable: Vec<u8>,
    linetable: Vec<u8>,
}

impl Fixture {
    fn bytes(&self) -> CodeBytes<'_> {
        CodeBytes {
            code: &self.code,
            exceptiontable: &self.exceptiontable,
            linetable: &self.linetable,
            firstlineno: self.firstlineno,
            version: PyVersion::V311,
        }
    }
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|idx| u8::from_str_radix(&text[idx..idx + 2], 16).unwrap()).collect()
}

fn fixtures(text: &str) -> Vec<Fixture> {
    text.lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 6, "malformed fixture line: {line}");
            Fixture {
                name: fields[0].to_string(),
                firstlineno: fields[1].parse().unwrap(),
                stacksize: fields[2].parse().unwrap(),
                code: unhex(fields[3]),
                exceptiontable: unhex(fields[4]),
                linetable: unhex(fields[5]),
            }
        })
        .collect()
}

fn snippet(name: &str) -> Vec<Instruction> {
    let all = fixtures(SNIPPETS_311);
    let fixture = all.iter().find(|f| f.name == format!("snippets:{name}")).unwrap();
    decode(&fixture.bytes()).unwrap()
}

/// The value after `"key":` in one line of `opcodes_311.json` (written one object per line).
fn json_field<'a>(line: &'a str, key: &str) -> &'a str {
    let start = line.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    let rest = &line[start..];
    let end = if rest.starts_with('[') {
        rest.find("]]").unwrap() + 2
    } else {
        rest.find([',', '}']).unwrap()
    };
    rest[..end].trim_matches('"')
}

struct DisOpcode {
    name: String,
    opcode: u8,
    cache: u8,
    jrel: bool,
    /// `(arg, jump, dis.stack_effect)`; `None` where `dis` raised.
    effects: Vec<(u32, bool, Option<i32>)>,
}

fn dis_opcodes() -> Vec<DisOpcode> {
    OPCODES_311
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| DisOpcode {
            name: json_field(line, "name").to_string(),
            opcode: json_field(line, "opcode").parse().unwrap(),
            cache: json_field(line, "cache").parse().unwrap(),
            jrel: json_field(line, "jrel") == "true",
            effects: json_field(line, "effects")
                .trim_start_matches("[[")
                .trim_end_matches("]]")
                .split("],[")
                .map(|triple| {
                    let parts: Vec<&str> = triple.split(',').collect();
                    (parts[0].parse().unwrap(), parts[1] == "true", parts[2].parse().ok())
                })
                .collect(),
        })
        .collect()
}

#[test]
fn opcode_table_matches_dis() {
    let dis = dis_opcodes();
    assert_eq!(dis.len(), opcode::ALL.len(), "number of opcodes in dis.opmap");
    for entry in &dis {
        assert_eq!(opcode::name(entry.opcode), entry.name);
        assert_eq!(opcode::from_name(&entry.name), Some(entry.opcode));
        assert_eq!(opcode::cache_entries(entry.opcode), entry.cache, "{}", entry.name);
        assert_eq!(opcode::has_jump(entry.opcode), entry.jrel, "{}", entry.name);
        assert_eq!(opcode::is_backward_jump(entry.opcode), entry.jrel && entry.name.contains("JUMP_BACKWARD"), "{}", entry.name);
    }
    for op_num in 0..=255u8 {
        assert_eq!(opcode::is_valid(op_num), dis.iter().any(|entry| entry.opcode == op_num));
    }
}

#[test]
fn stack_effect_matches_dis() {
    let mut n_checked = 0;
    for entry in dis_opcodes() {
        for &(arg, jump, expected) in &entry.effects {
            let ours = stack_effect(entry.opcode, arg, jump).ok();
            assert_eq!(ours, expected, "stack_effect({}, {arg}, jump={jump})", entry.name);
            n_checked += 1;
        }
    }
    assert_eq!(n_checked, 2236);
}

/// Decodes every fixture code object and assembles it again; everything must be identical.
#[test]
fn round_trip_stdlib_and_torch() {
    let all = fixtures(CODE_311);
    let mut failures = Vec::new();
    let mut n_instructions = 0;
    for fixture in &all {
        let insts = match decode(&fixture.bytes()) {
            Ok(insts) => insts,
            Err(err) => {
                failures.push(format!("{}: decode: {err}", fixture.name));
                continue;
            }
        };
        n_instructions += insts.len();
        let out = match assemble(&insts, fixture.firstlineno, PyVersion::V311) {
            Ok(out) => out,
            Err(err) => {
                failures.push(format!("{}: assemble: {err}", fixture.name));
                continue;
            }
        };
        let mut what = Vec::new();
        if out.code != fixture.code {
            what.push("co_code");
        }
        if out.exceptiontable != fixture.exceptiontable {
            what.push("co_exceptiontable");
        }
        if out.linetable != fixture.linetable {
            what.push("co_linetable");
        }
        if out.stacksize != fixture.stacksize {
            what.push("co_stacksize");
        }
        let offsets: Vec<u32> = insts.iter().map(|inst| inst.offset.unwrap()).collect();
        if out.offsets != offsets {
            what.push("offsets");
        }
        if !what.is_empty() {
            failures.push(format!("{}: {}", fixture.name, what.join(", ")));
        }
    }
    eprintln!("round trip: checked {} code objects, {n_instructions} instructions", all.len());
    assert_eq!(failures, Vec::<String>::new());
    assert_eq!(all.len(), 1719);
}

#[test]
fn disassemble_simple() {
    insta::assert_snapshot!(disassemble(&snippet("simple")));
}

#[test]
fn disassemble_guarded() {
    insta::assert_snapshot!(disassemble(&snippet("guarded")));
}
