"""Which tensors eager's autograd saves decides where an in-place write between the forward and
the backward raises ("modified by an inplace operation"). A jitted program must raise exactly
where eager raises, and elsewhere give eager's gradients: an output the caller writes
(``logits.masked_fill_``) that eager's formulas do not read, an input an optimizer step changes
that eager's node did not save (``x / w`` with a constant ``w`` saves ``w`` only). Each case runs
eager and jitted on the same fresh values over several calls."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

_MODIFIED = "modified by an inplace operation"


def _positive(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) * 0.5 + 0.3


def _outcome(
    fn: Callable[..., Any], x: torch.Tensor, w: torch.Tensor, write: Callable[..., None]
) -> Any:
    """The gradients of ``fn``'s output sum after ``write(x, w, y)``, or that it raised."""
    try:
        y = fn(x, w)
        write(x, w, y)
        y.sum().backward()
    except RuntimeError as e:
        assert _MODIFIED in str(e), e
        return "raises"
    return [t.grad for t in (x, w)]


def _check(
    fn: Callable[..., Any],
    write: Callable[..., None],
    w_requires_grad: bool,
    expected: str,
    cache: str | None = None,
) -> None:
    jf = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
    for seed in range(3):
        found = []
        for f in (fn, jf):
            torch.manual_seed(seed)
            x = _positive(4, 4).requires_grad_()
            w = _positive(4, 4).requires_grad_(w_requires_grad)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found.append(_outcome(f, x, w, write))
        eager, jitted = found
        assert (eager == "raises") == (expected == "raises"), eager
        if eager == "raises":
            assert jitted == "raises"
            continue
        assert jitted != "raises"
        for e, t in zip(eager, jitted, strict=True):
            assert (e is None) == (t is None)
            if e is not None:
                torch.testing.assert_close(t, e)


