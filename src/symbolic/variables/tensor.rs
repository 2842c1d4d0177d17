//! Tensors and symbolic numbers (torch's `TensorVariable`, `SymNodeVariable`): graph nodes
//! with a fake example value; `torch.Size` of symbolic sizes; operators and builtins over
//! `SymInt`s that stay symbolic.

use crate::graph::NodeId;
use crate::source::Source;
use crate::symbolic::output_graph::OutputGraph;
use crate::symbolic::variables::{type_name, VT};
use crate::symbolic::{Unsupported, VResult};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::rc::Rc;
use std::sync::Arc;
use crate::symbolic::translator::InstructionTranslator;
use crate::symbolic::object_protocol::out_of_place;

/// A tensor in the graph: its node, its fake example value (a `FakeTensor`), and where it came
/// from when it is a graph input.
pub struct TensorVariable {
    pub node: NodeId,
    pub fake: Py<PyAny>,
    pub source: Option<Arc<Source>>,
    /// An input that a user's weak reference points to (a `weakref.finalize`, a callback, a
    /// `WeakKeyDictionary` key): dropping the frame's last reference to it is observable (Note
    /// [observable frees] in `translator.rs`). Always false for tensors the graph computes.
    pub weakly_referenced: bool,
}

/// A Python number computed from symbolic sizes (Note [symbolic sizes] in `output_graph.rs`):
/// `x.size(0)` of a tensor with a dynamic dimension, `b * t`, `n // heads`. It is a graph node
/// whose fake value is a `torch.SymInt` (or `SymFloat`) over the `ShapeEnv`'s size symbols;
/// Python-level uses that need its value (`if`, `range`, indexing a list) specialize it, which
/// records a shape guard in the `ShapeEnv`.
pub struct SymNodeVariable {
    pub node: NodeId,
    pub fake: Py<PyAny>,
    /// Where a symbolic int/float graph input came from (its placeholder); `None` for computed
    /// values.
    pub source: Option<Arc<Source>>,
}

/// Records that the trace reads the value of the symbolic number `sym` (Note [float inputs] in
/// `output_graph.rs`: a value computed from a float input makes the frame compile again with its
/// floats specialized).
/// Returns the value (the node's hint, computed in Python's arithmetic) for such a value, which
/// the caller then uses instead of asking the `ShapeEnv`; `None` otherwise.
pub fn note_value_use<'py>(sym: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let v = sym.py().import("dynamo._shapes")?.call_method1("note_value_use", (sym,))?;
    Ok((!v.is_none()).then_some(v))
}

/// Whether `sym` is float-derived (`dynamo._shapes.float_derived`: computed from a float input
/// or a float constant), so a read of its value takes `note_value_use`'s path; records nothing.
pub fn float_derived(sym: &Bound<'_, PyAny>) -> PyResult<bool> {
    sym.py().import("dynamo._shapes")?.call_method1("float_derived", (sym,))?.is_truthy()
}

/// The plain Python value of a `torch.SymInt` / `SymFloat` / `SymBool` (its `__int__`,
/// `__float__` or `__bool__`, which guard on the value through the `ShapeEnv`).
pub fn specialize_sym<'py>(sym: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = sym.py();
    if is_sym(sym) {
        if let Some(v) = note_value_use(sym)? {
            return Ok(v);
        }
    }
    if let Ok(s) = sym.cast::<pyo3::types::PySlice>() {
        // A slice with symbolic bounds: each bound specialized.
        let bound = |name: &str| -> PyResult<Bound<'py, PyAny>> {
            let b = s.getattr(name)?;
            if is_sym(&b) { specialize_sym(&b) } else { Ok(b) }
        };
        return py.import("builtins")?.getattr("slice")?.call1((bound("start")?, bound("stop")?, bound("step")?));
    }
    let name = type_name(sym);
    let builtins = py.import("builtins")?;
    let conv = match name.as_str() {
        "SymFloat" => "float",
        "SymBool" => "bool",
        _ => "int",
    };
    builtins.getattr(conv)?.call1((sym,))
}

/// A plain Python number of the same type as the value the symbolic number `sym` stands for in
/// eager (`0` for a `SymInt`, `0.0` for a `SymFloat`, `False` for a `SymBool`), for questions
/// whose answer depends on the type alone (Note [type-only uses of symbolic numbers]).
pub fn type_stand_in<'py>(sym: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = sym.py();
    Ok(match type_name(sym).as_str() {
        "SymFloat" => pyo3::types::PyFloat::new(py, 0.0).into_any(),
        "SymBool" => pyo3::types::PyBool::new(py, false).to_owned().into_any(),
        _ => 0i64.into_pyobject(py)?.into_any(),
    })
}

// Note [type-only uses of symbolic numbers]: some uses of a number read its type, never its
// value: `isinstance(n, torch.Tensor)`, `type(n)`, `callable(n)`, `hasattr(n, "item")`,
// `getattr(n, "device", None)` of a name numbers lack, and
// `n == None` / `n != "mean"` (int's and float's `__eq__` return NotImplemented for a None or
// a str, so Python falls back to identity: False / True whatever the value). Specializing a
// symbolic size there (`int(n)`, a guard `n == 6`) made every new size recompile: transformers'
// causal-mask code runs `q_offset.to(device) if isinstance(q_offset, torch.Tensor) else
// q_offset` on the KV-cache length, so `generate()` recompiled at every decoded token. These
// uses are answered on a plain number of the same type (`type_stand_in`), which gives the same
// result as the eager value, and the number stays symbolic.

