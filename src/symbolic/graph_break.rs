//! `GraphBreakKind`: the stable catalogue of reasons tracing stops.
//!
//! Each kind has a code (`GB0001`), a snake_case name, an explanation and a hint; the user
//! message is rendered from it as `[GB0001 unsupported_builtin] <context>`. `docs/graph_breaks.md`
//! is generated from this table (`render_docs`), and a test fails when the file is stale
//! (regenerate with `DYNAMO_BLESS=1 cargo test graph_break_docs`).

use std::fmt;

macro_rules! kinds {
    ($($variant:ident = $code:literal, $name:literal, $explanation:literal, $hint:literal;)*) => {
        /// Why symbolic execution stopped at an instruction.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GraphBreakKind {
            $($variant,)*
        }

        impl GraphBreakKind {
            /// Every kind, in code order.
            pub const ALL: &'static [GraphBreakKind] = &[$(GraphBreakKind::$variant,)*];

            /// The stable code, `GB0001`.
            pub fn code(self) -> &'static str {
                match self { $(GraphBreakKind::$variant => $code,)* }
            }

            /// The stable snake_case name.
            pub fn name(self) -> &'static str {
                match self { $(GraphBreakKind::$variant => $name,)* }
            }

            /// What happened, in general terms.
            pub fn explanation(self) -> &'static str {
                match self { $(GraphBreakKind::$variant => $explanation,)* }
            }

            /// What a user can do about it.
            pub fn hint(self) -> &'static str {
                match self { $(GraphBreakKind::$variant => $hint,)* }
            }
        }
    };
}

kinds! {
    Other = "GB0000", "other",
        "A construct the tracer does not model yet.",
        "The code around it runs as ordinary Python; nothing to do unless it is on a hot path.";
    UnsupportedBuiltin = "GB0001", "unsupported_builtin",
        "A call to a Python builtin with effects outside the graph (print, open, input, id, ...).",
        "Move the call out of the compiled region, or accept the break: the graph is split around it.";
    DataDependentBranch = "GB0002", "data_dependent_branch",
        "Python control flow (`if`, `while`, `and`/`or`) on the value of a tensor.",
        "Use torch.where / masking to keep the computation in the graph; each side becomes its own resume function.";
    DataDependentValue = "GB0003", "data_dependent_value",
        "A tensor's data converted to a Python value (`.item()`, `.tolist()`, `.numpy()`, `bool(t)`).",
        "Keep values as tensors while computing; convert once at the end.";
    UnsupportedOpcode = "GB0004", "unsupported_opcode",
        "A bytecode instruction the tracer has no handler for (with blocks, try/except, match, ...).",
        "Nothing to do; the frame or its rest runs as ordinary Python.";
    SideEffect = "GB0005", "side_effect",
        "A write outside the frame that cannot be replayed after the graph: an attribute write on an object with a custom __setattr__ or a descriptor, a write to a parameter, buffer or submodule, a write to a closure cell no source reaches (a closure of a torch function). (Plain attribute writes, list and dict mutation, global writes and nonlocal writes are recorded and replayed without a break.)",
        "The write runs as ordinary Python at this point, in program order; return new values instead of mutating to keep one graph.";
    UntracedValue = "GB0006", "untraced_value",
        "Use of an object the tracer does not model (a generator, a C object, a user object with a custom __getattribute__ or __getattr__, a descriptor other than property): reading such attributes, calling it, or iterating it.",
        "Pass tensors and plain containers into compiled code; the object's use runs as ordinary Python.";
    UnsupportedCall = "GB0007", "unsupported_call",
        "A call that is not traced: constructing a user class, a torch function with global effects (manual_seed, set_grad_enabled), a disabled function.",
        "The call runs as ordinary Python and tracing resumes after it.";
    FakeTensorError = "GB0008", "fake_tensor_error",
        "The operation failed while computing its output shape on fake tensors, usually because it would also fail for real (a shape mismatch).",
        "Run it eagerly to see the real error; the frame runs as ordinary Python so the user sees the original exception.";
    RaisesException = "GB0009", "raises_exception",
        "The traced code raises a Python exception at this instruction (a dict that changed size while a loop walked it, an attribute lookup that fails, ...). An AttributeError that `getattr(obj, name, default)` or `hasattr` catches is answered inside the trace; otherwise the instruction runs as ordinary Python, so the exception, its handler and its traceback are eager's.",
        "Nothing to do unless it is on a hot path: this is what eager Python does.";
}

impl fmt::Display for GraphBreakKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.name())
    }
}

/// The generated page `docs/graph_breaks.md`.
pub fn render_docs() -> String {
    let mut out = String::from(
        "# Graph breaks\n\n<!-- generated by src/symbolic/graph_break.rs; regenerate with `DYNAMO_BLESS=1 cargo test graph_break_docs` -->\n\n\
         When tracing meets something it cannot put in a graph, dynamo compiles the graph captured so far, runs that\n\
         instruction as ordinary Python, and continues in a resume function that is compiled in turn (a graph break).\n\
         Where no break is possible (an instruction whose stack layout is not modelled, a try block opened in the middle\n\
         of a call), the frame runs eagerly instead. Each reason has a stable code; messages read `[GB0001 unsupported_builtin] <context>`.\n\
         `dynamo.explain(fn)(*args)` lists them with their source lines; `DYNAMO_LOGS=graph_breaks` logs them.\n\n\
         | code | name | what happened | what to do |\n| --- | --- | --- | --- |\n",
    );
    for k in GraphBreakKind::ALL {
        out.push_str(&format!("| {} | `{}` | {} | {} |\n", k.code(), k.name(), k.explanation(), k.hint()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_break_docs_are_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/graph_breaks.md");
        let want = render_docs();
        if std::env::var("DYNAMO_BLESS").is_ok() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(have, want, "docs/graph_breaks.md is stale: run DYNAMO_BLESS=1 cargo test graph_break_docs");
    }

    #[test]
    fn codes_and_names_are_unique() {
        let mut codes: Vec<_> = GraphBreakKind::ALL.iter().map(|k| k.code()).collect();
        let mut names: Vec<_> = GraphBreakKind::ALL.iter().map(|k| k.name()).collect();
        codes.sort();
        codes.dedup();
        names.sort();
        names.dedup();
        assert_eq!(codes.len(), GraphBreakKind::ALL.len());
        assert_eq!(names.len(), GraphBreakKind::ALL.len());
    }
}