def _write_output(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    y.mul_(2.0)


def _write_x(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    with torch.no_grad():
        x.mul_(1.5)


def _write_w(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    with torch.no_grad():
        w.mul_(1.5)


# name: (function, eager's outcome when its output is written in place)
OUTPUT_WRITES = {
    "normalize": (lambda x, w: F.normalize(x, dim=-1), "runs"),
    "div_by_norm": (lambda x, w: x / x.norm(dim=-1, keepdim=True), "runs"),
    "div_by_sum": (lambda x, w: x / x.sum(-1, keepdim=True), "runs"),
    "softsign": (lambda x, w: F.softsign(x), "runs"),
    "erfinv": (lambda x, w: torch.erfinv(x), "runs"),
    "pow_int": (lambda x, w: x.pow(3), "runs"),
    "pow_half": (lambda x, w: x**0.5, "runs"),
    "div_by_w": (lambda x, w: (x * 2) / w, "runs"),
    # the result is saved: the write raises
    "sgn": (lambda x, w: torch.sgn(x), "raises"),
    "pow_tensor": (lambda x, w: x.pow(w), "raises"),
    "number_pow": (lambda x, w: 2.0**x, "raises"),
    "tanh": (lambda x, w: torch.tanh(x), "raises"),
    "hypot": (lambda x, w: torch.hypot(x, w), "raises"),
}


@pytest.mark.parametrize("name", sorted(OUTPUT_WRITES))
def test_output_written_then_backward(name: str) -> None:
    fn, expected = OUTPUT_WRITES[name]
    _check(fn, _write_output, True, expected)
    _check(fn, _write_output, False, expected)


@pytest.mark.parametrize("name", ["normalize", "pow_int", "sgn"])
def test_output_written_symbolic_values(name: str) -> None:
    fn, expected = OUTPUT_WRITES[name]
    _check(fn, _write_output, False, expected, cache="symbolic values")


# name: (function, which input is written, whether w requires grad, eager's outcome)
INPUT_WRITES = {
    "div_const_divisor": (lambda x, w: x / w, _write_x, False, "runs"),
    "div_divisor_with_grad": (lambda x, w: x / w, _write_x, True, "raises"),
    "div_divisor_written": (lambda x, w: x / w, _write_w, False, "raises"),
    "einsum_const": (lambda x, w: torch.einsum("ij,jk->ik", x, w), _write_x, False, "runs"),
    "einsum_with_grad": (lambda x, w: torch.einsum("ij,jk->ik", x, w), _write_x, True, "raises"),
    "addcdiv_const": (lambda x, w: torch.addcdiv(x, x, w), _write_x, False, "runs"),
    "addcdiv_with_grad": (lambda x, w: torch.addcdiv(x, x, w), _write_x, True, "raises"),
    "fmod_number": (lambda x, w: torch.fmod(x, 0.3) * w, _write_x, True, "runs"),
    "fmod_tensor_const": (lambda x, w: torch.fmod(x, w), _write_x, False, "runs"),
    "fmod_tensor_with_grad": (lambda x, w: torch.fmod(x, w), _write_x, True, "raises"),
    "remainder_number": (lambda x, w: torch.remainder(x, 0.3) * w, _write_x, True, "runs"),
    "sign": (lambda x, w: x.sign() * w + x, _write_x, True, "runs"),
    "sgn": (lambda x, w: x.sgn() * w + x, _write_x, True, "raises"),
    "hypot_const_written": (lambda x, w: torch.hypot(x, w), _write_w, False, "runs"),
    "hypot_input_written": (lambda x, w: torch.hypot(x, w), _write_x, False, "raises"),
    "pow_number_exponent": (lambda x, w: x.pow(3) * w, _write_x, True, "raises"),
    "kl_div_input_written": (lambda x, w: F.kl_div(x, w, reduction="sum"), _write_x, False, "runs"),
    "kl_div_target_written": (
        lambda x, w: F.kl_div(x, w, reduction="sum"),
        _write_w,
        False,
        "raises",
    ),
    "kl_div_log_target_written": (
        lambda x, w: F.kl_div(x, w, reduction="sum", log_target=True),
        _write_w,
        True,
        "runs",
    ),
    "trace": (lambda x, w: x.trace() * w, _write_x, True, "runs"),
    # the backward computes from what eager saves (w / |w|, x - w), not the written input
    "cosine_similarity_const_written": (
        lambda x, w: F.cosine_similarity(x, w),
        _write_w,
        False,
        "runs",
    ),
    "cosine_similarity_input_written": (
        lambda x, w: F.cosine_similarity(x, w),
        _write_x,
        False,
        "raises",
    ),
    "pairwise_distance_input_written": (
        lambda x, w: F.pairwise_distance(x, w),
        _write_x,
        True,
        "runs",
    ),
    "pairwise_distance_const_written": (
        lambda x, w: F.pairwise_distance(x, w),
        _write_w,
        False,
        "runs",
    ),
    "conv_weight_made_contiguous": (
        lambda x, w: F.conv1d(x[None], w[:, :, None].expand(4, 4, 2).contiguous())[0],
        _write_w,
        True,
        "runs",
    ),
    "conv_weight_contiguous_already": (
        lambda x, w: F.conv1d(x[None], w[:, :, None].contiguous())[0],
        _write_w,
        True,
        "raises",
    ),
}


@pytest.mark.parametrize("name", sorted(INPUT_WRITES))
def test_input_written_then_backward(name: str) -> None:
    fn, write, w_requires_grad, expected = INPUT_WRITES[name]
    _check(fn, write, w_requires_grad, expected)


@pytest.mark.parametrize(
    "name",
    ["div_const_divisor", "einsum_const", "fmod_number", "cosine_similarity_const_written"],
)
def test_input_written_symbolic_values(name: str) -> None:
    fn, write, w_requires_grad, expected = INPUT_WRITES[name]
    _check(fn, write, w_requires_grad, expected, cache="symbolic values")


class _Head(torch.nn.Module):
    """A SimCLR-style head: similarities over a learnable temperature."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)
        self.temp = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.normalize(self.proj(x), dim=-1)
        return z @ z.T / self.temp


def test_similarity_logits_masked_in_place_trains_as_eager() -> None:
    torch.manual_seed(0)
    model = _Head()
    jitted = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(6, 8)
        labels = torch.arange(6) ^ 1
        grads = []
        for m in (model, jitted):
            model.zero_grad()
            logits = m(x)
            logits.masked_fill_(torch.eye(6, dtype=torch.bool), -1e9)
            F.cross_entropy(logits, labels).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for e, t in zip(*grads, strict=True):
            torch.testing.assert_close(t, e)
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(0.1 * p.grad)


def test_output_written_then_input_written_raises() -> None:
    # The compiled backward reads the quotient the caller wrote; computing it again needs x as
    # it was: eager's node saved x, so both raise.
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x / x.sum(-1, keepdim=True)

    def write(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
        y.mul_(2)
        with torch.no_grad():
            x.add_(1)

    _check(fn, write, False, "raises")


def _vjp_grads(f: Callable[..., Any], x: torch.Tensor, w: torch.Tensor, ct: torch.Tensor) -> Any:
    _, vjp_fn = torch.func.vjp(f, x, w)
    return vjp_fn(ct)


def test_func_vjp_of_constants_gives_plain_tensors() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x.sin() * w).tanh()

    jf = thunder.jit(fn)
    for _ in range(3):
        x, w, ct = torch.randn(5), torch.randn(5), torch.randn(5)
        eager, jitted = _vjp_grads(fn, x, w, ct), _vjp_grads(jf, x, w, ct)
        for e, t in zip(eager, jitted, strict=True):
            torch.testing.assert_close(t, e)
            assert t.requires_grad == e.requires_grad == False  # noqa: E712
            assert t.grad_fn is None
            t.numpy()


def test_func_vjp_stays_differentiable_in_what_requires_grad() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x.sin() * w).tanh()

    jf = thunder.jit(fn)
    for _ in range(3):
        x, w0, ct = torch.randn(5), torch.randn(5), torch.randn(5)
        found = []
        for f in (fn, jf):
            w = w0.clone().requires_grad_()
            gx, gw = _vjp_grads(f, x, w, ct)
            assert gx.requires_grad
            (gx.square().sum() + gw.sum()).backward()
            found.append((gx.detach(), gw.detach(), w.grad))
        for e, t in zip(*found, strict=True):
            torch.testing.assert_close(t, e)


def _hook_order(f: Callable[..., Any], order: tuple[int, ...]) -> list[str]:
    x = torch.randn(4, requires_grad=True)
    outs = f(x)
    ran: list[str] = []
    for k in order:
        outs[k].register_hook(lambda g, k=k: ran.append(f"out{k}"))
    sum(o.sum() for o in outs).backward()
    return ran


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_output_hooks_run_in_eagers_order(order: tuple[int, ...]) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.exp(), x.sin(), (x * 2).cos()

    jf = thunder.jit(fn)
    for _ in range(3):
        assert _hook_order(jf, order) == _hook_order(fn, order)


def test_hooks_of_outputs_of_one_op_run_in_registration_order() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * 2).chunk(2)

    jf = thunder.jit(fn)
    for order in ((0, 1), (1, 0)):
        assert _hook_order(jf, order) == _hook_order(fn, order)


def test_inner_jitted_hook_under_outer_jit_warns_no_transform() -> None:
    def inner(x: torch.Tensor) -> torch.Tensor:
        y = x.tanh()
        y.register_hook(lambda g: g * 5)
        return y

    jitted_inner = thunder.jit(inner)

    def outer(inner_fn: Callable[..., Any], x: torch.Tensor) -> torch.Tensor:
        return inner_fn(x * 2).sum()

    jo = thunder.jit(lambda x: outer(jitted_inner, x))
    for _ in range(3):
        x = torch.randn(4)
        xe, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        outer(inner, xe).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jo(xt).backward()
        assert not [w for w in caught if "is called under" in str(w.message)]
        torch.testing.assert_close(xt.grad, xe.grad)


def test_low_precision_input_cast_stays_in_the_backward() -> None:
    # The backward's float32 cast of the bfloat16 input is not moved to the forward: saving the
    # cast would take twice the input's bytes.
    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g

    jf = thunder.jit(rms)
    for _ in range(2):
        x = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn(8, dtype=torch.bfloat16, requires_grad=True)
        jf(x, g).sum().backward()
    forward = thunder.last_traces(jf)[-1]
    _outputs, saved = forward.return_value
    x_proxy = forward.args[0]
    assert any(s.name == x_proxy.name for s in saved)
