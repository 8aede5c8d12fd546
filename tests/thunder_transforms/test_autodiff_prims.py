"""Every prim's grad rule against finite differences (float64), through the compiled runner."""

from __future__ import annotations

import pytest
import torch
from autodiff_harness import check_against_eager, check_gradcheck, differentiate, rand

from thunder_ir import OpTag, dtypes, prims
from thunder_transforms.autodiff import VJP_RULES

P = prims

_POSITIVE = (0.5, 2.0)
_UNIT = (-0.9, 0.9)
_DOMAINS = {
    "log": _POSITIVE, "log1p": _POSITIVE, "log2": _POSITIVE, "log10": _POSITIVE,
    "sqrt": _POSITIVE, "rsqrt": _POSITIVE, "reciprocal": _POSITIVE, "lgamma": _POSITIVE,
    "asin": _UNIT, "acos": _UNIT, "atanh": _UNIT, "erfinv": _UNIT, "acosh": (1.2, 3.0),
    "abs": (0.1, 1.0),
}  # fmt: skip
UNARY = [
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "erf", "erfc", "erfinv", "lgamma", "sigmoid", "abs", "neg",
]  # fmt: skip


@pytest.mark.parametrize("name", UNARY)
def test_unary(name: str) -> None:
    low, high = _DOMAINS.get(name, (-1.5, 1.5))
    sym = getattr(P, name)
    check_gradcheck(lambda x: sym(x), rand(2, 3, low=low, high=high))


def test_abs_is_signed() -> None:
    check_gradcheck(lambda x: P.abs(x), rand(2, 3, low=-1.0, high=-0.1))


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign"])
def test_piecewise_constant_gives_zeros(name: str) -> None:
    sym, eager = getattr(P, name), getattr(torch, name)
    check_against_eager(lambda x: sym(x), eager, rand(4, low=-3, high=3), gradcheck=False)


BINARY = ["add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum", "remainder", "fmod",
          "copysign"]  # fmt: skip


@pytest.mark.parametrize("name", BINARY)
def test_binary(name: str) -> None:
    low = 0.5 if name in ("pow", "div", "remainder", "fmod") else -1.5
    sym = getattr(P, name)
    check_gradcheck(
        lambda a, b: sym(a, b), rand(2, 3, low=low, high=2.0), rand(2, 3, low=low, high=2.0, seed=1)
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: P.mul(x, 2.5),
        lambda x: P.sub(1.0, x),
        lambda x: P.div(1.0, x),
        lambda x: P.div(x, 3.0),
        lambda x: P.pow(x, 3.0),
        lambda x: P.pow(x, 0),
        lambda x: P.pow(2.0, x),
        lambda x: P.maximum(x, 0.0),
        lambda x: P.add(x, x),
        lambda x: P.mul(x, x),
    ],
)
def test_binary_with_numbers_and_repeats(fn) -> None:
    check_gradcheck(fn, rand(5, low=0.5, high=2.0))


def test_maximum_ties_split_the_gradient() -> None:
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1.0, 0.0, 4.0], dtype=torch.float64, requires_grad=True)
    check_against_eager(lambda a, b: P.maximum(a, b), torch.maximum, x, y, gradcheck=False)


def test_pow_special_cases_match_eager() -> None:
    a = torch.tensor([0.0, 0.0, 2.0, 1.5], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.0, 2.0, 0.0, -1.0], dtype=torch.float64, requires_grad=True)
    check_against_eager(lambda x, y: P.pow(x, y), torch.pow, a, b, gradcheck=False)


def test_where_and_convert_element_type() -> None:
    check_gradcheck(
        lambda a, b: P.where(P.gt(a, b), a, P.mul(b, 2.0)), rand(3, 4), rand(3, 4, seed=1)
    )
    check_gradcheck(lambda a: P.where(P.gt(a, 0.0), a, 0.0), rand(3, 4))
    check_against_eager(
        lambda a: P.convert_element_type(
            P.exp(P.convert_element_type(a, dtypes.float32)), dtypes.float64
        ),
        lambda a: a.float().exp().double(),
        rand(3, 4),
        gradcheck=False,
    )


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (0, 1, 2), ()])
def test_reductions(name: str, dims) -> None:
    sym = getattr(P, name)
    check_gradcheck(lambda x: sym(x, dims), rand(2, 3, 4, low=0.5, high=1.5))


def test_prod_with_zeros_matches_eager() -> None:
    x = torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
    check_against_eager(
        lambda a: P.prod(a, (1,)), lambda a: a.prod(1), x.requires_grad_(), gradcheck=False
    )


