//! `convert_frame`: one frame in, transformed code and guards out.
//!
//! Wraps the frame's arguments and closure into trackers (guarding them), interprets the frame,
//! hands the captured graph to the backend as a `torch.fx.GraphModule`, and emits the transformed
//! code. Failures are `ConvertError`s the hook turns into an eager run with a logged reason.

use crate::graph::Arg;
use crate::guards::{GuardKind, GuardManager};
use crate::pycodegen::resume::{break_code, break_operands, successors, BreakPlan};
use crate::pycodegen::{compiled_frame_code, Rebuild, SideEffect};
use crate::symbolic::code_info::CodeInfo;
use crate::symbolic::translator::{BreakState, Outcome};
use crate::source::Source;
use crate::symbolic::builder::wrap;
use crate::symbolic::code_info::code_info;
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::translator::{GlobalsInfo, InstructionTranslator};
use crate::symbolic::variables::{type_name, IterKind, IteratorState, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// The pieces of a frame at entry that conversion reads.
#[derive(Clone)]
pub struct FrameInput<'py> {
    pub code: Bound<'py, PyAny>,
    pub globals: Bound<'py, PyDict>,
    pub builtins: Bound<'py, PyDict>,
    /// `func.__closure__` (cells) or None.
    pub closure: Option<Bound<'py, PyTuple>>,
    /// Values of the argument slots (`localsplus[0..n_arg_slots]`).
    pub args: Vec<Bound<'py, PyAny>>,
    /// `torch.is_grad_enabled()` when the frame started.
    pub grad_enabled: bool,
    /// Which input dimensions to make symbolic (Note [symbolic sizes]).
    pub dynamic: crate::symbolic::output_graph::DynamicPolicy,
}

/// The reason prefix of `OutputGraph::shape_guard`'s refusal (the conversion is then retried
/// with static shapes).
pub const SHAPE_GUARD_UNSUPPORTED: &str = "symbolic shape guard not modelled";

/// Why a frame was not converted.
#[derive(Debug)]
pub enum ConvertError {
    /// Symbolic execution met something it does not model: run eagerly.
    Unsupported(Unsupported),
    /// The backend raised while compiling the graph.
    Backend(PyErr),
    /// A bug in the compiler (bytecode emission, fx export, ...).
    Internal(PyErr),
}

impl From<Unsupported> for ConvertError {
    fn from(u: Unsupported) -> Self {
        ConvertError::Unsupported(u)
    }
}

/// A converted frame.
pub struct Converted {
    pub code: Py<PyAny>,
    pub guards: GuardManager,
    /// The captured graph as text (for logs and `explain`).
    pub graph_text: String,
    pub n_ops: usize,
    /// The fx GraphModule handed to the backend, if a graph was compiled.
    pub graph_module: Option<Py<PyAny>>,
    /// When the frame breaks: why.
    pub graph_break: Option<String>,
    /// The sizes this conversion saw per tensor input (automatic dynamic's memory).
    pub dim_state: crate::symbolic::output_graph::DimState,
    /// Whether some input got symbolic sizes or values (Note [symbolic sizes]).
    pub symbolic: bool,
    /// The compile with symbolic sizes ran past its budget and this one is static: later
    /// compiles of the code stay static (Note [dynamic compile budget]).
    pub static_only: bool,
}

// Note [dynamic compile budget]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Tracing with symbolic sizes asks the ShapeEnv to prove facts about them at every view and
// branch. For some models those proofs explode: Swin's window partition and padding over
// symbolic height and width (`(H + pad) // window` in views of views) did not finish in five
// minutes where the static compile takes two seconds (audit 54, V1; torch.compile has the same
// fault). A conversion that may make sizes symbolic gets a deadline
// (`config.dynamic_compile_budget_s`); past it, with symbolic sizes in play, every instruction
// and every graph op fails at once with a `SHAPE_GUARD_UNSUPPORTED` reason, whatever traces or
// breaks are under way finish quickly, and `convert` compiles the frame again with static
// sizes. The code object then stays static (`Converted::static_only`, kept in its
// `ExtraState`), so later sizes compile once each instead of paying the budget again.

thread_local! {
    /// The deadline of the conversion under way on this thread, if it may use symbolic sizes.
    static COMPILE_DEADLINE: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    /// Set when that deadline passed while symbolic sizes were in play.
    static BUDGET_EXCEEDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Fails once the conversion under way has run past its budget while `symbolic` (the trace has
/// a ShapeEnv) (Note [dynamic compile budget]).
pub fn check_compile_budget(symbolic: bool) -> crate::symbolic::VResult<()> {
    if !symbolic {
        return Ok(());
    }
    let Some(deadline) = COMPILE_DEADLINE.with(|d| d.get()) else { return Ok(()) };
    if std::time::Instant::now() < deadline {
        return Ok(());
    }
    BUDGET_EXCEEDED.with(|e| e.set(true));
    Err(Unsupported::of(
        crate::symbolic::graph_break::GraphBreakKind::DynamicShapeGuard,
        format!("{SHAPE_GUARD_UNSUPPORTED}: a compile with symbolic sizes ran past config.dynamic_compile_budget_s ({:.0} s)", crate::config::dynamic_compile_budget().as_secs_f64()),
    ))
}

/// The grad mode at frame entry (recorded on the frame input by `convert`).
fn frame_grad_mode(_py: Python<'_>, frame: &FrameInput<'_>) -> Result<bool, ConvertError> {
    Ok(frame.grad_enabled)
}

/// Note [ambient autocast]: a graph traced outside `torch.autocast` and run inside it (or the
/// other way round) computes its matmuls in the other dtype, but the trace's Python decisions
/// on result dtypes (`if y.dtype == torch.float32`, a returned `y.dtype`) keep their
/// trace-time answers. So the autocast state at frame entry is guarded, as torch's
/// GLOBAL_STATE guard does: off everywhere is one query (`torch._C._is_any_autocast_enabled`,
/// about 80 ns); under an autocast, each device type's enabled flag, and the dtype and cache
/// flag where it is on.
fn guard_ambient_autocast(py: Python<'_>, og: &mut OutputGraph) -> PyResult<()> {
    let torch = py.import("torch")?;
    let any = torch.getattr("_C")?.getattr("_is_any_autocast_enabled")?;
    let no_args = pyo3::types::PyTuple::empty(py);
    let any_now = any.call0()?;
    let on = any_now.is_truthy()?;
    og.add_guard(None, GuardKind::GlobalQuery { func: any.unbind(), args: no_args.clone().unbind(), expected: any_now.unbind() });
    if !on {
        return Ok(());
    }
    let enabled_q = torch.getattr("is_autocast_enabled")?;
    let dtype_q = torch.getattr("get_autocast_dtype")?;
    for d in py.import("dynamo._amp")?.getattr("_DEVICES")?.try_iter()? {
        let args = pyo3::types::PyTuple::new(py, [d?])?;
        let Ok(enabled) = enabled_q.call1(&args) else { continue };
        let is_on = enabled.is_truthy()?;
        og.add_guard(None, GuardKind::GlobalQuery { func: enabled_q.clone().unbind(), args: args.clone().unbind(), expected: enabled.unbind() });
        if is_on {
            let dtype = dtype_q.call1(&args)?;
            og.add_guard(None, GuardKind::GlobalQuery { func: dtype_q.clone().unbind(), args: args.unbind(), expected: dtype.unbind() });
        }
    }
    let cache_q = torch.getattr("is_autocast_cache_enabled")?;
    let cache = cache_q.call0()?;
    og.add_guard(None, GuardKind::GlobalQuery { func: cache_q.unbind(), args: no_args.unbind(), expected: cache.unbind() });
    Ok(())
}

/// Traces the frame once, with a fresh output graph. `break_at` is the speculation log of an
/// earlier attempt: stop there for a graph break.
fn trace(py: Python<'_>, frame: &FrameInput<'_>, ci: &Arc<CodeInfo>, break_at: Option<(usize, usize)>) -> Result<(OutputGraph, Outcome, Vec<Option<VT>>), ConvertError> {
    crate::symbolic::variables::user_defined::clear_class_lookups();
    let mut og = OutputGraph::new(py).map_err(ConvertError::Internal)?;
    og.dynamic = frame.dynamic.clone();
    og.append_only_slots = ci.append_only_slots();
    og.frame_arg_ptrs = frame.args.iter().map(|a| a.as_ptr() as usize).collect();
    let torch = py.import("torch").map_err(ConvertError::Internal)?;
    let grad: bool = frame_grad_mode(py, frame)?;
    torch.getattr("_C").and_then(|c| c.call_method1("_set_grad_enabled", (grad,))).map_err(ConvertError::Internal)?;
    crate::symbolic::variables::ctx_manager::restore_autocast_after_trace(py);
    og.add_guard(None, GuardKind::GradMode(grad));
    // Inference mode is not grad mode: under it autograd records nothing even inside
    // `enable_grad()`, so a graph traced outside it must not be reused inside it.
    let inference = torch.getattr("is_inference_mode_enabled").map_err(ConvertError::Internal)?;
    let inference_now = inference.call0().map_err(ConvertError::Internal)?;
    let no_args = pyo3::types::PyTuple::empty(py);
    og.add_guard(None, GuardKind::GlobalQuery { func: inference.unbind(), args: no_args.unbind(), expected: inference_now.unbind() });
    let dd = torch.call_method0("get_default_dtype").map_err(ConvertError::Internal)?;
    og.add_guard(None, GuardKind::DefaultDtype(dd.unbind()));
    guard_ambient_autocast(py, &mut og).map_err(ConvertError::Internal)?;

    let mut locals: Vec<Option<VT>> = vec![None; ci.localsplus.len()];
    // A resume function's cells arrive made (Note [cells across a graph break]): the slot holds
    // the cell, its contents are reached as `cell_contents`. They are tracked before the other
    // arguments, so a function among those that closes over them shares their trackers.
    let entry_cells = ci.cells_on_entry();
    for &i in &entry_cells {
        let i = i as usize;
        let Some(cell) = frame.args.get(i) else { graph_break!(InternalInconsistency, "cell '{}' is not an argument slot", ci.localsplus[i]) };
        if type_name(cell) != "cell" {
            graph_break!(InternalInconsistency, "slot of cell '{}' holds {}", ci.localsplus[i], type_name(cell));
        }
        let slot = Arc::new(Source::Local { name: ci.localsplus[i].clone(), idx: i as u32 });
        let contents = match cell.getattr("cell_contents") {
            Ok(c) => Some(wrap(py, &mut og, &c, slot.attr("cell_contents"))?),
            // Not assigned yet: a read in the trace is refused (`LOAD_DEREF`).
            Err(_) => None,
        };
        let rc = Rc::new(RefCell::new(contents));
        og.cells_by_ptr.insert(cell.as_ptr() as usize, rc.clone());
        locals[i] = Some(VT::Cell(rc));
    }
    for (i, v) in frame.args.iter().enumerate() {
        if entry_cells.contains(&(i as u32)) {
            continue;
        }
        let source = Arc::new(Source::Local { name: ci.localsplus[i].clone(), idx: i as u32 });
        locals[i] = Some(wrap_argument(py, &mut og, v, source)?);
    }
    let mut closure = Vec::new();
    if let Some(cells) = &frame.closure {
        let base = ci.localsplus.len() - ci.n_freevars;
        for (j, cell) in cells.iter().enumerate() {
            let contents = match cell.getattr("cell_contents") {
                Ok(c) => c,
                Err(_) => graph_break!(RaisesException, "free variable '{}' is empty", ci.localsplus[base + j]),
            };
            let source = Arc::new(Source::Closure { name: ci.localsplus[base + j].clone(), idx: j as u32, slot: (base + j) as u32 });
            // Note [free variables wrapped when read]: a dict or list the frame closes over is
            // wrapped (its keys or length guarded) when the frame first reads it (LOAD_DEREF);
            // until then it is an opaque object of its type. A training step closing over a
            // `metrics` dict that its last statement fills guarded the dict's keys in every
            // frame of the step (the function and each resume function), each new key a
            // recompile of them all (audit 51, N10).
            let deferred = contents.is_exact_instance_of::<pyo3::types::PyDict>() || contents.is_exact_instance_of::<pyo3::types::PyList>();
            let v = if deferred {
                og.add_guard(Some(source.clone()), GuardKind::TypeMatch(contents.get_type().into_any().unbind()));
                VT::Opaque { obj: Rc::new(contents.clone().unbind()), source }
            } else {
                wrap(py, &mut og, &contents, source)?
            };
            let rc = Rc::new(RefCell::new(Some(v)));
            if deferred {
                og.unread_free_vars.insert(Rc::as_ptr(&rc) as usize);
            }
            og.cells_by_ptr.insert(cell.as_ptr() as usize, rc.clone());
            closure.push(VT::Cell(rc));
        }
    }
    let g = Rc::new(GlobalsInfo { globals: frame.globals.clone().unbind(), builtins: frame.builtins.clone().unbind(), source: None, trusted: false });
    let (outcome, final_locals) = {
        let mut tx = InstructionTranslator::new(ci.clone(), g, locals, closure, &mut og, 0);
        tx.mark_external_cells();
        let outcome = tx.run_until(py, break_at)?;
        (outcome, tx.locals.clone())
    };
    Ok((og, outcome, final_locals))
}

/// Wraps argument `v` of the converted frame: an exact int (one that stays a constant) or str
/// waits for its first use before it is guarded (Note [lazy constants] in `output_graph.rs`).
fn wrap_argument(py: Python<'_>, og: &mut OutputGraph, v: &Bound<'_, PyAny>, source: Arc<Source>) -> VResult<VT> {
    let ty = v.get_type();
    if ty.is(py.get_type::<pyo3::types::PyInt>()) {
        if let Some(sym) = og.add_number_input(py, v, &source)? {
            return Ok(sym);
        }
        return Ok(og.lazy_argument(v, source));
    }
    if ty.is(py.get_type::<pyo3::types::PyString>()) {
        return Ok(og.lazy_argument(v, source));
    }
    wrap(py, og, v, source)
}

/// Converts one frame: a full capture, or a graph break at the first instruction tracing could
/// not handle (then the frame is traced again up to that instruction).
pub fn convert(py: Python<'_>, frame: &FrameInput<'_>, backend: &Bound<'_, PyAny>) -> Result<Converted, ConvertError> {
    // Ops that fail on fake tensors are reported to us as errors; keep torch's fake-tensor
    // logger from printing them as well (the frame then runs eagerly and raises for real).
    // `Logger.disabled` rather than `setLevel`: setLevel clears the level cache of every logger
    // in the process, which costs about 1 ms per call in a program that imports transformers.
    let logger = py.import("logging").and_then(|l| l.call_method1("getLogger", ("torch._subclasses.fake_tensor",))).ok();
    let was_disabled = logger.as_ref().and_then(|l| l.getattr("disabled").ok());
    if let Some(l) = &logger {
        let _ = l.setattr("disabled", true);
    }
    // Tracing switches the real grad mode as the frame would (see translator::set_grad_enabled);
    // put it back whatever happens.
    let torch_c = py.import("torch").and_then(|t| t.getattr("_C")).ok();
    let grad_before = py.import("torch").and_then(|t| t.call_method0("is_grad_enabled")).ok();
    let grad_at_entry = grad_before.as_ref().and_then(|g| g.extract::<bool>().ok()).unwrap_or(true);
    // Tracing an autocast block switches the real autocast state too (Note [autocast blocks]).
    let outer_autocast = crate::symbolic::variables::ctx_manager::begin_autocast_watch();
    let deadline = (frame.dynamic.mode != Some(false)).then(|| std::time::Instant::now() + crate::config::dynamic_compile_budget());
    let outer_deadline = COMPILE_DEADLINE.with(|d| d.replace(deadline));
    let outer_exceeded = BUDGET_EXCEEDED.with(|e| e.replace(false));
    let mut result = convert_inner(py, frame, backend, grad_at_entry);
    let exceeded = BUDGET_EXCEEDED.with(|e| e.replace(outer_exceeded));
    COMPILE_DEADLINE.with(|d| d.set(outer_deadline));
    if exceeded {
        // Note [dynamic compile budget]: whatever the late trace made is dropped.
        let why = format!("{SHAPE_GUARD_UNSUPPORTED}: a compile with symbolic sizes ran past config.dynamic_compile_budget_s ({:.0} s)", crate::config::dynamic_compile_budget().as_secs_f64());
        result = Err(ConvertError::Unsupported(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DynamicShapeGuard, why)));
    }
    if let Err(ConvertError::Unsupported(u)) = &result {
        if u.reason.starts_with(SHAPE_GUARD_UNSUPPORTED) && frame.dynamic.mode != Some(false) {
            // The ShapeEnv learned a fact our guards cannot express: compile with static shapes.
            tracing::info!(target: "dynamo::recompiles", "{}; compiling with static shapes", u.reason);
            let static_frame = FrameInput { dynamic: crate::symbolic::output_graph::DynamicPolicy { mode: Some(false), previous: None }, ..frame.clone() };
            if let Some(c) = &torch_c {
                let _ = c.call_method1("_set_grad_enabled", (grad_at_entry,));
            }
            result = convert_inner(py, &static_frame, backend, grad_at_entry);
            if let (true, Ok(c)) = (exceeded, &mut result) {
                c.static_only = true;
            }
        }
    }
    if let (Some(c), Some(g)) = (&torch_c, &grad_before) {
        let _ = c.call_method1("_set_grad_enabled", (g,));
    }
    crate::symbolic::variables::ctx_manager::end_autocast_watch(py, outer_autocast);
    if let (Some(l), Some(was)) = (&logger, was_disabled) {
        let _ = l.setattr("disabled", was);
    }
    result
}

/// Note [breaking where a failure points]: an `Unsupported` met after tracing, while planning
/// the rebuilds of what outlives the graph, may name an earlier instruction to break at instead
/// (`break_at`: where an exception the trace raised and handled, which outlives the graph, was
/// raised). The frame is then traced again up to there, once.
fn convert_inner(py: Python<'_>, frame: &FrameInput<'_>, backend: &Bound<'_, PyAny>, grad_at_entry: bool) -> Result<Converted, ConvertError> {
    let ci = code_info(&frame.code)?;
    let break_again = |u: Unsupported, tried: Option<(usize, usize)>| -> Result<Converted, ConvertError> {
        match u.break_at {
            Some(at) if Some(at) != tried && can_break(&ci, at.0, u.kind) => match trace(py, frame, &ci, Some(at))? {
                (og, Outcome::Break(state), _) => convert_break(py, frame, &ci, og, state, u.to_string(), u.kind, backend, grad_at_entry),
                (_, Outcome::Return(_) | Outcome::Yield(_), _) => Err(u.into()),
            },
            _ => Err(u.into()),
        }
    };
    let (og, outcome, final_locals) = match trace(py, frame, &ci, None) {
        Ok(r) => r,
        Err(ConvertError::Unsupported(u)) => match u.break_at {
            Some(at) if can_break(&ci, at.0, u.kind) => match trace(py, frame, &ci, Some(at))? {
                (og, Outcome::Break(state), _) => {
                    return match convert_break(py, frame, &ci, og, state, u.to_string(), u.kind, backend, grad_at_entry) {
                        Err(ConvertError::Unsupported(u2)) => break_again(u2, Some(at)),
                        other => other,
                    };
                }
                (_, Outcome::Return(_) | Outcome::Yield(_), _) => return Err(u.into()),
            },
            _ => return Err(u.into()),
        },
        Err(e) => return Err(e),
    };
    match finish_return(py, &ci, og, outcome, final_locals, backend, grad_at_entry) {
        Err(ConvertError::Unsupported(u)) => break_again(u, None),
        other => other,
    }
}

/// Note [dropped generators]: CPython closes a generator when its last reference goes (the
/// frame that made it returns, a `for` loop over it breaks, `next(gen())` drops it): `close()`
/// throws `GeneratorExit` in at the suspended `yield`, so its `finally` blocks and `with` exits
/// run then. A generator the trace made and left suspended inside such a block is dropped by
/// the frame (one that outlives it cannot be rebuilt: GB0014), but the trace has no point at
/// which to run that code, so the graph would lose its effects: such a frame is not compiled
/// (GB0014, the frame or the code up to the break runs as ordinary Python). A generator suspended
/// outside any handler closes without running code (3.12's implicit handler, which only turns a
/// leaking `StopIteration` into `RuntimeError`, does not count), and so does one inside
/// `try: ... except IndexError:` (`Sequence.__iter__`): the clause does not match GeneratorExit.
fn check_dropped_generators(og: &OutputGraph) -> VResult<()> {
    for g_rc in &og.generators {
        let g = g_rc.borrow();
        let crate::symbolic::variables::IterKind::Generator(Some(frame)) = &g.kind else { continue };
        if g.exhausted || frame.returned.is_some() || frame.ip == 0 {
            continue;
        }
        if closing_runs_code(frame) {
            if let Some(&at) = og.generator_ctx_made_at.get(&(Rc::as_ptr(g_rc) as usize)) {
                // A `@contextmanager` block cut by the break: break where its manager was made.
                return Err(Unsupported {
                    break_at: Some(at),
                    ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue, "a @contextmanager block cut by a graph break")
                });
            }
            // Note [breaking where a generator was made]: the code before the generator was
            // made is still a graph.
            return Err(Unsupported {
                break_at: og.generator_made_at.get(&(Rc::as_ptr(g_rc) as usize)).copied(),
                ..Unsupported::of(
                    crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue,
                    format!(
                        "generator {} ({}:{}) left suspended inside a try/with block: closing it runs code the graph cannot place",
                        frame.code.name,
                        frame.code.filename,
                        frame.code.insts[frame.ip - 1].positions.line.unwrap_or(frame.code.firstlineno)
                    ),
                )
            });
        }
    }
    Ok(())
}

