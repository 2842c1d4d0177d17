"""``optimize`` / ``disable`` / ``run`` / ``reset``: switching the frame hook on and off.

Frames are captured only when they *start* while the hook is on for the current thread. The
hook itself (``dynamo._C.set_eval_frame``) follows torch's protocol: ``None`` off, ``False``
cached code only, a backend callable compiles.
"""

from __future__ import annotations

import functools
import gc
import importlib
import inspect
import os
import sys
import sysconfig
import warnings

import torch

from . import _C, _debug
from .backends import lookup_backend


_EXTRA_SKIPS: list[str] = []

# Third-party packages whose frames are never compiled, as torch's skip rules list libraries that
# hold no model code. filelock installs a `sys.addaudithook` hook: it runs inside any audited
# operation (reading `f.__code__`, imports, ...) of the frames being compiled, and compiling it
# only costs conversions (its string arguments change at every event). The test runner's own code
# (pytest's log-capture handler, which a library's log record reaches when it propagates to the
# root logger, as transformers' does when CI=true) holds no model code either. Neither do progress
# bars and the numeric and data libraries torch's own list names (torch/_dynamo/trace_rules.py,
# `THIRDPARTY_SKIPLIST`): a tqdm bar updated in a training loop ran its frames compiled, each
# step's new loss value a recompile, until the cache limit warned (audit 51, N9).
_THIRD_PARTY_SKIPS = (
    "filelock", "_pytest", "pytest", "pluggy",
    "tqdm", "numpy", "pandas", "sklearn", "scipy", "tabulate", "networkx", "hypothesis", "xarray",
)


def _package_folders(names) -> list[str]:
    """Folders of the installed packages among ``names`` (found without importing them)."""
    import importlib.util

    out = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out.append(os.path.join(os.path.abspath(loc), ""))
    return out


def _install_skips() -> None:
    """Skips frames of torch, dynamo, the standard library and the folders given to
    ``skip_folders``; keeps site-packages folders (which may sit beneath the standard library
    folder)."""
    skip = {os.path.join(os.path.dirname(torch.__file__), ""), os.path.join(os.path.dirname(os.path.abspath(__file__)), "")}
    skip.update(_EXTRA_SKIPS)
    skip.update(_package_folders(_THIRD_PARTY_SKIPS))
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        if paths.get(key):
            skip.add(os.path.join(paths[key], ""))
    keep = {os.path.join(p, "") for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    for key in ("purelib", "platlib"):
        if paths.get(key):
            keep.add(os.path.join(paths[key], ""))
    _C.set_skip_prefixes(sorted(skip), sorted(keep))


def skip_folders(*folders: str) -> None:
    """Never compile frames of files under ``folders`` (a test runner's own code, say), as
    torch's skip rules do for its list of third-party libraries. Takes effect for code objects
    not seen yet (``reset()`` forgets the ones seen)."""
    for f in folders:
        f = os.path.join(os.path.abspath(f), "")
        if f not in _EXTRA_SKIPS:
            _EXTRA_SKIPS.append(f)
    _install_skips()


_install_skips()


class _Context:
    """Sets the hook's callback for the current thread while active; usable as a context manager
    and as a decorator. ``spec`` is ``(backend, nopython)`` as given to ``optimize`` (how the
    context pickles), or None for ``run``/``disable``."""

    def __init__(self, callback, spec=None):
        self.callback = callback
        self._spec = spec
        self._prev: list = []

    def __enter__(self):
        self._prev.append(_C.set_eval_frame(self.callback))
        return self

    def __exit__(self, *exc):
        _C.set_eval_frame(self._prev.pop())
        return False

    def __reduce__(self):
        # The callback is a closure (cache entries are keyed by it): pickle how to make it again.
        if self._spec is not None:
            return (_optimize_ctx, self._spec)
        return (_Context, (self.callback,))

    def __call__(self, fn):
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, self)
        if not callable(fn):
            raise TypeError(f"optimize() expects a function or nn.Module, got {type(fn).__name__}")
        if inspect.isclass(fn):
            raise TypeError("optimize() cannot wrap a class")
        callback = self.callback

        call_with_hook = _C.call_with_hook

        @functools.wraps(fn)
        def _fn(*args, **kwargs):
            # Sets the hook for the call and takes this frame out of the frame chain meanwhile
            # (Note [resume frames link to the caller] in src/eval_frame/hook.rs).
            return call_with_hook(callback, fn, args, kwargs)

        _fn._dynamo_orig_callable = fn  # type: ignore[attr-defined]
        # A torch.compile trace reaching the wrapper inlines ``fn`` (Note [torch's hook inside
        # a region] in src/eval_frame/hook.rs).
        _fn._torchdynamo_inline = fn  # type: ignore[attr-defined]
        return _fn


