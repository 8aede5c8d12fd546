"""An op's signature mirrors its torch callable's: the executors call torch with the op's
arguments bound to it, so a parameter torch takes by keyword only must be keyword-only in the op
too (otherwise the generated call passes it by position and torch refuses it)."""

from __future__ import annotations

import inspect

import pytest
import torch

import thunder
from thunder_ir import ops
from thunder_ir.ops import resolve_torch_name


def _keyword_only_in_torch(op_name: str) -> list[tuple[str, str]]:
    op = ops.ALL_OPS[op_name]
    try:
        sig = inspect.signature(op.meta)
    except (TypeError, ValueError):
        return []
    found = []
    for torch_name in op.torch_names:
        if inspect.isfunction(resolve_torch_name(torch_name)):
            continue  # a Python function: its own signature says what it takes
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + torch_name.rsplit(".", 1)[1])
        for p in sig.parameters.values():
            if p.kind is not p.POSITIONAL_OR_KEYWORD:
                continue
            kinds = [a.kwarg_only for s in schemas for a in s.arguments if a.name == p.name]
            if kinds and all(kinds):
                found.append((torch_name, p.name))
    return found


def test_options_torch_takes_by_keyword_only_are_keyword_only() -> None:
    bad = {name: f for name in sorted(ops.ALL_OPS) if (f := _keyword_only_in_torch(name))}
    assert not bad, bad


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.float(torch.contiguous_format),
        lambda x: x.contiguous(torch.contiguous_format),
        lambda x: torch.nn.functional.gelu(x, "tanh"),
        lambda x: torch.as_tensor(x, torch.float64),
    ],
)
def test_option_by_position_is_refused_as_eager_refuses_it(call: object) -> None:
    x = torch.randn(3)
    with pytest.raises(TypeError):
        call(x)  # type: ignore[operator]
    with pytest.raises(TypeError):
        thunder.jit(call)(x)


def test_option_by_keyword_runs_as_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.float(memory_format=torch.contiguous_format).contiguous(
            memory_format=torch.contiguous_format
        )
        return torch.nn.functional.gelu(y, approximate="tanh") + torch.as_tensor(
            x, dtype=torch.float64
        )

    x = torch.randn(3, 4)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))
