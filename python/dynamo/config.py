"""``dynamo.config``: runtime settings (read and written like torch._dynamo.config).

- ``cache_size_limit`` (int, default 8): compiled versions kept per code object for the same
  identity-guarded arguments (a module's ``self``: each instance has its own 8, as torch counts);
  past it the call runs eagerly and one warning names the failing guard.
- ``accumulated_cache_size_limit`` (int, default 256): compiled versions kept per code object in
  all; past it the code runs eagerly from then on.
- ``suppress_errors`` (bool, default True): a compiler or backend failure runs the frame eagerly
  with the error logged (``DYNAMO_LOGS=graph_breaks``); False lets the error reach the caller.
- ``aot_partitioner`` (str, default ``"min_cut"``): how AOTAutograd's partitioner chooses the
  tensors the forward saves for the backward. ``"min_cut"``: a minimum cut (in bytes) over the
  joint graph; cheap pointwise ops and views are recomputed in the backward, matmul, conv,
  reduction and random-op outputs never are (src/autograd/partition.rs, Note [min-cut]).
  ``"save_all"``: save every intermediate the backward reads (for comparison).
- ``aot_eager_without_kernels`` (bool, default True): a differentiated graph whose forward
  inductor compiles to no kernel of ours (only ATen fallbacks, e.g. one ``nn.Linear``) runs
  through torch's autograd instead of an ``autograd.Function`` (aot.py, Note [forward without
  kernels]); False keeps the compiled forward and backward graphs.
- ``automatic_dynamic_shapes`` (bool, default True): a tensor dimension whose size changed
  between two compiles of a frame becomes symbolic on the recompile, so one graph serves every
  size (torch's automatic dynamic shapes; see ``dynamo.mark_dynamic`` and
  ``optimize(dynamic=...)``). False: every size is specialized.
- ``automatic_dynamic_whole_tensor`` (bool, default True): when automatic dynamic makes a
  tensor input of one or two dimensions symbolic (token ids, masks), every dimension of it
  becomes symbolic (sizes 0 and 1 still specialize), so (batch, length) inputs that vary in
  both compile twice in all. Larger tensors (an image batch) get only the dimensions that
  changed: symbolic channels and spatial sizes made the ShapeEnv's work on window-partition
  reshapes take minutes. False: only the dimensions that changed for every tensor, as torch
  does. Kernels are specialized per concrete shape either way.
- ``dynamic_compile_budget_s`` (float, default 30): seconds a compile with symbolic sizes may
  take; past it the frame is compiled again with static sizes (one compile per size, logged
  under ``DYNAMO_LOGS=recompiles``). The ShapeEnv's proofs about some reshapes of symbolic
  spatial sizes (Swin's window partition) take many minutes.
- ``assume_static_by_default`` (bool, default True): False makes every dimension of every
  tensor input symbolic from the first compile (as ``optimize(dynamic=True)``).
"""

from __future__ import annotations

import sys as _sys
import types as _types

from . import _C


_SETTINGS = (
    "cache_size_limit",
    "accumulated_cache_size_limit",
    "suppress_errors",
    "aot_partitioner",
    "aot_eager_without_kernels",
    "automatic_dynamic_shapes",
    "assume_static_by_default",
    "automatic_dynamic_whole_tensor",
    "dynamic_compile_budget_s",
)
_PARTITIONERS = ("min_cut", "save_all")


class _Config(_types.ModuleType):
    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in _SETTINGS:
            raise AttributeError(f"dynamo.config has no setting {name!r}; settings: {', '.join(_SETTINGS)}")
        if name == "aot_partitioner" and value not in _PARTITIONERS:
            raise ValueError(f"aot_partitioner must be one of {_PARTITIONERS}, got {value!r}")
        super().__setattr__(name, value)

    def __dir__(self):
        return list(_SETTINGS)

    @property
    def cache_size_limit(self) -> int:
        return _C.cache_size_limit()

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"cache_size_limit must be a non-negative int, got {value!r}")
        _C.cache_size_limit(value)

    @property
    def accumulated_cache_size_limit(self) -> int:
        return _C.accumulated_cache_size_limit()

    @accumulated_cache_size_limit.setter
    def accumulated_cache_size_limit(self, value: int) -> None:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"accumulated_cache_size_limit must be a non-negative int, got {value!r}")
        _C.accumulated_cache_size_limit(value)

    @property
    def suppress_errors(self) -> bool:
        return _C.suppress_errors()

    @suppress_errors.setter
    def suppress_errors(self, value: bool) -> None:
        _C.suppress_errors(bool(value))


    # The two dynamic-shape switches are independent settings, as torch's are; the Rust side
    # holds what they give together (0 static, 1 automatic, 2 every dimension symbolic from the
    # first compile): 2 while ``assume_static_by_default`` is False whatever
    # ``automatic_dynamic_shapes`` says, else 1 or 0 by ``automatic_dynamic_shapes``. (They were
    # one value: setting ``assume_static_by_default = True`` turned automatic dynamic shapes
    # back on.)
    @property
    def automatic_dynamic_shapes(self) -> bool:
        return self._automatic_dynamic

    @automatic_dynamic_shapes.setter
    def automatic_dynamic_shapes(self, value: bool) -> None:
        super().__setattr__("_automatic_dynamic", bool(value))
        self._apply_dynamic()

    @property
    def assume_static_by_default(self) -> bool:
        return self._assume_static

    @assume_static_by_default.setter
    def assume_static_by_default(self, value: bool) -> None:
        super().__setattr__("_assume_static", bool(value))
        self._apply_dynamic()

    def _apply_dynamic(self) -> None:
        _C.dynamic_shapes(2 if not self._assume_static else 1 if self._automatic_dynamic else 0)

    @property
    def automatic_dynamic_whole_tensor(self) -> bool:
        return _C.automatic_dynamic_whole_tensor()

    @automatic_dynamic_whole_tensor.setter
    def automatic_dynamic_whole_tensor(self, value: bool) -> None:
        _C.automatic_dynamic_whole_tensor(bool(value))

    @property
    def dynamic_compile_budget_s(self) -> float:
        return _C.dynamic_compile_budget_s()

    @dynamic_compile_budget_s.setter
    def dynamic_compile_budget_s(self, value: float) -> None:
        _C.dynamic_compile_budget_s(float(value))


aot_partitioner = "min_cut"
aot_eager_without_kernels = True
_automatic_dynamic = _C.dynamic_shapes() != 0
_assume_static = _C.dynamic_shapes() != 2

_sys.modules[__name__].__class__ = _Config
