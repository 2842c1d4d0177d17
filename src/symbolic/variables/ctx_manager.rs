//! Context managers (torch's `ctx_manager.py`): grad mode (`torch.no_grad`,
//! `enable_grad`, `set_grad_enabled`), inference-mode blocks (`torch.inference_mode`) and
//! autocast blocks (`torch.autocast`), as the trace switches them; `@contextlib.contextmanager` managers, whose generator the trace steps.

use crate::symbolic::VResult;
use pyo3::prelude::*;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::constant::const_bool;
use crate::symbolic::variables::VT;

impl<'a> InstructionTranslator<'a> {
    /// The grad mode tracing currently sees (the real global mode, switched as tracing goes).
    pub(crate) fn grad_enabled(&self, py: Python<'_>) -> VResult<bool> {
        Ok(self.og.handles.torch.bind(py).call_method0("is_grad_enabled")?.extract()?)
    }

    /// Switches grad mode at this point of the graph (a `torch._C._set_grad_enabled` node) and
    /// for the rest of tracing (fake tensors then compute `requires_grad` as eager would).
    pub(crate) fn set_grad_enabled(&mut self, py: Python<'_>, flag: bool) -> VResult<()> {
        let setter = self.og.handles.torch.bind(py).getattr("_C")?.getattr("_set_grad_enabled")?;
        self.og.record_effect(py, &setter, &[const_bool(py, flag)])?;
        setter.call1((flag,))?;
        Ok(())
    }

    // ----- values -----------------------------------------------------------------------

