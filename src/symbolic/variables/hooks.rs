//! `with` blocks over `threading` locks and forward hooks registered on modules inside the
//! trace: both change state outside the frame that the graph cannot hold, so both are recorded
//! as side effects replayed after the graph, in the order the frame made them.

use crate::source::Source;
use crate::symbolic::side_effects::LoggerCall;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::VT;
use crate::symbolic::VResult;
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Whether `obj` is exactly a `threading.Lock` (`_thread.lock`) or a C `threading.RLock`
/// (`_thread.RLock`): their `__enter__` is `acquire()` and their `__exit__` is `release()`.
pub fn is_lock(py: Python<'_>, obj: &Bound<'_, PyAny>) -> bool {
    let Ok(thread) = py.import("_thread") else { return false };
    let ty = obj.get_type();
    ["LockType", "RLock"].iter().any(|n| thread.getattr(*n).is_ok_and(|t| ty.is(&t)))
}

/// A forward or forward-pre hook registered in the trace (`m.register_forward_hook(hook, ...)`),
/// replayed after the graph by `dynamo._polyfills.replay_hook`.
pub struct HookRegistration {
    /// The module (kept alive here): its address keys the pending hooks of `module_hooks`.
    pub module: Py<PyAny>,
    pub module_source: Arc<Source>,
    /// `register_forward_pre_hook` (else `register_forward_hook`).
    pub pre: bool,
    pub hook: VT,
    pub prepend: bool,
    pub with_kwargs: bool,
    pub always_call: bool,
    /// `handle.remove()` ran in the trace: the replay registers and removes it, as eager did
    /// (the handle counter `RemovableHandle.next_id` moves on either way).
    pub removed: bool,
}

impl HookRegistration {
    /// The registering method's name.
    pub fn method(&self) -> &'static str {
        if self.pre { "register_forward_pre_hook" } else { "register_forward_hook" }
    }
}

// Note [lock blocks]
// ~~~~~~~~~~~~~~~~~~
// `with lock:` over a `threading.Lock` or `RLock` reached through a source (transformers'
// `_hook_installation_lock`, a module-level lock guarding one-time setup) has C `__enter__` and
// `__exit__`, which the trace cannot inline. They are modelled as what they do, `acquire()` and
// `release()`, recorded as calls replayed after the graph (`SideEffects::logger_calls`, in call
// order, after the writes), and `__enter__` answers True as `acquire()` does when it blocks.
// The single-threaded observables stay eager's: after the frame the lock is as eager left it;
// a lock this thread already holds deadlocks on the replayed `acquire()` as eager's `with`
// does; an RLock's count goes up and down again. A break inside the block replays the
// `acquire()` before the breaking instruction, so the rest of the block (the break, the resume
// function) runs with the lock held and leaves through the real `lock.__exit__`
// (`VT::LockExit` rebuilds as it). What the graph computes does not run under the lock, as no
// compiled code does: its inputs were read by guards before the call. A lock the frame makes
// itself, explicit `acquire()`/`release()` calls (whose failures would surface at the replay,
// not at the call) and `locked()` stay ordinary Python (breaks).

// Note [hooks registered in the trace]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `m.register_forward_hook(hook, ...)` and `m.register_forward_pre_hook(hook, ...)` (nn.Module's
// own methods, on a module reached through a source) write `m._forward_hooks` and friends and
// return a `RemovableHandle`. The trace records a `HookRegistration` in `SideEffects::hooks`
// and answers a `VT::HookHandle`; after the graph, `dynamo._polyfills.replay_hook` calls the
// real method with the same arguments, in registration order, and `handle.remove()` on the
// handle when the trace removed it (the handle's `remove()` and its `with` block's exit set
// `removed`). A call of `m` later in the frame runs the pending hooks after the module's real
// ones, or before them with `prepend=True` (`module_hooks`), as `_call_impl` would; the guards
// on the real hook dicts describe the state before the registration, so the next call, which
// finds the hook installed, compiles again and traces it as a real hook. Reading the hook dicts
// of a module with a pending registration is a break (the read would miss it). A handle that
// outlives the graph (returned, live at a break: `h = m.register_forward_hook(...)`, a break,
// then `h.remove()`) is the real handle its replay made: the replays run right after the graph,
// before the values that outlive it are built, each handle kept in a shared temporary that the
// handle's rebuild loads (`plan_hook_replays` in `convert_frame.rs`, `emit_hook_replays`).

impl<'a> InstructionTranslator<'a> {
    /// `lock.__enter__()` (Note [lock blocks]): records the replayed `acquire()`.
    pub(crate) fn enter_lock(&mut self, py: Python<'_>, lock: &VT) -> VResult<VT> {
        self.record_lock_call(py, lock, "acquire")?;
        Ok(VT::constant(true.into_pyobject(py)?.to_owned().into_any().unbind()))
    }

    /// `lock.__exit__(*args)` (Note [lock blocks]): records the replayed `release()`; returns
    /// None, so an exception leaving the block goes on.
    pub(crate) fn exit_lock(&mut self, py: Python<'_>, lock: &VT, n_args: usize, has_kwargs: bool) -> VResult<VT> {
        if n_args != 3 || has_kwargs {
            graph_break!(ArgumentMismatch, "{}.__exit__ called with {n_args} arguments", lock.describe(py));
        }
        self.record_lock_call(py, lock, "release")?;
        Ok(VT::none(py))
    }

