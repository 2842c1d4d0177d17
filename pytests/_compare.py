"""Exact comparison of eager and compiled results for the audit-findings tests."""

import torch


def same(a, b):
    """Whether `b` equals `a` exactly as eager made it: the same type at every level (tuple,
    list, dict with its key order), and tensors of the same type, dtype and shape whose values
    agree within float tolerance (NaNs equal)."""
    if isinstance(a, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