class _RecordWarnings:
    """Records every warning issued inside it (a torch call traced on fake tensors; Note
    [warnings of traced calls] in src/symbolic/output_graph.rs) instead of showing it. Unlike
    ``catch_warnings(record=True)`` it does not mark the filters changed (which would make every
    ``__warningregistry__`` forget what it has shown, so "default" warnings elsewhere would
    show again after each compile); the "always" action leaves the registries alone."""

    def __enter__(self):
        self.log = []
        self._saved = (warnings.filters, warnings.showwarning, warnings._showwarnmsg_impl)
        warnings.filters = [("always", None, Warning, None, 0)]
        warnings.showwarning = warnings._showwarning_orig
        warnings._showwarnmsg_impl = self.log.append
        return self.log

    def __exit__(self, *exc):
        warnings.filters, warnings.showwarning, warnings._showwarnmsg_impl = self._saved
        return False


class _RecordTraceWarnings(_RecordWarnings):
    """``_RecordWarnings`` around a call made while tracing (a torch call on fake tensors, a
    module or autocast constructed at trace time). Note [warn-once slots at trace time]: a
    ``TORCH_WARN_ONCE`` warning (``torch.tensor([a, b])`` of tensors that require grad:
    "Converting a tensor with requires_grad=True to a scalar ...") warns the first time its
    C++ line runs in the process and marks a static flag; traced on fake tensors, that first
    time was the trace, so eager code run later (the same call at a graph break, or the frame
    itself after a failed trace) never warned. With ``torch.set_warn_always(True)`` the macro
    warns without touching its flag (c10/util/Exception.h, ``TORCH_WARN_ONCE``), so the call
    is recorded here and the process's once-slots stay as eager left them."""

    def __enter__(self):
        self._warn_always = torch.is_warn_always_enabled()
        torch.set_warn_always(True)
        return super().__enter__()

    def __exit__(self, *exc):
        torch.set_warn_always(self._warn_always)
        return super().__exit__(*exc)


def _issue_warnings_at(compiled, records):
    """Wraps a compiled graph whose torch calls warned while traced on fake tensors (Note
    [warnings of traced calls] in src/symbolic/output_graph.rs). Each call runs the graph with
    every warning recorded instead of shown (the backend's code issues them from its own lines),
    then issues them at the user's lines, as eager issues them per call: through the user's
    filters and their module's ``__warningregistry__``, so "default" and "once" act as they do
    eagerly. The warnings the graph issued are paired in order with the traced ones of the same
    category and take their lines: the text is the real kernel's (a fake tensor's path may word
    the same warning differently, e.g. an ``out=`` resize). A traced warning the graph did not
    issue (a kernel of ours that does not warn) is issued with its traced text; one the graph
    issued beyond those is issued where it was raised. ``records``: (message, category,
    filename, lineno, module globals)."""

    def run(*args):
        recorder = _RecordWarnings()
        raised = recorder.__enter__()
        finished = False
        try:
            out = compiled(*args)
            finished = True
        finally:
            recorder.__exit__(None, None, None)
            # A graph that raised issues only what it issued before (eager stops there too).
            _issue_recorded(records if finished else records[: len(raised)], raised)
        return out

    return run


