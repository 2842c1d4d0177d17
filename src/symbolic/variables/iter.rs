//! Iterators and generators (torch's `iter.py`, `ListIteratorVariable`,
//! `LocalGeneratorObjectVariable`): what an iterator walks, stepping it, lazy itertools-style
//! iterators, and resuming a traced generator's frame.

use crate::symbolic::builder::{is_literal, wrap};
use crate::symbolic::code_info::flags;
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::variables::{type_name, VariableTracker, VT};
use crate::symbolic::{Unsupported, VResult};
use crate::graph_break;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::{InstructionTranslator, Outcome, MAX_INLINE_DEPTH};
use crate::symbolic::variables::constant::const_bool;
use crate::symbolic::variables::lists::{ListState, tuple_of};
use crate::symbolic::variables::dicts::{DictView, DictState};

/// What an iterator walks, mirroring CPython's iterator types: each reads its container live at
/// every step, so a loop body that mutates the container sees what CPython's loop would.
pub enum IterKind {
    /// A fixed sequence (a tuple, a range, a string, an inlined generator's yields, ...).
    Items(Vec<VariableTracker>),
    /// `listiterator` (Objects/listobject.c, `listiter_next`): item `pos` of the live list.
    List(Rc<RefCell<ListState>>),
    /// `_deque_iterator` (Modules/_collectionsmodule.c, `dequeiter_next`): item `pos` of the
    /// live deque while its `state` is still `state`; otherwise `RuntimeError: deque mutated
    /// during iteration` (Note [deques]).
    Deque { list: Rc<RefCell<ListState>>, state: u64 },
    /// `list_reverseiterator` (`listreviter_next`): item `index` while `0 <= index < len`,
    /// counting down; exhausted for good otherwise.
    ListReversed { list: Rc<RefCell<ListState>>, index: i64 },
    /// A dict iterator (Objects/dictobject.c, `dictiter_iternextkey` and friends): `used` is the
    /// dict's size when the iterator was made and `version` its structure then; a different size
    /// at a step raises `RuntimeError: dictionary changed size during iteration`. `ordered`:
    /// over the storage of an `OrderedDict` (its `odict_iterator`, Objects/odictobject.c,
    /// `odictiter_nextkey`: any change of its keys, even of the same size, raises
    /// `RuntimeError: OrderedDict mutated during iteration` and ends it; not rebuilt).
    Dict { dict: Rc<RefCell<DictState>>, view: DictView, used: usize, version: u64, ordered: bool },
    /// `set_iterator` (Objects/setobject.c, `setiter_iternext`) over a set built in the trace:
    /// `iter` is a real iterator over the tracker's private real set, stepped at each step, so
    /// the order, the items seen after a change and `RuntimeError: Set changed size during
    /// iteration` are CPython's own (Note [iterator types]).
    Set { set: Rc<RefCell<Py<PyAny>>>, iter: Py<PyAny> },
    /// A reversed dict iterator (`reversed(d)`, `reversed(d.items())`; Objects/dictobject.c,
    /// `dictreviter_iternext`): item `index` counting down, with the same size check as
    /// `Dict`. `ordered`: over the storage of an `OrderedDict` (its `odict_iterator`, which is
    /// not rebuilt).
    DictReversed { dict: Rc<RefCell<DictState>>, view: DictView, used: usize, version: u64, index: i64, ordered: bool },
    /// `enumerate(inner, start)` (Objects/enumobject.c): `count` is the next index.
    Enumerate { inner: Rc<RefCell<IteratorState>>, count: i64 },
    /// `zip(*inners, strict=...)` (Python/bltinmodule.c, `zip_next`): steps each inner in order
    /// and stops at the first exhausted one (items already taken from the earlier ones are
    /// dropped). With `strict`, an inner exhausted after the first raises `ValueError`, and when
    /// the first is exhausted each later one is stepped once more and must be exhausted too.
    Zip(Vec<Rc<RefCell<IteratorState>>>, bool),
    /// A generator made in the trace: its frame runs up to the next `yield` at each step, so
    /// its body interleaves with the loop that consumes it as in CPython. `None` while a step
    /// runs it (a generator that steps itself is "already executing").
    Generator(Option<Box<GeneratorFrame>>),
    /// `map(func, *inners)` (Python/bltinmodule.c, `map_next`): one item of each inner, in
    /// order, stopping at the first exhausted one; then `func(*items)`.
    Map { func: VariableTracker, inners: Vec<Rc<RefCell<IteratorState>>> },
    /// `filter(func, inner)` (`filter_next`): the next item whose `func(item)` (the item
    /// itself for `None`) is true.
    Filter { func: Option<VariableTracker>, inner: Rc<RefCell<IteratorState>> },
    /// `itertools.chain(*iterables)` (Modules/itertoolsmodule.c, `chain_next`): `iter()` of
    /// each iterable is taken only when the previous one is exhausted.
    /// `itertools.chain.from_iterable(outer)` (`chain_new_from_iterable`) is a chain whose next
    /// iterable is taken from `outer` (lazily, one per exhausted iterable) once `pending` is empty.
    Chain { pending: std::collections::VecDeque<VariableTracker>, active: Option<Rc<RefCell<IteratorState>>>, outer: Option<Rc<RefCell<IteratorState>>> },
    /// `itertools.islice(inner, start, stop, step)` (`islice_next`): `count` items taken from
    /// `inner` so far, `next` the index of the next item to yield.
    Islice { inner: Rc<RefCell<IteratorState>>, next: usize, stop: Option<usize>, step: usize, count: usize },
    /// `itertools.accumulate(inner, func, initial=...)` (`accumulate_next`): running
    /// `func(total, item)` (`+` when `func` is None), `initial` first when given.
    Accumulate { inner: Rc<RefCell<IteratorState>>, func: Option<VariableTracker>, total: Option<VariableTracker>, initial: Option<VariableTracker> },
    /// `itertools.zip_longest(*inners, fillvalue=fill)` (`zip_longest_next`): an exhausted inner
    /// gives `fill` until every inner is exhausted (`None` marks an exhausted one).
    ZipLongest { inners: Vec<Option<Rc<RefCell<IteratorState>>>>, fill: VariableTracker },
    /// `itertools.starmap(func, inner)` (`starmap_next`): `func(*item)` for each item of
    /// `inner` (the item unpacked as CPython's `PySequence_Tuple` would).
    Starmap { func: VariableTracker, inner: Rc<RefCell<IteratorState>> },
    /// `itertools.takewhile(func, inner)` (`takewhile_next`): items while `func(item)` is true;
    /// the first false one is consumed and ends it for good (`stop`).
    TakeWhile { func: VariableTracker, inner: Rc<RefCell<IteratorState>>, stop: bool },
    /// `itertools.dropwhile(func, inner)` (`dropwhile_next`): skips items while `func(item)`
    /// is true, then gives every item unchecked (`dropping` false).
    DropWhile { func: VariableTracker, inner: Rc<RefCell<IteratorState>>, dropping: bool },
    /// `itertools.filterfalse(func, inner)` (`filterfalse_next`): items whose `func(item)`
    /// (the item itself for `None`) is false.
    FilterFalse { func: Option<VariableTracker>, inner: Rc<RefCell<IteratorState>> },
    /// `itertools.pairwise(inner)` (`pairwise_next`): `(old, new)` for overlapping pairs;
    /// `old` is the item taken last.
    Pairwise { inner: Rc<RefCell<IteratorState>>, old: Option<VariableTracker> },
    /// `itertools.count(start, step)` (`count_next`): `start`, `start + step`, ... without
    /// end; `next` is the value to give next.
    Count { next: VariableTracker, step: VariableTracker },
    /// `itertools.cycle(inner)` (`cycle_next`): the items of `inner`, saved as they are taken
    /// on the first pass, then the saved items over and over (`inner` None after the first
    /// pass; `index` the next saved item). Empty when `inner` gave nothing.
    Cycle { inner: Option<Rc<RefCell<IteratorState>>>, saved: Vec<VariableTracker>, index: usize },
    /// `itertools.repeat(item, times)` (`repeat_next`): `item`, `remaining` more times
    /// (without end for `None`).
    Repeat { item: VariableTracker, remaining: Option<usize> },
    /// A tuple or list iterator passed into the frame whose items are not literals (Note [items
    /// of iterators from outside the frame] in `builder.rs`): `items` are what it had left when
    /// the frame started, and item `pos` is wrapped only when a step takes it, read through
    /// `Source::IterItem { base, index: pos }` (`IterRequest::WrapItem`), so a call that takes
    /// one tensor from it guards and lifts that one tensor, not the position or the rest.
    Peek { items: Vec<Py<PyAny>>, base: Arc<crate::source::Source> },
    /// `itertools.groupby(inner, key)` (`groupby_next`): `(key, grouper)` for each run of items
    /// with equal keys; the state is shared with the groupers it made.
    GroupBy(Rc<RefCell<GroupByState>>),
    /// A `_grouper` of a groupby (`_grouper_next`): items while the groupby's current grouper is
    /// this one (`id`) and the current key equals `tgtkey`.
    Grouper { state: Rc<RefCell<GroupByState>>, id: u64, tgtkey: VariableTracker },
    /// One of the iterators `itertools.tee` made (`tee_next`): item `index` of the items taken
    /// so far from the shared inner iterator, taking the next one when it is the furthest ahead.
    Tee { shared: Rc<RefCell<TeeShared>>, index: usize },
    /// `itertools.compress(data, selectors)` (`compress_next`): items of `data` whose paired
    /// selector is true, stopping when either runs out.
    Compress { data: Rc<RefCell<IteratorState>>, selectors: Rc<RefCell<IteratorState>> },
    /// Note [user iterators]: a user object whose class's `__iter__` returned an object with a
    /// Python `__next__` (itself, usually): each step calls that `__next__` traced, and a
    /// StopIteration it raises ends the step, as `tp_iternext` of a Python class
    /// (`slot_tp_iternext`) does. Never sticky: a later step calls `__next__` again. `iter()` of
    /// it, and a rebuild, give the object itself.
    UserNext(VariableTracker),
}

/// The state a groupby shares with its groupers (Modules/itertoolsmodule.c, `groupbyobject`).
pub struct GroupByState {
    pub inner: Rc<RefCell<IteratorState>>,
    pub key: Option<VariableTracker>,
    pub tgtkey: Option<VariableTracker>,
    pub currkey: Option<VariableTracker>,
    pub currvalue: Option<VariableTracker>,
    /// The id of the grouper made last (0: none is current).
    pub currgrouper: u64,
    pub next_id: u64,
}

