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
    // `Other` is left for internal "cannot happen" paths only: a stack underflow, a CPython
    // object of an unexpected type (`co_code` not bytes, `__mro__` not a tuple), an oparg
    // outside CPython's table, and the `unsupported!` macro's sites not yet given a kind.
    Other = "GB0000", "other",
        "A construct the tracer does not model yet and that no named kind describes.",
        "The code around it runs as ordinary Python; report the message so that the reason gets a kind of its own.";
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
        "A bytecode instruction the tracer has no handler for (with blocks, try/except, ...).",
        "Nothing to do; the frame or its rest runs as ordinary Python.";
    SideEffect = "GB0005", "side_effect",
        "A write outside the frame that cannot be replayed after the graph: an attribute write through a C __setattr__ or a C descriptor other than a __slots__ member, an attribute an object without __dict__ does not have, a write to a parameter or submodule, or of a tensor from outside the frame to a buffer, a write to a closure cell no source reaches (a closure of a torch function), a logging call followed by writes that its handlers would see, a write to a set from outside the frame (add, discard, update, |=, pop: such a set is read in the trace, not written). (Plain and __slots__ attribute writes, a buffer set to a tensor the graph computed, list and dict mutation, global writes and nonlocal writes are recorded and replayed without a break; a Python __setattr__ is traced.)",
        "The write runs as ordinary Python at this point, in program order; return new values instead of mutating to keep one graph.";
    UntracedValue = "GB0006", "untraced_value",
        "Use of an object the tracer does not model (a generator, a C object, a user object with a custom __getattribute__ or __getattr__, a descriptor other than property): reading such attributes, calling it, or iterating it.",
        "Pass tensors and plain containers into compiled code; the object's use runs as ordinary Python.";
    UnsupportedCall = "GB0007", "unsupported_call",
        "A call that is not traced: constructing a user class, a torch function with global effects (manual_seed, set_grad_enabled), a disabled function, a `contextlib.ExitStack` (its callbacks and exit chaining run as Python), a `bytearray` (a mutable byte buffer the trace does not model).",
        "The call runs as ordinary Python and tracing resumes after it.";
    FakeTensorError = "GB0008", "fake_tensor_error",
        "The operation failed while computing its output shape on fake tensors, usually because it would also fail for real (a shape mismatch).",
        "Run it eagerly to see the real error; the frame runs as ordinary Python so the user sees the original exception.";
    RaisesException = "GB0009", "raises_exception",
        "The traced code raises a Python exception at this instruction (a dict that changed size while a loop walked it, an attribute lookup that fails, ...). An AttributeError that `getattr(obj, name, default)` or `hasattr` catches is answered inside the trace; otherwise the instruction runs as ordinary Python, so the exception, its handler and its traceback are eager's.",
        "Nothing to do unless it is on a hot path: this is what eager Python does.";
    UnrollLimit = "GB0010", "unroll_limit",
        "Tracing would pass one of its size limits: inlined calls nested deeper than the inlining limit, a loop or generator unrolled past its item limit, an instruction budget spent, a sequence repetition or `itertools.product` too large, a container that refers to itself.",
        "Usually a long Python loop over data: make the loop shorter, move it out of the compiled region, or express it as tensor operations.";
    MissingSource = "GB0011", "missing_source",
        "The trace reached an object by a path it cannot repeat in guards and in the rebuilt code (an attribute of a module, a function from other globals, a closure, a tensor constant with no source): it cannot check the object is still the same on the next call.",
        "Pass the object into the compiled function as an argument, or make it a module attribute or a global.";
    SuperCall = "GB0012", "super_call",
        "A form of `super()` the tracer does not model: with unusual arguments, without a `__class__` cell, over an object outside the class's MRO, or naming an attribute that is not a plain method or data.",
        "Call the base class method explicitly (`Base.method(self, ...)`) or accept the break.";
    NnModule = "GB0013", "nn_module",
        "A `torch.nn.Module` the tracer does not inline: one with hooks it cannot run, an overridden `__call__`, an instance-level or non-Python `forward`, a container iterated or sliced in a way that does not give its registered children.",
        "Register hooks before compiling or remove them, keep `forward` a method of the class, iterate `ModuleList`/`Sequential`/`ModuleDict`/`ParameterList` directly.";
    UnreconstructableValue = "GB0014", "unreconstructable_value",
        "A value made in the trace must live after the graph (returned, stored, or live across a break), but the rebuilt code cannot make it again: a generator or iterator in the middle of its walk, an exception object, a module built in the frame, a function closing over cells from outside the frame.",
        "Return plain tensors and containers; finish iterators and generators inside the compiled region.";
    TensorSubclass = "GB0015", "tensor_subclass",
        "A tensor of a `torch.Tensor` subclass the tracer does not model reached the graph: one with `__torch_dispatch__` (wrapper subclasses made by `_make_wrapper_subclass` among them), a `__torch_function__` that is not a Python classmethod, a non-strided layout (sparse, nested), or a use of a modelled subclass the trace cannot reproduce exactly (a query guarded on the input object, a write to an input's attribute, every `__torch_function__` returning `NotImplemented`). Subclasses with a Python `__torch_function__` are otherwise traced: it is inlined and the ops it runs go into the graph. The frame or the operation runs as ordinary Python, so the subclass sees every call it would see eagerly.",
        "Compile the code that runs on plain tensors (unwrap the subclass before calling it), use `__torch_function__` instead of `__torch_dispatch__` where that suffices, or accept eager execution for this part.";
    UnsupportedOperation = "GB0016", "unsupported_operation",
        "An operation (subscript, item assignment or `del`, `in`, comparison, operator, `isinstance`, attribute, method, iteration) on a kind of value the tracer has no rule for, or with operands it cannot decide at trace time.",
        "The operation runs as ordinary Python; if it sits on a hot path, report the kind of value it was applied to.";
    UnsupportedOpResult = "GB0017", "unsupported_op_result",
        "A torch function took or gave a value the graph cannot carry: an argument of an unmodelled kind, a result that is not a tensor, a number or a container of those, a symbolic value of an unexpected type.",
        "Keep graph inputs and outputs to tensors, numbers and lists/tuples/dicts of them.";
    ArgumentMismatch = "GB0018", "argument_mismatch",
        "A call whose arguments do not fit the callee's signature (too many or missing positional arguments, unknown or repeated keywords): eager raises `TypeError` there, so the call runs as ordinary Python to raise it.",
        "Fix the call; this is the error eager Python reports.";
    UnresumableBreak = "GB0019", "unresumable_break",
        "A graph break at a point the resume machinery cannot continue from (a stack it cannot rebuild, a `try`/`with` block opened inside an inlined call, a generator's body, a `for` loop whose body cannot become a function), or where the code after the break would see the transformed frame instead of its own (a break after `locals()`/`vars()`, whose dict is the frame's own `f_locals` on CPython 3.11; `exec`/`eval` with the frame's namespace in a frame that calls `locals()`; the frame's own frame object kept from `inspect.currentframe()`/`sys._getframe()`): the frame runs as ordinary Python.",
        "Move the construct that breaks out of the `try`/`with` block or the generator, or into a function of its own; read what you need of `locals()` or of the frame object at once, or outside the compiled function.";
    UntrackedType = "GB0020", "untracked_type",
        "A value of a Python type the tracer has no tracker for (a C extension object, an iterator or descriptor of a builtin type that is not modelled).",
        "Pass tensors, numbers, strings and plain containers into compiled code; the use of the value runs as ordinary Python.";
    UntracedTensorAttribute = "GB0021", "untraced_tensor_attribute",
        "A tensor attribute that is autograd or storage state rather than static metadata (`.data`, `._base`, `.grad_fn`, `._version`; `.grad` of a tensor made in the graph or of a non-leaf input: a leaf input's `.grad` is a graph input) was read.",
        "Read it outside the compiled region, or pass what you need as an argument.";
    PythonError = "GB0022", "python_error",
        "Running a Python operation at trace time (folding an operation on constants, asking a fake tensor or a real object) raised an error the tracer did not expect; the code runs as ordinary Python, so eager's own error, if any, is what the user sees.",
        "If eager runs without an error here, this is a tracer bug: report it with the message.";
    DataDependentOutputShape = "GB0023", "data_dependent_output_shape",
        "An op whose output's shape depends on the tensor's values (`x[mask]` with a bool mask, `nonzero`, `unique`, `masked_select`, `repeat_interleave` with a tensor of repeats, one-argument `torch.where`): the trace knows shapes, not values, so the op runs as ordinary Python and the graph is split around it. Nothing is wrong with the call.",
        "Keep a fixed shape where you can: `torch.where(mask, x, 0)` or `x * mask` instead of `x[mask]`, sums over a mask instead of selecting; otherwise accept the break.";
    DynamicShapeGuard = "GB0024", "dynamic_shape_guard",
        "Traced with dynamic shapes, the graph needs a guard on symbolic sizes or numbers that the guard builder does not model (a graph of symbolic number arithmetic only, the value of a float input was read): the frame is traced again with static shapes.",
        "Nothing to do; pass `dynamic=False` to skip the dynamic attempt for this function.";
    InternalInconsistency = "GB0025", "internal_inconsistency",
        "The tracer met a state that valid bytecode should not produce (a stack underflow, a cell slot without a cell, a CPython object of an unexpected type, a code object that falls off its end): a fault of the tracer, not of the code.",
        "The code around it runs as ordinary Python, so results stay right; report the message.";
    ObjectLifetime = "GB0026", "object_lifetime",
        "An instruction that makes a weak reference (`weakref.ref`, `WeakMethod`, a weak container's entry) or that may free an object whose free is observable (its class defines `__del__`, or weak references point to it): rebinding or deleting a local, discarding a value, overwriting an attribute, global or item, emptying a container. Python runs it, so finalizers and weak-reference callbacks run where eager runs them, and every local keeps its object until eager would free it (Note [observable frees]).",
        "Nothing to do for correctness. To keep one graph, avoid `__del__` and weak references in the compiled function, or drop such objects outside it.";
    HigherOrderOp = "GB0027", "higher_order_op",
        "A call of one of torch's higher-order operators (`torch._higher_order_ops`: `associative_scan`, `scan`, `cond`, `while_loop`, `map`, ...) given a Python function: the tracer does not trace functions into subgraphs, so the operator runs as ordinary Python, as eagerly, and the graph is split around it (Note [higher-order ops]).",
        "Nothing to do for correctness. For one graph, write the computation with plain tensor ops where one exists (`torch.cumsum`/`torch.cumprod` for an additive or multiplicative scan, `torch.where` for `cond`).";
    ExplicitGraphBreak = "GB0028", "explicit_graph_break",
        "The code asked for a break: a call to `dynamo.graph_break()` or `torch._dynamo.graph_break()` (with its message, if one was given). The graph ends before the call and a new one starts after it, as under torch.compile.",
        "Remove the call to keep one graph.";
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