/// Whether closing the generator suspended in `frame` (at the `yield` before `frame.ip`) runs
/// code of its own (`check_dropped_generators`): it sits in a handler's range that is neither
/// 3.12's implicit StopIteration handler nor `except` clauses that let GeneratorExit pass.
pub(crate) fn closing_runs_code(frame: &crate::symbolic::variables::GeneratorFrame) -> bool {
    // Suspended in a `yield from` (Note [generator throw]), closing closes the iterator it
    // delegates to first (`gen_close`), which may run code of its own.
    if frame.ip > 0 && crate::symbolic::variables::iter::delegating(frame) {
        return true;
    }
    let Some(exn) = frame.code.insts.get(frame.ip - 1).and_then(|i| i.exn) else { return false };
    handler_runs_code_on_exit(frame, exn.handler.index(), 0)
}

/// Whether the `GeneratorExit` that `close()` throws in runs code of the generator once it
/// reaches the handler at instruction `h` (`closing_runs_code`). 3.12's implicit StopIteration
/// handler runs none. `except X:` clauses (`PUSH_EXC_INFO`, loads of the classes,
/// `CHECK_EXC_MATCH`, a jump to the next clause when it does not match) only test the type and
/// pass GeneratorExit on unless a class is BaseException or GeneratorExit itself; after the last
/// clause the exception is re-raised (`RERAISE`), through the clause's cleanup (`COPY 3;
/// POP_EXCEPT; RERAISE 1`), to the handler around the whole `try` if there is one (a `finally`,
/// a `with`, an outer `try`), which is walked the same way. Anything else (a `finally` or `with`
/// handler, `except*`, a shape not recognized) counts as running code.
fn handler_runs_code_on_exit(frame: &crate::symbolic::variables::GeneratorFrame, h: usize, depth: usize) -> bool {
    use crate::bytecode::opcode::op;
    let insts = &frame.code.insts;
    if depth > 16 {
        return true;
    }
    if insts.get(h).is_some_and(|i| i.opcode == op::CALL_INTRINSIC_1 && i.arg == 3) {
        return false;
    }
    if !insts.get(h).is_some_and(|i| i.opcode == op::PUSH_EXC_INFO) {
        return true;
    }
    // Where the exception goes from instruction `at`: its handler, walked (skipping the
    // clause's cleanup), or out of the generator (no handler: no code runs).
    let propagate = |at: usize| -> bool {
        let Some(e) = insts.get(at).and_then(|i| i.exn) else { return false };
        let c = e.handler.index();
        let cleanup = insts.get(c).is_some_and(|i| i.opcode == op::COPY && i.arg == 3)
            && insts.get(c + 1).is_some_and(|i| i.opcode == op::POP_EXCEPT)
            && insts.get(c + 2).is_some_and(|i| i.opcode == op::RERAISE);
        if !cleanup {
            return handler_runs_code_on_exit(frame, c, depth + 1);
        }
        match insts[c + 2].exn {
            Some(outer) => handler_runs_code_on_exit(frame, outer.handler.index(), depth + 1),
            None => false,
        }
    };
    let mut k = h + 1;
    loop {
        // One clause: the loads of its classes, then CHECK_EXC_MATCH.
        let first = k;
        let mut catches_exit = false;
        while let Some(i) = insts.get(k) {
            let name = match i.opcode {
                op::LOAD_GLOBAL => frame.code.names.get((i.arg >> 1) as usize),
                op::LOAD_NAME | op::LOAD_ATTR => frame.code.names.get(i.arg as usize),
                op::BUILD_TUPLE | op::LOAD_FAST | op::LOAD_DEREF => None,
                _ => break,
            };
            catches_exit |= name.is_some_and(|n| n == "BaseException" || n == "GeneratorExit");
            k += 1;
        }
        if k == first || catches_exit || !insts.get(k).is_some_and(|i| i.opcode == op::CHECK_EXC_MATCH) {
            return true;
        }
        let Some(jump) = insts.get(k + 1).filter(|i| matches!(i.opcode, op::POP_JUMP_FORWARD_IF_FALSE | op::POP_JUMP_BACKWARD_IF_FALSE)) else {
            return true;
        };
        let Some(next) = jump.target.map(|t| t.index()) else { return true };
        match insts.get(next).map(|i| i.opcode) {
            Some(op::RERAISE) => return propagate(next),
            // The next clause's test.
            Some(op::LOAD_GLOBAL | op::LOAD_NAME | op::LOAD_FAST | op::LOAD_DEREF) => k = next,
            _ => return true,
        }
    }
}

/// The code of a frame traced to its end (`Outcome::Return`): one graph, the returned value
/// rebuilt from its outputs, the side effects replayed.
#[allow(clippy::too_many_arguments)]
fn finish_return(
    py: Python<'_>,
    ci: &Arc<CodeInfo>,
    og: OutputGraph,
    outcome: Outcome,
    final_locals: Vec<Option<VT>>,
    backend: &Bound<'_, PyAny>,
    grad_at_entry: bool,
) -> Result<Converted, ConvertError> {
    let returned = match outcome {
        Outcome::Return(v) => v,
        Outcome::Break(_) | Outcome::Yield(_) => unreachable!("no break requested, not a generator"),
    };
    check_dropped_generators(&og)?;
    let mut og = og;
    let mut outputs = Outputs::default();
    map_frame_cells(&final_locals, &mut outputs);
    let mut roots = effect_values(&og);
    roots.push(returned.clone());
    // The frame's own cells: their contents are stored for functions that escape.
    roots.extend(final_locals.iter().take(ci.first_free_slot()).flatten().filter(|v| matches!(v, VT::Cell(_))).cloned());
    let reach = check_rebuilt_once(py, roots.iter())?;
    mark_shared(&mut outputs, &reach);
    let mut effects = plan_hook_replays(py, &og, &mut outputs)?;
    let result = rebuild_of(py, &og, &returned, &mut outputs)?;
    effects.extend(plan_side_effects(py, &og, &mut outputs)?);
    // Cells that functions made in the frame and escaping it close over get their contents.
    effects.extend(own_cell_stores(py, &og, ci, &mut outputs)?);
    effects.extend(cell_fills(py, &og, &mut outputs)?);
    let n_shared = outputs.n_shared;
    let (compiled, graph_module, graph_text, n_ops) = compile_graph(py, &mut og, outputs, backend, grad_at_entry)?;
    let inputs: Vec<Arc<Source>> = og.inputs.iter().map(|(s, _)| s.clone()).collect();
    let rerun = rerun_on_failure(&og, grad_at_entry);
    let code = compiled_frame_code(py, ci, compiled, &inputs, &result, &effects, rerun, n_shared).map_err(ConvertError::Internal)?;
    og.add_alias_guards();
    og.add_version_guards();
    og.add_iterator_guards();
    if let Some(g) = og.shape_guard(py)? {
        og.guards.push(g);
    }
    let guards = GuardManager::new(py, std::mem::take(&mut og.guards)).map_err(ConvertError::Internal)?;
    Ok(Converted { code, guards, graph_text, n_ops, graph_module, graph_break: None, dim_state: std::mem::take(&mut og.dim_state), symbolic: og.shape_env.is_some(), static_only: false })
}

/// Whether and how the transformed code reruns the frame when its graph raises (Note [graph
/// failure reruns the frame]): always when the graph writes none of its inputs; when it does,
/// only if an op may raise on tensor values, with copies of the written inputs to put back.
/// A graph that draws random numbers and may raise on values also keeps the generators' states,
/// so the rerun draws what eager draws. A graph that enters or leaves an autocast block keeps
/// the autocast state, so the rerun starts from the state of frame entry. One that writes its
/// inputs with no op known to raise on values is protected on its first call only (and after
/// it failed): errors its fake-tensor trace cannot see (a kernel missing for a dtype) show on
/// that call.
fn rerun_on_failure(og: &OutputGraph, grad_enabled: bool) -> Option<crate::pycodegen::Rerun> {
    let mutated = og.graph.mutated_inputs();
    let may_raise = og.graph.may_raise_on_values();
    let autocast = og.autocast.recorded;
    if !mutated.is_empty() && !may_raise {
        // With an autocast block, the autocast state is kept on every call too
        // (`snapshot_inputs_first_call_autocast`).
        return Some(crate::pycodegen::Rerun { grad_enabled, snapshot: mutated, rng: false, autocast, first_call_only: true });
    }
    Some(crate::pycodegen::Rerun { grad_enabled, snapshot: mutated, rng: may_raise && og.graph.uses_rng(), autocast, first_call_only: false })
}

/// Records the frame's cells (its own cell variables and its free variables, as their trackers
/// are in `locals`) by tracker address, so that a function made in the frame is rebuilt over
/// the real cells (`Rebuild::MakeFunction`).
fn map_frame_cells(locals: &[Option<VT>], outputs: &mut Outputs) {
    for (i, v) in locals.iter().enumerate() {
        if let Some(VT::Cell(rc)) = v {
            outputs.cells.insert(Rc::as_ptr(rc) as *const () as usize, i as u32);
        }
    }
}

/// `STORE_DEREF` effects that give the frame's own cells (made by its prologue) the contents
/// the trace left in them, for every cell in `outputs.referenced_cells` and every cell a stored
/// value's functions close over in turn. Free variables and the cells a resume function
/// receives are left out: they outlive the trace, so their writes are side effects already
/// (`CellTarget::FrameFree`, `CellTarget::FrameCell`). An empty cell stays empty (the prologue
/// made it so).
fn own_cell_stores(py: Python<'_>, og: &OutputGraph, ci: &CodeInfo, outputs: &mut Outputs) -> VResult<Vec<SideEffect>> {
    let entry = ci.cells_on_entry();
    let mut done = Vec::new();
    let mut out = Vec::new();
    loop {
        let pending = std::mem::take(&mut outputs.referenced_cells);
        if pending.is_empty() {
            return Ok(out);
        }
        for (slot, rc) in pending {
            if done.contains(&slot) || slot as usize >= ci.first_free_slot() || entry.contains(&slot) {
                continue;
            }
            done.push(slot);
            let content = rc.borrow().clone();
            if let Some(v) = content {
                let value = rebuild_of(py, og, &v, outputs)?;
                out.push(SideEffect::SetDeref { slot, value });
            }
        }
    }
}

/// The instructions whose live locals the code after a break at `ip` may read: its successors,
/// or for a `raise` (none) the instruction itself, whose live set is its handler's (the liveness
/// analysis counts exception handlers as successors), so a protected `raise` keeps what the
/// `except` clause reads. A protected instruction that can raise keeps its handler's reads too
/// (Note [protected breaks]): when it is the last of its `try` body (`t[0] = 5` before the
/// `except`), its successor lies outside the block and does not count the handler, whose
/// `return t` then read an unbound local; so the instruction itself is a live point as well.
fn live_points(inst: &crate::bytecode::Instruction, ip: usize) -> Vec<usize> {
    match successors(inst, ip) {
        s if s.is_empty() => vec![ip],
        mut s => {
            if inst.exn.is_some() && !s.contains(&ip) {
                s.push(ip);
            }
            s
        }
    }
}

/// Whether a graph break may stop at instruction `ip` of `ci`: a known stack layout.
fn can_break(ci: &CodeInfo, ip: usize, kind: crate::symbolic::graph_break::GraphBreakKind) -> bool {
    let inst = &ci.insts[ip];
    // A FOR_ITER runs for real only to raise what the traced step raises (the loop ends there):
    // resuming a loop at its head on every iteration would nest one resume call per iteration.
    // An iterator the trace cannot step goes to a loop driver instead, which calls the body as
    // a function of its own (Note [loop bodies as functions] in `pycodegen::loop_body`).
    if inst.opcode == crate::bytecode::opcode::op::FOR_ITER && kind != crate::symbolic::graph_break::GraphBreakKind::RaisesException {
        return kind == crate::symbolic::graph_break::GraphBreakKind::UntracedValue && crate::pycodegen::loop_body::loop_shape(ci, ip).is_some();
    }
    // Inside try/with blocks the break keeps the block's handler: Note [protected breaks].
    // Cell variables travel as cells: Note [cells across a graph break].
    break_operands(inst).is_some()
}

