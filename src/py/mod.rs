//! Python-facing functions of `dynamo._C` (the binding surface lives in `lib.rs`).

pub mod getattr;
pub mod input_plan;

use crate::counters;
use crate::eval_frame::{cache, hook};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::atomic::Ordering;

/// Sets this thread's eval-frame callback (`None`: off, `False`: run cached code only, a
/// callable `backend(gm, example_inputs)`: compile) and returns the previous one.
#[pyfunction]
pub fn set_eval_frame(py: Python<'_>, callback: &Bound<'_, PyAny>) -> Py<PyAny> {
    crate::logging::init();
    hook::set_eval_frame(py, callback)
}

/// Frames of files under `skip` folders are never compiled, unless a longer `keep` folder
/// (site-packages beneath the standard library) also matches.
#[pyfunction]
pub fn set_skip_prefixes(skip: Vec<String>, keep: Vec<String>) {
    hook::set_skip_prefixes(skip, keep);
}

/// Marks a code object so its frames always run eagerly.
#[pyfunction]
pub fn skip_code(py: Python<'_>, code: &Bound<'_, PyAny>) {
    hook::mark_skip(py, code);
}

/// Marks a code object so its frames run with the hook off until they return (Note [torch's
/// disable]).
#[pyfunction]
pub fn skip_code_recursive(py: Python<'_>, code: &Bound<'_, PyAny>) {
    hook::mark_skip_recursive(py, code);
}

/// Compiles frames of `code` even when its file is skipped (torch's own module forwards).
#[pyfunction]
pub fn force_compile(code: &Bound<'_, PyAny>) {
    hook::force_compile(code);
}

/// The `__exit__` of a `torch.no_grad()` / `torch.enable_grad()` / `torch.set_grad_enabled()`
/// block whose body was cut by a graph break: the resume function calls it as the block ends
/// (with `None`s, or the exception's type, value and traceback) and it restores grad mode
/// `restore`, the mode before the block (torch/autograd/grad_mode.py). Returns `False`: an
/// exception is never swallowed.
#[pyclass(module = "dynamo._C", frozen)]
pub struct GradModeRestore {
    /// The grad mode the call switches to.
    #[pyo3(get)]
    pub restore: bool,
}

#[pymethods]
impl GradModeRestore {
    #[pyo3(signature = (*_args))]
    fn __call__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        py.import("torch")?.getattr("_C")?.call_method1("_set_grad_enabled", (self.restore,))?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<grad mode restore to {}>", self.restore)
    }
}

/// Called by transformed code when an exception leaves a resume function it called (Note
/// [resume frames in tracebacks] in `pycodegen`): drops the first entry of `exc`'s traceback,
/// the one CPython added for the calling frame, when more follow, and returns `exc` for the
/// RERAISE that follows.
#[pyfunction]
pub fn drop_traceback_head<'py>(exc: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let tb = exc.getattr("__traceback__")?;
    if !tb.is_none() {
        let next = tb.getattr("tb_next")?;
        if !next.is_none() {
            exc.setattr("__traceback__", next)?;
        }
    }
    Ok(exc)
}

/// Called by transformed code when an exception leaves the loop driver it called (Note [loop
/// bodies as functions]): drops the first entry of `exc`'s traceback, the calling frame's at
/// its `for` line, when the next one is a frame of a loop body (a function of the same name:
/// body functions are named as the original), whose line is the one eager's traceback shows;
/// an error of the iterator keeps it. Returns `exc` for the RERAISE that follows.
#[pyfunction]
pub fn drop_loop_traceback_head<'py>(exc: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let tb = exc.getattr("__traceback__")?;
    if tb.is_none() {
        return Ok(exc);
    }
    let next = tb.getattr("tb_next")?;
    if next.is_none() {
        return Ok(exc);
    }
    let name = |t: &Bound<'py, PyAny>| t.getattr("tb_frame").and_then(|f| f.getattr("f_code")).and_then(|c| c.getattr("co_name")).and_then(|n| n.extract::<String>());
    if name(&tb)? == name(&next)? {
        exc.setattr("__traceback__", next)?;
    }
    Ok(exc)
}

