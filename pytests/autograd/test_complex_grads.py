"""Derivative rules on complex tensors follow derivatives.yaml."""

import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_abs_of_a_complex_tensor_differentiates_with_sgn(backend):
    """abs' derivative is grad * self.sgn() (derivatives.yaml); torch.sign raises on complex
    tensors, so an STFT-magnitude loss crashed in backward."""

    def loss(x):
        z = torch.fft.rfft(x * 2.0)
        return z.abs().pow(2).sum() + (x.abs() * 0.5).sum()

    def grad(f):
        x = torch.linspace(-1.0, 1.0, 16, requires_grad=True)
        f(x).backward()
        return x.grad

    dynamo.reset()
    torch.testing.assert_close(grad(dynamo.optimize(backend)(loss)), grad(loss))


COMPLEX_LOSSES = {
    # a complex input: eager's formulas conjugate (mul: grad * other.conj()).
    "mul": lambda a, b: (a * b).abs().sum(),
    "div": lambda a, b: (b / a).abs().sum(),
    "matmul": lambda a, b: (a[None] @ b[:, None]).abs().sum(),
    "sum_then_mul": lambda a, b: (a.sum() * b).abs().sum(),
    "exp": lambda a, b: (a.exp() * b).real.sum(),
    "view_as_real": lambda a, b: torch.view_as_real(a * b).pow(2).sum(),
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(COMPLEX_LOSSES))
def test_complex_inputs_get_eagers_conjugated_gradients(backend, name):
    """Note [complex gradients] (src/autograd/joint.rs): the rules do not conjugate, so
    `(a * b).abs().sum()` gave a complex gradient that was silently wrong; a graph with a complex
    value that requires grad now differentiates through torch's autograd."""
    f = COMPLEX_LOSSES[name]

    def grad(fn):
        torch.manual_seed(0)
        a = torch.randn(4, dtype=torch.complex64, requires_grad=True)
        b = torch.randn(4, dtype=torch.complex64)
        fn(a, b).backward()
        return a.grad

    dynamo.reset()
    torch.testing.assert_close(grad(dynamo.optimize(backend)(f)), grad(f))
    assert dynamo.counters()["compiles"] == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_real_input_times_complex_takes_the_real_part(backend):
    """A real parameter multiplied by a complex tensor gets the real part of its complex
    gradient, as eager's `handle_r_to_c` does; the backward raised "Expected
    isFloatingType(grad.scalar_type()) || (input_is_complex == grad_is_complex)"."""

    def loss(w, z):
        return ((w * z).abs() ** 2).sum() + (w.sin() * z).real.sum()

    def grad(fn):
        torch.manual_seed(0)
        w = torch.randn(8, requires_grad=True)
        z = torch.randn(8, dtype=torch.complex64)
        fn(w, z).backward()
        return w.grad

    dynamo.reset()
    torch.testing.assert_close(grad(dynamo.optimize(backend)(loss)), grad(loss))