/// Note [breaks that would show the transformed frame]: code run at a graph break runs in the
/// transformed frame, and the code after it in the resume function's frame. Where the user's
/// code holds on to its own frame's state, neither is the frame eager runs, so the whole frame
/// runs eagerly instead (a GB0019 break, logged):
/// - a `locals()` / `vars()` dict the trace returned, before the break: on CPython 3.11 it is
///   the frame's one `f_locals` dict, which later `locals()` calls, `exec` / `eval` with the
///   frame's namespace and `sys._getframe(1).f_locals` in a callee update (Note [locals() in a
///   trace]); the resume function's frame would give a dict of its own;
/// - `exec` / `eval` with the frame's namespace (no `locals` argument) in a frame that also
///   calls `locals()`, `vars()` or `dir()`: a name `exec` binds stays in eager's `f_locals`
///   dict and shows in those later calls;
/// - the frame's own frame object kept (`fr = inspect.currentframe()`, `sys._getframe()`):
///   its `f_locals` and `f_lineno`, read later, would be the transformed frame's (its
///   temporaries, the line of the resume call; `f_code` is the transformed code), even read
///   at once. Only `f_back`, `f_globals` and `f_builtins` read at once are eager's (Note
///   [resume frames link to the caller]): those stay a break;
/// - a grad-mode or inference-mode context made in the frame reached twice (`m = no_grad()`,
///   then `m.__enter__()` breaking): rebuilt, the two would be two objects.
fn needs_the_real_frame(py: Python<'_>, ci: &CodeInfo, og: &OutputGraph, state: &BreakState) -> Option<String> {
    use crate::bytecode::opcode::op;
    // `frame_locals_taken` is only set before 3.13 (PEP 667 made `locals()` a snapshot).
    if og.frame_locals_taken {
        return Some("a graph break after locals()/vars() in the frame: the dict is the frame's own f_locals, which the resume function's frame would not update".into());
    }
    // A grad-mode or inference-mode context made in the frame is a value, not an object with
    // an identity: reached twice (a local and the `m.__enter__` being called), each would be
    // made again as an object of its own, and the `__exit__` called on one would restore the
    // mode the other saved.
    fn made_ctx(v: &VT) -> usize {
        match v {
            VT::GradModeCtx { source: None, .. } | VT::InferenceModeCtx { .. } => 1,
            VT::Method { func, self_ } => made_ctx(func) + made_ctx(self_),
            VT::Tuple(items) => items.iter().map(made_ctx).sum(),
            _ => 0,
        }
    }
    let n_ctx: usize = state.stack.iter().chain(state.locals.iter().flatten()).map(made_ctx).sum();
    if n_ctx > 1 {
        return Some("a grad-mode or inference-mode context made in the frame is reached twice at a break: made again, it would be two objects".into());
    }
    let inst = &ci.insts[state.ip];
    if inst.opcode != op::CALL {
        return None;
    }
    let argc = inst.arg as usize;
    let n = state.stack.len();
    if n < argc + 1 {
        return None;
    }
    let args = &state.stack[n - argc..];
    let callees = [n.checked_sub(argc + 1), n.checked_sub(argc + 2)];
    let object_of = |v: &VT| -> Option<Py<PyAny>> {
        match v {
            VT::Builtin(b) => Some(b.clone_ref(py)),
            VT::Function { obj, .. } => Some(obj.clone_ref(py)),
            VT::Constant(c) | VT::TorchFunction(c) => Some(c.clone_ref(py)),
            _ => None,
        }
    };
    let is = |o: &Bound<'_, PyAny>, module: &str, name: &str| py.import(module).and_then(|m| m.getattr(name)).is_ok_and(|f| f.is(o));
    let names_frame_dict = ci.insts.iter().any(|i| {
        matches!(i.opcode, op::LOAD_GLOBAL | op::LOAD_NAME) && ci.names.get((if i.opcode == op::LOAD_GLOBAL { i.arg >> 1 } else { i.arg }) as usize).is_some_and(|n| matches!(n.as_str(), "locals" | "vars" | "dir"))
    });
    let kw = state.kw_names.as_ref().map_or(0, |k| k.bind(py).len());
    for at in callees.into_iter().flatten() {
        let Some(obj) = object_of(&state.stack[at]) else { continue };
        let obj = obj.bind(py);
        let shared_dict = py.version_info() < (3, 13);
        if shared_dict && (is(obj, "builtins", "exec") || is(obj, "builtins", "eval")) && argc - kw < 3 && kw == 0 && names_frame_dict {
            return Some("exec/eval with the frame's namespace in a frame that calls locals()/vars()/dir(): the names it binds stay in the frame's f_locals dict".into());
        }
        let own_frame = (is(obj, "inspect", "currentframe") && argc == 0)
            || (is(obj, "sys", "_getframe") && (argc == 0 || (argc == 1 && args[0].as_constant(py).is_some_and(|a| a.extract::<i64>().is_ok_and(|d| d == 0)))));
        let read_at_once = ci.insts.get(state.ip + 1).is_some_and(|next| {
            next.opcode == op::LOAD_ATTR && ci.names.get(next.arg as usize).is_some_and(|n| matches!(n.as_str(), "f_back" | "f_globals" | "f_builtins"))
        });
        if own_frame && !read_at_once {
            return Some("the frame's own frame object is kept: its f_locals and f_lineno would be the transformed frame's".into());
        }
    }
    None
}

/// Graph outputs collected while planning rebuilds (deduplicated by node).
#[derive(Default)]
struct Outputs {
    args: Vec<Arg>,
    index: HashMap<crate::graph::NodeId, usize>,
    /// The frame's own cells (cell variables): tracker address -> `localsplus` slot.
    cells: HashMap<usize, u32>,
    /// Objects rebuilt once and reused, by tracker address (Note [shared rebuilds]).
    shared: HashMap<usize, SharedRebuild>,
    /// Temporary locals the shared rebuilds use.
    n_shared: u32,
    /// Cells made anew (Note [cells of inlined calls]) whose contents are still to be stored
    /// (`cell_fills`): the shared temporary holding each, and its tracker.
    cells_to_fill: Vec<(u32, Rc<RefCell<Option<VT>>>)>,
    /// Cells (`localsplus` slot, tracker) that rebuilt functions close over, not yet given
    /// their contents (`own_cell_stores`).
    referenced_cells: Vec<(u32, Rc<RefCell<Option<VT>>>)>,
    /// Set once the hook replays are planned (`plan_hook_replays`).
    hooks_planned: bool,
}

impl Outputs {
    /// The index of `node` among the graph's outputs, adding it on first use.
    fn output_of(&mut self, node: crate::graph::NodeId) -> usize {
        if let Some(k) = self.index.get(&node) {
            return *k;
        }
        self.args.push(Arg::Node(node));
        self.index.insert(node, self.args.len() - 1);
        self.args.len() - 1
    }
}

/// Note [autograd introspection at a break]: a graph that AOTAutograd compiles is one
/// `autograd.Function` to torch: its outputs' `grad_fn` is the compiled backward, which sends
/// every output's gradient straight to the graph's inputs. A tensor the graph computed and also
/// used inside (`y = x * 2; z = y + 1`) is then not on the autograd path of the other outputs
/// (`z`). Where the break is a call that looks at that path for such a tensor, a hook or
/// `retain_grad` on it (`y.register_hook(f)`: the hook missed the gradient through `z`), or
/// `torch.autograd.grad` / `backward` taking it as an input (raised "appears to not have been
/// used in the graph"), the graph runs through torch's own autograd instead (`gm.forward`,
/// `aot_compile`'s eager path), which records every op. Returns the reason, `None` when the
/// break is no such call (the graph compiles as usual).
fn autograd_introspection(py: Python<'_>, og: &OutputGraph, operands: &[VT]) -> Option<String> {
    const HOOKS: [&str; 3] = ["register_hook", "retain_grad", "register_post_accumulate_grad_hook"];
    const GRADS: [&str; 2] = ["torch.autograd.grad", "torch.autograd.backward"];
    // The tensors among the call's operands (and in tuples and lists there).
    fn walk(v: &VT, out: &mut Vec<crate::graph::NodeId>) {
        match v {
            VT::Tuple(items) | VT::NamedTuple { items, .. } => items.iter().for_each(|i| walk(i, out)),
            VT::List(l) => l.borrow().items.iter().for_each(|i| walk(i, out)),
            VT::Tensor(t) => out.push(t.node),
            VT::TensorMethod { tensor, .. } => out.push(tensor.node),
            _ => {}
        }
    }
    let call = operands.iter().find_map(|v| match v {
        VT::TensorMethod { name, .. } if HOOKS.contains(&name.as_str()) => Some(format!("Tensor.{name}")),
        VT::TorchFunction(f) => Some(crate::symbolic::output_graph::qualname_full(f.bind(py))).filter(|n| GRADS.contains(&n.as_str())),
        _ => None,
    })?;
    let mut nodes = Vec::new();
    for v in operands {
        walk(v, &mut nodes);
    }
    let computed_with_grad = nodes.iter().any(|node| {
        !matches!(og.graph.node(*node).op, crate::graph::Op::Placeholder { .. })
            && og.fakes.get(node).is_some_and(|f| f.bind(py).getattr("requires_grad").is_ok_and(|r| r.is_truthy().unwrap_or(false)))
    });
    computed_with_grad.then(|| format!("{call} on a tensor the graph computed: its gradient path must be torch's"))
}

/// Hands the graph (with `outputs`) to the backend unless it has no ops.
///
/// Note [backend grad mode]: the backend is called with grad mode as the graph is entered
/// (`grad_at_entry`, the frame's mode on entry, which the guards fix), as torch's dynamo
/// restores its global state before compiling: the graph's `_set_grad_enabled` nodes switch it
/// from there. Tracing left the real mode as the graph leaves it; that mode is put back after.
#[allow(clippy::type_complexity)]
fn compile_graph(py: Python<'_>, og: &mut OutputGraph, outputs: Outputs, backend: &Bound<'_, PyAny>, grad_at_entry: bool) -> Result<(Option<Py<PyAny>>, Option<Py<PyAny>>, String, usize), ConvertError> {
    og.graph.outputs = outputs.args;
    let only_sym = og.graph.nodes.iter().all(|n| matches!(n.op, crate::graph::Op::Placeholder { .. }) || og.sym_nodes.contains(&n.id));
    og.remove_unused_sym_nodes();
    keep_dead_grad_values(py, og);
    og.remove_unused_tensor_inputs(py);
    let n_ops = og.graph.n_ops();
    if og.shape_env.is_some() && n_ops > 0 && only_sym {
        // Only arithmetic on symbolic numbers: a graph for that would cost more than the
        // recompiles it saves. Trace again with static values.
        return Err(ConvertError::Unsupported(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DynamicShapeGuard, format!("{SHAPE_GUARD_UNSUPPORTED}: the graph holds symbolic number arithmetic only"))));
    }
    if let Some(env) = &og.shape_env {
        // A read of a float input's value makes the conversion start again with its floats as
        // constants (Note [float inputs] in `output_graph.rs`): do not compile this graph first.
        if env.bind(py).getattr("_dynamo_float_read").map(|v| v.is_truthy().unwrap_or(false)).unwrap_or(false) {
            return Err(ConvertError::Unsupported(Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DynamicShapeGuard, format!("{SHAPE_GUARD_UNSUPPORTED}: the trace read the value of a float input"))));
        }
    }
    let graph_text = og.graph.to_string();
    if n_ops == 0 {
        return Ok((None, None, graph_text, 0));
    }
    let gm = og.to_fx(py).map_err(ConvertError::Internal)?;
    if let Some(reason) = &og.eager_autograd {
        // Note [autograd introspection at a break].
        gm.getattr("meta").and_then(|m| m.set_item("dynamo_eager_autograd", reason)).map_err(ConvertError::Internal)?;
    }
    // Note [tensor subclasses]: the backend sees subclass inputs as plain tensors, and so does
    // the compiled graph at run time (`PlainInputs` below).
    let subclass_inputs: Vec<usize> = og.inputs.iter().enumerate().filter(|(_, (_, v))| og.is_tensor(py, v.bind(py)) && !v.bind(py).get_type().is(og.handles.tensor_type.bind(py)) && !v.bind(py).get_type().is(og.handles.parameter_type.bind(py))).map(|(i, _)| i).collect();
    let helpers = py.import("dynamo._subclass").map_err(ConvertError::Internal)?;
    let example_inputs = PyList::empty(py);
    for (i, (_, v)) in og.inputs.iter().enumerate() {
        let v = if subclass_inputs.contains(&i) { helpers.call_method1("plain", (v.bind(py),)).map_err(ConvertError::Internal)? } else { v.bind(py).clone() };
        example_inputs.append(v).map_err(ConvertError::Internal)?;
    }
    let torch = py.import("torch").map_err(ConvertError::Internal)?;
    let grad_after: bool = torch.call_method0("is_grad_enabled").and_then(|g| g.extract()).map_err(ConvertError::Internal)?;
    let set_grad = |g: bool| torch.getattr("_C").and_then(|c| c.call_method1("_set_grad_enabled", (g,))).map(|_| ());
    set_grad(grad_at_entry).map_err(ConvertError::Internal)?;
    let compiled = crate::symbolic::variables::ctx_manager::with_entry_autocast(py, || backend.call1((&gm, example_inputs))).map_err(ConvertError::Internal)?;
    set_grad(grad_after).map_err(ConvertError::Internal)?;
    let compiled = compiled.map_err(ConvertError::Backend)?;
    if !compiled.is_callable() {
        return Err(ConvertError::Backend(pyo3::exceptions::PyTypeError::new_err(format!(
            "backend returned {}, expected a callable",
            crate::symbolic::variables::type_name(&compiled)
        ))));
    }
    // Our own kernels and a GraphModule's forward run no user Python; anything else a backend
    // returns is called with the frame hook off so it is never traced itself.
    // Note [warnings of traced calls] (output_graph.rs): the graph issues the warnings its
    // calls gave while traced, at the user's lines.
    let compiled = if og.trace_warnings.is_empty() {
        compiled
    } else {
        let records = PyList::empty(py);
        for (m, c, f, l, g) in &og.trace_warnings {
            records.append((m.bind(py), c.bind(py), f.as_str(), *l, g.bind(py))).map_err(ConvertError::Internal)?;
        }
        py.import("dynamo.eval_frame").and_then(|m| m.call_method1("_issue_warnings_at", (compiled, records))).map_err(ConvertError::Internal)?
    };
    let is_gm_forward = compiled.getattr("__self__").map(|s| s.is(&gm)).unwrap_or(false);
    let is_ours = crate::symbolic::variables::type_name(&compiled) == "CompiledGraph";
    // A custom autograd.Function's apply (Note [custom autograd.Function]) runs the user's
    // forward inside the graph: with the hook off, as in any other backend.
    let compiled = if (is_gm_forward || is_ours) && !og.calls_user_python {
        compiled
    } else {
        Bound::new(py, crate::eval_frame::hook::RunWithoutHook::new(compiled.unbind())).map_err(ConvertError::Internal)?.into_any()
    };
    let compiled = if subclass_inputs.is_empty() {
        compiled
    } else {
        helpers.getattr("PlainInputs").and_then(|c| c.call1((compiled, PyTuple::new(py, &subclass_inputs)?))).map_err(ConvertError::Internal)?
    };
    Ok((Some(compiled.unbind()), Some(gm.unbind()), graph_text, n_ops))
}

/// Under saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`, active while the frame
/// is traced), eager PyTorch records the autograd graph of every op, also of a value that is
/// then dropped (`fn(x)` whose result is unused), and the pack hook sees each tensor saved for
/// backward. A graph computes only what its outputs need, so a dropped value that requires grad
/// is made an extra output (discarded by the transformed code): the backend then builds its
/// autograd graph, and the hooks see what that saves.
///
/// A graph with values that require grad is therefore guarded on whether such hooks are active
/// (`dynamo.aot.saved_tensors_hooks_active`): one traced without them lacks the dead values'
/// autograd graphs, one traced with them computes values eager would drop.
fn keep_dead_grad_values(py: Python<'_>, og: &mut OutputGraph) {
    if !og.graph.nodes.iter().any(|n| n.meta.as_ref().is_some_and(|m| m.requires_grad)) {
        return;
    }
    let Ok(query) = py.import("dynamo.aot").and_then(|m| m.getattr("saved_tensors_hooks_active")) else { return };
    let Ok(active) = query.call0() else { return };
    let hooks_active = active.is_truthy().unwrap_or(false);
    og.add_guard(None, GuardKind::GlobalQuery { func: query.unbind(), args: pyo3::types::PyTuple::empty(py).unbind(), expected: active.unbind() });
    if !hooks_active {
        return;
    }
    let graph = &mut og.graph;
    fn mark(a: &Arg, used: &mut [bool]) {
        match a {
            Arg::Node(n) => used[n.0 as usize] = true,
            Arg::Tuple(items) | Arg::List(items) => items.iter().for_each(|i| mark(i, used)),
            Arg::Const(..) => {}
        }
    }
    let mut used = vec![false; graph.nodes.len()];
    for n in &graph.nodes {
        n.args.iter().chain(n.kwargs.iter().map(|(_, a)| a)).for_each(|a| mark(a, &mut used));
    }
    graph.outputs.iter().for_each(|a| mark(a, &mut used));
    let dead: Vec<Arg> = graph
        .nodes
        .iter()
        .filter(|n| !used[n.id.0 as usize] && !matches!(n.op, crate::graph::Op::Placeholder { .. }) && n.meta.as_ref().is_some_and(|m| m.requires_grad))
        .map(|n| Arg::Node(n.id))
        .collect();
    graph.outputs.extend(dead);
}