def test_amax_ties_are_shared_like_eager() -> None:
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=torch.float64, requires_grad=True)
    check_against_eager(lambda a: P.amax(a, (1,)), lambda a: a.amax(1), x, gradcheck=False)


@pytest.mark.parametrize("correction", [0, 1])
def test_var_and_var_mean(correction: int) -> None:
    check_gradcheck(lambda x: P.var(x, (1,), correction=correction), rand(3, 4))
    check_gradcheck(lambda x: P.var_mean(x, (0, 2), correction=correction), rand(3, 4, 2))
    # only one of the two outputs used
    check_gradcheck(lambda x: P.var_mean(x, (1,), correction=correction)[1], rand(3, 4))
    check_gradcheck(lambda x: P.var_mean(x, (1,), correction=correction)[0], rand(3, 4))


def test_cumulative() -> None:
    check_gradcheck(lambda x: P.cumsum(x, 1), rand(3, 4))
    check_gradcheck(lambda x: P.cumsum(x, 0), rand(3, 4))
    check_gradcheck(lambda x: P.cumprod(x, 1), rand(3, 4, low=0.5, high=1.5))


def test_shape_prims() -> None:
    check_gradcheck(lambda x: P.broadcast_in_dim(x, (2, 3, 4), (1, 2)), rand(3, 1))
    check_gradcheck(lambda x: P.broadcast_in_dim(x, (5, 3), (1,)), rand(3))
    check_gradcheck(lambda x: P.broadcast_in_dim(x, (2, 3), ()), rand())
    check_gradcheck(lambda x: P.reshape(x, (4, 3)), rand(2, 6))
    check_gradcheck(lambda x: P.squeeze(x, (0, 2)), rand(1, 3, 1))
    check_gradcheck(lambda x: P.unsqueeze(x, 1), rand(3, 2))
    check_gradcheck(lambda x: P.transpose(x, (2, 0, 1)), rand(2, 3, 4))
    check_gradcheck(lambda x: P.flip(x, (0, 1)), rand(2, 3))
    check_gradcheck(lambda x: P.shallow_copy(x), rand(2, 3))
    check_gradcheck(lambda x: P.clone(x), rand(2, 3))
    check_gradcheck(lambda x: P.device_put(x, x.device), rand(2, 3))


def test_slice_and_pad() -> None:
    check_gradcheck(lambda x: P.slice_prim(x, [1, 0], [4, 5], [2, 3]), rand(5, 6))
    check_gradcheck(lambda x: P.slice_prim(x, [0, 2], [5, 2], [1, 1]), rand(5, 6))
    check_gradcheck(lambda x: P.pad(x, 0.5, [(1, 2, 0), (0, 1, 2)]), rand(3, 4))
    check_gradcheck(lambda x: P.pad(x, 0.0, [(-1, 2, 1), (2, -2, 0)]), rand(4, 5))


def test_cat() -> None:
    check_gradcheck(
        lambda a, b, c: P.cat([a, b, c], 1), rand(2, 3), rand(2, 1, seed=1), rand(2, 4, seed=2)
    )
    check_gradcheck(lambda a: P.cat([a, a], 0), rand(2, 3))


def _index(*vals: int) -> torch.Tensor:
    return torch.tensor(vals, dtype=torch.int64)


def test_indexing_prims() -> None:
    idx = _index(0, 3, 3, 1)
    check_gradcheck(lambda x, i: P.take(x, i), rand(2, 3), idx.reshape(2, 2))
    check_gradcheck(lambda x, i: P.index_select(x, 1, i), rand(2, 4), idx)
    check_gradcheck(lambda x, i: P.index_select(x, 0, i), rand(4, 2), idx)
    check_gradcheck(lambda x, i: P.index_select(x, 0, i), rand(4, 2), torch.tensor(2))
    gi = torch.tensor([[0, 2], [1, 1], [2, 0]])
    check_gradcheck(lambda x, i: P.gather(x, 1, i), rand(3, 3), gi)
    check_gradcheck(lambda x, i, s: P.scatter_add(x, 1, i, s), rand(3, 3), gi, rand(3, 2, seed=1))
    check_gradcheck(
        lambda x, i, s: P.scatter_add(x, 0, i, s), rand(3, 3), gi[:2], rand(3, 3, seed=1)
    )


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate: bool) -> None:
    check_gradcheck(
        lambda x, i, v: P.index_put(x, [i], v, accumulate),
        rand(5, 3),
        _index(4, 0, -2),
        rand(3, 3, seed=1),
    )
    check_gradcheck(
        lambda x, i, j, v: P.index_put(x, [i, j], v, accumulate),
        rand(4, 3, 2),
        _index(1, 3),
        _index(2, 0),
        rand(2, 2, seed=1),
    )


