//! Shape guards as relations over input sizes (Note [symbolic sizes] in
//! `src/symbolic/output_graph.rs`): `L['x'].size()[0] >= 2`,
//! `L['x'].size()[0] == L['y'].size()[1]`, `(L['x'].size()[1] % 8) == 0`, evaluated in Rust on
//! every cache hit of a frame compiled with dynamic dimensions.
//!
//! The expressions come from torch's `ShapeEnv` (sympy), exported by `dynamo._shapes.
//! export_guards` as nested tuples. Integer semantics are Python's (and sympy's `FloorDiv` /
//! `Mod` as torch defines them): floor division and a remainder with the divisor's sign; a
//! division by zero or an overflow makes the relation fail (the frame is compiled again).

use crate::source::Source;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::fmt;
use std::sync::Arc;

/// An integer expression or a relation over size symbols (booleans are 0/1).
#[derive(Debug, Clone, PartialEq)]
pub enum SymExpr {
    Int(i64),
    /// A float constant (a relation over a float input, `lr > 0.3`): such a relation is
    /// evaluated in f64, as Python compares floats.
    Float(f64),
    /// The i-th bound size (`ShapeGuard::sources[i]`).
    Sym(usize),
    Add(Vec<SymExpr>),
    Mul(Vec<SymExpr>),
    Pow(Box<SymExpr>, u32),
    FloorDiv(Box<SymExpr>, Box<SymExpr>),
    Mod(Box<SymExpr>, Box<SymExpr>),
    Max(Vec<SymExpr>),
    Min(Vec<SymExpr>),
    Cmp(CmpOp, Box<SymExpr>, Box<SymExpr>),
    And(Vec<SymExpr>),
    Or(Vec<SymExpr>),
    Not(Box<SymExpr>),
    /// `abs(x)` (sympy `Abs`), on ints or floats.
    Abs(Box<SymExpr>),
    /// `float(x)` (torch's `ToFloat`): the relation is one over floats.
    ToFloat(Box<SymExpr>),
    /// `a / b`, true division (torch's `FloatTrueDiv`/`IntTrueDiv`, sympy rationals): float.
    TrueDiv(Box<SymExpr>, Box<SymExpr>),
    /// `a ** b` over floats (torch's `FloatPow`).
    PowF(Box<SymExpr>, Box<SymExpr>),
    /// `math.floor`/`ceil`/`trunc` of a float (torch's `FloorToInt`/`CeilToInt`/`TruncToInt`);
    /// of an int, the int itself.
    ToInt(Rounding, Box<SymExpr>),
    /// A `math` function of a float (torch's `OpaqueUnaryFn_<name>`), evaluated with Rust's f64
    /// functions (the same libm results CPython's `math` module gives on this platform).
    Float1(FloatFn, Box<SymExpr>),
}

/// How `SymExpr::ToInt` rounds a float to an int.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    Floor,
    Ceil,
    Trunc,
    /// `round(x)` of a float: to the nearest int, halves to even (torch's `RoundToInt`,
    /// Python's `float.__round__`).
    HalfEven,
}

impl Rounding {
    /// `x` rounded this way (Python's `math.floor` / `math.ceil` / `math.trunc`, `round` with
    /// halves to even), still an f64.
    fn apply(self, x: f64) -> f64 {
        match self {
            Rounding::Floor => x.floor(),
            Rounding::Ceil => x.ceil(),
            Rounding::Trunc => x.trunc(),
            Rounding::HalfEven => x.round_ties_even(),
        }
    }
}

/// The float functions `SymExpr::Float1` applies (those of `math` that torch's symbolic floats
/// model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatFn {
    Sqrt,
    Exp,
    Log,
    Log2,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Tanh,
    Asin,
    Acos,
    Atan,
    Asinh,
}