/// The items `itertools.tee`'s iterators share (`teedataobject`).
pub struct TeeShared {
    pub inner: Rc<RefCell<IteratorState>>,
    pub buffer: Vec<VariableTracker>,
    pub exhausted: bool,
}

/// `groupby_step`: the next item of the inner iterator and its key into `currvalue` and
/// `currkey`; false when the inner iterator is exhausted.
fn groupby_step(py: Python<'_>, st: &mut GroupByState, resume: &mut ResumeGenerator<'_>) -> Result<bool, IterError> {
    let Some(v) = borrow_iter(&st.inner)?.next_item(py, resume)? else { return Ok(false) };
    let k = match &st.key {
        Some(f) => resume(IterRequest::Call(f, vec![v.clone()]))?.ok_or_else(|| unsupported_step("groupby key gave no value"))?,
        None => v.clone(),
    };
    st.currvalue = Some(v);
    st.currkey = Some(k);
    Ok(true)
}

/// `PyObject_RichCompareBool(a, b, Py_EQ)` through the translator.
fn rich_eq(py: Python<'_>, a: &VariableTracker, b: &VariableTracker, resume: &mut ResumeGenerator<'_>) -> Result<bool, IterError> {
    Ok(truthy(py, resume(IterRequest::Eq(a.clone(), b.clone()))?))
}