def _issue_recorded(records, raised):
    """``_issue_warnings_at``'s pairing: issues ``records`` at their lines with the text of the
    ``raised`` warning of the same category at the same position, then the rest of ``raised``."""
    k = 0
    for message, category, filename, lineno, g in records:
        if k < len(raised) and raised[k].category is category:
            message = raised[k].message
            k += 1
        registry = g.setdefault("__warningregistry__", {})
        try:
            warnings.warn_explicit(message, category, filename, lineno, module=g.get("__name__"), registry=registry, module_globals=g)
        except ImportError:
            # The source line is looked up through ``g["__loader__"]``; for code that has no
            # file (``python -c``, ``exec``) that loader raises ImportError ("'__main__' is not
            # a built-in module"), which made the graph look failed and the frame rerun,
            # losing the warning. Issued without the source line then, as ``warn`` issues it.
            warnings.warn_explicit(message, category, filename, lineno, module=g.get("__name__"), registry=registry)
    for w in raised[k:]:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _optimize_ctx(backend, nopython):
    """Unpickles an ``optimize`` context (``_Context.__reduce__``)."""
    return optimize(backend, nopython=nopython)


class OptimizedModule(torch.nn.Module):
    """Wraps an ``nn.Module`` so that calls run with the hook on (``optimize(b)(module)``), as
    ``torch.compile(module)`` does: the original is the submodule ``_orig_mod`` (so
    ``state_dict()`` keys and ``named_parameters()`` names start with ``_orig_mod.``, as
    torch's), ``.to()``/``.train()``/``parameters()`` reach it, attribute reads and writes fall
    through to it, and the wrapper pickles (``torch.save(model)``) as (original module,
    backend name or picklable backend callable)."""

    # Attributes that live on the wrapper; every other attribute write goes to the original.
    _opt_mod_attributes = {"_orig_mod", "_ctx", "forward", "__dict__", "_super_module_initialized"}

    def __init__(self, mod: torch.nn.Module, ctx: _Context):
        # Set before nn.Module.__init__: its attribute writes go through __setattr__ below,
        # which reads _super_module_initialized.
        object.__setattr__(self, "_super_module_initialized", False)
        super().__init__()
        object.__setattr__(self, "_super_module_initialized", True)
        self._orig_mod = mod
        self._ctx = ctx
        # The module's forward is the frame to compile, even when it is torch's own code
        # (nn.Sequential.forward), as torch.compile(module) does.
        forward = getattr(type(mod), "forward", None)
        code = getattr(forward, "__code__", None)
        if code is not None:
            _C.force_compile(code)

    def forward(self, *args, **kwargs):
        prev = _C.set_eval_frame(self._ctx.callback)
        try:
            return self._orig_mod(*args, **kwargs)
        finally:
            _C.set_eval_frame(prev)

    def __call__(self, *args, **kwargs):
        # nn.Module.__call__ (_wrapped_call_impl -> _call_impl) calls ``forward`` directly when
        # no hook is registered on the wrapper, no compiled call is set and torch is not tracing
        # (and ``forward`` is not overridden on the instance); the same test here saves those
        # two Python frames and ``forward``'s on every call. Global module hooks are left to the
        # original module's own call: eager runs them once per module call, and the wrapper is
        # not a module of the user's (running them for it too would apply them twice).
        d = self.__dict__
        if (
            d.get("_compiled_call_impl") is not None
            or "forward" in d
            or d["_forward_hooks"]
            or d["_forward_pre_hooks"]
            or d["_backward_hooks"]
            or d["_backward_pre_hooks"]
            or torch._C._is_tracing()
        ):
            return super().__call__(*args, **kwargs)
        prev = _C.set_eval_frame(d["_ctx"].callback)
        try:
            return d["_modules"]["_orig_mod"](*args, **kwargs)
        finally:
            _C.set_eval_frame(prev)

    def __reduce__(self):
        return (OptimizedModule, (self._orig_mod, self._ctx))

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        # nn.Module.__init__ sets the default; the wrapper mirrors the original's mode.
        if self._super_module_initialized:
            self._orig_mod.training = value

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        if name == "_ctx":
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes or not self._super_module_initialized:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __dir__(self):
        own = self._orig_mod.__dir__()
        return own + [a for a in super().__dir__() if a not in own]

    # Special methods are looked up on the type, past __getattr__: the container protocol of
    # the original (``len(seq)``, ``seq[0]``, ``for m in seq``, ``m in seq``) is forwarded, and
    # a module without it keeps object's behaviour (``TypeError``; truth True).
    def _orig_special(self, name, missing):
        method = getattr(type(self._orig_mod), name, None)
        if method is None:
            raise TypeError(missing.format(type(self._orig_mod).__name__))
        return method.__get__(self._orig_mod)

    def __len__(self):
        return self._orig_special("__len__", "object of type '{}' has no len()")()

    def __getitem__(self, index):
        return self._orig_special("__getitem__", "'{}' object is not subscriptable")(index)

    def __iter__(self):
        return self._orig_special("__iter__", "'{}' object is not iterable")()

    def __contains__(self, item):
        if getattr(type(self._orig_mod), "__contains__", None) is None:
            return any(m is item or m == item for m in self)
        return self._orig_special("__contains__", "")(item)

    def __bool__(self):
        return bool(self._orig_mod)


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None):
    """Returns a context manager / decorator that compiles frames with ``backend``.

    ``backend`` is a registered name (``"inductor"``, ``"eager"``, see ``list_backends()``) or a
    callable ``backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable``.
    Raises ``KeyError`` for an unknown name. With ``nopython=True`` the first graph break (or a
    frame that cannot be traced) raises ``dynamo.exc.Unsupported`` naming the reason and line.
    ``dynamic``: ``None`` (default) makes a tensor dimension symbolic once it changed between
    compiles of a frame (``config.automatic_dynamic_shapes``); ``True`` makes every dimension
    symbolic from the first compile (sizes 0 and 1 stay specialized, as in torch); ``False``
    specializes every size.
    """
    compiler = lookup_backend(backend)
    _import_compiler_dependencies()

    def callback(gm, example_inputs):
        compiled = compiler(gm, example_inputs)
        if _debug.ENABLED:
            _debug.record_backend(gm, compiled)
        return compiled

    callback._dynamo_backend = compiler  # type: ignore[attr-defined]
    callback._dynamo_nopython = bool(nopython)  # type: ignore[attr-defined]
    # None: automatic dynamic shapes (dynamo.config); True: every dimension symbolic from the
    # first compile; False: every size specialized.
    callback._dynamo_dynamic = None if dynamic is None else bool(dynamic)  # type: ignore[attr-defined]
    # Cache entries are keyed by the callback object: reuse one per (backend, nopython, dynamic).
    callback = _CALLBACKS.setdefault((compiler, bool(nopython), callback._dynamo_dynamic), callback)
    return _Context(callback, (backend, bool(nopython)))


