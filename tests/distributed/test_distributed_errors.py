"""Clear errors of thunder.distributed that need no process group."""

from __future__ import annotations

import pytest
import torch

from thunder.distributed.ddp import parameter_gradients
from thunder.errors import JitError
from thunder_ir import Trace, prims, tracectx


def test_a_program_without_a_backward_trace_is_refused() -> None:
    # torch.autograd differentiates programs that write where only it can: their backward
    # trace returns no gradients, so no communication can be placed in it.
    backward = Trace("computation_backward")
    with tracectx(backward):
        prims.python_return(None)
    with pytest.raises(JitError, match="no backward trace"):
        parameter_gradients(backward, [torch.zeros(2)], set(), "ddp")


def test_preparing_without_a_process_group_is_an_error() -> None:
    import thunder.distributed

    with pytest.raises(JitError, match="init_process_group"):
        thunder.distributed.ddp(torch.nn.Linear(2, 2))
    with pytest.raises(JitError, match="init_process_group"):
        thunder.distributed.fsdp(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="sharding_strategy"):
        thunder.distributed.fsdp(torch.nn.Linear(2, 2), sharding_strategy="ZERO9")
    with pytest.raises(ValueError, match="unknown distributed strategy"):
        thunder.recipes.HFTransformers(distributed="tp")
