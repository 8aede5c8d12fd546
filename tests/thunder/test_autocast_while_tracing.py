"""Autocast is applied as each op is recorded, as eager's dispatcher applies it: the program sees
eager's dtypes while it runs (``h.dtype``, factories given it, branches on it), may mix dtypes as
eager lets it, and values it reads from tensor data are computed in eager's dtypes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

BF16 = torch.bfloat16


def _ambient(on: bool) -> Any:
    return torch.autocast("cpu", dtype=BF16) if on else contextlib.nullcontext()


def _matches_eager(fn: Callable[..., Any], make: Callable[[], tuple[Any, ...]], ambient: bool):
    jf = thunder.jit(fn)
    for _ in range(3):
        args = make()
        theirs = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        with _ambient(ambient):
            got, want = jf(*args), fn(*theirs)
        assert type(got) is type(want)
        got_flat = got if isinstance(got, tuple) else (got,)
        want_flat = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got_flat, want_flat, strict=True):
            if isinstance(w, torch.Tensor):
                assert g.dtype == w.dtype
                torch.testing.assert_close(g, w, atol=1e-2, rtol=1e-2)
            else:
                assert g == w
        loss = [g for g in got_flat if isinstance(g, torch.Tensor) and g.requires_grad]
        if loss:
            sum(g.float().sum() for g in loss).backward()
            sum(w.float().sum() for w in want_flat if isinstance(w, torch.Tensor)).backward()
            for a, b in zip(args, theirs):
                if a.requires_grad:
                    torch.testing.assert_close(a.grad, b.grad, atol=2e-2, rtol=2e-2)
    assert thunder.compile_stats(jf).eager_fallbacks == 0, thunder.compile_stats(jf)
    return jf


def _xw() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)


@pytest.mark.parametrize("ambient", [True, False], ids=["ambient", "block"])
def test_the_program_reads_eager_dtypes(ambient: bool) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> Any:
        with _ambient(not ambient):
            h = x @ w
            is_low = h.dtype == BF16
            pad = torch.zeros(h.shape[0], 2, dtype=h.dtype)  # a factory given the dtype read
            low = torch.finfo(h.dtype).min  # -3.39e38 for bfloat16, -3.40e38 for float32
            masked = h.masked_fill(h < 0, low)
            y = torch.cat([masked.softmax(-1), pad], -1)
            return (y * 2 if is_low else y - 1), is_low, str(h.dtype)

    _matches_eager(fn, _xw, ambient)


@pytest.mark.parametrize("ambient", [True, False], ids=["ambient", "block"])
def test_dtype_conversions_follow_eager_dtypes(ambient: bool) -> None:
    """The attention pattern of many models: softmax in float32, back to the query's dtype."""

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        with _ambient(not ambient):
            q = x @ w
            scores = torch.softmax(q @ q.t(), -1, dtype=torch.float32).to(q.dtype)
            return scores @ q

    _matches_eager(fn, _xw, ambient)


def test_explicitly_mixed_dtypes_inside_an_autocast_block() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=BF16):
            a = x.mm(w.to(BF16))  # float32 @ bfloat16: autocast casts both
            b = torch.nn.functional.linear(x.double(), w.double())  # float64 is never cast
        return a.float() + b.float()

    _matches_eager(fn, _xw, ambient=False)