/// Called by transformed code when its graph raised (Note [graph failure reruns the frame]):
/// restores grad mode `grad_enabled` (the frame's on entry), counts and logs the failure, and
/// re-raises `exc` unless it is an `Exception` (KeyboardInterrupt and SystemExit propagate).
/// The frame then reruns as its original code, which raises the error for the user.
/// `torch.utils.checkpoint`'s `_StopRecomputationError` is re-raised too: a saved-tensor hook
/// raises it to end a recomputation early (the backward of a non-reentrant checkpoint run
/// inside the optimized region), and a rerun would recompute past the stop (torch asserts).
/// `snapshot` (from `snapshot_inputs`, when the graph may write its inputs) is put back first,
/// so the rerun starts from the inputs the frame received.
#[pyfunction]
#[pyo3(signature = (exc, grad_enabled, snapshot=None))]
pub fn graph_failed(py: Python<'_>, exc: Bound<'_, PyAny>, grad_enabled: bool, snapshot: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    py.import("torch")?.getattr("_C")?.call_method1("_set_grad_enabled", (grad_enabled,))?;
    // The autocast state of the graph's entry comes back whatever happens next (a
    // KeyboardInterrupt, a call left unprotected): the graph stands for `with autocast` blocks
    // whose `__exit__` would have run on the way out (audit 50, L5).
    let mut reraise = false;
    if let Some(list) = snapshot.as_ref().and_then(|s| s.cast::<PyList>().ok()) {
        for pair in list.iter() {
            if !pair.get_item(0)?.is_none() {
                continue;
            }
            let (kind, state): (String, Bound<'_, PyAny>) = pair.get_item(1)?.extract()?;
            match kind.as_str() {
                "autocast" => {
                    py.import("dynamo._amp")?.call_method1("restore", (state,))?;
                }
                "reraise" => reraise = true,
                _ => {}
            }
        }
    }
    if reraise {
        // `snapshot_inputs_first_call_autocast` kept only the autocast state for this call.
        return Err(PyErr::from_value(exc));
    }
    if snapshot.as_ref().is_some_and(|s| s.is_instance_of::<pyo3::types::PyBool>()) {
        // `snapshot_inputs_first_call` kept nothing for this call: the graph ran unprotected.
        return Err(PyErr::from_value(exc));
    }
    if !exc.is_instance_of::<pyo3::exceptions::PyException>() {
        return Err(PyErr::from_value(exc));
    }
    let ty = exc.get_type();
    if ty.name().is_ok_and(|n| n == "_StopRecomputationError")
        && ty.getattr("__module__").is_ok_and(|m| m.extract::<&str>().is_ok_and(|m| m == "torch.utils.checkpoint"))
    {
        return Err(PyErr::from_value(exc));
    }
    if let Some(snap) = snapshot {
        // `t.copy_(saved)` with grad off (a leaf that requires grad may be written back too).
        let torch_c = py.import("torch")?.getattr("_C")?;
        let was = torch_c.call_method0("is_grad_enabled")?;
        torch_c.call_method1("_set_grad_enabled", (false,))?;
        let restored = (|| -> PyResult<()> {
            let torch = py.import("torch")?;
            for pair in snap.try_iter()? {
                let pair = pair?;
                let target = pair.get_item(0)?;
                if target.is_none() {
                    // A generator's state from `snapshot_inputs_and_rng`: ("cpu" | "cuda", state),
                    // or the autocast state from `snapshot_inputs_and_autocast`.
                    let (kind, state): (String, Bound<'_, PyAny>) = pair.get_item(1)?.extract()?;
                    match kind.as_str() {
                        // Put back above.
                        "autocast" => continue,
                        // `snapshot_inputs_first_call`'s counter: a graph that failed once is
                        // protected on every later call.
                        "first_calls" => {
                            state.set_item(0, -1)?;
                            continue;
                        }
                        "cpu" => torch.call_method1("set_rng_state", (state,))?,
                        _ => torch.getattr("cuda")?.call_method1("set_rng_state_all", (state,))?,
                    };
                    continue;
                }
                // An in-place op may have changed the tensor's layout or storage (`t_`,
                // `unsqueeze_`, `as_strided_`, `set_`): put those back first, then the values.
                let (storage, offset, size, stride) = pair.get_item(2)?.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
                let now_storage = target.call_method0("untyped_storage")?;
                let same_layout = now_storage.call_method0("data_ptr")?.eq(storage.call_method0("data_ptr")?)?
                    && target.call_method0("storage_offset")?.eq(&offset)?
                    && target.call_method0("size")?.eq(&size)?
                    && target.call_method0("stride")?.eq(&stride)?;
                if !same_layout {
                    target.call_method1("set_", (storage, offset, size, stride))?;
                }
                target.call_method1("copy_", (pair.get_item(1)?,))?;
            }
            Ok(())
        })();
        torch_c.call_method1("_set_grad_enabled", (was,))?;
        if restored.is_err() {
            // Without the inputs of the call the rerun would not be eager's: the graph's own
            // error, which is eager's, goes to the user instead.
            tracing::info!(target: "dynamo::graph_breaks", "graph raised {}; its inputs could not be put back, so the frame is not rerun", exc.repr().map(|r| r.to_string()).unwrap_or_default());
            return Err(PyErr::from_value(exc));
        }
    }
    crate::counters::bump(&crate::counters::c::graph_failures);
    tracing::info!(target: "dynamo::graph_breaks", "graph raised {}: rerunning the frame as ordinary Python", exc.repr().map(|r| r.to_string()).unwrap_or_default());
    Ok(())
}

/// `[(t, copy of t, (storage, storage_offset, size, stride)), ...]` for the tensors `inputs`:
/// what transformed code keeps of the inputs its graph may write, so that `graph_failed` can put
/// them back, layout and values (Note [graph failure reruns the frame]). The copies are detached
/// (`t.detach().clone()`), with the same strides where the tensor is dense (`clone` preserves
/// them); `storage` is `t.untyped_storage()`. Inputs that are not tensors are skipped.
#[pyfunction(signature = (*inputs))]
pub fn snapshot_inputs<'py>(py: Python<'py>, inputs: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyList>> {
    let tensor = py.import("torch")?.getattr("Tensor")?;
    let out = PyList::empty(py);
    for t in inputs.iter() {
        if t.is_instance(&tensor)? {
            let copy = t.call_method0("detach")?.call_method0("clone")?;
            let layout = (t.call_method0("untyped_storage")?, t.call_method0("storage_offset")?, t.call_method0("size")?, t.call_method0("stride")?);
            out.append((t, copy, layout))?;
        }
    }
    Ok(out)
}

/// `snapshot_inputs(*inputs)` plus the states of the random number generators, as
/// `(None, ("cpu", torch.get_rng_state()))` and, once CUDA is initialized,
/// `(None, ("cuda", torch.cuda.get_rng_state_all()))`: kept for a graph that draws random numbers
/// and may raise on values, so that the rerun after a failure draws what eager draws (Note
/// [graph failure reruns the frame]).
#[pyfunction(signature = (*inputs))]
pub fn snapshot_inputs_and_rng<'py>(py: Python<'py>, inputs: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyList>> {
    let out = snapshot_inputs(py, inputs)?;
    let torch = py.import("torch")?;
    out.append((py.None(), ("cpu", torch.call_method0("get_rng_state")?)))?;
    let cuda = torch.getattr("cuda")?;
    if cuda.call_method0("is_initialized")?.is_truthy()? {
        out.append((py.None(), ("cuda", cuda.call_method0("get_rng_state_all")?)))?;
    }
    Ok(out)
}

/// `snapshot_inputs(*inputs)` (with the generators' states too when `rng`, as
/// `snapshot_inputs_and_rng`) plus the thread's autocast state, as
/// `(None, ("autocast", dynamo._amp.snapshot()))`: kept for a graph that enters or leaves an
/// autocast block, so that the rerun after a failure starts from the state of frame entry
/// (Note [autocast blocks] in `python/dynamo/_amp.py`).
#[pyfunction(signature = (rng, *inputs))]
pub fn snapshot_inputs_and_autocast<'py>(py: Python<'py>, rng: bool, inputs: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyList>> {
    let out = if rng { snapshot_inputs_and_rng(py, inputs)? } else { snapshot_inputs(py, inputs)? };
    out.append((py.None(), ("autocast", py.import("dynamo._amp")?.call_method0("snapshot")?)))?;
    Ok(out)
}

/// Bytes of written inputs above which `snapshot_inputs_first_call` keeps no copy (an
/// optimizer step over a large model would double its memory on its first call).
const FIRST_CALL_SNAPSHOT_LIMIT: u64 = 1 << 30;

/// `snapshot_inputs(*inputs)` for the first call of a graph that writes its inputs and has no op
/// known to raise on values (Note [graph failure reruns the frame]): such a graph can still
/// raise where its fake-tensor trace did not (a kernel without an implementation for the dtype,
/// `x & x` of floats; a dim check the meta function lacks), and it does so on its first call.
/// `counter` is the graph's one-item list: calls left to protect (it starts at 1), or -1 once
/// the graph failed (then every call is protected); it is counted down here. Returns `False`
/// (nothing kept: `graph_failed` re-raises) once the count is spent or when the inputs exceed
/// `FIRST_CALL_SNAPSHOT_LIMIT` bytes; else the snapshot list, ending with
/// `(None, ("first_calls", counter))` so that a failure marks the counter.
#[pyfunction(signature = (counter, *inputs))]
pub fn snapshot_inputs_first_call<'py>(py: Python<'py>, counter: &Bound<'py, PyList>, inputs: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
    let left: i64 = counter.get_item(0)?.extract()?;
    if left == 0 {
        return Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any());
    }
    if left > 0 {
        counter.set_item(0, left - 1)?;
    }
    let tensor = py.import("torch")?.getattr("Tensor")?;
    let mut bytes = 0u64;
    for t in inputs.iter() {
        if t.is_instance(&tensor)? {
            let (n, size): (u64, u64) = (t.call_method0("numel")?.extract()?, t.call_method0("element_size")?.extract()?);
            bytes += n * size;
        }
    }
    if bytes > FIRST_CALL_SNAPSHOT_LIMIT {
        return Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any());
    }
    let out = snapshot_inputs(py, inputs)?;
    out.append((py.None(), ("first_calls", counter)))?;
    Ok(out.into_any())
}

