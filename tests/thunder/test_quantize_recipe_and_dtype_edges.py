"""Edges against eager: the int8 Quantize recipe in float16 (no overflow, either grad mode),
``__class__`` of number proxies, float8 ops torch has no kernel for, complex tensors under a
float16 default dtype, and TransformerEncoder's mask warnings."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import thunder
from thunder.recipes import Quantize

# -- Quantize (int8 weights) ---------------------------------------------------------------------


def _quantized_pair(dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
    model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    model = model.to(dtype)
    with torch.no_grad():
        for layer in (model[0], model[2]):
            layer.weight.mul_(0.01)  # small weights: the int8 values reach 127 all the same
    compiled = thunder.compile(model, recipe=Quantize())  # quantizes ``model`` in place
    return model, compiled


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("grad", [False, True])
def test_quantized_linear_matches_eager_in_both_grad_modes(dtype: torch.dtype, grad: bool) -> None:
    torch.manual_seed(0)
    model, compiled = _quantized_pair(dtype)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype != torch.float32 else {}
    for _ in range(3):
        x = (torch.randn(4, 256) * 100).to(dtype)  # raw int8 products overflow float16
        with torch.set_grad_enabled(grad):
            expected = model(x)
            got = compiled(x)
        assert expected.isfinite().all()
        assert got.isfinite().all()
        torch.testing.assert_close(got, expected, **tol)


def test_quantized_linear_float16_equals_the_dequantizing_reference() -> None:
    torch.manual_seed(1)
    model, compiled = _quantized_pair(torch.float16)
    with torch.no_grad():
        for _ in range(3):
            x = (torch.randn(3, 256) * 50).half()
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


def test_quantized_linear_input_gradient_in_float16() -> None:
    torch.manual_seed(2)
    model, compiled = _quantized_pair(torch.float16)
    for _ in range(2):
        x = (torch.randn(2, 256) * 10).half()
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        model(xe).float().sum().backward()
        compiled(xj).float().sum().backward()
        assert xj.grad is not None and xe.grad is not None
        torch.testing.assert_close(xj.grad, xe.grad, rtol=2e-2, atol=2e-2)


# -- __class__ of numbers ------------------------------------------------------------------------


def _number_classes(y: torch.Tensor, n: int, f: float) -> tuple[Any, ...]:
    v = y.sum().item()
    i = y.argmax().item()
    c = (y.sum() * 1j).item()
    b = (y > 0).any().item()
    return (
        v.__class__ is float,
        i.__class__ is int,
        c.__class__ is complex,
        b.__class__ is bool,
        v.__class__.__name__,
        n.__class__ is int,
        f.__class__ is float,
        (n * 2).__class__.__name__,
        (f + 1).__class__.__name__,
        y.shape[0].__class__ is int,
    )


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_number_class_attribute_is_eagers(cache: str | None) -> None:
    jf = thunder.jit(_number_classes, cache=cache) if cache else thunder.jit(_number_classes)
    for k in range(3):
        y = torch.randn(3 + k)
        assert jf(y, k + 1, k + 0.5) == _number_classes(y, k + 1, k + 0.5)


# -- float8 ops without eager kernels ------------------------------------------------------------

F8 = torch.float8_e4m3fn


def _f8_pair() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 4).to(F8), torch.randn(4, 4).to(F8)


_FLOAT8_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "add": lambda a, b: a * b + a,
    "add_scalar": lambda a, b: a + 1,
    "sub": lambda a, b: a - b,
    "div": lambda a, b: a / b,
    "neg": lambda a, b: -a,
    "sum": lambda a, b: a.sum(),
    "mean": lambda a, b: a.mean(),
    "amax": lambda a, b: a.amax(),
    "gt": lambda a, b: a > b,
    "exp": lambda a, b: a.exp(),
    "sign": lambda a, b: a.sign(),
    "round": lambda a, b: a.round(),
    "relu": lambda a, b: torch.relu(a),
    "clamp": lambda a, b: a.clamp(-1, 1),
    "softmax": lambda a, b: a.softmax(-1),
    "maximum": lambda a, b: torch.maximum(a, b),
    "add_": lambda a, b: a.clone().add_(b),
    "masked_fill": lambda a, b: a.masked_fill(a.float() > 0, 0.0),
    # what torch's CPU kernels do take
    "mul": lambda a, b: a * b,
    "abs": lambda a, b: a.abs(),
    "eq": lambda a, b: a == b,
    "matmul": lambda a, b: a @ b,
    "cat": lambda a, b: torch.cat([a, b]),
    "where": lambda a, b: torch.where(a.float() > 0, a, b),
    "index": lambda a, b: a[torch.tensor([0, 2])],
    "view_reshape": lambda a, b: a.t().reshape(16).view(2, 8),
    "to_float": lambda a, b: a.float() * 2,
    "to_float8": lambda a, b: (a.float() * 2).to(torch.float8_e5m2),
    "copy_": lambda a, b: a.clone().copy_(b),
    "scaled_mm": lambda a, b: torch._scaled_mm(
        a, b.t().contiguous().t(), torch.tensor(1.0), torch.tensor(2.0), out_dtype=torch.float32
    ),
}


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as e:  # (eager's error, compared by type and message)
        return type(e).__name__, str(e).split("\n")[0]


def _as_floats(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.float() if x.dtype.is_floating_point else x
    return x


@pytest.mark.parametrize("name", sorted(_FLOAT8_OPS))
def test_float8_ops_raise_where_eager_has_no_kernel(name: str) -> None:
    fn = _FLOAT8_OPS[name]
    jfn = thunder.jit(fn)
    for seed in range(2):
        torch.manual_seed(seed)
        a, b = _f8_pair()
        expected = _outcome(fn, a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _outcome(jfn, a, b)
        assert got[0] == expected[0], (got, expected)
        if expected[0] == "ok":
            torch.testing.assert_close(_as_floats(got[1]), _as_floats(expected[1]))
        else:
            assert got[1] == expected[1]


def test_float8_error_is_catchable_as_in_eager() -> None:
    def f(a: torch.Tensor) -> torch.Tensor:
        try:
            return a + a
        except NotImplementedError:
            return a.float() * 3

    jf = thunder.jit(f)
    for _ in range(2):
        a = torch.randn(5).to(F8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(jf(a), f(a))


def test_float8_symbolic_shapes_raise_as_eager() -> None:
    jf = thunder.jit(lambda a: a.sum(0), cache="symbolic values")
    for n in (3, 4, 5):
        a = torch.randn(n, 2).to(F8)
        with pytest.raises(NotImplementedError, match="not implemented for 'Float8_e4m3fn'"):
            a.sum(0)
        with pytest.raises(NotImplementedError, match="not implemented for 'Float8_e4m3fn'"):
            jf(a)


# -- complex under a float16 default dtype -------------------------------------------------------


@pytest.fixture
def default_dtype() -> Iterator[Callable[[torch.dtype], None]]:
    before = torch.get_default_dtype()
    yield torch.set_default_dtype
    torch.set_default_dtype(before)


_COMPLEX_DEFAULT_OPS: dict[str, Callable[[torch.Tensor], Any]] = {
    "tensor": lambda x: torch.tensor(2.5j),
    "tensor_list": lambda x: torch.tensor([1j, 2]),
    "as_tensor": lambda x: torch.as_tensor(1j),
    "full": lambda x: torch.full((2,), 1j),
    "long_mul": lambda x: x.long() * 1j,
    "bool_add": lambda x: x.bool().add(1j),
    "float_mul": lambda x: x.float() * 1j,
    "half_mul": lambda x: x.half() * 1j,
    "long_with_complex_tensor": lambda x: x.long() * torch.tensor(1j, dtype=torch.complex64),
}


@pytest.mark.parametrize("default", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", sorted(_COMPLEX_DEFAULT_OPS))
def test_complex_dtype_follows_the_default_dtype(
    default_dtype: Callable[[torch.dtype], None], default: torch.dtype, name: str
) -> None:
    fn = _COMPLEX_DEFAULT_OPS[name]
    jfn = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3, dtype=torch.float32)
        default_dtype(default)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = _outcome(fn, x)
                got = _outcome(jfn, x)
        finally:
            default_dtype(torch.float32)
        assert got[0] == expected[0], (got, expected)
        if expected[0] == "ok":
            assert got[1].dtype == expected[1].dtype
            torch.testing.assert_close(got[1], expected[1])


# -- TransformerEncoder's mask warnings ----------------------------------------------------------


def _mismatch_warnings(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(*args, **kwargs)
    return sum("mismatched" in str(w.message) for w in caught)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("float_mask", [True, False])
def test_transformer_encoder_warns_as_often_as_eager(training: bool, float_mask: bool) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0)
    encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    encoder.train(training)
    jencoder = thunder.jit(encoder)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    if not float_mask:
        mask = mask.isinf()
    for _ in range(3):
        x = torch.randn(2, 4, 8)
        padding = torch.zeros(2, 4, dtype=torch.bool)
        padding[0, -1] = True
        expected = _mismatch_warnings(encoder, x, mask=mask, src_key_padding_mask=padding)
        got = _mismatch_warnings(jencoder, x, mask=mask, src_key_padding_mask=padding)
        assert got == expected
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(
                jencoder(x, mask=mask, src_key_padding_mask=padding),
                encoder(x, mask=mask, src_key_padding_mask=padding),
            )


def test_transformer_encoder_nested_path_warns_as_eager() -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    jencoder = thunder.jit(encoder)
    for _ in range(3):
        x = torch.randn(2, 5, 8)
        padding = torch.zeros(2, 5)  # a float padding mask: canonicalized, no mismatch warning
        padding[1, -2:] = float("-inf")
        with torch.no_grad():
            expected = _mismatch_warnings(encoder, x, src_key_padding_mask=padding)
            got = _mismatch_warnings(jencoder, x, src_key_padding_mask=padding)
            assert got == expected
            out = jencoder(x, src_key_padding_mask=padding)
            ref = encoder(x, src_key_padding_mask=padding)
            if ref.is_nested:
                ref = ref.to_padded_tensor(0.0, out.shape)
            torch.testing.assert_close(out, ref)