_CALLBACKS: dict = {}
_IMPORTED = False


def _import_compiler_dependencies() -> None:
    """Imports, once, what compiling a frame imports lazily (fake tensors pull in
    torch._dynamo, torch.distributed.tensor, sympy, ...: about 900 modules, 1-2 s).

    Done here, before any hook is on, because the first frame compiled may start in the
    middle of an import (a meta-path finder's ``find_spec``): importing the module being
    imported again from the compiler found it half initialized and broke it (the first
    ``torch.testing.assert_close`` under ``optimize`` failed with "DTensor already registered
    in python_key_table")."""
    global _IMPORTED
    if _IMPORTED:
        return
    _IMPORTED = True
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        torch.empty(1)
    # What symbolic sizes use (dynamo._shapes): imported here for the same reason.
    importlib.import_module("torch._dynamo.source")
    _mark_torch_disable()
    importlib.import_module("torch.fx.experimental.symbolic_shapes")
    # Note [full collection after the imports]: those imports leave ~300k new objects in the
    # young generations, so the first compile would trigger CPython's first full (generation 2)
    # collection over every object of torch and the user's program (0.2-0.4 s on resnet18's
    # first compile, a third of it). One full collection here, while the import is being paid
    # anyway, resets the long-lived count (Modules/gcmodule.c: a full collection runs only once
    # the objects pending since the last one exceed a quarter of the long-lived ones).
    gc.collect()