/// `snapshot_inputs_first_call` for a graph that also enters or leaves an autocast block: the
/// autocast state is kept on every call, so that `graph_failed` puts it back whatever the graph
/// raises; once the count is spent (or the inputs are too large) the list holds it alone, with
/// `(None, ("reraise", None))`: the error goes to the user as the unprotected call's would.
#[pyfunction(signature = (counter, *inputs))]
pub fn snapshot_inputs_first_call_autocast<'py>(py: Python<'py>, counter: &Bound<'py, PyList>, inputs: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyList>> {
    let autocast = (py.None(), ("autocast", py.import("dynamo._amp")?.call_method0("snapshot")?));
    let kept = snapshot_inputs_first_call(py, counter, inputs)?;
    let out = match kept.cast_into::<PyList>() {
        Ok(list) => list,
        Err(_) => {
            let out = PyList::empty(py);
            out.append((py.None(), ("reraise", py.None())))?;
            out
        }
    };
    out.append(autocast)?;
    Ok(out)
}

/// How transformed code replays a dict's new contents (key order included) after the graph.
/// When the keys are the same, in the same order, only the values are assigned: the dict's
/// size and layout stay as they are, so an iterator walking it (Note [rebuilt iterators]) goes
/// on as in CPython. Otherwise the keys are rewritten as eager's own writes left them (Note
/// [dict rewrites keep the layout]). An exact dict is written through `PyDict_*`; anything
/// else through `d.clear(); d.update(items)`. Raises what those raise.
#[pyfunction]
#[pyo3(signature = (d, items, key_ops=None))]
pub fn replace_dict(d: &Bound<'_, PyAny>, items: &Bound<'_, PyAny>, key_ops: Option<&Bound<'_, PyTuple>>) -> PyResult<()> {
    if let (Ok(a), Ok(b)) = (d.cast::<PyDict>(), items.cast::<PyDict>()) {
        if a.get_type().is(d.py().get_type::<PyDict>()) {
            return rewrite_dict_keys(a, b, key_ops);
        }
    }
    d.call_method0("clear")?;
    d.call_method1("update", (items,))?;
    Ok(())
}

