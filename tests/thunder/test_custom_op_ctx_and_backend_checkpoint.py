"""Custom ops and autograd.Functions whose backward reads tensors kept other than through
``save_for_backward``; torch.utils.checkpoint over effects under thunder's torch.compile backend;
compiled autograd over a thunder-compiled forward."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.utils.checkpoint as ckpt

import thunder
from thunder.dynamo import subgraphs, thunderfx

_KEPT: dict[str, torch.Tensor] = {}


def _define_ops() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    ops: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}

    @torch.library.custom_op("thunder_test_ctx::on_attr", mutates_args=())
    def on_attr(x: torch.Tensor) -> torch.Tensor:
        return x * x

    on_attr.register_fake(lambda x: torch.empty_like(x))

    def setup_attr(ctx, inputs, output):
        ctx.x = inputs[0]

    on_attr.register_autograd(lambda ctx, g: 2 * g * ctx.x, setup_context=setup_attr)
    ops["attribute"] = on_attr

    @torch.library.custom_op("thunder_test_ctx::in_list", mutates_args=())
    def in_list(x: torch.Tensor) -> torch.Tensor:
        return x * x

    in_list.register_fake(lambda x: torch.empty_like(x))

    def setup_list(ctx, inputs, output):
        ctx.kept = [inputs[0], output]

    def bw_list(ctx, g):
        x, out = ctx.kept
        return g * (x + out / x)  # 2x, read through the output too

    in_list.register_autograd(bw_list, setup_context=setup_list)
    ops["list"] = in_list

    @torch.library.custom_op("thunder_test_ctx::in_closure", mutates_args=())
    def in_closure(x: torch.Tensor) -> torch.Tensor:
        return x * x

    in_closure.register_fake(lambda x: torch.empty_like(x))

    def setup_closure(ctx, inputs, output):
        _KEPT["x"] = inputs[0]

    in_closure.register_autograd(lambda ctx, g: 2 * g * _KEPT["x"], setup_context=setup_closure)
    ops["closure"] = in_closure

    @torch.library.custom_op("thunder_test_ctx::saved", mutates_args=())
    def saved(x: torch.Tensor) -> torch.Tensor:
        return x * x

    saved.register_fake(lambda x: torch.empty_like(x))

    def setup_saved(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    saved.register_autograd(lambda ctx, g: 2 * g * ctx.saved_tensors[0], setup_context=setup_saved)
    ops["saved"] = saved

    class OnAttr(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g * ctx.x

    ops["function"] = OnAttr.apply
    return ops


_OPS = _define_ops()


def _compilers() -> dict[str, Callable[[Callable], Callable]]:
    return {
        "jit": thunder.jit,
        "jit_symbolic": lambda f: thunder.jit(f, cache="symbolic values"),
        "thunderfx": thunderfx,
    }


@pytest.mark.parametrize("compiler", list(_compilers()))
@pytest.mark.parametrize("kept", list(_OPS))
def test_backward_reads_tensor_kept_on_ctx(kept: str, compiler: str) -> None:
    op = _OPS[kept]

    def f(x, y):
        return (op(x) * y).sum()

    torch._dynamo.reset()
    cf = _compilers()[compiler](f)
    for n in (3, 3, 5):
        x = torch.randn(n, requires_grad=True)
        y = torch.randn(n)
        xe = x.detach().clone().requires_grad_(True)
        out = cf(x, y)
        expected = f(xe, y)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        torch.testing.assert_close(x.grad, xe.grad)
        torch.testing.assert_close(x.grad, 2 * x.detach() * y)


class _Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return self.linear(x).tanh()


class _Normalizing(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.dropout = torch.nn.Dropout(0.3)

    def forward(self, x):
        return self.dropout(self.norm(self.linear(x))).sin()


@pytest.mark.parametrize("module", [_Counting, _Normalizing])
def test_backend_checkpoint_of_module_writing_buffers(module: type[torch.nn.Module]) -> None:
    def f(m, x):
        return ckpt.checkpoint(m, x, use_reentrant=False).square().sum()

    torch._dynamo.reset()
    torch.manual_seed(0)
    m = module()
    ref = copy.deepcopy(m)
    cf = thunderfx(f)
    for _ in range(3):
        x = torch.randn(5, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        torch.manual_seed(1)
        out = cf(m, x)
        out.backward()
        torch.manual_seed(1)
        expected = f(ref, xe)
        expected.backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(x.grad, xe.grad)
        for (name, b), (_, be) in zip(m.named_buffers(), ref.named_buffers()):
            torch.testing.assert_close(b, be, msg=name)  # the recompute's writes as eager's
        for (name, p), (_, pe) in zip(m.named_parameters(), ref.named_parameters()):
            torch.testing.assert_close(p.grad, pe.grad, msg=name)


def test_backend_checkpoint_still_checks_its_arguments() -> None:
    # eager's checkpoint saves its own arguments: a write into one after the forward raises
    def f(m, x):
        return ckpt.checkpoint(m, x, use_reentrant=False).sum()

    torch._dynamo.reset()
    m = _Counting()

    def written_after_forward(fn: Callable) -> None:
        x = torch.randn(2, 3, requires_grad=True).clone()
        out = fn(m, x)
        x.mul_(2)
        out.backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        written_after_forward(f)
    cf = thunderfx(f)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        written_after_forward(cf)
    assert any("RunsEagerly" in s.runs for s in subgraphs(cf))


@pytest.mark.parametrize("backward_backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("compiler", ["jit", "thunderfx"])
def test_compiled_autograd_over_thunder_forward(compiler: str, backward_backend: str) -> None:
    from torch._dynamo import compiled_autograd

    torch._dynamo.reset()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    ref = copy.deepcopy(m)
    cm = _compilers()[compiler](m)
    for _ in range(3):
        x = torch.randn(3, 4, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        ref(xe).square().sum().backward()
        with compiled_autograd._enable(torch.compile(backend=backward_backend)):
            cm(x).square().sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
        for p, pe in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, pe.grad)