impl FloatFn {
    const ALL: [(&'static str, FloatFn); 14] = [
        ("sqrt", FloatFn::Sqrt),
        ("exp", FloatFn::Exp),
        ("log", FloatFn::Log),
        ("log2", FloatFn::Log2),
        ("sin", FloatFn::Sin),
        ("cos", FloatFn::Cos),
        ("tan", FloatFn::Tan),
        ("sinh", FloatFn::Sinh),
        ("cosh", FloatFn::Cosh),
        ("tanh", FloatFn::Tanh),
        ("asin", FloatFn::Asin),
        ("acos", FloatFn::Acos),
        ("atan", FloatFn::Atan),
        ("asinh", FloatFn::Asinh),
    ];

    fn from_name(name: &str) -> Option<FloatFn> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, f)| *f == self).map(|(n, _)| *n).unwrap_or("?")
    }

    /// The function's value; `None` outside its domain (`math` raises ValueError there, so no
    /// compiled frame can have relied on such a value).
    fn apply(self, x: f64) -> Option<f64> {
        let domain_ok = match self {
            FloatFn::Sqrt => x >= 0.0,
            FloatFn::Log | FloatFn::Log2 => x > 0.0,
            FloatFn::Asin | FloatFn::Acos => (-1.0..=1.0).contains(&x),
            _ => true,
        };
        if !domain_ok {
            return None;
        }
        Some(match self {
            FloatFn::Sqrt => x.sqrt(),
            FloatFn::Exp => x.exp(),
            FloatFn::Log => x.ln(),
            FloatFn::Log2 => x.log2(),
            FloatFn::Sin => x.sin(),
            FloatFn::Cos => x.cos(),
            FloatFn::Tan => x.tan(),
            FloatFn::Sinh => x.sinh(),
            FloatFn::Cosh => x.cosh(),
            FloatFn::Tanh => x.tanh(),
            FloatFn::Asin => x.asin(),
            FloatFn::Acos => x.acos(),
            FloatFn::Atan => x.atan(),
            FloatFn::Asinh => x.asinh(),
        })
    }
}

/// A comparison of two integer expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