/// Applies `ops` (`rewrite_dict_keys`'s `key_ops`) to `d` in order; false at the first op the
/// dict contradicts (an insertion of a key it has, a deletion of one it lacks), where it stops.
fn apply_key_ops(d: &Bound<'_, PyDict>, ops: &Bound<'_, PyTuple>) -> PyResult<bool> {
    for op in ops.iter() {
        let (kind, k): (u8, Bound<'_, PyAny>) = op.extract()?;
        match kind {
            0 if !d.contains(&k)? => d.set_item(&k, d.py().None())?,
            1 if d.contains(&k)? => d.del_item(&k)?,
            2 => d.clear(),
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// Whether dict key `x` (stored) and `y` (of the new contents) are the same key object as far
/// as a replay can tell: the same object, or equal and of the same type. An equal key of
/// another type (`2` and `2.0`, `1` and `True`) is another object: a dict keeps the key it
/// stored first when an equal key is assigned (`insertdict` only replaces the value), so new
/// contents holding the other one mean the program deleted the key and inserted the other.
fn same_key(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> bool {
    x.is(y) || (x.get_type().is(y.get_type()) && x.eq(y).unwrap_or(false))
}

/// Note [dict rewrites keep the layout]: CPython's dict keeps its entries in a table in
/// insertion order; a deletion leaves a hole and an insertion appends, until a resize
/// compacts the table (Objects/dictobject.c). A dict iterator walks the table by position, so
/// a loop over a dict that its body changes (the move-to-end idiom `del d[k]; d[k] = v`) sees
/// the table, not just the order of the keys. Writing a dict's new contents as `clear()` then
/// the items would compact it, and an iterator over it (a loop the LoopDriver runs, or one
/// continued in a resume function) would skip or repeat keys. So the keys are rewritten the
/// way the program's own writes would leave them: the longest prefix of the new keys that
/// appears in the old dict in the same relative order stays in place; every other old key is
/// deleted (in the old order), and the rest of the new keys are inserted (in the new order);
/// then every value is assigned. For keys that were each deleted or moved at most once this is
/// the table eager leaves, except when a resize falls between an insertion and a deletion.
/// Exact is replaying the trace's own key changes in order (`key_ops`: `(0, k)` inserts `k`,
/// `(1, k)` deletes it, `(2, None)` clears; `symbolic::variables::dicts::DictState::key_ops`):
/// the same insertions and deletions from the same table give the same table, resizes
/// included. They are used when they lead to the new keys in the new order (a trace whose log
/// missed a change falls back to the rewrite above).
fn rewrite_dict_keys(d: &Bound<'_, PyDict>, items: &Bound<'_, PyDict>, key_ops: Option<&Bound<'_, PyTuple>>) -> PyResult<()> {
    let same = same_key;
    let same_order = |d: &Bound<'_, PyDict>| d.len() == items.len() && d.keys().iter().zip(items.keys().iter()).all(|(x, y)| same(&x, &y));
    if let Some(ops) = key_ops.filter(|_| !same_order(d)) {
        // Replayed on a copy first: a log that does not reach the new keys leaves `d` as it was.
        let trial = d.copy()?;
        if apply_key_ops(&trial, ops)? && same_order(&trial) {
            apply_key_ops(d, ops)?;
        }
    }
    let old: Vec<Bound<'_, PyAny>> = d.keys().iter().collect();
    let new: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = items.iter().collect();
    if old.len() == new.len() && old.iter().zip(new.iter()).all(|(x, (y, _))| same(x, y)) {
        for (k, v) in &new {
            d.set_item(k, v)?;
        }
        return Ok(());
    }
    // The kept prefix: new keys matched, in order, against the old keys from left to right.
    let mut kept = 0;
    let mut at = 0;
    'outer: for (k, _) in &new {
        while at < old.len() {
            if same(&old[at], k) {
                kept += 1;
                at += 1;
                continue 'outer;
            }
            at += 1;
        }
        break;
    }
    let kept_keys = pyo3::types::PySet::new(d.py(), new[..kept].iter().map(|(k, _)| k))?;
    for k in &old {
        if !kept_keys.contains(k)? {
            d.del_item(k)?;
        }
    }
    for (k, v) in &new {
        d.set_item(k, v)?;
    }
    Ok(())
}

/// `replace_dict` for the storage of a `dict` subclass instance: the same writes through
/// `PyDict_Clear`/`PyDict_SetItem`, past any `clear`/`__setitem__` the subclass defines (Note
/// [dict subclass objects from outside the frame] in `symbolic::variables::user_defined`); for
/// an `OrderedDict`, through `OrderedDict.clear`/`OrderedDict.__setitem__`, which keep its
/// linked list, with `items` in its order.
#[pyfunction]
#[pyo3(signature = (d, items, key_ops=None))]
pub fn replace_dict_storage(d: &Bound<'_, PyDict>, items: &Bound<'_, PyDict>, key_ops: Option<&Bound<'_, PyTuple>>) -> PyResult<()> {
    let odict = d.py().import("collections")?.getattr("OrderedDict")?;
    if d.is_instance(&odict)? {
        // Note [OrderedDict objects from outside the frame]: `items` are in linked-list order,
        // which OrderedDict's own C methods keep (dict's would leave the list stale).
        let keys = odict.getattr("keys")?.call1((d,))?;
        let same_keys = d.len() == items.len() && keys.try_iter()?.zip(items.keys().iter()).all(|(x, y)| x.is_ok_and(|x| same_key(&x, &y)));
        if !same_keys {
            odict.getattr("clear")?.call1((d,))?;
        }
        let set = odict.getattr("__setitem__")?;
        for (k, v) in items.iter() {
            set.call1((d, k, v))?;
        }
        return Ok(());
    }
    rewrite_dict_keys(d, items, key_ops)
}

/// `reversed(seq)` at `index` (the next item it yields): a `list_reverseiterator` handed to a
/// resume function. `index` -1 is an exhausted one.
#[pyfunction]
pub fn reversed_at<'py>(seq: &Bound<'py, PyAny>, index: i64) -> PyResult<Bound<'py, PyAny>> {
    let it = seq.py().import("builtins")?.getattr("reversed")?.call1((seq,))?;
    if index < 0 {
        while it.call_method0("__next__").is_ok() {}
    } else {
        it.call_method1("__setstate__", (index,))?;
    }
    Ok(it)
}

/// A dict iterator (over keys, values or items, as `view` says) whose dict changed size since
/// it was made: its next step raises `RuntimeError: dictionary changed size during iteration`,
/// as the traced one would have (Note [rebuilt iterators]).
#[pyfunction]
pub fn dict_iter_changed_size<'py>(py: Python<'py>, view: &str) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    let it = d.call_method0(view)?.try_iter()?.into_any();
    d.set_item(0, 0)?;
    Ok(it)
}