/// Builds the code for a frame that breaks: graph up to the break, the instruction itself, and
/// resume functions.
fn convert_break(
    py: Python<'_>,
    frame: &FrameInput<'_>,
    ci: &Arc<CodeInfo>,
    mut og: OutputGraph,
    state: BreakState,
    reason: String,
    kind: crate::symbolic::graph_break::GraphBreakKind,
    backend: &Bound<'_, PyAny>,
    grad_at_entry: bool,
) -> Result<Converted, ConvertError> {
    check_dropped_generators(&og)?;
    if let Some(why) = needs_the_real_frame(py, ci, &og, &state) {
        graph_break!(UnresumableBreak, "{why}");
    }
    let inst = ci.insts[state.ip].clone();
    let (n_operands, n_pushed) = break_operands(&inst).expect("checked by can_break");
    if state.stack.len() < n_operands {
        graph_break!(UnresumableBreak, "graph break with a short stack");
    }
    // How many times each container built in the frame is reached from what outlives the graph.
    let reach = check_no_shared_containers(py, &state, ci, &og)?;
    let mut outputs = Outputs::default();
    mark_shared(&mut outputs, &reach);
    let hook_replays = plan_hook_replays(py, &og, &mut outputs)?;
    let mut locals = Vec::new();
    let mut unbound = Vec::new();
    // Only locals some continuation may still read travel to the resume function; dead ones
    // (stale stack slots of earlier resume functions among them) are left unbound.
    let continuations = live_points(&inst, state.ip);
    // Note [cells across a graph break]: the frame's cells are never rebuilt. A function made
    // before the break shares them with the code after it, so the transformed code gives the
    // real cells (made by its prologue, or received made) the contents the trace left in them,
    // and the resume function receives the cells themselves (pycodegen::resume).
    map_frame_cells(&state.locals, &mut outputs);
    for (i, v) in state.locals.iter().enumerate().take(ci.first_free_slot()) {
        if let Some(VT::Cell(rc)) = v {
            outputs.referenced_cells.push((i as u32, rc.clone()));
        }
    }
    // Note [resume call lifetimes] (src/eval_frame/hook.rs): a dead local holding a user object
    // travels too, so that the object dies where eager frees it (a rebinding or `del` after the
    // break, else the return), not at the break; one that cannot be rebuilt is left behind.
    // Dead tensors and other values do not (as in torch's Dynamo: a dead tensor would have to
    // become a graph output). A dead argument the trace left as it came (`kept`) stays in the
    // transformed frame's slot until it returns; other dead slots are emptied before the
    // breaking instruction runs.
    let own_input = |i: usize, v: &VT| -> bool {
        let src = match v {
            VT::Opaque { source, .. } => Some(source),
            VT::Tensor(t) => t.source.as_ref(),
            VT::Module { source, .. } | VT::Function { source, .. } | VT::PyModule { source, .. } => source.as_ref(),
            _ => None,
        };
        src.is_some_and(|s| matches!(&**s, Source::Local { idx, .. } if *idx as usize == i))
    };
    let mut lifetime_only = Vec::new();
    let mut kept = Vec::new();
    // A break at `del x` (a user object, or `x` unbound): `x` is unbound from here on.
    // A break at the rebinding of such a local: its old value goes into the slot (when it can be
    // rebuilt) for the instruction to replace, and the resume function gets the new one.
    let deleted = (inst.opcode == crate::bytecode::opcode::op::DELETE_FAST).then_some(inst.arg as usize);
    let stored = (inst.opcode == crate::bytecode::opcode::op::STORE_FAST).then_some(inst.arg as usize);
    for i in 0..ci.varnames.len() {
        let live = continuations.iter().any(|&t| ci.live.get(t).is_some_and(|l| l[i]));
        if deleted == Some(i) {
            // Bound: rebuilt into its slot for the instruction to delete; unbound: the slot is
            // emptied and the instruction raises UnboundLocalError, as in eager. The resume
            // function gets it unbound either way.
            if let Some(v) = &state.locals[i] {
                locals.push((i as u32, rebuild_of(py, &og, v, &mut outputs)?));
            }
            unbound.push(i as u32);
            continue;
        }
        if stored == Some(i) {
            if let Some(old @ (VT::Opaque { .. } | VT::UserObject(_))) = &state.locals[i] {
                if let Ok(r) = rebuild_of(py, &og, old, &mut outputs) {
                    locals.push((i as u32, r));
                }
            }
            continue;
        }
        match &state.locals[i] {
            // An argument that is a cell: passed as its cell.
            Some(VT::Cell(_)) => {}
            Some(v) if live => locals.push((i as u32, rebuild_of(py, &og, v, &mut outputs)?)),
            Some(v @ (VT::Opaque { .. } | VT::UserObject(_))) => lifetime_only.push((i as u32, v)),
            // Note [observable frees] (translator.rs): a dead container holding such an object
            // travels too; at a break for an object's lifetime (a weak reference made, a free
            // that may be observed) so does every dead tensor, which eager keeps until the
            // return (a weak reference to it stays alive).
            Some(v) if crate::symbolic::translator::lifetime_observable(py, v) => lifetime_only.push((i as u32, v)),
            Some(v @ VT::Tensor(_)) if kind == crate::symbolic::graph_break::GraphBreakKind::ObjectLifetime => lifetime_only.push((i as u32, v)),
            Some(v) => {
                unbound.push(i as u32);
                if own_input(i, v) {
                    kept.push(i as u32);
                }
            }
            None => unbound.push(i as u32),
        }
    }
    for (i, v) in lifetime_only {
        match rebuild_of(py, &og, v, &mut outputs) {
            Ok(r) => locals.push((i, r)),
            Err(_) => {
                unbound.push(i);
                if own_input(i as usize, v) {
                    kept.push(i);
                }
            }
        }
    }
    let split = state.stack.len() - n_operands;
    let slot = |v: &VT, outputs: &mut Outputs| -> VResult<Option<Rebuild>> {
        if v.is_null() {
            Ok(None)
        } else {
            rebuild_of(py, &og, v, outputs).map(Some)
        }
    };
    // Note [loop iterators as snapshots]: an iterator below the operands is the iterator of an
    // enclosing `for` loop, which only FOR_ITER reads. When it walks fixed sequences only (a
    // range, a tuple, a ModuleList's children, enumerate/zip of those), nothing can change what
    // it yields, so it travels as the tuple of its remaining items and the resume function loops
    // over that (its frame can be traced; a real enumerate or zip object could not).
    // Only a slot a `FOR_ITER` around this instruction reads is a loop iterator: an iterator
    // on the stack for another reason (an item of a list display being built, an argument of a
    // call) is a value the code will see, and keeps its type (`list_iterator`).
    let loop_slots = loop_iterator_slots(&ci.insts, state.ip);
    let mut preserved = state.stack[..split]
        .iter()
        .enumerate()
        .map(|(k, v)| (k, v))
        .map(|(k, v)| match v {
            VT::Iterator(_) if !loop_slots.contains(&k) => slot(v, &mut outputs),
            // A loop iterator reached only from its loop (a shared one is passed as itself).
            // An iterator from outside the frame is handed over as itself (Note [iterators from
            // outside the frame]): the resume function's steps advance the caller's.
            VT::Iterator(it) if og.side_effects.external_iter_source(it).is_some() => slot(v, &mut outputs),
            VT::Iterator(it) if reach.get(&(Rc::as_ptr(it) as *const () as usize)).is_none_or(|&n| n <= 1) => match fixed_remaining(py, &og, it, &reach)? {
                // Literals only (a range, a tuple of numbers): the resume function receives a
                // tuple iterator, so one resume function serves every iteration (Note [items of
                // iterators from outside the frame] in `builder.rs`); a tuple would be guarded
                // by its length and items, which change at each iteration.
                Some(items) if items.iter().all(|i| matches!(i, VT::Constant(c) if crate::symbolic::builder::is_literal(py, c.bind(py)))) => {
                    let iter = py.import("builtins")?.getattr("iter")?.unbind();
                    Ok(Some(Rebuild::Call { func: iter, args: vec![Rebuild::Tuple(items.iter().map(|i| rebuild_of(py, &og, i, &mut outputs)).collect::<VResult<_>>()?)] }))
                }
                Some(items) => Ok(Some(Rebuild::Iterator(items.iter().map(|i| rebuild_of(py, &og, i, &mut outputs)).collect::<VResult<_>>()?))),
                None => slot(v, &mut outputs),
            },
            _ => slot(v, &mut outputs),
        })
        .collect::<VResult<Vec<_>>>()?;
    let mut inst = inst;
    let mut null_on_top = false;
    if inst.opcode == crate::bytecode::opcode::op::LOAD_METHOD {
        // Run it as LOAD_ATTR (the bound method); the resume function pushes the NULL of the
        // `[bound, NULL]` form: below the bound method on 3.11/3.12 (LOAD_METHOD pushes
        // `[NULL, bound]`), above it on 3.13 (LOAD_ATTR with the method bit pushes
        // `[bound, NULL]`), after the results the resume function takes.
        inst.opcode = crate::bytecode::opcode::op::LOAD_ATTR;
        if crate::bytecode::PyVersion::CURRENT.null_after_callable() {
            null_on_top = true;
        } else {
            preserved.push(None);
        }
    }
    if inst.opcode == crate::bytecode::opcode::op::FOR_ITER && inst.exn.is_some_and(|e| crate::pycodegen::loop_body::comprehension_cleanup(ci, e.handler.index())) {
        // A 3.12+ comprehension's cleanup only restores the locals of a frame the exception
        // then leaves: the loop driver need not keep it (Note [comprehension loops in a
        // driver]).
        inst.exn = None;
    }
    if let Some(exn) = inst.exn {
        // Note [protected breaks]: the handler needs the stack below its depth. A NULL there
        // (an inlined comprehension's saved loop variable on 3.12+) is pushed and dropped as a
        // NULL, except by a loop driver (a break at a FOR_ITER).
        let depth = exn.depth as usize;
        let for_iter = inst.opcode == crate::bytecode::opcode::op::FOR_ITER;
        if depth > preserved.len() || (for_iter && preserved[..depth].iter().any(|p| p.is_none())) {
            graph_break!(UnresumableBreak, "graph break at a loop inside a try/with block or a comprehension (CPython 3.12+ inlines comprehensions) opened in the middle of a call");
        }
    }
    let operands = state.stack[split..].iter().map(|v| slot(v, &mut outputs)).collect::<VResult<Vec<_>>>()?;
    // Results on the fall-through path only (FOR_ITER's iterator and item).
    let (targets, n_results) = (successors(&inst, state.ip), n_pushed);
    // Note [loop bodies as functions] (pycodegen::loop_body): the loop runs in a driver.
    let loop_driver = if inst.opcode == crate::bytecode::opcode::op::FOR_ITER && kind != crate::symbolic::graph_break::GraphBreakKind::RaisesException {
        let (oci, head) = crate::pycodegen::resume::original_target(py, ci, state.ip).unwrap_or_else(|| (ci.clone(), state.ip));
        let Some(shape) = crate::pycodegen::loop_body::loop_shape(&oci, head) else { graph_break!(UnresumableBreak, "for loop whose body cannot become a function") };
        let n_pass = oci.varnames.len() as u32;
        let bound: Vec<u32> = (0..n_pass).filter(|v| !unbound.contains(v)).collect();
        let layout: Vec<crate::pycodegen::resume::StackSlot> = preserved
            .iter()
            .map(|p| match p {
                None => crate::pycodegen::resume::StackSlot::Null,
                Some(Rebuild::Iterator(_)) => crate::pycodegen::resume::StackSlot::Iter,
                Some(_) => crate::pycodegen::resume::StackSlot::Value,
            })
            .collect();
        let globals = frame.globals.clone().into_any().unbind();
        match crate::pycodegen::loop_body::make_driver(py, &oci, shape, &bound, &layout, &globals).map_err(ConvertError::Internal)? {
            Some(d) => Some((d, n_pass)),
            None => graph_break!(UnresumableBreak, "for loop whose body cannot become a function"),
        }
    } else {
        None
    };
    let mut effects = hook_replays;
    effects.extend(plan_side_effects(py, &og, &mut outputs)?);
    effects.extend(own_cell_stores(py, &og, ci, &mut outputs)?);
    effects.extend(cell_fills(py, &og, &mut outputs)?);
    let n_shared = outputs.n_shared;
    og.eager_autograd = autograd_introspection(py, &og, &state.stack[split..]);
    let (compiled, graph_module, graph_text, n_ops) = compile_graph(py, &mut og, outputs, backend, grad_at_entry)?;
    let inputs: Vec<Arc<Source>> = og.inputs.iter().map(|(s, _)| s.clone()).collect();
    let plan = BreakPlan {
        loop_driver,
        n_shared,
        effects,
        rerun_on_failure: rerun_on_failure(&og, grad_at_entry),
        compiled_fn: compiled,
        inputs: &inputs,
        locals,
        unbound,
        kept,
        preserved,
        operands,
        inst,
        kw_names: state.kw_names.map(|k| k.into_any()),
        n_results,
        null_on_top,
        targets,
        globals: frame.globals.clone().into_any().unbind(),
    };
    let code = break_code(py, ci, plan).map_err(ConvertError::Internal)?;
    og.add_alias_guards();
    og.add_version_guards();
    og.add_iterator_guards();
    if let Some(g) = og.shape_guard(py)? {
        og.guards.push(g);
    }
    let guards = GuardManager::new(py, std::mem::take(&mut og.guards)).map_err(ConvertError::Internal)?;
    Ok(Converted { code, guards, graph_text, n_ops, graph_module, graph_break: Some(reason), dim_state: std::mem::take(&mut og.dim_state), symbolic: og.shape_env.is_some(), static_only: false })
}

/// The side effects recorded while tracing, as replay steps whose values are rebuilt from the
/// graph's outputs, constants and sources. All operands are loaded before any store (Note [side
/// effect replay]) and the stores pop them last first, so the steps are listed (and their values
/// planned, in emission order) in reverse: the stores then run container contents, attributes,
/// cells, globals, each in first-write order (new attributes enter `__dict__` in eager's order).
fn plan_side_effects(py: Python<'_>, og: &OutputGraph, outputs: &mut Outputs) -> VResult<Vec<SideEffect>> {
    let mut out = plan_hook_replays(py, og, outputs)?;
    out.extend(plan_writes(py, og, outputs)?);
    Ok(out)
}

/// Note [hooks registered in the trace] (`symbolic::variables::hooks`): the replays of the
/// hooks the trace registered, planned before anything else of the transformed code (the values
/// that outlive the graph included) because they run first, right after the graph: each real
/// handle is kept in a shared temporary, which is what a `VT::HookHandle` that outlives the
/// graph (returned, live at a break) is rebuilt as. Idempotent: the second call plans nothing.
fn plan_hook_replays(py: Python<'_>, og: &OutputGraph, outputs: &mut Outputs) -> VResult<Vec<SideEffect>> {
    if outputs.hooks_planned {
        return Ok(Vec::new());
    }
    outputs.hooks_planned = true;
    let mut out = Vec::new();
    for h_rc in &og.side_effects.hooks {
        let h = h_rc.borrow();
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("prepend", h.prepend)?;
        kwargs.set_item("with_kwargs", h.with_kwargs)?;
        if !h.pre {
            kwargs.set_item("always_call", h.always_call)?;
        }
        let hook = rebuild_of(py, og, &h.hook, outputs)?;
        let handle_slot = outputs.n_shared;
        outputs.n_shared += 1;
        outputs.shared.insert(Rc::as_ptr(h_rc) as *const () as usize, SharedRebuild::Done(handle_slot));
        out.push(SideEffect::ReplayHook { module: h.module_source.clone(), method: h.method().to_string(), hook, kwargs: kwargs.into_any().unbind(), removed: h.removed, handle_slot });
    }
    Ok(out)
}

/// The writes of `plan_side_effects` (everything but the hook replays).
fn plan_writes(py: Python<'_>, og: &OutputGraph, outputs: &mut Outputs) -> VResult<Vec<SideEffect>> {
    let se = &og.side_effects;
    let mut out = Vec::with_capacity(se.len());
    for w in se.globals.iter().rev() {
        let value = rebuild_of(py, og, &w.value, outputs)?;
        out.push(match &w.dict_source {
            None => SideEffect::SetGlobal { name: w.name.clone(), value },
            Some(src) => SideEffect::SetItem { target: src.clone(), key: pyo3::types::PyString::new(py, &w.name).into_any().unbind(), value },
        });
    }
    for (target, cell) in se.cells.iter().rev() {
        let Some(v) = cell.borrow().clone() else { graph_break!(UnreconstructableValue, "a cell emptied while tracing") };
        let value = rebuild_of(py, og, &v, outputs)?;
        out.push(match target {
            crate::symbolic::side_effects::CellTarget::FrameFree(slot) | crate::symbolic::side_effects::CellTarget::FrameCell(slot) => SideEffect::SetDeref { slot: *slot, value },
            crate::symbolic::side_effects::CellTarget::Object(src) => SideEffect::SetAttr { target: src.clone(), name: "cell_contents".into(), value },
            crate::symbolic::side_effects::CellTarget::Unknown => graph_break!(SideEffect, "write to an unreachable closure cell"),
        });
    }
    for w in se.attrs.iter().rev() {
        let value = rebuild_of(py, og, &w.value, outputs)?;
        out.push(if w.generic {
            SideEffect::GenericSetAttr { target: w.source.clone(), name: w.name.clone(), value }
        } else {
            SideEffect::SetAttr { target: w.source.clone(), name: w.name.clone(), value }
        });
    }
    // A dict iterator is advanced before any write is replayed (`before_writes`): CPython checks
    // the dict's size at every step, and the steps the trace took happened before any size
    // change the trace allowed (one during the walk raised in the trace), so stepping it after
    // a replayed `d.pop(...)` would raise where eager did not. List iterators are advanced after
    // the writes, since they read the list's items live.
    let is_dict_iter = |e: &crate::symbolic::side_effects::ExternalIter| {
        matches!(type_name(e.obj.bind(py)).as_str(), "dict_keyiterator" | "dict_valueiterator" | "dict_itemiterator")
    };
    for d in se.dicts.iter().rev() {
        // Note [dict subclass objects from outside the frame]: a subclass instance's storage.
        let storage = og.dict_storages_by_ptr.values().any(|(_, st)| Rc::ptr_eq(st, d));
        let d = d.borrow();
        let Some(target) = d.source.clone() else { continue };
        let items = dict_rebuild(py, og, &d.items, &mut |v| rebuild_of(py, og, v, outputs))?;
        // Note [dict rewrites keep the layout]: the trace's key changes, replayed in order;
        // not when a key is a traced stand-in (a tensor key), which the replay cannot name.
        let key_ops = match &d.key_ops {
            Some(ops) if !ops.is_empty() && !ops.iter().any(|(_, k)| crate::symbolic::variables::dicts::is_traced_key(k.bind(py))) => {
                let ops = ops.iter().map(|(op, k)| pyo3::types::PyTuple::new(py, [op.into_pyobject(py)?.into_any(), k.bind(py).clone()])).collect::<PyResult<Vec<_>>>()?;
                Some(pyo3::types::PyTuple::new(py, ops)?.into_any().unbind())
            }
            _ => None,
        };
        out.push(if storage { SideEffect::DictStorageContents { target, items, key_ops } } else { SideEffect::DictContents { target, items, key_ops } });
    }
    for l in se.lists.iter().rev() {
        let l = l.borrow();
        let Some(target) = l.source.clone() else { continue };
        let items = l.items.iter().map(|v| rebuild_of(py, og, v, outputs)).collect::<VResult<_>>()?;
        out.push(if l.deque.is_some() {
            SideEffect::DequeContents { target, items: Rebuild::List(items) }
        } else if l.subclass_storage {
            SideEffect::ListStorageContents { target, items: Rebuild::List(items) }
        } else if l.append_only {
            SideEffect::ListExtend { target, items: Rebuild::List(items) }
        } else {
            SideEffect::ListContents { target, items: Rebuild::List(items) }
        });
    }
    // Note [iterators from outside the frame] (side_effects): after the contents of the
    // containers they may walk are in place.
    for e in &se.external_iters {
        let steps = e.steps();
        if steps > 0 {
            out.push(SideEffect::AdvanceIter { target: e.source.clone(), steps, before_writes: is_dict_iter(e) });
        }
    }
    // Note [logger calls]: a logging call replays after every write of the trace; one followed
    // by writes would show them to a user's handler, which eager runs before them. The frame
    // breaks at the first such call instead (Note [breaking where a failure points]); the calls
    // before it have no writes after them up to there. The standard library's and pytest's
    // handlers read only the record (`reorderable`); an lru_cache'd call replays a pure body.
    if let Some(c) = se.logger_calls.iter().find(|c| !c.reorderable && c.writes_before < se.writes) {
        return Err(Unsupported {
            break_at: Some(c.at),
            ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::SideEffect, "a logging call followed by writes its handlers could see")
        });
    }
    for c in &se.logger_calls {
        out.push(SideEffect::CallMethod {
            method: c.callee.clone_ref(py),
            args: c.args.clone_ref(py),
            kwargs: c.kwargs.as_ref().map(|k| k.clone_ref(py)),
            arg_rebuilds: c.lazy_args.as_ref().map(|rs| rs.iter().map(|r| r.rebuild(py, &mut |n| outputs.output_of(n))).collect()),
        });
    }
    Ok(out)
}