/// What a lazy iterator asks of the translator while it steps (calls run traced).
pub enum IterRequest<'a> {
    /// Run a generator's frame to its next `yield`.
    Resume(&'a mut GeneratorFrame),
    /// `func(*args)`.
    Call(&'a VariableTracker, Vec<VariableTracker>),
    /// `type(o).__next__(o)`, answered `None` when it raises StopIteration (Note [user
    /// iterators]).
    UserNext(&'a VariableTracker),
    /// `bool(v)`, answered as a constant bool tracker.
    Truth(&'a VariableTracker),
    /// `iter(v)`, answered as an `Iterator` tracker.
    MakeIter(&'a VariableTracker),
    /// `a + b`.
    Add(VariableTracker, VariableTracker),
    /// `a == b` as `PyObject_RichCompareBool` (identity first), answered as a constant bool.
    Eq(VariableTracker, VariableTracker),
    /// `tuple(v)` (an iterable unpacked), answered as a `Tuple` tracker of its items.
    Items(VariableTracker),
    /// The tracker of `value`, read through `source` (wrapped and guarded as an argument).
    WrapItem(Py<PyAny>, Arc<crate::source::Source>),
    /// The tracker of a member of a traced set's real set (`set_member`).
    SetMember(Py<PyAny>),
}

/// The suspended frame of a generator being traced (`IterKind::Generator`).
pub struct GeneratorFrame {
    pub code: Arc<crate::symbolic::code_info::CodeInfo>,
    pub g: Rc<crate::symbolic::translator::GlobalsInfo>,
    pub stack: Vec<VariableTracker>,
    pub locals: Vec<Option<VariableTracker>>,
    pub closure: Vec<VariableTracker>,
    pub external_cells: std::collections::HashMap<usize, crate::symbolic::side_effects::CellTarget>,
    /// The next instruction; 0 before the first step.
    pub ip: usize,
    /// What the frame returned (`StopIteration.value`), once it has.
    pub returned: Option<VariableTracker>,
    /// The value `gen.send(v)` hands to the suspended `yield` at the next resume (None for
    /// `next()`).
    pub sent: Option<VariableTracker>,
    /// The exception `gen.throw(e)` raises at the suspended `yield` at the next resume (Note
    /// [generator throw]): a builtin exception object.
    pub thrown: Option<Py<PyAny>>,
}

/// Whether the generator suspended in `f` (started) is delegating to another iterator, in a
/// `yield from` or `await`: the RESUME after its yield has an oparg of 2 or more (CPython's
/// `_PyGen_yf`, which `throw` and `close` consult first). Anything unexpected counts as
/// delegating.
pub fn delegating(f: &GeneratorFrame) -> bool {
    f.code.insts.get(f.ip).is_none_or(|r| r.opcode != crate::bytecode::opcode::op::RESUME || (r.arg & 3) >= 2)
}

/// What a generator did with an exception thrown into it (`throw_into_generator`).
pub enum Thrown {
    /// It caught the exception and yielded this value.
    Yielded(VariableTracker),
    /// It caught the exception and returned (eager's `StopIteration` from `throw`).
    Finished,
    /// The same exception left the generator, which is finished.
    Propagated,
}

/// Why an iterator step cannot give an item.
pub enum IterError {
    /// CPython raises `RuntimeError` with this message at this step.
    Raise(&'static str),
    /// The step depends on something not modelled.
    Unsupported(crate::symbolic::Unsupported),
}

/// The `ValueError` of `zip(..., strict=True)` when argument `i` (0-based, `i >= 1`) is
/// `shorter`/`longer` than the ones before it; CPython's text (`zip_next`): "zip() argument 2
/// is shorter than argument 1", "zip() argument 3 is longer than arguments 1-2".
fn zip_length_error(py: Python<'_>, i: usize, what: &str) -> IterError {
    let plural = if i == 1 { " " } else { "s 1-" };
    let msg = format!("zip() argument {} is {what} than argument{plural}{i}", i + 1);
    match py.get_type::<pyo3::exceptions::PyValueError>().call1((msg.as_str(),)) {
        Ok(exc) => IterError::Unsupported(crate::symbolic::Unsupported::raise_value("ValueError", exc.unbind(), msg)),
        Err(e) => IterError::Unsupported(crate::symbolic::Unsupported::new(e.to_string())),
    }
}

/// Answers an `IterRequest` (`Resume`: `Ok(None)` when the generator returned).
pub type ResumeGenerator<'r> = dyn FnMut(IterRequest<'_>) -> Result<Option<VariableTracker>, IterError> + 'r;

/// Note [iterator types]: an iterator tracker answers `type(it)` with the type of the CPython
/// iterator it stands for (`InstructionTranslator::iterator_type`): its kind says it for the
/// live kinds (`list_iterator`, `set_iterator`, `dict_keyiterator`, `odict_iterator` for an
/// `OrderedDict`'s storage, ...); an `Items` iterator carries it in `py_type` when it is not a
/// `tuple_iterator` (`iter()` of a str, frozenset or range constant; `itertools.product`,
/// `permutations`, `combinations`, which read their input whole; `reversed()` of a tuple or a
/// str, a `reversed` object; `reversed()` of a range, the reversed range's `range_iterator`). The views of an
/// `OrderedDict` are `odict_keys`/`odict_values`/`odict_items` (`VT::DictView::ordered`). An
/// iterator or view that outlives the graph is rebuilt as its own type or not at all (a graph
/// break): a constant's iterator as `iter_at(constant, pos)`; set, OrderedDict and itertools
/// iterators and OrderedDict views not.
///
/// An iterator being stepped during tracing.
pub struct IteratorState {
    pub kind: IterKind,
    /// Items produced so far (for `Items`, `List` and `Dict`: the index of the next one).
    pub pos: usize,
    /// Set once a step found the iterator exhausted: CPython's iterators stay exhausted (a list
    /// iterator drops its list), even if the container grows afterwards.
    pub exhausted: bool,
    /// A generator's return value (`StopIteration.value`), kept once the step that exhausted it
    /// ran: what `yield from` over it evaluates to. `None` stands for Python's None.
    pub returned: Option<VariableTracker>,
    /// The iterator's Python type when its kind does not say it (`Items` stands for a
    /// `tuple_iterator` unless this says otherwise: a `str_ascii_iterator`, an
    /// `itertools.product`, ...): what `type(it)` answers in the trace (Note [iterator types]).
    pub py_type: Option<Py<PyAny>>,
    /// A constant whose `iter()` this iterator is (a str, a frozenset, a range, a tuple): an
    /// `Items` iterator with a `py_type` is rebuilt as `iter_at(constant, pos)`; without one
    /// it is not rebuilt (its type would change).
    pub reiterate: Option<Py<PyAny>>,
    /// Set for `reversed()` of a tuple, a str or a tuple constant: the iterator is a CPython
    /// `reversed` object (`type(it)` is `reversed`, not `tuple_iterator`), with its items in
    /// iteration order. One that outlives the graph is rebuilt as `reversed(rest)`, `rest` the
    /// items not yet produced put back in sequence order (Note [iterator types]).
    pub reversed: bool,
}

impl IteratorState {
    /// An iterator over a fixed sequence of items.
    pub fn over(items: Vec<VariableTracker>) -> Self {
        IteratorState::of(IterKind::Items(items))
    }

    pub fn of(kind: IterKind) -> Self {
        IteratorState { kind, pos: 0, exhausted: false, returned: None, py_type: None, reiterate: None, reversed: false }
    }

    /// A live iterator over a list tracker.
    pub fn over_list(list: Rc<RefCell<ListState>>) -> Self {
        IteratorState::of(IterKind::List(list))
    }

    /// A live iterator over a dict tracker's keys, values or items.
    pub fn over_dict(dict: Rc<RefCell<DictState>>, view: DictView, ordered: bool) -> Self {
        let (used, version) = {
            let d = dict.borrow();
            (d.items.len(), d.version)
        };
        IteratorState::of(IterKind::Dict { dict, view, used, version, ordered })
    }

    /// The next item, advancing the position (`Ok(None)` when exhausted).
    pub fn next_item(&mut self, py: Python<'_>, resume: &mut ResumeGenerator<'_>) -> Result<Option<VariableTracker>, IterError> {
        if self.exhausted {
            return Ok(None);
        }
        let item = match &mut self.kind {
            IterKind::Items(items) => items.get(self.pos).cloned(),
            IterKind::Peek { items, base } => match items.get(self.pos) {
                Some(v) => {
                    let source = Arc::new(crate::source::Source::IterItem { base: base.clone(), index: self.pos });
                    resume(IterRequest::WrapItem(v.clone_ref(py), source))?
                }
                None => None,
            },
            IterKind::List(l) => l.borrow().items.get(self.pos).cloned(),
            IterKind::Deque { list, state } => {
                let l = list.borrow();
                if l.deque.map(|d| d.state) != Some(*state) {
                    return Err(IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "RuntimeError: deque mutated during iteration")));
                }
                l.items.get(self.pos).cloned()
            }
            IterKind::ListReversed { list, index } => {
                let l = list.borrow();
                if *index >= 0 && (*index as usize) < l.items.len() {
                    let v = l.items[*index as usize].clone();
                    *index -= 1;
                    Some(v)
                } else {
                    *index = -1;
                    None
                }
            }
            IterKind::Set { iter, .. } => {
                match iter.bind(py).call_method0("__next__") {
                    Ok(m) => Some(resume(IterRequest::SetMember(m.unbind()))?.expect("a set member's tracker")),
                    Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => None,
                    // `setiter_iternext` makes this sticky itself (`si_used = -1`).
                    Err(e) if e.is_instance_of::<pyo3::exceptions::PyRuntimeError>(py) && e.value(py).str().map(|m| m.to_string()).unwrap_or_default() == "Set changed size during iteration" => {
                        return Err(IterError::Raise("Set changed size during iteration"));
                    }
                    Err(e) => return Err(unsupported_step(&format!("a set iterator's step raised {e}"))),
                }
            }
            IterKind::Dict { dict, view, used, version, ordered: true } => {
                let d = dict.borrow();
                if *used == usize::MAX {
                    // `odictiter_nextkey` cleared `di_current` at the failed step: exhausted.
                    None
                } else if self.pos >= *used {
                    // The last key was given (from the OrderedDict as it was made: any change
                    // before would have raised), which left `di_current` NULL: exhausted without
                    // any check, whatever was written since.
                    None
                } else if d.version != *version || d.items.len() != *used {
                    *used = usize::MAX;
                    return Err(IterError::Raise("OrderedDict mutated during iteration"));
                } else {
                    match d.items.get(self.pos) {
                        None => None,
                        Some((k, v)) => Some(view_item(py, *view, k, v)),
                    }
                }
            }
            IterKind::Dict { dict, view, used, version, ordered: false } => {
                let d = dict.borrow();
                if d.items.len() != *used {
                    // CPython makes this sticky (`di_used = -1`): every later step raises too.
                    *used = usize::MAX;
                    return Err(IterError::Raise("dictionary changed size during iteration"));
                }
                if d.version != *version {
                    return Err(IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "a dict whose keys changed (same size) while iterated")));
                }
                match d.items.get(self.pos) {
                    None => None,
                    Some((k, v)) => Some(view_item(py, *view, k, v)),
                }
            }
            IterKind::DictReversed { dict, view, used, version, index, .. } => {
                let d = dict.borrow();
                if *used == usize::MAX || d.items.len() != *used {
                    *used = usize::MAX;
                    return Err(IterError::Raise("dictionary changed size during iteration"));
                }
                if d.version != *version {
                    return Err(unsupported_step("a dict whose keys changed (same size) while iterated in reverse"));
                }
                if *index < 0 {
                    None
                } else {
                    let (k, v) = &d.items[*index as usize];
                    *index -= 1;
                    Some(view_item(py, *view, k, v))
                }
            }
            IterKind::Enumerate { inner, count } => {
                let next = borrow_iter(inner)?.next_item(py, resume)?;
                match next {
                    Some(v) => {
                        let i = VariableTracker::constant((*count).into_pyobject(py).map_err(|e| IterError::Unsupported(crate::symbolic::Unsupported::new(e.to_string())))?.into_any().unbind());
                        *count += 1;
                        Some(tuple_of(py, vec![i, v]))
                    }
                    None => None,
                }
            }
            IterKind::Zip(inners, strict) => {
                let mut out = Vec::with_capacity(inners.len());
                let mut exhausted = inners.is_empty().then_some(0);
                for (i, it) in inners.iter().enumerate() {
                    let next = borrow_iter(it)?.next_item(py, resume)?;
                    match next {
                        Some(v) => out.push(v),
                        None => {
                            exhausted = Some(i);
                            break;
                        }
                    }
                }
                match exhausted {
                    None => Some(tuple_of(py, out)),
                    Some(i) if *strict && i > 0 => return Err(zip_length_error(py, i, "shorter")),
                    Some(0) if *strict => {
                        for (i, it) in inners.iter().enumerate().skip(1) {
                            if borrow_iter(it)?.next_item(py, resume)?.is_some() {
                                return Err(zip_length_error(py, i, "longer"));
                            }
                        }
                        None
                    }
                    Some(_) => None,
                }
            }
            IterKind::Generator(frame) => {
                let Some(mut f) = frame.take() else {
                    return Err(IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "a generator stepped while it runs (ValueError: generator already executing)")));
                };
                let r = resume(IterRequest::Resume(&mut f));
                if f.returned.is_some() {
                    self.returned = f.returned.take();
                }
                *frame = Some(f);
                r?
            }
            IterKind::Map { func, inners } => {
                let mut args = Vec::with_capacity(inners.len());
                let mut done = inners.is_empty();
                for it in inners.iter() {
                    match borrow_iter(it)?.next_item(py, resume)? {
                        Some(v) => args.push(v),
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                if done {
                    None
                } else {
                    let func = func.clone();
                    resume(IterRequest::Call(&func, args))?
                }
            }
            IterKind::Filter { func, inner } => loop {
                let Some(v) = borrow_iter(inner)?.next_item(py, resume)? else { break None };
                let verdict = match func {
                    Some(f) => {
                        let f = f.clone();
                        resume(IterRequest::Call(&f, vec![v.clone()]))?.ok_or_else(|| IterError::Unsupported(crate::symbolic::Unsupported::new("filter predicate gave no value")))?
                    }
                    None => v.clone(),
                };
                let truth = resume(IterRequest::Truth(&verdict))?;
                if truth.and_then(|t| t.as_constant(py)).map(|t| t.is_truthy().unwrap_or(false)).unwrap_or(false) {
                    break Some(v);
                }
            },
            IterKind::Chain { pending, active, outer } => loop {
                if let Some(it) = active.clone() {
                    if let Some(v) = borrow_iter(&it)?.next_item(py, resume)? {
                        break Some(v);
                    }
                    *active = None;
                }
                let next = match pending.pop_front() {
                    Some(n) => n,
                    None => match outer.clone() {
                        Some(o) => match borrow_iter(&o)?.next_item(py, resume)? {
                            Some(n) => n,
                            None => {
                                // `chain_next` drops its source once it is exhausted.
                                *outer = None;
                                break None;
                            }
                        },
                        None => break None,
                    },
                };
                match resume(IterRequest::MakeIter(&next))? {
                    Some(VariableTracker::Iterator(it)) => *active = Some(it),
                    _ => return Err(IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, "chain() over a value without an iterator"))),
                }
            },
            IterKind::Islice { inner, next, stop, step, count } => {
                let mut out = None;
                if stop.map_or(true, |s| *count < s) {
                    let mut exhausted = false;
                    while *count < *next {
                        if borrow_iter(inner)?.next_item(py, resume)?.is_none() {
                            exhausted = true;
                            break;
                        }
                        *count += 1;
                    }
                    if !exhausted && stop.map_or(true, |s| *count < s) {
                        if let Some(v) = borrow_iter(inner)?.next_item(py, resume)? {
                            *count += 1;
                            *next += *step;
                            if let Some(s) = stop {
                                if *next > *s {
                                    *next = *s;
                                }
                            }
                            out = Some(v);
                        }
                    }
                }
                out
            }
            IterKind::Accumulate { inner, func, total, initial } => {
                if let Some(init) = initial.take() {
                    *total = Some(init.clone());
                    Some(init)
                } else {
                    match borrow_iter(inner)?.next_item(py, resume)? {
                        None => None,
                        Some(v) => {
                            let new_total = match (total.take(), func) {
                                (None, _) => v,
                                (Some(t), None) => resume(IterRequest::Add(t, v))?.expect("a sum"),
                                (Some(t), Some(f)) => {
                                    let f = f.clone();
                                    resume(IterRequest::Call(&f, vec![t, v]))?.expect("a result")
                                }
                            };
                            *total = Some(new_total.clone());
                            Some(new_total)
                        }
                    }
                }
            }
            IterKind::ZipLongest { inners, fill } => {
                let mut out = Vec::with_capacity(inners.len());
                let mut stop = inners.is_empty();
                for slot in inners.iter_mut() {
                    let item = match slot {
                        Some(it) => borrow_iter(it)?.next_item(py, resume)?,
                        None => None,
                    };
                    match item {
                        Some(v) => out.push(v),
                        None => {
                            if slot.is_some() {
                                *slot = None;
                            }
                            out.push(fill.clone());
                        }
                    }
                }
                // CPython counts the active inners: when the last one runs out the whole step
                // stops, even in the middle of a tuple.
                if inners.iter().all(|s| s.is_none()) {
                    stop = true;
                }
                (!stop).then(|| tuple_of(py, out))
            }
            IterKind::Starmap { func, inner } => match borrow_iter(inner)?.next_item(py, resume)? {
                None => None,
                Some(v) => {
                    let args = match resume(IterRequest::Items(v))? {
                        Some(VariableTracker::Tuple(items)) => items.as_ref().clone(),
                        _ => return Err(unsupported_step("starmap() over an item that is not iterable")),
                    };
                    let func = func.clone();
                    resume(IterRequest::Call(&func, args))?
                }
            },
            IterKind::TakeWhile { func, inner, stop } => {
                if *stop {
                    None
                } else {
                    match borrow_iter(inner)?.next_item(py, resume)? {
                        None => None,
                        Some(v) => {
                            let func = func.clone();
                            let verdict = resume(IterRequest::Call(&func, vec![v.clone()]))?.ok_or_else(|| unsupported_step("takewhile predicate gave no value"))?;
                            if truthy(py, resume(IterRequest::Truth(&verdict))?) {
                                Some(v)
                            } else {
                                *stop = true;
                                None
                            }
                        }
                    }
                }
            }
            IterKind::DropWhile { func, inner, dropping } => loop {
                let Some(v) = borrow_iter(inner)?.next_item(py, resume)? else { break None };
                if !*dropping {
                    break Some(v);
                }
                let func = func.clone();
                let verdict = resume(IterRequest::Call(&func, vec![v.clone()]))?.ok_or_else(|| unsupported_step("dropwhile predicate gave no value"))?;
                if !truthy(py, resume(IterRequest::Truth(&verdict))?) {
                    *dropping = false;
                    break Some(v);
                }
            },
            IterKind::FilterFalse { func, inner } => loop {
                let Some(v) = borrow_iter(inner)?.next_item(py, resume)? else { break None };
                let verdict = match func {
                    Some(f) => {
                        let f = f.clone();
                        resume(IterRequest::Call(&f, vec![v.clone()]))?.ok_or_else(|| unsupported_step("filterfalse predicate gave no value"))?
                    }
                    None => v.clone(),
                };
                if !truthy(py, resume(IterRequest::Truth(&verdict))?) {
                    break Some(v);
                }
            },
            IterKind::Pairwise { inner, old } => {
                let first = match old.take() {
                    Some(o) => Some(o),
                    None => borrow_iter(inner)?.next_item(py, resume)?,
                };
                match first {
                    None => None,
                    Some(a) => match borrow_iter(inner)?.next_item(py, resume)? {
                        None => None,
                        Some(b) => {
                            *old = Some(b.clone());
                            Some(tuple_of(py, vec![a, b]))
                        }
                    },
                }
            }
            IterKind::Count { next, step } => {
                let v = next.clone();
                *next = resume(IterRequest::Add(v.clone(), step.clone()))?.ok_or_else(|| unsupported_step("count() step gave no value"))?;
                Some(v)
            }
            IterKind::Cycle { inner, saved, index } => {
                let taken = match inner {
                    Some(it) => borrow_iter(it)?.next_item(py, resume)?,
                    None => None,
                };
                match taken {
                    Some(v) => {
                        saved.push(v.clone());
                        Some(v)
                    }
                    None => {
                        *inner = None;
                        if saved.is_empty() {
                            None
                        } else {
                            let v = saved[*index % saved.len()].clone();
                            *index = (*index + 1) % saved.len();
                            Some(v)
                        }
                    }
                }
            }
            IterKind::Repeat { item, remaining } => match remaining {
                None => Some(item.clone()),
                Some(0) => None,
                Some(n) => {
                    *n -= 1;
                    Some(item.clone())
                }
            },
            IterKind::GroupBy(state) => {
                let state = state.clone();
                let mut st = state.try_borrow_mut().map_err(|_| unsupported_step("a groupby stepped from inside its own step"))?;
                st.currgrouper = 0;
                let found = loop {
                    match (&st.currkey, &st.tgtkey) {
                        (None, _) => {}
                        (Some(_), None) => break true,
                        (Some(c), Some(t)) => {
                            let (c, t) = (c.clone(), t.clone());
                            if !rich_eq(py, &t, &c, resume)? {
                                break true;
                            }
                        }
                    }
                    if !groupby_step(py, &mut st, resume)? {
                        break false;
                    }
                };
                if found {
                    let key = st.currkey.clone().expect("a current key");
                    st.tgtkey = Some(key.clone());
                    st.next_id += 1;
                    let id = st.next_id;
                    st.currgrouper = id;
                    drop(st);
                    let grouper = VariableTracker::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Grouper { state: state.clone(), id, tgtkey: key.clone() }))));
                    Some(VariableTracker::Tuple(Rc::new(vec![key, grouper])))
                } else {
                    None
                }
            }
            IterKind::Grouper { state, id, tgtkey } => {
                let state = state.clone();
                let mut st = state.try_borrow_mut().map_err(|_| unsupported_step("a grouper stepped from inside its groupby's step"))?;
                if st.currgrouper != *id {
                    None
                } else if st.currvalue.is_none() && !groupby_step(py, &mut st, resume)? {
                    None
                } else {
                    let c = st.currkey.clone().expect("a current key");
                    if rich_eq(py, tgtkey, &c, resume)? {
                        st.currvalue.take()
                    } else {
                        None
                    }
                }
            }
            IterKind::Tee { shared, index } => {
                let shared = shared.clone();
                let mut sh = shared.try_borrow_mut().map_err(|_| unsupported_step("a tee stepped from inside its own step"))?;
                if *index < sh.buffer.len() {
                    let v = sh.buffer[*index].clone();
                    *index += 1;
                    Some(v)
                } else if sh.exhausted {
                    None
                } else {
                    let inner = sh.inner.clone();
                    let taken = borrow_iter(&inner)?.next_item(py, resume)?;
                    match taken {
                        Some(v) => {
                            sh.buffer.push(v.clone());
                            *index += 1;
                            Some(v)
                        }
                        None => {
                            sh.exhausted = true;
                            None
                        }
                    }
                }
            }
            IterKind::UserNext(obj) => {
                let obj = obj.clone();
                return resume(IterRequest::UserNext(&obj));
            }
            IterKind::Compress { data, selectors } => loop {
                let Some(v) = borrow_iter(data)?.next_item(py, resume)? else { break None };
                let Some(s) = borrow_iter(selectors)?.next_item(py, resume)? else { break None };
                if truthy(py, resume(IterRequest::Truth(&s))?) {
                    break Some(v);
                }
            },
        };
        match &item {
            Some(_) => self.pos += 1,
            None => self.exhausted = true,
        }
        Ok(item)
    }
}