impl SymExpr {
    /// Parses `dynamo._shapes`' nested-tuple form: `("int", n)`, `("sym", i)`, `(op, *args)`.
    /// Errors (ValueError) on an unknown operator or arity.
    pub fn from_py(t: &Bound<'_, PyAny>) -> PyResult<SymExpr> {
        let t = t.cast::<PyTuple>()?;
        let op: String = t.get_item(0)?.extract()?;
        let args = || -> PyResult<Vec<SymExpr>> { t.iter().skip(1).map(|a| SymExpr::from_py(&a)).collect() };
        let two = || -> PyResult<(Box<SymExpr>, Box<SymExpr>)> {
            let a = args()?;
            if a.len() != 2 {
                return Err(pyo3::exceptions::PyValueError::new_err(format!("{op} takes 2 operands, got {}", a.len())));
            }
            let mut it = a.into_iter();
            Ok((Box::new(it.next().unwrap()), Box::new(it.next().unwrap())))
        };
        let cmp = |c: CmpOp| -> PyResult<SymExpr> {
            let (a, b) = two()?;
            Ok(SymExpr::Cmp(c, a, b))
        };
        Ok(match op.as_str() {
            "int" => SymExpr::Int(t.get_item(1)?.extract()?),
            "float" => SymExpr::Float(t.get_item(1)?.extract()?),
            "sym" => SymExpr::Sym(t.get_item(1)?.extract()?),
            "add" => SymExpr::Add(args()?),
            "mul" => SymExpr::Mul(args()?),
            "pow" => {
                let (a, b) = two()?;
                match *b {
                    SymExpr::Int(n) if (0..=64).contains(&n) => SymExpr::Pow(a, n as u32),
                    _ => return Err(pyo3::exceptions::PyValueError::new_err("pow with a non-constant exponent")),
                }
            }
            "floordiv" => {
                let (a, b) = two()?;
                SymExpr::FloorDiv(a, b)
            }
            "mod" => {
                let (a, b) = two()?;
                SymExpr::Mod(a, b)
            }
            "max" => SymExpr::Max(args()?),
            "min" => SymExpr::Min(args()?),
            "and" => SymExpr::And(args()?),
            "or" => SymExpr::Or(args()?),
            "not" => SymExpr::Not(Box::new(args()?.into_iter().next().ok_or_else(|| pyo3::exceptions::PyValueError::new_err("not without operand"))?)),
            "eq" => cmp(CmpOp::Eq)?,
            "ne" => cmp(CmpOp::Ne)?,
            "lt" => cmp(CmpOp::Lt)?,
            "le" => cmp(CmpOp::Le)?,
            "gt" => cmp(CmpOp::Gt)?,
            "ge" => cmp(CmpOp::Ge)?,
            "abs" | "tofloat" | "floor" | "ceil" | "trunc" | "round" => {
                let x = Box::new(args()?.into_iter().next().ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("{op} without operand")))?);
                match op.as_str() {
                    "abs" => SymExpr::Abs(x),
                    "tofloat" => SymExpr::ToFloat(x),
                    "floor" => SymExpr::ToInt(Rounding::Floor, x),
                    "ceil" => SymExpr::ToInt(Rounding::Ceil, x),
                    "round" => SymExpr::ToInt(Rounding::HalfEven, x),
                    _ => SymExpr::ToInt(Rounding::Trunc, x),
                }
            }
            "truediv" => {
                let (a, b) = two()?;
                SymExpr::TrueDiv(a, b)
            }
            "powf" => {
                let (a, b) = two()?;
                SymExpr::PowF(a, b)
            }
            name if FloatFn::from_name(name).is_some() => {
                let x = args()?.into_iter().next().ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("{op} without operand")))?;
                SymExpr::Float1(FloatFn::from_name(name).unwrap(), Box::new(x))
            }
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown shape operator {other}"))),
        })
    }

    /// The value with `vals[i]` for symbol i; `None` on overflow or division by zero.
    pub fn eval(&self, vals: &[i64]) -> Option<i64> {
        self.eval_in(vals, None)
    }

    /// [`SymExpr::eval`], where a rounding of a float expression (`math.ceil(float(s1) / 2.0)`,
    /// torch's `CeilToInt`) is evaluated in f64 over `floats = (fvals, is_float)`: its result
    /// is an int, so the relation around it (a modulo, a floor division) stays integer
    /// arithmetic. Without `floats` such a rounding is `None`.
    pub fn eval_in(&self, vals: &[i64], floats: Option<(&[f64], &[bool])>) -> Option<i64> {
        let fold = |xs: &[SymExpr], init: i64, f: fn(i64, i64) -> Option<i64>| -> Option<i64> {
            xs.iter().try_fold(init, |acc, x| f(acc, x.eval_in(vals, floats)?))
        };
        Some(match self {
            SymExpr::Int(n) => *n,
            SymExpr::Float(_) => return None,
            SymExpr::Sym(i) => *vals.get(*i)?,
            SymExpr::Add(xs) => fold(xs, 0, i64::checked_add)?,
            SymExpr::Mul(xs) => fold(xs, 1, i64::checked_mul)?,
            SymExpr::Pow(b, n) => b.eval_in(vals, floats)?.checked_pow(*n)?,
            SymExpr::FloorDiv(a, b) => {
                let (a, b) = (a.eval_in(vals, floats)?, b.eval_in(vals, floats)?);
                if b == 0 {
                    return None;
                }
                a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 }
            }
            SymExpr::Mod(a, b) => {
                let (a, b) = (a.eval_in(vals, floats)?, b.eval_in(vals, floats)?);
                if b == 0 {
                    return None;
                }
                // Python's `%`: the remainder takes the divisor's sign.
                let r = a.rem_euclid(b);
                if b < 0 && r != 0 {
                    r + b
                } else {
                    r
                }
            }
            SymExpr::Max(xs) => xs.iter().map(|x| x.eval_in(vals, floats)).collect::<Option<Vec<_>>>()?.into_iter().max()?,
            SymExpr::Min(xs) => xs.iter().map(|x| x.eval_in(vals, floats)).collect::<Option<Vec<_>>>()?.into_iter().min()?,
            SymExpr::Cmp(op, a, b) => {
                let (a, b) = (a.eval_in(vals, floats)?, b.eval_in(vals, floats)?);
                let r = match op {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                };
                r as i64
            }
            SymExpr::And(xs) => xs.iter().map(|x| x.eval_in(vals, floats).map(|v| v != 0)).collect::<Option<Vec<_>>>()?.into_iter().all(|b| b) as i64,
            SymExpr::Or(xs) => xs.iter().map(|x| x.eval_in(vals, floats).map(|v| v != 0)).collect::<Option<Vec<_>>>()?.into_iter().any(|b| b) as i64,
            SymExpr::Not(x) => (x.eval_in(vals, floats)? == 0) as i64,
            SymExpr::Abs(x) => x.eval_in(vals, floats)?.checked_abs()?,
            SymExpr::ToInt(r, x) => match floats {
                Some((fvals, is_float)) if x.is_float(is_float) => {
                    let v = x.eval_f64(fvals)?;
                    if !v.is_finite() || v.abs() >= 9.0e15 {
                        return None;
                    }
                    r.apply(v) as i64
                }
                _ => x.eval_in(vals, floats)?,
            },
            // Float-valued: such relations are evaluated by `eval_f64`.
            SymExpr::ToFloat(_) | SymExpr::TrueDiv(..) | SymExpr::PowF(..) | SymExpr::Float1(..) => return None,
        })
    }

    /// Whether the expression holds a float constant or one of the float symbols `floats`.
    fn is_float(&self, floats: &[bool]) -> bool {
        match self {
            SymExpr::Float(_) => true,
            SymExpr::Int(_) => false,
            SymExpr::Sym(i) => floats.get(*i).copied().unwrap_or(false),
            SymExpr::Add(xs) | SymExpr::Mul(xs) | SymExpr::Max(xs) | SymExpr::Min(xs) | SymExpr::And(xs) | SymExpr::Or(xs) => xs.iter().any(|x| x.is_float(floats)),
            SymExpr::Pow(b, _) | SymExpr::Not(b) => b.is_float(floats),
            SymExpr::FloorDiv(a, b) | SymExpr::Mod(a, b) | SymExpr::Cmp(_, a, b) => a.is_float(floats) || b.is_float(floats),
            SymExpr::Abs(x) => x.is_float(floats),
            // An int (its float operand is evaluated by `eval_in`).
            SymExpr::ToInt(..) => false,
            SymExpr::ToFloat(_) | SymExpr::TrueDiv(..) | SymExpr::PowF(..) | SymExpr::Float1(..) => true,
        }
    }

    /// The value in f64 arithmetic (a relation over float inputs; sizes are exact in f64);
    /// `None` for floor division and modulo, which are not modelled on floats (the relation then
    /// fails and the frame is compiled again).
    pub fn eval_f64(&self, vals: &[f64]) -> Option<f64> {
        let truth = |b: bool| if b { 1.0 } else { 0.0 };
        Some(match self {
            SymExpr::Int(n) => *n as f64,
            SymExpr::Float(x) => *x,
            SymExpr::Sym(i) => *vals.get(*i)?,
            SymExpr::Add(xs) => xs.iter().map(|x| x.eval_f64(vals)).sum::<Option<f64>>()?,
            SymExpr::Mul(xs) => xs.iter().map(|x| x.eval_f64(vals)).product::<Option<f64>>()?,
            SymExpr::Pow(b, n) => b.eval_f64(vals)?.powi(*n as i32),
            SymExpr::FloorDiv(..) | SymExpr::Mod(..) => return None,
            SymExpr::Max(xs) => xs.iter().map(|x| x.eval_f64(vals)).collect::<Option<Vec<_>>>()?.into_iter().fold(f64::NEG_INFINITY, f64::max),
            SymExpr::Min(xs) => xs.iter().map(|x| x.eval_f64(vals)).collect::<Option<Vec<_>>>()?.into_iter().fold(f64::INFINITY, f64::min),
            SymExpr::Cmp(op, a, b) => {
                let (a, b) = (a.eval_f64(vals)?, b.eval_f64(vals)?);
                truth(match op {
                    CmpOp::Eq => a == b,
                    CmpOp::Ne => a != b,
                    CmpOp::Lt => a < b,
                    CmpOp::Le => a <= b,
                    CmpOp::Gt => a > b,
                    CmpOp::Ge => a >= b,
                })
            }
            SymExpr::And(xs) => truth(xs.iter().map(|x| x.eval_f64(vals).map(|v| v != 0.0)).collect::<Option<Vec<_>>>()?.into_iter().all(|b| b)),
            SymExpr::Or(xs) => truth(xs.iter().map(|x| x.eval_f64(vals).map(|v| v != 0.0)).collect::<Option<Vec<_>>>()?.into_iter().any(|b| b)),
            SymExpr::Not(x) => truth(x.eval_f64(vals)? == 0.0),
            SymExpr::Abs(x) => x.eval_f64(vals)?.abs(),
            SymExpr::ToFloat(x) => x.eval_f64(vals)?,
            SymExpr::TrueDiv(a, b) => {
                let (a, b) = (a.eval_f64(vals)?, b.eval_f64(vals)?);
                if b == 0.0 {
                    return None;
                }
                a / b
            }
            SymExpr::PowF(a, b) => a.eval_f64(vals)?.powf(b.eval_f64(vals)?),
            SymExpr::ToInt(r, x) => {
                let v = x.eval_f64(vals)?;
                if !v.is_finite() {
                    return None;
                }
                r.apply(v)
            }
            SymExpr::Float1(f, x) => f.apply(x.eval_f64(vals)?)?,
        })
    }

    /// Python spelling with the symbols named by `names` (`L['x'].size()[0]`).
    pub fn render(&self, names: &[String]) -> String {
        let join = |xs: &[SymExpr], sep: &str| xs.iter().map(|x| x.render(names)).collect::<Vec<_>>().join(sep);
        match self {
            SymExpr::Int(n) => n.to_string(),
            SymExpr::Float(x) => format!("{x:?}"),
            SymExpr::Sym(i) => names.get(*i).cloned().unwrap_or_else(|| format!("s{i}")),
            SymExpr::Add(xs) => format!("({})", join(xs, " + ")),
            SymExpr::Mul(xs) => format!("({})", join(xs, " * ")),
            SymExpr::Pow(b, n) => format!("({} ** {n})", b.render(names)),
            SymExpr::FloorDiv(a, b) => format!("({} // {})", a.render(names), b.render(names)),
            SymExpr::Mod(a, b) => format!("({} % {})", a.render(names), b.render(names)),
            SymExpr::Max(xs) => format!("max({})", join(xs, ", ")),
            SymExpr::Min(xs) => format!("min({})", join(xs, ", ")),
            SymExpr::Cmp(op, a, b) => format!("{} {} {}", a.render(names), op.symbol(), b.render(names)),
            SymExpr::And(xs) => format!("({})", join(xs, " and ")),
            SymExpr::Or(xs) => format!("({})", join(xs, " or ")),
            SymExpr::Not(x) => format!("not ({})", x.render(names)),
            SymExpr::Abs(x) => format!("abs({})", x.render(names)),
            SymExpr::ToFloat(x) => format!("float({})", x.render(names)),
            SymExpr::TrueDiv(a, b) => format!("({} / {})", a.render(names), b.render(names)),
            SymExpr::PowF(a, b) => format!("({} ** {})", a.render(names), b.render(names)),
            SymExpr::ToInt(r, x) => format!("{}({})", match r {
                Rounding::Floor => "math.floor",
                Rounding::Ceil => "math.ceil",
                Rounding::Trunc => "math.trunc",
                Rounding::HalfEven => "round",
            }, x.render(names)),
            SymExpr::Float1(f, x) => format!("math.{}({})", f.name(), x.render(names)),
        }
    }
}