    /// Which grad-mode context class `c` is (`torch.no_grad`, `torch.enable_grad`,
    /// `torch.set_grad_enabled`), if any.
    pub(crate) fn grad_mode_class(&self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<Option<&'static str>> {
        let torch = self.og.handles.torch.bind(py);
        for name in ["no_grad", "enable_grad", "set_grad_enabled"] {
            if torch.getattr(name)?.is(c) {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }
}

/// A `torch.autocast` object built in the frame (Note [autocast blocks] in
/// `python/dynamo/_amp.py`): the real object, made while tracing from constant arguments, and
/// the state its `__enter__` sets, read off it (`device`, `fast_dtype`, `_enabled`,
/// `_cache_enabled`, as torch/amp/autocast_mode.py's constructor settled them, warnings and
/// all).
pub struct AutocastMode {
    pub obj: Py<PyAny>,
    pub device: String,
    /// The fast dtype: a `torch.dtype`.
    pub dtype: Py<PyAny>,
    pub enabled: bool,
    pub cache: bool,
}

/// The autocast state an autocast block's `__exit__` puts back: what its `__enter__` saved.
/// `active` is false for a block that changes nothing (Note [autocast blocks that change
/// nothing]): its exit does nothing either.
pub struct AutocastRestore {
    pub active: bool,
    pub device: String,
    pub enabled: bool,
    /// A `torch.dtype`.
    pub dtype: Py<PyAny>,
    pub cache: bool,
}

/// What a trace guarded and recorded of autocast blocks.
#[derive(Default)]
pub struct AutocastTrace {
    /// Device types whose autocast state at frame entry (enabled, fast dtype) is guarded: by
    /// the first block the trace enters for that device.
    pub guarded_devices: Vec<String>,
    /// Whether the cast cache flag at frame entry is guarded.
    pub guarded_cache: bool,
    /// Whether "autocast is off for every device type at frame entry" is guarded.
    pub guarded_all_off: bool,
    /// Whether the graph holds `enter_autocast`/`exit_autocast` or
    /// `enter_inference_mode`/`exit_inference_mode` nodes (a failed graph's rerun then puts the
    /// autocast state and the inference-mode stack back first).
    pub recorded: bool,
}

/// Whether `c` is `torch.autocast` or one of torch's own subclasses of it, whose `__enter__`
/// and `__exit__` do what `torch.autocast`'s do (a user's subclass may do more: it is inlined
/// as any context manager).
pub(crate) fn is_torch_autocast_class(py: Python<'_>, c: &Bound<'_, PyAny>) -> PyResult<bool> {
    static AUTOCAST: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let Ok(t) = c.cast::<pyo3::types::PyType>() else { return Ok(false) };
    let base = AUTOCAST.get_or_try_init(py, || -> PyResult<Py<PyAny>> { Ok(py.import("torch.amp.autocast_mode")?.getattr("autocast")?.unbind()) })?.bind(py);
    let module = c.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
    Ok(t.is_subclass(base)? && (module == "torch" || module.starts_with("torch.")))
}

impl AutocastMode {
    /// The mode of a real autocast object: its settled fields.
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<AutocastMode> {
        Ok(AutocastMode {
            device: obj.getattr("device")?.extract()?,
            dtype: obj.getattr("fast_dtype")?.unbind(),
            enabled: obj.getattr("_enabled")?.is_truthy()?,
            cache: obj.getattr("_cache_enabled")?.is_truthy()?,
            obj: obj.clone().unbind(),
        })
    }
}

thread_local! {
    /// The autocast state before the first switch the trace of the frame being converted made
    /// for real (`dynamo._amp.snapshot()`); None while it has made none.
    static AUTOCAST_AT_TRACE_START: std::cell::RefCell<Option<Py<PyAny>>> = const { std::cell::RefCell::new(None) };
}

/// Starts a frame conversion's watch of autocast switches; returns the enclosing conversion's
/// snapshot, for `end_autocast_watch`.
pub(crate) fn begin_autocast_watch() -> Option<Py<PyAny>> {
    AUTOCAST_AT_TRACE_START.with(|s| s.borrow_mut().take())
}

/// Puts the autocast state back as the conversion found it, if a trace switched it (before each
/// new trace attempt, and when the conversion ends: a graph is compiled under the state of
/// frame entry, as it will run).
pub(crate) fn restore_autocast_after_trace(py: Python<'_>) {
    let snap = AUTOCAST_AT_TRACE_START.with(|s| s.borrow().as_ref().map(|s| s.clone_ref(py)));
    if let Some(snap) = snap {
        if let Err(e) = py.import("dynamo._amp").and_then(|m| m.call_method1("restore", (snap,))) {
            tracing::warn!(target: "dynamo::convert", "restoring autocast state after a trace: {e}");
        }
    }
}

/// Ends the watch that `begin_autocast_watch` started: restores the state, and gives the
/// enclosing conversion its snapshot back.
pub(crate) fn end_autocast_watch(py: Python<'_>, outer: Option<Py<PyAny>>) {
    restore_autocast_after_trace(py);
    AUTOCAST_AT_TRACE_START.with(|s| *s.borrow_mut() = outer);
}

impl<'a> InstructionTranslator<'a> {
    /// Whether `c` is `torch.autocast` or one of torch's subclasses of it
    /// (`torch.cpu.amp.autocast`, `torch.cuda.amp.autocast`).
    pub(crate) fn is_autocast_class(&self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        Ok(is_torch_autocast_class(py, c)?)
    }

    /// `cls(*args, **kwargs)` for an autocast class with literal arguments: the object is made
    /// for real now (its constructor only validates and settles its fields; its warnings are
    /// issued when the graph runs, Note [warnings of traced calls]).
    pub(crate) fn construct_autocast(&mut self, py: Python<'_>, cls: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<VT> {
        let qual = crate::symbolic::variables::qualname(cls);
        let Some(vals) = args.iter().map(|a| self.literal_value(py, a)).collect::<Option<Vec<_>>>() else {
            crate::graph_break!(UnsupportedCall, "constructing {qual} with non-literal arguments");
        };
        let kw = pyo3::types::PyDict::new(py);
        for (k, v) in kwargs {
            match self.literal_value(py, v) {
                Some(v) => kw.set_item(k, v)?,
                None => crate::graph_break!(UnsupportedCall, "constructing {qual} with a non-literal argument '{k}'"),
            }
        }
        let catcher = py.import("dynamo.eval_frame")?.getattr("_RecordTraceWarnings")?.call0()?;
        let caught = catcher.call_method0("__enter__")?;
        let made = cls.call(pyo3::types::PyTuple::new(py, vals)?, Some(&kw));
        catcher.call_method1("__exit__", (py.None(), py.None(), py.None()))?;
        // A constructor error (an unknown device type) is the user's: raised as eager would,
        // from the trace (Note [exceptions raised by the trace]).
        let obj = made?;
        self.og.keep_trace_warnings(py, &caught)?;
        Ok(VT::AutocastCtx(std::rc::Rc::new(AutocastMode::of(&obj)?)))
    }

    /// BEFORE_WITH over an autocast object: guards the state the block saves (the frame
    /// entry's, for the first block of each device type), records an `enter_autocast` node and
    /// switches the state for real, so that fake tensors take autocast's dtypes. Returns what
    /// the block's `__exit__` puts back.
    ///
    /// Note [autocast blocks that change nothing]: transformers' rotary embeddings run under
    /// `torch.autocast(device_type, enabled=False)` to keep float32 under an ambient autocast.
    /// Without one, that block changes nothing an op sees, yet a graph holding autocast nodes
    /// runs through torch (no kernels). So a block that disables autocast while it is off for
    /// every device type, and keeps the fast dtype and the cache flag as they are, is neither
    /// recorded nor made: the state it would set equals the state it finds (its nesting
    /// count aside, whose return to zero only clears a cast cache that is empty while autocast
    /// is off everywhere). "Off everywhere" is guarded, so an ambient autocast recompiles.
    pub(crate) fn enter_autocast(&mut self, py: Python<'_>, m: &AutocastMode) -> VResult<AutocastRestore> {
        let torch = self.og.handles.torch.bind(py).clone();
        let device = pyo3::types::PyTuple::new(py, [m.device.as_str()])?;
        let enabled_q = torch.getattr("is_autocast_enabled")?;
        let dtype_q = torch.getattr("get_autocast_dtype")?;
        let cache_q = torch.getattr("is_autocast_cache_enabled")?;
        let bool_obj = |b: bool| pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind();
        let mut prev = AutocastRestore {
            active: true,
            device: m.device.clone(),
            enabled: enabled_q.call1(&device)?.is_truthy()?,
            dtype: dtype_q.call1(&device)?.unbind(),
            cache: cache_q.call0()?.is_truthy()?,
        };
        if !self.og.autocast.guarded_devices.contains(&m.device) {
            self.og.autocast.guarded_devices.push(m.device.clone());
            self.og.add_guard(None, crate::guards::GuardKind::GlobalQuery { func: enabled_q.clone().unbind(), args: device.clone().unbind(), expected: bool_obj(prev.enabled) });
            self.og.add_guard(None, crate::guards::GuardKind::GlobalQuery { func: dtype_q.unbind(), args: device.clone().unbind(), expected: prev.dtype.clone_ref(py) });
        }
        if !self.og.autocast.guarded_cache {
            self.og.autocast.guarded_cache = true;
            self.og.add_guard(None, crate::guards::GuardKind::GlobalQuery { func: cache_q.unbind(), args: pyo3::types::PyTuple::empty(py).unbind(), expected: bool_obj(prev.cache) });
        }
        let same_dtype = m.dtype.bind(py).eq(prev.dtype.bind(py))?;
        if !m.enabled && !prev.enabled && same_dtype && m.cache == prev.cache {
            let devices = py.import("dynamo._amp")?.getattr("_DEVICES")?;
            let mut all_off = true;
            for d in devices.try_iter()? {
                all_off &= !enabled_q.call1((d?,))?.is_truthy()?;
            }
            if all_off {
                if !self.og.autocast.guarded_all_off {
                    self.og.autocast.guarded_all_off = true;
                    for d in devices.try_iter()? {
                        let args = pyo3::types::PyTuple::new(py, [d?])?.unbind();
                        self.og.add_guard(None, crate::guards::GuardKind::GlobalQuery { func: enabled_q.clone().unbind(), args, expected: bool_obj(false) });
                    }
                }
                prev.active = false;
                return Ok(prev);
            }
        }
        let args = [m.device.clone().into_pyobject(py)?.into_any().unbind(), m.dtype.clone_ref(py), bool_obj(m.enabled), bool_obj(m.cache)];
        self.autocast_switch(py, "enter_autocast", args)?;
        Ok(prev)
    }

    /// Calling an autocast block's `__exit__`: records `exit_autocast` and leaves the block for
    /// real. Returns None (false: autocast swallows no exception).
    pub(crate) fn exit_autocast(&mut self, py: Python<'_>, r: &AutocastRestore) -> VResult<VT> {
        if !r.active {
            return Ok(VT::none(py));
        }
        let args = [r.device.clone().into_pyobject(py)?.into_any().unbind(), pyo3::types::PyBool::new(py, r.enabled).to_owned().into_any().unbind(), r.dtype.clone_ref(py), pyo3::types::PyBool::new(py, r.cache).to_owned().into_any().unbind()];
        self.autocast_switch(py, "exit_autocast", args)?;
        Ok(crate::symbolic::variables::VT::none(py))
    }

    /// Records a call of `dynamo._amp.<name>(*args)` in the graph and makes it for real, after
    /// keeping the state from before the trace's first switch (`restore_autocast_after_trace`).
    fn autocast_switch(&mut self, py: Python<'_>, name: &str, args: [Py<PyAny>; 4]) -> VResult<()> {
        self.mode_switch(py, name, &args)
    }

    /// Whether `c` is `torch.inference_mode` (torch/autograd/grad_mode.py).
    pub(crate) fn is_inference_mode_class(&self, py: Python<'_>, c: &Bound<'_, PyAny>) -> VResult<bool> {
        Ok(self.og.handles.torch.bind(py).getattr("inference_mode")?.is(c))
    }

    /// BEFORE_WITH over `torch.inference_mode(mode)` (Note [inference-mode blocks] in
    /// `python/dynamo/_amp.py`): records an `enter_inference_mode(mode)` node and enters the
    /// mode for real, so that fake tensors made in the block are inference tensors and grad
    /// mode reads as c10::InferenceMode sets it (off for `mode=True`, on for `mode=False`).
    pub(crate) fn enter_inference_mode(&mut self, py: Python<'_>, mode: bool) -> VResult<()> {
        self.mode_switch(py, "enter_inference_mode", &[pyo3::types::PyBool::new(py, mode).to_owned().into_any().unbind()])
    }

    /// The block's `__exit__`: records `exit_inference_mode()` and leaves the block for real
    /// (the autograd state from before the block comes back, grad mode included).
    pub(crate) fn exit_inference_mode(&mut self, py: Python<'_>) -> VResult<()> {
        self.mode_switch(py, "exit_inference_mode", &[])
    }

    /// Records a call of `dynamo._amp.<name>(*args)`, a switch of thread-local modes, in the
    /// graph and makes it for real, after keeping the state from before the trace's first switch
    /// (`restore_autocast_after_trace` puts it back).
    fn mode_switch(&mut self, py: Python<'_>, name: &str, args: &[Py<PyAny>]) -> VResult<()> {
        let amp = py.import("dynamo._amp")?;
        let started = AUTOCAST_AT_TRACE_START.with(|s| s.borrow().is_some());
        if !started {
            let snap = amp.call_method0("snapshot")?.unbind();
            AUTOCAST_AT_TRACE_START.with(|s| *s.borrow_mut() = Some(snap));
        }
        self.og.autocast.recorded = true;
        let f = amp.getattr(name)?;
        let vts: Vec<VT> = args.iter().map(|a| VT::constant(a.clone_ref(py))).collect();
        self.og.record_effect(py, &f, &vts)?;
        f.call1(pyo3::types::PyTuple::new(py, args)?)?;
        Ok(())
    }
}

/// Runs `f` (the backend's compile) under the autocast state of frame entry, as the graph will
/// run, then puts back the state the trace left (the rest of the conversion goes on from
/// there). Without a switch in the trace, just `f()`.
pub(crate) fn with_entry_autocast<T>(py: Python<'_>, f: impl FnOnce() -> T) -> PyResult<T> {
    let start = AUTOCAST_AT_TRACE_START.with(|s| s.borrow().as_ref().map(|s| s.clone_ref(py)));
    let Some(start) = start else { return Ok(f()) };
    let amp = py.import("dynamo._amp")?;
    let after = amp.call_method0("snapshot")?;
    amp.call_method1("restore", (start,))?;
    let out = f();
    amp.call_method1("restore", (after,))?;
    Ok(out)
}

/// A `@contextlib.contextmanager` manager made in the frame (Note [generator context managers]).
pub struct GeneratorCtx {
    /// The generator `func(*args, **kwds)` made (a lazy `IterKind::Generator`).
    pub gen: std::rc::Rc<std::cell::RefCell<crate::symbolic::variables::IteratorState>>,
    /// Set by its `__enter__`: a second one raises in eager (`del self.args` fails).
    pub entered: bool,
    /// The instruction of the converted frame that made it (`OutputGraph::top_ip`): where a
    /// break goes when it would have to outlive the graph (a half-run generator cannot be
    /// rebuilt), so the whole `with` block runs as ordinary Python.
    pub made_at: (usize, usize),
    /// The instruction of the converted frame that entered it (its BEFORE_WITH, or the call
    /// that entered it inside), once entered.
    pub entered_at: Option<(usize, usize)>,
    /// How to make the manager again before it is entered: the `@contextmanager` helper's
    /// source and the call's arguments (Note [generator context managers across a break]).
    /// `None` for a helper without a source.
    pub remake: Option<(std::sync::Arc<crate::source::Source>, Vec<VT>, Vec<(String, VT)>)>,
}

impl GeneratorCtx {
    /// Where a graph break that this manager must outlive goes (Note [generator context
    /// managers across a break]): the instruction that entered it when it can be made again
    /// before that (the manager, not entered there yet, is rebuilt and entered by Python),
    /// else the instruction that made it.
    pub fn break_point(&self) -> (usize, usize) {
        match (self.entered_at, &self.remake) {
            (Some(at), Some(_)) => at,
            _ => self.made_at,
        }
    }
}

/// Whether `f` is the `helper` that `contextlib.contextmanager(func)` returns (its code is that
/// of every such helper; `func` is its only free variable).
pub(crate) fn is_contextmanager_helper(py: Python<'_>, f: &Bound<'_, PyAny>) -> PyResult<bool> {
    static HELPER_CODE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let helper_code = HELPER_CODE.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let contextlib = py.import("contextlib")?;
        Ok(contextlib.getattr("contextmanager")?.call1((contextlib.getattr("nullcontext")?,))?.getattr("__code__")?.unbind())
    })?;
    Ok(f.getattr("__code__").is_ok_and(|code| code.is(helper_code.bind(py))))
}