/// An iterator step that depends on something not modelled.
fn unsupported_step(what: &str) -> IterError {
    IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedOperation, what))
}

/// Whether a `Truth` answer (a constant bool tracker) is true.
fn truthy(py: Python<'_>, t: Option<VariableTracker>) -> bool {
    t.and_then(|t| t.as_constant(py)).map(|t| t.is_truthy().unwrap_or(false)).unwrap_or(false)
}

/// A mutable borrow of an iterator's state, refused when it is already borrowed (an iterator
/// stepped from inside its own step: a generator that iterates itself).
pub fn borrow_iter(it: &Rc<RefCell<IteratorState>>) -> Result<std::cell::RefMut<'_, IteratorState>, IterError> {
    it.try_borrow_mut().map_err(|_| IterError::Unsupported(crate::symbolic::Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::RaisesException, "an iterator stepped from inside its own step (ValueError: generator already executing)")))
}

impl<'a> InstructionTranslator<'a> {
    /// Note [generator send and close]: `gen.send(v)` of a generator the trace runs resumes its
    /// frame with `v` as the value of the suspended `yield` (Objects/genobject.c, `gen_send_ex`)
    /// and gives the next yielded value; a just-started generator takes only None (eager's
    /// TypeError otherwise, raised in the trace). `gen.close()` of one not started, finished,
    /// or suspended where closing runs no code of its own (`closing_runs_code`) finishes it
    /// (`gen_close`: the GeneratorExit thrown in at the `yield` leaves the frame at once), unless freeing its locals is
    /// observable (Note [observable frees]); one suspended inside such a block would run
    /// handlers the trace does not place, and a `send` that finishes the generator
    /// (`StopIteration`), are left to Python.
    ///
    /// `gen.send(v)` / `gen.close()` for the generator iterator `it`; `None` when `it` is not a
    /// generator the trace runs.
    pub(crate) fn generator_method(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>, name: &str, args: &[VT]) -> VResult<Option<VT>> {
        let (started, suspended_in_block, exhausted, locals_observable) = {
            // A generator calling its own send/close from its body: eager's ValueError
            // ("generator already executing"), left to Python.
            let Ok(st) = it.try_borrow() else {
                graph_break!(RaisesException, "{name}() of a generator that is running (ValueError: generator already executing)");
            };
            let IterKind::Generator(Some(f)) = &st.kind else { return Ok(None) };
            let in_block = f.ip > 0 && crate::symbolic::convert_frame::closing_runs_code(f);
            let observable = f.locals.iter().flatten().any(|v| crate::symbolic::translator::lifetime_observable(py, v));
            (f.ip > 0, in_block, st.exhausted, observable)
        };
        match (name, args) {
            ("send", [v]) => {
                if exhausted {
                    graph_break!(RaisesException, "send() to a finished generator (StopIteration)");
                }
                let is_none = v.as_constant(py).is_some_and(|c| c.is_none());
                if !started && !is_none {
                    let msg = "can't send non-None value to a just-started generator";
                    let exc = py.get_type::<pyo3::exceptions::PyTypeError>().call1((msg,))?;
                    return Err(crate::symbolic::Unsupported::raise_value("TypeError", exc.unbind(), msg));
                }
                match &mut it.borrow_mut().kind {
                    IterKind::Generator(Some(f)) => f.sent = Some(v.clone()),
                    _ => return Ok(None),
                }
                match self.step_iter(py, it)? {
                    Some(item) => Ok(Some(item)),
                    None => graph_break!(RaisesException, "send() finished the generator (StopIteration)"),
                }
            }
            // Note [generator throw]: `gen.throw(e)` (Objects/genobject.c, `_gen_throw`) raises
            // `e` at the suspended `yield`. A generator finished already re-raises it at once;
            // one suspended inside its own `try`/`with` block runs the handler in the trace and
            // `throw` gives the next yielded value. The exception caught by the generator and
            // finishing it (StopIteration), the exception leaving it, or a generator not
            // started or suspended outside any block, are left to Python. Only exceptions the
            // trace raises as values (`TRACED_EXCEPTIONS`), as an instance or a class.
            ("throw", [e]) => {
                let e = match e {
                    VT::Class(_) => self.call(py, e, vec![], vec![])?,
                    _ => e.clone(),
                };
                let Some(value) = e.as_constant(py).filter(|v| v.is_instance_of::<pyo3::exceptions::PyBaseException>()) else {
                    graph_break!(UnsupportedCall, "throw() of {}", e.describe(py));
                };
                if exhausted {
                    return Err(self.raise_value(py, &e));
                }
                if !started {
                    graph_break!(UnsupportedCall, "throw() into a generator not started yet");
                }
                if !matches!(self.raise_value(py, &e).raised, Some(_)) {
                    graph_break!(UnsupportedCall, "throw() of {}", e.describe(py));
                }
                match self.throw_into_generator(py, it, &value)? {
                    Thrown::Yielded(item) => Ok(Some(item)),
                    Thrown::Finished => graph_break!(RaisesException, "throw() finished the generator (StopIteration)"),
                    Thrown::Propagated => graph_break!(RaisesException, "throw() of an exception the generator let through"),
                }
            }
            ("close", []) => {
                if started && !exhausted && suspended_in_block {
                    graph_break!(UnsupportedOperation, "close() of a generator suspended inside a try/with block");
                }
                if started && !exhausted && locals_observable {
                    graph_break!(ObjectLifetime, "close() of a generator whose locals' free is observable (Note [observable frees])");
                }
                let mut st = it.borrow_mut();
                st.exhausted = true;
                if let IterKind::Generator(Some(f)) = &mut st.kind {
                    f.locals.iter_mut().for_each(|l| *l = None);
                    f.stack.clear();
                }
                Ok(Some(VT::none(py)))
            }
            _ => Ok(None),
        }
    }

