"""Note [OrderedDict objects from outside the frame] (src/symbolic/variables/user_defined.rs):
writes to an OrderedDict passed in (a `state_dict()`, a config) are traced on its storage
tracker, which holds the items in linked-list order, and replayed through OrderedDict's own C
methods so the linked list stays right. Before, item assignment, `move_to_end` and `popitem`
were graph breaks, and an EMA loop over `sd.items()` writing `sd[k]` ran eagerly."""

import collections

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


class Sub(collections.OrderedDict):
    pass


class Logged(collections.OrderedDict):
    def __setitem__(self, k, v):
        self.log = getattr(self, "log", 0) + 1
        super().__setitem__(k, v)


def _check(fn, make, backend, breaks=0):
    a, b = make(), make()
    want = fn(torch.ones(2), a)
    dynamo.reset()
    got = dynamo.optimize(backend)(fn)(torch.ones(2), b)
    assert repr(got) == repr(want)
    assert type(b) is type(a)
    assert list(b.items()).__repr__() == list(a.items()).__repr__()
    assert list(reversed(b)) == list(reversed(a))
    assert vars(b) == vars(a)
    # The linked list and the storage agree: a fresh copy iterates the same.
    assert list(collections.OrderedDict(b)) == list(b)
    assert dynamo.counters()["graph_breaks"] == breaks


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [collections.OrderedDict, Sub])
def test_item_writes_and_order_methods(backend, cls):
    def f(x, od):
        od["c"] = 3
        od.move_to_end("a")
        od.move_to_end("c", last=False)
        first = od.popitem(last=False)
        last = od.popitem()
        od["d"] = 4
        del od["b"]
        od.setdefault("e", 5)
        od.update(f=6)
        return x + 1, first, last, list(od), od.pop("d")

    _check(f, lambda: cls(a=1, b=2, z=0), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_dict_ema_update(backend):
    def f(x, sd):
        for k, v in sd.items():
            sd[k] = v * 0.9 + x * 0.1
        return sd

    def make():
        return collections.OrderedDict(w=torch.arange(2.0), b=torch.ones(2))

    a, b = make(), make()
    want = f(torch.ones(2), a)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), b)
    assert got is b and list(b) == list(a) == ["w", "b"]
    for k in a:
        torch.testing.assert_close(b[k], a[k])
    assert dynamo.counters()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_clear_and_refill(backend):
    def f(x, od):
        od.clear()
        od["y"] = 1
        od["x"] = 2
        return x * 2, list(od.items()), len(od)

    _check(f, lambda: collections.OrderedDict(a=1), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subclass_setitem_override_runs(backend):
    def f(x, od):
        od["k"] = 1
        od["a"] = 5
        return x + 2

    _check(f, lambda: Logged(a=1), backend)
