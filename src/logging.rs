//! Log targets and the `DYNAMO_LOGS` switch.
//!
//! Targets (one line of purpose each):
//! - `dynamo::graph_breaks`: why a frame (or, later, part of one) was not captured;
//! - `dynamo::recompiles`: a cached frame's guards failed and it was compiled again (names the guard);
//! - `dynamo::guards`: the guards installed for each compiled frame;
//! - `dynamo::graph`: the captured graph of each compiled frame;
//! - `dynamo::bytecode`: the transformed bytecode;
//! - `aot::partition`: graphs split around ops without a derivative rule, or left to torch's autograd;
//! - `aot::joint_graph`, `aot::graphs` (debug): the joint graph, partition sizes (`src/autograd/README.md`);
//! - `inductor::*`: see `src/inductor/README.md`.
//!
//! `DYNAMO_LOGS="graph_breaks,recompiles,+guards"` enables those targets (`+name`: debug level).
//! Lines go to stderr, coloured only when stderr is a terminal and `NO_COLOR` is unset.
//! Recompile reasons are also kept in memory for `dynamo._C.recompile_reasons()`.

use parking_lot::Mutex;
use std::sync::OnceLock;

/// Installs the subscriber from `DYNAMO_LOGS` (idempotent).
pub fn init() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let spec = std::env::var("DYNAMO_LOGS").unwrap_or_default();
        let mut directives = vec!["off".to_string()];
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (level, name) = match part.strip_prefix('+') {
                Some(n) => ("debug", n),
                None => ("info", part),
            };
            let target = if name.contains("::") {
                name.to_string()
            } else if name == "inductor" || name == "llvm" || name == "aot" || name == "dynamo" {
                name.to_string()
            } else {
                format!("dynamo::{name}")
            };
            directives.push(format!("{target}={level}"));
        }
        let filter = tracing_subscriber::EnvFilter::new(directives.join(","));
        // Colour codes only on a terminal (a log redirected to a file or a pipe stays plain
        // text), and never under `NO_COLOR` (https://no-color.org).
        use std::io::IsTerminal;
        let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .with_target(true)
            .without_time()
            .try_init();
    });
}

fn reasons() -> &'static Mutex<Vec<String>> {
    static R: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// Records (and logs) a recompile reason.
pub fn recompile(msg: String) {
    tracing::info!(target: "dynamo::recompiles", "{msg}");
    let mut r = reasons().lock();
    if r.len() > 1000 {
        r.remove(0);
    }
    r.push(msg);
}

/// The recorded recompile reasons, oldest first.
pub fn recompile_reasons() -> Vec<String> {
    reasons().lock().clone()
}

/// Forgets the recorded recompile reasons.
pub fn clear() {
    reasons().lock().clear();
}

fn breaks() -> &'static Mutex<Vec<String>> {
    static B: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    B.get_or_init(|| Mutex::new(Vec::new()))
}

/// Records why a frame was not captured (for `dynamo._C.break_reasons()` and `explain`).
pub fn break_reason(msg: String) {
    let mut b = breaks().lock();
    if b.len() > 1000 {
        b.remove(0);
    }
    b.push(msg);
}

/// The recorded reasons, oldest first.
pub fn break_reasons() -> Vec<String> {
    breaks().lock().clone()
}

/// Forgets the recorded break reasons.
pub fn clear_breaks() {
    breaks().lock().clear();
}
