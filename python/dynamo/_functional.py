"""Out-of-place forms of in-place tensor ops that have no functional twin in the lowering table.

Note [in-place ops on a copy] (src/inductor/fx_import.rs, ``functional_form``): the importer
functionalizes ``x.op_(...)`` into ``op(x, ...)`` when ``op`` is a pointwise op it lowers. For
the others (``bernoulli_``, ``uniform_``, ``fill_``, ``index_add_``, ``scatter_``, ``x[i] = v``
...) it rewrites the node into a call of one of these functions: the in-place op runs, with
torch's own kernel, argument checks and random number draws, on a copy of ``x``, and the copy is
the new value of ``x`` for later readers (src/inductor/functionalize.rs renames them). Eager's
values are kept exactly; the cost is one copy of ``x``. The graph node's meta is ``x``'s.
"""

from __future__ import annotations

import torch


def method_on_copy(self: torch.Tensor, method: str, *args, **kwargs) -> torch.Tensor:
    """``self.clone()`` with the in-place method ``method`` (a ``str`` such as ``"bernoulli_"``)
    applied to it with ``args``/``kwargs``; ``self`` is not written. Same shape, dtype and
    strides as ``self``; raises what ``self.<method>(...)`` raises."""
    out = self.clone()
    getattr(out, method)(*args, **kwargs)
    return out


def setitem_on_copy(self: torch.Tensor, index, value) -> torch.Tensor:
    """``self.clone()`` with ``out[index] = value`` applied (``operator.setitem`` semantics:
    basic and advanced indexing, broadcasting ``value``); ``self`` is not written. Raises what
    ``self[index] = value`` raises (``IndexError``, shape mismatch ``RuntimeError``)."""
    out = self.clone()
    out[index] = value
    return out


def dropout_noise(x: torch.Tensor, p: float) -> torch.Tensor:
    """The scaled keep-mask that training-mode ``F.dropout(x, p)`` multiplies ``x`` by (Note
    [dropout as a product] in src/inductor/fx_import.rs), drawn as eager draws it: on CPU
    ``empty_like(x).bernoulli_(1 - p).div_(1 - p)`` (ATen's ``_dropout_impl``), on CUDA the mask
    of ``torch.native_dropout`` (the fused kernel eager uses there) times ``1 / (1 - p)``. Same
    shape, dtype and strides as ``x``; ``0 < p < 1``."""
    if x.is_cuda:
        _, mask = torch.native_dropout(x, p, True)
        return mask.to(x.dtype) * (1.0 / (1.0 - p))
    return torch.empty_like(x).bernoulli_(1 - p).div_(1 - p)
