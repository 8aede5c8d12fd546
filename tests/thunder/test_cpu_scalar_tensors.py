"""A zero-dimensional CPU tensor combines with tensors of another device, as in torch: the op runs
on the other device (``cuda_x * torch.tensor(3.0)``). Checked here on the meta device (results'
device, shape and dtype; tests/gpu checks values on CUDA); a CPU tensor of more dimensions stays
an error like torch's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")  # never an eager fallback

CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul": lambda x, s: x * s,
    "scalar_first": lambda x, s: s - x,
    "where": lambda x, s: torch.where(x > 0, x, s),
    "lerp": lambda x, s: torch.lerp(x, x * 2, s),  # a float weight for half inputs, too
    "addcmul": lambda x, s: torch.addcmul(x, x, s),
    "pow": lambda x, s: torch.pow(x, s),
    "maximum": lambda x, s: torch.maximum(x, s),
    "int_scalar_promotes": lambda x, s: x + s.long(),
    "twice": lambda x, s: (x + s) * s,
}


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_scalar_tensor_joins_the_other_device(name: str) -> None:
    fn = CASES[name]
    jfn = thunder.jit(fn)
    x = torch.randn(3, 4, device="meta", dtype=torch.float16)
    s = torch.tensor(2.5)
    got, want = jfn(x, s), fn(x, s)
    assert (got.device, got.shape, got.dtype) == (want.device, want.shape, want.dtype)


def test_cpu_tensor_with_dimensions_is_an_error_like_torch() -> None:
    def fn(x, c):
        return x * c

    x, c = torch.randn(3, device="meta"), torch.randn(3)
    with pytest.raises(RuntimeError, match="device"):
        fn(x, c)
    with pytest.raises(Exception, match="device"):
        thunder.jit(fn)(x, c)
