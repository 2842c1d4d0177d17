//! Note [call arity]: the builtins and the methods of list, tuple, dict and set that the tracer
//! models are C functions that check their arguments before doing anything (Python/bltinmodule.c,
//! Objects/listobject.c, dictobject.c, setobject.c: `METH_NOARGS`, `METH_O`, Argument Clinic's
//! `_PyArg_CheckPositional`, `_PyArg_NoKeywords`). A call with a number of positional arguments
//! or a keyword the real function refuses raises `TypeError` there, before any effect. The
//! models read their arguments by position, so such a call is checked here first and becomes a
//! graph break (`ArgumentMismatch`): it runs as ordinary Python and raises eager's own error.
//! Names not in these tables are left to their models.

/// How a C function takes its arguments: `min..=max` positional ones (`usize::MAX`: any number)
/// and the keywords it accepts (`&["*"]`: any keyword).
#[derive(Clone, Copy)]
struct Spec {
    min: usize,
    max: usize,
    keywords: &'static [&'static str],
}

const ANY: usize = usize::MAX;

const fn spec(min: usize, max: usize, keywords: &'static [&'static str]) -> Spec {
    Spec { min, max, keywords }
}

/// The builtins (Python/bltinmodule.c, Objects/*object.c `tp_new`), by name.
fn builtin_spec(name: &str) -> Option<Spec> {
    Some(match name {
        "len" | "callable" | "id" | "abs" | "hash" | "ord" | "chr" | "repr" | "ascii" | "bin" | "oct" | "hex" | "any" | "all" | "reversed" => spec(1, 1, &[]),
        "isinstance" | "issubclass" | "hasattr" | "delattr" | "divmod" => spec(2, 2, &[]),
        "getattr" => spec(2, 3, &[]),
        "setattr" => spec(3, 3, &[]),
        "iter" | "next" => spec(1, 2, &[]),
        "list" | "tuple" | "frozenset" | "set" => spec(0, 1, &[]),
        "range" => spec(1, 3, &[]),
        "sum" => spec(1, 2, &["start"]),
        "sorted" => spec(1, 1, &["key", "reverse"]),
        "enumerate" => spec(0, 2, &["iterable", "start"]),
        "zip" => spec(0, ANY, &["strict"]),
        "map" => spec(2, ANY, &[]),
        "filter" => spec(2, 2, &[]),
        "min" | "max" => spec(1, ANY, &["key", "default"]),
        "round" => spec(1, 2, &["number", "ndigits"]),
        "pow" => spec(2, 3, &["base", "exp", "mod"]),
        "format" => spec(1, 2, &[]),
        "vars" | "dir" => spec(0, 1, &[]),
        "float" | "bool" => spec(0, 1, &[]),
        "int" => spec(0, 2, &["base"]),
        "str" => spec(0, 3, &["object", "encoding", "errors"]),
        _ => return None,
    })
}

/// The names of the builtin `name`'s parameters that may be passed by position or by keyword,
/// in position order (the Argument Clinic signatures of Python/bltinmodule.c and
/// Objects/*object.c): `pow(base, exp, mod=None)`, `round(number, ndigits=None)`,
/// `enumerate(iterable, start=0)`, `str(object='', encoding=..., errors=...)`, and the
/// keyword-or-positional tails of `sum(iterable, /, start=0)` and `int(x, /, base=10)`.
/// Positional-only leading parameters are `""`.
fn positional_keywords(name: &str) -> &'static [&'static str] {
    match name {
        "pow" => &["base", "exp", "mod"],
        "round" => &["number", "ndigits"],
        "enumerate" => &["iterable", "start"],
        "str" => &["object", "encoding", "errors"],
        "sum" => &["", "start"],
        "int" => &["", "base"],
        _ => &[],
    }
}

/// Moves the keyword arguments of a builtin call that name its next positional parameters into
/// `args`, in position order, as CPython's argument parsing binds them (`pow(base=x, exp=2)` is
/// `pow(x, 2)`), so that the rest of the tracer sees one spelling. A keyword that names an
/// already filled position, or one past a missing position, stays a keyword: CPython raises
/// `TypeError` for the first and for the missing argument, and the arity check leaves both to
/// the real call.
pub fn bind_positional_keywords<V>(name: &str, args: &mut Vec<V>, kwargs: &mut Vec<(String, V)>) {
    let names = positional_keywords(name);
    while let Some(next) = names.get(args.len()).filter(|n| !n.is_empty()) {
        let Some(i) = kwargs.iter().position(|(k, _)| k == next) else { break };
        let (_, v) = kwargs.remove(i);
        args.push(v);
    }
}

/// Methods of `list` and `tuple` (Objects/listobject.c, tupleobject.c).
fn list_spec(name: &str, tuple: bool) -> Option<Spec> {
    Some(match name {
        "count" => spec(1, 1, &[]),
        "index" => spec(1, 3, &[]),
        _ if tuple => return None,
        "append" | "extend" | "remove" => spec(1, 1, &[]),
        "insert" => spec(2, 2, &[]),
        "pop" => spec(0, 1, &[]),
        "clear" | "copy" | "reverse" => spec(0, 0, &[]),
        "sort" => spec(0, 0, &["key", "reverse"]),
        _ => return None,
    })
}