/// Whether `v` is a `torch.SymInt`, `SymFloat` or `SymBool`.
pub fn is_sym(v: &Bound<'_, PyAny>) -> bool {
    let ty = v.get_type();
    matches!(ty.name().map(|n| n.to_string()).as_deref(), Ok("SymInt" | "SymFloat" | "SymBool"))
        && ty.module().map(|m| m.to_string() == "torch").unwrap_or(false)
}

impl<'a> InstructionTranslator<'a> {
    /// `operator.<name>` over symbolic numbers and Python numbers (Note [symbolic sizes]):
    /// arithmetic becomes a graph node over `SymInt`s; a comparison is decided at once on the
    /// example values (`bool(sym)`, a guard in the `ShapeEnv`), so no `SymBool` reaches the
    /// graph; anything else specializes the symbolic operands to their values.
    pub(crate) fn sym_operator(&mut self, py: Python<'_>, name: &str, args: Vec<VT>) -> VResult<VT> {
        // A bool operand is the int it is (`n < False` is `n < 0`, `n + True` is `n + 1`:
        // bool's numeric slots are int's, Objects/boolobject.c); sympy refuses Python bools in
        // relations (audit 51, O11: a list mixing ints and bools sorted with a symbolic int).
        let args: Vec<VT> = args
            .into_iter()
            .map(|a| match &a {
                VT::Constant(c) if c.bind(py).is_exact_instance_of::<pyo3::types::PyBool>() => {
                    VT::constant(i64::from(c.bind(py).is_truthy().unwrap_or(false)).into_pyobject(py).expect("int").into_any().unbind())
                }
                _ => a,
            })
            .collect();
        let numeric = args.iter().all(|a| match a {
            VT::SymNum(_) => true,
            VT::Constant(c) => {
                let c = c.bind(py);
                c.is_instance_of::<pyo3::types::PyInt>() || c.is_instance_of::<pyo3::types::PyFloat>()
            }
            _ => false,
        });
        let base = out_of_place(name);
        let arithmetic = matches!(base, "add" | "sub" | "mul" | "floordiv" | "mod" | "truediv" | "neg" | "pos" | "pow" | "abs");
        let comparison = matches!(base, "lt" | "le" | "eq" | "ne" | "gt" | "ge");
        if numeric && arithmetic {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            // Note [float constants with symbolic ints]: `n * 0.1`, `n - 2.0 ** 53` and
            // `(n / m) * m` are IEEE double arithmetic in Python, exact algebra in the ShapeEnv
            // (`(n * 0.1) * 10 == n` holds there, not in Python for n = 3). Such a value is
            // marked float-derived (`_shapes.sym_constant`'s `_rounds`): never folded, a read
            // of it (a comparison, a branch) takes the Python value and compiles the frame
            // again with static values (Note [float inputs]); passed to tensor ops it stays
            // symbolic.
            return self.og.call(py, Some(&f), None, &args, &[]);
        }
        // Bitwise operators on ints stay symbolic too (`SymInt` has `<<`, `>>`, `&`, `|`, `^`):
        // a shift only by a constant count that is not negative (a negative one raises
        // ValueError, which the specialized path leaves to the operator), and `~n` as `-n - 1`
        // (Objects/longobject.c, `long_invert`), since `SymInt` has no `__invert__`.
        let integral = args.iter().all(|a| match a {
            VT::SymNum(s) => type_name(s.fake.bind(py)) == "SymInt",
            VT::Constant(c) => c.bind(py).is_instance_of::<pyo3::types::PyInt>(),
            _ => false,
        });
        let shift_ok = match (base, args.get(1)) {
            ("lshift" | "rshift", Some(VT::Constant(c))) => c.bind(py).extract::<i64>().map(|k| k >= 0).unwrap_or(false),
            ("lshift" | "rshift", _) => false,
            _ => true,
        };
        if integral && shift_ok && matches!(base, "lshift" | "rshift" | "and_" | "or_" | "xor") {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            return self.og.call(py, Some(&f), None, &args, &[]);
        }
        if integral && base == "invert" && args.len() == 1 {
            let operator = self.og.handles.operator.bind(py).clone();
            let neg = self.og.call(py, Some(&operator.getattr("neg")?), None, &args, &[])?;
            let one = VT::constant(1i64.into_pyobject(py)?.into_any().unbind());
            return self.og.call(py, Some(&operator.getattr("sub")?), None, &[neg, one], &[]);
        }
        if numeric && comparison && args.len() == 2 {
            if let Some(decided) = self.int_float_comparison(py, base, &args)? {
                return Ok(decided);
            }
            // Note [ints against symbolic floats]: Python compares an int with a float exactly
            // (Objects/floatobject.c, `float_richcompare`), the ShapeEnv in floating point:
            // `2**53 + 1 == f` held there for f = 2.0**53, and so did its guard on later calls.
            // A symbolic float meeting a symbolic int, or an int constant that a double cannot
            // hold exactly, is compared on the values, each specialized (guarded to it).
            let kind = |a: &VT| match a {
                VT::SymNum(s) => Some(type_name(s.fake.bind(py))),
                _ => None,
            };
            let inexact_int = |a: &VT| match a {
                VT::Constant(c) if c.bind(py).is_instance_of::<pyo3::types::PyInt>() => {
                    c.bind(py).extract::<i64>().map(|n| n.unsigned_abs() > 1 << 53).unwrap_or(true)
                }
                _ => false,
            };
            // A comparison with a NaN constant is decided whatever the other value: only `!=`
            // holds (the ShapeEnv failed to evaluate it, and logged that to the user's stderr).
            if args.iter().any(|a| matches!(a, VT::Constant(c) if c.bind(py).extract::<f64>().is_ok_and(|f| f.is_nan()) && c.bind(py).is_instance_of::<pyo3::types::PyFloat>())) {
                return Ok(VT::constant(pyo3::types::PyBool::new(py, base == "ne").to_owned().into_any().unbind()));
            }
            let sym_float = args.iter().any(|a| kind(a).as_deref() == Some("SymFloat"));
            let int_side = args.iter().any(|a| kind(a).as_deref() == Some("SymInt") || inexact_int(a));
            if sym_float && int_side {
                let mut vals = Vec::with_capacity(2);
                for a in &args {
                    let Some(v) = a.as_constant(py) else { crate::graph_break!(DataDependentValue, "symbolic number without a value") };
                    vals.push(v);
                }
                let f = self.og.handles.operator.bind(py).getattr(base)?;
                return Ok(VT::constant(f.call1(PyTuple::new(py, vals)?)?.unbind()));
            }
        }
        if numeric && comparison {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            let mut vals = Vec::with_capacity(args.len());
            for a in &args {
                vals.push(match a {
                    // sympy would decide a comparison of float-derived values on its
                    // re-associated algebra (Note [float inputs]): their values are compared.
                    VT::SymNum(s) => match note_value_use(s.fake.bind(py))? {
                        Some(v) => v,
                        None => s.fake.bind(py).clone(),
                    },
                    other => other.as_constant(py).expect("numeric operand"),
                });
            }
            let r = f.call1(PyTuple::new(py, vals)?)?;
            // A relation left symbolic holds float inputs themselves and numbers only, which the
            // ShapeEnv decides and guards exactly (`lr > 0.3`): its `bool()` is the decision.
            let r = if crate::symbolic::variables::is_sym(&r) { pyo3::types::PyBool::new(py, r.is_truthy()?).to_owned().into_any() } else { r };
            return Ok(VT::constant(r.unbind()));
        }
        // `n == None`, `n != "mean"`: decided by the types alone (Note [type-only uses of
        // symbolic numbers]).
        let non_numeric_other = |a: &VT| match a {
            VT::Constant(c) => {
                let c = c.bind(py);
                c.is_none() || c.is_instance_of::<pyo3::types::PyString>() || c.is_instance_of::<pyo3::types::PyBytes>()
            }
            _ => false,
        };
        if matches!(base, "eq" | "ne") && args.len() == 2 && args.iter().any(|a| matches!(a, VT::SymNum(_))) && args.iter().all(|a| matches!(a, VT::SymNum(_)) || non_numeric_other(a)) {
            let f = self.og.handles.operator.bind(py).getattr(base)?;
            let vals = args.iter().map(|a| match a {
                VT::SymNum(s) => type_stand_in(s.fake.bind(py)),
                other => Ok(other.as_constant(py).expect("a constant operand")),
            }).collect::<PyResult<Vec<_>>>()?;
            return Ok(VT::constant(f.call1(PyTuple::new(py, vals)?)?.unbind()));
        }
        let specialized = args.into_iter().map(|a| match &a {
            VT::SymNum(_) => a.as_constant(py).map(|c| VT::constant(c.unbind())).ok_or_else(|| Unsupported::of(crate::symbolic::graph_break::GraphBreakKind::DataDependentValue, "symbolic number without a value")),
            _ => Ok(a),
        }).collect::<VResult<Vec<_>>>()?;
        self.operator(py, name, specialized)
    }

