"""Shared pytest set-up: every test starts and ends with an empty dynamo cache and seeded RNGs,
and every graph a test produces must have compiled: `fx.GraphModule` generates and compiles
Python code for each graph it is given, so a graph whose code is not valid Python (or any other
internal compiler failure) shows up as a `compile_errors` count, which fails the test.

Every `fx.GraphModule` made while a test runs (dynamo's graph, AOTAutograd's forward and
backward graphs, split segments) has its generated code compiled here too (`GraphCodeCheck`):
a `SyntaxError` fails the test even where the failure was caught and the frame ran eagerly (a
backend error under `config.suppress_errors`)."""

import atexit
import os
import random
import shutil
import tempfile

import pytest
import torch

import dynamo

# The kernel disk cache (llvm/src/jit.rs, Note [kernel disk cache]) of a test session is its own,
# read when the first kernel is built: the suite builds every kernel with LLVM at least once
# instead of reading a user's cache, and kernels compiled again later in the session (after their
# graph was dropped) are read back from it.
if "DYNAMO_CACHE_DIR" not in os.environ:
    os.environ["DYNAMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="dynamo-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DYNAMO_CACHE_DIR"], True)

# A sample user suite, run by test_pytest_plugin.py through pytester with the plugin's options.
collect_ignore = ["plugin_sample"]


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (long training runs; ci/test passes it)")


class GraphCodeCheck:
    """Wraps `torch.fx.GraphModule.recompile` (which every GraphModule runs when it is made or its
    graph changes) to record each graph whose generated Python code does not compile: the code
    and the error; `_LazyGraphModule`'s too, which only marks the code due. `checked` counts the
    graphs seen."""

    def __init__(self):
        self.failures = []
        self.checked = 0
        self._orig = None

    def install(self):
        orig = self._orig = torch.fx.GraphModule.recompile
        check = self

        # Under dynamo.disable: a lazy graph module writes its code on its first call, which can
        # come from inside a compiled frame, and these wrappers are not code under test.
        @dynamo.disable
        def recompile(gm):
            check.checked += 1
            try:
                return orig(gm)
            except SyntaxError as e:
                check.failures.append(f"{e}\n{gm.graph.python_code('self').src}")
                raise

        torch.fx.GraphModule.recompile = recompile

        # Note [lazy graph modules]: dynamo's graph modules write their code on first use, so
        # their (classmethod) `recompile` only marks it due; the check writes and compiles it
        # here.
        try:
            from torch.fx._lazy_graph_module import _LazyGraphModule
        except ImportError:
            return
        mark_due = _LazyGraphModule.__dict__["recompile"].__func__

        @dynamo.disable
        def lazy_recompile(gm):
            check.checked += 1
            src = gm.graph.python_code("self").src
            try:
                compile(src, "<fx graph>", "exec")
            except SyntaxError as e:
                check.failures.append(f"{e}\n{src}")
            return mark_due(type(gm))

        _LazyGraphModule.recompile = lazy_recompile


GRAPH_CODE = GraphCodeCheck()


def same_structure(a, b):
    """Eager and compiled results equal: tensors by dtype, shape and values (``allclose``,
    NaNs equal), tuples and lists item by item with the same type, anything else by type and
    ``==``."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def pytest_configure(config):
    GRAPH_CODE.install()
    config.addinivalue_line("markers", "compile_errors_expected: the test provokes internal compiler failures on purpose")
    config.addinivalue_line("markers", "slow: takes tens of seconds; skipped unless --runslow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_dynamo_state(request):
    """Reset dynamo's caches and counters around each test, and seed torch and random."""
    dynamo.reset()
    torch.manual_seed(0)
    random.seed(0)
    GRAPH_CODE.failures.clear()
    yield
    errors = dynamo.counters()["compile_errors"]
    dynamo.reset()
    if request.node.get_closest_marker("compile_errors_expected") is None:
        assert errors == 0, f"{errors} frame(s) failed inside the compiler and ran eagerly (see the dynamo warning)"
        bad, GRAPH_CODE.failures[:] = list(GRAPH_CODE.failures), []
        assert not bad, "fx graph code that is not valid Python:\n" + "\n".join(bad)


def saved_tensors_of(outputs):
    """The tensors autograd keeps for the backward of ``outputs`` (a tensor or a sequence),
    read off their autograd graph without saved-tensor hooks (under hooks a compiled graph runs
    through torch op by op, Note [saved-tensor hooks at run time] in src/autograd/runtime.rs):
    an ``autograd.Function`` node's ``saved_tensors`` (and the compiled Function's saved
    aliases, ``dynamo_saved_values``), torch's nodes' ``_saved_*`` tensors."""
    from dynamo.aot import _saved_attrs

    outs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    stack = [o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    seen, found = set(), []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        values = []
        if hasattr(node, "saved_tensors"):
            values += list(node.saved_tensors)
            values += [v for _, v in getattr(node, "dynamo_saved_values", None) or ()]
        else:
            for a in _saved_attrs(type(node))[1]:
                try:
                    v = getattr(node, a)
                except Exception:
                    continue
                values += list(v) if isinstance(v, (tuple, list)) else [v]
        found += [t for t in values if isinstance(t, torch.Tensor)]
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return found