# Code objects ``disable`` marked: marked again after ``reset``, which forgets every code
# object's classification.
_SKIPPED_CODES: list = []


def _skip_code(code) -> None:
    _SKIPPED_CODES.append(code)
    _C.skip_code(code)


def _mark_torch_disable() -> None:
    """Note [torch's disable] (src/eval_frame/hook.rs): the wrapper torch.compiler.disable makes
    runs with our hook off, as torch's hook is off in it; so does the wrapper torch.compile
    makes (Note [torch.compile inside a region]). (Marked again after ``reset``, which forgets
    every code object's classification.)"""
    _C.skip_code_recursive(torch._dynamo.disable(lambda: None).__code__)
    # Note [torch.compile inside a region]: a function torch.compile wrapped (its wrapper code,
    # one code object for every such function) runs with our hook off until it returns, so
    # torch's Dynamo alone handles its frames, as it does outside a region. With both hooks on,
    # ours transformed the frames under torch's wrapper and torch's Dynamo then tried to
    # compile our generated code (InternalTorchDynamoError "unhashable type: 'slice'" on 3.11,
    # a crash on 3.12). The converse, a region inside torch.compile, is Note [torch's hook
    # inside a region] in src/eval_frame/hook.rs.
    # torch.compile's context runs torch's TorchPatcher.patch once per process, which among
    # other things turns off ``torch.distributions`` argument validation for everyone; only a
    # user's own torch.compile may do that, so the patch is held off while we make the wrapper.
    patcher = getattr(torch._dynamo.eval_frame, "TorchPatcher", None)
    held = patcher is not None and "patch" in vars(patcher)
    if held:
        original = vars(patcher)["patch"]
        patcher.patch = staticmethod(lambda: None)
    try:
        wrapper = torch.compile(lambda: None, backend="eager")
    except Exception:  # noqa: BLE001 - a torch without torch.compile has nothing to mark
        wrapper = None
    finally:
        if held:
            patcher.patch = original
    code = getattr(wrapper, "__code__", None)
    if code is not None and code.co_filename == torch._dynamo.eval_frame.__file__:
        _C.skip_code_recursive(code)


def run(fn=None):
    """Runs ``fn`` (or the block) using already-compiled code only: no new compiles."""
    ctx = _Context(False)
    return ctx if fn is None else ctx(fn)


def graph_break(msg: str = "") -> None:
    """Ends the graph here: inside compiled code the call is a graph break (GB0028
    ``explicit_graph_break``, with ``msg`` in its reason), the code before and after it become
    separate graphs, as ``torch._dynamo.graph_break()`` under torch.compile (which is recognized
    too). Called eagerly it does nothing."""


def is_compiling() -> bool:
    """True while dynamo traces the calling code (the trace answers True and folds the branch),
    False when it runs eagerly, as ``torch.compiler.is_compiling()`` (also answered True)."""
    return False


def allow_in_graph(fn):
    """Marks ``fn`` (a function over tensors) to be put in graphs as one node, called with the
    graph's tensors, instead of traced into (``torch._dynamo.allow_in_graph``): the tracer treats
    it as a torch function, computing its output shapes by calling it on fake tensors, and the
    backend runs the real function. ``fn`` must be free of side effects and Python-visible state
    (it may run at compile time on fake tensors). Returns ``fn``, so it works as a decorator.
    Raises TypeError for a non-callable."""
    if not callable(fn):
        raise TypeError(f"allow_in_graph expects a callable, got {type(fn).__name__}")
    fn._dynamo_allow_in_graph = True
    code = getattr(fn, "__code__", None)
    if code is not None:
        # Its own frames (the graph calling it, or a call outside any graph) are never traced.
        _skip_code(code)
    return fn


