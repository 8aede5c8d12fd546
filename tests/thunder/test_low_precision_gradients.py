"""float16 and bfloat16 gradients as eager's: eager's derivative formulas read the op's result as
returned (rounded to the tensor's dtype) and its input as given, compute in float32 (opmath) and
round once, and the forward saves those low-precision tensors, not float32 copies of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import thunder

LOW = [torch.float16, torch.bfloat16]


def _grads(fn: Callable[..., Any], inputs: list[torch.Tensor], g: torch.Tensor) -> Any:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, leaves, g)
    return out, grads


def _compare(fn: Callable[..., Any], make: Callable[[], list[torch.Tensor]], **jit_kw: Any) -> None:
    jfn = thunder.jit(fn, **jit_kw)
    for seed in range(3):  # fresh inputs each call: the cached program runs again
        torch.manual_seed(seed)
        inputs = make()
        with torch.no_grad():
            like = fn(*inputs)
        g = torch.randn_like(like)
        want_out, want = _grads(fn, inputs, g)
        got_out, got = _grads(jfn, inputs, g)
        torch.testing.assert_close(got_out, want_out)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b)  # eager's own tolerance for the dtype


def _x(dtype: torch.dtype, *shape: int) -> Callable[[], list[torch.Tensor]]:
    return lambda: [torch.randn(*shape, dtype=dtype)]


def _positive(dtype: torch.dtype, *shape: int) -> Callable[[], list[torch.Tensor]]:
    return lambda: [torch.rand(*shape, dtype=dtype) + 0.25]


UNARY = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "tan": torch.tan,
    "atan": torch.atan,
    "sin": torch.sin,
    "cos": torch.cos,
    "erfinv": lambda x: torch.erfinv(x.clamp(-0.9, 0.9)),
    "pow_scalar": lambda x: x.abs().add(0.5) ** 2.5,
    "pow_scalar_base": lambda x: 2**x,
    "pow_tensor": lambda x: x.abs().add(0.5) ** x,
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_uses_rounded_result(name: str, dtype: torch.dtype) -> None:
    op = UNARY[name]
    make = _positive(dtype, 256) if name in ("sqrt", "rsqrt", "reciprocal") else _x(dtype, 256)
    _compare(lambda x: op(x), make)


@pytest.mark.parametrize("dtype", LOW)
def test_div(dtype: torch.dtype) -> None:
    def make() -> list[torch.Tensor]:
        return [torch.randn(16, 32, dtype=dtype), torch.rand(16, 32, dtype=dtype) + 0.5]

    _compare(lambda a, b: a / b, make)


NN = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: F.log_softmax(x, dim=1),
    "logsumexp": lambda x: torch.logsumexp(x, dim=-1),
    "normalize": lambda x: F.normalize(x, dim=-1),
    "layer_norm": lambda x: F.layer_norm(x, (32,)),
    "group_norm": lambda x: F.group_norm(x.reshape(4, 8, 4, 4), 2).reshape(16, 32),
    "softmin": lambda x: F.softmin(x, dim=-1),
    "var": lambda x: x.var(-1),
    "std": lambda x: x.std(-1, keepdim=True),
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(NN))
def test_nn_ops(name: str, dtype: torch.dtype) -> None:
    _compare(NN[name], _x(dtype, 16, 32))


@pytest.mark.parametrize("dtype", LOW)
def test_layer_norm_affine(dtype: torch.dtype) -> None:
    def make() -> list[torch.Tensor]:
        return [
            torch.randn(16, 32, dtype=dtype),
            torch.randn(32, dtype=dtype),
            torch.randn(32, dtype=dtype),
        ]

    _compare(lambda x, w, b: F.layer_norm(x, (32,), w, b), make)


@pytest.mark.parametrize("dtype", LOW)
def test_group_norm_affine(dtype: torch.dtype) -> None:
    def make() -> list[torch.Tensor]:
        return [
            torch.randn(4, 8, 5, dtype=dtype),
            torch.randn(8, dtype=dtype),
            torch.randn(8, dtype=dtype),
        ]

    _compare(lambda x, w, b: F.group_norm(x, 4, w, b), make)


@pytest.mark.parametrize("dtype", LOW)
def test_sdpa(dtype: torch.dtype) -> None:
    def make() -> list[torch.Tensor]:
        return [torch.randn(2, 2, 8, 16, dtype=dtype) for _ in range(3)]

    _compare(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), make)


@pytest.mark.parametrize("dtype", LOW)
def test_symbolic_values_cache(dtype: torch.dtype) -> None:
    _compare(lambda x: x.tanh() * x.sigmoid(), _x(dtype, 8, 32), cache="symbolic values")


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.norm = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


@pytest.mark.parametrize("dtype", LOW)
def test_small_model_weight_gradients(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = _Block().to(dtype)
    jmodel = thunder.jit(model)
    for seed in range(3):
        torch.manual_seed(100 + seed)
        x = torch.randn(8, 32, dtype=dtype)
        g = torch.randn(8, 16, dtype=dtype)
        model.zero_grad()
        torch.testing.assert_close(jmodel(x), model(x))
        model(x).backward(g)
        want = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad()
        jmodel(x).backward(g)
        for n, p in model.named_parameters():
            torch.testing.assert_close(p.grad, want[n], msg=lambda m, n=n: f"{n}: {m}")


def _saved_dtypes(fn: Callable[..., Any], *inputs: torch.Tensor) -> list[str]:
    """The dtypes (by name: "bfloat16") of what the forward saves for the backward."""
    jfn = thunder.jit(fn)
    jfn(*inputs)
    fw = thunder.last_traces(jfn)[-1]
    saved = fw.bound_symbols[-1].args[0][1]
    return [s.dtype.name for s in saved if hasattr(s, "dtype")]


@pytest.mark.parametrize("dtype", LOW)
def test_small_model_saves_low_precision_tensors(dtype: torch.dtype) -> None:
    # eager saves the bfloat16/float16 activations, layer norm's mean and rstd included (CPU)
    model = _Block().to(dtype)
    saved = _saved_dtypes(model, torch.randn(8, 32, dtype=dtype))
    assert saved and all(d == str(dtype).removeprefix("torch.") for d in saved), saved


@pytest.mark.parametrize("dtype", LOW)
def test_saves_low_precision_tensors(dtype: torch.dtype) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x @ w
        return (h.softmax(-1) * h.sigmoid() * h.exp() * h.tanh()).sum()

    x = torch.randn(16, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(16, 16, dtype=dtype, requires_grad=True)
    saved = _saved_dtypes(f, x, w)
    assert saved, "the backward needs saved tensors"
    assert all(d == str(dtype).removeprefix("torch.") for d in saved), saved


# Checkpointed regions under autocast: the backward recomputes the region and casts the region's
# low-precision values to float32 again itself; recomputing a later value of the region reads
# such a cast, which must come first (it was placed at the backward's own first use, later: the
# backward read a value before defining it, an UnboundLocalError).

CKPT_BLOCKS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "tanh_sin_cos": lambda x, w: torch.tanh(x @ w).sin().cos() * 2,
    "tanh_cubed": lambda x, w: (lambda t: t * t * t)(torch.tanh(x @ w)),
    "sigmoid_exp_tanh": lambda x, w: (lambda h: h.sigmoid().exp().tanh() * h)(x @ w),
}


def _checkpointed(block: str, use_reentrant: bool) -> Callable[..., torch.Tensor]:
    from torch.utils import checkpoint as torch_checkpoint

    fn = CKPT_BLOCKS[block]

    def checkpointed(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        h = torch_checkpoint.checkpoint(fn, x, w1, use_reentrant=use_reentrant)
        return torch_checkpoint.checkpoint(fn, h, w2, use_reentrant=use_reentrant)

    return checkpointed


def _ckpt_inputs(dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    return [
        t.to(dtype) for t in (torch.randn(16, 32), torch.randn(32, 32) / 4, torch.randn(32, 32) / 4)
    ]


def _backward(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], g: torch.Tensor) -> Any:
    # .backward(), not autograd.grad: reentrant checkpoints refuse the latter, in eager too
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    out.backward(g)
    return out, [t.grad for t in leaves]


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("block", sorted(CKPT_BLOCKS))
def test_checkpoint_under_autocast_recomputes_before_use(
    block: str, use_reentrant: bool, cache: str | None
) -> None:
    fn = _checkpointed(block, use_reentrant)
    jfn = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
    for seed in range(3):
        torch.manual_seed(seed)
        inputs = _ckpt_inputs()
        g = torch.randn(16, 32, dtype=torch.bfloat16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want_out, want = _backward(fn, inputs, g)
            got_out, got = _backward(jfn, inputs, g)
        assert got_out.dtype == want_out.dtype == torch.bfloat16
        torch.testing.assert_close(got_out, want_out)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("block", sorted(CKPT_BLOCKS))
def test_checkpoint_of_low_precision_inputs(block: str, dtype: torch.dtype) -> None:
    _compare(_checkpointed(block, False), lambda: _ckpt_inputs(dtype))