/// Steps iterator `it` `steps` times, stopping early when it is exhausted: how transformed
/// code replays the steps a trace took on an iterator from outside the frame (Note [iterators
/// from outside the frame] in `symbolic::side_effects`). Raises what a step raises, but
/// `StopIteration`.
#[pyfunction]
pub fn advance_iter(it: &Bound<'_, PyAny>, steps: usize) -> PyResult<()> {
    let it = it.cast::<pyo3::types::PyIterator>()?;
    for _ in 0..steps {
        match it.clone().next() {
            Some(r) => {
                r?;
            }
            None => break,
        }
    }
    Ok(())
}

/// `iter(seq)` advanced by `pos` items: how transformed code hands a `for` loop over a list to
/// its resume function.
#[pyfunction]
pub fn iter_at<'py>(seq: &Bound<'py, PyAny>, pos: usize) -> PyResult<Bound<'py, PyAny>> {
    let it = seq.try_iter()?;
    for _ in 0..pos {
        if it.clone().next().is_none() {
            break;
        }
    }
    Ok(it.into_any())
}

/// `object.__new__(cls)` (`SimpleNamespace.__new__(cls)` for a namespace) with `attrs` placed in its instance dict, past the class's own
/// `__setattr__` (as a frozen dataclass's `__init__` stores its fields): how transformed code
/// rebuilds a user object that tracing created and that outlives the graph. With `items` (a
/// subclass of `dict` or `collections.OrderedDict`), the object is made by `dict.__new__(cls)`
/// and `items` are inserted in order by the builtin base's own `__setitem__` (past the class's).
/// Attributes named in `from_items` take the value of the item under the same key (one object
/// reached through both stores, as `ModelOutput` keeps its fields); their entry in `attrs` only
/// fixes the attribute order. With `items` a list (a subclass of `list`: Note [list subclass
/// objects] in `symbolic::variables::user_defined`), the object is made by `list.__new__(cls)`
/// and the items put in by `list.extend` (past the class's methods).
/// Errors: what `__new__` raises for a class that cannot be made this way (TypeError); KeyError
/// for a name of `from_items` that is not in `items`.
#[pyfunction]
#[pyo3(signature = (cls, attrs, items=None, from_items=None))]
pub fn new_object<'py>(cls: &Bound<'py, pyo3::types::PyType>, attrs: &Bound<'py, pyo3::types::PyDict>, items: Option<&Bound<'py, PyAny>>, from_items: Option<&Bound<'py, PyTuple>>) -> PyResult<Bound<'py, PyAny>> {
    let py = cls.py();
    let obj = match items {
        // `object.__new__` refuses a type with a `__new__` of its own in C; SimpleNamespace's
        // makes the empty object (Note [namespace objects]).
        None if cls.is_subclass(&py.import("types")?.getattr("SimpleNamespace")?)? => py.import("types")?.getattr("SimpleNamespace")?.call_method1("__new__", (cls,))?,
        None => py.get_type::<PyAny>().call_method1("__new__", (cls,))?,
        Some(i) if i.is_instance_of::<pyo3::types::PyList>() => py.get_type::<pyo3::types::PyList>().call_method1("__new__", (cls,))?,
        Some(_) => py.get_type::<PyDict>().call_method1("__new__", (cls,))?,
    };
    fill_object(&obj, attrs, items, from_items)?;
    Ok(obj)
}

