"""Python-kind faults a report-only tester found this stop, each as its smallest program,
compared with eager (values, exact types, identity, exceptions):

- `y is x` where `y` is a conversion that returns its input in eager (`x.contiguous()`,
  `x.float()`, `x.to(x.dtype)`, `x.cpu()`, `torch.as_tensor(x)`, `F.relu(x, inplace=True)`) was
  False: a new graph value (Note [conversions that return their
  input] in `src/symbolic/output_graph.rs`). A copy-if-aliased idiom then wrote into the
  caller's tensor.
- `tuple(t) is t` for a constant tuple was False (`PySequence_Tuple` returns an exact tuple).
- `hasattr([], '__name__')`, `hasattr({}, '__dict__')` and the other attributes a type has as
  an instance of `type` were True, and `getattr(lst, '__dict__', None)` raised; an instance
  sees its type's MRO only.
- `x.__module__` and `x.__doc__` of a tensor were the fake tensor's class's.
- Functions made in the frame lost their annotations (`functools.singledispatch`'s
  `register` then raised TypeError)."""

import functools
import inspect
import typing

import pytest
import torch
import torch.nn.functional as F

import dynamo

BACKENDS = ["eager", "aot_eager", "inductor"]

CONVERSIONS = {
    "contiguous": lambda x: x.contiguous(),
    "to_own_dtype": lambda x: x.to(x.dtype),
    "float": lambda x: x.float(),
    "cpu": lambda x: x.cpu(),
    "to_cpu": lambda x: x.to("cpu"),
    "to_own_device": lambda x: x.to(x.device),
    "type_as": lambda x: x.type_as(x),
    "as_tensor": lambda x: torch.as_tensor(x),
    "asarray": lambda x: torch.asarray(x),
    "Tensor_contiguous": lambda x: torch.Tensor.contiguous(x),
    "relu_inplace": lambda x: F.relu(x, inplace=True),
    "dropout_eval": lambda x: F.dropout(x, training=False),
    # These make a new tensor in eager: they must stay distinct.
    "to_copy": lambda x: x.to(x.dtype, copy=True),
    "double": lambda x: x.double(),
    "view_as": lambda x: x.view_as(x),
    "ellipsis": lambda x: x[...],
    "detach": lambda x: x.detach(),
    "clone": lambda x: x.clone(),
    "contiguous_channels_last": lambda x: x.contiguous(memory_format=torch.channels_last),
}