    /// Resumes the generator `it` (started, not finished) with `value` raised at its suspended
    /// `yield` (Note [generator throw]): what the generator did with it. An exception leaving
    /// the generator counts as `Propagated` only when it is `value` itself, raised again by the
    /// generator's own handlers (a `finally`, a `with` exit that does not suppress it); the
    /// generator is then finished.
    pub(crate) fn throw_into_generator(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>, value: &Bound<'_, PyAny>) -> VResult<Thrown> {
        match &mut it.borrow_mut().kind {
            IterKind::Generator(Some(f)) => f.thrown = Some(value.clone().unbind()),
            _ => graph_break!(InternalInconsistency, "throw() into an iterator that is not a generator frame"),
        }
        match self.step_iter(py, it) {
            Ok(Some(item)) => Ok(Thrown::Yielded(item)),
            Ok(None) => Ok(Thrown::Finished),
            Err(e) if e.kind == crate::symbolic::graph_break::GraphBreakKind::RaisesException && e.exc_value.as_ref().is_some_and(|v| v.bind(py).is(value)) => {
                let mut st = it.borrow_mut();
                st.exhausted = true;
                if let IterKind::Generator(Some(f)) = &mut st.kind {
                    f.locals.iter_mut().for_each(|l| *l = None);
                    f.stack.clear();
                }
                Ok(Thrown::Propagated)
            }
            Err(e) => Err(e),
        }
    }