def test_values_read_from_data_are_computed_in_eager_dtypes() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> Any:
        h = x @ w
        s = h.sum().item()  # of a bfloat16 matmul, as eager computes it
        return (h * 2 if s > 0 else h - 1), s

    jf = thunder.jit(fn)
    for _ in range(4):
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        with torch.autocast("cpu", dtype=BF16):
            (got, s_got), (want, s_want) = jf(x, w), fn(x, w)
        assert s_got == s_want and got.dtype == want.dtype == BF16
        torch.testing.assert_close(got, want)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_a_checkpointed_region_under_autocast_reads_eager_dtypes() -> None:
    def block(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = h @ w.to(h.dtype)  # bfloat16 in eager: the region's input comes from a matmul
        return y.relu() if y.dtype == BF16 else y.tanh()

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        return torch.utils.checkpoint.checkpoint(block, h, w, use_reentrant=False)

    _matches_eager(fn, _xw, ambient=True)


def test_branches_of_torch_cond_under_autocast_mix_dtypes_as_eager() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=BF16):
            h = x @ w
            return torch.cond(
                h.sum() > 0,
                lambda a: a.mm(w.to(a.dtype)) * (2 if a.dtype == BF16 else 3),
                lambda a: a.mm(w.t().to(a.dtype)) + 1,
                (h,),
            )

    x = torch.randn(4, 8)
    jf = thunder.jit(fn)
    for _ in range(3):
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        got, want = jf(x, w), fn(x, w)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_a_module_trained_under_autocast_reads_eager_dtypes() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)
            self.norm = torch.nn.LayerNorm(16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            dtype = h.dtype  # models keep the dtype to convert back to
            h = self.norm(h.float()).to(dtype) + 100 * torch.finfo(dtype).eps
            return self.b(torch.nn.functional.gelu(h))

    torch.manual_seed(0)
    net = Net()
    ref = Net()
    ref.load_state_dict(net.state_dict())
    jnet = thunder.jit(net)
    for _ in range(3):
        x = torch.randn(5, 8)
        with torch.autocast("cpu", dtype=BF16):
            got, want = jnet(x), ref(x)
        assert got.dtype == want.dtype == BF16
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
        got.float().pow(2).mean().backward()
        want.float().pow(2).mean().backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, atol=2e-2, rtol=5e-2)
            p.grad, q.grad = None, None
    assert thunder.compile_stats(jnet).eager_fallbacks == 0


class _MatmulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        x, w = ctx.saved_tensors
        # eager's engine runs this with autocast off: float32 products
        return g.float() @ w.t().float(), x.t().float() @ g.float()


class _CustomBwdFunction(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g  # under the forward's autocast again


@pytest.mark.parametrize("function", [_MatmulFunction, _CustomBwdFunction])
def test_a_custom_function_backward_runs_under_eagers_autocast_state(function: Any) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return function.apply(x, w)

    jf = thunder.jit(fn)
    for _ in range(2):
        x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
        x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        with torch.autocast("cpu", dtype=BF16):
            got, want = jf(x, w), fn(x2, w2)
        assert got.dtype == want.dtype
        g = torch.randn_like(want, dtype=torch.float32)
        got.backward(g.to(got.dtype))
        want.backward(g.to(want.dtype))
        torch.testing.assert_close(x.grad, x2.grad, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(w.grad, w2.grad, atol=1e-6, rtol=1e-6)


def test_autocast_entered_inside_a_cond_branch_and_a_loop_body() -> None:
    from torch._higher_order_ops.while_loop import while_loop

    def fn(x: torch.Tensor, w: torch.Tensor) -> Any:
        def low(a: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", dtype=BF16):
                return (a @ w).float()

        y = torch.cond(x.sum() > -1e9, low, lambda a: a @ w, (x,))

        def body(i: torch.Tensor, a: torch.Tensor) -> Any:
            with torch.autocast("cpu", dtype=BF16):
                return i + 1, (a @ w).float()

        _, z = while_loop(lambda i, a: i < 2, body, (torch.tensor(0), x))
        return y, z

    jf = thunder.jit(fn)
    for _ in range(2):
        x, w = torch.randn(8, 8), torch.randn(8, 8)
        for got, want in zip(jf(x, w), fn(x, w)):
            torch.testing.assert_close(got, want, atol=0, rtol=0)  # bfloat16 products both


@pytest.mark.parametrize(
    "pool",
    [
        lambda x: torch.nn.functional.max_pool3d(x, 2),
        lambda x: torch.nn.functional.adaptive_avg_pool3d(x, 1),
        lambda x: torch.nn.functional.avg_pool3d(x, 2),
    ],
)
def test_cpu_autocast_runs_3d_pooling_in_float32(pool: Any) -> None:
    jf = thunder.jit(pool)
    x = torch.randn(1, 2, 4, 4, 4).to(BF16)
    with torch.autocast("cpu", dtype=BF16):
        got, want = jf(x), pool(x)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want)