def _inputs():
    return [torch.randn(2, 3), torch.randn(3, 2).t(), torch.randn(1, 3, 2, 2), torch.randn(4, dtype=torch.float64)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_identity_of_conversions(backend, name):
    conv = CONVERSIONS[name]

    def f(x):
        y = conv(x)
        return y is x, y * 2

    for x in _inputs():
        try:
            want = f(x.clone())
        except RuntimeError:
            continue  # channels_last of a 2-d tensor
        dynamo.reset()
        got = dynamo.optimize(backend)(f)(x.clone())
        assert got[0] == want[0]
        assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_if_aliased_idiom_leaves_the_argument_alone(backend):
    def normalize(x):
        y = x.float()
        if y is x:
            y = y.clone()
        y -= y.mean()
        return y

    a = torch.tensor([1.0, 2.0, 3.0])
    opt = dynamo.optimize(backend)(normalize)
    r = opt(a)
    assert a.tolist() == [1.0, 2.0, 3.0]
    assert r.tolist() == [-1.0, 0.0, 1.0]
    b = torch.tensor([1, 2, 3])  # an int tensor: .float() copies, the branch is not taken
    assert opt(b).tolist() == [-1.0, 0.0, 1.0] and b.tolist() == [1, 2, 3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversion_of_parameters_and_buffers(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.register_buffer("buf", torch.ones(2))

        def forward(self, x):
            return self.lin(x), self.lin.weight.to(torch.float32) is self.lin.weight, self.buf.float() is self.buf, self.buf.contiguous() is self.buf

    m = M()
    x = torch.randn(3, 2)
    want = m(x)
    got = dynamo.optimize(backend)(m)(x)
    assert got[1:] == want[1:] == (True, True, True)
    assert torch.allclose(got[0], want[0])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_tuple_of_a_tuple_is_the_tuple(backend):
    def f(x, t):
        u = tuple([1, 2])
        return x + 1, tuple(t) is t, tuple(u) is u, tuple(t)

    for t in [(1, 2), ("a",), (3,), (1.5, "s")]:
        want = f(torch.ones(1), t)
        got = dynamo.optimize(backend)(f)(torch.ones(1), t)
        assert got[1:3] == want[1:3] == (True, True)
        assert got[3] is t


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_attributes_of_the_type_are_not_the_instances(backend):
    def f(x, lst, d):
        s = set()
        names = ["__dict__", "__name__", "__module__", "__qualname__", "__call__", "__mro__", "__bases__", "append", "__len__", "keys"]
        has = [(hasattr(lst, n), hasattr(d, n), hasattr(s, n), hasattr([], n), hasattr((1,), n)) for n in names]
        return x + 1, has, getattr(lst, "__dict__", None), getattr(d, "__name__", "none"), getattr(s, "__dict__", 0)

    want = f(torch.ones(1), [1], {"a": 1})
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1), [1], {"a": 1})
    assert got[1:] == want[1:]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_tensor_module_and_doc_are_the_real_classes(backend):
    def f(x, p):
        return x + 1, x.__module__, x.__doc__ == torch.Tensor.__doc__, p.__module__, p.__doc__ == torch.nn.Parameter.__doc__, hasattr(x, "fake_mode")

    p = torch.nn.Parameter(torch.ones(2))
    want = f(torch.ones(2), p)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(2), p)
    assert got[1:] == want[1:] == ("torch", True, "torch.nn.parameter", True, False)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_functions_made_in_the_frame_keep_their_annotations(backend):
    def f(x, n):
        def g(a: int, *, b: "str" = "q") -> str:
            return str(a)

        @functools.singledispatch
        def h(a):
            return "base"

        @h.register
        def _(a: int):
            return "int"

        return x + 1, g.__annotations__, str(inspect.signature(g)), typing.get_type_hints(g), h(n), h("s"), g

    want = f(torch.ones(1), 2)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(torch.ones(1), 2)
    assert got[1:6] == want[1:6]
    assert got[6].__annotations__ == {"a": int, "b": "str", "return": str}


def _x_t_warning_locations(backend, script=None):
    """Runs, in a fresh process (so that the once-per-process warning has not fired yet), a
    compiled `x.T + 1` of a 1-d tensor twice under the "always" filter, from file `script`
    or with `python -c`; returns the (file name, line) pairs of its `x.T` warnings."""
    import subprocess
    import sys

    program = f"""
import warnings, torch, dynamo
def f(x):
    return x.T + 1
opt = dynamo.optimize({backend!r})(f)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    opt(torch.ones(3))
    opt(torch.ones(3))
print(sorted({{(w.filename.rsplit("/", 1)[-1], w.lineno) for w in caught if "x.T" in str(w.message)}}))
"""
    if script is None:
        cmd = [sys.executable, "-c", program]
    else:
        script.write_text(program)
        cmd = [sys.executable, str(script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout.strip()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_warning_of_a_tensor_attribute_is_at_the_users_line(backend, tmp_path):
    # `x.T` of a 1-d tensor warns (TORCH_WARN_ONCE) when it is first read: that read happens
    # while tracing, and its warning used to escape from there, attributed to the caller's line.
    assert _x_t_warning_locations(backend, tmp_path / "prog.py") == "[('prog.py', 4)]"


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_through_a_positional_flag_stays_a_write(backend):
    # `F.hardswish(x, True)` (how torchvision's `nn.Hardswish(inplace=True)` calls it) writes
    # into `x` and returns it: it must stay a node, not be taken for a conversion.
    def f(x):
        y = x * 2
        z = F.hardswish(y, True)
        w = F.relu6(y, True)
        return z is y, w is y, y + 1

    x = torch.randn(8)
    want = f(x)
    dynamo.reset()
    got = dynamo.optimize(backend)(f)(x)
    assert got[:2] == want[:2]
    assert torch.allclose(got[2], want[2])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_warning_of_code_without_a_file(backend):
    # Code run by `python -c` has no file: issuing a traced warning at its line asked its
    # loader for the source, which raised ImportError; the graph looked failed, the frame ran
    # again, and the warning (once per process) was lost.
    assert _x_t_warning_locations(backend) == "[('<string>', 4)]"