    /// Note [float constants with symbolic ints]: `n < c` of a symbolic int and a Python float
    /// is exact in Python (`float_richcompare` compares an int with a float without rounding
    /// the int: `2 ** 53 + 1 > 2.0 ** 53`), while the ShapeEnv would compare in floats. The
    /// same relation over ints: `c` finite and integral compares as `int(c)`; otherwise `n < c`
    /// is `n <= floor(c)`, `n > c` is `n > floor(c)`, `n == c` is False; a NaN or an infinity
    /// decides it without a guard. `None` when the operands are not a (non-float-derived)
    /// symbolic int and a float constant.
    fn int_float_comparison(&mut self, py: Python<'_>, base: &str, args: &[VT]) -> VResult<Option<VT>> {
        let is_float_const = |a: &VT| matches!(a, VT::Constant(c) if c.bind(py).is_instance_of::<pyo3::types::PyFloat>());
        let is_sym_int = |a: &VT| matches!(a, VT::SymNum(s) if type_name(s.fake.bind(py)) == "SymInt");
        // Written as `n op c`: flip `c op n`.
        let (sym, c, op) = match (&args[0], &args[1]) {
            (a, b) if is_sym_int(a) && is_float_const(b) => (a, b, base),
            (a, b) if is_float_const(a) && is_sym_int(b) => (
                b,
                a,
                match base {
                    "lt" => "gt",
                    "le" => "ge",
                    "gt" => "lt",
                    "ge" => "le",
                    other => other,
                },
            ),
            _ => return Ok(None),
        };
        let VT::SymNum(s) = sym else { return Ok(None) };
        if crate::symbolic::variables::tensor::float_derived(s.fake.bind(py))? {
            return Ok(None);
        }
        let c: f64 = c.as_constant(py).expect("a float constant").extract()?;
        let constant = |v: bool| Ok(Some(VT::constant(pyo3::types::PyBool::new(py, v).to_owned().into_any().unbind())));
        if c.is_nan() {
            return constant(op == "ne");
        }
        if c.is_infinite() {
            let below = c > 0.0; // n < +inf
            return constant(match op {
                "lt" | "le" => below,
                "gt" | "ge" => !below,
                "eq" => false,
                _ => true,
            });
        }
        let floor = c.floor();
        let int_of = |f: f64| -> PyResult<VT> {
            // Exact: a finite double's integral value as a Python int.
            let i = py.import("builtins")?.getattr("int")?.call1((f,))?;
            Ok(VT::constant(i.unbind()))
        };
        let (op, bound) = if floor == c {
            (op, int_of(c)?)
        } else {
            match op {
                "eq" => return constant(false),
                "ne" => return constant(true),
                "lt" | "le" => ("le", int_of(floor)?),
                _ => ("gt", int_of(floor)?),
            }
        };
        let f = self.og.handles.operator.bind(py).getattr(op)?;
        let r = f.call1((s.fake.bind(py), bound.as_constant(py).expect("an int")))?;
        let r = if crate::symbolic::variables::is_sym(&r) { pyo3::types::PyBool::new(py, r.is_truthy()?).to_owned().into_any() } else { r };
        Ok(Some(VT::constant(r.unbind())))
    }

