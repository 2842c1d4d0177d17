"""Python kinds the trace left to graph breaks, round s35: each program runs eagerly and
compiled on copies of the same inputs and is compared exactly (values and their types, mutated
arguments, printed text, exceptions), with a graph count showing it was captured."""

import pytest
import torch

import dynamo

from test_python_kinds import check, no_fallback

BACKENDS = ["eager", "inductor"]


# ----- enum members of torch's own modules ----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_enum_member_read_unguarded(backend):
    """`nn.utils.parametrizations.orthogonal` compares `self.orthogonal_map` with members of
    `_OrthMaps`, an Enum of a torch module read as an unguarded global (Note [enum members of
    trusted modules]). It was GB0020 untracked_type and the forward ran eagerly."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    torch.nn.utils.parametrizations.orthogonal(lin)

    def fn(x):
        return lin(x).sum(1)

    check(fn, torch.randn(2, 4), graphs=1, breaks=0, backend=backend)
    no_fallback()
