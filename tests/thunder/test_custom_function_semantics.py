"""Custom ``torch.autograd.Function`` calls and tensor identity under thunder.jit, as in eager:
outputs that alias inputs keep the user's backward, what ``apply`` tracks and saves, errors raised
where eager raises them, and conversions that change nothing return the tensor itself."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.autograd.function import once_differentiable

import thunder

CACHES = [None, "symbolic values"]


def _jit(f: Callable[..., Any], cache: str | None) -> Callable[..., Any]:
    return thunder.jit(f) if cache is None else thunder.jit(f, cache=cache)


def _outcome(run: Callable[[], Any]) -> Any:
    try:
        return run()
    except RuntimeError:
        return "RuntimeError"


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return -g


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 3


class Sq(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SqOnce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


ALIASING = {
    "reverse_flatten": lambda x: GradReverse.apply(x).flatten(),
    "reverse_slice": lambda x: GradReverse.apply(x)[:, 1:],
    "reverse": lambda x: GradReverse.apply(x),
    "copy": lambda x: Copy.apply(x),
    "copy_t": lambda x: Copy.apply(x).t(),
    "copy_and_input": lambda x: (Copy.apply(x), x),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(ALIASING))
def test_custom_function_output_aliasing_its_input_keeps_the_users_backward(
    name: str, cache: str | None
) -> None:
    f = ALIASING[name]
    jf = _jit(f, cache)
    for _ in range(3):
        x1 = torch.randn(2, 3, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        e, t = f(x1), jf(x2)
        e, t = (e if isinstance(e, tuple) else (e,)), (t if isinstance(t, tuple) else (t,))
        for a, b in zip(e, t, strict=True):
            torch.testing.assert_close(a, b)
            assert (a is x1) == (b is x2)
        sum(o.sum() * (k + 1) for k, o in enumerate(e)).backward()
        sum(o.sum() * (k + 1) for k, o in enumerate(t)).backward()
        torch.testing.assert_close(x1.grad, x2.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_view_of_a_detached_input_returned_does_not_require_grad(cache: str | None) -> None:
    def f(x: torch.Tensor) -> Any:
        return x * 2, x.detach()[1:]

    jf = _jit(f, cache)
    for _ in range(3):
        x1 = torch.randn(4, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        (p1, t1), (p2, t2) = f(x1), jf(x2)
        assert t2.requires_grad == t1.requires_grad
        torch.testing.assert_close(t1, t2)
        ((p1[:3] - t1) ** 2).sum().backward()
        ((p2[:3] - t2) ** 2).sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_value_computed_from_a_leaf_made_inside_requires_grad(cache: str | None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.detach().requires_grad_()
        return y * 2 + 1

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e, t = f(x), jf(x)
        assert (e.requires_grad, e.is_leaf) == (t.requires_grad, t.is_leaf)
        torch.testing.assert_close(e, t)
        t.sum().backward()  # reaches the leaf made inside, as eager's
        assert x.grad is None


CONVERSIONS = {
    "float": lambda x: x.float(),
    "to_dtype": lambda x: x.to(x.dtype),
    "to_dtype_kw": lambda x: x.to(dtype=torch.float32),
    "type": lambda x: x.type(torch.float32),
    "type_name": lambda x: x.type("torch.FloatTensor"),
    "type_as": lambda x: x.type_as(x),
    "cpu": lambda x: x.cpu(),
    "to_cpu": lambda x: x.to("cpu"),
    "to_preserve": lambda x: x.to(memory_format=torch.preserve_format),
    "asarray": lambda x: torch.asarray(x),
    "asarray_dtype": lambda x: torch.asarray(x, dtype=torch.float32),
    "atleast_1d": lambda x: torch.atleast_1d(x),
    "atleast_2d": lambda x: torch.atleast_2d(x),
    "double": lambda x: x.double(),  # a real conversion: a new tensor
    "to_int": lambda x: x.to(torch.int64),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_conversion_that_changes_nothing_is_the_tensor_itself(name: str, cache: str | None) -> None:
    convert = CONVERSIONS[name]

    def f(x: torch.Tensor) -> Any:
        y = convert(x)
        same = y is x
        if same:
            y = y.clone()  # the caller's tensor is not to be written
        y.mul_(2)
        return y, same, id(convert(x)) == id(x), convert(x) in {x}

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(2, 3)
        xe, xt = x.clone(), x.clone()
        e, t = f(xe), jf(xt)
        assert e[1:] == t[1:]
        torch.testing.assert_close(e[0], t[0])
        torch.testing.assert_close(xe, xt)


@pytest.mark.parametrize("cache", CACHES)
def test_write_through_a_conversion_that_changes_nothing_writes_the_input(
    cache: str | None,
) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.float32)
        y.add_(w)
        return x * 2

    jf = _jit(f, cache)
    for _ in range(3):
        x, w = torch.randn(3), torch.randn(3)
        xe, xt = x.clone(), x.clone()
        torch.testing.assert_close(f(xe, w), jf(xt, w))
        torch.testing.assert_close(xe, xt)


class Split(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> Any:
        return [x[:2] * 2, x[2:] * 2]  # a list: eager does not track it

    @staticmethod
    def backward(ctx: Any, g1: Any, g2: Any = None) -> torch.Tensor:
        return torch.cat([g1, g2]) * 2


class Mixed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> Any:
        return x * 2, {"b": x * 3}

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _none: Any) -> torch.Tensor:
        return g * 5


@pytest.mark.parametrize("cache", CACHES)
def test_tensors_a_custom_function_returns_in_a_list_or_dict_are_not_tracked(
    cache: str | None,
) -> None:
    def f(x: torch.Tensor) -> Any:
        a, b = Split.apply(x)
        c, d = Mixed.apply(x)
        return (
            a.sum() + b.sum() + c.sum() + d["b"].sum() + x.sum(),
            b.requires_grad,
            d["b"].requires_grad,
        )

    jf = _jit(f, cache)
    for _ in range(3):
        x1 = torch.randn(4, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        e, t = f(x1), jf(x2)
        assert e[1:] == t[1:]
        e[0].backward()
        t[0].backward()
        torch.testing.assert_close(x1.grad, x2.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_in_place_write_into_a_custom_function_output(cache: str | None) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = Sq.apply(x)
        y[1:] *= w
        return y

    jf = _jit(f, cache)
    for _ in range(3):
        x1, w1 = torch.randn(3, requires_grad=True), torch.randn(2, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_() for t in (x1, w1))
        e, t = f(x1, w1), jf(x2, w2)
        torch.testing.assert_close(e, t)
        e.sum().backward()
        t.sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)
        torch.testing.assert_close(w1.grad, w2.grad)


def _written_inside(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    y = Sq.apply(h)
    h.add_(1)  # h is saved by Sq
    return y + h


def _returned_saved(x: torch.Tensor) -> Any:
    h = x * 2
    return Sq.apply(h), h


@pytest.mark.parametrize("cache", CACHES)
def test_tensor_a_custom_function_saved_written_in_place_raises_in_backward(
    cache: str | None,
) -> None:
    def outside(f: Callable[..., Any]) -> Callable[[torch.Tensor], Any]:
        def run(x: torch.Tensor) -> Any:
            y, h = f(x)
            with torch.no_grad():
                h.add_(1)
            y.sum().backward()
            return x.grad

        return run

    for f, run in (
        (_written_inside, lambda f: lambda x: f(x).sum().backward()),
        (_returned_saved, outside),
    ):
        jf = _jit(f, cache)
        for _ in range(3):
            x1 = torch.randn(3, requires_grad=True)
            x2 = x1.detach().clone().requires_grad_()
            assert _outcome(lambda: run(f)(x1)) == "RuntimeError"
            assert _outcome(lambda: run(jf)(x2)) == "RuntimeError"


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [Sq, SqOnce], ids=["plain", "once_differentiable"])
def test_double_backward_through_a_custom_function(fn: Any, cache: str | None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return fn.apply(x).sin().sum()

    jf = _jit(f, cache)

    def penalty(g: Callable[..., Any], x: torch.Tensor) -> Any:
        (grad,) = torch.autograd.grad(g(x), x, create_graph=True)
        grad.pow(2).sum().backward()
        return x.grad

    for _ in range(3):
        x1 = torch.randn(3, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        e, t = _outcome(lambda: penalty(f, x1)), _outcome(lambda: penalty(jf, x2))
        if fn is SqOnce:
            assert e == t == "RuntimeError"
        else:
            torch.testing.assert_close(e, t)
        # a first derivative only: as eager's
        x3 = torch.randn(3, requires_grad=True)
        x4 = x3.detach().clone().requires_grad_()
        f(x3).backward()
        jf(x4).backward()
        torch.testing.assert_close(x3.grad, x4.grad)


class TooMany(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g * 2, g


class NonTensorGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, k: float) -> torch.Tensor:
        return x * k

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g, g


class WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g[:2]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "f",
    [
        lambda x: TooMany.apply(x),
        lambda x: NonTensorGrad.apply(x, 2.0),
        lambda x: WrongShape.apply(x),
    ],
    ids=["too_many", "non_tensor", "wrong_shape"],
)
def test_custom_backward_eager_rejects_raises_in_the_backward(
    f: Callable[..., Any], cache: str | None
) -> None:
    jf = _jit(f, cache)
    for _ in range(2):
        x1 = torch.randn(3, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e, t = f(x1), jf(x2)  # the forward runs, as eager's
        torch.testing.assert_close(e, t)
        assert _outcome(lambda: e.sum().backward()) == "RuntimeError"
        assert _outcome(lambda: t.sum().backward()) == "RuntimeError"


NO_GRAD_VIEWS = {
    "slice": lambda x: x[1:],
    "slice_of_slice": lambda x: x[1:][1:],
    "transpose": lambda x: x.t(),
    "slice_detached": lambda x: x[1:].detach(),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(NO_GRAD_VIEWS))
def test_view_of_an_input_taken_under_no_grad_is_eagers(name: str, cache: str | None) -> None:
    view = NO_GRAD_VIEWS[name]

    def f(x: torch.Tensor) -> Any:
        with torch.no_grad():
            v = view(x)
        return v, x.detach()[1:], x * 2

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(4, 3, requires_grad=True)
        e, t = f(x), jf(x)
        for a, b in zip(e, t, strict=True):
            torch.testing.assert_close(a, b)
            assert (a.requires_grad, a._base is x, a.grad_fn is None) == (
                b.requires_grad,
                b._base is x,
                b.grad_fn is None,
            )