@pytest.mark.parametrize(
    "shapes",
    [
        ((3,), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((2, 3), (3, 4)),
        ((5, 2, 3), (3, 4)),
        ((3,), (5, 3, 4)),
        ((5, 1, 2, 3), (4, 3, 2)),
        ((2, 3), (6, 3, 1)),
    ],  # fmt: skip
)
def test_matmul(shapes) -> None:
    a, b = shapes
    check_gradcheck(lambda x, y: P.matmul(x, y), rand(*a), rand(*b, seed=1))


def test_linear() -> None:
    check_gradcheck(
        lambda x, w, b: P.linear(x, w, b), rand(2, 3, 4), rand(5, 4, seed=1), rand(5, seed=2)
    )
    check_gradcheck(lambda x, w: P.linear(x, w, None), rand(4), rand(5, 4, seed=1))
    check_gradcheck(lambda x, w: P.linear(x, w, None), rand(3, 4), rand(4, seed=1))


@pytest.mark.parametrize(
    "config",
    [
        # (input shape, weight shape, stride, padding, dilation, groups)
        ((2, 3, 7), (4, 3, 3), (1,), (0,), (1,), 1),
        ((2, 4, 9), (6, 2, 3), (2,), (1,), (2,), 2),
        ((1, 2, 6, 5), (3, 2, 3, 2), (2, 1), (1, 0), (1, 2), 1),
        ((2, 4, 5, 6), (4, 1, 2, 3), (1, 2), (1, 1), (1, 1), 4),
    ],
)
def test_convolution(config) -> None:
    xs, ws, stride, padding, dilation, groups = config
    bias = rand(ws[0], seed=2)
    check_gradcheck(
        lambda x, w, b: P.convolution(
            x, w, b, stride, padding, dilation, False, (0,) * len(stride), groups
        ),
        rand(*xs),
        rand(*ws, seed=1),
        bias,
    )


@pytest.mark.parametrize(
    "config",
    [
        ((2, 4, 5), (4, 3, 3), (2,), (1,), (1,), (1,), 1),
        ((1, 4, 4, 3), (4, 1, 2, 3), (2, 1), (0, 1), (1, 1), (1, 0), 2),
    ],
)
def test_transposed_convolution(config) -> None:
    xs, ws, stride, padding, dilation, output_padding, groups = config
    check_gradcheck(
        lambda x, w: P.convolution(
            x, w, None, stride, padding, dilation, True, output_padding, groups
        ),
        rand(*xs),
        rand(*ws, seed=1),
    )


def test_embedding_and_copy() -> None:
    check_gradcheck(lambda i, w: P.embedding(i, w), torch.tensor([[0, 2], [2, 4]]), rand(5, 3))
    # copy_ into an intermediate: the source gets the gradient, the overwritten value none
    check_gradcheck(
        lambda s, d: P.mul(P.copy_(P.exp(s), P.mul(d, 2.0)), d), rand(3), rand(3, seed=1)
    )


def test_copy_into_an_input_marks_it_dirty() -> None:
    s, d = rand(3), rand(3, grad=False)
    runner = differentiate(lambda a, b: P.copy_(P.exp(a), b), s, d.clone())
    out = runner(s, d)
    assert out is d and d.requires_grad
    out.sum().backward()
    torch.testing.assert_close(s.grad, s.detach().exp())


def test_every_differentiable_prim_has_a_rule() -> None:
    no_grad = {
        # integer/boolean results or no tensor inputs: nothing to differentiate
        "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right",
        "eq", "ne", "lt", "le", "gt", "ge", "signbit", "isfinite", "isnan", "isinf", "argmax",
        "argmin", "full", "iota", "tensor", "uniform", "normal", "bernoulli", "randint",
        "stop_gradient",
        # complex
        "real", "imag",
        # no torch-free formula (polygamma)
        "digamma",
        # reads an asynchronous collective's result: scheduling, not differentiated
        "wait",
        # numbers and sizes read from tensor data, and checks of them: no gradient (the sized
        # fallback is refused where one would flow)
        "item", "nonzero", "tolist", "check_data", "torch_fallback_sized",
        # a check of values eager's kernels make, of a tensor written in place: no output
        "check_values", "check_in_place_allowed",
    }  # fmt: skip
    skip = {OpTag.PROLOGUE, OpTag.RETURN}
    missing = [
        name
        for name, sym in P.ALL_PRIMS.items()
        if sym not in VJP_RULES and name not in no_grad and not sym.tags & skip
    ]
    assert missing == []
