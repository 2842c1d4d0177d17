//! `collections.deque` (torch's `DequeVariable`): a list-like tracker (`VT::Deque` over a
//! `ListState` whose `deque` is set) with a bound on its length and the methods of
//! Modules/_collectionsmodule.c.
//!
//! Note [deques]: a deque built in the frame or passed in is modelled as CPython's is: `maxlen`
//! (fixed at construction, read-only) drops items from the other end as items are added
//! (`append` drops the leftmost, `appendleft` the rightmost, `extend` and `extendleft` item by
//! item, so `extendleft` reverses), `rotate(n)` moves the last `n` items to the front, indexing
//! takes ints only (a slice is a TypeError), `d == other` compares items only against another
//! deque (a list or tuple is never equal), and an iterator raises `RuntimeError: deque mutated
//! during iteration` at its next step once the deque changed length-wise (`DequeInfo::state`,
//! bumped where the C code bumps `deque->state`). A deque from the frame is wrapped item by item
//! (TYPE_MATCH, LENGTH_CHECK, its `maxlen` by CONSTANT_MATCH); mutating it is a side effect
//! replayed after the graph as `d.clear(); d.extend(items)` (`dynamo._polyfills.deque_replace`).
//! A deque built in the frame that escapes is rebuilt as `deque(items, maxlen)`. Everything not
//! listed here (`remove` of a non-constant, comparisons by order, `+`, `*`, `copy.copy`) is a
//! graph break.

use crate::graph_break;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::variables::lists::ListState;
use crate::symbolic::variables::VT;
use crate::symbolic::{Unsupported, VResult};
use pyo3::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;

/// What makes a `ListState` a deque's.
#[derive(Clone, Copy, Debug, Default)]
pub struct DequeInfo {
    /// `maxlen` (None: unbounded).
    pub maxlen: Option<usize>,
    /// CPython's `deque->state`: bumped by every change of the item sequence other than an item
    /// assignment; an iterator made at one state raises at a step taken at another.
    pub state: u64,
}

/// The methods of `collections.deque` modelled here.
pub const DEQUE_METHODS: [&str; 14] = [
    "append", "appendleft", "pop", "popleft", "extend", "extendleft", "rotate", "clear", "count", "index", "insert", "remove", "reverse", "copy",
];

/// A deque built in the trace.
pub fn new_deque(items: Vec<VT>, maxlen: Option<usize>) -> VT {
    let mut st = ListState { entry_len: 0, items: vec![], source: None, append_only: false, deque: Some(DequeInfo { maxlen, state: 0 }), owner: None, subclass_storage: false };
    push_right(&mut st, items);
    st.entry_len = st.items.len();
    VT::Deque(Rc::new(RefCell::new(st)))
}

/// `deque.append` for each item (`deque_append_internal`): past `maxlen`, the leftmost goes.
fn push_right(st: &mut ListState, items: Vec<VT>) {
    let maxlen = st.deque.and_then(|d| d.maxlen);
    for v in items {
        if maxlen == Some(0) {
            continue;
        }
        st.items.push(v);
        if maxlen.is_some_and(|m| st.items.len() > m) {
            st.items.remove(0);
        }
    }
}

/// `deque.appendleft` for each item (`deque_appendleft_internal`): past `maxlen`, the rightmost
/// goes.
fn push_left(st: &mut ListState, items: Vec<VT>) {
    let maxlen = st.deque.and_then(|d| d.maxlen);
    for v in items {
        if maxlen == Some(0) {
            continue;
        }
        st.items.insert(0, v);
        if maxlen.is_some_and(|m| st.items.len() > m) {
            st.items.pop();
        }
    }
}

fn bump(st: &mut ListState) {
    if let Some(d) = st.deque.as_mut() {
        d.state += 1;
    }
}