/// Gives `obj` (made by `new_object`, still empty) its dict items and attributes, as
/// `new_object` describes: the second step of rebuilding an object that is reachable from itself
/// (an attribute or item that refers back to it, Note [shared rebuilds] in
/// `symbolic::convert_frame`), which must exist before its contents are built. Returns None.
/// Errors: as `new_object`.
#[pyfunction]
#[pyo3(signature = (obj, attrs, items=None, from_items=None))]
pub fn fill_object<'py>(obj: &Bound<'py, PyAny>, attrs: &Bound<'py, pyo3::types::PyDict>, items: Option<&Bound<'py, PyAny>>, from_items: Option<&Bound<'py, PyTuple>>) -> PyResult<()> {
    let py = obj.py();
    let (items, list_items) = match items {
        Some(i) if i.is_instance_of::<pyo3::types::PyList>() => (None, Some(i)),
        Some(i) => (Some(i.cast::<pyo3::types::PyDict>()?.clone()), None),
        None => (None, None),
    };
    if let Some(list_items) = list_items {
        py.get_type::<pyo3::types::PyList>().getattr("extend")?.call1((obj, list_items))?;
    }
    let items = items.as_ref();
    if let Some(items) = items {
        let ordered = py.import("collections")?.getattr("OrderedDict")?;
        let base = if obj.is_instance(&ordered)? { ordered } else { py.get_type::<PyDict>().into_any() };
        let setitem = base.getattr("__setitem__")?;
        for (k, v) in items.iter() {
            setitem.call1((obj, k, v))?;
        }
    }
    let setattr = py.get_type::<PyAny>().getattr("__setattr__")?;
    for (k, v) in attrs.iter() {
        let aliased = match from_items {
            Some(names) => names.contains(&k)?,
            None => false,
        };
        let v = match (aliased, items) {
            (true, Some(items)) => items.get_item(&k)?.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(k.clone().unbind()))?,
            _ => v,
        };
        setattr.call1((obj, k, v))?;
    }
    Ok(())
}

/// Drops every compiled frame, cache entry and code classification, and zeroes the counters.
#[pyfunction]
pub fn reset(py: Python<'_>) {
    cache::reset_all(py);
    counters::reset();
    crate::logging::clear();
    crate::logging::clear_breaks();
}