/// How many times each object created during tracing is reachable from the live state at the
/// break (`check_rebuilt_once`).
fn check_no_shared_containers(py: Python<'_>, state: &BreakState, ci: &CodeInfo, og: &OutputGraph) -> VResult<HashMap<usize, usize>> {
    let inst = &ci.insts[state.ip];
    let targets = live_points(inst, state.ip);
    // Cells (arguments among them) are always live: functions made in the frame may read them.
    let live_locals = state.locals.iter().enumerate().filter(|(i, v)| {
        *i >= ci.varnames.len()
            || matches!(v, Some(VT::Cell(_)))
            // Dead user objects travel too (Note [resume call lifetimes]): one rebuild each.
            || matches!(v, Some(VT::Opaque { .. } | VT::UserObject(_)))
            // So do dead containers holding such objects (Note [observable frees]).
            || v.as_ref().is_some_and(|v| crate::symbolic::translator::lifetime_observable(py, v))
            || targets.iter().any(|&t| ci.live.get(t).is_some_and(|l| l[*i]))
    });
    let roots: Vec<VT> = state.stack.iter().chain(live_locals.filter_map(|(_, v)| v.as_ref())).cloned().collect();
    check_rebuilt_once(py, roots.iter().chain(effect_values(og).iter()))
}

/// The values side effects will store (they are rebuilt like live values).
fn effect_values(og: &OutputGraph) -> Vec<VT> {
    let se = &og.side_effects;
    let mut v: Vec<VT> = se.hooks.iter().map(|h| h.borrow().hook.clone()).collect();
    v.extend(se.attrs.iter().map(|w| w.value.clone()));
    v.extend(se.globals.iter().map(|w| w.value.clone()));
    for l in &se.lists {
        v.extend(l.borrow().items.iter().cloned());
    }
    for d in &se.dicts {
        v.extend(d.borrow().items.iter().map(|(_, x)| x.clone()));
    }
    // As cells, so that a cell also live in a frame slot is walked once (`check_rebuilt_once`).
    for (_, c) in &se.cells {
        v.push(VT::Cell(c.clone()));
    }
    v
}

/// How many times each list, dict, set, iterator, user object or function built during tracing
/// is reachable from `roots` (by tracker address). One reached more than once is rebuilt once
/// and reused (Note [shared rebuilds]). Refuses only an iterator over a list from outside the
/// frame that is reachable twice together with its list.
fn check_rebuilt_once<'v>(py: Python<'_>, roots: impl Iterator<Item = &'v VT>) -> VResult<HashMap<usize, usize>> {
    // Counts a reach of the object at `ptr`; true on the first one only (a second reach is
    // refused anyway, and a container that holds itself is not walked forever).
    fn first_reach(seen: &mut HashMap<usize, usize>, ptr: usize) -> bool {
        let n = seen.entry(ptr).or_insert(0);
        *n += 1;
        *n == 1
    }
    fn visit(py: Python<'_>, v: &VT, seen: &mut HashMap<usize, usize>) {
        match v {
            // A list subclass object's storage stands for the object (Note [list subclass
            // objects]).
            VT::List(_) if storage_owner(v).is_some() => visit(py, &VT::UserObject(storage_owner(v).expect("checked")), seen),
            // Note [instance dicts of new objects].
            VT::Dict(_) if instance_dict_owner(v).is_some() => visit(py, &VT::UserObject(instance_dict_owner(v).expect("checked")), seen),
            VT::List(l) if l.borrow().source.is_none() => {
                if !first_reach(seen, Rc::as_ptr(l) as *const () as usize) {
                    return;
                }
                for i in &l.borrow().items {
                    visit(py, i, seen);
                }
            }
            VT::Deque(l) if l.borrow().source.is_none() => {
                if !first_reach(seen, Rc::as_ptr(l) as *const () as usize) {
                    return;
                }
                for i in &l.borrow().items {
                    visit(py, i, seen);
                }
            }
            VT::Set(set) => {
                *seen.entry(Rc::as_ptr(set) as *const () as usize).or_insert(0) += 1;
            }
            VT::Dict(d) if d.borrow().source.is_none() => {
                if !first_reach(seen, Rc::as_ptr(d) as *const () as usize) {
                    return;
                }
                for (_, i) in &d.borrow().items {
                    visit(py, i, seen);
                }
            }
            // A tuple built in the frame is one object too (`l[0] is t`).
            VT::Tuple(items) | VT::NamedTuple { items, .. } => {
                if first_reach(seen, Rc::as_ptr(items) as *const () as usize) {
                    items.iter().for_each(|i| visit(py, i, seen));
                }
            }
            // A view is rebuilt from its dict.
            VT::DictView { dict, .. } => visit(py, &VT::Dict(dict.clone()), seen),
            // An iterator is stateful too: two rebuilds would advance independently.
            VT::Iterator(it) => {
                if !first_reach(seen, Rc::as_ptr(it) as *const () as usize) {
                    return;
                }
                match &it.borrow().kind {
                    IterKind::Items(items) => items.iter().skip(it.borrow().pos).for_each(|i| visit(py, i, seen)),
                    // Counted even when the list came from the frame (then it is not rebuilt, but
                    // the iterator and the list stay one pair only through one path).
                    IterKind::List(l) | IterKind::ListReversed { list: l, .. } => {
                        if let Some(owner) = l.borrow().owner.as_ref().and_then(|w| w.upgrade()) {
                            // Over a list subclass object's storage: rebuilt over the object.
                            visit(py, &VT::UserObject(owner), seen);
                        } else if l.borrow().source.is_none() {
                            visit(py, &VT::List(l.clone()), seen);
                        } else {
                            // Not rebuilt; tagged so that a second reach is refused.
                            *seen.entry(Rc::as_ptr(l) as *const () as usize | SOURCED_LIST_TAG).or_insert(0) += 1;
                        }
                    }
                    IterKind::Dict { dict, .. } => visit(py, &VT::Dict(dict.clone()), seen),
                    IterKind::Set { set, .. } => visit(py, &VT::Set(set.clone()), seen),
                    IterKind::Deque { list, .. } => {
                        if list.borrow().source.is_none() {
                            visit(py, &VT::Deque(list.clone()), seen);
                        } else {
                            *seen.entry(Rc::as_ptr(list) as *const () as usize | SOURCED_LIST_TAG).or_insert(0) += 1;
                        }
                    }
                    IterKind::Enumerate { inner, .. } => visit(py, &VT::Iterator(inner.clone()), seen),
                    IterKind::Zip(inners, _) => inners.iter().for_each(|i| visit(py, &VT::Iterator(i.clone()), seen)),
                    IterKind::Generator(_) => {}
                    IterKind::UserNext(obj) => visit(py, obj, seen),
                    IterKind::Map { func, inners } => {
                        visit(py, func, seen);
                        inners.iter().for_each(|i| visit(py, &VT::Iterator(i.clone()), seen));
                    }
                    IterKind::Filter { func, inner } => {
                        if let Some(f) = func {
                            visit(py, f, seen);
                        }
                        visit(py, &VT::Iterator(inner.clone()), seen);
                    }
                    IterKind::Chain { pending, active, outer } => {
                        if let Some(a) = active {
                            visit(py, &VT::Iterator(a.clone()), seen);
                        }
                        if let Some(o) = outer {
                            visit(py, &VT::Iterator(o.clone()), seen);
                        }
                        pending.iter().for_each(|p| visit(py, p, seen));
                    }
                    IterKind::Islice { inner, .. } => visit(py, &VT::Iterator(inner.clone()), seen),
                    // Not rebuilt (`rebuild_iter` refuses them).
                    IterKind::Accumulate { .. } | IterKind::ZipLongest { .. } | IterKind::Starmap { .. } | IterKind::TakeWhile { .. }
                    | IterKind::DropWhile { .. } | IterKind::FilterFalse { .. } | IterKind::Pairwise { .. } | IterKind::Count { .. }
                    | IterKind::Cycle { .. } | IterKind::Repeat { .. } | IterKind::Compress { .. }
                    | IterKind::GroupBy(_) | IterKind::Grouper { .. } | IterKind::Tee { .. } => {}
                    // Only ever an iterator from outside the frame (reloaded from its source).
                    IterKind::Peek { .. } => {}
                    IterKind::DictReversed { dict, .. } => visit(py, &VT::Dict(dict.clone()), seen),
                }
            }
            // Note [generator context managers across a break]: made again from its arguments.
            VT::GeneratorCtx(ctx) => {
                if !first_reach(seen, Rc::as_ptr(ctx) as *const () as usize) {
                    return;
                }
                if let Some((_, args, kwargs)) = &ctx.borrow().remake {
                    args.iter().for_each(|a| visit(py, a, seen));
                    kwargs.iter().for_each(|(_, v)| visit(py, v, seen));
                }
            }
            VT::ContainerMethod { container, .. } => match storage_owner(container) {
                Some(owner) => visit(py, &VT::UserObject(owner), seen),
                None => visit(py, container, seen),
            },
            // A module made in the trace is rebuilt by constructing it again.
            VT::Module { obj, source: None } => {
                first_reach(seen, obj.as_ptr() as usize);
            }
            VT::UserObject(o) => {
                if !first_reach(seen, Rc::as_ptr(o) as *const () as usize) {
                    return;
                }
                // The instance dict counts as reached (`o.__dict__` may outlive the graph too);
                // an attribute that is the storage's value under its key is one reach.
                if first_reach(seen, Rc::as_ptr(&o.attrs) as *const () as usize) {
                    for (k, v) in &o.attrs.borrow().items {
                        if !o.attr_aliases_storage(py, k.bind(py), v) {
                            visit(py, v, seen);
                        }
                    }
                }
                if let Some(storage) = &o.storage {
                    visit(py, &VT::Dict(storage.clone()), seen);
                }
                // The list storage is rebuilt inside the object, never on its own (Note [list
                // subclass objects]): its items are the object's reaches.
                if let Some(list) = &o.list {
                    list.borrow().items.iter().for_each(|i| visit(py, i, seen));
                }
            }
            // A function made in the frame: each rebuild would be a new function object
            // (`f is g` and attributes set on it would differ from eager).
            VT::NestedFunction(nf) => {
                if !first_reach(seen, Rc::as_ptr(nf) as *const () as usize) {
                    return;
                }
                nf.defaults.iter().for_each(|d| visit(py, d, seen));
                nf.closure.iter().for_each(|c| visit(py, c, seen));
                nf.attrs.borrow().iter().for_each(|(_, v)| visit(py, v, seen));
            }
            // A cell (a function's closure, or a frame slot): its contents once.
            VT::Cell(c) => {
                if !first_reach(seen, Rc::as_ptr(c) as *const () as usize) {
                    return;
                }
                if let Some(inner) = c.borrow().as_ref() {
                    visit(py, inner, seen);
                }
            }
            VT::Constant(c) if is_exception(c) => {
                first_reach(seen, c.as_ptr() as usize);
            }
            VT::Partial(p) => {
                visit(py, &p.func, seen);
                p.args.iter().for_each(|a| visit(py, a, seen));
                visit(py, &p.keywords, seen);
            }
            // A bound method of an object made in the frame (`o.m` on the stack while `o` is a
            // local): one object, so one rebuild (breaker5 34: `WeakMethod(o.m)` saw a copy).
            VT::Method { func, self_ } => {
                visit(py, func, seen);
                visit(py, self_, seen);
            }
            _ => {}
        }
    }
    let mut seen = HashMap::new();
    for v in roots {
        // Locals that are cells hold their tracker inside the cell (walked once per cell).
        visit(py, v, &mut seen);
    }
    if seen.iter().any(|(&p, &n)| n > 1 && p & SOURCED_LIST_TAG != 0) {
        graph_break!(UnreconstructableValue, "a list the frame received, reached twice through its iterators");
    }
    Ok(seen)
}

/// Marks a reach count in `check_rebuilt_once` as one of a list from outside the frame (tracker
/// addresses are aligned, so the low bit is free).
const SOURCED_LIST_TAG: usize = 1;

/// Note [shared rebuilds]: an object built during tracing that is reachable more than once from
/// what outlives the graph (a list that is returned and stored in an attribute, a function kept
/// in a local and in a dict) must come back as one object. `rebuild_of` gives its first rebuild
/// a temporary local (`Rebuild::Shared`) and later ones a load of it (`Rebuild::SharedRef`).
/// Sound because the transformed code emits rebuilds in the order `rebuild_of` made them (live
/// values, then side effects, then cell contents), depth first, so the store runs before every
/// load. A shared list, dict or user object built in the frame may contain itself: it is made
/// empty and stored first, then filled (`Rebuild::SharedCyclic`, `cyclic_parts`), so the inner
/// reach loads the finished temporary. Other kinds that contain themselves (an iterator over
/// itself, a function whose cell holds it) are refused: their first rebuild is not finished when
/// the inner reach loads it.
fn shared_key(vt: &VT) -> Option<usize> {
    Some(match vt {
        // Exception objects are made anew per run (`rebuild_fresh`).
        VT::Constant(c) if is_exception(c) => c.as_ptr() as usize,
        VT::Tuple(items) | VT::NamedTuple { items, .. } if !items.is_empty() => Rc::as_ptr(items) as *const () as usize,
        VT::List(l) | VT::Deque(l) if l.borrow().source.is_none() => Rc::as_ptr(l) as *const () as usize,
        VT::Dict(d) if d.borrow().source.is_none() => Rc::as_ptr(d) as *const () as usize,
        VT::Set(set) => Rc::as_ptr(set) as *const () as usize,
        VT::Iterator(it) => Rc::as_ptr(it) as *const () as usize,
        VT::UserObject(o) => Rc::as_ptr(o) as *const () as usize,
        // The real handle of a hook registered in the trace, kept by its replay (Note [hooks
        // registered in the trace]).
        VT::HookHandle(h) => Rc::as_ptr(h) as *const () as usize,
        // A `@contextmanager` manager made again (Note [generator context managers across a
        // break]): once, however many values reach it.
        VT::GeneratorCtx(ctx) => Rc::as_ptr(ctx) as *const () as usize,
        VT::NestedFunction(nf) => Rc::as_ptr(nf) as *const () as usize,
        VT::Cell(c) => Rc::as_ptr(c) as *const () as usize,
        // A torch module made in the trace is constructed again once, however many live values
        // reach it (a local and the bound method `d.eval` on the stack at a break).
        VT::Module { obj, source: None } => obj.as_ptr() as usize,
        _ => return None,
    })
}

/// Note [instance dicts of new objects]: `vars(o)` / `o.__dict__` of a user object built in the
/// frame is the tracker of its attributes (`UserObject::attrs`). Where both outlive the graph (a
/// local `d = vars(o)` across a break, `return o, vars(o)`), the dict is `o.__dict__` of the
/// rebuilt object, so writes through either are seen through the other, and `o.__dict__ is d`;
/// rebuilt as a dict of its own it was a detached copy (audit 53, T2). The dict stands for its
/// object when counting reaches, as a list subclass's storage does.
///
/// The user object whose instance dict `vt` is.
fn instance_dict_owner(vt: &VT) -> Option<Rc<crate::symbolic::variables::user_defined::UserObject>> {
    match vt {
        VT::Dict(d) => d.borrow().instance_of.as_ref().and_then(|w| w.upgrade()),
        _ => None,
    }
}

/// The list subclass object whose list storage `vt` is (Note [list subclass objects]).
fn storage_owner(vt: &VT) -> Option<Rc<crate::symbolic::variables::user_defined::UserObject>> {
    match vt {
        VT::List(l) => l.borrow().owner.as_ref().and_then(|w| w.upgrade()),
        _ => None,
    }
}

/// Whether a constant tracker's object is an exception instance (made anew by each run of the
/// transformed code, `rebuild_fresh`).
fn is_exception(c: &Py<PyAny>) -> bool {
    Python::attach(|py| c.bind(py).is_instance_of::<pyo3::exceptions::PyBaseException>())
}

/// Where a shared object's rebuild stands (Note [shared rebuilds]).
#[derive(Clone, Copy)]
enum SharedRebuild {
    Pending,
    Building,
    Done(u32),
}

/// Marks the objects `reach` counts more than once as shared (Note [shared rebuilds]).
fn mark_shared(outputs: &mut Outputs, reach: &HashMap<usize, usize>) {
    for (&p, &n) in reach {
        if n > 1 && p & SOURCED_LIST_TAG == 0 {
            outputs.shared.insert(p, SharedRebuild::Pending);
        }
    }
}

/// The stack slots (from the bottom) that hold the iterator of a `for` loop enclosing
/// instruction `ip`: the top slot at a `FOR_ITER` before `ip` whose exit jump lands after it
/// (Note [loop iterators as snapshots]). Empty when the stack depths cannot be computed.
fn loop_iterator_slots(insts: &[crate::bytecode::Instruction], ip: usize) -> std::collections::HashSet<usize> {
    let mut slots = std::collections::HashSet::new();
    let Ok(depths) = crate::bytecode::analysis::stack_depths(insts) else { return slots };
    for (j, inst) in insts.iter().enumerate().take(ip) {
        if inst.opcode != crate::bytecode::opcode::op::FOR_ITER {
            continue;
        }
        let (Some(Some(d)), Some(t)) = (depths.get(j), inst.target) else { continue };
        if t.index() > ip && *d >= 1 {
            slots.insert(*d as usize - 1);
        }
    }
    slots
}

