"""Queries folded into constants are guarded on their answers: tensor queries TENSOR_MATCH does
not pin (Note [tensor queries] in src/symbolic/variables/tensor.rs) and torch functions reading
mutable global state (Note [global state queries] in src/symbolic/output_graph.rs). A later call
with another answer recompiles instead of reusing the first call's constant."""

import pytest
import torch

import dynamo


def with_hook(t):
    t.register_hook(lambda g: g)
    return t


def retained(t):
    t.retain_grad()
    return t


def inference_tensor():
    with torch.inference_mode():
        return torch.ones(3)


TENSOR_CASES = {
    "storage_offset": (lambda x: x.storage_offset() == 0, lambda: torch.arange(12.0)[:6], lambda: torch.arange(12.0)[6:]),
    "is_leaf": (lambda x: x.is_leaf, lambda: torch.ones(3, requires_grad=True), lambda: torch.ones(3, requires_grad=True) * 2),
    "_is_view": (lambda x: x._is_view(), lambda: torch.ones(3), lambda: torch.ones(6)[:3]),
    "is_conj": (lambda x: x.is_conj(), lambda: torch.ones(3, dtype=torch.complex64), lambda: torch.ones(3, dtype=torch.complex64).conj()),
    "is_shared": (lambda x: x.is_shared(), lambda: torch.ones(3), lambda: torch.ones(3).share_memory_()),
    "retains_grad": (lambda x: x.retains_grad, lambda: torch.ones(3, requires_grad=True) * 1, lambda: retained(torch.ones(3, requires_grad=True) * 1)),
    "_backward_hooks": (lambda x: x._backward_hooks is None, lambda: torch.ones(3, requires_grad=True), lambda: with_hook(torch.ones(3, requires_grad=True))),
    "is_inference": (lambda x: x.is_inference(), lambda: torch.ones(3), inference_tensor),
}


@pytest.mark.parametrize("name", sorted(TENSOR_CASES))
def test_tensor_query_is_guarded(name):
    query, first, second = TENSOR_CASES[name]

    def fn(x):
        if query(x):
            return x * 2
        return x * 3

    assert query(first()) != query(second())  # the two inputs really differ in this query
    cf = dynamo.optimize("eager")(fn)
    for make in (first, second, first):
        x = make()
        torch.testing.assert_close(cf(x).detach(), fn(x).detach())
    assert dynamo.counters()["compile_errors"] == 0


def test_as_strided_at_storage_offset_of_a_view():
    def sliding_pairs(x):
        return x.as_strided((x.shape[0] - 1, 2), (1, 1), x.storage_offset())

    cf = dynamo.optimize("eager")(sliding_pairs)
    base = torch.arange(12.0)
    for v in (base[:6], base[6:], base[:6]):
        assert torch.equal(cf(v), sliding_pairs(v))
    c = dynamo.counters()
    assert c["graphs"] == 2 and c["recompiles"] == 1 and c["graph_breaks"] == 0


def test_storage_offset_of_a_view_computed_in_the_graph_guards_the_input():
    def f(x):
        return x * 2, x[1:].storage_offset()

    cf = dynamo.optimize("eager")(f)
    base = torch.arange(12.0)
    assert [cf(v)[1] for v in (base[:6], base[6:])] == [f(base[:6])[1], f(base[6:])[1]] == [1, 7]


def test_is_set_to_runs_eagerly():
    def f(a, b):
        return a + 1 if a.is_set_to(b) else a - 1

    cf = dynamo.optimize("eager")(f)
    base = torch.zeros(4)
    a, b = base[:2], base[:2]  # two tensor objects over the same storage, offset, sizes, strides
    assert torch.equal(cf(a, b), f(a, b)) and f(a, b)[0].item() == 1.0
    c, d = torch.zeros(2), torch.zeros(2)
    assert torch.equal(cf(c, d), f(c, d)) and f(c, d)[0].item() == -1.0


def test_same_answer_hits_the_cache():
    def f(x):
        return x * 2 if x.is_leaf else x * 3

    cf = dynamo.optimize("eager")(f)
    for _ in range(3):
        cf(torch.ones(3))
    c = dynamo.counters()
    assert c["graphs"] == 1 and c["recompiles"] == 0 and c["cache_hits"] >= 2


NT = torch.get_num_threads()
GLOBAL_CASES = {
    "is_autocast_enabled": (lambda: torch.is_autocast_enabled("cpu"), lambda v: torch.set_autocast_enabled("cpu", v)),
    "are_deterministic_algorithms_enabled": (torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
    "get_num_threads": (lambda: torch.get_num_threads() == NT, lambda v: torch.set_num_threads((max(1, NT - 1) if NT > 1 else 2) if v else NT)),
    "get_float32_matmul_precision": (lambda: torch.get_float32_matmul_precision() == "highest", lambda v: torch.set_float32_matmul_precision("high" if v else "highest")),
    "is_anomaly_enabled": (torch.is_anomaly_enabled, torch.autograd.set_detect_anomaly),
}


@pytest.mark.parametrize("name", sorted(GLOBAL_CASES))
def test_global_state_query_is_guarded(name):
    query, set_on = GLOBAL_CASES[name]

    def fn(x):
        if query():
            return x * 2
        return x * 3

    cf = dynamo.optimize("eager")(fn)
    x = torch.ones(2)
    cf(x)
    set_on(True)
    try:
        assert torch.equal(cf(x), fn(x))
    finally:
        set_on(False)
    assert torch.equal(cf(x), fn(x))
    c = dynamo.counters()
    assert c["graphs"] == 2 and c["recompiles"] == 1 and c["graph_breaks"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_inference_mode_is_guarded_apart_from_no_grad(backend):
    """A graph compiled under no_grad (where `enable_grad()` records) must not be reused under
    inference_mode (where nothing records)."""
    lin = torch.nn.Linear(4, 4)

    def f(x):
        with torch.enable_grad():
            return lin(x)

    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert g(x).requires_grad
    with torch.inference_mode():
        want = f(x)
        got = g(x)
    assert (got.requires_grad, got.grad_fn is None) == (want.requires_grad, want.grad_fn is None)
    assert torch.equal(got, want)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_default_device_is_guarded_when_the_frame_makes_tensors(backend):
    def f():
        t = torch.ones(2) * 3
        return t, t.device.type, t.is_meta

    dynamo.reset()
    g = dynamo.optimize(backend)(f)
    assert g()[1:] == ("cpu", False)
    with torch.device("meta"):
        t, kind, meta = g()
    assert (t.device.type, kind, meta) == ("meta", "meta", True)
    assert g()[1:] == ("cpu", False)