/// The counters as a dict of ints.
#[pyfunction(name = "counters")]
pub fn get_counters<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in counters::snapshot() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Recompile reasons recorded since the last reset, oldest first.
#[pyfunction]
pub fn recompile_reasons() -> Vec<String> {
    crate::logging::recompile_reasons()
}

/// Reasons frames were not captured since the last reset, oldest first.
#[pyfunction]
pub fn break_reasons() -> Vec<String> {
    crate::logging::break_reasons()
}

/// (number of cache entries, frame runs eagerly) for a code object.
#[pyfunction]
pub fn cache_info(code: &Bound<'_, PyAny>) -> (usize, bool) {
    hook::cache_info(code)
}

/// Maps the cache entries of a code object, most recent first (none when it has no state).
fn map_entries<T>(code: &Bound<'_, PyAny>, f: impl Fn(&cache::CacheEntry) -> T) -> Vec<T> {
    unsafe {
        let st = cache::get_extra(code.as_ptr());
        if st.is_null() {
            return vec![];
        }
        (*st).entries.iter().map(f).collect()
    }
}

/// Graph texts of the cache entries of a code object, most recent first.
#[pyfunction]
pub fn cached_graphs(code: &Bound<'_, PyAny>) -> Vec<String> {
    map_entries(code, |e| e.graph_text.clone())
}

/// Guard dumps of the cache entries of a code object, most recent first.
#[pyfunction]
pub fn cached_guards(code: &Bound<'_, PyAny>) -> Vec<String> {
    map_entries(code, |e| e.guards.dump())
}

/// Test-only timing of a guard check (Note [guard check timing] in src/guards/mod.rs): runs the
/// check of `code`'s most recent cache entry `n` times against a frame whose first argument
/// slots hold `locals` (in `co_varnames` order; the other slots empty), with `closure` (a tuple
/// of cells or None), `globals` and `builtins` (dicts). Returns (mean ns of one check,
/// [(step kind and source, mean ns)], [(guard text, mean ns)]). Raises `ValueError` when `code`
/// has no cache entry or the check fails (the failure's text), `TypeError` for a non-dict
/// `globals`/`builtins`.
#[pyfunction]
#[pyo3(signature = (code, locals, closure, globals, builtins, n=1000))]
pub fn time_guards(
    py: Python<'_>,
    code: &Bound<'_, PyAny>,
    locals: Vec<Bound<'_, PyAny>>,
    closure: Option<Bound<'_, PyTuple>>,
    globals: &Bound<'_, PyDict>,
    builtins: &Bound<'_, PyDict>,
    n: usize,
) -> PyResult<(f64, Vec<(String, f64)>, Vec<(String, f64)>)> {
    let nslots: usize = code.getattr("co_nlocals")?.extract::<usize>()? + code.getattr("co_cellvars")?.len()? + code.getattr("co_freevars")?.len()?;
    if locals.len() > nslots {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("{} locals for {nslots} slots", locals.len())));
    }
    let mut slots: Vec<*mut pyo3::ffi::PyObject> = vec![std::ptr::null_mut(); nslots.max(1)];
    for (s, v) in slots.iter_mut().zip(&locals) {
        *s = v.as_ptr();
    }
    let refs = crate::guards::FrameRefs {
        locals: slots.as_ptr() as *const *mut pyo3::ffi::PyObject,
        closure: closure.as_ref().map(|c| c.as_ptr()).unwrap_or(std::ptr::null_mut()),
        globals: globals.as_ptr(),
        builtins: builtins.as_ptr(),
    };
    unsafe {
        let st = cache::get_extra(code.as_ptr());
        let st = st.as_ref();
        let Some(e) = st.and_then(|st| st.entries.first()) else {
            return Err(pyo3::exceptions::PyValueError::new_err("no cache entry for this code object"));
        };
        e.guards.time_checks(py, &refs, n).map_err(pyo3::exceptions::PyValueError::new_err)
    }
}

/// Transformed code objects of the cache entries of a code object, most recent first.
#[pyfunction]
pub fn cached_code(py: Python<'_>, code: &Bound<'_, PyAny>) -> Vec<Py<PyAny>> {
    map_entries(code, |e| e.code.clone_ref(py))
}

/// Reads or sets `config.cache_size_limit`.
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn cache_size_limit(value: Option<usize>) -> usize {
    if let Some(v) = value {
        crate::config::CACHE_SIZE_LIMIT.store(v, Ordering::Relaxed);
    }
    crate::config::cache_size_limit()
}

/// Reads or sets `config.accumulated_cache_size_limit`.
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn accumulated_cache_size_limit(value: Option<usize>) -> usize {
    if let Some(v) = value {
        crate::config::ACCUMULATED_CACHE_SIZE_LIMIT.store(v, Ordering::Relaxed);
    }
    crate::config::accumulated_cache_size_limit()
}

