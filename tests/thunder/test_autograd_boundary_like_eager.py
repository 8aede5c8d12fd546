"""The boundary between a jitted program and torch's autograd behaves as eager's graph: forward-
mode AD from outside (dual tensors, a custom Function's ``jvp``), hooks on outputs the loss does
not use, in-place writes into returned views of inputs, and custom ``autograd.Function``
backwards that return broadcast gradients, write to outside state or take None for a missing
gradient. Results and gradients are compared with eager on fresh random inputs over several
calls, for the default cache and ``cache="symbolic values"``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.autograd.forward_ad as fwAD

import thunder

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*such calls run split:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*ran eagerly:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*runs eagerly there:UserWarning"),
]

CACHES = [{}, {"cache": "symbolic values"}]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield


def _close(got: Any, want: Any) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, want)
        assert got.requires_grad == want.requires_grad
    else:
        assert got == want


def _like_eager(
    check: Callable[[Callable[..., Any], int], Any], fn: Any, calls: int = 4, **jit_kw: Any
) -> None:
    jitted = thunder.jit(fn, **jit_kw)
    for i in range(calls):
        _close(check(jitted, i), check(fn, i))


# -- forward-mode AD from outside --------------------------------------------------------------


class _RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.round()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g

    @staticmethod
    def jvp(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t


@pytest.mark.parametrize("kw", CACHES)
@pytest.mark.parametrize("grad_mode", [True, False])
def test_forward_ad_honours_a_custom_function_jvp(kw: dict[str, Any], grad_mode: bool) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _RoundSTE.apply(x * 4) * w

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x, t, w = torch.randn(3 + i), torch.randn(3 + i), torch.randn(3 + i)
        with torch.set_grad_enabled(grad_mode), fwAD.dual_level():
            p, tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x, t), w))
        return p, tangent

    jf = thunder.jit(f, **kw)
    jf(torch.randn(3), torch.randn(3))  # compiled outside a dual level first
    for i in range(4):
        _close(check(jf, i), check(f, i))


@pytest.mark.parametrize("kw", CACHES)
def test_forward_ad_through_a_module_whose_parameters_require_grad(kw: dict[str, Any]) -> None:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    jm = thunder.jit(m, **kw)

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x, t = torch.randn(2, 3), torch.randn(2, 3)
        with fwAD.dual_level():
            p, tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x, t)))
        out = p.detach(), tangent.detach()
        # the program is compiled and differentiable outside the level
        y = fn(x)
        y.sum().backward()
        grads = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        return (*out, y, *grads)

    for i in range(4):
        _close(check(jm, i), check(m, i))
    assert thunder.compile_stats(jm).cache_hits >= 1


def test_forward_ad_call_warns_and_is_logged() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin()

    jf = thunder.jit(f)
    with fwAD.dual_level(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        jf(fwAD.make_dual(torch.randn(3), torch.randn(3)))
    assert any("forward-mode AD" in str(w.message) for w in seen)
    assert "forward-mode AD" in (thunder.compile_stats(jf).last_eager_reason or "")


# -- hooks on outputs the loss does not use ----------------------------------------------------


@pytest.mark.parametrize("kw", CACHES)
def test_hook_on_an_unused_output_is_not_called(kw: dict[str, Any]) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * 2).sum(), x.cos()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(3 + i, requires_grad=True)
        calls: list[bool] = []
        loss, b = fn(x)
        b.register_hook(lambda g: calls.append(g is None) or g * 2)
        loss.register_hook(lambda g: g * 3)  # a used output's hook still runs
        loss.backward()
        grad_loss = x.grad.clone()
        x.grad = None
        loss2, b2 = fn(x)
        b2.register_hook(lambda g: calls.append(g is None) or g * 2)
        (loss2 + b2.sum()).backward()  # now used: the hook runs and scales its gradient
        return loss, grad_loss, x.grad, calls

    _like_eager(check, f, **kw)


def test_multi_grad_hooks_on_outputs_behave_as_eager() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * 2).sum(), x.cos()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(3, requires_grad=True)
        seen_all: list[Any] = []
        seen_any: list[Any] = []
        loss, b = fn(x)
        torch.autograd.graph.register_multi_grad_hook(
            (loss, b), lambda gs: seen_all.append([g is None for g in gs])
        )
        torch.autograd.graph.register_multi_grad_hook(
            (b, loss), lambda g: seen_any.append(g is None), mode="any"
        )
        loss.backward()
        return x.grad, seen_all, seen_any

    _like_eager(check, f)


# -- in-place writes into returned views of inputs ---------------------------------------------


@pytest.mark.parametrize("kw", CACHES)
def test_inplace_write_into_a_returned_view_of_an_input(kw: dict[str, Any]) -> None:
    def f(a: torch.Tensor) -> torch.Tensor:
        return a[0]

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(3 + i, 4, requires_grad=True)
        a = x * 1
        v = fn(a)
        v.mul_(3)
        a.sum().backward()
        return a, v, v._base is a, x.grad

    _like_eager(check, f, **kw)


@pytest.mark.parametrize("kw", CACHES)
def test_inplace_writes_into_several_returned_views_with_other_outputs(kw: dict[str, Any]) -> None:
    def f(a: torch.Tensor, w: torch.Tensor) -> Any:
        return a[0], a.view(-1), a + w

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.randn(4, requires_grad=True)
        a = x * 1
        v, flat, p = fn(a, w)
        v.mul_(3)
        flat.add_(1)
        (a.sum() + p.sum() + (v * v).sum()).backward()
        return a, v, flat, p, x.grad, w.grad

    _like_eager(check, f, **kw)


@pytest.mark.parametrize("kw", CACHES)
def test_base_written_after_the_program_returned_a_view_of_it(kw: dict[str, Any]) -> None:
    def f(a: torch.Tensor, w: torch.Tensor) -> Any:
        return a[1:], (a * w).sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.randn(3, 4, requires_grad=True)
        a = x * 1
        v, s = fn(a, w)
        s.backward(retain_graph=True)
        a.mul_(2)
        (v * v).sum().backward()
        return v.detach(), x.grad, w.grad

    _like_eager(check, f, **kw)


def test_returned_views_of_an_expanded_input_and_of_a_leaf() -> None:
    def f(a: torch.Tensor) -> Any:
        return a[1], a.t()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(4, requires_grad=True)
        v, t = fn(x.expand(3, 4))
        ((v * torch.arange(4.0)).sum() + (t * 2).sum()).backward()
        leaf = torch.randn(3, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="view of a leaf Variable"):
            fn(leaf)[0].mul_(2)
        return v, t, x.grad, v._base is x

    _like_eager(check, f)


@pytest.mark.parametrize("a_requires_grad", [True, False])
def test_an_input_that_is_a_view_returned_as_it_is_stays_the_input(a_requires_grad: bool) -> None:
    def f(a: torch.Tensor, w: torch.Tensor) -> Any:
        return a, a[0], (a * w).sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(4, 3, requires_grad=a_requires_grad)
        w = torch.randn(3, 3, requires_grad=True)
        a = (x * 1)[1:] if a_requires_grad else x.reshape(4, 3)[1:]
        same, v, s = fn(a, w)
        s.backward()
        return same is a, v, v._base is a._base, w.grad

    _like_eager(check, f)


def test_returned_view_of_an_input_not_requiring_grad_is_a_plain_view() -> None:
    def f(a: torch.Tensor, w: torch.Tensor) -> Any:
        return a[0], (a * w).sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        a, w = torch.randn(3, 4), torch.randn(3, 4, requires_grad=True)
        v, s = fn(a, w)
        s.backward()
        v.add_(1)
        return v, v._base is a, a, w.grad

    _like_eager(check, f)


# -- custom autograd.Function backwards --------------------------------------------------------


class _AddBroadcastGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return x + b

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g, g  # b's gradient in x's shape: eager's engine sums it to b's


class _OtherDtypeGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return x * b

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g.double(), g.unsqueeze(0).sum(1, keepdim=True)  # [1, 1, 3] for b's [1, 3]


@pytest.mark.parametrize("kw", CACHES)
@pytest.mark.parametrize("fn_cls", [_AddBroadcastGrad, _OtherDtypeGrad])
def test_custom_backward_gradient_is_reduced_and_converted_as_eager(
    kw: dict[str, Any], fn_cls: Any
) -> None:
    def f(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return fn_cls.apply(x, b).pow(2).sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x = torch.randn(2 + i, 3, requires_grad=True)
        b = (
            torch.randn(1, 3, requires_grad=True)
            if fn_cls is _OtherDtypeGrad
            else torch.randn(3, requires_grad=True)
        )
        y = fn(x, b)
        y.backward()
        return y, x.grad, b.grad, x.grad.dtype

    _like_eager(check, f, **kw)


def test_custom_backward_gradient_of_an_incompatible_shape_raises_eagers_message() -> None:
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g[:2]

    def f(x: torch.Tensor) -> torch.Tensor:
        return Bad.apply(x).sum()

    x = torch.randn(3, requires_grad=True)
    message = r"returned an invalid gradient at index 0 - got \[2\] but expected shape compatible"
    with pytest.raises(RuntimeError, match=message):
        f(x).backward()
    # compiled: the forward runs (eagerly, with a warning), as eager's; the backward raises
    with pytest.warns(UserWarning, match="invalid gradient at index 0"):
        out = thunder.jit(f)(x)
    with pytest.raises(RuntimeError, match=message):
        out.backward()


class _Counter:
    n = 0


class _CountingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        _Counter.n += 1
        return g * 2


_CALLS: list[int] = []
_CFG = {"k": 1.0}


class _AppendingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        _CALLS.append(1)
        return g * _CFG["k"]


@pytest.mark.parametrize("kw", CACHES)
def test_custom_backward_with_side_effects_runs_them_once_per_backward(kw: dict[str, Any]) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return _CountingBackward.apply(x).sum() + _AppendingBackward.apply(x.sin()).sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        _Counter.n = 0
        _CALLS.clear()
        _CFG["k"] = 1.0
        x = torch.randn(4 + i, requires_grad=True)
        out = fn(x)
        _CFG["k"] = float(i + 5)  # read by the backward when it runs, as in eager
        out.backward(retain_graph=True)
        out.backward()
        return out, x.grad, _Counter.n, len(_CALLS)

    _like_eager(check, f, **kw)


def test_custom_backward_with_side_effects_warns() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return _CountingBackward.apply(x).sum()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        thunder.jit(f)(torch.randn(3, requires_grad=True))
    assert any("writes to state outside" in str(w.message) for w in seen)


class _NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> Any:
        ctx.set_materialize_grads(False)
        return x * 2, y * 3

    @staticmethod
    def backward(ctx: Any, g1: Any, g2: Any) -> Any:
        ones = torch.ones_like(g1 if g1 is not None else g2)
        return (ones if g1 is None else g1 * 2), (ones if g2 is None else g2 * 3)


@pytest.mark.parametrize("kw", CACHES)
def test_set_materialize_grads_false_gives_the_backward_none(kw: dict[str, Any]) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        a, b = _NoMaterialize.apply(x, y)
        return a.sum(), b.sum()

    def check(fn: Callable[..., Any], i: int) -> Any:
        torch.manual_seed(i)
        x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        a, b = fn(x, y)
        (a if i % 2 else b).backward()
        return a, b, x.grad, y.grad

    _like_eager(check, f, **kw)
