"""pytest plugin: run a test suite with its PyTorch code compiled by dynamo.

Registered through the ``pytest11`` entry point, so it is active wherever dynamo is installed;
without its options it only adds the ``dynamo_skip`` marker and the ``dynamo_counters`` fixture
(and does not import torch).

``pytest --dynamo=inductor`` calls each test function inside ``dynamo.optimize(backend)``, as
PyTorch's own suite runs under ``PYTORCH_TEST_WITH_DYNAMO=1``: the test's frame and every frame
it starts are captured (the functions it calls are inlined into its graphs), with the caches
and counters reset before each test. Options:

- ``--dynamo-compare``: run each test eagerly first (same fixture values, tensors and modules
  among them deep-copied; torch, ``random`` and numpy RNG states restored between the runs),
  then compiled, and compare (1) what the test function returns and (2) the arguments of every
  ``torch.testing.assert_close`` call, in call order. A difference beyond
  ``--dynamo-rtol``/``--dynamo-atol`` fails the test with its name and the first difference, and
  is listed in the terminal summary. Tests must be repeatable for this: state they mutate
  outside their fixtures (module-level models) is seen changed by the second run.
- ``--dynamo-nopython``: ``optimize(backend, nopython=True)``: the first graph break raises
  ``dynamo.exc.Unsupported`` and fails the test.
- ``@pytest.mark.dynamo_skip(reason=...)`` or a test decorated with ``dynamo.disable`` runs
  eagerly (and is not compared).

The terminal summary lists, per test, graphs, graph breaks with reasons and recompiles, the
tests that captured nothing, the opted-out tests and the comparison failures.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import random

import pytest

_SKIP_MARKER = "dynamo_skip"


def pytest_addoption(parser):
    group = parser.getgroup("dynamo", "dynamo: run tests with PyTorch code compiled")
    group.addoption("--dynamo", metavar="BACKEND", default=None,
                    help="run each test under dynamo.optimize(BACKEND) (a registered name such as inductor or eager)")
    group.addoption("--dynamo-compare", action="store_true", default=False,
                    help="also run each test eagerly and compare returned values and assert_close arguments (backend: --dynamo, default inductor)")
    group.addoption("--dynamo-nopython", action="store_true", default=False,
                    help="fail a test at its first graph break (optimize(..., nopython=True))")
    group.addoption("--dynamo-rtol", type=float, default=1e-4, help="relative tolerance of --dynamo-compare (default 1e-4)")
    group.addoption("--dynamo-atol", type=float, default=1e-4, help="absolute tolerance of --dynamo-compare (default 1e-4)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{_SKIP_MARKER}(reason=None): run this test eagerly under --dynamo")
    backend = config.getoption("dynamo")
    compare = config.getoption("dynamo_compare")
    nopython = config.getoption("dynamo_nopython")
    if backend is None and (compare or nopython):
        backend = "inductor"
    if backend is not None:
        config.pluginmanager.register(DynamoRunner(backend, compare, nopython, config.getoption("dynamo_rtol"),
                                                   config.getoption("dynamo_atol")), "dynamo-runner")


class DynamoCounters:
    """The ``dynamo_counters`` fixture's value: dynamo's counters counted from the start of the
    test's own run (``counters()`` names: ``graphs``, ``graph_breaks``, ``recompiles``,
    ``compiles``, ``frames_seen``, ...; read live, so a read after a call sees its compiles),
    plus ``break_reasons`` and ``recompile_reasons`` of that run."""

    def __init__(self):
        self._base: dict[str, int] = {}
        self._n_breaks = 0
        self._n_recompiles = 0
        self.rebase()

    def rebase(self) -> None:
        """Counts from now on (the runner calls it when it resets dynamo before a test's run)."""
        from dynamo import _C, counters

        self._base = counters()
        self._n_breaks = len(_C.break_reasons())
        self._n_recompiles = len(_C.recompile_reasons())

    def as_dict(self) -> dict[str, int]:
        """Every counter since the test's run started."""
        from dynamo import counters

        now = counters()
        # A reset() inside the test zeroes the counters: count from zero then.
        return {k: v - self._base.get(k, 0) if v >= self._base.get(k, 0) else v for k, v in now.items()}

    def __getitem__(self, name: str) -> int:
        return self.as_dict()[name]

    def get(self, name: str, default: int = 0) -> int:
        return self.as_dict().get(name, default)

    @property
    def break_reasons(self) -> list[str]:
        from dynamo import _C

        return list(_C.break_reasons())[self._n_breaks:]

    @property
    def recompile_reasons(self) -> list[str]:
        from dynamo import _C

        return list(_C.recompile_reasons())[self._n_recompiles:]

    def __repr__(self) -> str:
        return f"DynamoCounters({self.as_dict()})"


@pytest.fixture
def dynamo_counters():
    """dynamo's counters for this test's own run (see ``DynamoCounters``)."""
    return DynamoCounters()


class _TestStats:
    """What one test's compiled run produced."""

    def __init__(self, counters: dict, breaks: list[str], recompiles: list[str]):
        self.graphs = counters.get("graphs", 0)
        self.graph_breaks = counters.get("graph_breaks", 0)
        self.recompiles = counters.get("recompiles", 0)
        self.eager_fallbacks = counters.get("eager_fallbacks", 0)
        self.break_reasons = breaks
        self.recompile_reasons = recompiles


class Mismatch(AssertionError):
    """A test whose compiled run returned (or asserted on) something other than its eager run."""


class DynamoRunner:
    """The plugin object registered when ``--dynamo`` (or a dynamo option) is given."""

    def __init__(self, backend: str, compare: bool, nopython: bool, rtol: float, atol: float):
        self.backend_name = backend
        self.compare = compare
        self.nopython = nopython
        self.rtol = rtol
        self.atol = atol
        self.stats: dict[str, _TestStats] = {}
        self.opted_out: dict[str, str] = {}
        self.mismatches: dict[str, str] = {}
        self.not_compared: dict[str, str] = {}
        self._orig_assert_close = None

    # --- set-up -----------------------------------------------------------------------------
    def pytest_configure(self, config):
        import torch  # noqa: F401  (fail early and clearly when torch is missing)

        from dynamo.eval_frame import skip_folders

        # The test runner's own code (assertion rewriting helpers, pluggy) is not the user's.
        folders = []
        for mod in ("_pytest", "pytest", "pluggy", "iniconfig"):
            try:
                m = __import__(mod)
                folders.append(os.path.dirname(os.path.abspath(m.__file__)))
            except ImportError:
                pass
        skip_folders(*folders)
        # The backend name is looked up at each test (a conftest may register it).
        if self.compare:
            self._install_recorder()

    def pytest_unconfigure(self, config):
        global _ORIG_ASSERT_CLOSE
        if self._orig_assert_close is not None:
            import torch

            torch.testing.assert_close = self._orig_assert_close
            self._orig_assert_close = _ORIG_ASSERT_CLOSE = None

    def _install_recorder(self):
        """Replaces ``torch.testing.assert_close`` (before test modules import it) with
        ``_recording_assert_close``, so that both runs record what each call compared."""
        import torch

        global _ORIG_ASSERT_CLOSE
        if _ORIG_ASSERT_CLOSE is None:
            _ORIG_ASSERT_CLOSE = torch.testing.assert_close
            torch.testing.assert_close = _recording_assert_close
            self._orig_assert_close = _ORIG_ASSERT_CLOSE

    # --- running a test ---------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        __tracebackhide__ = True
        import dynamo

        fn = pyfuncitem.obj
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            return None  # pytest's own hook reports async tests
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        nodeid = pyfuncitem.nodeid
        marker = pyfuncitem.get_closest_marker(_SKIP_MARKER)
        if marker is not None or getattr(fn, "_dynamo_disable", False):
            reason = (marker.kwargs.get("reason") or (marker.args[0] if marker.args else None)) if marker is not None else getattr(fn, "_dynamo_disable_msg", None)
            self.opted_out[nodeid] = f"{'dynamo_skip' if marker is not None else 'dynamo.disable'}" + (f": {reason}" if reason else "")
            fn(**args)
            return True

        eager = None
        if self.compare:
            if any(isinstance(v, DynamoCounters) for v in args.values()):
                self.not_compared[nodeid] = "reads dynamo_counters"
            else:
                eager = self._run_eager(fn, args)

        dynamo.reset()
        for v in args.values():
            if isinstance(v, DynamoCounters):
                v.rebase()
        global _RECORDS
        if eager is not None:
            _set_rng(eager["rng"])
            _RECORDS = []
        ctx = dynamo.optimize(self.backend_name, nopython=self.nopython)
        result = None
        try:
            with ctx:
                result = fn(**args)
        except Exception as e:
            if eager is not None and eager["error"] is None:
                # Listed in the summary; the test fails with its own exception and traceback.
                self.mismatches[nodeid] = f"{nodeid}: eager run passed, compiled run ({self.backend_name}) raised {type(e).__name__}: {_one_line(str(e), 200)}"
            raise
        finally:
            from dynamo import _C

            self.stats[nodeid] = _TestStats(dynamo.counters(), list(_C.break_reasons()), list(_C.recompile_reasons()))
            records, _RECORDS = _RECORDS, None
        if eager is not None:
            self._check(nodeid, eager, result, records)
        return True

    def _run_eager(self, fn, args) -> dict:
        """Runs ``fn`` eagerly on copies of its tensor/module arguments; returns its result (or the
        exception it raised), the recorded assert_close arguments and the RNG state it started
        from."""
        import dynamo

        global _RECORDS
        rng = _get_rng()
        copies = {k: _copy_arg(v) for k, v in args.items()}
        _RECORDS = []
        out = {"rng": rng, "result": None, "error": None}
        try:
            with dynamo.disable():
                out["result"] = _snapshot(fn(**copies))
        except Exception as e:  # the compiled run is the test's verdict; eager's only compared
            out["error"] = e
        out["records"], _RECORDS = _RECORDS, None
        return out

    def _check(self, nodeid, eager, result, records):
        __tracebackhide__ = True
        if eager["error"] is not None:
            msg = f"{nodeid}: eager run raised {type(eager['error']).__name__}: {eager['error']}, compiled run passed"
        else:
            diff = _diff(eager["result"], _snapshot(result), "return value", self.rtol, self.atol)
            if diff is None:
                if len(eager["records"]) != len(records):
                    diff = f"assert_close called {len(eager['records'])} times eagerly, {len(records)} times compiled"
                else:
                    for i, ((ea, ee), (ca, ce)) in enumerate(zip(eager["records"], records)):
                        diff = _diff(ea, ca, f"assert_close #{i + 1} actual", self.rtol, self.atol) or _diff(
                            ee, ce, f"assert_close #{i + 1} expected", self.rtol, self.atol)
                        if diff is not None:
                            break
            if diff is None:
                return
            msg = f"{nodeid}: compiled result differs from eager ({self.backend_name}): {diff}"
        self.mismatches[nodeid] = msg
        raise Mismatch(f"dynamo-compare mismatch in {msg}")

    # --- reporting --------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        mode = self.backend_name + (", compare" if self.compare else "") + (", nopython" if self.nopython else "")
        tr.write_sep("=", f"dynamo summary ({mode})")
        tot = [0, 0, 0]
        for nodeid, s in self.stats.items():
            tot[0] += s.graphs
            tot[1] += s.graph_breaks
            tot[2] += s.recompiles
            tr.write_line(f"{nodeid}: graphs={s.graphs} graph_breaks={s.graph_breaks} recompiles={s.recompiles}"
                          + (f" eager_fallbacks={s.eager_fallbacks}" if s.eager_fallbacks else ""))
            for r in s.break_reasons:
                tr.write_line(f"    graph break: {_one_line(r)}")
            for r in s.recompile_reasons:
                tr.write_line("    recompile: " + r.splitlines()[0])
        tr.write_line(f"total: {len(self.stats)} tests compiled, graphs={tot[0]} graph_breaks={tot[1]} recompiles={tot[2]}")
        nothing = [n for n, s in self.stats.items() if s.graphs == 0]
        if nothing:
            tr.write_line(f"captured nothing ({len(nothing)}):")
            for n in nothing:
                tr.write_line(f"    {n}")
        if self.opted_out:
            tr.write_line(f"opted out ({len(self.opted_out)}):")
            for n, why in self.opted_out.items():
                tr.write_line(f"    {n} ({why})")
        if self.not_compared:
            tr.write_line(f"not compared ({len(self.not_compared)}):")
            for n, why in self.not_compared.items():
                tr.write_line(f"    {n} ({why})")
        if self.compare:
            tr.write_line(f"compare mismatches ({len(self.mismatches)}):")
            for n, msg in self.mismatches.items():
                tr.write_line(f"    MISMATCH {msg}")


# --- helpers ----------------------------------------------------------------------------------
_ORIG_ASSERT_CLOSE = None  # torch.testing.assert_close while the recorder replaces it
_RECORDS: list | None = None  # (actual, expected) of each assert_close call of the run in progress


def _recording_assert_close(actual, expected, *args, **kwargs):
    """``torch.testing.assert_close`` that first records detached copies of what it compares
    (``--dynamo-compare``). A plain module-level function: in a compiled test the call is a
    graph break like the original's, and runs as ordinary Python."""
    if _RECORDS is not None:
        _RECORDS.append((_snapshot(actual), _snapshot(expected)))
    return _ORIG_ASSERT_CLOSE(actual, expected, *args, **kwargs)


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` with its whitespace runs collapsed, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _copy_arg(v):
    """A deep copy of tensors, modules, optimizers and plain containers of them; anything else
    (tmp_path, monkeypatch, ...) is shared by both runs."""
    import torch

    if isinstance(v, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
        return copy.deepcopy(v)
    if isinstance(v, (list, tuple, dict)):
        try:
            return copy.deepcopy(v)
        except Exception:
            return v
    return v


def _snapshot(v):
    """Detached clones of the tensors in ``v`` (nested lists, tuples, dicts): later in-place
    updates of the test's tensors do not change what was recorded."""
    import torch

    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if isinstance(v, (list, tuple)) and type(v) in (list, tuple):
        return type(v)(_snapshot(x) for x in v)
    if isinstance(v, dict) and type(v) is dict:
        return {k: _snapshot(x) for k, x in v.items()}
    return v


def _diff(eager, compiled, where: str, rtol: float, atol: float) -> str | None:
    """The first difference between an eager and a compiled value (None when equal): tensors
    within rtol/atol (same shape and dtype, NaNs equal), floats likewise, containers item by
    item, other values by ``==`` when their type defines it (objects compared by identity are
    only checked for their type)."""
    import torch

    if isinstance(eager, torch.Tensor) or isinstance(compiled, torch.Tensor):
        if not (isinstance(eager, torch.Tensor) and isinstance(compiled, torch.Tensor)):
            return f"{where}: {type(eager).__name__} eagerly, {type(compiled).__name__} compiled"
        if eager.shape != compiled.shape or eager.dtype != compiled.dtype:
            return f"{where}: eager {tuple(eager.shape)} {eager.dtype}, compiled {tuple(compiled.shape)} {compiled.dtype}"
        try:
            # (Outside a test's run the recorder, if installed, records nothing.)
            torch.testing.assert_close(compiled, eager, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            return f"{where}: " + " ".join(str(e).split())
        return None
    if type(eager) is not type(compiled):
        return f"{where}: {type(eager).__name__} eagerly, {type(compiled).__name__} compiled"
    if isinstance(eager, float):
        if math.isclose(eager, compiled, rel_tol=rtol, abs_tol=atol) or (math.isnan(eager) and math.isnan(compiled)):
            return None
        return f"{where}: {eager!r} eagerly, {compiled!r} compiled"
    if isinstance(eager, (list, tuple)):
        if len(eager) != len(compiled):
            return f"{where}: length {len(eager)} eagerly, {len(compiled)} compiled"
        for i, (a, b) in enumerate(zip(eager, compiled)):
            d = _diff(a, b, f"{where}[{i}]", rtol, atol)
            if d is not None:
                return d
        return None
    if isinstance(eager, dict):
        if list(eager) != list(compiled):
            return f"{where}: keys {list(eager)} eagerly, {list(compiled)} compiled"
        for k in eager:
            d = _diff(eager[k], compiled[k], f"{where}[{k!r}]", rtol, atol)
            if d is not None:
                return d
        return None
    if type(eager).__eq__ is object.__eq__:
        return None
    try:
        same = bool(eager == compiled)
    except Exception:
        return None
    return None if same else f"{where}: {eager!r} eagerly, {compiled!r} compiled"


def _get_rng():
    import torch

    state = {"torch": torch.get_rng_state(), "random": random.getstate()}
    np = _numpy()
    if np is not None:
        state["numpy"] = np.random.get_state()
    return state


def _set_rng(state) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    np = _numpy()
    if np is not None and "numpy" in state:
        np.random.set_state(state["numpy"])


def _numpy():
    import sys

    return sys.modules.get("numpy")