/// Reads or sets `config.suppress_errors`.
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn suppress_errors(value: Option<bool>) -> bool {
    if let Some(v) = value {
        crate::config::SUPPRESS_ERRORS.store(v, Ordering::Relaxed);
    }
    crate::config::suppress_errors()
}

/// Reads or sets the dynamic-shapes mode: 0 static, 1 automatic (default), 2 all dimensions
/// dynamic (`dynamo.config.automatic_dynamic_shapes`, `assume_static_by_default`).
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn dynamic_shapes(value: Option<u8>) -> u8 {
    if let Some(v) = value {
        crate::config::DYNAMIC_SHAPES.store(v.min(2), Ordering::Relaxed);
    }
    crate::config::dynamic_shapes()
}

/// Reads or sets `config.automatic_dynamic_whole_tensor` (Note [whole-tensor automatic dynamic]
/// in src/symbolic/output_graph.rs).
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn automatic_dynamic_whole_tensor(value: Option<bool>) -> bool {
    if let Some(v) = value {
        crate::config::AUTOMATIC_DYNAMIC_WHOLE_TENSOR.store(v, Ordering::Relaxed);
    }
    crate::config::automatic_dynamic_whole_tensor()
}

/// Reads or sets `config.dynamic_compile_budget_s`, in seconds (Note [dynamic compile budget]
/// in src/symbolic/convert_frame.rs). Errors: ValueError for a negative or non-finite value.
#[pyfunction]
#[pyo3(signature = (value=None))]
pub fn dynamic_compile_budget_s(value: Option<f64>) -> PyResult<f64> {
    if let Some(v) = value {
        if !v.is_finite() || v < 0.0 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("dynamic_compile_budget_s must be a finite number of seconds >= 0, got {v}")));
        }
        crate::config::DYNAMIC_COMPILE_BUDGET_MS.store((v * 1000.0) as u64, Ordering::Relaxed);
    }
    Ok(crate::config::dynamic_compile_budget().as_secs_f64())
}

/// Registers the functions above on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Unsupported", m.py().get_type::<hook::Unsupported>())?;
    m.add_function(wrap_pyfunction!(set_eval_frame, m)?)?;
    m.add_function(wrap_pyfunction!(getattr::load_attr, m)?)?;
    m.add_class::<input_plan::InputPlan>()?;
    m.add_function(wrap_pyfunction!(input_plan::_input_plan_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(dynamic_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(automatic_dynamic_whole_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(dynamic_compile_budget_s, m)?)?;
    m.add_function(wrap_pyfunction!(set_skip_prefixes, m)?)?;
    m.add_function(wrap_pyfunction!(skip_code, m)?)?;
    m.add_function(wrap_pyfunction!(force_compile, m)?)?;
    m.add_function(wrap_pyfunction!(iter_at, m)?)?;
    m.add_function(wrap_pyfunction!(advance_iter, m)?)?;
    m.add_function(wrap_pyfunction!(new_object, m)?)?;
    m.add_function(wrap_pyfunction!(fill_object, m)?)?;
    m.add_function(wrap_pyfunction!(reversed_at, m)?)?;
    m.add_function(wrap_pyfunction!(dict_iter_changed_size, m)?)?;
    m.add_function(wrap_pyfunction!(replace_dict, m)?)?;
    m.add_function(wrap_pyfunction!(replace_dict_storage, m)?)?;
    m.add_function(wrap_pyfunction!(graph_failed, m)?)?;
    m.add_function(wrap_pyfunction!(drop_traceback_head, m)?)?;
    m.add_function(wrap_pyfunction!(crate::eval_frame::hook::call_resume, m)?)?;
    m.add_function(wrap_pyfunction!(crate::eval_frame::hook::call_with_hook, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(skip_code_recursive, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_inputs_and_rng, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_inputs_first_call, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_inputs_first_call_autocast, m)?)?;
    m.add_function(wrap_pyfunction!(drop_loop_traceback_head, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_inputs_and_autocast, m)?)?;
    m.add_class::<GradModeRestore>()?;
    m.add_function(wrap_pyfunction!(reset, m)?)?;
    m.add_function(wrap_pyfunction!(get_counters, m)?)?;
    m.add_function(wrap_pyfunction!(recompile_reasons, m)?)?;
    m.add_function(wrap_pyfunction!(break_reasons, m)?)?;
    m.add_function(wrap_pyfunction!(cache_info, m)?)?;
    m.add_function(wrap_pyfunction!(cached_graphs, m)?)?;
    m.add_function(wrap_pyfunction!(cached_guards, m)?)?;
    m.add_function(wrap_pyfunction!(cached_code, m)?)?;
    m.add_function(wrap_pyfunction!(time_guards, m)?)?;
    m.add_function(wrap_pyfunction!(cache_size_limit, m)?)?;
    m.add_function(wrap_pyfunction!(accumulated_cache_size_limit, m)?)?;
    m.add_function(wrap_pyfunction!(suppress_errors, m)?)?;
    Ok(())
}
