"""CPython's own `TypeError` for a call that cannot bind its arguments.

Note [argument binding errors]: CPython binds the arguments of a Python function before its
first instruction runs (Python/ceval.c, `initialize_locals`): a positional-only parameter
passed by keyword, too many positional arguments, a missing or duplicate argument, an unexpected
keyword each raise a `TypeError` whose text depends only on the signature, the function's
`__qualname__` and the argument counts and keyword names of the call (`format_missing`,
`too_many_positional`, `positional_only_passed_as_keyword`). The tracer binds inlined calls
itself (`bind_args` in src/symbolic/variables/functions.rs); when that binding fails, it asks
`binding_error` for the exception: a stub with the same signature and qualname, whose body does
nothing, is called with placeholders in the same shape, so the message is CPython's own.
"""

import types


def _signature_source(code: types.CodeType, n_defaults: int, kwdefaults) -> str:
    """The parameter list of `code` as source: `a, b=_d, /, c=_d, *args, d, e=_d, **kw`.

    `n_defaults` trailing positional parameters and the keyword-only ones named in `kwdefaults`
    get a default (`_d`, a placeholder).
    """
    names = code.co_varnames
    nargs, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    parts = []
    first_default = nargs - n_defaults
    for i in range(nargs):
        parts.append(names[i] + ("=_d" if i >= first_default else ""))
        if i + 1 == nposonly:
            parts.append("/")
    slot = nargs + nkwonly
    if code.co_flags & 0x4:  # CO_VARARGS
        parts.append("*" + names[slot])
        slot += 1
    elif nkwonly:
        parts.append("*")
    for i in range(nargs, nargs + nkwonly):
        parts.append(names[i] + ("=_d" if names[i] in kwdefaults else ""))
    if code.co_flags & 0x8:  # CO_VARKEYWORDS
        parts.append("**" + names[slot])
    return ", ".join(parts)


def binding_error(code: types.CodeType, n_args: int, kwnames, n_defaults: int, kwdefaults, qualname=None):
    """The `TypeError` CPython raises when a function of code `code` (with `n_defaults`
    positional defaults and keyword-only defaults for the names in `kwdefaults`) is called with
    `n_args` positional arguments and the keywords `kwnames`; None when that call binds.

    `qualname` is the function's `__qualname__`, which the message names (`func_qualname`);
    it can differ from the code's `co_qualname` (a dataclass's generated `__init__` is
    `C.__init__`, a `functools.wraps` wrapper takes the wrapped function's); None: the code's.
    """
    ns = {"_d": None}
    exec(f"def _stub({_signature_source(code, n_defaults, set(kwdefaults))}):\n    pass", ns)
    stub = ns["_stub"]
    stub.__name__ = code.co_name
    stub.__qualname__ = code.co_qualname if qualname is None else qualname
    try:
        stub(*([None] * n_args), **{k: None for k in kwnames})
    except TypeError as e:
        e.__traceback__ = None
        return e
    return None