/// The `SHAPE_RELATIONS` guard: size symbols bound to input dimensions, and the relations that
/// must hold between them for the compiled frame to be reused.
#[derive(Debug)]
pub struct ShapeGuard {
    /// Symbol i is `sources[i].0.size()[d]` for `sources[i].1 == Some(d)`, else the Python
    /// int at `sources[i].0` itself.
    pub sources: Vec<(Arc<Source>, Option<usize>)>,
    pub relations: Vec<SymExpr>,
    names: Vec<String>,
    /// Whether some relation reads symbol i (unread ones are not fetched).
    pub used: Vec<bool>,
    /// Whether symbol i is a float input (read as a Python float).
    pub floats: Vec<bool>,
    /// Per relation: evaluated in f64 (it holds a float constant or a float symbol).
    float_relations: Vec<bool>,
}

/// Whether a float can be a symbolic input (`SymFloat`): finite and not -0.0. sympy's symbols
/// are finite reals (`s0 == oo` and `s0 != s0` simplify to False, so a branch on them would be
/// decided wrongly for inf/NaN), and no symbolic expression tells -0.0 from 0.0 (`str(x)`,
/// `math.copysign(1, x)`, `1 / x`); torch specializes non-finite floats for the same reason.
pub fn is_faithful_float(x: f64) -> bool {
    x.is_finite() && x.to_bits() != (-0.0f64).to_bits()
}