    /// A builtin or `math` function over symbolic numbers whose result stays a graph value
    /// instead of specializing its operands (Note [symbolic sizes]), so that `max(n, 4)`,
    /// `float(n)`, `math.sqrt(n)` or `divmod(n, 3)` compile once for every value of `n`, as in
    /// torch.compile. Every operand must be a symbolic number or a Python `int`/`float`; the
    /// graph calls torch's SymInt-aware forms (`torch.sym_max`, `torch.sym_float`,
    /// `torch._sym_sqrt`, ...), which compute the same values as the builtins on plain numbers.
    /// `None`: not one of these, the caller specializes.
    pub(crate) fn sym_builtin(&mut self, py: Python<'_>, b: &Bound<'_, PyAny>, args: &[VT]) -> VResult<Option<VT>> {
        #[derive(PartialEq, Clone, Copy)]
        enum Kind {
            Int,
            Float,
        }
        let kind_of = |a: &VT| -> Option<Kind> {
            match a {
                VT::SymNum(s) => match type_name(s.fake.bind(py)).as_str() {
                    "SymInt" => Some(Kind::Int),
                    "SymFloat" => Some(Kind::Float),
                    _ => None,
                },
                VT::Constant(c) => {
                    let c = c.bind(py);
                    if c.is_instance_of::<pyo3::types::PyBool>() {
                        None
                    } else if c.is_instance_of::<pyo3::types::PyInt>() {
                        Some(Kind::Int)
                    } else if c.is_instance_of::<pyo3::types::PyFloat>() {
                        Some(Kind::Float)
                    } else {
                        None
                    }
                }
                _ => None,
            }
        };
        let Some(kinds) = args.iter().map(kind_of).collect::<Option<Vec<Kind>>>() else {
            return Ok(None);
        };
        if kinds.is_empty() {
            return Ok(None);
        }
        let builtins = self.og.handles.builtins.bind(py).clone();
        let is = |name: &str| builtins.getattr(name).map(|f| f.is(b)).unwrap_or(false);
        let torch = self.og.handles.torch.bind(py).clone();
        let one = args.len() == 1;
        if one && is("abs") {
            return self.sym_operator(py, "abs", args.to_vec()).map(Some);
        }
        if one && kinds[0] == Kind::Int && py.import("operator")?.getattr("index")?.is(b) {
            // `operator.index(n)` of an exact int is `n` (Objects/abstract.c, `PyNumber_Index`).
            return Ok(Some(args[0].clone()));
        }
        if one && (is("int") || is("round")) {
            // `int(n)` and `round(n)` of an int are `n`; of a float, `int` truncates toward zero
            // (torch.sym_int), and `round` is a node (Note [rounding symbolic floats]).
            return match kinds[0] {
                Kind::Int => Ok(Some(args[0].clone())),
                Kind::Float if is("int") => self.og.call(py, Some(&torch.getattr("sym_int")?), None, args, &[]).map(Some),
                Kind::Float => self.og.call(py, Some(b), None, args, &[]).map(Some),
            };
        }
        // Note [rounding symbolic floats]
        // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
        // `round(v)` and `round(v, n)` (n a constant int) of a symbolic float (a float input,
        // or a value computed from one: `round(lr * 10, 3)`) are `builtins.round` nodes, run on
        // the Python float when the graph runs (banker's rounding, CPython's correctly rounded
        // decimal rounding), as arithmetic on such values is (Note [float inputs] in
        // `output_graph.rs`). Folding them read the value, which specialized the frame on the
        // float: one compile per value (a logging callback's `round(loss.item(), 5)` across a
        // break). Only a later read of the rounded value (a branch on it) specializes.
        if args.len() == 2 && is("round") && kinds == [Kind::Float, Kind::Int] && matches!(args[1], VT::Constant(_)) {
            return self.og.call(py, Some(b), None, args, &[]).map(Some);
        }
        if one && is("float") {
            return match kinds[0] {
                Kind::Float => Ok(Some(args[0].clone())),
                Kind::Int => self.og.call(py, Some(&torch.getattr("sym_float")?), None, args, &[]).map(Some),
            };
        }
        if args.len() == 2 && is("pow") {
            return self.sym_operator(py, "pow", args.to_vec()).map(Some);
        }
        // `pow(n, e, m)` of a symbolic int with a literal exponent `e >= 0` and modulus `m != 0`
        // is `(n ** e) % m`, what `long_pow` (Objects/longobject.c) computes for those, with the
        // sign of `m` as `%` gives it (audit 54, X1: folding specialized `n`).
        if args.len() == 3 && is("pow") && kinds == [Kind::Int, Kind::Int, Kind::Int] {
            let lit = |v: &VT| if let VT::Constant(c) = v { c.bind(py).extract::<i64>().ok() } else { None };
            if let (Some(e), Some(m)) = (lit(&args[1]), lit(&args[2])) {
                if e >= 0 && m != 0 {
                    let p = self.sym_operator(py, "pow", args[..2].to_vec())?;
                    return self.sym_operator(py, "mod", vec![p, args[2].clone()]).map(Some);
                }
            }
        }
        // `bool(n)` is the truth of `n` (`n != 0`: a guard on that, not on its value), as
        // `not n` and `if n:` are (audit 54, X1: folding specialized `n`, a graph a size).
        if one && is("bool") {
            let t = self.truth(py, &args[0])?;
            return Ok(Some(crate::symbolic::variables::constant::const_bool(py, t)));
        }
        if args.len() == 2 && is("divmod") {
            let q = self.sym_operator(py, "floordiv", args.to_vec())?;
            let r = self.sym_operator(py, "mod", args.to_vec())?;
            return Ok(Some(VT::Tuple(Rc::new(vec![q, r]))));
        }
        if args.len() >= 2 && (is("max") || is("min")) {
            // `max(a, b)` returns one of its operands, so its type is that operand's: only
            // operands of one kind fold into `torch.sym_max`/`sym_min` (which may promote).
            if kinds.iter().any(|k| *k != kinds[0]) {
                return Ok(None);
            }
            let f = torch.getattr(if is("max") { "sym_max" } else { "sym_min" })?;
            let mut acc = args[0].clone();
            for a in &args[1..] {
                acc = self.og.call(py, Some(&f), None, &[acc, a.clone()], &[])?;
            }
            return Ok(Some(acc));
        }
        let module = b.getattr("__module__").ok().and_then(|m| m.extract::<String>().ok()).unwrap_or_default();
        if module == "math" && one {
            let name: String = b.getattr("__name__")?.extract()?;
            match name.as_str() {
                // `math.floor`/`ceil`/`trunc` of an int are the int; of a SymFloat, the function
                // itself is symbolic (`SymFloat.__floor__` gives a SymInt).
                "floor" | "ceil" | "trunc" => {
                    return match kinds[0] {
                        Kind::Int => Ok(Some(args[0].clone())),
                        Kind::Float => self.og.call(py, Some(b), None, args, &[]).map(Some),
                    };
                }
                "sqrt" | "cos" | "cosh" | "sin" | "sinh" | "tan" | "tanh" | "asin" | "acos" | "atan" | "log2" => {
                    // torch._sym_<name>: the math function of the value as a float; a domain
                    // error (math.sqrt(-1)) is raised by the example value, as eager would.
                    let f = torch.getattr(format!("_sym_{name}").as_str())?;
                    let x = match kinds[0] {
                        Kind::Float => args[0].clone(),
                        Kind::Int => self.og.call(py, Some(&torch.getattr("sym_float")?), None, args, &[])?,
                    };
                    return self.og.call(py, Some(&f), None, &[x], &[]).map(Some);
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// `torch.tensor(n)` / `torch.as_tensor(n)` of one symbolic number: a 0-dim tensor built by
    /// `torch.scalar_tensor(n, dtype=...)`, which keeps `n` symbolic (`torch.tensor` reads the
    /// number's value, which would specialize it). The dtype is `torch.tensor`'s inference for
    /// a Python scalar (int64 for an int, the default dtype for a float) unless `dtype=` is
    /// given; `device=` and `requires_grad=` pass through. `None`: not this case.
    pub(crate) fn sym_scalar_tensor(&mut self, py: Python<'_>, name: &str, args: &[VT], kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        if !matches!(name, "torch.tensor" | "torch.as_tensor") || args.len() != 1 {
            return Ok(None);
        }
        if let VT::List(_) | VT::Tuple(_) = &args[0] {
            return self.sym_list_tensor(py, &args[0], kwargs);
        }
        let VT::SymNum(s) = &args[0] else {
            return Ok(None);
        };
        if !kwargs.iter().all(|(k, _)| matches!(k.as_str(), "dtype" | "device" | "requires_grad")) || (name == "torch.as_tensor" && kwargs.iter().any(|(k, _)| k == "requires_grad")) {
            return Ok(None);
        }
        let torch = self.og.handles.torch.bind(py).clone();
        let mut kw = kwargs.to_vec();
        if !kw.iter().any(|(k, _)| k == "dtype") {
            let dtype = match type_name(s.fake.bind(py)).as_str() {
                "SymInt" => torch.getattr("int64")?,
                "SymFloat" => torch.call_method0("get_default_dtype")?,
                _ => return Ok(None),
            };
            kw.push(("dtype".to_string(), VT::constant(dtype.unbind())));
        }
        self.og.call(py, Some(&torch.getattr("scalar_tensor")?), None, args, &kw).map(Some)
    }
}

impl InstructionTranslator<'_> {
    /// `torch.tensor(items)` / `torch.as_tensor(items)` of a flat list or tuple of numbers, some
    /// symbolic (`torch.tensor([T] * B)`, CTC's input lengths): `torch.stack` of one
    /// `torch.scalar_tensor` per item, which keeps the sizes symbolic where `torch.tensor`
    /// would read (and specialize) each value. The dtype is `torch.tensor`'s inference (int64
    /// when every item is an int, the default dtype when one is a float) unless `dtype=` is
    /// given; `device=` passes through. `None`: not this case (no symbolic item, bools,
    /// nesting, an empty list, `requires_grad=`, which makes a leaf).
    fn sym_list_tensor(&mut self, py: Python<'_>, items: &VT, kwargs: &[(String, VT)]) -> VResult<Option<VT>> {
        let items = match items {
            VT::List(l) => l.borrow().items.clone(),
            VT::Tuple(t) => t.as_ref().clone(),
            _ => return Ok(None),
        };
        if items.is_empty() || !items.iter().any(|i| matches!(i, VT::SymNum(_))) || !kwargs.iter().all(|(k, _)| matches!(k.as_str(), "dtype" | "device")) {
            return Ok(None);
        }
        let mut any_float = false;
        for i in &items {
            let kind = match i {
                VT::SymNum(s) => type_name(s.fake.bind(py)),
                VT::Constant(c) => type_name(c.bind(py)),
                _ => return Ok(None),
            };
            match kind.as_str() {
                "SymInt" | "int" => {}
                "SymFloat" | "float" => any_float = true,
                _ => return Ok(None),
            }
        }
        let torch = self.og.handles.torch.bind(py).clone();
        let mut kw = kwargs.to_vec();
        if !kw.iter().any(|(k, _)| k == "dtype") {
            let dtype = if any_float { torch.call_method0("get_default_dtype")? } else { torch.getattr("int64")? };
            kw.push(("dtype".to_string(), VT::constant(dtype.unbind())));
        }
        let scalar_tensor = torch.getattr("scalar_tensor")?;
        let mut scalars = Vec::with_capacity(items.len());
        for i in &items {
            scalars.push(self.og.call(py, Some(&scalar_tensor), None, std::slice::from_ref(i), &kw)?);
        }
        let stacked = crate::symbolic::variables::lists::new_list(scalars);
        self.og.call(py, Some(&torch.getattr("stack")?), None, &[stacked], &[]).map(Some)
    }
}

/// Tensor attributes that are not static metadata: reading them is not traced.
pub(crate) const TENSOR_ATTR_DENYLIST: [&str; 5] = ["grad", "data", "_base", "grad_fn", "_version"];

/// A tuple tracker; all-constant tuples fold into one constant tuple.
/// A `torch.Size` of `items`: a constant when every item is one, else a `NamedTuple` tracker
/// of class `torch.Size` (symbolic sizes, Note [symbolic sizes]).
pub fn make_size(py: Python<'_>, size_type: &Bound<'_, PyAny>, items: Vec<VT>) -> VResult<VT> {
    if items.iter().all(|i| matches!(i, VT::Constant(_))) {
        let vals: Vec<_> = items.iter().map(|i| i.as_constant(py).unwrap()).collect();
        return Ok(VT::constant(size_type.call1((PyTuple::new(py, vals)?,))?.unbind()));
    }
    Ok(VT::NamedTuple { cls: Rc::new(size_type.clone().unbind()), items: Rc::new(items) })
}

/// Whether `v` is a `torch.Size` tracker with symbolic items.
pub(crate) fn is_symbolic_size(py: Python<'_>, og: &OutputGraph, v: &VT) -> bool {
    matches!(v, VT::NamedTuple { cls, .. } if cls.bind(py).is(og.handles.size_type.bind(py)))
}

// Note [tensor queries]
// A tensor attribute or method whose answer is not a tensor is folded into a constant while
// tracing. TENSOR_MATCH pins the type, dtype, device index, requires_grad, sizes and strides, so
// answers computed from those (`dim()`, `numel()`, `is_contiguous()`, `is_floating_point()`,
// `element_size()`) need nothing more. The queries in `TENSOR_QUERIES` read something else: the
// autograd state (`is_leaf`, `retains_grad`, the hook tables), the storage (`storage_offset()`,
// `is_shared()`, `is_pinned()`), the view/conj/neg bits, inference mode. For a graph input the
// answer is read from the real tensor (its fake has none of this: a fake is a fresh leaf over a
// fresh storage) and guarded with TENSOR_QUERY on the input's source, so the guard costs only in
// frames that ask. A tensor computed in the graph gets the fake's answer, which follows from the
// graph and the inputs' answers; for the storage queries those depend on the inputs' storages
// (a view of an input starts where the input starts), so the same query is guarded on every
// tensor input then. An answer that is not a literal (a hook table holding hooks) is a graph
// break. torch guards the conj/neg bits through TENSOR_MATCH's dispatch keys and treats the rest
// as graph breaks or symbolic values; one guard per asked query is the same contract.

/// Tensor queries TENSOR_MATCH does not pin (Note [tensor queries]).
pub(crate) const TENSOR_QUERIES: [&str; 15] = [
    "storage_offset", "is_leaf", "_is_view", "is_conj", "is_neg", "is_shared", "retains_grad", "_backward_hooks",
    "_post_accumulate_grad_hooks", "is_inference", "is_pinned", "output_nr", "_is_zerotensor", "names", "has_names",
];

/// The queries whose answer for a tensor computed in the graph follows its inputs' storages.
const STORAGE_QUERIES: [&str; 7] = ["storage_offset", "is_conj", "is_neg", "is_shared", "is_pinned", "is_inference", "_is_zerotensor"];

impl<'a> InstructionTranslator<'a> {
    /// `t.name` (`t.name()` with `call`) for a query of `TENSOR_QUERIES` (Note [tensor
    /// queries]): the real input's answer, guarded, for a graph input; `None` (answer from the
    /// fake) for a tensor computed in the graph, after guarding the query on every tensor input
    /// when it is a storage query. `None` for any other name.
    pub(crate) fn tensor_query(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, name: &str, call: bool) -> VResult<Option<VT>> {
        if !TENSOR_QUERIES.contains(&name) {
            return Ok(None);
        }
        let guarded = |og: &mut OutputGraph, source: &Arc<Source>, real: &Bound<'_, PyAny>| -> VResult<Py<PyAny>> {
            let a = real.getattr(name)?;
            let v = if call { a.call0()? } else { a };
            if !(v.is_none() || crate::symbolic::builder::is_literal(py, &v)) {
                crate::graph_break!(UntracedTensorAttribute, "Tensor.{name} of {source} is a {} (only literal answers are guarded)", type_name(&v));
            }
            og.add_guard(
                Some(source.clone()),
                crate::guards::GuardKind::TensorQuery { name: pyo3::types::PyString::intern(py, name).unbind(), call, expected: v.clone().unbind() },
            );
            Ok(v.unbind())
        };
        if let Some(source) = &t.source {
            if self.og.tensor_subclasses.contains_key(&t.node) {
                // The guard would ask the subclass object itself, running its
                // `__torch_function__` on every check (Note [tensor subclasses]).
                crate::graph_break!(TensorSubclass, "Tensor.{name} of a subclass tensor input");
            }
            let real = self.og.inputs.iter().find(|(s, _)| s == source).map(|(_, r)| r.clone_ref(py));
            if let Some(real) = real {
                let v = guarded(&mut self.og, source, real.bind(py))?;
                return Ok(Some(VT::constant(v)));
            }
        }
        if STORAGE_QUERIES.contains(&name) {
            let inputs: Vec<(Arc<Source>, Py<PyAny>)> = self.og.inputs.iter().map(|(s, r)| (s.clone(), r.clone_ref(py))).collect();
            for (s, r) in inputs {
                if self.og.is_tensor(py, r.bind(py)) {
                    let ty = r.bind(py).get_type();
                    if !ty.is(self.og.handles.tensor_type.bind(py)) && !ty.is(self.og.handles.parameter_type.bind(py)) {
                        crate::graph_break!(TensorSubclass, "Tensor.{name} guarded on a subclass tensor input");
                    }
                    guarded(&mut self.og, &s, r.bind(py))?;
                }
            }
        }
        Ok(None)
    }
}

// Note [gradients of inputs]: `p.grad` of a leaf tensor input (a parameter whose gradient a
// training step logs, clips or rescales: `torch.stack([p.grad.norm() for p in
// m.parameters()])`) is another input of the graph, read through the source `<p>.grad` and
// guarded as any input is (TENSOR_MATCH, or a None check), so an optimizer's
// `zero_grad(set_to_none=True)` followed by a backward that makes new gradient tensors only
// feeds the graph new inputs. `is_leaf` is guarded too: a non-leaf's `.grad` warns at every read
// (the guard would read it) and is a graph break, as is the gradient of a tensor made in the
// graph (eager answers None with a warning) and writes to `.grad` other than `p.grad = None`
// on such an input (`store_input_grad`: a write replayed after the graph, seen by later reads).

impl<'a> InstructionTranslator<'a> {
    /// `t.grad` for a leaf tensor input `t` (Note [gradients of inputs]): the gradient wrapped
    /// as an input from `<source>.grad`; `None` (the caller breaks) otherwise.
    pub(crate) fn input_grad(&mut self, py: Python<'_>, t: &Rc<TensorVariable>) -> VResult<Option<VT>> {
        let Some((source, real)) = self.leaf_input(py, t)? else { return Ok(None) };
        if let Some(pending) = self.og.side_effects.attr(&real, "grad") {
            return Ok(Some(pending));
        }
        let grad = real.bind(py).getattr("grad")?;
        crate::symbolic::builder::wrap(py, self.og, &grad, source.attr("grad")).map(Some)
    }