/// Methods of `dict` (Objects/dictobject.c) and of its subclasses in `collections`
/// (Objects/odictobject.c, Modules/_collectionsmodule.c, Lib/collections/__init__.py).
fn dict_spec(name: &str) -> Option<Spec> {
    Some(match name {
        "get" | "pop" | "setdefault" => spec(1, 2, &[]),
        "popitem" | "keys" | "values" | "items" | "clear" | "copy" => spec(0, 0, &[]),
        "update" => spec(0, 1, &["*"]),
        "move_to_end" => spec(1, 2, &["key", "last"]),
        "most_common" => spec(0, 1, &["n"]),
        "elements" => spec(0, 0, &[]),
        _ => return None,
    })
}

/// Methods of `set` and `frozenset` (Objects/setobject.c).
fn set_spec(name: &str) -> Option<Spec> {
    Some(match name {
        "add" | "discard" | "remove" | "issubset" | "issuperset" | "isdisjoint" | "symmetric_difference" | "symmetric_difference_update" => spec(1, 1, &[]),
        "pop" | "clear" | "copy" => spec(0, 0, &[]),
        "union" | "intersection" | "difference" | "update" | "intersection_update" | "difference_update" => spec(0, ANY, &[]),
        _ => return None,
    })
}

/// The container kind of a method call, for [`check_method`].
#[derive(Clone, Copy)]
pub enum Container {
    List,
    Tuple,
    Dict,
    Set,
}

fn check(spec: Option<Spec>, what: &str, n_args: usize, keywords: &[&str]) -> Result<(), String> {
    let Some(s) = spec else { return Ok(()) };
    if n_args < s.min || n_args > s.max {
        return Err(format!("{what} called with {n_args} positional arguments"));
    }
    if let Some(k) = keywords.iter().find(|k| !s.keywords.contains(&"*") && !s.keywords.contains(k)) {
        return Err(format!("{what} called with the keyword argument '{k}'"));
    }
    Ok(())
}

/// Whether the builtin `name` accepts `n_args` positional arguments and `keywords` (Note [call
/// arity]). Errors: a description of the mismatch, for the graph break's message.
pub fn check_builtin(name: &str, n_args: usize, keywords: &[&str]) -> Result<(), String> {
    check(builtin_spec(name), &format!("{name}()"), n_args, keywords)
}

/// Whether the method `name` of a container of kind `c` accepts `n_args` positional arguments
/// and `keywords` (Note [call arity]). Errors: a description of the mismatch.
pub fn check_method(c: Container, name: &str, n_args: usize, keywords: &[&str]) -> Result<(), String> {
    let spec = match c {
        Container::List => list_spec(name, false),
        Container::Tuple => list_spec(name, true),
        Container::Dict => dict_spec(name),
        Container::Set => set_spec(name),
    };
    check(spec, &format!("{name}()"), n_args, keywords)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins() {
        assert!(check_builtin("len", 1, &[]).is_ok());
        assert!(check_builtin("len", 0, &[]).is_err());
        assert!(check_builtin("len", 1, &["obj"]).is_err());
        assert!(check_builtin("getattr", 3, &[]).is_ok());
        assert!(check_builtin("getattr", 1, &[]).is_err());
        assert!(check_builtin("sum", 1, &["start"]).is_ok());
        assert!(check_builtin("sum", 1, &["key"]).is_err());
        assert!(check_builtin("print", 7, &["sep", "file"]).is_ok());
    }

    #[test]
    fn keywords_bound_to_positions() {
        let bind = |name: &str, args: &[i32], kwargs: &[(&str, i32)]| {
            let mut a = args.to_vec();
            let mut k: Vec<(String, i32)> = kwargs.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            bind_positional_keywords(name, &mut a, &mut k);
            (a, k.into_iter().map(|(n, _)| n).collect::<Vec<_>>())
        };
        assert_eq!(bind("pow", &[], &[("exp", 2), ("base", 1)]), (vec![1, 2], vec![]));
        assert_eq!(bind("pow", &[1], &[("mod", 3)]), (vec![1], vec!["mod".to_string()]));
        assert_eq!(bind("pow", &[1], &[("base", 3)]), (vec![1], vec!["base".to_string()]));
        assert_eq!(bind("sum", &[], &[("start", 3)]), (vec![], vec!["start".to_string()]));
        assert_eq!(bind("sum", &[7], &[("start", 3)]), (vec![7, 3], vec![]));
        assert_eq!(bind("enumerate", &[], &[("start", 2), ("iterable", 1)]), (vec![1, 2], vec![]));
        assert_eq!(bind("len", &[1], &[("obj", 2)]), (vec![1], vec!["obj".to_string()]));
    }

    #[test]
    fn methods() {
        assert!(check_method(Container::List, "append", 1, &[]).is_ok());
        assert!(check_method(Container::List, "append", 2, &[]).is_err());
        assert!(check_method(Container::Tuple, "append", 2, &[]).is_ok());
        assert!(check_method(Container::List, "sort", 0, &["key"]).is_ok());
        assert!(check_method(Container::List, "sort", 1, &[]).is_err());
        assert!(check_method(Container::Dict, "update", 0, &["a", "b"]).is_ok());
        assert!(check_method(Container::Dict, "get", 0, &[]).is_err());
        assert!(check_method(Container::Set, "union", 3, &[]).is_ok());
        assert!(check_method(Container::Set, "add", 0, &[]).is_err());
    }
}