    /// One step of an iterator (FOR_ITER, `next()`): `None` when exhausted. A step that raises
    /// in CPython (a dict that changed size) raises eager's `RuntimeError` in the trace; one
    /// that leaves the frame is a graph break, so the instruction runs for real and raises
    /// there (the iterator is rebuilt in the state that raises, see `rebuild_of`).
    pub fn step_iter(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>) -> VResult<Option<VT>> {
        let mut resume = |req: IterRequest<'_>| -> Result<Option<VT>, IterError> {
            let r = match req {
                IterRequest::Resume(f) => resume_generator(py, self.og, self.depth + 1, f),
                IterRequest::Call(func, args) => self.call(py, func, args, vec![]).map(Some),
                IterRequest::UserNext(obj) => self.user_next(py, obj),
                IterRequest::Truth(v) => self.truth(py, v).map(|t| Some(const_bool(py, t))),
                IterRequest::MakeIter(v) => self.make_iter(py, v).map(|i| Some(VT::Iterator(i))),
                IterRequest::Add(a, b) => self.binary(py, "add", a, b).map(Some),
                IterRequest::Eq(a, b) => (|| -> VResult<bool> { Ok(self.is_same(py, &a, &b)? || self.equal(py, &a, &b)?) })().map(|t| Some(const_bool(py, t))),
                IterRequest::Items(v) => self.iter_items(py, &v).map(|items| Some(VT::Tuple(Rc::new(items)))),
                IterRequest::WrapItem(v, source) => wrap(py, self.og, v.bind(py), source).map(Some),
                IterRequest::SetMember(m) => self.set_member(py, m.bind(py).clone()).map(Some),
            };
            r.map_err(IterError::Unsupported)
        };
        let r = match borrow_iter(it) {
            Ok(mut state) => state.next_item(py, &mut resume),
            Err(e) => Err(e),
        };
        // Note [user iterators]: the value of the StopIteration that ended a user iterator.
        let stop_value = self.og.user_stop_value.take();
        match r {
            Ok(None) if matches!(it.borrow().kind, IterKind::UserNext(_)) => {
                it.borrow_mut().returned = stop_value;
                Ok(None)
            }
            Ok(v) => Ok(v),
            Err(IterError::Raise(msg)) => {
                // Raised in the trace, so a `try` around the loop or the call that stepped it
                // (`max(d, key=...)`) takes its handler; uncaught, it is a break as before.
                let exc = py.get_type::<pyo3::exceptions::PyRuntimeError>().call1((msg,))?;
                Err(crate::symbolic::Unsupported::raise_value("RuntimeError", exc.unbind(), msg))
            }
            Err(IterError::Unsupported(u)) => Err(u),
        }
    }

    /// Every remaining item of an iterator, exhausting it (`list(it)`, unpacking).
    pub fn drain_iter(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>) -> VResult<Vec<VT>> {
        let mut out = Vec::new();
        while let Some(v) = self.step_iter(py, it)? {
            out.push(v);
            if out.len() > 100_000 {
                graph_break!(UnrollLimit, "iteration too long to unroll");
            }
        }
        Ok(out)
    }

    /// Note [items taken one at a time]: the C methods that write a container from an
    /// iterable (`list_extend` and `list.__iadd__`, `deque_extend`/`deque_extendleft`,
    /// `PyDict_MergeFromSeq2` behind `dict.update`, `set_update_internal` and
    /// `set_difference_update_internal`) take the iterable's items one at a time with
    /// `PyIter_Next` and write each before taking the next; `set.isdisjoint` and
    /// `set.issuperset` (3.11's `set_issuperset`) stop at the first item that decides the
    /// answer, leaving the rest in the iterator. A generator, `map` or other lazy iterator handed
    /// to them runs between the writes: `l.extend(len(l) for _ in range(3))` sees the list grow,
    /// `s.update(v for v in s)` raises `Set changed size during iteration`. Read whole first,
    /// the items would all see the container as it was, and a short-circuiting method would
    /// drain an iterator the frame reads again afterwards. So those methods step such an
    /// argument with `for_each_step`, writing as they go; containers and constants, whose items
    /// are fixed before any write (`list_extend` of a list or tuple reads it as a sequence, the
    /// list itself included), are still read whole.
    ///
    /// The iterator that stepping `v` would run traced code for (an iterator tracker, or a
    /// user object whose `__iter__` is a generator function); `None` for containers and
    /// constants.
    pub(crate) fn lazy_iter(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Rc<RefCell<IteratorState>>>> {
        if let VT::Iterator(it) = v {
            return Ok(Some(it.clone()));
        }
        self.python_iter(py, v)
    }

    /// Steps `it`, handing each item to `each` before taking the next, until it is exhausted
    /// or `each` answers false (Note [items taken one at a time]). Stops with the same
    /// `UnrollLimit` break as `drain_iter` past 100 000 items.
    pub(crate) fn for_each_step(&mut self, py: Python<'_>, it: &Rc<RefCell<IteratorState>>, mut each: impl FnMut(&mut Self, Python<'_>, VT) -> VResult<bool>) -> VResult<()> {
        let mut n_items = 0usize;
        while let Some(v) = self.step_iter(py, it)? {
            if !each(self, py, v)? {
                break;
            }
            n_items += 1;
            if n_items > 100_000 {
                graph_break!(UnrollLimit, "iteration too long to unroll");
            }
        }
        Ok(())
    }

    /// `iter(v)`: the iterator CPython's `tp_iter` of `v` makes. Lists and dicts (and their
    /// views) get live iterators; an iterator is its own iterator; other iterables are walked
    /// once, now, into a fixed sequence.
    /// `iter(o)` for a user object whose class's `__iter__` is a Python generator function
    /// (`collections.abc.Sequence.__iter__`, a user's `def __iter__: yield ...`): the
    /// generator, stepped lazily in the trace. `None` for anything else.
    pub(crate) fn python_iter(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<Rc<RefCell<IteratorState>>>> {
        if !matches!(v, VT::UserObject(_) | VT::Opaque { .. }) {
            return Ok(None);
        }
        let Some(m) = self.python_dunder(py, v, "__iter__")? else { return Ok(None) };
        let is_generator = match &m {
            VT::Method { func, .. } => match func.as_ref() {
                VT::Function { obj, .. } => {
                    let f: u32 = obj.bind(py).getattr("__code__")?.getattr("co_flags")?.extract()?;
                    f & flags::CO_GENERATOR != 0
                }
                _ => false,
            },
            _ => false,
        };
        // A plain `__iter__` (`return iter(self.items)`) is inlined too when the object's class
        // is the user's: `PyObject_GetIter` calls it and takes the iterator it returns; one that
        // returns anything else (a user iterator object, or a non-iterator, eager's TypeError)
        // is left to Python. Torch's own classes (a `DataLoader`, whose loop has its driver:
        // Note [loop bodies as functions]) keep their `__iter__` in Python.
        let torch_class = match v {
            VT::Opaque { obj, .. } => crate::symbolic::variables::class_is_torchs(obj.bind(py)),
            _ => false,
        };
        if !is_generator && torch_class {
            return Ok(None);
        }
        match self.call(py, &m, vec![], vec![])? {
            VT::Iterator(it) => Ok(Some(it)),
            other if self.user_next_method(py, &other)?.is_some() => Ok(Some(Rc::new(RefCell::new(IteratorState::of(IterKind::UserNext(other)))))),
            other => graph_break!(UnsupportedOperation, "__iter__ of {} gave {}", v.describe(py), other.describe(py)),
        }
    }

    /// The bound `__next__` of `v` when it is a user object (built in the frame or passed in)
    /// whose class, not one of torch's, defines `__next__` in Python (Note [user iterators]).
    pub(crate) fn user_next_method(&mut self, py: Python<'_>, v: &VT) -> VResult<Option<VT>> {
        let torch_class = match v {
            VT::UserObject(_) => false,
            VT::Opaque { obj, .. } => crate::symbolic::variables::class_is_torchs(obj.bind(py)),
            _ => return Ok(None),
        };
        if torch_class {
            return Ok(None);
        }
        self.python_dunder(py, v, "__next__")
    }

    /// Note [user iterators]: one step of a user iterator, `type(obj).__next__(obj)` inlined.
    /// `None` when it raises StopIteration: a `raise StopIteration` in that `__next__` frame
    /// itself, or an exhausted `next(...)` it calls there, is raised in the trace (the frame's
    /// depth is in `OutputGraph::next_frames`) and ends the step here. A StopIteration from
    /// deeper down stays a graph break.
    /// The StopIteration's `value` is kept in `OutputGraph::user_stop_value` for `step_iter`,
    /// which makes it the iterator's `returned` (what `yield from` over it evaluates to).
    pub(crate) fn user_next(&mut self, py: Python<'_>, obj: &VT) -> VResult<Option<VT>> {
        match self.user_next_raising(py, obj) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.raised == Some("StopIteration") => {
                let value = match &e.exc_value {
                    Some(exc) => exc.bind(py).getattr("value")?.unbind(),
                    None => py.None(),
                };
                self.og.user_stop_value = Some(VT::constant(value));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `type(obj).__next__(obj)` inlined; a StopIteration its frame raises comes back as the
    /// `Err` that raises it (`next(o)` without a default re-raises that very exception).
    pub(crate) fn user_next_raising(&mut self, py: Python<'_>, obj: &VT) -> VResult<VT> {
        let Some(m) = self.user_next_method(py, obj)? else {
            graph_break!(UnsupportedOperation, "step of {} (no Python __next__)", obj.describe(py));
        };
        self.og.next_frames.push(self.depth + 1);
        let r = self.call(py, &m, vec![], vec![]);
        self.og.next_frames.pop();
        r
    }

    /// The tracker of member `m` of a traced set's real set: a literal, or the tracker it
    /// stands for (`OutputGraph::set_members`).
    pub(crate) fn set_member(&mut self, py: Python<'_>, m: Bound<'_, PyAny>) -> VResult<VT> {
        Ok(match self.og.set_members.get(&(m.as_ptr() as usize)) {
            // Its order follows the members' hashes, for a tensor its address: the fake's is
            // not the real tensor's.
            Some(VT::Tensor(_)) => graph_break!(UnsupportedOperation, "iterating a set that holds tensors (its order follows their addresses)"),
            Some(vt) if !is_literal(py, &m) => vt.clone(),
            _ if is_literal(py, &m) => VT::constant(m.unbind()),
            _ => graph_break!(UnsupportedOperation, "set member of type {} without a tracker", type_name(&m)),
        })
    }

    pub(crate) fn make_iter(&mut self, py: Python<'_>, v: &VT) -> VResult<Rc<RefCell<IteratorState>>> {
        if let Some(it) = self.python_iter(py, v)? {
            return Ok(it);
        }
        if let Some(l) = self.opaque_list_storage(py, v)? {
            // `iter(o)` of a list subclass instance from outside the frame (Note [list subclass
            // iteration]).
            return Ok(Rc::new(RefCell::new(IteratorState::over_list(l))));
        }
        if let Some((d, ordered)) = self.opaque_dict_iter_storage(py, v)? {
            // `iter(o)` of a dict subclass instance from outside the frame whose `__iter__` is
            // dict's or OrderedDict's: its storage's keys (Note [dict subclass storage]).
            return Ok(Rc::new(RefCell::new(IteratorState::over_dict(d, DictView::Keys, ordered))));
        }
        if let VT::UserObject(o) = v {
            // `dict.__iter__` / `OrderedDict.__iter__` of a dict subclass: its storage's keys
            // (an `odict_iterator` for OrderedDict's).
            if let Some(storage) = o.storage_slot(py, "__iter__")? {
                if let VT::Dict(d) = &storage {
                    let odict_iter = py.import("collections")?.getattr("OrderedDict")?.getattr("__iter__")?;
                    if o.cls.bind(py).getattr("__iter__")?.is(&odict_iter) {
                        return Ok(Rc::new(RefCell::new(IteratorState::over_dict(d.clone(), DictView::Keys, true))));
                    }
                }
                return self.make_iter(py, &storage);
            }
        }
        let state = match v {
            VT::Iterator(it) => return Ok(it.clone()),
            VT::List(l) => IteratorState::over_list(l.clone()),
            VT::Deque(l) => {
                let state = l.borrow().deque.map(|d| d.state).unwrap_or(0);
                IteratorState::of(IterKind::Deque { list: l.clone(), state })
            }
            VT::Dict(d) => IteratorState::over_dict(d.clone(), DictView::Keys, false),
            VT::DictView { dict, view, ordered } => IteratorState::over_dict(dict.clone(), *view, *ordered),
            VT::Set(s) => {
                let iter = s.borrow().bind(py).try_iter()?.into_any().unbind();
                IteratorState::of(IterKind::Set { set: s.clone(), iter })
            }
            VT::Constant(c) => {
                // Note [iterator types]: `iter()` of a constant is the constant's own iterator
                // type (`str_ascii_iterator`, `set_iterator` of a frozenset, `range_iterator`).
                let mut st = IteratorState::over(self.iter_items(py, v)?);
                st.py_type = Some(c.bind(py).try_iter()?.get_type().into_any().unbind());
                st.reiterate = Some(c.clone_ref(py));
                st
            }
            other => IteratorState::over(self.iter_items(py, other)?),
        };
        Ok(Rc::new(RefCell::new(state)))
    }

    /// The items of `v` the way `list(v)`, `tuple(v)`, `[*v]`, `f(*v)`, `l.extend(v)` and
    /// `sorted(v)` take them: CPython's `list_extend` and `PySequence_Tuple`
    /// (Objects/listobject.c, Objects/abstract.c) call `iter(v)`, then `PyObject_LengthHint(v)`
    /// to size the result, then step the iterator. For a user object the hint runs its
    /// Python `__len__` (or, without one, `__length_hint__`): both are traced here, between
    /// `__iter__` and the first `__next__` (Note [length hints]).
    pub(crate) fn iter_items_sized(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<VT>> {
        if !matches!(v, VT::UserObject(_) | VT::Opaque { .. }) {
            return self.unpack(py, v);
        }
        if let Some(it) = self.python_iter(py, v)? {
            self.length_hint_effects(py, v)?;
            return self.drain_iter(py, &it);
        }
        let items = self.iter_items(py, v)?;
        self.length_hint_effects(py, v)?;
        Ok(items)
    }

    /// Note [length hints]: `PyObject_LengthHint(o, default)` (Objects/abstract.c) asks
    /// `len(o)` when `o`'s type has a length slot, and a TypeError from it is cleared; then
    /// `type(o).__length_hint__(o)` when the type has one (NotImplemented means no hint); a
    /// negative or non-integer answer raises. C slots have no effect the trace could miss, so
    /// only Python functions are called here, for their effects (a counter, a print); the
    /// answer is checked and dropped. An answer the trace cannot check (a tensor, a symbolic
    /// size, an error other than TypeError) is a graph break before the call, where Python
    /// runs it.
    pub(crate) fn length_hint_effects(&mut self, py: Python<'_>, v: &VT) -> VResult<()> {
        let ty = match v {
            VT::UserObject(o) => o.cls.bind(py).clone(),
            VT::Opaque { obj, .. } => obj.bind(py).get_type().into_any(),
            _ => return Ok(()),
        };
        let Ok(ty) = ty.cast_into::<pyo3::types::PyType>() else { return Ok(()) };
        let check = |r: &VT, what: &str| -> VResult<bool> {
            let Some(c) = r.as_constant(py) else { graph_break!(UnsupportedOperation, "{what} returned a value the trace cannot check") };
            if what == "__length_hint__" && c.is(py.NotImplemented()) {
                return Ok(true);
            }
            match c.extract::<i64>() {
                Ok(n) if n >= 0 && c.is_instance_of::<pyo3::types::PyInt>() => Ok(true),
                _ => graph_break!(UnsupportedOperation, "{what} returned {} (an error in Python)", c.repr().map(|r| r.to_string()).unwrap_or_default()),
            }
        };
        if let Some((_, f)) = crate::symbolic::variables::user_defined::static_type_lookup(&ty, "__len__")? {
            if type_name(&f) != "function" {
                return Ok(());
            }
            let m = self.python_dunder(py, v, "__len__")?.ok_or_else(|| Unsupported::new("__len__ vanished"))?;
            match self.call(py, &m, vec![], vec![]) {
                Ok(r) => {
                    check(&r, "__len__")?;
                    return Ok(());
                }
                Err(e) if e.raised == Some("TypeError") => {}
                Err(e) => return Err(e),
            }
        }
        if let Some((_, f)) = crate::symbolic::variables::user_defined::static_type_lookup(&ty, "__length_hint__")? {
            if type_name(&f) == "function" {
                let m = self.python_dunder(py, v, "__length_hint__")?.ok_or_else(|| Unsupported::new("__length_hint__ vanished"))?;
                let r = self.call(py, &m, vec![], vec![])?;
                check(&r, "__length_hint__")?;
            }
        }
        Ok(())
    }

    pub(crate) fn iter_items(&mut self, py: Python<'_>, v: &VT) -> VResult<Vec<VT>> {
        if let Some(it) = self.python_iter(py, v)? {
            return self.drain_iter(py, &it);
        }
        if let Some((d, ordered)) = self.opaque_dict_iter_storage(py, v)? {
            let it = Rc::new(RefCell::new(IteratorState::over_dict(d, DictView::Keys, ordered)));
            return self.drain_iter(py, &it);
        }
        if let Some(l) = self.opaque_list_storage(py, v)? {
            return Ok(l.borrow().items.clone());
        }
        if let VT::UserObject(o) = v {
            if let Some(storage) = o.storage_slot(py, "__iter__")? {
                return self.iter_items(py, &storage);
            }
            // The old sequence protocol (Objects/iterobject.c, `iter_iternext`): a class without
            // `__iter__` whose `__getitem__` is Python code is iterated as `obj[0]`, `obj[1]`,
            // ... up to the IndexError (or StopIteration) one raises; any other error is raised.
            let ty = o.cls.bind(py).cast::<pyo3::types::PyType>().map_err(PyErr::from)?.clone();
            if crate::symbolic::variables::user_defined::static_type_lookup(&ty, "__iter__")?.is_none() {
                if let Some(getitem) = self.python_dunder(py, v, "__getitem__")? {
                    let mut out = Vec::new();
                    for i in 0i64.. {
                        let idx = VT::constant(i.into_pyobject(py)?.into_any().unbind());
                        match self.call(py, &getitem, vec![idx], vec![]) {
                            Ok(item) => out.push(item),
                            Err(e) if e.is_raised("IndexError") || e.is_raised("StopIteration") => break,
                            Err(e) => return Err(e),
                        }
                        if out.len() > 100_000 {
                            graph_break!(UnrollLimit, "iteration too long to unroll");
                        }
                    }
                    return Ok(out);
                }
            }
        }
        Ok(match v {
            VT::Set(set) => {
                let set = set.borrow();
                let mut out = Vec::new();
                for m in set.bind(py).try_iter()? {
                    out.push(self.set_member(py, m?)?);
                }
                out
            }
            VT::Constant(c) => {
                let mut out = Vec::new();
                for item in c.bind(py).try_iter()? {
                    let item = item?;
                    if item.is_instance_of::<pyo3::types::PyType>() && (c.bind(py).is_instance_of::<pyo3::types::PyTuple>() || is_literal(py, c.bind(py))) {
                        // The classes of a type expression or of a tuple read from one
                        // (`get_args(int | None)`): fixed objects, pinned by the guard on the
                        // expression (compared by value, its classes by identity).
                        out.push(VT::Class(Rc::new(item.unbind())));
                        continue;
                    }
                    if !is_literal(py, &item) {
                        graph_break!(UnsupportedOperation, "iterating a constant yields a non-literal");
                    }
                    out.push(VT::constant(item.unbind()));
                    if out.len() > 100_000 {
                        graph_break!(UnrollLimit, "iteration too long to unroll");
                    }
                }
                out
            }
            VT::Tuple(_) | VT::NamedTuple { .. } | VT::List(_) | VT::Deque(_) | VT::Iterator(_) => self.unpack(py, v)?,
            VT::Dict(_) | VT::DictView { .. } => {
                let it = self.make_iter(py, v)?;
                self.drain_iter(py, &it)?
            }
            VT::Module { obj, source } => {
                let m = obj.bind(py);
                let cls = m.get_type();
                let nn = py.import("torch.nn")?;
                let is_seq = cls.getattr("__iter__")?.is(&nn.getattr("Sequential")?.getattr("__iter__")?)
                    || cls.getattr("__iter__")?.is(&nn.getattr("ModuleList")?.getattr("__iter__")?);
                let is_dict = cls.getattr("__iter__")?.is(&nn.getattr("ModuleDict")?.getattr("__iter__")?);
                let modules = m.getattr("_modules")?;
                let keys: Vec<String> = modules.call_method0("keys")?.try_iter()?.map(|k| k?.extract::<String>()).collect::<PyResult<_>>()?;
                if is_seq || is_dict {
                    self.guard_module_children(py, m, source)?;
                } else {
                    // A `ParameterList`'s or `ParameterDict`'s entries are this instance's
                    // (Note [modules guarded by type] in `builder.rs`).
                    self.pin_identity(v);
                }
                if is_dict {
                    return Ok(keys.iter().map(|k| VT::constant(PyString::new(py, k).into_any().unbind())).collect());
                }
                if cls.getattr("__iter__")?.is(&nn.getattr("ParameterList")?.getattr("__iter__")?) {
                    // `ParameterList.__iter__`: `self[i]` for `i` in `range(len(self))`, where
                    // `__getitem__` is `getattr(self, str(i))`.
                    let n = m.len()?;
                    return (0..n).map(|i| self.module_getattr(py, m, source.clone(), &i.to_string())).collect();
                }
                if cls.getattr("__iter__")?.is(&nn.getattr("ParameterDict")?.getattr("__iter__")?) {
                    // `ParameterDict.__iter__`: `iter(self._keys)`, its keys in insertion order.
                    let keys = m.getattr("_keys")?;
                    return keys.try_iter()?.map(|k| Ok(VT::constant(k?.unbind()))).collect();
                }
                if !is_seq {
                    graph_break!(NnModule, "iterating module {}", type_name(m));
                }
                let mut out = Vec::new();
                for k in keys {
                    let c = modules.get_item(&k)?;
                    if c.is_none() {
                        continue;
                    }
                    match self.module_child_source(py, m, source, &k) {
                        Some(s) => out.push(wrap(py, self.og, &c, s)?),
                        None => match self.derived_child(&c) {
                            Some(v) => out.push(v),
                            None => graph_break!(MissingSource, "module iteration without a source"),
                        },
                    }
                }
                out
            }
            VT::Tensor(t) => {
                let n: i64 = t.fake.bind(py).call_method1("size", (0,))?.extract()?;
                let mut out = Vec::new();
                for i in 0..n {
                    let idx = VT::constant(i.into_pyobject(py)?.into_any().unbind());
                    out.push(self.getitem(py, v, &idx)?);
                }
                out
            }
            VT::Opaque { .. } => graph_break!(UntracedValue, "iterating {} (its __iter__ runs in Python)", v.describe(py)),
            // Note [enum members]: its canonical members in definition order.
            VT::Class(c) if crate::symbolic::builder::is_plain_enum_class(py, c.bind(py)) => {
                let cls = c.bind(py).clone();
                let mut out = Vec::new();
                for m in cls.try_iter()? {
                    out.push(self.enum_member(py, &cls, m?)?);
                }
                out
            }
            _ => graph_break!(UnsupportedOperation, "iterating {}", v.describe(py)),
        })
    }

    /// `map`, `filter` and the `itertools` iterators tracing models lazily (`IterKind::Map` and
    /// siblings): each step pulls from live iterators of the arguments and calls the function
    /// traced, as CPython's `tp_iternext` does. `itertools.product` reads its arguments whole
    /// at construction (Modules/itertoolsmodule.c, `product_new`), so it is a fixed sequence.
    /// `None`: `b` is none of these, or is called with arguments not modelled.
    /// `itertools.tee(iterable, n=2)` (`itertools_tee_impl`): `n` iterators over the items of
    /// `iter(iterable)`, sharing what was taken (`TeeShared`); an iterable that is itself a
    /// tee iterator is the first of them and the others are its copies (`__copy__`). `None`:
    /// `b` is not `tee`, or `n` is not a constant non-negative int.
    pub(crate) fn itertools_tee(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !py.import("itertools")?.getattr("tee")?.is(b) || !kwargs.is_empty() || !(1..=2).contains(&args.len()) {
            return Ok(None);
        }
        let n = match args.get(1) {
            None => 2,
            Some(v) => match v.as_constant(py).filter(|c| c.is_instance_of::<pyo3::types::PyInt>()).and_then(|c| c.extract::<i64>().ok()) {
                Some(n) if n >= 0 => n as usize,
                _ => return Ok(None),
            },
        };
        let it = self.make_iter(py, &args[0])?;
        let copyable = match &it.borrow().kind {
            IterKind::Tee { shared, index } => Some((shared.clone(), *index)),
            _ => None,
        };
        let mut out = Vec::with_capacity(n);
        let (shared, index) = match copyable {
            Some((shared, index)) => {
                if n > 0 {
                    out.push(VT::Iterator(it.clone()));
                }
                (shared, index)
            }
            None => (Rc::new(RefCell::new(TeeShared { inner: it, buffer: Vec::new(), exhausted: false })), 0),
        };
        while out.len() < n {
            out.push(VT::Iterator(Rc::new(RefCell::new(IteratorState::of(IterKind::Tee { shared: shared.clone(), index })))));
        }
        Ok(Some(VT::Tuple(Rc::new(out))))
    }

    pub(crate) fn lazy_iterator(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<IterKind>> {
        let builtins = self.og.handles.builtins.bind(py).clone();
        let itertools = py.import("itertools")?;
        let is = |m: &Bound<'_, PyAny>, name: &str| m.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let kw = |name: &str| kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let none_or = |v: Option<VT>| v.filter(|v| !v.as_constant(py).map(|c| c.is_none()).unwrap_or(false));
        let kind = if is(&builtins, "map") && args.len() >= 2 && kwargs.is_empty() {
            let inners = args[1..].iter().map(|a| self.make_iter(py, a)).collect::<VResult<Vec<_>>>()?;
            IterKind::Map { func: args[0].clone(), inners }
        } else if is(&builtins, "filter") && args.len() == 2 && kwargs.is_empty() {
            let inner = self.make_iter(py, &args[1])?;
            IterKind::Filter { func: none_or(Some(args[0].clone())), inner }
        } else if is(&itertools, "chain") && kwargs.is_empty() {
            IterKind::Chain { pending: args.iter().cloned().collect(), active: None, outer: None }
        } else if args.len() == 1 && kwargs.is_empty() && b.getattr("__name__").map(|n| n.to_string() == "from_iterable").unwrap_or(false)
            && b.getattr("__self__").map(|s| s.is(&itertools.getattr("chain").unwrap())).unwrap_or(false) {
            // `chain.from_iterable(outer)`: `iter(outer)` now, its items one at a time.
            IterKind::Chain { pending: Default::default(), active: None, outer: Some(self.make_iter(py, &args[0])?) }
        } else if is(&itertools, "islice") && (2..=4).contains(&args.len()) && kwargs.is_empty() {
            let ints = args[1..].iter().map(|a| match a.as_constant(py) {
                Some(c) if c.is_none() => Ok(None),
                Some(c) => c.extract::<i64>().ok().filter(|v| *v >= 0).map(|v| Some(v as usize)).ok_or(()),
                None => Err(()),
            }).collect::<Result<Vec<_>, ()>>();
            let Ok(ints) = ints else { graph_break!(UnsupportedCall, "islice() with bounds that are not constant non-negative ints") };
            let (start, stop, step) = match ints.len() {
                1 => (None, ints[0], None),
                2 => (ints[0], ints[1], None),
                _ => (ints[0], ints[1], ints[2]),
            };
            if step == Some(0) {
                graph_break!(UnsupportedCall, "islice() with step 0 (ValueError)");
            }
            let inner = self.make_iter(py, &args[0])?;
            IterKind::Islice { inner, next: start.unwrap_or(0), stop, step: step.unwrap_or(1), count: 0 }
        } else if is(&itertools, "accumulate") && (1..=2).contains(&args.len()) && kwargs.iter().all(|(k, _)| k == "func" || k == "initial") {
            let inner = self.make_iter(py, &args[0])?;
            let func = none_or(args.get(1).cloned().or_else(|| kw("func")));
            IterKind::Accumulate { inner, func, total: None, initial: none_or(kw("initial")) }
        } else if is(&itertools, "zip_longest") && kwargs.iter().all(|(k, _)| k == "fillvalue") {
            let inners = args.iter().map(|a| self.make_iter(py, a).map(Some)).collect::<VResult<Vec<_>>>()?;
            IterKind::ZipLongest { inners, fill: kw("fillvalue").unwrap_or_else(|| VT::none(py)) }
        } else if is(&itertools, "starmap") && args.len() == 2 && kwargs.is_empty() {
            IterKind::Starmap { func: args[0].clone(), inner: self.make_iter(py, &args[1])? }
        } else if is(&itertools, "takewhile") && args.len() == 2 && kwargs.is_empty() {
            IterKind::TakeWhile { func: args[0].clone(), inner: self.make_iter(py, &args[1])?, stop: false }
        } else if is(&itertools, "dropwhile") && args.len() == 2 && kwargs.is_empty() {
            IterKind::DropWhile { func: args[0].clone(), inner: self.make_iter(py, &args[1])?, dropping: true }
        } else if is(&itertools, "filterfalse") && args.len() == 2 && kwargs.is_empty() {
            let inner = self.make_iter(py, &args[1])?;
            IterKind::FilterFalse { func: none_or(Some(args[0].clone())), inner }
        } else if is(&itertools, "pairwise") && args.len() == 1 && kwargs.is_empty() {
            IterKind::Pairwise { inner: self.make_iter(py, &args[0])?, old: None }
        } else if is(&itertools, "groupby") && (1..=2).contains(&(args.len() + kwargs.len())) && kwargs.iter().all(|(k, _)| k == "iterable" || k == "key") {
            let Some(iterable) = args.first().cloned().or_else(|| kw("iterable")) else { return Ok(None) };
            if (!args.is_empty() && kw("iterable").is_some()) || (args.len() == 2 && kw("key").is_some()) {
                return Ok(None);
            }
            let key = none_or(args.get(1).cloned().or_else(|| kw("key")));
            let inner = self.make_iter(py, &iterable)?;
            IterKind::GroupBy(Rc::new(RefCell::new(GroupByState { inner, key, tgtkey: None, currkey: None, currvalue: None, currgrouper: 0, next_id: 0 })))
        } else if is(&itertools, "compress") && args.len() == 2 && kwargs.is_empty() {
            IterKind::Compress { data: self.make_iter(py, &args[0])?, selectors: self.make_iter(py, &args[1])? }
        } else if is(&itertools, "cycle") && args.len() == 1 && kwargs.is_empty() {
            IterKind::Cycle { inner: Some(self.make_iter(py, &args[0])?), saved: Vec::new(), index: 0 }
        } else if is(&itertools, "count") && args.len() + kwargs.len() <= 2 && kwargs.iter().all(|(k, _)| k == "start" || k == "step") {
            // `count_new` accepts numbers only (TypeError otherwise): modelled for constant
            // ints and floats; anything else is left to the real call.
            let start = args.first().cloned().or_else(|| kw("start"));
            let step = args.get(1).cloned().or_else(|| kw("step"));
            if (args.len() >= 1 && kw("start").is_some()) || (args.len() == 2 && kw("step").is_some()) {
                return Ok(None);
            }
            let number = |v: &Option<VT>| match v {
                None => true,
                Some(v) => v.as_constant(py).map(|c| c.is_instance_of::<pyo3::types::PyInt>() || c.is_instance_of::<pyo3::types::PyFloat>()).unwrap_or(false),
            };
            if !number(&start) || !number(&step) {
                return Ok(None);
            }
            let zero = VT::constant(0i64.into_pyobject(py)?.into_any().unbind());
            let one = VT::constant(1i64.into_pyobject(py)?.into_any().unbind());
            IterKind::Count { next: start.unwrap_or(zero), step: step.unwrap_or(one) }
        } else if is(&itertools, "repeat") && (1..=2).contains(&(args.len() + kwargs.len())) && kwargs.iter().all(|(k, _)| k == "object" || k == "times") {
            let Some(item) = args.first().cloned().or_else(|| kw("object")) else { return Ok(None) };
            if args.len() == 2 && kw("times").is_some() || !args.is_empty() && kw("object").is_some() {
                return Ok(None);
            }
            // `repeat_new`: a negative count repeats zero times.
            let remaining = match args.get(1).cloned().or_else(|| kw("times")) {
                None => None,
                Some(t) => match t.as_constant(py).filter(|c| c.is_instance_of::<pyo3::types::PyInt>()).and_then(|c| c.extract::<i64>().ok()) {
                    Some(n) => Some(n.max(0) as usize),
                    None => return Ok(None),
                },
            };
            IterKind::Repeat { item, remaining }
        } else if is(&itertools, "product") && kwargs.iter().all(|(k, _)| k == "repeat") {
            let repeat: usize = match kw("repeat").and_then(|r| r.as_constant(py)) {
                Some(r) => r.extract::<i64>().ok().filter(|r| *r >= 0).map(|r| r as usize).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedCall, "product() repeat"))?,
                None if kwargs.is_empty() => 1,
                None => graph_break!(UnsupportedOperation, "product() with a non-constant repeat"),
            };
            let mut pools = Vec::new();
            for a in args {
                pools.push(self.iter_items(py, a)?);
            }
            let pools: Vec<Vec<VT>> = (0..repeat).flat_map(|_| pools.iter().cloned()).collect();
            let mut out: Vec<Vec<VT>> = vec![vec![]];
            for pool in &pools {
                out = out.into_iter().flat_map(|prefix| pool.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(v.clone());
                    p
                })).collect();
                if out.len() > 100_000 {
                    graph_break!(UnrollLimit, "product() too long to unroll");
                }
            }
            IterKind::Items(out.into_iter().map(|t| crate::symbolic::variables::tuple_of(py, t)).collect())
        } else if let Some(name) = ["combinations", "permutations", "combinations_with_replacement"].into_iter().find(|n| is(&itertools, n)) {
            // Like `product`, these read their iterable whole at construction
            // (Modules/itertoolsmodule.c, `combinations_new` and siblings) and then only index
            // that pool: the same tuples of indices over `range(len(pool))`, mapped to items.
            let r = match (args.get(1).cloned().or_else(|| kw("r")), kwargs.iter().all(|(k, _)| k == "r"), args.len()) {
                (_, false, _) | (_, _, 0) | (_, _, 3..) => return Ok(None),
                (Some(r), _, _) => match r.as_constant(py) {
                    Some(c) if c.is_none() && name == "permutations" => None,
                    Some(c) => Some(c.extract::<i64>().map_err(|_| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::UnsupportedCall, format!("{name}() r is not an int")))?),
                    None => graph_break!(UnsupportedCall, "{name}() with a non-constant r"),
                },
                (None, _, _) if name == "permutations" => None,
                (None, _, _) => graph_break!(ArgumentMismatch, "{name}() missing required argument 'r' (TypeError)"),
            };
            if r.is_some_and(|r| r < 0) {
                graph_break!(ArgumentMismatch, "{name}(): r must be non-negative (ValueError)");
            }
            let pool = self.iter_items(py, &args[0])?;
            let n = pool.len() as u64;
            let k = r.map(|r| r as u64).unwrap_or(n);
            let math = py.import("math")?;
            let count: u64 = match name {
                "combinations" => math.call_method1("comb", (n, k))?.extract()?,
                "permutations" => math.call_method1("perm", (n, k))?.extract()?,
                _ => if n == 0 && k > 0 { 0 } else { math.call_method1("comb", ((n + k).saturating_sub(1), k))?.extract()? },
            };
            if count > 100_000 {
                graph_break!(UnrollLimit, "{name}() of {count} tuples is too long to unroll");
            }
            let indices = itertools.getattr(name)?.call1((pyo3::types::PyRange::new(py, 0, n as isize)?, k))?;
            let mut out = Vec::new();
            for t in indices.try_iter()? {
                let t: Vec<usize> = t?.extract()?;
                out.push(crate::symbolic::variables::tuple_of(py, t.into_iter().map(|i| pool[i].clone()).collect()));
            }
            IterKind::Items(out)
        } else {
            return Ok(None);
        };
        Ok(Some(kind))
    }
}