/// The items an iterator has left when it walks fixed sequences only (nothing can change what it
/// yields), computed without stepping it; `None` otherwise. The iterators an `enumerate` or a
/// `zip` steps must be reached from it alone: `enumerate(it)` over a local `it`, or over the
/// caller's iterator, advances that iterator at each step, which a snapshot would not.
fn fixed_remaining(py: Python<'_>, og: &OutputGraph, it: &Rc<RefCell<IteratorState>>, reach: &HashMap<usize, usize>) -> VResult<Option<Vec<VT>>> {
    let private = |inner: &Rc<RefCell<IteratorState>>| {
        reach.get(&(Rc::as_ptr(inner) as *const () as usize)).is_none_or(|&n| n <= 1) && og.side_effects.external_iter_source(inner).is_none()
    };
    let it = it.borrow();
    if it.exhausted {
        return Ok(Some(vec![]));
    }
    Ok(match &it.kind {
        IterKind::Items(items) => Some(items.iter().skip(it.pos).cloned().collect()),
        // A list built in the frame that nothing live but this iterator reaches (`zip([1, 2],
        // ...)`, a dead local): no code can change it any more.
        IterKind::List(l) if l.borrow().source.is_none() && reach.get(&(Rc::as_ptr(l) as *const () as usize)) == Some(&1) => Some(l.borrow().items.iter().skip(it.pos).cloned().collect()),
        // The same for a dict built in the frame, when its next step would not raise.
        IterKind::Dict { dict, view, used, version, ordered: false } if dict.borrow().source.is_none() && reach.get(&(Rc::as_ptr(dict) as *const () as usize)) == Some(&1) => {
            let d = dict.borrow();
            if d.items.len() != *used || d.version != *version {
                return Ok(None);
            }
            let item = |(k, v): &(Py<PyAny>, VT)| match view {
                crate::symbolic::variables::DictView::Keys => crate::symbolic::variables::dicts::key_tracker(py, k),
                crate::symbolic::variables::DictView::Values => v.clone(),
                crate::symbolic::variables::DictView::Items => crate::symbolic::variables::tuple_of(py, vec![crate::symbolic::variables::dicts::key_tracker(py, k), v.clone()]),
            };
            Some(d.items.iter().skip(it.pos).map(item).collect())
        }
        IterKind::Enumerate { inner, .. } if !private(inner) => None,
        IterKind::Zip(inners, _) if !inners.iter().all(private) => None,
        IterKind::Enumerate { inner, count } => match fixed_remaining(py, og, inner, reach)? {
            Some(rest) => {
                let mut out = Vec::with_capacity(rest.len());
                for (k, v) in rest.into_iter().enumerate() {
                    let i = VT::constant((count + k as i64).into_pyobject(py)?.into_any().unbind());
                    out.push(crate::symbolic::variables::tuple_of(py, vec![i, v]));
                }
                Some(out)
            }
            None => None,
        },
        IterKind::Zip(inners, strict) => {
            let mut lists = Vec::with_capacity(inners.len());
            for i in inners {
                match fixed_remaining(py, og, i, reach)? {
                    Some(l) => lists.push(l),
                    None => return Ok(None),
                }
            }
            let n = lists.iter().map(|l| l.len()).min().unwrap_or(0);
            if *strict && lists.iter().any(|l| l.len() != n) {
                // Its last step raises ValueError: the rebuilt iterator must raise it too.
                return Ok(None);
            }
            Some((0..n).map(|k| crate::symbolic::variables::tuple_of(py, lists.iter().map(|l| l[k].clone()).collect())).collect())
        }
        _ => None,
    })
}

/// How to rebuild an iterator: a real iterator of CPython's own type, in the state the trace
/// left it (Note [rebuilt iterators]).
fn rebuild_iter(py: Python<'_>, og: &OutputGraph, it_rc: &Rc<RefCell<IteratorState>>, outputs: &mut Outputs) -> VResult<Rebuild> {
    // Note [rebuilt iterators]: live values are rebuilt before the side effects are replayed
    // (pycodegen::resume), so an iterator over a container from the frame is made over the
    // container as it was at frame entry, then sees the replay. That is right for a list (its
    // iterator reads the list by index at each step) as long as the position is reachable in
    // the old contents, and for a dict only when the trace changed no keys of it (the replay
    // then only assigns values). A dict iterator whose dict changed size is rebuilt as one that
    // raises `RuntimeError` at its next step, as CPython's does.
    let it = it_rc;
    if let Some(source) = og.side_effects.external_iter_source(it) {
        // The caller's iterator itself, advanced by the replay (Note [iterators from outside
        // the frame]).
        return Ok(Rebuild::Source(source));
    }
    let it = it.borrow();
    let call = |name: &str, args: Vec<Rebuild>| -> VResult<Rebuild> {
        let f = py.import("dynamo._C")?.getattr(name)?;
        Ok(Rebuild::Call { func: f.unbind(), args })
    };
    let int = |i: i64| -> VResult<Rebuild> { Ok(Rebuild::Const(i.into_pyobject(py)?.into_any().unbind())) };
    // An exhausted iterator of another type than `tuple_iterator` keeps its type (Note
    // [iterator types]): rebuilt below.
    if it.exhausted && it.py_type.is_none() && !matches!(it.kind, IterKind::Set { .. } | IterKind::Dict { ordered: true, .. }) {
        return Ok(Rebuild::Iterator(vec![]));
    }
    Ok(match &it.kind {
        // Note [iterator types]: an iterator of another type than `tuple_iterator` is rebuilt
        // by iterating again the constant it came from, or not at all.
        // A `reversed` object over a tuple or str (Note [iterator types]): `reversed()` of the
        // items it has yet to produce, in sequence order.
        IterKind::Items(items) if it.reversed => {
            let rest = items.iter().skip(it.pos).rev().map(|v| rebuild_of(py, og, v, outputs)).collect::<VResult<Vec<_>>>()?;
            Rebuild::Call { func: py.import("builtins")?.getattr("reversed")?.unbind(), args: vec![Rebuild::Tuple(rest)] }
        }
        IterKind::Items(_) if it.py_type.is_some() => match &it.reiterate {
            Some(c) => call("iter_at", vec![Rebuild::Const(c.clone_ref(py)), int(it.pos as i64)?])?,
            None => graph_break!(UnreconstructableValue, "a {} iterator made in the frame outlives the graph", crate::symbolic::variables::qualname(it.py_type.as_ref().expect("checked").bind(py))),
        },
        IterKind::Items(items) => Rebuild::Iterator(items.iter().skip(it.pos).map(|v| rebuild_of(py, og, v, outputs)).collect::<VResult<_>>()?),
        IterKind::Set { .. } => graph_break!(UnreconstructableValue, "a set iterator made in the frame outlives the graph"),
        IterKind::Dict { ordered: true, .. } => graph_break!(UnreconstructableValue, "an OrderedDict iterator made in the frame outlives the graph"),
        IterKind::List(l) => {
            let source = l.borrow().source.clone();
            match source {
                Some(s) => {
                    if it.pos > l.borrow().entry_len {
                        // `iter_at` steps the old contents: the position must exist there.
                        graph_break!(UnreconstructableValue, "an iterator over a list from the frame past its length at entry");
                    }
                    Rebuild::ListIter { list: s, pos: it.pos }
                }
                None => {
                    // Over the storage of a list subclass object: `iter_at` over the object,
                    // whose `__iter__` is list's (Note [list subclass objects]).
                    let owner = l.borrow().owner.as_ref().and_then(|w| w.upgrade());
                    let list = match owner {
                        Some(o) => rebuild_of(py, og, &VT::UserObject(o), outputs)?,
                        None => rebuild_of(py, og, &VT::List(l.clone()), outputs)?,
                    };
                    call("iter_at", vec![list, int(it.pos as i64)?])?
                }
            }
        }
        // A deque iterator whose deque kept its state: `iter_at` over the rebuilt deque; one
        // over a deque from the frame, or whose next step raises, is not rebuilt.
        IterKind::Deque { list, state } => {
            let (sourced, same) = {
                let l = list.borrow();
                (l.source.is_some(), l.deque.map(|d| d.state) == Some(*state))
            };
            if sourced || !same {
                graph_break!(UnreconstructableValue, "an iterator over a deque from the frame or one mutated since it was made");
            }
            let d = rebuild_of(py, og, &VT::Deque(list.clone()), outputs)?;
            call("iter_at", vec![d, int(it.pos as i64)?])?
        }
        IterKind::ListReversed { list, index } => {
            let changed = {
                let l = list.borrow();
                l.source.is_some() && *index >= l.entry_len as i64
            };
            if changed {
                // `reversed_at` sets the position against the old contents.
                graph_break!(UnreconstructableValue, "a reversed iterator over a list from the frame past its length at entry");
            }
            let l = rebuild_of(py, og, &VT::List(list.clone()), outputs)?;
            call("reversed_at", vec![l, int(*index)?])?
        }
        IterKind::Dict { dict, view, used, version, ordered: false } => {
            let d = dict.borrow();
            if d.items.len() != *used {
                return call("dict_iter_changed_size", vec![Rebuild::Const(pyo3::types::PyString::new(py, view.method()).into_any().unbind())]);
            }
            if d.version != *version || (d.source.is_some() && d.version != 0) {
                graph_break!(UnreconstructableValue, "an iterator over a dict whose keys the trace changed");
            }
            drop(d);
            let dict_rb = rebuild_of(py, og, &VT::Dict(dict.clone()), outputs)?;
            let method = py.get_type::<PyDict>().getattr(view.method())?;
            let view_rb = Rebuild::Call { func: method.unbind(), args: vec![dict_rb] };
            call("iter_at", vec![view_rb, int(it.pos as i64)?])?
        }
        IterKind::Enumerate { inner, count } => {
            let inner = rebuild_of(py, og, &VT::Iterator(inner.clone()), outputs)?;
            let f = py.import("builtins")?.getattr("enumerate")?;
            Rebuild::Call { func: f.unbind(), args: vec![inner, int(*count)?] }
        }
        IterKind::Zip(inners, strict) => {
            let args = inners.iter().map(|i| rebuild_of(py, og, &VT::Iterator(i.clone()), outputs)).collect::<VResult<Vec<_>>>()?;
            let f = if *strict { py.import("dynamo._polyfills")?.getattr("zip_strict")? } else { py.import("builtins")?.getattr("zip")? };
            Rebuild::Call { func: f.unbind(), args }
        }
        // A real generator cannot be made suspended in the middle of its body.
        // Note [breaking where a generator was made]: a generator cannot be made suspended in
        // the middle of its body, so the frame breaks where the trace made it instead, and the
        // code before that is still a graph; Python then makes and runs the generator itself.
        IterKind::Generator(_) => {
            return Err(Unsupported {
                break_at: og.generator_made_at.get(&(Rc::as_ptr(it_rc) as usize)).copied(),
                ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue, "a generator that outlives the graph (returned, or live across a graph break)")
            })
        }
        // Note [user iterators]: the iterator is the object itself.
        IterKind::UserNext(obj) => rebuild_of(py, og, obj, outputs)?,
        // Lazy iterators are made again over their rebuilt inner iterators, in the state that
        // yields what is left: `map(func, *inners)`, `filter(func, inner)`, `chain(active,
        // *pending)` (chain takes `iter()` of the pending iterables as late as the original),
        // `islice(inner, next - count, stop - count, step)` (the items it already skipped or
        // gave are gone from `inner`).
        IterKind::Map { func, inners } => {
            let mut args = vec![rebuild_of(py, og, func, outputs)?];
            for i in inners {
                args.push(rebuild_of(py, og, &VT::Iterator(i.clone()), outputs)?);
            }
            Rebuild::Call { func: py.import("builtins")?.getattr("map")?.unbind(), args }
        }
        IterKind::Filter { func, inner } => {
            let f = match func {
                Some(f) => rebuild_of(py, og, f, outputs)?,
                None => Rebuild::Const(py.None()),
            };
            Rebuild::Call { func: py.import("builtins")?.getattr("filter")?.unbind(), args: vec![f, rebuild_of(py, og, &VT::Iterator(inner.clone()), outputs)?] }
        }
        IterKind::Chain { pending, active, outer } => {
            let mut args = Vec::new();
            if let Some(a) = active {
                args.push(rebuild_of(py, og, &VT::Iterator(a.clone()), outputs)?);
            }
            for p in pending {
                args.push(rebuild_of(py, og, p, outputs)?);
            }
            if let Some(o) = outer {
                // The iterables still to come, taken lazily as the original takes them.
                let from_iterable = py.import("itertools")?.getattr("chain")?.getattr("from_iterable")?;
                args.push(Rebuild::Call { func: from_iterable.unbind(), args: vec![rebuild_of(py, og, &VT::Iterator(o.clone()), outputs)?] });
            }
            Rebuild::Call { func: py.import("itertools")?.getattr("chain")?.unbind(), args }
        }
        IterKind::Islice { inner, next, stop, step, count } => {
            let start = next.saturating_sub(*count) as i64;
            let stop = match stop {
                Some(s) => int(s.saturating_sub(*count).max(next.saturating_sub(*count)) as i64)?,
                None => Rebuild::Const(py.None()),
            };
            let args = vec![rebuild_of(py, og, &VT::Iterator(inner.clone()), outputs)?, int(start)?, stop, int(*step as i64)?];
            Rebuild::Call { func: py.import("itertools")?.getattr("islice")?.unbind(), args }
        }
        // A reverse iterator over a dict built in the frame that has not been stepped and whose
        // dict kept its keys: `reversed()` of the rebuilt dict or view.
        IterKind::DictReversed { dict, view, used, version, index, ordered: false } if dict.borrow().source.is_none() && *index == *used as i64 - 1 && {
            let d = dict.borrow();
            d.items.len() == *used && d.version == *version
        } => {
            let target = match view {
                crate::symbolic::variables::DictView::Keys => VT::Dict(dict.clone()),
                v => VT::DictView { dict: dict.clone(), view: *v, ordered: false },
            };
            Rebuild::Call { func: py.import("builtins")?.getattr("reversed")?.unbind(), args: vec![rebuild_of(py, og, &target, outputs)?] }
        }
        // The itertools iterators below keep state CPython gives no constructor for (a cycle's
        // saved items, a takewhile that stopped, a count's next value as a traced number): one
        // that must outlive the graph is a clean break.
        IterKind::Accumulate { .. } | IterKind::ZipLongest { .. } | IterKind::Starmap { .. } | IterKind::TakeWhile { .. }
        | IterKind::DropWhile { .. } | IterKind::FilterFalse { .. } | IterKind::Pairwise { .. } | IterKind::Count { .. }
        | IterKind::Cycle { .. } | IterKind::Repeat { .. } | IterKind::Compress { .. } | IterKind::DictReversed { .. } | IterKind::Peek { .. }
        | IterKind::GroupBy(_) | IterKind::Grouper { .. } | IterKind::Tee { .. } => {
            graph_break!(UnreconstructableValue, "a lazy iterator ({}) that outlives the graph (returned, or live across a graph break)", iter_kind_name(&it.kind))
        }
    })
}

/// The itertools name of a lazy iterator kind that is not rebuilt, for break messages.
fn iter_kind_name(kind: &IterKind) -> &'static str {
    match kind {
        IterKind::Accumulate { .. } => "accumulate",
        IterKind::ZipLongest { .. } => "zip_longest",
        IterKind::Starmap { .. } => "starmap",
        IterKind::TakeWhile { .. } => "takewhile",
        IterKind::DropWhile { .. } => "dropwhile",
        IterKind::FilterFalse { .. } => "filterfalse",
        IterKind::Pairwise { .. } => "pairwise",
        IterKind::Count { .. } => "count",
        IterKind::Cycle { .. } => "cycle",
        IterKind::Repeat { .. } => "repeat",
        IterKind::Compress { .. } => "compress",
        IterKind::GroupBy(_) => "groupby",
        IterKind::Grouper { .. } => "groupby group",
        IterKind::Tee { .. } => "tee",
        IterKind::Peek { .. } => "iterator from outside the frame",
        IterKind::DictReversed { .. } => "reversed dict",
        _ => "iterator",
    }
}

/// The contents of the cells made anew (`Outputs::cells_to_fill`), stored once everything
/// else was rebuilt: a function that closes over a cell holding itself (a recursive helper a
/// closure factory made) is then made before the cell is filled with it.
fn cell_fills(py: Python<'_>, og: &OutputGraph, outputs: &mut Outputs) -> VResult<Vec<SideEffect>> {
    let mut out = Vec::new();
    while !outputs.cells_to_fill.is_empty() {
        let (id, rc) = outputs.cells_to_fill.remove(0);
        let content = rc.borrow().clone();
        if let Some(v) = content {
            let value = rebuild_of(py, og, &v, outputs)?;
            out.push(SideEffect::FillCell { target: Rebuild::SharedRef(id), value });
        }
    }
    Ok(out)
}

/// How to rebuild the returned tracker; tensors computed by the graph become graph outputs. An
/// object reached more than once is built once (Note [shared rebuilds]).
/// Refuses a `FakeId` (or a tuple or frozenset holding one) that would outlive the graph as
/// a constant or a dict key: its value is unknown (Note [ids of traced objects] in
/// `output_graph.rs`).
fn refuse_fake_id(py: Python<'_>, og: &OutputGraph, v: &Py<PyAny>) -> VResult<()> {
    if og.fake_ids.is_empty() {
        return Ok(());
    }
    fn holds(v: &Bound<'_, PyAny>) -> bool {
        match type_name(v).as_str() {
            "FakeId" => v.get_type().module().map(|m| m.to_string() == "dynamo._polyfills").unwrap_or(false),
            "tuple" | "frozenset" => v.try_iter().map(|it| it.flatten().any(|i| holds(&i))).unwrap_or(false),
            _ => false,
        }
    }
    if holds(v.bind(py)) {
        graph_break!(UnreconstructableValue, "the id() of an object built in the trace outlives the graph");
    }
    Ok(())
}

/// How to rebuild a dict of `items` in order: a dict display of constant keys, or, when a key
/// is a traced value (Note [tensor dict keys] in `variables/dicts.rs`), `dict(pairs)` of the
/// rebuilt keys and values (the same insertion order; distinct tensors stay distinct keys).
fn dict_rebuild(py: Python<'_>, og: &OutputGraph, items: &[(Py<PyAny>, VT)], rec: &mut dyn FnMut(&VT) -> VResult<Rebuild>) -> VResult<Rebuild> {
    if !items.iter().any(|(k, _)| crate::symbolic::variables::dicts::is_traced_key(k.bind(py))) {
        return Ok(Rebuild::Dict(items.iter().map(|(k, v)| Ok((refuse_fake_id(py, og, k).map(|_| k.clone_ref(py))?, rec(v)?))).collect::<VResult<_>>()?));
    }
    let mut pairs = Vec::with_capacity(items.len());
    for (k, v) in items {
        refuse_fake_id(py, og, k)?;
        let key = rec(&crate::symbolic::variables::dicts::key_tracker(py, k))?;
        pairs.push(Rebuild::Tuple(vec![key, rec(v)?]));
    }
    Ok(Rebuild::Call { func: py.get_type::<PyDict>().into_any().unbind(), args: vec![Rebuild::List(pairs)] })
}