impl<'a> InstructionTranslator<'a> {
    /// Note [generator context managers]: calling a `@contextmanager` function makes a
    /// `_GeneratorContextManager` over `func(*args, **kwds)` (Lib/contextlib.py). The trace
    /// keeps the generator itself, lazy (a generator frame stepped by the trace, torch's own
    /// included): `__enter__` is one step of it, whose yielded value the block binds (none:
    /// eager's `RuntimeError("generator didn't yield")`); a normal exit is one more step,
    /// which must end the generator (another yield: `RuntimeError("generator didn't stop")`),
    /// so the code after `yield` (its `finally` blocks too) runs where eager runs it. An
    /// exception thrown into the generator (the block raised) is not modelled: a break. A
    /// half-run generator cannot be rebuilt, so a break inside the block moves before it.
    ///
    /// Note [generator context managers across a break]: "before it" is the instruction that
    /// entered the manager (its BEFORE_WITH) when the helper has a source: at that point the
    /// manager is not entered yet, its generator not started, so it is rebuilt by calling the
    /// helper again with the same arguments (`dynamo._polyfills.remake_generator_ctx`; making a
    /// generator runs none of its code), and Python enters it, the resume function continuing
    /// inside the block with the real manager's `__exit__`. Else it is the instruction that
    /// made the manager, which then runs as ordinary Python with the whole block. The graph
    /// keeps the code before the `with`, and the break is one, not one at the call that made the
    /// manager and another at the traced `__enter__` of the real one (its `del self.args`).
    pub(crate) fn make_generator_ctx(&mut self, py: Python<'_>, helper: &Bound<'_, PyAny>, source: Option<std::sync::Arc<crate::source::Source>>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        let func = helper.getattr("__closure__")?.get_item(0)?.getattr("cell_contents")?;
        let func_source = source.as_ref().map(|s| s.attr("__closure__").item(crate::source::ItemKey::Int(0)).attr("cell_contents"));
        let func_vt = self.wrap_from(py, &func, func_source)?;
        if !matches!(func_vt, VT::Function { .. }) {
            crate::graph_break!(UnsupportedCall, "contextmanager over {}", func_vt.describe(py));
        }
        let remake = source.map(|s| (s, args.clone(), kwargs.clone()));
        self.og.lazy_generator_call = true;
        let made = self.call(py, &func_vt, args, kwargs);
        self.og.lazy_generator_call = false;
        match made? {
            VT::Iterator(gen) if matches!(gen.borrow().kind, crate::symbolic::variables::IterKind::Generator(_)) => {
                let made_at = self.og.top_ip;
                self.og.generator_ctx_made_at.insert(std::rc::Rc::as_ptr(&gen) as usize, made_at);
                Ok(VT::GeneratorCtx(std::rc::Rc::new(std::cell::RefCell::new(GeneratorCtx { gen, entered: false, made_at, entered_at: None, remake }))))
            }
            other => crate::graph_break!(UnsupportedCall, "contextmanager whose function gave {}", other.describe(py)),
        }
    }