impl ShapeGuard {
    pub fn new(sources: Vec<(Arc<Source>, Option<usize>)>, relations: Vec<SymExpr>, floats: Vec<bool>) -> Self {
        let names = sources.iter().map(|(s, d)| match d {
            Some(d) => format!("{s}.size()[{d}]"),
            None => s.to_string(),
        }).collect();
        let mut relations = relations;
        relations.dedup();
        let mut read = Vec::new();
        relations.iter().for_each(|r| r.symbols(&mut read));
        // A float input is always read: its value must be one a symbol stands for faithfully.
        let used = (0..sources.len()).map(|i| read.contains(&i) || floats.get(i).copied().unwrap_or(false)).collect();
        let float_relations = relations.iter().map(|r| r.is_float(&floats)).collect();
        ShapeGuard { sources, relations, names, used, floats, float_relations }
    }

    /// `Ok(())` when every relation holds for the symbol values `vals`, else the first failing
    /// relation rendered with the values (`L['x'].size()[0] >= 2 (L['x'].size()[0] = 1)`).
    /// `vals[i]` is symbol i's value as an int (0 for a float symbol), `fvals[i]` as a float.
    /// A float input must be finite and not -0.0 ([`is_faithful_float`]): the graph was traced
    /// with a symbol that cannot stand for those, so they make the frame compile again (with the
    /// value a constant).
    pub fn check(&self, vals: &[i64], fvals: &[f64], explain: bool) -> Result<(), Option<String>> {
        for (i, _) in self.floats.iter().enumerate().filter(|(_, &f)| f) {
            let x = fvals.get(i).copied().unwrap_or(f64::NAN);
            if !is_faithful_float(x) {
                return Err(explain.then(|| format!("{} = {x:?} is not finite or is -0.0 (a symbolic float stands for neither)", self.names[i])));
            }
        }
        for (r, &is_float) in self.relations.iter().zip(&self.float_relations) {
            let holds = if is_float { r.eval_f64(fvals).is_some_and(|v| v != 0.0) } else { r.eval_in(vals, Some((fvals, &self.floats))).unwrap_or(0) != 0 };
            if !holds {
                return Err(explain.then(|| {
                    let mut used = Vec::new();
                    r.symbols(&mut used);
                    let value = |i: usize| if self.floats.get(i).copied().unwrap_or(false) { format!("{:?}", fvals.get(i).copied().unwrap_or(f64::NAN)) } else { vals.get(i).copied().unwrap_or(-1).to_string() };
                    let values = used.iter().map(|&i| format!("{} = {}", self.names[i], value(i))).collect::<Vec<_>>().join(", ");
                    format!("shape guard {} failed ({values})", r.render(&self.names))
                }));
            }
        }
        Ok(())
    }
}