fn rebuild_of(py: Python<'_>, og: &OutputGraph, vt: &VT, outputs: &mut Outputs) -> VResult<Rebuild> {
    // Note [deep values]: a value nested deeper than `MAX_REBUILD_DEPTH` (a linked list the
    // frame built, `node = [node, i]` in a loop) is not rebuilt: the walk here, and the
    // bytecode that would build it (one stack slot per level), would exhaust the C stack. A
    // graph break instead: Python builds it.
    let (_level, depth) = crate::symbolic::NestingLevel::enter(&REBUILD_DEPTH);
    if depth > MAX_REBUILD_DEPTH {
        graph_break!(UnreconstructableValue, "a value nested more than {MAX_REBUILD_DEPTH} levels deep");
    }
    if is_cmp_key_stand_in(py, vt)? {
        graph_break!(UnreconstructableValue, "a functools.cmp_to_key key or key maker outlives the graph");
    }
    rebuild_of_inner(py, og, vt, outputs)
}

/// Whether `vt` is the traced stand-in of `functools.cmp_to_key(f)` or of a key it made
/// (`dynamo._polyfills.cmp_to_key`, `KeyWrapper`): traced only while the frame uses them,
/// since rebuilt they would have another type than `functools.KeyWrapper`.
fn is_cmp_key_stand_in(py: Python<'_>, vt: &VT) -> VResult<bool> {
    let cls = match vt {
        VT::UserObject(o) => o.cls.bind(py).clone(),
        VT::Partial(p) if p.source.is_none() => match &p.func {
            VT::Class(c) => c.bind(py).clone(),
            _ => return Ok(false),
        },
        _ => return Ok(false),
    };
    Ok(cls.is(py.import("dynamo._polyfills")?.getattr("KeyWrapper")?))
}

const MAX_REBUILD_DEPTH: usize = 200;