    fn record_lock_call(&mut self, py: Python<'_>, lock: &VT, name: &str) -> VResult<()> {
        let VT::Opaque { source, .. } = lock else { graph_break!(UnsupportedOpcode, "with block over {}", lock.describe(py)) };
        // Not counted in `SideEffects::writes`: the call is replayed in call order with the
        // logging calls, so a handler of a logging call made before the block sees the lock as
        // eager's handler does (free), and one made inside it sees it held.
        self.og.side_effects.logger_calls.push(LoggerCall {
            callee: crate::pycodegen::Callee::Source(source.attr(name)),
            args: PyTuple::empty(py).into_any().unbind(),
            lazy_args: None,
            kwargs: None,
            writes_before: self.og.side_effects.writes,
            at: self.og.top_ip,
            reorderable: true,
        });
        Ok(())
    }

    /// Whether `name` read on module `m` is nn.Module's own hook-registering method, which the
    /// trace models (Note [hooks registered in the trace]).
    pub(crate) fn is_modelled_hook_method(&mut self, py: Python<'_>, m: &Bound<'_, PyAny>, name: &str) -> VResult<bool> {
        if !matches!(name, "register_forward_hook" | "register_forward_pre_hook") {
            return Ok(false);
        }
        let own = py.import("torch.nn")?.getattr("Module")?.getattr("__dict__")?.get_item(name)?;
        let found = crate::symbolic::variables::user_defined::static_type_lookup(&m.get_type(), name)?;
        let instance = m.getattr("__dict__")?.contains(name)?;
        Ok(!instance && found.is_some_and(|(_, f)| f.is(&own)))
    }

    /// `m.register_forward_hook(hook, *, prepend, with_kwargs, always_call)` or
    /// `m.register_forward_pre_hook(hook, *, prepend, with_kwargs)` on a module with a source.
    pub(crate) fn register_module_hook(&mut self, py: Python<'_>, module: &VT, name: &str, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let VT::Module { obj, source: Some(source) } = module else {
            graph_break!(UnsupportedCall, "{name} on a module without a source");
        };
        // The hook is this instance's (Note [modules guarded by type] in `builder.rs`).
        self.pin_identity(module);
        let pre = name == "register_forward_pre_hook";
        if args.len() != 1 {
            graph_break!(ArgumentMismatch, "{name} takes 1 positional argument but {} were given", args.len());
        }
        let mut flags = [false; 3];
        for (k, v) in &kwargs {
            let slot = match (k.as_str(), pre) {
                ("prepend", _) => 0,
                ("with_kwargs", _) => 1,
                ("always_call", false) => 2,
                _ => graph_break!(ArgumentMismatch, "{name} got an unexpected keyword argument '{k}'"),
            };
            let Some(c) = v.as_constant(py).filter(|_| matches!(v, VT::Constant(_))) else {
                graph_break!(UnsupportedCall, "{name} with a non-constant '{k}'");
            };
            flags[slot] = c.is_truthy()?;
        }
        let hook = args.into_iter().next().expect("one argument");
        let reg = Rc::new(RefCell::new(HookRegistration {
            module: obj.as_ref().clone_ref(py),
            module_source: source.clone(),
            pre,
            hook,
            prepend: flags[0],
            with_kwargs: flags[1],
            always_call: flags[2],
            removed: false,
        }));
        self.og.side_effects.writes += 1;
        self.og.side_effects.hooks.push(reg.clone());
        Ok(VT::HookHandle(reg))
    }

    /// `handle.remove()` and `handle.__exit__(*exc)` of a hook registered in the trace.
    pub(crate) fn hook_handle_method(&mut self, py: Python<'_>, h: &Rc<RefCell<HookRegistration>>, name: &str, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        match (name, args.len(), kwargs.is_empty()) {
            ("remove", 0, true) | ("__exit__", 3, true) => {
                self.og.side_effects.writes += 1;
                h.borrow_mut().removed = true;
                Ok(VT::none(py))
            }
            _ => graph_break!(UnsupportedOperation, "RemovableHandle.{name} of a hook registered in the frame"),
        }
    }

    /// The hooks registered in the trace on the module at `ptr` and not removed, for
    /// `module_hooks`: (hook, with_kwargs, prepend), in registration order.
    pub(crate) fn pending_module_hooks(&self, ptr: usize, pre: bool) -> Vec<(VT, bool, bool)> {
        self.og
            .side_effects
            .hooks
            .iter()
            .map(|h| h.borrow())
            .filter(|h| h.module.as_ptr() as usize == ptr && h.pre == pre && !h.removed)
            .map(|h| (h.hook.clone(), h.with_kwargs, h.prepend))
            .collect()
    }

    /// Whether a hook registered in the trace on the module at `ptr` is pending (reads of its
    /// hook dicts then break: Note [hooks registered in the trace]).
    pub(crate) fn has_pending_hooks(&self, ptr: usize) -> bool {
        self.og.side_effects.hooks.iter().any(|h| h.borrow().module.as_ptr() as usize == ptr)
    }
}

/// The hook dict attributes `register_forward_hook` and `register_forward_pre_hook` write.
pub const HOOK_DICTS: [&str; 5] = ["_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"];