    /// BEFORE_WITH over a generator context manager: the first step of its generator.
    pub(crate) fn enter_generator_ctx(&mut self, py: Python<'_>, ctx: &std::rc::Rc<std::cell::RefCell<GeneratorCtx>>) -> VResult<(VT, VT)> {
        if ctx.borrow().entered {
            crate::graph_break!(RaisesException, "a generator context manager entered twice (AttributeError)");
        }
        ctx.borrow_mut().entered = true;
        ctx.borrow_mut().entered_at = Some(self.og.top_ip);
        let gen = ctx.borrow().gen.clone();
        // A break inside the block goes to this instruction when the manager can be made again
        // (Note [generator context managers across a break]).
        let point = ctx.borrow().break_point();
        self.og.generator_ctx_made_at.insert(std::rc::Rc::as_ptr(&gen) as usize, point);
        match self.step_iter(py, &gen)? {
            Some(v) => Ok((VT::GeneratorCtxExit(ctx.clone()), v)),
            None => crate::graph_break!(RaisesException, "generator didn't yield (RuntimeError)"),
        }
    }

    /// `__exit__(None, None, None)` of a generator context manager's block: the generator's
    /// last step. Returns False (nothing to swallow).
    pub(crate) fn exit_generator_ctx(&mut self, py: Python<'_>, ctx: &std::rc::Rc<std::cell::RefCell<GeneratorCtx>>, args: &[VT]) -> VResult<VT> {
        let gen = ctx.borrow().gen.clone();
        let normal = args.len() == 3 && args.iter().all(|a| a.as_constant(py).is_some_and(|c| c.is_none()));
        if !normal {
            // Note [generator context managers that raise]: contextlib's `__exit__` with an
            // exception throws it into the generator at its `yield` (Note [generator throw]):
            // caught and finished, the exception is suppressed (`exc is not value`: True);
            // the same exception let through (a `finally` around the yield) is not (False);
            // a generator that yields again is eager's RuntimeError, left to Python.
            let value = args.get(1).and_then(|v| v.as_constant(py)).filter(|v| v.is_instance_of::<pyo3::exceptions::PyBaseException>());
            let Some(value) = value else {
                crate::graph_break!(UnsupportedCall, "an exception thrown into a generator context manager");
            };
            return match self.throw_into_generator(py, &gen, &value)? {
                crate::symbolic::variables::iter::Thrown::Finished => Ok(const_bool(py, true)),
                crate::symbolic::variables::iter::Thrown::Propagated => Ok(const_bool(py, false)),
                crate::symbolic::variables::iter::Thrown::Yielded(_) => crate::graph_break!(RaisesException, "generator didn't stop after throw() (RuntimeError)"),
            };
        }
        match self.step_iter(py, &gen)? {
            Some(_) => crate::graph_break!(RaisesException, "generator didn't stop (RuntimeError)"),
            None => Ok(const_bool(py, false)),
        }
    }
}