impl SymExpr {
    fn symbols(&self, out: &mut Vec<usize>) {
        match self {
            SymExpr::Int(_) | SymExpr::Float(_) => {}
            SymExpr::Sym(i) => {
                if !out.contains(i) {
                    out.push(*i)
                }
            }
            SymExpr::Add(xs) | SymExpr::Mul(xs) | SymExpr::Max(xs) | SymExpr::Min(xs) | SymExpr::And(xs) | SymExpr::Or(xs) => xs.iter().for_each(|x| x.symbols(out)),
            SymExpr::Pow(b, _) | SymExpr::Not(b) | SymExpr::Abs(b) | SymExpr::ToFloat(b) | SymExpr::ToInt(_, b) | SymExpr::Float1(_, b) => b.symbols(out),
            SymExpr::FloorDiv(a, b) | SymExpr::Mod(a, b) | SymExpr::Cmp(_, a, b) | SymExpr::TrueDiv(a, b) | SymExpr::PowF(a, b) => {
                a.symbols(out);
                b.symbols(out);
            }
        }
    }
}

impl fmt::Display for ShapeGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rels = self.relations.iter().map(|r| r.render(&self.names)).collect::<Vec<_>>().join(", ");
        write!(f, "SHAPE_RELATIONS: {rels}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_floor_division_and_modulo() {
        let e = |a: i64, b: i64| (SymExpr::FloorDiv(Box::new(SymExpr::Int(a)), Box::new(SymExpr::Int(b))).eval(&[]), SymExpr::Mod(Box::new(SymExpr::Int(a)), Box::new(SymExpr::Int(b))).eval(&[]));
        // Python: 7 // 2 == 3, -7 // 2 == -4, 7 // -2 == -4; 7 % 2 == 1, -7 % 2 == 1, 7 % -2 == -1.
        assert_eq!(e(7, 2), (Some(3), Some(1)));
        assert_eq!(e(-7, 2), (Some(-4), Some(1)));
        assert_eq!(e(7, -2), (Some(-4), Some(-1)));
        assert_eq!(e(-7, -2), (Some(3), Some(-1)));
        assert_eq!(e(1, 0), (None, None));
    }

    #[test]
    fn relation_failure_names_the_relation() {
        let src = Arc::new(Source::Local { name: "x".into(), idx: 0 });
        let g = ShapeGuard::new(vec![(src, Some(0))], vec![SymExpr::Cmp(CmpOp::Ge, Box::new(SymExpr::Sym(0)), Box::new(SymExpr::Int(2)))], vec![false]);
        assert!(g.check(&[5], &[5.0], true).is_ok());
        assert_eq!(g.check(&[1], &[1.0], true).unwrap_err().unwrap(), "shape guard L['x'].size()[0] >= 2 failed (L['x'].size()[0] = 1)");
    }

    #[test]
    fn float_relation_is_evaluated_in_f64() {
        let src = Arc::new(Source::Local { name: "lr".into(), idx: 1 });
        // 2.0 * lr < 3.0
        let rel = SymExpr::Cmp(CmpOp::Lt, Box::new(SymExpr::Mul(vec![SymExpr::Float(2.0), SymExpr::Sym(0)])), Box::new(SymExpr::Float(3.0)));
        let g = ShapeGuard::new(vec![(src, None)], vec![rel], vec![true]);
        assert!(g.check(&[0], &[1.4], true).is_ok());
        assert_eq!(g.check(&[0], &[1.5], true).unwrap_err().unwrap(), "shape guard (2.0 * L['lr']) < 3.0 failed (L['lr'] = 1.5)");
    }

    #[test]
    fn float_input_rejects_inf_nan_and_negative_zero() {
        // A symbolic float stands for finite values other than -0.0, read or not by a relation.
        let src = Arc::new(Source::Local { name: "lr".into(), idx: 1 });
        let g = ShapeGuard::new(vec![(src, None)], vec![], vec![true]);
        assert!(g.used[0]);
        assert!(g.check(&[0], &[0.0], true).is_ok());
        assert!(g.check(&[0], &[-2.5], true).is_ok());
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0] {
            assert!(g.check(&[0], &[x], false).is_err(), "{x}");
        }
    }

    #[test]
    fn float_functions_of_an_int_size() {
        let src = Arc::new(Source::Local { name: "n".into(), idx: 0 });
        let b = Box::new;
        // math.sqrt(float(n)) > 2.5, abs(n - 7) > 1, math.floor(float(n) / 3) == 3
        let sqrt = SymExpr::Cmp(CmpOp::Gt, b(SymExpr::Float1(FloatFn::Sqrt, b(SymExpr::ToFloat(b(SymExpr::Sym(0)))))), b(SymExpr::Float(2.5)));
        let abs = SymExpr::Cmp(CmpOp::Gt, b(SymExpr::Abs(b(SymExpr::Add(vec![SymExpr::Sym(0), SymExpr::Int(-7)])))), b(SymExpr::Int(1)));
        let floor = SymExpr::Cmp(CmpOp::Eq, b(SymExpr::ToInt(Rounding::Floor, b(SymExpr::TrueDiv(b(SymExpr::ToFloat(b(SymExpr::Sym(0)))), b(SymExpr::Int(3)))))), b(SymExpr::Int(3)));
        let g = ShapeGuard::new(vec![(src, None)], vec![sqrt, abs, floor], vec![false]);
        assert!(g.check(&[9], &[9.0], true).is_ok());
        assert!(g.check(&[6], &[6.0], true).is_err()); // sqrt(6) = 2.449
        assert!(g.check(&[10], &[10.0], true).is_ok());
        assert!(g.check(&[8], &[8.0], true).is_err()); // abs(8 - 7) = 1
        assert_eq!(g.check(&[12], &[12.0], true).unwrap_err().unwrap(), "shape guard math.floor((float(L['n']) / 3)) == 3 failed (L['n'] = 12)");
        // round(n / 3) == 2 rounds halves to even, as Python's round(): n = 6 and 7 hold, n = 7.5
        // cannot occur; round(4.5) == 4, round(5.5) == 6.
        let round = |k: f64| SymExpr::ToInt(Rounding::HalfEven, b(SymExpr::Float(k))).eval_f64(&[]);
        assert_eq!((round(4.5), round(5.5), round(-0.5), round(2.4)), (Some(4.0), Some(6.0), Some(-0.0), Some(2.0)));
        let third = SymExpr::Cmp(CmpOp::Eq, b(SymExpr::ToInt(Rounding::HalfEven, b(SymExpr::TrueDiv(b(SymExpr::Sym(0)), b(SymExpr::Int(3)))))), b(SymExpr::Int(2)));
        let g = ShapeGuard::new(vec![(Arc::new(Source::Local { name: "n".into(), idx: 0 }), None)], vec![third], vec![false]);
        assert!(g.check(&[7], &[7.0], true).is_ok());
        assert!(g.check(&[8], &[8.0], true).is_err()); // round(2.67) = 3
        // Outside a function's domain no relation holds (math.sqrt(-1) raises in eager).
        assert_eq!(FloatFn::Sqrt.apply(-1.0), None);
        assert_eq!(SymExpr::Abs(b(SymExpr::Int(i64::MIN))).eval(&[]), None);
    }

    #[test]
    fn modulo_of_a_rounded_float() {
        // s0 % (4 * math.ceil(2.0 * float(s1))) != 0 (a float-step `arange` feeding a reshape,
        // audit 50 M3): the rounding gives an int, so the modulo is integer arithmetic; it held
        // but failed as a float relation, whose modulo is not modelled.
        let b = Box::new;
        let ceil = SymExpr::ToInt(Rounding::Ceil, b(SymExpr::Mul(vec![SymExpr::Float(2.0), SymExpr::ToFloat(b(SymExpr::Sym(1)))])));
        let rel = SymExpr::Cmp(CmpOp::Ne, b(SymExpr::Mod(b(SymExpr::Sym(0)), b(SymExpr::Mul(vec![SymExpr::Int(4), ceil])))), b(SymExpr::Int(0)));
        let srcs = vec![(Arc::new(Source::Local { name: "x".into(), idx: 0 }), Some(0)), (Arc::new(Source::Local { name: "x".into(), idx: 0 }), Some(1))];
        let g = ShapeGuard::new(srcs, vec![rel], vec![false, false]);
        assert!(g.check(&[2, 12], &[2.0, 12.0], true).is_ok());
        assert!(g.check(&[96, 12], &[96.0, 12.0], true).is_err());
    }
}