    /// `t.grad = None` for a leaf tensor input `t` (a hand-written optimizer clearing its
    /// gradients; audit 54, W2): recorded as an attribute write on the real tensor, replayed
    /// after the graph; later reads of `t.grad` in the trace give None (`input_grad`). `false`
    /// (the caller breaks) for any other tensor or value: a tensor stored as a gradient is
    /// checked by the `grad` setter (shape, dtype, device), which the trace does not model.
    pub(crate) fn store_input_grad(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, v: &VT) -> VResult<bool> {
        if !v.as_constant(py).is_some_and(|c| matches!(v, VT::Constant(_)) && c.is_none()) {
            return Ok(false);
        }
        let Some((source, real)) = self.leaf_input(py, t)? else { return Ok(false) };
        self.og.side_effects.store_attr(py, &real, source, "grad", v.clone());
        Ok(true)
    }

    /// The source and real object of `t` when it is a leaf input of plain type (`Tensor` or
    /// `Parameter`, no subclass), its `is_leaf` guarded; `None` otherwise.
    fn leaf_input(&mut self, py: Python<'_>, t: &Rc<TensorVariable>) -> VResult<Option<(Arc<Source>, Py<PyAny>)>> {
        let Some(source) = t.source.clone() else { return Ok(None) };
        if self.og.tensor_subclasses.contains_key(&t.node) {
            return Ok(None);
        }
        let Some(real) = self.og.inputs.iter().find(|(s, _)| *s == source).map(|(_, r)| r.clone_ref(py)) else { return Ok(None) };
        let ty = real.bind(py).get_type();
        if !ty.is(self.og.handles.tensor_type.bind(py)) && !ty.is(self.og.handles.parameter_type.bind(py)) {
            return Ok(None);
        }
        match self.tensor_query(py, t, "is_leaf", false)? {
            Some(leaf) if leaf.as_constant(py).is_some_and(|c| c.is_truthy().unwrap_or(false)) => Ok(Some((source, real))),
            _ => Ok(None),
        }
    }
}

// Note [tensor instance attributes]
// While tracing, a tensor is a fake tensor, whose class (`FakeTensor`) and instance dict hold the
// fake mode's own state (`fake_mode`, `constant`, memo tables, `from_tensor`). None of that is
// the user's tensor: an attribute that `torch.Tensor` does not define is an instance attribute,
// looked up as CPython does on the object eager sees. A graph input's is read from the real
// input's `__dict__` through its source (guarded as any attribute value is; NO_ATTR when it is
// absent); a tensor the graph made has none (writes to it are breaks), so the lookup raises
// eager's AttributeError, which `getattr(t, name, default)`, `hasattr` and `except
// AttributeError` handle inside the trace. The instance dict itself (`t.__dict__`, `vars(t)`) and
// `__weakref__` are not modelled.

impl<'a> InstructionTranslator<'a> {
    /// `t.name` for a plain tensor `t` when `torch.Tensor` does not define `name` (Note [tensor
    /// instance attributes]): the real input's instance attribute, or the AttributeError eager
    /// raises. `None` when the class defines `name` (the ordinary lookup follows).
    ///
    /// Errors: a graph break for `__dict__`/`__weakref__`, for a subclass with its own
    /// `__getattr__`, and for an input whose real object is not at hand.
    pub(crate) fn tensor_instance_attr(&mut self, py: Python<'_>, t: &Rc<TensorVariable>, name: &str) -> VResult<Option<VT>> {
        if name == "__dict__" || name == "__weakref__" {
            crate::graph_break!(UntracedTensorAttribute, "Tensor.{name} is not traced");
        }
        let tensor_type = self.og.handles.tensor_type.clone_ref(py);
        if tensor_type.bind(py).hasattr(name)? {
            return Ok(None);
        }
        if let Some(cls) = self.tensor_subclass_of(py, t) {
            if cls.hasattr("__getattr__")? {
                crate::graph_break!(TensorSubclass, "Tensor.{name} of a subclass with its own __getattr__");
            }
        }
        let Some(source) = t.source.clone() else {
            return Err(Unsupported::attribute_error(py, name, format!("'Tensor' object has no attribute '{name}'")));
        };
        let Some(real) = self.og.inputs.iter().find(|(s, _)| *s == source).map(|(_, r)| r.clone_ref(py)) else {
            crate::graph_break!(UntracedTensorAttribute, "Tensor.{name} of {source}, whose object is not at hand");
        };
        let real = real.bind(py);
        if real.get_type().hasattr(name)? {
            // Defined by the input's class (a Parameter subclass): the ordinary lookup.
            return Ok(None);
        }
        let d = py.import("builtins")?.getattr("object")?.call_method1("__getattribute__", (real, "__dict__"))?;
        match d.get_item(name) {
            Ok(v) => crate::symbolic::builder::wrap(py, self.og, &v, source.attr(name)).map(Some),
            Err(_) => {
                self.og.add_guard(Some(source.clone()), crate::guards::GuardKind::NoAttr(name.to_string()));
                Err(Unsupported::attribute_error(py, name, crate::symbolic::variables::no_attribute_message(real.get_type().as_any(), name)))
            }
        }
    }
}