thread_local! {
    static REBUILD_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn rebuild_of_inner(py: Python<'_>, og: &OutputGraph, vt: &VT, outputs: &mut Outputs) -> VResult<Rebuild> {
    if let VT::List(l) = vt {
        // Note [list subclass objects]: a storage is rebuilt only inside its object. Reached on
        // its own, it is the `self` of one of list's own methods (the `[descriptor, self]` that
        // LOAD_METHOD left at a break, Note [methods of builtin types at a break]), which eager
        // calls on the object: it is rebuilt as the object.
        if l.borrow().owner.is_some() {
            return match storage_owner(vt) {
                Some(owner) => rebuild_of(py, og, &VT::UserObject(owner), outputs),
                None => graph_break!(UnreconstructableValue, "the list storage of a list subclass object that is gone"),
            };
        }
    }
    if let Some(owner) = instance_dict_owner(vt) {
        // Note [instance dicts of new objects].
        return Ok(Rebuild::Attr(Box::new(rebuild_of(py, og, &VT::UserObject(owner), outputs)?), "__dict__".into()));
    }
    let Some(key) = shared_key(vt) else { return rebuild_fresh(py, og, vt, outputs) };
    if let VT::Cell(rc) = vt {
        // Note [cells of inlined calls]: a cell that exists only in the trace is made empty
        // into a temporary (however many functions close over it) and filled last.
        let key_ptr = Rc::as_ptr(rc) as *const () as usize;
        let made_anew = !og.cell_sources.contains_key(&key_ptr) && !og.cells_by_ptr.values().any(|c| Rc::ptr_eq(c, rc)) && !outputs.cells.contains_key(&key_ptr);
        if made_anew {
            if let Some(SharedRebuild::Done(id)) = outputs.shared.get(&key).copied() {
                return Ok(Rebuild::SharedRef(id));
            }
            let id = outputs.n_shared;
            outputs.n_shared += 1;
            outputs.shared.insert(key, SharedRebuild::Done(id));
            outputs.cells_to_fill.push((id, rc.clone()));
            let cell_type = py.import("types")?.getattr("CellType")?.unbind();
            return Ok(Rebuild::Shared { id, inner: Box::new(Rebuild::Call { func: cell_type, args: vec![] }) });
        }
    }
    match outputs.shared.get(&key).copied() {
        None => rebuild_fresh(py, og, vt, outputs),
        Some(SharedRebuild::Done(id)) => Ok(Rebuild::SharedRef(id)),
        Some(SharedRebuild::Building) => graph_break!(UnreconstructableValue, "{} that contains itself outlives the graph", vt.describe(py)),
        Some(SharedRebuild::Pending) => {
            if let Some((shell, fill)) = cyclic_parts(py, vt)? {
                // Made empty and kept before its contents are built: an inner reach of itself
                // loads the temporary.
                let id = outputs.n_shared;
                outputs.n_shared += 1;
                outputs.shared.insert(key, SharedRebuild::Done(id));
                let fill = fill(py, og, outputs, id)?;
                return Ok(Rebuild::SharedCyclic { id, shell: Box::new(shell), fill: Box::new(fill) });
            }
            outputs.shared.insert(key, SharedRebuild::Building);
            let inner = rebuild_fresh(py, og, vt, outputs)?;
            let id = outputs.n_shared;
            outputs.n_shared += 1;
            outputs.shared.insert(key, SharedRebuild::Done(id));
            Ok(Rebuild::Shared { id, inner: Box::new(inner) })
        }
    }
}

/// Builds the fill call of a two-step rebuild, given the temporary local holding the shell.
type FillFn = Box<dyn FnOnce(Python<'_>, &OutputGraph, &mut Outputs, u32) -> VResult<Rebuild>>;

/// A shared object of a kind that can be made empty first and filled after (a list, dict or
/// user object built in the frame; Note [shared rebuilds]): its empty shell and how to build
/// the call that fills it. Such an object may contain itself (`l.append(l)`, `o.me = o`).
fn cyclic_parts(py: Python<'_>, vt: &VT) -> VResult<Option<(Rebuild, FillFn)>> {
    if is_cmp_key_stand_in(py, vt)? {
        graph_break!(UnreconstructableValue, "a functools.cmp_to_key key outlives the graph");
    }
    Ok(match vt {
        VT::List(l) if l.borrow().source.is_none() => {
            let items = l.borrow().items.clone();
            let extend = py.get_type::<pyo3::types::PyList>().getattr("extend")?.unbind();
            let fill: FillFn = Box::new(move |py, og, outputs, id| {
                let items = items.iter().map(|v| rebuild_of(py, og, v, outputs)).collect::<VResult<_>>()?;
                Ok(Rebuild::Call { func: extend, args: vec![Rebuild::SharedRef(id), Rebuild::List(items)] })
            });
            Some((Rebuild::List(vec![]), fill))
        }
        VT::Dict(d) if d.borrow().source.is_none() => {
            let items: Vec<(Py<PyAny>, VT)> = d.borrow().items.iter().map(|(k, v)| (k.clone_ref(py), v.clone())).collect();
            let update = py.get_type::<PyDict>().getattr("update")?.unbind();
            let fill: FillFn = Box::new(move |py, og, outputs, id| {
                let items = dict_rebuild(py, og, &items, &mut |v| rebuild_of(py, og, v, outputs))?;
                Ok(Rebuild::Call { func: update, args: vec![Rebuild::SharedRef(id), items] })
            });
            Some((Rebuild::Dict(vec![]), fill))
        }
        VT::UserObject(o) => {
            let c = py.import("dynamo._C")?;
            let mut shell_args = vec![Rebuild::Const(o.cls.clone_ref(py)), Rebuild::Dict(vec![])];
            if o.storage.is_some() {
                shell_args.push(Rebuild::Dict(vec![]));
            } else if o.list.is_some() {
                shell_args.push(Rebuild::List(vec![]));
            }
            let shell = Rebuild::Call { func: c.getattr("new_object")?.unbind(), args: shell_args };
            let fill_object = c.getattr("fill_object")?.unbind();
            let o = o.clone();
            let fill: FillFn = Box::new(move |py, og, outputs, id| {
                let (attrs, mut args) = user_object_contents(py, og, &o, outputs)?;
                args.insert(0, Rebuild::Dict(attrs));
                args.insert(0, Rebuild::SharedRef(id));
                Ok(Rebuild::Call { func: fill_object, args })
            });
            Some((shell, fill))
        }
        _ => None,
    })
}

/// The attributes of a user object built in the frame, and the storage arguments
/// (`new_object`'s `items` and `from_items`, for a dict subclass), rebuilt.
#[allow(clippy::type_complexity)]
fn user_object_contents(py: Python<'_>, og: &OutputGraph, o: &Rc<crate::symbolic::variables::user_defined::UserObject>, outputs: &mut Outputs) -> VResult<(Vec<(Py<PyAny>, Rebuild)>, Vec<Rebuild>)> {
    // Attributes that alias the storage's value under the same key are passed as a placeholder
    // and named in `from_items` (rebuilt once, in the storage).
    let mut attrs = Vec::new();
    let mut from_items = Vec::new();
    for (k, v) in &o.attrs.borrow().items {
        if o.attr_aliases_storage(py, k.bind(py), v) {
            from_items.push(k.clone_ref(py));
            attrs.push((k.clone_ref(py), Rebuild::Const(py.None())));
        } else {
            attrs.push((k.clone_ref(py), rebuild_of(py, og, v, outputs)?));
        }
    }
    let mut rest = Vec::new();
    if let Some(storage) = &o.storage {
        rest.push(rebuild_of(py, og, &VT::Dict(storage.clone()), outputs)?);
        rest.push(Rebuild::Const(PyTuple::new(py, from_items)?.into_any().unbind()));
    } else if let Some(list) = &o.list {
        // Note [list subclass objects]: the items, put in by `list.extend` past the subclass.
        let items = list.borrow().items.clone();
        rest.push(Rebuild::List(items.iter().map(|v| rebuild_of(py, og, v, outputs)).collect::<VResult<_>>()?));
    }
    Ok((attrs, rest))
}

/// `rebuild_of` without the sharing.
fn rebuild_fresh(py: Python<'_>, og: &OutputGraph, vt: &VT, outputs: &mut Outputs) -> VResult<Rebuild> {
    if let VT::NestedFunction(nf) = vt {
        if !nf.kwdefaults.is_empty() {
            graph_break!(UnreconstructableValue, "returning a function with keyword-only defaults");
        }
        // The transformed code's MAKE_FUNCTION takes the frame's globals; a function made by an
        // inlined call into another module must keep that module's (Note [globals of functions
        // made in the trace]): it is made by `types.FunctionType(code, globals, ...)` over that
        // module's globals, reached through the source the trace read them by. A torch
        // module's (trusted, read without a source) stays a break.
        if nf.g.trusted {
            graph_break!(UnreconstructableValue, "returning a function made by code of another module ({})", nf.qualname);
        }
        // In emission order: the defaults, then the closure.
        let defaults = nf.defaults.iter().map(|d| rebuild_of(py, og, d, outputs)).collect::<VResult<Vec<_>>>()?;
        let mut closure = Vec::new();
        for c in &nf.closure {
            let VT::Cell(rc) = c else { graph_break!(UnreconstructableValue, "closure of a returned function is not a cell") };
            match outputs.cells.get(&(Rc::as_ptr(rc) as *const () as usize)) {
                Some(&slot) => {
                    if !outputs.referenced_cells.iter().any(|(s, _)| *s == slot) {
                        outputs.referenced_cells.push((slot, rc.clone()));
                    }
                    closure.push(Rebuild::FrameCell(slot));
                }
                // A cell an inlined call made (a closure factory called in the frame).
                None => closure.push(rebuild_of(py, og, c, outputs)?),
            }
        }
        // Note [attributes of functions made in the frame]: set again after it is made (planned
        // after the defaults and the closure, as the call emits them).
        let attrs = nf.attrs.borrow().iter().map(|(k, v)| Ok((pyo3::types::PyString::new(py, k).into_any().unbind(), rebuild_of(py, og, v, outputs)?))).collect::<VResult<Vec<_>>>()?;
        let with_attrs = |made: Rebuild| -> VResult<Rebuild> {
            if attrs.is_empty() {
                return Ok(made);
            }
            let f = py.import("dynamo._polyfills")?.getattr("function_with_attrs")?.unbind();
            Ok(Rebuild::Call { func: f, args: vec![made, Rebuild::Dict(attrs)] })
        };
        if let Some(globals) = &nf.g.source {
            let function_type = py.import("types")?.getattr("FunctionType")?.unbind();
            let name = nf.code.bind(py).getattr("co_name")?.unbind();
            let none = || Rebuild::Const(py.None());
            let defaults = if defaults.is_empty() { none() } else { Rebuild::Tuple(defaults) };
            let closure = if closure.is_empty() { none() } else { Rebuild::Tuple(closure) };
            return with_attrs(Rebuild::Call { func: function_type, args: vec![Rebuild::Const(nf.code.clone_ref(py)), Rebuild::Source(globals.clone()), Rebuild::Const(name), defaults, closure] });
        }
        return with_attrs(Rebuild::MakeFunction { code: nf.code.clone_ref(py), defaults, closure });
    }
    if let VT::Cell(rc) = vt {
        // Note [cells of inlined calls]: a cell made by MAKE_CELL in an inlined frame exists
        // only in the trace: it is made anew (`types.CellType(contents)`), once however many
        // functions close over it (Note [shared rebuilds]), holding the contents the trace
        // left in it. A real cell of a function from outside the frame (`f.__closure__[i]`) is
        // reloaded from there: the function made in the frame shares it with `f`, as in eager.
        if let Some(s) = og.cell_sources.get(&(Rc::as_ptr(rc) as *const () as usize)) {
            return Ok(Rebuild::Source(s.clone()));
        }
        if og.cells_by_ptr.values().any(|c| Rc::ptr_eq(c, rc)) {
            graph_break!(UnreconstructableValue, "returned function closes over a cell of a function from outside the frame");
        }
        let cell_type = py.import("types")?.getattr("CellType")?.unbind();
        let content = rc.borrow().clone();
        let args = match content {
            Some(v) => vec![rebuild_of(py, og, &v, outputs)?],
            None => vec![],
        };
        return Ok(Rebuild::Call { func: cell_type, args });
    }
    // A lazy constant not used by the trace is made again at run time (Note [lazy constants]).
    if let Some(r) = og.lazy_rebuild(py, vt, &mut |n| outputs.output_of(n)) {
        return Ok(r);
    }
    let mut rec = |v: &VT| rebuild_of(py, og, v, outputs);
    Ok(match vt {
        VT::Tensor(t) => {
            let is_placeholder = matches!(og.graph.node(t.node).op, crate::graph::Op::Placeholder { .. });
            match (&t.source, is_placeholder) {
                (Some(s), true) => Rebuild::Source(s.clone()),
                _ => {
                    let out = Rebuild::GraphOutput(outputs.output_of(t.node));
                    // Note [tensor subclasses]: made an instance of its class again, with the
                    // attributes the trace set on it.
                    match crate::symbolic::variables::tensor_subclass::rebuild_class(py, og, t.node) {
                        Some(cls) => {
                            let rewrap = py.import("dynamo._subclass")?.getattr("rewrap")?.unbind();
                            let mut attrs = Vec::new();
                            for (k, v) in og.tensor_attrs.get(&t.node).map(|a| a.as_slice()).unwrap_or(&[]) {
                                let key = pyo3::types::PyString::new(py, k).into_any().unbind();
                                let r = rebuild_of(py, og, v, outputs)?;
                                match attrs.iter_mut().find(|(k2, _): &&mut (Py<PyAny>, Rebuild)| k2.bind(py).eq(key.bind(py)).unwrap_or(false)) {
                                    Some(slot) => slot.1 = r,
                                    None => attrs.push((key, r)),
                                }
                            }
                            Rebuild::Call { func: rewrap, args: vec![out, Rebuild::Const(cls.unbind()), Rebuild::Dict(attrs)] }
                        }
                        None => out,
                    }
                }
            }
        }
        // A symbolic number input is read back from where it came from.
        VT::SymNum(s) if s.source.is_some() => Rebuild::Source(s.source.clone().unwrap()),
        // A symbolic size is computed by the graph, like a tensor.
        VT::SymNum(s) => Rebuild::GraphOutput(outputs.output_of(s.node)),
        // An exception object the trace made (`ValueError("a")`, folded as a constant) is made
        // anew on each run, as eager makes a new one per call; one the trace raised would lack
        // eager's traceback.
        VT::Constant(c) if c.bind(py).is_instance_of::<pyo3::exceptions::PyBaseException>() => {
            if let Some(k) = og.raised_exceptions.iter().position(|r| r.is(c)) {
                // Eager's carries a traceback: break where it was raised instead, so Python
                // raises and handles it for real (`convert_inner`).
                return Err(Unsupported { break_at: og.raise_points.get(k).copied(), ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue, "an exception the trace raised and handled outlives the graph") });
            }
            let e = c.bind(py);
            // A user's class whose construction runs no Python code is made anew the same way.
            let exact_builtin = e.get_type().getattr("__module__").map(|m| m.to_string() == "builtins").unwrap_or(false)
                || crate::symbolic::translator::plain_exception_class(py, e.get_type().as_any());
            let no_state = e.getattr("__dict__").map(|d| d.len().unwrap_or(1) == 0).unwrap_or(true)
                && e.getattr("__cause__").map(|v| v.is_none()).unwrap_or(false)
                && e.getattr("__context__").map(|v| v.is_none()).unwrap_or(false);
            if !exact_builtin || !no_state {
                graph_break!(UnreconstructableValue, "an exception object made in the trace ({}) outlives the graph", type_name(e));
            }
            let args: Vec<Rebuild> = e.getattr("args")?.cast_into::<PyTuple>().map_err(|e| Unsupported::new(e.to_string()))?.iter().map(|a| Rebuild::Const(a.unbind())).collect();
            Rebuild::Call { func: e.get_type().into_any().unbind(), args }
        }
        VT::Constant(c) => {
            refuse_fake_id(py, og, c)?;
            if crate::symbolic::variables::dicts::is_traced_key(c.bind(py)) {
                // Note [tensor dict keys]: keys become trackers before they are values.
                graph_break!(UnreconstructableValue, "a traced dict key outlives the graph as a constant");
            }
            // Note [constants keep their identity] (output_graph.rs).
            match (og.constant_source(c), og.folded_tuple_items(c)) {
                (Some(s), _) => Rebuild::Source(s.clone()),
                (None, Some(items)) => Rebuild::Tuple(items.iter().map(&mut rec).collect::<VResult<_>>()?),
                (None, None) => Rebuild::Const(c.clone_ref(py)),
            }
        }
        // Note [tuples from outside the frame]: that very tuple, reloaded.
        VT::Tuple(items) | VT::NamedTuple { items, .. } if og.tuple_source(items).is_some() => Rebuild::Source(og.tuple_source(items).unwrap().clone()),
        VT::Tuple(items) => Rebuild::Tuple(items.iter().map(&mut rec).collect::<VResult<_>>()?),
        // Note [namedtuple classes made in the frame] (variables/functions.rs).
        VT::NamedTuple { cls, .. } | VT::Class(cls) if og.frame_classes.contains_key(&(cls.as_ptr() as usize)) => {
            let at = og.frame_classes[&(cls.as_ptr() as usize)].1;
            return Err(Unsupported {
                break_at: Some(at),
                ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue, format!("a namedtuple class made in the frame ({}), or an instance of it, outlives the graph", crate::symbolic::variables::qualname(cls.bind(py))))
            });
        }
        VT::NamedTuple { cls, items } => {
            let items = Rebuild::Tuple(items.iter().map(&mut rec).collect::<VResult<_>>()?);
            let cls = cls.bind(py);
            if cls.hasattr("n_sequence_fields")? || cls.is(og.handles.size_type.bind(py)) {
                // A structseq (torch.return_types.*) is made from a sequence.
                Rebuild::Call { func: cls.clone().unbind(), args: vec![items] }
            } else {
                // What namedtuple's `_make` does, without looking `_make` up on the class.
                let tuple_new = py.get_type::<PyTuple>().getattr("__new__")?;
                Rebuild::Call { func: tuple_new.unbind(), args: vec![Rebuild::Const(cls.clone().unbind()), items] }
            }
        }
        // Note [iterator types]: a view of an OrderedDict is rebuilt from its storage only as a
        // plain dict's view: not at all.
        // A view of an OrderedDict (or subclass, `ModelOutput`) from outside the frame: that
        // dict's own view, made again from its source (audit 51, P5).
        VT::DictView { dict, view, ordered: true } if dict.borrow().source.is_some() => {
            let source = dict.borrow().source.clone().expect("checked");
            let method = py.import("collections")?.getattr("OrderedDict")?.getattr(view.method())?;
            Rebuild::Call { func: method.unbind(), args: vec![Rebuild::Source(source)] }
        }
        VT::DictView { ordered: true, .. } => graph_break!(UnreconstructableValue, "a view of an OrderedDict built in the frame outlives the graph"),
        VT::DictView { dict, view, ordered: false } => {
            let d = rec(&VT::Dict(dict.clone()))?;
            let method = py.get_type::<PyDict>().getattr(view.method())?;
            Rebuild::Call { func: method.unbind(), args: vec![d] }
        }
        VT::List(l) => {
            let l = l.borrow();
            match &l.source {
                Some(s) => Rebuild::Source(s.clone()),
                None => Rebuild::List(l.items.iter().map(&mut rec).collect::<VResult<_>>()?),
            }
        }
        // Note [deques]: `deque(items, maxlen)`.
        VT::Deque(l) => {
            let l = l.borrow();
            match &l.source {
                Some(s) => Rebuild::Source(s.clone()),
                None => {
                    let items = Rebuild::List(l.items.iter().map(&mut rec).collect::<VResult<_>>()?);
                    let maxlen = match l.deque.and_then(|d| d.maxlen) {
                        Some(m) => Rebuild::Const((m as i64).into_pyobject(py)?.into_any().unbind()),
                        None => Rebuild::Const(py.None()),
                    };
                    Rebuild::Call { func: py.import("collections")?.getattr("deque")?.unbind(), args: vec![items, maxlen] }
                }
            }
        }
        VT::Dict(d) => {
            let d = d.borrow();
            match &d.source {
                Some(s) => Rebuild::Source(s.clone()),
                None => dict_rebuild(py, og, &d.items, &mut rec)?,
            }
        }
        VT::Module { source: Some(s), .. } | VT::Function { source: Some(s), .. } | VT::PyModule { source: Some(s), .. } => Rebuild::Source(s.clone()),
        // Note [logger calls]: the bound method, looked up again.
        VT::LoggerMethod { logger, name } => Rebuild::Attr(Box::new(rec(logger)?), name.clone()),
        // Note [globals() in a trace].
        VT::Globals(g) => match (&g.source, g.trusted) {
            (Some(s), false) => Rebuild::Source(s.clone()),
            (None, false) => Rebuild::Call { func: py.import("builtins")?.getattr("globals")?.unbind(), args: vec![] },
            _ => graph_break!(UnreconstructableValue, "globals() of a torch module outlives the graph"),
        },
        // Note [lock blocks]: the real lock's `__exit__`, the lock acquired by the replay.
        VT::LockExit { lock } => Rebuild::Attr(Box::new(rec(lock)?), "__exit__".into()),
        // A torch module made in the trace: made again from its arguments (visited once).
        VT::Module { obj, source: None } => match og.derived_modules.get(&(obj.as_ptr() as usize)).and_then(|d| d.remake.as_ref()) {
            Some(remake) => Rebuild::Call { func: remake.clone_ref(py), args: vec![] },
            None => graph_break!(UnreconstructableValue, "a module made in the trace ({}) outlives the graph", type_name(obj.bind(py))),
        },
        VT::Opaque { source, .. } => Rebuild::Source(source.clone()),
        // A function reached without a source was wrapped unguarded because it is stable (an
        // attribute of a trusted torch module, a property getter): the transformed code holds
        // the same object (e.g. `torch.testing.assert_close` on the stack at a graph break after
        // a test harness replaced it with a function of its own).
        VT::Function { obj, source: None } => Rebuild::Const(obj.clone_ref(py)),
        // Members are literals or enum members (fixed objects, identity-guarded where they were
        // read: Note [enum members] in `builder.rs`), which the constant holds as they are.
        // Note [sets from outside the frame]: the set itself (the trace never wrote to it).
        VT::Set(set) if og.set_sources.contains_key(&(Rc::as_ptr(set) as usize)) => Rebuild::Source(og.set_sources[&(Rc::as_ptr(set) as usize)].clone()),
        VT::Set(set) if !set.borrow().bind(py).try_iter()?.all(|m| m.map(|m| crate::symbolic::builder::is_literal(py, &m) || crate::symbolic::builder::is_plain_enum_member(py, &m)).unwrap_or(false)) => {
            // A set holding tensors (`{x, x * 2}`): `set((...))` of its members rebuilt, in
            // the traced set's order. A tensor hashes by identity, so the rebuilt set's order
            // follows the real tensors' addresses as eager's does (the trace never iterates
            // such a set: iter.rs breaks there). Other identity-hashed members (modules,
            // functions) still break.
            let members: Vec<Bound<'_, PyAny>> = set.borrow().bind(py).try_iter()?.collect::<PyResult<_>>()?;
            let mut items = Vec::with_capacity(members.len());
            for m in &members {
                if crate::symbolic::builder::is_literal(py, m) || crate::symbolic::builder::is_plain_enum_member(py, m) {
                    items.push(Rebuild::Const(m.clone().unbind()));
                    continue;
                }
                match og.set_members.get(&(m.as_ptr() as usize)) {
                    Some(t @ VT::Tensor(_)) => items.push(rec(t)?),
                    _ => graph_break!(UnreconstructableValue, "a set of {} that outlives the graph", type_name(m)),
                }
            }
            // `set(...)` or `frozenset(...)` (Note [frozensets of traced values]).
            Rebuild::Call { func: set.borrow().bind(py).get_type().into_any().unbind(), args: vec![Rebuild::Tuple(items)] }
        }
        // An immutable frozenset of literals is its own rebuild.
        VT::Set(set) if set.borrow().bind(py).is_instance_of::<pyo3::types::PyFrozenSet>() => Rebuild::Const(set.borrow().clone_ref(py)),
        VT::Set(set) => {
            // Note [set order]: the transformed code runs `set(c)` for a constant `c`: a tuple
            // of the members in the traced set's order (added one by one, the table growing as
            // a set built by `add` grows) or `frozenset(s)` (merged, the table sized at once).
            // The first whose result iterates as the traced set does, with a table of the same
            // size, is taken; a set neither reproduces is a break.
            let s = set.borrow();
            let s = s.bind(py);
            fn order<'py>(o: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
                o.try_iter()?.collect()
            }
            let sizeof = py.import("sys")?.getattr("getsizeof")?;
            let want = order(s)?;
            let by_add = PyTuple::new(py, &want)?.into_any();
            let merged = py.get_type::<pyo3::types::PyFrozenSet>().call1((s,))?;
            let mut chosen = None;
            for c in [by_add, merged] {
                let again = py.get_type::<pyo3::types::PySet>().call1((&c,))?;
                let got = order(&again)?;
                if got.len() == want.len() && got.iter().zip(want.iter()).all(|(a, b)| a.is(b)) && sizeof.call1((s,))?.eq(sizeof.call1((&again,))?)? {
                    chosen = Some(c);
                    break;
                }
            }
            match chosen {
                Some(c) => Rebuild::SetOf(c.unbind()),
                None => graph_break!(UnreconstructableValue, "a set whose table a rebuild would not reproduce (its iteration order) outlives the graph"),
            }
        }
        VT::TorchFunction(o) | VT::Builtin(o) | VT::Class(o) => Rebuild::Const(o.clone_ref(py)),
        VT::PyModule { obj, .. } => Rebuild::Const(obj.clone_ref(py)),

        VT::Iterator(it) => rebuild_iter(py, og, it, outputs)?,
        VT::UserObject(o) => {
            // Note: visited once (check_rebuilt_once), so one rebuild is the one object.
            let new_object = py.import("dynamo._C")?.getattr("new_object")?;
            let (attrs, rest) = user_object_contents(py, og, o, outputs)?;
            let mut args = vec![Rebuild::Const(o.cls.clone_ref(py)), Rebuild::Dict(attrs)];
            args.extend(rest);
            Rebuild::Call { func: new_object.unbind(), args }
        }
        VT::Partial(p) => match &p.source {
            Some(s) => Rebuild::Source(s.clone()),
            None => {
                // `partial(func, *args, **keywords)`, with the keywords bound ahead of time in a
                // constant `partial(partial, **keywords)` (they must be literals).
                let partial = crate::symbolic::variables::functions::partial_type(py)?;
                let kw = PyDict::new(py);
                for (k, v) in crate::symbolic::variables::functions::keyword_items(py, &p.keywords)? {
                    match v.as_constant(py) {
                        Some(c) => kw.set_item(k, c)?,
                        None => graph_break!(UnreconstructableValue, "a functools.partial with a non-literal keyword '{k}' that outlives the graph"),
                    }
                }
                let maker = if kw.is_empty() { partial.clone() } else { partial.call((partial.clone(),), Some(&kw))? };
                let mut args = vec![rec(&p.func)?];
                for a in &p.args {
                    args.push(rec(a)?);
                }
                Rebuild::Call { func: maker.unbind(), args }
            }
        },
        VT::TensorMethod { tensor, name } => Rebuild::Attr(Box::new(rec(&VT::Tensor(tensor.clone()))?), name.clone()),
        // A method of a list subclass object's storage (`ps.append` at a break before its
        // call): list's own method bound to the object, `list.append.__get__(ps)` (Note [list
        // subclass objects]).
        VT::ContainerMethod { container, name } if storage_owner(container).is_some() => {
            let owner = storage_owner(container).expect("checked");
            let Ok(method) = py.get_type::<pyo3::types::PyList>().getattr(name.as_str()) else {
                graph_break!(UnreconstructableValue, "method {name} of the list storage of a list subclass object");
            };
            Rebuild::Call { func: method.getattr("__get__")?.unbind(), args: vec![rec(&VT::UserObject(owner))?] }
        }
        VT::ContainerMethod { container, name } => Rebuild::Attr(Box::new(rec(container)?), name.clone()),
        VT::Method { func, self_ } => match func.as_ref() {
            // `m.f.__func__` read off a bound method `m.f`: reload the bound method itself. (A
            // class-dict entry's `__func__`, from a classmethod, is not bound: rebuilt below.)
            VT::Function { source: Some(s), .. } if matches!(s.as_ref(), Source::Attr { attr, base } if attr == "__func__" && matches!(base.as_ref(), Source::Attr { .. })) => {
                let Source::Attr { base, .. } = s.as_ref() else { unreachable!() };
                Rebuild::Source(base.clone())
            }
            // `types.MethodType(func, self)`: equal in behaviour to the attribute the frame read.
            VT::Function { obj, .. } => Rebuild::BoundMethod { func: obj.clone_ref(py), self_: Box::new(rec(self_)?) },
            // A torch function (a method of `torch.optim.Optimizer`, ...) bound to an object:
            // the same binding (`opt.zero_grad` on the stack at a break before its call).
            VT::TorchFunction(obj) if type_name(obj.bind(py)) == "function" => Rebuild::BoundMethod { func: obj.clone_ref(py), self_: Box::new(rec(self_)?) },
            _ => graph_break!(UnreconstructableValue, "rebuilding a bound method of {}", func.describe(py)),
        },
        // A `@contextmanager` manager or its block's exit: its half-run generator cannot be
        // rebuilt, so the break goes where the manager was made (Note [generator context
        // managers]).
        // Not entered yet and made by a helper with a source: made again (Note [generator
        // context managers across a break]).
        VT::GeneratorCtx(ctx) if !ctx.borrow().entered && ctx.borrow().remake.is_some() => {
            let (helper, args, kwargs) = ctx.borrow().remake.clone().expect("checked");
            let remake = py.import("dynamo._polyfills")?.getattr("remake_generator_ctx")?.unbind();
            let args = args.iter().map(&mut rec).collect::<VResult<Vec<_>>>()?;
            let kwargs = kwargs.iter().map(|(k, v)| Ok((pyo3::types::PyString::new(py, k).into_any().unbind(), rec(v)?))).collect::<VResult<Vec<_>>>()?;
            Rebuild::Call { func: remake, args: vec![Rebuild::Source(helper), Rebuild::Tuple(args), Rebuild::Dict(kwargs)] }
        }
        VT::GeneratorCtx(ctx) | VT::GeneratorCtxExit(ctx) => {
            return Err(Unsupported {
                break_at: Some(ctx.borrow().break_point()),
                ..Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnreconstructableValue, "a @contextmanager manager live across a graph break")
            });
        }
        // The `__exit__` of an autocast block cut by a break (Note [autocast blocks]).
        VT::AutocastExit(r) => {
            let exit = py.import("dynamo._amp").and_then(|m| m.getattr("AutocastExit")?.call1((r.active, r.device.as_str(), r.enabled, r.dtype.clone_ref(py), r.cache))).map_err(|e| Unsupported::new(e.to_string()))?;
            Rebuild::Const(exit.unbind())
        }
        // The autocast object itself (`with torch.autocast(...) as ac`): the one made while
        // tracing, entered or not (its own `__enter__` is never called: the trace entered it).
        VT::AutocastCtx(m) => Rebuild::Const(m.obj.clone_ref(py)),
        // A grad-mode context made in the frame and not entered yet (`ctx = torch.no_grad()`
        // before a break): made again by the same call after the graph, which has already
        // switched the mode a `set_grad_enabled(mode)` switches when made; that one is rebuilt
        // with the mode it found (`prev`) for its `__exit__`.
        // One from outside the frame is that object (it may have been entered: its `prev` is
        // what its `__exit__` restores).
        VT::GradModeCtx { source: Some(source), .. } => Rebuild::Source(source.clone()),
        VT::GradModeCtx { enabled, set_on_create, prev, source: None } => {
            let torch = py.import("torch")?;
            if *set_on_create {
                let f = py.import("dynamo._polyfills")?.getattr("grad_mode_setter")?;
                Rebuild::Call { func: f.unbind(), args: vec![Rebuild::Const(PyBool::new(py, *enabled).to_owned().into_any().unbind()), Rebuild::Const(PyBool::new(py, *prev).to_owned().into_any().unbind())] }
            } else {
                let cls = torch.getattr(if *enabled { "enable_grad" } else { "no_grad" })?;
                Rebuild::Call { func: cls.unbind(), args: vec![] }
            }
        }
        // An inference-mode context made in the frame and not entered yet: made again by the
        // same call (its constructor switches nothing).
        VT::InferenceModeCtx { mode } => {
            let cls = py.import("torch")?.getattr("inference_mode")?;
            Rebuild::Call { func: cls.unbind(), args: vec![Rebuild::Const(PyBool::new(py, *mode).to_owned().into_any().unbind())] }
        }
        // The `__exit__` of an inference-mode block cut by a break (Note [inference-mode
        // blocks] in `python/dynamo/_amp.py`).
        VT::InferenceModeExit => {
            let exit = py.import("dynamo._amp").and_then(|m| m.getattr("InferenceModeExit")?.call0()).map_err(|e| Unsupported::new(e.to_string()))?;
            Rebuild::Const(exit.unbind())
        }
        // The `__exit__` of a grad-mode `with` block, on the stack across a break inside it.
        VT::GradModeExit { restore } => {
            let exit = Py::new(py, crate::py::GradModeRestore { restore: *restore }).map_err(|e| Unsupported::new(e.to_string()))?;
            Rebuild::Const(exit.into_any())
        }
        other => graph_break!(UnreconstructableValue, "returning {} from a compiled frame", other.describe(py)),
    })
}