impl<'a> InstructionTranslator<'a> {
    /// `collections.deque(iterable=(), maxlen=None)` (`deque_init`): `maxlen` must be a
    /// non-negative int or None (ValueError / TypeError otherwise, left to Python as a break).
    pub(crate) fn construct_deque(&mut self, py: Python<'_>, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if args.len() > 2 || kwargs.iter().any(|(k, _)| k != "iterable" && k != "maxlen") {
            graph_break!(ArgumentMismatch, "deque() with {} positional arguments or unknown keywords (TypeError)", args.len());
        }
        let kw = |name: &str| kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        if (!args.is_empty() && kw("iterable").is_some()) || (args.len() == 2 && kw("maxlen").is_some()) {
            graph_break!(ArgumentMismatch, "deque() given an argument twice (TypeError)");
        }
        let iterable = args.first().cloned().or_else(|| kw("iterable"));
        let maxlen = match args.get(1).cloned().or_else(|| kw("maxlen")) {
            None => None,
            Some(m) => match m.as_constant(py) {
                Some(c) if c.is_none() => None,
                Some(c) if c.is_exact_instance_of::<pyo3::types::PyInt>() => match c.extract::<i64>() {
                    Ok(n) if n >= 0 => Some(n as usize),
                    _ => graph_break!(ArgumentMismatch, "deque() maxlen must be non-negative (ValueError)"),
                },
                _ => graph_break!(ArgumentMismatch, "deque() maxlen that is not a constant int"),
            },
        };
        let items = match iterable {
            Some(it) => self.iter_items(py, &it)?,
            None => vec![],
        };
        Ok(new_deque(items, maxlen))
    }

    /// An attribute of a deque: `maxlen`, or one of `DEQUE_METHODS` (bound, not yet called).
    pub(crate) fn deque_attr(&mut self, py: Python<'_>, obj: &VT, name: &str) -> VResult<VT> {
        let VT::Deque(l) = obj else { unreachable!("a deque") };
        if name == "maxlen" {
            let m = l.borrow().deque.and_then(|d| d.maxlen);
            return Ok(match m {
                Some(m) => VT::constant((m as i64).into_pyobject(py)?.into_any().unbind()),
                None => VT::none(py),
            });
        }
        // The special methods behind the syntax, called by name (`d.__len__()`), take the
        // syntax's path (`call_container_method`).
        if DEQUE_METHODS.contains(&name) || matches!(name, "__len__" | "__iter__" | "__contains__" | "__getitem__" | "__setitem__" | "__delitem__" | "__iadd__") {
            return Ok(VT::ContainerMethod { container: Box::new(obj.clone()), name: name.to_string() });
        }
        graph_break!(UnsupportedOperation, "attribute {name} of a deque")
    }

    /// A call of one of `DEQUE_METHODS` on a deque tracker.
    pub(crate) fn call_deque_method(&mut self, py: Python<'_>, l: &Rc<RefCell<ListState>>, name: &str, args: Vec<VT>, kwargs: Vec<(String, VT)>) -> VResult<VT> {
        if !kwargs.is_empty() {
            graph_break!(ArgumentMismatch, "deque.{name}() takes no keyword arguments (TypeError)");
        }
        let arity = match name {
            "pop" | "popleft" | "clear" | "reverse" | "copy" => 0..=0,
            "rotate" => 0..=1,
            "index" => 1..=3,
            "insert" => 2..=2,
            _ => 1..=1,
        };
        if !arity.contains(&args.len()) {
            graph_break!(ArgumentMismatch, "deque.{name}() with {} arguments (TypeError)", args.len());
        }
        let int_arg = |v: &VT, what: &str| -> VResult<i64> {
            match v.as_constant(py) {
                Some(c) if c.is_instance_of::<pyo3::types::PyInt>() => Ok(c.extract()?),
                _ => graph_break!(UnsupportedOperation, "deque.{name}() {what} that is not a constant int"),
            }
        };
        // Read-only methods first (no side effect recorded).
        match name {
            "copy" => {
                let st = l.borrow();
                return Ok(new_deque(st.items.clone(), st.deque.and_then(|d| d.maxlen)));
            }
            "count" | "index" => {
                let items = l.borrow().items.clone();
                let n = items.len() as i64;
                let clamp = |k: i64| if k < 0 { (k + n).max(0) } else { k.min(n) };
                let start = match args.get(1) { Some(a) => clamp(int_arg(a, "start")?), None => 0 };
                let stop = match args.get(2) { Some(a) => clamp(int_arg(a, "stop")?), None => n };
                let mut count = 0i64;
                for (i, item) in items.iter().enumerate() {
                    let i = i as i64;
                    if name == "index" && (i < start || i >= stop) {
                        continue;
                    }
                    if self.equal(py, item, &args[0])? {
                        if name == "index" {
                            return Ok(VT::constant(i.into_pyobject(py)?.into_any().unbind()));
                        }
                        count += 1;
                    }
                }
                if name == "index" {
                    graph_break!(RaisesException, "deque.index(x): x not in deque (ValueError)");
                }
                return Ok(VT::constant(count.into_pyobject(py)?.into_any().unbind()));
            }
            _ => {}
        }
        // Everything below changes the deque.
        let extend_items = match name {
            "extend" | "extendleft" => {
                // `deque_extend` of the deque itself copies it first.
                if matches!(&args[0], VT::Deque(o) if Rc::ptr_eq(o, l)) {
                    Some(l.borrow().items.clone())
                } else if let Some(it) = self.lazy_iter(py, &args[0])? {
                    // Note [items taken one at a time]: each item is appended (and `state`
                    // moved) before the next is taken; with `maxlen == 0` the items are only
                    // consumed (`consume_iterator`), the deque untouched.
                    if l.borrow().source.is_some() {
                        self.og.side_effects.mutate_list(l);
                    }
                    let left = name == "extendleft";
                    self.for_each_step(py, &it, |_, _, v| {
                        let mut st = l.borrow_mut();
                        if st.deque.and_then(|d| d.maxlen) == Some(0) {
                            return Ok(true);
                        }
                        if left {
                            push_left(&mut st, vec![v]);
                        } else {
                            push_right(&mut st, vec![v]);
                        }
                        bump(&mut st);
                        Ok(true)
                    })?;
                    return Ok(VT::none(py));
                } else {
                    Some(self.iter_items(py, &args[0])?)
                }
            }
            _ => None,
        };
        let remove_at = if name == "remove" {
            let items = l.borrow().items.clone();
            let mut at = None;
            for (i, item) in items.iter().enumerate() {
                if self.equal(py, item, &args[0])? {
                    at = Some(i);
                    break;
                }
            }
            match at {
                Some(i) => Some(i),
                None => graph_break!(RaisesException, "deque.remove(x): x not in deque (ValueError)"),
            }
        } else {
            None
        };
        if l.borrow().source.is_some() {
            self.og.side_effects.mutate_list(l);
        }
        let mut st = l.borrow_mut();
        let result = match name {
            "append" => {
                push_right(&mut st, vec![args[0].clone()]);
                VT::none(py)
            }
            "appendleft" => {
                push_left(&mut st, vec![args[0].clone()]);
                VT::none(py)
            }
            "extend" => {
                push_right(&mut st, extend_items.expect("extend items"));
                VT::none(py)
            }
            "extendleft" => {
                push_left(&mut st, extend_items.expect("extend items"));
                VT::none(py)
            }
            "pop" | "popleft" => {
                if st.items.is_empty() {
                    drop(st);
                    graph_break!(RaisesException, "{name} from an empty deque (IndexError)");
                }
                if name == "pop" { st.items.pop().expect("not empty") } else { st.items.remove(0) }
            }
            "clear" => {
                st.items.clear();
                VT::none(py)
            }
            "reverse" => {
                st.items.reverse();
                VT::none(py)
            }
            "rotate" => {
                let n = match args.first() {
                    Some(a) => {
                        drop(st);
                        let k = int_arg(a, "count")?;
                        st = l.borrow_mut();
                        k
                    }
                    None => 1,
                };
                let len = st.items.len() as i64;
                if len > 1 {
                    let k = n.rem_euclid(len) as usize;
                    st.items.rotate_right(k);
                }
                VT::none(py)
            }
            "insert" => {
                drop(st);
                let k = int_arg(&args[0], "index")?;
                st = l.borrow_mut();
                if st.deque.and_then(|d| d.maxlen).is_some_and(|m| st.items.len() >= m) {
                    drop(st);
                    graph_break!(RaisesException, "deque already at its maximum size (IndexError)");
                }
                let n = st.items.len() as i64;
                let k = if k < 0 { (k + n).max(0) } else { k.min(n) };
                st.items.insert(k as usize, args[1].clone());
                VT::none(py)
            }
            "remove" => {
                st.items.remove(remove_at.expect("found above"));
                VT::none(py)
            }
            _ => {
                drop(st);
                graph_break!(UnsupportedOperation, "deque.{name}()");
            }
        };
        bump(&mut st);
        Ok(result)
    }

    /// `d[k]` for an int `k` (`deque_item`); anything else is a TypeError in CPython, left to
    /// Python as a break.
    pub(crate) fn deque_index(&mut self, py: Python<'_>, l: &Rc<RefCell<ListState>>, idx: &VT) -> VResult<usize> {
        let k = match idx.as_constant(py) {
            Some(c) if c.is_instance_of::<pyo3::types::PyInt>() => c.extract::<i64>()?,
            _ => graph_break!(UnsupportedOperation, "deque index {} (only constant ints are modelled)", idx.describe(py)),
        };
        let n = l.borrow().items.len() as i64;
        let k2 = if k < 0 { k + n } else { k };
        if k2 < 0 || k2 >= n {
            let msg = "deque index out of range".to_string();
            let exc = pyo3::exceptions::PyIndexError::new_err(msg.clone()).into_value(py).into_any();
            return Err(Unsupported::raise_value("IndexError", exc, msg));
        }
        Ok(k2 as usize)
    }

    /// `d[k] = v` (`deque_ass_item`: no change of `state`) and `del d[k]` (which is a
    /// rotation, so it does change it).
    pub(crate) fn deque_setitem(&mut self, py: Python<'_>, l: &Rc<RefCell<ListState>>, idx: &VT, v: Option<VT>) -> VResult<()> {
        let k = self.deque_index(py, l, idx)?;
        if l.borrow().source.is_some() {
            self.og.side_effects.mutate_list(l);
        }
        let mut st = l.borrow_mut();
        match v {
            Some(v) => st.items[k] = v,
            None => {
                st.items.remove(k);
                bump(&mut st);
            }
        }
        Ok(())
    }

    /// `a == b` with a deque on one side (`deque_richcompare`): item-wise against another deque,
    /// never equal to anything else (NotImplemented both ways, then identity).
    pub(crate) fn deque_eq(&mut self, py: Python<'_>, a: &VT, b: &VT) -> VResult<bool> {
        match (a, b) {
            (VT::Deque(x), VT::Deque(y)) => {
                if Rc::ptr_eq(x, y) {
                    return Ok(true);
                }
                let (xs, ys) = (x.borrow().items.clone(), y.borrow().items.clone());
                if xs.len() != ys.len() {
                    return Ok(false);
                }
                for (p, q) in xs.iter().zip(ys.iter()) {
                    if !self.equal(py, p, q)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            (VT::Deque(_), other) | (other, VT::Deque(_)) => match other {
                VT::UserObject(_) | VT::Opaque { .. } => graph_break!(UntracedValue, "== of a deque and {}", other.describe(py)),
                _ => Ok(false),
            },
            _ => unreachable!("a deque on one side"),
        }
    }
}