/// Runs a traced generator's frame up to its next `yield` (`Some(value)`) or its return (`None`),
/// keeping its state in `f` for the next step.
pub(crate) fn resume_generator(py: Python<'_>, og: &mut OutputGraph, depth: usize, f: &mut GeneratorFrame) -> VResult<Option<VT>> {
    if depth > MAX_INLINE_DEPTH {
        graph_break!(UnrollLimit, "generator nesting too deep");
    }
    og.inline_sites.push(None);
    let mut child = InstructionTranslator::new(f.code.clone(), f.g.clone(), std::mem::take(&mut f.locals), std::mem::take(&mut f.closure), og, depth);
    child.generator = true;
    child.external_cells = std::mem::take(&mut f.external_cells);
    child.stack = std::mem::take(&mut f.stack);
    child.ip = f.ip;
    // The value `next()` (None) or `send(v)` sends into the suspended YIELD_VALUE (a generator
    // not started yet takes only None, which nothing receives).
    let sent = f.sent.take();
    let thrown = f.thrown.take();
    if let Some(exc) = &thrown {
        // Note [generator throw]: the exception is raised at the suspended YIELD_VALUE, whose
        // handler must be one of the generator's own `try`/`with` blocks.
        // A generator suspended in a `yield from` hands the throw to the iterator it delegates
        // to, which is not modelled.
        let at = f.ip.checked_sub(1).filter(|&i| child.code.insts[i].opcode == crate::bytecode::opcode::op::YIELD_VALUE && !delegating(f));
        let Some(at) = at.filter(|&i| child.code.insts[i].exn.is_some()) else {
            child.og.inline_sites.pop();
            f.locals = std::mem::take(&mut child.locals);
            f.closure = std::mem::take(&mut child.closure);
            f.external_cells = std::mem::take(&mut child.external_cells);
            f.stack = std::mem::take(&mut child.stack);
            graph_break!(UnsupportedOperation, "throw() into a generator suspended outside a try/with block or in a yield from");
        };
        let value = exc.bind(py);
        let name = crate::symbolic::translator::TRACED_EXCEPTIONS.iter().find(|n| value.get_type().name().is_ok_and(|t| t.to_string() == **n)).copied().unwrap_or("Exception");
        let raised = crate::symbolic::Unsupported::raise_value(name, exc.clone_ref(py), crate::symbolic::variables::exceptions::exception_text(value));
        child.unwind_to_handler(py, at, &raised)?;
    } else if f.ip > 0 {
        child.stack.push(sent.unwrap_or_else(|| VT::none(py)));
    }
    let outcome = child.run_until(py, None);
    child.og.inline_sites.pop();
    f.locals = std::mem::take(&mut child.locals);
    f.closure = std::mem::take(&mut child.closure);
    f.external_cells = std::mem::take(&mut child.external_cells);
    f.stack = std::mem::take(&mut child.stack);
    f.ip = child.ip;
    // An exception leaving a generator finishes it, which its frame state here does not model:
    // not catchable inside the trace.
    let outcome = outcome.map_err(|e| Unsupported { raised: None, ..e });
    match outcome? {
        Outcome::Yield(v) => Ok(Some(v)),
        Outcome::Return(v) => {
            f.returned = Some(v);
            Ok(None)
        }
        Outcome::Break(_) => graph_break!(UnresumableBreak, "graph break inside a generator"),
    }
}

/// What a dict iterator over `view` yields for the item `(k, v)`: the key, the value or the
/// `(key, value)` pair (Objects/dictobject.c, `dictiter_iternext{key,value,item}`).
fn view_item(py: Python<'_>, view: DictView, k: &Py<PyAny>, v: &VariableTracker) -> VariableTracker {
    match view {
        DictView::Keys => crate::symbolic::variables::dicts::key_tracker(py, k),
        DictView::Values => v.clone(),
        DictView::Items => tuple_of(py, vec![crate::symbolic::variables::dicts::key_tracker(py, k), v.clone()]),
    }
}