def disable(fn=None, recursive: bool = True, *, reason: str | None = None, wrapping: bool = True):
    """Runs ``fn`` eagerly (``torch._dynamo.disable``'s signature).

    ``recursive=True``: ``fn`` and everything it calls run with the hook off; without ``fn``,
    returns a context manager / decorator doing that. ``recursive=False``: only ``fn``'s own
    frames are skipped; the functions it calls are still compiled while the hook is on (``fn``
    itself is returned, its code marked). ``reason`` is kept on the wrapper
    (``_dynamo_disable_msg``) for tools to show. ``wrapping=False`` leaves the wrapper's name and
    docstring its own instead of copying ``fn``'s (``functools.wraps``). An ``nn.Module`` has
    its ``forward`` disabled and is returned. Raises ``TypeError`` when ``fn`` is not callable.
    """
    if not recursive:
        def mark(f):
            if not callable(f):
                raise TypeError(f"disable() expects a callable, got {type(f).__name__}")
            f = getattr(f, "_dynamo_orig_callable", f)
            target = f.forward if isinstance(f, torch.nn.Module) else f
            func = getattr(target, "__func__", target)
            code = getattr(func, "__code__", None)
            if code is not None:
                _skip_code(code)
                # torch's mark of a disabled function: a trace that reaches a call of it breaks
                # there, so its own frame runs eagerly (the functions it calls are compiled).
                try:
                    func._torchdynamo_disable = True
                except AttributeError:
                    pass
            return f

        return mark if fn is None else mark(fn)
    if fn is None:
        return _DisableContext(reason, wrapping)
    return _DisableContext(reason, wrapping)(fn)


class _DisableContext(_Context):
    """``disable()`` as a context manager / decorator: the hook off inside."""

    def __init__(self, reason=None, wrapping=True):
        super().__init__(None)
        self.reason = reason
        self.wrapping = wrapping

    def __reduce__(self):
        return (_DisableContext, (self.reason, self.wrapping))

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"disable() expects a callable, got {type(fn).__name__}")
        fn = getattr(fn, "_dynamo_orig_callable", fn)
        if isinstance(fn, torch.nn.Module):
            fn.forward = self(fn.forward)
            return fn
        code = getattr(fn, "__code__", None)
        if code is not None:
            _skip_code(code)

        def _fn(*args, **kwargs):
            prev = _C.set_eval_frame(None)
            try:
                return fn(*args, **kwargs)
            finally:
                _C.set_eval_frame(prev)

        if self.wrapping:
            _fn = functools.wraps(fn)(_fn)
        _fn._dynamo_disable = True  # type: ignore[attr-defined]
        _fn._dynamo_disable_msg = self.reason  # type: ignore[attr-defined]
        _fn._dynamo_orig_callable = fn  # type: ignore[attr-defined]
        return _fn


def reset() -> None:
    """Forgets every compiled frame and zeroes the counters (``torch._dynamo.reset()``)."""
    _C.reset()
    if _IMPORTED:
        _mark_torch_disable()
    for code in _SKIPPED_CODES:
        _C.skip_code(code)
    from . import _shapes

    _shapes.stats["specializations"] = 0
    try:
        _C.inductor_reset_counters()
    except AttributeError:
        pass


def mark_dynamic(t, index) -> None:
    """Makes dimension ``index`` (an int or a list of ints) of tensor ``t`` symbolic in every
    graph compiled with ``t`` as an input, from the first compile (``torch._dynamo.mark_dynamic``;
    it sets the same ``t._dynamo_dynamic_indices``). Sizes 0 and 1 still specialize."""
    if isinstance(index, (list, tuple)):
        for i in index:
            mark_dynamic(t, i)
        return
    if not hasattr(t, "_dynamo_dynamic_indices"):
        t._dynamo_dynamic_indices = set()
    t._dynamo_dynamic_indices.add(int(index) % max(t.dim(), 1))


def mark_static(t, index=None) -> None:
    """Keeps dimension ``index`` of tensor ``t`` (every dimension when None) specialized even
    when automatic dynamic shapes would make it symbolic (``torch._dynamo.mark_static``)."""
    dims = range(t.dim()) if index is None else (index if isinstance(index, (list, tuple)) else [index])
    if not hasattr(t, "_dynamo_static_indices"):
        t._dynamo_static_indices = set()
    for i in dims:
        t._dynamo_static_indices.add(int(i) % max(t.dim(), 1))
